//! "Why is it still Pending?": compares what kube-scheduler last said about a pending pod (its
//! `PodScheduled` condition, its latest FailedScheduling event) with the engine's verdict now, and
//! names the gap the verdict alone does not show:
//!
//! - nothing schedules it: its schedulerName names no profile of the configuration, or no
//!   kube-scheduler holds the leader-election Lease `kube-system/kube-scheduler`;
//! - it is gated (`spec.schedulingGates`);
//! - its ResourceClaims are still to be made from their templates: kube-scheduler does not try it
//!   until kube-controller-manager's resourceclaim controller has made them (not kube-scheduler's
//!   doing);
//! - it is nominated to a node whose victims are still terminating (a finalizer nobody removes keeps
//!   one there forever);
//! - it fits now although kube-scheduler's last word was "unschedulable" (the cluster changed since;
//!   when it will be retried), or kube-scheduler never tried it.
//!
//! [`why_still_pending`] is pure: the live facts (the Lease, the events) are fetched by the caller
//! (`load::Cluster`, see [`LiveFacts::fetch`]) and passed in, so `explain` and `triage` share it
//! without a framework or a cycle state. From a snapshot file there are no live facts: the findings
//! rest on the pod's condition alone.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, PodCondition};
use k8s_openapi::jiff::Timestamp;
use sched_core::dra::templates::{ClaimNotCreated, claims_not_created};
use sched_core::explain::{Explanation, Outcome};
use sched_core::{PodInfo, Snapshot};
use serde::Serialize;

use crate::diagnosis::headline::claims_not_created_headline;
use crate::diagnosis::hints::{MAX_NAMES, name_list};
use crate::source::load::{Cluster, SCHEDULER_LEASE_NAME, SCHEDULER_LEASE_NAMESPACE};

/// kube-scheduler's `podInitialBackoffDuration`: the backoff after a pod's first failed attempt.
pub const POD_INITIAL_BACKOFF: Duration = Duration::from_secs(1);
/// kube-scheduler's `podMaxBackoffDuration`: the backoff doubles per failed attempt up to this.
pub const POD_MAX_BACKOFF: Duration = Duration::from_secs(10);
/// kube-scheduler's `podMaxInUnschedulablePodsDuration`: an unschedulable pod no cluster event woke
/// is retried after this long anyway.
pub const POD_MAX_IN_UNSCHEDULABLE_PODS: Duration = Duration::from_secs(5 * 60);
/// kube-scheduler's default `leaderElection.leaseDuration`, for a Lease that does not say.
const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);

/// What a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PendingKind {
    /// The pod's schedulerName names no profile of the configuration: kube-scheduler ignores it.
    NoProfile,
    /// No kube-scheduler holds (or keeps renewing) the leader-election Lease: none is leading.
    NoScheduler,
    /// `spec.schedulingGates` keeps the pod out of the scheduling queue.
    Gated,
    /// A ResourceClaim the pod gets from a template does not exist yet: kube-scheduler waits for
    /// kube-controller-manager's resourceclaim controller to make it.
    ClaimNotCreated,
    /// The pod is nominated to a node where pods (the preemption's victims) are still terminating.
    VictimsTerminating,
    /// The pod fits now, but kube-scheduler's last word was that it does not: the cluster changed.
    FitsNow,
    /// kube-scheduler has recorded no attempt at the pod, although the Lease says one leads.
    NeverTried,
}

/// One reason the pod is still Pending.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PendingFinding {
    /// What it is about.
    pub kind: PendingKind,
    /// The finding, in words.
    pub message: String,
    /// The pods it names (`namespace/name`; the terminating victims), empty otherwise.
    pub pods: Vec<String>,
}

/// What the API server says about kube-scheduler's leader election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchedulerPresence {
    /// The Lease `kube-system/kube-scheduler` does not exist: no kube-scheduler (with leader
    /// election, its default) runs or ever ran against this cluster.
    NoLease,
    /// The Lease.
    Lease(SchedulerLease),
}

/// The facts of the Lease `kube-system/kube-scheduler` that say whether a kube-scheduler leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerLease {
    /// `spec.holderIdentity` (none or empty: released by the last leader).
    pub holder: Option<String>,
    /// `spec.renewTime`.
    pub renewed: Option<Timestamp>,
    /// `spec.leaseDurationSeconds` (kube-scheduler's default, 15 s, when absent or not positive).
    pub lease_duration: Duration,
}

