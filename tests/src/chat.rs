//! A client of the gateway's chat (`POST /apps/chat`, SPEC R33) for the tests: it reads a turn's
//! `text/event-stream` incrementally, stamping each frame with the instant it arrived, so a test
//! can see frames as they come, compare the timing of two turns, answer `input` frames while the
//! turn waits, or go away in the middle of a turn.
//!
//! Each [`ChatStream`] reads on a thread of its own (a small tokio runtime, so dropping the
//! stream or calling [`ChatStream::disconnect`] closes the connection at once, even while the
//! gateway sends nothing). Every wait takes a timeout; a missing frame fails the test with the
//! frames seen so far, never hangs it.
//!
//! The parser is deliberately strict about the wire format the gateway must produce: events are
//! `data: <one JSON object with a "type">` blocks ended by a blank line; comment lines (`:`,
//! keep-alives) are skipped; anything else is reported as a protocol error.

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::GatewayProcess;

/// The last-resort bound of one chat request (a turn that runs longer fails the test).
pub const CHAT_REQUEST_LIMIT: Duration = Duration::from_secs(300);

/// One frame of a turn.
#[derive(Debug, Clone)]
pub struct Frame {
    /// When the client read it.
    pub at: Instant,
    /// The JSON of its `data:` line.
    pub data: Value,
}

impl Frame {
    /// `data.type` (empty if missing).
    pub fn ty(&self) -> &str {
        self.data["type"].as_str().unwrap_or("")
    }
}

/// What the reader thread reports.
enum Event {
    Head { status: u16, content_type: String },
    /// The whole body of a response that is not an event stream (or not 200).
    Body(String),
    Frame(Frame),
    /// Something that is not a well-formed frame.
    Protocol(String),
    /// The stream ended: cleanly (None) or with a transport error.
    End(Option<String>),
}

/// What [`ChatStream::try_next`] found.
#[derive(Debug)]
pub enum Next {
    Frame(Frame),
    Timeout,
    /// The stream ended (with a transport error, if any) without another frame.
    Ended(Option<String>),
}

/// A turn in progress (or finished): its response, read as it arrives.
pub struct ChatStream {
    label: String,
    rx: mpsc::Receiver<Event>,
    head: Option<(u16, String)>,
    body: Option<String>,
    frames: Vec<Frame>,
    ended: Option<Option<String>>,
    cancel: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    /// When the request was sent.
    pub started: Instant,
}

/// Starts a turn: `POST {gw}/apps/chat` with `body` (sent as JSON). Returns at once.
pub fn start_chat(gw: &GatewayProcess, body: &Value) -> ChatStream {
    ChatStream::post(&gw.url("/apps/chat"), body.to_string(), "chat")
}

