//! The short way of a tool call to a stdio app (see [`super::short_way`]): the request's line is
//! written to the app's stdin, and the app's answer is taken off its stdout before rmcp reads it.
//!
//! The app's stdio is split between rmcp's transport and the short way:
//! - stdout: rmcp reads it through [`DivertingReader`], which hands each line that answers a
//!   short-way request (a response with a `gw-` id) to the request waiting for it, and passes
//!   every other line to rmcp as the app wrote it — so rmcp still sees the app's notifications,
//!   its questions and the answers to rmcp's own requests, in order, and its handling of broken
//!   lines is unchanged. A line over the message cap reaches neither: it is dropped as it streams
//!   in (rmcp's reader would keep a buffer of the cap's size for good), and the request it
//!   answers, when its start names one, fails at once with an error naming the cap;
//! - stdin: one task writes whole messages in order, rmcp's as [`LineWriter`] completes them and
//!   the short way's (see [`Stdin`]); a short-way request finding nothing waiting writes its line
//!   itself, on the caller's thread ([`Stdin::send_now`]). When rmcp closes its transport, the
//!   task ends and the app's stdin closes, as before. What waits to be written is bounded
//!   ([`QUEUE_LIMIT_BYTES`]): an app that stops reading its stdin holds rmcp's next write, as a
//!   full pipe did, and a short-way call finding the queue full fails at once, naming why.
//!
//! What the app does during a short-way call goes the way it went before: its notifications and
//! questions are rmcp's to read, and reach the call's client through the session's handler
//! (progress by the call's token, which the short way registers as rmcp would).

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use futures::task::AtomicWaker;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{mpsc, oneshot};

use crate::runtime::executor::Tasks;
use crate::upstream::app_result::AppResult;
use crate::upstream::short_way::message::{cancelled_notification, read_incoming, request_message, CallContext, Incoming, Relayed};
use crate::upstream::error::UpstreamError;

/// The prefix of the short way's request ids.
const ID_PREFIX: &str = "gw-";

/// Bytes queued for an app's stdin beyond which no message is added until the app reads: the
/// pipe itself holds 64 KiB, so this is for bursts of calls, not for an app that stopped reading
/// (it would otherwise grow with every call sent to it until each timed out). One message is
/// always taken while the queue is below it, whatever its size (up to the 64 MiB message cap).
pub const QUEUE_LIMIT_BYTES: usize = 16 << 20;

/// The short way to one stdio app (see the module docs).
pub struct StdioShortWay {
    stdin: Arc<Stdin>,
    waiting: Arc<Waiting>,
    next_id: AtomicU64,
}

/// An answer's outcome, or why it cannot be had.
pub type Answer = Result<AppResult, UpstreamError>;

/// Requests of the short way waiting for their answer, by id.
#[derive(Default)]
struct Waiting {
    answers: Mutex<HashMap<String, oneshot::Sender<Answer>>>,
    /// The app's stdout ended: nothing will be answered any more.
    closed: AtomicBool,
}

impl Waiting {
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.answers.lock().clear();
    }
}

/// The app's stdin: every message, rmcp's (as [`LineWriter`] completes them) and the short way's,
/// is queued whole for one task that writes them in order. So two never interleave mid-line, one
/// never overtakes a message sent before it (the `initialized` notification before the first
/// call), and no caller waits on the pipe: a call's timeout and cancel hold even when the app
/// stops reading, and a caller giving up never cuts a line short.
///
/// The one exception keeps all of that: a short-way request that finds nothing queued writes its
/// line itself, once, without waiting ([`Self::send_now`]); what the pipe does not take at once
/// is queued first in line. A proxied call then goes from the host's worker to the app without
/// waking the module's thread in between (one thread hand-off fewer per call).
struct Stdin {
    queue: mpsc::UnboundedSender<Outgoing>,
    /// Bytes queued and not yet written.
    queued: AtomicUsize,
    /// rmcp's writer, waiting for room (there is one).
    room: AtomicWaker,
    /// The app's stdin (none once closed). Held for one poll at a time, never across a wait; and
    /// while a message is put in the queue, so that nothing can be queued between a line
    /// [`Self::send_now`] began and the rest of it.
    pipe: Mutex<Option<Pipe>>,
}

/// The writing end of an app's stdin.
type Pipe = Pin<Box<dyn AsyncWrite + Send>>;

/// Why a message was not queued.
#[derive(Debug, PartialEq)]
enum Refused {
    Closed,
    Full(usize),
}

impl Stdin {
    /// Queues whole lines whatever is waiting (rmcp's, once it was given room).
    fn queue_anyway(&self, lines: Vec<u8>) -> Result<(), Refused> {
        let _pipe = self.pipe.lock();
        self.push(lines)
    }

