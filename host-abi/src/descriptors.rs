//! What the module describes to the host: its apps and their tools.

use abi_stable::{
    std_types::{RString, RVec},
    StableAbi,
};
use serde::{Deserialize, Serialize};

/// One app as the registry sees it.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct AppDescriptor {
    pub id: RString,
    pub name: RString,
    pub version: RString,
    /// Read it with [`AppDescriptor::state`].
    pub state: AppState_NE,
    /// Read it with [`AppDescriptor::transport`]; [`Transport::Unknown`] for a standard MCP
    /// server, which has no manifest.
    pub transport: Transport_NE,
    pub manifest_path: RString,
    pub tool_count: u32,
    pub resource_count: u32,
    pub resource_template_count: u32,
    pub prompt_count: u32,
    pub has_ui: bool,
    pub ui_resource_uri: RString,
    pub tool_name_prefix: RString,
    /// Empty when none.
    pub last_error: RString,
    pub validation_errors: RVec<RString>,
    /// Everything else (effective settings, transition times, description…) as a JSON object.
    pub detail_json: RString,
}

impl AppDescriptor {
    /// The app's lifecycle state; one this side does not know (sent by a newer side) reads as
    /// [`AppState::Unknown`].
    pub fn state(&self) -> AppState {
        self.state.as_enum().map_or(AppState::Unknown, |state| *state)
    }

    /// How the module reaches the app; one this side does not know reads as [`Transport::Unknown`].
    pub fn transport(&self) -> Transport {
        self.transport.as_enum().map_or(Transport::Unknown, |transport| *transport)
    }
}

/// An app's lifecycle state (SPEC R15): [`AppDescriptor::state`], and the `from`/`to` of an
/// [`EventKind::AppStateChanged`](crate::EventKind::AppStateChanged) payload (by name, `"running"`).
///
/// States may grow, so the descriptor carries abi_stable's `NonExhaustive` ([`AppState_NE`]), as
/// [`ErrorCode`](crate::ErrorCode) does: a minor version may append a state (before `Unknown`'s
/// discriminant), and a side that does not know it reads [`AppState::Unknown`].
#[repr(u8)]
#[derive(StableAbi, Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[sabi(kind(WithNonExhaustive(size = [u8; 8], align = 1, traits(Debug, Display, Clone, PartialEq, Eq))))]
#[serde(rename_all = "camelCase")]
pub enum AppState {
    Discovered = 0,
    Validated = 1,
    Loaded = 2,
    Running = 3,
    Stopped = 4,
    Failed = 5,
    Disabled = 6,
    /// A state this interface version does not know.
    #[default]
    #[serde(other)]
    Unknown = 255,
}

/// How the module reaches an app: [`AppDescriptor::transport`], a manifest's `transport`.
/// Carried as [`Transport_NE`] for the same reason as [`AppState`].
#[repr(u8)]
#[derive(StableAbi, Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[sabi(kind(WithNonExhaustive(size = [u8; 8], align = 1, traits(Debug, Display, Clone, PartialEq, Eq))))]
#[serde(rename_all = "camelCase")]
pub enum Transport {
    Stdio = 0,
    Http = 1,
    /// None (a standard MCP server's descriptor), or one this interface version does not know.
    #[default]
    #[serde(other)]
    Unknown = 255,
}

impl AppState {
    /// Every state this interface version knows (not [`AppState::Unknown`]).
    pub const KNOWN: [AppState; 7] = [
        AppState::Discovered,
        AppState::Validated,
        AppState::Loaded,
        AppState::Running,
        AppState::Stopped,
        AppState::Failed,
        AppState::Disabled,
    ];

    /// Reads a state's name (unknown names are [`AppState::Unknown`]).
    pub fn of(name: &str) -> AppState {
        AppState::KNOWN.into_iter().find(|state| state.as_str() == name).unwrap_or_default()
    }

    /// The state's name (`"running"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            AppState::Discovered => "discovered",
            AppState::Validated => "validated",
            AppState::Loaded => "loaded",
            AppState::Running => "running",
            AppState::Stopped => "stopped",
            AppState::Failed => "failed",
            AppState::Disabled => "disabled",
            AppState::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Transport {
    /// Reads a transport's name, e.g. a manifest's `transport` (unknown names are
    /// [`Transport::Unknown`]).
    pub fn of(name: &str) -> Transport {
        [Transport::Stdio, Transport::Http].into_iter().find(|t| t.as_str() == name).unwrap_or_default()
    }

    /// The transport's name (`"http"`); empty for [`Transport::Unknown`], as a descriptor without one said.
    pub const fn as_str(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Http => "http",
            Transport::Unknown => "",
        }
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One tool an app offers, as seen by the tool bridge.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct ToolDescriptor {
    /// `mcpapp:{appId}`.
    pub provider_id: RString,
    pub app_id: RString,
    /// The app's own name for the tool (what `/apps/mcp/{appId}` speaks).
    pub name: RString,
    /// `toolNamePrefix + name` (what the model sees).
    pub qualified_name: RString,
    pub description: RString,
    /// The tool's JSON input schema, always a JSON object schema.
    pub input_schema_json: RString,
    /// Empty when the tool declares none.
    pub output_schema_json: RString,
    /// The tool's `_meta` as JSON, `{}` when absent.
    pub meta_json: RString,
    /// `_meta.ui.visibility` contains `model` (or is absent).
    pub visible_to_model: bool,
    /// `_meta.ui.visibility` contains `app` (or is absent).
    pub visible_to_app: bool,
    /// The UI this tool is linked to; empty when none.
    pub ui_resource_uri: RString,
    /// Anything added later (annotations, title…), as a JSON object.
    pub extra_json: RString,
}

/// Registry keys of standard MCP servers (`Plugins.Mcp`, the workspace's): `mcp:{id}`, which is
/// also their tool provider id. App ids cannot contain `:`, so the two never collide.
pub const MCP_SERVER_KEY_PREFIX: &str = "mcp:";
