//! The host's HTTP client for the module's requests to HTTP apps ([`HostSink::http_post`], ABI 1.1).
//!
//! A module library carries its own copy of tokio, so the sockets it opens are driven by its own
//! runtime's thread: a proxied call to an HTTP app went from the host's worker to the module's
//! worker, which spoke to the app, and back — two thread wake-ups per call, and waking threads
//! was most of the gateway's CPU per call (`bench proxy`, issue 15). Sent from here, the
//! request's connection is the host runtime's, and a call the module runs on the host's worker
//! (its tool calls to HTTP apps, when the host offers this) never leaves that runtime.
//!
//! What is sent is the module's business (its short way of a tool call, with the session's
//! headers); this only carries bytes. Like the module's own client for apps: connections kept
//! for reuse, `TCP_NODELAY`, no redirects followed (a manifest names the endpoint exactly, and a
//! redirect would replay the app's headers elsewhere), no timeout of its own (the module times
//! its calls).
//!
//! A plain-HTTP app's requests go straight to hyper's pooled client; the others (https) through
//! reqwest, for its TLS and root certificates. reqwest wraps every request in its redirect and
//! retry layers, which parse the URL twice more per request even with redirects off: ~4 % of
//! the gateway's CPU per proxied call (`bench proxy`, issue 15), for nothing a plain-HTTP app
//! needs.
//!
//! [`HostSink::http_post`]: host_abi::HostSink::http_post

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RNone, ROption, RResult, RSome, RVec, Tuple2};
use async_ffi::FutureExt as _;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{FutureExt as _, StreamExt as _};
use abi_stable::std_types::RString;
use host_abi::{ErrorCode, AbiError, AbiFuture, HttpAnswer, HttpAnswerBody, HttpBody, HttpBody_TO, HttpPost};
use http_body_util::{BodyExt as _, Full};
use hyper::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use parking_lot::Mutex;
use tokio::runtime::Handle;

/// How long the end of an answer dropped before it is waited for, so that its connection can be
/// reused (an app that keeps it open longer loses the connection).
const END_OF_ANSWER_WAIT: Duration = Duration::from_secs(2);

/// Sends the module's requests on the host's runtime.
#[derive(Clone)]
pub struct AppHttp {
    /// For plain-HTTP apps; built at the first request to one.
    plain: Arc<OnceLock<Plain>>,
    /// For the others; built at the first request to one: a gateway without such apps never pays
    /// for it (building one loads the TLS roots: ~2 MiB more resident at start, `bench memory`).
    client: Arc<OnceLock<Result<reqwest::Client, String>>>,
    /// The apps' endpoints, each parsed once: parsing runs IDNA over the host every time (~1 % of
    /// the gateway's samples under `bench proxy`), and a gateway has few apps.
    endpoints: Arc<Mutex<HashMap<String, Endpoint>>>,
    runtime: Handle,
}

/// hyper's client, as plain-HTTP apps are spoken to.
pub(crate) type Plain = Client<HttpConnector, Full<Bytes>>;

/// hyper's pooled client for plain HTTP on the gateway's own network (apps, other replicas):
/// `TCP_NODELAY`, idle connections kept a minute.
pub(crate) fn plain_client() -> Plain {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new()).pool_idle_timeout(Duration::from_secs(60)).pool_timer(TokioTimer::new()).build(connector)
}

/// Where an app's requests go, and which client sends them.
#[derive(Clone)]
enum Endpoint {
    Plain(Uri),
    Reqwest(reqwest::Url),
}

/// How many apps' endpoints are kept parsed (see [`AppHttp::endpoint`]); past it the cache starts
/// afresh.
const ENDPOINTS_MAX: usize = 256;

impl AppHttp {
    /// A client on the runtime the caller runs on.
    pub fn on_current_runtime() -> Result<AppHttp, String> {
        let runtime = Handle::try_current().map_err(|e| format!("no host runtime to send apps' requests on: {e}"))?;
        Ok(AppHttp { plain: Arc::default(), client: Arc::default(), endpoints: Arc::default(), runtime })
    }

