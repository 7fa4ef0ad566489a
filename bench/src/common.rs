//! Shared pieces: artefact paths, child processes in their own process groups (killed on drop,
//! also while unwinding from a panic), a served gateway, a hand-written MCP client over reqwest,
//! and the statistics.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead as _, BufReader};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub type Res<T> = Result<T, String>;

// The repository and target folders, terminal colours stripped from a log line, and a free port
// below the kernel's ephemeral range (so no port bound to 0, and no outgoing connection, takes it
// between its pick and the app's bind) are the end-to-end harness's: one way to do each.
pub use gateway_e2e::{free_port, repo_root, strip_ansi, target_dir};

/// `<name>` beside the running bench, else `target/release/<name>`, or an error telling how to
/// build it. Beside first: the bench measures the artefacts built with it, even from a target
/// folder copied from another checkout (whose path the bench was compiled with).
pub fn release_artefact(name: &str) -> Res<PathBuf> {
    let beside = std::env::current_exe().ok().and_then(|exe| Some(exe.parent()?.join(name)));
    if let Some(p) = beside.filter(|p| p.exists()) {
        return Ok(p);
    }
    let p = target_dir().join("release").join(name);
    if p.exists() {
        Ok(p)
    } else {
        Err(format!(
            "{} is missing: run `cargo build --release --workspace` first",
            p.display()
        ))
    }
}

pub struct Artefacts {
    pub gateway: PathBuf,
    pub module: PathBuf,
    pub test_app: PathBuf,
}

impl Artefacts {
    pub fn find() -> Res<Artefacts> {
        Ok(Artefacts {
            gateway: release_artefact("gateway-host")?,
            module: release_artefact("libmcpapp_plugin.so")?,
            test_app: release_artefact("test-app")?,
        })
    }
}

/// Process groups still alive, killed by the Ctrl-C handler.
static LIVE_GROUPS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

