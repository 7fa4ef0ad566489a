//! The gateway's configuration: [`settings`] (appsettings.json) with [`env_overrides`] (`A__B__C`),
//! [`gateway_config`] (version, module path and configuration, data folder, listen URLs),
//! [`config_keys`] (every key the gateway knows; one warning per unknown one) and [`workspace`]
//! (R40: the configuration the module's apps come from, and the workspace's MCP servers).

pub mod config_keys;
pub mod env_overrides;
pub mod gateway_config;
pub mod settings;
pub mod workspace;
