//! Liveness and readiness beyond "the caches listed once".
//!
//! - [`WatchHealth`]: every reflector reports each event (`ok`) and each error (`error`). A kind is
//!   *failing* once its errors have gone on for longer than the threshold (`--watch-failure-threshold`,
//!   30 s): from its first error to its latest, with no event in between, and the latest error
//!   recent. `/readyz` is 503 while any kind is failing: the cache no longer follows the cluster,
//!   and decisions made on it would be made on a stale view.
//!
//!   A watch that comes back is not always visible: kube's watcher restarts a watch from its last
//!   resourceVersion without emitting anything, and a quiet kind (StorageClasses, CSIDrivers) may
//!   send no event for hours. So a kind also counts as recovered when no error has come for
//!   [`RECOVERY_QUIET`] — longer than kube's longest retry cycle (30 s backoff doubled by jitter,
//!   plus a 30 s connect timeout), so a watch that still fails always reports again within it.
//!   A single error, or a few within the threshold, never make the replica unready.
//!
//! - [`Heartbeat`]: a task on the main runtime stamps the time every second; the admin port, served
//!   from a thread and runtime of its own, answers `/healthz` 503 once the stamp is older than
//!   `--heartbeat-timeout` (a wedged runtime: every worker blocked), so the kubelet restarts the pod.
//!
//! - [`crate::watchdog::Watchdog`]: a stream that stopped being taken (the reflectors' runtime, the
//!   controller's queue) for longer than `--stall-threshold` fails both `/readyz` and `/healthz`.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::registry::Registry;

use crate::cache::Cache;
use crate::metrics;
use crate::watchdog::{DEFAULT_STALL_THRESHOLD, Watchdog};

/// Default: how long a watch may keep failing before the replica is unready.
pub const DEFAULT_WATCH_FAILURE_THRESHOLD: Duration = Duration::from_secs(30);
/// Default: how old the runtime's heartbeat may be before `/healthz` fails.
pub const DEFAULT_HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(30);
/// How often the heartbeat ticks.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);
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
    /// The watch health of `cache`: its reflectors report into it and the admin port reads it.
    pub fn of(cache: &Cache) -> Arc<WatchHealth> {
        cache.watch_health()
    }

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

/// The main runtime's heartbeat.
#[derive(Debug)]
pub struct Heartbeat {
    start: Instant,
    /// Milliseconds from `start` to the latest tick.
    last: AtomicU64,
}

impl Heartbeat {
    /// A heartbeat stamped now, not yet ticking.
    pub fn new() -> Arc<Heartbeat> {
        Arc::new(Heartbeat {
            start: Instant::now(),
            last: AtomicU64::new(0),
        })
    }

    /// Stamps the time.
    pub fn beat(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(ms, Ordering::Release);
    }

    /// Time since the latest stamp.
    pub fn age(&self) -> Duration {
        let last = self.start + Duration::from_millis(self.last.load(Ordering::Acquire));
        Instant::now().saturating_duration_since(last)
    }

    /// Ticks every [`HEARTBEAT_INTERVAL`] on the current runtime until the task is aborted.
    pub fn spawn(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let heartbeat = self.clone();
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(HEARTBEAT_INTERVAL);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticker.tick().await;
                heartbeat.beat();
            }
        })
    }
}

/// What the admin port answers from: the cache's watches and (when serving) the heartbeat.
#[derive(Clone, Debug)]
pub struct Health {
    /// The cache's watches.
    pub watches: Arc<WatchHealth>,
    /// How long a watch may fail before `/readyz` fails.
    pub watch_failure_threshold: Duration,
    /// The main runtime's heartbeat; `None`: `/healthz` always answers ok.
    pub heartbeat: Option<Arc<Heartbeat>>,
    /// How old the heartbeat may be before `/healthz` fails.
    pub heartbeat_timeout: Duration,
    /// The watchdog on the cache's streams.
    pub watchdog: Arc<Watchdog>,
    /// How long a stream may stall before `/readyz` and `/healthz` fail.
    pub stall_threshold: Duration,
}

impl Health {
    /// The health of `cache` with the default thresholds and no heartbeat.
    pub fn of(cache: &Cache) -> Health {
        Health {
            watches: WatchHealth::of(cache),
            watch_failure_threshold: DEFAULT_WATCH_FAILURE_THRESHOLD,
            heartbeat: None,
            heartbeat_timeout: DEFAULT_HEARTBEAT_TIMEOUT,
            watchdog: cache.watchdog(),
            stall_threshold: DEFAULT_STALL_THRESHOLD,
        }
    }

    /// `Err(why)` when a stream has stalled.
    fn not_stalled(&self) -> Result<(), String> {
        let stalls = self.watchdog.stalls(self.stall_threshold);
        if stalls.is_empty() {
            return Ok(());
        }
        let list: Vec<String> = stalls.iter().map(ToString::to_string).collect();
        Err(format!("stalled: {}", list.join("; ")))
    }

    /// `Err(why)` when the runtime's heartbeat is too old or a stream has stalled.
    pub fn live(&self) -> Result<(), String> {
        self.not_stalled()?;
        match &self.heartbeat {
            Some(heartbeat) if heartbeat.age() > self.heartbeat_timeout => Err(format!(
                "the main runtime's heartbeat is {:.1}s old (limit {:?}): the runtime is wedged",
                heartbeat.age().as_secs_f64(),
                self.heartbeat_timeout
            )),
            _ => Ok(()),
        }
    }

