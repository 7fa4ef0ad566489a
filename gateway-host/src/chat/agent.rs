//! One chat turn (SPEC R33, R34): the user's message (and what they did in app UIs) goes to the
//! model with the registry's model-visible tools under provider-safe names; each tool call runs
//! through the registry (so preference and visibility hold), its result is fed back — as the
//! text `tools::model_view` makes of it — until the model answers. Everything the turn does is
//! reported as [`Frame`]s; the turn is saved in one step when it ends.
//!
//! Turns of one session run one after another (the store's turn lock); a turn whose client went
//! away is cancelled, its model request and tool calls with it. An app that asks the user
//! something during a tool call (elicitation) gets an `input` frame; the answer comes back
//! through [`Chat::answer`].

use std::collections::HashMap;
use std::sync::Arc;

use host_abi::jsonrpc;
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::provider::{Provider, ProviderError, ToolCall};
use super::store::{model_text, title_of, ForwardedInput, SessionStore, StoreError, UI_KEY};
use crate::metrics::{Metrics, TurnOutcome};
use crate::module::relay::{error_object, random_hex, RelayEvent, Step};
use crate::tools::{ToolRegistry, ToolResult};

/// What a turn reports, as `data: {"type": …}` frames of `POST /apps/chat`.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case", rename_all_fields = "camelCase")]
pub enum Frame {
    Session { session_id: String },
    Text { delta: String },
    Tool { id: String, name: String, input: Value },
    ToolResult {
        id: String,
        name: String,
        text: String,
        is_error: bool,
        /// For tools with a UI: what a page needs to render the app — the app, its own name
        /// for the tool, the UI resource, the tool's input and the app's raw result.
        #[serde(skip_serializing_if = "Option::is_none")]
        app_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        tool_name: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        resource_uri: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        input: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
    },
    Input { input_id: String, method: String, params: Value },
    Error { message: String },
    Result { text: String },
    Done,
}

/// What the user did inside an app's UI, added to the turn: a tool the UI called (`tool`,
/// `args`, `resultText`: context for the model), or a message the app posted into the chat
/// (`ui/message`: `text`, said on the user's behalf). `app` names the app when known.
#[derive(Debug, Clone, serde::Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AppEvent {
    #[serde(default)]
    pub app: Option<String>,
    #[serde(default)]
    pub tool: Option<String>,
    #[serde(default)]
    pub args: Value,
    #[serde(default)]
    pub result_text: String,
    #[serde(default)]
    pub text: Option<String>,
}

impl AppEvent {
    /// A valid event is a tool call or a message, not both and not neither.
    pub fn check(&self) -> Result<(), String> {
        match (&self.tool, &self.text) {
            (Some(tool), None) if !tool.is_empty() => Ok(()),
            (None, Some(text)) if !text.trim().is_empty() => Ok(()),
            _ => Err("each app event is either {tool, args?, resultText?} or {text}, with an optional app".to_string()),
        }
    }

    /// How the event reads in the user's message.
    fn describe(&self) -> String {
        let ui = match self.app.as_deref() {
            Some(app) => format!("the UI of the app '{app}'"),
            None => "an app's UI".to_string(),
        };
        match (&self.tool, &self.text) {
            (Some(tool), _) => format!("[In {ui}, the user called the tool '{tool}' with {} → {}]", self.args, self.result_text),
            (None, Some(text)) => format!("[Sent from {ui}] {text}"),
            (None, None) => String::new(),
        }
    }
}

pub struct TurnRequest {
    pub session_id: String,
    pub message: Option<String>,
    pub app_events: Vec<AppEvent>,
}

/// An answer to an `input` frame: the client's result, or its JSON-RPC error object.
type InputAnswer = Result<Value, Value>;

