//! Resource subscriptions held at the apps for the clients of both MCP endpoints.
//!
//! An app has one upstream session, whoever subscribes through it: `/mcp` and
//! `/apps/mcp/{appId}` sessions, `subscriptions/listen` streams of either. So the app is asked
//! once per URI however many clients want it, and let go when the last one unsubscribes or
//! ends — one client's `resources/unsubscribe` never takes another's updates away.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use host_abi::AppRequest;
use parking_lot::Mutex;
use rmcp::ErrorData;

use crate::module::host::ModuleHost;

/// The upstream subscriptions, counted per app (registry key) and the app's own URI.
pub struct ResourceHolds {
    module: Arc<ModuleHost>,
    held: Mutex<HashMap<(String, String), usize>>,
}

impl ResourceHolds {
    pub fn new(module: Arc<ModuleHost>) -> Arc<ResourceHolds> {
        Arc::new(ResourceHolds { module, held: Mutex::new(HashMap::new()) })
    }

    /// Keeps `uri` of app `key` subscribed; the first hold asks the app (its refusal is the
    /// answer, and nothing is held then).
    pub async fn hold(&self, key: &str, uri: &str) -> Result<(), ErrorData> {
        let entry = (key.to_string(), uri.to_string());
        let first = {
            let mut held = self.held.lock();
            let count = held.entry(entry.clone()).or_insert(0);
            *count += 1;
            *count == 1
        };
        if first {
            if let Err(e) = self.ask(key, "resources/subscribe", uri).await {
                self.held.lock().remove(&entry);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Lets go of one [`Self::hold`]; the last one unsubscribes at the app.
    pub async fn release(&self, key: &str, uri: &str) {
        let entry = (key.to_string(), uri.to_string());
        let last = {
            let mut held = self.held.lock();
            match held.get_mut(&entry) {
                Some(count) if *count > 1 => {
                    *count -= 1;
                    false
                }
                Some(_) => {
                    held.remove(&entry);
                    true
                }
                None => false,
            }
        };
        if last {
            if let Err(e) = self.ask(key, "resources/unsubscribe", uri).await {
                tracing::debug!(app = key, "resources/unsubscribe {uri}: {}", e.message);
            }
        }
    }

    async fn ask(&self, key: &str, method: &str, uri: &str) -> Result<(), ErrorData> {
        let mut params = serde_json::Map::new();
        params.insert("uri".into(), uri.into());
        let request = AppRequest { any_provider: true, ..super::mcp_relay::app_request(self.module.next_call_id(), key, method, &params) };
        super::answer::result_of(key, method, self.module.forward(request).await).map(|_| ())
    }
}

/// What one client session holds: each (app, URI) once, released when the session ends.
pub struct SessionHolds {
    holds: Arc<ResourceHolds>,
    held: Mutex<HashSet<(String, String)>>,
}

impl SessionHolds {
    pub fn new(holds: Arc<ResourceHolds>) -> SessionHolds {
        SessionHolds { holds, held: Mutex::new(HashSet::new()) }
    }

    /// The session's `resources/subscribe` (a second one of the same URI changes nothing).
    pub async fn subscribe(&self, key: &str, uri: &str) -> Result<(), ErrorData> {
        let entry = (key.to_string(), uri.to_string());
        if !self.held.lock().insert(entry.clone()) {
            return Ok(());
        }
        let held = self.holds.hold(key, uri).await;
        if held.is_err() {
            self.held.lock().remove(&entry);
        }
        held
    }

    /// The session's `resources/unsubscribe` (of a URI it did not subscribe: nothing).
    pub async fn unsubscribe(&self, key: &str, uri: &str) {
        if self.held.lock().remove(&(key.to_string(), uri.to_string())) {
            self.holds.release(key, uri).await;
        }
    }
}

impl Drop for SessionHolds {
    fn drop(&mut self) {
        let held = std::mem::take(&mut *self.held.lock());
        if held.is_empty() {
            return;
        }
        let holds = self.holds.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                for (key, uri) in held {
                    holds.release(&key, &uri).await;
                }
            });
        }
    }
}
