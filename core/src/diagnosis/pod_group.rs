//! The diagnosis of a whole pod group (`explain podgroup/NAME`, triage's gang lines): the quorum
//! as the snapshot shows it, the verdict kube-scheduler's pod group cycle reaches for the group in
//! its own words, and what upstream does not say (kubernetes issue 141025): node by node, which
//! pods of the group the cycle placed there and why each node refuses the first pod it could not
//! place, explained by the per-plugin explainers ([`super::diagnose_pod`]); then the smallest
//! change that makes the whole group fit, each checked by running the group's cycle again on a
//! changed copy of the cluster, as a pod's hints are checked.
//!
//! What a snapshot cannot see: which pods wait at Permit (they live in kube-scheduler's memory
//! only, assumed on a node for up to 5 minutes) — a pending pod's `nominatedNodeName` is the only
//! trace, and is reported as such.

pub mod preemption;
pub mod tree;

use std::sync::Arc;

use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use serde::Serialize;

use super::finding::Finding;
use super::report::diagnose_pod;
use crate::engine::{Engine, Framework};
use crate::explain::Outcome;
use crate::framework::fit_error::reason_histogram;
use crate::plugins::gang_scheduling::{
    ERR_REASON_WAITING_FOR_POD_GROUP_PREFIX, ERR_REASON_WAITING_FOR_POD_GROUP_SUFFIX,
    ERR_REASON_WAITING_FOR_QUORUM, PERMIT_TIMEOUT_SECONDS,
};
use crate::schedule::ScheduleOptions;
use crate::schedule::composite::schedules_trees;
use crate::schedule::pod_group::{GroupCycle, has_scheduling_gates, pod_group_cycle, runs_pod_group_cycle};
use crate::snapshot::pod_group_tree::root_of;
use crate::snapshot::pod_groups::{PodGroupCounts, gang_min_count, pod_group_name};
use crate::snapshot::{Snapshot, namespaced_key};

/// At most this many nodes like the busiest one are tried for the "N more nodes" fix: each try
/// costs one run of the group's cycle (a binary search, so about log2 of it).
pub const MAX_ADDED_NODES: usize = 256;

/// Blockers named in a group's one-line summary (`-o json` has them all).
const MAX_SUMMARY_BLOCKERS: usize = 3;

/// What the snapshot cannot show about the group, said once in every report.
pub const PERMIT_NOT_VISIBLE: &str = "pods waiting at Permit (assumed on a node until minCount pods are \
     scheduled, at most 5 minutes) live only in kube-scheduler's memory: a snapshot shows them as pending; \
     a pending pod's nominatedNodeName is their only trace";

/// The state of a pod group as kube-scheduler's pod group state counts it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Quorum {
    /// The gang policy's `minCount` (null for the basic policy or a missing PodGroup).
    pub min_count: Option<i32>,
    /// Pods of the group that exist (not finished).
    pub pods: usize,
    /// Of those, bound to a node.
    pub scheduled: usize,
    /// Pending without scheduling gates: what the pod group cycle takes.
    pub queued: usize,
    /// Pending behind scheduling gates.
    pub gated: usize,
    /// Pending pods with a `nominatedNodeName`: `namespace/name` → node (a pod waiting at Permit, or
    /// one nominated by preemption; the snapshot cannot tell which).
    pub nominated: Vec<Nomination>,
    /// kube-scheduler's Permit timeout for a gang pod, in seconds.
    pub permit_timeout_seconds: u64,
}

/// A pending pod of the group with a nominated node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Nomination {
    /// The pod's name.
    pub pod: String,
    /// Its `status.nominatedNodeName`.
    pub node: String,
}

