//! The shared harness of the end-to-end tests.
//!
//! Every test drives the real release artefacts — `target/release/gateway-host` and
//! `target/release/libmcpapp_plugin.so` — as separate processes, the way an operator would. Build
//! them first with `cargo build --release --workspace` (the repository's test script does).
//!
//! What is here:
//! - Paths: [`repo_root`], [`target_dir`], [`release_bin`], [`module_lib`], [`module_crate_version`].
//! - A served gateway: [`GatewayProcess`] (started from a JSON configuration written to a temp
//!   folder, listening on a free port, its output collected and echoed), with blocking HTTP helpers.
//! - One-shot commands: [`run_gateway`] / [`run_gateway_with_timeout`] (e.g. `module-info`).
//! - Polling: [`wait_until`]; ports: [`free_port`].
//! - Modules the tests build themselves: [`build_variant_module`] (a second build of
//!   `mcpapp-plugin` with another version and file name) and [`build_altered_abi_module`] (a
//!   module built against an altered copy of the interface, from `tests/fixtures/altered-abi`).
//!   Nested builds are serialized (one at a time per process, and a file lock across processes)
//!   and cached per test process.
//! - The chat (SPEC R33–R35): [`scripted_llm`] (a scripted OpenAI-compatible Chat Completions
//!   server, the one test double: an LLM cannot run here) and [`chat`] (a client of
//!   `POST /apps/chat` that reads a turn's frames as they arrive).
//!
//! Conventions: every wait is bounded; a failing helper panics with the gateway's output so the
//! test log shows why; dropping a [`GatewayProcess`] terminates it.

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader, Read};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use serde_json::{json, Value};

pub mod chat;
pub mod own_redis;
pub mod round_robin;
pub mod scripted_llm;

/// How long [`GatewayProcess::start`] waits for the `Gateway listening on` line.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long [`GatewayProcess::terminate`] waits after SIGTERM before SIGKILL.
pub const TERMINATE_GRACE: Duration = Duration::from_secs(15);
/// Timeout of each HTTP request made by the helpers.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(30);
/// Default bound of [`run_gateway`].
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);
/// Bound of one nested `cargo build` made by the harness.
pub const BUILD_TIMEOUT: Duration = Duration::from_secs(20 * 60);

/// Top-level configuration sections the gateway lets environment variables override
/// (`Section__Key`). The harness removes such variables from the gateway's environment so that the
/// test runner's environment never leaks into a test; pass them explicitly through `env`.
const OVERRIDABLE_SECTIONS: &[&str] =
    &["OpenClaw", "McpApps", "Gateway", "Plugins", "Security", "Agent", "Tools", "Sessions", "McpCompatibility", "Testing", "Logging"];

// ---------------------------------------------------------------------------------------------
// Paths
// ---------------------------------------------------------------------------------------------

/// The repository root (the workspace folder holding `Cargo.toml`). Cargo tells a test process
/// where its package is when it runs it; the path compiled in is the fallback, since a `target/`
/// copied from another checkout would otherwise run that checkout's apps.
pub fn repo_root() -> PathBuf {
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest_dir.parent().expect("tests/ has a parent").to_path_buf()
}

/// The cargo target folder: `$CARGO_TARGET_DIR` when set (relative to the repository root),
/// else `<repo>/target`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                repo_root().join(dir)
            }
        }
        _ => repo_root().join("target"),
    }
}

/// `target/release/<name>`; panics if it was not built.
pub fn release_bin(name: &str) -> PathBuf {
    let path = target_dir().join("release").join(name);
    assert!(
        path.exists(),
        "{} does not exist: run cargo build --release --workspace first",
        path.display()
    );
    path
}

