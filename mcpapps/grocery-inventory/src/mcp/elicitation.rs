//! Tools that ask the user, step by step, through MCP elicitation (`elicitation/create`).
//!
//! Each step is one form. Whatever the user does is a normal outcome, so declining or cancelling
//! a step returns a regular result with `status: "declined"` / `"cancelled"` and nothing changed;
//! only a client that cannot elicit at all, or an answer outside what was offered, is a tool error.

use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema, JsonObject};
use rmcp::service::{ElicitationMode, Peer, RoleServer};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::tools::{parse_args, ToolError};
use crate::data::InventoryService;
use crate::model::{InventoryView, PurchaseOrder, Urgency};

#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct GuidedStockCountArgs {
    /// Skip the store question.
    pub store_id: Option<u32>,
    /// Skip the product question.
    pub product_id: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct GuidedPurchaseOrderArgs {
    /// Skip the store question.
    pub store_id: Option<u32>,
}

/// How an interactive tool ended.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Everything was answered and confirmed; the change was made.
    Completed,
    /// The user answered every step but did not confirm.
    NotConfirmed,
    /// The user declined a step.
    Declined,
    /// The user dismissed a step.
    Cancelled,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StockCountOut {
    pub status: Outcome,
    /// The step at which the user declined or cancelled, if they did.
    pub stopped_at: Option<String>,
    pub previous_quantity: Option<i64>,
    /// The recorded row, when the count was recorded.
    pub item: Option<InventoryView>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GuidedPurchaseOrderOut {
    pub status: Outcome,
    pub stopped_at: Option<String>,
    pub purchase_order: Option<PurchaseOrder>,
}

/// The user's answer to one step.
enum Answer {
    Accepted(Map<String, Value>),
    Stopped(Outcome),
}

/// Asks one question. `properties` are the form fields; all of `required` must be answered.
async fn ask(peer: &Peer<RoleServer>, message: String, properties: Value, required: &[&str]) -> Result<Answer, ToolError> {
    let schema: JsonObject = serde_json::from_value(json!({
        "type": "object",
        "properties": properties,
        "required": required,
    }))
    .expect("object literal");
    let requested_schema = ElicitationSchema::from_json_schema(schema)
        .map_err(|e| ToolError::Interaction(format!("internal error building the form: {e}")))?;
    let result = peer
        .create_elicitation(ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema,
        })
        .await
        .map_err(|e| ToolError::Interaction(format!("The elicitation request failed: {e}")))?;
    Ok(match result.action {
        ElicitationAction::Accept => match result.content {
            Some(Value::Object(map)) => Answer::Accepted(map),
            _ => return Err(ToolError::Interaction("The client accepted the form but sent no content".into())),
        },
        ElicitationAction::Decline => Answer::Stopped(Outcome::Declined),
        ElicitationAction::Cancel => Answer::Stopped(Outcome::Cancelled),
        other => return Err(ToolError::Interaction(format!("Unexpected elicitation action {other:?}"))),
    })
}

fn require_elicitation(peer: &Peer<RoleServer>, tool: &str, instead: &str) -> Result<(), ToolError> {
    if peer.supported_elicitation_modes().contains(&ElicitationMode::Form) {
        Ok(())
    } else {
        Err(ToolError::Interaction(format!(
            "{tool} asks the user questions through MCP elicitation (elicitation/create), but this client did not \
             declare the elicitation capability. Use {instead} instead."
        )))
    }
}

/// Reads an id answered as a string `const` (or a number) and checks it was one of the offered.
fn answered_id(map: &Map<String, Value>, field: &'static str, offered: &[u32]) -> Result<u32, ToolError> {
    let id = match map.get(field) {
        Some(Value::String(s)) => s.parse::<u32>().ok(),
        Some(Value::Number(n)) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        _ => None,
    };
    id.filter(|id| offered.contains(id)).ok_or_else(|| {
        ToolError::InvalidArguments(format!(
            "Invalid answer `{field}`: expected one of {:?}, got {}",
            offered,
            map.get(field).map(Value::to_string).unwrap_or_else(|| "nothing".into())
        ))
    })
}

fn answered_bool(map: &Map<String, Value>, field: &'static str) -> Result<bool, ToolError> {
    map.get(field)
        .and_then(Value::as_bool)
        .ok_or_else(|| ToolError::InvalidArguments(format!("Invalid answer `{field}`: expected true or false")))
}

fn store_choice(service: &InventoryService) -> (Value, Vec<u32>) {
    let stores = service.stores();
    let one_of: Vec<Value> = stores
        .iter()
        .map(|s| json!({"const": s.id.to_string(), "title": format!("{} ({}, {})", s.name, s.city, s.state)}))
        .collect();
    (
        json!({"type": "string", "title": "Store", "oneOf": one_of}),
        stores.iter().map(|s| s.id).collect(),
    )
}

