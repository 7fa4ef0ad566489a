//! The gateway configuration the module needs (SPEC R11, R14, R39), read from the gateway's
//! effective config JSON (`appsettings.json` after environment overrides).
//!
//! The config is ASP.NET-shaped, so it follows ASP.NET's rules where users rely on them:
//! - keys match case-insensitively (`Enabled`, `enabled`, `ENABLED` are the same key);
//! - every value may arrive as a string, because environment overrides are strings
//!   (`"true"`, `"15"`), so bool and integer fields accept their string forms;
//! - environment variables override keys with `__` as the separator (applied by the host before the
//!   configuration reaches the module).
//!
//! **Where the section lives.** `McpApps` may be at the top level (as in the seed's snippets) or under
//! `OpenClaw` (where the gateway's own config lives, and what `OpenClaw__McpApps__Enabled=true`
//! addresses). When both exist they are merged key by key and `OpenClaw.McpApps` wins: so a file with
//! the seed's top-level block plus the env var `OpenClaw__McpApps__Enabled=false` is disabled, which is
//! what the person setting the variable expects. Objects merge recursively; arrays and scalars are
//! replaced whole (a deny list is never half one list and half another). `McpCompatibility` follows the
//! same rule.
//!
//! Bad values never abort: each becomes a [`ValidationError`] naming the key, and the field keeps its
//! default (for `Enabled`: false — fail closed). Problems inside `Entries.{id}` are kept on that entry
//! so discovery can mark that one app Failed instead of hiding the problem.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::apps::manifest::{invalid_transport_error, json_to_u64, json_type_name, Manifest, Transport, ValidationError};


/// Default discovery path, relative to the config file's folder.
pub const DEFAULT_DISCOVERY_PATH: &str = "./mcpapps";
/// Default `AllowlistSemantics`.
pub const DEFAULT_ALLOWLIST_SEMANTICS: &str = "legacy";

/// `McpApps.Entries.{appId}`: per-app overrides (R14). `None` = not overridden.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct EntryOverride {
    pub enabled: Option<bool>,
    pub transport: Option<Transport>,
    pub command: Option<String>,
    pub arguments: Option<Vec<String>>,
    pub url: Option<String>,
    pub tool_name_prefix: Option<String>,
    pub startup_timeout_seconds: Option<u64>,
    pub request_timeout_seconds: Option<u64>,
    pub health_check_interval_seconds: Option<u64>,
    /// Merged over the manifest's `environment`.
    pub environment: BTreeMap<String, String>,
    /// Merged over the manifest's `headers`; names are lower-cased.
    pub headers: BTreeMap<String, String>,
    pub working_directory: Option<String>,
    /// Replaces the manifest's `permissions` part by part (SPEC R48: narrow or widen).
    pub permissions: Option<crate::apps::permissions::Permissions>,
    /// Problems in this entry (field names like `McpApps.Entries.{id}.Url`). Discovery adds them to the
    /// app's validation errors, so the app goes Failed rather than running with a half-applied override.
    #[serde(skip)]
    pub errors: Vec<ValidationError>,
}

impl EntryOverride {
    /// R14: the effective manifest, `manifest` with this entry applied. Scalars in the entry
    /// replace the manifest's; `Environment` and `Headers` are merged over the manifest's (header
    /// names case-insensitively). `Enabled` is not a manifest property; it is applied by the policy.
    pub fn apply_to(&self, manifest: &Manifest) -> Manifest {
        let entry = self;
        let mut m = manifest.clone();
        if let Some(t) = entry.transport {
            m.transport = t;
        }
        if let Some(c) = &entry.command {
            m.command = Some(c.clone());
        }
        if let Some(a) = &entry.arguments {
            m.arguments = a.clone();
        }
        if let Some(u) = &entry.url {
            m.url = Some(u.clone());
        }
        if let Some(p) = &entry.tool_name_prefix {
            m.tool_name_prefix = Some(p.clone());
        }
        if let Some(s) = entry.startup_timeout_seconds {
            m.startup_timeout_seconds = s;
        }
        if let Some(s) = entry.request_timeout_seconds {
            m.request_timeout_seconds = s;
        }
        if let Some(s) = entry.health_check_interval_seconds {
            m.health_check_interval_seconds = s;
        }
        if let Some(wd) = &entry.working_directory {
            m.working_directory = Some(wd.clone());
        }
        for (k, v) in &entry.environment {
            m.environment.insert(k.clone(), v.clone());
        }
        for (k, v) in &entry.headers {
            m.headers.insert(k.to_ascii_lowercase(), v.clone());
        }
        if let Some(p) = &entry.permissions {
            m.permissions = m.permissions.overridden_by(p);
        }
        m
    }
}