    fn plain(&self) -> &Plain {
        self.plain.get_or_init(plain_client)
    }

    fn client(&self) -> Result<reqwest::Client, AbiError> {
        let built = self.client.get_or_init(|| {
            reqwest::Client::builder()
                .tcp_nodelay(true)
                .pool_idle_timeout(Duration::from_secs(60))
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| format!("cannot build the HTTP client for apps: {e}"))
        });
        // `not_implemented`: nothing was sent, and the module then sends with its own client.
        built.clone().map_err(|e| AbiError::new(ErrorCode::NotImplemented, e))
    }

    /// `url` parsed, from the cache if it was parsed before. Parsed as reqwest parses it (so what
    /// it refuses is refused alike); a plain-HTTP one is then taken as hyper's `Uri`, unless it
    /// carries what only reqwest acts on: credentials (reqwest sends them as Basic
    /// authorization, hyper would drop them) or a fragment (reqwest leaves it out).
    fn endpoint(&self, url: &str) -> Result<Endpoint, AbiError> {
        let mut endpoints = self.endpoints.lock();
        if let Some(endpoint) = endpoints.get(url) {
            return Ok(endpoint.clone());
        }
        let parsed = reqwest::Url::parse(url).map_err(|e| invalid(format!("'{url}' is not a valid URL: {e}")))?;
        let endpoint = match parsed.as_str().parse::<Uri>() {
            Ok(uri) if parsed.scheme() == "http" && parsed.username().is_empty() && parsed.password().is_none() && parsed.fragment().is_none() => {
                Endpoint::Plain(uri)
            }
            _ => Endpoint::Reqwest(parsed),
        };
        if endpoints.len() >= ENDPOINTS_MAX {
            endpoints.clear();
        }
        endpoints.insert(url.to_string(), endpoint.clone());
        Ok(endpoint)
    }

    /// [`host_abi::HostSink::http_post`]: the answer's head once it arrives, its body to read.
    pub fn post(&self, post: HttpPost) -> AbiFuture<HttpAnswer> {
        let http = self.clone();
        on_host(&self.runtime, async move {
            let endpoint = http.endpoint(post.url.as_str())?;
            let mut headers = HeaderMap::with_capacity(post.headers.len());
            for Tuple2(name, value) in post.headers {
                let name = header_name(name.as_str()).map_err(|_| invalid(format!("'{name}' is not a valid header name")))?;
                let value =
                    HeaderValue::from_bytes(&value).map_err(|_| invalid(format!("the value of header '{name}' is not valid")))?;
                headers.append(name, value);
            }
            let body = Bytes::from(post.body.into_vec());
            let (status, headers, chunks): (_, _, Chunks) = match endpoint {
                Endpoint::Plain(uri) => {
                    let mut request = Request::new(Full::new(body));
                    (*request.method_mut(), *request.uri_mut(), *request.headers_mut()) = (Method::POST, uri, headers);
                    let response = http.plain().request(request).await.map_err(|e| upstream(&e))?;
                    let (head, body) = response.into_parts();
                    (head.status, head.headers, body.into_data_stream().map(|chunk| chunk.map_err(|e| error_chain(&e))).boxed())
                }
                Endpoint::Reqwest(url) => {
                    let response = http.client()?.post(url).headers(headers).body(body).send().await.map_err(|e| upstream(&e))?;
                    let (status, headers) = (response.status(), response.headers().clone());
                    (status, headers, response.bytes_stream().map(|chunk| chunk.map_err(|e| error_chain(&e))).boxed())
                }
            };
            let content_type: RString = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().into();
            let body = Body { runtime: http.runtime, state: Arc::new(Mutex::new(Reading::Open(chunks))) };
            let body = if is_json(content_type.as_str()) {
                HttpAnswerBody::Whole(body.read_whole(post.max_body_bytes).await?.into())
            } else {
                HttpAnswerBody::Stream(HttpBody_TO::from_value(body, TD_Opaque))
            };
            Ok(HttpAnswer { status: status.as_u16(), content_type, body })
        })
    }
}

