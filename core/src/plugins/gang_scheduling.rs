//! GangScheduling (`framework/plugins/gangscheduling`): all-or-nothing scheduling of the pods of
//! a PodGroup with the gang policy. Its PreEnqueue keeps a pod out of the queue until the group's
//! PodGroup exists and `minCount` of its pods do; its Permit holds a pod until `minCount` pods of
//! the group are scheduled; its PlacementFeasible ([`placement_feasible`]) ends the pod group
//! cycle once the pods left cannot reach `minCount`.
//!
//! Default plugin where GenericWorkload is on (v1.37; the GangScheduling gate in v1.35 and
//! v1.36). With CompositePodGroup (alpha) on, a PodGroup under a CompositePodGroup waits for its
//! whole tree instead (`preEnqueueWithHierarchies`, `permitPodForHierarchy`): each composite needs
//! `minGroupCount` children that reach their own count ([`crate::schedule::composite`]).

use std::sync::Arc;

use crate::framework::FeatureGates;
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::{PermitPlugin, Plugin, PreEnqueuePlugin};
use crate::framework::runtime::{Handle, PluginError};
use crate::framework::status::{Code, Status};
use crate::plugins::names;
use crate::snapshot::pod_group_tree as composite;
use crate::snapshot::pod_groups::{gang_min_count, pod_group_name};
use crate::snapshot::{PodInfo, Snapshot};

/// The plugin's registry name.
pub(crate) const NAME: &str = names::GANG_SCHEDULING;

/// How long a gang pod waits at Permit for the quorum (`permitTimeoutDuration`, 5 minutes).
pub const PERMIT_TIMEOUT_SECONDS: u64 = 5 * 60;

/// PreEnqueue, the pod's PodGroup does not exist (yet); `%q` of the group name follows.
pub const ERR_REASON_WAITING_FOR_POD_GROUP_PREFIX: &str = "waiting for pods's pod group ";
/// PreEnqueue's suffix after the quoted group name.
pub const ERR_REASON_WAITING_FOR_POD_GROUP_SUFFIX: &str = " to appear in scheduling queue";
/// PreEnqueue, fewer than `minCount` pods of the group exist.
pub const ERR_REASON_WAITING_FOR_QUORUM: &str =
    "waiting for minCount pods from a gang to appear in scheduling queue";
/// Permit, fewer than `minCount` pods of the group are scheduled (assumed or bound).
pub const ERR_REASON_WAITING_AT_PERMIT: &str = "waiting for minCount pods from a gang to be scheduled";

/// PreEnqueue and Permit's words while the tree under `%q` has not reached its quorum
/// (CompositePodGroup).
pub fn waiting_for_tree(root: &str) -> String {
    format!("waiting for composite pod group {root:?} tree to meet quorum")
}
/// PreEnqueue's words when the tree of a pod cannot be built (CompositePodGroup).
pub const ERR_BUILD_HIERARCHY_PREFIX: &str = "failed to build hierarchy snapshot: ";

/// The message of PreEnqueue for a pod whose PodGroup does not exist.
fn waiting_for_pod_group(group: &str) -> String {
    format!("{ERR_REASON_WAITING_FOR_POD_GROUP_PREFIX}{group:?}{ERR_REASON_WAITING_FOR_POD_GROUP_SUFFIX}")
}

/// Upstream's `PlacementProgress`: how far the pod group cycle got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlacementProgress {
    /// Pods of the group not yet evaluated in this cycle.
    pub remaining: usize,
    /// Pods of the group scheduled: bound before the cycle, or placed by it so far.
    pub scheduled: usize,
}

