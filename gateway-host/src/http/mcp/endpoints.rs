//! The two MCP endpoints as the gateway's connections reach them: a request's path is looked at
//! once, before the router (`http::Routes`), and a request for `/apps/mcp/{appId}` or `/mcp`
//! goes straight through both of its doors (`front_door.rs` `McpDoor`) to its handler.
//!
//! Why not routes of axum's router: their paths are two fixed prefixes, and routing them cost a
//! proxied call more than anything it did — matching the path, a map of the matched parameters
//! in the request's extensions, the route's boxed service and future — about 5 µs of the
//! gateway's CPU per call, 7 % (`bench load`, BENCHMARKS.md). Every other path stays the
//! router's, behind the same front door.

use std::sync::Arc;

use axum::extract::Request;
use axum::response::Response;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::StreamableHttpService;

use super::gateway_mcp::{self, GatewayMcp, GatewayPassThrough};
use super::mcp_sessions::EndpointSessions;
use crate::http::front_door::McpDoor;
use crate::http::GatewayState;

/// Which endpoint a path names.
#[derive(Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `/apps/mcp/{appId}`: the app id as it is in the path (percent-encoded; decoded past the
    /// doors, by the handler).
    Apps(String),
    /// `/mcp`, `/mcp/` and any path below it.
    Gateway,
}

impl Endpoint {
    /// The endpoint `path` names, as the router's patterns named them: `/apps/mcp/{appId}` is
    /// one segment that is not empty (`/apps/mcp/` and `/apps/mcp/x/y` are no endpoint's).
    pub fn of(path: &str) -> Option<Endpoint> {
        if let Some(app) = path.strip_prefix("/apps/mcp/") {
            return (!app.is_empty() && !app.contains('/')).then(|| Endpoint::Apps(app.to_string()));
        }
        (path == "/mcp" || path.starts_with("/mcp/")).then_some(Endpoint::Gateway)
    }
}

/// Both endpoints and their doors.
pub struct McpEndpoints {
    pub door: McpDoor,
    pub state: Arc<GatewayState>,
    /// `/mcp`: rmcp's server, its short way, its sessions.
    pub gateway: (StreamableHttpService<GatewayMcp, LocalSessionManager>, GatewayPassThrough, EndpointSessions),
}

impl McpEndpoints {
    /// Serves `request` at `endpoint` (the endpoint its path names, [`Endpoint::of`]).
    pub async fn serve(&self, endpoint: Endpoint, request: Request) -> Response {
        match endpoint {
            Endpoint::Apps(app) => self.door.enter(request, |request| super::apps_mcp::handle(&self.state, app, request)).await,
            Endpoint::Gateway => {
                let (service, short, sessions) = &self.gateway;
                self.door.enter(request, |request| gateway_mcp::handle(service, short, sessions, request)).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Endpoint;

    #[test]
    fn paths_name_the_endpoints_the_router_patterns_named() {
        assert_eq!(Endpoint::of("/apps/mcp/grocery"), Some(Endpoint::Apps("grocery".into())));
        assert_eq!(Endpoint::of("/apps/mcp/a%20b"), Some(Endpoint::Apps("a%20b".into())));
        for path in ["/mcp", "/mcp/", "/mcp/below/it"] {
            assert_eq!(Endpoint::of(path), Some(Endpoint::Gateway), "{path}");
        }
        for path in ["/apps/mcp/", "/apps/mcp", "/apps/mcp/x/", "/apps/mcp/x/y", "/mcpx", "/", "/apps", "//mcp", "/MCP"] {
            assert_eq!(Endpoint::of(path), None, "{path}");
        }
    }
}
