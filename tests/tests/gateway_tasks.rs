//! MCP Tasks on the gateway's `/mcp` and `/apps/mcp/{appId}` (SPEC R43, issue 9 must-show 6,
//! issue 38), driven by the official Rust MCP client (rmcp) against the real gateway and a real
//! app: a task-augmented call is created, polled with `tasks/get` until its result is there; a
//! second one is cancelled with `tasks/cancel` and the app itself observes the cancellation; an
//! app's question during a task (elicitation) surfaces as the task's `inputRequests` and is
//! answered through `tasks/update`. A call becomes a task only when its tool declares task support
//! (`execution.taskSupport`, the test app's `--task-support`); a tool that requires it refuses a
//! client without the extension; the 2026-07-28 revision has no `tasks/result` nor `tasks/list`.
//! And the other way round: an app that runs calls as tasks itself is driven through them for
//! clients that know nothing of tasks (polled, its questions relayed, cancelled).

mod support;

use std::time::{Duration, Instant};

use gateway_e2e::{wait_until, GatewayProcess};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ErrorCode, GetTaskParams, GetTaskResult,
    Implementation, InitializeRequestParams, TaskPayload, TaskStatus, UpdateTaskParams, TASKS_EXTENSION_ID,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::service::ClientServiceExt;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use support::*;

/// The test app `t`'s tools as they declare task support: `cancellable` and `elicit` optional,
/// `slow` required; the others (`echo`, `cancellations`…) declare none.
const TASK_SUPPORT: &[&str] =
    &["--task-support", "cancellable=optional", "--task-support", "elicit=optional", "--task-support", "slow=required"];

fn gateway_with_test_app() -> (tempfile::TempDir, GatewayProcess) {
    let dir = tempfile::tempdir().unwrap();
    write_manifest(&dir.path().join("apps"), "t", &stdio_app("t", TASK_SUPPORT));
    let gw = GatewayProcess::start(json!({
        "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [dir.path().join("apps")], "Allow": ["*"] } }
    }));
    assert!(
        wait_until(Duration::from_secs(20), Duration::from_millis(100), || gw
            .get_json("/tools")
            .1
            .to_string()
            .contains("t.cancellable")),
        "the test app's tools never reached the registry: {}",
        gw.logs()
    );
    (dir, gw)
}

async fn tasks_client(url: &str, capabilities: Value) -> RunningService<RoleClient, InitializeRequestParams> {
    client_of(url, capabilities, false).await
}

/// A client of `url`: initialize-first (2025-11-25), or discover-first (2026-07-28, stateless).
async fn client_of(url: &str, capabilities: Value, discover_first: bool) -> RunningService<RoleClient, InitializeRequestParams> {
    let capabilities: ClientCapabilities = serde_json::from_value(capabilities).unwrap();
    let info = InitializeRequestParams::new(capabilities, Implementation::new("gateway-tasks-test", "1.0.0"));
    let transport = StreamableHttpClientTransport::from_uri(url.to_string());
    let client = if discover_first {
        let lifecycle =
            rmcp::service::ClientLifecycleMode::Discover { preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28] };
        info.serve_with_lifecycle(transport, lifecycle).await
    } else {
        info.serve(transport).await
    };
    let client = client.unwrap_or_else(|e| panic!("connecting to {url}: {e}"));
    if discover_first {
        let version = client.peer_info().map(|i| i.protocol_version.to_string());
        assert_eq!(version.as_deref(), Some("2026-07-28"), "harness: the client must speak 2026-07-28");
    }
    client
}

fn arguments(value: Value) -> serde_json::Map<String, Value> {
    value.as_object().cloned().unwrap()
}

async fn start_task(client: &RunningService<RoleClient, InitializeRequestParams>, tool: &str, args: Value) -> String {
    let response = client
        .call_tool_once(CallToolRequestParams::new(tool.to_string()).with_arguments(arguments(args)))
        .await
        .expect("tools/call");
    match response {
        CallToolResponse::Task(created) => created.task.task_id,
        other => panic!("a tasks client's call must become a task, got {other:?}"),
    }
}

