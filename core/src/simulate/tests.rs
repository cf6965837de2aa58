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

#[test]
fn devices_allocated_to_a_pod_of_the_batch_are_taken_for_the_next() {
    use serde_json::json;
    fn from<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).expect("valid object")
    }
    let claim = |name: &str| -> k8s_openapi::api::resource::v1::ResourceClaim {
        from(json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
        }))
    };
    let pod_using = |name: &str, claim: &str, created_at: i64| {
        let claims = vec![k8s_openapi::api::core::v1::PodResourceClaim {
            name: "gpu".into(),
            resource_claim_name: Some(claim.into()),
            ..Default::default()
        }];
        pod(name)
            .with(created(created_at))
            .with(move |p| {
                p.metadata.uid = Some(format!("uid-{}", p.metadata.name.clone().unwrap_or_default()));
                p.spec.get_or_insert_with(Default::default).resource_claims = Some(claims);
            })
            .obj()
    };
    let objects = ClusterObjects {
        nodes: vec![node("n1").cpu("4").memory("8Gi").obj()],
        pods: vec![
            pod_using("first", "claim-a", 1),
            pod_using("second", "claim-b", 2),
        ],
        device_classes: vec![from(json!({"metadata": {"name": "gpu"}, "spec": {}}))],
        resource_slices: vec![from(json!({
            "metadata": {"name": "slice-n1"},
            "spec": {"driver": "gpu.example.com", "nodeName": "n1",
                     "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "dev-0"}]},
        }))],
        resource_claims: vec![claim("claim-a"), claim("claim-b")],
        ..Default::default()
    };
    let engine = Engine::default();
    let mut simulation = Simulation::new(&engine, Snapshot::new(objects), SimulationOptions::default());
    let report = simulation.run(&mut |_| {}).expect("runs");
    let outcome = |name: &str| {
        report
            .pods
            .iter()
            .find(|p| p.pod == name)
            .expect("queued")
            .clone()
    };
    assert_eq!(outcome("default/first").node.as_deref(), Some("n1"));
    let second = outcome("default/second");
    assert_eq!(second.outcome, PodOutcome::Unschedulable);
    assert!(
        second
            .message
            .as_deref()
            .is_some_and(|m| m.contains("cannot allocate all claims")),
        "{:?}",
        second.message
    );
    let claim_a = &simulation.snapshot().resource_claims["default/claim-a"];
    let status = claim_a.status.as_ref().expect("allocated");
    assert!(status.allocation.is_some());
    assert_eq!(status.reserved_for.as_ref().map(Vec::len), Some(1));
}

// ---------------------------------------------------------------------------------------------
// When parked pods get another attempt: queueing hints, volume events, asynchronous preemption

use super::hints::{ClusterEvent, HintInputs, QueueingHint, plugin_hint};
use crate::framework::runtime::Handle;
use crate::plugins::{names, pod_topology_spread};

const ZONE: &str = "topology.kubernetes.io/zone";
const HOSTNAME: &str = "kubernetes.io/hostname";

