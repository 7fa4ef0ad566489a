//! The short way of a tool call or a resource read to an HTTP app (see [`super`]): the request's JSON
//! goes to the app on a pooled connection (the host's client when it sends the module's requests,
//! else the module's own; see [`super::http_sender`]), and its answer comes back as JSON.
//!
//! It speaks for the session rmcp opened: [`RecordingClient`], the HTTP client rmcp's transport
//! uses, notes the session id and the headers rmcp sends on it (the negotiated protocol version,
//! the manifest's headers), and a `tools/call` goes out with the same. A session of the
//! 2026-07-28 revision has no id: its requests carry the revision's envelope (see
//! [`super::message::Envelope`]) and the per-message headers `Mcp-Method` and `Mcp-Name`, as
//! rmcp's do; a tool whose schema mirrors arguments into `Mcp-Param-*` headers is left to rmcp.
//! Everything rmcp would do for the call is done here too, in the same way: the app's
//! notifications during the call reach the call's client or the host (as
//! `Notifier` (`notifier.rs`) does for rmcp's), its questions are put to the call's client and
//! answered on the session (as `UpstreamHandler` (`session.rs`) does), a cancel or a timeout
//! tells the app (`notifications/cancelled`; on a 2026-07-28 session the dropped request is the
//! cancel, as with rmcp).
//!
//! It takes nothing when the app has forgotten the session (HTTP 404): rmcp then re-initialises it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use parking_lot::RwLock;
use rmcp::model::{ClientJsonRpcMessage, RequestId};
use rmcp::transport::common::client_side_sse::BoxedSseResponse;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use serde_json::{json, Value};

use crate::runtime::parse_count::{self, Direction};
use crate::upstream::short_way::http_sender::{Answer, Body, HttpSender};
use crate::upstream::app_result::AppResult;
use crate::upstream::short_way::message::{cancelled_notification, read_incoming, read_incoming_text, request_message, CallContext, Incoming, Relayed};
use crate::upstream::error::UpstreamError;

/// The headers rmcp adds per message (SEP-2243); the rest of what it sends is the session's.
fn is_per_message(name: &HeaderName) -> bool {
    let name = name.as_str();
    name.eq_ignore_ascii_case("mcp-method") || name.eq_ignore_ascii_case("mcp-name") || name.starts_with("mcp-param-")
}

/// What rmcp sends on the session: its id (none on a 2026-07-28 session) and its headers.
struct Seen {
    session_id: Option<Arc<str>>,
    headers: HeaderMap,
}

/// rmcp's HTTP client for an app's session, noting the session it speaks on (see the module
/// docs). Everything else is reqwest's, as rmcp would use it.
#[derive(Clone)]
pub struct RecordingClient {
    inner: reqwest::Client,
    seen: Arc<RwLock<Option<Seen>>>,
}

impl RecordingClient {
    /// Notes what a message of rmcp's is sent with: a session id, or, without one, the headers of
    /// a 2026-07-28 message (its revision in `MCP-Protocol-Version`). Only a change is written.
    fn record(&self, session_id: Option<&Arc<str>>, headers: &HashMap<HeaderName, HeaderValue>) {
        let version = headers.get(&HeaderName::from_static("mcp-protocol-version"));
        if session_id.is_none() && version.is_none_or(|v| v.as_bytes() < MODERN.as_bytes()) {
            return;
        }
        if self.seen.read().as_ref().is_some_and(|seen| seen.session_id.as_ref() == session_id) {
            return;
        }
        let headers = headers.iter().filter(|(name, _)| !is_per_message(name)).map(|(n, v)| (n.clone(), v.clone())).collect();
        *self.seen.write() = Some(Seen { session_id: session_id.cloned(), headers });
    }
}

