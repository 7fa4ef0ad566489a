//! One app's life (the seed's McpAppServer): connect, enumerate, serve calls, supervise, stop.
//!
//! Invariants:
//! - At most one live session per app; start and stop are serialised by `op_lock`.
//! - Every start bumps `generation`; a supervisor or delayed restart acting for an older
//!   generation does nothing, so a stop or a newer start always wins.
//! - When a session is lost, `closing` fires first, so calls in flight end at once with an error
//!   instead of waiting for their timeout (SPEC R17).

use std::borrow::Cow;
use std::collections::VecDeque;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt as _;
use host_abi::jsonrpc;
use parking_lot::{Mutex, RwLock};
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use host_abi::HostSinkBox;

use crate::runtime::containment::panic_message;
use crate::runtime::events::EventSink;
use crate::runtime::faults::{Faults, Site};
use crate::runtime::executor::Tasks;
use crate::apps::install_state::{AppState, InstallState};
use crate::apps::manifest::{Manifest, Transport};
use crate::upstream::app_result::{AppResult, ResultKind};
use crate::upstream::catalog::{self, Catalog};
use crate::upstream::process::AppProcess;
use crate::upstream::relay::{CallRelay, Relays};
use crate::upstream::short_way::ShortWay;
use crate::upstream::subscriptions::{Listener, SubscribeError, SubscribedUris};
use crate::upstream::error::UpstreamError;
use crate::upstream::notifier::UpstreamSignal;
use crate::upstream::session::{self, Session, SessionEnd, UpstreamHandler};

/// Crash-loop cap (SPEC R17): this many losses within [`CRASH_WINDOW`] keep the app Failed until an
/// explicit start or reload.
pub const CRASH_LIMIT: usize = 3;
pub const CRASH_WINDOW: Duration = Duration::from_secs(300);
const BACKOFF_BASE: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// Consecutive failed health checks (pings) after which an http app counts as lost.
const HEALTH_FAILURES_LOST: u32 = 2;
/// Multi-round-trip rounds one request may take before the gateway gives up on it.
const MAX_INPUT_ROUNDS: usize = 10;
const STOP_GRACE: Duration = Duration::from_secs(3);
/// How long a supervisor that saw the app's connection close waits for the app's process to
/// exit, to name its exit rather than the closed connection.
const EXIT_AFTER_CLOSE_WAIT: Duration = Duration::from_millis(500);

/// Settings shared by every app of one module instance.
pub struct AppContext {
    /// Starts the apps' tasks (supervisors, restarts, listeners, output readers) on the module's
    /// runtime.
    pub tasks: Tasks,
    pub faults: Faults,
    pub events: EventSink,
    /// Calls in flight whose clients take part in server-to-client flows (R42).
    pub relays: Arc<Relays>,
    pub relaxed_schema: bool,
    pub force_legacy_initialize: bool,
    pub host_version: String,
    /// The host, if it sends HTTP apps' requests for the module (`http_sender.rs`).
    pub host_http: Option<Arc<HostSinkBox>>,
    /// `Sandbox.*`: how apps' processes are confined (SPEC R48, `apps/permissions.rs`).
    pub sandbox: Arc<crate::apps::sandbox::Sandbox>,
}

/// Why a call to an app did not produce an answer.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("McpApp '{app}' is not running ({})", unavailable(*.state))]
    NotRunning { app: String, state: AppState },
    #[error("McpApp '{app}': {reason}")]
    Lost { app: String, reason: String },
    #[error("McpApp '{app}': call cancelled")]
    Cancelled { app: String },
    #[error("McpApp '{app}': {source}")]
    Upstream { app: String, source: UpstreamError },
}

/// Why an app without a session cannot answer, as its caller should read it: the state an app
/// has while it has no session is still `running` while it stops (the process is ending) and
/// `loaded` while it (re)starts.
pub fn unavailable(state: AppState) -> String {
    match state {
        AppState::Running => "it is stopping".to_string(),
        AppState::Loaded => "it is starting".to_string(),
        other => format!("state: {other}"),
    }
}

/// What [`AppServer::connect`] gives: the live session and what its supervisor watches.
struct Connected {
    live: Live,
    process: Option<AppProcess>,
    signals: mpsc::UnboundedReceiver<UpstreamSignal>,
    end: SessionEnd,
}

/// What a supervisor watches besides its [`Live`].
struct Watched {
    process: Option<AppProcess>,
    signals: mpsc::UnboundedReceiver<UpstreamSignal>,
    end: SessionEnd,
    health: Option<HealthCheck>,
}

/// A connected session and what it offers.
pub struct Live {
    pub session: Session,
    /// Shared, not copied: every call looks a tool up in it (a copy per call cost a third of
    /// the gateway's CPU on the proxy path).
    pub catalog: RwLock<Arc<Catalog>>,
    /// The `subscriptions/listen` stream of a 2026-07-28 session (`subscriptions.rs`); `None`
    /// for initialize-era sessions, whose apps push their notifications.
    listener: Option<Listener>,
    /// Fires when the session is lost or being stopped.
    closing: CancellationToken,
    closing_reason: Mutex<Option<String>>,
    /// Asks the supervisor to stop the app.
    stop: CancellationToken,
    stopped: Mutex<Option<oneshot::Receiver<()>>>,
}

