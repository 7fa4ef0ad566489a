//! Tools that exercise everything MCP lets a server do during a request (SPEC R42, issue 9): progress
//! and log notifications, sampling / elicitation / roots requests to the client, cancellation, and
//! every kind of content block. The gateway's tests call them directly and through the gateway and
//! expect the same outcome.
//!
//! Server-to-client requests: on an initialize-era session (2025-11-25 and older) they are sent on
//! the request (`sampling/createMessage`, `elicitation/create`, `roots/list`); on 2026-07-28 and later,
//! which forbid that, the tool answers with an `InputRequiredResult` (multi round-trip) and finishes
//! when the client retries with its `inputResponses`.
//!
//! Every failure to reach the client is a tool error (isError) whose text starts with the tool's name
//! and a colon (`sample: `, `elicit: `, `roots: `) and says what went wrong — except that a
//! 2026-07-28 request whose client did not declare the capability is refused as that revision
//! specifies: JSON-RPC error -32021 (Missing Required Client Capability) with
//! `data.requiredCapabilities`, as rmcp and the official SDKs' servers do.

// Sampling, roots and logging are deprecated by SEP-2577 but are what these tools exist to test.
#![allow(deprecated)]

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rmcp::model::*;
use rmcp::service::{RequestContext, RoleServer};
use rmcp::ErrorData as McpError;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::{is_modern, no_args, schema, structured_result, text_result, tool_error, README_URI};

/// A 2×2 RGBA PNG (red, green / blue, white): 75 bytes.
pub const PNG_BASE64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAYAAABytg0kAAAAEklEQVR42mP4z8DwHwyBNBgAAEnICfcD2WTxAAAAAElFTkSuQmCC";
/// A WAV file: 8 kHz, mono, 8-bit PCM, 16 samples of one sine period: 60 bytes.
pub const WAV_BASE64: &str = "UklGRjQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YRAAAACAsNr1//XasIBQJgsBCyZQ";
/// 39 arbitrary bytes (0, 7, 14, … 252, then 0x00 0xff).
pub const BLOB_BASE64: &str = "AAcOFRwjKjE4P0ZNVFtiaXB3foWMk5qhqK+2vcTL0tng5+71/AD/";
pub const MEDIA_TEXT_URI: &str = "test://media/note.txt";
pub const MEDIA_BLOB_URI: &str = "test://media/blob.bin";

/// How long a tool waits for the client's answer to a server-to-client request by default.
const DEFAULT_CLIENT_TIMEOUT_MS: u64 = 30_000;

/// Cancellations observed by this process (every session): count and the last one.
static CANCELLATIONS: Mutex<(u64, Option<Value>)> = Mutex::new((0, None));
/// `cancellable` calls this process started (every session), so a test can tell a call that was
/// cancelled while it ran from one that never reached the app.
static CANCELLABLE_STARTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Records that a tool call was cancelled by its client (context.ct fired).
pub fn record_cancellation(tool: &str, context: &RequestContext<RoleServer>, started: Instant) {
    let at_ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
    let entry = json!({
        "tool": tool,
        "requestId": context.id.to_string(),
        "afterMs": started.elapsed().as_millis() as u64,
        "atUnixMs": at_ms,
    });
    eprintln!("test-app: {tool} cancelled by the client after {} ms", started.elapsed().as_millis());
    let mut log = CANCELLATIONS.lock().unwrap_or_else(|e| e.into_inner());
    log.0 += 1;
    log.1 = Some(entry);
}

fn cancellations() -> Value {
    let log = CANCELLATIONS.lock().unwrap_or_else(|e| e.into_inner());
    let started = CANCELLABLE_STARTED.load(std::sync::atomic::Ordering::SeqCst);
    json!({"count": log.0, "last": log.1.clone().unwrap_or(Value::Null), "started": started})
}

const LEVELS: [&str; 8] = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

fn level_rank(level: &str) -> Option<usize> {
    LEVELS.iter().position(|l| *l == level)
}

