//! The short way through both MCP endpoints (`gateway-host/src/http/mcp/pass_through.rs`): a plain
//! 2026-07-28 `tools/call` is answered without rmcp's server in between. It must answer exactly
//! what the protocol library's path answers. The same request with a progress token in `_meta`
//! (which the short way leaves to rmcp) takes the long way, so every case is sent both ways to
//! the real gateway and the two answers compared: status, content type, the JSON-RPC messages.
//! Over stdio and Streamable HTTP apps, on `/apps/mcp/{app}` and `/mcp`.

mod support;

use std::time::Duration;

use gateway_e2e::{metric_value, wait_until, GatewayProcess};
use serde_json::{json, Value};
use support::*;

/// What came back: HTTP status, whether it was an SSE stream, and its JSON-RPC messages.
#[derive(Debug, PartialEq)]
struct Reply {
    status: u16,
    sse: bool,
    messages: Vec<Value>,
}

fn post(gw: &GatewayProcess, path: &str, tool: &str, arguments: Value, capabilities: Value, long_way: bool) -> Reply {
    let (headers, body) = stateless_tools_call(tool, arguments, "pass-through-e2e");
    let mut body: Value = serde_json::from_str(&body).unwrap();
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = capabilities;
    if long_way {
        body["params"]["_meta"]["progressToken"] = json!("long-way");
    }
    send(gw, path, &headers, &body)
}

fn send(gw: &GatewayProcess, path: &str, headers: &[(&'static str, String)], body: &Value) -> Reply {
    let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).no_proxy().build().unwrap();
    let mut request = client.post(gw.url(path)).body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response = request.send().unwrap_or_else(|e| panic!("POST {path}: {e}"));
    let status = response.status().as_u16();
    let sse = response.headers().get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("text/event-stream"));
    let text = response.text().unwrap();
    let messages = if sse {
        text.lines().filter_map(|l| l.strip_prefix("data:")).filter_map(|d| serde_json::from_str(d.trim()).ok()).collect()
    } else {
        vec![serde_json::from_str(&text).unwrap_or_else(|e| panic!("POST {path}: not JSON ({e}): {text}"))]
    };
    Reply { status, sse, messages }
}

/// The counter of short-way and long-way `tools/call`s of `app` with `outcome`.
fn proxied(gw: &GatewayProcess, app: &str, outcome: &str) -> u64 {
    let wanted = format!("gateway_proxied_requests_total{{app=\"{app}\",method=\"tools/call\",outcome=\"{outcome}\"}}");
    metric_value(&gw.metrics(), &wanted).unwrap_or(0)
}

/// A gateway (no auth) running a stdio and an HTTP test-app with these ids, once both serve tools.
fn gateway_with_apps(stdio: &str, http: &str) -> (tempfile::TempDir, GatewayProcess) {
    gateway_with_apps_started_with(stdio, http, &[])
}

/// [`gateway_with_apps`], the apps started with `args`.
fn gateway_with_apps_started_with(stdio: &str, http: &str, args: &[&str]) -> (tempfile::TempDir, GatewayProcess) {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    write_manifest(&apps, stdio, &stdio_app(stdio, args));
    write_manifest(&apps, http, &http_app(http, args));
    let gw = GatewayProcess::start(json!({
        "Gateway": { "AlwaysRequireAuth": false },
        "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [apps], "Allow": ["*"] } }
    }));
    let tools = || reqwest::blocking::get(gw.url("/tools")).ok().and_then(|r| r.text().ok()).unwrap_or_default();
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(100), || tools().contains(&format!("{stdio}.echo")) && tools().contains(&format!("{http}.echo"))),
        "the apps never came up\n{}",
        gw.logs()
    );
    (dir, gw)
}

/// The calls every test here sends both ways: a result, a tool error, an unknown tool, invalid
/// arguments, and log messages the app sends during the call (on a 2026-07-28 request they turn
/// the reply into an SSE stream).
fn cases() -> Vec<(&'static str, Value)> {
    vec![
        ("echo", json!({ "text": "hi from both ways" })),
        ("fail", json!({ "message": "a tool error" })),
        ("no-such-tool", json!({})),
        ("echo", json!({ "text": 5 })),
        ("log", json!({ "level": "error", "message": "while working", "count": 2 })),
    ]
}

