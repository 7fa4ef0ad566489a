//! The REST API under `/api`, over the same [`InventoryService`] as the MCP tools — a change made
//! here is seen by MCP clients (and notified to subscribers), and the other way round.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use crate::data::{InventoryError, InventoryService};
use crate::mcp::tools::InventoryChangeOut;

/// A failed REST call: status plus `{"error": …, "argument": …}`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ApiError(#[from] InventoryError);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match &self.0 {
            InventoryError::UnknownId { .. } => StatusCode::NOT_FOUND,
            InventoryError::InvalidValue { .. } => StatusCode::BAD_REQUEST,
        };
        (status, Json(json!({"error": self.0.to_string(), "argument": self.0.argument()}))).into_response()
    }
}

type ApiResult<T> = Result<Json<T>, ApiError>;
type Service = State<Arc<InventoryService>>;

pub fn router(service: Arc<InventoryService>) -> Router {
    Router::new()
        .route("/api/categories", get(categories))
        .route("/api/products", get(products))
        .route("/api/products/{id}", get(product))
        .route("/api/suppliers", get(suppliers))
        .route("/api/stores", get(stores))
        .route("/api/stores/{id}", get(store))
        .route("/api/inventory", get(inventory))
        .route("/api/inventory/low-stock", get(low_stock))
        .route("/api/inventory/{store_id}/{product_id}", put(set_inventory))
        .route("/api/inventory/{store_id}/{product_id}/adjust", post(adjust_stock))
        .with_state(service)
}

async fn categories(State(s): Service) -> Json<serde_json::Value> {
    Json(json!(s.categories()))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProductQuery {
    category_id: Option<u32>,
    search: Option<String>,
}

async fn products(State(s): Service, Query(q): Query<ProductQuery>) -> ApiResult<Vec<crate::model::Product>> {
    Ok(Json(s.products(q.category_id, q.search.as_deref())?))
}

async fn product(State(s): Service, Path(id): Path<u32>) -> ApiResult<crate::model::ProductDetails> {
    Ok(Json(s.product_details(id)?))
}

async fn suppliers(State(s): Service) -> Json<serde_json::Value> {
    Json(json!(s.suppliers()))
}

async fn stores(State(s): Service) -> Json<serde_json::Value> {
    Json(json!(s.stores()))
}

async fn store(State(s): Service, Path(id): Path<u32>) -> ApiResult<crate::model::StoreInventory> {
    Ok(Json(s.store_inventory(id)?))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InventoryQuery {
    store_id: Option<u32>,
    product_id: Option<u32>,
}

/// One store's rows (`?storeId=`), optionally one product's (`&productId=`); every row without.
async fn inventory(State(s): Service, Query(q): Query<InventoryQuery>) -> ApiResult<Vec<crate::model::InventoryView>> {
    match q.store_id {
        Some(store_id) => Ok(Json(s.inventory(store_id, q.product_id)?)),
        None => {
            let mut rows = Vec::new();
            for store in s.stores() {
                rows.extend(s.inventory(store.id, q.product_id)?);
            }
            Ok(Json(rows))
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LowStockQuery {
    store_id: Option<u32>,
}

async fn low_stock(State(s): Service, Query(q): Query<LowStockQuery>) -> ApiResult<Vec<crate::model::InventoryView>> {
    Ok(Json(s.low_stock(q.store_id)?))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SetBody {
    quantity: i64,
    reorder_threshold: Option<i64>,
}

async fn set_inventory(
    State(s): Service,
    Path((store_id, product_id)): Path<(u32, u32)>,
    Json(body): Json<SetBody>,
) -> ApiResult<InventoryChangeOut> {
    let previous_quantity = s.inventory(store_id, Some(product_id))?[0].quantity_on_hand;
    let item = s.set_inventory(store_id, product_id, body.quantity, body.reorder_threshold)?;
    Ok(Json(InventoryChangeOut { item, previous_quantity }))
}

#[derive(Deserialize)]
struct AdjustBody {
    delta: i64,
}

async fn adjust_stock(
    State(s): Service,
    Path((store_id, product_id)): Path<(u32, u32)>,
    Json(body): Json<AdjustBody>,
) -> ApiResult<InventoryChangeOut> {
    let (previous_quantity, item) = s.adjust_stock(store_id, product_id, body.delta)?;
    Ok(Json(InventoryChangeOut { item, previous_quantity }))
}
