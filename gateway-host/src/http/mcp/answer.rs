//! The app's answer to a forwarded request, as both MCP endpoints read it: the one place on the
//! host where an app's result is parsed.
//!
//! The module hands back the app's `result` as JSON text, or a typed JSON-RPC error
//! ([`host_abi::AppAnswer`]); it builds no envelope, and this side does not unwrap one. A result
//! the protocol library serves (lists, reads, prompts) is parsed once, into a tree
//! ([`result_of`]). A `tools/call` result the short way relays is parsed once too, by
//! [`tool_result`]: one pass that checks it reads as a `CallToolResult` (as rmcp's own type would
//! accept it), tells whether it is a tool error, and notes which keys of the newer revision it
//! has; the text then goes out as the app wrote it, with at most `resultType` spliced in front.

use std::fmt;

use host_abi::{AbiError, AppAnswer, RpcError};
use rmcp::model::{CacheScope, ContentBlock, ErrorCode, ResultType, ServerResult};
use rmcp::ErrorData;
use serde::de::{DeserializeOwned, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::namespacing;
use crate::parse_count::{self, Direction};

/// What a forwarded request came back as.
pub type Forwarded = Result<AppAnswer, AbiError>;

/// The JSON-RPC error an app's (or the module's) error stands for.
pub fn rpc_error(error: RpcError) -> ErrorData {
    let data = (!error.data_json.is_empty()).then(|| serde_json::from_str::<Value>(error.data_json.as_str()).ok()).flatten();
    ErrorData::new(ErrorCode(error.code as i32), error.message.into_string(), data)
}

/// Why forwarding failed before the app answered (the module shut down, a panic contained).
fn forwarding_failed(app_id: &str, e: AbiError) -> ErrorData {
    ErrorData::internal_error(format!("forwarding to McpApp '{app_id}' failed: {e}"), Some(json!({ "appId": app_id })))
}

/// Why an app's result is not the result its method has.
pub fn invalid_result(method: &str, e: impl fmt::Display) -> ErrorData {
    ErrorData::internal_error(format!("the app's answer to '{method}' is not a valid MCP result: {e}"), None)
}

/// The app's result as a tree (one parse), or its error as it sent it.
pub fn result_of(app_id: &str, method: &str, forwarded: Forwarded) -> Result<Value, ErrorData> {
    match forwarded {
        Ok(AppAnswer::Result(text)) => parse_count::parsed(Direction::Answer, text.as_str())
            .map_err(|e| ErrorData::internal_error(format!("McpApp '{app_id}' answered '{method}' with invalid JSON: {e}"), None)),
        Ok(AppAnswer::Error(error)) => Err(rpc_error(error)),
        Err(e) => Err(forwarding_failed(app_id, e)),
    }
}

/// The app's result as its client gets it: a 2026-07-28 app's cache hints mean nothing to an
/// earlier client (rmcp drops `resultType` for it, and fills the hints in for 2026-07-28
/// clients).
pub fn result_for(modern: bool, app_id: &str, method: &str, forwarded: Forwarded) -> Result<Value, ErrorData> {
    let mut result = result_of(app_id, method, forwarded)?;
    if !modern {
        if let Some(map) = result.as_object_mut() {
            map.remove("ttlMs");
            map.remove("cacheScope");
        }
    }
    Ok(result)
}

/// A result as rmcp's type for it. A result is complete when it arrives here (the relay resolved
/// any `input_required` round of the app's), and says so for 2026-07-28 clients whatever revision
/// the app speaks; rmcp drops the field again for earlier clients.
pub fn typed<R: DeserializeOwned>(method: &str, mut value: Value) -> Result<R, ErrorData> {
    if let Some(result) = value.as_object_mut() {
        result.entry("resultType").or_insert_with(|| json!("complete"));
    }
    serde_json::from_value(value).map_err(|e| invalid_result(method, e))
}

/// What one pass over a `tools/call` result found ([`tool_result`]).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ToolResultFacts {
    pub is_error: bool,
    /// Keys of the 2026-07-28 revision, present whatever their value (even `null`).
    pub has_result_type: bool,
    pub has_cache_hints: bool,
}

