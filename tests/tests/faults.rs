//! Fault injection with misbehaving apps (issue 16): real `test-app` processes that break in the
//! ways third-party apps do, each behind the real gateway. Every test shows the app's documented
//! end state (`/apps/health`: `state`, `lastError`, `validationErrors`), a healthy app served
//! meanwhile (a call to it succeeds), no caller left hanging (every wait is bounded, and the
//! bounds sit well below the apps' request timeouts where "at once" is the promise), and no
//! process left behind (the apps' own PID files, grandchildren included, and a scan of `/proc`
//! for anything started with this test's folder on its command line).
//!
//! Which test covers which fault of the issue:
//!
//! | fault | test |
//! |---|---|
//! | crash during startup (during `initialize`, during enumeration) | `startup_faults_end_failed_with_a_clear_error_and_no_process_left` (apps `crash-init`, `crash-list`) |
//! | never answering `initialize` | same test (apps `mute`, `mute-http`); in process: `module_apps.rs` `never_ready_app_fails_after_its_startup_timeout_while_others_run` |
//! | exiting the instant it is spawned | same test (apps `instant`, `instant-http`) |
//! | path escapes in `command` / `workingDirectory` | same test (apps `escape-wd`, `escape-abs`: refused, naming the field; `escape-cmd`: runs; `validate` names where it leads); unit test `path_escapes_of_working_directory_are_errors_and_of_command_warnings` in `mcpapp-plugin/src/apps/manifest.rs` |
//! | crash mid-call | `a_crash_mid_call_ends_every_call_at_once_and_leaves_no_grandchild` (the app's own `exit` mid-call); an external SIGKILL mid-call: `module_apps.rs` `killed_app_is_noticed_calls_end_at_once_and_it_restarts`; the crash-loop cap: `module_apps.rs` `crash_loop_stops_at_the_cap_until_an_explicit_start` |
//! | forking a grandchild that ignores SIGTERM | same test (on the crash, and on the gateway's SIGTERM with an app that ignores SIGTERM too); a plain grandchild on SIGKILL of the gateway: `app_processes.rs` `sigkill_of_the_gateway_leaves_no_app_process_or_grandchild`; on graceful shutdown: `graceful_shutdown.rs` |
//! | not reading its stdin (alive, its pipe full) | `an_app_that_stops_reading_its_stdin_gets_a_bounded_queue_and_every_call_ends`; unit test `what_waits_for_an_app_that_does_not_read_is_bounded` in `mcpapp-plugin/src/upstream/short_way/stdio.rs` |
//! | hang (a call that never answers) | `a_hanging_call_ends_with_a_timeout_while_other_calls_are_served`; in process: `module_apps.rs` `hanging_tool_call_returns_error_after_the_request_timeout`; an http app that stops answering altogether (SIGSTOP): `app_processes.rs` `a_launched_http_app_that_stops_answering_is_restarted` |
//! | garbage on stdout | `garbage_between_the_frames_on_stdout_is_skipped` |
//! | a 50 MB result | `a_50_mb_result_reaches_the_caller_over_stdio_and_http` (and a 70 MiB one, over the cap) |
//! | flooding stderr | `a_stderr_flood_is_logged_bounded_and_the_app_keeps_serving` |
//! | closing the HTTP stream midway | `an_http_response_stream_cut_midway_fails_that_call_only` |
//! | restarting on a different port | `an_http_app_that_moves_to_another_port` (launched: relaunched by the gateway; external: Failed until its manifest names the new port) |
//! | exiting while another program holds its port | `a_launched_http_app_is_not_confused_with_another_process_on_its_port` (Failed: what answered is not the app) |

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use gateway_e2e::{describe_output, run_gateway, wait_until, GatewayProcess};
use serde_json::{json, Value};
use support::*;

const POLL: Duration = Duration::from_millis(100);
/// How long anything is waited for that should happen within seconds (a busy 2-core machine).
const WAIT: Duration = Duration::from_secs(30);

fn config_for(dir: &Path) -> Value {
    json!({
        "Gateway": { "AlwaysRequireAuth": false },
        "OpenClaw": {
            "McpApps": { "Enabled": true, "DiscoveryPaths": [dir.join("apps")], "Allow": ["*"] }
        }
    })
}

fn arg(path: &Path) -> String {
    path.display().to_string()
}

fn health_app(gw: &GatewayProcess, id: &str) -> Value {
    let (status, health) = gw.get_json("/apps/health");
    assert_eq!(status, 200, "{health}");
    health["apps"].as_array().and_then(|a| a.iter().find(|x| x["id"] == id).cloned()).unwrap_or(Value::Null)
}

fn wait_state(gw: &GatewayProcess, id: &str, state: &str) -> Value {
    let mut app = Value::Null;
    let reached = wait_until(WAIT, POLL, || {
        app = health_app(gw, id);
        app["state"] == state
    });
    assert!(reached, "app {id} did not reach {state}: {app}\n{}", gw.logs());
    app
}

fn count_logs(gw: &GatewayProcess, needle: &str) -> usize {
    gw.log_lines().iter().filter(|l| l.contains(needle)).count()
}

/// `tool` of `app` through `/apps/mcp/{app}`, bounded by 60 s → the JSON-RPC response.
fn app_call(gw: &GatewayProcess, app: &str, tool: &str, arguments: Value) -> Value {
    try_call(gw.base_url(), &format!("/apps/mcp/{app}"), tool, arguments, Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("{e}\n{}", gw.logs()))
        .0
}

