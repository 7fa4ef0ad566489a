//! Amplification and memory (issue 16). Measured before: one 600 KB batch of 10,000
//! `tools/list` requests on `/apps/mcp/{id}` took 7 s and lifted the gateway from 16 MB to
//! 315 MB resident, and memory never came back after bursts. Now a batch is refused at once
//! (batches left MCP with 2025-06-18) without growing the gateway, and after a burst of large
//! concurrent answers the gateway's resident size returns near its idle size (the allocator is
//! trimmed once the size settles, `gateway-host/src/memory.rs`).

mod support;

use std::time::Duration;

use gateway_e2e::{metric_value, wait_until, GatewayProcess};
use serde_json::{json, Value};
use support::*;

fn meta() -> Value {
    json!({ "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} })
}

fn post(client: &reqwest::blocking::Client, url: &str, method: &str, name: Option<&str>, body: String) -> (u16, String) {
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = name {
        request = request.header("mcp-name", name);
    }
    let response = request.body(body).send().unwrap();
    (response.status().as_u16(), response.text().unwrap())
}

#[test]
fn a_huge_batch_is_refused_at_once_and_memory_returns_after_a_burst() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    // 300 tools on one page and a 1 MiB UI resource: large answers.
    write_manifest(&apps, "t", &stdio_app("t", &["--tools-count", "300", "--page-size", "0", "--ui-size-kb", "1024"]));
    let gw = GatewayProcess::start(json!({
        "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [apps], "Allow": ["*"] } }
    }));
    assert!(wait_until(Duration::from_secs(30), Duration::from_millis(100), || gw.get("/apps/health").1.contains("\"running\"")), "{}", gw.logs());
    let url = gw.url("/apps/mcp/t");
    let client = reqwest::blocking::Client::builder().no_proxy().timeout(Duration::from_secs(120)).build().unwrap();
    // Warm up (the app's catalogue, the first sessions), then take the idle size.
    for i in 0..5 {
        let body = json!({ "jsonrpc": "2.0", "id": i, "method": "tools/list", "params": { "_meta": meta() } }).to_string();
        assert_eq!(post(&client, &url, "tools/list", None, body).0, 200);
    }
    std::thread::sleep(Duration::from_secs(2));
    let idle = gw.rss_kib() / 1024;

    // 10,000 tools/list in one batch (~600 KB): refused as a whole, nothing runs.
    let batch: Vec<Value> =
        (0..10_000).map(|i| json!({ "jsonrpc": "2.0", "id": i, "method": "tools/list", "params": { "_meta": meta() } })).collect();
    let (status, answer) = post(&client, &url, "tools/list", None, Value::Array(batch).to_string());
    assert_eq!(status, 400, "{answer}");
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("batches"), "{answer}");
    let after_batch = gw.rss_kib() / 1024;
    assert!(after_batch <= idle + 8, "a refused batch grew the gateway from {idle} to {after_batch} MiB");

    // A burst: 3 rounds of 160 concurrent large answers (tools/list of 300 tools, a 1 MiB resource).
    let mut peak = 0;
    for _ in 0..3 {
        let workers: Vec<_> = (0..160)
            .map(|i| {
                let (client, url) = (client.clone(), url.clone());
                std::thread::spawn(move || {
                    let (method, name, params) = if i % 4 == 0 {
                        ("resources/read", Some("ui://test-app/app.html"), json!({ "uri": "ui://test-app/app.html", "_meta": meta() }))
                    } else {
                        ("tools/list", None, json!({ "_meta": meta() }))
                    };
                    let body = json!({ "jsonrpc": "2.0", "id": i, "method": method, "params": params }).to_string();
                    let (status, text) = post(&client, &url, method, name, body);
                    status == 200 && text.len() > 30_000
                })
            })
            .collect();
        let ok = workers.into_iter().map(|w| w.join().unwrap()).filter(|ok| *ok).count();
        assert_eq!(ok, 160, "every call of the burst answered in full");
        peak = peak.max(gw.rss_kib() / 1024);
    }
    // Back near the idle size once the burst is over (before: it stayed ~50 MiB above for good).
    let settled = wait_until(Duration::from_secs(60), Duration::from_millis(500), || gw.rss_kib() / 1024 <= idle + 16);
    let after = gw.rss_kib() / 1024;
    println!("{}", json!({ "rss_mib_idle": idle, "rss_mib_peak": peak, "rss_mib_after": after }));
    assert!(settled, "resident size: {idle} MiB idle, {peak} MiB at the burst's peak, still {after} MiB a minute later");
}