fn affinity_to(app: &str) -> Affinity {
    Affinity {
        pod_affinity: Some(k8s_openapi::api::core::v1::PodAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                label_selector: Some(LabelSelector {
                    match_labels: Some([("app".to_string(), app.to_string())].into()),
                    ..Default::default()
                }),
                topology_key: HOSTNAME.into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn zone_spread_of(app: &str, when: &str) -> impl FnOnce(&mut Pod) {
    let constraint = k8s_openapi::api::core::v1::TopologySpreadConstraint {
        max_skew: 1,
        topology_key: ZONE.into(),
        when_unsatisfiable: when.into(),
        label_selector: Some(LabelSelector {
            match_labels: Some([("app".to_string(), app.to_string())].into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    move |p: &mut Pod| {
        p.spec
            .get_or_insert_with(Default::default)
            .topology_spread_constraints = Some(vec![constraint]);
    }
}

fn result_of<'a>(report: &'a SimulationReport, name: &str) -> &'a PodResult {
    report
        .pods
        .iter()
        .find(|p| p.pod == format!("default/{name}"))
        .expect("queued")
}

#[test]
fn queueing_hints_answer_as_upstream_plugins_do() {
    let info = |p: crate::testing::PodBuilder| Arc::new(p.info());
    let follower = info(pod("follower").affinity(affinity_to("cache")));
    let avoider = info(pod("avoider").label("app", "db").affinity(anti_affinity_to("db")));
    let spreader = info(
        pod("spreader")
            .label("app", "web")
            .with(zone_spread_of("web", "DoNotSchedule")),
    );
    let soft = info(
        pod("soft")
            .label("app", "web")
            .with(zone_spread_of("web", "ScheduleAnyway")),
    );
    let porter = info(pod("porter").host_port(8080, "TCP", ""));
    let claimer = info(pod("claimer").pvc("data"));
    let plain = info(pod("plain"));
    let placed = |p: crate::testing::PodBuilder| Arc::new(p.node("n1").info());
    let add = |p: crate::testing::PodBuilder| ClusterEvent::AssignedPodAdd(placed(p));
    let delete = |p: crate::testing::PodBuilder| ClusterEvent::AssignedPodDelete(placed(p));
    let pv_update = ClusterEvent::PersistentVolumeUpdate { name: "pv-1".into() };
    let claim_update = |ns: &str, name: &str| ClusterEvent::PersistentVolumeClaimUpdate {
        namespace: ns.into(),
        name: name.into(),
    };
    use QueueingHint::{Queue, QueueSkip};
    /// (case, plugin, parked pod, event, the plugin's answer).
    type Case<'a> = (
        &'a str,
        &'a str,
        &'a Arc<PodInfo>,
        ClusterEvent,
        Option<QueueingHint>,
    );
    let cases: Vec<Case<'_>> = vec![
        (
            "affinity: the added pod matches",
            names::INTER_POD_AFFINITY,
            &follower,
            add(pod("cache").label("app", "cache")),
            Some(Queue),
        ),
        (
            "affinity: the added pod does not match",
            names::INTER_POD_AFFINITY,
            &follower,
            add(pod("other").label("app", "other")),
            Some(QueueSkip),
        ),
        (
            "affinity: a matching pod of another namespace",
            names::INTER_POD_AFFINITY,
            &follower,
            add(pod("cache").namespace("elsewhere").label("app", "cache")),
            Some(QueueSkip),
        ),
        (
            "affinity: the added pod is not placed",
            names::INTER_POD_AFFINITY,
            &follower,
            ClusterEvent::AssignedPodAdd(info(pod("cache").label("app", "cache"))),
            Some(QueueSkip),
        ),
        (
            "anti-affinity only: an addition never helps",
            names::INTER_POD_AFFINITY,
            &avoider,
            add(pod("db").label("app", "db")),
            Some(QueueSkip),
        ),
        (
            "anti-affinity: the deleted pod matched it",
            names::INTER_POD_AFFINITY,
            &avoider,
            delete(pod("db").label("app", "db")),
            Some(Queue),
        ),
        (
            "anti-affinity: the deleted pod's own anti-affinity matched the pod",
            names::INTER_POD_AFFINITY,
            &avoider,
            delete(pod("hater").affinity(anti_affinity_to("db")).label("x", "y")),
            Some(Queue),
        ),
        (
            "anti-affinity: the deleted pod is unrelated",
            names::INTER_POD_AFFINITY,
            &avoider,
            delete(pod("web").label("app", "web")),
            Some(QueueSkip),
        ),
        (
            "spread: the added pod matches the selector",
            names::POD_TOPOLOGY_SPREAD,
            &spreader,
            add(pod("web").label("app", "web")),
            Some(Queue),
        ),
        (
            "spread: the added pod does not match",
            names::POD_TOPOLOGY_SPREAD,
            &spreader,
            add(pod("db").label("app", "db")),
            Some(QueueSkip),
        ),
        (
            "spread: a matching pod of another namespace",
            names::POD_TOPOLOGY_SPREAD,
            &spreader,
            add(pod("web").namespace("elsewhere").label("app", "web")),
            Some(QueueSkip),
        ),
        (
            "spread: the deleted pod matches",
            names::POD_TOPOLOGY_SPREAD,
            &spreader,
            delete(pod("web").label("app", "web")),
            Some(Queue),
        ),
        (
            "spread: soft constraints are no hard constraints",
            names::POD_TOPOLOGY_SPREAD,
            &soft,
            add(pod("web").label("app", "web")),
            Some(QueueSkip),
        ),
        (
            "fit: an addition is not registered",
            names::NODE_RESOURCES_FIT,
            &plain,
            add(pod("any")),
            None,
        ),
        (
            "fit: any placed pod deleted",
            names::NODE_RESOURCES_FIT,
            &plain,
            delete(pod("any")),
            Some(Queue),
        ),
        (
            "fit: a nominated pod deleted",
            names::NODE_RESOURCES_FIT,
            &plain,
            ClusterEvent::AssignedPodDelete(info(pod("any").nominated("n1"))),
            Some(Queue),
        ),
        (
            "ports: the deleted pod held the port",
            names::NODE_PORTS,
            &porter,
            delete(pod("other").host_port(8080, "TCP", "")),
            Some(Queue),
        ),
        (
            "ports: the deleted pod held another port",
            names::NODE_PORTS,
            &porter,
            delete(pod("other").host_port(9090, "TCP", "")),
            Some(QueueSkip),
        ),
        (
            "preemption leaves the decision to the others",
            names::DEFAULT_PREEMPTION,
            &plain,
            delete(pod("victim")),
            Some(QueueSkip),
        ),
        (
            "volume binding: a volume updated",
            names::VOLUME_BINDING,
            &claimer,
            pv_update.clone(),
            Some(Queue),
        ),
        (
            "volume zone: a binding leaves the volume's topology alone",
            names::VOLUME_ZONE,
            &claimer,
            pv_update.clone(),
            Some(QueueSkip),
        ),
        (
            "volume binding: its claim updated",
            names::VOLUME_BINDING,
            &claimer,
            claim_update("default", "data"),
            Some(Queue),
        ),
        (
            "volume binding: another claim updated",
            names::VOLUME_BINDING,
            &claimer,
            claim_update("default", "other"),
            Some(QueueSkip),
        ),
        (
            "volume binding: a claim of that name in another namespace",
            names::VOLUME_BINDING,
            &claimer,
            claim_update("elsewhere", "data"),
            Some(QueueSkip),
        ),
        (
            "volume limits: a deleted pod with a claim",
            names::NODE_VOLUME_LIMITS,
            &claimer,
            delete(pod("other").pvc("logs")),
            Some(Queue),
        ),
        (
            "volume limits: a deleted pod without volumes",
            names::NODE_VOLUME_LIMITS,
            &claimer,
            delete(pod("other")),
            Some(QueueSkip),
        ),
        (
            "volume restrictions: a deleted pod sharing the claim",
            names::VOLUME_RESTRICTIONS,
            &claimer,
            delete(pod("other").pvc("data")),
            Some(Queue),
        ),
        (
            "taints: no pod event registered",
            names::TAINT_TOLERATION,
            &plain,
            delete(pod("any")),
            None,
        ),
    ];
    let handle = Handle {
        snapshot: Arc::new(snapshot(vec![], vec![])),
    };
    for (name, plugin, target, event, want) in cases {
        let inputs = HintInputs {
            spread_constraints: Some(pod_topology_spread::hard_constraints_for_hints(
                None,
                &handle,
                &crate::framework::FeatureGates::v1_37(),
                &target.pod,
            )),
        };
        assert_eq!(plugin_hint(plugin, target, &inputs, &event), want, "{name}");
    }
}

/// Issue 27, 7a: a bound pod that matches neither `a-follower`'s affinity nor `b-spread`'s
/// selector leaves both parked with their first message, although it fills h4.
#[test]
fn a_bound_pod_wakes_only_the_pods_its_labels_matter_to() {
    let zone_node = |name: &str, cpu: &str, zone: &str| {
        node(name)
            .cpu(cpu)
            .memory("16Gi")
            .label(ZONE, zone)
            .label(HOSTNAME, name)
            .obj()
    };
    let report = run(snapshot(
        vec![
            zone_node("h2", "2", "a"),
            zone_node("h3", "3", "b"),
            zone_node("h4", "4", "a"),
        ],
        vec![
            pod("web-1").cpu("100m").label("app", "web").node("h2").obj(),
            pod("web-2").cpu("100m").label("app", "web").node("h2").obj(),
            pod("a-follower")
                .cpu("2500m")
                .priority(3)
                .affinity(affinity_to("cache"))
                .obj(),
            pod("b-spread")
                .cpu("3500m")
                .priority(2)
                .label("app", "web")
                .with(zone_spread_of("web", "DoNotSchedule"))
                .obj(),
            pod("c-filler").cpu("2000m").priority(1).obj(),
        ],
    ));
    assert_eq!(result_of(&report, "c-filler").node.as_deref(), Some("h4"));
    let follower = result_of(&report, "a-follower");
    assert_eq!(follower.attempts, 1, "{follower:?}");
    assert!(
        follower.message.as_deref().is_some_and(|m| m.starts_with(
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match pod affinity rules."
        )),
        "{follower:?}"
    );
    let spread = result_of(&report, "b-spread");
    assert_eq!(spread.attempts, 1, "{spread:?}");
    assert!(
        spread.message.as_deref().is_some_and(|m| m.starts_with(
            "0/3 nodes are available: 1 node(s) didn't match pod topology spread constraints, 2 Insufficient cpu."
        )),
        "{spread:?}"
    );
}

/// Issue 27, 7b: `p01-first`'s volume binding (the PV's claimRef) lands after `p02-second`'s
/// cycle and requeues it (VolumeBinding registers PV updates without a hint); its retry comes after
/// `p03-filler` filled r6.
#[test]
fn a_volume_binding_requeues_the_pods_volume_binding_rejected() {
    use serde_json::json;
    fn from<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).expect("valid object")
    }
    let claim = |name: &str| {
        from(json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                     "resources": {"requests": {"storage": "1Gi"}}},
        }))
    };
    let hostname_node =
        |name: &str, cpu: &str| node(name).cpu(cpu).memory("16Gi").label(HOSTNAME, name).obj();
    let objects = ClusterObjects {
        nodes: vec![hostname_node("l4", "4"), hostname_node("r6", "6")],
        pods: vec![
            pod("p01-first").cpu("1").priority(3).pvc("c1").obj(),
            pod("p02-second").cpu("1").priority(2).pvc("c2").obj(),
            pod("p03-filler").cpu("5500m").priority(1).obj(),
        ],
        storage_classes: vec![from(json!({
            "metadata": {"name": "local"},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        }))],
        persistent_volumes: vec![from(json!({
            "metadata": {"name": "only"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "local",
                "local": {"path": "/mnt/only"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": HOSTNAME, "operator": "In", "values": ["l4"]},
                ]}]}},
            },
            "status": {"phase": "Available"},
        }))],
        persistent_volume_claims: vec![claim("c1"), claim("c2")],
        ..Default::default()
    };
    let report = run(Snapshot::new(objects));
    assert_eq!(result_of(&report, "p01-first").node.as_deref(), Some("l4"));
    assert_eq!(result_of(&report, "p03-filler").node.as_deref(), Some("r6"));
    let second = result_of(&report, "p02-second");
    assert_eq!(second.attempts, 2, "{second:?}");
    assert!(
        second.message.as_deref().is_some_and(|m| m.starts_with(
            "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't find available persistent volumes to bind."
        )),
        "{second:?}"
    );
}

