//! The MCP App module with real apps (issue 3): connections over stdio and Streamable HTTP,
//! enumeration, timeouts, parallel start, supervision, reload, strict schemas and UI recognition.
//!
//! The module is driven through its `host-abi` objects in-process; every app is a real process
//! (`test-app`, the official `server-everything`) speaking MCP through rmcp.

mod support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::*;

const SECS: fn(u64) -> Duration = Duration::from_secs;

fn raw_tools(m: &TestModule, app: &str) -> Vec<Value> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let params = match &cursor {
            Some(c) => json!({ "cursor": c }),
            None => json!({}),
        };
        let r = m.forward(app, &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params}), "");
        all.extend(r["result"]["tools"].as_array().cloned().unwrap_or_default());
        match r["result"]["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    all
}

#[test]
fn stdio_and_http_apps_reach_running_with_their_counts() {
    let m = TestModule::new(json!({}));
    m.add_app("alpha", &stdio_app("alpha", &["--tools-count", "15"]));
    m.add_app("beta", &http_app("beta", &[]));
    let report = m.reload();
    assert_eq!(report["started"], json!(["alpha", "beta"]), "{report}");
    for id in ["alpha", "beta"] {
        let app = m.app(id);
        assert_eq!(app.state().as_str(), "running", "{id}: {}", app.last_error);
        let listed = raw_tools(&m, id);
        assert_eq!(app.tool_count as usize, listed.len(), "{id}: every page of tools is enumerated");
        assert_eq!(app.resource_count, 2, "{id}");
        assert_eq!(app.resource_template_count, 1, "{id}");
        assert_eq!(app.prompt_count, 2, "{id}");
    }
    assert_eq!(m.app("alpha").tool_count, m.app("beta").tool_count + 15, "alpha has 15 extra tools over 2+ pages");
    assert!(m.app("alpha").tool_count > 20);
    assert_eq!(m.app("beta").transport().as_str(), "http");
    assert_eq!(m.app("alpha").version.as_str(), "1.2.3");
    // Lifecycle times and transitions are recorded.
    let transitions = m.detail("alpha")["transitions"].as_array().cloned().unwrap();
    let path: Vec<&str> = transitions.iter().map(|t| t["to"].as_str().unwrap()).collect();
    assert_eq!(path, ["validated", "loaded", "running"]);
    assert!(transitions.iter().all(|t| t["at"].as_u64().unwrap() > 0));
}

