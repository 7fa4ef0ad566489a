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

use super::json_error::json_error;
use super::connections::{self, MAX_JSON_BODY_BYTES};
use super::GatewayState;
use crate::chat::agent::{AppEvent, TurnRequest};
use crate::module::relay::random_hex;

/// The body as a JSON object, or the 4xx naming what is wrong with it (`body` is what
/// `connections::read_body` read, or its refusal).
fn read_body(body: Result<Bytes, Response>) -> Result<Value, Response> {
    let bytes = body?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(json_error(StatusCode::BAD_REQUEST, "empty_body", "the request body is empty; send a JSON object"));
    }
    let value: Value = serde_json::from_slice(&bytes)
        .map_err(|e| json_error(StatusCode::BAD_REQUEST, "bad_json", format!("the request body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(json_error(StatusCode::BAD_REQUEST, "bad_json", "the request body must be a JSON object"));
    }
    Ok(value)
}

/// Session ids travel in URLs and keys: letters, digits, `-`, `_`, `.`, at most 128.
fn valid_session_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

/// The body of `POST /apps/chat`, `{message?, sessionId?, appEvents?}`, read: the turn to run
/// (a new session id when none is given), or the 4xx response naming the problem.
pub fn turn_request(body: Result<Bytes, Response>) -> Result<TurnRequest, Response> {
    let body = read_body(body)?;
    let message = match &body["message"] {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        _ => return Err(json_error(StatusCode::BAD_REQUEST, "bad_message", "message must be a string")),
    };
    let app_events: Vec<AppEvent> = match &body["appEvents"] {
        Value::Null => Vec::new(),
        events => match serde_json::from_value(events.clone()) {
            Ok(events) => events,
            Err(e) => {
                return Err(json_error(
                    StatusCode::BAD_REQUEST,
                    "bad_app_events",
                    format!("appEvents must be [{{app?, tool, args?, resultText?}} or {{app?, text}}]: {e}"),
                ))
            }
        },
    };
    if let Some(why) = app_events.iter().find_map(|e| e.check().err()) {
        return Err(json_error(StatusCode::BAD_REQUEST, "bad_app_events", why));
    }
    if message.as_deref().is_none_or(|m| m.trim().is_empty()) && app_events.is_empty() {
        return Err(json_error(StatusCode::BAD_REQUEST, "nothing_to_say", "send a message, appEvents, or both"));
    }
    let session_id = match &body["sessionId"] {
        Value::Null => format!("apps-{}", random_hex(12)),
        Value::String(id) if valid_session_id(id) => id.clone(),
        _ => {
            return Err(json_error(
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
    let request = match turn_request(connections::read_body(body, MAX_JSON_BODY_BYTES).await) {
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
pub fn input_answer(body: Result<Bytes, Response>) -> Result<(String, Result<Value, Value>), Response> {
    let body = read_body(body)?;
    let Some(input_id) = body["inputId"].as_str() else {
        return Err(json_error(StatusCode::BAD_REQUEST, "bad_input", "inputId (a string) is required"));
    };
    let answer = match (body.get("result"), body.get("error")) {
        (Some(result), None) if result.is_object() => Ok(result.clone()),
        (None, Some(error)) if error.is_object() => Err(error.clone()),
        _ => return Err(json_error(StatusCode::BAD_REQUEST, "bad_input", "send exactly one of result or error (a JSON object)")),
    };
    Ok((input_id.to_string(), answer))
}

/// `POST /apps/chat/{sessionId}/input`: `{inputId, result}` (or `{inputId, error}`) answers an
/// `input` frame of that session's running turn.
pub async fn input(State(state): State<Arc<GatewayState>>, Path(session_id): Path<String>, body: Body) -> Response {
    let (input_id, answer) = match input_answer(connections::read_body(body, MAX_JSON_BODY_BYTES).await) {
        Ok(read) => read,
        Err(response) => return response,
    };
    match state.chat.answer(&session_id, &input_id, answer).await {
        Ok(()) => Json(json!({ "ok": true })).into_response(),
        Err(e @ crate::chat::agent::AnswerError::NotWaiting { .. }) => json_error(StatusCode::NOT_FOUND, "no_such_input", e.to_string()),
        Err(e) => json_error(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", e.to_string()),
    }
}

/// `GET /apps/sessions`: ids, titles, times, most recent first.
pub async fn list(State(state): State<Arc<GatewayState>>) -> Response {
    match state.chat.store().list().await {
        Ok(sessions) => Json(json!({ "sessions": sessions })).into_response(),
        Err(e) => json_error(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", e.to_string()),
    }
}

/// `GET /apps/sessions/{id}`: the session with its history.
pub async fn get(State(state): State<Arc<GatewayState>>, Path(id): Path<String>) -> Response {
    match state.chat.store().load(&id).await {
        Ok(Some(session)) => Json(session).into_response(),
        Ok(None) => json_error(StatusCode::NOT_FOUND, "no_such_session", format!("there is no session '{id}'")),
        Err(e) => json_error(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", e.to_string()),
    }
}

/// `PATCH /apps/sessions/{id}` `{title}`: the title the user chose (one line, at most 200
/// characters) → the session's summary.
pub async fn rename(State(state): State<Arc<GatewayState>>, Path(id): Path<String>, body: Body) -> Response {
    let body = match read_body(connections::read_body(body, MAX_JSON_BODY_BYTES).await) {
        Ok(body) => body,
        Err(response) => return response,
    };
    let title = match body["title"].as_str().map(str::trim) {
        Some(t) if !t.is_empty() && t.chars().count() <= 200 && !t.contains(['\n', '\r']) => t.to_string(),
        _ => return json_error(StatusCode::BAD_REQUEST, "bad_title", "title must be a string of 1–200 characters on one line"),
    };
    match state.chat.store().rename(&id, &title).await {
        Ok(Some(summary)) => Json(summary).into_response(),
        Ok(None) => json_error(StatusCode::NOT_FOUND, "no_such_session", format!("there is no session '{id}'")),
        Err(e) => json_error(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", e.to_string()),
    }
}

/// `POST /apps/sessions/{id}/opened` `{appId}`: the user opened that app's UI in the session;
/// recorded in its history so a reload shows the app where it was (204).
pub async fn opened(State(state): State<Arc<GatewayState>>, Path(id): Path<String>, body: Body) -> Response {
    let body = match read_body(connections::read_body(body, MAX_JSON_BODY_BYTES).await) {
        Ok(body) => body,
        Err(response) => return response,
    };
    if !valid_session_id(&id) {
        return json_error(StatusCode::BAD_REQUEST, "bad_session_id", "the session id must be 1–128 letters, digits, '-', '_' or '.'");
    }
    let Some(app_id) = body["appId"].as_str() else {
        return json_error(StatusCode::BAD_REQUEST, "bad_app_id", "appId (a string) is required");
    };
    let apps = match state.module.list_apps().await {
        Ok(apps) => apps,
        Err(e) => return json_error(StatusCode::SERVICE_UNAVAILABLE, "module_unavailable", e.message.as_str().to_string()),
    };
    let app = apps.iter().find(|a| a.id.as_str() == app_id && crate::module::host::is_mcp_app(a));
    let Some(app) = app else {
        return json_error(StatusCode::NOT_FOUND, "no_such_app", format!("there is no MCP App '{app_id}'"));
    };
    if !app.has_ui || app.ui_resource_uri.is_empty() {
        return json_error(StatusCode::BAD_REQUEST, "no_ui", format!("the app '{app_id}' has no UI to open"));
    }
    let name = if app.name.is_empty() { app.id.as_str() } else { app.name.as_str() };
    match state.chat.record_opened(&id, app_id, app.ui_resource_uri.as_str(), name).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => json_error(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", e.to_string()),
    }
}

/// `DELETE /apps/sessions/{id}`.
pub async fn delete(State(state): State<Arc<GatewayState>>, Path(id): Path<String>) -> Response {
    match state.chat.store().delete(&id).await {
        Ok(true) => StatusCode::NO_CONTENT.into_response(),
        Ok(false) => json_error(StatusCode::NOT_FOUND, "no_such_session", format!("there is no session '{id}'")),
        Err(e) => json_error(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", e.to_string()),
    }
}
