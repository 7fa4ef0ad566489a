//! The host's half of the relay (SPEC R42): what an app sends during a request — progress, log
//! messages, questions for the client (sampling, elicitation, roots) — reaches the client that
//! made the request, on `/apps/mcp/{appId}` and on `/mcp`.
//!
//! The module reports a relayed call's messages as `call.*` events (`host_abi::relay`); the sink
//! hands them to the one [`RelayedCall`] waiting for them here instead of broadcasting them. An
//! endpoint drives a call with [`RelayedCall::next`] — events first, so notifications always
//! precede the result — and answers questions through [`crate::module::host::ModuleHost::respond`].
//!
//! A client of the stateless 2026-07-28 revision answers questions by retrying its request
//! (multi-round-trip `input_required` results): between rounds the call waits in [`Parked`],
//! found again by the opaque `requestState` handed to the client.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use host_abi::payloads::{CallNotification, CallRequest};
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// How long a call waits for a multi-round-trip client to come back with its answers.
pub const PARK_TTL: Duration = Duration::from_secs(600);

/// A message an app sent for one call.
#[derive(Debug, Clone)]
pub enum RelayEvent {
    /// A JSON-RPC notification, ready to send to the client as it is.
    Notification(Value),
    /// A question for the client; answer it with the key.
    Request { key: String, method: String, params: Value },
}

impl RelayEvent {
    /// The question as a JSON-RPC request object without id (`{"method", "params"}`).
    pub fn request_body(method: &str, params: &Value) -> Value {
        json!({ "method": method, "params": params })
    }
}

/// Where the sink delivers `call.*` events: one channel per relayed call in flight.
#[derive(Default)]
pub struct RelayRoutes {
    senders: Mutex<HashMap<u64, mpsc::UnboundedSender<RelayEvent>>>,
}

impl RelayRoutes {
    /// Takes a module event if it belongs to a relayed call. Never blocks (called on module
    /// threads).
    pub fn dispatch(&self, kind: host_abi::EventKind, payload: &Value) -> bool {
        let (call_id, event) = match kind {
            host_abi::EventKind::CallNotification => {
                let CallNotification { call_id, message } = decode(payload);
                (call_id, RelayEvent::Notification(message))
            }
            host_abi::EventKind::CallRequest => {
                let CallRequest { call_id, key, request } = decode(payload);
                let params = if request.params.is_object() { request.params } else { json!({}) };
                (call_id, RelayEvent::Request { key, method: request.method, params })
            }
            _ => return false,
        };
        if let Some(sender) = self.senders.lock().get(&call_id) {
            let _ = sender.send(event);
        } else {
            tracing::debug!(call_id, "dropping a {kind} event: nobody waits on that call any more");
        }
        true
    }

    fn open(self: &Arc<Self>, call_id: u64) -> (mpsc::UnboundedReceiver<RelayEvent>, RouteGuard) {
        let (tx, rx) = mpsc::unbounded_channel();
        self.senders.lock().insert(call_id, tx);
        (rx, RouteGuard { routes: self.clone(), call_id })
    }
}

struct RouteGuard {
    routes: Arc<RelayRoutes>,
    call_id: u64,
}

impl Drop for RouteGuard {
    fn drop(&mut self) {
        self.routes.senders.lock().remove(&self.call_id);
    }
}

/// What happened next in a relayed call.
pub enum Step<T> {
    Event(RelayEvent),
    Done(T),
}

/// A call in flight whose app may talk to the caller meanwhile. Dropping it stops listening and
/// drops the call's future, which cancels it in the module (and upstream).
pub struct RelayedCall<T> {
    pub call_id: u64,
    events: mpsc::UnboundedReceiver<RelayEvent>,
    response: Pin<Box<dyn Future<Output = T> + Send>>,
    _route: RouteGuard,
}

impl<T: Send + 'static> RelayedCall<T> {
    /// Listens for `call_id`'s events while `work` (the call itself) runs. The route is open
    /// before the work starts, so nothing the app sends early is lost.
    pub fn start(routes: &Arc<RelayRoutes>, call_id: u64, work: impl Future<Output = T> + Send + 'static) -> Self {
        let (events, route) = routes.open(call_id);
        RelayedCall { call_id, events, response: Box::pin(work), _route: route }
    }

    /// The next event, or the result once every event sent before it has been taken. Not to be
    /// called again after `Done`.
    pub async fn next(&mut self) -> Step<T> {
        tokio::select! {
            biased;
            Some(event) = self.events.recv() => Step::Event(event),
            result = &mut self.response => {
                match self.events.try_recv() {
                    // An event raced the result: hand it out first, keep the result for later.
                    Ok(event) => {
                        self.response = Box::pin(std::future::ready(result));
                        Step::Event(event)
                    }
                    Err(_) => Step::Done(result),
                }
            }
        }
    }
}

/// Where a replica records the handles it holds (a parked call's `requestState`, a task's id) so
/// that another replica a client's next request reaches can send it on (`http/replicas/`).
pub trait Claims: Send + Sync {
    /// Records that this replica holds `handle` for `ttl`; done before the client is given it.
    fn claim<'a>(&'a self, handle: &'a str, ttl: Duration) -> futures::future::BoxFuture<'a, ()>;
}

/// Calls waiting between the rounds of a multi-round-trip client, by `requestState`.
pub struct Parked<T> {
    calls: Mutex<HashMap<String, (RelayedCall<T>, Instant)>>,
    /// Set when replicas share the calls' clients: each `requestState` is claimed.
    claims: Option<Arc<dyn Claims>>,
}

impl<T> Default for Parked<T> {
    fn default() -> Self {
        Parked { calls: Mutex::new(HashMap::new()), claims: None }
    }
}

impl<T> Parked<T> {
    /// Parked calls whose `requestState`s are claimed with `claims` (when given).
    pub fn claimed_with(claims: Option<Arc<dyn Claims>>) -> Self {
        Parked { claims, ..Parked::default() }
    }

    /// Keeps a call until its client retries; returns the `requestState` to give the client,
    /// claimed for this replica when replicas share the clients. Calls whose clients never came
    /// back within [`PARK_TTL`] are dropped (and so cancelled).
    pub async fn park(&self, call: RelayedCall<T>) -> String {
        let token = format!("gw-{}-{}", call.call_id, random_hex(16));
        {
            let mut calls = self.calls.lock();
            calls.retain(|_, (_, since)| since.elapsed() < PARK_TTL);
            calls.insert(token.clone(), (call, Instant::now()));
        }
        if let Some(claims) = &self.claims {
            claims.claim(&token, PARK_TTL).await;
        }
        token
    }

    pub fn take(&self, token: &str) -> Option<RelayedCall<T>> {
        self.calls.lock().remove(token).map(|(call, _)| call)
    }
}

/// `n` random bytes as hex (unguessable handles).
pub fn random_hex(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    let _ = getrandom::fill(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A JSON-RPC error object as the module's `call.respond` takes it.
pub fn error_object(code: i32, message: impl Into<String>) -> Value {
    json!({ "code": code, "message": message.into() })
}

/// A typed event payload (`host_abi::payloads`); one that does not decode is the default, whose
/// call id 0 no call has.
fn decode<T: serde::de::DeserializeOwned + Default>(payload: &Value) -> T {
    serde_json::from_value(payload.clone()).unwrap_or_default()
}
