//! `/mcp` multiplexes everything its apps and workspace MCP servers offer (issue 38, SPEC R46),
//! seen by rmcp's client: lists that span apps page by page with the gateway's cursors, URIs
//! rewritten per app (two apps serving the same URI stay apart), prompts by prefix,
//! completions, subscriptions, log messages and list changes; app-only tools for MCP Apps hosts
//! only; `McpCompatibility.ToolsOnly` keeps the tools-only endpoint.
//!
//! The apps: `alpha` (stdio, initialize-era, its resources listed one per page, subscribable,
//! with a tool that logs unasked), `beta` (HTTP), `gamma` (whose resources/list fails) and the
//! workspace server `docs` (stdio) — all the test app, so all serve `ui://test-app/app.html`.

// Logging and resources/subscribe are what initialize-era clients use (deprecated by rmcp for 2026-07-28).
#![allow(deprecated)]

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use gateway_e2e::{wait_until, GatewayOptions, GatewayProcess};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, CompleteRequestParams, GetPromptRequestParams,
    LoggingMessageNotificationParam, PaginatedRequestParams, ReadResourceRequestParams, ResourceContents, ResourceUpdatedNotificationParam,
};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{json, Value};
use support::*;
use tokio::sync::mpsc;

const TOKEN: &str = "multiplex-token-0123456789abcdef";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// alpha, beta and docs on one gateway (see the module doc); `extra` merged into `OpenClaw`.
fn start(dir: &std::path::Path, extra: Value) -> GatewayProcess {
    let apps = dir.join("apps");
    let mut alpha = stdio_app("alpha", &["--resources-page-size", "1", "--resource-updates", "--log-tool"]);
    alpha["protocolVersion"] = json!("2025-11-25");
    write_manifest(&apps, "alpha", &alpha);
    write_manifest(&apps, "beta", &http_app("beta", &[]));
    write_manifest(&apps, "gamma", &stdio_app("gamma", &["--fail-list", "resources"]));
    let mut openclaw = json!({ "McpApps": { "Enabled": true, "DiscoveryPaths": [apps], "Allow": ["*"] } });
    if let (Some(base), Some(more)) = (openclaw.as_object_mut(), extra.as_object()) {
        base.extend(more.clone());
    }
    let config = json!({
        "Gateway": { "AlwaysRequireAuth": false, "AuthTokenEnv": "MULTIPLEX_TOKEN" },
        "OpenClaw": openclaw,
        "Plugins": { "Mcp": {
            "AllowedCommands": [test_app_bin()],
            "Servers": { "docs": { "Transport": "stdio", "Command": test_app_bin(), "ToolNamePrefix": "docs." } }
        } }
    });
    let gw = GatewayProcess::start_with(GatewayOptions {
        config,
        config_dir: Some(dir.to_path_buf()),
        env: vec![("MULTIPLEX_TOKEN".into(), TOKEN.into())],
        ..Default::default()
    });
    let ready = || {
        let (_, health) = gw.get_json("/apps/health");
        let (_, tools) = gw.get_json("/tools");
        let running = |id: &str| health.to_string().contains(&format!("\"id\":\"{id}\"")) && tools.to_string().contains(&format!("\"{id}.echo\""));
        running("alpha") && running("beta") && running("gamma") && tools.to_string().contains("\"docs.echo\"")
    };
    assert!(wait_until(Duration::from_secs(30), Duration::from_millis(100), ready), "the apps never came up\n{}", gw.logs());
    gw
}

/// What an initialize-era client of `/mcp` hears unasked, as `{"method", …}`.
#[derive(Clone)]
struct Heard {
    tx: mpsc::UnboundedSender<Value>,
    /// Declares the MCP Apps extension.
    app_host: bool,
}

impl ClientHandler for Heard {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.app_host {
            let ui = json!({ "mimeTypes": ["text/html;profile=mcp-app"] }).as_object().cloned().unwrap();
            capabilities.extensions = Some([("io.modelcontextprotocol/ui".to_string(), ui)].into_iter().collect());
        }
        ClientConfig::new(capabilities, rmcp::model::Implementation::new("multiplex-test", "1.0.0"))
    }

    async fn on_resource_updated(&self, params: ResourceUpdatedNotificationParam, _: NotificationContext<RoleClient>) {
        let _ = self.tx.send(json!({ "method": "resources/updated", "uri": params.uri }));
    }

    async fn on_resource_list_changed(&self, _: NotificationContext<RoleClient>) {
        let _ = self.tx.send(json!({ "method": "resources/list_changed" }));
    }

    async fn on_prompt_list_changed(&self, _: NotificationContext<RoleClient>) {
        let _ = self.tx.send(json!({ "method": "prompts/list_changed" }));
    }

    async fn on_logging_message(&self, params: LoggingMessageNotificationParam, _: NotificationContext<RoleClient>) {
        let _ = self.tx.send(json!({ "method": "message", "params": params }));
    }
}

