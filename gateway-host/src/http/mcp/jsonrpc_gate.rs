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
//! - an `id` that is a number but no 64-bit integer (`1.5`, `1e30`) → -32600 with `"id": null`:
//!   it could only be echoed rounded, so the client could not match the answer to its request;
//! - a request for one of MCP's own methods whose params do not read as that method's (a
//!   `tools/call` whose `arguments` is a string, `name` a number, `inputResponses` not an
//!   object…) → -32602 naming the field. rmcp reads such a request as an unknown method and
//!   answers -32601 "Method not found: tools/call" (or `/apps/mcp` forwards it to the app as a
//!   custom request); for a 2026-07-28 request to a method that revision removed
//!   (`logging/setLevel`, `resources/subscribe`, `resources/unsubscribe`) it is -32601 with
//!   HTTP 404, as rmcp answers it when the params do read;
//! - a body over `Gateway.MaxRequestBytes` → 413 with a -32600 error naming the limit;
//! - a body that did not arrive whole in time (`connections::with_body_deadline`) → 408, -32600.
//!
//! Everything else passes on untouched, with the parsed message beside the body ([`Gated`]).

use std::borrow::Cow;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{header, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use host_abi::jsonrpc;

use crate::http::connections::{self, BodyRead};
use crate::tools::arguments::{self, kind_of};
use serde_json::{json, Value};

const BATCH_REFUSED: &str = "Invalid Request: JSON-RPC batches are not part of MCP since 2025-06-18; send one message per POST";

/// The largest body accepted.
#[derive(Clone, Copy)]
pub struct BodyLimit(pub usize);

/// Reads and checks a POST's message (see the module docs): the request with the parsed
/// message beside its body ([`Gated`]), or the refusal. Other methods pass untouched.
pub async fn gate(BodyLimit(limit): BodyLimit, request: Request) -> Result<Request, Response> {
    if request.method() != Method::POST {
        return Ok(request);
    }
    let (parts, body) = request.into_parts();
    let bytes: Bytes = match connections::read_limited(body, limit).await {
        Ok(bytes) => bytes,
        Err(e) => {
            let (status, message) = match &e {
                BodyRead::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, format!("{e} (Gateway.MaxRequestBytes)")),
                BodyRead::Failed(failed) => match connections::timed_out(failed) {
                    Some(late) => (StatusCode::REQUEST_TIMEOUT, late.to_string()),
                    None => (StatusCode::BAD_REQUEST, format!("the request body could not be read: {failed}")),
                },
            };
            // The rest of the body may be unread: the connection cannot carry another request.
            return Err(connections::with_connection_close(refuse(status, &Value::Null, jsonrpc::INVALID_REQUEST, message)));
        }
    };
    // A batch is refused whatever it holds, so it is not parsed: 10,000 requests in one body
    // would otherwise become 10,000 JSON trees just to be turned away.
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        return Err(refuse(StatusCode::BAD_REQUEST, &Value::Null, jsonrpc::INVALID_REQUEST, BATCH_REFUSED.to_string()));
    }
    // One pass reads the message and checks its keys; only a refused body is read again, for
    // the id its error answers.
    crate::parse_count::count(crate::parse_count::Direction::Request);
    let message = match serde_json::from_slice::<Strict>(&bytes) {
        Ok(Strict(message)) => message,
        // A repeated key: refused with the request's id, unless the body is not JSON at all
        // further on (the parse error comes first, as it would without the check).
        Err(e) if e.classify() == serde_json::error::Category::Data => match serde_json::from_slice::<Value>(&bytes) {
            Ok(message) => {
                let id = request_id(&message).unwrap_or(Value::Null);
                return Err(refuse(StatusCode::BAD_REQUEST, &id, jsonrpc::INVALID_REQUEST, format!("Invalid Request: {e}")));
            }
            Err(e) => return Err(refuse(StatusCode::BAD_REQUEST, &Value::Null, jsonrpc::PARSE_ERROR, format!("Parse error: {e}"))),
        },
        Err(e) => return Err(refuse(StatusCode::BAD_REQUEST, &Value::Null, jsonrpc::PARSE_ERROR, format!("Parse error: {e}"))),
    };
    let id = match request_id(&message) {
        Ok(id) => id,
        Err(wrong) => {
            let text = format!("Invalid Request: {wrong}; use a string or an integer");
            return Err(refuse(StatusCode::BAD_REQUEST, &Value::Null, jsonrpc::INVALID_REQUEST, text));
        }
    };
    match &message {
        Value::Object(_) if plain_tool_call(&message) => {
            debug_assert!(read_by_rmcp(&message).is_ok(), "rmcp refuses a plain tools/call: {message}");
        }
        Value::Object(_) => match read_by_rmcp(&message) {
            Err(e) => {
                return Err(refuse(StatusCode::BAD_REQUEST, &id, jsonrpc::INVALID_REQUEST, format!("Invalid Request: not a JSON-RPC message an MCP client sends ({e})")));
            }
            Ok(read) => {
                if let Some((status, code, text)) = params_refusal(&message, &read) {
                    return Err(refuse(status, &id, code, text));
                }
            }
        },
        _ => {
            let text = "Invalid Request: expected a JSON-RPC message (an object)";
            return Err(refuse(StatusCode::BAD_REQUEST, &Value::Null, jsonrpc::INVALID_REQUEST, text.to_string()));
        }
    }
    let mut parts = parts;
    parts.extensions.insert(Gated(message));
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