impl SchedulerLease {
    /// The facts of a Lease object.
    pub fn from_lease(lease: &Lease) -> Self {
        let spec = lease.spec.as_ref();
        SchedulerLease {
            holder: spec
                .and_then(|s| s.holder_identity.clone())
                .filter(|h| !h.is_empty()),
            renewed: spec.and_then(|s| s.renew_time.as_ref()).map(|t| t.0),
            lease_duration: spec
                .and_then(|s| s.lease_duration_seconds)
                .and_then(|s| u64::try_from(s).ok())
                .filter(|s| *s > 0)
                .map_or(DEFAULT_LEASE_DURATION, Duration::from_secs),
        }
    }
}

/// One FailedScheduling event of the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastSchedulingEvent {
    /// Its note (kube-scheduler's message).
    pub message: String,
    /// When it was last seen (the series' last observation, else the latest timestamp it has).
    pub at: Option<Timestamp>,
    /// How many times it was seen.
    pub count: i32,
}

impl LastSchedulingEvent {
    /// The facts of an event (kube-scheduler writes events.k8s.io/v1 events; read through core/v1,
    /// its series and times land in different fields, all of which are looked at).
    pub fn from_event(event: &Event) -> Self {
        let at = event
            .series
            .as_ref()
            .and_then(|s| s.last_observed_time.as_ref())
            .map(|t| t.0)
            .or_else(|| event.last_timestamp.as_ref().map(|t| t.0))
            .or_else(|| event.event_time.as_ref().map(|t| t.0))
            .or_else(|| event.first_timestamp.as_ref().map(|t| t.0))
            .or_else(|| event.metadata.creation_timestamp.as_ref().map(|t| t.0));
        LastSchedulingEvent {
            message: event.message.clone().unwrap_or_default(),
            at,
            count: event
                .series
                .as_ref()
                .and_then(|s| s.count)
                .or(event.count)
                .unwrap_or(1)
                .max(1),
        }
    }
}

/// The live facts [`why_still_pending`] can use, fetched from the API server, with what could not be
/// fetched (for `-v 1`: a 403 or 404 is not an error, the finding is just not made).
#[derive(Debug, Clone, Default)]
pub struct LiveFacts {
    /// kube-scheduler's leader election (none when the Lease could not be read).
    pub scheduler: Option<SchedulerPresence>,
    /// The pod's FailedScheduling events.
    pub events: Vec<LastSchedulingEvent>,
    /// Why a fact is missing.
    pub notes: Vec<String>,
}

impl LiveFacts {
    /// Reads the Lease `kube-system/kube-scheduler` and `pod`'s FailedScheduling events.
    pub fn fetch(cluster: &Cluster, pod: &PodInfo) -> Self {
        let mut facts = LiveFacts::default();
        match cluster.scheduler_lease() {
            Ok(Some(lease)) => {
                facts.scheduler = Some(SchedulerPresence::Lease(SchedulerLease::from_lease(&lease)));
            }
            Ok(None) => facts.scheduler = Some(SchedulerPresence::NoLease),
            Err(e) => facts.notes.push(format!(
                "still pending: could not read the Lease {SCHEDULER_LEASE_NAMESPACE}/{SCHEDULER_LEASE_NAME} \
                 ({e}): whether a kube-scheduler leads is not judged"
            )),
        }
        if pod.uid().is_empty() {
            return facts;
        }
        match cluster.failed_scheduling_events(pod.namespace(), pod.uid()) {
            Ok(events) => facts.events = events.iter().map(LastSchedulingEvent::from_event).collect(),
            Err(e) => facts.notes.push(format!(
                "still pending: could not list the FailedScheduling events of {} ({e}): only its \
                 PodScheduled condition says what kube-scheduler last said",
                pod.key()
            )),
        }
        facts
    }
}