type Client = RunningService<RoleClient, Heard>;

fn connect(runtime: &tokio::runtime::Runtime, gw: &GatewayProcess, app_host: bool) -> (Client, mpsc::UnboundedReceiver<Value>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let url = gw.url("/mcp");
    let client = runtime
        .block_on(async { Heard { tx, app_host }.serve(StreamableHttpClientTransport::from_uri(url)).await })
        .expect("connecting to /mcp");
    (client, rx)
}

fn page(cursor: Option<String>) -> Option<PaginatedRequestParams> {
    Some(serde_json::from_value(json!({ "cursor": cursor })).unwrap())
}

async fn call(client: &Client, tool: &str, args: Value) -> Result<CallToolResult, rmcp::service::ServiceError> {
    client.call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args.as_object().cloned().unwrap())).await
}

fn text_of(contents: &ResourceContents) -> String {
    match contents {
        ResourceContents::TextResourceContents { text, .. } => text.clone(),
        other => panic!("not text: {other:?}"),
    }
}

fn uri_of(contents: &ResourceContents) -> String {
    match contents {
        ResourceContents::TextResourceContents { uri, .. } | ResourceContents::BlobResourceContents { uri, .. } => uri.clone(),
        _ => String::new(),
    }
}

/// The first message heard for which `wanted` holds, acting again while none comes: what the
/// gateway sends before the client's GET stream is attached is lost (see upstream_listen.rs).
fn heard_after(
    runtime: &tokio::runtime::Runtime,
    heard: &mut mpsc::UnboundedReceiver<Value>,
    wanted: impl Fn(&Value) -> bool,
    mut act: impl FnMut(),
) -> Option<Value> {
    for _ in 0..8 {
        act();
        let until = std::time::Instant::now() + Duration::from_secs(2);
        while let Some(message) = runtime.block_on(async { tokio::time::timeout_at(until.into(), heard.recv()).await.ok().flatten() }) {
            if wanted(&message) {
                return Some(message);
            }
        }
    }
    None
}