    /// Writes `lines` at once if nothing is queued before them and the pipe takes them without
    /// waiting; whatever it does not take is queued (first, as nothing else can be queued while
    /// the pipe is held). Otherwise queues them, unless the app's stdin is closed or
    /// [`QUEUE_LIMIT_BYTES`] are waiting.
    ///
    /// Written only when nothing is queued, so the writer task is not waiting on the pipe: it
    /// waits on the queue, and the no-op waker this poll leaves with the pipe wakes no one who
    /// needed it (the task registers its own as it next writes).
    fn send_now(&self, lines: Vec<u8>) -> Result<(), Refused> {
        let mut pipe = self.pipe.lock();
        let Some(writer) = pipe.as_mut() else { return Err(Refused::Closed) };
        match self.queued.load(Ordering::Acquire) {
            0 => {}
            queued if queued >= QUEUE_LIMIT_BYTES => return Err(Refused::Full(queued)),
            _ => return self.push(lines),
        }
        let mut cx = Context::from_waker(std::task::Waker::noop());
        match writer.as_mut().poll_write(&mut cx, &lines) {
            Poll::Ready(Ok(n)) if n == lines.len() => {
                if writer.as_mut().poll_flush(&mut cx).is_ready() {
                    return Ok(());
                }
                // Left for the writer task to flush.
                self.push(Vec::new())
            }
            Poll::Ready(Ok(n)) => self.push(lines[n..].to_vec()),
            Poll::Pending => self.push(lines),
            // The writer task finds the same as it next writes, and closes the pipe.
            Poll::Ready(Err(_)) => Err(Refused::Closed),
        }
    }

    /// Puts lines in the queue; the caller holds the pipe.
    fn push(&self, lines: Vec<u8>) -> Result<(), Refused> {
        let len = lines.len();
        // Counted before it can be written (and so uncounted), taken back if it never will be.
        self.queued.fetch_add(len, Ordering::AcqRel);
        self.queue.send(Outgoing::Lines(lines)).map_err(|_| {
            self.queued.fetch_sub(len, Ordering::AcqRel);
            Refused::Closed
        })
    }

    /// `len` bytes were written: room for more.
    fn written(&self, len: usize) {
        self.queued.fetch_sub(len, Ordering::AcqRel);
        self.room.wake();
    }

    /// Ready when there is room for rmcp's next line.
    fn poll_room(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.queued.load(Ordering::Acquire) < QUEUE_LIMIT_BYTES {
            return Poll::Ready(());
        }
        self.room.register(cx.waker());
        // Written in between: no wake would come.
        if self.queued.load(Ordering::Acquire) < QUEUE_LIMIT_BYTES { Poll::Ready(()) } else { Poll::Pending }
    }
}

/// What the writer task is given.
enum Outgoing {
    /// One or more whole lines.
    Lines(Vec<u8>),
    /// rmcp closed its transport: close the app's stdin.
    Close,
}

/// Splits an app's stdio between rmcp's transport (the reader and writer to build it from) and
/// the short way; `max_line`, the message cap. Starts the task that writes to `stdin`.
pub fn split<R, W>(stdout: R, stdin: W, max_line: usize, tasks: &Tasks) -> (DivertingReader<R>, LineWriter, StdioShortWay)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel();
    let pipe: Pipe = Box::pin(stdin);
    let state = Arc::new(Stdin { queue: tx, queued: AtomicUsize::new(0), room: AtomicWaker::new(), pipe: Mutex::new(Some(pipe)) });
    tasks.spawn("writing to an app's stdin", write_queued(rx, state.clone()));
    let waiting = Arc::new(Waiting::default());
    let reader = DivertingReader { inner: stdout, waiting: waiting.clone(), pending: Vec::new(), scanned: 0, out: Vec::new(), out_pos: 0, max_line, discarding: false };
    let writer = LineWriter { stdin: state.clone(), partial: Vec::new() };
    (reader, writer, StdioShortWay { stdin: state, waiting, next_id: AtomicU64::new(1) })
}

/// Writes the queued messages, in order, until rmcp closes its transport or the app stops
/// reading; the app's stdin closes on return.
async fn write_queued(mut queue: mpsc::UnboundedReceiver<Outgoing>, state: Arc<Stdin>) {
    while let Some(Outgoing::Lines(bytes)) = queue.recv().await {
        if let Err(e) = write_all(&state, &bytes).await {
            tracing::debug!("the app's stdin is closed: {e}");
            break;
        }
        state.written(bytes.len());
    }
    state.pipe.lock().take();
}

