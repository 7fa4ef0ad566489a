//! Tool calls as MCP Tasks (SPEC R43), the one way both MCP endpoints run them: a client that
//! declared the tasks extension (`io.modelcontextprotocol/tasks`) gets every `tools/call` back as
//! a task it polls (`tasks/get`), answers the app's questions of (`tasks/update`) and cancels
//! (`tasks/cancel`) — the revision's methods, served by rmcp's task manager — plus the earlier
//! (2025-11-25) `tasks/result` and `tasks/list` for clients of that draft.

use std::collections::VecDeque;
use std::sync::Arc;

use host_abi::jsonrpc;
use parking_lot::Mutex;
use rmcp::model::{
    CallToolResult, CancelTaskParams, CreateTaskResult, CustomRequest, CustomResult, ErrorCode, GetTaskParams, GetTaskResult,
    InputRequest, TaskPayload, UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::task_manager::{TaskContext, TaskExit, TaskManager, TaskOptions};
use rmcp::ErrorData;
use serde_json::{json, Value};

use crate::module_host::ModuleHost;
use crate::relay::{error_object, RelayEvent, RelayedCall, Step};

/// How many task ids `tasks/list` remembers.
const LISTED_TASKS: usize = 1000;

/// The tasks of one endpoint (shared by its sessions: 2026-07-28 clients are stateless).
pub struct Tasks {
    manager: TaskManager,
    /// Ids of the tasks created, newest last, for `tasks/list` (the task manager keeps no list).
    ids: Mutex<VecDeque<String>>,
}

impl Default for Tasks {
    fn default() -> Self {
        Tasks { manager: TaskManager::new(), ids: Mutex::new(VecDeque::new()) }
    }
}

impl Tasks {
    /// Whether the request's client wants its calls as tasks.
    pub fn wanted(context: &RequestContext<RoleServer>) -> bool {
        context.client_capabilities().is_some_and(|c| c.supports_tasks())
    }

    /// Runs a relayed call as a task; `finish` turns its outcome into the task's result.
    pub fn start<T: Send + 'static>(
        &self,
        call: RelayedCall<T>,
        module: Arc<ModuleHost>,
        finish: impl FnOnce(T) -> Result<CallToolResult, ErrorData> + Send + 'static,
    ) -> CreateTaskResult {
        let task = self.manager.spawn(TaskOptions::new(), move |task| {
            Box::pin(async move { finish(run_as_task(call, &task, &module).await?).map_err(TaskExit::Error) })
        });
        let mut ids = self.ids.lock();
        ids.push_back(task.task_id.clone());
        while ids.len() > LISTED_TASKS {
            ids.pop_front();
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

    /// `tasks/result` (waits for a task's result) and `tasks/list` (the tasks still kept); any
    /// other method is not found.
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
