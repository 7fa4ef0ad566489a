//! Every configuration key the gateway reads, in one place, and the check that names the others.
//!
//! A misspelt key (`Gateway.Urlz`) would otherwise be ignored in silence and the gateway would run
//! on the default. At startup (of `serve` and of the one-shot commands) each key of the effective
//! configuration — the file or the embedded default, after the environment's `A__B` overrides —
//! that nothing reads earns one warning naming its full path.
//!
//! Keys match case-insensitively, as everywhere in the configuration (ASP.NET style). Objects
//! whose keys are the operator's own names (app ids under `McpApps.Entries`, server ids under
//! `Plugins.Mcp.Servers`) have their entries checked but not their names; values that are data
//! (`Headers`, `Environment`, `Tools.Preference`, lists) are not looked into.
//!
//! Who reads what: the host (`gateway_config.rs`, `serve.rs`, `http/`, `chat/`, `tools/`,
//! `logging.rs`) and the module (`mcpapp-plugin`: `apps/config.rs` for `McpApps` and
//! `McpCompatibility`, `apps/mcp_servers.rs` for `Plugins.Mcp`, `runtime/faults.rs` for
//! `Testing.Faults`). A key read anywhere must be listed here; a unit test below checks the
//! configuration examples of the repository against the list.

use serde_json::Value;

/// The shape of the configuration.
#[derive(Debug)]
pub enum Key {
    /// A value of any shape (string, number, list, or an object of data such as headers).
    Value,
    /// An object with these keys.
    Section(&'static [(&'static str, Key)]),
    /// An object whose keys are names the operator chooses; each entry has the inner shape.
    Named(&'static Key),
}

use Key::{Named, Section, Value as V};

/// `McpApps.Entries.{appId}` (mcpapp-plugin `apps/config.rs`, `read_entry`).
const APP_ENTRY: Key = Section(&[
    ("Enabled", V),
    ("Transport", V),
    ("Command", V),
    ("Arguments", V),
    ("Url", V),
    ("ToolNamePrefix", V),
    ("StartupTimeoutSeconds", V),
    ("RequestTimeoutSeconds", V),
    ("HealthCheckIntervalSeconds", V),
    ("Environment", V),
    ("Headers", V),
    ("WorkingDirectory", V),
    // SPEC R48: replaces the manifest's `permissions` part by part (mcpapp-plugin `apps/permissions.rs`).
    ("Permissions", V),
]);

/// `Sandbox` (mcpapp-plugin `apps/permissions.rs`, `Sandbox::from_config`; SPEC R48): `Mode` is
/// enforce, warn or off; `SimulateNoLandlock` is the test switch of a kernel without Landlock.
const SANDBOX: Key = Section(&[("Mode", V), ("SimulateNoLandlock", V)]);

/// `McpApps` (mcpapp-plugin `apps/config.rs`, `McpAppsConfig::from_config`).
const MCP_APPS: Key = Section(&[
    ("Enabled", V),
    ("DiscoveryPaths", V),
    ("AllowlistSemantics", V),
    ("Allow", V),
    ("Deny", V),
    ("Entries", Named(&APP_ENTRY)),
]);

/// `McpCompatibility` (mcpapp-plugin `apps/config.rs`, `McpCompatibility::from_config`).
const MCP_COMPATIBILITY: Key =
    Section(&[("EnableDiscoveryFirst", V), ("ForceLegacyInitialize", V), ("AllowRelaxedInputSchemaValidation", V), ("ToolsOnly", V)]);

/// `Plugins.Mcp.Servers.{id}`: `Enabled`, and the manifest's fields in PascalCase (mcpapp-plugin
/// `apps/mcp_servers.rs` turns an entry into a manifest).
const MCP_SERVER: Key = Section(&[
    ("Enabled", V),
    ("Id", V),
    ("Name", V),
    ("Description", V),
    ("Author", V),
    ("License", V),
    ("HomepageUrl", V),
    ("IconUrl", V),
    ("Category", V),
    ("Version", V),
    ("ProtocolVersion", V),
    ("MinHostVersion", V),
    ("Transport", V),
    ("Command", V),
    ("Arguments", V),
    ("WorkingDirectory", V),
    ("Url", V),
    ("Headers", V),
    ("Environment", V),
    ("HasUi", V),
    ("UiResourceUri", V),
    ("ToolNamePrefix", V),
    ("StartupTimeoutSeconds", V),
    ("RequestTimeoutSeconds", V),
    ("HealthCheckIntervalSeconds", V),
    ("Tags", V),
    ("Capabilities", V),
    ("Metadata", V),
]);

