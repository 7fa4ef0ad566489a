//! The agent's LLM: any OpenAI-compatible Chat Completions endpoint (SPEC R34) — Ollama, vLLM,
//! llama.cpp's server, OpenAI — asked with `stream: true`, its server-sent events read with the
//! SSE parser rmcp uses (`sse-stream`, linear in the stream whatever its chunks), text deltas
//! handed out as they come and tool calls assembled from their streamed pieces; a server that
//! answers one whole `application/json` completion instead is read whole.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{json, Value};

use crate::config::settings::Settings;
use crate::tools::arguments::kind_of;

/// `Agent.*`: where the model is and how the agent uses it.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// `…/v1`; `/chat/completions` is appended.
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    pub system_prompt: String,
    pub max_tool_rounds: usize,
    /// `Agent.MaxHistoryBytes`: the most of a session's earlier turns sent to the model, in bytes
    /// of JSON (`None`: all of them; see `store::ModelHistory::recent`).
    pub max_history_bytes: Option<usize>,
    pub timeout: Duration,
}

/// 128 KiB of JSON: roughly 32,000 tokens, within the context window of today's common models
/// with room left for the tools and the answer.
const DEFAULT_MAX_HISTORY_BYTES: u64 = 128 * 1024;

const DEFAULT_SYSTEM_PROMPT: &str = "You are the assistant of an MCP App gateway. Use the tools of the hosted apps to answer; \
say plainly when a tool fails.";

impl AgentConfig {
    /// The configuration, or why there is none: the message names the keys to set.
    pub fn from_settings(settings: &Settings) -> Result<AgentConfig, String> {
        let base_url = settings.get_str("Agent:BaseUrl").filter(|s| !s.trim().is_empty());
        let model = settings.get_str("Agent:Model").filter(|s| !s.trim().is_empty());
        let (Some(base_url), Some(model)) = (base_url, model) else {
            return Err("no LLM provider is configured: set Agent.BaseUrl (an OpenAI-compatible endpoint such as \
                        http://127.0.0.1:11434/v1) and Agent.Model, and Agent.ApiKeyEnv if it needs a key"
                .to_string());
        };
        let api_key = settings.get_str("Agent:ApiKeyEnv").and_then(|var| std::env::var(var).ok()).filter(|k| !k.is_empty());
        let number = |key: &str| settings.get_str(key).and_then(|v| v.parse::<u64>().ok());
        Ok(AgentConfig {
            base_url: base_url.trim_end_matches('/').to_string(),
            model,
            api_key,
            system_prompt: settings.get_str("Agent:SystemPrompt").unwrap_or_else(|| DEFAULT_SYSTEM_PROMPT.to_string()),
            max_tool_rounds: number("Agent:MaxToolRounds").unwrap_or(8).max(1) as usize,
            max_history_bytes: match number("Agent:MaxHistoryBytes").unwrap_or(DEFAULT_MAX_HISTORY_BYTES) {
                0 => None,
                bytes => Some(bytes as usize),
            },
            timeout: Duration::from_secs(number("Agent:TimeoutSeconds").unwrap_or(120).max(1)),
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("the LLM provider at {url} cannot be reached: {message}")]
    Unreachable { url: String, message: String },
    #[error("the LLM provider answered HTTP {status}: {body}")]
    Status { status: u16, body: String },
    #[error("the LLM provider's answer is malformed: {0}")]
    Malformed(String),
    #[error("the LLM provider did not finish within {0:?}")]
    Timeout(Duration),
}

/// A tool call the model asked for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolCall {
    pub id: String,
    /// The provider-safe name.
    pub name: String,
    /// JSON text, as the model wrote it.
    pub arguments: String,
}

/// One completed answer of the model.
#[derive(Debug, Default)]
pub struct Completion {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
}

impl Completion {
    /// The assistant message for the history.
    pub fn message(&self) -> Value {
        let mut message = json!({ "role": "assistant", "content": if self.text.is_empty() { Value::Null } else { json!(self.text) } });
        if !self.tool_calls.is_empty() {
            message["tool_calls"] = self
                .tool_calls
                .iter()
                .map(|c| json!({ "id": c.id, "type": "function", "function": { "name": c.name, "arguments": c.arguments } }))
                .collect();
        }
        message
    }
}

pub struct Provider {
    http: reqwest::Client,
    config: AgentConfig,
    /// `{base_url}/chat/completions`, and that URL parsed once (a URL that does not parse is
    /// left to the request to report, as it always was).
    url: String,
    parsed_url: Option<reqwest::Url>,
}

impl Provider {
    /// One client for the gateway's life: its pool keeps connections to the model open between
    /// requests (a turn makes at least two).
    pub fn new(config: AgentConfig) -> Provider {
        let http = reqwest::Client::builder().tcp_nodelay(true).build().unwrap_or_else(|_| reqwest::Client::new());
        let url = format!("{}/chat/completions", config.base_url);
        let parsed_url = reqwest::Url::parse(&url).ok();
        Provider { http, config, url, parsed_url }
    }

    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// Asks the model for the next message; `on_text` gets each text delta as it arrives.
    /// `messages` are JSON texts — single messages, or several joined by commas (a session's
    /// history, see `store::ModelHistory`); empty ones are skipped. `tools` is the JSON array of
    /// tool definitions, or empty for none.
    pub async fn complete(&self, messages: &[&str], tools: &str, on_text: impl FnMut(&str)) -> Result<Completion, ProviderError> {
        let timeout = self.config.timeout;
        tokio::time::timeout(timeout, self.stream(messages, tools, on_text)).await.map_err(|_| ProviderError::Timeout(timeout))?
    }

