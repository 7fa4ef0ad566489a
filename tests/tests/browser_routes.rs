//! The browser host routes (issue 6): `/apps/mcp/{appId}` over a real gateway and real apps,
//! `/apps/health`, the auth matrix (R36), the DNS-rebinding defence, and CORS (R37).
//!
//! The official TypeScript and Python clients are exercised by `tests/js/apps-mcp.test.mjs` and
//! `tests/py/test_apps_mcp.py`; this file speaks raw HTTP so that every status and header shows.

mod support;

use std::time::Duration;

use gateway_e2e::{free_port, wait_until, GatewayOptions, GatewayProcess};
use reqwest::blocking::{Client, RequestBuilder, Response};
use serde_json::{json, Value};
use support::*;

const TOKEN: &str = "e2e-token-0123456789abcdef";

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A gateway configuration scanning `dir/apps`; `gateway` is merged into the `Gateway` section and
/// `extra` into the root.
fn config(dir: &std::path::Path, gateway: Value, extra: Value) -> Value {
    let mut config = json!({
        "Gateway": { "AuthTokenEnv": "GATEWAY_E2E_TOKEN_NOT_SET" },
        "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [dir.join("apps")], "Allow": ["*"] } }
    });
    for (k, v) in gateway.as_object().unwrap() {
        config["Gateway"][k] = v.clone();
    }
    for (k, v) in extra.as_object().unwrap() {
        config[k] = v.clone();
    }
    config
}

struct Reply {
    status: u16,
    headers: reqwest::header::HeaderMap,
    text: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }
    fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).map(|v| v.to_str().unwrap().to_string())
    }
}

fn send(request: RequestBuilder) -> Reply {
    let response: Response = request.send().expect("request");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().unwrap_or_default();
    Reply { status, headers, text }
}

/// POST a raw body to `/apps/mcp/{app}{query}`, as an initialize-era client of `session`
/// (`""`: none yet).
fn post_raw(gw: &GatewayProcess, app_and_query: &str, session: &str, body: &str) -> Reply {
    let mut request = gw
        .client()
        .post(gw.url(&format!("/apps/mcp/{app_and_query}")))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if !session.is_empty() {
        request = request.header("mcp-session-id", session).header("mcp-protocol-version", "2025-11-25");
    }
    send(request.body(body.to_string()))
}

/// POSTs a body of `length` bytes to `path` as an HTTP client library does (reqwest: it reads
/// the answer only once it has written the body, or when writing fails): the first `first`
/// bytes, a pause in which the gateway sees them, then the rest.
fn post_in_two_parts(gw: &GatewayProcess, path: &str, first: usize, length: usize) -> Reply {
    /// `length` spaces, with a pause after the first `first`.
    struct Paused {
        sent: usize,
        first: usize,
        length: usize,
    }
    impl std::io::Read for Paused {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.sent == self.first {
                std::thread::sleep(Duration::from_millis(300));
            }
            let end = if self.sent < self.first { self.first } else { self.length };
            let n = buf.len().min(end - self.sent);
            buf[..n].fill(b' ');
            self.sent += n;
            Ok(n)
        }
    }
    let body = reqwest::blocking::Body::sized(Paused { sent: 0, first, length }, length as u64);
    send(
        gw.client()
            .post(gw.url(path))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body),
    )
}

/// The JSON-RPC message with `id` in a reply, whether it came as JSON or as an SSE stream.
fn message_with_id(reply: &Reply, id: &Value) -> Value {
    if reply.header("content-type").is_some_and(|c| c.starts_with("text/event-stream")) {
        reply
            .text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|m| &m["id"] == id)
            .unwrap_or_else(|| panic!("no message with id {id} in {}", reply.text))
    } else {
        reply.json()
    }
}

/// Opens an initialize-era session at `/apps/mcp/{app}` (the handshake, then `initialized`).
fn open_session(gw: &GatewayProcess, app: &str, version: &str) -> (String, Value) {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}});
    let reply = post_raw(gw, app, "", &init.to_string());
    assert_eq!(reply.status, 200, "initialize: {}", reply.text);
    let session = reply.header("mcp-session-id").unwrap_or_else(|| panic!("no Mcp-Session-Id: {}", reply.text));
    let result = message_with_id(&reply, &json!(0));
    let done = post_raw(gw, app, &session, &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string());
    assert_eq!(done.status, 202, "{}", done.text);
    (session, result)
}

/// One JSON-RPC request in `session` → its response object.
fn rpc(gw: &GatewayProcess, app_and_query: &str, session: &str, method: &str, params: Value) -> Value {
    let reply = post_raw(gw, app_and_query, session, &json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string());
    assert_eq!(reply.status, 200, "{method}: {}", reply.text);
    message_with_id(&reply, &json!(7))
}

