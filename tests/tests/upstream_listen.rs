//! Apps on the 2026-07-28 revision (discover-first sessions) send list changes only on a
//! `subscriptions/listen` stream the gateway keeps open
//! (mcpapp-plugin/src/upstream/subscriptions.rs): the gateway still learns that an app's tools
//! changed (its `/tools` registry refreshes), the browser proxy's clients still get the
//! notification (without the gateway's own subscription id), and stopping the gateway stays
//! quiet. Over stdio and over Streamable HTTP.

mod support;

use std::time::Duration;

use gateway_e2e::{wait_until, GatewayProcess};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ResourceUpdatedNotificationParam, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{json, Value};
use support::*;
use tokio::sync::mpsc;

fn config_for(dir: &std::path::Path) -> Value {
    json!({
        "Gateway": { "AlwaysRequireAuth": false },
        "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [dir.join("apps")], "Allow": ["*"] } }
    })
}

/// A browser-side client of `/apps/mcp/{app}` (initialize-era) that records every
/// `notifications/tools/list_changed` and `notifications/resources/updated` it gets, with their
/// `_meta`: `{"method", "uri", "meta"}`.
struct ListChanges(mpsc::UnboundedSender<Value>);

impl ClientHandler for ListChanges {
    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        let _ = self.0.send(json!({ "method": "tools/list_changed", "meta": context.meta }));
    }

    async fn on_resource_updated(&self, params: ResourceUpdatedNotificationParam, context: NotificationContext<RoleClient>) {
        let _ = self.0.send(json!({ "method": "resources/updated", "uri": params.uri, "meta": context.meta }));
    }
}

async fn call(client: &RunningService<RoleClient, ListChanges>, tool: &str, args: Value) -> CallToolResult {
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args.as_object().cloned().unwrap());
    client.call_tool(params).await.unwrap_or_else(|e| panic!("{tool}: {e}"))
}

fn next_change(runtime: &tokio::runtime::Runtime, changes: &mut mpsc::UnboundedReceiver<Value>, wait: Duration) -> Option<Value> {
    runtime.block_on(async { tokio::time::timeout(wait, changes.recv()).await.ok().flatten() })
}

/// The first change the client hears after `act(attempt)`, acting again while none comes (for
/// up to ~16 s): a notification the gateway sends before the client's standalone GET stream is
/// attached is lost — rmcp's server replays the stream only to a client resuming with
/// `Last-Event-ID`, and rmcp's client opens that stream on its own schedule after `initialized`
/// (under load, after the test's first calls). Later changes are drained, so that none of them
/// is taken for a later step's.
fn change_after(
    runtime: &tokio::runtime::Runtime,
    changes: &mut mpsc::UnboundedReceiver<Value>,
    mut act: impl FnMut(u32),
) -> Option<Value> {
    let heard = (0..8).find_map(|attempt| {
        act(attempt);
        next_change(runtime, changes, Duration::from_secs(2))
    })?;
    while next_change(runtime, changes, Duration::from_millis(300)).is_some() {}
    Some(heard)
}

/// An orderly stop ends the listen streams without a warning or an error (nor does a request the
/// test makes fail on purpose warn: rmcp's warning about each error answer is left out).
fn stop_quietly(mut gw: GatewayProcess) {
    let status = gw.terminate();
    assert!(status.is_some_and(|s| s.success()), "orderly exit on SIGTERM: {status:?}\n{}", gw.logs());
    let loud: Vec<String> = gw
        .log_lines()
        .into_iter()
        .filter(|l| l.contains("ERROR") || l.contains(" WARN "))
        .collect();
    assert!(loud.is_empty(), "warnings or errors:\n{}\n\nall logs:\n{}", loud.join("\n"), gw.logs());
}

