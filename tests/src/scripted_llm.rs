//! A scripted OpenAI-compatible Chat Completions server: the one test double of the chat tests
//! (an LLM cannot run here). It serves `POST /v1/chat/completions` on a free loopback port from
//! a runtime of its own and plays back a queue of [`Reply`]s, one per request, in the exact
//! streaming format of the OpenAI API:
//!
//! ```text
//! data: {"id":"chatcmpl-…","object":"chat.completion.chunk","created":…,"model":"scripted",
//!        "system_fingerprint":null,"choices":[{"index":0,"delta":{…},"logprobs":null,"finish_reason":null}]}
//!
//! … (text as `delta.content`; tool calls as `delta.tool_calls[{index, id, type:"function",
//!    function:{name, arguments}}]`, the arguments split over several chunks)
//! data: {… "choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"|"tool_calls"}]}
//!
//! data: [DONE]
//! ```
//!
//! A request with `stream: false` gets the whole `chat.completion` object instead. Every request
//! is recorded ([`RecordedRequest`]: body, `Authorization`, when it came, when its answer ended or
//! whether the client went away first), so a test can assert the tools offered, the tool results
//! fed back and the history sent. Faults: [`Reply::http_error`], [`Reply::garbage`] (not SSE),
//! [`Reply::cut`] (the connection broken mid-stream), and timing on any reply: [`Reply::delayed`],
//! [`Reply::chunk_delay`], [`Reply::held`] (until a [`Gate`] opens). A request that finds the
//! script empty gets HTTP 500 saying so (and is recorded with `unscripted: true`), unless a
//! responder is set ([`ScriptedLlm::respond_with`]): then the responder picks the reply from the
//! request itself — for concurrent turns, where the order of requests is not known in advance.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};

/// The model name the server reports unless told otherwise.
pub const DEFAULT_MODEL: &str = "scripted";

// ---------------------------------------------------------------------------------------------
// The script
// ---------------------------------------------------------------------------------------------

/// One tool call the scripted model makes.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptedToolCall {
    /// `call_…`, what the gateway must send back as `tool_call_id`.
    pub id: String,
    /// The provider-safe function name (as offered in the request's `tools`).
    pub name: String,
    /// The arguments as JSON text; streamed split over several chunks.
    pub arguments: String,
}

impl ScriptedToolCall {
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: &Value) -> ScriptedToolCall {
        ScriptedToolCall { id: id.into(), name: name.into(), arguments: arguments.to_string() }
    }
}

#[derive(Debug, Clone)]
enum ReplyKind {
    /// Streamed text, then `finish_reason: "stop"`.
    Text(Vec<String>),
    /// Optional text, then the tool calls, then `finish_reason: "tool_calls"`.
    ToolCalls { text: Vec<String>, calls: Vec<ScriptedToolCall> },
    /// An HTTP error status with an OpenAI-style error body.
    Status { status: u16, message: String },
    /// Status 200 with this content type and body, verbatim.
    Raw { content_type: String, body: String },
    /// These text chunks, then the connection is broken (no finish_reason, no `[DONE]`).
    Cut(Vec<String>),
}

/// What the scripted model answers to one request.
#[derive(Debug, Clone)]
pub struct Reply {
    kind: ReplyKind,
    /// Before the first chunk (the response headers go out at once).
    delay: Duration,
    /// Between chunks.
    chunk_delay: Duration,
    /// The first chunk waits for this gate to open.
    gate: Option<Gate>,
}

impl Reply {
    fn of(kind: ReplyKind) -> Reply {
        Reply { kind, delay: Duration::ZERO, chunk_delay: Duration::ZERO, gate: None }
    }

    /// A final answer streamed as these text deltas.
    pub fn text<S: Into<String>>(chunks: impl IntoIterator<Item = S>) -> Reply {
        Reply::of(ReplyKind::Text(chunks.into_iter().map(Into::into).collect()))
    }

    /// One tool call (`arguments` as JSON), streamed with its arguments in pieces.
    pub fn tool_call(id: &str, name: &str, arguments: &Value) -> Reply {
        Reply::tool_calls(vec![ScriptedToolCall::new(id, name, arguments)])
    }

    /// Several tool calls in one answer (indices 0, 1, …).
    pub fn tool_calls(calls: Vec<ScriptedToolCall>) -> Reply {
        Reply::of(ReplyKind::ToolCalls { text: Vec::new(), calls })
    }