fn wait_running(gw: &GatewayProcess, id: &str) {
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(100), || {
            gw.get_json("/apps/health").1["apps"]
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x["id"] == id && x["state"] == "running"))
        }),
        "app {id} did not start\n{}",
        gw.logs()
    );
}

fn app_state(gw: &GatewayProcess, id: &str) -> String {
    let (_, health) = gw.get_json("/apps/health");
    health["apps"].as_array().unwrap().iter().find(|a| a["id"] == id).map(|a| a["state"].as_str().unwrap().to_string()).unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// /apps/mcp/{appId} and /apps/health
// ---------------------------------------------------------------------------------------------

#[test]
fn apps_mcp_speaks_mcp_forwards_and_refuses_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    let mut ui = stdio_app("t", &["--ui-size-kb", "3072"]);
    ui["hasUi"] = json!(true);
    ui["uiResourceUri"] = json!("ui://test-app/app.html");
    ui["capabilities"] = json!(["tools", "resources"]);
    write_manifest(&apps, "t", &ui);
    write_manifest(&apps, "off", &stdio_app("off", &[]));
    let mut dead = stdio_app("dead", &["--never-ready"]);
    dead["startupTimeoutSeconds"] = json!(1);
    write_manifest(&apps, "dead", &dead);
    let mut cfg = config(dir.path(), json!({ "MaxRequestBytes": 5_000_000 }), json!({}));
    cfg["OpenClaw"]["McpApps"]["Entries"] = json!({ "off": { "Enabled": false } });
    let gw = GatewayProcess::start(cfg);
    wait_running(&gw, "t");

    // /apps/health (R31): anchor fields, the featured app's URL, every app with its own URL.
    let (status, health) = gw.get_json("/apps/health");
    assert_eq!(status, 200);
    assert_eq!(health["ok"], true);
    assert_eq!(health["name"], "gateway-host");
    assert_eq!(health["mcp"], json!(gw.url("/apps/mcp/t")), "{health}");
    assert!(health.as_object().unwrap().contains_key("sandbox"), "{health}");
    let t = health["apps"].as_array().unwrap().iter().find(|a| a["id"] == "t").unwrap().clone();
    for key in [
        "id", "name", "version", "state", "transport", "tools", "resources", "resourceTemplates", "prompts", "hasUi",
        "uiResourceUri", "lastError", "validationErrors", "mcp",
    ] {
        assert!(t.as_object().unwrap().contains_key(key), "apps[] lacks {key}: {t}");
    }
    assert_eq!(t["mcp"], json!(gw.url("/apps/mcp/t")));
    assert_eq!(t["transport"], "stdio");
    assert_eq!(t["hasUi"], true);

    // initialize is answered by the gateway (rmcp's session machinery); the version is negotiated.
    let (session, init) = open_session(&gw, "t", "2025-03-26");
    assert_eq!(init["result"]["protocolVersion"], "2025-03-26", "{init}");
    assert!(init["result"]["serverInfo"]["name"].as_str().unwrap().contains('t'), "{init}");
    assert!(init["result"]["capabilities"]["tools"].is_object(), "{init}");
    assert!(init["result"]["capabilities"]["resources"].is_object(), "{init}");
    let (_, init) = open_session(&gw, "t", "2099-01-01");
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    // server/discover needs no session (2026-07-28 is stateless).
    let discover = send(
        gw.client()
            .post(gw.url("/apps/mcp/t"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "server/discover")
            .body(json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}).to_string()),
    );
    let discover = message_with_id(&discover, &json!(1));
    assert!(discover["result"]["supportedVersions"].as_array().unwrap().contains(&json!("2026-07-28")), "{discover}");
    assert_eq!(discover["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "gateway-host/t", "{discover}");

    // An initialize-era request without a session is refused: the session carries the client's
    // capabilities and the stream the app's questions ride on.
    let reply = post_raw(&gw, "t", "", &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string());
    assert_eq!(reply.status, 400, "{}", reply.text);
    // The transport's refusals are JSON-RPC errors as every other answer of the endpoint (rmcp
    // writes them as plain text), the status telling which; `Allow` stays on a 405.
    let refusal = |reply: &Reply, status: u16, says: &str| {
        assert_eq!(reply.status, status, "{}", reply.text);
        assert_eq!(reply.header("content-type").as_deref(), Some("application/json"), "{}", reply.text);
        let error = reply.json();
        assert_eq!((error["jsonrpc"].as_str(), &error["id"], &error["error"]["code"]), (Some("2.0"), &Value::Null, &json!(-32000)), "{error}");
        assert!(error["error"]["message"].as_str().unwrap().contains(says), "{error}");
    };
    refusal(&reply, 400, "Session ID is required");
    refusal(&send(gw.client().get(gw.url("/apps/mcp/t"))), 406, "text/event-stream");
    let put = send(gw.client().put(gw.url("/apps/mcp/t")));
    refusal(&put, 405, "Method Not Allowed");
    assert!(put.header("allow").is_some_and(|a| a.contains("POST")), "{:?}", put.headers);
    let unknown = gw.client().get(gw.url("/mcp")).header("accept", "text/event-stream").header("mcp-session-id", "no-such-session");
    refusal(&send(unknown), 404, "Session not found");
    // So is a DELETE of a session the endpoint does not know (rmcp would end nothing and say yes).
    for path in ["/apps/mcp/t", "/mcp"] {
        let delete = gw.client().delete(gw.url(path)).header("mcp-session-id", "no-such-session").header("mcp-protocol-version", "2025-11-25");
        refusal(&send(delete), 404, "Session not found");
    }
    // `/mcp` is the endpoint under any path below it too, through the same doors.
    for path in ["/mcp/", "/mcp/below/it"] {
        let below = gw.client().post(gw.url(path)).header("content-type", "application/json").header("accept", "application/json, text/event-stream");
        refusal(&send(below.body(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}).to_string())), 400, "Session ID is required");
    }

    // tools/list passes through unfiltered and unprefixed (pages and all).
    let mut names: Vec<String> = Vec::new();
    let mut params = json!({});
    loop {
        let page = rpc(&gw, "t", &session, "tools/list", params);
        names.extend(page["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()));
        match page["result"]["nextCursor"].as_str() {
            Some(cursor) => params = json!({ "cursor": cursor }),
            None => break,
        }
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    for name in ["echo", "echo_meta", "app_only", "model_only", "show_ui"] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    assert!(!names.iter().any(|n| n.starts_with("t.")), "{names:?}");

    // sessionId injection (Must show 3): the upstream app sees it in _meta.
    let meta = rpc(&gw, "t?sessionId=browser-session-42", &session, "tools/call", json!({"name": "echo_meta", "arguments": {}}));
    assert_eq!(meta["result"]["structuredContent"]["sessionId"], "browser-session-42", "{meta}");
    let meta = rpc(&gw, "t?sessionId=s2", &session, "tools/call", json!({"name": "echo_meta", "arguments": {}, "_meta": {"progressToken": 5}}));
    assert_eq!(meta["result"]["structuredContent"]["sessionId"], "s2", "{meta}");

    // Visibility: app-only callable, model-only refused.
    let ok = rpc(&gw, "t", &session, "tools/call", json!({"name": "app_only", "arguments": {}}));
    assert_eq!(ok["result"]["content"][0]["text"], "app only", "{ok}");
    let refused = rpc(&gw, "t", &session, "tools/call", json!({"name": "model_only", "arguments": {}}));
    assert!(refused["error"]["message"].as_str().unwrap().contains("not visible to apps"), "{refused}");

    // A large UI resource passes intact.
    let read = rpc(&gw, "t", &session, "resources/read", json!({"uri": "ui://test-app/app.html"}));
    let html = read["result"]["contents"][0]["text"].as_str().unwrap();
    assert!(html.len() >= 3072 * 1024, "{} bytes", html.len());
    assert!(html.trim_end().ends_with("</html>"), "{}", &html[html.len() - 200..]);

    // A client must accept both JSON and the event stream (Streamable HTTP).
    let reply = send(
        gw.client()
            .post(gw.url("/apps/mcp/t"))
            .header("content-type", "application/json")
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &session)
            .body(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string()),
    );
    assert_eq!(reply.status, 406, "{}", reply.text);

    // Malformed input (Must show 6): JSON-RPC errors with HTTP 400, nothing could be answered;
    // batches left MCP in 2025-06-18 and are refused by name.
    for (body, code, says) in [
        ("{not json", -32700, "Parse error"),
        ("", -32700, "Parse error"),
        ("[]", -32600, "batches"),
        (r#"[{"jsonrpc":"2.0","id":"a","method":"ping"}]"#, -32600, "batches"),
        ("42", -32600, "Invalid Request"),
        (r#"{"jsonrpc":"2.0","id":3}"#, -32600, "Invalid Request"),
        // Strict input (issue 16): a body that means two things to two parsers is refused.
        (r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","method":"tools/list"}"#, -32600, "\"method\" appears twice"),
        (r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","Name":"crash"}}"#, -32600, "differ only in case"),
    ] {
        let reply = post_raw(&gw, "t", &session, body);
        assert_eq!(reply.status, 400, "{body}: {}", reply.text);
        assert_eq!(reply.json()["error"]["code"], code, "{body}: {}", reply.text);
        assert!(reply.json()["error"]["message"].as_str().unwrap().contains(says), "{body}: {}", reply.text);
    }
    // An object of 300,000 keys (4 MB) is checked for repeats in linear time: compared key by
    // key with every earlier one it held the gateway's worker for minutes. The last key repeats
    // one of the first in another case; without it the call reaches the app.
    let many: String = (0..300_000).map(|i| format!(r#""k{i}":0,"#)).collect();
    let repeated = format!(r#"{{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{{"name":"echo","arguments":{{{many}"K7":1}}}}}}"#);
    let reply = post_raw(&gw, "t", &session, &repeated);
    assert_eq!(reply.status, 400, "{}", &reply.text[..reply.text.len().min(300)]);
    assert!(reply.text.contains(r#"the keys \"k7\" and \"K7\" of one object differ only in case"#), "{}", &reply.text[..reply.text.len().min(300)]);
    let distinct = format!(r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"echo","arguments":{{{many}"text":"many"}}}}}}"#);
    let reply = post_raw(&gw, "t", &session, &distinct);
    assert_eq!(reply.status, 200, "{}", &reply.text[..reply.text.len().min(300)]);
    assert!(reply.text.contains("echo: many"), "{}", &reply.text[..reply.text.len().min(300)]);
    let unknown_method = rpc(&gw, "t", &session, "sampling/createMessage", json!({}));
    assert_eq!(unknown_method["error"]["code"], -32601, "{unknown_method}");
    let reply = post_raw(&gw, "t", &session, &format!(r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#, "x".repeat(6_000_000)));
    assert_eq!(reply.status, 413, "{}", &reply.text[..reply.text.len().min(300)]);
    assert!(reply.json()["error"]["message"].as_str().unwrap().contains("exceeds"));
    // A client still writing its body when the gateway has decided gets the 413 too, not a
    // reset connection: the gateway reads the rest before it answers and closes.
    let refused = post_in_two_parts(&gw, "/apps/mcp/t", 5_000_001, 6_000_000);
    assert_eq!(refused.status, 413, "{}", refused.text);
    assert!(refused.text.contains("exceeds 5000000 bytes"), "{}", refused.text);

    // Unknown and not-running apps: errors naming the app and its state (the session was opened
    // at a running app; the URL picks the app for each request).
    for method in ["tools/list", "tools/call"] {
        let e = rpc(&gw, "nope", &session, method, json!({"name": "echo"}));
        assert_eq!(e["error"]["code"], -32010, "{method}: {e}");
        assert!(e["error"]["message"].as_str().unwrap().contains("'nope'"), "{e}");
        assert_eq!(e["error"]["data"]["appId"], "nope");
    }
    let init_nope = post_raw(&gw, "nope", "", &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}}).to_string());
    let e = message_with_id(&init_nope, &json!(0));
    assert_eq!(e["error"]["code"], -32010, "{e}");
    assert_eq!(app_state(&gw, "off"), "disabled");
    for method in ["tools/list", "resources/read"] {
        let e = rpc(&gw, "off", &session, method, json!({"uri": "ui://x"}));
        assert_eq!(e["error"]["code"], -32010, "{method}: {e}");
        assert_eq!(e["error"]["data"], json!({"appId": "off", "state": "disabled"}), "{e}");
        assert!(e["error"]["message"].as_str().unwrap().contains("disabled"), "{e}");
    }
    assert!(wait_until(Duration::from_secs(30), Duration::from_millis(200), || app_state(&gw, "dead") == "failed"));
    // (It may be retrying by now: any state but running.)
    let e = rpc(&gw, "dead", &session, "tools/list", json!({}));
    assert_eq!(e["error"]["data"]["appId"], "dead", "{e}");
    assert!(e["error"]["data"]["state"].as_str().is_some_and(|s| s != "running"), "{e}");

    // DELETE ends the session; it is gone afterwards.
    let reply = send(gw.client().delete(gw.url("/apps/mcp/t")).header("mcp-session-id", &session).header("mcp-protocol-version", "2025-11-25"));
    assert_eq!(reply.status, 200, "{}", reply.text);
    let reply = post_raw(&gw, "t", &session, &json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}).to_string());
    assert_eq!(reply.status, 404, "{}", reply.text);

    // And the gateway keeps serving.
    assert_eq!(gw.get("/healthz").0, 200);
    let (session, _) = open_session(&gw, "t", "2025-11-25");
    let again = rpc(&gw, "t", &session, "tools/call", json!({"name": "echo", "arguments": {"text": "still here"}}));
    assert_eq!(again["result"]["content"][0]["text"], "echo: still here");
    // The app id in the path is percent-decoded (as axum's `Path` decoded it); one that is no
    // UTF-8 then is refused, naming it.
    let decoded = rpc(&gw, "%74", &session, "tools/call", json!({"name": "echo", "arguments": {"text": "encoded"}}));
    assert_eq!(decoded["result"]["content"][0]["text"], "echo: encoded", "{decoded}");
    let reply = post_raw(&gw, "%FF", &session, &json!({"jsonrpc": "2.0", "id": 10, "method": "tools/list"}).to_string());
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert!(reply.json()["error"]["message"].as_str().unwrap().contains("'%FF' is not UTF-8"), "{}", reply.text);
}

/// A path no route serves and a method a route does not take are answered as JSON naming them,
/// behind the same front door as the routes: without credentials, they are refused first.
#[test]
fn unknown_paths_and_methods_are_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("apps")).unwrap();
    let cfg = config(dir.path(), json!({ "AlwaysRequireAuth": true, "AuthToken": "the-token" }), json!({}));
    let gw = GatewayProcess::start_with(GatewayOptions { config: cfg, ..Default::default() });
    let error = |reply: &Reply, status: u16, code: &str, says: &str| {
        assert_eq!(reply.status, status, "{}", reply.text);
        assert_eq!(reply.header("content-type").as_deref(), Some("application/json"), "{}", reply.text);
        let body = reply.json();
        assert_eq!(body["error"]["code"], code, "{body}");
        assert!(body["error"]["message"].as_str().unwrap().contains(says), "{body}");
    };
    for path in ["/nothing", "/apps/mcp/", "/apps/mcp/t/extra", "/apps/assets/x/y"] {
        error(&send(gw.client().get(gw.url(path))), 401, "unauthorized", "");
        error(&send(gw.client().get(gw.url(path)).bearer_auth("the-token")), 404, "no_such_route", &format!("No route for GET {path}"));
    }
    error(&send(gw.client().delete(gw.url("/nothing")).bearer_auth("the-token")), 404, "no_such_route", "DELETE /nothing");
    error(&send(gw.client().get(gw.url("/apps/chat"))), 401, "unauthorized", "");
    let wrong = send(gw.client().get(gw.url("/apps/chat")).bearer_auth("the-token"));
    error(&wrong, 405, "method_not_allowed", "GET is not allowed on /apps/chat");
    assert_eq!(wrong.header("allow").as_deref(), Some("POST"), "{:?}", wrong.headers);
    let wrong = send(gw.client().put(gw.url("/apps/sessions/s1")).bearer_auth("the-token"));
    error(&wrong, 405, "method_not_allowed", "PUT is not allowed on /apps/sessions/s1");
    assert!(wrong.header("allow").is_some_and(|a| a.contains("GET") && a.contains("PATCH") && a.contains("DELETE")), "{:?}", wrong.headers);
}

/// Upstream notifications reach an initialize-era client on its session's GET stream (R32).
#[test]
fn upstream_notifications_reach_the_sse_stream() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    write_manifest(&dir.path().join("apps"), "n", &stdio_app("n", &[]));
    let gw = GatewayProcess::start(config(dir.path(), json!({}), json!({})));
    wait_running(&gw, "n");
    let (session, _) = open_session(&gw, "n", "2025-11-25");
    let no_session = send(gw.client().get(gw.url("/apps/mcp/n")).header("accept", "text/event-stream"));
    assert_eq!(no_session.status, 400, "{}", no_session.text);

    let stream_client = Client::builder().timeout(Duration::from_secs(20)).no_proxy().build().unwrap();
    let mut stream = stream_client
        .get(gw.url("/apps/mcp/n"))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .unwrap();
    assert_eq!(stream.status().as_u16(), 200);
    assert!(stream.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    // Reading happens on a thread; the notification is triggered once the stream is open.
    let reader = std::thread::spawn(move || {
        let mut seen = String::new();
        let mut buf = [0u8; 4096];
        while !seen.contains("list_changed") {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
            }
        }
        seen
    });
    std::thread::sleep(Duration::from_millis(300));
    let added = rpc(&gw, "n", &session, "tools/call", json!({"name": "add_tool", "arguments": {"name": "fresh"}}));
    assert!(added["result"].is_object(), "{added}");
    let seen = reader.join().unwrap();
    assert!(seen.contains("notifications/tools/list_changed"), "stream got: {seen}");
}

// ---------------------------------------------------------------------------------------------
// Auth (R36)
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
enum Bind {
    Loopback,
    /// 0.0.0.0 (every interface); the test still only talks to 127.0.0.1.
    AllInterfaces,
}

#[derive(Debug, Clone, Copy)]
enum Cred {
    None,
    WrongBearer,
    RightBearer,
    Cookie,
    BogusCookie,
    RightQuery,
    WrongQuery,
}

const CREDS: [Cred; 7] =
    [Cred::None, Cred::WrongBearer, Cred::RightBearer, Cred::Cookie, Cred::BogusCookie, Cred::RightQuery, Cred::WrongQuery];

/// Headers a proxy (or an attacker) adds to claim a loopback client; never a credential.
const FORWARDED: [&[(&str, &str)]; 4] = [
    &[],
    &[("x-forwarded-for", "127.0.0.1")],
    &[("forwarded", "for=127.0.0.1;proto=http;by=127.0.0.1")],
    &[("x-real-ip", "127.0.0.1"), ("x-forwarded-for", "::1"), ("x-forwarded-host", "localhost")],
];

/// The SPEC's rule, independently stated: open iff loopback and not AlwaysRequireAuth; otherwise a
/// valid Bearer token, a valid session cookie, or (only when allowed) a valid `?token=`.
fn expected_open(bind: Bind, always: bool, allow_query: bool, cred: Cred) -> bool {
    if bind == Bind::Loopback && !always {
        return true;
    }
    match cred {
        Cred::RightBearer | Cred::Cookie => true,
        Cred::RightQuery => allow_query,
        _ => false,
    }
}

struct Target {
    gw: GatewayProcess,
    base: String,
}

fn start_for_matrix(bind: Bind, always: bool, allow_query: bool) -> Target {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("apps")).unwrap();
    let port = free_port();
    let urls = match bind {
        Bind::Loopback => format!("http://127.0.0.1:{port}"),
        Bind::AllInterfaces => format!("http://0.0.0.0:{port}"),
    };
    let cfg = config(
        dir.path(),
        json!({ "AlwaysRequireAuth": always, "AuthToken": TOKEN, "AllowQueryStringToken": allow_query }),
        json!({}),
    );
    let gw = GatewayProcess::start_with(GatewayOptions { config: cfg, extra_args: vec!["--urls".into(), urls], ..Default::default() });
    // Only ever talk to loopback.
    Target { gw, base: format!("http://127.0.0.1:{port}") }
}

