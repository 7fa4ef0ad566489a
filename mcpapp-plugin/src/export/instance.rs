//! The module instance the host holds: adapts the `host-abi` interface to the registry.
//!
//! Each method here is thin on purpose: contain panics at the export, check injected faults, and
//! hand the work to the module runtime. The logic lives in the registry and below.

use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::Duration;

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RString, RVec};
use host_abi::payloads::{ReconfigureParams, Respond, Responded, ValidateParams};
use host_abi::jsonrpc;
use host_abi::{
    ErrorCode, AbiError, AbiFuture, AppAnswer, AppDescriptor, AppRequest, HostSinkBox, ModuleConfig,
    ModuleInfo, ModuleInstance, ModuleInstanceBox, ModuleInstance_TO, ToolCallOutcome, ToolCallRequest, ToolDescriptor,
};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::export::calls::{CancelOutcome, Calls, NO_CALL_ID};
use crate::export::tool_bridge;
use crate::runtime::containment::contain;
use crate::runtime::events::EventSink;
use crate::runtime::faults::{Faults, Site};
use crate::runtime::executor::{ready_err, ModuleRuntime, Placement, ShutdownError, Tasks};
use crate::apps::config::{McpAppsConfig, McpCompatibility};
use crate::apps::registry::Registry;
use crate::apps::watcher::ManifestWatcher;
use crate::upstream::short_way::http_sender::HttpSender;
use crate::apps::app_server::{AppContext, AppServer};
use crate::upstream::relay::Relays;

/// How long a shutdown waits for the apps to stop before their processes are killed with the
/// runtime.
const APPS_STOP_BOUND: Duration = Duration::from_secs(15);

/// Shared by every call: the registry and the calls in flight. Tasks hold it, so it holds only a
/// [`Tasks`], never the runtime (the [`Instance`] owns that).
pub struct Core {
    pub tasks: Tasks,
    pub events: EventSink,
    /// Calls whose clients answer the apps' server-to-client requests (SPEC R42).
    pub relays: Arc<Relays>,
    pub registry: Registry,
    pub faults: Faults,
    pub host_version: String,
    /// `Sandbox.*` (SPEC R48).
    pub sandbox: Arc<crate::apps::sandbox::Sandbox>,
    /// Cancellation handles of calls in flight, by the host's call id.
    calls: Arc<Calls>,
    /// Tool-name clashes already logged.
    clashes_reported: Mutex<HashSet<String>>,
    watcher: Mutex<Option<ManifestWatcher>>,
    /// The folders to watch, until the first reload starts watching them (`start_watching`).
    watch_paths: Mutex<Option<Vec<std::path::PathBuf>>>,
}

impl Core {
    /// Watches the discovery folders for manifest changes from the first reload on, so that an
    /// instance that only scans (`gateway-host apps`, `validate`) never pays for watching a
    /// large tree (one inotify watch per folder, set by walking it, and then an event for every
    /// file the scan opens).
    fn start_watching(self: &Arc<Core>) {
        let Some(paths) = self.watch_paths.lock().take() else { return };
        let weak: Weak<Core> = Arc::downgrade(self);
        // Setting the watches walks the folders (like the scan, off the runtime's workers).
        let watcher = tokio::task::block_in_place(|| {
            crate::apps::watcher::watch(&paths, &self.tasks, move || {
                let weak = weak.clone();
                async move {
                    if let Some(core) = weak.upgrade() {
                        let report = core.registry.reload(false).await;
                        tracing::info!("Reload after manifest change: {report}");
                    }
                }
            })
        });
        *self.watcher.lock() = watcher;
    }

    fn app(&self, app_id: &str) -> Result<Arc<AppServer>, AbiError> {
        self.registry
            .app(app_id)
            .ok_or_else(|| AbiError::new(ErrorCode::NotFound, format!("Unknown McpApp '{app_id}'")))
    }

    fn descriptor(&self, app: &AppServer) -> AppDescriptor {
        app_descriptor(app)
    }

    /// The module's last work before its runtime ends (on the shutdown thread): no more reloads,
    /// every app stopped (bounded), no more logs to the host.
    fn stop_everything(&self, runtime: &tokio::runtime::Runtime) {
        tracing::info!("MCP App module shutting down");
        self.watcher.lock().take();
        let stopped = runtime.block_on(async { tokio::time::timeout(APPS_STOP_BOUND, self.registry.stop_all()).await });
        if stopped.is_err() {
            tracing::warn!(
                "apps did not stop within {}s; their processes are killed with the runtime",
                APPS_STOP_BOUND.as_secs()
            );
        }
        crate::runtime::logging::uninstall();
    }
}