/// The store of a guided flow: the one the arguments named, or the user's choice when asked
/// `question` (`Err` with how the user stopped instead).
async fn chosen_store(
    service: &InventoryService,
    peer: &Peer<RoleServer>,
    given: Option<u32>,
    question: &str,
) -> Result<Result<u32, Outcome>, ToolError> {
    if let Some(id) = given {
        return Ok(Ok(id));
    }
    let (field, offered) = store_choice(service);
    match ask(peer, question.to_string(), json!({"storeId": field}), &["storeId"]).await? {
        Answer::Accepted(map) => Ok(Ok(answered_id(&map, "storeId", &offered)?)),
        Answer::Stopped(o) => Ok(Err(o)),
    }
}

/// Stopped at a step: the structured result saying so.
fn stopped<T: Serialize>(summary: String, out: &T) -> rmcp::model::CallToolResult {
    super::tools::structured(summary, out)
}

pub async fn guided_stock_count(
    service: &InventoryService,
    peer: &Peer<RoleServer>,
    args: Value,
) -> Result<rmcp::model::CallToolResult, ToolError> {
    let args: GuidedStockCountArgs = parse_args(args)?;
    if let Some(id) = args.store_id {
        service.store(id)?;
    }
    if let Some(id) = args.product_id {
        service.product(id)?;
    }
    require_elicitation(peer, "guided_stock_count", "set_inventory")?;

    let stop = |step: &str, outcome: Outcome| {
        stopped(
            format!("Stock count {} at the {step} step; nothing was recorded.", word(outcome)),
            &StockCountOut {
                status: outcome,
                stopped_at: Some(step.to_string()),
                previous_quantity: None,
                item: None,
            },
        )
    };

    let store_id = match chosen_store(service, peer, args.store_id, "Step 1 — Which store are you counting?").await? {
        Ok(id) => id,
        Err(o) => return Ok(stop("store", o)),
    };
    let store = service.store(store_id)?;

    let product_id = match args.product_id {
        Some(id) => id,
        None => {
            // Low-stock rows first: those are the ones worth recounting.
            let mut rows = service.inventory(store_id, None)?;
            rows.sort_by_key(|r| (!r.is_low_stock, r.product_id));
            let one_of: Vec<Value> = rows
                .iter()
                .map(|r| {
                    let flag = if r.is_low_stock { " — LOW" } else { "" };
                    json!({"const": r.product_id.to_string(), "title": format!("{} ({}){flag}", r.product_name, r.sku)})
                })
                .collect();
            let offered: Vec<u32> = rows.iter().map(|r| r.product_id).collect();
            let field = json!({"type": "string", "title": "Product", "oneOf": one_of});
            match ask(
                peer,
                format!("Step 2 — Which product did you count at {}?", store.name),
                json!({"productId": field}),
                &["productId"],
            )
            .await?
            {
                Answer::Accepted(map) => answered_id(&map, "productId", &offered)?,
                Answer::Stopped(o) => return Ok(stop("product", o)),
            }
        }
    };
    let row = service.inventory(store_id, Some(product_id))?.remove(0);

    let counted = match ask(
        peer,
        format!(
            "Step 3 — How many {} of {} are on hand at {}? (The system says {}.)",
            row.unit_of_measure, row.product_name, store.name, row.quantity_on_hand
        ),
        json!({"countedQuantity": {"type": "integer", "title": "Counted quantity", "minimum": 0}}),
        &["countedQuantity"],
    )
    .await?
    {
        Answer::Accepted(map) => map
            .get("countedQuantity")
            .and_then(Value::as_i64)
            .filter(|q| *q >= 0)
            .ok_or_else(|| ToolError::InvalidArguments("Invalid answer `countedQuantity`: expected a whole number, 0 or more".into()))?,
        Answer::Stopped(o) => return Ok(stop("quantity", o)),
    };

    let confirmed = match ask(
        peer,
        format!(
            "Step 4 — Record {counted} {} of {} at {} (currently {})?",
            row.unit_of_measure, row.product_name, store.name, row.quantity_on_hand
        ),
        json!({"confirm": {"type": "boolean", "title": "Record this count", "default": true}}),
        &["confirm"],
    )
    .await?
    {
        Answer::Accepted(map) => answered_bool(&map, "confirm")?,
        Answer::Stopped(o) => return Ok(stop("confirmation", o)),
    };
    if !confirmed {
        return Ok(stopped(
            "Stock count not confirmed; nothing was recorded.".into(),
            &StockCountOut {
                status: Outcome::NotConfirmed,
                stopped_at: Some("confirmation".into()),
                previous_quantity: Some(row.quantity_on_hand),
                item: None,
            },
        ));
    }
    let item = service.set_inventory(store_id, product_id, counted, None)?;
    Ok(super::tools::structured(
        format!(
            "Recorded stock count: {} at {} is now {} (was {}).",
            item.product_name, item.store_name, item.quantity_on_hand, row.quantity_on_hand
        ),
        &StockCountOut {
            status: Outcome::Completed,
            stopped_at: None,
            previous_quantity: Some(row.quantity_on_hand),
            item: Some(item),
        },
    ))
}

