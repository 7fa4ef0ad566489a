//! The chat's request bodies: `POST /apps/chat` (`{message?, sessionId?, appEvents?}`, read by
//! `turn_request`) and `POST /apps/chat/{sessionId}/input` (`{inputId, result|error}`, read by
//! `input_answer`), then what the turn makes of an accepted request before the model sees it:
//! the user's message with the app events (`user_content`) and the session title (`title_of`).
//!
//! Every input goes to both readers. What must hold:
//! - a refused body gets a 400 whose JSON `{"error": {"code", "message"}}` names the problem;
//! - an accepted turn has something to say (a non-blank message or app events), valid events, a
//!   session id of 1–128 letters, digits, `-`, `_`, `.` (the one given, else a new one), and the
//!   message as sent; its user content is not blank, a title is one line of at most 80
//!   characters (and `…`);
//! - an accepted answer has the `inputId` as sent and exactly one of `result` / `error`, an object.
#![no_main]

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::Response;
use gateway_host::fuzzing::{input_answer, title_of, turn_request, user_content};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// The 400 a refused body gets: its error code.
fn refused(response: Response) -> String {
    assert_eq!(response.status(), StatusCode::BAD_REQUEST, "a body that was read is refused with 400");
    let body = futures::executor::block_on(axum::body::to_bytes(response.into_body(), usize::MAX)).expect("a body");
    let body: Value = serde_json::from_slice(&body).expect("a refusal is JSON");
    let code = body["error"]["code"].as_str().expect("a refusal has an error code").to_string();
    assert!(!code.is_empty() && !body["error"]["message"].as_str().unwrap_or("").is_empty(), "{body}");
    code
}

fn title(text: &str) {
    let title = title_of(text);
    assert!(!title.contains('\n'), "{title:?}");
    assert!(title.chars().count() <= 81, "{title:?}");
}

fuzz_target!(|data: &[u8]| {
    let body: Option<Value> = serde_json::from_slice(data).ok();

    match turn_request(Ok(Bytes::copy_from_slice(data))) {
        Ok(turn) => {
            let body = body.as_ref().expect("an accepted turn was JSON");
            let id = &turn.session_id;
            assert!(
                !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)),
                "{id:?}"
            );
            match body.get("sessionId") {
                Some(Value::String(given)) => assert_eq!(given, id),
                _ => assert!(id.starts_with("apps-"), "{id:?}"),
            }
            assert_eq!(turn.message.as_deref(), body.get("message").and_then(Value::as_str));
            assert!(turn.app_events.iter().all(|e| e.check().is_ok()));
            assert!(turn.message.as_deref().is_some_and(|m| !m.trim().is_empty()) || !turn.app_events.is_empty());
            let content = user_content(&turn);
            assert!(!content.trim().is_empty(), "{content:?}");
            if let Some(message) = turn.message.as_deref().filter(|m| !m.trim().is_empty()) {
                assert!(content.ends_with(message), "the user content ends with what the user typed");
                title(message);
            }
            for event in &turn.app_events {
                title(event.text.as_deref().or(event.tool.as_deref()).unwrap_or(""));
            }
        }
        Err(response) => {
            let code = refused(response);
            if body.as_ref().is_none_or(|b| !b.is_object()) {
                assert!(matches!(code.as_str(), "empty_body" | "bad_json"), "{code}");
            }
        }
    }

    match input_answer(Ok(Bytes::copy_from_slice(data))) {
        Ok((input_id, answer)) => {
            let body = body.as_ref().expect("an accepted answer was JSON");
            assert_eq!(body.get("inputId").and_then(Value::as_str), Some(input_id.as_str()));
            match answer {
                Ok(result) => assert!(result.is_object() && body.get("error").is_none()),
                Err(error) => assert!(error.is_object() && body.get("result").is_none()),
            }
        }
        Err(response) => {
            refused(response);
        }
    }
});
