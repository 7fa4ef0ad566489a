//! The MCP App module: a stable-ABI library the gateway loads at startup.
//!
//! The source is grouped in four layers, each importing only the ones below it
//! (`tests/layers.rs` checks it):
//! - [`export`]: what the host calls ([`export::instance`] adapts the `host-abi` interface;
//!   [`export::forward`] passes a client's request to an app, [`export::tool_bridge`] a model's
//!   tool call);
//! - [`apps`]: configuration → [`apps::discovery`] (manifests, [`apps::policy`], overrides) →
//!   [`apps::install_state`] per app → [`apps::app_server`] (one app's life over its upstream
//!   session) → [`apps::registry`] (lifecycle, supervision, reload);
//! - [`upstream`]: the wire to an app (process, session, catalog, relay);
//! - [`runtime`]: the ground ([`runtime::executor`], the module's tokio runtime and its one
//!   spawn; [`runtime::containment`], [`runtime::logging`], [`runtime::events`]).

// Every task starts through `runtime::executor::Tasks::spawn` (clippy.toml lists the bare spawns).
#![deny(clippy::disallowed_methods)]

use std::sync::Arc;

use abi_stable::{export_root_module, prefix_type::PrefixTypeTrait, sabi_extern_fn};
use host_abi::{
    ErrorCode, AbiError, AbiResult, HostSinkBox, McpAppModule, McpAppModule_Ref, ModuleConfig, ModuleInfo,
    ModuleInstanceBox, RResult,
};

pub mod apps;
pub mod export;
pub mod runtime;
pub mod upstream;

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
    runtime::containment::contain("reading module info", module_info, |_| module_info())
}

#[sabi_extern_fn]
fn create(config: ModuleConfig, host: HostSinkBox) -> AbiResult<ModuleInstanceBox> {
    runtime::containment::contain(
        "creating the module",
        || {
            let host = Arc::new(host);
            runtime::logging::install(host.clone());
            export::instance::Instance::create(config, host).map(export::instance::Instance::into_abi).into()
        },
        RResult::RErr,
    )
}

/// Parses the host's configuration JSON, naming the problem for the host's error message.
pub(crate) fn parse_config_json(text: &str) -> Result<serde_json::Value, AbiError> {
    serde_json::from_str(text)
        .map_err(|e| AbiError::new(ErrorCode::InvalidConfig, format!("the configuration passed to the module is not JSON: {e}")))
}