/// The file name of a shared library on this platform (`libNAME.so` on Linux).
pub fn dylib_file_name(lib_name: &str) -> String {
    format!("{}{lib_name}{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX)
}

/// The module library the workspace builds: `target/release/libmcpapp_plugin.so`.
pub fn module_lib() -> PathBuf {
    release_bin(&dylib_file_name("mcpapp_plugin"))
}

/// The `gateway-host` binary the workspace builds.
pub fn gateway_bin() -> PathBuf {
    release_bin("gateway-host")
}

/// The `[package] version` of a Cargo.toml (read textually; no inheritance).
pub fn package_version(cargo_toml: &Path) -> String {
    let text = std::fs::read_to_string(cargo_toml).unwrap_or_else(|e| panic!("reading {}: {e}", cargo_toml.display()));
    let package = toml_section(&text, "package").unwrap_or_else(|| panic!("{} has no [package]", cargo_toml.display()));
    package
        .lines()
        .find_map(|l| {
            let (key, value) = l.split_once('=')?;
            (key.trim() == "version").then(|| value.trim().trim_matches('"').to_string())
        })
        .unwrap_or_else(|| panic!("{} has no [package] version", cargo_toml.display()))
}

/// The version of the `mcpapp-plugin` crate as its Cargo.toml declares it.
pub fn module_crate_version() -> String {
    package_version(&repo_root().join("mcpapp-plugin/Cargo.toml"))
}

// ---------------------------------------------------------------------------------------------
// Small utilities
// ---------------------------------------------------------------------------------------------

/// Calls `condition` every `poll` until it returns true (→ true) or `timeout` passes (→ false).
pub fn wait_until(timeout: Duration, poll: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(poll);
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago, and that no other call in this test
/// process has handed out: tests run in parallel, and a port handed to one test's app (not bound
/// yet, or never, like an app that exits at once) must not be handed to another's, whose app would
/// then answer the first test's gateway. Prefer `--urls http://127.0.0.1:0` (what
/// [`GatewayProcess`] does) where the port need not be known in advance.
///
/// The port lies below the kernel's ephemeral range (`ip_local_port_range`): a port picked from
/// that range and let go could be handed next to anything binding port 0 (a gateway, a scripted
/// model's server) or to an outgoing connection's local end before the app binds it — CI saw an
/// app's port go to the scripted model's server that way. Below the range, only another explicit
/// bind can take it.
pub fn free_port() -> u16 {
    static NEXT: Mutex<Option<(u16, u16, u16)>> = Mutex::new(None);
    let mut next = NEXT.lock().unwrap();
    let (low, high, cursor) = next.get_or_insert_with(|| {
        let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
            .unwrap_or(32768);
        let low = ephemeral_low.saturating_sub(12_000).max(10_000);
        let high = ephemeral_low.max(low + 1);
        // Test processes run one after another: start each somewhere else in the range, so a
        // port an earlier process's app may still hold is not the first one tried.
        let start = low + (std::process::id() % u32::from(high - low)) as u16;
        (low, high, start)
    });
    for _ in *low..*high {
        let port = *cursor;
        *cursor = if port + 1 >= *high { *low } else { port + 1 };
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free TCP port on 127.0.0.1 between {low} and {high}");
}

/// Removes terminal colour sequences (`ESC [ … letter`) from a log line.
pub fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// Removes `Section__Key` variables of the gateway's overridable sections from `cmd`'s environment.
pub fn scrub_config_env(cmd: &mut Command) {
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        if let Some((section, _)) = key.split_once("__") {
            if OVERRIDABLE_SECTIONS.iter().any(|s| s.eq_ignore_ascii_case(section)) {
                cmd.env_remove(key);
            }
        }
    }
}

/// Reads `reader` line by line into `lines` (colours stripped), echoing each to the test's stderr
/// with `prefix` (cargo shows it for failing tests).
fn spawn_line_reader(reader: impl Read + Send + 'static, prefix: String, lines: Arc<Mutex<Vec<String>>>) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name(format!("reader {prefix}"))
        .spawn(move || {
            let mut reader = BufReader::new(reader);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match reader.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let line = strip_ansi(String::from_utf8_lossy(&buf).trim_end_matches(['\n', '\r']));
                        eprintln!("{prefix} {line}");
                        lines.lock().unwrap().push(line);
                    }
                }
            }
        })
        .expect("spawning a reader thread")
}

/// Runs `cmd` to completion with stdout and stderr captured, killing it after `timeout`
/// (then panicking with what it printed).
pub fn run_with_timeout(mut cmd: Command, timeout: Duration) -> Output {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let description = format!("{cmd:?}");
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawning {description}: {e}"));
    let mut out_pipe = child.stdout.take().unwrap();
    let mut err_pipe = child.stderr.take().unwrap();
    let out_thread = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out_pipe.read_to_end(&mut v);
        v
    });
    let err_thread = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err_pipe.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for a child") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            // Grandchildren may hold the pipes open: do not wait for the readers.
            panic!("{description} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = out_thread.join().unwrap_or_default();
    let stderr = err_thread.join().unwrap_or_default();
    Output { status, stdout, stderr }
}

/// Runs `gateway-host ARGS` once (e.g. `module-info`, `boundary-check`) with extra environment
/// `env`, bounded by [`COMMAND_TIMEOUT`]. The working folder is the repository root.
pub fn run_gateway(args: &[&str], env: &[(&str, &str)]) -> Output {
    run_gateway_with_timeout(args, env, COMMAND_TIMEOUT)
}

/// [`run_gateway`] with an explicit bound.
pub fn run_gateway_with_timeout(args: &[&str], env: &[(&str, &str)], timeout: Duration) -> Output {
    let mut cmd = Command::new(gateway_bin());
    scrub_config_env(&mut cmd);
    cmd.args(args).current_dir(repo_root()).env("RUST_LOG", "info");
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_with_timeout(cmd, timeout)
}

