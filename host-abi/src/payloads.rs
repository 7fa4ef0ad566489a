//! The JSON payloads that cross the boundary inside `*_json` strings, as types both sides use:
//! the module serializes these, the host decodes them — and reads no ad-hoc keys.
//!
//! Decoding is tolerant (a later module may add keys; a field of the wrong shape takes its
//! default) except where a default would be a lie: an app whose `kind` is missing or unknown is
//! [`ProviderKind::Unknown`], never taken for an MCP App. Keys a type does not name are kept in
//! its `rest`, so a payload survives decoding and re-encoding whole.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::lenient;

/// What a registry entry is.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum ProviderKind {
    /// An MCP App: a manifest-packaged server, reachable under `/apps/*`.
    #[serde(rename = "mcpApp")]
    App,
    /// A standard MCP server from `Plugins.Mcp`: tools only.
    McpServer,
    /// Missing or not understood: neither of the above.
    #[default]
    #[serde(other)]
    Unknown,
}

// `AppState` and `Transport` are descriptor fields (crate::descriptors); named here too, as before.
pub use crate::{AppState, Transport};

/// `AppDescriptor::detail_json`: what the descriptor's fixed fields do not carry.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct AppDetail {
    #[serde(deserialize_with = "lenient::value")]
    pub kind: ProviderKind,
    /// What the app declared in its handshake; `None` while it has no session.
    #[serde(deserialize_with = "lenient::value")]
    pub server: Option<ServerFacts>,
    /// The app's manifest as the module read it; `None` for a standard server.
    #[serde(deserialize_with = "lenient::value")]
    pub manifest: Option<ManifestFacts>,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

impl AppDetail {
    /// Decodes `AppDescriptor::detail_json` tolerantly, in one pass (see `tolerant` below).
    pub fn from_json(text: &str) -> AppDetail {
        tolerant::parse(text)
    }
}

impl tolerant::Fields for AppDetail {
    const NAMES: &'static [&'static str] = &["kind", "server", "manifest"];
    fn rest(&mut self) -> Option<&mut Map<String, Value>> {
        Some(&mut self.rest)
    }
    fn field<'de, D: serde::Deserializer<'de>>(&mut self, index: usize, value: D) -> Result<(), D::Error> {
        match index {
            0 => self.kind = lenient::value(value)?,
            1 => self.server = tolerant::nested(value)?,
            _ => self.manifest = tolerant::nested(value)?,
        }
        Ok(())
    }
}

/// An app's handshake: its capabilities, server info and protocol version.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ServerFacts {
    /// The MCP `ServerCapabilities` object the app declared.
    #[serde(deserialize_with = "lenient::value")]
    pub capabilities: Option<Map<String, Value>>,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

impl tolerant::Fields for ServerFacts {
    const NAMES: &'static [&'static str] = &["capabilities"];
    fn rest(&mut self) -> Option<&mut Map<String, Value>> {
        Some(&mut self.rest)
    }
    fn field<'de, D: serde::Deserializer<'de>>(&mut self, _: usize, value: D) -> Result<(), D::Error> {
        self.capabilities = lenient::value(value)?;
        Ok(())
    }
}

/// The manifest fields the host shows or uses.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ManifestFacts {
    #[serde(deserialize_with = "lenient::value")]
    pub version: String,
    /// `stdio` or `http`.
    #[serde(deserialize_with = "lenient::value")]
    pub transport: String,
    #[serde(deserialize_with = "lenient::value", skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(deserialize_with = "lenient::value", skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(deserialize_with = "lenient::strings")]
    pub arguments: Vec<String>,
    #[serde(deserialize_with = "lenient::value")]
    pub tool_name_prefix: String,
    #[serde(deserialize_with = "lenient::value")]
    pub startup_timeout_seconds: u64,
    #[serde(deserialize_with = "lenient::value")]
    pub request_timeout_seconds: u64,
    /// What the manifest says the app offers (`tools`, `resources`, `prompts`, `completions`).
    #[serde(deserialize_with = "lenient::strings")]
    pub capabilities: Vec<String>,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