async fn poll_until(
    client: &RunningService<RoleClient, InitializeRequestParams>,
    task_id: &str,
    done: impl Fn(&GetTaskResult) -> bool,
) -> GetTaskResult {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = client.get_task(GetTaskParams::new(task_id.to_string())).await.expect("tasks/get");
        if done(&got) {
            return got;
        }
        assert!(Instant::now() < deadline, "task {task_id} never got there: {got:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn status(got: &GetTaskResult) -> TaskStatus {
    got.task.task.status
}

/// On both endpoints (`/mcp`: names with the app's prefix; `/apps/mcp/t`: the app's own names),
/// for an initialize-era client and a 2026-07-28 one.
#[test]
fn task_augmented_calls_are_polled_cancelled_and_answered() {
    let (_dir, gw) = gateway_with_test_app();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    for (path, prefix) in [("/mcp", "t."), ("/apps/mcp/t", "")] {
        for discover_first in [false, true] {
            runtime.block_on(tasks_at(&gw.url(path), prefix, discover_first));
        }
    }
}

async fn tasks_at(url: &str, prefix: &str, discover_first: bool) {
    let url = url.to_string();
    let tool = |name: &str| format!("{prefix}{name}");
    let caps = json!({ "elicitation": { "form": {} }, "extensions": { "io.modelcontextprotocol/tasks": {} } });
    let client = client_of(&url, caps, discover_first).await;
    // The handshake declares the extension the endpoint serves (`/apps/mcp/{appId}` answers with
    // the app's capabilities, and the gateway's tasks beside them).
    let offered = client.peer_info().map(|i| i.capabilities.supports_tasks());
    assert_eq!(offered, Some(true), "{url}: the handshake must declare {TASKS_EXTENSION_ID}: {:?}", client.peer_info());

    // Created, polled, completed with the app's own result — also through tasks/result, and
    // listed by tasks/list (initialize-era clients: the 2026-07-28 revision removed both).
    let task_id = start_task(&client, &tool("cancellable"), json!({ "ms": 400 })).await;
    let first = client.get_task(GetTaskParams::new(task_id.clone())).await.expect("tasks/get");
    assert!(matches!(status(&first), TaskStatus::Working | TaskStatus::Completed), "{first:?}");
    if !discover_first {
        let waited = custom(&client, "tasks/result", json!({ "taskId": task_id })).await;
        assert!(waited.to_string().contains("cancellable finished after 400 ms"), "{url}: {waited}");
    }
    let done = poll_until(&client, &task_id, |t| status(t) == TaskStatus::Completed).await;
    let TaskPayload::Completed { result } = &done.task.payload else { panic!("{done:?}") };
    assert!(Value::Object(result.clone()).to_string().contains("cancellable finished after 400 ms"), "{result:?}");
    if !discover_first {
        let listed = custom(&client, "tasks/list", json!({})).await;
        assert!(listed["tasks"].to_string().contains(&task_id), "{listed}");
    } else {
        for (method, params) in [("tasks/result", json!({ "taskId": task_id })), ("tasks/list", json!({}))] {
            let e = custom_error(&client, method, params).await;
            assert_eq!(e.code, ErrorCode::METHOD_NOT_FOUND, "{url}: 2026-07-28 {method}: {e:?}");
        }
    }

    // A tool that declares no task support answers a tasks client with its complete result.
    {
        let response = client
            .call_tool_once(CallToolRequestParams::new(tool("echo")).with_arguments(arguments(json!({ "text": "now" }))))
            .await
            .expect("tools/call echo");
        let CallToolResponse::Complete(result) = response else { panic!("{url}: echo must stay complete, got {response:?}") };
        assert!(serde_json::to_value(&result.content).unwrap().to_string().contains("echo: now"), "{url}: {result:?}");
    }

    // A tool that requires tasks is a task for this client too.
    let task_id = start_task(&client, &tool("slow"), json!({ "ms": 50 })).await;
    let done = poll_until(&client, &task_id, |t| status(t) == TaskStatus::Completed).await;
    assert!(matches!(done.task.payload, TaskPayload::Completed { .. }), "{url}: {done:?}");

    // Cancelled: the task ends cancelled and the app saw the cancellation.
    let before = cancellations_of(&url, &tool("cancellations")).await;
    let task_id = start_task(&client, &tool("cancellable"), json!({ "ms": 30000 })).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    client.cancel_task(CancelTaskParams::new(task_id.clone())).await.expect("tasks/cancel");
    poll_until(&client, &task_id, |t| status(t) == TaskStatus::Cancelled).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while cancellations_of(&url, &tool("cancellations")).await <= before {
        assert!(Instant::now() < deadline, "{url}: the app never observed the cancelled task's call");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // An app's question becomes the task's inputRequests, answered through tasks/update.
    let task_id = start_task(&client, &tool("elicit"), json!({ "message": "pick one" })).await;
    let asking = poll_until(&client, &task_id, |t| status(t) == TaskStatus::InputRequired).await;
    let TaskPayload::InputRequired { input_requests } = &asking.task.payload else { panic!("{asking:?}") };
    let (key, request) = input_requests.iter().next().expect("one question");
    assert!(serde_json::to_value(request).unwrap().to_string().contains("elicitation/create"), "{request:?}");
    let answer = json!({ "action": "accept", "content": { "name": "tasks", "color": "green", "count": 3 } });
    client
        .update_task(UpdateTaskParams::new(task_id.clone(), [(key.clone(), answer)].into_iter().collect()))
        .await
        .expect("tasks/update");
    let done = poll_until(&client, &task_id, |t| status(t) == TaskStatus::Completed).await;
    let TaskPayload::Completed { result } = &done.task.payload else { panic!("{done:?}") };
    assert!(Value::Object(result.clone()).to_string().contains("green"), "{url}: {result:?}");

    let _ = client.cancel().await;
}

/// A tool that requires tasks, called by clients without the extension: refused with Missing
/// Required Client Capability naming it (SEP-2663), on both endpoints, for an initialize-era
/// client, a 2026-07-28 one and a bare 2026-07-28 request (the short way, `pass_through.rs`);
/// the tools that do not require tasks answer them as before.
#[test]
fn a_tool_that_requires_tasks_refuses_clients_without_the_extension() {
    let (_dir, gw) = gateway_with_test_app();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    for (path, prefix) in [("/apps/mcp/t", ""), ("/mcp", "t.")] {
        let url = gw.url(path);
        for discover_first in [false, true] {
            runtime.block_on(async {
                let client = client_of(&url, json!({ "elicitation": { "form": {} } }), discover_first).await;
                let call = |name: &str, args: Value| CallToolRequestParams::new(format!("{prefix}{name}")).with_arguments(arguments(args));
                let refused = client.call_tool(call("slow", json!({ "ms": 10 }))).await.expect_err("slow requires tasks");
                let rmcp::ServiceError::McpError(e) = refused else { panic!("{url}: {refused:?}") };
                assert_eq!(e.code, ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY, "{url} discover_first={discover_first}: {e:?}");
                let data = e.data.clone().unwrap_or_default();
                assert!(data["requiredCapabilities"]["extensions"].get(TASKS_EXTENSION_ID).is_some(), "{url}: {e:?}");
                // Optional and no task support: the plain result.
                let done = client.call_tool(call("cancellable", json!({ "ms": 10 }))).await.expect("cancellable");
                assert!(serde_json::to_value(&done.content).unwrap().to_string().contains("cancellable finished after 10 ms"), "{done:?}");
                let done = client.call_tool(call("echo", json!({ "text": "plain" }))).await.expect("echo");
                assert!(serde_json::to_value(&done.content).unwrap().to_string().contains("echo: plain"), "{done:?}");
                let _ = client.cancel().await;
            });
        }
        let (reply, _) = try_call(&gw.url(""), path, &format!("{prefix}slow"), json!({ "ms": 10 }), Duration::from_secs(30)).unwrap();
        assert_eq!(reply["error"]["code"].as_i64(), Some(ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY.0 as i64), "{path}: {reply}");
        let (reply, _) = try_call(&gw.url(""), path, &format!("{prefix}echo"), json!({ "text": "short" }), Duration::from_secs(30)).unwrap();
        assert_eq!(reply["result"]["content"][0]["text"], "echo: short", "{path}: {reply}");
    }
}

/// How many cancellations the test app has observed (its `cancellations` tool, by the name it
/// has at `url`, called by a client without the tasks extension, which gets plain results).
async fn cancellations_of(url: &str, tool: &str) -> u64 {
    let client = tasks_client(url, json!({})).await;
    let result = client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(arguments(json!({}))))
        .await
        .expect("cancellations");
    let _ = client.cancel().await;
    result.structured_content.as_ref().and_then(|s| s["count"].as_u64()).unwrap_or(0)
}

/// The error a request rmcp's client has no typed helper for is answered with.
async fn custom_error(client: &RunningService<RoleClient, InitializeRequestParams>, method: &str, params: Value) -> rmcp::ErrorData {
    let request = rmcp::model::ClientRequest::CustomRequest(rmcp::model::CustomRequest::new(method.to_string(), Some(params)));
    match client.send_request(request).await {
        Err(rmcp::ServiceError::McpError(e)) => e,
        other => panic!("{method}: expected a JSON-RPC error, got {other:?}"),
    }
}

/// A request rmcp's client has no typed helper for, answered as raw JSON.
async fn custom(client: &RunningService<RoleClient, InitializeRequestParams>, method: &str, params: Value) -> Value {
    let request = rmcp::model::ClientRequest::CustomRequest(rmcp::model::CustomRequest::new(method.to_string(), Some(params)));
    let result = client.send_request(request).await.unwrap_or_else(|e| panic!("{method}: {e}"));
    serde_json::to_value(result).unwrap()
}

/// A client without the tasks extension that answers forms (colour green).
#[derive(Clone)]
struct FormFiller;

impl rmcp::ClientHandler for FormFiller {
    async fn create_elicitation(
        &self,
        _request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        Ok(serde_json::from_value(json!({ "action": "accept", "content": { "name": "app-task", "color": "green", "count": 2 } }))
            .unwrap())
    }

    fn get_info(&self) -> InitializeRequestParams {
        let capabilities: ClientCapabilities = serde_json::from_value(json!({ "elicitation": { "form": {} } })).unwrap();
        InitializeRequestParams::new(capabilities, Implementation::new("gateway-app-tasks-test", "1.0.0"))
    }
}

#[test]
fn an_app_that_runs_calls_as_tasks_is_driven_through_them() {
    let dir = tempfile::tempdir().unwrap();
    write_manifest(&dir.path().join("apps"), "k", &stdio_app("k", &["--tasks"]));
    let gw = GatewayProcess::start(json!({
        "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [dir.path().join("apps")], "Allow": ["*"] } }
    }));
    assert!(
        wait_until(Duration::from_secs(20), Duration::from_millis(100), || gw.get_json("/tools").1.to_string().contains("k.elicit")),
        "{}",
        gw.logs()
    );
    let url = gw.url("/mcp");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let client = FormFiller.serve(StreamableHttpClientTransport::from_uri(url.clone())).await.expect("connecting to /mcp");
        let call = |name: &str, args: Value| CallToolRequestParams::new(name.to_string()).with_arguments(arguments(args));

        // Polled to its end: the caller gets the task's result as a plain result.
        let done = client.call_tool(call("k.cancellable", json!({ "ms": 300 }))).await.expect("k.cancellable");
        let text = serde_json::to_value(&done.content).unwrap().to_string();
        assert!(text.contains("cancellable finished after 300 ms (as a task)"), "{text}");

        // The task's question reaches the caller, whose answer goes back through tasks/update.
        let done = client.call_tool(call("k.elicit", json!({}))).await.expect("k.elicit");
        let text = serde_json::to_value(&done.content).unwrap().to_string();
        assert!(text.contains("green") && text.contains("(as a task)"), "{text}");

        // The caller's cancel becomes tasks/cancel: the app observes it.
        let before = cancellations_of(&url, "k.cancellations").await;
        let request = rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(call(
            "k.cancellable",
            json!({ "ms": 30000 }),
        )));
        let handle = client
            .peer()
            .send_cancellable_request(request, rmcp::service::PeerRequestOptions::no_options())
            .await
            .expect("k.cancellable sent");
        tokio::time::sleep(Duration::from_millis(500)).await;
        handle.cancel(Some("test cancels".into())).await.expect("cancel sent");
        let deadline = Instant::now() + Duration::from_secs(10);
        while cancellations_of(&url, "k.cancellations").await <= before {
            assert!(Instant::now() < deadline, "the app never saw its task cancelled: {}", gw.logs());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = client.cancel().await;
    });
}
