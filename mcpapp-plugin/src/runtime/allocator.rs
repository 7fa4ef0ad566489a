//! The module's own allocator: a cdylib has its own global allocator, separate from the host's
//! (what crosses the boundary is freed by the side that made it, through abi_stable's types).
//! jemalloc, as the host (`gateway-host/src/memory.rs` says why and what was measured), with the
//! same settings, written here again on purpose: they are this library's own choice, not part of
//! the boundary (`host-abi` holds only what is frozen once a module ships), and a module built
//! apart from this gateway may tune its allocator otherwise. Built without initial-exec
//! thread-locals, since a library loaded with `dlopen` cannot take room in the static TLS block
//! ("cannot allocate memory in static TLS block" was what loading the module said otherwise).
//! Not in fuzz builds (`cfg(fuzzing)`), whose sanitizer watches the default allocator.

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The settings jemalloc reads at its first allocation (the symbol name is its prefixed one).
#[unsafe(export_name = "_rjem_malloc_conf")]
static ALLOCATOR_CONF: &[u8] = b"background_thread:true,max_background_threads:1,narenas:2,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

/// jemalloc's `arena.<i>.purge` for every arena (`MALLCTL_ARENAS_ALL`).
const PURGE_ALL_ARENAS: &std::ffi::CStr = c"arena.4096.purge";

/// The library's last instance has ended (see [`super::library`]): stops jemalloc's background
/// thread (jemalloc joins it) and returns every free page to the system, since nothing of this
/// library allocates any more and the background thread would otherwise tick for nothing.
pub fn retire() {
    set_background_thread(false);
    // SAFETY: a documented control that takes and gives nothing.
    let purged = unsafe {
        tikv_jemalloc_sys::mallctl(PURGE_ALL_ARENAS.as_ptr(), std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut(), 0)
    };
    if purged != 0 {
        tracing::debug!("jemalloc: purging the arenas failed (error {purged})");
    }
}

/// The library is in use (again): the background thread returns free pages (a no-op while it runs).
pub fn resume() {
    set_background_thread(true);
}

fn set_background_thread(on: bool) {
    let mut value = on;
    // SAFETY: `background_thread` takes a bool, given by pointer and size.
    let status = unsafe {
        tikv_jemalloc_sys::mallctl(
            c"background_thread".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            (&mut value as *mut bool).cast(),
            std::mem::size_of::<bool>(),
        )
    };
    if status != 0 {
        tracing::debug!("jemalloc: setting background_thread to {on} failed (error {status})");
    }
}
