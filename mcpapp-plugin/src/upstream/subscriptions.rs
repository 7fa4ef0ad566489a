//! `subscriptions/listen` for sessions on the 2026-07-28 revision or later (SPEC R19, R32).
//!
//! From that revision on an app no longer pushes `notifications/tools/list_changed` (nor the
//! prompts and resources ones, nor `notifications/resources/updated`) on its own: a client hears
//! them only on a `subscriptions/listen` request it keeps open, and `resources/subscribe` /
//! `resources/unsubscribe` are gone. So each such session gets one [`Listener`]: a task holding
//! one listen request open for the list changes the app advertises (`listChanged`) and for the
//! resource URIs the host's clients subscribed to, feeding every notification it delivers to the
//! session's [`Notifier`] — the very path an initialize-era app's pushed notifications take
//! (catalog refresh, relay routing, the host's `upstream.notification` event).
//!
//! - A stream that ends while the session lives (the app ended it, the transport dropped it, the
//!   gateway fell behind) is re-opened, with a backoff when ends come quickly, and the lists it
//!   covers are refreshed, since changes in between went unheard.
//! - When the session ends (stop or loss), the task ends without a word above debug.
//! - The URIs subscribed through the browser proxy are kept per app ([`SubscribedUris`], so they
//!   outlive a restart of the app); changing them re-opens the stream with the new filter (the
//!   new stream first, then the old one is cancelled, so nothing falls in between) and the
//!   proxy's `resources/subscribe` is answered once the app has acknowledged the URI.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rmcp::model::SubscriptionFilter;
use rmcp::service::{Peer, RoleClient, ServiceError, Subscription, SubscriptionEnd};
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::runtime::executor::Tasks;
use crate::upstream::notifier::{Notifier, UpstreamSignal};
use crate::upstream::session::Session;

/// The resource URIs an app's clients subscribed to (through the browser proxy).
pub type SubscribedUris = Arc<Mutex<BTreeSet<String>>>;

/// Re-opening a stream that ended soon after it opened waits this long, doubling up to
/// [`RETRY_MAX`]; a stream that lived [`RETRY_RESET`] starts the count afresh.
const RETRY_BASE: Duration = Duration::from_millis(500);
const RETRY_MAX: Duration = Duration::from_secs(30);
const RETRY_RESET: Duration = Duration::from_secs(30);
/// How long a session's start waits for its first stream to be acknowledged before enumerating
/// (so a change right after enumeration is not missed); the stream may still open later.
const FIRST_OPEN_WAIT: Duration = Duration::from_secs(2);
/// How long a stream open at stop waits for its session to end (see [`end_with_session`]).
const END_WITH_SESSION_WAIT: Duration = Duration::from_secs(10);

/// What the app advertised, as far as subscriptions go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Advertised {
    pub tools_list_changed: bool,
    pub prompts_list_changed: bool,
    pub resources_list_changed: bool,
    pub resource_subscriptions: bool,
}

impl Advertised {
    /// From the capabilities of the app's handshake (`discover` or `initialize` result).
    pub fn from_capabilities(capabilities: &Value) -> Advertised {
        let flag = |list: &str, name: &str| capabilities.get(list).and_then(|c| c.get(name)).and_then(Value::as_bool) == Some(true);
        Advertised {
            tools_list_changed: flag("tools", "listChanged"),
            prompts_list_changed: flag("prompts", "listChanged"),
            resources_list_changed: flag("resources", "listChanged"),
            resource_subscriptions: flag("resources", "subscribe"),
        }
    }

    /// The filter to listen with: the advertised list changes and, when the app supports
    /// resource subscriptions, the subscribed URIs. `None` when there is nothing to listen for.
    pub fn filter(&self, uris: &BTreeSet<String>) -> Option<SubscriptionFilter> {
        let mut builder = SubscriptionFilter::builder();
        if self.tools_list_changed {
            builder = builder.tools_list_changed();
        }
        if self.prompts_list_changed {
            builder = builder.prompts_list_changed();
        }
        if self.resources_list_changed {
            builder = builder.resources_list_changed();
        }
        if self.resource_subscriptions && !uris.is_empty() {
            builder = builder.resource_subscriptions(uris.iter());
        }
        let filter = builder.build();
        (filter != SubscriptionFilter::default()).then_some(filter)
    }
}

/// The result of the listener's latest attempt to bring its stream in line with what is wanted.
#[derive(Debug, Clone, Default)]
struct Opened {
    /// The [`Listener::wanted`] version the attempt was for.
    version: u64,
    /// What the app acknowledged (empty when nothing is listened for).
    acknowledged: Option<SubscriptionFilter>,
    /// Why the attempt failed.
    error: Option<String>,
}