/// `Plugins` (mcpapp-plugin `apps/mcp_servers.rs`; the host's `workspace.rs` for
/// `AllowedCommands`).
const PLUGINS: Key =
    Section(&[("Mcp", Section(&[("Enabled", V), ("Servers", Named(&MCP_SERVER)), ("AllowedCommands", V)]))]);

/// The whole configuration.
pub const CONFIGURATION: Key = Section(&[
    (
        "Gateway",
        Section(&[
            // gateway_config.rs, serve.rs
            ("Urls", V),
            ("ModulePath", V),
            ("DataPath", V),
            ("DataDir", V),
            // SPEC R53: where `apps add` installs apps (install/, gateway_config.rs)
            ("AppsPath", V),
            ("ShutdownTimeoutSeconds", V),
            ("WorkerThreads", V),
            // http/auth.rs
            ("AlwaysRequireAuth", V),
            ("AuthToken", V),
            ("AuthTokenEnv", V),
            ("SessionMinutes", V),
            ("AllowQueryStringToken", V),
            // http/admin.rs
            ("ModuleDirectory", V),
            ("ModuleSwapDrainSeconds", V),
            // http/apps_mcp.rs
            ("MaxRequestBytes", V),
            // http/connections.rs
            ("HeaderReadTimeoutSeconds", V),
            ("RequestBodyTimeoutSeconds", V),
            ("ResponseWriteTimeoutSeconds", V),
            // http/health.rs, http/sandbox.rs
            ("PublicBaseUrl", V),
            ("PublicSandboxUrl", V),
            ("SandboxUrls", V),
            ("SandboxUrl", V),
        ]),
    ),
    // http/auth.rs, http/cors.rs
    ("Security", Section(&[("AllowedOrigins", V)])),
    // chat/provider.rs
    (
        "Agent",
        Section(&[
            ("BaseUrl", V),
            ("Model", V),
            ("ApiKeyEnv", V),
            ("SystemPrompt", V),
            ("MaxToolRounds", V),
            ("MaxHistoryBytes", V),
            ("TimeoutSeconds", V),
        ]),
    ),
    // chat/mod.rs
    ("Sessions", Section(&[("Store", V), ("RedisUrl", V), ("RedisKeyPrefix", V), ("RedisCaFile", V), ("RedisCluster", V), ("LockLeaseSeconds", V)])),
    // http/replicas/
    ("Cluster", Section(&[("Secret", V), ("SecretEnv", V), ("AdvertiseUrl", V), ("ReplicaId", V), ("HeartbeatSeconds", V)])),
    // tools/preference.rs
    ("Tools", Section(&[("Preference", V)])),
    // logging.rs
    ("Logging", Section(&[("Format", V), ("Level", V)])),
    // mcpapp-plugin runtime/faults.rs (builds with the `fault-injection` feature only)
    ("Testing", Section(&[("Faults", V)])),
    ("McpApps", MCP_APPS),
    ("McpCompatibility", MCP_COMPATIBILITY),
    ("Plugins", PLUGINS),
    ("Sandbox", SANDBOX),
    // The module's sections may also live under `OpenClaw` (mcpapp-plugin `apps/config.rs`).
    (
        "OpenClaw",
        Section(&[("McpApps", MCP_APPS), ("McpCompatibility", MCP_COMPATIBILITY), ("Plugins", PLUGINS), ("Sandbox", SANDBOX)]),
    ),
]);

/// A key nothing reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownKey {
    /// The full path as spelt in the configuration, `.`-separated (`Gateway.Urlz`).
    pub path: String,
    /// A known key of the same section spelt nearly the same (`Gateway.Urls`).
    pub suggestion: Option<String>,
}

impl std::fmt::Display for UnknownKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown configuration key {} is ignored", self.path)?;
        if let Some(s) = &self.suggestion {
            write!(f, " (did you mean {s}?)")?;
        }
        Ok(())
    }
}

/// Every key of `config` that [`CONFIGURATION`] does not list, in document order per object.
pub fn unknown_keys(config: &Value) -> Vec<UnknownKey> {
    let mut out = Vec::new();
    walk(&CONFIGURATION, config, "", &mut out);
    out
}

