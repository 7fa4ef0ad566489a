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
                    history.push(&model_text(message));
                }
            }
            Ok(history)
        })
    }

    /// Appends one turn's messages to the session (created on its first turn) atomically, and
    /// sets its title from `title` when it has none yet.
    fn append_turn<'a>(&'a self, id: &'a str, title: &'a str, messages: &'a [Value]) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Every session, most recently updated first.
    fn list(&self) -> BoxFuture<'_, Result<Vec<SessionSummary>, StoreError>>;

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

    /// Whether other replicas share this store (then `/apps/mcp` and `/mcp` keep their
    /// initialize-era MCP sessions in it too, so any replica serves any session).
    fn is_shared(&self) -> bool {
        false
    }

    /// An initialize-era MCP session's state (rmcp's `SessionState`, as JSON), for another
    /// replica to restore it.
    fn mcp_session<'a>(&'a self, _session_id: &'a str) -> BoxFuture<'a, Result<Option<Value>, StoreError>> {
        Box::pin(std::future::ready(Ok(None)))
    }

    fn put_mcp_session<'a>(&'a self, _session_id: &'a str, _state: &'a Value) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(std::future::ready(Ok(())))
    }

    fn delete_mcp_session<'a>(&'a self, _session_id: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(std::future::ready(Ok(())))
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

/// A stored message as the model gets it, as JSON text: without what only pages read ([`UI_KEY`]).
pub fn model_text(message: &Value) -> String {
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
    json: Arc<String>,
    count: usize,
}

impl ModelHistory {
    /// Appends one message's model text ([`model_text`]).
    pub fn push(&mut self, text: &str) {
        // In place when nobody else holds this history (the usual case), else copied once.
        let json = Arc::make_mut(&mut self.json);
        if !json.is_empty() {
            json.push(',');
        }
        json.push_str(text);
        self.count += 1;
    }

    /// The messages' JSON texts joined by commas (empty when there are none).
    pub fn json(&self) -> &str {
        &self.json
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
