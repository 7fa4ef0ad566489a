//! The relay on `/apps/mcp/{appId}` (SPEC R42): what an app sends while a browser's (or any
//! client's) request runs reaches that client, within the endpoint's stateless design.
//!
//! - A request is answered with plain JSON when the app sent nothing meanwhile; as soon as it
//!   sends something, the answer becomes an SSE stream (for clients that accept one): progress
//!   and log notifications, then the response.
//! - The app's questions (sampling, elicitation, roots) reach an initialize-era client as
//!   requests on that stream, with gateway-chosen ids; the client answers with a later POST,
//!   which is matched by that id alone. A 2026-07-28 client gets the revision's multi-round-trip
//!   `input_required` result instead and answers by retrying with `inputResponses` and the
//!   `requestState` it was given; the call waits meanwhile.
//! - Which questions a client can answer is decided by its capabilities: those of a 2026-07-28
//!   request's `_meta`, or — for initialize-era clients, whose capabilities come only once — the
//!   ones carried in the `Mcp-Session-Id` this endpoint issued at `initialize`, so no replica
//!   needs to remember them. A client without a session id declared nothing.
//! - `notifications/cancelled` cancels the forwarded call, and the app is told.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use host_abi::AbiError;
use parking_lot::Mutex;
use serde_json::{json, Value};

use super::apps_mcp::{self, rpc_error};
use super::GatewayState;
use crate::relay::{error_object, random_hex, Parked, RelayEvent, RelayedCall, Step};

type Forwarded = Result<Option<String>, AbiError>;

/// Relayed calls of `/apps/mcp` in flight and waiting.
#[derive(Default)]
pub struct AppsMcpCalls {
    /// Calls in flight by the client's view of them (session, `?sessionId`, request id), so
    /// that client's `notifications/cancelled` finds its call.
    active: Mutex<HashMap<String, u64>>,
    /// Questions put to clients, by the id the question was sent with: (call, key).
    questions: Mutex<HashMap<String, (u64, String)>>,
    /// Calls waiting for a multi-round-trip client's next round.
    parked: Parked<Forwarded>,
}

/// Prefix of the session ids this endpoint issues (they carry the client's capabilities).
const SESSION_PREFIX: &str = "gw1.";

/// A session id for an initialize-era client: unguessable, and carrying what it declared.
pub fn issue_session(capabilities: &Value) -> String {
    let hex: String = capabilities.to_string().bytes().map(|b| format!("{b:02x}")).collect();
    format!("{SESSION_PREFIX}{}.{hex}", random_hex(12))
}

/// The capabilities carried by a session id this endpoint issued.
fn session_capabilities(headers: &HeaderMap) -> Value {
    let decode = |id: &str| -> Option<Value> {
        let (_, hex) = id.strip_prefix(SESSION_PREFIX)?.split_once('.')?;
        let bytes: Option<Vec<u8>> =
            (0..hex.len()).step_by(2).map(|i| hex.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok())).collect();
        serde_json::from_slice(&bytes?).ok()
    };
    headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).and_then(decode).unwrap_or(Value::Null)
}

fn active_key(headers: &HeaderMap, session_id: &str, request_id: &Value) -> String {
    let mcp_session = headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).unwrap_or("");
    format!("{mcp_session}|{session_id}|{request_id}")
}

/// Whether the client can read an SSE answer.
fn accepts_sse(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("text/event-stream"))
}

/// A client's answer to a question, or its `notifications/cancelled`: handled here (202).
/// Returns `None` for anything else.
pub async fn take_client_message(state: &Arc<GatewayState>, message: &Value, headers: &HeaderMap, session_id: &str) -> Option<Response> {
    let object = message.as_object()?;
    let method = object.get("method").and_then(Value::as_str);
    if method.is_none() && (object.contains_key("result") || object.contains_key("error")) {
        let id = object.get("id").map(|id| id.as_str().map(str::to_string).unwrap_or_else(|| id.to_string()));
        let question = id.and_then(|id| state.apps_calls.questions.lock().remove(&id));
        match question {
            Some((call_id, key)) => {
                let answer = match object.get("result") {
                    Some(result) => Ok(result.clone()),
                    None => Err(object.get("error").cloned().unwrap_or_else(|| error_object(-32603, "error"))),
                };
                state.module.respond(call_id, &key, answer).await;
            }
            None => tracing::debug!("a client answered a question the gateway is not waiting for"),
        }
        return Some(accepted());
    }
    if method == Some("notifications/cancelled") {
        if let Some(request_id) = message.pointer("/params/requestId") {
            let call_id = state.apps_calls.active.lock().get(&active_key(headers, session_id, request_id)).copied();
            if let Some(call_id) = call_id {
                tracing::debug!(call_id, "the client cancelled request {request_id}");
                state.module.cancel(call_id);
            }
        }
        return Some(accepted());
    }
    None
}

fn accepted() -> Response {
    StatusCode::ACCEPTED.into_response()
}