/// What kube-scheduler does with the group now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum GroupOutcome {
    /// The pod group cycle places every queued pod it can and reaches `minCount`: they are bound.
    Schedulable,
    /// The cycle cannot reach `minCount`: no pod of the group is bound; each gets a
    /// FailedScheduling message.
    Unschedulable,
    /// Fewer than `minCount` pods exist: GangScheduling's PreEnqueue holds them, silently.
    WaitingForQuorum,
    /// The PodGroup the pods name does not exist: PreEnqueue holds them, silently.
    WaitingForPodGroup,
    /// Every pod of the group is bound; nothing is pending.
    AllScheduled,
    /// The PodGroup has the basic policy: each pod is scheduled on its own.
    NotAGang,
    /// The pod group cycle does not run (GenericWorkload off, or no GangScheduling in the profile):
    /// each pod is scheduled on its own.
    GangSchedulingOff,
    /// A pod's scheduling cycle failed with an error.
    Error,
}

/// What happened to one pod of the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MemberState {
    /// Bound before the cycle.
    Bound,
    /// The cycle placed it (bound only if the group reaches minCount).
    Placed,
    /// It did not fit once the group's pods before it were placed.
    DidNotFit,
    /// The cycle stopped before it (minCount could no longer be reached).
    NotReached,
    /// Behind scheduling gates: not queued.
    Gated,
    /// Not tried: the group is held before the cycle (quorum, missing PodGroup), or the cycle does
    /// not apply.
    Pending,
}

/// One pod of the group.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemberVerdict {
    /// The pod's name.
    pub pod: String,
    /// What happened to it.
    pub state: MemberState,
    /// The node it is bound to, or the cycle placed it on.
    pub node: Option<String>,
    /// What kube-scheduler writes on it (its FailedScheduling message; empty when it writes nothing).
    pub message: String,
}

/// One node as the group's cycle left it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupNode {
    /// The node.
    pub node: String,
    /// The group's pods the cycle placed on it.
    pub takes: Vec<String>,
    /// The plugin that refuses the first pod the cycle could not place (null when the node would
    /// take it, or every pod was placed).
    pub rejected_by: Option<String>,
    /// That plugin's reasons, as kube-scheduler writes them.
    pub reasons: Vec<String>,
}

/// One reason kube-scheduler counts for the first pod that did not fit, with its node count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Blocker {
    /// The reason, as kube-scheduler writes it.
    pub reason: String,
    /// On how many nodes.
    pub nodes: usize,
}

/// A change to the cluster or the PodGroup that makes the whole group fit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GroupChange {
    /// Lower the PodGroup's `spec.schedulingPolicy.gang.minCount`.
    LowerMinCount {
        /// The new minCount.
        to: i32,
    },
    /// Add nodes like an existing one (its allocatable, labels and taints).
    AddNodesLike {
        /// The node to copy.
        node: String,
        /// How many.
        count: usize,
    },
}

impl GroupChange {
    /// The change in words.
    pub fn describe(&self) -> String {
        match self {
            GroupChange::LowerMinCount { to } => format!("lower the PodGroup's minCount to {to}"),
            GroupChange::AddNodesLike { node, count: 1 } => format!("add 1 more node like {node}"),
            GroupChange::AddNodesLike { node, count } => format!("add {count} more nodes like {node}"),
        }
    }
}

/// A change checked by running the group's cycle again on a changed copy of the cluster: after it,
/// the whole group fits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupFix {
    /// The change, as data.
    pub change: GroupChange,
    /// The change in words.
    pub description: String,
    /// How many of the group's pods the cycle then places.
    pub places: usize,
}

