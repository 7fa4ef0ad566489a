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

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

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
    /// The table the call is registered in, told of each upstream request ([`CallRelay::sent`]).
    relays: Weak<Relays>,
}

#[derive(Default)]
struct Upstream {
    request_ids: Vec<RequestId>,
    progress_tokens: Vec<ProgressToken>,
}

impl CallRelay {
    /// Records an upstream request sent for this call (MRTR rounds send several).
    pub fn sent(&self, request_id: RequestId, progress_token: ProgressToken) {
        {
            let mut up = self.upstream.lock();
            up.request_ids.push(request_id.clone());
            up.progress_tokens.push(progress_token.clone());
        }
        if let Some(relays) = self.relays.upgrade() {
            relays.table.lock().index_sent(self, request_id, progress_token);
        }
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
    table: Mutex<Table>,
    seq: AtomicU64,
}

/// The calls in flight, and indexes to find the one an app's message belongs to without a look at
/// every call: an app may send notifications as fast as it likes, and each is routed.
#[derive(Default)]
struct Table {
    /// By call id.
    calls: HashMap<u64, Arc<CallRelay>>,
    /// App → upstream request id → the call it was sent for.
    by_request: HashMap<String, HashMap<RequestId, u64>>,
    /// App → progress token of an upstream request → the call it was sent for.
    by_progress: HashMap<String, HashMap<ProgressToken, u64>>,
    /// App → its calls, by order of registration (`seq` → call id).
    by_seq: HashMap<String, BTreeMap<u64, u64>>,
}

impl Table {
    fn insert(&mut self, call: Arc<CallRelay>) {
        if let Some(old) = self.calls.insert(call.call_id, call.clone()) {
            self.unindex(&old);
        }
        self.by_seq.entry(call.app_id.clone()).or_default().insert(call.seq, call.call_id);
    }

    /// Indexes an upstream request of `call`, if the call is (still) registered. Request ids and
    /// progress tokens are the gateway's own, one per request; were one sent twice, the later
    /// request's call has it.
    fn index_sent(&mut self, call: &CallRelay, request_id: RequestId, progress_token: ProgressToken) {
        if !self.calls.get(&call.call_id).is_some_and(|c| std::ptr::eq(Arc::as_ptr(c), call)) {
            return;
        }
        self.by_request.entry(call.app_id.clone()).or_default().insert(request_id, call.call_id);
        self.by_progress.entry(call.app_id.clone()).or_default().insert(progress_token, call.call_id);
    }

    /// Unregisters `call` (if it is the one registered under its id) and its index entries.
    fn remove(&mut self, call: &Arc<CallRelay>) {
        if self.calls.get(&call.call_id).is_some_and(|c| Arc::ptr_eq(c, call)) {
            self.calls.remove(&call.call_id);
            self.unindex(call);
        }
    }

    /// Drops the index entries that lead to `call`.
    fn unindex(&mut self, call: &CallRelay) {
        let app = call.app_id.as_str();
        let up = call.upstream.lock();
        unindex_keys(&mut self.by_request, app, &up.request_ids, call.call_id);
        unindex_keys(&mut self.by_progress, app, &up.progress_tokens, call.call_id);
        if let Some(calls) = self.by_seq.get_mut(app) {
            if calls.get(&call.seq) == Some(&call.call_id) {
                calls.remove(&call.seq);
            }
            if calls.is_empty() {
                self.by_seq.remove(app);
            }
        }
    }

    fn by_request(&self, app_id: &str, id: &RequestId) -> Option<&Arc<CallRelay>> {
        self.by_request.get(app_id).and_then(|ids| ids.get(id)).and_then(|call_id| self.calls.get(call_id))
    }

    fn by_progress(&self, app_id: &str, token: &ProgressToken) -> Option<&Arc<CallRelay>> {
        self.by_progress.get(app_id).and_then(|tokens| tokens.get(token)).and_then(|call_id| self.calls.get(call_id))
    }

