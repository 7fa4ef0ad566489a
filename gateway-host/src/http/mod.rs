//! HTTP routing: one plain async handler per route, sharing [`GatewayState`].
//!
//! The ways in ([`front_door`]), outermost first: CORS (answers preflights before anything else,
//! R37) → the body's deadline → auth (R36: credentials, or the DNS-rebinding check when open;
//! then the browser rules: changes only as JSON, from the gateway's own or an allowed origin) →
//! the routes; the MCP endpoints then pass the JSON-RPC gate and the replicas' forwarding. The
//! front door wraps the **whole** router, so every route — including ones merged in later, such
//! as `/mcp` — is protected; the only exemptions are `POST /auth/session` and the host page's
//! static files (see [`auth::refusal`]).
//!
//! The sandbox origin app UIs are framed from is a separate router on separate listeners
//! ([`sandbox::router`]): none of the routes here exist on it.
//!
//! A handler's helpers return `Result<_, Response>`: the error is the finished answer (status,
//! JSON body), so `?` ends the request where the problem is found. A `Response` is larger than
//! clippy likes in an `Err`, but it is built only on that path, once per request.
#![allow(clippy::result_large_err)]

use std::net::SocketAddr;
use std::sync::Arc;

use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use axum::Router;

use crate::module::host::ModuleHost;
use crate::config::settings::Settings;
use crate::tools::preference::Preference;
use crate::tools::ToolRegistry;
use tokio_util::sync::CancellationToken;

pub mod admin;
pub(crate) mod chat;
pub mod auth;
pub mod connections;
mod cors;
pub mod front_door;
mod health;
mod host_page;
mod json_error;
pub(crate) mod mcp;
mod metrics;
pub mod replicas;
pub mod sandbox;
mod tools;
mod workspace_mcp;

/// What every handler may need.
pub struct GatewayState {
    pub module: Arc<ModuleHost>,
    pub settings: Settings,
    pub bound: Vec<SocketAddr>,
    /// The sandbox listeners' bound addresses and the origin browsers use for them (R38).
    pub sandbox: sandbox::SandboxSite,
    /// Auth rules and browser sessions (R36), fixed at startup.
    pub auth: auth::AuthPolicy,
    /// The configuration the module's apps come from, and the workspace's MCP servers (R40).
    pub workspace: Arc<crate::config::workspace::Workspace>,
    /// The native tool registry (R30) the agent and `/mcp` read from.
    pub tools: Arc<ToolRegistry>,
    /// Cancelled when the gateway shuts down (ends `/mcp` sessions and streams).
    pub shutdown: CancellationToken,
    /// The chat turns running; a graceful shutdown waits for them.
    pub turns: tokio_util::task::TaskTracker,
    /// The agent's chat and its sessions (R33–R35).
    pub chat: Arc<crate::chat::agent::Chat>,
    /// The `/apps/mcp/{appId}` endpoint (rmcp's Streamable HTTP server with the app proxy).
    pub apps_mcp: StreamableHttpService<mcp::apps_mcp::AppsMcp, LocalSessionManager>,
    /// Its sessions (a `DELETE` of one it does not know is refused).
    pub apps_mcp_sessions: mcp::mcp_sessions::EndpointSessions,
    /// Its short way for plain 2026-07-28 `tools/call` requests.
    pub pass_through: mcp::pass_through::PassThrough,
    /// What `GET /metrics` reports; the registry, the chat and `/apps/mcp` count into it.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Whether the chat session store answers (`/healthz`, the metrics).
    pub store_health: Arc<crate::chat::store_health::StoreHealth>,
    /// The resources held at the apps for the clients of both MCP endpoints.
    resource_holds: Arc<mcp::resource_holds::ResourceHolds>,
    /// This replica among those sharing its session store (`None`: alone, or no cluster secret).
    pub replicas: Option<Arc<replicas::Replicas>>,
    /// The module's apps as the `/apps/events` streams last listed them, shared between them.
    pub app_listings: host_page::SharedListing<Vec<host_abi::AppDescriptor>>,
}

impl GatewayState {
    /// Fails when auth is required but no token is configured, the session store cannot be
    /// opened, or `Gateway.PublicSandboxUrl` is not an origin: the gateway must not start then.
    /// `bound`: the gateway's listeners; `sandbox_bound`: the sandbox's.
    pub fn new(
        module: Arc<ModuleHost>,
        settings: Settings,
        workspace: Arc<crate::config::workspace::Workspace>,
        bound: Vec<SocketAddr>,
        sandbox_bound: Vec<SocketAddr>,
    ) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let sandbox = sandbox::SandboxSite::from_settings(&settings, sandbox_bound)?;
        let auth = auth::AuthPolicy::from_settings(&settings, &bound)?;
        tracing::info!("{}", auth.describe());
        let metrics = Arc::new(crate::metrics::Metrics::new());
        // Before the apps start (serve.rs starts them after this), so every restart is seen.
        metrics.follow_module(&module);
        let tools = ToolRegistry::new(module.clone(), Preference::from_config(settings.get("Tools:Preference")), metrics.clone());
        let store = crate::chat::open_store(&settings)?;
        tracing::info!("Chat sessions: {} store", store.kind());
        let provider = crate::chat::provider::AgentConfig::from_settings(&settings).map(crate::chat::provider::Provider::new);
        if let Err(why) = &provider {
            tracing::info!("Chat agent: {why}");
        }
        let shared_sessions = mcp::mcp_sessions::for_store(&store);
        let replicas = replicas::Replicas::from_settings(&settings, store.clone(), &bound)?;
        let store_health = crate::chat::store_health::StoreHealth::new(store.clone(), metrics.clone());
        let chat = Arc::new(crate::chat::agent::Chat::new(tools.clone(), store, provider, metrics.clone()));
        let shutdown = CancellationToken::new();
        let resource_holds = mcp::resource_holds::ResourceHolds::new(module.clone());
        let (apps_mcp, pass_through, apps_mcp_sessions) = mcp::apps_mcp::service(
            tools.clone(),
            mcp::endpoint_config::Compatibility::from_settings(&settings),
            mcp::apps_mcp::max_request_bytes(&settings),
            shared_sessions,
            shutdown.child_token(),
            metrics.clone(),
            resource_holds.clone(),
            claims(&replicas),
        );
        Ok(GatewayState {
            module,
            settings,
            bound,
            sandbox,
            auth,
            workspace,
            tools,
            shutdown,
            turns: tokio_util::task::TaskTracker::new(),
            chat,
            apps_mcp,
            apps_mcp_sessions,
            pass_through,
            metrics,
            store_health,
            resource_holds,
            replicas,
            app_listings: Default::default(),
        })
    }
}

