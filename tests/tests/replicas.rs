//! Several replicas behind one load balancer (SPEC R35, R49; issue 42): three real gateways
//! sharing a Redis of the test's own, behind a round-robin proxy inside the test
//! ([`gateway_e2e::round_robin`]) that sends each request to the next replica. State that can only
//! live in one process — a call parked for a 2026-07-28 client's retry, a running task — is
//! owned by the replica that holds it, and a request for it that lands elsewhere is sent on to
//! the owner (`gateway-host/src/http/replicas/`). The clients are the official Rust SDK's.
//!
//! A chat turn's question answered on another replica is shown by `chat.rs`
//! `two_replicas_share_sessions_and_the_turn_lock_through_redis`.

mod support;

use std::time::{Duration, Instant};

use gateway_e2e::own_redis::{OwnRedis, OwnRedisCluster};
use gateway_e2e::round_robin::RoundRobin;
use gateway_e2e::{free_port, wait_until, GatewayProcess};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, GetTaskParams, Implementation,
    InitializeRequestParams, ProtocolVersion, TaskStatus,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use support::*;

const SECRET: &str = "replica test secret, 32 characters";

/// The test app `rt`: `cancellable` and `elicit` run as tasks for clients that want them.
const TASK_SUPPORT: &[&str] = &["--task-support", "cancellable=optional", "--task-support", "elicit=optional"];

struct Cluster {
    replicas: Vec<GatewayProcess>,
    ids: Vec<String>,
    _dirs: Vec<tempfile::TempDir>,
    _redis: Redis,
}

/// The Redis the replicas share.
enum Redis {
    One(OwnRedis),
    Cluster(OwnRedisCluster),
}

impl Redis {
    fn sessions(&self) -> Value {
        match self {
            Redis::One(redis) => json!({ "Store": "redis", "RedisUrl": format!("redis://127.0.0.1:{}", redis.port()) }),
            Redis::Cluster(cluster) => json!({ "Store": "redis", "RedisCluster": true, "RedisUrl": cluster.urls() }),
        }
    }
}

/// Three replicas `r0`…`r2` of one cluster sharing one Redis, each running its own copy of the
/// test app.
fn cluster() -> Cluster {
    let port = free_port();
    cluster_on(Redis::One(OwnRedis::start(port)))
}

fn cluster_on(redis: Redis) -> Cluster {
    let mut replicas = Vec::new();
    let mut dirs = Vec::new();
    let ids: Vec<String> = (0..3).map(|i| format!("r{i}")).collect();
    for id in &ids {
        let dir = tempfile::tempdir().unwrap();
        let apps = dir.path().join("apps");
        write_manifest(&apps, "rt", &stdio_app("rt", TASK_SUPPORT));
        replicas.push(GatewayProcess::start(json!({
            "Gateway": { "AlwaysRequireAuth": false },
            "Sessions": redis.sessions(),
            "Cluster": { "Secret": SECRET, "ReplicaId": id, "HeartbeatSeconds": 1 },
            "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [apps], "Allow": ["*"] } }
        })));
        dirs.push(dir);
    }
    for gw in &replicas {
        let serving = wait_until(Duration::from_secs(30), Duration::from_millis(100), || gw.get_json("/tools").1.to_string().contains("rt.elicit"));
        assert!(serving, "a replica's app never served: {}", gw.logs());
    }
    Cluster { replicas, ids, _dirs: dirs, _redis: redis }
}

/// A 2026-07-28 client (discover-first, stateless) of `url` that answers forms.
async fn client(url: &str, capabilities: Value) -> RunningService<RoleClient, FormFiller> {
    let capabilities: ClientCapabilities = serde_json::from_value(capabilities).unwrap();
    let filler = FormFiller(InitializeRequestParams::new(capabilities, Implementation::new("replicas-test", "1.0.0")));
    let lifecycle = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
    let client = filler.serve_with_lifecycle(StreamableHttpClientTransport::from_uri(url.to_string()), lifecycle).await;
    let client = client.unwrap_or_else(|e| panic!("connecting to {url}: {e}"));
    assert_eq!(client.peer_info().map(|i| i.protocol_version.to_string()).as_deref(), Some("2026-07-28"));
    client
}

/// Answers every form: name "replica", colour green.
#[derive(Clone)]
struct FormFiller(InitializeRequestParams);

impl rmcp::ClientHandler for FormFiller {
    async fn create_elicitation(
        &self,
        _request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        Ok(serde_json::from_value(json!({ "action": "accept", "content": { "name": "replica", "color": "green", "count": 3 } })).unwrap())
    }

