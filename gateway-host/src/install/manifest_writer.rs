//! The `openclaw.mcpapp.json` an install writes (SPEC R53), from what the package itself says:
//! its entry point, `mcpName`, description, the environment variables it declares, and the
//! version that was installed. Only the fields the gateway reads are written, in the order a
//! person reads them; the module checks the result (`manifest.validate`) before it is put in place.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

/// What an installer learnt of the package it installed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PackageEntry {
    /// `npm`, `pypi` or `folder`.
    pub registry_type: &'static str,
    /// The package's name in its registry.
    pub package: String,
    /// The version installed, as the registry spells it (`2026.10.19`, `1.0.post1`).
    pub version: String,
    /// The program to start, relative to the app's folder or a bare name found on `PATH`.
    pub command: String,
    /// Its arguments (runtime arguments, the entry script, package arguments).
    pub arguments: Vec<String>,
    pub title: Option<String>,
    pub description: Option<String>,
    pub homepage: Option<String>,
    pub license: Option<String>,
    pub author: Option<String>,
    /// The server's name in the MCP Registry (`package.json` `mcpName`, `server.json` `name`).
    pub mcp_name: Option<String>,
    pub environment: Vec<EnvVar>,
    /// Things the user should know (runtime arguments left out, a value to fill in).
    pub notes: Vec<String>,
}

/// An environment variable the package declares (MCP Registry `environmentVariables`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvVar {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub is_required: bool,
    pub is_secret: bool,
    /// The declared default; the manifest's value until the user sets another.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// What the user chose for the app.
#[derive(Debug, Clone)]
pub struct AppChoices {
    pub id: String,
    /// `toolNamePrefix`; `None` is the id and a dot.
    pub prefix: Option<String>,
    /// SOURCE as given (`npm:…`, `pypi:…`, a path), kept so `apps update` installs from it again.
    pub source: String,
    /// The version folder inside the app's folder (`v1`, `v2`, …).
    pub folder: String,
    /// Values the user filled in a previous version's `environment` (kept over an update).
    pub filled_environment: BTreeMap<String, String>,
    /// What the user added to a previous version's manifest, fields an install does not write
    /// ([`kept_fields`]: `permissions`, `requestTimeoutSeconds`, …), and its
    /// `startupTimeoutSeconds`: kept over an update.
    pub kept: Map<String, Value>,
}

/// The top-level fields an install writes ([`Written`]); a unit test holds the two together.
const WRITTEN_FIELDS: &[&str] = &[
    "id", "name", "description", "version", "author", "license", "homepageUrl", "transport", "command", "arguments",
    "environment", "toolNamePrefix", "startupTimeoutSeconds", "metadata",
];

/// What of `previous` (an installed manifest) an update keeps: the fields an install does not
/// write, which only the user put there (`permissions` to widen the app's confinement,
/// `requestTimeoutSeconds`, `hasUi`…), and `startupTimeoutSeconds` when it is not what an
/// install writes (a user raised it for a slow start). The rest comes from the package again.
pub fn kept_fields(previous: &Value) -> Map<String, Value> {
    let Some(fields) = previous.as_object() else { return Map::new() };
    fields
        .iter()
        .filter(|(key, value)| match key.as_str() {
            "startupTimeoutSeconds" => value.as_u64() != Some(STARTUP_TIMEOUT_SECONDS),
            key => !WRITTEN_FIELDS.contains(&key),
        })
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}

/// The fields an install writes for how the app starts — `command`, `arguments`, `name` — whose
/// value in `previous` (its version folder read as the new one's: `v1/…` as `v2/…`) is not what
/// the new manifest has, each with what it was: a user's hand edit there (an argument added) or
/// the new package's change. An update does not keep these; it names them so nothing goes
/// without a word.
pub fn replaced_fields(previous: &Value, new: &Value) -> Vec<String> {
    let folder = |m: &Value| m["metadata"]["install"]["folder"].as_str().map(|f| format!("{f}/"));
    let moved = |value: &Value| match (folder(previous), folder(new)) {
        (Some(old), Some(new)) => relocated(value, &old, &new),
        _ => value.clone(),
    };
    ["command", "arguments", "name"]
        .into_iter()
        .filter_map(|field| {
            let was = previous.get(field)?;
            (moved(was) != new[field]).then(|| format!("{field} (was {was})"))
        })
        .collect()
}

