//! The browser host page (SPEC R38): `GET /apps/` and its assets, the redirects to it, and
//! `GET /apps/events`, the stream that keeps the page's app list current.
//!
//! The page's files are built into the binary (`web/dist`, embedded at compile time), so the
//! gateway is one file to deploy and a page always matches the gateway that serves it; they are
//! sent with `Cache-Control: no-cache` so a browser revalidates and picks up a new build.
//!
//! The page and its assets hold no data: they are served without credentials even when the
//! gateway requires them (see `auth::is_public`), and the page itself asks for the token (and
//! trades it for a session cookie at `POST /auth/session`) when `/apps/health` answers 401.
//! Everything the page shows comes from routes that do need credentials.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use futures::Stream;
use serde_json::json;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::broadcast::Receiver;

use super::GatewayState;
use crate::module::host::HostEvent;

const INDEX_HTML: &[u8] = include_bytes!("../../web/dist/index.html");
const HOST_JS: &[u8] = include_bytes!("../../web/dist/host.js");
const HOST_CSS: &[u8] = include_bytes!("../../web/dist/host.css");
const THEME_JS: &[u8] = include_bytes!("../../web/dist/theme.js");

/// How long `/apps/events` waits after a module event before re-sending the list, so that a
/// burst (a reload starting every app) becomes one message.
const COALESCE: Duration = Duration::from_millis(100);

/// `GET /` and `GET /apps` → `308 /apps/` (the page's relative asset URLs need the slash).
pub async fn to_page() -> Redirect {
    Redirect::permanent("/apps/")
}

/// `GET /apps/`: the host page. Its CSP allows only its own scripts, styles and connections,
/// and frames only from the sandbox origin — the same origin `/apps/health` reports, computed
/// by the same function for this request's `Host`.
pub async fn page(State(state): State<Arc<GatewayState>>, headers: HeaderMap) -> Response {
    let mut response = asset_response(INDEX_HTML, "text/html; charset=utf-8");
    let csp = page_csp(state.sandbox.origin(&headers).as_deref());
    if let Ok(value) = HeaderValue::from_str(&csp) {
        response.headers_mut().insert(header::CONTENT_SECURITY_POLICY, value);
    }
    response
}

/// The host page's Content-Security-Policy. `frame-src 'none'` when there is no sandbox.
/// `frame-ancestors 'none'`: nobody may frame the page (clickjacking); `form-action 'self'`: the
/// sign-in form posts to the gateway only.
pub fn page_csp(sandbox_origin: Option<&str>) -> String {
    format!(
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; \
         frame-src {}; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
        sandbox_origin.unwrap_or("'none'")
    )
}

/// `GET /apps/assets/{name}`: `host.js`, `host.css` and `theme.js`; any other name is 404.
pub async fn asset(Path(name): Path<String>) -> Response {
    match name.as_str() {
        "host.js" => asset_response(HOST_JS, "text/javascript; charset=utf-8"),
        "host.css" => asset_response(HOST_CSS, "text/css; charset=utf-8"),
        "theme.js" => asset_response(THEME_JS, "text/javascript; charset=utf-8"),
        _ => (StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "not found\n").into_response(),
    }
}

fn asset_response(body: &'static [u8], content_type: &'static str) -> Response {
    let mut response = body.into_response();
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}

/// `GET /apps/events`: Server-Sent Events, one `apps` event (`{"apps": […]}`, the entries of
/// `/apps/health`) at connect and again after module events (state changes, tool-list changes,
/// app notifications), coalesced over [`COALESCE`] and sent only when the list differs from the
/// last one sent. A lagging subscriber simply re-sends. Keep-alive comments hold proxies open;
/// the stream ends when the gateway shuts down so it never delays a graceful stop.
pub async fn events(
    State(state): State<Arc<GatewayState>>,
    headers: HeaderMap,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    // Subscribe before the first listing so no change between the two is missed.
    let feed = Feed { events: state.module.subscribe(), state, headers, last: None, seen: FRESH };
    Sse::new(futures::stream::unfold(feed, Feed::next)).keep_alive(KeepAlive::default())
}

/// A stream's first listing is its own (nothing it could share says more than now).
const FRESH: u64 = u64::MAX;

/// One module listing for the `/apps/events` streams that a burst of module events wakes: every
/// open stream wakes after the same burst, and each listing the apps itself made the work of a
/// burst grow with the streams open (a listing crosses into the module and copies every app).
pub struct SharedListing<T> {
    /// The last listing and how many events the host had heard when it was taken.
    last: tokio::sync::Mutex<Option<(u64, Arc<T>)>>,
}

impl<T> Default for SharedListing<T> {
    fn default() -> Self {
        SharedListing { last: tokio::sync::Mutex::new(None) }
    }
}

