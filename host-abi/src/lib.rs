//! The stable ABI between `gateway-host` and the MCP App module (`mcpapp-plugin`).
//!
//! This crate holds types and traits only — no logic — because whatever is here is frozen the
//! moment a module ships: a newer host refuses an older module whose interface has fewer fields
//! (see `shared/BOUNDARY.md`). So the interface carries everything the product needs from the
//! start (discovery, registry, tools, forwarding, events, logs, cancellation, shutdown), and every
//! descriptor has a JSON string field (`extra_json` / `detail_json`) for whatever is added later.
//!
//! Rules of the boundary:
//! - Only `abi_stable` types cross it; JSON travels as strings.
//! - Anything that may wait on an upstream is asynchronous: the module spawns the work on its own
//!   tokio runtime and hands back an [`AbiFuture`] that is safe to poll from any host thread (it
//!   never touches the module's tokio thread-locals).
//! - Nothing panics across it: the module turns panics into [`AbiError`]s with code
//!   [`error_code::PANIC`].

use abi_stable::{
    declare_root_module_statics,
    library::RootModule,
    package_version_strings, sabi_trait,
    sabi_types::VersionStrings,
    std_types::{RBox, RStr, RString, RVec},
    StableAbi,
};

pub use abi_stable;
pub use async_ffi;
pub use abi_stable::std_types::RResult;

/// Semantic ABI version. Bumped whenever the meaning of a call changes even if the layout does not.
/// The host refuses a module whose `ModuleInfo::abi_version` differs from its own.
pub const ABI_VERSION: u32 = 1;

/// The version of this interface crate, as compiled into whichever side uses it.
pub const INTERFACE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The result of every fallible call across the boundary.
pub type AbiResult<T> = RResult<T, AbiError>;

/// A future that crosses the boundary. The module resolves it from its own runtime; the host may
/// poll it from any executor.
pub type AbiFuture<T> = async_ffi::FfiFuture<AbiResult<T>>;

/// A module instance as a trait object owned by the host.
pub type ModuleInstanceBox = ModuleInstance_TO<'static, RBox<()>>;

/// The host's log and event sink as a trait object owned by the module.
pub type HostSinkBox = HostSink_TO<'static, RBox<()>>;

/// Identity of a module library, readable without creating an instance.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct ModuleInfo {
    /// The module crate's name, e.g. `mcpapp-plugin`.
    pub name: RString,
    /// The module crate's version, e.g. `0.1.0`.
    pub version: RString,
    /// [`ABI_VERSION`] as the module was compiled.
    pub abi_version: u32,
    /// [`INTERFACE_VERSION`] as the module was compiled.
    pub interface_version: RString,
    /// Anything added later (build features, git revision…), as a JSON object.
    pub extra_json: RString,
}

/// An error crossing the boundary: a machine-readable code and a message for people.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct AbiError {
    /// One of [`error_code`].
    pub code: RString,
    pub message: RString,
}

impl AbiError {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        AbiError {
            code: code.into(),
            message: RString::from(message.into()),
        }
    }
}

impl std::fmt::Display for AbiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for AbiError {}

/// Codes of [`AbiError`]. New codes may appear; treat unknown ones like `internal`.
pub mod error_code {
    pub const NOT_FOUND: &str = "not_found";
    pub const NOT_RUNNING: &str = "not_running";
    pub const INVALID_ARGUMENT: &str = "invalid_argument";
    pub const INVALID_CONFIG: &str = "invalid_config";
    pub const TIMEOUT: &str = "timeout";
    pub const CANCELLED: &str = "cancelled";
    pub const UPSTREAM: &str = "upstream";
    pub const NOT_IMPLEMENTED: &str = "not_implemented";
    pub const PANIC: &str = "panic";
    pub const SHUT_DOWN: &str = "shut_down";
    pub const INTERNAL: &str = "internal";
}

/// What the host hands the module at creation.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct ModuleConfig {
    /// The effective gateway configuration (appsettings.json with environment overrides applied)
    /// as a JSON object. The module reads its own sections (`McpApps`, `McpCompatibility`, …).
    pub config_json: RString,
    /// The folder relative paths of the configuration resolve against.
    pub config_dir: RString,
    /// A folder the module may write state into.
    pub data_dir: RString,
    /// The gateway's version, for manifests' `minHostVersion`.
    pub host_version: RString,
    /// Anything added later, as a JSON object.
    pub extra_json: RString,
}

/// One app as the registry sees it.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct AppDescriptor {
    pub id: RString,
    pub name: RString,
    pub version: RString,
    /// `discovered`, `validated`, `loaded`, `running`, `stopped`, `failed` or `disabled`.
    pub state: RString,
    /// `stdio` or `http`.
    pub transport: RString,
    pub manifest_path: RString,
    pub tool_count: u32,
    pub resource_count: u32,
    pub resource_template_count: u32,
    pub prompt_count: u32,
    pub has_ui: bool,
    pub ui_resource_uri: RString,
    pub tool_name_prefix: RString,
    /// Empty when none.
    pub last_error: RString,
    pub validation_errors: RVec<RString>,
    /// Everything else (effective settings, transition times, description…) as a JSON object.
    pub detail_json: RString,
}