impl tolerant::Fields for ManifestFacts {
    const NAMES: &'static [&'static str] = &[
        "version",
        "transport",
        "url",
        "command",
        "arguments",
        "toolNamePrefix",
        "startupTimeoutSeconds",
        "requestTimeoutSeconds",
        "capabilities",
    ];
    fn rest(&mut self) -> Option<&mut Map<String, Value>> {
        Some(&mut self.rest)
    }
    fn field<'de, D: serde::Deserializer<'de>>(&mut self, index: usize, value: D) -> Result<(), D::Error> {
        match index {
            0 => self.version = lenient::value(value)?,
            1 => self.transport = lenient::value(value)?,
            2 => self.url = lenient::value(value)?,
            3 => self.command = lenient::value(value)?,
            4 => self.arguments = lenient::strings(value)?,
            5 => self.tool_name_prefix = lenient::value(value)?,
            6 => self.startup_timeout_seconds = lenient::value(value)?,
            7 => self.request_timeout_seconds = lenient::value(value)?,
            _ => self.capabilities = lenient::strings(value)?,
        }
        Ok(())
    }
}

/// The result of `ModuleInstance::discover`.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct DiscoveryReport {
    /// `McpApps.Enabled`; when false nothing was scanned.
    #[serde(deserialize_with = "lenient::value")]
    pub enabled: bool,
    #[serde(deserialize_with = "lenient::value")]
    pub apps: Vec<DiscoveredApp>,
    /// Paths and folders skipped (missing, unreadable, too deep…).
    #[serde(deserialize_with = "lenient::value")]
    pub skipped: Vec<SkippedPath>,
    /// Problems in the `McpApps` configuration itself.
    #[serde(deserialize_with = "lenient::value")]
    pub config_errors: Vec<FieldError>,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

impl DiscoveryReport {
    /// Decodes the text `ModuleInstance::discover` returns, tolerantly, in one pass
    /// (see `tolerant` below): a report of ten thousand apps is megabytes.
    pub fn from_json(text: &str) -> DiscoveryReport {
        tolerant::parse(text)
    }
}

impl tolerant::Fields for DiscoveryReport {
    const NAMES: &'static [&'static str] = &["enabled", "apps", "skipped", "configErrors"];
    fn rest(&mut self) -> Option<&mut Map<String, Value>> {
        Some(&mut self.rest)
    }
    fn field<'de, D: serde::Deserializer<'de>>(&mut self, index: usize, value: D) -> Result<(), D::Error> {
        match index {
            0 => self.enabled = lenient::value(value)?,
            1 => self.apps = tolerant::list(value)?,
            2 => self.skipped = tolerant::list(value)?,
            _ => self.config_errors = tolerant::list(value)?,
        }
        Ok(())
    }
}

/// A discovery path or folder that was not scanned, and why.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct SkippedPath {
    #[serde(deserialize_with = "lenient::value")]
    pub path: String,
    #[serde(deserialize_with = "lenient::value")]
    pub reason: String,
}

impl tolerant::Fields for SkippedPath {
    const NAMES: &'static [&'static str] = &["path", "reason"];
    fn rest(&mut self) -> Option<&mut Map<String, Value>> {
        None
    }
    fn field<'de, D: serde::Deserializer<'de>>(&mut self, index: usize, value: D) -> Result<(), D::Error> {
        match index {
            0 => self.path = lenient::value(value)?,
            _ => self.reason = lenient::value(value)?,
        }
        Ok(())
    }
}

/// One manifest discovery found, with its install state.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct DiscoveredApp {
    /// The registry key (the app id, when usable).
    #[serde(deserialize_with = "lenient::value")]
    pub key: String,
    #[serde(deserialize_with = "lenient::value")]
    pub state: String,
    #[serde(deserialize_with = "lenient::value")]
    pub manifest: Option<ManifestFacts>,
    #[serde(deserialize_with = "lenient::value")]
    pub validation_errors: Vec<FieldError>,
    #[serde(deserialize_with = "lenient::value")]
    pub disabled_reason: Option<String>,
    #[serde(deserialize_with = "lenient::value")]
    pub last_error: Option<String>,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

impl tolerant::Fields for DiscoveredApp {
    const NAMES: &'static [&'static str] = &["key", "state", "manifest", "validationErrors", "disabledReason", "lastError"];
    fn rest(&mut self) -> Option<&mut Map<String, Value>> {
        Some(&mut self.rest)
    }
    fn field<'de, D: serde::Deserializer<'de>>(&mut self, index: usize, value: D) -> Result<(), D::Error> {
        match index {
            0 => self.key = lenient::value(value)?,
            1 => self.state = lenient::value(value)?,
            2 => self.manifest = tolerant::nested(value)?,
            3 => self.validation_errors = tolerant::list(value)?,
            4 => self.disabled_reason = lenient::value(value)?,
            _ => self.last_error = lenient::value(value)?,
        }
        Ok(())
    }
}

