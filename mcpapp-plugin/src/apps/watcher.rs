//! Reload on manifest changes (SPEC R21): a file watcher on the discovery paths, debounced, that
//! triggers the same reload an admin call does.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use notify::{RecursiveMode, Watcher as _};
use parking_lot::{Mutex, RwLock};
use tokio::sync::{mpsc, oneshot};

use crate::runtime::executor::Tasks;
use crate::apps::discovery::{is_skipped_name, VENV_MARKER};
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
/// removed, a folder created or removed (which may hold or have held manifests), or something
/// renamed. Other files coming and going do not: an app's own data (a SQLite journal made and
/// removed with every write), a `pip install` or `npm install` into an app's folder, would
/// otherwise reload every half second while they last.
fn is_relevant(event: &notify::Event) -> bool {
    use notify::event::{CreateKind, ModifyKind, RemoveKind};
    use notify::EventKind;
    let touches_manifest =
        event.paths.iter().any(|p| p.file_name().is_some_and(|n| n == MANIFEST_FILE_NAME));
    match event.kind {
        EventKind::Access(_) => false,
        _ if touches_manifest => true,
        EventKind::Create(CreateKind::File) | EventKind::Remove(RemoveKind::File) => false,
        EventKind::Create(_) | EventKind::Remove(_) => true,
        EventKind::Modify(ModifyKind::Name(_)) => true,
        _ => false,
    }
}

/// Whether `path`, inside the watched folder `root`, lies in (or is) a folder discovery does not
/// descend into (`discovery::is_skipped_name`, a Python virtual environment below the root):
/// nothing that happens there changes what it finds.
fn in_skipped_folder(root: &Path, path: &Path) -> bool {
    let Ok(relative) = path.strip_prefix(root) else { return false };
    let mut folder = root.to_path_buf();
    let mut components = relative.components().peekable();
    while let Some(component) = components.next() {
        if is_skipped_name(component.as_os_str()) {
            return true;
        }
        folder.push(component);
        // The last component is the event's own file or folder: a folder that was just made
        // holds no marker yet, and the marker itself appearing is no manifest change.
        if components.peek().is_some() && folder.join(VENV_MARKER).is_file() {
            return true;
        }
    }
    false
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
        // The kind first: it rules out most events (a flood of files an install writes) without
        // the file-system checks of `in_skipped_folder`.
        let relevant = is_relevant(event);
        let inside = |p: &PathBuf| self.watched.iter().any(|w| p.starts_with(w) && !in_skipped_folder(w, p));
        let on_the_way = |p: &PathBuf| self.waiting.iter().any(|w| w.starts_with(p));
        event.paths.iter().any(|p| (relevant && inside(p)) || on_the_way(p))
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

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{CreateKind, DataChange, ModifyKind, RemoveKind, RenameMode};
    use notify::{Event, EventKind};

    fn event(kind: EventKind, path: &Path) -> Event {
        Event::new(kind).add_path(path.to_path_buf())
    }

    /// What changes what discovery finds reloads; an app's own files, and whatever happens in
    /// folders discovery does not descend into, do not.
    #[test]
    fn only_changes_discovery_can_see_concern_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("apps");
        let app = root.join("grocery");
        let venv = app.join(".venv");
        std::fs::create_dir_all(venv.join("lib")).unwrap();
        std::fs::write(venv.join(VENV_MARKER), "home = /usr/bin\n").unwrap();
        let paths = Paths { watched: vec![root.clone()], ..Paths::default() };
        let concerns = |kind: EventKind, path: &Path| paths.concerns(&event(kind, path));
        let manifest = app.join(MANIFEST_FILE_NAME);

        // A manifest, however it changes.
        assert!(concerns(EventKind::Create(CreateKind::File), &manifest));
        assert!(concerns(EventKind::Modify(ModifyKind::Data(DataChange::Any)), &manifest));
        assert!(concerns(EventKind::Remove(RemoveKind::File), &manifest));
        // Folders coming and going, renames, and events of an unknown kind.
        assert!(concerns(EventKind::Create(CreateKind::Folder), &root.join("new-app")));
        assert!(concerns(EventKind::Remove(RemoveKind::Folder), &app));
        assert!(concerns(EventKind::Modify(ModifyKind::Name(RenameMode::Any)), &app.join("x")));
        assert!(concerns(EventKind::Create(CreateKind::Any), &app.join("x")));
        // An app's own files: its data, a journal made and removed with every write.
        assert!(!concerns(EventKind::Create(CreateKind::File), &app.join("data.db-journal")));
        assert!(!concerns(EventKind::Remove(RemoveKind::File), &app.join("data.db-journal")));
        assert!(!concerns(EventKind::Modify(ModifyKind::Data(DataChange::Any)), &app.join("data.db")));
        assert!(!concerns(EventKind::Access(notify::event::AccessKind::Any), &manifest));
        // Inside a virtual environment, `node_modules`, `.git`, `__pycache__`: nothing, manifests
        // and folders included (discovery does not look there).
        assert!(!concerns(EventKind::Create(CreateKind::Folder), &venv.join("lib/site-packages")));
        assert!(!concerns(EventKind::Create(CreateKind::File), &venv.join("lib").join(MANIFEST_FILE_NAME)));
        assert!(!concerns(EventKind::Create(CreateKind::Folder), &app.join("node_modules")));
        assert!(!concerns(EventKind::Create(CreateKind::Folder), &app.join("node_modules/pkg")));
        assert!(!concerns(EventKind::Create(CreateKind::File), &app.join("node_modules/pkg").join(MANIFEST_FILE_NAME)));
        assert!(!concerns(EventKind::Create(CreateKind::Folder), &app.join("__pycache__")));
        // The virtual environment's own folder appearing is a folder like any other (its marker
        // is not there yet); the root itself is never skipped.
        assert!(concerns(EventKind::Create(CreateKind::Folder), &venv));
        let rooted = Paths { watched: vec![venv.clone()], ..Paths::default() };
        assert!(rooted.concerns(&event(EventKind::Create(CreateKind::File), &venv.join(MANIFEST_FILE_NAME))));
        // Outside the watched folders: nothing.
        assert!(!concerns(EventKind::Create(CreateKind::File), &dir.path().join(MANIFEST_FILE_NAME)));
    }
}
