//! Who may use the gateway (SPEC R36).
//!
//! The gateway is open (no credential needed) only when **every** address it listens on is a
//! loopback address **and** `Gateway.AlwaysRequireAuth` is false. Otherwise each request needs the
//! gateway token: `Authorization: Bearer <token>`, the session cookie `POST /auth/session` hands
//! out for it, or — only with `Gateway.AllowQueryStringToken` — `?token=`.
//!
//! Why these rules:
//! - The client IP is never a credential: behind a reverse proxy on the same host every caller is
//!   loopback, so `X-Forwarded-For`, `Forwarded` and `X-Real-IP` are never read at all.
//! - When open, a web page elsewhere could still reach the loopback port through DNS rebinding
//!   (its own name resolving to 127.0.0.1). So the `Host` must be a loopback name and an `Origin`,
//!   when present, a loopback origin or one of `Security.AllowedOrigins`.
//! - Tokens and cookies are compared through SHA-256 digests with `subtle`'s constant-time
//!   equality, so neither timing nor length reveals anything about the secret.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use parking_lot::Mutex;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::GatewayState;
use crate::settings::Settings;

/// The cookie `POST /auth/session` sets.
pub const SESSION_COOKIE: &str = "gateway_session";
/// The environment variable holding the token when `Gateway.AuthTokenEnv` does not name another.
pub const DEFAULT_TOKEN_ENV: &str = "GATEWAY_AUTH_TOKEN";
/// How long a browser session lasts when `Gateway.SessionMinutes` is not set.
const DEFAULT_SESSION_MINUTES: u64 = 12 * 60;
/// Sessions kept at most; the oldest go first (each needs the token, so this only bounds memory).
const MAX_SESSIONS: usize = 10_000;

#[derive(Debug, thiserror::Error)]
pub enum AuthConfigError {
    #[error(
        "authentication is required ({why}) but no token is configured: set Gateway.AuthToken, or the \
         environment variable {env} (the variable's name comes from Gateway.AuthTokenEnv)"
    )]
    NoToken { why: String, env: String },
    #[error("cannot create a session id: the system's random source failed: {0}")]
    Random(String),
}

/// `SHA-256(secret)`: fixed-length, so comparisons are constant-time whatever was presented.
type Digest32 = [u8; 32];

fn digest(secret: &[u8]) -> Digest32 {
    Sha256::digest(secret).into()
}

/// The auth rules in force, fixed at startup from the configuration and the bound addresses.
pub struct AuthPolicy {
    /// Credentials are required (not every listener is loopback, or AlwaysRequireAuth).
    pub required: bool,
    token: Option<Digest32>,
    allow_query_token: bool,
    /// `Security.AllowedOrigins`, exact strings without a trailing `/` (CORS and, when open, Origin).
    pub allowed_origins: Vec<String>,
    /// `Gateway.PublicBaseUrl`'s origin: the page's origin behind a proxy that rewrites `Host`.
    public_origin: Option<String>,
    session_ttl: Duration,
    sessions: Mutex<HashMap<Digest32, Instant>>,
}

impl AuthPolicy {
    pub fn from_settings(settings: &Settings, bound: &[SocketAddr]) -> Result<AuthPolicy, AuthConfigError> {
        let always = settings.get_bool("Gateway:AlwaysRequireAuth").unwrap_or(false);
        let non_loopback: Vec<String> =
            bound.iter().filter(|a| !a.ip().is_loopback()).map(|a| a.to_string()).collect();
        let required = always || !non_loopback.is_empty();
        let env = settings.get_str("Gateway:AuthTokenEnv").unwrap_or_else(|| DEFAULT_TOKEN_ENV.to_string());
        let token = settings
            .get_str("Gateway:AuthToken")
            .or_else(|| std::env::var(&env).ok().map(|t| t.trim().to_string()).filter(|t| !t.is_empty()));
        if required && token.is_none() {
            let why = if always {
                "Gateway.AlwaysRequireAuth is true".to_string()
            } else {
                format!("listening on non-loopback address {}", non_loopback.join(", "))
            };
            return Err(AuthConfigError::NoToken { why, env });
        }
        // The token only needs to be usable when required; a configured token also enables
        // POST /auth/session when open.
        let minutes = settings.get_str("Gateway:SessionMinutes").and_then(|m| m.parse::<u64>().ok());
        Ok(AuthPolicy {
            required,
            token: token.map(|t| digest(t.as_bytes())),
            allow_query_token: settings.get_bool("Gateway:AllowQueryStringToken").unwrap_or(false),
            allowed_origins: allowed_origins(settings),
            public_origin: settings.get_str("Gateway:PublicBaseUrl").and_then(|url| origin_of(&url)),
            session_ttl: Duration::from_secs(60 * minutes.filter(|m| *m > 0).unwrap_or(DEFAULT_SESSION_MINUTES)),
            sessions: Mutex::new(HashMap::new()),
        })
    }

