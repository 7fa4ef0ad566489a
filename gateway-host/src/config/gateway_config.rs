//! What the gateway derives from its settings, shared by startup ([`crate::serve`]), the HTTP
//! routes and the commands: the gateway's version, where the module library and the data folder
//! are, the configuration handed to the module, and the listen addresses. Depends on settings and
//! the module loader only, so `serve` → `http` → here runs one way.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use host_abi::ModuleConfig;
use serde_json::{Map, Value};

use crate::module::loader as module_loader;
use crate::config::settings::Settings;
use crate::BoxError;

pub const DEFAULT_URLS: &str = "http://127.0.0.1:5000";
pub const GATEWAY_VERSION: &str = env!("CARGO_PKG_VERSION");

/// `--module`, else `Gateway.ModulePath` (relative to the configuration's folder), else the
/// library beside the executable.
pub fn module_path(settings: &Settings, cli: Option<&Path>) -> PathBuf {
    if let Some(p) = cli {
        return p.to_path_buf();
    }
    match settings.get_str("Gateway:ModulePath") {
        Some(p) => settings.resolve_path(&p),
        None => module_loader::default_module_path(),
    }
}

/// The gateway's data folder (`Gateway.DataPath`, also read as `Gateway.DataDir`; default
/// `.gateway-data` beside the configuration): the module's install state, the chat sessions.
pub fn data_dir(settings: &Settings) -> std::path::PathBuf {
    settings
        .get_str("Gateway:DataPath")
        .or_else(|| settings.get_str("Gateway:DataDir"))
        .map(|d| settings.resolve_path(&d))
        .unwrap_or_else(|| settings.config_dir.join(".gateway-data"))
}

/// Where `gateway-host apps add` installs apps, one folder per app (`Gateway.AppsPath`; default
/// `.gateway-apps` beside the configuration). Not inside the data folder: confinement never grants
/// an app anything of that folder but its own data (SPEC R48), and an installed app runs from here.
pub fn apps_path(settings: &Settings) -> PathBuf {
    settings
        .get_str("Gateway:AppsPath")
        .map(|d| settings.resolve_path(&d))
        .unwrap_or_else(|| settings.config_dir.join(".gateway-apps"))
}

/// The document the module runs on: the effective configuration with [`apps_path`] among the
/// MCP App discovery paths (SPEC R53: an installed app is discovered like any other, and a
/// running gateway's watcher picks it up), when that folder exists and is not listed already.
/// A folder that does not exist yet is left out so that discovery does not report it missing on
/// every run; a serving gateway makes it at startup ([`ensure_apps_path`]), so it watches it.
pub fn module_document(settings: &Settings) -> Value {
    let mut document = settings.effective.clone();
    let apps = apps_path(settings);
    if !apps.is_dir() {
        return document;
    }
    let Some(root) = document.as_object_mut() else { return document };
    // The module merges `McpApps` and `OpenClaw.McpApps` (the nested one wins, lists replace
    // whole): the list it will read is the nested one's, else the top one's, else its default.
    let nested_has = section(root, &["OpenClaw", "McpApps"]).is_some_and(|s| get_key(s, "DiscoveryPaths").is_some());
    let path: &[&str] = if nested_has { &["OpenClaw", "McpApps"] } else { &["McpApps"] };
    let target = section_mut(root, path);
    let key = target.keys().find(|k| k.eq_ignore_ascii_case("DiscoveryPaths")).cloned().unwrap_or_else(|| "DiscoveryPaths".into());
    let mut paths: Vec<Value> = match target.get(&key) {
        Some(Value::Array(list)) => list.clone(),
        Some(Value::String(one)) if !one.trim().is_empty() => vec![Value::from(one.clone())],
        _ => vec![Value::from(DEFAULT_DISCOVERY_PATH)],
    };
    let same = |v: &Value| v.as_str().is_some_and(|p| clean(&settings.resolve_path(p)) == clean(&apps));
    if !paths.iter().any(same) {
        paths.push(Value::from(apps.display().to_string()));
    }
    target.insert(key, Value::Array(paths));
    document
}

/// Makes [`apps_path`] when it is missing, so a serving gateway watches it from the start and
/// picks up the first app installed there. A failure is a warning: installing is then what fails.
pub fn ensure_apps_path(settings: &Settings) {
    let apps = apps_path(settings);
    if let Err(e) = std::fs::create_dir_all(&apps) {
        tracing::warn!("Gateway.AppsPath {}: {e}; apps installed with `apps add` will not be discovered", apps.display());
    }
}

/// The module's discovery path when the configuration names none (mcpapp-plugin `apps/config.rs`).
const DEFAULT_DISCOVERY_PATH: &str = "./mcpapps";

