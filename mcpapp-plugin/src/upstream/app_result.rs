//! A request's result as it comes from the app: the text the app wrote (the short way), or the
//! tree rmcp read (rmcp's way).
//!
//! The short way reads an answer once, for the members that route it (`id`, `method`), and keeps
//! its `result` as the app's text: most results go on to the host as they are
//! (`export/forward.rs`), and building a tree of one only to write it out again was most of the
//! module's work per proxied call (19 of its 110 allocations, `bench proxy`). Only what looks
//! inside a result reads it: [`AppResult::result_type`] (whether the app asks for input or made
//! a task), [`AppResult::into_value`].

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::runtime::parse_count::{self, Direction};
use crate::upstream::error::UpstreamError;

/// A request's result (see the module docs).
#[derive(Debug)]
pub enum AppResult {
    /// As the app wrote it.
    Text(Box<RawValue>),
    /// As rmcp read it.
    Tree(Value),
}

/// The members of a result the gateway acts on.
#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(rename = "resultType", borrow, default)]
    result_type: Option<Cow<'a, str>>,
}

impl AppResult {
    /// Its `resultType` (`input_required`, `task`), if it has one.
    ///
    /// A text is read for it only when the member can be there: its name written out, or an
    /// escape (`\u…`) that might spell it. Reading it builds nothing but the member.
    pub fn result_type(&self) -> Option<Cow<'_, str>> {
        match self {
            AppResult::Tree(value) => value.get("resultType").and_then(Value::as_str).map(Cow::Borrowed),
            AppResult::Text(raw) => {
                let text = raw.get().as_bytes();
                let may_have = memchr::memmem::find(text, b"\"resultType\"").is_some() || memchr::memmem::find(text, b"\\u").is_some();
                if !may_have {
                    return None;
                }
                parse_count::count(Direction::Answer);
                serde_json::from_str::<Peek<'_>>(raw.get()).ok().and_then(|peek| peek.result_type)
            }
        }
    }

    /// As a tree, for what looks inside it.
    pub fn into_value(self) -> Result<Value, UpstreamError> {
        match self {
            AppResult::Tree(value) => Ok(value),
            AppResult::Text(raw) => parse_count::parsed(Direction::Answer, raw.get())
                .map_err(|e| UpstreamError::Invalid(format!("the app's result cannot be read: {e}"))),
        }
    }

    /// As text, for the host.
    pub fn into_text(self) -> String {
        match self {
            AppResult::Text(raw) => String::from(Box::<str>::from(raw)),
            AppResult::Tree(value) => serde_json::to_string(&value).unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(s: &str) -> AppResult {
        AppResult::Text(RawValue::from_string(s.to_string()).unwrap())
    }

    #[test]
    fn the_result_type_is_read_where_it_can_be() {
        assert_eq!(text(r#"{"content":[],"isError":false}"#).result_type(), None);
        assert_eq!(text(r#"{"resultType":"input_required","inputRequests":{}}"#).result_type().as_deref(), Some("input_required"));
        assert_eq!(text(r#"{"result\u0054ype":"task","task":{}}"#).result_type().as_deref(), Some("task"), "an escaped name");
        assert_eq!(text(r#"{"content":[{"type":"text","text":"\u00e9"}]}"#).result_type(), None);
        assert_eq!(text(r#"{"content":[{"resultType":"task"}]}"#).result_type(), None, "only the result's own member");
        assert_eq!(AppResult::Tree(json!({"resultType": "task"})).result_type().as_deref(), Some("task"));
    }

    #[test]
    fn text_goes_on_as_the_app_wrote_it() {
        let written = r#"{ "b": 1, "a": [ 2 ] }"#;
        assert_eq!(text(written).into_text(), written);
        assert_eq!(text(written).into_value().unwrap(), json!({"a": [2], "b": 1}));
        assert_eq!(AppResult::Tree(json!({"b": 1, "a": 2})).into_text(), r#"{"a":2,"b":1}"#);
    }
}
