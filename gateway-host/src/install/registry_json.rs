//! A `server.json` of the MCP Registry (SPEC R53): which of its `packages` the gateway can
//! install (npm or PyPI, over stdio), at which version, and the runtime and package arguments and
//! environment variables it declares. The package itself is then installed like `npm:`/`pypi:`.

use std::path::Path;

use serde_json::Value;

use super::manifest_writer::EnvVar;
use super::source::Source;
use super::InstallError;

/// The package of a `server.json` to install, and what it declares beyond the package.
#[derive(Debug, Clone, PartialEq)]
pub struct RegistryPackage {
    /// `npm:identifier@version` or `pypi:identifier==version`.
    pub source: Source,
    /// The server's name in the registry (`io.github.x/weather`).
    pub server_name: Option<String>,
    pub title: Option<String>,
    pub description: Option<String>,
    /// Arguments for the runtime (`node`), before the entry script.
    pub runtime_arguments: Vec<String>,
    /// Arguments for the server, after its entry.
    pub package_arguments: Vec<String>,
    pub environment: Vec<EnvVar>,
    pub notes: Vec<String>,
}

/// Reads `path` and picks its first package the gateway can install.
pub fn read(path: &Path) -> Result<RegistryPackage, InstallError> {
    let json = super::read_json(path)?;
    pick(&json).map_err(|why| InstallError::BadServerJson { path: path.to_path_buf(), why })
}

/// The first npm or PyPI package over stdio of a `server.json` document.
pub fn pick(json: &Value) -> Result<RegistryPackage, String> {
    let packages = json["packages"].as_array().filter(|p| !p.is_empty()).ok_or("it lists no \"packages\"")?;
    let mut seen = Vec::new();
    for package in packages {
        let registry = text(package, &["registryType", "registry_type", "registry_name"]).unwrap_or_default().to_ascii_lowercase();
        let transport = package["transport"]["type"].as_str().unwrap_or("stdio");
        seen.push(format!("{registry} over {transport}"));
        if transport != "stdio" || !matches!(registry.as_str(), "npm" | "pypi") {
            continue;
        }
        let identifier = text(package, &["identifier", "name"]).ok_or("a package has no \"identifier\"")?;
        let version = text(package, &["version"]).or_else(|| text(json, &["version"])).filter(|v| v != "latest");
        let source = match registry.as_str() {
            "npm" => Source::Npm { name: identifier, version },
            _ => Source::Pypi { name: identifier, version },
        };
        let mut notes = Vec::new();
        let mut runtime_arguments = arguments(&package["runtimeArguments"], &mut notes);
        // Arguments for `npx`/`uvx` (the registry's runtime hint) are not the server's: the
        // gateway runs the installed package itself.
        let hint = package["runtimeHint"].as_str().unwrap_or_default();
        if !runtime_arguments.is_empty() && (matches!(hint, "npx" | "uvx" | "pipx" | "docker") || registry == "pypi") {
            notes.push(format!("runtime arguments {runtime_arguments:?} are for `{hint}` and were left out: the gateway runs the installed package itself"));
            runtime_arguments.clear();
        }
        let package_arguments = arguments(&package["packageArguments"], &mut notes);
        let environment = package["environmentVariables"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| {
                Some(EnvVar {
                    name: v["name"].as_str()?.to_string(),
                    description: v["description"].as_str().map(str::to_string),
                    is_required: v["isRequired"].as_bool().unwrap_or(false),
                    is_secret: v["isSecret"].as_bool().unwrap_or(false),
                    default: v.get("default").and_then(scalar).or_else(|| v.get("value").and_then(scalar)),
                })
            })
            .collect();
        return Ok(RegistryPackage {
            source,
            server_name: text(json, &["name"]),
            title: text(json, &["title"]),
            description: text(json, &["description"]),
            runtime_arguments,
            package_arguments,
            environment,
            notes,
        });
    }
    Err(format!("none of its packages is an npm or PyPI package over stdio, which `apps add` installs (it has: {})", seen.join(", ")))
}