    /// A one-line description for the startup log.
    pub fn describe(&self) -> String {
        if self.required {
            format!(
                "Auth: required (Bearer token or session cookie{})",
                if self.allow_query_token { ", ?token= allowed" } else { "" }
            )
        } else {
            "Auth: open (loopback only); Host and Origin must be loopback names".to_string()
        }
    }

    fn token_matches(&self, presented: &str) -> bool {
        match &self.token {
            Some(expected) => bool::from(expected.ct_eq(&digest(presented.as_bytes()))),
            None => false,
        }
    }

    pub fn origin_allowed(&self, origin: &str) -> bool {
        let origin = origin.trim_end_matches('/');
        self.allowed_origins.iter().any(|o| o == origin)
    }

    /// Creates a browser session; returns its id (256 random bits, hex).
    pub fn new_session(&self) -> Result<String, AuthConfigError> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| AuthConfigError::Random(e.to_string()))?;
        let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let now = Instant::now();
        let mut sessions = self.sessions.lock();
        sessions.retain(|_, expires| *expires > now);
        if sessions.len() >= MAX_SESSIONS {
            if let Some(oldest) = sessions.iter().min_by_key(|(_, e)| **e).map(|(k, _)| *k) {
                sessions.remove(&oldest);
            }
        }
        sessions.insert(digest(id.as_bytes()), now + self.session_ttl);
        Ok(id)
    }

    /// The lookup key is the id's digest, so the map's timing says nothing about live ids.
    fn session_valid(&self, id: &str) -> bool {
        let key = digest(id.as_bytes());
        let mut sessions = self.sessions.lock();
        match sessions.get(&key) {
            Some(expires) if *expires > Instant::now() => true,
            Some(_) => {
                sessions.remove(&key);
                false
            }
            None => false,
        }
    }

    /// What the request presents, checked in turn; any valid credential admits it.
    pub fn check_credentials(&self, headers: &HeaderMap, query: Option<&str>) -> Credential {
        let mut presented = false;
        if let Some(token) = bearer(headers) {
            presented = true;
            if self.token_matches(token) {
                return Credential::Valid;
            }
        }
        for id in cookies(headers, SESSION_COOKIE) {
            presented = true;
            if self.session_valid(id) {
                return Credential::Cookie;
            }
        }
        if self.allow_query_token {
            if let Some(token) = query_param(query, "token") {
                presented = true;
                if self.token_matches(&token) {
                    return Credential::Valid;
                }
            }
        }
        if presented {
            Credential::Invalid
        } else {
            Credential::Missing
        }
    }
}

pub enum Credential {
    /// The token (Bearer header or allowed query string): the caller chose to present it.
    Valid,
    /// The session cookie: a browser sends it on its own, so it admits only same-origin writes.
    Cookie,
    Invalid,
    Missing,
}

/// `Security.AllowedOrigins`: a JSON array, or (from the environment) a `;`/`,`-separated string.
fn allowed_origins(settings: &Settings) -> Vec<String> {
    let raw: Vec<String> = match settings.get("Security:AllowedOrigins") {
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        Some(Value::String(s)) => s.split([';', ',']).map(str::to_string).collect(),
        Some(Value::Object(map)) => map.values().filter_map(Value::as_str).map(str::to_string).collect(),
        _ => Vec::new(),
    };
    raw.iter().map(|o| o.trim().trim_end_matches('/').to_string()).filter(|o| !o.is_empty()).collect()
}

pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

