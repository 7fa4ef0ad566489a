//! `/mcp`: the gateway as an MCP server (SPEC R39, R46), offering the registry's model-visible
//! tools and everything else its apps offer (resources, templates, prompts, completions,
//! subscriptions, log messages: `multiplex.rs`, named as `namespacing.rs` says) to external MCP
//! clients over Streamable HTTP. A client that renders MCP App UIs (it declares
//! [`UI_EXTENSION`]) lists and calls the app-only tools too, and gets the structured content
//! UI-linked tools return for their UI.
//!
//! Protocol posture (`OpenClaw.McpCompatibility`):
//! - `EnableDiscoveryFirst` (default true): the 2026-07-28 revision is offered, so discover-first
//!   clients get `server/discover` and stateless requests; initialize-first clients (2025-11-25 and
//!   older) keep working beside them. False: only initialize-era revisions are offered.
//! - `ForceLegacyInitialize`: the gateway speaks only initialize-era revisions, here and towards
//!   apps (the module reads the same switch for its upstream connections).
//! - `ToolsOnly` (default false): `/mcp` offers tools only, their UI links as the apps wrote them.
//! - Initialize-era clients get a session (`Mcp-Session-Id`), so `notifications/tools/list_changed`
//!   reaches them on their stream whenever the registry's model-visible list changes (and the
//!   resource and prompt list changes, resource updates and log messages of the apps).

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::{Arc, OnceLock, Weak};

use host_abi::abi_stable::std_types::RSome;
use host_abi::AppRequest;
use parking_lot::Mutex;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities, CompleteRequestParams, CompleteResult,
    ContentBlock, GetPromptRequestParams, GetPromptResponse, GetTaskParams, GetTaskResult, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, ServerNotification, SubscribeRequestParams, SubscriptionFilter, Tool,
    UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer, SubscriptionContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::{ErrorData, ServerHandler};
use serde_json::{json, Map, Value};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::answer::{self, typed, Forwarded};
use super::endpoint_config::{server_config, Compatibility};
use super::jsonrpc_gate::Gated;
use super::mcp_sessions::EndpointSessions;
use super::known_sessions::{KnownSessions, Registration, SessionCall};
use super::mcp_relay::{self, Outcome};
use super::mcp_tasks::Tasks;
use super::multiplex::{Change, List, Multiplexer};
use super::namespacing;
use super::pass_through::{self, Message};
use super::resource_holds::{ResourceHolds, SessionHolds};
use crate::module::relay::{Claims, Parked, RelayedCall};
use crate::tools::{arguments, ToolRegistry, ToolResult, ToolSource, ToolSpec};

/// The MCP Apps extension a client declares in its capabilities' `extensions` to render app UIs
/// (MCP Apps spec): such a client also lists and calls the apps' app-only tools.
pub const UI_EXTENSION: &str = "io.modelcontextprotocol/ui";

/// What one `/mcp` session asked for: the resources it subscribed to (by their `/mcp` URIs, for
/// its updates; held at their apps by `holds`, let go when the session ends) and the lowest log
/// level it wants.
struct SessionState {
    subscribed: Mutex<HashSet<String>>,
    log_level: Mutex<Option<usize>>,
    holds: SessionHolds,
}

impl SessionState {
    fn new(holds: Arc<ResourceHolds>) -> SessionState {
        SessionState { subscribed: Mutex::default(), log_level: Mutex::default(), holds: SessionHolds::new(holds) }
    }
}

/// MCP's log levels, least severe first.
const LOG_LEVELS: [&str; 8] = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

fn log_rank(level: &Value) -> Option<usize> {
    LOG_LEVELS.iter().position(|l| Some(*l) == level.as_str())
}

/// One MCP session of an external client.
#[derive(Clone)]
pub struct GatewayMcp {
    registry: Arc<ToolRegistry>,
    /// The apps' resources, prompts, completions and notifications (`multiplex.rs`); `None` when
    /// `/mcp` offers tools only.
    mux: Option<Arc<Multiplexer>>,
    compatibility: Compatibility,
    /// Tool calls waiting for a multi-round-trip (2026-07-28) client's answers, shared by every
    /// session since such clients are stateless.
    parked: Arc<Parked<ToolResult>>,
    /// The same for reads and prompts forwarded to an app (with the app's key).
    parked_forwards: Arc<Parked<(String, Forwarded)>>,
    /// Tool calls run as MCP Tasks (R43), shared by every session for the same reason.
    tasks: Arc<Tasks>,
    /// The initialize-era sessions the short way may serve (`known_sessions.rs`).
    sessions: Arc<KnownSessions>,
    /// This handler's session, once its client said `initialized` (dropped with the session).
    registration: Arc<OnceLock<Registration>>,
    /// The resources held at the apps for every client of both endpoints.
    holds: Arc<ResourceHolds>,
    session: Arc<SessionState>,
    shutdown: CancellationToken,
}