/// Forwards one request with the relay; the response is JSON or, once the app sends something
/// before its result, an SSE stream.
pub async fn forward(
    state: &Arc<GatewayState>,
    app_id: &str,
    message: &Value,
    headers: &HeaderMap,
    session_id: &str,
    modern: bool,
) -> Response {
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let method = message.get("method").and_then(Value::as_str).unwrap_or_default().to_string();
    let retry_state = message.pointer("/params/requestState").and_then(Value::as_str).filter(|_| modern);
    let resumed = retry_state.is_some();
    let call = match retry_state {
        Some(token) => {
            let Some(call) = state.apps_calls.parked.take(token) else {
                let error = rpc_error(&id, -32602, "unknown or expired requestState", None);
                return apps_mcp::finish(headers, StatusCode::OK, apps_mcp::json_raw(error.to_string()));
            };
            if let Some(responses) = message.pointer("/params/inputResponses").and_then(Value::as_object) {
                for (key, answer) in responses {
                    state.module.respond(call.call_id, key, Ok(answer.clone())).await;
                }
            }
            call
        }
        None => {
            let capabilities = if modern {
                message.pointer("/params/_meta/io.modelcontextprotocol~1clientCapabilities").cloned().unwrap_or(Value::Null)
            } else {
                session_capabilities(headers)
            };
            let extra = json!({ host_abi::relay::EXTRA_KEY: { "clientCapabilities": capabilities } });
            let forwarded = apps_mcp::strip_envelope(message).into_owned();
            let call_id = state.module.next_call_id();
            let (module, app, sid) = (state.module.clone(), app_id.to_string(), session_id.to_string());
            state.module.relayed(call_id, async move { module.forward_with(call_id, &app, &forwarded, &sid, &extra).await })
        }
    };
    let key = active_key(headers, session_id, &id);
    state.apps_calls.active.lock().insert(key.clone(), call.call_id);
    let mut driver = Driver {
        state: state.clone(),
        app_id: app_id.to_string(),
        call: Some(call),
        id,
        method,
        modern,
        sse: accepts_sse(headers),
        active_key: key,
        questions: Vec::new(),
        resumed,
    };
    let first = driver.step().await;
    let mut response = match first {
        Out::Final(text) if apps_mcp::wants_sse(headers) => return apps_mcp::sse_response(headers, vec![text]),
        Out::Final(text) => return apps_mcp::finish(headers, StatusCode::OK, apps_mcp::json_raw(text)),
        Out::Message(text) => {
            let rest = futures::stream::unfold(Some(driver), |driver| async move {
                let mut driver = driver?;
                match driver.step().await {
                    Out::Message(text) => Some((text, Some(driver))),
                    Out::Final(text) => Some((text, None)),
                }
            });
            use futures::StreamExt as _;
            let events = futures::stream::once(async move { text })
                .chain(rest)
                .map(|text| Ok::<_, Infallible>(Event::default().event("message").data(text)));
            Sse::new(events).into_response()
        }
    };
    apps_mcp::echo_session(headers, &mut response);
    response
}

enum Out {
    /// A message on the stream (a notification or a question).
    Message(String),
    /// The last message: the response (or an `input_required` round).
    Final(String),
}

/// Drives one relayed call for one HTTP request. Dropped with the response (client gone): the
/// call is cancelled, its questions forgotten.
struct Driver {
    state: Arc<GatewayState>,
    app_id: String,
    call: Option<RelayedCall<Forwarded>>,
    id: Value,
    method: String,
    modern: bool,
    sse: bool,
    active_key: String,
    questions: Vec<String>,
    /// The call began under an earlier request (a multi-round-trip retry): its response carries
    /// that request's id and must carry this one's.
    resumed: bool,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let calls = &self.state.apps_calls;
        calls.active.lock().remove(&self.active_key);
        let mut questions = calls.questions.lock();
        for q in &self.questions {
            questions.remove(q);
        }
    }
}

impl Driver {
    async fn step(&mut self) -> Out {
        loop {
            let Some(call) = self.call.as_mut() else {
                return Out::Final(rpc_error(&self.id, -32603, "the call has already ended", None).to_string());
            };
            let call_id = call.call_id;
            match call.next().await {
                Step::Done(result) => {
                    self.call = None;
                    return Out::Final(self.final_text(result));
                }
                Step::Event(RelayEvent::Notification(message)) if self.sse => return Out::Message(message.to_string()),
                Step::Event(RelayEvent::Notification(_)) => {}
                Step::Event(RelayEvent::Request { key, method, params }) => {
                    if self.modern {
                        let call = self.call.take().expect("a call in flight");
                        let token = self.state.apps_calls.parked.park(call);
                        let result = json!({
                            "resultType": "input_required",
                            "inputRequests": { key: RelayEvent::request_body(&method, &params) },
                            "requestState": token,
                        });
                        return Out::Final(json!({ "jsonrpc": "2.0", "id": self.id, "result": result }).to_string());
                    }
                    if !self.sse {
                        let error = error_object(
                            -32601,
                            format!("'{method}' cannot reach this client: its request does not accept text/event-stream"),
                        );
                        self.state.module.respond(call_id, &key, Err(error)).await;
                        continue;
                    }
                    let question_id = format!("gw-{}", random_hex(12));
                    self.state.apps_calls.questions.lock().insert(question_id.clone(), (call_id, key));
                    self.questions.push(question_id.clone());
                    let request = json!({ "jsonrpc": "2.0", "id": question_id, "method": method, "params": params });
                    return Out::Message(request.to_string());
                }
            }
        }
    }

    fn final_text(&self, result: Forwarded) -> String {
        let result = match result {
            Ok(Some(answer)) if self.resumed => Ok(Some(with_id(answer, &self.id))),
            other => other,
        };
        match result {
            Ok(Some(answer)) if self.modern => apps_mcp::adapt_result(&self.method, answer),
            Ok(Some(answer)) => answer,
            Ok(None) => rpc_error(&self.id, -32603, "the app gave no response", None).to_string(),
            Err(e) => rpc_error(
                &self.id,
                -32603,
                format!("forwarding to McpApp '{}' failed: {e}", self.app_id),
                Some(json!({ "appId": self.app_id })),
            )
            .to_string(),
        }
    }
}

/// A JSON-RPC response text with its id replaced.
fn with_id(answer: String, id: &Value) -> String {
    match serde_json::from_str::<Value>(&answer) {
        Ok(mut response) => {
            response["id"] = id.clone();
            response.to_string()
        }
        Err(_) => answer,
    }
}
