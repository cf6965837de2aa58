//! The watch state of the reflector caches: every reflector reports each event (`ok`) and each error
//! (`error`). A kind is *failing* once its errors have gone on for longer than the threshold (`--watch-failure-threshold`,
//! 30 s): from its first error to its latest, with no event in between, and the latest error
//! recent. `/readyz` is 503 while any kind is failing: the cache no longer follows the cluster,
//! and decisions made on it would be made on a stale view.
//!
//! A watch that comes back is not always visible: kube's watcher restarts a watch from its last
//! resourceVersion without emitting anything, and a quiet kind (StorageClasses, CSIDrivers) may
//! send no event for hours. So a kind also counts as recovered when no error has come for
//! [`RECOVERY_QUIET`] — longer than kube's longest retry cycle (30 s backoff doubled by jitter,
//! plus a 30 s connect timeout), so a watch that still fails always reports again within it.
//! A single error, or a few within the threshold, never make the replica unready.
//!
//! This is a record: reflectors write into it, the admin port ([`crate::health`]) reads it, and it
//! knows neither (so the cache below the admin port can hold it).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Without a new error for this long, a failing kind counts as recovered (see the module docs).
pub const RECOVERY_QUIET: Duration = Duration::from_secs(100);

/// The watch state of one kind.
#[derive(Clone, Debug, Default)]
struct KindState {
    /// The first error since the last event (or since recovery).
    failing_since: Option<Instant>,
    /// The latest error.
    last_error_at: Option<Instant>,
    last_error: String,
    errors_total: u64,
}

impl KindState {
    /// Failing for longer than `threshold` at `now`.
    fn failing_for(&self, now: Instant, threshold: Duration) -> Option<Duration> {
        let (since, last) = (self.failing_since?, self.last_error_at?);
        if now.saturating_duration_since(last) >= RECOVERY_QUIET {
            return None;
        }
        (last.saturating_duration_since(since) >= threshold).then(|| now.saturating_duration_since(since))
    }
}

/// A kind whose watch is failing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailingWatch {
    /// The kind (`PersistentVolumeClaim`).
    pub kind: String,
    /// Since its first error.
    pub for_: Duration,
    /// The latest error.
    pub last_error: String,
}

/// The watch state of every kind of one cache.
#[derive(Debug, Default)]
pub struct WatchHealth {
    kinds: Mutex<BTreeMap<String, KindState>>,
    /// Some kind has `failing_since` set: events must clear it (the fast path skips the lock).
    any_erring: AtomicBool,
}

impl WatchHealth {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, KindState>> {
        self.kinds.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// An event of `kind` arrived: its watch works.
    pub fn ok(&self, kind: &str) {
        if !self.any_erring.load(Ordering::Acquire) {
            return;
        }
        let mut kinds = self.lock();
        if let Some(state) = kinds.get_mut(kind)
            && state.failing_since.take().is_some()
        {
            tracing::info!(kind, "watch recovered");
        }
        let erring = kinds.values().any(|s| s.failing_since.is_some());
        self.any_erring.store(erring, Ordering::Release);
    }

    /// The watch of `kind` failed (kube retries it with backoff).
    pub fn error(&self, kind: &str, error: &str) {
        self.error_at(kind, error, Instant::now());
    }

    fn error_at(&self, kind: &str, error: &str, now: Instant) {
        let mut kinds = self.lock();
        let state = kinds.entry(kind.to_string()).or_default();
        // After a quiet spell the watch came back unseen: this is a new run of errors.
        if state
            .last_error_at
            .is_some_and(|last| now.saturating_duration_since(last) >= RECOVERY_QUIET)
        {
            state.failing_since = None;
        }
        state.failing_since.get_or_insert(now);
        state.last_error_at = Some(now);
        state.last_error = error.to_string();
        state.errors_total += 1;
        self.any_erring.store(true, Ordering::Release);
    }

    /// The kinds failing for longer than `threshold`, now.
    pub fn failing(&self, threshold: Duration) -> Vec<FailingWatch> {
        self.failing_at(Instant::now(), threshold)
    }

    fn failing_at(&self, now: Instant, threshold: Duration) -> Vec<FailingWatch> {
        self.lock()
            .iter()
            .filter_map(|(kind, state)| {
                state.failing_for(now, threshold).map(|for_| FailingWatch {
                    kind: kind.clone(),
                    for_,
                    last_error: state.last_error.clone(),
                })
            })
            .collect()
    }

    /// Watch errors so far, by kind.
    pub fn errors_total(&self) -> Vec<(String, u64)> {
        self.lock()
            .iter()
            .map(|(kind, state)| (kind.clone(), state.errors_total))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn a_watch_failing_past_the_threshold_is_reported_until_an_event_or_a_quiet_spell() {
        let health = WatchHealth::default();
        let t0 = Instant::now();
        let threshold = S(30);
        // kube's backoff: errors at growing intervals.
        for at in [0, 1, 3, 6, 12, 25] {
            health.error_at("PersistentVolumeClaim", "connection refused", t0 + S(at));
            assert!(
                health.failing_at(t0 + S(at), threshold).is_empty(),
                "{at}s: within the threshold"
            );
        }
        health.error_at("PersistentVolumeClaim", "connection refused", t0 + S(50));
        let failing = health.failing_at(t0 + S(50), threshold);
        assert_eq!(
            failing,
            vec![FailingWatch {
                kind: "PersistentVolumeClaim".into(),
                for_: S(50),
                last_error: "connection refused".into()
            }]
        );
        // Still failing between errors...
        assert_eq!(health.failing_at(t0 + S(100), threshold).len(), 1);
        // ...until an event arrives.
        health.ok("PersistentVolumeClaim");
        assert!(health.failing_at(t0 + S(100), threshold).is_empty());
        assert!(!health.any_erring.load(Ordering::Acquire));

        // A watch that comes back silently: no error for RECOVERY_QUIET is a recovery.
        for at in [200, 215, 240] {
            health.error_at("StorageClass", "503", t0 + S(at));
        }
        assert_eq!(health.failing_at(t0 + S(241), threshold).len(), 1);
        assert_eq!(
            health.failing_at(t0 + S(240) + RECOVERY_QUIET, threshold).len(),
            0
        );
        // A later error starts a new run rather than continuing the old one.
        health.error_at("StorageClass", "503", t0 + S(400));
        assert!(health.failing_at(t0 + S(401), threshold).is_empty());
        assert_eq!(
            health.errors_total(),
            vec![("PersistentVolumeClaim".into(), 7), ("StorageClass".into(), 4)]
        );
    }

    #[test]
    fn single_errors_never_make_a_kind_fail() {
        let health = WatchHealth::default();
        let t0 = Instant::now();
        health.error_at("Pod", "reset", t0);
        for at in [0, 29, 31, 60, 99] {
            assert!(health.failing_at(t0 + S(at), S(30)).is_empty(), "{at}s");
        }
        health.ok("Node");
        health.ok("Pod");
        assert!(health.failing_at(t0 + S(1), Duration::ZERO).is_empty());
    }
}
