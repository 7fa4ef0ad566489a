//! Keeps an app's notifications in the order the app sent them.
//!
//! rmcp hands each incoming notification to the handler on a task of its own, so two log
//! messages (or progress steps) sent back to back can reach the handler — and so the client the
//! gateway relays them to — the other way round. [`Sequenced`] numbers notifications as they
//! come off the transport (which is read sequentially), and [`OrderGate`] lets the handler take
//! them in that order — the handler and the readers of `subscriptions/listen` streams alike
//! (`upstream::Notifier::deliver`), since rmcp hands a listen stream's notifications to its
//! reader, not to the handler. A number that never reaches either (rmcp consumes a few kinds
//! itself) holds the next one back for at most [`GAP_WAIT`].
//!
//! [`Sequenced`] is also where an answer that answers nothing is skipped during the handshake:
//! rmcp takes the first response it reads there for the answer to its `initialize` (or
//! `server/discover`) and fails the whole session when the ids differ, while it skips any other
//! noise an app writes before its answer. A stray response is noise of the same kind.

use std::future::Future;
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::model::GetExtensions as _;
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::model::{ClientRequest, JsonRpcMessage, RequestId, ServerNotification};
use rmcp::transport::Transport;
use tokio::sync::Notify;

/// How long a notification waits for an earlier one that may never come.
const GAP_WAIT: Duration = Duration::from_millis(100);

/// The arrival number of a notification, in its extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seq(pub u64);

/// A client transport that numbers the notifications it receives and, until the handshake is
/// over, skips answers to requests it did not send (see the module docs).
pub struct Sequenced<T> {
    inner: T,
    next: u64,
    /// The handshake's requests sent so far (`initialize`, `server/discover`), while it lasts:
    /// `None` once the client sends anything else.
    handshake: Option<Vec<RequestId>>,
}

impl<T> Sequenced<T> {
    pub fn new(inner: T) -> Self {
        Sequenced { inner, next: 0, handshake: Some(Vec::new()) }
    }

    /// Follows the handshake through what the client sends.
    fn sending(&mut self, item: &TxJsonRpcMessage<RoleClient>) {
        let Some(sent) = &mut self.handshake else { return };
        match item {
            JsonRpcMessage::Request(request)
                if matches!(request.request, ClientRequest::InitializeRequest(_) | ClientRequest::DiscoverRequest(_)) =>
            {
                sent.push(request.id.clone())
            }
            _ => self.handshake = None,
        }
    }

    /// During the handshake: an answer whose id is none of the handshake's requests.
    fn is_stray(&self, message: &RxJsonRpcMessage<RoleClient>) -> Option<RequestId> {
        let sent = self.handshake.as_ref()?;
        let id = match message {
            JsonRpcMessage::Response(response) => &response.id,
            JsonRpcMessage::Error(error) => error.id.as_ref()?,
            _ => return None,
        };
        (!sent.iter().any(|ours| answers(ours, id))).then(|| id.clone())
    }
}

/// Whether a response with `id` answers the request `ours` (rmcp's rule: the same id, or a
/// numeric id written as a string).
fn answers(ours: &RequestId, id: &RequestId) -> bool {
    ours == id
        || matches!((ours, id), (RequestId::Number(n), RequestId::String(s)) if s.parse::<i64>().ok() == Some(*n))
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Sequenced<T> {
    type Error = T::Error;

    fn send(&mut self, item: TxJsonRpcMessage<RoleClient>) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.sending(&item);
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let mut message = loop {
            let message = self.inner.receive().await?;
            match self.is_stray(&message) {
                Some(id) => tracing::warn!("skipping an answer to a request never sent (id {id}) before the app's handshake answer"),
                None => break message,
            }
        };
        if let JsonRpcMessage::Notification(n) = &mut message {
            // A listen stream's acknowledgment never reaches the handler or the stream's
            // reader (rmcp's `Peer::listen` takes it): numbering it would hold the next
            // notification back for the gap wait.
            if !matches!(n.notification, ServerNotification::SubscriptionsAcknowledgedNotification(_)) {
                n.notification.extensions_mut().insert(Seq(self.next));
                self.next += 1;
            }
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// Admits numbered notifications one at a time, in order.
#[derive(Default)]
pub struct OrderGate {
    next: Mutex<u64>,
    turn: Notify,
}

impl OrderGate {
    /// Waits until every notification numbered before `seq` was handled (or [`GAP_WAIT`]).
    pub async fn wait_turn(&self, seq: Option<Seq>) {
        let Some(Seq(seq)) = seq else { return };
        let deadline = tokio::time::Instant::now() + GAP_WAIT;
        loop {
            let notified = self.turn.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if *self.next.lock() >= seq {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return;
            }
        }
    }

    /// Marks `seq` handled.
    pub fn done(&self, seq: Option<Seq>) {
        let Some(Seq(seq)) = seq else { return };
        {
            let mut next = self.next.lock();
            if *next <= seq {
                *next = seq + 1;
            }
        }
        self.turn.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ClientJsonRpcMessage, ClientNotification, InitializeRequest, InitializeRequestParams, InitializedNotification};
    use rmcp::transport::async_rw::AsyncRwTransport;
    use tokio::io::AsyncWriteExt as _;

    /// A client transport over a pipe whose other end (the app's stdout) is returned.
    fn client() -> (Sequenced<AsyncRwTransport<RoleClient, tokio::io::DuplexStream, tokio::io::Sink>>, tokio::io::DuplexStream) {
        let (ours, app) = tokio::io::duplex(1 << 16);
        (Sequenced::new(AsyncRwTransport::new(ours, tokio::io::sink())), app)
    }

    fn id_of(message: &RxJsonRpcMessage<RoleClient>) -> Option<RequestId> {
        match message {
            JsonRpcMessage::Response(r) => Some(r.id.clone()),
            JsonRpcMessage::Error(e) => e.id.clone(),
            _ => None,
        }
    }

    #[tokio::test]
    async fn stray_answers_before_the_handshake_answer_are_skipped_and_later_ones_passed() {
        let (mut transport, mut app) = client();
        let initialize = ClientJsonRpcMessage::request(
            ClientRequest::InitializeRequest(InitializeRequest::new(InitializeRequestParams::default())),
            RequestId::Number(0),
        );
        transport.send(initialize).await.unwrap();
        app.write_all(
            b"{\"jsonrpc\":\"2.0\",\"id\":987654321,\"result\":{}}\n\
{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"error\":{\"code\":-1,\"message\":\"stray\"}}\n\
{\"jsonrpc\":\"2.0\",\"id\":\"0\",\"result\":{}}\n\
{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}\n",
        )
        .await
        .unwrap();
        let first = transport.receive().await.unwrap();
        assert_eq!(id_of(&first), Some(RequestId::String("0".into())), "the answer to initialize, strays skipped");
        transport
            .send(ClientJsonRpcMessage::notification(ClientNotification::InitializedNotification(InitializedNotification::default())))
            .await
            .unwrap();
        let after = transport.receive().await.unwrap();
        assert_eq!(id_of(&after), Some(RequestId::Number(5)), "after the handshake rmcp sees every answer");
    }
}