/// Whether a client declared the MCP Apps extension.
fn is_app_host(capabilities: Option<ClientCapabilities>) -> bool {
    capabilities.and_then(|c| c.extensions).is_some_and(|e| e.contains_key(UI_EXTENSION))
}

/// How a tool's results are shaped for one client of `/mcp`.
#[derive(Debug, Clone, Default)]
struct Shape {
    /// The app whose URIs the result names, rewritten for `/mcp` (`None`: a built-in tool, or
    /// `/mcp` offers tools only and so names the apps' URIs as they are).
    provider: Option<String>,
    /// The client renders app UIs: it gets `structuredContent` of UI-linked tools (which the
    /// MCP Apps spec has hosts give the UI, not the model).
    app_host: bool,
}

impl ServerHandler for GatewayMcp {
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(self.compatibility.versions())
    }

    /// Tools always; resources, prompts, completions and logging when an app offers them.
    fn get_info(&self) -> ServerConfig {
        let latest = self.compatibility.versions().last().cloned().unwrap_or(ProtocolVersion::LATEST_WITH_INITIALIZE);
        let mut capabilities = ServerCapabilities::builder().enable_tools().enable_tool_list_changed().enable_tasks().build();
        if let Some(offered) = self.mux.as_ref().map(|m| m.offered()) {
            let mut more = Map::new();
            if offered.resources {
                more.insert("resources".into(), json!({ "listChanged": true, "subscribe": offered.subscribe }));
            }
            if offered.prompts {
                more.insert("prompts".into(), json!({ "listChanged": true }));
            }
            if offered.completions {
                more.insert("completions".into(), json!({}));
            }
            if offered.logging {
                more.insert("logging".into(), json!({}));
            }
            if let Ok(Value::Object(mut all)) = serde_json::to_value(&capabilities) {
                all.extend(more);
                capabilities = serde_json::from_value(Value::Object(all)).unwrap_or(capabilities);
            }
        }
        let instructions = if self.mux.is_some() {
            "Tools, resources, prompts and completions of the MCP Apps and MCP servers hosted by this gateway, plus its own gateway.* tools."
        } else {
            "Tools of the MCP Apps and MCP servers hosted by this gateway, plus its own gateway.* tools."
        };
        ServerConfig::new(capabilities)
            .with_protocol_version(latest)
            .with_server_info(
                Implementation::new("openclaw-gateway", env!("CARGO_PKG_VERSION")).with_title("MCP App gateway"),
            )
            .with_instructions(instructions)
    }

    /// The model's tools; for an MCP Apps host also the app-only ones, which it hides from its
    /// model and its apps' UIs call.
    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let specs = if is_app_host(context.client_capabilities()) { self.registry.app_host_tools() } else { self.registry.model_tools() };
        let rewrite = self.mux.is_some();
        Ok(ListToolsResult::with_all_items(specs.into_iter().map(|s| to_mcp_tool(s, rewrite)).collect()))
    }

    /// A tool call, relayed (R42): the app's progress and log messages reach this client, its
    /// questions (sampling, elicitation, roots) are put to this client — as requests on the
    /// call's stream for initialize-era clients, as `input_required` rounds for 2026-07-28 ones —
    /// and this client's cancel reaches the app.
    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let app_host = is_app_host(context.client_capabilities());
        if let Some(state) = request.request_state.as_deref() {
            let call = mcp_relay::resume(&self.parked, self.registry.module(), state, request.input_responses).await?;
            return self.drive(call, &context, Shape { provider: None, app_host }).await;
        }
        let name = request.name.to_string();
        let spec = self.tool(&name, app_host).await?;
        let shape = self.shape(&spec, app_host);
        let arguments = arguments::take_typed(&mut request);
        let relay = mcp_relay::relay_opt_in(&context);
        let meta = match context.meta.get_progress_token() {
            Some(token) => json!({ "progressToken": token }),
            None => Value::Null,
        };
        let as_task = Tasks::as_task(&context, spec.extra.get("execution"))?;
        let call_id = self.registry.module().next_call_id();
        let registry = self.registry.clone();
        let call = self
            .registry
            .module()
            .relayed(call_id, async move { registry.call_spec(&spec, arguments, call_id, &meta, Some(relay)).await });
        // A tool that declares task support runs as a task for a client that declared the tasks
        // extension: it polls it, answers its questions (tasks/update) and cancels it.
        if as_task {
            let task = self.tasks.start(call, self.registry.module().clone(), move |result| Ok(to_call_tool_result(result, &shape))).await;
            return Ok(CallToolResponse::Task(task));
        }
        self.drive(call, &context, shape).await
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
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        self.tasks.custom_for(request, &context).await
    }

    async fn list_resources(&self, request: Option<PaginatedRequestParams>, _context: RequestContext<RoleServer>) -> Result<ListResourcesResult, ErrorData> {
        self.list(List::Resources, request).await
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.list(List::ResourceTemplates, request).await
    }

    async fn list_prompts(&self, request: Option<PaginatedRequestParams>, _context: RequestContext<RoleServer>) -> Result<ListPromptsResult, ErrorData> {
        self.list(List::Prompts, request).await
    }

    /// The app's resource, as the app sent it, under the URI `/mcp` gave it.
    async fn read_resource(&self, request: ReadResourceRequestParams, context: RequestContext<RoleServer>) -> Result<ReadResourceResponse, ErrorData> {
        let outcome = match request.request_state.as_deref() {
            Some(state) => self.resume_forward(&context, "resources/read", state, request.input_responses.clone()).await?,
            None => {
                let (provider, original) = self.mux()?.resource_owner(&request.uri).await?;
                let mut params = serde_json::to_value(&request).unwrap_or(Value::Null);
                params["uri"] = json!(original);
                self.forward(&context, &provider.key, "resources/read", params).await?
            }
        };
        Ok(match outcome {
            Outcome::Done(value) => ReadResourceResponse::Complete(typed("resources/read", value)?),
            Outcome::InputRequired(input) => ReadResourceResponse::InputRequired(input),
        })
    }

    async fn get_prompt(&self, request: GetPromptRequestParams, context: RequestContext<RoleServer>) -> Result<GetPromptResponse, ErrorData> {
        let outcome = match request.request_state.as_deref() {
            Some(state) => self.resume_forward(&context, "prompts/get", state, request.input_responses.clone()).await?,
            None => {
                let (provider, own) = self.mux()?.prompt_owner(&request.name).await?;
                let mut params = serde_json::to_value(&request).unwrap_or(Value::Null);
                params["name"] = json!(own);
                self.forward(&context, &provider.key, "prompts/get", params).await?
            }
        };
        Ok(match outcome {
            Outcome::Done(value) => GetPromptResponse::Complete(typed("prompts/get", value)?),
            Outcome::InputRequired(input) => GetPromptResponse::InputRequired(input),
        })
    }

    /// Completion of a prompt's argument (by its `/mcp` name) or a resource template's (by its
    /// `/mcp` URI template), by the app that has it.
    async fn complete(&self, request: CompleteRequestParams, context: RequestContext<RoleServer>) -> Result<CompleteResult, ErrorData> {
        let mux = self.mux()?;
        let mut params = serde_json::to_value(&request).unwrap_or(Value::Null);
        let reference = &params["ref"];
        let provider = if let Some(name) = reference["name"].as_str().filter(|_| reference["type"] == "ref/prompt") {
            let (provider, own) = mux.prompt_owner(name).await?;
            params["ref"]["name"] = json!(own);
            provider
        } else if let Some(uri) = reference["uri"].as_str() {
            let (provider, original) = mux.resource_owner(uri).await?;
            params["ref"]["uri"] = json!(original);
            provider
        } else {
            return Err(ErrorData::invalid_params("completion/complete needs a ref to a prompt (name) or a resource template (uri)", None));
        };
        match self.forward(&context, &provider.key, "completion/complete", params).await? {
            Outcome::Done(value) => typed("completion/complete", value),
            Outcome::InputRequired(_) => Err(ErrorData::internal_error("the app asked the client something during 'completion/complete'", None)),
        }
    }

    /// Initialize-era only (2026-07-28 clients use `subscriptions/listen`): the app is asked
    /// once however many sessions subscribe; the session's updates arrive on its stream.
    #[allow(deprecated)]
    async fn subscribe(&self, request: SubscribeRequestParams, _context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        let (provider, original) = self.mux()?.resource_owner(&request.uri).await?;
        self.session.holds.subscribe(&provider.key, &original).await?;
        self.session.subscribed.lock().insert(request.uri);
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(&self, request: UnsubscribeRequestParams, _context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        let mux = self.mux()?;
        if self.session.subscribed.lock().remove(&request.uri) {
            if let Ok((provider, original)) = mux.resource_owner(&request.uri).await {
                self.session.holds.unsubscribe(&provider.key, &original).await;
            }
        }
        Ok(())
    }

    /// Initialize-era only (the 2026-07-28 revision removed it): every app that logs gets the
    /// level, and this session gets the apps' messages from it up.
    #[allow(deprecated)]
    async fn set_level(&self, request: rmcp::model::SetLevelRequestParams, context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        if mcp_relay::is_modern(&context) {
            return Err(ErrorData::method_not_found::<rmcp::model::SetLevelRequestMethod>());
        }
        let level = serde_json::to_value(request.level).unwrap_or(Value::Null);
        *self.session.log_level.lock() = log_rank(&level);
        self.mux()?.set_level(&level).await
    }

    /// 2026-07-28 `subscriptions/listen`: list changes and resource updates (rmcp intersects
    /// this with what the client asked for and what `get_info` declares).
    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        if self.mux.is_none() {
            return Some(SubscriptionFilter::builder().tools_list_changed().build());
        }
        Some(requested.clone())
    }

    /// Sends the list changes (and updates of the subscribed resources) on the subscription's
    /// stream until the client cancels or the gateway shuts down.
    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        let uris = subscription.accepted().resource_subscriptions.clone().unwrap_or_default();
        let mut held = Vec::new();
        if let Some(mux) = &self.mux {
            for uri in &uris {
                if let Ok((provider, original)) = mux.resource_owner(uri).await {
                    if self.holds.hold(&provider.key, &original).await.is_ok() {
                        held.push((provider.key, original));
                    }
                }
            }
        }
        let mut tools = self.registry.subscribe();
        let mut changes = self.mux.as_ref().map(|m| m.subscribe());
        loop {
            let notification = tokio::select! {
                _ = subscription.cancelled() => break,
                change = tools.recv() => match change {
                    Ok(()) | Err(RecvError::Lagged(_)) => Some(ServerNotification::ToolListChangedNotification(Default::default())),
                    Err(RecvError::Closed) => break,
                },
                change = next_change(&mut changes) => match change {
                    Some(change) => change_notification(change, |_| true, None),
                    None => break,
                },
            };
            let Some(notification) = notification else { continue };
            match subscription.sink().send(notification).await {
                Ok(())
                | Err(rmcp::service::SubscriptionSendError::NotificationNotAccepted(_))
                | Err(rmcp::service::SubscriptionSendError::UnsupportedNotification(_)) => {}
                Err(e) => {
                    tracing::debug!("subscription ended: {e}");
                    break;
                }
            }
        }
        for (key, uri) in held {
            self.holds.release(&key, &uri).await;
        }
        Ok(())
    }

    /// Pushes this session's notifications for as long as it is connected: tool, resource and
    /// prompt list changes, updates of the resources it subscribed to, the apps' log messages
    /// from the level it set.
    ///
    /// The session becomes known to the short way here, if its client can be asked nothing.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if let Some(registration) = self.sessions.register_initialized(&context, &self.shutdown) {
            let _ = self.registration.set(registration);
        }
        let peer = context.peer.clone();
        let mut tools = self.registry.subscribe();
        let mut changes = self.mux.as_ref().map(|m| m.subscribe());
        let session = Arc::downgrade(&self.session);
        tokio::spawn(async move {
            loop {
                let notification = tokio::select! {
                    change = tools.recv() => match change {
                        Ok(()) | Err(RecvError::Lagged(_)) => Some(ServerNotification::ToolListChangedNotification(Default::default())),
                        Err(RecvError::Closed) => break,
                    },
                    change = next_change(&mut changes) => match change {
                        Some(change) => session_notification(&session, change),
                        None => break,
                    },
                };
                if peer.is_transport_closed() || session.strong_count() == 0 {
                    break;
                }
                if let Some(notification) = notification {
                    if send(&peer, notification).await.is_err() {
                        break;
                    }
                }
            }
        });
    }
}

