//! Several replicas behind one load balancer (SPEC R35, R49): any replica answers any request.
//!
//! Most state is shared through the session store already (chat sessions, their turn locks, the
//! opening of initialize-era MCP sessions). What cannot leave a process is a call parked for a
//! 2026-07-28 client's `input_required` retry (it waits on an app process), a running task, and
//! an initialize-era session's streams (its subscriptions, the questions asked on them). Those
//! are *owned*: the replica holding one records it in the store under the handle the client gets
//! (its `requestState`, its task id, its `Mcp-Session-Id`: random, so a client cannot name another's), and a request
//! carrying such a handle that reaches another replica is sent on to the owner
//! ([`forward::to_owner`]), or answered with a JSON-RPC error naming the owner when it is gone.
//!
//! Each replica beats: its record (`replica:{id}`, the URL other replicas reach it at) lives a
//! few heartbeats, so a replica killed with `kill -9` is gone from the registry seconds later.
//! Requests one replica sends another carry a stamp signed with the cluster secret
//! (`Cluster.Secret`), which the owner checks before it answers a request as forwarded.
//!
//! Settings (`Cluster`): `Secret` (or `SecretEnv`, the variable holding it) — without one,
//! nothing is forwarded; `AdvertiseUrl` — where other replicas reach this one (default: the
//! first listener, when it is not a wildcard address); `ReplicaId` (default: random);
//! `HeartbeatSeconds` (default 2; a record lives three of them).

pub mod forward;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use hmac::{KeyInit, Mac};
use tokio_util::sync::CancellationToken;

use crate::chat::store::SessionStore;
use crate::config::settings::Settings;
use crate::module::app_http::{plain_client, Plain};
use crate::module::relay::{random_hex, Claims};

/// The header a forwarded request carries: `{replica} {unix ms} {signature}`.
pub const FORWARDED_BY: &str = "x-gateway-forwarded-by";
/// The header of every MCP answer: the replica that made it.
pub const ANSWERED_BY: &str = "x-gateway-replica";
/// How old a forwarded request's stamp may be.
const STAMP_WINDOW_MS: u64 = 60_000;
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(2);

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// This replica among the others sharing its session store.
pub struct Replicas {
    /// This replica's id, as the store's records name it.
    pub id: String,
    url: String,
    secret: Vec<u8>,
    store: Arc<dyn SessionStore>,
    heartbeat: Duration,
    client: Plain,
}

impl Replicas {
    /// `None` when there is nothing to share (a store only this process uses) or no cluster
    /// secret (then a warning says what does not work); an error when the settings are wrong.
    pub fn from_settings(settings: &Settings, store: Arc<dyn SessionStore>, bound: &[SocketAddr]) -> Result<Option<Arc<Replicas>>, String> {
        if !store.is_shared() {
            return Ok(None);
        }
        let secret = match settings.get_str("Cluster:SecretEnv") {
            Some(var) => Some(std::env::var(&var).map_err(|_| format!("Cluster.SecretEnv names {var}, which is not set"))?),
            None => settings.get_str("Cluster:Secret"),
        };
        let Some(secret) = secret.filter(|s| !s.is_empty()) else {
            tracing::warn!(
                "replicas: Cluster.Secret is not set, so a 2026-07-28 client's retry or a task request that reaches another replica than the one holding its call is not sent on there"
            );
            return Ok(None);
        };
        if secret.len() < 16 {
            return Err("Cluster.Secret must be at least 16 characters".into());
        }
        let url = match settings.get_str("Cluster:AdvertiseUrl") {
            Some(url) => url.trim_end_matches('/').to_string(),
            None => match bound.first() {
                Some(addr) if !addr.ip().is_unspecified() => format!("http://{addr}"),
                Some(addr) => {
                    return Err(format!(
                        "Cluster.AdvertiseUrl is needed: the gateway listens on {addr}, which names no address other replicas can reach"
                    ))
                }
                None => return Err("Cluster.AdvertiseUrl is needed: the gateway has no listener".into()),
            },
        };
        if !url.starts_with("http://") {
            return Err(format!("Cluster.AdvertiseUrl {url:?} must be an http:// URL (replicas talk plain HTTP on their own network)"));
        }
        let id = settings.get_str("Cluster:ReplicaId").unwrap_or_else(|| format!("r-{}", random_hex(6)));
        if id.is_empty() || id.contains(char::is_whitespace) {
            return Err(format!("Cluster.ReplicaId {id:?} must be a word without spaces"));
        }
        let heartbeat = settings.get_seconds("Cluster:HeartbeatSeconds", DEFAULT_HEARTBEAT).max(Duration::from_millis(200));
        let client = plain_client();
        tracing::info!(replica = %id, url = %url, "replicas: this replica is {id}, reached at {url}");
        Ok(Some(Arc::new(Replicas { id, url, secret: secret.into_bytes(), store, heartbeat, client })))
    }

