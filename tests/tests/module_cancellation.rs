//! Ownership and cancellation at the module boundary (issue 13, "Must show" 3): a call the host
//! stops waiting for, and a cancel that arrives before its call started, both stop the upstream
//! call; a panicking supervisor is contained and its app supervised again; an instance dropped
//! without `shutdown` still stops its apps.
//!
//! Two ways in, both with real `test-app` processes behind the module:
//! - in-process, through the module's `host-abi` objects (the exact orderings a host can produce,
//!   and the module's own mechanisms without the host's help);
//! - the real `gateway-host` binary, with the workspace's module or the fault-injection variant
//!   build (`Testing.Faults`).
//!
//! Run: `cargo build --release --workspace && cargo test --release -p gateway-e2e --test module_cancellation`.
//! Every wait is bounded generously; nothing asserts how fast anything happened.

mod support;

use std::io::Write as _;
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::RStr;
use gateway_e2e::{build_variant_module, wait_until, GatewayOptions, GatewayProcess};
use host_abi::{HostSink, HostSink_TO, LogLevel, LogRecord, ModuleConfig, ModuleEvent, ModuleInstanceBox, ToolCallRequest};
use serde_json::{json, Value};
use support::*;

/// Generous bound of every wait.
const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);
/// Long enough that a `cancellable` call of this length only ends by being cancelled.
const FOREVER_MS: u64 = 600_000;

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

/// What the app reports through its `cancellations` tool: cancelled calls seen, and
/// `cancellable` calls started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    cancelled: u64,
    started: u64,
}

impl Seen {
    fn from(report: &Value) -> Seen {
        Seen {
            cancelled: report["count"].as_u64().unwrap_or_else(|| panic!("no count in {report}")),
            started: report["started"].as_u64().unwrap_or_else(|| panic!("no started in {report}")),
        }
    }
}

fn call_request(call_id: u64, app: &str, tool: &str, args: Value) -> ToolCallRequest {
    ToolCallRequest {
        call_id,
        app_id: app.into(),
        tool_name: tool.into(),
        arguments_json: args.to_string().into(),
        meta_json: "{}".into(),
        extra_json: "{}".into(),
    }
}

/// A module (in-process) with one stdio test app `c`, Running.
fn module_with_app() -> TestModule {
    let m = TestModule::new(json!({}));
    m.add_app("c", &stdio_app("c", &[]));
    m.reload();
    assert!(m.wait_state("c", "running", WAIT), "app c did not start: {}", m.app("c").last_error);
    m
}

/// Polls `fut` once, as a host's executor would, with a waker that does nothing.
fn poll_once<F: std::future::Future + Unpin>(fut: &mut F) -> std::task::Poll<F::Output> {
    let waker = futures::task::noop_waker();
    std::pin::Pin::new(fut).poll(&mut std::task::Context::from_waker(&waker))
}

fn seen_in_process(m: &TestModule) -> Seen {
    let outcome = m.call("c", "cancellations", "{}");
    let report: Value = serde_json::from_str(outcome.structured_content_json.as_str())
        .unwrap_or_else(|e| panic!("cancellations: {e}: {}", outcome.structured_content_json));
    Seen::from(&report)
}

// ---------------------------------------------------------------------------------------------
// In-process: the module's own mechanisms
// ---------------------------------------------------------------------------------------------

/// The host cancels a call id before it even calls `call_tool` with it (the earliest a cancel
/// can come): the call ends cancelled and the app is never asked.
#[test]
fn a_cancel_that_arrives_before_its_call_registers_stops_the_call() {
    let m = module_with_app();
    let before = seen_in_process(&m);
    assert!(!m.instance.cancel(9001), "no call 9001 is in flight yet");
    let request = call_request(9001, "c", "cancellable", json!({ "ms": FOREVER_MS }));
    let outcome = futures::executor::block_on(m.instance.call_tool(request)).expect("an outcome, not a boundary error");
    assert!(outcome.is_error, "{}", outcome.text);
    assert!(outcome.text.as_str().contains("call cancelled"), "{}", outcome.text);
    assert_eq!(seen_in_process(&m), before, "the app never saw the cancelled call");

    // The same call under another id reaches the app (the check above is not vacuous).
    let request = call_request(9002, "c", "cancellable", json!({ "ms": 1 }));
    let outcome = futures::executor::block_on(m.instance.call_tool(request)).unwrap();
    assert!(!outcome.is_error, "{}", outcome.text);
    assert_eq!(seen_in_process(&m).started, before.started + 1);
}