/// The relay tools, in a stable order.
pub fn tools() -> Vec<Tool> {
    let timeout = json!({"type": "integer", "minimum": 1, "maximum": 600000, "description": "How long to wait for the client's answer (default 30000)"});
    vec![
        Tool::new(
            "progress",
            "Send notifications/progress for each step (when the request carries a progressToken), then answer.",
            schema(json!({
                "type": "object",
                "properties": {
                    "steps": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "Number of progress notifications"},
                    "delayMs": {"type": "integer", "minimum": 0, "maximum": 60000, "description": "Pause after each notification"}
                },
                "required": ["steps"]
            })),
        ),
        Tool::new(
            "log",
            "Send notifications/message (logging) count times, then answer.",
            schema(json!({
                "type": "object",
                "properties": {
                    "level": {"type": "string", "enum": LEVELS},
                    "message": {"type": "string"},
                    "count": {"type": "integer", "minimum": 1, "maximum": 100},
                    "settleMs": {"type": "integer", "minimum": 0, "maximum": 10000, "description": "Pause between the last message and the result (default 100)"}
                },
                "required": ["level", "message"]
            })),
        ),
        Tool::new(
            "sample",
            "Ask the client to sample (sampling/createMessage) and return its answer and model.",
            schema(json!({
                "type": "object",
                "properties": {
                    "prompt": {"type": "string"},
                    "maxTokens": {"type": "integer", "minimum": 1},
                    "timeoutMs": timeout
                },
                "required": ["prompt"]
            })),
        )
        .with_raw_output_schema(schema(json!({
            "type": "object",
            "properties": {"text": {"type": "string"}, "model": {"type": "string"}, "stopReason": {"type": ["string", "null"]}},
            "required": ["text", "model"]
        }))),
        Tool::new(
            "elicit",
            "Ask the user through the client (elicitation/create, form mode: name with a default, color from an enum, a number) and return the answer.",
            schema(json!({
                "type": "object",
                "properties": {"message": {"type": "string"}, "timeoutMs": timeout}
            })),
        ),
        Tool::new(
            "roots",
            "Ask the client for its roots (roots/list) and return them.",
            schema(json!({
                "type": "object",
                "properties": {"timeoutMs": timeout}
            })),
        ),
        Tool::new(
            "cancellable",
            "Wait ms milliseconds; a client cancel ends it early and is recorded (see cancellations).",
            schema(json!({
                "type": "object",
                "properties": {"ms": {"type": "integer", "minimum": 0}},
                "required": ["ms"]
            })),
        ),
        Tool::new(
            "cancellations",
            "How many tool calls of this process were cancelled by their client, the last one, and how many cancellable calls started.",
            no_args(),
        )
        .with_title("Observed cancellations")
        .with_raw_output_schema(schema(json!({
            "type": "object",
            "properties": {
                "count": {"type": "integer", "minimum": 0},
                "last": {"type": ["object", "null"]},
                "started": {"type": "integer", "minimum": 0}
            },
            "required": ["count", "last"]
        }))),
        Tool::new(
            "media",
            "Return one of each content block: text, image (PNG), audio (WAV), embedded text and blob resources, a resource link.",
            no_args(),
        )
        .with_title("Media sampler")
        .with_annotations(
            ToolAnnotations::with_title("Media sampler (annotation title)")
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        )
        .with_icons(vec![serde_json::from_value(json!({
            "src": format!("data:image/png;base64,{PNG_BASE64}"),
            "mimeType": "image/png",
            "sizes": ["2x2"]
        }))
        .expect("icon literal")])
        .with_raw_output_schema(schema(json!({
            "type": "object",
            "properties": {
                "blocks": {"type": "integer"},
                "types": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["blocks", "types"]
        }))),
    ]
}

