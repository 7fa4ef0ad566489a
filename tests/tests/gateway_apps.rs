//! The gateway binary with real apps (issue 3): health of apps, logs, no orphaned children after
//! SIGTERM or SIGKILL, and the `validate` and `apps` commands.

mod support;

use std::time::Duration;

use gateway_e2e::{run_gateway, wait_until, GatewayOptions, GatewayProcess};
use serde_json::json;
use support::*;

fn config_for(dir: &std::path::Path) -> serde_json::Value {
    json!({
        "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [dir.join("apps")], "Allow": ["*"] } }
    })
}

#[test]
fn apps_health_lists_running_apps_and_app_output_reaches_the_logs() {
    let dir = tempfile::tempdir().unwrap();
    write_manifest(&dir.path().join("apps"), "one", &stdio_app("one", &["--stderr-line", "hello from one"]));
    let mut broken = stdio_app("two", &[]);
    broken["transport"] = json!("carrier-pigeon");
    write_manifest(&dir.path().join("apps"), "two", &broken);
    let gw = GatewayProcess::start(config_for(dir.path()));
    assert!(
        wait_until(Duration::from_secs(20), Duration::from_millis(100), || {
            gw.get_json("/apps/health").1["apps"].as_array().is_some_and(|a| a.iter().any(|x| x["state"] == "running"))
        }),
        "{}",
        gw.logs()
    );
    let (status, health) = gw.get_json("/apps/health");
    assert_eq!(status, 200);
    let apps = health["apps"].as_array().unwrap();
    let one = apps.iter().find(|a| a["id"] == "one").unwrap();
    assert_eq!(one["state"], "running");
    assert!(one["tools"].as_u64().unwrap() >= 10);
    let two = apps.iter().find(|a| a["id"] == "two").unwrap();
    assert_eq!(two["state"], "failed");
    assert!(two["validationErrors"].to_string().contains("transport"), "{two}");
    assert!(gw.wait_for_log("[one] hello from one", Duration::from_secs(5)), "app stderr tagged with its id");
    assert!(gw.wait_for_log("McpApp 'one' connected:", Duration::from_secs(5)));
    assert!(gw.logs().contains("Scanning for MCP Apps in:"));
    assert!(gw.logs().contains("Discovered McpApp 'one' (Test one) v1.2.3"));
    assert!(gw.logs().contains("Connecting to McpApp 'one' via stdio"));
}

fn orphan_check(signal: libc::c_int) {
    let dir = tempfile::tempdir().unwrap();
    let stdio_pid = dir.path().join("stdio.pid");
    let http_pid = dir.path().join("http.pid");
    write_manifest(
        &dir.path().join("apps"),
        "s",
        &stdio_app("s", &["--pid-file", &stdio_pid.display().to_string()]),
    );
    write_manifest(&dir.path().join("apps"), "h", &http_app("h", &["--pid-file", &http_pid.display().to_string()]));
    let mut gw = GatewayProcess::start_with(GatewayOptions { config: config_for(dir.path()), ..Default::default() });
    let pids = [read_pid(&stdio_pid, Duration::from_secs(20)), read_pid(&http_pid, Duration::from_secs(20))];
    assert!(wait_until(Duration::from_secs(20), Duration::from_millis(100), || {
        gw.get_json("/apps/health").1["apps"].as_array().is_some_and(|a| a.iter().all(|x| x["state"] == "running"))
    }));
    assert!(pids.iter().all(|p| process_alive(*p)));
    if signal == libc::SIGKILL {
        gw.kill_hard();
    } else {
        let status = gw.terminate();
        assert!(status.is_some_and(|s| s.success()), "orderly exit on SIGTERM: {status:?}");
    }
    for pid in pids {
        assert!(
            wait_until(Duration::from_secs(10), Duration::from_millis(50), || !process_alive(pid)),
            "app process {pid} outlived the gateway ({signal})"
        );
    }
}

#[test]
fn no_child_outlives_the_gateway_after_sigterm() {
    orphan_check(libc::SIGTERM);
}

#[test]
fn no_child_outlives_the_gateway_after_sigkill() {
    orphan_check(libc::SIGKILL);
}

#[test]
fn validate_reports_every_problem_with_its_field() {
    let dir = tempfile::tempdir().unwrap();
    let good = write_manifest(dir.path(), "good", &stdio_app("good", &[]));
    let bad = write_manifest(
        dir.path(),
        "bad",
        &json!({
            "id": "",
            "transport": "smoke-signals",
            "startupTimeoutSeconds": "soon",
            "headers": { "X-A": 1 },
            "uiResourceUri": "http://not-ui"
        }),
    );
    let ok = run_gateway(&["validate", &good.join("openclaw.mcpapp.json").display().to_string()], &[]);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    assert!(String::from_utf8_lossy(&ok.stdout).contains("VALID"));

    let out = run_gateway(&["validate", &good.display().to_string(), &bad.display().to_string()], &[]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    for field in ["id", "transport", "startupTimeoutSeconds", "headers", "uiResourceUri"] {
        assert!(text.contains(&format!("error: {field}")), "{field} missing from:\n{text}");
    }
    assert!(text.contains("2 manifest(s) checked, 1 invalid"), "{text}");

    let json_out = run_gateway(&["validate", "--json", &bad.display().to_string()], &[]);
    let results: serde_json::Value = serde_json::from_slice(&json_out.stdout).unwrap();
    assert_eq!(results[0]["valid"], false);
    assert!(results[0]["errors"].as_array().unwrap().len() >= 5);

    let missing = run_gateway(&["validate", "/no/such/manifest.json"], &[]);
    assert_eq!(missing.status.code(), Some(1));
}

#[test]
fn apps_command_lists_discovered_apps_without_serving() {
    let dir = tempfile::tempdir().unwrap();
    write_manifest(&dir.path().join("apps"), "one", &stdio_app("one", &[]));
    write_manifest(&dir.path().join("apps"), "denied", &stdio_app("denied", &[]));
    write_manifest(&dir.path().join("apps"), "nested/deeper/three", &http_app("three", &[]));
    let config = json!({
        "McpApps": {
            "Enabled": true,
            "DiscoveryPaths": ["./apps", "./missing"],
            "Deny": ["DEN*"],
            "Entries": { "one": { "StartupTimeoutSeconds": 42 } }
        }
    });
    std::fs::write(dir.path().join("appsettings.json"), config.to_string()).unwrap();
    let cfg = dir.path().join("appsettings.json").display().to_string();
    let out = run_gateway(&["apps", "--config", &cfg], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let line = |id: &str| text.lines().find(|l| l.starts_with(id)).unwrap_or_else(|| panic!("{id} in\n{text}")).to_string();
    assert!(line("one").contains("validated") && line("one").contains("42s/10s"), "{text}");
    assert!(line("denied").contains("disabled"), "{text}");
    assert!(line("three").contains("http") && line("three").contains("/mcp"), "{text}");
    assert!(text.contains("skipped") && text.contains("missing"), "{text}");
    assert!(text.contains("3 app(s) discovered"), "{text}");
    // Environment overrides apply (ASP.NET style) and nothing was started.
    let off = run_gateway(&["apps", "--config", &cfg], &[("McpApps__Enabled", "false")]);
    assert!(String::from_utf8_lossy(&off.stdout).contains("disabled"));
}
