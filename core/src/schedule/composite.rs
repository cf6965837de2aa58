//! CompositePodGroup (alpha, v1.37: `schedule_one_podgroup.go`'s recursive algorithm): a PodGroup
//! may name a parent CompositePodGroup (`spec.parentCompositePodGroupName`), itself under another,
//! and kube-scheduler then schedules the whole tree in one cycle, all or nothing.
//!
//! The root's cycle (`compositePodGroupSchedulingPlacementAlgorithm`): TopologyPlacementGenerator
//! cuts the parent placement (the whole cluster at the root) by the composite's topology key; in
//! each placement its children are tried one after the other (`compositePodGroupSchedulingDefault-
//! Algorithm`), a PodGroup with its own cycle over its own placements inside that one, a composite
//! recursively; GangScheduling's PlacementFeasible counts children placed against
//! `minGroupCount` as it counts pods against `minCount`. A child that fits is assumed, so the next
//! sees its pods. Of the placements where the composite reaches its count, the PlacementScore
//! plugins pick one; when none does, "0/N placements are available, first placement status: …".
//!
//! The words follow `completeCompositePodGroupAlgorithmResult` and `applyPodGroupPostFilterResult`:
//! a child whose parent failed, or that was never tried, takes its parent's status — the same
//! status object, so PodGroupPostFilter's answer, appended once per group of the tree, shows as
//! many times on it as groups share it. This engine keeps that (a status index shared, not copied).
//!
//! kube-scheduler ranges over a Go map of each composite's children, so their order varies from one
//! cycle to the next; this engine tries them in name order and says so. The gate needs
//! TopologyAwareWorkloadScheduling (its placements) and GenericWorkload. Not modelled: the victims a
//! tree's preemption would choose (the answer is exact when nothing can be preempted; otherwise it
//! is the group search's upper bound, see [`tree_post_filter`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;

use super::ScheduleOptions;
use super::placement::{
    self, Placement, PlacementCycle, ScoredCandidate, bound_pods, no_placement_available, placements_for,
    score_placements,
};
use super::pod_group::{ERR_POD_GROUP_UNSCHEDULABLE, GroupVerdict, queued_members, runs_pod_group_cycle};
use super::pod_group_preemption::post_filter_with;
use crate::framework::runtime::Framework;
use crate::framework::status::{Code, Status};
use crate::plugins::gang_scheduling::{PlacementProgress, placement_feasible};
use crate::preemption::evaluator::now_nanos;
use crate::preemption::pod_group::{NO_POD_GROUP_PREEMPTION_VICTIMS, cluster_victims, with_group_prefix};
use crate::snapshot::pod_group_tree::{TreeKind, TreeNode, build_tree, root_of};
use crate::snapshot::pod_groups::pod_group_name;
use crate::snapshot::{PodInfo, Snapshot};

/// "composite pod group evaluation failed due to child error: " then the child's error.
pub const ERR_CHILD_PREFIX: &str = "composite pod group evaluation failed due to child error: ";
/// The preemption policy a PodGroup or CompositePodGroup may set to preempt nothing.
const PREEMPT_NEVER: &str = "Never";
/// DefaultPreemption's answer for a preemptor whose policy is Never.
const NOT_ELIGIBLE_NEVER: &str = "not eligible due to preemptionPolicy=Never.";

/// Whether the pod group cycle schedules composite trees: it runs at all, and CompositePodGroup and
/// the placements it needs (TopologyAwareWorkloadScheduling) are on.
pub fn schedules_trees(fwk: &Framework) -> bool {
    let gates = fwk.features();
    runs_pod_group_cycle(fwk) && gates.composite_pod_group && gates.topology_aware_workload_scheduling
}

/// Go's `*Status` as the tree's cycle hands it around: its code, the error put before its reasons
/// (`WithError`), and the reasons.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TreeStatus {
    /// Success, Unschedulable or Error.
    pub code: Code,
    /// The error `Reasons()` starts with (`errPodGroupUnschedulable`, or the error itself).
    pub error: Option<String>,
    /// The reasons after it.
    pub reasons: Vec<String>,
}

