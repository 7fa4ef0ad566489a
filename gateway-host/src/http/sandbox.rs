//! The sandbox origin of the MCP Apps spec (SPEC R38): the host page renders each app's UI in an
//! iframe on a **different origin** than its own, so app code can neither read the page's DOM
//! nor call the gateway's same-origin endpoints with the page's authority. The gateway provides
//! that origin itself, as a second set of listeners (`Gateway.SandboxUrls`) serving one static
//! page.
//!
//! What is here:
//! - [`listen_addrs`]: where the sandbox listens (configuration, the ephemeral default, the
//!   refusal of an address the gateway itself listens on).
//! - [`SandboxSite`]: the bound addresses and [`SandboxSite::origin`], the one function that says
//!   which origin a browser should use for the sandbox (`/apps/health`'s `sandbox` and the host
//!   page's CSP `frame-src` both call it, so they always agree).
//! - [`router`]: the sandbox listener's routes — `GET /sandbox` and `GET /sandbox/sandbox.js`,
//!   nothing else.
//! - [`sandbox_csp`]: the iframe's Content-Security-Policy from the app resource's
//!   `_meta.ui.csp`, strict by default, every declared origin sanitized.
//!
//! No authentication on this listener: it serves two embedded static files and holds no data, so
//! a credential would protect nothing (and an iframe could not present a Bearer token anyway).
//! When the gateway is open (loopback only), the `Host` header must still be a loopback name, the
//! same DNS-rebinding rule the main listener applies ([`super::auth`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{from_fn_with_state, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::Value;

use super::auth::{host_part, is_loopback_name, query_param};
use super::health::valid_authority;
use crate::config::settings::Settings;

/// The sandbox page (it loads the app's HTML into itself and bridges it to the host page).
const SANDBOX_HTML: &[u8] = include_bytes!("../../web/dist/sandbox.html");
/// The sandbox page's script.
const SANDBOX_JS: &[u8] = include_bytes!("../../web/dist/sandbox.js");

/// A longer `?csp=` query is not parsed at all (the strict default applies): a real declaration
/// is a few origins, and parsing attacker-sized input buys nothing.
pub const MAX_CSP_QUERY_BYTES: usize = 8 * 1024;
/// Origins kept per `_meta.ui.csp` list; the rest are dropped (and logged).
pub const MAX_CSP_VALUES: usize = 32;

/// The CSP when an app declares nothing: the MCP Apps spec's default (inline script and style of
/// the app's own HTML, images and media from data: URLs, no network, no frames).
pub const DEFAULT_CSP: &str = "default-src 'none'; script-src 'self' 'unsafe-inline'; \
     style-src 'self' 'unsafe-inline'; img-src 'self' data:; media-src 'self' data:; connect-src 'none'; \
     frame-src 'none'; base-uri 'self'; object-src 'none'";

#[derive(Debug, thiserror::Error)]
pub enum SandboxConfigError {
    #[error("{key}: {reason}")]
    Urls { key: &'static str, reason: String },
    #[error(
        "{key}: the sandbox address {sandbox} is also a gateway listen address ({gateway}, Gateway.Urls / --urls); \
         the sandbox must be a different origin, so give it another port (or leave {key} unset for an ephemeral one)"
    )]
    SameAsGateway { key: &'static str, sandbox: SocketAddr, gateway: SocketAddr },
    #[error(
        "Gateway.PublicSandboxUrl '{0}' is not an origin: expected http(s)://HOST[:PORT] with no path \
         (e.g. https://sandbox.example.com)"
    )]
    PublicUrl(String),
}