/// Why a resource (un)subscription through the browser proxy was not done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubscribeError {
    /// The app does not advertise `resources.subscribe`.
    Unsupported,
    /// The app did not acknowledge the URI.
    NotAccepted(String),
    /// The stream could not be (re)opened in time.
    Failed(String),
}

/// One session's listen stream (see the module docs). Dropping it ends the task.
pub struct Listener {
    app_id: String,
    advertised: Advertised,
    uris: SubscribedUris,
    /// Bumped whenever `uris` changed; the task re-opens for the newest version.
    wanted: watch::Sender<u64>,
    opened: watch::Receiver<Opened>,
    stop: CancellationToken,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Listener {
    /// Starts listening on `session` (a 2026-07-28 one) until `closing` fires or the listener
    /// is dropped; waits up to [`FIRST_OPEN_WAIT`] for the first stream to open.
    pub async fn start(
        app_id: &str,
        session: &Session,
        uris: SubscribedUris,
        closing: &CancellationToken,
        open_timeout: Duration,
        tasks: &Tasks,
    ) -> Listener {
        let capabilities = session.server_info().get("capabilities").cloned().unwrap_or(Value::Null);
        let advertised = Advertised::from_capabilities(&capabilities);
        let (wanted, wanted_rx) = watch::channel(0u64);
        let (opened_tx, mut opened) = watch::channel(Opened::default());
        let stop = closing.child_token();
        let task = Task {
            app_id: app_id.to_string(),
            peer: session.peer().clone(),
            notifier: session.notifier(),
            advertised,
            uris: uris.clone(),
            wanted: wanted_rx,
            opened: opened_tx,
            stop: stop.clone(),
            open_timeout,
            started: Instant::now(),
        };
        tasks.spawn("listening to an app", task.run());
        let _ = tokio::time::timeout(FIRST_OPEN_WAIT, opened.changed()).await;
        Listener { app_id: app_id.to_string(), advertised, uris, wanted, opened, stop }
    }

    /// Adds (`subscribe`) or removes a resource URI and waits (up to `timeout`) until the stream
    /// reflects it. A subscription the app does not acknowledge is withdrawn again.
    pub async fn set_subscribed(&self, uri: &str, subscribe: bool, timeout: Duration) -> Result<(), SubscribeError> {
        if !self.advertised.resource_subscriptions {
            return Err(SubscribeError::Unsupported);
        }
        let changed = {
            let mut uris = self.uris.lock();
            if subscribe {
                uris.insert(uri.to_string())
            } else {
                uris.remove(uri)
            }
        };
        let version = if changed {
            let mut version = 0;
            self.wanted.send_modify(|v| {
                *v += 1;
                version = *v;
            });
            version
        } else {
            *self.wanted.borrow()
        };
        let mut opened = self.opened.clone();
        let outcome = tokio::time::timeout(timeout, opened.wait_for(|o| o.version >= version)).await;
        let outcome = match outcome {
            Ok(Ok(o)) => (*o).clone(),
            Ok(Err(_)) => Opened { error: Some("the app's session ended".into()), ..Opened::default() },
            Err(_) => Opened { error: Some(format!("the app did not acknowledge it within {timeout:?}")), ..Opened::default() },
        };
        if !subscribe {
            // Whatever happened, the URI is no longer asked for.
            return Ok(());
        }
        let accepted = outcome
            .acknowledged
            .as_ref()
            .and_then(|a| a.resource_subscriptions.as_ref())
            .is_some_and(|uris| uris.iter().any(|u| u == uri));
        if accepted {
            return Ok(());
        }
        self.uris.lock().remove(uri);
        tracing::debug!(app = %self.app_id, "subscription to {uri} not acknowledged: {outcome:?}");
        Err(match outcome.error {
            Some(e) => SubscribeError::Failed(e),
            None => SubscribeError::NotAccepted(uri.to_string()),
        })
    }
}

/// How an attempt to open a stream went.
enum Open {
    Opened(Box<Subscription>),
    /// Stop was asked for meanwhile.
    Stopped,
    /// The app answered the request with an error: asking again will not help.
    Refused(String),
    /// Worth retrying (timeout, transport trouble).
    Failed(String),
}

struct Task {
    app_id: String,
    peer: Peer<RoleClient>,
    notifier: Notifier,
    advertised: Advertised,
    uris: SubscribedUris,
    wanted: watch::Receiver<u64>,
    opened: watch::Sender<Opened>,
    stop: CancellationToken,
    open_timeout: Duration,
    started: Instant,
}

impl Task {
    async fn run(mut self) {
        let mut current = None;
        self.listen(&mut current).await;
        if let Some((subscription, _)) = current {
            end_with_session(subscription).await;
        }
    }

