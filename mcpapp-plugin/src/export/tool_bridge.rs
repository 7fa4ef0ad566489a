//! App tools as agent tools (the seed's McpAppNativeTool, SPEC R20).
//!
//! Model-side names are `toolNamePrefix + name`; a name already taken by an app earlier in
//! discovery order is refused for the later app with a log line. Results are shaped for a model:
//! text first, `Error:` on any failure, `structuredContent` withheld for UI-linked tools (the raw
//! result still travels for the browser).

use std::collections::HashSet;
use std::sync::Arc;

use host_abi::{ToolCallOutcome, ToolDescriptor};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::apps::install_state::AppState;
use crate::upstream::app_server::{AppKind, AppServer, CallError};
use crate::upstream::relay::CallRelay;

/// The provider id of an app's tools in the host's registry: `mcpapp:{appId}` for MCP Apps; a
/// standard server's registry key is already `mcp:{serverId}`.
pub fn provider_id(app: &AppServer) -> String {
    match app.kind {
        AppKind::App => format!("mcpapp:{}", app.key),
        AppKind::McpServer => app.key.clone(),
    }
}

/// The tools of every Running app, clashes resolved in favour of the earlier app of the same kind
/// (MCP Apps among themselves, standard servers among themselves). Equal names across kinds are
/// left for the host's preference order to choose between.
/// `reported` remembers clashes already logged so each is logged once.
pub fn descriptors(apps: &[Arc<AppServer>], reported: &Mutex<HashSet<String>>) -> Vec<ToolDescriptor> {
    let mut taken: std::collections::HashMap<(String, &'static str), String> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for app in apps {
        if app.state() != AppState::Running {
            continue;
        }
        let Some(catalog) = app.catalog() else { continue };
        let prefix = app.install_state().manifest.and_then(|m| m.tool_name_prefix).unwrap_or_default();
        for tool in &catalog.tools {
            let qualified = format!("{prefix}{}", tool.name);
            let slot = (qualified.clone(), app.kind.as_str());
            if let Some(owner) = taken.get(&slot) {
                let key = format!("{}/{qualified}", app.key);
                if reported.lock().insert(key) {
                    tracing::warn!(
                        app = %app.key,
                        tool = %qualified,
                        "Tool name '{qualified}' of McpApp '{}' clashes with McpApp '{owner}'; refusing it for '{}' (set a toolNamePrefix)",
                        app.key,
                        app.key
                    );
                }
                continue;
            }
            taken.insert(slot, app.key.clone());
            let mut extra = serde_json::Map::new();
            for key in ["title", "annotations", "icons", "execution"] {
                if let Some(v) = tool.raw.get(key) {
                    extra.insert(key.to_string(), v.clone());
                }
            }
            out.push(ToolDescriptor {
                provider_id: provider_id(app).into(),
                app_id: app.key.as_str().into(),
                name: tool.name.as_str().into(),
                qualified_name: qualified.into(),
                description: tool.description.as_str().into(),
                input_schema_json: tool.input_schema().to_string().into(),
                output_schema_json: tool.output_schema().map(Value::to_string).unwrap_or_default().into(),
                meta_json: tool.meta().to_string().into(),
                visible_to_model: tool.visible_to_model,
                visible_to_app: tool.visible_to_app,
                ui_resource_uri: tool.ui_resource_uri.clone().unwrap_or_default().into(),
                extra_json: Value::Object(extra).to_string().into(),
            });
        }
    }
    out
}

fn error_outcome(message: impl std::fmt::Display) -> ToolCallOutcome {
    ToolCallOutcome {
        is_error: true,
        text: format!("Error: {message}").into(),
        structured_content_json: "".into(),
        ui_resource_uri: "".into(),
        raw_result_json: "".into(),
        extra_json: "{}".into(),
    }
}

/// Parses model-produced arguments: empty means `{}`; anything else must be a JSON object.
pub fn parse_arguments(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(json!({}));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(Value::Object(map)),
        Ok(Value::Null) => Ok(json!({})),
        Ok(other) => Err(format!("arguments must be a JSON object, got {}", crate::apps::manifest::json_type_name(&other))),
        Err(e) => Err(format!("arguments are not valid JSON: {e}")),
    }
}