/// Writes and flushes `bytes`, holding the pipe for each poll only.
async fn write_all(state: &Stdin, bytes: &[u8]) -> io::Result<()> {
    let mut at = 0;
    std::future::poll_fn(|cx| {
        let mut pipe = state.pipe.lock();
        let Some(writer) = pipe.as_mut() else { return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())) };
        while at < bytes.len() {
            match ready!(writer.as_mut().poll_write(cx, &bytes[at..])) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(n) => at += n,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        writer.as_mut().poll_flush(cx)
    })
    .await
}

impl StdioShortWay {
    /// Sends one request of `method` (a `tools/call`, see [`super::short_way::ShortWay::request`])
    /// with `params`; an app whose output has ended is left to rmcp's way (which reports the
    /// closed session as it always did).
    pub async fn request(&self, method: &str, params: Option<&Value>, call: CallContext<'_>) -> Relayed {
        if self.waiting.closed.load(Ordering::Acquire) {
            return Relayed::NotTaken;
        }
        let id = format!("{ID_PREFIX}{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let request = request_message(&id, method, params, call.relay, call.envelope);
        let (tx, rx) = oneshot::channel();
        self.waiting.answers.lock().insert(id.clone(), tx);
        // The entry goes when the call does, however it ends.
        let _forget = Forget { waiting: &self.waiting, id: &id };
        match self.send(request) {
            Ok(()) => {}
            Err(Refused::Closed) => return Relayed::Done(Err(UpstreamError::Transport("the app's stdin is closed".into()))),
            Err(Refused::Full(queued)) => {
                let message = format!("the app is not reading its stdin: {} KiB are waiting to be written to it", queued >> 10);
                return Relayed::Done(Err(UpstreamError::Stalled(message)));
            }
        }
        let outcome = tokio::select! {
            answer = tokio::time::timeout(call.timeout, rx) => match answer {
                Ok(Ok(outcome)) => outcome,
                Ok(Err(_)) => Err(UpstreamError::Transport("the app's output ended before its answer".into())),
                Err(_) => {
                    let _ = self.send(cancelled_notification(&id, "the gateway's request timed out"));
                    Err(UpstreamError::Timeout(call.timeout))
                }
            },
            _ = call.cancel.cancelled() => {
                let _ = self.send(cancelled_notification(&id, "cancelled by the client of the gateway"));
                Err(UpstreamError::Cancelled)
            }
        };
        Relayed::Done(outcome)
    }

    /// Sends one message (its text) as a line.
    fn send(&self, message: Vec<u8>) -> Result<(), Refused> {
        let mut line = message;
        line.push(b'\n');
        self.stdin.send_now(line)
    }
}

/// Removes a request's entry from the waiting table when the request ends.
struct Forget<'a> {
    waiting: &'a Waiting,
    id: &'a str,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.waiting.answers.lock().remove(self.id);
    }
}

/// rmcp's writing end of the app's stdin: hands each completed line to the writer task, so rmcp's
/// messages and the short way's are written whole. Dropping it (rmcp closing its transport)
/// closes the app's stdin.
pub struct LineWriter {
    stdin: Arc<Stdin>,
    /// The start of a line rmcp has not finished writing.
    partial: Vec<u8>,
}

impl AsyncWrite for LineWriter {
    /// Waits for room in the queue first, as a write to a full pipe would.
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.stdin.poll_room(cx));
        this.partial.extend_from_slice(buf);
        if let Some(last) = memchr::memrchr(b'\n', &this.partial) {
            let rest = this.partial.split_off(last + 1);
            let lines = std::mem::replace(&mut this.partial, rest);
            if this.stdin.queue_anyway(lines).is_err() {
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::BrokenPipe, "the app's stdin is closed")));
            }
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let _ = self.stdin.queue.send(Outgoing::Close);
        Poll::Ready(Ok(()))
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        let _ = self.stdin.queue.send(Outgoing::Close);
    }
}

/// rmcp's reading end of the app's stdout: takes the answers of the short way's requests out and
/// passes everything else through unchanged (see the module docs).
pub struct DivertingReader<R> {
    inner: R,
    waiting: Arc<Waiting>,
    /// Bytes read from the app whose line has not ended yet.
    pending: Vec<u8>,
    /// How much of `pending` is known to hold no newline.
    scanned: usize,
    /// Bytes for rmcp, from `out_pos` on.
    out: Vec<u8>,
    out_pos: usize,
    /// The message cap: a longer line is dropped, its bytes as they come (`discarding` until
    /// its end), after the request it answers is failed ([`Self::refuse_oversized`]).
    max_line: usize,
    discarding: bool,
}

/// `out` keeps its allocation between reads up to this size; a larger one (a long line rmcp read)
/// is given back, so one big answer does not pin its size for the app's life.
const OUT_KEPT_CAPACITY: usize = 64 * 1024;

