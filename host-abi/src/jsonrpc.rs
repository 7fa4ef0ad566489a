//! The JSON-RPC vocabulary both sides write into the messages they build: the protocol version
//! and the error codes. Constants only; each side keeps its own builders (the module's forwarding
//! answers, the host's `call.respond` error objects and its request gate), which take their codes
//! from here so the two never drift apart.
//!
//! Where a side builds an rmcp `ErrorData`, rmcp's `ErrorCode` constants name the same standard
//! codes (a unit test of the module checks that they agree).

/// The `jsonrpc` member of every message.
pub const VERSION: &str = "2.0";

/// The body is not JSON.
pub const PARSE_ERROR: i32 = -32700;
/// The JSON is not one valid JSON-RPC request (no method, a batch, `jsonrpc` not "2.0"…).
pub const INVALID_REQUEST: i32 = -32600;
/// The method does not exist or is not offered here.
pub const METHOD_NOT_FOUND: i32 = -32601;
pub const INVALID_PARAMS: i32 = -32602;
pub const INTERNAL_ERROR: i32 = -32603;

/// MCP (2026-07-28): the request needs a client capability the client did not declare.
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i32 = -32021;

/// A refusal of the HTTP transport rather than of the message (no SSE in `Accept`, a method the
/// endpoint does not serve, a session id missing or unknown), as the official TypeScript SDK's
/// server writes them: the HTTP status tells which.
pub const TRANSPORT_REFUSED: i32 = -32000;

/// The gateway's own (server-error range): the upstream request timed out or the app was lost
/// mid-call.
pub const UPSTREAM_FAILED: i32 = -32001;
/// The gateway's own (server-error range): the app is unknown or not Running. Not -32002:
/// that is MCP's "resource not found", which rmcp's server turns into -32602 for a 2026-07-28
/// client, so a client could not tell an app that is down from a URI it got wrong.
pub const APP_UNAVAILABLE: i32 = -32010;