impl ChatStream {
    /// `POST url` with `body` (`application/json`), read on a thread of its own. `label` names
    /// the stream in failure messages.
    pub fn post(url: &str, body: String, label: &str) -> ChatStream {
        let (tx, rx) = mpsc::channel();
        let (cancel_tx, cancel_rx) = tokio::sync::oneshot::channel::<()>();
        let url = url.to_string();
        let thread = std::thread::Builder::new()
            .name(format!("chat reader {label}"))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
                runtime.block_on(async move {
                    tokio::select! {
                        _ = read_turn(url, body, tx.clone()) => {}
                        _ = cancel_rx => {}
                    }
                });
            })
            .expect("spawning a chat reader");
        ChatStream {
            label: label.to_string(),
            rx,
            head: None,
            body: None,
            frames: Vec::new(),
            ended: None,
            cancel: Some(cancel_tx),
            thread: Some(thread),
            started: Instant::now(),
        }
    }

    /// Names the stream in failure messages (e.g. "turn A").
    pub fn labelled(mut self, label: &str) -> ChatStream {
        self.label = label.to_string();
        self
    }

    fn absorb(&mut self, event: Event) -> Option<Next> {
        match event {
            Event::Head { status, content_type } => {
                self.head = Some((status, content_type));
                None
            }
            Event::Body(body) => {
                self.body = Some(body);
                None
            }
            Event::Frame(frame) => {
                self.frames.push(frame.clone());
                Some(Next::Frame(frame))
            }
            Event::Protocol(message) => panic!("{}: not a well-formed chat frame: {message}\n{}", self.label, self.describe()),
            Event::End(error) => {
                self.ended = Some(error.clone());
                Some(Next::Ended(error))
            }
        }
    }

    /// The response status and content type, waiting for the headers up to `timeout`.
    pub fn head(&mut self, timeout: Duration) -> (u16, String) {
        let deadline = Instant::now() + timeout;
        while self.head.is_none() {
            if let Some(error) = &self.ended {
                panic!("{}: no response: {error:?}", self.label);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(event) => {
                    if let Some(Next::Frame(_)) = self.absorb(event) {
                        unreachable!("frames come after the head")
                    }
                }
                Err(_) => panic!("{}: no response headers within {timeout:?}", self.label),
            }
        }
        self.head.clone().unwrap()
    }

    /// Asserts the response is `200 text/event-stream`.
    pub fn expect_event_stream(&mut self, timeout: Duration) -> &mut Self {
        let (status, content_type) = self.head(timeout);
        if status != 200 || !content_type.starts_with("text/event-stream") {
            self.wait_body(Duration::from_secs(10));
            panic!(
                "{}: expected 200 text/event-stream, got {status} {content_type}: {}",
                self.label,
                self.body.as_deref().unwrap_or("(no body)")
            );
        }
        self
    }

    /// For a response that is not an event stream: its status and body.
    pub fn status_and_body(&mut self, timeout: Duration) -> (u16, String) {
        let (status, _) = self.head(timeout);
        self.wait_body(timeout);
        (status, self.body.clone().unwrap_or_default())
    }

    fn wait_body(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.body.is_none() && self.ended.is_none() {
            match self.rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(event) => {
                    self.absorb(event);
                }
                Err(_) => return,
            }
        }
    }

    /// The next frame, the end of the stream, or a timeout.
    pub fn try_next(&mut self, timeout: Duration) -> Next {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(error) = &self.ended {
                return Next::Ended(error.clone());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(event) => {
                    if let Some(next) = self.absorb(event) {
                        return next;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => return Next::Timeout,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    self.ended = Some(Some("the reader stopped".into()));
                }
            }
        }
    }

    /// The next frame; panics (with what came so far) on a timeout or the end of the stream.
    pub fn next(&mut self, timeout: Duration) -> Frame {
        match self.try_next(timeout) {
            Next::Frame(frame) => frame,
            Next::Timeout => panic!("{}: no frame within {timeout:?}\n{}", self.label, self.describe()),
            Next::Ended(error) => panic!("{}: the stream ended ({error:?}) where a frame was expected\n{}", self.label, self.describe()),
        }
    }

    /// Reads until a frame of type `ty` and returns it. Panics if `done` comes first (unless
    /// `ty` is `done`), on a timeout, or at the end of the stream.
    pub fn until(&mut self, ty: &str, timeout: Duration) -> Frame {
        let deadline = Instant::now() + timeout;
        loop {
            let frame = self.next(deadline.saturating_duration_since(Instant::now()));
            if frame.ty() == ty {
                return frame;
            }
            if frame.ty() == "done" {
                panic!("{}: the turn ended before a '{ty}' frame\n{}", self.label, self.describe());
            }
        }
    }

    /// Reads up to and including the `done` frame; returns every frame of the turn. Then checks
    /// that the response ends (the gateway closes the stream after `done`).
    pub fn until_done(&mut self, timeout: Duration) -> Vec<Frame> {
        if !self.frames.iter().any(|f| f.ty() == "done") {
            self.until("done", timeout);
        }
        match self.try_next(Duration::from_secs(10)) {
            Next::Ended(None) => {}
            Next::Ended(Some(error)) => panic!("{}: the stream ended with an error after done: {error}", self.label),
            Next::Frame(frame) => panic!("{}: a frame after done: {}\n{}", self.label, frame.data, self.describe()),
            Next::Timeout => panic!("{}: the stream stayed open after done", self.label),
        }
        self.frames.clone()
    }

    /// Every frame read so far.
    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }

    /// The types of the frames read so far.
    pub fn types(&self) -> Vec<String> {
        self.frames.iter().map(|f| f.ty().to_string()).collect()
    }

    /// The frames of type `ty` read so far.
    pub fn of_type(&self, ty: &str) -> Vec<Frame> {
        self.frames.iter().filter(|f| f.ty() == ty).cloned().collect()
    }

    /// The `sessionId` of the `session` frame (read until it, up to `timeout`).
    pub fn session_id(&mut self, timeout: Duration) -> String {
        let frame = match self.frames.iter().find(|f| f.ty() == "session") {
            Some(frame) => frame.clone(),
            None => self.until("session", timeout),
        };
        frame.data["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("{}: a session frame without sessionId: {}", self.label, frame.data))
            .to_string()
    }

    /// The concatenated `text` deltas read so far.
    pub fn text(&self) -> String {
        self.frames.iter().filter(|f| f.ty() == "text").filter_map(|f| f.data["delta"].as_str()).collect()
    }

    /// The first frame of type `ty` read so far.
    pub fn first(&self, ty: &str) -> Option<&Frame> {
        self.frames.iter().find(|f| f.ty() == ty)
    }

    /// Reads whatever arrives within `window` without failing (e.g. to show nothing came).
    pub fn drain_for(&mut self, window: Duration) -> Vec<Frame> {
        let deadline = Instant::now() + window;
        let mut got = Vec::new();
        loop {
            match self.try_next(deadline.saturating_duration_since(Instant::now())) {
                Next::Frame(frame) => got.push(frame),
                Next::Timeout | Next::Ended(_) => return got,
            }
        }
    }

    /// Closes the connection now (the gateway sees the client go away).
    pub fn disconnect(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(cancel) = self.cancel.take() {
            let _ = cancel.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }

    /// The frames so far, one per line, with their arrival offsets (for failure messages).
    pub fn describe(&self) -> String {
        let mut out = format!("--- {} frames so far ---\n", self.label);
        for f in &self.frames {
            out.push_str(&format!("  +{:>6} ms  {}\n", f.at.duration_since(self.started).as_millis(), f.data));
        }
        if let Some(end) = &self.ended {
            out.push_str(&format!("  (ended: {end:?})\n"));
        }
        out
    }
}

impl Drop for ChatStream {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The reader: sends the request, then the head, then each frame as it is complete.
async fn read_turn(url: String, body: String, tx: mpsc::Sender<Event>) {
    let client = match reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(5))
        .timeout(CHAT_REQUEST_LIMIT)
        .build()
    {
        Ok(client) => client,
        Err(e) => {
            let _ = tx.send(Event::End(Some(format!("building the client: {e}"))));
            return;
        }
    };
    let response = match client
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(body)
        .send()
        .await
    {
        Ok(response) => response,
        Err(e) => {
            let _ = tx.send(Event::End(Some(format!("POST {url}: {e}"))));
            return;
        }
    };
    let status = response.status().as_u16();
    let content_type = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let _ = tx.send(Event::Head { status, content_type: content_type.clone() });
    if status != 200 || !content_type.starts_with("text/event-stream") {
        let text = response.text().await.unwrap_or_else(|e| format!("(reading the body failed: {e})"));
        let _ = tx.send(Event::Body(text));
        let _ = tx.send(Event::End(None));
        return;
    }
    let mut response = response;
    let mut buffer: Vec<u8> = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(bytes)) => {
                buffer.extend_from_slice(&bytes);
                while let Some((block, rest)) = split_event(&buffer) {
                    let block = String::from_utf8_lossy(&block).to_string();
                    buffer = rest;
                    if let Some(event) = parse_block(&block) {
                        if tx.send(event).is_err() {
                            return;
                        }
                    }
                }
            }
            Ok(None) => {
                let leftover = String::from_utf8_lossy(&buffer).trim().to_string();
                if !leftover.is_empty() {
                    let _ = tx.send(Event::Protocol(format!("the stream ended inside an event: {leftover:?}")));
                }
                let _ = tx.send(Event::End(None));
                return;
            }
            Err(e) => {
                let _ = tx.send(Event::End(Some(format!("reading the stream: {e}"))));
                return;
            }
        }
    }
}