impl TreeStatus {
    fn success() -> Self {
        TreeStatus {
            code: Code::Success,
            error: None,
            reasons: Vec::new(),
        }
    }

    /// `NewStatus(Unschedulable, reasons...).WithError(errPodGroupUnschedulable)`.
    fn group_unschedulable(reasons: Vec<String>) -> Self {
        TreeStatus {
            code: Code::Unschedulable,
            error: Some(ERR_POD_GROUP_UNSCHEDULABLE.to_owned()),
            reasons,
        }
    }

    /// `AsStatus(err)`.
    fn error(message: String) -> Self {
        TreeStatus {
            code: Code::Error,
            error: Some(message),
            reasons: Vec::new(),
        }
    }

    /// A plugin's status as it is (PlacementFeasible's, the generator's).
    fn of(status: &Status) -> Self {
        if status.code() == Code::Error {
            return TreeStatus::error(status.message());
        }
        TreeStatus {
            code: status.code(),
            error: None,
            reasons: status.reasons().to_vec(),
        }
    }

    /// `Message()`: the error and the reasons, joined.
    pub fn message(&self) -> String {
        self.error
            .iter()
            .chain(&self.reasons)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `AsError().Error()`: the error when there is one, the message otherwise.
    pub fn as_error(&self) -> String {
        self.error.clone().unwrap_or_else(|| self.message())
    }

    /// Whether the group fits.
    pub fn is_success(&self) -> bool {
        self.code == Code::Success
    }
}

/// A group of the tree: a PodGroup or a CompositePodGroup (their names may coincide).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct GroupKey {
    /// True for a CompositePodGroup.
    pub composite: bool,
    /// Its name.
    pub name: String,
}

impl GroupKey {
    fn of(node: &TreeNode) -> Self {
        GroupKey {
            composite: node.is_composite(),
            name: node.name.clone(),
        }
    }
}

/// What the cycle found for one group of the tree (`podGroupAlgorithmResult`).
#[derive(Debug)]
pub struct Evaluated {
    /// Its status: an index into [`TreeCycle::statuses`], shared with the parent it was completed
    /// from.
    pub status: usize,
    /// Whether a pod of it was placed in the placement kept.
    any_scheduled: bool,
    /// The cluster with the subtree's placed pods assumed, in the parent's placement (it fits).
    after: Option<Arc<Snapshot>>,
    /// For a PodGroup: its cycle over its placements, and the cluster it ran on.
    pub group: Option<(PlacementCycle, Arc<Snapshot>)>,
    /// For a CompositePodGroup: the placements tried and whether it fit in each.
    pub placements: Vec<(Placement, bool)>,
}

type Results = BTreeMap<GroupKey, Evaluated>;

/// The cycle of a whole tree.
#[derive(Debug)]
pub struct TreeCycle {
    /// The namespace of the tree.
    pub namespace: String,
    /// The tree, from its root.
    pub tree: TreeNode,
    /// The statuses the groups point at, PodGroupPostFilter's answer appended.
    pub statuses: Vec<TreeStatus>,
    /// The statuses as they were before PodGroupPostFilter (what a pod not tried is rejected with:
    /// it got a copy).
    pub statuses_before_post_filter: Vec<TreeStatus>,
    /// What each group of the tree came to.
    pub results: Results,
    /// The pods of each PodGroup the cycle takes (pending, without scheduling gates), in queue order.
    pub queued: BTreeMap<String, Vec<Arc<PodInfo>>>,
    /// PodGroupPostFilter's answer when the root does not fit.
    pub post_filter: Option<Status>,
}

impl TreeCycle {
    /// The status of `key`.
    pub fn status(&self, key: &GroupKey) -> Option<&TreeStatus> {
        self.results.get(key).and_then(|r| self.statuses.get(r.status))
    }

    /// Whether the whole tree fits (its pods are bound).
    pub fn fits(&self) -> bool {
        self.status(&GroupKey::of(&self.tree))
            .is_some_and(TreeStatus::is_success)
    }