    /// Text deltas before the tool calls (some models think aloud first).
    pub fn with_text<S: Into<String>>(mut self, chunks: impl IntoIterator<Item = S>) -> Reply {
        match &mut self.kind {
            ReplyKind::ToolCalls { text, .. } | ReplyKind::Text(text) | ReplyKind::Cut(text) => {
                text.extend(chunks.into_iter().map(Into::into))
            }
            _ => panic!("with_text: only text, tool-call and cut replies stream text"),
        }
        self
    }

    /// HTTP `status` with `{"error":{"message":…,"type":"server_error",…}}`.
    pub fn http_error(status: u16, message: &str) -> Reply {
        Reply::of(ReplyKind::Status { status, message: message.to_string() })
    }

    /// Status 200, `text/event-stream`, but the body is not server-sent events of chunks: an HTML
    /// page with a `data:` line whose JSON is broken.
    pub fn garbage() -> Reply {
        Reply::raw(
            "text/event-stream",
            "<html><body>502 Bad Gateway</body></html>\n\ndata: {\"id\": \"chatcmpl-x\", \"choices\": [{\"delta\": {\"content\": \n\n",
        )
    }

    /// Status 200 with exactly this content type and body.
    pub fn raw(content_type: &str, body: &str) -> Reply {
        Reply::of(ReplyKind::Raw { content_type: content_type.to_string(), body: body.to_string() })
    }

    /// These text deltas, then the connection is broken in the middle of the stream.
    pub fn cut<S: Into<String>>(chunks: impl IntoIterator<Item = S>) -> Reply {
        Reply::of(ReplyKind::Cut(chunks.into_iter().map(Into::into).collect()))
    }

    /// Waits `delay` (after the headers) before the first chunk.
    pub fn delayed(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }

    /// Waits `delay` between chunks.
    pub fn chunk_delay(mut self, delay: Duration) -> Reply {
        self.chunk_delay = delay;
        self
    }

    /// Holds the first chunk (after the headers) until `gate` opens.
    pub fn held(mut self, gate: &Gate) -> Reply {
        self.gate = Some(gate.clone());
        self
    }

    /// The SSE body of a streamed reply, as separate writes (`None` for non-streamed kinds).
    fn chunks(&self, model: &str, id: &str) -> Option<(Vec<String>, bool)> {
        let chunk = |delta: Value, finish: Value| {
            let value = json!({
                "id": id,
                "object": "chat.completion.chunk",
                "created": unix_now(),
                "model": model,
                "system_fingerprint": null,
                "choices": [{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish }],
            });
            format!("data: {value}\n\n")
        };
        let mut out = Vec::new();
        let (text, calls, cut) = match &self.kind {
            ReplyKind::Text(text) => (text, &[][..], false),
            ReplyKind::ToolCalls { text, calls } => (text, &calls[..], false),
            ReplyKind::Cut(text) => (text, &[][..], true),
            _ => return None,
        };
        out.push(chunk(json!({ "role": "assistant", "content": "" }), Value::Null));
        for piece in text {
            out.push(chunk(json!({ "content": piece }), Value::Null));
        }
        if cut {
            return Some((out, true));
        }
        for (index, call) in calls.iter().enumerate() {
            // The first piece names the call; the arguments follow in pieces, as OpenAI streams them.
            out.push(chunk(
                json!({ "tool_calls": [{
                    "index": index, "id": call.id, "type": "function",
                    "function": { "name": call.name, "arguments": "" }
                }] }),
                Value::Null,
            ));
            for piece in split_in_pieces(&call.arguments, 3) {
                out.push(chunk(json!({ "tool_calls": [{ "index": index, "function": { "arguments": piece } }] }), Value::Null));
            }
        }
        let finish = if calls.is_empty() { "stop" } else { "tool_calls" };
        out.push(chunk(json!({}), json!(finish)));
        out.push("data: [DONE]\n\n".to_string());
        Some((out, false))
    }

