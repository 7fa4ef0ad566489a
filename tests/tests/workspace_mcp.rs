//! The workspace's standard MCP servers over `/admin/workspace/mcp` (issue 14, R40): added,
//! changed and removed while the gateway serves — each change reloads that server alone, its
//! tools reach the registry and `/mcp` (with `notifications/tools/list_changed`), the
//! definitions survive a restart, and only allowlisted commands run.

mod support;

use std::io::Read as _;
use std::sync::mpsc;
use std::time::Duration;

use gateway_e2e::{wait_until, GatewayOptions, GatewayProcess};
use serde_json::{json, Value};
use support::*;

const TOKEN: &str = "workspace-mcp-token-0123456789";

fn config(apps: &std::path::Path) -> Value {
    json!({
        "Gateway": { "AlwaysRequireAuth": false, "AuthTokenEnv": "WORKSPACE_TOKEN" },
        "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [apps], "Allow": ["*"] } },
        "Plugins": { "Mcp": { "AllowedCommands": [test_app_bin()] } }
    })
}

fn start(dir: &std::path::Path, config: Value) -> GatewayProcess {
    GatewayProcess::start_with(GatewayOptions {
        config,
        config_dir: Some(dir.to_path_buf()),
        env: vec![("WORKSPACE_TOKEN".into(), TOKEN.into())],
        ..Default::default()
    })
}

