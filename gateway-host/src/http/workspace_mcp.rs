//! `/admin/workspace/mcp` (R40): the workspace's standard MCP servers, listed, added, changed and
//! removed while the gateway serves. Each change is written to the workspace file and reloads
//! that one server (its tools join or leave the registry; `/mcp` clients get
//! `notifications/tools/list_changed`); nothing else restarts. MCP Apps are not managed here.
//! Like every admin route, the gateway token as a Bearer header is needed, on loopback too.
//!
//! - `GET /admin/workspace/mcp`: every server — the configuration file's (read-only) and the
//!   workspace's — with its state.
//! - `POST /admin/workspace/mcp` `{"id": …, "transport": …, …}`: add (201; 409 if the id exists).
//! - `GET|PUT|DELETE /admin/workspace/mcp/{id}`: one server; `PUT` replaces (or adds) it.
//!
//! The rules of a definition (the command allowlist above all, and the module's own rules for a
//! server) are in [`crate::config::workspace`]; they are applied here, before anything is written, so a
//! definition that could never run is a 400 naming its field (`error.field`), not a 201 followed
//! by a Failed server.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::admin::module_failure;
use super::json_error::json_error;
use super::connections;
use super::GatewayState;
use crate::config::workspace::{FieldProblem, ServerDefinition, WorkspaceError};

/// Registry keys of standard servers: `mcp:{id}` (the tool provider id as well).
fn key(id: &str) -> String {
    format!("{}{id}", host_abi::MCP_SERVER_KEY_PREFIX)
}

/// `GET /admin/workspace/mcp`.
pub async fn list(State(state): State<Arc<GatewayState>>, headers: HeaderMap) -> Response {
    if let Some(refusal) = state.auth.admin_refusal(&headers) {
        return refusal;
    }
    let live = live_states(&state).await;
    let servers: Vec<Value> = state
        .workspace
        .list()
        .into_iter()
        .map(|mut entry| {
            let id = entry["id"].as_str().unwrap_or_default().to_string();
            entry["status"] = live.get(&key(&id)).cloned().unwrap_or(Value::Null);
            entry
        })
        .collect();
    Json(json!({ "servers": servers })).into_response()
}

/// `GET /admin/workspace/mcp/{id}`.
pub async fn get(State(state): State<Arc<GatewayState>>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(refusal) = state.auth.admin_refusal(&headers) {
        return refusal;
    }
    match state.workspace.get(&id) {
        Some(definition) => Json(one(&state, &id, &definition, None).await).into_response(),
        None => refusal(&WorkspaceError::Missing(id)),
    }
}

/// `POST /admin/workspace/mcp`: the body is a definition with its `id`.
pub async fn add(State(state): State<Arc<GatewayState>>, headers: HeaderMap, body: Body) -> Response {
    if let Some(refusal) = state.auth.admin_refusal(&headers) {
        return refusal;
    }
    let mut body = match parse(body).await {
        Ok(body) => body,
        Err(response) => return response,
    };
    let Some(id) = body.as_object_mut().and_then(|o| o.remove("id")).and_then(|v| v.as_str().map(String::from)) else {
        return refusal(&FieldProblem { field: "id".into(), message: "the server's id is required (a string)".into() }.into());
    };
    write(&state, &id, body, true).await
}

/// `PUT /admin/workspace/mcp/{id}`: the body is the whole new definition.
pub async fn change(State(state): State<Arc<GatewayState>>, headers: HeaderMap, Path(id): Path<String>, body: Body) -> Response {
    if let Some(refusal) = state.auth.admin_refusal(&headers) {
        return refusal;
    }
    let mut body = match parse(body).await {
        Ok(body) => body,
        Err(response) => return response,
    };
    // An `id` in the body must agree with the path.
    if let Some(named) = body.as_object_mut().and_then(|o| o.remove("id")) {
        if named.as_str() != Some(id.as_str()) {
            let message = format!("the body names {named}, the path {}", Value::from(id.as_str()));
            return refusal(&FieldProblem { field: "id".into(), message }.into());
        }
    }
    write(&state, &id, body, false).await
}

