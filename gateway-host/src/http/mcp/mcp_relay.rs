//! Running a relayed call (SPEC R42) for one request of an MCP client of the gateway — the one
//! way both `/apps/mcp/{appId}` and `/mcp` do it, so the relay rules cannot drift apart:
//!
//! - the app's notifications for the call (progress, log messages) go to the client as they come;
//! - the app's questions (sampling, elicitation, roots) go to an initialize-era client as requests
//!   on the request's stream; a 2026-07-28 client gets the revision's `input_required` result
//!   and answers by retrying with `inputResponses` and the `requestState` it was given, while
//!   the call waits in [`Parked`];
//! - a 2026-07-28 client that did not declare the capability a sampling or elicitation question
//!   needs gets the call refused with "missing required client capability" (-32021); a roots
//!   question it cannot answer is declined to the app (see [`drive`]). Initialize-era clients keep
//!   their earlier rule: the module answers the app with an error, and the tool reports it;
//! - the client's cancel drops the call, which cancels it in the module and at the app;
//! - a graceful shutdown that stops waiting for calls ends the call with -32001 naming the
//!   shutdown, as the request's answer on its own stream (see [`drive`]).

use host_abi::abi_stable::std_types::{RNone, RSome, RString};
use host_abi::{jsonrpc, AppRequest, RelayOptIn};
use rmcp::model::{ClientCapabilities, InputRequest, InputRequiredResult, ProtocolVersion, ServerNotification, ServerRequest};
use rmcp::service::{RequestContext, RoleServer, ServiceError};
use rmcp::ErrorData;
use serde_json::{json, Map, Value};

use crate::module::host::ModuleHost;
use crate::module::relay::{error_object, Parked, RelayEvent, RelayedCall, Step};

/// How a relayed call ended for this request.
pub enum Outcome<T> {
    Done(T),
    /// The app asked something a 2026-07-28 client answers by retrying.
    InputRequired(InputRequiredResult),
}

/// `_meta` keys a 2026-07-28 client stamps on every request in place of the initialize
/// handshake. They describe the client's connection to the gateway; the upstream session is the
/// gateway's own, negotiated at its own revision, so they are never forwarded.
const ENVELOPE_META_KEYS: &[&str] = &[
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientInfo",
    "io.modelcontextprotocol/clientCapabilities",
    "io.modelcontextprotocol/logLevel",
];

/// Whether the request is of the 2026-07-28 revision (or newer).
pub fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    context.protocol_version().is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// The request's own `_meta` (progress token, app-defined keys) without the revision's envelope.
pub fn forwarded_meta(context: &RequestContext<RoleServer>) -> Map<String, Value> {
    let mut meta = match serde_json::to_value(&context.meta) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    for key in ENVELOPE_META_KEYS {
        meta.remove(*key);
    }
    meta
}