/// A JSON-RPC error or an `isError` result: the text a caller sees.
fn failure_text(response: &Value) -> Option<String> {
    if let Some(error) = response.get("error") {
        return Some(error.to_string());
    }
    (response["result"]["isError"] == true).then(|| response["result"]["content"].to_string())
}

/// The healthy app answers through both MCP endpoints.
fn assert_serves(gw: &GatewayProcess, app: &str, text: &str) {
    let response = app_call(gw, app, "echo", json!({ "text": text }));
    assert_eq!(response["result"]["structuredContent"]["text"], text, "/apps/mcp/{app}: {response}\n{}", gw.logs());
    let (response, _) = try_call(gw.base_url(), "/mcp", &format!("{app}.echo"), json!({ "text": text }), Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("{e}\n{}", gw.logs()));
    assert_eq!(response["result"]["structuredContent"]["text"], text, "/mcp {app}.echo: {response}\n{}", gw.logs());
}

/// Stops the gateway (SIGTERM: exit 0 within its bounds) and checks that no process of this test
/// outlives it: nothing naming `dir`, none of `pids` (grandchildren, which name nothing).
fn stop_and_check_no_process_left(mut gw: GatewayProcess, dir: &Path, pids: &[(String, i32)]) {
    let status = gw.terminate().expect("the gateway's exit status");
    assert_eq!(status.code(), Some(0), "{}", gw.logs());
    let needle = arg(dir);
    let left = |pids: &[(String, i32)]| -> Vec<String> {
        let mut left: Vec<String> = processes_naming(&needle).into_iter().map(|(p, c)| format!("{p} {c}")).collect();
        left.extend(pids.iter().filter(|(_, p)| process_alive(*p)).map(|(what, p)| format!("{p} ({what})")));
        left
    };
    assert!(
        wait_until(Duration::from_secs(10), POLL, || left(pids).is_empty()),
        "processes left behind after the gateway stopped: {:?}\n{}",
        left(pids),
        gw.logs()
    );
}

/// A process this test started, killed when the test ends, whether it passes or fails.
struct KillOnDrop<'a>(&'a mut std::process::Child);

impl Drop for KillOnDrop<'_> {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn with(mut manifest: Value, extra: Value) -> Value {
    for (k, v) in extra.as_object().unwrap() {
        manifest[k] = v.clone();
    }
    manifest
}

