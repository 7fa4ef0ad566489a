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
use std::sync::{Arc, OnceLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    GetTaskParams, GetTaskResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, ServerNotification, SubscriptionFilter, Tool,
    UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, SubscriptionContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::jsonrpc_gate::Gated;
use super::known_sessions::{KnownSessions, Registration};
use super::mcp_relay::{self, Outcome};
use super::pass_through::{self, Message};
use super::mcp_tasks::Tasks;
use crate::relay::{Parked, RelayedCall};
use crate::settings::Settings;
use crate::tools::{ToolRegistry, ToolResult};

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

    pub(super) fn versions(self) -> &'static [ProtocolVersion] {
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
    /// Tool calls waiting for a multi-round-trip (2026-07-28) client's answers, shared by every
    /// session since such clients are stateless.
    parked: Arc<Parked<ToolResult>>,
    /// Tool calls run as MCP Tasks (R43), shared by every session for the same reason.
    tasks: Arc<Tasks>,
    /// The initialize-era sessions the short way may serve (`known_sessions.rs`).
    sessions: Arc<KnownSessions>,
    /// This handler's session, once its client said `initialized` (dropped with the session).
    registration: Arc<OnceLock<Registration>>,
    shutdown: CancellationToken,
}

impl ServerHandler for GatewayMcp {
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(self.compatibility.versions())
    }

    fn get_info(&self) -> ServerConfig {
        let latest = self.compatibility.versions().last().cloned().unwrap_or(ProtocolVersion::LATEST_WITH_INITIALIZE);
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tool_list_changed().enable_tasks().build())
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

    /// A tool call, relayed (R42): the app's progress and log messages reach this client, its
    /// questions (sampling, elicitation, roots) are put to this client — as requests on the
    /// call's stream for initialize-era clients, as `input_required` rounds for 2026-07-28 ones —
    /// and this client's cancel reaches the app.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(state) = request.request_state.as_deref() {
            let call = mcp_relay::resume(&self.parked, self.registry.module(), state, request.input_responses).await?;
            return self.drive(call, &context).await;
        }
        let name = request.name.to_string();
        if self.registry.resolve_now(&name).await.is_none() {
            return Err(ErrorData::invalid_params(format!("unknown tool '{name}'"), None));
        }
        let arguments = Value::Object(request.arguments.unwrap_or_default()).to_string();
        let extra = mcp_relay::relay_extra(&context);
        let meta = match context.meta.get_progress_token() {
            Some(token) => json!({ "progressToken": token }),
            None => Value::Null,
        };
        let call_id = self.registry.module().next_call_id();
        let registry = self.registry.clone();
        let call = self
            .registry
            .module()
            .relayed(call_id, async move { registry.call_with(&name, &arguments, call_id, &meta, &extra).await });
        // A client that declared the tasks extension gets every call as a task it can poll,
        // answer questions of (tasks/update) and cancel (tasks/cancel).
        if Tasks::wanted(&context) {
            let task = self.tasks.start(call, self.registry.module().clone(), |result| Ok(to_call_tool_result(result)));
            return Ok(CallToolResponse::Task(task));
        }
        self.drive(call, &context).await
    }

    async fn get_task(&self, request: GetTaskParams, _context: RequestContext<RoleServer>) -> Result<GetTaskResult, ErrorData> {
        self.tasks.get(request)
    }

    async fn update_task(&self, request: UpdateTaskParams, _context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        self.tasks.update(request)
    }

    async fn cancel_task(&self, request: CancelTaskParams, _context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        self.tasks.cancel(request)
    }

    /// The earlier (2025-11-25) Tasks methods beside the revision's (see `mcp_tasks.rs`).
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        self.tasks.custom(request).await
    }

    /// 2026-07-28 `subscriptions/listen`: the gateway's tools are all it offers, so only their
    /// list can change (rmcp intersects this with what the client asked for).
    fn accepted_subscription_filter(&self, _requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    /// Sends `notifications/tools/list_changed` on the subscription's stream whenever the
    /// registry's model-visible list changes (an app started, stopped, or changed its tools),
    /// until the client cancels or the gateway shuts down.
    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.registry.subscribe();
        loop {
            tokio::select! {
                _ = subscription.cancelled() => return Ok(()),
                change = changes.recv() => match change {
                    Ok(()) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return Ok(()),
                },
            }
            let changed = ServerNotification::ToolListChangedNotification(Default::default());
            if let Err(e) = subscription.sink().send(changed).await {
                tracing::debug!("subscription ended: {e}");
                return Ok(());
            }
        }
    }

    /// Pushes `notifications/tools/list_changed` to this client for as long as it is connected.
    ///
    /// The session becomes known to the short way here, if its client can be asked nothing.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if let Some(registration) = self.sessions.register_initialized(&context, &self.shutdown) {
            let _ = self.registration.set(registration);
        }
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

