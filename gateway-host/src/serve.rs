//! Starting the gateway: configuration → module → HTTP listeners, and the graceful shutdown:
//! on `SIGTERM` the listeners stop accepting, calls and chat turns in progress finish (bounded by
//! `Gateway.ShutdownTimeoutSeconds`), then every app stops before the process exits 0.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::gateway_config::{data_dir, module_config, module_path, parse_urls, DEFAULT_URLS};
use crate::http::connections::ConnectionLimits;
use crate::http::{self, GatewayState};
use crate::module::host::ModuleHost;
use crate::module::loader::{self as module_loader, LoadedModule};
use crate::config::settings::Settings;
use crate::config::workspace::Workspace;
use crate::BoxError;

/// Loads configuration and module, as every command does.
pub fn load(config: Option<&Path>, module: Option<&Path>) -> Result<(Settings, LoadedModule), BoxError> {
    let settings = Settings::load(config)?;
    let loaded = module_loader::load(&module_path(&settings, module))?;
    Ok((settings, loaded))
}

/// Creates the module instance on a runtime of the host's.
pub fn create_module(settings: &Settings, loaded: LoadedModule) -> Result<Arc<ModuleHost>, BoxError> {
    let path = loaded.path.clone();
    ModuleHost::create(loaded, module_config(settings))
        .map_err(|e| format!("module {} refused to start: {e}", path.display()).into())
}

pub fn module_info(config: Option<&Path>, module: Option<&Path>) -> Result<(), BoxError> {
    let (_, loaded) = load(config, module)?;
    println!("{}", serde_json::to_string(&loaded.summary())?);
    Ok(())
}

pub fn run(config: Option<&Path>, module: Option<&Path>, urls: Option<&str>) -> Result<(), BoxError> {
    let (settings, loaded) = load(config, module)?;
    let urls = urls.map(str::to_string).or_else(|| settings.get_str("Gateway:Urls")).unwrap_or(DEFAULT_URLS.into());
    let addrs = parse_urls(&urls)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads(&settings))
        .enable_all()
        .thread_name("gateway")
        .build()?;
    runtime.block_on(serve(settings, loaded, addrs, config.map(Path::to_path_buf)))
}

/// The host runtime's worker threads: `Gateway.WorkerThreads`, by default half the cores (at
/// least one), as the module's runtime. A proxied call is I/O and short bursts of work, and the
/// gateway shares the machine with its apps and their clients: an idle worker that a call's next
/// task wakes (the hyper client's connection task, the server's) is a sleep and a wake-up in the
/// kernel for no work gained. Since the host sends the module's requests to HTTP apps, such a call
/// touches no module thread, and on 2 cores one worker instead of two took `bench proxy` from
/// ~115 to ~83 µs of gateway CPU per call and from 0.80–0.83× to 0.94–1.03× of direct throughput
/// at 16 concurrent, `bench peers` from ~12,000 to ~16,000 calls/s, with 6 context switches per
/// call at 1 concurrent down to 2 (BENCHMARKS.md, "one host worker per two cores").
fn worker_threads(settings: &Settings) -> usize {
    let default = default_worker_threads();
    let Some(configured) = settings.get_str("Gateway:WorkerThreads") else { return default };
    match configured.parse::<usize>() {
        Ok(n) if (1..=MAX_WORKER_THREADS).contains(&n) => n,
        _ => {
            tracing::warn!("Gateway.WorkerThreads {configured:?} is not a number from 1 to {MAX_WORKER_THREADS}; using {default}");
            default
        }
    }
}

fn default_worker_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get() / 2).max(1)
}

/// More would be a configuration mistake (tokio's own limit is higher).
const MAX_WORKER_THREADS: usize = 256;