/// Where the sandbox listens: `Gateway.SandboxUrls` (`;`-separated `http://IP:PORT`), else the
/// older single `Gateway.SandboxUrl`, else the host of the first gateway address with port 0.
///
/// Port 0 by default because any fixed port could collide with something (the example
/// GroceryInventory app uses 5001); the bound port reaches the browser through `/apps/health`.
/// An address the gateway itself listens on is refused here, with a message naming both, rather
/// than by the operating system's terser "address in use".
pub fn listen_addrs(settings: &Settings, gateway: &[SocketAddr]) -> Result<Vec<SocketAddr>, SandboxConfigError> {
    let configured = settings
        .get_str("Gateway:SandboxUrls")
        .map(|urls| ("Gateway.SandboxUrls", urls))
        .or_else(|| settings.get_str("Gateway:SandboxUrl").map(|urls| ("Gateway.SandboxUrl", urls)));
    let (key, addrs) = match configured {
        Some((key, urls)) => {
            let addrs =
                crate::config::gateway_config::parse_urls(&urls).map_err(|e| SandboxConfigError::Urls { key, reason: e.to_string() })?;
            (key, addrs)
        }
        None => {
            let ip = gateway.first().map(SocketAddr::ip).unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
            ("Gateway.SandboxUrls", vec![SocketAddr::new(ip, 0)])
        }
    };
    for sandbox in &addrs {
        if let Some(gateway) = gateway.iter().find(|g| overlaps(sandbox, g)) {
            return Err(SandboxConfigError::SameAsGateway { key, sandbox: *sandbox, gateway: *gateway });
        }
    }
    Ok(addrs)
}

/// Two listen addresses that cannot both be bound: the same fixed port on the same IP, or on an
/// unspecified IP (which takes the port on every address). Port 0 never collides: each bind gets
/// its own ephemeral port.
fn overlaps(a: &SocketAddr, b: &SocketAddr) -> bool {
    a.port() != 0
        && a.port() == b.port()
        && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}

/// The sandbox as the rest of the gateway sees it, fixed at startup.
pub struct SandboxSite {
    /// The addresses the sandbox listeners are bound to (ephemeral ports resolved).
    pub bound: Vec<SocketAddr>,
    /// `Gateway.PublicSandboxUrl` without a trailing `/`: the origin browsers use when the
    /// sandbox is reached through a reverse proxy or a name the gateway cannot know.
    public_url: Option<String>,
}

impl SandboxSite {
    /// Fails when `Gateway.PublicSandboxUrl` is set but is not an origin: it goes into the host
    /// page's CSP header, where a path, quote or `;` would change the policy.
    pub fn from_settings(settings: &Settings, bound: Vec<SocketAddr>) -> Result<SandboxSite, SandboxConfigError> {
        let public_url = match settings.get_str("Gateway:PublicSandboxUrl") {
            Some(url) => {
                let url = url.trim_end_matches('/').to_string();
                let valid = sanitize_source(&url).is_some() && (url.starts_with("http://") || url.starts_with("https://"));
                if !valid || url.contains("*.") {
                    return Err(SandboxConfigError::PublicUrl(url));
                }
                Some(url)
            }
            None => {
                if settings.get_str("Gateway:PublicBaseUrl").is_some() {
                    tracing::warn!(
                        "Gateway.PublicBaseUrl is set but Gateway.PublicSandboxUrl is not: app UIs are framed from the \
                         sandbox listener's port on the name the browser used; behind a reverse proxy, set \
                         Gateway.PublicSandboxUrl to the sandbox's public origin"
                    );
                }
                None
            }
        };
        Ok(SandboxSite { bound, public_url })
    }

    /// The sandbox origin a browser should use, for the request with these headers (its `Host`).
    /// `None` only when no sandbox listener is bound.
    pub fn origin(&self, headers: &HeaderMap) -> Option<String> {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        origin_for(&self.bound, self.public_url.as_deref(), host)
    }
}

/// The sandbox origin (see [`SandboxSite::origin`]), as a pure function of its inputs:
///
/// - `Gateway.PublicSandboxUrl` when configured, verbatim.
/// - A sandbox bound to an unspecified (`0.0.0.0`, `::`) or loopback address is reached on the
///   name the client used for the gateway (its `Host`, already validated by the auth layer and
///   checked again here) with the sandbox's **bound** port: `localhost` stays `localhost`, a LAN
///   name stays that name. An IP literal in `Host` that the sandbox does not listen on (e.g.
///   `[::1]` while the sandbox is bound to `127.0.0.1`) is replaced by the bound address.
/// - Any other address (a specific interface) is used as bound.
pub fn origin_for(bound: &[SocketAddr], public_url: Option<&str>, host: Option<&str>) -> Option<String> {
    if let Some(url) = public_url {
        return Some(url.to_string());
    }
    let addr = bound.first()?;
    let ip = addr.ip();
    if !(ip.is_unspecified() || ip.is_loopback()) {
        return Some(format!("http://{addr}"));
    }
    let hostname = host.filter(|h| valid_authority(h)).map(host_part).filter(|h| !h.is_empty());
    let reachable = |name: &str| match name.parse::<IpAddr>() {
        Ok(literal) => literal == ip || (ip.is_unspecified() && (ip.is_ipv6() || literal.is_ipv4())),
        Err(_) => true,
    };
    match hostname {
        Some(name) if reachable(name) && name.contains(':') => Some(format!("http://[{name}]:{}", addr.port())),
        Some(name) if reachable(name) => Some(format!("http://{name}:{}", addr.port())),
        _ if ip.is_unspecified() => {
            let loopback = if ip.is_ipv6() { IpAddr::V6(Ipv6Addr::LOCALHOST) } else { IpAddr::V4(Ipv4Addr::LOCALHOST) };
            Some(format!("http://{}", SocketAddr::new(loopback, addr.port())))
        }
        _ => Some(format!("http://{addr}")),
    }
}

