//! A request of the short way as it goes on the wire, whichever transport carries it: the
//! JSON-RPC request (with the session's envelope and the relay's progress token), the
//! notification that cancels it, and how its response reads.

use std::time::Duration;

use rmcp::model::{NumberOrString, ProgressToken, RequestId};
use serde::ser::{SerializeMap as _, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use crate::runtime::parse_count::{self, Direction};
use crate::upstream::app_result::AppResult;
use crate::upstream::error::UpstreamError;
use crate::upstream::notifier::Notifier;
use crate::upstream::relay::CallRelay;

/// What the short way did with a call.
pub enum Relayed {
    /// The call's outcome, as rmcp's way would have had it.
    Done(Result<AppResult, UpstreamError>),
    /// Not taken (no session to speak for, or the app forgot it): rmcp's way serves it, and
    /// nothing of it reached the app.
    NotTaken,
}

/// The session's end of a call: where its notifications and questions go, and how a cancel is
/// told to the app.
pub struct CallContext<'a> {
    pub notifier: &'a Notifier,
    pub relay: Option<&'a CallRelay>,
    pub cancel: &'a CancellationToken,
    pub timeout: Duration,
    /// The session's per-request envelope, for a session of the 2026-07-28 revision.
    pub envelope: Option<&'a Envelope>,
    /// The called tool mirrors arguments into HTTP headers (`x-mcp-header`): rmcp writes those.
    pub binds_headers: bool,
}

/// What rmcp puts in the `_meta` of every request of a 2026-07-28 session (SEP-2575): the
/// negotiated revision, the gateway's client info and its capabilities.
#[derive(Debug, Clone)]
pub struct Envelope(Map<String, Value>);

impl Envelope {
    pub fn new(protocol_version: &str, client_info: Value, client_capabilities: Value) -> Envelope {
        let mut meta = Map::new();
        meta.insert("io.modelcontextprotocol/protocolVersion".into(), Value::String(protocol_version.into()));
        meta.insert("io.modelcontextprotocol/clientInfo".into(), client_info);
        meta.insert("io.modelcontextprotocol/clientCapabilities".into(), client_capabilities);
        Envelope(meta)
    }
}

/// The JSON-RPC request of a `tools/call` under the short way's `id`, as it goes on the wire. As
/// rmcp does, a call whose client takes part in the relay carries a progress token of the
/// gateway's (the id itself), which the relay maps back to the caller's, and a call on a
/// 2026-07-28 session carries the session's envelope in place of whatever the caller put under
/// those keys.
pub fn tools_call_request(id: &str, params: Option<&Value>, relay: Option<&CallRelay>, envelope: Option<&Envelope>) -> Vec<u8> {
    request_message(id, "tools/call", params, relay, envelope)
}

/// The JSON-RPC request of `method` under the short way's `id`, as [`tools_call_request`] makes a
/// `tools/call`'s.
///
/// Written straight from the caller's `params`, with the `_meta` keys of the gateway's put in as
/// it writes: the params are neither copied nor rebuilt into a new tree (a tool's arguments can
/// be large, and the caller keeps them for another round: `input_required`, or rmcp's way).
pub fn request_message(id: &str, method: &str, params: Option<&Value>, relay: Option<&CallRelay>, envelope: Option<&Envelope>) -> Vec<u8> {
    if let Some(relay) = relay {
        relay.sent(RequestId::String(id.into()), ProgressToken(NumberOrString::String(id.into())));
    }
    let request = Request {
        jsonrpc: "2.0",
        id,
        method,
        params: Params { given: params, meta: Meta { envelope, progress_token: relay.map(|_| id) } },
    };
    // Writing text into memory fails only for a map with non-string keys, which `Value` has not.
    serde_json::to_vec(&request).unwrap_or_default()
}

#[derive(Serialize)]
struct Request<'a> {
    jsonrpc: &'a str,
    id: &'a str,
    method: &'a str,
    params: Params<'a>,
}

/// A request's params: the caller's, with [`Meta`]'s keys in its `_meta`.
struct Params<'a> {
    given: Option<&'a Value>,
    meta: Meta<'a>,
}

/// The `_meta` keys the gateway sets: the session's envelope, the relay's progress token.
struct Meta<'a> {
    envelope: Option<&'a Envelope>,
    progress_token: Option<&'a str>,
}