/// Reads a `tools/call` result in one pass: whether rmcp's `CallToolResult` would accept it
/// (the same rules: `resultType`, when a string, is `complete`; one of `content`,
/// `structuredContent`, `isError` is there; each content block is one; `_meta` is an object;
/// no key twice), and the facts the reply needs.
pub fn tool_result(text: &str) -> Result<ToolResultFacts, serde_json::Error> {
    parse_count::count(Direction::Answer);
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let facts = deserializer.deserialize_map(ToolResultVisitor)?;
    deserializer.end()?;
    Ok(facts)
}

struct ToolResultVisitor;

impl<'de> Visitor<'de> for ToolResultVisitor {
    type Value = ToolResultFacts;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a CallToolResult object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ToolResultFacts, A::Error> {
        use serde::de::Error;
        let mut facts = ToolResultFacts::default();
        let mut seen = Vec::new();
        let mut known = false;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "content" => {
                    first_time(&mut seen, "content")?;
                    known |= map.next_value::<Option<Vec<ContentBlock>>>()?.is_some();
                }
                "structuredContent" => {
                    first_time(&mut seen, "structuredContent")?;
                    map.next_value::<IgnoredAny>()?;
                    known = true;
                }
                "isError" => {
                    first_time(&mut seen, "isError")?;
                    let value = map.next_value::<Option<bool>>()?;
                    known |= value.is_some();
                    facts.is_error = value == Some(true);
                }
                "_meta" => {
                    first_time(&mut seen, "_meta")?;
                    map.next_value::<Option<std::collections::HashMap<String, IgnoredAnyValue>>>()?;
                }
                "resultType" => {
                    first_time(&mut seen, "resultType")?;
                    facts.has_result_type = true;
                    if map.next_value::<Option<ResultType>>()?.is_some_and(|t| !t.is_complete()) {
                        return Err(A::Error::custom("CallToolResult requires resultType to be \"complete\" when present"));
                    }
                }
                "ttlMs" | "cacheScope" => {
                    facts.has_cache_hints = true;
                    map.next_value::<IgnoredAny>()?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if !known {
            return Err(A::Error::custom("expected at least one known CallToolResult field (content, structuredContent, or isError)"));
        }
        Ok(facts)
    }
}

/// Any JSON value, skipped (the values of `_meta`: only its being an object is checked).
struct IgnoredAnyValue;

impl<'de> Deserialize<'de> for IgnoredAnyValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(deserializer).map(|_| IgnoredAnyValue)
    }
}

/// The JSON-RPC response text for a relayed `resources/read`'s answer, exactly as the protocol
/// library's path writes it; or the error that path gives for the same answer.
///
/// An app's UI is such a read each time its frame opens (GroceryInventory's: 539 KB), and
/// rmcp's path parses it into a tree, then into its types, and writes every string of it out
/// again, escaping each character. One pass ([`read_result`]) reads the result instead, keeping
/// each content's `text` or `blob` as the app wrote it; these go out unchanged when they are
/// escaped as serde_json escapes (as serde_json and `JSON.stringify` write them; any other
/// escaping is decoded and written again), everything else (URIs, MIME types, `_meta`) written
/// from what was read, in rmcp's order of fields. An answer outside what the pass takes
/// (unknown shapes, a `cacheScope` of `""`, a `resultType` other than `complete`, an array for
/// an object) is read the protocol library's way ([`read_result_reply_as_rmcp`]), so both ways
/// give the same bytes.
///
/// For a 2026-07-28 client (`modern`) the result has `resultType` and the cache hints (`ttlMs`
/// 0 and `cacheScope` `private` when the app gave none), an initialize-era client none of
/// them. `provider` names the app whose URIs `/mcp` rewrites (`namespacing.rs`); `None` on
/// `/apps/mcp`.
pub fn read_resource_reply(app_id: &str, id: &Value, forwarded: Forwarded, modern: bool, provider: Option<&str>) -> Result<String, ErrorData> {
    match forwarded {
        Ok(AppAnswer::Result(text)) => read_result_reply(app_id, id, text.as_str(), modern, provider),
        Ok(AppAnswer::Error(error)) => Err(rpc_error(error)),
        Err(e) => Err(forwarding_failed(app_id, e)),
    }
}

