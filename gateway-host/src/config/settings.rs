//! The gateway's configuration: `appsettings.json` (or the embedded default), environment
//! overrides in ASP.NET's `Section__Key` form, and the `Gateway` section the host itself reads.
//!
//! The host owns configuration loading so that the module receives one effective JSON document
//! (SPEC R11) and never reads the environment itself.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::config::env_overrides::apply_env_overrides;

/// The configuration used when `--config` is not given: MCP Apps on, `./mcpapps` scanned.
pub const DEFAULT_CONFIG: &str = include_str!("../../appsettings.default.json");

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
}

/// The most a configuration file may hold: far above any real one.
pub const MAX_CONFIG_BYTES: u64 = 16 * 1024 * 1024;

/// The bytes of the file at `path`, refused past `limit` bytes: a path naming a device or a
/// runaway file (`--config /dev/zero`) is an error naming the limit, not a read that never ends
/// while its buffer takes the memory.
pub fn read_bounded(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::new(std::io::ErrorKind::FileTooLarge, format!("larger than {limit} bytes")));
    }
    Ok(bytes)
}

/// [`read_bounded`] of a file that must be UTF-8 text.
pub fn read_text_bounded(path: &Path, limit: u64) -> std::io::Result<String> {
    String::from_utf8(read_bounded(path, limit)?).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

impl Settings {
    /// Reads `path` (or the embedded default) and applies the process environment's overrides,
    /// logging which variables applied.
    pub fn load(path: Option<&Path>) -> Result<Settings, SettingsError> {
        let (settings, applied) = Settings::read(path)?;
        if !applied.is_empty() {
            tracing::info!("Configuration overridden by environment: {}", applied.join(", "));
        }
        Ok(settings)
    }

    /// [`Settings::load`] without logging: also returns the names of the environment variables
    /// applied. `main` reads the configuration this way before logging is set up (the log format
    /// comes from the configuration).
    pub fn read(path: Option<&Path>) -> Result<(Settings, Vec<String>), SettingsError> {
        let (effective, config_dir) = match path {
            Some(path) => {
                let text = read_text_bounded(path, MAX_CONFIG_BYTES)
                    .map_err(|source| SettingsError::Read { path: path.to_path_buf(), source })?;
                Settings::parse_file(&text, path)?
            }
            None => {
                let value = serde_json::from_str(DEFAULT_CONFIG).expect("the embedded default configuration is JSON");
                (value, std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")))
            }
        };
        // `vars_os`: `vars()` panics on a variable that is not UTF-8; such a variable is no override.
        let vars = std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
        Ok(Settings::with_overrides(effective, config_dir, vars))
    }

    /// The text of the configuration file at `path` as a document, and the folder its relative
    /// paths resolve against.
    pub fn parse_file(text: &str, path: &Path) -> Result<(Value, PathBuf), SettingsError> {
        let value: Value =
            serde_json::from_str(text).map_err(|source| SettingsError::Parse { path: path.to_path_buf(), source })?;
        if !value.is_object() {
            return Err(SettingsError::NotAnObject { path: path.to_path_buf() });
        }
        let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let dir = abs.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
        Ok((value, dir))
    }

    /// The effective configuration: `document` with the environment variables `vars` applied
    /// ([`apply_env_overrides`]); also the names of the variables applied.
    pub fn with_overrides(
        mut document: Value,
        config_dir: PathBuf,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> (Settings, Vec<String>) {
        let applied = apply_env_overrides(&mut document, vars, None);
        (Settings { effective: document, config_dir }, applied)
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

    /// A duration in seconds (a number, or a string from the environment; fractions allowed).
    /// Absent → `default`; not a non-negative number → `default` with a warning naming the key.
    pub fn get_seconds(&self, path: &str, default: std::time::Duration) -> std::time::Duration {
        let Some(configured) = self.get_str(path) else { return default };
        // `try_`: a number too large for a `Duration` (`1e300`) is refused, not a panic.
        match configured.parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0).map(std::time::Duration::try_from_secs_f64) {
            Some(Ok(seconds)) => seconds,
            _ => {
                tracing::warn!(
                    "{} {configured:?} is not a number of seconds; using {}",
                    path.replace(':', "."),
                    default.as_secs_f64()
                );
                default
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lookups_are_case_insensitive_and_accept_strings() {
        let s = Settings {
            effective: json!({"gateway": {"alwaysRequireAuth": "true", "Urls": "http://x"}}),
            config_dir: PathBuf::from("/cfg"),
        };
        assert_eq!(s.get_bool("Gateway:AlwaysRequireAuth"), Some(true));
        assert_eq!(s.get_str("Gateway:Urls").as_deref(), Some("http://x"));
        assert_eq!(s.resolve_path("mods/a.so"), PathBuf::from("/cfg/mods/a.so"));
    }

    #[test]
    fn seconds_out_of_range_fall_back_to_the_default() {
        // "1e300" panicked in Duration::from_secs_f64 (fuzz/corpus/settings_env/regression-seconds-overflow).
        let s = Settings {
            effective: json!({"Gateway": {"A": "1e300", "B": 1e300, "C": "-1", "D": "NaN", "E": "2.5", "F": 0}}),
            config_dir: PathBuf::from("/cfg"),
        };
        let default = std::time::Duration::from_secs(7);
        for key in ["A", "B", "C", "D", "Missing"] {
            assert_eq!(s.get_seconds(&format!("Gateway:{key}"), default), default, "{key}");
        }
        assert_eq!(s.get_seconds("Gateway:E", default), std::time::Duration::from_millis(2500));
        assert_eq!(s.get_seconds("Gateway:F", default), std::time::Duration::ZERO);
    }
}
