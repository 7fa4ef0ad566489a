//! `GET /metrics`: the gateway's metrics in the Prometheus text format (see `crate::metrics`).
//! Behind the same auth as every other route (nothing in `auth.rs` exempts it): the numbers name
//! apps and tools.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::GatewayState;
use crate::metrics::CONTENT_TYPE;

pub async fn scrape(State(state): State<Arc<GatewayState>>) -> Response {
    let text = state.metrics.scrape(&state.module).await;
    ([(header::CONTENT_TYPE, CONTENT_TYPE), (header::CACHE_CONTROL, "no-store")], text).into_response()
}
