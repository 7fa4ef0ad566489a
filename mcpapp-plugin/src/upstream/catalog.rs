//! What an app offers, enumerated after the handshake (SPEC R18), with UI recognition (R19).
//!
//! Tools are judged here, from raw JSON: a tool whose `inputSchema` is missing or not a JSON object
//! schema is skipped with a warning naming app and tool, unless the relaxed switch keeps it with
//! `{"type":"object"}`.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use serde_json::{json, Value};

use crate::upstream::error::UpstreamError;
use crate::upstream::session::{Session, UI_MIME_TYPE};

/// One tool of an app, as the gateway understands it. The tool's JSON is kept once, as the app
/// listed it (`raw`); its schemas and `_meta` are read from there when the bridge describes the
/// tool, not held in copies (with 20 apps of 21 tools, those copies were ~1 MB of the gateway's
/// idle memory).
#[derive(Debug, Clone)]
pub struct AppTool {
    pub name: String,
    pub description: String,
    pub visible_to_model: bool,
    pub visible_to_app: bool,
    pub ui_resource_uri: Option<String>,
    /// Its input schema names an `x-mcp-header` (SEP-2243): over Streamable HTTP of the
    /// 2026-07-28 revision, a call carries those arguments in `Mcp-Param-*` headers too.
    pub binds_headers: bool,
    /// The tool as the app listed it (schemas, `_meta`, title, annotations, icons…).
    pub raw: Value,
}

/// `{"type":"object"}`: the input schema of a tool kept by the relaxed rule without one.
static ANY_OBJECT_SCHEMA: LazyLock<Value> = LazyLock::new(|| json!({ "type": "object" }));
/// `{}`: the `_meta` of a tool that has none (or one that is not an object).
static NO_META: LazyLock<Value> = LazyLock::new(|| json!({}));

impl AppTool {
    /// The tool's `inputSchema`, or `{"type":"object"}` when the relaxed rule kept a tool without
    /// an object schema.
    pub fn input_schema(&self) -> &Value {
        self.raw.get("inputSchema").filter(|s| is_object_schema(Some(s))).unwrap_or(&ANY_OBJECT_SCHEMA)
    }

    /// The tool's `outputSchema`, when it is a JSON object.
    pub fn output_schema(&self) -> Option<&Value> {
        self.raw.get("outputSchema").filter(|v| v.is_object())
    }

    /// The tool's `_meta`, `{}` when it has none.
    pub fn meta(&self) -> &Value {
        listed_meta(&self.raw)
    }
}

/// A listed tool's `_meta`, `{}` when it has none (or one that is not an object).
fn listed_meta(raw: &Value) -> &Value {
    raw.get("_meta").filter(|v| v.is_object()).unwrap_or(&NO_META)
}

/// Everything one app offers.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    /// The tools, in the app's order, without repeated names (first wins); set only through
    /// [`Catalog::add_tool`] so that `tool_index` stays in step.
    tools: Vec<AppTool>,
    /// Tool name → its index in `tools`: [`Catalog::tool`] runs per call, and an app may list
    /// tens of thousands of tools.
    tool_index: HashMap<String, usize>,
    pub resources: Vec<Value>,
    pub resource_templates: Vec<Value>,
    pub prompts: Vec<Value>,
    /// Tools left out by the strict schema rule, with why.
    pub skipped_tools: Vec<(String, String)>,
}

impl Catalog {
    /// A catalog of these tools, a repeated name keeping its first tool.
    pub fn with_tools(tools: impl IntoIterator<Item = AppTool>) -> Self {
        let mut catalog = Self::default();
        for tool in tools {
            let _ = catalog.add_tool(tool);
        }
        catalog
    }

    /// The tools, in the order the app listed them.
    pub fn tools(&self) -> &[AppTool] {
        &self.tools
    }