    /// The app's most recently registered call.
    fn latest(&self, app_id: &str) -> Option<&Arc<CallRelay>> {
        self.by_seq.get(app_id).and_then(|calls| calls.last_key_value()).and_then(|(_, call_id)| self.calls.get(call_id))
    }
}

/// Drops the entries of `app` in `index` under `keys` that still lead to `call_id`, and the
/// app's map once it is empty.
fn unindex_keys<K: std::hash::Hash + Eq>(index: &mut HashMap<String, HashMap<K, u64>>, app: &str, keys: &[K], call_id: u64) {
    let Some(entries) = index.get_mut(app) else { return };
    for key in keys {
        if entries.get(key) == Some(&call_id) {
            entries.remove(key);
        }
    }
    if entries.is_empty() {
        index.remove(app);
    }
}

/// Unregisters a call (and ends its open questions) when dropped.
pub struct RelayGuard {
    relays: Arc<Relays>,
    pub call: Arc<CallRelay>,
}

impl Drop for RelayGuard {
    fn drop(&mut self) {
        self.call.ended.cancel();
        self.relays.table.lock().remove(&self.call);
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
            relays: Arc::downgrade(self),
        });
        self.table.lock().insert(call.clone());
        Some(RelayGuard { relays: self.clone(), call })
    }

    pub fn get(&self, call_id: u64) -> Option<Arc<CallRelay>> {
        self.table.lock().calls.get(&call_id).cloned()
    }

    /// The call an app's server-to-client request belongs to: the one whose upstream request it
    /// was sent for, else the app's most recent call.
    pub fn for_request(&self, app_id: &str, upstream_request: Option<&RequestId>) -> Option<Arc<CallRelay>> {
        let table = self.table.lock();
        upstream_request.and_then(|id| table.by_request(app_id, id)).or_else(|| table.latest(app_id)).cloned()
    }

    /// Routes an app's notification to the call it belongs to. Returns whether it was taken
    /// (progress is taken even when its caller asked for none: it concerns nobody else).
    pub fn route_notification(&self, app_id: &str, message: &Value) -> bool {
        match message.get("method").and_then(Value::as_str) {
            Some("notifications/progress") => {
                let Some(token) = message.pointer("/params/progressToken").and_then(progress_token) else {
                    return false;
                };
                let call = self.table.lock().by_progress(app_id, &token).cloned();
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

    use abi_stable::sabi_trait::TD_Opaque;
    use abi_stable::std_types::RStr;
    use host_abi::{HostSink, HostSink_TO, LogLevel, LogRecord, ModuleEvent};

    /// Keeps the call notifications the module sends, as (call id, message).
    #[derive(Clone, Default)]
    struct Notes(Arc<Mutex<Vec<(u64, Value)>>>);

    impl HostSink for Notes {
        fn log_enabled(&self, _level: LogLevel, _target: RStr<'_>) -> bool {
            false
        }
        fn log(&self, _record: LogRecord) {}
        fn event(&self, event: ModuleEvent) {
            let note: host_abi::payloads::CallNotification = serde_json::from_str(event.payload_json.as_str()).unwrap();
            self.0.lock().push((note.call_id, note.message));
        }
    }

    fn request_id(call: u64, round: u64) -> RequestId {
        NumberOrString::Number((call * 10 + round) as i64)
    }

    fn token(call: u64, round: u64) -> ProgressToken {
        ProgressToken(NumberOrString::String(format!("up-{call}-{round}").into()))
    }

    /// 20,000 relayed calls over two apps, each with 5 upstream requests, and 100,000 progress
    /// notifications: each goes to its call by index (once a scan of every call and its tokens
    /// per notification: 10^10 steps). Requests and log messages find their call as before.
    #[test]
    fn many_notifications_find_their_call_by_index() {
        const CALLS: u64 = 20_000;
        const ROUNDS: u64 = 5;
        const NOTES: u64 = 100_000;
        let notes = Notes::default();
        let events = EventSink::new(Arc::new(HostSink_TO::from_value(notes.clone(), TD_Opaque)));
        let relays = Arc::new(Relays::default());
        let app = |call: u64| if call.is_multiple_of(2) { "even" } else { "odd" };
        let guards: Vec<RelayGuard> = (0..CALLS)
            .map(|call| {
                let meta = json!({ "progressToken": format!("client-{call}") });
                let guard = relays.register(call, app(call), Some(vec![]), Some(&meta), &events).unwrap();
                for round in 0..ROUNDS {
                    guard.call.sent(request_id(call, round), token(call, round));
                }
                guard
            })
            .collect();
        for n in 0..NOTES {
            let (call, round) = ((n * 7919) % CALLS, n % ROUNDS);
            let ProgressToken(NumberOrString::String(up)) = token(call, round) else { unreachable!() };
            let message = json!({ "method": "notifications/progress", "params": { "progressToken": &*up, "progress": n } });
            assert!(relays.route_notification(app(call), &message));
        }
        {
            let notes = notes.0.lock();
            assert_eq!(notes.len(), NOTES as usize);
            for (n, (call_id, message)) in notes.iter().enumerate() {
                let call = (n as u64 * 7919) % CALLS;
                assert_eq!(*call_id, call);
                assert_eq!(message["params"]["progressToken"], format!("client-{call}"), "the caller's own token");
                assert_eq!(message["params"]["progress"], n);
            }
        }
        // Another app's token, or an unknown one, is nobody's.
        let stray = json!({ "method": "notifications/progress", "params": { "progressToken": "up-1-0" } });
        assert!(!relays.route_notification("even", &stray));
        assert!(!relays.route_notification("odd", &json!({ "method": "notifications/progress", "params": { "progressToken": "nope" } })));

        assert_eq!(relays.for_request("odd", Some(&request_id(12_345, 3))).unwrap().call_id, 12_345);
        assert_eq!(relays.for_request("even", Some(&request_id(12_345, 3))).unwrap().call_id, CALLS - 2, "not the app's: its latest call");
        assert_eq!(relays.for_request("odd", None).unwrap().call_id, CALLS - 1);
        assert!(relays.for_request("none", None).is_none());

        // Calls that end leave the indexes: the latest call is then the one before.
        let mut guards = guards;
        let last_odd = guards.pop().unwrap();
        assert_eq!(last_odd.call.call_id, CALLS - 1);
        drop(last_odd);
        assert_eq!(relays.for_request("odd", None).unwrap().call_id, CALLS - 3);
        assert_eq!(relays.for_request("odd", Some(&request_id(CALLS - 1, 0))).unwrap().call_id, CALLS - 3);
        let up_last = format!("up-{}-0", CALLS - 1);
        assert!(!relays.route_notification("odd", &json!({ "method": "notifications/progress", "params": { "progressToken": up_last } })));
        drop(guards);
        assert!(relays.for_request("odd", None).is_none() && relays.for_request("even", None).is_none());
        let table = relays.table.lock();
        assert!(table.calls.is_empty() && table.by_request.is_empty() && table.by_progress.is_empty() && table.by_seq.is_empty());
    }
}