impl Live {
    fn close_with(&self, reason: &str) {
        self.closing_reason.lock().get_or_insert_with(|| reason.to_string());
        self.closing.cancel();
        self.session.close();
    }

    fn closing_reason(&self) -> String {
        self.closing_reason.lock().clone().unwrap_or_else(|| "the app's session was closed".to_string())
    }
}

/// What an [`AppServer`] serves: a manifest-packaged MCP App, or a standard MCP server from
/// `Plugins.Mcp` (no UI, not reachable through the browser proxy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppKind {
    App,
    McpServer,
}

impl AppKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AppKind::App => "mcpApp",
            AppKind::McpServer => "mcpServer",
        }
    }

    /// How the host reads it (`AppDetail::kind`).
    pub fn provider_kind(self) -> host_abi::payloads::ProviderKind {
        match self {
            AppKind::App => host_abi::payloads::ProviderKind::App,
            AppKind::McpServer => host_abi::payloads::ProviderKind::McpServer,
        }
    }
}

#[derive(Default)]
struct Supervision {
    crashes: VecDeque<Instant>,
    held: bool,
}

pub struct AppServer {
    ctx: Arc<AppContext>,
    pub key: String,
    pub kind: AppKind,
    install: Mutex<InstallState>,
    live: RwLock<Option<Arc<Live>>>,
    supervision: Mutex<Supervision>,
    generation: AtomicU64,
    op_lock: tokio::sync::Mutex<()>,
    /// Resource URIs the browser proxy's clients subscribed to, for apps without
    /// `resources/subscribe` (2026-07-28 sessions listen for them instead). Kept across restarts.
    subscribed: SubscribedUris,
    /// The confinement of the app's last launch (SPEC R48), as `apps` and `/apps/health` show it.
    confinement: Mutex<Option<crate::apps::sandbox::Report>>,
    /// Warn mode on a kernel without Landlock warns once per app.
    warned_unconfined: std::sync::atomic::AtomicBool,
}