/// The `McpApps` section.
#[derive(Debug, Clone, PartialEq)]
pub struct McpAppsConfig {
    pub enabled: bool,
    /// As written in the config (for messages).
    pub raw_discovery_paths: Vec<String>,
    /// Resolved against the config file's folder; same order as `raw_discovery_paths`.
    pub discovery_paths: Vec<PathBuf>,
    /// Raw string, so the policy can fail closed on a bad value and name it.
    pub allowlist_semantics: String,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    /// Keyed by app id as written in the config; look up with [`McpAppsConfig::entry_for`].
    pub entries: BTreeMap<String, EntryOverride>,
    /// Section-level problems (entry problems are on the entries).
    pub errors: Vec<ValidationError>,
}

impl Default for McpAppsConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            raw_discovery_paths: vec![DEFAULT_DISCOVERY_PATH.to_string()],
            discovery_paths: vec![PathBuf::from(DEFAULT_DISCOVERY_PATH)],
            allowlist_semantics: DEFAULT_ALLOWLIST_SEMANTICS.to_string(),
            allow: Vec::new(),
            deny: Vec::new(),
            entries: BTreeMap::new(),
            errors: Vec::new(),
        }
    }
}

/// `McpCompatibility` switches of the gateway's MCP behaviour (R39, R18).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct McpCompatibility {
    pub enable_discovery_first: bool,
    pub force_legacy_initialize: bool,
    pub allow_relaxed_input_schema_validation: bool,
    #[serde(skip)]
    pub errors: Vec<ValidationError>,
}

impl Default for McpCompatibility {
    fn default() -> Self {
        Self {
            enable_discovery_first: true,
            force_legacy_initialize: false,
            allow_relaxed_input_schema_validation: false,
            errors: Vec::new(),
        }
    }
}

impl McpAppsConfig {
    /// Reads the `McpApps` section from the whole effective config. `config_dir` is the folder of the
    /// config file; relative discovery paths resolve against it (so the gateway finds the same apps
    /// whatever its current directory).
    pub fn from_config(root: &Value, config_dir: &Path) -> McpAppsConfig {
        let mut cfg = McpAppsConfig::default();
        let Some(section) = merged_section(root, "McpApps", &mut cfg.errors) else {
            cfg.discovery_paths = resolve_paths(&cfg.raw_discovery_paths, config_dir);
            return cfg;
        };
        let mut r = SectionReader { obj: &section, prefix: "McpApps".to_string(), errors: &mut cfg.errors };
        cfg.enabled = r.bool("Enabled").unwrap_or(false);
        if let Some(paths) = r.string_list("DiscoveryPaths") {
            cfg.raw_discovery_paths = paths;
        }
        if let Some(s) = r.string("AllowlistSemantics") {
            cfg.allowlist_semantics = s;
        }
        cfg.allow = r.string_list("Allow").unwrap_or_default();
        cfg.deny = r.string_list("Deny").unwrap_or_default();
        cfg.entries = read_entries(&mut r);
        warn_unknown_keys(&section, "McpApps", &["Enabled", "DiscoveryPaths", "AllowlistSemantics", "Allow", "Deny", "Entries"]);
        cfg.discovery_paths = resolve_paths(&cfg.raw_discovery_paths, config_dir);
        cfg
    }

