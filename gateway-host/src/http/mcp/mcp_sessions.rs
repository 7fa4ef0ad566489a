//! Initialize-era MCP sessions of `/apps/mcp` and `/mcp` kept in the shared session store (SPEC
//! R35: any replica answers any browser request). rmcp's Streamable HTTP server persists a
//! session's `initialize` params through its `SessionStore` hook and, when a request names a
//! session this replica does not have, restores it from there; this adapter puts that hook on the
//! gateway's store (Redis). A single-process store shares nothing, and the hook stays unset.

use std::sync::Arc;

use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{SessionId, SessionManager, SessionState, SessionStore, SessionStoreError};

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
    pub fn new(shared: Option<Arc<dyn SessionStore>>, routed: bool) -> EndpointSessions {
        let unrouted = shared.is_some() && !routed;
        EndpointSessions { live: Arc::new(LocalSessionManager::default()), shared, unrouted }
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
