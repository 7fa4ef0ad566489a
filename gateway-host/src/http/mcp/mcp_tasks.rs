//! Tool calls as MCP Tasks (SPEC R43), the one way both MCP endpoints run them: a client that
//! declared the tasks extension (`io.modelcontextprotocol/tasks`) gets a `tools/call` of a tool
//! that declares task support (`execution.taskSupport`, see [`Tasks::as_task`]) back as a task it
//! polls (`tasks/get`), answers the app's questions of (`tasks/update`) and cancels
//! (`tasks/cancel`) — the revision's methods, served by rmcp's task manager — plus the earlier
//! (2025-11-25) `tasks/result` and `tasks/list` for clients of that draft, which the 2026-07-28
//! revision removed ([`Tasks::custom_for`]).

use std::collections::VecDeque;
use std::sync::Arc;

use host_abi::jsonrpc;
use parking_lot::Mutex;
use rmcp::model::{
    CallToolResult, CancelTaskParams, ClientCapabilities, CreateTaskResult, CustomRequest, CustomResult, ErrorCode, GetTaskParams,
    GetTaskResult, InputRequest, TaskPayload, UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::task_manager::{TaskContext, TaskExit, TaskManager, TaskOptions};
use rmcp::ErrorData;
use serde_json::{json, Value};

use crate::module::host::ModuleHost;
use crate::module::relay::{error_object, Claims, RelayEvent, RelayedCall, Step};

/// How long another replica sends a task's requests here: the task manager's own retention of a
/// task (rmcp's default TTL) with room for a last poll.
const CLAIM_TTL: std::time::Duration = std::time::Duration::from_millis(rmcp::task_manager::DEFAULT_TASK_TTL_MS * 2);

/// How many task ids `tasks/list` remembers.
const LISTED_TASKS: usize = 1000;

/// The tasks of one endpoint (shared by its sessions: 2026-07-28 clients are stateless).
pub struct Tasks {
    manager: TaskManager,
    /// Ids of the tasks created, newest last, for `tasks/list` (the task manager keeps no list).
    ids: Mutex<VecDeque<String>>,
    /// Set when replicas share the tasks' clients: each task id is claimed for this replica, so
    /// a `tasks/get`, `tasks/update` or `tasks/cancel` reaching another one is sent here.
    claims: Option<Arc<dyn Claims>>,
}

impl Default for Tasks {
    fn default() -> Self {
        Tasks { manager: TaskManager::new(), ids: Mutex::new(VecDeque::new()), claims: None }
    }
}

impl Tasks {
    /// Tasks whose ids are claimed with `claims` (when given).
    pub fn claimed_with(claims: Option<Arc<dyn Claims>>) -> Self {
        Tasks { claims, ..Tasks::default() }
    }

    /// Whether the request's client wants its calls as tasks.
    pub fn wanted(context: &RequestContext<RoleServer>) -> bool {
        context.client_capabilities().is_some_and(|c| c.supports_tasks())
    }

    /// Whether a `tools/call` of a tool that declared `execution` (the tool's `execution` object
    /// as its app declared it, `None` when it declared none) runs as a task for the request's
    /// client — the one rule both MCP endpoints apply ([`Self::as_task_for`]).
    pub fn as_task(context: &RequestContext<RoleServer>, execution: Option<&Value>) -> Result<bool, ErrorData> {
        Self::as_task_for(Self::wanted(context), execution)
    }

    /// [`Self::as_task`] for a client that declared the tasks extension on its request
    /// (`declared`) or not, where there is no request context (the short way of
    /// `pass_through.rs`, whose clients never declared it).
    ///
    /// The tool's `execution.taskSupport` (MCP's tool field; absent means `"forbidden"`, and so
    /// does a value MCP does not define):
    ///
    /// - `"forbidden"`: never a task, the call's result is complete;
    /// - `"optional"`: a task for a client that declared the extension, else complete;
    /// - `"required"`: a task for a client that declared the extension; any other client is
    ///   refused with Missing Required Client Capability (rmcp's `-32021`, the tasks extension
    ///   named in `data.requiredCapabilities`). SEP-2663 (the Tasks extension): "A server MUST
    ///   NOT return `CreateTaskResult` to a client that did not include the extension capability
    ///   on its request, regardless of prior declarations", and a server that requires the
    ///   client to take a `CreateTaskResult` answers such a client with Missing Required Client
    ///   Capability. (2025-11-25's experimental tasks answered a required tool called without
    ///   its `task` parameter with -32601; the gateway serves tasks as the extension only.)
    pub fn as_task_for(declared: bool, execution: Option<&Value>) -> Result<bool, ErrorData> {
        let support = execution.and_then(|e| e.get("taskSupport")).and_then(Value::as_str);
        match (support, declared) {
            (Some("optional" | "required"), true) => Ok(true),
            (Some("required"), false) => Err(ErrorData::missing_required_client_capability(ClientCapabilities::builder().enable_tasks().build())),
            _ => Ok(false),
        }
    }

    /// Runs a relayed call as a task; `finish` turns its outcome into the task's result. The
    /// task's id is claimed (when replicas share clients) before it is answered.
    pub async fn start<T: Send + 'static>(
        &self,
        call: RelayedCall<T>,
        module: Arc<ModuleHost>,
        finish: impl FnOnce(T) -> Result<CallToolResult, ErrorData> + Send + 'static,
    ) -> CreateTaskResult {
        let task = self.manager.spawn(TaskOptions::new(), move |task| {
            Box::pin(async move { finish(run_as_task(call, &task, &module).await?).map_err(TaskExit::Error) })
        });
        {
            let mut ids = self.ids.lock();
            ids.push_back(task.task_id.clone());
            while ids.len() > LISTED_TASKS {
                ids.pop_front();
            }
        }
        if let Some(claims) = &self.claims {
            claims.claim(&task.task_id, CLAIM_TTL).await;
        }
        CreateTaskResult::new(task)
    }

    pub fn get(&self, request: GetTaskParams) -> Result<GetTaskResult, ErrorData> {
        Ok(GetTaskResult::new(self.manager.get_task(&request.task_id)?))
    }

    pub fn update(&self, request: UpdateTaskParams) -> Result<(), ErrorData> {
        self.manager.update_task(&request.task_id, request.input_responses)
    }

    pub fn cancel(&self, request: CancelTaskParams) -> Result<(), ErrorData> {
        self.manager.cancel_task(&request.task_id)
    }

    /// [`Self::custom`] for the request's revision: the 2026-07-28 revision removed `tasks/result`
    /// and `tasks/list` (the Tasks extension has `tasks/get`, `tasks/update`, `tasks/cancel`
    /// only), so for its requests they are not found (-32601), as any other method.
    pub async fn custom_for(&self, request: CustomRequest, context: &RequestContext<RoleServer>) -> Result<CustomResult, ErrorData> {
        if super::mcp_relay::is_modern(context) && matches!(request.method.as_str(), "tasks/result" | "tasks/list") {
            let message = format!("Method not found: {} (removed in MCP 2026-07-28)", request.method);
            return Err(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, message, None));
        }
        self.custom(request).await
    }

    /// `tasks/result` (waits for a task's result) and `tasks/list` (the tasks still kept); any
    /// other method is not found. Whatever the request's revision: see [`Self::custom_for`].
    pub async fn custom(&self, request: CustomRequest) -> Result<CustomResult, ErrorData> {
        let params = request.params.unwrap_or(Value::Null);
        match request.method.as_str() {
            "tasks/result" => {
                let Some(task_id) = params["taskId"].as_str() else {
                    return Err(ErrorData::invalid_params("tasks/result needs a string taskId", None));
                };
                loop {
                    match self.manager.get_task(task_id)?.payload {
                        TaskPayload::Completed { result } => return Ok(CustomResult(Value::Object(result))),
                        TaskPayload::Failed { error } => {
                            let message = error.get("message").and_then(Value::as_str).unwrap_or("the task failed").to_string();
                            return Err(ErrorData::internal_error(message, Some(Value::Object(error))));
                        }
                        TaskPayload::Cancelled => {
                            return Err(ErrorData::invalid_request(format!("task {task_id} was cancelled"), None));
                        }
                        _ => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
                    }
                }
            }
            "tasks/list" => {
                let ids: Vec<String> = self.ids.lock().iter().cloned().collect();
                let tasks: Vec<Value> = ids
                    .iter()
                    .filter_map(|id| self.manager.get_task(id).ok())
                    .filter_map(|t| serde_json::to_value(&t.task).ok())
                    .collect();
                Ok(CustomResult(json!({ "tasks": tasks })))
            }
            other => Err(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, format!("Method not found: {other}"), None)),
        }
    }
}

