//! Cross-plugin scenarios: the default profile of v1.37.1 on small in-memory clusters, checked against
//! the FailedScheduling messages and choices kube-scheduler produces for the same state; the
//! `*_per_release` scenarios run the same cluster with each release's gates and code changes.

use std::sync::Arc;

use crate::explain::Outcome;
use crate::features::{FeatureGates, KubeVersion};
use crate::framework::profile::SchedulerConfig;
use crate::framework::runtime::Framework;
use crate::plugins::{in_tree_registry, in_tree_registry_with};
use crate::schedule::{ScheduleOptions, schedule};
use crate::snapshot::{ClusterObjects, PodInfo, Snapshot};
use crate::testing::{node, pod};

fn explain(objects: ClusterObjects, pending: k8s_openapi::api::core::v1::Pod) -> crate::explain::Explanation {
    explain_at(KubeVersion::PINNED, objects, pending)
}

/// [`explain`] with the default profile, gates and code of `version`.
fn explain_at(
    version: KubeVersion,
    objects: ClusterObjects,
    pending: k8s_openapi::api::core::v1::Pod,
) -> crate::explain::Explanation {
    let registry = in_tree_registry_with(FeatureGates::for_version(version));
    let config = SchedulerConfig::default_config(&registry);
    let profile = config.profile("default-scheduler").expect("default profile");
    let fwk = Framework::new(profile, &registry, Arc::new(Snapshot::new(objects))).expect("framework");
    schedule(&fwk, &PodInfo::new(pending), ScheduleOptions::default())
}

fn cluster(
    nodes: Vec<k8s_openapi::api::core::v1::Node>,
    pods: Vec<k8s_openapi::api::core::v1::Pod>,
) -> ClusterObjects {
    ClusterObjects {
        nodes,
        pods,
        ..Default::default()
    }
}

#[test]
fn default_profile_resolves_with_the_in_tree_registry() {
    let registry = in_tree_registry();
    let config = SchedulerConfig::default_config(&registry);
    let p = config.profile("default-scheduler").unwrap();
    assert_eq!(
        p.filter,
        [
            "NodeName",
            "NodeUnschedulable",
            "TaintToleration",
            "NodeAffinity",
            "NodePorts",
            "NodeResourcesFit",
            "VolumeRestrictions",
            "NodeVolumeLimits",
            "VolumeBinding",
            "VolumeZone",
            "PodTopologySpread",
            "InterPodAffinity",
            "DynamicResources",
            "NodeDeclaredFeatures",
        ]
    );
    assert_eq!(p.post_filter, ["DynamicResources", "DefaultPreemption"]);
    let weights: Vec<(&str, i64)> = p.score.iter().map(|(n, w)| (n.as_str(), *w)).collect();
    assert_eq!(
        weights,
        [
            ("TaintToleration", 3),
            ("NodeAffinity", 2),
            ("NodeResourcesFit", 1),
            ("VolumeBinding", 1),
            ("PodTopologySpread", 2),
            ("InterPodAffinity", 2),
            ("DynamicResources", 2),
            ("NodeResourcesBalancedAllocation", 1),
            ("ImageLocality", 1),
        ]
    );
}

#[test]
fn insufficient_cpu_everywhere_without_victims() {
    let e = explain(
        cluster(
            vec![
                node("n1").cpu("1").memory("1Gi").obj(),
                node("n2").cpu("2").memory("1Gi").obj(),
            ],
            vec![pod("running").cpu("1500m").node("n2").obj()],
        ),
        pod("big").cpu("1500m").obj(),
    );
    assert_eq!(e.outcome, Outcome::Unschedulable);
    // n1 can never hold 1500m (UnschedulableAndUnresolvable since 1.34), so preemption only tries n2,
    // where no pod has a lower priority.
    assert_eq!(
        e.message,
        "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."
    );
}

/// A control-plane node (tainted), a cordoned one and one short of cpu: three reasons.
fn tainted_cordoned_and_small() -> ClusterObjects {
    cluster(
        vec![
            node("cp")
                .cpu("4")
                .memory("8Gi")
                .taint("node-role.kubernetes.io/control-plane", "", "NoSchedule")
                .obj(),
            node("cordoned").cpu("4").memory("8Gi").unschedulable().obj(),
            node("small").cpu("2").memory("8Gi").obj(),
        ],
        vec![pod("running").cpu("1").node("small").obj()],
    )
}

#[test]
fn mixed_reasons_are_counted_and_sorted() {
    let e = explain(tainted_cordoned_and_small(), pod("p").cpu("2").obj());
    assert_eq!(
        e.message,
        "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling."
    );
    let small = e.nodes.iter().find(|n| n.name == "small").unwrap();
    assert_eq!(small.plugin.as_deref(), Some("NodeResourcesFit"));
}

