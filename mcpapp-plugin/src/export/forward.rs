//! A client's request, passed to an app's gateway-managed session (SPEC R32, R39, R46).
//!
//! The host owns HTTP and the JSON-RPC envelope: it answers `initialize` / `server/discover`
//! itself, parses and checks each message, and hands over a typed [`AppRequest`] — the app, the
//! method, `params` as JSON text. This side owns the app and the wire to it: it parses `params`
//! once, applies the two rules that are the gateway's to enforce (MCP Apps spec: a browser may
//! only call tools visible to apps, and the browser's `sessionId` goes into `tools/call`'s
//! `_meta`), and answers with the app's `result` or a typed JSON-RPC error ([`AppAnswer`]) —
//! never an envelope for the host to unpack again. The gateway itself forwards here too
//! (`any_provider`): its `/mcp`, and every tool call for a model (`/mcp` and the chat), to
//! standard MCP servers as well as apps, with its visibility rules already applied.

use std::sync::Arc;

use host_abi::{jsonrpc, AppAnswer, AppRequest, RpcError};
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use crate::apps::registry::Registry;
use crate::runtime::events::EventSink;
use crate::runtime::parse_count::{self, Direction};
use crate::apps::app_server::{unavailable, AppKind, CallError};
use crate::upstream::relay::Relays;
use crate::upstream::error::UpstreamError;

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

fn error(code: i32, message: impl Into<String>, data: Option<Value>) -> AppAnswer {
    AppAnswer::Error(RpcError {
        code: code.into(),
        message: message.into().into(),
        data_json: data.map(|d| d.to_string()).unwrap_or_default().into(),
    })
}

/// Passes one request to its app; answers with the app's result or a JSON-RPC error.
pub async fn forward(
    registry: &Registry,
    relays: &Arc<Relays>,
    events: &EventSink,
    request: &AppRequest,
    cancel: &CancellationToken,
) -> AppAnswer {
    let (call_id, app_id, method) = (request.call_id, request.app_id.as_str(), request.method.as_str());
    // A browser reaches MCP Apps only; the gateway's own `/mcp` may reach standard servers too.
    let Some(app) = registry.app(app_id).filter(|a| request.any_provider || a.kind == AppKind::App) else {
        return error(jsonrpc::APP_UNAVAILABLE, format!("Unknown McpApp '{app_id}'"), Some(json!({ "appId": app_id, "state": Value::Null })));
    };
    if !FORWARDED_METHODS.contains(&method) {
        return error(jsonrpc::METHOD_NOT_FOUND, format!("Method not found: '{method}' is not forwarded to apps"), None);
    }
    let params_json = request.params_json.as_str();
    let mut params = match params_json.trim() {
        "" => None,
        text => match parse_count::parsed::<Value>(Direction::Request, text) {
            Ok(Value::Null) => None,
            Ok(Value::Object(map)) => Some(map),
            Ok(_) => return error(jsonrpc::INVALID_PARAMS, "Invalid params: params must be an object", None),
            Err(e) => return error(jsonrpc::INVALID_PARAMS, format!("Invalid params: not JSON ({e})"), None),
        },
    };
    // The gateway itself (`any_provider`: its `/mcp`, the chat's model) has applied its own
    // visibility rules (a model's tools, or an app host's) before it calls.
    if method == "tools/call" && !request.any_provider {
        let name = params.as_ref().and_then(|p| p.get("name")).and_then(Value::as_str).unwrap_or_default();
        if let Some(tool) = app.catalog().as_ref().and_then(|catalog| catalog.tool(name)) {
            if !tool.visible_to_app {
                let text = format!("Tool '{name}' of McpApp '{app_id}' is not visible to apps (its _meta.ui.visibility lacks \"app\")");
                return error(jsonrpc::INVALID_PARAMS, text, None);
            }
        }
        if !request.session_id.is_empty() {
            put_session_id(params.get_or_insert_with(Map::new), request.session_id.as_str());
        }
    }
    let meta = params.as_ref().and_then(|p| p.get("_meta"));
    let capabilities = request.relay.as_ref().into_option().map(|relay| relay.client_capabilities.iter().map(|c| c.to_string()).collect());
    let relay = relays.register(call_id, app_id, capabilities, meta, events);
    let params = params.map(Value::Object);
    match app.request(method, params, cancel, relay.as_ref().map(|r| &*r.call)).await {
        Ok(result) => AppAnswer::Result(result.into_text().into()),
        Err(CallError::NotRunning { app, state }) => error(
            jsonrpc::APP_UNAVAILABLE,
            format!("McpApp '{app}' is not running ({})", unavailable(state)),
            Some(json!({ "appId": app, "state": state.as_str() })),
        ),
        Err(CallError::Upstream { source: UpstreamError::Remote { code, message, data }, .. }) => error(code, message, data),
        Err(e @ (CallError::Lost { .. } | CallError::Cancelled { .. } | CallError::Upstream { .. })) => {
            error(jsonrpc::UPSTREAM_FAILED, e.to_string(), Some(json!({ "appId": app_id })))
        }
    }
}

/// The browser's `sessionId` in a `tools/call`'s `_meta` (MCP Apps).
fn put_session_id(params: &mut Map<String, Value>, session_id: &str) {
    let meta = params.entry("_meta").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    if let Value::Object(meta) = meta {
        meta.insert("sessionId".into(), Value::String(session_id.into()));
    }
}
