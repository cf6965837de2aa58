//! The process's allocator: jemalloc, declared by the binary (`main.rs`) with `#[global_allocator]`.
//!
//! Why not glibc's malloc: the caches hold tens of thousands of long-lived objects that the watches
//! deliver interleaved with short-lived ones (each LIST page and watch event is decoded in full,
//! managedFields included, before it is pruned). glibc keeps the holes that interleaving leaves and
//! rarely gives memory back; jemalloc groups allocations by size class, and its background threads
//! return pages that stay unused for a few seconds to the OS. With 10,000 PVs and 10,000 PVCs cached
//! from a real API server, this and the reflector thread (`cache::REFLECTOR_THREAD`) took the binary
//! from 145 to 110 MiB after a load run (docs/performance.md).

use tikv_jemalloc_ctl::{background_thread, epoch, stats};

/// Starts jemalloc's background threads, which purge unused pages on a timer: without them pages are
/// purged only while the process allocates, so memory freed after the initial LIST (the decoded pages)
/// would stay resident in a webhook that is idle. Harmless (an error, ignored) when jemalloc is not the
/// global allocator.
pub fn purge_in_background() {
    if let Err(e) = background_thread::write(true) {
        tracing::debug!(error = %e, "jemalloc background threads unavailable");
    }
}

/// Bytes the program has allocated and bytes the allocator keeps resident, as jemalloc counts them
/// (for benchmarks: the gap is fragmentation and pages not yet purged). `None` when jemalloc is not the
/// global allocator.
pub fn allocator_stats() -> Option<(usize, usize)> {
    epoch::advance().ok()?;
    let allocated = stats::allocated::read().ok()?;
    let resident = stats::resident::read().ok()?;
    (resident > 0).then_some((allocated, resident))
}