#[test]
fn preemption_success_is_reported_in_the_message() {
    let e = explain(
        cluster(
            vec![node("n1").cpu("1").memory("1Gi").obj()],
            vec![pod("low").cpu("800m").priority(0).node("n1").obj()],
        ),
        pod("high").cpu("500m").priority(100).obj(),
    );
    assert_eq!(
        e.message,
        "0/1 nodes are available: 1 Insufficient cpu. preemption: found a potential placement for pod on node n1, preempting 1 victims"
    );
    assert_eq!(
        e.post_filter.as_ref().and_then(|p| p.nominated_node.as_deref()),
        Some("n1")
    );
}

#[test]
fn fits_on_the_least_allocated_node() {
    let e = explain(
        cluster(
            vec![
                node("busy").cpu("4").memory("8Gi").obj(),
                node("idle").cpu("4").memory("8Gi").obj(),
            ],
            vec![pod("x").cpu("3").memory("4Gi").node("busy").obj()],
        ),
        pod("p").cpu("500m").memory("512Mi").obj(),
    );
    assert_eq!(e.outcome, Outcome::Scheduled);
    assert_eq!(e.message, "");
    assert_eq!(e.selected, ["idle"]);
    assert_eq!(e.feasible, ["idle", "busy"]);
    assert!(!e.tie);
}

#[test]
fn equal_nodes_tie() {
    let e = explain(
        cluster(
            vec![
                node("a").cpu("4").memory("8Gi").obj(),
                node("b").cpu("4").memory("8Gi").obj(),
            ],
            vec![],
        ),
        pod("p").cpu("1").obj(),
    );
    assert_eq!(e.selected, ["a", "b"]);
    assert!(e.tie);
}

#[test]
fn no_nodes() {
    let e = explain(cluster(vec![], vec![]), pod("p").obj());
    assert_eq!(e.message, "no nodes available to schedule pods");
}

#[test]
fn missing_pvc_is_a_pre_filter_rejection() {
    // VolumeRestrictions rejects in PreFilter, so DynamicResources' PreFilter never runs and its PostFilter
    // fails reading its state: v1.37.1 appends that error ("not found") instead of a preemption verdict.
    let e = explain(
        cluster(vec![node("n1").cpu("1").obj()], vec![]),
        pod("p").pvc("data").obj(),
    );
    assert_eq!(
        e.message,
        "0/1 nodes are available: persistentvolumeclaim \"data\" not found. not found"
    );
}

#[test]
fn gated_pod_reports_the_gate() {
    let gated = pod("p")
        .with(|p| {
            p.spec.as_mut().unwrap().scheduling_gates =
                Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
                    name: "example.com/wait".into(),
                }])
        })
        .obj();
    let e = explain(cluster(vec![node("n1").cpu("1").obj()], vec![]), gated);
    assert_eq!(e.outcome, Outcome::Gated);
    assert_eq!(e.message, "waiting for scheduling gates: [example.com/wait]");
}

#[test]
fn nominated_pod_without_uid_still_holds_its_place_against_a_pod_without_uid() {
    // Snapshot files and `-f` pods often carry no metadata.uid: two such pods are still different pods,
    // so the higher-priority pod nominated to n1 keeps its 1500m there.
    let mut nominated = pod("waiting").cpu("1500m").priority(100).nominated("n1").obj();
    nominated.metadata.uid = None;
    let mut pending = pod("newcomer").cpu("1").obj();
    pending.metadata.uid = None;
    let e = explain(
        cluster(vec![node("n1").cpu("2").memory("1Gi").obj()], vec![nominated]),
        pending,
    );
    assert_eq!(e.outcome, Outcome::Unschedulable);
    assert_eq!(
        e.message,
        "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    );
}

#[test]
fn a_cycle_without_node_records_decides_as_one_with_them() {
    use crate::testing::generate::{GenerateParams, generate_pruned};
    let objects = generate_pruned(&GenerateParams {
        pending_percent: 10,
        ..GenerateParams::new(60, 1_200, 3, 11)
    });
    // Every shape of pod the generator makes, plus one PreFilter rejects (its claim is missing).
    let mut pending: Vec<_> = objects
        .pods
        .iter()
        .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_none()))
        .cloned()
        .collect();
    pending.push(pod("lost-claim").pvc("missing").obj());
    assert!(pending.len() > 50, "{} pending pods", pending.len());
    let registry = in_tree_registry();
    let config = SchedulerConfig::default_config(&registry);
    let profile = config.profile("default-scheduler").expect("default profile");
    let fwk = Framework::new(profile, &registry, Arc::new(Snapshot::new(objects))).expect("framework");
    let mut outcomes = std::collections::BTreeSet::new();
    for p in pending {
        let info = PodInfo::new(p);
        for sample_from in [None, Some(7)] {
            let recorded = ScheduleOptions {
                trace_filters: false,
                sample_from,
                ..ScheduleOptions::default()
            };
            let with = schedule(&fwk, &info, recorded);
            let without = schedule(
                &fwk,
                &info,
                ScheduleOptions {
                    record_nodes: false,
                    ..recorded
                },
            );
            assert!(
                without.nodes.is_empty() && without.feasible.is_empty(),
                "{}",
                with.pod
            );
            assert_eq!(
                (
                    with.outcome,
                    &with.message,
                    &with.selected,
                    with.tie,
                    with.selected_score
                ),
                (
                    without.outcome,
                    &without.message,
                    &without.selected,
                    without.tie,
                    without.selected_score
                ),
                "{}",
                with.pod
            );
            assert_eq!(with.post_filter, without.post_filter, "{}", with.pod);
            outcomes.insert(format!("{:?}", with.outcome));
        }
    }
    // Both kinds of answer were compared, not only one.
    assert!(
        outcomes.contains("Scheduled") && outcomes.contains("Unschedulable"),
        "{outcomes:?}"
    );
}

