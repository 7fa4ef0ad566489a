//! Module events to the host (lifecycle changes, tool-list changes, upstream notifications).

use std::sync::Arc;

use host_abi::payloads::AppState;
use host_abi::{event_kind, HostSinkBox, ModuleEvent};
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

    fn emit(&self, kind: &str, app_id: &str, payload: Value) {
        self.host.event(ModuleEvent { kind: kind.into(), app_id: app_id.into(), payload_json: payload.to_string().into() });
    }

    pub fn state_changed(&self, app_id: &str, from: AppState, to: AppState, last_error: Option<&str>) {
        self.emit(
            event_kind::APP_STATE_CHANGED,
            app_id,
            json!({ "from": from.as_str(), "to": to.as_str(), "lastError": last_error }),
        );
    }

    pub fn tools_changed(&self, app_id: &str) {
        self.emit(event_kind::TOOLS_CHANGED, app_id, json!({}));
    }

    pub fn upstream_notification(&self, app_id: &str, message: Value) {
        self.emit(event_kind::UPSTREAM_NOTIFICATION, app_id, message);
    }

    pub fn call_notification(&self, app_id: &str, call_id: u64, message: Value) {
        let payload = host_abi::payloads::CallNotification { call_id, message };
        self.emit(event_kind::CALL_NOTIFICATION, app_id, serde_json::to_value(payload).unwrap_or_default());
    }

    /// `request` is the app's JSON-RPC request (`method`, `params`).
    pub fn call_request(&self, app_id: &str, call_id: u64, key: &str, request: Value) {
        let request: host_abi::payloads::QuestionRequest = serde_json::from_value(request).unwrap_or_default();
        let payload = host_abi::payloads::CallRequest { call_id, key: key.to_string(), request };
        self.emit(event_kind::CALL_REQUEST, app_id, serde_json::to_value(payload).unwrap_or_default());
    }
}