/// The diagnosis of one pod group.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PodGroupReport {
    /// The PodGroup's namespace.
    pub namespace: String,
    /// Its name.
    pub pod_group: String,
    /// The Workload it was made from (`spec.workloadRef.workloadName`), if any.
    pub workload: Option<String>,
    /// Whether the PodGroup exists (its pods may name one that does not, yet).
    pub exists: bool,
    /// The counts.
    pub quorum: Quorum,
    /// What kube-scheduler does with the group.
    pub outcome: GroupOutcome,
    /// Its words: on a pod of the group that fit when the group cannot be placed ("pod group is
    /// unschedulable, minCount (3) cannot be satisfied: …"); PreEnqueue's reason for a group held
    /// (written nowhere: kube-scheduler is silent then); empty when the group fits.
    pub message: String,
    /// What it writes on a pod the cycle did not reach (empty when none).
    pub unreached_message: String,
    /// Pods kube-scheduler would bind together now: every queued pod that fits when the group
    /// reaches minCount, else 0 (all or nothing).
    pub placeable_together: usize,
    /// Pods the cycle placed one after another before it stopped.
    pub fit_one_by_one: usize,
    /// Every pod of the group.
    pub members: Vec<MemberVerdict>,
    /// For the first pod that did not fit: the reasons kube-scheduler counts, most nodes first.
    pub blocked_by: Vec<Blocker>,
    /// The first pod the cycle could not place.
    pub first_unplaced: Option<String>,
    /// Node by node: the pods placed there, and why it refuses the first pod that did not fit
    /// (`full` reports only; nodes that took nothing and refuse nothing are left out).
    pub nodes: Vec<GroupNode>,
    /// The first pod that did not fit, explained down to the object at fault (`full` reports only).
    pub findings: Vec<Finding>,
    /// Changes that make the whole group fit, smallest first (`full` reports only).
    pub fixes: Vec<GroupFix>,
    /// What the snapshot cannot see.
    pub not_visible: Vec<String>,
    /// When the group cannot be placed: its workload-aware preemption (PodGroupPostFilter) — the
    /// victims node by node and the nominations, or why none.
    pub preemption: Option<preemption::GroupPreemptionView>,
    /// The topology placements the cycle tried (TopologyAwareWorkloadScheduling on), the domain
    /// it chooses or why the group fits in none.
    pub placements: Option<PlacementReport>,
    /// For a PodGroup under a CompositePodGroup (alpha, gate on): its tree, which kube-scheduler
    /// schedules whole.
    pub tree: Option<tree::TreeReport>,
}

impl PodGroupReport {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        namespaced_key(&self.namespace, &self.pod_group)
    }

    /// True when kube-scheduler binds the group's pending pods now (or has nothing to do).
    pub fn schedulable(&self) -> bool {
        matches!(
            self.outcome,
            GroupOutcome::Schedulable
                | GroupOutcome::AllScheduled
                | GroupOutcome::NotAGang
                | GroupOutcome::GangSchedulingOff
        )
    }

    /// The group in one line, after its name: triage's line, explain's headline.
    /// `nodes_total` is the cluster's node count.
    pub fn summary(&self, nodes_total: usize) -> String {
        if let Some(tree) = &self.tree {
            // The tree decides: its words, not the group's own (the group line would repeat them).
            if tree.held.is_some() {
                return format!("held with its tree ({})", tree.summary());
            }
            return format!(
                "{} of {} queued pods placeable together (minCount {}, {} bound); {}",
                self.placeable_together,
                self.quorum.queued,
                self.quorum.min_count.unwrap_or(0),
                self.quorum.scheduled,
                tree.summary()
            );
        }
        let mut line = self.outcome_summary(nodes_total);
        if let Some(placements) = &self.placements
            && matches!(
                self.outcome,
                GroupOutcome::Schedulable | GroupOutcome::Unschedulable
            )
        {
            line.push_str(&format!("; {}", placements.summary()));
        }
        line
    }

    /// The summary without the placements.
    fn outcome_summary(&self, nodes_total: usize) -> String {
        let queued = self.quorum.queued;
        let min = self.quorum.min_count.unwrap_or(0);
        match self.outcome {
            GroupOutcome::Schedulable => format!(
                "{} of {queued} queued pods placeable together (minCount {min}): kube-scheduler binds them",
                self.placeable_together
            ),
            GroupOutcome::Unschedulable => {
                let mut line = format!(
                    "0 of {queued} pods placeable together (minCount {min}, {} bound), {} fit one by one",
                    self.quorum.scheduled, self.fit_one_by_one
                );
                if let Some(top) = self.blocked_by.first() {
                    line.push_str(&format!(
                        ": blocked by {} on {} of {nodes_total} nodes",
                        top.reason, top.nodes
                    ));
                    // The next blockers too: the most counted is often a selector that keeps the
                    // group off most nodes, and the one that stops it on its own nodes comes second.
                    for b in self.blocked_by.iter().skip(1).take(MAX_SUMMARY_BLOCKERS - 1) {
                        line.push_str(&format!(", {} on {}", b.reason, b.nodes));
                    }
                } else if !self.message.is_empty() {
                    line.push_str(&format!(": {}", self.message));
                }
                line
            }
            GroupOutcome::WaitingForQuorum => format!(
                "{} of minCount {min} pods exist: held until the rest are created (kube-scheduler writes nothing)",
                self.quorum.pods
            ),
            GroupOutcome::WaitingForPodGroup => format!(
                "the PodGroup does not exist: its {} pod(s) are held until it is created (kube-scheduler writes \
                 nothing)",
                self.quorum.pods
            ),
            GroupOutcome::AllScheduled => format!("all {} pods bound", self.quorum.pods),
            GroupOutcome::NotAGang => "basic policy: each pod is scheduled on its own".to_string(),
            GroupOutcome::GangSchedulingOff => {
                "GenericWorkload is off or the profile has no GangScheduling: \
                 each pod is scheduled on its own"
                    .to_string()
            }
            GroupOutcome::Error => format!("the pod group cycle fails: {}", self.message),
        }
    }
}

