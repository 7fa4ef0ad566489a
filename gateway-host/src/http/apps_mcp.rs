//! `/apps/mcp/{appId}`: an MCP Streamable HTTP endpoint over one app's gateway-managed upstream
//! session (SPEC R32), for the app's UI in a browser (and any MCP client).
//!
//! Stateless: the gateway answers `initialize` and `server/discover` itself from what it knows of
//! the app, so no `Mcp-Session-Id` is needed (one sent is echoed back and otherwise ignored), any
//! replica can answer any request, and every other request is forwarded through the module's
//! `forward` call, which enforces the method allowlist, the `app` visibility of `tools/call` and
//! the `?sessionId=` → `params._meta.sessionId` injection.
//!
//! HTTP status conventions (consistent across the endpoint):
//! - 200 with a JSON-RPC response (or array for a batch) for every request that reached JSON-RPC
//!   processing — including JSON-RPC errors such as an unknown app or a method not forwarded.
//! - 202 with an empty body when the POST held only notifications or responses.
//! - 400 with a JSON-RPC error (`id: null`) when the body is not JSON (-32700) or not a JSON-RPC
//!   message or batch at all (-32600): nothing in it could be answered individually.
//! - 413 with a JSON-RPC error when the body exceeds `Gateway.MaxRequestBytes` (default 16 MiB).
//! - `GET` opens an SSE stream of the app's upstream notifications; `DELETE` answers 405 (there
//!   is no session to end).
//!
//! Responses are `application/json` unless the client accepts `text/event-stream` but not JSON,
//! in which case the same messages are sent as one SSE stream.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream::{self, StreamExt};
use host_abi::event_kind;
use serde_json::{json, Value};

use super::apps_relay;
use super::auth::query_param;
use super::GatewayState;
use crate::module_host::ModuleHost;
use crate::serve::GATEWAY_VERSION;

/// Request bodies larger than this are refused with 413 unless `Gateway.MaxRequestBytes` says otherwise.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;

/// Initialize-era protocol revisions the endpoint speaks, oldest first.
pub const INITIALIZE_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// The discover-first revision (answered through `server/discover`).
pub const DISCOVER_VERSION: &str = "2026-07-28";

const MCP_SESSION_ID: &str = "mcp-session-id";

/// JSON-RPC error codes (the module uses the same for forwarded calls).
mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const INTERNAL_ERROR: i64 = -32603;
    pub const APP_UNAVAILABLE: i64 = -32002;
}

pub(super) fn rpc_error(id: &Value, code: i64, message: impl Into<String>, data: Option<Value>) -> Value {
    let mut error = json!({ "code": code, "message": message.into() });
    if let Some(d) = data {
        error["data"] = d;
    }
    json!({ "jsonrpc": "2.0", "id": id, "error": error })
}

