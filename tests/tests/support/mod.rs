//! In-process driver for the module: the same `host-abi` objects the gateway gets from the
//! library, created through the module crate's `Instance`, with real app processes behind it.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::RStr;
use host_abi::{
    AppDescriptor, HostSink, HostSink_TO, LogLevel, LogRecord, ModuleConfig, ModuleEvent, ModuleInstanceBox,
    ToolDescriptor,
};
use serde_json::{json, Value};
use std::sync::Mutex;

/// What the module reported through its sink.
#[derive(Default)]
pub struct Recorded {
    pub events: Mutex<Vec<(String, String, Value)>>,
    pub logs: Mutex<Vec<String>>,
}

#[derive(Clone)]
struct Sink(Arc<Recorded>);

impl HostSink for Sink {
    fn log_enabled(&self, level: LogLevel, _target: RStr<'_>) -> bool {
        level <= LogLevel::Info
    }
    fn log(&self, record: LogRecord) {
        self.0.logs.lock().unwrap().push(format!("{} {}", record.target, record.message));
    }
    fn event(&self, event: ModuleEvent) {
        let payload = serde_json::from_str(event.payload_json.as_str()).unwrap_or(Value::Null);
        self.0.events.lock().unwrap().push((event.kind.to_string(), event.app_id.into_string(), payload));
    }
}

pub struct TestModule {
    pub instance: ModuleInstanceBox,
    pub recorded: Arc<Recorded>,
    pub dir: tempfile::TempDir,
    next_call: std::sync::atomic::AtomicU64,
}

pub fn test_app_bin() -> PathBuf {
    gateway_e2e::release_bin("test-app")
}

/// Writes `openclaw.mcpapp.json` for app `id` under `root/id/` and returns its folder.
pub fn write_manifest(root: &Path, folder: &str, manifest: &Value) -> PathBuf {
    let dir = root.join(folder);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("openclaw.mcpapp.json"), serde_json::to_string_pretty(manifest).unwrap()).unwrap();
    dir
}

/// The flags naming files test-app writes.
const WRITTEN_FILE_FLAGS: &[&str] = &["--pid-file", "--grandchild-pid-file", "--stubborn-grandchild-pid-file", "--port-file"];

/// The `permissions` of a test-app with these arguments: a confined app (SPEC R48) writes only
/// where its manifest says, so each file a flag names is made (empty) now and declared writable.
fn written_files_permissions<S: AsRef<str>>(args: &[S]) -> Value {
    let mut files = Vec::new();
    for pair in args.windows(2) {
        if WRITTEN_FILE_FLAGS.contains(&pair[0].as_ref()) {
            let path = Path::new(pair[1].as_ref());
            if let Some(parent) = path.parent() {
                let _ = std::fs::create_dir_all(parent);
            }
            if !path.exists() {
                std::fs::write(path, "").unwrap_or_else(|e| panic!("creating {}: {e}", path.display()));
            }
            files.push(pair[1].as_ref().to_string());
        }
    }
    json!({ "filesystem": { "write": files } })
}

/// A stdio test-app manifest with the given extra arguments.
pub fn stdio_app(id: &str, args: &[&str]) -> Value {
    json!({
        "permissions": written_files_permissions(args),
        "id": id,
        "name": format!("Test {id}"),
        "version": "1.2.3",
        "transport": "stdio",
        "command": test_app_bin(),
        "arguments": args,
        "toolNamePrefix": format!("{id}."),
        "startupTimeoutSeconds": 15,
        "requestTimeoutSeconds": 10,
    })
}

/// An http test-app manifest that the gateway launches, on a free port.
pub fn http_app(id: &str, args: &[&str]) -> Value {
    let port = gateway_e2e::free_port();
    let mut arguments = vec!["--http".to_string(), format!("127.0.0.1:{port}")];
    arguments.extend(args.iter().map(|s| s.to_string()));
    json!({
        "permissions": written_files_permissions(&arguments),
        "id": id,
        "version": "2.0.0",
        "transport": "http",
        "url": format!("http://127.0.0.1:{port}/mcp"),
        "command": test_app_bin(),
        "arguments": arguments,
        "toolNamePrefix": format!("{id}."),
        "startupTimeoutSeconds": 15,
        "requestTimeoutSeconds": 10,
    })
}

/// A tool call's answer as the gateway's model reads it: the module hands over the app's raw
/// result, and the gateway shapes it, in one place (`gateway_host::model_view`).
#[allow(dead_code)]
pub struct ModelView {
    pub is_error: bool,
    pub text: String,
    /// Structured content for the model as JSON; empty when absent or withheld (UI-linked tools).
    pub structured_content_json: String,
    pub ui_resource_uri: String,
    /// The app's complete result as JSON (for the browser); empty when the call got none.
    pub raw_result_json: String,
}

