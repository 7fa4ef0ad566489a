//! The initialize-era sessions of `/apps/mcp/{appId}` whose `tools/call`s the short way may
//! answer (`pass_through.rs`), and the calls it is answering in each.
//!
//! rmcp's Streamable HTTP server owns such a session: its worker holds the client's
//! capabilities, routes the client's later POSTs (answers to the server's questions,
//! `notifications/cancelled`) and ends with `DELETE`, an idle timeout or the gateway's shutdown.
//! The short way answers a call without that worker, so what the worker would do for the call
//! is done here, for the sessions where that is little:
//!
//! - a session is known once its client said `notifications/initialized` (the handler
//!   registers it, [`KnownSessions::register`]) and only if the client declared none of
//!   sampling, elicitation, roots and the tasks extension: nothing can then be asked of it
//!   during a call, and no call of it becomes a task;
//! - the [`Registration`] lives in the session's handler, which rmcp drops when the session
//!   ends: the session is forgotten then and its short-way calls are cancelled, as the
//!   session's own requests are;
//! - a `notifications/cancelled` the client posts to the session cancels the short-way call
//!   it names ([`KnownSessions::cancel`]); rmcp still gets the notification (and answers it);
//! - what the app sends during a call (log messages) goes out through the session's peer, so
//!   it takes the stream rmcp gives it (the session's standalone stream), as on rmcp's path.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::http::HeaderMap;
use parking_lot::{Mutex, RwLock};
use rmcp::service::{NotificationContext, Peer, RoleServer};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

/// The questions and extensions that keep a session's calls on rmcp's path.
const ASKING_CAPABILITIES: &[&str] = &["sampling", "elicitation", "roots", "tasks"];

/// The sessions the short way may serve, by `Mcp-Session-Id`.
#[derive(Default)]
pub struct KnownSessions {
    sessions: RwLock<HashMap<String, Arc<KnownSession>>>,
    /// Tells a call's entry from a later one under the same request id.
    next_call: AtomicU64,
}

/// One known session.
pub struct KnownSession {
    /// What the client declared (passed to the module as the relay's client capabilities).
    pub capabilities: Map<String, Value>,
    /// The session's side of rmcp's server: notifications for the client go through it.
    pub peer: Option<Peer<RoleServer>>,
    /// Cancelled when the session ends; every short-way call of the session is its child.
    ended: CancellationToken,
    /// The short-way calls running, by their request id (as JSON text).
    calls: Mutex<HashMap<String, (u64, CancellationToken)>>,
}

/// Keeps a session known for as long as it is held (by the session's handler).
pub struct Registration {
    sessions: Arc<KnownSessions>,
    id: String,
    session: Arc<KnownSession>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut sessions = self.sessions.sessions.write();
        if sessions.get(&self.id).is_some_and(|s| Arc::ptr_eq(s, &self.session)) {
            sessions.remove(&self.id);
        }
        self.session.ended.cancel();
    }
}

/// A short-way call of a session: cancelled by the client, the session's end or the gateway's
/// shutdown; forgotten when dropped.
pub struct SessionCall {
    pub session: Arc<KnownSession>,
    key: String,
    number: u64,
    pub cancelled: CancellationToken,
}

impl Drop for SessionCall {
    fn drop(&mut self) {
        let mut calls = self.session.calls.lock();
        if calls.get(&self.key).is_some_and(|(n, _)| *n == self.number) {
            calls.remove(&self.key);
        }
    }
}

impl KnownSessions {
    /// Registers session `id` of a client that declared `capabilities`, if the short way may
    /// serve it; `shutdown` ends it too.
    pub fn register(self: &Arc<Self>, id: &str, capabilities: Map<String, Value>, peer: Option<Peer<RoleServer>>, shutdown: &CancellationToken) -> Option<Registration> {
        if ASKING_CAPABILITIES.iter().any(|c| capabilities.get(*c).is_some_and(|v| !v.is_null())) {
            return None;
        }
        let session = Arc::new(KnownSession { capabilities, peer, ended: shutdown.child_token(), calls: Mutex::default() });
        self.sessions.write().insert(id.to_string(), session.clone());
        Some(Registration { sessions: self.clone(), id: id.to_string(), session })
    }

