//! The placement cycle's unit tests: each scenario as kube-scheduler v1.37.2 decides it.
use std::sync::Arc;

use super::*;
use crate::explain::{Explanation, Outcome};
use crate::features::FeatureGates;
use crate::framework::profile::SchedulerConfig;
use crate::plugins::in_tree_registry_with;
use crate::schedule::pod_group::pod_group_cycle;
use crate::snapshot::ClusterObjects;
use crate::testing::{explain_named, gang, node, pod};

const ZONE: &str = "topology.kubernetes.io/zone";

/// v1.37's gates with the workload API on, and topology placement when `tas`.
fn gates(tas: bool) -> FeatureGates {
    let overrides = if tas {
        "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
    } else {
        "GenericWorkload=true"
    };
    FeatureGates::v1_37().with_overrides(overrides).expect("gates")
}

/// The default profile's framework on `objects` with those gates.
fn framework(tas: bool, objects: &ClusterObjects) -> Framework {
    let features = gates(tas);
    let registry = in_tree_registry_with(features);
    let config = SchedulerConfig::default_config(&registry);
    let profile = config.profile("default-scheduler").expect("default profile");
    let snapshot = Arc::new(Snapshot::with_features(objects.clone(), features));
    Framework::new(profile, &registry, snapshot).expect("framework")
}

fn explain(tas: bool, objects: &ClusterObjects, asked: &str) -> Explanation {
    explain_named(&framework(tas, objects), objects, asked)
}

/// Nodes `(name, zone, cpu)`, PodGroup `pg` (gang `min_count`, topology on the zone key unless
/// `zone_key` is None) and `members` pending pods of it asking 1 cpu each; `bound` pods of the
/// group already run on the named nodes.
fn cluster(
    nodes: &[(&str, Option<&str>, &str)],
    min_count: i32,
    zone_key: Option<&str>,
    members: &[&str],
    bound: &[(&str, &str)],
) -> ClusterObjects {
    let group = gang("pg", min_count);
    ClusterObjects {
        nodes: nodes
            .iter()
            .map(|(name, zone, cpu)| {
                let n = node(name).cpu(cpu).memory("8Gi").pods("110");
                match zone {
                    Some(zone) => n.label(ZONE, zone).obj(),
                    None => n.obj(),
                }
            })
            .collect(),
        pods: members
            .iter()
            .map(|name| pod(name).pod_group("pg").cpu("1").obj())
            .chain(
                bound
                    .iter()
                    .map(|(name, on)| pod(name).pod_group("pg").cpu("1").node(on).obj()),
            )
            .collect(),
        pod_groups: vec![match zone_key {
            Some(key) => group.topology(key).obj(),
            None => group.obj(),
        }],
        ..Default::default()
    }
}

/// (case, cluster, asked, outcome, node or message, placement chosen, placements tied)
type Case<'a> = (
    &'a str,
    ClusterObjects,
    &'a str,
    Outcome,
    &'a str,
    Option<&'a str>,
    usize,
);

