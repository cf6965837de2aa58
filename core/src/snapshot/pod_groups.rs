//! The workload API as the snapshot holds it: a pod's PodGroup (`spec.schedulingGroup`) and what
//! kube-scheduler's pod group state counts of it (`backend/cache/podgroupstate.go`): every pod of
//! the group it knows (`AllPodsCount`), those already scheduled (`ScheduledPodsCount`: assumed or
//! bound; a snapshot has no assumed pods, so bound) and those still pending, in the snapshot's order.
//! With CompositePodGroup (alpha) a PodGroup may name a parent CompositePodGroup, itself under
//! another, up to the API's tree depth ([`WORKLOAD_MAX_TREE_DEPTH`]).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;

use super::{PodInfo, Snapshot, namespaced_key};

/// The PodGroup a pod names in `spec.schedulingGroup.podGroupName` (in the pod's namespace).
pub fn pod_group_name(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()?
        .scheduling_group
        .as_ref()?
        .pod_group_name
        .as_deref()
}

/// The gang policy's `minCount` of a PodGroup, `None` when it has another policy.
pub fn gang_min_count(group: &PodGroup) -> Option<i32> {
    group
        .spec
        .scheduling_policy
        .gang
        .as_ref()
        .map(|gang| gang.min_count)
}

/// The topology key a PodGroup's pods must share a domain of (`spec.schedulingConstraints.topology`;
/// the API allows one constraint, TopologyPlacementGenerator reads the first).
pub fn topology_key(group: &PodGroup) -> Option<&str> {
    group
        .spec
        .scheduling_constraints
        .as_ref()?
        .topology
        .as_ref()?
        .first()
        .map(|c| c.key.as_str())
}

/// The CompositePodGroup a PodGroup's `spec.parentCompositePodGroupName` names (same namespace).
pub fn parent_of_group(group: &PodGroup) -> Option<&str> {
    group.spec.parent_composite_pod_group_name.as_deref()
}

/// The CompositePodGroup a CompositePodGroup's `spec.parentCompositePodGroupName` names.
pub fn parent_of_composite(composite: &CompositePodGroup) -> Option<&str> {
    composite.spec.parent_composite_pod_group_name.as_deref()
}

/// How many children of a CompositePodGroup must be placed (`minGroupCount` of its gang policy;
/// 1 without one, as GangScheduling's `getMinCount`).
pub fn composite_min_group_count(composite: &CompositePodGroup) -> i32 {
    composite
        .spec
        .scheduling_policy
        .gang
        .as_ref()
        .map_or(1, |gang| gang.min_group_count)
}

/// The topology key all of a CompositePodGroup's pods must share a domain of (the first
/// `spec.schedulingConstraints.topology`, as for a PodGroup).
pub fn composite_topology_key(composite: &CompositePodGroup) -> Option<&str> {
    composite
        .spec
        .scheduling_constraints
        .as_ref()?
        .topology
        .as_ref()?
        .first()
        .map(|c| c.key.as_str())
}

/// `WorkloadMaxTreeDepth` (scheduling/v1alpha3): a tree of groups is at most this deep, its
/// PodGroups included; kube-scheduler looks no further up for a root.
pub const WORKLOAD_MAX_TREE_DEPTH: usize = 4;

/// What the scheduler's pod group state counts of one group.
#[derive(Debug, Clone, Default)]
pub struct PodGroupCounts {
    /// Every non-terminal pod of the group (`AllPodsCount`).
    pub all: usize,
    /// Those bound to a node (`ScheduledPodsCount` without assumed pods).
    pub scheduled: usize,
    /// Those not bound, in the snapshot's order (the group's unscheduled pods).
    pub pending: Vec<Arc<PodInfo>>,
}

impl Snapshot {
    /// The PodGroup `namespace/name`.
    pub fn pod_group(&self, namespace: &str, name: &str) -> Option<&Arc<PodGroup>> {
        self.pod_groups.get(&namespaced_key(namespace, name))
    }

    /// The CompositePodGroup `namespace/name`.
    pub fn composite_pod_group(&self, namespace: &str, name: &str) -> Option<&Arc<CompositePodGroup>> {
        self.composite_pod_groups.get(&namespaced_key(namespace, name))
    }

    /// The pods of the group `namespace/name` (a scan of the snapshot's pods: only gang pods ask).
    pub fn pod_group_counts(&self, namespace: &str, name: &str) -> PodGroupCounts {
        let mut counts = PodGroupCounts::default();
        let mut members: Vec<&Arc<PodInfo>> = self
            .pods_by_key
            .values()
            .filter(|p| p.namespace() == namespace && pod_group_name(&p.pod) == Some(name))
            .collect();
        // pods_by_key is a map: a stable order for the pending list.
        members.sort_by(|a, b| a.name().cmp(b.name()));
        for member in members {
            counts.all += 1;
            if member.node_name().is_empty() {
                counts.pending.push(member.clone());
            } else {
                counts.scheduled += 1;
            }
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use crate::snapshot::ClusterObjects;
    use crate::testing::{gang, node, pod, snapshot_of};

    #[test]
    fn counts_cover_bound_and_pending_members_of_the_group_only() {
        let snapshot = snapshot_of(ClusterObjects {
            nodes: vec![node("n1").obj()],
            pods: vec![
                pod("a").pod_group("pg").node("n1").obj(),
                pod("b").pod_group("pg").obj(),
                pod("c").pod_group("pg").obj(),
                pod("other-group").pod_group("pg2").obj(),
                pod("other-ns").namespace("ns2").pod_group("pg").obj(),
                pod("alone").obj(),
            ],
            pod_groups: vec![gang("pg", 3).obj()],
            ..Default::default()
        });
        let counts = snapshot.pod_group_counts("default", "pg");
        assert_eq!((counts.all, counts.scheduled), (3, 1));
        let pending: Vec<&str> = counts.pending.iter().map(|p| p.name()).collect();
        assert_eq!(pending, ["b", "c"]);
        assert!(snapshot.pod_group("default", "pg").is_some());
        assert!(snapshot.pod_group("ns2", "pg").is_none());
    }
}
