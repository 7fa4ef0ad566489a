//! HTTP routing: one plain async handler per route, sharing [`GatewayState`].
//!
//! Layering, outermost first: CORS (answers preflights before anything else, R37) → auth
//! (R36: credentials, or the DNS-rebinding check when open) → the routes. The auth layer wraps
//! the **whole** router, so every route — including ones merged in later, such as `/mcp` — is
//! protected; the only exemption is `POST /auth/session` (see [`auth::guard`]).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};
use axum::Router;

use crate::module_host::ModuleHost;
use crate::module_loader::ModuleSummary;
use crate::settings::Settings;
use crate::tools::preference::Preference;
use crate::tools::ToolRegistry;
use tokio_util::sync::CancellationToken;

mod apps_mcp;
mod apps_relay;
pub mod auth;
mod cors;
pub mod gateway_mcp;
mod health;
mod tools;

/// What every handler may need.
pub struct GatewayState {
    pub module: Arc<ModuleHost>,
    pub settings: Settings,
    pub module_summary: ModuleSummary,
    pub bound: Vec<SocketAddr>,
    /// Auth rules and browser sessions (R36), fixed at startup.
    pub auth: auth::AuthPolicy,
    /// The native tool registry (R30) the agent and `/mcp` read from.
    pub tools: Arc<ToolRegistry>,
    /// Cancelled when the gateway shuts down (ends `/mcp` sessions and streams).
    pub shutdown: CancellationToken,
    /// Relayed `/apps/mcp` calls in flight and waiting (R42).
    pub apps_calls: apps_relay::AppsMcpCalls,
}

impl GatewayState {
    /// Fails when auth is required but no token is configured: the gateway must not start then.
    pub fn new(
        module: Arc<ModuleHost>,
        settings: Settings,
        module_summary: ModuleSummary,
        bound: Vec<SocketAddr>,
    ) -> Result<Self, auth::AuthConfigError> {
        let auth = auth::AuthPolicy::from_settings(&settings, &bound)?;
        tracing::info!("{}", auth.describe());
        let tools = ToolRegistry::new(module.clone(), Preference::from_config(settings.get("Tools:Preference")));
        Ok(GatewayState {
            module,
            settings,
            module_summary,
            bound,
            auth,
            tools,
            shutdown: CancellationToken::new(),
            apps_calls: Default::default(),
        })
    }
}

pub fn router(state: Arc<GatewayState>) -> Router {
    let body_limit = apps_mcp::max_request_bytes(&state);
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/auth/session", post(auth::create_session))
        .route("/apps/health", get(health::apps_health))
        .route("/tools", get(tools::list))
        .route(
            "/apps/mcp/{app_id}",
            post(apps_mcp::post).get(apps_mcp::get).delete(apps_mcp::delete).layer(DefaultBodyLimit::max(body_limit)),
        )
        .nest_service(
            "/mcp",
            Router::new()
                .fallback_service(gateway_mcp::service(
                    state.tools.clone(),
                    gateway_mcp::Compatibility::from_settings(&state.settings),
                    state.shutdown.child_token(),
                ))
                .layer(axum::middleware::from_fn(gateway_mcp::session_end_status)),
        )
        // Merge further routes above this line so that the layers below cover them.
        .layer(from_fn_with_state(state.clone(), auth::guard))
        .layer(from_fn_with_state(state.clone(), cors::cors))
        .with_state(state)
}
