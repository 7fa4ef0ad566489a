//! `peers`: a stdio test-app exposed over Streamable HTTP by this gateway, by supergateway (npm)
//! and by mcp-proxy (PyPI), and spoken to directly over stdio by the bench itself.

use std::collections::HashMap;
use std::io::{BufRead as _, Write as _};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::oneshot;

use crate::common::*;
use crate::scenarios::Opts;

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

/// The bench's own JSON-RPC-over-stdio client of a test-app it spawned: one writer, one reader
/// thread dispatching responses by id, so several calls can be in flight at once.
struct StdioClient {
    _proc: Proc,
    stdin: Arc<Mutex<std::process::ChildStdin>>,
    pending: Pending,
    next: std::sync::atomic::AtomicU64,
}

impl StdioClient {
    async fn start(art: &Artefacts) -> Res<Arc<StdioClient>> {
        let mut cmd = Command::new(&art.test_app);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut proc = Proc::spawn(cmd)?;
        let stdin = proc.child.stdin.take().unwrap();
        let stdout = proc.child.stdout.take().unwrap();
        let pending: Pending = Arc::new(Mutex::new(HashMap::new()));
        let p = pending.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if let Some(id) = v["id"].as_u64() {
                    if let Some(tx) = p.lock().unwrap().remove(&id) {
                        let _ = tx.send(v);
                    }
                }
            }
        });
        let c = Arc::new(StdioClient {
            _proc: proc,
            stdin: Arc::new(Mutex::new(stdin)),
            pending,
            next: 1.into(),
        });
        let init = c
            .request(
                "initialize",
                json!({ "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "gateway-bench", "version": "1" } }),
            )
            .await?;
        if init.get("result").is_none() {
            return Err(format!("stdio initialize failed: {init}"));
        }
        c.write(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))?;
        Ok(c)
    }

    fn write(&self, v: &Value) -> Res<()> {
        let mut line = v.to_string();
        line.push('\n');
        let mut w = self.stdin.lock().unwrap();
        w.write_all(line.as_bytes())
            .and_then(|_| w.flush())
            .map_err(|e| format!("writing to test-app: {e}"))
    }

    async fn request(&self, method: &str, params: Value) -> Res<Value> {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        self.write(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))?;
        match tokio::time::timeout(Duration::from_secs(30), rx).await {
            Ok(Ok(v)) => Ok(v),
            _ => {
                self.pending.lock().unwrap().remove(&id);
                Err(format!("no answer to {method} within 30 s"))
            }
        }
    }

    async fn echo(&self) -> Res<()> {
        let v = self
            .request(
                "tools/call",
                json!({ "name": "echo", "arguments": { "text": "bench" } }),
            )
            .await?;
        if v["result"]["isError"] == false {
            Ok(())
        } else {
            Err(format!("stdio echo failed: {v}"))
        }
    }
}

/// `target/bench-node/node_modules/.bin/supergateway`, installed with npm when missing.
fn ensure_supergateway() -> Res<(PathBuf, String)> {
    let prefix = target_dir().join("bench-node");
    let bin = prefix.join("node_modules/.bin/supergateway");
    if !bin.exists() {
        log("peers: installing supergateway with npm into target/bench-node…");
        std::fs::create_dir_all(&prefix).map_err(|e| e.to_string())?;
        let mut cmd = Command::new("npm");
        cmd.args([
            "install",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--prefix",
        ])
        .arg(&prefix)
        .arg("supergateway");
        let (ok, out, err) = run_bounded(cmd, Duration::from_secs(300))?;
        if !ok || !bin.exists() {
            return Err(format!("npm install supergateway failed: {out} {err}"));
        }
    }
    let mut v = Command::new(&bin);
    v.arg("--version");
    let version = run_bounded(v, Duration::from_secs(30))
        .map(|(_, o, _)| o.trim().to_string())
        .unwrap_or_default();
    Ok((bin, version))
}

/// `target/bench-venv/bin/mcp-proxy`, installed with pip into that venv when missing.
fn ensure_mcp_proxy() -> Res<(PathBuf, String)> {
    let venv = target_dir().join("bench-venv");
    let bin = venv.join("bin/mcp-proxy");
    if !bin.exists() {
        log("peers: installing mcp-proxy with pip into target/bench-venv…");
        let mut cmd = Command::new("python3");
        cmd.args(["-m", "venv"]).arg(&venv);
        let (ok, out, err) = run_bounded(cmd, Duration::from_secs(120))?;
        if !ok {
            return Err(format!("python3 -m venv failed: {out} {err}"));
        }
        let mut cmd = Command::new(venv.join("bin/pip"));
        cmd.args(["install", "-q", "mcp-proxy"]);
        let (ok, out, err) = run_bounded(cmd, Duration::from_secs(300))?;
        if !ok || !bin.exists() {
            return Err(format!("pip install mcp-proxy failed: {out} {err}"));
        }
    }
    let mut v = Command::new(&bin);
    v.arg("--version");
    let version = run_bounded(v, Duration::from_secs(30))
        .map(|(_, o, e)| format!("{}{}", o.trim(), e.trim()))
        .unwrap_or_default();
    Ok((bin, version))
}