/// The `media` result: deterministic bytes, one block of each kind, result `_meta`.
pub fn media_result() -> CallToolResult {
    let blocks = json!([
        {"type": "text", "text": "media: one block of each kind"},
        {"type": "image", "data": PNG_BASE64, "mimeType": "image/png",
         "annotations": {"audience": ["user"], "priority": 0.5}},
        {"type": "audio", "data": WAV_BASE64, "mimeType": "audio/wav"},
        {"type": "resource", "resource": {"uri": MEDIA_TEXT_URI, "mimeType": "text/plain", "text": "A note embedded in a tool result.\nSecond line: ünïcødé ✓\n"},
         "_meta": {"test-app/block": "embedded-text"}},
        {"type": "resource", "resource": {"uri": MEDIA_BLOB_URI, "mimeType": "application/octet-stream", "blob": BLOB_BASE64}},
        {"type": "resource_link", "uri": README_URI, "name": "readme", "title": "The readme", "description": "A plain-text readme.", "mimeType": "text/plain"}
    ]);
    let content: Vec<ContentBlock> = serde_json::from_value(blocks).expect("content literal");
    let types = ["text", "image", "audio", "resource", "resource", "resource_link"];
    let mut result = CallToolResult::success(content);
    result.structured_content = Some(json!({"blocks": types.len(), "types": types}));
    result.meta = Some(crate::meta(json!({"test-app/media": {"version": 1}})));
    result
}

/// The form `elicit` asks for: a string with a default, an enum choice, a number.
pub fn elicit_schema() -> ElicitationSchema {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name", "description": "Who is answering", "default": "Ada"},
            "color": {"type": "string", "title": "Favourite colour", "enum": ["red", "green", "blue"], "default": "red"},
            "count": {"type": "number", "title": "How many", "minimum": 0, "maximum": 100, "default": 3}
        },
        "required": ["color"]
    });
    serde_json::from_value(schema).expect("elicitation schema literal")
}

fn u64_arg(args: &JsonObject, name: &str) -> Option<u64> {
    args.get(name).and_then(Value::as_u64)
}

/// Handles a relay tool; `None` when `request.name` is not one.
pub async fn call(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
    closing: &CancellationToken,
) -> Option<Result<CallToolResponse, McpError>> {
    let args = request.arguments.clone().unwrap_or_default();
    let response: CallToolResponse = match request.name.as_ref() {
        "progress" => progress(&args, request, context, closing).await.into(),
        "log" => log(&args, request, context).await.into(),
        "sample" => return Some(sample(&args, request, context, closing).await),
        "elicit" => return Some(elicit(&args, request, context, closing).await),
        "roots" => return Some(roots(&args, request, context, closing).await),
        "cancellable" => match u64_arg(&args, "ms") {
            Some(ms) => {
                CANCELLABLE_STARTED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let started = Instant::now();
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(ms)) => text_result(format!("cancellable finished after {ms} ms")),
                    _ = context.ct.cancelled() => {
                        record_cancellation("cancellable", context, started);
                        tool_error(format!("cancellable: cancelled by the client after {} ms", started.elapsed().as_millis()))
                    }
                    _ = closing.cancelled() => tool_error("cancellable: interrupted, shutting down"),
                }
                .into()
            }
            None => tool_error("cancellable: missing non-negative integer argument `ms`").into(),
        },
        "cancellations" => {
            let value = cancellations();
            structured_result(value.to_string(), value).into()
        }
        "media" => media_result().into(),
        _ => return None,
    };
    Some(Ok(response))
}

fn progress_token(request: &CallToolRequestParams, context: &RequestContext<RoleServer>) -> Option<ProgressToken> {
    context
        .meta
        .get_progress_token()
        .or_else(|| request.meta.as_ref().and_then(|m| m.get_progress_token()))
}