async fn send(peer: &Peer<RoleServer>, notification: ServerNotification) -> Result<(), rmcp::service::ServiceError> {
    peer.send_notification(notification).await
}

/// The next change of the apps (`None` once they end; forever pending without a multiplexer).
async fn next_change(changes: &mut Option<tokio::sync::broadcast::Receiver<Change>>) -> Option<Change> {
    let Some(changes) = changes else { return std::future::pending().await };
    loop {
        match changes.recv().await {
            Ok(change) => return Some(change),
            Err(RecvError::Lagged(_)) => continue,
            Err(RecvError::Closed) => return None,
        }
    }
}

/// A change as the notification one initialize-era session gets, if it is for it.
fn session_notification(session: &Weak<SessionState>, change: Change) -> Option<ServerNotification> {
    let session = session.upgrade()?;
    let level = *session.log_level.lock();
    change_notification(change, |uri| session.subscribed.lock().contains(uri), Some(level))
}

/// A change as its MCP notification: resource updates only for URIs `subscribed`, log messages
/// only from the level (`Some(None)`: a session that set none gets them all; `None`: a
/// subscription stream, which gets none — 2026-07-28 log messages belong to requests).
fn change_notification(change: Change, subscribed: impl Fn(&str) -> bool, level: Option<Option<usize>>) -> Option<ServerNotification> {
    let (method, params) = match change {
        Change::ResourcesListChanged => ("notifications/resources/list_changed", Value::Null),
        Change::PromptsListChanged => ("notifications/prompts/list_changed", Value::Null),
        Change::ResourceUpdated(uri) => {
            if !subscribed(&uri) {
                return None;
            }
            ("notifications/resources/updated", json!({ "uri": uri }))
        }
        Change::Log(params) => {
            let wanted = level?;
            if wanted.is_some_and(|min| log_rank(&params["level"]).is_some_and(|rank| rank < min)) {
                return None;
            }
            ("notifications/message", params)
        }
    };
    let mut message = json!({ "method": method });
    if !params.is_null() {
        message["params"] = params;
    }
    serde_json::from_value(message).ok()
}