fn admin(gw: &GatewayProcess, method: reqwest::Method, path: &str, body: Option<Value>, token: Option<&str>) -> (u16, Value) {
    let mut request = gw.client().request(method, gw.url(path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().expect("admin request");
    let status = response.status().as_u16();
    (status, serde_json::from_str(&response.text().unwrap()).unwrap_or(Value::Null))
}

/// Names of the registry's tools offered by `provider`.
fn tools_of(gw: &GatewayProcess, provider: &str) -> Vec<String> {
    let (_, tools) = gw.get_json("/tools");
    let mut names: Vec<String> = tools["all"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["providerId"] == provider)
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

/// Tool names `/mcp` lists (a 2026-07-28 request).
fn mcp_tool_names(gw: &GatewayProcess) -> Vec<String> {
    let (status, reply) = gw.mcp_request("/mcp", "tools/list", json!({}), json!({}));
    assert_eq!(status, 200, "{reply}");
    reply["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
}

fn app_pid(gw: &GatewayProcess, pid_file: &std::path::Path) -> i32 {
    assert!(wait_until(Duration::from_secs(30), Duration::from_millis(100), || pid_file.exists()), "{}", gw.logs());
    read_pid(pid_file, Duration::from_secs(5))
}

/// An initialize-era `/mcp` session whose GET stream's text arrives on the returned channel.
fn mcp_listener(gw: &GatewayProcess) -> mpsc::Receiver<String> {
    let post = |session: Option<&str>, body: Value| {
        let mut request = gw
            .client()
            .post(gw.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json");
        if let Some(session) = session {
            request = request.header("mcp-session-id", session).header("mcp-protocol-version", "2025-11-25");
        }
        request.body(body.to_string()).send().unwrap()
    };
    let init = post(None, json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}}));
    assert_eq!(init.status().as_u16(), 200);
    let session = init.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let _ = init.text();
    let done = post(Some(&session), json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    assert_eq!(done.status().as_u16(), 202);
    let stream_client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(120)).no_proxy().build().unwrap();
    let mut stream = stream_client
        .get(gw.url("/mcp"))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .unwrap();
    assert_eq!(stream.status().as_u16(), 200);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stream.read(&mut buf) {
            if n == 0 || tx.send(String::from_utf8_lossy(&buf[..n]).to_string()).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits for a `notifications/tools/list_changed` on the stream.
fn expect_list_changed(stream: &mpsc::Receiver<String>, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut seen = String::new();
    while std::time::Instant::now() < deadline {
        if let Ok(text) = stream.recv_timeout(Duration::from_millis(200)) {
            seen.push_str(&text);
            if seen.contains("notifications/tools/list_changed") {
                return;
            }
        }
    }
    panic!("no notifications/tools/list_changed on /mcp after {what}; stream: {seen}");
}

fn drain(stream: &mpsc::Receiver<String>) {
    std::thread::sleep(Duration::from_millis(300));
    while stream.try_recv().is_ok() {}
}

#[test]
fn workspace_servers_are_added_changed_removed_and_persisted() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    let keep_pid_file = dir.path().join("keep.pid");
    write_manifest(&apps, "keep", &stdio_app("keep", &["--pid-file", keep_pid_file.to_str().unwrap()]));
    let mut gw = start(dir.path(), config(&apps));
    let keep_pid = app_pid(&gw, &keep_pid_file);
    let stream = mcp_listener(&gw);
    let definition = |tool: &str| {
        json!({ "transport": "stdio", "command": test_app_bin(), "arguments": ["--extra-tool", tool], "toolNamePrefix": "ws." })
    };
    use reqwest::Method;

    // Admin routes need the token, on loopback too.
    let (status, body) = admin(&gw, Method::GET, "/admin/workspace/mcp", None, None);
    assert_eq!(status, 401, "{body}");
    let (status, body) = admin(&gw, Method::POST, "/admin/workspace/mcp", Some(json!({"id": "ws"})), Some("wrong"));
    assert_eq!(status, 401, "{body}");

    // A command that is not on the allowlist: 400 naming it, and nothing is written.
    let (status, body) =
        admin(&gw, Method::POST, "/admin/workspace/mcp", Some(json!({"id": "evil", "transport": "stdio", "command": "/bin/sh", "arguments": ["-c", "touch /tmp/x"]})), Some(TOKEN));
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "command_not_allowed", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("'/bin/sh'") && message.contains("Plugins.Mcp.AllowedCommands"), "{message}");
    let (_, listing) = admin(&gw, Method::GET, "/admin/workspace/mcp", None, Some(TOKEN));
    assert!(!listing.to_string().contains("evil"), "{listing}");
    // Bad definitions name their field.
    let (status, body) = admin(&gw, Method::POST, "/admin/workspace/mcp", Some(json!({"id": "x", "transport": "stdio", "comand": "y"})), Some(TOKEN));
    assert_eq!(status, 400, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("comand"), "{body}");
    let huge = json!({"id": "big", "transport": "stdio", "command": "x".repeat(2_000_000)});
    let (status, body) = admin(&gw, Method::POST, "/admin/workspace/mcp", Some(huge), Some(TOKEN));
    assert_eq!(status, 413, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("exceeds 1048576 bytes"), "{body}");

    // Add: the server runs, its tools join the registry and /mcp, and /mcp clients hear of it.
    drain(&stream);
    let mut add = definition("alpha");
    add["id"] = json!("ws");
    let (status, body) = admin(&gw, Method::POST, "/admin/workspace/mcp", Some(add.clone()), Some(TOKEN));
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["status"]["state"], "running", "{body}");
    assert!(body["reload"]["started"].as_array().unwrap().iter().any(|k| k == "mcp:ws"), "{body}");
    assert!(tools_of(&gw, "mcp:ws").contains(&"ws.alpha".to_string()), "{:?}", tools_of(&gw, "mcp:ws"));
    assert!(mcp_tool_names(&gw).contains(&"ws.alpha".to_string()));
    expect_list_changed(&stream, "adding a server");
    let (status, body) = admin(&gw, Method::POST, "/admin/workspace/mcp", Some(add), Some(TOKEN));
    assert_eq!(status, 409, "adding it twice: {body}");

    // Its tool is callable through /mcp.
    let (status, reply) = gw.mcp_request("/mcp", "tools/call", json!({"name": "ws.alpha", "arguments": {}}), json!({}));
    assert_eq!(status, 200, "{reply}");
    assert!(reply["result"].is_object() && reply["result"]["isError"] != true, "{reply}");

    // Change: reloaded with the new definition.
    drain(&stream);
    let (status, body) = admin(&gw, Method::PUT, "/admin/workspace/mcp/ws", Some(definition("beta")), Some(TOKEN));
    assert_eq!(status, 200, "{body}");
    assert!(body["reload"]["restarted"].as_array().unwrap().iter().any(|k| k == "mcp:ws"), "{body}");
    let names = tools_of(&gw, "mcp:ws");
    assert!(names.contains(&"ws.beta".to_string()) && !names.contains(&"ws.alpha".to_string()), "{names:?}");
    expect_list_changed(&stream, "changing a server");

    // The listing shows it with its live state, and the file holds it.
    let (status, body) = admin(&gw, Method::GET, "/admin/workspace/mcp", None, Some(TOKEN));
    assert_eq!(status, 200, "{body}");
    let listed = body["servers"].as_array().unwrap().iter().find(|s| s["id"] == "ws").cloned().unwrap_or_else(|| panic!("{body}"));
    assert_eq!(listed["source"], "workspace");
    assert_eq!(listed["status"]["state"], "running", "{listed}");
    let file: Value = serde_json::from_slice(&std::fs::read(dir.path().join(".gateway-data/workspace-mcp.json")).unwrap()).unwrap();
    assert_eq!(file["servers"]["ws"]["arguments"], json!(["--extra-tool", "beta"]), "{file}");

    // Remove: gone from the registry and /mcp.
    drain(&stream);
    let (status, body) = admin(&gw, Method::DELETE, "/admin/workspace/mcp/ws", None, Some(TOKEN));
    assert_eq!(status, 200, "{body}");
    assert!(tools_of(&gw, "mcp:ws").is_empty());
    assert!(!mcp_tool_names(&gw).iter().any(|n| n.starts_with("ws.")));
    expect_list_changed(&stream, "removing a server");
    let (status, _) = admin(&gw, Method::DELETE, "/admin/workspace/mcp/ws", None, Some(TOKEN));
    assert_eq!(status, 404);

    // None of this touched the MCP App that was running all along.
    assert_eq!(read_pid(&keep_pid_file, Duration::from_secs(1)), keep_pid, "the app was restarted");
    assert!(process_alive(keep_pid));

    // Definitions survive a restart.
    let mut again = definition("gamma");
    again["id"] = json!("ws2");
    let (status, body) = admin(&gw, Method::POST, "/admin/workspace/mcp", Some(again), Some(TOKEN));
    assert_eq!(status, 201, "{body}");
    assert_eq!(gw.terminate().map(|s| s.success()), Some(true), "{}", gw.logs());
    let gw = start(dir.path(), Value::Null);
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(100), || tools_of(&gw, "mcp:ws2").contains(&"ws.gamma".to_string())),
        "the persisted server did not come back: {:?}\n{}",
        tools_of(&gw, "mcp:ws2"),
        gw.logs()
    );
    let (_, body) = admin(&gw, Method::GET, "/admin/workspace/mcp/ws2", None, Some(TOKEN));
    assert_eq!(body["definition"]["arguments"], json!(["--extra-tool", "gamma"]), "{body}");
}

