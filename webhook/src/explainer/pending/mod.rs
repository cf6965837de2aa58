//! Pending reasons as Prometheus metrics: the explainer evaluates every pending pod of its live
//! snapshot as `kubectl sched triage -A` does (by shape, root cause, the still-Pending diagnosis:
//! `kubectl_sched::commands::triage::triage_all_namespaces`, the command's own code), counts the
//! pods into bounded series ([`series`]) and serves them on the admin port's `/metrics`
//! ([`exposition`]).
//!
//! When it evaluates, and the CPU it may take:
//!
//! - it looks at the snapshot every [`POLL_INTERVAL`] and evaluates when the snapshot changed (its
//!   resourceVersion, or whether every watch is in sync), and at least every [`RESYNC_INTERVAL`]
//!   (a change a watch's re-list leaves without a newer resourceVersion, a Lease that expired);
//! - one evaluation at a time (this loop awaits it), on [`EVALUATION_THREADS`] thread of its own (a
//!   rayon pool the triage's parallel loops run in), never the API port's threads;
//! - between the end of one evaluation and the start of the next at least [`MIN_INTERVAL`] and at
//!   least as long as the last one took: events that come in a burst are evaluated together, and
//!   the evaluator takes at most half of one core, however large the cluster.
//!
//! A change is thus reflected within `POLL_INTERVAL + max(MIN_INTERVAL, last evaluation)` plus the
//! evaluation itself. Until the first evaluation the pod families have no series; a failed
//! evaluation leaves the last published one (with its timestamp) and counts a failure.

pub mod exposition;
pub mod series;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::header::CONTENT_TYPE;
use axum::routing::get;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;

use kubectl_sched::cli::ReleaseArgs;
use kubectl_sched::commands::triage::{TriageError, triage_all_namespaces};
use kubectl_sched::diagnosis::still_pending::{SchedulerLease, SchedulerPresence};
use kubectl_sched::source::load::{
    FromServer, LoadError, Loaded, SCHEDULER_LEASE_NAME, SCHEDULER_LEASE_NAMESPACE,
};
use sched_core::ClusterObjects;

use super::api::ExplainerState;
use crate::metrics::{CONTENT_TYPE as TEXT_FORMAT, exposition as encode};
use exposition::PendingCollector;
use series::{Tally, pending_pod_facts, tally};

/// How often the evaluator looks whether the snapshot changed (an atomic read).
pub const POLL_INTERVAL: Duration = Duration::from_millis(200);
/// The least time between the end of one evaluation and the start of the next.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// The longest time between two evaluations, changes or not.
pub const RESYNC_INTERVAL: Duration = Duration::from_secs(60);
/// Threads an evaluation runs on.
pub const EVALUATION_THREADS: usize = 1;

/// Why an evaluation did not finish.
#[derive(Debug, thiserror::Error)]
pub enum PendingError {
    /// The release could not be chosen from the API server's version.
    #[error(transparent)]
    Load(Box<LoadError>),
    /// The triage refused (a profile could not be built).
    #[error(transparent)]
    Triage(Box<TriageError>),
    /// The evaluation's thread ended without an answer (it panicked).
    #[error("the evaluation ended without an answer: {0}")]
    Aborted(String),
}

/// One finished evaluation, as the metrics publish it.
#[derive(Debug, Clone)]
pub struct Published {
    /// The counts.
    pub tally: Tally,
    /// When it finished.
    pub finished: Timestamp,
    /// How long it took (reading the snapshot included).
    pub took: Duration,
    /// The snapshot's resourceVersion.
    pub resource_version: u64,
}

/// The evaluator's results, shared with the admin port.
#[derive(Debug, Default)]
pub struct PendingMetrics {
    published: Mutex<Option<Arc<Published>>>,
    evaluations: Counter,
    failures: Counter,
}

impl PendingMetrics {
    /// The last published evaluation.
    pub fn published(&self) -> Option<Arc<Published>> {
        self.published
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn publish(&self, published: Published) {
        *self.published.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(published));
        self.evaluations.inc();
    }

    /// Every family in the Prometheus text format.
    pub fn render(self: &Arc<Self>) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(PendingCollector {
            metrics: self.clone(),
        }));
        encode(&registry)
    }
}

/// `/metrics` for the admin port.
pub fn router(metrics: Arc<PendingMetrics>) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let text = metrics.render();
            async move { ([(CONTENT_TYPE, TEXT_FORMAT)], text) }
        }),
    )
}

