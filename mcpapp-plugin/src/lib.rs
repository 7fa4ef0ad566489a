//! The MCP App module: a stable-ABI library the gateway loads at startup.
//!
//! Data flow inside the module: configuration → [`discovery`] (manifests, [`policy`], overrides)
//! → [`install_state`] per app → [`registry`] (lifecycle, supervision, reload) → [`app_server`]
//! (one upstream MCP session per app) → [`tool_bridge`] (model-side results) and forwarding of raw
//! JSON-RPC for the browser. [`instance`] adapts all of it to the `host-abi` interface, and
//! [`runtime`], [`containment`] and [`logging`] keep the boundary's rules.

// Every task starts through `runtime::Tasks::spawn` (clippy.toml lists the bare spawns).
#![deny(clippy::disallowed_methods)]

use std::sync::Arc;

use abi_stable::{export_root_module, prefix_type::PrefixTypeTrait, sabi_extern_fn};
use host_abi::{
    error_code, AbiError, AbiResult, HostSinkBox, McpAppModule, McpAppModule_Ref, ModuleConfig, ModuleInfo,
    ModuleInstanceBox, RResult,
};

pub mod app_server;
pub mod calls;
pub mod catalog;
pub mod config;
pub mod containment;
pub mod discovery;
pub mod events;
pub mod faults;
pub mod forward;
pub mod install_state;
pub mod instance;
pub mod logging;
pub mod manifest;
pub mod mcp_servers;
pub mod policy;
pub mod process;
pub mod registry;
pub mod ordering;
pub mod relay;
pub mod runtime;
pub mod subscriptions;
pub mod tool_bridge;
pub mod upstream;
pub mod validate;
pub mod watcher;

pub const MODULE_NAME: &str = env!("CARGO_PKG_NAME");
pub const MODULE_VERSION: &str = env!("CARGO_PKG_VERSION");

#[export_root_module]
pub fn get_library() -> McpAppModule_Ref {
    McpAppModule { info, create }.leak_into_prefix()
}

/// The module's identity as compiled.
pub fn module_info() -> ModuleInfo {
    ModuleInfo {
        name: MODULE_NAME.into(),
        version: MODULE_VERSION.into(),
        abi_version: host_abi::ABI_VERSION,
        interface_version: host_abi::INTERFACE_VERSION.into(),
        extra_json: serde_json::json!({ "faultInjection": cfg!(feature = "fault-injection") })
            .to_string()
            .into(),
    }
}

#[sabi_extern_fn]
fn info() -> ModuleInfo {
    containment::contain("reading module info", module_info, |_| module_info())
}

#[sabi_extern_fn]
fn create(config: ModuleConfig, host: HostSinkBox) -> AbiResult<ModuleInstanceBox> {
    containment::contain(
        "creating the module",
        || {
            let host = Arc::new(host);
            logging::install(host.clone());
            instance::Instance::create(config, host).map(instance::Instance::into_abi).into()
        },
        RResult::RErr,
    )
}

/// Parses the host's configuration JSON, naming the problem for the host's error message.
pub(crate) fn parse_config_json(text: &str) -> Result<serde_json::Value, AbiError> {
    serde_json::from_str(text)
        .map_err(|e| AbiError::new(error_code::INVALID_CONFIG, format!("the configuration passed to the module is not JSON: {e}")))
}