    /// The override entry for an app: exact id first, then a case-insensitive match (config keys are
    /// case-insensitive in ASP.NET, and ids are matched case-insensitively by the policy too).
    pub fn entry_for(&self, app_id: &str) -> Option<&EntryOverride> {
        self.entries
            .get(app_id)
            .or_else(|| self.entries.iter().find(|(k, _)| k.eq_ignore_ascii_case(app_id)).map(|(_, e)| e))
    }

    /// Section-level and entry-level problems together.
    pub fn all_errors(&self) -> Vec<ValidationError> {
        let mut all = self.errors.clone();
        all.extend(self.entries.values().flat_map(|e| e.errors.iter().cloned()));
        all
    }
}

impl McpCompatibility {
    /// Reads `McpCompatibility` (under `OpenClaw` or at the top level; `OpenClaw` wins per key).
    pub fn from_config(root: &Value) -> McpCompatibility {
        let mut c = McpCompatibility::default();
        let mut errors = Vec::new();
        if let Some(section) = merged_section(root, "McpCompatibility", &mut errors) {
            let mut r = SectionReader { obj: &section, prefix: "McpCompatibility".to_string(), errors: &mut errors };
            if let Some(b) = r.bool("EnableDiscoveryFirst") {
                c.enable_discovery_first = b;
            }
            if let Some(b) = r.bool("ForceLegacyInitialize") {
                c.force_legacy_initialize = b;
            }
            if let Some(b) = r.bool("AllowRelaxedInputSchemaValidation") {
                c.allow_relaxed_input_schema_validation = b;
            }
        }
        c.errors = errors;
        c
    }
}

// ---------------------------------------------------------------------------------------------
// Sections
// ---------------------------------------------------------------------------------------------

/// Case-insensitive key lookup: the exact spelling first, then any spelling.
pub fn get_ci<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).or_else(|| obj.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v))
}

/// The named section at the top level and under `OpenClaw`, merged (`OpenClaw` wins).
fn merged_section(root: &Value, name: &str, errors: &mut Vec<ValidationError>) -> Option<Map<String, Value>> {
    let root = root.as_object()?;
    let top = get_ci(root, name).filter(|v| !v.is_null());
    let nested = get_ci(root, "OpenClaw")
        .and_then(Value::as_object)
        .and_then(|o| get_ci(o, name))
        .filter(|v| !v.is_null());
    let mut as_object = |v: Option<&Value>, field: String| -> Option<Map<String, Value>> {
        match v? {
            Value::Object(m) => Some(m.clone()),
            // An env override like `McpApps=` would turn the section into a string; ignore it loudly.
            Value::String(s) if s.is_empty() => None,
            other => {
                errors.push(ValidationError::new(field, format!("expected an object, found {}", json_type_name(other))));
                None
            }
        }
    };
    let top = as_object(top, name.to_string());
    let nested = as_object(nested, format!("OpenClaw.{name}"));
    match (top, nested) {
        (None, None) => None,
        (Some(t), None) => Some(t),
        (None, Some(n)) => Some(n),
        (Some(mut t), Some(n)) => {
            merge_ci(&mut t, &n);
            Some(t)
        }
    }
}

/// Merges `over` into `base`: objects recursively (keys matched case-insensitively), everything else
/// replaced.
fn merge_ci(base: &mut Map<String, Value>, over: &Map<String, Value>) {
    for (k, v) in over {
        let existing = base.keys().find(|bk| bk.eq_ignore_ascii_case(k)).cloned();
        match (existing, v) {
            (Some(bk), Value::Object(ov)) if base[&bk].is_object() => {
                merge_ci(base.get_mut(&bk).and_then(Value::as_object_mut).expect("checked"), ov);
            }
            (Some(bk), _) => {
                base.insert(bk, v.clone());
            }
            (None, _) => {
                base.insert(k.clone(), v.clone());
            }
        }
    }
}

fn resolve_paths(raw: &[String], config_dir: &Path) -> Vec<PathBuf> {
    raw.iter().map(|p| resolve_path(p, config_dir)).collect()
}