#[test]
fn the_short_way_answers_what_the_protocol_library_answers() {
    let (_dir, gw) = gateway_with_apps("pts", "pth");
    let cases = &cases();
    for app in ["pts", "pth"] {
        for (tool, arguments) in cases {
            for (path, name) in [(format!("/apps/mcp/{app}"), tool.to_string()), ("/mcp".to_string(), format!("{app}.{tool}"))] {
                let short = post(&gw, &path, &name, arguments.clone(), json!({}), false);
                let long = post(&gw, &path, &name, arguments.clone(), json!({}), true);
                assert_eq!(short, long, "{path} {name} {arguments}: the short way (left) differs from rmcp's (right)");
                assert!(!short.messages.is_empty(), "{path} {name}: no answer");
                assert_eq!(short.sse, *tool == "log", "{path} {name}: SSE exactly when the app sends something first: {short:?}");
            }
        }
    }
    // An app that is not there gets the gateway's own code both ways, on a call and on a read:
    // not MCP's -32002 (a resource not found), which rmcp's server turns into -32602 for a
    // 2026-07-28 client, so that an app that is down read as a bad parameter.
    for long_way in [false, true] {
        for reply in [post(&gw, "/apps/mcp/nope", "echo", json!({ "text": "x" }), json!({}), long_way), read(&gw, "/apps/mcp/nope", "ui://x", long_way)] {
            let error = &reply.messages[0]["error"];
            assert_eq!((&error["code"], &error["data"]["appId"]), (&json!(-32010), &json!("nope")), "long way {long_way}: {reply:?}");
        }
    }
    // The short way is counted like the long one.
    assert!(proxied(&gw, "pts", "ok") >= 2 && proxied(&gw, "pts", "tool_error") >= 2, "{}", gw.metrics());
}

/// A question of the app (elicitation) reaches a 2026-07-28 client as an `input_required`
/// result from the short way, with a `requestState` the retry (which rmcp serves) takes up: the
/// parked call is shared by both ways. A client that cannot answer gets the revision's error.
#[test]
fn an_input_required_round_starts_on_the_short_way_and_ends_on_the_long_one() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    write_manifest(&apps, "pte", &stdio_app("pte", &[]));
    let gw = GatewayProcess::start(json!({
        "Gateway": { "AlwaysRequireAuth": false },
        "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [apps], "Allow": ["*"] } }
    }));
    let tools = || reqwest::blocking::get(gw.url("/tools")).ok().and_then(|r| r.text().ok()).unwrap_or_default();
    assert!(wait_until(Duration::from_secs(30), Duration::from_millis(100), || tools().contains("pte.elicit")), "{}", gw.logs());
    for (path, name) in [("/apps/mcp/pte", "elicit"), ("/mcp", "pte.elicit")] {
        let refused = post(&gw, path, name, json!({}), json!({}), false);
        assert_eq!(refused, post(&gw, path, name, json!({}), json!({}), true), "{path}: a client without elicitation");
        assert_eq!(refused.status, 400, "{path}: {refused:?}");

        let capable = json!({ "elicitation": { "form": {} } });
        let asked = post(&gw, path, name, json!({}), capable.clone(), false);
        let result = &asked.messages[0]["result"];
        assert_eq!(result["resultType"], "input_required", "{path}: {asked:?}");
        let (key, request) = result["inputRequests"].as_object().and_then(|m| m.iter().next()).expect("one question");
        assert_eq!(request["method"], "elicitation/create", "{path}: {asked:?}");
        let long = post(&gw, path, name, json!({}), capable.clone(), true);
        let long_result = &long.messages[0]["result"];
        assert_eq!(long_result["inputRequests"].as_object().map(|m| m.len()), Some(1), "{path}: {long:?}");
        assert_eq!(long_result["inputRequests"].as_object().unwrap().values().next(), Some(request), "{path}: the same question both ways");

        let (headers, body) = stateless_tools_call(name, json!({}), "pass-through-e2e");
        let mut retry: Value = serde_json::from_str(&body).unwrap();
        retry["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = capable;
        retry["params"]["requestState"] = result["requestState"].clone();
        retry["params"]["inputResponses"] = json!({ key: { "action": "accept", "content": { "name": "Ada", "color": "green", "count": 3 } } });
        let done = send(&gw, path, &headers, &retry);
        let text = done.messages[0]["result"]["content"][0]["text"].as_str().unwrap_or_default().to_string();
        assert!(text.contains("Ada"), "{path}: the answer reached the app: {done:?}");
    }
}

