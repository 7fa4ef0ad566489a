//! Initialize-era MCP sessions of `/apps/mcp` and `/mcp` kept in the shared session store (SPEC
//! R35: any replica answers any browser request). rmcp's Streamable HTTP server persists a
//! session's `initialize` params through its `SessionStore` hook and, when a request names a
//! session this replica does not have, restores it from there; this adapter puts that hook on the
//! gateway's store (Redis). A single-process store shares nothing, and the hook stays unset.

use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::{SessionState, SessionStore, SessionStoreError};

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
