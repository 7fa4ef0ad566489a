//! One-pass tolerant decoding of the module's large payloads (`host_abi::payloads`): a
//! discovery report of thousands of apps, an app's details.
//!
//! The host reads what the module wrote, and a later module may write more or other shapes than
//! this host knows: decoding never fails, a value of the wrong shape takes its default
//! (`host_abi::lenient`, the rules the payload types' derives name) and keys a type does not
//! name are kept in its `rest`. This decoder gets the derived outcome in one pass over the
//! text; it is the host's (the interface crate holds types only).

use std::fmt;
use std::marker::PhantomData;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use host_abi::lenient;
use host_abi::payloads::{AppDetail, DiscoveredApp, DiscoveryReport, FieldError, ManifestFacts, ServerFacts, SkippedPath};

/// `AppDescriptor::detail_json`, decoded tolerantly in one pass.
pub fn app_detail(text: &str) -> AppDetail {
    parse(text)
}

/// The text `ModuleInstance::discover` returns, decoded tolerantly in one pass: a report of ten
/// thousand apps is megabytes.
pub fn discovery_report(text: &str) -> DiscoveryReport {
    parse(text)
}

// How: straight from the text into the typed structs, each leaf through `lenient`
// as the derived `Deserialize` does it. The derived impls reach the same result through a
// `Value` of every field that holds a struct, decoded again (and again one level down): about
// five passes over a report of megabytes. They stay what every other decoding uses.
//
// The outcome is the derived one, which the tests check side by side: a leaf of the wrong shape
// takes its default; a list of structs with one element of the wrong shape is empty; a struct
// field that is not an object (for a struct without `rest`, also an array of at most its field
// count, read by position) is `None`; a named key given twice refuses the whole payload at its
// top level, and counts once (the last) below it; text that is not JSON gives the default.

/// A payload struct, decoded key by key.
pub trait Fields: Default {
    /// Its keys as the derived impls name them, in declaration order (the order of the array
    /// form of a struct without `rest`); at most 64.
    const NAMES: &'static [&'static str];
    /// Where keys it does not name go; `None`: ignored (such a struct also takes the array form).
    fn rest(&mut self) -> Option<&mut Map<String, Value>>;
    /// Decodes the key `NAMES[index]` into its field.
    fn field<'de, D: Deserializer<'de>>(&mut self, index: usize, value: D) -> Result<(), D::Error>;
}

/// The whole text, or the default when it is not JSON or not of `T`'s shape.
pub fn parse<T: Fields>(text: &str) -> T {
    let mut de = serde_json::Deserializer::from_str(text);
    let seed = Struct::<T> { top: true, marker: PhantomData };
    match seed.deserialize(&mut de).and_then(|value| de.end().map(|()| value)) {
        Ok(Some(value)) => value,
        _ => T::default(),
    }
}

/// A field holding a struct: `None` when it is null or of the wrong shape.
pub fn nested<'de, D: Deserializer<'de>, T: Fields>(value: D) -> Result<Option<T>, D::Error> {
    Struct::<T> { top: false, marker: PhantomData }.deserialize(value)
}

/// A field holding a list of structs: all of them, or none when one is of the wrong shape.
pub fn list<'de, D: Deserializer<'de>, T: Fields>(value: D) -> Result<Vec<T>, D::Error> {
    value.deserialize_any(List::<T>(PhantomData))
}

/// Every other visit of a tolerant visitor: a value of the wrong shape, read and dropped.
macro_rules! wrong_shape {
    ($default:expr) => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($default)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($default)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok($default)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($default)
        }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok($default)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($default)
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok($default)
        }
    };
}

struct Struct<T> {
    /// The payload itself, where a repeated key refuses it (below, the last one counts).
    top: bool,
    marker: PhantomData<T>,
}

impl<'de, T: Fields> DeserializeSeed<'de> for Struct<T> {
    type Value = Option<T>;
    fn deserialize<D: Deserializer<'de>>(self, value: D) -> Result<Option<T>, D::Error> {
        value.deserialize_any(self)
    }
}

