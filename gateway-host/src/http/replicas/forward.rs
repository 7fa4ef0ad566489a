//! Sends a request on to the replica that holds its call (see the module docs of
//! [`super`]): a 2026-07-28 client's retry (`requestState`) or a task request (`tasks/get`,
//! `tasks/update`, `tasks/cancel`, `tasks/result`: `taskId`) that reached another replica than
//! the one holding the parked call or the task.
//!
//! Runs after the JSON-RPC gate (the message is read once there, [`Gated`]) and after auth: the
//! owner checks the same credentials again, since the request goes on with its own headers. The
//! owner's answer — JSON or an event stream with the app's progress — streams back as it comes.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{OriginalUri, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use host_abi::jsonrpc;
use http_body_util::BodyExt;
use serde_json::Value;

use super::{Replicas, ANSWERED_BY, FORWARDED_BY};
use crate::http::mcp::jsonrpc_gate::{refuse, Gated};
use crate::module::app_http::error_chain;

/// Headers that belong to one connection, not to the request.
const HOP_BY_HOP: &[header::HeaderName] =
    &[header::CONNECTION, header::CONTENT_LENGTH, header::TRANSFER_ENCODING, header::TE, header::TRAILER, header::UPGRADE];

/// The middleware: a request whose handle another replica holds goes there. Every answer names
/// the replica that made it ([`ANSWERED_BY`]): an operator reading a client's log can tell where
/// its call ran.
pub async fn to_owner(State(replicas): State<Option<Arc<Replicas>>>, request: Request, next: Next) -> Response {
    let Some(replicas) = replicas else { return next.run(request).await };
    // As the client sent it: inside `/mcp` (a nested service) the URI has lost its prefix.
    let uri = request.extensions().get::<OriginalUri>().map(|o| &o.0).unwrap_or(request.uri());
    let path = uri.path_and_query().map(|p| p.as_str().to_string()).unwrap_or_default();
    let here = |response: Response| answered_by(response, &replicas.id);
    if let Some(stamp) = request.headers().get(FORWARDED_BY).and_then(|v| v.to_str().ok()) {
        if replicas.verify(stamp, request.method().as_str(), &path) {
            // Sent here by the replica that found us the owner: answered here, never sent on again.
            return here(next.run(request).await);
        }
    }
    let Some(Gated(message)) = request.extensions().get::<Gated>() else { return here(next.run(request).await) };
    let Some(handle) = handle_of(message) else { return here(next.run(request).await) };
    let owner = match replicas.store.owner(handle).await {
        Ok(Some(owner)) if owner != replicas.id => owner,
        Ok(_) => return here(next.run(request).await),
        Err(e) => {
            // Without the store nobody can say who holds it: answered here, where it may be.
            tracing::warn!(replica = %replicas.id, "replicas: cannot look up who holds a call: {e}");
            return here(next.run(request).await);
        }
    };
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    match forward(&replicas, &owner, &path, id, request).await {
        Ok(answer) => answer,
        Err(refusal) => here(refusal),
    }
}

fn answered_by(mut response: Response, replica: &str) -> Response {
    if let Ok(value) = HeaderValue::from_str(replica) {
        response.headers_mut().insert(ANSWERED_BY, value);
    }
    response
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
async fn forward(replicas: &Replicas, owner: &str, path: &str, id: Value, request: Request) -> Result<Response, Response> {
    let gone = |why: String| Err(refuse(StatusCode::OK, &id, jsonrpc::UPSTREAM_FAILED, why));
    let url = match replicas.store.replica_url(owner).await {
        Ok(Some(url)) => url,
        Ok(None) => {
            return gone(format!(
                "the gateway replica that held this call ({owner}) is gone, and the call with it; start it again"
            ))
        }
        Err(e) => return gone(format!("cannot find the gateway replica that holds this call ({owner}): {e}")),
    };
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
        Err(e) => return gone(format!("cannot send the request on to the replica that holds this call ({owner}, {url}): {e}")),
    };
    match replicas.client.request(outbound).await {
        Ok(answer) => {
            let (parts, body) = answer.into_parts();
            Ok(Response::from_parts(parts, Body::new(body)))
        }
        Err(e) => gone(format!("the gateway replica that holds this call ({owner}, {url}) did not answer: {}", error_chain(&e))),
    }
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