/// A header's name. MCP's own are on every request to an app and are no standard names, which
/// `HeaderName` would copy each time: they are taken as the constants they are.
fn header_name(name: &str) -> Result<HeaderName, hyper::http::header::InvalidHeaderName> {
    const MCP: [&str; 4] = ["mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name"];
    match MCP.iter().find(|known| known.eq_ignore_ascii_case(name)) {
        Some(known) => Ok(HeaderName::from_static(known)),
        None => HeaderName::from_bytes(name.as_bytes()),
    }
}

/// A JSON answer: one message, wanted whole (an event stream is read as it arrives).
fn is_json(content_type: &str) -> bool {
    content_type.split(';').next().unwrap_or_default().trim().eq_ignore_ascii_case("application/json")
}

fn invalid(message: String) -> AbiError {
    AbiError::new(ErrorCode::InvalidArgument, message)
}

/// Sending failed: an `upstream` error naming why.
fn upstream(error: &(dyn std::error::Error + 'static)) -> AbiError {
    AbiError::new(ErrorCode::Upstream, error_chain(error))
}

/// An HTTP client's message with its causes (their own say only "error sending request for url"
/// or "client error (Connect)").
pub(crate) fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// A future that enters the host's runtime on every poll: the module may poll it from one of its
/// own threads, where the host's copy of tokio has no context (reqwest spawns the connection's
/// task, and registers its socket, on the runtime it finds).
struct OnHost<T> {
    runtime: Handle,
    work: Pin<Box<dyn Future<Output = Result<T, AbiError>> + Send>>,
}

/// `work` as a future for the module, entering `runtime` on every poll.
fn on_host<T: Send + 'static>(runtime: &Handle, work: impl Future<Output = Result<T, AbiError>> + Send + 'static) -> AbiFuture<T> {
    OnHost { runtime: runtime.clone(), work: Box::pin(work) }.into_ffi()
}

impl<T> Future for OnHost<T> {
    type Output = RResult<T, AbiError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let _context = self.runtime.enter();
        self.work.as_mut().poll(cx).map(RResult::from)
    }
}

/// An answer's body as it arrives, or why it broke off.
type Chunks = BoxStream<'static, Result<Bytes, String>>;

/// Where the reading of a body stands.
enum Reading {
    Open(Chunks),
    /// A chunk is being read (the stream is with that read).
    Busy,
    Ended,
}

/// An answer's body ([`HttpBody`]).
struct Body {
    runtime: Handle,
    state: Arc<Mutex<Reading>>,
}

impl Body {
    /// The whole body, at most `max` bytes; what is read after a failure is left to [`Drop`].
    async fn read_whole(&self, max: u64) -> Result<Vec<u8>, AbiError> {
        let taken = std::mem::replace(&mut *self.state.lock(), Reading::Ended);
        let Reading::Open(mut stream) = taken else { return Ok(Vec::new()) };
        let mut whole = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| AbiError::new(ErrorCode::Upstream, format!("reading the app's answer failed: {e}")))?;
            if (whole.len() + chunk.len()) as u64 > max {
                *self.state.lock() = Reading::Open(stream);
                return Err(AbiError::new(ErrorCode::Upstream, format!("the app's answer is larger than {max} bytes")));
            }
            whole.extend_from_slice(&chunk);
        }
        Ok(whole)
    }
}

impl HttpBody for Body {
    fn next_chunk(&self) -> AbiFuture<ROption<RVec<u8>>> {
        let state = self.state.clone();
        on_host(&self.runtime, async move {
            let taken = std::mem::replace(&mut *state.lock(), Reading::Busy);
            let mut stream = match taken {
                Reading::Open(stream) => stream,
                Reading::Ended => {
                    *state.lock() = Reading::Ended;
                    return Ok(RNone);
                }
                Reading::Busy => return Err(AbiError::new(ErrorCode::Internal, "the body is already being read")),
            };
            match stream.next().await {
                Some(Ok(chunk)) => {
                    *state.lock() = Reading::Open(stream);
                    Ok(RSome(RVec::from(Vec::from(chunk))))
                }
                Some(Err(e)) => {
                    *state.lock() = Reading::Ended;
                    Err(AbiError::new(ErrorCode::Upstream, format!("reading the app's answer failed: {e}")))
                }
                None => {
                    *state.lock() = Reading::Ended;
                    Ok(RNone)
                }
            }
        })
    }
}