    /// Keeps the streams open until stop (or the session's end); leaves the open one in `current`.
    async fn listen(&mut self, current: &mut Option<(Subscription, Instant)>) {
        // Re-open (with the newest filter) before waiting for anything else.
        let mut reopen = true;
        // The previous stream ended by itself: refresh what it covered once a new one is open.
        let mut lapsed: Option<SubscriptionFilter> = None;
        let mut quick_ends = 0u32;
        let mut attempts = 0u32;
        let mut opened_once = false;
        loop {
            if reopen {
                reopen = false;
                let version = *self.wanted.borrow_and_update();
                let filter = self.advertised.filter(&self.uris.lock());
                let Some(filter) = filter else {
                    if let Some((mut old, _)) = current.take() {
                        let _ = old.cancel().await;
                    }
                    self.publish(version, Some(SubscriptionFilter::default()), None);
                    continue;
                };
                if current.as_ref().is_some_and(|(s, _)| s.acknowledged() == &filter) {
                    self.publish(version, Some(filter), None);
                    continue;
                }
                attempts += 1;
                match self.open(filter).await {
                    Open::Opened(subscription) => {
                        // The new stream is acknowledged: only now does the old one go.
                        if let Some((mut old, _)) = current.take() {
                            let _ = old.cancel().await;
                        }
                        let acknowledged = subscription.acknowledged().clone();
                        tracing::debug!(app = %self.app_id, "subscriptions/listen open: {acknowledged:?}");
                        // A first stream that opened only after the session's start stopped
                        // waiting for it may have missed changes around the enumeration.
                        let late = !opened_once && (attempts > 1 || self.started.elapsed() >= FIRST_OPEN_WAIT);
                        opened_once = true;
                        if let Some(covered) = lapsed.take().or_else(|| late.then(|| acknowledged.clone())) {
                            self.resync(&covered, &acknowledged);
                        }
                        self.publish(version, Some(acknowledged), None);
                        *current = Some((*subscription, Instant::now()));
                    }
                    Open::Stopped => return,
                    Open::Refused(e) => {
                        tracing::warn!(
                            app = %self.app_id,
                            "McpApp '{}' refused subscriptions/listen: {e}; its list changes will not be seen",
                            self.app_id
                        );
                        self.publish(version, current.as_ref().map(|(s, _)| s.acknowledged().clone()), Some(e));
                    }
                    Open::Failed(e) => {
                        if self.session_gone() {
                            return;
                        }
                        tracing::debug!(app = %self.app_id, "subscriptions/listen did not open: {e}");
                        self.publish(version, current.as_ref().map(|(s, _)| s.acknowledged().clone()), Some(e));
                        quick_ends += 1;
                        if !self.pause(quick_ends).await {
                            return;
                        }
                        reopen = true;
                    }
                }
                continue;
            }
            tokio::select! {
                _ = self.stop.cancelled() => return,
                changed = self.wanted.changed() => match changed {
                    Ok(()) => reopen = true,
                    Err(_) => return,
                },
                next = next_of(current) => match next {
                    Ok(Some(notification)) => {
                        let (notification, seq) = Notifier::detach(notification);
                        self.notifier.deliver(notification, seq).await;
                    }
                    ended => {
                        let Some((subscription, since)) = current.take() else { continue };
                        if self.session_gone() {
                            return;
                        }
                        let end = subscription.end().cloned();
                        let why = match (&ended, &end) {
                            (Err(e), _) => e.to_string(),
                            (_, Some(end)) => format!("{end:?}"),
                            _ => "ended".to_string(),
                        };
                        tracing::debug!(app = %self.app_id, "subscriptions/listen stream ended ({why}); re-opening");
                        lapsed = Some(subscription.acknowledged().clone());
                        drop(subscription);
                        let lagged = matches!(end, Some(SubscriptionEnd::Lagged { .. }));
                        quick_ends = if since.elapsed() >= RETRY_RESET || lagged { 0 } else { quick_ends + 1 };
                        if quick_ends > 0 && !self.pause(quick_ends).await {
                            return;
                        }
                        reopen = true;
                    }
                },
            }
        }
    }

