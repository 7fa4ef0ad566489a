//! Secrets stay secret (issue 16's security tests beyond the auth matrix): the gateway token never
//! appears in the gateway's logs (debug level, every way of presenting it, right or wrong) nor in
//! any answer, and an app cannot read it from its environment.

mod support;

use std::time::Duration;

use gateway_e2e::{wait_until, GatewayOptions, GatewayProcess};
use serde_json::json;
use support::*;

const TOKEN: &str = "s3cret-gateway-token-4f9a2c71e0";
const WRONG: &str = "wrong-token-guess-77a1c3d9b2e5";

#[test]
fn the_token_appears_in_no_log_line_and_no_answer_and_apps_cannot_read_it() {
    let dir = tempfile::tempdir().unwrap();
    write_manifest(&dir.path().join("apps"), "peek", &stdio_app("peek", &["--env-echo", "GATEWAY_AUTH_TOKEN", "--env-echo", "SECURITY_TOKEN"]));
    let config = json!({
        "Gateway": { "AlwaysRequireAuth": true, "AuthTokenEnv": "SECURITY_TOKEN", "AllowQueryStringToken": true },
        "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [dir.path().join("apps")], "Allow": ["*"] } }
    });
    let gw = GatewayProcess::start_with(GatewayOptions {
        config,
        env: vec![
            ("SECURITY_TOKEN".into(), TOKEN.into()),
            ("GATEWAY_AUTH_TOKEN".into(), TOKEN.into()),
            ("RUST_LOG".into(), "debug".into()),
        ],
        ..Default::default()
    });
    let client = gw.client();
    let get = |path: &str, token: Option<&str>| {
        let mut request = client.get(gw.url(path));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().unwrap();
        (response.status().as_u16(), response.text().unwrap())
    };
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(100), || get("/apps/health", Some(TOKEN)).1.contains("\"running\"")),
        "{}",
        gw.logs()
    );

    // Every way in, right and wrong: header, query string, cookie session, the exchange itself.
    let mut answers = Vec::new();
    for path in ["/apps/health", "/healthz", "/tools", "/metrics", "/admin/workspace/mcp", "/apps/sessions"] {
        for token in [Some(TOKEN), Some(WRONG), None] {
            answers.push(get(path, token).1);
        }
        answers.push(client.get(gw.url(&format!("{path}?token={TOKEN}"))).send().unwrap().text().unwrap());
        answers.push(client.get(gw.url(&format!("{path}?token={WRONG}"))).send().unwrap().text().unwrap());
    }
    let exchanged = client.post(gw.url("/auth/session")).json(&json!({ "token": TOKEN })).send().unwrap();
    assert!(exchanged.status().is_success());
    let cookie = exchanged.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_string();
    assert!(!cookie.contains(TOKEN), "the session cookie is not the token: {cookie}");
    answers.push(exchanged.text().unwrap());
    answers.push(client.post(gw.url("/auth/session")).json(&json!({ "token": WRONG })).send().unwrap().text().unwrap());
    answers.push(client.get(gw.url("/apps/health")).header("cookie", &cookie).send().unwrap().text().unwrap());

    // The app asks its own environment for the token under both names.
    let call = client
        .post(gw.url("/apps/mcp/peek"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "env")
        .body(
            json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "env", "arguments": {}, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": { "name": "e2e", "version": "1" },
                "io.modelcontextprotocol/clientCapabilities": {} } } })
            .to_string(),
        )
        .send()
        .unwrap();
    assert_eq!(call.status().as_u16(), 200);
    let env_answer = call.text().unwrap();
    assert!(env_answer.contains("GATEWAY_AUTH_TOKEN"), "the env tool answered: {env_answer}");
    answers.push(env_answer);

    for answer in &answers {
        assert!(!answer.contains(TOKEN), "an answer shows the token: {answer}");
    }
    std::thread::sleep(Duration::from_millis(300));
    let logs = gw.logs();
    assert!(logs.contains("DEBUG"), "the gateway logged at debug level");
    for secret in [TOKEN, WRONG] {
        let leaks: Vec<&str> = logs.lines().filter(|l| l.contains(secret)).collect();
        assert!(leaks.is_empty(), "log lines show a token: {leaks:?}");
    }
}