/// The module instance the host holds. It alone owns the module's runtime: `shutdown`, or
/// dropping it without one, ends the runtime (see [`Drop`] below).
pub struct Instance {
    core: Arc<Core>,
    runtime: ModuleRuntime,
    /// This instance's hold on the library's process-wide threads, let go at shutdown.
    library: Mutex<Option<crate::runtime::library::InUse>>,
}

impl Instance {
    pub fn create(config: ModuleConfig, host: Arc<HostSinkBox>) -> Result<Instance, AbiError> {
        let library = crate::runtime::library::in_use();
        let config_value = crate::parse_config_json(config.config_json.as_str())?;
        let config_dir = std::path::PathBuf::from(config.config_dir.as_str());
        let apps_config = McpAppsConfig::from_config(&config_value, &config_dir);
        let compatibility = McpCompatibility::from_config(&config_value);
        let runtime = ModuleRuntime::new(crate::runtime::executor::default_workers())
            .map_err(|e| AbiError::new(ErrorCode::Internal, format!("cannot start the module's runtime: {e}")))?;
        let relays = Arc::new(Relays::default());
        let faults = Faults::from_config(&config_value);
        let declared = host_abi::ModuleConfigExtra::from_json(config.extra_json.as_str());
        let host_http = HttpSender::host_if_offered(&host, &declared);
        let sender = if host_http.is_some() {
            "the host sends the requests to HTTP apps"
        } else {
            "this module sends the requests to HTTP apps (the host does not offer HostSink::http_post)"
        };
        let data_dir = std::path::PathBuf::from(config.data_dir.as_str());
        let sandbox = crate::apps::sandbox::Sandbox::from_config(&config_value, &config_dir, &data_dir, &apps_config.discovery_paths);
        for e in &sandbox.errors {
            tracing::warn!("{}: {}", e.field, e.message);
        }
        tracing::info!(
            mode = sandbox.mode.as_str(),
            landlock_abi = sandbox.landlock_abi,
            "apps are confined: Sandbox.Mode {}, Landlock ABI {}",
            sandbox.mode.as_str(),
            sandbox.landlock_abi
        );
        let sandbox = Arc::new(sandbox);
        let ctx = Arc::new(AppContext {
            sandbox: sandbox.clone(),
            tasks: runtime.tasks().clone(),
            faults: faults.clone(),
            events: EventSink::new(host),
            relays: relays.clone(),
            relaxed_schema: compatibility.allow_relaxed_input_schema_validation,
            force_legacy_initialize: compatibility.force_legacy_initialize,
            host_version: config.host_version.to_string(),
            host_http,
        });
        let watch_paths = apps_config.discovery_paths.clone();
        let watch = apps_config.enabled;
        let core = Arc::new(Core {
            tasks: runtime.tasks().clone(),
            events: ctx.events.clone(),
            relays,
            registry: Registry::new(ctx, apps_config, config_value.clone(), config_dir.clone()),
            faults,
            host_version: config.host_version.into_string(),
            sandbox,
            calls: Arc::default(),
            clashes_reported: Mutex::new(HashSet::new()),
            watcher: Mutex::new(None),
            watch_paths: Mutex::new(watch.then_some(watch_paths)),
        });
        tracing::info!(
            version = crate::MODULE_VERSION,
            "MCP App module {} {} created; {sender}",
            crate::MODULE_NAME,
            crate::MODULE_VERSION
        );
        Ok(Instance { core, runtime, library: Mutex::new(Some(library)) })
    }

    pub fn into_abi(self) -> ModuleInstanceBox {
        ModuleInstance_TO::from_value(self, TD_Opaque)
    }

