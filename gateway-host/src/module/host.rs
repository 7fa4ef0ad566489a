//! The host's side of a created module: the sink the module logs and reports events through, and
//! typed async wrappers over the module's calls.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RStr, RString};
use host_abi::payloads::{DiscoveryReport, ProviderKind, ReloadReport, Respond, Responded};
use host_abi::{
    ErrorCode, AbiError, AbiFuture, AppAnswer, AppDescriptor, AppRequest, HostSink, HostSink_TO, HttpAnswer, HttpPost, LogLevel,
    LogRecord, ModuleConfig, ModuleEvent, ModuleInstanceBox, RResult, ToolDescriptor,
};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::{broadcast, OwnedRwLockReadGuard};
use tokio_util::sync::CancellationToken;

use crate::module::app_http::AppHttp;
use crate::module::loader::{LoadedModule, ModuleSummary};
use crate::module::relay::{RelayRoutes, RelayedCall};

/// A module event, owned by the host.
#[derive(Debug, Clone)]
pub struct HostEvent {
    pub kind: host_abi::EventKind,
    pub app_id: String,
    pub payload: Value,
    /// The event's place among those the host heard, from 1 ([`ModuleHost::events_heard`]).
    pub seq: u64,
}

/// Where the module's events go out to the host's subscribers, numbered in the order heard: a
/// view that reads the module after [`Events::heard`] said `n` reflects every event up to `n`
/// (the module changes its state before it reports the change).
#[derive(Clone)]
struct Events {
    sender: broadcast::Sender<HostEvent>,
    heard: Arc<AtomicU64>,
    /// Of those, the app changes ([`is_app_change`]).
    changes: Arc<AtomicU64>,
}

impl Events {
    fn new() -> Events {
        Events { sender: broadcast::channel(1024).0, heard: Arc::new(AtomicU64::new(0)), changes: Arc::new(AtomicU64::new(0)) }
    }

    /// No receivers is normal (nobody listening yet); never blocks the module's thread.
    fn send(&self, kind: host_abi::EventKind, app_id: String, payload: Value) {
        if is_app_change(kind) {
            self.changes.fetch_add(1, Ordering::SeqCst);
        }
        let seq = self.heard.fetch_add(1, Ordering::SeqCst) + 1;
        let _ = self.sender.send(HostEvent { kind, app_id, payload, seq });
    }
}

/// An event that changes what the host's views of the apps hold: an app's state or its tools.
/// (An app's own notifications and a call's events do not.)
fn is_app_change(kind: host_abi::EventKind) -> bool {
    matches!(kind, host_abi::EventKind::AppStateChanged | host_abi::EventKind::ToolsChanged)
}

/// Receives the module's logs and events. Called on module threads: never blocks.
struct GatewaySink {
    events: Events,
    /// Events of relayed calls go to the one call waiting for them, not to every subscriber.
    relays: Arc<RelayRoutes>,
    /// Sends the module's requests to HTTP apps (`http_post`); `None` without a host runtime to
    /// send them on (the module then sends them itself).
    http: Option<AppHttp>,
}

fn log_level(level: LogLevel) -> log::Level {
    match level {
        LogLevel::Error => log::Level::Error,
        LogLevel::Warn => log::Level::Warn,
        LogLevel::Info => log::Level::Info,
        LogLevel::Debug => log::Level::Debug,
        LogLevel::Trace => log::Level::Trace,
    }
}

impl HostSink for GatewaySink {
    fn log_enabled(&self, level: LogLevel, target: RStr<'_>) -> bool {
        let metadata = log::Metadata::builder().level(log_level(level)).target(target.as_str()).build();
        log::logger().enabled(&metadata)
    }

    /// Module records enter the host's `tracing` subscriber through the `log` bridge, which keeps
    /// their dynamic targets (`tracing` itself only takes static ones).
    fn log(&self, record: LogRecord) {
        let fields = render_fields(record.fields_json.as_str());
        log::logger().log(
            &log::Record::builder()
                .level(log_level(record.level))
                .target(record.target.as_str())
                .args(format_args!("{}{fields}", record.message))
                .build(),
        );
    }

