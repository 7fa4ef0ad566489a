//! Liveness of the gateway itself, and the state of the apps.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use host_abi::payloads::AppState;
use host_abi::{AbiError, AppDescriptor};
use serde_json::{json, Value};

use super::auth::host_part;
use super::GatewayState;

/// `GET /healthz`: the gateway is up and which module it runs. Never calls into the module's
/// runtime, so it answers even when the module is busy or misbehaving.
///
/// `sessions` says whether the chat session store answers (`up`, and the store's error while a
/// shared store does not). The status stays 200 meanwhile: this is the process's liveness, and
/// the replicas share that store, so taking one out would not help; the outage shows here, in
/// the metric `gateway_session_store_up` and in the log. With replicas (`http/replicas/`),
/// `replicas` names this one and counts those whose heartbeat is recorded.
pub async fn healthz(State(state): State<Arc<GatewayState>>) -> Json<Value> {
    let store = state.store_health.check().await;
    let mut health = json!({
        "ok": true,
        "module": state.module.summary(),
        "swaps": state.module.swap_history(),
        "sessions": state.store_health.report(&store),
    });
    if let Some(replicas) = &state.replicas {
        // This replica's id, and how many beat now (null while the store does not answer).
        health["replicas"] = json!({ "replica": replicas.id, "count": replicas.count().await.ok() });
    }
    Json(health)
}

/// `GET /apps/health` (R31): the anchor-compatible summary (`ok`, `name`, `mcp`, `sandbox`) and
/// every app.
///
/// - `mcp`: the `/apps/mcp/{appId}` URL of the first Running app with a UI, else of the first
///   Running app, else null.
/// - `admin`: whether a token is configured, so the `/admin` routes can be used.
/// - `sandbox`: the origin app iframes are rendered on (the sandbox listener,
///   [`super::sandbox::SandboxSite::origin`]: the same value the host page's CSP `frame-src`
///   names, so the page never frames an origin its own policy forbids).
/// - URLs are absolute, built from `Gateway.PublicBaseUrl` when set, else from the `Host` the
///   client used (already checked to be loopback when the gateway is open), else the first bound
///   address. Forwarding headers are never read (R36).
pub async fn apps_health(State(state): State<Arc<GatewayState>>, headers: HeaderMap) -> Response {
    let listing = match app_listing(&state, &headers).await {
        Ok(listing) => listing,
        Err(e) => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(json!({ "ok": false, "error": { "code": e.code.to_string(), "message": e.message.as_str() } })),
            )
                .into_response()
        }
    };
    Json(json!({
        "ok": true,
        "name": "gateway-host",
        "version": crate::config::gateway_config::GATEWAY_VERSION,
        "mcp": listing.featured_mcp,
        "sandbox": state.sandbox.origin(&headers),
        "agent": state.chat.status(),
        // SPEC R53: the admin routes take the token (`POST /admin/mcpapps/install` for the
        // page's "Add app" form); false when no token is configured.
        "admin": state.auth.admin_enabled(),
        "apps": listing.apps,
    }))
    .into_response()
}

/// The MCP Apps as the browser sees them: what `/apps/health` and `/apps/events` both send, so
/// the two can never disagree.
pub struct AppListing {
    /// One entry per MCP App ([`crate::module::host::app_json`] plus its `mcp` URL), in registry
    /// order; standard `Plugins.Mcp` servers are left out (they have no place under `/apps/*`).
    pub apps: Vec<Value>,
    /// The `/apps/mcp/{appId}` URL of the first Running app with a UI, else of the first Running
    /// app.
    pub featured_mcp: Option<String>,
}

/// Builds the [`AppListing`] for a request (its `Host` decides the absolute URLs).
pub async fn app_listing(state: &GatewayState, headers: &HeaderMap) -> Result<AppListing, AbiError> {
    Ok(listing_of(state, headers, &state.module.list_apps().await?))
}

/// The [`AppListing`] of the module's apps `listed`, for a request.
pub fn listing_of(state: &GatewayState, headers: &HeaderMap, listed: &[AppDescriptor]) -> AppListing {
    let apps = crate::module::host::mcp_apps_json(listed);
    let base = base_url(state, headers);
    let mcp_url = |id: &str| format!("{base}/apps/mcp/{}", encode_segment(id));
    let running = |a: &&AppDescriptor| a.state() == AppState::Running;
    let featured = {
        let mut running = apps.iter().map(|(a, _)| *a).filter(running);
        running.clone().find(|a| a.has_ui).or_else(|| running.next())
    };
    let list = apps
        .into_iter()
        .map(|(a, mut entry)| {
            entry["mcp"] = json!(mcp_url(a.id.as_str()));
            entry
        })
        .collect();
    AppListing { apps: list, featured_mcp: featured.map(|a| mcp_url(a.id.as_str())) }
}

/// `http://host:port` without a trailing slash.
fn base_url(state: &GatewayState, headers: &HeaderMap) -> String {
    if let Some(url) = state.settings.get_str("Gateway:PublicBaseUrl") {
        return url.trim_end_matches('/').to_string();
    }
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).filter(|h| valid_authority(h));
    match (host, state.bound.first()) {
        (Some(h), _) => format!("http://{h}"),
        (None, Some(addr)) if addr.ip().is_unspecified() => format!("http://127.0.0.1:{}", addr.port()),
        (None, Some(addr)) => format!("http://{addr}"),
        (None, None) => "http://127.0.0.1".to_string(),
    }
}

/// A Host value safe to echo into a URL (no path, userinfo or spaces).
pub fn valid_authority(h: &str) -> bool {
    !h.is_empty()
        && h.chars().all(|c| c.is_ascii_alphanumeric() || "-.:[]_".contains(c))
        && !host_part(h).is_empty()
}

/// App ids are path-safe already (manifest rules), but encode anything unexpected.
fn encode_segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
