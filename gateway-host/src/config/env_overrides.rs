//! Environment overrides of the configuration, the way ASP.NET's environment provider does them.
//!
//! The host owns the environment: it applies these before handing the module one effective JSON
//! document, so the module never reads environment variables itself.

use serde_json::{Map, Value};

/// Case-insensitive key lookup: the exact spelling first, then any spelling.
fn get_ci<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).or_else(|| obj.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v))
}

/// Top-level sections an environment variable may address (besides keys already in the config).
/// Without this list every `PATH`, `HOME` or `CARGO_…` variable would be written into the config.
pub const KNOWN_SECTIONS: &[&str] = &[
    "OpenClaw",
    "McpApps",
    "McpCompatibility",
    "Gateway",
    "Plugins",
    "Security",
    "Agent",
    "Tools",
    "Sessions",
    "Logging",
    "Testing",
    "Sandbox",
];

/// Applies environment variables to the config the way ASP.NET's environment provider does:
/// `OpenClaw__McpApps__Enabled=true` sets `config.OpenClaw.McpApps.Enabled = "true"`.
///
/// - Segments are separated by `__` (ASP.NET also accepts `:`, so do we).
/// - Existing keys are matched case-insensitively and keep their spelling; missing objects are created.
/// - A numeric segment indexes an array (`McpApps__DiscoveryPaths__0=/x`); an index past the end
///   appends. A missing container followed by a numeric segment is created as an array.
/// - Values are always strings; the readers above accept `"true"` and `"15"`.
/// - `prefix_filter`: when set, only variables starting with it (case-insensitively) are used, with the
///   prefix removed (ASP.NET's `AddEnvironmentVariables(prefix)`).
/// - `McpApps` and `McpCompatibility` live at the top level or under `OpenClaw` (the latter wins when
///   both exist). So that the variable always wins whichever form it uses, a variable addressing one
///   location also sets the other location when that one exists in the config.
/// - Only variables whose first segment names a top-level key already in the config or one of
///   [`KNOWN_SECTIONS`] are applied, so unrelated variables (`PATH`, `HOME`, …) never enter the config.
///
/// Variables are applied in name order so the result does not depend on the environment's order.
/// Returns the names of the variables applied (values are not returned: they may be secrets).
pub fn apply_env_overrides(
    config: &mut Value,
    vars: impl IntoIterator<Item = (String, String)>,
    prefix_filter: Option<&str>,
) -> Vec<String> {
    if !config.is_object() {
        *config = Value::Object(Map::new());
    }
    let mut vars: Vec<(String, String)> = vars.into_iter().collect();
    vars.sort();
    let mut applied = Vec::new();
    for (name, value) in vars {
        let Some(key) = strip_prefix_ci(&name, prefix_filter) else { continue };
        let segments: Vec<&str> = key.split("__").flat_map(|s| s.split(':')).collect();
        if segments.iter().any(|s| s.is_empty()) {
            continue;
        }
        let first = segments[0];
        let root = config.as_object().expect("made an object above");
        let known = KNOWN_SECTIONS.iter().any(|s| s.eq_ignore_ascii_case(first))
            || root.keys().any(|k| k.eq_ignore_ascii_case(first));
        if !known {
            continue;
        }
        if let Some(alt) = alias_path(config, &segments) {
            set_path(config, &alt, value.clone());
        }
        set_path(config, &segments, value);
        tracing::debug!(variable = %name, "applied environment override");
        applied.push(name);
    }
    applied
}

/// Sections with two homes (top level and under `OpenClaw`).
const ALIASED_SECTIONS: &[&str] = &["McpApps", "McpCompatibility"];

