//! Calls the host makes through the module: model-side tool calls, raw MCP messages forwarded to
//! an app, and the relaying of what an app does during one.

use abi_stable::{
    std_types::{ROption, RString, RVec},
    StableAbi,
};

/// A model-side tool call as `ModuleInstance::call_tool` takes it (2.0 hosts). The host calls
/// tools through [`AppRequest`] now; the module answers this as the `tools/call` it amounts to.
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

/// A client's request for one app (R32, R39, R46), as the host received and checked it.
///
/// The host owns HTTP and the JSON-RPC envelope (it parsed the message once, and answers it);
/// the module owns the app and the wire to it. So what crosses is the request's parts, with
/// `params` as the JSON text the module parses once, and the answer is the app's result or an
/// error ([`AppAnswer`]), never an envelope either side has to unpack.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct AppRequest {
    /// Chosen by the host, unique among its calls in flight; used by `ModuleInstance::cancel`.
    pub call_id: u64,
    /// The app (or, with `any_provider`, the standard MCP server `mcp:{id}`).
    pub app_id: RString,
    /// The JSON-RPC method, e.g. `tools/call`; the module refuses those it does not forward.
    pub method: RString,
    /// `params` as a JSON object's text; empty when the request had none.
    pub params_json: RString,
    /// The browser's `?sessionId=` (the MCP Apps spec has it put into a `tools/call`'s `_meta`);
    /// empty when none.
    pub session_id: RString,
    /// The gateway itself asks (its `/mcp`, a tool call for a model), not a browser: the request
    /// may go to a standard MCP server too, not only to an MCP App (`/mcp` multiplexes both; a
    /// browser's `/apps/mcp/{appId}` reaches MCP Apps only), and a `tools/call` may name a tool
    /// hidden from apps (the host has applied the visibility rules of its own caller).
    pub any_provider: bool,
    /// The call takes part in the relay ([`relay`]); `RNone` when nothing the app does during
    /// it goes back to a client.
    pub relay: ROption<RelayOptIn>,
}

/// A call's opt-in to the relay ([`relay`]): what its client can be asked.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct RelayOptIn {
    /// The client capabilities the caller declared, by name (`sampling`, `elicitation`, `roots`).
    pub client_capabilities: RVec<RString>,
}

/// A JSON-RPC error for the client: the app's own, as it sent it, or the module's about the
/// request (an unknown or stopped app, a method not forwarded, a lost call).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    pub code: i64,
    pub message: RString,
    /// The error's `data` as JSON text; empty when it has none.
    pub data_json: RString,
}

/// The answer to an [`AppRequest`]. A failure of the boundary itself (the module shutting
/// down, a contained panic) is the call's `AbiError` instead.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub enum AppAnswer {
    /// The app's `result`, as JSON text.
    Result(RString),
    Error(RpcError),
}

/// Relaying what an app does during a request back to the client that made it (SPEC R42).
///
/// A host opts a call in with [`AppRequest::relay`], or by putting
/// `{"relay": {"clientCapabilities": {…}}}` into the `extra_json` of its [`ToolCallRequest`] (the caller's progress token
/// travels where MCP puts it: `_meta.progressToken` of the request). The module then reports the
/// call's notifications and server-to-client requests as [`EventKind::CallNotification`](crate::EventKind::CallNotification) and
/// [`EventKind::CallRequest`](crate::EventKind::CallRequest) events, and takes the answers through
/// `invoke(RESPOND, {"callId", "key", "result"} | {"callId", "key", "error": {code, message, data?}})`,
/// which answers `{"delivered": bool}`. Requests of a call that did not opt in, or whose client
/// lacks the capability, are refused by the module with a JSON-RPC error the app sees.
pub mod relay {
    /// The `invoke` method that answers a [`EventKind::CallRequest`](crate::EventKind::CallRequest).
    pub const RESPOND: &str = "call.respond";
    /// The key in a request's `extra_json` that opts it into relaying.
    pub const EXTRA_KEY: &str = "relay";
    /// The client capability each server-to-client request needs: a caller that did not declare
    /// it cannot be asked (the module answers the app with an error; a 2026-07-28 endpoint
    /// refuses the call with "missing required client capability").
    pub const REQUEST_CAPABILITIES: &[(&str, &str)] =
        &[("sampling/createMessage", "sampling"), ("elicitation/create", "elicitation"), ("roots/list", "roots")];
}
