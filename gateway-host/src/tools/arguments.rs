//! A tool call's arguments, read in one place: the host parses what a model wrote (the chat) or
//! takes what an MCP client's request already parsed (`/mcp`), checks it is an object, and hands
//! it on as checked JSON — to a built-in tool as it is, across the module boundary as the text of
//! an object ([`host_abi::ToolCallRequest::arguments_json`]), which nobody checks again.

use serde_json::{Map, Value};

/// The member of a `tools/call` request's `params` that holds its arguments.
const MEMBER: &str = "arguments";

#[derive(Debug, thiserror::Error)]
pub enum ArgumentsError {
    #[error("arguments are not valid JSON: {0}")]
    NotJson(#[from] serde_json::Error),
    #[error("arguments must be a JSON object, got {0}")]
    NotAnObject(&'static str),
}

/// Arguments as a model wrote them: empty or `null` means none (`{}`); anything else must be a
/// JSON object.
pub fn parse(text: &str) -> Result<Value, ArgumentsError> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    check(serde_json::from_str(text)?)
}

/// Arguments already parsed: `null` (or none) means `{}`; anything else must be an object.
pub fn check(value: Value) -> Result<Value, ArgumentsError> {
    match value {
        Value::Object(_) => Ok(value),
        Value::Null => Ok(Value::Object(Map::new())),
        other => Err(ArgumentsError::NotAnObject(kind_of(&other))),
    }
}

/// Whether a `tools/call` request's `params` hold arguments a call takes as they are — none, or
/// an object — and, with `beside`, no member but those and the arguments. The gate asks it of a
/// request that may skip rmcp's typed parse, the short way of one it may answer itself.
pub fn are_plain(params: &Map<String, Value>, beside: Option<&[&str]>) -> bool {
    params.get(MEMBER).is_none_or(Value::is_object)
        && beside.is_none_or(|others| params.keys().all(|key| key == MEMBER || others.contains(&key.as_str())))
}

/// The arguments of a request's `params`, taken out of them: `null` when there are none (what
/// [`check`] makes `{}`).
pub fn take(params: &mut Map<String, Value>) -> Value {
    params.remove(MEMBER).unwrap_or(Value::Null)
}

/// The arguments of a call read by rmcp (its typed `tools/call`), taken out of it as [`take`] does.
pub fn take_typed(params: &mut rmcp::model::CallToolRequestParams) -> Value {
    params.arguments.take().map_or(Value::Null, Value::Object)
}

/// A call's `params` for an app: its tool's own name and the checked arguments (the `_meta`,
/// when there is one, is the caller's to add).
pub fn into_params(tool_name: &str, arguments: Value) -> Map<String, Value> {
    let mut params = Map::new();
    params.insert("name".into(), Value::String(tool_name.to_string()));
    params.insert(MEMBER.into(), arguments);
    params
}

/// A JSON value's type as error messages name it ("an array", "null"): the gate's messages
/// about a request's fields and these about arguments speak alike.
pub fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_must_be_an_object() {
        assert_eq!(parse("").unwrap(), json!({}));
        assert_eq!(parse(" null ").unwrap(), json!({}));
        assert_eq!(parse(r#"{"a":1}"#).unwrap(), json!({ "a": 1 }));
        assert!(parse("{").unwrap_err().to_string().contains("not valid JSON"));
        assert!(parse("[1]").unwrap_err().to_string().contains("an array"));
        assert!(check(json!("text")).unwrap_err().to_string().contains("a string"));
        assert_eq!(check(Value::Null).unwrap(), json!({}));
    }

    #[test]
    fn plain_arguments_are_none_or_an_object_and_are_taken_out_once() {
        let params = |v: Value| v.as_object().unwrap().clone();
        assert!(are_plain(&params(json!({ "name": "t" })), None));
        assert!(are_plain(&params(json!({ "name": "t", "arguments": {}, "_meta": {} })), Some(&["name", "_meta"])));
        assert!(!are_plain(&params(json!({ "name": "t", "arguments": [] })), None));
        assert!(!are_plain(&params(json!({ "name": "t", "arguments": null })), None));
        assert!(!are_plain(&params(json!({ "name": "t", "task": {} })), Some(&["name", "_meta"])));
        assert!(are_plain(&params(json!({ "name": "t", "task": {} })), None));

        let mut taken = params(json!({ "name": "t", "arguments": { "a": 1 } }));
        assert_eq!(take(&mut taken), json!({ "a": 1 }));
        assert_eq!(take(&mut taken), Value::Null);
        assert_eq!(Value::Object(taken), json!({ "name": "t" }));
        assert_eq!(Value::Object(into_params("echo", json!({ "b": 2 }))), json!({ "name": "echo", "arguments": { "b": 2 } }));
    }
}