    /// Sends `subscriptions/listen` and waits for its acknowledgment (bounded by the request
    /// timeout, and by stop).
    async fn open(&self, filter: SubscriptionFilter) -> Open {
        let listen = tokio::time::timeout(self.open_timeout, self.peer.listen(filter));
        tokio::select! {
            _ = self.stop.cancelled() => Open::Stopped,
            outcome = listen => match outcome {
                Ok(Ok(subscription)) => Open::Opened(Box::new(subscription)),
                Ok(Err(ServiceError::McpError(e))) => Open::Refused(format!("{} (code {})", e.message, e.code.0)),
                Ok(Err(e)) => Open::Failed(e.to_string()),
                Err(_) => Open::Failed(format!("no acknowledgment within {:?}", self.open_timeout)),
            },
        }
    }

    /// Waits before the next attempt; `false` when stop came first. A change of the wanted URIs
    /// cuts the wait short.
    async fn pause(&mut self, attempts: u32) -> bool {
        let delay = (RETRY_BASE * 2u32.saturating_pow(attempts.saturating_sub(1))).min(RETRY_MAX);
        tokio::select! {
            _ = self.stop.cancelled() => false,
            _ = tokio::time::sleep(delay) => true,
            changed = self.wanted.changed() => changed.is_ok(),
        }
    }

    /// The session is over (or being stopped): nothing to re-open, nothing to say.
    fn session_gone(&self) -> bool {
        self.stop.is_cancelled() || self.peer.is_transport_closed()
    }

    /// Lists the lapsed stream covered and the new one covers again may have changed unheard.
    fn resync(&self, covered: &SubscriptionFilter, now: &SubscriptionFilter) {
        let both = |a: Option<bool>, b: Option<bool>| a == Some(true) && b == Some(true);
        if both(covered.tools_list_changed, now.tools_list_changed) {
            self.notifier.signal(UpstreamSignal::ToolsChanged);
        }
        if both(covered.prompts_list_changed, now.prompts_list_changed) {
            self.notifier.signal(UpstreamSignal::PromptsChanged);
        }
        if both(covered.resources_list_changed, now.resources_list_changed) {
            self.notifier.signal(UpstreamSignal::ResourcesChanged);
        }
    }

    fn publish(&self, version: u64, acknowledged: Option<SubscriptionFilter>, error: Option<String>) {
        self.opened.send_replace(Opened { version, acknowledged, error });
    }
}

/// A stream open when the session closes ends with the session instead of being cancelled:
/// a cancel sent while the session shuts down races the app's last answer to it, which then
/// reaches a request nobody waits for (rmcp warns "Error sending response"). Bounded, in case
/// the session outlives the listener.
async fn end_with_session(mut subscription: Subscription) {
    let drained = async { while let Ok(Some(_)) = subscription.next().await {} };
    let _ = tokio::time::timeout(END_WITH_SESSION_WAIT, drained).await;
}

/// The next notification of the current stream; never resolves without one.
async fn next_of(current: &mut Option<(Subscription, Instant)>) -> Result<Option<rmcp::model::ServerNotification>, ServiceError> {
    match current.as_mut() {
        Some((subscription, _)) => subscription.next().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_filter_asks_only_for_what_the_app_advertises() {
        let caps = json!({
            "tools": { "listChanged": true },
            "prompts": {},
            "resources": { "listChanged": false, "subscribe": true },
        });
        let advertised = Advertised::from_capabilities(&caps);
        assert_eq!(
            advertised,
            Advertised { tools_list_changed: true, prompts_list_changed: false, resources_list_changed: false, resource_subscriptions: true }
        );
        let none = BTreeSet::new();
        assert_eq!(advertised.filter(&none), Some(SubscriptionFilter::builder().tools_list_changed().build()));
        let uris: BTreeSet<String> = ["test://a".to_string(), "test://b".to_string()].into();
        assert_eq!(
            advertised.filter(&uris),
            Some(SubscriptionFilter::builder().tools_list_changed().resource_subscriptions(["test://a", "test://b"]).build())
        );
    }

    #[test]
    fn nothing_advertised_means_no_stream() {
        let advertised = Advertised::from_capabilities(&json!({ "tools": {}, "resources": {} }));
        assert_eq!(advertised.filter(&BTreeSet::new()), None);
        // URIs without `resources.subscribe` are not asked for either.
        let uris: BTreeSet<String> = ["test://a".to_string()].into();
        assert_eq!(advertised.filter(&uris), None);
        assert_eq!(Advertised::from_capabilities(&Value::Null), Advertised::default());
    }
}
