//! Simulation tests on in-memory snapshots: incremental state against a rebuilt snapshot, queue
//! order through whole runs, pods of one batch affecting each other, preemption, sampling and ties.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Affinity, Pod, PodAffinityTerm, PodAntiAffinity};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};

use super::*;
use crate::engine::Engine;
use crate::snapshot::{ClusterObjects, NodeInfo, PodInfo, Snapshot};
use crate::testing::{node, pod, snapshot};

fn created(secs: i64) -> impl FnOnce(&mut Pod) {
    move |p: &mut Pod| {
        p.metadata.creation_timestamp = Some(Time(
            k8s_openapi::jiff::Timestamp::from_second(secs).expect("valid time"),
        ));
    }
}

fn run(snapshot: Snapshot) -> SimulationReport {
    run_with(snapshot, SimulationOptions::default())
}

fn run_with(snapshot: Snapshot, options: SimulationOptions) -> SimulationReport {
    let engine = Engine::default();
    let mut simulation = Simulation::new(&engine, snapshot, options);
    simulation.run(&mut |_| {}).expect("runs")
}

fn placements(report: &SimulationReport) -> Vec<(String, Option<String>)> {
    report
        .pods
        .iter()
        .map(|p| (p.pod.clone(), p.node.clone()))
        .collect()
}

/// What a node's scheduling state is, order aside (pods are compared as a set).
fn node_facts(n: &NodeInfo) -> String {
    let mut pods: Vec<String> = n.pods.iter().map(|p| p.key()).collect();
    pods.sort();
    let mut affinity: Vec<String> = n.pods_with_affinity.iter().map(|p| p.key()).collect();
    affinity.sort();
    let mut anti: Vec<String> = n
        .pods_with_required_anti_affinity
        .iter()
        .map(|p| p.key())
        .collect();
    anti.sort();
    let ports: BTreeMap<_, _> = n.pvc_ref_counts.iter().collect();
    format!(
        "{} pods={pods:?} affinity={affinity:?} anti={anti:?} requested={:?} non_zero={:?} ports={} pvcs={ports:?}",
        n.name(),
        n.requested,
        n.non_zero_requested,
        n.used_ports.len()
    )
}

#[cfg(feature = "testing")]
#[test]
fn assuming_pods_one_by_one_gives_the_snapshot_a_rebuild_gives() {
    use crate::testing::generate::{GenerateParams, generate};
    for seed in 1..=4 {
        let mut params = GenerateParams::new(40, 1_200, 3, seed);
        params.pending_percent = 20;
        let objects = generate(&params);
        let mut incremental = Snapshot::new(objects.clone());
        // Build the affinity index first so that it is updated incrementally too.
        let _ = incremental.affinity_index();
        let nodes: Vec<String> = incremental.nodes().iter().map(|n| n.name().to_string()).collect();
        let pending: Vec<Arc<PodInfo>> = incremental.pending_pods.clone();
        let mut bound = objects.clone();
        for (i, info) in pending.iter().enumerate() {
            let node = &nodes[(i * 7 + seed as usize) % nodes.len()];
            let mut object = (*info.pod).clone();
            object.spec.get_or_insert_with(Default::default).node_name = Some(node.clone());
            incremental
                .assume_pod(Arc::new(PodInfo::new(object.clone())))
                .expect("a node of the snapshot");
            let at = bound
                .pods
                .iter()
                .position(|p| {
                    p.metadata.name == object.metadata.name
                        && p.metadata.namespace == object.metadata.namespace
                })
                .expect("the pending pod");
            bound.pods[at] = object;
        }
        // And delete a few placed pods, as preemption does.
        for victim in bound
            .pods
            .iter()
            .step_by(97)
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
        {
            let (ns, name) = (
                victim.metadata.namespace.clone().unwrap_or_default(),
                victim.metadata.name.clone().unwrap_or_default(),
            );
            incremental.remove_pod(&ns, &name).expect("present");
            bound.pods.retain(|p| {
                !(p.metadata.name.as_deref() == Some(&name) && p.metadata.namespace.as_deref() == Some(&ns))
            });
        }
        let rebuilt = Snapshot::new(bound);
        assert!(
            incremental.pending_pods.is_empty(),
            "seed {seed}: pods left pending"
        );
        assert!(incremental.nominated_pods.is_empty(), "seed {seed}");
        assert_eq!(
            incremental.pods_by_key.len(),
            rebuilt.pods_by_key.len(),
            "seed {seed}"
        );
        for (a, b) in incremental.nodes().iter().zip(rebuilt.nodes()) {
            assert_eq!(node_facts(a), node_facts(b), "seed {seed}");
        }
        let names = |nodes: &[Arc<NodeInfo>]| {
            let mut v: Vec<String> = nodes.iter().map(|n| node_facts(n)).collect();
            v.sort();
            v
        };
        assert_eq!(
            names(incremental.have_pods_with_affinity()),
            names(rebuilt.have_pods_with_affinity()),
            "seed {seed}"
        );
        assert_eq!(
            names(incremental.have_pods_with_required_anti_affinity()),
            names(rebuilt.have_pods_with_required_anti_affinity()),
            "seed {seed}"
        );
        // The incrementally kept index answers as a fresh one does, for every namespace.
        for ns in rebuilt.pods_by_key.values().map(|p| p.namespace().to_string()) {
            let keys = |s: &Snapshot| {
                let mut v: Vec<(usize, String)> = s
                    .affinity_index()
                    .pods_in(&ns)
                    .iter()
                    .map(|(i, p)| (*i, p.key()))
                    .collect();
                v.sort();
                let mut terms: Vec<(String, usize)> = s
                    .affinity_index()
                    .anti_affinity_terms_for(&ns)
                    .map(|(_, p, i)| (p.key(), *i))
                    .collect();
                terms.sort();
                (v, terms)
            };
            assert_eq!(keys(&incremental), keys(&rebuilt), "seed {seed} namespace {ns}");
        }
    }
}

