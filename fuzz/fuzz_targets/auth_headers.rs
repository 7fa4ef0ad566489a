//! Who may use the gateway (`http/auth.rs`): the `Authorization: Bearer` header, the session
//! cookie, the `?token=` query parameter, the `Host` and `Origin` checks of an open gateway, and
//! the credential check of an `AuthPolicy` built from the settings.
//!
//! An input reads like an HTTP request head, then a blank line, then the settings (JSON; a
//! gateway requiring a token when it is missing or not an object):
//!
//! ```text
//! POST /apps/mcp/grocery?sessionId=s1&token=abc
//! Host: localhost:5000
//! Authorization: Bearer abc
//! Cookie: theme=dark; gateway_session=0123abcd
//! Origin: http://localhost:5173
//!
//! {"Gateway": {"AuthToken": "abc", "AllowQueryStringToken": true, "Urls": "http://0.0.0.0:5000"}}
//! ```
//!
//! What must hold: no panic; what the parsers return is trimmed and cookie values hold no `;`;
//! the configured token is accepted as a Bearer header (any case of the scheme, extra spaces) and,
//! when allowed, as `?token=` (percent-encoded), a wrong one is refused; a session the policy
//! created is accepted as the cookie; a request with no credential is "missing"; and an `Origin`
//! or `Host` exactly as a browser writes it is loopback for the gateway exactly when it is for the
//! WHATWG URL parser browsers follow (`localhost`, `*.localhost`, 127/8, `::1`) — the DNS
//! rebinding check must neither let a remote name through nor refuse a loopback one.
//!
//! And the browser checks (`AuthPolicy::browser_refusal`, whatever the mode): a request that
//! changes something with a body (`Content-Length` other than 0, or `Transfer-Encoding`) is
//! refused with 415 exactly when its media type is not `application/json`, and nothing else is
//! ever refused for its type; a 403 only ever comes from an `Origin` the gateway does not trust or
//! a `Sec-Fetch-Site: cross-site`/`same-site` mark — a request without either (a program, not a
//! browser) passes; the configured token as Bearer exempts any request from the origin rules;
//! and a change with the origin of the `Host` it was sent to passes, while one from another
//! loopback port is refused unless allowed.
#![no_main]

use std::net::SocketAddr;
use std::path::PathBuf;

use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method};
use gateway_host::fuzzing::{
    bearer, cookies, host_part, is_loopback_name, is_loopback_origin, parse_urls, query_param, AuthPolicy, BrowserRefusal,
    Credential, RequestHead, Settings, DEFAULT_URLS, SESSION_COOKIE,
};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

/// The request head and settings an input describes.
struct Input<'a> {
    method: Method,
    path: &'a str,
    headers: HeaderMap,
    query: Option<&'a str>,
    settings: Value,
}

fn parse(data: &[u8]) -> Input<'_> {
    let (head, rest) = match data.windows(2).position(|w| w == b"\n\n") {
        Some(at) => (&data[..at], Some(&data[at + 2..])),
        None => (data, None),
    };
    let mut lines = head.split(|b| *b == b'\n');
    let request_line = lines.next().and_then(|l| std::str::from_utf8(l).ok()).unwrap_or("");
    let method = Method::from_bytes(request_line.split(' ').next().unwrap_or("").as_bytes()).unwrap_or(Method::GET);
    let target = request_line.split(' ').nth(1).unwrap_or("");
    let (path, query) = target.split_once('?').map_or((target, None), |(p, q)| (p, Some(q)));
    let mut headers = HeaderMap::new();
    for line in lines {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|b| *b == b':') else { continue };
        let value = &line[colon + 1..];
        let value = &value[value.iter().position(|b| *b != b' ' && *b != b'\t').unwrap_or(value.len())..];
        if let (Ok(name), Ok(value)) = (HeaderName::from_bytes(&line[..colon]), HeaderValue::from_bytes(value)) {
            headers.append(name, value);
        }
    }
    let settings = rest
        .and_then(|text| serde_json::from_slice::<Value>(text).ok())
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({ "Gateway": { "AuthToken": "fuzz-token-0123456789", "AlwaysRequireAuth": true } }));
    Input { method, path, headers, query, settings }
}

/// Every byte but letters and digits as `%XX`.
fn percent_encode(text: &str) -> String {
    text.bytes().map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") }).collect()
}

/// Whether a browser reaches this URL's host on the loopback interface.
fn whatwg_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(name)) => {
            let name = name.trim_end_matches('.');
            name == "localhost" || name.ends_with(".localhost")
        }
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// `Origin` as a browser writes it (the origin's serialization): the gateway agrees with the
/// URL parser on whether it is loopback.
fn check_origin(origin: &str) {
    let loopback = is_loopback_origin(origin);
    let Ok(url) = url::Url::parse(origin) else { return };
    if matches!(url.scheme(), "http" | "https") && url.origin().ascii_serialization() == origin {
        assert_eq!(loopback, whatwg_loopback(&url), "Origin {origin:?}: the gateway says loopback={loopback}");
    }
}

