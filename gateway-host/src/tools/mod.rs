//! The native tool registry (the seed's NativePluginRegistry, SPEC R30): the gateway's built-in
//! tools, the tools of standard MCP servers (`Plugins.Mcp`, provider `mcp:{id}`) and of MCP Apps
//! (provider `mcpapp:{id}`), in one place the agent and `/mcp` read from.
//!
//! It follows the module live: lifecycle and tool-list events trigger a refresh, so an app going
//! Failed withdraws its tools and Running again restores them; subscribers hear about every change
//! of the model-visible list.

pub mod arguments;
pub mod builtin;
pub mod model_view;
pub mod names;
pub mod preference;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use host_abi::{AppRequest, RelayOptIn};
use parking_lot::{Mutex, RwLock};
use serde_json::Value;
use tokio::sync::broadcast;

use crate::metrics::{Metrics, ToolOutcome};
use crate::module::host::ModuleHost;
use crate::module::listed::Listed;
use builtin::Builtin;
use names::ProviderNames;
use preference::Preference;

pub use model_view::ToolResult;

/// Where a tool's calls go.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolSource {
    Builtin(Builtin),
    /// An app's or standard server's tool, by its registry key and its own (unprefixed) name.
    Module { app_id: String, tool_name: String },
}

/// One tool offered by one provider.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The name the model sees (`grocery.get_low_stock`).
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    pub meta: Value,
    pub visible_to_model: bool,
    /// Its UI may call it (`_meta.ui.visibility` has `app`, the default).
    pub visible_to_app: bool,
    pub ui_resource_uri: Option<String>,
    /// What else the provider declared for the tool (`title`, `annotations`, `icons`,
    /// `execution`), as a JSON object; MCP clients of `/mcp` get it unchanged.
    pub extra: Value,
    pub provider_id: String,
    pub source: ToolSource,
}

#[derive(Default)]
struct Snapshot {
    /// Every provider's tools, registration order. Shared, not copied, with `resolved` and with
    /// every caller (a tool call looks its tool up twice; a schema is a tree of JSON maps).
    all: Vec<Arc<ToolSpec>>,
    /// The model's tools: model-visible, one per name (preference applied), by name.
    resolved: BTreeMap<String, Arc<ToolSpec>>,
    /// App (or standard server) id → its own tool name → the index in `all` of its first tool of
    /// that name: [`ToolRegistry::module_tool`] runs per call, and apps may list tens of thousands
    /// of tools.
    by_module: HashMap<String, HashMap<String, usize>>,
    provider_names: ProviderNames,
}

impl Snapshot {
    /// [`Snapshot::by_module`] for `all`: the first tool of a name wins, as a scan would find it.
    fn index_modules(all: &[Arc<ToolSpec>]) -> HashMap<String, HashMap<String, usize>> {
        let mut by_module: HashMap<String, HashMap<String, usize>> = HashMap::new();
        for (i, spec) in all.iter().enumerate() {
            if let ToolSource::Module { app_id, tool_name } = &spec.source {
                let tools = match by_module.get_mut(app_id.as_str()) {
                    Some(tools) => tools,
                    None => by_module.entry(app_id.clone()).or_default(),
                };
                if !tools.contains_key(tool_name.as_str()) {
                    tools.insert(tool_name.clone(), i);
                }
            }
        }
        by_module
    }

    fn module_tool(&self, app_id: &str, tool_name: &str) -> Option<&Arc<ToolSpec>> {
        self.by_module.get(app_id).and_then(|tools| tools.get(tool_name)).map(|&i| &self.all[i])
    }
}

pub struct ToolRegistry {
    module: Arc<ModuleHost>,
    preference: Preference,
    snapshot: RwLock<Snapshot>,
    /// When `snapshot` was listed: a name it lacks lists again only after news of the module.
    listed: Listed,
    /// Last choice logged per contested name, so a choice is logged when it is made or changes.
    choices: Mutex<HashMap<String, String>>,
    changes: broadcast::Sender<()>,
    /// Where every call is counted and timed (`gateway_tool_calls_total`, `…_duration_seconds`).
    metrics: Arc<Metrics>,
}

impl ToolRegistry {
    pub fn new(module: Arc<ModuleHost>, preference: Preference, metrics: Arc<Metrics>) -> Arc<ToolRegistry> {
        let (changes, _) = broadcast::channel(64);
        Arc::new(ToolRegistry {
            module,
            preference,
            metrics,
            snapshot: RwLock::new(Snapshot::default()),
            listed: Listed::default(),
            choices: Mutex::new(HashMap::new()),
            changes,
        })
    }

    /// Notified (no payload) whenever the model-visible tool list changes.
    pub fn subscribe(&self) -> broadcast::Receiver<()> {
        self.changes.subscribe()
    }