/// stdout and stderr of an [`Output`] as text, for assertion messages.
pub fn describe_output(output: &Output) -> String {
    format!(
        "status: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

// ---------------------------------------------------------------------------------------------
// A served gateway
// ---------------------------------------------------------------------------------------------

/// How to start a [`GatewayProcess`].
#[derive(Debug, Clone, Default)]
pub struct GatewayOptions {
    /// Written as `appsettings.json` into the configuration folder. When `config_dir` is given and
    /// this is `Value::Null`, the folder's existing `appsettings.json` is used as is.
    pub config: Value,
    /// `--module PATH`; `None` lets the gateway pick (Gateway.ModulePath, else the library beside
    /// the executable, i.e. the workspace's module).
    pub module: Option<PathBuf>,
    /// Extra environment for the gateway (e.g. `McpApps__Enabled=false`, `RUST_LOG=debug`).
    /// `RUST_LOG` defaults to `info`.
    pub env: Vec<(String, String)>,
    /// Appended to the command line. If it contains `--urls`, the harness does not add its own.
    pub extra_args: Vec<String>,
    /// The configuration folder (relative paths of the configuration resolve against it; it is
    /// also the gateway's working folder). Default: a fresh temporary folder, deleted on drop.
    pub config_dir: Option<PathBuf>,
    /// A command the gateway runs under, e.g. `["unshare", "--pid", "--fork"]`: the gateway's
    /// command line is appended to it. [`GatewayProcess::pid`] is then the wrapper's pid.
    pub wrapper: Vec<String>,
}

/// A running `gateway-host` serving HTTP on a free port of 127.0.0.1.
///
/// Its stdout and stderr are collected line by line (see [`logs`](Self::logs)) and echoed to the
/// test's stderr prefixed with `[gateway PID]`. Dropping it terminates the process.
pub struct GatewayProcess {
    child: Child,
    pid: u32,
    base_url: String,
    config_dir: PathBuf,
    lines: Arc<Mutex<Vec<String>>>,
    readers: Vec<JoinHandle<()>>,
    client: reqwest::blocking::Client,
    exit_status: Option<ExitStatus>,
    // Kept last so that the folder outlives the process.
    _temp: Option<tempfile::TempDir>,
}

impl GatewayProcess {
    /// Starts the gateway with `config` as its appsettings.json and everything else default.
    pub fn start(config: Value) -> GatewayProcess {
        GatewayProcess::start_with(GatewayOptions { config, ..Default::default() })
    }

    /// Starts the gateway and waits (up to [`STARTUP_TIMEOUT`]) until it logs
    /// `Gateway listening on http://ADDR`. Panics, showing the output, if it exits first.
    pub fn start_with(opts: GatewayOptions) -> GatewayProcess {
        match GatewayProcess::try_start_with(opts) {
            Ok(gateway) => gateway,
            Err(message) => panic!("{message}"),
        }
    }

    /// Like [`start_with`](Self::start_with), but returns the failure (with the process's output)
    /// instead of panicking — for tests that expect the gateway to refuse to start.
    pub fn try_start_with(opts: GatewayOptions) -> Result<GatewayProcess, String> {
        let (temp, config_dir) = match &opts.config_dir {
            Some(dir) => {
                std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
                (None, dir.clone())
            }
            None => {
                let temp = tempfile::Builder::new().prefix("gateway-e2e-").tempdir().expect("creating a temp folder");
                let dir = temp.path().to_path_buf();
                (Some(temp), dir)
            }
        };
        let config_path = config_dir.join("appsettings.json");
        if !(opts.config_dir.is_some() && opts.config.is_null()) {
            let config = if opts.config.is_null() { json!({}) } else { opts.config.clone() };
            std::fs::write(&config_path, serde_json::to_string_pretty(&config).unwrap())
                .unwrap_or_else(|e| panic!("writing {}: {e}", config_path.display()));
        }

        let mut cmd = match opts.wrapper.split_first() {
            Some((program, args)) => {
                let mut cmd = Command::new(program);
                cmd.args(args).arg(gateway_bin());
                cmd
            }
            None => Command::new(gateway_bin()),
        };
        scrub_config_env(&mut cmd);
        cmd.arg("--config").arg(&config_path);
        if let Some(module) = &opts.module {
            cmd.arg("--module").arg(module);
        }
        if !opts.extra_args.iter().any(|a| a == "--urls" || a.starts_with("--urls=")) {
            cmd.args(["--urls", "http://127.0.0.1:0"]);
        }
        cmd.args(&opts.extra_args);
        cmd.current_dir(&config_dir).env("RUST_LOG", "info");
        for (k, v) in &opts.env {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
        let pid = child.id();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let readers = vec![
            spawn_line_reader(child.stdout.take().unwrap(), format!("[gateway {pid} out]"), lines.clone()),
            spawn_line_reader(child.stderr.take().unwrap(), format!("[gateway {pid}]"), lines.clone()),
        ];
        let client = reqwest::blocking::Client::builder()
            .timeout(HTTP_TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            .no_proxy()
            .build()
            .expect("building the HTTP client");
        let mut gateway = GatewayProcess {
            child,
            pid,
            base_url: String::new(),
            config_dir,
            lines,
            readers,
            client,
            exit_status: None,
            _temp: temp,
        };

        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Some(url) = gateway.find_listening_url() {
                gateway.base_url = url;
                return Ok(gateway);
            }
            if let Some(status) = gateway.try_wait() {
                gateway.join_readers(Duration::from_secs(2));
                return Err(format!(
                    "gateway-host exited ({status}) before listening\n--- output ---\n{}",
                    gateway.logs()
                ));
            }
            if Instant::now() >= deadline {
                gateway.kill_hard();
                return Err(format!(
                    "gateway-host did not log 'Gateway listening on' within {STARTUP_TIMEOUT:?}\n--- output ---\n{}",
                    gateway.logs()
                ));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// The URL of the `Gateway listening on http://ADDR` line, plain text or JSON
    /// (`Logging.Format = "json"`: the URL ends at the message's closing quote).
    fn find_listening_url(&self) -> Option<String> {
        const NEEDLE: &str = "Gateway listening on ";
        let lines = self.lines.lock().unwrap();
        lines.iter().find_map(|l| {
            let rest = &l[l.find(NEEDLE)? + NEEDLE.len()..];
            let url: String = rest.chars().take_while(|c| !c.is_whitespace() && *c != '"').collect();
            url.starts_with("http://").then(|| url.trim_end_matches('/').to_string())
        })
    }

    fn join_readers(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.readers.iter().any(|r| !r.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// `base_url + path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// The folder holding `appsettings.json` (the gateway's working folder).
    pub fn config_dir(&self) -> &Path {
        &self.config_dir
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The gateway's resident memory (`VmRSS`) in KiB; 0 once it is gone.
    pub fn rss_kib(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    /// The resident memory (KiB) once it has settled: read every half second until it has not
    /// fallen by more than 256 KiB over two seconds (at most 30 s) — what a burst freed is given
    /// back about a second after it was freed, so an idle size read sooner would include it.
    pub fn settled_rss_kib(&self) -> u64 {
        let mut readings = vec![self.rss_kib()];
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(500));
            readings.push(self.rss_kib());
            if let [.., before, _, _, now] = readings[..] {
                if before <= now + 256 {
                    break;
                }
            }
        }
        *readings.last().unwrap()
    }

    /// Waits (up to a minute) for the resident memory to come back within `percent` % of
    /// `baseline_kib`; the last reading either way. The allocator gives freed pages back about a
    /// second after they were freed (`gateway-host/src/memory.rs`), so this polls, never sleeps
    /// a fixed time.
    pub fn rss_back_within(&self, baseline_kib: u64, percent: u64) -> (bool, u64) {
        let bound = baseline_kib + baseline_kib * percent / 100;
        let mut last = self.rss_kib();
        let back = wait_until(Duration::from_secs(60), Duration::from_millis(250), || {
            last = self.rss_kib();
            last <= bound
        });
        (back, last)
    }

    /// The HTTP client the helpers use (timeouts set), for requests they do not cover.
    pub fn client(&self) -> &reqwest::blocking::Client {
        &self.client
    }

    /// `GET path` → (status, body). Transport errors are returned, not panicked on.
    pub fn try_get(&self, path: &str) -> Result<(u16, String), String> {
        let response = self.client.get(self.url(path)).send().map_err(|e| format!("GET {path}: {e}"))?;
        let status = response.status().as_u16();
        let body = response.text().map_err(|e| format!("GET {path}: reading the body: {e}"))?;
        Ok((status, body))
    }

    /// `GET path` → (status, body); panics (with the gateway's output) on a transport error.
    pub fn get(&self, path: &str) -> (u16, String) {
        self.try_get(path).unwrap_or_else(|e| panic!("{e}\n--- gateway output ---\n{}", self.logs()))
    }

    /// What `GET /metrics` says now (read values with [`metric_value`]).
    pub fn metrics(&self) -> String {
        self.get("/metrics").1
    }

    /// `GET path` → (status, JSON body). A body that is not JSON comes back as `Value::String`.
    pub fn get_json(&self, path: &str) -> (u16, Value) {
        let (status, body) = self.get(path);
        (status, parse_json_or_string(body))
    }

    /// `POST path` with a JSON body → (status, JSON body; non-JSON as `Value::String`).
    pub fn post_json(&self, path: &str, body: &Value) -> (u16, Value) {
        let response = self
            .client
            .post(self.url(path))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .unwrap_or_else(|e| panic!("POST {path}: {e}\n--- gateway output ---\n{}", self.logs()));
        let status = response.status().as_u16();
        let text = response.text().unwrap_or_else(|e| panic!("POST {path}: reading the body: {e}"));
        (status, parse_json_or_string(text))
    }

    /// One stateless MCP request of the 2026-07-28 revision to an MCP endpoint (`/mcp`,
    /// `/apps/mcp/{app}`), with the headers and `_meta` the revision asks for, declaring
    /// `capabilities`. Returns the HTTP status and the JSON-RPC response (read from JSON or SSE).
    pub fn mcp_request(&self, path: &str, method: &str, params: Value, capabilities: Value) -> (u16, Value) {
        let mut params = if params.is_object() { params } else { serde_json::json!({}) };
        params["_meta"]["io.modelcontextprotocol/protocolVersion"] = "2026-07-28".into();
        params["_meta"]["io.modelcontextprotocol/clientInfo"] = serde_json::json!({ "name": "gateway-e2e", "version": "1" });
        params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = capabilities;
        let mut request = self
            .client
            .post(self.url(path))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method);
        // SEP-2243: the name a request is about travels as a header too.
        if let Some(name) = params.get("name").or_else(|| params.get("uri")).and_then(Value::as_str) {
            request = request.header("mcp-name", name);
        }
        let body = serde_json::json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
        let response = request
            .body(body.to_string())
            .send()
            .unwrap_or_else(|e| panic!("POST {path}: {e}\n--- gateway output ---\n{}", self.logs()));
        let status = response.status().as_u16();
        let text = response.text().unwrap_or_else(|e| panic!("POST {path}: reading the body: {e}"));
        let message = serde_json::from_str(&text).ok().or_else(|| {
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .find(|m| m["id"] == 1)
        });
        (status, message.unwrap_or_else(|| panic!("POST {path} {method}: no response in {text}")))
    }

    /// Every line the gateway printed so far (stdout and stderr interleaved in arrival order),
    /// colours stripped.
    pub fn log_lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// [`log_lines`](Self::log_lines) joined with newlines.
    pub fn logs(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// Waits until some output line contains `needle`.
    pub fn wait_for_log(&self, needle: &str, timeout: Duration) -> bool {
        wait_until(timeout, Duration::from_millis(25), || self.lines.lock().unwrap().iter().any(|l| l.contains(needle)))
    }

    /// The first output line containing `needle`, if any.
    pub fn find_log(&self, needle: &str) -> Option<String> {
        self.lines.lock().unwrap().iter().find(|l| l.contains(needle)).cloned()
    }

    /// The exit status if the process has ended (never blocks).
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        if self.exit_status.is_none() {
            self.exit_status = self.child.try_wait().ok().flatten();
        }
        self.exit_status
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.try_wait().is_none()
    }

    /// Sends `signal` (e.g. `libc::SIGTERM`) unless the process has already ended.
    pub fn signal(&mut self, signal: libc::c_int) {
        if self.try_wait().is_none() {
            // SAFETY: plain kill(2) on our own child's pid, which is not yet reaped.
            unsafe {
                libc::kill(self.pid as libc::pid_t, signal);
            }
        }
    }

    /// Waits up to `timeout` for the process to end.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        wait_until(timeout, Duration::from_millis(20), || self.try_wait().is_some());
        self.try_wait()
    }

    /// SIGTERM, then up to [`TERMINATE_GRACE`] for an orderly exit, then SIGKILL. Returns the exit
    /// status (None only if even SIGKILL could not be waited for). Idempotent.
    pub fn terminate(&mut self) -> Option<ExitStatus> {
        if let Some(status) = self.try_wait() {
            return Some(status);
        }
        self.signal(libc::SIGTERM);
        if let Some(status) = self.wait_exit(TERMINATE_GRACE) {
            self.join_readers(Duration::from_secs(2));
            return Some(status);
        }
        eprintln!("[gateway {}] did not exit within {TERMINATE_GRACE:?} of SIGTERM; killing it", self.pid);
        self.kill_hard()
    }

    /// SIGKILL and reap. Returns the exit status.
    pub fn kill_hard(&mut self) -> Option<ExitStatus> {
        if let Some(status) = self.try_wait() {
            return Some(status);
        }
        let _ = self.child.kill();
        self.exit_status = self.child.wait().ok();
        self.join_readers(Duration::from_secs(2));
        self.exit_status
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// The value of the series `series` (its name and labels as `/metrics` prints them) in the
/// scrape `text` ([`GatewayProcess::metrics`]), if it is there.
pub fn metric_value(text: &str, series: &str) -> Option<u64> {
    text.lines().find_map(|l| l.strip_prefix(series)).and_then(|v| v.trim().parse().ok())
}

fn parse_json_or_string(body: String) -> Value {
    serde_json::from_str(&body).unwrap_or(Value::String(body))
}

// ---------------------------------------------------------------------------------------------
// Modules built by the tests
// ---------------------------------------------------------------------------------------------

/// Serializes the harness's nested cargo builds within this process (the machine is small).
static BUILD_LOCK: Mutex<()> = Mutex::new(());

/// An exclusive advisory lock on a file, held until dropped (serializes builds across test
/// processes that share a target folder and copy its outputs).
struct FileLock(std::fs::File);

impl FileLock {
    fn acquire(path: &Path) -> FileLock {
        use std::os::fd::AsRawFd as _;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .unwrap_or_else(|e| panic!("opening lock {}: {e}", path.display()));
        // SAFETY: flock on a file descriptor we own.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(rc, 0, "flock {}", path.display());
        FileLock(file)
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd as _;
        // SAFETY: as above.
        unsafe {
            libc::flock(self.0.as_raw_fd(), libc::LOCK_UN);
        }
    }
}

/// The cargo to use for nested builds: the one running the tests, else `cargo` on PATH.
fn cargo_command() -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    // Variables cargo sets for the test process that must not leak into a nested build.
    for var in ["CARGO_TARGET_DIR", "CARGO_BUILD_TARGET_DIR", "RUSTC_WORKSPACE_WRAPPER", "CARGO_PRIMARY_PACKAGE"] {
        cmd.env_remove(var);
    }
    cmd
}

/// Runs a nested `cargo build`, panicking with its output on failure; returns how long it took.
fn run_cargo_build(mut cmd: Command, what: &str) -> Duration {
    let started = Instant::now();
    eprintln!("[harness] building {what}: {cmd:?}");
    let output = run_with_timeout(
        {
            cmd.env("CARGO_TERM_COLOR", "never");
            cmd
        },
        BUILD_TIMEOUT,
    );
    let elapsed = started.elapsed();
    if !output.status.success() {
        panic!("building {what} failed after {elapsed:?}\n{}", describe_output(&output));
    }
    eprintln!("[harness] built {what} in {:.1} s", elapsed.as_secs_f64());
    elapsed
}

/// Writes `contents` to `path` unless it already holds exactly that (keeps mtimes, so cargo does
/// not rebuild what did not change).
fn write_if_changed(path: &Path, contents: &[u8]) {
    if std::fs::read(path).ok().as_deref() == Some(contents) {
        return;
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, contents).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

/// Copies the files under `from` into `to` (only changed ones) and deletes files in `to` that
/// are not in `from`, skipping paths (relative, either side) for which `skip` is true.
fn sync_dir(from: &Path, to: &Path, skip: &dyn Fn(&Path) -> bool) {
    fn files(root: &Path, dir: &Path, skip: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            if skip(&rel) {
                continue;
            }
            if path.is_dir() {
                files(root, &path, skip, out);
            } else {
                out.push(rel);
            }
        }
    }
    let mut wanted = Vec::new();
    files(from, from, skip, &mut wanted);
    for rel in &wanted {
        write_if_changed(&to.join(rel), &std::fs::read(from.join(rel)).unwrap());
    }
    if to.exists() {
        let mut present = Vec::new();
        files(to, to, skip, &mut present);
        for rel in present.iter().filter(|p| !wanted.contains(p)) {
            let _ = std::fs::remove_file(to.join(rel));
        }
    }
}

/// The text of `[name]` in a TOML document (without the header line), if present. Only plain
/// `[section]` headers are recognised, which is all the repository's manifests use.
fn toml_section(text: &str, name: &str) -> Option<String> {
    let mut out: Option<String> = None;
    let mut inside = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') && !trimmed.starts_with("[[") && trimmed.ends_with(']') && !trimmed.contains('=') {
            inside = trimmed[1..trimmed.len() - 1].trim() == name;
            if inside {
                out.get_or_insert_with(String::new);
            }
            continue;
        }
        if inside {
            let s = out.as_mut().unwrap();
            s.push_str(line);
            s.push('\n');
        }
    }
    out
}

/// The headers of every `[section]` in a TOML document, in order.
fn toml_section_names(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|t| t.starts_with('[') && !t.starts_with("[[") && t.ends_with(']') && !t.contains('='))
        .map(|t| t[1..t.len() - 1].trim().to_string())
        .collect()
}

/// Rewrites `path = "rel"` entries of a TOML fragment to absolute paths under `base`.
fn absolutize_paths(fragment: &str, base: &Path) -> String {
    let mut out = String::new();
    let mut rest = fragment;
    while let Some(pos) = rest.find("path = \"") {
        let start = pos + "path = \"".len();
        out.push_str(&rest[..start]);
        let end = rest[start..].find('"').expect("unterminated path string") + start;
        let rel = &rest[start..end];
        let abs = if Path::new(rel).is_absolute() { PathBuf::from(rel) } else { base.join(rel) };
        out.push_str(&abs.display().to_string().replace('\\', "/"));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// A second build of the `mcpapp-plugin` crate, made by the tests without touching the workspace
/// or `target/release` (issue 2, "swap without rebuilding the host").
#[derive(Debug, Clone)]
pub struct VariantModule {
    /// The built library, e.g. `target/variant/e2e-variant/libmcpapp_plugin_variant.so`.
    pub path: PathBuf,
    /// The `[package] version` it was built with (what module-info reports).
    pub version: String,
    /// How long the build took in this process (near zero when cargo found it up to date).
    pub build_time: Duration,
}

/// What to build in [`build_variant_module`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VariantSpec {
    /// `[package] version` of the copy.
    pub version: String,
    /// `[lib] name` of the copy, which fixes the library's file name (`lib<name>.so`).
    pub lib_name: String,
    /// Cargo features to enable (e.g. `fault-injection`).
    pub features: Vec<String>,
    /// The cargo profile to build with. The default, [`VARIANT_PROFILE`], is unoptimized without
    /// debug info: a clean build of the module's dependency tree then takes a few minutes instead
    /// of ten on a small machine, and the boundary does not care how either side was optimized.
    /// `"release"` builds exactly like the workspace does.
    pub profile: String,
}

/// The fast profile [`build_variant_module`] defines in its generated workspace.
pub const VARIANT_PROFILE: &str = "e2e-variant";

impl Default for VariantSpec {
    /// Version `0.1.1-variant`, library `mcpapp_plugin_variant`, with `fault-injection`.
    fn default() -> Self {
        VariantSpec {
            version: "0.1.1-variant".into(),
            lib_name: "mcpapp_plugin_variant".into(),
            features: vec!["fault-injection".into()],
            profile: VARIANT_PROFILE.into(),
        }
    }
}

/// [`build_variant_module_with`] the default [`VariantSpec`]: `0.1.1-variant`,
/// `libmcpapp_plugin_variant.so`, with `fault-injection`. Built at most once per test process.
pub fn build_variant_module() -> VariantModule {
    build_variant_module_with(&VariantSpec::default())
}

/// Builds a copy of `mcpapp-plugin/` with another version and library name, as its own
/// workspace under `target/variant-src/<lib_name>/`: the crate's `Cargo.toml` (version and
/// `[lib] name` rewritten) and its other files, beside a workspace manifest that carries the root
/// `Cargo.toml`'s `[workspace.package]`, `[workspace.dependencies]` (paths made absolute) and
/// `[profile.*]`, and the root `Cargo.lock` (same dependency versions as the real build).
/// `CARGO_TARGET_DIR` is `target/variant`, separate from `target/release`, so the host and the
/// workspace's module are never rebuilt or overwritten (and the outer `cargo test`'s lock on
/// the main target folder is never waited for). The copy is refreshed on every call, so edits of
/// `mcpapp-plugin` reach the variant; after the first build only the crate itself recompiles.
/// Measured on 2 busy cores: the first build ≈ 4–5 min with the default fast profile (≈ 10 min
/// with `release`); later ones seconds. Cached per spec for the life of the process.
pub fn build_variant_module_with(spec: &VariantSpec) -> VariantModule {
    static CACHE: OnceLock<Mutex<HashMap<VariantSpec, VariantModule>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(found) = cache.lock().unwrap().get(spec) {
        return found.clone();
    }
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(found) = cache.lock().unwrap().get(spec) {
        return found.clone();
    }

    let root = repo_root();
    let target = target_dir();
    let _file_lock = FileLock::acquire(&target.join("variant").join(".harness-build.lock"));
    let ws = target.join("variant-src").join(&spec.lib_name);
    let member = ws.join("mcpapp-plugin-variant");

    // Workspace manifest from the root one.
    let root_manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("reading the root Cargo.toml");
    let mut ws_manifest = String::from(
        "# Generated by tests/src/lib.rs (build_variant_module): a standalone copy of the workspace's\n\
         # shared settings, so that a second build of mcpapp-plugin needs nothing from the real workspace.\n\
         [workspace]\nresolver = \"2\"\nmembers = [\"mcpapp-plugin-variant\"]\n\n",
    );
    for name in toml_section_names(&root_manifest) {
        if name == "workspace.package" || name == "workspace.dependencies" || name.starts_with("profile.") {
            let body = toml_section(&root_manifest, &name).unwrap();
            let body = if name == "workspace.dependencies" { absolutize_paths(&body, &root) } else { body };
            ws_manifest.push_str(&format!("[{name}]\n{body}\n"));
        }
    }
    ws_manifest.push_str(&format!(
        "[profile.{VARIANT_PROFILE}]\ninherits = \"dev\"\ndebug = false\nincremental = false\n"
    ));
    write_if_changed(&ws.join("Cargo.toml"), ws_manifest.as_bytes());

    // The member: the real crate with version and library name rewritten.
    let plugin_manifest =
        std::fs::read_to_string(root.join("mcpapp-plugin/Cargo.toml")).expect("reading mcpapp-plugin/Cargo.toml");
    let mut section = String::new();
    let mut rewritten = String::new();
    let (mut saw_version, mut saw_lib_name) = (false, false);
    for line in plugin_manifest.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') && trimmed.ends_with(']') && !trimmed.contains('=') {
            section = trimmed[1..trimmed.len() - 1].trim().to_string();
        }
        let key = trimmed.split(['=', '.']).next().unwrap_or("").trim();
        if section == "package" && key == "version" {
            rewritten.push_str(&format!("version = \"{}\"\n", spec.version));
            saw_version = true;
        } else if section == "lib" && key == "name" {
            rewritten.push_str(&format!("name = \"{}\"\n", spec.lib_name));
            saw_lib_name = true;
        } else {
            rewritten.push_str(line);
            rewritten.push('\n');
        }
    }
    assert!(saw_version && saw_lib_name, "mcpapp-plugin/Cargo.toml: expected [package] version and [lib] name");
    write_if_changed(&member.join("Cargo.toml"), rewritten.as_bytes());
    // Everything else of the crate as is (src/, and build.rs or data files should it gain any).
    sync_dir(&root.join("mcpapp-plugin"), &member, &|rel: &Path| {
        rel == Path::new("Cargo.toml") || rel.starts_with("target") || rel == Path::new("Cargo.lock")
    });
    // Same dependency versions as the real build (cargo prunes what this workspace does not use).
    write_if_changed(&ws.join("Cargo.lock"), &std::fs::read(root.join("Cargo.lock")).expect("reading Cargo.lock"));

    let variant_target = target.join("variant");
    let mut cmd = cargo_command();
    cmd.current_dir(&ws).env("CARGO_TARGET_DIR", &variant_target).args(["build", "--profile", &spec.profile]);
    if !spec.features.is_empty() {
        cmd.arg("--features").arg(spec.features.join(","));
    }
    let build_time = run_cargo_build(cmd, &format!("the variant module {} {}", spec.lib_name, spec.version));
    let profile_dir = match spec.profile.as_str() {
        "dev" | "test" => "debug",
        "bench" => "release",
        other => other,
    };
    let path = variant_target.join(profile_dir).join(dylib_file_name(&spec.lib_name));
    assert!(path.exists(), "the variant build did not produce {}", path.display());
    let built = VariantModule { path, version: spec.version.clone(), build_time };
    cache.lock().unwrap().insert(spec.clone(), built.clone());
    built
}

/// The alterations of the interface that `tests/fixtures/altered-abi` can be built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AbiAlteration {
    /// The interface declares the next major (N+1.0.0): abi_stable's version check refuses the module.
    Version,
    /// `ToolDescriptor` gains a field: abi_stable's layout check refuses the module.
    Layout,
    /// `ABI_VERSION` is 99 with the layout unchanged: the gateway's semantic check refuses it.
    Abi,
    /// No alteration (a control: the fixture loads).
    None,
}

