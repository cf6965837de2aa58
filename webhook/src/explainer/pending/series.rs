//! From a triage report to the series the pending-reason metrics export, with their cardinality
//! bounded. Pure: no clock, no I/O (the ages are taken at scrape time from the oldest creation
//! timestamps kept here).
//!
//! The bound: a family keeps its [`MAX_SERIES`] largest series (by pods) with their labels; the rest
//! are folded into series whose workload labels are [`OTHER`], one per remaining reason (for the
//! unschedulable family: plugin and reason kept) up to [`MAX_TAIL_SERIES`], and whatever is left into
//! one series that is [`OTHER`] everywhere. A family thus never has more than
//! `MAX_SERIES + MAX_TAIL_SERIES + 1` series, whatever the cluster, and its series always add up to
//! every pod counted (nothing is dropped, only aggregated).

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use kubectl_sched::commands::triage::{TriageReport, Verdict};
use kubectl_sched::diagnosis::still_pending::PendingKind;

/// The label value of series folded together. Not a valid namespace or object name (they are DNS
/// labels and subdomains, without `_`), so it never collides with a real one.
pub const OTHER: &str = "_other";
/// Series a family keeps with every label.
pub const MAX_SERIES: usize = 100;
/// Series the rest are folded into, keyed by their reason, before the last catch-all series.
pub const MAX_TAIL_SERIES: usize = 20;
/// The plugin label of a PreFilter rejection (a triage root cause without a plugin: the reason itself
/// names what is missing).
pub const PRE_FILTER: &str = "PreFilter";
/// The workload kind label of a pod group's pods, decided together by the pod group cycle.
pub const POD_GROUP_KIND: &str = "podgroup";

/// The `verdict` label: triage's verdict in its `-o json` words.
pub fn verdict_label(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Unschedulable => "unschedulable",
        Verdict::Error => "error",
        Verdict::Gated => "gated",
        Verdict::ClaimsNotCreated => "claims_not_created",
        Verdict::OtherScheduler => "other_scheduler",
        Verdict::Fits => "fits",
    }
}

/// What a pending pod's own object says, beside the verdict: read before the objects go to the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodFacts {
    /// `metadata.creationTimestamp` (the pod has been pending since: it never ran).
    pub created: Option<Timestamp>,
    /// kube-scheduler has written a `PodScheduled` condition (it tried the pod, or found it gated).
    pub tried: bool,
}

impl PodFacts {
    /// The facts of `pod`.
    pub fn of(pod: &Pod) -> Self {
        PodFacts {
            created: pod.metadata.creation_timestamp.as_ref().map(|t| t.0),
            tried: pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "PodScheduled")),
        }
    }
}

/// The pending pods' facts by `(namespace, name)`: the pods without a node.
pub fn pending_pod_facts(pods: &[Pod]) -> HashMap<(String, String), PodFacts> {
    pods.iter()
        .filter(|p| {
            p.spec
                .as_ref()
                .is_none_or(|s| s.node_name.as_deref().unwrap_or("").is_empty())
        })
        .map(|p| {
            let key = (
                p.metadata.namespace.clone().unwrap_or_default(),
                p.metadata.name.clone().unwrap_or_default(),
            );
            (key, PodFacts::of(p))
        })
        .collect()
}

/// One series: its label values (in the family's label order), its pods and the oldest one's
/// creation time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Series {
    /// The label values.
    pub labels: Vec<String>,
    /// Pods.
    pub pods: u64,
    /// The oldest pod's creation time (None: no pod of the series has one).
    pub oldest: Option<Timestamp>,
}