impl StreamableHttpClient for RecordingClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.record(session_id.as_ref(), &custom_headers);
        self.inner.post_message(uri, message, session_id, auth_header, custom_headers).await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.record(session_id.as_ref(), &custom_headers);
        self.inner
            .post_message_with_max_sse_event_size(uri, message, session_id, auth_header, custom_headers, max_sse_event_size)
            .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.record(session_id.as_ref(), &custom_headers);
        self.inner.post_message_with_response_limits(uri, message, session_id, auth_header, custom_headers, limits).await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        // The session ends: the short way stops speaking for it.
        if self.seen.read().as_ref().is_some_and(|seen| seen.session_id.as_ref() == Some(&session_id)) {
            *self.seen.write() = None;
        }
        match self.inner.delete_session(uri, session_id, auth_header, custom_headers).await {
            // Nothing listens there any more: the app is gone, and its sessions with it. Nothing
            // to forget, and nothing for rmcp to report as an ERROR after the loss was reported.
            Err(StreamableHttpError::Client(e)) if e.is_connect() => {
                tracing::debug!("the app could not be reached to forget its session (it is gone): {e}");
                Ok(())
            }
            other => other,
        }
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxedSseResponse, StreamableHttpError<Self::Error>> {
        self.inner.get_stream(uri, session_id, last_event_id, auth_header, custom_headers).await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxedSseResponse, StreamableHttpError<Self::Error>> {
        self.inner
            .get_stream_with_max_sse_event_size(uri, session_id, last_event_id, auth_header, custom_headers, max_sse_event_size)
            .await
    }
}

/// The short way to one app (see the module docs).
pub struct HttpShortWay {
    url: reqwest::Url,
    /// Sends its requests: the host, or the module's own client (`http_sender.rs`).
    sender: HttpSender,
    seen: Arc<RwLock<Option<Seen>>>,
    /// Ids of the short way's requests are strings (`gw-1`, …), so they never meet rmcp's numbers
    /// on the same session.
    next_id: AtomicU64,
    max_message_bytes: usize,
}

impl HttpShortWay {
    /// A short way for the session whose HTTP client is [`Self::client_for_rmcp`]'s.
    pub fn new(url: &str, sender: HttpSender, max_message_bytes: usize) -> Option<HttpShortWay> {
        let url = reqwest::Url::parse(url).ok()?;
        Some(HttpShortWay { url, sender, seen: Arc::default(), next_id: AtomicU64::new(1), max_message_bytes })
    }

    /// The client rmcp's transport is given: the module's own, noting the session.
    pub fn client_for_rmcp(&self) -> RecordingClient {
        RecordingClient { inner: self.sender.own_client().clone(), seen: self.seen.clone() }
    }

    /// Whether its requests go through the host (see [`HttpSender::runs_on_host`]).
    pub fn runs_on_host(&self) -> bool {
        self.sender.runs_on_host()
    }

