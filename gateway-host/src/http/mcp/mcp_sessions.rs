//! Initialize-era MCP sessions of `/apps/mcp` and `/mcp` kept in the shared session store (SPEC
//! R35: any replica answers any browser request). rmcp's Streamable HTTP server persists a
//! session's `initialize` params through its `SessionStore` hook and, when a request names a
//! session this replica does not have, restores it from there; this adapter puts that hook on the
//! gateway's store (Redis). A single-process store shares nothing, and the hook stays unset.

use std::sync::{Arc, Weak};
use std::time::Duration;

use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{SessionId, SessionManager, SessionState, SessionStore, SessionStoreError};
use tokio_util::sync::CancellationToken;

use crate::chat::store::SessionStore as GatewayStore;

pub struct SharedMcpSessions(pub Arc<dyn GatewayStore>);

#[async_trait::async_trait]
impl SessionStore for SharedMcpSessions {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        match self.0.mcp_session(session_id).await? {
            Some(state) => Ok(Some(serde_json::from_value(state)?)),
            None => Ok(None),
        }
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        Ok(self.0.put_mcp_session(session_id, &serde_json::to_value(state)?).await?)
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        Ok(self.0.delete_mcp_session(session_id).await?)
    }
}

/// The hook for rmcp's server config: `Some` when the store is shared by replicas.
pub fn for_store(store: &Arc<dyn GatewayStore>) -> Option<Arc<dyn SessionStore>> {
    store.is_shared().then(|| Arc::new(SharedMcpSessions(store.clone())) as Arc<dyn SessionStore>)
}

/// The initialize-era sessions of one MCP endpoint: those live on this replica (rmcp's session
/// manager) and, with replicas, those in the shared store.
#[derive(Clone)]
pub struct EndpointSessions {
    pub live: Arc<LocalSessionManager>,
    pub shared: Option<Arc<dyn SessionStore>>,
    /// The store is shared but a session's requests are not sent to the replica holding it (no
    /// cluster secret, `http/replicas/`): every replica a session's requests reach restores it
    /// and keeps it live, and a `DELETE` ends it only on the replica it lands on.
    unrouted: bool,
}

impl EndpointSessions {
    /// `routed`: requests naming a session go to the replica holding it (`replicas::forward`).
    /// Then the replica holding a session reads its shared record only to restore it, so the
    /// records of the sessions live here are renewed every [`RENEW_EVERY`] until `shutdown`
    /// (unrouted replicas read, and so renew, the record at each request: [`Self::refusal`]).
    pub fn new(shared: Option<Arc<dyn SessionStore>>, routed: bool, shutdown: CancellationToken) -> EndpointSessions {
        Self::renewing_every(RENEW_EVERY, shared, routed, shutdown)
    }

    fn renewing_every(every: Duration, shared: Option<Arc<dyn SessionStore>>, routed: bool, shutdown: CancellationToken) -> EndpointSessions {
        let live = Arc::new(LocalSessionManager::default());
        if let (Some(shared), true) = (&shared, routed) {
            tokio::spawn(renew_live(every, Arc::downgrade(&live), shared.clone(), shutdown));
        }
        EndpointSessions { live, unrouted: shared.is_some() && !routed, shared }
    }

