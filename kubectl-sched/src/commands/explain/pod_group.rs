//! `explain podgroup/NAME` and `explain workload/NAME`: a pod group as kube-scheduler's pod group
//! cycle decides it, with the node-dimension diagnosis and the checked fixes of
//! [`sched_core::diagnosis::diagnose_pod_group`]; a Workload is explained as its PodGroups. Also the
//! short "Pod group" section `explain POD` adds for a pod of a group.

use std::sync::Arc;

use sched_core::diagnosis::pod_group::{Depth, PodGroupReport, diagnose_pod_group, pod_groups_of_workload};
use sched_core::engine::Framework;
use sched_core::features::KubeVersion;
use sched_core::snapshot::pod_group_tree::build_tree;
use sched_core::snapshot::pod_groups::pod_group_name;
use sched_core::{ClusterObjects, Engine, PodInfo};
use serde::Serialize;

use super::ExplainError;
use crate::source::pods::ResolveError;
use crate::source::what_if::Applied;

/// What `explain KIND/NAME` names when it is not a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupTarget {
    /// `podgroup/NAME`.
    PodGroup(String),
    /// `workload/NAME`.
    Workload(String),
    /// `compositepodgroup/NAME` (CompositePodGroup, alpha): every PodGroup of its tree.
    CompositePodGroup(String),
}

/// kubectl's spellings of the workload API's kinds (they have no short names: `kubectl
/// api-resources` lists none for scheduling.k8s.io's podgroups and workloads).
const POD_GROUP_KINDS: [&str; 4] = [
    "podgroup",
    "podgroups",
    "podgroup.scheduling.k8s.io",
    "podgroups.scheduling.k8s.io",
];
const WORKLOAD_KINDS: [&str; 4] = [
    "workload",
    "workloads",
    "workload.scheduling.k8s.io",
    "workloads.scheduling.k8s.io",
];

/// kubectl's spellings of scheduling.k8s.io/v1alpha3's compositepodgroups (no short names either).
const COMPOSITE_POD_GROUP_KINDS: [&str; 4] = [
    "compositepodgroup",
    "compositepodgroups",
    "compositepodgroup.scheduling.k8s.io",
    "compositepodgroups.scheduling.k8s.io",
];

/// `podgroup/NAME` or `workload/NAME` (case-insensitive kind, as kubectl); `None` for a pod.
pub fn group_target(arg: &str) -> Option<GroupTarget> {
    let (kind, name) = arg.split_once('/')?;
    let kind = kind.to_ascii_lowercase();
    if POD_GROUP_KINDS.contains(&kind.as_str()) {
        Some(GroupTarget::PodGroup(name.to_string()))
    } else if WORKLOAD_KINDS.contains(&kind.as_str()) {
        Some(GroupTarget::Workload(name.to_string()))
    } else if COMPOSITE_POD_GROUP_KINDS.contains(&kind.as_str()) {
        Some(GroupTarget::CompositePodGroup(name.to_string()))
    } else {
        None
    }
}

/// What `explain podgroup/NAME` or `workload/NAME` found.
#[derive(Debug, Clone, Serialize)]
pub struct GroupExplainReport {
    /// `PodGroup` or `Workload`.
    pub kind: &'static str,
    /// The name asked for.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// The kube-scheduler release whose semantics decided.
    pub kube_version: KubeVersion,
    /// The profile the groups were evaluated with.
    pub profile: String,
    /// Nodes in the cluster.
    pub nodes_total: usize,
    /// The what-if flags applied to the cluster first.
    pub what_if: Vec<Applied>,
    /// One per PodGroup (a Workload's: every PodGroup made from it, by name).
    pub pod_groups: Vec<PodGroupReport>,
}

impl GroupExplainReport {
    /// True when kube-scheduler binds every group's pending pods now.
    pub fn all_scheduled(&self) -> bool {
        self.pod_groups.iter().all(PodGroupReport::schedulable)
    }
}

