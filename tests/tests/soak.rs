//! Soak (issue 16): the real gateway under sustained load while everything an operator or a
//! crash can change changes, bounded and on loopback only.
//!
//! For `SOAK_SECONDS` (default 45) 200 MCP clients call `echo` without pause — stateless
//! 2026-07-28 requests on `/apps/mcp/{appId}` and on `/mcp` (prefixed names), plus ten
//! initialize-era sessions (the rmcp client) on both endpoints — while chat workers run turns
//! through `POST /apps/chat` and the scripted LLM (every other turn calls a tool). Meanwhile, on a
//! schedule, one thing at a time: an app's process is SIGKILLed (a stdio app, then a launched http
//! app) and supervision brings it back; another app's manifest is rewritten (version and a tool
//! flag) and the watcher reloads it; the module is swapped live (`POST /admin/module`, to the
//! variant build and back to a copy of the production one); a workspace MCP server is added,
//! changed and removed (`/admin/workspace/mcp`).
//!
//! What must hold:
//! - every failed call is classified; the only failures allowed are the documented ones of an app
//!   that was deliberately disturbed (killed, or reloaded by its manifest change), for that app,
//!   during that disturbance: `-32010` (app unavailable) / `Error: … is not running`, `-32001`
//!   (upstream failed: the session was lost) / `Error: McpApp '…': …`, and on `/mcp` `unknown tool`
//!   (its tools were withdrawn). A swap and a workspace edit must cost no call at all;
//! - no chat turn is lost: each ends with `result` and `done`, and the sessions' turn counts
//!   (`GET /apps/sessions`) add up to the turns completed;
//! - no app restarts that nobody touched: `gateway_app_restarts_total` grows by exactly the swaps
//!   for the untouched apps (a swap restarts every app), plus the kills or manifest changes for
//!   the disturbed ones;
//! - memory comes back: the gateway's VmRSS after the run and a short idle stays within
//!   [`RSS_BOUND_MIB`] of the baseline taken after a warm-up (both printed, with the peak, and
//!   split into RssAnon and RssFile: a module library swapped in stays mapped for good, so the
//!   file pages grow by the two libraries' code whatever else happens).
//!
//! One JSON line (`SOAK {…}`) sums the run up. Timing is never asserted (the machine is small
//! and shared): only counts, classes and states.
//!
//! Run alone: `cargo test --release -p gateway-e2e --test soak -- --nocapture` (after
//! `cargo build --release --workspace`); BENCHMARKS.md ("Soak") has the figures of one run.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gateway_e2e::chat::{start_chat, Next};
use gateway_e2e::scripted_llm::{Reply, ScriptedLlm};
use gateway_e2e::{build_variant_module, module_crate_version, module_lib, wait_until, GatewayOptions, GatewayProcess};
use rmcp::model::CallToolRequestParams;
use rmcp::service::ServiceError;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use support::*;

/// The run's length unless `SOAK_SECONDS` says otherwise.
const DEFAULT_SECONDS: u64 = 45;
/// Concurrent MCP clients (of which [`SESSION_CLIENTS`] hold initialize-era sessions).
const CLIENTS: usize = 200;
const SESSION_CLIENTS: usize = 10;
/// Threads running chat turns back to back, each in its own sessions.
const CHAT_WORKERS: usize = 4;
/// Turns per chat session before a worker opens the next one.
const TURNS_PER_SESSION: usize = 8;
/// The apps the clients call, in rotation. `steady-*` are never touched (except by the swaps,
/// which restart every app); `kill-*` are SIGKILLed; `reload-m`'s manifest is rewritten.
const TARGETS: [&str; 5] = ["steady-s", "steady-h", "kill-s", "kill-h", "reload-m"];
const UNTOUCHED: [&str; 2] = ["steady-s", "steady-h"];
/// The classes a call to a deliberately disturbed app may fail with (see the module docs).
const DISTURBANCE_CLASSES: [&str; 3] = ["app_unavailable", "upstream_lost", "tool_withdrawn"];
/// How long after its recovery was seen a disturbance may still explain a failed call (a reply
/// that was already on its way).
const GRACE: Duration = Duration::from_secs(2);
/// Bound of one MCP call, one chat turn, and of an app's recovery after a scheduled event.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
const TURN_TIMEOUT: Duration = Duration::from_secs(120);
const RECOVERY: Duration = Duration::from_secs(60);
/// How far the scheduled events may run past the planned end before the run is cut short.
const SCHEDULE_OVERRUN: Duration = Duration::from_secs(180);
/// Warm-up before the memory baseline, and the idle pauses before each reading.
const WARM_UP: Duration = Duration::from_secs(4);
const IDLE_BEFORE_BASELINE: Duration = Duration::from_secs(3);
const IDLE_AFTER: Duration = Duration::from_secs(8);
/// VmRSS after the run may exceed the baseline by at most this much.
const RSS_BOUND_MIB: f64 = 64.0;

const TOKEN: &str = "soak-test-token-0123456789";
const API_KEY_ENV: &str = "GATEWAY_E2E_LLM_KEY";
const API_KEY: &str = "sk-scripted-soak-0123";
/// What a chat message contains when the scripted model should call the tool.
const CALL_THE_TOOL: &str = "[call the tool]";

fn soak_seconds() -> u64 {
    match std::env::var("SOAK_SECONDS") {
        Ok(v) => v.trim().parse().unwrap_or_else(|_| panic!("SOAK_SECONDS={v:?} is not a number of seconds")),
        Err(_) => DEFAULT_SECONDS,
    }
}

// ---------------------------------------------------------------------------------------------
// Calls and how they failed
// ---------------------------------------------------------------------------------------------

/// A call that did not answer `echo: {text}`.
#[derive(Debug, Clone)]
struct Failure {
    endpoint: &'static str,
    app: String,
    class: &'static str,
    sent: Instant,
    ended: Instant,
    detail: String,
}