    /// The answer to a request naming a session the endpoint does not have (any more): 404, as
    /// the transport spec has it and as rmcp answers an unknown session (its refusal's text, made
    /// a JSON-RPC error by `endpoint_config::mend_answer`). Two cases rmcp does not see:
    ///
    /// - a `DELETE` of a session neither live here nor in the shared store: rmcp ends a
    ///   `DELETE`'s session without asking whether there is one, and says yes;
    /// - with replicas that do not route sessions ([`EndpointSessions::unrouted`]), any request
    ///   naming a session live here that the shared store no longer has: it was ended on
    ///   another replica (or outlived the store's day), and rmcp would go on serving its live
    ///   copy here. It is closed here too.
    ///
    /// `None`: the request goes on — also when it names no session (rmcp refuses that) or the
    /// store cannot tell. Checked before the short way, which serves known sessions itself.
    pub async fn refusal(&self, method: &Method, headers: &HeaderMap) -> Option<Response> {
        let delete = method == Method::DELETE;
        if !delete && !self.unrouted {
            return None;
        }
        let id = headers.get("mcp-session-id")?.to_str().ok()?;
        let session = SessionId::from(id);
        let live = self.live.has_session(&session).await.unwrap_or(true);
        if (live && !self.unrouted) || (!live && !delete) {
            return None;
        }
        if let Some(shared) = &self.shared {
            if !matches!(shared.load(id).await, Ok(None)) {
                return None;
            }
        }
        if live {
            let _ = self.live.close_session(&session).await;
            tracing::info!("an MCP session ended on another replica (or expired from the shared store) was closed here too");
        }
        Some((StatusCode::NOT_FOUND, "Not Found: Session not found").into_response())
    }
}

/// How often a replica that routes sessions renews the shared records of those live on it: well
/// inside the day a record outlives its last read (`chat::store::SessionStore::mcp_session`).
const RENEW_EVERY: Duration = Duration::from_secs(3600);

/// Reads (so renews) the shared record of each session live on this replica, `every` so often
/// ([`RENEW_EVERY`]), so that one in use for more than a day can still be restored by another
/// replica if this one goes. Ends with the endpoint or at `shutdown`.
async fn renew_live(every: Duration, live: Weak<LocalSessionManager>, shared: Arc<dyn SessionStore>, shutdown: CancellationToken) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let Some(live) = live.upgrade() else { return };
        let ids: Vec<SessionId> = live.sessions.read().await.keys().cloned().collect();
        drop(live);
        for id in ids {
            if let Err(e) = shared.load(&id).await {
                tracing::debug!("cannot renew the shared record of MCP session {id}: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A shared store that records what was read.
    #[derive(Default)]
    struct Reads(Mutex<Vec<String>>);

    #[async_trait::async_trait]
    impl SessionStore for Reads {
        async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
            self.0.lock().unwrap().push(session_id.to_string());
            Ok(None)
        }
        async fn store(&self, _: &str, _: &SessionState) -> Result<(), SessionStoreError> {
            Ok(())
        }
        async fn delete(&self, _: &str) -> Result<(), SessionStoreError> {
            Ok(())
        }
    }

    fn count(reads: &Reads) -> usize {
        reads.0.lock().unwrap().len()
    }

    #[tokio::test]
    async fn a_routing_replica_renews_the_records_of_its_live_sessions_until_shutdown() {
        let often = Duration::from_millis(10);
        let reads = Arc::new(Reads::default());
        let shutdown = CancellationToken::new();
        let sessions = EndpointSessions::renewing_every(often, Some(reads.clone()), true, shutdown.clone());
        let (id, _transport) = sessions.live.create_session().await.unwrap();
        let renewed = async {
            while count(&reads) < 3 {
                tokio::time::sleep(often).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), renewed).await.expect("no three renewals in 10 s");
        assert!(reads.0.lock().unwrap().iter().all(|read| *read == id.to_string()), "{:?}", reads.0.lock().unwrap());
        shutdown.cancel();
        tokio::time::sleep(often * 2).await;
        let at_shutdown = count(&reads);
        tokio::time::sleep(often * 10).await;
        assert_eq!(count(&reads), at_shutdown, "renewed after shutdown");

        // Unrouted replicas read at each request instead; a single process shares nothing.
        for (shared, routed) in [(Some(reads.clone() as Arc<dyn SessionStore>), false), (None, true)] {
            let sessions = EndpointSessions::renewing_every(often, shared, routed, CancellationToken::new());
            sessions.live.create_session().await.unwrap();
            tokio::time::sleep(often * 10).await;
        }
        assert_eq!(count(&reads), at_shutdown, "only a routing replica with a shared store renews");
    }
}
