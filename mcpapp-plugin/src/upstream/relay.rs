//! Relaying what an app does during a request to the client that made it (SPEC R42).
//!
//! While the gateway forwards a request to an app, the app may report progress, log, or ask the
//! client something (sampling, elicitation, roots). The upstream session is the gateway's own,
//! shared by every caller, so the module keeps a table of the calls in flight that opted in
//! (`host_abi::relay`) and routes each such message to one of them:
//!
//! - progress: by the progress token rmcp put on the upstream request, rewritten to the caller's
//!   own token (a caller that sent none asked for no progress, so none is sent);
//! - server-to-client requests: to the call whose upstream request they were sent for when the
//!   transport says so (Streamable HTTP: the POST's response stream), else — stdio has no such
//!   association — to the most recently started call of that app;
//! - log messages: like requests, to the most recent call of that app (they also still reach the
//!   app's general notification stream).
//!
//! A request is answered by the caller's client through the host (`call.respond`); the client's
//! capabilities decide first, so a caller that cannot sample gets the app a JSON-RPC error
//! instead of a question it cannot answer. When the call ends, its open questions end with it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use rmcp::model::{ErrorCode, NumberOrString, ProgressToken, RequestId};
use rmcp::ErrorData;
use serde_json::{json, Value};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::runtime::events::EventSink;

/// What answers a relayed request: the client's result, or its JSON-RPC error.
pub type Answer = Result<Value, ErrorData>;

/// The capabilities a model-side call's `extra_json` opts it into the relay with
/// (`{"relay": {"clientCapabilities": {…}}}`), by name; `None` when it does not opt in.
pub fn opted_in(extra_json: &str) -> Option<Vec<String>> {
    let extra: Value = serde_json::from_str(extra_json).ok()?;
    let relay = extra.get(host_abi::relay::EXTRA_KEY).filter(|r| r.is_object())?;
    let declared = relay.get("clientCapabilities").and_then(Value::as_object);
    Some(declared.map(|d| d.iter().filter(|(_, v)| !v.is_null()).map(|(k, _)| k.clone()).collect()).unwrap_or_default())
}

/// One call in flight whose client takes part in the relay.
pub struct CallRelay {
    pub call_id: u64,
    app_id: String,
    /// What the calling client declared it can do (`sampling`, `elicitation`, `roots`), by name.
    client_capabilities: Vec<String>,
    /// The caller's own progress token, if it asked for progress.
    client_progress_token: Option<Value>,
    /// Order of registration, so "the most recent call of an app" is well defined.
    seq: u64,
    upstream: Mutex<Upstream>,
    pending: Mutex<HashMap<String, oneshot::Sender<Answer>>>,
    next_key: AtomicU64,
    /// Fires when the call ends: questions still open are answered with an error.
    ended: CancellationToken,
    events: EventSink,
}

#[derive(Default)]
struct Upstream {
    request_ids: Vec<RequestId>,
    progress_tokens: Vec<ProgressToken>,
}

impl CallRelay {
    /// Records an upstream request sent for this call (MRTR rounds send several).
    pub fn sent(&self, request_id: RequestId, progress_token: ProgressToken) {
        let mut up = self.upstream.lock();
        up.request_ids.push(request_id);
        up.progress_tokens.push(progress_token);
    }

    pub fn client_supports(&self, capability: &str) -> bool {
        self.client_capabilities.iter().any(|c| c == capability)
    }

    /// Sends a notification of this call to its client.
    fn notify(&self, message: Value) {
        self.events.call_notification(&self.app_id, self.call_id, message);
    }

    /// Asks this call's client `method` and waits for its answer. Errors when the client lacks the
    /// capability, when the call ends first, or when the host cannot deliver the answer.
    pub async fn ask(&self, method: &str, params: Value) -> Answer {
        if let Some(capability) = capability_for(method) {
            if !self.client_supports(capability) {
                return Err(ErrorData::new(
                    ErrorCode::METHOD_NOT_FOUND,
                    format!("the client of this call does not support {capability} ('{method}' is unavailable)"),
                    None,
                ));
            }
        }
        let key = self.next_key.fetch_add(1, Ordering::Relaxed).to_string();
        let (tx, rx) = oneshot::channel();
        self.pending.lock().insert(key.clone(), tx);
        let request = json!({ "method": method, "params": params });
        self.events.call_request(&self.app_id, self.call_id, &key, request);
        let answer = tokio::select! {
            answer = rx => answer.unwrap_or_else(|_| Err(call_ended(method))),
            _ = self.ended.cancelled() => Err(call_ended(method)),
        };
        self.pending.lock().remove(&key);
        answer
    }

    /// The host's delivery of the client's answer. Returns whether a question was waiting.
    pub fn respond(&self, key: &str, answer: Answer) -> bool {
        match self.pending.lock().remove(key) {
            Some(tx) => tx.send(answer).is_ok(),
            None => false,
        }
    }
}