/// Apps that fail before they ever run: each ends Failed with an error saying why (or Failed with
/// validation errors naming the field), none is left running, and the healthy app serves.
#[test]
fn startup_faults_end_failed_with_a_clear_error_and_no_process_left() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    let pid = |id: &str| dir.path().join(format!("{id}.pid"));
    let quick = json!({ "startupTimeoutSeconds": 3 });
    let stdio = |id: &str, extra: &[&str]| {
        let mut args = vec!["--pid-file".to_string(), arg(&pid(id))];
        args.extend(extra.iter().map(|s| s.to_string()));
        with(stdio_app(id, &args.iter().map(String::as_str).collect::<Vec<_>>()), quick.clone())
    };
    let http = |id: &str, extra: &[&str]| {
        let mut args = vec!["--pid-file".to_string(), arg(&pid(id))];
        args.extend(extra.iter().map(|s| s.to_string()));
        with(http_app(id, &args.iter().map(String::as_str).collect::<Vec<_>>()), quick.clone())
    };
    write_manifest(&apps, "healthy", &stdio("healthy", &[]));
    write_manifest(&apps, "instant", &stdio("instant", &["--exit-immediately"]));
    write_manifest(&apps, "instant-http", &http("instant-http", &["--exit-immediately"]));
    write_manifest(&apps, "crash-init", &stdio("crash-init", &["--crash-on", "initialize"]));
    write_manifest(&apps, "crash-list", &stdio("crash-list", &["--crash-on", "tools/list"]));
    write_manifest(&apps, "mute", &stdio("mute", &["--never-ready"]));
    write_manifest(&apps, "mute-http", &http("mute-http", &["--never-ready"]));
    // Path escapes: a working folder outside the app's folder is refused; a relative command that
    // climbs out of it (here to the test app's binary, as the example app's manifest reaches the
    // workspace's target folder) runs, with a warning saying where it leads.
    write_manifest(&apps, "escape-wd", &with(stdio("escape-wd", &[]), json!({ "workingDirectory": "../../../../../etc" })));
    write_manifest(&apps, "escape-abs", &with(stdio("escape-abs", &[]), json!({ "workingDirectory": "/etc" })));
    let depth = apps.join("escape-cmd").components().filter(|c| matches!(c, std::path::Component::Normal(_))).count();
    let climbing = format!("{}{}", "../".repeat(depth), arg(&test_app_bin()).trim_start_matches('/'));
    write_manifest(&apps, "escape-cmd", &with(stdio("escape-cmd", &[]), json!({ "command": climbing })));

    let started = Instant::now();
    let gw = GatewayProcess::start(config_for(dir.path()));
    wait_state(&gw, "healthy", "running");
    assert_serves(&gw, "healthy", "first");

    let expect_failed = |id: &str, needles: &[&str]| {
        let app = wait_state(&gw, id, "failed");
        let error = app["lastError"].as_str().unwrap_or_default().to_string();
        for needle in needles {
            assert!(error.contains(needle), "{id}: lastError {error:?} lacks {needle:?}\n{app}");
        }
        error
    };
    let errors = [
        ("instant", expect_failed("instant", &["failed to start", "exited with code 5"])),
        ("instant-http", expect_failed("instant-http", &["failed to start", "exited with code 5", "before accepting connections"])),
        ("crash-init", expect_failed("crash-init", &["failed to start", "exited with code 6"])),
        ("crash-list", expect_failed("crash-list", &["failed to start", "exited with code 6"])),
        ("mute", expect_failed("mute", &["did not become ready within its startup timeout of 3s"])),
        ("mute-http", expect_failed("mute-http", &["did not become ready within its startup timeout of 3s"])),
    ];
    for (id, error) in &errors {
        eprintln!("{id}: {error}");
    }
    // Within the startup timeouts (3 s, in parallel), not their sum or a hang.
    assert!(started.elapsed() < Duration::from_secs(60), "took {:?}", started.elapsed());

    // Path escapes are validation errors naming the field, the value and where it leads.
    for (id, value) in [("escape-wd", "../../../../../etc"), ("escape-abs", "/etc")] {
        let app = health_app(&gw, id);
        assert_eq!(app["state"], "failed", "{app}");
        let errors = app["validationErrors"].to_string();
        assert!(errors.contains("workingDirectory") && errors.contains(value) && errors.contains("outside the app's folder"), "{id}: {app}");
        // The pid file exists (declared writable, SPEC R48) but stays empty.
        assert!(std::fs::read_to_string(pid(id)).unwrap_or_default().is_empty(), "{id} was started");
    }
    wait_state(&gw, "escape-cmd", "running");
    // Where it leads is `validate`'s to say, not a warning at every start (the example app's
    // own command is `../../target/release/…`).
    let expected = format!("command: '{climbing}' resolves to {}, outside the app's folder", arg(&test_app_bin()));
    assert!(gw.find_log(&expected).is_none(), "a warning at start:\n{}", gw.logs());
    let out = run_gateway(&["validate", &apps.join("escape-cmd").display().to_string()], &[]);
    assert!(out.status.success(), "{}", describe_output(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&expected), "{}", describe_output(&out));

    // A caller of a failed app is answered at once, with the app's state.
    for id in ["instant", "crash-list", "mute"] {
        let (response, took) = try_call(gw.base_url(), &format!("/apps/mcp/{id}"), "echo", json!({ "text": "x" }), Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("{e}\n{}", gw.logs()));
        let failure = failure_text(&response).unwrap_or_else(|| panic!("{id}: {response}"));
        assert!(failure.contains("failed") || failure.contains("not running"), "{id}: {failure}");
        assert!(took < Duration::from_secs(10), "{id}: answered after {took:?}");
    }

    // Every process that was started is gone, while the gateway still runs.
    let mut pids = Vec::new();
    for id in ["instant", "instant-http", "crash-init", "crash-list", "mute", "mute-http"] {
        let p = read_pid(&pid(id), Duration::from_secs(5));
        assert!(wait_until(Duration::from_secs(10), POLL, || !process_alive(p)), "{id} (pid {p}) is still running\n{}", gw.logs());
        pids.push((id.to_string(), p));
    }
    assert_serves(&gw, "healthy", "still here");
    let healthy = read_pid(&pid("healthy"), Duration::from_secs(5));
    assert!(process_alive(healthy));
    assert_eq!(count_logs(&gw, "Connecting to McpApp 'healthy'"), 1, "the healthy app was restarted\n{}", gw.logs());
    pids.push(("healthy".into(), healthy));
    pids.push(("escape-cmd".into(), read_pid(&pid("escape-cmd"), Duration::from_secs(5))));
    stop_and_check_no_process_left(gw, dir.path(), &pids);
}

