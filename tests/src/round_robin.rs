//! A round-robin load balancer for replica tests: an HTTP proxy on a loopback port of its own
//! that sends each request (not each connection: a client's keep-alive must not pin it) to the
//! next of its backends in turn, streams the answer back, and remembers which backend served
//! which request.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Router;
use futures::TryStreamExt;

struct Shared {
    backends: Vec<String>,
    next: AtomicUsize,
    /// The backend index of each request, in arrival order.
    served: Mutex<Vec<usize>>,
    client: reqwest::Client,
}

pub struct RoundRobin {
    addr: std::net::SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RoundRobin {
    /// A proxy in front of `backends` (base URLs such as `http://127.0.0.1:PORT`).
    pub fn start(backends: Vec<String>) -> RoundRobin {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding the round-robin proxy");
        listener.set_nonblocking(true).expect("set_nonblocking");
        let addr = listener.local_addr().expect("local_addr");
        let client = reqwest::Client::builder().no_proxy().build().expect("proxy client");
        let shared = Arc::new(Shared { backends, next: AtomicUsize::new(0), served: Mutex::new(Vec::new()), client });
        let app = Router::new().fallback(proxy).with_state(shared.clone());
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("round-robin {addr}"))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                    tokio::select! {
                        result = axum::serve(listener, app) => {
                            if let Err(e) = result {
                                eprintln!("[round-robin] server error: {e}");
                            }
                        }
                        _ = stop_rx => {}
                    }
                });
                runtime.shutdown_background();
            })
            .expect("spawning the round-robin proxy");
        RoundRobin { addr, shared, stop: Some(stop_tx), thread: Some(thread) }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Which backend (its index) served each request so far, in order.
    pub fn served(&self) -> Vec<usize> {
        self.shared.served.lock().unwrap().clone()
    }
}

impl Drop for RoundRobin {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn proxy(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let index = shared.next.fetch_add(1, Ordering::SeqCst) % shared.backends.len();
    shared.served.lock().unwrap().push(index);
    let (parts, body) = request.into_parts();
    let path = parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let url = format!("{}{path}", shared.backends[index]);
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("round-robin: reading the request: {e}")).into_response(),
    };
    let mut outbound = shared.client.request(parts.method, &url).body(bytes);
    for (name, value) in &parts.headers {
        if name != "host" && name != "content-length" && name != "connection" {
            outbound = outbound.header(name, value);
        }
    }
    match outbound.send().await {
        Ok(answer) => {
            let mut response = Response::builder().status(answer.status());
            for (name, value) in answer.headers() {
                if name != "content-length" && name != "transfer-encoding" && name != "connection" {
                    response = response.header(name, value);
                }
            }
            let stream = answer.bytes_stream().map_err(std::io::Error::other);
            response.body(Body::from_stream(stream)).unwrap_or_else(|e| (StatusCode::BAD_GATEWAY, e.to_string()).into_response())
        }
        // What a load balancer answers when the backend it picked is down.
        Err(e) => (StatusCode::BAD_GATEWAY, format!("round-robin: backend {index} ({url}) did not answer: {e}")).into_response(),
    }
}
