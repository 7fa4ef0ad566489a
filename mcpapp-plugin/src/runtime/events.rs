//! Module events to the host (lifecycle changes, tool-list changes, upstream notifications).

use std::sync::Arc;

use host_abi::payloads::AppState;
use host_abi::{EventKind, HostSinkBox, ModuleEvent};
use serde_json::{json, Value};

/// Cheap to clone; every part of the module that reports to the host holds one.
#[derive(Clone)]
pub struct EventSink {
    host: Arc<HostSinkBox>,
}

impl EventSink {
    pub fn new(host: Arc<HostSinkBox>) -> Self {
        EventSink { host }
    }

    fn emit(&self, kind: EventKind, app_id: &str, payload: Value) {
        self.host.event(ModuleEvent::new(kind, app_id, payload.to_string()));
    }

    pub fn state_changed(&self, app_id: &str, from: AppState, to: AppState, last_error: Option<&str>) {
        self.emit(
            EventKind::AppStateChanged,
            app_id,
            json!({ "from": from.as_str(), "to": to.as_str(), "lastError": last_error }),
        );
    }

    pub fn tools_changed(&self, app_id: &str) {
        self.emit(EventKind::ToolsChanged, app_id, json!({}));
    }

    pub fn upstream_notification(&self, app_id: &str, message: Value) {
        self.emit(EventKind::UpstreamNotification, app_id, message);
    }

    pub fn call_notification(&self, app_id: &str, call_id: u64, message: Value) {
        let payload = host_abi::payloads::CallNotification { call_id, message };
        self.emit(EventKind::CallNotification, app_id, serde_json::to_value(payload).unwrap_or_default());
    }

    /// `request` is the app's JSON-RPC request (`method`, `params`).
    pub fn call_request(&self, app_id: &str, call_id: u64, key: &str, request: Value) {
        let request: host_abi::payloads::QuestionRequest = serde_json::from_value(request).unwrap_or_default();
        let payload = host_abi::payloads::CallRequest { call_id, key: key.to_string(), request };
        self.emit(EventKind::CallRequest, app_id, serde_json::to_value(payload).unwrap_or_default());
    }
}
