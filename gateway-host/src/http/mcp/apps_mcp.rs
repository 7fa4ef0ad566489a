//! `/apps/mcp/{appId}`: an MCP Streamable HTTP endpoint over one app's gateway-managed upstream
//! session (SPEC R32), for the app's UI in a browser and any MCP client.
//!
//! The endpoint is rmcp's Streamable HTTP server — the same machinery that serves `/mcp` — with
//! [`AppsMcp`], a proxy handler, behind it. So framing, headers, status codes, version
//! negotiation, the 2026-07-28 per-request `_meta` rules, the methods each revision removed and
//! `subscriptions/listen` come from the protocol library for both endpoints. What is the
//! gateway's own:
//!
//! - which app: the route puts an [`AppTarget`] (path `appId`, `?sessionId=`) on the HTTP request;
//!   the handler reads it from the request parts rmcp hands it;
//! - the handshake is answered from what the gateway knows of the app (it must be Running);
//! - every other request is forwarded through the module, which enforces the method allowlist,
//!   the `app` visibility of `tools/call` and the `?sessionId=` → `params._meta.sessionId`
//!   injection; results and errors pass as the app sent them;
//! - the relay (`mcp_relay.rs`): what the app sends during a request reaches the client;
//! - every request is counted by app, method and outcome (`gateway_proxied_requests_total`,
//!   see [`Answered`]).
//!
//! 2026-07-28 clients are served statelessly (any replica answers any request). Initialize-era
//! clients get an rmcp session (`Mcp-Session-Id`), which carries their capabilities and the
//! stream on which the app's questions and change notifications reach them.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use host_abi::{jsonrpc, AppRequest, EventKind};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, GetTaskParams, GetTaskResult, UpdateTaskParams, CompleteRequestParams, CompleteResult, DiscoverResult, GetPromptRequestParams,
    GetPromptResponse, Implementation, InitializeRequestParams, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig, ServerNotification,
    SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams, TASKS_EXTENSION_ID,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, SubscriptionContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::{ErrorData, ServerHandler};
use serde::de::DeserializeOwned;
use host_abi::payloads::AppState;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::http::auth::query_param;
use super::answer::{self, typed, Forwarded};
use super::endpoint_config::{server_config, Compatibility};
use super::mcp_relay::{self, Outcome};
use super::mcp_sessions::EndpointSessions;
use super::jsonrpc_gate::Gated;
use super::known_sessions::{KnownSessions, Registration};
use super::mcp_tasks::Tasks;
use super::pass_through::PassThrough;
use super::resource_holds::{ResourceHolds, SessionHolds};
use crate::http::GatewayState;
use crate::metrics::{Metrics, ProxiedOutcome};
use crate::module::host::ModuleHost;
use crate::module::relay::{Claims, Parked};
use crate::tools::ToolRegistry;
use crate::config::gateway_config::GATEWAY_VERSION;

/// Request bodies larger than this are refused with 413 unless `Gateway.MaxRequestBytes` says otherwise.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;

/// The app a request is for, put on the HTTP request by the route.
#[derive(Debug, Clone)]
pub struct AppTarget {
    pub app_id: String,
    /// The browser's `?sessionId=` (the chat session), injected into `tools/call`'s `_meta`.
    pub session_id: String,
}

/// The proxy handler behind `/apps/mcp/{appId}`.
#[derive(Clone)]
pub struct AppsMcp {
    module: Arc<ModuleHost>,
    compatibility: Compatibility,
    /// Calls waiting for a 2026-07-28 client's next round (shared: such clients are stateless).
    parked: Arc<Parked<Forwarded>>,
    /// Tool calls run as MCP Tasks for clients that declared the extension, of tools that declared
    /// task support.
    tasks: Arc<Tasks>,
    /// The tools the module reports, for what each declared of tasks (`execution`).
    tools: Arc<ToolRegistry>,
    /// The resources held at the apps for every client of both endpoints (`resource_holds.rs`).
    holds: Arc<ResourceHolds>,
    /// This session's `resources/subscribe`s, let go when rmcp drops the handler with the session.
    session_holds: Arc<SessionHolds>,
    metrics: Arc<Metrics>,
    /// The initialize-era sessions the short way may serve (`known_sessions.rs`).
    sessions: Arc<KnownSessions>,
    /// This handler's session, once its client said `initialized`: rmcp drops the handler with
    /// the session, which forgets it.
    registration: Arc<OnceLock<Registration>>,
    shutdown: CancellationToken,
}

