//! The wall clock, read in one place: the "now" of pods that have not started (preemption's victim
//! order) and of DRA binding deadlines. Everything else takes the time as an argument, so tests and
//! simulations can fix it.

/// The current time in nanoseconds since the epoch.
pub fn now_nanos() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}
