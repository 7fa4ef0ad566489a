//! What this library keeps for the whole process rather than for one instance: the thread that
//! forks the apps (`spawner.rs`) and the allocator's background thread with the pages it
//! caches (`allocator.rs`).
//!
//! A library swapped out stays loaded (nothing is ever unloaded: BOUNDARY.md), so each live swap
//! used to leave both threads behind, with the old allocator's free pages (measured before:
//! +1 `mcpapp-spawner` and +1 `jemalloc_bg_thd` per swap). They are now let go when the last
//! instance of this library has shut down, and taken up again if an instance is created in it
//! once more (a swap back to a file already loaded). Several instances of one library live side
//! by side in tests and during a swap's overlap, and an app process may be started without one
//! (tests): each instance and each app process holds the library, and only the last hold's end
//! lets go.

use parking_lot::Mutex;

/// Holds on this library: instances alive (created, not yet shut down) and app processes alive.
static LIVE: Mutex<usize> = Mutex::new(0);

/// One hold on the library (see the module docs): an instance's, dropped when its runtime has
/// ended, or an app process's, dropped once its group is killed.
pub struct InUse(());

/// Takes a hold.
pub fn in_use() -> InUse {
    let mut live = LIVE.lock();
    if *live == 0 {
        // After a retirement: the allocator's thread again (nothing to do the first time, it
        // starts with the library). The spawner starts again at the next spawn by itself.
        #[cfg(not(fuzzing))]
        crate::runtime::allocator::resume();
    }
    *live += 1;
    InUse(())
}

impl Drop for InUse {
    /// The last one runs on an instance's shutdown thread after its runtime (and so its apps) has
    /// ended, or wherever a test drops its last app process.
    fn drop(&mut self) {
        let mut live = LIVE.lock();
        *live = live.saturating_sub(1);
        if *live == 0 {
            super::spawner::retire();
            #[cfg(not(fuzzing))]
            crate::runtime::allocator::retire();
        }
    }
}
