//! The ways in: every request passes [`front_door`], a request to either MCP endpoint then
//! [`mcp_entry`]. Each is one layer of plain steps in order, the answer going back out through
//! the same steps in reverse.
//!
//! One layer each, not one per step: under every `from_fn` layer axum clones the boxed services
//! below it and boxes the call again on each request, so six layers of one step each cost a
//! proxied call about seventy allocations before any step ran (counted with a uprobe on the
//! allocator under `bench load`; BENCHMARKS.md).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;

use super::connections::{self, ConnectionLimits};
use super::mcp::endpoint_config;
use super::mcp::jsonrpc_gate::{self, BodyLimit};
use super::replicas::{self, Replicas};
use super::{auth, cors, GatewayState};

/// What the front door needs.
#[derive(Clone)]
pub struct FrontDoor {
    pub state: Arc<GatewayState>,
    pub limits: ConnectionLimits,
}

/// In front of every route: CORS (a preflight is answered here, before authentication, since
/// browsers never send credentials on it, R37), the body's deadline, then authentication and
/// the browser rules (R36). The answer gets its CORS headers, refusals included.
pub async fn front_door(State(door): State<FrontDoor>, request: Request, next: Next) -> Response {
    let allowed = match cors::on_request(&door.state, &request) {
        Ok(allowed) => allowed,
        Err(preflight) => return preflight,
    };
    let (request, has_body) = connections::with_body_deadline(&door.limits, request);
    let mut response = match auth::refusal(&door.state, &request) {
        Some(refusal) => refusal,
        None => next.run(request).await,
    };
    if has_body {
        response = connections::after_body_deadline(response);
    }
    cors::on_response(allowed, &mut response);
    response
}

/// What the MCP endpoints' way in needs.
#[derive(Clone)]
pub struct McpEntry {
    pub limit: BodyLimit,
    pub replicas: Option<Arc<Replicas>>,
}

/// In front of both MCP endpoints, after the front door: the JSON-RPC gate reads and checks the
/// message, a request for a call another replica holds goes there (it needs the message read,
/// and auth passed), and rmcp's answers are mended (`endpoint_config::mend_answer`: a session's
/// `DELETE` answered 200, a transport refusal in plain text made a JSON-RPC error).
pub async fn mcp_entry(State(entry): State<McpEntry>, request: Request, next: Next) -> Response {
    let deleting = request.method() == Method::DELETE;
    let response = match jsonrpc_gate::gate(entry.limit, request).await {
        Ok(request) => replicas::forward::to_owner(entry.replicas.as_ref(), request, next).await,
        Err(refusal) => refusal,
    };
    endpoint_config::mend_answer(deleting, response).await
}