// ---------------------------------------------------------------------------------------------
// The sandbox listener
// ---------------------------------------------------------------------------------------------

/// What the sandbox router needs to know of the gateway.
#[derive(Clone, Copy)]
struct HostRule {
    /// The main gateway is open (loopback only, no credentials): apply the loopback-`Host` rule.
    open: bool,
}

/// The sandbox listener's router: `GET /sandbox`, `GET /sandbox/sandbox.js`, and a plain 404 for
/// every other path and method (none of the gateway's routes exist here, so an app UI cannot use
/// the sandbox origin to reach them). `gateway_open`: see [`HostRule`].
pub fn router(gateway_open: bool, own: OwnOrigins) -> Router {
    Router::new()
        .route("/sandbox", get(page).with_state(Arc::new(own)))
        .route("/sandbox/sandbox.js", get(script))
        .fallback(not_found)
        .method_not_allowed_fallback(not_found)
        .layer(from_fn_with_state(HostRule { open: gateway_open }, host_rule))
}

async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "not found\n").into_response()
}

/// When the gateway is open, a page on another name resolving to 127.0.0.1 (DNS rebinding) must
/// not be served from the sandbox either.
async fn host_rule(State(rule): State<HostRule>, request: Request, next: Next) -> Response {
    if rule.open {
        let host = request.headers().get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
        if !is_loopback_name(host_part(host)) {
            return (
                StatusCode::FORBIDDEN,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                "this sandbox only answers loopback names while the gateway is open\n",
            )
                .into_response();
        }
    }
    next.run(request).await
}

/// `GET /sandbox?csp=<percent-encoded JSON>`: the sandbox page with the app's CSP as a header
/// (a header, not a `<meta>`, so the app's HTML cannot drop or precede it). `no-store`: the
/// policy is per app and must never come from a cache.
async fn page(State(own): State<Arc<OwnOrigins>>, request: Request) -> Response {
    let csp = sandbox_csp(request.uri().query(), &own);
    for warning in &csp.warnings {
        tracing::warn!("sandbox CSP: {warning}");
    }
    let mut response = static_response(SANDBOX_HTML, "text/html; charset=utf-8", "no-store");
    match HeaderValue::from_str(&csp.header) {
        Ok(value) => response.headers_mut().insert(header::CONTENT_SECURITY_POLICY, value),
        // Unreachable: sanitized sources are ASCII without control characters.
        Err(_) => response.headers_mut().insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(DEFAULT_CSP)),
    };
    response
}

/// `GET /sandbox/sandbox.js`. `no-cache` so a new gateway build is picked up.
async fn script() -> Response {
    static_response(SANDBOX_JS, "text/javascript; charset=utf-8", "no-cache")
}

fn static_response(body: &'static [u8], content_type: &'static str, cache: &'static str) -> Response {
    let mut response = body.into_response();
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}

// ---------------------------------------------------------------------------------------------
// The iframe's Content-Security-Policy
// ---------------------------------------------------------------------------------------------

/// A built policy and what was dropped on the way (the caller logs it; this stays pure).
#[derive(Debug, PartialEq, Eq)]
pub struct SandboxCsp {
    pub header: String,
    pub warnings: Vec<String>,
}