/// The id a refusal of `message` answers: its own (a string, a 64-bit integer; `null` when it
/// has none), or what is wrong with it. An id no request can have is answered with `"id": null`
/// (JSON-RPC's "could not be determined") and named by its type, not echoed: it could be any
/// size, and a number echoed rounded would name another request.
fn request_id(message: &Value) -> Result<Value, String> {
    match message.get("id") {
        None => Ok(Value::Null),
        Some(number) if number.is_f64() => Err(format!("the id {number} is a number but not an integer of 64 bits")),
        Some(Value::Bool(_)) => Err("the id is a boolean".to_string()),
        Some(Value::Array(_)) => Err("the id is an array".to_string()),
        Some(Value::Object(_)) => Err("the id is an object".to_string()),
        Some(id) => Ok(id.clone()),
    }
}

/// The refusal of a request whose params do not fit its method (see the module docs): HTTP
/// status, JSON-RPC code and message, or `None` when they fit (or the method is not MCP's).
fn params_refusal(message: &Value, read: &rmcp::model::ClientJsonRpcMessage) -> Option<(StatusCode, i32, String)> {
    let rmcp::model::JsonRpcMessage::Request(request) = read else { return None };
    let method = message.get("method").and_then(Value::as_str)?;
    let params = message.get("params");
    let problem = match &request.request {
        // rmcp read the request as an unknown method: for one of MCP's own, its params did not fit.
        rmcp::model::ClientRequest::CustomRequest(_) => params_problem(method, params)?,
        _ => retry_problem(params)?,
    };
    if removed_in_2026(method) && is_modern(params) {
        return Some((StatusCode::NOT_FOUND, jsonrpc::METHOD_NOT_FOUND, format!("Method not found: {method} (removed in MCP 2026-07-28)")));
    }
    Some((StatusCode::BAD_REQUEST, jsonrpc::INVALID_PARAMS, format!("Invalid params for {method}: {problem}")))
}

/// Methods the 2026-07-28 revision removed: a request of that revision for one is unknown.
fn removed_in_2026(method: &str) -> bool {
    matches!(method, "logging/setLevel" | "resources/subscribe" | "resources/unsubscribe")
}

/// Whether the request says it is of the 2026-07-28 revision or later (its `_meta` envelope).
fn is_modern(params: Option<&Value>) -> bool {
    params
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
        .and_then(Value::as_str)
        .is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str())
}

