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
}

impl EndpointSessions {
    pub fn new(shared: Option<Arc<dyn SessionStore>>) -> EndpointSessions {
        EndpointSessions { live: Arc::new(LocalSessionManager::default()), shared }
    }

    /// The answer to a `DELETE` naming a session the endpoint does not know: 404, as the
    /// transport spec has it and as rmcp answers every other method (its refusal's text, made a
    /// JSON-RPC error by `endpoint_config::mend_answer`). rmcp itself ends a `DELETE`'s session
    /// without asking whether there is one, and says yes. `None`: the request goes on to rmcp —
    /// also when it names no session (rmcp refuses that) or the store cannot tell.
    pub async fn unknown_deleted(&self, method: &Method, headers: &HeaderMap) -> Option<Response> {
        if method != Method::DELETE {
            return None;
        }
        let id = headers.get("mcp-session-id")?.to_str().ok()?;
        if self.live.has_session(&SessionId::from(id)).await.unwrap_or(true) {
            return None;
        }
        if let Some(shared) = &self.shared {
            if !matches!(shared.load(id).await, Ok(None)) {
                return None;
            }
        }
        Some((StatusCode::NOT_FOUND, "Not Found: Session not found").into_response())
    }
}
