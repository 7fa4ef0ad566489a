//! A workspace MCP server definition as `POST /admin/workspace/mcp` reads it (gateway-host
//! `workspace.rs`, through `gateway_host::fuzzing`): the body's `id`, the definition read field by
//! field, then the definition's rules.
//!
//! What must hold: no panic; a refusal names a field; and a definition the host accepts is one
//! the module's own rules accept too — handed to the module the way the workspace hands it
//! (`Plugins.Mcp.Servers.{id}` in PascalCase), mcpapp-plugin's reading of `Plugins.Mcp` gives a
//! Validated server (or none, when the definition is disabled), never a Failed one. That is the
//! promise of the route: no 201 for a server that can never run.
#![no_main]

use std::path::Path;

use gateway_host::fuzzing::{check_workspace_definition, workspace_server_entry, ServerDefinition};
use libfuzzer_sys::fuzz_target;
use mcpapp_plugin::apps::install_state::AppState;
use serde_json::{json, Value};

fuzz_target!(|data: &[u8]| {
    let Ok(Value::Object(mut body)) = serde_json::from_slice::<Value>(data) else { return };
    // The route's own first rule: the id is a string (a 400 naming `id` otherwise).
    let Some(Value::String(id)) = body.remove("id") else { return };
    let definition = match ServerDefinition::from_json(&Value::Object(body)) {
        Ok(definition) => definition,
        Err(problem) => return assert!(!problem.field.is_empty(), "a refusal names no field: {problem}"),
    };
    if let Err(problem) = check_workspace_definition(&id, &definition) {
        return assert!(!problem.field.is_empty(), "a refusal names no field: {problem}");
    }
    let root = json!({ "Plugins": { "Mcp": { "Servers": { id.as_str(): workspace_server_entry(&definition) } } } });
    let installs = mcpapp_plugin::apps::mcp_servers::installs(&root, Path::new("/fuzz/config"));
    if !definition.enabled {
        return assert!(installs.is_empty(), "a disabled server was read: {root}");
    }
    assert_eq!(installs.len(), 1, "{root}");
    assert_eq!(
        installs[0].state,
        AppState::Validated,
        "the host accepted what the module refuses: {root}\n{:?}",
        installs[0].validation_errors
    );
});
