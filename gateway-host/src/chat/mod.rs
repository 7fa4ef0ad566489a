//! The agent half of the gateway (SPEC R33–R35): chat sessions, the agent loop against an
//! OpenAI-compatible provider, and the turns that run them.

pub mod agent;
pub mod provider;
pub mod store;
pub mod store_health;
pub mod store_redis;
pub mod store_sqlite;

use std::sync::Arc;

use crate::config::settings::Settings;
use store::{SessionStore, StoreError};

/// The session store the configuration asks for: `Sessions.Store` = `"sqlite"` (default; the file
/// `sessions.db` under the data folder) or `"redis"` (`Sessions.RedisUrl`, its keys under
/// `Sessions.RedisKeyPrefix`, by default `gateway:chat:`; a `rediss://` URL verified against
/// `Sessions.RedisCaFile` when set; with `Sessions.RedisCluster`, a Redis Cluster whose seed nodes
/// `Sessions.RedisUrl` lists, separated by commas).
pub fn open_store(settings: &Settings) -> Result<Arc<dyn SessionStore>, StoreError> {
    let kind = settings.get_str("Sessions:Store").unwrap_or_else(|| "sqlite".to_string());
    match kind.to_ascii_lowercase().as_str() {
        "sqlite" => Ok(Arc::new(store_sqlite::SqliteStore::open(&crate::config::gateway_config::data_dir(settings).join("sessions.db"))?)),
        "redis" => {
            let url = settings.get_str("Sessions:RedisUrl").ok_or_else(|| StoreError::Backend {
                store: "redis",
                message: "Sessions.Store is \"redis\" but Sessions.RedisUrl is not set".into(),
            })?;
            let lease = match settings.get_str("Sessions:LockLeaseSeconds") {
                None => 30,
                Some(text) => text.parse::<u64>().unwrap_or_else(|_| {
                    tracing::warn!("Sessions.LockLeaseSeconds must be a whole number of seconds, not '{text}'; using 30");
                    30
                }),
            };
            let ca_pem = match settings.get_str("Sessions:RedisCaFile") {
                None => None,
                Some(file) => {
                    let path = settings.resolve_path(&file);
                    // A certificate file is a few KiB: bounded, so a path naming a device is an error.
                    let read = crate::config::settings::read_bounded(&path, crate::config::settings::MAX_CONFIG_BYTES);
                    Some(read.map_err(|e| StoreError::Backend {
                        store: "config",
                        message: format!("Sessions.RedisCaFile {}: {e}", path.display()),
                    })?)
                }
            };
            let lease = std::time::Duration::from_secs(lease);
            let mut store = if settings.get_bool("Sessions:RedisCluster").unwrap_or(false) {
                store_redis::RedisStore::open_cluster(&url, lease, ca_pem)?
            } else {
                store_redis::RedisStore::open(&url, lease, ca_pem)?
            };
            if let Some(prefix) = settings.get_str("Sessions:RedisKeyPrefix") {
                if prefix.is_empty() {
                    return Err(StoreError::Backend { store: "config", message: "Sessions.RedisKeyPrefix must not be empty (leave it out for the default)".into() });
                }
                store = store.with_key_prefix(prefix);
            }
            Ok(Arc::new(store))
        }
        other => Err(StoreError::Backend {
            store: "config",
            message: format!("Sessions.Store must be \"sqlite\" or \"redis\", not \"{other}\""),
        }),
    }
}