impl Meta<'_> {
    fn is_empty(&self) -> bool {
        self.envelope.is_none() && self.progress_token.is_none()
    }

    /// Whether the gateway sets `key` (the caller's value under it is left out).
    fn sets(&self, key: &str) -> bool {
        (self.progress_token.is_some() && key == "progressToken") || self.envelope.is_some_and(|Envelope(e)| e.contains_key(key))
    }
}

impl Serialize for Params<'_> {
    /// The caller's params (none: an empty object) with the merged `_meta` where a map sorted by
    /// key, as `Value`'s are, has it: the same text as putting the keys into the tree would give.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let none = Map::new();
        let given = match self.given {
            None => &none,
            Some(Value::Object(map)) => map,
            // Not an object: nothing of the gateway's goes in, and the app says what it thinks.
            Some(other) => return other.serialize(serializer),
        };
        if self.meta.is_empty() {
            return given.serialize(serializer);
        }
        let meta = WithMeta { given: given.get("_meta").and_then(Value::as_object), meta: &self.meta };
        let mut map = serializer.serialize_map(None)?;
        let mut meta_written = false;
        for (key, value) in given {
            if !meta_written && key.as_str() >= "_meta" {
                map.serialize_entry("_meta", &meta)?;
                meta_written = true;
            }
            if key != "_meta" {
                map.serialize_entry(key, value)?;
            }
        }
        if !meta_written {
            map.serialize_entry("_meta", &meta)?;
        }
        map.end()
    }
}

/// The caller's `_meta` (an object, else none) with the gateway's keys set.
struct WithMeta<'a> {
    given: Option<&'a Map<String, Value>>,
    meta: &'a Meta<'a>,
}

impl Serialize for WithMeta<'_> {
    /// The keys in order, as [`Params`] writes its own.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut entries: Vec<(&str, Entry<'_>)> = self.given.into_iter().flatten().filter(|(key, _)| !self.meta.sets(key)).map(|(k, v)| (k.as_str(), Entry::Value(v))).collect();
        if let Some(Envelope(envelope)) = self.meta.envelope {
            entries.extend(envelope.iter().map(|(k, v)| (k.as_str(), Entry::Value(v))));
        }
        if let Some(token) = self.meta.progress_token {
            entries.push(("progressToken", Entry::Text(token)));
        }
        entries.sort_unstable_by_key(|(key, _)| *key);
        let mut map = serializer.serialize_map(Some(entries.len()))?;
        for (key, value) in entries {
            match value {
                Entry::Value(value) => map.serialize_entry(key, value)?,
                Entry::Text(text) => map.serialize_entry(key, text)?,
            }
        }
        map.end()
    }
}

enum Entry<'a> {
    Value(&'a Value),
    Text(&'a str),
}

/// The `notifications/cancelled` that tells the app a request of the short way ended early, as
/// it goes on the wire.
pub fn cancelled_notification(id: &str, reason: &str) -> Vec<u8> {
    let notification = json!({
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": { "requestId": id, "reason": reason },
    });
    serde_json::to_vec(&notification).unwrap_or_default()
}

/// A message of the app's as the short way first reads it: the response to a request (its id a
/// string, no `method`), or anything else (a notification, a question, a response under a
/// number: rmcp's), which whoever wants it reads again.
pub enum Incoming {
    Response { id: String, outcome: Result<AppResult, UpstreamError> },
    Other,
}

/// The members that tell what a message is, the rest left as the app wrote it.
#[derive(Deserialize)]
struct Members<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<&'a RawValue>,
    /// Present, even as `null`.
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(deserializer).map(Some)
}

/// Reads one message of the app's (the one parse of it on this side, counted): what it is, and
/// a response's outcome — its result as the app wrote it, or its error as rmcp's way reports one.
pub fn read_incoming(text: &[u8]) -> Result<Incoming, serde_json::Error> {
    // JSON is UTF-8 throughout: the members skipped unread must be too (a tree of the whole
    // message, as rmcp reads it, would refuse the message for them).
    let text = std::str::from_utf8(text).map_err(|e| <serde_json::Error as serde::de::Error>::custom(format!("not UTF-8: {e}")))?;
    read_incoming_text(text)
}

