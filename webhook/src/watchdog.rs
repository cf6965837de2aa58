//! The watchdog on the replica's input streams: it notices a cache or a controller that silently
//! stopped following the cluster, which neither the watch errors ([`crate::watch_health::WatchHealth`]) nor
//! the main runtime's heartbeat show.
//!
//! What "stalled" means. A kind that sends no event is usually a quiet kind (nothing changed), not a
//! stalled one, so the age of a kind's newest event is exported but never judged. A stream stalls
//! when events exist and are not taken: the work is waiting, and the party that should take it is
//! not. That is measured at the two hand-offs a replica has:
//!
//! - watch → store. Each reflector applies every event to its store as soon as the watch yields it
//!   and awaits nothing else (no subscriber can hold it back: see [`crate::cache`]'s trigger queue),
//!   so events wait only if the reflectors' runtime stops polling. A task on that runtime stamps a
//!   heartbeat every second; a heartbeat older than the stall threshold is a stall. (A connection
//!   that dies without closing is kube's watcher's to notice: it drops a watch that has sent nothing,
//!   not even a bookmark, for its timeout of 290 s plus a margin, and watches again; repeated
//!   failures then show in [`crate::watch_health::WatchHealth`]. kube's watcher consumes bookmarks itself,
//!   so they cannot be counted here.)
//! - store → controller. The pod reflector queues the pods to look at; the oldest entry's wait,
//!   counted from when the caches synced (the controller takes nothing before), is the controller's
//!   lag. The controller takes references as soon as they come (kube-runtime's scheduler buffers and
//!   deduplicates them), so a wait past the threshold means it stopped reading: a stall.
//!
//! A stall fails `/readyz` and `/healthz` alike: a replica in that state decides on a stale view, and
//! only a restart has ever cured it.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::cache::PodTriggers;
use crate::metrics;

/// Default: how long work may wait untaken before the stream counts as stalled.
pub const DEFAULT_STALL_THRESHOLD: Duration = Duration::from_secs(60);
/// How often the reflectors' runtime stamps its heartbeat.
pub const REFLECTOR_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);

/// Why a stream counts as stalled.
pub const STALL_REFLECTORS: &str = "the reflectors' runtime has not run";
/// Why the controller's stream counts as stalled.
pub const STALL_CONTROLLER: &str = "the controller has not taken a queued pod";

/// A time kept as milliseconds since the watchdog started, plus one (0: never).
#[derive(Debug, Default)]
struct Stamp(AtomicU64);

impl Stamp {
    fn set(&self, start: Instant, at: Instant) {
        let ms = u64::try_from(at.saturating_duration_since(start).as_millis()).unwrap_or(u64::MAX - 1);
        self.0.store(ms + 1, Ordering::Release);
    }

    fn get(&self, start: Instant) -> Option<Instant> {
        match self.0.load(Ordering::Acquire) {
            0 => None,
            ms => Some(start + Duration::from_millis(ms - 1)),
        }
    }
}

/// A stalled stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stall {
    /// Which hand-off ([`STALL_REFLECTORS`], [`STALL_CONTROLLER`]).
    pub what: &'static str,
    /// How long.
    pub for_: Duration,
}

impl fmt::Display for Stall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} for {}s", self.what, self.for_.as_secs())
    }
}

/// What the watchdog watches (one per cache).
#[derive(Debug)]
pub struct Watchdog {
    start: Instant,
    reflector_beat: Stamp,
    /// The newest event of each kind.
    newest_event: Mutex<BTreeMap<String, Arc<Stamp>>>,
    triggers: Arc<PodTriggers>,
    synced_at: OnceLock<Instant>,
}

/// The clock one reflector stamps at each event.
#[derive(Clone, Debug)]
pub struct EventClock {
    start: Instant,
    stamp: Arc<Stamp>,
}

impl EventClock {
    /// An event arrived now.
    pub fn tick(&self) {
        self.stamp.set(self.start, Instant::now());
    }
}

impl Watchdog {
    /// A watchdog over `triggers` (the controller's queue).
    pub fn new(triggers: Arc<PodTriggers>) -> Self {
        Watchdog {
            start: Instant::now(),
            reflector_beat: Stamp::default(),
            newest_event: Mutex::default(),
            triggers,
            synced_at: OnceLock::new(),
        }
    }

    /// The event clock of `kind`'s reflector.
    pub fn event_clock(&self, kind: &str) -> EventClock {
        let stamp = self
            .newest_event
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(kind.to_string())
            .or_default()
            .clone();
        EventClock {
            start: self.start,
            stamp,
        }
    }

    /// The caches synced now: the controller starts taking pods.
    pub fn synced(&self) {
        let _ = self.synced_at.set(Instant::now());
    }

    /// Stamps the reflectors' heartbeat now.
    pub fn reflectors_beat(&self) {
        self.reflector_beat.set(self.start, Instant::now());
    }