#[test]
fn a_persisted_command_no_longer_allowed_does_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    std::fs::create_dir_all(&apps).unwrap();
    let mut gw = start(dir.path(), config(&apps));
    let body = json!({ "id": "ws", "transport": "stdio", "command": test_app_bin(), "arguments": ["--extra-tool", "alpha"] });
    let (status, reply) = admin(&gw, reqwest::Method::POST, "/admin/workspace/mcp", Some(body), Some(TOKEN));
    assert_eq!(status, 201, "{reply}");
    gw.terminate();

    // The operator empties the allowlist: the definition stays in the file but does not run.
    let mut narrowed = config(&apps);
    narrowed["Plugins"]["Mcp"]["AllowedCommands"] = json!([]);
    let gw = start(dir.path(), narrowed);
    std::thread::sleep(Duration::from_secs(1));
    assert!(tools_of(&gw, "mcp:ws").is_empty(), "{:?}", tools_of(&gw, "mcp:ws"));
    let (_, listing) = admin(&gw, reqwest::Method::GET, "/admin/workspace/mcp", None, Some(TOKEN));
    let ws = listing["servers"].as_array().unwrap().iter().find(|s| s["id"] == "ws").cloned().unwrap();
    assert!(ws["refused"].as_str().unwrap().contains("AllowedCommands"), "{ws}");
    assert!(gw.logs().contains("Workspace MCP server 'ws' is not started"), "{}", gw.logs());
}

#[test]
fn a_torn_workspace_file_stops_the_start_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".gateway-data")).unwrap();
    std::fs::write(dir.path().join(".gateway-data/workspace-mcp.json"), b"{\"servers\": {\"a\": ").unwrap();
    let err = GatewayProcess::try_start_with(GatewayOptions {
        config: config(&dir.path().join("apps")),
        config_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    })
    .err()
    .expect("the gateway started over a file it cannot read");
    assert!(err.contains("workspace-mcp.json"), "{err}");
}

