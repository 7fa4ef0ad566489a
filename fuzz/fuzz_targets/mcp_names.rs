//! How `/mcp` names its apps' resources (issue 38, `http/mcp/namespacing.rs`, `http/mcp/multiplex.rs`):
//! what a client sends back — a URI, a list cursor — and what the gateway writes into an app's
//! results. What must hold, for any bytes:
//! - reading a URI back (`restore_uri`) and a cursor (`Cursor::decode`) never panics;
//! - for any app id and any URI with a scheme, the rewritten URI reads back as that app and that
//!   URI, exactly (so no two apps' URIs collide, and the app gets its own URI again); a URI read
//!   back, rewritten again, is the URI that was read;
//! - a cursor the gateway makes reads back as itself;
//! - rewriting the URIs of any JSON result never panics and changes no value other than a string;
//! - the reply to a `resources/read` written from the one pass over the app's result
//!   (`answer.rs` `read_result_reply`) is the very bytes rmcp's path writes for it, or the same
//!   error, on `/apps/mcp` and `/mcp`, for 2026-07-28 clients and earlier ones.
#![no_main]

use gateway_host::fuzzing::{read_result_reply, read_result_reply_as_rmcp, restore_uri, rewrite_result_uris, rewrite_uri, Cursor};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// An app id as manifests allow them (`[A-Za-z0-9][A-Za-z0-9._-]*`), or a standard server's key.
fn provider_from(bytes: &[u8]) -> String {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";
    let mut id: String = bytes.iter().map(|b| CHARS[*b as usize % CHARS.len()] as char).collect();
    if !id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric()) {
        id.insert(0, 'a');
    }
    if bytes.first().is_some_and(|b| b % 3 == 0) {
        id = format!("mcp:{id}");
    }
    id
}

fuzz_target!(|data: &[u8]| {
    let split = data.first().map(|n| (*n as usize % 8).min(data.len().saturating_sub(1))).unwrap_or(0);
    let (head, rest) = data.split_at((split + 1).min(data.len()));
    let Ok(text) = std::str::from_utf8(rest) else { return };

    if let Some((provider, original)) = restore_uri(text) {
        assert_eq!(restore_uri(&rewrite_uri(&provider, &original)), Some((provider, original)), "{text:?}");
    }
    let provider = provider_from(head);
    let rewritten = rewrite_uri(&provider, text);
    if text.contains(':') && rewritten != text {
        assert_eq!(restore_uri(&rewritten), Some((provider.clone(), text.to_string())), "{provider} {text:?} → {rewritten:?}");
    }

    let _ = Cursor::decode(text);
    let cursor = Cursor { provider: provider.clone(), upstream: Some(text.to_string()).filter(|t| !t.is_empty()) };
    assert_eq!(Cursor::decode(&cursor.encode()), Some(cursor));

    if let Ok(mut result) = serde_json::from_str::<Value>(text) {
        let before = result.clone();
        rewrite_result_uris(&provider, &mut result);
        assert_same_shape(&before, &result);
    }

    let id = Value::from(7);
    for modern in [true, false] {
        for provider in [None, Some(provider.as_str())] {
            let ours = read_result_reply("app", &id, text, modern, provider);
            let rmcps = read_result_reply_as_rmcp("app", &id, text, modern, provider);
            match (ours, rmcps) {
                (Ok(ours), Ok(rmcps)) => assert_eq!(ours, rmcps, "{text:?}"),
                (Err(ours), Err(rmcps)) => assert_eq!((ours.code, ours.message), (rmcps.code, rmcps.message), "{text:?}"),
                (ours, rmcps) => panic!("{text:?}: {ours:?} against rmcp's {rmcps:?}"),
            }
        }
    }
});

/// The same JSON except for the text of strings.
fn assert_same_shape(a: &Value, b: &Value) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            assert_eq!(x.len(), y.len());
            for (key, value) in x {
                assert_same_shape(value, &y[key]);
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len());
            x.iter().zip(y).for_each(|(x, y)| assert_same_shape(x, y));
        }
        (Value::String(_), Value::String(_)) => {}
        (x, y) => assert_eq!(x, y),
    }
}
