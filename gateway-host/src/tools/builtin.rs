//! The gateway's own tools (provider `builtin:gateway`).

use serde_json::{json, Value};

use super::{ToolResult, ToolSpec};
use crate::module::host::ModuleHost;

pub const PROVIDER_ID: &str = "builtin:gateway";

/// Tools implemented by the gateway itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    /// `gateway.apps`: the MCP Apps and standard MCP servers with their states.
    Apps,
}

pub fn specs() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: "gateway.apps".into(),
        description: "List the MCP Apps and MCP servers this gateway hosts, with their state (running, failed, …), \
                      tool counts and last error."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "state": { "type": "string", "description": "Only apps in this state (e.g. running, failed)." }
            },
            "additionalProperties": false
        }),
        output_schema: None,
        meta: json!({}),
        visible_to_model: true,
        visible_to_app: false,
        ui_resource_uri: None,
        extra: json!({ "title": "Gateway apps", "annotations": { "readOnlyHint": true, "openWorldHint": false } }),
        provider_id: PROVIDER_ID.into(),
        source: super::ToolSource::Builtin(Builtin::Apps),
    }]
}

pub async fn call(builtin: Builtin, module: &ModuleHost, args: &Value) -> ToolResult {
    match builtin {
        Builtin::Apps => {
            let wanted = args.get("state").and_then(Value::as_str).map(str::to_ascii_lowercase);
            let apps = match module.list_apps().await {
                Ok(apps) => apps,
                Err(e) => return ToolResult::error(format!("cannot list apps: {e}")),
            };
            let apps: Vec<Value> = apps
                .iter()
                .filter(|a| wanted.as_deref().is_none_or(|w| a.state().as_str() == w))
                .map(crate::module::host::app_json)
                .collect();
            let text = if apps.is_empty() {
                "No apps.".to_string()
            } else {
                apps.iter()
                    .map(|a| format!("{} ({}): {}, {} tools", a["id"].as_str().unwrap_or(""), a["version"].as_str().unwrap_or(""), a["state"].as_str().unwrap_or(""), a["tools"]))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            ToolResult { is_error: false, text, structured: Some(json!({ "apps": apps })), ui_resource_uri: None, raw: None }
        }
    }
}