/// Why `params` do not read as the params of MCP's `method`, naming the field; `None` when they
/// do, or when `method` is not one of MCP's requests.
#[allow(deprecated)] // logging/setLevel and resources/(un)subscribe are still served to initialize-era clients
pub fn params_problem(method: &str, params: Option<&Value>) -> Option<String> {
    use rmcp::model::*;
    /// Required params of type `T`.
    fn required<T: serde::de::DeserializeOwned>(params: Option<&Value>) -> Option<String> {
        match params {
            None => Some("params are missing".to_string()),
            Some(params) => typed::<T>(params),
        }
    }
    /// Optional params of type `T` (absent or `null` is fine).
    fn optional<T: serde::de::DeserializeOwned>(params: Option<&Value>) -> Option<String> {
        params.filter(|p| !p.is_null()).and_then(typed::<T>)
    }
    fn typed<T: serde::de::DeserializeOwned>(params: &Value) -> Option<String> {
        if let Some(meta) = params.get("_meta").filter(|m| !m.is_object()) {
            return Some(format!("params._meta must be an object, not {}", kind_of(meta)));
        }
        match serde_path_to_error::deserialize::<_, T>(params) {
            Ok(_) => retry_problem(Some(params)),
            Err(e) if e.path().iter().next().is_none() => Some(format!("params: {}", e.inner())),
            Err(e) => Some(format!("params.{}: {}", e.path(), e.inner())),
        }
    }
    match method {
        "initialize" => required::<InitializeRequestParams>(params),
        "server/discover" => optional::<DiscoverRequestParams>(params),
        "completion/complete" => required::<CompleteRequestParams>(params),
        "logging/setLevel" => required::<SetLevelRequestParams>(params),
        "prompts/get" => required::<GetPromptRequestParams>(params),
        "prompts/list" | "resources/list" | "resources/templates/list" | "tools/list" | "skills/list" => {
            optional::<PaginatedRequestParams>(params)
        }
        "resources/read" => required::<ReadResourceRequestParams>(params),
        "resources/directory/read" => required::<ReadResourceDirectoryRequestParams>(params),
        "subscriptions/listen" => required::<SubscriptionsListenRequestParams>(params),
        "resources/subscribe" => required::<SubscribeRequestParams>(params),
        "resources/unsubscribe" => required::<UnsubscribeRequestParams>(params),
        "tools/call" => required::<CallToolRequestParams>(params),
        "tasks/get" => required::<GetTaskParams>(params),
        "tasks/update" => required::<UpdateTaskParams>(params),
        "tasks/cancel" => required::<CancelTaskParams>(params),
        "skills/get" => required::<GetSkillRequestParams>(params),
        _ => None,
    }
}

/// A retry's keys (2026-07-28) when present must have their types: serde reads a `null` for
/// either as absent, and the call would run as a first try with the client's answers dropped.
fn retry_problem(params: Option<&Value>) -> Option<String> {
    let params = params?.as_object()?;
    match (params.get("inputResponses"), params.get("requestState")) {
        (Some(answers), _) if !answers.is_object() => {
            Some(format!("params.inputResponses must be an object (the answers by input key), not {}", kind_of(answers)))
        }
        (_, Some(state)) if !state.is_string() => Some(format!("params.requestState must be the string the server sent, not {}", kind_of(state))),
        _ => None,
    }
}

/// Whether rmcp reads `message` as a message a client sends (its typed parse, by reference).
fn read_by_rmcp(message: &Value) -> Result<rmcp::model::ClientJsonRpcMessage, serde_json::Error> {
    <rmcp::model::ClientJsonRpcMessage as serde::Deserialize>::deserialize(message)
}

/// A `tools/call` request in its plainest form — `jsonrpc`, an integer or string `id`, `method`
/// and `params` with a string `name`, an object `arguments` and an object `_meta` (the last two
/// optional), no other key at either level — which rmcp reads whatever the values inside
/// `arguments` and `_meta` (it keeps both as JSON objects). Such a request skips rmcp's typed
/// parse here: it was ~5 % of the gateway's CPU per proxied call (serde's buffered
/// untagged/flatten paths). Debug builds, which the fuzz targets run, still parse and assert.
fn plain_tool_call(message: &Value) -> bool {
    let Some(request) = message.as_object() else { return false };
    let Some(Value::Object(params)) = request.get("params") else { return false };
    request.len() == 4
        && request.get("jsonrpc").and_then(Value::as_str) == Some(jsonrpc::VERSION)
        && request.get("method").and_then(Value::as_str) == Some("tools/call")
        && request.get("id").is_some_and(|id| id.is_string() || id.is_i64())
        && params.get("name").is_some_and(Value::is_string)
        && params.get("_meta").is_none_or(Value::is_object)
        && arguments::are_plain(params, Some(&["name", "_meta"]))
}

/// The message of a POST that passed the gate, on the request's extensions, so that what comes
/// after (`pass_through.rs`) need not parse the body again. The body is still there, unchanged.
#[derive(Clone)]
pub struct Gated(pub Value);

/// A JSON document read into a [`Value`] while checking that no object in it repeats a key or
/// has two keys that differ only in case; the error (serde's data category) names them.
struct Strict(Value);

impl<'de> serde::Deserialize<'de> for Strict {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

/// A key as keys are compared: its Unicode lowercase (ASCII keys, nearly all, without a copy
/// unless they hold an uppercase letter).
fn folded(key: &str) -> Cow<'_, str> {
    if key.is_ascii() {
        if key.bytes().any(|b| b.is_ascii_uppercase()) { Cow::Owned(key.to_ascii_lowercase()) } else { Cow::Borrowed(key) }
    } else {
        Cow::Owned(key.to_lowercase())
    }
}

