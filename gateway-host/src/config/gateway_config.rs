//! What the gateway derives from its settings, shared by startup ([`crate::serve`]), the HTTP
//! routes and the commands: the gateway's version, where the module library and the data folder
//! are, the configuration handed to the module, and the listen addresses. Depends on settings and
//! the module loader only, so `serve` → `http` → here runs one way.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use host_abi::ModuleConfig;

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

/// The configuration handed to the module.
pub fn module_config(settings: &Settings) -> ModuleConfig {
    let data_dir = data_dir(settings);
    ModuleConfig {
        config_json: settings.effective.to_string().into(),
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
