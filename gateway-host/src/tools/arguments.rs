//! A tool call's arguments, read in one place: the host parses what a model wrote (the chat) or
//! takes what an MCP client's request already parsed (`/mcp`), checks it is an object, and hands
//! it on as checked JSON — to a built-in tool as it is, across the module boundary as the text of
//! an object ([`host_abi::ToolCallRequest::arguments_json`]), which nobody checks again.

use serde_json::{Map, Value};

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
}