/// A 2026-07-28 `resources/read` of `uri`; the long way's has a progress token in `_meta`
/// (which the short way leaves to rmcp).
fn read(gw: &GatewayProcess, path: &str, uri: &str, long_way: bool) -> Reply {
    let (headers, body) = stateless_request("resources/read", uri, json!({ "uri": uri }), "pass-through-e2e");
    let mut body: Value = serde_json::from_str(&body).unwrap();
    body["id"] = json!(4);
    if long_way {
        body["params"]["_meta"]["progressToken"] = json!("long-way");
    }
    send(gw, path, &headers, &body)
}

fn session_read(id: u64, uri: &str, long_way: bool) -> Value {
    let mut body = json!({ "jsonrpc": "2.0", "id": id, "method": "resources/read", "params": { "uri": uri } });
    if long_way {
        body["params"]["_meta"] = json!({ "progressToken": "long-way" });
    }
    body
}

/// A `resources/read` goes the short way too (an app's UI is read each time its frame opens),
/// on both endpoints, for 2026-07-28 clients and in initialize-era sessions, with the answers
/// of rmcp's path: a UI page with its `_meta`, a text, an item of a template, and resources
/// that are not there (whose error code differs by revision, as rmcp gives it). In a session
/// the short way's plain JSON (rmcp answers with a stream) shows which way a read went.
#[test]
fn resource_reads_take_the_short_way_with_the_protocol_librarys_answers() {
    let ui_meta = r#"{"csp":{"connectDomains":["https://api.example"]},"prefersBorder":true}"#;
    let (_dir, gw) = gateway_with_apps_started_with("prs", "prh", &["--ui-meta", ui_meta, "--ui-size-kb", "64"]);
    let own = ["ui://test-app/app.html", "test://readme", "test://items/42", "test://items/"];
    for app in ["prs", "prh"] {
        let mcp: Vec<String> = own.iter().map(|uri| uri.replacen("://", &format!("://{app}/"), 1)).chain(["test://no-such-app/readme".to_string()]).collect();
        for (path, uris) in [(format!("/apps/mcp/{app}"), own.iter().map(|u| u.to_string()).collect::<Vec<_>>()), ("/mcp".to_string(), mcp)] {
            let session = open_session(&gw, &path, json!({}));
            for (i, uri) in uris.iter().enumerate() {
                let short = read(&gw, &path, uri, false);
                let long = read(&gw, &path, uri, true);
                assert_eq!(short, long, "{path} {uri}: the short way (left) differs from rmcp's (right)");
                let in_session = send(&gw, &path, &session, &session_read(i as u64 + 1, uri, false));
                let long_in_session = send(&gw, &path, &session, &session_read(i as u64 + 1, uri, true));
                assert_eq!(in_session.messages, long_in_session.messages, "{path} {uri}: in a session, the short way (left) differs from rmcp's (right)");
                assert!(!in_session.sse && long_in_session.sse, "{path} {uri}: the short way answers JSON where rmcp answers a stream (SSE: {}, {})", in_session.sse, long_in_session.sse);
                let result = &short.messages[0]["result"];
                if i < 3 {
                    assert_eq!(result["contents"][0]["uri"], json!(uri), "{path}: {short:?}");
                    assert_eq!((&result["resultType"], &result["ttlMs"], &result["cacheScope"]), (&json!("complete"), &json!(0), &json!("private")), "{path}");
                    let session_result = &in_session.messages[0]["result"];
                    assert!(session_result.get("resultType").is_none() && session_result.get("ttlMs").is_none(), "{path}: {session_result}");
                } else {
                    assert_eq!(short.messages[0]["error"]["code"], -32602, "{path} {uri}: a 2026-07-28 client's code: {short:?}");
                    let code = &in_session.messages[0]["error"]["code"];
                    assert!(*code == -32002 || *code == -32602, "{path} {uri}: {in_session:?}");
                }
            }
            let ui = &read(&gw, &path, &uris[0], false).messages[0]["result"]["contents"][0];
            assert!(ui["text"].as_str().is_some_and(|t| t.len() >= 64 * 1024 && t.contains("<script>\n")), "{path}: the page whole: {}", &ui.to_string()[..200.min(ui.to_string().len())]);
            assert_eq!(ui["_meta"]["ui"], serde_json::from_str::<Value>(ui_meta).unwrap(), "{path}");
        }
    }
    let read_counted = |outcome: &str| {
        let wanted = format!("gateway_proxied_requests_total{{app=\"prh\",method=\"resources/read\",outcome=\"{outcome}\"}}");
        metric_value(&gw.metrics(), &wanted).unwrap_or(0)
    };
    assert!(read_counted("ok") >= 12 && read_counted("error") >= 4, "the short way's reads are counted like the long way's");
}

