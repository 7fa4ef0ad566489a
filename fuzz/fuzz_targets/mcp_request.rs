//! A POST body of `/apps/mcp/{appId}` (and `/mcp`): the gateway's JSON-RPC gate in front of rmcp,
//! then what reads an accepted message — rmcp's `ClientJsonRpcMessage` and the 2026-07-28
//! per-request `_meta` (protocol version, client capabilities, client info, log level, progress
//! token).
//!
//! The gate runs as both endpoints run it (`McpEntry::enter`, past the front door), with a
//! handler behind it that echoes the body it was given. What must hold, for any bytes:
//! - a body of exactly `Gateway.MaxRequestBytes` is never refused for its size, and one byte over
//!   is refused with 413, `Connection: close` and a -32600 error naming the limit;
//! - a body the gate passes reaches the handler byte for byte, is one JSON object with no two
//!   keys differing only in case anywhere, and is a message rmcp reads (and writes back readably);
//! - a refused body gets HTTP 400 and a JSON-RPC error: a batch (a body opening with `[`, JSON or
//!   not) -32600 saying batches are refused; else -32700 when it is not JSON, else -32600 naming
//!   the problem or -32602 naming the params of one of MCP's methods, with the request's `id`
//!   when it has one (and it is a string or a 64-bit integer); a 2026-07-28 request for a method
//!   that revision removed may get 404 and -32601;
//! - the elements of a batch, sent one by one, obey the same rules;
//! - the message the gate hands on beside the body (`Gated`, read in one pass with the key check)
//!   is what serde_json reads from the body, and the short way's eligibility check
//!   (`pass_through::eligible`, with the headers a client would send for it) never panics and
//!   takes only a `tools/call` or a `resources/read` with the name (or URI) and id it was sent.
#![no_main]

use std::sync::OnceLock;

use axum::body::{Body, Bytes};
use axum::http::{header, Method, Request, StatusCode};
use axum::response::Response;
use gateway_host::fuzzing::{eligible, BodyLimit, Compatibility, Gated, McpEntry};
use libfuzzer_sys::fuzz_target;
use rmcp::model::{ClientJsonRpcMessage, GetMeta, JsonRpcMessage, ProtocolVersion};
use serde_json::Value;

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| tokio::runtime::Builder::new_current_thread().build().expect("a tokio runtime"))
}

/// What the app proxy would have been handed, after checking what the gate put beside it.
async fn echo(mut request: Request<Body>) -> Response {
    let Gated(message) = request.extensions_mut().remove::<Gated>().expect("the gate puts the message beside the body");
    let body = axum::body::to_bytes(request.into_body(), usize::MAX).await.expect("the body the gate read");
    let read: Value = serde_json::from_slice(&body).expect("the gate passes only JSON");
    assert_eq!(message, read, "the gate's one-pass reading differs from serde_json's");
    short_way(&message);
    Response::new(Body::from(body))
}

/// The short way's check, with the headers a client sends for the message.
fn short_way(message: &Value) {
    let mut headers = axum::http::HeaderMap::new();
    headers.insert(header::ACCEPT, "application/json, text/event-stream".parse().unwrap());
    headers.insert(header::CONTENT_TYPE, "application/json".parse().unwrap());
    headers.insert("mcp-protocol-version", "2026-07-28".parse().unwrap());
    // What `Mcp-Name` carries: a call's tool, a read's URI.
    let member = if message["method"] == "resources/read" { "uri" } else { "name" };
    for (name, value) in [("mcp-method", &message["method"]), ("mcp-name", &message["params"][member])] {
        if let Some(value) = value.as_str().and_then(|v| v.parse().ok()) {
            headers.insert(name, value);
        }
    }
    let compatibility = Compatibility { enable_discovery_first: true, force_legacy_initialize: false };
    let mut taken = message.clone();
    match eligible(compatibility, &Method::POST, &headers, &mut taken) {
        Some(short) => {
            assert!(message["method"] == "tools/call" || message["method"] == "resources/read", "{message}");
            assert_eq!(message["method"], short.method, "{message}");
            assert_eq!(message["params"][member], short.name.as_str(), "{message}");
            assert_eq!(message["id"], short.id, "{message}");
            assert!(!short.params.get("_meta").is_some_and(|m| m.get("io.modelcontextprotocol/protocolVersion").is_some()), "the envelope stays: {message}");
        }
        None => assert_eq!(&taken, message, "a message the short way leaves is left as it was"),
    }
}

struct Answer {
    status: StatusCode,
    closes: bool,
    body: Bytes,
}

/// `POST /apps/mcp/app` with `body`, through the MCP endpoints' way in (the gate) with `limit`.
fn send(body: &[u8], limit: usize) -> Answer {
    let entry = McpEntry { limit: BodyLimit(limit), replicas: None };
    let request = Request::builder()
        .method(Method::POST)
        .uri("/apps/mcp/app")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .body(Body::from(body.to_vec()))
        .expect("a request");
    runtime().block_on(async move {
        let response = entry.enter(request, echo).await;
        let status = response.status();
        let closes = response.headers().get(header::CONNECTION).is_some_and(|v| v == "close");
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("the answer's body");
        Answer { status, closes, body }
    })
}

/// The JSON-RPC error of a refusal: its id, code and message.
fn refusal(answer: &Answer) -> (Value, i64, String) {
    let body: Value = serde_json::from_slice(&answer.body).expect("a refusal is JSON");
    assert_eq!(body["jsonrpc"], "2.0", "{body}");
    let code = body["error"]["code"].as_i64().expect("a refusal has an error code");
    let message = body["error"]["message"].as_str().expect("a refusal has an error message").to_string();
    assert!(!message.is_empty(), "{body}");
    (body["id"].clone(), code, message)
}