#[test]
fn official_server_everything_runs_as_a_stdio_app() {
    let entry = gateway_e2e::repo_root().join("tests/js/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(entry.exists(), "run `npm ci` in tests/js first ({} missing)", entry.display());
    let m = TestModule::new(json!({}));
    m.add_app(
        "everything",
        &json!({
            "id": "everything",
            "transport": "stdio",
            "command": "node",
            "arguments": [entry, "stdio"],
            "toolNamePrefix": "ev.",
            "startupTimeoutSeconds": 30
        }),
    );
    m.reload();
    let app = m.app("everything");
    assert_eq!(app.state().as_str(), "running", "{}", app.last_error);
    assert!(app.tool_count >= 5, "tools enumerated: {}", app.tool_count);
    assert!(app.prompt_count >= 1 && app.resource_count >= 1);
    let tools = m.tools();
    assert!(tools.iter().any(|t| t.qualified_name.as_str() == "ev.echo"), "ev.echo is bridged");
    let out = m.call("everything", "echo", r#"{"message":"hi from the gateway"}"#);
    assert!(!out.is_error && out.text.contains("hi from the gateway"), "{}", out.text);
}

#[test]
fn never_ready_app_fails_after_its_startup_timeout_while_others_run() {
    let m = TestModule::new(json!({}));
    let mut stuck = stdio_app("stuck", &["--never-ready"]);
    stuck["startupTimeoutSeconds"] = json!(2);
    m.add_app("stuck", &stuck);
    let mut web_stuck = http_app("webstuck", &["--never-ready"]);
    web_stuck["startupTimeoutSeconds"] = json!(2);
    m.add_app("webstuck", &web_stuck);
    m.add_app("fine", &stdio_app("fine", &[]));
    let started = Instant::now();
    m.reload();
    let elapsed = started.elapsed();
    assert_eq!(m.state("fine"), "running");
    for id in ["stuck", "webstuck"] {
        let app = m.app(id);
        assert_eq!(app.state().as_str(), "failed");
        assert!(app.last_error.contains("startup timeout of 2s"), "{}", app.last_error);
    }
    // Bounded by the 2 s startup timeout, not hung: the margin is for a loaded machine.
    assert!(elapsed < SECS(30), "startup bounded by the timeout, took {elapsed:?}");
}

#[test]
fn hanging_tool_call_returns_error_after_the_request_timeout() {
    let m = TestModule::new(json!({}));
    let mut app = stdio_app("slowpoke", &[]);
    app["requestTimeoutSeconds"] = json!(2);
    m.add_app("slowpoke", &app);
    m.reload();
    let started = Instant::now();
    let out = m.call("slowpoke", "hang", "{}");
    let elapsed = started.elapsed();
    assert!(out.is_error && out.text.starts_with("Error:"), "{}", out.text);
    assert!(out.text.contains("timed out"), "{}", out.text);
    // Ended by the 2 s request timeout, not hung (a generous margin for a loaded machine).
    assert!(elapsed >= Duration::from_millis(1500) && elapsed < SECS(30), "{elapsed:?}");
    // The app is still usable afterwards.
    let ok = m.call("slowpoke", "echo", r#"{"text":"still here"}"#);
    assert!(!ok.is_error && ok.text.contains("still here"), "{}", ok.text);
}

#[test]
fn ten_slow_apps_start_in_parallel() {
    // Each app takes 3 s to start: one after another they would take 30 s, in parallel about 3 s.
    // The bound sits halfway, so a loaded machine cannot make a parallel start look serial.
    let m = TestModule::new(json!({}));
    for i in 0..10 {
        let id = format!("slow{i}");
        m.add_app(&id, &stdio_app(&id, &["--startup-delay-ms", "3000"]));
    }
    let started = Instant::now();
    m.reload();
    let elapsed = started.elapsed();
    assert!(m.apps().iter().all(|a| a.state().as_str() == "running"));
    assert!(elapsed < SECS(15), "10 apps × 3 s must start in parallel (serially they take 30 s), took {elapsed:?}");
}

#[test]
fn killed_app_is_noticed_calls_end_at_once_and_it_restarts() {
    let m = TestModule::new(json!({}));
    let pid_file = m.dir.path().join("victim.pid");
    let pid_arg = pid_file.display().to_string();
    m.add_app("victim", &stdio_app("victim", &["--pid-file", &pid_arg]));
    m.reload();
    assert_eq!(m.state("victim"), "running");
    let first_pid = read_pid(&pid_file, SECS(5));
    // Emptied, not removed: a confined app may write only the files its manifest declares (SPEC R48).
    std::fs::write(&pid_file, "").unwrap();

    // A call in flight when the app dies ends promptly with Error:.
    let pending = m.call_async("victim", "slow", r#"{"ms": 60000}"#, "{}");
    let waiter = std::thread::spawn(move || {
        let started = Instant::now();
        (futures::executor::block_on(pending), started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(300));
    unsafe { libc::kill(first_pid, libc::SIGKILL) };
    let (outcome, waited) = waiter.join().unwrap();
    assert!(outcome.is_error && outcome.text.starts_with("Error:"), "{}", outcome.text);
    assert!(waited < SECS(5), "in-flight call ended at once, took {waited:?}");

    // Failed with lastError, tools withdrawn, then restarted with a new process.
    // The call may end (its pipe closed) a moment before the supervisor reports the loss.
    assert!(
        gateway_e2e::wait_until(SECS(5), Duration::from_millis(20), || m
            .events_of("app.state_changed", "victim")
            .iter()
            .any(|e| e["to"] == "failed")),
        "the loss was reported"
    );
    assert!(m.wait_state("victim", "running", SECS(15)), "restarted");
    let second_pid = read_pid(&pid_file, SECS(5));
    assert_ne!(first_pid, second_pid);
    let failed = m.events_of("app.state_changed", "victim").into_iter().find(|e| e["to"] == "failed").unwrap();
    assert!(failed["lastError"].as_str().unwrap().contains("killed by signal 9"), "{failed}");
    assert!(m.events_of("tools.changed", "victim").len() >= 3, "started, withdrawn, restored");
    assert!(!process_alive(first_pid));
}

#[test]
fn crash_loop_stops_at_the_cap_until_an_explicit_start() {
    let m = TestModule::new(json!({}));
    m.add_app("crashy", &stdio_app("crashy", &["--exit-after-ms", "400"]));
    m.reload();
    // 3 crashes within the window: restarts after 1 s and 2 s, then held.
    let deadline = Instant::now() + SECS(30);
    while Instant::now() < deadline && m.detail("crashy")["crashLoopHeld"] != json!(true) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(m.detail("crashy")["crashLoopHeld"], json!(true), "crash loop cap reached");
    let starts = m.events_of("app.state_changed", "crashy").iter().filter(|e| e["to"] == "running").count();
    assert_eq!(starts, 3, "first start plus two restarts");
    std::thread::sleep(SECS(3));
    assert_eq!(m.state("crashy"), "failed", "stays failed while held");
    let starts_after = m.events_of("app.state_changed", "crashy").iter().filter(|e| e["to"] == "running").count();
    assert_eq!(starts_after, 3, "no restart while held");
    assert!(m.app("crashy").last_error.contains("exited with code 3"));
    // An explicit start clears the hold.
    let d = futures::executor::block_on(m.instance.start_app("crashy".into())).unwrap();
    assert_eq!(d.state().as_str(), "running");
    assert_eq!(m.detail("crashy")["crashLoopHeld"], json!(false));
}

#[test]
fn reload_adds_removes_and_restarts_only_changed_apps() {
    let m = TestModule::new(json!({}));
    let pid = |name: &str| m.dir.path().join(format!("{name}.pid"));
    let app_with_pid = |id: &str, extra: &[&str]| {
        let file = pid(id).display().to_string();
        let mut args = vec!["--pid-file", file.as_str()];
        args.extend_from_slice(extra);
        stdio_app(id, &args)
    };
    m.add_app("keep", &app_with_pid("keep", &[]));
    m.add_app("change", &app_with_pid("change", &[]));
    m.add_app("remove", &app_with_pid("remove", &[]));
    m.reload();
    let keep_pid = read_pid(&pid("keep"), SECS(5));
    let change_pid = read_pid(&pid("change"), SECS(5));
    let remove_pid = read_pid(&pid("remove"), SECS(5));
    // Emptied, not removed: a confined app may write only the files its manifest declares (SPEC R48).
    std::fs::write(pid("change"), "").unwrap();

    // Edit on disk: the file watcher reloads without any call.
    let mut changed = app_with_pid("change", &["--tools-count", "3"]);
    changed["version"] = json!("9.9.9");
    m.add_app("change", &changed);
    std::fs::remove_dir_all(m.apps_dir().join("remove")).unwrap();
    m.add_app("added", &app_with_pid("added", &[]));

    assert!(m.wait_state("added", "running", SECS(20)), "new app started by the watcher");
    assert!(
        gateway_e2e::wait_until(SECS(20), Duration::from_millis(100), || m.apps().iter().all(|a| a.id.as_str() != "remove")),
        "removed app dropped"
    );
    assert!(gateway_e2e::wait_until(SECS(20), Duration::from_millis(100), || m.app("change").version.as_str() == "9.9.9"));
    assert!(m.wait_state("change", "running", SECS(20)));
    let new_change_pid = read_pid(&pid("change"), SECS(5));
    assert_ne!(new_change_pid, change_pid, "changed app restarted");
    assert!(!process_alive(change_pid), "old process of the changed app is gone");
    assert!(!process_alive(remove_pid), "removed app's process is gone");
    assert_eq!(read_pid(&pid("keep"), SECS(1)), keep_pid);
    assert!(process_alive(keep_pid), "unchanged app kept its process");
    assert_eq!(m.state("keep"), "running");
    // An explicit reload with nothing changed leaves everything alone.
    let report = m.reload();
    assert_eq!(report["started"], json!([]));
    assert_eq!(report["restarted"], json!([]));
    assert_eq!(report["stopped"], json!([]));
}

/// A discovery folder that does not exist when the gateway starts is waited for: once it is
/// made (here two levels deep, one level at a time) the apps put in it are discovered and started
/// without a reload call; files appearing next to it in its parent start nothing.
#[test]
fn a_discovery_folder_made_after_the_start_is_watched_once_it_exists() {
    let dir = tempfile::tempdir().unwrap();
    let m = TestModule::with_config(
        dir,
        json!({ "McpApps": { "Enabled": true, "DiscoveryPaths": ["./later/apps"], "Allow": ["*"] } }),
    );
    let report = m.reload();
    assert_eq!(report["started"], json!([]), "{report}");
    let later = m.dir.path().join("later");
    std::fs::write(m.dir.path().join("unrelated.txt"), "x").unwrap();
    std::fs::create_dir(&later).unwrap();
    std::thread::sleep(Duration::from_millis(800));
    std::fs::create_dir(later.join("apps")).unwrap();
    write_manifest(&later.join("apps"), "late", &stdio_app("late", &[]));
    assert!(m.wait_state("late", "running", SECS(20)), "the app in the new folder started by the watcher: {:?}", m.apps().iter().map(|a| a.id.to_string()).collect::<Vec<_>>());
    // From now on the folder is watched like any other: a second app is picked up too.
    write_manifest(&later.join("apps"), "later", &stdio_app("later", &[]));
    assert!(m.wait_state("later", "running", SECS(20)), "a second app in the watched folder");
}

/// The configuration re-read with other `DiscoveryPaths` (an admin reload): the watcher follows
/// the new folders, so an app put in one later is started without another reload.
#[test]
fn the_watcher_follows_new_discovery_paths_of_a_reread_configuration() {
    let m = TestModule::new(json!({}));
    m.reload();
    let other = m.dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let config = json!({ "McpApps": { "Enabled": true, "DiscoveryPaths": ["./other"], "Allow": ["*"] } });
    let params = json!({ "config": config, "explicit": true }).to_string();
    futures::executor::block_on(m.instance.invoke("registry.reconfigure".into(), params.into())).unwrap();
    write_manifest(&other, "moved", &stdio_app("moved", &[]));
    assert!(m.wait_state("moved", "running", SECS(20)), "the app in the new folder started by the watcher");
}

#[test]
fn strict_schema_skips_schemaless_tools_and_the_switch_keeps_them() {
    let strict = TestModule::new(json!({}));
    strict.add_app("loose", &stdio_app("loose", &["--schemaless"]));
    strict.reload();
    let names: Vec<String> = strict.tools().iter().map(|t| t.name.to_string()).collect();
    assert!(names.contains(&"echo".to_string()));
    assert!(!names.contains(&"no_schema".to_string()) && !names.contains(&"string_schema".to_string()));
    let skipped = strict.detail("loose")["skippedTools"].clone();
    let skipped_names: Vec<&str> = skipped.as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(skipped_names, ["no_schema", "string_schema"], "{skipped}");

    let relaxed = TestModule::new(json!({ "McpCompatibility": { "AllowRelaxedInputSchemaValidation": true } }));
    relaxed.add_app("loose", &stdio_app("loose", &["--schemaless"]));
    relaxed.reload();
    let tools = relaxed.tools();
    let kept = tools.iter().find(|t| t.name.as_str() == "no_schema").expect("kept when relaxed");
    assert_eq!(kept.input_schema_json.as_str(), r#"{"type":"object"}"#);
    assert!(tools.iter().any(|t| t.name.as_str() == "string_schema"));
}

#[test]
fn ui_resources_and_tool_ui_links_are_recognised() {
    let m = TestModule::new(json!({}));
    let mut app = stdio_app("uiapp", &[]);
    app["hasUi"] = json!(true);
    app["uiResourceUri"] = json!("ui://test-app/app.html");
    m.add_app("uiapp", &app);
    m.reload();
    let d = m.app("uiapp");
    assert!(d.has_ui);
    assert_eq!(d.ui_resource_uri.as_str(), "ui://test-app/app.html");
    assert_eq!(m.detail("uiapp")["uiResources"], json!(["ui://test-app/app.html"]));
    let tools = m.tools();
    let find = |n: &str| tools.iter().find(|t| t.name.as_str() == n).unwrap_or_else(|| panic!("{n}"));
    assert_eq!(find("show_ui").ui_resource_uri.as_str(), "ui://test-app/app.html");
    assert!(find("show_ui").visible_to_model && find("show_ui").visible_to_app);
    assert!(!find("app_only").visible_to_model && find("app_only").visible_to_app);
    assert!(find("model_only").visible_to_model && !find("model_only").visible_to_app);
    assert_eq!(find("echo").ui_resource_uri.as_str(), "");
    assert_eq!(find("echo").qualified_name.as_str(), "uiapp.echo");
}

#[test]
fn client_advertises_the_mcp_apps_extension_and_only_manifest_headers_reach_http_apps() {
    let m = TestModule::new(json!({}));
    let mut app = http_app("hdr", &["--env-echo", "APP_SETTING"]);
    app["headers"] = json!({ "X-App-Key": "k-123" });
    app["environment"] = json!({ "APP_SETTING": "from-manifest" });
    m.add_app("hdr", &app);
    m.reload();
    assert_eq!(m.state("hdr"), "running", "{}", m.app("hdr").last_error);
    let env = m.call("hdr", "env", "{}");
    assert!(env.text.contains("from-manifest"), "{}", env.text);
    let info: Value = serde_json::from_str(m.call("hdr", "client_info", "{}").structured_content_json.as_str()).unwrap();
    assert_eq!(
        info["capabilities"]["extensions"]["io.modelcontextprotocol/ui"]["mimeTypes"],
        json!(["text/html;profile=mcp-app"]),
        "{info}"
    );
    assert_eq!(info["clientInfo"]["name"], "openclaw-gateway");
    assert_eq!(info["headers"]["x-app-key"], "k-123", "manifest headers are sent: {info}");
    let headers = info["headers"].as_object().unwrap();
    assert!(!headers.contains_key("authorization") && !headers.contains_key("cookie"), "nothing else of ours: {info}");
    // The working directory defaults to the manifest's folder.
    assert!(env.text.contains(&m.apps_dir().join("hdr").display().to_string()), "{}", env.text);
}

#[test]
fn invalid_arguments_and_remote_errors_become_error_text() {
    let m = TestModule::new(json!({}));
    m.add_app("errs", &stdio_app("errs", &[]));
    m.reload();
    // Arguments are the host's to read (`tools/arguments.rs`); a 2.0 host's `call_tool` hands
    // them over as text, and the module refuses text that is no JSON object.
    let request = host_abi::ToolCallRequest {
        call_id: 77_001,
        app_id: "errs".into(),
        tool_name: "echo".into(),
        arguments_json: "{not json".into(),
        meta_json: "".into(),
        extra_json: "{}".into(),
    };
    let bad_json = futures::executor::block_on(m.instance.call_tool(request)).unwrap();
    assert!(bad_json.is_error && bad_json.text.starts_with("Error: invalid arguments for tool 'echo'"), "{}", bad_json.text);
    let tool_error = m.call("errs", "fail", r#"{"message":"no such store"}"#);
    assert!(tool_error.is_error && tool_error.text.starts_with("Error: ") && tool_error.text.contains("no such store"));
    let protocol_error = m.call("errs", "protocol_error", "{}");
    assert!(protocol_error.is_error && protocol_error.text.starts_with("Error:"), "{}", protocol_error.text);
    let structured = m.call("errs", "echo", r#"{"text":"abc"}"#);
    assert_eq!(serde_json::from_str::<Value>(structured.structured_content_json.as_str()).unwrap()["length"], 3);
    let ui = m.call("errs", "show_ui", "{}");
    assert!(ui.structured_content_json.is_empty(), "withheld from the model for UI tools");
    assert_eq!(ui.ui_resource_uri.as_str(), "ui://test-app/app.html");
    assert!(ui.raw_result_json.contains("structuredContent"), "kept for the browser");
}

/// An http app the gateway does not launch (no `command`): started here, so the test can kill it
/// and bring it back on the same port.
fn external_http_app(port: u16, pid_file: &std::path::Path) -> std::process::Child {
    std::process::Command::new(test_app_bin())
        .args(["--http", &format!("127.0.0.1:{port}"), "--pid-file", &pid_file.display().to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

fn wait_port(port: u16) {
    assert!(
        gateway_e2e::wait_until(SECS(10), Duration::from_millis(20), || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()),
        "port {port} never opened"
    );
}

#[test]
fn http_app_that_stops_answering_fails_and_is_reconnected_when_back() {
    let m = TestModule::new(json!({}));
    let port = gateway_e2e::free_port();
    let pid_file = m.dir.path().join("ext.pid");
    let mut server = external_http_app(port, &pid_file);
    wait_port(port);
    m.add_app(
        "ext",
        &json!({ "id": "ext", "transport": "http", "url": format!("http://127.0.0.1:{port}/mcp"), "requestTimeoutSeconds": 5 }),
    );
    m.reload();
    assert_eq!(m.state("ext"), "running", "{}", m.app("ext").last_error);

    // The server restarts quickly (between health pings): the next call re-initializes the
    // forgotten session transparently instead of failing (the short way, answered 404, hands
    // the call to rmcp's, which re-initializes).
    server.kill().unwrap();
    server.wait().unwrap();
    let mut server = external_http_app(port, &pid_file);
    wait_port(port);
    let out = m.call("ext", "echo", r#"{"text":"after restart"}"#);
    assert!(!out.is_error && out.text.contains("after restart"), "transparent re-initialization: {}", out.text);

    // The server goes away for good: noticed by the health pings, Failed with lastError.
    server.kill().unwrap();
    server.wait().unwrap();
    assert!(m.wait_state("ext", "failed", SECS(30)), "an http app that stops answering goes Failed");
    assert!(!m.app("ext").last_error.is_empty());
    assert!(m.tools().iter().all(|t| t.app_id.as_str() != "ext"), "its tools are withdrawn");

    // It comes back: the supervisor's restart with backoff reconnects.
    let mut server = external_http_app(port, &pid_file);
    wait_port(port);
    assert!(m.wait_state("ext", "running", SECS(30)), "reconnected after backoff");
    server.kill().unwrap();
    let _ = server.wait();
}

#[test]
fn default_configuration_runs_grocery_inventory() {
    // The README's first command: no --config, run from the repository root.
    let root = gateway_e2e::repo_root();
    let mut child = std::process::Command::new(gateway_e2e::gateway_bin())
        .args(["--urls", "http://127.0.0.1:0"])
        .current_dir(&root)
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + SECS(60);
    let mut seen = Vec::new();
    let connected = loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => {
                let done = line.contains("McpApp 'grocery-inventory' connected: 14 tools, 3 resources, 3 prompts");
                seen.push(line);
                if done {
                    break true;
                }
            }
            Err(_) if Instant::now() > deadline => break false,
            Err(_) => {}
        }
    };
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(connected, "grocery-inventory did not connect:\n{}", seen.join("\n"));
    assert!(status.success());
}

/// A module running two test-apps made by `app`: "old" of the initialize era, "new" of 2026-07-28
/// (with the tool `regional`, whose argument `region` is mirrored into a header).
fn old_and_new_apps(app: fn(&str, &[&str]) -> Value) -> TestModule {
    let m = TestModule::new(json!({}));
    m.add_app("old", &app("old", &[]));
    let mut modern = app("new", &["--header-tool"]);
    modern["protocolVersion"] = json!("2026-07-28");
    m.add_app("new", &modern);
    m.reload();
    for id in ["old", "new"] {
        assert!(m.wait_state(id, "running", SECS(20)), "{id}: {}", m.app(id).last_error);
    }
    m
}

/// What the test-app's `client_info` tool saw of its call (request id, headers, client).
fn client_info(m: &TestModule, app: &str) -> Value {
    let outcome = m.call(app, "client_info", "{}");
    assert!(!outcome.is_error, "{app}: {}", outcome.text);
    serde_json::from_str(outcome.structured_content_json.as_str()).unwrap()
}

/// The session's state a tool call to an app of the 2026-07-28 revision carries, as rmcp would
/// send it: the revision, the gateway's client info and capabilities in its `_meta`.
fn assert_enveloped(seen: &Value) {
    assert_eq!(seen["protocolVersion"], "2026-07-28", "{seen}");
    assert_eq!(seen["clientInfo"]["name"], "openclaw-gateway", "{seen}");
    assert!(seen["capabilities"]["extensions"].is_object(), "the gateway's capabilities: {seen}");
}

/// A tool call to an HTTP app goes the short way (`upstream/short_way/http.rs`): on the session rmcp
/// opened, with the headers rmcp sends on it, under a request id of its own (a string, so it
/// never meets rmcp's numbers). To an app of the 2026-07-28 revision it goes without a session,
/// with the revision's envelope and per-message headers, as rmcp's requests do; a call of a tool
/// that mirrors an argument into a header (`x-mcp-header`) is left to rmcp, which writes it.
#[test]
fn tool_calls_to_an_http_app_go_the_short_way_on_rmcps_session() {
    let m = old_and_new_apps(http_app);
    let info = |app: &str| client_info(&m, app);
    let first = info("old");
    let id = first["requestId"].as_str().unwrap_or_else(|| panic!("not the short way's id: {first}"));
    assert!(id.starts_with("gw-"), "{first}");
    let headers = &first["headers"];
    assert!(headers["mcp-session-id"].as_str().is_some_and(|s| !s.is_empty()), "rmcp's session: {headers}");
    assert_eq!(headers["mcp-protocol-version"], first["protocolVersion"], "the negotiated revision: {headers}");
    assert!(headers["accept"].as_str().is_some_and(|a| a.contains("text/event-stream") && a.contains("application/json")), "{headers}");
    let second = info("old");
    assert_ne!(second["requestId"], first["requestId"], "each call its own id");
    assert_eq!(second["headers"]["mcp-session-id"], headers["mcp-session-id"], "one session");
    // What rmcp's way would have answered, seen by the caller: the tool's own results and errors.
    let echo = m.call("old", "echo", r#"{"text":"short"}"#);
    assert!(!echo.is_error && echo.text.as_str().contains("echo: short"), "{}", echo.text);
    let failed = m.call("old", "fail", r#"{"message":"boom"}"#);
    assert!(failed.is_error && failed.text.as_str().contains("boom"), "{}", failed.text);

    let modern = info("new");
    let id = modern["requestId"].as_str().unwrap_or_else(|| panic!("not the short way's id: {modern}"));
    assert!(id.starts_with("gw-"), "{modern}");
    assert_enveloped(&modern);
    let headers = &modern["headers"];
    assert_eq!(headers["mcp-protocol-version"], "2026-07-28", "{headers}");
    assert_eq!(headers["mcp-method"], "tools/call", "{headers}");
    assert_eq!(headers["mcp-name"], "client_info", "{headers}");
    assert!(headers.get("mcp-session-id").is_none(), "a stateless session: {headers}");
    assert_ne!(info("new")["requestId"], modern["requestId"], "each call its own id");
    let echo = m.call("new", "echo", r#"{"text":"short"}"#);
    assert!(!echo.is_error && echo.text.as_str().contains("echo: short"), "{}", echo.text);
    let failed = m.call("new", "fail", r#"{"message":"boom"}"#);
    assert!(failed.is_error && failed.text.as_str().contains("boom"), "{}", failed.text);

    let regional = m.call("new", "regional", r#"{"region":"eu-west"}"#);
    assert!(!regional.is_error, "{}", regional.text);
    let regional: Value = serde_json::from_str(regional.structured_content_json.as_str()).unwrap();
    assert!(regional["requestId"].is_number(), "rmcp's way for a tool bound to headers: {regional}");
    assert_eq!(regional["headers"]["mcp-param-region"], "eu-west", "{regional}");
}

/// What the test-app saw of a read of `uri` (its `test://request…` resource: the request's id
/// and headers), as a browser's `resources/read` reaches the module.
fn read_seen(m: &TestModule, app: &str, uri: &str) -> Value {
    let answer = m.forward(app, &json!({ "jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": { "uri": uri } }), "");
    let text = answer["result"]["contents"][0]["text"].as_str().unwrap_or_else(|| panic!("{app} {uri}: {answer}"));
    assert_eq!(answer["result"]["contents"][0]["uri"], uri, "{answer}");
    serde_json::from_str(text).unwrap()
}

/// A resource read goes the short way too — an app's UI is one, hundreds of KiB that rmcp's way
/// would parse into its types and write out again: under the short way's id, over HTTP on
/// rmcp's session, and to an app of the 2026-07-28 revision with the envelope and the headers
/// rmcp sends (`Mcp-Method`, and the URI in `Mcp-Name`). A URI rmcp would encode in its header
/// is left to rmcp; over stdio, reads take the short way as calls do.
#[test]
fn resource_reads_go_the_short_way() {
    let m = old_and_new_apps(http_app);
    let old = read_seen(&m, "old", "test://request");
    assert!(old["requestId"].as_str().is_some_and(|id| id.starts_with("gw-")), "the short way's id: {old}");
    assert!(old["headers"]["mcp-session-id"].as_str().is_some_and(|s| !s.is_empty()), "rmcp's session: {old}");
    let modern = read_seen(&m, "new", "test://request?of=ui");
    assert!(modern["requestId"].as_str().is_some_and(|id| id.starts_with("gw-")), "the short way's id: {modern}");
    assert_enveloped(&modern);
    assert_eq!(modern["headers"]["mcp-method"], "resources/read", "{modern}");
    assert_eq!(modern["headers"]["mcp-name"], "test://request?of=ui", "{modern}");
    let encoded = read_seen(&m, "new", "test://request?of=a b");
    assert!(encoded["requestId"].is_number(), "rmcp's way for a URI it encodes: {encoded}");
    assert_eq!(encoded["headers"]["mcp-method"], "resources/read", "{encoded}");
    drop(m);

    let m = old_and_new_apps(stdio_app);
    for app in ["old", "new"] {
        let seen = read_seen(&m, app, "test://request");
        assert!(seen["requestId"].as_str().is_some_and(|id| id.starts_with("gw-")), "{app}: the short way's id: {seen}");
    }
    assert_enveloped(&read_seen(&m, "new", "test://request"));
}

/// A tool call to a stdio app of an initialize-era revision goes the short way too
/// (`upstream/short_way/stdio.rs`): its line is written to the app's stdin under the short way's id
/// and its answer taken off the app's stdout before rmcp reads it, while rmcp keeps the rest of
/// the session (the listings, the app's notifications) on the same pipes. Many calls at once, the
/// short way's and rmcp's mixed, each get their own answer. A call to an app of the 2026-07-28
/// revision carries the revision's envelope, as rmcp's requests do.
#[test]
fn tool_calls_to_a_stdio_app_go_the_short_way_beside_rmcps_session() {
    let m = old_and_new_apps(stdio_app);
    let info = |app: &str| client_info(&m, app);
    let first = info("old");
    let id = first["requestId"].as_str().unwrap_or_else(|| panic!("not the short way's id: {first}"));
    assert!(id.starts_with("gw-"), "{first}");
    assert_eq!(first["clientInfo"]["name"], "openclaw-gateway", "rmcp's session, initialised by the gateway: {first}");
    assert_ne!(info("old")["requestId"], first["requestId"], "each call its own id");
    let failed = m.call("old", "fail", r#"{"message":"boom"}"#);
    assert!(failed.is_error && failed.text.as_str().contains("boom"), "{}", failed.text);

    std::thread::scope(|s| {
        let calls: Vec<_> = (0..32)
            .map(|i| {
                let m = &m;
                s.spawn(move || {
                    if i % 4 == 0 {
                        // rmcp's own requests on the same pipes meanwhile.
                        assert!(!raw_tools(m, "old").is_empty());
                        return;
                    }
                    let text = format!("call {i} {}", "x".repeat(i * 1000));
                    let echo = m.call("old", "echo", &json!({ "text": text }).to_string());
                    assert!(!echo.is_error && echo.text.as_str().contains(&text), "call {i}: {}", &echo.text.as_str()[..80.min(echo.text.len())]);
                })
            })
            .collect();
        for call in calls {
            call.join().unwrap();
        }
    });

    let modern = info("new");
    let id = modern["requestId"].as_str().unwrap_or_else(|| panic!("not the short way's id: {modern}"));
    assert!(id.starts_with("gw-"), "{modern}");
    assert_enveloped(&modern);
    let echo = m.call("new", "echo", r#"{"text":"short"}"#);
    assert!(!echo.is_error && echo.text.as_str().contains("echo: short"), "{}", echo.text);
}

/// An HTTP app that ends a tool call's response stream before the answer (a load balancer's
/// idle cut, a restart behind a proxy): the short way resumes it as the MCP transport says —
/// a GET on the session with `Last-Event-ID` — and the caller gets the answer as if nothing
/// happened. The app is a minimal Streamable HTTP server written here (rmcp's server gives a
/// handler no way to cut its own stream).
#[test]
fn a_response_stream_the_app_cuts_short_is_resumed_by_the_short_way() {
    let (server, m) = hand_written_app("cut", Ending::CutBeforeTheAnswer);
    for round in 1..=2 {
        let outcome = m.call("cut", "echo", r#"{"text":"after the cut"}"#);
        assert!(!outcome.is_error, "round {round}: {}", outcome.text);
        assert!(outcome.text.as_str().contains("resumed: after the cut"), "round {round}: {}", outcome.text);
    }
    let seen = server.seen();
    let calls: Vec<&String> = seen.iter().filter(|s| s.starts_with("POST tools/call")).collect();
    assert_eq!(calls.len(), 2, "{seen:?}");
    assert!(calls.iter().all(|c| c.contains("id gw-")), "the short way's calls: {seen:?}");
    let resumes: Vec<&String> = seen.iter().filter(|s| s.starts_with("GET last-event-id")).collect();
    assert_eq!(resumes.len(), 2, "one resumption per call: {seen:?}");
    assert!(resumes.iter().all(|r| r.ends_with("session s-1")), "on the session: {seen:?}");
}

/// A response stream the app ends only after a pause that follows the answer (its closing chunk
/// then comes in a TCP segment of its own): the short way reads it to its end, off the call's
/// path, so the connection goes back to the pool. Dropped before its end, as it used to be,
/// every such call closed its connection and the next one opened a new one.
#[test]
fn an_answered_response_stream_is_read_to_its_end_and_its_connection_reused() {
    let (server, m) = hand_written_app("slow-end", Ending::PauseAfterTheAnswer);
    for round in 1..=5 {
        let outcome = m.call("slow-end", "echo", &json!({ "text": format!("round {round}") }).to_string());
        assert!(!outcome.is_error && outcome.text.as_str().contains(&format!("answered: round {round}")), "round {round}: {}", outcome.text);
        // Long after the stream's end: its connection is idle in the pool again.
        std::thread::sleep(END_PAUSE * 10);
    }
    let seen = server.seen();
    let calls: Vec<&String> = seen.iter().filter(|s| s.starts_with("POST tools/call")).collect();
    assert_eq!(calls.len(), 5, "{seen:?}");
    assert!(calls.iter().all(|c| c.contains("id gw-")), "the short way's calls: {seen:?}");
    let connections: std::collections::BTreeSet<&str> = calls.iter().filter_map(|c| c.rsplit_once(" from ").map(|(_, peer)| peer)).collect();
    assert_eq!(connections.len(), 1, "five calls one after the other on one connection: {seen:?}");
}

/// A module running a [`HandWrittenApp`] as the http app `id`, once it is running.
fn hand_written_app(id: &str, ending: Ending) -> (HandWrittenApp, TestModule) {
    let server = HandWrittenApp::start(ending);
    let m = TestModule::new(json!({}));
    m.add_app(
        id,
        &json!({
            "id": id, "version": "1.0.0", "transport": "http", "url": server.url,
            "toolNamePrefix": format!("{id}."), "startupTimeoutSeconds": 15, "requestTimeoutSeconds": 15
        }),
    );
    m.reload();
    assert!(m.wait_state(id, "running", SECS(20)), "{}", m.app(id).last_error);
    (server, m)
}

/// How [`HandWrittenApp`] ends a `tools/call`'s response stream.
#[derive(Clone, Copy)]
enum Ending {
    /// One event with an id and no data (a priming event), then the end; a GET with that id as
    /// `Last-Event-ID` gets the call's answer.
    CutBeforeTheAnswer,
    /// The answer, then the end [`END_PAUSE`] later.
    PauseAfterTheAnswer,
}

const END_PAUSE: Duration = Duration::from_millis(100);

/// The app of [`a_response_stream_the_app_cuts_short_is_resumed_by_the_short_way`] and
/// [`an_answered_response_stream_is_read_to_its_end_and_its_connection_reused`], a minimal
/// Streamable HTTP server (rmcp's server gives a handler no say over its stream): answers
/// `initialize` (session `s-1`) and `tools/list` with JSON, and a `tools/call` with an event
/// stream that ends as its [`Ending`] says. `seen` records each request with the peer it came from.
struct HandWrittenApp {
    url: String,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    _runtime: tokio::runtime::Runtime,
}

impl HandWrittenApp {
    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    fn start(ending: Ending) -> HandWrittenApp {
        use axum::extract::{ConnectInfo, State};
        use axum::http::{HeaderMap, StatusCode};
        use axum::response::{IntoResponse, Response};
        use futures::StreamExt as _;
        use std::net::SocketAddr;
        type Shared = std::sync::Arc<AppState>;
        struct AppState {
            ending: Ending,
            seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
            /// Event id → the answer that stream was cut before.
            cut: std::sync::Mutex<std::collections::HashMap<String, Value>>,
        }
        fn sse(body: String) -> Response {
            ([("content-type", "text/event-stream"), ("cache-control", "no-cache")], body).into_response()
        }
        /// `event` now, the stream's end after [`END_PAUSE`].
        fn sse_ending_later(event: String) -> Response {
            let now = futures::stream::once(async move { Ok::<_, std::io::Error>(axum::body::Bytes::from(event)) });
            let end = futures::stream::once(tokio::time::sleep(END_PAUSE)).filter_map(|_| async { None });
            let body = axum::body::Body::from_stream(now.chain(end));
            ([("content-type", "text/event-stream"), ("cache-control", "no-cache")], body).into_response()
        }
        async fn post(State(state): State<Shared>, ConnectInfo(peer): ConnectInfo<SocketAddr>, headers: HeaderMap, body: String) -> Response {
            let message: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            let method = message["method"].as_str().unwrap_or("").to_string();
            let id = message["id"].clone();
            let session = headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).unwrap_or("-").to_string();
            state.seen.lock().unwrap().push(format!("POST {method} id {} session {session} from {peer}", id.as_str().map(String::from).unwrap_or(id.to_string())));
            if id.is_null() {
                return StatusCode::ACCEPTED.into_response();
            }
            let result = match method.as_str() {
                "initialize" => {
                    let version = message["params"]["protocolVersion"].clone();
                    let result = json!({ "protocolVersion": version, "capabilities": { "tools": {} }, "serverInfo": { "name": "cutting", "version": "1.0.0" } });
                    let answer = json!({ "jsonrpc": "2.0", "id": id, "result": result });
                    return ([("content-type", "application/json"), ("mcp-session-id", "s-1")], answer.to_string()).into_response();
                }
                "tools/list" => json!({ "tools": [{ "name": "echo", "inputSchema": { "type": "object", "properties": { "text": { "type": "string" } } } }] }),
                "tools/call" if matches!(state.ending, Ending::PauseAfterTheAnswer) => {
                    let text = message["params"]["arguments"]["text"].as_str().unwrap_or("");
                    let answer = json!({ "jsonrpc": "2.0", "id": id, "result": { "content": [{ "type": "text", "text": format!("answered: {text}") }] } });
                    return sse_ending_later(format!("data: {answer}\n\n"));
                }
                "tools/call" => {
                    let text = message["params"]["arguments"]["text"].as_str().unwrap_or("").to_string();
                    let answer = json!({ "jsonrpc": "2.0", "id": id, "result": { "content": [{ "type": "text", "text": format!("resumed: {text}") }] } });
                    let event = format!("cut-{}", state.cut.lock().unwrap().len() + 1);
                    state.cut.lock().unwrap().insert(event.clone(), answer);
                    // One event with an id and no data (a priming event), then the end.
                    return sse(format!("id: {event}\ndata:\n\n"));
                }
                _ => json!({}),
            };
            ([("content-type", "application/json")], json!({ "jsonrpc": "2.0", "id": id, "result": result }).to_string()).into_response()
        }
        async fn get(State(state): State<Shared>, headers: HeaderMap) -> Response {
            let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(String::from);
            let Some(last) = header("last-event-id") else {
                // No stream of the server's own: allowed by the transport.
                return StatusCode::METHOD_NOT_ALLOWED.into_response();
            };
            let session = header("mcp-session-id").unwrap_or_else(|| "-".into());
            state.seen.lock().unwrap().push(format!("GET last-event-id {last} session {session}"));
            match state.cut.lock().unwrap().remove(&last) {
                Some(answer) => sse(format!("id: {last}-2\ndata: {answer}\n\n")),
                None => StatusCode::NOT_FOUND.into_response(),
            }
        }
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let seen = std::sync::Arc::default();
        let state = Shared::new(AppState { ending, seen: std::sync::Arc::clone(&seen), cut: Default::default() });
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let app = axum::Router::new()
            .route("/mcp", axum::routing::post(post).get(get).delete(|| async { StatusCode::OK }))
            .with_state(state);
        runtime.spawn(async move { axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await.unwrap() });
        HandWrittenApp { url, seen, _runtime: runtime }
    }
}

/// Architecture invariant (ARCHITECTURE.md, "the earlier app keeps a clashing tool name"): of two
/// MCP Apps whose prefixed tool names clash, the earlier in discovery order (folders sorted by
/// name) keeps the name, and a call of it reaches that app; the later app's tool is refused with
/// one log line however often the tools are listed.
#[test]
fn a_clashing_tool_name_stays_with_the_earlier_app() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    for id in ["clash-a", "clash-b"] {
        let mut manifest = stdio_app(id, &[]);
        manifest["toolNamePrefix"] = json!("same.");
        write_manifest(&apps, id, &manifest);
    }
    let gw = gateway_e2e::GatewayProcess::start(json!({
        "Gateway": { "AlwaysRequireAuth": false },
        "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [apps], "Allow": ["*"] } }
    }));
    let refusal = "Tool name 'same.echo' of McpApp 'clash-b' clashes with McpApp 'clash-a'";
    assert!(gw.wait_for_log(refusal, Duration::from_secs(30)), "no refusal logged\n{}", gw.logs());
    for _ in 0..3 {
        let (status, tools) = gw.get_json("/tools");
        assert_eq!(status, 200, "{tools}");
        let echo: Vec<&Value> = tools["all"].as_array().unwrap().iter().filter(|t| t["name"] == "same.echo").collect();
        assert_eq!(echo.len(), 1, "one tool named same.echo: {tools}");
        assert_eq!(echo[0]["providerId"], "mcpapp:clash-a", "the earlier app keeps it: {tools}");
        assert!(!tools.to_string().contains("clash-b"), "every tool of clash-b clashes with clash-a's (same app, same prefix): {tools}");
    }
    let (reply, _) = try_call(&gw.url(""), "/mcp", "same.env", json!({}), Duration::from_secs(30)).unwrap();
    assert!(reply.to_string().contains("clash-a"), "the call reaches the earlier app (its folder is its working directory): {reply}");
    assert_eq!(gw.log_lines().iter().filter(|l| l.contains(refusal)).count(), 1, "one log line per clash\n{}", gw.logs());
}