/// An app exits in the middle of a call (while another call to it is in flight): both callers
/// get an error at once (not after the 60 s request timeout), the app shows Failed with the exit
/// code and is restarted, and its grandchild — which ignores SIGTERM — dies with its process
/// group. On the gateway's own SIGTERM, the restarted app ignores SIGTERM too: it is SIGKILLed
/// after the grace period, grandchild included, and the gateway exits 0.
#[test]
fn a_crash_mid_call_ends_every_call_at_once_and_leaves_no_grandchild() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    let app_pid = dir.path().join("crashy.pid");
    let grandchild_pid = dir.path().join("crashy.grandchild");
    let crashy = with(
        stdio_app(
            "crashy",
            &["--pid-file", &arg(&app_pid), "--stubborn-grandchild-pid-file", &arg(&grandchild_pid), "--ignore-sigterm"],
        ),
        json!({ "requestTimeoutSeconds": 60 }),
    );
    write_manifest(&apps, "crashy", &crashy);
    write_manifest(&apps, "healthy", &stdio_app("healthy", &[]));
    let gw = GatewayProcess::start(config_for(dir.path()));
    wait_state(&gw, "crashy", "running");
    wait_state(&gw, "healthy", "running");
    let first = read_pid(&app_pid, Duration::from_secs(10));
    let first_grandchild = read_pid(&grandchild_pid, Duration::from_secs(10));
    // Emptied, not removed: a confined app may write only the files its manifest declares (SPEC R48).
    std::fs::write(&grandchild_pid, "").unwrap();
    assert!(process_alive(first_grandchild));

    let base = gw.base_url().to_string();
    let in_flight = std::thread::spawn(move || try_call(&base, "/apps/mcp/crashy", "slow", json!({ "ms": 60000 }), Duration::from_secs(90)));
    assert!(gw.wait_for_log("test-app: slow 60000 ms started", WAIT), "{}", gw.logs());
    let (crash, crash_took) = try_call(gw.base_url(), "/mcp", "crashy.crash", json!({}), Duration::from_secs(90))
        .unwrap_or_else(|e| panic!("{e}\n{}", gw.logs()));
    let (slow, slow_took) = in_flight.join().unwrap().unwrap_or_else(|e| panic!("{e}\n{}", gw.logs()));
    let crash_text = crash["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert_eq!(crash["result"]["isError"], true, "{crash}");
    assert!(crash_text.starts_with("Error:"), "{crash}");
    assert!(failure_text(&slow).is_some(), "{slow}");
    for (what, took) in [("the crashing call", crash_took), ("the call in flight", slow_took)] {
        assert!(took < Duration::from_secs(30), "{what} ended after {took:?}, as if it waited for its timeout");
    }

    // Meanwhile the healthy app serves; the crashed one shows why it failed and comes back.
    assert_serves(&gw, "healthy", "during the crash");
    let restarted = wait_until(WAIT, POLL, || {
        let app = health_app(&gw, "crashy");
        app["state"] == "running" && app["lastError"].as_str().is_some_and(|e| e.contains("exited with code 4"))
    });
    assert!(restarted, "crashy: {}\n{}", health_app(&gw, "crashy"), gw.logs());
    assert!(gw.find_log("McpApp 'crashy' lost: process exited with code 4").is_some(), "{}", gw.logs());
    let second = read_pid(&app_pid, Duration::from_secs(10));
    assert_ne!(first, second);
    assert!(wait_until(Duration::from_secs(10), POLL, || !process_alive(first)), "the crashed app {first} lives");
    assert!(
        wait_until(Duration::from_secs(10), POLL, || !process_alive(first_grandchild)),
        "the crashed app's grandchild {first_grandchild}, which ignores SIGTERM, outlived it"
    );
    let second_grandchild = read_pid(&grandchild_pid, Duration::from_secs(10));
    assert!(process_alive(second_grandchild));
    let echo = app_call(&gw, "crashy", "echo", json!({ "text": "back" }));
    assert_eq!(echo["result"]["structuredContent"]["text"], "back", "{echo}");

    // The gateway's SIGTERM: app and grandchild both ignore it; both are gone when it has exited.
    let stopping = Instant::now();
    stop_and_check_no_process_left(
        gw,
        dir.path(),
        &[("crashy".into(), second), ("crashy's grandchild".into(), second_grandchild), ("first grandchild".into(), first_grandchild)],
    );
    eprintln!("gateway stopped in {:?} with an app ignoring SIGTERM", stopping.elapsed());
}

/// A call that never answers ends with a timeout error after the app's request timeout; other
/// calls (to the same app and another one) are served meanwhile, and the app stays Running.
#[test]
fn a_hanging_call_ends_with_a_timeout_while_other_calls_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    let pid = dir.path().join("sloth.pid");
    write_manifest(&apps, "sloth", &with(stdio_app("sloth", &["--pid-file", &arg(&pid)]), json!({ "requestTimeoutSeconds": 5 })));
    write_manifest(&apps, "healthy", &stdio_app("healthy", &[]));
    let gw = GatewayProcess::start(config_for(dir.path()));
    wait_state(&gw, "sloth", "running");
    wait_state(&gw, "healthy", "running");

    let base = gw.base_url().to_string();
    let hanging = [("/apps/mcp/sloth", "hang"), ("/mcp", "sloth.hang")].map(|(path, tool)| {
        let base = base.clone();
        std::thread::spawn(move || try_call(&base, path, tool, json!({}), Duration::from_secs(60)))
    });
    // Served while both hang (by ordering: the hanging calls are still running).
    std::thread::sleep(Duration::from_millis(300));
    assert_serves(&gw, "healthy", "while sloth hangs");
    let echo = app_call(&gw, "sloth", "echo", json!({ "text": "not stuck" }));
    assert_eq!(echo["result"]["structuredContent"]["text"], "not stuck", "{echo}");
    assert!(hanging.iter().any(|h| !h.is_finished()), "the hanging calls ended before the others were served");

    for handle in hanging {
        let (response, took) = handle.join().unwrap().unwrap_or_else(|e| panic!("{e}\n{}", gw.logs()));
        let failure = failure_text(&response).unwrap_or_else(|| panic!("a hang answered: {response}"));
        assert!(failure.contains("timed out"), "{failure}");
        assert!(took >= Duration::from_secs(4) && took < Duration::from_secs(40), "{took:?}");
    }
    let app = health_app(&gw, "sloth");
    assert_eq!(app["state"], "running", "{app}");
    assert_eq!(count_logs(&gw, "Connecting to McpApp 'sloth'"), 1, "{}", gw.logs());
    let p = read_pid(&pid, Duration::from_secs(5));
    stop_and_check_no_process_left(gw, dir.path(), &[("sloth".into(), p)]);
}

