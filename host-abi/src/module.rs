//! The module's side of the boundary: the root module a library exports, its identity and
//! configuration, and the instance the host drives.

use abi_stable::{
    declare_root_module_statics,
    library::RootModule,
    sabi_trait,
    sabi_types::VersionStrings,
    std_types::{RBox, RString, RVec},
    StableAbi,
};

use crate::{
    AbiFuture, AbiResult, AppAnswer, AppDescriptor, AppRequest, HostSinkBox, ToolCallOutcome, ToolCallRequest,
    ToolDescriptor, INTERFACE_VERSION,
};

/// A module instance as a trait object owned by the host.
pub type ModuleInstanceBox = ModuleInstance_TO<'static, RBox<()>>;

/// Identity of a module library, readable without creating an instance.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct ModuleInfo {
    /// The module crate's name, e.g. `mcpapp-plugin`.
    pub name: RString,
    /// The module crate's version, e.g. `0.1.0`.
    pub version: RString,
    /// [`ABI_VERSION`](crate::ABI_VERSION) as the module was compiled.
    pub abi_version: u32,
    /// [`INTERFACE_VERSION`] as the module was compiled (its ABI `MAJOR.MINOR`, and patch).
    pub interface_version: RString,
    /// A [`ModuleInfoExtra`](crate::ModuleInfoExtra) as a JSON object: the module's capabilities, and anything added later.
    pub extra_json: RString,
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
    /// A [`ModuleConfigExtra`](crate::ModuleConfigExtra) as a JSON object: the host's interface version and capabilities,
    /// and anything added later.
    pub extra_json: RString,
}

/// A created module: the registry of MCP Apps and its tool bridge.
#[sabi_trait]
pub trait ModuleInstance: Send + Sync {
    fn info(&self) -> ModuleInfo;

    /// Scans the discovery paths and reports what would be found (apps, states, errors) as JSON,
    /// without starting or stopping anything. Indented or not: `gateway-host apps --json` prints
    /// text in `serde_json`'s pretty form as it is (this repository's module writes it so) and
    /// indents any other.
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

    /// A model-side tool call, as 2.0 hosts make it. Failures come back as an outcome whose text
    /// starts with `Error:`, not as an `AbiError`, except for boundary-level failures. Hosts since
    /// 2.0's gateway call tools for a model through [`forward`](Self::forward) (a `tools/call` with
    /// [`AppRequest::any_provider`](crate::AppRequest::any_provider)), one way for every call; a
    /// module answers this as that request.
    fn call_tool(&self, request: ToolCallRequest) -> AbiFuture<ToolCallOutcome>;

    /// Passes a client's request to an app's upstream session: the app's result, or a JSON-RPC
    /// error for the client.
    fn forward(&self, request: AppRequest) -> AbiFuture<AppAnswer>;

    /// Cancels a call in flight by its `call_id`. Returns whether such a call was found.
    fn cancel(&self, call_id: u64) -> bool;

    /// Named operations beyond the ones above, so later needs do not change this layout. Unknown
    /// methods answer [`ErrorCode::NotImplemented`](crate::ErrorCode::NotImplemented).
    fn invoke(&self, method: RString, params_json: RString) -> AbiFuture<RString>;

    /// Stops every app and the module's runtime. Libraries are never unloaded, so this is the only
    /// way to release a module's threads and children.
    #[sabi(last_prefix_field)]
    fn shutdown(&self) -> AbiFuture<()>;
    // Minor versions append methods here, each with a default body answering `not_implemented`
    // (run when the module's vtable lacks the method), called only when the module lists it in
    // `ModuleInfoExtra::capabilities`.
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
    // Minor versions append fields here, each with `#[sabi(missing_field(option))]`.
}

impl RootModule for McpAppModule_Ref {
    declare_root_module_statics! {McpAppModule_Ref}
    const BASE_NAME: &'static str = "mcpapp_plugin";
    const NAME: &'static str = "mcpapp_plugin";
    const VERSION_STRINGS: VersionStrings = VersionStrings::new(INTERFACE_VERSION);
}