/// The request an app gets for a client's `method` with `params`, with the relay: the client's
/// own `_meta` kept (progress token, app-defined keys), the revision's envelope and retry fields
/// (`inputResponses`, `requestState`: the gateway's, not the app's) dropped.
pub fn forward_request(context: &RequestContext<RoleServer>, call_id: u64, app_id: &str, method: &str, params: Value) -> AppRequest {
    let mut params = match params {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    for key in ["_meta", "inputResponses", "requestState"] {
        params.remove(key);
    }
    let meta = forwarded_meta(context);
    if !meta.is_empty() {
        params.insert("_meta".into(), Value::Object(meta));
    }
    AppRequest { relay: RSome(relay_opt_in(context)), ..app_request(call_id, app_id, method, &params) }
}

/// A request for app `app_id` without the relay (a list, a subscription: nothing the app does
/// during it goes to a client); the fields a caller needs (`session_id`, `any_provider`, `relay`)
/// are set on the result.
pub fn app_request(call_id: u64, app_id: &str, method: &str, params: &Map<String, Value>) -> AppRequest {
    AppRequest {
        call_id,
        app_id: app_id.into(),
        method: method.into(),
        params_json: serde_json::to_string(params).unwrap_or_default().into(),
        session_id: RString::new(),
        any_provider: false,
        relay: RNone,
    }
}

/// The relay opt-in of a call, with what its client can be asked.
///
/// A 2026-07-28 client is offered every question so that the refusal is this module's (with the
/// revision's error) rather than the module's answer to the app; an initialize-era client's
/// declared capabilities go as they are.
pub fn relay_opt_in(context: &RequestContext<RoleServer>) -> RelayOptIn {
    let capabilities = match context.client_capabilities().map(serde_json::to_value) {
        Some(Ok(Value::Object(map))) => map,
        _ => Map::new(),
    };
    relay_opt_in_for(&capabilities, is_modern(context))
}

/// [`relay_opt_in`] for a client that declared `capabilities` (`modern`: 2026-07-28 or newer).
pub fn relay_opt_in_for(capabilities: &Map<String, Value>, modern: bool) -> RelayOptIn {
    let mut declared: Vec<RString> = capabilities.iter().filter(|(_, v)| !v.is_null()).map(|(k, _)| k.as_str().into()).collect();
    if modern {
        for (_, capability) in host_abi::relay::REQUEST_CAPABILITIES {
            if !declared.iter().any(|c| c.as_str() == *capability) {
                declared.push((*capability).into());
            }
        }
    }
    RelayOptIn { client_capabilities: declared.into() }
}

fn missing_capability(capability: &str) -> ErrorData {
    let required: ClientCapabilities = serde_json::from_value(json!({ capability: {} })).unwrap_or_default();
    ErrorData::missing_required_client_capability(required)
}

/// The client a relayed call runs for, as [`drive`] needs it: rmcp's request context on the
/// protocol library's path, the pass-through's own (`pass_through.rs`) on the fast one.
pub trait Caller: Sync {
    /// Whether the request is of the 2026-07-28 revision (or newer).
    fn modern(&self) -> bool;
    /// Whether the client declared `capability` (`sampling`, `elicitation`, `roots`).
    fn declares(&self, capability: &str) -> bool;
    /// Fires when the request is cancelled (by its client, or the gateway shutting down).
    fn cancelled(&self) -> impl std::future::Future<Output = ()> + Send;
    /// Passes one of the app's notifications for the call to the client.
    fn notify(&self, notification: ServerNotification) -> impl std::future::Future<Output = ()> + Send;
    /// Asks an initialize-era client `request`: its result, or its JSON-RPC error object.
    fn ask(&self, method: &str, request: ServerRequest) -> impl std::future::Future<Output = Result<Value, Value>> + Send;
}

impl Caller for RequestContext<RoleServer> {
    fn modern(&self) -> bool {
        is_modern(self)
    }

    fn declares(&self, capability: &str) -> bool {
        let declared = self.client_capabilities().and_then(|c| serde_json::to_value(c).ok()).unwrap_or(Value::Null);
        declared.get(capability).is_some_and(|v| !v.is_null())
    }

    fn cancelled(&self) -> impl std::future::Future<Output = ()> + Send {
        self.ct.cancelled()
    }

    async fn notify(&self, notification: ServerNotification) {
        if let Err(e) = self.peer.send_notification(notification).await {
            tracing::debug!("cannot pass a notification to the client: {e}");
        }
    }

    async fn ask(&self, method: &str, request: ServerRequest) -> Result<Value, Value> {
        match self.peer.send_request(request).await {
            Ok(result) => serde_json::to_value(result).map_err(|e| error_object(jsonrpc::INTERNAL_ERROR, e.to_string())),
            Err(ServiceError::McpError(e)) => Err(serde_json::to_value(&e).unwrap_or_else(|_| error_object(jsonrpc::INTERNAL_ERROR, e.message))),
            Err(e) => Err(error_object(jsonrpc::INTERNAL_ERROR, format!("the client did not answer '{method}': {e}"))),
        }
    }
}

/// Runs a relayed call to its end (or to its next `input_required` round) for this request.
///
/// A graceful shutdown that stops waiting ([`ModuleHost::cut_off_calls`]) ends it with an error
/// naming the shutdown (-32001, the app's answer given up on), wherever it is — waiting on the
/// app, or on its client's answer to a question — and a call that starts after that ends so at
/// once. The error is the request's answer, written on the request's own stream like any
/// other, before the gateway closes its connections: without it, a call still running when the
/// streams end would leave its client a stream that ends with no response at all.
pub async fn drive<T: Send + 'static>(
    call: RelayedCall<T>,
    caller: &impl Caller,
    module: &ModuleHost,
    parked: &Parked<T>,
) -> Result<Outcome<T>, ErrorData> {
    tokio::select! {
        biased;
        reason = module.calls_cut_off() => Err(cut_off(reason)),
        // Dropped when cut off: dropping the call cancels it in the module, which tells the app.
        outcome = drive_to_end(call, caller, module, parked) => outcome,
    }
}