impl<'de, T: Fields> Visitor<'de> for Struct<T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    wrong_shape!(None);

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<T>, A::Error> {
        let mut value = T::default();
        let (mut seen, mut repeated) = (0u64, false);
        while let Some(key) = map.next_key_seed(Keys(T::NAMES))? {
            match key {
                Key::Named(index) => {
                    repeated |= seen & (1 << index) != 0;
                    seen |= 1 << index;
                    map.next_value_seed(Field { into: &mut value, index })?;
                }
                Key::Other(name) => match value.rest() {
                    Some(rest) => {
                        rest.insert(name, map.next_value()?);
                    }
                    None => {
                        map.next_value::<IgnoredAny>()?;
                    }
                },
            }
        }
        Ok((!(self.top && repeated)).then_some(value))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<T>, A::Error> {
        let mut value = T::default();
        if value.rest().is_none() {
            for index in 0..T::NAMES.len() {
                if seq.next_element_seed(Field { into: &mut value, index })?.is_none() {
                    return Ok(Some(value));
                }
            }
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Ok(Some(value));
            }
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

struct List<T>(PhantomData<T>);

impl<'de, T: Fields> Visitor<'de> for List<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    wrong_shape!(Vec::new());

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 12));
        let mut whole = true;
        while let Some(item) = seq.next_element_seed(Struct::<T> { top: false, marker: PhantomData })? {
            match item {
                Some(item) if whole => items.push(item),
                _ => whole = false,
            }
        }
        Ok(if whole { items } else { Vec::new() })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<T>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Vec::new())
    }
}

/// A key: one of the struct's names (no copy), or another, kept for `rest`.
enum Key {
    Named(usize),
    Other(String),
}

/// Reads a key against the names of a struct.
struct Keys(&'static [&'static str]);

impl Keys {
    fn named(&self, key: &str) -> Option<usize> {
        self.0.iter().position(|name| *name == key)
    }
}

impl<'de> DeserializeSeed<'de> for Keys {
    type Value = Key;
    fn deserialize<D: Deserializer<'de>>(self, key: D) -> Result<Key, D::Error> {
        key.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Keys {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E>(self, key: &str) -> Result<Key, E> {
        Ok(self.named(key).map_or_else(|| Key::Other(key.to_string()), Key::Named))
    }

    fn visit_string<E>(self, key: String) -> Result<Key, E> {
        Ok(self.named(&key).map_or(Key::Other(key), Key::Named))
    }
}

/// Decodes one named key's value into its field.
struct Field<'a, T> {
    into: &'a mut T,
    index: usize,
}

impl<'de, T: Fields> DeserializeSeed<'de> for Field<'_, T> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, value: D) -> Result<(), D::Error> {
        self.into.field(self.index, value)
    }
}

/// Implements [`Fields`] for a payload struct from one list of `"key" => field: decoder` (the
/// decoder: `lenient::value`, `lenient::strings`, [`nested`] or [`list`]), so a key's name, its
/// position and its field are written once. `rest` names the map of keys the struct does not
/// name, or is `_` for a struct that ignores them.
macro_rules! fields {
    ($ty:ty, rest: $rest:tt, { $($key:literal => $field:ident: $decode:path),+ $(,)? }) => {
        impl Fields for $ty {
            const NAMES: &'static [&'static str] = &[$($key),+];
            fn rest(&mut self) -> Option<&mut Map<String, Value>> {
                fields!(@rest self, $rest)
            }
            fn field<'de, D: Deserializer<'de>>(&mut self, index: usize, value: D) -> Result<(), D::Error> {
                match Self::NAMES.get(index) {
                    $(Some(&$key) => self.$field = $decode(value)?,)+
                    _ => {}
                }
                Ok(())
            }
        }
    };
    (@rest $self:ident, _) => { None };
    (@rest $self:ident, $rest:ident) => { Some(&mut $self.$rest) };
}

