//! Operator control of MCP Apps over HTTP (issue 14, R21 admin trigger): `POST
//! /admin/mcpapps/reload` and `POST /admin/mcpapps/{id}/start|stop`, which always need the
//! gateway token as a Bearer header — even on an open loopback gateway.

mod support;

use std::time::Duration;

use gateway_e2e::{wait_until, GatewayOptions, GatewayProcess};
use serde_json::{json, Value};
use support::*;

const TOKEN: &str = "admin-apps-token-0123456789";

fn gateway(with_token: bool) -> (tempfile::TempDir, GatewayProcess) {
    gateway_with(with_token, |_| Vec::new())
}

/// A gateway whose app `ctl` runs the test app with `args(the test's folder)`.
fn gateway_with(with_token: bool, args: impl Fn(&std::path::Path) -> Vec<String>) -> (tempfile::TempDir, GatewayProcess) {
    let dir = tempfile::tempdir().unwrap();
    let args = args(dir.path());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    write_manifest(&dir.path().join("apps"), "ctl", &stdio_app("ctl", &args));
    let config = json!({
        "Gateway": { "AlwaysRequireAuth": false, "AuthTokenEnv": "ADMIN_APPS_TOKEN" },
        "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [dir.path().join("apps")], "Allow": ["*"] } }
    });
    let env = if with_token { vec![("ADMIN_APPS_TOKEN".to_string(), TOKEN.to_string())] } else { vec![] };
    let gw = GatewayProcess::start_with(GatewayOptions { config, env, ..Default::default() });
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(100), || state(&gw) == "running"),
        "the app never ran\n{}",
        gw.logs()
    );
    (dir, gw)
}

fn state(gw: &GatewayProcess) -> String {
    let (_, health) = gw.get_json("/apps/health");
    health["apps"].as_array().and_then(|a| a.iter().find(|a| a["id"] == "ctl")).map(|a| a["state"].as_str().unwrap_or("").to_string()).unwrap_or_default()
}

fn admin(gw: &GatewayProcess, path: &str, token: Option<&str>) -> (u16, Value) {
    let mut request = gw.client().post(gw.url(path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().expect("POST admin");
    let status = response.status().as_u16();
    (status, serde_json::from_str(&response.text().unwrap()).unwrap_or(Value::Null))
}

#[test]
fn an_operator_stops_starts_and_reloads_apps_with_the_token() {
    let (_dir, gw) = gateway(true);
    let (status, body) = admin(&gw, "/admin/mcpapps/ctl/stop", None);
    assert_eq!(status, 401, "no token on an open gateway is still refused: {body}");
    let (status, body) = admin(&gw, "/admin/mcpapps/ctl/stop", Some("wrong"));
    assert_eq!(status, 401, "{body}");
    assert_eq!(state(&gw), "running");

    let (status, body) = admin(&gw, "/admin/mcpapps/ctl/stop", Some(TOKEN));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["app"]["state"], "stopped", "{body}");
    assert_eq!(state(&gw), "stopped");
    assert!(
        wait_until(Duration::from_secs(10), Duration::from_millis(50), || !gw.get_json("/tools").1.to_string().contains("\"ctl.echo\"")),
        "a stopped app's tools leave the registry\n{}",
        gw.logs()
    );

    let (status, body) = admin(&gw, "/admin/mcpapps/ctl/start", Some(TOKEN));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["app"]["state"], "running", "{body}");
    assert!(
        wait_until(Duration::from_secs(10), Duration::from_millis(100), || gw.get_json("/tools").1.to_string().contains("\"ctl.echo\"")),
        "the started app's tools are back\n{}",
        gw.logs()
    );

    let (status, body) = admin(&gw, "/admin/mcpapps/reload", Some(TOKEN));
    assert_eq!(status, 200, "{body}");
    assert!(body["report"]["unchanged"].as_array().is_some_and(|u| u.contains(&json!("ctl"))), "{body}");

    let (status, body) = admin(&gw, "/admin/mcpapps/nope/start", Some(TOKEN));
    assert_eq!(status, 404, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("nope"), "{body}");
}

#[test]
fn without_a_configured_token_admin_routes_are_off() {
    let (_dir, gw) = gateway(false);
    let (status, body) = admin(&gw, "/admin/mcpapps/ctl/stop", None);
    assert_eq!(status, 403, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("Gateway.AuthToken"), "{body}");
    assert_eq!(state(&gw), "running");
}