/// No object in `value` has two keys that differ only in case.
fn no_case_twins(value: &Value) -> bool {
    match value {
        Value::Object(map) => {
            let mut folded: Vec<String> = map.keys().map(|k| k.to_lowercase()).collect();
            folded.sort();
            folded.windows(2).all(|w| w[0] != w[1]) && map.values().all(no_case_twins)
        }
        Value::Array(items) => items.iter().all(no_case_twins),
        _ => true,
    }
}

/// What reads a message the gate let through: rmcp's types and the 2026-07-28 `_meta` rules.
fn read_message(value: &Value) {
    let message: ClientJsonRpcMessage =
        serde_json::from_value(value.clone()).expect("the gate passes only messages rmcp reads");
    if let JsonRpcMessage::Request(request) = &message {
        let _ = request.request.method();
        let meta = request.request.get_meta();
        let missing = meta.missing_required_keys(&ProtocolVersion::V_2026_07_28);
        assert_eq!(missing.contains(&"io.modelcontextprotocol/protocolVersion"), meta.protocol_version().is_none());
        assert_eq!(missing.contains(&"io.modelcontextprotocol/clientCapabilities"), meta.client_capabilities().is_none());
        assert!(meta.missing_required_keys(&ProtocolVersion::V_2025_11_25).is_empty(), "earlier revisions require no _meta");
        if let Some(version) = meta.protocol_version() {
            let _ = version.as_str() >= ProtocolVersion::V_2026_07_28.as_str();
        }
        let _ = meta.client_info();
        let _ = meta.log_level();
        let _ = meta.get_progress_token();
    }
    // What the gateway forwards is rmcp's reading, written out again: it must read back.
    let text = serde_json::to_string(&message).expect("a message rmcp read writes out");
    if let Err(e) = serde_json::from_str::<ClientJsonRpcMessage>(&text) {
        panic!("rmcp cannot read back its own writing of a message: {e}\n{text}");
    }
}

fn check(body: &[u8], batch_element: bool) {
    let parsed = serde_json::from_slice::<Value>(body);
    // A body that opens with `[` is a batch, refused by name before it is parsed.
    let batch = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
    // Exactly at the limit: never refused for the size.
    let answer = send(body, body.len());
    match answer.status {
        StatusCode::OK => {
            assert_eq!(&answer.body[..], body, "the gate must pass the body untouched");
            let value = parsed.as_ref().expect("the gate passes only JSON");
            assert!(value.is_object(), "the gate passes only one message (an object)");
            assert!(no_case_twins(value), "the gate passed keys that differ only in case");
            read_message(value);
        }
        StatusCode::BAD_REQUEST => {
            assert!(!answer.closes, "a 400 keeps the connection");
            let (id, code, message) = refusal(&answer);
            if batch {
                assert_eq!((code, &id), (INVALID_REQUEST, &Value::Null), "{message}");
                assert!(message.contains("batches"), "a batch is refused by name: {message}");
            } else {
                match &parsed {
                    Err(_) => {
                        assert_eq!(code, PARSE_ERROR, "{message}");
                        assert!(message.starts_with("Parse error"), "{message}");
                        assert_eq!(id, Value::Null);
                    }
                    Ok(value) => {
                        match code {
                            INVALID_REQUEST => assert!(message.starts_with("Invalid Request: "), "{message}"),
                            // A request for one of MCP's methods whose params do not fit it.
                            INVALID_PARAMS => {
                                assert!(message.starts_with("Invalid params for ") && message.contains("params"), "{message}");
                                assert!(value.get("method").and_then(Value::as_str).is_some(), "{message}");
                            }
                            other => panic!("a refusal with code {other}: {message}"),
                        }
                        // A request's own id (a string, a 64-bit integer) is echoed; any other
                        // (a fraction or a huge number, a boolean, an array, an object) is
                        // answered with null and named in the message.
                        match value.get("id") {
                            Some(sent @ (Value::String(_) | Value::Null)) => assert_eq!(&id, sent, "{message}"),
                            Some(sent @ Value::Number(n)) if !n.is_f64() => assert_eq!(&id, sent, "{message}"),
                            Some(_) => assert_eq!(id, Value::Null, "{message}"),
                            None => assert_eq!(id, Value::Null, "{message}"),
                        }
                    }
                }
            }
        }
        StatusCode::NOT_FOUND => {
            // A 2026-07-28 request for a method that revision removed, whose params rmcp cannot read.
            let (_, code, message) = refusal(&answer);
            assert_eq!(code, METHOD_NOT_FOUND, "{message}");
            let method = parsed.as_ref().ok().and_then(|v| v.get("method")).and_then(Value::as_str).unwrap_or_default();
            assert!(["logging/setLevel", "resources/subscribe", "resources/unsubscribe"].contains(&method), "{method}: {message}");
        }
        other => panic!("the gate answered {other} to a body within the limit"),
    }
    // One byte over the limit, for every fourth body.
    if !body.is_empty() && body.len() % 4 == 0 {
        let answer = send(body, body.len() - 1);
        assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(answer.closes, "a 413 closes the connection (the rest of the body is unread)");
        let (_, code, message) = refusal(&answer);
        assert_eq!(code, INVALID_REQUEST);
        assert!(message.contains(&format!("{} bytes", body.len() - 1)) && message.contains("Gateway.MaxRequestBytes"), "{message}");
    }
    // A batch's elements, as the messages a client should have sent one by one.
    if !batch_element {
        if let Ok(Value::Array(items)) = &parsed {
            for item in items.iter().take(8) {
                check(&serde_json::to_vec(item).expect("JSON"), true);
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    check(data, false);
});