    /// The PodGroup `group`'s `PodGroupInitiallyScheduled` condition message: its status' message.
    pub fn condition(&self, group: &str) -> Option<String> {
        self.status(&GroupKey {
            composite: false,
            name: group.to_owned(),
        })
        .map(TreeStatus::message)
    }

    /// What kube-scheduler does with the pod `pod` of the PodGroup `group`
    /// (`submitPodGroupAlgorithmResult`).
    pub fn pod_verdict(
        &mut self,
        fwk: &Framework,
        group: &str,
        pod: &str,
        options: ScheduleOptions,
    ) -> GroupVerdict {
        let key = GroupKey {
            composite: false,
            name: group.to_owned(),
        };
        let from_parent = self.completed_from_parent(&key);
        let Some(result) = self.results.get_mut(&key) else {
            return GroupVerdict::Rejected(Status::error(format!("pod group {group} is not in the tree")));
        };
        let status = self.statuses[result.status].clone();
        let before = self.statuses_before_post_filter[result.status].clone();
        if status.code == Code::Error {
            return GroupVerdict::Rejected(Status::error(status.message()));
        }
        // The placement kube-scheduler reports the group's pods from: the chosen one, or the first.
        let reported = result.group.as_mut().and_then(|(cycle, at)| {
            let index = cycle.chosen.unwrap_or(0);
            let try_ = cycle.tries.get_mut(index)?;
            let member = try_.members.iter().position(|m| m.pod.name() == pod)?;
            Some((try_, member, at.clone()))
        });
        // Not tried (the cycle stopped before it, or the group took its parent's status): a copy
        // of the group's status from before PodGroupPostFilter.
        let Some((try_, member, at)) = reported.filter(|_| !from_parent) else {
            return GroupVerdict::Rejected(Status::new(Code::Unschedulable, before.message()));
        };
        if try_.members[member].placed_on.is_none() {
            return match try_.members[member].failure.take() {
                Some(failure) => GroupVerdict::PodFailed(failure),
                None => GroupVerdict::Rejected(Status::new(Code::Unschedulable, before.message())),
            };
        }
        if status.is_success() {
            let cycle = match fwk.on_snapshot(at) {
                Ok(at_fwk) => placement::cycle_in_placement(&at_fwk, try_, member, options),
                Err(_) => placement::cycle_in_placement(fwk, try_, member, options),
            };
            return GroupVerdict::InPlacement(Box::new(cycle));
        }
        GroupVerdict::Rejected(Status::new(
            Code::Unschedulable,
            [ERR_POD_GROUP_UNSCHEDULABLE.to_owned(), status.message()].join(", "),
        ))
    }

    /// Where the cycle placed the pod `pod` of the PodGroup `group` in the placement it reports
    /// (bound only when the whole tree fits); `None` when it was not placed or not tried.
    pub fn placed_on(&self, group: &str, pod: &str) -> Option<String> {
        let key = GroupKey {
            composite: false,
            name: group.to_owned(),
        };
        if self.completed_from_parent(&key) {
            return None;
        }
        let (cycle, _) = self.results.get(&key)?.group.as_ref()?;
        let try_ = cycle.tries.get(cycle.chosen.unwrap_or(0))?;
        try_.members
            .iter()
            .find(|m| m.pod.name() == pod)?
            .placed_on
            .clone()
    }

    /// Whether `key`'s result was replaced by its parent's failure (its pods' results are gone).
    fn completed_from_parent(&self, key: &GroupKey) -> bool {
        self.results
            .get(key)
            .is_some_and(|r| r.group.is_none() && !key.composite)
    }
}

/// The cycle's walk over the tree.
struct Walk<'a> {
    namespace: &'a str,
    options: ScheduleOptions,
    statuses: Vec<TreeStatus>,
    queued: &'a BTreeMap<String, Vec<Arc<PodInfo>>>,
}

