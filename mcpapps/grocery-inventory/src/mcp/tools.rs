//! The MCP tools: their definitions (name, description, input and output schema, `_meta`) and
//! the synchronous ones' implementations. The elicitation tools live in [`super::elicitation`]
//! because they talk back to the client.
//!
//! Arguments are parsed by hand from the raw JSON instead of through rmcp's `Parameters<T>`
//! extractor so that a bad argument becomes a *tool error* (`isError: true`) whose text names
//! the argument, which a model can read and correct, rather than an opaque JSON-RPC error.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use rmcp::model::{CallToolResult, ContentBlock, MetaObject, Tool, ToolAnnotations};

use crate::dashboard::DASHBOARD_URI;
use crate::data::{InventoryError, InventoryService};
use crate::model::*;
use crate::schema;

/// Why a tool call failed; shown to the caller as the text of an `isError` result.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The arguments did not match the input schema; the message names the argument.
    #[error("{0}")]
    InvalidArguments(String),
    #[error(transparent)]
    Inventory(#[from] InventoryError),
    /// The user or the client stopped an interactive tool.
    #[error("{0}")]
    Interaction(String),
    #[error("Unknown tool `{0}`")]
    UnknownTool(String),
}

impl ToolError {
    pub fn into_result(self) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text(format!("Error: {self}"))])
    }
}

/// Parses tool arguments into `T`, naming the offending argument on failure.
pub fn parse_args<T: DeserializeOwned>(arguments: Value) -> Result<T, ToolError> {
    serde_path_to_error::deserialize::<_, T>(arguments).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." || path.is_empty() {
            // Missing fields and whole-object problems: serde's message already names the field.
            ToolError::InvalidArguments(format!("Invalid arguments: {inner}"))
        } else {
            ToolError::InvalidArguments(format!("Invalid argument `{path}`: {inner}"))
        }
    })
}

/// A successful result carrying `value` as `structuredContent`, plus a one-line summary and the
/// same JSON as text for clients that do not read structured content.
pub fn structured<T: Serialize>(summary: impl Into<String>, value: &T) -> CallToolResult {
    let value = serde_json::to_value(value).expect("tool outputs serialize");
    let mut result = CallToolResult::success(vec![
        ContentBlock::text(summary.into()),
        ContentBlock::text(value.to_string()),
    ]);
    result.structured_content = Some(value);
    result
}

// ----- argument types ---------------------------------------------------------------------

