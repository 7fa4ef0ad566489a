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
