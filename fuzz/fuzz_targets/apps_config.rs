//! The module's reading of the configuration document: the `McpApps` section (discovery paths,
//! allow/deny globs, per-app entries), `McpCompatibility` and `Plugins.Mcp` (standard servers) —
//! any JSON gives settings or errors naming keys, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpapp_plugin::apps::config::{McpAppsConfig, McpCompatibility};

fuzz_target!(|data: &[u8]| {
    let Ok(root) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let dir = std::path::Path::new("/fuzz/config");
    let config = McpAppsConfig::from_config(&root, dir);
    let _ = McpCompatibility::from_config(&root);
    let _ = mcpapp_plugin::apps::policy::AppPolicy::from_config(&config).decide("some-app", None);
    let _ = mcpapp_plugin::apps::mcp_servers::installs(&root, dir);
});