/// `POST /apps/mcp/{appId}`.
pub async fn post(
    State(state): State<Arc<GatewayState>>,
    Path(app_id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let session_id = query_param(query.as_deref(), "sessionId").unwrap_or_default();
    let sse = wants_sse(&headers);
    let body = match body {
        Ok(b) => b,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            let limit = max_request_bytes(&state);
            return finish(
                &headers,
                StatusCode::PAYLOAD_TOO_LARGE,
                json_body(&rpc_error(
                    &Value::Null,
                    code::INVALID_REQUEST,
                    format!("request body exceeds {limit} bytes (Gateway.MaxRequestBytes)"),
                    None,
                )),
            );
        }
        Err(rejection) => {
            let message = format!("cannot read the request body: {rejection}");
            return finish(&headers, StatusCode::BAD_REQUEST, json_body(&rpc_error(&Value::Null, code::INVALID_REQUEST, message, None)));
        }
    };
    let message: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            let error = rpc_error(&Value::Null, code::PARSE_ERROR, format!("Parse error: {e}"), None);
            return finish(&headers, StatusCode::BAD_REQUEST, json_body(&error));
        }
    };
    let module = &state.module;
    let header_version = headers.get("mcp-protocol-version").and_then(|v| v.to_str().ok());
    match message {
        Value::Array(items) if items.is_empty() => {
            let error = rpc_error(&Value::Null, code::INVALID_REQUEST, "Invalid Request: empty batch", None);
            finish(&headers, StatusCode::BAD_REQUEST, json_body(&error))
        }
        Value::Array(items) => {
            let answers = futures::future::join_all(items.iter().map(|m| handle(module, &app_id, m, &session_id, header_version))).await;
            let answers: Vec<String> = answers.into_iter().flatten().collect();
            if answers.is_empty() {
                return finish(&headers, StatusCode::ACCEPTED, Body::empty());
            }
            if sse {
                return sse_response(&headers, answers);
            }
            finish(&headers, StatusCode::OK, json_raw(format!("[{}]", answers.join(","))))
        }
        Value::Object(_) => {
            if let Some(response) = apps_relay::take_client_message(&state, &message, &headers, &session_id).await {
                return response;
            }
            let method = message.get("method").and_then(Value::as_str);
            if message.get("id").is_some() && method.is_some_and(|m| m != "initialize" && m != "server/discover") {
                let modern = is_discover_era(&message, header_version);
                return apps_relay::forward(&state, &app_id, &message, &headers, &session_id, modern).await;
            }
            let mut response = match handle(module, &app_id, &message, &session_id, header_version).await {
                None => return finish(&headers, StatusCode::ACCEPTED, Body::empty()),
                Some(answer) if sse => sse_response(&headers, vec![answer]),
                Some(answer) => finish(&headers, StatusCode::OK, json_raw(answer)),
            };
            // An initialize-era client declares its capabilities only here: the session id
            // carries them to every later request (see apps_relay.rs).
            if method == Some("initialize") && !headers.contains_key(MCP_SESSION_ID) {
                let capabilities = message.pointer("/params/capabilities").cloned().unwrap_or(Value::Null);
                if let Ok(value) = HeaderValue::from_str(&apps_relay::issue_session(&capabilities)) {
                    response.headers_mut().insert(MCP_SESSION_ID, value);
                }
            }
            response
        }
        _ => {
            let error = rpc_error(&Value::Null, code::INVALID_REQUEST, "Invalid Request: expected a JSON-RPC object or array", None);
            finish(&headers, StatusCode::BAD_REQUEST, json_body(&error))
        }
    }
}

/// One JSON-RPC message → its response as JSON text, or `None` for notifications and responses.
async fn handle(
    module: &Arc<ModuleHost>,
    app_id: &str,
    message: &Value,
    session_id: &str,
    header_version: Option<&str>,
) -> Option<String> {
    let Some(object) = message.as_object() else {
        return Some(rpc_error(&Value::Null, code::INVALID_REQUEST, "Invalid Request: not an object", None).to_string());
    };
    let id = object.get("id").cloned();
    let method = object.get("method").and_then(Value::as_str);
    let (Some(method), Some(id)) = (method, id) else {
        // Notifications (initialized, cancelled…) and responses concern this stateless endpoint
        // only; the upstream session is the gateway's own and has its own handshake.
        if method.is_none() && !object.contains_key("result") && !object.contains_key("error") {
            let id = object.get("id").cloned().unwrap_or(Value::Null);
            return Some(rpc_error(&id, code::INVALID_REQUEST, "Invalid Request: no method", None).to_string());
        }
        return None;
    };
    match method {
        "initialize" | "server/discover" => {
            if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
                return Some(rpc_error(&id, code::INVALID_REQUEST, "Invalid Request: jsonrpc must be \"2.0\"", None).to_string());
            }
            let app = match running_app(module, app_id).await {
                Ok(app) => app,
                Err(error) => return Some(with_id(error, &id).to_string()),
            };
            let result = if method == "initialize" {
                let requested = object.get("params").and_then(|p| p.get("protocolVersion")).and_then(Value::as_str);
                initialize_result(&app, requested)
            } else {
                discover_result(&app)
            };
            Some(json!({ "jsonrpc": "2.0", "id": id, "result": result }).to_string())
        }
        _ => match module.forward(app_id, &strip_envelope(message), session_id).await {
            Ok(Some(answer)) if is_discover_era(message, header_version) => Some(adapt_result(method, answer)),
            Ok(answer) => answer,
            Err(e) => Some(
                rpc_error(&id, code::INTERNAL_ERROR, format!("forwarding to McpApp '{app_id}' failed: {e}"), Some(json!({ "appId": app_id })))
                    .to_string(),
            ),
        },
    }
}