    fn event(&self, event: ModuleEvent) {
        // A kind this host does not know (a newer module's) is ignored.
        let Some(kind) = event.kind() else { return };
        let payload = serde_json::from_str(event.payload_json.as_str()).unwrap_or(Value::Null);
        if self.relays.dispatch(kind, &payload) {
            return;
        }
        self.events.send(kind, event.app_id.into_string(), payload);
    }

    /// Without a client (see [`ModuleHost::create`]) this answers as a host lacking the method
    /// does, so that the module sends the request itself.
    fn http_post(&self, post: HttpPost) -> AbiFuture<HttpAnswer> {
        match &self.http {
            Some(http) => http.post(post),
            None => async_ffi::FfiFuture::new(async {
                RResult::RErr(AbiError::new(ErrorCode::NotImplemented, "this host has no HTTP client for apps"))
            }),
        }
    }
}

/// One app as the gateway reports it (`/apps/health`, the `gateway.apps` tool).
pub fn app_json(a: &AppDescriptor) -> Value {
    app_json_of(a, super::payloads::app_detail(a.detail_json.as_str()))
}

/// The MCP Apps of a listing as [`app_json`] has them, each app's details decoded once (for
/// both the question [`is_mcp_app`] answers and the report): `/apps/health` is polled.
pub fn mcp_apps_json(apps: &[AppDescriptor]) -> Vec<(&AppDescriptor, Value)> {
    apps.iter()
        .filter_map(|a| {
            let detail = super::payloads::app_detail(a.detail_json.as_str());
            (detail.kind == ProviderKind::App).then(|| (a, app_json_of(a, detail)))
        })
        .collect()
}

fn app_json_of(a: &AppDescriptor, mut detail: host_abi::payloads::AppDetail) -> Value {
    let non_empty = |s: &str| if s.is_empty() { Value::Null } else { Value::from(s) };
    // SPEC R48: the app's effective confinement, as the module reports it (shown as it is).
    let confinement = detail.rest.remove("confinement").unwrap_or(Value::Null);
    serde_json::json!({
        "confinement": confinement,
        "id": a.id.as_str(),
        "name": a.name.as_str(),
        "version": a.version.as_str(),
        "state": a.state().as_str(),
        "transport": a.transport().as_str(),
        "tools": a.tool_count,
        "resources": a.resource_count,
        "resourceTemplates": a.resource_template_count,
        "prompts": a.prompt_count,
        "hasUi": a.has_ui,
        "uiResourceUri": non_empty(a.ui_resource_uri.as_str()),
        "lastError": non_empty(a.last_error.as_str()),
        "validationErrors": a.validation_errors.iter().map(|e| e.as_str()).collect::<Vec<_>>(),
    })
}

/// Whether a registry entry is an MCP App (as opposed to a standard `Plugins.Mcp` server, which
/// the module supervises the same way but which has no place under `/apps/*`).
pub fn is_mcp_app(app: &AppDescriptor) -> bool {
    super::payloads::app_detail(app.detail_json.as_str()).kind == ProviderKind::App
}

/// Cancels a module call when the host stops waiting for it (a dropped request, a closed client).
struct CancelOnDrop<'a> {
    instance: &'a ModuleInstanceBox,
    call_id: u64,
    armed: bool,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.instance.cancel(self.call_id);
        }
    }
}

/// The event's fields as ` key=value` pairs, the way `tracing`'s formatter shows its own.
fn render_fields(fields_json: &str) -> String {
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(fields_json) else { return String::new() };
    let mut out = String::new();
    for (key, value) in map {
        match value {
            Value::String(s) => out.push_str(&format!(" {key}={s}")),
            other => out.push_str(&format!(" {key}={other}")),
        }
    }
    out
}

/// One created module instance and the library it came from.
struct Active {
    instance: ModuleInstanceBox,
    summary: ModuleSummary,
}

/// A module call in progress: the instance it runs on, and the gate permit that keeps a swap
/// from shutting that instance down under it.
struct Entered {
    active: Arc<Active>,
    _permit: OwnedRwLockReadGuard<()>,
}