/// A problem with one field of a manifest or configuration.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct FieldError {
    #[serde(deserialize_with = "lenient::value")]
    pub field: String,
    #[serde(deserialize_with = "lenient::value")]
    pub message: String,
}

impl tolerant::Fields for FieldError {
    const NAMES: &'static [&'static str] = &["field", "message"];
    fn rest(&mut self) -> Option<&mut Map<String, Value>> {
        None
    }
    fn field<'de, D: serde::Deserializer<'de>>(&mut self, index: usize, value: D) -> Result<(), D::Error> {
        match index {
            0 => self.field = lenient::value(value)?,
            _ => self.message = lenient::value(value)?,
        }
        Ok(())
    }
}

/// The result of `ModuleInstance::reload`: registry keys by what happened to them.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct ReloadReport {
    #[serde(deserialize_with = "lenient::strings")]
    pub started: Vec<String>,
    #[serde(deserialize_with = "lenient::strings")]
    pub stopped: Vec<String>,
    #[serde(deserialize_with = "lenient::strings")]
    pub restarted: Vec<String>,
    #[serde(deserialize_with = "lenient::strings")]
    pub unchanged: Vec<String>,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// The `invoke` method that validates manifests (the `validate` command): params
/// [`ValidateParams`], result a list of [`ValidationResult`].
pub const VALIDATE: &str = "manifest.validate";

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct ValidateParams {
    #[serde(deserialize_with = "lenient::strings")]
    pub paths: Vec<String>,
}

/// The `invoke` method that hands the module a new configuration document and reloads against
/// it: the `McpApps` section (entries, allow/deny, discovery paths) and `Plugins.Mcp` (the
/// standard MCP servers) are read again; apps and servers whose definition did not change are
/// left running. Params [`ReconfigureParams`], result a [`ReloadReport`]. A module without it
/// answers "not implemented" (the host then reloads with the configuration the module has).
pub const RECONFIGURE: &str = "registry.reconfigure";

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ReconfigureParams {
    /// The whole effective configuration, as `ModuleConfig::config_json` carries it.
    pub config: Value,
    /// An operator's reload: also retries unchanged apps that are Failed (a crash-loop hold).
    /// A workspace server edit is not explicit, so it disturbs nothing else.
    pub explicit: bool,
}

/// The longest `startupTimeoutSeconds` and `requestTimeoutSeconds` (and a manifest's
/// `healthCheckIntervalSeconds`) may be: a day. Far beyond anything useful, but it keeps
/// `Instant + Duration` arithmetic away from overflow. One number for both sides: the module
/// refuses more when it reads a manifest or a `Plugins.Mcp` server, the host when a workspace
/// definition is written (so a definition it accepts is one the module will start).
pub const MAX_TIMEOUT_SECONDS: u64 = 86_400;

/// One manifest checked by [`VALIDATE`].
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ValidationResult {
    #[serde(deserialize_with = "lenient::value")]
    pub path: String,
    #[serde(deserialize_with = "lenient::value")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient::value")]
    pub valid: bool,
    #[serde(deserialize_with = "lenient::strings")]
    pub errors: Vec<String>,
    #[serde(deserialize_with = "lenient::strings")]
    pub warnings: Vec<String>,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// Payload of [`EventKind::CallNotification`](crate::EventKind::CallNotification).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct CallNotification {
    #[serde(deserialize_with = "lenient::value")]
    pub call_id: u64,
    /// The JSON-RPC notification, for the call's client.
    pub message: Value,
}

/// Payload of [`EventKind::CallRequest`](crate::EventKind::CallRequest).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct CallRequest {
    #[serde(deserialize_with = "lenient::value")]
    pub call_id: u64,
    /// Names the question in the answer ([`Respond`]).
    #[serde(deserialize_with = "lenient::value")]
    pub key: String,
    #[serde(deserialize_with = "lenient::value")]
    pub request: QuestionRequest,
}