async fn progress(
    args: &JsonObject,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
    closing: &CancellationToken,
) -> CallToolResult {
    let Some(steps) = u64_arg(args, "steps").filter(|s| *s >= 1) else {
        return tool_error("progress: missing integer argument `steps` (1 or more)");
    };
    let delay = Duration::from_millis(u64_arg(args, "delayMs").unwrap_or(0));
    let token = progress_token(request, context);
    let started = Instant::now();
    let mut sent = 0u64;
    for step in 1..=steps {
        if let Some(token) = &token {
            let param = ProgressNotificationParam::new(token.clone(), step as f64)
                .with_total(steps as f64)
                .with_message(format!("step {step} of {steps}"));
            match context.peer.notify_progress(param).await {
                Ok(()) => sent += 1,
                Err(e) => eprintln!("test-app: progress notification failed: {e}"),
            }
        }
        if !delay.is_zero() {
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = context.ct.cancelled() => {
                    record_cancellation("progress", context, started);
                    return tool_error(format!("progress: cancelled by the client at step {step} of {steps}"));
                }
                _ = closing.cancelled() => return tool_error("progress: interrupted, shutting down"),
            }
        }
    }
    structured_result(
        format!("progress done: {steps} steps"),
        json!({"steps": steps, "notified": sent, "progressToken": token.is_some()}),
    )
}

async fn log(args: &JsonObject, request: &CallToolRequestParams, context: &RequestContext<RoleServer>) -> CallToolResult {
    let level_name = args.get("level").and_then(Value::as_str).unwrap_or("");
    let Some(rank) = level_rank(level_name) else {
        return tool_error(format!("log: `level` must be one of {}", LEVELS.join(", ")));
    };
    let Some(message) = args.get("message").and_then(Value::as_str) else {
        return tool_error("log: missing string argument `message`");
    };
    let count = u64_arg(args, "count").unwrap_or(1).clamp(1, 100);
    let level: LoggingLevel = serde_json::from_value(json!(level_name)).expect("known level");
    // 2026-07-28: logging is opt-in per request (`io.modelcontextprotocol/logLevel` in `_meta`).
    if is_modern(context) {
        let opt_in = context.meta.log_level().or_else(|| request.meta.as_ref().and_then(|m| m.log_level()));
        let threshold = opt_in.as_ref().and_then(|l| serde_json::to_value(l).ok()).and_then(|v| v.as_str().and_then(level_rank));
        match threshold {
            None => {
                return structured_result(
                    "log: sent 0 messages (the request did not opt in with io.modelcontextprotocol/logLevel)",
                    json!({"sent": 0, "level": level_name}),
                )
            }
            Some(min) if rank < min => {
                return structured_result(
                    format!("log: sent 0 messages ({level_name} is below the requested log level)"),
                    json!({"sent": 0, "level": level_name}),
                )
            }
            Some(_) => {}
        }
    }
    let mut sent = 0;
    for i in 1..=count {
        let data = if count == 1 { json!(message) } else { json!(format!("{message} [{i}/{count}]")) };
        let param = LoggingMessageNotificationParam::new(level, data).with_logger("test-app");
        match context.peer.notify_logging_message(param).await {
            Ok(()) => sent += 1,
            Err(e) => eprintln!("test-app: logging notification failed: {e}"),
        }
    }
    // Over stateful Streamable HTTP, rmcp sends notifications/message on the session's standalone
    // GET stream (only progress follows the request's own stream), so nothing orders them before
    // the result on the POST stream. A short pause lets them reach the client (or the gateway) first,
    // as they would from a real app that logs and then works on.
    let settle = Duration::from_millis(u64_arg(args, "settleMs").unwrap_or(100));
    if sent > 0 && !settle.is_zero() {
        tokio::time::sleep(settle).await;
    }
    structured_result(
        format!("log: sent {sent} message(s) at level {level_name}"),
        json!({"sent": sent, "level": level_name}),
    )
}

/// Waits for `fut` unless the call is cancelled, the process shuts down or `timeout` passes.
async fn await_client<T, E: std::fmt::Display>(
    tool: &str,
    what: &str,
    fut: impl std::future::Future<Output = Result<T, E>>,
    timeout: Duration,
    context: &RequestContext<RoleServer>,
    closing: &CancellationToken,
) -> Result<T, CallToolResult> {
    let started = Instant::now();
    tokio::select! {
        r = tokio::time::timeout(timeout, fut) => match r {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(tool_error(format!("{tool}: the {what} request failed: {e}"))),
            Err(_) => Err(tool_error(format!("{tool}: the client did not answer the {what} request within {} ms", timeout.as_millis()))),
        },
        _ = context.ct.cancelled() => {
            record_cancellation(tool, context, started);
            Err(tool_error(format!("{tool}: cancelled by the client")))
        }
        _ = closing.cancelled() => Err(tool_error(format!("{tool}: interrupted, shutting down"))),
    }
}