impl Drop for Body {
    /// Reads what is left of a body dropped before its end, so that its connection goes back to
    /// the pool (hyper closes a connection whose answer was not read to the end): at once if it
    /// is already there, else in a task of the host's, briefly. Nothing read is used.
    fn drop(&mut self) {
        let Reading::Open(mut rest) = std::mem::replace(&mut *self.state.lock(), Reading::Ended) else { return };
        let _context = self.runtime.enter();
        loop {
            match rest.next().now_or_never() {
                Some(Some(Ok(_))) => continue,
                Some(Some(Err(_)) | None) => return,
                None => break,
            }
        }
        self.runtime.spawn(async move {
            let drained = tokio::time::timeout(END_OF_ANSWER_WAIT, async { while let Some(Ok(_)) = rest.next().await {} });
            if drained.await.is_err() {
                tracing::debug!("an app kept an answer open after the module stopped reading it: its connection is closed");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use abi_stable::std_types::RString;
    use host_abi::HttpBodyBox;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// An HTTP/1.1 server answering every POST with a chunked event stream of two events, the
    /// second 50 ms after the first; it counts its connections and keeps the requests it read,
    /// each after `#{n} `, the number of the connection it came on (from 0).
    async fn server() -> (String, Arc<AtomicUsize>, Arc<Mutex<Vec<String>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let (connections, requests) = (Arc::new(AtomicUsize::new(0)), Arc::new(Mutex::new(Vec::new())));
        let (counted, kept) = (connections.clone(), requests.clone());
        tokio::spawn(async move {
            loop {
                let (mut socket, _) = listener.accept().await.unwrap();
                let connection = counted.fetch_add(1, Ordering::SeqCst);
                let kept = kept.clone();
                tokio::spawn(async move {
                    let mut buffer = Vec::new();
                    loop {
                        let head_end = loop {
                            if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                                break end + 4;
                            }
                            let mut chunk = [0u8; 4096];
                            match socket.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                            }
                        };
                        let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
                        let length = head
                            .lines()
                            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap()))
                            .unwrap_or(0);
                        while buffer.len() < head_end + length {
                            let mut chunk = [0u8; 4096];
                            let n = socket.read(&mut chunk).await.unwrap();
                            buffer.extend_from_slice(&chunk[..n]);
                        }
                        let body = String::from_utf8_lossy(&buffer[head_end..head_end + length]).to_string();
                        kept.lock().push(format!("#{connection} {head}{body}"));
                        buffer.drain(..head_end + length);
                        if body.starts_with("{\"json\"") {
                            // A JSON answer in two chunks, the second 50 ms after the first.
                            let (first, second) = (r#"{"jsonrpc":"2.0","#, r#""result":{}}"#);
                            let head = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{first}\r\n", first.len());
                            socket.write_all(head.as_bytes()).await.unwrap();
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            socket.write_all(format!("{:x}\r\n{second}\r\n0\r\n\r\n", second.len()).as_bytes()).await.unwrap();
                            continue;
                        }
                        let first = "data: 1\n\n";
                        let head = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{first}\r\n",
                            first.len()
                        );
                        socket.write_all(head.as_bytes()).await.unwrap();
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        let second = "data: 2\n\n";
                        socket.write_all(format!("{:x}\r\n{second}\r\n0\r\n\r\n", second.len()).as_bytes()).await.unwrap();
                    }
                });
            }
        });
        (url, connections, requests)
    }

    fn post(url: &str, headers: &[(&str, &[u8])], body: &str) -> HttpPost {
        HttpPost {
            url: url.into(),
            headers: headers.iter().map(|(n, v)| Tuple2(RString::from(*n), RVec::from(v.to_vec()))).collect(),
            body: RVec::from(body.as_bytes().to_vec()),
            max_body_bytes: 1 << 20,
        }
    }