/// Logs one warning per unknown key of the effective configuration.
pub fn warn_unknown(config: &Value) {
    for key in unknown_keys(config) {
        tracing::warn!("{key}");
    }
}

fn walk(shape: &Key, value: &Value, path: &str, out: &mut Vec<UnknownKey>) {
    let Value::Object(map) = value else { return };
    let join = |name: &str| {
        let name = segment(name);
        if path.is_empty() { name.into_owned() } else { format!("{path}.{name}") }
    };
    match shape {
        Key::Value => {}
        Key::Named(inner) => {
            for (name, v) in map {
                walk(inner, v, &join(name), out);
            }
        }
        Key::Section(known) => {
            for (name, v) in map {
                match known.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)) {
                    Some((_, child)) => walk(child, v, &join(name), out),
                    None => out.push(UnknownKey {
                        path: join(name),
                        suggestion: known.iter().map(|(k, _)| *k).find(|k| !name.trim().is_empty() && close(k, name)).map(&join),
                    }),
                }
            }
        }
    }
}

/// A key as a path names it: quoted when it would not read as one segment (empty, blank, or
/// holding a `.` or a quote), so that `{"": 1}` is reported as `""` and not as nothing.
fn segment(name: &str) -> std::borrow::Cow<'_, str> {
    let plain = !name.trim().is_empty() && name.trim() == name && !name.contains(['.', '"']) && !name.contains(char::is_control);
    if plain { name.into() } else { format!("{name:?}").into() }
}