/// `_meta` keys a discover-first (2026-07-28) client stamps on every request in place of the
/// initialize handshake. They describe the client's connection to *this* endpoint; the upstream
/// session is the gateway's own, negotiated at its own revision, and an upstream would refuse a
/// request claiming a revision it did not negotiate. So they are dropped before forwarding.
const ENVELOPE_META_KEYS: &[&str] = &[
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientInfo",
    "io.modelcontextprotocol/clientCapabilities",
    "io.modelcontextprotocol/logLevel",
];

pub(super) fn strip_envelope(message: &Value) -> std::borrow::Cow<'_, Value> {
    let stamped = message["params"]["_meta"]
        .as_object()
        .is_some_and(|meta| ENVELOPE_META_KEYS.iter().any(|k| meta.contains_key(*k)));
    if !stamped {
        return std::borrow::Cow::Borrowed(message);
    }
    let mut message = message.clone();
    if let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) {
        if let Some(meta) = params.get_mut("_meta").and_then(Value::as_object_mut) {
            for key in ENVELOPE_META_KEYS {
                meta.remove(*key);
            }
            if meta.is_empty() {
                params.remove("_meta");
            }
        }
    }
    std::borrow::Cow::Owned(message)
}

/// A request of a discover-first client: its revision (from the `_meta` envelope, else the
/// `Mcp-Protocol-Version` header) is newer than every initialize-era one.
fn is_discover_era(message: &Value, header_version: Option<&str>) -> bool {
    let version = message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"].as_str().or(header_version);
    version.is_some_and(|v| v >= DISCOVER_VERSION)
}

/// Results the 2026-07-28 revision marks cacheable (they carry `ttlMs` and `cacheScope`).
const CACHEABLE_METHODS: &[&str] =
    &["tools/list", "resources/list", "resources/templates/list", "prompts/list", "resources/read"];

/// An initialize-era upstream result, as a discover-era client expects it: `resultType` on every
/// result, and on cacheable ones the most conservative cache hints (not cacheable, this client
/// only). Errors pass unchanged.
pub(super) fn adapt_result(method: &str, answer: String) -> String {
    let Ok(mut response) = serde_json::from_str::<Value>(&answer) else { return answer };
    let Some(result) = response.get_mut("result").and_then(Value::as_object_mut) else { return answer };
    result.entry("resultType").or_insert_with(|| json!("complete"));
    if CACHEABLE_METHODS.contains(&method) {
        result.entry("ttlMs").or_insert_with(|| json!(0));
        result.entry("cacheScope").or_insert_with(|| json!("private"));
    }
    response.to_string()
}

/// What the gateway knows of an app, for answering the handshake itself.
struct AppFacts {
    id: String,
    name: String,
    version: String,
    capabilities: Value,
}

