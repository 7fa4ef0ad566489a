//! The short way through both MCP endpoints (`gateway-host/src/http/pass_through.rs`): a plain
//! 2026-07-28 `tools/call` is answered without rmcp's server in between. It must answer exactly
//! what the protocol library's path answers. The same request with a progress token in `_meta`
//! (which the short way leaves to rmcp) takes the long way, so every case is sent both ways to
//! the real gateway and the two answers compared: status, content type, the JSON-RPC messages.
//! Over stdio and Streamable HTTP apps, on `/apps/mcp/{app}` and `/mcp`.

mod support;

use std::time::Duration;

use gateway_e2e::{wait_until, GatewayProcess};
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
    let text = reqwest::blocking::get(gw.url("/metrics")).unwrap().text().unwrap();
    let wanted = format!("gateway_proxied_requests_total{{app=\"{app}\",method=\"tools/call\",outcome=\"{outcome}\"}}");
    text.lines().find_map(|l| l.strip_prefix(&wanted)).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

#[test]
fn the_short_way_answers_what_the_protocol_library_answers() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    write_manifest(&apps, "pts", &stdio_app("pts", &[]));
    write_manifest(&apps, "pth", &http_app("pth", &[]));
    let gw = GatewayProcess::start(json!({
        "Gateway": { "AlwaysRequireAuth": false },
        "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [apps], "Allow": ["*"] } }
    }));
    let tools = || reqwest::blocking::get(gw.url("/tools")).ok().and_then(|r| r.text().ok()).unwrap_or_default();
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(100), || tools().contains("pts.echo") && tools().contains("pth.echo")),
        "the apps never came up\n{}",
        gw.logs()
    );
    let cases: &[(&str, Value)] = &[
        ("echo", json!({ "text": "hi from both ways" })),
        ("fail", json!({ "message": "a tool error" })),
        ("no-such-tool", json!({})),
        ("echo", json!({ "text": 5 })),
        // Log messages the app sends during the call turn the reply into an SSE stream.
        ("log", json!({ "level": "error", "message": "while working", "count": 2 })),
    ];
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
    // The short way is counted like the long one.
    assert!(proxied(&gw, "pts", "ok") >= 2 && proxied(&gw, "pts", "tool_error") >= 2, "{}", reqwest::blocking::get(gw.url("/metrics")).unwrap().text().unwrap());
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
