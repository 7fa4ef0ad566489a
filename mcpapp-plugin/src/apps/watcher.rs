//! Reload on manifest changes (SPEC R21): a file watcher on the discovery paths, debounced, that
//! triggers the same reload an admin call does.

use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

use notify::{RecursiveMode, Watcher as _};
use parking_lot::{Mutex, RwLock};
use tokio::sync::{mpsc, oneshot};

use crate::runtime::executor::Tasks;
use crate::apps::manifest::MANIFEST_FILE_NAME;

/// Quiet period after the last change before reloading: editors write files in several steps.
pub const DEBOUNCE: Duration = Duration::from_millis(500);

/// Keeps the OS watcher alive; dropping it stops watching.
pub struct ManifestWatcher {
    _watcher: Arc<Mutex<notify::RecommendedWatcher>>,
    follow: Follow,
}

/// Where new discovery paths are sent to the watching task.
pub type Follow = mpsc::UnboundedSender<(Vec<PathBuf>, oneshot::Sender<()>)>;

impl ManifestWatcher {
    /// Points the watcher at other discovery paths: see [`follow`].
    pub fn follower(&self) -> Follow {
        self.follow.clone()
    }
}

/// Watches `paths` from now on instead of the ones given before (see [`Paths::follow`]); resolves
/// once the watches are set, so that a scan started after it misses no change in between.
pub async fn follow(follower: &Follow, paths: Vec<PathBuf>) {
    let (done, set) = oneshot::channel();
    if follower.send((paths, done)).is_ok() {
        let _ = set.await;
    }
}

/// Whether a file-system event may change what discovery finds: a manifest written, created or
/// removed, or a folder created or removed (which may hold or have held manifests).
fn is_relevant(event: &notify::Event) -> bool {
    use notify::EventKind;
    let touches_manifest =
        event.paths.iter().any(|p| p.file_name().is_some_and(|n| n == MANIFEST_FILE_NAME));
    match event.kind {
        EventKind::Access(_) => false,
        EventKind::Create(_) | EventKind::Remove(_) => true,
        EventKind::Modify(notify::event::ModifyKind::Name(_)) => true,
        _ => touches_manifest,
    }
}

/// The discovery paths and how each is watched. A path that does not exist yet is waited for:
/// its nearest existing ancestor is watched (that folder only), and once the path appears it is
/// watched like the others and the apps in it are discovered — a gateway started before its apps
/// folder was made finds the apps put there without a restart.
#[derive(Default, Clone)]
struct Paths {
    watched: Vec<PathBuf>,
    waiting: Vec<PathBuf>,
    /// Ancestors watched (non-recursively) for the waiting paths.
    ancestors: Vec<PathBuf>,
}

impl Paths {
    /// Whether `event` concerns discovery: a relevant change inside a watched path, or any
    /// change on the way to a waiting one (the folder it waits for, or one of its parents,
    /// appearing). Changes next to a waiting path in its ancestor are not.
    fn concerns(&self, event: &notify::Event) -> bool {
        if matches!(event.kind, notify::EventKind::Access(_)) {
            return false;
        }
        let inside = |p: &PathBuf| self.watched.iter().any(|w| p.starts_with(w));
        let on_the_way = |p: &PathBuf| self.waiting.iter().any(|w| w.starts_with(p));
        event.paths.iter().any(|p| (inside(p) && is_relevant(event)) || on_the_way(p))
    }

    /// Watches the paths that exist and were not watched yet, and the nearest existing ancestor
    /// of each that does not. Returns whether a waited-for path appeared.
    fn update(&mut self, watcher: &mut notify::RecommendedWatcher) -> bool {
        let mut appeared = false;
        let mut still_waiting = Vec::new();
        for path in std::mem::take(&mut self.waiting) {
            if path.is_dir() {
                match watcher.watch(&path, RecursiveMode::Recursive) {
                    Ok(()) => {
                        if !self.ancestors.is_empty() {
                            tracing::info!("Watching {} for manifest changes (the folder now exists)", path.display());
                        }
                        self.watched.push(path);
                        appeared = true;
                        continue;
                    }
                    Err(e) => tracing::warn!("cannot watch {} for manifest changes: {e}", path.display()),
                }
            }
            if let Some(ancestor) = path.ancestors().skip(1).find(|a| a.is_dir()) {
                let ancestor = ancestor.to_path_buf();
                // Inside a watched path, the recursive watch sees it appear already (and a second
                // watch on that folder would replace the recursive one).
                let covered = self.watched.iter().any(|w| ancestor.starts_with(w));
                if !covered && !self.ancestors.contains(&ancestor) {
                    match watcher.watch(&ancestor, RecursiveMode::NonRecursive) {
                        Ok(()) => self.ancestors.push(ancestor),
                        Err(e) => tracing::debug!("cannot watch {} for {} to appear: {e}", ancestor.display(), path.display()),
                    }
                }
            }
            still_waiting.push(path);
        }
        self.waiting = still_waiting;
        appeared
    }