    /// Runs one exported operation: containment, the injected-fault checks, then the work,
    /// placed as `placement` says (inline for what the module answers itself; a task of its own
    /// for the scans and for calls that wait on an app, see [`Placement`]). `work` gets the call's cancellation token,
    /// which fires when the host cancels `call_id` (even before the call registered it) or
    /// drops the returned future; operations that wait on an app watch it.
    fn call<T, F, Fut>(&self, operation: &'static str, placement: Placement, call_id: u64, work: F) -> AbiFuture<T>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Core>, CancellationToken) -> Fut,
        Fut: std::future::Future<Output = Result<T, AbiError>> + Send + 'static,
    {
        contain(
            operation,
            || {
                self.core.faults.check(Site::Export, operation);
                let cancel = CancellationToken::new();
                let core = self.core.clone();
                // Boxed at once: a call's future is kilobytes (a `forward` ~4.7 KiB), and the
                // wrappers below and the spawn move it by value several times before it first
                // runs — as a box, each move is a pointer's (perf: memmove was ~7 % of the
                // gateway's samples under `bench proxy`, spawns a visible part of it).
                let fut = Box::pin(work(core.clone(), cancel.clone()));
                let token = cancel.clone();
                self.core.tasks.run_call(placement, operation, cancel, async move {
                    core.faults.check(Site::Task, operation);
                    if let Some(delay) = core.faults.delay(operation) {
                        tracing::info!("injected delay: {operation} call {call_id} registers in {} ms", delay.as_millis());
                        tokio::time::sleep(delay).await;
                    }
                    let _registered = core.calls.register(call_id, &token);
                    fut.await
                })
            },
            ready_err,
        )
    }

    /// Where a call to `app_id` runs: on the host's worker when its short way needs no module
    /// thread to send it (an HTTP app whose requests the host sends, `upstream/short_way/http_sender.rs`;
    /// a stdio app, whose stdin the call writes itself, `upstream/short_way/stdio.rs`); else as a
    /// task of the module's, where rmcp's client tasks run.
    fn placement_of_call(&self, app_id: &str) -> Placement {
        match self.core.registry.app(app_id) {
            Some(app) if app.calls_run_on_host() => Placement::Inline,
            _ => Placement::Spawned,
        }
    }

    /// Stops the apps and ends the runtime on a thread of its own; the receiver fires when done.
    fn begin_shutdown(&self) -> Result<futures::channel::oneshot::Receiver<()>, ShutdownError> {
        let core = self.core.clone();
        let library = self.library.lock().take();
        // The library is let go once the runtime has ended (its apps, its memory).
        self.runtime.shut_down_on_own_thread(move |runtime| {
            core.stop_everything(runtime);
            library
        })
    }
}

/// Dropping the instance without `shutdown` still stops its apps and ends its runtime, so a host
/// that forgets (or unwinds past) the call leaks no threads or children. The drop may run on a
/// host async worker: it only starts the shutdown thread and never waits for it.
impl Drop for Instance {
    fn drop(&mut self) {
        contain(
            "dropping the module instance",
            || match self.begin_shutdown() {
                Ok(_) => tracing::info!("the module instance was dropped without shutdown; shutting it down"),
                Err(ShutdownError::AlreadyShutDown) => {}
                Err(e) => tracing::error!("{e}"),
            },
            |_| {},
        )
    }
}

/// The host's view of one app.
pub fn app_descriptor(app: &AppServer) -> AppDescriptor {
    let st = app.install_state();
    let live_catalog = app.catalog();
    let m = st.manifest.as_ref();
    // What the running app declares wins over the manifest (SPEC R19).
    let (has_ui, ui_resource_uri) = crate::upstream::catalog::ui_of(
        live_catalog.as_deref(),
        m.is_some_and(|m| m.has_ui),
        m.and_then(|m| m.ui_resource_uri.as_deref()),
    );
    let catalog = live_catalog.unwrap_or_default();
    let opt = |v: Option<&String>| RString::from(v.cloned().unwrap_or_default());
    AppDescriptor {
        id: st.key.as_str().into(),
        name: m.map(|m| m.name.clone()).filter(|n| !n.is_empty()).unwrap_or_else(|| st.key.clone()).into(),
        version: m.map(|m| m.version.clone()).unwrap_or_default().into(),
        state: host_abi::AppState_NE::new(st.state.into()),
        transport: host_abi::Transport_NE::new(match m.map(|m| m.transport) {
            Some(crate::apps::manifest::Transport::Stdio) => host_abi::Transport::Stdio,
            Some(crate::apps::manifest::Transport::Http) => host_abi::Transport::Http,
            None => host_abi::Transport::Unknown,
        }),
        manifest_path: st.manifest_path.display().to_string().into(),
        tool_count: catalog.tools().len() as u32,
        resource_count: catalog.resources.len() as u32,
        resource_template_count: catalog.resource_templates.len() as u32,
        prompt_count: catalog.prompts.len() as u32,
        has_ui,
        ui_resource_uri: opt(ui_resource_uri.as_ref()),
        tool_name_prefix: opt(m.and_then(|m| m.tool_name_prefix.as_ref())),
        last_error: opt(st.last_error.as_ref()),
        validation_errors: st.validation_error_strings().into_iter().map(RString::from).collect(),
        detail_json: app.detail_json().to_string().into(),
    }
}

impl ModuleInstance for Instance {
    fn info(&self) -> ModuleInfo {
        contain("reading module info", crate::module_info, |_| crate::module_info())
    }