    /// The request body, `{"model", "messages", "stream": true, "tools"?}`, by copying the texts.
    fn body(&self, messages: &[&str], tools: &str) -> Vec<u8> {
        let size = messages.iter().map(|m| m.len() + 1).sum::<usize>() + tools.len() + self.config.model.len() + 64;
        let mut body = Vec::with_capacity(size);
        body.extend_from_slice(b"{\"model\":");
        serde_json::to_writer(&mut body, &self.config.model).expect("a string serialises");
        body.extend_from_slice(b",\"messages\":[");
        for (i, message) in messages.iter().filter(|m| !m.is_empty()).enumerate() {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(message.as_bytes());
        }
        body.extend_from_slice(b"],\"stream\":true");
        if !tools.is_empty() {
            body.extend_from_slice(b",\"tools\":");
            body.extend_from_slice(tools.as_bytes());
        }
        body.push(b'}');
        body
    }

    async fn stream(&self, messages: &[&str], tools: &str, on_text: impl FnMut(&str)) -> Result<Completion, ProviderError> {
        let url = &self.url;
        let request = match &self.parsed_url {
            Some(parsed) => self.http.post(parsed.clone()),
            None => self.http.post(url),
        };
        let mut request = request
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(self.body(messages, tools));
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|e| ProviderError::Unreachable { url: url.clone(), message: e.to_string() })?;
        let status = response.status();
        if !status.is_success() {
            return Err(ProviderError::Status { status: status.as_u16(), body: error_body(response).await });
        }
        let content_type = response.headers().get(reqwest::header::CONTENT_TYPE).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        match AnswerKind::of(content_type.as_deref()) {
            AnswerKind::Stream => read_completion(response.bytes_stream(), on_text).await,
            AnswerKind::Whole => read_whole_completion(response.bytes_stream(), on_text).await,
            AnswerKind::Other(what) => Err(ProviderError::Malformed(format!(
                "it answered {what}, neither server-sent events nor JSON: is Agent.BaseUrl the OpenAI-compatible API (its …/v1)?"
            ))),
        }
    }
}

/// How a provider's successful answer comes, by its `Content-Type`.
#[derive(Debug, PartialEq)]
enum AnswerKind {
    /// `text/event-stream`, or no type said: the streamed chunks asked for.
    Stream,
    /// `application/json`: one whole `chat.completion` (a server that does not stream).
    Whole,
    /// Anything else (a web page, a proxy's notice), named as it was said.
    Other(String),
}

