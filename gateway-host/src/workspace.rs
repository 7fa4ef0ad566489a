//! The configuration the module's apps come from, and the workspace's MCP servers (R40).
//!
//! Two things change what the module runs while the gateway serves, and both end in one
//! document handed to the module ([`host_abi::payloads::RECONFIGURE`]):
//!
//! - the configuration file, re-read on `POST /admin/mcpapps/reload` (its `McpApps` entries,
//!   allow/deny lists and discovery paths, and `Plugins.Mcp`);
//! - the workspace's standard MCP server definitions, edited over `/admin/workspace/mcp` and kept
//!   in `{Gateway.DataPath}/workspace-mcp.json` (written atomically: a crash mid-write leaves the
//!   old file or the new one, never a torn one).
//!
//! Workspace servers join `Plugins.Mcp.Servers` of the effective document, beside those of the
//! configuration file (an id may not be in both). The module reloads against the document and
//! restarts only what changed, so editing one server leaves every other app and server alone.
//!
//! A definition's command runs only when `Plugins.Mcp.AllowedCommands` lists it: this is the one
//! place an HTTP request can name a program, and it may name only what the operator allowed.
//! The check is made when a definition is written and again whenever the document is built
//! (the allowlist may have shrunk since), and environment variables that would change which
//! program or library runs (`PATH`, `LD_*`, `DYLD_*`) are refused.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use host_abi::payloads::{ReconfigureParams, ReloadReport, RECONFIGURE};
use host_abi::AbiError;
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::module_host::ModuleHost;
use crate::settings::Settings;

/// The file under `Gateway.DataPath` that holds the workspace's server definitions.
pub const FILE_NAME: &str = "workspace-mcp.json";

/// One standard MCP server as the workspace defines it (the body of `/admin/workspace/mcp`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServerDefinition {
    /// `stdio` (a command the gateway starts) or `http` (a Streamable HTTP URL).
    pub transport: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub environment: BTreeMap<String, String>,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Prefix of the server's tool names in the registry (default: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name_prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_timeout_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_timeout_seconds: Option<u64>,
}

fn yes() -> bool {
    true
}

/// Why a definition or an edit is refused; each names what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("{0}")]
    Invalid(String),
    #[error("command '{command}' is not in Plugins.Mcp.AllowedCommands{hint}")]
    NotAllowed { command: String, hint: String },
    #[error("MCP server '{0}' is defined in the configuration file; change it there")]
    InConfiguration(String),
    #[error("there is already a workspace MCP server '{0}'")]
    Exists(String),
    #[error("there is no workspace MCP server '{0}'")]
    Missing(String),
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("{path} cannot be read: {message}")]
    Corrupt { path: PathBuf, message: String },
    #[error("the configuration file cannot be re-read: {0}")]
    Settings(#[from] crate::settings::SettingsError),
    #[error("the module refused the new configuration: {0}")]
    Module(AbiError),
}

/// The file's shape.
#[derive(Serialize, Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WorkspaceFile {
    #[serde(default)]
    servers: BTreeMap<String, ServerDefinition>,
}

/// The configuration of the apps, and the workspace's servers: what the module is handed.
pub struct Workspace {
    /// `--config`, re-read on reload; `None` when the gateway runs on the embedded default.
    config_path: Option<PathBuf>,
    /// The configuration as last read (the startup one until a reload re-reads the file).
    settings: RwLock<Settings>,
    file: PathBuf,
    servers: RwLock<BTreeMap<String, ServerDefinition>>,
    /// One edit or reload at a time, so the file, the document and the module agree.
    edits: tokio::sync::Mutex<()>,
}