/// The `/apps/mcp/{appId}` service, over the module the tool registry follows.
pub fn service(
    tools: Arc<ToolRegistry>,
    compatibility: Compatibility,
    max_request_bytes: usize,
    shared_sessions: Option<Arc<dyn rmcp::transport::streamable_http_server::session::SessionStore>>,
    shutdown: CancellationToken,
    metrics: Arc<Metrics>,
    holds: Arc<ResourceHolds>,
    claims: Option<Arc<dyn Claims>>,
) -> (StreamableHttpService<AppsMcp, LocalSessionManager>, PassThrough, EndpointSessions) {
    let endpoint_sessions = EndpointSessions::new(shared_sessions.clone(), claims.is_some(), shutdown.clone());
    let module = tools.module().clone();
    let parked = Arc::new(Parked::claimed_with(claims.clone()));
    let sessions = Arc::new(KnownSessions::default());
    let pass_through = PassThrough {
        module: module.clone(),
        compatibility,
        parked: parked.clone(),
        metrics: metrics.clone(),
        shutdown: shutdown.clone(),
        sessions: sessions.clone(),
        tools: tools.clone(),
    };
    let handler = AppsMcp {
        module,
        compatibility,
        parked,
        tasks: Arc::new(Tasks::claimed_with(claims)),
        tools,
        session_holds: Arc::new(SessionHolds::new(holds.clone())),
        holds,
        metrics,
        sessions,
        registration: Default::default(),
        shutdown: shutdown.clone(),
    };
    let service = StreamableHttpService::new(
        // One handler per session (and per stateless request), each with its own registration
        // and subscriptions.
        move || {
            let session_holds = Arc::new(SessionHolds::new(handler.holds.clone()));
            Ok(AppsMcp { registration: Default::default(), session_holds, ..handler.clone() })
        },
        endpoint_sessions.live.clone(),
        server_config(shutdown, max_request_bytes, shared_sessions),
    );
    (service, pass_through, endpoint_sessions)
}

/// Every method of `/apps/mcp/{appId}`: a plain `tools/call` or `resources/read` goes the short way
/// (`pass_through.rs`); for everything else the target goes on the request and rmcp does the rest.
/// Called past both doors (`front_door.rs` `McpDoor`), so `app_in_path` (the path's segment,
/// `endpoints.rs`) is read after auth.
pub async fn handle(state: &GatewayState, app_in_path: String, mut request: Request) -> Response {
    let app_id = match percent_encoding::percent_decode_str(&app_in_path).decode_utf8() {
        Ok(Cow::Borrowed(_)) => app_in_path,
        Ok(Cow::Owned(decoded)) => decoded,
        Err(_) => {
            let text = format!("Invalid URL: the app id '{app_in_path}' is not UTF-8 once percent-decoded");
            return (axum::http::StatusCode::BAD_REQUEST, text).into_response();
        }
    };
    let session_id = query_param(request.uri().query(), "sessionId").unwrap_or_default();
    if let Some(refusal) = state.apps_mcp_sessions.refusal(request.method(), request.headers()).await {
        return refusal;
    }
    if let Some(Gated(mut message)) = request.extensions_mut().remove::<Gated>() {
        state.pass_through.sessions.cancelled_by(request.headers(), &message);
        if let Some(response) = state.pass_through.request(request.method(), request.headers(), &mut message, &app_id, &session_id).await {
            return response;
        }
        request.extensions_mut().insert(Gated(message));
    }
    request.extensions_mut().insert(AppTarget { app_id, session_id });
    state.apps_mcp.handle(request).await.into_response()
}

pub fn max_request_bytes(settings: &crate::config::settings::Settings) -> usize {
    settings
        .get_str("Gateway:MaxRequestBytes")
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|v| *v > 0)
        .unwrap_or(DEFAULT_MAX_REQUEST_BYTES)
}