/// A 2026-07-28 request to `/mcp` as a plain client or as an MCP Apps host (`app_host`); its
/// error message, or `None` for a result.
fn mcp_error(gw: &GatewayProcess, method: &str, name: &str, params: Value, app_host: bool) -> Option<String> {
    let (headers, body) = stateless_request(method, name, params, "amplification-e2e");
    let mut body: Value = serde_json::from_str(&body).unwrap();
    if app_host {
        body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({ "extensions": { "io.modelcontextprotocol/ui": {} } });
    }
    let client = reqwest::blocking::Client::builder().no_proxy().timeout(Duration::from_secs(30)).build().unwrap();
    let mut request = client.post(gw.url("/mcp")).body(body.to_string());
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let answer: Value = serde_json::from_str(&request.send().unwrap().text().unwrap()).unwrap();
    answer.get("error").map(|e| e["message"].as_str().unwrap_or_default().to_string())
}

/// A name no app has (a tool, a resource's URI, a prompt) costs a lookup, not a listing of
/// every app: it listed every app's tools twice, 88 ms of the gateway's CPU per call with
/// 10,000 tools. The views the host keeps of the apps list them again after the module
/// reports a change (`gateway_module_listings_total`), and an app that has just come up is
/// callable at once, as before.
#[test]
fn names_no_app_has_cost_no_listing_of_the_apps() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    write_manifest(&apps, "t", &stdio_app("t", &["--tools-count", "2000", "--page-size", "0"]));
    let gw = GatewayProcess::start(json!({
        "Gateway": { "AlwaysRequireAuth": false },
        "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [apps], "Allow": ["*"] } }
    }));
    assert!(wait_until(Duration::from_secs(30), Duration::from_millis(100), || gw.get("/tools").1.contains("t.extra_1999")), "{}", gw.logs());
    let listings = || {
        let text = gw.metrics();
        let count = |view: &str| metric_value(&text, &format!("gateway_module_listings_total{{view=\"{view}\"}}")).unwrap_or(0);
        (count("tools"), count("apps"))
    };
    // The debounced refresh after the app came up has landed once the counts hold still.
    let mut before = listings();
    assert!(
        wait_until(Duration::from_secs(10), Duration::from_millis(500), || {
            let now = listings();
            std::mem::replace(&mut before, now) == now
        }),
        "the listings never settled: {before:?}"
    );
    assert!(before.0 >= 1 && before.1 >= 1, "{before:?}");

    for i in 0..40 {
        for app_host in [false, true] {
            let message = mcp_error(&gw, "tools/call", &format!("t.nothing_{i}"), json!({ "name": format!("t.nothing_{i}"), "arguments": {} }), app_host);
            assert!(message.as_deref().is_some_and(|m| m.contains("unknown tool")), "{message:?}");
        }
        let uri = format!("ui://nobody-{i}/x");
        assert!(mcp_error(&gw, "resources/read", &uri, json!({ "uri": uri }), false).is_some());
        let prompt = format!("zz{i}.p");
        assert!(mcp_error(&gw, "prompts/get", &prompt, json!({ "name": prompt }), false).is_some());
    }
    assert_eq!(listings(), before, "names no app has listed the apps again");
    assert_eq!(mcp_error(&gw, "tools/call", "t.extra_7", json!({ "name": "t.extra_7", "arguments": {} }), false), None);

    // A change is news: an app that comes up is callable on /mcp as soon as it is running.
    write_manifest(&apps, "u", &stdio_app("u", &[]));
    assert!(wait_until(Duration::from_secs(30), Duration::from_millis(20), || gw.get("/apps/health").1.contains(r#""id":"u""#) && app_running(&gw, "u")), "{}", gw.logs());
    assert_eq!(mcp_error(&gw, "tools/call", "u.echo", json!({ "name": "u.echo", "arguments": { "text": "up" } }), false), None);
    // (The miss above listed the tools; the debounced refresh after the news lists both views.)
    assert!(wait_until(Duration::from_secs(10), Duration::from_millis(100), || { let after = listings(); after.0 > before.0 && after.1 > before.1 }), "{before:?} → {:?}", listings());
}

fn app_running(gw: &GatewayProcess, id: &str) -> bool {
    let (_, body) = gw.get_json("/apps/health");
    body["apps"].as_array().is_some_and(|apps| apps.iter().any(|a| a["id"] == id && a["state"] == "running"))
}