/// PlacementFeasible: Unschedulable once `minCount` cannot be reached with the pods left (the
/// cycle stops), Wait while it may still be, success once it is.
pub fn placement_feasible(min_count: i32, progress: PlacementProgress) -> Status {
    let min = usize::try_from(min_count).unwrap_or(0);
    let PlacementProgress { remaining, scheduled } = progress;
    if remaining + scheduled < min {
        return Status::new(
            Code::Unschedulable,
            format!(
                "minCount ({min_count}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining"
            ),
        )
        .with_plugin(NAME);
    }
    if scheduled < min {
        return Status::new(
            Code::Wait,
            format!(
                "minCount ({min_count}) is not yet satisfied: {scheduled} scheduled, {remaining} remaining"
            ),
        )
        .with_plugin(NAME);
    }
    Status::success()
}

/// The gang a pod belongs to, for the pod group cycle: its PodGroup's `minCount`, when the pod
/// names a PodGroup that exists and has the gang policy.
pub fn gang_of(snapshot: &Snapshot, pod: &PodInfo) -> Option<(String, i32)> {
    let group = pod_group_name(&pod.pod)?;
    let min_count = gang_min_count(snapshot.pod_group(pod.namespace(), group)?)?;
    Some((group.to_string(), min_count))
}

/// The GangScheduling plugin.
#[derive(Debug)]
pub(crate) struct GangScheduling {
    snapshot: Arc<Snapshot>,
    /// CompositePodGroup is on: a group's tree decides.
    hierarchies: bool,
}

impl GangScheduling {
    /// For a pod of a PodGroup under a CompositePodGroup (gate on): whether its tree reaches its
    /// quorum with `count` pods per PodGroup; `None` when the pod's group has no parent.
    fn tree_quorum(&self, pod: &PodInfo, group: &str, count: &dyn Fn(&str) -> usize) -> Option<Status> {
        if !self.hierarchies {
            return None;
        }
        let root = match composite::root_of(&self.snapshot, pod.namespace(), group) {
            Ok(root) => root?,
            Err(e) => {
                return Some(Status::new(
                    Code::UnschedulableAndUnresolvable,
                    format!("{}{e}", ERR_BUILD_HIERARCHY_PREFIX),
                ));
            }
        };
        let ready = composite::build_tree(&self.snapshot, pod.namespace(), &root)
            .is_some_and(|tree| composite::tree_ready(&tree, count));
        Some(if ready {
            Status::success()
        } else {
            Status::new(Code::UnschedulableAndUnresolvable, waiting_for_tree(&root))
        })
    }
}

impl Plugin for GangScheduling {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        Some(self)
    }
    fn as_permit(&self) -> Option<&dyn PermitPlugin> {
        Some(self)
    }
}

impl PreEnqueuePlugin for GangScheduling {
    /// `preEnqueueHierarchiesDisabled`, or `preEnqueueWithHierarchies` for a PodGroup under a
    /// CompositePodGroup.
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        let Some(group) = pod_group_name(&pod.pod) else {
            return Status::success();
        };
        // A pod explained from a file is not in the snapshot, but it is in the queue.
        let queued_elsewhere = usize::from(self.snapshot.pod(pod.namespace(), pod.name()).is_none());
        let Some(pod_group) = self.snapshot.pod_group(pod.namespace(), group) else {
            if self.hierarchies {
                // `BuildHierarchySnapshotFromPod`: the group's state holds its pods, not its object.
                return Status::new(
                    Code::UnschedulableAndUnresolvable,
                    format!(
                        "{}pod group object not found in state for podgroup/{}/{group}",
                        ERR_BUILD_HIERARCHY_PREFIX,
                        pod.namespace()
                    ),
                );
            }
            return Status::new(Code::UnschedulableAndUnresolvable, waiting_for_pod_group(group));
        };
        let all = |name: &str| {
            self.snapshot.pod_group_counts(pod.namespace(), name).all
                + if name == group { queued_elsewhere } else { 0 }
        };
        if let Some(status) = self.tree_quorum(pod, group, &all) {
            return status;
        }
        let Some(min_count) = gang_min_count(pod_group) else {
            return Status::success();
        };
        let counts = self.snapshot.pod_group_counts(pod.namespace(), group);
        if counts.all + queued_elsewhere < usize::try_from(min_count).unwrap_or(0) {
            return Status::new(Code::UnschedulableAndUnresolvable, ERR_REASON_WAITING_FOR_QUORUM);
        }
        Status::success()
    }
}