fn target_of(extensions: &rmcp::model::Extensions) -> Result<AppTarget, ErrorData> {
    extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<AppTarget>())
        .cloned()
        .ok_or_else(|| ErrorData::internal_error("the request reached /apps/mcp without an app", None))
}

fn app_error(app_id: &str, message: String, state: Value) -> ErrorData {
    ErrorData::new(rmcp::model::ErrorCode(jsonrpc::APP_UNAVAILABLE), message, Some(json!({ "appId": app_id, "state": state })))
}

/// What the gateway knows of a Running app, for answering the handshake itself.
struct AppFacts {
    id: String,
    name: String,
    version: String,
    capabilities: ServerCapabilities,
}

impl AppsMcp {
    /// The app, if Running; else the error naming it and its state.
    async fn running_app(&self, app_id: &str) -> Result<AppFacts, ErrorData> {
        let apps = self.module.list_apps().await.map_err(|e| ErrorData::internal_error(format!("listing apps failed: {e}"), None))?;
        let Some(app) = apps.into_iter().filter(crate::module::host::is_mcp_app).find(|a| a.id.as_str() == app_id) else {
            return Err(app_error(app_id, format!("Unknown McpApp '{app_id}'"), Value::Null));
        };
        if app.state() != AppState::Running {
            let state = app.state().as_str();
            return Err(app_error(app_id, format!("McpApp '{app_id}' is not running (state: {state})"), json!(state)));
        }
        let detail = crate::module::payloads::app_detail(app.detail_json.as_str());
        // listChanged of an estimate: the app's changes are relayed.
        let capabilities = Value::Object(super::multiplex::offered_capabilities(&app, &detail));
        Ok(AppFacts {
            id: app.id.into_string(),
            name: app.name.into_string(),
            version: app.version.into_string(),
            capabilities: serde_json::from_value(capabilities).unwrap_or_default(),
        })
    }

    /// The handshake's answer for an app: its capabilities, named as served through the gateway,
    /// and the tasks extension wherever the gateway offers it ([`Self::get_info`]): the gateway
    /// runs this endpoint's tasks itself, whatever the app declares.
    fn app_info(&self, app: AppFacts) -> ServerConfig {
        let title = format!("{} (through the MCP App gateway {GATEWAY_VERSION})", if app.name.is_empty() { &app.id } else { &app.name });
        let version = if app.version.is_empty() { GATEWAY_VERSION.to_string() } else { app.version.clone() };
        let mut info = self.get_info();
        let tasks = info.capabilities.extensions.as_ref().and_then(|e| e.get(TASKS_EXTENSION_ID)).cloned();
        info.capabilities = app.capabilities;
        if let Some(settings) = tasks {
            info.capabilities.extensions.get_or_insert_with(Default::default).insert(TASKS_EXTENSION_ID.to_string(), settings);
        }
        info.server_info = Implementation::new(format!("gateway-host/{}", app.id), version).with_title(title);
        info.instructions = Some(format!("MCP App '{}' served through the gateway's shared upstream session.", app.id));
        info
    }

    /// Forwards one request to the request's app with the relay, to its end or its next
    /// `input_required` round.
    async fn forward(&self, context: &RequestContext<RoleServer>, method: &str, params: Value) -> Result<Outcome<Value>, ErrorData> {
        let call = self.start(context, method, params)?;
        self.run(call, context, method).await
    }

    /// Starts forwarding one request to the request's app, with the relay.
    fn start(
        &self,
        context: &RequestContext<RoleServer>,
        method: &str,
        params: Value,
    ) -> Result<crate::module::relay::RelayedCall<Forwarded>, ErrorData> {
        let AppTarget { app_id, session_id } = target_of(&context.extensions)?;
        let call_id = self.module.next_call_id();
        let request = AppRequest { session_id: session_id.into(), ..mcp_relay::forward_request(context, call_id, &app_id, method, params) };
        let module = self.module.clone();
        Ok(self.module.relayed(call_id, async move { module.forward(request).await }))
    }