impl AnswerKind {
    fn of(content_type: Option<&str>) -> AnswerKind {
        let Some(content_type) = content_type else { return AnswerKind::Stream };
        let essence = content_type.split(';').next().unwrap_or_default().trim();
        if essence.eq_ignore_ascii_case("text/event-stream") {
            AnswerKind::Stream
        } else if essence.eq_ignore_ascii_case("application/json") {
            AnswerKind::Whole
        } else {
            AnswerKind::Other(preview(&content_type.chars().filter(|c| !c.is_control()).collect::<String>()))
        }
    }
}

/// The most a provider may stream for one answer, in bytes of the response body: text, tool-call
/// arguments and the SSE framing around them. An answer is a few KiB to a few hundred; the bound
/// is what keeps a buggy or hostile provider (an event that never ends, arguments without end)
/// from growing the gateway's memory until the kernel kills it.
pub const MAX_STREAM_BYTES: usize = 16 * 1024 * 1024;
/// The most tool calls one answer may ask for (models ask for a handful; `parallel_tool_calls`
/// rarely passes ten). A streamed `index` at or past it is refused, not allocated for.
pub const MAX_TOOL_CALLS: usize = 128;

/// Why reading the body stopped: the transport failed, or the provider sent more than
/// [`MAX_STREAM_BYTES`].
#[derive(Debug, thiserror::Error)]
enum BodyError<E> {
    #[error("{0}")]
    Transport(E),
    #[error("the answer is larger than the gateway takes ({MAX_STREAM_BYTES} bytes)")]
    TooLarge,
}

/// The body's chunks, ending with [`BodyError::TooLarge`] once they pass [`MAX_STREAM_BYTES`]:
/// the SSE parser buffers a line and an event until they end, so this bounds each line and event
/// too.
fn bounded<S, B, E>(body: S) -> impl futures::Stream<Item = Result<bytes::Bytes, BodyError<E>>>
where
    S: futures::Stream<Item = Result<B, E>>,
    B: Into<bytes::Bytes>,
{
    let mut total = 0usize;
    body.map(move |chunk| {
        let chunk: bytes::Bytes = chunk.map_err(BodyError::Transport)?.into();
        total = total.saturating_add(chunk.len());
        if total > MAX_STREAM_BYTES {
            return Err(BodyError::TooLarge);
        }
        Ok(chunk)
    })
}

/// Reads a streamed Chat Completions answer (server-sent events of `chat.completion.chunk`s) into
/// a [`Completion`], handing each text delta to `on_text` as it arrives. Everything the provider
/// sends is bounded ([`MAX_STREAM_BYTES`], [`MAX_TOOL_CALLS`]) and every problem is a
/// [`ProviderError::Malformed`] naming it; what was read is dropped with the error.
///
/// The reading is linear in the body, however the provider cuts it: the parser it replaced
/// searched its whole buffer again after every chunk and copied the rest after every line, so a
/// 2 MB line in 1 KiB chunks held the host's worker for 1.9 s and 1 MB of comment lines for 4 s
/// (and 16 MB, the bound, for minutes): `reads_in_linear_time_however_the_stream_is_cut`.
pub async fn read_completion<S, B, E>(body: S, mut on_text: impl FnMut(&str)) -> Result<Completion, ProviderError>
where
    S: futures::Stream<Item = Result<B, E>>,
    B: Into<bytes::Bytes>,
    E: std::error::Error + Send + Sync + 'static,
{
    let events = sse_stream::SseStream::from_bytes_stream(bounded(body));
    futures::pin_mut!(events);
    let mut completion = Completion::default();
    let mut finished = false;
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| {
            ProviderError::Malformed(match e {
                // The transport's failure or the bound, as they say it.
                sse_stream::Error::Body(e) => e.to_string(),
                other => format!("the event stream is not server-sent events ({other})"),
            })
        })?;
        // An event without data (only `event:`, `id:` or `retry:` lines) carries no chunk.
        let Some(data) = event.data else { continue };
        if data.trim() == "[DONE]" {
            finished = true;
            break;
        }
        let chunk: Value =
            serde_json::from_str(&data).map_err(|e| ProviderError::Malformed(format!("a chunk is not JSON ({e}): {}", preview(&data))))?;
        if let Some(error) = chunk.get("error") {
            return Err(ProviderError::Malformed(format!("the provider reported an error: {}", preview(&error.to_string()))));
        }
        // A chunk without choices (usage figures only) carries nothing to read.
        let Some(choice) = choices_of(&chunk, &data)?.first() else { continue };
        add_message_part(&mut completion, &choice["delta"], "delta", &mut on_text)?;
        if choice["finish_reason"].is_string() {
            finished = true;
        }
    }
    if !finished {
        return Err(ProviderError::Malformed("the stream ended before the answer was complete".into()));
    }
    completed(completion)
}