impl ModelView {
    /// The model's view of `app`'s answer for its tool linked to `ui_resource_uri`.
    pub fn of(app: &str, answer: host_abi::AppAnswer, ui_resource_uri: Option<String>) -> ModelView {
        let view = gateway_host::model_view::ToolResult::of_answer(app, answer, ui_resource_uri);
        ModelView {
            is_error: view.is_error,
            text: view.text,
            structured_content_json: view.structured.map(|s| s.to_string()).unwrap_or_default(),
            ui_resource_uri: view.ui_resource_uri.unwrap_or_default(),
            raw_result_json: view.raw.map(|r| r.to_string()).unwrap_or_default(),
        }
    }
}

impl TestModule {
    /// A module whose `McpApps` scans `<tempdir>/apps`; `extra` is merged into the config root.
    pub fn new(extra: Value) -> TestModule {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("apps")).unwrap();
        let mut config = json!({
            "McpApps": { "Enabled": true, "DiscoveryPaths": ["./apps"], "Allow": ["*"] }
        });
        merge(&mut config, extra);
        Self::with_config(dir, config)
    }

    pub fn with_config(dir: tempfile::TempDir, config: Value) -> TestModule {
        let recorded = Arc::new(Recorded::default());
        let sink = Arc::new(HostSink_TO::from_value(Sink(recorded.clone()), TD_Opaque));
        let module_config = ModuleConfig {
            config_json: config.to_string().into(),
            config_dir: dir.path().display().to_string().into(),
            data_dir: dir.path().join("data").display().to_string().into(),
            host_version: "0.1.0".into(),
            extra_json: "{}".into(),
        };
        let instance = mcpapp_plugin::export::instance::Instance::create(module_config, sink).expect("module creates").into_abi();
        TestModule { instance, recorded, dir, next_call: std::sync::atomic::AtomicU64::new(1) }
    }

    pub fn apps_dir(&self) -> PathBuf {
        self.dir.path().join("apps")
    }

    pub fn add_app(&self, id: &str, manifest: &Value) -> PathBuf {
        write_manifest(&self.apps_dir(), id, manifest)
    }

    pub fn reload(&self) -> Value {
        let report = futures::executor::block_on(self.instance.reload()).unwrap();
        serde_json::from_str(report.as_str()).unwrap()
    }

    pub fn apps(&self) -> Vec<AppDescriptor> {
        futures::executor::block_on(self.instance.list_apps()).unwrap().into_vec()
    }

    pub fn app(&self, id: &str) -> AppDescriptor {
        self.apps().into_iter().find(|a| a.id.as_str() == id).unwrap_or_else(|| panic!("no app {id}"))
    }

    pub fn state(&self, id: &str) -> String {
        self.app(id).state().to_string()
    }

    pub fn detail(&self, id: &str) -> Value {
        serde_json::from_str(self.app(id).detail_json.as_str()).unwrap()
    }

    pub fn tools(&self) -> Vec<ToolDescriptor> {
        futures::executor::block_on(self.instance.list_tools()).unwrap().into_vec()
    }

    pub fn call(&self, app: &str, tool: &str, args: &str) -> ModelView {
        futures::executor::block_on(self.call_async(app, tool, args, "{}"))
    }

    /// A tool call for a model, as the host makes it (`gateway-host/src/tools/mod.rs`): a
    /// `tools/call` forwarded as the gateway itself, its answer shaped by `model_view`.
    pub fn call_async(
        &self,
        app: &str,
        tool: &str,
        args: &str,
        meta: &str,
    ) -> impl std::future::Future<Output = ModelView> {
        let mut params = json!({ "name": tool, "arguments": serde_json::from_str::<Value>(args).unwrap() });
        if let Ok(meta @ Value::Object(_)) = serde_json::from_str::<Value>(meta) {
            params["_meta"] = meta;
        }
        let request = host_abi::AppRequest {
            call_id: self.next_call.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            app_id: app.into(),
            method: "tools/call".into(),
            params_json: params.to_string().into(),
            session_id: "".into(),
            any_provider: true,
            relay: abi_stable::std_types::RNone,
        };
        let ui_resource_uri = self
            .tools()
            .into_iter()
            .find(|t| t.app_id.as_str() == app && t.name.as_str() == tool)
            .map(|t| t.ui_resource_uri.into_string())
            .filter(|u| !u.is_empty());
        let fut = self.instance.forward(request);
        let app = app.to_string();
        async move { ModelView::of(&app, fut.await.unwrap(), ui_resource_uri) }
    }

    /// Passes a JSON-RPC request's method and params to `app`, as the host does; answers with the
    /// JSON-RPC response the host would write around the module's answer.
    pub fn forward(&self, app: &str, message: &Value, session_id: &str) -> Value {
        let request = host_abi::AppRequest {
            call_id: self.next_call.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            app_id: app.into(),
            method: message["method"].as_str().unwrap_or_default().into(),
            params_json: message.get("params").map(Value::to_string).unwrap_or_default().into(),
            session_id: session_id.into(),
            any_provider: false,
            relay: host_abi::abi_stable::std_types::RNone,
        };
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        match futures::executor::block_on(self.instance.forward(request)).unwrap() {
            host_abi::AppAnswer::Result(text) => {
                serde_json::json!({ "jsonrpc": "2.0", "id": id, "result": serde_json::from_str::<Value>(text.as_str()).unwrap_or(Value::Null) })
            }
            host_abi::AppAnswer::Error(e) => {
                let mut error = serde_json::json!({ "code": e.code, "message": e.message.as_str() });
                if !e.data_json.is_empty() {
                    error["data"] = serde_json::from_str(e.data_json.as_str()).unwrap_or(Value::Null);
                }
                serde_json::json!({ "jsonrpc": "2.0", "id": id, "error": error })
            }
        }
    }

    /// Polls until the app reaches `state` (or the timeout passes); returns whether it did.
    pub fn wait_state(&self, id: &str, state: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.apps().iter().any(|a| a.id.as_str() == id && a.state().as_str() == state) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    pub fn events_of(&self, kind: &str, app: &str) -> Vec<Value> {
        self.recorded
            .events
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, a, _)| k == kind && a == app)
            .map(|(_, _, p)| p.clone())
            .collect()
    }
}

