//! What rmcp's Streamable HTTP server does not answer well, answered before it, in one place for
//! both MCP endpoints (`/mcp`, `/apps/mcp/{appId}`): a POST body that is not one JSON-RPC
//! message. rmcp replies to those with `415` and a plain-text line; a client deserves the
//! JSON-RPC error the message calls for, with HTTP 400 since nothing in it can be answered:
//!
//! - not JSON → -32700 (parse error);
//! - a batch (an array) → -32600: batching left MCP with the 2025-06-18 revision, so the gateway
//!   asks for one message per POST;
//! - JSON, but not a JSON-RPC message (no `jsonrpc: "2.0"`, no method or result…) → -32600
//!   naming what rmcp could not read;
//! - an object with the same key twice, or two keys that differ only in case (`"method"` twice,
//!   `"Name"` beside `"name"`) anywhere in the body → -32600 naming them: parsers disagree on
//!   which one wins (serde keeps the last, others the first), so a body that means two things to
//!   two readers — the gateway and the app — is refused rather than resolved silently;
//! - a body over `Gateway.MaxRequestBytes` → 413 with a -32600 error naming the limit;
//! - a body that did not arrive whole in time (`connections::body_deadline`) → 408, -32600.
//!
//! Everything else passes on untouched, with the parsed message beside the body ([`Gated`]).

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use host_abi::jsonrpc;

use super::connections;
use serde_json::{json, Value};

const BATCH_REFUSED: &str = "Invalid Request: JSON-RPC batches are not part of MCP since 2025-06-18; send one message per POST";

/// The largest body accepted.
#[derive(Clone, Copy)]
pub struct BodyLimit(pub usize);

pub async fn gate(State(BodyLimit(limit)): State<BodyLimit>, request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes: Bytes = match axum::body::to_bytes(body, limit).await {
        Ok(bytes) => bytes,
        Err(e) => {
            let (status, message) = match connections::timed_out(&e) {
                Some(late) => (StatusCode::REQUEST_TIMEOUT, late.to_string()),
                None => (StatusCode::PAYLOAD_TOO_LARGE, format!("request body exceeds {limit} bytes (Gateway.MaxRequestBytes)")),
            };
            // The rest of the body is never read: the connection cannot carry another request.
            return connections::with_connection_close(refuse(status, &Value::Null, jsonrpc::INVALID_REQUEST, message));
        }
    };
    // A batch is refused whatever it holds, so it is not parsed: 10,000 requests in one body
    // would otherwise become 10,000 JSON trees just to be turned away.
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        return refuse(StatusCode::BAD_REQUEST, &Value::Null, jsonrpc::INVALID_REQUEST, BATCH_REFUSED.to_string());
    }
    let message: Value = match serde_json::from_slice(&bytes) {
        Ok(value) => value,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, &Value::Null, jsonrpc::PARSE_ERROR, format!("Parse error: {e}")),
    };
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    if let Err(e) = serde_json::from_slice::<StrictKeys>(&bytes) {
        return refuse(StatusCode::BAD_REQUEST, &id, jsonrpc::INVALID_REQUEST, format!("Invalid Request: {e}"));
    }
    match &message {
        Value::Object(_) => {
            if let Err(e) = serde_json::from_value::<rmcp::model::ClientJsonRpcMessage>(message.clone()) {
                return refuse(StatusCode::BAD_REQUEST, &id, jsonrpc::INVALID_REQUEST, format!("Invalid Request: not a JSON-RPC message an MCP client sends ({e})"));
            }
        }
        _ => {
            let text = "Invalid Request: expected a JSON-RPC message (an object)";
            return refuse(StatusCode::BAD_REQUEST, &Value::Null, jsonrpc::INVALID_REQUEST, text.to_string());
        }
    }
    let mut parts = parts;
    parts.extensions.insert(Gated(message));
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

/// The message of a POST that passed the gate, on the request's extensions, so that what comes
/// after (`pass_through.rs`) need not parse the body again. The body is still there, unchanged.
#[derive(Clone)]
pub struct Gated(pub Value);

/// Reads a JSON document only to check that no object in it repeats a key or has two keys that
/// differ only in case; the error names them.
struct StrictKeys;

impl<'de> serde::Deserialize<'de> for StrictKeys {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictKeysVisitor)
    }
}

struct StrictKeysVisitor;

impl<'de> serde::de::Visitor<'de> for StrictKeysVisitor {
    type Value = StrictKeys;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<StrictKeys, A::Error> {
        let mut seen: std::collections::HashMap<String, String> = std::collections::HashMap::new();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            let folded = key.to_lowercase();
            if let Some(earlier) = seen.get(&folded) {
                return Err(serde::de::Error::custom(if *earlier == key {
                    format!("the key \"{key}\" appears twice in one object")
                } else {
                    format!("the keys \"{earlier}\" and \"{key}\" of one object differ only in case")
                }));
            }
            seen.insert(folded, key.into_owned());
            map.next_value::<StrictKeys>()?;
        }
        Ok(StrictKeys)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<StrictKeys, A::Error> {
        while seq.next_element::<StrictKeys>()?.is_some() {}
        Ok(StrictKeys)
    }

    fn visit_bool<E>(self, _: bool) -> Result<StrictKeys, E> {
        Ok(StrictKeys)
    }
    fn visit_i64<E>(self, _: i64) -> Result<StrictKeys, E> {
        Ok(StrictKeys)
    }
    fn visit_u64<E>(self, _: u64) -> Result<StrictKeys, E> {
        Ok(StrictKeys)
    }
    fn visit_f64<E>(self, _: f64) -> Result<StrictKeys, E> {
        Ok(StrictKeys)
    }
    fn visit_str<E>(self, _: &str) -> Result<StrictKeys, E> {
        Ok(StrictKeys)
    }
    fn visit_unit<E>(self) -> Result<StrictKeys, E> {
        Ok(StrictKeys)
    }
}

fn refuse(status: StatusCode, id: &Value, code: i32, message: String) -> Response {
    let body = json!({ "jsonrpc": jsonrpc::VERSION, "id": id, "error": { "code": code, "message": message } });
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

#[cfg(test)]
mod tests {
    use super::StrictKeys;

    fn check(body: &str) -> Result<(), String> {
        serde_json::from_slice::<StrictKeys>(body.as_bytes()).map(|_| ()).map_err(|e| e.to_string())
    }

    #[test]
    fn repeated_and_case_variant_keys_are_named() {
        assert!(check(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"a":[{"b":1},{"b":2}],"c":"\u0041"}}"#).is_ok());
        let twice = check(r#"{"method":"tools/call","method":"tools/list"}"#).unwrap_err();
        assert!(twice.contains("\"method\" appears twice"), "{twice}");
        let nested = check(r#"{"params":{"arguments":{"Name":"a","name":"b"}}}"#).unwrap_err();
        assert!(nested.contains("\"Name\" and \"name\""), "{nested}");
        let escaped = check(r#"{"id":1,"\u0069d":2}"#).unwrap_err();
        assert!(escaped.contains("\"id\" appears twice"), "{escaped}");
        assert!(check(r#"[{"x":1,"X":2}]"#).is_err());
    }
}
