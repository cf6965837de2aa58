//! Prometheus metrics and the admin port's `/metrics` exposition.
//!
//! The request path only touches atomics: the plain counters are prometheus-client's (atomic)
//! [`Counter`]s, and the per-operation/outcome counts and the latency histogram are fixed arrays of
//! atomics, because prometheus-client's `Family` takes a lock per increment and its `Histogram` a mutex
//! per observation. At scrape time [`WebhookCollector`] (and the collectors of `health` and
//! `serving`) hand the values to prometheus-client, which writes the Prometheus text format 0.0.4
//! ([`exposition`]): the format, names, types, labels and help texts the hand-written exposition had.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeGaugeValue, EncodeMetric, MetricEncoder, NoLabelSet, prometheus_text,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use crate::admission::Operation;

/// The `Content-Type` of [`exposition`]'s text (Prometheus text format 0.0.4).
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// Encodes every metric of `registry` in the Prometheus text format 0.0.4.
pub fn exposition(registry: &Registry) -> String {
    let mut text = String::with_capacity(4096);
    // Writing into a String cannot fail; a collector's own error would leave the text short, never panic.
    let _ = prometheus_text::encode(&mut text, registry);
    text
}

/// Starts a family: `# HELP` and `# TYPE`. `name` is the family's name without the `_total` that
/// the encoder appends to counters.
pub(crate) fn family<'e>(
    encoder: &'e mut DescriptorEncoder<'_>,
    name: &'e str,
    help: &str,
    metric_type: MetricType,
) -> Result<MetricEncoder<'e>, fmt::Error> {
    encoder.encode_descriptor(name, help, None, metric_type)
}

/// One counter family without labels.
pub(crate) fn counter(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    value: u64,
) -> fmt::Result {
    ConstCounter::new(value).encode(family(encoder, name, help, MetricType::Counter)?)
}

/// One gauge family without labels.
pub(crate) fn gauge<N: EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    value: N,
) -> fmt::Result {
    ConstGauge::new(value).encode(family(encoder, name, help, MetricType::Gauge)?)
}

/// How a request ended (the `outcome` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestOutcome {
    /// Admitted unchanged.
    Allowed,
    /// Admitted with a patch.
    Patched,
    /// Denied.
    Denied,
    /// Answered with a 4xx (malformed, wrong content type, too large).
    Rejected,
}

impl RequestOutcome {
    const ALL: [RequestOutcome; 4] = [
        RequestOutcome::Allowed,
        RequestOutcome::Patched,
        RequestOutcome::Denied,
        RequestOutcome::Rejected,
    ];

    fn as_str(self) -> &'static str {
        match self {
            RequestOutcome::Allowed => "allowed",
            RequestOutcome::Patched => "patched",
            RequestOutcome::Denied => "denied",
            RequestOutcome::Rejected => "rejected",
        }
    }
}

/// Upper bounds of the latency histogram, in seconds: from 50 µs (the fast path) to the API server's
/// largest webhook bucket.
pub const LATENCY_BUCKETS: [f64; 14] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 2.5,
];

const OPS: usize = Operation::ALL.len();
const OUTCOMES: usize = RequestOutcome::ALL.len();

fn op_index(op: Operation) -> usize {
    Operation::ALL.iter().position(|o| *o == op).unwrap_or(0)
}

fn outcome_index(outcome: RequestOutcome) -> usize {
    RequestOutcome::ALL
        .iter()
        .position(|o| *o == outcome)
        .unwrap_or(0)
}