async fn serve(settings: Settings, loaded: LoadedModule, addrs: Vec<SocketAddr>, config: Option<PathBuf>) -> Result<(), BoxError> {
    let summary = loaded.summary();
    tracing::info!(
        "Loaded module {} {} (ABI {}) from {}",
        summary.name,
        summary.version,
        summary.abi_version,
        summary.path
    );
    // Before anything starts: a stop signal from now on is a graceful shutdown.
    let mut signals = Signals::install()?;
    let sandbox_addrs = http::sandbox::listen_addrs(&settings, &addrs)?;
    let listeners = bind_all(&addrs, "").await?;
    let sandbox_listeners = bind_all(&sandbox_addrs, " (the sandbox, Gateway.SandboxUrls)").await?;
    let bound: Vec<SocketAddr> = listeners.iter().filter_map(|l| l.local_addr().ok()).collect();
    let sandbox_bound: Vec<SocketAddr> = sandbox_listeners.iter().filter_map(|l| l.local_addr().ok()).collect();
    let workspace = Arc::new(Workspace::open(settings.clone(), config.clone(), &data_dir(&settings))?);
    // SPEC R53: the folder `apps add` installs into is discovered and watched from the start.
    crate::config::gateway_config::ensure_apps_path(&settings);
    let module = create_module(&workspace.module_settings(), loaded)?;
    let state = Arc::new(GatewayState::new(module.clone(), settings, workspace, bound.clone(), sandbox_bound.clone())?);
    // A replica that cannot reach the store its peers share would serve split state: it does not
    // start, and says which store (the URL without its password) and why.
    state.store_health.check().await.map_err(|why| format!("the chat session store is not reachable at startup: {why}"))?;
    state.store_health.watch(state.shutdown.child_token());
    if let Some(replicas) = &state.replicas {
        replicas.join(state.shutdown.child_token()).await?;
    }
    state.tools.follow_module();
    let routes = http::routes(state.clone());
    let own = http::sandbox::OwnOrigins::new(
        &[bound.as_slice(), sandbox_bound.as_slice()].concat(),
        state.settings.get_str("Gateway:PublicBaseUrl").as_deref(),
    );
    let sandbox_routes = http::Routes::router_only(http::sandbox::router(!state.auth.required, own));

    // Apps start in the background so that the gateway answers /healthz while they connect.
    let starter = module.clone();
    tokio::spawn(async move {
        if let Err(e) = starter.reload().await {
            tracing::error!("starting MCP Apps failed: {e}");
        }
    });

    tokio::spawn(swap_on_sighup(state.clone(), config));

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let limits = ConnectionLimits::from_settings(&state.settings);
    let mut servers = Vec::new();
    for listener in sandbox_listeners {
        tracing::info!("Sandbox listening on http://{}", listener.local_addr()?);
        servers.push(spawn_server(listener, sandbox_routes.clone(), limits, stop_rx.clone()));
    }
    for listener in listeners {
        tracing::info!("Gateway listening on http://{}", listener.local_addr()?);
        servers.push(spawn_server(listener, routes.clone(), limits, stop_rx.clone()));
    }

    signals.next().await;
    let bound = shutdown_bound(&state.settings);
    tracing::info!("Gateway shutting down: no new connections; calls and chat turns in progress get up to {}s to finish", bound.as_secs_f64());
    let _ = stop_tx.send(true);
    state.turns.close();
    let drained = tokio::select! {
        _ = async { tokio::join!(state.turns.wait(), module.idle()) } => Drained::Idle,
        _ = tokio::time::sleep(bound) => {
            tracing::warn!("calls or chat turns still running after {}s (Gateway.ShutdownTimeoutSeconds); stopping anyway", bound.as_secs_f64());
            Drained::BoundPassed(bound)
        }
        _ = signals.next() => {
            tracing::warn!("a second stop signal: not waiting for calls in progress");
            Drained::SecondSignal
        }
    };
    cut_off_calls(&module, &drained).await;
    // Connections end once their last response is out (the cut-off calls' answers among them);
    // what stays open is a stream (an event stream, an MCP session's GET stream), which ends now.
    let mut servers = futures::future::join_all(servers);
    if tokio::time::timeout(LAST_RESPONSES, &mut servers).await.is_err() {
        state.shutdown.cancel();
    }
    if let Err(e) = module.shutdown().await {
        tracing::warn!("module shutdown reported: {e}");
    }
    state.shutdown.cancel();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), servers).await;
    tracing::info!("Gateway stopped");
    Ok(())
}

/// How the wait for the work in progress ended, at a graceful shutdown.
enum Drained {
    /// No call and no chat turn was left.
    Idle,
    /// `Gateway.ShutdownTimeoutSeconds` passed first.
    BoundPassed(std::time::Duration),
    /// A second stop signal cut the wait short.
    SecondSignal,
}

impl Drained {
    /// What a relayed call still running (or arriving late) is answered.
    fn cut_off_reason(&self) -> String {
        const SHUTTING_DOWN: &str = "the gateway is shutting down";
        match self {
            Drained::Idle => format!("{SHUTTING_DOWN}: it takes no new calls"),
            Drained::BoundPassed(bound) => {
                format!("{SHUTTING_DOWN}: the call was cut off after Gateway.ShutdownTimeoutSeconds ({} s)", bound.as_secs_f64())
            }
            Drained::SecondSignal => format!("{SHUTTING_DOWN}: the call was cut off by a second stop signal"),
        }
    }
}

/// Ends the relayed calls still running (each answers its client with the reason, see
/// `ModuleHost::cut_off_calls`) and waits, up to [`CUT_OFF_GRACE`], until none is left in the
/// module: the module is shut down only after that, so no call of it is still polled (or its
/// answer awaited) once its runtime is gone. Calls waiting for a 2026-07-28 client to come back
/// are not waited for; they end with the module.
async fn cut_off_calls(module: &ModuleHost, drained: &Drained) {
    module.cut_off_calls(drained.cut_off_reason());
    if tokio::time::timeout(CUT_OFF_GRACE, module.idle()).await.is_err() {
        tracing::warn!("module calls still in flight {}s after they were cut off; shutting the module down under them", CUT_OFF_GRACE.as_secs_f64());
    }
}

