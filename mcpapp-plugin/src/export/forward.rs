//! Raw MCP JSON-RPC from a browser, forwarded to an app's gateway-managed session (SPEC R32).
//!
//! The host answers `initialize` / `server/discover` itself; what reaches here are the methods an
//! app UI uses. Results pass through as the app sent them (app-only tools included, names
//! unprefixed). Two rules are the host's to enforce (MCP Apps spec): a browser may only call
//! tools visible to apps, and the browser's `sessionId` is injected into `tools/call`'s `_meta`.
//! The gateway's own `/mcp` forwards here too, to standard MCP servers as well as apps, when it
//! says so (`host_abi::forward::EXTRA_ANY_PROVIDER`).

use std::sync::Arc;

use host_abi::{jsonrpc, ForwardRequest};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::runtime::events::EventSink;
use crate::apps::registry::Registry;
use crate::apps::app_server::{unavailable, AppKind, CallError};
use crate::upstream::relay::Relays;
use crate::upstream::session::UpstreamError;

/// Methods forwarded to apps.
pub const FORWARDED_METHODS: &[&str] = &[
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "ping",
];

fn error_response(id: &Value, code: i32, message: impl Into<String>, data: Option<Value>) -> Value {
    let mut error = json!({ "code": code, "message": message.into() });
    if let Some(d) = data {
        error["data"] = d;
    }
    json!({ "jsonrpc": jsonrpc::VERSION, "id": id, "error": error })
}

/// Forwards one message; returns the JSON-RPC response, or `None` for a notification.
pub async fn forward(
    registry: &Registry,
    relays: &Arc<Relays>,
    events: &EventSink,
    request: &ForwardRequest,
    cancel: &CancellationToken,
) -> Option<Value> {
    let (call_id, app_id, message_json) = (request.call_id, request.app_id.as_str(), request.message_json.as_str());
    let (session_id, extra_json) = (request.session_id.as_str(), request.extra_json.as_str());
    let mut message: Value = match serde_json::from_str(message_json) {
        Ok(m) => m,
        Err(e) => return Some(error_response(&Value::Null, jsonrpc::PARSE_ERROR, format!("Parse error: {e}"), None)),
    };
    // The message is this call's own: its params are taken, not copied.
    let taken_params = message.get_mut("params").map(Value::take);
    let id = message.get("id").cloned();
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        let id = id.unwrap_or(Value::Null);
        return Some(error_response(&id, jsonrpc::INVALID_REQUEST, "Invalid Request: no method", None));
    };
    let Some(id) = id else {
        // Notifications from the browser (initialized, cancelled…) concern the gateway's own
        // endpoint, not the shared upstream session.
        tracing::debug!(app = app_id, "not forwarding notification {method}");
        return None;
    };
    if message.get("jsonrpc").and_then(Value::as_str) != Some(jsonrpc::VERSION) {
        return Some(error_response(&id, jsonrpc::INVALID_REQUEST, "Invalid Request: jsonrpc must be \"2.0\"", None));
    }
    // A browser reaches MCP Apps only; the gateway's own `/mcp` may reach standard servers too.
    // (The text is looked at first: every browser call passes here, and few carry the key.)
    let any_provider = (extra_json.contains(host_abi::forward::EXTRA_ANY_PROVIDER))
        .then(|| serde_json::from_str::<Value>(extra_json).ok())
        .flatten()
        .and_then(|extra| extra.get(host_abi::forward::EXTRA_ANY_PROVIDER).and_then(Value::as_bool))
        .unwrap_or(false);
    let Some(app) = registry.app(app_id).filter(|a| any_provider || a.kind == AppKind::App) else {
        return Some(error_response(
            &id,
            jsonrpc::APP_UNAVAILABLE,
            format!("Unknown McpApp '{app_id}'"),
            Some(json!({ "appId": app_id, "state": Value::Null })),
        ));
    };
    if !FORWARDED_METHODS.contains(&method) {
        return Some(error_response(&id, jsonrpc::METHOD_NOT_FOUND, format!("Method not found: '{method}' is not forwarded to apps"), None));
    }
    let mut params = taken_params;
    if params.as_ref().is_some_and(|p| !p.is_object() && !p.is_null()) {
        return Some(error_response(&id, jsonrpc::INVALID_PARAMS, "Invalid params: params must be an object", None));
    }
    if method == "tools/call" {
        let name = params.as_ref().and_then(|p| p.get("name")).and_then(Value::as_str).unwrap_or_default().to_string();
        if let Some(catalog) = app.catalog() {
            if let Some(tool) = catalog.tool(&name) {
                if !tool.visible_to_app {
                    return Some(error_response(
                        &id,
                        jsonrpc::INVALID_PARAMS,
                        format!("Tool '{name}' of McpApp '{app_id}' is not visible to apps (its _meta.ui.visibility lacks \"app\")"),
                        None,
                    ));
                }
            }
        }
        if !session_id.is_empty() {
            let p = params.get_or_insert_with(|| json!({}));
            if !p.get("_meta").is_some_and(Value::is_object) {
                p["_meta"] = json!({});
            }
            p["_meta"]["sessionId"] = json!(session_id);
        }
    }
    let params = params.filter(|p| !p.is_null());
    let meta = params.as_ref().and_then(|p| p.get("_meta"));
    let relay = relays.register(call_id, app_id, extra_json, meta, events);
    Some(match app.request(method, params, cancel, relay.as_ref().map(|r| &*r.call)).await {
        Ok(result) => json!({ "jsonrpc": jsonrpc::VERSION, "id": id, "result": result }),
        Err(CallError::NotRunning { app, state }) => error_response(
            &id,
            jsonrpc::APP_UNAVAILABLE,
            format!("McpApp '{app}' is not running ({})", unavailable(state)),
            Some(json!({ "appId": app, "state": state.as_str() })),
        ),
        Err(CallError::Upstream { source: UpstreamError::Remote { code, message, data }, .. }) => {
            let mut error = json!({ "code": code, "message": message });
            if let Some(d) = data {
                error["data"] = d;
            }
            json!({ "jsonrpc": jsonrpc::VERSION, "id": id, "error": error })
        }
        Err(e @ (CallError::Lost { .. } | CallError::Cancelled { .. } | CallError::Upstream { .. })) => {
            error_response(&id, jsonrpc::UPSTREAM_FAILED, e.to_string(), Some(json!({ "appId": app_id })))
        }
    })
}
