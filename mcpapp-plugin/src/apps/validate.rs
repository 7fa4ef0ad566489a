//! `gateway-host validate PATH…` (SPEC R41): every problem of every manifest, with its field.
//!
//! A path may be a manifest file or a folder (searched like a discovery path). Host-version
//! requirements are checked too, since an app the gateway would refuse is not valid for it.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::apps::discovery::find_manifest_files;
use crate::apps::manifest::Manifest;
use crate::apps::sandbox::Sandbox;

/// One JSON result per manifest: `{path, id, valid, errors: ["field: message"], warnings}`.
pub fn validate_paths(paths: &[String], host_version: &str, sandbox: &Sandbox) -> Vec<Value> {
    let mut out = Vec::new();
    for raw in paths {
        let path = PathBuf::from(raw);
        if path.is_dir() {
            let (files, skipped) = find_manifest_files(std::slice::from_ref(&path));
            if files.is_empty() {
                out.push(json!({
                    "path": raw,
                    "id": Value::Null,
                    "valid": false,
                    "errors": [format!("(path): no openclaw.mcpapp.json found under this folder")],
                    "warnings": skipped.iter().map(|s| format!("{}: {}", s.path.display(), s.reason)).collect::<Vec<_>>(),
                }));
            }
            out.extend(files.iter().map(|f| validate_file(f, host_version, sandbox)));
        } else if path.exists() {
            out.push(validate_file(&path, host_version, sandbox));
        } else {
            out.push(json!({
                "path": raw, "id": Value::Null, "valid": false,
                "errors": ["(path): no such file or folder"], "warnings": [],
            }));
        }
    }
    out
}

fn validate_file(path: &Path, host_version: &str, sandbox: &Sandbox) -> Value {
    let mut confinement = Value::Null;
    let (id, errors, warnings) = match Manifest::load(path) {
        Ok(loaded) => {
            let mut errors: Vec<String> = Vec::new();
            if let Err(e) = loaded.manifest.check_host_version(host_version) {
                errors.push(e.to_string());
            }
            let (escape_errors, escape_warnings) = loaded.manifest.folder_escapes();
            errors.extend(escape_errors.iter().map(ToString::to_string));
            let mut warnings = loaded.warnings;
            warnings.extend(escape_warnings);
            if loaded.manifest.launches_process() {
                // SPEC R48: what the app would be confined to; a declared path it will not be
                // granted is a warning.
                let report = crate::apps::sandbox::report(&loaded.manifest, sandbox);
                for denied in report.denied() {
                    warnings.push(format!("permissions.filesystem: {denied} is not granted"));
                }
                confinement = serde_json::to_value(report).unwrap_or_default();
            }
            (Some(loaded.manifest.id.clone()), errors, warnings)
        }
        Err(e) => {
            // Read as a manifest is (bounded: `validate /dev/zero` must end).
            let id = crate::apps::manifest::read_manifest_text(path)
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .and_then(|v| v.get("id").and_then(Value::as_str).map(str::to_string));
            (id, e.errors.iter().map(ToString::to_string).collect(), e.warnings)
        }
    };
    json!({
        "path": path.display().to_string(),
        "id": id,
        "valid": errors.is_empty(),
        "errors": errors,
        "warnings": warnings,
        "confinement": confinement,
    })
}
