//! The module instance the host holds: adapts the `host-abi` interface to the registry.
//!
//! Each method here is thin on purpose: contain panics at the export, check injected faults, and
//! hand the work to the module runtime. The logic lives in the registry and below.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::Duration;

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RString, RVec};
use host_abi::{
    error_code, AbiError, AbiFuture, AppDescriptor, ForwardRequest, ForwardResponse, HostSinkBox, ModuleConfig,
    ModuleInfo, ModuleInstance, ModuleInstanceBox, ModuleInstance_TO, ToolCallOutcome, ToolCallRequest, ToolDescriptor,
};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::app_server::{AppContext, AppServer};
use crate::config::{McpAppsConfig, McpCompatibility};
use crate::containment::contain;
use crate::events::EventSink;
use crate::faults::{Faults, Site};
use crate::registry::Registry;
use crate::relay::Relays;
use crate::runtime::{ready_err, ModuleRuntime};
use crate::watcher::ManifestWatcher;

/// Shared by every call: the runtime, the registry and the calls in flight.
pub struct Core {
    pub runtime: ModuleRuntime,
    pub events: EventSink,
    /// Calls whose clients answer the apps' server-to-client requests (SPEC R42).
    pub relays: Arc<Relays>,
    pub registry: Registry,
    pub faults: Faults,
    pub host_version: String,
    /// Cancellation handles of calls in flight, by the host's call id.
    inflight: Mutex<HashMap<u64, CancellationToken>>,
    /// Tool-name clashes already logged.
    clashes_reported: Mutex<HashSet<String>>,
    watcher: Mutex<Option<ManifestWatcher>>,
}

impl Core {
    /// Registers a cancellable call; the guard unregisters it.
    fn track(self: &Arc<Self>, call_id: u64) -> (CancellationToken, InflightGuard) {
        let token = CancellationToken::new();
        if call_id != 0 {
            self.inflight.lock().insert(call_id, token.clone());
        }
        (token, InflightGuard { core: self.clone(), call_id })
    }

    fn app(&self, app_id: &str) -> Result<Arc<AppServer>, AbiError> {
        self.registry
            .app(app_id)
            .ok_or_else(|| AbiError::new(error_code::NOT_FOUND, format!("Unknown McpApp '{app_id}'")))
    }

    fn descriptor(&self, app: &AppServer) -> AppDescriptor {
        app_descriptor(app)
    }
}

struct InflightGuard {
    core: Arc<Core>,
    call_id: u64,
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        self.core.inflight.lock().remove(&self.call_id);
    }
}

pub struct Instance {
    core: Arc<Core>,
}

impl Instance {
    pub fn create(config: ModuleConfig, host: Arc<HostSinkBox>) -> Result<Instance, AbiError> {
        let config_value = crate::parse_config_json(config.config_json.as_str())?;
        let config_dir = std::path::PathBuf::from(config.config_dir.as_str());
        let apps_config = McpAppsConfig::from_config(&config_value, &config_dir);
        let compatibility = McpCompatibility::from_config(&config_value);
        let runtime = ModuleRuntime::new(2)
            .map_err(|e| AbiError::new(error_code::INTERNAL, format!("cannot start the module's runtime: {e}")))?;
        let relays = Arc::new(Relays::default());
        let ctx = Arc::new(AppContext {
            events: EventSink::new(host),
            relays: relays.clone(),
            relaxed_schema: compatibility.allow_relaxed_input_schema_validation,
            force_legacy_initialize: compatibility.force_legacy_initialize,
            host_version: config.host_version.to_string(),
        });
        let watch_paths = apps_config.discovery_paths.clone();
        let watch = apps_config.enabled;
        let core = Arc::new(Core {
            runtime,
            events: ctx.events.clone(),
            relays,
            registry: Registry::new(ctx, apps_config, config_value.clone(), config_dir.clone()),
            faults: Faults::from_config(&config_value),
            host_version: config.host_version.into_string(),
            inflight: Mutex::new(HashMap::new()),
            clashes_reported: Mutex::new(HashSet::new()),
            watcher: Mutex::new(None),
        });
        if watch {
            let weak: Weak<Core> = Arc::downgrade(&core);
            let watcher = crate::watcher::watch(&watch_paths, &core.runtime, move || {
                let weak = weak.clone();
                async move {
                    if let Some(core) = weak.upgrade() {
                        let report = core.registry.reload(false).await;
                        tracing::info!("Reload after manifest change: {report}");
                    }
                }
            });
            *core.watcher.lock() = watcher;
        }
        tracing::info!(
            version = crate::MODULE_VERSION,
            "MCP App module {} {} created",
            crate::MODULE_NAME,
            crate::MODULE_VERSION
        );
        Ok(Instance { core })
    }