    /// The non-streamed `chat.completion` object (for `stream: false`).
    fn completion(&self, model: &str, id: &str) -> Option<Value> {
        let (text, calls) = match &self.kind {
            ReplyKind::Text(text) => (text.concat(), Vec::new()),
            ReplyKind::ToolCalls { text, calls } => (text.concat(), calls.clone()),
            _ => return None,
        };
        let mut message = json!({ "role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) } });
        if !calls.is_empty() {
            message["tool_calls"] = calls
                .iter()
                .map(|c| json!({ "id": c.id, "type": "function", "function": { "name": c.name, "arguments": c.arguments } }))
                .collect();
        }
        Some(json!({
            "id": id,
            "object": "chat.completion",
            "created": unix_now(),
            "model": model,
            "choices": [{ "index": 0, "message": message, "logprobs": null,
                          "finish_reason": if calls.is_empty() { "stop" } else { "tool_calls" } }],
            "usage": { "prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2 },
        }))
    }
}

/// `text` cut into about `n` pieces on character boundaries (at least one piece).
fn split_in_pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    let size = chars.len().div_ceil(n.max(1));
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// A gate a [`Reply::held`] reply waits behind; [`open`](Gate::open) releases every reply held by
/// it (now and later). Clones share the gate.
#[derive(Clone, Debug)]
pub struct Gate(Arc<tokio::sync::watch::Sender<bool>>);

impl Default for Gate {
    fn default() -> Self {
        Gate::new()
    }
}

impl Gate {
    pub fn new() -> Gate {
        Gate(Arc::new(tokio::sync::watch::Sender::new(false)))
    }

    pub fn open(&self) {
        self.0.send_replace(true);
    }

    pub fn is_open(&self) -> bool {
        *self.0.borrow()
    }

    async fn wait(&self) {
        let mut rx = self.0.subscribe();
        let _ = rx.wait_for(|open| *open).await;
    }
}

// ---------------------------------------------------------------------------------------------
// What the server saw
// ---------------------------------------------------------------------------------------------

/// How the answer to a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Still being answered.
    Pending,
    /// The whole reply was written (for streams: up to `[DONE]`; for errors and raw bodies: the
    /// response was handed over).
    Completed,
    /// The scripted cut happened.
    Cut,
    /// The client went away before the reply was complete (e.g. the gateway cancelled the turn).
    ClientGone,
}

/// One request the server got.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// 0, 1, … in arrival order.
    pub index: usize,
    pub path: String,
    /// The JSON body (`Value::String` with the raw text if it was not JSON).
    pub body: Value,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
    pub received_at: Instant,
    /// When the reply ended (see `outcome`).
    pub ended_at: Option<Instant>,
    pub outcome: Outcome,
    /// The script was empty: the request got HTTP 500.
    pub unscripted: bool,
}

impl RecordedRequest {
    /// `body.messages` (empty if absent).
    pub fn messages(&self) -> Vec<Value> {
        self.body["messages"].as_array().cloned().unwrap_or_default()
    }

    /// The function names of `body.tools`.
    pub fn tool_names(&self) -> Vec<String> {
        self.body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
            .collect()
    }

    /// The last message of role `user`.
    pub fn last_user_message(&self) -> Option<Value> {
        self.messages().into_iter().rev().find(|m| m["role"] == "user")
    }
}

/// Picks the reply to a request from its JSON body.
type Responder = Arc<dyn Fn(&Value) -> Reply + Send + Sync>;

struct Shared {
    model: String,
    script: Mutex<VecDeque<Reply>>,
    /// Answers what the script does not (see [`ScriptedLlm::respond_with`]).
    responder: Mutex<Option<Responder>>,
    requests: Mutex<Vec<RecordedRequest>>,
    /// Notified whenever `requests` changes.
    changed: Condvar,
    ids: AtomicU64,
}

impl Shared {
    fn update(&self, index: usize, f: impl FnOnce(&mut RecordedRequest)) {
        let mut requests = self.requests.lock().unwrap();
        if let Some(r) = requests.get_mut(index) {
            f(r);
        }
        self.changed.notify_all();
    }

    fn end(&self, index: usize, outcome: Outcome) {
        self.update(index, |r| {
            if r.outcome == Outcome::Pending {
                r.outcome = outcome;
                r.ended_at = Some(Instant::now());
            }
        });
    }
}

// ---------------------------------------------------------------------------------------------
// The server
// ---------------------------------------------------------------------------------------------

/// The running scripted provider. Dropping it stops the server (open connections are closed).
pub struct ScriptedLlm {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ScriptedLlm {
    /// Starts on a free port of 127.0.0.1 with an empty script.
    pub fn start() -> ScriptedLlm {
        ScriptedLlm::start_on(0)
    }