impl AppServer {
    pub fn new(ctx: Arc<AppContext>, install: InstallState, kind: AppKind) -> Arc<AppServer> {
        Arc::new(AppServer {
            ctx,
            key: install.key.clone(),
            kind,
            install: Mutex::new(install),
            live: RwLock::new(None),
            supervision: Mutex::new(Supervision::default()),
            generation: AtomicU64::new(0),
            op_lock: tokio::sync::Mutex::new(()),
            subscribed: SubscribedUris::default(),
            confinement: Mutex::new(None),
            warned_unconfined: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// What to start for the app: its manifest's command, confined as its permissions and
    /// `Sandbox.Mode` say (SPEC R48). `Err` when the app may not start (enforce mode on a kernel
    /// without Landlock). Standard `Plugins.Mcp` servers are not confined: they have no manifest
    /// to declare what they need.
    fn launch_of(&self, manifest: &Manifest) -> Result<crate::upstream::process::Launch, UpstreamError> {
        use crate::apps::sandbox;
        let mut launch = manifest.launch();
        if self.kind != AppKind::App {
            *self.confinement.lock() = Some(sandbox::Report::Unconfined(
                json!({ "mode": "off", "confined": false, "reason": "a standard MCP server (Plugins.Mcp) declares no permissions" }),
            ));
            return Ok(launch);
        }
        match sandbox::effective(manifest, &self.ctx.sandbox) {
            Ok(effective) => {
                if let Some(warning) = effective.warning {
                    if !self.warned_unconfined.swap(true, Ordering::Relaxed) {
                        tracing::warn!(app = %self.key, "{warning}");
                    }
                }
                if let Some(dir) = &effective.data_dir {
                    sandbox::create_private_dir(dir)
                        .map_err(|e| UpstreamError::Connect(format!("cannot create its data folder {}: {e}", dir.display())))?;
                    sandbox::data_environment(&mut launch.environment, dir);
                }
                launch.confinement = effective.confine;
                *self.confinement.lock() = Some(effective.report);
                Ok(launch)
            }
            Err(why) => {
                *self.confinement.lock() = Some(sandbox::Report::refused(self.ctx.sandbox.mode, why.clone()));
                Err(UpstreamError::Connect(why))
            }
        }
    }

    pub fn install_state(&self) -> InstallState {
        self.install.lock().clone()
    }

    pub fn state(&self) -> AppState {
        self.install.lock().state
    }

    pub fn live(&self) -> Option<Arc<Live>> {
        self.live.read().clone()
    }

    /// Whether a call to it is best run on the host's worker (see [`Session::calls_run_on_host`]).
    pub fn calls_run_on_host(&self) -> bool {
        self.live.read().as_ref().is_some_and(|live| live.session.calls_run_on_host())
    }

    pub fn catalog(&self) -> Option<Arc<Catalog>> {
        self.live().map(|l| l.catalog.read().clone())
    }

    /// Moves the lifecycle, logging and reporting the change to the host.
    fn transition(&self, to: AppState, reason: &str) {
        let (from, last_error) = {
            let mut st = self.install.lock();
            let from = st.state;
            let result = if to == AppState::Failed { st.fail(reason) } else { st.transition(to, reason) };
            if result.is_err() {
                return;
            }
            (from, st.last_error.clone())
        };
        self.ctx.events.state_changed(&self.key, from.into(), to.into(), last_error.as_deref());
    }

    fn manifest(&self) -> Option<Manifest> {
        self.install.lock().manifest.clone()
    }

    /// Starts the app unless it runs already. `explicit` clears a crash-loop hold.
    pub async fn start(self: &Arc<Self>, explicit: bool) -> Result<(), String> {
        let _op = self.op_lock.lock().await;
        if explicit {
            *self.supervision.lock() = Supervision::default();
        }
        let state = self.state();
        match state {
            AppState::Running => return Ok(()),
            AppState::Disabled => {
                let why = self.install.lock().disabled_reason.clone().unwrap_or_default();
                return Err(format!("McpApp '{}' is disabled: {why}", self.key));
            }
            _ => {}
        }
        let has_validation_errors = !self.install.lock().validation_errors.is_empty();
        let Some(manifest) = self.manifest().filter(|_| !has_validation_errors) else {
            let errors = self.install.lock().validation_error_strings().join("; ");
            return Err(format!("McpApp '{}' cannot start: its manifest is invalid: {errors}", self.key));
        };
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        self.transition(AppState::Loaded, "starting");
        tracing::info!(app = %self.key, "Connecting to McpApp '{}' via {}", self.key, manifest.transport.as_str());
        let startup = Duration::from_secs(manifest.startup_timeout_seconds);
        let attempt = tokio::time::timeout(startup, self.connect(&manifest));
        match attempt.await {
            Ok(Ok(Connected { live, process, signals, end })) => {
                let live = Arc::new(live);
                let (counts, skipped) = {
                    let c = live.catalog.read();
                    ((c.tools().len(), c.resources.len() + c.resource_templates.len(), c.prompts.len()), c.skipped_tools.len())
                };
                *self.live.write() = Some(live.clone());
                self.transition(AppState::Running, "connected");
                tracing::info!(
                    app = %self.key,
                    skipped_tools = skipped,
                    "McpApp '{}' connected: {} tools, {} resources, {} prompts",
                    self.key,
                    counts.0,
                    counts.1,
                    counts.2
                );
                self.ctx.events.tools_changed(&self.key);
                let (done_tx, done_rx) = oneshot::channel();
                *live.stopped.lock() = Some(done_rx);
                let health = HealthCheck::for_manifest(&manifest);
                let watched = Watched { process, signals, end, health };
                let supervisor = self.clone().supervise(generation, live.clone(), watched, done_tx);
                self.ctx.tasks.spawn("supervising an app", self.clone().contain_supervisor(generation, live, supervisor));
                Ok(())
            }
            Ok(Err(e)) => {
                let msg = format!("failed to start: {e}");
                self.transition(AppState::Failed, &msg);
                Err(format!("McpApp '{}' {msg}", self.key))
            }
            Err(_) => {
                let msg = format!("did not become ready within its startup timeout of {}s", startup.as_secs());
                self.transition(AppState::Failed, &msg);
                Err(format!("McpApp '{}' {msg}", self.key))
            }
        }
    }

    /// Launches (when needed) and connects, then enumerates. Dropping this future part-way (the
    /// startup timeout) drops the process, which kills its group.
    async fn connect(
        &self,
        manifest: &Manifest,
    ) -> Result<Connected, UpstreamError> {
        let (signal_tx, signals) = mpsc::unbounded_channel();
        let (lifecycle, protocol) = session::lifecycle_for(&manifest.protocol_version, self.ctx.force_legacy_initialize);
        let handler = || {
            UpstreamHandler::new(
                &self.key,
                self.ctx.events.clone(),
                signal_tx.clone(),
                self.ctx.relays.clone(),
                protocol.clone(),
                &self.ctx.host_version,
            )
        };
        let spawn_err = |e: crate::upstream::process::SpawnError| UpstreamError::Connect(e.to_string());
        let (service, mut process, short_way) = match manifest.transport {
            Transport::Stdio => {
                let mut process = AppProcess::spawn(&self.launch_of(manifest)?, &self.key, true, &self.ctx.tasks).await.map_err(spawn_err)?;
                let (service, short_way) = match session::connect_stdio(&mut process, handler(), lifecycle, &self.ctx.tasks).await {
                    Ok(connected) => connected,
                    Err(e) => return Err(with_exit(Some(&mut process), e).await),
                };
                (service, Some(process), Some(ShortWay::Stdio(short_way)))
            }
            Transport::Http => {
                let url = manifest.url.clone().unwrap_or_default();
                let mut process = match manifest.launches_process() {
                    true => Some(AppProcess::spawn(&self.launch_of(manifest)?, &self.key, false, &self.ctx.tasks).await.map_err(spawn_err)?),
                    false => None,
                };
                // A launched app needs a moment to bind its port. Wait for the port with plain TCP
                // connects (quiet: rmcp logs every failed connect of its own at ERROR), then
                // handshake; retry until it answers, it exits, or the startup timeout (around
                // this future) runs out.
                if let Some(p) = process.as_mut() {
                    wait_for_port(&self.key, &url, p).await?;
                }
                let (service, http_way) = loop {
                    match session::connect_http(&url, &manifest.headers, handler(), lifecycle.clone(), &self.ctx.tasks, self.ctx.host_http.clone()).await {
                        // The handshake answered, but the app's own process has ended: whatever
                        // listens on its port is something else (another program that took the
                        // port), whose tools must not pass for the app's.
                        Ok(connected) => match process.as_mut().and_then(AppProcess::try_exit) {
                            Some(exit) => {
                                return Err(UpstreamError::Connect(format!(
                                    "{exit} before accepting connections; another process answers on {url}"
                                )))
                            }
                            None => break connected,
                        },
                        Err(e) => {
                            let Some(p) = process.as_mut() else { return Err(e) };
                            if let Some(exit) = p.try_exit() {
                                return Err(UpstreamError::Connect(format!("{exit} before accepting connections ({e})")));
                            }
                            tracing::debug!(app = %self.key, "waiting for {url}: {e}");
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                    }
                };
                (service, process, http_way.map(ShortWay::Http))
            }
        };
        let (session, end) = Session::new(service, Duration::from_secs(manifest.request_timeout_seconds), short_way);
        let closing = CancellationToken::new();
        // Listening starts before enumeration, so a change right after it is heard.
        let listener = match session.is_subscription_era() {
            true => Some(
                Listener::start(&self.key, &session, self.subscribed.clone(), &closing, session.request_timeout, &self.ctx.tasks)
                    .await,
            ),
            false => None,
        };
        let catalog = match catalog::enumerate(&session, &self.key, self.ctx.relaxed_schema).await {
            Ok(catalog) => catalog,
            Err(e) => return Err(with_exit(process.as_mut(), e).await),
        };
        let live = Live {
            session,
            catalog: RwLock::new(Arc::new(catalog)),
            listener,
            closing,
            closing_reason: Mutex::new(None),
            stop: CancellationToken::new(),
            stopped: Mutex::new(None),
        };
        Ok(Connected { live, process, signals, end })
    }

    /// Runs `supervisor` (this app's, for `generation`) so that its panic cannot leave the app
    /// Running with nobody watching it: the session is closed (the supervisor owned the process,
    /// which its unwinding killed), and the app is lost like any other loss, so it shows Failed
    /// with an error naming the panic and restarts with the usual backoff.
    async fn contain_supervisor(self: Arc<Self>, generation: u64, live: Arc<Live>, supervisor: impl Future<Output = ()>) {
        if let Err(payload) = AssertUnwindSafe(supervisor).catch_unwind().await {
            let reason = format!("its supervisor panicked: {}", panic_message(&*payload));
            tracing::error!(app = %self.key, "McpApp '{}': {reason}", self.key);
            live.close_with(&reason);
            self.on_lost(generation, reason);
        }
    }

    /// Watches a live session until it is stopped or lost; refreshes lists on change
    /// notifications.
    ///
    /// This future lives as long as the app runs, so what it awaits only now and then (a refresh,
    /// a health check, the stop) is boxed: inline, those futures made each app's task ~19 KiB.
    async fn supervise(self: Arc<Self>, generation: u64, live: Arc<Live>, watched: Watched, done: oneshot::Sender<()>) {
        let Watched { mut process, mut signals, mut end, health } = watched;
        self.ctx.faults.check(Site::Supervisor, &self.key);
        let ping_http = health.is_some();
        let health = health.unwrap_or(HealthCheck { interval: Duration::from_secs(3600), timeout: Duration::ZERO });
        let mut ping = tokio::time::interval(health.interval);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ping.reset();
        let mut ping_failures = 0u32;
        let lost: Option<String> = loop {
            tokio::select! {
                // A stop is a stop, even when the connection ends in the same instant.
                biased;
                _ = live.stop.cancelled() => break None,
                exit = wait_process(&mut process) => break Some(exit),
                _ = end.wait() => {
                    // The app's end of the connection closes just before a process exits:
                    // its exit, when it comes soon, says more.
                    let closed = || "the connection to the app closed".to_string();
                    let exit = match process {
                        Some(_) => tokio::time::timeout(EXIT_AFTER_CLOSE_WAIT, wait_process(&mut process)).await.ok(),
                        None => None,
                    };
                    break Some(exit.unwrap_or_else(closed));
                }
                _ = ping.tick(), if ping_http => {
                    // Bounded here too: sending can block on a server that accepts but never
                    // answers, before rmcp's own timeout starts.
                    let ping = Box::pin(live.session.request_with_timeout("ping", None, Some(health.timeout)));
                    let outcome = tokio::time::timeout(health.timeout, ping)
                        .await
                        .unwrap_or(Err(UpstreamError::Timeout(health.timeout)));
                    match outcome {
                        Ok(_) => ping_failures = 0,
                        Err(UpstreamError::Remote { .. }) => ping_failures = 0,
                        Err(e) => {
                            ping_failures += 1;
                            tracing::debug!(app = %self.key, "McpApp '{}' health check {ping_failures} failed: {e}", self.key);
                            if ping_failures >= HEALTH_FAILURES_LOST {
                                break Some(format!("the app stopped answering: {ping_failures} health checks failed ({e})"));
                            }
                        }
                    }
                }
                Some(signal) = signals.recv() => Box::pin(self.refresh(&live, signal)).await,
            }
        };
        live.close_with(lost.as_deref().unwrap_or("the app was stopped"));
        if lost.is_none() {
            // An orderly stop: the session ends (and says goodbye) before the process does.
            if tokio::time::timeout(STOP_GRACE, end.wait()).await.is_err() {
                tracing::debug!(app = %self.key, "McpApp '{}': its session did not end within {STOP_GRACE:?}", self.key);
            }
        }
        drop(end);
        if let Some(p) = process.as_mut() {
            Box::pin(p.terminate(STOP_GRACE)).await;
        }
        drop(process);
        let _ = done.send(());
        if let Some(reason) = lost {
            self.on_lost(generation, reason);
        }
    }

    async fn refresh(&self, live: &Live, signal: UpstreamSignal) {
        let relaxed = self.ctx.relaxed_schema;
        if live.closing.is_cancelled() {
            return;
        }
        // A stop (or loss) during the refresh ends it quietly: the session is closing, so its
        // lists would fail one by one with warnings, and the catalog goes with the session
        // anyway. `closing` fires before the session is closed, so biased, it is seen first.
        // The request in flight is still awaited until the session has ended (it fails then):
        // dropped at once, the app's answer could reach rmcp's loop before the session's
        // cancellation does, and rmcp warns "Error sending response" for a request nobody waits
        // for.
        let enumerate = catalog::enumerate(&live.session, &self.key, relaxed);
        tokio::pin!(enumerate);
        let fresh = tokio::select! {
            biased;
            _ = live.closing.cancelled() => {
                let _ = tokio::time::timeout(STOP_GRACE, enumerate).await;
                return;
            }
            fresh = &mut enumerate => fresh,
        };
        match fresh {
            Ok(fresh) => {
                *live.catalog.write() = Arc::new(fresh);
                tracing::info!(app = %self.key, "McpApp '{}' lists changed ({signal:?}); refreshed", self.key);
                if matches!(signal, UpstreamSignal::ToolsChanged) {
                    self.ctx.events.tools_changed(&self.key);
                }
            }
            Err(e) => tracing::warn!(app = %self.key, "McpApp '{}': refreshing after {signal:?} failed: {e}", self.key),
        }
    }

    /// A session of `generation` was lost: Failed, tools withdrawn, restart with backoff unless
    /// the crash-loop cap is reached.
    fn on_lost(self: &Arc<Self>, generation: u64, reason: String) {
        if self.generation.load(Ordering::SeqCst) != generation {
            return;
        }
        *self.live.write() = None;
        tracing::warn!(app = %self.key, "McpApp '{}' lost: {reason}", self.key);
        self.transition(AppState::Failed, &reason);
        self.ctx.events.tools_changed(&self.key);
        let delay = {
            let mut sup = self.supervision.lock();
            let now = Instant::now();
            sup.crashes.push_back(now);
            while sup.crashes.front().is_some_and(|t| now.duration_since(*t) > CRASH_WINDOW) {
                sup.crashes.pop_front();
            }
            if sup.crashes.len() >= CRASH_LIMIT {
                sup.held = true;
                tracing::error!(
                    app = %self.key,
                    "McpApp '{}' crashed {} times within {}s; it stays Failed until started or reloaded",
                    self.key,
                    sup.crashes.len(),
                    CRASH_WINDOW.as_secs()
                );
                return;
            }
            let exp = sup.crashes.len().saturating_sub(1) as u32;
            (BACKOFF_BASE * 2u32.saturating_pow(exp)).min(BACKOFF_MAX)
        };
        tracing::info!(app = %self.key, "McpApp '{}' restarts in {}s", self.key, delay.as_secs_f32());
        let me = self.clone();
        self.ctx.tasks.spawn("restarting an app", async move {
            tokio::time::sleep(delay).await;
            let current = me.generation.load(Ordering::SeqCst) == generation;
            if current && me.state() == AppState::Failed && !me.supervision.lock().held {
                if let Err(e) = me.start(false).await {
                    tracing::warn!(app = %me.key, "restart failed: {e}");
                }
            }
        });
    }

    /// Stops the app and waits for its process to end.
    pub async fn stop(&self, reason: &str) {
        let _op = self.op_lock.lock().await;
        self.generation.fetch_add(1, Ordering::SeqCst);
        let live = self.live.write().take();
        if let Some(live) = live {
            live.close_with(&format!("the app is stopping ({reason})"));
            live.stop.cancel();
            let stopped = live.stopped.lock().take();
            if let Some(rx) = stopped {
                let _ = tokio::time::timeout(STOP_GRACE * 3, rx).await;
            }
            self.ctx.events.tools_changed(&self.key);
        }
        if matches!(self.state(), AppState::Running | AppState::Loaded | AppState::Failed | AppState::Validated) {
            self.transition(AppState::Stopped, reason);
        }
    }

    /// Holds the session for one request, ending early if the app is lost or `cancel` fires.
    /// `cancel` also tells the app (`notifications/cancelled`). With a `relay`, what the app sends
    /// during the request reaches its caller, and an app answering in multi-round-trip style
    /// (`resultType: "input_required"`, MCP 2026-07-28) has its questions put to the caller and
    /// the request retried with the answers, so callers of every revision see one plain result.
    pub async fn request(
        &self,
        method: &str,
        params: Option<Value>,
        cancel: &CancellationToken,
        relay: Option<&CallRelay>,
    ) -> Result<AppResult, CallError> {
        // Cancelled before it started (the host cancelled, or dropped the call, while its task
        // was still on its way): the app is never asked.
        if cancel.is_cancelled() {
            tracing::debug!(app = %self.key, "'{method}' for McpApp '{}' was cancelled before it was sent", self.key);
            return Err(CallError::Cancelled { app: self.key.clone() });
        }
        let live = self.live().ok_or_else(|| CallError::NotRunning { app: self.key.clone(), state: self.state() })?;
        if let ("resources/subscribe" | "resources/unsubscribe", Some(listener)) = (method, live.listener.as_ref()) {
            return self.listen_for_resource(&live, listener, method, params.as_ref()).await.map(AppResult::Tree);
        }
        let mut params = params;
        let binds_headers = method == "tools/call" && {
            let name = params.as_ref().and_then(|p| p.get("name")).and_then(Value::as_str).unwrap_or_default();
            live.catalog.read().tool(name).is_some_and(|tool| tool.binds_headers)
        };
        for _round in 0..MAX_INPUT_ROUNDS {
            let result = tokio::select! {
                r = live.session.send(method, params.as_ref().map(Cow::Borrowed), None, Some(cancel), relay, binds_headers) => {
                    r.map_err(|source| match source {
                        UpstreamError::Transport(_) if live.closing.is_cancelled() => {
                            CallError::Lost { app: self.key.clone(), reason: live.closing_reason() }
                        }
                        UpstreamError::Cancelled => CallError::Cancelled { app: self.key.clone() },
                        source => CallError::Upstream { app: self.key.clone(), source },
                    })?
                }
                _ = live.closing.cancelled() => return Err(CallError::Lost { app: self.key.clone(), reason: live.closing_reason() }),
            };
            let tree = |result: AppResult| result.into_value().map_err(|source| CallError::Upstream { app: self.key.clone(), source });
            match result.result_type() {
                Some(ResultKind::InputRequired) => {
                    let asked = tree(result)?;
                    params = Some(self.answer_input_requests(method, params, &asked, relay, cancel).await?)
                }
                Some(ResultKind::Task) => return self.drive_task(&live, method, &tree(result)?, relay, cancel).await.map(AppResult::Tree),
                _ => return Ok(result),
            }
        }
        Err(CallError::Lost {
            app: self.key.clone(),
            reason: format!("'{method}' still asked for input after {MAX_INPUT_ROUNDS} rounds"),
        })
    }

    /// `resources/subscribe` / `resources/unsubscribe` for a 2026-07-28 session, where the app
    /// has neither: the URI joins (leaves) the app's subscribed set, the listen stream is re-opened
    /// for it, and the caller gets the empty result the legacy methods have. Updates then reach
    /// the host like any notification of the app (`upstream.notification`).
    async fn listen_for_resource(
        &self,
        live: &Live,
        listener: &Listener,
        method: &str,
        params: Option<&Value>,
    ) -> Result<Value, CallError> {
        let refuse = |code: i32, message: String| CallError::Upstream {
            app: self.key.clone(),
            source: UpstreamError::Remote { code, message, data: None },
        };
        let Some(uri) = params.and_then(|p| p.get("uri")).and_then(Value::as_str) else {
            return Err(refuse(jsonrpc::INVALID_PARAMS, format!("Invalid params: {method} needs a string 'uri'")));
        };
        let subscribe = method == "resources/subscribe";
        let outcome = tokio::select! {
            outcome = listener.set_subscribed(uri, subscribe, live.session.request_timeout) => outcome,
            _ = live.closing.cancelled() => return Err(CallError::Lost { app: self.key.clone(), reason: live.closing_reason() }),
        };
        match outcome {
            Ok(()) => Ok(json!({})),
            Err(SubscribeError::Unsupported) => Err(refuse(
                jsonrpc::METHOD_NOT_FOUND,
                format!("Method not found: McpApp '{}' does not support resource subscriptions", self.key),
            )),
            Err(SubscribeError::NotAccepted(uri)) => Err(refuse(
                jsonrpc::INVALID_PARAMS,
                format!("McpApp '{}' did not accept a subscription to '{uri}'", self.key),
            )),
            Err(SubscribeError::Failed(why)) => Err(CallError::Lost { app: self.key.clone(), reason: format!("subscribing to '{uri}' failed: {why}") }),
        }
    }

    /// An app that runs the request as a task (MCP Tasks, SEP-2663 — the gateway declares the
    /// extension to apps) is driven to its end on the caller's behalf: polled with `tasks/get`,
    /// its questions put to the caller and answered with `tasks/update`, cancelled with
    /// `tasks/cancel` when the caller cancels; the caller sees the task's result as the result.
    async fn drive_task(
        &self,
        live: &Live,
        method: &str,
        created: &Value,
        relay: Option<&CallRelay>,
        cancel: &CancellationToken,
    ) -> Result<Value, CallError> {
        let failed = |reason: String| CallError::Lost { app: self.key.clone(), reason };
        let Some(task_id) = created.get("taskId").and_then(Value::as_str).map(str::to_string) else {
            return Err(failed(format!("'{method}' became a task without a taskId")));
        };
        let interval = Duration::from_millis(created.get("pollIntervalMs").and_then(Value::as_u64).unwrap_or(500).clamp(20, 5000));
        let id = json!({ "taskId": task_id });
        let upstream = |source| CallError::Upstream { app: self.key.clone(), source };
        let mut answered = std::collections::HashSet::new();
        loop {
            let task = live.session.send("tasks/get", Some(Cow::Borrowed(&id)), None, None, None, false).await.and_then(AppResult::into_value).map_err(upstream)?;
            match task.get("status").and_then(Value::as_str).unwrap_or_default() {
                "completed" => return Ok(task.get("result").cloned().unwrap_or_else(|| json!({}))),
                "failed" => {
                    let error = task.get("error").cloned().unwrap_or(Value::Null);
                    return Err(upstream(UpstreamError::Remote {
                        code: error.get("code").and_then(Value::as_i64).map_or(jsonrpc::INTERNAL_ERROR, |c| c as i32),
                        message: error.get("message").and_then(Value::as_str).unwrap_or("the app's task failed").to_string(),
                        data: error.get("data").cloned(),
                    }));
                }
                "cancelled" => return Err(failed(format!("the app cancelled the task running '{method}'"))),
                "input_required" => {
                    let requests = task.get("inputRequests").and_then(Value::as_object).cloned().unwrap_or_default();
                    let fresh: serde_json::Map<String, Value> =
                        requests.into_iter().filter(|(key, _)| !answered.contains(key)).collect();
                    if !fresh.is_empty() {
                        let asked = json!({ "inputRequests": fresh });
                        let answers = self.answer_input_requests(method, None, &asked, relay, cancel).await;
                        let answers = match answers {
                            Ok(a) => a,
                            Err(e) => {
                                self.cancel_task(live, &id).await;
                                return Err(e);
                            }
                        };
                        answered.extend(fresh.keys().cloned());
                        let update = json!({ "taskId": task_id, "inputResponses": answers["inputResponses"] });
                        live.session.send("tasks/update", Some(Cow::Owned(update)), None, None, None, false).await.map_err(upstream)?;
                        continue;
                    }
                }
                _ => {}
            }
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = cancel.cancelled() => {
                    self.cancel_task(live, &id).await;
                    return Err(CallError::Cancelled { app: self.key.clone() });
                }
                _ = live.closing.cancelled() => return Err(failed(live.closing_reason())),
            }
        }
    }

    async fn cancel_task(&self, live: &Live, id: &Value) {
        if let Err(e) = live.session.send("tasks/cancel", Some(Cow::Borrowed(id)), None, None, None, false).await {
            tracing::debug!(app = %self.key, "cancelling the app's task {id} failed: {e}");
        }
    }

    /// Puts an `InputRequiredResult`'s questions to the caller; returns the params to retry with.
    async fn answer_input_requests(
        &self,
        method: &str,
        params: Option<Value>,
        result: &Value,
        relay: Option<&CallRelay>,
        cancel: &CancellationToken,
    ) -> Result<Value, CallError> {
        let failed = |reason: String| CallError::Lost { app: self.key.clone(), reason };
        let Some(relay) = relay else {
            return Err(failed(format!("'{method}' needs input from the client, and this call has no client to ask")));
        };
        let mut responses = serde_json::Map::new();
        let requests = result.get("inputRequests").and_then(Value::as_object).cloned().unwrap_or_default();
        for (key, request) in requests {
            let asked = request.get("method").and_then(Value::as_str).unwrap_or_default().to_string();
            let asked_params = request.get("params").cloned().unwrap_or_else(|| json!({}));
            let answer = tokio::select! {
                a = relay.ask(&asked, asked_params) => a,
                _ = cancel.cancelled() => return Err(CallError::Cancelled { app: self.key.clone() }),
            };
            let value = answer.map_err(|e| match crate::upstream::relay::capability_for(&asked).filter(|c| !relay.client_supports(c)) {
                // The revision's "missing required client capability" (-32021), whatever the
                // client's revision: no earlier code says it, and it is not a lost app.
                Some(capability) => CallError::Upstream {
                    app: self.key.clone(),
                    source: UpstreamError::Remote {
                        code: jsonrpc::MISSING_REQUIRED_CLIENT_CAPABILITY,
                        message: format!("'{method}' needs '{asked}' from the client, which did not declare {capability}"),
                        data: Some(json!({ "requiredCapabilities": { capability: {} } })),
                    },
                },
                None => failed(format!("'{method}' needs '{asked}' from the client: {}", e.message)),
            })?;
            responses.insert(key, value);
        }
        let mut params = params.filter(Value::is_object).unwrap_or_else(|| json!({}));
        params["inputResponses"] = Value::Object(responses);
        match result.get("requestState") {
            Some(state) => params["requestState"] = state.clone(),
            None => {
                if let Some(p) = params.as_object_mut() {
                    p.remove("requestState");
                }
            }
        }
        Ok(params)
    }

    /// The app's state for the host (`AppDescriptor` material) as JSON details.
    pub fn detail_json(&self) -> Value {
        let st = self.install.lock().clone();
        let held = self.supervision.lock().held;
        let catalog = self.catalog();
        let server = self.live().map(|l| l.session.server_info()).unwrap_or(Value::Null);
        let confinement = self.confinement.lock().clone().or_else(|| match (self.kind, st.manifest.as_ref()) {
            (AppKind::App, Some(m)) => Some(crate::apps::sandbox::report(m, &self.ctx.sandbox)),
            _ => None,
        });
        json!({
            // SPEC R48: the app's effective confinement (of its last launch, or as it would be).
            "confinement": confinement,
            "kind": self.kind.provider_kind(),
            // What the app declared in its handshake (capabilities, serverInfo, protocolVersion),
            // so the browser proxy can answer `initialize` truthfully on its behalf.
            "server": server,
            "manifestPath": st.manifest_path,
            "manifest": st.manifest,
            "warnings": st.warnings,
            "disabledReason": st.disabled_reason,
            "transitions": st.transitions,
            "discoveredAt": st.discovered_at.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0),
            "crashLoopHeld": held,
            "skippedTools": catalog.as_ref().map(|c| c.skipped_tools.iter().map(|(n, why)| json!({"name": n, "reason": why})).collect::<Vec<_>>()),
            "uiResources": catalog.as_ref().map(|c| c.ui_resources().filter_map(|r| r.get("uri").cloned()).collect::<Vec<_>>()),
        })
    }
}

/// How an http app is health-checked (SPEC R17): a `ping` every `interval`, each bounded by
/// `timeout`; [`HEALTH_FAILURES_LOST`] failures in a row and the app is lost.
#[derive(Debug, Clone, Copy)]
struct HealthCheck {
    interval: Duration,
    timeout: Duration,
}

impl HealthCheck {
    /// Every http app, launched by the gateway or not, unless `healthCheckIntervalSeconds` is 0.
    /// (A stdio app's exit is seen directly.) A ping may take at most the interval (and at most
    /// the request timeout), so checks never pile up.
    fn for_manifest(manifest: &Manifest) -> Option<HealthCheck> {
        if manifest.transport != Transport::Http || manifest.health_check_interval_seconds == 0 {
            return None;
        }
        let interval = Duration::from_secs(manifest.health_check_interval_seconds);
        let timeout = interval.min(Duration::from_secs(manifest.request_timeout_seconds)).max(Duration::from_secs(1));
        Some(HealthCheck { interval, timeout })
    }
}

/// A start that failed because the app's process ended says how it ended (the exit code is often
/// the one clue a crash at startup leaves): `… connection closed: initialize response (process
/// exited with code 5)`. The process gets a moment to finish exiting, as its pipes close first.
async fn with_exit(process: Option<&mut AppProcess>, error: UpstreamError) -> UpstreamError {
    let Some(process) = process else { return error };
    let exit = match process.try_exit() {
        Some(exit) => Some(exit),
        None => tokio::time::timeout(Duration::from_millis(500), process.wait()).await.ok(),
    };
    match exit {
        Some(exit) => UpstreamError::Connect(format!("{error} ({exit})")),
        None => error,
    }
}

/// Waits until `url`'s host and port accept a TCP connection (a launched http app is listening),
/// or the process exits. Logs at debug level only: a slow start is normal.
async fn wait_for_port(app: &str, url: &str, process: &mut AppProcess) -> Result<(), UpstreamError> {
    let Some((host, port)) = host_port(url) else { return Ok(()) }; // rmcp reports a bad URL
    let mut attempts = 0u32;
    loop {
        let why = match tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect((host.as_str(), port))).await {
            Ok(Ok(_)) => {
                tracing::debug!(app, "{host}:{port} accepts connections after {attempts} refused attempt(s)");
                return Ok(());
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => "connect timed out".to_string(),
        };
        attempts += 1;
        if let Some(exit) = process.try_exit() {
            return Err(UpstreamError::Connect(format!("{exit} before accepting connections on {host}:{port} ({why})")));
        }
        tracing::debug!(app, "waiting for {host}:{port} to accept connections: {why}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The host (without IPv6 brackets) and port of an http(s) URL.
fn host_port(url: &str) -> Option<(String, u16)> {
    let uri: http::Uri = url.parse().ok()?;
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']').to_string();
    let port = uri.port_u16().unwrap_or(if uri.scheme_str() == Some("https") { 443 } else { 80 });
    Some((host, port))
}

async fn wait_process(process: &mut Option<AppProcess>) -> String {
    match process.as_mut() {
        Some(p) => p.wait().await,
        None => std::future::pending().await,
    }
}