/// An app that crash-loops until it is fixed: held after the crash-loop cap, then brought back
/// by `POST /admin/mcpapps/{id}/start` once its cause is gone (here a marker file its launcher
/// checks, as a broken configuration would be).
#[test]
fn a_crash_looping_app_is_brought_back_by_start_once_fixed() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("BROKEN");
    std::fs::write(&broken, "").unwrap();
    let launcher = dir.path().join("launch.sh");
    let app = test_app_bin().display().to_string();
    std::fs::write(
        &launcher,
        format!("#!/bin/sh\nif [ -f '{}' ]; then exec '{app}' --exit-after-ms 300; fi\nexec '{app}'\n", broken.display()),
    )
    .unwrap();
    std::fs::set_permissions(&launcher, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut manifest = stdio_app("ctl", &[]);
    manifest["command"] = json!(launcher);
    // The launcher runs test-app: a confined app runs only what it declares (SPEC R48).
    manifest["permissions"]["filesystem"]["read"] = json!([app]);
    write_manifest(&dir.path().join("apps"), "ctl", &manifest);
    let config = json!({
        "Gateway": { "AlwaysRequireAuth": false, "AuthTokenEnv": "ADMIN_APPS_TOKEN" },
        "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [dir.path().join("apps")], "Allow": ["*"] } }
    });
    let gw = GatewayProcess::start_with(GatewayOptions {
        config,
        env: vec![("ADMIN_APPS_TOKEN".to_string(), TOKEN.to_string())],
        ..Default::default()
    });
    assert!(
        gw.wait_for_log("it stays Failed until started or reloaded", Duration::from_secs(60)),
        "the crash-loop cap was never reached\n{}",
        gw.logs()
    );
    // Held: it stays failed on its own, with the reason.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(state(&gw), "failed", "{}", gw.logs());
    let (_, health) = gw.get_json("/apps/health");
    assert!(health["apps"][0]["lastError"].as_str().is_some_and(|e| e.contains("exited with code 3")), "{health}");

    std::fs::remove_file(&broken).unwrap();
    let (status, body) = admin(&gw, "/admin/mcpapps/ctl/start", Some(TOKEN));
    assert_eq!(status, 200, "{body}\n{}", gw.logs());
    assert_eq!(body["app"]["state"], "running", "{body}");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(state(&gw), "running", "it stays up once fixed\n{}", gw.logs());
}

