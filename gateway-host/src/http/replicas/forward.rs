//! Sends a request on to the replica that holds its call (see the module docs of
//! [`super`]): a 2026-07-28 client's retry (`requestState`) or a task request (`tasks/get`,
//! `tasks/update`, `tasks/cancel`, `tasks/result`: `taskId`) that reached another replica than
//! the one holding the parked call or the task.
//!
//! Runs after the JSON-RPC gate (the message is read once there, [`Gated`]) and after auth: the
//! owner checks the same credentials again, since the request goes on with its own headers. The
//! owner's answer — JSON or an event stream with the app's progress — streams back as it comes.

use std::future::Future;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use host_abi::jsonrpc;
use http_body_util::BodyExt;
use serde_json::Value;

use super::{Replicas, ANSWERED_BY, FORWARDED_BY};
use crate::module::relay::Claims;
use crate::http::mcp::jsonrpc_gate::{refuse, Gated};
use crate::module::app_http::error_chain;

/// Headers that belong to one connection, not to the request.
const HOP_BY_HOP: &[header::HeaderName] =
    &[header::CONNECTION, header::CONTENT_LENGTH, header::TRANSFER_ENCODING, header::TE, header::TRAILER, header::UPGRADE];

/// A step of the MCP endpoints' way in (`front_door.rs`): a request whose handle another
/// replica holds goes there. Every answer names
/// the replica that made it ([`ANSWERED_BY`]): an operator reading a client's log can tell where
/// its call ran.
pub async fn to_owner<F: Future<Output = Response>>(
    replicas: Option<&Arc<Replicas>>,
    request: Request,
    next: impl FnOnce(Request) -> F,
) -> Response {
    let Some(replicas) = replicas else { return next(request).await };
    // As the client sent it: both MCP endpoints are routes of the gateway's router, not nested.
    let path = request.uri().path_and_query().map(|p| p.as_str().to_string()).unwrap_or_default();
    if let Some(stamp) = request.headers().get(FORWARDED_BY).and_then(|v| v.to_str().ok()) {
        if replicas.verify(stamp, request.method().as_str(), &path) {
            // Sent here by the replica that found us the owner: answered here, never sent on again.
            return here(&replicas, None, request, next).await;
        }
    }
    let message = request.extensions().get::<Gated>().map(|Gated(m)| m);
    let Some(held) = held_by(message, request.headers()) else { return here(&replicas, None, request, next).await };
    let id = message.and_then(|m| m.get("id")).cloned().unwrap_or(Value::Null);
    let owner = match replicas.store.owner(&held.handle).await {
        Ok(Some(owner)) if owner != replicas.id => owner,
        Ok(_) => return here(&replicas, None, request, next).await,
        Err(e) => {
            // Without the store nobody can say who holds it: answered here, where it may be.
            tracing::warn!(replica = %replicas.id, "replicas: cannot look up who holds a call: {e}");
            return here(&replicas, None, request, next).await;
        }
    };
    let url = match replicas.store.replica_url(&owner).await {
        Ok(Some(url)) => url,
        // A session outlives its replica: restored here from the shared store, and held here now.
        Ok(None) if held.session => return here(&replicas, Some(held.handle), request, next).await,
        Ok(None) => {
            let why = format!("the gateway replica that held this call ({owner}) is gone, and the call with it; start it again");
            return answered_by(refuse(StatusCode::OK, &id, jsonrpc::UPSTREAM_FAILED, why), &replicas.id);
        }
        Err(e) => {
            let why = format!("cannot find the gateway replica that holds this call ({owner}): {e}");
            return answered_by(refuse(StatusCode::OK, &id, jsonrpc::UPSTREAM_FAILED, why), &replicas.id);
        }
    };
    let what = if held.session { "session" } else { "call" };
    match forward(&replicas, &owner, &url, &path, what, id, request).await {
        Ok(answer) => answer,
        Err(refusal) => answered_by(refusal, &replicas.id),
    }
}

/// How long a replica holds an initialize-era session it made (as long as the store keeps it).
const SESSION_CLAIM: std::time::Duration = std::time::Duration::from_secs(86_400);

/// Answers the request on this replica. A session it makes (an `initialize` answered with an
/// `Mcp-Session-Id`) or restores (`restored`: its replica is gone) is held here from now on.
async fn here<F: Future<Output = Response>>(
    replicas: &Replicas,
    restored: Option<String>,
    request: Request,
    next: impl FnOnce(Request) -> F,
) -> Response {
    let initialize = request.extensions().get::<Gated>().is_some_and(|Gated(m)| m.get("method").and_then(Value::as_str) == Some("initialize"));
    let response = next(request).await;
    let made = initialize.then(|| response.headers().get(SESSION_ID).and_then(|v| v.to_str().ok()).map(str::to_string)).flatten();
    if let Some(session) = made.or(restored) {
        replicas.claim(&session, SESSION_CLAIM).await;
    }
    answered_by(response, &replicas.id)
}

fn answered_by(mut response: Response, replica: &str) -> Response {
    if let Ok(value) = HeaderValue::from_str(replica) {
        response.headers_mut().insert(ANSWERED_BY, value);
    }
    response
}

/// What a request is about that one replica holds.
struct Held {
    handle: String,
    /// An initialize-era session (else a parked call or a task).
    session: bool,
}