/// How much to work out: the verdict and counts (explain POD's section, triage), or everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// Quorum, verdict, members, blockers.
    Summary,
    /// With nodes, findings and checked fixes.
    Full,
}

/// The PodGroups of a Workload: those whose `spec.workloadRef.workloadName` names it, by name.
pub fn pod_groups_of_workload(snapshot: &Snapshot, namespace: &str, workload: &str) -> Vec<String> {
    let mut names: Vec<String> = snapshot
        .pod_groups
        .values()
        .filter(|g| {
            g.metadata.namespace.as_deref().unwrap_or("default") == namespace
                && g.spec.workload_ref.as_ref().map(|r| r.workload_name.as_str()) == Some(workload)
        })
        .filter_map(|g| g.metadata.name.clone())
        .collect();
    names.sort();
    names
}

/// Diagnoses the pod group `namespace/name` on `fwk`'s cluster; `None` when neither the PodGroup
/// nor any pod naming it exists.
pub fn diagnose_pod_group(
    engine: &Engine,
    fwk: &Framework,
    namespace: &str,
    name: &str,
    depth: Depth,
) -> Option<PodGroupReport> {
    let snapshot = fwk.snapshot();
    let pod_group = snapshot.pod_group(namespace, name);
    let counts = snapshot.pod_group_counts(namespace, name);
    if pod_group.is_none() && counts.all == 0 {
        return None;
    }
    let min_count = pod_group.and_then(|g| gang_min_count(g));
    let mut report = PodGroupReport {
        namespace: namespace.to_string(),
        pod_group: name.to_string(),
        workload: pod_group.and_then(|g| workload_of(g)),
        exists: pod_group.is_some(),
        quorum: quorum(&counts, min_count),
        outcome: GroupOutcome::GangSchedulingOff,
        message: String::new(),
        unreached_message: String::new(),
        placeable_together: 0,
        fit_one_by_one: 0,
        members: members_before_cycle(snapshot, namespace, name),
        blocked_by: Vec::new(),
        first_unplaced: None,
        nodes: Vec::new(),
        findings: Vec::new(),
        fixes: Vec::new(),
        not_visible: vec![PERMIT_NOT_VISIBLE.to_string()],
        preemption: None,
        placements: None,
        tree: None,
    };
    if !runs_pod_group_cycle(fwk) {
        return Some(report);
    }
    if schedules_trees(fwk)
        && let Ok(Some(root)) = root_of(snapshot, namespace, name)
    {
        let options = ScheduleOptions {
            trace_filters: false,
            ..engine.schedule_options(false)
        };
        tree::fill_from_tree(&mut report, fwk, name, &root, options);
        return Some(report);
    }
    let Some(min_count) = min_count else {
        if pod_group.is_none() {
            report.outcome = GroupOutcome::WaitingForPodGroup;
            report.message = format!(
                "{ERR_REASON_WAITING_FOR_POD_GROUP_PREFIX}{name:?}{ERR_REASON_WAITING_FOR_POD_GROUP_SUFFIX}"
            );
        } else {
            report.outcome = GroupOutcome::NotAGang;
        }
        return Some(report);
    };
    if counts.pending.is_empty() {
        report.outcome = GroupOutcome::AllScheduled;
        return Some(report);
    }
    if counts.all < usize::try_from(min_count).unwrap_or(0) {
        report.outcome = GroupOutcome::WaitingForQuorum;
        report.message = ERR_REASON_WAITING_FOR_QUORUM.to_string();
        return Some(report);
    }
    let options = ScheduleOptions {
        trace_filters: false,
        ..engine.schedule_options(false)
    };
    let Some(cycle) = pod_group_cycle(fwk, namespace, name, options) else {
        return Some(report);
    };
    fill_from_cycle(&mut report, &cycle);
    report.placements = placement_report(&cycle);
    if depth == Depth::Full && cycle.outcome == Outcome::Unschedulable {
        report.nodes = group_nodes(&cycle);
        report.findings = first_failure_findings(engine, fwk, &cycle);
        report.fixes = fixes(fwk, namespace, name, &cycle, options);
    } else if depth == Depth::Full {
        report.nodes = group_nodes(&cycle);
    }
    Some(report)
}