/// Dropping the future of a call in flight, with no `cancel` from the host at all, cancels the
/// upstream request: the app observes the cancellation.
#[test]
fn dropping_a_call_future_cancels_the_upstream_call() {
    let m = module_with_app();
    let before = seen_in_process(&m);
    let mut call = m.instance.call_tool(call_request(9101, "c", "cancellable", json!({ "ms": FOREVER_MS })));
    // A call's future is a future: it works while its host polls it, as a host does until it
    // stops waiting.
    assert!(
        wait_until(WAIT, POLL, || {
            assert!(poll_once(&mut call).is_pending(), "the call ended before it was dropped");
            seen_in_process(&m).started > before.started
        }),
        "the call never started in the app"
    );
    drop(call);
    let mut seen = before;
    assert!(
        wait_until(WAIT, POLL, || {
            seen = seen_in_process(&m);
            seen.cancelled > before.cancelled
        }),
        "the app never saw the dropped call cancelled: {seen:?}"
    );
}

/// What the module reports through its sink; these tests need none of it.
struct Quiet;

impl HostSink for Quiet {
    fn log_enabled(&self, _level: LogLevel, _target: RStr<'_>) -> bool {
        false
    }
    fn log(&self, _record: LogRecord) {}
    fn event(&self, _event: ModuleEvent) {}
}

fn create_instance(dir: &Path) -> ModuleInstanceBox {
    let config = json!({ "McpApps": { "Enabled": true, "DiscoveryPaths": ["./apps"], "Allow": ["*"] } });
    let module_config = ModuleConfig {
        config_json: config.to_string().into(),
        config_dir: dir.display().to_string().into(),
        data_dir: dir.join("data").display().to_string().into(),
        host_version: "0.1.0".into(),
        extra_json: "{}".into(),
    };
    let sink = Arc::new(HostSink_TO::from_value(Quiet, TD_Opaque));
    mcpapp_plugin::export::instance::Instance::create(module_config, sink).expect("module creates").into_abi()
}

/// A host that drops the instance without `shutdown` still gets its apps stopped.
#[test]
fn dropping_the_instance_without_shutdown_stops_its_apps() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("d.pid");
    write_manifest(&dir.path().join("apps"), "d", &stdio_app("d", &["--pid-file", &pid_file.display().to_string()]));
    let instance = create_instance(dir.path());
    futures::executor::block_on(instance.reload()).unwrap();
    let running = || {
        futures::executor::block_on(instance.list_apps()).unwrap().iter().any(|a| a.id.as_str() == "d" && a.state().as_str() == "running")
    };
    assert!(wait_until(WAIT, POLL, running), "app d did not start");
    let pid = read_pid(&pid_file, WAIT);
    assert!(process_alive(pid));
    drop(instance);
    assert!(wait_until(WAIT, POLL, || !process_alive(pid)), "app d (pid {pid}) outlived its dropped module instance");
}

// ---------------------------------------------------------------------------------------------
// Through the real gateway
// ---------------------------------------------------------------------------------------------

fn gateway_config(dir: &Path, faults: &[&str]) -> Value {
    json!({
        "Gateway": { "AlwaysRequireAuth": false },
        "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [dir.join("apps")], "Allow": ["*"] } },
        "Testing": { "Faults": faults },
    })
}

fn health_app(gw: &GatewayProcess, id: &str) -> Value {
    let (status, health) = gw.get_json("/apps/health");
    assert_eq!(status, 200, "{health}");
    health["apps"].as_array().and_then(|a| a.iter().find(|x| x["id"] == id).cloned()).unwrap_or(Value::Null)
}

fn wait_running(gw: &GatewayProcess, id: &str) {
    assert!(
        wait_until(WAIT, POLL, || health_app(gw, id)["state"] == "running"),
        "app {id} is not running: {}\n{}",
        health_app(gw, id),
        gw.logs()
    );
}

/// `tools/call` of `tool` on app `app` through `/apps/mcp/{app}` → the JSON-RPC response.
fn app_call(gw: &GatewayProcess, app: &str, tool: &str, args: Value) -> Value {
    gw.mcp_request(&format!("/apps/mcp/{app}"), "tools/call", json!({ "name": tool, "arguments": args }), json!({})).1
}

fn seen_through(gw: &GatewayProcess, app: &str) -> Seen {
    let response = app_call(gw, app, "cancellations", json!({}));
    Seen::from(&response["result"]["structuredContent"])
}