/// A client that did not declare `required` (a ClientCapabilities object): on 2026-07-28 the
/// revision's -32021 refusal, on initialize-era sessions the tool's own clear error.
fn not_capable(context: &RequestContext<RoleServer>, required: Value, tool_error_text: &str) -> Result<CallToolResponse, McpError> {
    if is_modern(context) {
        let required: ClientCapabilities = serde_json::from_value(required).unwrap_or_default();
        return Err(McpError::missing_required_client_capability(required));
    }
    Ok(tool_error(tool_error_text).into())
}

fn client_timeout(args: &JsonObject) -> Duration {
    Duration::from_millis(u64_arg(args, "timeoutMs").unwrap_or(DEFAULT_CLIENT_TIMEOUT_MS))
}

/// The client's answer to input request `key`, when the call is an MRTR retry that carries it.
fn input_response<'a>(request: &'a CallToolRequestParams, key: &str) -> Option<&'a Value> {
    request.input_responses.as_ref().and_then(|r| r.get(key))
}

fn input_required(key: &str, input: InputRequest) -> CallToolResponse {
    let mut requests = InputRequests::new();
    requests.insert(key.to_string(), input);
    InputRequiredResult::new(Some(requests), Some(format!("test-app:{key}"))).into()
}

/// The text of a sampling answer (`content` is one block or an array of blocks).
fn sampled_text(result: &Value) -> String {
    let blocks = match result.get("content") {
        Some(Value::Array(items)) => items.clone(),
        Some(other) => vec![other.clone()],
        None => vec![],
    };
    blocks
        .iter()
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("")
}

fn sample_done(answer: &Value) -> CallToolResult {
    let text = sampled_text(answer);
    let model = answer.get("model").and_then(Value::as_str).unwrap_or("").to_string();
    let stop = answer.get("stopReason").cloned().unwrap_or(Value::Null);
    structured_result(
        format!("sample: the client answered {text:?} (model {model})"),
        json!({"text": text, "model": model, "stopReason": stop}),
    )
}

async fn sample(
    args: &JsonObject,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
    closing: &CancellationToken,
) -> Result<CallToolResponse, McpError> {
    let Some(prompt) = args.get("prompt").and_then(Value::as_str) else {
        return Ok(tool_error("sample: missing string argument `prompt`").into());
    };
    if let Some(answer) = input_response(request, "sample") {
        return Ok(sample_done(answer).into());
    }
    let capable = context.client_capabilities().is_some_and(|c| c.sampling.is_some());
    if !capable {
        return not_capable(context, json!({"sampling": {}}), "sample: the client cannot sample: it did not declare the sampling capability");
    }
    let max_tokens = u64_arg(args, "maxTokens").unwrap_or(100).min(u32::MAX as u64) as u32;
    let params = CreateMessageRequestParams::new(vec![SamplingMessage::user_text(prompt)], max_tokens);
    if is_modern(context) {
        return Ok(input_required("sample", InputRequest::CreateMessage(CreateMessageRequest::new(params))));
    }
    Ok(match await_client("sample", "sampling", context.peer.create_message(params), client_timeout(args), context, closing).await {
        Ok(answer) => sample_done(&serde_json::to_value(&answer).unwrap_or(Value::Null)).into(),
        Err(result) => result.into(),
    })
}

fn elicit_done(answer: &Value) -> CallToolResult {
    let action = answer.get("action").and_then(Value::as_str).unwrap_or("").to_string();
    let content = answer.get("content").cloned().unwrap_or(Value::Null);
    structured_result(
        format!("elicit: action={action} content={content}"),
        json!({"action": action, "content": content}),
    )
}