#[test]
fn lists_span_the_apps_page_by_page_and_every_request_reaches_its_app() {
    let dir = tempfile::tempdir().unwrap();
    let gw = start(dir.path(), json!({}));
    let runtime = runtime();
    let (client, _heard) = connect(&runtime, &gw, false);
    let caps = client.peer_info().map(|i| serde_json::to_value(&i.capabilities).unwrap()).unwrap_or_default();
    for declared in ["tools", "resources", "prompts", "completions", "logging"] {
        assert!(caps.get(declared).is_some(), "{declared} not declared: {caps}");
    }
    assert_eq!(caps["resources"]["subscribe"], true, "alpha's subscriptions: {caps}");

    // resources/list, cursor by cursor: alpha's two resources come one per page (its own
    // cursor inside the gateway's), then beta's and docs' on the last page.
    let (mut uris, mut pages, mut cursor) = (Vec::new(), 0, None);
    loop {
        let result = runtime.block_on(client.list_resources(page(cursor.take()))).expect("resources/list");
        pages += 1;
        uris.extend(result.resources.iter().map(|r| r.uri.clone()));
        match result.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
        assert!(pages < 10, "the cursors never end: {uris:?}");
    }
    let expected: Vec<&str> = vec![
        "ui://alpha/test-app/app.html",
        "test://alpha/readme",
        "ui://beta/test-app/app.html",
        "test://beta/readme",
        "ui://mcp~docs/test-app/app.html",
        "test://mcp~docs/readme",
    ];
    assert_eq!(uris, expected, "every resource once, in discovery order (gamma's failing list left out)");
    // The warning is written before the answer, but the harness reads the gateway's output on
    // its own thread: wait for the line rather than race it.
    let warned = gw.wait_for_log("resources/list of McpApp 'gamma' failed, leaving it out", Duration::from_secs(10));
    assert!(warned, "{}", gw.logs());
    assert!(pages >= 2, "alpha's page size of 1 made more than one page: {pages}");
    let bad = runtime.block_on(client.list_resources(page(Some("not-a-cursor".into()))));
    assert!(format!("{bad:?}").contains("not a cursor"), "{bad:?}");

    // The same URI from three apps: three resources, each read from its own app, byte for byte.
    for app in ["alpha", "beta", "mcp~docs"] {
        let uri = format!("ui://{app}/test-app/app.html");
        let read = runtime.block_on(client.read_resource(ReadResourceRequestParams::new(uri.clone()))).expect("resources/read");
        assert_eq!(uri_of(&read.contents[0]), uri);
        let key = app.replace("mcp~", "mcp:");
        let message = json!({ "jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": { "uri": "ui://test-app/app.html" } });
        if key == "alpha" || key == "beta" {
            let (status, direct) = gw.mcp_request(&format!("/apps/mcp/{key}"), "resources/read", message["params"].clone(), json!({}));
            assert_eq!(status, 200, "{direct}");
            assert_eq!(text_of(&read.contents[0]), direct["result"]["contents"][0]["text"].as_str().unwrap(), "{app}'s page");
        } else {
            assert!(text_of(&read.contents[0]).contains("<h1>test-app UI</h1>"));
        }
    }
    let unknown = runtime.block_on(client.read_resource(ReadResourceRequestParams::new("ui://test-app/app.html")));
    assert!(format!("{unknown:?}").contains("names no resource of this gateway"), "{unknown:?}");

    // Templates and prompts carry the app; prompts/get and completions reach the right app.
    let templates: BTreeSet<String> =
        runtime.block_on(client.list_all_resource_templates()).unwrap().into_iter().map(|t| t.uri_template.clone()).collect();
    assert!(templates.contains("test://beta/items/{id}") && templates.contains("test://mcp~docs/items/{id}"), "{templates:?}");
    let prompts: BTreeSet<String> = runtime.block_on(client.list_all_prompts()).unwrap().into_iter().map(|p| p.name).collect();
    for name in ["alpha.greet", "beta.summarize", "docs.greet"] {
        assert!(prompts.contains(name), "{name} missing from {prompts:?}");
    }
    let params: GetPromptRequestParams = serde_json::from_value(json!({ "name": "docs.greet", "arguments": { "name": "Ada" } })).unwrap();
    let prompt = runtime.block_on(client.get_prompt(params)).expect("prompts/get");
    assert!(serde_json::to_string(&prompt).unwrap().contains("Say hello to Ada."), "{prompt:?}");
    let unknown: GetPromptRequestParams = serde_json::from_value(json!({ "name": "delta.greet", "arguments": {} })).unwrap();
    assert!(format!("{:?}", runtime.block_on(client.get_prompt(unknown))).contains("unknown prompt 'delta.greet'"));
    let complete = |reference: Value, name: &str, value: &str| -> Vec<String> {
        let params: CompleteRequestParams =
            serde_json::from_value(json!({ "ref": reference, "argument": { "name": name, "value": value } })).unwrap();
        runtime.block_on(client.complete(params)).expect("completion/complete").completion.values
    };
    assert_eq!(complete(json!({ "type": "ref/prompt", "name": "beta.greet" }), "name", "a"), vec!["alice"]);
    assert_eq!(complete(json!({ "type": "ref/resource", "uri": "test://mcp~docs/items/{id}" }), "id", "4"), vec!["42"]);
    let item = runtime.block_on(client.read_resource(ReadResourceRequestParams::new("test://alpha/items/7"))).unwrap();
    assert_eq!((uri_of(&item.contents[0]), text_of(&item.contents[0])), ("test://alpha/items/7".into(), "item 7".into()));

    // A tool's UI link names the rewritten URI, in the list and in the result.
    let tools = runtime.block_on(client.list_all_tools()).unwrap();
    let show = tools.iter().find(|t| t.name == "beta.show_ui").expect("beta.show_ui");
    assert_eq!(serde_json::to_value(&show.meta).unwrap()["ui"]["resourceUri"], "ui://beta/test-app/app.html");
    let shown = runtime.block_on(call(&client, "beta.show_ui", json!({}))).unwrap();
    let shown = serde_json::to_value(&shown).unwrap();
    assert_eq!(shown["_meta"]["ui"]["resourceUri"], "ui://beta/test-app/app.html", "{shown}");
    assert!(shown.get("structuredContent").is_none(), "R20: withheld from a client that renders no UI: {shown}");
    runtime.block_on(async { drop(client.cancel().await) });
}