    /// The model's tools, sorted by name.
    pub fn model_tools(&self) -> Vec<Arc<ToolSpec>> {
        self.snapshot.read().resolved.values().cloned().collect()
    }

    /// The model's tool `name` (preference applied), if there is one.
    pub fn resolved(&self, name: &str) -> Option<Arc<ToolSpec>> {
        self.snapshot.read().resolved.get(name).cloned()
    }

    /// Like [`Self::resolved`], but a name the snapshot lacks gets one refresh first if the
    /// module reported a change since the last one: an app that has just come up is callable
    /// before the debounced event refresh lands (a client that saw it running in `/apps/health`
    /// must not be told its tool is unknown), and a name that is nowhere costs no listing.
    pub async fn resolve_now(&self, name: &str) -> Option<Arc<ToolSpec>> {
        if let Some(spec) = self.resolved(name) {
            return Some(spec);
        }
        self.refresh_if_changed().await;
        self.resolved(name)
    }

    /// The tools an MCP Apps host may list and call for its apps' UIs: the model's, plus the
    /// app-only ones (`_meta.ui.visibility: ["app"]`), which the host hides from its model. An
    /// app-only name the model's list has too is the model's tool.
    pub fn app_host_tools(&self) -> Vec<Arc<ToolSpec>> {
        let snap = self.snapshot.read();
        let mut tools: BTreeMap<&str, Arc<ToolSpec>> = snap.resolved.iter().map(|(n, s)| (n.as_str(), s.clone())).collect();
        for spec in snap.all.iter().filter(|s| !s.visible_to_model && s.visible_to_app) {
            tools.entry(&spec.name).or_insert_with(|| spec.clone());
        }
        tools.into_values().collect()
    }

    /// `name` among [`Self::app_host_tools`], refreshed once if missing (as [`Self::resolve_now`]).
    pub async fn resolve_for_app_host(&self, name: &str) -> Option<Arc<ToolSpec>> {
        let find = || {
            let snap = self.snapshot.read();
            snap.resolved
                .get(name)
                .or_else(|| snap.all.iter().find(|s| s.name == name && !s.visible_to_model && s.visible_to_app))
                .cloned()
        };
        if let Some(spec) = find() {
            return Some(spec);
        }
        self.refresh_if_changed().await;
        find()
    }

    /// The tools apps' UIs may call whose app's own (unprefixed) name is `name`: an app's UI
    /// calls its tools by the names its app knows, and an MCP Apps host passes the call on as
    /// it is.
    pub fn app_tools_named(&self, name: &str) -> Vec<Arc<ToolSpec>> {
        let snap = self.snapshot.read();
        snap.all
            .iter()
            .filter(|s| s.visible_to_app && matches!(&s.source, ToolSource::Module { tool_name, .. } if tool_name == name))
            .cloned()
            .collect()
    }

    /// Every provider's tools, model-visible or not.
    pub fn all_tools(&self) -> Vec<Arc<ToolSpec>> {
        self.snapshot.read().all.clone()
    }

    /// The tool of app (or standard server) `app_id` by its own, unprefixed name, model-visible or
    /// not (what `/apps/mcp/{appId}` calls), as of the last refresh.
    pub fn module_tool(&self, app_id: &str, tool_name: &str) -> Option<Arc<ToolSpec>> {
        self.snapshot.read().module_tool(app_id, tool_name).cloned()
    }

    pub fn preference_order(&self) -> &[String] {
        self.preference.order()
    }

    pub fn provider_names(&self) -> ProviderNames {
        self.snapshot.read().provider_names.clone()
    }

    /// Rebuilds from the module's current tools; tells subscribers when the model's list changed.
    pub async fn refresh(&self) {
        self.listed.again(|| self.module.app_changes_heard(), || self.rebuild()).await;
    }

    /// [`Self::refresh`] if the module reported anything since the last one ([`Listed`]).
    async fn refresh_if_changed(&self) {
        self.listed.if_heard_since(|| self.module.app_changes_heard(), || self.rebuild()).await;
    }