    /// How long a replica's record lives without a beat.
    fn record_ttl(&self) -> Duration {
        self.heartbeat * 3
    }

    /// Records this replica now (before it serves), then keeps the record alive until `stop`,
    /// when it is removed.
    pub async fn join(self: &Arc<Self>, stop: CancellationToken) -> Result<(), String> {
        self.store.beat(&self.id, &self.url, self.record_ttl()).await.map_err(|e| format!("cannot register this replica: {e}"))?;
        let me = self.clone();
        tokio::spawn(async move {
            let mut failing = false;
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(me.heartbeat) => {}
                }
                match me.store.beat(&me.id, &me.url, me.record_ttl()).await {
                    Ok(()) if failing => {
                        failing = false;
                        tracing::info!(replica = %me.id, "replicas: heartbeat recorded again");
                    }
                    Ok(()) => {}
                    Err(e) if !failing => {
                        failing = true;
                        tracing::warn!(replica = %me.id, "replicas: cannot record the heartbeat: {e}");
                    }
                    Err(_) => {}
                }
            }
            let _ = me.store.leave(&me.id).await;
        });
        Ok(())
    }

    /// How many replicas beat now (`/healthz`).
    pub async fn count(&self) -> Result<usize, String> {
        self.store.replicas().await.map_err(|e| e.to_string())
    }

    /// The stamp of a request this replica forwards for `method` and `path`.
    fn stamp(&self, method: &str, path: &str) -> String {
        let now = now_unix_ms();
        format!("{} {now} {}", self.id, self.sign(&self.id, now, method, path))
    }

    /// Whether `stamp` is one a replica of this cluster made for this `method` and `path`
    /// within [`STAMP_WINDOW_MS`].
    fn verify(&self, stamp: &str, method: &str, path: &str) -> bool {
        let mut parts = stamp.split(' ');
        let (Some(replica), Some(at), Some(signature), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return false;
        };
        let Ok(at) = at.parse::<u64>() else { return false };
        if now_unix_ms().abs_diff(at) > STAMP_WINDOW_MS {
            return false;
        }
        let Some(signature) = from_hex(signature) else { return false };
        self.mac(replica, at, method, path).verify_slice(&signature).is_ok()
    }

    fn mac(&self, replica: &str, at: u64, method: &str, path: &str) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.secret).expect("HMAC takes a key of any length");
        mac.update(format!("{replica}\n{at}\n{method}\n{path}").as_bytes());
        mac
    }

    fn sign(&self, replica: &str, at: u64, method: &str, path: &str) -> String {
        self.mac(replica, at, method, path).finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl Claims for Replicas {
    fn claim<'a>(&'a self, handle: &'a str, ttl: Duration) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Err(e) = self.store.claim(handle, &self.id, ttl).await {
                // The call still works when its client comes back to this replica.
                tracing::warn!(replica = %self.id, "replicas: cannot record that this replica holds a call: {e}");
            }
        })
    }
}

fn now_unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replicas(secret: &str) -> Replicas {
        Replicas {
            id: "r-a".into(),
            url: "http://127.0.0.1:1".into(),
            secret: secret.as_bytes().to_vec(),
            store: Arc::new(
                crate::chat::store_sqlite::SqliteStore::open(&std::env::temp_dir().join(format!("replicas-{}.db", random_hex(6)))).unwrap(),
            ),
            heartbeat: DEFAULT_HEARTBEAT,
            client: plain_client(),
        }
    }

    #[test]
    fn a_stamp_verifies_only_with_the_same_secret_method_and_path() {
        let a = replicas("a secret of sixteen+");
        let stamp = a.stamp("POST", "/mcp");
        assert!(a.verify(&stamp, "POST", "/mcp"));
        assert!(!a.verify(&stamp, "POST", "/apps/mcp/x"));
        assert!(!a.verify(&stamp, "GET", "/mcp"));
        assert!(!replicas("another secret, sixteen").verify(&stamp, "POST", "/mcp"));
        let forged = stamp.replacen("r-a", "r-b", 1);
        assert!(!a.verify(&forged, "POST", "/mcp"));
        assert!(!a.verify("r-a 1 00", "POST", "/mcp"), "an old stamp");
        assert!(!a.verify("", "POST", "/mcp"));
        assert!(!a.verify("r-a x zz", "POST", "/mcp"));
    }
}