impl Workspace {
    /// Reads the workspace file under `data_dir` (none yet is an empty workspace). A file that is
    /// not what the gateway writes stops the start, naming the file: overwriting it on the next
    /// edit would lose what it holds.
    pub fn open(settings: Settings, config_path: Option<PathBuf>, data_dir: &Path) -> Result<Workspace, WorkspaceError> {
        let file = data_dir.join(FILE_NAME);
        let servers = match std::fs::read(&file) {
            Ok(bytes) => {
                let parsed: WorkspaceFile = serde_json::from_slice(&bytes)
                    .map_err(|e| WorkspaceError::Corrupt { path: file.clone(), message: e.to_string() })?;
                parsed.servers
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(WorkspaceError::Corrupt { path: file.clone(), message: e.to_string() }),
        };
        let workspace =
            Workspace { config_path, settings: RwLock::new(settings), file, servers: RwLock::new(servers), edits: Default::default() };
        for (id, problem) in workspace.refused() {
            tracing::warn!("Workspace MCP server '{id}' is not started: {problem}");
        }
        Ok(workspace)
    }

    /// The configuration as last read from the file (plus environment overrides).
    pub fn settings(&self) -> Settings {
        self.settings.read().clone()
    }

    /// The document the module runs on: the configuration with the workspace's servers (those
    /// still allowed) in `Plugins.Mcp.Servers`.
    pub fn module_settings(&self) -> Settings {
        let mut settings = self.settings();
        let allowed = AllowedCommands::from_settings(&settings);
        let servers = self.servers.read();
        let usable: Vec<(&String, &ServerDefinition)> =
            servers.iter().filter(|(id, def)| check(id, def, &allowed, &settings).is_ok()).collect();
        if usable.is_empty() {
            return settings;
        }
        let table = servers_table(&mut settings.effective);
        for (id, def) in usable {
            table.insert(id.clone(), to_config_entry(def));
        }
        settings
    }

    /// Every server: the configuration file's (read-only here) and the workspace's, with why a
    /// workspace server does not run if it is refused now.
    pub fn list(&self) -> Vec<Value> {
        let settings = self.settings();
        let mut out: Vec<Value> = configured_ids(&settings)
            .into_iter()
            .map(|id| json!({ "id": id, "source": "configuration" }))
            .collect();
        let refused: BTreeMap<String, String> = self.refused().into_iter().collect();
        for (id, def) in self.servers.read().iter() {
            let mut entry = json!({ "id": id, "source": "workspace", "definition": def });
            if let Some(problem) = refused.get(id) {
                entry["refused"] = Value::from(problem.clone());
            }
            out.push(entry);
        }
        out
    }

    pub fn get(&self, id: &str) -> Option<ServerDefinition> {
        self.servers.read().get(id).cloned()
    }

    /// Workspace servers that break a rule now, with the reason.
    fn refused(&self) -> Vec<(String, String)> {
        let settings = self.settings();
        let allowed = AllowedCommands::from_settings(&settings);
        self.servers
            .read()
            .iter()
            .filter_map(|(id, def)| check(id, def, &allowed, &settings).err().map(|e| (id.clone(), e.to_string())))
            .collect()
    }

    /// Adds (`create`: refused if the id exists) or replaces the server `id`, writes the file,
    /// and reloads the module against the new document. Returns the reload report.
    pub async fn put(&self, module: &ModuleHost, id: &str, def: ServerDefinition, create: bool) -> Result<ReloadReport, WorkspaceError> {
        let _one = self.edits.lock().await;
        let settings = self.settings();
        check(id, &def, &AllowedCommands::from_settings(&settings), &settings)?;
        let mut next = self.servers.read().clone();
        if create && next.contains_key(id) {
            return Err(WorkspaceError::Exists(id.to_string()));
        }
        next.insert(id.to_string(), def);
        self.commit(next)?;
        self.apply(module, false).await
    }

    /// Removes the server `id`, writes the file, reloads (the server stops; nothing else moves).
    pub async fn remove(&self, module: &ModuleHost, id: &str) -> Result<ReloadReport, WorkspaceError> {
        let _one = self.edits.lock().await;
        let mut next = self.servers.read().clone();
        if next.remove(id).is_none() {
            return Err(WorkspaceError::Missing(id.to_string()));
        }
        self.commit(next)?;
        self.apply(module, false).await
    }

    /// Re-reads the configuration file (when the gateway has one) and reloads the module
    /// against it: an operator's reload (R21), which also retries Failed apps.
    pub async fn reload(&self, module: &ModuleHost) -> Result<ReloadReport, WorkspaceError> {
        let _one = self.edits.lock().await;
        if let Some(path) = &self.config_path {
            let fresh = Settings::load(Some(path))?;
            *self.settings.write() = fresh;
            for (id, problem) in self.refused() {
                tracing::warn!("Workspace MCP server '{id}' is not started: {problem}");
            }
        }
        self.apply(module, true).await
    }

    /// Writes `servers` to the file, then makes them current.
    fn commit(&self, servers: BTreeMap<String, ServerDefinition>) -> Result<(), WorkspaceError> {
        let body = WorkspaceFile { servers };
        let text = serde_json::to_vec_pretty(&body).expect("definitions serialize");
        write_atomically(&self.file, &text).map_err(|source| WorkspaceError::Write { path: self.file.clone(), source })?;
        *self.servers.write() = body.servers;
        Ok(())
    }

    /// Hands the module the current document. A module without `registry.reconfigure` reloads
    /// with the configuration it was created with (said in the log).
    async fn apply(&self, module: &ModuleHost, explicit: bool) -> Result<ReloadReport, WorkspaceError> {
        let params = ReconfigureParams { config: self.module_settings().effective, explicit };
        match module.invoke_typed::<_, ReloadReport>(RECONFIGURE, &params).await {
            Ok(report) => Ok(report),
            Err(e) if e.code.as_str() == host_abi::error_code::NOT_IMPLEMENTED => {
                tracing::warn!("The module cannot take a new configuration ({}); reloading with the one it started with", e.message.as_str());
                module.reload().await.map_err(WorkspaceError::Module)
            }
            Err(e) => Err(WorkspaceError::Module(e)),
        }
    }
}

/// `Plugins.Mcp.AllowedCommands`: executables a workspace definition may run. A bare name
/// (`uvx`) allows exactly that name, found on the gateway's `PATH`; a path allows exactly that
/// path. Nothing else matches: not `./uvx`, not `/tmp/uvx`.
struct AllowedCommands(Vec<String>);

impl AllowedCommands {
    fn from_settings(settings: &Settings) -> AllowedCommands {
        let list = match plugins_mcp(settings).and_then(|mcp| get_ci(mcp, "AllowedCommands")) {
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(|s| s.trim().to_string()).collect(),
            // From the environment: `Plugins__Mcp__AllowedCommands=uvx;/opt/bin/server`.
            Some(Value::String(s)) => s.split([';', ',']).map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect(),
            Some(Value::Object(map)) => map.values().filter_map(Value::as_str).map(|s| s.trim().to_string()).collect(),
            _ => Vec::new(),
        };
        AllowedCommands(list)
    }

