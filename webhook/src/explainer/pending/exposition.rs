//! The pending-reason families in the Prometheus text format, written at scrape time from the last
//! published evaluation: the counts as they were evaluated, the ages as of the scrape (now minus
//! the oldest pod's creation time), so that an age keeps growing between evaluations as the pods
//! keep waiting.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use super::PendingMetrics;
use super::series::Series;
use crate::metrics::{family, gauge};

/// The pending pods by namespace and verdict.
pub const PENDING_PODS: &str = "sched_pending_pods";
/// The unschedulable pods by namespace, workload, root-cause plugin and reason.
pub const UNSCHEDULABLE_PODS: &str = "sched_pending_unschedulable_pods";
/// The age of the oldest pod of each unschedulable series.
pub const UNSCHEDULABLE_OLDEST: &str = "sched_pending_unschedulable_oldest_seconds";
/// Pods that fit now but are still pending.
pub const FITS_NOW_PODS: &str = "sched_pending_fits_now_pods";
/// The age of the oldest of them.
pub const FITS_NOW_OLDEST: &str = "sched_pending_fits_now_oldest_seconds";
/// Pending pods kube-scheduler has not tried.
pub const NOT_TRIED_PODS: &str = "sched_pending_not_tried_pods";
/// The age of the oldest of them.
pub const NOT_TRIED_OLDEST: &str = "sched_pending_not_tried_oldest_seconds";

const UNSCHEDULABLE_LABELS: [&str; 5] = ["namespace", "workload_kind", "workload", "plugin", "reason"];
const WORKLOAD_LABELS: [&str; 3] = ["namespace", "workload_kind", "workload"];
const NAMESPACE_LABELS: [&str; 1] = ["namespace"];
const VERDICT_LABELS: [&str; 2] = ["namespace", "verdict"];

/// One gauge family of pod counts, and (`age`) one of the oldest pod's age per series.
fn pod_families(
    encoder: &mut DescriptorEncoder<'_>,
    (name, help): (&str, &str),
    age: Option<(&str, &str)>,
    labels: &[&str],
    series: &[Series],
    now: Timestamp,
) -> fmt::Result {
    let mut pods = family(encoder, name, help, MetricType::Gauge)?;
    for s in series {
        let pairs: Vec<(&str, &str)> = labels
            .iter()
            .copied()
            .zip(s.labels.iter().map(String::as_str))
            .collect();
        ConstGauge::new(s.pods as i64).encode(pods.encode_family(&pairs)?)?;
    }
    let Some((age_name, age_help)) = age else {
        return Ok(());
    };
    let mut ages = family(encoder, age_name, age_help, MetricType::Gauge)?;
    for s in series {
        let Some(oldest) = s.oldest else { continue };
        let seconds = now.duration_since(oldest).as_secs_f64().max(0.0).floor();
        let pairs: Vec<(&str, &str)> = labels
            .iter()
            .copied()
            .zip(s.labels.iter().map(String::as_str))
            .collect();
        ConstGauge::new(seconds).encode(ages.encode_family(&pairs)?)?;
    }
    Ok(())
}

/// [`PendingMetrics`] as one scrape encodes them.
#[derive(Debug)]
pub struct PendingCollector {
    pub(super) metrics: Arc<PendingMetrics>,
}

impl Collector for PendingCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        let m = &self.metrics;
        for (name, help, value) in [
            (
                "sched_pending_evaluations",
                "Evaluations of the pending pods (each a triage of every namespace).",
                m.evaluations.get(),
            ),
            (
                "sched_pending_evaluation_failures",
                "Evaluations that did not finish (the last published one stays).",
                m.failures.get(),
            ),
        ] {
            ConstCounter::new(value).encode(family(&mut encoder, name, help, MetricType::Counter)?)?;
        }
        // Until the first evaluation there is nothing to say: no series, rather than zeros that an
        // alert would read as "nothing pending".
        let Some(published) = m.published() else {
            return Ok(());
        };
        gauge(
            &mut encoder,
            "sched_pending_last_evaluation_timestamp_seconds",
            "When the published evaluation finished (Unix time).",
            published.finished.as_second(),
        )?;
        gauge(
            &mut encoder,
            "sched_pending_evaluation_duration_seconds",
            "How long the published evaluation took.",
            published.took.as_secs_f64(),
        )?;
        gauge(
            &mut encoder,
            "sched_pending_snapshot_resource_version",
            "The resourceVersion of the snapshot the published evaluation read.",
            published.resource_version as i64,
        )?;
        let t = &published.tally;
        gauge(
            &mut encoder,
            "sched_pending_shapes",
            "Distinct scheduling shapes the published evaluation evaluated (one evaluation each).",
            t.shapes as i64,
        )?;
        gauge(
            &mut encoder,
            "sched_pending_series_folded",
            "Series folded into `_other` ones by the cardinality bound in the published evaluation.",
            t.folded as i64,
        )?;
        let now = Timestamp::now();
        pod_families(
            &mut encoder,
            (
                PENDING_PODS,
                "Pending pods by namespace and triage verdict (unschedulable, fits, gated, claims_not_created, other_scheduler, error).",
            ),
            None,
            &VERDICT_LABELS,
            &t.by_verdict,
            now,
        )?;
        pod_families(
            &mut encoder,
            (
                UNSCHEDULABLE_PODS,
                "Unschedulable pods by namespace, workload, and the root cause triage finds: the plugin and its reason (what must change).",
            ),
            Some((
                UNSCHEDULABLE_OLDEST,
                "Age of the oldest pod of the series (since its creation: a pending pod never ran).",
            )),
            &UNSCHEDULABLE_LABELS,
            &t.unschedulable,
            now,
        )?;
        pod_families(
            &mut encoder,
            (
                FITS_NOW_PODS,
                "Pods that fit a node now although kube-scheduler's last word (PodScheduled=False) was that they do not.",
            ),
            Some((FITS_NOW_OLDEST, "Age of the oldest pod of the series.")),
            &WORKLOAD_LABELS,
            &t.fits_now,
            now,
        )?;
        pod_families(
            &mut encoder,
            (
                NOT_TRIED_PODS,
                "Pending pods without a PodScheduled condition: kube-scheduler has not tried them (yet).",
            ),
            Some((NOT_TRIED_OLDEST, "Age of the oldest pod of the series.")),
            &NAMESPACE_LABELS,
            &t.not_tried,
            now,
        )
    }
}