/// Opens an initialize-era session at `path` for a client that declared `capabilities`: the
/// headers its requests carry.
fn open_session(gw: &GatewayProcess, path: &str, capabilities: Value) -> Vec<(&'static str, String)> {
    let mut headers = vec![("content-type", "application/json".to_string()), ("accept", "application/json, text/event-stream".to_string())];
    let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).no_proxy().build().unwrap();
    let init = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": { "protocolVersion": "2025-06-18", "capabilities": capabilities, "clientInfo": { "name": "pass-through-e2e", "version": "1" } } });
    let mut request = client.post(gw.url(path)).body(init.to_string());
    for (name, value) in &headers {
        request = request.header(*name, value);
    }
    let reply = request.send().unwrap();
    let session = reply.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_string);
    let session = session.unwrap_or_else(|| panic!("{path}: no session: {}", reply.text().unwrap_or_default()));
    headers.push(("mcp-session-id", session));
    headers.push(("mcp-protocol-version", "2025-06-18".to_string()));
    let initialized = send_raw(gw, path, &headers, &json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    assert_eq!(initialized.status().as_u16(), 202, "{path}: initialized");
    headers
}

fn send_raw(gw: &GatewayProcess, path: &str, headers: &[(&'static str, String)], body: &Value) -> reqwest::blocking::Response {
    let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).no_proxy().build().unwrap();
    let mut request = client.post(gw.url(path)).body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    request.send().unwrap_or_else(|e| panic!("POST {path}: {e}"))
}

fn session_call(id: u64, tool: &str, arguments: &Value, long_way: bool) -> Value {
    let mut body = json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": { "name": tool, "arguments": arguments } });
    if long_way {
        body["params"]["_meta"] = json!({ "progressToken": "long-way" });
    }
    body
}

/// A `tools/call` in an initialize-era session (what the official SDKs' clients open by
/// default) goes the short way too when the client declared nothing it could be asked during
/// the call: the same messages as rmcp's path (which answers a session's request as an SSE
/// stream, so the short way's plain JSON shows which way a call went; the app's log messages
/// go to the session's standalone stream on both). A client's
/// `notifications/cancelled` reaches a short-way call; a session that ended is not served; a
/// client that can be asked (elicitation) stays on rmcp's path.
#[test]
fn calls_in_an_initialize_era_session_take_the_short_way() {
    let (_dir, gw) = gateway_with_apps("pss", "psh");
    let cases = &cases();
    for app in ["pss", "psh"] {
        for (path, prefix) in [(format!("/apps/mcp/{app}"), String::new()), ("/mcp".to_string(), format!("{app}."))] {
            session_calls_both_ways(&gw, app, &path, &prefix, cases);
        }
    }
}

fn session_calls_both_ways(gw: &GatewayProcess, app: &str, path: &str, prefix: &str, cases: &[(&str, Value)]) {
    let path = path.to_string();
    let headers = open_session(gw, &path, json!({}));
    for (i, (tool, arguments)) in cases.iter().enumerate() {
        let tool = format!("{prefix}{tool}");
        let short = send(gw, &path, &headers, &session_call(i as u64 + 1, &tool, arguments, false));
        let long = send(gw, &path, &headers, &session_call(i as u64 + 1, &tool, arguments, true));
        assert_eq!(short.messages, long.messages, "{path} {tool} {arguments}: the short way (left) differs from rmcp's (right)");
        assert_eq!((short.status, long.status), (200, 200), "{path} {tool}");
        assert!(long.sse, "{path} {tool}: rmcp answers a session's request as a stream: {long:?}");
        // The app's log messages take the session's standalone stream either way (rmcp routes
        // them there), so the short way's reply is plain JSON even for `log`.
        assert!(!short.sse, "{path} {tool}: the short way answers JSON: {short:?}");
    }

    // The app's log messages during a short-way call reach the session's standalone stream.
    let (lines, stream) = std::sync::mpsc::channel::<String>();
    std::thread::spawn({
        let (url, headers) = (gw.url(&path), headers.clone());
        move || {
            use std::io::BufRead;
            let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(60)).no_proxy().build().unwrap();
            let mut request = client.get(url).header("accept", "text/event-stream");
            for (name, value) in headers.iter().filter(|(n, _)| n.starts_with("mcp-")) {
                request = request.header(*name, value);
            }
            let Ok(response) = request.send() else { return };
            for line in std::io::BufReader::new(response).lines().map_while(Result::ok) {
                if lines.send(line).is_err() {
                    return;
                }
            }
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    let logged = send(gw, &path, &headers, &session_call(50, &format!("{prefix}log"), &json!({ "level": "error", "message": "to the stream", "count": 2 }), false));
    assert!(!logged.sse && logged.messages.len() == 1, "{path}: the reply is the result alone: {logged:?}");
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let line = stream.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|_| panic!("{path}: the standalone stream got {seen:?}"));
        if let Some(data) = line.strip_prefix("data:") {
            if let Ok(message) = serde_json::from_str::<Value>(data.trim()) {
                if message["method"] == "notifications/message" && message["params"]["data"].as_str().is_some_and(|d| d.starts_with("to the stream")) {
                    seen.push(message);
                }
            }
        }
    }
    drop(stream);

    // The client cancels a call: the short way's call ends at once (on /apps/mcp counted as
    // cancelled).
    let cancelled_before = proxied(gw, app, "cancelled");
    let slow = std::thread::spawn({
        let (url, headers, tool) = (gw.url(&path), headers.clone(), format!("{prefix}slow"));
        move || {
            let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(60)).no_proxy().build().unwrap();
            let mut request = client.post(url).body(session_call(99, &tool, &json!({ "ms": 30000 }), false).to_string());
            for (name, value) in &headers {
                request = request.header(*name, value);
            }
            let started = std::time::Instant::now();
            let text = request.send().and_then(|r| r.text()).unwrap_or_else(|e| e.to_string());
            (text, started.elapsed())
        }
    });
    std::thread::sleep(Duration::from_millis(500));
    let cancel = json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": 99, "reason": "changed my mind" } });
    assert_eq!(send_raw(gw, &path, &headers, &cancel).status().as_u16(), 202, "{path}: the cancel is accepted");
    let (text, took) = slow.join().unwrap();
    assert!(took < Duration::from_secs(20), "{path}: the cancelled call still ran for {took:?}: {text}");
    // No response for a cancelled request (the transport's rule; rmcp ends the stream too).
    assert!(text.trim().is_empty(), "{path}: the cancelled call was answered: {text}");
    if prefix.is_empty() {
        assert!(
            wait_until(Duration::from_secs(10), Duration::from_millis(50), || proxied(gw, app, "cancelled") > cancelled_before),
            "{path}: not counted as cancelled"
        );
    }

    // The session ends: its id no longer reaches the app by either way.
    let client = reqwest::blocking::Client::builder().no_proxy().build().unwrap();
    let mut delete = client.delete(gw.url(&path));
    for (name, value) in &headers {
        delete = delete.header(*name, value);
    }
    assert_eq!(delete.send().unwrap().status().as_u16(), 200, "{path}: DELETE");
    let late = session_call(100, &format!("{prefix}echo"), &json!({ "text": "late" }), false);
    let after = wait_until(Duration::from_secs(10), Duration::from_millis(50), || send_raw(gw, &path, &headers, &late).status().as_u16() == 404);
    assert!(after, "{path}: a call in the ended session was served");

    // A client that can be asked keeps rmcp's path for its calls.
    let asking = open_session(gw, &path, json!({ "elicitation": {} }));
    let reply = send(gw, &path, &asking, &session_call(1, &format!("{prefix}echo"), &json!({ "text": "asked" }), false));
    assert!(reply.sse, "{path}: a session client that declared elicitation goes rmcp's way: {reply:?}");
    assert_eq!(reply.messages.last().unwrap()["result"]["content"][0]["text"], "echo: asked", "{reply:?}");
}