    /// Stamps the reflectors' heartbeat every [`REFLECTOR_HEARTBEAT_INTERVAL`] on the current
    /// runtime (the reflectors') until the task is aborted or the runtime ends.
    pub fn spawn_reflector_heartbeat(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let watchdog = self.clone();
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(REFLECTOR_HEARTBEAT_INTERVAL);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticker.tick().await;
                watchdog.reflectors_beat();
            }
        })
    }

    /// The reflectors' heartbeat age (`None` before the reflectors run: a cache filled directly).
    fn reflector_age(&self, now: Instant) -> Option<Duration> {
        Some(now.saturating_duration_since(self.reflector_beat.get(self.start)?))
    }

    /// How long the oldest queued pod has waited for the controller since the sync.
    fn controller_lag(&self, now: Instant) -> Option<Duration> {
        self.triggers.oldest_wait(now, *self.synced_at.get()?)
    }

    /// The streams stalled for longer than `threshold`, now.
    pub fn stalls(&self, threshold: Duration) -> Vec<Stall> {
        self.stalls_at(Instant::now(), threshold)
    }

    fn stalls_at(&self, now: Instant, threshold: Duration) -> Vec<Stall> {
        [
            (STALL_REFLECTORS, self.reflector_age(now)),
            (STALL_CONTROLLER, self.controller_lag(now)),
        ]
        .into_iter()
        .filter_map(|(what, age)| age.filter(|a| *a > threshold).map(|for_| Stall { what, for_ }))
        .collect()
    }

    /// The metrics of the watchdog, with the stalls judged against `threshold`.
    pub fn collector(self: &Arc<Self>, threshold: Duration) -> WatchdogCollector {
        WatchdogCollector {
            watchdog: self.clone(),
            threshold,
        }
    }
}

/// The watchdog's metrics as one scrape encodes them.
#[derive(Debug)]
pub struct WatchdogCollector {
    watchdog: Arc<Watchdog>,
    threshold: Duration,
}

impl Collector for WatchdogCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        let w = &self.watchdog;
        let now = Instant::now();
        let ages: Vec<(String, Option<Instant>)> = w
            .newest_event
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(kind, stamp)| (kind.clone(), stamp.get(w.start)))
            .collect();
        let mut newest = metrics::family(
            &mut encoder,
            "sched_webhook_watch_newest_event_age_seconds",
            "Age of the newest event each reflector applied (a quiet kind is old and healthy).",
            MetricType::Gauge,
        )?;
        for (kind, at) in ages {
            if let Some(at) = at {
                let age = now.saturating_duration_since(at).as_secs_f64();
                ConstGauge::new(age).encode(newest.encode_family(&[("kind", kind.as_str())])?)?;
            }
        }
        if let Some(age) = w.reflector_age(now) {
            metrics::gauge(
                &mut encoder,
                "sched_webhook_reflector_heartbeat_age_seconds",
                "Age of the reflectors' runtime heartbeat.",
                age.as_secs_f64(),
            )?;
        }
        metrics::gauge(
            &mut encoder,
            "sched_webhook_pod_queue_length",
            "Pods queued for the controller.",
            w.triggers.len() as u64,
        )?;
        metrics::gauge(
            &mut encoder,
            "sched_webhook_pod_queue_oldest_wait_seconds",
            "How long the oldest pod queued for the controller has waited since the caches synced.",
            w.controller_lag(now).unwrap_or_default().as_secs_f64(),
        )?;
        metrics::gauge(
            &mut encoder,
            "sched_webhook_streams_stalled",
            "Input streams (reflectors, controller queue) stalled for longer than --stall-threshold.",
            w.stalls_at(now, self.threshold).len() as u64,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector::ObjectRef;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn a_paused_controller_stalls_once_its_oldest_pod_outwaits_the_threshold() {
        let triggers = Arc::new(PodTriggers::default());
        let watchdog = Watchdog::new(triggers.clone());
        let t0 = watchdog.start;
        triggers.push(ObjectRef::new("p").within("ns"));
        assert!(
            watchdog.stalls_at(t0 + S(600), S(60)).is_empty(),
            "before the sync the controller takes nothing: not a stall"
        );
        watchdog.synced();
        let synced = *watchdog.synced_at.get().expect("synced");
        assert!(watchdog.stalls_at(synced + S(59), S(60)).is_empty());
        assert_eq!(
            watchdog.stalls_at(synced + S(61), S(60)),
            vec![Stall {
                what: STALL_CONTROLLER,
                for_: S(61)
            }]
        );
        // The controller takes it (here: the pod is deleted): no stall.
        triggers.forget(&ObjectRef::new("p").within("ns"));
        assert!(watchdog.stalls_at(synced + S(61), S(60)).is_empty());
        // An empty queue never stalls, however quiet the cluster.
        assert!(watchdog.stalls_at(synced + S(100_000), S(60)).is_empty());
    }

    #[test]
    fn the_reflectors_stall_when_their_runtime_stops_beating_and_quiet_kinds_never_do() {
        let watchdog = Watchdog::new(Arc::default());
        let t0 = watchdog.start;
        let clock = watchdog.event_clock("StorageClass");
        assert!(
            watchdog.stalls_at(t0 + S(1_000), S(60)).is_empty(),
            "no reflectors: nothing to judge"
        );
        watchdog.reflectors_beat();
        clock.tick();
        // A kind without events for an hour, on a runtime that beats: healthy.
        watchdog.reflector_beat.set(t0, t0 + S(3_600));
        assert!(watchdog.stalls_at(t0 + S(3_630), S(60)).is_empty());
        let stalls = watchdog.stalls_at(t0 + S(3_690), S(60));
        assert_eq!(stalls.len(), 1);
        assert_eq!(stalls[0].what, STALL_REFLECTORS);
        assert_eq!(stalls[0].to_string(), format!("{STALL_REFLECTORS} for 90s"));
    }
}
