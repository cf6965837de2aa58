//! The root-cause rule on in-memory clusters: each case is a pod kube-scheduler counts under one
//! reason (its first failing filter) whose root cause, by what must change, is another (or the same).

use std::sync::Arc;

use super::*;
use crate::engine::{Engine, ScheduleOptions, schedule_cycle};
use crate::explain::Outcome;
use crate::snapshot::{ClusterObjects, Snapshot};
use crate::testing::{node, pod, pvc, storage_class};

/// A WaitForFirstConsumer class no PV has and nothing provisions (local volumes).
const LOCAL: &str = "local-storage";

/// Evaluates `pending` (the pod to explain) on `nodes`: kube-scheduler's message and the root cause.
fn evaluate(
    nodes: Vec<k8s_openapi::api::core::v1::Node>,
    pending: k8s_openapi::api::core::v1::Pod,
    claims: Vec<k8s_openapi::api::core::v1::PersistentVolumeClaim>,
) -> (String, RootCause) {
    let snapshot = Arc::new(Snapshot::new(ClusterObjects {
        nodes,
        pods: vec![pending],
        persistent_volume_claims: claims,
        storage_classes: vec![storage_class(
            LOCAL,
            "kubernetes.io/no-provisioner",
            "WaitForFirstConsumer",
        )],
        ..Default::default()
    }));
    let engine = Engine::default();
    let fwk = engine
        .framework(engine.profile("").unwrap(), snapshot.clone())
        .unwrap();
    let p = snapshot.pending_pods[0].clone();
    let cycle = schedule_cycle(&fwk, &p, ScheduleOptions::default());
    let e = &cycle.explanation;
    assert_eq!(e.outcome, Outcome::Unschedulable, "{}", e.message);
    let rejected = rejected_nodes(e, &snapshot);
    let rejections = if e.pre_filter_message.is_some() {
        Vec::new()
    } else {
        diagnostic_rejections(&fwk, &cycle.state, &p, &rejected)
    };
    let cause = root_cause(e.pre_filter_message.as_deref(), &rejections, e.nodes_total).unwrap();
    (e.message.clone(), cause)
}