/// Why `pod` (pending) is still Pending: the findings, most fundamental first (nothing schedules it,
/// it is gated, it waits for victims, the cluster changed since kube-scheduler last tried). Empty
/// when kube-scheduler's last word and `now_verdict` agree and nothing else stands in the way.
///
/// `now_verdict` is the engine's evaluation of the pod as it is (gated pods: the gated one);
/// `profile_known` says whether its schedulerName names a profile of the configuration (when not,
/// the verdict is another profile's); `snapshot` is the cluster (the pod's nominated node's pods);
/// `scheduler` is the Lease's word, none when unknown (a snapshot file, or the Lease could not be
/// read); `events` are the pod's FailedScheduling events, in any order; `now` is the time to compare
/// the Lease's renewal and the last word with (the local clock: a skew of more than the lease
/// duration against the API server would misjudge the Lease).
pub fn why_still_pending(
    pod: &PodInfo,
    now_verdict: &Explanation,
    profile_known: bool,
    snapshot: &Snapshot,
    scheduler: Option<&SchedulerPresence>,
    events: &[LastSchedulingEvent],
    now: Timestamp,
) -> Vec<PendingFinding> {
    let mut out = Vec::new();
    let scheduler_name = sched_core::engine::scheduler_name(&pod.pod);
    if !profile_known {
        out.push(finding(
            PendingKind::NoProfile,
            format!(
                "its spec.schedulerName {scheduler_name:?} names no profile of the scheduler configuration: \
                 kube-scheduler ignores the pod, and unless another scheduler named {scheduler_name:?} runs, \
                 nothing schedules it (the verdict above is profile {}'s)",
                now_verdict.profile
            ),
        ));
    }
    // The Lease only speaks for the kube-scheduler this configuration describes. A missing Lease
    // leaves room for one that runs without leader election, so "it fits now" is still said (what a
    // scheduler said counts); behind a Lease left to expire no scheduler is trying, so it is not.
    let leading = match (profile_known, scheduler) {
        (true, Some(presence)) => match no_scheduler(presence, now) {
            Some(message) => {
                out.push(finding(PendingKind::NoScheduler, message));
                match presence {
                    SchedulerPresence::NoLease => None,
                    SchedulerPresence::Lease(_) => Some(false),
                }
            }
            None => Some(true),
        },
        _ => None,
    };
    let gates = scheduling_gates(&pod.pod);
    if !gates.is_empty() {
        out.push(finding(
            PendingKind::Gated,
            format!(
                "it has scheduling gates ({}): kube-scheduler does not try it until every gate is removed \
                 from spec.schedulingGates (by whatever added them)",
                gates.join(", ")
            ),
        ));
    }
    // DynamicResources' PreEnqueue keeps the pod out of the queue while a template claim has no
    // ResourceClaim: kube-scheduler has nothing to try, so silence from it proves nothing.
    let missing_claims = if now_verdict.outcome == Outcome::Gated {
        claims_not_created(snapshot, &pod.pod)
    } else {
        Vec::new()
    };
    if !missing_claims.is_empty() {
        out.push(claims_not_created_finding(pod, now_verdict, &missing_claims));
    }
    if let Some(f) = victims_terminating(pod, snapshot, now) {
        out.push(f);
    }
    if profile_known && gates.is_empty() && missing_claims.is_empty() && leading != Some(false) {
        let condition = scheduled_condition(pod);
        let event = newest(events);
        if condition.is_none() && event.is_none() {
            // Without a scheduler known to lead (a snapshot file, a missing Lease) silence proves
            // nothing: hand-written snapshots have no conditions.
            if leading == Some(true) {
                out.push(never_tried(pod, scheduler, now));
            }
        } else if now_verdict.outcome == Outcome::Scheduled {
            out.push(fits_now(now_verdict, condition, event, now));
        }
    }
    out
}

/// The pod waits for kube-controller-manager, not for kube-scheduler: which claims, from which
/// templates, in kube-scheduler's words too.
fn claims_not_created_finding(
    pod: &PodInfo,
    verdict: &Explanation,
    missing: &[ClaimNotCreated],
) -> PendingFinding {
    let stuck = if missing.iter().all(|c| c.template_exists) {
        "the resourceclaim controller has not made them: check that kube-controller-manager runs with \
         the resourceclaim controller (its --controllers) and what its log says about this pod"
    } else {
        "create the missing ResourceClaimTemplate, then the resourceclaim controller makes the claim"
    };
    finding(
        PendingKind::ClaimNotCreated,
        format!(
            "it waits for kube-controller-manager, not for kube-scheduler: {}. kube-scheduler does not try a \
             pod until each of its ResourceClaims exists (its words: {:?}); {stuck}",
            claims_not_created_headline(Some(pod.namespace()), missing),
            verdict.message
        ),
    )
}

fn finding(kind: PendingKind, message: String) -> PendingFinding {
    PendingFinding {
        kind,
        message,
        pods: Vec::new(),
    }
}

const LEASE: &str = "the Lease kube-system/kube-scheduler";

