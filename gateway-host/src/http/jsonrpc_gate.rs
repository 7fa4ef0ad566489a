//! What rmcp's Streamable HTTP server does not answer well, answered before it, in one place for
//! both MCP endpoints (`/mcp`, `/apps/mcp/{appId}`): a POST body that is not one JSON-RPC
//! message. rmcp replies to those with `415` and a plain-text line; a client deserves the
//! JSON-RPC error the message calls for, with HTTP 400 since nothing in it can be answered:
//!
//! - not JSON → -32700 (parse error);
//! - a batch (an array) → -32600: batching left MCP with the 2025-06-18 revision, so the gateway
//!   asks for one message per POST;
//! - JSON, but not a JSON-RPC message (no `jsonrpc: "2.0"`, no method or result…) → -32600
//!   naming what rmcp could not read;
//! - a body over `Gateway.MaxRequestBytes` → 413 with a -32600 error naming the limit.
//!
//! Everything else passes to rmcp untouched.

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use host_abi::jsonrpc;
use serde_json::{json, Value};

/// The largest body accepted.
#[derive(Clone, Copy)]
pub struct BodyLimit(pub usize);

pub async fn gate(State(BodyLimit(limit)): State<BodyLimit>, request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes: Bytes = match axum::body::to_bytes(body, limit).await {
        Ok(bytes) => bytes,
        Err(_) => {
            let message = format!("request body exceeds {limit} bytes (Gateway.MaxRequestBytes)");
            let mut response = refuse(StatusCode::PAYLOAD_TOO_LARGE, &Value::Null, jsonrpc::INVALID_REQUEST, message);
            // The rest of the body is never read: the connection cannot carry another request.
            response.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("close"));
            return response;
        }
    };
    let message: Value = match serde_json::from_slice(&bytes) {
        Ok(value) => value,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, &Value::Null, jsonrpc::PARSE_ERROR, format!("Parse error: {e}")),
    };
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    match &message {
        Value::Array(_) => {
            let text = "Invalid Request: JSON-RPC batches are not part of MCP since 2025-06-18; send one message per POST";
            return refuse(StatusCode::BAD_REQUEST, &Value::Null, jsonrpc::INVALID_REQUEST, text.to_string());
        }
        Value::Object(_) => {
            if let Err(e) = serde_json::from_value::<rmcp::model::ClientJsonRpcMessage>(message.clone()) {
                return refuse(StatusCode::BAD_REQUEST, &id, jsonrpc::INVALID_REQUEST, format!("Invalid Request: not a JSON-RPC message an MCP client sends ({e})"));
            }
        }
        _ => {
            let text = "Invalid Request: expected a JSON-RPC message (an object)";
            return refuse(StatusCode::BAD_REQUEST, &Value::Null, jsonrpc::INVALID_REQUEST, text.to_string());
        }
    }
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

fn refuse(status: StatusCode, id: &Value, code: i32, message: String) -> Response {
    let body = json!({ "jsonrpc": jsonrpc::VERSION, "id": id, "error": { "code": code, "message": message } });
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}
