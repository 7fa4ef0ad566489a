//! The module instance the host holds: adapts the `host-abi` interface to the registry.
//!
//! Each method here is thin on purpose: contain panics at the export, check injected faults, and
//! hand the work to the module runtime. The logic lives in the registry and below.

use std::sync::Arc;
use std::time::Duration;

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RString, RVec};
use host_abi::{
    error_code, AbiError, AbiFuture, AppDescriptor, ForwardRequest, ForwardResponse, HostSinkBox, ModuleConfig,
    ModuleInfo, ModuleInstance, ModuleInstanceBox, ModuleInstance_TO, ToolCallOutcome, ToolCallRequest, ToolDescriptor,
};
use serde_json::{json, Value};

use crate::containment::contain;
use crate::faults::{Faults, Site};
use crate::runtime::{ready_err, ModuleRuntime};

/// Shared by every call: the runtime, the host sink and the configuration.
pub struct Core {
    pub runtime: ModuleRuntime,
    pub host: Arc<HostSinkBox>,
    pub faults: Faults,
    pub config: Value,
    pub config_dir: String,
    pub host_version: String,
}

pub struct Instance {
    core: Arc<Core>,
}

impl Instance {
    pub fn create(config: ModuleConfig, host: Arc<HostSinkBox>) -> Result<Instance, AbiError> {
        let config_value = crate::parse_config_json(config.config_json.as_str())?;
        let runtime = ModuleRuntime::new(2)
            .map_err(|e| AbiError::new(error_code::INTERNAL, format!("cannot start the module's runtime: {e}")))?;
        let faults = Faults::from_config(&config_value);
        tracing::info!(
            version = crate::MODULE_VERSION,
            "MCP App module {} {} created",
            crate::MODULE_NAME,
            crate::MODULE_VERSION
        );
        Ok(Instance {
            core: Arc::new(Core {
                runtime,
                host,
                faults,
                config: config_value,
                config_dir: config.config_dir.into_string(),
                host_version: config.host_version.into_string(),
            }),
        })
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

fn not_yet(what: &str) -> AbiError {
    AbiError::new(error_code::NOT_IMPLEMENTED, format!("not yet implemented: {what}"))
}

impl ModuleInstance for Instance {
    fn info(&self) -> ModuleInfo {
        contain("reading module info", crate::module_info, |_| crate::module_info())
    }

    fn discover(&self) -> AbiFuture<RString> {
        self.call("discover", |_| async { Err(not_yet("discovery")) })
    }

    fn list_apps(&self) -> AbiFuture<RVec<AppDescriptor>> {
        self.call("list_apps", |_| async { Ok(RVec::new()) })
    }

    fn start_app(&self, app_id: RString) -> AbiFuture<AppDescriptor> {
        self.call("start_app", move |_| async move { Err(not_yet(&format!("starting app '{app_id}'"))) })
    }

    fn stop_app(&self, app_id: RString) -> AbiFuture<AppDescriptor> {
        self.call("stop_app", move |_| async move { Err(not_yet(&format!("stopping app '{app_id}'"))) })
    }

    fn reload(&self) -> AbiFuture<RString> {
        self.call("reload", |_| async { Err(not_yet("reload")) })
    }

    fn list_tools(&self) -> AbiFuture<RVec<ToolDescriptor>> {
        self.call("list_tools", |_| async { Ok(RVec::new()) })
    }

    fn call_tool(&self, request: ToolCallRequest) -> AbiFuture<ToolCallOutcome> {
        self.call("call_tool", move |_| async move { Err(not_yet(&format!("calling tool '{}'", request.tool_name))) })
    }

    fn forward(&self, request: ForwardRequest) -> AbiFuture<ForwardResponse> {
        self.call("forward", move |_| async move { Err(not_yet(&format!("forwarding to app '{}'", request.app_id))) })
    }

    fn cancel(&self, call_id: u64) -> bool {
        contain("cancelling a call", || {
            self.core.faults.check(Site::Export, "cancel");
            let _ = call_id;
            false
        }, |_| false)
    }

    fn invoke(&self, method: RString, params_json: RString) -> AbiFuture<RString> {
        self.call("invoke", move |core| async move { invoke(&core, method.as_str(), params_json.as_str()).await })
    }

    fn shutdown(&self) -> AbiFuture<()> {
        let core = self.core.clone();
        contain(
            "shutting down",
            move || {
                // The runtime cannot shut itself down from one of its own threads, so the work
                // (stopping apps) runs on the runtime and the final teardown on a plain thread.
                let (tx, rx) = futures::channel::oneshot::channel();
                std::thread::Builder::new()
                    .name("mcpapp-shutdown".into())
                    .spawn(move || {
                        tracing::info!("MCP App module shutting down");
                        crate::logging::uninstall();
                        core.runtime.shutdown(Duration::from_secs(5));
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
        "diag.log" => {
            let message = params.get("message").and_then(Value::as_str).unwrap_or("diagnostic log line");
            tracing::info!(target: "mcpapp_plugin::diag", "{message}");
            Ok(json!({ "logged": message }).to_string().into())
        }
        "module.status" => Ok(json!({
            "version": crate::MODULE_VERSION,
            "hostVersion": core.host_version,
            "configDir": core.config_dir,
            "shutDown": core.runtime.is_shut_down(),
        })
        .to_string()
        .into()),
        other => Err(AbiError::new(error_code::NOT_IMPLEMENTED, format!("unknown module method '{other}'"))),
    }
}