/// What some clients saw.
#[derive(Default)]
struct CallStats {
    ok: BTreeMap<&'static str, u64>,
    failed: BTreeMap<&'static str, u64>,
    latencies_us: Vec<u64>,
    failures: Vec<Failure>,
}

impl CallStats {
    fn record(&mut self, endpoint: &'static str, app: &str, sent: Instant, outcome: Result<(), (&'static str, String)>) {
        let ended = Instant::now();
        match outcome {
            Ok(()) => {
                *self.ok.entry(endpoint).or_default() += 1;
                self.latencies_us.push(ended.duration_since(sent).as_micros() as u64);
            }
            Err((class, detail)) => {
                *self.failed.entry(endpoint).or_default() += 1;
                self.failures.push(Failure { endpoint, app: app.to_string(), class, sent, ended, detail });
            }
        }
    }

    fn merge(&mut self, other: CallStats) {
        for (k, v) in other.ok {
            *self.ok.entry(k).or_default() += v;
        }
        for (k, v) in other.failed {
            *self.failed.entry(k).or_default() += v;
        }
        self.latencies_us.extend(other.latencies_us);
        self.failures.extend(other.failures);
    }

    fn total_ok(&self) -> u64 {
        self.ok.values().sum()
    }
}

fn shorten(text: &str) -> String {
    const MAX: usize = 300;
    if text.len() <= MAX {
        return text.to_string();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Judges a JSON-RPC response to `echo {text}`: Ok, or the failure's class and what was seen.
fn judge(response: &Value, text: &str) -> Result<(), (&'static str, String)> {
    if let Some(error) = response.get("error") {
        let message = error["message"].as_str().unwrap_or_default();
        let class = match error["code"].as_i64() {
            Some(-32010) => "app_unavailable",
            Some(-32001) => "upstream_lost",
            Some(-32602) if message.contains("unknown tool") => "tool_withdrawn",
            _ => "jsonrpc_error",
        };
        return Err((class, shorten(&error.to_string())));
    }
    let result = &response["result"];
    let first = result["content"][0]["text"].as_str().unwrap_or_default();
    if result["isError"] == true {
        let class = if first.contains("is not running") {
            "app_unavailable"
        } else if first.contains("has no tool") {
            "tool_missing"
        } else if first.starts_with("Error: McpApp '") {
            "upstream_lost"
        } else {
            "tool_error"
        };
        return Err((class, shorten(first)));
    }
    if first == format!("echo: {text}") {
        Ok(())
    } else {
        Err(("wrong_result", shorten(&response.to_string())))
    }
}

/// One stateless 2026-07-28 `tools/call echo` (the headers and `_meta` of `support::try_call`,
/// on a shared async client): the JSON-RPC response, or the failure's class.
async fn post_echo(client: &reqwest::Client, base: &str, path: &str, tool: &str, text: &str) -> Result<Value, (&'static str, String)> {
    let (headers, body) = stateless_tools_call(tool, json!({ "text": text }), "soak");
    let transport = |e: reqwest::Error| (if e.is_timeout() { "timeout" } else { "transport" }, format!("POST {path} {tool}: {e}"));
    let mut request = client.post(format!("{base}{path}")).body(body);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let response = request.send().await.map_err(transport)?;
    let status = response.status().as_u16();
    let reply = response.text().await.map_err(transport)?;
    if status != 200 {
        return Err(("http_status", format!("POST {path} {tool}: {status} {}", shorten(&reply))));
    }
    serde_json::from_str::<Value>(&reply)
        .ok()
        .or_else(|| {
            reply
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .find(|m| m["id"] == 1)
        })
        .ok_or_else(|| ("no_response", format!("POST {path} {tool}: {}", shorten(&reply))))
}

/// A stateless client: alternates `/apps/mcp/{app}` and `/mcp`, rotating over the apps.
async fn stateless_client(i: usize, client: reqwest::Client, base: String, stop: Arc<AtomicBool>) -> CallStats {
    let mut stats = CallStats::default();
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let app = TARGETS[(i + n / 2) % TARGETS.len()];
        let text = format!("c{i}-{n}");
        let sent = Instant::now();
        let via_apps_mcp = n.is_multiple_of(2);
        let outcome = if via_apps_mcp {
            post_echo(&client, &base, &format!("/apps/mcp/{app}"), "echo", &text).await
        } else {
            post_echo(&client, &base, "/mcp", &format!("{app}.echo"), &text).await
        };
        let endpoint = if via_apps_mcp { "apps_mcp" } else { "mcp" };
        stats.record(endpoint, app, sent, outcome.and_then(|r| judge(&r, &text)));
        n += 1;
    }
    stats
}

/// An initialize-era session (the rmcp client): on `/mcp` calling every app's `echo` in turn, or
/// on `/apps/mcp/{app}` calling that app's.
async fn session_client(i: usize, base: String, app: Option<&'static str>, stop: Arc<AtomicBool>) -> CallStats {
    let mut stats = CallStats::default();
    let (endpoint, url) = match app {
        Some(app) => ("apps_mcp_session", format!("{base}/apps/mcp/{app}")),
        None => ("mcp_session", format!("{base}/mcp")),
    };
    let sent = Instant::now();
    let session = match ().serve(StreamableHttpClientTransport::from_uri(url.clone())).await {
        Ok(session) => session,
        Err(e) => {
            stats.record(endpoint, app.unwrap_or("(session)"), sent, Err(("session_init", format!("{url}: {e}"))));
            return stats;
        }
    };
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let target = app.unwrap_or(TARGETS[(i + n) % TARGETS.len()]);
        let name = if app.is_some() { "echo".to_string() } else { format!("{target}.echo") };
        let text = format!("s{i}-{n}");
        let params = CallToolRequestParams::new(name).with_arguments(json!({ "text": text }).as_object().cloned().unwrap());
        let sent = Instant::now();
        let outcome = match tokio::time::timeout(CALL_TIMEOUT, session.call_tool(params)).await {
            Err(_) => Err(("timeout", format!("{url}: no answer within {CALL_TIMEOUT:?}"))),
            Ok(Ok(result)) => judge(&json!({ "result": serde_json::to_value(&result).unwrap_or(Value::Null) }), &text),
            Ok(Err(ServiceError::McpError(e))) => judge(&json!({ "error": { "code": e.code.0, "message": e.message } }), &text),
            Ok(Err(e)) => Err(("transport", format!("{url}: {e}"))),
        };
        stats.record(endpoint, target, sent, outcome);
        n += 1;
    }
    let _ = session.cancel().await;
    stats
}