#[test]
fn the_root_cause_is_what_must_change_not_the_first_failing_filter() {
    let small = |n: &str| node(n).cpu("2").obj();
    let control_plane = |n: &str| {
        node(n)
            .cpu("8")
            .taint("node-role.kubernetes.io/control-plane", "", "NoSchedule")
            .obj()
    };
    // A control-plane node of the pool the pod selects, short of cpu.
    let control_plane_short = |n: &str| {
        node(n)
            .cpu("2")
            .label("pool", "x")
            .taint("node-role.kubernetes.io/control-plane", "", "NoSchedule")
            .obj()
    };
    let stateful = || pod("db-0").cpu("3").pvc("data-db-0").obj();
    let local_claim = || pvc("data-db-0").storage_class(LOCAL).obj();
    struct Case {
        name: &'static str,
        nodes: Vec<k8s_openapi::api::core::v1::Node>,
        pod: k8s_openapi::api::core::v1::Pod,
        claims: Vec<k8s_openapi::api::core::v1::PersistentVolumeClaim>,
        /// What kube-scheduler's message counts.
        counts: &'static str,
        plugin: Option<&'static str>,
        reason: &'static str,
        basis: CauseBasis,
    }
    let cases = [
        Case {
            // The StatefulSet: counted as Insufficient cpu (NodeResourcesFit runs first), but
            // more cpu opens no node: no PersistentVolume of the class exists anywhere.
            name: "no PV anywhere, nodes also short of cpu",
            nodes: vec![small("n1"), small("n2"), small("n3")],
            pod: stateful(),
            claims: vec![local_claim()],
            counts: "0/3 nodes are available: 3 Insufficient cpu.",
            plugin: Some(names::VOLUME_BINDING),
            reason: "node(s) didn't find available persistent volumes to bind",
            basis: CauseBasis::EveryNode,
        },
        Case {
            name: "the claim itself is missing (PreFilter)",
            nodes: vec![small("n1"), small("n2")],
            pod: stateful(),
            claims: vec![],
            counts: "0/2 nodes are available: persistentvolumeclaim \"data-db-0\" not found.",
            plugin: None,
            reason: "persistentvolumeclaim \"data-db-0\" not found",
            basis: CauseBasis::PreFilter,
        },
        Case {
            // cpu alone keeps n1; the control plane's taint alone keeps n2 and n3: cpu is what the
            // pod can change, the control plane's taint is the cluster's background, however many
            // nodes it keeps (no pod should tolerate it).
            name: "the only blocker on some node, Kubernetes' own taints last",
            nodes: vec![small("n1"), control_plane("n2"), control_plane("n3")],
            pod: pod("web").cpu("3").obj(),
            claims: vec![],
            counts: "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint(s).",
            plugin: Some(names::NODE_RESOURCES_FIT),
            reason: "Insufficient cpu",
            basis: CauseBasis::OnlyBlocker,
        },
        Case {
            // A pod meant for a dedicated pool that does not tolerate the pool's taint: the taint
            // alone keeps the pool's 2 nodes, the selector alone the other one. Tolerating the
            // pool's taint (someone's, not Kubernetes') opens the most nodes.
            name: "the only blocker on the most nodes, a pool's own taint",
            nodes: vec![
                small("n1"),
                node("n2")
                    .cpu("8")
                    .label("pool", "gpu")
                    .taint("dedicated", "gpu", "NoSchedule")
                    .obj(),
                node("n3")
                    .cpu("8")
                    .label("pool", "gpu")
                    .taint("dedicated", "gpu", "NoSchedule")
                    .obj(),
            ],
            pod: pod("train").cpu("1").node_selector("pool", "gpu").obj(),
            claims: vec![],
            counts: "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 node(s) \
                     had untolerated taint(s).",
            plugin: Some(names::TAINT_TOLERATION),
            reason: "node(s) had untolerated taint(s)",
            basis: CauseBasis::OnlyBlocker,
        },
        Case {
            // Every node has two blockers and none is common to all: the one rejecting the most nodes
            // (cpu and the control plane's taint tie at three, the taint is background; the selector
            // rejects two). kube-scheduler counts the taint, the first filter, on three.
            name: "several blockers everywhere",
            nodes: vec![
                control_plane_short("n1"),
                control_plane("n2"),
                node("n3").cpu("2").obj(),
                control_plane_short("n4"),
            ],
            pod: pod("web").cpu("3").node_selector("pool", "x").obj(),
            claims: vec![],
            counts: "0/4 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 3 node(s) \
                     had untolerated taint(s).",
            plugin: Some(names::NODE_RESOURCES_FIT),
            reason: "Insufficient cpu",
            basis: CauseBasis::MostNodes,
        },
    ];
    for c in cases {
        let (message, cause) = evaluate(c.nodes, c.pod, c.claims);
        assert!(message.starts_with(c.counts), "{}: {message}", c.name);
        assert_eq!(cause.plugin.as_deref(), c.plugin, "{}: {cause:?}", c.name);
        assert_eq!(cause.reason, c.reason, "{}", c.name);
        assert_eq!(cause.basis, c.basis, "{}", c.name);
    }
}

#[test]
fn a_node_whose_rejections_were_not_all_seen_does_not_make_every_node() {
    let rejection = |plugin| Rejection {
        plugin,
        status: Status::unresolvable("x"),
        background: false,
    };
    let seen = [NodeRejections {
        node: "n1".into(),
        rejections: vec![rejection(names::VOLUME_BINDING), rejection(names::NODE_AFFINITY)],
    }];
    // Two nodes exist, one was diagnosed: VolumeBinding is not known to reject the other.
    let cause = root_cause(None, &seen, 2).unwrap();
    assert_eq!(cause.basis, CauseBasis::MostNodes);
    assert_eq!(root_cause(None, &seen, 1).unwrap().basis, CauseBasis::EveryNode);
    assert_eq!(root_cause(None, &[], 0), None);
}