/// What records the handles this replica holds, when replicas share its clients.
fn claims(replicas: &Option<Arc<replicas::Replicas>>) -> Option<Arc<dyn crate::module::relay::Claims>> {
    replicas.clone().map(|r| r as Arc<dyn crate::module::relay::Claims>)
}

/// What serves the gateway's connections (`connections::serve`): a request for either MCP
/// endpoint goes straight to it (`mcp/endpoints.rs`), every other one to the router.
#[derive(Clone)]
pub struct Routes {
    mcp: Option<Arc<mcp::endpoints::McpEndpoints>>,
    router: Router,
}

impl Routes {
    /// The router alone: the sandbox's listeners serve no MCP endpoint.
    pub fn router_only(router: Router) -> Routes {
        Routes { mcp: None, router }
    }

    /// Serves one request of a connection.
    pub async fn serve(&self, request: hyper::Request<hyper::body::Incoming>) -> Result<axum::response::Response, std::convert::Infallible> {
        use hyper::service::Service;
        if let Some(mcp) = &self.mcp {
            if let Some(endpoint) = mcp::endpoints::Endpoint::of(request.uri().path()) {
                return Ok(mcp.serve(endpoint, request.map(axum::body::Body::new)).await);
            }
        }
        hyper_util::service::TowerToHyperService::new(self.router.clone()).call(request).await
    }
}

pub fn routes(state: Arc<GatewayState>) -> Routes {
    let limit = mcp::jsonrpc_gate::BodyLimit(mcp::apps_mcp::max_request_bytes(&state.settings));
    let door = front_door::FrontDoor { state: state.clone(), limits: connections::ConnectionLimits::from_settings(&state.settings) };
    // The apps' resources, prompts and completions on `/mcp`, unless it offers tools only.
    let mux = (!mcp::endpoint_config::tools_only(&state.settings)).then(|| {
        let mux = mcp::multiplex::Multiplexer::new(state.module.clone(), state.metrics.clone());
        mux.follow_module();
        mux
    });
    let gateway = mcp::gateway_mcp::service(
        state.tools.clone(),
        mux,
        mcp::endpoint_config::Compatibility::from_settings(&state.settings),
        limit.0,
        mcp::mcp_sessions::for_store(state.chat.store()),
        state.shutdown.child_token(),
        state.resource_holds.clone(),
        claims(&state.replicas),
    );
    let mcp = mcp::endpoints::McpEndpoints {
        door: front_door::McpDoor { door: door.clone(), entry: front_door::McpEntry { limit, replicas: state.replicas.clone() } },
        state: state.clone(),
        gateway,
    };
    let router = Router::new()
        .route("/healthz", get(health::healthz))
        .route("/metrics", get(metrics::scrape))
        .route("/auth/session", post(auth::create_session))
        .route("/", get(host_page::to_page))
        .route("/apps", get(host_page::to_page))
        .route("/apps/", get(host_page::page))
        .route("/apps/assets/{name}", get(host_page::asset))
        .route("/apps/events", get(host_page::events))
        .route("/apps/health", get(health::apps_health))
        .route("/tools", get(tools::list))
        .route("/admin/module", post(admin::swap_module))
        .route("/admin/mcpapps/reload", post(admin::reload_apps))
        .route("/admin/mcpapps/install", post(admin::install_app))
        .route("/admin/workspace/mcp", get(workspace_mcp::list).post(workspace_mcp::add))
        .route("/admin/workspace/mcp/{id}", get(workspace_mcp::get).put(workspace_mcp::change).delete(workspace_mcp::remove))
        .route("/admin/mcpapps/{id}/start", post(admin::start_app))
        .route("/admin/mcpapps/{id}/stop", post(admin::stop_app))
        .route("/apps/chat", post(chat::post))
        .route("/apps/chat/{session_id}/input", post(chat::input))
        .route("/apps/sessions", get(chat::list))
        .route("/apps/sessions/{id}", get(chat::get).patch(chat::rename).delete(chat::delete))
        .route("/apps/sessions/{id}/opened", post(chat::opened))
        // JSON answers naming the path or method (the second applies to the routes added
        // before it).
        .fallback(json_error::no_such_route)
        .method_not_allowed_fallback(json_error::method_not_allowed)
        // Everything above: the MCP endpoints pass the same front door as a plain call.
        .layer(from_fn_with_state(door, front_door::front_door))
        .with_state(state);
    Routes { mcp: Some(Arc::new(mcp)), router }
}
