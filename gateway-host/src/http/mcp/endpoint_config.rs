//! How both MCP endpoints are served: the `McpCompatibility` switches (which revisions they
//! speak, `/mcp` with tools only) and rmcp's Streamable HTTP server configuration.

use std::sync::Arc;

use axum::body::{Body, HttpBody as _};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use host_abi::jsonrpc;
use rmcp::model::ProtocolVersion;
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::config::settings::Settings;

/// The compatibility switches that shape `/mcp`.
#[derive(Debug, Clone, Copy)]
pub struct Compatibility {
    pub enable_discovery_first: bool,
    pub force_legacy_initialize: bool,
}

impl Compatibility {
    pub fn from_settings(settings: &Settings) -> Compatibility {
        Compatibility {
            enable_discovery_first: compatibility_switch(settings, "EnableDiscoveryFirst").unwrap_or(true),
            force_legacy_initialize: compatibility_switch(settings, "ForceLegacyInitialize").unwrap_or(false),
        }
    }

    pub fn versions(self) -> &'static [ProtocolVersion] {
        if self.enable_discovery_first && !self.force_legacy_initialize {
            ProtocolVersion::KNOWN_VERSIONS
        } else {
            ProtocolVersion::known_up_to(&ProtocolVersion::LATEST_WITH_INITIALIZE)
        }
    }
}

/// `OpenClaw.McpCompatibility.{key}` (or `McpCompatibility.{key}`), if set.
fn compatibility_switch(settings: &Settings, key: &str) -> Option<bool> {
    settings
        .get_bool(&format!("OpenClaw:McpCompatibility:{key}"))
        .or_else(|| settings.get_bool(&format!("McpCompatibility:{key}")))
}

/// `McpCompatibility.ToolsOnly`: `/mcp` offers the registry's tools and nothing else, as before
/// it multiplexed the apps' resources, prompts and completions (their UI links unrewritten).
/// A value that is no boolean is named in a warning and read as the default.
pub fn tools_only(settings: &Settings) -> bool {
    let switch = compatibility_switch(settings, "ToolsOnly");
    if switch.is_none() {
        let set = settings.get("OpenClaw:McpCompatibility:ToolsOnly").or_else(|| settings.get("McpCompatibility:ToolsOnly"));
        if let Some(value) = set {
            tracing::warn!("McpCompatibility.ToolsOnly is {value}, not true or false; /mcp multiplexes everything its apps offer");
        }
    }
    switch.unwrap_or(false)
}

/// How both MCP endpoints of the gateway are served: initialize-era clients get a session (their
/// capabilities and a stream for the server's requests live in it), 2026-07-28 clients are
/// stateless; plain JSON answers when nothing comes before the result. Host and Origin checks
/// are the gateway's auth layer's job (it knows whether the gateway is open), so rmcp's own
/// loopback-only Host check is turned off.
pub fn server_config(
    shutdown: CancellationToken,
    max_request_bytes: usize,
    shared_sessions: Option<Arc<dyn rmcp::transport::streamable_http_server::session::SessionStore>>,
) -> StreamableHttpServerConfig {
    let mut config = StreamableHttpServerConfig::default();
    // Kept where every replica finds them (mcp_sessions.rs), when the store is shared.
    config.session_store = shared_sessions;
    config
        .with_max_request_body_bytes(max_request_bytes)
        .with_legacy_session_mode(true)
        .with_json_response(true)
        .disable_allowed_hosts()
        .with_cancellation_token(shutdown)
}

/// What rmcp's answers need before they go out (`deleting`: the request was a `DELETE`):
///
/// - a session's `DELETE` is answered 200 as the transport spec has it (the Python SDK warns
///   "Session termination failed: 202" otherwise); rmcp answers 202;
/// - rmcp refuses at the transport (406 without SSE in `Accept`, 405, 400 without a session id,
///   404 for a session it does not know) in plain text without a `Content-Type`, where everything
///   else of the endpoint answers a JSON-RPC error: such an answer becomes one, `id` null and code
///   [`jsonrpc::TRANSPORT_REFUSED`], with rmcp's text as the message (what the official
///   TypeScript SDK's server sends), status and other headers (`Allow`) kept.
pub async fn mend_answer(deleting: bool, mut response: Response) -> Response {
    let status = response.status();
    if deleting && status == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::OK;
        return response;
    }
    if !(status.is_client_error() || status.is_server_error()) || !is_plain_text(response.headers()) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    // rmcp's texts are a line; a body of unknown or larger size is left as it is.
    if body.size_hint().upper().is_none_or(|n| n > PLAIN_TEXT_LIMIT) {
        return Response::from_parts(parts, body);
    }
    let text = match axum::body::to_bytes(body, PLAIN_TEXT_LIMIT as usize).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim().to_string(),
        Err(_) => String::new(),
    };
    let message = if text.is_empty() { status.canonical_reason().unwrap_or("refused").to_string() } else { text };
    let body = json!({ "jsonrpc": jsonrpc::VERSION, "id": null, "error": { "code": jsonrpc::TRANSPORT_REFUSED, "message": message } });
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body.to_string()))
}

/// The most of a plain-text refusal [`mend_answer`] rewrites.
const PLAIN_TEXT_LIMIT: u64 = 4096;

/// No `Content-Type`, or `text/plain`: how rmcp writes its refusals.
fn is_plain_text(headers: &axum::http::HeaderMap) -> bool {
    match headers.get(header::CONTENT_TYPE) {
        None => true,
        Some(v) => v.to_str().is_ok_and(|t| t.trim_start().to_ascii_lowercase().starts_with("text/plain")),
    }
}