    fn allows(&self, command: &str) -> bool {
        self.0.iter().any(|entry| !entry.is_empty() && entry == command)
    }
}

/// Environment variables a definition may not set: they change which program or library runs.
fn forbidden_variable(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper == "PATH" || upper.starts_with("LD_") || upper.starts_with("DYLD_")
}

/// The rules for one workspace definition, each refusal naming the field.
fn check(id: &str, def: &ServerDefinition, allowed: &AllowedCommands, settings: &Settings) -> Result<(), WorkspaceError> {
    let invalid = |m: String| Err(WorkspaceError::Invalid(m));
    let id_ok = !id.is_empty()
        && id.len() <= 64
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        && id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
    if !id_ok {
        return invalid(format!(
            "id '{id}': use 1–64 letters, digits, '-', '_' or '.', starting with a letter or digit"
        ));
    }
    if configured_ids(settings).iter().any(|c| c == id) {
        return Err(WorkspaceError::InConfiguration(id.to_string()));
    }
    match def.transport.as_str() {
        "stdio" => {
            let Some(command) = def.command.as_deref().map(str::trim).filter(|c| !c.is_empty()) else {
                return invalid("command: a stdio server needs the command to run".into());
            };
            if def.url.is_some() {
                return invalid("url: a stdio server has no url (did you mean transport \"http\"?)".into());
            }
            if !allowed.allows(command) {
                let hint = if allowed.0.is_empty() {
                    " (the list is empty: add the executable there to allow it)".to_string()
                } else {
                    format!(" (allowed: {})", allowed.0.join(", "))
                };
                return Err(WorkspaceError::NotAllowed { command: command.to_string(), hint });
            }
        }
        "http" => {
            let Some(url) = def.url.as_deref() else { return invalid("url: an http server needs its URL".into()) };
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return invalid(format!("url '{url}': expected an http:// or https:// URL"));
            }
            if def.command.is_some() || !def.arguments.is_empty() {
                return invalid("command: an http server is not started by the gateway; leave command and arguments out".into());
            }
        }
        other => return invalid(format!("transport '{other}': expected \"stdio\" or \"http\"")),
    }
    if let Some(name) = def.environment.keys().find(|k| forbidden_variable(k)) {
        return invalid(format!("environment.{name}: PATH, LD_* and DYLD_* cannot be set (they change which program runs)"));
    }
    for (what, seconds) in [("startupTimeoutSeconds", def.startup_timeout_seconds), ("requestTimeoutSeconds", def.request_timeout_seconds)] {
        if seconds == Some(0) {
            return invalid(format!("{what}: must be at least 1"));
        }
    }
    Ok(())
}

