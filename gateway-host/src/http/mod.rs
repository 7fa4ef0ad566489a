//! HTTP routing: one plain async handler per route, sharing [`GatewayState`].

use std::net::SocketAddr;
use std::sync::Arc;

use axum::routing::get;
use axum::Router;

use crate::module_host::ModuleHost;
use crate::module_loader::ModuleSummary;
use crate::settings::Settings;

mod health;

/// What every handler may need.
pub struct GatewayState {
    pub module: Arc<ModuleHost>,
    pub settings: Settings,
    pub module_summary: ModuleSummary,
    pub bound: Vec<SocketAddr>,
}

impl GatewayState {
    pub fn new(module: Arc<ModuleHost>, settings: Settings, module_summary: ModuleSummary, bound: Vec<SocketAddr>) -> Self {
        GatewayState { module, settings, module_summary, bound }
    }
}

pub fn router(state: Arc<GatewayState>) -> Router {
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/apps/health", get(health::apps_health))
        .with_state(state)
}