/// `Host` as a browser writes it (the URL's host, and its port unless the default): the gateway
/// agrees with the URL parser on whether it is loopback.
fn check_host(host: &str) {
    let loopback = is_loopback_name(host_part(host));
    let Ok(url) = url::Url::parse(&format!("http://{host}/")) else { return };
    let Some(name) = url.host_str() else { return };
    let written = match url.port() {
        Some(port) => format!("{name}:{port}"),
        None => name.to_string(),
    };
    if written == host {
        assert_eq!(loopback, whatwg_loopback(&url), "Host {host:?}: the gateway says loopback={loopback}");
    }
}

/// Whether a body follows the head, as hyper tells the gateway: a length other than 0, or chunks.
fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers.get(header::CONTENT_LENGTH).is_some_and(|length| length.as_bytes().iter().any(|b| *b != b'0'))
}

/// Any method but GET, HEAD and OPTIONS.
fn changes_state(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The media type of a `Content-Type` value, as the gateway compares it.
fn is_json(content_type: Option<&HeaderValue>) -> bool {
    content_type
        .and_then(|t| t.to_str().ok())
        .is_some_and(|t| t.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/json"))
}

/// The browser checks, on the input's request and on requests built from it.
fn check_browser_rules(policy: &AuthPolicy, input: &Input, token: Option<&str>) {
    let headers = &input.headers;
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).map(str::trim);
    // Requests built here carry no query: an allowed `?token=` in the input's would exempt them.
    let refuse = |method: &Method, headers: &HeaderMap, has_body: bool| {
        policy.browser_refusal(&RequestHead { method, path: input.path, query: None, headers, host, has_body })
    };

    // The input as it came.
    let body = has_body(headers);
    let as_it_came = RequestHead { method: &input.method, path: input.path, query: input.query, headers, host, has_body: body };
    let marked = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()).is_some_and(|site| {
        let site = site.trim();
        site.eq_ignore_ascii_case("cross-site") || site.eq_ignore_ascii_case("same-site")
    });
    let by_token = token.is_some_and(|token| bearer(headers) == Some(token));
    match policy.browser_refusal(&as_it_came) {
        Some(BrowserRefusal::NotJson { .. }) => {
            assert!(changes_state(&input.method) && body && !is_json(headers.get(header::CONTENT_TYPE)), "415 for a JSON body or no body");
        }
        Some(refused @ (BrowserRefusal::CrossSiteWrite { .. } | BrowserRefusal::CrossSiteRead { .. })) => {
            assert!(headers.contains_key(header::ORIGIN) || marked, "403 without an Origin or a cross-site mark: {refused}");
            assert!(!by_token, "403 for a request carrying the token: {refused}");
            if matches!(refused, BrowserRefusal::CrossSiteRead { .. }) {
                assert!(marked && matches!(input.method, Method::GET | Method::HEAD), "a read refused without its mark: {refused}");
            }
        }
        None => {
            if changes_state(&input.method) && body {
                assert!(is_json(headers.get(header::CONTENT_TYPE)), "a body not sent as JSON passed");
            }
        }
    }

    // The content type alone (no Origin, no mark: a program): 415 exactly for a body not sent as JSON.
    for (content_type, json) in [
        ("application/json", true),
        ("application/json; charset=utf-8", true),
        ("APPLICATION/JSON", true),
        ("text/plain;charset=UTF-8", false),
        ("application/x-www-form-urlencoded", false),
        ("multipart/form-data; boundary=x", false),
    ] {
        let typed = with_header(header::CONTENT_TYPE, content_type).expect("a content type");
        for method in [Method::POST, Method::PUT, Method::DELETE, Method::PATCH] {
            let refused = refuse(&method, &typed, true);
            assert_eq!(refused.is_some(), !json, "{method} {content_type}: {refused:?}");
            assert!(refuse(&method, &typed, false).is_none(), "{method} {content_type} without a body");
        }
        assert!(refuse(&Method::GET, &typed, true).is_none(), "GET {content_type}");
    }
    assert!(refuse(&Method::POST, &HeaderMap::new(), true).is_some(), "an untyped body");

    // Where a JSON change comes from.
    let json_change = |extra: &[(HeaderName, String)]| {
        let mut headers = with_header(header::CONTENT_TYPE, "application/json").expect("a content type");
        for (name, value) in extra {
            headers.append(name.clone(), HeaderValue::from_str(value).ok()?);
        }
        Some(refuse(&Method::POST, &headers, true))
    };
    // A Host as a browser writes it (name or address, port): its origin is `http://{host}`.
    if let Some(host) = host.filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))) {
        let own = format!("http://{host}");
        if let Some(refused) = json_change(&[(header::ORIGIN, own.clone())]) {
            assert!(refused.is_none(), "a change from the gateway's own origin {own}: {refused:?}");
        }
        let other = if host == "127.0.0.1:1" { "http://127.0.0.1:2" } else { "http://127.0.0.1:1" };
        if !policy.trusted_origin(other, Some(host)) {
            let refused = json_change(&[(header::ORIGIN, other.to_string()), ("sec-fetch-site".parse().unwrap(), "same-site".into())]);
            assert!(matches!(refused, Some(Some(BrowserRefusal::CrossSiteWrite { .. }))), "a change from {other} on Host {host}: {refused:?}");
        }
    }
    // The token exempts whatever the input's Origin and marks say.
    if let Some(token) = token.filter(|token| with_header(header::AUTHORIZATION, &format!("Bearer {token}")).is_some_and(|h| bearer(&h) == Some(*token))) {
        let mut extra: Vec<(HeaderName, String)> = vec![(header::AUTHORIZATION, format!("Bearer {token}"))];
        for name in [header::ORIGIN, HeaderName::from_static("sec-fetch-site")] {
            extra.extend(headers.get_all(&name).iter().filter_map(|v| v.to_str().ok()).map(|v| (name.clone(), v.to_string())));
        }
        if let Some(refused) = json_change(&extra) {
            assert!(refused.is_none(), "a change carrying the token: {refused:?}");
        }
    }
}