pub async fn guided_purchase_order(
    service: &InventoryService,
    peer: &Peer<RoleServer>,
    args: Value,
) -> Result<rmcp::model::CallToolResult, ToolError> {
    let args: GuidedPurchaseOrderArgs = parse_args(args)?;
    if let Some(id) = args.store_id {
        service.store(id)?;
    }
    require_elicitation(peer, "guided_purchase_order", "draft_purchase_order")?;

    let stop = |step: &str, outcome: Outcome| {
        stopped(
            format!("Purchase order {} at the {step} step; nothing was drafted.", word(outcome)),
            &GuidedPurchaseOrderOut {
                status: outcome,
                stopped_at: Some(step.to_string()),
                purchase_order: None,
            },
        )
    };

    let store_id = match chosen_store(service, peer, args.store_id, "Step 1 — Which store is the order for?").await? {
        Ok(id) => id,
        Err(o) => return Ok(stop("store", o)),
    };
    let store = service.store(store_id)?;

    let recs = service.restock_recommendations(Some(store_id))?;
    let suppliers: Vec<_> = service
        .suppliers()
        .into_iter()
        .map(|s| {
            let n = recs.iter().filter(|r| r.supplier_id == s.id).count();
            (s, n)
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    if suppliers.is_empty() {
        return Err(ToolError::InvalidArguments(format!(
            "Invalid argument `storeId`: {} has no low-stock products to order",
            store.name
        )));
    }
    let one_of: Vec<Value> = suppliers
        .iter()
        .map(|(s, n)| json!({"const": s.id.to_string(), "title": format!("{} — {n} low-stock products", s.name)}))
        .collect();
    let offered: Vec<u32> = suppliers.iter().map(|(s, _)| s.id).collect();
    let supplier_id = match ask(
        peer,
        format!("Step 2 — Which supplier should {} order from?", store.name),
        json!({"supplierId": {"type": "string", "title": "Supplier", "oneOf": one_of}}),
        &["supplierId"],
    )
    .await?
    {
        Answer::Accepted(map) => answered_id(&map, "supplierId", &offered)?,
        Answer::Stopped(o) => return Ok(stop("supplier", o)),
    };
    let supplier = service.supplier(supplier_id)?;

    let urgency_field = json!({
        "type": "string",
        "title": "Urgency",
        "oneOf": [
            {"const": "routine", "title": "Routine (7 days)"},
            {"const": "urgent", "title": "Urgent (2 days)"},
            {"const": "emergency", "title": "Emergency (same day)"}
        ],
        "default": "routine"
    });
    let (urgency, notes) = match ask(
        peer,
        format!("Step 3 — How urgent is the order from {}?", supplier.name),
        json!({"urgency": urgency_field, "notes": {"type": "string", "title": "Notes for the supplier", "maxLength": 500}}),
        &["urgency"],
    )
    .await?
    {
        Answer::Accepted(map) => {
            let urgency = map.get("urgency").and_then(Value::as_str).and_then(Urgency::parse).ok_or_else(|| {
                ToolError::InvalidArguments("Invalid answer `urgency`: expected routine, urgent or emergency".into())
            })?;
            let notes = map
                .get("notes")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(String::from);
            (urgency, notes)
        }
        Answer::Stopped(o) => return Ok(stop("urgency", o)),
    };

    let lines: Vec<_> = recs.iter().filter(|r| r.supplier_id == supplier_id).collect();
    let total: f64 = lines.iter().map(|r| r.estimated_cost).sum();
    let listing: Vec<String> = lines
        .iter()
        .map(|r| format!("{} × {}", r.recommended_quantity, r.product_name))
        .collect();
    let confirmed = match ask(
        peer,
        format!(
            "Step 4 — Draft a {} order from {} for {}: {} (about ${total:.2})?",
            urgency.as_str(),
            supplier.name,
            store.name,
            listing.join(", ")
        ),
        json!({"confirm": {"type": "boolean", "title": "Draft this order", "default": true}}),
        &["confirm"],
    )
    .await?
    {
        Answer::Accepted(map) => answered_bool(&map, "confirm")?,
        Answer::Stopped(o) => return Ok(stop("confirmation", o)),
    };
    if !confirmed {
        return Ok(stopped(
            "Purchase order not confirmed; nothing was drafted.".into(),
            &GuidedPurchaseOrderOut {
                status: Outcome::NotConfirmed,
                stopped_at: Some("confirmation".into()),
                purchase_order: None,
            },
        ));
    }
    let po = service.draft_purchase_order(store_id, Some(supplier_id), urgency, None, notes)?;
    Ok(super::tools::structured(
        super::tools::purchase_order_summary(&po),
        &GuidedPurchaseOrderOut {
            status: Outcome::Completed,
            stopped_at: None,
            purchase_order: Some(po),
        },
    ))
}

fn word(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Declined => "declined",
        Outcome::Cancelled => "cancelled",
        Outcome::NotConfirmed => "not confirmed",
        Outcome::Completed => "completed",
    }
}