impl GatewayMcp {
    /// Runs a relayed call to its end (see `mcp_relay.rs`).
    async fn drive(
        &self,
        call: RelayedCall<ToolResult>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(match mcp_relay::drive(call, context, self.registry.module(), &self.parked).await? {
            Outcome::Done(result) => to_call_tool_result(result).into(),
            Outcome::InputRequired(input) => CallToolResponse::InputRequired(input),
        })
    }
}


/// The result as the app sent it — every content block, `structuredContent`, `_meta` — except
/// what R20 withholds from a model (structured content of UI-linked tools), plus the UI the
/// result renders with. Results the gateway made itself (errors before any result, built-ins)
/// are text.
fn to_call_tool_result(result: ToolResult) -> CallToolResult {
    if let Some(mut raw) = result.raw.filter(Value::is_object) {
        if result.ui_resource_uri.is_some() {
            if let Some(map) = raw.as_object_mut() {
                map.remove("structuredContent");
            }
        }
        if let Some(uri) = &result.ui_resource_uri {
            if !raw["_meta"].is_object() {
                raw["_meta"] = json!({});
            }
            if !raw["_meta"]["ui"].is_object() {
                raw["_meta"]["ui"] = json!({});
            }
            raw["_meta"]["ui"]["resourceUri"] = json!(uri);
        }
        // R20 on the model side: a failed call's text starts with `Error:`.
        if raw["isError"] == true {
            let first_text = raw["content"].as_array_mut().and_then(|c| c.iter_mut().find(|b| b["type"] == "text"));
            match first_text {
                Some(block) => {
                    let text = block["text"].as_str().unwrap_or_default();
                    if !text.starts_with("Error:") {
                        block["text"] = json!(format!("Error: {text}"));
                    }
                }
                None => {
                    if let Some(content) = raw["content"].as_array_mut() {
                        content.insert(0, json!({ "type": "text", "text": result.text }));
                    }
                }
            }
        }
        match serde_json::from_value::<CallToolResult>(raw) {
            Ok(mut out) => {
                // 2026-07-28 clients require it; earlier ones ignore it (as for the gateway's own results).
                out.result_type.get_or_insert(rmcp::model::ResultType::COMPLETE);
                return out;
            }
            Err(e) => tracing::warn!("an app's tool result does not parse as an MCP result ({e}); sending its text"),
        }
    }
    let mut out = if result.is_error {
        CallToolResult::error(vec![ContentBlock::text(result.text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(result.text)])
    };
    out.structured_content = result.structured;
    if let Some(uri) = result.ui_resource_uri {
        out.meta = serde_json::from_value(json!({ "ui": { "resourceUri": uri } })).ok();
    }
    out
}

/// The tool as its provider declared it: title, annotations, icons and output schema included.
fn to_mcp_tool(spec: Arc<crate::tools::ToolSpec>) -> Tool {
    let schema = match &spec.input_schema {
        Value::Object(map) => map.clone(),
        _ => serde_json::Map::from_iter([("type".to_string(), Value::from("object"))]),
    };
    let mut declared = match &spec.extra {
        Value::Object(extra) => extra.clone(),
        _ => serde_json::Map::new(),
    };
    declared.insert("name".into(), json!(spec.name));
    declared.insert("description".into(), json!(spec.description));
    declared.insert("inputSchema".into(), Value::Object(schema.clone()));
    if let Some(out @ Value::Object(_)) = &spec.output_schema {
        declared.insert("outputSchema".into(), out.clone());
    }
    if spec.meta.as_object().is_some_and(|m| !m.is_empty()) {
        declared.insert("_meta".into(), spec.meta.clone());
    }
    match serde_json::from_value::<Tool>(Value::Object(declared)) {
        Ok(tool) => tool,
        Err(e) => {
            tracing::warn!(tool = %spec.name, "tool '{}' has declarations MCP cannot carry ({e}); offering it without them", spec.name);
            let mut tool = Tool::new(spec.name.clone(), spec.description.clone(), Arc::new(schema));
            if let Some(Value::Object(out)) = &spec.output_schema {
                tool.output_schema = Some(Arc::new(out.clone()));
            }
            tool.meta = serde_json::from_value(spec.meta.clone()).ok();
            tool
        }
    }
}

/// The `/mcp` service.
pub fn service(
    registry: Arc<ToolRegistry>,
    compatibility: Compatibility,
    max_request_bytes: usize,
    shared_sessions: Option<Arc<dyn rmcp::transport::streamable_http_server::session::SessionStore>>,
    shutdown: CancellationToken,
) -> (StreamableHttpService<GatewayMcp, LocalSessionManager>, ShortWay) {
    let parked = Arc::new(Parked::default());
    let sessions = Arc::new(KnownSessions::default());
    let short = ShortWay { registry: registry.clone(), compatibility, parked: parked.clone(), shutdown: shutdown.clone(), sessions: sessions.clone() };
    let handler = GatewayMcp {
        registry,
        compatibility,
        parked,
        tasks: Arc::new(Tasks::default()),
        sessions,
        registration: Default::default(),
        shutdown: shutdown.clone(),
    };
    // One handler per session (and per stateless request), each with its own registration.
    let factory = move || Ok(GatewayMcp { registration: Default::default(), ..handler.clone() });
    let service = StreamableHttpService::new(factory, Arc::new(LocalSessionManager::default()), server_config(shutdown, max_request_bytes, shared_sessions));
    (service, short)
}

/// Every request of `/mcp`: a plain 2026-07-28 `tools/call` goes the short way
/// (`pass_through.rs`), everything else to rmcp.
pub async fn handle(service: StreamableHttpService<GatewayMcp, LocalSessionManager>, short: ShortWay, request: axum::extract::Request) -> axum::response::Response {
    use axum::response::IntoResponse;
    if let Some(Gated(message)) = request.extensions().get::<Gated>() {
        short.sessions.cancelled_by(request.headers(), message);
        if let Some(response) = short.tools_call(request.method(), request.headers(), message).await {
            return response;
        }
    }
    service.handle(request).await.into_response()
}

/// The short way of `/mcp` (see `pass_through.rs`), sharing the endpoint's parked calls.
#[derive(Clone)]
pub struct ShortWay {
    registry: Arc<ToolRegistry>,
    compatibility: Compatibility,
    parked: Arc<Parked<ToolResult>>,
    shutdown: CancellationToken,
    sessions: Arc<KnownSessions>,
}

impl ShortWay {
    /// What [`GatewayMcp::call_tool`] answers for a plain 2026-07-28 call, without rmcp's
    /// server in between; `None` leaves the request to rmcp.
    async fn tools_call(&self, method: &axum::http::Method, headers: &axum::http::HeaderMap, message: &Value) -> Option<axum::response::Response> {
        let pass_through::Accepted { request, client, tracked } =
            pass_through::accept(self.compatibility, &self.sessions, &self.shutdown, method, headers, message)?;
        let modern = client.modern;
        let (registry, parked) = (self.registry.clone(), self.parked.clone());
        let capabilities = request.capabilities.clone();
        let answer = pass_through::respond(&request.capabilities, client, move |caller| async move {
            let _tracked = tracked;
            let (id, name) = (request.id, request.name);
            if registry.resolve_now(&name).await.is_none() {
                return Message::error(&id, ErrorData::invalid_params(format!("unknown tool '{name}'"), None), modern);
            }
            let arguments = request.params.get("arguments").cloned().unwrap_or_else(|| json!({})).to_string();
            let extra = mcp_relay::relay_extra_for(capabilities, modern);
            let call_id = registry.module().next_call_id();
            let calling = registry.clone();
            let call = registry.module().relayed(call_id, async move { calling.call_with(&name, &arguments, call_id, &Value::Null, &extra).await });
            match mcp_relay::drive(call, &caller, registry.module(), &parked).await {
                Ok(Outcome::Done(result)) => {
                    let mut result = serde_json::to_value(rmcp::model::ServerResult::from(CallToolResponse::from(to_call_tool_result(result)))).unwrap_or_default();
                    if !modern {
                        // rmcp writes no `resultType` for an initialize-era client.
                        if let Some(map) = result.as_object_mut() {
                            map.remove("resultType");
                        }
                    }
                    Message::ok(json!({ "jsonrpc": host_abi::jsonrpc::VERSION, "id": id, "result": result }).to_string())
                }
                Ok(Outcome::InputRequired(input)) => Message::input_required(&id, input),
                // No response for a session's cancelled request (see `Message::none`).
                Err(_) if !modern && caller.cancelled.is_cancelled() => Message::none(),
                Err(e) => Message::error(&id, e, modern),
            }
        });
        Some(answer.await)
    }
}

/// How both MCP endpoints of the gateway are served: initialize-era clients get a session (their
/// capabilities and a stream for the server's requests live in it), 2026-07-28 clients are
/// stateless; plain JSON answers when nothing comes before the result. Host and Origin checks
/// are the gateway's auth layer's job (it knows whether the gateway is open), so rmcp's own
/// loopback-only Host check is turned off.
pub(super) fn server_config(
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
/// "Session termination failed: 202" otherwise); rmcp answers 202, so the status is mended here.
pub async fn session_end_status(request: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    let deleting = request.method() == axum::http::Method::DELETE;
    let mut response = next.run(request).await;
    if deleting && response.status() == axum::http::StatusCode::ACCEPTED {
        *response.status_mut() = axum::http::StatusCode::OK;
    }
    response
}
