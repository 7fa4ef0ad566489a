//! How `/mcp` names what many apps offer in one namespace (SPEC R46): resource URIs rewritten
//! per app, reversibly and without collisions, and list cursors that span apps.
//!
//! Tools and prompts are named by the app's tool-name prefix (`grocery.` + `get_stores`); a URI
//! cannot be, since two apps may both serve `ui://main/app.html` and a host must still see a URI
//! of the same scheme (MCP Apps hosts look for `ui://`). So the app goes into the URI's
//! authority, ahead of what was there, with `K` the app's *URI key* — its id for an MCP App,
//! `mcp~{id}` for a standard or workspace MCP server (ids never contain `~` or `!`):
//!
//! | the app's URI   | on `/mcp`              | example                                              |
//! |-----------------|------------------------|------------------------------------------------------|
//! | `S://R`         | `S://K/R`              | `ui://grocery/app.html` → `ui://grocery-inventory/grocery/app.html` |
//! | `S:R` (no `//`) | `S://K!/R`             | `urn:isbn:1` → `urn://books!/isbn:1`                  |
//!
//! Reading it back takes the authority up to the first `/`: it names the app (a trailing `!`
//! marks the second form) and the rest is the app's URI again. Templates (`{storeId}`) are
//! rewritten by the same rule, which only inserts text ahead of them, so a URI expanded from a
//! rewritten template is the rewrite of the URI expanded from the app's.

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use host_abi::MCP_SERVER_KEY_PREFIX as SERVER_KEY_PREFIX;

/// The URI key of a registry key: `grocery-inventory` → itself, `mcp:files` → `mcp~files`.
pub fn uri_key(provider: &str) -> String {
    match provider.strip_prefix(SERVER_KEY_PREFIX) {
        Some(id) => format!("mcp~{id}"),
        None => provider.to_string(),
    }
}

/// The registry key a URI key names (the inverse of [`uri_key`]).
pub fn provider_of_key(key: &str) -> String {
    match key.strip_prefix("mcp~") {
        Some(id) => format!("{SERVER_KEY_PREFIX}{id}"),
        None => key.to_string(),
    }
}

/// The app's `uri` as `/mcp` shows it (see the module doc). A string without a scheme is left
/// as it is (no client could read it back either way).
pub fn rewrite_uri(provider: &str, uri: &str) -> String {
    let Some((scheme, rest)) = split_scheme(uri) else { return uri.to_string() };
    let key = uri_key(provider);
    match rest.strip_prefix("//") {
        Some(hierarchical) => format!("{scheme}://{key}/{hierarchical}"),
        None => format!("{scheme}://{key}!/{rest}"),
    }
}

/// A URI `/mcp` gave out, read back: the registry key of its app and the app's own URI.
pub fn restore_uri(uri: &str) -> Option<(String, String)> {
    let (scheme, rest) = split_scheme(uri)?;
    let rest = rest.strip_prefix("//")?;
    let (key, original) = rest.split_once('/')?;
    let (key, opaque) = match key.strip_suffix('!') {
        Some(key) => (key, true),
        None => (key, false),
    };
    if key.is_empty() {
        return None;
    }
    let original = if opaque { format!("{scheme}:{original}") } else { format!("{scheme}://{original}") };
    Some((provider_of_key(key), original))
}

/// `scheme` and what follows its `:`, if `uri` starts with a scheme (RFC 3986: a letter, then
/// letters, digits, `+`, `-`, `.`).
fn split_scheme(uri: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = uri.split_once(':')?;
    let mut chars = scheme.chars();
    let well_formed = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    well_formed.then_some((scheme, rest))
}

/// Rewrites the resource URIs in an app's result for `/mcp`: `contents[].uri` (a read), the
/// `uri` of `resource_link` and embedded `resource` blocks (tool results, prompt messages), and
/// the UI a result or tool names in `_meta.ui.resourceUri` (and the older `ui/resourceUri`).
pub fn rewrite_result_uris(provider: &str, result: &mut Value) {
    let rewrite = |value: Option<&mut Value>| {
        if let Some(Value::String(uri)) = value {
            *uri = rewrite_uri(provider, uri);
        }
    };
    if let Some(contents) = result.get_mut("contents").and_then(Value::as_array_mut) {
        for content in contents {
            rewrite(content.get_mut("uri"));
        }
    }
    let block = |block: &mut Value| match block.get("type").and_then(Value::as_str) {
        Some("resource_link") => rewrite(block.get_mut("uri")),
        Some("resource") => rewrite(block.get_mut("resource").and_then(|r| r.get_mut("uri"))),
        _ => {}
    };
    if let Some(content) = result.get_mut("content").and_then(Value::as_array_mut) {
        content.iter_mut().for_each(block);
    }
    if let Some(messages) = result.get_mut("messages").and_then(Value::as_array_mut) {
        for message in messages {
            match message.get_mut("content") {
                Some(Value::Array(content)) => content.iter_mut().for_each(block),
                Some(one @ Value::Object(_)) => block(one),
                _ => {}
            }
        }
    }
    rewrite_ui_meta(provider, result);
}

