//! The gateway's configuration: `appsettings.json` (or the embedded default), environment
//! overrides in ASP.NET's `Section__Key` form, and the `Gateway` section the host itself reads.
//!
//! The host owns configuration loading so that the module receives one effective JSON document
//! (SPEC R11) and never reads the environment itself.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// The configuration used when `--config` is not given: MCP Apps on, `./mcpapps` scanned.
pub const DEFAULT_CONFIG: &str = include_str!("../appsettings.default.json");

/// Top-level sections that environment variables may override. Other variables are ignored so
/// that unrelated environment (PATH, HOME…) never leaks into the configuration.
pub const OVERRIDABLE_SECTIONS: &[&str] =
    &["OpenClaw", "McpApps", "Gateway", "Plugins", "Security", "Agent", "Tools", "Sessions", "McpCompatibility", "Testing"];

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("cannot read configuration file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("configuration file {path} is not valid JSON: {source}")]
    Parse { path: PathBuf, source: serde_json::Error },
    #[error("configuration file {path} must contain a JSON object at top level")]
    NotAnObject { path: PathBuf },
}

/// The effective configuration and where it came from.
#[derive(Debug, Clone)]
pub struct Settings {
    pub effective: Value,
    /// Relative paths in the configuration resolve against this folder.
    pub config_dir: PathBuf,
    pub config_path: Option<PathBuf>,
}

impl Settings {
    /// Reads `path` (or the embedded default) and applies the process environment's overrides.
    pub fn load(path: Option<&Path>) -> Result<Settings, SettingsError> {
        let (mut effective, config_dir, config_path) = match path {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|source| SettingsError::Read { path: path.to_path_buf(), source })?;
                let value: Value = serde_json::from_str(&text)
                    .map_err(|source| SettingsError::Parse { path: path.to_path_buf(), source })?;
                if !value.is_object() {
                    return Err(SettingsError::NotAnObject { path: path.to_path_buf() });
                }
                let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
                let dir = abs.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
                (value, dir, Some(abs))
            }
            None => {
                let value = serde_json::from_str(DEFAULT_CONFIG).expect("the embedded default configuration is JSON");
                (value, std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")), None)
            }
        };
        apply_env_overrides(&mut effective, std::env::vars());
        Ok(Settings { effective, config_dir, config_path })
    }

    /// A value by a `:`-separated, case-insensitive path (`Gateway:Urls`), as ASP.NET reads it.
    pub fn get(&self, path: &str) -> Option<&Value> {
        let mut node = &self.effective;
        for segment in path.split(':') {
            node = get_ci(node.as_object()?, segment)?;
        }
        Some(node)
    }

    pub fn get_str(&self, path: &str) -> Option<String> {
        match self.get(path)? {
            Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }

    /// A boolean that may arrive as a string from the environment (`"true"`).
    pub fn get_bool(&self, path: &str) -> Option<bool> {
        match self.get(path)? {
            Value::Bool(b) => Some(*b),
            Value::String(s) => s.trim().parse::<bool>().ok().or_else(|| match s.trim() {
                "1" => Some(true),
                "0" => Some(false),
                _ => None,
            }),
            _ => None,
        }
    }

    /// A path from the configuration, resolved against the configuration's folder.
    pub fn resolve_path(&self, value: &str) -> PathBuf {
        let p = Path::new(value);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.config_dir.join(p)
        }
    }
}

fn get_ci<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    map.get(key).or_else(|| map.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v))
}

/// Applies `A__B__C=value` variables over `config` (ASP.NET semantics): keys match existing ones
/// case-insensitively, missing objects are created, and numeric segments index arrays. Values stay
/// strings; readers accept `"true"`/`"15"` where they expect booleans and numbers.
pub fn apply_env_overrides(config: &mut Value, vars: impl IntoIterator<Item = (String, String)>) {
    let mut vars: Vec<(String, String)> = vars
        .into_iter()
        .filter(|(k, _)| {
            let first = k.split("__").next().unwrap_or("");
            k.contains("__") && OVERRIDABLE_SECTIONS.iter().any(|s| s.eq_ignore_ascii_case(first))
        })
        .collect();
    vars.sort();
    for (key, value) in vars {
        let segments: Vec<&str> = key.split("__").filter(|s| !s.is_empty()).collect();
        set_path(config, &segments, Value::String(value));
    }
}

fn set_path(node: &mut Value, segments: &[&str], value: Value) {
    let Some((first, rest)) = segments.split_first() else {
        *node = value;
        return;
    };
    if let (Value::Array(items), Ok(index)) = (&mut *node, first.parse::<usize>()) {
        while items.len() <= index {
            items.push(Value::Null);
        }
        return set_path(&mut items[index], rest, value);
    }
    if !node.is_object() {
        *node = Value::Object(Map::new());
    }
    let map = node.as_object_mut().expect("just made an object");
    let key = map.keys().find(|k| k.eq_ignore_ascii_case(first)).cloned().unwrap_or_else(|| first.to_string());
    let child = map.entry(key).or_insert(Value::Null);
    if child.is_null() && !rest.is_empty() && rest[0].parse::<usize>().is_ok() {
        *child = Value::Array(Vec::new());
    }
    set_path(child, rest, value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn env_overrides_follow_aspnet_rules() {
        let mut config = json!({"OpenClaw": {"McpApps": {"Enabled": false, "DiscoveryPaths": ["./a"]}}});
        apply_env_overrides(
            &mut config,
            vec![
                ("OpenClaw__McpApps__Enabled".to_string(), "true".to_string()),
                ("openclaw__mcpapps__DiscoveryPaths__1".to_string(), "./b".to_string()),
                ("Gateway__Urls".to_string(), "http://127.0.0.1:9".to_string()),
                ("HOME".to_string(), "/root".to_string()),
                ("Unrelated__Key".to_string(), "x".to_string()),
            ],
        );
        assert_eq!(
            config,
            json!({
                "OpenClaw": {"McpApps": {"Enabled": "true", "DiscoveryPaths": ["./a", "./b"]}},
                "Gateway": {"Urls": "http://127.0.0.1:9"}
            })
        );
    }

    #[test]
    fn lookups_are_case_insensitive_and_accept_strings() {
        let s = Settings {
            effective: json!({"gateway": {"alwaysRequireAuth": "true", "Urls": "http://x"}}),
            config_dir: PathBuf::from("/cfg"),
            config_path: None,
        };
        assert_eq!(s.get_bool("Gateway:AlwaysRequireAuth"), Some(true));
        assert_eq!(s.get_str("Gateway:Urls").as_deref(), Some("http://x"));
        assert_eq!(s.resolve_path("mods/a.so"), PathBuf::from("/cfg/mods/a.so"));
    }
}