    /// Adds a tool after the others, unless one of that name is already there (first wins): then
    /// the tool is given back.
    pub fn add_tool(&mut self, tool: AppTool) -> Result<(), AppTool> {
        if self.tool_index.contains_key(&tool.name) {
            return Err(tool);
        }
        self.tool_index.insert(tool.name.clone(), self.tools.len());
        self.tools.push(tool);
        Ok(())
    }

    pub fn tool(&self, name: &str) -> Option<&AppTool> {
        self.tool_index.get(name).map(|&i| &self.tools[i])
    }

    /// Resources that are MCP App UIs.
    pub fn ui_resources(&self) -> impl Iterator<Item = &Value> {
        self.resources.iter().filter(|r| is_ui_resource(r))
    }

    /// Every UI the app declares (SPEC R19), without repeats: the URIs of its
    /// `text/html;profile=mcp-app` resources, then those its tools link to.
    pub fn declared_ui_uris(&self) -> Vec<String> {
        // A set of those seen: this runs on every listing of the apps, and an app may declare
        // tens of thousands of UIs (a `Vec::contains` here took 5.9 s for 80,000).
        let mut seen: HashSet<&str> = HashSet::new();
        let resources = self.ui_resources().filter_map(|r| r.get("uri").and_then(Value::as_str));
        let linked = self.tools.iter().filter_map(|t| t.ui_resource_uri.as_deref());
        resources.chain(linked).filter(|uri| seen.insert(uri)).map(str::to_string).collect()
    }
}

/// Whether an app has a UI and which (`hasUi`, `uiResourceUri`): what a running app declares
/// wins over its manifest (SPEC R19). With a catalog that declares UIs, the manifest's URI is kept
/// when it is one of them, else the first declared one is used; without one (not running, or no
/// UI declared) the manifest's values stand.
pub fn ui_of(catalog: Option<&Catalog>, manifest_has_ui: bool, manifest_uri: Option<&str>) -> (bool, Option<String>) {
    let declared = catalog.map(Catalog::declared_ui_uris).unwrap_or_default();
    if declared.is_empty() {
        return (manifest_has_ui, manifest_uri.map(str::to_string));
    }
    let uri = match manifest_uri {
        Some(m) if declared.iter().any(|d| d == m) => m.to_string(),
        _ => declared[0].clone(),
    };
    (true, Some(uri))
}

/// A resource is an MCP App UI when its MIME type is `text/html;profile=mcp-app` (compared
/// without regard to case or spaces around `;`).
pub fn is_ui_resource(resource: &Value) -> bool {
    resource.get("mimeType").and_then(Value::as_str).is_some_and(is_ui_mime)
}

pub fn is_ui_mime(mime: &str) -> bool {
    let normalized: String = mime.split(';').map(str::trim).collect::<Vec<_>>().join(";").to_ascii_lowercase();
    normalized == UI_MIME_TYPE
}

