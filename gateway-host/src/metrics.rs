//! The gateway's metrics, served by `GET /metrics` in the Prometheus text format (0.0.4).
//!
//! Why `prometheus-client` (the Prometheus project's Rust client) rather than hand-written text:
//! the exposition rules (label escaping, `_total` suffixes, cumulative histogram buckets with
//! `+Inf`, `HELP`/`TYPE` lines) are the library's, so what scrapers parse cannot drift from them.
//!
//! Two kinds of numbers:
//! - **events**, counted where they happen: tool calls (by the registry, for `/mcp` and the chat
//!   agent alike), requests of `/apps/mcp/{appId}`, chat turns, app restarts (from the module's
//!   lifecycle events, see [`Metrics::follow_module`]);
//! - **state**, read at scrape time so it is never stale: each app's lifecycle state (from the
//!   module's app list) and the module swaps ([`ModuleHost::swap_counts`], which counts swaps
//!   however they were asked for — `POST /admin/module` or `SIGHUP`).
//!
//! Label values are bounded: apps are registry keys the gateway has seen (anything else a URL
//! names is `(unknown)`), tools are the registry's, methods come from [`METHODS`] (else `other`),
//! outcomes and states are fixed sets. Every name starts with `gateway_`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use host_abi::EventKind;
use host_abi::payloads::AppState;
use parking_lot::{Mutex, RwLock};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use serde::Deserialize;
use tokio::sync::broadcast;

use crate::module::host::{HostEvent, ModuleHost};

/// The `Content-Type` of what [`Metrics::scrape`] returns.
pub use prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// The app label of a request whose URL names no app the gateway knows (keeps the label set
/// bounded whatever clients put in URLs).
pub const UNKNOWN_APP: &str = "(unknown)";

/// The JSON-RPC methods counted by name for `/apps/mcp/{appId}`; any other is `other`.
pub const METHODS: &[&str] = &[
    "initialize",
    "server/discover",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "subscriptions/listen",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "tasks/result",
    "tasks/list",
];

/// Upper bounds (seconds) of the tool-call latency buckets: from a cached answer to a call that
/// runs into the usual request timeouts.
const TOOL_CALL_BUCKETS: [f64; 14] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0];

/// How a model-side tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolOutcome {
    /// A result.
    Ok,
    /// A result with `isError` (the tool itself reported the failure).
    Error,
    /// No result: the call could not be made or the app refused it (not running, unknown tool,
    /// invalid arguments, a JSON-RPC error, a timeout, the module failed).
    Failed,
    /// The caller went away (or the call was cancelled) before a result.
    Cancelled,
}

impl ToolOutcome {
    fn as_str(self) -> &'static str {
        match self {
            ToolOutcome::Ok => "ok",
            ToolOutcome::Error => "error",
            ToolOutcome::Failed => "failed",
            ToolOutcome::Cancelled => "cancelled",
        }
    }
}

/// How a request of `/apps/mcp/{appId}` was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxiedOutcome {
    /// A result.
    Ok,
    /// A `tools/call` result with `isError`.
    ToolError,
    /// A 2026-07-28 `input_required` result (the client answers by retrying).
    InputRequired,
    /// A JSON-RPC error (the app's, or the gateway's: app not running, forwarding failed).
    Error,
    /// The client went away before the answer.
    Cancelled,
}

impl ProxiedOutcome {
    fn as_str(self) -> &'static str {
        match self {
            ProxiedOutcome::Ok => "ok",
            ProxiedOutcome::ToolError => "tool_error",
            ProxiedOutcome::InputRequired => "input_required",
            ProxiedOutcome::Error => "error",
            ProxiedOutcome::Cancelled => "cancelled",
        }
    }
}

/// How a chat turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnOutcome {
    /// The model answered and the turn was saved.
    Ok,
    /// The turn ended with an error frame (no model configured, the provider or the store failed).
    Error,
    /// The client went away and the turn was cancelled.
    Cancelled,
}