/// `value` with each string (or string of an array) that starts with `old` starting with `new`.
fn relocated(value: &Value, old: &str, new: &str) -> Value {
    match value {
        Value::String(s) => Value::String(s.strip_prefix(old).map_or_else(|| s.clone(), |rest| format!("{new}{rest}"))),
        Value::Array(items) => Value::Array(items.iter().map(|item| relocated(item, old, new)).collect()),
        other => other.clone(),
    }
}

/// An installed app's cold start (npm resolving modules, Python importing `mcp`) is slower than
/// the module's default 15 s allows on a busy machine.
const STARTUP_TIMEOUT_SECONDS: u64 = 30;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Written<'a> {
    id: &'a str,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    author: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    license: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    homepage_url: Option<&'a str>,
    transport: &'static str,
    command: &'a str,
    arguments: &'a [String],
    environment: BTreeMap<String, String>,
    tool_name_prefix: String,
    startup_timeout_seconds: u64,
    metadata: Metadata<'a>,
    /// [`AppChoices::kept`] but for `startupTimeoutSeconds`, after the rest.
    #[serde(flatten)]
    kept: Map<String, Value>,
}

#[derive(Serialize)]
struct Metadata<'a> {
    install: InstallRecord<'a>,
}

/// `metadata.install`: where the app came from, read by `apps update`, `apps list --installed`
/// and `apps remove` (an app without it was not installed by `apps add`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct InstallRecord<'a> {
    source: &'a str,
    registry_type: &'a str,
    package: &'a str,
    /// The version as the registry spells it; `version` above is its semantic-version form.
    version: &'a str,
    folder: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    mcp_name: Option<&'a str>,
    /// The declared variables, so a user knows what `environment` expects.
    #[serde(skip_serializing_if = "<[EnvVar]>::is_empty")]
    environment: &'a [EnvVar],
}

/// The manifest of `entry` installed as `choices` say: as JSON, and as the text written (its
/// fields in the order above, which a `Value` would sort).
pub fn manifest(entry: &PackageEntry, choices: &AppChoices) -> (Value, String) {
    // `kept` holds no field written here but a raised start timeout ([`kept_fields`]).
    let mut kept = choices.kept.clone();
    let startup_timeout_seconds = kept.remove("startupTimeoutSeconds").and_then(|v| v.as_u64()).unwrap_or(STARTUP_TIMEOUT_SECONDS);
    // A declared variable is a placeholder the user fills: its default, else empty, unless a
    // previous version's manifest had a value for it.
    let mut environment = BTreeMap::new();
    for var in &entry.environment {
        let value = choices.filled_environment.get(&var.name).cloned().or_else(|| var.default.clone()).unwrap_or_default();
        environment.insert(var.name.clone(), value);
    }
    for (name, value) in &choices.filled_environment {
        environment.entry(name.clone()).or_insert_with(|| value.clone());
    }
    let written = Written {
        id: &choices.id,
        name: entry.title.clone().unwrap_or_else(|| display_name(&entry.package)),
        description: entry.description.as_deref(),
        version: semver_of(&entry.version),
        author: entry.author.as_deref(),
        license: entry.license.as_deref(),
        homepage_url: entry.homepage.as_deref().filter(|h| h.starts_with("https://") || h.starts_with("http://")),
        transport: "stdio",
        command: &entry.command,
        arguments: &entry.arguments,
        environment,
        tool_name_prefix: choices.prefix.clone().unwrap_or_else(|| format!("{}.", choices.id)),
        startup_timeout_seconds,
        metadata: Metadata {
            install: InstallRecord {
                source: &choices.source,
                registry_type: entry.registry_type,
                package: &entry.package,
                version: &entry.version,
                folder: &choices.folder,
                mcp_name: entry.mcp_name.as_deref(),
                environment: &entry.environment,
            },
        },
        kept,
    };
    let text = serde_json::to_string_pretty(&written).expect("a manifest serializes");
    (serde_json::to_value(&written).expect("a manifest serializes"), text + "\n")
}

