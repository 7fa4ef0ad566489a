//! Misbehaviour for the gateway's fault-injection suite (`tests/tests/faults.rs`): relays that
//! wrap the stdio channel (garbage between frames, a crash when a chosen request arrives), the
//! `--fault-tools` tools (a huge result, a stderr flood, an HTTP response stream cut midway, a move
//! to another port), and a grandchild that ignores SIGTERM.

use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt as _;
use rmcp::model::{JsonObject, Tool};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};

/// The tools `--fault-tools` adds.
pub fn tools(no_args: impl Fn() -> std::sync::Arc<JsonObject>, schema: impl Fn(Value) -> std::sync::Arc<JsonObject>) -> Vec<Tool> {
    vec![
        Tool::new(
            "big",
            "Answer with one text block of `mb` MiB.",
            schema(json!({
                "type": "object",
                "properties": {"mb": {"type": "integer", "minimum": 0, "maximum": 512}},
                "required": ["mb"]
            })),
        ),
        Tool::new(
            "flood_stderr",
            "Write `mb` MiB to stderr from a thread (lines of 200 bytes, or one line without a newline \
             when `newlines` is false), then the line `test-app: flood done`. Answers at once.",
            schema(json!({
                "type": "object",
                "properties": {"mb": {"type": "integer", "minimum": 0}, "newlines": {"type": "boolean"}},
                "required": ["mb"]
            })),
        ),
        Tool::new(
            "drop_stream",
            "Over HTTP: the response stream sends half an SSE event, then the connection is cut.",
            no_args(),
        ),
        Tool::new(
            "move_port",
            "Over HTTP: stop listening on the current port and listen on `port` (0: any free port) \
             instead, as an app restarted elsewhere would; the new port goes to --port-file.",
            schema(json!({
                "type": "object",
                "properties": {"port": {"type": "integer", "minimum": 0, "maximum": 65535}},
                "required": ["port"]
            })),
        ),
    ]
}

/// `big`: a deterministic text of exactly `mb` MiB.
pub fn big_text(mb: usize) -> String {
    const PATTERN: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_";
    let n = mb * 1024 * 1024;
    let mut bytes = Vec::with_capacity(n);
    while bytes.len() < n {
        let take = (n - bytes.len()).min(PATTERN.len());
        bytes.extend_from_slice(&PATTERN[..take]);
    }
    String::from_utf8(bytes).expect("ASCII")
}

/// `flood_stderr`: writes on a thread of its own, so the process keeps serving meanwhile (a full
/// pipe blocks only that thread).
pub fn flood_stderr(mb: usize, newlines: bool) {
    std::thread::spawn(move || {
        let total = mb * 1024 * 1024;
        let mut stderr = std::io::stderr().lock();
        let mut written = 0usize;
        if newlines {
            let mut n = 0u64;
            while written < total {
                let mut line = format!("test-app: flood line {n} ");
                while line.len() < 199 {
                    line.push('.');
                }
                line.push('\n');
                if stderr.write_all(line.as_bytes()).is_err() {
                    return;
                }
                written += line.len();
                n += 1;
            }
        } else {
            let chunk = vec![b'x'; 64 * 1024];
            while written < total {
                let take = (total - written).min(chunk.len());
                if stderr.write_all(&chunk[..take]).is_err() {
                    return;
                }
                written += take;
            }
            let _ = stderr.write_all(b"\n");
        }
        let _ = stderr.write_all(b"test-app: flood done\n");
        let _ = stderr.flush();
    });
}

/// What `--garbage-stdout` writes before each MCP frame, in turn: a response and an error
/// response to requests never made (the first before the answer to `initialize`), truncated JSON,
/// JSON that is no JSON-RPC message, text, an unknown notification, bytes that are not UTF-8,
/// blank and carriage-return lines, and (once) a 1 MiB line.
fn garbage_line(n: usize) -> Vec<u8> {
    match n % 10 {
        0 => b"{\"jsonrpc\":\"2.0\",\"id\":987654321,\"result\":{\"surprise\":true}}\n".to_vec(),
        1 => b"{\"jsonrpc\": \"2.0\", \"id\": \n".to_vec(),
        2 => b"{\"hello\": \"a JSON object that is no JSON-RPC message\"}\n".to_vec(),
        3 => b"garbage: this line is not JSON at all\n".to_vec(),
        4 => b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/test-app/garbage\",\"params\":{}}\n".to_vec(),
        5 => b"\xff\xfe\xfd not UTF-8 \xc3\x28\n".to_vec(),
        6 => b"\n   \n\r\n".to_vec(),
        7 if n < 10 => {
            let mut line = vec![b'#'; 1024 * 1024];
            line.push(b'\n');
            line
        }
        8 => b"{\"jsonrpc\":\"2.0\",\"id\":\"never-sent\",\"error\":{\"code\":-32000,\"message\":\"surprise\"}}\n".to_vec(),
        _ => b"[1, 2, 3]\n".to_vec(),
    }
}

