//! `chat`: turns of `POST /apps/chat` against a zero-latency scripted OpenAI-compatible model
//! (a tiny HTTP/1.1 server inside the bench): each turn is one model request that streams a tool
//! call (the app's `echo`), the tool call through the registry, and a second model request that
//! streams the final answer.

use std::borrow::Cow;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use crate::common::*;
use crate::scenarios::Opts;

fn chunk(delta: Value, finish: Value) -> String {
    let v = json!({
        "id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": "scripted",
        "system_fingerprint": null,
        "choices": [{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish }],
    });
    format!("data: {v}\n\n")
}

/// What the scripted model reads of a request: the number of messages, whether the last one is a
/// tool result, and the name of the `echo` tool. The history is only scanned, once, for where
/// its messages end (borrowed raw values: nothing of it is copied or built), so the model's cost
/// stays small as a session grows: a model that parsed and cloned the whole history twice a turn
/// outweighed the gateway it measured.
struct Request {
    messages: usize,
    after_tool: bool,
    echo_tool: Option<String>,
}

/// The parts of a Chat Completions request the model reads; the rest is skipped.
#[derive(Deserialize)]
struct Body<'a> {
    #[serde(borrow, default)]
    messages: Vec<&'a RawValue>,
    #[serde(borrow, default)]
    tools: Vec<Tool<'a>>,
}

#[derive(Deserialize)]
struct Tool<'a> {
    #[serde(borrow, default)]
    function: Option<Named<'a>>,
}

#[derive(Deserialize)]
struct Named<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    role: Option<Cow<'a, str>>,
}

impl Request {
    /// `None` when the body is not a JSON object with `messages` and `tools` (when present) as
    /// the API has them.
    fn read(body: &[u8]) -> Option<Request> {
        let body: Body = serde_json::from_slice(body).ok()?;
        let after_tool = body
            .messages
            .last()
            .and_then(|m| serde_json::from_str::<Message>(m.get()).ok())
            .is_some_and(|m| m.role.as_deref() == Some("tool"));
        let echo_tool = body
            .tools
            .into_iter()
            .filter_map(|t| t.function?.name)
            .find(|n| n.ends_with("echo"))
            .map(Cow::into_owned);
        Some(Request {
            messages: body.messages.len(),
            after_tool,
            echo_tool,
        })
    }
}

/// The reply to one Chat Completions request: a tool call first, the answer once a tool result is in.
fn reply(request: &Request) -> String {
    static ANSWER: OnceLock<String> = OnceLock::new();
    static OPENING: OnceLock<String> = OnceLock::new();
    static CALL_END: OnceLock<String> = OnceLock::new();
    let opening =
        OPENING.get_or_init(|| chunk(json!({ "role": "assistant", "content": "" }), Value::Null));
    if request.after_tool {
        return ANSWER
            .get_or_init(|| {
                let mut out = opening.clone();
                out.push_str(&chunk(json!({ "content": "Done: " }), Value::Null));
                out.push_str(&chunk(json!({ "content": "echoed." }), Value::Null));
                out.push_str(&chunk(json!({}), json!("stop")));
                out.push_str("data: [DONE]\n\n");
                out
            })
            .clone();
    }
    let tool = request.echo_tool.as_deref().unwrap_or("missing_echo_tool");
    let n = request.messages;
    let mut out = opening.clone();
    out.push_str(&chunk(
        json!({ "tool_calls": [{ "index": 0, "id": format!("call_{n}"), "type": "function",
                                 "function": { "name": tool, "arguments": "" } }] }),
        Value::Null,
    ));
    out.push_str(CALL_END.get_or_init(|| {
        let mut out = String::new();
        for piece in ["{\"text\":", "\"bench\"}"] {
            out.push_str(&chunk(
                json!({ "tool_calls": [{ "index": 0, "function": { "arguments": piece } }] }),
                Value::Null,
            ));
        }
        out.push_str(&chunk(json!({}), json!("tool_calls")));
        out.push_str("data: [DONE]\n\n");
        out
    }));
    out
}

async fn serve_conn(mut s: TcpStream) {
    let _ = s.set_nodelay(true);
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    loop {
        // Headers.
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if read_more(&mut s, &mut buf).await.is_none() {
                return;
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
        let len: usize = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse().ok())?
            })
            .unwrap_or(0);
        buf.reserve((head_end + len).saturating_sub(buf.len()));
        while buf.len() < head_end + len {
            if read_more(&mut s, &mut buf).await.is_none() {
                return;
            }
        }
        let scripted = head.starts_with("POST ") && head.contains("/chat/completions");
        let request = if scripted {
            Request::read(&buf[head_end..head_end + len])
        } else {
            None
        };
        let (status, ctype, payload) = match request {
            Some(request) => ("200 OK", "text/event-stream", reply(&request)),
            None => (
                "404 Not Found",
                "application/json",
                json!({ "error": { "message": "not scripted" } }).to_string(),
            ),
        };
        buf.drain(..head_end + len);
        let resp = format!(
            "HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncache-control: no-cache\r\ncontent-length: {}\r\n\r\n{payload}",
            payload.len()
        );
        if s.write_all(resp.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// Reads what the socket has into the spare capacity of `buf` (at least 16 KiB); `None` at the end.
async fn read_more(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<usize> {
    buf.reserve(16 * 1024);
    match s.read_buf(buf).await {
        Ok(0) | Err(_) => None,
        Ok(n) => Some(n),
    }
}

/// Starts the scripted model on 127.0.0.1 → its port (the task ends with the runtime).
async fn scripted_model() -> Res<u16> {
    let l = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let port = l.local_addr().map_err(|e| e.to_string())?.port();
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            tokio::spawn(serve_conn(s));
        }
    });
    Ok(port)
}