    /// The listing of [`Self::refresh`]; whether the module answered it.
    async fn rebuild(&self) -> bool {
        self.metrics.module_listing("tools");
        let mut all: Vec<Arc<ToolSpec>> = builtin::specs().into_iter().map(Arc::new).collect();
        let listed = self.module.list_tools().await;
        match &listed {
            Ok(tools) => all.extend(tools.iter().map(|t| {
                let parse = |s: &str| serde_json::from_str::<Value>(s).ok();
                let ui_resource_uri = Some(t.ui_resource_uri.to_string()).filter(|u| !u.is_empty());
                Arc::new(ToolSpec {
                    name: t.qualified_name.to_string(),
                    description: t.description.to_string(),
                    input_schema: parse(t.input_schema_json.as_str()).unwrap_or_else(|| serde_json::json!({"type": "object"})),
                    // A UI-linked tool's structured content goes to the browser, not the model, so
                    // the model's definition must not promise it either.
                    output_schema: parse(t.output_schema_json.as_str()).filter(|_| ui_resource_uri.is_none()),
                    meta: parse(t.meta_json.as_str()).unwrap_or_else(|| serde_json::json!({})),
                    visible_to_model: t.visible_to_model,
                    visible_to_app: t.visible_to_app,
                    ui_resource_uri,
                    extra: parse(t.extra_json.as_str()).filter(Value::is_object).unwrap_or_else(|| serde_json::json!({})),
                    provider_id: t.provider_id.to_string(),
                    source: ToolSource::Module { app_id: t.app_id.to_string(), tool_name: t.name.to_string() },
                })
            })),
            Err(e) => tracing::warn!("cannot list the module's tools: {e}"),
        }
        let resolved = self.resolve(&all);
        let by_module = Snapshot::index_modules(&all);
        let changed = {
            let mut snap = self.snapshot.write();
            let changed = snap.resolved != resolved;
            snap.provider_names = ProviderNames::build(resolved.keys().map(String::as_str));
            snap.resolved = resolved;
            snap.by_module = by_module;
            snap.all = all;
            changed
        };
        if changed {
            let _ = self.changes.send(());
        }
        listed.is_ok()
    }

    /// ResolvePreference over every contested name.
    fn resolve(&self, all: &[Arc<ToolSpec>]) -> BTreeMap<String, Arc<ToolSpec>> {
        let mut by_name: BTreeMap<&str, Vec<&Arc<ToolSpec>>> = BTreeMap::new();
        for spec in all.iter().filter(|s| s.visible_to_model) {
            by_name.entry(&spec.name).or_default().push(spec);
        }
        let mut choices = self.choices.lock();
        by_name
            .into_iter()
            .map(|(name, candidates)| {
                let providers: Vec<&str> = candidates.iter().map(|c| c.provider_id.as_str()).collect();
                let chosen = candidates[self.preference.choose(&providers)];
                if candidates.len() > 1 && choices.get(name) != Some(&chosen.provider_id) {
                    tracing::info!(
                        tool = name,
                        "ResolvePreference: tool '{name}' is offered by {}; using {} (Tools.Preference: {})",
                        providers.join(", "),
                        chosen.provider_id,
                        self.preference.order().join(", ")
                    );
                    choices.insert(name.to_string(), chosen.provider_id.clone());
                }
                (name.to_string(), chosen.clone())
            })
            .collect()
    }

    /// Follows the module: a refresh after each burst of app changes
    /// ([`ModuleHost::follow_app_changes`]).
    pub fn follow_module(self: &Arc<Self>) {
        let me = self.clone();
        self.module.follow_app_changes(|_| {}, move || {
            let me = me.clone();
            async move { me.refresh().await }
        });
    }

    pub fn module(&self) -> &Arc<ModuleHost> {
        &self.module
    }

    /// Calls the model's tool `name` (already resolved by preference) under `call_id` (see
    /// [`ModuleHost::next_call_id`]) with its `arguments` as parsed where the call came in (an
    /// object or null, else an `Error:` result: [`arguments::check`]), the request's `_meta`
    /// (e.g. the caller's progress token; a JSON object or null) and the caller's relay opt-in
    /// (`host_abi::relay`: what its client can be asked while the tool runs).
    ///
    /// Every call of a tool the registry has is counted and timed here, the one place both `/mcp`
    /// and the chat agent call through; a call whose caller stops waiting counts as cancelled.
    pub async fn call_with(&self, name: &str, arguments: Value, call_id: u64, meta: &Value, relay: Option<RelayOptIn>) -> ToolResult {
        let Some(spec) = self.resolve_now(name).await else {
            return ToolResult::error(format!("unknown tool '{name}'"));
        };
        self.call_spec(&spec, arguments, call_id, meta, relay).await
    }

    /// [`Self::call_with`] for a tool already looked up (e.g. an app-only tool of an MCP Apps
    /// host, see [`Self::resolve_for_app_host`]).
    pub async fn call_spec(&self, spec: &ToolSpec, arguments: Value, call_id: u64, meta: &Value, relay: Option<RelayOptIn>) -> ToolResult {
        let name = spec.name.as_str();
        let timer = match &spec.source {
            ToolSource::Builtin(_) => self.metrics.tool_call(&spec.provider_id, &spec.name),
            ToolSource::Module { app_id, tool_name } => self.metrics.tool_call(app_id, tool_name),
        };
        let (result, outcome) = self.run(spec, name, arguments, call_id, meta, relay).await;
        // An error with the app's result is the tool's own (`isError`); one without had no result
        // (the app is not running, refused the call with a JSON-RPC error, timed out…).
        timer.finish(outcome.unwrap_or(match (result.is_error, result.raw.is_some()) {
            (false, _) => ToolOutcome::Ok,
            (true, true) => ToolOutcome::Error,
            (true, false) => ToolOutcome::Failed,
        }));
        result
    }