fn workload_of(group: &PodGroup) -> Option<String> {
    group.spec.workload_ref.as_ref().map(|r| r.workload_name.clone())
}

fn quorum(counts: &PodGroupCounts, min_count: Option<i32>) -> Quorum {
    let gated = counts.pending.iter().filter(|p| has_scheduling_gates(p)).count();
    Quorum {
        min_count,
        pods: counts.all,
        scheduled: counts.scheduled,
        queued: counts.pending.len() - gated,
        gated,
        nominated: counts
            .pending
            .iter()
            .filter(|p| !p.nominated_node_name().is_empty())
            .map(|p| Nomination {
                pod: p.name().to_string(),
                node: p.nominated_node_name().to_string(),
            })
            .collect(),
        permit_timeout_seconds: PERMIT_TIMEOUT_SECONDS,
    }
}

/// Every pod of the group as the snapshot has it, by name: bound, gated or pending.
fn members_before_cycle(snapshot: &Snapshot, namespace: &str, name: &str) -> Vec<MemberVerdict> {
    let mut members: Vec<MemberVerdict> = snapshot
        .pods_by_key
        .values()
        .filter(|p| p.namespace() == namespace && pod_group_name(&p.pod) == Some(name))
        .map(|p| {
            let bound = !p.node_name().is_empty();
            MemberVerdict {
                pod: p.name().to_string(),
                state: if bound {
                    MemberState::Bound
                } else if has_scheduling_gates(p) {
                    MemberState::Gated
                } else {
                    MemberState::Pending
                },
                node: bound.then(|| p.node_name().to_string()),
                message: String::new(),
            }
        })
        .collect();
    members.sort_by(|a, b| a.pod.cmp(&b.pod));
    members
}