/// No arguments.
#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetProductsArgs {
    /// Only products of this category (see get_categories).
    pub category_id: Option<u32>,
    /// Only products whose name or SKU contains this text (case-insensitive).
    pub search: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetInventoryArgs {
    /// The store (see get_stores).
    pub store_id: u32,
    /// Only this product's row.
    pub product_id: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct OptionalStoreArgs {
    /// One store (see get_stores); all stores when omitted.
    pub store_id: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetInventoryArgs {
    pub store_id: u32,
    pub product_id: u32,
    /// The counted quantity on hand.
    #[schemars(range(min = 0))]
    pub quantity: i64,
    /// A new reorder threshold for this row.
    #[schemars(range(min = 0))]
    pub reorder_threshold: Option<i64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdjustStockArgs {
    pub store_id: u32,
    pub product_id: u32,
    /// Units to add (delivery) or, when negative, remove (sale, waste). Not 0.
    pub delta: i64,
    /// Why the stock changed, e.g. "delivery" or "spoilage".
    pub reason: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrderItemArg {
    pub product_id: u32,
    #[schemars(range(min = 1))]
    pub quantity: i64,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DraftPurchaseOrderArgs {
    pub store_id: u32,
    /// The supplier to order from; by default the one with the most low-stock products.
    pub supplier_id: Option<u32>,
    /// Delivery urgency: routine (7 days), urgent (2 days) or emergency (same day).
    pub urgency: Option<Urgency>,
    /// Explicit lines; by default the supplier's restock recommendations for the store.
    pub items: Option<Vec<OrderItemArg>>,
    pub notes: Option<String>,
}

// ----- output types -----------------------------------------------------------------------

#[derive(Debug, Serialize, JsonSchema)]
pub struct CategoriesOut {
    pub categories: Vec<Category>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ProductsOut {
    pub products: Vec<Product>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SuppliersOut {
    pub suppliers: Vec<Supplier>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct StoresOut {
    pub stores: Vec<Store>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct InventoryOut {
    pub store: Store,
    pub items: Vec<InventoryView>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct LowStockOut {
    pub items: Vec<InventoryView>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InventoryChangeOut {
    pub item: InventoryView,
    pub previous_quantity: i64,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecommendationsOut {
    pub recommendations: Vec<RestockRecommendation>,
    pub total_estimated_cost: f64,
}

/// What the dashboard renders.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DashboardData {
    pub title: String,
    /// The store the user asked for, if any; the dashboard opens on it.
    pub selected_store_id: Option<u32>,
    pub stores: Vec<StoreInventory>,
    pub low_stock_total: usize,
}

// ----- definitions ------------------------------------------------------------------------

fn tool<I: JsonSchema, O: JsonSchema>(name: &'static str, title: &str, description: &'static str) -> Tool {
    Tool::new(name, description, schema::input::<I>())
        .with_title(title)
        .with_raw_output_schema(schema::output::<O>())
}

fn read_only() -> ToolAnnotations {
    ToolAnnotations::new().read_only(true).destructive(false).open_world(false)
}

fn writes() -> ToolAnnotations {
    ToolAnnotations::new().read_only(false).destructive(false).open_world(false)
}

fn ui_meta(visibility: Option<&[&str]>) -> MetaObject {
    let mut ui = json!({ "resourceUri": DASHBOARD_URI });
    if let Some(v) = visibility {
        ui["visibility"] = json!(v);
    }
    let mut meta = MetaObject::new();
    meta.insert("ui".into(), ui);
    // The pre-standard key some hosts still read.
    meta.insert("ui/resourceUri".into(), json!(DASHBOARD_URI));
    meta
}

/// Every tool this server offers, in a stable order.
pub fn definitions() -> Vec<Tool> {
    vec![
        tool::<NoArgs, CategoriesOut>("get_categories", "Get categories", "List the product categories.")
            .with_annotations(read_only()),
        tool::<GetProductsArgs, ProductsOut>(
            "get_products",
            "Get products",
            "List products, optionally filtered by category or by a search text.",
        )
        .with_annotations(read_only()),
        tool::<NoArgs, SuppliersOut>("get_suppliers", "Get suppliers", "List the suppliers and their contact details.")
            .with_annotations(read_only()),
        tool::<NoArgs, StoresOut>("get_stores", "Get stores", "List the stores of the chain.").with_annotations(read_only()),
        tool::<GetInventoryArgs, InventoryOut>(
            "get_inventory",
            "Get store inventory",
            "Stock levels of every product in one store (or of one product there), with low-stock flags.",
        )
        .with_annotations(read_only()),
        tool::<OptionalStoreArgs, LowStockOut>(
            "get_low_stock",
            "Get low stock",
            "Inventory rows below their reorder threshold, in one store or in all stores.",
        )
        .with_annotations(read_only()),
        tool::<SetInventoryArgs, InventoryChangeOut>(
            "set_inventory",
            "Set inventory",
            "Record a counted quantity (and optionally a new reorder threshold) for a product in a store.",
        )
        .with_annotations(writes().idempotent(true)),
        tool::<AdjustStockArgs, InventoryChangeOut>(
            "adjust_stock",
            "Adjust stock",
            "Add (delivery) or remove (sale, waste) units of a product in a store. Subscribers of the store's \
             summary resource are notified.",
        )
        .with_annotations(writes()),
        tool::<OptionalStoreArgs, RecommendationsOut>(
            "get_restock_recommendations",
            "Get restock recommendations",
            "For each low-stock row, how much to reorder (back to twice the threshold), from whom, and at what cost.",
        )
        .with_annotations(read_only()),
        tool::<DraftPurchaseOrderArgs, PurchaseOrder>(
            "draft_purchase_order",
            "Draft purchase order",
            "Draft (not send) a purchase order for a store: by default the restock recommendations of the \
             supplier with the most low-stock products there.",
        )
        .with_annotations(writes().idempotent(false)),
        tool::<OptionalStoreArgs, DashboardData>(
            "show_store_inventory_dashboard",
            "Show store inventory dashboard",
            "Show the interactive inventory dashboard: stock per store with low stock highlighted; quantities \
             can be adjusted in place.",
        )
        .with_annotations(read_only())
        .with_meta(ui_meta(None)),
        tool::<OptionalStoreArgs, DashboardData>(
            "refresh_dashboard_data",
            "Refresh dashboard data",
            "Current dashboard data. Called by the dashboard itself, not meant for the model.",
        )
        .with_annotations(read_only())
        .with_meta(ui_meta(Some(&["app"]))),
        tool::<super::elicitation::GuidedStockCountArgs, super::elicitation::StockCountOut>(
            "guided_stock_count",
            "Guided stock count",
            "Walk the user through counting stock step by step (store, product, counted quantity, confirmation) \
             and record the count. Needs a client that supports elicitation.",
        )
        .with_annotations(writes().idempotent(true)),
        tool::<super::elicitation::GuidedPurchaseOrderArgs, super::elicitation::GuidedPurchaseOrderOut>(
            "guided_purchase_order",
            "Guided purchase order",
            "Ask the user step by step (store, supplier, urgency, notes, confirmation) and draft a purchase order. \
             Needs a client that supports elicitation.",
        )
        .with_annotations(writes()),
    ]
}

// ----- implementations --------------------------------------------------------------------

pub fn get_categories(service: &InventoryService, args: Value) -> Result<CallToolResult, ToolError> {
    parse_args::<NoArgs>(args)?;
    let categories = service.categories();
    Ok(structured(format!("{} categories", categories.len()), &CategoriesOut { categories }))
}

pub fn get_products(service: &InventoryService, args: Value) -> Result<CallToolResult, ToolError> {
    let args: GetProductsArgs = parse_args(args)?;
    let products = service.products(args.category_id, args.search.as_deref())?;
    Ok(structured(format!("{} products", products.len()), &ProductsOut { products }))
}

pub fn get_suppliers(service: &InventoryService, args: Value) -> Result<CallToolResult, ToolError> {
    parse_args::<NoArgs>(args)?;
    let suppliers = service.suppliers();
    Ok(structured(format!("{} suppliers", suppliers.len()), &SuppliersOut { suppliers }))
}

pub fn get_stores(service: &InventoryService, args: Value) -> Result<CallToolResult, ToolError> {
    parse_args::<NoArgs>(args)?;
    let stores = service.stores();
    let names: Vec<String> = stores.iter().map(|s| format!("{} ({}, {})", s.name, s.city, s.state)).collect();
    Ok(structured(format!("{} stores: {}", stores.len(), names.join("; ")), &StoresOut { stores }))
}

pub fn get_inventory(service: &InventoryService, args: Value) -> Result<CallToolResult, ToolError> {
    let args: GetInventoryArgs = parse_args(args)?;
    let items = service.inventory(args.store_id, args.product_id)?;
    let store = service.store(args.store_id)?;
    let low = items.iter().filter(|i| i.is_low_stock).count();
    Ok(structured(
        format!("{}: {} inventory rows, {} below reorder threshold", store.name, items.len(), low),
        &InventoryOut { store, items },
    ))
}

pub fn get_low_stock(service: &InventoryService, args: Value) -> Result<CallToolResult, ToolError> {
    let args: OptionalStoreArgs = parse_args(args)?;
    let items = service.low_stock(args.store_id)?;
    Ok(structured(format!("{} rows below reorder threshold", items.len()), &LowStockOut { items }))
}

pub fn set_inventory(service: &InventoryService, args: Value) -> Result<CallToolResult, ToolError> {
    let args: SetInventoryArgs = parse_args(args)?;
    let previous_quantity = service
        .inventory(args.store_id, Some(args.product_id))?
        .first()
        .map(|r| r.quantity_on_hand)
        .unwrap_or_default();
    let item = service.set_inventory(args.store_id, args.product_id, args.quantity, args.reorder_threshold)?;
    Ok(structured(
        format!(
            "{} at {}: quantity set from {} to {}",
            item.product_name, item.store_name, previous_quantity, item.quantity_on_hand
        ),
        &InventoryChangeOut { item, previous_quantity },
    ))
}

pub fn adjust_stock(service: &InventoryService, args: Value) -> Result<CallToolResult, ToolError> {
    let args: AdjustStockArgs = parse_args(args)?;
    let (previous_quantity, item) = service.adjust_stock(args.store_id, args.product_id, args.delta)?;
    let reason = args.reason.map(|r| format!(" ({r})")).unwrap_or_default();
    Ok(structured(
        format!(
            "{} at {}: {} → {} ({:+}){}",
            item.product_name, item.store_name, previous_quantity, item.quantity_on_hand, args.delta, reason
        ),
        &InventoryChangeOut { item, previous_quantity },
    ))
}

pub fn get_restock_recommendations(service: &InventoryService, args: Value) -> Result<CallToolResult, ToolError> {
    let args: OptionalStoreArgs = parse_args(args)?;
    let recommendations = service.restock_recommendations(args.store_id)?;
    let total = (recommendations.iter().map(|r| r.estimated_cost).sum::<f64>() * 100.0).round() / 100.0;
    Ok(structured(
        format!("{} restock recommendations, estimated ${total:.2}", recommendations.len()),
        &RecommendationsOut {
            recommendations,
            total_estimated_cost: total,
        },
    ))
}

pub fn draft_purchase_order(service: &InventoryService, args: Value) -> Result<CallToolResult, ToolError> {
    let args: DraftPurchaseOrderArgs = parse_args(args)?;
    let items: Option<Vec<(u32, i64)>> = args
        .items
        .map(|items| items.into_iter().map(|i| (i.product_id, i.quantity)).collect());
    let po = service.draft_purchase_order(
        args.store_id,
        args.supplier_id,
        args.urgency.unwrap_or_default(),
        items.as_deref(),
        args.notes,
    )?;
    Ok(structured(purchase_order_summary(&po), &po))
}

pub fn purchase_order_summary(po: &PurchaseOrder) -> String {
    format!(
        "Draft {} for {} from {}: {} lines, total ${:.2}, {} delivery by {}",
        po.po_number,
        po.store.name,
        po.supplier.name,
        po.lines.len(),
        po.total,
        po.urgency.as_str(),
        po.requested_delivery
    )
}

/// The data behind the dashboard, for one store or all of them.
pub fn dashboard_data(service: &InventoryService, store_id: Option<u32>) -> Result<DashboardData, InventoryError> {
    let stores = match store_id {
        Some(id) => vec![service.store_inventory(id)?],
        None => service.all_store_inventories(),
    };
    let low_stock_total = stores.iter().map(|s| s.totals.low_stock_count).sum();
    let title = match store_id {
        Some(_) => format!("{} inventory", stores[0].store.name),
        None => "Store inventory".to_string(),
    };
    Ok(DashboardData {
        title,
        selected_store_id: store_id,
        stores,
        low_stock_total,
    })
}

pub fn show_dashboard(service: &InventoryService, args: Value) -> Result<CallToolResult, ToolError> {
    let args: OptionalStoreArgs = parse_args(args)?;
    let data = dashboard_data(service, args.store_id)?;
    let lines: Vec<String> = data
        .stores
        .iter()
        .map(|s| {
            format!(
                "{} ({}, {}): {} products, {} low on stock",
                s.store.name, s.store.city, s.store.state, s.totals.product_count, s.totals.low_stock_count
            )
        })
        .collect();
    Ok(structured(
        format!("Showing the inventory dashboard. {}", lines.join("; ")),
        &data,
    ))
}

pub fn refresh_dashboard(service: &InventoryService, args: Value) -> Result<CallToolResult, ToolError> {
    let args: OptionalStoreArgs = parse_args(args)?;
    let data = dashboard_data(service, args.store_id)?;
    Ok(structured(format!("Dashboard data for {} stores", data.stores.len()), &data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_type_names_the_argument() {
        let err = parse_args::<GetInventoryArgs>(json!({"storeId": "one"})).unwrap_err();
        assert!(err.to_string().contains("storeId"), "{err}");
        let err = parse_args::<GetInventoryArgs>(json!({})).unwrap_err();
        assert!(err.to_string().contains("storeId"), "{err}");
    }

    #[test]
    fn there_are_at_least_twelve_tools_with_object_schemas() {
        let tools = definitions();
        assert!(tools.len() >= 12);
        for t in &tools {
            assert_eq!(t.input_schema["type"], "object", "{}", t.name);
            assert_eq!(t.output_schema.as_ref().unwrap()["type"], "object", "{}", t.name);
        }
    }
}
