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
//! - Whatever admits a request, a browser may have sent it for another page: another site, or
//!   another port of this host such as an HTTP app's own page or the app sandbox. An HTML form,
//!   or a `fetch` with a `text/plain` body, reaches the gateway without a CORS preflight, carrying
//!   the session cookie (same-site pages) or needing nothing at all (an open gateway). So a
//!   request that changes something takes only a JSON body (415 otherwise) and, unless it carries
//!   the token itself, must come from the gateway's own origin or one of
//!   `Security.AllowedOrigins` (403 otherwise); a read the browser marks as coming from another
//!   site is refused the same way (see [`AuthPolicy::browser_refusal`]).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use parking_lot::Mutex;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::json_error::json_error;
use super::GatewayState;
use crate::config::settings::Settings;

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

    /// Whether the `/admin` routes can be used at all (a token is configured): the host page
    /// offers its "Add app" form only then (SPEC R53).
    pub fn admin_enabled(&self) -> bool {
        self.token.is_some()
    }

    /// A one-line description for the startup log.
    pub fn describe(&self) -> String {
        if self.required {
            format!(
                "Auth: required (Bearer token or session cookie{})",
                if self.allow_query_token { ", ?token= allowed" } else { "" }
            )
        } else {
            "Auth: open (loopback only); Host and Origin must be loopback names, and browsers change things only as JSON \
             from the gateway's own origin or Security.AllowedOrigins"
                .to_string()
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
///   for every request, see [`refusal`]).
fn is_public(method: &Method, path: &str) -> bool {
    match *method {
        Method::POST => path == "/auth/session",
        Method::GET => {
            matches!(path, "/" | "/apps" | "/apps/")
                || path.strip_prefix("/apps/assets/").is_some_and(|name| !name.is_empty() && !name.contains('/'))
        }
        _ => false,
    }
}

/// Any method but GET, HEAD and OPTIONS: what a cross-site request could use to change something.
fn changes_state(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Why the request may not go in, if it may not (a step of the front door, in front of every
/// route): who may ask (credentials, or the DNS-rebinding check when open), then whether a
/// browser could have sent the request for another page ([`AuthPolicy::browser_refusal`]).
pub fn refusal(state: &GatewayState, request: &Request) -> Option<Response> {
    let auth = &state.auth;
    let refusal = if auth.required { credential_check(auth, request) } else { rebinding_check(auth, request) };
    refusal.or_else(|| auth.browser_refusal(&RequestHead::of(request)).map(IntoResponse::into_response))
}

/// When credentials are required: 401 unless the request presents a valid one or is public.
fn credential_check(auth: &AuthPolicy, request: &Request) -> Option<Response> {
    if is_public(request.method(), request.uri().path()) {
        return None;
    }
    match auth.check_credentials(request.headers(), request.uri().query()) {
        Credential::Valid | Credential::Cookie => None,
        Credential::Missing => Some(unauthorized(
            "this gateway requires credentials: Authorization: Bearer <token>, or the session cookie from POST /auth/session",
            false,
        )),
        Credential::Invalid => Some(unauthorized("the credential presented is not valid", true)),
    }
}

/// What the browser checks read of a request (a plain view, so that the fuzz target and the unit
/// tests can build one without a router).
pub struct RequestHead<'a> {
    pub method: &'a Method,
    pub path: &'a str,
    pub query: Option<&'a str>,
    pub headers: &'a HeaderMap,
    /// Where the request was sent: the `Host` header, else the URI's authority (HTTP/2).
    pub host: Option<&'a str>,
    /// Whether a body follows the head: a length known to be 0 is no body.
    pub has_body: bool,
}

impl<'a> RequestHead<'a> {
    fn of(request: &'a Request) -> RequestHead<'a> {
        let headers = request.headers();
        RequestHead {
            method: request.method(),
            path: request.uri().path(),
            query: request.uri().query(),
            headers,
            host: headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .map(str::trim)
                .or_else(|| request.uri().authority().map(|a| a.as_str())),
            has_body: http_body::Body::size_hint(request.body()).exact() != Some(0),
        }
    }

    /// The `Origin` header ("" when it is not text: an origin no one allowed).
    fn origin(&self) -> Option<&'a str> {
        self.headers.get(header::ORIGIN).map(|o| o.to_str().unwrap_or("").trim())
    }

    /// `Sec-Fetch-Site: cross-site` or `same-site`: the browser says another origin's page sent it
    /// (`same-origin` and `none`, a request the user typed or bookmarked, are not).
    fn foreign_site_mark(&self) -> Option<&'a str> {
        let site = self.headers.get("sec-fetch-site")?.to_str().ok()?.trim();
        (site.eq_ignore_ascii_case("cross-site") || site.eq_ignore_ascii_case("same-site")).then_some(site)
    }

    /// The media type of `Content-Type` without its parameters (`application/json; charset=utf-8`
    /// → `application/json`); "" when it is not text.
    fn media_type(&self) -> Option<&'a str> {
        let value = self.headers.get(header::CONTENT_TYPE)?;
        Some(value.to_str().unwrap_or("").split(';').next().unwrap_or("").trim())
    }
}

/// Why the gateway refuses a request that a browser could have sent for another page.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BrowserRefusal {
    /// A body on a route that changes something, not sent as JSON: 415. Forms and `fetch`
    /// without a preflight can send only `text/plain`, form or multipart bodies, or an untyped
    /// one, so JSON-only routes are out of their reach (as rmcp already does for `/mcp`).
    #[error(
        "{method} {path} takes a JSON body: send it with Content-Type: application/json (this request {})",
        received_type(.received)
    )]
    NotJson { method: String, path: String, received: Option<String> },
    /// A request that changes something, from another origin's page: 403.
    #[error(
        "a browser request that changes something must come from this gateway's own page or an origin in \
         Security.AllowedOrigins: {why}; a program sends the token as Authorization: Bearer instead"
    )]
    CrossSiteWrite { why: String },
    /// A read of data the browser marks as coming from another site's page: 403.
    #[error(
        "a browser request from another site's page may read nothing here but the host page: {why}; add that origin \
         to Security.AllowedOrigins, or send the token as Authorization: Bearer"
    )]
    CrossSiteRead { why: String },
}

