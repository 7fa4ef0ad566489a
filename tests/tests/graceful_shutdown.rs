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

// ---------------------------------------------------------------------------------------------
// Many calls in flight at SIGTERM, by every way a call takes through the gateway (issue 37)
// ---------------------------------------------------------------------------------------------

/// The way a `tools/call` goes through the gateway: the short way (`pass_through.rs`) or rmcp's
/// server (a progress token in `_meta` keeps a request off the short way), as a stateless
/// 2026-07-28 request or in an initialize-era session.
#[derive(Clone, Copy, Debug)]
enum Way {
    ShortStateless,
    RmcpStateless,
    ShortSession,
    RmcpSession,
}

const WAYS: [Way; 4] = [Way::ShortStateless, Way::RmcpStateless, Way::ShortSession, Way::RmcpSession];

/// One call of the scenario: the endpoint path and the tool (which name the app, stdio or HTTP),
/// and the way.
#[derive(Clone, Debug)]
struct CallSpec {
    path: String,
    tool: String,
    way: Way,
}

/// Every app × endpoint × way: 2 × 2 × 4 = 16 calls.
fn every_way(apps: &[&'static str]) -> Vec<CallSpec> {
    let mut specs = Vec::new();
    for &app in apps {
        for (path, tool) in [(format!("/apps/mcp/{app}"), "slow".to_string()), ("/mcp".to_string(), format!("{app}.slow"))] {
            for way in WAYS {
                specs.push(CallSpec { path: path.clone(), tool: tool.clone(), way });
            }
        }
    }
    specs
}

/// What came back for a call: the HTTP status, the content type and the body as text.
#[derive(Debug)]
struct RawReply {
    status: u16,
    content_type: String,
    body: String,
}

impl RawReply {
    /// The JSON-RPC response to request `id` in the body (plain JSON, or an SSE stream's events).
    fn response(&self, id: u64) -> Option<Value> {
        if self.content_type.starts_with("application/json") {
            let message = serde_json::from_str::<Value>(&self.body).ok()?;
            return (message["id"] == id).then_some(message);
        }
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|m| m["id"] == id && (m.get("result").is_some() || m.get("error").is_some()))
    }
}

fn client(timeout: Duration) -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder().timeout(timeout).no_proxy().build().unwrap()
}

fn post(url: &str, headers: &[(&'static str, String)], body: &Value) -> Result<RawReply, String> {
    let mut request = client(Duration::from_secs(60)).post(url).body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response = request.send().map_err(|e| format!("POST {url}: {e}"))?;
    let status = response.status().as_u16();
    let content_type = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let body = response.text().map_err(|e| format!("POST {url}: reading the body: {e}"))?;
    Ok(RawReply { status, content_type, body })
}

/// Opens an initialize-era session at `url` for a client that declared nothing (so its plain
/// calls may take the short way), plus its standalone GET stream, read on a thread until the
/// gateway ends it (as the official SDKs' clients keep one open). The headers its requests carry.
fn open_session(url: &str) -> Vec<(&'static str, String)> {
    let mut headers = vec![("content-type", "application/json".to_string()), ("accept", "application/json, text/event-stream".to_string())];
    let init = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": { "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "shutdown-e2e", "version": "1" } } });
    let mut request = client(Duration::from_secs(30)).post(url).body(init.to_string());
    for (name, value) in &headers {
        request = request.header(*name, value);
    }
    let reply = request.send().unwrap_or_else(|e| panic!("initialize at {url}: {e}"));
    let session = reply.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_string);
    let session = session.unwrap_or_else(|| panic!("{url}: no session: {}", reply.text().unwrap_or_default()));
    headers.push(("mcp-session-id", session));
    headers.push(("mcp-protocol-version", "2025-06-18".to_string()));
    let initialized = post(url, &headers, &json!({ "jsonrpc": "2.0", "method": "notifications/initialized" })).unwrap();
    assert_eq!(initialized.status, 202, "{url}: initialized: {initialized:?}");
    let (url, stream_headers) = (url.to_string(), headers.clone());
    std::thread::spawn(move || {
        let mut request = client(Duration::from_secs(120)).get(url).header("accept", "text/event-stream");
        for (name, value) in stream_headers.iter().filter(|(n, _)| n.starts_with("mcp-")) {
            request = request.header(*name, value);
        }
        if let Ok(response) = request.send() {
            let _ = response.text();
        }
    });
    headers
}