impl GatewayMcp {
    fn mux(&self) -> Result<&Arc<Multiplexer>, ErrorData> {
        self.mux.as_ref().ok_or_else(tools_only)
    }

    /// The tool `name` for this client: the model's, or an app-only one for an MCP Apps host.
    async fn tool(&self, name: &str, app_host: bool) -> Result<Arc<ToolSpec>, ErrorData> {
        resolve_tool(&self.registry, name, app_host).await
    }

    fn shape(&self, spec: &ToolSpec, app_host: bool) -> Shape {
        shape_for(spec, app_host, self.mux.is_some())
    }

    /// One page of a multiplexed list, typed.
    async fn list<R: serde::de::DeserializeOwned>(&self, list: List, request: Option<PaginatedRequestParams>) -> Result<R, ErrorData> {
        let cursor = request.and_then(|r| r.cursor);
        let page = self.mux()?.list(list, cursor.as_deref()).await?;
        typed(list.items_key(), page)
    }

    /// Forwards one request to app `key` with the relay, to its end or its next
    /// `input_required` round; the result's URIs named as `/mcp` names them.
    async fn forward(&self, context: &RequestContext<RoleServer>, key: &str, method: &str, params: Value) -> Result<Outcome<Value>, ErrorData> {
        let module = self.registry.module().clone();
        let call_id = module.next_call_id();
        let request = AppRequest { any_provider: true, ..mcp_relay::forward_request(context, call_id, key, method, params) };
        let key = key.to_string();
        let call = self.registry.module().relayed(call_id, async move {
            let forwarded = module.forward(request).await;
            (key, forwarded)
        });
        self.run_forward(call, context, method).await
    }

