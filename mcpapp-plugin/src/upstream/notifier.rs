//! Where every notification and question of an app's session goes ([`Notifier`]): a relayed
//! call's own to its client (`relay.rs`), list changes to the app's supervisor
//! ([`UpstreamSignal`]), the rest to the host as module events.

use std::sync::Arc;

use host_abi::jsonrpc;
#[allow(deprecated)]
use rmcp::model::{ClientResult, CreateMessageResult, CustomResult, ElicitResult, ErrorCode, GetExtensions as _, ListRootsResult, ServerNotification};
use rmcp::ErrorData;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::runtime::events::EventSink;
use crate::upstream::ordering::{OrderGate, Seq};
use crate::upstream::relay::Relays;

/// Signals from the handler to the app's supervisor.
#[derive(Debug)]
pub enum UpstreamSignal {
    ToolsChanged,
    ResourcesChanged,
    PromptsChanged,
}

/// Where every notification of an app's session goes, whichever way it arrived: pushed by the
/// app (initialize-era sessions, through `UpstreamHandler` (`session.rs`)) or delivered on a
/// `subscriptions/listen` stream (2026-07-28 sessions, `subscriptions.rs`). Cheap to clone.
#[derive(Clone)]
pub struct Notifier {
    inner: Arc<NotifierInner>,
}

struct NotifierInner {
    app_id: String,
    events: EventSink,
    signals: mpsc::UnboundedSender<UpstreamSignal>,
    relays: Arc<Relays>,
    /// The app's notifications are handled in the order it sent them (see `ordering.rs`).
    order: OrderGate,
}

/// A client's answer as the typed result rmcp sends back for `method`.
#[allow(deprecated)]
pub(crate) fn client_result(method: &str, answer: Value) -> Result<ClientResult, ErrorData> {
    let invalid = |e: serde_json::Error| {
        ErrorData::new(ErrorCode::INTERNAL_ERROR, format!("the client's answer to '{method}' is not valid: {e}"), None)
    };
    Ok(match method {
        "sampling/createMessage" => {
            ClientResult::CreateMessageResult(Box::new(serde_json::from_value::<CreateMessageResult>(answer).map_err(invalid)?))
        }
        "elicitation/create" => ClientResult::ElicitResult(serde_json::from_value::<ElicitResult>(answer).map_err(invalid)?),
        "roots/list" => ClientResult::ListRootsResult(serde_json::from_value::<ListRootsResult>(answer).map_err(invalid)?),
        _ => ClientResult::CustomResult(CustomResult(answer)),
    })
}

impl Notifier {
    /// The notifier of app `app_id`'s session: events to the host, list changes to `signals`,
    /// a relayed call's own notifications and questions to its client (`relays`).
    pub fn new(app_id: &str, events: EventSink, signals: mpsc::UnboundedSender<UpstreamSignal>, relays: Arc<Relays>) -> Notifier {
        Notifier { inner: Arc::new(NotifierInner { app_id: app_id.to_string(), events, signals, relays, order: OrderGate::default() }) }
    }

    /// Puts an app's question (a request of the app during a call: sampling, elicitation,
    /// roots…) to the client of the call it belongs to (`origin`: the gateway's request it came
    /// with, where the transport says), and returns that client's answer. `gone` fires when
    /// the app stops asking.
    pub async fn put_question(
        &self,
        method: &str,
        params: Value,
        origin: Option<&rmcp::model::RequestId>,
        gone: &CancellationToken,
    ) -> Result<Value, ErrorData> {
        let app_id = &self.inner.app_id;
        let Some(call) = self.inner.relays.for_request(app_id, origin) else {
            tracing::debug!(app = %app_id, "declining upstream request {method}: no client is waiting on this app");
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("'{method}' is unavailable: no client of the gateway is waiting on this app to answer it"),
                None,
            ));
        };
        tracing::debug!(app = %app_id, call = call.call_id, "relaying upstream request {method} to the caller");
        tokio::select! {
            answer = call.ask(method, params) => answer,
            _ = gone.cancelled() => {
                Err(ErrorData::new(ErrorCode::INTERNAL_ERROR, format!("'{method}' was cancelled by the app"), None))
            }
        }
    }

    /// [`Self::put_question`] for the short way, which answers the app itself: the answer
    /// checked as rmcp checks it (a result of the method's type), as JSON.
    pub async fn answer_question(
        &self,
        method: &str,
        params: Value,
        origin: Option<&rmcp::model::RequestId>,
        gone: &CancellationToken,
    ) -> Result<Value, ErrorData> {
        if method == "ping" {
            return Ok(json!({}));
        }
        let answer = self.put_question(method, params, origin, gone).await?;
        let typed = client_result(method, answer)?;
        serde_json::to_value(&typed)
            .map_err(|e| ErrorData::new(ErrorCode::INTERNAL_ERROR, format!("the client's answer to '{method}' cannot be sent: {e}"), None))
    }

    /// Handles one notification in its turn (the order the app sent it, `ordering.rs`). `seq` is
    /// its arrival number; its `_meta` and extensions were taken off it already, as rmcp does
    /// before it calls the handler (see [`Notifier::detach`]).
    pub async fn deliver(&self, notification: ServerNotification, seq: Option<Seq>) {
        self.inner.order.wait_turn(seq).await;
        self.notify(notification);
        self.inner.order.done(seq);
    }

    /// Takes a notification's extensions (its arrival number and its `_meta`) off it, exactly as
    /// rmcp does before handing one to `UpstreamHandler::handle_notification` (`session.rs`), so that one
    /// delivered on a `subscriptions/listen` stream reaches [`Notifier::deliver`] in the same shape.
    /// The `_meta` of such a notification carries the gateway's own listen request id
    /// (`io.modelcontextprotocol/subscriptionId`), which means nothing to the host's clients: a
    /// 2026-07-28 client would take it for the id of a listen request of its own.
    pub fn detach(mut notification: ServerNotification) -> (ServerNotification, Option<Seq>) {
        let extensions = std::mem::take(notification.extensions_mut());
        (notification, extensions.get::<Seq>().copied())
    }

    /// Asks the supervisor to refresh a list, without a notification from the app (a listen
    /// stream was re-opened and changes in between may have gone unheard).
    pub fn signal(&self, signal: UpstreamSignal) {
        let _ = self.inner.signals.send(signal);
    }

    /// Reports one notification: to the relayed call it belongs to, else to the host's
    /// subscribers; list changes also to the supervisor.
    fn notify(&self, notification: ServerNotification) {
        self.deliver_message(notification_message(&notification));
    }

    /// [`Self::notify`] for a notification as the app sent it (the short way's).
    pub fn deliver_message(&self, message: Value) {
        let signal = match message.get("method").and_then(Value::as_str) {
            Some("notifications/tools/list_changed") => Some(UpstreamSignal::ToolsChanged),
            Some("notifications/resources/list_changed") => Some(UpstreamSignal::ResourcesChanged),
            Some("notifications/prompts/list_changed") => Some(UpstreamSignal::PromptsChanged),
            _ => None,
        };
        if let Some(signal) = signal {
            self.signal(signal);
        }
        let app_id = &self.inner.app_id;
        if !self.inner.relays.route_notification(app_id, &message) {
            self.inner.events.upstream_notification(app_id, message);
        }
    }
}

/// A notification as the JSON-RPC message the host (or a relayed call's client) gets.
pub(crate) fn notification_message(notification: &ServerNotification) -> Value {
    let mut message = serde_json::to_value(notification).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut message {
        map.insert("jsonrpc".into(), json!(jsonrpc::VERSION));
    }
    message
}

