//! The composite cycle's unit tests: each tree as kube-scheduler v1.37.2 decides it (children tried
//! in name order, as this engine does).
use std::sync::Arc;

use super::*;
use crate::explain::{Explanation, Outcome};
use crate::features::FeatureGates;
use crate::framework::profile::SchedulerConfig;
use crate::plugins::in_tree_registry_with;
use crate::snapshot::ClusterObjects;
use crate::testing::{composite, explain_named, gang, node, pod};

const ZONE: &str = "topology.kubernetes.io/zone";
/// What DefaultPreemption answers when no pod of the cluster has a lower priority.
const NO_VICTIMS: &str = "pod group preemption: No preemption victims found for incoming preemptor";

/// v1.37's gates with the workload API and topology placement on, and composite groups when
/// `trees`.
fn gates(trees: bool) -> FeatureGates {
    let overrides = if trees {
        "GenericWorkload=true,TopologyAwareWorkloadScheduling=true,CompositePodGroup=true"
    } else {
        "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
    };
    FeatureGates::v1_37().with_overrides(overrides).expect("gates")
}

fn framework(trees: bool, objects: &ClusterObjects) -> Framework {
    let features = gates(trees);
    let registry = in_tree_registry_with(features);
    let config = SchedulerConfig::default_config(&registry);
    let profile = config.profile("default-scheduler").expect("default profile");
    let snapshot = Arc::new(Snapshot::with_features(objects.clone(), features));
    Framework::new(profile, &registry, snapshot).expect("framework")
}

fn explain(trees: bool, objects: &ClusterObjects, asked: &str) -> Explanation {
    explain_named(&framework(trees, objects), objects, asked)
}

/// A tree: nodes `(name, zone, cpu)`, the CompositePodGroup `job` (minGroupCount `min_groups`,
/// topology on the zone key when `zoned`) and its gangs `(name, minCount, pods, cpu per pod)`.
fn tree(
    nodes: &[(&str, &str, &str)],
    min_groups: i32,
    zoned: bool,
    gangs: &[(&str, i32, &[&str], &str)],
) -> ClusterObjects {
    let root = composite("job", min_groups);
    let root = if zoned { root.topology(ZONE) } else { root };
    ClusterObjects {
        nodes: nodes
            .iter()
            .map(|(name, zone, cpu)| {
                node(name)
                    .cpu(cpu)
                    .memory("8Gi")
                    .pods("110")
                    .label(ZONE, zone)
                    .obj()
            })
            .collect(),
        pods: gangs
            .iter()
            .flat_map(|(group, _, pods, cpu)| {
                pods.iter().map(move |p| pod(p).pod_group(group).cpu(cpu).obj())
            })
            .collect(),
        pod_groups: gangs
            .iter()
            .map(|(group, min_count, _, _)| gang(group, *min_count).parent("job").obj())
            .collect(),
        composite_pod_groups: vec![root.obj()],
        ..Default::default()
    }
}