/// One turn: POST /apps/chat, the whole event stream read → the session id.
async fn turn(client: &reqwest::Client, url: &str, session: Option<&str>) -> Res<String> {
    let mut body = json!({ "message": "Echo something." });
    if let Some(s) = session {
        body["sessionId"] = s.into();
    }
    let resp = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| format!("POST /apps/chat: {e}"))?;
    let status = resp.status().as_u16();
    let text = resp
        .text()
        .await
        .map_err(|e| format!("reading /apps/chat: {e}"))?;
    if status != 200 {
        return Err(format!(
            "HTTP {status}: {}",
            text.chars().take(300).collect::<String>()
        ));
    }
    let (mut sid, mut tool_ok, mut done, mut result) = (None, false, false, false);
    for line in text.lines() {
        let Some(d) = line.strip_prefix("data:") else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<Value>(d.trim()) else {
            continue;
        };
        match v["type"].as_str().unwrap_or("") {
            "session" => sid = v["sessionId"].as_str().map(str::to_string),
            "tool_result" => tool_ok = v["isError"] == false,
            "result" => result = true,
            "done" => done = true,
            "error" => return Err(format!("error frame: {v}")),
            _ => {}
        }
    }
    if !(tool_ok && done && result) {
        return Err(format!(
            "incomplete turn (tool ok {tool_ok}, result {result}, done {done}): {}",
            text.chars().take(3000).collect::<String>()
        ));
    }
    sid.ok_or_else(|| "no session frame".to_string())
}