/// The command-line words of a list of registry arguments: `positional` values, `named` ones as
/// `--name value` (or the flag alone). A value the user must choose stays as its hint in `<>`,
/// with a note.
fn arguments(list: &Value, notes: &mut Vec<String>) -> Vec<String> {
    let mut out = Vec::new();
    for a in list.as_array().into_iter().flatten() {
        let value = a.get("value").and_then(scalar).or_else(|| a.get("default").and_then(scalar));
        let hint = a["valueHint"].as_str().map(str::to_string);
        let value = match (value, hint) {
            (Some(v), _) => Some(v),
            (None, Some(h)) if a["isRequired"].as_bool().unwrap_or(false) || a["type"] == "positional" => {
                notes.push(format!("argument <{h}> is a value to fill in the manifest's \"arguments\""));
                Some(format!("<{h}>"))
            }
            (None, _) => None,
        };
        match a["type"].as_str() {
            Some("named") => {
                let Some(name) = a["name"].as_str() else { continue };
                out.push(name.to_string());
                out.extend(value);
            }
            _ => out.extend(value),
        }
    }
    out
}

fn text(v: &Value, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|k| v.get(*k).and_then(Value::as_str)).map(str::trim).filter(|s| !s.is_empty()).map(str::to_string)
}

fn scalar(v: &Value) -> Option<String> {
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

    #[test]
    fn the_first_installable_package_is_picked_with_its_arguments_and_variables() {
        let doc = json!({
            "name": "io.github.modelcontextprotocol/budget-allocator",
            "description": "Budgets",
            "version": "2.0.1",
            "packages": [
                { "registryType": "oci", "identifier": "docker.io/x/y", "transport": { "type": "stdio" } },
                { "registryType": "npm", "identifier": "@x/remote", "transport": { "type": "streamable-http", "url": "http://localhost:3000/mcp" } },
                {
                    "registryType": "npm", "identifier": "@modelcontextprotocol/server-budget-allocator", "version": "2.0.1",
                    "runtimeHint": "node",
                    "transport": { "type": "stdio" },
                    "runtimeArguments": [ { "type": "named", "name": "--max-old-space-size=256" } ],
                    "packageArguments": [ { "type": "positional", "value": "--stdio" }, { "type": "named", "name": "--root", "valueHint": "dir", "isRequired": true } ],
                    "environmentVariables": [ { "name": "API_KEY", "isRequired": true, "isSecret": true, "description": "key" }, { "name": "LEVEL", "default": "info" } ]
                }
            ]
        });
        let p = pick(&doc).unwrap();
        assert_eq!(p.source, Source::Npm { name: "@modelcontextprotocol/server-budget-allocator".into(), version: Some("2.0.1".into()) });
        assert_eq!(p.runtime_arguments, ["--max-old-space-size=256"]);
        assert_eq!(p.package_arguments, ["--stdio", "--root", "<dir>"]);
        assert_eq!(p.environment.len(), 2);
        assert!(p.environment[0].is_secret && p.environment[0].is_required);
        assert_eq!(p.environment[1].default.as_deref(), Some("info"));
        assert_eq!(p.server_name.as_deref(), Some("io.github.modelcontextprotocol/budget-allocator"));
        assert!(p.notes.iter().any(|n| n.contains("<dir>")), "{:?}", p.notes);
    }

    #[test]
    fn npx_arguments_are_left_out_and_unusable_documents_say_why() {
        let doc = json!({ "name": "x", "packages": [ { "registryType": "pypi", "identifier": "mcp-server-time", "runtimeHint": "uvx",
            "runtimeArguments": [ { "type": "positional", "value": "--python=3.12" } ] } ] });
        let p = pick(&doc).unwrap();
        assert_eq!(p.source, Source::Pypi { name: "mcp-server-time".into(), version: None });
        assert!(p.runtime_arguments.is_empty());
        assert!(pick(&json!({ "name": "x" })).unwrap_err().contains("no \"packages\""));
        let only_remote = json!({ "packages": [ { "registryType": "oci", "identifier": "x" } ] });
        assert!(pick(&only_remote).unwrap_err().contains("oci over stdio"));
    }
}
