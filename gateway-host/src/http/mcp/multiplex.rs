//! Everything the apps offer besides tools, through `/mcp` (SPEC R46): resources, resource
//! templates, prompts, completions, resource subscriptions and log messages of every MCP App and
//! every standard or workspace MCP server, as one MCP server.
//!
//! Each request goes to the app it names — by a rewritten resource URI (`namespacing.rs`) or a
//! prefixed prompt name — over the module's forward, on the app's one gateway-managed upstream
//! session: the session the model's tool calls and `/apps/mcp/{appId}` use too, so a UI read
//! through `/mcp` sees the state the calls made. Lists fan out to the Running apps in discovery
//! order, a page at a time, with cursors that name the app to go on at. What the apps send
//! unasked (list changes, resource updates, log messages) comes from the module's events, named
//! the same way, for the endpoint's sessions to pass on ([`Change`]).

use std::collections::HashSet;
use std::sync::Arc;

use host_abi::payloads::{AppDetail, AppState, ProviderKind};
use host_abi::{jsonrpc, AppRequest, EventKind};
use parking_lot::RwLock;
use rmcp::ErrorData;
use serde_json::{json, Map, Value};
use tokio::sync::broadcast;

use super::namespacing::{restore_uri, rewrite_uri, Cursor};
use crate::module::host::{HostEvent, ModuleHost};
use crate::metrics::Metrics;
use crate::module::listed::Listed;

/// How many items one page of a list gathers before it ends at an app's boundary.
const PAGE_ITEMS: usize = 200;

/// One app or standard server as `/mcp` multiplexes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Provider {
    /// Its registry key: the app id, or `mcp:{id}`.
    pub key: String,
    /// Its tool-name prefix, which its prompts carry too.
    pub prefix: String,
    /// Its state (`running`, `failed`, …).
    pub state: String,
    pub running: bool,
    /// Whether it can serve at all (not disabled, its definition valid).
    pub admitted: bool,
    /// Its `ServerCapabilities` from the handshake, or what its manifest and catalog suggest
    /// before it has one.
    pub capabilities: Map<String, Value>,
}

impl Provider {
    pub fn offers(&self, capability: &str) -> bool {
        self.capabilities.get(capability).is_some_and(|c| !c.is_null())
    }

    fn serves(&self, capability: &str) -> bool {
        self.running && self.offers(capability)
    }
}

/// What the apps offer together: what `/mcp` declares.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Offered {
    pub resources: bool,
    pub subscribe: bool,
    pub prompts: bool,
    pub completions: bool,
    pub logging: bool,
}

/// Something the apps sent unasked, named as `/mcp` names it.
#[derive(Debug, Clone)]
pub enum Change {
    ResourcesListChanged,
    PromptsListChanged,
    /// `notifications/resources/updated` of a resource (its `/mcp` URI).
    ResourceUpdated(String),
    /// `notifications/message`'s params, its `logger` naming the app.
    Log(Value),
}

/// The lists `/mcp` multiplexes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum List {
    Resources,
    ResourceTemplates,
    Prompts,
}

impl List {
    fn method(self) -> &'static str {
        match self {
            List::Resources => "resources/list",
            List::ResourceTemplates => "resources/templates/list",
            List::Prompts => "prompts/list",
        }
    }

    /// The result's key holding the items.
    pub fn items_key(self) -> &'static str {
        match self {
            List::Resources => "resources",
            List::ResourceTemplates => "resourceTemplates",
            List::Prompts => "prompts",
        }
    }

    fn capability(self) -> &'static str {
        match self {
            List::Prompts => "prompts",
            _ => "resources",
        }
    }

    /// One item of `provider`'s, as `/mcp` lists it.
    fn rename(self, provider: &Provider, item: &mut Value) {
        let Some(item) = item.as_object_mut() else { return };
        let (key, rename): (&str, &dyn Fn(&str) -> String) = match self {
            List::Resources => ("uri", &|uri| rewrite_uri(&provider.key, uri)),
            List::ResourceTemplates => ("uriTemplate", &|uri| rewrite_uri(&provider.key, uri)),
            List::Prompts => ("name", &|name| format!("{}{name}", provider.prefix)),
        };
        if let Some(Value::String(value)) = item.get_mut(key) {
            *value = rename(value);
        }
    }
}