/// Sends the call `spec` with `arguments` (its session opened first, for the session ways) on
/// a thread of its own; the thread returns the reply.
fn start_call(base: &str, spec: &CallSpec, id: u64, arguments: Value) -> std::thread::JoinHandle<Result<RawReply, String>> {
    let url = format!("{base}{}", spec.path);
    let (headers, body) = match spec.way {
        Way::ShortStateless | Way::RmcpStateless => {
            let (headers, body) = stateless_tools_call(&spec.tool, arguments, "shutdown-e2e");
            let mut body: Value = serde_json::from_str(&body).unwrap();
            body["id"] = json!(id);
            if matches!(spec.way, Way::RmcpStateless) {
                body["params"]["_meta"]["progressToken"] = json!(format!("p{id}"));
            }
            (headers, body)
        }
        Way::ShortSession | Way::RmcpSession => {
            let headers = open_session(&url);
            let mut body = json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": { "name": spec.tool, "arguments": arguments } });
            if matches!(spec.way, Way::RmcpSession) {
                body["params"]["_meta"] = json!({ "progressToken": format!("p{id}") });
            }
            (headers, body)
        }
    };
    std::thread::spawn(move || post(&url, &headers, &body))
}

/// A gateway with a stdio and an HTTP test-app (`gss`, `gsh`), both running; their pid files.
fn two_apps(dir: &std::path::Path, shutdown_seconds: u64) -> (GatewayProcess, [std::path::PathBuf; 2]) {
    let apps = dir.join("apps");
    let pids = [dir.join("gss.pid"), dir.join("gsh.pid")];
    let mut stdio = stdio_app("gss", &["--pid-file", pids[0].to_str().unwrap()]);
    let mut http = http_app("gsh", &["--pid-file", pids[1].to_str().unwrap()]);
    for manifest in [&mut stdio, &mut http] {
        manifest["requestTimeoutSeconds"] = json!(120);
    }
    write_manifest(&apps, "gss", &stdio);
    write_manifest(&apps, "gsh", &http);
    let config = json!({
        "Gateway": { "AlwaysRequireAuth": false, "ShutdownTimeoutSeconds": shutdown_seconds },
        "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [apps], "Allow": ["*"] } }
    });
    let gw = GatewayProcess::start_with(GatewayOptions { config, ..Default::default() });
    let running = || {
        let apps = gw.get_json("/apps/health").1["apps"].as_array().cloned().unwrap_or_default();
        apps.len() == 2 && apps.iter().all(|a| a["state"] == "running")
    };
    assert!(wait_until(Duration::from_secs(30), Duration::from_millis(100), running), "the apps never ran\n{}", gw.logs());
    (gw, pids)
}