/// Reads an answer that came whole (`application/json`: a server that does not stream although
/// asked to) into a [`Completion`], its text handed to `on_text` at once; bounded as a stream is.
pub async fn read_whole_completion<S, B, E>(body: S, mut on_text: impl FnMut(&str)) -> Result<Completion, ProviderError>
where
    S: futures::Stream<Item = Result<B, E>>,
    B: Into<bytes::Bytes>,
    E: std::error::Error + Send + Sync + 'static,
{
    let body = bounded(body);
    futures::pin_mut!(body);
    let mut bytes = Vec::new();
    while let Some(chunk) = body.next().await {
        bytes.extend_from_slice(&chunk.map_err(|e| ProviderError::Malformed(e.to_string()))?);
    }
    let text = String::from_utf8_lossy(&bytes);
    let answer: Value = serde_json::from_str(&text).map_err(|e| ProviderError::Malformed(format!("it said application/json but its answer is not JSON ({e}): {}", preview(&text))))?;
    if let Some(error) = answer.get("error") {
        return Err(ProviderError::Malformed(format!("the provider reported an error: {}", preview(&error.to_string()))));
    }
    let Some(choice) = choices_of(&answer, &text)?.first() else {
        return Err(ProviderError::Malformed(format!("its JSON answer holds no choice: {}", preview(&text))));
    };
    let mut completion = Completion::default();
    add_message_part(&mut completion, &choice["message"], "message", &mut on_text)?;
    completed(completion)
}

/// A chunk's (or a whole answer's) `choices`: none when it has none, an error naming it when they
/// are not a list.
fn choices_of<'a>(answer: &'a Value, text: &str) -> Result<&'a [Value], ProviderError> {
    match &answer["choices"] {
        Value::Array(choices) => Ok(choices),
        Value::Null => Ok(&[]),
        other => Err(ProviderError::Malformed(format!("\"choices\" is {}, not a list: {}", kind_of(other), preview(text)))),
    }
}

/// A streamed `delta` or a whole `message` added to `completion`: its text (handed to `on_text`)
/// and its tool calls' pieces. A field of the wrong type is named, not skipped: an answer read
/// as empty because its text was a number would hide the provider's fault.
fn add_message_part(completion: &mut Completion, part: &Value, what: &str, on_text: &mut impl FnMut(&str)) -> Result<(), ProviderError> {
    let mut add_text = |text: &str| {
        if !text.is_empty() {
            completion.text.push_str(text);
            on_text(text);
        }
    };
    match &part["content"] {
        Value::String(text) => add_text(text),
        Value::Null => {}
        // Content parts, as some servers write a message: the text of the text parts.
        Value::Array(parts) => {
            for part in parts {
                match (&part["type"], &part["text"]) {
                    (Value::String(kind), Value::String(text)) if kind == "text" => add_text(text),
                    _ => return Err(ProviderError::Malformed(format!("{what}.content holds a part that is not text: {}", preview(&part.to_string())))),
                }
            }
        }
        other => return Err(ProviderError::Malformed(format!("{what}.content is {}, not text", kind_of(other)))),
    }
    match &part["tool_calls"] {
        Value::Array(pieces) => pieces.iter().try_for_each(|piece| add_tool_call_piece(&mut completion.tool_calls, piece)),
        Value::Null => Ok(()),
        other => Err(ProviderError::Malformed(format!("{what}.tool_calls is {}, not a list", kind_of(other)))),
    }
}