/// The MCP session header (both endpoints are Streamable HTTP).
const SESSION_ID: &str = "mcp-session-id";

/// The handle of what the request is about: a parked call (`requestState`) or a task (`taskId`
/// of a `tasks/*` request) first, else its initialize-era session (`Mcp-Session-Id`: the
/// session's stream, its subscriptions and the questions on it live with the replica that made
/// it).
fn held_by(message: Option<&Value>, headers: &axum::http::HeaderMap) -> Option<Held> {
    if let Some(handle) = message.and_then(handle_of) {
        return Some(Held { handle: handle.to_string(), session: false });
    }
    let session = headers.get(SESSION_ID)?.to_str().ok()?;
    Some(Held { handle: session.to_string(), session: true })
}

/// The handle a request names a held call or task by.
fn handle_of(message: &Value) -> Option<&str> {
    let params = message.get("params")?;
    if let Some(state) = params.get("requestState").and_then(Value::as_str) {
        return Some(state);
    }
    match message.get("method")?.as_str()? {
        "tasks/get" | "tasks/update" | "tasks/cancel" | "tasks/result" => params.get("taskId")?.as_str(),
        _ => None,
    }
}

/// The owner's answer, or (`Err`) this replica's JSON-RPC error saying why there is none.
/// `what` the owner holds: "call" or "session".
async fn forward(replicas: &Replicas, owner: &str, url: &str, path: &str, what: &str, id: Value, request: Request) -> Result<Response, Response> {
    let gone = |why: String| Err(refuse(StatusCode::OK, &id, jsonrpc::UPSTREAM_FAILED, why));
    let (parts, body) = request.into_parts();
    // The gate has read the body whole already: this takes the bytes it put back.
    let bytes = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => return gone(format!("cannot read the request again to send it on: {e}")),
    };
    let mut outbound = hyper::Request::builder().method(parts.method.clone()).uri(format!("{url}{path}"));
    for (name, value) in &parts.headers {
        if !HOP_BY_HOP.contains(name) && name.as_str() != FORWARDED_BY {
            outbound = outbound.header(name, value);
        }
    }
    let Ok(stamp) = HeaderValue::from_str(&replicas.stamp(parts.method.as_str(), path)) else {
        return gone(format!("this replica's id ({}) cannot be sent in a header", replicas.id));
    };
    let outbound = match outbound.header(FORWARDED_BY, stamp).body(http_body_util::Full::new(bytes)) {
        Ok(outbound) => outbound,
        Err(e) => return gone(format!("cannot send the request on to the replica that holds this {what} ({owner}, {url}): {e}")),
    };
    match replicas.client.request(outbound).await {
        Ok(answer) => {
            let (parts, body) = answer.into_parts();
            let stream = parts.headers.get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
            let body = if stream && !id.is_null() {
                let why = format!("the gateway replica that holds this {what} ({owner}, {url}) went away before it answered");
                Body::from_stream(ending_with_an_error(body, id, why))
            } else {
                Body::new(body)
            };
            Ok(Response::from_parts(parts, body))
        }
        Err(e) => gone(format!("the gateway replica that holds this {what} ({owner}, {url}) did not answer: {}", error_chain(&e))),
    }
}

/// The owner's event stream as it comes; if it breaks off (the owner was killed mid-call), one
/// last event answers the request with a JSON-RPC error (-32001) saying so, rather than a
/// stream that just ends.
fn ending_with_an_error(
    body: hyper::body::Incoming,
    id: Value,
    why: String,
) -> impl futures::Stream<Item = Result<axum::body::Bytes, std::io::Error>> + Send {
    use futures::StreamExt;
    let frames = http_body_util::BodyStream::new(body);
    futures::stream::unfold(Some((frames, id, why)), |state| async move {
        let (mut frames, id, why) = state?;
        loop {
            match frames.next().await {
                None => return None,
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        return Some((Ok(data), Some((frames, id, why))));
                    }
                }
                Some(Err(e)) => {
                    let message = serde_json::json!({
                        "jsonrpc": jsonrpc::VERSION, "id": id,
                        "error": { "code": jsonrpc::UPSTREAM_FAILED, "message": format!("{why}: {e}") },
                    });
                    return Some((Ok(axum::body::Bytes::from(format!("event: message\ndata: {message}\n\n"))), None));
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::handle_of;
    use serde_json::json;

    #[test]
    fn retries_and_task_requests_name_their_handle_and_nothing_else_does() {
        let retry = json!({"method": "tools/call", "params": {"name": "x", "requestState": "gw-1-ab"}});
        assert_eq!(handle_of(&retry), Some("gw-1-ab"));
        for method in ["tasks/get", "tasks/update", "tasks/cancel", "tasks/result"] {
            assert_eq!(handle_of(&json!({"method": method, "params": {"taskId": "t-1"}})), Some("t-1"), "{method}");
        }
        assert_eq!(handle_of(&json!({"method": "tools/call", "params": {"name": "x", "taskId": "t-1"}})), None);
        assert_eq!(handle_of(&json!({"method": "tasks/get", "params": {"taskId": 7}})), None);
        assert_eq!(handle_of(&json!({"method": "tools/list"})), None);
        assert_eq!(handle_of(&json!({"result": {}, "id": 1})), None);
    }
}