    /// A 2026-07-28 client's retry of a forwarded read or prompt.
    async fn resume_forward(
        &self,
        context: &RequestContext<RoleServer>,
        method: &str,
        state: &str,
        answers: Option<rmcp::model::InputResponses>,
    ) -> Result<Outcome<Value>, ErrorData> {
        let call = mcp_relay::resume(&self.parked_forwards, self.registry.module(), state, answers).await?;
        self.run_forward(call, context, method).await
    }

    async fn run_forward(
        &self,
        call: RelayedCall<(String, Forwarded)>,
        context: &RequestContext<RoleServer>,
        method: &str,
    ) -> Result<Outcome<Value>, ErrorData> {
        Ok(match mcp_relay::drive(call, context, self.registry.module(), &self.parked_forwards).await? {
            Outcome::Done((key, forwarded)) => {
                let mut result = answer::result_for(mcp_relay::is_modern(context), &key, method, forwarded)?;
                namespacing::rewrite_result_uris(&key, &mut result);
                Outcome::Done(result)
            }
            Outcome::InputRequired(input) => Outcome::InputRequired(input),
        })
    }

    /// Runs a relayed call to its end (see `mcp_relay.rs`).
    async fn drive(
        &self,
        call: RelayedCall<ToolResult>,
        context: &RequestContext<RoleServer>,
        shape: Shape,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(match mcp_relay::drive(call, context, self.registry.module(), &self.parked).await? {
            Outcome::Done(result) => to_call_tool_result(result, &shape).into(),
            Outcome::InputRequired(input) => CallToolResponse::InputRequired(input),
        })
    }
}