fn call_ended(method: &str) -> ErrorData {
    ErrorData::new(ErrorCode::INTERNAL_ERROR, format!("the request that '{method}' belonged to has ended"), None)
}

/// The client capability a server-to-client request needs.
pub fn capability_for(method: &str) -> Option<&'static str> {
    host_abi::relay::REQUEST_CAPABILITIES.iter().find(|(m, _)| *m == method).map(|(_, capability)| *capability)
}

/// The relayed calls of one module instance.
#[derive(Default)]
pub struct Relays {
    calls: Mutex<HashMap<u64, Arc<CallRelay>>>,
    seq: AtomicU64,
}

/// Unregisters a call (and ends its open questions) when dropped.
pub struct RelayGuard {
    relays: Arc<Relays>,
    pub call: Arc<CallRelay>,
}

impl Drop for RelayGuard {
    fn drop(&mut self) {
        self.call.ended.cancel();
        self.relays.calls.lock().remove(&self.call.call_id);
    }
}

impl Relays {
    /// Registers a call that opted into the relay, its client having declared
    /// `client_capabilities` (their names); `None` when it did not opt in. `meta` is the
    /// request's `_meta` (the caller's progress token).
    pub fn register(
        self: &Arc<Self>,
        call_id: u64,
        app_id: &str,
        client_capabilities: Option<Vec<String>>,
        meta: Option<&Value>,
        events: &EventSink,
    ) -> Option<RelayGuard> {
        let client_capabilities = client_capabilities?;
        let call = Arc::new(CallRelay {
            call_id,
            app_id: app_id.to_string(),
            client_capabilities,
            client_progress_token: meta
                .and_then(|m| m.get("progressToken"))
                .filter(|t| t.is_string() || t.is_number())
                .cloned(),
            seq: self.seq.fetch_add(1, Ordering::Relaxed),
            upstream: Mutex::new(Upstream::default()),
            pending: Mutex::new(HashMap::new()),
            next_key: AtomicU64::new(1),
            ended: CancellationToken::new(),
            events: events.clone(),
        });
        self.calls.lock().insert(call_id, call.clone());
        Some(RelayGuard { relays: self.clone(), call })
    }

    pub fn get(&self, call_id: u64) -> Option<Arc<CallRelay>> {
        self.calls.lock().get(&call_id).cloned()
    }

    /// The call an app's server-to-client request belongs to: the one whose upstream request it
    /// was sent for, else the app's most recent call.
    pub fn for_request(&self, app_id: &str, upstream_request: Option<&RequestId>) -> Option<Arc<CallRelay>> {
        let calls = self.calls.lock();
        if let Some(id) = upstream_request {
            if let Some(call) = calls.values().find(|c| c.app_id == app_id && c.upstream.lock().request_ids.contains(id)) {
                return Some(call.clone());
            }
        }
        calls.values().filter(|c| c.app_id == app_id).max_by_key(|c| c.seq).cloned()
    }

    /// Routes an app's notification to the call it belongs to. Returns whether it was taken
    /// (progress is taken even when its caller asked for none: it concerns nobody else).
    pub fn route_notification(&self, app_id: &str, message: &Value) -> bool {
        match message.get("method").and_then(Value::as_str) {
            Some("notifications/progress") => {
                let Some(token) = message.pointer("/params/progressToken").and_then(progress_token) else {
                    return false;
                };
                let call = {
                    let calls = self.calls.lock();
                    calls.values().find(|c| c.app_id == app_id && c.upstream.lock().progress_tokens.contains(&token)).cloned()
                };
                let Some(call) = call else { return false };
                if let Some(client_token) = &call.client_progress_token {
                    let mut message = message.clone();
                    message["params"]["progressToken"] = client_token.clone();
                    call.notify(message);
                }
                true
            }
            Some("notifications/message") => match self.for_request(app_id, None) {
                Some(call) => {
                    call.notify(message.clone());
                    true
                }
                None => false,
            },
            _ => false,
        }
    }
}

fn progress_token(value: &Value) -> Option<ProgressToken> {
    match value {
        Value::String(s) => Some(ProgressToken(NumberOrString::String(s.as_str().into()))),
        Value::Number(n) => n.as_i64().map(|n| ProgressToken(NumberOrString::Number(n))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_gate_requests() {
        assert_eq!(capability_for("sampling/createMessage"), Some("sampling"));
        assert_eq!(capability_for("elicitation/create"), Some("elicitation"));
        assert_eq!(capability_for("roots/list"), Some("roots"));
        assert_eq!(capability_for("ping"), None);
    }

    #[test]
    fn progress_tokens_parse_both_forms() {
        assert_eq!(progress_token(&json!(7)), Some(ProgressToken(NumberOrString::Number(7))));
        assert_eq!(progress_token(&json!("a")), Some(ProgressToken(NumberOrString::String("a".into()))));
        assert_eq!(progress_token(&json!(null)), None);
    }
}