fn session_cookie(t: &Target) -> String {
    let reply = send(t.gw.client().post(format!("{}/auth/session", t.base)).bearer_auth(TOKEN));
    assert_eq!(reply.status, 200, "{}", reply.text);
    let cookie = reply.header("set-cookie").expect("Set-Cookie");
    assert!(cookie.starts_with("gateway_session="), "{cookie}");
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attr), "{cookie} lacks {attr}");
    }
    let value = cookie.split(';').next().unwrap().to_string();
    assert_eq!(value.len(), "gateway_session=".len() + 64, "256-bit id in hex: {value}");
    value
}

fn request_with(t: &Target, path: &str, cred: Cred, cookie: &str, forwarded: &[(&str, &str)]) -> Reply {
    let sep = if path.contains('?') { '&' } else { '?' };
    let url = match cred {
        Cred::RightQuery => format!("{}{path}{sep}token={TOKEN}", t.base),
        Cred::WrongQuery => format!("{}{path}{sep}token=nope", t.base),
        _ => format!("{}{path}", t.base),
    };
    let mut request = t.gw.client().get(url);
    request = match cred {
        Cred::WrongBearer => request.bearer_auth("not-the-token"),
        Cred::RightBearer => request.bearer_auth(TOKEN),
        Cred::Cookie => request.header("cookie", cookie),
        Cred::BogusCookie => request.header("cookie", format!("gateway_session={}", "0".repeat(64))),
        _ => request,
    };
    for (k, v) in forwarded {
        request = request.header(*k, *v);
    }
    send(request)
}