/// Ids of the servers the configuration file defines.
fn configured_ids(settings: &Settings) -> Vec<String> {
    match plugins_mcp(settings).and_then(|mcp| get_ci(mcp, "Servers")) {
        Some(Value::Object(map)) => map.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// The `Plugins.Mcp` section the module reads: `Plugins` at the top level, else under
/// `OpenClaw` (the module's rule, see mcpapp-plugin's `mcp_servers.rs`).
fn plugins_mcp(settings: &Settings) -> Option<&Map<String, Value>> {
    match settings.get("Plugins") {
        Some(plugins) => get_ci(plugins.as_object()?, "Mcp")?.as_object(),
        None => settings.get("OpenClaw:Plugins:Mcp")?.as_object(),
    }
}

fn get_ci<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    map.get(key).or_else(|| map.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v))
}

/// `Plugins.Mcp.Servers` of `root`, created when missing, in the section the module reads:
/// top-level `Plugins`, else `OpenClaw.Plugins` when only that exists.
fn servers_table(root: &mut Value) -> &mut Map<String, Value> {
    fn child<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
        let existing = map.keys().find(|k| k.eq_ignore_ascii_case(key)).cloned();
        let slot = map.entry(existing.unwrap_or_else(|| key.to_string())).or_insert_with(|| json!({}));
        if !slot.is_object() {
            *slot = json!({});
        }
        slot.as_object_mut().expect("an object")
    }
    if !root.is_object() {
        *root = json!({});
    }
    let root = root.as_object_mut().expect("an object");
    let nested = get_ci(root, "Plugins").is_none()
        && get_ci(root, "OpenClaw").and_then(Value::as_object).is_some_and(|o| get_ci(o, "Plugins").is_some());
    let home = if nested { child(root, "OpenClaw") } else { root };
    child(child(child(home, "Plugins"), "Mcp"), "Servers")
}

/// A definition in the configuration file's PascalCase form (what `Plugins.Mcp` entries are).
fn to_config_entry(def: &ServerDefinition) -> Value {
    let mut entry = json!({ "Transport": def.transport, "Enabled": def.enabled });
    let map = entry.as_object_mut().expect("an object");
    if let Some(command) = &def.command {
        map.insert("Command".into(), json!(command));
    }
    if !def.arguments.is_empty() {
        map.insert("Arguments".into(), json!(def.arguments));
    }
    if let Some(url) = &def.url {
        map.insert("Url".into(), json!(url));
    }
    if !def.headers.is_empty() {
        map.insert("Headers".into(), json!(def.headers));
    }
    if !def.environment.is_empty() {
        map.insert("Environment".into(), json!(def.environment));
    }
    if let Some(prefix) = &def.tool_name_prefix {
        map.insert("ToolNamePrefix".into(), json!(prefix));
    }
    if let Some(s) = def.startup_timeout_seconds {
        map.insert("StartupTimeoutSeconds".into(), json!(s));
    }
    if let Some(s) = def.request_timeout_seconds {
        map.insert("RequestTimeoutSeconds".into(), json!(s));
    }
    entry
}

