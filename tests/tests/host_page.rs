//! The browser host page's server side (SPEC R38, issue 12), end to end over the real gateway:
//! `/` and `/apps` redirect to `/apps/`, the page and its assets (headers, the CSP naming the
//! sandbox origin), the sandbox listener (its own origin, its two files, the CSP built from
//! `?csp=`, nothing else served), the auth exemption of the static files only, and
//! `/apps/events` (the app list at connect, again after a change, ending cleanly at shutdown).
//!
//! The page's behaviour in a browser is the front-end's tests' business (tests/js); this file
//! speaks raw HTTP so every status and header shows.

mod support;

use std::io::{BufRead as _, BufReader};
use std::time::Duration;

use gateway_e2e::{free_port, wait_until, GatewayOptions, GatewayProcess};
use reqwest::blocking::{Client, RequestBuilder};
use serde_json::{json, Value};
use support::*;

const TOKEN: &str = "e2e-host-page-token-0123456789";
/// The sandbox's CSP when an app declares nothing (the MCP Apps spec's default).
const STRICT_CSP: &str = "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; \
                          img-src 'self' data:; media-src 'self' data:; connect-src 'none'; frame-src 'none'; \
                          base-uri 'self'; object-src 'none'";

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A configuration scanning `dir/apps`; `gateway` is merged into the `Gateway` section.
fn config(dir: &std::path::Path, gateway: Value) -> Value {
    std::fs::create_dir_all(dir.join("apps")).unwrap();
    let mut config = json!({
        "Gateway": { "AuthTokenEnv": "GATEWAY_E2E_TOKEN_NOT_SET" },
        "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [dir.join("apps")], "Allow": ["*"] } }
    });
    for (k, v) in gateway.as_object().unwrap() {
        config["Gateway"][k] = v.clone();
    }
    config
}

/// A client that does not follow redirects (the redirects are under test) and bounds every
/// request, streamed bodies included, by `timeout`.
fn client(timeout: Duration) -> Client {
    Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .connect_timeout(Duration::from_secs(5))
        .no_proxy()
        .build()
        .unwrap()
}

struct Reply {
    status: u16,
    headers: reqwest::header::HeaderMap,
    text: String,
}

impl Reply {
    fn header(&self, name: &str) -> String {
        self.headers.get(name).map(|v| v.to_str().unwrap().to_string()).unwrap_or_default()
    }
}