    /// `Err(why)` unless the caches have synced, no watch is failing and no stream has stalled.
    pub fn ready(&self, cache_synced: bool) -> Result<(), String> {
        if !cache_synced {
            return Err("reflector caches not synced".into());
        }
        self.not_stalled()?;
        let failing = self.watches.failing(self.watch_failure_threshold);
        if failing.is_empty() {
            return Ok(());
        }
        let list: Vec<String> = failing
            .iter()
            .map(|f| format!("{} for {}s ({})", f.kind, f.for_.as_secs(), f.last_error))
            .collect();
        Err(format!("watches failing: {}", list.join("; ")))
    }

    /// Adds the watch error counters, the heartbeat age and the watchdog's metrics to `registry`,
    /// read at each encoding.
    pub fn register(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(self.clone()));
        registry.register_collector(Box::new(self.watchdog.collector(self.stall_threshold)));
    }
}

impl Collector for Health {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        let mut errors = metrics::family(
            &mut encoder,
            "sched_webhook_watch_errors",
            "Watch errors of the reflector caches, by kind.",
            MetricType::Counter,
        )?;
        for (kind, total) in self.watches.errors_total() {
            ConstCounter::new(total).encode(errors.encode_family(&[("kind", kind.as_str())])?)?;
        }
        let failing = self.watches.failing(self.watch_failure_threshold).len();
        metrics::gauge(
            &mut encoder,
            "sched_webhook_watches_failing",
            "Kinds whose watch has failed for longer than --watch-failure-threshold.",
            failing as u64,
        )?;
        if let Some(heartbeat) = &self.heartbeat {
            metrics::gauge(
                &mut encoder,
                "sched_webhook_heartbeat_age_seconds",
                "Age of the main runtime's heartbeat.",
                heartbeat.age().as_secs_f64(),
            )?;
        }
        Ok(())
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

    #[test]
    fn health_of_a_cache_is_shared_and_ready_needs_sync_and_working_watches() {
        use sched_core::framework::profile::SchedulerConfig;
        use sched_core::plugins::in_tree_registry;
        let (cache, _writers) = Cache::new(SchedulerConfig::default_config(&in_tree_registry()));
        let (other, _other_writers) = Cache::new(SchedulerConfig::default_config(&in_tree_registry()));
        assert!(Arc::ptr_eq(&WatchHealth::of(&cache), &WatchHealth::of(&cache)));
        assert!(!Arc::ptr_eq(&WatchHealth::of(&cache), &WatchHealth::of(&other)));

        let mut health = Health::of(&cache);
        health.watch_failure_threshold = Duration::ZERO;
        assert_eq!(health.ready(false), Err("reflector caches not synced".into()));
        assert_eq!(health.ready(true), Ok(()));
        WatchHealth::of(&cache).error("Node", "connection refused");
        let why = health.ready(true).expect_err("a failing watch");
        assert!(
            why.contains("Node") && why.contains("connection refused"),
            "{why}"
        );
        assert_eq!(Health::of(&other).ready(true), Ok(()));

        assert_eq!(health.live(), Ok(()), "no heartbeat: live");
        let heartbeat = Heartbeat::new();
        heartbeat.beat();
        health.heartbeat = Some(heartbeat);
        health.heartbeat_timeout = S(30);
        assert_eq!(health.live(), Ok(()));
        health.heartbeat_timeout = Duration::ZERO;
        std::thread::sleep(Duration::from_millis(5));
        assert!(health.live().expect_err("stale").contains("wedged"));
    }

    #[test]
    fn a_stalled_controller_queue_fails_readiness_liveness_and_shows_in_the_metrics() {
        use kube::runtime::reflector::ObjectRef;
        use sched_core::ClusterObjects;
        use sched_core::framework::profile::SchedulerConfig;
        use sched_core::plugins::in_tree_registry;

        use crate::watchdog::STALL_CONTROLLER;

        let (cache, mut writers) = Cache::new(SchedulerConfig::default_config(&in_tree_registry()));
        cache.fill(&mut writers, ClusterObjects::default());
        let mut health = Health::of(&cache);
        health.stall_threshold = Duration::from_millis(1);
        let scrape = |health: &Health| {
            let mut registry = Registry::default();
            health.register(&mut registry);
            metrics::exposition(&registry)
        };
        assert_eq!(health.ready(true), Ok(()));
        assert_eq!(health.live(), Ok(()));
        assert!(scrape(&health).contains("sched_webhook_streams_stalled 0"));

        // The controller is paused: a pod is queued and nobody takes it.
        cache.pod_triggers().push(ObjectRef::new("p").within("ns"));
        std::thread::sleep(Duration::from_millis(5));
        let why = health.ready(true).expect_err("a stalled queue");
        assert!(why.contains(STALL_CONTROLLER), "{why}");
        assert!(
            health
                .live()
                .expect_err("a stalled queue")
                .contains(STALL_CONTROLLER)
        );
        let text = scrape(&health);
        assert!(text.contains("sched_webhook_streams_stalled 1"), "{text}");
        assert!(text.contains("sched_webhook_pod_queue_length 1"), "{text}");

        // Within the (default) threshold it is only lag.
        health.stall_threshold = S(60);
        assert_eq!(health.ready(true), Ok(()));
    }
}