/// Writes `bytes` to `path` so that a crash at any point leaves either the old file or the new
/// one: a temporary file beside it, flushed to disk, renamed over it, the folder flushed.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(value: Value) -> Settings {
        Settings { effective: value, config_dir: PathBuf::from("/cfg") }
    }

    fn stdio(command: &str) -> ServerDefinition {
        serde_json::from_value(json!({ "transport": "stdio", "command": command })).unwrap()
    }

    #[test]
    fn only_listed_commands_run() {
        let s = settings(json!({ "Plugins": { "Mcp": { "AllowedCommands": ["uvx", "/opt/bin/files"] } } }));
        let allowed = AllowedCommands::from_settings(&s);
        assert!(check("a", &stdio("uvx"), &allowed, &s).is_ok());
        assert!(check("a", &stdio("/opt/bin/files"), &allowed, &s).is_ok());
        for refused in ["./uvx", "/tmp/uvx", "bash", "/opt/bin/files2", "files"] {
            let err = check("a", &stdio(refused), &allowed, &s).unwrap_err().to_string();
            assert!(err.contains(refused) && err.contains("Plugins.Mcp.AllowedCommands"), "{err}");
        }
        let none = settings(json!({}));
        let err = check("a", &stdio("uvx"), &AllowedCommands::from_settings(&none), &none).unwrap_err().to_string();
        assert!(err.contains("list is empty"), "{err}");
        let from_env = settings(json!({ "Plugins": { "Mcp": { "AllowedCommands": "uvx; /opt/x" } } }));
        assert!(AllowedCommands::from_settings(&from_env).allows("/opt/x"));
    }

    #[test]
    fn definitions_are_checked_field_by_field() {
        let s = settings(json!({ "Plugins": { "Mcp": { "AllowedCommands": ["srv"], "Servers": { "files": {} } } } }));
        let allowed = AllowedCommands::from_settings(&s);
        let cases = [
            ("bad id!", json!({"transport": "stdio", "command": "srv"}), "id 'bad id!'"),
            ("files", json!({"transport": "stdio", "command": "srv"}), "configuration file"),
            ("a", json!({"transport": "pigeon"}), "transport 'pigeon'"),
            ("a", json!({"transport": "stdio"}), "command:"),
            ("a", json!({"transport": "http"}), "url:"),
            ("a", json!({"transport": "http", "url": "file:///etc/passwd"}), "url 'file:///etc/passwd'"),
            ("a", json!({"transport": "http", "url": "http://x/mcp", "command": "srv"}), "command:"),
            ("a", json!({"transport": "stdio", "command": "srv", "environment": {"LD_PRELOAD": "/x.so"}}), "environment.LD_PRELOAD"),
            ("a", json!({"transport": "stdio", "command": "srv", "environment": {"Path": "/tmp"}}), "environment.Path"),
        ];
        for (id, body, needle) in cases {
            let def: ServerDefinition = serde_json::from_value(body.clone()).unwrap();
            let err = check(id, &def, &allowed, &s).unwrap_err().to_string();
            assert!(err.contains(needle), "{body}: {err}");
        }
        let unknown = serde_json::from_value::<ServerDefinition>(json!({"transport": "stdio", "comand": "srv"}));
        assert!(unknown.unwrap_err().to_string().contains("comand"));
    }

    #[test]
    fn workspace_servers_join_the_configuration_and_refused_ones_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let s = settings(json!({ "OpenClaw": { "Plugins": { "Mcp": { "AllowedCommands": ["srv"] } } } }));
        let ws = Workspace::open(s, None, dir.path()).unwrap();
        let mut servers = BTreeMap::new();
        servers.insert("ok".to_string(), stdio("srv"));
        servers.insert("no".to_string(), stdio("other"));
        ws.commit(servers).unwrap();
        let reopened = Workspace::open(ws.settings(), None, dir.path()).unwrap();
        let effective = reopened.module_settings().effective;
        let table = &effective["OpenClaw"]["Plugins"]["Mcp"]["Servers"];
        assert!(effective.get("Plugins").is_none(), "beside the configuration's own section: {effective}");
        assert_eq!(table["ok"]["Command"], "srv");
        assert!(table.get("no").is_none(), "{effective}");
        let listed = reopened.list();
        assert!(listed.iter().any(|e| e["id"] == "no" && e["refused"].as_str().unwrap().contains("other")), "{listed:?}");
    }

    #[test]
    fn a_torn_or_foreign_file_stops_the_start_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME), b"{\"servers\": {\"a\": ").unwrap();
        let Err(err) = Workspace::open(settings(json!({})), None, dir.path()) else { panic!("opened") };
        assert!(err.to_string().contains(FILE_NAME), "{err}");
    }

    #[test]
    fn atomic_writes_leave_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested").join("f.json");
        write_atomically(&path, b"one").unwrap();
        write_atomically(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(path.parent().unwrap()).unwrap().count(), 1);
    }
}