impl<R> DivertingReader<R> {
    /// A reader of `inner` with a table of its own, and a receiver for each of `ids` as if a
    /// short-way request with that id were waiting: for the fuzz target `app_output`, which
    /// drives the reader as rmcp does.
    #[doc(hidden)]
    pub fn for_fuzzing(inner: R, max_line: usize, ids: &[&str]) -> (DivertingReader<R>, Vec<oneshot::Receiver<Answer>>) {
        let waiting = Arc::new(Waiting::default());
        let receivers = ids
            .iter()
            .map(|id| {
                let (tx, rx) = oneshot::channel();
                waiting.answers.lock().insert(id.to_string(), tx);
                rx
            })
            .collect();
        let reader = DivertingReader { inner, waiting, pending: Vec::new(), scanned: 0, out: Vec::new(), out_pos: 0, max_line, discarding: false };
        (reader, receivers)
    }

    /// The bytes the reader holds allocated (what an app's output can make it keep).
    #[doc(hidden)]
    pub fn held_capacity(&self) -> usize {
        self.pending.capacity() + self.out.capacity()
    }
}

impl<R> DivertingReader<R> {
    /// Moves every complete line of `pending` to rmcp's bytes, unless it answers a waiting
    /// request. A line longer than the message cap is dropped as soon as it passes the cap (its
    /// memory freed), and the request it answers fails at once ([`Self::refuse_oversized`])
    /// instead of at its timeout.
    ///
    /// Lines are copied out of `pending` from a moving start, and what is left is moved to the
    /// front once per call: splitting each line off the front moved the rest of the read for
    /// every line, thousands of times over for a read of empty lines.
    fn sort_lines(&mut self) {
        // Where the lines not yet sorted begin in `pending`.
        let mut head = 0;
        loop {
            if self.discarding {
                let Some(i) = memchr::memchr(b'\n', &self.pending[head..]) else {
                    self.pending = Vec::new();
                    return;
                };
                head += i + 1;
                self.discarding = false;
                continue;
            }
            let Some(i) = memchr::memchr(b'\n', &self.pending[head + self.scanned..]) else {
                self.pending.drain(..head);
                head = 0;
                self.scanned = self.pending.len();
                if self.pending.len() > self.max_line {
                    let line = std::mem::take(&mut self.pending);
                    self.refuse_oversized(&line[..line.len().min(LEADING_SCAN)]);
                    self.scanned = 0;
                    self.discarding = true;
                    continue;
                }
                return;
            };
            let end = head + self.scanned + i + 1;
            self.scanned = 0;
            let line = if head == 0 && end == self.pending.len() {
                // The read held this one line: it is the line, not a copy.
                std::mem::take(&mut self.pending)
            } else {
                let line = self.pending[head..end].to_vec();
                head = end;
                line
            };
            if line.len() > self.max_line {
                self.refuse_oversized(&line[..line.len().min(LEADING_SCAN)]);
            } else if let Some(line) = self.divert(line) {
                self.out_extend(line);
            }
        }
    }

    fn out_extend(&mut self, bytes: Vec<u8>) {
        if self.out.is_empty() {
            self.out = bytes;
        } else {
            self.out.extend_from_slice(&bytes);
        }
    }

    /// Hands `line` to the request it answers, or gives it back for rmcp.
    fn divert(&self, line: Vec<u8>) -> Option<Vec<u8>> {
        if memchr::memmem::find(&line, b"\"gw-").is_none() {
            return Some(line);
        }
        // The one parse of the answer on this side (the waiting request takes its outcome).
        let (id, outcome) = match read_incoming(&line) {
            Ok(Incoming::Response { id, outcome }) if id.starts_with(ID_PREFIX) => (id, outcome),
            _ => return Some(line),
        };
        match self.waiting.answers.lock().remove(&id) {
            Some(tx) => drop(tx.send(outcome)),
            // A request that ended first (cancelled, timed out): its late answer is dropped, as
            // rmcp drops one.
            None => tracing::debug!("dropping the late answer to {id}"),
        }
        None
    }
}

impl<R> DivertingReader<R> {
    /// A line over the cap (`start`: its first bytes) that starts like an answer fails the
    /// request it answers with an error naming the cap, as the HTTP short way does: a waiting
    /// short-way request directly, one of rmcp's by an error response in the line's place (rmcp
    /// would only have dropped the line, leaving its request to time out).
    fn refuse_oversized(&mut self, start: &[u8]) {
        let Leading { id: Some(id), response: true } = leading_members(start) else { return };
        let message = format!("the app's answer is larger than {} bytes", self.max_line);
        if let Value::String(id) = &id {
            if id.starts_with(ID_PREFIX) {
                if let Some(tx) = self.waiting.answers.lock().remove(id.as_str()) {
                    let _ = tx.send(Err(UpstreamError::Invalid(message)));
                }
                return;
            }
        }
        let error = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": { "code": host_abi::jsonrpc::INTERNAL_ERROR, "message": message },
        });
        let mut line = error.to_string().into_bytes();
        line.push(b'\n');
        self.out_extend(line);
    }
}