/// Relative paths resolve against the config folder; `~/` expands to `$HOME` (users write it).
pub fn resolve_path(raw: &str, config_dir: &Path) -> PathBuf {
    if let Some(rest) = raw.strip_prefix("~/") {
        if let Some(home) = std::env::var_os("HOME") {
            return PathBuf::from(home).join(rest);
        }
    }
    let p = Path::new(raw);
    if p.is_absolute() {
        return p.to_path_buf();
    }
    let trimmed = raw.strip_prefix("./").unwrap_or(raw);
    if trimmed.is_empty() || trimmed == "." {
        return config_dir.to_path_buf();
    }
    config_dir.join(trimmed)
}

fn read_entries(r: &mut SectionReader<'_>) -> BTreeMap<String, EntryOverride> {
    let mut out = BTreeMap::new();
    let Some(v) = r.value("Entries") else { return out };
    let Value::Object(entries) = v else {
        r.wrong_type("Entries", "an object of app ids", v);
        return out;
    };
    for (id, ev) in entries {
        let field = format!("{}.Entries.{id}", r.prefix);
        let entry = match ev {
            Value::Object(obj) => read_entry(obj, &field),
            Value::Null => continue,
            other => EntryOverride {
                errors: vec![ValidationError::new(&field, format!("expected an object, found {}", json_type_name(other)))],
                ..Default::default()
            },
        };
        out.insert(id.clone(), entry);
    }
    out
}

fn read_entry(obj: &Map<String, Value>, field: &str) -> EntryOverride {
    let mut errors = Vec::new();
    let mut r = SectionReader { obj, prefix: field.to_string(), errors: &mut errors };
    let transport = r.string("Transport").and_then(|t| {
        let parsed = Transport::parse(&t);
        if parsed.is_none() {
            r.errors.push(invalid_transport_error(&format!("{field}.Transport"), &t));
        }
        parsed
    });
    let headers = r.string_map("Headers").map(|h| {
        crate::apps::manifest::normalize_headers(&format!("{field}.Headers"), h, r.errors)
    });
    let mut entry = EntryOverride {
        enabled: r.bool("Enabled"),
        transport,
        command: r.string("Command"),
        arguments: r.string_list("Arguments"),
        url: r.string("Url"),
        tool_name_prefix: r.string("ToolNamePrefix"),
        startup_timeout_seconds: r.uint("StartupTimeoutSeconds"),
        request_timeout_seconds: r.uint("RequestTimeoutSeconds"),
        health_check_interval_seconds: r.uint("HealthCheckIntervalSeconds"),
        environment: r.string_map("Environment").map(|m| m.into_iter().collect()).unwrap_or_default(),
        headers: headers.unwrap_or_default(),
        working_directory: r.string("WorkingDirectory"),
        permissions: None,
        errors: Vec::new(),
    };
    if let Some(v) = r.value("Permissions") {
        let (permissions, problems) = crate::apps::permissions::Permissions::parse(v, &format!("{field}.Permissions"));
        r.errors.extend(problems.into_iter().map(|(field, message)| ValidationError::new(field, message)));
        entry.permissions = Some(permissions);
    }
    warn_unknown_keys(
        obj,
        field,
        &[
            "Enabled", "Transport", "Command", "Arguments", "Url", "ToolNamePrefix", "StartupTimeoutSeconds",
            "RequestTimeoutSeconds", "HealthCheckIntervalSeconds", "Environment", "Headers", "WorkingDirectory",
            "Permissions",
        ],
    );
    entry.errors = errors;
    entry
}

fn warn_unknown_keys(obj: &Map<String, Value>, section: &str, known: &[&str]) {
    for k in obj.keys() {
        if !known.iter().any(|n| n.eq_ignore_ascii_case(k)) {
            tracing::debug!(section, key = %k, "ignoring unknown config key");
        }
    }
}

/// Reads ASP.NET-style values: case-insensitive keys, strings accepted for bools and integers.
struct SectionReader<'a> {
    obj: &'a Map<String, Value>,
    prefix: String,
    errors: &'a mut Vec<ValidationError>,
}