impl PermitPlugin for GangScheduling {
    /// `Permit` with `permitPodGroup`: the pod being permitted is assumed, so it counts as
    /// scheduled with the group's bound pods.
    fn permit(&self, _state: &mut CycleState, pod: &PodInfo, _node_name: &str) -> (Status, u64) {
        let Some(group) = pod_group_name(&pod.pod) else {
            return (Status::success(), 0);
        };
        let Some(pod_group) = self.snapshot.pod_group(pod.namespace(), group) else {
            return (
                Status::error(format!(
                    "failed to get podGroup {}/{group}: podgroup.scheduling.k8s.io {group:?} not found",
                    pod.namespace()
                )),
                0,
            );
        };
        let assumed_here = usize::from(pod.node_name().is_empty());
        let scheduled = |name: &str| {
            self.snapshot.pod_group_counts(pod.namespace(), name).scheduled
                + if name == group { assumed_here } else { 0 }
        };
        if let Some(status) = self.tree_quorum(pod, group, &scheduled) {
            return if status.is_success() {
                (status, 0)
            } else {
                // `permitPodForHierarchy`: the pod waits for its tree, as a gang pod for its group.
                (Status::new(Code::Wait, status.message()), PERMIT_TIMEOUT_SECONDS)
            };
        }
        let Some(min_count) = gang_min_count(pod_group) else {
            return (Status::success(), 0);
        };
        let counts = self.snapshot.pod_group_counts(pod.namespace(), group);
        let assumed = usize::from(pod.node_name().is_empty());
        if counts.scheduled + assumed < usize::try_from(min_count).unwrap_or(0) {
            return (
                Status::new(Code::Wait, ERR_REASON_WAITING_AT_PERMIT),
                PERMIT_TIMEOUT_SECONDS,
            );
        }
        (Status::success(), 0)
    }
}