/// `--garbage-stdout`: the writer rmcp gets; a task copies each frame to the real stdout with a
/// garbage line before it.
pub fn garbage_stdout() -> Box<dyn AsyncWrite + Send + Unpin> {
    let (app_side, relay_side) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        let mut reader = BufReader::new(relay_side);
        let mut out = tokio::io::stdout();
        let mut frame = Vec::new();
        let mut n = 0usize;
        loop {
            frame.clear();
            match reader.read_until(b'\n', &mut frame).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let garbage = garbage_line(n);
            n += 1;
            if out.write_all(&garbage).await.is_err() || out.write_all(&frame).await.is_err() || out.flush().await.is_err() {
                break;
            }
        }
    });
    Box::new(app_side)
}

/// What `--crash-on` and `--stop-reading-on` do when their method arrives.
#[derive(Clone, Copy)]
pub enum OnMethod {
    /// Exit the whole process with code 6.
    Crash,
    /// Read stdin no more (the message is not passed on), and stay: what is written to the app
    /// fills the pipe and waits there.
    StopReading,
}

/// The reader rmcp gets for `--crash-on` / `--stop-reading-on METHOD`: a task passes stdin's
/// lines on until a message for `method` arrives (before the app sees it), then does `action`.
pub fn on_method(stdin: impl AsyncRead + Send + Unpin + 'static, method: String, action: OnMethod) -> Box<dyn AsyncRead + Send + Unpin> {
    let (mut relay_side, app_side) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        let mut lines = BufReader::new(stdin).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let asked = serde_json::from_str::<Value>(&line)
                .ok()
                .and_then(|m| m.get("method").and_then(Value::as_str).map(|m| m == method))
                .unwrap_or(false);
            if asked {
                match action {
                    OnMethod::Crash => {
                        eprintln!("test-app: --crash-on {method}: exiting with code 6");
                        std::process::exit(6);
                    }
                    OnMethod::StopReading => {
                        eprintln!("test-app: --stop-reading-on {method}: no longer reading stdin");
                        // Both ends stay open (this task holds them): nothing ends, nothing is read.
                        std::future::pending::<()>().await;
                    }
                }
            }
            if relay_side.write_all(line.as_bytes()).await.is_err() || relay_side.write_all(b"\n").await.is_err() {
                break;
            }
        }
        // End of stdin: dropping the relay's side ends rmcp's input too.
    });
    Box::new(app_side)
}

/// `--stubborn-grandchild-pid-file`: a grandchild (in this process's group) that ignores SIGTERM
/// (an ignored signal stays ignored across exec), detached from our stdio.
pub fn start_stubborn_grandchild(pid_file: &Path) {
    match std::process::Command::new("sh")
        .args(["-c", "trap '' TERM HUP INT; exec sleep 3600"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        Ok(child) => {
            if let Err(e) = std::fs::write(pid_file, child.id().to_string()) {
                eprintln!("test-app: cannot write the stubborn grandchild's pid file {}: {e}", pid_file.display());
            }
        }
        Err(e) => eprintln!("test-app: cannot start the stubborn grandchild: {e}"),
    }
}

/// The middleware of `--fault-tools` over HTTP: a `tools/call` of `drop_stream` gets an SSE
/// response that stops in the middle of its event and then fails, which cuts the connection.
pub async fn drop_stream_layer(request: Request, next: Next) -> Response {
    if request.method() != http::Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, 64 * 1024 * 1024).await {
        Ok(bytes) => bytes,
        Err(e) => {
            return Response::builder().status(400).body(Body::from(format!("unreadable body: {e}"))).unwrap();
        }
    };
    let wanted = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .is_some_and(|m| m["method"] == "tools/call" && m["params"]["name"] == "drop_stream");
    if !wanted {
        return next.run(Request::from_parts(parts, Body::from(bytes))).await;
    }
    eprintln!("test-app: drop_stream: cutting the response stream midway");
    let chunks: Vec<Result<&'static [u8], std::io::Error>> = vec![
        Ok(b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":"),
        Err(std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "drop_stream: cut midway")),
    ];
    let stream = futures::stream::iter(chunks).then(|chunk| async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        chunk
    });
    Response::builder()
        .status(200)
        .header(http::header::CONTENT_TYPE, "text/event-stream")
        .header(http::header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .unwrap()
}