/// The other home of an aliased section, when it exists in the config.
fn alias_path<'s>(config: &Value, segments: &[&'s str]) -> Option<Vec<&'s str>> {
    let is_aliased = |s: &str| ALIASED_SECTIONS.iter().any(|a| a.eq_ignore_ascii_case(s));
    let root = config.as_object()?;
    if segments.len() >= 2 && is_aliased(segments[0]) {
        let openclaw = get_ci(root, "OpenClaw")?.as_object()?;
        get_ci(openclaw, segments[0])?;
        let mut alt = vec!["OpenClaw"];
        alt.extend_from_slice(segments);
        return Some(alt);
    }
    if segments.len() >= 3 && segments[0].eq_ignore_ascii_case("OpenClaw") && is_aliased(segments[1]) {
        get_ci(root, segments[1])?;
        return Some(segments[1..].to_vec());
    }
    None
}

fn strip_prefix_ci<'a>(name: &'a str, prefix: Option<&str>) -> Option<&'a str> {
    let Some(prefix) = prefix.filter(|p| !p.is_empty()) else { return Some(name) };
    let head = name.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &name[prefix.len()..]).filter(|rest| !rest.is_empty())
}

fn parse_index(seg: &str) -> Option<usize> {
    if seg.is_empty() || !seg.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    seg.parse().ok()
}

/// Sets `value` at `segments` under `cur`, creating containers as needed.
fn set_path(cur: &mut Value, segments: &[&str], value: String) {
    let Some((seg, rest)) = segments.split_first() else {
        *cur = Value::String(value);
        return;
    };
    if let (Some(idx), Value::Array(arr)) = (parse_index(seg), &mut *cur) {
        let slot = if idx < arr.len() {
            &mut arr[idx]
        } else {
            arr.push(Value::Null);
            arr.last_mut().expect("just pushed")
        };
        descend(slot, rest, value);
        return;
    }
    if let Value::Array(arr) = cur {
        // A named key under an array: keep the elements as index keys of an object.
        let obj: Map<String, Value> = arr.drain(..).enumerate().map(|(i, v)| (i.to_string(), v)).collect();
        *cur = Value::Object(obj);
    }
    if !cur.is_object() {
        *cur = Value::Object(Map::new());
    }
    let obj = cur.as_object_mut().expect("made an object above");
    let key = obj.keys().find(|k| k.eq_ignore_ascii_case(seg)).cloned().unwrap_or_else(|| seg.to_string());
    let slot = obj.entry(key).or_insert(Value::Null);
    descend(slot, rest, value);
}