fn with_header(name: HeaderName, value: &str) -> Option<HeaderMap> {
    let value = HeaderValue::from_str(value).ok()?;
    value.to_str().ok()?;
    let mut headers = HeaderMap::new();
    headers.insert(name, value);
    Some(headers)
}

fuzz_target!(|data: &[u8]| {
    let input = parse(data);
    let headers = &input.headers;

    // The parsers, on whatever the request carries.
    if let Some(token) = bearer(headers) {
        assert_eq!(token, token.trim());
    }
    for value in cookies(headers, SESSION_COOKIE) {
        assert!(!value.contains(';') && value == value.trim(), "{value:?}");
    }
    let _ = query_param(input.query, "token");
    let _ = query_param(input.query, "sessionId");
    for origin in headers.get_all(header::ORIGIN) {
        if let Ok(origin) = origin.to_str() {
            check_origin(origin);
        }
    }
    for host in headers.get_all(header::HOST) {
        if let Ok(host) = host.to_str() {
            check_host(host);
        }
    }

    // The policy of these settings, on this request and on requests built to hold.
    let settings = Settings { effective: input.settings.clone(), config_dir: PathBuf::from("/fuzz/config") };
    let loopback: Vec<SocketAddr> = parse_urls(DEFAULT_URLS).expect("the default URLs");
    let bound = settings.get_str("Gateway:Urls").and_then(|urls| parse_urls(&urls).ok()).unwrap_or(loopback);
    let Ok(policy) = AuthPolicy::from_settings(&settings, &bound) else { return };
    let _ = policy.describe();
    let checked = policy.check_credentials(headers, input.query);
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()) {
        let _ = policy.origin_allowed(origin);
    }
    let _ = policy.admin_refusal(headers);
    assert!(matches!(policy.check_credentials(&HeaderMap::new(), None), Credential::Missing));
    check_browser_rules(&policy, &input, settings.get_str("Gateway:AuthToken").as_deref());

    if let Some(token) = settings.get_str("Gateway:AuthToken") {
        if bearer(headers) == Some(token.as_str()) {
            assert!(matches!(checked, Credential::Valid), "the configured token as Bearer is accepted");
        }
        for written in [format!("Bearer {token}"), format!("bEARER   {token} ")] {
            if let Some(presented) = with_header(header::AUTHORIZATION, &written) {
                assert!(matches!(policy.check_credentials(&presented, None), Credential::Valid), "{written:?}");
                assert!(policy.admin_refusal(&presented).is_none(), "{written:?}");
            }
        }
        if let Some(wrong) = with_header(header::AUTHORIZATION, &format!("Bearer {token}x")) {
            assert!(matches!(policy.check_credentials(&wrong, None), Credential::Invalid));
            assert!(policy.admin_refusal(&wrong).is_some());
        }
        let query = format!("sessionId=s&token={}", percent_encode(&token));
        assert_eq!(query_param(Some(&query), "token").as_deref(), Some(token.as_str()));
        let by_query = policy.check_credentials(&HeaderMap::new(), Some(&query));
        if settings.get_bool("Gateway:AllowQueryStringToken") == Some(true) {
            assert!(matches!(by_query, Credential::Valid), "?token= is allowed");
        } else {
            assert!(matches!(by_query, Credential::Missing), "?token= is not a credential unless allowed");
        }
    }

    let session = policy.new_session().expect("a session id");
    let cookie = with_header(header::COOKIE, &format!("theme=dark; {SESSION_COOKIE}={session}")).expect("a cookie header");
    assert!(matches!(policy.check_credentials(&cookie, None), Credential::Cookie));
    let stale = with_header(header::COOKIE, &format!("{SESSION_COOKIE}={session}0")).expect("a cookie header");
    assert!(matches!(policy.check_credentials(&stale, None), Credential::Invalid));
});
