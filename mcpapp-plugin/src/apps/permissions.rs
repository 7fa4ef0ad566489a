//! What an app declares it needs (SPEC R48, issue 41): the manifest's `permissions`, and an
//! operator's `McpApps.Entries.{id}.Permissions` over it. `sandbox.rs` turns it into the
//! confinement the app's process gets.
//!
//! ```json
//! "permissions": {
//!   "filesystem": { "read": ["../shared-data", "/srv/maps"], "write": ["~/exports"] },
//!   "network": "none" | "loopback" | "any" | ["api.example.com:443", 8080],
//!   "limits": { "memoryMb": 1024, "processes": 256, "openFiles": 1024, "cpuSeconds": 86400 }
//! }
//! ```

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::apps::json_values::{json_to_u64, json_type_name};

/// A problem with a declaration: the field (`permissions.network`) and what is wrong.
pub type Problem = (String, String);

/// `permissions` as a manifest (or an entry) declares it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Permissions {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filesystem: Option<FilesystemDecl>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkDecl>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<LimitsDecl>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FilesystemDecl {
    pub read: Vec<String>,
    pub write: Vec<String>,
}

/// `none`, `loopback`, `any`, or the `host:port`s and ports it connects to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum NetworkDecl {
    None,
    Loopback,
    Any,
    Endpoints(Vec<Endpoint>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Endpoint {
    pub host: Option<String>,
    pub port: u16,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LimitsDecl {
    pub memory_mb: Option<u64>,
    pub processes: Option<u64>,
    pub open_files: Option<u64>,
    pub cpu_seconds: Option<u64>,
}

fn problem(field: impl Into<String>, message: impl Into<String>) -> Problem {
    (field.into(), message.into())
}

pub(crate) fn get<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    obj.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v).filter(|v| !v.is_null())
}

impl Permissions {
    /// Reads `permissions` (keys case-insensitive, so an `Entries` override in PascalCase reads
    /// the same); every problem is an error naming its field under `field`.
    pub fn parse(value: &Value, field: &str) -> (Permissions, Vec<Problem>) {
        let mut errors: Vec<Problem> = Vec::new();
        let Value::Object(obj) = value else {
            errors.push((field.to_string(), format!("expected an object, found {}", json_type_name(value))));
            return (Permissions::default(), errors);
        };
        let mut out = Permissions::default();
        if let Some(fs) = get(obj, "filesystem") {
            let f = format!("{field}.filesystem");
            match fs {
                Value::Object(fs) => {
                    let mut decl = FilesystemDecl::default();
                    for (name, list) in [("read", &mut decl.read), ("write", &mut decl.write)] {
                        let Some(v) = get(fs, name) else { continue };
                        let Value::Array(items) = v else {
                            errors.push(problem(format!("{f}.{name}"), "expected an array of paths"));
                            continue;
                        };
                        for (i, item) in items.iter().enumerate() {
                            match item.as_str() {
                                Some(s) if !s.trim().is_empty() && !s.contains('\0') => list.push(s.to_string()),
                                _ => errors.push(problem(format!("{f}.{name}[{i}]"), "expected a non-blank path")),
                            }
                        }
                    }
                    out.filesystem = Some(decl);
                }
                other => errors.push(problem(f, format!("expected an object, found {}", json_type_name(other)))),
            }
        }
        if let Some(net) = get(obj, "network") {
            let f = format!("{field}.network");
            out.network = match net {
                Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
                    "none" => Some(NetworkDecl::None),
                    "loopback" => Some(NetworkDecl::Loopback),
                    "any" => Some(NetworkDecl::Any),
                    _ => {
                        errors.push(problem(f, format!("'{s}' is not none, loopback, any or a list of host:port")));
                        None
                    }
                },
                Value::Array(items) => {
                    let mut endpoints = Vec::new();
                    for (i, item) in items.iter().enumerate() {
                        match parse_endpoint(item) {
                            Some(e) => endpoints.push(e),
                            None => errors.push(problem(
                                format!("{f}[{i}]"),
                                format!("{item} is not a port (1-65535) or a host:port"),
                            )),
                        }
                    }
                    Some(NetworkDecl::Endpoints(endpoints))
                }
                other => {
                    errors.push(problem(f, format!("expected a string or an array, found {}", json_type_name(other))));
                    None
                }
            };
        }
        if let Some(limits) = get(obj, "limits") {
            let f = format!("{field}.limits");
            match limits {
                Value::Object(l) => {
                    let mut decl = LimitsDecl::default();
                    for (name, slot) in [
                        ("memoryMb", &mut decl.memory_mb),
                        ("processes", &mut decl.processes),
                        ("openFiles", &mut decl.open_files),
                        ("cpuSeconds", &mut decl.cpu_seconds),
                    ] {
                        let Some(v) = get(l, name) else { continue };
                        match json_to_u64(v).or_else(|| v.as_str().and_then(|s| s.trim().parse().ok())) {
                            Some(n) if n > 0 => *slot = Some(n),
                            _ => errors.push(problem(format!("{f}.{name}"), "expected a positive integer")),
                        }
                    }
                    out.limits = Some(decl);
                }
                other => errors.push(problem(f, format!("expected an object, found {}", json_type_name(other)))),
            }
        }
        (out, errors)
    }

    /// An operator's entry over the manifest's: each part the entry gives replaces the
    /// manifest's (so it may narrow or widen it).
    pub fn overridden_by(&self, entry: &Permissions) -> Permissions {
        Permissions {
            filesystem: entry.filesystem.clone().or_else(|| self.filesystem.clone()),
            network: entry.network.clone().or_else(|| self.network.clone()),
            limits: match (self.limits, entry.limits) {
                (Some(m), Some(e)) => Some(LimitsDecl {
                    memory_mb: e.memory_mb.or(m.memory_mb),
                    processes: e.processes.or(m.processes),
                    open_files: e.open_files.or(m.open_files),
                    cpu_seconds: e.cpu_seconds.or(m.cpu_seconds),
                }),
                (m, e) => e.or(m),
            },
        }
    }
}