    fn discover(&self) -> AbiFuture<RString> {
        self.call("discover", Placement::Spawned, NO_CALL_ID, |core, _| async move {
            let sandbox = &core.sandbox;
            let report = tokio::task::block_in_place(|| {
                let mut report = core.registry.discover();
                // SPEC R48: what each app would be confined to, on every core (a report is a few
                // system calls and a few KiB of text; ten thousand of them are most of a
                // listing's time), each thread resolving the folders of its share of the apps once.
                let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
                let share = report.apps.len().div_ceil(threads).max(256);
                std::thread::scope(|scope| {
                    for apps in report.apps.chunks_mut(share) {
                        scope.spawn(move || {
                            let mut resolved = crate::apps::sandbox::Resolved::default();
                            for app in apps {
                                if let Some(m) = app.manifest.as_ref().filter(|m| m.launches_process()) {
                                    app.confinement = Some(crate::apps::sandbox::report_in(m, sandbox, &mut resolved));
                                }
                            }
                        });
                    }
                });
                report
            });
            // Indented, as `gateway-host apps --json` prints it: the host checks it and prints
            // it as it is, where it parsed it and wrote it out again indented. Into one buffer
            // sized for the report (under 4 KiB an app indented with its confinement report,
            // most of it the runtime paths and refused system calls every app shows) rather
            // than one grown by doubling: ten thousand apps are tens of megabytes, each doubling
            // a copy of them. The RString takes the buffer as it is.
            let mut text = Vec::with_capacity(4096 + 4096 * report.apps.len());
            serde_json::to_writer_pretty(&mut text, &report)
                .map_err(|e| AbiError::new(ErrorCode::Internal, format!("cannot serialise the discovery report: {e}")))?;
            String::from_utf8(text)
                .map(RString::from)
                .map_err(|e| AbiError::new(ErrorCode::Internal, format!("cannot serialise the discovery report: {e}")))
        })
    }

    fn list_apps(&self) -> AbiFuture<RVec<AppDescriptor>> {
        self.call("list_apps", Placement::Inline, NO_CALL_ID, |core, _| async move {
            Ok(core.registry.apps().iter().map(|a| core.descriptor(a)).collect())
        })
    }

    // Starting, stopping and reloading finish even when the host stops waiting: abandoning one
    // half-way would leave an app between states. They ignore the call's token.
    fn start_app(&self, app_id: RString) -> AbiFuture<AppDescriptor> {
        self.call("start_app", Placement::Spawned, NO_CALL_ID, move |core, _| async move {
            let app = core.app(app_id.as_str())?;
            app.start(true).await.map_err(|e| AbiError::new(ErrorCode::Upstream, e))?;
            Ok(core.descriptor(&app))
        })
    }

    fn stop_app(&self, app_id: RString) -> AbiFuture<AppDescriptor> {
        self.call("stop_app", Placement::Spawned, NO_CALL_ID, move |core, _| async move {
            let app = core.app(app_id.as_str())?;
            app.stop("stopped on request").await;
            Ok(core.descriptor(&app))
        })
    }

    fn reload(&self) -> AbiFuture<RString> {
        self.call("reload", Placement::Spawned, NO_CALL_ID, |core, _| async move {
            // Apps are about to start (a command that only lists them never reloads).
            core.sandbox.warm_up();
            core.start_watching();
            Ok(core.registry.reload(true).await.to_string().into())
        })
    }

    fn list_tools(&self) -> AbiFuture<RVec<ToolDescriptor>> {
        self.call("list_tools", Placement::Inline, NO_CALL_ID, |core, _| async move {
            Ok(tool_bridge::descriptors(&core.registry.apps(), &core.clashes_reported).into())
        })
    }

