//! Builders for the workload API's objects (scheduling.k8s.io/v1beta1 PodGroups) and the pod's
//! reference to its group (`spec.schedulingGroup`), for the gang scheduling tests.

use k8s_openapi::api::core::v1::PodSchedulingGroup;
use k8s_openapi::api::scheduling::v1beta1::{
    BasicSchedulingPolicy, GangSchedulingPolicy, PodGroup, PodGroupSchedulingConstraints,
    PodGroupSchedulingPolicy, PodGroupSpec, TopologyConstraint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::PodBuilder;
use crate::explain::Explanation;
use crate::framework::runtime::Framework;
use crate::schedule::{ScheduleOptions, schedule};
use crate::snapshot::{ClusterObjects, PodInfo};

/// Explains the pod named `asked` of `objects` with `fwk` (a framework over those objects), as
/// `explain` does.
pub fn explain_named(fwk: &Framework, objects: &ClusterObjects, asked: &str) -> Explanation {
    let pod = objects
        .pods
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(asked))
        .expect("asked pod")
        .clone();
    schedule(
        fwk,
        &PodInfo::with_features(std::sync::Arc::new(pod), fwk.features()),
        ScheduleOptions::default(),
    )
}

impl PodBuilder {
    /// `spec.schedulingGroup.podGroupName`: the pod belongs to this PodGroup (in its namespace).
    pub fn pod_group(mut self, group: &str) -> Self {
        self.spec().scheduling_group = Some(PodSchedulingGroup {
            pod_group_name: Some(group.to_string()),
        });
        self
    }
}

/// A PodGroup under construction.
#[derive(Debug, Clone)]
pub struct PodGroupBuilder(pub PodGroup);

/// A PodGroup `name` in namespace `default` with the gang policy `minCount: min_count`.
pub fn gang(name: &str, min_count: i32) -> PodGroupBuilder {
    PodGroupBuilder(PodGroup {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".to_string()),
            ..Default::default()
        },
        spec: PodGroupSpec {
            scheduling_policy: PodGroupSchedulingPolicy {
                gang: Some(GangSchedulingPolicy { min_count }),
                basic: None,
            },
            ..Default::default()
        },
        status: None,
    })
}

impl PodGroupBuilder {
    /// The basic policy instead of the gang one (no minCount: each pod on its own).
    pub fn basic(mut self) -> Self {
        self.0.spec.scheduling_policy = PodGroupSchedulingPolicy {
            basic: Some(BasicSchedulingPolicy::default()),
            gang: None,
        };
        self
    }

    /// `spec.schedulingConstraints.topology`: the group must land in one domain of `key`
    /// (TopologyAwareWorkloadScheduling).
    pub fn topology(mut self, key: &str) -> Self {
        self.0.spec.scheduling_constraints = Some(PodGroupSchedulingConstraints {
            topology: Some(vec![TopologyConstraint { key: key.to_string() }]),
        });
        self
    }

    /// Namespace.
    pub fn namespace(mut self, ns: &str) -> Self {
        self.0.metadata.namespace = Some(ns.to_string());
        self
    }

    /// `spec.parentCompositePodGroupName`: the group is a child of that CompositePodGroup.
    pub fn parent(mut self, composite: &str) -> Self {
        self.0.spec.parent_composite_pod_group_name = Some(composite.to_string());
        self
    }

    /// The built PodGroup.
    pub fn obj(self) -> PodGroup {
        self.0
    }
}

// --- workload-aware preemption: the group's priority, policy and disruption mode ---

impl PodGroupBuilder {
    /// `spec.priority` (as admission resolves it from `priorityClassName`).
    pub fn priority(mut self, priority: i32) -> Self {
        self.0.spec.priority = Some(priority);
        self
    }

    /// `spec.preemptionPolicy` ("Never" or "PreemptLowerPriority"; read under PodGroupPreemptionPolicy).
    pub fn preemption_policy(mut self, policy: &str) -> Self {
        self.0.spec.preemption_policy = Some(policy.to_string());
        self
    }

    /// `spec.disruptionMode.all`: its pods are preempted together or not at all.
    pub fn disruption_all(mut self) -> Self {
        self.0.spec.disruption_mode = Some(k8s_openapi::api::scheduling::v1beta1::DisruptionMode {
            all: Some(Default::default()),
            ..Default::default()
        });
        self
    }

    /// `metadata.uid`.
    pub fn uid(mut self, uid: &str) -> Self {
        self.0.metadata.uid = Some(uid.to_string());
        self
    }
}

/// A CompositePodGroup (scheduling.k8s.io/v1alpha3) `name` in namespace `default` whose gang policy
/// needs `min_group_count` of its children.
pub fn composite(name: &str, min_group_count: i32) -> CompositeBuilder {
    use k8s_openapi::api::scheduling::v1alpha3::{
        CompositeGangSchedulingPolicy, CompositePodGroup, CompositePodGroupSchedulingPolicy,
    };
    CompositeBuilder(CompositePodGroup {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".to_string()),
            ..Default::default()
        },
        spec: k8s_openapi::api::scheduling::v1alpha3::CompositePodGroupSpec {
            scheduling_policy: CompositePodGroupSchedulingPolicy {
                gang: Some(CompositeGangSchedulingPolicy { min_group_count }),
                basic: None,
            },
            ..Default::default()
        },
        status: None,
    })
}

/// A CompositePodGroup under construction.
#[derive(Debug, Clone)]
pub struct CompositeBuilder(pub k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup);

impl CompositeBuilder {
    /// `spec.parentCompositePodGroupName`.
    pub fn parent(mut self, composite: &str) -> Self {
        self.0.spec.parent_composite_pod_group_name = Some(composite.to_string());
        self
    }

    /// `spec.schedulingConstraints.topology`: the whole subtree must land in one domain of `key`.
    pub fn topology(mut self, key: &str) -> Self {
        self.0.spec.scheduling_constraints = Some(
            k8s_openapi::api::scheduling::v1alpha3::CompositePodGroupSchedulingConstraints {
                topology: Some(vec![k8s_openapi::api::scheduling::v1alpha3::TopologyConstraint {
                    key: key.to_string(),
                }]),
            },
        );
        self
    }

    /// `spec.priority`.
    pub fn priority(mut self, priority: i32) -> Self {
        self.0.spec.priority = Some(priority);
        self
    }

    /// The built CompositePodGroup.
    pub fn obj(self) -> k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup {
        self.0
    }
}

/// A tree (CompositePodGroup `job`, minGroupCount 2) on one 6-cpu node `n1`: the gang `a-small`
/// (minCount 1, pod `s1` of 1 cpu) fits alone; `b-big` (minCount 2, pods `b1` and `b2` of 4 cpu)
/// fits one pod once `a-small` is placed, so the tree does not fit.
pub fn small_and_big_gang_tree() -> crate::snapshot::ClusterObjects {
    use super::{node, pod};
    crate::snapshot::ClusterObjects {
        nodes: vec![node("n1").cpu("6").memory("8Gi").pods("110").obj()],
        pods: vec![
            pod("s1").pod_group("a-small").cpu("1").obj(),
            pod("b1").pod_group("b-big").cpu("4").obj(),
            pod("b2").pod_group("b-big").cpu("4").obj(),
        ],
        pod_groups: vec![
            gang("a-small", 1).parent("job").obj(),
            gang("b-big", 2).parent("job").obj(),
        ],
        composite_pod_groups: vec![composite("job", 2).obj()],
        ..Default::default()
    }
}