/// The cycle's verdict, counts and each queued pod's fate.
fn fill_from_cycle(report: &mut PodGroupReport, cycle: &GroupCycle) {
    report.outcome = match cycle.outcome {
        Outcome::Scheduled => GroupOutcome::Schedulable,
        Outcome::Unschedulable | Outcome::Gated => GroupOutcome::Unschedulable,
        Outcome::Error => GroupOutcome::Error,
    };
    report.message = cycle.message.clone();
    report.preemption = cycle
        .preemption
        .as_deref()
        .map(preemption::GroupPreemptionView::of);
    report.unreached_message = cycle.unreached_message.clone();
    report.fit_one_by_one = cycle.placed_count();
    report.placeable_together = if cycle.outcome == Outcome::Scheduled {
        cycle.placed_count()
    } else {
        0
    };
    let first_failure = cycle
        .members
        .iter()
        .find_map(|m| m.failure.as_ref().map(|f| (m, f)));
    if let Some((member, failure)) = first_failure {
        report.first_unplaced = Some(member.pod.name().to_string());
        let mut blockers: Vec<Blocker> =
            reason_histogram(failure.explanation.nodes_total, &failure.node_statuses)
                .into_iter()
                .map(|(reason, nodes)| Blocker {
                    reason: reason.to_string(),
                    nodes,
                })
                .collect();
        if let Some(message) = &failure.explanation.pre_filter_message {
            blockers = vec![Blocker {
                reason: message.clone(),
                nodes: failure.explanation.nodes_total,
            }];
        }
        blockers.sort_by(|a, b| b.nodes.cmp(&a.nodes).then_with(|| a.reason.cmp(&b.reason)));
        report.blocked_by = blockers;
    }
    let group_fits = cycle.outcome == Outcome::Scheduled;
    for m in &mut report.members {
        if !matches!(m.state, MemberState::Pending) {
            continue;
        }
        let tried = cycle.members.iter().find(|t| t.pod.name() == m.pod);
        match tried {
            Some(t) => match (&t.placed_on, &t.failure) {
                (Some(node), _) => {
                    m.state = MemberState::Placed;
                    m.node = Some(node.clone());
                    m.message = if group_fits {
                        String::new()
                    } else {
                        cycle.message.clone()
                    };
                }
                (None, Some(failure)) => {
                    m.state = MemberState::DidNotFit;
                    m.message = failure.explanation.message.clone();
                }
                (None, None) => {}
            },
            None => {
                m.state = MemberState::NotReached;
                m.message = cycle.unreached_message.clone();
            }
        }
    }
}

/// Node by node: what the cycle placed there and why it refuses the first pod that did not fit.
fn group_nodes(cycle: &GroupCycle) -> Vec<GroupNode> {
    let failure = cycle.members.iter().find_map(|m| m.failure.as_ref());
    let mut nodes: Vec<GroupNode> = cycle
        .placed
        .nodes()
        .iter()
        .map(|n| GroupNode {
            node: n.name().to_string(),
            takes: Vec::new(),
            rejected_by: None,
            reasons: Vec::new(),
        })
        .collect();
    for m in &cycle.members {
        if let Some(node) = &m.placed_on
            && let Some(entry) = nodes.iter_mut().find(|n| &n.node == node)
        {
            entry.takes.push(m.pod.name().to_string());
        }
    }
    if let Some(failure) = failure {
        for n in failure.explanation.nodes.iter().filter(|n| !n.feasible) {
            if let Some(entry) = nodes.iter_mut().find(|e| e.node == n.name) {
                entry.rejected_by = n.plugin.clone();
                entry.reasons = n.reasons.clone();
            }
        }
    }
    nodes.retain(|n| !n.takes.is_empty() || n.rejected_by.is_some());
    nodes
}

/// The first pod that did not fit, explained on the cluster it was tried on.
fn first_failure_findings(engine: &Engine, fwk: &Framework, cycle: &GroupCycle) -> Vec<Finding> {
    let (Some(on), Some((pod, failure))) = (
        &cycle.first_failure_on,
        cycle
            .members
            .iter()
            .find_map(|m| m.failure.as_ref().map(|f| (&m.pod, f))),
    ) else {
        return Vec::new();
    };
    let Ok(failed_fwk) = fwk.on_snapshot(on.clone()) else {
        return Vec::new();
    };
    diagnose_pod(engine, &failed_fwk, &failure.state, pod, &failure.explanation).findings
}

