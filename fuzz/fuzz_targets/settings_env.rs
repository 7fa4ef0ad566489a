//! The gateway's configuration loader (`settings.rs`, `env_overrides.rs`, `config_keys.rs`): an
//! `appsettings.json` text and environment variables (ASP.NET's `Section__Key=value` form) → the
//! effective settings, the warnings for unknown keys, and what startup reads from them (listen
//! and sandbox addresses, data folder and module path, the module's configuration, auth,
//! compatibility switches, agent, tool preference, connection time limits and other durations,
//! log setup).
//!
//! An input is the configuration file's text, then a NUL byte, then one variable a line,
//! `NAME=VALUE` (the first `=` separates); a line `?PREFIX` also applies the variables once more
//! with that prefix filter (`AddEnvironmentVariables(prefix)`). Without a NUL the whole input is
//! the file.
//!
//! What must hold: no panic; the effective configuration is an object; the variables applied are
//! among those given; when one variable alone is applied, the settings read its value at its
//! path (unless the file has keys that differ only in case, where ASP.NET's readers pick one);
//! every unknown key's warning names its path.
#![no_main]

use std::path::Path;

use gateway_host::fuzzing::{
    apply_env_overrides, data_dir, listen_addrs, log_setup, module_config, module_path, parse_urls, unknown_keys,
    AgentConfig, AuthPolicy, Compatibility, ConnectionLimits, LogMode, Preference, SandboxSite, Settings, DEFAULT_URLS,
};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// Some object in `value` has two keys that differ only in (ASCII) case.
fn case_twins(value: &Value) -> bool {
    match value {
        Value::Object(map) => {
            let mut folded: Vec<String> = map.keys().map(|k| k.to_ascii_lowercase()).collect();
            folded.sort();
            folded.windows(2).any(|w| w[0] == w[1]) || map.values().any(case_twins)
        }
        Value::Array(items) => items.iter().any(case_twins),
        _ => false,
    }
}

fuzz_target!(|data: &[u8]| {
    let (file, env) = match data.iter().position(|b| *b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let Ok(text) = std::str::from_utf8(file) else { return };
    let env = String::from_utf8_lossy(env);
    let mut vars: Vec<(String, String)> = Vec::new();
    let mut prefixes: Vec<&str> = Vec::new();
    for line in env.lines().take(64) {
        match line.strip_prefix('?') {
            Some(prefix) => prefixes.push(prefix),
            None => {
                let (name, value) = line.split_once('=').unwrap_or((line, ""));
                vars.push((name.to_string(), value.to_string()));
            }
        }
    }

    let path = Path::new("/fuzz/config/appsettings.json");
    let document = match Settings::parse_file(text, path) {
        Ok((document, dir)) => {
            assert_eq!(dir, Path::new("/fuzz/config"));
            document
        }
        Err(e) => {
            assert!(e.to_string().contains("/fuzz/config/appsettings.json"), "{e}");
            return;
        }
    };
    let twins = case_twins(&document);
    let (settings, applied) = Settings::with_overrides(document.clone(), "/fuzz/config".into(), vars.clone());
    assert!(settings.effective.is_object());
    assert!(applied.iter().all(|name| vars.iter().any(|(n, _)| n == name)), "{applied:?}");
    if let [name] = applied.as_slice() {
        let segments: Vec<&str> = name.split("__").flat_map(|s| s.split(':')).collect();
        let numeric = segments.iter().any(|s| s.bytes().all(|b| b.is_ascii_digit()));
        let value = &vars.iter().rfind(|(n, _)| n == name).expect("given").1;
        if !twins && !numeric && vars.iter().filter(|(n, _)| n == name).count() == 1 {
            let read = settings.get(&segments.join(":"));
            assert_eq!(read.and_then(Value::as_str), Some(value.as_str()), "{name}");
        }
    }
    for prefix in prefixes {
        let mut prefixed = document.clone();
        let applied = apply_env_overrides(&mut prefixed, vars.clone(), Some(prefix));
        assert!(prefixed.is_object());
        assert!(applied.iter().all(|name| vars.iter().any(|(n, _)| n == name)), "{applied:?}");
    }

    // Unknown keys, and what startup reads from the settings.
    for unknown in unknown_keys(&settings.effective) {
        // (A top-level key "" has the path "": the warning then names no key.)
        assert!(unknown.to_string().contains(&unknown.path));
    }
    let gateway = settings
        .get_str("Gateway:Urls")
        .map(|urls| parse_urls(&urls))
        .unwrap_or_else(|| parse_urls(DEFAULT_URLS));
    let gateway = gateway.unwrap_or_default();
    let _ = listen_addrs(&settings, &gateway);
    let _ = SandboxSite::from_settings(&settings, gateway.clone());
    let _ = AuthPolicy::from_settings(&settings, &gateway).map(|policy| policy.describe());
    let _ = data_dir(&settings);
    let _ = module_path(&settings, None);
    let config = module_config(&settings);
    assert!(serde_json::from_str::<Value>(&config.config_json).is_ok(), "the module gets JSON");
    let _ = Compatibility::from_settings(&settings);
    let _ = AgentConfig::from_settings(&settings);
    let _ = Preference::from_config(settings.get("Tools:Preference"));
    let _ = ConnectionLimits::from_settings(&settings);
    for key in ["Gateway:ShutdownTimeoutSeconds", "Gateway:ModuleSwapDrainSeconds"] {
        let _ = settings.get_seconds(key, std::time::Duration::from_secs(30));
    }
    let _ = log_setup(Some(&settings), LogMode::Serve, 0, None);
});