/// `DELETE /admin/workspace/mcp/{id}`.
pub async fn remove(State(state): State<Arc<GatewayState>>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(refusal) = state.auth.admin_refusal(&headers) {
        return refusal;
    }
    match state.workspace.remove(&state.module, &id).await {
        Ok(report) => {
            // The answer comes after the registry (and /mcp's list) shows the change.
            state.tools.refresh().await;
            Json(json!({ "ok": true, "id": id, "reload": report })).into_response()
        }
        Err(e) => refusal(&e),
    }
}

async fn write(state: &GatewayState, id: &str, body: Value, create: bool) -> Response {
    let definition = match ServerDefinition::from_json(&body) {
        Ok(definition) => definition,
        Err(problem) => return refusal(&problem.into()),
    };
    let existed = state.workspace.get(id).is_some();
    match state.workspace.put(&state.module, id, definition.clone(), create).await {
        Ok(report) => {
            state.tools.refresh().await;
            let status = if existed { StatusCode::OK } else { StatusCode::CREATED };
            (status, Json(one(state, id, &definition, Some(report)).await)).into_response()
        }
        Err(e) => refusal(&e),
    }
}

/// A server as the routes answer it: its definition, its live state, and the reload's report.
async fn one(state: &GatewayState, id: &str, definition: &ServerDefinition, reload: Option<host_abi::payloads::ReloadReport>) -> Value {
    let status = live_states(state).await.remove(&key(id)).unwrap_or(Value::Null);
    let mut out = json!({ "ok": true, "id": id, "source": "workspace", "definition": definition, "status": status });
    if let Some(reload) = reload {
        out["reload"] = serde_json::to_value(reload).unwrap_or(Value::Null);
    }
    out
}

/// The module's view of every registry entry, by key, as `/apps/health` shows an app.
async fn live_states(state: &GatewayState) -> std::collections::HashMap<String, Value> {
    match state.module.list_apps().await {
        Ok(apps) => apps.iter().map(|a| (a.id.as_str().to_string(), crate::module::host::app_json(a))).collect(),
        Err(e) => {
            tracing::warn!("cannot list the module's servers: {e}");
            Default::default()
        }
    }
}

/// The body as a JSON object, or the 4xx naming what is wrong with it.
async fn parse(body: Body) -> Result<Value, Response> {
    let body = connections::read_body(body, connections::MAX_JSON_BODY_BYTES).await?;
    match serde_json::from_slice::<Value>(&body) {
        Ok(value) if value.is_object() => Ok(value),
        Ok(_) => Err(json_error(StatusCode::BAD_REQUEST, "bad_definition", "the body must be a JSON object")),
        Err(e) => Err(json_error(StatusCode::BAD_REQUEST, "bad_json", format!("the body is not JSON: {e}"))),
    }
}

/// The error answer for `error`: `{"error": {"code", "message"}}` as every route writes it, plus
/// `field` when one field of the definition is at fault.
fn refusal(error: &WorkspaceError) -> Response {
    let (status, code, field) = match error {
        WorkspaceError::Invalid(problem) => (StatusCode::BAD_REQUEST, "bad_definition", Some(problem.field.as_str())),
        WorkspaceError::NotAllowed { .. } => (StatusCode::BAD_REQUEST, "command_not_allowed", Some("command")),
        WorkspaceError::InConfiguration(_) => (StatusCode::CONFLICT, "defined_in_configuration", None),
        WorkspaceError::Exists(_) => (StatusCode::CONFLICT, "exists", None),
        WorkspaceError::Missing(_) => (StatusCode::NOT_FOUND, "no_such_server", None),
        WorkspaceError::Module(e) => return module_failure(e),
        WorkspaceError::Write { .. } | WorkspaceError::Corrupt { .. } | WorkspaceError::Settings(_) => {
            (StatusCode::INTERNAL_SERVER_ERROR, "workspace_unavailable", None)
        }
    };
    match field {
        None => json_error(status, code, error.to_string()),
        Some(field) => {
            let body = json!({ "error": { "code": code, "message": error.to_string(), "field": field } });
            (status, Json(body)).into_response()
        }
    }
}
