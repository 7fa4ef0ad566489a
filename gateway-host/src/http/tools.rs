//! `GET /tools`: the native tool registry as the agent sees it, for operators and tests: every
//! provider's tools, which one ResolvePreference chose per name, and the provider-safe names.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use super::GatewayState;
use crate::tools::ToolSpec;

pub async fn list(State(state): State<Arc<GatewayState>>) -> Json<Value> {
    let registry = &state.tools;
    let chosen = registry.model_tools();
    let names = registry.provider_names();
    let all = describe_all(&registry.all_tools(), &chosen);
    let model: Vec<Value> = chosen
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "providerName": names.to_provider(&t.name),
                "providerId": t.provider_id,
                "inputSchema": t.input_schema,
                "uiResourceUri": t.ui_resource_uri,
            })
        })
        .collect();
    Json(json!({ "preference": registry.preference_order(), "model": model, "all": all }))
}

/// Every provider's tools, each marked `selected` when it is the model's tool of its name.
///
/// The model's tools are one per name, so a tool is selected when the chosen tool of its name is
/// from its provider: looked up by name, not scanned for per tool (with 40,000 tools, that scan
/// held the worker for 3.4 s).
fn describe_all(all: &[Arc<ToolSpec>], chosen: &[Arc<ToolSpec>]) -> Vec<Value> {
    let chosen_provider: HashMap<&str, &str> = chosen.iter().map(|c| (c.name.as_str(), c.provider_id.as_str())).collect();
    all.iter()
        .map(|t| {
            let selected = chosen_provider.get(t.name.as_str()) == Some(&t.provider_id.as_str());
            json!({
                "name": t.name,
                "providerId": t.provider_id,
                "description": t.description,
                "visibleToModel": t.visible_to_model,
                "selected": selected,
                "uiResourceUri": t.ui_resource_uri,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ToolSource;

    fn spec(name: &str, provider_id: &str) -> Arc<ToolSpec> {
        Arc::new(ToolSpec {
            name: name.to_string(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
            output_schema: None,
            meta: json!({}),
            visible_to_model: true,
            visible_to_app: true,
            ui_resource_uri: None,
            extra: json!({}),
            provider_id: provider_id.to_string(),
            source: ToolSource::Module { app_id: provider_id.to_string(), tool_name: name.to_string() },
        })
    }

    /// 100,000 tools, two providers per name, half of them chosen: each is marked by a lookup,
    /// not a scan of the chosen ones (quadratic before).
    #[test]
    fn many_tools_are_marked_selected_by_name_and_provider() {
        const N: usize = 100_000;
        let all: Vec<Arc<ToolSpec>> = (0..N).map(|i| spec(&format!("t{}", i / 2), &format!("p{}", i % 2))).collect();
        // The model's tool of `t{k}` is p1's for even k, p0's for odd k.
        let chosen: Vec<Arc<ToolSpec>> = (0..N / 2).map(|k| spec(&format!("t{k}"), &format!("p{}", (k + 1) % 2))).collect();
        let described = describe_all(&all, &chosen);
        assert_eq!(described.len(), N);
        for (i, d) in described.iter().enumerate() {
            let (k, p) = (i / 2, i % 2);
            assert_eq!(d["name"], format!("t{k}"), "the registry's order");
            assert_eq!(d["providerId"], format!("p{p}"));
            assert_eq!(d["selected"], p == (k + 1) % 2, "tool {i}");
        }
        let lone = describe_all(&[spec("x", "p0"), spec("y", "p0")], &[spec("y", "p0")]);
        assert_eq!(lone.iter().map(|d| d["selected"].as_bool().unwrap()).collect::<Vec<_>>(), [false, true]);
    }
}