    /// Sends one request of `method` (a `tools/call`, see the module docs for what is taken, or
    /// a list, see [`super::ShortWay::request`]) with `params`.
    pub async fn request(&self, method: &str, params: Option<&Value>, call: CallContext<'_>) -> Relayed {
        // An initialize-era session speaks with its id; a 2026-07-28 one without.
        let Some((session_id, mut headers)) = self
            .seen
            .read()
            .as_ref()
            .filter(|s| s.session_id.is_some() == call.envelope.is_none())
            .map(|s| (s.session_id.clone(), s.headers.clone()))
        else {
            return Relayed::NotTaken;
        };
        if call.envelope.is_some() {
            // The per-message headers rmcp's way sends (SEP-2243): `Mcp-Name` is a call's tool
            // or a read's URI, sent as it is when rmcp would send it so.
            let (method_header, name, plain): (_, _, fn(&HeaderValue) -> bool) = match method {
                "tools/call" if !call.binds_headers => (HeaderValue::from_static("tools/call"), "name", is_plain_name),
                "resources/read" => (HeaderValue::from_static("resources/read"), "uri", is_plain_uri),
                // rmcp's way: it writes a tool's Mcp-Param-* headers, and its transport learns a
                // 2026-07-28 app's tools from their lists (the arguments it mirrors into them).
                _ => return Relayed::NotTaken,
            };
            let value = params.and_then(|p| p.get(name)).and_then(Value::as_str).and_then(|n| HeaderValue::from_str(n).ok());
            match value {
                Some(value) if plain(&value) => {
                    headers.insert(HeaderName::from_static("mcp-method"), method_header);
                    headers.insert(HeaderName::from_static("mcp-name"), value);
                }
                // rmcp's way encodes such a value.
                _ => return Relayed::NotTaken,
            }
        }
        // The headers of every POST of this exchange (the session's copy is the short way's).
        headers.insert(http::header::ACCEPT, HeaderValue::from_static("text/event-stream, application/json"));
        headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(id) = &session_id {
            let Ok(id) = HeaderValue::from_str(id) else {
                return Relayed::Done(Err(UpstreamError::Transport("the session id is not a valid header value".into())));
            };
            headers.insert(HeaderName::from_static("mcp-session-id"), id);
        }
        let session_id = session_id.as_deref();
        let id = format!("gw-{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let body = request_message(&id, method, params, call.relay, call.envelope);
        let exchange = self.exchange(session_id, &headers, &id, &body, &call);
        let outcome = tokio::select! {
            outcome = tokio::time::timeout(call.timeout, exchange) => match outcome {
                Ok(outcome) => outcome,
                Err(_) => {
                    self.tell_cancelled(session_id, &headers, &id, "the gateway's request timed out").await;
                    return Relayed::Done(Err(UpstreamError::Timeout(call.timeout)));
                }
            },
            _ = call.cancel.cancelled() => {
                self.tell_cancelled(session_id, &headers, &id, "cancelled by the client of the gateway").await;
                return Relayed::Done(Err(UpstreamError::Cancelled));
            }
        };
        match outcome {
            Exchange::Answer(answer) => Relayed::Done(answer),
            Exchange::SessionGone => {
                // The app forgot the session: rmcp's way re-initialises it, and this way waits
                // for the new one.
                let mut seen = self.seen.write();
                if seen.as_ref().is_some_and(|s| s.session_id.as_deref() == session_id) {
                    *seen = None;
                }
                Relayed::NotTaken
            }
        }
    }

    /// POSTs `body` (a message's text) with `headers`, those of the exchange it belongs to.
    async fn post(&self, headers: &HeaderMap, body: &[u8]) -> Result<Answer, String> {
        self.sender.post(&self.url, headers, body, self.max_message_bytes).await
    }

    /// The request and its answer, with whatever the app sends for it meanwhile.
    async fn exchange(&self, session_id: Option<&str>, headers: &HeaderMap, id: &str, body: &[u8], call: &CallContext<'_>) -> Exchange {
        let failed = |e: String| Exchange::Answer(Err(UpstreamError::Transport(e)));
        let Answer { status, content_type, body: mut answer } = match self.post(headers, body).await {
            Ok(answer) => answer,
            Err(e) => return failed(e),
        };
        if status == 404 && session_id.is_some() {
            return Exchange::SessionGone;
        }
        if !(200..300).contains(&status) {
            let reason = http::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or_default();
            return failed(format!("the app answered HTTP {status} {reason}").trim_end().to_string());
        }
        if content_type.starts_with("application/json") {
            let bytes = match read_bounded(&mut answer, self.max_message_bytes).await {
                Ok(b) => b,
                Err(e) => return failed(e),
            };
            let message = match read_incoming(&bytes) {
                Ok(m) => m,
                Err(e) => return failed(format!("the app's answer is not JSON: {e}")),
            };
            return match self.take(message, &bytes, id, headers, call).await {
                Some(answer) => Exchange::Answer(answer),
                None => failed("the app's JSON answer was not the response to the request".into()),
            };
        }
        if !content_type.starts_with("text/event-stream") {
            return failed(format!("the app answered with content type '{content_type}'"));
        }
        let mut events = SseReader::new(answer, self.max_message_bytes);
        let mut resumed = 0;
        loop {
            match events.next_data().await {
                Ok(Some(data)) => {
                    let Ok(message) = read_incoming_text(&data) else {
                        tracing::debug!("skipping an event of the app's stream that is not JSON");
                        continue;
                    };
                    if let Some(answer) = self.take(message, data.as_bytes(), id, headers, call).await {
                        // The rest of the stream is read to its end as the body is dropped
                        // (`http_sender.rs`), so that its connection is reused.
                        return Exchange::Answer(answer);
                    }
                }
                // A stream the app ends before the response, with event ids, is to be resumed
                // (GET with Last-Event-ID), as rmcp's client does.
                Ok(None) => match (events.last_id.take(), resumed < MAX_RESUMES) {
                    (Some(last_id), true) => {
                        resumed += 1;
                        match self.resume(headers, &last_id).await {
                            Ok(stream) => events = SseReader::new(stream, self.max_message_bytes),
                            Err(e) => return failed(format!("the app's response stream ended without the response ({e})")),
                        }
                    }
                    _ => return failed("the app's response stream ended without the response".into()),
                },
                Err(e) => return failed(e),
            }
        }
    }

    /// Re-opens an ended response stream after its event `last_id` (rare: sent by the module's
    /// own client).
    async fn resume(&self, headers: &HeaderMap, last_id: &str) -> Result<Body, String> {
        // The exchange's headers carry the session id; a GET has no body, and asks for events.
        let mut headers = without_per_message(headers);
        headers.remove(http::header::CONTENT_TYPE);
        headers.insert(http::header::ACCEPT, HeaderValue::from_static("text/event-stream"));
        let response = self
            .sender
            .own_client()
            .get(self.url.clone())
            .headers(headers)
            .header("last-event-id", last_id)
            .send()
            .await
            .map_err(|e| format!("resuming it failed: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("resuming it was answered HTTP {}", response.status()));
        }
        Ok(self.sender.own_answer(response).body)
    }

    /// Handles one message of the app's answer (`text`, read as `message`): the response
    /// (returned), a notification, or a question for the call's client.
    async fn take(
        &self,
        message: Incoming,
        text: &[u8],
        id: &str,
        headers: &HeaderMap,
        call: &CallContext<'_>,
    ) -> Option<Result<AppResult, UpstreamError>> {
        match message {
            Incoming::Response { id: answered, outcome } if answered == id => return Some(outcome),
            // Another request's response: not this call's.
            Incoming::Response { .. } => return None,
            Incoming::Other => {}
        }
        // A notification or a question (rare during a call): read whole.
        let message: Value = parse_count::parsed_slice(Direction::Answer, text).ok()?;
        let method = message.get("method").and_then(Value::as_str).map(str::to_string)?;
        match message.get("id").cloned() {
            None => call.notifier.deliver_message(message),
            Some(request_id) => {
                let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
                let origin = RequestId::String(id.into());
                let reply = match call.notifier.answer_question(&method, params, Some(&origin), call.cancel).await {
                    Ok(result) => json!({ "jsonrpc": "2.0", "id": request_id, "result": result }),
                    Err(error) => json!({ "jsonrpc": "2.0", "id": request_id, "error": error }),
                };
                let reply = serde_json::to_vec(&reply).unwrap_or_default();
                if let Err(e) = self.post(&without_per_message(headers), &reply).await {
                    tracing::debug!("could not answer the app's {method}: {e}");
                }
            }
        }
        None
    }

    /// Tells the app a request of the short way is cancelled (as rmcp tells it of its own).
    ///
    /// On a 2026-07-28 session there is nothing to tell: the request's own stream is the
    /// request, and it has been dropped (closing its connection), which is how rmcp cancels there.
    async fn tell_cancelled(&self, session_id: Option<&str>, headers: &HeaderMap, id: &str, reason: &str) {
        if session_id.is_none() {
            return;
        }
        let notification = cancelled_notification(id, reason);
        let sent = tokio::time::timeout(Duration::from_secs(5), self.post(&without_per_message(headers), &notification)).await;
        if !matches!(sent, Ok(Ok(_))) {
            tracing::debug!("could not tell the app about a cancelled tools/call");
        }
    }
}

/// The first revision whose requests carry their own envelope and headers.
const MODERN: &str = "2026-07-28";

/// A tool name rmcp's way sends in `Mcp-Name` as it is (others it encodes).
fn is_plain_name(name: &HeaderValue) -> bool {
    !name.is_empty() && name.as_bytes().iter().all(|b| b.is_ascii_alphanumeric() || b"_-./".contains(b))
}

/// A resource URI rmcp's way sends in `Mcp-Name` as it is: visible ASCII, not its Base64
/// sentinel `=?base64?…?=` (others it encodes).
fn is_plain_uri(uri: &HeaderValue) -> bool {
    let bytes = uri.as_bytes();
    !bytes.is_empty() && bytes.iter().all(|b| (0x21..=0x7e).contains(b)) && !bytes.starts_with(b"=?")
}

/// `headers` without those of one message (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`).
fn without_per_message(headers: &HeaderMap) -> HeaderMap {
    headers.iter().filter(|(name, _)| !is_per_message(name)).map(|(n, v)| (n.clone(), v.clone())).collect()
}

/// How often one response stream is resumed at most.
const MAX_RESUMES: usize = 5;

enum Exchange {
    Answer(Result<AppResult, UpstreamError>),
    SessionGone,
}

async fn read_bounded(answer: &mut Body, max: usize) -> Result<Vec<u8>, String> {
    if let Body::Whole(whole) = answer {
        // The host read it, within the same cap.
        return Ok(whole.take().unwrap_or_default());
    }
    let mut body = Vec::new();
    while let Some(chunk) = answer.next_chunk().await {
        let chunk = chunk.map_err(|e| format!("reading the app's answer failed: {e}"))?;
        if body.len() + chunk.len() > max {
            return Err(format!("the app's answer is larger than {max} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The `data` of each event of a server-sent event stream, one event at a time, none larger
/// than the message cap.
///
/// Linear in the stream, whatever an app makes of its chunks: each byte is searched for the
/// blank line that ends its event once (the search goes on from where it stopped when a chunk
/// comes), events are taken off by moving a start mark, and what is left is moved to the front
/// once per chunk read. Searching the whole buffer again after every chunk, and draining it
/// event by event, held the gateway's worker for 7 s on a 4 MB answer sent in 1 KiB chunks and
/// for 20 s on 1 MB of comment events sent at once.
struct SseReader {
    stream: Body,
    buffer: Vec<u8>,
    /// Where the events not yet read begin in `buffer`.
    start: usize,
    /// Where the search for the end of the event at `start` goes on (no blank line begins
    /// between `start` and here).
    searched: usize,
    max: usize,
    /// The id of the last event that had one (to resume the stream after).
    last_id: Option<String>,
}

impl SseReader {
    fn new(stream: Body, max: usize) -> Self {
        SseReader { stream, buffer: Vec::new(), start: 0, searched: 0, max, last_id: None }
    }

    /// The next event that has data; `None` at the stream's end.
    async fn next_data(&mut self) -> Result<Option<String>, String> {
        loop {
            while let Some((end, skip)) = self.event_end() {
                let (id, data) = parse_event(&self.buffer[self.start..end]);
                self.start = end + skip;
                self.searched = self.start;
                if id.is_some() {
                    self.last_id = id;
                }
                if let Some(data) = data {
                    return Ok(Some(data));
                }
            }
            if self.buffer.len() - self.start > self.max {
                return Err(format!("an event of the app's stream is larger than {} bytes", self.max));
            }
            match self.stream.next_chunk().await {
                Some(Ok(chunk)) => {
                    self.buffer.drain(..self.start);
                    self.searched -= self.start;
                    self.start = 0;
                    self.buffer.extend_from_slice(&chunk);
                }
                Some(Err(e)) => return Err(format!("the app's response stream failed: {e}")),
                None => {
                    let (id, data) = parse_event(&self.buffer[self.start..]);
                    self.buffer.clear();
                    self.start = 0;
                    self.searched = 0;
                    if id.is_some() {
                        self.last_id = id;
                    }
                    return Ok(data);
                }
            }
        }
    }

    /// Where the event at `start` ends (a blank line: `\n\n` or `\r\n\r\n`), and the length
    /// of the separator; `None` until the buffer holds it.
    fn event_end(&mut self) -> Option<(usize, usize)> {
        let buffer = &self.buffer;
        for newline in memchr::memchr_iter(b'\n', &buffer[self.searched..]).map(|i| self.searched + i) {
            match buffer.get(newline + 1) {
                Some(b'\n') => return Some((newline, 2)),
                Some(b'\r') if newline > self.start && buffer[newline - 1] == b'\r' => match buffer.get(newline + 2) {
                    Some(b'\n') => return Some((newline - 1, 4)),
                    Some(_) => {}
                    None => {
                        // `\r\n\r` at the end: the next chunk says.
                        self.searched = newline;
                        return None;
                    }
                },
                Some(_) => {}
                None => {
                    self.searched = newline;
                    return None;
                }
            }
        }
        self.searched = buffer.len();
        None
    }
}

/// One event's id and its joined `data:` lines, if it has them. Read as bytes, the data made text
/// once at the end (an app's UI is hundreds of KiB in one event); bytes that are not UTF-8 are
/// replaced, as a text decoder of the stream would.
fn parse_event(event: &[u8]) -> (Option<String>, Option<String>) {
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    let (mut id, mut data): (Option<Vec<u8>>, Option<Vec<u8>>) = (None, None);
    // Lines found with `memchr` (a split by a closure tests each byte: a tenth of a UI read's
    // gateway CPU went to it).
    let mut start = 0;
    let ends = memchr::memchr_iter(b'\n', event).chain(std::iter::once(event.len()));
    for end in ends {
        let line = &event[start..end];
        start = end + 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let (field, value) = match memchr::memchr(b':', line) {
            Some(colon) => (&line[..colon], line[colon + 1..].strip_prefix(b" ").unwrap_or(&line[colon + 1..])),
            None => (line, &b""[..]),
        };
        match field {
            b"id" => id = Some(value.to_vec()),
            b"data" => match &mut data {
                Some(d) => {
                    d.push(b'\n');
                    d.extend_from_slice(value);
                }
                None => data = Some(value.to_vec()),
            },
            _ => {}
        }
    }
    (id.map(text), data.filter(|d| !d.is_empty()).map(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body made of `chunks`.
    fn body_of(chunks: &[&'static str]) -> Body {
        let chunks: Vec<Result<Vec<u8>, String>> = chunks.iter().map(|c| Ok(c.as_bytes().to_vec())).collect();
        Body::Own { stream: Some(futures::StreamExt::boxed(futures::stream::iter(chunks))), tasks: None }
    }

    fn read_all(chunks: Vec<&'static str>, max: usize) -> Result<Vec<String>, String> {
        let mut reader = SseReader::new(body_of(&chunks), max);
        futures::executor::block_on(async {
            let mut out = Vec::new();
            while let Some(data) = reader.next_data().await? {
                out.push(data);
            }
            Ok(out)
        })
    }

    #[test]
    fn an_events_fields_are_read_from_its_bytes() {
        assert_eq!(parse_event(b"id: 7\r\ndata:{\"a\":\r\ndata:  1}\r\n: note\r\nevent: message"), (Some("7".into()), Some("{\"a\":\n 1}".into())));
        assert_eq!(parse_event(b"data: caf\xc3\xa9 \xff!"), (None, Some("caf\u{e9} \u{fffd}!".into())), "UTF-8 kept, other bytes replaced");
        assert_eq!(parse_event(b"id: 1\ndata:"), (Some("1".into()), None), "no data");
        assert_eq!(parse_event(b"data"), (None, None), "a field without a colon has an empty value");
    }

    #[test]
    fn events_are_read_across_chunks_with_either_line_ending() {
        let events = read_all(vec!["id: 1\ndata: {\"a\"", ":1}\n\n: comment\n\nevent: message\r\ndata: x\r\ndata:y\r\n\r\n", "data: last"], 1024);
        assert_eq!(events.unwrap(), ["{\"a\":1}", "x\ny", "last"]);
    }

    #[test]
    fn a_priming_event_without_data_is_skipped() {
        assert_eq!(read_all(vec!["id: 0\nretry: 100\n\ndata: {}\n\n"], 1024).unwrap(), ["{}"]);
    }

    #[test]
    fn the_last_event_id_is_kept_for_resuming() {
        let mut reader = SseReader::new(body_of(&["id: a\ndata: 1\n\nid: b\nretry: 10\n\n: note\n\n"]), 1024);
        futures::executor::block_on(async {
            assert_eq!(reader.next_data().await.unwrap().as_deref(), Some("1"));
            assert_eq!(reader.next_data().await.unwrap(), None);
        });
        assert_eq!(reader.last_id.as_deref(), Some("b"), "a priming event's id counts");
    }

    #[test]
    fn separators_split_across_chunks_are_found() {
        let events = read_all(vec!["data: a\r\n", "\r", "\ndata: b\n", "\ndata: c\r\n\r\n"], 1024);
        assert_eq!(events.unwrap(), ["a", "b", "c"]);
        let events = read_all(vec!["data: a\r", "\n\r\n", "data: b\r\n\r", "\n"], 1024);
        assert_eq!(events.unwrap(), ["a", "b"]);
    }

    /// An app's stream of many events, or of one large event in small chunks, is read in one
    /// pass over its bytes (both took seconds of the worker when each chunk had the buffer
    /// searched again from its start, and each event drained off its front).
    #[test]
    fn many_events_and_large_events_in_small_chunks_are_read_in_one_pass() {
        let comments: &'static str = ":\n\n".repeat(2_000_000).leak();
        let many = [comments, "data: end\n\n"];
        assert_eq!(read_all(many.to_vec(), 64 << 20).unwrap(), ["end"]);
        let large: &'static str = format!("data: {}\n\n", "x".repeat(8 << 20)).leak();
        let chunks: Vec<&'static str> = large.as_bytes().chunks(1024).map(|c| std::str::from_utf8(c).unwrap()).collect();
        let events = read_all(chunks, 64 << 20).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].len(), 8 << 20);
    }

    #[test]
    fn an_event_over_the_cap_is_an_error() {
        let err = read_all(vec!["data: ", "0123456789", "0123456789"], 16).unwrap_err();
        assert!(err.contains("larger than 16 bytes"), "{err}");
    }

    #[test]
    fn per_message_headers_are_not_the_sessions() {
        assert!(is_per_message(&HeaderName::from_static("mcp-method")));
        assert!(is_per_message(&HeaderName::from_static("mcp-param-region")));
        assert!(!is_per_message(&HeaderName::from_static("mcp-protocol-version")));
        assert!(!is_per_message(&HeaderName::from_static("authorization")));
    }
}
