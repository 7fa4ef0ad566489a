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

use std::future::Future;
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::model::GetExtensions as _;
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::model::{JsonRpcMessage, ServerNotification};
use rmcp::transport::Transport;
use tokio::sync::Notify;

/// How long a notification waits for an earlier one that may never come.
const GAP_WAIT: Duration = Duration::from_millis(100);

/// The arrival number of a notification, in its extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seq(pub u64);

/// A client transport that numbers the notifications it receives.
pub struct Sequenced<T> {
    inner: T,
    next: u64,
}

impl<T> Sequenced<T> {
    pub fn new(inner: T) -> Self {
        Sequenced { inner, next: 0 }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Sequenced<T> {
    type Error = T::Error;

    fn send(&mut self, item: TxJsonRpcMessage<RoleClient>) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let mut message = self.inner.receive().await?;
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