impl TurnOutcome {
    fn as_str(self) -> &'static str {
        match self {
            TurnOutcome::Ok => "ok",
            TurnOutcome::Error => "error",
            TurnOutcome::Cancelled => "cancelled",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AppLabels {
    app: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AppStateLabels {
    app: String,
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    app: String,
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolCallLabels {
    app: String,
    tool: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProxiedLabels {
    app: String,
    method: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreLabels {
    /// `sqlite` or `redis`.
    store: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ViewLabels {
    /// `tools` (the tool registry) or `apps` (`/mcp`'s multiplexer).
    view: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ParseLabels {
    /// `host` or `module`: which side of the module boundary parsed.
    side: &'static str,
    /// `request` (a client's, on its way to an app) or `answer` (an app's, on its way back).
    direction: &'static str,
}

/// The module's count of its JSON parses on the message path (`invoke("diag.parse_counts")`).
#[derive(Deserialize)]
struct ModuleParses {
    request: u64,
    answer: u64,
}

/// The part of an `app.state_changed` event's payload read here.
#[derive(Deserialize)]
struct StateChanged {
    #[serde(default)]
    to: AppState,
}

fn tool_call_histogram() -> Histogram {
    Histogram::new(TOOL_CALL_BUCKETS)
}

/// Every metric of the gateway and the registry that encodes them. One per gateway, shared.
pub struct Metrics {
    registry: Registry,
    app_state: Family<AppStateLabels, Gauge>,
    app_restarts: Family<AppLabels, Counter>,
    tool_calls: Family<ToolCallLabels, Counter>,
    tool_call_duration: Family<ToolLabels, Histogram, fn() -> Histogram>,
    proxied_requests: Family<ProxiedLabels, Counter>,
    chat_turns: Family<OutcomeLabels, Counter>,
    chat_turns_in_progress: Gauge,
    chat_sessions_active: Gauge,
    module_swaps: Family<OutcomeLabels, Counter>,
    json_parses: Family<ParseLabels, Counter>,
    module_listings: Family<ViewLabels, Counter>,
    session_store_up: Family<StoreLabels, Gauge>,
    /// Registry keys of the apps seen (in events and app lists): the only `app` values a URL can
    /// produce.
    known_apps: RwLock<HashSet<String>>,
    /// Apps seen Running: the next time one becomes Running is a restart.
    has_run: Mutex<HashSet<String>>,
    /// Chat sessions with a turn running (or waiting for the session), with how many.
    active_sessions: Mutex<HashMap<String, usize>>,
    /// One scrape at a time: the state families are rewritten right before encoding.
    scraping: Mutex<()>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("gateway");
        let app_state = Family::<AppStateLabels, Gauge>::default();
        registry.register(
            "app_state",
            "Each app's lifecycle state: 1 for the state it is in, 0 for the others (read from the module at scrape time)",
            app_state.clone(),
        );
        let app_restarts = Family::<AppLabels, Counter>::default();
        registry.register(
            "app_restarts",
            "Times an app became Running again after having run (crash recovery, stop/start, a reload that changed it, a module swap)",
            app_restarts.clone(),
        );
        let tool_calls = Family::<ToolCallLabels, Counter>::default();
        registry.register(
            "tool_calls",
            "Model-side tool calls (/mcp and the chat agent) by app, tool and outcome (ok, error: an isError result, failed: no result from the app, cancelled)",
            tool_calls.clone(),
        );
        let tool_call_duration = Family::<ToolLabels, Histogram, fn() -> Histogram>::new_with_constructor(tool_call_histogram);
        registry.register("tool_call_duration_seconds", "How long model-side tool calls took, by app and tool", tool_call_duration.clone());
        let proxied_requests = Family::<ProxiedLabels, Counter>::default();
        registry.register(
            "proxied_requests",
            "JSON-RPC requests of /apps/mcp/{appId} (browser app UIs and other MCP clients) by app, method and outcome",
            proxied_requests.clone(),
        );
        let chat_turns = Family::<OutcomeLabels, Counter>::default();
        registry.register("chat_turns", "Chat turns (POST /apps/chat) by outcome", chat_turns.clone());
        let chat_turns_in_progress = Gauge::default();
        registry.register("chat_turns_in_progress", "Chat turns running now (or waiting for their session)", chat_turns_in_progress.clone());
        let chat_sessions_active = Gauge::default();
        registry.register("chat_sessions_active", "Chat sessions with a turn in progress now", chat_sessions_active.clone());
        let module_swaps = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "module_swaps",
            "Live module swaps (POST /admin/module, SIGHUP) by outcome (swapped, refused, failed_to_start)",
            module_swaps.clone(),
        );
        let json_parses = Family::<ParseLabels, Counter>::default();
        registry.register(
            "json_parses",
            "JSON parses on the message path of proxied requests (a debug counter, issue 40), by side of the module boundary and direction",
            json_parses.clone(),
        );
        let module_listings = Family::<ViewLabels, Counter>::default();
        registry.register(
            "module_listings",
            "Times a view the host keeps of the module listed it again (tools: the tool registry; apps: /mcp's multiplexer): after the module reported an app change, never for a name no app has",
            module_listings.clone(),
        );
        let session_store_up = Family::<StoreLabels, Gauge>::default();
        registry.register(
            "session_store_up",
            "Whether the chat session store answers (1) or not (0): a shared store (Redis) is checked every 5 s and by /healthz",
            session_store_up.clone(),
        );
        // Series that exist from the start, so rates over them need no first event.
        for outcome in [TurnOutcome::Ok, TurnOutcome::Error, TurnOutcome::Cancelled] {
            let _ = chat_turns.get_or_create(&OutcomeLabels { outcome: outcome.as_str() });
        }
        for outcome in crate::module::host::SWAP_OUTCOMES {
            let _ = module_swaps.get_or_create(&OutcomeLabels { outcome });
        }
        Metrics {
            registry,
            app_state,
            app_restarts,
            tool_calls,
            tool_call_duration,
            proxied_requests,
            chat_turns,
            chat_turns_in_progress,
            chat_sessions_active,
            module_swaps,
            json_parses,
            module_listings,
            session_store_up,
            known_apps: RwLock::new(HashSet::new()),
            has_run: Mutex::new(HashSet::new()),
            active_sessions: Mutex::new(HashMap::new()),
            scraping: Mutex::new(()),
        }
    }

    /// Follows the module's events (app ids, and restarts from lifecycle changes) for as long as
    /// the module host lives. Call it before the apps start, so that no first Running is missed
    /// (a missed one would make the next look like a first).
    pub fn follow_module(self: &Arc<Self>, module: &ModuleHost) {
        let mut events = module.subscribe();
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(event) => me.observe(&event),
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        tracing::debug!("metrics: {missed} module event(s) missed; app restarts may be undercounted")
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                }
            }
        });
    }

    fn observe(&self, event: &HostEvent) {
        if event.app_id.is_empty() {
            return;
        }
        self.remember_app(&event.app_id);
        if event.kind != EventKind::AppStateChanged {
            return;
        }
        let Ok(change) = StateChanged::deserialize(&event.payload) else { return };
        if change.to == AppState::Running && !self.has_run.lock().insert(event.app_id.clone()) {
            self.app_restarts.get_or_create(&AppLabels { app: event.app_id.clone() }).inc();
        }
    }

    fn remember_app(&self, app: &str) {
        if !self.known_apps.read().contains(app) {
            self.known_apps.write().insert(app.to_string());
        }
    }

    /// `app` if the gateway knows such an app, else [`UNKNOWN_APP`].
    fn app_label(&self, app: &str) -> String {
        if self.known_apps.read().contains(app) {
            app.to_string()
        } else {
            UNKNOWN_APP.to_string()
        }
    }

    /// Starts timing one model-side tool call of `tool` (the tool's own name at the app) offered
    /// by `app` (its registry key; the provider id for built-ins). Dropped unfinished, the call
    /// counts as cancelled.
    pub fn tool_call(&self, app: &str, tool: &str) -> ToolCallTimer<'_> {
        ToolCallTimer { metrics: self, app: app.to_string(), tool: tool.to_string(), started: Instant::now(), done: false }
    }

    fn record_tool_call(&self, app: &str, tool: &str, outcome: ToolOutcome, started: Instant) {
        let labels = ToolCallLabels { app: app.to_string(), tool: tool.to_string(), outcome: outcome.as_str() };
        self.tool_calls.get_or_create(&labels).inc();
        let labels = ToolLabels { app: app.to_string(), tool: tool.to_string() };
        self.tool_call_duration.get_or_create(&labels).observe(started.elapsed().as_secs_f64());
    }

    /// Starts counting one JSON-RPC request of `/apps/mcp/{app}`. Dropped unfinished, it counts
    /// as cancelled.
    pub fn proxied_request(&self, app: &str, method: &str) -> ProxiedRequest<'_> {
        let method = METHODS.iter().find(|m| **m == method).copied().unwrap_or("other");
        ProxiedRequest { metrics: self, app: self.app_label(app), method, done: false }
    }

