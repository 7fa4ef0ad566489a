//! The short way through `/apps/mcp/{appId}` (and `/mcp`) for the requests they carry most: a
//! `tools/call`, and the `resources/read` of an app's UI each time its frame opens, of the
//! 2026-07-28 revision or in an initialize-era session (issues 15 and 40).
//!
//! On the protocol library's path such a call is parsed into rmcp's types, served by a
//! per-request service, turned back into JSON for the module, and its answer parsed into a
//! `Value`, then into rmcp's result type, then serialised again. A relay needs none of that: the
//! gateway checks what it must, forwards the request and writes the app's result out as it came.
//! So a request that the protocol library would accept as it is, and that asks for nothing the
//! short way does not do, is answered here:
//!
//! - `POST`, no `Mcp-Session-Id`, `MCP-Protocol-Version: 2026-07-28` once, an `Accept` with both
//!   JSON and SSE, a JSON `Content-Type`;
//! - `Mcp-Method: tools/call` or `resources/read` and `Mcp-Name` (once each, matching the body,
//!   the tool's name or the URI printable ASCII), no `Mcp-Param-*` header (those are checked
//!   against a tool's schema by rmcp);
//! - the body (already through `jsonrpc_gate`) a request with an integer or string id; a call's
//!   `params` with a string `name` and an object `arguments` (or none), a read's with a string
//!   `uri` and nothing else but `_meta`; and the revision's `_meta` envelope
//!   whole (version `2026-07-28`, a readable `clientInfo` and `clientCapabilities`), without a
//!   progress token, a log level, a task request or a retry (`inputResponses`, `requestState`);
//! - a client that did not declare the tasks extension, on an endpoint that serves 2026-07-28
//!   (its call of a tool that requires tasks is refused here as on rmcp's path:
//!   [`Tasks::as_task_for`]).
//!
//! In an initialize-era session (what the official SDKs' clients open by default) the same
//! call, with:
//!
//! - `Mcp-Session-Id` of a session the short way knows (`known_sessions.rs`: its client said
//!   `initialized` and declared none of sampling, elicitation, roots, tasks, so nothing can be
//!   asked of it during a call), an `MCP-Protocol-Version` (if sent) of an earlier revision;
//! - a `_meta` (if any) without a progress token or a 2026-07-28 envelope key.
//!
//! The answer is JSON (rmcp answers a session's request as an SSE stream; the transport allows
//! either); the app's notifications for the call go through the session's peer, so they take
//! the stream rmcp gives them, and the result has no `resultType` and no cache hints, as rmcp
//! writes it for such a client. A client's `notifications/cancelled` for the call and the
//! session's end cancel it.
//!
//! Anything else goes to rmcp untouched. What the call does is the same on both paths, because
//! it runs the same way: the module's forward with the relay ([`mcp_relay::drive`]), the same
//! parked calls for `input_required` rounds, the same metrics. The answer is JSON; if the app
//! sends a notification for the call before its result, the reply turns into an SSE stream, as
//! rmcp's does. A call's result is the app's own text with `resultType` added when it lacks one,
//! after checking, in the one parse of it on this side, that it reads as a `CallToolResult`
//! (else the same error as rmcp's path): [`answer::tool_call_reply`]. A read's result is
//! written as rmcp writes it, its contents' text as the app wrote it: [`answer::read_resource_reply`].
//! An error is what rmcp's server gives, a resource not found included (-32602 for a
//! 2026-07-28 client, the app's -32002 in a session).

use std::convert::Infallible;
use std::sync::Arc;

use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use host_abi::abi_stable::std_types::RSome;
use host_abi::{jsonrpc, AppRequest};
use rmcp::model::{ClientCapabilities, ErrorCode, Implementation, ProtocolVersion, ServerJsonRpcMessage, ServerNotification, ServerRequest};
use rmcp::service::{Peer, RoleServer};
use rmcp::ErrorData;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::answer::{self, Forwarded};
use super::endpoint_config::Compatibility;
use super::known_sessions::{KnownSession, KnownSessions, SessionCall};
use super::mcp_relay::{self, Caller, Outcome};
use crate::metrics::{Metrics, ProxiedOutcome};
use crate::module::host::ModuleHost;
use crate::module::relay::{error_object, Parked};
use crate::tools::{arguments, ToolRegistry};
use super::mcp_tasks::Tasks;