fn parse_endpoint(v: &Value) -> Option<Endpoint> {
    if let Some(port) = json_to_u64(v) {
        return u16::try_from(port).ok().filter(|p| *p > 0).map(|port| Endpoint { host: None, port });
    }
    let s = v.as_str()?.trim();
    if let Ok(port) = s.parse::<u16>() {
        return (port > 0).then_some(Endpoint { host: None, port });
    }
    let (host, port) = s.rsplit_once(':')?;
    let port = port.parse::<u16>().ok().filter(|p| *p > 0)?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (!host.is_empty() && !host.contains(char::is_whitespace)).then(|| Endpoint { host: Some(host.to_string()), port })
}


#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;

    fn parse(v: Value) -> (Permissions, Vec<Problem>) {
        Permissions::parse(&v, "permissions")
    }

    #[test]
    fn permissions_parse_and_name_their_bad_fields() {
        let (p, errors) = parse(json!({
            "filesystem": { "read": ["data"], "write": ["~/out"] },
            "network": ["api.example.com:443", 8080, "9000"],
            "limits": { "memoryMb": 256, "processes": "32" }
        }));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(p.filesystem.unwrap().write, ["~/out"]);
        let Some(NetworkDecl::Endpoints(e)) = p.network else { panic!() };
        assert_eq!(e.iter().map(|e| e.port).collect::<Vec<_>>(), [443, 8080, 9000]);
        assert_eq!(p.limits.unwrap().processes, Some(32));
        let (_, errors) = parse(json!({ "network": "everywhere", "limits": { "memoryMb": 0 }, "filesystem": { "read": [""] } }));
        let fields: Vec<&str> = errors.iter().map(|e| e.0.as_str()).collect();
        assert_eq!(fields, ["permissions.filesystem.read[0]", "permissions.network", "permissions.limits.memoryMb"]);
    }

    #[test]
    fn an_entry_narrows_or_widens_part_by_part() {
        let (manifest, _) = parse(json!({ "network": "any", "limits": { "memoryMb": 100, "processes": 10 } }));
        let (entry, _) = parse(json!({ "Network": "none", "Limits": { "MemoryMb": 50 } }));
        let merged = manifest.overridden_by(&entry);
        assert_eq!(merged.network, Some(NetworkDecl::None));
        assert_eq!(merged.limits.unwrap().memory_mb, Some(50));
        assert_eq!(merged.limits.unwrap().processes, Some(10));
    }
}
