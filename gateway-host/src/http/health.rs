//! Liveness of the gateway itself, and the state of the apps.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::GatewayState;

/// `GET /healthz`: the gateway is up and which module it runs. Never calls into the module's
/// runtime, so it answers even when the module is busy or misbehaving.
pub async fn healthz(State(state): State<Arc<GatewayState>>) -> Json<Value> {
    Json(json!({ "ok": true, "module": state.module_summary }))
}

/// `GET /apps/health`: every app and its state.
pub async fn apps_health(State(state): State<Arc<GatewayState>>) -> Response {
    match state.module.list_apps().await {
        Ok(apps) => {
            let apps: Vec<Value> = apps
                .iter()
                .map(|a| {
                    json!({
                        "id": a.id.as_str(),
                        "name": a.name.as_str(),
                        "version": a.version.as_str(),
                        "state": a.state.as_str(),
                        "transport": a.transport.as_str(),
                        "tools": a.tool_count,
                        "resources": a.resource_count,
                        "resourceTemplates": a.resource_template_count,
                        "prompts": a.prompt_count,
                        "hasUi": a.has_ui,
                        "uiResourceUri": non_empty(a.ui_resource_uri.as_str()),
                        "lastError": non_empty(a.last_error.as_str()),
                        "validationErrors": a.validation_errors.iter().map(|e| e.as_str()).collect::<Vec<_>>(),
                    })
                })
                .collect();
            Json(json!({ "ok": true, "name": "gateway-host", "apps": apps })).into_response()
        }
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({ "ok": false, "error": { "code": e.code.as_str(), "message": e.message.as_str() } })),
        )
            .into_response(),
    }
}

fn non_empty(s: &str) -> Value {
    if s.is_empty() {
        Value::Null
    } else {
        Value::from(s)
    }
}