/// An app that stops reading its stdin while it stays alive (its pipe full): what waits to be
/// written to it is bounded — calls past the bound fail at once, saying the app does not read
/// and how much waits — every call ends, and the healthy app serves meanwhile.
#[test]
fn an_app_that_stops_reading_its_stdin_gets_a_bounded_queue_and_every_call_ends() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    let pid = dir.path().join("deaf.pid");
    let deaf = stdio_app("deaf", &["--stop-reading-on", "tools/call", "--pid-file", &arg(&pid)]);
    write_manifest(&apps, "deaf", &with(deaf, json!({ "requestTimeoutSeconds": 3 })));
    write_manifest(&apps, "healthy", &stdio_app("healthy", &[]));
    let gw = GatewayProcess::start(config_for(dir.path()));
    wait_state(&gw, "deaf", "running");
    wait_state(&gw, "healthy", "running");

    // The first call makes the app stop reading: it is never answered.
    let first = app_call(&gw, "deaf", "echo", json!({ "text": "hello" }));
    let failure = failure_text(&first).unwrap_or_else(|| panic!("answered: {first}"));
    assert!(failure.contains("timed out"), "{failure}");

    // Rounds of 24 concurrent calls of 1 MiB each: the pipe holds 64 KiB, the gateway's queue
    // some 16 MiB more; the calls beyond are refused, naming what waits, which never grows past
    // the bound however many rounds come.
    let base = gw.base_url().to_string();
    let text = "x".repeat(1 << 20);
    let mut refused = Vec::new();
    let mut timed_out = 0;
    for _round in 0..2 {
        let calls: Vec<_> = (0..24)
            .map(|_| {
                let (base, text) = (base.clone(), text.clone());
                std::thread::spawn(move || try_call(&base, "/apps/mcp/deaf", "echo", json!({ "text": text }), Duration::from_secs(60)))
            })
            .collect();
        for call in calls {
            let (response, _) = call.join().unwrap().unwrap_or_else(|e| panic!("{e}\n{}", gw.logs()));
            let failure = failure_text(&response).unwrap_or_else(|| panic!("answered: {response}"));
            if failure.contains("not reading its stdin") {
                refused.push(failure);
            } else {
                assert!(failure.contains("timed out"), "{failure}");
                timed_out += 1;
            }
        }
    }
    assert!(timed_out >= 1 && refused.len() >= 24, "{timed_out} timed out, {} refused", refused.len());
    for failure in &refused {
        let waiting = failure.split("not reading its stdin: ").nth(1).and_then(|rest| rest.split(' ').next());
        let kib: u64 = waiting.and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{failure}"));
        assert!((16 * 1024..=18 * 1024).contains(&kib), "{kib} KiB waiting: {failure}");
    }

    assert_serves(&gw, "healthy", "while deaf does not read");
    let app = health_app(&gw, "deaf");
    assert_eq!(app["state"], "running", "{app}");
    let p = read_pid(&pid, Duration::from_secs(5));
    stop_and_check_no_process_left(gw, dir.path(), &[("deaf".into(), p)]);
}

/// Non-JSON lines (and JSON that is no message for the gateway) between the MCP frames on stdout
/// are skipped: the app starts, every call gets its own answer, and the app is never lost.
#[test]
fn garbage_between_the_frames_on_stdout_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    let pid = dir.path().join("noisy.pid");
    write_manifest(&apps, "noisy", &stdio_app("noisy", &["--pid-file", &arg(&pid), "--garbage-stdout"]));
    write_manifest(&apps, "healthy", &stdio_app("healthy", &[]));
    let gw = GatewayProcess::start(config_for(dir.path()));
    let app = wait_state(&gw, "noisy", "running");
    assert!(app["tools"].as_u64().unwrap_or(0) >= 10, "{app}");
    wait_state(&gw, "healthy", "running");
    for i in 0..25 {
        let text = format!("call {i}");
        let response = app_call(&gw, "noisy", "echo", json!({ "text": text }));
        assert_eq!(response["result"]["structuredContent"]["text"], text, "{response}\n{}", gw.logs());
    }
    assert_serves(&gw, "healthy", "beside the noise");
    let app = health_app(&gw, "noisy");
    assert_eq!(app["state"], "running", "{app}");
    assert_eq!(app["lastError"], Value::Null, "{app}");
    assert_eq!(count_logs(&gw, "Connecting to McpApp 'noisy'"), 1, "{}", gw.logs());
    let p = read_pid(&pid, Duration::from_secs(5));
    stop_and_check_no_process_left(gw, dir.path(), &[("noisy".into(), p)]);
}