/// The providers and their changes, shared by every `/mcp` session.
pub struct Multiplexer {
    module: Arc<ModuleHost>,
    /// Where its listings of the module are counted.
    metrics: Arc<Metrics>,
    providers: RwLock<Arc<Vec<Provider>>>,
    /// When `providers` was listed: a key or prefix they lack lists again only after news of
    /// the module.
    listed: Listed,
    changes: broadcast::Sender<Change>,
}

impl Multiplexer {
    pub fn new(module: Arc<ModuleHost>, metrics: Arc<Metrics>) -> Arc<Multiplexer> {
        let (changes, _) = broadcast::channel(256);
        Arc::new(Multiplexer { module, metrics, providers: RwLock::new(Arc::new(Vec::new())), listed: Listed::default(), changes })
    }

    /// The changes the apps send, named as `/mcp` names them.
    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    pub fn providers(&self) -> Arc<Vec<Provider>> {
        self.providers.read().clone()
    }

    /// What the admitted providers offer together.
    pub fn offered(&self) -> Offered {
        let providers = self.providers();
        let any = |capability: &str| providers.iter().any(|p| p.admitted && p.offers(capability));
        Offered {
            resources: any("resources"),
            subscribe: providers.iter().any(|p| p.admitted && p.capabilities.get("resources").is_some_and(|r| r["subscribe"] == true)),
            prompts: any("prompts"),
            completions: any("completions"),
            logging: any("logging"),
        }
    }

    /// Re-reads the apps from the module; tells subscribers which lists changed with them.
    pub async fn refresh(&self) {
        self.listed.again(|| self.module.app_changes_heard(), || self.relist()).await;
    }

    /// [`Self::refresh`] if the module reported anything since the last one ([`Listed`]).
    async fn refresh_if_changed(&self) {
        self.listed.if_heard_since(|| self.module.app_changes_heard(), || self.relist()).await;
    }

    /// The listing of [`Self::refresh`]; whether the module answered it.
    async fn relist(&self) -> bool {
        self.metrics.module_listing("apps");
        let apps = match self.module.list_apps().await {
            Ok(apps) => apps,
            Err(e) => {
                tracing::warn!("cannot list the module's apps: {e}");
                return false;
            }
        };
        let providers: Vec<Provider> = apps.iter().map(provider_of).collect();
        let before = std::mem::replace(&mut *self.providers.write(), Arc::new(providers.clone()));
        let serving = |list: &[Provider], capability: &str| -> Vec<String> {
            list.iter().filter(|p| p.serves(capability)).map(|p| p.key.clone()).collect()
        };
        if serving(&before, "resources") != serving(&providers, "resources") {
            let _ = self.changes.send(Change::ResourcesListChanged);
        }
        if serving(&before, "prompts") != serving(&providers, "prompts") {
            let _ = self.changes.send(Change::PromptsListChanged);
        }
        true
    }

    /// Follows the module's events: app changes refresh the providers (as the tool registry
    /// does, [`ModuleHost::follow_app_changes`]), the apps' own notifications become [`Change`]s.
    pub fn follow_module(self: &Arc<Self>) {
        let (me, notified) = (self.clone(), self.clone());
        let each = move |event: &HostEvent| {
            if event.kind == EventKind::UpstreamNotification {
                notified.pass_on(event);
            }
        };
        self.module.follow_app_changes(each, move || {
            let me = me.clone();
            async move { me.refresh().await }
        });
    }

    /// One of an app's own notifications, as the [`Change`] `/mcp` passes on.
    fn pass_on(&self, event: &HostEvent) {
        let params = &event.payload["params"];
        let change = match event.payload["method"].as_str() {
            Some("notifications/resources/list_changed") => Change::ResourcesListChanged,
            Some("notifications/prompts/list_changed") => Change::PromptsListChanged,
            Some("notifications/resources/updated") => match params["uri"].as_str() {
                Some(uri) => Change::ResourceUpdated(rewrite_uri(&event.app_id, uri)),
                None => return,
            },
            Some("notifications/message") => {
                let mut params = params.clone();
                let logger = match params["logger"].as_str() {
                    Some(logger) => format!("{}/{logger}", event.app_id),
                    None => event.app_id.clone(),
                };
                params["logger"] = json!(logger);
                Change::Log(params)
            }
            _ => return,
        };
        let _ = self.changes.send(change);
    }