impl AbiAlteration {
    /// The `ALTERED_ABI_MODE` value.
    pub fn mode(self) -> &'static str {
        match self {
            AbiAlteration::Version => "version",
            AbiAlteration::Layout => "layout",
            AbiAlteration::Abi => "abi",
            AbiAlteration::None => "none",
        }
    }
}

/// Builds `tests/fixtures/altered-abi` (a minimal module against an altered copy of the real
/// `host-abi/src/lib.rs`) with `alteration`, into the shared `target/fixtures` folder, and copies
/// the library to `target/fixtures/libaltered_abi_<mode>.so` (each alteration its own file).
/// The first build takes about a minute (abi_stable); each further alteration a few seconds.
/// Cached per alteration for the life of the process.
pub fn build_altered_abi_module(alteration: AbiAlteration) -> PathBuf {
    static CACHE: OnceLock<Mutex<HashMap<AbiAlteration, PathBuf>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(found) = cache.lock().unwrap().get(&alteration) {
        return found.clone();
    }
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(found) = cache.lock().unwrap().get(&alteration) {
        return found.clone();
    }
    let root = repo_root();
    let fixture = root.join("tests/fixtures/altered-abi");
    let fixtures_target = target_dir().join("fixtures");
    let _file_lock = FileLock::acquire(&fixtures_target.join(".harness-build.lock"));
    // Seed the fixture's lock file from the workspace's, so the same dependency versions are used
    // and nothing needs resolving online (cargo prunes the rest; the file is git-ignored).
    let lock = fixture.join("Cargo.lock");
    if !lock.exists() {
        std::fs::copy(root.join("Cargo.lock"), &lock).expect("seeding the fixture's Cargo.lock");
    }
    let mut cmd = cargo_command();
    cmd.current_dir(&fixture)
        .env("CARGO_TARGET_DIR", &fixtures_target)
        .env("ALTERED_ABI_MODE", alteration.mode())
        .env("HOST_ABI_SRC", root.join("host-abi/src/lib.rs"))
        .args(["build", "--release"]);
    run_cargo_build(cmd, &format!("the altered-abi fixture ({})", alteration.mode()));
    let built = fixtures_target.join("release").join(dylib_file_name("altered_abi_module"));
    let dest = fixtures_target.join(dylib_file_name(&format!("altered_abi_{}", alteration.mode())));
    // Never overwrite a library in place (a process may have it mapped): write beside, rename.
    let tmp = dest.with_extension("so.tmp");
    std::fs::copy(&built, &tmp).unwrap_or_else(|e| panic!("copying {}: {e}", built.display()));
    std::fs::rename(&tmp, &dest).unwrap();
    cache.lock().unwrap().insert(alteration, dest.clone());
    dest
}
