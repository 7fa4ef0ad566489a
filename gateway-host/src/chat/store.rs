//! Chat sessions (SPEC R35) behind one trait: the embedded SQLite store (`store_sqlite.rs`, the
//! default) and the Redis store (`store_redis.rs`, `Sessions.Store = "redis"`) that lets several
//! gateway replicas serve the same sessions.
//!
//! A session is its ordered messages in the OpenAI Chat Completions shape (`role`, `content`,
//! `tool_calls`, `tool_call_id`), kept as the JSON they are. A turn — the user's message, the
//! tool calls and results, the answer — is appended in one step ([`SessionStore::append_turn`]):
//! a crash loses at most the turn in progress, never part of a saved one. Turns of one session
//! run one after another under [`SessionStore::lock`]: an in-process lock for SQLite, a lock with
//! a lease in Redis (a replica that dies holding it blocks the session only until the lease ends).

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("session store ({store}): {message}")]
    Backend { store: &'static str, message: String },
    #[error("session store: a saved message is not valid JSON: {0}")]
    Corrupt(String),
}

/// What `GET /apps/sessions` lists.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    pub id: String,
    /// The first user message, shortened (empty until the first turn is saved).
    pub title: String,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
    pub updated_at: i64,
    pub turns: u64,
}

/// A session with its history, oldest message first.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    #[serde(flatten)]
    pub summary: SessionSummary,
    pub messages: Vec<Value>,
}

/// Held while a turn runs; dropping it releases the session for the next turn.
pub struct TurnLock {
    _held: Box<dyn Send + Sync>,
}

impl TurnLock {
    pub fn new(held: impl Send + Sync + 'static) -> TurnLock {
        TurnLock { _held: Box::new(held) }
    }
}

pub trait SessionStore: Send + Sync {
    /// `"sqlite"` or `"redis"` (for logs and `/apps/health`).
    fn kind(&self) -> &'static str;

    /// The session, or `None` when there is none with that id.
    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Session>, StoreError>>;

    /// The session's messages as the model reads them ([`ModelHistory`]); empty when there is no
    /// such session. The agent asks once per turn; a store that owns its data may answer from
    /// memory instead of reading and parsing the whole history again.
    fn model_history<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<ModelHistory, StoreError>> {
        Box::pin(async move {
            let mut history = ModelHistory::default();
            if let Some(session) = self.load(id).await? {
                for message in &session.messages {
                    history.push(message);
                }
            }
            Ok(history)
        })
    }

    /// Appends one turn's messages to the session (created on its first turn) atomically, and
    /// sets its title from `title` when it has none yet. A page-only note ([`is_page_only`])
    /// appended this way is not counted as a turn.
    fn append_turn<'a>(&'a self, id: &'a str, title: &'a str, messages: &'a [Value]) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Every session, most recently updated first.
    fn list(&self) -> BoxFuture<'_, Result<Vec<SessionSummary>, StoreError>>;