/// The policy for a `/sandbox` request's query (`?csp=<percent-encoded JSON>`, the resource's
/// `_meta.ui.csp`). Anything unusable — no `csp`, a query over [`MAX_CSP_QUERY_BYTES`], JSON
/// that does not parse or is not an object — gives [`DEFAULT_CSP`].
pub fn sandbox_csp(query: Option<&str>, own: &OwnOrigins) -> SandboxCsp {
    let strict = |warning: Option<String>| SandboxCsp { header: DEFAULT_CSP.to_string(), warnings: warning.into_iter().collect() };
    let Some(query) = query else { return strict(None) };
    if query.len() > MAX_CSP_QUERY_BYTES {
        return strict(Some(format!(
            "the query is {} bytes (over {MAX_CSP_QUERY_BYTES}); using the strict default policy",
            query.len()
        )));
    }
    let Some(raw) = query_param(Some(query), "csp").filter(|c| !c.trim().is_empty()) else { return strict(None) };
    match serde_json::from_str::<Value>(&raw) {
        Ok(Value::Null) => strict(None),
        Ok(declared @ Value::Object(_)) => csp_from_declaration(&declared, own),
        Ok(_) => strict(Some("csp is not a JSON object; using the strict default policy".to_string())),
        Err(e) => strict(Some(format!("csp is not valid JSON ({e}); using the strict default policy"))),
    }
}

/// The policy for a declared `_meta.ui.csp` object (MCP Apps spec):
/// - `resourceDomains` → added to `script-src`, `style-src`, `img-src`, `media-src`, and a
///   `font-src 'self' …` directive (present only then: by default fonts fall to `default-src 'none'`);
/// - `connectDomains` → `connect-src` instead of `'none'`;
/// - `frameDomains` → `frame-src` instead of `'none'`;
/// - `baseUriDomains` → added to `base-uri 'self'`.
///
/// Every value must pass [`sanitize_source`]; the rest are dropped with a warning, as is
/// everything past [`MAX_CSP_VALUES`] per list.
pub fn csp_from_declaration(declared: &Value, own: &OwnOrigins) -> SandboxCsp {
    let mut warnings = Vec::new();
    let mut list = |key: &str| -> Vec<String> {
        let mut kept: Vec<String> = Vec::new();
        match declared.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for item in items {
                    let Some(source) = item.as_str().and_then(sanitize_source) else {
                        warnings.push(format!("{key}: dropped {} (not a scheme://host[:port] origin)", shown(item)));
                        continue;
                    };
                    if own.covers(&source) {
                        warnings.push(format!("{key}: dropped {} (that is the gateway itself)", shown(item)));
                        continue;
                    }
                    if kept.contains(&source) {
                        continue;
                    }
                    if kept.len() == MAX_CSP_VALUES {
                        warnings.push(format!("{key}: dropped {} (more than {MAX_CSP_VALUES} values)", shown(item)));
                        continue;
                    }
                    kept.push(source);
                }
            }
            Some(other) => warnings.push(format!("{key}: dropped {} (not an array)", shown(other))),
        }
        kept
    };
    let resources = list("resourceDomains");
    let connect = list("connectDomains");
    let frames = list("frameDomains");
    let base_uris = list("baseUriDomains");

    let directive = |name: &str, fixed: &str, extra: &[String]| {
        let mut d = format!("{name} {fixed}");
        for source in extra {
            d.push(' ');
            d.push_str(source);
        }
        d
    };
    let or_none = |name: &str, sources: &[String]| {
        if sources.is_empty() {
            format!("{name} 'none'")
        } else {
            format!("{name} {}", sources.join(" "))
        }
    };
    let mut directives = vec![
        "default-src 'none'".to_string(),
        directive("script-src", "'self' 'unsafe-inline'", &resources),
        directive("style-src", "'self' 'unsafe-inline'", &resources),
        directive("img-src", "'self' data:", &resources),
    ];
    if !resources.is_empty() {
        directives.push(directive("font-src", "'self'", &resources));
    }
    directives.extend([
        directive("media-src", "'self' data:", &resources),
        or_none("connect-src", &connect),
        or_none("frame-src", &frames),
        directive("base-uri", "'self'", &base_uris),
        "object-src 'none'".to_string(),
    ]);
    SandboxCsp { header: directives.join("; "), warnings }
}

/// A dropped value as it goes into a log line: JSON-quoted (control characters escaped, so it
/// cannot forge log lines) and cut short.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 120 {
        format!("{}…", text.chars().take(120).collect::<String>())
    } else {
        text
    }
}