fields!(AppDetail, rest: rest, {
    "kind" => kind: lenient::value,
    "server" => server: nested,
    "manifest" => manifest: nested,
});
fields!(ServerFacts, rest: rest, {
    "capabilities" => capabilities: lenient::value,
});
fields!(ManifestFacts, rest: rest, {
    "version" => version: lenient::value,
    "transport" => transport: lenient::value,
    "url" => url: lenient::value,
    "command" => command: lenient::value,
    "arguments" => arguments: lenient::strings,
    "toolNamePrefix" => tool_name_prefix: lenient::value,
    "startupTimeoutSeconds" => startup_timeout_seconds: lenient::value,
    "requestTimeoutSeconds" => request_timeout_seconds: lenient::value,
    "capabilities" => capabilities: lenient::strings,
});
fields!(DiscoveryReport, rest: rest, {
    "enabled" => enabled: lenient::value,
    "apps" => apps: list,
    "skipped" => skipped: list,
    "configErrors" => config_errors: list,
});
fields!(SkippedPath, rest: _, {
    "path" => path: lenient::value,
    "reason" => reason: lenient::value,
});
fields!(DiscoveredApp, rest: rest, {
    "key" => key: lenient::value,
    "state" => state: lenient::value,
    "manifest" => manifest: nested,
    "validationErrors" => validation_errors: list,
    "disabledReason" => disabled_reason: lenient::value,
    "lastError" => last_error: lenient::value,
});
fields!(FieldError, rest: _, {
    "field" => field: lenient::value,
    "message" => message: lenient::value,
});

#[cfg(test)]
mod tests {
    use super::*;
    use host_abi::payloads::ProviderKind;
    use serde_json::json;