/// [`read_resource_reply`] of an app's result `raw`.
pub fn read_result_reply(app_id: &str, id: &Value, raw: &str, modern: bool, provider: Option<&str>) -> Result<String, ErrorData> {
    let read = read_result(raw).and_then(|mut result| {
        if let Some(provider) = provider {
            for contents in &mut result.contents {
                contents.uri = namespacing::rewrite_uri(provider, &contents.uri);
            }
            if let Some(meta) = &mut result.meta {
                namespacing::rewrite_meta_uris(provider, meta);
            }
        }
        read_reply(id, &result, modern, raw.len())
    });
    match read {
        Some(body) => Ok(body),
        None => read_result_reply_as_rmcp(app_id, id, raw, modern, provider),
    }
}

/// The reply [`read_resource_reply`] writes from what the one pass read; `None` if a string
/// escaped otherwise than serde_json escapes does not read as one (a lone surrogate).
fn read_reply(id: &Value, result: &ReadResult, modern: bool, size: usize) -> Option<String> {
    let mut body = response_head(id, size + 256);
    body.push('{');
    if modern {
        let scope = match result.cache_scope {
            Some(CacheScope::Public) => "public",
            _ => "private",
        };
        let ttl = result.ttl_ms.map_or(0, |ttl| ttl.max(0));
        body.push_str(&format!("\"resultType\":\"complete\",\"ttlMs\":{ttl},\"cacheScope\":\"{scope}\","));
    }
    body.push_str("\"contents\":[");
    for (i, contents) in result.contents.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        body.push_str("{\"uri\":");
        push_json(&mut body, &contents.uri);
        if let Some(mime_type) = &contents.mime_type {
            body.push_str(",\"mimeType\":");
            push_json(&mut body, mime_type);
        }
        let (field, token) = match contents.data {
            Data::Text(token) => (",\"text\":", token),
            Data::Blob(token) => (",\"blob\":", token),
        };
        body.push_str(field);
        if escaped_as_serde_json_escapes(token) {
            body.push_str(token);
        } else {
            // Escaped otherwise (`\/`, `\u00e9`): written again, as rmcp would.
            push_json(&mut body, &serde_json::from_str::<String>(token).ok()?);
        }
        if let Some(meta) = &contents.meta {
            body.push_str(",\"_meta\":");
            push_json(&mut body, meta);
        }
        body.push('}');
    }
    body.push(']');
    if let Some(meta) = &result.meta {
        body.push_str(",\"_meta\":");
        push_json(&mut body, meta);
    }
    body.push_str("}}");
    Some(body)
}

/// A read's reply as the protocol library's path writes it: the result a tree, its URIs named
/// `/mcp`'s way (`provider`), rmcp's type, its cache hints filled in for a 2026-07-28 client,
/// its `resultType` dropped for an earlier one. What [`read_result_reply`] falls back to, and
/// the reference its tests and the `mcp_names` fuzz target hold it to.
pub fn read_result_reply_as_rmcp(app_id: &str, id: &Value, raw: &str, modern: bool, provider: Option<&str>) -> Result<String, ErrorData> {
    let mut value = result_for(modern, app_id, "resources/read", Ok(AppAnswer::Result(raw.into())))?;
    if let Some(provider) = provider {
        namespacing::rewrite_result_uris(provider, &mut value);
    }
    let mut result = ServerResult::ReadResourceResult(typed("resources/read", value)?);
    if modern {
        result.fill_missing_cache_hints();
    } else {
        result.strip_result_type_for_legacy_peer();
    }
    Ok(response_text(id, &result))
}

/// Appends `value` as serde_json writes it.
fn push_json(body: &mut String, value: &impl serde::Serialize) {
    // A string or a JSON object cannot fail to serialise, nor be anything but UTF-8.
    if let Ok(text) = serde_json::to_string(value) {
        body.push_str(&text);
    }
}

