//! How both MCP endpoints are served: the `McpCompatibility` switches (which revisions they
//! speak, `/mcp` with tools only) and rmcp's Streamable HTTP server configuration.

use std::sync::Arc;

use rmcp::model::ProtocolVersion;
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
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

/// A session's `DELETE` is answered 200 as the transport spec has it (the Python SDK warns
/// "Session termination failed: 202" otherwise); rmcp answers 202, so the status is mended here
/// (`deleting`: the request was a `DELETE`).
pub fn session_end_status(deleting: bool, mut response: axum::response::Response) -> axum::response::Response {
    if deleting && response.status() == axum::http::StatusCode::ACCEPTED {
        *response.status_mut() = axum::http::StatusCode::OK;
    }
    response
}
