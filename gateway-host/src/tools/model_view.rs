//! A tool result as a model reads it (SPEC R20, R34, R39) — made here and nowhere else.
//!
//! The module hands over the app's `CallToolResult` as the app sent it, and what only the
//! module knows (the UI the tool is linked to); the host is where the model is, so the host
//! shapes it: text first, a short note for each block that is no text, `Error:` before the text
//! of any failure, `structuredContent` withheld from the model for a UI-linked tool (the browser
//! and clients that render app UIs still get it, from the raw result). The chat agent feeds
//! [`ToolResult::text`] to its model; `/mcp` gives its clients [`ToolResult::for_mcp_client`].

use host_abi::{jsonrpc, AppAnswer, RpcError};
use serde_json::{json, Value};

use crate::parse_count::{self, Direction};

/// A tool result for the model (SPEC R20).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub is_error: bool,
    /// What the model reads; starts with `Error:` when the call failed.
    pub text: String,
    /// Structured content for the model; `None` when absent or withheld (UI-linked tools).
    pub structured: Option<Value>,
    /// The UI this result renders with (for the browser).
    pub ui_resource_uri: Option<String>,
    /// The app's complete result (for the browser); `None` when the call got no result.
    pub raw: Option<Value>,
}

/// What the model reads of a failed result that says nothing.
const NO_MESSAGE: &str = "Error: the tool reported an error without a message";

impl ToolResult {
    /// A call that got no result (or a result the gateway made itself): `Error: {message}`.
    pub fn error(message: impl std::fmt::Display) -> ToolResult {
        ToolResult { is_error: true, text: with_error_prefix(message.to_string()), structured: None, ui_resource_uri: None, raw: None }
    }

    /// The model's view of an app's `CallToolResult` of a tool linked to `ui_resource_uri`.
    pub fn of_app(raw: Value, ui_resource_uri: Option<String>) -> ToolResult {
        let is_error = raw["isError"] == true;
        let text = content_text(&raw["content"]);
        let structured = raw.get("structuredContent").filter(|v| !v.is_null());
        let ui_linked = ui_resource_uri.is_some();
        let text = match (is_error, text.is_empty(), structured) {
            (true, true, _) => NO_MESSAGE.to_string(),
            (true, false, _) => with_error_prefix(text),
            // A result with only structured content still gives the model something to read.
            (false, true, Some(s)) if !ui_linked => s.to_string(),
            (false, _, _) => text,
        };
        let structured = structured.filter(|_| !ui_linked).cloned();
        ToolResult { is_error, text, structured, ui_resource_uri, raw: Some(raw) }
    }

    /// What the module answered for a call of `app_id`'s tool linked to `ui_resource_uri`: the
    /// app's result (its text parsed here, once, counted as the answer's parse on this side of
    /// the boundary), or why there is none.
    pub fn of_answer(app_id: &str, answer: AppAnswer, ui_resource_uri: Option<String>) -> ToolResult {
        match answer {
            AppAnswer::Result(text) => match parse_count::parsed::<Value>(Direction::Answer, &text) {
                Ok(raw @ Value::Object(_)) => ToolResult::of_app(raw, ui_resource_uri),
                Ok(_) | Err(_) => ToolResult::error(format!("McpApp '{app_id}' answered with a tool result that is no JSON object")),
            },
            AppAnswer::Error(e) => ToolResult::error(failure(app_id, &e)),
        }
    }

