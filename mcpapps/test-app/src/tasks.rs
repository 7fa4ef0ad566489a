//! `--tasks`: the test app as a server of the MCP Tasks extension (SEP-2663). For a client that
//! declares the extension, `cancellable` and `elicit` run as tasks: the call answers with a task
//! handle at once, the client polls `tasks/get`, answers the form through `tasks/update` and may
//! `tasks/cancel`. Results say "(as a task)", so a test can tell that the task path was taken
//! (the gateway drives an app's tasks on behalf of clients that know nothing of them).
//!
//! `--task-support TOOL=MODE`: what a tool declares of tasks (`execution.taskSupport`), for the
//! gateway's own tasks, which it runs for the tools that support them.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rmcp::model::*;
use rmcp::service::{RequestContext, RoleServer};
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt as _, AsyncWrite, AsyncWriteExt as _, BufReader};

use crate::relay::{elicit_schema, record_cancellation};
use crate::{structured_result, text_result};

/// Runs `tool` as a task when it is one of the task tools; `None` otherwise.
pub fn call(
    tasks: &TaskManager,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Option<CallToolResponse> {
    let args = request.arguments.clone().unwrap_or_default();
    let task = match request.name.as_ref() {
        "cancellable" => {
            let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(0);
            let context = context.clone();
            tasks.spawn(TaskOptions::new().with_poll_interval_ms(50), move |task| {
                Box::pin(async move {
                    let started = Instant::now();
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(ms)) => {
                            Ok(text_result(format!("cancellable finished after {ms} ms (as a task)")))
                        }
                        _ = task.cancelled() => {
                            record_cancellation("cancellable", &context, started);
                            Err(TaskExit::Cancelled)
                        }
                    }
                })
            })
        }
        "elicit" => {
            let message =
                args.get("message").and_then(Value::as_str).unwrap_or("Tell the test app about yourself.").to_string();
            tasks.spawn(TaskOptions::new().with_poll_interval_ms(50), move |task| {
                Box::pin(async move {
                    let params =
                        ElicitRequestParams::FormElicitationParams { meta: None, message, requested_schema: elicit_schema() };
                    let answer = task.request_input("form", InputRequest::Elicitation(ElicitRequest::new(params))).await?;
                    let action = answer.get("action").and_then(Value::as_str).unwrap_or("").to_string();
                    let content = answer.get("content").cloned().unwrap_or(Value::Null);
                    Ok(structured_result(
                        format!("elicit: action={action} content={content} (as a task)"),
                        serde_json::json!({ "action": action, "content": content }),
                    ))
                })
            })
        }
        _ => return None,
    };
    Some(CallToolResponse::Task(CreateTaskResult::new(task)))
}

/// The stdio writer rmcp gets for `--task-support TOOL=MODE`: a task passes each line on to `out`,
/// a `tools/list` result's tools named in `declared` with their `execution.taskSupport` added.
pub fn declaring_task_support(
    out: Box<dyn AsyncWrite + Send + Unpin>,
    declared: &[String],
) -> Result<Box<dyn AsyncWrite + Send + Unpin>, String> {
    let mut modes = HashMap::new();
    for entry in declared {
        match entry.split_once('=') {
            Some((tool, mode @ ("forbidden" | "optional" | "required"))) => modes.insert(tool.to_string(), mode.to_string()),
            _ => return Err(format!("--task-support {entry}: expected TOOL=forbidden|optional|required")),
        };
    }
    let (app_side, relay_side) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        let mut out = out;
        let mut reader = BufReader::new(relay_side);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let mut message: Value = match serde_json::from_slice(&line) {
                Ok(message) => message,
                Err(_) => Value::Null,
            };
            let tools = message.get_mut("result").and_then(|r| r.get_mut("tools")).and_then(Value::as_array_mut);
            let written = match tools {
                Some(tools) => {
                    for tool in tools.iter_mut() {
                        let mode = tool.get("name").and_then(Value::as_str).and_then(|name| modes.get(name));
                        if let (Some(mode), Some(tool)) = (mode.cloned(), tool.as_object_mut()) {
                            tool.insert("execution".into(), json!({ "taskSupport": mode }));
                        }
                    }
                    format!("{message}\n").into_bytes()
                }
                None => std::mem::take(&mut line),
            };
            if out.write_all(&written).await.is_err() || out.flush().await.is_err() {
                break;
            }
        }
    });
    Ok(Box::new(app_side))
}
