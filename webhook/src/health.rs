//! Liveness and readiness beyond "the caches listed once".
//!
//! - [`WatchHealth`] (in [`crate::watch_health`], which the reflectors report into): `/readyz` is 503
//!   while the watch of any kind has been failing for longer than `--watch-failure-threshold` (30 s):
//!   the cache no longer follows the cluster, and decisions made on it would be made on a stale view.
//!
//! - [`Heartbeat`]: a task on the main runtime stamps the time every second; the admin port, served
//!   from a thread and runtime of its own, answers `/healthz` 503 once the stamp is older than
//!   `--heartbeat-timeout` (a wedged runtime: every worker blocked), so the kubelet restarts the pod.
//!
//! - [`crate::watchdog::Watchdog`]: a stream that stopped being taken (the reflectors' runtime, the
//!   controller's queue) for longer than `--stall-threshold` fails both `/readyz` and `/healthz`.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::registry::Registry;

use crate::cache::Cache;
use crate::metrics;
pub use crate::watch_health::{FailingWatch, RECOVERY_QUIET, WatchHealth};
use crate::watchdog::{DEFAULT_STALL_THRESHOLD, Watchdog};

/// Default: how long a watch may keep failing before the replica is unready.
pub const DEFAULT_WATCH_FAILURE_THRESHOLD: Duration = Duration::from_secs(30);
/// Default: how old the runtime's heartbeat may be before `/healthz` fails.
pub const DEFAULT_HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(30);
/// How often the heartbeat ticks.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);

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
            watches: cache.watch_health(),
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
    fn health_of_a_cache_is_shared_and_ready_needs_sync_and_working_watches() {
        use sched_core::engine::{SchedulerConfig, in_tree_registry};
        let (cache, _writers) = Cache::new(SchedulerConfig::default_config(&in_tree_registry()));
        let (other, _other_writers) = Cache::new(SchedulerConfig::default_config(&in_tree_registry()));
        assert!(Arc::ptr_eq(&cache.watch_health(), &cache.watch_health()));
        assert!(!Arc::ptr_eq(&cache.watch_health(), &other.watch_health()));

        let mut health = Health::of(&cache);
        health.watch_failure_threshold = Duration::ZERO;
        assert_eq!(health.ready(false), Err("reflector caches not synced".into()));
        assert_eq!(health.ready(true), Ok(()));
        cache.watch_health().error("Node", "connection refused");
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
        use sched_core::engine::{SchedulerConfig, in_tree_registry};

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
