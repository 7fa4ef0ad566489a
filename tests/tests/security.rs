//! Secrets stay secret (issue 16's security tests beyond the auth matrix): the gateway token never
//! appears in the gateway's logs (debug level, every way of presenting it, right or wrong) nor in
//! any answer, and an app cannot read it from its environment; a page of another site (or of
//! another port of the same host, such as an app's sandbox) cannot use a browser's session cookie
//! to change anything or to read data, nor drive an open gateway's agent (a change must come as
//! JSON from the gateway's own origin, or carry the token); an app's UI reaches only its own app's
//! tools, and of those not the model-only ones.

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

/// A tools/call as an app's UI sends it on `/apps/mcp/{app}` (2026-07-28, stateless), with the
/// given extra headers, answered as (status, body).
fn ui_call(gw: &GatewayProcess, app: &str, tool: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let body = json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": { "name": tool, "arguments": {}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": "ui", "version": "1" },
        "io.modelcontextprotocol/clientCapabilities": {} } } });
    let mut request = gw
        .client()
        .post(gw.url(&format!("/apps/mcp/{app}")))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().unwrap();
    (response.status().as_u16(), response.text().unwrap())
}

#[test]
fn cross_site_writes_with_the_cookie_are_refused_and_app_uis_reach_only_their_own_tools() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    write_manifest(&apps, "a", &stdio_app("a", &["--extra-tool", "only_in_a"]));
    write_manifest(&apps, "b", &stdio_app("b", &["--extra-tool", "only_in_b"]));
    let config = json!({
        "Gateway": { "AlwaysRequireAuth": true, "AuthTokenEnv": "SECURITY_TOKEN" },
        "Security": { "AllowedOrigins": ["https://trusted.example"] },
        "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [apps], "Allow": ["*"] } }
    });
    let gw = GatewayProcess::start_with(GatewayOptions {
        config,
        env: vec![("SECURITY_TOKEN".into(), TOKEN.into())],
        ..Default::default()
    });
    let health = || gw.client().get(gw.url("/apps/health")).bearer_auth(TOKEN).send().unwrap().text().unwrap();
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(100), || health().matches("\"running\"").count() == 2),
        "{}",
        gw.logs()
    );
    let exchanged = gw.client().post(gw.url("/auth/session")).json(&json!({ "token": TOKEN })).send().unwrap();
    let cookie = exchanged.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_string();
    let own_origin = gw.base_url().trim_end_matches('/').to_string();
    let sandbox_like = format!("http://127.0.0.1:{}", gateway_e2e::free_port());
    let cookie = cookie.as_str();
    let served = |(status, body): (u16, String)| status == 200 && body.contains("called on");

    // The gateway's own page (same origin), a trusted origin, or no browser marks at all: served.
    assert!(served(ui_call(&gw, "a", "only_in_a", &[("cookie", cookie), ("origin", &own_origin)])), "own origin");
    assert!(served(ui_call(&gw, "a", "only_in_a", &[("cookie", cookie), ("origin", "https://trusted.example")])), "allowed origin");
    assert!(served(ui_call(&gw, "a", "only_in_a", &[("cookie", cookie)])), "no Origin (not a browser)");
    assert!(
        served(ui_call(&gw, "a", "only_in_a", &[("cookie", cookie), ("sec-fetch-site", "same-origin")])),
        "Sec-Fetch-Site: same-origin"
    );

    // Another site, another port of the same host (an app's sandbox), or the browser's own mark of
    // a cross-site request: refused with 403 naming why, on every route that changes something.
    for (what, headers) in [
        ("a foreign site", vec![("origin", "https://evil.example")]),
        ("another port of this host", vec![("origin", sandbox_like.as_str())]),
        ("an opaque origin", vec![("origin", "null")]),
        ("Sec-Fetch-Site: cross-site", vec![("sec-fetch-site", "cross-site")]),
        ("Sec-Fetch-Site: same-site", vec![("sec-fetch-site", "same-site")]),
    ] {
        let mut with_cookie = headers.clone();
        with_cookie.push(("cookie", cookie));
        let (status, body) = ui_call(&gw, "a", "only_in_a", &with_cookie);
        assert_eq!(status, 403, "{what}: {body}");
        assert!(body.contains("cross_site_request") && body.contains("Bearer"), "{what}: {body}");
        for (method, path) in [
            (reqwest::Method::POST, "/apps/chat"),
            (reqwest::Method::DELETE, "/apps/sessions/some-session"),
            (reqwest::Method::POST, "/apps/mcp/a"),
        ] {
            let mut request = gw.client().request(method.clone(), gw.url(path)).header("content-type", "application/json");
            for (name, value) in &with_cookie {
                request = request.header(*name, *value);
            }
            let response = request.body("{}").send().unwrap();
            assert_eq!(response.status().as_u16(), 403, "{what}: {method} {path}");
        }
        // The same request with the token itself is the caller's own choice: not refused for its origin.
        let mut with_token: Vec<(&str, String)> = headers.iter().map(|(k, v)| (*k, v.to_string())).collect();
        with_token.push(("authorization", format!("Bearer {TOKEN}")));
        let with_token: Vec<(&str, &str)> = with_token.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert!(served(ui_call(&gw, "a", "only_in_a", &with_token)), "{what} with the token");
    }
    // Reading with the cookie: from the page itself, yes; from a page the browser marks as another
    // site's (or another port's of this host), no — unless that page's origin is allowed.
    let read = |path: &str, headers: &[(&str, &str)]| {
        let mut request = gw.client().get(gw.url(path)).header("cookie", cookie);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().unwrap();
        (response.status().as_u16(), response.text().unwrap())
    };
    for path in ["/apps/sessions", "/apps/health"] {
        assert_eq!(read(path, &[("sec-fetch-site", "same-origin")]).0, 200, "{path} from the page");
        assert_eq!(read(path, &[]).0, 200, "{path} without browser marks");
        for site in ["cross-site", "same-site"] {
            let (status, body) = read(path, &[("sec-fetch-site", site)]);
            assert_eq!(status, 403, "{path} marked {site}: {body}");
            assert!(body.contains("cross_site_request") && body.contains(site), "{path}: {body}");
            let (status, body) = read(path, &[("sec-fetch-site", site), ("origin", sandbox_like.as_str())]);
            assert_eq!(status, 403, "{path} marked {site} from {sandbox_like}: {body}");
        }
        let (status, body) = read(path, &[("sec-fetch-site", "cross-site"), ("origin", "https://trusted.example")]);
        assert_eq!(status, 200, "{path} from an allowed origin: {body}");
    }
    // The host page itself stays reachable from a link anywhere.
    assert_eq!(read("/apps/", &[("sec-fetch-site", "cross-site")]).0, 200);
    // Even from the page, a change must come as JSON: a form's or a text/plain body is refused.
    for content_type in ["text/plain;charset=UTF-8", "application/x-www-form-urlencoded"] {
        let response = gw
            .client()
            .post(gw.url("/apps/chat"))
            .header("cookie", cookie)
            .header("origin", &own_origin)
            .header("content-type", content_type)
            .body(r#"{"message":"hi"}"#)
            .send()
            .unwrap();
        let status = response.status().as_u16();
        let body: serde_json::Value = response.json().unwrap();
        assert_eq!(status, 415, "{content_type}: {body}");
        assert_eq!(body["error"]["code"], "unsupported_media_type", "{body}");
    }

    // An app's UI reaches its own app only: b's tool is unknown to a, under its own name and under
    // the registry's prefixed name, while b serves it; a model-only tool is refused to every UI.
    let bearer = format!("Bearer {TOKEN}");
    let headers = [("authorization", bearer.as_str())];
    assert!(served(ui_call(&gw, "b", "only_in_b", &headers)), "b serves its own tool");
    for name in ["only_in_b", "b.only_in_b", "b_only_in_b", "../b/only_in_b"] {
        let (status, body) = ui_call(&gw, "a", name, &headers);
        assert!(!body.contains("called on"), "a's UI reached {name}: {status} {body}");
        assert!(body.contains("\"error\"") || body.contains("\"isError\":true"), "{name}: {status} {body}");
    }
    for app in ["a", "b"] {
        let (status, body) = ui_call(&gw, app, "model_only", &headers);
        assert!(body.contains("not visible to apps"), "{app}: {status} {body}");
    }
    let (status, body) = ui_call(&gw, "a%2F..%2Fb", "only_in_b", &headers);
    assert!(body.contains("Unknown McpApp 'a/../b'") && !body.contains("called on"), "an app id with a path in it: {status} {body}");
}

