//! test-app: a small MCP App for the gateway's end-to-end tests. It can misbehave on request
//! (crash, hang, start slowly, never become ready, offer schemaless tools, many tools, big UI
//! resources, and the faults of `faults.rs`: exit at once, crash on a chosen request, garbage on
//! stdout, huge results, stderr floods, cut response streams, a move to another port, a grandchild
//! that ignores SIGTERM), all chosen by command-line flags so that test manifests can pick a behaviour
//! through their `arguments`.
//!
//! Transports: stdio (default) or Streamable HTTP at `/mcp` (`--http ADDR`). Logs only go to
//! stderr; stdout is the MCP channel in stdio mode.

mod escapes;
mod faults;
mod relay;
mod tasks;

use axum::serve::ListenerExt as _;
use std::future::IntoFuture;
use std::io::Read;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use parking_lot::Mutex;
use rmcp::model::*;
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer, SubscriptionContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

const UI_URI: &str = "ui://test-app/app.html";
const UI_MIME: &str = "text/html;profile=mcp-app";
const README_URI: &str = "test://readme";
const ITEM_TEMPLATE: &str = "test://items/{id}";
const ITEM_PREFIX: &str = "test://items/";
/// Read (not listed; any URI it starts): what the read's request carried, as `client_info` tells
/// of a call.
const REQUEST_URI: &str = "test://request";

/// What a request carried: the session's revision, capabilities and client, the request's id and,
/// over HTTP, its headers.
fn what_the_request_carried(context: &RequestContext<RoleServer>) -> Value {
    let headers: JsonObject = context
        .extensions
        .get::<http::request::Parts>()
        .map(|parts| {
            parts
                .headers
                .iter()
                .map(|(k, v)| (k.as_str().to_string(), Value::String(v.to_str().unwrap_or("").to_string())))
                .collect()
        })
        .unwrap_or_default();
    json!({
        "protocolVersion": context.protocol_version().map(|v| v.as_str().to_string()),
        "capabilities": context.client_capabilities(),
        "clientInfo": context.client_info(),
        "headers": headers,
        "requestId": context.id,
    })
}

#[derive(Parser, Debug, Clone)]
#[command(name = "test-app", version, about = "MCP test app for the gateway's end-to-end tests")]
struct Cli {
    /// Serve Streamable HTTP at /mcp on this address (e.g. 127.0.0.1:8080) instead of stdio.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// serverInfo name, also used in tool texts.
    #[arg(long, default_value = "test-app")]
    name: String,
    /// Sleep this long before serving (for HTTP: before binding).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    startup_delay_ms: u64,
    /// Never become ready: stdio reads stdin but never answers; HTTP never binds.
    #[arg(long)]
    never_ready: bool,
    /// Exit with code 3 after this many milliseconds, whatever the process is doing.
    #[arg(long, value_name = "MS")]
    exit_after_ms: Option<u64>,
    /// Write this process's PID to this file at start.
    #[arg(long, value_name = "PATH")]
    pid_file: Option<PathBuf>,
    /// Print this line to stderr at start (repeatable).
    #[arg(long, value_name = "TEXT")]
    stderr_line: Vec<String>,
    /// Add N trivial tools extra_0..extra_{N-1}.
    #[arg(long, value_name = "N", default_value_t = 0)]
    tools_count: usize,
    /// Add one more trivial tool with exactly this name (repeatable).
    #[arg(long, value_name = "NAME")]
    extra_tool: Vec<String>,
    /// Add the tools no_schema (inputSchema {}) and string_schema (inputSchema {"type":"string"}).
    #[arg(long)]
    schemaless: bool,
    /// Add the tool schema_2020, whose input and output schemas use JSON Schema 2020-12 (`$schema`,
    /// `$defs`, `$ref`, `prefixItems`, `unevaluatedProperties`, …), to see them passed on intact.
    #[arg(long)]
    schema_2020: bool,
    /// Add the tool regional, which answers as client_info does and whose `region` argument is
    /// mirrored into an `Mcp-Param-Region` header (`x-mcp-header`, SEP-2243) by 2026-07-28 clients.
    #[arg(long)]
    header_tool: bool,
    /// Size of the UI HTML resource in KiB (padded with a deterministic HTML comment).
    #[arg(long, value_name = "N", default_value_t = 2)]
    ui_size_kb: usize,
    /// Serve this file as the UI resource instead (e.g. a probe page of a browser test).
    #[arg(long, value_name = "PATH")]
    ui_file: Option<std::path::PathBuf>,
    /// The UI resource's `_meta.ui` (JSON object: `csp`, `permissions`, `prefersBorder`…).
    #[arg(long, value_name = "JSON")]
    ui_meta: Option<String>,
    /// tools/list page size: when there are more tools than this, tools/list is paginated
    /// (nextCursor). 0 turns pagination off.
    #[arg(long, value_name = "N", default_value_t = 10)]
    page_size: usize,
    /// resources/list page size: when there are more resources than this, resources/list is
    /// paginated (nextCursor). 0 (the default) turns pagination off.
    #[arg(long, value_name = "N", default_value_t = 0)]
    resources_page_size: usize,
    /// Add the tool `log_later`, which answers at once and then, unasked, sends the session a
    /// `notifications/message` (`level`, `text`) tied to no request (initialize-era sessions).
    #[arg(long)]
    log_tool: bool,
    /// Serve the MCP Tasks extension: `cancellable` and `elicit` run as tasks for clients that
    /// declare it (see tasks.rs).
    #[arg(long)]
    tasks: bool,
    /// stdio: the tool TOOL declares `execution.taskSupport` MODE (`forbidden`, `optional`,
    /// `required`), as `TOOL=MODE` (repeatable). rmcp's `Tool` has no `execution`, so it is added
    /// to the `tools/list` answers as they go out (tasks.rs).
    #[arg(long, value_name = "TOOL=MODE")]
    task_support: Vec<String>,
    /// An environment variable the `env` tool reports (repeatable).
    #[arg(long, value_name = "VAR")]
    env_echo: Vec<String>,
    /// Make this list answer with an error: prompts, resources or templates (repeatable).
    #[arg(long, value_name = "LIST")]
    fail_list: Vec<String>,
    /// Advertise `resources.subscribe` and add the tool `touch_resource`, which sends
    /// `notifications/resources/updated` for a URI to the listen streams that asked for it
    /// (2026-07-28) and to the initialize-era sessions that subscribed to it.
    #[arg(long)]
    resource_updates: bool,
    /// Add the tool `end_listens`, which ends every open `subscriptions/listen` stream (as a
    /// server going away does: with the final result), while the sessions live on.
    #[arg(long)]
    end_listens_tool: bool,
    /// Start a sleeping grandchild process (`sleep 3600`, in this process's group) and write its
    /// PID to this file.
    #[arg(long, value_name = "PATH")]
    grandchild_pid_file: Option<PathBuf>,
    /// Start a grandchild that ignores SIGTERM (`sleep 3600`, in this process's group) and write
    /// its PID to this file.
    #[arg(long, value_name = "PATH")]
    stubborn_grandchild_pid_file: Option<PathBuf>,
    /// Exit with code 5 the instant the process starts (after writing --pid-file).
    #[arg(long)]
    exit_immediately: bool,
    /// stdio: exit with code 6 when a request (or notification) for this method arrives, before
    /// answering it (e.g. `initialize`, `tools/list`, `tools/call`).
    #[arg(long, value_name = "METHOD")]
    crash_on: Option<String>,
    /// stdio: stop reading stdin when a request (or notification) for this method arrives (it is
    /// not answered), and stay: an app that no longer takes what the gateway writes to it.
    #[arg(long, value_name = "METHOD")]
    stop_reading_on: Option<String>,
    /// stdio: write a garbage line (text, broken JSON, stray responses, non-UTF-8 bytes, a 1 MiB
    /// line) before every MCP frame on stdout.
    #[arg(long)]
    garbage_stdout: bool,
    /// Ignore SIGTERM, and (stdio) stay after the end of stdin: only SIGKILL ends the process.
    #[arg(long)]
    ignore_sigterm: bool,
    /// Add the tools big, flood_stderr, drop_stream and move_port (faults.rs).
    #[arg(long)]
    fault_tools: bool,
    /// Add the tool escape, which tries to break out of the gateway's confinement (escapes.rs).
    #[arg(long)]
    escape_tool: bool,
    /// HTTP: write the port listened on to this file (again after every move_port).
    #[arg(long, value_name = "PATH")]
    port_file: Option<PathBuf>,
}

