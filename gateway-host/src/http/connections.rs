//! Serving connections: the accept loop behind every listener (the gateway's and the sandbox's),
//! with the limits that keep a slow or half-open client from holding the gateway's resources.
//!
//! `axum::serve` gives hyper no timer, so hyper's header-read timeout never runs: a client that
//! sends a request's headers one byte at a time (slowloris) held its connection, its task and
//! its buffers for as long as it liked. This loop is `axum::serve` with the limits added:
//!
//! - **headers** must arrive within `Gateway.HeaderReadTimeoutSeconds` (default 15 s) of the
//!   request's start — also for the next request on a kept-alive connection, so an idle
//!   connection is closed after that long;
//! - **request bodies** must arrive whole within `Gateway.RequestBodyTimeoutSeconds` (default
//!   60 s, see [`with_body_deadline`]): a body that never ends (a `Content-Length` never reached, a
//!   chunked body trickling forever) fails its reader, which answers 408;
//! - **responses** must make progress: a write that cannot proceed for
//!   `Gateway.ResponseWriteTimeoutSeconds` (default 60 s) ends the connection ([`StallGuard`]).
//!   That is the client that stops reading an event stream or a large result: its socket buffer
//!   fills, and without this its stream, subscription and queued events would live forever.
//!
//! A graceful stop stops accepting, lets each connection finish its request in flight (open
//! streams are ended by `GatewayState::shutdown`), then returns.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::Response;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Sleep;

use super::json_error::json_error;
use super::Routes;
use crate::config::settings::Settings;

const DEFAULT_HEADER_READ: Duration = Duration::from_secs(15);
const DEFAULT_BODY: Duration = Duration::from_secs(60);
const DEFAULT_WRITE_STALL: Duration = Duration::from_secs(60);

/// The limits of one listener's connections, from the configuration.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    pub header_read: Duration,
    pub body: Duration,
    pub write_stall: Duration,
}

impl ConnectionLimits {
    pub fn from_settings(settings: &Settings) -> ConnectionLimits {
        ConnectionLimits {
            header_read: settings.get_seconds("Gateway:HeaderReadTimeoutSeconds", DEFAULT_HEADER_READ),
            body: settings.get_seconds("Gateway:RequestBodyTimeoutSeconds", DEFAULT_BODY),
            write_stall: settings.get_seconds("Gateway:ResponseWriteTimeoutSeconds", DEFAULT_WRITE_STALL),
        }
    }
}

