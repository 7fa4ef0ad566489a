//! The prompts: reusable instructions that bring live inventory data into the conversation.

use rmcp::model::{GetPromptResult, JsonObject, Prompt, PromptArgument, PromptMessage, Role};
use rmcp::ErrorData as McpError;
use serde_json::Value;

use crate::data::InventoryService;
use crate::model::Urgency;

/// Inventory terms `explain_inventory_term` knows, with a short definition each; completions
/// offer these names.
pub const GLOSSARY: &[(&str, &str)] = &[
    ("reorder point", "The stock level at which a new order should be placed so it arrives before the shelf runs empty."),
    ("reorder threshold", "This system's reorder point per store and product: below it a row counts as low stock."),
    ("safety stock", "Extra units kept to absorb demand spikes and late deliveries."),
    ("lead time", "Time between placing a purchase order and receiving the goods."),
    ("stockout", "A product being unavailable on the shelf when a customer wants it."),
    ("sku", "Stock Keeping Unit: the unique code identifying one sellable product."),
    ("inventory turnover", "How many times stock is sold and replaced over a period (cost of goods sold ÷ average inventory)."),
    ("shrinkage", "Inventory lost to theft, damage, spoilage or recording errors."),
    ("fifo", "First In, First Out: sell the oldest stock first — essential for perishables."),
    ("par level", "The target quantity to have on hand after restocking."),
    ("economic order quantity", "The order size that minimizes the total of ordering and holding costs."),
    ("cycle count", "Counting a subset of inventory on a rotating schedule instead of a full physical count."),
];

pub fn list() -> Vec<Prompt> {
    vec![
        Prompt::new(
            "analyze_store_performance",
            Some("Analyze a store's inventory health: stock levels, low-stock risks and inventory value."),
            Some(vec![PromptArgument::new("storeId")
                .with_title("Store")
                .with_description("The store to analyze (see get_stores)")
                .with_required(true)]),
        )
        .with_title("Analyze store performance"),
        Prompt::new(
            "draft_supplier_order",
            Some("Draft an order to a supplier for the products that are low on stock, at a given urgency."),
            Some(vec![
                PromptArgument::new("supplierId")
                    .with_title("Supplier")
                    .with_description("The supplier to order from (see get_suppliers)")
                    .with_required(true),
                PromptArgument::new("urgency")
                    .with_title("Urgency")
                    .with_description("routine, urgent or emergency")
                    .with_required(true),
                PromptArgument::new("storeId")
                    .with_title("Store")
                    .with_description("Only this store's needs; all stores when omitted")
                    .with_required(false),
            ]),
        )
        .with_title("Draft supplier order"),
        Prompt::new(
            "explain_inventory_term",
            Some("Explain an inventory-management term in the context of this grocery chain."),
            Some(vec![PromptArgument::new("term")
                .with_title("Term")
                .with_description("E.g. reorder point, safety stock, FIFO")
                .with_required(true)]),
        )
        .with_title("Explain inventory term"),
    ]
}

fn arg<'a>(args: &'a Option<JsonObject>, name: &str) -> Option<&'a str> {
    args.as_ref()?.get(name).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())
}

fn required<'a>(args: &'a Option<JsonObject>, name: &str) -> Result<&'a str, McpError> {
    arg(args, name).ok_or_else(|| McpError::invalid_params(format!("Missing required argument `{name}`"), None))
}

fn id_arg(text: &str, name: &str) -> Result<u32, McpError> {
    text.parse()
        .map_err(|_| McpError::invalid_params(format!("Invalid argument `{name}`: expected a numeric id, got {text:?}"), None))
}

fn inventory_error(e: crate::data::InventoryError) -> McpError {
    McpError::invalid_params(e.to_string(), None)
}