/// Each pod of a tree as kube-scheduler decides it, with the tree's gate on; and with it off, how
/// the same pod is decided as a PodGroup alone.
#[test]
fn a_tree_is_placed_all_or_nothing_with_upstream_words() {
    let one_node = [("n1", "a", "4")];
    let symmetric = tree(
        &one_node,
        1,
        false,
        &[
            ("left", 3, &["l1", "l2", "l3"], "2"),
            ("right", 3, &["r1", "r2", "r3"], "2"),
        ],
    );
    let left_words = "pod group is unschedulable, 0/1 placements are available, first placement status: \
                      minCount (3) cannot be satisfied: 2 scheduled, 0 remaining";
    let asymmetric = crate::testing::small_and_big_gang_tree();
    let tree_words = "pod group is unschedulable, 0/1 placements are available, first placement status: \
                      minCount (2) cannot be satisfied: 1 scheduled, 0 remaining";
    // (case, cluster, pod, outcome with the gate on, message, outcome with it off)
    let cases = [
        (
            "the tree fits: a pod of the first gang",
            tree(
                &one_node,
                2,
                false,
                &[("ps", 2, &["p1", "p2"], "1"), ("workers", 2, &["w1", "w2"], "1")],
            ),
            "p1",
            Outcome::Scheduled,
            String::new(),
            Outcome::Scheduled,
        ),
        (
            "the tree fits: a pod of the second gang",
            tree(
                &one_node,
                2,
                false,
                &[("ps", 2, &["p1", "p2"], "1"), ("workers", 2, &["w1", "w2"], "1")],
            ),
            "w2",
            Outcome::Scheduled,
            String::new(),
            Outcome::Scheduled,
        ),
        (
            "neither gang fits: a pod that fit carries its gang's status",
            symmetric.clone(),
            "l1",
            Outcome::Unschedulable,
            format!("pod group is unschedulable, {left_words}, {NO_VICTIMS}"),
            Outcome::Unschedulable,
        ),
        (
            "neither gang fits: the pod that did not fit, its own words",
            symmetric.clone(),
            "r3",
            Outcome::Unschedulable,
            "0/1 nodes are available: 1 Insufficient cpu.".to_owned(),
            Outcome::Unschedulable,
        ),
        (
            "a gang that fits alone is held with the tree, with the root's status before PostFilter",
            asymmetric.clone(),
            "s1",
            Outcome::Unschedulable,
            tree_words.to_owned(),
            Outcome::Scheduled,
        ),
        (
            "the gang that does not fit: a pod that fit",
            asymmetric.clone(),
            "b1",
            Outcome::Unschedulable,
            format!("pod group is unschedulable, {tree_words}, {NO_VICTIMS}"),
            Outcome::Unschedulable,
        ),
        (
            "quorum: a child gang with fewer pods than minCount holds the whole tree",
            tree(
                &one_node,
                2,
                false,
                &[("ps", 2, &["p1", "p2"], "1"), ("workers", 2, &["w1"], "1")],
            ),
            "p1",
            Outcome::Gated,
            "waiting for composite pod group \"job\" tree to meet quorum".to_owned(),
            Outcome::Scheduled,
        ),
    ];
    for (case, objects, asked, on, message, off) in cases {
        let e = explain(true, &objects, asked);
        assert_eq!((e.outcome, e.message.as_str()), (on, message.as_str()), "{case}");
        if on == Outcome::Scheduled {
            assert_eq!(e.selected, ["n1"], "{case}");
        }
        assert_eq!(explain(false, &objects, asked).outcome, off, "{case}: gate off");
    }
}

/// The PodGroups' conditions: PostFilter's answer is appended once per group of the tree, so a
/// status two groups share (the root's, taken by the gang that fit under it) carries it twice.
#[test]
fn conditions_repeat_the_answer_on_a_shared_status() {
    let objects = crate::testing::small_and_big_gang_tree();
    let fwk = framework(true, &objects);
    let cycle = tree_cycle(&fwk, "default", "job", None, ScheduleOptions::default()).expect("tree");
    assert!(!cycle.fits());
    let tree_words = "pod group is unschedulable, 0/1 placements are available, first placement status: \
                      minCount (2) cannot be satisfied: 1 scheduled, 0 remaining";
    assert_eq!(
        cycle.condition("a-small").as_deref(),
        Some(format!("{tree_words}, {NO_VICTIMS}, {NO_VICTIMS}").as_str())
    );
    assert_eq!(
        cycle.condition("b-big").as_deref(),
        Some(format!("{tree_words}, {NO_VICTIMS}").as_str())
    );
}

/// A zoned tree goes to the one zone that holds all of it: zone a holds the first gang and one pod
/// of the second, zone b all three pods.
#[test]
fn a_zoned_tree_is_placed_in_the_zone_that_holds_it_whole() {
    let objects = tree(
        &[("a1", "a", "2"), ("b1", "b", "3")],
        2,
        true,
        &[("ps", 1, &["p1"], "1"), ("workers", 2, &["w1", "w2"], "1")],
    );
    for asked in ["p1", "w1", "w2"] {
        let e = explain(true, &objects, asked);
        assert_eq!(
            (e.outcome, e.selected.as_slice()),
            (Outcome::Scheduled, &["b1".to_owned()][..]),
            "{asked}"
        );
    }
    let fwk = framework(true, &objects);
    let cycle = tree_cycle(&fwk, "default", "job", None, ScheduleOptions::default()).expect("tree");
    let root = &cycle.results[&GroupKey {
        composite: true,
        name: "job".into(),
    }];
    let fits: Vec<(&str, bool)> = root
        .placements
        .iter()
        .map(|(p, f)| (p.name.as_str(), *f))
        .collect();
    assert_eq!(fits, [("a", false), ("b", true)]);
}

/// A PodGroup naming a CompositePodGroup that does not exist is held, with the cache's words.
#[test]
fn a_missing_parent_holds_the_pods() {
    let mut objects = tree(&[("n1", "a", "4")], 1, false, &[("ps", 1, &["p1"], "1")]);
    objects.composite_pod_groups.clear();
    let e = explain(true, &objects, "p1");
    assert_eq!(
        (e.outcome, e.message.as_str()),
        (
            Outcome::Gated,
            "failed to build hierarchy snapshot: composite pod group object not found in state for \
             compositepodgroup/default/job"
        )
    );
}