/// `POST /admin/mcpapps/reload` re-reads the configuration file: a `Deny` added there stops the
/// app, an `Entries` override applies, and a file that no longer reads changes nothing.
#[test]
fn reload_re_reads_allow_deny_and_entries_from_the_configuration_file() {
    let (dir, gw) = gateway(true);
    let config_path = gw.config_dir().join("appsettings.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();

    config["OpenClaw"]["McpApps"]["Deny"] = json!(["ctl"]);
    std::fs::write(&config_path, config.to_string()).unwrap();
    let (status, body) = admin(&gw, "/admin/mcpapps/reload", Some(TOKEN));
    assert_eq!(status, 200, "{body}");
    assert!(body["report"]["stopped"].as_array().unwrap().contains(&json!("ctl")) || state(&gw) != "running", "{body}");
    assert_ne!(state(&gw), "running", "a denied app stops\n{}", gw.logs());

    // Allowed again, with an Entries override of its tool-name prefix: it runs with it.
    config["OpenClaw"]["McpApps"]["Deny"] = json!([]);
    config["OpenClaw"]["McpApps"]["Entries"] = json!({ "ctl": { "ToolNamePrefix": "renamed." } });
    std::fs::write(&config_path, config.to_string()).unwrap();
    let (status, body) = admin(&gw, "/admin/mcpapps/reload", Some(TOKEN));
    assert_eq!(status, 200, "{body}");
    assert_eq!(state(&gw), "running", "{body}\n{}", gw.logs());
    let tools = gw.get_json("/tools").1.to_string();
    assert!(tools.contains("\"renamed.echo\"") && !tools.contains("\"ctl.echo\""), "{tools}");

    std::fs::write(&config_path, "{ not json").unwrap();
    let (status, body) = admin(&gw, "/admin/mcpapps/reload", Some(TOKEN));
    assert_eq!(status, 422, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("appsettings.json"), "{body}");
    assert_eq!(state(&gw), "running");
    drop(dir);
}

/// ARCHITECTURE.md's "one live session per app": an app's starts and stops are serialised and
/// each start or stop begins a new generation, so operators' starts and stops racing each other
/// leave one process, and a restart scheduled for a lost session does nothing once a start or a
/// stop came after the loss.
#[test]
fn racing_starts_and_stops_leave_one_process_and_stale_restarts_do_nothing() {
    let (dir, gw) = gateway_with(true, |dir| vec!["--pid-file".into(), dir.join("apps/ctl/ctl.pid").display().to_string()]);
    let needle = dir.path().join("apps/ctl/ctl.pid").display().to_string();
    let one_process = || {
        // Settled: one process, and still one a moment later (nothing starting beside it).
        wait_until(Duration::from_secs(15), Duration::from_millis(50), || processes_naming(&needle).len() == 1) && {
            std::thread::sleep(Duration::from_millis(500));
            processes_naming(&needle).len() == 1
        }
    };
    assert!(one_process(), "{:?}\n{}", processes_naming(&needle), gw.logs());

    // Six operators, each starting and stopping the app at once.
    std::thread::scope(|scope| {
        for k in 0..6 {
            let gw = &gw;
            scope.spawn(move || {
                for i in 0..4 {
                    let what = if (i + k) % 2 == 0 { "start" } else { "stop" };
                    let (status, body) = admin(gw, &format!("/admin/mcpapps/ctl/{what}"), Some(TOKEN));
                    assert_eq!(status, 200, "{what}: {body}");
                }
            });
        }
    });
    let (status, body) = admin(&gw, "/admin/mcpapps/ctl/start", Some(TOKEN));
    assert_eq!((status, &body["app"]["state"]), (200, &json!("running")), "{body}");
    assert!(one_process(), "after racing starts and stops: {:?}\n{}", processes_naming(&needle), gw.logs());
    let (reply, _) = try_call(gw.base_url(), "/apps/mcp/ctl", "echo", json!({ "text": "one" }), Duration::from_secs(30)).unwrap();
    assert_eq!(reply["result"]["content"][0]["text"], "echo: one", "{reply}");

    // Lost, then started by hand before its restart (due a second after the loss): the
    // scheduled restart does nothing.
    let kill = |gw: &GatewayProcess| {
        let (pid, _) = processes_naming(&needle)[0].clone();
        unsafe { libc::kill(pid, libc::SIGKILL) };
        assert!(wait_until(Duration::from_secs(10), Duration::from_millis(20), || state(gw) == "failed"), "the loss is noticed\n{}", gw.logs());
    };
    kill(&gw);
    let (status, body) = admin(&gw, "/admin/mcpapps/ctl/start", Some(TOKEN));
    assert_eq!((status, &body["app"]["state"]), (200, &json!("running")), "{body}");
    std::thread::sleep(Duration::from_millis(2500));
    assert!(one_process(), "a restart for the lost session ran beside the new one: {:?}\n{}", processes_naming(&needle), gw.logs());

    // Stopped while running: its supervisor, now of an old generation, sees the process end and
    // does nothing (no loss reported, no restart).
    let (status, body) = admin(&gw, "/admin/mcpapps/ctl/stop", Some(TOKEN));
    assert_eq!((status, &body["app"]["state"]), (200, &json!("stopped")), "{body}");
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(state(&gw), "stopped", "a stopped app came back\n{}", gw.logs());
    assert!(processes_naming(&needle).is_empty(), "{:?}", processes_naming(&needle));
    let (status, body) = admin(&gw, "/admin/mcpapps/ctl/start", Some(TOKEN));
    assert_eq!((status, &body["app"]["state"]), (200, &json!("running")), "{body}");
    assert!(one_process(), "{:?}\n{}", processes_naming(&needle), gw.logs());

    // Lost, then stopped before its restart: it stays stopped.
    kill(&gw);
    let (status, body) = admin(&gw, "/admin/mcpapps/ctl/stop", Some(TOKEN));
    assert_eq!((status, &body["app"]["state"]), (200, &json!("stopped")), "{body}");
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(state(&gw), "stopped", "a restart for the lost session ran after the stop\n{}", gw.logs());
    assert!(processes_naming(&needle).is_empty(), "{:?}", processes_naming(&needle));
}
