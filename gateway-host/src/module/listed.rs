//! When a view of the module kept on the host's side was last listed, counted in module events.

use std::future::Future;

/// When a view of the module kept on the host's side (the tool registry, `/mcp`'s multiplexer)
/// was last listed, in app changes heard (`heard`: [`super::host::ModuleHost::app_changes_heard`]).
///
/// A lookup that misses lists again only if the host has heard of a change since: the module
/// changes its state before it reports the change, so a listing begun after `n` changes were
/// heard reflects them all, and a miss with nothing heard since is a name that is not there.
/// An app that has just come up is still found before the debounced refresh lands, and a
/// client naming tools that do not exist costs a lookup, not a listing of every app's tools
/// (it cost 88 ms of CPU per call with 10,000 tools). Listings run one at a time, so an older
/// one never overwrites a newer.
#[derive(Default)]
pub struct Listed {
    /// Events heard when the last listing that succeeded began; `None` before the first.
    after: tokio::sync::Mutex<Option<u64>>,
}

impl Listed {
    /// Runs `list` (once any listing under way has ended); it says whether it listed.
    pub async fn again<F: Future<Output = bool>>(&self, heard: impl FnOnce() -> u64, list: impl FnOnce() -> F) {
        let mut after = self.after.lock().await;
        let heard = heard();
        if list().await {
            *after = Some(heard);
        }
    }

    /// [`Listed::again`] if the host has heard of an app change since the last listing began,
    /// or nothing was listed yet; else nothing (a listing under way is waited for).
    pub async fn if_heard_since<F: Future<Output = bool>>(&self, heard: impl FnOnce() -> u64, list: impl FnOnce() -> F) {
        let mut after = self.after.lock().await;
        let heard = heard();
        if after.is_some_and(|listed| listed >= heard) {
            return;
        }
        if list().await {
            *after = Some(heard);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[tokio::test]
    async fn a_miss_lists_again_only_after_news_and_a_failed_listing_does_not_count() {
        let (listed, heard, listings) = (Listed::default(), Cell::new(0u64), Cell::new(0));
        let list = |ok: bool| {
            listings.set(listings.get() + 1);
            async move { ok }
        };
        // Nothing listed yet: a miss lists.
        listed.if_heard_since(|| heard.get(), || list(true)).await;
        assert_eq!(listings.get(), 1);
        // Nothing heard since: misses list nothing, however many.
        for _ in 0..3 {
            listed.if_heard_since(|| heard.get(), || list(true)).await;
        }
        assert_eq!(listings.get(), 1);
        // An event heard: the next miss lists, the one after it does not.
        heard.set(1);
        listed.if_heard_since(|| heard.get(), || list(true)).await;
        listed.if_heard_since(|| heard.get(), || list(true)).await;
        assert_eq!(listings.get(), 2);
        // A refresh always lists; a listing that failed leaves the next miss to try again.
        heard.set(2);
        listed.again(|| heard.get(), || list(false)).await;
        listed.if_heard_since(|| heard.get(), || list(true)).await;
        listed.if_heard_since(|| heard.get(), || list(true)).await;
        assert_eq!(listings.get(), 4);
    }
}
