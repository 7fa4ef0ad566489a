//! CORS (SPEC R37): browsers on the origins in `Security.AllowedOrigins` may call the gateway.
//!
//! Two steps of the front door (`front_door.rs`) rather than tower-http's `CorsLayer` because the rules are exact and few:
//! an origin not on the list gets no CORS header at all (not even on a preflight), and a
//! preflight is answered here, before authentication, since browsers never send credentials on it.

use axum::extract::Request;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};

use super::json_error::json_error;
use super::GatewayState;

pub const ALLOWED_METHODS: &str = "GET, POST, DELETE, OPTIONS";
pub const ALLOWED_HEADERS: &str =
    "Authorization, Content-Type, Accept, mcp-protocol-version, Mcp-Session-Id, Mcp-Method, Mcp-Name, Last-Event-ID";
pub const EXPOSED_HEADERS: &str = "Mcp-Session-Id, mcp-protocol-version, WWW-Authenticate";
/// How long a browser may cache a preflight answer.
const MAX_AGE_SECONDS: &str = "600";

/// CORS before the request goes in: a preflight is answered at once (`Err`); otherwise the
/// origin to allow on the answer, if the request came from an allowed one.
pub fn on_request(state: &GatewayState, request: &Request) -> Result<Option<String>, Response> {
    let origin = request.headers().get(header::ORIGIN).and_then(|o| o.to_str().ok());
    let allowed = origin.filter(|o| state.auth.origin_allowed(o)).map(str::to_string);
    let is_preflight = request.method() == Method::OPTIONS
        && origin.is_some()
        && request.headers().contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    if !is_preflight {
        return Ok(allowed);
    }
    let Some(origin) = allowed else {
        return Err(json_error(StatusCode::FORBIDDEN, "origin_not_allowed", "this origin is not in Security.AllowedOrigins"));
    };
    let mut response = StatusCode::NO_CONTENT.into_response();
    let h = response.headers_mut();
    set(h, header::ACCESS_CONTROL_ALLOW_ORIGIN, &origin);
    set(h, header::ACCESS_CONTROL_ALLOW_METHODS, ALLOWED_METHODS);
    set(h, header::ACCESS_CONTROL_ALLOW_HEADERS, ALLOWED_HEADERS);
    set(h, header::ACCESS_CONTROL_ALLOW_CREDENTIALS, "true");
    set(h, header::ACCESS_CONTROL_MAX_AGE, MAX_AGE_SECONDS);
    set(h, header::VARY, "Origin, Access-Control-Request-Method, Access-Control-Request-Headers");
    Err(response)
}

/// CORS on the answer: the headers an allowed origin's page needs to read it.
pub fn on_response(allowed: Option<String>, response: &mut Response) {
    if let Some(origin) = allowed {
        let h = response.headers_mut();
        set(h, header::ACCESS_CONTROL_ALLOW_ORIGIN, &origin);
        set(h, header::ACCESS_CONTROL_EXPOSE_HEADERS, EXPOSED_HEADERS);
        set(h, header::ACCESS_CONTROL_ALLOW_CREDENTIALS, "true");
        h.append(header::VARY, HeaderValue::from_static("Origin"));
    }
}

fn set(headers: &mut axum::http::HeaderMap, name: header::HeaderName, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        headers.insert(name, v);
    }
}