pub async fn chat(art: &Artefacts, o: &Opts) -> Res<Value> {
    let (rounds, secs) = if o.quick { (2, 3.0) } else { (4, 6.0) };
    let port = scripted_model().await?;
    let dir = tempfile::Builder::new()
        .prefix("bench-chat-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let apps = dir.path().join("apps");
    write_manifest(&apps, "c", &stdio_app(art, "c", &[]))?;
    let mut config = gateway_config(&apps);
    config["Gateway"]["DataPath"] = json!(dir.path().join("data"));
    config["Sessions"] = json!({ "Store": "sqlite" });
    config["Agent"] = json!({ "BaseUrl": format!("http://127.0.0.1:{port}/v1"), "Model": "scripted", "ApiKeyEnv": "BENCH_LLM_KEY",
                              "MaxToolRounds": 4, "TimeoutSeconds": 60 });
    let gw = Gateway::start(
        art,
        dir,
        &config,
        &[("BENCH_LLM_KEY", "bench-key".to_string())],
    )?;
    let client = http_client();
    gw.wait_running(&client, &["c".into()], Duration::from_secs(30))
        .await?;
    // The registry learns the app's tools a moment after it is running.
    crate::scenarios::gateway_tool_name(&client, &gw, "c", "echo").await?;
    let url = format!("{}/apps/chat", gw.url);
    // Warm-up (also checks the whole path once).
    turn(&client, &url, None)
        .await
        .map_err(|e| format!("first turn failed: {e}\n{}", gw.logs()))?;
    log("chat: first turn ok");

    let sessions_of = [1usize, 50];
    let mut samples = vec![Samples::default(); sessions_of.len()];
    let mut cpu = [0u64; 2];
    for round in 0..rounds {
        for k in 0..sessions_of.len() {
            let si = (k + round) % sessions_of.len();
            let n = sessions_of[si];
            // Each worker is one chat session: its first turn opens it, the next ones continue it.
            let before = cpu_us(gw.pid());
            let started = Instant::now();
            let deadline = started + Duration::from_secs_f64(secs);
            let mut tasks = Vec::new();
            for _ in 0..n {
                let client = client.clone();
                let url = url.clone();
                tasks.push(tokio::spawn(async move {
                    let mut s = Samples::default();
                    let mut session: Option<String> = None;
                    while Instant::now() < deadline {
                        let t = Instant::now();
                        match turn(&client, &url, session.as_deref()).await {
                            Ok(id) => {
                                s.latencies_us.push(t.elapsed().as_micros() as u64);
                                session = Some(id);
                            }
                            Err(e) => {
                                s.errors += 1;
                                s.first_error.get_or_insert(e);
                            }
                        }
                    }
                    s
                }));
            }
            let mut all = Samples::default();
            for t in tasks {
                if let Ok(s) = t.await {
                    all.merge(s);
                }
            }
            all.secs = started.elapsed().as_secs_f64();
            cpu[si] += cpu_us(gw.pid()).saturating_sub(before);
            log(format!(
                "chat: round {} {n} sessions: {} turns, {} errors",
                round + 1,
                all.calls(),
                all.errors
            ));
            samples[si].merge(all);
        }
    }
    let one = &samples[0];
    let many = &samples[1];
    let errors = one.errors + many.errors;
    Ok(json!({
        "scenario": "chat",
        "rounds": rounds, "round_secs": secs,
        "s1": one.summary(), "s50": many.summary(),
        "host_ms_per_turn": round(one.pct_ms(50.0), 3),
        "host_ms_per_turn_p99": round(one.pct_ms(99.0), 3),
        "turns_per_s": round(many.rps(), 1),
        "turns_per_s_1_session": round(one.rps(), 1),
        "gateway_cpu_ms_per_turn": round(cpu[1] as f64 / 1000.0 / many.calls().max(1) as f64, 3),
        "gateway_cpu_ms_per_turn_1_session": round(cpu[0] as f64 / 1000.0 / one.calls().max(1) as f64, 3),
        "errors": errors,
        "note": "a turn = POST /apps/chat → model request (streams a tool call) → tools/call echo on a stdio app through \
                 the registry → model request (streams the answer) → frames to the client; the model answers at once, so \
                 the time is the host's (plus the app's echo and the SQLite session store); host_ms_per_turn is the p50 \
                 with 1 session, turns_per_s with 50 sessions each sending its next turn when the last ends; gateway CPU is \
                 /proc/PID/stat utime+stime of gateway-host ÷ turns (50 sessions; _1_session: the 1-session rounds, whose \
                 history grows to thousands of messages, of which the model is sent the most recent 128 KiB, \
                 `Agent.MaxHistoryBytes`' default). The scripted model reads only the message count, the last \
                 message's role and the tool names of a request, so that its own work stays small beside the gateway's"
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model as it was (the whole request parsed, the history cloned): the lean one must
    /// answer byte for byte the same.
    fn reply_from_value(request: &Value) -> String {
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        let mut out = chunk(json!({ "role": "assistant", "content": "" }), Value::Null);
        if messages.last().is_some_and(|m| m["role"] == "tool") {
            out.push_str(&chunk(json!({ "content": "Done: " }), Value::Null));
            out.push_str(&chunk(json!({ "content": "echoed." }), Value::Null));
            out.push_str(&chunk(json!({}), json!("stop")));
        } else {
            let tool = request["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["function"]["name"].as_str())
                .find(|n| n.ends_with("echo"))
                .unwrap_or("missing_echo_tool")
                .to_string();
            let n = messages.len();
            out.push_str(&chunk(
                json!({ "tool_calls": [{ "index": 0, "id": format!("call_{n}"), "type": "function",
                                         "function": { "name": tool, "arguments": "" } }] }),
                Value::Null,
            ));
            for piece in ["{\"text\":", "\"bench\"}"] {
                out.push_str(&chunk(
                    json!({ "tool_calls": [{ "index": 0, "function": { "arguments": piece } }] }),
                    Value::Null,
                ));
            }
            out.push_str(&chunk(json!({}), json!("tool_calls")));
        }
        out.push_str("data: [DONE]\n\n");
        out
    }

    #[test]
    fn the_lean_model_answers_as_the_full_one() {
        let tools = json!([
            { "type": "function", "function": { "name": "other", "parameters": {} } },
            { "type": "function", "function": { "name": "c__echo", "description": "d", "parameters": { "type": "object" } } },
        ]);
        let system = json!({ "role": "system", "content": "s" });
        let user = json!({ "role": "user", "content": "Echo something." });
        let call = json!({ "role": "assistant", "content": null, "tool_calls": [{ "id": "call_2", "type": "function",
                           "function": { "name": "c__echo", "arguments": "{\"text\":\"bench\"}" } }] });
        let result = json!({ "role": "tool", "tool_call_id": "call_2", "content": "bench" });
        let answer = json!({ "role": "assistant", "content": "Done: echoed." });
        let bodies = [
            json!({ "model": "scripted", "messages": [system, user], "stream": true, "tools": tools }),
            json!({ "model": "scripted", "messages": [system, user, call, result], "stream": true, "tools": tools }),
            json!({ "model": "scripted", "messages": [system, user, call, result, answer, user], "stream": true, "tools": tools }),
            json!({ "model": "scripted", "messages": [system, user], "stream": true }),
            json!({ "model": "scripted" }),
        ];
        for body in bodies {
            let text = body.to_string();
            let request = Request::read(text.as_bytes()).expect("an object");
            assert_eq!(reply(&request), reply_from_value(&body), "{text}");
        }
        assert!(Request::read(b"[1]").is_none() && Request::read(b"nope").is_none());
    }
}