    /// A 2.0 host's model-side call: answered as the forwarded `tools/call` it amounts to.
    fn call_tool(&self, request: ToolCallRequest) -> AbiFuture<ToolCallOutcome> {
        let call_id = request.call_id;
        let placement = self.placement_of_call(request.app_id.as_str());
        self.call("call_tool", placement, call_id, move |core, cancel| async move {
            let app = core.app(request.app_id.as_str())?;
            let forwarded = match tool_bridge::as_app_request(&request) {
                Ok(forwarded) => forwarded,
                Err(refused) => return Ok(refused),
            };
            let ui_resource_uri =
                app.catalog().and_then(|c| c.tool(request.tool_name.as_str()).and_then(|t| t.ui_resource_uri.clone())).unwrap_or_default();
            let answer = crate::export::forward::forward(&core.registry, &core.relays, &core.events, &forwarded, &cancel).await;
            Ok(tool_bridge::outcome(answer, &ui_resource_uri))
        })
    }

    fn forward(&self, request: AppRequest) -> AbiFuture<AppAnswer> {
        let call_id = request.call_id;
        let placement = self.placement_of_call(request.app_id.as_str());
        self.call("forward", placement, call_id, move |core, cancel| async move {
            Ok(crate::export::forward::forward(&core.registry, &core.relays, &core.events, &request, &cancel).await)
        })
    }

    fn cancel(&self, call_id: u64) -> bool {
        contain(
            "cancelling a call",
            || {
                self.core.faults.check(Site::Export, "cancel");
                self.core.calls.cancel(call_id) == CancelOutcome::Cancelled
            },
            |_| false,
        )
    }

    fn invoke(&self, method: RString, params_json: RString) -> AbiFuture<RString> {
        // The named operations that scan or restart apps block or take long: tasks of their own.
        let placement = match method.as_str() {
            "diag.echo" | "diag.parse_counts" | "module.status" | host_abi::relay::RESPOND => Placement::Inline,
            _ => Placement::Spawned,
        };
        self.call("invoke", placement, NO_CALL_ID, move |core, cancel| async move {
            invoke(&core, method.as_str(), params_json.as_str(), &cancel).await
        })
    }

