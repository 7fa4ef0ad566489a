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
use rmcp::model::{ContentBlock, ErrorCode, ResultType};
use rmcp::ErrorData;
use serde::de::{DeserializeOwned, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::{json, Map, Value};

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
        let (mut content, mut structured, mut is_error, mut meta, mut result_type) = (false, false, false, false, false);
        let mut known = false;
        let once = |seen: &mut bool, key: &str| -> Result<(), A::Error> {
            if std::mem::replace(seen, true) {
                return Err(A::Error::custom(format!("duplicate field `{key}`")));
            }
            Ok(())
        };
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "content" => {
                    once(&mut content, "content")?;
                    known |= map.next_value::<Option<Vec<ContentBlock>>>()?.is_some();
                }
                "structuredContent" => {
                    once(&mut structured, "structuredContent")?;
                    map.next_value::<IgnoredAny>()?;
                    known = true;
                }
                "isError" => {
                    once(&mut is_error, "isError")?;
                    let value = map.next_value::<Option<bool>>()?;
                    known |= value.is_some();
                    facts.is_error = value == Some(true);
                }
                "_meta" => {
                    once(&mut meta, "_meta")?;
                    map.next_value::<Option<std::collections::HashMap<String, IgnoredAnyValue>>>()?;
                }
                "resultType" => {
                    once(&mut result_type, "resultType")?;
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

/// The JSON-RPC response text for `result`, written straight from its type into the body (no
/// tree, no second string between).
pub fn response_text(id: &Value, result: &impl serde::Serialize) -> String {
    let mut body = Vec::with_capacity(256);
    body.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    // Writing to a `Vec` fails only for a map with keys that are not strings, which an id (a
    // JSON value) and rmcp's result types cannot have; `{}` would stand in for such a result.
    let _ = serde_json::to_writer(&mut body, id);
    body.extend_from_slice(b",\"result\":");
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
    let mut body = String::with_capacity(raw.len() + 64);
    body.push_str("{\"jsonrpc\":\"2.0\",\"id\":");
    body.push_str(&id.to_string());
    body.push_str(",\"result\":");
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