pub fn kill_all_groups() {
    for pgid in LIVE_GROUPS.lock().map(|g| g.clone()).unwrap_or_default() {
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

/// A child process leading its own process group; dropping it sends SIGTERM to the group, then
/// SIGKILL after a grace period.
pub struct Proc {
    pub child: Child,
    pub pid: u32,
}

impl Proc {
    pub fn spawn(mut cmd: Command) -> Res<Proc> {
        cmd.process_group(0);
        let child = cmd.spawn().map_err(|e| format!("spawning {cmd:?}: {e}"))?;
        let pid = child.id();
        LIVE_GROUPS.lock().unwrap().push(pid as i32);
        Ok(Proc { child, pid })
    }

    pub fn terminate(&mut self, grace: Duration) {
        let pgid = self.pid as i32;
        if matches!(self.child.try_wait(), Ok(None)) {
            unsafe {
                libc::kill(-pgid, libc::SIGTERM);
            }
            let deadline = Instant::now() + grace;
            while Instant::now() < deadline {
                if !matches!(self.child.try_wait(), Ok(None)) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        // Whatever is left in the group (the leader or stragglers).
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
        let _ = self.child.wait();
        LIVE_GROUPS.lock().unwrap().retain(|g| *g != pgid);
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.terminate(Duration::from_secs(5));
    }
}

/// Runs a command to completion within `timeout` (killing its group otherwise) → (status ok, stdout, stderr).
pub fn run_bounded(mut cmd: Command, timeout: Duration) -> Res<(bool, String, String)> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let desc = format!("{cmd:?}");
    let mut p = Proc::spawn(cmd)?;
    let mut out = p.child.stdout.take().unwrap();
    let mut err = p.child.stderr.take().unwrap();
    let to = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut s);
        s
    });
    let te = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(st) = p.child.try_wait().map_err(|e| e.to_string())? {
            break st;
        }
        if Instant::now() >= deadline {
            p.terminate(Duration::from_millis(100));
            return Err(format!("{desc} did not finish within {timeout:?}"));
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let stdout = to.join().unwrap_or_default();
    let stderr = te.join().unwrap_or_default();
    Ok((status.success(), stdout, stderr))
}

/// Removes the `Section__Key` configuration overrides of the bench's own environment, but for
/// `Gateway__WorkerThreads`, which is kept so that the runtime's size can be compared side by side
/// (`Gateway__WorkerThreads=2 cargo run --release -p bench -- proxy`).
pub fn scrub_env(cmd: &mut Command) {
    cmd.env_remove("RUST_LOG");
    const SECTIONS: &[&str] = &[
        "OpenClaw",
        "McpApps",
        "Gateway",
        "Plugins",
        "Security",
        "Agent",
        "Tools",
        "Sessions",
        "McpCompatibility",
        "Testing",
        "Logging",
    ];
    const KEPT: &str = "Gateway__WorkerThreads";
    for (k, _) in std::env::vars_os() {
        if let Some(k) = k.to_str() {
            if let Some((section, _)) = k.split_once("__") {
                if SECTIONS.iter().any(|s| s.eq_ignore_ascii_case(section)) && k != KEPT {
                    cmd.env_remove(k);
                }
            }
        }
    }
}

/// A `gateway-host` serving on 127.0.0.1 (a free port), started from a configuration file.
pub struct Gateway {
    pub proc: Proc,
    pub url: String,
    pub started: Instant,
    log: Arc<Mutex<VecDeque<String>>>,
    /// When the gateway logged each app's move to running (`McpApp 'id' … -> running`).
    running: Arc<Mutex<HashMap<String, Instant>>>,
    // Last, so that the folder outlives the process.
    _dir: tempfile::TempDir,
}

impl Gateway {
    /// Writes `config` to `dir/appsettings.json` and starts the gateway there; waits for its
    /// `Gateway listening on` line (bounded).
    pub fn start(
        art: &Artefacts,
        dir: tempfile::TempDir,
        config: &Value,
        env: &[(&str, String)],
    ) -> Res<Gateway> {
        let cfg = dir.path().join("appsettings.json");
        std::fs::write(&cfg, serde_json::to_string_pretty(config).unwrap())
            .map_err(|e| e.to_string())?;
        let mut cmd = Command::new(&art.gateway);
        scrub_env(&mut cmd);
        cmd.arg("--config")
            .arg(&cfg)
            .arg("--module")
            .arg(&art.module)
            .args(["--urls", "http://127.0.0.1:0"]);
        // The gateway's own default logging (info, `Gateway listening on` included; rmcp at warn).
        cmd.current_dir(dir.path()).env_remove("RUST_LOG");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let started = Instant::now();
        let mut proc = Proc::spawn(cmd)?;
        let log = Arc::new(Mutex::new(VecDeque::new()));
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let running = Arc::new(Mutex::new(HashMap::new()));
        for pipe in [
            Box::new(proc.child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(proc.child.stderr.take().unwrap()),
        ] {
            let log = log.clone();
            let tx = tx.clone();
            let running = running.clone();
            std::thread::spawn(move || {
                const NEEDLE: &str = "Gateway listening on ";
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { break };
                    let line = strip_ansi(&line);
                    if let Some(i) = line.find(NEEDLE) {
                        let url: String = line[i + NEEDLE.len()..]
                            .chars()
                            .take_while(|c| !c.is_whitespace() && *c != '"')
                            .collect();
                        let _ = tx.send(url.trim_end_matches('/').to_string());
                    }
                    if let Some(id) = moved_to_running(&line) {
                        running.lock().unwrap().entry(id).or_insert_with(Instant::now);
                    }
                    let mut l = log.lock().unwrap();
                    if l.len() >= 200 {
                        l.pop_front();
                    }
                    l.push_back(line);
                }
            });
        }
        drop(tx);
        let url = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(url) if url.starts_with("http://") => url,
            _ => {
                let mut proc = proc;
                proc.terminate(Duration::from_secs(2));
                let logs = log
                    .lock()
                    .unwrap()
                    .iter()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("\n");
                return Err(format!(
                    "gateway-host did not report 'Gateway listening on' within 60 s\n{logs}"
                ));
            }
        };
        Ok(Gateway {
            proc,
            url,
            started,
            log,
            running,
            _dir: dir,
        })
    }

    pub fn logs(&self) -> String {
        self.log
            .lock()
            .unwrap()
            .iter()
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn pid(&self) -> u32 {
        self.proc.pid
    }

    /// The time since start at which the gateway had logged every app of `ids` moving to
    /// running (bounded), confirmed by `/apps/health` once. Unlike [`Gateway::wait_running`] it
    /// puts no load on the gateway while the apps start: polling `/apps/health` every 10 ms
    /// costs the gateway (and this process, which decodes it) more the larger the apps' reports
    /// are, and confined apps' reports are five times larger.
    pub async fn running_logged(&self, client: &reqwest::Client, ids: &[String], timeout: Duration) -> Res<Duration> {
        let deadline = Instant::now() + timeout;
        let last = loop {
            {
                let running = self.running.lock().unwrap();
                if ids.iter().all(|id| running.contains_key(id)) {
                    break ids.iter().map(|id| running[id]).max().unwrap_or(self.started);
                }
            }
            if Instant::now() >= deadline {
                return Err(format!("apps not all logged running within {timeout:?}\n{}", self.logs()));
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        self.wait_running(client, ids, timeout).await?;
        Ok(last.duration_since(self.started))
    }

    /// Polls `/apps/health` until every id in `ids` is `running` (bounded) → time since start.
    pub async fn wait_running(
        &self,
        client: &reqwest::Client,
        ids: &[String],
        timeout: Duration,
    ) -> Res<Duration> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(r) = client.get(format!("{}/apps/health", self.url)).send().await {
                if let Ok(v) = r.json::<Value>().await {
                    let apps = v["apps"].as_array().cloned().unwrap_or_default();
                    let all = ids.iter().all(|id| {
                        apps.iter()
                            .any(|a| a["id"] == id.as_str() && a["state"] == "running")
                    });
                    if all {
                        return Ok(self.started.elapsed());
                    }
                }
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "apps not all running within {timeout:?}\n{}",
                    self.logs()
                ));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Writes `dir/<folder>/openclaw.mcpapp.json`.
pub fn write_manifest(root: &Path, folder: &str, manifest: &Value) -> Res<()> {
    let dir = root.join(folder);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    std::fs::write(
        dir.join("openclaw.mcpapp.json"),
        serde_json::to_string_pretty(manifest).unwrap(),
    )
    .map_err(|e| e.to_string())
}

pub fn stdio_app(art: &Artefacts, id: &str, args: &[&str]) -> Value {
    json!({
        "id": id, "name": format!("Bench {id}"), "version": "1.0.0", "transport": "stdio",
        "command": art.test_app, "arguments": args, "toolNamePrefix": format!("{id}."),
        "startupTimeoutSeconds": 30, "requestTimeoutSeconds": 30,
    })
}

pub fn http_app(art: &Artefacts, id: &str, port: u16) -> Value {
    json!({
        "id": id, "name": format!("Bench {id}"), "version": "1.0.0", "transport": "http",
        "url": format!("http://127.0.0.1:{port}/mcp"), "command": art.test_app,
        "arguments": ["--http", format!("127.0.0.1:{port}")], "toolNamePrefix": format!("{id}."),
        "startupTimeoutSeconds": 30, "requestTimeoutSeconds": 30,
    })
}

/// An open loopback gateway discovering apps under `apps`.
pub fn gateway_config(apps: &Path) -> Value {
    json!({
        "Gateway": { "AlwaysRequireAuth": false },
        "OpenClaw": { "McpApps": { "Enabled": true, "DiscoveryPaths": [apps], "Allow": ["*"] } }
    })
}

// ---------------------------------------------------------------------------------------------
// MCP by hand
// ---------------------------------------------------------------------------------------------

/// Waits until something accepts TCP connections on 127.0.0.1:`port`.
pub async fn wait_listening(port: u16, within: Duration) -> Res<()> {
    let deadline = Instant::now() + within;
    loop {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("nothing listens on 127.0.0.1:{port} after {within:?}"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(256)
        .timeout(Duration::from_secs(30))
        .connect_timeout(Duration::from_secs(5))
        .build()
        .expect("building the HTTP client")
}

/// A 2026-07-28 stateless request (headers + `_meta`), body prepared once.
#[derive(Clone)]
pub struct McpRequest {
    pub url: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl McpRequest {
    pub fn new(url: &str, method: &str, mut params: Value) -> McpRequest {
        if !params.is_object() {
            params = json!({});
        }
        params["_meta"]["io.modelcontextprotocol/protocolVersion"] = "2026-07-28".into();
        params["_meta"]["io.modelcontextprotocol/clientInfo"] =
            json!({ "name": "gateway-bench", "version": "1" });
        params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
        let mut headers = vec![
            ("mcp-protocol-version".to_string(), "2026-07-28".to_string()),
            ("mcp-method".into(), method.into()),
        ];
        // SEP-2243: the name a request is about travels as a header too (a resource's URI for
        // resources/read, as the official clients send it).
        let name_key = if method == "resources/read" {
            "uri"
        } else {
            "name"
        };
        if let Some(name) = params.get(name_key).and_then(Value::as_str) {
            headers.push(("mcp-name".into(), name.into()));
        }
        let body =
            json!({ "jsonrpc": "2.0", "id": 0, "method": method, "params": params }).to_string();
        McpRequest {
            url: url.to_string(),
            headers,
            body,
        }
    }

    /// A request inside an initialize-era session (no `_meta`; session and version headers).
    pub fn in_session(url: &str, session: &Session, method: &str, params: Value) -> McpRequest {
        let mut headers = vec![(
            "mcp-protocol-version".to_string(),
            session.protocol_version.clone(),
        )];
        if let Some(id) = &session.id {
            headers.push(("mcp-session-id".into(), id.clone()));
        }
        let body =
            json!({ "jsonrpc": "2.0", "id": 0, "method": method, "params": params }).to_string();
        McpRequest {
            url: url.to_string(),
            headers,
            body,
        }
    }

    /// The same request from a client that declared `capabilities` (e.g. elicitation).
    pub fn with_client_capabilities(mut self, capabilities: Value) -> McpRequest {
        if let Ok(mut body) = serde_json::from_str::<Value>(&self.body) {
            body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = capabilities;
            self.body = body.to_string();
        }
        self
    }

    pub fn tool_call(url: &str, tool: &str, args: Value) -> McpRequest {
        McpRequest::new(
            url,
            "tools/call",
            json!({ "name": tool, "arguments": args }),
        )
    }

    /// Sends it, reads the whole body (JSON or SSE) → the `result`, or an error.
    pub async fn send(&self, client: &reqwest::Client) -> Res<Value> {
        let mut req = client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        for (k, v) in &self.headers {
            req = req.header(k, v);
        }
        // A fresh id per request: session-based peers route answers by id.
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let body = self.body.replacen("\"id\":0", &format!("\"id\":{id}"), 1);
        let resp = req
            .body(body)
            .send()
            .await
            .map_err(|e| format!("POST {}: {e}", self.url))?;
        let status = resp.status().as_u16();
        let text = resp
            .text()
            .await
            .map_err(|e| format!("reading {}: {e}", self.url))?;
        if status != 200 {
            return Err(format!("HTTP {status}: {}", trunc(&text)));
        }
        let msg = parse_response(&text)
            .ok_or_else(|| format!("no JSON-RPC response in {}", trunc(&text)))?;
        if msg.get("error").is_some() {
            return Err(format!(
                "JSON-RPC error: {}",
                trunc(&msg["error"].to_string())
            ));
        }
        let result = msg["result"].clone();
        if result["isError"] == true {
            return Err(format!("tool error: {}", trunc(&result.to_string())));
        }
        Ok(result)
    }
}

/// An initialize-era session (2025 revisions): `initialize`, `notifications/initialized`, then
/// requests with `Mcp-Session-Id` (when the server gave one) and the negotiated version.
pub struct Session {
    pub id: Option<String>,
    pub protocol_version: String,
}

impl Session {
    pub async fn open(client: &reqwest::Client, url: &str, version: &str) -> Res<Session> {
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": { "name": "gateway-bench", "version": "1" } } });
        let resp = client
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string())
            .send()
            .await
            .map_err(|e| format!("initialize {url}: {e}"))?;
        let status = resp.status().as_u16();
        let id = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let text = resp.text().await.map_err(|e| e.to_string())?;
        let msg = parse_response(&text)
            .filter(|_| status == 200)
            .ok_or_else(|| format!("initialize {url}: HTTP {status}: {}", trunc(&text)))?;
        let protocol_version = msg["result"]["protocolVersion"]
            .as_str()
            .unwrap_or(version)
            .to_string();
        let session = Session {
            id,
            protocol_version,
        };
        let mut req = client
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", &session.protocol_version);
        if let Some(id) = &session.id {
            req = req.header("mcp-session-id", id);
        }
        let r = req
            .body(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }).to_string())
            .send()
            .await
            .map_err(|e| format!("notifications/initialized {url}: {e}"))?;
        if !r.status().is_success() {
            return Err(format!(
                "notifications/initialized {url}: HTTP {}",
                r.status()
            ));
        }
        Ok(session)
    }
}

fn trunc(s: &str) -> String {
    s.chars().take(300).collect()
}

/// The JSON-RPC response in a JSON or SSE body (the message with an `id` and a result/error).
pub fn parse_response(text: &str) -> Option<Value> {
    let t = text.trim_start();
    if t.starts_with('{') {
        return serde_json::from_str(t).ok();
    }
    let mut data = String::new();
    let mut found = None;
    for line in text.lines().chain(std::iter::once("")) {
        if let Some(d) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(d.strip_prefix(' ').unwrap_or(d));
        } else if line.is_empty() && !data.is_empty() {
            if let Ok(v) = serde_json::from_str::<Value>(&data) {
                if v.get("id").is_some() && (v.get("result").is_some() || v.get("error").is_some())
                {
                    found = Some(v);
                }
            }
            data.clear();
        }
    }
    found
}

// ---------------------------------------------------------------------------------------------
// Load and statistics
// ---------------------------------------------------------------------------------------------

/// What one timed run of `workers` concurrent loops produced.
#[derive(Default, Clone)]
pub struct Samples {
    pub latencies_us: Vec<u64>,
    pub errors: u64,
    pub first_error: Option<String>,
    pub secs: f64,
}

impl Samples {
    pub fn merge(&mut self, other: Samples) {
        self.latencies_us.extend(other.latencies_us);
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.secs += other.secs;
    }
    pub fn calls(&self) -> u64 {
        self.latencies_us.len() as u64
    }
    pub fn rps(&self) -> f64 {
        if self.secs > 0.0 {
            self.calls() as f64 / self.secs
        } else {
            0.0
        }
    }
    pub fn pct_ms(&self, p: f64) -> f64 {
        percentile(&self.latencies_us, p) / 1000.0
    }
    pub fn summary(&self) -> Value {
        json!({
            "calls": self.calls(), "errors": self.errors, "rps": round(self.rps(), 1),
            "p50_ms": round(self.pct_ms(50.0), 3), "p99_ms": round(self.pct_ms(99.0), 3),
            "first_error": self.first_error,
        })
    }
}

pub fn percentile(v: &[u64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_unstable();
    let idx = ((p / 100.0) * (s.len() - 1) as f64).round() as usize;
    s[idx.min(s.len() - 1)] as f64
}

pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

pub fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

pub fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        round(a / b, 3)
    } else {
        f64::NAN
    }
}

/// `workers` loops sending `req` until `duration` passes (or `max_calls` in total when given).
pub async fn load(
    client: &reqwest::Client,
    req: &McpRequest,
    workers: usize,
    duration: Duration,
    max_calls: Option<u64>,
) -> Samples {
    let client = client.clone();
    let req = Arc::new(req.clone());
    load_with(workers, duration, max_calls, move || {
        let client = client.clone();
        let req = req.clone();
        async move { req.send(&client).await.map(|_| ()) }
    })
    .await
}

/// `workers` loops awaiting `call()` until `duration` passes (or `max_calls` in total).
pub async fn load_with<F, Fut>(
    workers: usize,
    duration: Duration,
    max_calls: Option<u64>,
    call: F,
) -> Samples
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Res<()>> + Send,
{
    let started = Instant::now();
    let deadline = started + duration;
    let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let call = call.clone();
        let counter = counter.clone();
        tasks.push(tokio::spawn(async move {
            let mut s = Samples::default();
            loop {
                if Instant::now() >= deadline {
                    break;
                }
                if let Some(max) = max_calls {
                    if counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= max {
                        break;
                    }
                }
                let t = Instant::now();
                match call().await {
                    Ok(_) => s.latencies_us.push(t.elapsed().as_micros() as u64),
                    Err(e) => {
                        s.errors += 1;
                        if s.first_error.is_none() {
                            s.first_error = Some(e);
                        }
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
    all
}

/// utime+stime of a process in microseconds (from /proc/PID/stat).
pub fn cpu_us(pid: u32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    // Fields after the command name (which ends at the last ')').
    let rest = &stat[stat.rfind(')').map(|i| i + 2).unwrap_or(0)..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11).and_then(|s| s.parse().ok()).unwrap_or(0)
        + f.get(12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    ticks * 1_000_000 / hz
}

/// VmRSS of a process in MiB.
pub fn rss_mb(pid: u32) -> f64 {
    status_mb(pid, "VmRSS:")
}

/// A `/proc/PID/status` memory line (`VmRSS:`, `RssAnon:`, `RssFile:`…) in MiB.
pub fn status_mb(pid: u32, field: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix(field)
                    .map(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            })
        })
        .flatten()
        .map(|kb| round(kb / 1024.0, 1))
        .unwrap_or(f64::NAN)
}

pub fn log(msg: impl AsRef<str>) {
    eprintln!("[bench] {}", msg.as_ref());
}

/// The app id of a log line recording an app's move to running (`McpApp 's3' loaded -> running`).
fn moved_to_running(line: &str) -> Option<String> {
    let rest = line.split_once("McpApp '")?.1;
    let (id, rest) = rest.split_once('\'')?;
    rest.contains(" -> running").then(|| id.to_string())
}