pub fn cookies<'a>(headers: &'a HeaderMap, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(move |pair| {
            let (k, v) = pair.trim().split_once('=')?;
            (k.trim() == name).then(|| v.trim())
        })
}

/// One query parameter, percent-decoded.
pub fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    let query = query?;
    query_pairs(query).into_iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

fn query_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        // Two hex digits exactly (`from_str_radix` alone would take a sign: `%+1`).
        let hex = bytes
            .get(i + 1..i + 3)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'+', _) => out.push(b' '),
            (b'%', Some(b)) => {
                out.push(b);
                i += 2;
            }
            (b, _) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `localhost`, `*.localhost`, `127.x.x.x`, `::1` (the host part only, no port or brackets).
pub fn is_loopback_name(host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    if host == "localhost" || host.ends_with(".localhost") {
        return true;
    }
    host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The host part of a `Host` header value (`[::1]:5000` → `::1`, `localhost:80` → `localhost`).
pub fn host_part(authority: &str) -> &str {
    let authority = authority.trim();
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("");
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => authority,
    }
}

/// `http(s)://<loopback name>[:port]`.
pub fn is_loopback_origin(origin: &str) -> bool {
    let rest = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
    match rest {
        Some(rest) => {
            let authority = rest.trim_end_matches('/');
            !authority.contains('/') && !authority.contains('@') && is_loopback_name(host_part(authority))
        }
        None => false,
    }
}

/// A JSON error with the given status.
pub fn json_error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": { "code": code, "message": message.into() } }))).into_response()
}

fn unauthorized(message: &str, invalid: bool) -> Response {
    let mut response = json_error(StatusCode::UNAUTHORIZED, "unauthorized", message);
    let challenge = if invalid { "Bearer error=\"invalid_token\"" } else { "Bearer" };
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
    response
}

impl AuthPolicy {
    /// Why an admin request may not proceed, if it may not: admin routes need the token as
    /// `Authorization: Bearer` whatever the gateway's mode (see `admin.rs`).
    pub fn admin_refusal(&self, headers: &HeaderMap) -> Option<Response> {
        if self.token.is_none() {
            return Some(json_error(
                StatusCode::FORBIDDEN,
                "admin_disabled",
                "admin routes need the gateway token: set Gateway.AuthToken or the variable Gateway.AuthTokenEnv names",
            ));
        }
        match bearer(headers) {
            Some(token) if self.token_matches(token) => None,
            Some(_) => Some(unauthorized("the token is not valid", true)),
            None => Some(unauthorized("admin routes need the gateway token as Authorization: Bearer <token>", false)),
        }
    }
}

/// Requests served without credentials even when the gateway requires them:
/// - `POST /auth/session`: presenting the token is how one gets a session.
/// - `GET` of the host page and its static files (`/`, `/apps`, `/apps/`, `/apps/assets/{name}`,
///   see `host_page.rs`): they are built into the binary and hold no data, and the page is what
///   asks a browser user for the token (it shows a sign-in form when `/apps/health` answers 401).
///   Everything the page displays comes from routes that still need credentials, `/apps/events`
///   included. When the gateway is open, the DNS-rebinding check still applies to these (it runs
///   for every request, see [`guard`]).
fn is_public(request: &Request) -> bool {
    let path = request.uri().path();
    match *request.method() {
        Method::POST => path == "/auth/session",
        Method::GET => {
            matches!(path, "/" | "/apps" | "/apps/")
                || path.strip_prefix("/apps/assets/").is_some_and(|name| !name.is_empty() && !name.contains('/'))
        }
        _ => false,
    }
}

/// The middleware in front of every route (see [`super::router`]).
pub async fn guard(State(state): State<Arc<GatewayState>>, request: Request, next: Next) -> Response {
    let auth = &state.auth;
    if auth.required {
        if !is_public(&request) {
            match auth.check_credentials(request.headers(), request.uri().query()) {
                Credential::Valid => {}
                Credential::Cookie => {
                    if let Some(refusal) = cross_site_check(auth, &request) {
                        return refusal;
                    }
                }
                Credential::Missing => {
                    return unauthorized(
                        "this gateway requires credentials: Authorization: Bearer <token>, or the session cookie from POST /auth/session",
                        false,
                    )
                }
                Credential::Invalid => return unauthorized("the credential presented is not valid", true),
            }
        }
    } else if let Some(refusal) = rebinding_check(auth, &request) {
        return refusal;
    }
    next.run(request).await
}