/// Requests an MCP client should not send (issue 37), on both endpoints, as a 2026-07-28 client
/// sends them: a `tools/call` whose params have the wrong types gets -32602 naming the field
/// (rmcp read it as an unknown method: -32601 "Method not found: tools/call", with a warning
/// logged per request); methods that revision removed are -32601 with 404 whatever their params
/// (`/apps/mcp` forwarded them to the app); a retry's `inputResponses` must be an object; an id
/// that is a number but no 64-bit integer, or a boolean, an array or an object, is refused
/// with `"id": null` (it was echoed rounded, or as it came), and a 64-bit one is echoed exactly.
#[test]
fn badly_typed_params_and_ids_are_refused_naming_them() {
    let (_dir, gw) = gateway_with_apps("bps", "bph");
    for (path, tool) in [("/apps/mcp/bps", "echo"), ("/mcp", "bps.echo")] {
        let (headers, body) = stateless_tools_call(tool, json!({ "text": "x" }), "params-e2e");
        let base: Value = serde_json::from_str(&body).unwrap();
        let meta = base["params"]["_meta"].clone();
        let call = |params: Value| {
            let mut body = base.clone();
            body["params"] = params;
            body["params"]["_meta"] = meta.clone();
            body
        };
        for (params, field) in [
            (json!({ "name": tool, "arguments": "{\"text\":\"x\"}" }), "params.arguments"),
            (json!({ "name": tool, "arguments": [1, 2] }), "params.arguments"),
            (json!({ "name": tool, "arguments": 5 }), "params.arguments"),
            (json!({ "name": 5, "arguments": {} }), "params.name"),
            (json!({ "name": tool, "arguments": {}, "inputResponses": 5, "requestState": "s" }), "params.inputResponses"),
            (json!({ "name": tool, "arguments": {}, "inputResponses": null, "requestState": "s" }), "params.inputResponses"),
        ] {
            let reply = send(&gw, path, &headers, &call(params.clone()));
            let error = &reply.messages[0];
            assert_eq!((reply.status, error["error"]["code"].as_i64()), (400, Some(-32602)), "{path} {params}: {reply:?}");
            assert_eq!(error["id"], 1, "{path}: {error}");
            assert!(error["error"]["message"].as_str().unwrap().contains(field), "{path} {params}: {error}");
        }
        for method in ["logging/setLevel", "resources/subscribe", "resources/unsubscribe"] {
            let mut body = base.clone();
            body["method"] = json!(method);
            body["params"] = json!({ "_meta": meta });
            let mut headers = headers.clone();
            headers.retain(|(name, _)| *name != "mcp-method" && *name != "mcp-name");
            headers.push(("mcp-method", method.to_string()));
            let reply = send(&gw, path, &headers, &body);
            assert_eq!((reply.status, reply.messages[0]["error"]["code"].as_i64()), (404, Some(-32601)), "{path} {method}: {reply:?}");
        }
        // Ids: one past what a float keeps exactly is refused; the largest 64-bit one is echoed.
        let text = call(json!({ "name": tool, "arguments": { "text": "x" } })).to_string();
        let huge = text.replacen("\"id\":1", "\"id\":123456789012345678901234567890", 1);
        let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).no_proxy().build().unwrap();
        let mut request = client.post(gw.url(path)).body(huge);
        for (name, value) in &headers {
            request = request.header(*name, value);
        }
        let reply: Value = request.send().unwrap().json().unwrap();
        assert_eq!((&reply["id"], reply["error"]["code"].as_i64()), (&Value::Null, Some(-32600)), "{path}: {reply}");
        // An id of a type no request's id has is named by its type, not echoed.
        for (id, kind) in [(json!(true), "a boolean"), (json!([1]), "an array"), (json!({ "a": 1 }), "an object")] {
            let mut wrong = call(json!({ "name": tool, "arguments": { "text": "x" } }));
            wrong["id"] = id;
            let reply = send(&gw, path, &headers, &wrong);
            let error = &reply.messages[0];
            assert_eq!((reply.status, &error["id"], error["error"]["code"].as_i64()), (400, &Value::Null, Some(-32600)), "{path} {kind}: {reply:?}");
            assert!(error["error"]["message"].as_str().unwrap().contains(&format!("the id is {kind}; use a string or an integer")), "{path}: {error}");
        }
        let mut exact = call(json!({ "name": tool, "arguments": { "text": "x" } }));
        exact["id"] = json!(i64::MAX);
        let reply = send(&gw, path, &headers, &exact);
        let answer = reply.messages.iter().find(|m| m.get("id").is_some()).unwrap_or_else(|| panic!("{path}: {reply:?}"));
        assert_eq!(answer["id"], json!(i64::MAX), "{path}: {answer}");
        assert_eq!(answer["result"]["structuredContent"]["text"], "x", "{path}: {answer}");
    }
    assert!(!gw.logs().contains("Method not found"), "a refused request still reached rmcp:\n{}", gw.logs());
}

