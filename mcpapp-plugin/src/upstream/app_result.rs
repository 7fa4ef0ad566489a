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

/// A `resultType` the gateway acts on (a plain result, `complete` or none, it passes on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultKind {
    /// The app asks the caller for input and wants the request again with the answers.
    InputRequired,
    /// The app runs the request as a task, to be polled to its end.
    Task,
}

impl ResultKind {
    fn named(name: &str) -> Option<ResultKind> {
        match name {
            "input_required" => Some(ResultKind::InputRequired),
            "task" => Some(ResultKind::Task),
            _ => None,
        }
    }
}

/// The members of a result the gateway acts on.
#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(rename = "resultType", borrow, default)]
    result_type: Option<Cow<'a, str>>,
}

impl AppResult {
    /// Its `resultType` when the gateway acts on it.
    ///
    /// A text is read for it only when it holds `"resultType"` with one of those values written
    /// out (a 2026-07-28 app's plain results say `"resultType":"complete"`, and are not read
    /// again); then the read tells whether that member is the result's own. An app that writes
    /// the member with escapes (`"result\u0054ype"`) is taken at its word as giving a plain
    /// result, which goes to the caller as it is: the gateway acts on what it can see.
    pub fn result_type(&self) -> Option<ResultKind> {
        match self {
            AppResult::Tree(value) => value.get("resultType").and_then(Value::as_str).and_then(ResultKind::named),
            AppResult::Text(raw) => {
                if !names_an_acted_on_type(raw.get()) {
                    return None;
                }
                let peek: Peek<'_> = parse_count::parsed_borrowed(Direction::Answer, raw.get()).ok()?;
                peek.result_type.as_deref().and_then(ResultKind::named)
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

/// Whether `text` holds `"resultType"` followed by the name of a [`ResultKind`] as its value.
fn names_an_acted_on_type(text: &str) -> bool {
    const NAME: &[u8] = b"\"resultType\"";
    let json_space = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    memchr::memmem::find_iter(text.as_bytes(), NAME).any(|at| {
        let rest = &text.as_bytes()[at + NAME.len()..];
        let rest = &rest[rest.iter().take_while(|b| json_space(b)).count()..];
        let Some(rest) = rest.strip_prefix(b":") else { return false };
        let rest = &rest[rest.iter().take_while(|b| json_space(b)).count()..];
        rest.starts_with(b"\"input_required\"") || rest.starts_with(b"\"task\"")
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(s: &str) -> AppResult {
        AppResult::Text(RawValue::from_string(s.to_string()).unwrap())
    }

    #[test]
    fn the_result_type_is_read_where_the_gateway_acts_on_it() {
        assert_eq!(text(r#"{"content":[],"isError":false}"#).result_type(), None);
        assert_eq!(text(r#"{"resultType":"input_required","inputRequests":{}}"#).result_type(), Some(ResultKind::InputRequired));
        assert_eq!(text(r#"{ "taskId": "t", "resultType" :	"task" }"#).result_type(), Some(ResultKind::Task));
        assert_eq!(text(r#"{"content":[{"resultType":"task"}]}"#).result_type(), None, "only the result's own member");
        assert_eq!(text(r#"{"content":[{"type":"text","text":"resultType task"}]}"#).result_type(), None);
        assert_eq!(AppResult::Tree(json!({"resultType": "task"})).result_type(), Some(ResultKind::Task));
        assert_eq!(AppResult::Tree(json!({"resultType": "complete"})).result_type(), None);
    }

    /// A 2026-07-28 app's plain result (`"resultType":"complete"`) is not read again: the one
    /// parse of its answer stays the only one.
    #[test]
    fn a_plain_result_of_the_newer_revision_is_not_read_again() {
        assert!(!names_an_acted_on_type(r#"{"resultType":"complete","content":[{"type":"text","text":"task"}]}"#));
        assert!(!names_an_acted_on_type(r#"{"resultType":"taskmaster"}"#));
        assert!(names_an_acted_on_type(r#"{"content":[{"resultType":"task"}]}"#), "found, then read to tell it is not the result's own");
    }

    #[test]
    fn text_goes_on_as_the_app_wrote_it() {
        let written = r#"{ "b": 1, "a": [ 2 ] }"#;
        assert_eq!(text(written).into_text(), written);
        assert_eq!(text(written).into_value().unwrap(), json!({"a": [2], "b": 1}));
        assert_eq!(AppResult::Tree(json!({"b": 1, "a": 2})).into_text(), r#"{"a":2,"b":1}"#);
    }
}
