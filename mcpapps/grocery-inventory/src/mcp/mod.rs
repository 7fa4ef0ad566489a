//! The MCP server: one [`GroceryServer`] per client session, all sharing one
//! [`InventoryService`].

mod completions;
mod elicitation;
mod prompts;
pub mod resources;
pub mod tools;

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::model::*;
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

use crate::data::{InventoryService, StockChange};

/// Per-session state: what the client subscribed to and the log level it asked for.
#[derive(Default)]
struct Session {
    subscriptions: Mutex<HashSet<String>>,
    watching: Mutex<bool>,
    #[allow(deprecated)]
    log_level: Mutex<Option<LoggingLevel>>,
}

/// The GroceryInventory MCP server for one session.
#[derive(Clone)]
pub struct GroceryServer {
    service: Arc<InventoryService>,
    session: Arc<Session>,
}

impl GroceryServer {
    pub fn new(service: Arc<InventoryService>) -> Self {
        GroceryServer {
            service,
            session: Arc::default(),
        }
    }

    /// Starts (once per session) the task that turns stock changes into
    /// `notifications/resources/updated` for the URIs this session subscribed to. It ends when
    /// the client goes away.
    fn watch_changes(&self, peer: Peer<RoleServer>) {
        let mut watching = self.session.watching.lock();
        if *watching {
            return;
        }
        *watching = true;
        let session = self.session.clone();
        let mut changes = self.service.subscribe();
        tokio::spawn(async move {
            loop {
                let change = tokio::select! {
                    change = changes.recv() => change,
                    // A quiet server still notices a client that left.
                    _ = tokio::time::sleep(Duration::from_secs(30)) => {
                        if peer.is_transport_closed() { break } else { continue }
                    }
                };
                let StockChange { store_id, product_id } = match change {
                    Ok(change) => change,
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => break,
                };
                let uris = [resources::store_summary_uri(store_id), resources::product_details_uri(product_id)];
                let wanted: Vec<String> = {
                    let subs = session.subscriptions.lock();
                    uris.into_iter().filter(|u| subs.contains(u)).collect()
                };
                for uri in wanted {
                    if let Err(e) = peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri)).await {
                        tracing::debug!("subscriber gone: {e}");
                        return;
                    }
                }
            }
        });
    }

    /// Sends a log notification when the client asked for this level (`logging/setLevel`).
    #[allow(deprecated)]
    async fn log(&self, peer: &Peer<RoleServer>, level: LoggingLevel, data: Value) {
        let Some(threshold) = *self.session.log_level.lock() else { return };
        if rank(level) >= rank(threshold) {
            let _ = peer
                .notify_logging_message(LoggingMessageNotificationParam::new(level, data).with_logger("grocery-inventory"))
                .await;
        }
    }
}

#[allow(deprecated)]
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

#[allow(deprecated)]
impl ServerHandler for GroceryServer {
    /// Up to 2025-11-25: this server asks for input with server-to-client requests
    /// (`elicitation/create`) and pushes `notifications/resources/updated` to subscribers, which
    /// the 2026-07-28 revision replaced with input-required results and `subscriptions/listen`.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_logging()
                .enable_completions()
                .enable_prompts()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_tools()
                .build(),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
        .with_server_info(
            Implementation::new("grocery-inventory", env!("CARGO_PKG_VERSION")).with_title("Grocery Inventory Dashboard"),
        )
        .with_instructions(
            "Multi-store grocery inventory. Start with get_stores; get_inventory and get_low_stock show stock; \
             adjust_stock and set_inventory change it; get_restock_recommendations and draft_purchase_order plan \
             reorders; show_store_inventory_dashboard opens the interactive dashboard.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools::definitions()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        let service = &*self.service;
        let name = request.name.as_ref();
        let outcome = match name {
            "get_categories" => tools::get_categories(service, args),
            "get_products" => tools::get_products(service, args),
            "get_suppliers" => tools::get_suppliers(service, args),
            "get_stores" => tools::get_stores(service, args),
            "get_inventory" => tools::get_inventory(service, args),
            "get_low_stock" => tools::get_low_stock(service, args),
            "set_inventory" => tools::set_inventory(service, args),
            "adjust_stock" => tools::adjust_stock(service, args),
            "get_restock_recommendations" => tools::get_restock_recommendations(service, args),
            "draft_purchase_order" => tools::draft_purchase_order(service, args),
            "show_store_inventory_dashboard" => tools::show_dashboard(service, args),
            "refresh_dashboard_data" => tools::refresh_dashboard(service, args),
            "guided_stock_count" => elicitation::guided_stock_count(service, &context.peer, args).await,
            "guided_purchase_order" => elicitation::guided_purchase_order(service, &context.peer, args).await,
            other => Err(tools::ToolError::UnknownTool(other.to_string())),
        };
        let result = match outcome {
            Ok(result) => {
                if matches!(name, "set_inventory" | "adjust_stock" | "guided_stock_count") {
                    if let Some(Value::Object(out)) = &result.structured_content {
                        self.log(&context.peer, LoggingLevel::Info, serde_json::json!({"tool": name, "result": out}))
                            .await;
                    }
                }
                result
            }
            Err(tools::ToolError::UnknownTool(tool)) => {
                return Err(McpError::invalid_params(format!("Unknown tool `{tool}`"), None));
            }
            Err(error) => {
                tracing::debug!(tool = name, %error, "tool error");
                error.into_result()
            }
        };
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(ListResourcesResult::with_all_items(resources::list()))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(resources::templates()))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        resources::read(&self.service, &request.uri).map(Into::into)
    }

    async fn subscribe(&self, request: SubscribeRequestParams, context: RequestContext<RoleServer>) -> Result<(), McpError> {
        resources::resolve(&self.service, &request.uri)?;
        self.session.subscriptions.lock().insert(request.uri);
        self.watch_changes(context.peer);
        Ok(())
    }

    async fn unsubscribe(&self, request: UnsubscribeRequestParams, _context: RequestContext<RoleServer>) -> Result<(), McpError> {
        self.session.subscriptions.lock().remove(&request.uri);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Ok(ListPromptsResult::with_all_items(prompts::list()))
    }

    async fn get_prompt(&self, request: GetPromptRequestParams, _context: RequestContext<RoleServer>) -> Result<GetPromptResponse, McpError> {
        prompts::get(&self.service, &request.name, &request.arguments).map(Into::into)
    }

    async fn complete(&self, request: CompleteRequestParams, _context: RequestContext<RoleServer>) -> Result<CompleteResult, McpError> {
        Ok(completions::complete(&self.service, &request))
    }

    async fn set_level(&self, request: SetLevelRequestParams, _context: RequestContext<RoleServer>) -> Result<(), McpError> {
        *self.session.log_level.lock() = Some(request.level);
        Ok(())
    }
}