/// Splits off the first complete event block (ended by a blank line: `\n\n` or `\r\n\r\n`).
fn split_event(buffer: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let text = buffer;
    for i in 0..text.len() {
        if text[i..].starts_with(b"\n\n") {
            return Some((text[..i].to_vec(), text[i + 2..].to_vec()));
        }
        if text[i..].starts_with(b"\r\n\r\n") {
            return Some((text[..i].to_vec(), text[i + 4..].to_vec()));
        }
    }
    None
}

/// One event block → a frame (None for a comment-only block such as a keep-alive).
fn parse_block(block: &str) -> Option<Event> {
    let mut data: Vec<&str> = Vec::new();
    for line in block.lines() {
        if line.is_empty() || line.starts_with(':') {
            continue;
        }
        if let Some(rest) = line.strip_prefix("data:") {
            data.push(rest.strip_prefix(' ').unwrap_or(rest));
        } else if line.starts_with("event:") || line.starts_with("id:") || line.starts_with("retry:") {
            // Allowed by SSE; the chat's frames carry their type in the JSON.
        } else {
            return Some(Event::Protocol(format!("an SSE line that is not a field: {line:?} (block {block:?})")));
        }
    }
    if data.is_empty() {
        return None;
    }
    let text = data.join("\n");
    match serde_json::from_str::<Value>(&text) {
        Ok(value) if value["type"].is_string() => Some(Event::Frame(Frame { at: Instant::now(), data: value })),
        Ok(value) => Some(Event::Protocol(format!("a frame without a string \"type\": {value}"))),
        Err(e) => Some(Event::Protocol(format!("data that is not JSON ({e}): {text:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_and_frames() {
        let buffer = b"data: {\"type\":\"session\",\"sessionId\":\"a\"}\n\n:\n\ndata: {\"type\":\"done\"}\n\npartial".to_vec();
        let (first, rest) = split_event(&buffer).unwrap();
        assert!(matches!(parse_block(&String::from_utf8(first).unwrap()), Some(Event::Frame(f)) if f.ty() == "session"));
        let (keepalive, rest) = split_event(&rest).unwrap();
        assert!(parse_block(&String::from_utf8(keepalive).unwrap()).is_none());
        let (done, rest) = split_event(&rest).unwrap();
        assert!(matches!(parse_block(&String::from_utf8(done).unwrap()), Some(Event::Frame(f)) if f.ty() == "done"));
        assert!(split_event(&rest).is_none());
        assert!(matches!(parse_block("data: {oops"), Some(Event::Protocol(_))));
        assert!(matches!(parse_block("hello"), Some(Event::Protocol(_))));
    }
}