/// How long calls get to end once cut off (dropping a call cancels it at once; this bounds a
/// module that does not let go).
const CUT_OFF_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// How long a graceful shutdown waits for calls and chat turns (`Gateway.ShutdownTimeoutSeconds`).
const DEFAULT_SHUTDOWN_BOUND: std::time::Duration = std::time::Duration::from_secs(30);

/// How long the listeners get, once the work is done, to send their last responses before the
/// open streams are ended.
const LAST_RESPONSES: std::time::Duration = std::time::Duration::from_secs(1);

fn shutdown_bound(settings: &Settings) -> std::time::Duration {
    settings.get_seconds("Gateway:ShutdownTimeoutSeconds", DEFAULT_SHUTDOWN_BOUND)
}

async fn bind_all(addrs: &[SocketAddr], what: &str) -> Result<Vec<tokio::net::TcpListener>, BoxError> {
    let mut listeners = Vec::new();
    for addr in addrs {
        let listener =
            tokio::net::TcpListener::bind(addr).await.map_err(|e| format!("cannot listen on {addr}{what}: {e}"))?;
        listeners.push(listener);
    }
    Ok(listeners)
}

/// Serves `routes` on `listener` until `stop` turns true (then finishes open requests: streams
/// end through `GatewayState::shutdown`).
fn spawn_server(
    listener: tokio::net::TcpListener,
    routes: http::Routes,
    limits: ConnectionLimits,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(http::connections::serve(listener, routes, limits, async move {
        let _ = stop.wait_for(|s| *s).await;
    }))
}

/// `SIGHUP`: re-reads `Gateway.ModulePath` from the configuration file and swaps to that
/// module live when it names another library than the one serving (see [`ModuleHost::swap`]).
async fn swap_on_sighup(state: Arc<GatewayState>, config: Option<PathBuf>) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hangup = match signal(SignalKind::hangup()) {
        Ok(hangup) => hangup,
        Err(e) => return tracing::warn!("cannot listen for SIGHUP (module swaps by signal are off): {e}"),
    };
    while hangup.recv().await.is_some() {
        let settings = match Settings::load(config.as_deref()) {
            Ok(settings) => settings,
            Err(e) => {
                tracing::warn!("SIGHUP: cannot re-read the configuration ({e}); the current module keeps serving");
                continue;
            }
        };
        let Some(path) = settings.get_str("Gateway:ModulePath").map(|p| settings.resolve_path(&p)) else {
            tracing::warn!("SIGHUP: Gateway.ModulePath is not set in the configuration; nothing to swap to");
            continue;
        };
        let path = path.canonicalize().unwrap_or(path);
        if Path::new(&state.module.summary().path) == path {
            tracing::info!("SIGHUP: {} is already the module serving", path.display());
            continue;
        }
        let drain = http::admin::drain_bound(&state);
        match state.module.swap(&path, module_config(&state.workspace.module_settings()), drain).await {
            Ok(record) => tracing::info!("SIGHUP: module swapped in {} ms", record.duration_ms),
            Err(e) => tracing::warn!("SIGHUP: {e}; the current module keeps serving"),
        }
    }
}

/// `SIGTERM` and `SIGINT` (Ctrl-C): the first starts a graceful shutdown, a second cuts it short.
struct Signals {
    term: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> Result<Signals, BoxError> {
        use tokio::signal::unix::{signal, SignalKind};
        let term = signal(SignalKind::terminate()).map_err(|e| format!("cannot install the SIGTERM handler: {e}"))?;
        let interrupt = signal(SignalKind::interrupt()).map_err(|e| format!("cannot install the SIGINT handler: {e}"))?;
        Ok(Signals { term, interrupt })
    }

    async fn next(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn settings(gateway: serde_json::Value) -> Settings {
        Settings { effective: json!({ "Gateway": gateway }), config_dir: PathBuf::from(".") }
    }

    #[test]
    fn worker_threads_are_half_the_cores_unless_configured() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let half = (cores / 2).max(1);
        assert_eq!(worker_threads(&settings(json!({}))), half);
        assert_eq!(worker_threads(&settings(json!({ "WorkerThreads": 3 }))), 3);
        // From the environment (`Gateway__WorkerThreads=4`) it arrives as a string.
        assert_eq!(worker_threads(&settings(json!({ "WorkerThreads": "4" }))), 4);
        for wrong in [json!(0), json!(-1), json!("many"), json!(1.5), json!(100_000)] {
            assert_eq!(worker_threads(&settings(json!({ "WorkerThreads": wrong }))), half, "{wrong}");
        }
    }

    /// The answer of a call cut off names the shutdown and why it did not wait longer.
    #[test]
    fn a_cut_off_call_is_told_why() {
        let bound = Drained::BoundPassed(std::time::Duration::from_secs(3)).cut_off_reason();
        assert_eq!(bound, "the gateway is shutting down: the call was cut off after Gateway.ShutdownTimeoutSeconds (3 s)");
        assert_eq!(Drained::SecondSignal.cut_off_reason(), "the gateway is shutting down: the call was cut off by a second stop signal");
        assert_eq!(Drained::Idle.cut_off_reason(), "the gateway is shutting down: it takes no new calls");
    }
}