/// Issue 27, 7c: `p01-preemptor`'s victim is deleted after the next cycle: `p02-next` still sees it,
/// fails, and the deletion requeues it; its retry comes after `p03-port` took port 8080 on c1.
#[test]
fn victims_are_deleted_after_the_next_cycle_and_requeue_the_pod_tried_in_it() {
    let report = run(snapshot(
        vec![
            node("a2").cpu("2").memory("4Gi").obj(),
            node("b3").cpu("3").memory("6Gi").obj(),
            node("c1").cpu("1200m").memory("1Gi").obj(),
        ],
        vec![
            pod("v-low").cpu("2").priority(50).node("a2").obj(),
            pod("keep-high").cpu("3").priority(1000).node("b3").obj(),
            pod("p01-preemptor").cpu("1500m").priority(500).obj(),
            pod("p02-next")
                .cpu("1")
                .memory("2Gi")
                .host_port(8080, "TCP", "")
                .priority(100)
                .obj(),
            pod("p03-port")
                .cpu("600m")
                .memory("100Mi")
                .host_port(8080, "TCP", "")
                .priority(1)
                .obj(),
        ],
    ));
    assert_eq!(
        report.victims.iter().map(|v| v.pod.as_str()).collect::<Vec<_>>(),
        ["default/v-low"]
    );
    let preemptor = result_of(&report, "p01-preemptor");
    assert_eq!((preemptor.node.as_deref(), preemptor.attempts), (Some("a2"), 2));
    assert_eq!(result_of(&report, "p03-port").node.as_deref(), Some("c1"));
    let next = result_of(&report, "p02-next");
    assert_eq!(next.attempts, 2, "{next:?}");
    assert!(
        next.message.as_deref().is_some_and(|m| m.starts_with(
            "0/3 nodes are available: 1 node(s) didn't have free ports for the requested pod ports, 2 Insufficient cpu."
        )),
        "{next:?}"
    );
}