/// [`read_incoming`] of a message already known to be text (an event's data).
pub fn read_incoming_text(text: &str) -> Result<Incoming, serde_json::Error> {
    let members: Members<'_> = match parse_count::parsed_borrowed(Direction::Answer, text) {
        Ok(members) => members,
        // JSON, but no object or one whose members repeat: not a response the short way takes.
        Err(e) if e.is_data() => return Ok(Incoming::Other),
        Err(e) => return Err(e),
    };
    let id = match (members.id, members.method) {
        (Some(id), None) if id.get().starts_with('"') => serde_json::from_str::<String>(id.get())?,
        _ => return Ok(Incoming::Other),
    };
    let outcome = match (members.result, members.error) {
        (Some(result), _) => Ok(AppResult::Text(result.to_owned())),
        (None, error) => {
            let error: Value = error.map(|e| parse_count::parsed(Direction::Answer, e.get())).transpose()?.unwrap_or(Value::Null);
            Err(UpstreamError::Remote {
                code: error.get("code").and_then(Value::as_i64).unwrap_or(0) as i32,
                message: error.get("message").and_then(Value::as_str).unwrap_or_default().to_string(),
                data: error.get("data").cloned(),
            })
        }
    };
    Ok(Incoming::Response { id, outcome })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: Vec<u8>) -> Value {
        serde_json::from_slice(&text).unwrap()
    }

    /// A call on a 2026-07-28 session carries the session's envelope, whatever the caller put
    /// under the envelope's keys; the rest of the caller's `_meta` goes on.
    #[test]
    fn the_envelope_of_a_2026_07_28_session_replaces_the_callers() {
        let envelope = Envelope::new("2026-07-28", json!({"name": "openclaw-gateway", "version": "1"}), json!({"sampling": {}}));
        let params = json!({
            "name": "echo", "arguments": {"text": "x"},
            "_meta": {"io.modelcontextprotocol/clientInfo": {"name": "browser"}, "sessionId": "s-1"},
        });
        let text = tools_call_request("gw-7", Some(&params), None, Some(&envelope));
        assert!(!String::from_utf8_lossy(&text).contains("browser"), "each key once: {}", String::from_utf8_lossy(&text));
        let request = read(text);
        let meta = &request["params"]["_meta"];
        assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
        assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "openclaw-gateway");
        assert_eq!(meta["io.modelcontextprotocol/clientCapabilities"], json!({"sampling": {}}));
        assert_eq!(meta["sessionId"], "s-1");
        assert_eq!(request["params"]["arguments"], json!({"text": "x"}));
        assert_eq!(request["id"], "gw-7");

        let bare = read(tools_call_request("gw-8", Some(&json!({"name": "echo", "_meta": 3})), None, Some(&envelope)));
        assert_eq!(bare["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
        let old_era = read(tools_call_request("gw-9", Some(&json!({"name": "echo"})), None, None));
        assert!(old_era["params"].get("_meta").is_none(), "{old_era}");
        let no_params = read(tools_call_request("gw-10", None, None, Some(&envelope)));
        assert_eq!(no_params["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    }

    /// A list through the short way is the same request rmcp would send: its method, the
    /// session's envelope on a 2026-07-28 session, the cursor as given.
    #[test]
    fn a_list_request_carries_its_method_and_the_envelope() {
        let envelope = Envelope::new("2026-07-28", json!({"name": "openclaw-gateway", "version": "1"}), json!({}));
        let page = read(request_message("gw-3", "tools/list", Some(&json!({"cursor": "10"})), None, Some(&envelope)));
        assert_eq!((&page["method"], &page["id"], &page["params"]["cursor"]), (&json!("tools/list"), &json!("gw-3"), &json!("10")));
        assert_eq!(page["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
        let first = read(request_message("gw-4", "tools/list", None, None, None));
        assert_eq!(first, json!({"jsonrpc": "2.0", "id": "gw-4", "method": "tools/list", "params": {}}));
    }

    /// The params as written are the text the caller's params with the gateway's keys put into
    /// them would print: the same keys, each once, in the same order; params that are no object
    /// go as they are.
    #[test]
    fn params_are_written_as_the_tree_with_the_gateways_keys_would_print() {
        let envelope = Envelope::new("2026-07-28", json!({"name": "gw"}), json!({}));
        let cases = [
            json!({"name": "echo", "arguments": {"b": [1, 2], "a": "x"}}),
            json!({"A": 1, "Z": 2, "name": "echo", "zz": {"_meta": 1}}),
            json!({"name": "echo", "_meta": {"progressToken": "mine", "io.modelcontextprotocol/clientInfo": 1, "a": 1, "z": {"k": [true]}}}),
            json!({"_meta": "not an object", "name": "echo"}),
            json!({}),
            json!(null),
            json!([1, 2]),
        ];
        for given in &cases {
            for (envelope, token) in [(None, None), (Some(&envelope), None), (None, Some("gw-1")), (Some(&envelope), Some("gw-1"))] {
                let meta = Meta { envelope, progress_token: token };
                let written = serde_json::to_string(&Params { given: Some(given), meta }).unwrap();
                let mut tree = given.clone();
                if let (Value::Object(map), false) = (&mut tree, envelope.is_none() && token.is_none()) {
                    let meta = map.entry("_meta").or_insert_with(|| json!({}));
                    if !meta.is_object() {
                        *meta = json!({});
                    }
                    let meta = meta.as_object_mut().unwrap();
                    if let Some(Envelope(envelope)) = envelope {
                        meta.extend(envelope.clone());
                    }
                    if let Some(token) = token {
                        meta.insert("progressToken".into(), json!(token));
                    }
                }
                assert_eq!(written, tree.to_string(), "{given} with {envelope:?} / {token:?}");
            }
        }
    }

    /// An app's message is read once for what it is: a response under a string id (its result
    /// kept as written, `null` included, or its error as rmcp reports one); anything else —
    /// a number id (rmcp's), a request or notification of the app's, no object, members that
    /// repeat — for whoever reads it whole; text that is no JSON, or not UTF-8, refused.
    #[test]
    fn an_apps_message_is_read_for_what_it_is() {
        let response = |text: &str| match read_incoming(text.as_bytes()).unwrap() {
            Incoming::Response { id, outcome } => Some((id, outcome.map(AppResult::into_text).map_err(|e| e.to_string()))),
            Incoming::Other => None,
        };
        assert_eq!(response(r#"{"jsonrpc":"2.0","id":"gw-1","result":{ "content" : [] }}"#), Some(("gw-1".into(), Ok(r#"{ "content" : [] }"#.into()))));
        assert_eq!(response(r#"{"id":"gw-\u0032","result":null}"#), Some(("gw-2".into(), Ok("null".into()))));
        let failed = response(r#"{"id":"gw-3","error":{"code":-32602,"message":"bad","data":{"x":1}}}"#).unwrap().1.unwrap_err();
        assert!(failed.contains("bad"), "{failed}");
        for other in [r#"{"id":3,"result":{}}"#, r#"{"id":"gw-4","method":"ping"}"#, r#"{"method":"notifications/progress","params":{}}"#, "[1]", r#""gw-1""#, r#"{"id":"gw-5","id":"gw-6","result":{}}"#] {
            assert!(response(other).is_none(), "{other}");
        }
        assert!(read_incoming(b"{\"id\":\"gw-1\",\"result\":").is_err());
        assert!(read_incoming(b"{\"x\":\"\xc5\xd1\",\"id\":\"gw-1\",\"result\":1}").is_err(), "a member not UTF-8, even one not read");
    }

    /// Members nested a million deep are skipped, and a result nested as deep kept as text,
    /// without a stack to overflow; read as a tree, such a result is an error naming the depth.
    #[test]
    fn deeply_nested_answers_are_read_without_recursion() {
        let n = 1_000_000;
        let text = format!(r#"{{"x":{}{},"id":"gw-1","result":{}1{}}}"#, "[".repeat(n), "]".repeat(n), r#"{"a":"#.repeat(n), "}".repeat(n));
        let Ok(Incoming::Response { outcome: Ok(result), .. }) = read_incoming(text.as_bytes()) else { panic!("not read") };
        assert_eq!(result.result_type(), None);
        let refused = result.into_value().unwrap_err().to_string();
        assert!(refused.contains("recursion limit"), "{refused}");
    }
}