/// Whether a JSON string (`token`, its quotes included) escapes exactly what serde_json escapes
/// and as it does: `\"`, `\\`, the five short forms, other control characters as `\u00xx` in
/// lower case, and nothing else. Such a string is the same bytes when rmcp writes it again.
fn escaped_as_serde_json_escapes(token: &str) -> bool {
    let inner = token.as_bytes().get(1..token.len().saturating_sub(1)).unwrap_or_default();
    // Every backslash found in one vectorised sweep (a UI page has thousands of escapes: a
    // search started afresh at each cost a seventh of a read's gateway CPU); one that an escape
    // before it consumed (`\\`) is skipped.
    let mut next = 0;
    for at in memchr::memchr_iter(b'\\', inner) {
        if at < next {
            continue;
        }
        let length = match inner.get(at + 1..).unwrap_or_default() {
            [b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't', ..] => 1,
            [b'u', b'0', b'0', high @ (b'0' | b'1'), low, ..] if low.is_ascii_digit() || (b'a'..=b'f').contains(low) => {
                let code = (high - b'0') * 16 + if low.is_ascii_digit() { low - b'0' } else { low - b'a' + 10 };
                if matches!(code, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d) {
                    return false;
                }
                5
            }
            _ => return false,
        };
        next = at + 1 + length;
    }
    true
}

/// A `resources/read` result as [`read_result`] reads it.
#[derive(Debug, Default)]
struct ReadResult<'a> {
    ttl_ms: Option<i64>,
    cache_scope: Option<CacheScope>,
    contents: Vec<ReadContents<'a>>,
    meta: Option<Map<String, Value>>,
}

/// One of a read's contents: what rmcp's `ResourceContents` keeps of it.
#[derive(Debug)]
struct ReadContents<'a> {
    uri: String,
    mime_type: Option<String>,
    data: Data<'a>,
    meta: Option<Map<String, Value>>,
}

/// A content's `text` or `blob`: the JSON string as the app wrote it, quotes included.
#[derive(Debug, Clone, Copy)]
enum Data<'a> {
    Text(&'a str),
    Blob(&'a str),
}

/// Reads a `resources/read` result in one pass, if it has the shape the short way writes
/// itself: an object with `contents` (objects with a string `uri`, a string or no `mimeType`,
/// a string `text` or else a string `blob`, an object or no `_meta`), a `resultType` absent or
/// `complete`, a `ttlMs` integer and a `cacheScope` `public` or `private` (or absent or `null`),
/// an object or no `_meta`, no key twice. `None` for anything else, which rmcp's type may still
/// read: [`read_resource_reply`] then takes rmcp's way.
fn read_result(text: &str) -> Option<ReadResult<'_>> {
    parse_count::count(Direction::Answer);
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let result = deserializer.deserialize_map(ReadResultVisitor).ok()?;
    deserializer.end().ok()?;
    Some(result)
}

/// Fails a visit on a key seen before (serde's derived types refuse those too).
fn first_time<E: serde::de::Error>(seen: &mut Vec<&'static str>, key: &'static str) -> Result<(), E> {
    if seen.contains(&key) {
        return Err(E::custom(format!("duplicate field `{key}`")));
    }
    seen.push(key);
    Ok(())
}

struct ReadResultVisitor;

impl<'de> Visitor<'de> for ReadResultVisitor {
    type Value = ReadResult<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a ReadResourceResult object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ReadResult<'de>, A::Error> {
        use serde::de::Error;
        let mut result = ReadResult::default();
        let (mut seen, mut contents) = (Vec::new(), false);
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "contents" => {
                    first_time(&mut seen, "contents")?;
                    result.contents = map.next_value::<Vec<ReadContentsSeed<'de>>>()?.into_iter().map(|c| c.0).collect();
                    contents = true;
                }
                "resultType" => {
                    first_time(&mut seen, "resultType")?;
                    // `null` is no type for rmcp (it writes none), `complete` the only one here.
                    if map.next_value::<Value>()? != "complete" {
                        return Err(A::Error::custom("not a complete result"));
                    }
                }
                "ttlMs" => {
                    first_time(&mut seen, "ttlMs")?;
                    result.ttl_ms = map.next_value()?;
                }
                "cacheScope" => {
                    first_time(&mut seen, "cacheScope")?;
                    result.cache_scope = map.next_value()?;
                }
                "_meta" => {
                    first_time(&mut seen, "_meta")?;
                    result.meta = map.next_value()?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if !contents {
            return Err(A::Error::missing_field("contents"));
        }
        Ok(result)
    }
}