const MODERN: &str = "2026-07-28";
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";

/// The short way of `/apps/mcp/{appId}`, sharing the endpoint's parked calls and metrics.
#[derive(Clone)]
pub struct PassThrough {
    pub module: Arc<ModuleHost>,
    pub compatibility: Compatibility,
    pub parked: Arc<Parked<Forwarded>>,
    pub metrics: Arc<Metrics>,
    pub shutdown: CancellationToken,
    /// The initialize-era sessions whose calls it may answer.
    pub sessions: Arc<KnownSessions>,
    /// The tools the module reports, for what each declared of tasks (`execution`).
    pub tools: Arc<ToolRegistry>,
}

/// The methods the short way answers, each with the member of `params` that names what it is
/// for (and that `Mcp-Name` carries): the tool of a call, the resource of a read.
const METHODS: [(&str, &str); 2] = [(TOOLS_CALL, "name"), (RESOURCES_READ, "uri")];
pub const TOOLS_CALL: &str = "tools/call";
pub const RESOURCES_READ: &str = "resources/read";

/// A `tools/call` or `resources/read` the short way can answer.
pub struct Eligible {
    pub id: Value,
    /// [`TOOLS_CALL`] or [`RESOURCES_READ`].
    pub method: &'static str,
    /// The tool's name, or the resource's URI.
    pub name: String,
    /// `params` without the revision's envelope (`_meta` keeps the request's own keys).
    pub params: Map<String, Value>,
    pub capabilities: Map<String, Value>,
}

impl PassThrough {
    /// The answer to `message` (the gated body of the request) if it goes the short way; `None`
    /// leaves the request to rmcp.
    /// The message is taken (left empty) when the short way answers it, and left as it is
    /// otherwise.
    pub async fn request(&self, method: &Method, headers: &HeaderMap, message: &mut Value, app_id: &str, session_id: &str) -> Option<Response> {
        let Accepted { request, client, tracked } = accept(self.compatibility, &self.sessions, &self.shutdown, method, headers, message)?;
        let Eligible { id, method, name, params, capabilities } = request;
        let modern = client.modern;
        if method == TOOLS_CALL {
            // Its client declared no tasks: a tool that requires them refuses it, as on rmcp's path.
            let tool = self.tools.module_tool(app_id, &name);
            if let Err(e) = Tasks::as_task_for(false, tool.as_ref().and_then(|t| t.extra.get("execution"))) {
                self.metrics.proxied_request(app_id, method).finish(ProxiedOutcome::Error);
                return Some(Message::error(&id, e, modern).into_json());
            }
        }
        let (app_id, session_id) = (app_id.to_string(), session_id.to_string());
        let (module, parked, metrics) = (self.module.clone(), self.parked.clone(), self.metrics.clone());
        let relay = mcp_relay::relay_opt_in_for(&capabilities, modern);
        let answer = respond(capabilities, client, move |caller| async move {
            let _tracked = tracked;
            let counted = metrics.proxied_request(&app_id, method);
            let call_id = module.next_call_id();
            let forward = AppRequest {
                session_id: session_id.into(),
                relay: RSome(relay),
                ..mcp_relay::app_request(call_id, &app_id, method, &params)
            };
            let forwarding = module.clone();
            let call = module.relayed(call_id, async move { forwarding.forward(forward).await });
            let outcome = mcp_relay::drive(call, &caller, &module, &parked).await;
            let (reply, counted_as) = match outcome {
                Ok(Outcome::Done(forwarded)) if method == RESOURCES_READ => match answer::read_resource_reply(&app_id, &id, forwarded, modern, None) {
                    Ok(body) => (Message::ok(body), ProxiedOutcome::Ok),
                    Err(e) => (Message::error(&id, e, modern), ProxiedOutcome::Error),
                },
                Ok(Outcome::Done(forwarded)) => match answer::tool_call_reply(&app_id, &id, forwarded, modern) {
                    Ok((body, is_error)) => (Message::ok(body), if is_error { ProxiedOutcome::ToolError } else { ProxiedOutcome::Ok }),
                    Err(e) => (Message::error(&id, e, modern), ProxiedOutcome::Error),
                },
                Ok(Outcome::InputRequired(input)) => (Message::input_required(&id, input), ProxiedOutcome::InputRequired),
                Err(_) if caller.cancelled.is_cancelled() && !modern => (Message::none(), ProxiedOutcome::Cancelled),
                Err(e) if caller.cancelled.is_cancelled() => (Message::error(&id, e, modern), ProxiedOutcome::Cancelled),
                Err(e) => (Message::error(&id, e, modern), ProxiedOutcome::Error),
            };
            counted.finish(counted_as);
            reply
        });
        Some(answer.await)
    }
}