    /// A 2026-07-28 client's retry: the parked call, with its answers, run on.
    async fn resume(
        &self,
        context: &RequestContext<RoleServer>,
        method: &str,
        state: &str,
        answers: Option<rmcp::model::InputResponses>,
    ) -> Result<Outcome<Value>, ErrorData> {
        let call = mcp_relay::resume(&self.parked, &self.module, state, answers).await?;
        self.run(call, context, method).await
    }

    async fn run(
        &self,
        call: crate::module::relay::RelayedCall<Forwarded>,
        context: &RequestContext<RoleServer>,
        method: &str,
    ) -> Result<Outcome<Value>, ErrorData> {
        let app_id = target_of(&context.extensions)?.app_id;
        Ok(match mcp_relay::drive(call, context, &self.module, &self.parked).await? {
            Outcome::Done(forwarded) => Outcome::Done(answer::result_for(mcp_relay::is_modern(context), &app_id, method, forwarded)?),
            Outcome::InputRequired(input) => Outcome::InputRequired(input),
        })
    }

    /// A request that cannot ask the client anything (lists, completion): its result, typed.
    async fn simple<R: DeserializeOwned>(&self, context: &RequestContext<RoleServer>, method: &str, params: impl serde::Serialize) -> Result<R, ErrorData> {
        let params = serde_json::to_value(params).unwrap_or(Value::Null);
        match self.forward(context, method, params).await? {
            Outcome::Done(value) => typed(method, value),
            Outcome::InputRequired(_) => Err(ErrorData::internal_error(format!("the app asked the client something during '{method}'"), None)),
        }
    }
}

/// What an answer of `/apps/mcp/{appId}` counts as in `gateway_proxied_requests_total` (a
/// JSON-RPC error is `error`; most results are `ok`).
trait Answered {
    fn outcome(&self) -> ProxiedOutcome {
        ProxiedOutcome::Ok
    }
}

impl Answered for () {}
impl Answered for Value {}
impl Answered for InitializeResult {}
impl Answered for DiscoverResult {}
impl Answered for ListToolsResult {}
impl Answered for ListResourcesResult {}
impl Answered for ListResourceTemplatesResult {}
impl Answered for ListPromptsResult {}
impl Answered for CompleteResult {}
impl Answered for GetTaskResult {}
impl Answered for rmcp::model::CustomResult {}

impl Answered for CallToolResponse {
    fn outcome(&self) -> ProxiedOutcome {
        match self {
            CallToolResponse::Complete(result) if result.is_error == Some(true) => ProxiedOutcome::ToolError,
            CallToolResponse::InputRequired(_) => ProxiedOutcome::InputRequired,
            _ => ProxiedOutcome::Ok,
        }
    }
}

impl Answered for ReadResourceResponse {
    fn outcome(&self) -> ProxiedOutcome {
        match self {
            ReadResourceResponse::InputRequired(_) => ProxiedOutcome::InputRequired,
            _ => ProxiedOutcome::Ok,
        }
    }
}

impl Answered for GetPromptResponse {
    fn outcome(&self) -> ProxiedOutcome {
        match self {
            GetPromptResponse::InputRequired(_) => ProxiedOutcome::InputRequired,
            _ => ProxiedOutcome::Ok,
        }
    }
}

impl AppsMcp {
    /// Answers one request of `method` with `answer`, counted by its outcome; a request the
    /// client cancelled (its error then says so) or left (the future is dropped) counts as
    /// cancelled.
    async fn counted<T: Answered>(
        &self,
        context: &RequestContext<RoleServer>,
        method: &str,
        answer: impl std::future::Future<Output = Result<T, ErrorData>>,
    ) -> Result<T, ErrorData> {
        let app = target_of(&context.extensions).map(|t| t.app_id).unwrap_or_default();
        let request = self.metrics.proxied_request(&app, method);
        let answer = answer.await;
        request.finish(match &answer {
            Ok(value) => value.outcome(),
            Err(_) if context.ct.is_cancelled() => ProxiedOutcome::Cancelled,
            Err(_) => ProxiedOutcome::Error,
        });
        answer
    }