/// `_meta.ui.resourceUri` and `_meta["ui/resourceUri"]` of a tool or a result, rewritten.
pub fn rewrite_ui_meta(provider: &str, holder: &mut Value) {
    if let Some(Value::Object(meta)) = holder.get_mut("_meta") {
        rewrite_meta_uris(provider, meta);
    }
}

/// The UI a `_meta` object names (`ui.resourceUri`, `ui/resourceUri`), rewritten.
pub fn rewrite_meta_uris(provider: &str, meta: &mut Map<String, Value>) {
    if let Some(Value::String(uri)) = meta.get_mut("ui").and_then(|ui| ui.get_mut("resourceUri")) {
        *uri = rewrite_uri(provider, uri);
    }
    if let Some(Value::String(uri)) = meta.get_mut("ui/resourceUri") {
        *uri = rewrite_uri(provider, uri);
    }
}

/// Where a list of `/mcp` goes on: at which app, and that app's own cursor (none: its first
/// page). Clients get it as an opaque string.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cursor {
    #[serde(rename = "p")]
    pub provider: String,
    #[serde(rename = "c", default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
}

impl Cursor {
    pub fn encode(&self) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).unwrap_or_default())
    }

    /// `None` for a string this gateway did not give out.
    pub fn decode(text: &str) -> Option<Cursor> {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn uris_are_rewritten_reversibly() {
        let cases = [
            ("grocery-inventory", "ui://grocery/store-dashboard.html", "ui://grocery-inventory/grocery/store-dashboard.html"),
            ("grocery-inventory", "inventory://stores/{storeId}/summary", "inventory://grocery-inventory/stores/{storeId}/summary"),
            ("files", "file:///tmp/a.txt", "file://files//tmp/a.txt"),
            ("mcp:docs", "https://example.com/x?y=1#z", "https://mcp~docs/example.com/x?y=1#z"),
            ("books", "urn:isbn:0451450523", "urn://books!/isbn:0451450523"),
            ("odd", "x:/abs/path", "x://odd!//abs/path"),
            ("odd", "x://:80/p", "x://odd/:80/p"),
            ("odd", "ui://", "ui://odd/"),
        ];
        for (provider, original, rewritten) in cases {
            assert_eq!(rewrite_uri(provider, original), rewritten, "{original}");
            assert_eq!(restore_uri(rewritten), Some((provider.to_string(), original.to_string())), "{rewritten}");
        }
    }

    #[test]
    fn results_name_resources_as_mcp_does() {
        let mut read = json!({ "contents": [{ "uri": "ui://g/app.html", "text": "<html>", "_meta": { "ui": { "csp": {} } } }] });
        rewrite_result_uris("grocery", &mut read);
        assert_eq!(read["contents"][0]["uri"], "ui://grocery/g/app.html");
        assert_eq!(read["contents"][0]["text"], "<html>");

        let mut call = json!({
            "content": [
                { "type": "text", "text": "see ui://g/app.html" },
                { "type": "resource_link", "uri": "file:///a", "name": "a" },
                { "type": "resource", "resource": { "uri": "urn:x", "text": "x" } }
            ],
            "_meta": { "ui": { "resourceUri": "ui://g/app.html" }, "ui/resourceUri": "ui://g/app.html" }
        });
        rewrite_result_uris("mcp:docs", &mut call);
        assert_eq!(call["content"][0]["text"], "see ui://g/app.html");
        assert_eq!(call["content"][1]["uri"], "file://mcp~docs//a");
        assert_eq!(call["content"][2]["resource"]["uri"], "urn://mcp~docs!/x");
        assert_eq!(call["_meta"]["ui"]["resourceUri"], "ui://mcp~docs/g/app.html");
        assert_eq!(call["_meta"]["ui/resourceUri"], "ui://mcp~docs/g/app.html");

        let mut prompt = json!({ "messages": [{ "role": "user", "content": { "type": "resource", "resource": { "uri": "x://y", "text": "" } } }] });
        rewrite_result_uris("a", &mut prompt);
        assert_eq!(prompt["messages"][0]["content"]["resource"]["uri"], "x://a/y");
    }

    #[test]
    fn two_apps_serving_one_uri_get_two() {
        let a = rewrite_uri("a", "ui://main/app.html");
        let b = rewrite_uri("b", "ui://main/app.html");
        assert_ne!(a, b);
        assert_eq!(restore_uri(&a).unwrap().0, "a");
        assert_eq!(restore_uri(&b).unwrap().0, "b");
    }

    #[test]
    fn what_was_not_given_out_is_not_read_back() {
        for uri in ["", "no-scheme", "ui:", "ui://", "ui://app", "ui:///x", "1x://a/b", "ui://!/x"] {
            assert_eq!(restore_uri(uri), None, "{uri}");
        }
        assert_eq!(rewrite_uri("a", "plain text"), "plain text");
    }

    #[test]
    fn cursors_round_trip_and_refuse_strangers() {
        let cursor = Cursor { provider: "mcp:docs".into(), upstream: Some("page 2".into()) };
        assert_eq!(Cursor::decode(&cursor.encode()), Some(cursor));
        let first = Cursor { provider: "grocery-inventory".into(), upstream: None };
        assert_eq!(Cursor::decode(&first.encode()), Some(first));
        assert_eq!(Cursor::decode("not a cursor"), None);
        assert_eq!(Cursor::decode("e30"), None); // `{}`: no app
    }
}
