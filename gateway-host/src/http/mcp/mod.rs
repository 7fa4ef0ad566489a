//! The two MCP endpoints: `/apps/mcp/{appId}` ([`apps_mcp`], R32: one app, for its UI) and `/mcp`
//! ([`gateway_mcp`], R39: the registry's tools, with [`multiplex`] (R46) serving every app's and
//! server's resources, prompts and completions under [`namespacing`]'s names).
//!
//! [`endpoints`] takes a request for either by its path, ahead of the router. It passes
//! [`jsonrpc_gate`] (one parse, strict JSON-RPC), then either the short way ([`pass_through`]: a
//! plain `tools/call` or `resources/read` relayed as it is) or rmcp's Streamable HTTP server.
//! [`mcp_relay`] carries what an app does during a call back to its client; [`mcp_tasks`] runs
//! calls as MCP Tasks; [`known_sessions`] and [`mcp_sessions`] keep the initialize-era sessions;
//! [`resource_holds`] keeps resource subscriptions.

pub(crate) mod answer;
pub mod apps_mcp;
pub mod endpoint_config;
pub mod endpoints;
pub mod gateway_mcp;
pub(crate) mod jsonrpc_gate;
mod known_sessions;
mod mcp_relay;
pub(crate) mod mcp_sessions;
mod mcp_tasks;
pub(crate) mod multiplex;
pub(crate) mod namespacing;
pub(crate) mod pass_through;
pub(crate) mod resource_holds;
