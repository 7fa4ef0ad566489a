//! `/mcp`: the gateway as an MCP server (SPEC R39), offering the registry's model-visible tools
//! to external MCP clients over Streamable HTTP.
//!
//! Protocol posture (`OpenClaw.McpCompatibility`):
//! - `EnableDiscoveryFirst` (default true): the 2026-07-28 revision is offered, so discover-first
//!   clients get `server/discover` and stateless requests; initialize-first clients (2025-11-25 and
//!   older) keep working beside them. False: only initialize-era revisions are offered.
//! - `ForceLegacyInitialize`: the gateway speaks only initialize-era revisions, here and towards
//!   apps (the module reads the same switch for its upstream connections).
//! - Initialize-era clients get a session (`Mcp-Session-Id`), so `notifications/tools/list_changed`
//!   reaches them on their stream whenever the registry's model-visible list changes.

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::settings::Settings;
use crate::tools::ToolRegistry;

/// The compatibility switches that shape `/mcp`.
#[derive(Debug, Clone, Copy)]
pub struct Compatibility {
    pub enable_discovery_first: bool,
    pub force_legacy_initialize: bool,
}

impl Compatibility {
    pub fn from_settings(settings: &Settings) -> Compatibility {
        let read = |key: &str| {
            settings
                .get_bool(&format!("OpenClaw:McpCompatibility:{key}"))
                .or_else(|| settings.get_bool(&format!("McpCompatibility:{key}")))
        };
        Compatibility {
            enable_discovery_first: read("EnableDiscoveryFirst").unwrap_or(true),
            force_legacy_initialize: read("ForceLegacyInitialize").unwrap_or(false),
        }
    }

    fn versions(self) -> &'static [ProtocolVersion] {
        if self.enable_discovery_first && !self.force_legacy_initialize {
            ProtocolVersion::KNOWN_VERSIONS
        } else {
            ProtocolVersion::known_up_to(&ProtocolVersion::LATEST_WITH_INITIALIZE)
        }
    }
}

/// One MCP session of an external client.
#[derive(Clone)]
pub struct GatewayMcp {
    registry: Arc<ToolRegistry>,
    compatibility: Compatibility,
}

impl ServerHandler for GatewayMcp {
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(self.compatibility.versions())
    }

    fn get_info(&self) -> ServerConfig {
        let latest = self.compatibility.versions().last().cloned().unwrap_or(ProtocolVersion::LATEST_WITH_INITIALIZE);
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build())
            .with_protocol_version(latest)
            .with_server_info(
                Implementation::new("openclaw-gateway", env!("CARGO_PKG_VERSION")).with_title("MCP App gateway"),
            )
            .with_instructions("Tools of the MCP Apps and MCP servers hosted by this gateway, plus its own gateway.* tools.")
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.registry.model_tools().into_iter().map(to_mcp_tool).collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        if !self.registry.model_tools().iter().any(|t| t.name == name) {
            return Err(ErrorData::invalid_params(format!("unknown tool '{name}'"), None));
        }
        let arguments = Value::Object(request.arguments.unwrap_or_default()).to_string();
        let result = self.registry.call(&name, &arguments).await;
        let mut out = if result.is_error {
            CallToolResult::error(vec![ContentBlock::text(result.text)])
        } else {
            CallToolResult::success(vec![ContentBlock::text(result.text)])
        };
        out.structured_content = result.structured;
        // The UI this result renders with travels beside it (MCP Apps hosts render it); the
        // structured content of UI-linked tools is already withheld by the bridge.
        if let Some(uri) = result.ui_resource_uri {
            out.meta = serde_json::from_value(serde_json::json!({ "ui": { "resourceUri": uri } })).ok();
        }
        Ok(out.into())
    }

    /// Pushes `notifications/tools/list_changed` to this client for as long as it is connected.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let peer = context.peer.clone();
        let mut changes = self.registry.subscribe();
        tokio::spawn(async move {
            loop {
                match changes.recv().await {
                    Ok(()) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                }
                if peer.is_transport_closed() || peer.notify_tool_list_changed().await.is_err() {
                    break;
                }
            }
        });
    }
}

fn to_mcp_tool(spec: crate::tools::ToolSpec) -> Tool {
    let schema = match spec.input_schema {
        Value::Object(map) => map,
        _ => serde_json::Map::from_iter([("type".to_string(), Value::from("object"))]),
    };
    let mut tool = Tool::new(spec.name, spec.description, Arc::new(schema));
    if let Some(Value::Object(out)) = spec.output_schema {
        tool.output_schema = Some(Arc::new(out));
    }
    if let Value::Object(meta) = spec.meta {
        if !meta.is_empty() {
            tool.meta = serde_json::from_value(Value::Object(meta)).ok();
        }
    }
    tool
}

/// The `/mcp` service. Host and Origin checks are the gateway's auth layer's job (it knows whether
/// the gateway is open), so rmcp's own loopback-only Host check is turned off here.
pub fn service(
    registry: Arc<ToolRegistry>,
    compatibility: Compatibility,
    shutdown: CancellationToken,
) -> StreamableHttpService<GatewayMcp, LocalSessionManager> {
    let handler = GatewayMcp { registry, compatibility };
    StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default()
            .with_legacy_session_mode(true)
            .disable_allowed_hosts()
            .with_cancellation_token(shutdown),
    )
}