/// A 50 MiB tool result reaches the caller whole, from a stdio app and from an http app, and the
/// apps stay Running; the gateway serves others meanwhile. One over the 64 MiB cap is an error.
#[test]
fn a_50_mb_result_reaches_the_caller_over_stdio_and_http() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    let (stdio_pid, http_pid) = (dir.path().join("big.pid"), dir.path().join("bighttp.pid"));
    write_manifest(&apps, "big", &stdio_app("big", &["--pid-file", &arg(&stdio_pid), "--fault-tools"]));
    write_manifest(&apps, "bighttp", &http_app("bighttp", &["--pid-file", &arg(&http_pid), "--fault-tools"]));
    write_manifest(&apps, "healthy", &stdio_app("healthy", &[]));
    let gw = GatewayProcess::start(config_for(dir.path()));
    for id in ["big", "bighttp", "healthy"] {
        wait_state(&gw, id, "running");
    }
    let before = gw.rss_kib() / 1024;
    for id in ["big", "bighttp"] {
        let base = gw.base_url().to_string();
        let path = format!("/apps/mcp/{id}");
        let caller = std::thread::spawn(move || try_call(&base, &path, "big", json!({ "mb": 50 }), Duration::from_secs(60)));
        assert_serves(&gw, "healthy", &format!("while {id} answers 50 MiB"));
        let (response, took) = caller.join().unwrap().unwrap_or_else(|e| panic!("{id}: {e}\n{}", gw.logs()));
        assert_eq!(failure_text(&response), None, "{id}: {}", failure_text(&response).unwrap_or_default());
        let text = response["result"]["content"][0]["text"].as_str().unwrap_or_default();
        assert_eq!(text.len(), 50 * 1024 * 1024, "{id}");
        assert!(text.starts_with("0123456789abcdef"), "{id}");
        eprintln!("{id}: 50 MiB in {took:?}; gateway RSS {before} MiB before, {} MiB after", gw.rss_kib() / 1024);
        let app = health_app(&gw, id);
        assert_eq!(app["state"], "running", "{app}");
        let echo = app_call(&gw, id, "echo", json!({ "text": "small again" }));
        assert_eq!(echo["result"]["structuredContent"]["text"], "small again", "{echo}");
    }
    // Over the 64 MiB cap of one message: an error naming the cap as soon as the answer is seen to
    // be over it (not the request timeout, 10 s here), and the apps keep running.
    for id in ["big", "bighttp"] {
        let (response, took) = try_call(gw.base_url(), &format!("/apps/mcp/{id}"), "big", json!({ "mb": 70 }), Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("{id}: {e}\n{}", gw.logs()));
        let failure = failure_text(&response).unwrap_or_else(|| panic!("{id}: 70 MiB passed the 64 MiB cap"));
        eprintln!("{id}: 70 MiB → {failure} after {took:?}");
        assert!(failure.contains("larger than 67108864 bytes"), "{id}: {failure}");
        let echo = app_call(&gw, id, "echo", json!({ "text": "after the cap" }));
        assert_eq!(echo["result"]["structuredContent"]["text"], "after the cap", "{echo}");
        assert_eq!(health_app(&gw, id)["state"], "running");
    }
    let pids = [("big".to_string(), read_pid(&stdio_pid, Duration::from_secs(5))), ("bighttp".to_string(), read_pid(&http_pid, Duration::from_secs(5)))];
    stop_and_check_no_process_left(gw, dir.path(), &pids);
}

/// An answer over the 64 MiB cap (issue 37): two stdio apps each write one line of 70 MiB, an
/// HTTP app answers 70 MiB. The callers get the error naming the cap, and the gateway's memory
/// comes back within 10 % of its idle size — before, rmcp's line buffer kept the cap's 64 MiB for
/// each stdio app's life (150 MB for two), since the line was passed on to it to be dropped.
#[test]
fn an_answer_over_the_cap_leaves_no_memory_behind() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    let ids = ["over1", "over2", "overhttp"];
    write_manifest(&apps, "over1", &stdio_app("over1", &["--fault-tools"]));
    write_manifest(&apps, "over2", &stdio_app("over2", &["--fault-tools"]));
    write_manifest(&apps, "overhttp", &http_app("overhttp", &["--fault-tools"]));
    let gw = GatewayProcess::start(config_for(dir.path()));
    for id in ids {
        wait_state(&gw, id, "running");
        // Warm the paths a big answer takes: one of 1 MiB, within the cap.
        let response = app_call(&gw, id, "big", json!({ "mb": 1 }));
        assert_eq!(failure_text(&response), None, "{response}");
    }
    let idle = gw.settled_rss_kib();
    for id in ids {
        let response = app_call(&gw, id, "big", json!({ "mb": 70 }));
        let failure = failure_text(&response).unwrap_or_else(|| panic!("{id}: 70 MiB passed the 64 MiB cap"));
        assert!(failure.contains("larger than 67108864 bytes"), "{id}: {failure}");
        let echo = app_call(&gw, id, "echo", json!({ "text": "after the cap" }));
        assert_eq!(echo["result"]["structuredContent"]["text"], "after the cap", "{echo}");
    }
    let (back, after) = gw.rss_back_within(idle, 10);
    println!("{}", json!({ "rss_kib_idle": idle, "rss_kib_after": after }));
    assert!(back, "resident size {idle} KiB idle, still {after} KiB a minute after three answers over the cap");
}

/// An app that floods stderr (many lines, and one line of 16 MiB without a newline) keeps
/// serving while it floods; the gateway logs the flood with long lines cut, its memory stays
/// bounded, and the healthy app serves.
#[test]
fn a_stderr_flood_is_logged_bounded_and_the_app_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    let pid = dir.path().join("loud.pid");
    write_manifest(&apps, "loud", &stdio_app("loud", &["--pid-file", &arg(&pid), "--fault-tools"]));
    write_manifest(&apps, "healthy", &stdio_app("healthy", &[]));
    let gw = GatewayProcess::start(config_for(dir.path()));
    wait_state(&gw, "loud", "running");
    wait_state(&gw, "healthy", "running");
    let before = gw.rss_kib() / 1024;

    for (mb, newlines) in [(16, false), (8, true)] {
        let done_before = count_logs(&gw, "test-app: flood done");
        let response = app_call(&gw, "loud", "flood_stderr", json!({ "mb": mb, "newlines": newlines }));
        assert_eq!(failure_text(&response), None, "{response}");
        // Served while the flood runs.
        let echo = app_call(&gw, "loud", "echo", json!({ "text": "over the noise" }));
        assert_eq!(echo["result"]["structuredContent"]["text"], "over the noise", "{echo}");
        assert_serves(&gw, "healthy", "beside the flood");
        assert!(
            wait_until(Duration::from_secs(60), POLL, || count_logs(&gw, "test-app: flood done") > done_before),
            "the flood ({mb} MiB, newlines {newlines}) did not reach the log's end"
        );
    }
    let longest = gw.log_lines().iter().map(String::len).max().unwrap_or(0);
    assert!(longest < 64 * 1024, "a log line of {longest} bytes: an app's long line must be cut");
    let after = gw.rss_kib() / 1024;
    eprintln!("gateway RSS {before} MiB before the floods, {after} MiB after");
    assert!(after < before + 200, "the gateway grew from {before} MiB to {after} MiB");
    let app = health_app(&gw, "loud");
    assert_eq!(app["state"], "running", "{app}");
    let p = read_pid(&pid, Duration::from_secs(5));
    stop_and_check_no_process_left(gw, dir.path(), &[("loud".into(), p)]);
}