pub fn get(service: &InventoryService, name: &str, args: &Option<JsonObject>) -> Result<GetPromptResult, McpError> {
    match name {
        "analyze_store_performance" => {
            let store_id = id_arg(required(args, "storeId")?, "storeId")?;
            let summary = service.store_inventory(store_id).map_err(inventory_error)?;
            let low: Vec<String> = summary
                .items
                .iter()
                .filter(|i| i.is_low_stock)
                .map(|i| format!("- {} ({}): {} on hand, threshold {}", i.product_name, i.sku, i.quantity_on_hand, i.reorder_threshold))
                .collect();
            let text = format!(
                "Analyze the inventory performance of {name} ({city}, {state}).\n\n\
                 Totals: {count} products, {units} units on hand, inventory value ${value:.2}, {lowc} products below their reorder threshold.\n\n\
                 Low-stock products:\n{low}\n\n\
                 Assess stock health, the risk of stockouts, and which categories need attention. Recommend concrete \
                 actions (restocking quantities, threshold changes). The full data is in the resource \
                 inventory://stores/{id}/summary; the tools get_restock_recommendations and draft_purchase_order can follow up.",
                name = summary.store.name,
                city = summary.store.city,
                state = summary.store.state,
                count = summary.totals.product_count,
                units = summary.totals.total_units,
                value = summary.totals.inventory_value,
                lowc = summary.totals.low_stock_count,
                low = if low.is_empty() { "(none)".to_string() } else { low.join("\n") },
                id = store_id,
            );
            Ok(GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
                .with_description(format!("Inventory analysis for {}", summary.store.name)))
        }
        "draft_supplier_order" => {
            let supplier_id = id_arg(required(args, "supplierId")?, "supplierId")?;
            let urgency_text = required(args, "urgency")?;
            let urgency = Urgency::parse(&urgency_text.to_lowercase()).ok_or_else(|| {
                McpError::invalid_params(
                    format!("Invalid argument `urgency`: expected routine, urgent or emergency, got {urgency_text:?}"),
                    None,
                )
            })?;
            let store_id = arg(args, "storeId").map(|s| id_arg(s, "storeId")).transpose()?;
            let supplier = service.supplier(supplier_id).map_err(inventory_error)?;
            let recs: Vec<_> = service
                .restock_recommendations(store_id)
                .map_err(inventory_error)?
                .into_iter()
                .filter(|r| r.supplier_id == supplier_id)
                .collect();
            let lines: Vec<String> = recs
                .iter()
                .map(|r| {
                    format!(
                        "- {}: {} × {} ({} on hand, threshold {}), about ${:.2}",
                        r.store_name, r.recommended_quantity, r.product_name, r.quantity_on_hand, r.reorder_threshold, r.estimated_cost
                    )
                })
                .collect();
            let tone = match urgency {
                Urgency::Routine => "a routine order for delivery within 7 days; keep the tone friendly and standard",
                Urgency::Urgent => "an URGENT order needed within 2 days; be clear about the deadline",
                Urgency::Emergency => "an EMERGENCY order needed today; be brief, explicit and ask for immediate confirmation",
            };
            let text = format!(
                "Draft an email to {name} ({email}, {phone}) placing {tone}.\n\nProducts to order:\n{lines}\n\n\
                 Group the lines by store, state quantities and units, and ask for confirmation of delivery dates. \
                 Use draft_purchase_order to create the matching purchase order.",
                name = supplier.name,
                email = supplier.contact_email,
                phone = supplier.phone,
                lines = if lines.is_empty() { "(nothing from this supplier is below its reorder threshold)".to_string() } else { lines.join("\n") },
            );
            Ok(GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
                .with_description(format!("{} order to {}", urgency.as_str(), supplier.name)))
        }
        "explain_inventory_term" => {
            let term = required(args, "term")?;
            let known = GLOSSARY.iter().find(|(t, _)| t.eq_ignore_ascii_case(term));
            let text = match known {
                Some((t, definition)) => format!(
                    "Explain the inventory term \"{t}\" to a grocery store manager. Reference definition: {definition} \
                     Give a practical example with fresh groceries, and say how it relates to the reorder thresholds \
                     and low-stock alerts of this inventory system."
                ),
                None => format!(
                    "Explain the inventory term \"{term}\" to a grocery store manager, with a practical example with \
                     fresh groceries, and say how it relates to reorder thresholds and low-stock alerts."
                ),
            };
            Ok(GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
                .with_description(format!("Explanation of {term}")))
        }
        other => Err(McpError::invalid_params(format!("Unknown prompt `{other}`"), None)),
    }
}
