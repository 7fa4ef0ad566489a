//! Who sends the short way's HTTP requests to an app ([`super::http`]): the host, when it
//! offers to (`HostSink::http_post`, ABI 1.1), else the module's own client.
//!
//! Why the host: this library's sockets are driven by this library's runtime (its own copy of
//! tokio), so a call the host's worker made went to the module's worker to be sent, and its answer
//! came back the same way — two thread wake-ups per proxied call, which were most of the
//! gateway's CPU per call (`bench proxy`, issue 15). A request the host sends is driven by the
//! host's runtime, and a call run on the host's worker ([`crate::runtime::executor::Placement::Inline`],
//! see [`HttpSender::runs_on_host`]) then never leaves it.
//!
//! Either way the answer is an [`Answer`] whose body, dropped before its end, is read to its end
//! briefly, so that its connection serves the next request (hyper closes a connection whose answer
//! was not read through; measured: about one call in ten opened a new connection).

use std::sync::Arc;
use std::time::Duration;

use abi_stable::std_types::{RResult, Tuple2};
use futures::stream::BoxStream;
use futures::{FutureExt as _, StreamExt as _};
use host_abi::{ErrorCode, HostSinkBox, HttpAnswerBody, HttpBodyBox, HttpPost, ModuleConfigExtra};
use http::HeaderMap;

use crate::runtime::executor::Tasks;

/// How long the end of an answer dropped before it is waited for.
const END_OF_ANSWER_WAIT: Duration = Duration::from_secs(2);

/// The answer to a request: its status, content type and body.
pub struct Answer {
    pub status: u16,
    /// Lower case; empty when the answer has none.
    pub content_type: String,
    pub body: Body,
}

/// Sends a relay's requests (see the module docs).
#[derive(Clone)]
pub struct HttpSender {
    own: reqwest::Client,
    host: Option<Arc<HostSinkBox>>,
    tasks: Tasks,
}

impl HttpSender {
    /// The host sends when `extra` (the host's declaration) says it can; `own` otherwise.
    pub fn new(own: reqwest::Client, host: Option<Arc<HostSinkBox>>, tasks: Tasks) -> HttpSender {
        HttpSender { own, host, tasks }
    }

    /// The host, if its declaration offers `http_post`.
    pub fn host_if_offered(host: &Arc<HostSinkBox>, extra: &ModuleConfigExtra) -> Option<Arc<HostSinkBox>> {
        extra.has(host_abi::capability::HOST_SINK_HTTP_POST).then(|| host.clone())
    }

    /// Whether requests go through the host: calls that wait only on them are best run on the
    /// host's worker.
    pub fn runs_on_host(&self) -> bool {
        self.host.is_some()
    }

    /// The module's own client (rmcp's transport and the rare GET use it).
    pub fn own_client(&self) -> &reqwest::Client {
        &self.own
    }

    /// POSTs `body` to `url` with `headers`. The host reads a JSON answer whole, at most
    /// `max_body_bytes` of it (then it crosses the boundary once); anything else comes as it
    /// arrives.
    pub async fn post(&self, url: &reqwest::Url, headers: &HeaderMap, body: &[u8], max_body_bytes: usize) -> Result<Answer, String> {
        if let Some(host) = &self.host {
            let post = HttpPost {
                url: url.as_str().into(),
                headers: headers.iter().map(|(name, value)| Tuple2(name.as_str().into(), value.as_bytes().to_vec().into())).collect(),
                body: body.to_vec().into(),
                max_body_bytes: max_body_bytes as u64,
            };
            match host.http_post(post).await {
                RResult::ROk(answer) => {
                    return Ok(Answer {
                        status: answer.status,
                        content_type: answer.content_type.as_str().to_ascii_lowercase(),
                        body: match answer.body {
                            HttpAnswerBody::Whole(bytes) => Body::Whole(Some(bytes.into_vec())),
                            HttpAnswerBody::Stream(stream) => Body::Host(Some(stream)),
                        },
                    })
                }
                // A host that declared the method but cannot serve it (no client): nothing was
                // sent, the module's own client sends it.
                RResult::RErr(e) if e.code() == ErrorCode::NotImplemented => {}
                RResult::RErr(e) => return Err(format!("cannot send the request: {}", e.message)),
            }
        }
        let response = self.own.post(url.clone()).headers(headers.clone()).body(body.to_vec()).send().await;
        let response = response.map_err(|e| format!("cannot send the request: {e}"))?;
        Ok(self.own_answer(response))
    }

    /// An answer of the module's own client.
    pub fn own_answer(&self, response: reqwest::Response) -> Answer {
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        let stream = response.bytes_stream().map(|chunk| chunk.map(Vec::from).map_err(|e| e.to_string())).boxed();
        Answer { status, content_type, body: Body::Own { stream: Some(stream), tasks: Some(self.tasks.clone()) } }
    }
}