    /// Registers the session whose client just said `initialized` (its id from the request's
    /// `Mcp-Session-Id`, its capabilities and peer from rmcp), if the short way may serve it.
    pub fn register_initialized(self: &Arc<Self>, context: &NotificationContext<RoleServer>, shutdown: &CancellationToken) -> Option<Registration> {
        let parts = context.extensions.get::<axum::http::request::Parts>()?;
        let session_id = parts.headers.get("mcp-session-id")?.to_str().ok()?;
        let Ok(Value::Object(capabilities)) = serde_json::to_value(&context.peer.peer_info()?.capabilities) else { return None };
        self.register(session_id, capabilities, Some(context.peer.clone()), shutdown)
    }

    /// The session, if it is known.
    pub fn get(&self, id: &str) -> Option<Arc<KnownSession>> {
        self.sessions.read().get(id).cloned()
    }

    /// Starts tracking the short-way call `request_id` of `session`.
    pub fn call(&self, session: Arc<KnownSession>, request_id: &Value) -> SessionCall {
        let (key, number) = (request_id.to_string(), self.next_call.fetch_add(1, Ordering::Relaxed));
        let cancelled = session.ended.child_token();
        session.calls.lock().insert(key.clone(), (number, cancelled.clone()));
        SessionCall { session, key, number, cancelled }
    }

    /// If `message` (a POST's gated body) is a session client's `notifications/cancelled`, the
    /// short-way call it names is cancelled (rmcp, which gets the notification next, knows only
    /// its own calls).
    pub fn cancelled_by(&self, headers: &HeaderMap, message: &Value) {
        if message.get("method").and_then(Value::as_str) != Some("notifications/cancelled") || message.get("id").is_some() {
            return;
        }
        let session = headers.get("mcp-session-id").and_then(|v| v.to_str().ok());
        if let (Some(session), Some(request_id)) = (session, message.pointer("/params/requestId")) {
            self.cancel(session, request_id);
        }
    }

    /// The client of session `id` cancelled its request `request_id`: the short-way call, if
    /// one runs under that id, is cancelled.
    pub fn cancel(&self, id: &str, request_id: &Value) {
        let Some(session) = self.get(id) else { return };
        let calls = session.calls.lock();
        if let Some((_, token)) = calls.get(&request_id.to_string()) {
            token.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn caps(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn a_session_that_can_be_asked_is_not_registered() {
        let known = Arc::new(KnownSessions::default());
        let shutdown = CancellationToken::new();
        for declared in ["sampling", "elicitation", "roots", "tasks"] {
            assert!(known.register("s", caps(json!({ declared: {} })), None, &shutdown).is_none(), "{declared}");
        }
        assert!(known.register("s", caps(json!({ "experimental": {}, "sampling": null })), None, &shutdown).is_some());
    }

    #[test]
    fn the_sessions_end_forgets_it_and_cancels_its_calls() {
        let known = Arc::new(KnownSessions::default());
        let shutdown = CancellationToken::new();
        let registration = known.register("s", Map::new(), None, &shutdown).unwrap();
        let call = known.call(known.get("s").unwrap(), &json!(7));
        assert!(!call.cancelled.is_cancelled());
        drop(registration);
        assert!(known.get("s").is_none() && known.sessions.read().is_empty());
        assert!(call.cancelled.is_cancelled());
    }

    #[test]
    fn a_cancel_reaches_the_call_it_names_only() {
        let known = Arc::new(KnownSessions::default());
        let shutdown = CancellationToken::new();
        let _registration = known.register("s", Map::new(), None, &shutdown).unwrap();
        let seven = known.call(known.get("s").unwrap(), &json!(7));
        let text_seven = known.call(known.get("s").unwrap(), &json!("7"));
        known.cancel("s", &json!(7));
        known.cancel("other", &json!("7"));
        assert!(seven.cancelled.is_cancelled() && !text_seven.cancelled.is_cancelled());
        drop(seven);
        known.cancel("s", &json!(7));
        assert_eq!(known.get("s").unwrap().calls.lock().len(), 1, "a finished call is forgotten");
        shutdown.cancel();
        assert!(text_seven.cancelled.is_cancelled(), "the gateway's shutdown ends every call");
    }

    #[test]
    fn a_later_registration_under_the_same_id_outlives_the_earlier_one() {
        let known = Arc::new(KnownSessions::default());
        let shutdown = CancellationToken::new();
        let first = known.register("s", Map::new(), None, &shutdown).unwrap();
        let _second = known.register("s", Map::new(), None, &shutdown).unwrap();
        drop(first);
        assert!(known.get("s").is_some());
    }
}
