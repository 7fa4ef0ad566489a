//! What the module describes to the host: its apps and their tools.

use abi_stable::{
    std_types::{RString, RVec},
    StableAbi,
};

/// One app as the registry sees it.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct AppDescriptor {
    pub id: RString,
    pub name: RString,
    pub version: RString,
    /// `discovered`, `validated`, `loaded`, `running`, `stopped`, `failed` or `disabled`.
    pub state: RString,
    /// `stdio` or `http`.
    pub transport: RString,
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
