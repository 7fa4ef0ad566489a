//! The gateway's own error answer on every route: `{"error": {"code", "message"}}` with a status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

/// A JSON error with the given status.
pub fn json_error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": { "code": code, "message": message.into() } }))).into_response()
}

/// The router's fallback: a path no route serves is named, as every other refusal names what
/// it refuses (axum's own answers an empty 404).
pub async fn no_such_route(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    json_error(StatusCode::NOT_FOUND, "no_such_route", format!("No route for {method} {}", uri.path()))
}

/// A route's answer to a method it does not take; axum adds the `Allow` header that lists
/// the ones it does.
pub async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    let text = format!("{method} is not allowed on {} (the Allow header lists the methods that are)", uri.path());
    json_error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", text)
}