    /// `tools/call`: the app's result, its `input_required` round, or a task for clients that
    /// declared the tasks extension calling a tool that declared task support ([`Tasks::as_task`]).
    async fn call_tool_counted(&self, request: CallToolRequestParams, context: &RequestContext<RoleServer>) -> Result<CallToolResponse, ErrorData> {
        let outcome = match request.request_state.as_deref() {
            Some(state) => self.resume(context, "tools/call", state, request.input_responses.clone()).await?,
            None => {
                let app_id = target_of(&context.extensions)?.app_id;
                // What the tool declared of tasks: from the registry, which has every tool of the
                // module's apps (a tool it does not have yet declared nothing, its call completes).
                let tool = self.tools.module_tool(&app_id, &request.name);
                let as_task = Tasks::as_task(context, tool.as_ref().and_then(|t| t.extra.get("execution")))?;
                let call = self.start(context, "tools/call", serde_json::to_value(&request).unwrap_or(Value::Null))?;
                if as_task {
                    let finish = move |forwarded| typed("tools/call", answer::result_of(&app_id, "tools/call", forwarded)?);
                    return Ok(CallToolResponse::Task(self.tasks.start(call, self.module.clone(), finish).await));
                }
                self.run(call, context, "tools/call").await?
            }
        };
        Ok(match outcome {
            Outcome::Done(value) => CallToolResponse::Complete(typed("tools/call", value)?),
            Outcome::InputRequired(input) => CallToolResponse::InputRequired(input),
        })
    }

    async fn read_resource_counted(&self, request: ReadResourceRequestParams, context: &RequestContext<RoleServer>) -> Result<ReadResourceResponse, ErrorData> {
        let outcome = match request.request_state.as_deref() {
            Some(state) => self.resume(context, "resources/read", state, request.input_responses.clone()).await?,
            None => self.forward(context, "resources/read", serde_json::to_value(&request).unwrap_or(Value::Null)).await?,
        };
        Ok(match outcome {
            Outcome::Done(value) => ReadResourceResponse::Complete(typed("resources/read", value)?),
            Outcome::InputRequired(input) => ReadResourceResponse::InputRequired(input),
        })
    }

    async fn get_prompt_counted(&self, request: GetPromptRequestParams, context: &RequestContext<RoleServer>) -> Result<GetPromptResponse, ErrorData> {
        let outcome = match request.request_state.as_deref() {
            Some(state) => self.resume(context, "prompts/get", state, request.input_responses.clone()).await?,
            None => self.forward(context, "prompts/get", serde_json::to_value(&request).unwrap_or(Value::Null)).await?,
        };
        Ok(match outcome {
            Outcome::Done(value) => GetPromptResponse::Complete(typed("prompts/get", value)?),
            Outcome::InputRequired(input) => GetPromptResponse::InputRequired(input),
        })
    }

    /// The earlier draft's `tasks/result` and `tasks/list` (not found for 2026-07-28 requests,
    /// see [`Tasks::custom_for`]); other methods rmcp does not know are forwarded as they are
    /// (the module refuses those apps are not asked from a browser).
    async fn custom_request_counted(
        &self,
        request: rmcp::model::CustomRequest,
        context: &RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        if request.method.starts_with("tasks/") {
            return self.tasks.custom_for(request, context).await;
        }
        let method = request.method.as_str();
        match self.forward(context, method, request.params.clone().unwrap_or(Value::Null)).await? {
            Outcome::Done(value) => Ok(rmcp::model::CustomResult(value)),
            Outcome::InputRequired(_) => Err(ErrorData::internal_error(format!("the app asked the client something during '{method}'"), None)),
        }
    }