/// The app, if Running; else the JSON-RPC error (id filled in by the caller) the module would give.
async fn running_app(module: &ModuleHost, app_id: &str) -> Result<AppFacts, Value> {
    let apps = module
        .list_apps()
        .await
        .map_err(|e| rpc_error(&Value::Null, code::INTERNAL_ERROR, format!("listing apps failed: {e}"), None))?;
    let Some(app) = apps.into_iter().filter(crate::module_host::is_mcp_app).find(|a| a.id.as_str() == app_id) else {
        return Err(rpc_error(
            &Value::Null,
            code::APP_UNAVAILABLE,
            format!("Unknown McpApp '{app_id}'"),
            Some(json!({ "appId": app_id, "state": Value::Null })),
        ));
    };
    if app.state.as_str() != "running" {
        return Err(rpc_error(
            &Value::Null,
            code::APP_UNAVAILABLE,
            format!("McpApp '{app_id}' is not running (state: {})", app.state.as_str()),
            Some(json!({ "appId": app_id, "state": app.state.as_str() })),
        ));
    }
    let detail: Value = serde_json::from_str(app.detail_json.as_str()).unwrap_or(Value::Null);
    let declared: Vec<String> = detail["manifest"]["capabilities"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    let offers = |name: &str, count: u32| count > 0 || declared.iter().any(|d| d == name);
    let mut capabilities = serde_json::Map::new();
    // listChanged: the app's change notifications reach clients on the GET stream.
    if offers("tools", app.tool_count) {
        capabilities.insert("tools".into(), json!({ "listChanged": true }));
    }
    if offers("resources", app.resource_count + app.resource_template_count) {
        capabilities.insert("resources".into(), json!({ "listChanged": true }));
    }
    if offers("prompts", app.prompt_count) {
        capabilities.insert("prompts".into(), json!({ "listChanged": true }));
    }
    if declared.iter().any(|d| d == "completions") {
        capabilities.insert("completions".into(), json!({}));
    }
    // The app's own declaration from its handshake wins; the estimate above is for apps whose
    // handshake reported nothing usable.
    if let Some(declared) = detail["server"]["capabilities"].as_object() {
        capabilities = declared.clone();
        capabilities.remove("experimental");
    }
    Ok(AppFacts {
        id: app.id.into_string(),
        name: app.name.into_string(),
        version: app.version.into_string(),
        capabilities: Value::Object(capabilities),
    })
}

fn with_id(mut error: Value, id: &Value) -> Value {
    error["id"] = id.clone();
    error
}

fn server_info(app: &AppFacts) -> Value {
    json!({
        "name": format!("gateway-host/{}", app.id),
        "title": format!("{} (through the MCP App gateway {GATEWAY_VERSION})", if app.name.is_empty() { &app.id } else { &app.name }),
        "version": if app.version.is_empty() { GATEWAY_VERSION } else { &app.version },
    })
}

/// The client's revision when we speak it, else the newest initialize-era one.
pub fn negotiate(requested: Option<&str>) -> &'static str {
    requested
        .and_then(|r| INITIALIZE_VERSIONS.iter().find(|v| **v == r).copied())
        .unwrap_or(INITIALIZE_VERSIONS[INITIALIZE_VERSIONS.len() - 1])
}

fn initialize_result(app: &AppFacts, requested: Option<&str>) -> Value {
    json!({
        "protocolVersion": negotiate(requested),
        "capabilities": app.capabilities,
        "serverInfo": server_info(app),
        "instructions": format!("MCP App '{}' served through the gateway's shared upstream session.", app.id),
    })
}

/// `server/discover` (MCP 2026-07-28, discover-first): versions, capabilities, server info in
/// `_meta`, not cacheable beyond this client.
fn discover_result(app: &AppFacts) -> Value {
    let mut versions: Vec<&str> = INITIALIZE_VERSIONS.to_vec();
    versions.push(DISCOVER_VERSION);
    json!({
        "resultType": "complete",
        "supportedVersions": versions,
        "capabilities": app.capabilities,
        "ttlMs": 0,
        "cacheScope": "private",
        "_meta": { "io.modelcontextprotocol/serverInfo": server_info(app) },
    })
}

/// `GET /apps/mcp/{appId}`: the app's upstream notifications (`tools/list_changed`,
/// `resources/updated`, logging…) as an SSE stream, with keep-alive comments.
pub async fn get(State(state): State<Arc<GatewayState>>, Path(app_id): Path<String>) -> Response {
    let known = state.module.list_apps().await.map(|apps| apps.iter().any(|a| a.id.as_str() == app_id));
    if let Ok(false) = known {
        let error = rpc_error(&Value::Null, code::APP_UNAVAILABLE, format!("Unknown McpApp '{app_id}'"), Some(json!({ "appId": app_id, "state": Value::Null })));
        return (StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "application/json")], error.to_string()).into_response();
    }
    let receiver = state.module.subscribe();
    let events = stream::unfold(receiver, move |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(event) => return Some((event, rx)),
                // A slow reader missed some; carry on with the newest.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
    .filter(move |event| {
        let wanted = event.kind == event_kind::UPSTREAM_NOTIFICATION && event.app_id == app_id;
        async move { wanted }
    })
    .map(|event| Ok::<_, Infallible>(Event::default().event("message").data(event.payload.to_string())))
    // Ends with the gateway, so graceful shutdown does not wait on open streams.
    .take_until(state.shutdown.clone().cancelled_owned());
    Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)).text("keep-alive")).into_response()
}