fn get_key<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    map.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v)
}

fn section<'a>(map: &'a Map<String, Value>, path: &[&str]) -> Option<&'a Map<String, Value>> {
    let mut node = map;
    for segment in path {
        node = get_key(node, segment)?.as_object()?;
    }
    Some(node)
}

/// The object at `path` (keys matched case-insensitively), made when missing or not an object.
fn section_mut<'a>(map: &'a mut Map<String, Value>, path: &[&str]) -> &'a mut Map<String, Value> {
    let mut node = map;
    for segment in path {
        let key = node.keys().find(|k| k.eq_ignore_ascii_case(segment)).cloned().unwrap_or_else(|| segment.to_string());
        let entry = node.entry(key).or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        node = entry.as_object_mut().expect("made an object above");
    }
    node
}

/// A path without `.` and `..` components (lexically), for comparing configured paths.
fn clean(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The configuration handed to the module.
pub fn module_config(settings: &Settings) -> ModuleConfig {
    let data_dir = data_dir(settings);
    ModuleConfig {
        config_json: module_document(settings).to_string().into(),
        config_dir: settings.config_dir.display().to_string().into(),
        data_dir: data_dir.display().to_string().into(),
        host_version: GATEWAY_VERSION.into(),
        // The host's interface version and optional methods (host_abi::ModuleConfigExtra).
        extra_json: module_loader::config_extra_json(module_loader::HOST_CAPABILITIES).into(),
    }
}

/// Parses `Gateway.Urls` / `--urls`: `;`-separated `http://host:port` entries (ASP.NET style).
pub fn parse_urls(urls: &str) -> Result<Vec<SocketAddr>, BoxError> {
    let mut out = Vec::new();
    for url in urls.split(';').map(str::trim).filter(|u| !u.is_empty()) {
        let rest = if let Some(rest) = url.strip_prefix("http://") {
            rest
        } else if url.starts_with("https://") {
            return Err(format!("{url}: https is not served directly; terminate TLS in a reverse proxy").into());
        } else {
            return Err(format!("{url}: expected http://HOST:PORT").into());
        };
        let hostport = rest.trim_end_matches('/');
        let hostport = hostport.replacen("localhost:", "127.0.0.1:", 1);
        let addr: SocketAddr =
            hostport.parse().map_err(|_| format!("{url}: expected http://IP:PORT (e.g. http://127.0.0.1:5000)"))?;
        out.push(addr);
    }
    if out.is_empty() {
        return Err("no URL to listen on (Gateway.Urls / --urls is empty)".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn settings(effective: Value, dir: &Path) -> Settings {
        Settings { effective, config_dir: dir.to_path_buf() }
    }

    #[test]
    fn the_apps_folder_joins_the_discovery_paths_the_module_reads_once_it_exists() {
        let dir = tempfile::tempdir().unwrap();
        let apps = dir.path().join(".gateway-apps");
        let nested = json!({ "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": ["./mcpapps"] } } });
        assert_eq!(module_document(&settings(nested.clone(), dir.path())), nested, "not there yet: not listed");
        std::fs::create_dir(&apps).unwrap();
        let doc = module_document(&settings(nested, dir.path()));
        assert_eq!(doc["OpenClaw"]["McpApps"]["DiscoveryPaths"], json!(["./mcpapps", apps.display().to_string()]));
        // The top-level section, lower-case keys, and the module's default when none is named.
        let top = json!({ "mcpApps": { "discoveryPaths": ["./a"] } });
        assert_eq!(module_document(&settings(top, dir.path()))["mcpApps"]["discoveryPaths"], json!(["./a", apps.display().to_string()]));
        let none = json!({ "OpenClaw": { "McpApps": { "Enabled": true } } });
        assert_eq!(module_document(&settings(none, dir.path()))["McpApps"]["DiscoveryPaths"], json!(["./mcpapps", apps.display().to_string()]));
        // Listed already (relative, as the user wrote it): not twice.
        let listed = json!({ "McpApps": { "DiscoveryPaths": ["./.gateway-apps/"] } });
        assert_eq!(module_document(&settings(listed.clone(), dir.path())), listed);
        // Gateway.AppsPath moves it.
        std::fs::create_dir(dir.path().join("elsewhere")).unwrap();
        let moved = json!({ "Gateway": { "AppsPath": "elsewhere" }, "McpApps": { "DiscoveryPaths": [] } });
        let s = settings(moved, dir.path());
        assert_eq!(apps_path(&s), dir.path().join("elsewhere"));
        assert_eq!(module_document(&s)["McpApps"]["DiscoveryPaths"], json!([dir.path().join("elsewhere").display().to_string()]));
    }
}
