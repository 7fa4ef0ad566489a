//! Reload on manifest changes (SPEC R21): a file watcher on the discovery paths, debounced, that
//! triggers the same reload an admin call does.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher as _};
use tokio::sync::mpsc;

use crate::abi::runtime::Tasks;
use crate::apps::manifest::MANIFEST_FILE_NAME;

/// Quiet period after the last change before reloading: editors write files in several steps.
pub const DEBOUNCE: Duration = Duration::from_millis(500);

/// Keeps the OS watcher alive; dropping it stops watching.
pub struct ManifestWatcher {
    _watcher: notify::RecommendedWatcher,
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

/// Watches `paths` (those that exist) and calls `reload` after each debounced burst of changes.
pub fn watch<F, Fut>(paths: &[PathBuf], tasks: &Tasks, reload: F) -> Option<ManifestWatcher>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, mut rx) = mpsc::unbounded_channel::<()>();
    let mut watcher = match notify::recommended_watcher(move |res: notify::Result<notify::Event>| match res {
        Ok(event) if is_relevant(&event) => {
            let _ = tx.send(());
        }
        Ok(_) => {}
        Err(e) => tracing::warn!("manifest watcher error: {e}"),
    }) {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!("cannot watch discovery paths for manifest changes: {e}");
            return None;
        }
    };
    let mut watching = 0;
    for path in paths {
        if !path.exists() {
            continue;
        }
        match watcher.watch(path, RecursiveMode::Recursive) {
            Ok(()) => watching += 1,
            Err(e) => tracing::warn!("cannot watch {} for manifest changes: {e}", path.display()),
        }
    }
    if watching == 0 {
        return None;
    }
    let reload = Arc::new(reload);
    tasks.spawn("watching manifests", async move {
        while rx.recv().await.is_some() {
            // Debounce: wait until the changes stop for DEBOUNCE.
            loop {
                match tokio::time::timeout(DEBOUNCE, rx.recv()).await {
                    Ok(Some(())) => continue,
                    Ok(None) => return,
                    Err(_) => break,
                }
            }
            tracing::info!("Manifest change detected; reloading MCP Apps");
            reload().await;
        }
    });
    Some(ManifestWatcher { _watcher: watcher })
}
