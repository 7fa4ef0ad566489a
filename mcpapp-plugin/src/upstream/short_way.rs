//! The short way of a tool call (issue 15): the call's JSON goes to the app, and the app's answer
//! comes back as JSON, without rmcp's client in between — its service loop is a task a call hops
//! through, and every message is parsed into rmcp's types and written out again (measured: more
//! than a third of the gateway's CPU per proxied call). rmcp still opens the session, answers the
//! app's questions and takes everything else; the short way speaks on that same session, so that
//! callers cannot tell the ways apart.
//!
//! One way per transport: [`HttpRelay`] posts on the session's pooled connection,
//! [`StdioRelay`] writes the line to the app's stdin and takes the answer off its stdout before
//! rmcp reads it. Both take only sessions of an initialize-era revision (a 2026-07-28 request
//! carries rmcp's per-request envelope and headers). Their requests have string ids (`gw-1`, …),
//! so they never meet rmcp's numbers on the same session.

use std::time::Duration;

use rmcp::model::{NumberOrString, ProgressToken, RequestId};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::upstream::http_relay::HttpRelay;
use crate::upstream::relay::CallRelay;
use crate::upstream::stdio_relay::StdioRelay;
use crate::upstream::session::{Notifier, UpstreamError};

/// The short way of one session.
pub enum ShortWay {
    Http(HttpRelay),
    Stdio(StdioRelay),
}

impl ShortWay {
    /// Sends one `tools/call` with `params`, or gives it back for rmcp's way.
    pub async fn tools_call(&self, params: Option<Value>, call: CallContext<'_>) -> Relayed {
        match self {
            ShortWay::Http(http) => http.tools_call(params, call).await,
            ShortWay::Stdio(stdio) => stdio.tools_call(params, call).await,
        }
    }
}

/// What the short way did with a call.
pub enum Relayed {
    /// The call's outcome, exactly as rmcp's way would have had it.
    Done(Result<Value, UpstreamError>),
    /// Not taken (no session to speak for, or the app forgot it): rmcp's way serves it, and
    /// nothing of it reached the app. The params, given back.
    NotTaken(Option<Value>),
}

/// The session's end of a call: where its notifications and questions go, and how a cancel is
/// told to the app.
pub struct CallContext<'a> {
    pub notifier: &'a Notifier,
    pub relay: Option<&'a CallRelay>,
    pub cancel: &'a CancellationToken,
    pub timeout: Duration,
}

/// The JSON-RPC request of a `tools/call` under the short way's `id`. As rmcp does, a call whose
/// client takes part in the relay carries a progress token of the gateway's (the id itself), which
/// the relay maps back to the caller's.
pub fn tools_call_request(id: &str, params: Option<Value>, relay: Option<&CallRelay>) -> Value {
    let mut params = params.unwrap_or_else(|| json!({}));
    if let (Some(relay), Value::Object(map)) = (relay, &mut params) {
        let meta = map.entry("_meta").or_insert_with(|| json!({}));
        if let Value::Object(meta) = meta {
            meta.insert("progressToken".into(), Value::String(id.to_string()));
        }
        relay.sent(RequestId::String(id.into()), ProgressToken(NumberOrString::String(id.into())));
    }
    json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params })
}

/// The `notifications/cancelled` that tells the app a request of the short way ended early.
pub fn cancelled_notification(id: &str, reason: &str) -> Value {
    json!({
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": { "requestId": id, "reason": reason },
    })
}

/// Whether `message` is the response to the request `id` (not a request of the app's that happens
/// to carry the same id).
pub fn is_response_to(message: &Value, id: &str) -> bool {
    message.get("id").and_then(Value::as_str) == Some(id) && message.get("method").is_none()
}

/// A response's outcome: its result, or its error as rmcp's way reports one.
pub fn response_outcome(mut message: Value) -> Result<Value, UpstreamError> {
    if let Some(result) = message.get_mut("result") {
        return Ok(result.take());
    }
    let error = message.get("error").cloned().unwrap_or(Value::Null);
    Err(UpstreamError::Remote {
        code: error.get("code").and_then(Value::as_i64).unwrap_or(0) as i32,
        message: error.get("message").and_then(Value::as_str).unwrap_or_default().to_string(),
        data: error.get("data").cloned(),
    })
}