    /// Follows a new list of discovery paths (the configuration was re-read): stops watching the
    /// paths no longer listed and the ancestors, then watches or waits for the new ones.
    fn follow(&mut self, paths: Vec<PathBuf>, watcher: &mut notify::RecommendedWatcher) {
        let paths: Vec<PathBuf> = paths.iter().map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone())).collect();
        for ancestor in std::mem::take(&mut self.ancestors) {
            let _ = watcher.unwatch(&ancestor);
        }
        let (kept, dropped): (Vec<PathBuf>, Vec<PathBuf>) = std::mem::take(&mut self.watched).into_iter().partition(|w| paths.contains(w));
        for path in dropped {
            let _ = watcher.unwatch(&path);
        }
        self.waiting = paths.into_iter().filter(|p| !kept.contains(p)).collect();
        self.watched = kept;
        self.update(watcher);
    }
}

/// Watches `paths` (waiting for those that do not exist yet, see [`Paths`]) and calls `reload`
/// after each debounced burst of changes.
pub fn watch<F, Fut>(paths: &[PathBuf], tasks: &Tasks, reload: F) -> Option<ManifestWatcher>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, mut rx) = mpsc::unbounded_channel::<()>();
    // What the event callback filters with: a copy, published after each update. The callback
    // runs on the OS watcher's thread, which a `watch` call waits for — so no lock the callback
    // takes is ever held across one.
    let filter = Arc::new(RwLock::new(Paths::default()));
    let seen = filter.clone();
    let watcher = match notify::recommended_watcher(move |res: notify::Result<notify::Event>| match res {
        Ok(event) if seen.read().concerns(&event) => {
            let _ = tx.send(());
        }
        Ok(_) => {}
        Err(e) => tracing::warn!("manifest watcher error: {e}"),
    }) {
        Ok(w) => Arc::new(Mutex::new(w)),
        Err(e) => {
            tracing::warn!("cannot watch discovery paths for manifest changes: {e}");
            return None;
        }
    };
    let waiting = paths.iter().map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone())).collect();
    let mut paths = Paths { waiting, ..Paths::default() };
    paths.update(&mut watcher.lock());
    *filter.write() = paths.clone();
    // The task keeps the watcher only while the instance does: dropping the ManifestWatcher ends
    // the watching, its event callback (and so `tx`) with it, and this task.
    let weak: Weak<Mutex<notify::RecommendedWatcher>> = Arc::downgrade(&watcher);
    let reload = Arc::new(reload);
    let (follow, mut new_paths) = mpsc::unbounded_channel::<(Vec<PathBuf>, oneshot::Sender<()>)>();
    tasks.spawn("watching manifests", async move {
        loop {
            tokio::select! {
                changed = rx.recv() => {
                    if changed.is_none() {
                        return;
                    }
                }
                listed = new_paths.recv() => {
                    let (Some((listed, done)), Some(watcher)) = (listed, weak.upgrade()) else { return };
                    tokio::task::block_in_place(|| paths.follow(listed, &mut watcher.lock()));
                    *filter.write() = paths.clone();
                    let _ = done.send(());
                    continue;
                }
            }
            // Debounce: wait until the changes stop for DEBOUNCE.
            loop {
                match tokio::time::timeout(DEBOUNCE, rx.recv()).await {
                    Ok(Some(())) => continue,
                    Ok(None) => return,
                    Err(_) => break,
                }
            }
            let Some(watcher) = weak.upgrade() else { return };
            // Watching a folder that appeared walks it: off the runtime's workers.
            let appeared = tokio::task::block_in_place(|| paths.update(&mut watcher.lock()));
            drop(watcher);
            *filter.write() = paths.clone();
            // A change on the way to a folder that is still missing changes nothing found.
            if appeared || !paths.watched.is_empty() {
                tracing::info!("Manifest change detected; reloading MCP Apps");
                reload().await;
            }
        }
    });
    Some(ManifestWatcher { _watcher: watcher, follow })
}