/// The NoScheduler message when the Lease says no kube-scheduler leads.
fn no_scheduler(presence: &SchedulerPresence, now: Timestamp) -> Option<String> {
    let lease = match presence {
        SchedulerPresence::NoLease => {
            return Some(format!(
                "no kube-scheduler holds {LEASE}: it does not exist, so no kube-scheduler with leader \
                 election (its default) runs against this cluster; unless one runs with leaderElect: false, \
                 nothing schedules the pod"
            ));
        }
        SchedulerPresence::Lease(lease) => lease,
    };
    let limit = lease.lease_duration.as_secs();
    let Some(holder) = &lease.holder else {
        return Some(format!(
            "no kube-scheduler holds {LEASE}: its last leader released it{}, so no kube-scheduler is \
             leading and nothing schedules the pod",
            lease
                .renewed
                .map(|t| format!(" ({})", when(t, now)))
                .unwrap_or_default()
        ));
    };
    match lease.renewed {
        None => Some(format!(
            "{LEASE} is held by {holder} but has no renewTime: no kube-scheduler is seen leading, so \
             nothing schedules the pod"
        )),
        Some(renewed) if seconds_between(renewed, now) > i64::try_from(limit).unwrap_or(i64::MAX) => {
            Some(format!(
                "no kube-scheduler is leading: {LEASE} was last renewed by {holder} {}, longer ago than its \
                 leaseDurationSeconds ({limit} s); that kube-scheduler stopped (or cannot reach the API \
                 server) and nothing schedules the pod",
                when(renewed, now)
            ))
        }
        Some(_) => None,
    }
}

/// The names of a pod's `spec.schedulingGates`, in order.
pub fn scheduling_gates(pod: &k8s_openapi::api::core::v1::Pod) -> Vec<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .into_iter()
        .flatten()
        .map(|g| g.name.clone())
        .collect()
}

/// The pods still terminating on the node the pod is nominated to: until they are gone their
/// requests stay on the node, so the preemption that nominated the pod has not made room yet.
fn victims_terminating(pod: &PodInfo, snapshot: &Snapshot, now: Timestamp) -> Option<PendingFinding> {
    let node_name = pod.nominated_node_name();
    if node_name.is_empty() {
        return None;
    }
    let node = snapshot.node(node_name)?;
    let mut victims: Vec<_> = node
        .pods
        .iter()
        .filter(|p| p.is_terminating() && p.uid() != pod.uid())
        .collect();
    if victims.is_empty() {
        return None;
    }
    victims.sort_by_key(|p| p.key());
    let stuck_forever = victims.iter().any(|v| !finalizers(v).is_empty());
    let described: Vec<String> = victims.iter().map(|v| describe_victim(v, now)).collect();
    let shown = name_list(&described, MAX_NAMES);
    Some(PendingFinding {
        kind: PendingKind::VictimsTerminating,
        message: format!(
            "it is nominated to {node_name} (status.nominatedNodeName) and waits there for {} \
             terminating pod(s) to be gone, whose requests still count on the node: {shown}{}",
            victims.len(),
            if stuck_forever {
                "; a finalizer that nobody removes keeps its pod there forever"
            } else {
                ""
            }
        ),
        pods: victims.iter().map(|v| v.key()).collect(),
    })
}

fn finalizers(pod: &PodInfo) -> Vec<String> {
    pod.pod.metadata.finalizers.clone().unwrap_or_default()
}

/// `ns/v (deletionTimestamp 2026-…Z, 3m ago; finalizers: example.com/stuck)`.
fn describe_victim(victim: &PodInfo, now: Timestamp) -> String {
    let deletion = victim
        .pod
        .metadata
        .deletion_timestamp
        .as_ref()
        .map(|t| {
            // Before the deletionTimestamp the pod is in its grace period: its kubelet is still
            // stopping it; after it, only the kubelet's confirmation or a finalizer keeps it.
            let grace = if seconds_between(t.0, now) < 0 {
                ", grace period not over"
            } else {
                ""
            };
            format!("deletionTimestamp {}{grace}", when(t.0, now))
        })
        .unwrap_or_default();
    let finalizers = finalizers(victim);
    let held = if finalizers.is_empty() {
        "no finalizers: its kubelet has not confirmed it is gone".to_string()
    } else {
        format!("finalizers: {}", finalizers.join(", "))
    };
    format!("{} ({deletion}; {held})", victim.key())
}

/// The `PodScheduled` condition kube-scheduler leaves on a pod it could not schedule (status False).
fn scheduled_condition(pod: &PodInfo) -> Option<&PodCondition> {
    pod.pod
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
}

