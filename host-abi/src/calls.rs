//! Calls the host makes through the module: model-side tool calls, raw MCP messages forwarded to
//! an app, and the relaying of what an app does during one.

use abi_stable::{std_types::RString, StableAbi};

/// A model-side tool call.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct ToolCallRequest {
    /// Chosen by the host, unique among its calls in flight; used by [`ModuleInstance::cancel`](crate::ModuleInstance::cancel).
    pub call_id: u64,
    pub app_id: RString,
    /// The app's own (unprefixed) tool name.
    pub tool_name: RString,
    /// The arguments as a JSON object's text: the host read and checked them where the call came
    /// in (`gateway-host/src/tools/arguments.rs`); the module only decodes them to send them on.
    pub arguments_json: RString,
    /// `_meta` to send with the call as a JSON object, or empty.
    pub meta_json: RString,
    pub extra_json: RString,
}

/// A model-side tool call's answer: the app's result as it sent it, or why there is none. The
/// module does not shape it for a model: the host does, in one place
/// (`gateway-host/src/tools/model_view.rs`, SPEC R20).
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct ToolCallOutcome {
    /// The call got no result (`raw_result_json` is empty): `text` says why.
    pub is_error: bool,
    /// Why the call got no result (`Error: …`); empty with a result.
    pub text: RString,
    /// Unused since the host shapes results (always empty); kept so the layout stays 1.x's.
    pub structured_content_json: RString,
    /// The UI resource the tool is linked to (the module's catalog knows it); empty when none.
    pub ui_resource_uri: RString,
    /// The complete MCP `CallToolResult` as the app sent it; empty when the call got no result.
    pub raw_result_json: RString,
    pub extra_json: RString,
}

/// A raw MCP JSON-RPC message from a browser, to be forwarded to one app's upstream session.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct ForwardRequest {
    pub call_id: u64,
    pub app_id: RString,
    /// One JSON-RPC request or notification, as received.
    pub message_json: RString,
    /// The browser's `?sessionId=`, empty when none.
    pub session_id: RString,
    pub extra_json: RString,
}

/// The answer to a [`ForwardRequest`].
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct ForwardResponse {
    /// One JSON-RPC response (result or error); empty for a notification.
    pub message_json: RString,
    pub extra_json: RString,
}

/// What a [`ForwardRequest`]'s `extra_json` may say besides the relay opt-in.
pub mod forward {
    /// `{"anyProvider": true}`: the request may go to a standard MCP server too, not only to an
    /// MCP App (the gateway's own `/mcp` multiplexes both; a browser's `/apps/mcp/{appId}` only
    /// reaches MCP Apps). A module without it answers such a request "Unknown McpApp".
    pub const EXTRA_ANY_PROVIDER: &str = "anyProvider";
}

/// Relaying what an app does during a request back to the client that made it (SPEC R42).
///
/// A host opts a call in by putting `{"relay": {"clientCapabilities": {…}}}` into the
/// `extra_json` of its [`ToolCallRequest`] or [`ForwardRequest`] (the caller's progress token
/// travels where MCP puts it: `_meta.progressToken` of the request). The module then reports the
/// call's notifications and server-to-client requests as [`event_kind::CALL_NOTIFICATION`](crate::event_kind::CALL_NOTIFICATION) and
/// [`event_kind::CALL_REQUEST`](crate::event_kind::CALL_REQUEST) events, and takes the answers through
/// `invoke(RESPOND, {"callId", "key", "result"} | {"callId", "key", "error": {code, message, data?}})`,
/// which answers `{"delivered": bool}`. Requests of a call that did not opt in, or whose client
/// lacks the capability, are refused by the module with a JSON-RPC error the app sees.
pub mod relay {
    /// The `invoke` method that answers a [`event_kind::CALL_REQUEST`](crate::event_kind::CALL_REQUEST).
    pub const RESPOND: &str = "call.respond";
    /// The key in a request's `extra_json` that opts it into relaying.
    pub const EXTRA_KEY: &str = "relay";
    /// The client capability each server-to-client request needs: a caller that did not declare
    /// it cannot be asked (the module answers the app with an error; a 2026-07-28 endpoint
    /// refuses the call with "missing required client capability").
    pub const REQUEST_CAPABILITIES: &[(&str, &str)] =
        &[("sampling/createMessage", "sampling"), ("elicitation/create", "elicitation"), ("roots/list", "roots")];
}