/// The UI a tool links to: `_meta.ui.resourceUri`, or the older flat `_meta["ui/resourceUri"]`.
pub fn tool_ui_resource_uri(meta: &Value) -> Option<String> {
    meta.get("ui")
        .and_then(|ui| ui.get("resourceUri"))
        .or_else(|| meta.get("ui/resourceUri"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// `_meta.ui.visibility` as (model, app); absent means both.
pub fn tool_visibility(meta: &Value) -> (bool, bool) {
    match meta.get("ui").and_then(|ui| ui.get("visibility")).and_then(Value::as_array) {
        Some(list) => {
            let has = |v: &str| list.iter().any(|x| x.as_str() == Some(v));
            (has("model"), has("app"))
        }
        None => (true, true),
    }
}

/// Whether a schema is a JSON object schema: an object whose `type` is `"object"`.
fn is_object_schema(schema: Option<&Value>) -> bool {
    schema.and_then(|s| s.as_object()).and_then(|s| s.get("type")).and_then(Value::as_str) == Some("object")
}

/// Turns one raw tool into an [`AppTool`], or says why it is skipped.
pub fn parse_tool(raw: &Value, relaxed_schema: bool) -> Result<AppTool, String> {
    let name = raw
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| "a tool has no name".to_string())?
        .to_string();
    let schema = raw.get("inputSchema");
    if !is_object_schema(schema) && !relaxed_schema {
        let why = match schema {
            None | Some(Value::Null) => "it has no inputSchema".to_string(),
            Some(s) => format!("its inputSchema is not a JSON object schema ({})", truncate(&s.to_string(), 80)),
        };
        return Err(why);
    }
    let meta = listed_meta(raw);
    let (visible_to_model, visible_to_app) = tool_visibility(meta);
    Ok(AppTool {
        description: raw.get("description").and_then(Value::as_str).unwrap_or_default().to_string(),
        ui_resource_uri: tool_ui_resource_uri(meta),
        visible_to_model,
        visible_to_app,
        binds_headers: raw.get("inputSchema").is_some_and(names_key("x-mcp-header")),
        raw: raw.clone(),
        name,
    })
}

/// Whether `key` is a key anywhere in a JSON value.
fn names_key(key: &str) -> impl Fn(&Value) -> bool + '_ {
    fn walk(value: &Value, key: &str) -> bool {
        match value {
            Value::Object(map) => map.iter().any(|(k, v)| k == key || walk(v, key)),
            Value::Array(items) => items.iter().any(|v| walk(v, key)),
            _ => false,
        }
    }
    move |value| walk(value, key)
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        s.to_string()
    } else {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &s[..end])
    }
}

/// Enumerates tools (all pages), resources, resource templates and prompts — each only when the
/// server declares the capability, so a tools-only app is not asked for prompts.
///
/// Only `tools/list` is essential: when it fails, so does the enumeration (and the app's start).
/// A failing optional list (`resources/list`, `resources/templates/list`, `prompts/list`) is a
/// warning naming app and list, and the app goes on without that list.
pub async fn enumerate(session: &Session, app_id: &str, relaxed_schema: bool) -> Result<Catalog, UpstreamError> {
    let mut catalog = Catalog::default();
    if session.has_capability("tools") {
        for raw in session.list_all("tools/list", "tools").await? {
            match parse_tool(&raw, relaxed_schema) {
                Ok(tool) => {
                    if let Err(tool) = catalog.add_tool(tool) {
                        tracing::warn!(app = app_id, "McpApp '{app_id}' lists tool '{}' twice; keeping the first", tool.name);
                    }
                }
                Err(why) => {
                    let name = raw.get("name").and_then(Value::as_str).unwrap_or("<unnamed>").to_string();
                    tracing::warn!(
                        app = app_id,
                        tool = %name,
                        "Skipping tool '{name}' of McpApp '{app_id}': {why} (set McpCompatibility.AllowRelaxedInputSchemaValidation=true to keep it)"
                    );
                    catalog.skipped_tools.push((name, why));
                }
            }
        }
    }
    if session.has_capability("resources") {
        catalog.resources = optional_list(session, app_id, "resources/list", "resources").await;
        catalog.resource_templates =
            optional_list(session, app_id, "resources/templates/list", "resourceTemplates").await;
    }
    if session.has_capability("prompts") {
        catalog.prompts = optional_list(session, app_id, "prompts/list", "prompts").await;
    }
    Ok(catalog)
}

