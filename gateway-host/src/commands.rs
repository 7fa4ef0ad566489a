//! One-shot commands that use the module without serving (SPEC R41): `validate` and `apps`.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use host_abi::payloads::{Transport, ValidateParams, ValidationResult, VALIDATE};

use crate::module_host::ModuleHost;
use crate::serve;
use crate::BoxError;

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
    let params = ValidateParams { paths: paths.to_vec() };
    let results: Vec<ValidationResult> = with_module(config, module, |m| async move { Ok(m.invoke_typed(VALIDATE, &params).await?) })?;
    let all_valid = results.iter().all(|r| r.valid);
    if json {
        println!("{}", serde_json::to_string_pretty(&results)?);
        return Ok(all_valid);
    }
    for r in &results {
        let id = r.id.as_deref().map(|i| format!(" ({i})")).unwrap_or_default();
        println!("{} {}{id}", if r.valid { "VALID  " } else { "INVALID" }, r.path);
        for e in &r.errors {
            println!("  error: {e}");
        }
        for w in &r.warnings {
            println!("  warning: {w}");
        }
    }
    let invalid = results.iter().filter(|r| !r.valid).count();
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
    if !report.enabled {
        println!("MCP Apps are disabled (McpApps.Enabled is false)");
        return Ok(());
    }
    let rows: Vec<[String; 7]> = report
        .apps
        .iter()
        .map(|a| {
            let m = a.manifest.clone().unwrap_or_default();
            let target = match Transport::of(&m.transport) {
                Transport::Http => m.url.clone().unwrap_or_default(),
                _ => std::iter::once(m.command.clone().unwrap_or_default()).chain(m.arguments.iter().cloned()).collect::<Vec<_>>().join(" "),
            };
            let mut notes: Vec<String> = a.validation_errors.iter().map(|e| format!("{}: {}", e.field, e.message)).collect();
            if let Some(r) = &a.disabled_reason {
                notes.push(r.clone());
            } else if let Some(e) = &a.last_error {
                if notes.is_empty() {
                    notes.push(e.clone());
                }
            }
            [
                a.key.clone(),
                a.state.clone(),
                m.version.clone(),
                m.transport.clone(),
                m.tool_name_prefix.clone(),
                format!("{}s/{}s", m.startup_timeout_seconds, m.request_timeout_seconds),
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
    for s in &report.skipped {
        println!("skipped {}: {}", s.path, s.reason);
    }
    for e in &report.config_errors {
        println!("config error: {}: {}", e.field, e.message);
    }
    println!("{} app(s) discovered", rows.len());
    Ok(())
}