/// Where the gateway itself answers, which no app may declare as a CSP source: browsers treat
/// another port of the same host as the same *site*, so the session cookie would go along with
/// an app's requests to the gateway's routes. A source is refused when its port (explicit or
/// the scheme's default) is one the gateway listens on (main or sandbox listeners, whatever the
/// host: a listener on 0.0.0.0 answers every name), or when its host is `Gateway.PublicBaseUrl`'s.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnOrigins {
    pub ports: Vec<u16>,
    pub public_host: Option<String>,
}

impl OwnOrigins {
    pub fn new(listeners: &[SocketAddr], public_base_url: Option<&str>) -> OwnOrigins {
        let mut ports: Vec<u16> = listeners.iter().map(SocketAddr::port).collect();
        ports.sort_unstable();
        ports.dedup();
        let public_host = public_base_url
            .and_then(|u| u.split_once("://").map(|(_, rest)| rest.split('/').next().unwrap_or("").to_string()))
            .map(|authority| host_part(&authority).to_ascii_lowercase())
            .filter(|h| !h.is_empty());
        OwnOrigins { ports, public_host }
    }

    /// `source` is a normalized `scheme://host[:port]` from [`sanitize_source`].
    fn covers(&self, source: &str) -> bool {
        let Some((scheme, authority)) = source.split_once("://") else { return false };
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => (host, port.parse::<u16>().ok()),
            _ => (authority, None),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port = port.unwrap_or(if matches!(scheme, "https" | "wss") { 443 } else { 80 });
        let named = |public: &String| host == public || host.strip_prefix("*.").is_some_and(|h| public.ends_with(&format!(".{h}")));
        self.ports.contains(&port) || self.public_host.as_ref().is_some_and(named)
    }
}

/// One CSP source from an app's declaration, normalized to lower case, or `None`.
///
/// Accepted: `http|https|ws|wss` `://` host `[:port]`, where host is a DNS name (optionally
/// `*.` followed by a name), an IPv4 address or a bracketed IPv6 address, and port is 1–65535.
/// A single trailing `/` is removed (same meaning). Everything else is refused: paths, queries,
/// userinfo, quotes, spaces, `;` and `,` (which would start another directive or source), a bare
/// `*`, scheme-only sources (`https:`, `data:`, `javascript:`) and keywords (`'unsafe-eval'`).
pub fn sanitize_source(value: &str) -> Option<String> {
    let (scheme, rest) = value.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if !matches!(scheme.as_str(), "http" | "https" | "ws" | "wss") {
        return None;
    }
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (host, port) = if let Some(inner) = rest.strip_prefix('[') {
        let (ip, after) = inner.split_once(']')?;
        ip.parse::<Ipv6Addr>().ok()?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        (format!("[{}]", ip.to_ascii_lowercase()), port)
    } else {
        let (host, port) = match rest.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (rest, None),
        };
        if !valid_host(host) {
            return None;
        }
        (host.to_ascii_lowercase(), port)
    };
    let port = match port {
        None => String::new(),
        Some(p) if !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) => {
            let n: u32 = p.parse().ok()?;
            if !(1..=65535).contains(&n) {
                return None;
            }
            format!(":{n}")
        }
        Some(_) => return None,
    };
    Some(format!("{scheme}://{host}{port}"))
}