/// An http app cuts a response stream in the middle of an event: that call ends with an error
/// (well before the request timeout), the app stays usable, and other apps are served.
#[test]
fn an_http_response_stream_cut_midway_fails_that_call_only() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    let pid = dir.path().join("cutter.pid");
    write_manifest(
        &apps,
        "cutter",
        &with(http_app("cutter", &["--pid-file", &arg(&pid), "--fault-tools"]), json!({ "requestTimeoutSeconds": 60 })),
    );
    write_manifest(&apps, "healthy", &stdio_app("healthy", &[]));
    let gw = GatewayProcess::start(config_for(dir.path()));
    wait_state(&gw, "cutter", "running");
    wait_state(&gw, "healthy", "running");

    for path in ["/apps/mcp/cutter", "/mcp"] {
        let tool = if path == "/mcp" { "cutter.drop_stream" } else { "drop_stream" };
        let (response, took) = try_call(gw.base_url(), path, tool, json!({}), Duration::from_secs(90))
            .unwrap_or_else(|e| panic!("{e}\n{}", gw.logs()));
        let failure = failure_text(&response).unwrap_or_else(|| panic!("a cut stream answered: {response}"));
        eprintln!("{path}: cut stream → {failure} after {took:?}");
        assert!(took < Duration::from_secs(30), "{path}: the caller waited {took:?}");
        assert_serves(&gw, "healthy", "beside the cut");
        let echo = app_call(&gw, "cutter", "echo", json!({ "text": "after the cut" }));
        assert_eq!(echo["result"]["structuredContent"]["text"], "after the cut", "{echo}\n{}", gw.logs());
    }
    // Only those calls failed: the app's session was never lost, so no restart (three cut streams
    // would otherwise reach the crash-loop cap).
    let app = health_app(&gw, "cutter");
    assert_eq!(app["state"], "running", "{app}");
    assert_eq!(app["lastError"], Value::Null, "{app}");
    assert_eq!(count_logs(&gw, "Connecting to McpApp 'cutter'"), 1, "{}", gw.logs());
    assert!(gw.log_lines().iter().filter(|l| l.contains("test-app: drop_stream")).count() >= 2, "{}", gw.logs());
    let p = read_pid(&pid, Duration::from_secs(5));
    stop_and_check_no_process_left(gw, dir.path(), &[("cutter".into(), p)]);
}

/// An http app that moves to another port. Launched by the gateway: its health checks fail, it is
/// lost, its process (still alive, listening elsewhere) is killed and the gateway launches it
/// again on its manifest's port. Not launched (an external server): it is Failed, stays Failed
/// with an error naming its URL while nothing answers there, and runs again once its manifest
/// names the new port.
#[test]
fn an_http_app_that_moves_to_another_port() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    let mover_pid = dir.path().join("mover.pid");
    let quick_checks = json!({ "healthCheckIntervalSeconds": 1, "startupTimeoutSeconds": 5 });
    write_manifest(
        &apps,
        "mover",
        &{
            let mut mover = with(http_app("mover", &["--pid-file", &arg(&mover_pid), "--fault-tools"]), quick_checks.clone());
            // It binds a port other than its url's: it declares it may (SPEC R48).
            mover["permissions"]["network"] = json!("any");
            mover
        },
    );
    write_manifest(&apps, "healthy", &stdio_app("healthy", &[]));

    // The external app: started here, on a port of its choosing.
    let port_file = dir.path().join("external.port");
    let external_pid_file = dir.path().join("external.pid");
    let mut external = std::process::Command::new(test_app_bin())
        .args(["--http", "127.0.0.1:0", "--fault-tools", "--port-file", &arg(&port_file), "--pid-file", &arg(&external_pid_file)])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let external = KillOnDrop(&mut external);
    let read_port = |path: &Path| -> u16 {
        let mut port = 0;
        assert!(wait_until(Duration::from_secs(10), Duration::from_millis(20), || {
            port = std::fs::read_to_string(path).ok().and_then(|p| p.trim().parse().ok()).unwrap_or(0);
            port != 0
        }));
        port
    };
    let first_port = read_port(&port_file);
    let external_manifest = |port: u16| {
        with(
            json!({ "id": "external", "version": "1.0.0", "transport": "http", "url": format!("http://127.0.0.1:{port}/mcp"),
                    "toolNamePrefix": "external." }),
            quick_checks.clone(),
        )
    };
    write_manifest(&apps, "external", &external_manifest(first_port));

    let gw = GatewayProcess::start(config_for(dir.path()));
    for id in ["mover", "external", "healthy"] {
        wait_state(&gw, id, "running");
    }
    let first_mover = read_pid(&mover_pid, Duration::from_secs(5));

    // Both move.
    std::fs::remove_file(&port_file).unwrap();
    for id in ["mover", "external"] {
        let response = app_call(&gw, id, "move_port", json!({ "port": 0 }));
        assert_eq!(failure_text(&response), None, "{id}: {response}");
    }
    let second_port = read_port(&port_file);
    assert_ne!(second_port, first_port);

    // The launched one is relaunched: a new process, the old one (alive elsewhere) killed.
    let relaunched = wait_until(WAIT, POLL, || {
        let p = std::fs::read_to_string(&mover_pid).ok().and_then(|p| p.trim().parse::<i32>().ok());
        p.is_some_and(|p| p != first_mover) && health_app(&gw, "mover")["state"] == "running"
    });
    assert!(relaunched, "mover: {}\n{}", health_app(&gw, "mover"), gw.logs());
    assert!(gw.find_log("McpApp 'mover' lost: the app stopped answering").is_some(), "{}", gw.logs());
    assert!(wait_until(Duration::from_secs(10), POLL, || !process_alive(first_mover)), "the moved app {first_mover} was left running");
    let echo = app_call(&gw, "mover", "echo", json!({ "text": "relaunched" }));
    assert_eq!(echo["result"]["structuredContent"]["text"], "relaunched", "{echo}");

    // The external one is Failed; its callers are answered at once; the others serve.
    let app = wait_state(&gw, "external", "failed");
    let error = app["lastError"].as_str().unwrap_or_default();
    assert!(error.contains("stopped answering") || error.contains(&format!("127.0.0.1:{first_port}")), "{app}");
    assert_serves(&gw, "healthy", "while external is away");
    // Its restarts (backoff 1 s, 2 s) cannot reach it either: it stays Failed, naming the URL.
    let failed_for_good = wait_until(WAIT, POLL, || {
        let app = health_app(&gw, "external");
        app["state"] == "failed" && app["lastError"].as_str().is_some_and(|e| e.contains(&format!("127.0.0.1:{first_port}")))
    });
    assert!(failed_for_good, "{}\n{}", health_app(&gw, "external"), gw.logs());
    let (response, took) = try_call(gw.base_url(), "/apps/mcp/external", "echo", json!({ "text": "x" }), Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("{e}\n{}", gw.logs()));
    assert!(failure_text(&response).is_some(), "{response}");
    assert!(took < Duration::from_secs(10), "{took:?}");

    // Its manifest names the new port: the watcher reloads it and it runs again.
    write_manifest(&apps, "external", &external_manifest(second_port));
    wait_state(&gw, "external", "running");
    let echo = app_call(&gw, "external", "echo", json!({ "text": "found again" }));
    assert_eq!(echo["result"]["structuredContent"]["text"], "found again", "{echo}");

    let external_pid = read_pid(&external_pid_file, Duration::from_secs(5));
    drop(external);
    let second_mover = read_pid(&mover_pid, Duration::from_secs(5));
    stop_and_check_no_process_left(
        gw,
        dir.path(),
        &[("mover".into(), second_mover), ("first mover".into(), first_mover), ("external (stopped by the test)".into(), external_pid)],
    );
}