    /// The call itself; the outcome when the result does not tell it (the module call failed).
    ///
    /// An app's tool is called the way a client's `tools/call` is forwarded
    /// ([`ModuleHost::forward`], one typed [`AppRequest`]), as the gateway itself
    /// (`any_provider`): the host has already applied the visibility rules, and the tool may be a
    /// standard server's. The answer is shaped for the model here ([`ToolResult::of_answer`]).
    async fn run(
        &self,
        spec: &ToolSpec,
        name: &str,
        arguments: Value,
        call_id: u64,
        meta: &Value,
        relay: Option<RelayOptIn>,
    ) -> (ToolResult, Option<ToolOutcome>) {
        let arguments = match arguments::check(arguments) {
            Ok(a) => a,
            Err(e) => return (ToolResult::error(format!("invalid arguments for tool '{name}': {e}")), None),
        };
        match &spec.source {
            ToolSource::Builtin(builtin) => (builtin::call(*builtin, &self.module, &arguments).await, None),
            ToolSource::Module { app_id, tool_name } => {
                let mut params = arguments::into_params(tool_name, arguments);
                if meta.is_object() {
                    params.insert("_meta".into(), meta.clone());
                }
                let request = AppRequest {
                    call_id,
                    app_id: app_id.as_str().into(),
                    method: "tools/call".into(),
                    params_json: serde_json::to_string(&params).unwrap_or_default().into(),
                    session_id: "".into(),
                    any_provider: true,
                    relay: relay.into(),
                };
                match self.module.forward(request).await {
                    Ok(answer) => (ToolResult::of_answer(app_id, answer, spec.ui_resource_uri.clone()), None),
                    Err(e) => {
                        let cancelled = e.code() == host_abi::ErrorCode::Cancelled;
                        (ToolResult::error(e), Some(if cancelled { ToolOutcome::Cancelled } else { ToolOutcome::Failed }))
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module_spec(app_id: &str, tool_name: &str, provider_id: &str) -> Arc<ToolSpec> {
        Arc::new(ToolSpec {
            name: format!("{app_id}.{tool_name}"),
            description: String::new(),
            input_schema: serde_json::json!({"type": "object"}),
            output_schema: None,
            meta: serde_json::json!({}),
            visible_to_model: true,
            visible_to_app: true,
            ui_resource_uri: None,
            extra: serde_json::json!({}),
            provider_id: provider_id.to_string(),
            source: ToolSource::Module { app_id: app_id.to_string(), tool_name: tool_name.to_string() },
        })
    }

    /// 100,000 tools over 10 apps, each (app, name) twice: a module tool is found by index, the
    /// first of its name as a scan from the start would find it (once a scan per call).
    #[test]
    fn module_tools_of_many_are_found_by_index_first_wins() {
        const N: usize = 100_000;
        let mut all: Vec<Arc<ToolSpec>> = builtin::specs().into_iter().map(Arc::new).collect();
        all.extend((0..N).map(|i| module_spec(&format!("app{}", i % 10), &format!("t{}", (i / 10) % (N / 20)), &format!("p{i}"))));
        let snapshot = Snapshot { by_module: Snapshot::index_modules(&all), all, ..Default::default() };
        let scan = |app_id: &str, tool_name: &str| {
            snapshot
                .all
                .iter()
                .find(|spec| matches!(&spec.source, ToolSource::Module { app_id: a, tool_name: t } if a == app_id && t == tool_name))
                .cloned()
        };
        let mut found = 0;
        for i in 0..N / 2 {
            let (app, name) = (format!("app{}", i % 10), format!("t{}", i / 10));
            let spec = snapshot.module_tool(&app, &name).expect("listed");
            assert_eq!(spec.provider_id, format!("p{i}"), "the first of its name");
            found += 1;
        }
        assert_eq!(found, N / 2);
        for (app, name) in [("app3", "t17"), ("app9", "t4999"), ("app0", "t0")] {
            assert_eq!(snapshot.module_tool(app, name), scan(app, name).as_ref(), "as a scan finds it");
        }
        assert!(snapshot.module_tool("app10", "t0").is_none());
        assert!(snapshot.module_tool("app0", "t5000").is_none());
        let builtin_name = builtin::specs().into_iter().next().map(|s| s.name);
        if let Some(name) = builtin_name {
            assert!(snapshot.module_tool("gateway", &name).is_none(), "built-ins are not module tools");
        }
    }
}