fn can_elicit_forms(capabilities: Option<ClientCapabilities>) -> bool {
    capabilities
        .and_then(|c| c.elicitation)
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

async fn elicit(
    args: &JsonObject,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
    closing: &CancellationToken,
) -> Result<CallToolResponse, McpError> {
    if let Some(answer) = input_response(request, "elicit") {
        return Ok(elicit_done(answer).into());
    }
    if !can_elicit_forms(context.client_capabilities()) {
        return not_capable(
            context,
            json!({"elicitation": {"form": {}}}),
            "elicit: the client cannot elicit: it did not declare the elicitation capability (form mode)",
        );
    }
    let message = args
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("Tell the test app about yourself.")
        .to_string();
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: elicit_schema(),
    };
    if is_modern(context) {
        return Ok(input_required("elicit", InputRequest::Elicitation(ElicitRequest::new(params))));
    }
    Ok(match await_client("elicit", "elicitation", context.peer.create_elicitation(params), client_timeout(args), context, closing).await {
        Ok(answer) => elicit_done(&serde_json::to_value(&answer).unwrap_or(Value::Null)).into(),
        Err(result) => result.into(),
    })
}

fn roots_done(answer: &Value) -> CallToolResult {
    let roots = answer.get("roots").cloned().unwrap_or_else(|| json!([]));
    let uris: Vec<&str> = roots
        .as_array()
        .map(|r| r.iter().filter_map(|r| r.get("uri").and_then(Value::as_str)).collect())
        .unwrap_or_default();
    structured_result(
        format!("roots: {} root(s): {}", uris.len(), uris.join(", ")),
        json!({"roots": roots}),
    )
}

async fn roots(
    args: &JsonObject,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
    closing: &CancellationToken,
) -> Result<CallToolResponse, McpError> {
    if let Some(answer) = input_response(request, "roots") {
        return Ok(roots_done(answer).into());
    }
    let capable = context.client_capabilities().is_some_and(|c| c.roots.is_some());
    if !capable {
        return not_capable(context, json!({"roots": {}}), "roots: the client cannot list roots: it did not declare the roots capability");
    }
    if is_modern(context) {
        return Ok(input_required("roots", InputRequest::ListRoots(ListRootsRequest::default())));
    }
    Ok(match await_client("roots", "roots/list", context.peer.list_roots(), client_timeout(args), context, closing).await {
        Ok(answer) => roots_done(&serde_json::to_value(&answer).unwrap_or(Value::Null)).into(),
        Err(result) => result.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_elicitation_form_keeps_its_defaults_and_choices() {
        let value = serde_json::to_value(elicit_schema()).unwrap();
        assert_eq!(value["properties"]["name"]["default"], "Ada", "{value}");
        assert_eq!(value["properties"]["color"]["enum"], json!(["red", "green", "blue"]), "{value}");
        assert_eq!(value["properties"]["color"]["default"], "red", "{value}");
        assert_eq!(value["properties"]["count"]["default"], 3.0, "{value}");
        assert_eq!(value["required"], json!(["color"]), "{value}");
    }

    #[test]
    fn media_is_deterministic_and_complete() {
        let value = serde_json::to_value(media_result()).unwrap();
        let types: Vec<&str> = value["content"].as_array().unwrap().iter().map(|b| b["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["text", "image", "audio", "resource", "resource", "resource_link"]);
        assert_eq!(value["content"][1]["data"], PNG_BASE64);
        assert_eq!(value["content"][4]["resource"]["blob"], BLOB_BASE64);
        assert_eq!(value["structuredContent"]["blocks"], 6);
        assert_eq!(value["_meta"]["test-app/media"]["version"], 1);
        assert_eq!(serde_json::to_value(media_result()).unwrap(), value);
    }

    #[test]
    fn relay_tools_have_object_schemas() {
        for tool in tools() {
            assert_eq!(tool.input_schema.get("type"), Some(&json!("object")), "{}", tool.name);
        }
    }
}