/// A request admitted by the session cookie alone must come from the gateway's own page when it
/// can change something (cross-site request forgery): a browser attaches the cookie to a form or
/// `fetch` another site sends, and `SameSite=Strict` does not stop pages of the same site — another
/// port of the same host, such as an app's sandbox — from sending it. So a cookie-admitted request
/// with a method other than GET/HEAD/OPTIONS is refused when its `Origin` is neither the gateway's
/// own (the scheme-less `Host` it was sent to) nor in `Security.AllowedOrigins`, or when the
/// browser says so through `Sec-Fetch-Site` (`cross-site`, `same-site`) with no allowed `Origin`.
/// Requests carrying the token itself are not affected: a browser never adds a Bearer header.
fn cross_site_check(auth: &AuthPolicy, request: &Request) -> Option<Response> {
    if matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return None;
    }
    let headers = request.headers();
    let origin = headers.get(header::ORIGIN).map(|o| o.to_str().unwrap_or("").trim());
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).map(str::trim);
    let fetch_site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()).map(str::trim);
    let verdict = match origin {
        Some(origin) if auth.origin_allowed(origin) => None,
        Some(origin) if auth.public_origin.as_deref().is_some_and(|own| own.eq_ignore_ascii_case(origin.trim_end_matches('/'))) => None,
        Some(origin) if host.is_some_and(|host| same_origin(origin, host)) => None,
        Some(origin) => Some(format!("Origin '{origin}' is not this gateway's own and not in Security.AllowedOrigins")),
        None => match fetch_site {
            Some(site) if site.eq_ignore_ascii_case("cross-site") || site.eq_ignore_ascii_case("same-site") => {
                Some(format!("the browser marks it Sec-Fetch-Site: {site}"))
            }
            _ => None,
        },
    };
    verdict.map(|why| {
        json_error(
            StatusCode::FORBIDDEN,
            "cross_site_request",
            format!("a request admitted by the session cookie must come from the gateway's own page: {why}; send the token as Authorization: Bearer instead"),
        )
    })
}

/// `scheme://authority` of a URL such as `Gateway.PublicBaseUrl` (`https://gw.example.com/base/`
/// → `https://gw.example.com`).
fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.trim().split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().filter(|a| !a.is_empty())?;
    Some(format!("{}://{}", scheme.to_ascii_lowercase(), authority))
}

/// `http(s)://{host}` where `host` is the `Host` header's value (port included, case-insensitive).
fn same_origin(origin: &str, host: &str) -> bool {
    let origin = origin.trim_end_matches('/');
    let authority = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
    authority.is_some_and(|a| a.eq_ignore_ascii_case(host))
}

/// When open: Host must name loopback, Origin (if any) must be loopback or allowed.
fn rebinding_check(auth: &AuthPolicy, request: &Request) -> Option<Response> {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| request.uri().authority().map(|a| a.to_string()));
    match host {
        Some(h) if is_loopback_name(host_part(&h)) => {}
        Some(h) => {
            return Some(json_error(
                StatusCode::FORBIDDEN,
                "forbidden_host",
                format!("Host '{h}' is not a loopback name; this gateway only answers localhost without credentials"),
            ))
        }
        None => return Some(json_error(StatusCode::FORBIDDEN, "forbidden_host", "the request has no Host header")),
    }
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        if !is_loopback_origin(origin) && !auth.origin_allowed(origin) {
            return Some(json_error(
                StatusCode::FORBIDDEN,
                "forbidden_origin",
                format!("Origin '{origin}' is neither loopback nor in Security.AllowedOrigins"),
            ));
        }
    }
    None
}

/// The largest body `POST /auth/session` reads: a token, before any credential is checked.
const MAX_LOGIN_BYTES: usize = 64 * 1024;