/// An answer's body, chunk by chunk (errors as text).
pub enum Body {
    /// Read whole by the host (a JSON answer): one chunk.
    Whole(Option<Vec<u8>>),
    /// Read from the host; the host reads what is left when it is dropped.
    Host(Option<HttpBodyBox>),
    /// Read from the module's own client; what is left when it is dropped is read by a task of
    /// `tasks` (none: nothing to read, e.g. a body made of chunks at hand).
    Own { stream: Option<BoxStream<'static, Result<Vec<u8>, String>>>, tasks: Option<Tasks> },
}

impl Body {
    /// The next chunk; `None` at the end.
    pub async fn next_chunk(&mut self) -> Option<Result<Vec<u8>, String>> {
        match self {
            Body::Whole(whole) => whole.take().map(Ok),
            Body::Host(body) => {
                let chunk = body.as_ref()?.next_chunk().await;
                match chunk {
                    RResult::ROk(chunk) => {
                        let chunk = chunk.into_option().map(|c| Ok(c.into_vec()));
                        if chunk.is_none() {
                            *body = None;
                        }
                        chunk
                    }
                    RResult::RErr(e) => {
                        *body = None;
                        Some(Err(e.message.into_string()))
                    }
                }
            }
            Body::Own { stream, .. } => {
                let chunk = stream.as_mut()?.next().await;
                if !matches!(chunk, Some(Ok(_))) {
                    *stream = None;
                }
                chunk
            }
        }
    }
}

impl Drop for Body {
    /// The module's own answer is read to its end by a task (the host does the same for its
    /// answers when their box is dropped).
    fn drop(&mut self) {
        let Body::Own { stream, tasks } = self else { return };
        let (Some(mut rest), Some(tasks)) = (stream.take(), tasks.take()) else { return };
        loop {
            match rest.next().now_or_never() {
                Some(Some(Ok(_))) => continue,
                Some(Some(Err(_)) | None) => return,
                None => break,
            }
        }
        tasks.spawn("reading the end of an app's answer", async move {
            let drained = tokio::time::timeout(END_OF_ANSWER_WAIT, async { while let Some(Ok(_)) = rest.next().await {} });
            if drained.await.is_err() {
                tracing::debug!("an app kept a response stream open after the response: its connection is closed");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::runtime::executor::ModuleRuntime;

    /// Answers each request on a connection (one read is one small request here) with a chunked
    /// event stream whose second event comes 50 ms after the first; counts connections.
    async fn server(tasks: Tasks, connections: Arc<AtomicUsize>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let each = tasks.clone();
        tasks.spawn("test server", async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                connections.fetch_add(1, Ordering::SeqCst);
                each.spawn("test connection", async move {
                    let mut request = [0u8; 4096];
                    while matches!(socket.read(&mut request).await, Ok(n) if n > 0) {
                        let head = "HTTP/1.1 200 OK\r\ncontent-type: Text/Event-Stream\r\ntransfer-encoding: chunked\r\n\r\n9\r\ndata: 1\n\n\r\n";
                        socket.write_all(head.as_bytes()).await.unwrap();
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        socket.write_all(b"9\r\ndata: 2\n\n\r\n0\r\n\r\n").await.unwrap();
                    }
                });
            }
        });
        url
    }

    /// The module's own client (a host without `http_post`): the answer's head and chunks, and a
    /// body dropped after its first chunk read to its end, so one connection serves every post.
    #[test]
    fn the_modules_own_client_answers_and_reuses_its_connection() {
        let runtime = ModuleRuntime::new(1).unwrap();
        let tasks = runtime.tasks().clone();
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        let sender_tasks = tasks.clone();
        let done = tasks.spawn_call("test", Default::default(), async move {
            let sender = HttpSender::new(reqwest::Client::new(), None, sender_tasks.clone());
            assert!(!sender.runs_on_host());
            let url = reqwest::Url::parse(&server(sender_tasks, counted).await).unwrap();
            for round in 0..3 {
                let mut answer = sender.post(&url, &HeaderMap::new(), b"{}", 1 << 20).await.unwrap();
                assert_eq!((answer.status, answer.content_type.as_str()), (200, "text/event-stream"));
                assert_eq!(answer.body.next_chunk().await.unwrap().unwrap(), b"data: 1\n\n");
                if round == 2 {
                    assert_eq!(answer.body.next_chunk().await.unwrap().unwrap(), b"data: 2\n\n");
                    assert!(answer.body.next_chunk().await.is_none());
                }
                drop(answer);
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
            Ok(())
        });
        futures::executor::block_on(done).unwrap();
        assert_eq!(connections.load(Ordering::SeqCst), 1, "one connection for three posts");
        futures::executor::block_on(runtime.shut_down_on_own_thread(|_| {}).unwrap()).unwrap();
    }
}
