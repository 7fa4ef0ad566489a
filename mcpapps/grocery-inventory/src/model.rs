//! The grocery domain types, shared by the MCP tools, the REST API and the dashboard.
//!
//! They serialize in camelCase because every consumer (the MCP client, the REST client and the
//! dashboard's JavaScript) is JSON-first; the JSON schemas the tools advertise are derived from
//! these very types, so what a tool says it returns is what it returns.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A shop of the chain.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Store {
    pub id: u32,
    pub name: String,
    pub city: String,
    pub state: String,
}

/// A product family (produce, dairy, …).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Category {
    pub id: u32,
    pub name: String,
    pub description: String,
}

/// A sellable item, identical in every store; stock levels live in [`InventoryItem`].
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Product {
    pub id: u32,
    pub sku: String,
    pub name: String,
    pub category_id: u32,
    /// Price per unit of measure, in US dollars.
    pub unit_price: f64,
    pub unit_of_measure: String,
    pub supplier_id: u32,
}

/// A wholesaler products are ordered from.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Supplier {
    pub id: u32,
    pub name: String,
    pub contact_email: String,
    pub phone: String,
}

/// The stock of one product in one store.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InventoryItem {
    pub store_id: u32,
    pub product_id: u32,
    pub quantity_on_hand: i64,
    /// Below this quantity the product counts as low stock and should be reordered.
    pub reorder_threshold: i64,
    /// Date (YYYY-MM-DD) of the last delivery or stock count.
    pub last_restocked: String,
}

/// An inventory row joined with its product, so readers need no second lookup.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InventoryView {
    pub store_id: u32,
    pub store_name: String,
    pub product_id: u32,
    pub sku: String,
    pub product_name: String,
    pub category_name: String,
    pub unit_of_measure: String,
    pub unit_price: f64,
    pub quantity_on_hand: i64,
    pub reorder_threshold: i64,
    pub last_restocked: String,
    /// True when `quantityOnHand` is below `reorderThreshold`.
    pub is_low_stock: bool,
}

/// Headline figures for one store.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StoreTotals {
    pub product_count: usize,
    pub low_stock_count: usize,
    pub total_units: i64,
    /// Sum of quantity × unit price, in US dollars.
    pub inventory_value: f64,
}

/// One store with all its inventory rows: the body of `inventory://stores/{storeId}/summary`
/// and one panel of the dashboard.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StoreInventory {
    pub store: Store,
    pub totals: StoreTotals,
    pub items: Vec<InventoryView>,
}

/// One product and its stock in every store: the body of `inventory://products/{productId}/details`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProductDetails {
    pub product: Product,
    pub category: Category,
    pub supplier: Supplier,
    pub stock: Vec<InventoryView>,
    pub total_on_hand: i64,
}

/// A suggested reorder for one low-stock row.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RestockRecommendation {
    pub store_id: u32,
    pub store_name: String,
    pub product_id: u32,
    pub product_name: String,
    pub supplier_id: u32,
    pub supplier_name: String,
    pub quantity_on_hand: i64,
    pub reorder_threshold: i64,
    /// Enough to bring the row back to twice its threshold.
    pub recommended_quantity: i64,
    pub estimated_cost: f64,
}

/// How fast a purchase order must be delivered.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Urgency {
    #[default]
    Routine,
    Urgent,
    Emergency,
}

impl Urgency {
    pub const ALL: [Urgency; 3] = [Urgency::Routine, Urgency::Urgent, Urgency::Emergency];

    pub fn as_str(self) -> &'static str {
        match self {
            Urgency::Routine => "routine",
            Urgency::Urgent => "urgent",
            Urgency::Emergency => "emergency",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|u| u.as_str() == text)
    }

    /// Days until the requested delivery.
    pub fn lead_days(self) -> u32 {
        match self {
            Urgency::Routine => 7,
            Urgency::Urgent => 2,
            Urgency::Emergency => 0,
        }
    }
}

/// One line of a purchase order.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PurchaseOrderLine {
    pub product_id: u32,
    pub sku: String,
    pub product_name: String,
    pub quantity: i64,
    pub unit_of_measure: String,
    pub unit_price: f64,
    pub line_total: f64,
}

/// A drafted (not sent) purchase order for one store and one supplier.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PurchaseOrder {
    pub po_number: String,
    pub status: String,
    pub store: Store,
    pub supplier: Supplier,
    pub urgency: Urgency,
    pub requested_delivery: String,
    pub lines: Vec<PurchaseOrderLine>,
    pub total: f64,
    pub notes: Option<String>,
}
