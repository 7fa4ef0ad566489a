//! How a request to an app failed ([`UpstreamError`]), whichever way it went.

use std::time::Duration;

use host_abi::jsonrpc;
use rmcp::service::ServiceError;
use serde_json::{json, Value};

#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("{0}")]
    Connect(String),
    #[error("request timed out after {0:?}")]
    Timeout(Duration),
    #[error("the app returned an error: {message} (code {code})")]
    Remote { code: i32, message: String, data: Option<Value> },
    #[error("connection to the app lost: {0}")]
    Transport(String),
    #[error("the request was cancelled")]
    Cancelled,
    /// The app does not take what is sent to it (it stopped reading its stdin).
    #[error("{0}")]
    Stalled(String),
    #[error("{0}")]
    Invalid(String),
}

impl UpstreamError {
    pub(crate) fn from_service(err: ServiceError, timeout: Duration) -> UpstreamError {
        match err {
            ServiceError::McpError(e) => {
                UpstreamError::Remote { code: e.code.0, message: e.message.to_string(), data: e.data }
            }
            ServiceError::Timeout { .. } => UpstreamError::Timeout(timeout),
            other => UpstreamError::Transport(other.to_string()),
        }
    }

    /// The JSON-RPC error object a proxy returns for this failure.
    pub fn to_jsonrpc_error(&self) -> Value {
        match self {
            UpstreamError::Remote { code, message, data } => {
                let mut e = json!({ "code": code, "message": message });
                if let Some(d) = data {
                    e["data"] = d.clone();
                }
                e
            }
            UpstreamError::Timeout(_) | UpstreamError::Stalled(_) => json!({ "code": jsonrpc::UPSTREAM_FAILED, "message": self.to_string() }),
            other => json!({ "code": jsonrpc::INTERNAL_ERROR, "message": other.to_string() }),
        }
    }
}

