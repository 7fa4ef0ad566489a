//! The host's side of a created module: the sink the module logs and reports events through, and
//! typed async wrappers over the module's calls.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::RStr;
use host_abi::{
    AbiError, AppDescriptor, ForwardRequest, HostSink, HostSink_TO, LogLevel, LogRecord, ModuleConfig, ModuleEvent,
    ModuleInstanceBox, ToolDescriptor,
};
use serde_json::Value;
use tokio::sync::broadcast;

use crate::module_loader::LoadedModule;
use crate::relay::{RelayRoutes, RelayedCall};

/// A module event, owned by the host.
#[derive(Debug, Clone)]
pub struct HostEvent {
    pub kind: String,
    pub app_id: String,
    pub payload: Value,
}

/// Receives the module's logs and events. Called on module threads: never blocks.
struct GatewaySink {
    events: broadcast::Sender<HostEvent>,
    /// Events of relayed calls go to the one call waiting for them, not to every subscriber.
    relays: Arc<RelayRoutes>,
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
        let payload = serde_json::from_str(event.payload_json.as_str()).unwrap_or(Value::Null);
        if self.relays.dispatch(event.kind.as_str(), &payload) {
            return;
        }
        // No receivers is normal (nobody listening yet); never block the module's thread.
        let _ = self.events.send(HostEvent { kind: event.kind.into_string(), app_id: event.app_id.into_string(), payload });
    }
}

/// One app as the gateway reports it (`/apps/health`, the `gateway.apps` tool).
pub fn app_json(a: &AppDescriptor) -> Value {
    let non_empty = |s: &str| if s.is_empty() { Value::Null } else { Value::from(s) };
    serde_json::json!({
        "id": a.id.as_str(),
        "name": a.name.as_str(),
        "version": a.version.as_str(),
        "state": a.state.as_str(),
        "transport": a.transport.as_str(),
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
    serde_json::from_str::<Value>(app.detail_json.as_str()).map(|d| d["kind"] != "mcpServer").unwrap_or(true)
}

/// Cancels a module call when the host stops waiting for it (a dropped request, a closed client).
struct CancelOnDrop<'a> {
    module: &'a ModuleHost,
    call_id: u64,
    armed: bool,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.module.instance.cancel(self.call_id);
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

/// A created module instance plus the host's view of it.
pub struct ModuleHost {
    instance: ModuleInstanceBox,
    events: broadcast::Sender<HostEvent>,
    relays: Arc<RelayRoutes>,
    next_call_id: AtomicU64,
}

impl ModuleHost {
    /// Creates the module's instance from the effective configuration.
    /// Libraries are never unloaded, so the module's root (a `'static` reference) outlives this.
    pub fn create(loaded: LoadedModule, config: ModuleConfig) -> Result<Arc<ModuleHost>, AbiError> {
        let (events, _) = broadcast::channel(1024);
        let relays = Arc::new(RelayRoutes::default());
        let sink = HostSink_TO::from_value(GatewaySink { events: events.clone(), relays: relays.clone() }, TD_Opaque);
        let instance = (loaded.root.create())(config, sink).into_result()?;
        Ok(Arc::new(ModuleHost { instance, events, relays, next_call_id: AtomicU64::new(1) }))
    }

    pub fn subscribe(&self) -> broadcast::Receiver<HostEvent> {
        self.events.subscribe()
    }

    /// A fresh id for a call that may be cancelled.
    pub fn next_call_id(&self) -> u64 {
        self.next_call_id.fetch_add(1, Ordering::Relaxed)
    }

    pub fn instance(&self) -> &ModuleInstanceBox {
        &self.instance
    }

    pub async fn list_apps(&self) -> Result<Vec<AppDescriptor>, AbiError> {
        Ok(self.instance.list_apps().await.into_result()?.into_vec())
    }

    pub async fn list_tools(&self) -> Result<Vec<ToolDescriptor>, AbiError> {
        Ok(self.instance.list_tools().await.into_result()?.into_vec())
    }

    /// Forwards one browser JSON-RPC message to an app's upstream session. Returns the response
    /// as JSON text (passed through untouched, so multi-MB resources are not re-encoded), or
    /// `None` for a notification. If the caller stops waiting (the browser went away), the call
    /// is cancelled in the module so the upstream request does not linger.
    pub async fn forward(&self, app_id: &str, message: &Value, session_id: &str) -> Result<Option<String>, AbiError> {
        self.forward_with(self.next_call_id(), app_id, message, session_id, &Value::Object(Default::default())).await
    }

    /// [`ModuleHost::forward`] under a chosen call id, with `extra` (e.g. the relay opt-in).
    pub async fn forward_with(
        &self,
        call_id: u64,
        app_id: &str,
        message: &Value,
        session_id: &str,
        extra: &Value,
    ) -> Result<Option<String>, AbiError> {
        let request = ForwardRequest {
            call_id,
            app_id: app_id.into(),
            message_json: message.to_string().into(),
            session_id: session_id.into(),
            extra_json: extra.to_string().into(),
        };
        let mut guard = CancelOnDrop { module: self, call_id, armed: true };
        let response = self.instance.forward(request).await.into_result();
        guard.armed = false;
        drop(guard);
        let text = response?.message_json.into_string();
        Ok((!text.trim().is_empty()).then_some(text))
    }

    /// A model-side tool call; cancelled in the module if this future is dropped.
    pub async fn call_tool(&self, request: host_abi::ToolCallRequest) -> Result<host_abi::ToolCallOutcome, AbiError> {
        let call_id = request.call_id;
        let mut guard = CancelOnDrop { module: self, call_id, armed: true };
        let result = self.instance.call_tool(request).await.into_result();
        guard.armed = false;
        result
    }

    /// Starts `work` (a module call under `call_id` that opted into the relay) with its
    /// events routed to the returned call.
    pub fn relayed<T: Send + 'static>(&self, call_id: u64, work: impl std::future::Future<Output = T> + Send + 'static) -> RelayedCall<T> {
        RelayedCall::start(&self.relays, call_id, work)
    }

    /// Gives the module a client's answer to a relayed call's question: its result, or its
    /// JSON-RPC error object.
    pub async fn respond(&self, call_id: u64, key: &str, answer: Result<Value, Value>) {
        let mut params = serde_json::json!({ "callId": call_id, "key": key });
        match answer {
            Ok(result) => params["result"] = result,
            Err(error) => params["error"] = error,
        }
        match self.invoke(host_abi::relay::RESPOND, &params).await {
            Ok(v) if v["delivered"] == true => {}
            Ok(_) => tracing::debug!(call_id, key, "an answer arrived for a question nobody waits for any more"),
            Err(e) => tracing::warn!(call_id, key, "cannot hand a client's answer to the module: {e}"),
        }
    }

    pub async fn reload(&self) -> Result<Value, AbiError> {
        let report = self.instance.reload().await.into_result()?;
        Ok(serde_json::from_str(report.as_str()).unwrap_or(Value::Null))
    }

    pub async fn invoke(&self, method: &str, params: &Value) -> Result<Value, AbiError> {
        let out = self.instance.invoke(method.into(), params.to_string().into()).await.into_result()?;
        Ok(serde_json::from_str(out.as_str()).unwrap_or(Value::Null))
    }

    pub async fn shutdown(&self) -> Result<(), AbiError> {
        self.instance.shutdown().await.into_result()
    }
}
