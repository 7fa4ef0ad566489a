//! The allocator of the gateway and of the module.
//!
//! The gateway and the module each link jemalloc as their Rust allocator (`main.rs` and
//! `mcpapp-plugin/src/runtime/allocator.rs` declare it; a cdylib has its own global allocator, and
//! what crosses the boundary is freed by the side that made it). Two things made it the choice
//! over glibc's malloc:
//!
//! - **Memory comes back after a burst by itself.** jemalloc's background thread returns free
//!   pages to the system about a second after they were freed (`dirty_decay_ms:1000`,
//!   `muzzy_decay_ms:0`), whichever thread allocated them. With glibc the gateway stayed tens of
//!   MiB above its idle size after a burst (measured: 22 MiB idle, 76 MiB after three bursts of
//!   250 requests) and needed a background task calling `malloc_trim`, which holds every arena's
//!   lock while it walks them and could only run once the size had settled. mimalloc, tried too,
//!   was as fast but kept a burst's pages in the heaps of the threads that had freed them (still
//!   +18 MiB a minute later, `tests/tests/amplification.rs`).
//! - **It is cheaper per call.** malloc and free were ~15 % of the gateway's CPU under load;
//!   glibc's `malloc_consolidate` ran on most calls (hyper's header maps are "large" requests
//!   for it). Side by side on `bench proxy`: 263–282 → 213–266 µs of gateway CPU per proxied
//!   call on `/apps/mcp` (310–329 → 235–266 on `/mcp`), throughput at 16 concurrent +5–30 %
//!   (BENCHMARKS.md).
//!
//! The price is ~2 MiB more private memory at idle (two allocators' metadata and thread
//! caches; `narenas:2` keeps the arenas at the core count of the machines it was tuned on).
//! C code (SQLite) still uses glibc's malloc.

/// jemalloc's settings (read by it at its first allocation), for the gateway and the module alike.
pub const ALLOCATOR_CONF: &[u8] = b"background_thread:true,max_background_threads:1,narenas:2,dirty_decay_ms:1000,muzzy_decay_ms:0\0";