/// Calls one tool of one app for the model.
pub async fn call(
    app: &AppServer,
    tool_name: &str,
    arguments_json: &str,
    meta_json: &str,
    cancel: &CancellationToken,
    relay: Option<&CallRelay>,
) -> ToolCallOutcome {
    let arguments = match parse_arguments(arguments_json) {
        Ok(a) => a,
        Err(e) => return error_outcome(format!("invalid arguments for tool '{tool_name}': {e}")),
    };
    let Some(catalog) = app.catalog() else {
        return error_outcome(CallError::NotRunning { app: app.key.clone(), state: app.state() });
    };
    let Some(tool) = catalog.tool(tool_name) else {
        return error_outcome(format!("McpApp '{}' has no tool '{tool_name}'", app.key));
    };
    let mut params = json!({ "name": tool_name, "arguments": arguments });
    if let Ok(meta @ Value::Object(_)) = serde_json::from_str::<Value>(meta_json) {
        params["_meta"] = meta;
    }
    let result = match app.request("tools/call", Some(params), cancel, relay).await {
        Ok(r) => r,
        Err(e) => return error_outcome(e),
    };
    shape_result(&result, tool.ui_resource_uri.as_deref())
}

/// Turns a raw `CallToolResult` into the model's view.
pub fn shape_result(result: &Value, ui_resource_uri: Option<&str>) -> ToolCallOutcome {
    let is_error = result.get("isError").and_then(Value::as_bool).unwrap_or(false);
    let text = content_text(result.get("content"));
    let structured = result.get("structuredContent").filter(|v| !v.is_null());
    let text = match (is_error, text.is_empty(), structured) {
        (true, true, _) => "Error: the tool reported an error without a message".to_string(),
        (true, false, _) if text.starts_with("Error:") => text,
        (true, false, _) => format!("Error: {text}"),
        // A result with only structured content still gives the model something to read.
        (false, true, Some(s)) if ui_resource_uri.is_none() => s.to_string(),
        (false, _, _) => text,
    };
    let structured_for_model = match (ui_resource_uri, structured) {
        (None, Some(s)) => s.to_string(),
        _ => String::new(),
    };
    ToolCallOutcome {
        is_error,
        text: text.into(),
        structured_content_json: structured_for_model.into(),
        ui_resource_uri: ui_resource_uri.unwrap_or_default().into(),
        raw_result_json: result.to_string().into(),
        extra_json: "{}".into(),
    }
}

/// The text parts of MCP content, one per line; other parts described briefly.
fn content_text(content: Option<&Value>) -> String {
    let Some(items) = content.and_then(Value::as_array) else { return String::new() };
    let mut parts = Vec::new();
    for item in items {
        match item.get("type").and_then(Value::as_str) {
            Some("text") => parts.push(item.get("text").and_then(Value::as_str).unwrap_or_default().to_string()),
            Some("resource") => {
                let res = item.get("resource");
                match res.and_then(|r| r.get("text")).and_then(Value::as_str) {
                    Some(t) => parts.push(t.to_string()),
                    None => parts.push(format!(
                        "[resource {}]",
                        res.and_then(|r| r.get("uri")).and_then(Value::as_str).unwrap_or("?")
                    )),
                }
            }
            Some("resource_link") => parts.push(format!(
                "[resource link {}]",
                item.get("uri").and_then(Value::as_str).unwrap_or("?")
            )),
            Some(kind @ ("image" | "audio")) => parts.push(format!(
                "[{kind} {}]",
                item.get("mimeType").and_then(Value::as_str).unwrap_or("")
            )),
            _ => {}
        }
    }
    parts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_must_be_an_object() {
        assert_eq!(parse_arguments("").unwrap(), json!({}));
        assert!(parse_arguments("{").unwrap_err().contains("not valid JSON"));
        assert!(parse_arguments("[1]").unwrap_err().contains("an array"));
    }

    #[test]
    fn structured_content_is_withheld_for_ui_tools() {
        let result = json!({"content": [{"type": "text", "text": "ok"}], "structuredContent": {"a": 1}});
        let plain = shape_result(&result, None);
        assert_eq!(plain.structured_content_json.as_str(), r#"{"a":1}"#);
        let ui = shape_result(&result, Some("ui://x"));
        assert!(ui.structured_content_json.is_empty());
        assert_eq!(ui.ui_resource_uri.as_str(), "ui://x");
        assert!(ui.raw_result_json.contains("structuredContent"));
        let err = shape_result(&json!({"isError": true, "content": [{"type": "text", "text": "bad store"}]}), None);
        assert!(err.is_error && err.text.starts_with("Error: bad store"));
    }
}
