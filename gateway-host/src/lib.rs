//! `gateway-host`: the MCP App gateway, as a library.
//!
//! The gateway is a program (`src/main.rs`: the command line). Its modules form this library so
//! that the binary and the fuzz targets (`fuzz/`) use the same code: [`fuzzing`] names what the
//! targets drive. Nothing here is an API for other crates; see ARCHITECTURE.md for the map.

// The commands `main` runs.
#[doc(hidden)]
pub mod boundary_check;
#[doc(hidden)]
pub mod commands;
#[doc(hidden)]
pub mod config;
#[doc(hidden)]
pub mod init;
#[doc(hidden)]
pub mod logging;
pub mod memory;
#[doc(hidden)]
pub mod serve;

mod chat;
mod http;
mod install;
mod module;
mod metrics;
mod parse_count;
mod tools;
#[cfg(test)]
mod test_support;

/// How a tool result reads for the model (the one place that shapes it), for the module-level
/// test suites, which call the module as the gateway does and must read its answers as the
/// gateway's model would.
pub use tools::model_view;

/// The error of the gateway's commands and startup: anything with a message.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the fuzz targets (`fuzz/fuzz_targets`) drive: the gateway's readers of untrusted input
/// (HTTP bodies, headers, query strings, the configuration and the environment), the very
/// functions the routes and startup call.
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::chat::agent::{user_content, AppEvent, TurnRequest};
    pub use crate::chat::provider::{read_completion, read_whole_completion, AgentConfig, Completion, ProviderError, MAX_STREAM_BYTES, MAX_TOOL_CALLS};
    pub use crate::chat::store::title_of;
    pub use crate::config::config_keys::{unknown_keys, UnknownKey};
    pub use crate::config::env_overrides::apply_env_overrides;
    pub use crate::config::gateway_config::{data_dir, module_config, module_path, parse_urls, DEFAULT_URLS};
    pub use crate::http::auth::{
        bearer, cookies, host_part, is_loopback_name, is_loopback_origin, query_param, AuthPolicy, BrowserRefusal, Credential,
        RequestHead, SESSION_COOKIE,
    };
    pub use crate::http::chat::{input_answer, turn_request};
    pub use crate::http::connections::ConnectionLimits;
    pub use crate::http::front_door::McpEntry;
    pub use crate::http::mcp::answer::{read_result_reply, read_result_reply_as_rmcp};
    pub use crate::http::mcp::endpoint_config::Compatibility;
    pub use crate::http::mcp::jsonrpc_gate::{params_problem, BodyLimit, Gated};
    pub use crate::http::mcp::namespacing::{rewrite_result_uris, rewrite_ui_meta};
    pub use crate::http::mcp::namespacing::{restore_uri, rewrite_uri, uri_key, Cursor};
    pub use crate::http::mcp::pass_through::{eligible, Eligible};
    pub use crate::http::sandbox::{listen_addrs, SandboxSite};
    pub use crate::logging::{setup as log_setup, Mode as LogMode};
    pub use crate::config::settings::Settings;
    pub use crate::tools::preference::Preference;
    pub use crate::config::workspace::{
        check_definition as check_workspace_definition, to_config_entry as workspace_server_entry, FieldProblem, ServerDefinition,
    };
}
