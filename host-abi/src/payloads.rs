//! The JSON payloads that cross the boundary inside `*_json` strings, as types both sides use:
//! the module serializes these, the host decodes them — and reads no ad-hoc keys.
//!
//! Decoding is tolerant (a later module may add keys; a field of the wrong shape takes its
//! default, by the rules of [`crate::lenient`] the derives name) except where a default would be
//! a lie: an app whose `kind` is missing or unknown is [`ProviderKind::Unknown`], never taken for
//! an MCP App. Keys a type does not name are kept in its `rest`, so a payload survives decoding
//! and re-encoding whole. The host decodes the large ones (a discovery report, an app's details)
//! with the same outcome in one pass (`gateway-host/src/module/payloads.rs`).

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

/// A discovery path or folder that was not scanned, and why.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct SkippedPath {
    #[serde(deserialize_with = "lenient::value")]
    pub path: String,
    #[serde(deserialize_with = "lenient::value")]
    pub reason: String,
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

/// A problem with one field of a manifest or configuration.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct FieldError {
    #[serde(deserialize_with = "lenient::value")]
    pub field: String,
    #[serde(deserialize_with = "lenient::value")]
    pub message: String,
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
    fn relay_payloads_round_trip() {
        let request: CallRequest =
            serde_json::from_value(json!({"callId": 9, "key": "k1", "request": {"method": "elicitation/create"}})).unwrap();
        assert_eq!((request.call_id, request.key.as_str(), request.request.method.as_str()), (9, "k1", "elicitation/create"));
        let respond = Respond { call_id: 9, key: "k1".into(), result: Some(json!({"action": "accept"})), error: None };
        assert_eq!(serde_json::to_value(&respond).unwrap(), json!({"callId": 9, "key": "k1", "result": {"action": "accept"}}));
        let responded: Responded = serde_json::from_value(json!({"delivered": true})).unwrap();
        assert!(responded.delivered);
    }
}