impl<T> SharedListing<T> {
    /// A listing that reflects every event up to `seen`: the last one, if it was taken after the
    /// host had heard them, or a new one — taken once for the callers waiting meanwhile. `heard`
    /// says how many events the host has heard; it is read just before listing.
    pub async fn at_least<E, Fut>(&self, seen: u64, heard: impl FnOnce() -> u64, list: impl FnOnce() -> Fut) -> Result<Arc<T>, E>
    where
        Fut: std::future::Future<Output = Result<T, E>>,
    {
        let mut last = self.last.lock().await;
        if let Some((taken_after, listing)) = last.as_ref() {
            if seen != FRESH && *taken_after >= seen {
                return Ok(listing.clone());
            }
        }
        let taken_after = heard();
        let listing = Arc::new(list().await?);
        *last = Some((taken_after, listing.clone()));
        Ok(listing)
    }
}

/// The state of one `/apps/events` stream.
struct Feed {
    state: Arc<GatewayState>,
    /// The request's headers: its `Host` decides the absolute `mcp` URLs, as for `/apps/health`.
    headers: HeaderMap,
    events: Receiver<HostEvent>,
    /// The data of the last event sent (`None` before the first).
    last: Option<String>,
    /// The newest module event (its `seq`) the next listing must reflect; [`FRESH`] for the first.
    seen: u64,
}

impl Feed {
    async fn next(mut self) -> Option<(Result<Event, Infallible>, Feed)> {
        let shutdown = self.state.shutdown.clone();
        loop {
            if self.last.is_some() {
                tokio::select! {
                    _ = shutdown.cancelled() => return None,
                    received = self.events.recv() => match received {
                        Ok(event) => self.seen = self.seen.max(event.seq),
                        // Events were dropped: a listing from after now covers them.
                        Err(RecvError::Lagged(_)) => self.seen = self.state.module.events_heard(),
                        Err(RecvError::Closed) => return None,
                    }
                }
                tokio::select! {
                    _ = shutdown.cancelled() => return None,
                    _ = tokio::time::sleep(COALESCE) => {}
                }
                // Drain the burst.
                loop {
                    match self.events.try_recv() {
                        Ok(event) => self.seen = self.seen.max(event.seq),
                        Err(TryRecvError::Lagged(_)) => self.seen = self.state.module.events_heard(),
                        Err(_) => break,
                    }
                }
            }
            let module = &self.state.module;
            let listed = tokio::select! {
                _ = shutdown.cancelled() => return None,
                listed = self.state.app_listings.at_least(self.seen, || module.events_heard(), || module.list_apps()) => listed,
            };
            let apps = match listed {
                Ok(listed) => {
                    // What the next listing must reflect is what the next burst brings.
                    self.seen = 0;
                    super::health::listing_of(&self.state, &self.headers, &listed).apps
                }
                Err(e) => {
                    tracing::warn!("/apps/events: listing the apps failed ({e}); retrying on the next module event");
                    // Mark the stream as started so the next round waits for an event.
                    self.last.get_or_insert_with(String::new);
                    continue;
                }
            };
            let data = json!({ "apps": apps }).to_string();
            if self.last.as_deref() == Some(data.as_str()) {
                continue;
            }
            self.last = Some(data.clone());
            return Some((Ok(Event::default().event("apps").data(data)), self));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Streams woken by the same events share one listing; a stream that saw a newer event, or
    /// one that just connected, gets a listing taken after it.
    #[test]
    fn a_listing_is_shared_by_the_streams_whose_events_it_reflects() {
        let shared = SharedListing::<u64>::default();
        let listings = std::cell::Cell::new(0u64);
        let heard = std::cell::Cell::new(3u64);
        let list = || async {
            listings.set(listings.get() + 1);
            // Another task runs while this one lists (the module answers on its own time).
            tokio::task::yield_now().await;
            Ok::<u64, ()>(listings.get())
        };
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            // Three streams woken by events up to 3, at once: one listing.
            let (a, b, c) = tokio::join!(
                shared.at_least(3, || heard.get(), list),
                shared.at_least(2, || heard.get(), list),
                shared.at_least(3, || heard.get(), list),
            );
            assert_eq!((*a.unwrap(), *b.unwrap(), *c.unwrap(), listings.get()), (1, 1, 1, 1));
            // Event 4: a stream that saw it lists again; one that saw only older ones does not.
            heard.set(4);
            assert_eq!(*shared.at_least(4, || heard.get(), list).await.unwrap(), 2);
            assert_eq!(*shared.at_least(3, || heard.get(), list).await.unwrap(), 2);
            // A stream's first listing is always its own, and is shared afterwards.
            assert_eq!(*shared.at_least(FRESH, || heard.get(), list).await.unwrap(), 3);
            assert_eq!(*shared.at_least(4, || heard.get(), list).await.unwrap(), 3);
            // A failed listing is not kept.
            heard.set(5);
            assert!(shared.at_least(5, || heard.get(), || async { Err::<u64, ()>(()) }).await.is_err());
            assert_eq!(*shared.at_least(5, || heard.get(), list).await.unwrap(), 4);
        });
    }

    #[test]
    fn page_policy_frames_only_the_sandbox() {
        let csp = page_csp(Some("http://localhost:41000"));
        assert!(csp.contains("; frame-src http://localhost:41000;"), "{csp}");
        assert!(csp.starts_with("default-src 'self'; script-src 'self';"), "{csp}");
        assert!(csp.ends_with("frame-ancestors 'none'"), "{csp}");
        assert!(page_csp(None).contains("frame-src 'none';"));
    }
}