/// Starts a peer (its output discarded) and opens a session on its `/mcp` once it answers.
async fn start_peer(client: &reqwest::Client, mut cmd: Command, url: &str) -> Res<(Proc, Session)> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut proc = Proc::spawn(cmd)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match Session::open(client, url, "2025-06-18").await {
            Ok(s) => return Ok((proc, s)),
            Err(e) => {
                if Instant::now() >= deadline || !matches!(proc.child.try_wait(), Ok(None)) {
                    return Err(format!("peer at {url} did not answer: {e}"));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

enum Target {
    Stdio(Arc<StdioClient>),
    Http(McpRequest),
}

pub async fn peers(art: &Artefacts, o: &Opts) -> Res<Value> {
    let (rounds, secs) = if o.quick { (2, 1.2) } else { (5, 3.0) };
    let client = http_client();
    let mut out = json!({ "scenario": "peers" });
    let mut targets: Vec<(&str, Target)> = Vec::new();
    let mut keep: Vec<Proc> = Vec::new();

    // Direct stdio.
    let direct = StdioClient::start(art).await?;
    targets.push(("direct_stdio", Target::Stdio(direct)));

    // This gateway: a stdio app, /apps/mcp/{id} (2026-07-28 stateless requests).
    let dir = tempfile::Builder::new()
        .prefix("bench-peers-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let apps = dir.path().join("apps");
    write_manifest(&apps, "p", &stdio_app(art, "p", &[]))?;
    let gw = Gateway::start(art, dir, &gateway_config(&apps), &[])?;
    gw.wait_running(&client, &["p".into()], Duration::from_secs(30))
        .await?;
    targets.push((
        "gateway",
        Target::Http(McpRequest::tool_call(
            &format!("{}/apps/mcp/p", gw.url),
            "echo",
            json!({ "text": "bench" }),
        )),
    ));
    // The same gateway and app, in one initialize-era session as the peers are driven (the
    // protocol library's session path on the host's side).
    let gw_mcp = format!("{}/apps/mcp/p", gw.url);
    let session = Session::open(&client, &gw_mcp, "2025-06-18").await?;
    targets.push((
        "gateway_session",
        Target::Http(McpRequest::in_session(
            &gw_mcp,
            &session,
            "tools/call",
            json!({ "name": "echo", "arguments": { "text": "bench" } }),
        )),
    ));

    // supergateway (stateful: one child, one session; the stateless mode starts a child per request).
    match ensure_supergateway() {
        Ok((bin, version)) => {
            let port = free_port();
            let mut cmd = Command::new(bin);
            cmd.args([
                "--stdio",
                &art.test_app.display().to_string(),
                "--outputTransport",
                "streamableHttp",
                "--stateful",
            ])
            .args(["--port", &port.to_string(), "--logLevel", "none"]);
            let url = format!("http://127.0.0.1:{port}/mcp");
            match start_peer(&client, cmd, &url).await {
                Ok((p, s)) => {
                    keep.push(p);
                    out["supergateway_version"] = version.into();
                    targets.push((
                        "supergateway",
                        Target::Http(McpRequest::in_session(
                            &url,
                            &s,
                            "tools/call",
                            json!({ "name": "echo", "arguments": { "text": "bench" } }),
                        )),
                    ));
                }
                Err(e) => out["supergateway_error"] = e.into(),
            }
        }
        Err(e) => out["supergateway_error"] = e.into(),
    }

    // mcp-proxy (Python): streamable HTTP at /mcp.
    match ensure_mcp_proxy() {
        Ok((bin, version)) => {
            let port = free_port();
            let mut cmd = Command::new(bin);
            cmd.args([
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--log-level",
                "WARNING",
                "--",
            ])
            .arg(&art.test_app);
            let url = format!("http://127.0.0.1:{port}/mcp");
            match start_peer(&client, cmd, &url).await {
                Ok((p, s)) => {
                    keep.push(p);
                    out["mcp_proxy_version"] = version.into();
                    targets.push((
                        "mcp_proxy",
                        Target::Http(McpRequest::in_session(
                            &url,
                            &s,
                            "tools/call",
                            json!({ "name": "echo", "arguments": { "text": "bench" } }),
                        )),
                    ));
                }
                Err(e) => out["mcp_proxy_error"] = e.into(),
            }
        }
        Err(e) => out["mcp_proxy_error"] = e.into(),
    }

    let run = |t: &Target, c: usize, d: Duration, max: Option<u64>| {
        let fut: std::pin::Pin<Box<dyn std::future::Future<Output = Samples> + Send>> = match t {
            Target::Stdio(sc) => {
                let sc = sc.clone();
                Box::pin(load_with(c, d, max, move || {
                    let sc = sc.clone();
                    async move { sc.echo().await }
                }))
            }
            Target::Http(req) => {
                let client = client.clone();
                let req = req.clone();
                Box::pin(async move { load(&client, &req, c, d, max).await })
            }
        };
        fut
    };
    for (name, t) in &targets {
        let s = run(t, 4, Duration::from_secs(10), Some(200)).await;
        if s.errors > 0 {
            return Err(format!("warm-up of {name} failed: {:?}", s.first_error));
        }
    }
    let conc = [1usize, 16];
    let mut samples = vec![vec![Samples::default(); conc.len()]; targets.len()];
    let gi = targets.iter().position(|(n, _)| *n == "gateway").unwrap();
    let gsi = targets.iter().position(|(n, _)| *n == "gateway_session").unwrap();
    // The gateway's CPU during its own rounds, per concurrency (stateless, session).
    let mut gateway_cpu_us = vec![0u64; conc.len()];
    let mut session_cpu_us = vec![0u64; conc.len()];
    for round in 0..rounds {
        for (ci, &c) in conc.iter().enumerate() {
            for k in 0..targets.len() {
                let ti = (k + round) % targets.len();
                let before = cpu_us(gw.pid());
                let s = run(&targets[ti].1, c, Duration::from_secs_f64(secs), None).await;
                if ti == gi {
                    gateway_cpu_us[ci] += cpu_us(gw.pid()).saturating_sub(before);
                } else if ti == gsi {
                    session_cpu_us[ci] += cpu_us(gw.pid()).saturating_sub(before);
                }
                log(format!(
                    "peers: round {} c{c} {}: {} calls, {} errors",
                    round + 1,
                    targets[ti].0,
                    s.calls(),
                    s.errors
                ));
                samples[ti][ci].merge(s);
            }
        }
    }
    let mut errors = 0;
    let mut best_peer: Option<(&str, f64)> = None;
    for (ti, (name, _)) in targets.iter().enumerate() {
        let (s1, s16) = (&samples[ti][0], &samples[ti][1]);
        errors += s1.errors + s16.errors;
        out[*name] = json!({ "c1": s1.summary(), "c16": s16.summary(),
            "p50_ms": round(s1.pct_ms(50.0), 3), "rps": round(s16.rps(), 1) });
        if matches!(*name, "supergateway" | "mcp_proxy")
            && best_peer.is_none_or(|(_, r)| s16.rps() > r)
        {
            best_peer = Some((name, s16.rps()));
        }
    }
    for (ci, c) in conc.iter().enumerate() {
        let calls = samples[gi][ci].calls().max(1) as f64;
        out["gateway"][format!("c{c}")]["cpu_us_per_call"] = round(gateway_cpu_us[ci] as f64 / calls, 1).into();
        let calls = samples[gsi][ci].calls().max(1) as f64;
        out["gateway_session"][format!("c{c}")]["cpu_us_per_call"] = round(session_cpu_us[ci] as f64 / calls, 1).into();
    }
    out["gateway_session_cpu_us_per_call"] = out["gateway_session"]["c16"]["cpu_us_per_call"].clone();
    out["session_throughput_vs_best_peer"] = best_peer.map(|(_, r)| ratio(samples[gsi][1].rps(), r)).into();
    out["gateway_cpu_us_per_call"] = out["gateway"]["c16"]["cpu_us_per_call"].clone();
    let gw_rps = samples[gi][1].rps();
    out["throughput_vs_best_peer"] = best_peer.map(|(_, r)| ratio(gw_rps, r)).into();
    out["best_peer"] = best_peer.map(|(n, _)| n).into();
    out["p50_vs_direct_stdio"] =
        ratio(samples[gi][0].pct_ms(50.0), samples[0][0].pct_ms(50.0)).into();
    out["throughput_vs_direct_stdio"] = ratio(gw_rps, samples[0][1].rps()).into();
    out["rounds"] = rounds.into();
    out["round_secs"] = secs.into();
    out["errors"] = errors.into();
    out["note"] = "each side wraps its own stdio test-app; rps at 16 concurrent, p50 at 1; the gateway is called with \
                   2026-07-28 stateless requests on /apps/mcp/{id} (gateway_session: the same in one initialize-era session, \
                   as the peers are driven), the peers in one initialize-era session on /mcp \
                   (supergateway --stateful: its stateless mode starts a server per request); direct_stdio is the bench \
                   writing JSON-RPC lines to the app's stdin itself; gateway_cpu_us_per_call is gateway-host's utime+stime \
                   during its 16-concurrent rounds ÷ calls (cpu_us_per_call per concurrency). supergateway has no bind-address option: it listens \
                   on all interfaces during its rounds"
        .into();
    drop(keep);
    drop(gw);
    Ok(out)
}