/// Evaluates `objects` (the live snapshot's, `from` saying where they came from): the pure part of
/// an evaluation, on the calling thread (and the rayon pool it is installed in).
pub fn evaluate(
    objects: ClusterObjects,
    from: FromServer,
    scheduler: Option<&SchedulerPresence>,
) -> Result<Tally, PendingError> {
    let facts = pending_pod_facts(&objects.pods);
    let loaded = Loaded::from_server(objects, from, &ReleaseArgs::default())
        .map_err(|e| PendingError::Load(Box::new(e)))?;
    let report = triage_all_namespaces(loaded, scheduler).map_err(|e| PendingError::Triage(Box::new(e)))?;
    Ok(tally(&report, &facts))
}

/// kube-scheduler's Lease, for the still-Pending diagnosis (None when it cannot be read: then whether
/// one leads is not judged, as triage does).
async fn scheduler_presence(client: &kube::Client) -> Option<SchedulerPresence> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), SCHEDULER_LEASE_NAMESPACE);
    match leases.get_opt(SCHEDULER_LEASE_NAME).await {
        Ok(Some(lease)) => Some(SchedulerPresence::Lease(SchedulerLease::from_lease(&lease))),
        Ok(None) => Some(SchedulerPresence::NoLease),
        Err(e) => {
            tracing::debug!(error = %e, "pending metrics: kube-scheduler's Lease not read");
            None
        }
    }
}