#[test]
fn pods_fill_the_nodes_in_queue_order_and_the_rest_keep_their_message() {
    let report = run(snapshot(
        vec![
            node("small").cpu("2").memory("8Gi").obj(),
            node("big").cpu("4").memory("8Gi").obj(),
        ],
        vec![
            pod("a").cpu("2").with(created(1)).obj(),
            pod("b").cpu("2").with(created(2)).obj(),
            pod("c").cpu("2").with(created(3)).obj(),
            pod("urgent").cpu("2").priority(100).with(created(9)).obj(),
        ],
    ));
    let order: Vec<&str> = report.pods.iter().map(|p| p.pod.as_str()).collect();
    assert_eq!(order, ["default/urgent", "default/a", "default/b", "default/c"]);
    let scheduled = report
        .pods
        .iter()
        .filter(|p| p.outcome == PodOutcome::Scheduled)
        .count();
    assert_eq!(scheduled, 3);
    let left = &report.pods[3];
    assert_eq!(left.outcome, PodOutcome::Unschedulable);
    assert_eq!(
        left.message.as_deref(),
        Some(
            "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption \
             victims found for incoming pod."
        )
    );
}

fn anti_affinity_to(app: &str) -> Affinity {
    Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                label_selector: Some(LabelSelector {
                    match_labels: Some([("app".to_string(), app.to_string())].into()),
                    ..Default::default()
                }),
                topology_key: "kubernetes.io/hostname".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn anti_affinity_between_pods_of_the_same_batch_counts_pods_placed_earlier() {
    let nodes = (1..=3)
        .map(|i| {
            node(&format!("n{i}"))
                .cpu("8")
                .memory("16Gi")
                .label("kubernetes.io/hostname", &format!("n{i}"))
                .obj()
        })
        .collect();
    let pods = (1..=4)
        .map(|i| {
            pod(&format!("web-{i}"))
                .cpu("100m")
                .label("app", "web")
                .affinity(anti_affinity_to("web"))
                .with(created(i))
                .obj()
        })
        .collect();
    let report = run(snapshot(nodes, pods));
    let mut used: Vec<String> = report.pods.iter().filter_map(|p| p.node.clone()).collect();
    used.sort();
    assert_eq!(used, ["n1", "n2", "n3"], "one replica per node");
    let last = &report.pods[3];
    assert_eq!(last.outcome, PodOutcome::Unschedulable);
    assert!(
        last.message.as_deref().is_some_and(
            |m| m.starts_with("0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules.")
        ),
        "{:?}",
        last.message
    );
}

#[test]
fn a_high_priority_pod_preempts_and_is_then_placed_on_its_nominated_node() {
    let report = run(snapshot(
        vec![
            node("n1").cpu("2").memory("4Gi").obj(),
            node("n2").cpu("2").memory("4Gi").obj(),
        ],
        vec![
            pod("low").cpu("2").priority(1).node("n1").obj(),
            pod("mid").cpu("2").priority(50).node("n2").obj(),
            pod("high").cpu("2").priority(100).with(created(5)).obj(),
        ],
    ));
    assert_eq!(
        report.victims,
        vec![Victim {
            pod: "default/low".into(),
            node: "n1".into(),
            priority: 1,
            preemptor: "default/high".into()
        }]
    );
    let high = report
        .pods
        .iter()
        .find(|p| p.pod == "default/high")
        .expect("queued");
    assert_eq!(
        (high.outcome, high.node.as_deref()),
        (PodOutcome::Scheduled, Some("n1"))
    );
    assert_eq!(high.attempts, 2, "preempts, then is placed");
}

#[test]
fn sampling_rotates_the_start_index_and_the_full_scan_scores_every_node() {
    // 300 identical empty nodes: kube-scheduler looks for numFeasibleNodesToFind (144 here) feasible
    // nodes from its start index, so each pod's choice lies in the window after the previous pod's.
    let nodes: Vec<_> = (0..300)
        .map(|i| node(&format!("n{i:03}")).cpu("4").memory("8Gi").obj())
        .collect();
    let pods: Vec<_> = (0..3)
        .map(|i| pod(&format!("p{i}")).cpu("1").with(created(i)).obj())
        .collect();
    let to_find = crate::schedule::num_feasible_nodes_to_find(0, 300);
    assert_eq!(to_find, 144);
    let sampled = run(snapshot(nodes.clone(), pods.clone()));
    let index = |p: &PodResult| -> usize {
        p.node
            .as_deref()
            .and_then(|n| n[1..].parse().ok())
            .expect("placed")
    };
    for (i, p) in sampled.pods.iter().enumerate() {
        let offset = (index(p) + 300 - (i * to_find) % 300) % 300;
        assert!(offset < to_find, "pod {i} on {:?}, outside its window", p.node);
    }
    assert_eq!(sampled.ties, 3, "identical nodes tie");
    let full = run_with(
        snapshot(nodes, pods),
        SimulationOptions {
            all_nodes: true,
            ..SimulationOptions::default()
        },
    );
    assert!(full.pods.iter().all(|p| p.tied_nodes >= 298), "{:?}", full.pods);
}

#[test]
fn the_seed_decides_ties_reproducibly() {
    let build = || {
        snapshot(
            (0..8)
                .map(|i| node(&format!("n{i}")).cpu("4").memory("8Gi").obj())
                .collect(),
            (0..6)
                .map(|i| pod(&format!("p{i}")).cpu("1").with(created(i)).obj())
                .collect(),
        )
    };
    let with_seed = |seed| {
        run_with(
            build(),
            SimulationOptions {
                seed,
                ..SimulationOptions::default()
            },
        )
    };
    assert_eq!(placements(&with_seed(7)), placements(&with_seed(7)));
    let differ = (0..20u64).any(|seed| placements(&with_seed(seed)) != placements(&with_seed(seed + 1)));
    assert!(differ, "the seed never changed a tie-break");
}

#[test]
fn gated_pods_and_pods_of_another_scheduler_are_not_scheduled() {
    let report = run(snapshot(
        vec![node("n1").cpu("4").memory("8Gi").obj()],
        vec![
            pod("gated")
                .with(|p| {
                    p.spec.get_or_insert_with(Default::default).scheduling_gates =
                        Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
                            name: "wait".into(),
                        }]);
                })
                .obj(),
            pod("other").scheduler_name("my-scheduler").obj(),
        ],
    ));
    let outcome = |name: &str| report.pods.iter().find(|p| p.pod == name).map(|p| p.outcome);
    assert_eq!(outcome("default/gated"), Some(PodOutcome::Gated));
    assert_eq!(outcome("default/other"), Some(PodOutcome::Ignored));
}

#[test]
fn an_empty_queue_runs_no_cycle() {
    let report = run(snapshot(vec![node("n1").obj()], vec![]));
    assert_eq!((report.cycles, report.pods.len()), (0, 0));
    let _ = ClusterObjects::default();
}
