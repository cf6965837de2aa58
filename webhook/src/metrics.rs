//! Prometheus metrics, kept in atomics (no lock on the request path) and rendered in the text
//! exposition format on the admin port's `/metrics`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::admission::Operation;

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

/// The webhook's counters.
#[derive(Debug, Default)]
pub struct Metrics {
    requests: [[AtomicU64; OUTCOMES]; OPS],
    latency_buckets: [AtomicU64; LATENCY_BUCKETS.len()],
    latency_count: AtomicU64,
    latency_sum_nanos: AtomicU64,
    bindings: AtomicU64,
    conflicts_retried: AtomicU64,
    nominations_cleared: AtomicU64,
    writes_undone: AtomicU64,
    plan_failures: AtomicU64,
    pods_skipped: AtomicU64,
    requests_shed: AtomicU64,
    catch_up_reads: AtomicU64,
    leader: std::sync::atomic::AtomicBool,
}

impl Metrics {
    /// Records one answered request.
    pub fn observe(&self, op: Operation, outcome: RequestOutcome, elapsed: Duration) {
        self.requests[op_index(op)][outcome_index(outcome)].fetch_add(1, Ordering::Relaxed);
        let secs = elapsed.as_secs_f64();
        for (bucket, bound) in self.latency_buckets.iter().zip(LATENCY_BUCKETS) {
            if secs <= bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.latency_count.fetch_add(1, Ordering::Relaxed);
        self.latency_sum_nanos.fetch_add(
            u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    /// A PV bound or a claim annotated.
    pub fn binding_done(&self) {
        self.bindings.fetch_add(1, Ordering::Relaxed);
    }

    /// A plan re-decided after a conflict.
    pub fn conflict_retried(&self) {
        self.conflicts_retried.fetch_add(1, Ordering::Relaxed);
    }

    /// A nomination cleared.
    pub fn nomination_cleared(&self) {
        self.nominations_cleared.fetch_add(1, Ordering::Relaxed);
    }

    /// A write taken back after a failed plan.
    pub fn write_undone(&self) {
        self.writes_undone.fetch_add(1, Ordering::Relaxed);
    }

    /// A plan that failed for good.
    pub fn plan_failed(&self) {
        self.plan_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// A stored pod the controller left to the scheduler (more claims than it considers).
    pub fn pod_skipped(&self) {
        self.pods_skipped.fetch_add(1, Ordering::Relaxed);
    }

    /// A request answered without a decision because every decision slot was taken.
    pub fn request_shed(&self) {
        self.requests_shed.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests shed so far.
    pub fn requests_shed(&self) -> u64 {
        self.requests_shed.load(Ordering::Relaxed)
    }

    /// A claim or class read from the API server because the watches had not delivered it.
    pub fn catch_up_read(&self) {
        self.catch_up_reads.fetch_add(1, Ordering::Relaxed);
    }

    /// Catch-up reads so far.
    pub fn catch_up_reads(&self) -> u64 {
        self.catch_up_reads.load(Ordering::Relaxed)
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
        self.plan_failures.load(Ordering::Relaxed)
    }

    /// Nominations cleared so far.
    pub fn nominations_cleared(&self) -> u64 {
        self.nominations_cleared.load(Ordering::Relaxed)
    }

    /// Requests so far with this operation and outcome.
    pub fn requests(&self, op: Operation, outcome: RequestOutcome) -> u64 {
        self.requests[op_index(op)][outcome_index(outcome)].load(Ordering::Relaxed)
    }

    /// Bindings so far.
    pub fn bindings(&self) -> u64 {
        self.bindings.load(Ordering::Relaxed)
    }

    /// Conflicts retried so far.
    pub fn conflicts_retried(&self) -> u64 {
        self.conflicts_retried.load(Ordering::Relaxed)
    }

    /// The text exposition format.
    pub fn render(&self, cache_ready: bool) -> String {
        let mut out = String::with_capacity(4096);
        let counter = |out: &mut String, name: &str, help: &str, value: u64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}");
        };
        let _ = writeln!(
            out,
            "# HELP sched_webhook_requests_total Admission requests by operation and outcome.\n# TYPE sched_webhook_requests_total counter"
        );
        for op in Operation::ALL {
            for outcome in RequestOutcome::ALL {
                let _ = writeln!(
                    out,
                    "sched_webhook_requests_total{{operation=\"{}\",outcome=\"{}\"}} {}",
                    op.as_str(),
                    outcome.as_str(),
                    self.requests(op, outcome)
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP sched_webhook_request_duration_seconds Time to answer an admission request.\n# TYPE sched_webhook_request_duration_seconds histogram"
        );
        for (bucket, bound) in self.latency_buckets.iter().zip(LATENCY_BUCKETS) {
            let _ = writeln!(
                out,
                "sched_webhook_request_duration_seconds_bucket{{le=\"{bound}\"}} {}",
                bucket.load(Ordering::Relaxed)
            );
        }
        let count = self.latency_count.load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "sched_webhook_request_duration_seconds_bucket{{le=\"+Inf\"}} {count}\nsched_webhook_request_duration_seconds_sum {}\nsched_webhook_request_duration_seconds_count {count}",
            self.latency_sum_nanos.load(Ordering::Relaxed) as f64 / 1e9
        );
        counter(
            &mut out,
            "sched_webhook_bindings_total",
            "PersistentVolumes bound and claims annotated with a selected node.",
            self.bindings(),
        );
        counter(
            &mut out,
            "sched_webhook_conflicts_retried_total",
            "Plans decided again on fresh state after a write conflict.",
            self.conflicts_retried(),
        );
        counter(
            &mut out,
            "sched_webhook_nominations_cleared_total",
            "nominatedNodeName values cleared.",
            self.nominations_cleared.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "sched_webhook_writes_undone_total",
            "Writes taken back after a plan failed.",
            self.writes_undone.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "sched_webhook_plan_failures_total",
            "Plans that could not be carried out.",
            self.plan_failures.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "sched_webhook_pods_skipped_total",
            "Stored pods left to the scheduler because they use more claims than are considered.",
            self.pods_skipped.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "sched_webhook_requests_shed_total",
            "Requests allowed unchanged, with a warning, because every decision slot was taken.",
            self.requests_shed(),
        );
        counter(
            &mut out,
            "sched_webhook_catch_up_reads_total",
            "Claims and classes read from the API server because the watches had not delivered them.",
            self.catch_up_reads(),
        );
        let _ = writeln!(
            out,
            "# HELP sched_webhook_leader Whether this replica holds the controller's Lease (only the leader writes).\n# TYPE sched_webhook_leader gauge\nsched_webhook_leader {}",
            u8::from(self.is_leader())
        );
        let _ = writeln!(
            out,
            "# HELP sched_webhook_cache_ready Whether every reflector cache has synced.\n# TYPE sched_webhook_cache_ready gauge\nsched_webhook_cache_ready {}",
            u8::from(cache_ready)
        );
        out
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
        let text = m.render(true);
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