/// A request the short way takes: the call, who it is for, and its entry in its session.
pub(super) struct Accepted {
    pub request: Eligible,
    pub client: Client,
    /// Held while the call runs (see [`KnownSessions::call`]).
    pub tracked: Option<SessionCall>,
}

/// The request, if the short way takes it: a 2026-07-28 one ([`eligible`]) or one in a known
/// initialize-era session ([`eligible_in_session`]).
pub(super) fn accept(
    compatibility: Compatibility,
    sessions: &KnownSessions,
    shutdown: &CancellationToken,
    method: &Method,
    headers: &HeaderMap,
    message: &mut Value,
) -> Option<Accepted> {
    if let Some(request) = eligible(compatibility, method, headers, message) {
        return Some(Accepted { request, client: Client { modern: true, cancelled: shutdown.clone(), peer: None }, tracked: None });
    }
    let (request, session) = eligible_in_session(sessions, method, headers, message)?;
    let peer = session.peer.clone();
    let tracked = sessions.call(session, &request.id);
    let client = Client { modern: false, cancelled: tracked.cancelled.clone(), peer };
    Some(Accepted { request, client, tracked: Some(tracked) })
}

/// Who a short-way call is for.
pub(super) struct Client {
    /// A 2026-07-28 client; else one in an initialize-era session ([`KnownSessions`]).
    pub modern: bool,
    /// Stops the call: the gateway's shutdown, or the session call's own token.
    pub cancelled: CancellationToken,
    /// The session's peer in rmcp's server, which notifications for the client go through.
    pub peer: Option<Peer<RoleServer>>,
}

/// Runs the call `work` makes for its client (the [`Direct`] caller it is given), and answers
/// with its reply as JSON when nothing comes before it, else as an SSE stream from the first
/// notification on. Dropping the answer (the client left) drops the call, which cancels it.
pub(super) async fn respond<F>(capabilities: Map<String, Value>, client: Client, work: impl FnOnce(Direct) -> F) -> Response
where
    F: std::future::Future<Output = Message> + Send + 'static,
{
    let (sender, mut receiver) = mpsc::unbounded_channel();
    let Client { modern, cancelled, peer } = client;
    let caller = Direct { modern, capabilities, messages: sender.clone(), cancelled, peer };
    let mut work = Box::pin(work(caller));
    let first = tokio::select! {
        biased;
        reply = &mut work => return reply.into_json(),
        Some(first) = receiver.recv() => first,
    };
    let task = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
        let reply = work.await;
        let _ = sender.send(reply);
    }));
    let frames = futures::stream::unfold((Some(first), receiver, task), |(first, mut receiver, task)| async move {
        let next = match first {
            Some(first) => first,
            None => receiver.recv().await?,
        };
        if next.body.is_empty() {
            return None;
        }
        Some((Ok::<_, Infallible>(Event::default().data(next.body)), (None, receiver, task)))
    });
    Sse::new(frames).keep_alive(KeepAlive::default()).into_response()
}

/// One JSON-RPC message of the reply, serialised, with the HTTP status it would have alone.
pub(super) struct Message {
    status: StatusCode,
    body: String,
}

impl Message {
    /// A result response, already serialised.
    pub fn ok(body: String) -> Message {
        Message { status: StatusCode::OK, body }
    }

    /// An error response, as rmcp's server gives it: for a 2026-07-28 request (`modern`) with
    /// the status of its code, and -32602 where the error was -32002 (MCP's old "resource not
    /// found", SEP-2164); in an initialize-era session an error is a message like any other (200).
    pub fn error(id: &Value, mut error: ErrorData, modern: bool) -> Message {
        if modern && error.code == ErrorCode::RESOURCE_NOT_FOUND {
            error.code = ErrorCode::INVALID_PARAMS;
        }
        let status = if modern { status_of(&error) } else { StatusCode::OK };
        Message::of(&ServerJsonRpcMessage::error(error, serde_json::from_value(id.clone()).ok()), status)
    }