/// Sends a 2026-07-28 `tools/call` on a connection of its own and returns the connection
/// without reading the answer: dropping it is a client going away mid-call.
fn start_call_on_own_connection(gw: &GatewayProcess, path: &str, tool: &str, args: Value) -> TcpStream {
    let authority = gw.base_url().trim_start_matches("http://").to_string();
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": "gateway-e2e", "version": "1" },
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": tool, "arguments": args, "_meta": meta } })
        .to_string();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: {tool}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = TcpStream::connect(&authority).unwrap_or_else(|e| panic!("connecting to {authority}: {e}"));
    stream.write_all(request.as_bytes()).expect("sending the request");
    stream
}

/// (a) A client calling a slow tool through `/apps/mcp/{id}` goes away: the gateway drops its
/// call and the app observes the cancellation.
#[test]
fn a_client_that_goes_away_cancels_the_upstream_call() {
    let dir = tempfile::tempdir().unwrap();
    write_manifest(&dir.path().join("apps"), "tapp", &stdio_app("tapp", &[]));
    let gw = GatewayProcess::start(gateway_config(dir.path(), &[]));
    wait_running(&gw, "tapp");
    let before = seen_through(&gw, "tapp");

    let connection = start_call_on_own_connection(&gw, "/apps/mcp/tapp", "cancellable", json!({ "ms": FOREVER_MS }));
    assert!(
        wait_until(WAIT, POLL, || seen_through(&gw, "tapp").started > before.started),
        "the call never reached the app\n{}",
        gw.logs()
    );
    connection.shutdown(std::net::Shutdown::Both).expect("closing the connection");
    drop(connection);

    let mut seen = before;
    assert!(
        wait_until(WAIT, POLL, || {
            seen = seen_through(&gw, "tapp");
            seen.cancelled > before.cancelled
        }),
        "the app never saw the abandoned call cancelled: {seen:?}\n{}",
        gw.logs()
    );
    let (status, _) = gw.get("/healthz");
    assert_eq!(status, 200, "the gateway keeps serving");
}

/// How long the variant module holds each forwarded request (a `/mcp` `tools/call` is one)
/// before registering it (fault injection):
/// the client's cancel comes in meanwhile, before the call started.
const REGISTRATION_DELAY_MS: u64 = 3000;

/// (b) A cancel (`notifications/cancelled` from an MCP client of `/mcp`) that reaches the
/// module before the call registered: the call still ends there, and the app never runs it.
#[test]
fn a_cancel_sent_before_the_call_starts_stops_it() {
    use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientCapabilities, ClientRequest, Implementation, InitializeRequestParams};
    use rmcp::service::PeerRequestOptions;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::ServiceExt as _;

    let variant = build_variant_module();
    let dir = tempfile::tempdir().unwrap();
    write_manifest(&dir.path().join("apps"), "tapp", &stdio_app("tapp", &[]));
    let delay = format!("delay:forward:{REGISTRATION_DELAY_MS}");
    let gw = GatewayProcess::start_with(GatewayOptions {
        config: gateway_config(dir.path(), &[&delay]),
        module: Some(variant.path.clone()),
        env: vec![("RUST_LOG".into(), "info,mcpapp_plugin_variant=debug".into())],
        ..Default::default()
    });
    wait_running(&gw, "tapp");
    assert!(
        wait_until(WAIT, POLL, || gw.get_json("/tools").1.to_string().contains("tapp.cancellable")),
        "the app's tools never reached the registry\n{}",
        gw.logs()
    );
    let before = seen_through(&gw, "tapp");
    let url = gw.url("/mcp");
    let call = |ms: u64| {
        let params = CallToolRequestParams::new("tapp.cancellable".to_string())
            .with_arguments(json!({ "ms": ms }).as_object().unwrap().clone());
        ClientRequest::CallToolRequest(CallToolRequest::new(params))
    };
    let sent_before_start = "'tools/call' for McpApp 'tapp' was cancelled before it was sent";

    // The blocking helpers (HTTP, logs) run outside the client's runtime; only the MCP client
    // runs on it.
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let info = InitializeRequestParams::new(ClientCapabilities::default(), Implementation::new("module-cancellation-test", "1.0.0"));
    let client = runtime
        .block_on(async { info.serve(StreamableHttpClientTransport::from_uri(url.clone())).await })
        .expect("connecting to /mcp");

    // Every forwarded request is held (the endpoint's own, during initialize, too): the call's
    // is the next one held after this point.
    let holding = "injected delay: forward call";
    let held = || gw.log_lines().iter().filter(|l| l.contains(holding)).count();
    let held_before = held();
    let handle = runtime
        .block_on(client.peer().send_cancellable_request(call(FOREVER_MS), PeerRequestOptions::no_options()))
        .expect("tools/call sent");
    // The module holds the call before registering it; the client cancels meanwhile.
    assert!(wait_until(WAIT, POLL, || held() > held_before), "the call never reached the module's injected delay\n{}", gw.logs());
    runtime.block_on(handle.cancel(Some("the test cancels before the call starts".into()))).expect("cancel sent");
    assert!(gw.wait_for_log(sent_before_start, WAIT), "the module did not stop the call before sending it\n{}", gw.logs());
    assert_eq!(seen_through(&gw, "tapp"), before, "the app never ran the cancelled call\n{}", gw.logs());

    // The same call, not cancelled, goes through the same delay and reaches the app.
    let done = runtime.block_on(client.peer().send_request(call(1))).expect("the uncancelled call");
    assert!(serde_json::to_value(&done).unwrap().to_string().contains("cancellable finished after 1 ms"), "{done:?}");
    assert_eq!(seen_through(&gw, "tapp").started, before.started + 1);
    let _ = runtime.block_on(client.cancel());
    assert_eq!(gw.log_lines().iter().filter(|l| l.contains(sent_before_start)).count(), 1, "{}", gw.logs());
}