// ---------------------------------------------------------------------------------------------
// Chat
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
struct ChatStats {
    started: u64,
    completed: u64,
    with_tool: u64,
    /// Turns completed per session id.
    per_session: BTreeMap<String, u64>,
    failures: Vec<String>,
}

impl ChatStats {
    fn merge(&mut self, other: ChatStats) {
        self.started += other.started;
        self.completed += other.completed;
        self.with_tool += other.with_tool;
        self.per_session.extend(other.per_session);
        self.failures.extend(other.failures);
    }
}

/// The scripted model, answering whatever arrives in whatever order: the final text once a tool
/// result came back, a call of `tool` (echoing the message's tag) when the user asks for it, else
/// text.
fn script_model(llm: &ScriptedLlm, tool: String) {
    let ids = AtomicU64::new(1);
    llm.respond_with(move |body| {
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let last = messages.last().cloned().unwrap_or(Value::Null);
        if last["role"] == "tool" {
            return Reply::text(["Done: ", "the tool answered."]);
        }
        let said = last["content"].as_str().unwrap_or_default();
        match said.strip_suffix(CALL_THE_TOOL) {
            Some(tag) if last["role"] == "user" => {
                let id = format!("call_soak{}", ids.fetch_add(1, Ordering::Relaxed));
                Reply::tool_call(&id, &tool, &json!({ "text": tag.trim() }))
            }
            _ => Reply::text(["All ", "quiet ", "here."]),
        }
    });
}

/// Runs turns back to back until `stop`, judging each.
fn chat_worker(gw: &GatewayProcess, phase: &str, worker: usize, stop: &AtomicBool) -> ChatStats {
    let mut stats = ChatStats::default();
    let mut turn = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let session = format!("soak-{phase}-w{worker}-s{}", turn / TURNS_PER_SESSION);
        let tag = format!("{phase} w{worker} t{turn}");
        let with_tool = turn.is_multiple_of(2);
        let message = if with_tool { format!("{tag} {CALL_THE_TOOL}") } else { format!("{tag} (just answer)") };
        stats.started += 1;
        let mut stream = start_chat(gw, &json!({ "message": message, "sessionId": session })).labelled(&format!("turn {tag}"));
        let deadline = Instant::now() + TURN_TIMEOUT;
        let mut problem = None;
        loop {
            match stream.try_next(deadline.saturating_duration_since(Instant::now())) {
                Next::Frame(frame) if frame.ty() == "done" => break,
                Next::Frame(_) => {}
                Next::Timeout => {
                    problem = Some(format!("no done within {TURN_TIMEOUT:?}"));
                    break;
                }
                Next::Ended(error) => {
                    problem = Some(format!("the stream ended before done ({error:?})"));
                    break;
                }
            }
        }
        if problem.is_none() {
            match stream.try_next(Duration::from_secs(10)) {
                Next::Ended(None) => {}
                other => problem = Some(format!("after done: {other:?}")),
            }
        }
        let types = stream.types();
        if problem.is_none() {
            let tool_results = stream.of_type("tool_result");
            problem = if types.iter().any(|t| t == "error") {
                Some("an error frame".to_string())
            } else if types.first().map(String::as_str) != Some("session") || types.len() < 3 || types[types.len() - 2] != "result" {
                Some(format!("frames {types:?}: not session … result, done"))
            } else if with_tool
                && !(tool_results.len() == 1
                    && tool_results[0].data["isError"] == false
                    && tool_results[0].data["text"].as_str().is_some_and(|t| t.contains(&format!("echo: {tag}"))))
            {
                Some("the tool call did not answer as expected".to_string())
            } else {
                None
            };
        }
        match problem {
            None => {
                stats.completed += 1;
                stats.with_tool += u64::from(with_tool);
                *stats.per_session.entry(session).or_default() += 1;
            }
            Some(why) => stats.failures.push(format!("{tag}: {why}\n{}", stream.describe())),
        }
        turn += 1;
    }
    stats
}

// ---------------------------------------------------------------------------------------------
// Observing the gateway
// ---------------------------------------------------------------------------------------------

/// `VmRSS`, `RssAnon`, `RssFile` of a process, in MiB.
fn memory_mib(pid: u32) -> (f64, f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("RssAnon:"), field("RssFile:"))
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// `gateway_app_restarts_total` per app.
fn restart_counts(gw: &GatewayProcess) -> BTreeMap<String, u64> {
    let (status, text) = gw.get("/metrics");
    assert_eq!(status, 200, "{text}");
    text.lines()
        .filter_map(|l| l.strip_prefix("gateway_app_restarts_total{app=\""))
        .filter_map(|rest| {
            let (app, value) = rest.split_once("\"}")?;
            Some((app.to_string(), value.trim().parse::<f64>().ok()? as u64))
        })
        .collect()
}

/// The apps of `/apps/health`, by id.
fn health_apps(gw: &GatewayProcess) -> Result<BTreeMap<String, Value>, String> {
    let (status, body) = gw.try_get("/apps/health")?;
    if status != 200 {
        return Err(format!("/apps/health: {status} {body}"));
    }
    let health: Value = serde_json::from_str(&body).map_err(|e| format!("/apps/health: {e}"))?;
    Ok(health["apps"].as_array().into_iter().flatten().map(|a| (a["id"].as_str().unwrap_or_default().to_string(), a.clone())).collect())
}