/// What a refused request sent as its content type, for the 415's message.
fn received_type(received: &Option<String>) -> String {
    match received {
        Some(media_type) => format!("sent Content-Type: {media_type}"),
        None => "has a body but no Content-Type".to_string(),
    }
}

impl BrowserRefusal {
    pub fn status(&self) -> StatusCode {
        match self {
            BrowserRefusal::NotJson { .. } => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            BrowserRefusal::CrossSiteWrite { .. } | BrowserRefusal::CrossSiteRead { .. } => StatusCode::FORBIDDEN,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            BrowserRefusal::NotJson { .. } => "unsupported_media_type",
            BrowserRefusal::CrossSiteWrite { .. } | BrowserRefusal::CrossSiteRead { .. } => "cross_site_request",
        }
    }
}

impl IntoResponse for BrowserRefusal {
    fn into_response(self) -> Response {
        json_error(self.status(), self.code(), self.to_string())
    }
}

/// A route that changes something reads only JSON bodies; a request without a body needs no type
/// (`DELETE /apps/sessions/{id}`, a login with the Bearer header, the admin POSTs).
fn content_type_refusal(head: &RequestHead) -> Option<BrowserRefusal> {
    if !changes_state(head.method) || !head.has_body {
        return None;
    }
    let media_type = head.media_type();
    if media_type.is_some_and(|t| t.eq_ignore_ascii_case("application/json")) {
        return None;
    }
    Some(BrowserRefusal::NotJson {
        method: head.method.to_string(),
        path: head.path.to_string(),
        received: media_type.map(str::to_string),
    })
}

impl AuthPolicy {
    /// Why a request a browser could have sent for another page is refused, if it is: the
    /// content type of a body that changes something ([`content_type_refusal`]), then where it
    /// comes from ([`AuthPolicy::cross_site_refusal`]). Runs after the credentials (or the
    /// rebinding check) admitted the request, in either mode.
    pub fn browser_refusal(&self, head: &RequestHead) -> Option<BrowserRefusal> {
        content_type_refusal(head).or_else(|| self.cross_site_refusal(head))
    }