fn descend(slot: &mut Value, rest: &[&str], value: String) {
    if let Some(next) = rest.first() {
        if !slot.is_object() && !slot.is_array() {
            *slot = if parse_index(next).is_some() { Value::Array(Vec::new()) } else { Value::Object(Map::new()) };
        }
    }
    set_path(slot, rest, value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn env_overrides_set_nested_keys() {
        // The seed's appsettings block.
        let mut v = json!({"McpApps": {"Enabled": true, "DiscoveryPaths": ["./mcpapps"], "AllowlistSemantics": "legacy",
            "Allow": ["*"], "Deny": [], "Entries": {"grocery-inventory": {"Enabled": true, "StartupTimeoutSeconds": 15}}}});
        v["OpenClaw"] = json!({"McpApps": {"Enabled": false}});
        let applied = apply_env_overrides(
            &mut v,
            env(&[
                ("OPENCLAW__MCPAPPS__ENABLED", "true"),
                ("McpApps__Entries__grocery-inventory__StartupTimeoutSeconds", "30"),
                ("PATH", "/usr/bin"),
                ("HOME", "/root"),
                ("RANDOM__THING", "x"),
            ]),
            None,
        );
        assert_eq!(applied.len(), 2);
        assert_eq!(v["OpenClaw"]["McpApps"]["Enabled"], "true", "existing spelling kept");
        assert_eq!(v["McpApps"]["Entries"]["grocery-inventory"]["StartupTimeoutSeconds"], "30");
        assert!(v.get("PATH").is_none() && v.get("RANDOM").is_none());
    }

    #[test]
    fn env_overrides_create_missing_objects_and_index_arrays() {
        let mut v = json!({"McpApps": {"DiscoveryPaths": ["./a", "./b"]}});
        apply_env_overrides(
            &mut v,
            env(&[
                ("McpApps__DiscoveryPaths__0", "/x"),
                ("McpApps__DiscoveryPaths__5", "/y"),
                ("OpenClaw__McpApps__Deny__0", "bad*"),
                ("OpenClaw__McpApps__Entries__a__Environment__K", "v"),
                ("Gateway:Urls", "http://0.0.0.0:1"),
            ]),
            None,
        );
        assert_eq!(v["McpApps"]["DiscoveryPaths"], json!(["/x", "./b", "/y"]));
        assert_eq!(v["OpenClaw"]["McpApps"]["Deny"], json!(["bad*"]));
        assert_eq!(v["OpenClaw"]["McpApps"]["Entries"]["a"]["Environment"]["K"], "v");
        assert_eq!(v["Gateway"]["Urls"], "http://0.0.0.0:1");
    }

    #[test]
    fn env_overrides_replace_whole_values_and_respect_prefix() {
        let mut v = json!({"McpApps": {"Allow": ["a", "b"]}, "Custom": {}});
        apply_env_overrides(
            &mut v,
            env(&[("GW_McpApps__Allow", "only"), ("GW_Custom__K", "1"), ("McpApps__Enabled", "true"), ("GW_", "x")]),
            Some("gw_"),
        );
        assert_eq!(v["McpApps"]["Allow"], "only");
        assert_eq!(v["Custom"]["K"], "1", "an existing top-level key may be addressed");
        assert!(v["McpApps"].get("Enabled").is_none(), "no prefix, not applied");
    }

    #[test]
    fn env_overrides_win_whichever_home_they_address() {
        let both = json!({"McpApps": {"Enabled": true}, "OpenClaw": {"McpApps": {"Enabled": true}}});
        let mut v = both.clone();
        apply_env_overrides(&mut v, env(&[("McpApps__Enabled", "false")]), None);
        assert_eq!(v["McpApps"]["Enabled"], "false");
        assert_eq!(v["OpenClaw"]["McpApps"]["Enabled"], "false", "top-level form overrides the OpenClaw section too");
        let mut v = json!({"McpApps": {"Enabled": true}});
        apply_env_overrides(&mut v, env(&[("OpenClaw__McpApps__Enabled", "false")]), None);
        assert_eq!(v["McpApps"]["Enabled"], "false");
        assert_eq!(v["OpenClaw"]["McpApps"]["Enabled"], "false");
        let mut v = json!({"OpenClaw": {"McpCompatibility": {"ForceLegacyInitialize": false}}});
        apply_env_overrides(&mut v, env(&[("McpCompatibility__ForceLegacyInitialize", "true")]), None);
        assert_eq!(v["OpenClaw"]["McpCompatibility"]["ForceLegacyInitialize"], "true");
        // No alternate home in the config: only the addressed location is created.
        let mut v = json!({});
        apply_env_overrides(&mut v, env(&[("McpApps__Enabled", "true")]), None);
        assert_eq!(v, json!({"McpApps": {"Enabled": "true"}}));
    }

    #[test]
    fn env_overrides_skip_malformed_names_and_fix_non_objects() {
        let mut v = Value::Null;
        let applied = apply_env_overrides(&mut v, env(&[("McpApps____Enabled", "true"), ("McpApps__", "x")]), None);
        assert!(applied.is_empty());
        assert_eq!(v, json!({}));
        let mut v = json!({"McpApps": {"Allow": ["a"]}});
        apply_env_overrides(&mut v, env(&[("McpApps__Allow__Extra", "z")]), None);
        assert_eq!(v["McpApps"]["Allow"], json!({"0": "a", "Extra": "z"}));
    }
}