/// The chat: sessions, the model, the tools, and the questions waiting for users.
pub struct Chat {
    registry: Arc<ToolRegistry>,
    store: Arc<dyn SessionStore>,
    /// The model, or why there is none (the message names the keys to set).
    provider: Result<Provider, String>,
    /// `input` frames of this replica's turns waiting for their answer.
    inputs: Arc<Inputs>,
    /// Turns by outcome, and the turns and sessions in progress (`/metrics`).
    metrics: Arc<Metrics>,
}

/// Input id → (session, where the answer goes).
#[derive(Default)]
struct Inputs(Mutex<HashMap<String, (String, oneshot::Sender<InputAnswer>)>>);

impl Inputs {
    /// Hands an answer to the turn of this replica that waits for it; gives it back when none does.
    fn deliver(&self, session_id: &str, input_id: &str, answer: InputAnswer) -> Result<(), InputAnswer> {
        let mut inputs = self.0.lock();
        match inputs.get(input_id) {
            Some((owner, _)) if owner == session_id => {}
            _ => return Err(answer),
        }
        let (_, sender) = inputs.remove(input_id).expect("checked above");
        sender.send(answer)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    #[error("no question '{input_id}' is waiting in session '{session_id}'")]
    NotWaiting { session_id: String, input_id: String },
    #[error(transparent)]
    Store(#[from] super::store::StoreError),
}

impl Chat {
    /// With a store shared by replicas, answers that reach another replica are forwarded here
    /// (a task follows them for as long as the gateway runs).
    pub fn new(registry: Arc<ToolRegistry>, store: Arc<dyn SessionStore>, provider: Result<Provider, String>, metrics: Arc<Metrics>) -> Chat {
        let inputs = Arc::new(Inputs::default());
        if store.forwarded_inputs().is_some() {
            let (store, inputs) = (store.clone(), inputs.clone());
            tokio::spawn(async move {
                loop {
                    match store.forwarded_inputs() {
                        Some(connect) => match connect.await {
                            Ok(mut answers) => {
                                use futures::StreamExt;
                                while let Some(forwarded) = answers.next().await {
                                    // Every replica hears every answer; the one whose turn waits takes it.
                                    let _ = inputs.deliver(&forwarded.session_id, &forwarded.input_id, forwarded.answer);
                                }
                                tracing::warn!("the {} store stopped forwarding chat answers; reconnecting", store.kind());
                            }
                            Err(e) => tracing::warn!("chat answers from other replicas: {e}; retrying"),
                        },
                        None => return,
                    }
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
            });
        }
        Chat { registry, store, provider, inputs, metrics }
    }

    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.store
    }

    /// Records in a session's history that the user opened an app's UI (a page-only message,
    /// after any turn in progress), so a reload shows it where it was; creates the session when
    /// it has no turn yet, titled by the app.
    pub async fn record_opened(&self, session_id: &str, app_id: &str, resource_uri: &str, app_name: &str) -> Result<(), StoreError> {
        let _lock = self.store.lock(session_id).await?;
        let note = json!({ UI_KEY: { "opened": { "appId": app_id, "resourceUri": resource_uri } } });
        self.store.append_turn(session_id, &title_of(app_name), &[note]).await
    }

    /// Whether turns can run, for the page's first view: the model's name, or why there is none
    /// and which settings to set.
    pub fn status(&self) -> Value {
        match &self.provider {
            Ok(provider) => json!({ "configured": true, "model": provider.config().model, "problem": null }),
            Err(problem) => json!({ "configured": false, "model": null, "problem": problem }),
        }
    }

    /// Delivers a user's answer to an `input` frame of a turn in progress — on this replica, or
    /// through the shared store on the one whose turn asked.
    pub async fn answer(&self, session_id: &str, input_id: &str, answer: InputAnswer) -> Result<(), AnswerError> {
        let not_waiting = || AnswerError::NotWaiting { session_id: session_id.to_string(), input_id: input_id.to_string() };
        let Err(answer) = self.inputs.deliver(session_id, input_id, answer) else { return Ok(()) };
        let forwarded = ForwardedInput { session_id: session_id.to_string(), input_id: input_id.to_string(), answer };
        match self.store.forward_input(&forwarded).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(not_waiting()),
            Err(e) => Err(AnswerError::Store(e)),
        }
    }

    /// Runs one turn, reporting to `frames`, until it ends or `cancel` fires (the client left).
    pub async fn run_turn(&self, request: TurnRequest, frames: mpsc::UnboundedSender<Frame>, cancel: CancellationToken) {
        let send = |frame: Frame| {
            let _ = frames.send(frame);
        };
        let id = request.session_id.clone();
        // In progress from here; a return without `finish` (the client left) counts as cancelled.
        let counted = self.metrics.chat_turn(&id);
        // Turns of a session wait for each other: nothing of this one is reported before.
        let _lock = tokio::select! {
            lock = self.store.lock(&id) => match lock {
                Ok(lock) => lock,
                Err(e) => {
                    send(Frame::Error { message: e.to_string() });
                    send(Frame::Done);
                    counted.finish(TurnOutcome::Error);
                    return;
                }
            },
            _ = cancel.cancelled() => return,
        };
        send(Frame::Session { session_id: id.clone() });
        let mut done = TurnSoFar::default();
        let outcome = tokio::select! {
            outcome = self.turn(&request, &send, &cancel, &mut done) => Some(outcome),
            _ = cancel.cancelled() => None,
        };
        let Some(outcome) = outcome else {
            // Stopped (the Stop button, or the page went away): what was said and done so far
            // stays, as the page showed it, and says where it stopped.
            let stopped = done.stopped(&request, &self.registry.provider_names());
            if let Err(e) = self.store.append_turn(&id, &turn_title(&request), &stopped).await {
                tracing::warn!(session = %id, "a stopped turn could not be saved: {e}");
            }
            return;
        };
        let ended = match outcome {
            Ok(messages) => {
                match self.store.append_turn(&id, &turn_title(&request), &messages).await {
                    Ok(_) => TurnOutcome::Ok,
                    Err(e) => {
                        send(Frame::Error { message: format!("the turn could not be saved: {e}") });
                        TurnOutcome::Error
                    }
                }
            }
            Err(message) => {
                send(Frame::Error { message });
                TurnOutcome::Error
            }
        };
        send(Frame::Done);
        counted.finish(ended);
    }

    /// The turn itself: its new messages, or the error that ended it (nothing is saved then).
    ///
    /// The model request is assembled from JSON texts: the session's history comes from the
    /// store already as the model reads it ([`SessionStore::model_history`]), the tools are
    /// serialised once per turn, and each new message once, so a long session costs a copy of
    /// its bytes per model call, not a parse, clone and serialisation of every message.
    async fn turn(&self, request: &TurnRequest, send: &impl Fn(Frame), cancel: &CancellationToken, done: &mut TurnSoFar) -> Result<Vec<Value>, String> {
        let provider = self.provider.as_ref().map_err(Clone::clone)?;
        let stored = self.store.model_history(&request.session_id).await.map_err(|e| e.to_string())?;
        let history = stored.recent(provider.config().max_history_bytes);
        if history.len() < stored.json().len() {
            tracing::debug!(
                session = %request.session_id,
                "the model gets the last {} of {} bytes of the session's history (Agent.MaxHistoryBytes)",
                history.len(),
                stored.json().len()
            );
        }
        let user = user_message(request);
        let mut new_texts = vec![model_text(&user)];
        done.messages.push(user);
        let names = self.registry.provider_names();
        let tools: Vec<Value> = self
            .registry
            .model_tools()
            .into_iter()
            .filter_map(|t| {
                let name = names.to_provider(&t.name)?.to_string();
                let parameters = if t.input_schema.is_object() { t.input_schema.clone() } else { json!({ "type": "object" }) };
                Some(json!({ "type": "function", "function": { "name": name, "description": t.description, "parameters": parameters } }))
            })
            .collect();
        let tools = if tools.is_empty() { String::new() } else { Value::Array(tools).to_string() };
        let system = json!({ "role": "system", "content": provider.config().system_prompt }).to_string();
        for _ in 0..provider.config().max_tool_rounds {
            let messages: Vec<&str> =
                [system.as_str(), history].into_iter().chain(new_texts.iter().map(String::as_str)).collect();
            let completion = provider
                .complete(&messages, &tools, |delta| {
                    done.streaming.lock().push_str(delta);
                    send(Frame::Text { delta: delta.to_string() })
                })
                .await
                .map_err(|e: ProviderError| e.to_string())?;
            let answer = completion.message();
            new_texts.push(model_text(&answer));
            done.streaming.lock().clear();
            done.messages.push(answer);
            if completion.tool_calls.is_empty() {
                send(Frame::Result { text: completion.text });
                return Ok(std::mem::take(&mut done.messages));
            }
            for call in &completion.tool_calls {
                let mut asked = Vec::new();
                let (result_text, frame) = self.run_tool(call, &names, &request.session_id, send, cancel, &mut asked).await;
                let mut message = json!({ "role": "tool", "tool_call_id": call.id, "content": result_text });
                // The model's copy is taken before a page's part is added.
                new_texts.push(model_text(&message));
                message[UI_KEY] = ui_of(&frame, asked);
                send(frame);
                done.messages.push(message);
            }
        }
        send(Frame::Error {
            message: format!(
                "the model was still calling tools after {} rounds (Agent.MaxToolRounds); the turn ends here",
                provider.config().max_tool_rounds
            ),
        });
        Ok(std::mem::take(&mut done.messages))
    }

    /// Runs one tool call through the registry; returns the text for the model and the
    /// `tool_result` frame.
    async fn run_tool(
        &self,
        call: &ToolCall,
        names: &crate::tools::names::ProviderNames,
        session_id: &str,
        send: &impl Fn(Frame),
        cancel: &CancellationToken,
        asked: &mut Vec<Value>,
    ) -> (String, Frame) {
        let name = names.to_registry(&call.name).map(str::to_string);
        // The arguments are parsed here, once: the registry and the module take them as checked.
        let parsed = crate::tools::arguments::parse(&call.arguments);
        let input = parsed.as_ref().map_or(Value::Null, Clone::clone);
        send(Frame::Tool { id: call.id.clone(), name: name.clone().unwrap_or_else(|| call.name.clone()), input: input.clone() });
        let result = match (name.as_deref(), parsed) {
            (None, _) => ToolResult::error(format!("the model asked for a tool that does not exist: '{}'", call.name)),
            (Some(_), Err(e)) => ToolResult::error(format!("invalid arguments for tool '{}': {e}: {}", call.name, call.arguments)),
            (Some(name), Ok(arguments)) => self.call_relayed(name, arguments, session_id, send, cancel, asked).await,
        };
        let text = result.text.clone();
        let ui = result.ui_resource_uri.is_some();
        let source = name.as_deref().and_then(|n| self.registry.resolved(n)).map(|spec| spec.source.clone());
        let (app_id, tool_name) = match source {
            Some(crate::tools::ToolSource::Module { app_id, tool_name }) if ui => (Some(app_id), Some(tool_name)),
            _ => (None, None),
        };
        let frame = Frame::ToolResult {
            id: call.id.clone(),
            name: name.unwrap_or_else(|| call.name.clone()),
            text: text.clone(),
            is_error: result.is_error,
            app_id,
            tool_name,
            resource_uri: result.ui_resource_uri.clone(),
            input: ui.then(|| input.clone()),
            result: if ui { result.raw.clone() } else { None },
        };
        (text, frame)
    }

    /// A tool call whose app may ask the user something meanwhile (an `input` frame); each
    /// question and its answer go to `asked`, for the page to show answered after a reload.
    async fn call_relayed(
        &self,
        name: &str,
        arguments: Value,
        session_id: &str,
        send: &impl Fn(Frame),
        cancel: &CancellationToken,
        asked: &mut Vec<Value>,
    ) -> ToolResult {
        let module = self.registry.module().clone();
        let call_id = module.next_call_id();
        // The chat session is the app session (R32): the same `sessionId` the browser sends.
        let meta = json!({ "sessionId": session_id });
        // The page answers the app's questions to the user (elicitation, forms and URLs).
        let relay = host_abi::RelayOptIn { client_capabilities: vec!["elicitation".into()].into() };
        let (registry, name_owned) = (self.registry.clone(), name.to_string());
        let mut call =
            module.relayed(call_id, async move { registry.call_with(&name_owned, arguments, call_id, &meta, Some(relay)).await });
        loop {
            // A shutdown past its bound cuts the call off with the reason, as on the MCP endpoints.
            let step = tokio::select! {
                step = call.next() => step,
                _ = cancel.cancelled() => return ToolResult::error(STOPPED_CALL_REASON),
                reason = module.calls_cut_off() => return ToolResult::error(reason),
            };
            match step {
                Step::Done(result) => return result,
                Step::Event(RelayEvent::Notification(_)) => {}
                Step::Event(RelayEvent::Request { key, method, params }) => {
                    let input_id = format!("in-{}", random_hex(8));
                    let (tx, rx) = oneshot::channel();
                    self.inputs.0.lock().insert(input_id.clone(), (session_id.to_string(), tx));
                    if let Err(e) = self.store.expect_input(session_id, &input_id).await {
                        tracing::warn!("the answer to {input_id} can reach only this replica: {e}");
                    }
                    send(Frame::Input { input_id: input_id.clone(), method: method.clone(), params: params.clone() });
                    let answer = tokio::select! {
                        answer = rx => answer.unwrap_or_else(|_| Err(error_object(jsonrpc::INTERNAL_ERROR, "the question was withdrawn"))),
                        _ = cancel.cancelled() => Err(error_object(jsonrpc::INTERNAL_ERROR, "the turn was cancelled")),
                        reason = module.calls_cut_off() => Err(error_object(jsonrpc::UPSTREAM_FAILED, reason)),
                    };
                    self.inputs.0.lock().remove(&input_id);
                    if let Err(e) = self.store.forget_input(session_id, &input_id).await {
                        tracing::debug!("forgetting {input_id}: {e}");
                    }
                    let answered = match &answer {
                        Ok(result) => json!({ "result": result }),
                        Err(error) => json!({ "error": error }),
                    };
                    asked.push(json!({ "inputId": input_id, "method": method, "params": params, "answer": answered }));
                    module.respond(call_id, &key, answer).await;
                }
            }
        }
    }
}

/// The page's part of a stored tool message ([`UI_KEY`]): the tool's gateway name (the model's
/// copy has only the provider-safe one), what the app asked the user, and for a tool with a UI
/// what rendering its app takes.
fn ui_of(frame: &Frame, asked: Vec<Value>) -> Value {
    let mut ui = serde_json::Map::new();
    if let Frame::ToolResult { name, app_id, tool_name, resource_uri, input, result, .. } = frame {
        ui.insert("name".into(), json!(name));
        if let Some(uri) = resource_uri {
            ui.extend([
                ("appId".into(), json!(app_id)),
                ("toolName".into(), json!(tool_name)),
                ("resourceUri".into(), json!(uri)),
                ("input".into(), json!(input)),
                ("result".into(), json!(result)),
            ]);
        }
    }
    if !asked.is_empty() {
        ui.insert("inputs".into(), Value::Array(asked));
    }
    Value::Object(ui)
}

/// What a stopped turn's answer says, to the model and in the page.
pub const STOPPED: &str = "[Stopped by the user before an answer was complete.]";

/// Why a tool call cut short by a stop has no result; the model and the page read it as
/// `Error: {reason}` (the page shows the same text live).
const STOPPED_CALL_REASON: &str = "the turn was stopped before this call finished.";

/// A turn's messages as it goes — the one list of them: a turn that ends takes it, a stopped
/// one keeps it ([`TurnSoFar::stopped`]) — and the text of the model's answer streaming now.
#[derive(Default)]
struct TurnSoFar {
    messages: Vec<Value>,
    streaming: Mutex<String>,
}

impl TurnSoFar {
    /// The messages of a stopped turn: those so far (the user's message at least), a result for
    /// each call that had none yet — so the model never reads a call without its result — and
    /// the answer as far as it had streamed, marked stopped.
    fn stopped(self, request: &TurnRequest, names: &crate::tools::names::ProviderNames) -> Vec<Value> {
        let mut messages = self.messages;
        if messages.is_empty() {
            messages.push(user_message(request));
        }
        let calls: Vec<(String, String)> = messages
            .iter()
            .rev()
            .find(|m| m["role"] == "assistant")
            .and_then(|m| m["tool_calls"].as_array())
            .map(|calls| {
                calls.iter().map(|c| (c["id"].as_str().unwrap_or_default().to_string(), c["function"]["name"].as_str().unwrap_or_default().to_string())).collect()
            })
            .unwrap_or_default();
        for (id, provider_name) in calls {
            if !messages.iter().any(|m| m["role"] == "tool" && m["tool_call_id"] == id.as_str()) {
                let name = names.to_registry(&provider_name).unwrap_or(&provider_name).to_string();
                let content = format!("Error: {STOPPED_CALL_REASON}");
                messages.push(json!({ "role": "tool", "tool_call_id": id, "content": content, UI_KEY: { "name": name } }));
            }
        }
        let partial = self.streaming.into_inner();
        let content = if partial.trim().is_empty() { STOPPED.to_string() } else { format!("{partial}\n\n{STOPPED}") };
        messages.push(json!({ "role": "assistant", "content": content, UI_KEY: { "stopped": true, "text": partial } }));
        messages
    }
}

/// The turn's `user` message: its content as the model reads it ([`user_content`]), and what
/// the user saw as the page's part ([`UI_KEY`]) — what they typed, or the text an app posted
/// with the app's id (the model's content wraps it in a note saying where it came from).
fn user_message(request: &TurnRequest) -> Value {
    let mut message = json!({ "role": "user", "content": user_content(request) });
    let typed = request.message.as_deref().filter(|m| !m.trim().is_empty());
    let posted = request.app_events.iter().find(|e| e.text.is_some());
    match (typed, posted) {
        (Some(text), _) => message[UI_KEY] = json!({ "text": text }),
        (None, Some(event)) => message[UI_KEY] = json!({ "text": event.text, "appId": event.app }),
        (None, None) => {}
    }
    message
}

/// A session's title from its first turn: what the user typed, else what an app posted, else
/// the app tool they ran.
fn turn_title(request: &TurnRequest) -> String {
    let said = request.message.as_deref().filter(|m| !m.trim().is_empty());
    let posted = || request.app_events.iter().find_map(|e| e.text.as_deref());
    let ran = || request.app_events.iter().find_map(|e| e.tool.as_deref());
    title_of(said.or_else(posted).or_else(ran).unwrap_or(""))
}

/// The user's message, with what they did in app UIs before it.
pub fn user_content(request: &TurnRequest) -> String {
    let mut parts: Vec<String> = request
        .app_events
        .iter()
        .map(AppEvent::describe)
        .collect();
    if let Some(message) = request.message.as_deref().filter(|m| !m.trim().is_empty()) {
        parts.push(message.to_string());
    }
    parts.join("\n")
}
