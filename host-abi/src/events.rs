//! What the module reports to the host: log records and events.

use abi_stable::{std_types::RString, StableAbi};

/// Severity of a [`LogRecord`].
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Error = 1,
    Warn = 2,
    Info = 3,
    Debug = 4,
    Trace = 5,
}

/// One `tracing` event of the module, forwarded to the host's subscriber.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct LogRecord {
    pub level: LogLevel,
    /// The module's tracing target, e.g. `mcpapp_plugin::discovery`.
    pub target: RString,
    pub message: RString,
    /// The event's other fields as a JSON object.
    pub fields_json: RString,
}

/// Something that happened in the module that the host may act on.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct ModuleEvent {
    /// One of [`event_kind`]; unknown kinds must be ignored.
    pub kind: RString,
    /// The app concerned; empty when none.
    pub app_id: RString,
    /// Details as a JSON object.
    pub payload_json: RString,
}

/// Kinds of [`ModuleEvent`].
pub mod event_kind {
    /// An app changed lifecycle state. Payload: `{"from","to","lastError"}`.
    pub const APP_STATE_CHANGED: &str = "app.state_changed";
    /// The set of tools offered changed (an app started, stopped or its list changed).
    pub const TOOLS_CHANGED: &str = "tools.changed";
    /// An upstream app sent a notification. Payload: the JSON-RPC notification.
    pub const UPSTREAM_NOTIFICATION: &str = "upstream.notification";
    /// A notification that belongs to one relayed call (see [`relay`](crate::relay)): progress (its
    /// `progressToken` already the caller's own) or a log message sent while the call ran.
    /// Payload: `{"callId": u64, "message": <JSON-RPC notification>}`.
    pub const CALL_NOTIFICATION: &str = "call.notification";
    /// The app asked the caller of one relayed call something (sampling, elicitation, roots).
    /// Payload: `{"callId": u64, "key": string, "request": {"method", "params"}}`; the host
    /// answers with the [`relay::RESPOND`](crate::relay::RESPOND) operation.
    pub const CALL_REQUEST: &str = "call.request";
}