/// A relayed call as a task: the app's questions become the task's `inputRequests` (answered
/// through `tasks/update`), its progress messages the task's status message, and `tasks/cancel`
/// cancels the call in the app.
async fn run_as_task<T: Send + 'static>(mut call: RelayedCall<T>, task: &TaskContext, module: &ModuleHost) -> Result<T, TaskExit> {
    loop {
        let step = tokio::select! {
            step = call.next() => step,
            // Dropping the call cancels it in the module, which tells the app.
            _ = task.cancelled() => return Err(TaskExit::Cancelled),
            // A graceful shutdown stopped waiting for calls: the task fails, naming it.
            reason = module.calls_cut_off() => return Err(TaskExit::Error(super::mcp_relay::cut_off(reason))),
        };
        match step {
            Step::Done(result) => return Ok(result),
            Step::Event(RelayEvent::Notification(message)) => {
                if message["method"] == "notifications/progress" {
                    let p = &message["params"];
                    let text = match (p["message"].as_str(), p["progress"].as_f64(), p["total"].as_f64()) {
                        (Some(m), _, _) => m.to_string(),
                        (None, Some(done), Some(total)) => format!("{done} of {total}"),
                        (None, Some(done), None) => format!("{done}"),
                        _ => continue,
                    };
                    task.set_status_message(text);
                }
            }
            Step::Event(RelayEvent::Request { key, method, params }) => {
                let answer = match serde_json::from_value::<InputRequest>(RelayEvent::request_body(&method, &params)) {
                    Ok(input) => {
                        let asked = tokio::select! {
                            a = task.request_input(key.clone(), input) => a,
                            _ = task.cancelled() => return Err(TaskExit::Cancelled),
                        };
                        match asked {
                            Ok(value) => Ok(value),
                            Err(TaskExit::Cancelled) => return Err(TaskExit::Cancelled),
                            Err(TaskExit::Error(e)) => Err(error_object(e.code.0, e.message.to_string())),
                        }
                    }
                    Err(e) => Err(error_object(jsonrpc::INVALID_PARAMS, format!("'{method}' cannot be put to a task's client: {e}"))),
                };
                module.respond(call.call_id, &key, answer).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_a_task_only_for_a_declaring_client_of_a_tool_that_supports_tasks() {
        let support = |mode: &str| json!({ "taskSupport": mode });
        for (execution, declared, expected) in [
            (None, true, Some(false)),
            (None, false, Some(false)),
            (Some(json!({})), true, Some(false)),
            (Some(support("forbidden")), true, Some(false)),
            (Some(support("sometimes")), true, Some(false)),
            (Some(json!({ "taskSupport": true })), true, Some(false)),
            (Some(support("optional")), true, Some(true)),
            (Some(support("optional")), false, Some(false)),
            (Some(support("required")), true, Some(true)),
            (Some(support("required")), false, None),
        ] {
            let answer = Tasks::as_task_for(declared, execution.as_ref());
            match expected {
                Some(task) => assert_eq!(answer.as_ref().ok(), Some(&task), "{execution:?} declared={declared}: {answer:?}"),
                None => {
                    let e = answer.expect_err("a required tool refuses a client without the extension");
                    assert_eq!(e.code, ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY);
                    let data = e.data.expect("the missing capability named");
                    assert!(data["requiredCapabilities"]["extensions"].get(rmcp::model::TASKS_EXTENSION_ID).is_some(), "{data}");
                }
            }
        }
    }
}