/// `POST /auth/session`: the token (Bearer header or JSON body `{"token": …}`) → a session cookie
/// (HttpOnly, SameSite=Strict) for browsers, which cannot set headers on every request.
pub async fn create_session(State(state): State<Arc<GatewayState>>, headers: HeaderMap, body: Body) -> Response {
    let auth = &state.auth;
    if auth.token.is_none() {
        return json_error(
            StatusCode::NOT_FOUND,
            "auth_not_configured",
            "no token is configured (Gateway.AuthToken); the gateway is open on loopback and needs no session",
        );
    }
    let body = match super::connections::read_body(body, MAX_LOGIN_BYTES).await {
        Ok(body) => body,
        Err(refusal) => return refusal,
    };
    let from_body = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("token").and_then(Value::as_str).map(str::to_string));
    let presented = bearer(&headers).map(str::to_string).or(from_body);
    let Some(token) = presented else {
        return unauthorized("present the token as Authorization: Bearer <token> or a JSON body {\"token\": \"…\"}", false);
    };
    if !auth.token_matches(&token) {
        return unauthorized("the token is not valid", true);
    }
    let id = match auth.new_session() {
        Ok(id) => id,
        Err(e) => return json_error(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()),
    };
    let cookie = format!(
        "{SESSION_COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
        auth.session_ttl.as_secs()
    );
    let mut response = Json(json!({ "ok": true, "expiresInSeconds": auth.session_ttl.as_secs() })).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names() {
        for ok in ["localhost", "app.localhost", "127.0.0.1", "127.1.2.3", "::1", "LOCALHOST."] {
            assert!(is_loopback_name(ok), "{ok}");
        }
        for bad in ["evil.com", "localhost.evil.com", "10.0.0.1", "0.0.0.0", ""] {
            assert!(!is_loopback_name(bad), "{bad}");
        }
        assert_eq!(host_part("[::1]:5000"), "::1");
        assert_eq!(host_part("localhost:80"), "localhost");
        assert_eq!(host_part("example.com"), "example.com");
    }

    #[test]
    fn loopback_origins() {
        assert!(is_loopback_origin("http://localhost:5173"));
        assert!(is_loopback_origin("http://[::1]:8080"));
        assert!(is_loopback_origin("https://127.0.0.1"));
        assert!(!is_loopback_origin("http://localhost.evil.com"));
        assert!(!is_loopback_origin("http://evil.com@localhost"));
        assert!(!is_loopback_origin("null"));
        assert!(!is_loopback_origin("file://localhost"));
    }

    #[test]
    fn public_requests() {
        let request = |method: Method, path: &str| Request::builder().method(method).uri(path).body(Body::empty()).unwrap();
        for path in ["/", "/apps", "/apps/", "/apps/assets/host.js", "/apps/assets/anything"] {
            assert!(is_public(&request(Method::GET, path)), "{path}");
            assert!(!is_public(&request(Method::POST, path)), "POST {path}");
        }
        assert!(is_public(&request(Method::POST, "/auth/session")));
        for path in ["/apps/health", "/apps/events", "/apps/assets/", "/apps/assets/a/b", "/apps/mcp/x", "/mcp", "/tools", "/auth/session"] {
            assert!(!is_public(&request(Method::GET, path)), "{path}");
        }
        assert!(!is_public(&request(Method::HEAD, "/apps/")));
    }

    #[test]
    fn own_origins() {
        assert!(same_origin("http://localhost:5000", "localhost:5000"));
        assert!(same_origin("https://GW.example.com/", "gw.example.com"));
        assert!(!same_origin("http://localhost:42237", "localhost:5000"));
        assert!(!same_origin("null", "localhost:5000"));
        assert_eq!(origin_of("https://gw.example.com/base/?x").as_deref(), Some("https://gw.example.com"));
        assert_eq!(origin_of("gw.example.com"), None);
    }

    #[test]
    fn query_and_cookies() {
        assert_eq!(query_param(Some("a=1&token=x%2By+z&b"), "token").as_deref(), Some("x+y z"));
        assert_eq!(query_param(Some("sessionId=abc"), "token"), None);
        assert_eq!(query_param(Some("t=%zz%4"), "t").as_deref(), Some("%zz%4"));
        assert_eq!(query_param(Some("t=%+1%-f%41"), "t").as_deref(), Some("% 1%-fA"), "a sign is not a hex digit");
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, HeaderValue::from_static("a=1; gateway_session=abc ; b=2"));
        assert_eq!(cookies(&h, SESSION_COOKIE).collect::<Vec<_>>(), ["abc"]);
    }
}