    fn record_proxied(&self, app: &str, method: &'static str, outcome: ProxiedOutcome) {
        self.proxied_requests.get_or_create(&ProxiedLabels { app: app.to_string(), method, outcome: outcome.as_str() }).inc();
    }

    /// A chat turn of `session_id` begins: it is in progress until the returned guard finishes
    /// or drops (dropped unfinished, it counts as cancelled).
    pub fn chat_turn(&self, session_id: &str) -> ChatTurn<'_> {
        self.chat_turns_in_progress.inc();
        {
            let mut sessions = self.active_sessions.lock();
            *sessions.entry(session_id.to_string()).or_insert(0) += 1;
            self.chat_sessions_active.set(sessions.len() as i64);
        }
        ChatTurn { metrics: self, session_id: session_id.to_string(), done: false }
    }

    fn end_chat_turn(&self, session_id: &str, outcome: TurnOutcome) {
        self.chat_turns.get_or_create(&OutcomeLabels { outcome: outcome.as_str() }).inc();
        self.chat_turns_in_progress.dec();
        let mut sessions = self.active_sessions.lock();
        if let Some(count) = sessions.get_mut(session_id) {
            *count -= 1;
            if *count == 0 {
                sessions.remove(session_id);
            }
        }
        self.chat_sessions_active.set(sessions.len() as i64);
    }

    /// One listing of the module by the view `view` (`tools`, `apps`).
    pub fn module_listing(&self, view: &'static str) {
        self.module_listings.get_or_create(&ViewLabels { view }).inc();
    }

    /// Whether the session store of kind `store` answered its last check.
    pub fn set_session_store_up(&self, store: &'static str, up: bool) {
        self.session_store_up.get_or_create(&StoreLabels { store }).set(i64::from(up));
    }

    /// The metrics now, in the Prometheus text format ([`CONTENT_TYPE`]): the state families are
    /// read from `module` first (app states, swap counts).
    pub async fn scrape(&self, module: &ModuleHost) -> String {
        let apps = match module.list_apps().await {
            Ok(apps) => Some(apps),
            Err(e) => {
                tracing::debug!("metrics: cannot list the apps: {e}");
                None
            }
        };
        let swaps = module.swap_counts();
        let module_parses = module.invoke_typed::<_, ModuleParses>("diag.parse_counts", &()).await.ok();
        let _one = self.scraping.lock();
        // Apps that went away take their state series with them.
        self.app_state.clear();
        for app in apps.iter().flatten() {
            let id = app.id.as_str();
            self.remember_app(id);
            let current = app.state();
            for state in AppState::KNOWN {
                let value = i64::from(state == current);
                self.app_state.get_or_create(&AppStateLabels { app: id.to_string(), state: state.as_str() }).set(value);
            }
            if current == AppState::Unknown {
                self.app_state.get_or_create(&AppStateLabels { app: id.to_string(), state: current.as_str() }).set(1);
            }
            // A restart counter for every app, 0 until it restarts.
            let _ = self.app_restarts.get_or_create(&AppLabels { app: id.to_string() });
        }
        // The module host counts swaps (whoever asked for them); the counter catches up to it.
        for (outcome, total) in swaps {
            let counter = self.module_swaps.get_or_create(&OutcomeLabels { outcome });
            let seen = counter.get();
            if total > seen {
                counter.inc_by(total - seen);
            }
        }
        // The parse counters are kept where the parsing is; these catch up to them.
        let (request, answer) = crate::parse_count::totals();
        let mut parses = vec![("host", "request", request), ("host", "answer", answer)];
        if let Some(ModuleParses { request, answer }) = module_parses {
            parses.extend([("module", "request", request), ("module", "answer", answer)]);
        }
        for (side, direction, total) in parses {
            let counter = self.json_parses.get_or_create(&ParseLabels { side, direction });
            let seen = counter.get();
            if total > seen {
                counter.inc_by(total - seen);
            }
        }
        let mut text = String::new();
        if let Err(e) = prometheus_client::encoding::prometheus_text::encode(&mut text, &self.registry) {
            // Writing to a String does not fail; should the encoder refuse something, say so.
            tracing::warn!("metrics: encoding failed: {e}");
        }
        text
    }
}

