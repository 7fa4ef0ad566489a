//! A request of the short way as it goes on the wire, whichever transport carries it: the
//! JSON-RPC request (with the session's envelope and the relay's progress token), the
//! notification that cancels it, and how its response reads.

use std::time::Duration;

use rmcp::model::{NumberOrString, ProgressToken, RequestId};
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use crate::upstream::error::UpstreamError;
use crate::upstream::notifier::Notifier;
use crate::upstream::relay::CallRelay;

/// What the short way did with a call.
pub enum Relayed {
    /// The call's outcome, exactly as rmcp's way would have had it.
    Done(Result<Value, UpstreamError>),
    /// Not taken (no session to speak for, or the app forgot it): rmcp's way serves it, and
    /// nothing of it reached the app. The params, given back.
    NotTaken(Option<Value>),
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

/// The JSON-RPC request of a `tools/call` under the short way's `id`. As rmcp does, a call whose
/// client takes part in the relay carries a progress token of the gateway's (the id itself), which
/// the relay maps back to the caller's, and a call on a 2026-07-28 session carries the session's
/// envelope in place of whatever the caller put under those keys.
pub fn tools_call_request(id: &str, params: Option<Value>, relay: Option<&CallRelay>, envelope: Option<&Envelope>) -> Value {
    request_message(id, "tools/call", params, relay, envelope)
}

/// The JSON-RPC request of `method` under the short way's `id`, as [`tools_call_request`] makes a
/// `tools/call`'s.
pub fn request_message(id: &str, method: &str, params: Option<Value>, relay: Option<&CallRelay>, envelope: Option<&Envelope>) -> Value {
    let mut params = params.unwrap_or_else(|| json!({}));
    if let Value::Object(map) = &mut params {
        if relay.is_some() || envelope.is_some() {
            let meta = map.entry("_meta").or_insert_with(|| json!({}));
            if !meta.is_object() {
                *meta = json!({});
            }
            if let Value::Object(meta) = meta {
                if let Some(Envelope(envelope)) = envelope {
                    meta.extend(envelope.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
                if relay.is_some() {
                    meta.insert("progressToken".into(), Value::String(id.to_string()));
                }
            }
        }
    }
    if let Some(relay) = relay {
        relay.sent(RequestId::String(id.into()), ProgressToken(NumberOrString::String(id.into())));
    }
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

/// The `notifications/cancelled` that tells the app a request of the short way ended early.
pub fn cancelled_notification(id: &str, reason: &str) -> Value {
    json!({
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": { "requestId": id, "reason": reason },
    })
}

/// Whether `message` is the response to the request `id` (not a request of the app's that happens
/// to carry the same id).
pub fn is_response_to(message: &Value, id: &str) -> bool {
    message.get("id").and_then(Value::as_str) == Some(id) && message.get("method").is_none()
}

/// A response's outcome: its result, or its error as rmcp's way reports one.
pub fn response_outcome(mut message: Value) -> Result<Value, UpstreamError> {
    if let Some(result) = message.get_mut("result") {
        return Ok(result.take());
    }
    let error = message.get("error").cloned().unwrap_or(Value::Null);
    Err(UpstreamError::Remote {
        code: error.get("code").and_then(Value::as_i64).unwrap_or(0) as i32,
        message: error.get("message").and_then(Value::as_str).unwrap_or_default().to_string(),
        data: error.get("data").cloned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call on a 2026-07-28 session carries the session's envelope, whatever the caller put
    /// under the envelope's keys; the rest of the caller's `_meta` goes on.
    #[test]
    fn the_envelope_of_a_2026_07_28_session_replaces_the_callers() {
        let envelope = Envelope::new("2026-07-28", json!({"name": "openclaw-gateway", "version": "1"}), json!({"sampling": {}}));
        let params = json!({
            "name": "echo", "arguments": {"text": "x"},
            "_meta": {"io.modelcontextprotocol/clientInfo": {"name": "browser"}, "sessionId": "s-1"},
        });
        let request = tools_call_request("gw-7", Some(params), None, Some(&envelope));
        let meta = &request["params"]["_meta"];
        assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
        assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "openclaw-gateway");
        assert_eq!(meta["io.modelcontextprotocol/clientCapabilities"], json!({"sampling": {}}));
        assert_eq!(meta["sessionId"], "s-1");
        assert_eq!(request["params"]["arguments"], json!({"text": "x"}));
        assert_eq!(request["id"], "gw-7");

        let bare = tools_call_request("gw-8", Some(json!({"name": "echo", "_meta": 3})), None, Some(&envelope));
        assert_eq!(bare["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
        let old_era = tools_call_request("gw-9", Some(json!({"name": "echo"})), None, None);
        assert!(old_era["params"].get("_meta").is_none(), "{old_era}");
    }

    /// A list through the short way is the same request rmcp would send: its method, the
    /// session's envelope on a 2026-07-28 session, the cursor as given.
    #[test]
    fn a_list_request_carries_its_method_and_the_envelope() {
        let envelope = Envelope::new("2026-07-28", json!({"name": "openclaw-gateway", "version": "1"}), json!({}));
        let page = request_message("gw-3", "tools/list", Some(json!({"cursor": "10"})), None, Some(&envelope));
        assert_eq!((&page["method"], &page["id"], &page["params"]["cursor"]), (&json!("tools/list"), &json!("gw-3"), &json!("10")));
        assert_eq!(page["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
        let first = request_message("gw-4", "tools/list", None, None, None);
        assert_eq!(first, json!({"jsonrpc": "2.0", "id": "gw-4", "method": "tools/list", "params": {}}));
    }
}