fn all_running(gw: &GatewayProcess) -> bool {
    health_apps(gw).is_ok_and(|apps| TARGETS.iter().all(|id| apps.get(*id).is_some_and(|a| a["state"] == "running")))
}

/// Registry tool names (`GET /tools`, `all`).
fn tool_names(gw: &GatewayProcess) -> Vec<String> {
    match gw.try_get("/tools") {
        Ok((200, body)) => serde_json::from_str::<Value>(&body)
            .ok()
            .and_then(|t| t["all"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// `app`'s echo answers through both endpoints.
fn probe(gw: &GatewayProcess, app: &str) -> bool {
    let ok = |path: &str, tool: &str| {
        try_call(gw.base_url(), path, tool, json!({ "text": "probe" }), Duration::from_secs(20))
            .is_ok_and(|(reply, _)| judge(&reply, "probe").is_ok())
    };
    ok(&format!("/apps/mcp/{app}"), "echo") && ok("/mcp", &format!("{app}.echo"))
}

// ---------------------------------------------------------------------------------------------
// The schedule of disturbances
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
enum Action {
    Kill(&'static str),
    ManifestChange,
    WorkspaceAdd,
    WorkspaceChange,
    WorkspaceRemove,
    Swap,
}

/// One cycle; longer runs repeat it. Kills and swaps alternate so that no app reaches the
/// crash-loop cap (3 losses within 300 s: a swap starts the apps afresh).
const CYCLE: [Action; 9] = [
    Action::Kill("kill-s"),
    Action::ManifestChange,
    Action::WorkspaceAdd,
    Action::Swap,
    Action::Kill("kill-h"),
    Action::WorkspaceChange,
    Action::ManifestChange,
    Action::Swap,
    Action::WorkspaceRemove,
];

/// When an app was deliberately disturbed: from just before the event to [`GRACE`] after its
/// recovery was seen (`None`: it never recovered).
#[derive(Debug, Clone)]
struct Window {
    app: String,
    from: Instant,
    to: Option<Instant>,
}

#[derive(Default)]
struct ScheduleReport {
    swaps: u64,
    swap_cancelled_calls: u64,
    kills: BTreeMap<String, u64>,
    manifest_changes: u64,
    workspace_edits: u64,
    windows: Vec<Window>,
    /// Events that did not go as they should (each fails the test).
    problems: Vec<String>,
    log: Vec<String>,
}

struct Scheduler<'a> {
    gw: &'a GatewayProcess,
    dir: &'a Path,
    apps: PathBuf,
    /// The modules swapped to in turn (copies in `Gateway.ModuleDirectory`) and their versions.
    modules: [(PathBuf, String); 2],
    admin: reqwest::blocking::Client,
}

impl Scheduler<'_> {
    fn admin(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Result<(u16, Value), String> {
        let mut request = self.admin.request(method.clone(), self.gw.url(path)).bearer_auth(TOKEN);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().map_err(|e| format!("{method} {path}: {e}"))?;
        let status = response.status().as_u16();
        let text = response.text().map_err(|e| format!("{method} {path}: {e}"))?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::String(text))))
    }

    /// Waits (up to [`RECOVERY`]) for `condition`; gives up at once if the gateway is gone.
    fn recovered(&self, mut condition: impl FnMut() -> bool) -> bool {
        let gateway = self.gw.pid() as i32;
        wait_until(RECOVERY, Duration::from_millis(100), || !process_alive(gateway) || condition()) && process_alive(gateway)
    }

    fn pid_of(&self, app: &str) -> Option<i32> {
        std::fs::read_to_string(self.dir.join(format!("{app}.pid"))).ok()?.trim().parse().ok()
    }

    fn reload_manifest(&self, revision: u64) -> Value {
        let pid = self.dir.join("reload-m.pid").display().to_string();
        let tool = format!("rev{revision}");
        let mut manifest = stdio_app("reload-m", &["--pid-file", &pid, "--extra-tool", &tool]);
        manifest["version"] = json!(format!("1.0.{revision}"));
        manifest["description"] = json!(format!("Rewritten by the soak, revision {revision}"));
        manifest
    }

    /// Writes a manifest whole (beside, then renamed), so the watcher never reads half of one.
    fn write_manifest_atomically(&self, folder: &str, manifest: &Value) {
        let staging = self.dir.join(format!(".{folder}.manifest.tmp"));
        std::fs::write(&staging, serde_json::to_string_pretty(manifest).unwrap()).unwrap();
        std::fs::rename(&staging, self.apps.join(folder).join("openclaw.mcpapp.json")).unwrap();
    }

    fn workspace_definition(tool: &str) -> Value {
        json!({ "transport": "stdio", "command": test_app_bin(), "arguments": ["--extra-tool", tool], "toolNamePrefix": "ws." })
    }

    /// `ws.{tool}` answers through `/mcp`.
    fn workspace_tool_answers(&self, tool: &str) -> bool {
        try_call(self.gw.base_url(), "/mcp", &format!("ws.{tool}"), json!({}), Duration::from_secs(20))
            .is_ok_and(|(reply, _)| reply["result"].is_object() && reply["result"]["isError"] != true)
    }

    /// Runs the schedule over `seconds` from `started`: one event at a time, each waited for.
    fn run(&self, started: Instant, seconds: u64, stop: &AtomicBool) -> ScheduleReport {
        let mut report = ScheduleReport::default();
        let cycles = (seconds / DEFAULT_SECONDS).max(1) as usize;
        let actions: Vec<Action> = CYCLE.iter().copied().cycle().take(CYCLE.len() * cycles).collect();
        let (first, last) = (Duration::from_secs(3), Duration::from_secs(seconds.saturating_sub(6).max(4)));
        let step = (last - first) / (actions.len() as u32 - 1).max(1);
        let (mut manifest_revision, mut workspace_tool, mut next_module) = (0u64, None::<String>, 0usize);
        for (k, action) in actions.iter().enumerate() {
            let at = started + first + step * k as u32;
            while Instant::now() < at {
                std::thread::sleep(Duration::from_millis(20));
            }
            if stop.load(Ordering::Relaxed) || !process_alive(self.gw.pid() as i32) {
                report.problems.push(format!("the run was cut short before event {k} ({action:?})"));
                break;
            }
            let t = started.elapsed().as_secs_f64();
            let outcome: Result<String, String> = match *action {
                Action::Kill(app) => {
                    let from = Instant::now();
                    match self.pid_of(app) {
                        None => Err(format!("no pid file for {app}")),
                        Some(old) => {
                            report.windows.push(Window { app: app.to_string(), from, to: None });
                            // SAFETY: kill(2) of the app's process, whose pid it wrote itself.
                            unsafe { libc::kill(old, libc::SIGKILL) };
                            *report.kills.entry(app.to_string()).or_default() += 1;
                            let back = self.recovered(|| {
                                self.pid_of(app).is_some_and(|p| p != old && process_alive(p))
                                    && health_apps(self.gw).is_ok_and(|a| a.get(app).is_some_and(|a| a["state"] == "running"))
                                    && probe(self.gw, app)
                            });
                            if back {
                                report.windows.last_mut().unwrap().to = Some(Instant::now() + GRACE);
                                Ok(format!("killed {app} (pid {old}); back as pid {} after {:.1} s", self.pid_of(app).unwrap_or(0), from.elapsed().as_secs_f64()))
                            } else {
                                Err(format!("{app} did not come back within {RECOVERY:?} of its SIGKILL"))
                            }
                        }
                    }
                }
                Action::ManifestChange => {
                    manifest_revision += 1;
                    let from = Instant::now();
                    report.windows.push(Window { app: "reload-m".into(), from, to: None });
                    self.write_manifest_atomically("reload-m", &self.reload_manifest(manifest_revision));
                    report.manifest_changes += 1;
                    let version = format!("1.0.{manifest_revision}");
                    let tool = format!("reload-m.rev{manifest_revision}");
                    let back = self.recovered(|| {
                        health_apps(self.gw).is_ok_and(|a| a.get("reload-m").is_some_and(|a| a["state"] == "running" && a["version"] == version.as_str()))
                            && tool_names(self.gw).contains(&tool)
                            && probe(self.gw, "reload-m")
                    });
                    if back {
                        report.windows.last_mut().unwrap().to = Some(Instant::now() + GRACE);
                        Ok(format!("reload-m rewritten to {version}; reloaded after {:.1} s", from.elapsed().as_secs_f64()))
                    } else {
                        Err(format!("reload-m was not reloaded to {version} (with {tool}) within {RECOVERY:?}"))
                    }
                }
                Action::WorkspaceAdd | Action::WorkspaceChange => {
                    let tool = format!("tool{k}");
                    let mut definition = Self::workspace_definition(&tool);
                    let request = match (action, &workspace_tool) {
                        (Action::WorkspaceAdd, None) => {
                            definition["id"] = json!("ws");
                            self.admin(reqwest::Method::POST, "/admin/workspace/mcp", Some(definition)).map(|r| (201, r))
                        }
                        (Action::WorkspaceChange, Some(_)) => {
                            self.admin(reqwest::Method::PUT, "/admin/workspace/mcp/ws", Some(definition)).map(|r| (200, r))
                        }
                        _ => Err(format!("{action:?} does not fit the workspace's state ({workspace_tool:?})")),
                    };
                    report.workspace_edits += 1;
                    match request {
                        Ok((expected, (status, body))) if status == expected => {
                            workspace_tool = Some(tool.clone());
                            if self.recovered(|| self.workspace_tool_answers(&tool)) {
                                Ok(format!("{action:?}: ws.{tool} answers"))
                            } else {
                                Err(format!("{action:?}: ws.{tool} never answered ({body})"))
                            }
                        }
                        Ok((expected, (status, body))) => Err(format!("{action:?}: {status} (expected {expected}): {body}")),
                        Err(e) => Err(e),
                    }
                }
                Action::WorkspaceRemove => {
                    report.workspace_edits += 1;
                    match self.admin(reqwest::Method::DELETE, "/admin/workspace/mcp/ws", None) {
                        Ok((200, _)) => {
                            workspace_tool = None;
                            if self.recovered(|| {
                                let names = tool_names(self.gw);
                                !names.is_empty() && !names.iter().any(|n| n.starts_with("ws."))
                            }) {
                                Ok("workspace server ws removed".to_string())
                            } else {
                                Err("ws's tools stayed in the registry after its removal".to_string())
                            }
                        }
                        Ok((status, body)) => Err(format!("DELETE ws: {status} {body}")),
                        Err(e) => Err(e),
                    }
                }
                Action::Swap => {
                    let (path, version) = &self.modules[next_module % 2];
                    next_module += 1;
                    let from = Instant::now();
                    match self.admin(reqwest::Method::POST, "/admin/module", Some(json!({ "path": path }))) {
                        Ok((200, body)) => {
                            report.swaps += 1;
                            let cancelled = body["swap"]["cancelledCalls"].as_u64().unwrap_or(0);
                            report.swap_cancelled_calls += cancelled;
                            let serving = self.recovered(|| {
                                self.gw.try_get("/healthz").is_ok_and(|(_, h)| {
                                    serde_json::from_str::<Value>(&h).is_ok_and(|h| h["module"]["version"] == version.as_str())
                                }) && all_running(self.gw)
                                    && TARGETS.iter().all(|app| probe(self.gw, app))
                            });
                            if serving {
                                Ok(format!(
                                    "swapped to {version} ({} ms in the gateway, {cancelled} call(s) cancelled); all apps serve after {:.1} s",
                                    body["swap"]["durationMs"],
                                    from.elapsed().as_secs_f64()
                                ))
                            } else {
                                Err(format!("after the swap to {version}, the apps did not all serve within {RECOVERY:?}"))
                            }
                        }
                        Ok((status, body)) => Err(format!("swap to {}: {status} {body}", path.display())),
                        Err(e) => Err(e),
                    }
                }
            };
            let line = match outcome {
                Ok(what) => format!("[soak +{t:5.1} s] {what}"),
                Err(why) => {
                    report.problems.push(format!("+{t:.1} s {action:?}: {why}"));
                    format!("[soak +{t:5.1} s] PROBLEM {action:?}: {why}")
                }
            };
            eprintln!("{line}");
            report.log.push(line);
        }
        report
    }
}

// ---------------------------------------------------------------------------------------------
// One phase of load
// ---------------------------------------------------------------------------------------------

struct PhaseReport {
    calls: CallStats,
    chat: ChatStats,
    schedule: ScheduleReport,
    elapsed: Duration,
    rss_peak_mib: f64,
}

/// Panics if the gateway is gone (its log then says why: a crash, or "Gateway shutting down",
/// i.e. a SIGTERM or SIGINT from outside the test).
fn assert_gateway_alive(gw: &mut GatewayProcess, when: &str) {
    if let Some(status) = gw.try_wait() {
        panic!("the gateway exited ({status}) {when}\n--- gateway output ---\n{}", gw.logs());
    }
}

/// Runs the clients and chat workers for `seconds` (longer if the schedule has not finished),
/// with `scheduler`'s events meanwhile if given.
fn run_phase(gw: &GatewayProcess, runtime: &tokio::runtime::Runtime, phase: &str, seconds: Duration, scheduler: Option<&Scheduler>) -> PhaseReport {
    let stop = Arc::new(AtomicBool::new(false));
    let client = reqwest::Client::builder()
        .timeout(CALL_TIMEOUT)
        .connect_timeout(Duration::from_secs(10))
        .pool_max_idle_per_host(CLIENTS)
        .no_proxy()
        .build()
        .unwrap();
    let base = gw.base_url().to_string();
    let started = Instant::now();
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let stop = stop.clone();
            if i < SESSION_CLIENTS {
                // Half on /mcp, half on /apps/mcp/{app} (one per app).
                let app = (i % 2 == 1).then(|| TARGETS[(i / 2) % TARGETS.len()]);
                runtime.spawn(session_client(i, base.clone(), app, stop))
            } else {
                runtime.spawn(stateless_client(i, client.clone(), base.clone(), stop))
            }
        })
        .collect();
    let (chat, schedule, rss_peak_mib, elapsed) = std::thread::scope(|s| {
        let chat: Vec<_> = (0..CHAT_WORKERS)
            .map(|w| {
                let stop = &*stop;
                s.spawn(move || chat_worker(gw, phase, w, stop))
            })
            .collect();
        let sampler = s.spawn(|| {
            let mut peak: f64 = 0.0;
            while !stop.load(Ordering::Relaxed) {
                peak = peak.max(memory_mib(gw.pid()).0);
                std::thread::sleep(Duration::from_millis(200));
            }
            peak
        });
        let schedule = scheduler.map(|sch| {
            let stop = &*stop;
            s.spawn(move || sch.run(started, seconds.as_secs(), stop))
        });
        let finished = |h: &Option<std::thread::ScopedJoinHandle<ScheduleReport>>| h.as_ref().is_none_or(|h| h.is_finished());
        while started.elapsed() < seconds || (!finished(&schedule) && started.elapsed() < seconds + SCHEDULE_OVERRUN) {
            if !process_alive(gw.pid() as i32) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let elapsed = started.elapsed();
        stop.store(true, Ordering::Relaxed);
        let mut merged = ChatStats::default();
        for h in chat {
            merged.merge(h.join().expect("a chat worker panicked"));
        }
        let schedule = schedule.map(|h| h.join().expect("the scheduler panicked")).unwrap_or_default();
        (merged, schedule, sampler.join().unwrap(), elapsed)
    });
    let mut calls = CallStats::default();
    for stats in runtime.block_on(futures::future::join_all(tasks)) {
        calls.merge(stats.expect("a client task panicked"));
    }
    PhaseReport { calls, chat, schedule, elapsed, rss_peak_mib }
}