/// Whether two keys fold alike ([`folded`]), comparing ASCII keys in place.
fn fold_alike(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() { a.eq_ignore_ascii_case(b) } else { folded(a) == folded(b) }
}

/// An object's keys past this many are checked through a hash set of their folded forms;
/// before, each against the object's keys so far (no copy, no set to build for the few keys
/// of a JSON-RPC message's objects). Comparing every key with every earlier one held a
/// worker for seconds on a 1 MB body of one 100,000-key object.
const FEW_KEYS: usize = 16;

/// An object key, borrowed from the body when it holds no escape.
struct Key<'de>(Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> serde::de::Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object key")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(v.to_string())))
    }
    fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(v)))
    }
}

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = Strict;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Strict, A::Error> {
        let mut object = serde_json::Map::new();
        // The folded keys, once the object has more than a few.
        let mut many: Option<std::collections::HashSet<String>> = None;
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            let repeated = match &mut many {
                Some(set) => !set.insert(folded(&key).into_owned()),
                None if object.len() < FEW_KEYS => object.keys().any(|k| fold_alike(k, &key)),
                None => {
                    let set = many.insert(object.keys().map(|k| folded(k).into_owned()).collect());
                    !set.insert(folded(&key).into_owned())
                }
            };
            if repeated {
                // Rare: the key as written earlier is looked for among the object's keys.
                let earlier = object.keys().find(|k| fold_alike(k, &key)).cloned().unwrap_or_default();
                return Err(serde::de::Error::custom(if earlier == key {
                    format!("the key \"{key}\" appears twice in one object")
                } else {
                    format!("the keys \"{earlier}\" and \"{key}\" of one object differ only in case")
                }));
            }
            let Strict(value) = map.next_value::<Strict>()?;
            object.insert(key.into_owned(), value);
        }
        Ok(Strict(Value::Object(object)))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Strict, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(item)) = seq.next_element::<Strict>()? {
            items.push(item);
        }
        Ok(Strict(Value::Array(items)))
    }

    fn visit_bool<E>(self, v: bool) -> Result<Strict, E> {
        Ok(Strict(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Strict, E> {
        Ok(Strict(Value::from(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Strict, E> {
        Ok(Strict(Value::from(v)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Strict, E> {
        Ok(Strict(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Strict, E> {
        Ok(Strict(Value::String(v.to_string())))
    }
    fn visit_string<E>(self, v: String) -> Result<Strict, E> {
        Ok(Strict(Value::String(v)))
    }
    fn visit_unit<E>(self) -> Result<Strict, E> {
        Ok(Strict(Value::Null))
    }
}

pub(crate) fn refuse(status: StatusCode, id: &Value, code: i32, message: String) -> Response {
    let body = json!({ "jsonrpc": jsonrpc::VERSION, "id": id, "error": { "code": code, "message": message } });
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

#[cfg(test)]
mod tests {
    use super::{params_refusal, plain_tool_call, read_by_rmcp, Strict};
    use axum::http::StatusCode;
    use serde_json::{json, Value};

    fn check(body: &str) -> Result<(), String> {
        let read = serde_json::from_slice::<Strict>(body.as_bytes()).map_err(|e| e.to_string())?;
        assert_eq!(read.0, serde_json::from_str::<Value>(body).unwrap(), "the same value as serde_json reads");
        Ok(())
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
        check(r#"{"n":[-1,18446744073709551615,1.5e300,-0.0,1e-7],"s":"\u00e9\n","t":true,"f":false,"z":null,"o":{},"a":[]}"#).unwrap();
    }

    #[test]
    fn a_plain_tool_call_is_one_rmcp_reads_and_nothing_else_is_taken_for_one() {
        let meta = json!({ "io.modelcontextprotocol/protocolVersion": "2026-07-28", "x": [1, { "y": null }] });
        let plain = [
            json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "echo" } }),
            json!({ "jsonrpc": "2.0", "id": "a", "method": "tools/call", "params": { "name": "", "arguments": {}, "_meta": {} } }),
            json!({ "jsonrpc": "2.0", "id": i64::MIN, "method": "tools/call", "params": { "name": "e", "arguments": { "task": 1, "name": [] }, "_meta": meta } }),
            json!({ "jsonrpc": "2.0", "id": i64::MAX as u64, "method": "tools/call", "params": { "_meta": { "progressToken": [] }, "name": "e" } }),
        ];
        for message in &plain {
            assert!(plain_tool_call(message), "{message}");
            assert!(read_by_rmcp(message).is_ok(), "{message}");
        }
        let not_plain = [
            json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": 1 } }),
            json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "e", "arguments": [] } }),
            json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "e", "_meta": "m" } }),
            json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "e", "task": {} } }),
            json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "e", "requestState": 5 } }),
            json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "arguments": {} } }),
            json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": [] }),
            json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call" }),
            json!({ "jsonrpc": "2.0", "id": 1.5, "method": "tools/call", "params": { "name": "e" } }),
            json!({ "jsonrpc": "2.0", "id": u64::MAX, "method": "tools/call", "params": { "name": "e" } }),
            json!({ "jsonrpc": "2.0", "id": null, "method": "tools/call", "params": { "name": "e" } }),
            json!({ "jsonrpc": "2.0", "method": "tools/call", "params": { "name": "e" } }),
            json!({ "jsonrpc": "1.0", "id": 1, "method": "tools/call", "params": { "name": "e" } }),
            json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": { "name": "e" } }),
            json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "e" }, "result": {} }),
        ];
        for message in &not_plain {
            assert!(!plain_tool_call(message), "{message}");
        }
    }

    /// The gate's answer to a message rmcp reads: `None` when it passes.
    fn refusal(message: Value) -> Option<(StatusCode, i32, String)> {
        let read = read_by_rmcp(&message).unwrap_or_else(|e| panic!("rmcp reads {message}: {e}"));
        params_refusal(&message, &read)
    }

    #[test]
    fn badly_typed_params_of_mcps_methods_are_invalid_params_naming_the_field() {
        let call = |params: Value| json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params });
        for (params, field) in [
            (json!({ "name": "echo", "arguments": "{}" }), "params.arguments"),
            (json!({ "name": "echo", "arguments": [1] }), "params.arguments"),
            (json!({ "name": "echo", "arguments": 5 }), "params.arguments"),
            (json!({ "name": 5, "arguments": {} }), "params.name"),
            (json!({ "arguments": {} }), "name"),
            (json!({ "name": "echo", "inputResponses": 5 }), "params.inputResponses"),
            (json!({ "name": "echo", "inputResponses": null, "requestState": "s" }), "params.inputResponses"),
            (json!({ "name": "echo", "inputResponses": {}, "requestState": null }), "params.requestState"),
        ] {
            let (status, code, message) = refusal(call(params.clone())).unwrap_or_else(|| panic!("{params} passed"));
            assert_eq!((status, code), (StatusCode::BAD_REQUEST, -32602), "{params}: {message}");
            assert!(message.starts_with("Invalid params for tools/call: ") && message.contains(field), "{params}: {message}");
        }
        let read = json!({ "jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": { "uri": 5 } });
        assert!(refusal(read).unwrap().2.contains("params.uri"));
        let prompt = json!({ "jsonrpc": "2.0", "id": 1, "method": "prompts/get", "params": { "name": ["p"] } });
        assert!(refusal(prompt).unwrap().2.contains("params.name"));
        // Well-typed requests, and methods that are not MCP's, pass.
        for ok in [
            call(json!({ "name": "echo", "arguments": { "x": [1] }, "inputResponses": { "k": { "action": "accept" } }, "requestState": "s" })),
            json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }),
            json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": null }),
            json!({ "jsonrpc": "2.0", "id": 1, "method": "x/custom", "params": { "arguments": "free" } }),
            json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
        ] {
            assert_eq!(refusal(ok.clone()), None, "{ok}");
        }
    }

    #[test]
    fn methods_removed_in_2026_are_not_found_for_its_requests_whatever_their_params() {
        let meta = json!({ "io.modelcontextprotocol/protocolVersion": "2026-07-28" });
        for method in ["logging/setLevel", "resources/subscribe", "resources/unsubscribe"] {
            let modern = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": { "_meta": meta } });
            let (status, code, message) = refusal(modern).unwrap();
            assert_eq!((status, code), (StatusCode::NOT_FOUND, -32601), "{method}: {message}");
            assert!(message.contains(method), "{message}");
            // An initialize-era request with unreadable params: invalid params.
            let legacy = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": {} });
            assert_eq!(refusal(legacy).unwrap().1, -32602, "{method}");
        }
    }
}