/// A gang is placed whole or not at all, as the pod group cycle decides: three pods of
/// `minCount: 3` asking 2 cpu each are all bound on two 4-cpu nodes and none on one.
#[test]
fn a_gang_is_bound_whole_or_not_at_all() {
    use crate::features::FeatureGates;
    use crate::testing::gang;
    let gates = FeatureGates::v1_37()
        .with_overrides("GenericWorkload=true")
        .expect("gate");
    let engine = Engine::for_features(None, gates).expect("engine");
    let cases = [
        ("two nodes hold the gang", 2, 3, PodOutcome::Scheduled),
        ("one node holds two of three", 1, 0, PodOutcome::Unschedulable),
    ];
    for (case, nodes, bound, outcome) in cases {
        let objects = ClusterObjects {
            nodes: (1..=nodes)
                .map(|i| node(&format!("n{i}")).cpu("4").memory("8Gi").obj())
                .collect(),
            pods: ["w1", "w2", "w3"]
                .iter()
                .map(|name| pod(name).pod_group("train").cpu("2").obj())
                .collect(),
            pod_groups: vec![gang("train", 3).obj()],
            ..Default::default()
        };
        let mut simulation = Simulation::new(&engine, engine.snapshot(objects), SimulationOptions::default());
        let report = simulation.run(&mut |_| {}).expect("runs");
        let placed = report.pods.iter().filter(|p| p.node.is_some()).count();
        assert_eq!(placed, bound, "{case}: {:?}", placements(&report));
        assert!(
            report.pods.iter().all(|p| p.outcome == outcome),
            "{case}: {:?}",
            report
                .pods
                .iter()
                .map(|p| (&p.pod, p.outcome, &p.message))
                .collect::<Vec<_>>()
        );
    }
}