/// The answer of a call cut off by the gateway's shutdown.
pub fn cut_off(reason: &str) -> ErrorData {
    ErrorData::new(rmcp::model::ErrorCode(jsonrpc::UPSTREAM_FAILED), reason.to_string(), None)
}

/// [`drive`] until the call ends, its client cancels, or a 2026-07-28 client has to answer.
async fn drive_to_end<T: Send + 'static>(
    mut call: RelayedCall<T>,
    caller: &impl Caller,
    module: &ModuleHost,
    parked: &Parked<T>,
) -> Result<Outcome<T>, ErrorData> {
    let modern = caller.modern();
    loop {
        let step = tokio::select! {
            step = call.next() => step,
            // Dropping the call cancels it in the module, which tells the app.
            _ = caller.cancelled() => return Err(ErrorData::internal_error("the call was cancelled", None)),
        };
        match step {
            Step::Done(result) => return Ok(Outcome::Done(result)),
            Step::Event(RelayEvent::Notification(message)) => {
                match serde_json::from_value::<ServerNotification>(without_jsonrpc(message)) {
                    Ok(notification) => caller.notify(notification).await,
                    Err(e) => tracing::debug!("not passing an unreadable notification to the client: {e}"),
                }
            }
            Step::Event(RelayEvent::Request { key, method, params }) => {
                let body = RelayEvent::request_body(&method, &params);
                if modern {
                    let needed = host_abi::relay::REQUEST_CAPABILITIES.iter().find(|(m, _)| *m == method);
                    if let Some((_, capability)) = needed.filter(|(_, c)| !caller.declares(c)) {
                        // Apps ask for roots on their own account too (after the handshake, on a
                        // roots change), and over stdio nothing ties such a question to a call:
                        // it is declined to the app and the call goes on. Sampling and
                        // elicitation are asked for a call's sake: the call is refused, and
                        // dropping it cancels it at the app.
                        if *capability == "roots" {
                            let error = error_object(jsonrpc::METHOD_NOT_FOUND, format!("the client of this call does not support roots ('{method}' is unavailable)"));
                            module.respond(call.call_id, &key, Err(error)).await;
                            continue;
                        }
                        return Err(missing_capability(capability));
                    }
                    // 2026-07-28: no server-to-client requests; the client answers by retrying.
                    match serde_json::from_value::<InputRequest>(body) {
                        Ok(input) => {
                            module.set_waiting_on_client(call.call_id, true);
                            let state = parked.park(call).await;
                            let requests = [(key, input)].into_iter().collect();
                            return Ok(Outcome::InputRequired(InputRequiredResult::new(Some(requests), Some(state))));
                        }
                        Err(e) => {
                            let error = error_object(jsonrpc::INVALID_PARAMS, format!("'{method}' cannot be put to a 2026-07-28 client: {e}"));
                            module.respond(call.call_id, &key, Err(error)).await;
                            continue;
                        }
                    }
                }
                let answer = match serde_json::from_value::<ServerRequest>(body) {
                    Ok(request) => caller.ask(&method, request).await,
                    Err(e) => Err(error_object(jsonrpc::INVALID_PARAMS, format!("'{method}' is not a request the client can be asked: {e}"))),
                };
                module.respond(call.call_id, &key, answer).await;
            }
        }
    }
}

/// A retry of a 2026-07-28 client: the parked call with the client's answers delivered, ready
/// to [`drive`] on.
pub async fn resume<T>(
    parked: &Parked<T>,
    module: &ModuleHost,
    request_state: &str,
    input_responses: Option<rmcp::model::InputResponses>,
) -> Result<RelayedCall<T>, ErrorData> {
    let Some(call) = parked.take(request_state) else {
        return Err(ErrorData::invalid_params("unknown or expired requestState", None));
    };
    module.set_waiting_on_client(call.call_id, false);
    for (key, answer) in input_responses.unwrap_or_default() {
        module.respond(call.call_id, &key, Ok(answer)).await;
    }
    Ok(call)
}

fn without_jsonrpc(mut message: Value) -> Value {
    if let Some(map) = message.as_object_mut() {
        map.remove("jsonrpc");
    }
    message
}