    fn get_info(&self) -> InitializeRequestParams {
        self.0.clone()
    }
}

fn call(name: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_string()).with_arguments(args.as_object().cloned().unwrap())
}

/// Whether two requests in a row went to different replicas.
fn spread(served: &[usize]) -> bool {
    served.windows(2).any(|w| w[0] != w[1])
}

#[test]
fn a_call_held_by_one_replica_is_answered_through_any_other() {
    held_calls_answered_through_any_other(cluster());
}

/// The same with the replicas sharing a three-master Redis Cluster.
#[test]
fn a_call_held_by_one_replica_is_answered_through_any_other_with_a_redis_cluster() {
    held_calls_answered_through_any_other(cluster_on(Redis::Cluster(OwnRedisCluster::start())));
}

fn held_calls_answered_through_any_other(cluster: Cluster) {
    let lb = RoundRobin::start(cluster.replicas.iter().map(|gw| gw.base_url().to_string()).collect());
    let (status, health) = cluster.replicas[0].get_json("/healthz");
    assert_eq!(status, 200);
    assert_eq!(health["replicas"], json!({ "replica": "r0", "count": 3 }), "{health}");

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    for (path, prefix) in [("/apps/mcp/rt", ""), ("/mcp", "rt.")] {
        let url = lb.url(path);
        runtime.block_on(async {
            // Elicitation: the question comes back as `input_required`; the client's retry with
            // its answer reaches the next replica, which sends it to the one holding the call.
            let asking = client(&url, json!({ "elicitation": { "form": {} } })).await;
            let before = lb.served().len();
            let done = asking.call_tool(call(&format!("{prefix}elicit"), json!({ "message": "pick one" }))).await;
            let done = done.unwrap_or_else(|e| panic!("{path}: elicit through the load balancer: {e}\n{}", logs(&cluster)));
            let text = serde_json::to_value(&done.content).unwrap().to_string();
            assert!(text.contains("green"), "{path}: the answer reached the app: {text}");
            let rounds = lb.served()[before..].to_vec();
            assert_eq!(rounds.len(), 2, "{path}: one call and one retry: {rounds:?}");
            assert!(spread(&rounds), "{path}: the retry reached the same replica: {rounds:?}");
            let _ = asking.cancel().await;

            // Tasks: created on one replica, polled and cancelled through the others.
            let tasks = client(&url, json!({ "elicitation": { "form": {} }, "extensions": { "io.modelcontextprotocol/tasks": {} } })).await;
            let task_id = match tasks.call_tool_once(call(&format!("{prefix}cancellable"), json!({ "ms": 500 }))).await.expect("tools/call") {
                CallToolResponse::Task(created) => created.task.task_id,
                other => panic!("{path}: not a task: {other:?}"),
            };
            let before = lb.served().len();
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let got = tasks.get_task(GetTaskParams::new(task_id.clone())).await;
                let got = got.unwrap_or_else(|e| panic!("{path}: tasks/get through another replica: {e}\n{}", logs(&cluster)));
                if got.task.task.status == TaskStatus::Completed {
                    break;
                }
                assert!(Instant::now() < deadline, "{path}: the task never completed: {got:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            assert!(lb.served().len() - before >= 3, "{path}: polled on every replica");

            let long = match tasks.call_tool_once(call(&format!("{prefix}cancellable"), json!({ "ms": 30000 }))).await.expect("tools/call") {
                CallToolResponse::Task(created) => created.task.task_id,
                other => panic!("{path}: not a task: {other:?}"),
            };
            let cancelled = tasks.cancel_task(CancelTaskParams::new(long.clone())).await;
            cancelled.unwrap_or_else(|e| panic!("{path}: tasks/cancel through another replica: {e}\n{}", logs(&cluster)));
            let got = tasks.get_task(GetTaskParams::new(long.clone())).await.expect("tasks/get");
            assert_eq!(got.task.task.status, TaskStatus::Cancelled, "{path}: {got:?}");
            let served = lb.served();
            assert!(spread(&served[served.len() - 3..]), "{path}: {served:?}");
            let _ = tasks.cancel().await;

            // An initialize-era session: made on one replica, which holds its streams; its
            // requests, and the client's answer to the app's question asked on one of them,
            // reach the others and are sent on to it.
            let before = lb.served().len();
            let session = session_client(&url).await;
            let done = session.call_tool(call(&format!("{prefix}elicit"), json!({ "message": "in a session" }))).await;
            let done = done.unwrap_or_else(|e| panic!("{path}: elicit in a session through the load balancer: {e}\n{}", logs(&cluster)));
            assert!(serde_json::to_value(&done.content).unwrap().to_string().contains("green"), "{path}: {done:?}");
            for n in 0..3 {
                let echoed = session.call_tool(call(&format!("{prefix}echo"), json!({ "text": format!("hop {n}") }))).await.expect("echo");
                assert!(serde_json::to_value(&echoed.content).unwrap().to_string().contains(&format!("hop {n}")), "{echoed:?}");
            }
            assert!(spread(&lb.served()[before..]), "{path}: {:?}", lb.served());
            let _ = session.cancel().await;
        });
    }
}

/// An initialize-era client (2025-11-25) of `url` that answers forms.
async fn session_client(url: &str) -> RunningService<RoleClient, FormFiller> {
    let capabilities: ClientCapabilities = serde_json::from_value(json!({ "elicitation": { "form": {} } })).unwrap();
    let filler = FormFiller(InitializeRequestParams::new(capabilities, Implementation::new("replicas-session-test", "1.0.0")));
    filler.serve(StreamableHttpClientTransport::from_uri(url.to_string())).await.unwrap_or_else(|e| panic!("connecting to {url}: {e}"))
}

/// A 2026-07-28 `tools/call` of `elicit` straight to one replica: its `requestState`.
fn park_a_question(gw: &GatewayProcess, path: &str, tool: &str) -> (Vec<(&'static str, String)>, Value) {
    let (headers, body) = stateless_tools_call(tool, json!({}), "replicas-test");
    let mut body: Value = serde_json::from_str(&body).unwrap();
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({ "elicitation": { "form": {} } });
    let (_, answer) = post(gw, path, &headers, &body);
    assert_eq!(answer["result"]["resultType"], "input_required", "{path}: {answer}");
    body["params"]["requestState"] = answer["result"]["requestState"].clone();
    let key = answer["result"]["inputRequests"].as_object().and_then(|m| m.keys().next().cloned()).expect("one question");
    body["params"]["inputResponses"] = json!({ key: { "action": "accept", "content": { "name": "late", "color": "red", "count": 1 } } });
    (headers, body)
}

/// A request with these headers (and `body` as JSON) straight to `gw`.
fn send(gw: &GatewayProcess, method: reqwest::Method, path: &str, headers: &[(&'static str, String)], body: &Value) -> reqwest::blocking::Response {
    let mut request = gw.client().request(method.clone(), gw.url(path)).body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    request.send().unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

/// The replica that made an answer (`x-gateway-replica`).
fn answered_by(response: &reqwest::blocking::Response) -> Option<String> {
    response.headers().get("x-gateway-replica").and_then(|v| v.to_str().ok()).map(str::to_string)
}

/// A POST with these headers: the answering replica (`x-gateway-replica`) and the JSON-RPC
/// message (read from JSON or an event stream).
fn post(gw: &GatewayProcess, path: &str, headers: &[(&'static str, String)], body: &Value) -> (Option<String>, Value) {
    let response = send(gw, reqwest::Method::POST, path, headers, body);
    let replica = answered_by(&response);
    let text = response.text().unwrap_or_default();
    let message = serde_json::from_str::<Value>(&text).ok().or_else(|| {
        text.lines().filter_map(|l| l.strip_prefix("data:")).filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok()).find(|m| m.get("id").is_some())
    });
    (replica, message.unwrap_or_else(|| panic!("POST {path}: no JSON-RPC answer in {text:?}")))
}

#[test]
fn a_replica_killed_holding_a_call_leaves_a_clear_error_and_the_others_serving() {
    let mut cluster = cluster();
    // Answered where it was parked, through another replica: the owner answers.
    let (headers, retry) = park_a_question(&cluster.replicas[0], "/mcp", "rt.elicit");
    let (replica, answer) = post(&cluster.replicas[1], "/mcp", &headers, &retry);
    assert_eq!(replica.as_deref(), Some("r0"), "the owner answered: {answer}");
    assert!(answer["result"]["content"][0]["text"].as_str().unwrap_or_default().contains("red"), "{answer}");

    // Parked on r0 for each endpoint, then r0 dies.
    let parked: Vec<_> = [("/apps/mcp/rt", "elicit"), ("/mcp", "rt.elicit")]
        .into_iter()
        .map(|(path, tool)| (path, park_a_question(&cluster.replicas[0], path, tool)))
        .collect();
    cluster.replicas[0].signal(libc::SIGKILL);
    assert!(cluster.replicas[0].wait_exit(Duration::from_secs(15)).is_some(), "r0 survived SIGKILL");
    for (path, (headers, retry)) in &parked {
        let (replica, answer) = post(&cluster.replicas[1], path, headers, retry);
        assert_eq!(replica.as_deref(), Some("r1"), "{path}: {answer}");
        assert_eq!(answer["error"]["code"], -32001, "{path}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("r0") && (message.contains("gone") || message.contains("did not answer")), "{path}: {message}");
    }
    // Once its heartbeat has run out, r0 is gone from the registry, and said to be.
    let gone = wait_until(Duration::from_secs(10), Duration::from_millis(200), || cluster.replicas[1].get_json("/healthz").1["replicas"]["count"] == 2);
    assert!(gone, "r0 still counted: {}", cluster.replicas[1].get_json("/healthz").1);
    let (headers, retry) = &parked[1].1;
    let (_, answer) = post(&cluster.replicas[2], "/mcp", headers, retry);
    assert!(answer["error"]["message"].as_str().unwrap_or_default().contains("r0) is gone"), "{answer}");
    // The others keep serving, new calls and their own parked ones alike.
    for i in [1, 2] {
        let (reply, _) = try_call(cluster.replicas[i].base_url(), "/mcp", "rt.echo", json!({ "text": "still here" }), Duration::from_secs(30)).unwrap();
        assert_eq!(reply["result"]["content"][0]["text"], "echo: still here", "{reply}");
        let (headers, retry) = park_a_question(&cluster.replicas[i], "/apps/mcp/rt", "elicit");
        let (replica, answer) = post(&cluster.replicas[3 - i], "/apps/mcp/rt", &headers, &retry);
        assert_eq!(replica, Some(cluster.ids[i].clone()), "{answer}");
        assert!(answer["result"]["content"][0]["text"].as_str().unwrap_or_default().contains("red"), "{answer}");
    }
}

fn logs(cluster: &Cluster) -> String {
    cluster.replicas.iter().zip(&cluster.ids).map(|(gw, id)| format!("--- {id} ---\n{}", gw.logs())).collect::<Vec<_>>().join("\n")
}

/// An initialize-era session opened straight on `gw` at `path`: the headers its requests carry.
fn open_session(gw: &GatewayProcess, path: &str) -> Vec<(&'static str, String)> {
    let mut headers = vec![("content-type", "application/json".to_string()), ("accept", "application/json, text/event-stream".to_string())];
    let init = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "replicas-test", "version": "1" } } });
    let reply = send(gw, reqwest::Method::POST, path, &headers, &init);
    let session = reply.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_string).expect("a session");
    headers.push(("mcp-session-id", session));
    headers.push(("mcp-protocol-version", "2025-11-25".to_string()));
    let _ = reply.text();
    let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    assert_eq!(send(gw, reqwest::Method::POST, path, &headers, &initialized).status().as_u16(), 202);
    headers
}

/// A request of an initialize-era session with these headers straight to `gw`: its HTTP status
/// and the replica that answered.
fn session_request(gw: &GatewayProcess, method: reqwest::Method, path: &str, headers: &[(&'static str, String)], body: &Value) -> (u16, Option<String>) {
    let reply = send(gw, method, path, headers, body);
    (reply.status().as_u16(), answered_by(&reply))
}

/// A session opened on one replica and ended (`DELETE`) through another is ended on every
/// replica: its requests, a call the short way would serve among them, are 404 wherever they land.
#[test]
fn a_session_ended_through_any_replica_is_ended_on_all() {
    let cluster = cluster();
    for (path, tool) in [("/apps/mcp/rt", "echo"), ("/mcp", "rt.echo")] {
        let headers = open_session(&cluster.replicas[0], path);
        let call = json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": { "name": tool, "arguments": { "text": "hi" } } });
        let (status, replica) = session_request(&cluster.replicas[1], reqwest::Method::POST, path, &headers, &call);
        assert_eq!((status, replica.as_deref()), (200, Some("r0")), "{path}: served by its owner through r1");
        let (status, replica) = session_request(&cluster.replicas[1], reqwest::Method::DELETE, path, &headers, &Value::Null);
        assert_eq!((status, replica.as_deref()), (200, Some("r0")), "{path}: ended by its owner through r1");
        for gw in &cluster.replicas {
            let (status, replica) = session_request(gw, reqwest::Method::POST, path, &headers, &call);
            assert_eq!(status, 404, "{path}: the ended session is still served by {replica:?}\n{}", logs(&cluster));
        }
    }
}

/// A replica killed while it runs a call another replica sent it: the caller, waiting on the
/// other replica, gets a JSON-RPC error naming the one that went away, not a stream that just ends.
#[test]
fn a_replica_killed_mid_call_leaves_its_forwarded_caller_a_clear_error() {
    let mut cluster = cluster();
    let headers = open_session(&cluster.replicas[0], "/mcp");
    let call = json!({ "jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": { "name": "rt.cancellable", "arguments": { "ms": 30000 } } });
    let url = cluster.replicas[1].url("/mcp");
    let waiting = std::thread::spawn(move || {
        let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(60)).no_proxy().build().unwrap();
        let mut request = client.post(url).body(call.to_string());
        for (name, value) in &headers {
            request = request.header(*name, value);
        }
        let response = request.send().expect("the call through r1");
        let replica = answered_by(&response);
        (replica, response.text().unwrap_or_default())
    });
    // The call is running on r0 (the test app counts cancellable calls it started).
    let started = wait_until(Duration::from_secs(20), Duration::from_millis(100), || {
        try_call(cluster.replicas[0].base_url(), "/mcp", "rt.cancellations", json!({}), Duration::from_secs(10))
            .is_ok_and(|(reply, _)| reply["result"]["structuredContent"]["started"].as_u64().unwrap_or(0) >= 1)
    });
    assert!(started, "the call never started on r0\n{}", logs(&cluster));
    cluster.replicas[0].signal(libc::SIGKILL);
    assert!(cluster.replicas[0].wait_exit(Duration::from_secs(15)).is_some(), "r0 survived SIGKILL");
    let (replica, text) = waiting.join().unwrap();
    // Whether r0 had begun its answer (then r1 ends r0's event stream with the error) or not
    // (then the error is r1's whole answer), the caller gets the answer to its call.
    let error = serde_json::from_str::<Value>(&text)
        .ok()
        .or_else(|| text.lines().filter_map(|l| l.strip_prefix("data:")).filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok()).find(|m| m["id"] == 9))
        .unwrap_or_else(|| panic!("no answer to the call (from {replica:?}) in {text:?}"));
    assert_eq!(error["id"], 9, "{error}");
    assert_eq!(error["error"]["code"], -32001, "{error}");
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("(r0,") && (message.contains("went away") || message.contains("did not answer")), "{message}");
    // The others keep serving.
    let (reply, _) = try_call(cluster.replicas[2].base_url(), "/mcp", "rt.echo", json!({ "text": "after" }), Duration::from_secs(30)).unwrap();
    assert_eq!(reply["result"]["content"][0]["text"], "echo: after", "{reply}");
}

/// The same once the owner has begun its answer (an event stream with the app's progress): the
/// other replica ends that stream with the error.
#[test]
fn a_replica_killed_mid_answer_ends_its_forwarded_stream_with_a_clear_error() {
    use std::io::Read;
    let mut cluster = cluster();
    let headers = open_session(&cluster.replicas[0], "/mcp");
    let call = json!({ "jsonrpc": "2.0", "id": 11, "method": "tools/call",
        "params": { "name": "rt.progress", "arguments": { "steps": 200, "delayMs": 200 }, "_meta": { "progressToken": "p" } } });
    let url = cluster.replicas[1].url("/mcp");
    let (progressed, seen) = std::sync::mpsc::channel::<()>();
    let waiting = std::thread::spawn(move || {
        let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(60)).no_proxy().build().unwrap();
        let mut request = client.post(url).body(call.to_string());
        for (name, value) in &headers {
            request = request.header(*name, value);
        }
        let mut response = request.send().expect("the call through r1");
        let replica = answered_by(&response);
        let mut text = String::new();
        let mut chunk = [0u8; 4096];
        loop {
            match response.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    text.push_str(&String::from_utf8_lossy(&chunk[..n]));
                    if text.contains("notifications/progress") {
                        let _ = progressed.send(());
                    }
                }
            }
        }
        (replica, text)
    });
    seen.recv_timeout(Duration::from_secs(30)).expect("no progress came through r1");
    cluster.replicas[0].signal(libc::SIGKILL);
    assert!(cluster.replicas[0].wait_exit(Duration::from_secs(15)).is_some(), "r0 survived SIGKILL");
    let (replica, text) = waiting.join().unwrap();
    assert_eq!(replica.as_deref(), Some("r0"), "the stream's head is the owner's: {text}");
    let answer = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|m| m["id"] == 11)
        .unwrap_or_else(|| panic!("the stream ended without an answer to the call: {text:?}"));
    assert_eq!(answer["error"]["code"], -32001, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("(r0,") && message.contains("went away"), "{message}");
}
