//! Whether the chat session store answers, while the gateway runs (SPEC R35, R49).
//!
//! A store shared by replicas (Redis) can go away and come back: Redis restarts, the network
//! drops. Turns that need it meanwhile fail with the store's error, and Redis's connection
//! manager reconnects by itself; what is added here is that the outage shows while it lasts —
//! `/healthz` answers 503 with `sessions.up: false` and the store's error, the metric
//! `gateway_session_store_up` is 0, and the log says once that it went away and once that it
//! came back. A single-process store (SQLite) is always up.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::store::SessionStore;
use crate::metrics::Metrics;

/// How often a shared store is checked when nobody asks.
const WATCH_EVERY: Duration = Duration::from_secs(5);

pub struct StoreHealth {
    store: Arc<dyn SessionStore>,
    metrics: Arc<Metrics>,
    /// The last check's error; `None` while the store answers.
    down: Mutex<Option<String>>,
}

impl StoreHealth {
    pub fn new(store: Arc<dyn SessionStore>, metrics: Arc<Metrics>) -> Arc<StoreHealth> {
        metrics.set_session_store_up(store.kind(), true);
        Arc::new(StoreHealth { store, metrics, down: Mutex::new(None) })
    }

    /// Checks the store now: `Err` with why when it does not answer. Logs a change of state once.
    pub async fn check(&self) -> Result<(), String> {
        let outcome = self.store.check().await.map_err(|e| e.to_string());
        let mut down = self.down.lock();
        match (&outcome, down.is_some()) {
            (Err(why), false) => tracing::warn!("the chat session store does not answer: {why}"),
            (Ok(()), true) => tracing::info!("the chat session store ({}) answers again", self.store.kind()),
            _ => {}
        }
        *down = outcome.as_ref().err().cloned();
        self.metrics.set_session_store_up(self.store.kind(), outcome.is_ok());
        outcome
    }

    /// What `/healthz` says of the store.
    pub fn report(&self, outcome: &Result<(), String>) -> Value {
        match outcome {
            Ok(()) => json!({ "store": self.store.kind(), "up": true }),
            Err(why) => json!({ "store": self.store.kind(), "up": false, "error": why }),
        }
    }

    /// Checks a shared store every few seconds until `stop`, so an outage shows in the metrics
    /// and the log even when nothing asks.
    pub fn watch(self: &Arc<Self>, stop: CancellationToken) {
        if !self.store.is_shared() {
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(WATCH_EVERY) => {}
                }
                let _ = me.check().await;
            }
        });
    }
}