/// Builds the plugin over the handle's snapshot (it takes no args).
pub(crate) fn new(
    _args: Option<&serde_json::Value>,
    handle: &Handle,
    features: &FeatureGates,
) -> Result<Arc<dyn Plugin>, PluginError> {
    Ok(Arc::new(GangScheduling {
        snapshot: handle.snapshot.clone(),
        hierarchies: features.composite_pod_group,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::ClusterObjects;
    use crate::testing::{gang, node, pod, snapshot_of};

    /// A snapshot with PodGroup `pg` (gang, minCount 3) unless `group` says otherwise, and `pods`.
    fn plugin(
        groups: Vec<k8s_openapi::api::scheduling::v1beta1::PodGroup>,
        pods: Vec<k8s_openapi::api::core::v1::Pod>,
    ) -> GangScheduling {
        GangScheduling {
            hierarchies: false,
            snapshot: Arc::new(snapshot_of(ClusterObjects {
                nodes: vec![node("n1").obj()],
                pods,
                pod_groups: groups,
                ..Default::default()
            })),
        }
    }

    #[test]
    fn pre_enqueue_waits_for_the_pod_group_and_its_quorum() {
        let member = |name: &str| pod(name).pod_group("pg");
        // (case, groups, pods in the snapshot, the pod asked about, want: None = enqueued)
        let cases = [
            ("no group", vec![gang("pg", 3).obj()], vec![], pod("p"), None),
            (
                "the PodGroup does not exist",
                vec![],
                vec![member("a").obj(), member("b").obj(), member("c").obj()],
                member("a"),
                Some("waiting for pods's pod group \"pg\" to appear in scheduling queue"),
            ),
            (
                "two of three",
                vec![gang("pg", 3).obj()],
                vec![member("a").obj(), member("b").obj()],
                member("a"),
                Some("waiting for minCount pods from a gang to appear in scheduling queue"),
            ),
            (
                "three of three, one bound",
                vec![gang("pg", 3).obj()],
                vec![member("a").node("n1").obj(), member("b").obj(), member("c").obj()],
                member("b"),
                None,
            ),
            (
                "two in the snapshot and the pod asked about from a file",
                vec![gang("pg", 3).obj()],
                vec![member("a").obj(), member("b").obj()],
                member("from-file"),
                None,
            ),
            (
                "a group of another namespace does not count",
                vec![gang("pg", 2).namespace("other").obj(), gang("pg", 2).obj()],
                vec![member("a").obj(), member("b").namespace("other").obj()],
                member("a"),
                Some("waiting for minCount pods from a gang to appear in scheduling queue"),
            ),
            (
                "the basic policy has no quorum",
                vec![gang("pg", 3).basic().obj()],
                vec![member("a").obj()],
                member("a"),
                None,
            ),
        ];
        for (case, groups, pods, asked, want) in cases {
            let status = plugin(groups, pods).pre_enqueue(&asked.info());
            match want {
                None => assert!(status.is_success(), "{case}: {status:?}"),
                Some(reason) => {
                    assert_eq!(status.code(), Code::UnschedulableAndUnresolvable, "{case}");
                    assert_eq!(status.reasons(), [reason.to_string()], "{case}");
                }
            }
        }
    }

    #[test]
    fn permit_waits_until_min_count_pods_are_scheduled() {
        let member = |name: &str| pod(name).pod_group("pg");
        // (case, minCount, pods in the snapshot, want Wait)
        let cases = [
            (
                "first of three",
                3,
                vec![member("b").obj(), member("c").obj()],
                true,
            ),
            (
                "third of three, two bound",
                3,
                vec![member("a").node("n1").obj(), member("b").node("n1").obj()],
                false,
            ),
            ("minCount 1", 1, vec![], false),
        ];
        for (case, min_count, pods, want_wait) in cases {
            let gs = plugin(vec![gang("pg", min_count).obj()], pods);
            let (status, timeout) = gs.permit(&mut CycleState::new(), &member("p").info(), "n1");
            if want_wait {
                assert_eq!(status.code(), Code::Wait, "{case}");
                assert_eq!(
                    status.reasons(),
                    [ERR_REASON_WAITING_AT_PERMIT.to_string()],
                    "{case}"
                );
                assert_eq!(timeout, 300, "{case}");
            } else {
                assert!(status.is_success(), "{case}: {status:?}");
            }
        }
        // Not in a group: nothing to wait for.
        let gs = plugin(vec![gang("pg", 3).obj()], vec![]);
        assert!(
            gs.permit(&mut CycleState::new(), &pod("p").info(), "n1")
                .0
                .is_success()
        );
    }

    #[test]
    fn placement_feasible_says_what_upstream_says() {
        let progress = |remaining, scheduled| PlacementProgress { remaining, scheduled };
        // (minCount, progress, code, message)
        let cases = [
            (
                3,
                progress(1, 1),
                Code::Unschedulable,
                "minCount (3) cannot be satisfied: 1 scheduled, 1 remaining",
            ),
            (
                3,
                progress(0, 0),
                Code::Unschedulable,
                "minCount (3) cannot be satisfied: 0 scheduled, 0 remaining",
            ),
            (
                3,
                progress(2, 1),
                Code::Wait,
                "minCount (3) is not yet satisfied: 1 scheduled, 2 remaining",
            ),
            (3, progress(0, 3), Code::Success, ""),
            (3, progress(5, 4), Code::Success, ""),
        ];
        for (min_count, p, code, message) in cases {
            let status = placement_feasible(min_count, p);
            assert_eq!(
                (status.code(), status.message().as_str()),
                (code, message),
                "{p:?}"
            );
        }
    }
}