    /// `subscriptions/listen` (see the handler).
    async fn listen_counted(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        let context = subscription.request_context().clone();
        let app_id = target_of(&context.extensions)?.app_id;
        self.running_app(&app_id).await?;
        let uris = subscription.accepted().resource_subscriptions.clone().unwrap_or_default();
        for uri in &uris {
            if let Err(e) = self.holds.hold(&app_id, uri).await {
                tracing::debug!(app = app_id, "resources/subscribe {uri}: {}", e.message);
            }
        }
        let mut events = self.module.subscribe();
        loop {
            let event = tokio::select! {
                _ = subscription.cancelled() => break,
                event = events.recv() => match event {
                    Ok(event) => event,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                },
            };
            let Some(notification) = app_notification(&event, &app_id) else { continue };
            match subscription.sink().send(notification).await {
                Ok(()) => {}
                // Not in the filter, or not a change notification: not for this stream.
                Err(rmcp::service::SubscriptionSendError::NotificationNotAccepted(_))
                | Err(rmcp::service::SubscriptionSendError::UnsupportedNotification(_)) => {}
                Err(e) => {
                    tracing::debug!(app = app_id, "subscription ended: {e}");
                    break;
                }
            }
        }
        for uri in &uris {
            self.holds.release(&app_id, uri).await;
        }
        Ok(())
    }
}