/// The most recent event (undated ones count as oldest).
fn newest(events: &[LastSchedulingEvent]) -> Option<&LastSchedulingEvent> {
    events.iter().max_by_key(|e| e.at)
}

fn never_tried(pod: &PodInfo, scheduler: Option<&SchedulerPresence>, now: Timestamp) -> PendingFinding {
    let leader = match scheduler {
        Some(SchedulerPresence::Lease(SchedulerLease {
            holder: Some(holder),
            renewed: Some(renewed),
            ..
        })) => format!(
            ", although a kube-scheduler runs ({holder} holds {LEASE}, renewed {})",
            when(*renewed, now)
        ),
        _ => String::new(),
    };
    let created = pod
        .pod
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| format!("; the pod was created {}", when(t.0, now)))
        .unwrap_or_default();
    finding(
        PendingKind::NeverTried,
        format!(
            "kube-scheduler has not tried it yet: it has no PodScheduled condition and no FailedScheduling \
             event{leader}{created}"
        ),
    )
}

fn fits_now(
    verdict: &Explanation,
    condition: Option<&PodCondition>,
    event: Option<&LastSchedulingEvent>,
    now: Timestamp,
) -> PendingFinding {
    let placement = match verdict.selected.as_slice() {
        [] => String::new(),
        [one] => format!(" (on {one})"),
        several => format!(" (on one of {})", name_list(several, MAX_NAMES)),
    };
    let mut said = Vec::new();
    if let Some(c) = condition {
        said.push(format!(
            "PodScheduled=False ({}) since {}: {:?}",
            c.reason.as_deref().unwrap_or("no reason"),
            c.last_transition_time
                .as_ref()
                .map_or_else(|| "an unknown time".to_string(), |t| when(t.0, now)),
            c.message.as_deref().unwrap_or("")
        ));
    }
    if let Some(e) = event {
        // The condition usually carries the same message: not repeated.
        let same = condition.is_some_and(|c| c.message.as_deref() == Some(e.message.as_str()));
        said.push(format!(
            "FailedScheduling event{} {}{}",
            if e.count > 1 {
                format!(" (seen {} times)", e.count)
            } else {
                String::new()
            },
            e.at.map_or_else(
                || "at an unknown time".to_string(),
                |t| format!("last {}", when(t, now))
            ),
            if same {
                ", same message".to_string()
            } else {
                format!(": {:?}", e.message)
            }
        ));
    }
    let was_gated = condition.is_some_and(|c| c.reason.as_deref() == Some("SchedulingGated"));
    let message = if was_gated {
        format!(
            "it fits now{placement} and its scheduling gates are gone, but kube-scheduler last recorded it \
             as gated ({}): it queues the pod as soon as it sees the gates removed",
            said.join("; ")
        )
    } else {
        format!(
            "it fits now{placement}, but kube-scheduler's last word was that it does not ({}): the cluster \
             changed since. kube-scheduler retries it when a cluster event that may make it schedulable \
             arrives (after a backoff of {} s doubling with each failed attempt, at most {} s), and at the \
             latest after {} min in its unschedulable queue",
            said.join("; "),
            POD_INITIAL_BACKOFF.as_secs(),
            POD_MAX_BACKOFF.as_secs(),
            POD_MAX_IN_UNSCHEDULABLE_PODS.as_secs() / 60
        )
    };
    finding(PendingKind::FitsNow, message)
}

/// Seconds from `earlier` to `later` (negative when `earlier` is in the future).
fn seconds_between(earlier: Timestamp, later: Timestamp) -> i64 {
    later.as_second().saturating_sub(earlier.as_second())
}

/// `2026-11-25T12:03:04Z, 3m20s ago` (or `in 25s` for a time in the future).
fn when(t: Timestamp, now: Timestamp) -> String {
    let shown = Timestamp::from_second(t.as_second()).unwrap_or(t);
    let delta = seconds_between(t, now);
    if delta >= 0 {
        format!("{shown}, {} ago", span(delta.unsigned_abs()))
    } else {
        format!("{shown}, in {}", span(delta.unsigned_abs()))
    }
}

/// `45s`, `3m20s`, `2h5m`, `3d4h`.
fn span(seconds: u64) -> String {
    match seconds {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m{}s", s / 60, s % 60),
        s if s < 86_400 => format!("{}h{}m", s / 3600, s % 3600 / 60),
        s => format!("{}d{}h", s / 86_400, s % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests;
