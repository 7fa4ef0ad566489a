//! App tools as agent tools (the seed's McpAppNativeTool, SPEC R20).
//!
//! Model-side names are `toolNamePrefix + name`; a name already taken by an app earlier in
//! discovery order is refused for the later app with a log line. The host calls an app's tool
//! for the model as it forwards a client's `tools/call` (`export/forward.rs`, as the gateway
//! itself: `AppRequest::any_provider`), and shapes the app's result for the model itself
//! (`gateway-host/src/tools/model_view.rs`); here nothing does. `call_tool`, the 2.0 hosts' way
//! to call a tool for the model, is answered the same way ([`as_app_request`], [`outcome`]).

use std::collections::HashSet;
use std::sync::Arc;

use abi_stable::std_types::RString;
use host_abi::{AppAnswer, AppRequest, RelayOptIn, ToolCallOutcome, ToolCallRequest, ToolDescriptor};
use parking_lot::Mutex;
use serde_json::{json, Value};

use crate::apps::app_server::{AppKind, AppServer};
use crate::apps::install_state::AppState;
use crate::upstream::relay::opted_in;

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
        for tool in catalog.tools() {
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

/// A 2.0 host's model-side call (`ModuleInstance::call_tool`) as the request a host now sends
/// for it: a `tools/call` forwarded as the gateway itself (`any_provider`), with the `_meta` and
/// the relay opt-in of its `extra_json`. `Err` when its arguments are no JSON object.
pub fn as_app_request(request: &ToolCallRequest) -> Result<AppRequest, ToolCallOutcome> {
    let tool_name = request.tool_name.as_str();
    let arguments_json = request.arguments_json.as_str();
    let arguments = match serde_json::from_str::<Value>(if arguments_json.is_empty() { "{}" } else { arguments_json }) {
        Ok(a @ Value::Object(_)) => a,
        _ => return Err(failure(format!("invalid arguments for tool '{tool_name}': the host must send a JSON object"))),
    };
    let mut params = json!({ "name": tool_name, "arguments": arguments });
    if let Ok(meta @ Value::Object(_)) = serde_json::from_str::<Value>(request.meta_json.as_str()) {
        params["_meta"] = meta;
    }
    let relay = opted_in(request.extra_json.as_str())
        .map(|capabilities| RelayOptIn { client_capabilities: capabilities.into_iter().map(RString::from).collect() });
    Ok(AppRequest {
        call_id: request.call_id,
        app_id: request.app_id.clone(),
        method: "tools/call".into(),
        params_json: params.to_string().into(),
        session_id: RString::new(),
        any_provider: true,
        relay: relay.into(),
    })
}

/// A forwarded `tools/call`'s answer as a 2.0 host reads a model-side call's outcome.
pub fn outcome(answer: AppAnswer, ui_resource_uri: &str) -> ToolCallOutcome {
    match answer {
        AppAnswer::Result(raw) => ToolCallOutcome {
            is_error: false,
            text: "".into(),
            structured_content_json: "".into(),
            ui_resource_uri: ui_resource_uri.into(),
            raw_result_json: raw,
            extra_json: "{}".into(),
        },
        AppAnswer::Error(e) => failure(e.message),
    }
}

/// A call that got no result: why, for the host to put before the model (`Error: …`).
fn failure(message: impl std::fmt::Display) -> ToolCallOutcome {
    ToolCallOutcome {
        is_error: true,
        text: format!("Error: {message}").into(),
        structured_content_json: "".into(),
        ui_resource_uri: "".into(),
        raw_result_json: "".into(),
        extra_json: "{}".into(),
    }
}
