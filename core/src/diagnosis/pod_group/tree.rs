//! `explain podgroup/NAME` for a PodGroup under a CompositePodGroup (alpha): kube-scheduler
//! schedules its whole tree at once ([`crate::schedule::composite`]), so the group's verdict is the
//! tree's. The report shows the tree group by group — what each needs (`minCount` pods,
//! `minGroupCount` children), what it has, whether it fit and the words kube-scheduler writes on it
//! — and why the whole tree does not fit (the root's status).

use serde::Serialize;

use super::{GroupOutcome, MemberState, PodGroupReport};
use crate::engine::Framework;
use crate::plugins::gang_scheduling::waiting_for_tree;
use crate::schedule::ScheduleOptions;
use crate::schedule::composite::{GroupKey, TreeCycle, tree_cycle};
use crate::schedule::pod_group::GroupVerdict;
use crate::snapshot::pod_group_tree::{TreeKind, TreeNode, build_tree, tree_ready};

/// Said on every tree report: the engine's order of children is not kube-scheduler's.
pub const CHILD_ORDER_NOTE: &str = "kube-scheduler tries a composite's children in Go map order (it varies \
     from one cycle to the next); this report tries them by name: when the order decides, its words may differ";

/// One group of the tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TreeGroupView {
    /// Depth in the tree (0: the root).
    pub depth: usize,
    /// The group's name.
    pub name: String,
    /// `CompositePodGroup` or `PodGroup`.
    pub kind: &'static str,
    /// What it needs: `minGroupCount` children or `minCount` pods.
    pub needs: i32,
    /// What exists towards it: children that reach their own quorum, or pods (PreEnqueue's count).
    pub has: usize,
    /// Whether the cycle placed it (false for all when the tree does not fit).
    pub fits: bool,
    /// Its status as kube-scheduler leaves it (a PodGroup's `PodGroupInitiallyScheduled` message).
    pub message: String,
    /// For a CompositePodGroup: the placements tried (domain, fits), when it has a topology key.
    pub placements: Vec<(String, bool)>,
}

/// The tree a PodGroup belongs to, as the cycle leaves it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TreeReport {
    /// The root CompositePodGroup.
    pub root: String,
    /// Whether the whole tree fits (its pods are bound).
    pub fits: bool,
    /// GangScheduling's PreEnqueue words when the tree has not reached its quorum (nothing is tried).
    pub held: Option<String>,
    /// Every group of the tree, depth first.
    pub groups: Vec<TreeGroupView>,
    /// Why the whole tree does not fit: the root's status.
    pub message: String,
    /// See [`CHILD_ORDER_NOTE`].
    pub note: &'static str,
}

impl TreeReport {
    /// The tree in one line.
    pub fn summary(&self) -> String {
        if let Some(held) = &self.held {
            return format!("tree {}: held, {held}", self.root);
        }
        if self.fits {
            return format!("tree {}: fits whole", self.root);
        }
        format!("tree {}: does not fit whole: {}", self.root, self.message)
    }
}

fn views(
    node: &TreeNode,
    depth: usize,
    count: &dyn Fn(&str) -> usize,
    cycle: Option<&TreeCycle>,
    out: &mut Vec<TreeGroupView>,
) {
    let key = GroupKey {
        composite: node.is_composite(),
        name: node.name.clone(),
    };
    let status = cycle.and_then(|c| c.status(&key));
    let (kind, needs, has) = match &node.kind {
        TreeKind::CompositePodGroup { min_group_count, .. } => (
            "CompositePodGroup",
            *min_group_count,
            node.children.iter().filter(|c| tree_ready(c, count)).count(),
        ),
        TreeKind::PodGroup { min_count } => ("PodGroup", *min_count, count(&node.name)),
    };
    out.push(TreeGroupView {
        depth,
        name: node.name.clone(),
        kind,
        needs,
        has,
        fits: status.is_some_and(|s| s.is_success()) && cycle.is_some_and(TreeCycle::fits),
        message: status.map(|s| s.message()).unwrap_or_default(),
        placements: cycle
            .and_then(|c| c.results.get(&key))
            .map(|r| {
                r.placements
                    .iter()
                    .filter(|(p, _)| !p.name.is_empty())
                    .map(|(p, fits)| (p.name.clone(), *fits))
                    .collect()
            })
            .unwrap_or_default(),
    });
    for child in &node.children {
        views(child, depth + 1, count, cycle, out);
    }
}

/// Decides the PodGroup `group` of `report` (under the CompositePodGroup `root`) with its tree.
pub(super) fn fill_from_tree(
    report: &mut PodGroupReport,
    fwk: &Framework,
    group: &str,
    root: &str,
    options: ScheduleOptions,
) {
    let snapshot = fwk.snapshot();
    let namespace = report.namespace.clone();
    let Some(tree) = build_tree(snapshot, &namespace, root) else {
        return;
    };
    let count = |name: &str| snapshot.pod_group_counts(&namespace, name).all;
    let mut groups = Vec::new();
    let mut tree_report = TreeReport {
        root: root.to_owned(),
        fits: false,
        held: None,
        groups: Vec::new(),
        message: String::new(),
        note: CHILD_ORDER_NOTE,
    };
    if !tree_ready(&tree, &count) {
        views(&tree, 0, &count, None, &mut groups);
        tree_report.groups = groups;
        tree_report.held = Some(waiting_for_tree(root));
        report.outcome = GroupOutcome::WaitingForQuorum;
        report.message = waiting_for_tree(root);
        report.tree = Some(tree_report);
        return;
    }
    if report.quorum.queued == 0 {
        views(&tree, 0, &count, None, &mut groups);
        tree_report.groups = groups;
        report.outcome = GroupOutcome::AllScheduled;
        report.tree = Some(tree_report);
        return;
    }
    let Some(mut cycle) = tree_cycle(fwk, &namespace, root, None, options) else {
        return;
    };
    views(&tree, 0, &count, Some(&cycle), &mut groups);
    tree_report.groups = groups;
    tree_report.fits = cycle.fits();
    tree_report.message = cycle
        .status(&GroupKey {
            composite: true,
            name: root.to_owned(),
        })
        .map(|s| s.message())
        .unwrap_or_default();
    report.outcome = if tree_report.fits {
        GroupOutcome::Schedulable
    } else {
        GroupOutcome::Unschedulable
    };
    let own = cycle.condition(group).unwrap_or_default();
    report.message = if tree_report.fits {
        String::new()
    } else {
        format!(
            "{}, {own}",
            crate::schedule::pod_group::ERR_POD_GROUP_UNSCHEDULABLE
        )
    };
    let mut placed = 0;
    for member in &mut report.members {
        if member.state != MemberState::Pending {
            continue;
        }
        let placed_on = cycle.placed_on(group, &member.pod);
        match cycle.pod_verdict(fwk, group, &member.pod, options) {
            GroupVerdict::InPlacement(c) => {
                placed += 1;
                member.state = MemberState::Placed;
                member.node = c.explanation.selected.first().cloned();
            }
            GroupVerdict::PodFailed(c) => {
                member.state = MemberState::DidNotFit;
                member.message = c.explanation.message;
            }
            GroupVerdict::Rejected(status) => {
                if placed_on.is_some() {
                    placed += 1;
                }
                member.state = if placed_on.is_some() {
                    MemberState::Placed
                } else {
                    MemberState::NotReached
                };
                member.node = placed_on;
                member.message = status.message();
            }
        }
    }
    report.fit_one_by_one = placed;
    report.placeable_together = if tree_report.fits { placed } else { 0 };
    report.tree = Some(tree_report);
}