impl Series {
    fn add(&mut self, pods: u64, oldest: Option<Timestamp>) {
        self.pods += pods;
        self.oldest = match (self.oldest, oldest) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// Series being counted, by label values.
#[derive(Debug, Default)]
struct Counting(BTreeMap<Vec<String>, Series>);

impl Counting {
    fn add(&mut self, labels: Vec<String>, facts: Option<&PodFacts>) {
        self.0
            .entry(labels.clone())
            .or_insert_with(|| Series {
                labels,
                pods: 0,
                oldest: None,
            })
            .add(1, facts.and_then(|f| f.created));
    }

    /// The series, bounded: see the module's rule. `tail_keeps` are the label positions the folded
    /// series keep. Returns the series and how many were folded.
    fn capped(self, tail_keeps: &[usize]) -> (Vec<Series>, usize) {
        cap(
            self.0.into_values().collect(),
            MAX_SERIES,
            tail_keeps,
            MAX_TAIL_SERIES,
        )
    }
}

/// Most pods first, then by labels (a stable choice when counts tie).
fn by_size(series: &mut [Series]) {
    series.sort_by(|a, b| b.pods.cmp(&a.pods).then_with(|| a.labels.cmp(&b.labels)));
}

/// Keeps the `max` largest of `series`, folds the rest into series that keep only the labels at
/// `tail_keeps` (at most `max_tail` of them, the largest), and what remains into one series of
/// [`OTHER`] everywhere. Returns the series and how many of the input were folded.
pub fn cap(
    mut series: Vec<Series>,
    max: usize,
    tail_keeps: &[usize],
    max_tail: usize,
) -> (Vec<Series>, usize) {
    by_size(&mut series);
    if series.len() <= max {
        return (series, 0);
    }
    let rest = series.split_off(max);
    let folded = rest.len();
    let fold = |s: &Series, keep: &[usize]| -> Vec<String> {
        (0..s.labels.len())
            .map(|i| {
                if keep.contains(&i) {
                    s.labels[i].clone()
                } else {
                    OTHER.to_string()
                }
            })
            .collect()
    };
    let mut tail: BTreeMap<Vec<String>, Series> = BTreeMap::new();
    for s in &rest {
        let labels = fold(s, tail_keeps);
        tail.entry(labels.clone())
            .or_insert_with(|| Series {
                labels,
                pods: 0,
                oldest: None,
            })
            .add(s.pods, s.oldest);
    }
    let mut tail: Vec<Series> = tail.into_values().collect();
    by_size(&mut tail);
    if tail.len() > max_tail {
        let mut last: Option<Series> = None;
        for s in tail.split_off(max_tail) {
            let labels = fold(&s, &[]);
            last.get_or_insert(Series {
                labels,
                pods: 0,
                oldest: None,
            })
            .add(s.pods, s.oldest);
        }
        // A catch-all that equals a tail series (no label kept) is that series.
        if let Some(last) = last {
            match tail.iter_mut().find(|t| t.labels == last.labels) {
                Some(t) => t.add(last.pods, last.oldest),
                None => tail.push(last),
            }
        }
    }
    series.extend(tail);
    (series, folded)
}

/// The pending pods as the metrics count them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Every pending pod, labels `namespace`, `verdict`.
    pub by_verdict: Vec<Series>,
    /// Unschedulable pods, labels `namespace`, `workload_kind`, `workload`, `plugin`, `reason` (the
    /// root cause: what must change).
    pub unschedulable: Vec<Series>,
    /// Pods that fit now although kube-scheduler's last word was that they do not (the still-Pending
    /// diagnosis), labels `namespace`, `workload_kind`, `workload`.
    pub fits_now: Vec<Series>,
    /// Pending pods without a `PodScheduled` condition (kube-scheduler has not tried them), label
    /// `namespace`.
    pub not_tried: Vec<Series>,
    /// Series folded into [`OTHER`] ones, over every family.
    pub folded: usize,
    /// Pending pods evaluated.
    pub pods: usize,
    /// Distinct scheduling shapes evaluated.
    pub shapes: usize,
}

/// Counts `report`'s pods; `facts` are the pending pods' own (by `(namespace, name)`).
pub fn tally(report: &TriageReport, facts: &HashMap<(String, String), PodFacts>) -> Tally {
    let mut by_verdict = Counting::default();
    let mut unschedulable = Counting::default();
    let mut fits_now = Counting::default();
    let mut not_tried = Counting::default();
    let mut count_pod = |namespace: &str, name: &str, verdict: &str| -> Option<PodFacts> {
        let f = facts.get(&(namespace.to_string(), name.to_string())).copied();
        by_verdict.add(vec![namespace.to_string(), verdict.to_string()], f.as_ref());
        if f.is_some_and(|f| !f.tried) {
            not_tried.add(vec![namespace.to_string()], f.as_ref());
        }
        f
    };
    for cause in &report.causes {
        for w in &cause.workloads {
            let fit_now =
                w.verdict == Verdict::Fits && w.still_pending.iter().any(|f| f.kind == PendingKind::FitsNow);
            let (plugin, reason) = match &w.root_cause {
                Some(c) => (c.plugin.as_deref().unwrap_or(PRE_FILTER), c.reason.as_str()),
                None => (PRE_FILTER, w.message.as_str()),
            };
            let workload = [
                w.workload.namespace.clone(),
                w.workload.kind.clone(),
                w.workload.name.clone(),
            ];
            for pod in &w.pods {
                let f = count_pod(&w.workload.namespace, pod, verdict_label(w.verdict));
                if w.verdict == Verdict::Unschedulable {
                    let mut labels = workload.to_vec();
                    labels.extend([plugin.to_string(), reason.to_string()]);
                    unschedulable.add(labels, f.as_ref());
                }
                if fit_now {
                    fits_now.add(workload.to_vec(), f.as_ref());
                }
            }
        }
    }
    for group in &report.pod_groups {
        let r = &group.report;
        let schedulable = r.schedulable();
        let verdict = if schedulable {
            Verdict::Fits
        } else {
            Verdict::Unschedulable
        };
        for pod in &group.pods {
            let f = count_pod(&r.namespace, pod, verdict_label(verdict));
            if !schedulable {
                let labels = vec![
                    r.namespace.clone(),
                    POD_GROUP_KIND.to_string(),
                    r.pod_group.clone(),
                    sched_core::plugins::names::GANG_SCHEDULING.to_string(),
                    format!("{:?}", r.outcome),
                ];
                unschedulable.add(labels, f.as_ref());
            }
        }
    }
    let (by_verdict, a) = by_verdict.capped(&[1]);
    let (unschedulable, b) = unschedulable.capped(&[3, 4]);
    let (fits_now, c) = fits_now.capped(&[]);
    let (not_tried, d) = not_tried.capped(&[]);
    Tally {
        by_verdict,
        unschedulable,
        fits_now,
        not_tried,
        folded: a + b + c + d,
        pods: report.pods,
        shapes: report.shapes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(labels: &[&str], pods: u64, oldest_s: i64) -> Series {
        Series {
            labels: labels.iter().map(|s| s.to_string()).collect(),
            pods,
            oldest: Some(Timestamp::from_second(oldest_s).unwrap()),
        }
    }

    /// The bound holds and nothing is lost: the kept series are the largest, the folded ones keep
    /// their reason, and the pods add up to the input's.
    #[test]
    fn cap_bounds_the_series_and_keeps_every_pod() {
        // (name, input series as (namespace, reason, pods), max, max_tail, want series count, want
        // the largest kept, want folded)
        type Case<'a> = (&'a str, Vec<(&'a str, &'a str, u64)>, usize, usize, usize, usize);
        let cases: Vec<Case<'_>> = vec![
            (
                "under the bound",
                vec![("a", "cpu", 3), ("b", "gpu", 2)],
                5,
                5,
                2,
                0,
            ),
            (
                "the rest folded by reason",
                vec![("a", "cpu", 9), ("b", "cpu", 1), ("c", "gpu", 1), ("d", "cpu", 1)],
                1,
                5,
                3,
                3,
            ),
            (
                "reasons past the tail into one catch-all",
                vec![("a", "r1", 9), ("b", "r2", 3), ("c", "r3", 2), ("d", "r4", 1)],
                1,
                1,
                3,
                3,
            ),
        ];
        for (name, input, max, max_tail, want_len, want_folded) in cases {
            let total: u64 = input.iter().map(|s| s.2).sum();
            let input: Vec<Series> = input
                .iter()
                .enumerate()
                .map(|(i, (ns, reason, pods))| series(&[ns, reason], *pods, 1000 + i as i64))
                .collect();
            let largest = input.iter().max_by_key(|s| s.pods).unwrap().clone();
            let oldest = input.iter().filter_map(|s| s.oldest).min();
            let (out, folded) = cap(input, max, &[1], max_tail);
            assert_eq!(out.len(), want_len, "{name}: {out:?}");
            assert!(out.len() <= max + max_tail + 1, "{name}");
            assert_eq!(folded, want_folded, "{name}");
            assert_eq!(out[0], largest, "{name}");
            assert_eq!(out.iter().map(|s| s.pods).sum::<u64>(), total, "{name}");
            assert_eq!(out.iter().filter_map(|s| s.oldest).min(), oldest, "{name}");
            if folded > 0 {
                // The folded series name no namespace.
                assert!(out[max..].iter().all(|s| s.labels[0] == OTHER), "{name}: {out:?}");
            }
        }
    }

    #[test]
    fn folded_series_keep_their_reason() {
        let input = vec![
            series(&["a", "cpu"], 5, 1),
            series(&["b", "cpu"], 2, 2),
            series(&["c", "gpu"], 1, 3),
        ];
        let (out, _) = cap(input, 1, &[1], 5);
        let labels: Vec<Vec<&str>> = out
            .iter()
            .map(|s| s.labels.iter().map(String::as_str).collect())
            .collect();
        assert_eq!(labels, [vec!["a", "cpu"], vec![OTHER, "cpu"], vec![OTHER, "gpu"]]);
    }
}
