//! The registry of all apps (the seed's McpAppRegistry): discovery results turned into running
//! [`AppServer`]s, in discovery order, and kept in step with the manifests on disk (SPEC R21).

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::join_all;
use parking_lot::RwLock;
use serde_json::{json, Value};

use crate::apps::config::McpAppsConfig;
use crate::apps::discovery::{self, DiscoveryReport};
use crate::apps::install_state::AppState;
use crate::apps::app_server::{AppContext, AppKind, AppServer};

pub struct Registry {
    ctx: Arc<AppContext>,
    /// What the registry is built from; replaced by [`Registry::reconfigure`].
    sources: RwLock<Sources>,
    /// Apps in discovery order.
    apps: RwLock<Vec<Arc<AppServer>>>,
    /// Serialises reloads (a watcher event and an admin call may coincide).
    reload_lock: tokio::sync::Mutex<()>,
}

/// The configuration the apps come from: the `McpApps` section (discovery, entries, policy), the
/// whole document (for `Plugins.Mcp`), and the folder its relative paths resolve against.
struct Sources {
    config: McpAppsConfig,
    root_config: Value,
    config_dir: std::path::PathBuf,
}

impl Registry {
    pub fn new(ctx: Arc<AppContext>, config: McpAppsConfig, root_config: Value, config_dir: std::path::PathBuf) -> Registry {
        Registry {
            ctx,
            sources: RwLock::new(Sources { config, root_config, config_dir }),
            apps: RwLock::new(Vec::new()),
            reload_lock: tokio::sync::Mutex::new(()),
        }
    }

    /// Takes a new configuration document (the host re-read its file, or changed the workspace's
    /// MCP servers) and reloads against it: apps and servers whose effective definition did not
    /// change are left alone, so editing one server never touches the others. The watcher is
    /// pointed at the new `DiscoveryPaths` by the caller ([`Self::discovery_paths_of`]).
    pub async fn reconfigure(&self, root_config: Value, explicit: bool) -> Value {
        {
            let mut sources = self.sources.write();
            sources.config = McpAppsConfig::from_config(&root_config, &sources.config_dir);
            sources.root_config = root_config;
        }
        self.reload(explicit).await
    }

    /// The folders discovery would scan with `root_config` (see [`Self::reconfigure`]).
    pub fn discovery_paths_of(&self, root_config: &Value) -> Vec<std::path::PathBuf> {
        let config_dir = self.sources.read().config_dir.clone();
        McpAppsConfig::from_config(root_config, &config_dir).discovery_paths
    }

    pub fn apps(&self) -> Vec<Arc<AppServer>> {
        self.apps.read().clone()
    }

    pub fn app(&self, key: &str) -> Option<Arc<AppServer>> {
        self.apps.read().iter().find(|a| a.key == key).cloned()
    }

    /// Scans the discovery paths without touching running apps.
    pub fn discover(&self) -> DiscoveryReport {
        let config = self.sources.read().config.clone();
        discovery::discover(&config, Some(&self.ctx.host_version))
    }

    /// Re-runs discovery: new apps start, removed ones stop, changed ones restart, unchanged ones are
    /// left alone. All starts run in parallel, so this takes about as long as the slowest app.
    ///
    /// An `explicit` reload (admin call, gateway start) also retries unchanged apps that are
    /// Failed, clearing a crash-loop hold; a reload triggered by a file change does not, so an
    /// unrelated edit never disturbs an app.
    pub async fn reload(&self, explicit: bool) -> Value {
        let _guard = self.reload_lock.lock().await;
        let report = tokio::task::block_in_place(|| self.discover());
        let servers = {
            let sources = self.sources.read();
            crate::apps::mcp_servers::installs(&sources.root_config, &sources.config_dir)
        };
        let found = report
            .apps
            .iter()
            .cloned()
            .map(|i| (i, AppKind::App))
            .chain(servers.into_iter().map(|i| (i, AppKind::McpServer)));
        let old: HashMap<String, Arc<AppServer>> = self.apps().into_iter().map(|a| (a.key.clone(), a)).collect();
        let mut next = Vec::new();
        let (mut started, mut restarted, mut unchanged, mut to_start, mut to_stop) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (install, kind) in found {
            let key = install.key.clone();
            match old.get(&key) {
                Some(existing) if existing.kind == kind && !existing.install_state().differs_from(&install) => {
                    if explicit && existing.state() == AppState::Failed {
                        to_start.push(existing.clone());
                        restarted.push(key);
                    } else {
                        unchanged.push(key);
                    }
                    next.push(existing.clone());
                }
                Some(existing) => {
                    to_stop.push(existing.clone());
                    let app = AppServer::new(self.ctx.clone(), install, kind);
                    if app.state() == AppState::Validated {
                        to_start.push(app.clone());
                    }
                    restarted.push(key);
                    next.push(app);
                }
                None => {
                    let app = AppServer::new(self.ctx.clone(), install, kind);
                    if app.state() == AppState::Validated {
                        to_start.push(app.clone());
                        started.push(key);
                    }
                    next.push(app);
                }
            }
        }
        let kept: std::collections::HashSet<&str> = next.iter().map(|a| a.key.as_str()).collect();
        let mut stopped = Vec::new();
        for (key, app) in &old {
            if !kept.contains(key.as_str()) {
                to_stop.push(app.clone());
                stopped.push(key.clone());
            }
        }
        join_all(to_stop.iter().map(|a| a.stop("reload"))).await;
        *self.apps.write() = next;
        let results = join_all(to_start.iter().map(|a| async move { (a.key.clone(), a.start(true).await) })).await;
        let failed: Vec<Value> = results
            .into_iter()
            .filter_map(|(key, r)| r.err().map(|e| json!({ "id": key, "error": e })))
            .collect();
        stopped.sort();
        json!({
            "started": started,
            "stopped": stopped,
            "restarted": restarted,
            "unchanged": unchanged,
            "failed": failed,
            "skippedPaths": report.skipped.iter().map(|s| json!({"path": s.path, "reason": s.reason})).collect::<Vec<_>>(),
            "configErrors": report.config_errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
        })
    }

    /// Stops every app (module shutdown).
    pub async fn stop_all(&self) {
        let apps = self.apps();
        join_all(apps.iter().map(|a| a.stop("shutdown"))).await;
    }
}