#[test]
fn subscriptions_log_messages_and_list_changes_reach_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let gw = start(dir.path(), json!({}));
    let runtime = runtime();
    let (client, mut heard) = connect(&runtime, &gw, false);

    runtime.block_on(client.subscribe(rmcp::model::SubscribeRequestParams::new("test://alpha/readme"))).expect("resources/subscribe");
    let refused = runtime.block_on(client.subscribe(rmcp::model::SubscribeRequestParams::new("test://nowhere/readme")));
    assert!(refused.is_err(), "a URI of no app: {refused:?}");
    // A client of /apps/mcp/alpha subscribing to the same resource and unsubscribing again
    // takes nothing from the /mcp session: the app's one session is subscribed while anyone is.
    let (tx, _browser_heard) = mpsc::unbounded_channel();
    let browser_url = gw.url("/apps/mcp/alpha");
    let browser = runtime
        .block_on(async { Heard { tx, app_host: false }.serve(StreamableHttpClientTransport::from_uri(browser_url)).await })
        .expect("connecting to /apps/mcp/alpha");
    runtime.block_on(browser.subscribe(rmcp::model::SubscribeRequestParams::new("test://readme"))).expect("/apps/mcp subscribe");
    runtime.block_on(browser.unsubscribe(rmcp::model::UnsubscribeRequestParams::new("test://readme"))).expect("/apps/mcp unsubscribe");
    let update = heard_after(&runtime, &mut heard, |m| m["method"] == "resources/updated", || {
        let touched = runtime.block_on(call(&client, "alpha.touch_resource", json!({ "uri": "test://readme" }))).unwrap();
        assert!(!touched.is_error.unwrap_or(false), "{touched:?}");
    })
    .unwrap_or_else(|| panic!("no resources/updated reached the /mcp session\n{}", gw.logs()));
    assert_eq!(update["uri"], "test://alpha/readme", "the update names the /mcp URI: {update}");

    // Log messages the app sends unasked, from the level the session set.
    runtime.block_on(client.set_level(rmcp::model::SetLevelRequestParams::new(rmcp::model::LoggingLevel::Warning))).expect("logging/setLevel");
    runtime.block_on(call(&client, "alpha.log_later", json!({ "level": "info", "text": "below the level" }))).unwrap();
    let logged = heard_after(&runtime, &mut heard, |m| m["method"] == "message", || {
        runtime.block_on(call(&client, "alpha.log_later", json!({ "level": "error", "text": "disk on fire" }))).unwrap();
    })
    .unwrap_or_else(|| panic!("no log message reached the /mcp session\n{}", gw.logs()));
    assert_eq!(logged["params"]["data"], "disk on fire", "{logged}");
    assert_eq!(logged["params"]["logger"], "alpha/test-app", "{logged}");
    assert_eq!(logged["params"]["level"], "error", "{logged}");

    // beta stops: its resources and prompts leave the lists, and the session hears of it.
    let status = gw.client().post(gw.url("/admin/mcpapps/beta/stop")).bearer_auth(TOKEN).send().unwrap().status();
    assert!(status.is_success(), "{status}");
    let mut methods = BTreeSet::new();
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while methods.len() < 2 {
        let Some(message) = runtime.block_on(async { tokio::time::timeout_at(until.into(), heard.recv()).await.ok().flatten() }) else { break };
        if message["method"].as_str().is_some_and(|m| m.ends_with("list_changed")) {
            methods.insert(message["method"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(methods, BTreeSet::from(["prompts/list_changed".to_string(), "resources/list_changed".to_string()]), "{}", gw.logs());
    let uris: Vec<String> = runtime.block_on(client.list_all_resources()).unwrap().into_iter().map(|r| r.uri.clone()).collect();
    assert!(!uris.iter().any(|u| u.contains("//beta/")), "{uris:?}");
    let gone = runtime.block_on(client.read_resource(ReadResourceRequestParams::new("ui://beta/test-app/app.html")));
    assert!(format!("{gone:?}").contains("not running"), "{gone:?}");

    runtime.block_on(client.unsubscribe(rmcp::model::UnsubscribeRequestParams::new("test://alpha/readme"))).expect("resources/unsubscribe");
    runtime.block_on(async {
        drop(client.cancel().await);
        drop(browser.cancel().await);
    });
}

#[test]
fn app_only_tools_are_for_mcp_apps_hosts_only() {
    let dir = tempfile::tempdir().unwrap();
    let gw = start(dir.path(), json!({}));
    let runtime = runtime();

    let (host, _) = connect(&runtime, &gw, true);
    let names: Vec<String> = runtime.block_on(host.list_all_tools()).unwrap().into_iter().map(|t| t.name.to_string()).collect();
    assert!(names.contains(&"beta.app_only".to_string()), "{names:?}");
    let called = runtime.block_on(call(&host, "beta.app_only", json!({}))).expect("an MCP Apps host calls an app-only tool");
    assert!(!called.is_error.unwrap_or(false), "{called:?}");
    let shown = serde_json::to_value(runtime.block_on(call(&host, "beta.show_ui", json!({}))).unwrap()).unwrap();
    assert_eq!(shown["structuredContent"], json!({ "shown": true }), "the host's UI gets the structured content: {shown}");

    // A UI calls its tools by its app's own names, which an MCP Apps host passes on as they are:
    // one app with the name is called, several are named back.
    let own = runtime.block_on(call(&host, "touch_resource", json!({ "uri": "test://readme" }))).expect("alpha's own name");
    assert!(!own.is_error.unwrap_or(false), "{own:?}");
    let ambiguous = format!("{:?}", runtime.block_on(call(&host, "app_only", json!({}))));
    assert!(ambiguous.contains("several apps") && ambiguous.contains("alpha.app_only") && ambiguous.contains("beta.app_only"), "{ambiguous}");

    let (plain, _) = connect(&runtime, &gw, false);
    let unknown = format!("{:?}", runtime.block_on(call(&plain, "touch_resource", json!({ "uri": "test://readme" }))));
    assert!(unknown.contains("unknown tool 'touch_resource'"), "own names are for MCP Apps hosts only: {unknown}");
    let names: Vec<String> = runtime.block_on(plain.list_all_tools()).unwrap().into_iter().map(|t| t.name.to_string()).collect();
    assert!(!names.contains(&"beta.app_only".to_string()), "{names:?}");
    let refused = runtime.block_on(call(&plain, "beta.app_only", json!({})));
    assert!(format!("{refused:?}").contains("for app UIs only"), "{refused:?}");

    // The same on the stateless 2026-07-28 way (the gateway's short way for tools/call).
    let ui = json!({ "extensions": { "io.modelcontextprotocol/ui": {} } });
    let (status, reply) = gw.mcp_request("/mcp", "tools/call", json!({ "name": "beta.app_only", "arguments": {} }), ui.clone());
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["result"]["isError"], json!(false), "{reply}");
    let (_, reply) = gw.mcp_request("/mcp", "tools/call", json!({ "name": "beta.app_only", "arguments": {} }), json!({}));
    assert!(reply["error"]["message"].as_str().unwrap_or_default().contains("for app UIs only"), "{reply}");
    let (_, listed) = gw.mcp_request("/mcp", "tools/list", json!({}), ui);
    assert!(listed.to_string().contains("\"beta.app_only\""), "{listed}");
    runtime.block_on(async {
        drop(host.cancel().await);
        drop(plain.cancel().await);
    });
}

#[test]
fn tools_only_keeps_the_tools_only_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let gw = start(dir.path(), json!({ "McpCompatibility": { "ToolsOnly": true } }));
    let runtime = runtime();
    let (client, _) = connect(&runtime, &gw, false);
    let caps = client.peer_info().map(|i| serde_json::to_value(&i.capabilities).unwrap()).unwrap_or_default();
    assert!(caps.get("tools").is_some() && caps.get("resources").is_none() && caps.get("prompts").is_none(), "{caps}");
    let refused = runtime.block_on(client.list_resources(None));
    assert!(refused.is_err(), "{refused:?}");
    let tools = runtime.block_on(client.list_all_tools()).unwrap();
    let show = tools.iter().find(|t| t.name == "beta.show_ui").expect("beta.show_ui");
    assert_eq!(serde_json::to_value(&show.meta).unwrap()["ui"]["resourceUri"], "ui://test-app/app.html", "the app's own URI");
    runtime.block_on(async { drop(client.cancel().await) });
}
