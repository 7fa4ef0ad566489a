//! Graceful shutdown (issue 14): on SIGTERM the gateway stops accepting connections, lets the
//! calls in flight finish (bounded by `Gateway.ShutdownTimeoutSeconds`), stops its apps, leaves no
//! process behind (grandchildren included) and exits 0.

mod support;

use std::time::Duration;

use gateway_e2e::{wait_until, GatewayOptions, GatewayProcess};
use serde_json::{json, Value};
use support::*;

/// One stateless 2026-07-28 `tools/call` on `path` of the gateway at `base`, with its own
/// client (it runs on a thread while the test signals the gateway).
fn call(base: &str, path: &str, name: &str, arguments: Value) -> Result<Value, String> {
    try_call(base, path, name, arguments, Duration::from_secs(60)).map(|(reply, _)| reply)
}

fn result_text(reply: &Value) -> String {
    reply["result"]["content"][0]["text"].as_str().unwrap_or_default().to_string()
}

fn slowpoke(dir: &std::path::Path, shutdown_seconds: Option<u64>) -> (GatewayProcess, i32, i32) {
    let pid_file = dir.join("app.pid");
    let grandchild_file = dir.join("grandchild.pid");
    write_manifest(
        &dir.join("apps"),
        "slowpoke",
        &stdio_app("slowpoke", &["--pid-file", pid_file.to_str().unwrap(), "--grandchild-pid-file", grandchild_file.to_str().unwrap()]),
    );
    let mut gateway = json!({ "AlwaysRequireAuth": false });
    if let Some(seconds) = shutdown_seconds {
        gateway["ShutdownTimeoutSeconds"] = json!(seconds);
    }
    let config = json!({
        "Gateway": gateway,
        "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [dir.join("apps")], "Allow": ["*"] } }
    });
    let gw = GatewayProcess::start_with(GatewayOptions { config, ..Default::default() });
    assert!(wait_until(Duration::from_secs(30), Duration::from_millis(50), || grandchild_file.exists()), "{}", gw.logs());
    let app = read_pid(&pid_file, Duration::from_secs(10));
    let grandchild = read_pid(&grandchild_file, Duration::from_secs(10));
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(100), || gw.get_json("/apps/health").1["apps"][0]["state"] == "running"),
        "{}",
        gw.logs()
    );
    (gw, app, grandchild)
}

fn started_calls(gw: &GatewayProcess, ms: u64) -> usize {
    gw.log_lines().iter().filter(|l| l.contains(&format!("test-app: slow {ms} ms started"))).count()
}

#[test]
fn sigterm_lets_calls_in_flight_finish_then_exits_0_with_no_process_left() {
    let dir = tempfile::tempdir().unwrap();
    let (mut gw, app, grandchild) = slowpoke(dir.path(), None);
    let base = gw.base_url().to_string();

    // One long call through each MCP endpoint.
    let through_apps_mcp = {
        let base = base.clone();
        std::thread::spawn(move || call(&base, "/apps/mcp/slowpoke", "slow", json!({ "ms": 3000 })))
    };
    let through_mcp = {
        let base = base.clone();
        std::thread::spawn(move || call(&base, "/mcp", "slowpoke.slow", json!({ "ms": 3000 })))
    };
    assert!(
        wait_until(Duration::from_secs(20), Duration::from_millis(20), || started_calls(&gw, 3000) == 2),
        "the calls did not reach the app\n{}",
        gw.logs()
    );

    gw.signal(libc::SIGTERM);
    // No new connections meanwhile.
    assert!(
        wait_until(Duration::from_secs(5), Duration::from_millis(20), || gw.try_get("/healthz").is_err()),
        "the gateway still accepts connections after SIGTERM"
    );
    for (what, thread) in [("/apps/mcp", through_apps_mcp), ("/mcp", through_mcp)] {
        let reply = thread.join().unwrap().unwrap_or_else(|e| panic!("{what}: {e}\n{}", gw.logs()));
        assert_eq!(result_text(&reply), "slept 3000", "{what}: {reply}\n{}", gw.logs());
        assert_ne!(reply["result"]["isError"], true, "{what}: {reply}");
    }

    let status = gw.wait_exit(Duration::from_secs(30)).unwrap_or_else(|| panic!("the gateway did not exit\n{}", gw.logs()));
    assert_eq!(status.code(), Some(0), "{}", gw.logs());
    assert!(
        wait_until(Duration::from_secs(5), Duration::from_millis(50), || !process_alive(app) && !process_alive(grandchild)),
        "left behind: app {app} alive {}, grandchild {grandchild} alive {}",
        process_alive(app),
        process_alive(grandchild)
    );
    let logs = gw.logs();
    assert!(logs.contains("Gateway stopped"), "{logs}");
    assert!(!logs.contains(" ERROR "), "{logs}");
}

#[test]
fn the_shutdown_bound_cuts_a_call_that_takes_too_long() {
    let dir = tempfile::tempdir().unwrap();
    let (mut gw, app, grandchild) = slowpoke(dir.path(), Some(1));
    let base = gw.base_url().to_string();
    let caller = std::thread::spawn(move || call(&base, "/apps/mcp/slowpoke", "slow", json!({ "ms": 60000 })));
    assert!(wait_until(Duration::from_secs(20), Duration::from_millis(20), || started_calls(&gw, 60000) == 1), "{}", gw.logs());

    gw.signal(libc::SIGTERM);
    let status = gw.wait_exit(Duration::from_secs(20)).unwrap_or_else(|| panic!("the gateway did not exit within the bound\n{}", gw.logs()));
    assert_eq!(status.code(), Some(0), "{}", gw.logs());
    assert!(gw.logs().contains("Gateway.ShutdownTimeoutSeconds"), "{}", gw.logs());
    // The caller is answered (an error or a closed connection), not left hanging.
    let _ = caller.join().unwrap();
    assert!(wait_until(Duration::from_secs(5), Duration::from_millis(50), || !process_alive(app) && !process_alive(grandchild)));
}