    /// Another origin's page may neither change anything nor read data, whatever admitted it: the
    /// session cookie (a browser attaches it to a form or `fetch` of another port of the same
    /// host, which `SameSite=Strict` does not stop) or nothing at all (an open gateway, where any
    /// local page — an HTTP app's own, on another port — could otherwise drive the agent).
    ///
    /// - Changes (any method but GET/HEAD/OPTIONS): an `Origin` must be one the gateway trusts
    ///   ([`AuthPolicy::trusted_origin`]); without one, `Sec-Fetch-Site: cross-site`/`same-site`
    ///   is refused.
    /// - Reads of data (every GET or HEAD but the host page's, see [`is_public`]): refused when
    ///   the browser marks them `cross-site`/`same-site` and the `Origin` is not trusted. Their
    ///   answers are unreadable there without CORS anyway, but a read can hold a stream open
    ///   (`/apps/events`), and the page, its `EventSource` and its fetches are same-origin.
    ///
    /// A request that carries the token itself (Bearer header, or the allowed `?token=`) is
    /// exempt: a browser never adds it on its own. A client that is no browser (no `Origin`, no
    /// `Sec-Fetch-Site`) is never refused here.
    fn cross_site_refusal(&self, head: &RequestHead) -> Option<BrowserRefusal> {
        let origin = head.origin();
        let trusted = origin.is_some_and(|o| self.trusted_origin(o, head.host));
        let refusal = if changes_state(head.method) {
            match (origin, head.foreign_site_mark()) {
                (Some(_), _) if trusted => None,
                (Some(origin), _) => Some(BrowserRefusal::CrossSiteWrite { why: self.untrusted(origin, head.host) }),
                (None, Some(site)) => {
                    Some(BrowserRefusal::CrossSiteWrite { why: format!("the browser marks it Sec-Fetch-Site: {site}") })
                }
                (None, None) => None,
            }
        } else if !matches!(*head.method, Method::GET | Method::HEAD) || is_public(head.method, head.path) || trusted {
            None
        } else {
            head.foreign_site_mark().map(|site| BrowserRefusal::CrossSiteRead {
                why: match origin {
                    Some(origin) => format!("the browser marks it Sec-Fetch-Site: {site}, and {}", self.untrusted(origin, head.host)),
                    None => format!("the browser marks it Sec-Fetch-Site: {site}"),
                },
            })
        };
        refusal.filter(|_| !self.presents_token(head.headers, head.query))
    }

    /// The gateway's own origin (the `Host` the request was sent to, or `Gateway.PublicBaseUrl`'s
    /// origin behind a proxy that rewrites `Host`), or one of `Security.AllowedOrigins`.
    pub fn trusted_origin(&self, origin: &str, host: Option<&str>) -> bool {
        self.origin_allowed(origin)
            || self.public_origin.as_deref().is_some_and(|own| own.eq_ignore_ascii_case(origin.trim_end_matches('/')))
            || host.is_some_and(|host| same_origin(origin, host))
    }

    /// Why `origin` is not trusted, naming the origin the gateway calls its own.
    fn untrusted(&self, origin: &str, host: Option<&str>) -> String {
        let own = self.public_origin.as_deref().or(host);
        match own {
            Some(own) => format!("its Origin '{origin}' is neither this gateway's own ({own}) nor in Security.AllowedOrigins"),
            None => format!("its Origin '{origin}' is not in Security.AllowedOrigins"),
        }
    }