/// Processes alive whose command line contains `needle` (a path unique to the test).
fn processes_with_argument(needle: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        if String::from_utf8_lossy(&cmdline).contains(needle) && process_alive(pid) {
            found.push(pid);
        }
    }
    found
}

/// (c) A panic injected in an app's supervisor task: the gateway keeps serving, the app shows
/// failed with an error naming the panic, is restarted, and is supervised again (a crash of the
/// restarted app is noticed and restarted too). No app process is left behind.
#[test]
fn a_panicking_supervisor_is_contained_and_the_app_supervised_again() {
    let variant = build_variant_module();
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("tapp.pid");
    let pid_arg = pid_file.display().to_string();
    write_manifest(&dir.path().join("apps"), "tapp", &stdio_app("tapp", &["--pid-file", &pid_arg]));
    let mut gw = GatewayProcess::start_with(GatewayOptions {
        config: gateway_config(dir.path(), &["supervise:tapp"]),
        module: Some(variant.path.clone()),
        ..Default::default()
    });

    // Failed with the panic as its error (the transition is logged), then Running again.
    let panicked = "its supervisor panicked: injected fault supervise:tapp";
    assert!(gw.wait_for_log(panicked, WAIT), "no contained supervisor panic\n{}", gw.logs());
    let failed = gw
        .log_lines()
        .into_iter()
        .find(|l| l.contains("McpApp 'tapp' running -> failed") && l.contains(panicked));
    assert!(failed.is_some(), "the app must have gone running -> failed naming the panic\n{}", gw.logs());
    let mut app = Value::Null;
    assert!(
        wait_until(WAIT, POLL, || {
            app = health_app(&gw, "tapp");
            app["state"] == "running"
        }),
        "the app was not restarted after its supervisor panicked: {app}\n{}",
        gw.logs()
    );
    assert!(app["lastError"].as_str().unwrap_or_default().contains(panicked), "{app}");
    let (status, body) = gw.get_json("/healthz");
    assert_eq!(status, 200, "{body}");
    assert!(gw.is_running(), "the gateway must stay up\n{}", gw.logs());
    assert!(
        wait_until(WAIT, POLL, || processes_with_argument(&pid_arg).len() == 1),
        "exactly one app process after the restart (the first one died with its supervisor): {:?}",
        processes_with_argument(&pid_arg)
    );
    let restarted_pid = read_pid(&pid_file, WAIT);
    assert!(process_alive(restarted_pid));

    // Supervised again: the restarted app's crash is seen, and it is restarted once more.
    let _ = app_call(&gw, "tapp", "crash", json!({}));
    assert!(
        wait_until(WAIT, POLL, || {
            app = health_app(&gw, "tapp");
            app["state"] == "running" && app["lastError"].as_str().unwrap_or_default().contains("code 4")
        }),
        "the restarted app's crash went unnoticed: {app}\n{}",
        gw.logs()
    );
    assert!(
        wait_until(WAIT, POLL, || {
            let pids = processes_with_argument(&pid_arg);
            pids.len() == 1 && !pids.contains(&restarted_pid)
        }),
        "one new app process after the crash: {:?}",
        processes_with_argument(&pid_arg)
    );
    assert_eq!(gw.log_lines().iter().filter(|l| l.contains(panicked) && l.contains("ERROR")).count(), 1, "the fault fired once");
    let status = gw.terminate().expect("exit status");
    assert!(status.success(), "clean exit after the contained panic, got {status}\n{}", gw.logs());
}