    /// The provider named `key`, if it is Running; else the error naming why not (its state).
    /// One that is not Running in the last snapshot gets one refresh first if the module reported
    /// a change since: an app that has just come up is served before the debounced event refresh
    /// lands (a client that saw it running in `/apps/health` must not be told otherwise), as the
    /// tool registry's `resolve_now` does.
    async fn running(&self, key: &str) -> Result<Provider, ErrorData> {
        let find = || self.providers().iter().find(|p| p.key == key).cloned();
        let provider = match find() {
            Some(p) if p.running => return Ok(p),
            _ => {
                self.refresh_if_changed().await;
                find()
            }
        };
        match provider {
            Some(p) if p.running => Ok(p),
            Some(p) => Err(unavailable(key, format!("McpApp '{key}' is not running (state: {})", p.state), json!(p.state))),
            None => Err(unavailable(key, format!("Unknown McpApp '{key}'"), Value::Null)),
        }
    }

    /// One page of a list, across the apps that serve it.
    pub async fn list(&self, list: List, cursor: Option<&str>) -> Result<Value, ErrorData> {
        let providers: Vec<Provider> = self.providers().iter().filter(|p| p.serves(list.capability())).cloned().collect();
        let (start, upstream) = match cursor {
            None => (0, None),
            Some(text) => {
                let cursor = Cursor::decode(text).ok_or_else(|| {
                    // Named by its start only: a client's cursor may be any size.
                    let shown: String = text.chars().take(40).collect();
                    let more = if shown.len() < text.len() { "…" } else { "" };
                    ErrorData::invalid_params(format!("'{shown}{more}' is not a cursor of this list"), None)
                })?;
                let Some(index) = providers.iter().position(|p| p.key == cursor.provider) else {
                    return Err(ErrorData::invalid_params(
                        format!("the cursor goes on at McpApp '{}', which no longer serves {}; list again from the start", cursor.provider, list.method()),
                        None,
                    ));
                };
                (index, cursor.upstream)
            }
        };
        // Asked all at once (an app slow to answer delays the page by its own time only); a
        // page that ends early leaves the later answers unused.
        let asked = providers[start..].iter().enumerate().map(|(i, provider)| {
            let params = match (i, &upstream) {
                (0, Some(cursor)) => json!({ "cursor": cursor }),
                _ => json!({}),
            };
            self.request(&provider.key, list.method(), params)
        });
        let answers = futures::future::join_all(asked).await;
        let mut items = Vec::new();
        for ((index, provider), answer) in providers.iter().enumerate().skip(start).zip(answers) {
            let mut result = match answer {
                Ok(result) => result,
                // One app failing its list does not take the others' down with it.
                Err(e) if index > start || cursor.is_none() => {
                    tracing::warn!(app = %provider.key, "{} of McpApp '{}' failed, leaving it out: {}", list.method(), provider.key, e.message);
                    continue;
                }
                Err(e) => return Err(e),
            };
            if let Some(Value::Array(page)) = result.get_mut(list.items_key()).map(Value::take) {
                for mut item in page {
                    list.rename(provider, &mut item);
                    items.push(item);
                }
            }
            if let Some(next) = result.get("nextCursor").and_then(Value::as_str) {
                return Ok(page_of(list, items, Some(Cursor { provider: provider.key.clone(), upstream: Some(next.to_string()) })));
            }
            if items.len() >= PAGE_ITEMS {
                if let Some(next) = providers.get(index + 1) {
                    return Ok(page_of(list, items, Some(Cursor { provider: next.key.clone(), upstream: None })));
                }
            }
        }
        Ok(page_of(list, items, None))
    }

    /// The app and its own URI for a URI `/mcp` gave out.
    pub async fn resource_owner(&self, uri: &str) -> Result<(Provider, String), ErrorData> {
        let Some((key, original)) = restore_uri(uri) else {
            return Err(not_ours(uri));
        };
        match self.running(&key).await {
            Ok(provider) => Ok((provider, original)),
            // Not an app's: the URI is no URI of ours, whatever its shape.
            Err(e) if e.data.as_ref().is_some_and(|d| d["state"].is_null()) => Err(not_ours(uri)),
            Err(e) => Err(e),
        }
    }