/// One tool an app offers, as seen by the tool bridge.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct ToolDescriptor {
    /// `mcpapp:{appId}`.
    pub provider_id: RString,
    pub app_id: RString,
    /// The app's own name for the tool (what `/apps/mcp/{appId}` speaks).
    pub name: RString,
    /// `toolNamePrefix + name` (what the model sees).
    pub qualified_name: RString,
    pub description: RString,
    /// The tool's JSON input schema, always a JSON object schema.
    pub input_schema_json: RString,
    /// Empty when the tool declares none.
    pub output_schema_json: RString,
    /// The tool's `_meta` as JSON, `{}` when absent.
    pub meta_json: RString,
    /// `_meta.ui.visibility` contains `model` (or is absent).
    pub visible_to_model: bool,
    /// `_meta.ui.visibility` contains `app` (or is absent).
    pub visible_to_app: bool,
    /// The UI this tool is linked to; empty when none.
    pub ui_resource_uri: RString,
    /// Anything added later (annotations, title…), as a JSON object.
    pub extra_json: RString,
}

/// A model-side tool call.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct ToolCallRequest {
    /// Chosen by the host, unique among its calls in flight; used by [`ModuleInstance::cancel`].
    pub call_id: u64,
    pub app_id: RString,
    /// The app's own (unprefixed) tool name.
    pub tool_name: RString,
    /// The arguments as the model produced them. Not trusted to be valid JSON.
    pub arguments_json: RString,
    /// `_meta` to send with the call as a JSON object, or empty.
    pub meta_json: RString,
    pub extra_json: RString,
}

/// A model-side tool result (SPEC R20).
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct ToolCallOutcome {
    pub is_error: bool,
    /// The text for the model. Starts with `Error:` when the call failed in any way.
    pub text: RString,
    /// `structuredContent` as JSON for the model; empty when absent or withheld (UI-linked tools).
    pub structured_content_json: RString,
    /// The UI resource this result can be rendered with; empty when none.
    pub ui_resource_uri: RString,
    /// The complete MCP `CallToolResult` as the app sent it (for the browser); empty on failure
    /// before a result existed.
    pub raw_result_json: RString,
    pub extra_json: RString,
}

/// A raw MCP JSON-RPC message from a browser, to be forwarded to one app's upstream session.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct ForwardRequest {
    pub call_id: u64,
    pub app_id: RString,
    /// One JSON-RPC request or notification, as received.
    pub message_json: RString,
    /// The browser's `?sessionId=`, empty when none.
    pub session_id: RString,
    pub extra_json: RString,
}

/// The answer to a [`ForwardRequest`].
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct ForwardResponse {
    /// One JSON-RPC response (result or error); empty for a notification.
    pub message_json: RString,
    pub extra_json: RString,
}

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
}

/// Implemented by the host, called by the module from any of its threads. Must not block.
#[sabi_trait]
pub trait HostSink: Send + Sync {
    /// Whether the host would record an event of this level and target (lets the module skip
    /// formatting what would be dropped).
    fn log_enabled(&self, level: LogLevel, target: RStr<'_>) -> bool;

    fn log(&self, record: LogRecord);

    #[sabi(last_prefix_field)]
    fn event(&self, event: ModuleEvent);
}

/// A created module: the registry of MCP Apps and its tool bridge.
#[sabi_trait]
pub trait ModuleInstance: Send + Sync {
    fn info(&self) -> ModuleInfo;

    /// Scans the discovery paths and reports what would be found (apps, states, errors) as JSON,
    /// without starting or stopping anything.
    fn discover(&self) -> AbiFuture<RString>;

    /// Every app known to the registry, in discovery order.
    fn list_apps(&self) -> AbiFuture<RVec<AppDescriptor>>;

    /// Starts (or restarts) one app, clearing a crash-loop hold.
    fn start_app(&self, app_id: RString) -> AbiFuture<AppDescriptor>;

    fn stop_app(&self, app_id: RString) -> AbiFuture<AppDescriptor>;

    /// Re-runs discovery: starts new apps, stops removed ones, restarts changed ones. Returns a JSON
    /// report `{"started":[…],"stopped":[…],"restarted":[…],"unchanged":[…]}`.
    fn reload(&self) -> AbiFuture<RString>;

    /// The tools of every Running app (model-visible and app-only alike).
    fn list_tools(&self) -> AbiFuture<RVec<ToolDescriptor>>;

    /// A model-side tool call. Failures come back as an outcome whose text starts with `Error:`,
    /// not as an `AbiError`, except for boundary-level failures.
    fn call_tool(&self, request: ToolCallRequest) -> AbiFuture<ToolCallOutcome>;

    /// Forwards one raw MCP JSON-RPC message to an app's upstream session.
    fn forward(&self, request: ForwardRequest) -> AbiFuture<ForwardResponse>;

    /// Cancels a call in flight by its `call_id`. Returns whether such a call was found.
    fn cancel(&self, call_id: u64) -> bool;

    /// Named operations beyond the ones above, so later needs do not change this layout. Unknown
    /// methods answer [`error_code::NOT_IMPLEMENTED`].
    fn invoke(&self, method: RString, params_json: RString) -> AbiFuture<RString>;

    /// Stops every app and the module's runtime. Libraries are never unloaded, so this is the only
    /// way to release a module's threads and children.
    #[sabi(last_prefix_field)]
    fn shutdown(&self) -> AbiFuture<()>;
}

/// The root module a module library exports.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = McpAppModule_Ref)))]
#[sabi(missing_field(panic))]
pub struct McpAppModule {
    /// The module's identity; callable before `create`.
    pub info: extern "C" fn() -> ModuleInfo,

    /// Creates the module's runtime and registry from the configuration. Starts nothing yet: the
    /// host calls `reload` (or `start_app`) when it is ready to receive events.
    #[sabi(last_prefix_field)]
    pub create: extern "C" fn(config: ModuleConfig, host: HostSinkBox) -> AbiResult<ModuleInstanceBox>,
}

impl RootModule for McpAppModule_Ref {
    declare_root_module_statics! {McpAppModule_Ref}
    const BASE_NAME: &'static str = "mcpapp_plugin";
    const NAME: &'static str = "mcpapp_plugin";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}