/// The latency histogram: per-bucket counts (not cumulative, so an observation touches one atomic),
/// the last one past [`LATENCY_BUCKETS`] (`+Inf` only).
#[derive(Debug, Default)]
struct LatencyHistogram {
    buckets: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

impl LatencyHistogram {
    fn observe(&self, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        let bucket = LATENCY_BUCKETS
            .iter()
            .position(|bound| secs <= *bound)
            .unwrap_or(LATENCY_BUCKETS.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_nanos.fetch_add(
            u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    /// `(upper bound, count)` per bucket, `+Inf` last, and the sum in seconds. The count is the
    /// buckets' total, so `_count` always equals the `+Inf` bucket even while requests are observed.
    fn snapshot(&self) -> (Vec<(f64, u64)>, f64) {
        let buckets = LATENCY_BUCKETS
            .iter()
            .copied()
            .chain([f64::INFINITY])
            .zip(&self.buckets)
            .map(|(bound, n)| (bound, n.load(Ordering::Relaxed)))
            .collect();
        (buckets, self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9)
    }
}

/// The webhook's counters.
#[derive(Debug, Default)]
pub struct Metrics {
    requests: [[AtomicU64; OUTCOMES]; OPS],
    latency: LatencyHistogram,
    bindings: Counter,
    conflicts_retried: Counter,
    nominations_cleared: Counter,
    plan_failures: Counter,
    pods_skipped: Counter,
    requests_shed: Counter,
    catch_up_reads: Counter,
    leader: AtomicBool,
}

impl Metrics {
    /// Records one answered request.
    pub fn observe(&self, op: Operation, outcome: RequestOutcome, elapsed: Duration) {
        self.requests[op_index(op)][outcome_index(outcome)].fetch_add(1, Ordering::Relaxed);
        self.latency.observe(elapsed);
    }

    /// A PV bound or a claim annotated.
    pub fn binding_done(&self) {
        self.bindings.inc();
    }

    /// A plan re-decided after a conflict.
    pub fn conflict_retried(&self) {
        self.conflicts_retried.inc();
    }

    /// A nomination cleared.
    pub fn nomination_cleared(&self) {
        self.nominations_cleared.inc();
    }

    /// A plan that failed for good.
    pub fn plan_failed(&self) {
        self.plan_failures.inc();
    }

    /// A stored pod the controller left to the scheduler (more claims than it considers).
    pub fn pod_skipped(&self) {
        self.pods_skipped.inc();
    }

    /// A request answered without a decision because every decision slot was taken.
    pub fn request_shed(&self) {
        self.requests_shed.inc();
    }

    /// Requests shed so far.
    pub fn requests_shed(&self) -> u64 {
        self.requests_shed.get()
    }

    /// A claim or class read from the API server because the watches had not delivered it.
    pub fn catch_up_read(&self) {
        self.catch_up_reads.inc();
    }

    /// Catch-up reads so far.
    pub fn catch_up_reads(&self) -> u64 {
        self.catch_up_reads.get()
    }

    /// Whether this replica holds the controller's Lease.
    pub fn set_leader(&self, leader: bool) {
        self.leader.store(leader, Ordering::Relaxed);
    }

    /// True while this replica holds the controller's Lease.
    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::Relaxed)
    }

    /// Plans that failed so far.
    pub fn plan_failures(&self) -> u64 {
        self.plan_failures.get()
    }

    /// Nominations cleared so far.
    pub fn nominations_cleared(&self) -> u64 {
        self.nominations_cleared.get()
    }

    /// Requests so far with this operation and outcome.
    pub fn requests(&self, op: Operation, outcome: RequestOutcome) -> u64 {
        self.requests[op_index(op)][outcome_index(outcome)].load(Ordering::Relaxed)
    }

    /// Bindings so far.
    pub fn bindings(&self) -> u64 {
        self.bindings.get()
    }

    /// Conflicts retried so far.
    pub fn conflicts_retried(&self) -> u64 {
        self.conflicts_retried.get()
    }

    /// Adds these metrics to `registry`, read at each encoding; `cache_ready` is this scrape's view
    /// of the caches.
    pub fn register(self: &Arc<Self>, registry: &mut Registry, cache_ready: bool) {
        registry.register_collector(Box::new(WebhookCollector {
            metrics: self.clone(),
            cache_ready,
        }));
    }

    /// These metrics alone in the text exposition format.
    pub fn render(self: &Arc<Self>, cache_ready: bool) -> String {
        let mut registry = Registry::default();
        self.register(&mut registry, cache_ready);
        exposition(&registry)
    }
}

/// [`Metrics`] as one scrape encodes them.
#[derive(Debug)]
pub struct WebhookCollector {
    metrics: Arc<Metrics>,
    cache_ready: bool,
}

impl Collector for WebhookCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        let m = &self.metrics;
        let mut requests = family(
            &mut encoder,
            "sched_webhook_requests",
            "Admission requests by operation and outcome.",
            MetricType::Counter,
        )?;
        for op in Operation::ALL {
            for outcome in RequestOutcome::ALL {
                let labels = [("operation", op.as_str()), ("outcome", outcome.as_str())];
                ConstCounter::new(m.requests(op, outcome)).encode(requests.encode_family(&labels)?)?;
            }
        }
        let (buckets, sum) = m.latency.snapshot();
        let count = buckets.iter().map(|(_, n)| n).sum();
        family(
            &mut encoder,
            "sched_webhook_request_duration_seconds",
            "Time to answer an admission request.",
            MetricType::Histogram,
        )?
        .encode_histogram::<NoLabelSet>(sum, count, &buckets, None)?;
        for (name, help, value) in [
            (
                "sched_webhook_bindings",
                "PersistentVolumes bound and claims annotated with a selected node.",
                &m.bindings,
            ),
            (
                "sched_webhook_conflicts_retried",
                "Plans decided again on fresh state after a write conflict.",
                &m.conflicts_retried,
            ),
            (
                "sched_webhook_nominations_cleared",
                "nominatedNodeName values cleared.",
                &m.nominations_cleared,
            ),
            (
                "sched_webhook_plan_failures",
                "Plans that could not be carried out.",
                &m.plan_failures,
            ),
            (
                "sched_webhook_pods_skipped",
                "Stored pods left to the scheduler because they use more claims than are considered.",
                &m.pods_skipped,
            ),
            (
                "sched_webhook_requests_shed",
                "Requests allowed unchanged, with a warning, because every decision slot was taken.",
                &m.requests_shed,
            ),
            (
                "sched_webhook_catch_up_reads",
                "Claims and classes read from the API server because the watches had not delivered them.",
                &m.catch_up_reads,
            ),
        ] {
            value.encode(family(&mut encoder, name, help, MetricType::Counter)?)?;
        }
        gauge(
            &mut encoder,
            "sched_webhook_leader",
            "Whether this replica holds the controller's Lease (only the leader writes).",
            i64::from(m.is_leader()),
        )?;
        gauge(
            &mut encoder,
            "sched_webhook_cache_ready",
            "Whether every reflector cache has synced.",
            i64::from(self.cache_ready),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_cumulative_buckets() {
        let m = Metrics::default();
        m.observe(
            Operation::PodCreate,
            RequestOutcome::Allowed,
            Duration::from_micros(80),
        );
        m.observe(
            Operation::PodBinding,
            RequestOutcome::Denied,
            Duration::from_millis(3),
        );
        m.binding_done();
        m.conflict_retried();
        let text = Arc::new(m).render(true);
        assert!(
            text.contains("sched_webhook_requests_total{operation=\"pod_create\",outcome=\"allowed\"} 1")
        );
        assert!(
            text.contains("sched_webhook_requests_total{operation=\"pod_binding\",outcome=\"denied\"} 1")
        );
        assert!(text.contains("sched_webhook_request_duration_seconds_bucket{le=\"0.0001\"} 1"));
        assert!(text.contains("sched_webhook_request_duration_seconds_bucket{le=\"0.005\"} 2"));
        assert!(text.contains("sched_webhook_request_duration_seconds_bucket{le=\"+Inf\"} 2"));
        assert!(text.contains("sched_webhook_request_duration_seconds_count 2"));
        assert!(text.contains("sched_webhook_bindings_total 1"));
        assert!(text.contains("sched_webhook_conflicts_retried_total 1"));
        assert!(text.contains("sched_webhook_cache_ready 1"));
    }
}