/// A DNS name (labels of letters, digits and inner hyphens), optionally behind `*.`, or an
/// IPv4 address. A name whose last label is numeric must be a whole IPv4 address (no TLD is
/// numeric), so `1.2.3` or `*.1.2.3.4` are refused.
fn valid_host(host: &str) -> bool {
    let (wildcard, name) = match host.strip_prefix("*.") {
        Some(name) => (true, name),
        None => (false, host),
    };
    if name.is_empty() || name.len() > 253 {
        return false;
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if !name.split('.').all(label_ok) {
        return false;
    }
    let last = name.rsplit('.').next().unwrap_or("");
    if last.bytes().all(|b| b.is_ascii_digit()) {
        return !wildcard && name.parse::<Ipv4Addr>().is_ok();
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn encode(s: &str) -> String {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect()
    }

    fn csp_of(declared: Value) -> SandboxCsp {
        sandbox_csp(Some(&format!("csp={}", encode(&declared.to_string()))), &OwnOrigins::default())
    }

    fn directive<'a>(header: &'a str, name: &str) -> Option<&'a str> {
        header.split("; ").find(|d| d.split(' ').next() == Some(name))
    }

    #[test]
    fn default_policy() {
        let expected = "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; \
                        img-src 'self' data:; media-src 'self' data:; connect-src 'none'; frame-src 'none'; \
                        base-uri 'self'; object-src 'none'";
        assert_eq!(DEFAULT_CSP, expected);
        for query in [None, Some(""), Some("x=1"), Some("csp="), Some("csp=null"), Some("csp=%7B%7D")] {
            let csp = sandbox_csp(query, &OwnOrigins::default());
            assert_eq!(csp.header, expected, "{query:?}");
            assert!(csp.warnings.is_empty(), "{query:?}: {:?}", csp.warnings);
        }
        assert_eq!(csp_of(json!({"connectDomains": [], "resourceDomains": null})).header, expected);
    }

    #[test]
    fn unusable_requests_get_the_default_with_a_warning() {
        for query in ["csp=%7Bnot%20json", "csp=%5B%5D", "csp=%22https%3A%2F%2Fa.com%22"] {
            let csp = sandbox_csp(Some(query), &OwnOrigins::default());
            assert_eq!(csp.header, DEFAULT_CSP, "{query}");
            assert_eq!(csp.warnings.len(), 1, "{query}");
        }
        let long = format!("csp={}", encode(&json!({"connectDomains": ["https://a.com"], "pad": "x".repeat(9000)}).to_string()));
        let csp = sandbox_csp(Some(&long), &OwnOrigins::default());
        assert_eq!(csp.header, DEFAULT_CSP);
        assert!(csp.warnings[0].contains("bytes"), "{:?}", csp.warnings);
    }

    #[test]
    fn resource_domains() {
        let h = csp_of(json!({"resourceDomains": ["https://cdn.example.com", "https://*.fonts.example"]})).header;
        let r = "https://cdn.example.com https://*.fonts.example";
        assert_eq!(directive(&h, "script-src"), Some(format!("script-src 'self' 'unsafe-inline' {r}").as_str()));
        assert_eq!(directive(&h, "style-src"), Some(format!("style-src 'self' 'unsafe-inline' {r}").as_str()));
        assert_eq!(directive(&h, "img-src"), Some(format!("img-src 'self' data: {r}").as_str()));
        assert_eq!(directive(&h, "font-src"), Some(format!("font-src 'self' {r}").as_str()));
        assert_eq!(directive(&h, "media-src"), Some(format!("media-src 'self' data: {r}").as_str()));
        assert_eq!(directive(&h, "connect-src"), Some("connect-src 'none'"));
        assert_eq!(directive(&h, "default-src"), Some("default-src 'none'"));
        assert_eq!(directive(DEFAULT_CSP, "font-src"), None);
    }

    #[test]
    fn connect_frame_and_base_uri_domains() {
        let h = csp_of(json!({
            "connectDomains": ["https://api.example.com", "wss://live.example.com:8443"],
            "frameDomains": ["https://embed.example.com"],
            "baseUriDomains": ["https://base.example.com"],
        }))
        .header;
        assert_eq!(directive(&h, "connect-src"), Some("connect-src https://api.example.com wss://live.example.com:8443"));
        assert_eq!(directive(&h, "frame-src"), Some("frame-src https://embed.example.com"));
        assert_eq!(directive(&h, "base-uri"), Some("base-uri 'self' https://base.example.com"));
        assert_eq!(directive(&h, "script-src"), Some("script-src 'self' 'unsafe-inline'"));
        assert_eq!(directive(&h, "object-src"), Some("object-src 'none'"));
    }

    #[test]
    fn hostile_values_are_dropped_with_a_warning() {
        let hostile = [
            "https://a.com; script-src *",
            "'unsafe-eval'",
            "*",
            "javascript:",
            "javascript:alert(1)",
            "https://a.com/path",
            "https:",
            "data:",
            "https://a.com?x",
            "https://user@a.com",
            "https://a.com,https://b.com",
            "https://a .com",
            "https://'self'",
            "ftp://a.com",
            "https://*",
            "https://*.1.2.3.4",
            "https://a.com:0",
            "https://a.com:99999",
            "https://a.com:*",
            "https://a.com\nX-Injected: 1",
            "https://[::1",
            "https://-a.com",
            "",
        ];
        let csp = csp_of(json!({"connectDomains": hostile, "resourceDomains": ["'unsafe-eval'", 7], "frameDomains": "https://a.com"}));
        assert_eq!(csp.header, DEFAULT_CSP, "{}", csp.header);
        assert_eq!(csp.warnings.len(), hostile.len() + 3, "{:#?}", csp.warnings);
        assert!(csp.warnings.iter().any(|w| w.contains("https://a.com; script-src *")), "{:?}", csp.warnings);

        let csp = csp_of(json!({"connectDomains": ["https://api.example.com", "https://a.com; script-src *", "*"]}));
        assert_eq!(directive(&csp.header, "connect-src"), Some("connect-src https://api.example.com"));
        assert!(!csp.header.contains("a.com"), "{}", csp.header);
        assert_eq!(csp.warnings.len(), 2);
    }

    #[test]
    fn the_gateway_itself_is_never_a_source() {
        let own = OwnOrigins::new(&[addr("127.0.0.1:5000"), addr("0.0.0.0:5080")], Some("https://gw.example.com/base/"));
        let declared = json!({
            "connectDomains": [
                "http://127.0.0.1:5000", "http://localhost:5000", "ws://[::1]:5080", "https://gw.example.com",
                "https://*.example.com", "https://api.other.com", "https://api.other.com:5001"
            ]
        });
        let csp = csp_from_declaration(&declared, &own);
        assert_eq!(
            directive(&csp.header, "connect-src"),
            Some("connect-src https://api.other.com https://api.other.com:5001"),
            "{csp:?}"
        );
        assert_eq!(csp.warnings.len(), 5, "{:?}", csp.warnings);
        assert!(csp.warnings.iter().all(|w| w.contains("the gateway itself")), "{:?}", csp.warnings);
    }

    #[test]
    fn accepted_sources_are_normalized() {
        assert_eq!(sanitize_source("https://*.example.com").as_deref(), Some("https://*.example.com"));
        assert_eq!(sanitize_source("HTTPS://API.Example.com:443/").as_deref(), Some("https://api.example.com:443"));
        assert_eq!(sanitize_source("http://127.0.0.1:5001").as_deref(), Some("http://127.0.0.1:5001"));
        assert_eq!(sanitize_source("ws://[::1]:9000").as_deref(), Some("ws://[::1]:9000"));
        assert_eq!(sanitize_source("wss://localhost").as_deref(), Some("wss://localhost"));
        assert_eq!(sanitize_source("https://1.2.3"), None);
        assert_eq!(sanitize_source("https://a.com//"), None);
    }

    #[test]
    fn lists_are_capped_and_deduplicated() {
        let many: Vec<String> = (0..40).map(|i| format!("https://h{i}.example.com")).collect();
        let mut with_dups = vec!["https://a.com".to_string(), "https://A.com/".to_string()];
        with_dups.extend(many);
        let csp = csp_of(json!({"connectDomains": with_dups}));
        let connect = directive(&csp.header, "connect-src").unwrap();
        assert_eq!(connect.split(' ').count() - 1, MAX_CSP_VALUES, "{connect}");
        assert_eq!(connect.matches("https://a.com").count(), 1);
        assert_eq!(csp.warnings.len(), 42 - 1 - MAX_CSP_VALUES);
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn sandbox_origin() {
        let lo = [addr("127.0.0.1:41000")];
        assert_eq!(origin_for(&lo, None, Some("localhost:5000")).as_deref(), Some("http://localhost:41000"));
        assert_eq!(origin_for(&lo, None, Some("127.0.0.1:5000")).as_deref(), Some("http://127.0.0.1:41000"));
        // An IP literal the sandbox does not listen on: the bound address instead.
        assert_eq!(origin_for(&lo, None, Some("[::1]:5000")).as_deref(), Some("http://127.0.0.1:41000"));
        // No usable Host: the bound address.
        assert_eq!(origin_for(&lo, None, None).as_deref(), Some("http://127.0.0.1:41000"));
        assert_eq!(origin_for(&lo, None, Some("evil.com/x")).as_deref(), Some("http://127.0.0.1:41000"));

        let any = [addr("0.0.0.0:41000")];
        assert_eq!(origin_for(&any, None, Some("gw.lan:5000")).as_deref(), Some("http://gw.lan:41000"));
        assert_eq!(origin_for(&any, None, Some("10.0.0.5:5000")).as_deref(), Some("http://10.0.0.5:41000"));
        assert_eq!(origin_for(&any, None, Some("[::1]:5000")).as_deref(), Some("http://127.0.0.1:41000"));
        assert_eq!(origin_for(&any, None, None).as_deref(), Some("http://127.0.0.1:41000"));
        let any6 = [addr("[::]:41000")];
        assert_eq!(origin_for(&any6, None, Some("[::1]:5000")).as_deref(), Some("http://[::1]:41000"));
        assert_eq!(origin_for(&any6, None, None).as_deref(), Some("http://[::1]:41000"));

        let specific = [addr("10.0.0.5:6000")];
        assert_eq!(origin_for(&specific, None, Some("gw.lan:5000")).as_deref(), Some("http://10.0.0.5:6000"));

        assert_eq!(
            origin_for(&lo, Some("https://sandbox.example.com"), Some("localhost:5000")).as_deref(),
            Some("https://sandbox.example.com")
        );
        assert_eq!(origin_for(&[], None, Some("localhost:5000")), None);
    }

    fn settings(gateway: Value) -> Settings {
        Settings { effective: json!({ "Gateway": gateway }), config_dir: std::path::PathBuf::from("/") }
    }

    #[test]
    fn listen_addresses() {
        let gw = [addr("127.0.0.1:5000")];
        // Default: the gateway's host, an ephemeral port.
        assert_eq!(listen_addrs(&settings(json!({})), &gw).unwrap(), [addr("127.0.0.1:0")]);
        assert_eq!(listen_addrs(&settings(json!({})), &[addr("0.0.0.0:0")]).unwrap(), [addr("0.0.0.0:0")]);
        let both = json!({"SandboxUrls": "http://127.0.0.1:6001;http://[::1]:6001", "SandboxUrl": "http://127.0.0.1:7000"});
        assert_eq!(listen_addrs(&settings(both), &gw).unwrap(), [addr("127.0.0.1:6001"), addr("[::1]:6001")]);
        let old = json!({"SandboxUrl": "http://localhost:7000/"});
        assert_eq!(listen_addrs(&settings(old), &gw).unwrap(), [addr("127.0.0.1:7000")]);
        let same = listen_addrs(&settings(json!({"SandboxUrls": "http://127.0.0.1:5000"})), &gw).unwrap_err();
        assert!(matches!(same, SandboxConfigError::SameAsGateway { .. }), "{same}");
        assert!(same.to_string().contains("Gateway.SandboxUrls") && same.to_string().contains("127.0.0.1:5000"), "{same}");
        let bad = listen_addrs(&settings(json!({"SandboxUrl": "sandbox.example.com"})), &gw).unwrap_err();
        assert!(bad.to_string().starts_with("Gateway.SandboxUrl: "), "{bad}");
    }

    #[test]
    fn public_sandbox_url() {
        let bound = vec![addr("127.0.0.1:41000")];
        let site = SandboxSite::from_settings(&settings(json!({"PublicSandboxUrl": "https://sb.example.com/"})), bound.clone()).unwrap();
        assert_eq!(site.origin(&HeaderMap::new()).as_deref(), Some("https://sb.example.com"));
        for bad in ["https://sb.example.com/x", "sb.example.com", "https://sb.example.com; frame-src *", "wss://sb.example.com", "https://*.example.com"] {
            assert!(SandboxSite::from_settings(&settings(json!({"PublicSandboxUrl": bad})), bound.clone()).is_err(), "{bad}");
        }
        let site = SandboxSite::from_settings(&settings(json!({})), bound).unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("localhost:5000"));
        assert_eq!(site.origin(&headers).as_deref(), Some("http://localhost:41000"));
    }

    #[test]
    fn overlapping_addresses() {
        assert!(overlaps(&addr("127.0.0.1:5000"), &addr("127.0.0.1:5000")));
        assert!(overlaps(&addr("0.0.0.0:5000"), &addr("127.0.0.1:5000")));
        assert!(overlaps(&addr("127.0.0.1:5000"), &addr("[::]:5000")));
        assert!(!overlaps(&addr("127.0.0.1:0"), &addr("127.0.0.1:0")));
        assert!(!overlaps(&addr("127.0.0.1:5001"), &addr("127.0.0.1:5000")));
        assert!(!overlaps(&addr("127.0.0.1:5000"), &addr("127.0.0.2:5000")));
    }
}