/// The tool `name` as a client of `/mcp` may call it: the model's tool (preference applied),
/// or for an MCP Apps host also an app-only tool. A client that is no such host and names an
/// app-only tool is told why it cannot call it.
///
/// An MCP Apps host passes its apps' UIs' calls on as they come, and a UI knows its tools by its
/// app's own names (`refresh_dashboard_data`, not `grocery.refresh_dashboard_data`): for such a
/// host a name no tool has is also looked up among the apps' own names, and used when exactly
/// one app has it (two apps with it: refused, naming their `/mcp` names).
async fn resolve_tool(registry: &ToolRegistry, name: &str, app_host: bool) -> Result<Arc<ToolSpec>, ErrorData> {
    if !app_host {
        if let Some(spec) = registry.resolve_now(name).await {
            return Ok(spec);
        }
    }
    match registry.resolve_for_app_host(name).await {
        // (A model tool here came back between the two lookups, e.g. its app restarted.)
        Some(spec) if app_host || spec.visible_to_model => return Ok(spec),
        Some(_) => {
            return Err(ErrorData::invalid_params(
                format!("tool '{name}' is for app UIs only (_meta.ui.visibility: [\"app\"]): a client that renders them declares the {UI_EXTENSION} extension"),
                None,
            ))
        }
        None => {}
    }
    if app_host {
        let mut own = registry.app_tools_named(name);
        match own.len() {
            1 => return Ok(own.remove(0)),
            0 => {}
            _ => {
                let names: Vec<&str> = own.iter().map(|s| s.name.as_str()).collect();
                return Err(ErrorData::invalid_params(
                    format!("tool '{name}' is the own name of tools of several apps; call one by its /mcp name: {}", names.join(", ")),
                    None,
                ));
            }
        }
    }
    Err(ErrorData::invalid_params(format!("unknown tool '{name}'"), None))
}

fn shape_for(spec: &ToolSpec, app_host: bool, rewrite: bool) -> Shape {
    let provider = match (&spec.source, rewrite) {
        (ToolSource::Module { app_id, .. }, true) => Some(app_id.clone()),
        _ => None,
    };
    Shape { provider, app_host }
}