#[test]
fn auth_matrix_opens_exactly_the_specified_cells() {
    let mut cells = 0;
    let mut failures = Vec::new();
    for bind in [Bind::Loopback, Bind::AllInterfaces] {
        for always in [false, true] {
            for allow_query in [false, true] {
                let t = start_for_matrix(bind, always, allow_query);
                let cookie = session_cookie(&t);
                for cred in CREDS {
                    for forwarded in FORWARDED {
                        // The MCP endpoints take the front door as a call of their own
                        // (`front_door.rs` `McpDoor`), not as the router's layer: both are here.
                        for path in ["/apps/health", "/healthz", "/apps/mcp/none", "/mcp"] {
                            cells += 1;
                            let reply = request_with(&t, path, cred, &cookie, forwarded);
                            // Once through auth, an MCP endpoint's GET answers 400 or 405 (no session), never 401/403.
                            let admitted = reply.status != 401 && reply.status != 403;
                            let want = expected_open(bind, always, allow_query, cred);
                            if admitted != want {
                                failures.push(format!(
                                    "{bind:?} always={always} query={allow_query} {cred:?} {forwarded:?} {path}: got {} {}",
                                    reply.status, reply.text
                                ));
                            }
                            if reply.status == 401 {
                                let body = reply.json();
                                if body["error"]["code"] != "unauthorized" || reply.header("www-authenticate").is_none() {
                                    failures.push(format!("401 without JSON body or WWW-Authenticate: {}", reply.text));
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} of {cells} cells wrong:\n{}", failures.len(), failures.join("\n"));
    assert_eq!(cells, 2 * 2 * 2 * CREDS.len() * FORWARDED.len() * 4);
}

#[test]
fn auth_session_and_token_sources() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("apps")).unwrap();
    let cfg = config(dir.path(), json!({ "AlwaysRequireAuth": true, "AuthTokenEnv": "E2E_GATEWAY_TOKEN" }), json!({}));
    let gw = GatewayProcess::start_with(GatewayOptions {
        config: cfg,
        env: vec![("E2E_GATEWAY_TOKEN".into(), "from-the-environment".into())],
        ..Default::default()
    });
    let t = Target { base: gw.base_url().to_string(), gw };
    // The token from the environment variable named by Gateway.AuthTokenEnv.
    let ok = send(t.gw.client().get(format!("{}/apps/health", t.base)).bearer_auth("from-the-environment"));
    assert_eq!(ok.status, 200);
    // POST /auth/session with a JSON body; wrong token refused; the cookie then admits.
    let bad = send(t.gw.client().post(format!("{}/auth/session", t.base)).json(&json!({"token": "wrong"})));
    assert_eq!(bad.status, 401);
    assert!(bad.header("set-cookie").is_none());
    // A body no token needs is refused by its size, naming it.
    let huge = send(t.gw.client().post(format!("{}/auth/session", t.base)).json(&json!({"token": "x".repeat(100_000)})));
    assert_eq!(huge.status, 413, "{}", huge.text);
    assert_eq!(huge.json()["error"]["code"], "too_large", "{}", huge.text);
    assert!(huge.json()["error"]["message"].as_str().unwrap().contains("65536 bytes"), "{}", huge.text);
    let good = send(t.gw.client().post(format!("{}/auth/session", t.base)).json(&json!({"token": "from-the-environment"})));
    assert_eq!(good.status, 200, "{}", good.text);
    let cookie = good.header("set-cookie").unwrap().split(';').next().unwrap().to_string();
    let with_cookie = send(t.gw.client().get(format!("{}/apps/health", t.base)).header("cookie", format!("a=b; {cookie}")));
    assert_eq!(with_cookie.status, 200);
    // No credential: 401 JSON with a Bearer challenge; a foreign Host does not matter once authenticated.
    let none = send(t.gw.client().get(format!("{}/apps/health", t.base)));
    assert_eq!(none.status, 401);
    assert_eq!(none.json()["error"]["code"], "unauthorized");
    assert!(none.header("www-authenticate").unwrap().starts_with("Bearer"));
    let foreign = send(t.gw.client().get(format!("{}/healthz", t.base)).bearer_auth("from-the-environment").header("host", "gateway.example.com"));
    assert_eq!(foreign.status, 200, "{}", foreign.text);
}

#[test]
fn refuses_to_start_when_auth_is_required_without_a_token() {
    for (gateway, urls, why) in [
        (json!({ "AlwaysRequireAuth": true }), "http://127.0.0.1:0".to_string(), "AlwaysRequireAuth"),
        (json!({}), format!("http://0.0.0.0:{}", free_port()), "non-loopback"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let result = GatewayProcess::try_start_with(GatewayOptions {
            config: config(dir.path(), gateway, json!({})),
            extra_args: vec!["--urls".into(), urls],
            ..Default::default()
        });
        let Err(output) = result else { panic!("the gateway started without a token ({why})") };
        assert!(output.contains("no token is configured"), "{output}");
        assert!(output.contains(why), "{output}");
    }
}

#[test]
fn open_gateway_refuses_foreign_host_and_origin() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("apps")).unwrap();
    let gw = GatewayProcess::start(config(dir.path(), json!({}), json!({ "Security": { "AllowedOrigins": ["https://allowed.example"] } })));
    let port = gw.base_url().rsplit(':').next().unwrap().to_string();
    let get = |host: Option<&str>, origin: Option<&str>| {
        let mut request = gw.client().get(gw.url("/apps/health"));
        if let Some(h) = host {
            request = request.header("host", h);
        }
        if let Some(o) = origin {
            request = request.header("origin", o);
        }
        send(request)
    };
    let cases: &[(Option<&str>, Option<&str>, u16)] = &[
        (None, None, 200),
        (Some("localhost"), None, 200),
        (Some(&*format!("localhost:{port}")), None, 200),
        (Some("app.localhost:8080"), None, 200),
        (Some("[::1]:5000"), None, 200),
        (Some("127.0.0.1"), Some("http://localhost:5173"), 200),
        (None, Some("http://127.0.0.1:9999"), 200),
        (None, Some("https://allowed.example"), 200),
        (Some("evil.example"), None, 403),
        (Some("localhost.evil.example"), None, 403),
        (Some("evil.example:80"), Some("http://localhost"), 403),
        (None, Some("http://evil.example"), 403),
        (None, Some("http://localhost.evil.example"), 403),
        (None, Some("null"), 403),
        (None, Some("https://allowed.example.evil"), 403),
    ];
    for (host, origin, want) in cases {
        let reply = get(*host, *origin);
        assert_eq!(reply.status, *want, "Host {host:?} Origin {origin:?}: {}", reply.text);
        if *want == 403 {
            assert!(reply.json()["error"]["code"].as_str().unwrap().starts_with("forbidden_"), "{}", reply.text);
        }
    }
    // The JSON-RPC endpoint is covered by the same check.
    let reply = send(
        gw.client()
            .post(gw.url("/apps/mcp/x"))
            .header("host", "rebound.example")
            .header("content-type", "application/json")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
    );
    assert_eq!(reply.status, 403);
}

// ---------------------------------------------------------------------------------------------
// CORS (R37)
// ---------------------------------------------------------------------------------------------

#[test]
fn cors_preflight_from_allowed_and_disallowed_origins() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("apps")).unwrap();
    // Auth required, so preflights (which never carry credentials) must be answered before auth.
    let gw = GatewayProcess::start(config(
        dir.path(),
        json!({ "AlwaysRequireAuth": true, "AuthToken": TOKEN }),
        json!({ "Security": { "AllowedOrigins": ["https://allowed.example", "http://localhost:5173/"] } }),
    ));
    // Both MCP endpoints, which take the front door as a call of their own (`McpDoor`).
    let preflight = |path: &str, origin: &str| {
        send(
            gw.client()
                .request(reqwest::Method::OPTIONS, gw.url(path))
                .header("origin", origin)
                .header("access-control-request-method", "POST")
                .header("access-control-request-headers", "authorization, content-type, mcp-protocol-version, mcp-session-id"),
        )
    };
    for (path, origin) in ["/apps/mcp/grocery-inventory", "/mcp"].iter().flat_map(|p| ["https://allowed.example", "http://localhost:5173"].map(|o| (*p, o))) {
        let ok = preflight(path, origin);
        assert!(ok.status == 204 || ok.status == 200, "{path} {origin}: {} {}", ok.status, ok.text);
        assert_eq!(ok.header("access-control-allow-origin").as_deref(), Some(origin), "{path}");
        let allowed = ok.header("access-control-allow-headers").unwrap().to_ascii_lowercase();
        for h in ["authorization", "content-type", "mcp-protocol-version", "mcp-session-id", "mcp-method", "mcp-name"] {
            assert!(allowed.contains(h), "{allowed} lacks {h}");
        }
        let methods = ok.header("access-control-allow-methods").unwrap();
        for m in ["GET", "POST", "DELETE", "OPTIONS"] {
            assert!(methods.contains(m), "{methods}");
        }
    }
    for (path, origin) in ["/apps/mcp/grocery-inventory", "/mcp"].iter().flat_map(|p| ["https://evil.example", "https://allowed.example.evil", "null"].map(|o| (*p, o))) {
        let refused = preflight(path, origin);
        assert!(refused.status >= 400, "{path} {origin}: {}", refused.status);
        let cors: Vec<_> = refused.headers.keys().filter(|k| k.as_str().starts_with("access-control-")).collect();
        assert!(cors.is_empty(), "{path} {origin}: CORS headers {cors:?}");
    }
    // Actual requests: the allowed origin can read the answer (including a 401) and Mcp-Session-Id.
    let allowed = send(
        gw.client()
            .post(gw.url("/apps/mcp/x"))
            .bearer_auth(TOKEN)
            .header("origin", "https://allowed.example")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}"#),
    );
    assert_eq!(allowed.status, 200, "{}", allowed.text);
    assert_eq!(allowed.header("access-control-allow-origin").as_deref(), Some("https://allowed.example"));
    assert!(allowed.header("access-control-expose-headers").unwrap().to_ascii_lowercase().contains("mcp-session-id"));
    let unauth = send(gw.client().get(gw.url("/apps/health")).header("origin", "https://allowed.example"));
    assert_eq!(unauth.status, 401);
    assert_eq!(unauth.header("access-control-allow-origin").as_deref(), Some("https://allowed.example"));
    let other = send(gw.client().get(gw.url("/apps/health")).bearer_auth(TOKEN).header("origin", "https://evil.example"));
    assert!(other.header("access-control-allow-origin").is_none());
}