    /// Resolves when the apps are stopped and the runtime has ended; at once when the module was
    /// already shut down.
    fn shutdown(&self) -> AbiFuture<()> {
        use async_ffi::FutureExt as _;
        contain(
            "shutting down",
            || match self.begin_shutdown() {
                Ok(done) => async move {
                    done.await.map_err(|_| AbiError::new(ErrorCode::Internal, "module shutdown thread died")).into()
                }
                .into_ffi(),
                Err(ShutdownError::AlreadyShutDown) => futures::future::ready(Ok(()).into()).into_ffi(),
                Err(e) => ready_err(AbiError::new(ErrorCode::Internal, e.to_string())),
            },
            ready_err,
        )
    }
}

/// Named operations beyond the fixed interface.
async fn invoke(core: &Arc<Core>, method: &str, params: &str, cancel: &CancellationToken) -> Result<RString, AbiError> {
    let params: Value = if params.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(params)
            .map_err(|e| AbiError::new(ErrorCode::InvalidArgument, format!("params of '{method}' are not JSON: {e}")))?
    };
    match method {
        // Round trip through the module runtime, optionally waiting: used by the boundary
        // self-test and benchmark to hold many calls in flight at once.
        "diag.echo" => {
            let delay = params.get("delayMs").and_then(Value::as_u64).unwrap_or(0);
            if delay > 0 {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(delay.min(60_000))) => {}
                    _ = cancel.cancelled() => return Err(AbiError::new(ErrorCode::Cancelled, "diag.echo cancelled")),
                }
            }
            Ok(json!({ "echo": params.get("value").cloned().unwrap_or(Value::Null) }).to_string().into())
        }
        // The message path's JSON parses so far (`runtime/parse_count.rs`).
        "diag.parse_counts" => {
            let (request, answer) = crate::runtime::parse_count::totals();
            Ok(json!({ "request": request, "answer": answer }).to_string().into())
        }
        // Validates manifest files (`gateway-host validate`): every problem with its field.
        host_abi::payloads::VALIDATE => {
            let ValidateParams { paths } = serde_json::from_value(params.clone()).unwrap_or_default();
            let results = tokio::task::block_in_place(|| crate::apps::validate::validate_paths(&paths, &core.host_version, &core.sandbox));
            Ok(Value::Array(results).to_string().into())
        }
        // The host re-read its configuration (reload) or changed the workspace's MCP servers.
        host_abi::payloads::RECONFIGURE => {
            let ReconfigureParams { config, explicit } = serde_json::from_value(params.clone()).unwrap_or_default();
            if !config.is_object() {
                return Err(AbiError::new(ErrorCode::InvalidArgument, "registry.reconfigure needs the configuration as a JSON object in `config`"));
            }
            core.start_watching();
            // The watcher follows the new folders before they are scanned: a change made after
            // the scan read a folder is then seen by the watcher.
            let follower = core.watcher.lock().as_ref().map(|w| w.follower());
            if let Some(follower) = follower {
                crate::apps::watcher::follow(&follower, core.registry.discovery_paths_of(&config)).await;
            }
            Ok(core.registry.reconfigure(config, explicit).await.to_string().into())
        }
        // The caller's client answered an app's question of a relayed call (host_abi::relay).
        host_abi::relay::RESPOND => {
            let Respond { call_id, key, result, error } = serde_json::from_value(params.clone()).unwrap_or_default();
            let answer = match (result, error) {
                (Some(result), _) => Ok(result),
                (None, Some(error)) => Err(rmcp::ErrorData::new(
                    rmcp::model::ErrorCode(error.get("code").and_then(Value::as_i64).map_or(jsonrpc::INTERNAL_ERROR, |c| c as i32)),
                    error.get("message").and_then(Value::as_str).unwrap_or("the client answered with an error").to_string(),
                    error.get("data").cloned(),
                )),
                (None, None) => {
                    return Err(AbiError::new(ErrorCode::InvalidArgument, "call.respond needs a result or an error"));
                }
            };
            let delivered = core.relays.get(call_id).is_some_and(|call| call.respond(&key, answer));
            Ok(serde_json::to_string(&Responded { delivered }).unwrap_or_default().into())
        }
        "module.status" => Ok(json!({
            "version": crate::MODULE_VERSION,
            "hostVersion": core.host_version,
            "shutDown": core.tasks.is_shut_down(),
            "callsInFlight": core.calls.in_flight(),
        })
        .to_string()
        .into()),
        other => Err(AbiError::new(ErrorCode::NotImplemented, format!("unknown module method '{other}'"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use abi_stable::std_types::RStr;
    use host_abi::{HostSink, HostSink_TO, LogLevel, LogRecord, ModuleEvent};

    struct NoHost;

    impl HostSink for NoHost {
        fn log_enabled(&self, _level: LogLevel, _target: RStr<'_>) -> bool {
            false
        }
        fn log(&self, _record: LogRecord) {}
        fn event(&self, _event: ModuleEvent) {}
    }

    fn instance(dir: &std::path::Path) -> Instance {
        let config = ModuleConfig {
            config_json: json!({ "McpApps": { "Enabled": false } }).to_string().into(),
            config_dir: dir.display().to_string().into(),
            data_dir: dir.display().to_string().into(),
            host_version: "0.1.0".into(),
            extra_json: "{}".into(),
        };
        Instance::create(config, Arc::new(HostSink_TO::from_value(NoHost, TD_Opaque))).unwrap()
    }

    /// Dropping the instance without `shutdown` ends its runtime (its tasks are dropped), without
    /// the drop itself waiting for that.
    #[test]
    fn dropping_the_instance_shuts_it_down() {
        let dir = std::env::temp_dir();
        let instance = instance(&dir);
        let tasks = instance.core.tasks.clone();
        let (held, ended) = std::sync::mpsc::channel::<()>();
        assert!(tasks.spawn("idling", async move {
            let _held = held;
            std::future::pending::<()>().await;
        }));
        drop(instance);
        assert!(tasks.is_shut_down(), "no new work once dropped");
        let outcome = ended.recv_timeout(Duration::from_secs(30));
        assert_eq!(outcome, Err(std::sync::mpsc::RecvTimeoutError::Disconnected), "the runtime ended, dropping its tasks");
    }

    /// After `shutdown`, dropping the instance has nothing left to do.
    #[test]
    fn shutdown_then_drop() {
        let dir = std::env::temp_dir();
        let instance = instance(&dir);
        futures::executor::block_on(instance.shutdown()).unwrap();
        futures::executor::block_on(instance.shutdown()).unwrap();
        drop(instance);
    }
}