/// Item 6 of issue 37: definitions the module would only fail after a 201 (a timeout past its
/// bound, variable names no process can have, a command that runs other than it was allowed)
/// are refused when written, with a 400 naming the field, and nothing is written.
#[test]
fn definitions_that_could_never_run_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    std::fs::create_dir_all(&apps).unwrap();
    let gw = start(dir.path(), config(&apps));
    let command = test_app_bin().to_str().unwrap().to_string();
    let stdio = |extra: Value| {
        let mut body = json!({ "id": "doomed", "transport": "stdio", "command": command });
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    let cases = [
        (stdio(json!({"startupTimeoutSeconds": 100_000})), "startupTimeoutSeconds", "at most 86400"),
        (stdio(json!({"requestTimeoutSeconds": 86_401})), "requestTimeoutSeconds", "at most 86400"),
        (stdio(json!({"startupTimeoutSeconds": "15"})), "startupTimeoutSeconds", "invalid type"),
        (stdio(json!({"environment": {"A=B": "x"}})), "environment.A=B", "not a valid environment variable name"),
        (stdio(json!({"environment": {"A\u{0}B": "x"}})), r"environment.A\0B", "not a valid environment variable name"),
        (stdio(json!({"environment": {"A\nFORGED-ENV x": "x"}})), r"environment.A\nFORGED-ENV x", "control character"),
        (stdio(json!({"toolNamePrefix": "my tools"})), "toolNamePrefix", "whitespace"),
        (json!({"id": "doomed", "transport": "stdio", "command": format!("{command} ")}), "command", "leading or trailing whitespace"),
        (json!({"id": "doomed", "transport": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"X-Key": "k\r\nX-Forged: 1"}}), "headers.X-Key", "control characters"),
        (json!({"id": "doomed", "transport": "http", "url": "http://127.0.0.1:99999/mcp"}), "url", "invalid port"),
    ];
    for (body, field, needle) in cases {
        let (status, reply) = admin(&gw, reqwest::Method::POST, "/admin/workspace/mcp", Some(body.clone()), Some(TOKEN));
        assert_eq!(status, 400, "{body}: {reply}");
        assert_eq!(reply["error"]["code"], "bad_definition", "{body}: {reply}");
        assert_eq!(reply["error"]["field"], field, "{body}: {reply}");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(&format!("{field}: ")) && message.contains(needle), "{body}: {message}");
    }
    // The same rules on PUT, which may also create.
    let (status, reply) =
        admin(&gw, reqwest::Method::PUT, "/admin/workspace/mcp/doomed", Some(stdio(json!({"environment": {"A=B": "x"}}))), Some(TOKEN));
    assert_eq!((status, &reply["error"]["field"]), (400, &json!("environment.A=B")), "{reply}");

    // Nothing was written or started.
    let (_, listing) = admin(&gw, reqwest::Method::GET, "/admin/workspace/mcp", None, Some(TOKEN));
    assert!(!listing.to_string().contains("doomed"), "{listing}");
    assert!(!dir.path().join(".gateway-data/workspace-mcp.json").exists());
    assert!(tools_of(&gw, "mcp:doomed").is_empty());

    // At the bound itself the server runs.
    let (status, reply) =
        admin(&gw, reqwest::Method::POST, "/admin/workspace/mcp", Some(stdio(json!({"startupTimeoutSeconds": 86_400}))), Some(TOKEN));
    assert_eq!(status, 201, "{reply}");
    assert_eq!(reply["status"]["state"], "running", "{reply}");
    assert!(gw.log_lines().iter().all(|l| !l.starts_with("FORGED")), "{}", gw.logs());
}

/// A log line per record: line breaks in text from outside — an unknown configuration key the
/// host warns about, a `Plugins.Mcp` server id the module logs through the `log` bridge, a
/// workspace file edited by hand — are written escaped, never as a line of their own.
#[test]
fn hostile_text_reaching_the_log_forges_no_line() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    std::fs::create_dir_all(&apps).unwrap();
    let forged = "FORGED-LINE 2026-01-01T00:00:00Z  INFO gateway: admin token accepted";
    let mut config = config(&apps);
    config["Gateway"][format!("Urlz\n{forged}")] = json!("x");
    config["Plugins"]["Mcp"]["Servers"] = json!({ format!("cfg\r\n{forged}"): { "Transport": "pigeon" } });
    let workspace = json!({ "servers": { format!("ws\n{forged}"): { "transport": "stdio", "command": format!("x\n{forged}") } } });
    std::fs::create_dir_all(dir.path().join(".gateway-data")).unwrap();
    std::fs::write(dir.path().join(".gateway-data/workspace-mcp.json"), workspace.to_string()).unwrap();
    let gw = start(dir.path(), config);

    for seen in [r"Urlz\nFORGED-LINE", r"mcp:cfg\r\nFORGED-LINE", r"ws\nFORGED-LINE"] {
        assert!(gw.wait_for_log(seen, Duration::from_secs(20)), "no line shows {seen}:\n{}", gw.logs());
    }
    let lines = gw.log_lines();
    let forged_lines: Vec<&String> = lines.iter().filter(|l| l.trim_start().starts_with("FORGED-LINE")).collect();
    assert!(forged_lines.is_empty(), "forged lines {forged_lines:?} in:\n{}", gw.logs());
    assert!(!lines.iter().any(|l| l.contains('\r')), "a carriage return reached the log:\n{}", gw.logs());
}