/// Starts a gateway with `manifest` (made a 2026-07-28 app) and waits for its tools.
fn gateway_with_2026_app(dir: &std::path::Path, manifest: Value) -> (String, GatewayProcess) {
    let id = manifest["id"].as_str().unwrap().to_string();
    let mut manifest = manifest;
    manifest["protocolVersion"] = json!("2026-07-28");
    write_manifest(&dir.join("apps"), &id, &manifest);
    let gw = GatewayProcess::start(config_for(dir));
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(100), || tool_names(&gw).contains(&format!("{id}.echo"))),
        "the app's tools never reached the registry\n{}",
        gw.logs()
    );
    (id, gw)
}

fn tool_names(gw: &GatewayProcess) -> String {
    gw.get_json("/tools").1.to_string()
}

fn list_changes_arrive_through_listen(manifest: Value) {
    let dir = tempfile::tempdir().unwrap();
    let (id, gw) = gateway_with_2026_app(dir.path(), manifest);
    assert!(!tool_names(&gw).contains(&format!("{id}.fresh")));

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (tx, mut changes) = mpsc::unbounded_channel();
    let url = gw.url(&format!("/apps/mcp/{id}"));
    let client = runtime.block_on(async {
        let client = ListChanges(tx).serve(StreamableHttpClientTransport::from_uri(url)).await.expect("connecting to /apps/mcp");
        // The gateway's session with the app really is a 2026-07-28 one (the test app then
        // sends list changes only on listen streams).
        let info = call(&client, "client_info", json!({})).await;
        assert!(serde_json::to_string(&info).unwrap().contains("2026-07-28"), "{info:?}");
        client
    });
    // The change reaches the browser side too, without the gateway's own subscription id.
    let change = change_after(&runtime, &mut changes, |attempt| {
        let name = if attempt == 0 { "fresh".to_string() } else { format!("fresh{attempt}") };
        let added = runtime.block_on(call(&client, "add_tool", json!({ "name": name })));
        assert_eq!(added.structured_content.as_ref().map(|s| s["added"].clone()), Some(json!(true)), "{added:?}");
    })
    .unwrap_or_else(|| panic!("no tools/list_changed reached the /apps/mcp client\n{}", gw.logs()));
    assert_eq!(change["method"], "tools/list_changed", "{change}");
    assert!(!change.to_string().contains("subscriptionId"), "the gateway's own subscription id leaked: {change}");
    assert!(
        wait_until(Duration::from_secs(10), Duration::from_millis(100), || tool_names(&gw).contains(&format!("{id}.fresh"))),
        "the registry never saw the new tool: {}\n{}",
        tool_names(&gw),
        gw.logs()
    );
    assert!(gw.logs().contains("lists changed (ToolsChanged); refreshed"), "{}", gw.logs());

    // A second change is heard too (the stream stays open).
    runtime.block_on(call(&client, "add_tool", json!({"name": "fresher"})));
    assert!(
        wait_until(Duration::from_secs(10), Duration::from_millis(100), || tool_names(&gw).contains(&format!("{id}.fresher"))),
        "{}",
        gw.logs()
    );
    runtime.block_on(async { drop(client.cancel().await) });
    stop_quietly(gw);
}

#[test]
fn a_2026_stdio_apps_tool_changes_reach_the_registry_through_listen() {
    list_changes_arrive_through_listen(stdio_app("ls", &[]));
}

#[test]
fn a_2026_http_apps_tool_changes_reach_the_registry_through_listen() {
    list_changes_arrive_through_listen(http_app("lh", &[]));
}