/// The answer read whole: every tool call named, each with an id.
fn completed(mut completion: Completion) -> Result<Completion, ProviderError> {
    for (i, call) in completion.tool_calls.iter_mut().enumerate() {
        if call.name.is_empty() {
            return Err(ProviderError::Malformed(format!("tool call {i} has no function name")));
        }
        if call.id.is_empty() {
            call.id = format!("call_{i}");
        }
    }
    Ok(completion)
}

/// One streamed piece of a tool call (`{index, id?, function: {name?, arguments?}}`) joined to
/// the call it continues. A piece without an index starts the next call; an index at or past
/// [`MAX_TOOL_CALLS`] is refused before anything is allocated for it.
fn add_tool_call_piece(calls: &mut Vec<ToolCall>, piece: &Value) -> Result<(), ProviderError> {
    let index = match &piece["index"] {
        Value::Null => calls.len(),
        value => match value.as_u64() {
            Some(index) if index < MAX_TOOL_CALLS as u64 => index as usize,
            Some(_) => {
                return Err(ProviderError::Malformed(format!(
                    "tool call index {value} is past the most one answer may make ({MAX_TOOL_CALLS})"
                )))
            }
            None => return Err(ProviderError::Malformed(format!("tool call index {} is not a number from 0", preview(&value.to_string())))),
        },
    };
    if index >= MAX_TOOL_CALLS {
        return Err(ProviderError::Malformed(format!("more than {MAX_TOOL_CALLS} tool calls in one answer")));
    }
    if calls.len() <= index {
        calls.resize(index + 1, ToolCall::default());
    }
    let call = &mut calls[index];
    if let Some(id) = piece["id"].as_str() {
        call.id = id.to_string();
    }
    if let Some(name) = piece["function"]["name"].as_str() {
        call.name.push_str(name);
    }
    match &piece["function"]["arguments"] {
        Value::String(arguments) => call.arguments.push_str(arguments),
        Value::Null => {}
        other => {
            return Err(ProviderError::Malformed(format!(
                "tool call {index}'s arguments are {}, not text (the API sends the JSON of an object as a string)",
                kind_of(other)
            )))
        }
    }
    Ok(())
}

/// The start of an error answer's body, for the error message: only its first KiB is read (the
/// rest is the provider's to keep), and control characters are dropped.
async fn error_body(response: reqwest::Response) -> String {
    const READ: usize = 1024;
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(Ok(chunk)) = chunks.next().await {
        body.extend_from_slice(&chunk[..chunk.len().min(READ - body.len())]);
        if body.len() >= READ {
            break;
        }
    }
    let text: String = String::from_utf8_lossy(&body).chars().filter(|c| !c.is_control()).collect();
    preview(&text)
}