/// The module the gateway runs, behind everything that calls it (SPEC R3, live swap).
///
/// Callers hold an `Arc<ModuleHost>` for the life of the process; the instance inside can be
/// replaced ([`ModuleHost::swap`]). Every call enters through `gate` (shared), so a swap (which
/// takes it exclusively) first lets the calls in flight finish, and calls that arrive meanwhile
/// wait for the new instance instead of failing. Events and relayed-call routes are the host's
/// own and outlive any instance: subscribers never notice a swap.
pub struct ModuleHost {
    active: parking_lot::RwLock<Arc<Active>>,
    gate: Arc<tokio::sync::RwLock<()>>,
    /// One swap at a time.
    swapping: tokio::sync::Mutex<()>,
    swaps: parking_lot::Mutex<Vec<SwapRecord>>,
    /// Swap attempts since startup, by outcome ([`SWAP_OUTCOMES`]); the history keeps only the last few.
    swap_counts: parking_lot::Mutex<[u64; 3]>,
    /// Calls with an id in flight, so a drain that takes too long can cancel them.
    in_flight: parking_lot::Mutex<HashSet<u64>>,
    /// Calls in flight that wait for a client to come back with answers (a 2026-07-28 client's
    /// `input_required` round): work nobody is doing, which a shutdown does not wait for.
    waiting_on_client: parking_lot::Mutex<HashSet<u64>>,
    events: Events,
    relays: Arc<RelayRoutes>,
    /// The client every instance's `http_post` sends with (so a swap keeps its connections).
    http: Option<AppHttp>,
    next_call_id: AtomicU64,
    /// Set once a graceful shutdown stops waiting for calls ([`ModuleHost::cut_off_calls`]).
    cut_off: CutOff,
}

/// Why the relayed calls in flight were ended without their result: a graceful shutdown that
/// stopped waiting for them. Once set, it stays set (the process is on its way out).
#[derive(Default)]
struct CutOff {
    token: CancellationToken,
    reason: OnceLock<String>,
}

/// One swap attempt, as `/healthz` reports it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SwapRecord {
    /// Milliseconds since the Unix epoch.
    pub at: u64,
    pub from: ModuleSummary,
    /// The module asked for (its path, plus its identity when it could be loaded).
    pub to: Value,
    pub outcome: String,
    pub duration_ms: u64,
    /// Calls that were still running when the drain bound passed and were cancelled.
    pub cancelled_calls: usize,
}

/// Why a swap did not happen; the old module keeps serving.
#[derive(Debug, thiserror::Error)]
pub enum SwapError {
    #[error("another module swap is in progress")]
    Busy,
    #[error(transparent)]
    Refused(#[from] crate::module::loader::LoadError),
    #[error("module {path} refused to start: {error}")]
    Create { path: String, error: AbiError },
}

/// How long [`SwapRecord`]s are kept.
const SWAP_HISTORY: usize = 20;

/// The outcomes [`ModuleHost::swap_counts`] counts (`/metrics`): swapped, the library refused
/// (missing, another interface version…), or its instance failed to start.
pub const SWAP_OUTCOMES: [&str; 3] = ["swapped", "refused", "failed_to_start"];

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

impl ModuleHost {
    /// Creates the module's instance from the effective configuration.
    /// Libraries are never unloaded, so the module's root (a `'static` reference) outlives this.
    pub fn create(loaded: LoadedModule, config: ModuleConfig) -> Result<Arc<ModuleHost>, AbiError> {
        let events = Events::new();
        let relays = Arc::new(RelayRoutes::default());
        let summary = loaded.summary();
        // Created on the host's runtime (see `serve::create_module`); without it the module
        // sends its requests to apps itself.
        let http = AppHttp::on_current_runtime().inspect_err(|e| tracing::warn!("{e}; the module sends its requests to HTTP apps itself")).ok();
        let instance = new_instance(&loaded, config, &events, &relays, &http)?;
        Ok(Arc::new(ModuleHost {
            active: parking_lot::RwLock::new(Arc::new(Active { instance, summary })),
            gate: Arc::new(tokio::sync::RwLock::new(())),
            swapping: tokio::sync::Mutex::new(()),
            swaps: parking_lot::Mutex::new(Vec::new()),
            swap_counts: parking_lot::Mutex::new([0; 3]),
            in_flight: parking_lot::Mutex::new(HashSet::new()),
            waiting_on_client: parking_lot::Mutex::new(HashSet::new()),
            events,
            relays,
            http,
            next_call_id: AtomicU64::new(1),
            cut_off: CutOff::default(),
        }))
    }