impl Walk<'_> {
    fn push(&mut self, status: TreeStatus) -> usize {
        self.statuses.push(status);
        self.statuses.len() - 1
    }

    /// `podGroupSchedulingRecursiveAlgorithm`.
    fn evaluate(&mut self, at: &Framework, node: &TreeNode, results: &mut Results) -> Evaluated {
        match &node.kind {
            TreeKind::PodGroup { min_count } => self.evaluate_group(at, node, *min_count),
            TreeKind::CompositePodGroup { .. } => self.evaluate_composite(at, node, results),
        }
    }

    /// A PodGroup of the tree: its own cycle over its placements inside the parent's
    /// (`podGroupSchedulingPlacementAlgorithm`); when it fits, its pods are assumed.
    fn evaluate_group(&mut self, at: &Framework, node: &TreeNode, min_count: i32) -> Evaluated {
        let snapshot = at.snapshot();
        let scheduled = snapshot.pod_group_counts(self.namespace, &node.name).scheduled;
        let empty = Vec::new();
        let queued = self.queued.get(&node.name).unwrap_or(&empty);
        let cycle = placement::run_placements(
            at,
            self.namespace,
            &node.name,
            min_count,
            scheduled,
            queued,
            self.options,
        );
        let mut after = None;
        let mut any_scheduled = false;
        let status = if let Some(error) = &cycle.error {
            TreeStatus::error(error.clone())
        } else if let Some(refused) = &cycle.refused {
            TreeStatus::of(refused)
        } else if let Some(chosen) = cycle.chosen {
            let try_ = &cycle.tries[chosen];
            any_scheduled = try_.placed_pods > 0;
            after = Some(Arc::new(try_.assumed.with_placement_of(snapshot)));
            TreeStatus::success()
        } else {
            let first = cycle
                .tries
                .first()
                .map(placement::PlacementTry::status_as_error)
                .unwrap_or_default();
            TreeStatus::group_unschedulable(vec![no_placement_available(cycle.tries.len(), &first)])
        };
        Evaluated {
            status: self.push(status),
            any_scheduled,
            after,
            group: Some((cycle, snapshot.clone())),
            placements: Vec::new(),
        }
    }

    /// A CompositePodGroup (`compositePodGroupSchedulingPlacementAlgorithm`): its children in each
    /// of its placements; the best placement kept, its subtree's pods assumed.
    fn evaluate_composite(&mut self, at: &Framework, node: &TreeNode, results: &mut Results) -> Evaluated {
        let snapshot = at.snapshot();
        let TreeKind::CompositePodGroup { topology_key, .. } = &node.kind else {
            unreachable!("evaluate_composite is called on composites");
        };
        let leaves: BTreeSet<&str> = node.leaves().into_iter().map(|l| l.name.as_str()).collect();
        let placements = match placements_for(snapshot, topology_key.as_deref(), || {
            bound_pods(snapshot, self.namespace, |g| leaves.contains(g))
        }) {
            Ok(placements) => placements,
            Err(status) => {
                return Evaluated {
                    status: self.push(TreeStatus::of(&status)),
                    any_scheduled: false,
                    after: None,
                    group: None,
                    placements: Vec::new(),
                };
            }
        };
        let mut first: Option<Results> = None;
        let mut fitting: Vec<(Placement, Results, Evaluated)> = Vec::new();
        let mut tried = Vec::new();
        for placement in placements {
            let limited = Arc::new(snapshot.with_placement(placement.nodes.iter().map(String::as_str)));
            let in_placement = match at.on_snapshot(limited) {
                Ok(f) => f,
                Err(e) => return self.errored(TreeStatus::error(e.to_string())),
            };
            let mut subtree = Results::new();
            let result = self.composite_in_placement(&in_placement, node, &mut subtree);
            let status = self.statuses[result.status].clone();
            if status.code == Code::Error {
                return result;
            }
            tried.push((placement.clone(), status.is_success()));
            if status.is_success() {
                subtree.remove(&GroupKey::of(node));
                fitting.push((placement, subtree, result));
            } else if first.is_none() {
                // Reported when no placement fits: the first one tried (`anyResultSubtree`).
                subtree.insert(GroupKey::of(node), result);
                first = Some(subtree);
            }
        }
        if fitting.is_empty() {
            let mut subtree = first.unwrap_or_default();
            let first_error = subtree
                .get(&GroupKey::of(node))
                .map(|r| self.statuses[r.status].as_error())
                .unwrap_or_default();
            subtree.remove(&GroupKey::of(node));
            results.extend(subtree);
            let status =
                TreeStatus::group_unschedulable(vec![no_placement_available(tried.len(), &first_error)]);
            return Evaluated {
                status: self.push(status),
                any_scheduled: false,
                after: None,
                group: None,
                placements: tried,
            };
        }
        let best = self.best(at, node, &fitting);
        let (_, kept, mut evaluated) = fitting.swap_remove(best);
        results.extend(kept);
        // The subtree's pods assumed, in the parent's placement again.
        evaluated.after = evaluated
            .after
            .map(|after| Arc::new(after.with_placement_of(snapshot)));
        evaluated.placements = tried;
        evaluated
    }

    /// `findBestCompositePodGroupPlacement`: one fitting placement as it is; among several the
    /// highest PlacementScore total over the subtree's placed pods (the first of a tie).
    fn best(&self, at: &Framework, node: &TreeNode, fitting: &[(Placement, Results, Evaluated)]) -> usize {
        if fitting.len() == 1 {
            return 0;
        }
        let leaves: BTreeSet<&str> = node.leaves().into_iter().map(|l| l.name.as_str()).collect();
        let scheduled = bound_pods(at.snapshot(), self.namespace, |g| leaves.contains(g)).len();
        let placed: Vec<Vec<&Arc<PodInfo>>> = fitting
            .iter()
            .map(|(_, subtree, _)| {
                subtree
                    .values()
                    .filter_map(|r| r.group.as_ref())
                    .filter_map(|(cycle, _)| cycle.chosen.and_then(|i| cycle.tries.get(i)))
                    .flat_map(|t| t.members.iter().filter(|m| m.placed_on.is_some()).map(|m| &m.pod))
                    .collect()
            })
            .collect();
        let candidates: Vec<ScoredCandidate<'_>> = fitting
            .iter()
            .zip(&placed)
            .map(|((placement, _, _), placed)| ScoredCandidate {
                group_pods: scheduled + placed.len(),
                placed: placed.clone(),
                nodes: &placement.nodes,
            })
            .collect();
        let totals: Vec<i64> = score_placements(at, &candidates)
            .into_iter()
            .map(|s| s.total)
            .collect();
        let top = totals.iter().copied().max().unwrap_or(0);
        totals.iter().position(|&t| t == top).unwrap_or(0)
    }

    fn errored(&mut self, status: TreeStatus) -> Evaluated {
        Evaluated {
            status: self.push(status),
            any_scheduled: false,
            after: None,
            group: None,
            placements: Vec::new(),
        }
    }

    /// `compositePodGroupSchedulingDefaultAlgorithm` in one placement: PlacementFeasible over the
    /// children placed, before the first and after each; a child that fits is assumed for the
    /// next. The subtree's results go to `results`.
    fn composite_in_placement(
        &mut self,
        at: &Framework,
        node: &TreeNode,
        results: &mut Results,
    ) -> Evaluated {
        let TreeKind::CompositePodGroup { min_group_count, .. } = &node.kind else {
            unreachable!("composite_in_placement is called on composites");
        };
        let mut progress = PlacementProgress {
            remaining: node.children.len(),
            scheduled: 0,
        };
        let mut feasible = placement_feasible(*min_group_count, progress);
        if feasible.code() == Code::Unschedulable {
            return self.errored(TreeStatus::of(&feasible));
        }
        let mut placed: Option<Framework> = None;
        let mut any_scheduled = false;
        for child in &node.children {
            let current = placed.as_ref().unwrap_or(at);
            let result = self.evaluate(current, child, results);
            let status = self.statuses[result.status].clone();
            if status.code == Code::Error {
                let error = TreeStatus::error(format!("{ERR_CHILD_PREFIX}{}", status.as_error()));
                results.insert(GroupKey::of(child), result);
                return self.errored(error);
            }
            any_scheduled |= result.any_scheduled;
            progress.remaining -= 1;
            if status.is_success() {
                progress.scheduled += 1;
                if let Some(after) = &result.after {
                    match current.on_snapshot(after.clone()) {
                        Ok(next) => placed = Some(next),
                        Err(e) => return self.errored(TreeStatus::error(e.to_string())),
                    }
                }
            }
            results.insert(GroupKey::of(child), result);
            feasible = placement_feasible(*min_group_count, progress);
            if feasible.code() == Code::Unschedulable {
                break;
            }
        }
        let status = match feasible.code() {
            Code::Wait => TreeStatus::group_unschedulable(feasible.reasons().to_vec()),
            _ => TreeStatus::of(&feasible),
        };
        let fits = status.is_success();
        Evaluated {
            status: self.push(status),
            // A composite that fails reverts its children: nothing of it stays placed.
            any_scheduled: any_scheduled && fits,
            after: fits.then(|| placed.as_ref().unwrap_or(at).snapshot().clone()),
            group: None,
            placements: Vec::new(),
        }
    }
}

