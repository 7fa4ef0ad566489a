//! Giving memory back after a burst.
//!
//! glibc's allocator keeps freed memory in its arenas for reuse and returns it to the system
//! only from the top of the main heap. After a burst — hundreds of concurrent calls, large
//! results, a 3 MiB UI resource read by every browser at once — the gateway stayed tens of MiB
//! above its idle size for good (measured: 22 MiB idle, 76 MiB after three bursts of 250
//! requests, still 76 MiB after 15 s idle; `malloc_trim` brought it to 43 MiB). So a background
//! task looks at the resident size every few seconds and, when it has grown by more than a
//! margin since the last trim, asks the allocator to release its free pages (`malloc_trim(0)`,
//! which walks every arena). Under steady load the size settles and trims stop; the module's
//! allocations share this allocator, so they are covered too.
//!
//! Before that, the number of arenas is limited to one per core (glibc's default is eight per
//! core): every arena keeps its own free memory, and with a dozen threads between the host's and
//! the module's runtimes a burst spread over many of them. Each thread's small-allocation cache
//! (tcache) keeps the common path free of arena locks. Measured with the burst above: 41 MiB
//! after the trim with the default arenas, 29–32 MiB with one per core. Figures: BENCHMARKS.md.

use std::time::Duration;

/// How often the resident size is looked at.
const INTERVAL: Duration = Duration::from_secs(5);
/// Growth since the last trim that warrants another.
const MARGIN_BYTES: u64 = 8 * 1024 * 1024;
/// Less change than this between two looks: the size has settled (the burst is over).
const SETTLED_BYTES: u64 = 1024 * 1024;

/// The process's resident set size in bytes (`/proc/self/statm`), when it can be read.
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok().filter(|p| *p > 0).unwrap_or(4096))
}

/// One malloc arena per core (before the runtimes start their threads).
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).max(2);
        let cores = libc::c_int::try_from(cores).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only sets a tuning parameter of the allocator.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, cores);
        }
    }
}

/// Runs for the life of the gateway (spawn it on its runtime).
pub async fn trim_after_bursts() {
    // What the gateway holds when nothing is going on: a trim is worth trying above this.
    let Some(mut floor) = resident_bytes() else { return };
    let mut previous = floor;
    loop {
        tokio::time::sleep(INTERVAL).await;
        let Some(now) = resident_bytes() else { return };
        // Only once the size has settled: a trim holds the arenas' locks, so during a burst it
        // would stall the allocations of the calls in flight (up to 270 ms measured) and give
        // back little.
        let settled = now.abs_diff(previous) < SETTLED_BYTES;
        previous = now;
        if !settled || now <= floor + MARGIN_BYTES {
            floor = floor.min(now);
            continue;
        }
        let started = std::time::Instant::now();
        let _ = tokio::task::spawn_blocking(release_free_memory).await;
        let after = resident_bytes().unwrap_or(now);
        // Little given back: this is what the gateway now holds (caches, sessions), not a
        // burst's leftovers; trim again only when it grows beyond it.
        floor = if now - after.min(now) < SETTLED_BYTES { after } else { floor.min(after) };
        previous = after;
        tracing::debug!(
            before_mib = now >> 20,
            after_mib = after >> 20,
            took_us = started.elapsed().as_micros() as u64,
            "returned free memory to the system"
        );
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn release_free_memory() {
    // SAFETY: malloc_trim only releases free memory of the allocator's own arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_free_memory() {}