    /// The result as an MCP client of `/mcp` gets it, before `/mcp` names its URIs: the app's
    /// result with every block, `structuredContent` and `_meta` as the app sent them — except
    /// what R20 withholds from a model (structured content of a UI-linked tool, unless the client
    /// renders app UIs: `renders_ui`) and a failure's first text, which starts with `Error:` —
    /// plus the UI it renders with in `_meta.ui.resourceUri`. `None` for a result the gateway
    /// made itself (no app result): its text is all there is.
    /// The app's result is taken out of `self` and reshaped, not copied; the rest stays.
    pub fn for_mcp_client(&mut self, renders_ui: bool) -> Option<Value> {
        let mut raw = self.raw.take().filter(Value::is_object)?;
        if let Some(uri) = &self.ui_resource_uri {
            if !renders_ui {
                if let Some(map) = raw.as_object_mut() {
                    map.remove("structuredContent");
                }
            }
            if !raw["_meta"].is_object() {
                raw["_meta"] = json!({});
            }
            if !raw["_meta"]["ui"].is_object() {
                raw["_meta"]["ui"] = json!({});
            }
            raw["_meta"]["ui"]["resourceUri"] = json!(uri);
        }
        if raw["isError"] == true {
            let first_text = raw["content"].as_array_mut().and_then(|c| c.iter_mut().find(|b| b["type"] == "text"));
            match first_text {
                Some(block) => {
                    let text = block["text"].as_str().unwrap_or_default();
                    if !text.starts_with("Error:") {
                        block["text"] = json!(format!("Error: {text}"));
                    }
                }
                None => {
                    if let Some(content) = raw["content"].as_array_mut() {
                        content.insert(0, json!({ "type": "text", "text": self.text.clone() }));
                    }
                }
            }
        }
        Some(raw)
    }
}

/// Why a call got no result, as the model reads it. The module's own errors (the app unknown,
/// stopped, lost, the call cancelled) say so already; an app's JSON-RPC error is named as the
/// app's.
fn failure(app_id: &str, e: &RpcError) -> String {
    match e.code {
        code if code == i64::from(jsonrpc::UPSTREAM_FAILED) || code == i64::from(jsonrpc::APP_UNAVAILABLE) => e.message.to_string(),
        code => format!("McpApp '{app_id}': the app returned an error: {} (code {code})", e.message),
    }
}

fn with_error_prefix(text: String) -> String {
    if text.starts_with("Error:") {
        text
    } else {
        format!("Error: {text}")
    }
}