/// The start of a provider's text for an error message: at most 200 characters.
fn preview(text: &str) -> String {
    let mut cut: String = text.chars().take(200).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_is_the_json_the_texts_make() {
        let provider = Provider::new(AgentConfig {
            base_url: "http://127.0.0.1:1/v1".into(),
            model: "m\"odel".into(),
            api_key: None,
            system_prompt: String::new(),
            max_tool_rounds: 1,
            max_history_bytes: None,
            timeout: Duration::from_secs(1),
        });
        let system = json!({ "role": "system", "content": "be brief" }).to_string();
        let history = format!("{},{}", json!({ "role": "user", "content": "a" }), json!({ "role": "assistant", "content": "b" }));
        let new = json!({ "role": "user", "content": "c" }).to_string();
        let tools = json!([{ "type": "function", "function": { "name": "t", "parameters": { "type": "object" } } }]);
        let body: Value = serde_json::from_slice(&provider.body(&[&system, &history, &new], &tools.to_string())).unwrap();
        assert_eq!(
            body,
            json!({ "model": "m\"odel", "stream": true, "tools": tools, "messages": [
                { "role": "system", "content": "be brief" },
                { "role": "user", "content": "a" }, { "role": "assistant", "content": "b" },
                { "role": "user", "content": "c" },
            ] })
        );
        // No history, no tools.
        let body: Value = serde_json::from_slice(&provider.body(&[&system, "", &new], "")).unwrap();
        assert_eq!(body, json!({ "model": "m\"odel", "stream": true, "messages": [
            { "role": "system", "content": "be brief" }, { "role": "user", "content": "c" },
        ] }));
    }

    /// `data: {chunk}` events, then `[DONE]`, as one body cut into pieces of `piece` bytes.
    fn read(events: &[Value], piece: usize) -> Result<Completion, ProviderError> {
        let mut body = String::new();
        for event in events {
            body.push_str(&format!("data: {event}\n\n"));
        }
        body.push_str("data: [DONE]\n\n");
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> = body.as_bytes().chunks(piece).map(|c| Ok(c.to_vec())).collect();
        futures::executor::block_on(read_completion(futures::stream::iter(chunks), |_| {}))
    }

    fn call_piece(index: Value, name: &str, arguments: &str) -> Value {
        json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [
            { "index": index, "id": format!("c{index}"), "function": { "name": name, "arguments": arguments } }
        ] } }] })
    }

    fn finish() -> Value {
        json!({ "choices": [{ "index": 0, "delta": {}, "finish_reason": "tool_calls" }] })
    }

    #[test]
    fn tool_calls_are_assembled_from_their_pieces() {
        let events = [
            json!({ "choices": [{ "index": 0, "delta": { "content": "Let me look." } }] }),
            call_piece(json!(0), "grocery_", "{\"a\""),
            call_piece(json!(0), "list", ":1}"),
            call_piece(json!(1), "grocery_get", "{}"),
            finish(),
        ];
        for piece in [1, 7, 4096] {
            let completion = read(&events, piece).unwrap();
            assert_eq!(completion.text, "Let me look.");
            assert_eq!(
                completion.tool_calls,
                [
                    ToolCall { id: "c0".into(), name: "grocery_list".into(), arguments: "{\"a\":1}".into() },
                    ToolCall { id: "c1".into(), name: "grocery_get".into(), arguments: "{}".into() },
                ]
            );
        }
    }

    #[test]
    fn a_huge_tool_call_index_is_refused_without_allocating_for_it() {
        // Before: the list was resized to the index (a billion calls) and the kernel killed the gateway.
        let error = read(&[call_piece(json!(1_000_000_000u64), "grocery_get_low_stock", "{}"), finish()], 4096).unwrap_err();
        let message = error.to_string();
        assert!(message.contains("1000000000") && message.contains(&MAX_TOOL_CALLS.to_string()), "{message}");
        for bad in [json!(-1), json!("3"), json!(1.5)] {
            let message = read(&[call_piece(bad.clone(), "t", "{}"), finish()], 4096).unwrap_err().to_string();
            assert!(message.contains("tool call index"), "{bad}: {message}");
        }
    }

    #[test]
    fn at_most_max_tool_calls_in_one_answer() {
        let calls: Vec<Value> = (0..MAX_TOOL_CALLS).map(|i| call_piece(json!(i), "t", "{}")).chain([finish()]).collect();
        assert_eq!(read(&calls, 4096).unwrap().tool_calls.len(), MAX_TOOL_CALLS);
        // Pieces without an index start a call each.
        let unindexed: Vec<Value> = (0..=MAX_TOOL_CALLS).map(|_| call_piece(Value::Null, "t", "{}")).chain([finish()]).collect();
        let message = read(&unindexed, 4096).unwrap_err().to_string();
        assert!(message.contains(&format!("more than {MAX_TOOL_CALLS} tool calls")), "{message}");
    }

    #[test]
    fn an_answer_past_the_byte_bound_is_refused() {
        // One event that never ends (no blank line): refused once the body passes the bound.
        let endless = futures::stream::iter((0..).map(|_| Ok::<_, std::io::Error>(vec![b'x'; 64 * 1024])));
        let line = futures::stream::iter([Ok::<_, std::io::Error>(b"data: ".to_vec())]).chain(endless);
        let message = futures::executor::block_on(read_completion(line, |_| {})).unwrap_err().to_string();
        assert!(message.contains(&MAX_STREAM_BYTES.to_string()), "{message}");
        // Arguments streamed in many small events: the same bound.
        let piece = call_piece(json!(0), "", &"y".repeat(60_000));
        let events: Vec<Value> = std::iter::once(call_piece(json!(0), "t", "")).chain(std::iter::repeat_n(piece, 300)).chain([finish()]).collect();
        let message = read(&events, 1 << 20).unwrap_err().to_string();
        assert!(message.contains(&MAX_STREAM_BYTES.to_string()), "{message}");
    }

    /// A field of the wrong type is named, where it used to be skipped (an answer read as empty).
    #[test]
    fn fields_of_the_wrong_type_are_named() {
        let delta = |d: Value| json!({ "choices": [{ "index": 0, "delta": d }] });
        for (events, named) in [
            (vec![json!({ "choices": "x" })], "\"choices\" is a string, not a list"),
            (vec![delta(json!({ "content": 5 }))], "delta.content is a number, not text"),
            (vec![delta(json!({ "tool_calls": {} }))], "delta.tool_calls is an object, not a list"),
            (vec![delta(json!({ "tool_calls": [{ "index": 0, "function": { "name": "t", "arguments": [1] } }] }))], "tool call 0's arguments are an array"),
            (vec![delta(json!({ "tool_calls": [{ "index": 0, "function": { "name": "t", "arguments": { "a": 1 } } }] }))], "tool call 0's arguments are an object, not text"),
        ] {
            let message = read(&events, 4096).unwrap_err().to_string();
            assert!(message.contains(named), "{events:?}: {message}");
        }
        // A chunk of usage figures only (no choices) is no fault.
        let usage = json!({ "choices": [], "usage": { "total_tokens": 3 } });
        assert_eq!(read(&[delta(json!({ "content": "ok" })), usage, json!({ "usage": {} }), finish()], 4096).unwrap().text, "ok");
    }

    /// An answer by its `Content-Type`: the stream asked for, a whole JSON answer from a server
    /// that does not stream, or something else named (a web page where the API was expected).
    #[test]
    fn an_answer_is_read_by_its_content_type() {
        assert_eq!(AnswerKind::of(None), AnswerKind::Stream);
        assert_eq!(AnswerKind::of(Some("text/event-stream; charset=utf-8")), AnswerKind::Stream);
        assert_eq!(AnswerKind::of(Some("Application/JSON")), AnswerKind::Whole);
        assert_eq!(AnswerKind::of(Some("text/html; charset=utf-8")), AnswerKind::Other("text/html; charset=utf-8".into()));

        let whole = |answer: &str| {
            let mut streamed = String::new();
            let chunks = answer.as_bytes().chunks(5).map(|c| Ok::<_, std::io::Error>(c.to_vec())).collect::<Vec<_>>();
            let read = futures::executor::block_on(read_whole_completion(futures::stream::iter(chunks), |t| streamed.push_str(t)));
            read.map(|completion| (completion, streamed))
        };
        let answer = json!({ "object": "chat.completion", "choices": [{ "index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Looking.",
            "tool_calls": [{ "id": "a", "type": "function", "function": { "name": "t1", "arguments": "{}" } },
                           { "type": "function", "function": { "name": "t2", "arguments": "{\"x\":1}" } }] } }] });
        let (completion, streamed) = whole(&answer.to_string()).unwrap();
        assert_eq!((completion.text.as_str(), streamed.as_str()), ("Looking.", "Looking."));
        assert_eq!(
            completion.tool_calls,
            [
                ToolCall { id: "a".into(), name: "t1".into(), arguments: "{}".into() },
                ToolCall { id: "call_1".into(), name: "t2".into(), arguments: "{\"x\":1}".into() },
            ]
        );
        let parts = json!({ "choices": [{ "message": { "content": [{ "type": "text", "text": "One, " }, { "type": "text", "text": "two." }] } }] });
        let (completion, streamed) = whole(&parts.to_string()).unwrap();
        assert_eq!((completion.text.as_str(), streamed.as_str()), ("One, two.", "One, two."));
        for (answer, named) in [
            ("{\"error\": {\"message\": \"no such model\"}}", "reported an error"),
            ("{\"choices\": []}", "holds no choice"),
            ("<html>", "is not JSON"),
            ("{\"choices\": [{\"message\": {\"content\": {}}}]}", "message.content is an object"),
            ("{\"choices\": [{\"message\": {\"content\": [{\"type\": \"image_url\"}]}}]}", "a part that is not text"),
        ] {
            let message = whole(answer).unwrap_err().to_string();
            assert!(message.contains(named), "{answer}: {message}");
        }
    }

    /// `body` cut into `piece`-byte chunks, read as a provider's answer.
    fn read_raw(body: &[u8], piece: usize) -> Result<Completion, ProviderError> {
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> = body.chunks(piece).map(|c| Ok(c.to_vec())).collect();
        futures::executor::block_on(read_completion(futures::stream::iter(chunks), |_| {}))
    }

    #[test]
    fn the_event_stream_is_read_as_the_sse_format_has_it() {
        let text = |t: &str| json!({ "choices": [{ "index": 0, "delta": { "content": t } }] });
        // CRLF and CR line ends, comments, `event:`/`id:`/`retry:` lines, data without a space,
        // an event of two data lines (joined by a newline: here inside a JSON string's spacing).
        let body = format!(
            ": keep-alive\r\n\r\nevent: message\r\nid: 1\r\nretry: 10\r\ndata: {}\r\n\r\ndata:{}\r\r\ndata: {{\"choices\": [{{\"index\": 0,\ndata: \"delta\": {{}}, \"finish_reason\": \"stop\"}}]}}\n\nevent: ping\n\ndata: [DONE]\n\n",
            text("Hel"),
            text("lo")
        );
        for piece in [1, 2, 7, body.len()] {
            let completion = read_raw(body.as_bytes(), piece).unwrap_or_else(|e| panic!("pieces of {piece}: {e}"));
            assert_eq!(completion.text, "Hello", "pieces of {piece}");
        }
        // What is no event stream is named as such, not taken for an unfinished answer.
        let message = read_raw(b"{\"error\": {\"message\": \"no such model\"}}\n", 64).unwrap_err().to_string();
        assert!(message.contains("not server-sent events"), "{message}");
    }

    /// Lines and events as a provider may cut them, at sizes where reading the buffer again for
    /// every chunk or copying it for every line (the parser before) takes half a minute to
    /// minutes: each finishes at once now (a test that would hang before, not a timed one).
    #[test]
    fn reads_in_linear_time_however_the_stream_is_cut() {
        let done = b"\n\ndata: {\"choices\": [{\"index\": 0, \"delta\": {}, \"finish_reason\": \"stop\"}]}\n\ndata: [DONE]\n\n";
        // A comment line of 8 MB, in 1 KiB chunks.
        let mut long_line = b":".to_vec();
        long_line.extend(std::iter::repeat_n(b'x', 8 << 20));
        long_line.extend_from_slice(done);
        assert!(read_raw(&long_line, 1024).is_ok());
        // 12 MB of comment lines, in one chunk and in 64 KiB chunks.
        let mut comments = b":c\n".repeat(4 << 20);
        comments.extend_from_slice(done);
        assert!(read_raw(&comments, comments.len()).is_ok());
        assert!(read_raw(&comments, 64 << 10).is_ok());
    }
}