    /// The revision's `input_required` result (the call waits, parked, for the retry).
    pub fn input_required(id: &Value, input: rmcp::model::InputRequiredResult) -> Message {
        Message::ok(super::answer::response_text(id, &input))
    }

    fn of(message: &ServerJsonRpcMessage, status: StatusCode) -> Message {
        let body = serde_json::to_string(message).unwrap_or_else(|e| {
            json!({ "jsonrpc": jsonrpc::VERSION, "id": null, "error": error_object(jsonrpc::INTERNAL_ERROR, format!("unserialisable reply: {e}")) }).to_string()
        });
        Message { status, body }
    }

    /// No message at all: what a cancelled request of a session gets (the transport says no
    /// response is sent for it; rmcp ends the request's stream without one). The reply is then
    /// an SSE stream that ends at once.
    pub fn none() -> Message {
        Message { status: StatusCode::OK, body: String::new() }
    }

    fn into_json(self) -> Response {
        if self.body.is_empty() {
            return (self.status, [(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"))], "").into_response();
        }
        (self.status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], self.body).into_response()
    }
}

/// The client of a short-way call: of the 2026-07-28 revision (`modern`) or in an
/// initialize-era session that can be asked nothing ([`KnownSessions`]); it declared
/// `capabilities`; what the app sends for the call goes into `messages`.
pub(super) struct Direct {
    modern: bool,
    capabilities: Map<String, Value>,
    messages: mpsc::UnboundedSender<Message>,
    /// The gateway's shutdown, or the session call's own token (see [`KnownSessions`]).
    pub cancelled: CancellationToken,
    /// A session's peer: notifications go through it (rmcp picks their stream), not `messages`.
    peer: Option<Peer<RoleServer>>,
}

impl Caller for Direct {
    fn modern(&self) -> bool {
        self.modern
    }

    fn declares(&self, capability: &str) -> bool {
        self.capabilities.get(capability).is_some_and(|v| !v.is_null())
    }

    fn cancelled(&self) -> impl std::future::Future<Output = ()> + Send {
        self.cancelled.cancelled()
    }

    async fn notify(&self, notification: ServerNotification) {
        if let Some(peer) = &self.peer {
            if let Err(e) = peer.send_notification(notification).await {
                tracing::debug!("cannot pass a notification to the client: {e}");
            }
            return;
        }
        let _ = self.messages.send(Message::of(&ServerJsonRpcMessage::notification(notification), StatusCode::OK));
    }

    /// Never called: a 2026-07-28 client is not asked, it retries (see [`mcp_relay::drive`]);
    /// a session client on the short way declared nothing it could be asked (the module answers
    /// such a question of the app itself).
    async fn ask(&self, method: &str, _request: ServerRequest) -> Result<Value, Value> {
        Err(error_object(jsonrpc::INTERNAL_ERROR, format!("this client cannot be asked '{method}' during its request")))
    }
}

/// The one value of header `name`, if it has exactly one and it is text.
fn single<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    values.next().is_none().then(|| value.to_str().ok()).flatten()
}

fn accepts_json_and_sse(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(header::ACCEPT) {
        for item in value.to_str().unwrap_or_default().split(',') {
            let essence = item.split(';').next().unwrap_or_default().trim();
            json |= essence.eq_ignore_ascii_case("application/json");
            sse |= essence.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && sse
}

/// A POST the Streamable HTTP transport takes as it is: JSON in, JSON or SSE accepted.
fn plain_post(method: &Method, headers: &HeaderMap) -> bool {
    let json_body = single(headers, header::CONTENT_TYPE.as_str())
        .is_some_and(|content_type| content_type.split(';').next().unwrap_or_default().trim().eq_ignore_ascii_case("application/json"));
    method == Method::POST && json_body && accepts_json_and_sse(headers)
}

/// The parts of a plain request of the short way's: its method, what it is for (printable
/// ASCII, as `Mcp-Name` carries it as it is) and `params`; an id that is an integer or a
/// string. A call with object `arguments` (or none) and no task request or retry (`task`,
/// `inputResponses`, `requestState`); a read with nothing but `uri` and `_meta` (rmcp's
/// path drops any other member, and a retry is rmcp's).
fn plain_request(message: &Value) -> Option<(&'static str, &str, &Map<String, Value>)> {
    let request = message.as_object()?;
    if request.get("jsonrpc")?.as_str()? != jsonrpc::VERSION {
        return None;
    }
    let asked = request.get("method")?.as_str()?;
    let (method, member) = METHODS.into_iter().find(|(method, _)| *method == asked)?;
    let id = request.get("id")?;
    if !(id.is_string() || id.is_i64() || id.is_u64()) || request.keys().any(|k| !matches!(k.as_str(), "jsonrpc" | "id" | "method" | "params")) {
        return None;
    }
    let params = request.get("params")?.as_object()?;
    let name = params.get(member)?.as_str()?;
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    let plain = match method {
        TOOLS_CALL => {
            arguments::are_plain(params, None) && !["task", "inputResponses", "requestState"].iter().any(|k| params.contains_key(*k))
        }
        _ => params.keys().all(|k| k == "uri" || k == "_meta"),
    };
    plain.then_some((method, name, params))
}

/// The request, if the short way may answer it as a 2026-07-28 one (see the module docs).
pub fn eligible(compatibility: Compatibility, method: &Method, headers: &HeaderMap, message: &mut Value) -> Option<Eligible> {
    if !compatibility.versions().iter().any(|v| v.as_str() == MODERN) {
        return None;
    }
    if headers.contains_key("mcp-session-id") || !plain_post(method, headers) {
        return None;
    }
    if single(headers, "mcp-protocol-version")? != MODERN {
        return None;
    }
    if headers.keys().any(|name| name.as_str().starts_with("mcp-param-")) {
        return None;
    }
    let (method, name, params) = plain_request(message)?;
    if single(headers, "mcp-method")? != method || single(headers, "mcp-name")? != name {
        return None;
    }
    let meta = params.get("_meta")?.as_object()?;
    if meta.get(META_VERSION)?.as_str()? != MODERN || meta.contains_key("progressToken") || meta.contains_key(META_LOG_LEVEL) {
        return None;
    }
    // Read by reference: no copy of either just to check that it reads.
    Implementation::deserialize(meta.get(META_CLIENT_INFO)?).ok()?;
    let declared = meta.get(META_CAPABILITIES)?;
    let typed = ClientCapabilities::deserialize(declared).ok()?;
    if typed.supports_tasks() || !declared.is_object() {
        return None;
    }
    // Taken out of the message, not copied: the envelope's keys leave `_meta`, the rest goes on.
    let (id, name, mut params) = take_request(message, method);
    let mut meta = match params.remove("_meta") {
        Some(Value::Object(meta)) => meta,
        _ => Map::new(),
    };
    let capabilities = match meta.remove(META_CAPABILITIES) {
        Some(Value::Object(capabilities)) => capabilities,
        _ => Map::new(),
    };
    meta.remove(META_VERSION);
    meta.remove(META_CLIENT_INFO);
    if !meta.is_empty() {
        params.insert("_meta".into(), Value::Object(meta));
    }
    Some(Eligible { id, method, name, params, capabilities })
}

/// The id, name (or URI) and params of a message [`plain_request`] accepted, taken out of it.
fn take_request(message: &mut Value, method: &str) -> (Value, String, Map<String, Value>) {
    let Some(request) = message.as_object_mut() else { return (Value::Null, String::new(), Map::new()) };
    let id = request.remove("id").unwrap_or(Value::Null);
    let params = match request.remove("params") {
        Some(Value::Object(params)) => params,
        _ => Map::new(),
    };
    let member = METHODS.iter().find(|(m, _)| *m == method).map_or("name", |(_, member)| member);
    let name = params.get(member).and_then(Value::as_str).unwrap_or_default().to_string();
    (id, name, params)
}

/// The request, if the short way may answer it in a known initialize-era session: the session
/// ([`KnownSessions`]), an `MCP-Protocol-Version` (if sent) of a revision before 2026-07-28 (so
/// no `Mcp-*` request headers apply), and a `_meta` (if any) without a progress token or a key
/// of the 2026-07-28 envelope. rmcp would take anything else differently.
pub fn eligible_in_session(sessions: &KnownSessions, method: &Method, headers: &HeaderMap, message: &mut Value) -> Option<(Eligible, Arc<KnownSession>)> {
    if !plain_post(method, headers) {
        return None;
    }
    let session = sessions.get(single(headers, "mcp-session-id")?)?;
    if headers.contains_key("mcp-protocol-version") {
        let version = single(headers, "mcp-protocol-version")?;
        if version >= MODERN || !ProtocolVersion::KNOWN_VERSIONS.iter().any(|v| v.as_str() == version) {
            return None;
        }
    }
    let (method, _, params) = plain_request(message)?;
    if let Some(meta) = params.get("_meta") {
        let meta = meta.as_object()?;
        if meta.keys().any(|k| k == "progressToken" || k.starts_with("io.modelcontextprotocol/")) {
            return None;
        }
    }
    let (id, name, params) = take_request(message, method);
    let request = Eligible { id, method, name, params, capabilities: session.capabilities.clone() };
    Some((request, session))
}

/// The HTTP status of a 2026-07-28 error reply, as rmcp gives it.
fn status_of(error: &ErrorData) -> StatusCode {
    match error.code {
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
        ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(headers: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            map.append(axum::http::HeaderName::from_static(k), v.parse().unwrap());
        }
        map
    }

    const HEADERS: &[(&str, &str)] = &[
        ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "echo"),
    ];

    fn body() -> Value {
        json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "echo", "arguments": { "text": "x" }, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": { "name": "t", "version": "1" },
            "io.modelcontextprotocol/clientCapabilities": { "elicitation": {} },
            "app/own": 5,
        } } })
    }

    const COMPATIBILITY: Compatibility = Compatibility { enable_discovery_first: true, force_legacy_initialize: false };

    #[test]
    fn the_envelope_stays_and_the_rest_of_meta_goes_on() {
        let e = eligible(COMPATIBILITY, &Method::POST, &parts(HEADERS), &mut body()).expect("eligible");
        assert_eq!(Value::Object(e.params), json!({ "name": "echo", "arguments": { "text": "x" }, "_meta": { "app/own": 5 } }));
        assert!(e.capabilities.contains_key("elicitation"));
    }

    #[test]
    fn anything_unusual_goes_to_the_protocol_library() {
        let mut headers = HEADERS.to_vec();
        headers.retain(|(k, _)| *k != "mcp-name");
        assert!(eligible(COMPATIBILITY, &Method::POST, &parts(&headers), &mut body()).is_none(), "no Mcp-Name");
        let mut headers = HEADERS.to_vec();
        headers.push(("mcp-session-id", "s"));
        assert!(eligible(COMPATIBILITY, &Method::POST, &parts(&headers), &mut body()).is_none(), "a session");
        let mut headers = HEADERS.to_vec();
        headers.push(("mcp-param-x", "1"));
        assert!(eligible(COMPATIBILITY, &Method::POST, &parts(&headers), &mut body()).is_none(), "a parameter header");
        let legacy = Compatibility { enable_discovery_first: true, force_legacy_initialize: true };
        assert!(eligible(legacy, &Method::POST, &parts(HEADERS), &mut body()).is_none(), "an endpoint without 2026-07-28");
        type Change = Box<dyn Fn(&mut Value)>;
        let variants: Vec<Change> = vec![
            Box::new(|b| b["params"]["_meta"]["progressToken"] = json!(1)),
            Box::new(|b| b["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2025-11-25")),
            Box::new(|b| b["params"]["_meta"]["io.modelcontextprotocol/clientInfo"] = json!("x")),
            Box::new(|b| b["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!("debug")),
            Box::new(|b| b["params"]["requestState"] = json!("s")),
            Box::new(|b| b["params"]["task"] = json!({})),
            Box::new(|b| b["params"]["arguments"] = json!([1])),
            Box::new(|b| b["params"]["name"] = json!("other")),
            Box::new(|b| b["id"] = json!(1.5)),
            Box::new(|b| b["method"] = json!("tools/list")),
        ];
        for (i, change) in variants.iter().enumerate() {
            let mut b = body();
            change(&mut b);
            let before = b.clone();
            assert!(eligible(COMPATIBILITY, &Method::POST, &parts(HEADERS), &mut b).is_none(), "variant {i}: {b}");
            assert_eq!(b, before, "variant {i}: a message left to rmcp is left as it was");
        }
    }
}
