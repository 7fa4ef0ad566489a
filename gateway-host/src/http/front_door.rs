//! The ways in: every request passes the front door ([`FrontDoor::admit`]), a request to either
//! MCP endpoint then the MCP entry ([`McpEntry::enter`]). Each is a plain sequence of steps in
//! order, the answer going back out through the same steps in reverse.
//!
//! The front door is the one `from_fn` layer of the router, over every route but the MCP
//! endpoints. Those are the calls the gateway exists to carry, and they take both doors as plain
//! calls ([`McpDoor`]): under a `from_fn` layer axum clones the boxed services below it and
//! boxes the call again on every request, and the two layers the MCP endpoints passed cost a
//! proxied call about 5 µs of the gateway's CPU (`bench load`; BENCHMARKS.md). Six layers of one
//! step each had cost it about seventy allocations before any step ran.

use std::future::Future;
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

/// The front door as the router's layer, in front of every route but the MCP endpoints.
pub async fn front_door(State(door): State<FrontDoor>, request: Request, next: Next) -> Response {
    door.admit(request, |request| next.run(request)).await
}

impl FrontDoor {
    /// In front of every route: CORS (a preflight is answered here, before authentication,
    /// since browsers never send credentials on it, R37), the body's deadline, then
    /// authentication and the browser rules (R36); then `inner`. The answer gets its CORS
    /// headers, refusals included.
    pub async fn admit<F: Future<Output = Response>>(&self, request: Request, inner: impl FnOnce(Request) -> F) -> Response {
        let allowed = match cors::on_request(&self.state, &request) {
            Ok(allowed) => allowed,
            Err(preflight) => return preflight,
        };
        let (request, has_body) = connections::with_body_deadline(&self.limits, request);
        let mut response = match auth::refusal(&self.state, &request) {
            Some(refusal) => refusal,
            None => inner(request).await,
        };
        if has_body {
            response = connections::after_body_deadline(response);
        }
        cors::on_response(allowed, &mut response);
        response
    }
}

/// What the MCP endpoints' way in needs.
#[derive(Clone)]
pub struct McpEntry {
    pub limit: BodyLimit,
    pub replicas: Option<Arc<Replicas>>,
}

impl McpEntry {
    /// In front of both MCP endpoints, after the front door: the JSON-RPC gate reads and checks
    /// the message, a request for a call another replica holds goes there (it needs the message
    /// read, and auth passed), else to `handler`; and rmcp's answers are mended
    /// (`endpoint_config::mend_answer`: a session's `DELETE` answered 200, a transport refusal in
    /// plain text made a JSON-RPC error).
    pub async fn enter<F: Future<Output = Response>>(&self, request: Request, handler: impl FnOnce(Request) -> F) -> Response {
        let deleting = request.method() == Method::DELETE;
        let response = match jsonrpc_gate::gate(self.limit, request).await {
            Ok(request) => replicas::forward::to_owner(self.replicas.as_ref(), request, handler).await,
            Err(refusal) => refusal,
        };
        endpoint_config::mend_answer(deleting, response).await
    }
}

/// Both doors of an MCP endpoint, passed as plain calls (see the module docs for why not as
/// layers): the front door, then the MCP entry, then the endpoint's handler.
#[derive(Clone)]
pub struct McpDoor {
    pub door: FrontDoor,
    pub entry: McpEntry,
}

impl McpDoor {
    pub async fn enter<F: Future<Output = Response>>(&self, request: Request, handler: impl FnOnce(Request) -> F) -> Response {
        self.door.admit(request, |request| self.entry.enter(request, handler)).await
    }
}