fn send(request: RequestBuilder) -> Reply {
    let response = request.send().expect("request");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().unwrap_or_default();
    Reply { status, headers, text }
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn port_of(origin: &str) -> u16 {
    origin.rsplit_once(':').and_then(|(_, p)| p.parse().ok()).unwrap_or_else(|| panic!("no port in {origin}"))
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

/// A Server-Sent Events reader over a streamed response.
struct Events {
    reader: BufReader<reqwest::blocking::Response>,
}

impl Events {
    fn open(request: RequestBuilder) -> Events {
        let response = request.header("accept", "text/event-stream").send().expect("GET /apps/events");
        assert_eq!(response.status().as_u16(), 200);
        let content_type = response.headers().get("content-type").unwrap().to_str().unwrap().to_string();
        assert!(content_type.starts_with("text/event-stream"), "{content_type}");
        Events { reader: BufReader::new(response) }
    }

    /// The next event as (name, data); `Ok(None)` at a clean end of the stream; `Err` when the
    /// read fails (the client's timeout, or a connection cut without the final chunk).
    fn next(&mut self) -> Result<Option<(String, String)>, String> {
        let (mut name, mut data) = (String::new(), Vec::<String>::new());
        loop {
            let mut line = String::new();
            let n = self.reader.read_line(&mut line).map_err(|e| e.to_string())?;
            if n == 0 {
                return Ok(None);
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if !data.is_empty() {
                    return Ok(Some((name, data.join("\n"))));
                }
                name.clear();
                continue;
            }
            if let Some(v) = line.strip_prefix("event:") {
                name = v.trim_start().to_string();
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push(v.strip_prefix(' ').unwrap_or(v).to_string());
            }
            // Comments (`:` keep-alives) and other fields are skipped.
        }
    }

    /// The next `apps` event's `apps` array (panics on end or error).
    fn next_apps(&mut self) -> Vec<Value> {
        loop {
            match self.next() {
                Ok(Some((name, data))) if name == "apps" => {
                    let value: Value = serde_json::from_str(&data).unwrap_or_else(|e| panic!("not JSON ({e}): {data}"));
                    return value["apps"].as_array().unwrap_or_else(|| panic!("no apps array: {value}")).clone();
                }
                Ok(Some(_)) => continue,
                Ok(None) => panic!("/apps/events ended"),
                Err(e) => panic!("/apps/events: {e}"),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[test]
fn host_page_sandbox_and_events_on_an_open_gateway() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    write_manifest(&apps, "t", &stdio_app("t", &[]));
    let mut gw = GatewayProcess::start(config(dir.path(), json!({})));
    assert!(gw.find_log("Sandbox listening on http://127.0.0.1:").is_some(), "{}", gw.logs());
    wait_running(&gw, "t");
    let http = client(Duration::from_secs(30));

    // Redirects to the page.
    for path in ["/", "/apps"] {
        let reply = send(http.get(gw.url(path)));
        assert_eq!(reply.status, 308, "{path}");
        assert_eq!(reply.header("location"), "/apps/", "{path}");
    }

    // The sandbox origin: an http origin on another port of the name the client used.
    let (status, health) = gw.get_json("/apps/health");
    assert_eq!(status, 200);
    let sandbox = health["sandbox"].as_str().unwrap_or_else(|| panic!("no sandbox: {health}")).to_string();
    assert!(sandbox.starts_with("http://127.0.0.1:"), "{sandbox}");
    assert_ne!(port_of(&sandbox), port_of(gw.base_url()));

    // The page: HTML, and a CSP that frames exactly the sandbox origin.
    let page = send(http.get(gw.url("/apps/")));
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(page.header("content-type").starts_with("text/html"), "{}", page.header("content-type"));
    let csp = page.header("content-security-policy");
    assert!(csp.contains(&format!("frame-src {sandbox};")), "{csp}");
    for directive in ["default-src 'self'", "script-src 'self'", "object-src 'none'", "base-uri 'none'", "frame-ancestors 'none'"] {
        assert!(csp.contains(directive), "{directive}: {csp}");
    }
    let assets = ["host.js", "host.css", "theme.js"].map(|a| send(http.get(gw.url(&format!("/apps/assets/{a}")))));
    for reply in std::iter::once(&page).chain(&assets) {
        assert_eq!(reply.status, 200);
        assert_eq!(reply.header("x-content-type-options"), "nosniff");
        assert_eq!(reply.header("referrer-policy"), "no-referrer");
        assert_eq!(reply.header("cache-control"), "no-cache");
    }
    assert_eq!(send(http.get(gw.url("/apps/assets/host.js"))).header("content-type"), "text/javascript; charset=utf-8");
    assert_eq!(send(http.get(gw.url("/apps/assets/theme.js"))).header("content-type"), "text/javascript; charset=utf-8");
    assert_eq!(send(http.get(gw.url("/apps/assets/host.css"))).header("content-type"), "text/css; charset=utf-8");
    assert_eq!(send(http.get(gw.url("/apps/assets/index.html"))).status, 404);

    // The DNS-rebinding check still covers the page while the gateway is open.
    assert_eq!(send(http.get(gw.url("/apps/")).header("host", "evil.example")).status, 403);

    // The sandbox page with the strict default policy.
    let strict = send(http.get(format!("{sandbox}/sandbox")));
    assert_eq!(strict.status, 200, "{}", strict.text);
    assert!(strict.header("content-type").starts_with("text/html"));
    assert_eq!(strict.header("content-security-policy"), STRICT_CSP);
    assert_eq!(strict.header("x-content-type-options"), "nosniff");
    assert_eq!(strict.header("referrer-policy"), "no-referrer");
    assert_eq!(strict.header("cache-control"), "no-store");

    // A declared connect domain is allowed; a hostile value is dropped (and logged).
    let declared = json!({ "connectDomains": ["https://api.example.com", "https://evil.example; script-src *"] });
    let reply = send(http.get(format!("{sandbox}/sandbox?csp={}", encode(&declared.to_string()))));
    assert_eq!(reply.status, 200);
    let csp = reply.header("content-security-policy");
    assert!(csp.contains("connect-src https://api.example.com;"), "{csp}");
    assert!(!csp.contains("evil.example"), "{csp}");
    assert!(gw.wait_for_log("evil.example; script-src *", Duration::from_secs(5)), "no warning\n{}", gw.logs());

    let script = send(http.get(format!("{sandbox}/sandbox/sandbox.js")));
    assert_eq!(script.status, 200);
    assert_eq!(script.header("content-type"), "text/javascript; charset=utf-8");

    // Nothing else lives on the sandbox origin.
    for path in ["/apps/health", "/mcp", "/", "/apps/", "/healthz", "/sandbox/other.js"] {
        assert_eq!(send(http.get(format!("{sandbox}{path}"))).status, 404, "{path}");
    }
    assert_eq!(send(http.post(format!("{sandbox}/mcp")).body("{}")).status, 404);
    assert_eq!(send(http.post(format!("{sandbox}/sandbox")).body("{}")).status, 404);
    // Open gateway: the sandbox answers loopback names only.
    assert_eq!(send(http.get(format!("{sandbox}/sandbox")).header("host", "evil.example")).status, 403);
    let localhost = sandbox.replace("127.0.0.1", "localhost");
    assert_eq!(send(http.get(format!("{localhost}/sandbox"))).status, 200);

    // /apps/events: the list at connect, the same entries /apps/health lists.
    let stream_client = client(Duration::from_secs(90));
    let mut events = Events::open(stream_client.get(gw.url("/apps/events")));
    let first = events.next_apps();
    let t = first.iter().find(|a| a["id"] == "t").unwrap_or_else(|| panic!("no t: {first:?}"));
    assert_eq!(t["mcp"], json!(gw.url("/apps/mcp/t")));
    assert_eq!(t["state"], "running");
    assert_eq!(first, health["apps"].as_array().unwrap().clone());

    // A new app (picked up by the manifest watcher) is sent without asking, to every stream open
    // (they share the module's listing of a burst), each with its own `Host`'s URLs.
    let mut more: Vec<(Events, String)> = (0..6).map(|_| (Events::open(stream_client.get(gw.url("/apps/events"))), gw.url("/apps/mcp/u"))).collect();
    let by_name = gw.url("/apps/events").replace("127.0.0.1", "localhost");
    more.push((Events::open(stream_client.get(&by_name)), gw.url("/apps/mcp/u").replace("127.0.0.1", "localhost")));
    for (stream, _) in more.iter_mut() {
        stream.next_apps();
    }
    write_manifest(&apps, "u", &stdio_app("u", &[]));
    for (stream, mcp) in std::iter::once((&mut events, gw.url("/apps/mcp/u"))).chain(more.iter_mut().map(|(s, m)| (s, m.clone()))) {
        loop {
            let list = stream.next_apps();
            if let Some(u) = list.iter().find(|a| a["id"] == "u" && a["state"] == "running") {
                assert_eq!(u["mcp"], json!(mcp), "{u}");
                break;
            }
        }
    }
    drop(more);

    // Shutdown ends the stream cleanly (the final chunk arrives) instead of holding the stop up.
    let mut events = Events::open(client(Duration::from_secs(30)).get(gw.url("/apps/events")));
    events.next_apps();
    gw.signal(libc::SIGTERM);
    loop {
        match events.next() {
            Ok(None) => break,
            Ok(Some(_)) => continue,
            Err(e) => panic!("the stream did not end cleanly at shutdown: {e}\n{}", gw.logs()),
        }
    }
    let status = gw.wait_exit(Duration::from_secs(20)).expect("the gateway exits");
    assert!(status.success(), "{status}\n{}", gw.logs());
}

#[test]
fn with_auth_required_only_the_static_files_are_public() {
    let dir = tempfile::tempdir().unwrap();
    write_manifest(&dir.path().join("apps"), "t", &stdio_app("t", &[]));
    let gw = GatewayProcess::start(config(dir.path(), json!({ "AlwaysRequireAuth": true, "AuthToken": TOKEN })));
    let http = client(Duration::from_secs(30));

    for path in ["/apps/", "/apps/assets/host.js", "/apps/assets/host.css", "/apps/assets/theme.js"] {
        assert_eq!(send(http.get(gw.url(path))).status, 200, "{path}");
    }
    assert_eq!(send(http.get(gw.url("/"))).status, 308);
    assert_eq!(send(http.get(gw.url("/apps"))).status, 308);
    // Only GET is exempt, and nothing that holds data.
    assert_eq!(send(http.post(gw.url("/apps/")).body("")).status, 401);
    for path in ["/apps/health", "/apps/events", "/apps/sessions", "/tools", "/apps/assets/"] {
        let reply = send(http.get(gw.url(path)));
        assert_eq!(reply.status, 401, "{path}: {}", reply.text);
    }

    // With the token: the health (naming the sandbox) and the events.
    let reply = send(http.get(gw.url("/apps/health")).bearer_auth(TOKEN));
    assert_eq!(reply.status, 200, "{}", reply.text);
    let health: Value = serde_json::from_str(&reply.text).unwrap();
    let sandbox = health["sandbox"].as_str().unwrap().to_string();
    let page = send(http.get(gw.url("/apps/")));
    assert!(page.header("content-security-policy").contains(&format!("frame-src {sandbox};")));
    let mut events = Events::open(client(Duration::from_secs(60)).get(gw.url("/apps/events")).bearer_auth(TOKEN));
    assert!(events.next_apps().iter().any(|a| a["id"] == "t"));

    // The sandbox needs no credentials (static files only).
    let reply = send(http.get(format!("{sandbox}/sandbox")));
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-security-policy"), STRICT_CSP);
}

#[test]
fn a_sandbox_on_a_gateway_address_is_refused_at_startup() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let result = GatewayProcess::try_start_with(GatewayOptions {
        config: config(dir.path(), json!({ "SandboxUrls": url })),
        extra_args: vec!["--urls".into(), url.clone()],
        ..Default::default()
    });
    let message = match result {
        Ok(gw) => panic!("the gateway started\n{}", gw.logs()),
        Err(message) => message,
    };
    assert!(message.contains("Gateway.SandboxUrls") && message.contains("also a gateway listen address"), "{message}");

    // A configured fixed port is used as given.
    let sandbox_port = free_port();
    let gw = GatewayProcess::start(config(dir.path(), json!({ "SandboxUrl": format!("http://127.0.0.1:{sandbox_port}") })));
    assert_eq!(gw.get_json("/apps/health").1["sandbox"], json!(format!("http://127.0.0.1:{sandbox_port}")));
}