/// Whether the group fits on `snapshot` (a changed copy of `fwk`'s), and how many pods it places.
fn group_fits_on(
    fwk: &Framework,
    snapshot: Snapshot,
    namespace: &str,
    name: &str,
    options: ScheduleOptions,
) -> Option<usize> {
    let changed = fwk.on_snapshot(Arc::new(snapshot)).ok()?;
    let cycle = pod_group_cycle(&changed, namespace, name, options)?;
    (cycle.outcome == Outcome::Scheduled).then(|| cycle.placed_count())
}

/// The smallest changes that make the whole group fit, each checked by the group's cycle:
/// minCount lowered to what the cycle placed, and the fewest nodes like the one that took most.
fn fixes(
    fwk: &Framework,
    namespace: &str,
    name: &str,
    cycle: &GroupCycle,
    options: ScheduleOptions,
) -> Vec<GroupFix> {
    let mut fixes = Vec::new();
    let snapshot = fwk.snapshot();
    let reachable = cycle.scheduled_before + cycle.placed_count();
    if let Ok(to) = i32::try_from(reachable)
        && to > 0
        && to < cycle.min_count
        && let Some(group) = snapshot.pod_group(namespace, name)
    {
        let mut changed = (**snapshot).clone();
        let mut lowered = (**group).clone();
        if let Some(gang) = lowered.spec.scheduling_policy.gang.as_mut() {
            gang.min_count = to;
        }
        changed
            .pod_groups
            .insert(namespaced_key(namespace, name), Arc::new(lowered));
        if let Some(places) = group_fits_on(fwk, changed, namespace, name, options) {
            let change = GroupChange::LowerMinCount { to };
            fixes.push(GroupFix {
                description: change.describe(),
                change,
                places,
            });
        }
    }
    if let Some(fix) = more_nodes(fwk, namespace, name, cycle, options) {
        fixes.push(fix);
    }
    fixes
}

/// The node the cycle placed most pods on (by name among equals).
fn busiest_node(cycle: &GroupCycle) -> Option<String> {
    let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for node in cycle.members.iter().filter_map(|m| m.placed_on.as_deref()) {
        *counts.entry(node).or_default() += 1;
    }
    let most = counts.values().copied().max()?;
    counts
        .into_iter()
        .find(|(_, n)| *n == most)
        .map(|(node, _)| node.to_string())
}

/// "N more nodes like X": X the node the cycle placed most pods on, N the fewest (binary search up
/// to the pods left to place, at most [`MAX_ADDED_NODES`]) after which the group fits.
fn more_nodes(
    fwk: &Framework,
    namespace: &str,
    name: &str,
    cycle: &GroupCycle,
    options: ScheduleOptions,
) -> Option<GroupFix> {
    let template = busiest_node(cycle)?;
    let left = cycle.queued.len().saturating_sub(cycle.placed_count());
    let try_count = |count: usize| {
        let mut changed = (**fwk.snapshot()).clone();
        for i in 1..=count {
            changed
                .add_node_like(&template, &format!("{template}-like-{i}"))
                .ok()?;
        }
        group_fits_on(fwk, changed, namespace, name, options)
    };
    let mut high = left.clamp(1, MAX_ADDED_NODES);
    let mut places = try_count(high)?;
    let mut low = 0;
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        match try_count(middle) {
            Some(p) => {
                high = middle;
                places = p;
            }
            None => low = middle,
        }
    }
    let change = GroupChange::AddNodesLike {
        node: template,
        count: high,
    };
    Some(GroupFix {
        description: change.describe(),
        change,
        places,
    })
}

mod placements;
pub use placements::{DomainVerdict, FIRST_PLACEMENT_VARIES, PlacementReport, placement_report};

#[cfg(test)]
mod tests;