/// A name for people when the package gives no title: its name without the words every MCP
/// server repeats, in words (`@modelcontextprotocol/server-budget-allocator` → `Budget Allocator`).
fn display_name(package: &str) -> String {
    let core = super::source::Source::default_id(package);
    let words: Vec<String> = core
        .split(['-', '_', '.'])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut chars = w.chars();
            chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
        })
        .collect();
    if words.is_empty() { package.to_string() } else { words.join(" ") }
}

/// A registry's version as the semantic version a manifest needs (the module refuses `1.2` or
/// `2025.09.25`): up to three numbers without leading zeros, padded, the rest as a pre-release
/// (`1.0.post1` → `1.0.0-post1`). The exact version stays in `metadata.install.version`.
pub fn semver_of(version: &str) -> String {
    let version = version.trim().trim_start_matches(['v', 'V']);
    let mut numbers: Vec<u64> = Vec::new();
    let mut rest = version;
    while numbers.len() < 3 {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            break;
        }
        numbers.push(rest[..digits].parse().unwrap_or(0));
        rest = &rest[digits..];
        match rest.strip_prefix('.') {
            Some(after) if numbers.len() < 3 && after.starts_with(|c: char| c.is_ascii_digit()) => rest = after,
            _ => break,
        }
    }
    numbers.resize(3, 0);
    let pre: Vec<String> = rest
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|part| !part.is_empty())
        .map(|part| match part.parse::<u64>() {
            Ok(n) => n.to_string(),
            Err(_) => part.to_string(),
        })
        .collect();
    let core = format!("{}.{}.{}", numbers[0], numbers[1], numbers[2]);
    if pre.is_empty() { core } else { format!("{core}-{}", pre.join(".")) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn registry_versions_become_semantic_versions() {
        for (given, expected) in [
            ("2.0.3", "2.0.3"),
            ("2026.10.19", "2026.10.19"),
            ("2025.09.05", "2025.9.5"),
            ("1.0", "1.0.0"),
            ("3", "3.0.0"),
            ("1.0.post1", "1.0.0-post1"),
            ("0.6.2rc1", "0.6.2-rc1"),
            ("2.0.0-beta.1", "2.0.0-beta.1"),
            ("1.2.3.4", "1.2.3-4"),
            ("v1.2.3", "1.2.3"),
        ] {
            assert_eq!(semver_of(given), expected, "{given}");
        }
    }

    #[test]
    fn the_manifest_says_where_the_app_came_from_and_keeps_filled_values() {
        let entry = PackageEntry {
            registry_type: "npm",
            package: "@x/weather".into(),
            version: "1.0".into(),
            command: "node".into(),
            arguments: vec!["v2/node_modules/@x/weather/dist/index.js".into(), "--stdio".into()],
            description: Some("Weather".into()),
            mcp_name: Some("io.github.x/weather".into()),
            environment: vec![
                EnvVar { name: "API_KEY".into(), is_required: true, is_secret: true, ..Default::default() },
                EnvVar { name: "UNITS".into(), default: Some("metric".into()), ..Default::default() },
            ],
            ..Default::default()
        };
        let choices = AppChoices {
            id: "weather".into(),
            prefix: None,
            source: "npm:@x/weather".into(),
            folder: "v2".into(),
            filled_environment: BTreeMap::from([("API_KEY".to_string(), "k".to_string())]),
            kept: Map::new(),
        };
        let (m, text) = manifest(&entry, &choices);
        assert!(text.starts_with("{\n  \"id\": \"weather\",\n  \"name\""), "{text}");
        assert_eq!(m["version"], "1.0.0");
        assert_eq!(m["name"], "Weather", "the package's name in words");
        assert_eq!(display_name("mcp-server-time"), "Time");
        assert_eq!(display_name("@modelcontextprotocol/server-budget-allocator"), "Budget Allocator");
        assert_eq!(m["toolNamePrefix"], "weather.");
        assert_eq!(m["transport"], "stdio");
        assert_eq!(m["environment"], json!({"API_KEY": "k", "UNITS": "metric"}));
        assert_eq!(m["metadata"]["install"]["version"], "1.0");
        assert_eq!(m["metadata"]["install"]["folder"], "v2");
        assert_eq!(m["metadata"]["install"]["environment"][0]["isSecret"], true);
        assert!(m.get("homepageUrl").is_none());
        let keys: Vec<&str> = m.as_object().unwrap().keys().map(String::as_str).collect();
        assert!(keys.iter().all(|k| WRITTEN_FIELDS.contains(k)), "{keys:?} against {WRITTEN_FIELDS:?}");
    }

    /// An update keeps what the user added to the manifest (the confinement widened, a timeout)
    /// and the start timeout they raised; the package's own fields come from the new version.
    #[test]
    fn an_update_keeps_what_the_user_added() {
        let previous = json!({
            "id": "fetch", "name": "Fetch", "version": "1.0.0", "command": "v1/.venv/bin/mcp-server-fetch", "arguments": [],
            "environment": {}, "toolNamePrefix": "fetch.", "startupTimeoutSeconds": 90, "metadata": {"install": {"folder": "v1"}},
            "permissions": {"network": "any"}, "requestTimeoutSeconds": 120,
        });
        let kept = kept_fields(&previous);
        assert_eq!(kept.keys().collect::<Vec<_>>(), ["permissions", "requestTimeoutSeconds", "startupTimeoutSeconds"]);
        let untouched = json!({ "id": "fetch", "startupTimeoutSeconds": STARTUP_TIMEOUT_SECONDS, "metadata": {} });
        assert!(kept_fields(&untouched).is_empty(), "nothing the user added");
        let entry = PackageEntry {
            registry_type: "pypi",
            package: "mcp-server-fetch".into(),
            version: "2.0".into(),
            command: "v2/.venv/bin/mcp-server-fetch".into(),
            ..Default::default()
        };
        let choices = AppChoices {
            id: "fetch".into(),
            prefix: Some("fetch.".into()),
            source: "pypi:mcp-server-fetch".into(),
            folder: "v2".into(),
            filled_environment: BTreeMap::new(),
            kept,
        };
        let (m, text) = manifest(&entry, &choices);
        assert_eq!(m["permissions"], json!({"network": "any"}));
        assert_eq!(m["requestTimeoutSeconds"], 120);
        assert_eq!(m["startupTimeoutSeconds"], 90);
        assert_eq!((m["version"].as_str(), m["command"].as_str()), (Some("2.0.0"), Some("v2/.venv/bin/mcp-server-fetch")));
        assert_eq!(m["metadata"]["install"]["folder"], "v2");
        assert!(text.find("\"metadata\"").unwrap() < text.find("\"permissions\"").unwrap(), "kept fields after the rest: {text}");
        // What it wrote anew is what the old version had, in the new folder: nothing replaced.
        assert!(replaced_fields(&previous, &m).is_empty(), "{:?}", replaced_fields(&previous, &m));
    }

    /// An update names the start fields it replaces when the user had changed them (or the new
    /// package does), the version folder aside.
    #[test]
    fn an_update_names_the_start_fields_it_replaces() {
        let manifest = |folder: &str, arguments: Value, name: &str| {
            json!({ "name": name, "command": "node", "arguments": arguments, "metadata": { "install": { "folder": folder } } })
        };
        let previous = manifest("v1", json!(["v1/node_modules/srv/cli.js", "--verbose"]), "Mine");
        let new = manifest("v2", json!(["v2/node_modules/srv/cli.js"]), "Server");
        assert_eq!(
            replaced_fields(&previous, &new),
            [r#"arguments (was ["v1/node_modules/srv/cli.js","--verbose"])"#, r#"name (was "Mine")"#]
        );
        let same = manifest("v1", json!(["v1/node_modules/srv/cli.js"]), "Server");
        assert!(replaced_fields(&same, &new).is_empty());
    }
}
