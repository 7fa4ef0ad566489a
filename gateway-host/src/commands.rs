//! One-shot commands that use the module without serving (SPEC R41): `validate` and `apps`.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use crate::module_host::ModuleHost;
use crate::serve::{self, BoxError};

/// Loads the module, creates an instance, runs `work`, and shuts the instance down again.
pub fn with_module<T, F, Fut>(config: Option<&Path>, module: Option<&Path>, work: F) -> Result<T, BoxError>
where
    F: FnOnce(Arc<ModuleHost>) -> Fut,
    Fut: Future<Output = Result<T, BoxError>>,
{
    let (settings, loaded) = serve::load(config, module)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(async move {
        let module = serve::create_module(&settings, loaded)?;
        let result = work(module.clone()).await;
        if let Err(e) = module.shutdown().await {
            tracing::warn!("module shutdown reported: {e}");
        }
        result
    })
}

/// `gateway-host validate PATH…`: prints every problem with its field; `Ok(false)` when any
/// manifest is invalid.
pub fn validate(config: Option<&Path>, module: Option<&Path>, paths: &[String], json: bool) -> Result<bool, BoxError> {
    let results = with_module(config, module, |m| async move {
        Ok(m.invoke("manifest.validate", &serde_json::json!({ "paths": paths })).await?)
    })?;
    let results = results.as_array().cloned().unwrap_or_default();
    let all_valid = results.iter().all(|r| r["valid"] == Value::Bool(true));
    if json {
        println!("{}", serde_json::to_string_pretty(&results)?);
        return Ok(all_valid);
    }
    for r in &results {
        let path = r["path"].as_str().unwrap_or("?");
        let id = r["id"].as_str().map(|i| format!(" ({i})")).unwrap_or_default();
        let valid = r["valid"] == Value::Bool(true);
        println!("{} {path}{id}", if valid { "VALID  " } else { "INVALID" });
        for e in r["errors"].as_array().into_iter().flatten() {
            println!("  error: {}", e.as_str().unwrap_or_default());
        }
        for w in r["warnings"].as_array().into_iter().flatten() {
            println!("  warning: {}", w.as_str().unwrap_or_default());
        }
    }
    let invalid = results.iter().filter(|r| r["valid"] != Value::Bool(true)).count();
    println!("{} manifest(s) checked, {invalid} invalid", results.len());
    Ok(all_valid)
}

/// `gateway-host apps`: what discovery finds with this configuration, without starting anything.
pub fn apps(config: Option<&Path>, module: Option<&Path>, json: bool) -> Result<(), BoxError> {
    let report = with_module(config, module, |m| async move { Ok(m.discover().await?) })?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    if report["enabled"] != Value::Bool(true) {
        println!("MCP Apps are disabled (McpApps.Enabled is false)");
        return Ok(());
    }
    let rows: Vec<[String; 7]> = report["apps"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            let m = &a["manifest"];
            let target = match m["transport"].as_str() {
                Some("http") => m["url"].as_str().unwrap_or("").to_string(),
                _ => {
                    let mut cmd = m["command"].as_str().unwrap_or("").to_string();
                    for arg in m["arguments"].as_array().into_iter().flatten() {
                        cmd.push(' ');
                        cmd.push_str(arg.as_str().unwrap_or(""));
                    }
                    cmd
                }
            };
            let mut notes: Vec<String> = Vec::new();
            notes.extend(a["validationErrors"].as_array().into_iter().flatten().map(|e| {
                format!("{}: {}", e["field"].as_str().unwrap_or(""), e["message"].as_str().unwrap_or(""))
            }));
            if let Some(r) = a["disabledReason"].as_str() {
                notes.push(r.to_string());
            } else if let Some(e) = a["lastError"].as_str() {
                if notes.is_empty() {
                    notes.push(e.to_string());
                }
            }
            [
                a["key"].as_str().unwrap_or("").to_string(),
                a["state"].as_str().unwrap_or("").to_string(),
                m["version"].as_str().unwrap_or("").to_string(),
                m["transport"].as_str().unwrap_or("").to_string(),
                m["toolNamePrefix"].as_str().unwrap_or("").to_string(),
                format!(
                    "{}s/{}s",
                    m["startupTimeoutSeconds"].as_u64().unwrap_or(0),
                    m["requestTimeoutSeconds"].as_u64().unwrap_or(0)
                ),
                if notes.is_empty() { target } else { format!("{target}  [{}]", notes.join("; ")) },
            ]
        })
        .collect();
    let header = ["ID", "STATE", "VERSION", "TRANSPORT", "PREFIX", "TIMEOUTS", "TARGET / NOTES"];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row.iter()).take(6) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let print = |cells: &[&str]| {
        let mut line = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i < 6 {
                line.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            } else {
                line.push_str(cell);
            }
        }
        println!("{}", line.trim_end());
    };
    print(&header);
    for row in &rows {
        print(&row.iter().map(String::as_str).collect::<Vec<_>>());
    }
    for s in report["skipped"].as_array().into_iter().flatten() {
        println!("skipped {}: {}", s["path"].as_str().unwrap_or(""), s["reason"].as_str().unwrap_or(""));
    }
    for e in report["configErrors"].as_array().into_iter().flatten() {
        println!("config error: {}: {}", e["field"].as_str().unwrap_or(""), e["message"].as_str().unwrap_or(""));
    }
    println!("{} app(s) discovered", rows.len());
    Ok(())
}