/// State shared by every session of the process.
struct Shared {
    cli: Cli,
    ui_html: String,
    /// Tools added at run time by `add_tool`.
    dynamic: Mutex<Vec<String>>,
    /// Tool-list changes, for `subscriptions/listen` streams (2026-07-28 sessions).
    tool_changes: broadcast::Sender<()>,
    /// Peers of initialize-era sessions, which get `notifications/tools/list_changed` directly.
    legacy_peers: Mutex<Vec<Peer<RoleServer>>>,
    /// `--resource-updates`: URIs touched, for `subscriptions/listen` streams.
    resource_updates: broadcast::Sender<String>,
    /// `--resource-updates`: initialize-era sessions' `resources/subscribe`s (peer, URI).
    legacy_subscriptions: Mutex<Vec<(Peer<RoleServer>, String)>>,
    /// `--end-listens-tool`: ends every listen stream.
    end_listens: broadcast::Sender<()>,
    /// Cancelled when stdin reaches EOF (stdio) or on SIGTERM: long tool calls end at once so
    /// that shutdown does not wait for them.
    closing: CancellationToken,
    /// Tasks of `--tasks` mode.
    tasks: rmcp::task_manager::TaskManager,
    /// `move_port` over HTTP: the port to listen on next.
    move_port: Mutex<Option<tokio::sync::mpsc::UnboundedSender<u16>>>,
}

/// Stdin that cancels a token when it reaches end of file.
struct EofStdin {
    inner: tokio::io::Stdin,
    eof: CancellationToken,
}

impl tokio::io::AsyncRead for EofStdin {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if let std::task::Poll::Ready(result) = &poll {
            if result.is_err() || buf.filled().len() == before {
                self.eof.cancel();
            }
        }
        poll
    }
}

#[derive(Clone)]
struct TestApp {
    shared: Arc<Shared>,
}

/// The UI page, exactly `size_kb` KiB (unless the page itself is larger): deterministic bytes.
fn ui_html(size_kb: usize) -> String {
    let head = "<!doctype html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n<title>test-app</title>\n</head>\n\
<body>\n<h1>test-app UI</h1>\n<pre id=\"out\">waiting for tool result</pre>\n<script>\n\
window.addEventListener(\"message\", (event) => {\n  const msg = event.data;\n  \
if (msg && msg.method === \"ui/notifications/tool-result\") {\n    \
document.getElementById(\"out\").textContent = JSON.stringify(msg.params);\n  }\n});\n</script>\n";
    let tail = "</body>\n</html>\n";
    let target = size_kb * 1024;
    let mut html = String::from(head);
    let open = "<!-- padding: ";
    let close = " -->\n";
    let bare = head.len() + tail.len();
    if target >= bare + open.len() + close.len() {
        let n = target - bare - open.len() - close.len();
        const PATTERN: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
        html.push_str(open);
        html.extend((0..n).map(|i| PATTERN[i % PATTERN.len()] as char));
        html.push_str(close);
    }
    html.push_str(tail);
    html
}

fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("schemas are objects"),
    }
}

/// `--schema-2020`: the input and output schemas of the tool schema_2020.
fn schema_2020() -> (Value, Value) {
    let input = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:test-app:schema_2020",
        "type": "object",
        "$defs": { "point": { "type": "array", "prefixItems": [{ "type": "number" }, { "type": "number" }], "items": false } },
        "properties": {
            "at": { "$ref": "#/$defs/point" },
            "label": { "type": ["string", "null"], "minLength": 1 },
            "tags": { "type": "array", "items": { "type": "string" }, "uniqueItems": true }
        },
        "required": ["at"],
        "dependentRequired": { "label": ["tags"] },
        "unevaluatedProperties": false
    });
    let output = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": { "ok": { "const": true } },
        "unevaluatedProperties": false
    });
    (input, output)
}

fn no_args() -> Arc<JsonObject> {
    schema(json!({"type": "object", "properties": {}}))
}

fn meta(value: Value) -> MetaObject {
    match value {
        Value::Object(map) => MetaObject(map),
        _ => unreachable!("meta is an object"),
    }
}

fn text_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text.into())])
}

fn structured_result(text: impl Into<String>, value: Value) -> CallToolResult {
    let mut result = text_result(text);
    result.structured_content = Some(value);
    result
}

fn tool_error(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text.into())])
}

impl TestApp {
    fn name(&self) -> &str {
        &self.shared.cli.name
    }

    /// Every tool, in a stable order: the fixed ones, then the flag-selected ones, then the
    /// dynamic ones.
    fn tools(&self) -> Vec<Tool> {
        let name = self.name().to_string();
        let mut tools = vec![
            Tool::new(
                "echo",
                "Echo the text back.",
                schema(json!({
                    "type": "object",
                    "properties": {"text": {"type": "string", "description": "Text to echo"}},
                    "required": ["text"]
                })),
            )
            .with_raw_output_schema(schema(json!({
                "type": "object",
                "properties": {"text": {"type": "string"}, "length": {"type": "integer"}},
                "required": ["text", "length"]
            }))),
            Tool::new("echo_meta", "Return the request's _meta as JSON.", no_args()),
            Tool::new(
                "client_info",
                "Report what the connected client declared (protocol version, capabilities, client info), the request's id and, over HTTP, its headers.",
                no_args(),
            ),
            Tool::new(
                "fail",
                "Return a tool error (isError) with the message.",
                schema(json!({
                    "type": "object",
                    "properties": {"message": {"type": "string"}},
                    "required": ["message"]
                })),
            ),
            Tool::new("protocol_error", "Answer with a JSON-RPC error (invalid params).", no_args()),
            Tool::new("hang", "Sleep for an hour.", no_args()),
            Tool::new(
                "slow",
                "Sleep for ms milliseconds, then answer.",
                schema(json!({
                    "type": "object",
                    "properties": {"ms": {"type": "integer", "minimum": 0}},
                    "required": ["ms"]
                })),
            ),
            Tool::new("crash", "Exit the process with code 4 in the middle of the call.", no_args()),
            Tool::new("env", "Report the --env-echo variables and the current directory.", no_args()),
            Tool::new("show_ui", "Show the test UI.", no_args())
                .with_raw_output_schema(schema(json!({
                    "type": "object",
                    "properties": {"shown": {"type": "boolean"}},
                    "required": ["shown"]
                })))
                .with_meta(meta(json!({"ui": {"resourceUri": UI_URI}}))),
            Tool::new("app_only", "A tool only the app may call.", no_args())
                .with_meta(meta(json!({"ui": {"resourceUri": UI_URI, "visibility": ["app"]}}))),
            Tool::new("model_only", "A tool only the model may call.", no_args())
                .with_meta(meta(json!({"ui": {"resourceUri": UI_URI, "visibility": ["model"]}}))),
            Tool::new(
                "add_tool",
                "Add a tool with this name and notify notifications/tools/list_changed.",
                schema(json!({
                    "type": "object",
                    "properties": {"name": {"type": "string"}},
                    "required": ["name"]
                })),
            ),
        ];
        // progress, log, sample, elicit, roots, cancellable, cancellations, media (relay.rs).
        tools.extend(relay::tools());
        for i in 0..self.shared.cli.tools_count {
            tools.push(Tool::new(format!("extra_{i}"), format!("Extra tool {i} of {name}."), no_args()));
        }
        for extra in &self.shared.cli.extra_tool {
            tools.push(Tool::new(extra.clone(), format!("Extra tool {extra} of {name}."), no_args()));
        }
        if self.shared.cli.end_listens_tool {
            tools.push(Tool::new("end_listens", "End every open subscriptions/listen stream.", no_args()));
        }
        if self.shared.cli.log_tool {
            tools.push(Tool::new(
                "log_later",
                "Answer, then send a log message (level, text) to this session, tied to no request.",
                schema(json!({
                    "type": "object",
                    "properties": {"level": {"type": "string"}, "text": {"type": "string"}},
                    "required": ["level", "text"]
                })),
            ));
        }
        if self.shared.cli.resource_updates {
            tools.push(Tool::new(
                "touch_resource",
                "Send notifications/resources/updated for this URI to whoever subscribed to it.",
                schema(json!({
                    "type": "object",
                    "properties": {"uri": {"type": "string"}},
                    "required": ["uri"]
                })),
            ));
        }
        if self.shared.cli.schemaless {
            tools.push(Tool::new("no_schema", "A tool whose inputSchema is {}.", Arc::new(JsonObject::new())));
            tools.push(Tool::new(
                "string_schema",
                "A tool whose inputSchema is {\"type\":\"string\"}.",
                schema(json!({"type": "string"})),
            ));
        }
        if self.shared.cli.fault_tools {
            tools.extend(faults::tools(no_args, schema));
        }
        if self.shared.cli.escape_tool {
            let (name, description, input) = escapes::describe();
            tools.push(Tool::new(name, description, schema(input)));
        }
        if self.shared.cli.schema_2020 {
            let (input, output) = schema_2020();
            tools.push(
                Tool::new("schema_2020", "A tool whose schemas use JSON Schema 2020-12.", schema(input)).with_raw_output_schema(schema(output)),
            );
        }
        if self.shared.cli.header_tool {
            tools.push(Tool::new(
                "regional",
                "Report what client_info reports; the region travels in an Mcp-Param-Region header too.",
                schema(json!({
                    "type": "object",
                    "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
                })),
            ));
        }
        for dynamic in self.shared.dynamic.lock().iter() {
            tools.push(Tool::new(dynamic.clone(), format!("Dynamic tool {dynamic} of {name}."), no_args()));
        }
        tools
    }

