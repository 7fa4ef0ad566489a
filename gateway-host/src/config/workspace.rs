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
//!
//! Every other rule of a definition is the module's own rule for a `Plugins.Mcp` server
//! (mcpapp-plugin's `manifest.rs`, the bound [`MAX_TIMEOUT_SECONDS`] shared through host-abi),
//! applied here when the definition is written, or stricter: a definition the routes accept is
//! one the module starts, never one it marks Failed after a 201. The fuzz target
//! `workspace_definition` holds the host to that against the module's code.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use host_abi::payloads::{ReconfigureParams, ReloadReport, MAX_TIMEOUT_SECONDS, RECONFIGURE};
use host_abi::AbiError;
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::module::host::ModuleHost;
use crate::config::settings::Settings;

/// The file under `Gateway.DataPath` that holds the workspace's server definitions.
pub const FILE_NAME: &str = "workspace-mcp.json";

/// One standard MCP server as the workspace defines it (the body of `/admin/workspace/mcp`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServerDefinition {
    /// `stdio` (a command the gateway starts) or `http` (a Streamable HTTP URL). Required; the
    /// default (empty) only lets [`ServerDefinition::from_json`] read one field at a time.
    #[serde(default)]
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

impl ServerDefinition {
    /// Reads a definition from a request body. A field of the wrong type or an unknown field is
    /// refused naming it: serde's message for a wrong type names only the type, so on an error
    /// each field is read alone (every field has a default) to find the one at fault.
    pub fn from_json(body: &Value) -> Result<ServerDefinition, FieldProblem> {
        ServerDefinition::deserialize(body).map_err(|e| {
            let culprit = body.as_object().and_then(|fields| {
                fields
                    .iter()
                    .find(|(name, value)| ServerDefinition::deserialize(&json!({ name.as_str(): value })).is_err())
                    .map(|(name, _)| if name.is_empty() { "\"\"".to_string() } else { shown(name) })
            });
            FieldProblem::new(culprit.unwrap_or_else(|| "definition".to_string()), controls_escaped(&e.to_string()))
        })
    }
}

/// What is wrong with one field of a definition: every refusal of a definition names its field
/// (`environment.FOO`, `headers.X-Key`, `arguments[2]`), as the module's validation errors do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldProblem {
    pub field: String,
    pub message: String,
}

impl FieldProblem {
    fn new(field: impl Into<String>, message: impl Into<String>) -> FieldProblem {
        FieldProblem { field: field.into(), message: message.into() }
    }
}