/// What an app asks a caller: a JSON-RPC request's method and params.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct QuestionRequest {
    #[serde(deserialize_with = "lenient::value")]
    pub method: String,
    /// `{}` when the app sent none.
    #[serde(deserialize_with = "lenient::object")]
    pub params: Value,
}

/// Params of [`crate::relay::RESPOND`]: the answer to a [`CallRequest`], a result or an error.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Respond {
    #[serde(deserialize_with = "lenient::value")]
    pub call_id: u64,
    #[serde(deserialize_with = "lenient::value")]
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// A JSON-RPC error object `{code, message, data?}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
}

/// Result of [`crate::relay::RESPOND`].
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct Responded {
    /// A call was waiting for that answer.
    #[serde(deserialize_with = "lenient::value")]
    pub delivered: bool,
}

/// One-pass tolerant decoding of the large payloads (a discovery report of thousands of apps, an
/// app's details): straight from the text into the typed structs, each leaf through `lenient`
/// as the derived `Deserialize` does it. The derived impls reach the same result through a
/// `Value` of every field that holds a struct, decoded again (and again one level down): about
/// five passes over a report of megabytes. They stay what every other decoding uses.
///
/// The outcome is the derived one, which the tests check side by side: a leaf of the wrong shape
/// takes its default; a list of structs with one element of the wrong shape is empty; a struct
/// field that is not an object (for a struct without `rest`, also an array of at most its field
/// count, read by position) is `None`; a named key given twice refuses the whole payload at its
/// top level, and counts once (the last) below it; text that is not JSON gives the default.
mod tolerant {
    use std::fmt;
    use std::marker::PhantomData;

    use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
    use serde_json::{Map, Value};

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
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_app_without_a_kind_is_no_mcp_app() {
        assert_eq!(AppDetail::from_json("{}").kind, ProviderKind::Unknown);
        assert_eq!(AppDetail::from_json(r#"{"kind": "somethingNew"}"#).kind, ProviderKind::Unknown);
        assert_eq!(AppDetail::from_json(r#"{"kind": 7}"#).kind, ProviderKind::Unknown);
        assert_eq!(AppDetail::from_json("not json").kind, ProviderKind::Unknown);
        assert_eq!(AppDetail::from_json(r#"{"kind": "mcpApp"}"#).kind, ProviderKind::App);
        assert_eq!(AppDetail::from_json(r#"{"kind": "mcpServer"}"#).kind, ProviderKind::McpServer);
    }

    #[test]
    fn states_and_transports_are_typed() {
        assert_eq!(AppState::of("running"), AppState::Running);
        assert_eq!(AppState::of("failed"), AppState::Failed);
        assert_eq!(AppState::of("hibernating"), AppState::Unknown);
        assert_eq!(Transport::of("http"), Transport::Http);
        assert_eq!(Transport::of("carrier-pigeon"), Transport::Unknown);
        assert_eq!(serde_json::to_value(AppState::Running).unwrap(), json!("running"));
    }

    #[test]
    fn decoding_is_tolerant_and_keeps_what_it_does_not_name() {
        let detail = AppDetail::from_json(
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

    #[test]
    fn relay_payloads_round_trip() {
        let request: CallRequest =
            serde_json::from_value(json!({"callId": 9, "key": "k1", "request": {"method": "elicitation/create"}})).unwrap();
        assert_eq!((request.call_id, request.key.as_str(), request.request.method.as_str()), (9, "k1", "elicitation/create"));
        let respond = Respond { call_id: 9, key: "k1".into(), result: Some(json!({"action": "accept"})), error: None };
        assert_eq!(serde_json::to_value(&respond).unwrap(), json!({"callId": 9, "key": "k1", "result": {"action": "accept"}}));
        let responded: Responded = serde_json::from_value(json!({"delivered": true})).unwrap();
        assert!(responded.delivered);
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
            assert_eq!(DiscoveryReport::from_json(&text), derived(&text), "{text}");
        }
        for text in std::iter::once(detail.to_string()).chain(details.iter().map(Value::to_string)) {
            assert_eq!(AppDetail::from_json(&text), derived_detail(&text), "{text}");
        }
        assert_eq!(DiscoveryReport::from_json(&report.to_string()).apps[1].validation_errors[0].message, "missing");
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
            assert_eq!(DiscoveryReport::from_json(text), derived(text), "{text}");
            assert_eq!(AppDetail::from_json(text), derived_detail(text), "{text}");
        }
    }
}