    /// Gives a session the title a user chose; `None` when there is no such session.
    fn rename<'a>(&'a self, id: &'a str, title: &'a str) -> BoxFuture<'a, Result<Option<SessionSummary>, StoreError>>;

    /// Removes a session; `false` when there was none.
    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// Waits until no other turn of this session runs (on this replica or, for Redis, any
    /// other), then holds the session until the returned lock is dropped.
    fn lock<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<TurnLock, StoreError>>;

    // The questions of a turn (`input` frames) are answered on whichever replica the answer
    // reaches. A single-process store needs none of this: the defaults do nothing.

    /// Records that a turn on this replica waits for the answer to `input_id`.
    fn expect_input<'a>(&'a self, _session_id: &'a str, _input_id: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// The answer came (or the question was withdrawn).
    fn forget_input<'a>(&'a self, _session_id: &'a str, _input_id: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// Hands an answer to the replica waiting for it; `false` when no replica is.
    fn forward_input<'a>(&'a self, _input: &'a ForwardedInput) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(std::future::ready(Ok(false)))
    }

    /// Whether the store answers now: an error naming what is wrong (for Redis, the URL without
    /// its password). Asked once at startup (a replica that cannot reach its shared store does
    /// not start) and by `/healthz` and the metrics while it runs ([`super::store_health`]).
    fn check(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// Whether other replicas share this store (then `/apps/mcp` and `/mcp` keep their
    /// initialize-era MCP sessions in it too, so any replica serves any session).
    fn is_shared(&self) -> bool {
        false
    }

    /// An initialize-era MCP session's state (rmcp's `SessionState`, as JSON), for another
    /// replica to restore it. Reading it renews it: a shared store keeps a record a day from its
    /// last read or write, so a session in use never runs out while one abandoned does.
    fn mcp_session<'a>(&'a self, _session_id: &'a str) -> BoxFuture<'a, Result<Option<Value>, StoreError>> {
        Box::pin(std::future::ready(Ok(None)))
    }

    fn put_mcp_session<'a>(&'a self, _session_id: &'a str, _state: &'a Value) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(std::future::ready(Ok(())))
    }

    fn delete_mcp_session<'a>(&'a self, _session_id: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(std::future::ready(Ok(())))
    }

    // Replicas (SPEC R49, `http/replicas/`): who is alive at which address, and which replica
    // holds a call parked for its client's retry or a task. A single-process store has no other
    // replica: the defaults know of none.

    /// Says that replica `replica` is alive and reachable at `url`, for `ttl` (renewed by its
    /// heartbeat; a replica that stops beating is gone once it runs out).
    fn beat<'a>(&'a self, _replica: &'a str, _url: &'a str, _ttl: std::time::Duration) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// Where replica `replica` is reached, while it beats.
    fn replica_url<'a>(&'a self, _replica: &'a str) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        Box::pin(std::future::ready(Ok(None)))
    }

    /// A replica leaving in an orderly way (its heartbeat record goes at once).
    fn leave<'a>(&'a self, _replica: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// How many replicas beat now.
    fn replicas(&self) -> BoxFuture<'_, Result<usize, StoreError>> {
        Box::pin(std::future::ready(Ok(1)))
    }

    /// Records that `replica` holds `handle` (a `requestState`, a task id) for `ttl`.
    fn claim<'a>(&'a self, _handle: &'a str, _replica: &'a str, _ttl: std::time::Duration) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// The replica that holds `handle`, if one claimed it and the claim has not run out.
    fn owner<'a>(&'a self, _handle: &'a str) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        Box::pin(std::future::ready(Ok(None)))
    }

    /// Connects to the answers other replicas forward to this one (`None`: there are no others).
    fn forwarded_inputs(&self) -> Option<BoxFuture<'static, Result<BoxStream<'static, ForwardedInput>, StoreError>>> {
        None
    }
}

/// An answer to an `input` frame on its way to the replica whose turn asked.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ForwardedInput {
    pub session_id: String,
    pub input_id: String,
    /// The client's result, or its JSON-RPC error object.
    pub answer: Result<Value, Value>,
}

/// Where a stored tool message keeps what a page needs to render its app again when the
/// session's history is reloaded (`GET /apps/sessions/{id}`); never sent to the model.
pub const UI_KEY: &str = "ui";

/// Whether a stored message is for pages alone — a message with no `role`, only its [`UI_KEY`]
/// part (an app the user opened, in the order it happened): the model never reads it.
pub fn is_page_only(message: &Value) -> bool {
    message.get("role").is_none()
}

/// A stored message as the model gets it, as JSON text: without what only pages read
/// ([`UI_KEY`]); empty for a page-only message ([`is_page_only`]), which the history skips.
pub fn model_text(message: &Value) -> String {
    if is_page_only(message) {
        return String::new();
    }
    match message.get(UI_KEY) {
        Some(_) => {
            let mut message = message.clone();
            message.as_object_mut().map(|m| m.remove(UI_KEY));
            message.to_string()
        }
        None => message.to_string(),
    }
}

/// A session's messages as the model reads them: each one's JSON text ([`model_text`]), oldest
/// first, joined by commas — the inside of a JSON array, ready to be sent. Cheap to clone; the
/// model request is built from it by copying bytes, not by cloning and serialising values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelHistory {
    text: Arc<HistoryText>,
    count: usize,
}

#[derive(Debug, Clone, Default, PartialEq)]
struct HistoryText {
    json: String,
    /// Where each turn's first message (its `user` message) starts in `json`, ascending: the
    /// only places [`ModelHistory::recent`] cuts, so a tool call never loses its result.
    turn_starts: Vec<usize>,
}

impl ModelHistory {
    /// Appends a stored message.
    pub fn push(&mut self, message: &Value) {
        self.push_text(&model_text(message), starts_turn(message));
    }

    /// Appends one message's model text ([`model_text`]); `starts_turn` as [`starts_turn`] says.
    /// An empty text (a page-only message) adds nothing.
    pub fn push_text(&mut self, text: &str, starts_turn: bool) {
        if text.is_empty() {
            return;
        }
        // In place when nobody else holds this history (the usual case), else copied once.
        let inner = Arc::make_mut(&mut self.text);
        if !inner.json.is_empty() {
            inner.json.push(',');
        }
        if starts_turn {
            inner.turn_starts.push(inner.json.len());
        }
        inner.json.push_str(text);
        self.count += 1;
    }