/// Why a definition or an edit is refused; each names what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error(transparent)]
    Invalid(#[from] FieldProblem),
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
    Settings(#[from] crate::config::settings::SettingsError),
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
        let servers = match super::settings::read_text_bounded(&file, super::settings::MAX_CONFIG_BYTES) {
            Ok(text) => {
                let parsed: WorkspaceFile = serde_json::from_str(&text)
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
        let params = ReconfigureParams { config: crate::config::gateway_config::module_document(&self.module_settings()), explicit };
        match module.invoke_typed::<_, ReloadReport>(RECONFIGURE, &params).await {
            Ok(report) => Ok(report),
            Err(e) if e.code() == host_abi::ErrorCode::NotImplemented => {
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

/// The rules for one workspace definition against the configuration: its own rules
/// ([`check_definition`]), an id the configuration file does not define, and a command the
/// allowlist names exactly as it will run.
fn check(id: &str, def: &ServerDefinition, allowed: &AllowedCommands, settings: &Settings) -> Result<(), WorkspaceError> {
    check_definition(id, def)?;
    if configured_ids(settings).iter().any(|c| c == id) {
        return Err(WorkspaceError::InConfiguration(id.to_string()));
    }
    if let Some(command) = def.command.as_deref() {
        if !allowed.allows(command) {
            let hint = if allowed.0.is_empty() {
                " (the list is empty: add the executable there to allow it)".to_string()
            } else {
                format!(" (allowed: {})", allowed.0.join(", "))
            };
            return Err(WorkspaceError::NotAllowed { command: shown(command), hint });
        }
    }
    Ok(())
}

/// A definition's own rules, whatever the configuration: the module's rules for a `Plugins.Mcp`
/// server (mcpapp-plugin `Manifest::validate`), or stricter where the module's would let a
/// definition through that cannot run or that would put control characters into names. The
/// first problem is returned, naming its field.
pub fn check_definition(id: &str, def: &ServerDefinition) -> Result<(), FieldProblem> {
    check_id(id)?;
    match def.transport.as_str() {
        "stdio" => check_stdio(def)?,
        "http" => check_http(def)?,
        "" => return Err(FieldProblem::new("transport", "is required: \"stdio\" or \"http\"")),
        other => return Err(FieldProblem::new("transport", format!("'{}': expected \"stdio\" or \"http\"", shown(other)))),
    }
    check_arguments(&def.arguments)?;
    check_headers(&def.headers)?;
    check_environment(&def.environment)?;
    if let Some(prefix) = &def.tool_name_prefix {
        if prefix.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(FieldProblem::new("toolNamePrefix", "must not contain whitespace or control characters"));
        }
    }
    check_timeout("startupTimeoutSeconds", def.startup_timeout_seconds)?;
    check_timeout("requestTimeoutSeconds", def.request_timeout_seconds)
}

/// Ids become registry keys (`mcp:{id}`), URL segments and tool provider names.
fn check_id(id: &str) -> Result<(), FieldProblem> {
    let ok = !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        && id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
    if ok {
        return Ok(());
    }
    Err(FieldProblem::new(
        "id",
        format!("'{}': use 1–{MAX_ID_LEN} letters, digits, '-', '_' or '.', starting with a letter or digit", shown(id)),
    ))
}

/// The longest workspace server id (the module allows 128 for an app id; a workspace id also
/// names a URL segment of the admin routes and a tool prefix, and 64 is plenty).
const MAX_ID_LEN: usize = 64;

/// A stdio server: a command, exactly as it will run — the allowlist compares it as written,
/// and the spawn runs it as written, so surrounding whitespace is refused rather than trimmed
/// on one side only.
fn check_stdio(def: &ServerDefinition) -> Result<(), FieldProblem> {
    let Some(command) = def.command.as_deref() else {
        return Err(FieldProblem::new("command", "a stdio server needs the command to run"));
    };
    if command.trim().is_empty() {
        return Err(FieldProblem::new("command", "must not be blank"));
    }
    if command.trim() != command {
        return Err(FieldProblem::new(
            "command",
            format!("'{}' has leading or trailing whitespace; write the executable exactly as it runs", shown(command)),
        ));
    }
    if command.chars().any(char::is_control) {
        return Err(FieldProblem::new("command", format!("'{}' must not contain control characters", shown(command))));
    }
    if def.url.is_some() {
        return Err(FieldProblem::new("url", "a stdio server has no url (did you mean transport \"http\"?)"));
    }
    Ok(())
}

/// An http server: a URL the gateway can reach, and nothing for the gateway to start.
fn check_http(def: &ServerDefinition) -> Result<(), FieldProblem> {
    let Some(url) = def.url.as_deref() else { return Err(FieldProblem::new("url", "an http server needs its URL")) };
    check_url(url).map_err(|message| FieldProblem::new("url", format!("'{}' {message}", shown(url))))?;
    if def.command.is_some() || !def.arguments.is_empty() {
        return Err(FieldProblem::new("command", "an http server is not started by the gateway; leave command and arguments out"));
    }
    Ok(())
}

/// The module's URL rule (`check_http_url`: an http(s) scheme, a host, a numeric port, no
/// whitespace), then a full parse, so a URL no client could connect to is refused now.
fn check_url(url: &str) -> Result<(), String> {
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must not contain whitespace or control characters".into());
    }
    let rest = ["http://", "https://"]
        .iter()
        .find(|scheme| url.get(..scheme.len()).is_some_and(|s| s.eq_ignore_ascii_case(scheme)))
        .map(|scheme| &url[scheme.len()..])
        .ok_or("must be an http:// or https:// URL")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit('@').next().unwrap_or("");
    let (host, port) = match host_port.strip_prefix('[') {
        Some(v6) => v6.split_once(']').map(|(h, rest)| (h, rest.strip_prefix(':'))).unwrap_or(("", None)),
        None => match host_port.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (host_port, None),
        },
    };
    if host.is_empty() {
        return Err("has no host".into());
    }
    if port.is_some_and(|p| p.parse::<u16>().is_err()) {
        return Err("has an invalid port".into());
    }
    reqwest::Url::parse(url).map(drop).map_err(|e| format!("is not a valid URL ({e})"))
}

/// Arguments reach `execve` as C strings: a NUL cannot be passed.
fn check_arguments(arguments: &[String]) -> Result<(), FieldProblem> {
    match arguments.iter().position(|a| a.contains('\0')) {
        Some(i) => Err(FieldProblem::new(format!("arguments[{i}]"), "must not contain NUL characters")),
        None => Ok(()),
    }
}

/// Header names are HTTP tokens (as the `http` crate parses them), values free of control
/// characters (a tab aside: what an HTTP field value may hold), and no two names differ only in
/// case (which one the module kept would depend on the order).
fn check_headers(headers: &BTreeMap<String, String>) -> Result<(), FieldProblem> {
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    for (name, value) in headers {
        let field = || format!("headers.{}", shown(name));
        if axum::http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(FieldProblem::new(field(), "is not a valid HTTP header name"));
        }
        if value.chars().any(|c| c.is_control() && c != '\t') {
            return Err(FieldProblem::new(field(), "header value must not contain control characters (CR, LF, NUL, …)"));
        }
        if let Some(first) = seen.insert(name.to_ascii_lowercase(), name) {
            return Err(FieldProblem::new(field(), format!("the same header as '{}' (header names are case-insensitive)", shown(first))));
        }
    }
    Ok(())
}

/// Variable names that the process could not be given (empty, `=`, NUL), that would forge a line
/// wherever they are shown (any control character), or that change which program runs.
fn check_environment(environment: &BTreeMap<String, String>) -> Result<(), FieldProblem> {
    for (name, value) in environment {
        let field = || format!("environment.{}", shown(name));
        if name.is_empty() || name.contains('=') || name.chars().any(char::is_control) {
            return Err(FieldProblem::new(
                field(),
                "is not a valid environment variable name (empty, or contains '=' or a control character)",
            ));
        }
        if forbidden_variable(name) {
            return Err(FieldProblem::new(field(), "PATH, LD_* and DYLD_* cannot be set (they change which program runs)"));
        }
        if value.contains('\0') {
            return Err(FieldProblem::new(field(), "value must not contain NUL characters"));
        }
    }
    Ok(())
}

/// Both timeouts: 1 to [`MAX_TIMEOUT_SECONDS`] seconds, the module's bound.
fn check_timeout(field: &str, seconds: Option<u64>) -> Result<(), FieldProblem> {
    match seconds {
        Some(0) => Err(FieldProblem::new(field, "must be at least 1 (seconds)")),
        Some(s) if s > MAX_TIMEOUT_SECONDS => Err(FieldProblem::new(field, format!("{s} is too long: must be at most {MAX_TIMEOUT_SECONDS} seconds"))),
        _ => Ok(()),
    }
}

/// A value from a request as a message shows it: control characters escaped (`\n`, `\u{1b}`),
/// long values cut, so a refusal never carries what it refuses into a response or a log whole.
fn shown(value: &str) -> String {
    const MOST: usize = 120;
    let escaped: String = value.escape_debug().collect();
    match escaped.char_indices().nth(MOST) {
        Some((cut, _)) => format!("{}…", &escaped[..cut]),
        None => escaped,
    }
}

/// `text` with its control characters escaped and nothing else changed: serde's messages quote
/// the unknown field or the wrong value they name, which may hold a line break.
fn controls_escaped(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { c.escape_debug().to_string() } else { c.to_string() }).collect()
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
pub fn to_config_entry(def: &ServerDefinition) -> Value {
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
            ("bad id!", json!({"transport": "stdio", "command": "srv"}), "id: 'bad id!'"),
            ("files", json!({"transport": "stdio", "command": "srv"}), "configuration file"),
            ("a", json!({"transport": "pigeon"}), "transport: 'pigeon'"),
            ("a", json!({"command": "srv"}), "transport: is required"),
            ("a", json!({"transport": "stdio"}), "command:"),
            ("a", json!({"transport": "http"}), "url:"),
            ("a", json!({"transport": "http", "url": "file:///etc/passwd"}), "url: 'file:///etc/passwd'"),
            ("a", json!({"transport": "http", "url": "http://x/mcp", "command": "srv"}), "command:"),
            ("a", json!({"transport": "stdio", "command": "srv", "environment": {"LD_PRELOAD": "/x.so"}}), "environment.LD_PRELOAD"),
            ("a", json!({"transport": "stdio", "command": "srv", "environment": {"Path": "/tmp"}}), "environment.Path"),
        ];
        for (id, body, needle) in cases {
            let def: ServerDefinition = serde_json::from_value(body.clone()).unwrap();
            let err = check(id, &def, &allowed, &s).unwrap_err().to_string();
            assert!(err.contains(needle), "{body}: {err}");
        }
        let unknown = ServerDefinition::from_json(&json!({"transport": "stdio", "comand": "srv"})).unwrap_err();
        assert_eq!(unknown.field, "comand", "{unknown}");
        let forged = ServerDefinition::from_json(&json!({"transport": "stdio", "x\nFORGED": 1})).unwrap_err();
        assert_eq!(forged.field, "x\\nFORGED", "{forged}");
        assert!(!forged.to_string().contains('\n'), "{forged}");
        // Found by the fuzz target: an unknown field with no name is still named.
        let nameless = ServerDefinition::from_json(&json!({"transport": "stdio", "": "x"})).unwrap_err();
        assert_eq!(nameless.field, "\"\"", "{nameless}");
    }

    /// The field a refusal names, for a definition that reads.
    fn refused_field(body: Value) -> FieldProblem {
        let def = ServerDefinition::from_json(&body).unwrap_or_else(|e| panic!("{body} does not read: {e}"));
        check_definition("a", &def).expect_err(&body.to_string())
    }

    #[test]
    fn definitions_the_module_would_fail_are_refused_naming_the_field() {
        let stdio = |extra: Value| {
            let mut body = json!({"transport": "stdio", "command": "srv"});
            body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            body
        };
        let cases = [
            (stdio(json!({"startupTimeoutSeconds": 100_000})), "startupTimeoutSeconds", "at most 86400"),
            (stdio(json!({"requestTimeoutSeconds": 86_401})), "requestTimeoutSeconds", "at most 86400"),
            (stdio(json!({"requestTimeoutSeconds": 0})), "requestTimeoutSeconds", "at least 1"),
            (stdio(json!({"environment": {"A=B": "x"}})), "environment.A=B", "not a valid environment variable name"),
            (stdio(json!({"environment": {"A\u{0}B": "x"}})), "environment.A\\0B", "not a valid environment variable name"),
            (stdio(json!({"environment": {"A\nFORGED": "x"}})), "environment.A\\nFORGED", "control character"),
            (stdio(json!({"environment": {"": "x"}})), "environment.", "not a valid environment variable name"),
            (stdio(json!({"environment": {"OK": "a\u{0}b"}})), "environment.OK", "NUL"),
            (stdio(json!({"arguments": ["fine", "a\u{0}b"]})), "arguments[1]", "NUL"),
            (stdio(json!({"toolNamePrefix": "my tools."})), "toolNamePrefix", "whitespace"),
            (json!({"transport": "stdio", "command": "srv "}), "command", "leading or trailing whitespace"),
            (json!({"transport": "stdio", "command": " srv"}), "command", "leading or trailing whitespace"),
            (json!({"transport": "stdio", "command": "  "}), "command", "blank"),
            (json!({"transport": "stdio", "command": "sr\u{1b}v"}), "command", "control characters"),
            (json!({"transport": "http", "url": "http://x/a b"}), "url", "whitespace"),
            (json!({"transport": "http", "url": "http:///mcp"}), "url", "no host"),
            (json!({"transport": "http", "url": "http://x:99999/mcp"}), "url", "invalid port"),
            (json!({"transport": "http", "url": "http://x:/mcp"}), "url", "invalid port"),
            (json!({"transport": "http", "url": "http://exa%zzmple/"}), "url", "not a valid URL"),
            (json!({"transport": "http", "url": "http://x/", "headers": {"X Key": "v"}}), "headers.X Key", "header name"),
            (json!({"transport": "http", "url": "http://x/", "headers": {"X-Key": "v\r\nX-Forged: 1"}}), "headers.X-Key", "control"),
            (json!({"transport": "http", "url": "http://x/", "headers": {"X-Key": "a", "x-key": "b"}}), "headers.x-key", "case-insensitive"),
        ];
        for (body, field, needle) in cases {
            let problem = refused_field(body.clone());
            assert_eq!(problem.field, field, "{body}: {problem}");
            assert!(problem.message.contains(needle), "{body}: {problem}");
            assert!(!problem.to_string().chars().any(char::is_control), "a refusal carries no control character: {problem:?}");
        }
        for fine in [
            stdio(json!({"startupTimeoutSeconds": 86_400, "requestTimeoutSeconds": 1, "environment": {"MODE": "a\nb"}})),
            stdio(json!({"arguments": ["--name", "two words"], "toolNamePrefix": "ws."})),
            json!({"transport": "http", "url": "HTTPS://[::1]:8443/mcp?x=1", "headers": {"Authorization": "Bearer\tk"}}),
        ] {
            let def = ServerDefinition::from_json(&fine).unwrap();
            assert_eq!(check_definition("a", &def), Ok(()), "{fine}");
        }
    }

    #[test]
    fn wrong_types_are_refused_naming_the_field() {
        for (body, field) in [
            (json!({"transport": "stdio", "command": "srv", "startupTimeoutSeconds": "15"}), "startupTimeoutSeconds"),
            (json!({"transport": "stdio", "command": "srv", "startupTimeoutSeconds": -1}), "startupTimeoutSeconds"),
            (json!({"transport": "stdio", "command": "srv", "environment": {"A": 1}}), "environment"),
            (json!({"transport": 7, "command": "srv"}), "transport"),
            (json!({"transport": "stdio", "command": "srv", "arguments": "-v"}), "arguments"),
        ] {
            let problem = ServerDefinition::from_json(&body).unwrap_err();
            assert_eq!(problem.field, field, "{body}: {problem}");
        }
    }

    #[test]
    fn the_command_is_compared_as_it_will_run() {
        let s = settings(json!({ "Plugins": { "Mcp": { "AllowedCommands": ["srv", " /opt/bin/files "] } } }));
        let allowed = AllowedCommands::from_settings(&s);
        // The operator's list is tidied (a configuration value), a definition's command is not.
        assert!(check("a", &stdio("/opt/bin/files"), &allowed, &s).is_ok());
        let err = check("a", &stdio("srv "), &allowed, &s).unwrap_err();
        assert!(matches!(&err, WorkspaceError::Invalid(p) if p.field == "command"), "{err}");
        let Err(WorkspaceError::Invalid(problem)) = check("a", &stdio("srv\n"), &allowed, &s) else { panic!("accepted") };
        assert_eq!(problem.field, "command");
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