    /// `--fail-list LIST`: this list answers with an internal error.
    fn fail_list(&self, list: &str) -> Result<(), McpError> {
        if self.shared.cli.fail_list.iter().any(|l| l == list) {
            return Err(McpError::internal_error(format!("{list} listing fails (--fail-list {list})"), None));
        }
        Ok(())
    }

    /// A trivial tool (extra, clash, schemaless, dynamic) exists under this name.
    fn is_trivial_tool(&self, tool: &str) -> bool {
        let cli = &self.shared.cli;
        tool.strip_prefix("extra_")
            .and_then(|n| n.parse::<usize>().ok())
            .is_some_and(|n| n < cli.tools_count && tool == format!("extra_{n}"))
            || cli.extra_tool.iter().any(|t| t == tool)
            || (cli.schemaless && (tool == "no_schema" || tool == "string_schema"))
            || (cli.schema_2020 && tool == "schema_2020")
            || self.shared.dynamic.lock().iter().any(|t| t == tool)
    }

    /// A URI `read_resource` knows (the only ones a subscription is accepted for).
    fn is_known_resource(&self, uri: &str) -> bool {
        uri == UI_URI || uri == README_URI || uri.strip_prefix(ITEM_PREFIX).is_some_and(|id| !id.is_empty() && !id.contains('/'))
    }

    /// `touch_resource`: tells the listen streams (which check their accepted filter) and the
    /// initialize-era sessions subscribed to `uri`.
    async fn touch_resource(&self, uri: String) -> CallToolResult {
        let streams = self.shared.resource_updates.send(uri.clone()).unwrap_or(0);
        let peers: Vec<Peer<RoleServer>> = {
            let mut subscriptions = self.shared.legacy_subscriptions.lock();
            subscriptions.retain(|(p, _)| !p.is_transport_closed());
            subscriptions.iter().filter(|(_, u)| *u == uri).map(|(p, _)| p.clone()).collect()
        };
        let mut sessions = 0;
        for peer in peers {
            if peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri.clone())).await.is_ok() {
                sessions += 1;
            }
        }
        structured_result(format!("touched {uri}"), json!({"uri": uri, "streams": streams, "sessions": sessions}))
    }

    async fn add_tool(&self, new: String, context: &RequestContext<RoleServer>) -> CallToolResult {
        if new.is_empty() {
            return tool_error("name must not be empty");
        }
        let exists = self.tools().iter().any(|t| t.name == new);
        if !exists {
            self.shared.dynamic.lock().push(new.clone());
        }
        let _ = self.shared.tool_changes.send(());
        let peers: Vec<Peer<RoleServer>> = {
            let mut peers = self.shared.legacy_peers.lock();
            peers.retain(|p| !p.is_transport_closed());
            peers.clone()
        };
        let mut notified = false;
        for peer in peers {
            if let Err(e) = peer.notify_tool_list_changed().await {
                eprintln!("test-app: could not send tools/list_changed: {e}");
            } else {
                notified = true;
            }
        }
        // A session that did not go through initialize (so is not registered) but is not a
        // subscriptions/listen one either still hears about it.
        if !notified && !is_modern(context) {
            let _ = context.peer.notify_tool_list_changed().await;
        }
        let verb = if exists { "already had" } else { "added" };
        structured_result(format!("{verb} tool {new}"), json!({"name": new, "added": !exists}))
    }
}

/// Two handles of the same session.
fn same_peer(a: &Peer<RoleServer>, b: &Peer<RoleServer>) -> bool {
    a.peer_info().is_some_and(|x| b.peer_info().is_some_and(|y| Arc::ptr_eq(&x, &y)))
}

fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

fn str_arg<'a>(args: &'a JsonObject, name: &str) -> Option<&'a str> {
    args.get(name).and_then(Value::as_str)
}