/// The result as an MCP client of `/mcp` gets it: the app's result with R20's rules for a model
/// applied ([`ToolResult::for_mcp_client`]), its URIs named as `/mcp` names them. Results the
/// gateway made itself (errors before any result, built-ins) are text.
fn to_call_tool_result(mut result: ToolResult, shape: &Shape) -> CallToolResult {
    if let Some(mut raw) = result.for_mcp_client(shape.app_host) {
        if let Some(provider) = &shape.provider {
            namespacing::rewrite_result_uris(provider, &mut raw);
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
        let uri = match &shape.provider {
            Some(provider) => super::namespacing::rewrite_uri(provider, &uri),
            None => uri,
        };
        out.meta = serde_json::from_value(json!({ "ui": { "resourceUri": uri } })).ok();
    }
    out
}

/// The tool as its provider declared it: title, annotations, icons and output schema included;
/// its UI named as `/mcp` names it when `rewrite`.
fn to_mcp_tool(spec: Arc<ToolSpec>, rewrite: bool) -> Tool {
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
    let mut meta = spec.meta.clone();
    if let (true, ToolSource::Module { app_id, .. }) = (rewrite, &spec.source) {
        let mut holder = json!({ "_meta": meta });
        namespacing::rewrite_ui_meta(app_id, &mut holder);
        meta = holder["_meta"].take();
    }
    if meta.as_object().is_some_and(|m| !m.is_empty()) {
        declared.insert("_meta".into(), meta.clone());
    }
    match serde_json::from_value::<Tool>(Value::Object(declared)) {
        Ok(tool) => tool,
        Err(e) => {
            tracing::warn!(tool = %spec.name, "tool '{}' has declarations MCP cannot carry ({e}); offering it without them", spec.name);
            let mut tool = Tool::new(spec.name.clone(), spec.description.clone(), Arc::new(schema));
            if let Some(Value::Object(out)) = &spec.output_schema {
                tool.output_schema = Some(Arc::new(out.clone()));
            }
            tool.meta = serde_json::from_value(meta).ok();
            tool
        }
    }
}

/// What `/mcp` answers a method of the apps' resources and prompts when it offers tools only.
fn tools_only() -> ErrorData {
    ErrorData::new(rmcp::model::ErrorCode::METHOD_NOT_FOUND, "Method not found: /mcp offers tools only (McpCompatibility.ToolsOnly)", None)
}

/// The `/mcp` service.
///
/// `mux`: the apps' resources, prompts and completions; `None` offers tools only
/// ([`tools_only`]).
pub fn service(
    registry: Arc<ToolRegistry>,
    mux: Option<Arc<Multiplexer>>,
    compatibility: Compatibility,
    max_request_bytes: usize,
    shared_sessions: Option<Arc<dyn rmcp::transport::streamable_http_server::session::SessionStore>>,
    shutdown: CancellationToken,
    holds: Arc<ResourceHolds>,
    claims: Option<Arc<dyn Claims>>,
) -> (StreamableHttpService<GatewayMcp, LocalSessionManager>, GatewayPassThrough, EndpointSessions) {
    let endpoint_sessions = EndpointSessions::new(shared_sessions.clone(), claims.is_some(), shutdown.clone());
    let parked = Arc::new(Parked::claimed_with(claims.clone()));
    let parked_forwards = Arc::new(Parked::claimed_with(claims.clone()));
    let sessions = Arc::new(KnownSessions::default());
    let short = GatewayPassThrough {
        registry: registry.clone(),
        mux: mux.clone(),
        compatibility,
        parked: parked.clone(),
        parked_forwards: parked_forwards.clone(),
        shutdown: shutdown.clone(),
        sessions: sessions.clone(),
    };
    let handler = GatewayMcp {
        registry,
        mux,
        compatibility,
        parked,
        parked_forwards,
        tasks: Arc::new(Tasks::claimed_with(claims)),
        sessions,
        registration: Default::default(),
        session: Arc::new(SessionState::new(holds.clone())),
        holds,
        shutdown: shutdown.clone(),
    };
    // One handler per session (and per stateless request), each with its own registration and
    // its own subscriptions.
    let factory = move || {
        let session = Arc::new(SessionState::new(handler.holds.clone()));
        Ok(GatewayMcp { registration: Default::default(), session, ..handler.clone() })
    };
    let service = StreamableHttpService::new(factory, endpoint_sessions.live.clone(), server_config(shutdown, max_request_bytes, shared_sessions));
    (service, short, endpoint_sessions)
}

/// Every request of `/mcp`: a plain `tools/call` or `resources/read` goes the short way
/// (`pass_through.rs`), everything else to rmcp.
pub async fn handle(
    service: &StreamableHttpService<GatewayMcp, LocalSessionManager>,
    short: &GatewayPassThrough,
    sessions: &EndpointSessions,
    mut request: axum::extract::Request,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if let Some(refusal) = sessions.refusal(request.method(), request.headers()).await {
        return refusal;
    }
    if let Some(Gated(mut message)) = request.extensions_mut().remove::<Gated>() {
        short.sessions.cancelled_by(request.headers(), &message);
        if let Some(response) = short.request(request.method(), request.headers(), &mut message).await {
            return response;
        }
        request.extensions_mut().insert(Gated(message));
    }
    service.handle(request).await.into_response()
}

/// The short way of `/mcp` (see `pass_through.rs`), sharing the endpoint's parked calls.
#[derive(Clone)]
pub struct GatewayPassThrough {
    registry: Arc<ToolRegistry>,
    /// The apps' resources, named `/mcp`'s way; `None` when it offers tools only.
    mux: Option<Arc<Multiplexer>>,
    compatibility: Compatibility,
    parked: Arc<Parked<ToolResult>>,
    parked_forwards: Arc<Parked<(String, Forwarded)>>,
    shutdown: CancellationToken,
    sessions: Arc<KnownSessions>,
}

impl GatewayPassThrough {
    /// What [`GatewayMcp::call_tool`] or [`GatewayMcp::read_resource`] answers for a plain
    /// request, without rmcp's server in between; `None` leaves the request to rmcp.
    async fn request(&self, method: &axum::http::Method, headers: &axum::http::HeaderMap, message: &mut Value) -> Option<axum::response::Response> {
        if self.mux.is_none() && message.get("method").is_some_and(|m| m == pass_through::RESOURCES_READ) {
            // Tools only: rmcp's server refuses the method.
            return None;
        }
        let pass_through::Accepted { request, client, tracked } =
            pass_through::accept(self.compatibility, &self.sessions, &self.shutdown, method, headers, message)?;
        if request.method == pass_through::RESOURCES_READ {
            return Some(self.resources_read(request, client, tracked).await);
        }
        let pass_through::Eligible { id, name, mut params, capabilities, .. } = request;
        let modern = client.modern;
        let (registry, parked, rewrite) = (self.registry.clone(), self.parked.clone(), self.mux.is_some());
        let app_host = capabilities.get("extensions").and_then(|e| e.get(UI_EXTENSION)).is_some();
        let relay = mcp_relay::relay_opt_in_for(&capabilities, modern);
        let answer = pass_through::respond(capabilities, client, move |caller| async move {
            let _tracked = tracked;
            let spec = match resolve_tool(&registry, &name, app_host).await {
                Ok(spec) => spec,
                Err(e) => return Message::error(&id, e, modern),
            };
            // Its client declared no tasks: a tool that requires them refuses it, as on rmcp's path.
            if let Err(e) = Tasks::as_task_for(false, spec.extra.get("execution")) {
                return Message::error(&id, e, modern);
            }
            let shape = shape_for(&spec, app_host, rewrite);
            let arguments = arguments::take(&mut params);
            let call_id = registry.module().next_call_id();
            let calling = registry.clone();
            let call = registry.module().relayed(call_id, async move { calling.call_spec(&spec, arguments, call_id, &Value::Null, Some(relay)).await });
            match mcp_relay::drive(call, &caller, registry.module(), &parked).await {
                Ok(Outcome::Done(result)) => {
                    let mut result = to_call_tool_result(result, &shape);
                    if !modern {
                        // rmcp writes no `resultType` for an initialize-era client.
                        result.result_type = None;
                    }
                    Message::ok(answer::response_text(&id, &rmcp::model::ServerResult::from(CallToolResponse::from(result))))
                }
                Ok(Outcome::InputRequired(input)) => Message::input_required(&id, input),
                // No response for a session's cancelled request (see `Message::none`).
                Err(_) if !modern && caller.cancelled.is_cancelled() => Message::none(),
                Err(e) => Message::error(&id, e, modern),
            }
        });
        Some(answer.await)
    }

    /// A read of a resource `/mcp` lists: its app's own URI asked of the app, the answer's URIs
    /// named `/mcp`'s way again ([`answer::read_resource_reply`]).
    async fn resources_read(&self, request: pass_through::Eligible, client: pass_through::Client, tracked: Option<SessionCall>) -> axum::response::Response {
        let pass_through::Eligible { id, name: uri, mut params, capabilities, .. } = request;
        let modern = client.modern;
        let (module, mux, parked) = (self.registry.module().clone(), self.mux.clone(), self.parked_forwards.clone());
        let relay = mcp_relay::relay_opt_in_for(&capabilities, modern);
        pass_through::respond(capabilities, client, move |caller| async move {
            let _tracked = tracked;
            let owner = match &mux {
                Some(mux) => mux.resource_owner(&uri).await,
                None => Err(tools_only()),
            };
            let (provider, original) = match owner {
                Ok(owner) => owner,
                Err(e) => return Message::error(&id, e, modern),
            };
            params.insert("uri".into(), Value::String(original));
            let call_id = module.next_call_id();
            let request = AppRequest { any_provider: true, relay: RSome(relay), ..mcp_relay::app_request(call_id, &provider.key, pass_through::RESOURCES_READ, &params) };
            let forwarding = module.clone();
            let key = provider.key;
            let call = module.relayed(call_id, async move {
                let forwarded = forwarding.forward(request).await;
                (key, forwarded)
            });
            match mcp_relay::drive(call, &caller, &module, &parked).await {
                Ok(Outcome::Done((key, forwarded))) => match answer::read_resource_reply(&key, &id, forwarded, modern, Some(&key)) {
                    Ok(body) => Message::ok(body),
                    Err(e) => Message::error(&id, e, modern),
                },
                Ok(Outcome::InputRequired(input)) => Message::input_required(&id, input),
                Err(_) if !modern && caller.cancelled.is_cancelled() => Message::none(),
                Err(e) => Message::error(&id, e, modern),
            }
        })
        .await
    }
}