/// Spelt nearly the same: at most two single-character edits apart, ignoring case.
fn close(a: &str, b: &str) -> bool {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    if a.len().abs_diff(b.len()) > 2 {
        return false;
    }
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = (prev + usize::from(ca != cb)).min(row[j] + 1).min(row[j + 1] + 1);
            prev = row[j + 1];
            row[j + 1] = here;
        }
    }
    row[b.len()] <= 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(config: &Value) -> Vec<String> {
        unknown_keys(config).into_iter().map(|k| k.path).collect()
    }

    #[test]
    fn unknown_keys_are_named_by_their_full_path() {
        let config = json!({
            "Gateway": {"Urlz": "x", "urls": "http://127.0.0.1:1"},
            "OpenClaw": {"McpApps": {"Enabled": true, "Entries": {"my-app": {"Comand": "x", "Url": "http://h"}}}},
            "Plugins": {"Mcp": {"Servers": {"files": {"Command": "a", "Args": []}}, "AllowedCommands": ["a"]}},
            "Sesions": {"Store": "sqlite"},
            "Logging": {"LogLevel": {"Default": "Information"}}
        });
        assert_eq!(
            paths(&config),
            [
                "Gateway.Urlz",
                "Logging.LogLevel",
                "OpenClaw.McpApps.Entries.my-app.Comand",
                "Plugins.Mcp.Servers.files.Args",
                "Sesions"
            ]
        );
        let first = &unknown_keys(&config)[0];
        assert_eq!(first.suggestion.as_deref(), Some("Gateway.Urls"));
        assert_eq!(first.to_string(), "unknown configuration key Gateway.Urlz is ignored (did you mean Gateway.Urls?)");
        assert_eq!(unknown_keys(&json!({"Zzz": 1}))[0].suggestion, None);
    }

    #[test]
    fn keys_that_would_not_read_as_one_segment_are_quoted() {
        let config = json!({"": 1, "Gateway": {" ": 2, "a.b": 3, "Urls ": 4, "say \"hi\"": 5}, "Ui": 6});
        assert_eq!(paths(&config), ["\"\"", "Gateway.\" \"", "Gateway.\"Urls \"", "Gateway.\"a.b\"", "Gateway.\"say \\\"hi\\\"\"", "Ui"]);
        let empty = &unknown_keys(&config)[0];
        assert_eq!(empty.to_string(), "unknown configuration key \"\" is ignored");
    }

    #[test]
    fn operator_names_and_data_are_not_keys() {
        let config = json!({
            "MCPAPPS": {"entries": {"Anything-Goes": {"environment": {"MY_VAR": "1"}, "Headers": {"X-Key": "k"}}}},
            "Plugins": {"Mcp": {"Servers": {"weird name": {"Transport": "http", "Metadata": {"free": {"form": 1}}}}}},
            "Tools": {"Preference": ["mcp:*"]},
            "McpApps": {"Allow": {"0": "a", "Extra": "z"}},
            "Gateway": "not an object",
            "Testing": {"Faults": ["task:list_apps"]}
        });
        assert!(paths(&config).is_empty(), "{:?}", paths(&config));
    }

    /// The configuration examples of the repository: the embedded default, the seed's blocks
    /// (mcpapp-plugin `apps/config.rs` tests) and every configuration block of the README.
    #[test]
    fn the_repository_examples_have_no_unknown_key() {
        let default: Value = serde_json::from_str(crate::config::settings::DEFAULT_CONFIG).unwrap();
        assert!(paths(&default).is_empty(), "appsettings.default.json: {:?}", paths(&default));
        let seed = json!({"McpApps": {"Enabled": true, "DiscoveryPaths": ["./mcpapps"], "AllowlistSemantics": "legacy",
            "Allow": ["*"], "Deny": [], "Entries": {"grocery-inventory": {"Enabled": true, "Url": "https://localhost:5001/mcp",
            "ToolNamePrefix": "grocery.", "StartupTimeoutSeconds": 15}}}});
        assert!(paths(&seed).is_empty(), "{:?}", paths(&seed));

        let readme = include_str!("../../../README.md");
        let mut checked = 0;
        for block in readme.split("```json").skip(1).filter_map(|rest| rest.split("```").next()) {
            // A block may be a fragment of the configuration (`"Agent": {…}`).
            let Some(Value::Object(example)) =
                serde_json::from_str(block).ok().or_else(|| serde_json::from_str(&format!("{{{block}}}")).ok())
            else {
                continue;
            };
            // Manifests and HTTP bodies are JSON too: only blocks of configuration sections count.
            let is_config = example.keys().all(|k| match &CONFIGURATION {
                Key::Section(known) => known.iter().any(|(s, _)| s.eq_ignore_ascii_case(k)),
                _ => false,
            });
            if !is_config {
                continue;
            }
            let example = Value::Object(example);
            assert!(paths(&example).is_empty(), "README block {block}: {:?}", paths(&example));
            checked += 1;
        }
        assert!(checked >= 3, "the README's configuration blocks were not found ({checked})");
    }

    /// Whether `path` (`["Gateway", "Urls"]`) names a key of [`CONFIGURATION`].
    fn listed(path: &[&str]) -> bool {
        let mut shape = &CONFIGURATION;
        for segment in path {
            shape = match shape {
                Key::Section(known) => match known.iter().find(|(k, _)| k.eq_ignore_ascii_case(segment)) {
                    Some((_, child)) => child,
                    None => return false,
                },
                Key::Named(inner) => inner,
                Key::Value => return false,
            };
        }
        true
    }

    /// Every `"Section:Key"` the host's code looks up (`settings.get_str("Gateway:Urls")`) is listed.
    #[test]
    fn every_key_the_host_reads_is_listed() {
        let mut found = Vec::new();
        for (path, product) in crate::test_support::product_sources() {
            // String literals made of `Word:Word…` only.
            for literal in product.split('"').skip(1).step_by(2) {
                let segments: Vec<&str> = literal.split(':').collect();
                let lookup = segments.len() >= 2
                    && segments.iter().all(|s| s.starts_with(|c: char| c.is_ascii_uppercase()) && s.chars().all(|c| c.is_ascii_alphanumeric()));
                if lookup {
                    found.push((path.display().to_string(), literal.to_string(), listed(&segments)));
                }
            }
        }
        assert!(found.iter().any(|(_, k, _)| k == "Gateway:Urls"), "the scan found no lookups: {found:?}");
        let missing: Vec<_> = found.iter().filter(|(_, _, ok)| !ok).collect();
        assert!(missing.is_empty(), "keys read but not listed in CONFIGURATION: {missing:?}");
    }

    #[test]
    fn environment_variable_sections_are_all_known() {
        // Every section an environment variable may address is one the gateway reads.
        for section in crate::config::env_overrides::KNOWN_SECTIONS {
            assert!(paths(&json!({ *section: {} })).is_empty(), "{section}");
        }
    }

    #[test]
    fn near_spellings() {
        assert!(close("Urls", "Urlz") && close("Enabled", "enable") && close("Store", "stroe"));
        assert!(!close("Urls", "ModulePath") && !close("Faults", "Fa"));
    }
}