/// Each scenario as kube-scheduler v1.37.2 decides it with TopologyAwareWorkloadScheduling on:
/// the placement chosen (or none), and the words on the pod asked about.
#[test]
fn the_group_lands_in_one_domain_or_gets_the_placement_words() {
    let three = ["a", "b", "c"];
    // Two 2-cpu nodes in two zones: the cluster holds the group of three, no zone does.
    let no_single_zone = || {
        cluster(
            &[("a1", Some("zone-a"), "2"), ("b1", Some("zone-b"), "2")],
            3,
            Some(ZONE),
            &three,
            &[],
        )
    };
    // (case, cluster, asked, outcome, node prefix or message, placement chosen, tied)
    let cases: Vec<Case<'_>> = vec![
        (
            "fits one zone only: the group goes there, not split",
            cluster(
                &[("a1", Some("zone-a"), "2"), ("b1", Some("zone-b"), "4")],
                3,
                Some(ZONE),
                &three,
                &[],
            ),
            "a",
            Outcome::Scheduled,
            "b1",
            Some("zone-b"),
            1,
        ),
        (
            "fits no single zone: a pod that fit gets the group's words",
            no_single_zone(),
            "a",
            Outcome::Unschedulable,
            "pod group is unschedulable, pod group is unschedulable, 0/2 placements are available, \
             first placement status: minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, \
             pod group preemption: No preemption victims found for incoming preemptor",
            None,
            0,
        ),
        (
            "fits no single zone: the pod that did not fit in the first zone, its nodes only",
            no_single_zone(),
            "c",
            Outcome::Unschedulable,
            "0/1 nodes are available: 1 Insufficient cpu.",
            None,
            0,
        ),
        (
            "no node carries the key",
            cluster(&[("n1", None, "4")], 3, Some(ZONE), &three, &[]),
            "a",
            Outcome::Unschedulable,
            NO_FEASIBLE_PLACEMENTS,
            None,
            0,
        ),
        (
            "no constraint: one placement, the whole cluster",
            cluster(&[("n1", None, "2")], 3, None, &three, &[]),
            "a",
            Outcome::Unschedulable,
            "pod group is unschedulable, pod group is unschedulable, 0/1 placements are available, \
             first placement status: minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, \
             pod group preemption: No preemption victims found for incoming preemptor",
            None,
            0,
        ),
        (
            "both zones fit: NodeResourcesFit's MostAllocated prefers the fuller one",
            cluster(
                &[
                    ("a1", Some("zone-a"), "4"),
                    ("a2", Some("zone-a"), "4"),
                    ("b1", Some("zone-b"), "4"),
                ],
                3,
                Some(ZONE),
                &three,
                &[],
            ),
            "a",
            Outcome::Scheduled,
            "b1",
            Some("zone-b"),
            1,
        ),
        (
            "both zones alike: a tie kube-scheduler breaks at random",
            cluster(
                &[("a1", Some("zone-a"), "4"), ("b1", Some("zone-b"), "4")],
                3,
                Some(ZONE),
                &three,
                &[],
            ),
            "a",
            Outcome::Scheduled,
            "a1",
            Some("zone-a"),
            2,
        ),
        (
            "a member already runs in zone-a: only zone-a is a placement",
            cluster(
                &[("a1", Some("zone-a"), "4"), ("b1", Some("zone-b"), "2")],
                3,
                Some(ZONE),
                &["b", "c"],
                &[("a", "a1")],
            ),
            "b",
            Outcome::Scheduled,
            "a1",
            Some("zone-a"),
            1,
        ),
        (
            "members run in two zones: the generator's error",
            cluster(
                &[("a1", Some("zone-a"), "4"), ("b1", Some("zone-b"), "4")],
                3,
                Some(ZONE),
                &["c"],
                &[("a", "a1"), ("b", "b1")],
            ),
            "c",
            Outcome::Error,
            "cannot determine domain for already scheduled pods: more than 1 domain found for pod \
             group: zone-a, zone-b",
            None,
            0,
        ),
    ];
    for (case, objects, asked, outcome, expected, chosen, tied) in cases {
        let e = explain(true, &objects, asked);
        assert_eq!(e.outcome, outcome, "{case}: {}", e.message);
        if outcome == Outcome::Scheduled {
            assert_eq!(e.selected, [expected], "{case}");
        } else {
            assert_eq!(e.message, expected, "{case}");
            assert!(e.selected.is_empty(), "{case}: nothing selected");
        }
        let fwk = framework(true, &objects);
        let cycle = pod_group_cycle(&fwk, "default", "pg", ScheduleOptions::default()).expect("group cycle");
        let placements = cycle.placements.as_ref().expect("placements tried");
        let chosen_name = placements
            .chosen
            .map(|i| placements.tries[i].placement.name.as_str());
        assert_eq!(chosen_name, chosen, "{case}: placement chosen");
        assert_eq!(placements.tied.len(), tied, "{case}: tied placements");
        if outcome == Outcome::Scheduled {
            let domain_nodes = &placements.tries[placements.chosen.expect("chosen")]
                .placement
                .nodes;
            assert!(
                cycle
                    .members
                    .iter()
                    .all(|m| m.placed_on.as_ref().is_none_or(|n| domain_nodes.contains(n))),
                "{case}: every pod in the chosen domain"
            );
        }
    }
}

/// With the gate off the same group is placed across zones, as before.
#[test]
fn without_the_gate_the_group_may_split_across_zones() {
    let objects = cluster(
        &[("a1", Some("zone-a"), "2"), ("b1", Some("zone-b"), "2")],
        3,
        Some(ZONE),
        &["a", "b", "c"],
        &[],
    );
    let fwk = framework(false, &objects);
    let cycle = pod_group_cycle(&fwk, "default", "pg", ScheduleOptions::default()).expect("group cycle");
    assert_eq!(cycle.outcome, Outcome::Scheduled);
    assert!(cycle.placements.is_none());
    let nodes: std::collections::BTreeSet<&str> = cycle
        .members
        .iter()
        .filter_map(|m| m.placed_on.as_deref())
        .collect();
    assert_eq!(nodes.len(), 2, "split over both zones");
}

/// PodGroupPodsCount normalizes against the best placement; NodeResourcesFit scores the
/// placement's summed capacity with the group's pods on it.
#[test]
fn placement_scores_follow_upstream_arithmetic() {
    let objects = cluster(
        &[
            ("a1", Some("zone-a"), "4"),
            ("a2", Some("zone-a"), "4"),
            ("b1", Some("zone-b"), "4"),
        ],
        3,
        Some(ZONE),
        &["a", "b", "c"],
        &[],
    );
    let fwk = framework(true, &objects);
    let cycle = pod_group_cycle(&fwk, "default", "pg", ScheduleOptions::default()).expect("group cycle");
    let placements = cycle.placements.expect("placements");
    let scores: Vec<(&str, Option<&PlacementScore>)> = placements
        .tries
        .iter()
        .map(|t| (t.placement.name.as_str(), t.score.as_ref()))
        .collect();
    // cpu: 3000m of 8000m → 37, of 4000m → 75; memory: 3 × 200Mi of 16Gi → 3, of 8Gi → 7.
    assert_eq!(
        scores,
        [
            (
                "zone-a",
                Some(&PlacementScore {
                    pod_group_pods_count: 100,
                    node_resources_fit: Some(20),
                    total: 120
                })
            ),
            (
                "zone-b",
                Some(&PlacementScore {
                    pod_group_pods_count: 100,
                    node_resources_fit: Some(41),
                    total: 141
                })
            ),
        ]
    );
}