/// `completeCompositePodGroupAlgorithmResultMap`: a group without a result, or that fit under a
/// parent that did not, takes its parent's status (the same one).
fn complete(node: &TreeNode, results: &mut Results, parent: Option<usize>, statuses: &[TreeStatus]) {
    let key = GroupKey::of(node);
    let parent_failed = parent.is_some_and(|p| !statuses[p].is_success());
    let replace = match results.get(&key) {
        None => true,
        Some(r) => parent_failed && statuses[r.status].is_success(),
    };
    if replace && let Some(parent) = parent {
        results.insert(
            key.clone(),
            Evaluated {
                status: parent,
                any_scheduled: false,
                after: None,
                group: None,
                placements: Vec::new(),
            },
        );
    }
    let own = results.get(&key).map(|r| r.status);
    for child in &node.children {
        complete(child, results, own, statuses);
    }
}

/// Runs the cycle of the tree under the CompositePodGroup `namespace/root`, with `asked` (a pod
/// explained, maybe from a file) among its group's queued pods; `None` when there is no such tree.
pub fn tree_cycle(
    fwk: &Framework,
    namespace: &str,
    root: &str,
    asked: Option<&PodInfo>,
    options: ScheduleOptions,
) -> Option<TreeCycle> {
    let tree = build_tree(fwk.snapshot(), namespace, root)?;
    let asked_group = asked.and_then(|p| pod_group_name(&p.pod));
    let queued: BTreeMap<String, Vec<Arc<PodInfo>>> = tree
        .leaves()
        .into_iter()
        .map(|leaf| {
            let asked = asked.filter(|_| asked_group == Some(leaf.name.as_str()));
            (
                leaf.name.clone(),
                queued_members(fwk, namespace, &leaf.name, asked),
            )
        })
        .collect();
    let mut walk = Walk {
        namespace,
        options,
        statuses: Vec::new(),
        queued: &queued,
    };
    let mut results = Results::new();
    let root_result = walk.evaluate(fwk, &tree, &mut results);
    // The framework asks for at least one pod placed before it calls a group schedulable.
    if walk.statuses[root_result.status].is_success() && !root_result.any_scheduled {
        walk.statuses[root_result.status] = TreeStatus::group_unschedulable(Vec::new());
    }
    results.insert(GroupKey::of(&tree), root_result);
    let mut statuses = walk.statuses;
    complete(&tree, &mut results, None, &statuses);
    let statuses_before_post_filter = statuses.clone();
    let root_status = results
        .get(&GroupKey::of(&tree))
        .map(|r| statuses[r.status].clone());
    let mut post_filter = None;
    if root_status.is_some_and(|s| s.code == Code::Unschedulable) {
        let answer = tree_post_filter(fwk, namespace, &tree, &queued);
        // Appended once per group of the tree: a status shared by several gets it as many times.
        for result in results.values() {
            let status = &mut statuses[result.status];
            if answer.code() == Code::Error {
                *status = TreeStatus::error(answer.message());
            } else {
                status.reasons.push(answer.message());
            }
        }
        post_filter = Some(answer);
    }
    Some(TreeCycle {
        namespace: namespace.to_owned(),
        tree,
        statuses,
        statuses_before_post_filter,
        results,
        queued,
        post_filter,
    })
}