/// The text blocks of MCP content, one per line, and a short note for every other block (the
/// model gets no binary data).
fn content_text(content: &Value) -> String {
    let Some(blocks) = content.as_array() else { return String::new() };
    let mut parts: Vec<String> = Vec::new();
    for block in blocks {
        match block["type"].as_str() {
            Some("text") => parts.push(block["text"].as_str().unwrap_or_default().to_string()),
            Some("resource") => {
                let resource = &block["resource"];
                match resource["text"].as_str() {
                    Some(text) => parts.push(text.to_string()),
                    None => parts.push(format!(
                        "[resource {} ({})]",
                        resource["uri"].as_str().unwrap_or("?"),
                        resource["mimeType"].as_str().unwrap_or("binary")
                    )),
                }
            }
            Some("resource_link") => parts.push(format!("[link to resource {}]", block["uri"].as_str().unwrap_or("?"))),
            Some(kind) => parts.push(format!("[{kind} content ({}) not shown]", block["mimeType"].as_str().unwrap_or("unknown type"))),
            None => {}
        }
    }
    parts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(block: &str) -> Value {
        json!({ "type": "text", "text": block })
    }

    #[test]
    fn every_content_kind_reads_as_text_and_no_binary_reaches_the_model() {
        let raw = json!({ "content": [
            text("first"),
            { "type": "resource", "resource": { "uri": "file:///note.txt", "text": "an embedded note" } },
            { "type": "resource", "resource": { "uri": "file:///blob.bin", "blob": "AAAA", "mimeType": "application/octet-stream" } },
            { "type": "resource", "resource": { "uri": "file:///unknown", "blob": "AAAA" } },
            { "type": "resource_link", "uri": "file:///linked.txt", "name": "linked" },
            { "type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png" },
            { "type": "audio", "data": "UklGRg==", "mimeType": "audio/wav" },
            { "type": "future_kind" },
            { "no": "type" },
        ]});
        let result = ToolResult::of_app(raw, None);
        assert!(!result.is_error);
        assert_eq!(
            result.text,
            "first\nan embedded note\n[resource file:///blob.bin (application/octet-stream)]\n[resource file:///unknown (binary)]\n\
             [link to resource file:///linked.txt]\n[image content (image/png) not shown]\n[audio content (audio/wav) not shown]\n\
             [future_kind content (unknown type) not shown]"
        );
        assert!(result.raw.is_some(), "the app's result is kept for the browser");
    }

    #[test]
    fn structured_content_is_withheld_for_ui_tools() {
        let raw = json!({ "content": [text("ok")], "structuredContent": { "a": 1 } });
        let plain = ToolResult::of_app(raw.clone(), None);
        assert_eq!(plain.structured, Some(json!({ "a": 1 })));
        assert_eq!(plain.text, "ok");
        let ui = ToolResult::of_app(raw, Some("ui://x".into()));
        assert_eq!(ui.structured, None);
        assert_eq!(ui.ui_resource_uri.as_deref(), Some("ui://x"));
        assert_eq!(ui.raw.as_ref().unwrap()["structuredContent"], json!({ "a": 1 }), "kept for the browser");
    }

    #[test]
    fn a_result_with_only_structured_content_still_gives_the_model_something_to_read() {
        let raw = json!({ "content": [], "structuredContent": { "n": 3 } });
        assert_eq!(ToolResult::of_app(raw.clone(), None).text, r#"{"n":3}"#);
        assert_eq!(ToolResult::of_app(raw, Some("ui://x".into())).text, "", "not for a UI tool: the model must not read it");
    }

    #[test]
    fn failures_read_with_error_first() {
        let failed = ToolResult::of_app(json!({ "isError": true, "content": [text("bad store")] }), None);
        assert!(failed.is_error);
        assert_eq!(failed.text, "Error: bad store");
        let prefixed = ToolResult::of_app(json!({ "isError": true, "content": [text("Error: already said")] }), None);
        assert_eq!(prefixed.text, "Error: already said");
        let silent = ToolResult::of_app(json!({ "isError": true, "content": [] }), None);
        assert_eq!(silent.text, NO_MESSAGE);
        assert_eq!(ToolResult::error("McpApp 'x' is not running").text, "Error: McpApp 'x' is not running");
        assert_eq!(ToolResult::error("Error: once").text, "Error: once");
        assert!(ToolResult::error("x").raw.is_none());
    }

    #[test]
    fn an_mcp_client_gets_the_apps_result_with_r20_applied() {
        let raw = json!({ "content": [text("shown")], "structuredContent": { "a": 1 }, "_meta": { "k": "v" } });
        let mut ui = ToolResult::of_app(raw.clone(), Some("ui://app/view.html".into()));
        let model_side = ui.clone().for_mcp_client(false).unwrap();
        assert!(model_side.get("structuredContent").is_none(), "{model_side}");
        assert_eq!(model_side["_meta"], json!({ "k": "v", "ui": { "resourceUri": "ui://app/view.html" } }));
        let app_host = ui.for_mcp_client(true).unwrap();
        assert_eq!(app_host["structuredContent"], json!({ "a": 1 }), "a client that renders UIs gets it");
        let plain = ToolResult::of_app(raw.clone(), None).for_mcp_client(false).unwrap();
        assert_eq!(plain, raw, "nothing changed for a tool without a UI");

        let failed = ToolResult::of_app(json!({ "isError": true, "content": [text("boom")] }), None).for_mcp_client(false).unwrap();
        assert_eq!(failed["content"][0]["text"], "Error: boom");
        let imageless = json!({ "isError": true, "content": [{ "type": "image", "data": "AA==", "mimeType": "image/png" }] });
        let failed = ToolResult::of_app(imageless, None).for_mcp_client(false).unwrap();
        assert_eq!(failed["content"][0], text("Error: [image content (image/png) not shown]"), "{failed}");
        assert_eq!(failed["content"][1]["type"], "image");
        assert!(ToolResult::error("made by the gateway").for_mcp_client(false).is_none());
    }
}