    pub fn into_abi(self) -> ModuleInstanceBox {
        ModuleInstance_TO::from_value(self, TD_Opaque)
    }

    /// Runs one exported operation: containment, the injected-fault checks, then the work on the
    /// module runtime.
    fn call<T, F, Fut>(&self, operation: &'static str, work: F) -> AbiFuture<T>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Core>) -> Fut,
        Fut: std::future::Future<Output = Result<T, AbiError>> + Send + 'static,
    {
        contain(
            operation,
            || {
                self.core.faults.check(Site::Export, operation);
                let core = self.core.clone();
                let fut = work(core.clone());
                self.core.runtime.spawn_call(operation, async move {
                    core.faults.check(Site::Task, operation);
                    fut.await
                })
            },
            ready_err,
        )
    }
}

/// The host's view of one app.
pub fn app_descriptor(app: &AppServer) -> AppDescriptor {
    let st = app.install_state();
    let live_catalog = app.catalog();
    let m = st.manifest.as_ref();
    // What the running app declares wins over the manifest (SPEC R19).
    let (has_ui, ui_resource_uri) = crate::catalog::ui_of(
        live_catalog.as_ref(),
        m.is_some_and(|m| m.has_ui),
        m.and_then(|m| m.ui_resource_uri.as_deref()),
    );
    let catalog = live_catalog.unwrap_or_default();
    let opt = |v: Option<&String>| RString::from(v.cloned().unwrap_or_default());
    AppDescriptor {
        id: st.key.as_str().into(),
        name: m.map(|m| m.name.clone()).filter(|n| !n.is_empty()).unwrap_or_else(|| st.key.clone()).into(),
        version: m.map(|m| m.version.clone()).unwrap_or_default().into(),
        state: st.state.as_str().into(),
        transport: m.map(|m| m.transport.as_str()).unwrap_or("").into(),
        manifest_path: st.manifest_path.display().to_string().into(),
        tool_count: catalog.tools.len() as u32,
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
        self.call("discover", |core| async move {
            let report = tokio::task::block_in_place(|| core.registry.discover());
            serde_json::to_string(&report)
                .map(RString::from)
                .map_err(|e| AbiError::new(error_code::INTERNAL, format!("cannot serialise the discovery report: {e}")))
        })
    }

    fn list_apps(&self) -> AbiFuture<RVec<AppDescriptor>> {
        self.call("list_apps", |core| async move {
            Ok(core.registry.apps().iter().map(|a| core.descriptor(a)).collect())
        })
    }

    fn start_app(&self, app_id: RString) -> AbiFuture<AppDescriptor> {
        self.call("start_app", move |core| async move {
            let app = core.app(app_id.as_str())?;
            app.start(true).await.map_err(|e| AbiError::new(error_code::UPSTREAM, e))?;
            Ok(core.descriptor(&app))
        })
    }

    fn stop_app(&self, app_id: RString) -> AbiFuture<AppDescriptor> {
        self.call("stop_app", move |core| async move {
            let app = core.app(app_id.as_str())?;
            app.stop("stopped on request").await;
            Ok(core.descriptor(&app))
        })
    }

    fn reload(&self) -> AbiFuture<RString> {
        self.call("reload", |core| async move { Ok(core.registry.reload(true).await.to_string().into()) })
    }

    fn list_tools(&self) -> AbiFuture<RVec<ToolDescriptor>> {
        self.call("list_tools", |core| async move {
            Ok(crate::tool_bridge::descriptors(&core.registry.apps(), &core.clashes_reported).into())
        })
    }

    fn call_tool(&self, request: ToolCallRequest) -> AbiFuture<ToolCallOutcome> {
        self.call("call_tool", move |core| async move {
            let app = core.app(request.app_id.as_str())?;
            let (cancel, _guard) = core.track(request.call_id);
            let meta = serde_json::from_str::<Value>(request.meta_json.as_str()).ok();
            let relay =
                core.relays.register(request.call_id, &app.key, request.extra_json.as_str(), meta.as_ref(), &core.events);
            Ok(crate::tool_bridge::call(
                &app,
                request.tool_name.as_str(),
                request.arguments_json.as_str(),
                request.meta_json.as_str(),
                &cancel,
                relay.as_ref().map(|r| &*r.call),
            )
            .await)
        })
    }

    fn forward(&self, request: ForwardRequest) -> AbiFuture<ForwardResponse> {
        self.call("forward", move |core| async move {
            let (cancel, _guard) = core.track(request.call_id);
            let response = crate::forward::forward(
                &core,
                request.call_id,
                request.app_id.as_str(),
                request.message_json.as_str(),
                request.session_id.as_str(),
                request.extra_json.as_str(),
                &cancel,
            )
            .await;
            Ok(ForwardResponse {
                message_json: response.map(|r| r.to_string()).unwrap_or_default().into(),
                extra_json: "{}".into(),
            })
        })
    }

    fn cancel(&self, call_id: u64) -> bool {
        contain(
            "cancelling a call",
            || {
                self.core.faults.check(Site::Export, "cancel");
                match self.core.inflight.lock().get(&call_id) {
                    Some(token) => {
                        token.cancel();
                        true
                    }
                    None => false,
                }
            },
            |_| false,
        )
    }

    fn invoke(&self, method: RString, params_json: RString) -> AbiFuture<RString> {
        self.call("invoke", move |core| async move { invoke(&core, method.as_str(), params_json.as_str()).await })
    }

    fn shutdown(&self) -> AbiFuture<()> {
        let core = self.core.clone();
        contain(
            "shutting down",
            move || {
                // Apps are stopped on the runtime; the runtime itself can only be shut down from a
                // thread that is not its own.
                let (tx, rx) = futures::channel::oneshot::channel();
                std::thread::Builder::new()
                    .name("mcpapp-shutdown".into())
                    .spawn(move || {
                        tracing::info!("MCP App module shutting down");
                        core.watcher.lock().take();
                        let stopping = core.runtime.handle().spawn({
                            let core = core.clone();
                            async move { core.registry.stop_all().await }
                        });
                        let stopped = core.runtime.handle().block_on(async {
                            tokio::time::timeout(Duration::from_secs(15), stopping).await
                        });
                        if stopped.is_err() {
                            tracing::warn!("apps did not stop within 15s; their processes are killed with the runtime");
                        }
                        crate::logging::uninstall();
                        core.runtime.shutdown(Duration::from_secs(2));
                        let _ = tx.send(());
                    })
                    .expect("spawning the shutdown thread");
                use async_ffi::FutureExt as _;
                async move {
                    rx.await.map_err(|_| AbiError::new(error_code::INTERNAL, "module shutdown thread died")).into()
                }
                .into_ffi()
            },
            ready_err,
        )
    }
}

/// Named operations beyond the fixed interface.
async fn invoke(core: &Core, method: &str, params: &str) -> Result<RString, AbiError> {
    let params: Value = if params.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(params)
            .map_err(|e| AbiError::new(error_code::INVALID_ARGUMENT, format!("params of '{method}' are not JSON: {e}")))?
    };
    match method {
        // Round trip through the module runtime, optionally waiting: used by the boundary
        // self-test and benchmark to hold many calls in flight at once.
        "diag.echo" => {
            let delay = params.get("delayMs").and_then(Value::as_u64).unwrap_or(0);
            if delay > 0 {
                tokio::time::sleep(Duration::from_millis(delay.min(60_000))).await;
            }
            Ok(json!({ "echo": params.get("value").cloned().unwrap_or(Value::Null) }).to_string().into())
        }
        // Validates manifest files (`gateway-host validate`): every problem with its field.
        "manifest.validate" => {
            let paths: Vec<String> = params
                .get("paths")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|p| p.as_str().map(str::to_string)).collect())
                .unwrap_or_default();
            let results = tokio::task::block_in_place(|| crate::validate::validate_paths(&paths, &core.host_version));
            Ok(Value::Array(results).to_string().into())
        }
        // The caller's client answered an app's question of a relayed call (host_abi::relay).
        host_abi::relay::RESPOND => {
            let call_id = params.get("callId").and_then(Value::as_u64).unwrap_or(0);
            let key = params.get("key").and_then(Value::as_str).unwrap_or_default();
            let answer = match (params.get("result"), params.get("error")) {
                (Some(result), _) => Ok(result.clone()),
                (None, Some(error)) => Err(rmcp::ErrorData::new(
                    rmcp::model::ErrorCode(error.get("code").and_then(Value::as_i64).unwrap_or(-32603) as i32),
                    error.get("message").and_then(Value::as_str).unwrap_or("the client answered with an error").to_string(),
                    error.get("data").cloned(),
                )),
                (None, None) => {
                    return Err(AbiError::new(error_code::INVALID_ARGUMENT, "call.respond needs a result or an error"));
                }
            };
            let delivered = core.relays.get(call_id).is_some_and(|call| call.respond(key, answer));
            Ok(json!({ "delivered": delivered }).to_string().into())
        }
        "module.status" => Ok(json!({
            "version": crate::MODULE_VERSION,
            "hostVersion": core.host_version,
            "shutDown": core.runtime.is_shut_down(),
            "callsInFlight": core.inflight.lock().len(),
        })
        .to_string()
        .into()),
        other => Err(AbiError::new(error_code::NOT_IMPLEMENTED, format!("unknown module method '{other}'"))),
    }
}