    /// The messages' JSON texts joined by commas (empty when there are none).
    pub fn json(&self) -> &str {
        &self.text.json
    }

    /// The most recent whole turns that fit in `budget` bytes (`None`: all of it), as
    /// [`json`](Self::json) gives them: what the model is sent, so a long session does not
    /// outgrow the model's context window. Empty when not even the last turn fits.
    pub fn recent(&self, budget: Option<usize>) -> &str {
        let json = &self.text.json;
        let Some(budget) = budget.filter(|b| json.len() > *b) else { return json };
        let fits = self.text.turn_starts.partition_point(|start| json.len() - start > budget);
        self.text.turn_starts.get(fits).map_or("", |start| &json[*start..])
    }

    /// The history of these stored messages, as the stores build it.
    #[cfg(test)]
    pub fn of(messages: &[Value]) -> ModelHistory {
        let mut history = ModelHistory::default();
        for m in messages {
            history.push(m);
        }
        history
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.count
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// Whether a stored message begins a turn: every turn starts with its one `user` message.
pub fn starts_turn(message: &Value) -> bool {
    message.get("role").and_then(Value::as_str) == Some("user")
}

/// A session's saved messages, read back from their JSON texts.
pub fn parse_messages(id: &str, texts: &[String]) -> Result<Vec<Value>, StoreError> {
    texts
        .iter()
        .map(|t| serde_json::from_str::<Value>(t).map_err(|e| StoreError::Corrupt(format!("session {id}: {e}"))))
        .collect()
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// A session title from its first user message: one line, at most 80 characters.
pub fn title_of(message: &str) -> String {
    let line = message.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    match line.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Two turns, the first with a tool call and its result.
    fn two_turns() -> Vec<Value> {
        vec![
            json!({"role": "user", "content": "what is low?"}),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "low", "arguments": "{}"}}]}),
            json!({"role": "tool", "tool_call_id": "c1", "content": "milk"}),
            json!({"role": "assistant", "content": "Milk is low."}),
            json!({"role": "user", "content": "thanks"}),
            json!({"role": "assistant", "content": "You're welcome."}),
        ]
    }

    fn parsed(json: &str) -> Vec<Value> {
        serde_json::from_str::<Vec<Value>>(&format!("[{json}]")).unwrap()
    }

    #[test]
    fn recent_keeps_the_last_whole_turns_that_fit() {
        let messages = two_turns();
        let history = ModelHistory::of(&messages);
        let all = history.json();
        assert_eq!(parsed(all), messages);
        assert_eq!(history.recent(None), all, "no budget: everything");
        assert_eq!(history.recent(Some(all.len())), all, "exactly fits");
        // One byte short: the first turn goes whole, tool call and result together.
        let last = history.recent(Some(all.len() - 1));
        assert_eq!(parsed(last), messages[4..].to_vec());
        // The last turn alone, exactly.
        assert_eq!(history.recent(Some(last.len())), last);
        // Not even the last turn fits: nothing.
        assert_eq!(history.recent(Some(last.len() - 1)), "");
        assert_eq!(ModelHistory::default().recent(Some(10)), "");
    }

    #[test]
    fn a_page_only_message_is_not_the_models() {
        let mut messages = two_turns();
        messages.insert(4, json!({ UI_KEY: { "opened": { "appId": "grocery", "resourceUri": "ui://grocery/a.html" } } }));
        assert!(is_page_only(&messages[4]) && !is_page_only(&messages[0]));
        assert_eq!(model_text(&messages[4]), "");
        let history = ModelHistory::of(&messages);
        assert_eq!(history.json(), ModelHistory::of(&two_turns()).json());
        assert_eq!(history.len(), 6);
    }

    #[test]
    fn a_page_part_is_not_counted_and_a_shared_copy_does_not_change() {
        let mut ui = two_turns();
        ui[2][UI_KEY] = json!({"resourceUri": "ui://app/page", "result": {"big": "x".repeat(1000)}});
        let history = ModelHistory::of(&ui);
        assert_eq!(history.json(), ModelHistory::of(&two_turns()).json(), "what only pages read is not the model's");
        let held = history.clone();
        let mut grown = history;
        grown.push(&json!({"role": "user", "content": "more"}));
        assert_eq!(parsed(held.json()).len(), 6);
        assert_eq!(parsed(grown.recent(Some(40))), vec![json!({"role": "user", "content": "more"})]);
    }
}
