//! Amplification and memory (issue 16). Measured before: one 600 KB batch of 10,000
//! `tools/list` requests on `/apps/mcp/{id}` took 7 s and lifted the gateway from 16 MB to
//! 315 MB resident, and memory never came back after bursts. Now a batch is refused at once
//! (batches left MCP with 2025-06-18) without growing the gateway, and after a burst of large
//! concurrent answers the gateway's resident size returns near its idle size (the allocator is
//! trimmed once the size settles, `gateway-host/src/memory.rs`).

mod support;

use std::time::Duration;

use gateway_e2e::{wait_until, GatewayProcess};
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