    /// The body of an answer that is read as it arrives.
    fn stream(answer: &HttpAnswer) -> &HttpBodyBox {
        match &answer.body {
            HttpAnswerBody::Stream(body) => body,
            HttpAnswerBody::Whole(_) => panic!("an event stream is not read whole"),
        }
    }

    /// A JSON answer crosses the boundary once: whole, however many chunks it came in; one
    /// larger than the post allows fails it, naming the cap, and its connection still serves.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_json_answer_is_read_whole_within_its_cap() {
        let (url, _, requests) = server().await;
        let http = AppHttp::on_current_runtime().unwrap();
        let answer = http.post(post(&url, &[], r#"{"json":1}"#)).await.unwrap();
        assert_eq!(answer.content_type.as_str(), "application/json");
        match answer.body {
            HttpAnswerBody::Whole(bytes) => assert_eq!(std::str::from_utf8(&bytes).unwrap(), r#"{"jsonrpc":"2.0","result":{}}"#),
            HttpAnswerBody::Stream(_) => panic!("a JSON answer is read whole"),
        }
        let small = HttpPost { max_body_bytes: 20, ..post(&url, &[], r#"{"json":2}"#) };
        let refused = http.post(small).await.into_result().err().expect("over the cap");
        assert!(refused.message.contains("larger than 20 bytes"), "{refused}");
        // The refused answer's rest is read on its own task; on a loaded machine (a CI run beside
        // a build) 300 ms was once not enough for it to finish and hand the connection back.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let again = http.post(post(&url, &[], r#"{"json":3}"#)).await.unwrap();
        assert!(matches!(again.body, HttpAnswerBody::Whole(_)));
        // The pool hands out the connection it got back last: the refused answer's, when it was
        // read to its end rather than closed. (Not a count of connections: the second post may
        // come before the first answer's connection is back in the pool, and open another.)
        let connection = |i: usize| requests.lock()[i].split_whitespace().next().unwrap().to_string();
        assert_eq!(connection(2), connection(1), "the refused answer was read to its end for its connection's reuse");
    }

    /// Reads a body to its end, as text.
    async fn read_to_end(body: &HttpBodyBox) -> String {
        let mut text = String::new();
        while let RSome(chunk) = body.next_chunk().await.unwrap() {
            text.push_str(std::str::from_utf8(&chunk).unwrap());
        }
        text
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_post_is_sent_as_given_and_its_answer_read_in_order() {
        let (url, _, requests) = server().await;
        let http = AppHttp::on_current_runtime().unwrap();
        let headers: &[(&str, &[u8])] = &[("mcp-session-id", b"s-1"), ("x-app-key", b"\xff-not-utf8")];
        let answer = http.post(post(&url, headers, r#"{"jsonrpc":"2.0"}"#)).await.unwrap();
        assert_eq!((answer.status, answer.content_type.as_str()), (200, "text/event-stream"));
        assert_eq!(read_to_end(stream(&answer)).await, "data: 1\n\ndata: 2\n\n");
        assert_eq!(stream(&answer).next_chunk().await.unwrap(), RNone, "the end stays the end");
        let request = requests.lock()[0].to_ascii_lowercase();
        assert!(request.starts_with("#0 post /mcp http/1.1"), "{request}");
        assert!(request.contains("mcp-session-id: s-1") && request.ends_with(r#"{"jsonrpc":"2.0"}"#), "{request}");
        // The server keeps requests as text (a byte that is not UTF-8 reads as U+FFFD): the
        // value arrived with its byte, not dropped or rewritten.
        assert!(request.contains("x-app-key: \u{fffd}-not-utf8\r\n"), "{request}");
    }

    /// A body dropped after its first chunk is read to its end by the host, so the next post
    /// goes on the same connection.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_body_dropped_early_lets_its_connection_serve_the_next_post() {
        let (url, connections, _) = server().await;
        let http = AppHttp::on_current_runtime().unwrap();
        for _ in 0..3 {
            let answer = http.post(post(&url, &[], "{}")).await.unwrap();
            assert_eq!(stream(&answer).next_chunk().await.unwrap(), RSome(RVec::from(b"data: 1\n\n".to_vec())));
            drop(answer);
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        assert_eq!(connections.load(Ordering::SeqCst), 1, "one connection for three posts");
    }

    /// The module polls the host's futures from its own threads, where the host's tokio has no
    /// context: they still run, on the host's runtime.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_post_polled_on_a_thread_without_the_hosts_runtime_runs() {
        let (url, _, _) = server().await;
        let http = AppHttp::on_current_runtime().unwrap();
        let text = std::thread::spawn(move || {
            futures::executor::block_on(async {
                let answer = http.post(post(&url, &[], "{}")).await.unwrap();
                read_to_end(stream(&answer)).await
            })
        })
        .join()
        .unwrap();
        assert_eq!(text, "data: 1\n\ndata: 2\n\n");
    }

    /// Plain HTTP goes to hyper's client; https (and anything else reqwest takes) to reqwest,
    /// whose TLS then speaks to the endpoint: a plain server there is an error naming it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn plain_http_goes_to_hyper_and_https_to_reqwest() {
        let http = AppHttp::on_current_runtime().unwrap();
        assert!(matches!(http.endpoint("http://127.0.0.1:1/mcp").unwrap(), Endpoint::Plain(uri) if uri == "http://127.0.0.1:1/mcp"));
        assert!(matches!(http.endpoint("HTTP://Example.COM/mcp").unwrap(), Endpoint::Plain(uri) if uri == "http://example.com/mcp"));
        assert!(matches!(http.endpoint("https://127.0.0.1:1/mcp").unwrap(), Endpoint::Reqwest(_)));
        assert!(matches!(http.endpoint("http://app:secret@127.0.0.1:1/mcp").unwrap(), Endpoint::Reqwest(_)), "credentials");
        assert!(matches!(http.endpoint("http://127.0.0.1:1/mcp#part").unwrap(), Endpoint::Reqwest(_)), "a fragment");
        let (url, _, requests) = server().await;
        let with_credentials = url.replacen("http://", "http://app:secret@", 1);
        let answer = http.post(post(&with_credentials, &[], "{}")).await.unwrap();
        assert_eq!(read_to_end(stream(&answer)).await, "data: 1\n\ndata: 2\n\n");
        let request = requests.lock()[0].clone();
        assert!(request.to_ascii_lowercase().contains("authorization: basic YXBwOnNlY3JldA==".to_ascii_lowercase().as_str()), "credentials as reqwest sends them: {request}");
        // A server that answers the TLS hello as plain HTTP would: with something not TLS.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let tls = format!("https://{}/mcp", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut hello = [0u8; 64];
            let _ = socket.read(&mut hello).await;
            let _ = socket.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n").await;
        });
        let refused = http.post(post(&tls, &[], "{}")).await.into_result().err().expect("TLS to a plain server fails");
        assert_eq!(refused.code(), ErrorCode::Upstream);
        assert!(refused.message.contains("error sending request") && refused.message.len() > 40, "with its causes: {refused}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bad_requests_and_unreachable_apps_are_errors_naming_why() {
        let http = AppHttp::on_current_runtime().unwrap();
        let failure = |answer: RResult<HttpAnswer, AbiError>| answer.into_result().err().expect("an error");
        let bad = failure(http.post(post("http://127.0.0.1:9/", &[("bad header", b"x")], "{}")).await);
        assert_eq!(bad.code(), ErrorCode::InvalidArgument);
        assert!(bad.message.contains("'bad header' is not a valid header name"), "{bad}");
        let unparsable = failure(http.post(post("http://[::1/mcp", &[], "{}")).await);
        assert_eq!(unparsable.code(), ErrorCode::InvalidArgument);
        assert!(unparsable.message.contains("'http://[::1/mcp' is not a valid URL"), "{unparsable}");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let closed = format!("http://{}/", listener.local_addr().unwrap());
        drop(listener);
        let gone = failure(http.post(post(&closed, &[], "{}")).await);
        assert_eq!(gone.code(), ErrorCode::Upstream);
        assert!(gone.message.to_lowercase().contains("connect"), "the cause is named: {gone}");
    }
}