impl<'a> SectionReader<'a> {
    fn value(&self, key: &str) -> Option<&'a Value> {
        get_ci(self.obj, key).filter(|v| !v.is_null())
    }

    fn wrong_type(&mut self, key: &str, expected: &str, found: &Value) {
        let shown = match found {
            Value::String(s) => format!("'{s}'"),
            other => json_type_name(other).to_string(),
        };
        self.errors.push(ValidationError::new(format!("{}.{key}", self.prefix), format!("expected {expected}, found {shown}")));
    }

    fn bool(&mut self, key: &str) -> Option<bool> {
        let v = self.value(key)?;
        let parsed = match v {
            Value::Bool(b) => Some(*b),
            Value::String(s) if s.trim().eq_ignore_ascii_case("true") => Some(true),
            Value::String(s) if s.trim().eq_ignore_ascii_case("false") => Some(false),
            _ => None,
        };
        if parsed.is_none() {
            self.wrong_type(key, "true or false", v);
        }
        parsed
    }

    fn uint(&mut self, key: &str) -> Option<u64> {
        let v = self.value(key)?;
        let parsed = match v {
            Value::String(s) => s.trim().parse::<u64>().ok(),
            other => json_to_u64(other),
        };
        if parsed.is_none() {
            self.wrong_type(key, "a non-negative integer", v);
        }
        parsed
    }

    /// Strings; numbers and booleans are taken as their text (in ASP.NET every value is a string).
    fn string(&mut self, key: &str) -> Option<String> {
        let v = self.value(key)?;
        let s = scalar_text(v);
        if s.is_none() {
            self.wrong_type(key, "a string", v);
        }
        s
    }

    /// A list: a JSON array, a single string (what an env override of the whole key produces), or an
    /// object with numeric keys (what index-wise env overrides produce), ordered by index.
    fn string_list(&mut self, key: &str) -> Option<Vec<String>> {
        let v = self.value(key)?;
        let items: Vec<(String, &Value)> = match v {
            Value::Array(a) => a.iter().enumerate().map(|(i, x)| (i.to_string(), x)).collect(),
            Value::String(s) => return Some(vec![s.clone()]),
            Value::Object(o) if o.keys().all(|k| k.parse::<usize>().is_ok()) => {
                let mut items: Vec<_> = o.iter().map(|(k, x)| (k.clone(), x)).collect();
                items.sort_by_key(|(k, _)| k.parse::<usize>().unwrap_or(usize::MAX));
                items
            }
            other => {
                self.wrong_type(key, "an array of strings", other);
                return None;
            }
        };
        let mut out = Vec::with_capacity(items.len());
        for (idx, item) in items {
            match item {
                Value::Null => {}
                x => match scalar_text(x) {
                    Some(s) => out.push(s),
                    None => self.wrong_type(&format!("{key}[{idx}]"), "a string", x),
                },
            }
        }
        Some(out)
    }

    fn string_map(&mut self, key: &str) -> Option<Vec<(String, String)>> {
        let v = self.value(key)?;
        let Value::Object(map) = v else {
            if matches!(v, Value::String(s) if s.is_empty()) {
                return None;
            }
            self.wrong_type(key, "an object of strings", v);
            return None;
        };
        let mut out = Vec::with_capacity(map.len());
        for (k, x) in map {
            match scalar_text(x) {
                Some(s) => out.push((k.clone(), s)),
                None => self.wrong_type(&format!("{key}.{k}"), "a string", x),
            }
        }
        Some(out)
    }
}

fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The seed's first appsettings block, verbatim.
    const SEED_APPSETTINGS_1: &str = r#"{
  "McpApps": {
    "Enabled": true,
    "DiscoveryPaths": ["./mcpapps"],
    "AllowlistSemantics": "legacy",
    "Allow": ["*"],
    "Deny": [],
    "Entries": {
      "grocery-inventory": {
        "Enabled": true,
        "Url": "https://localhost:5001/mcp",
        "ToolNamePrefix": "grocery.",
        "StartupTimeoutSeconds": 15
      }
    }
  }
}"#;

    /// The seed's tutorial block, verbatim.
    const SEED_APPSETTINGS_2: &str = r#"{
  "McpApps": {
    "Enabled": true,
    "DiscoveryPaths": [".openclaw/mcpapps"],
    "Allow": ["*"],
    "Entries": {
      "grocery-inventory": {
        "Enabled": true
      }
    }
  }
}"#;

    fn dir() -> PathBuf {
        PathBuf::from("/etc/gw")
    }

    fn cfg(v: Value) -> McpAppsConfig {
        McpAppsConfig::from_config(&v, &dir())
    }

    #[test]
    fn seed_block_one() {
        let c = McpAppsConfig::from_config(&serde_json::from_str(SEED_APPSETTINGS_1).unwrap(), &dir());
        assert!(c.errors.is_empty(), "{:?}", c.errors);
        assert!(c.enabled);
        assert_eq!(c.raw_discovery_paths, ["./mcpapps"]);
        assert_eq!(c.discovery_paths, [PathBuf::from("/etc/gw/mcpapps")]);
        assert_eq!(c.allowlist_semantics, "legacy");
        assert_eq!(c.allow, ["*"]);
        assert!(c.deny.is_empty());
        let e = c.entry_for("grocery-inventory").unwrap();
        assert_eq!(e.enabled, Some(true));
        assert_eq!(e.url.as_deref(), Some("https://localhost:5001/mcp"));
        assert_eq!(e.tool_name_prefix.as_deref(), Some("grocery."));
        assert_eq!(e.startup_timeout_seconds, Some(15));
        assert_eq!((e.command.as_ref(), e.transport, e.request_timeout_seconds), (None, None, None));
        assert!(e.errors.is_empty());
    }

    #[test]
    fn seed_block_two() {
        let c = McpAppsConfig::from_config(&serde_json::from_str(SEED_APPSETTINGS_2).unwrap(), &dir());
        assert!(c.all_errors().is_empty());
        assert!(c.enabled);
        assert_eq!(c.discovery_paths, [PathBuf::from("/etc/gw/.openclaw/mcpapps")]);
        assert_eq!(c.allowlist_semantics, "legacy", "default");
        assert_eq!(c.allow, ["*"]);
        assert_eq!(c.entry_for("grocery-inventory").unwrap().enabled, Some(true));
    }

    #[test]
    fn seed_blocks_work_under_openclaw_too() {
        for text in [SEED_APPSETTINGS_1, SEED_APPSETTINGS_2] {
            let inner: Value = serde_json::from_str(text).unwrap();
            let c = cfg(json!({"OpenClaw": inner}));
            assert!(c.enabled && c.all_errors().is_empty());
            assert!(c.entry_for("grocery-inventory").is_some());
        }
    }

    #[test]
    fn defaults() {
        let c = cfg(json!({}));
        assert!(!c.enabled);
        assert_eq!(c.discovery_paths, [PathBuf::from("/etc/gw/mcpapps")]);
        assert_eq!(c.allowlist_semantics, "legacy");
        assert!(c.allow.is_empty() && c.deny.is_empty() && c.entries.is_empty() && c.errors.is_empty());
        let m = McpCompatibility::from_config(&json!({}));
        assert!(m.enable_discovery_first && !m.force_legacy_initialize && !m.allow_relaxed_input_schema_validation);
    }

    #[test]
    fn keys_are_case_insensitive() {
        let c = cfg(json!({"mcpapps": {"enabled": "TRUE", "discoverypaths": ["/abs"], "ALLOW": ["a*"]}}));
        assert!(c.enabled);
        assert_eq!(c.discovery_paths, [PathBuf::from("/abs")]);
        assert_eq!(c.allow, ["a*"]);
        assert!(c.entry_for("x").is_none());
        let c = cfg(json!({"McpApps": {"Entries": {"Grocery": {"url": "http://h"}}}}));
        assert_eq!(c.entry_for("grocery").unwrap().url.as_deref(), Some("http://h"));
    }

    #[test]
    fn openclaw_section_wins_per_key() {
        let c = cfg(json!({
            "McpApps": {"Enabled": true, "DiscoveryPaths": ["a", "b"], "Deny": ["x"],
                        "Entries": {"app": {"Url": "http://top", "Command": "c"}}},
            "OpenClaw": {"McpApps": {"Enabled": "false", "DiscoveryPaths": ["c"],
                        "Entries": {"APP": {"Url": "http://nested"}}}}
        }));
        assert!(!c.enabled);
        assert_eq!(c.raw_discovery_paths, ["c"], "arrays are replaced whole");
        assert_eq!(c.deny, ["x"], "keys only in the top-level section survive");
        let e = c.entry_for("app").unwrap();
        assert_eq!(e.url.as_deref(), Some("http://nested"));
        assert_eq!(e.command.as_deref(), Some("c"));
    }

    #[test]
    fn string_values_from_env_are_accepted() {
        let c = cfg(json!({"McpApps": {"Enabled": "true", "Entries": {"a": {
            "Enabled": "False", "StartupTimeoutSeconds": "20", "RequestTimeoutSeconds": 30,
            "HealthCheckIntervalSeconds": "0", "Transport": "Http", "Arguments": {"1": "y", "0": "x"}, "Environment": {"N": 5}}}}}));
        let e = c.entry_for("a").unwrap();
        assert!(e.errors.is_empty(), "{:?}", e.errors);
        assert_eq!(e.enabled, Some(false));
        assert_eq!(e.startup_timeout_seconds, Some(20));
        assert_eq!(e.request_timeout_seconds, Some(30));
        assert_eq!(e.health_check_interval_seconds, Some(0));
        assert_eq!(e.transport, Some(Transport::Http));
        assert_eq!(e.arguments.as_deref(), Some(&["x".to_string(), "y".to_string()][..]));
        assert_eq!(e.environment.get("N").map(String::as_str), Some("5"));
        let c = cfg(json!({"McpApps": {"DiscoveryPaths": "/single"}}));
        assert_eq!(c.discovery_paths, [PathBuf::from("/single")]);
    }

    #[test]
    fn bad_values_are_errors_naming_the_key() {
        let c = cfg(json!({"McpApps": {"Enabled": "yes", "Allow": 5, "Deny": [{}], "Entries": {
            "a": {"Transport": "sse", "StartupTimeoutSeconds": "-1", "Headers": {"X-A": "1", "x-a": "2"}, "Enabled": 1},
            "b": 7
        }}}));
        assert!(!c.enabled, "a bad Enabled fails closed");
        let fields: Vec<String> = c.errors.iter().map(|e| e.field.clone()).collect();
        assert_eq!(fields, ["McpApps.Enabled", "McpApps.Allow", "McpApps.Deny[0]"]);
        assert_eq!(c.errors[0].to_string(), "McpApps.Enabled: expected true or false, found 'yes'");
        let a: Vec<String> = c.entry_for("a").unwrap().errors.iter().map(|e| e.field.clone()).collect();
        assert_eq!(a.len(), 4, "{a:?}");
        assert!(a.contains(&"McpApps.Entries.a.Transport".to_string()));
        assert!(a.contains(&"McpApps.Entries.a.StartupTimeoutSeconds".to_string()));
        assert!(a.contains(&"McpApps.Entries.a.Enabled".to_string()));
        assert!(a.iter().any(|f| f.starts_with("McpApps.Entries.a.Headers.")));
        assert_eq!(c.entry_for("b").unwrap().errors[0].field, "McpApps.Entries.b");
        assert_eq!(c.all_errors().len(), 3 + 4 + 1);
        let c = cfg(json!({"McpApps": "oops"}));
        assert_eq!(c.errors[0].field, "McpApps");
    }

    #[test]
    fn entry_headers_are_lowercased() {
        let c = cfg(json!({"McpApps": {"Entries": {"a": {"Headers": {"X-Key": "v"}}}}}));
        assert_eq!(c.entry_for("a").unwrap().headers.get("x-key").map(String::as_str), Some("v"));
    }

    #[test]
    fn compatibility_switches() {
        let m = McpCompatibility::from_config(&json!({"OpenClaw": {"McpCompatibility": {
            "EnableDiscoveryFirst": "false", "ForceLegacyInitialize": true, "AllowRelaxedInputSchemaValidation": "true"}}}));
        assert!(!m.enable_discovery_first && m.force_legacy_initialize && m.allow_relaxed_input_schema_validation);
        assert!(m.errors.is_empty());
        let m = McpCompatibility::from_config(&json!({"McpCompatibility": {"ForceLegacyInitialize": "maybe"}}));
        assert_eq!(m.errors[0].field, "McpCompatibility.ForceLegacyInitialize");
        assert!(!m.force_legacy_initialize);
    }

    #[test]
    fn path_resolution() {
        let d = dir();
        assert_eq!(resolve_path("./mcpapps", &d), PathBuf::from("/etc/gw/mcpapps"));
        assert_eq!(resolve_path("apps/x", &d), PathBuf::from("/etc/gw/apps/x"));
        assert_eq!(resolve_path(".", &d), d);
        assert_eq!(resolve_path("/abs", &d), PathBuf::from("/abs"));
        assert_eq!(resolve_path("../up", &d), PathBuf::from("/etc/gw/../up"));
    }


    fn parse_manifest(v: Value) -> crate::apps::manifest::ParsedManifest {
        Manifest::parse(&v.to_string(), Path::new("/apps/x/openclaw.mcpapp.json")).expect("json object")
    }

    #[test]
    fn overrides_set_the_health_check_interval() {
        let off = parse_manifest(json!({"id": "a", "transport": "http", "url": "http://h/mcp", "healthCheckIntervalSeconds": 0}));
        let e = EntryOverride { health_check_interval_seconds: Some(1), ..Default::default() };
        assert_eq!(e.apply_to(&off.manifest).health_check_interval_seconds, 1);
    }

    #[test]
    fn overrides_replace_scalars_and_merge_maps() {
        let m = parse_manifest(json!({
            "id": "a", "transport": "stdio", "command": "old", "arguments": ["1"],
            "environment": {"KEEP": "k", "OVER": "m"}, "headers": {"X-Keep": "k", "X-Over": "m"},
            "toolNamePrefix": "a.", "startupTimeoutSeconds": 5, "requestTimeoutSeconds": 6
        }))
        .manifest;
        let entry = EntryOverride {
            transport: Some(Transport::Http),
            command: Some("new".into()),
            arguments: Some(vec!["2".into(), "3".into()]),
            url: Some("http://h/mcp".into()),
            tool_name_prefix: Some("b.".into()),
            startup_timeout_seconds: Some(7),
            request_timeout_seconds: Some(8),
            working_directory: Some("wd".into()),
            environment: [("OVER".to_string(), "e".to_string()), ("NEW".to_string(), "n".to_string())].into(),
            headers: [("x-over".to_string(), "e".to_string()), ("X-New".to_string(), "n".to_string())].into(),
            ..Default::default()
        };
        let e = entry.apply_to(&m);
        assert_eq!(e.transport, Transport::Http);
        assert_eq!(e.command.as_deref(), Some("new"));
        assert_eq!(e.arguments, ["2", "3"]);
        assert_eq!(e.url.as_deref(), Some("http://h/mcp"));
        assert_eq!(e.tool_name_prefix.as_deref(), Some("b."));
        assert_eq!((e.startup_timeout_seconds, e.request_timeout_seconds), (7, 8));
        assert_eq!(e.resolved_working_dir(), PathBuf::from("/apps/x/wd"));
        let env: Vec<_> = e.environment.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(env, ["KEEP=k", "NEW=n", "OVER=e"]);
        let hdr: Vec<_> = e.headers.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(hdr, ["x-keep=k", "x-new=n", "x-over=e"]);
        assert!(e.validate().is_empty());
        // An empty override changes nothing.
        assert_eq!(EntryOverride::default().apply_to(&m), m);
    }

    #[test]
    fn override_can_supply_missing_url() {
        let m = parse_manifest(json!({"id": "a", "transport": "http"})).manifest;
        let fields: Vec<_> = m.validate().into_iter().map(|e| e.field).collect();
        assert_eq!(fields, ["url"]);
        let entry = EntryOverride { url: Some("https://h/mcp".into()), ..Default::default() };
        assert!(entry.apply_to(&m).validate().is_empty());
    }
}