    #[test]
    fn an_app_without_a_kind_is_no_mcp_app() {
        assert_eq!(app_detail("{}").kind, ProviderKind::Unknown);
        assert_eq!(app_detail(r#"{"kind": "somethingNew"}"#).kind, ProviderKind::Unknown);
        assert_eq!(app_detail(r#"{"kind": 7}"#).kind, ProviderKind::Unknown);
        assert_eq!(app_detail("not json").kind, ProviderKind::Unknown);
        assert_eq!(app_detail(r#"{"kind": "mcpApp"}"#).kind, ProviderKind::App);
        assert_eq!(app_detail(r#"{"kind": "mcpServer"}"#).kind, ProviderKind::McpServer);
    }

    #[test]
    fn decoding_is_tolerant_and_keeps_what_it_does_not_name() {
        let detail = app_detail(
            r#"{"kind": "mcpApp", "server": {"capabilities": {"tools": {}}, "serverInfo": {"name": "x"}},
                "manifest": {"capabilities": ["tools", 3], "startupTimeoutSeconds": "soon"}, "crashLoopHeld": true}"#,
        );
        assert_eq!(detail.server.as_ref().and_then(|s| s.capabilities.as_ref()).map(|c| c.contains_key("tools")), Some(true));
        let manifest = detail.manifest.as_ref().unwrap();
        assert_eq!(manifest.capabilities, vec!["tools".to_string()]);
        assert_eq!(manifest.startup_timeout_seconds, 0);
        assert_eq!(detail.rest["crashLoopHeld"], json!(true));
        let again: AppDetail = serde_json::from_value(serde_json::to_value(&detail).unwrap()).unwrap();
        assert_eq!(again, detail);
    }

    /// Every node of `template` replaced in turn by each value of another shape.
    fn variants(template: &Value) -> Vec<Value> {
        let others = [json!(null), json!(true), json!(7), json!(-3), json!(1.5), json!("s"), json!([]), json!({}), json!(["a", 2]), json!({"k": 1}), json!([{}])];
        let mut out = Vec::new();
        fn walk(node: &Value, path: &mut Vec<Value>, others: &[Value], root: &Value, out: &mut Vec<Value>) {
            for other in others {
                let mut copy = root.clone();
                let mut at = &mut copy;
                for step in path.iter() {
                    at = match step {
                        Value::String(key) => &mut at[key.as_str()],
                        step => &mut at[step.as_u64().unwrap() as usize],
                    };
                }
                *at = other.clone();
                out.push(copy);
            }
            match node {
                Value::Object(map) => {
                    for (key, child) in map {
                        path.push(json!(key));
                        walk(child, path, others, root, out);
                        path.pop();
                    }
                }
                Value::Array(items) => {
                    for (i, child) in items.iter().enumerate() {
                        path.push(json!(i));
                        walk(child, path, others, root, out);
                        path.pop();
                    }
                }
                _ => {}
            }
        }
        walk(template, &mut Vec::new(), &others, template, &mut out);
        out
    }

    fn manifest_json() -> Value {
        json!({"version": "1.0.0", "transport": "stdio", "url": "http://x", "command": "app", "arguments": ["-v", 3],
               "toolNamePrefix": "a.", "startupTimeoutSeconds": 30, "requestTimeoutSeconds": 7, "capabilities": ["tools"],
               "name": "A", "tags": ["t"], "environment": {"K": "v"}})
    }

    /// The one-pass decoding and the derived one agree on every payload, however malformed.
    #[test]
    fn one_pass_decoding_is_the_derived_decoding() {
        let report = json!({
            "enabled": true,
            "apps": [
                {"key": "a", "state": "validated", "manifest": manifest_json(), "validationErrors": [{"field": "id", "message": "bad", "x": 1}],
                 "disabledReason": "off", "lastError": "boom", "manifestPath": "/a", "transitions": [{"from": "discovered", "to": "validated"}]},
                {"key": "b", "state": "failed", "manifest": null, "validationErrors": [["url", "missing"]], "disabledReason": null},
            ],
            "skipped": [{"path": "/p", "reason": "missing"}, ["/q"]],
            "configErrors": [{"field": "McpApps.Allow", "message": "not a list"}],
            "scannedAt": 5,
        });
        let detail = json!({"kind": "mcpApp", "server": {"capabilities": {"tools": {}}, "serverInfo": {"name": "x"}},
                            "manifest": manifest_json(), "crashLoopHeld": true});
        let derived = |text: &str| serde_json::from_str::<DiscoveryReport>(text).unwrap_or_default();
        let derived_detail = |text: &str| serde_json::from_str::<AppDetail>(text).unwrap_or_default();
        let (reports, details) = (variants(&report), variants(&detail));
        assert!(reports.len() > 500 && details.len() > 200);
        for text in std::iter::once(report.to_string()).chain(reports.iter().map(Value::to_string)) {
            assert_eq!(discovery_report(&text), derived(&text), "{text}");
        }
        for text in std::iter::once(detail.to_string()).chain(details.iter().map(Value::to_string)) {
            assert_eq!(app_detail(&text), derived_detail(&text), "{text}");
        }
        assert_eq!(discovery_report(&report.to_string()).apps[1].validation_errors[0].message, "missing");
        // What a tree of values cannot show: repeated keys, text that is not (only) JSON, arrays
        // longer than a struct, escaped keys.
        for text in [
            r#"{"enabled": true, "enabled": false}"#,
            r#"{"apps": [{"key": "a", "key": "b", "manifest": {"version": "1", "version": 2}}], "x": 1, "x": 2}"#,
            r#"{"apps": [{"key": "a"}], "skipped": [["/p", "r", "extra"]]}"#,
            r#"{"apps": [{"key": "a", "x": 1}]}"#,
            r#"{"kind": "mcpApp", "kind": "mcpServer"}"#,
            r#"{"kind": "mcpApp", "server": {"capabilities": {}, "capabilities": 3}}"#,
            r#"{"enabled": true} trailing"#,
            r#"{"enabled": true"#,
            "[true]",
            "not json",
            "",
        ] {
            assert_eq!(discovery_report(text), derived(text), "{text}");
            assert_eq!(app_detail(text), derived_detail(text), "{text}");
        }
    }
}