    /// Waits for a swap in progress, then holds the current instance for one call.
    async fn enter(&self) -> Entered {
        let permit = self.gate.clone().read_owned().await;
        Entered { active: self.active.read().clone(), _permit: permit }
    }

    /// The module serving now.
    pub fn summary(&self) -> ModuleSummary {
        self.active.read().summary.clone()
    }

    /// The swaps so far, oldest first.
    pub fn swap_history(&self) -> Vec<SwapRecord> {
        self.swaps.lock().clone()
    }

    /// How many swaps ended each way since startup, as `(outcome, count)` ([`SWAP_OUTCOMES`]).
    pub fn swap_counts(&self) -> Vec<(&'static str, u64)> {
        SWAP_OUTCOMES.into_iter().zip(*self.swap_counts.lock()).collect()
    }

    pub fn subscribe(&self) -> broadcast::Receiver<HostEvent> {
        self.events.sender.subscribe()
    }

    /// How many events the host has heard so far: the `seq` of the last one.
    pub fn events_heard(&self) -> u64 {
        self.events.heard.load(Ordering::SeqCst)
    }

    /// How many of them were app changes (an app's state or tools): a view of the apps listed
    /// after `n` of them reflects them all (`module/listed.rs`).
    pub fn app_changes_heard(&self) -> u64 {
        self.events.changes.load(Ordering::SeqCst)
    }