/// One of `contents`, read from an object only.
struct ReadContentsSeed<'a>(ReadContents<'a>);

impl<'de> Deserialize<'de> for ReadContentsSeed<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ReadContentsVisitor).map(ReadContentsSeed)
    }
}

struct ReadContentsVisitor;

impl<'de> Visitor<'de> for ReadContentsVisitor {
    type Value = ReadContents<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a ResourceContents object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ReadContents<'de>, A::Error> {
        use serde::de::Error;
        let (mut seen, mut uri, mut mime_type, mut text, mut blob, mut meta) = (Vec::new(), None, None, None, None, None);
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "uri" => {
                    first_time(&mut seen, "uri")?;
                    uri = Some(map.next_value::<String>()?);
                }
                "mimeType" => {
                    first_time(&mut seen, "mimeType")?;
                    mime_type = map.next_value::<Option<String>>()?;
                }
                "text" => {
                    first_time(&mut seen, "text")?;
                    text = Some(map.next_value::<&'de RawValue>()?.get());
                }
                "blob" => {
                    first_time(&mut seen, "blob")?;
                    blob = Some(map.next_value::<&'de RawValue>()?.get());
                }
                "_meta" => {
                    first_time(&mut seen, "_meta")?;
                    meta = map.next_value::<Option<Map<String, Value>>>()?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let is_string = |token: Option<&str>| token.is_some_and(|t| t.starts_with('"'));
        // As rmcp's untagged `ResourceContents` reads it: text if `text` is a string (a `blob`
        // beside it is dropped), else a blob (`text` absent; `null` or another type would be
        // dropped by rmcp, left to it here).
        let data = match (text, blob) {
            (Some(text), _) if is_string(Some(text)) => Data::Text(text),
            (None, Some(blob)) if is_string(Some(blob)) => Data::Blob(blob),
            _ => return Err(A::Error::custom("neither a string text nor a string blob")),
        };
        let uri = uri.ok_or_else(|| A::Error::missing_field("uri"))?;
        Ok(ReadContents { uri, mime_type, data, meta })
    }
}

/// A JSON-RPC response's text up to its result, `{"jsonrpc":"2.0","id":<id>,"result":`, with
/// room for `capacity` bytes more: every reply this module writes starts here, and its writer
/// adds the result and the closing `}`.
fn response_head(id: &Value, capacity: usize) -> String {
    use std::fmt::Write as _;
    let mut body = String::with_capacity(capacity + 64);
    body.push_str("{\"jsonrpc\":\"2.0\",\"id\":");
    // A `Value` displays as its compact JSON, written straight into the body.
    let _ = write!(body, "{id}");
    body.push_str(",\"result\":");
    body
}

/// The JSON-RPC response text for `result`, written straight from its type into the body (no
/// tree, no second string between).
pub fn response_text(id: &Value, result: &impl serde::Serialize) -> String {
    let mut body = response_head(id, 256).into_bytes();
    // Writing to a `Vec` fails only for a map with keys that are not strings, which rmcp's
    // result types cannot have; `{}` would stand in for such a result.
    let mark = body.len();
    if serde_json::to_writer(&mut body, result).is_err() {
        body.truncate(mark);
        body.extend_from_slice(b"{}");
    }
    body.push(b'}');
    String::from_utf8(body).unwrap_or_default()
}

/// The JSON-RPC response text for a relayed `tools/call`'s answer, and whether it is a tool
/// error; or the error the protocol library's path gives for the same answer.
///
/// For a 2026-07-28 client (`modern`) the result says `resultType` (added when the app's lacks
/// it); an initialize-era client gets neither that nor a 2026-07-28 app's cache hints
/// (`ttlMs`, `cacheScope`), as on rmcp's path. Otherwise the app's text goes out as it came.
pub fn tool_call_reply(app_id: &str, id: &Value, forwarded: Forwarded, modern: bool) -> Result<(String, bool), ErrorData> {
    const METHOD: &str = "tools/call";
    let raw = match forwarded {
        Ok(AppAnswer::Result(text)) => text,
        Ok(AppAnswer::Error(error)) => return Err(rpc_error(error)),
        Err(e) => return Err(forwarding_failed(app_id, e)),
    };
    let raw = raw.as_str();
    let facts = tool_result(raw).map_err(|e| invalid_result(METHOD, e))?;
    let mut body = response_head(id, raw.len() + 64);
    match (modern, &facts) {
        (true, ToolResultFacts { has_result_type: true, .. }) => body.push_str(raw),
        (true, _) => {
            // `{` + the rest: the type goes first, as rmcp writes it.
            let inner = raw.trim_start().strip_prefix('{').unwrap_or("}");
            body.push_str("{\"resultType\":\"complete\"");
            if !inner.trim_start().starts_with('}') {
                body.push(',');
            }
            body.push_str(inner);
        }
        (false, ToolResultFacts { has_result_type: false, has_cache_hints: false, .. }) => body.push_str(raw),
        (false, _) => {
            // Rare (a 2026-07-28 app answering an initialize-era client): a second parse, to
            // drop the keys that client does not know.
            let mut result: Map<String, Value> = parse_count::parsed(Direction::Answer, raw).map_err(|e| invalid_result(METHOD, e))?;
            for key in ["resultType", "ttlMs", "cacheScope"] {
                result.remove(key);
            }
            body.push_str(&Value::Object(result).to_string());
        }
    }
    body.push('}');
    Ok((body, facts.is_error))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(result: &str) -> Forwarded {
        Ok(AppAnswer::Result(result.into()))
    }

    #[test]
    fn a_typed_result_is_written_into_its_envelope_as_serde_writes_it() {
        let result = rmcp::model::CallToolResult::success(vec![ContentBlock::text("é \"quoted\" \u{1F600}")]);
        for id in [json!(7), json!("a-string"), json!(-1)] {
            let body = response_text(&id, &result);
            let expected = json!({ "jsonrpc": "2.0", "id": id, "result": serde_json::to_value(&result).unwrap() });
            assert_eq!(serde_json::from_str::<Value>(&body).unwrap(), expected, "{body}");
        }
    }

    #[test]
    fn a_result_gets_its_type_first_and_keeps_everything_else() {
        let (body, is_error) = tool_call_reply("a", &json!(3), answer(r#"{"content":[{"type":"text","text":"hi"}],"x-own":1}"#), true).unwrap();
        let value: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(value, json!({ "jsonrpc": "2.0", "id": 3, "result": { "resultType": "complete", "content": [{ "type": "text", "text": "hi" }], "x-own": 1 } }));
        assert!(!is_error);
        let (body, _) = tool_call_reply("a", &json!("a"), answer(" { \"isError\" : false } "), true).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&body).unwrap(), json!({ "jsonrpc": "2.0", "id": "a", "result": { "resultType": "complete", "isError": false } }));
        let (_, is_error) = tool_call_reply("a", &json!(1), answer(r#"{"resultType":"complete","content":[],"isError":true}"#), true).unwrap();
        assert!(is_error);
        let (body, _) = tool_call_reply("a", &json!(1), answer(r#"{"resultType":null,"content":[]}"#), true).unwrap();
        assert_eq!(body.matches("resultType").count(), 1, "never written twice: {body}");
    }

    #[test]
    fn a_session_client_gets_the_result_without_the_newer_revisions_keys() {
        let text = r#"{"content":[],"x-own":1}"#;
        let (body, _) = tool_call_reply("a", &json!(2), answer(text), false).unwrap();
        assert_eq!(body, format!(r#"{{"jsonrpc":"2.0","id":2,"result":{text}}}"#), "the app's text as it came");
        let (body, is_error) =
            tool_call_reply("a", &json!(2), answer(r#"{"resultType":"complete","ttlMs":5,"cacheScope":"user","content":[],"isError":true}"#), false).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&body).unwrap(), json!({ "jsonrpc": "2.0", "id": 2, "result": { "content": [], "isError": true } }));
        assert!(is_error);
    }

    #[test]
    fn an_invalid_result_or_an_error_is_the_protocol_paths_error() {
        let e = tool_call_reply("a", &json!(1), answer(r#"{"content":"not a list"}"#), true).unwrap_err();
        assert!(e.message.contains("not a valid MCP result"), "{}", e.message);
        let error = RpcError { code: -32602, message: "Unknown tool".into(), data_json: "".into() };
        let e = tool_call_reply("a", &json!(1), Ok(AppAnswer::Error(error)), true).unwrap_err();
        assert_eq!((e.code, e.message.as_ref()), (ErrorCode::INVALID_PARAMS, "Unknown tool"));
    }

    /// A read's reply is the same bytes the protocol library's path writes, for every client
    /// and endpoint, whichever way the answer is read: the one pass where it takes it (the
    /// usual answers, escaped any way), rmcp's way for the rest.
    #[test]
    fn a_read_is_written_as_the_protocol_library_writes_it() {
        let html = "<!doctype html>\n<script>const q = \"a\\tb\";</script>\u{7f} é ✓ \u{1F600}";
        let usual = serde_json::to_string(&json!({ "contents": [{ "uri": "ui://g/app.html", "mimeType": "text/html;profile=mcp-app", "text": html }] })).unwrap();
        let cases = [
            (usual.as_str(), true),
            (r#"{"contents":[{"uri":"ui://g/app.html","mimeType":"text/html","text":"<p>\"hi\"\n</p>\u001f","_meta":{"ui":{"csp":{"b":1,"a":[1.0,2e3]}}}}],"_meta":{"z":1,"a":{"y":null,"x":"\u00e9"},"ui":{"resourceUri":"ui://g/app.html"}}}"#, true),
            (r#"{ "_meta" : {"k":1}, "contents" : [ { "text" : "a\/b \u00e9 \uD83D\uDE00 \u000A", "uri" : "test://x", "extra": [1] } ], "unknown": {"x": 1} }"#, true),
            (r#"{"contents":[{"uri":"x:y","blob":"aGk=","mimeType":null}],"resultType":"complete","ttlMs":5000,"cacheScope":"public"}"#, true),
            (r#"{"contents":[{"uri":"x:y","blob":"aGk=","mimeType":"a/b"},{"uri":"x:z","text":"","blob":5}],"ttlMs":-3,"cacheScope":null,"_meta":null}"#, true),
            (r#"{"contents":[],"ttlMs":null,"cacheScope":"private"}"#, true),
            // Left to rmcp's way.
            (r#"{"contents":[{"uri":"x:y","text":null,"blob":"aGk="}]}"#, false),
            (r#"{"contents":[{"uri":"x:y","text":5,"blob":"aGk="}]}"#, false),
            (r#"{"contents":[{"uri":"x:y","text":"a","text":"b"}]}"#, false),
            (r#"{"contents":[["x:y","text/plain","t",null]]}"#, false),
            (r#"{"contents":[{"uri":"x:y","text":"t"}],"cacheScope":""}"#, false),
            (r#"{"contents":[{"uri":"x:y","text":"t"}],"resultType":null}"#, false),
            (r#"{"contents":[{"uri":"x:y","text":"t"}],"resultType":"input_required"}"#, false),
            // Read by the one pass, then left to rmcp's way when the string does not decode.
            (r#"{"contents":[{"uri":"x:y","text":"\ud800"}]}"#, true),
            // Refused both ways.
            (r#"{"contents":[{"uri":"x:y"}]}"#, false),
            (r#"{"contents":[{"text":"t"}]}"#, false),
            (r#"{"contents":{}}"#, false),
            (r#"{"contents":[],"contents":[]}"#, false),
            (r#"{"contents":[{"uri":"x:y","text":"t","_meta":[]}]}"#, false),
            (r#"{"contents":[],"ttlMs":1.5}"#, false),
            (r#"{"contents":[],"cacheScope":"everyone"}"#, false),
            (r#"{}"#, false),
            (r#"[]"#, false),
            (r#"{"contents":[]} x"#, false),
        ];
        for (text, one_pass) in cases {
            assert_eq!(read_result(text).is_some(), one_pass, "{text}");
            for modern in [true, false] {
                for provider in [None, Some("mcp:docs")] {
                    let ours = read_resource_reply("a", &json!(9), answer(text), modern, provider);
                    let rmcps = read_result_reply_as_rmcp("a", &json!(9), text, modern, provider);
                    match (&ours, &rmcps) {
                        (Ok(ours), Ok(rmcps)) => assert_eq!(ours, rmcps, "{text} (modern: {modern}, {provider:?})"),
                        (Err(ours), Err(rmcps)) => assert_eq!((ours.code, &ours.message), (rmcps.code, &rmcps.message), "{text}"),
                        _ => panic!("{text} (modern: {modern}): {ours:?} against rmcp's {rmcps:?}"),
                    }
                }
            }
        }
        let ours = read_resource_reply("a", &json!(9), answer(&usual), true, None).unwrap();
        assert!(ours.contains(&serde_json::to_string(html).unwrap()), "the text as the app wrote it: {ours}");
    }

    #[test]
    fn only_serde_jsons_own_escapes_pass_as_written() {
        for token in [r#""""#, r#""plain é ✓""#, r#""\" \\ \b \f \n \r \t""#, r#""\u0000 \u001f \u000b \u0011""#, "\"\u{7f}\"", r#""\\u00e9 \\/ \\\\""#] {
            assert!(escaped_as_serde_json_escapes(token), "{token}");
            let decoded: String = serde_json::from_str(token).unwrap();
            assert_eq!(serde_json::to_string(&decoded).unwrap(), token, "what the check passes is what serde_json writes");
        }
        for token in [r#""\/""#, r#""\u00e9""#, r#""\u000a""#, r#""\u001F""#, r#""\u0020""#, r#""\ud83d\ude00""#, r#""\u0009""#] {
            assert!(!escaped_as_serde_json_escapes(token), "{token}");
        }
    }

    /// The one pass accepts and refuses what rmcp's `CallToolResult` does.
    #[test]
    fn the_one_pass_agrees_with_rmcps_type() {
        let cases = [
            r#"{"content":[{"type":"text","text":"hi"}]}"#,
            r#"{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"}],"isError":false}"#,
            r#"{"content":[{"type":"resource_link","uri":"ui://x","name":"x"}]}"#,
            r#"{"content":[{"type":"resource","resource":{"uri":"file:///a","text":"t"}}]}"#,
            r#"{"structuredContent":null}"#,
            r#"{"structuredContent":{"a":[1,2]},"_meta":{"k":1}}"#,
            r#"{"isError":true}"#,
            r#"{"resultType":"complete","content":[]}"#,
            r#"{"resultType":"input_required","inputRequests":{}}"#,
            r#"{"resultType":"task","content":[]}"#,
            r#"{}"#,
            r#"{"_meta":{}}"#,
            r#"{"content":null}"#,
            r#"{"isError":null,"content":[]}"#,
            r#"{"content":[{"type":"nope"}]}"#,
            r#"{"content":[{"type":"text"}]}"#,
            r#"{"content":"x"}"#,
            r#"{"isError":"yes"}"#,
            r#"{"_meta":[],"content":[]}"#,
            r#"{"content":[],"content":[]}"#,
            r#"[]"#,
            r#"{"content":[]} x"#,
        ];
        for case in cases {
            let ours = tool_result(case).is_ok();
            let rmcps = serde_json::from_str::<rmcp::model::CallToolResult>(case).is_ok();
            assert_eq!(ours, rmcps, "{case}");
        }
        let facts = tool_result(r#"{"isError":true,"ttlMs":null,"resultType":null}"#).unwrap();
        assert_eq!(facts, ToolResultFacts { is_error: true, has_result_type: true, has_cache_hints: true });
    }
}