    /// The app and its own name for a prompt `/mcp` lists (prefix + the app's name). When
    /// several apps' prefixes fit, the first in discovery order that has the prompt serves it.
    pub async fn prompt_owner(&self, name: &str) -> Result<(Provider, String), ErrorData> {
        let fits = |p: &Provider| p.serves("prompts") && name.starts_with(&p.prefix);
        if !self.providers().iter().any(fits) {
            self.refresh_if_changed().await;
        }
        let candidates: Vec<Provider> = self.providers().iter().filter(|p| fits(p)).cloned().collect();
        if let [only] = candidates.as_slice() {
            return Ok((only.clone(), name[only.prefix.len()..].to_string()));
        }
        for provider in candidates {
            let own = &name[provider.prefix.len()..];
            if self.has_prompt(&provider, own).await {
                return Ok((provider, own.to_string()));
            }
        }
        Err(ErrorData::invalid_params(format!("unknown prompt '{name}'"), None))
    }

    async fn has_prompt(&self, provider: &Provider, name: &str) -> bool {
        lists_prompt(name, |params| self.request(&provider.key, "prompts/list", params)).await
    }

    /// Sends one request that asks its client nothing (a list, a subscription, a level) to an
    /// app: its result, or its error as the app sent it.
    pub async fn request(&self, key: &str, method: &str, params: Value) -> Result<Value, ErrorData> {
        let params = match params {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        let request = AppRequest { any_provider: true, ..super::mcp_relay::app_request(self.module.next_call_id(), key, method, &params) };
        super::answer::result_of(key, method, self.module.forward(request).await)
    }

    /// `logging/setLevel`, to every Running app that offers logging; the first refusal is the
    /// answer (the others still got the level).
    pub async fn set_level(&self, level: &Value) -> Result<(), ErrorData> {
        let providers: Vec<Provider> = self.providers().iter().filter(|p| p.serves("logging")).cloned().collect();
        let mut first_error = None;
        for provider in providers {
            if let Err(e) = self.request(&provider.key, "logging/setLevel", json!({ "level": level })).await {
                tracing::debug!(app = %provider.key, "logging/setLevel: {}", e.message);
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

fn page_of(list: List, items: Vec<Value>, next: Option<Cursor>) -> Value {
    let mut page = json!({ list.items_key(): items });
    if let Some(next) = next {
        page["nextCursor"] = json!(next.encode());
    }
    page
}

fn not_ours(uri: &str) -> ErrorData {
    ErrorData::resource_not_found(
        format!("'{uri}' names no resource of this gateway's apps (its URIs are the apps' own with the app in front: see resources/list)"),
        Some(json!({ "uri": uri })),
    )
}

fn unavailable(key: &str, message: String, state: Value) -> ErrorData {
    ErrorData::new(rmcp::model::ErrorCode(jsonrpc::APP_UNAVAILABLE), message, Some(json!({ "appId": key, "state": state })))
}

/// What the gateway knows of an app or server, as a [`Provider`].
fn provider_of(app: &host_abi::AppDescriptor) -> Provider {
    let detail = crate::module::payloads::app_detail(app.detail_json.as_str());
    let state = app.state();
    let capabilities = offered_capabilities(app, &detail);
    Provider {
        key: app.id.to_string(),
        prefix: app.tool_name_prefix.to_string(),
        state: app.state().to_string(),
        running: state == AppState::Running,
        admitted: state != AppState::Disabled && app.validation_errors.is_empty() && detail.kind != ProviderKind::Unknown,
        capabilities,
    }
}

/// An app's `ServerCapabilities`: its own declaration from its handshake (without
/// `experimental`); before it has one, an estimate from its manifest and catalog.
pub fn offered_capabilities(app: &host_abi::AppDescriptor, detail: &AppDetail) -> Map<String, Value> {
    if let Some(mut own) = detail.server.as_ref().and_then(|s| s.capabilities.clone()) {
        own.remove("experimental");
        return own;
    }
    let declared: Vec<String> = detail.manifest.as_ref().map(|m| m.capabilities.clone()).unwrap_or_default();
    let offers = |name: &str, count: u32| count > 0 || declared.iter().any(|d| d == name);
    let mut caps = Map::new();
    if offers("tools", app.tool_count) {
        caps.insert("tools".into(), json!({ "listChanged": true }));
    }
    if offers("resources", app.resource_count + app.resource_template_count) {
        caps.insert("resources".into(), json!({ "listChanged": true }));
    }
    if offers("prompts", app.prompt_count) {
        caps.insert("prompts".into(), json!({ "listChanged": true }));
    }
    for name in ["completions", "logging"] {
        if declared.iter().any(|d| d == name) {
            caps.insert(name.into(), json!({}));
        }
    }
    caps
}

/// The most pages of an app's `prompts/list` [`lists_prompt`] reads, as `Session::list_all`
/// (mcpapp-plugin) reads of any list: an app whose every page names a next one must not keep
/// `prompts/get` going for ever.
const MAX_PROMPT_PAGES: usize = 1000;

/// Whether the pages `list` gives (`prompts/list` results, asked with the params it is passed)
/// name prompt `name`. It stops at the first page that does, at a page that fails or names no
/// next page (or an empty one, or one already read), and after [`MAX_PROMPT_PAGES`].
async fn lists_prompt<F, Fut>(name: &str, mut list: F) -> bool
where
    F: FnMut(Value) -> Fut,
    Fut: std::future::Future<Output = Result<Value, ErrorData>>,
{
    let mut seen: HashSet<String> = HashSet::new();
    let mut cursor: Option<String> = None;
    for _page in 0..MAX_PROMPT_PAGES {
        let params = cursor.take().map(|c| json!({ "cursor": c })).unwrap_or_else(|| json!({}));
        let Ok(result) = list(params).await else { return false };
        if result["prompts"].as_array().is_some_and(|p| p.iter().any(|p| p["name"] == name)) {
            return true;
        }
        match result["nextCursor"].as_str() {
            Some(next) if !next.is_empty() && seen.insert(next.to_string()) => cursor = Some(next.to_string()),
            _ => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_items_are_renamed_per_provider() {
        let provider = Provider { key: "grocery-inventory".into(), prefix: "grocery.".into(), state: "running".into(), running: true, admitted: true, capabilities: Map::new() };
        let mut prompt = json!({ "name": "draft_supplier_order" });
        List::Prompts.rename(&provider, &mut prompt);
        assert_eq!(prompt["name"], "grocery.draft_supplier_order");
        let mut template = json!({ "uriTemplate": "inventory://stores/{storeId}/summary" });
        List::ResourceTemplates.rename(&provider, &mut template);
        assert_eq!(template["uriTemplate"], "inventory://grocery-inventory/stores/{storeId}/summary");
    }

    /// A page of `prompts/list` naming `names`, and `next` as its next page.
    fn prompt_page(names: &[&str], next: Option<String>) -> Value {
        let prompts: Vec<Value> = names.iter().map(|n| json!({ "name": n })).collect();
        match next {
            Some(next) => json!({ "prompts": prompts, "nextCursor": next }),
            None => json!({ "prompts": prompts }),
        }
    }

    /// An app that names a new next page every time: the search gives up after the page cap
    /// (it went on for ever before).
    #[tokio::test]
    async fn a_prompt_search_stops_after_the_page_cap() {
        let mut asked = 0usize;
        let found = lists_prompt("wanted", |params| {
            asked += 1;
            let expected = if asked == 1 { json!({}) } else { json!({ "cursor": format!("c{}", asked - 1) }) };
            assert_eq!(params, expected, "each page asked with the cursor the last one named");
            let page = prompt_page(&["other"], Some(format!("c{asked}")));
            async move { Ok(page) }
        })
        .await;
        assert!(!found);
        assert_eq!(asked, MAX_PROMPT_PAGES);
    }

    /// Cursors that come round again (A → B → A …) end the search; so does an empty one, and a
    /// failing page. A prompt on a later page is found.
    #[tokio::test]
    async fn a_prompt_search_stops_on_a_repeated_cursor() {
        let mut asked = 0usize;
        let found = lists_prompt("wanted", |_| {
            asked += 1;
            let page = prompt_page(&["other"], Some(if asked % 2 == 1 { "A" } else { "B" }.to_string()));
            async move { Ok(page) }
        })
        .await;
        assert!(!found);
        assert_eq!(asked, 3, "first page, A, B; A again is not read");

        let mut asked = 0usize;
        let found = lists_prompt("wanted", |_| {
            asked += 1;
            async move { Ok(prompt_page(&[], Some(String::new()))) }
        })
        .await;
        assert!(!found);
        assert_eq!(asked, 1);

        let found = lists_prompt("wanted", |_| async { Err(ErrorData::internal_error("down", None)) }).await;
        assert!(!found);

        let mut asked = 0usize;
        let found = lists_prompt("wanted", |_| {
            asked += 1;
            let page = if asked < 5 { prompt_page(&["other"], Some(format!("c{asked}"))) } else { prompt_page(&["x", "wanted"], Some("more".into())) };
            async move { Ok(page) }
        })
        .await;
        assert!(found);
        assert_eq!(asked, 5);
    }
}