/// `resources/subscribe` through the browser proxy for a 2026-07-28 app: the gateway re-opens its
/// listen stream with the URI, the app's `resources/updated` reaches the subscriber; a URI the
/// app does not accept is refused; after `resources/unsubscribe` no update arrives; list changes
/// keep arriving on the re-opened stream.
#[test]
#[allow(deprecated)] // resources/subscribe: the browser side speaks the initialize-era revision
fn a_2026_apps_resource_subscriptions_go_through_listen() {
    let dir = tempfile::tempdir().unwrap();
    let (id, gw) = gateway_with_2026_app(dir.path(), stdio_app("rs", &["--resource-updates"]));
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (tx, mut changes) = mpsc::unbounded_channel();
    let url = gw.url(&format!("/apps/mcp/{id}"));
    let client = runtime.block_on(async {
        let client = ListChanges(tx).serve(StreamableHttpClientTransport::from_uri(url)).await.expect("connecting to /apps/mcp");
        client.subscribe(SubscribeRequestParams::new("test://readme")).await.expect("resources/subscribe");
        let refused = client.subscribe(SubscribeRequestParams::new("test://nowhere")).await;
        assert!(refused.is_err(), "a URI the app does not accept: {refused:?}");
        client
    });
    let update = change_after(&runtime, &mut changes, |_| {
        let touched = runtime.block_on(call(&client, "touch_resource", json!({"uri": "test://readme"})));
        assert!(!touched.is_error.unwrap_or(false), "{touched:?}");
    })
    .unwrap_or_else(|| panic!("no resources/updated reached the subscriber\n{}", gw.logs()));
    assert_eq!(update["method"], "resources/updated", "{update}");
    assert_eq!(update["uri"], "test://readme", "{update}");
    assert!(!update.to_string().contains("subscriptionId"), "the gateway's own subscription id leaked: {update}");

    // Unsubscribed: a touch reaches nobody; list changes still do.
    runtime.block_on(async {
        client.unsubscribe(UnsubscribeRequestParams::new("test://readme")).await.expect("resources/unsubscribe");
        call(&client, "touch_resource", json!({"uri": "test://readme"})).await;
    });
    let after = next_change(&runtime, &mut changes, Duration::from_millis(1500));
    assert!(after.is_none(), "an update after unsubscribing: {after:?}");
    runtime.block_on(call(&client, "add_tool", json!({"name": "fresh"})));
    assert!(
        wait_until(Duration::from_secs(10), Duration::from_millis(100), || tool_names(&gw).contains(&format!("{id}.fresh"))),
        "the re-opened stream lost the list changes\n{}",
        gw.logs()
    );
    runtime.block_on(async { drop(client.cancel().await) });
    stop_quietly(gw);
}

/// An app that ends its listen stream while the session lives (as a server going away does):
/// the gateway opens a new one, refreshes what it may have missed meanwhile (a tool added while
/// no stream was open still shows up), and keeps hearing changes afterwards — quietly.
#[test]
fn a_listen_stream_the_app_ends_is_reopened() {
    let dir = tempfile::tempdir().unwrap();
    let (id, gw) = gateway_with_2026_app(dir.path(), stdio_app("re", &["--end-listens-tool"]));
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (tx, _changes) = mpsc::unbounded_channel();
    let url = gw.url(&format!("/apps/mcp/{id}"));
    let client = runtime.block_on(async {
        let client = ListChanges(tx).serve(StreamableHttpClientTransport::from_uri(url)).await.expect("connecting to /apps/mcp");
        let ended = call(&client, "end_listens", json!({})).await;
        assert_eq!(ended.structured_content.as_ref().map(|s| s["ended"].clone()), Some(json!(1)), "{ended:?}");
        // No stream is open now (or not for long): the change may go unheard.
        call(&client, "add_tool", json!({"name": "meanwhile"})).await;
        client
    });
    assert!(
        wait_until(Duration::from_secs(10), Duration::from_millis(100), || tool_names(&gw).contains(&format!("{id}.meanwhile"))),
        "a change while the stream was down never showed\n{}",
        gw.logs()
    );
    // A new stream is open, and it carries changes.
    let reopened = wait_until(Duration::from_secs(10), Duration::from_millis(200), || {
        let ended = runtime.block_on(call(&client, "end_listens", json!({})));
        ended.structured_content.as_ref().is_some_and(|s| s["ended"] == 1)
    });
    assert!(reopened, "no stream was re-opened\n{}", gw.logs());
    assert!(
        wait_until(Duration::from_secs(10), Duration::from_millis(200), || {
            runtime.block_on(call(&client, "add_tool", json!({"name": "later"})));
            tool_names(&gw).contains(&format!("{id}.later"))
        }),
        "{}",
        gw.logs()
    );
    runtime.block_on(async { drop(client.cancel().await) });
    stop_quietly(gw);
}