    /// The token itself: as a Bearer header, or as `?token=` when that is allowed.
    fn presents_token(&self, headers: &HeaderMap, query: Option<&str>) -> bool {
        bearer(headers).is_some_and(|token| self.token_matches(token))
            || (self.allow_query_token && query_param(query, "token").is_some_and(|token| self.token_matches(&token)))
    }
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

/// When open: Host must name loopback, Origin (if any) must be loopback or allowed. (A request
/// that changes something needs more: the gateway's own origin, see [`AuthPolicy::browser_refusal`].)
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
        for path in ["/", "/apps", "/apps/", "/apps/assets/host.js", "/apps/assets/anything"] {
            assert!(is_public(&Method::GET, path), "{path}");
            assert!(!is_public(&Method::POST, path), "POST {path}");
        }
        assert!(is_public(&Method::POST, "/auth/session"));
        for path in ["/apps/health", "/apps/events", "/apps/assets/", "/apps/assets/a/b", "/apps/mcp/x", "/mcp", "/tools", "/auth/session"] {
            assert!(!is_public(&Method::GET, path), "{path}");
        }
        assert!(!is_public(&Method::HEAD, "/apps/"));
    }

    const TOKEN: &str = "unit-test-token-0123456789";

    /// The policy of `settings` on a gateway listening on 127.0.0.1:5000 (open unless it says
    /// otherwise).
    fn policy(settings: Value) -> AuthPolicy {
        let settings = Settings { effective: settings, config_dir: std::path::PathBuf::from("/unit-test") };
        AuthPolicy::from_settings(&settings, &["127.0.0.1:5000".parse().unwrap()]).unwrap()
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(header::HeaderName::from_bytes(name.as_bytes()).unwrap(), HeaderValue::from_str(value).unwrap());
        }
        map
    }

    /// `auth.browser_refusal` of a request sent to `localhost:5000`.
    fn refusal(auth: &AuthPolicy, method: Method, target: &str, pairs: &[(&str, &str)], has_body: bool) -> Option<BrowserRefusal> {
        let (path, query) = target.split_once('?').map_or((target, None), |(p, q)| (p, Some(q)));
        let headers = headers(pairs);
        let head = RequestHead { method: &method, path, query, headers: &headers, host: Some("localhost:5000"), has_body };
        auth.browser_refusal(&head)
    }

    #[test]
    fn a_body_that_changes_something_must_be_json() {
        let auth = policy(json!({}));
        for content_type in ["application/json", "application/json; charset=utf-8", "Application/JSON ;charset=UTF-8"] {
            assert_eq!(refusal(&auth, Method::POST, "/apps/chat", &[("content-type", content_type)], true), None, "{content_type}");
        }
        for content_type in ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonp", ""] {
            let refused = refusal(&auth, Method::POST, "/apps/chat", &[("content-type", content_type)], true);
            let Some(refused @ BrowserRefusal::NotJson { .. }) = refused else { panic!("{content_type}: {refused:?}") };
            assert_eq!((refused.status(), refused.code()), (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type"));
            let message = refused.to_string();
            assert!(message.contains("POST /apps/chat") && message.contains("application/json"), "{message}");
            let media_type = content_type.split(';').next().unwrap().trim();
            assert!(message.contains(&format!("sent Content-Type: {media_type}")), "{message}");
        }
        let untyped = refusal(&auth, Method::PUT, "/admin/workspace/mcp/x", &[], true).expect("an untyped body is refused");
        assert!(untyped.to_string().contains("has a body but no Content-Type"), "{untyped}");
        // No body, no type needed; reads are never asked for one.
        assert_eq!(refusal(&auth, Method::DELETE, "/apps/sessions/s1", &[], false), None);
        assert_eq!(refusal(&auth, Method::POST, "/admin/mcpapps/reload", &[("content-type", "text/plain")], false), None);
        assert_eq!(refusal(&auth, Method::GET, "/apps/sessions", &[("content-type", "text/plain")], true), None);
    }

    #[test]
    fn an_open_gateway_takes_changes_only_from_its_own_or_an_allowed_origin() {
        let auth = policy(json!({ "Security": { "AllowedOrigins": ["http://localhost:5173/"] } }));
        let json_post = |pairs: &[(&str, &str)]| {
            let mut pairs = pairs.to_vec();
            pairs.push(("content-type", "application/json"));
            refusal(&auth, Method::POST, "/apps/chat", &pairs, true)
        };
        for pairs in [
            vec![],
            vec![("origin", "http://localhost:5000")],
            vec![("origin", "http://LOCALHOST:5000/"), ("sec-fetch-site", "same-origin")],
            vec![("origin", "http://localhost:5173"), ("sec-fetch-site", "same-site")],
            vec![("sec-fetch-site", "same-origin")],
            vec![("sec-fetch-site", "none")],
        ] {
            assert_eq!(json_post(&pairs), None, "{pairs:?}");
        }
        for pairs in [
            vec![("origin", "http://127.0.0.1:43117"), ("sec-fetch-site", "same-site")],
            vec![("origin", "http://localhost:5001")],
            vec![("origin", "null")],
            vec![("sec-fetch-site", "cross-site")],
            vec![("sec-fetch-site", "Same-Site")],
        ] {
            let refused = json_post(&pairs);
            let Some(refused @ BrowserRefusal::CrossSiteWrite { .. }) = refused else { panic!("{pairs:?}: {refused:?}") };
            assert_eq!((refused.status(), refused.code()), (StatusCode::FORBIDDEN, "cross_site_request"));
            assert!(refused.to_string().contains("Bearer"), "{refused}");
        }
        let named = json_post(&[("origin", "http://127.0.0.1:43117")]).unwrap().to_string();
        assert!(named.contains("'http://127.0.0.1:43117'") && named.contains("localhost:5000"), "{named}");
        // Without a token configured, nothing exempts a foreign page, not even a Bearer header.
        assert!(json_post(&[("origin", "http://127.0.0.1:43117"), ("authorization", "Bearer guess")]).is_some());
    }

    #[test]
    fn the_token_itself_exempts_a_request_and_the_cookie_does_not() {
        let auth = policy(json!({ "Gateway": { "AuthToken": TOKEN, "AlwaysRequireAuth": true, "AllowQueryStringToken": true } }));
        let bearer = format!("Bearer {TOKEN}");
        let foreign = [("origin", "https://evil.example"), ("content-type", "application/json")];
        let post = |extra: Option<(&str, &str)>| {
            let pairs: Vec<(&str, &str)> = foreign.iter().copied().chain(extra).collect();
            refusal(&auth, Method::POST, "/apps/chat", &pairs, true)
        };
        assert_eq!(post(Some(("authorization", bearer.as_str()))), None);
        assert_eq!(refusal(&auth, Method::POST, &format!("/apps/chat?token={TOKEN}"), &foreign, true), None);
        assert!(post(Some(("authorization", "Bearer wrong"))).is_some());
        assert!(post(Some(("cookie", "gateway_session=abc"))).is_some());
        assert!(post(None).is_some());
        assert!(refusal(&auth, Method::GET, "/apps/sessions", &[("sec-fetch-site", "cross-site")], false).is_some());
        assert_eq!(refusal(&auth, Method::GET, "/apps/sessions", &[("sec-fetch-site", "cross-site"), ("authorization", &bearer)], false), None);
        // The token does not excuse a body that is not JSON.
        let refused = refusal(&auth, Method::POST, "/apps/chat", &[("authorization", bearer.as_str()), ("content-type", "text/plain")], true);
        assert!(matches!(refused, Some(BrowserRefusal::NotJson { .. })), "{refused:?}");
    }

    #[test]
    fn reads_of_data_marked_cross_site_are_refused_unless_from_a_trusted_origin() {
        let auth = policy(json!({
            "Gateway": { "AuthToken": TOKEN, "AlwaysRequireAuth": true, "PublicBaseUrl": "https://gw.example.com/base/" },
            "Security": { "AllowedOrigins": ["https://trusted.example"] }
        }));
        let get = |method: Method, path: &str, pairs: &[(&str, &str)]| refusal(&auth, method, path, pairs, false);
        for site in ["cross-site", "same-site"] {
            for path in ["/apps/sessions", "/apps/events", "/apps/health", "/healthz", "/mcp"] {
                let refused = get(Method::GET, path, &[("sec-fetch-site", site)]);
                assert!(matches!(refused, Some(BrowserRefusal::CrossSiteRead { .. })), "{site} {path}: {refused:?}");
                assert!(get(Method::HEAD, path, &[("sec-fetch-site", site)]).is_some(), "HEAD {path}");
            }
            let foreign = get(Method::GET, "/apps/sessions", &[("sec-fetch-site", site), ("origin", "http://localhost:5001")]);
            assert!(foreign.is_some_and(|r| r.to_string().contains("'http://localhost:5001'")));
            // The host page may be linked from anywhere; an allowed origin reads through CORS.
            assert_eq!(get(Method::GET, "/apps/", &[("sec-fetch-site", site)]), None);
            assert_eq!(get(Method::GET, "/apps/assets/host.js", &[("sec-fetch-site", site)]), None);
            assert_eq!(get(Method::GET, "/apps/sessions", &[("sec-fetch-site", site), ("origin", "https://trusted.example")]), None);
            assert_eq!(get(Method::GET, "/apps/sessions", &[("sec-fetch-site", site), ("origin", "https://gw.example.com")]), None);
            assert_eq!(get(Method::OPTIONS, "/apps/sessions", &[("sec-fetch-site", site)]), None);
        }
        for pairs in [vec![], vec![("sec-fetch-site", "same-origin")], vec![("sec-fetch-site", "none")], vec![("origin", "https://evil.example")]] {
            assert_eq!(get(Method::GET, "/apps/sessions", &pairs), None, "{pairs:?}");
        }
    }

    #[test]
    fn the_head_of_a_request_knows_whether_a_body_follows() {
        let request = |body: Body| Request::builder().method(Method::POST).uri("http://localhost:5000/apps/chat?x=1").body(body).unwrap();
        let empty = request(Body::empty());
        let head = RequestHead::of(&empty);
        assert!(!head.has_body);
        assert_eq!((head.path, head.query, head.host), ("/apps/chat", Some("x=1"), Some("localhost:5000")));
        assert!(RequestHead::of(&request(Body::from("hello"))).has_body);
        let streamed = Body::from_stream(futures::stream::iter([Ok::<_, std::io::Error>(axum::body::Bytes::from_static(b"{}"))]));
        assert!(RequestHead::of(&request(streamed)).has_body, "a body of unknown length is a body");
        let mut with_host = request(Body::empty());
        with_host.headers_mut().insert(header::HOST, HeaderValue::from_static("127.0.0.1:5000"));
        assert_eq!(RequestHead::of(&with_host).host, Some("127.0.0.1:5000"), "the Host header first");
    }

    #[test]
    fn a_refusal_is_a_json_error() {
        let response = BrowserRefusal::CrossSiteWrite { why: "because".into() }.into_response();
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
        let response =
            BrowserRefusal::NotJson { method: "POST".into(), path: "/apps/chat".into(), received: Some("text/plain".into()) }.into_response();
        assert_eq!(response.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
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