/// An open gateway (loopback, no token required) and a browser: any local page — an HTTP app's
/// own page on another port, say — could post to `/apps/chat` without a preflight (a form, or a
/// `text/plain` fetch) and so drive the agent and its tools. The gateway takes a change only as
/// JSON, and only from its own origin (or an allowed one), unless the token itself comes along.
/// The scripted model counts the turns that actually ran.
#[test]
fn an_open_gateway_runs_a_chat_turn_only_for_json_from_its_own_origin_or_the_token() {
    let llm = gateway_e2e::scripted_llm::ScriptedLlm::start();
    llm.respond_with(|_| gateway_e2e::scripted_llm::Reply::text(["turn ran"]));
    let dir = tempfile::tempdir().unwrap();
    let config = json!({
        "Gateway": { "AuthTokenEnv": "SECURITY_TOKEN", "DataPath": dir.path().join("data") },
        "Agent": { "BaseUrl": llm.base_url(), "Model": "scripted", "TimeoutSeconds": 30 },
        "Security": { "AllowedOrigins": ["http://localhost:5173"] },
        "OpenClaw": { "McpApps": { "Enabled": false } }
    });
    let gw = GatewayProcess::start_with(GatewayOptions {
        config,
        env: vec![("SECURITY_TOKEN".into(), TOKEN.into())],
        ..Default::default()
    });
    let own_origin = gw.base_url().trim_end_matches('/').to_string();
    let other_port = format!("http://127.0.0.1:{}", gateway_e2e::free_port());
    let chat = |content_type: Option<&str>, body: &str, headers: &[(&str, &str)]| {
        let mut request = gw.client().post(gw.url("/apps/chat")).body(body.to_string());
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().unwrap();
        (response.status().as_u16(), response.text().unwrap())
    };
    let message = r#"{"message":"list the apps"}"#;
    let foreign = [("origin", other_port.as_str()), ("sec-fetch-site", "same-site")];

    // What a page on another port can send without a preflight: refused before any turn.
    for (content_type, body) in [
        (Some("text/plain;charset=UTF-8"), message),
        (Some("application/x-www-form-urlencoded"), "message=list+the+apps"),
        (Some("multipart/form-data; boundary=b"), "--b\r\nContent-Disposition: form-data; name=\"message\"\r\n\r\nhi\r\n--b--\r\n"),
        (None, message),
    ] {
        let (status, text) = chat(content_type, body, &foreign);
        assert_eq!(status, 415, "{content_type:?}: {text}");
        let error: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(error["error"]["code"], "unsupported_media_type", "{text}");
        let said = error["error"]["message"].as_str().unwrap();
        assert!(said.contains("application/json"), "names the type expected: {said}");
        let received = content_type.map_or("no Content-Type".to_string(), |t| t.split(';').next().unwrap().to_string());
        assert!(said.contains(&received), "names the type received ({received}): {said}");
    }
    // JSON from another origin's page (which would need a preflight, but the browser's marks and
    // the Origin say where it comes from): refused too.
    for headers in [
        foreign.to_vec(),
        vec![("origin", other_port.as_str())],
        vec![("origin", "http://localhost:5000")],
        vec![("sec-fetch-site", "cross-site")],
    ] {
        let (status, text) = chat(Some("application/json"), message, &headers);
        assert_eq!(status, 403, "{headers:?}: {text}");
        assert!(text.contains("cross_site_request"), "{text}");
    }
    // The MCP endpoint answers the same way (rmcp's own 415 was plain text).
    let response = gw
        .client()
        .post(gw.url("/mcp"))
        .header("content-type", "text/plain")
        .header("origin", other_port.as_str())
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 415);
    assert_eq!(response.json::<serde_json::Value>().unwrap()["error"]["code"], "unsupported_media_type");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(llm.request_count(), 0, "a refused request ran a turn");

    // The gateway's own page, an allowed origin, the token from anywhere, a program (no browser
    // marks): each runs its turn.
    let bearer = format!("Bearer {TOKEN}");
    let accepted: [(&str, Vec<(&str, &str)>); 4] = [
        ("own origin", vec![("origin", own_origin.as_str()), ("sec-fetch-site", "same-origin")]),
        ("allowed origin", vec![("origin", "http://localhost:5173"), ("sec-fetch-site", "same-site")]),
        ("the token", vec![foreign[0], foreign[1], ("authorization", bearer.as_str())]),
        ("no browser", vec![]),
    ];
    for (i, (what, headers)) in accepted.iter().enumerate() {
        let (status, text) = chat(Some("application/json; charset=utf-8"), message, headers);
        assert_eq!(status, 200, "{what}: {text}");
        assert!(text.contains("turn ran"), "{what}: {text}");
        assert_eq!(llm.request_count(), i + 1, "{what}: the turn reached the model");
    }
    // A change without a body needs no type: ending a session from the page.
    let response = gw.client().delete(gw.url("/apps/sessions/no-such-session")).header("origin", own_origin.as_str()).send().unwrap();
    let status = response.status().as_u16();
    assert!(status != 415 && status != 403, "DELETE without a body: {status} {}", response.text().unwrap());
}