/// Evaluates the pending pods of `state`'s snapshot whenever it changes (see the module's rules),
/// publishing into `metrics`, until the task is dropped.
pub async fn run(state: Arc<ExplainerState>, metrics: Arc<PendingMetrics>) {
    let pool = match rayon::ThreadPoolBuilder::new()
        .num_threads(EVALUATION_THREADS)
        .thread_name(|i| format!("sched-pending-{i}"))
        .build()
    {
        Ok(pool) => Arc::new(pool),
        Err(e) => {
            tracing::error!(error = %e, "pending metrics: no evaluation thread; no pending-reason metrics");
            return;
        }
    };
    // (resourceVersion, in sync) of the last evaluated snapshot, when it ended, how long it took.
    let mut last: Option<((u64, bool), Instant, Duration)> = None;
    loop {
        tokio::time::sleep(POLL_INTERVAL).await;
        if !state.live.is_ready() {
            continue;
        }
        let freshness = state.live.freshness();
        let generation = (freshness.resource_version, freshness.in_sync);
        let due = match last {
            None => true,
            Some((seen, ended, took)) => {
                let rested = ended.elapsed();
                (seen != generation && rested >= MIN_INTERVAL.max(took)) || rested >= RESYNC_INTERVAL
            }
        };
        if !due {
            continue;
        }
        let started = Instant::now();
        let version = state.client.apiserver_version().await.ok();
        let scheduler = scheduler_presence(&state.client).await;
        let (objects, freshness) = state.live.objects();
        let resource_version = freshness.resource_version;
        let from = FromServer {
            origin: state.origin.clone(),
            default_namespace: "default".to_string(),
            warnings: freshness.warnings,
            notes: Vec::new(),
            version,
        };
        let in_pool = pool.clone();
        let result = tokio::task::spawn_blocking(move || {
            in_pool.install(|| evaluate(objects, from, scheduler.as_ref()))
        })
        .await
        .map_err(|e| PendingError::Aborted(e.to_string()))
        .and_then(|r| r);
        let took = started.elapsed();
        last = Some((generation, Instant::now(), took));
        match result {
            Ok(tally) => {
                tracing::debug!(
                    pods = tally.pods,
                    shapes = tally.shapes,
                    ms = took.as_millis() as u64,
                    "pending metrics evaluated"
                );
                metrics.publish(Published {
                    tally,
                    finished: Timestamp::now(),
                    took,
                    resource_version,
                });
            }
            Err(e) => {
                metrics.failures.inc();
                tracing::warn!(error = %e, "pending metrics: the evaluation failed; the last one stays");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
    use sched_core::testing::{node, pod};

    use super::*;
    use series::{OTHER, Series};

    fn created(seconds: i64) -> impl FnOnce(&mut k8s_openapi::api::core::v1::Pod) {
        move |p| p.metadata.creation_timestamp = Some(Time(Timestamp::from_second(seconds).unwrap()))
    }

    fn owned_by(replica_set: &str) -> impl FnOnce(&mut k8s_openapi::api::core::v1::Pod) {
        let name = replica_set.to_string();
        move |p| {
            p.metadata.owner_references = Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name,
                uid: "u".into(),
                controller: Some(true),
                ..OwnerReference::default()
            }])
        }
    }

    fn from() -> FromServer {
        FromServer {
            origin: "test".into(),
            default_namespace: "default".into(),
            warnings: Vec::new(),
            notes: Vec::new(),
            version: None,
        }
    }

    fn labels(series: &[Series]) -> Vec<(Vec<&str>, u64)> {
        series
            .iter()
            .map(|s| (s.labels.iter().map(String::as_str).collect(), s.pods))
            .collect()
    }

    /// Three causes, a pod that fits although kube-scheduler said it does not, and pods nobody tried:
    /// each lands in its family under its workload and root cause, with the oldest pod's age.
    #[test]
    fn pending_pods_are_counted_by_workload_and_root_cause() {
        let objects = ClusterObjects {
            nodes: vec![
                node("plain").cpu("4").obj(),
                // Two tainted nodes: the taint is the only blocker on more nodes than the node
                // selector (on the plain one), so it is the gpu pod's root cause.
                node("gpu-1")
                    .cpu("4")
                    .label("pool", "gpu")
                    .taint("dedicated", "gpu", "NoSchedule")
                    .obj(),
                node("gpu-2")
                    .cpu("4")
                    .label("pool", "gpu")
                    .taint("dedicated", "gpu", "NoSchedule")
                    .obj(),
            ],
            pods: vec![
                pod("trainer-0")
                    .cpu("64")
                    .with(owned_by("trainer"))
                    .with(created(100))
                    .obj(),
                pod("trainer-1")
                    .cpu("64")
                    .with(owned_by("trainer"))
                    .with(created(50))
                    .obj(),
                pod("gpu-0")
                    .cpu("100m")
                    .node_selector("pool", "gpu")
                    .condition("PodScheduled", "False", "Unschedulable")
                    .obj(),
                pod("web-0").cpu("100m").node_selector("disk", "ssd").obj(),
                pod("fits-0")
                    .cpu("100m")
                    .condition("PodScheduled", "False", "Unschedulable")
                    .with(created(10))
                    .obj(),
                pod("bound").cpu("1").node("plain").obj(),
            ],
            ..ClusterObjects::default()
        };
        let tally = evaluate(objects, from(), Some(&SchedulerPresence::NoLease)).unwrap();
        assert_eq!(tally.pods, 5);
        assert_eq!(
            labels(&tally.unschedulable),
            [
                (
                    vec![
                        "default",
                        "replicaset",
                        "trainer",
                        "NodeResourcesFit",
                        "Insufficient cpu"
                    ],
                    2
                ),
                (
                    vec![
                        "default",
                        "pod",
                        "gpu-0",
                        "TaintToleration",
                        "node(s) had untolerated taint(s)"
                    ],
                    1
                ),
                (
                    vec![
                        "default",
                        "pod",
                        "web-0",
                        "NodeAffinity",
                        "node(s) didn't match Pod's node affinity/selector"
                    ],
                    1
                ),
            ]
        );
        // The oldest of the trainer's pods.
        assert_eq!(
            tally.unschedulable[0].oldest,
            Some(Timestamp::from_second(50).unwrap())
        );
        assert_eq!(labels(&tally.fits_now), [(vec!["default", "pod", "fits-0"], 1)]);
        assert_eq!(
            labels(&tally.by_verdict),
            [
                (vec!["default", "unschedulable"], 4),
                (vec!["default", "fits"], 1)
            ]
        );
        // trainer-0, trainer-1 and web-0 have no PodScheduled condition.
        assert_eq!(labels(&tally.not_tried), [(vec!["default"], 3)]);
        assert_eq!(tally.folded, 0);
        assert!(tally.unschedulable.iter().all(|s| s.labels[0] != OTHER));
    }

    #[test]
    fn the_exposition_has_no_pod_series_before_the_first_evaluation() {
        let metrics = Arc::new(PendingMetrics::default());
        let text = metrics.render();
        assert!(text.contains("sched_pending_evaluations_total 0"), "{text}");
        assert!(!text.contains("sched_pending_unschedulable_pods"), "{text}");
        let objects = ClusterObjects {
            nodes: vec![node("plain").cpu("4").obj()],
            pods: vec![pod("big").cpu("64").with(created(0)).obj()],
            ..ClusterObjects::default()
        };
        metrics.publish(Published {
            tally: evaluate(objects, from(), None).unwrap(),
            finished: Timestamp::now(),
            took: Duration::from_millis(5),
            resource_version: 7,
        });
        let text = metrics.render();
        assert!(
            text.contains(
                "sched_pending_unschedulable_pods{namespace=\"default\",workload_kind=\"pod\",workload=\"big\",plugin=\"NodeResourcesFit\",reason=\"Insufficient cpu\"} 1"
            ),
            "{text}"
        );
        // The age is taken at the scrape: created at the epoch, so decades.
        let age_line = text
            .lines()
            .find(|l| l.starts_with("sched_pending_unschedulable_oldest_seconds{"))
            .unwrap();
        let age: f64 = age_line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(age > 1.0e9, "{age_line}");
        assert!(
            text.contains("sched_pending_snapshot_resource_version 7"),
            "{text}"
        );
        assert!(
            text.contains("sched_pending_not_tried_pods{namespace=\"default\"} 1"),
            "{text}"
        );
    }
}
