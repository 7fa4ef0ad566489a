//! `GET /tools`: the native tool registry as the agent sees it, for operators and tests: every
//! provider's tools, which one ResolvePreference chose per name, and the provider-safe names.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use super::GatewayState;

pub async fn list(State(state): State<Arc<GatewayState>>) -> Json<Value> {
    let registry = &state.tools;
    let chosen = registry.model_tools();
    let names = registry.provider_names();
    let all: Vec<Value> = registry
        .all_tools()
        .iter()
        .map(|t| {
            let selected = chosen.iter().any(|c| c.name == t.name && c.provider_id == t.provider_id);
            json!({
                "name": t.name,
                "providerId": t.provider_id,
                "description": t.description,
                "visibleToModel": t.visible_to_model,
                "selected": selected,
                "uiResourceUri": t.ui_resource_uri,
            })
        })
        .collect();
    let model: Vec<Value> = chosen
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "providerName": names.to_provider(&t.name),
                "providerId": t.provider_id,
                "inputSchema": t.input_schema,
                "uiResourceUri": t.ui_resource_uri,
            })
        })
        .collect();
    Json(json!({ "preference": registry.preference_order(), "model": model, "all": all }))
}
