//! Standard MCP servers from the configuration (`Plugins.Mcp`, SPEC R30): no manifest, no UI, just
//! a server whose tools join the agent's registry as provider `mcp:{serverId}`.
//!
//! They are supervised exactly like apps — same connection, timeouts and restart rules — so each
//! entry becomes an effective [`Manifest`] built from its PascalCase settings:
//!
//! ```json
//! "Plugins": { "Mcp": { "Enabled": true, "Servers": {
//!     "files": { "Transport": "stdio", "Command": "mcp-files", "Arguments": ["--root", "."] },
//!     "search": { "Transport": "http", "Url": "https://search.example/mcp", "Headers": {"X-Key": "…"} }
//! } } }
//! ```

use std::path::Path;

use serde_json::{Map, Value};

use crate::apps::config::get_ci;
use crate::apps::install_state::{AppState, InstallState};
use crate::apps::manifest::{Manifest, ValidationError};

/// Registry keys of standard servers carry this prefix, so they never collide with app ids (which
/// cannot contain `:`), and the key is also the tool provider id.
pub const KEY_PREFIX: &str = host_abi::MCP_SERVER_KEY_PREFIX;

/// Fields whose values may arrive as strings from environment overrides.
const INTEGER_FIELDS: &[&str] = &["startupTimeoutSeconds", "requestTimeoutSeconds", "healthCheckIntervalSeconds"];

/// One [`InstallState`] per configured server, keyed `mcp:{id}`, Validated or Failed with its
/// errors (field names as `Plugins.Mcp.Servers.{id}.{Field}`).
pub fn installs(root: &Value, config_dir: &Path) -> Vec<InstallState> {
    let Some(section) = plugins_mcp(root) else { return Vec::new() };
    let enabled = get_ci(section, "Enabled").map(is_true).unwrap_or(true);
    if !enabled {
        tracing::info!("Plugins.Mcp is disabled; no standard MCP servers");
        return Vec::new();
    }
    let Some(servers) = get_ci(section, "Servers").and_then(Value::as_object) else { return Vec::new() };
    let origin = config_dir.join("appsettings.json");
    let mut out = Vec::new();
    for (id, entry) in servers {
        let key = format!("{KEY_PREFIX}{id}");
        let field = |f: &str| format!("Plugins.Mcp.Servers.{id}.{f}");
        let Some(entry) = entry.as_object() else {
            let mut st = InstallState::new(id.clone(), key, origin.clone(), None);
            st.validation_errors.push(ValidationError::new(field(""), "expected an object"));
            let _ = st.fail("invalid MCP server definition");
            out.push(st);
            continue;
        };
        if get_ci(entry, "Enabled").is_some_and(|v| !is_true(v)) {
            continue;
        }
        let object = to_manifest_object(id, entry);
        let parsed = Manifest::parse_object(&object, &origin);
        let errors: Vec<ValidationError> = parsed
            .all_errors()
            .into_iter()
            .map(|e| ValidationError::new(field(&pascal(&e.field)), e.message))
            .collect();
        let mut st = InstallState::new(id.clone(), key, origin.clone(), Some(parsed.manifest));
        if errors.is_empty() {
            let _ = st.transition(AppState::Validated, "configured in Plugins.Mcp");
        } else {
            let summary = errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
            st.validation_errors = errors;
            let _ = st.fail(format!("invalid MCP server definition: {summary}"));
        }
        out.push(st);
    }
    out
}

fn plugins_mcp(root: &Value) -> Option<&Map<String, Value>> {
    let root = root.as_object()?;
    let plugins = get_ci(root, "Plugins")
        .or_else(|| get_ci(root, "OpenClaw").and_then(Value::as_object).and_then(|o| get_ci(o, "Plugins")))?;
    get_ci(plugins.as_object()?, "Mcp")?.as_object()
}

fn is_true(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::String(s) => s.trim().eq_ignore_ascii_case("true") || s.trim() == "1",
        _ => false,
    }
}

/// `{"Transport": "stdio", "StartupTimeoutSeconds": "15"}` → `{"id": …, "transport": "stdio",
/// "startupTimeoutSeconds": 15}`.
fn to_manifest_object(id: &str, entry: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("id".into(), Value::from(id));
    for (key, value) in entry {
        let camel = camel(key);
        if camel == "enabled" {
            continue;
        }
        let value = match (&camel, value) {
            (k, Value::String(s)) if INTEGER_FIELDS.contains(&k.as_str()) => {
                s.trim().parse::<u64>().map(Value::from).unwrap_or_else(|_| value.clone())
            }
            (k, Value::String(s)) if k == "hasUi" => Value::Bool(s.trim().eq_ignore_ascii_case("true")),
            _ => value.clone(),
        };
        out.insert(camel, value);
    }
    out
}

fn camel(key: &str) -> String {
    let mut chars = key.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn pascal(field: &str) -> String {
    let mut chars = field.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn servers_become_effective_manifests() {
        let root = json!({"Plugins": {"Mcp": {"Servers": {
            "files": {"Transport": "stdio", "Command": "mcp-files", "Arguments": ["-v"], "StartupTimeoutSeconds": "7"},
            "web": {"Transport": "http", "Url": "http://127.0.0.1:9/mcp", "Headers": {"X-Key": "k"}},
            "broken": {"Transport": "pigeon"},
            "off": {"Enabled": false, "Command": "x"}
        }}}});
        let installs = installs(&root, Path::new("/cfg"));
        let keys: Vec<&str> = installs.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(keys, ["mcp:broken", "mcp:files", "mcp:web"]);
        let files = &installs[1];
        assert_eq!(files.state, AppState::Validated);
        let m = files.manifest.as_ref().unwrap();
        assert_eq!(m.command.as_deref(), Some("mcp-files"));
        assert_eq!(m.startup_timeout_seconds, 7);
        assert_eq!(installs[2].manifest.as_ref().unwrap().headers.get("x-key").map(String::as_str), Some("k"));
        assert_eq!(installs[0].state, AppState::Failed);
        assert!(installs[0].validation_errors[0].field.starts_with("Plugins.Mcp.Servers.broken.Transport"));
    }
}