#[allow(deprecated)]
impl ServerHandler for TestApp {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_completions()
            .enable_prompts()
            .enable_resources()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        if self.shared.cli.resource_updates {
            if let Some(resources) = capabilities.resources.as_mut() {
                resources.subscribe = Some(true);
            }
        }
        if self.shared.cli.tasks {
            capabilities.extensions.get_or_insert_with(Default::default).insert(TASKS_EXTENSION_ID.to_string(), JsonObject::new());
        }
        ServerConfig::new(capabilities)
        .with_server_info(Implementation::new(self.name().to_string(), env!("CARGO_PKG_VERSION")))
        .with_instructions("Test app for the MCP App gateway's end-to-end tests.")
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let mut peers = self.shared.legacy_peers.lock();
        peers.retain(|p| !p.is_transport_closed());
        peers.push(context.peer);
    }

    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::builder().tools_list_changed();
        // `--resource-updates`: the URIs it knows (rmcp drops them all without the flag, since
        // resources.subscribe is not advertised then).
        let known: Vec<String> =
            requested.resource_subscriptions.iter().flatten().filter(|u| self.is_known_resource(u)).cloned().collect();
        if !known.is_empty() {
            accepted = accepted.resource_subscriptions(known);
        }
        Some(accepted.build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let mut changes = self.shared.tool_changes.subscribe();
        let mut touched = self.shared.resource_updates.subscribe();
        let mut end = self.shared.end_listens.subscribe();
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                _ = end.recv() => return Ok(()),
                uri = touched.recv() => match uri {
                    Ok(uri) => match context.sink().notify_resource_updated(uri).await {
                        Ok(()) | Err(rmcp::service::SubscriptionSendError::NotificationNotAccepted(_)) => {}
                        Err(_) => return Ok(()),
                    },
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                },
                change = changes.recv() => match change {
                    Ok(()) | Err(broadcast::error::RecvError::Lagged(_)) => {
                        let notification = ServerNotification::ToolListChangedNotification(ToolListChangedNotification {
                            method: Default::default(),
                            extensions: Default::default(),
                        });
                        if context.sink().send(notification).await.is_err() {
                            return Ok(());
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                },
            }
        }
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = self.tools();
        let page_size = self.shared.cli.page_size;
        if page_size == 0 || tools.len() <= page_size {
            return Ok(ListToolsResult::with_all_items(tools));
        }
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .ok()
                .filter(|&n| n < tools.len())
                .ok_or_else(|| McpError::invalid_params(format!("invalid cursor {cursor:?}"), None))?,
        };
        let end = (start + page_size).min(tools.len());
        let total = tools.len();
        let mut result = ListToolsResult::with_all_items(tools.into_iter().skip(start).take(end - start).collect());
        if end < total {
            result.next_cursor = Some(end.to_string());
        }
        Ok(result)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if self.shared.cli.tasks && context.client_capabilities().is_some_and(|c| c.supports_tasks()) {
            if let Some(response) = tasks::call(&self.shared.tasks, &request, &context) {
                return Ok(response);
            }
        }
        if let Some(response) = relay::call(&request, &context, &self.shared.closing).await {
            return response;
        }
        let args = request.arguments.clone().unwrap_or_default();
        let tool = request.name.as_ref();
        let result = match tool {
            "echo" => match str_arg(&args, "text") {
                Some(text) => {
                    let mut r = structured_result(
                        format!("echo: {text}"),
                        json!({"text": text, "length": text.chars().count()}),
                    );
                    r.is_error = Some(false);
                    r
                }
                None => tool_error("echo: missing string argument `text`"),
            },
            "echo_meta" => {
                let mut object = request.meta.as_ref().map(|m| m.0 .0.clone()).unwrap_or_default();
                for (k, v) in context.meta.0 .0.iter() {
                    object.insert(k.clone(), v.clone());
                }
                let value = Value::Object(object);
                structured_result(value.to_string(), value)
            }
            "client_info" | "regional" => {
                let value = what_the_request_carried(&context);
                structured_result(value.to_string(), value)
            }
            "fail" => tool_error(str_arg(&args, "message").unwrap_or("fail requested").to_string()),
            "protocol_error" => return Err(McpError::invalid_params("protocol_error requested", None)),
            "hang" => {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(3600)) => text_result("hung for an hour"),
                    _ = context.ct.cancelled() => tool_error("hang cancelled"),
                    _ = self.shared.closing.cancelled() => tool_error("hang interrupted: shutting down"),
                }
            }
            "slow" => match args.get("ms").and_then(Value::as_u64) {
                Some(ms) => {
                    // Tests wait for this line (the gateway logs an app's stderr) to know the call is under way.
                    eprintln!("test-app: slow {ms} ms started");
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(ms)) => text_result(format!("slept {ms}")),
                        _ = context.ct.cancelled() => tool_error("slow cancelled"),
                        _ = self.shared.closing.cancelled() => tool_error("slow interrupted: shutting down"),
                    }
                }
                None => tool_error("slow: missing non-negative integer argument `ms`"),
            },
            "crash" => {
                eprintln!("test-app: crash requested, exiting with code 4");
                std::process::exit(4);
            }
            "env" => {
                let mut object = JsonObject::new();
                for var in &self.shared.cli.env_echo {
                    let value = std::env::var(var).map(Value::String).unwrap_or(Value::Null);
                    object.insert(var.clone(), value);
                }
                let cwd = std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_default();
                object.insert("cwd".into(), Value::String(cwd));
                let value = Value::Object(object);
                structured_result(value.to_string(), value)
            }
            "big" if self.shared.cli.fault_tools => {
                let mb = args.get("mb").and_then(Value::as_u64).unwrap_or(0).min(512) as usize;
                eprintln!("test-app: big: answering with {mb} MiB");
                text_result(faults::big_text(mb))
            }
            "flood_stderr" if self.shared.cli.fault_tools => {
                let mb = args.get("mb").and_then(Value::as_u64).unwrap_or(1) as usize;
                let newlines = args.get("newlines").and_then(Value::as_bool).unwrap_or(true);
                faults::flood_stderr(mb, newlines);
                text_result(format!("flooding stderr with {mb} MiB"))
            }
            "drop_stream" if self.shared.cli.fault_tools => tool_error("drop_stream cuts HTTP response streams only"),
            "move_port" if self.shared.cli.fault_tools => {
                let port = args.get("port").and_then(Value::as_u64).unwrap_or(0).min(65535) as u16;
                match self.shared.move_port.lock().as_ref().map(|tx| tx.send(port)) {
                    Some(Ok(())) => text_result(format!("moving to port {port}")),
                    _ => tool_error("move_port works over HTTP only"),
                }
            }
            "escape" if self.shared.cli.escape_tool => {
                let args = args.clone();
                let report = tokio::task::spawn_blocking(move || escapes::run(&args)).await.unwrap_or_else(|e| json!({"panic": e.to_string()}));
                structured_result(report.to_string(), report)
            }
            "show_ui" => structured_result("ui shown", json!({"shown": true})),
            "app_only" => text_result("app only"),
            "model_only" => text_result("model only"),
            "end_listens" if self.shared.cli.end_listens_tool => {
                let ended = self.shared.end_listens.send(()).unwrap_or(0);
                structured_result(format!("ended {ended} listen streams"), json!({"ended": ended}))
            }
            "log_later" if self.shared.cli.log_tool => {
                let level = serde_json::from_value::<LoggingLevel>(json!(str_arg(&args, "level").unwrap_or("info")));
                let Ok(level) = level else { return Ok(tool_error("log_later: `level` is no MCP log level").into()) };
                let text = str_arg(&args, "text").unwrap_or_default().to_string();
                let peer = context.peer.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
                    let message = LoggingMessageNotificationParam::new(level, json!(text)).with_logger("test-app");
                    if let Err(e) = peer.notify_logging_message(message).await {
                        eprintln!("test-app: log_later: {e}");
                    }
                });
                text_result("logging later")
            }
            "touch_resource" if self.shared.cli.resource_updates => match str_arg(&args, "uri") {
                Some(uri) => self.touch_resource(uri.to_string()).await,
                None => tool_error("touch_resource: missing string argument `uri`"),
            },
            "add_tool" => match str_arg(&args, "name") {
                Some(new) => self.add_tool(new.to_string(), &context).await,
                None => tool_error("add_tool: missing string argument `name`"),
            },
            other if self.is_trivial_tool(other) => text_result(format!("{other} called on {}", self.name())),
            other => return Err(McpError::invalid_params(format!("Unknown tool `{other}`"), None)),
        };
        Ok(result.into())
    }

    /// Initialize-era `resources/subscribe` (`--resource-updates` only).
    async fn subscribe(&self, request: SubscribeRequestParams, context: RequestContext<RoleServer>) -> Result<(), McpError> {
        if !self.shared.cli.resource_updates {
            return Err(McpError::method_not_found::<SubscribeRequestMethod>());
        }
        if !self.is_known_resource(&request.uri) {
            return Err(McpError::resource_not_found(format!("unknown resource {}", request.uri), None));
        }
        self.shared.legacy_subscriptions.lock().push((context.peer, request.uri));
        Ok(())
    }

    async fn unsubscribe(&self, request: UnsubscribeRequestParams, context: RequestContext<RoleServer>) -> Result<(), McpError> {
        if !self.shared.cli.resource_updates {
            return Err(McpError::method_not_found::<UnsubscribeRequestMethod>());
        }
        let session = context.peer;
        self.shared.legacy_subscriptions.lock().retain(|(p, u)| !(u == &request.uri && same_peer(p, &session)));
        Ok(())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        self.fail_list("resources")?;
        let resources = vec![
            Resource::new(UI_URI, "app")
                .with_title("test-app UI")
                .with_description("The test app's UI (MCP App).")
                .with_mime_type(UI_MIME),
            Resource::new(README_URI, "readme")
                .with_description("A plain-text readme.")
                .with_mime_type("text/plain"),
        ];
        let page_size = self.shared.cli.resources_page_size;
        if page_size == 0 || resources.len() <= page_size {
            return Ok(ListResourcesResult::with_all_items(resources));
        }
        let start = match _request.and_then(|r| r.cursor) {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .ok()
                .filter(|&n| n < resources.len())
                .ok_or_else(|| McpError::invalid_params(format!("invalid cursor {cursor:?}"), None))?,
        };
        let total = resources.len();
        let end = (start + page_size).min(total);
        let mut result = ListResourcesResult::with_all_items(resources.into_iter().skip(start).take(end - start).collect());
        if end < total {
            result.next_cursor = Some(end.to_string());
        }
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        self.fail_list("templates")?;
        Ok(ListResourceTemplatesResult::with_all_items(vec![ResourceTemplate::new(ITEM_TEMPLATE, "item")
            .with_description("An item by id.")
            .with_mime_type("text/plain")]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let uri = request.uri.as_str();
        let contents = if uri.starts_with(REQUEST_URI) {
            ResourceContents::text(what_the_request_carried(&context).to_string(), uri).with_mime_type("application/json")
        } else if uri == UI_URI {
            let contents = ResourceContents::text(self.shared.ui_html.clone(), uri).with_mime_type(UI_MIME);
            match self.shared.cli.ui_meta.as_deref().map(serde_json::from_str::<Value>) {
                Some(Ok(ui)) => contents.with_meta(meta(json!({ "ui": ui }))),
                Some(Err(e)) => return Err(McpError::internal_error(format!("--ui-meta is not JSON: {e}"), None)),
                None => contents,
            }
        } else if uri == README_URI {
            ResourceContents::text(format!("{} is a test app for the MCP App gateway.\n", self.name()), uri)
                .with_mime_type("text/plain")
        } else if let Some(id) = uri.strip_prefix(ITEM_PREFIX).filter(|id| !id.is_empty() && !id.contains('/')) {
            ResourceContents::text(format!("item {id}"), uri).with_mime_type("text/plain")
        } else {
            return Err(McpError::resource_not_found(format!("unknown resource {uri}"), None));
        };
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        self.fail_list("prompts")?;
        Ok(ListPromptsResult::with_all_items(vec![
            Prompt::new(
                "greet",
                Some("Greet someone."),
                Some(vec![PromptArgument::new("name").with_description("Who to greet").with_required(true)]),
            ),
            Prompt::new(
                "summarize",
                Some("Summarize a topic."),
                Some(vec![PromptArgument::new("topic").with_description("What to summarize").with_required(true)]),
            ),
        ]))
    }

    async fn get_prompt(&self, request: GetPromptRequestParams, _context: RequestContext<RoleServer>) -> Result<GetPromptResponse, McpError> {
        let arg = |name: &str| -> Result<String, McpError> {
            request
                .arguments
                .as_ref()
                .and_then(|a| a.get(name))
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| McpError::invalid_params(format!("Missing required argument `{name}`"), None))
        };
        let (text, description) = match request.name.as_str() {
            "greet" => {
                let name = arg("name")?;
                (format!("Say hello to {name}."), format!("Greeting for {name}"))
            }
            "summarize" => {
                let topic = arg("topic")?;
                (format!("Summarize {topic} in three sentences."), format!("Summary of {topic}"))
            }
            other => return Err(McpError::invalid_params(format!("Unknown prompt `{other}`"), None)),
        };
        Ok(GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
            .with_description(description)
            .into())
    }

    async fn complete(&self, request: CompleteRequestParams, _context: RequestContext<RoleServer>) -> Result<CompleteResult, McpError> {
        let typed = request.argument.value.as_str();
        let candidates: &[&str] = match (&request.r#ref, request.argument.name.as_str()) {
            (Reference::Prompt(p), "name") if p.name == "greet" => &["alice", "bob", "carol"],
            (Reference::Prompt(p), "topic") if p.name == "summarize" => &["mcp", "rust", "testing"],
            (Reference::Resource(r), "id") if r.uri == ITEM_TEMPLATE => &["1", "2", "3", "42"],
            _ => &[],
        };
        let values: Vec<String> = candidates.iter().filter(|c| c.starts_with(typed)).map(|c| c.to_string()).collect();
        Ok(CompleteResult::new(CompletionInfo::new(values).map_err(|e| McpError::internal_error(e, None))?))
    }

    async fn get_task(&self, request: GetTaskParams, _context: RequestContext<RoleServer>) -> Result<GetTaskResult, McpError> {
        Ok(GetTaskResult::new(self.shared.tasks.get_task(&request.task_id)?))
    }

    async fn update_task(&self, request: UpdateTaskParams, _context: RequestContext<RoleServer>) -> Result<(), McpError> {
        self.shared.tasks.update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(&self, request: CancelTaskParams, _context: RequestContext<RoleServer>) -> Result<(), McpError> {
        self.shared.tasks.cancel_task(&request.task_id)
    }

    async fn set_level(&self, _request: SetLevelRequestParams, _context: RequestContext<RoleServer>) -> Result<(), McpError> {
        Ok(())
    }
}

async fn wait_for_signal(ignore_sigterm: bool) {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        if ignore_sigterm {
            // Keep the handler installed (the default action would end the process), never act.
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            loop {
                tokio::select! {
                    _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {
                        eprintln!("test-app: --ignore-sigterm: ignoring SIGTERM");
                    }
                    _ = tokio::signal::ctrl_c() => return,
                }
            }
        }
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {},
                    _ = term.recv() => {},
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    if let Some(ms) = cli.exit_after_ms {
        // A plain thread: fires even if the runtime is busy or blocked.
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            eprintln!("test-app: --exit-after-ms {ms} elapsed, exiting with code 3");
            std::process::exit(3);
        });
    }
    if let Some(path) = &cli.pid_file {
        if let Err(e) = std::fs::write(path, std::process::id().to_string()) {
            eprintln!("test-app: cannot write pid file {}: {e}", path.display());
        }
    }
    if cli.exit_immediately {
        eprintln!("test-app: --exit-immediately: exiting with code 5");
        std::process::exit(5);
    }
    if cli.ignore_sigterm {
        // Installed at once, so a SIGTERM from the first moment on is ignored.
        tokio::spawn(wait_for_signal(true));
    }
    if let Some(path) = &cli.stubborn_grandchild_pid_file {
        faults::start_stubborn_grandchild(path);
    }
    if let Some(path) = &cli.grandchild_pid_file {
        // Detached from our stdio, so it holds none of the MCP pipes; same process group.
        match std::process::Command::new("sleep")
            .arg("3600")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
        {
            Ok(child) => {
                if let Err(e) = std::fs::write(path, child.id().to_string()) {
                    eprintln!("test-app: cannot write grandchild pid file {}: {e}", path.display());
                }
            }
            Err(e) => eprintln!("test-app: cannot start the grandchild: {e}"),
        }
    }
    for line in &cli.stderr_line {
        eprintln!("{line}");
    }
    let code = match run(cli).await {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("test-app: {e}");
            1
        }
    };
    // Do not wait for in-flight tool calls (hang) or blocking stdin reads.
    std::process::exit(code);
}