impl ServerHandler for AppsMcp {
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(self.compatibility.versions())
    }

    /// What rmcp checks requests against: everything an app may offer (the handshake reports the
    /// app's own capabilities).
    fn get_info(&self) -> ServerConfig {
        let latest = self.compatibility.versions().last().cloned().unwrap_or(ProtocolVersion::LATEST_WITH_INITIALIZE);
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_completions()
            .enable_tasks()
            .build();
        ServerConfig::new(capabilities)
            .with_protocol_version(latest)
            .with_server_info(Implementation::new("gateway-host", GATEWAY_VERSION).with_title("MCP App gateway"))
    }

    async fn initialize(&self, request: InitializeRequestParams, context: RequestContext<RoleServer>) -> Result<InitializeResult, ErrorData> {
        self.counted(&context, "initialize", async {
            let app = self.running_app(&target_of(&context.extensions)?.app_id).await?;
            let negotiated = self.negotiate_initialize(&request)?.protocol_version;
            context.peer.set_peer_info(request.clone());
            Ok(self.app_info(app).with_protocol_version(negotiated))
        })
        .await
    }

    async fn discover(&self, context: RequestContext<RoleServer>) -> Result<DiscoverResult, ErrorData> {
        self.counted(&context, "server/discover", async {
            let app = self.running_app(&target_of(&context.extensions)?.app_id).await?;
            Ok(DiscoverResult::from_server_info(self.supported_protocol_versions().into_owned(), self.app_info(app)))
        })
        .await
    }

    async fn ping(&self, context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        self.counted(&context, "ping", async { self.simple::<Value>(&context, "ping", json!({})).await.map(|_| ()) }).await
    }

    async fn list_tools(&self, request: Option<PaginatedRequestParams>, context: RequestContext<RoleServer>) -> Result<ListToolsResult, ErrorData> {
        self.counted(&context, "tools/list", self.simple(&context, "tools/list", request)).await
    }

    async fn call_tool(&self, request: CallToolRequestParams, context: RequestContext<RoleServer>) -> Result<CallToolResponse, ErrorData> {
        self.counted(&context, "tools/call", self.call_tool_counted(request, &context)).await
    }

    async fn list_resources(&self, request: Option<PaginatedRequestParams>, context: RequestContext<RoleServer>) -> Result<ListResourcesResult, ErrorData> {
        self.counted(&context, "resources/list", self.simple(&context, "resources/list", request)).await
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.counted(&context, "resources/templates/list", self.simple(&context, "resources/templates/list", request)).await
    }

    async fn read_resource(&self, request: ReadResourceRequestParams, context: RequestContext<RoleServer>) -> Result<ReadResourceResponse, ErrorData> {
        self.counted(&context, "resources/read", self.read_resource_counted(request, &context)).await
    }

    async fn list_prompts(&self, request: Option<PaginatedRequestParams>, context: RequestContext<RoleServer>) -> Result<ListPromptsResult, ErrorData> {
        self.counted(&context, "prompts/list", self.simple(&context, "prompts/list", request)).await
    }

    async fn get_prompt(&self, request: GetPromptRequestParams, context: RequestContext<RoleServer>) -> Result<GetPromptResponse, ErrorData> {
        self.counted(&context, "prompts/get", self.get_prompt_counted(request, &context)).await
    }

    async fn complete(&self, request: CompleteRequestParams, context: RequestContext<RoleServer>) -> Result<CompleteResult, ErrorData> {
        self.counted(&context, "completion/complete", self.simple(&context, "completion/complete", request)).await
    }

    /// Initialize-era only (rmcp refuses it for 2026-07-28 requests, which use `subscriptions/listen`).
    #[allow(deprecated)]
    async fn subscribe(&self, request: SubscribeRequestParams, context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        self.counted(&context, "resources/subscribe", async {
            let app_id = target_of(&context.extensions)?.app_id;
            self.session_holds.subscribe(&app_id, &request.uri).await
        })
        .await
    }

    #[allow(deprecated)]
    async fn unsubscribe(&self, request: UnsubscribeRequestParams, context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        self.counted(&context, "resources/unsubscribe", async {
            let app_id = target_of(&context.extensions)?.app_id;
            self.session_holds.unsubscribe(&app_id, &request.uri).await;
            Ok(())
        })
        .await
    }

    #[allow(deprecated)]
    /// Initialize-era only: the 2026-07-28 revision removed `logging/setLevel` (the level is a
    /// per-request `_meta` key there), so such a request is refused as an unknown method — rmcp
    /// leaves this one to the handler.
    async fn set_level(&self, request: rmcp::model::SetLevelRequestParams, context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        self.counted(&context, "logging/setLevel", async {
            if mcp_relay::is_modern(&context) {
                return Err(ErrorData::method_not_found::<rmcp::model::SetLevelRequestMethod>());
            }
            self.simple::<Value>(&context, "logging/setLevel", request).await.map(|_| ())
        })
        .await
    }

    async fn get_task(&self, request: GetTaskParams, context: RequestContext<RoleServer>) -> Result<GetTaskResult, ErrorData> {
        self.counted(&context, "tasks/get", async { self.tasks.get(request) }).await
    }

    async fn update_task(&self, request: UpdateTaskParams, context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        self.counted(&context, "tasks/update", async { self.tasks.update(request) }).await
    }

    async fn cancel_task(&self, request: CancelTaskParams, context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        self.counted(&context, "tasks/cancel", async { self.tasks.cancel(request) }).await
    }

    /// The earlier draft's `tasks/result` and `tasks/list` (initialize-era clients only); other
    /// methods rmcp does not know are forwarded as they are (the module refuses those apps are
    /// not asked from a browser).
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        let method = request.method.clone();
        self.counted(&context, &method, self.custom_request_counted(request, &context)).await
    }

    /// Accepts what the client asks for; rmcp narrows it to what this endpoint advertises.
    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    /// 2026-07-28 `subscriptions/listen`: the app's change notifications (tools, prompts,
    /// resources lists; updates of the subscribed resources) on this request's stream, filtered
    /// by rmcp to what was accepted, until the client cancels or the gateway shuts down.
    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        let context = subscription.request_context().clone();
        self.counted(&context, "subscriptions/listen", self.listen_counted(subscription)).await
    }

    /// An initialize-era session gets the app's notifications (list changes, resource updates,
    /// log messages) on its standalone stream for as long as it lasts.
    ///
    /// The session becomes known to the short way here, if its client can be asked nothing.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let Ok(target) = target_of(&context.extensions) else { return };
        if let Some(registration) = self.sessions.register_initialized(&context, &self.shutdown) {
            let _ = self.registration.set(registration);
        }
        let peer = context.peer.clone();
        let mut events = self.module.subscribe();
        tokio::spawn(async move {
            loop {
                let event = match events.recv().await {
                    Ok(event) => event,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                };
                if peer.is_transport_closed() {
                    break;
                }
                if let Some(notification) = app_notification(&event, &target.app_id) {
                    if peer.send_notification(notification).await.is_err() {
                        break;
                    }
                }
            }
        });
    }
}

/// An app's upstream notification, as the MCP notification to pass on.
fn app_notification(event: &crate::module::host::HostEvent, app_id: &str) -> Option<ServerNotification> {
    if event.kind != EventKind::UpstreamNotification || event.app_id != app_id {
        return None;
    }
    let mut message = event.payload.clone();
    if let Some(map) = message.as_object_mut() {
        map.remove("jsonrpc");
    }
    serde_json::from_value(message).ok()
}