/// The taint reason per release in a whole FitError: v1.33.13 names the taint (an absent value
/// prints empty), v1.37.1 does not; the rest of the message is the same.
#[test]
fn taint_message_per_release() {
    for (version, taint) in [
        (
            KubeVersion::new(33, 13),
            "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }",
        ),
        (KubeVersion::new(37, 1), "node(s) had untolerated taint(s)"),
    ] {
        let e = explain_at(version, tainted_cordoned_and_small(), pod("p").cpu("2").obj());
        assert_eq!(
            e.message,
            format!(
                "0/3 nodes are available: 1 Insufficient cpu, 1 {taint}, 1 node(s) were unschedulable. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling."
            ),
            "{version}"
        );
    }
}

/// A ReadWriteOncePod claim in use: every node rejects the pod with v1.33's or v1.37's words.
#[test]
fn read_write_once_pod_message_per_release() {
    use crate::testing::{pv, pvc};
    let objects = || ClusterObjects {
        nodes: vec![node("n1").obj(), node("n2").obj()],
        pods: vec![pod("owner").pvc("data").node("n1").obj()],
        persistent_volumes: vec![
            pv("pv-data")
                .capacity("1Gi")
                .access_modes(&["ReadWriteOncePod"])
                .claim_ref("default", "data", "")
                .phase("Bound")
                .obj(),
        ],
        persistent_volume_claims: vec![
            pvc("data")
                .access_modes(&["ReadWriteOncePod"])
                .request("1Gi")
                .bound("pv-data")
                .phase("Bound")
                .obj(),
        ],
        ..Default::default()
    };
    for (version, reason) in [
        (
            KubeVersion::new(33, 13),
            "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode",
        ),
        (
            KubeVersion::new(37, 1),
            "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod",
        ),
    ] {
        let e = explain_at(version, objects(), pod("p").pvc("data").obj());
        assert_eq!(
            e.message,
            format!(
                "0/2 nodes are available: 2 {reason}. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
            ),
            "{version}"
        );
    }
}

/// A request above a node's allocatable: v1.33 rejects it as Unschedulable, so preemption tries
/// that node and finds the pod still does not fit after removing its victim (`Insufficient cpu`);
/// from v1.34 it is UnschedulableAndUnresolvable and preemption skips the node.
#[test]
fn request_above_allocatable_preemption_per_release() {
    let objects = || {
        cluster(
            vec![
                node("small").cpu("1").memory("1Gi").obj(),
                node("busy").cpu("2").memory("1Gi").obj(),
            ],
            vec![
                pod("low").cpu("100m").priority(0).node("small").obj(),
                pod("high").cpu("1500m").priority(1000).node("busy").obj(),
            ],
        )
    };
    for (version, preemption) in [
        (
            KubeVersion::new(33, 13),
            "1 Insufficient cpu, 1 No preemption victims found for incoming pod",
        ),
        (
            KubeVersion::new(37, 1),
            "1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling",
        ),
    ] {
        let e = explain_at(version, objects(), pod("p").cpu("1500m").priority(100).obj());
        assert_eq!(e.outcome, Outcome::Unschedulable, "{version}");
        assert_eq!(
            e.message,
            format!(
                "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: {preemption}."
            ),
            "{version}"
        );
    }
}

/// A pod with `spec.nodeName` naming a node that does not fit: up to v1.36 Filter runs on every
/// node (NodeUnschedulable before NodeName, so the cordoned node reports itself unschedulable);
/// v1.37's NodeName PreFilter keeps the other nodes out of the cycle.
#[test]
fn node_name_message_per_release() {
    let objects = || {
        cluster(
            vec![
                node("target").cpu("1").memory("1Gi").obj(),
                node("cordoned").cpu("4").memory("1Gi").unschedulable().obj(),
                node("free").cpu("4").memory("1Gi").obj(),
            ],
            vec![],
        )
    };
    for (version, filters) in [
        (
            KubeVersion::new(36, 3),
            "1 Insufficient cpu, 1 node(s) didn't match the requested node name, 1 node(s) were unschedulable",
        ),
        (
            KubeVersion::new(37, 1),
            "1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [NodeName]",
        ),
    ] {
        let e = explain_at(version, objects(), pod("p").cpu("2").node("target").obj());
        assert!(
            e.message
                .starts_with(&format!("0/3 nodes are available: {filters}.")),
            "{version}: {}",
            e.message
        );
    }
}
