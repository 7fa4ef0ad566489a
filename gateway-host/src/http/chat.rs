//! `POST /apps/chat` (SPEC R33), `POST /apps/chat/{sessionId}/input`, and `/apps/sessions` (R35):
//! the agent's chat over HTTP. A turn streams `text/event-stream` frames `data: {"type": …}`;
//! the turn runs on its own task and is cancelled when the client goes away (the stream holds
//! the cancel guard). Bad requests get 4xx JSON naming the problem.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::connections::{read_limited, BodyRead};
use super::GatewayState;
use crate::chat::agent::{AppEvent, TurnRequest};
use crate::relay::random_hex;

/// Chat request bodies larger than this are refused (413).
pub const MAX_CHAT_BYTES: usize = 1024 * 1024;

fn problem(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    let mut response = (status, Json(json!({ "error": { "code": code, "message": message.into() } }))).into_response();
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        // The rest of the body is never read: the connection cannot carry another request.
        response.headers_mut().insert(axum::http::header::CONNECTION, axum::http::HeaderValue::from_static("close"));
    }
    response
}

fn read_body(body: Result<Bytes, BodyRead>) -> Result<Value, Response> {
    let bytes = body.map_err(|e| match &e {
        BodyRead::TooLarge(_) => problem(StatusCode::PAYLOAD_TOO_LARGE, "too_large", format!("the {e}")),
        BodyRead::Failed(failed) => match super::connections::timed_out(failed) {
            Some(late) => super::connections::request_timeout(late),
            None => problem(StatusCode::BAD_REQUEST, "bad_body", format!("cannot read the request body: {failed}")),
        },
    })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(problem(StatusCode::BAD_REQUEST, "empty_body", "the request body is empty; send a JSON object"));
    }
    let value: Value = serde_json::from_slice(&bytes)
        .map_err(|e| problem(StatusCode::BAD_REQUEST, "bad_json", format!("the request body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(problem(StatusCode::BAD_REQUEST, "bad_json", "the request body must be a JSON object"));
    }
    Ok(value)
}

/// Session ids travel in URLs and keys: letters, digits, `-`, `_`, `.`, at most 128.
fn valid_session_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

/// The body of `POST /apps/chat`, `{message?, sessionId?, appEvents?}`, read: the turn to run
/// (a new session id when none is given), or the 4xx response naming the problem.
pub fn turn_request(body: Result<Bytes, BodyRead>) -> Result<TurnRequest, Response> {
    let body = read_body(body)?;
    let message = match &body["message"] {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        _ => return Err(problem(StatusCode::BAD_REQUEST, "bad_message", "message must be a string")),
    };
    let app_events: Vec<AppEvent> = match &body["appEvents"] {
        Value::Null => Vec::new(),
        events => match serde_json::from_value(events.clone()) {
            Ok(events) => events,
            Err(e) => {
                return Err(problem(
                    StatusCode::BAD_REQUEST,
                    "bad_app_events",
                    format!("appEvents must be [{{app?, tool, args?, resultText?}} or {{app?, text}}]: {e}"),
                ))
            }
        },
    };
    if let Some(why) = app_events.iter().find_map(|e| e.check().err()) {
        return Err(problem(StatusCode::BAD_REQUEST, "bad_app_events", why));
    }
    if message.as_deref().is_none_or(|m| m.trim().is_empty()) && app_events.is_empty() {
        return Err(problem(StatusCode::BAD_REQUEST, "nothing_to_say", "send a message, appEvents, or both"));
    }
    let session_id = match &body["sessionId"] {
        Value::Null => format!("apps-{}", random_hex(12)),
        Value::String(id) if valid_session_id(id) => id.clone(),
        _ => {
            return Err(problem(
                StatusCode::BAD_REQUEST,
                "bad_session_id",
                "sessionId must be 1–128 letters, digits, '-', '_' or '.'",
            ))
        }
    };
    Ok(TurnRequest { session_id, message, app_events })
}

/// `POST /apps/chat`: `{message?, sessionId?, appEvents?}` → the turn's frames.
pub async fn post(State(state): State<Arc<GatewayState>>, body: Body) -> Response {
    let request = match turn_request(read_limited(body, MAX_CHAT_BYTES).await) {
        Ok(request) => request,
        Err(response) => return response,
    };
    let (frames, receiver) = mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    let chat = state.chat.clone();
    let turn_cancel = cancel.clone();
    // Tracked, so that a graceful shutdown lets the turn finish.
    state.turns.spawn(async move {
        chat.run_turn(request, frames, turn_cancel).await;
    });
    // The stream owns the guard: a client that goes away cancels the turn.
    let guard = cancel.drop_guard();
    let frames = futures::stream::unfold(receiver, |mut rx| async move { rx.recv().await.map(|frame| (frame, rx)) });
    let events = frames.map(move |frame| {
        let _held = &guard;
        Ok::<_, Infallible>(Event::default().data(serde_json::to_string(&frame).unwrap_or_default()))
    });
    Sse::new(events).keep_alive(KeepAlive::default()).into_response()
}

/// The body of `POST /apps/chat/{sessionId}/input`, `{inputId, result}` or `{inputId, error}`,
/// read: the input id and the answer (the client's result, or its JSON-RPC error object), or the
/// 4xx response naming the problem.
pub fn input_answer(body: Result<Bytes, BodyRead>) -> Result<(String, Result<Value, Value>), Response> {
    let body = read_body(body)?;
    let Some(input_id) = body["inputId"].as_str() else {
        return Err(problem(StatusCode::BAD_REQUEST, "bad_input", "inputId (a string) is required"));
    };
    let answer = match (body.get("result"), body.get("error")) {
        (Some(result), None) if result.is_object() => Ok(result.clone()),
        (None, Some(error)) if error.is_object() => Err(error.clone()),
        _ => return Err(problem(StatusCode::BAD_REQUEST, "bad_input", "send exactly one of result or error (a JSON object)")),
    };
    Ok((input_id.to_string(), answer))
}

/// `POST /apps/chat/{sessionId}/input`: `{inputId, result}` (or `{inputId, error}`) answers an
/// `input` frame of that session's running turn.
pub async fn input(State(state): State<Arc<GatewayState>>, Path(session_id): Path<String>, body: Body) -> Response {
    let (input_id, answer) = match input_answer(read_limited(body, MAX_CHAT_BYTES).await) {
        Ok(read) => read,
        Err(response) => return response,
    };
    match state.chat.answer(&session_id, &input_id, answer).await {
        Ok(()) => Json(json!({ "ok": true })).into_response(),
        Err(e @ crate::chat::agent::AnswerError::NotWaiting { .. }) => problem(StatusCode::NOT_FOUND, "no_such_input", e.to_string()),
        Err(e) => problem(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", e.to_string()),
    }
}

/// `GET /apps/sessions`: ids, titles, times, most recent first.
pub async fn list(State(state): State<Arc<GatewayState>>) -> Response {
    match state.chat.store().list().await {
        Ok(sessions) => Json(json!({ "sessions": sessions })).into_response(),
        Err(e) => problem(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", e.to_string()),
    }
}

/// `GET /apps/sessions/{id}`: the session with its history.
pub async fn get(State(state): State<Arc<GatewayState>>, Path(id): Path<String>) -> Response {
    match state.chat.store().load(&id).await {
        Ok(Some(session)) => Json(session).into_response(),
        Ok(None) => problem(StatusCode::NOT_FOUND, "no_such_session", format!("there is no session '{id}'")),
        Err(e) => problem(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", e.to_string()),
    }
}

/// `DELETE /apps/sessions/{id}`.
pub async fn delete(State(state): State<Arc<GatewayState>>, Path(id): Path<String>) -> Response {
    match state.chat.store().delete(&id).await {
        Ok(true) => StatusCode::NO_CONTENT.into_response(),
        Ok(false) => problem(StatusCode::NOT_FOUND, "no_such_session", format!("there is no session '{id}'")),
        Err(e) => problem(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", e.to_string()),
    }
}
