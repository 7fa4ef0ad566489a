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
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use host_abi::payloads::{CallNotification, CallRequest};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_util::task::AbortOnDropHandle;

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
/// aborts the call's task, whose future, dropped, cancels it in the module (and upstream).
///
/// The call runs as a task of its own on the host's runtime, not inside the future of whoever
/// waits for it. A call is woken several times on its way (the app's answer head, then each
/// chunk of its event stream), and every wake polls the whole task it belongs to: inside an HTTP
/// connection's task that is hyper's dispatcher, axum's layers and the endpoint's handler, each
/// time, for nothing. As a task of its own, only the call is polled on those wakes, and its
/// waiter once, when it ends (`bench load`, 16 concurrent: ~10 % less gateway CPU per call on
/// `/apps/mcp`, ~18 % on `/mcp`; BENCHMARKS.md, "… a call as a task of its own").
pub struct RelayedCall<T> {
    pub call_id: u64,
    events: mpsc::UnboundedReceiver<RelayEvent>,
    response: Response<T>,
    _route: RouteGuard,
}

/// A relayed call's outcome: still with its task, or already taken from it (when an event raced
/// it, [`RelayedCall::next`] hands the event out first and keeps the outcome here).
enum Response<T> {
    Running(AbortOnDropHandle<T>),
    Ended(std::future::Ready<T>),
}

impl<T> Future for Response<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        match self.get_mut() {
            Response::Running(task) => Pin::new(task).poll(cx).map(|ended| match ended {
                Ok(outcome) => outcome,
                // The work panicked: the panic goes on in whoever waits, as it would have had
                // the work run inside their future.
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                // Aborted only by its handle's drop, or by the runtime shutting down, when no one
                // polls any more.
                Err(e) => panic!("a relayed call's task ended without its outcome: {e}"),
            }),
            Response::Ended(outcome) => Pin::new(outcome).poll(cx),
        }
    }
}

impl<T: Send + 'static> RelayedCall<T> {
    /// Listens for `call_id`'s events while `work` (the call itself) runs. The route is open
    /// before the work starts, so nothing the app sends early is lost.
    pub fn start(routes: &Arc<RelayRoutes>, call_id: u64, work: impl Future<Output = T> + Send + 'static) -> Self {
        let (events, route) = routes.open(call_id);
        let task = AbortOnDropHandle::new(tokio::spawn(work));
        RelayedCall { call_id, events, response: Response::Running(task), _route: route }
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
                        self.response = Response::Ended(std::future::ready(result));
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::FutureExt as _;
    use serde_json::json;

    use super::*;

    fn notify(routes: &RelayRoutes, call_id: u64, n: u64) {
        let payload = json!({ "callId": call_id, "message": { "jsonrpc": "2.0", "method": "notifications/progress", "params": { "progress": n } } });
        assert!(routes.dispatch(host_abi::EventKind::CallNotification, &payload));
    }

    /// The call's work runs on its own (it progresses without `next` being polled), and what the
    /// app sent before the result comes out before it.
    #[tokio::test]
    async fn a_calls_work_runs_as_its_own_task_and_its_events_come_first() {
        let routes = Arc::new(RelayRoutes::default());
        let (ran, started) = tokio::sync::oneshot::channel();
        let sender = routes.clone();
        let mut call = RelayedCall::start(&routes, 7, async move {
            notify(&sender, 7, 1);
            notify(&sender, 7, 2);
            let _ = ran.send(());
            "done"
        });
        // Nobody polls the call; its task runs anyway.
        tokio::time::timeout(Duration::from_secs(5), started).await.expect("the work runs by itself").unwrap();
        for n in [1, 2] {
            match call.next().await {
                Step::Event(RelayEvent::Notification(message)) => assert_eq!(message["params"]["progress"], n),
                _ => panic!("expected notification {n} first"),
            }
        }
        assert!(matches!(call.next().await, Step::Done("done")));
    }

    /// Dropping the call drops its work (which is how a call is cancelled in the module).
    #[tokio::test]
    async fn dropping_a_call_drops_its_work() {
        struct Dropped(Option<tokio::sync::oneshot::Sender<()>>);
        impl Drop for Dropped {
            fn drop(&mut self) {
                let _ = self.0.take().map(|tx| tx.send(()));
            }
        }
        let routes = Arc::new(RelayRoutes::default());
        let (tx, dropped) = tokio::sync::oneshot::channel();
        let guard = Dropped(Some(tx));
        let call = RelayedCall::start(&routes, 8, async move {
            let _guard = guard;
            std::future::pending::<()>().await
        });
        tokio::task::yield_now().await;
        drop(call);
        tokio::time::timeout(Duration::from_secs(5), dropped).await.expect("the work is dropped").unwrap();
        assert!(routes.senders.lock().is_empty(), "the route closes with the call");
    }

    /// A panic in the work reaches whoever waits for the call, as it would inside their future.
    #[tokio::test]
    async fn a_panic_in_the_work_reaches_its_waiter() {
        let routes = Arc::new(RelayRoutes::default());
        let mut call = RelayedCall::start(&routes, 9, async { panic!("the work broke") });
        let waited = std::panic::AssertUnwindSafe(call.next()).catch_unwind().await;
        let payload = waited.err().expect("the panic goes on in the waiter");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"the work broke"));
    }
}