/// Serves `routes` on `listener` until `stop` resolves, then lets the connections finish.
pub async fn serve(listener: TcpListener, routes: Routes, limits: ConnectionLimits, stop: impl Future<Output = ()>) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(limits.header_read);
    let graceful = GracefulShutdown::new();
    let mut stop = std::pin::pin!(stop);
    loop {
        let tcp = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    // Out of file descriptors and the like: the listener itself is fine; wait a
                    // moment rather than spin (as axum::serve does).
                    tracing::debug!("accepting a connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut stop => break,
        };
        // Small SSE and JSON responses must not wait for delayed ACKs (Nagle).
        let _ = tcp.set_nodelay(true);
        let io = TokioIo::new(StallGuard::new(tcp, limits.write_stall));
        let routes = routes.clone();
        let service = hyper::service::service_fn(move |request| {
            let routes = routes.clone();
            async move { routes.serve(request).await }
        });
        let connection = graceful.watch(http.serve_connection(io, service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("connection ended: {e}");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// A TCP stream whose writes fail once they have been unable to proceed for `limit` (the peer
/// stopped reading and its receive window is full). Reads are not limited here: an idle
/// kept-alive connection is bounded by the header-read timeout, a request body by
/// [`with_body_deadline`], and a client waiting on a stream legitimately sends nothing.
pub struct StallGuard {
    inner: TcpStream,
    limit: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl StallGuard {
    fn new(inner: TcpStream, limit: Duration) -> StallGuard {
        StallGuard { inner, limit, stalled: None }
    }

    /// What a write that returned `Pending` means: still waiting, or stalled for too long.
    fn pending<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let limit = self.limit;
        let stalled = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client read nothing for {}s (Gateway.ResponseWriteTimeoutSeconds)", limit.as_secs_f64()),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progressed<T>(&mut self, result: Poll<io::Result<T>>, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        match result {
            Poll::Pending => self.pending(cx),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }
}

impl AsyncRead for StallGuard {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for StallGuard {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.progressed(result, cx)
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.progressed(result, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let result = Pin::new(&mut self.inner).poll_flush(cx);
        self.progressed(result, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Why a request body failed: it did not arrive whole in time. Readers of bodies find it in
/// their error's source chain ([`timed_out`]) to answer 408 instead of a generic failure.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive whole within {}s (Gateway.RequestBodyTimeoutSeconds)", .0.as_secs_f64())]
pub struct BodyTimedOut(pub Duration);

/// Whether reading a body failed because of [`BodyTimedOut`].
pub fn timed_out<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a BodyTimedOut> {
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(found) = e.downcast_ref::<BodyTimedOut>() {
            return Some(found);
        }
        current = e.source();
    }
    None
}

/// Gives a request's body its deadline (see the module docs; a step of the front door); true
/// when it has a body. Requests without one pass untouched.
pub fn with_body_deadline(limits: &ConnectionLimits, request: Request) -> (Request, bool) {
    let has_body = !matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS)
        || request.headers().contains_key(header::CONTENT_LENGTH)
        || request.headers().contains_key(header::TRANSFER_ENCODING);
    if !has_body {
        return (request, false);
    }
    let (parts, body) = request.into_parts();
    let body = Body::new(DeadlineBody { inner: body, deadline: Box::pin(tokio::time::sleep(limits.body)), limit: limits.body });
    (Request::from_parts(parts, body), true)
}

/// The answer to a request [`with_body_deadline`] put a deadline on: a 408 (the body came too
/// late, the rest of it may be unread) closes the connection.
pub fn after_body_deadline(response: Response) -> Response {
    if response.status() == StatusCode::REQUEST_TIMEOUT {
        return with_connection_close(response);
    }
    response
}

/// Why [`read_limited`] returned no body.
#[derive(Debug, thiserror::Error)]
pub enum BodyRead {
    /// The body is longer than the limit; what followed was read and thrown away (up to as much
    /// again), so the answer reaches the client (see [`read_limited`]).
    #[error("request body exceeds {0} bytes")]
    TooLarge(usize),
    /// The body failed: it did not arrive in time ([`timed_out`] finds why) or the client went.
    #[error(transparent)]
    Failed(#[from] axum::Error),
}

/// A body of at most `limit` bytes, read whole.
///
/// A longer one is refused, but its rest is read and thrown away — up to `limit` bytes more,
/// within the body's deadline — before the caller answers. A server that answers and closes
/// with the client's bytes still unread makes the kernel reset the connection, and a client
/// still writing its body then sees "broken pipe" or "connection reset" instead of the 413 the
/// gateway wrote (a lingering close). The answer still closes the connection
/// ([`with_connection_close`]): the rest may be longer than what was drained.
pub async fn read_limited(body: Body, limit: usize) -> Result<Bytes, BodyRead> {
    use http_body_util::BodyExt;
    let mut body = body;
    // A body mostly comes as one chunk, which is then the body itself, not copied.
    let (mut chunks, mut length) = (Vec::<Bytes>::new(), 0);
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame?.into_data() else { continue };
        length += data.len();
        if length > limit {
            drop(chunks);
            let mut drained = length - limit;
            while drained <= limit {
                match body.frame().await {
                    Some(Ok(frame)) => drained += frame.data_ref().map_or(0, Bytes::len),
                    _ => break,
                }
            }
            return Err(BodyRead::TooLarge(limit));
        }
        chunks.push(data);
    }
    Ok(match chunks.len() {
        0 => Bytes::new(),
        1 => chunks.swap_remove(0),
        _ => chunks.concat().into(),
    })
}

/// The largest body of the gateway's own JSON routes (chat, admin).
pub const MAX_JSON_BODY_BYTES: usize = 1024 * 1024;

/// [`read_limited`] for the routes that answer problems as `{"error": {code, message}}` (not
/// JSON-RPC): the refusal is the response to send — 413 `too_large`, 408, or 400 `bad_body`.
pub async fn read_body(body: Body, limit: usize) -> Result<Bytes, Response> {
    read_limited(body, limit).await.map_err(|e| match &e {
        BodyRead::TooLarge(_) => with_connection_close(json_error(StatusCode::PAYLOAD_TOO_LARGE, "too_large", format!("the {e}"))),
        BodyRead::Failed(failed) => match timed_out(failed) {
            Some(late) => request_timeout(late),
            None => json_error(StatusCode::BAD_REQUEST, "bad_body", format!("cannot read the request body: {failed}")),
        },
    })
}

/// The rest of an unread body can never be skipped: the connection cannot carry another request.
pub fn with_connection_close(mut response: Response) -> Response {
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// A 408 naming the deadline, as a JSON body for the routes that are not JSON-RPC.
pub fn request_timeout(e: &BodyTimedOut) -> Response {
    with_connection_close(json_error(StatusCode::REQUEST_TIMEOUT, "request_timeout", e.to_string()))
}

struct DeadlineBody {
    inner: Body,
    deadline: Pin<Box<Sleep>>,
    limit: Duration,
}

impl http_body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(axum::Error::new(BodyTimedOut(self.limit))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;

    /// A body of `chunks` chunks of 1,000 bytes that counts how many were read.
    fn counted_body(chunks: usize) -> (Body, Arc<AtomicUsize>) {
        let read = Arc::new(AtomicUsize::new(0));
        let counter = read.clone();
        let stream = futures::stream::iter(0..chunks).map(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok::<_, std::io::Error>(Bytes::from(vec![b'x'; 1_000]))
        });
        (Body::from_stream(stream), read)
    }

    use futures::StreamExt;

    #[tokio::test]
    async fn a_body_within_the_limit_is_read_whole() {
        let (body, read) = counted_body(5);
        let bytes = read_limited(body, 5_000).await.unwrap();
        assert_eq!(bytes, vec![b'x'; 5_000]);
        assert_eq!(read.load(Ordering::SeqCst), 5);
        let (one, _) = counted_body(1);
        assert_eq!(read_limited(one, 5_000).await.unwrap(), vec![b'x'; 1_000]);
    }

    #[tokio::test]
    async fn the_rest_of_a_body_over_the_limit_is_drained_before_the_refusal() {
        let (body, read) = counted_body(8);
        let refused = read_limited(body, 5_000).await.unwrap_err();
        assert!(matches!(refused, BodyRead::TooLarge(5_000)), "{refused}");
        assert_eq!(refused.to_string(), "request body exceeds 5000 bytes");
        assert_eq!(read.load(Ordering::SeqCst), 8, "the whole body was read, so the client can read the answer");
    }

    #[tokio::test]
    async fn draining_stops_after_as_much_again_as_the_limit() {
        let (body, read) = counted_body(1_000);
        assert!(matches!(read_limited(body, 5_000).await, Err(BodyRead::TooLarge(5_000))));
        let read = read.load(Ordering::SeqCst);
        assert!((10..=12).contains(&read), "read {read} chunks of 1,000 bytes for a limit of 5,000");
    }
}