    /// Follows the module's events for a view of the apps kept on the host's side (the tool
    /// registry, `/mcp`'s multiplexer): `refresh` now and after each burst of app changes (state,
    /// tools; debounced briefly, since a reload reports many apps at once), `each` for every
    /// event as it comes, until the module's event channel closes.
    pub fn follow_app_changes<R>(&self, mut each: impl FnMut(&HostEvent) + Send + 'static, refresh: impl Fn() -> R + Send + 'static)
    where
        R: std::future::Future<Output = ()> + Send,
    {
        let mut events = self.subscribe();
        tokio::spawn(async move {
            refresh().await;
            loop {
                match events.recv().await {
                    Ok(event) => {
                        each(&event);
                        if !is_app_change(event.kind) {
                            continue;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => break,
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                loop {
                    match events.try_recv() {
                        Ok(event) => each(&event),
                        Err(broadcast::error::TryRecvError::Lagged(_)) => {}
                        Err(_) => break,
                    }
                }
                refresh().await;
            }
        });
    }

    /// A fresh id for a call that may be cancelled.
    pub fn next_call_id(&self) -> u64 {
        self.next_call_id.fetch_add(1, Ordering::Relaxed)
    }

    /// What discovery would find (`discover`), without starting anything.
    pub async fn discover(&self) -> Result<DiscoveryReport, AbiError> {
        Ok(super::payloads::discovery_report(&self.discover_json().await?))
    }

    /// [`ModuleHost::discover`]'s report as the module wrote it (JSON text), not decoded. In the
    /// module's own buffer: `into_string` would copy it (a buffer of the other library's
    /// allocator is copied into one of this one's), tens of megabytes for 10,000 apps.
    pub async fn discover_json(&self) -> Result<RString, AbiError> {
        let entered = self.enter().await;
        entered.active.instance.discover().await.into_result()
    }

    pub async fn list_apps(&self) -> Result<Vec<AppDescriptor>, AbiError> {
        let entered = self.enter().await;
        Ok(entered.active.instance.list_apps().await.into_result()?.into_vec())
    }

    pub async fn list_tools(&self) -> Result<Vec<ToolDescriptor>, AbiError> {
        let entered = self.enter().await;
        Ok(entered.active.instance.list_tools().await.into_result()?.into_vec())
    }

    /// Passes a client's request to its app ([`host_abi::AppRequest`]: the method, `params` as
    /// JSON text, the caller's relay opt-in): the app's result as JSON text, or a JSON-RPC error.
    /// If the caller stops waiting (the client went away), the call is cancelled in the module so
    /// the upstream request does not linger.
    pub async fn forward(&self, request: AppRequest) -> Result<AppAnswer, AbiError> {
        let call_id = request.call_id;
        let entered = self.enter().await;
        let _tracked = self.track(call_id);
        let mut guard = CancelOnDrop { instance: &entered.active.instance, call_id, armed: true };
        let answer = entered.active.instance.forward(request).await.into_result();
        guard.armed = false;
        answer
    }

    /// Marks a call in flight as waiting for its client (or as running again).
    pub fn set_waiting_on_client(&self, call_id: u64, waiting: bool) {
        let mut set = self.waiting_on_client.lock();
        if waiting {
            set.insert(call_id);
        } else {
            set.remove(&call_id);
        }
    }

    /// Resolves once no call is in flight but those waiting for their client (graceful shutdown).
    pub async fn idle(&self) {
        loop {
            let busy = {
                let waiting = self.waiting_on_client.lock();
                self.in_flight.lock().iter().any(|id| !waiting.contains(id))
            };
            if !busy {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Ends every relayed call in flight, and any started from now on, with `reason` as its
    /// answer (see `mcp_relay::drive`): a graceful shutdown calls this when it stops waiting,
    /// before the connections close and the module stops, so that each call's client still
    /// gets a response naming the shutdown on its own stream, and no call of the module is left
    /// for the module's shutdown to pull from under it.
    pub fn cut_off_calls(&self, reason: impl Into<String>) {
        let _ = self.cut_off.reason.set(reason.into());
        self.cut_off.token.cancel();
    }

    /// Resolves, with the reason, once calls are cut off ([`ModuleHost::cut_off_calls`]).
    pub async fn calls_cut_off(&self) -> &str {
        self.cut_off.token.cancelled().await;
        self.cut_off.reason.get().map_or("the gateway is shutting down", String::as_str)
    }

    /// Records `call_id` as in flight until the returned guard drops.
    fn track(&self, call_id: u64) -> Tracked<'_> {
        self.in_flight.lock().insert(call_id);
        Tracked { host: self, call_id }
    }

    /// Starts `work` (a module call under `call_id` that opted into the relay) with its
    /// events routed to the returned call.
    pub fn relayed<T: Send + 'static>(&self, call_id: u64, work: impl std::future::Future<Output = T> + Send + 'static) -> RelayedCall<T> {
        RelayedCall::start(&self.relays, call_id, work)
    }

    /// Gives the module a client's answer to a relayed call's question: its result, or its
    /// JSON-RPC error object.
    pub async fn respond(&self, call_id: u64, key: &str, answer: Result<Value, Value>) {
        let (result, error) = match answer {
            Ok(result) => (Some(result), None),
            Err(error) => (None, Some(error)),
        };
        let params = Respond { call_id, key: key.to_string(), result, error };
        match self.invoke_typed::<_, Responded>(host_abi::relay::RESPOND, &params).await {
            Ok(Responded { delivered: true }) => {}
            Ok(_) => tracing::debug!(call_id, key, "an answer arrived for a question nobody waits for any more"),
            Err(e) => tracing::warn!(call_id, key, "cannot hand a client's answer to the module: {e}"),
        }
    }

    /// Starts (or restarts) one app, clearing a crash-loop hold.
    pub async fn start_app(&self, app_id: &str) -> Result<AppDescriptor, AbiError> {
        let entered = self.enter().await;
        entered.active.instance.start_app(app_id.into()).await.into_result()
    }

    /// Stops one app (it stays stopped until started or the gateway restarts).
    pub async fn stop_app(&self, app_id: &str) -> Result<AppDescriptor, AbiError> {
        let entered = self.enter().await;
        entered.active.instance.stop_app(app_id.into()).await.into_result()
    }

    pub async fn reload(&self) -> Result<ReloadReport, AbiError> {
        let entered = self.enter().await;
        let report = entered.active.instance.reload().await.into_result()?;
        Ok(serde_json::from_str(report.as_str()).unwrap_or_default())
    }

    /// [`ModuleHost::invoke`] with typed params and result (`host_abi::payloads`); a result that
    /// does not decode is an `internal` error naming the method.
    pub async fn invoke_typed<P: serde::Serialize, R: serde::de::DeserializeOwned>(&self, method: &str, params: &P) -> Result<R, AbiError> {
        let params = serde_json::to_value(params).map_err(|e| AbiError::new(host_abi::ErrorCode::Internal, e.to_string()))?;
        let value = self.invoke(method, &params).await?;
        serde_json::from_value(value)
            .map_err(|e| AbiError::new(host_abi::ErrorCode::Internal, format!("the module's answer to {method} is not what the interface says: {e}")))
    }

    pub async fn invoke(&self, method: &str, params: &Value) -> Result<Value, AbiError> {
        let entered = self.enter().await;
        let out = entered.active.instance.invoke(method.into(), params.to_string().into()).await.into_result()?;
        Ok(serde_json::from_str(out.as_str()).unwrap_or(Value::Null))
    }

    /// Replaces the running module with the library at `path`, live (SPEC R3):
    /// check it (the startup refusals) → create its instance → drain the calls in flight (up to
    /// `drain`, then cancel the rest) while new calls wait → shut the old instance down (its apps
    /// stop) → start the new one's apps → switch, and let the waiting calls through. A module
    /// that is refused or fails to start leaves the old one serving. The old library stays
    /// mapped (libraries are never unloaded); its runtime and apps are gone.
    pub async fn swap(&self, path: &Path, config: ModuleConfig, drain: Duration) -> Result<SwapRecord, SwapError> {
        let Ok(_one) = self.swapping.try_lock() else { return Err(SwapError::Busy) };
        let started = std::time::Instant::now();
        let from = self.summary();
        let mut to = serde_json::json!({ "path": path.display().to_string() });
        let outcome = self.swap_to(path, config, drain, &mut to).await;
        let counted = match &outcome {
            Ok(_) => 0,
            Err(SwapError::Create { .. }) => 2,
            Err(_) => 1,
        };
        self.swap_counts.lock()[counted] += 1;
        let (outcome_text, cancelled) = match &outcome {
            Ok(cancelled) => ("swapped".to_string(), *cancelled),
            Err(e) => (format!("refused: {e}"), 0),
        };
        let record = SwapRecord {
            at: now_ms(),
            from,
            to,
            outcome: outcome_text,
            duration_ms: started.elapsed().as_millis() as u64,
            cancelled_calls: cancelled,
        };
        {
            let mut swaps = self.swaps.lock();
            swaps.push(record.clone());
            let excess = swaps.len().saturating_sub(SWAP_HISTORY);
            swaps.drain(..excess);
        }
        outcome.map(|_| record)
    }

    /// The steps of [`ModuleHost::swap`]; `to` gains the new module's identity once known.
    /// Returns how many calls had to be cancelled.
    async fn swap_to(&self, path: &Path, config: ModuleConfig, drain: Duration, to: &mut Value) -> Result<usize, SwapError> {
        let loaded = crate::module::loader::load(path)?;
        let summary = loaded.summary();
        *to = serde_json::to_value(&summary).unwrap_or(Value::Null);
        tracing::info!("Module swap: {} {} → {} {} ({})", self.summary().name, self.summary().version, summary.name, summary.version, summary.path);
        let instance = new_instance(&loaded, config, &self.events, &self.relays, &self.http)
            .map_err(|error| SwapError::Create { path: summary.path.clone(), error })?;
        let fresh = Arc::new(Active { instance, summary });

        // Drain: new calls queue behind this writer; calls in flight get `drain` to finish.
        let mut cancelled = 0;
        let exclusive = match tokio::time::timeout(drain, self.gate.clone().write_owned()).await {
            Ok(exclusive) => exclusive,
            Err(_) => {
                let ids: Vec<u64> = self.in_flight.lock().iter().copied().collect();
                cancelled = ids.len();
                tracing::warn!("Module swap: {cancelled} call(s) still running after {drain:?}; cancelling them");
                let old = self.active.read().clone();
                for id in ids {
                    old.instance.cancel(id);
                }
                self.gate.clone().write_owned().await
            }
        };
        let old = self.active.read().clone();
        if let Err(e) = old.instance.shutdown().await.into_result() {
            tracing::warn!("Module swap: the old module's shutdown reported: {e}");
        }
        *self.active.write() = fresh.clone();
        match fresh.instance.reload().await.into_result() {
            Ok(report) => tracing::info!("Module swap: the new module started its apps: {}", report.as_str()),
            Err(e) => tracing::warn!("Module swap: the new module's start reported: {e}"),
        }
        drop(exclusive);
        tracing::info!("Module swap: now serving {} {}", fresh.summary.name, fresh.summary.version);
        // Everything the registry knew came from the old module.
        self.events.send(host_abi::EventKind::ToolsChanged, String::new(), Value::Null);
        Ok(cancelled)
    }

    pub async fn shutdown(&self) -> Result<(), AbiError> {
        let active = self.active.read().clone();
        active.instance.shutdown().await.into_result()
    }
}

/// A call id in [`ModuleHost::in_flight`], removed on drop.
struct Tracked<'a> {
    host: &'a ModuleHost,
    call_id: u64,
}

impl Drop for Tracked<'_> {
    fn drop(&mut self) {
        self.host.in_flight.lock().remove(&self.call_id);
        self.host.waiting_on_client.lock().remove(&self.call_id);
    }
}

/// Creates an instance of `loaded` whose logs and events reach the host's channels.
fn new_instance(
    loaded: &LoadedModule,
    config: ModuleConfig,
    events: &Events,
    relays: &Arc<RelayRoutes>,
    http: &Option<AppHttp>,
) -> Result<ModuleInstanceBox, AbiError> {
    let sink = GatewaySink { events: events.clone(), relays: relays.clone(), http: http.clone() };
    let sink = HostSink_TO::from_value(sink, TD_Opaque);
    (loaded.root.create())(config, sink).into_result()
}

#[cfg(test)]
mod tests {
    /// The module's JSON payloads are read through `host_abi::payloads` types only: no key
    /// lookups of them anywhere in the host (issue 13, Must show 4). Keys of MCP messages and
    /// schemas (the apps' own data) are not module payloads and stay out of this check.
    #[test]
    fn the_host_reads_module_payloads_only_through_their_types() {
        const PAYLOAD_KEYS: &[&str] = &[
            "[\"kind\"]", "[\"server\"]", "[\"manifest\"]", "[\"callId\"]", "[\"key\"]", "[\"request\"]",
            "[\"delivered\"]", "[\"valid\"]", "[\"enabled\"]", "[\"apps\"]", "[\"skipped\"]", "[\"configErrors\"]",
            "[\"validationErrors\"]", "[\"disabledReason\"]", "[\"lastError\"]", "[\"started\"]", "[\"capabilities\"]",
        ];
        let mut offenders = Vec::new();
        // `module/payloads.rs` is the types' own decoder: it names their keys.
        for (path, product) in crate::test_support::product_sources().into_iter().filter(|(p, _)| !p.ends_with("module/payloads.rs")) {
            for (n, line) in product.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                let reads_detail = code.contains("detail_json") && !code.contains("payloads::app_detail(");
                let looks_up = PAYLOAD_KEYS.iter().any(|k| code.contains(k));
                if reads_detail || looks_up {
                    offenders.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                }
            }
        }
        assert!(offenders.is_empty(), "module JSON read by key instead of through host_abi::payloads:\n{}", offenders.join("\n"));
    }
}