/// One optional list: its items, or none with a warning.
async fn optional_list(session: &Session, app_id: &str, method: &str, key: &str) -> Vec<Value> {
    match session.list_all(method, key).await {
        Ok(items) => items,
        // Stopped (or lost) meanwhile: the catalog goes with the session, nothing to report.
        Err(e) if session.is_closed() => {
            tracing::debug!(app = app_id, list = method, "McpApp '{app_id}': {method} ended with the session ({e})");
            Vec::new()
        }
        Err(e) => {
            tracing::warn!(app = app_id, list = method, "McpApp '{app_id}': {method} failed ({e}); continuing without it");
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_schema_rule_and_relaxation() {
        let missing = json!({"name": "a"});
        let not_object = json!({"name": "b", "inputSchema": {"type": "string"}});
        let good = json!({"name": "c", "inputSchema": {"type": "object", "properties": {}}});
        assert!(parse_tool(&missing, false).unwrap_err().contains("no inputSchema"));
        assert!(parse_tool(&not_object, false).unwrap_err().contains("not a JSON object schema"));
        assert_eq!(parse_tool(&missing, true).unwrap().input_schema(), &json!({"type": "object"}));
        assert_eq!(parse_tool(&good, false).unwrap().name, "c");
    }

    #[test]
    fn schemas_and_meta_are_read_from_the_tool_as_listed() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let t = parse_tool(
            &json!({"name": "f", "inputSchema": schema, "outputSchema": {"type": "object"}, "_meta": {"k": 1}}),
            false,
        )
        .unwrap();
        assert_eq!(t.input_schema(), &schema);
        assert_eq!(t.output_schema(), Some(&json!({"type": "object"})));
        assert_eq!(t.meta(), &json!({"k": 1}));
        let odd = parse_tool(&json!({"name": "g", "inputSchema": {"type": "string"}, "outputSchema": "x", "_meta": [1]}), true).unwrap();
        assert_eq!(odd.input_schema(), &json!({"type": "object"}));
        assert_eq!(odd.output_schema(), None);
        assert_eq!(odd.meta(), &json!({}));
    }

    #[test]
    fn a_tool_binds_headers_when_its_input_schema_names_x_mcp_header_anywhere() {
        let bound = |schema: Value| parse_tool(&json!({"name": "h", "inputSchema": schema}), false).unwrap().binds_headers;
        assert!(bound(json!({"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}})));
        assert!(bound(json!({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"x-mcp-header": "B"}}}}})));
        assert!(!bound(json!({"type": "object", "properties": {"region": {"type": "string", "description": "x-mcp-header"}}})));
        assert!(!parse_tool(&json!({"name": "n", "inputSchema": {"type": "object"}, "_meta": {"x-mcp-header": "X"}}), false).unwrap().binds_headers);
    }

    #[test]
    fn ui_links_and_visibility() {
        let t = parse_tool(
            &json!({"name": "d", "inputSchema": {"type": "object"},
                    "_meta": {"ui": {"resourceUri": "ui://x/y.html", "visibility": ["app"]}}}),
            false,
        )
        .unwrap();
        assert_eq!(t.ui_resource_uri.as_deref(), Some("ui://x/y.html"));
        assert!(!t.visible_to_model && t.visible_to_app);
        let flat = parse_tool(&json!({"name": "e", "inputSchema": {"type": "object"}, "_meta": {"ui/resourceUri": "ui://z"}}), false).unwrap();
        assert_eq!(flat.ui_resource_uri.as_deref(), Some("ui://z"));
        assert!(flat.visible_to_model && flat.visible_to_app);
        assert!(is_ui_resource(&json!({"uri": "ui://a", "mimeType": "text/html; profile=mcp-app"})));
        assert!(!is_ui_resource(&json!({"uri": "ui://a", "mimeType": "text/html"})));
    }

    #[test]
    fn ui_is_what_the_app_declares() {
        let tool = |uri: Option<&str>| {
            let meta = uri.map(|u| json!({"ui": {"resourceUri": u}})).unwrap_or(json!({}));
            parse_tool(&json!({"name": "t", "inputSchema": {"type": "object"}, "_meta": meta}), false).unwrap()
        };
        let plain = Catalog::with_tools(vec![tool(None)]);
        assert_eq!(ui_of(Some(&plain), false, None), (false, None));
        assert_eq!(ui_of(None, true, Some("ui://m")), (true, Some("ui://m".into())), "not running: the manifest");
        let linked = Catalog::with_tools(vec![tool(Some("ui://t"))]);
        assert_eq!(ui_of(Some(&linked), false, None), (true, Some("ui://t".into())), "a tool's link alone");
        let both = Catalog {
            resources: vec![json!({"uri": "ui://r", "mimeType": "text/html;profile=mcp-app"}), json!({"uri": "x://plain"})],
            ..Catalog::with_tools(vec![tool(Some("ui://t"))])
        };
        assert_eq!(ui_of(Some(&both), false, None), (true, Some("ui://r".into())), "resources first");
        assert_eq!(ui_of(Some(&both), true, Some("ui://t")), (true, Some("ui://t".into())), "the manifest's, if declared");
        assert_eq!(ui_of(Some(&both), true, Some("ui://gone")), (true, Some("ui://r".into())));
    }

    fn bare_tool(name: String, description: String, ui: Option<String>) -> AppTool {
        AppTool {
            name,
            description,
            visible_to_model: true,
            visible_to_app: true,
            ui_resource_uri: ui,
            binds_headers: false,
            raw: Value::Null,
        }
    }

    /// 100,000 tools, each name listed twice: the first of each name is kept, in the app's order,
    /// and found by name (once a linear scan per tool, quadratic over the listing).
    #[test]
    fn many_tools_with_repeated_names_keep_the_first_in_order() {
        const N: usize = 100_000;
        let mut catalog = Catalog::default();
        let mut refused = 0;
        for i in 0..N {
            let tool = bare_tool(format!("t{}", i % (N / 2)), format!("listing {i}"), None);
            if let Err(back) = catalog.add_tool(tool) {
                assert_eq!(back.description, format!("listing {i}"), "the repeat is given back");
                refused += 1;
            }
        }
        assert_eq!(refused, N / 2);
        assert_eq!(catalog.tools().len(), N / 2);
        assert!(catalog.tools().iter().enumerate().all(|(i, t)| t.name == format!("t{i}")), "the app's order");
        for i in [0, 7, N / 2 - 1] {
            assert_eq!(catalog.tool(&format!("t{i}")).unwrap().description, format!("listing {i}"), "first wins");
        }
        assert!(catalog.tool(&format!("t{}", N / 2)).is_none());
        let rebuilt = Catalog::with_tools(catalog.tools().iter().cloned().chain([bare_tool("t3".into(), "late".into(), None)]));
        assert_eq!(rebuilt.tools().len(), N / 2);
        assert_eq!(rebuilt.tool("t3").unwrap().description, "listing 3");
    }

    /// 100,000 UI resources and 100,000 tools linking to UIs, with repeats among and between
    /// them: each URI once, in the order first declared (once a `Vec::contains` per URI).
    #[test]
    fn many_declared_uis_are_listed_once_in_order() {
        const N: usize = 100_000;
        let mut resources: Vec<Value> = (0..N)
            .map(|i| json!({"uri": format!("ui://r/{}", i % (N / 2)), "mimeType": "text/html;profile=mcp-app"}))
            .collect();
        resources.push(json!({"uri": "ui://plain", "mimeType": "text/html"}));
        // Tools link to every 4th resource's URI (already declared) and to as many of their own.
        let tools = (0..N).map(|i| {
            let ui = if i % 2 == 0 { format!("ui://r/{}", (i / 2) * 4 % (N / 2)) } else { format!("ui://t/{}", i / 2) };
            bare_tool(format!("tool{i}"), String::new(), Some(ui))
        });
        let catalog = Catalog { resources, ..Catalog::with_tools(tools) };
        let uris = catalog.declared_ui_uris();
        assert_eq!(uris.len(), N / 2 + N / 2);
        assert!(uris[..N / 2].iter().enumerate().all(|(i, u)| *u == format!("ui://r/{i}")), "resources first, in order");
        assert!(uris[N / 2..].iter().enumerate().all(|(i, u)| *u == format!("ui://t/{i}")), "then the tools' own");
        assert_eq!(ui_of(Some(&catalog), true, Some("ui://t/49999")), (true, Some("ui://t/49999".into())));
        assert_eq!(ui_of(Some(&catalog), true, Some("ui://plain")), (true, Some("ui://r/0".into())));
    }
}