impl Drop for TestModule {
    fn drop(&mut self) {
        let _ = futures::executor::block_on(self.instance.shutdown());
    }
}

fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(b), Value::Object(e)) => {
            for (k, v) in e {
                merge(b.entry(k).or_insert(Value::Null), v);
            }
        }
        (b, e) => *b = e,
    }
}

/// Reads a PID file written by test-app, waiting for it to appear.
pub fn read_pid(path: &Path, timeout: Duration) -> i32 {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if let Ok(pid) = text.trim().parse() {
                return pid;
            }
        }
        assert!(Instant::now() < deadline, "no pid in {}", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Live processes (zombies excluded) with `needle` on their command line: every app process of a
/// test names the test's folder (its PID file), whichever generation it is.
pub fn processes_naming(needle: &str) -> Vec<(i32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(needle) && process_alive(pid) {
            found.push((pid, cmdline));
        }
    }
    found
}

pub fn process_alive(pid: i32) -> bool {
    // A zombie (exited, not yet reaped) counts as gone.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'),
        Err(_) => false,
    }
}

/// A stateless 2026-07-28 `tools/call` request as an MCP client sends it: its headers and body.
pub fn stateless_tools_call(tool: &str, arguments: Value, client: &str) -> (Vec<(&'static str, String)>, String) {
    stateless_request("tools/call", tool, json!({ "name": tool, "arguments": arguments }), client)
}

/// A stateless 2026-07-28 request of `method` for `name` (a tool's name, a resource's URI:
/// what `Mcp-Name` carries) with `params`, the revision's envelope added to their `_meta`.
pub fn stateless_request(method: &str, name: &str, mut params: Value, client: &str) -> (Vec<(&'static str, String)>, String) {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": client, "version": "1" },
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    let headers = vec![
        ("content-type", "application/json".to_string()),
        ("accept", "application/json, text/event-stream".to_string()),
        ("mcp-protocol-version", "2026-07-28".to_string()),
        ("mcp-method", method.to_string()),
        ("mcp-name", name.to_string()),
    ];
    (headers, body.to_string())
}

/// One stateless 2026-07-28 `tools/call` on `path` (`/apps/mcp/{app}` or `/mcp`) with its own
/// client bounded by `timeout`: the JSON-RPC response and how long it took, or why there was none.
pub fn try_call(base: &str, path: &str, tool: &str, arguments: Value, timeout: Duration) -> Result<(Value, Duration), String> {
    let started = Instant::now();
    let client = reqwest::blocking::Client::builder().timeout(timeout).no_proxy().build().unwrap();
    let (headers, body) = stateless_tools_call(tool, arguments, "e2e");
    let mut request = client.post(format!("{base}{path}")).body(body);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let response = request.send().map_err(|e| format!("POST {path} {tool}: {e}"))?;
    let text = response.text().map_err(|e| format!("POST {path} {tool}: reading: {e}"))?;
    let message = serde_json::from_str::<Value>(&text).ok().or_else(|| {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|m| m["id"] == 1)
    });
    let elapsed = started.elapsed();
    message.map(|m| (m, elapsed)).ok_or_else(|| format!("POST {path} {tool}: no response in {} bytes", text.len()))
}
