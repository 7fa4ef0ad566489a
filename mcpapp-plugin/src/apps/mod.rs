//! The apps the configuration names, before any of them runs: [`manifest`] (R10) and [`config`]
//! (R11, R14) are read, [`discovery`] (R12) finds the manifests, [`policy`] (R13) filters them,
//! [`install_state`] (R15) is each app's lifecycle, [`app_server`] (R16, R17) connects, supervises
//! and stops one app over its upstream session, [`mcp_servers`] (R30) adds the standard MCP
//! servers, and [`registry`] (R21) keeps the running set in step with the disk ([`watcher`]).
//! [`validate`] checks manifests for the `validate` command (R41). [`permissions`] (R48) is what an
//! app declares it needs, and [`sandbox`] turns it into the confinement its process gets.

pub mod app_server;
pub mod config;
pub mod discovery;
pub mod install_state;
pub mod json_values;
pub mod manifest;
pub mod mcp_servers;
pub mod permissions;
pub mod policy;
pub mod registry;
pub mod sandbox;
pub mod validate;
pub mod watcher;