/// A launched http app that exits before it listens, while another program holds the port its
/// URL names: the gateway's handshake reaches that program, but the app's process has ended, so
/// what answered is not the app. It ends Failed saying so (its exit, and that another process
/// answers on its URL), and none of the other program's tools pass for the app's.
///
/// The other program is a real `test-app` HTTP server, stopped (SIGSTOP) while the gateway starts:
/// the kernel accepts the gateway's connections, the handshake waits, the app exits meanwhile; then
/// the server is continued and answers the handshake.
#[test]
fn a_launched_http_app_is_not_confused_with_another_process_on_its_port() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    let port_file = dir.path().join("squatter.port");
    let mut squatter = std::process::Command::new(test_app_bin())
        .args(["--http", "127.0.0.1:0", "--port-file", &arg(&port_file)])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut port = 0u16;
    assert!(wait_until(Duration::from_secs(10), Duration::from_millis(20), || {
        port = std::fs::read_to_string(&port_file).ok().and_then(|p| p.trim().parse().ok()).unwrap_or(0);
        port != 0
    }));
    let squatter_pid = squatter.id() as i32;
    let _squatter = KillOnDrop(&mut squatter);
    // SAFETY: a signal to the child this test started and still owns.
    assert_eq!(unsafe { libc::kill(squatter_pid, libc::SIGSTOP) }, 0);

    let app_pid = dir.path().join("late.pid");
    let url = format!("http://127.0.0.1:{port}/mcp");
    let late = with(
        http_app("late", &["--pid-file", &arg(&app_pid), "--exit-immediately"]),
        json!({ "url": url, "startupTimeoutSeconds": 30 }),
    );
    write_manifest(&apps, "late", &late);
    write_manifest(&apps, "healthy", &stdio_app("healthy", &[]));
    let gw = GatewayProcess::start(config_for(dir.path()));
    wait_state(&gw, "healthy", "running");
    let first = read_pid(&app_pid, Duration::from_secs(10));
    assert!(wait_until(Duration::from_secs(10), POLL, || !process_alive(first)), "the app did not exit");
    // The handshake is waiting on the stopped server; let it answer.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(health_app(&gw, "late")["state"], "loaded", "{}", gw.logs());
    // SAFETY: as above.
    unsafe { libc::kill(squatter_pid, libc::SIGCONT) };

    let app = wait_state(&gw, "late", "failed");
    let error = app["lastError"].as_str().unwrap_or_default();
    assert!(error.contains("exited with code 5") && error.contains(&format!("another process answers on {url}")), "{app}\n{}", gw.logs());
    let (status, tools) = gw.get_json("/tools");
    assert_eq!(status, 200, "{tools}");
    assert!(!tools.to_string().contains("late."), "the other program's tools pass for the app's: {tools}");
    assert_serves(&gw, "healthy", "meanwhile");
}