/// Whether a failure is one a deliberate disturbance explains: an allowed class, for the
/// disturbed app, overlapping its window.
fn explained(failure: &Failure, windows: &[Window], run_end: Instant) -> bool {
    DISTURBANCE_CLASSES.contains(&failure.class)
        && windows
            .iter()
            .any(|w| w.app == failure.app && failure.ended >= w.from && failure.sent <= w.to.unwrap_or(run_end))
}

fn percentile_ms(sorted_us: &[u64], p: f64) -> f64 {
    if sorted_us.is_empty() {
        return 0.0;
    }
    let index = ((sorted_us.len() as f64 - 1.0) * p).round() as usize;
    (sorted_us[index] as f64 / 10.0).round() / 100.0
}

// ---------------------------------------------------------------------------------------------
// The test
// ---------------------------------------------------------------------------------------------

#[test]
fn two_hundred_clients_and_chat_through_kills_reloads_swaps_and_workspace_edits() {
    let seconds = soak_seconds();
    let variant = build_variant_module();
    let production_version = module_crate_version();
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    let modules = dir.path().join("modules");
    std::fs::create_dir_all(&modules).unwrap();
    // Each library under its own file name (a path is loaded once per process): the variant,
    // and a copy of the production build to swap back to.
    let variant_copy = modules.join(variant.path.file_name().unwrap());
    std::fs::copy(&variant.path, &variant_copy).unwrap();
    let production_copy = modules.join("libmcpapp_plugin_soak.so");
    std::fs::copy(module_lib(), &production_copy).unwrap();

    // The model's server holds its port before the HTTP apps' ports are picked (a port picked
    // free and let go was once handed to it next, and the app then found its port taken).
    let llm = ScriptedLlm::start();
    let pid_arg = |app: &str| dir.path().join(format!("{app}.pid")).display().to_string();
    for app in ["steady-s", "kill-s"] {
        write_manifest(&apps, app, &stdio_app(app, &["--pid-file", &pid_arg(app)]));
    }
    for app in ["steady-h", "kill-h"] {
        write_manifest(&apps, app, &http_app(app, &["--pid-file", &pid_arg(app)]));
    }
    let pid = pid_arg("reload-m");
    let mut reload_m = stdio_app("reload-m", &["--pid-file", &pid, "--extra-tool", "rev0"]);
    reload_m["version"] = json!("1.0.0");
    write_manifest(&apps, "reload-m", &reload_m);

    let config = json!({
        "Gateway": {
            "AlwaysRequireAuth": false,
            "AuthTokenEnv": "SOAK_TEST_TOKEN",
            "ModuleDirectory": modules,
            "DataPath": dir.path().join("data"),
        },
        "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [apps], "Allow": ["*"] } },
        "Plugins": { "Mcp": { "AllowedCommands": [test_app_bin()] } },
        "Agent": {
            "BaseUrl": llm.base_url(),
            "Model": "scripted",
            "ApiKeyEnv": API_KEY_ENV,
            "SystemPrompt": "You are the assistant of the gateway's soak test.",
            "MaxToolRounds": 3,
            "TimeoutSeconds": 60,
        },
        "Sessions": { "Store": "sqlite" },
    });
    let mut gw = GatewayProcess::start_with(GatewayOptions {
        config,
        config_dir: Some(dir.path().to_path_buf()),
        env: vec![
            ("SOAK_TEST_TOKEN".into(), TOKEN.into()),
            (API_KEY_ENV.into(), API_KEY.into()),
            // The gateway's own default filter (the harness's plain `info` would log three rmcp
            // lines per stateless request: hundreds of thousands here).
            ("RUST_LOG".into(), "info,rmcp=warn".into()),
        ],
        ..Default::default()
    });
    assert!(
        wait_until(Duration::from_secs(60), Duration::from_millis(200), || all_running(&gw) && TARGETS.iter().all(|app| probe(&gw, app))),
        "the apps never all served: {:?}\n{}",
        health_apps(&gw),
        gw.logs()
    );
    // The chat's tool: steady-s.echo under its provider-safe name.
    let (_, tools) = gw.get_json("/tools");
    let tool = tools["model"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["name"] == "steady-s.echo")
        .and_then(|t| t["providerName"].as_str())
        .unwrap_or_else(|| panic!("steady-s.echo is not offered to the model: {tools}"))
        .to_string();
    script_model(&llm, tool);

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();

    // Warm-up, then the baseline.
    let t0 = Instant::now();
    let warm = run_phase(&gw, &runtime, "warm", WARM_UP, None);
    assert_gateway_alive(&mut gw, "during the warm-up");
    std::thread::sleep(IDLE_BEFORE_BASELINE);
    let baseline = memory_mib(gw.pid());
    let restarts_before = restart_counts(&gw);
    let pids_before: BTreeMap<&str, i32> = UNTOUCHED.iter().map(|a| (*a, read_pid(&dir.path().join(format!("{a}.pid")), Duration::from_secs(5)))).collect();

    // The run.
    let scheduler = Scheduler {
        gw: &gw,
        dir: dir.path(),
        apps: apps.clone(),
        modules: [(variant_copy, variant.version.clone()), (production_copy, production_version.clone())],
        admin: reqwest::blocking::Client::builder().timeout(Duration::from_secs(120)).no_proxy().build().unwrap(),
    };
    let run = run_phase(&gw, &runtime, "run", Duration::from_secs(seconds), Some(&scheduler));
    let run_end = Instant::now();
    drop(scheduler);
    assert_gateway_alive(&mut gw, "during the soak");

    // Idle, then memory and the end state.
    std::thread::sleep(IDLE_AFTER);
    let after = memory_mib(gw.pid());
    let restarts_after = restart_counts(&gw);
    let health = health_apps(&gw).unwrap_or_else(|e| panic!("{e}\n{}", gw.logs()));
    let (_, sessions) = gw.get_json("/apps/sessions");

    // --- classify -----------------------------------------------------------------------------
    let schedule = &run.schedule;
    let mut by_class: BTreeMap<String, u64> = BTreeMap::new();
    let mut by_app: BTreeMap<String, u64> = BTreeMap::new();
    let mut unexpected: Vec<&Failure> = Vec::new();
    for f in &warm.calls.failures {
        *by_class.entry(format!("warm-up {}", f.class)).or_default() += 1;
        unexpected.push(f);
    }
    for f in &run.calls.failures {
        *by_app.entry(f.app.clone()).or_default() += 1;
        let explained = explained(f, &schedule.windows, run_end);
        *by_class.entry(if explained { f.class.to_string() } else { format!("UNEXPECTED {}", f.class) }).or_default() += 1;
        if !explained {
            unexpected.push(f);
        }
    }
    let mut chat = ChatStats::default();
    chat.merge(warm.chat);
    chat.merge(run.chat);
    // Turn counts the gateway saved, per soak session.
    let saved: BTreeMap<String, u64> = sessions["sessions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["id"].as_str().is_some_and(|id| id.starts_with("soak-")))
        .map(|s| (s["id"].as_str().unwrap().to_string(), s["turns"].as_u64().unwrap_or(0)))
        .collect();
    let saved_turns: u64 = saved.values().sum();
    let lost_turns = chat.started - chat.completed;

    let swaps = schedule.swaps;
    let expected_restarts = |app: &str| {
        swaps
            + schedule.kills.get(app).copied().unwrap_or(0)
            + if app == "reload-m" { schedule.manifest_changes } else { 0 }
    };
    let restart_deltas: BTreeMap<&str, (u64, u64)> = TARGETS
        .iter()
        .map(|app| {
            let delta = restarts_after.get(*app).copied().unwrap_or(0).saturating_sub(restarts_before.get(*app).copied().unwrap_or(0));
            (*app, (delta, expected_restarts(app)))
        })
        .collect();

    let mut latencies = run.calls.latencies_us.clone();
    latencies.sort_unstable();
    let failed_total: u64 = run.calls.failed.values().sum();
    let endpoints: BTreeMap<&str, Value> = ["apps_mcp", "mcp", "apps_mcp_session", "mcp_session"]
        .iter()
        .map(|e| (*e, json!({ "ok": run.calls.ok.get(e).copied().unwrap_or(0), "failed": run.calls.failed.get(e).copied().unwrap_or(0) })))
        .collect();
    let summary = json!({
        "seconds": round1(run.elapsed.as_secs_f64()),
        "clients": CLIENTS,
        "session_clients": SESSION_CLIENTS,
        "chat_workers": CHAT_WORKERS,
        "calls": endpoints,
        "calls_ok": run.calls.total_ok(),
        "calls_failed": failed_total,
        "failures_by_class": by_class,
        "failures_by_app": by_app,
        "unexpected_failures": unexpected.len(),
        "chat_turns_started": chat.started,
        "chat_turns_completed": chat.completed,
        "chat_turns_with_tool": chat.with_tool,
        "chat_turns_saved": saved_turns,
        "calls_per_second": round1((run.calls.total_ok() + failed_total) as f64 / run.elapsed.as_secs_f64()),
        "latency_ms_p50": percentile_ms(&latencies, 0.50),
        "latency_ms_p99": percentile_ms(&latencies, 0.99),
        "rss_mb_baseline": round1(baseline.0),
        "rss_mb_peak": round1(run.rss_peak_mib.max(warm.rss_peak_mib)),
        "rss_mb_after": round1(after.0),
        "rss_anon_mb_baseline": round1(baseline.1),
        "rss_anon_mb_after": round1(after.1),
        "rss_file_mb_baseline": round1(baseline.2),
        "rss_file_mb_after": round1(after.2),
        "module_swaps": swaps,
        "swap_cancelled_calls": schedule.swap_cancelled_calls,
        "app_kills": schedule.kills.values().sum::<u64>(),
        "manifest_changes": schedule.manifest_changes,
        "workspace_edits": schedule.workspace_edits,
        "app_restarts": restart_deltas.iter().map(|(a, (d, _))| (a.to_string(), *d)).collect::<BTreeMap<_, _>>(),
    });
    println!("SOAK {summary}");

    // --- assert -------------------------------------------------------------------------------
    let mut problems: Vec<String> = schedule.problems.clone();
    if !unexpected.is_empty() {
        let samples: Vec<String> = unexpected
            .iter()
            .take(12)
            .map(|f| {
                format!(
                    "  {} {} [{}] sent at +{:.2} s, took {:.2} s: {}",
                    f.endpoint,
                    f.app,
                    f.class,
                    f.sent.saturating_duration_since(t0).as_secs_f64(),
                    f.ended.duration_since(f.sent).as_secs_f64(),
                    f.detail
                )
            })
            .collect();
        problems.push(format!("{} unexpected call failure(s), e.g.:\n{}", unexpected.len(), samples.join("\n")));
    }
    if !chat.failures.is_empty() {
        problems.push(format!(
            "{} chat turn(s) did not end well, e.g.:\n{}",
            chat.failures.len(),
            chat.failures.iter().take(3).cloned().collect::<Vec<_>>().join("\n")
        ));
    }
    if lost_turns > 0 || saved_turns != chat.completed || saved != chat.per_session {
        let differing: Vec<String> = chat
            .per_session
            .iter()
            .filter(|(id, n)| saved.get(*id) != Some(n))
            .map(|(id, n)| format!("{id}: completed {n}, saved {:?}", saved.get(id)))
            .chain(saved.keys().filter(|id| !chat.per_session.contains_key(*id)).map(|id| format!("{id}: saved but never completed")))
            .take(10)
            .collect();
        problems.push(format!(
            "chat turns: {} started, {} completed, {} saved in {} sessions; differing: {differing:?}",
            chat.started,
            chat.completed,
            saved_turns,
            saved.len()
        ));
    }
    for (app, (delta, expected)) in &restart_deltas {
        if delta != expected {
            problems.push(format!("{app} restarted {delta} time(s); the schedule explains {expected} (swaps {swaps}, kills {:?}, manifest changes {})", schedule.kills, schedule.manifest_changes));
        }
    }
    for app in TARGETS {
        let state = &health.get(app).map_or(Value::Null, |a| a["state"].clone());
        if state != "running" {
            problems.push(format!("{app} ends {state}: {:?}", health.get(app)));
        }
    }
    for app in UNTOUCHED {
        let now = read_pid(&dir.path().join(format!("{app}.pid")), Duration::from_secs(5));
        if !process_alive(now) || (swaps == 0 && now != pids_before[app]) {
            problems.push(format!("{app}: pid {} before, {now} after (alive: {}), with {swaps} swap(s)", pids_before[app], process_alive(now)));
        }
    }
    if swaps == 0 || schedule.kills.is_empty() || schedule.manifest_changes == 0 || schedule.workspace_edits == 0 {
        problems.push(format!("the schedule did not run every kind of event: {:?}", schedule.log));
    }
    if run.calls.total_ok() == 0 || chat.completed == 0 {
        problems.push("no load went through".to_string());
    }
    if after.0 > baseline.0 + RSS_BOUND_MIB {
        problems.push(format!(
            "memory did not come back: VmRSS {:.1} MiB after (anon {:.1}, file {:.1}), baseline {:.1} MiB (anon {:.1}, file {:.1}), bound +{RSS_BOUND_MIB} MiB",
            after.0, after.1, after.2, baseline.0, baseline.1, baseline.2
        ));
    }
    assert!(problems.is_empty(), "soak problems:\n- {}\nschedule:\n{}\nsummary: {summary}", problems.join("\n- "), schedule.log.join("\n"));

    let status = gw.terminate();
    assert!(status.is_some_and(|s| s.success()), "orderly exit after the soak: {status:?}\n{}", gw.logs());
}