    /// Starts on this port of 127.0.0.1 (0: a free one) — e.g. to bring a provider back where a
    /// gateway expects it. Retries the bind for up to 10 s.
    pub fn start_on(port: u16) -> ScriptedLlm {
        let deadline = Instant::now() + Duration::from_secs(10);
        let listener = loop {
            match std::net::TcpListener::bind(("127.0.0.1", port)) {
                Ok(listener) => break listener,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("[scripted-llm] bind 127.0.0.1:{port}: {e}; retrying");
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("scripted LLM: cannot bind 127.0.0.1:{port}: {e}"),
            }
        };
        listener.set_nonblocking(true).expect("set_nonblocking");
        let addr = listener.local_addr().expect("local_addr");
        let shared = Arc::new(Shared {
            model: DEFAULT_MODEL.to_string(),
            script: Mutex::new(VecDeque::new()),
            responder: Mutex::new(None),
            requests: Mutex::new(Vec::new()),
            changed: Condvar::new(),
            ids: AtomicU64::new(1),
        });
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let app = Router::new()
            .route("/v1/chat/completions", post(completions))
            .route("/v1/models", get(models))
            .fallback(not_found)
            .with_state(shared.clone());
        let thread = std::thread::Builder::new()
            .name(format!("scripted-llm {addr}"))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                    tokio::select! {
                        result = axum::serve(listener, app) => {
                            if let Err(e) = result {
                                eprintln!("[scripted-llm] server error: {e}");
                            }
                        }
                        _ = stop_rx => {}
                    }
                });
                // Dropping the runtime cancels every connection still open.
                runtime.shutdown_background();
            })
            .expect("spawning the scripted LLM thread");
        eprintln!("[scripted-llm] serving http://{addr}/v1");
        ScriptedLlm { addr, shared, stop: Some(stop_tx), thread: Some(thread) }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT/v1` — what `Agent.BaseUrl` should be.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Appends a reply to the script.
    pub fn push(&self, reply: Reply) -> &Self {
        self.shared.script.lock().unwrap().push_back(reply);
        self
    }

    /// Appends replies to the script, in order.
    pub fn push_all(&self, replies: impl IntoIterator<Item = Reply>) -> &Self {
        self.shared.script.lock().unwrap().extend(replies);
        self
    }

    /// Answers every request the script has no reply for with `responder(body)` instead of
    /// HTTP 500 (the script, while not empty, still comes first). For turns that run
    /// concurrently: the reply is chosen from what the request holds (e.g. a tool call when the
    /// last message is the user's, the final text once a tool result came back), not from the
    /// order requests happen to arrive in.
    pub fn respond_with(&self, responder: impl Fn(&Value) -> Reply + Send + Sync + 'static) -> &Self {
        *self.shared.responder.lock().unwrap() = Some(Arc::new(responder));
        self
    }

    /// How many scripted replies have not been played yet.
    pub fn remaining(&self) -> usize {
        self.shared.script.lock().unwrap().len()
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests.lock().unwrap().clone()
    }

    pub fn request_count(&self) -> usize {
        self.shared.requests.lock().unwrap().len()
    }

    /// Request `index` (panics, listing what came, if there is none).
    pub fn request(&self, index: usize) -> RecordedRequest {
        let requests = self.requests();
        requests.get(index).cloned().unwrap_or_else(|| {
            panic!("the scripted LLM got {} request(s), not {}: {:#?}", requests.len(), index + 1, requests)
        })
    }

    /// Waits until at least `n` requests came; false on timeout.
    pub fn wait_for_requests(&self, n: usize, timeout: Duration) -> bool {
        self.wait(timeout, |requests| requests.len() >= n)
    }

    /// Waits until request `index` exists and its reply ended; returns it (None on timeout).
    pub fn wait_for_end(&self, index: usize, timeout: Duration) -> Option<RecordedRequest> {
        let mut found = None;
        self.wait(timeout, |requests| match requests.get(index) {
            Some(r) if r.outcome != Outcome::Pending => {
                found = Some(r.clone());
                true
            }
            _ => false,
        });
        found
    }

    /// Waits until `condition` holds for the recorded requests; false on timeout.
    pub fn wait(&self, timeout: Duration, mut condition: impl FnMut(&[RecordedRequest]) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut requests = self.shared.requests.lock().unwrap();
        loop {
            if condition(&requests) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            requests = self.shared.changed.wait_timeout(requests, deadline - now).unwrap().0;
        }
    }
}

impl Drop for ScriptedLlm {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn models(State(shared): State<Arc<Shared>>) -> Response {
    axum::Json(json!({ "object": "list", "data": [{ "id": shared.model, "object": "model", "owned_by": "gateway-e2e" }] }))
        .into_response()
}

async fn not_found(uri: axum::http::Uri) -> Response {
    let message = format!("scripted LLM: no route {uri} (only POST /v1/chat/completions and GET /v1/models)");
    (StatusCode::NOT_FOUND, axum::Json(json!({ "error": { "message": message, "type": "invalid_request_error" } })))
        .into_response()
}

fn error_body(message: &str) -> String {
    json!({ "error": { "message": message, "type": "server_error", "param": null, "code": null } }).to_string()
}

async fn completions(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let text = String::from_utf8_lossy(&body).to_string();
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    let scripted = shared.script.lock().unwrap().pop_front();
    let responder = if scripted.is_none() { shared.responder.lock().unwrap().clone() } else { None };
    let reply = scripted.or_else(|| responder.map(|respond| respond(&body)));
    let index = {
        let mut requests = shared.requests.lock().unwrap();
        let index = requests.len();
        requests.push(RecordedRequest {
            index,
            path: "/v1/chat/completions".into(),
            body: body.clone(),
            authorization: headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_string),
            received_at: Instant::now(),
            ended_at: None,
            outcome: Outcome::Pending,
            unscripted: reply.is_none(),
        });
        shared.changed.notify_all();
        index
    };
    eprintln!("[scripted-llm] request {index}: {} message(s), {} tool(s)", body["messages"].as_array().map_or(0, Vec::len), body["tools"].as_array().map_or(0, Vec::len));
    let Some(reply) = reply else {
        shared.end(index, Outcome::Completed);
        let message = format!("scripted LLM: the script is empty (request {index} was not expected)");
        eprintln!("[scripted-llm] {message}");
        return (StatusCode::INTERNAL_SERVER_ERROR, [("content-type", "application/json")], error_body(&message)).into_response();
    };
    let id = format!("chatcmpl-scripted{}", shared.ids.fetch_add(1, Ordering::Relaxed));
    match &reply.kind {
        ReplyKind::Status { status, message } => {
            wait_before(&reply).await;
            shared.end(index, Outcome::Completed);
            let status = StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return (status, [("content-type", "application/json")], error_body(message)).into_response();
        }
        ReplyKind::Raw { content_type, body } => {
            wait_before(&reply).await;
            shared.end(index, Outcome::Completed);
            return (StatusCode::OK, [("content-type", content_type.clone())], body.clone()).into_response();
        }
        _ => {}
    }
    if body["stream"] != json!(true) {
        wait_before(&reply).await;
        shared.end(index, Outcome::Completed);
        let completion = reply.completion(&shared.model, &id).expect("a text or tool-call reply");
        return axum::Json(completion).into_response();
    }
    let (chunks, cut) = reply.chunks(&shared.model, &id).expect("a streamed reply");
    // The body is fed from a task, so the headers go out at once and a client that goes away is
    // noticed even while the reply waits (delay, gate).
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(1);
    let task_shared = shared.clone();
    tokio::spawn(async move {
        let gone = |shared: &Shared| shared.end(index, Outcome::ClientGone);
        tokio::select! {
            _ = wait_before(&reply) => {}
            _ = tx.closed() => return gone(&task_shared),
        }
        for (i, chunk) in chunks.into_iter().enumerate() {
            if i > 0 && !reply.chunk_delay.is_zero() {
                tokio::select! {
                    _ = tokio::time::sleep(reply.chunk_delay) => {}
                    _ = tx.closed() => return gone(&task_shared),
                }
            }
            if tx.send(Ok(Bytes::from(chunk))).await.is_err() {
                return gone(&task_shared);
            }
        }
        if cut {
            // Give the client a moment to read what was sent, then break the connection.
            tokio::time::sleep(Duration::from_millis(50)).await;
            task_shared.end(index, Outcome::Cut);
            let _ = tx.send(Err(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "scripted cut"))).await;
            return;
        }
        // Recorded before the last write reaches the client, so "ended before the next request"
        // holds causally.
        task_shared.end(index, Outcome::Completed);
        drop(tx);
    });
    let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Body::from_stream(stream))
        .expect("response")
}

async fn wait_before(reply: &Reply) {
    if let Some(gate) = &reply.gate {
        gate.wait().await;
    }
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_call_chunks_reassemble() {
        let reply = Reply::tool_call("call_1", "grocery_get_low_stock", &json!({"storeId": 1}));
        let (chunks, cut) = reply.chunks("m", "id").unwrap();
        assert!(!cut);
        assert_eq!(chunks.last().unwrap(), "data: [DONE]\n\n");
        let mut arguments = String::new();
        let mut finish = None;
        for c in &chunks[..chunks.len() - 1] {
            let v: Value = serde_json::from_str(c.strip_prefix("data: ").unwrap().trim()).unwrap();
            assert_eq!(v["object"], "chat.completion.chunk");
            for t in v["choices"][0]["delta"]["tool_calls"].as_array().into_iter().flatten() {
                arguments.push_str(t["function"]["arguments"].as_str().unwrap_or(""));
            }
            if let Some(f) = v["choices"][0]["finish_reason"].as_str() {
                finish = Some(f.to_string());
            }
        }
        assert_eq!(arguments, r#"{"storeId":1}"#);
        assert_eq!(finish.as_deref(), Some("tool_calls"));
        assert!(chunks.len() >= 6, "arguments split over several chunks: {chunks:?}");
    }

    fn post(llm: &ScriptedLlm, body: &Value) -> reqwest::blocking::Response {
        reqwest::blocking::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(20))
            .build()
            .unwrap()
            .post(format!("{}/chat/completions", llm.base_url()))
            .bearer_auth("k")
            .json(body)
            .send()
            .unwrap()
    }

    #[test]
    fn the_server_plays_the_script_and_records_requests() {
        let llm = ScriptedLlm::start();
        let gate = Gate::new();
        llm.push(Reply::text(["Hel", "lo"]))
            .push(Reply::http_error(503, "down"))
            .push(Reply::cut(["par"]))
            .push(Reply::text(["late"]).held(&gate));
        let request = json!({ "model": "scripted", "stream": true, "messages": [{ "role": "user", "content": "hi" }] });

        let response = post(&llm, &request);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        let text = response.text().unwrap();
        let events: Vec<&str> = text.split("\n\n").filter(|e| !e.is_empty()).collect();
        assert_eq!(events.last(), Some(&"data: [DONE]"));
        let content: String = events[..events.len() - 1]
            .iter()
            .map(|e| serde_json::from_str::<Value>(e.strip_prefix("data: ").unwrap()).unwrap())
            .filter_map(|v| v["choices"][0]["delta"]["content"].as_str().map(str::to_string))
            .collect();
        assert_eq!(content, "Hello");

        let response = post(&llm, &request);
        assert_eq!(response.status().as_u16(), 503);
        assert_eq!(response.json::<Value>().unwrap()["error"]["message"], "down");

        let response = post(&llm, &request);
        assert!(response.text().is_err(), "a cut stream reads as a transport error");

        // A held reply whose client goes away is recorded as such.
        let client = std::thread::spawn({
            let url = format!("{}/chat/completions", llm.base_url());
            let body = request.clone();
            move || {
                let client = reqwest::blocking::Client::builder().no_proxy().timeout(Duration::from_millis(500)).build().unwrap();
                let _ = client.post(url).json(&body).send().and_then(|r| r.text());
            }
        });
        client.join().unwrap();
        let gone = llm.wait_for_end(3, Duration::from_secs(10)).expect("the held reply ended");
        assert_eq!(gone.outcome, Outcome::ClientGone);

        // The script is empty now.
        assert_eq!(post(&llm, &request).status().as_u16(), 500);
        let requests = llm.requests();
        assert_eq!(requests.len(), 5);
        assert!(requests[4].unscripted);
        assert_eq!(requests[0].authorization.as_deref(), Some("Bearer k"));
        assert_eq!(requests[0].last_user_message().unwrap()["content"], "hi");
        assert_eq!(requests[2].outcome, Outcome::Cut);
    }
}
