//! The floor of any proxy process: `bench bare-proxy LISTEN UPSTREAM` forwards each HTTP/1
//! request's method, body and MCP headers to `UPSTREAM` and the answer back, with hyper's server
//! and pooled client on a runtime of as many workers as the gateway's (half the cores, at least
//! one: `gateway-host/src/serve.rs` `worker_threads`), and nothing else: no parse, no auth, no
//! routing, no metrics. `bench proxy` runs it beside the gateway so the
//! gateway's cost reads against what two HTTP exchanges in a separate process cost on this
//! machine, in the same run.

use std::convert::Infallible;
use std::net::SocketAddr;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};

/// Headers a proxied MCP exchange carries each way.
const FORWARDED: &[&str] = &[
    "content-type",
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
];

type Upstream = Client<HttpConnector, Full<Bytes>>;

pub fn main(listen: &str, upstream: &str) -> ! {
    let listen: SocketAddr = listen.parse().unwrap_or_else(|e| {
        eprintln!("bare-proxy: LISTEN {listen:?}: {e}");
        std::process::exit(2)
    });
    let upstream: hyper::Uri = upstream.parse().unwrap_or_else(|e| {
        eprintln!("bare-proxy: UPSTREAM {upstream:?}: {e}");
        std::process::exit(2)
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1)))
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen).await.unwrap_or_else(|e| {
            eprintln!("bare-proxy: bind {listen}: {e}");
            std::process::exit(2)
        });
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client: Upstream = Client::builder(TokioExecutor::new()).build(connector);
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let _ = stream.set_nodelay(true);
            let client = client.clone();
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    forward(client.clone(), upstream.clone(), req)
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

async fn forward(
    client: Upstream,
    upstream: hyper::Uri,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else {
        return Ok(status(400));
    };
    let mut out = Request::builder().method(parts.method).uri(upstream);
    for name in FORWARDED {
        if let Some(v) = parts.headers.get(*name) {
            out = out.header(*name, v);
        }
    }
    let Ok(out) = out.body(Full::new(body)) else { return Ok(status(500)) };
    let Ok(answer) = client.request(out).await else { return Ok(status(502)) };
    let (parts, body) = answer.into_parts();
    let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else {
        return Ok(status(502));
    };
    let mut back = Response::builder().status(parts.status);
    for name in FORWARDED {
        if let Some(v) = parts.headers.get(*name) {
            back = back.header(*name, v);
        }
    }
    Ok(back.body(Full::new(body)).unwrap_or_else(|_| status(500)))
}

fn status(code: u16) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = hyper::StatusCode::from_u16(code).unwrap_or(hyper::StatusCode::BAD_GATEWAY);
    r
}