/// `DELETE /apps/mcp/{appId}`: the endpoint is stateless, so there is no session to end.
pub async fn delete() -> Response {
    let mut response = (StatusCode::METHOD_NOT_ALLOWED, [(header::CONTENT_TYPE, "application/json")], json!({ "error": { "code": "method_not_allowed", "message": "this endpoint is stateless: there is no session to delete" } }).to_string()).into_response();
    response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, POST, OPTIONS"));
    response
}

pub fn max_request_bytes(state: &GatewayState) -> usize {
    state
        .settings
        .get_str("Gateway:MaxRequestBytes")
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|v| *v > 0)
        .unwrap_or(DEFAULT_MAX_REQUEST_BYTES)
}

/// SSE only for a client that accepts the stream and not JSON.
pub(super) fn wants_sse(headers: &HeaderMap) -> bool {
    let accept = headers.get_all(header::ACCEPT).iter().filter_map(|v| v.to_str().ok()).collect::<Vec<_>>().join(",");
    let accept = accept.to_ascii_lowercase();
    accept.contains("text/event-stream") && !accept.contains("application/json") && !accept.contains("*/*")
}

fn json_body(value: &Value) -> Body {
    Body::from(value.to_string())
}

pub(super) fn json_raw(text: String) -> Body {
    Body::from(text)
}

/// A JSON response, echoing the client's `Mcp-Session-Id` when it sent one.
pub(super) fn finish(request_headers: &HeaderMap, status: StatusCode, body: Body) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    if status != StatusCode::ACCEPTED {
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    echo_session(request_headers, &mut response);
    response
}

pub(super) fn sse_response(request_headers: &HeaderMap, messages: Vec<String>) -> Response {
    let events = stream::iter(messages.into_iter().map(|m| Ok::<_, Infallible>(Event::default().event("message").data(m))));
    let mut response = Sse::new(events).into_response();
    echo_session(request_headers, &mut response);
    response
}

pub(super) fn echo_session(request_headers: &HeaderMap, response: &mut Response) {
    if let Some(id) = request_headers.get(MCP_SESSION_ID) {
        response.headers_mut().insert(MCP_SESSION_ID, id.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_echoes_known_versions_only() {
        assert_eq!(negotiate(Some("2025-03-26")), "2025-03-26");
        assert_eq!(negotiate(Some("2024-11-05")), "2024-11-05");
        assert_eq!(negotiate(Some("2026-07-28")), "2025-11-25");
        assert_eq!(negotiate(Some("1999-01-01")), "2025-11-25");
        assert_eq!(negotiate(None), "2025-11-25");
    }

    #[test]
    fn discover_era_envelope_is_not_forwarded() {
        let stamped = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
            "progressToken": 3
        }}});
        assert_eq!(strip_envelope(&stamped)["params"], json!({"_meta": {"progressToken": 3}}));
        let only = json!({"id": 1, "method": "ping", "params": {"_meta": {"io.modelcontextprotocol/logLevel": "info"}}});
        assert_eq!(strip_envelope(&only)["params"], json!({}));
        let plain = json!({"id": 1, "method": "ping"});
        assert!(matches!(strip_envelope(&plain), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn discover_era_results_get_result_type_and_cache_hints() {
        let modern = json!({"params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
        assert!(is_discover_era(&modern, None));
        assert!(!is_discover_era(&json!({"params": {}}), Some("2025-11-25")));
        assert!(is_discover_era(&json!({}), Some("2026-07-28")));
        let list: Value = serde_json::from_str(&adapt_result("tools/list", r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#.into())).unwrap();
        assert_eq!(list["result"], json!({"tools": [], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}));
        let call: Value = serde_json::from_str(&adapt_result("tools/call", r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#.into())).unwrap();
        assert_eq!(call["result"], json!({"content": [], "resultType": "complete"}));
        let error = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}}"#;
        assert_eq!(adapt_result("tools/call", error.into()), error);
    }

    #[test]
    fn sse_only_when_json_is_not_accepted() {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
        assert!(!wants_sse(&h));
        h.insert(header::ACCEPT, HeaderValue::from_static("text/event-stream"));
        assert!(wants_sse(&h));
    }
}