/// How far into an over-cap line its `id` is looked for.
const LEADING_SCAN: usize = 4096;

/// What the first members of a message tell.
#[derive(Debug, PartialEq)]
struct Leading {
    /// The message's `id` (a string or an integer).
    id: Option<Value>,
    /// It has a `result` or `error` member and no `method`: an answer.
    response: bool,
}

/// The `id` of the JSON object that `prefix` starts and whether it is an answer, from its first
/// members up to the first whose value is an object or an array (so an `"id"` inside a result
/// is never taken for it).
fn leading_members(prefix: &[u8]) -> Leading {
    let (mut id, mut response, mut method) = (None, false, false);
    scan_members(prefix, |key, value| match key {
        b"id" => id = value.and_then(|v| serde_json::from_slice::<Value>(v).ok()).filter(|v| v.is_string() || v.is_i64() || v.is_u64()),
        b"method" => method = true,
        b"result" | b"error" => response = true,
        _ => {}
    });
    Leading { id, response: response && !method }
}

/// Calls `member(key, raw scalar value)` for each member of the object `prefix` starts, in order,
/// until the prefix ends or is not JSON; a member whose value is an object or an array is
/// reported with `None` and ends the scan.
fn scan_members(prefix: &[u8], mut member: impl FnMut(&[u8], Option<&[u8]>)) -> Option<()> {
    let at = &mut 0;
    let skip_ws = |at: &mut usize| {
        while prefix.get(*at).is_some_and(u8::is_ascii_whitespace) {
            *at += 1;
        }
    };
    // The string starting at `*at` (a quote), quotes included.
    let string = |at: &mut usize| -> Option<&[u8]> {
        if prefix.get(*at) != Some(&b'"') {
            return None;
        }
        let start = *at;
        let mut i = start + 1;
        loop {
            match prefix.get(i)? {
                b'"' => break,
                b'\\' => i += 2,
                _ => i += 1,
            }
        }
        *at = i + 1;
        Some(&prefix[start..*at])
    };
    skip_ws(at);
    if prefix.get(*at) != Some(&b'{') {
        return None;
    }
    *at += 1;
    loop {
        skip_ws(at);
        let key = string(at)?;
        let key = &key[1..key.len() - 1];
        skip_ws(at);
        if prefix.get(*at) != Some(&b':') {
            return None;
        }
        *at += 1;
        skip_ws(at);
        match prefix.get(*at)? {
            b'"' => {
                let value = string(at)?;
                member(key, Some(value));
            }
            b'{' | b'[' => {
                member(key, None);
                return None;
            }
            _ => {
                let start = *at;
                while !matches!(prefix.get(*at)?, b',' | b'}') {
                    *at += 1;
                }
                member(key, Some(prefix[start..*at].trim_ascii_end()));
            }
        }
        skip_ws(at);
        match prefix.get(*at)? {
            b',' => *at += 1,
            _ => return None,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for DivertingReader<R> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.out_pos < this.out.len() {
                let n = buf.remaining().min(this.out.len() - this.out_pos);
                buf.put_slice(&this.out[this.out_pos..this.out_pos + n]);
                this.out_pos += n;
                if this.out_pos == this.out.len() {
                    if this.out.capacity() > OUT_KEPT_CAPACITY {
                        this.out = Vec::new();
                    } else {
                        this.out.clear();
                    }
                    this.out_pos = 0;
                }
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0u8; 8192];
            let mut read = ReadBuf::new(&mut chunk);
            if let Err(e) = ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read)) {
                this.waiting.close();
                return Poll::Ready(Err(e));
            }
            if read.filled().is_empty() {
                // The app's output ended: nothing more will be answered; what is left of an
                // unfinished line is rmcp's (which drops it, as before).
                this.waiting.close();
                if this.pending.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                this.out = std::mem::take(&mut this.pending);
                this.scanned = 0;
                continue;
            }
            this.pending.extend_from_slice(read.filled());
            this.sort_lines();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};

    /// The app's output, handed out `chunk` bytes at a time, so lines arrive split.
    struct Chunked {
        data: &'static [u8],
        chunk: usize,
    }

    impl AsyncRead for Chunked {
        fn poll_read(mut self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
            let n = self.chunk.min(self.data.len()).min(buf.remaining());
            buf.put_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Poll::Ready(Ok(()))
        }
    }

    fn reader(data: &'static [u8], chunk: usize, max_line: usize) -> (DivertingReader<Chunked>, Arc<Waiting>) {
        let waiting = Arc::new(Waiting::default());
        let inner = Chunked { data, chunk };
        (DivertingReader { inner, waiting: waiting.clone(), pending: Vec::new(), scanned: 0, out: Vec::new(), out_pos: 0, max_line, discarding: false }, waiting)
    }

    fn wait_for(waiting: &Waiting, id: &str) -> oneshot::Receiver<Answer> {
        let (tx, rx) = oneshot::channel();
        waiting.answers.lock().insert(id.to_string(), tx);
        rx
    }

    #[tokio::test]
    async fn answers_of_the_short_way_are_taken_and_the_rest_passes_unchanged() {
        let input: &'static [u8] = b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"gw-1\"}}\n\
{\"jsonrpc\":\"2.0\",\"id\":\"gw-1\",\"result\":{\"content\":[]}}\n\
{\"jsonrpc\":\"2.0\",\"id\":\"gw-9\",\"method\":\"sampling/createMessage\"}\n\
{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"text\":\"\\\"gw-1\"}}\r\n\
{\"jsonrpc\":\"2.0\",\"id\":\"gw-2\",\"error\":{\"code\":-1,\"message\":\"late\"}}\n\
not json \"gw-1\n\
unfinished";
        for chunk in [1, 7, 64, 8192] {
            let (reader, waiting) = reader(input, chunk, 1 << 20);
            let answer = wait_for(&waiting, "gw-1");
            let mut passed = String::new();
            BufReader::new(reader).read_to_string(&mut passed).await.unwrap();
            let expected = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"gw-1\"}}\n\
{\"jsonrpc\":\"2.0\",\"id\":\"gw-9\",\"method\":\"sampling/createMessage\"}\n\
{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"text\":\"\\\"gw-1\"}}\r\n\
not json \"gw-1\n\
unfinished";
            assert_eq!(passed, expected, "chunks of {chunk}");
            let answer = answer.await.unwrap().unwrap().into_text();
            assert_eq!(answer, "{\"content\":[]}", "the result as the app wrote it");
            assert!(waiting.closed.load(Ordering::Acquire), "the end of the output closes the table");
        }
    }

    /// Reads full of short lines pass whole, each line copied once (splitting each line off the
    /// front of the read moved the rest of it every time).
    #[tokio::test]
    async fn reads_of_many_short_lines_pass_unchanged() {
        let input: &'static [u8] = "\n{}\n".repeat(300_000).leak().as_bytes();
        let (reader, _waiting) = reader(input, 64 << 10, 1 << 20);
        let mut passed = Vec::new();
        BufReader::new(reader).read_to_end(&mut passed).await.unwrap();
        assert_eq!(passed, input);
    }

    #[tokio::test]
    async fn the_end_of_the_output_fails_the_waiting_requests() {
        let (reader, waiting) = reader(b"{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n", 5, 1 << 20);
        let answer = wait_for(&waiting, "gw-4");
        let mut lines = BufReader::new(reader).lines();
        assert_eq!(lines.next_line().await.unwrap().as_deref(), Some("{\"jsonrpc\":\"2.0\",\"method\":\"x\"}"));
        assert_eq!(lines.next_line().await.unwrap(), None);
        assert!(answer.await.is_err());
    }

    #[tokio::test]
    async fn a_line_over_the_cap_is_dropped_and_fails_the_request_it_answers_at_once() {
        let input: &'static [u8] = b"{\"jsonrpc\":\"2.0\",\"id\":\"gw-1\",\"result\":{\"text\":\"0123456789\"}}\n\
{\"jsonrpc\":\"2.0\",\"id\":\"gw-2\",\"result\":{}}\n\
{\"result\":{\"id\":\"gw-3\",\"text\":\"0123456789abcdef\"}}\n\
{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"text\":\"0123456789abcdef\"}}\n\
{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"x\",\"params\":{\"text\":\"01234\"}}\n\
{\"jsonrpc\":\"2.0\",\"method\":\"y\"}\n";
        for chunk in [3, 8192] {
            let (reader, waiting) = reader(input, chunk, 50);
            let long = wait_for(&waiting, "gw-1");
            let short = wait_for(&waiting, "gw-2");
            let unnamed = wait_for(&waiting, "gw-3");
            let mut passed = String::new();
            BufReader::new(reader).read_to_string(&mut passed).await.unwrap();
            let lines: Vec<&str> = passed.lines().collect();
            assert_eq!(lines.len(), 2, "chunks of {chunk}: lines over the cap reach nobody: {passed}");
            let error: Value = serde_json::from_str(lines[0]).unwrap();
            assert_eq!(
                error,
                json!({ "jsonrpc": "2.0", "id": 7, "error": { "code": -32603, "message": "the app's answer is larger than 50 bytes" } }),
                "chunks of {chunk}: rmcp's request 7 gets an error in its answer's place"
            );
            assert_eq!(lines[1], "{\"jsonrpc\":\"2.0\",\"method\":\"y\"}");
            match long.await {
                Ok(Err(UpstreamError::Invalid(message))) => assert_eq!(message, "the app's answer is larger than 50 bytes"),
                other => panic!("chunks of {chunk}: {other:?}"),
            }
            assert!(short.await.unwrap().is_ok(), "the next line is examined again");
            assert!(unnamed.await.is_err(), "an id inside the result is not the answer's: left to the timeout (here, the end)");
        }
    }

    #[tokio::test]
    async fn an_oversized_line_leaves_no_buffer_of_its_size_behind() {
        // 1 MiB over a 64 KiB cap, without a newline until the end, then a small line.
        let mut input = b"{\"jsonrpc\":\"2.0\",\"id\":\"gw-1\",\"result\":{\"text\":\"".to_vec();
        input.extend(std::iter::repeat_n(b'x', 1 << 20));
        input.extend_from_slice(b"\"}}\n{\"jsonrpc\":\"2.0\",\"method\":\"after\"}\n");
        let input: &'static [u8] = Box::leak(input.into_boxed_slice());
        let (mut reader, waiting) = reader(input, 8192, 64 << 10);
        let long = wait_for(&waiting, "gw-1");
        let mut line = String::new();
        let mut lines = BufReader::new(&mut reader);
        lines.read_line(&mut line).await.unwrap();
        assert_eq!(line, "{\"jsonrpc\":\"2.0\",\"method\":\"after\"}\n");
        assert!(matches!(long.await, Ok(Err(UpstreamError::Invalid(_)))));
        drop(lines);
        assert!(reader.pending.capacity() <= 2 * (64 << 10), "pending kept {} bytes", reader.pending.capacity());
        assert!(reader.out.capacity() <= OUT_KEPT_CAPACITY, "out kept {} bytes", reader.out.capacity());
    }

    #[test]
    fn the_leading_members_tell_the_id_and_an_answer_before_any_nested_value() {
        let leading = |prefix: &[u8]| leading_members(prefix);
        let answer = |id: Value| Leading { id: Some(id), response: true };
        assert_eq!(leading(b"{\"jsonrpc\":\"2.0\",\"id\":\"gw-7\",\"result\":{\"te"), answer(json!("gw-7")));
        assert_eq!(leading(b" {\n \"jsonrpc\" : \"2.0\" , \"x\": 12.5e3, \"ok\":true, \"id\" : 18 , \"error\": {"), answer(json!(18)));
        assert_eq!(leading(b"{\"id\":\"a\\\"b\",\"result\":1}"), answer(json!("a\"b")), "escapes are read as JSON");
        assert_eq!(leading(b"{\"s\":\"x\\\"id\\\":\\\"gw-1\",\"id\":\"gw-2\",\"result\":["), answer(json!("gw-2")), "a key inside a string is not a key");
        assert_eq!(leading(b"{\"result\":{\"id\":\"gw-3\"},\"id\":\"gw-4\"}"), Leading { id: None, response: true }, "not past a nested value");
        assert_eq!(leading(b"{\"id\":5,\"method\":\"sampling/createMessage\",\"params\":{"), Leading { id: Some(json!(5)), response: false }, "a request");
        assert_eq!(leading(b"{\"id\":5.5,\"result\":{"), Leading { id: None, response: true }, "not an id");
        assert_eq!(leading(b"{\"jsonrpc\":\"2.0\",\"id\":\"gw-"), Leading { id: None, response: false }, "cut short");
        assert_eq!(leading(b"[{\"id\":\"gw-1\"}]"), Leading { id: None, response: false });
        assert_eq!(leading(b""), Leading { id: None, response: false });
    }

    #[tokio::test]
    async fn lines_are_written_whole_and_rmcps_close_closes_stdin() {
        let tasks = Tasks::new(tokio::runtime::Handle::current());
        let (app_stdin, mut app_reads) = tokio::io::duplex(1 << 20);
        let (_reader, mut writer, relay) = split(tokio::io::empty(), app_stdin, 1 << 20, &tasks);
        // rmcp's framing may hand a message over in pieces; the short way's line goes between
        // two of rmcp's messages, never inside one, and never before one rmcp sent earlier.
        writer.write_all(b"{\"i\":0}\n{\"a\":").await.unwrap();
        assert_eq!(relay.send(br#"{"b":2}"#.to_vec()), Ok(()));
        writer.write_all(b"1}\n").await.unwrap();
        assert_eq!(relay.send(br#"{"c":3}"#.to_vec()), Ok(()));
        drop(writer);
        let mut written = String::new();
        app_reads.read_to_string(&mut written).await.unwrap();
        assert_eq!(written, "{\"i\":0}\n{\"b\":2}\n{\"a\":1}\n{\"c\":3}\n");
        assert_eq!(relay.send(br#"{"d":4}"#.to_vec()), Err(Refused::Closed), "stdin is closed once rmcp closed");
    }

    /// The writer task has not run (nothing here yields) when the app can already read the line.
    #[tokio::test]
    async fn a_line_finding_nothing_queued_is_written_by_its_caller_at_once() {
        let tasks = Tasks::new(tokio::runtime::Handle::current());
        let (app_stdin, mut app_reads) = tokio::io::duplex(1 << 20);
        let (_reader, mut writer, relay) = split(tokio::io::empty(), app_stdin, 1 << 20, &tasks);
        assert_eq!(relay.send(br#"{"now":1}"#.to_vec()), Ok(()));
        let mut buf = [0u8; 64];
        let read = futures::poll!(Box::pin(app_reads.read(&mut buf)));
        assert!(matches!(read, Poll::Ready(Ok(10))), "{read:?}");
        assert_eq!(&buf[..10], b"{\"now\":1}\n");
        assert_eq!(relay.stdin.queued.load(Ordering::Acquire), 0);
        // The writer task still writes what is queued after it.
        writer.write_all(b"{\"rmcp\":1}\n").await.unwrap();
        drop(writer);
        let mut rest = String::new();
        app_reads.read_to_string(&mut rest).await.unwrap();
        assert_eq!(rest, "{\"rmcp\":1}\n");
    }

    /// What the pipe does not take at once is written before anything sent after it.
    #[tokio::test]
    async fn the_rest_of_a_line_the_pipe_took_in_part_goes_first() {
        let tasks = Tasks::new(tokio::runtime::Handle::current());
        let (app_stdin, mut app_reads) = tokio::io::duplex(8);
        let (_reader, mut writer, relay) = split(tokio::io::empty(), app_stdin, 1 << 20, &tasks);
        assert_eq!(relay.send(br#"{"long":"0123456789"}"#.to_vec()), Ok(()));
        assert!(relay.stdin.queued.load(Ordering::Acquire) > 0, "the rest waits for the writer task");
        assert_eq!(relay.send(br#"{"next":2}"#.to_vec()), Ok(()));
        writer.write_all(b"{\"rmcp\":3}\n").await.unwrap();
        drop(writer);
        let mut written = String::new();
        app_reads.read_to_string(&mut written).await.unwrap();
        assert_eq!(written, "{\"long\":\"0123456789\"}\n{\"next\":2}\n{\"rmcp\":3}\n");
    }

    #[tokio::test]
    async fn what_waits_for_an_app_that_does_not_read_is_bounded() {
        let tasks = Tasks::new(tokio::runtime::Handle::current());
        // The app reads nothing: the pipe (64 KiB here) fills, then the queue.
        let (app_stdin, mut app_reads) = tokio::io::duplex(64 << 10);
        let (_reader, mut writer, relay) = split(tokio::io::empty(), app_stdin, 64 << 20, &tasks);
        let big = serde_json::json!({ "text": "x".repeat(1 << 20) });
        let mut taken = 0;
        let refused = loop {
            match relay.send(serde_json::to_vec(&big).unwrap()) {
                Ok(()) => taken += 1,
                Err(refused) => break refused,
            }
            assert!(taken <= 64, "nothing refused after {taken} MiB");
            tokio::task::yield_now().await;
        };
        assert!(matches!(refused, Refused::Full(queued) if queued >= QUEUE_LIMIT_BYTES), "{refused:?}");
        assert!((16..=17).contains(&taken), "{taken} messages of 1 MiB taken");
        // rmcp's next write waits for room, as on a full pipe; it goes on once the app reads.
        let mut rmcps = Box::pin(writer.write_all(b"{\"rmcp\":1}\n"));
        assert!(futures::poll!(rmcps.as_mut()).is_pending(), "rmcp's write waits");
        let tail = "{\"rmcp\":1}\n{\"after\":true}\n";
        let mut all = vec![0; taken * (serde_json::to_vec(&big).unwrap().len() + 1) + tail.len()];
        let writing = async {
            rmcps.await.unwrap();
            assert_eq!(relay.send(br#"{"after":true}"#.to_vec()), Ok(()), "room again");
        };
        let (read, ()) = tokio::join!(app_reads.read_exact(&mut all), writing);
        read.unwrap();
        let all = String::from_utf8(all).unwrap();
        assert_eq!(all.lines().count(), taken + 2, "every message taken was written whole");
        assert!(all.ends_with(tail));
    }
}