/// One tool call being timed ([`Metrics::tool_call`]).
#[must_use = "a tool call is counted when finished (or, as cancelled, when dropped)"]
pub struct ToolCallTimer<'a> {
    metrics: &'a Metrics,
    app: String,
    tool: String,
    started: Instant,
    done: bool,
}

impl ToolCallTimer<'_> {
    pub fn finish(mut self, outcome: ToolOutcome) {
        self.done = true;
        self.metrics.record_tool_call(&self.app, &self.tool, outcome, self.started);
    }
}

impl Drop for ToolCallTimer<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.metrics.record_tool_call(&self.app, &self.tool, ToolOutcome::Cancelled, self.started);
        }
    }
}

/// One request of `/apps/mcp/{appId}` being counted ([`Metrics::proxied_request`]).
#[must_use = "a request is counted when finished (or, as cancelled, when dropped)"]
pub struct ProxiedRequest<'a> {
    metrics: &'a Metrics,
    app: String,
    method: &'static str,
    done: bool,
}

impl ProxiedRequest<'_> {
    pub fn finish(mut self, outcome: ProxiedOutcome) {
        self.done = true;
        self.metrics.record_proxied(&self.app, self.method, outcome);
    }
}

impl Drop for ProxiedRequest<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.metrics.record_proxied(&self.app, self.method, ProxiedOutcome::Cancelled);
        }
    }
}