/// The gateway's JSON parses on the message path so far, by side and direction
/// (`gateway_json_parses_total`, a debug counter).
fn parses(gw: &GatewayProcess) -> [u64; 4] {
    let text = gw.metrics();
    let count = |side: &str, direction: &str| {
        let wanted = format!("gateway_json_parses_total{{side=\"{side}\",direction=\"{direction}\"}}");
        metric_value(&text, &wanted).unwrap_or_else(|| panic!("no {wanted} in\n{text}"))
    };
    [count("host", "request"), count("host", "answer"), count("module", "request"), count("module", "answer")]
}

/// Issue 40: a proxied `tools/call` is parsed once where it enters (the gate) and the app's
/// answer once where it comes off the wire (to route it by its id) on each side of the module
/// boundary — at most one parse per direction on each side — over stdio and HTTP apps, on
/// `/apps/mcp/{appId}` and on `/mcp` (where the host reads the result once to shape it for a
/// model), from a 2026-07-28 client and from one in an initialize-era session. The rest travels
/// as text.
#[test]
fn a_proxied_tool_call_is_parsed_once_per_direction_on_each_side() {
    let (_dir, gw) = gateway_with_apps("pcs", "pch");
    const CALLS: u64 = 20;
    for app in ["pcs", "pch"] {
        for (path, tool) in [(format!("/apps/mcp/{app}"), "echo".to_string()), ("/mcp".to_string(), format!("{app}.echo"))] {
            // 2026-07-28, stateless.
            let before = parses(&gw);
            for i in 0..CALLS {
                let reply = post(&gw, &path, &tool, json!({ "text": format!("call {i}") }), json!({}), false);
                assert_eq!(reply.messages[0]["result"]["content"][0]["text"], format!("echo: call {i}"), "{path}: {reply:?}");
            }
            let after = parses(&gw);
            let per_call: Vec<f64> = after.iter().zip(before).map(|(a, b)| (a - b) as f64 / CALLS as f64).collect();
            assert_eq!(per_call, vec![1.0, 1.0, 1.0, 1.0], "{path}, 2026-07-28: parses per call [host request, host answer, module request, module answer]");
            // In an initialize-era session (the short way serves its plain calls too).
            let headers = open_session(&gw, &path, json!({}));
            let before = parses(&gw);
            for i in 0..CALLS {
                let response = send_raw(&gw, &path, &headers, &session_call(100 + i, &tool, &json!({ "text": "in a session" }), false));
                let text = response.text().unwrap();
                assert!(text.contains("in a session"), "{path}: {text}");
            }
            let after = parses(&gw);
            let per_call: Vec<f64> = after.iter().zip(before).map(|(a, b)| (a - b) as f64 / CALLS as f64).collect();
            assert_eq!(per_call, vec![1.0, 1.0, 1.0, 1.0], "{path}, in a session: parses per call [host request, host answer, module request, module answer]");
        }
    }
}