/// Explains `target` in `namespace`: the group's pods' schedulerName (else `profile`, else the
/// default) picks the profile.
pub fn explain_group(
    engine: &Engine,
    objects: ClusterObjects,
    namespace: &str,
    origin: &str,
    target: &GroupTarget,
    profile: Option<&str>,
) -> Result<GroupExplainReport, ExplainError> {
    let snapshot = Arc::new(engine.snapshot(objects));
    let (kind, name, groups) = match target {
        GroupTarget::PodGroup(name) => ("PodGroup", name, vec![name.clone()]),
        GroupTarget::Workload(name) => {
            if !snapshot
                .workloads
                .contains_key(&sched_core::snapshot::namespaced_key(namespace, name))
            {
                return Err(ExplainError::NotFound {
                    kind: "workloads.scheduling.k8s.io",
                    name: name.clone(),
                    namespace: namespace.to_string(),
                    origin: origin.to_string(),
                });
            }
            (
                "Workload",
                name,
                pod_groups_of_workload(&snapshot, namespace, name),
            )
        }
        GroupTarget::CompositePodGroup(name) => {
            let Some(tree) = build_tree(&snapshot, namespace, name) else {
                return Err(ExplainError::NotFound {
                    kind: "compositepodgroups.scheduling.k8s.io",
                    name: name.clone(),
                    namespace: namespace.to_string(),
                    origin: origin.to_string(),
                });
            };
            let leaves = tree.leaves().into_iter().map(|l| l.name.clone()).collect();
            ("CompositePodGroup", name, leaves)
        }
    };
    // The profile of the group's pods (kube-scheduler schedules a group with its pods' profile).
    let scheduler = profile.map(str::to_string).or_else(|| {
        snapshot
            .pods_by_key
            .values()
            .find(|p| {
                p.namespace() == namespace
                    && pod_group_name(&p.pod).is_some_and(|g| groups.iter().any(|n| n == g))
            })
            .map(|p| p.scheduler_name().to_string())
    });
    let resolved = engine
        .profile(scheduler.as_deref().unwrap_or(""))
        .map_err(ResolveError::NoSuchProfile)?;
    let fwk = engine
        .framework(resolved, snapshot.clone())
        .map_err(ResolveError::from)?;
    let mut pod_groups = Vec::new();
    for group in &groups {
        match diagnose_pod_group(engine, &fwk, namespace, group, Depth::Full) {
            Some(report) => pod_groups.push(report),
            None if kind == "PodGroup" => {
                return Err(ExplainError::NotFound {
                    kind: "podgroups.scheduling.k8s.io",
                    name: group.clone(),
                    namespace: namespace.to_string(),
                    origin: origin.to_string(),
                });
            }
            None => {}
        }
    }
    Ok(GroupExplainReport {
        kind,
        name: name.clone(),
        namespace: namespace.to_string(),
        kube_version: engine.features().version,
        profile: resolved.scheduler_name.clone(),
        nodes_total: snapshot.nodes().len(),
        what_if: Vec::new(),
        pod_groups,
    })
}

/// `explain POD`'s "Pod group" section: the group of a pod that names one, in short (quorum,
/// verdict), when the profile runs the pod group cycle; `None` otherwise.
pub fn pod_group_section(engine: &Engine, fwk: &Framework, pod: &PodInfo) -> Option<PodGroupReport> {
    let group = pod_group_name(&pod.pod)?;
    // The pod explained was taken out of the cluster (it may come from -f): the group counts it,
    // as a pending pod, the way kube-scheduler's queue has it.
    let with_pod;
    let fwk = if fwk.snapshot().pod(pod.namespace(), pod.name()).is_some() {
        fwk
    } else {
        let mut snapshot = (**fwk.snapshot()).clone();
        snapshot.add_pending_pod(Arc::new(pod.clone()));
        with_pod = fwk.on_snapshot(Arc::new(snapshot)).ok()?;
        &with_pod
    };
    let report = diagnose_pod_group(engine, fwk, pod.namespace(), group, Depth::Summary)?;
    (!matches!(
        report.outcome,
        sched_core::diagnosis::pod_group::GroupOutcome::GangSchedulingOff
    ))
    .then_some(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_spellings_of_the_kinds_are_targets_and_pods_are_not() {
        let cases = [
            ("podgroup/train", Some(GroupTarget::PodGroup("train".into()))),
            ("podgroups/train", Some(GroupTarget::PodGroup("train".into()))),
            ("PodGroup/train", Some(GroupTarget::PodGroup("train".into()))),
            (
                "podgroups.scheduling.k8s.io/train",
                Some(GroupTarget::PodGroup("train".into())),
            ),
            ("workload/llama", Some(GroupTarget::Workload("llama".into()))),
            ("workloads/llama", Some(GroupTarget::Workload("llama".into()))),
            (
                "compositepodgroup/llm",
                Some(GroupTarget::CompositePodGroup("llm".into())),
            ),
            (
                "CompositePodGroups.scheduling.k8s.io/llm",
                Some(GroupTarget::CompositePodGroup("llm".into())),
            ),
            ("pod/train", None),
            ("train", None),
            ("pg/train", None),
        ];
        for (arg, expected) in cases {
            assert_eq!(group_target(arg), expected, "{arg}");
        }
    }
}