/// A chat turn in progress ([`Metrics::chat_turn`]).
#[must_use = "a turn is in progress until finished (or, as cancelled, dropped)"]
pub struct ChatTurn<'a> {
    metrics: &'a Metrics,
    session_id: String,
    done: bool,
}

impl ChatTurn<'_> {
    pub fn finish(mut self, outcome: TurnOutcome) {
        self.done = true;
        self.metrics.end_chat_turn(&self.session_id, outcome);
    }
}

impl Drop for ChatTurn<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.metrics.end_chat_turn(&self.session_id, TurnOutcome::Cancelled);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(metrics: &Metrics) -> String {
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, &metrics.registry).unwrap();
        text
    }

    #[test]
    fn guards_count_their_outcome_or_cancelled() {
        let metrics = Metrics::new();
        metrics.tool_call("grocery-inventory", "get_stores").finish(ToolOutcome::Ok);
        drop(metrics.tool_call("grocery-inventory", "get_stores"));
        let turn = metrics.chat_turn("s1");
        let _second = metrics.chat_turn("s1");
        let text = encoded(&metrics);
        assert!(text.contains("gateway_chat_turns_in_progress 2\n"), "{text}");
        assert!(text.contains("gateway_chat_sessions_active 1\n"), "{text}");
        turn.finish(TurnOutcome::Ok);
        drop(_second);
        let text = encoded(&metrics);
        assert!(text.contains(r#"gateway_tool_calls_total{app="grocery-inventory",tool="get_stores",outcome="ok"} 1"#), "{text}");
        assert!(text.contains(r#"gateway_tool_calls_total{app="grocery-inventory",tool="get_stores",outcome="cancelled"} 1"#), "{text}");
        assert!(text.contains(r#"gateway_tool_call_duration_seconds_count{app="grocery-inventory",tool="get_stores"} 2"#), "{text}");
        assert!(text.contains(r#"gateway_chat_turns_total{outcome="ok"} 1"#), "{text}");
        assert!(text.contains(r#"gateway_chat_turns_total{outcome="cancelled"} 1"#), "{text}");
        assert!(text.contains("gateway_chat_turns_in_progress 0\n") && text.contains("gateway_chat_sessions_active 0\n"), "{text}");
    }

    #[test]
    fn label_values_stay_bounded() {
        let metrics = Metrics::new();
        metrics.remember_app("echo");
        metrics.proxied_request("echo", "tools/call").finish(ProxiedOutcome::Ok);
        metrics.proxied_request("no-such-app-42", "x/made-up").finish(ProxiedOutcome::Error);
        let text = encoded(&metrics);
        assert!(text.contains(r#"gateway_proxied_requests_total{app="echo",method="tools/call",outcome="ok"} 1"#), "{text}");
        assert!(text.contains(r#"gateway_proxied_requests_total{app="(unknown)",method="other",outcome="error"} 1"#), "{text}");
        assert!(!text.contains("no-such-app-42") && !text.contains("made-up"), "{text}");
    }

    #[test]
    fn a_second_running_is_a_restart() {
        let metrics = Metrics::new();
        let running = |app: &str| HostEvent {
            kind: EventKind::AppStateChanged,
            app_id: app.to_string(),
            payload: serde_json::json!({ "from": "loaded", "to": "running", "lastError": null }),
            seq: 1,
        };
        metrics.observe(&running("echo"));
        metrics.observe(&HostEvent {
            kind: EventKind::AppStateChanged,
            app_id: "echo".into(),
            payload: serde_json::json!({ "from": "running", "to": "failed" }),
            seq: 2,
        });
        assert!(!encoded(&metrics).contains(r#"gateway_app_restarts_total{app="echo"}"#));
        metrics.observe(&running("echo"));
        assert!(encoded(&metrics).contains(r#"gateway_app_restarts_total{app="echo"} 1"#));
    }
}
