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
    /// What happened: read it with [`ModuleEvent::kind`].
    pub kind: EventKind_NE,
    /// The app concerned; empty when none.
    pub app_id: RString,
    /// Details as a JSON object.
    pub payload_json: RString,
}

impl ModuleEvent {
    pub fn new(kind: EventKind, app_id: impl Into<RString>, payload_json: impl Into<RString>) -> Self {
        ModuleEvent { kind: EventKind_NE::new(kind), app_id: app_id.into(), payload_json: payload_json.into() }
    }

    /// The kind; `None` for one this side does not know (sent by a newer module), which the
    /// host ignores.
    pub fn kind(&self) -> Option<EventKind> {
        self.kind.as_enum().ok().copied()
    }
}

/// The kind of a [`ModuleEvent`].
///
/// Kinds will grow, so this crosses as abi_stable's `NonExhaustive` ([`EventKind_NE`]), as
/// [`ErrorCode`](crate::ErrorCode) does: a minor version may append kinds (at the end, with the
/// next discriminant), and a side that does not know one ignores the event ([`ModuleEvent::kind`]).
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[sabi(kind(WithNonExhaustive(size = [u8; 8], align = 1, traits(Debug, Display, Clone, PartialEq, Eq))))]
#[non_exhaustive]
pub enum EventKind {
    /// An app changed lifecycle state. Payload: `{"from","to","lastError"}` (states by name).
    AppStateChanged = 0,
    /// The set of tools offered changed (an app started, stopped or its list changed).
    ToolsChanged = 1,
    /// An upstream app sent a notification. Payload: the JSON-RPC notification.
    UpstreamNotification = 2,
    /// A notification that belongs to one relayed call (see [`relay`](crate::relay)): progress (its
    /// `progressToken` already the caller's own) or a log message sent while the call ran.
    /// Payload: `{"callId": u64, "message": <JSON-RPC notification>}`.
    CallNotification = 3,
    /// The app asked the caller of one relayed call something (sampling, elicitation, roots).
    /// Payload: `{"callId": u64, "key": string, "request": {"method", "params"}}`; the host
    /// answers with the [`relay::RESPOND`](crate::relay::RESPOND) operation.
    CallRequest = 4,
}

impl EventKind {
    /// The kind's name where it is written out (logs, metrics labels): `app.state_changed`.
    pub const fn as_str(self) -> &'static str {
        match self {
            EventKind::AppStateChanged => "app.state_changed",
            EventKind::ToolsChanged => "tools.changed",
            EventKind::UpstreamNotification => "upstream.notification",
            EventKind::CallNotification => "call.notification",
            EventKind::CallRequest => "call.request",
        }
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