/// Starts the call of each of `specs` (asked to sleep `ms`; ids from 100), sends SIGTERM once all
/// reached the app, and waits for the gateway's exit (0, its apps gone); then each call's reply
/// and its JSON-RPC response, in the order of `specs` (a call without either fails the test,
/// naming `what` and the call).
fn sigterm_with_calls_in_flight(gw: &mut GatewayProcess, pids: &[std::path::PathBuf; 2], specs: &[CallSpec], ms: u64, what: &str) -> Vec<(RawReply, Value)> {
    let base = gw.base_url().to_string();
    let calls: Vec<_> = specs.iter().enumerate().map(|(i, spec)| start_call(&base, spec, 100 + i as u64, json!({ "ms": ms }))).collect();
    let app_pids: Vec<i32> = pids.iter().map(|p| read_pid(p, Duration::from_secs(10))).collect();
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(20), || started_calls(gw, ms) == specs.len()),
        "{} of {} calls reached the apps\n{}",
        started_calls(gw, ms),
        specs.len(),
        gw.logs()
    );
    gw.signal(libc::SIGTERM);
    let replies: Vec<_> = calls.into_iter().map(|c| c.join().unwrap()).collect();
    let status = gw.wait_exit(Duration::from_secs(30)).unwrap_or_else(|| panic!("the gateway did not exit\n{}", gw.logs()));
    assert_eq!(status.code(), Some(0), "{}", gw.logs());
    assert!(
        wait_until(Duration::from_secs(5), Duration::from_millis(50), || app_pids.iter().all(|&p| !process_alive(p))),
        "app processes left behind: {app_pids:?}"
    );
    let logs = gw.logs();
    assert!(logs.contains("Gateway stopped"), "{logs}");
    assert!(!logs.to_lowercase().contains("panic"), "{logs}");
    specs
        .iter()
        .zip(replies)
        .enumerate()
        .map(|(i, (spec, reply))| {
            let reply = reply.unwrap_or_else(|e| panic!("{what}, {spec:?}: no reply: {e}\n{logs}"));
            let response = reply.response(100 + i as u64).unwrap_or_else(|| panic!("{what}, {spec:?}: no JSON-RPC response in {reply:?}\n{logs}"));
            (reply, response)
        })
        .collect()
}

/// At SIGTERM, 16 calls are in flight — through `/apps/mcp/{id}` and `/mcp`, the short way and
/// rmcp's, stateless and in sessions (each with its GET stream open), to a stdio and an HTTP
/// app — each asked to sleep far longer than `Gateway.ShutdownTimeoutSeconds` (3 s). Every one
/// must get a JSON-RPC response: the error naming the shutdown (-32001), never an empty stream,
/// a closed connection or a "panic in module". Then the gateway exits 0 with its apps gone.
/// The race it had (streams ended before the answers; the module shut down under calls still
/// polled) gave empty answers in most runs: three rounds.
#[test]
fn calls_cut_off_by_the_shutdown_bound_are_answered_with_an_error_naming_it() {
    const MS: u64 = 30_000;
    for round in 1..=3 {
        let dir = tempfile::tempdir().unwrap();
        let (mut gw, pids) = two_apps(dir.path(), 3);
        let specs = every_way(&["gss", "gsh"]);
        let replies = sigterm_with_calls_in_flight(&mut gw, &pids, &specs, MS, &format!("round {round}"));
        for (spec, (reply, response)) in specs.iter().zip(replies) {
            let context = format!("round {round}, {spec:?}");
            let error = &response["error"];
            assert_eq!(error["code"], -32001, "{context}: {response}");
            let message = error["message"].as_str().unwrap_or_default();
            assert_eq!(
                message, "the gateway is shutting down: the call was cut off after Gateway.ShutdownTimeoutSeconds (3 s)",
                "{context}: {response}"
            );
            assert_eq!(reply.status, 200, "{context}: {reply:?}");
        }
    }
}

/// The same 16 calls, each finishing within the bound: SIGTERM lets every one end with its
/// result, then the gateway exits 0 with its apps gone.
#[test]
fn calls_that_finish_within_the_bound_get_their_results_by_every_way() {
    const MS: u64 = 1_500;
    let dir = tempfile::tempdir().unwrap();
    let (mut gw, pids) = two_apps(dir.path(), 10);
    let specs = every_way(&["gss", "gsh"]);
    let replies = sigterm_with_calls_in_flight(&mut gw, &pids, &specs, MS, "within the bound");
    for (spec, (_, response)) in specs.iter().zip(replies) {
        assert_eq!(result_text(&response), format!("slept {MS}"), "{spec:?}: {response}");
        assert_ne!(response["result"]["isError"], true, "{spec:?}: {response}");
    }
}