/// The tree's PodGroupPostFilter (DynamicResources', then DefaultPreemption's over the whole
/// tree): DefaultPreemption refuses a root whose `preemptionPolicy` is Never and finds no victim
/// when no pod of the cluster has a lower priority than the root's; both exact. When some pod
/// does, the victims it would choose for a tree are not modelled: its answer is then the tree's
/// cycle on the cluster without every such pod (what it tries first) — the words when even that
/// does not fit, an upper bound of the victims when it does.
pub fn tree_post_filter(
    fwk: &Framework,
    namespace: &str,
    tree: &TreeNode,
    queued: &BTreeMap<String, Vec<Arc<PodInfo>>>,
) -> Status {
    post_filter_with(fwk, || {
        Some(tree_default_preemption(fwk, namespace, tree, queued))
    })
}

/// DefaultPreemption's PodGroupPostFilter for the tree (see [`tree_post_filter`]).
fn tree_default_preemption(
    fwk: &Framework,
    namespace: &str,
    tree: &TreeNode,
    queued: &BTreeMap<String, Vec<Arc<PodInfo>>>,
) -> Status {
    let snapshot = fwk.snapshot();
    let root = snapshot.composite_pod_group(namespace, &tree.name);
    let priority = root.and_then(|r| r.spec.priority).unwrap_or(0);
    let never = root.and_then(|r| r.spec.preemption_policy.as_deref()) == Some(PREEMPT_NEVER);
    {
        if never {
            return with_group_prefix(Status::unschedulable(NOT_ELIGIBLE_NEVER));
        }
        let victims: Vec<_> = cluster_victims(snapshot, now_nanos())
            .into_iter()
            .filter(|v| v.priority < priority)
            .collect();
        if victims.is_empty() {
            return with_group_prefix(Status::unresolvable(NO_POD_GROUP_PREEMPTION_VICTIMS));
        }
        let mut without = (**snapshot).clone();
        for pod in victims.iter().flat_map(|v| &v.pods) {
            let _ = without.remove_pod(pod.namespace(), pod.name());
        }
        let Ok(fwk_without) = fwk.on_snapshot(Arc::new(without)) else {
            return with_group_prefix(Status::error("failed to start mutations"));
        };
        let mut walk = Walk {
            namespace,
            options: ScheduleOptions {
                trace_filters: false,
                record_nodes: false,
                ..ScheduleOptions::default()
            },
            statuses: Vec::new(),
            queued,
        };
        let mut results = Results::new();
        let result = walk.evaluate(&fwk_without, tree, &mut results);
        let status = &walk.statuses[result.status];
        if status.is_success() && result.any_scheduled {
            let pods: usize = victims.iter().map(|v| v.pods.len()).sum();
            with_group_prefix(Status::new(
                Code::Success,
                crate::preemption::pod_group::found_group_placement_message(pods),
            ))
        } else {
            let message = if status.is_success() {
                ERR_POD_GROUP_UNSCHEDULABLE.to_owned()
            } else {
                status.message()
            };
            with_group_prefix(Status::new(Code::Unschedulable, message))
        }
    }
}

/// The verdict on `pod`, a pod of a PodGroup under a CompositePodGroup, of its tree's cycle; `None`
/// when the tree does not apply (the gates are off, or the group has no parent).
pub(super) fn tree_verdict(fwk: &Framework, pod: &PodInfo, options: ScheduleOptions) -> Option<GroupVerdict> {
    if !schedules_trees(fwk) {
        return None;
    }
    let group = pod_group_name(&pod.pod)?;
    let root = match root_of(fwk.snapshot(), pod.namespace(), group) {
        Ok(Some(root)) => root,
        Ok(None) => return None,
        // PreEnqueue holds such a pod: its own cycle reports it.
        Err(_) => return None,
    };
    let mut cycle = tree_cycle(fwk, pod.namespace(), &root, Some(pod), options)?;
    Some(cycle.pod_verdict(fwk, group, pod.name(), options))
}

#[cfg(test)]
mod tests;