async fn run(cli: Cli) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    if cli.startup_delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(cli.startup_delay_ms)).await;
    }
    let http = cli.http;
    if cli.never_ready {
        match http {
            None => {
                eprintln!("test-app: --never-ready: reading stdin, never answering");
                // Read and discard until EOF; then go away (the client is gone).
                tokio::task::spawn_blocking(|| {
                    let mut buf = [0u8; 8192];
                    let mut stdin = std::io::stdin().lock();
                    while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
                })
                .await?;
                return Ok(());
            }
            Some(addr) => {
                eprintln!("test-app: --never-ready: not binding {addr}");
                loop {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
            }
        }
    }
    let (tool_changes, _) = broadcast::channel(16);
    let (resource_updates, _) = broadcast::channel(16);
    let shared = Arc::new(Shared {
        ui_html: match &cli.ui_file {
            Some(path) => std::fs::read_to_string(path).map_err(|e| format!("--ui-file {}: {e}", path.display()))?,
            None => ui_html(cli.ui_size_kb),
        },
        cli,
        dynamic: Mutex::new(Vec::new()),
        tool_changes,
        legacy_peers: Mutex::new(Vec::new()),
        resource_updates,
        legacy_subscriptions: Mutex::new(Vec::new()),
        end_listens: broadcast::channel(4).0,
        closing: CancellationToken::new(),
        tasks: rmcp::task_manager::TaskManager::new(),
        move_port: Mutex::new(None),
    });

    let Some(addr) = http else {
        eprintln!("test-app: {} serving MCP on stdio", shared.cli.name);
        let stdin = EofStdin {
            inner: tokio::io::stdin(),
            eof: shared.closing.clone(),
        };
        let input: Box<dyn tokio::io::AsyncRead + Send + Unpin> = match (shared.cli.crash_on.clone(), shared.cli.stop_reading_on.clone()) {
            (Some(method), _) => faults::on_method(stdin, method, faults::OnMethod::Crash),
            (None, Some(method)) => faults::on_method(stdin, method, faults::OnMethod::StopReading),
            (None, None) => Box::new(stdin),
        };
        let output: Box<dyn tokio::io::AsyncWrite + Send + Unpin> = match shared.cli.garbage_stdout {
            true => faults::garbage_stdout(),
            false => Box::new(tokio::io::stdout()),
        };
        let output = match shared.cli.task_support.is_empty() {
            true => output,
            false => tasks::declaring_task_support(output, &shared.cli.task_support)?,
        };
        let running = match (TestApp { shared: shared.clone() }).serve((input, output)).await {
            Ok(running) => running,
            // stdin closed before the handshake: the client went away, nothing to report.
            Err(_) if shared.closing.is_cancelled() => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let ignore_sigterm = shared.cli.ignore_sigterm;
        tokio::select! {
            r = running.waiting() => { r?; }
            _ = wait_for_signal(ignore_sigterm) => { shared.closing.cancel(); }
        }
        if ignore_sigterm {
            eprintln!("test-app: --ignore-sigterm: the session ended; staying until SIGKILL");
            std::future::pending::<()>().await;
        }
        return Ok(());
    };

    let (move_tx, mut move_rx) = tokio::sync::mpsc::unbounded_channel::<u16>();
    *shared.move_port.lock() = Some(move_tx);
    let mut bind_addr = addr;
    let ignore_sigterm = shared.cli.ignore_sigterm;
    loop {
        let shutdown = CancellationToken::new();
        let listener = tokio::net::TcpListener::bind(bind_addr).await?;
        let addr = listener.local_addr()?;
        if let Some(path) = &shared.cli.port_file {
            std::fs::write(path, addr.port().to_string()).map_err(|e| format!("--port-file {}: {e}", path.display()))?;
        }
        let mut allowed_hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
        if !addr.ip().is_unspecified() {
            allowed_hosts.push(addr.ip().to_string());
        }
        let service = StreamableHttpService::new(
            {
                let shared = shared.clone();
                move || Ok(TestApp { shared: shared.clone() })
            },
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default()
                .with_allowed_hosts(allowed_hosts)
                .with_cancellation_token(shutdown.child_token()),
        );
        let mut app = axum::Router::new().nest_service("/mcp", service);
        if shared.cli.fault_tools {
            app = app.layer(axum::middleware::from_fn(faults::drop_stream_layer));
        }
        eprintln!("test-app listening on http://{addr}/mcp");
        let stop = CancellationToken::new();
        let serve = axum::serve(listener.tap_io(|tcp| {
                // Small SSE and JSON responses must not wait for delayed ACKs (Nagle).
                let _ = tcp.set_nodelay(true);
            }), app).with_graceful_shutdown({
            let stop = stop.clone();
            async move { stop.cancelled().await }
        });
        let mut serving = tokio::spawn(serve.into_future());
        let moved = tokio::select! {
            r = &mut serving => { r??; return Ok(()); }
            port = move_rx.recv() => port,
            _ = wait_for_signal(ignore_sigterm) => None,
        };
        match moved {
            Some(port) => {
                // Let the move_port answer reach its caller first.
                tokio::time::sleep(Duration::from_millis(200)).await;
                eprintln!("test-app: move_port: leaving {addr} for port {port}");
                bind_addr = SocketAddr::new(addr.ip(), port);
            }
            None => {
                eprintln!("test-app: shutting down");
                shared.closing.cancel();
            }
        }
        shutdown.cancel();
        stop.cancel();
        // Open streams or hanging calls must not keep the process (or the old port) for long.
        if tokio::time::timeout(Duration::from_secs(2), &mut serving).await.is_err() {
            serving.abort();
            let _ = serving.await;
        }
        if moved.is_none() {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ui_html_has_the_requested_size() {
        assert_eq!(ui_html(2).len(), 2048);
        assert_eq!(ui_html(100).len(), 100 * 1024);
        assert_eq!(ui_html(2), ui_html(2));
        assert!(ui_html(0).ends_with("</html>\n"));
    }
}
