//! One scenario per blocker, on in-memory snapshots: the finding names the object at fault, no hint is
//! offered that leaves the pod unschedulable, and the first hint, applied to the objects (not the
//! snapshot the diagnosis changed), makes the pod schedulable.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
};

use super::{Change, ReasonCode, Report, diagnose_pod};
use crate::engine::schedule_cycle;
use crate::explain::{Explanation, Outcome};
use crate::plugins::inter_pod_affinity::test_util::{affinity, term};
use crate::plugins::pod_topology_spread::test_util::{spread, tsc};
use crate::testing::{node, pod};
use crate::{ClusterObjects, Engine};

const ZONE: &str = "topology.kubernetes.io/zone";

/// Evaluates `pending` (namespace default) in `objects` as explain does.
fn evaluate(objects: &ClusterObjects, pending: &Pod) -> (Explanation, Report) {
    let engine = Engine::default();
    let mut objects = objects.clone();
    objects.pods.push(pending.clone());
    let snapshot = Arc::new(engine.snapshot(objects));
    let info = engine.pod_info(pending.clone());
    let fwk = engine.framework(engine.profile("").unwrap(), snapshot).unwrap();
    let cycle = schedule_cycle(&fwk, &info, engine.schedule_options(true));
    let report = diagnose_pod(&engine, &fwk, &cycle.state, &info, &cycle.explanation);
    (cycle.explanation, report)
}

/// The outcome after `change` is applied to the objects and the pod.
fn outcome_after(objects: &ClusterObjects, pending: &Pod, change: &Change) -> Outcome {
    let mut all = objects.clone();
    all.pods.push(pending.clone());
    let key = format!("default/{}", pending.metadata.name.as_deref().unwrap());
    assert!(
        change.apply_to_objects(&key, &mut all),
        "{change:?} changed nothing"
    );
    let changed = all
        .pods
        .iter()
        .find(|p| p.metadata.name == pending.metadata.name)
        .unwrap()
        .clone();
    all.pods.retain(|p| p.metadata.name != pending.metadata.name);
    evaluate(&all, &changed).0.outcome
}

fn zones(names: &[(&str, &str)]) -> Vec<k8s_openapi::api::core::v1::Node> {
    names
        .iter()
        .map(|(n, z)| node(n).cpu("4").memory("8Gi").label(ZONE, z).obj())
        .collect()
}

fn required_node_affinity(key: &str, values: &[&str]) -> Affinity {
    Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement {
                        key: key.to_string(),
                        operator: "In".to_string(),
                        values: Some(values.iter().map(|v| v.to_string()).collect()),
                    }]),
                    ..Default::default()
                }],
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A scenario: the cluster, the pending pod, the code and words the first finding must carry, and the
/// kind of change the first hint must be.
struct Scenario {
    name: &'static str,
    objects: ClusterObjects,
    pending: Pod,
    reason: ReasonCode,
    names: &'static [&'static str],
    first_hint: fn(&Change) -> bool,
}

fn scenarios() -> Vec<Scenario> {
    let abc = zones(&[("n1", "zone-a"), ("n2", "zone-b"), ("n3", "zone-c")]);
    let db = |name: &str, n: &str| pod(name).label("app", "db").cpu("100m").node(n).obj();
    vec![
        Scenario {
            name: "node affinity to a zone no node has",
            objects: ClusterObjects {
                nodes: abc.clone(),
                ..Default::default()
            },
            pending: pod("p")
                .cpu("1")
                .affinity(required_node_affinity(ZONE, &["zone-d"]))
                .obj(),
            reason: ReasonCode::NodeAffinityNoNodeHasValue,
            names: &[
                "zone In [zone-d]",
                "no node meets it; nodes have zone-a, zone-b, zone-c",
            ],
            first_hint: |c| matches!(c, Change::RemoveNodeAffinityRequirement { key, .. } if key == ZONE),
        },
        Scenario {
            name: "nodeSelector value no node has",
            objects: ClusterObjects {
                nodes: abc.clone(),
                ..Default::default()
            },
            pending: pod("p").cpu("1").node_selector("disktype", "ssd").obj(),
            reason: ReasonCode::NodeSelectorNoNodeHasValue,
            names: &["nodeSelector disktype=ssd: no node has disktype=ssd; no node has the label disktype"],
            first_hint: |c| matches!(c, Change::RemoveNodeSelector { key } if key == "disktype"),
        },
        Scenario {
            name: "a user's taint, and the control plane's that is never tolerated",
            objects: ClusterObjects {
                nodes: vec![
                    node("control-plane")
                        .cpu("4")
                        .taint("node-role.kubernetes.io/control-plane", "", "NoSchedule")
                        .obj(),
                    node("gpu-1")
                        .cpu("4")
                        .taint("nvidia.com/gpu", "present", "NoSchedule")
                        .obj(),
                ],
                ..Default::default()
            },
            pending: pod("p").cpu("1").obj(),
            reason: ReasonCode::SystemTaintNotTolerated,
            names: &["untolerated taint node-role.kubernetes.io/control-plane:NoSchedule"],
            first_hint: |c| matches!(c, Change::AddToleration { taints } if taints.len() == 1 && taints[0].key == "nvidia.com/gpu"),
        },
        Scenario {
            name: "anti-affinity with running pods in every zone",
            objects: ClusterObjects {
                nodes: zones(&[("n1", "zone-a"), ("n2", "zone-b")]),
                pods: vec![db("db-0", "n1"), db("db-1", "n2")],
                ..Default::default()
            },
            pending: pod("db-2")
                .label("app", "db")
                .cpu("100m")
                .affinity(affinity(vec![], vec![], vec![term("app", "db", ZONE)], vec![]))
                .obj(),
            reason: ReasonCode::PodAntiAffinityCollision,
            names: &["collides with default/db-0 in topology.kubernetes.io/zone=zone-a"],
            first_hint: |c| matches!(c, Change::RemovePodAntiAffinityTerm { term: 0 }),
        },
        Scenario {
            name: "a running pod's anti-affinity",
            objects: ClusterObjects {
                nodes: zones(&[("n1", "zone-a")]),
                pods: vec![
                    pod("loner")
                        .label("app", "loner")
                        .node("n1")
                        .affinity(affinity(vec![], vec![], vec![term("app", "web", ZONE)], vec![]))
                        .obj(),
                ],
                ..Default::default()
            },
            pending: pod("web").label("app", "web").obj(),
            reason: ReasonCode::ExistingPodAntiAffinityCollision,
            names: &["running pod default/loner's anti-affinity"],
            first_hint: |c| matches!(c, Change::DeletePods { pods } if pods == &["default/loner"]),
        },
        Scenario {
            name: "required affinity to pods that run nowhere",
            objects: ClusterObjects {
                nodes: abc.clone(),
                ..Default::default()
            },
            pending: pod("p")
                .affinity(affinity(vec![term("app", "cache", ZONE)], vec![], vec![], vec![]))
                .obj(),
            reason: ReasonCode::PodAffinityNoMatchingPod,
            names: &["matches no running pod anywhere"],
            first_hint: |c| matches!(c, Change::RemovePodAffinityTerm { term: 0 }),
        },
        Scenario {
            name: "minDomains 5 with 3 zones",
            objects: ClusterObjects {
                nodes: abc.clone(),
                pods: vec![
                    pod("w-a").label("app", "w").node("n1").obj(),
                    pod("w-b").label("app", "w").node("n2").obj(),
                    pod("w-c").label("app", "w").node("n3").obj(),
                ],
                ..Default::default()
            },
            pending: spread(
                pod("w-d").label("app", "w"),
                vec![{
                    let mut c = tsc(1, ZONE, "DoNotSchedule", &[("app", "w")]);
                    c.min_domains = Some(5);
                    c
                }],
            ),
            reason: ReasonCode::TopologySpreadMinDomains,
            names: &["minDomains 5 but only 3 domain(s) exist (zone-a=1, zone-b=1, zone-c=1)"],
            first_hint: |c| {
                matches!(
                    c,
                    Change::SetMinDomains {
                        constraint: 0,
                        min_domains: Some(3)
                    }
                )
            },
        },
        Scenario {
            name: "maxSkew exceeded in every domain but one that is full",
            objects: ClusterObjects {
                nodes: vec![
                    node("n1").cpu("4").label(ZONE, "zone-a").obj(),
                    node("n2").cpu("4").label(ZONE, "zone-b").obj(),
                    node("n3").cpu("1").label(ZONE, "zone-c").obj(),
                ],
                pods: vec![
                    pod("w-a").label("app", "w").node("n1").obj(),
                    pod("w-b").label("app", "w").node("n2").obj(),
                ],
                ..Default::default()
            },
            pending: spread(
                pod("w-d").label("app", "w").cpu("2"),
                vec![tsc(1, ZONE, "DoNotSchedule", &[("app", "w")])],
            ),
            reason: ReasonCode::TopologySpreadMaxSkew,
            names: &[
                "would have skew 2 (pods per domain: zone-a=1, zone-b=1, zone-c=0; minimum 0); allowed: zone-c",
            ],
            first_hint: |c| matches!(c, Change::ScheduleAnyway { constraint: 0 }),
        },
        Scenario {
            name: "host port held by another pod",
            objects: ClusterObjects {
                nodes: vec![node("n1").cpu("4").obj()],
                pods: vec![pod("web-0").host_port(8080, "", "").node("n1").obj()],
                ..Default::default()
            },
            pending: pod("web-1").host_port(8080, "", "").obj(),
            reason: ReasonCode::HostPortInUse,
            names: &["host port TCP/0.0.0.0:8080 is held by pod default/web-0"],
            first_hint: |c| matches!(c, Change::DeletePods { pods } if pods == &["default/web-0"]),
        },
        Scenario {
            name: "not enough cpu",
            objects: ClusterObjects {
                nodes: vec![node("small").cpu("2").obj()],
                pods: vec![pod("busy").cpu("1500m").node("small").obj()],
                ..Default::default()
            },
            pending: pod("p").cpu("1").obj(),
            reason: ReasonCode::InsufficientResource,
            names: &["needs 500m more cpu (requests 1, 500m free)"],
            first_hint: |c| matches!(c, Change::LowerRequest { resource, to: 500 } if resource == "cpu"),
        },
        Scenario {
            // The StatefulSet: no PV of the class is available (2 exist, both bound). The
            // volume is proposed on the node that passes every other filter (n1 lacks cpu).
            name: "a WaitForFirstConsumer claim whose class's volumes are all bound",
            objects: wffc_claim_with_every_volume_bound(),
            pending: pod("db-2").cpu("2").pvc("data-db-2").obj(),
            reason: ReasonCode::NoVolumeForClaim,
            names: &[
                "persistentvolumeclaim default/data-db-2",
                "pv-0 (bound to persistentvolumeclaim default/data-db-0)",
                "pv-1 (bound to persistentvolumeclaim default/data-db-1)",
            ],
            first_hint: |c| {
                matches!(c, Change::CreatePersistentVolume { claim, node, .. }
                    if claim == "default/data-db-2" && node == "n2")
            },
        },
        Scenario {
            name: "a cordoned node and its taint",
            objects: ClusterObjects {
                nodes: vec![
                    node("cordoned")
                        .cpu("4")
                        .taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
                        .unschedulable()
                        .obj(),
                ],
                ..Default::default()
            },
            pending: pod("p").cpu("1").obj(),
            reason: ReasonCode::NodeCordoned,
            names: &["cordoned (spec.unschedulable)"],
            first_hint: |c| matches!(c, Change::Uncordon { node } if node == "cordoned"),
        },
        Scenario {
            // VolumeZone has no hint of its own (a bound volume does not move): the zone-b nodes'
            // changes cannot help, so the first hint is the fix of the one zone-a node, its taint.
            name: "a volume in zone-a whose only zone-a node carries a user's taint",
            objects: volume_in_zone_a_and_a_tainted_zone_a_node(),
            pending: pod("db-0").cpu("1").pvc("data").obj(),
            reason: ReasonCode::VolumeZoneConflict,
            names: &[
                "persistentvolume pv-a is in topology.kubernetes.io/zone zone-a; the node has zone-b",
                "only a node in zone-a can run the pod",
            ],
            first_hint: |c| matches!(c, Change::AddToleration { taints } if taints.len() == 1 && taints[0].key == USER_TAINT),
        },
        Scenario {
            // NodeVolumeLimits has no hint of its own (the attach limit is the node's): the first
            // hint is the fix of the node with room, its taint.
            name: "a node at its CSI driver's attach limit and one with room but a user's taint",
            objects: one_node_at_the_attach_limit_and_a_tainted_one_with_room(),
            pending: pod("p").pvc("c3").obj(),
            reason: ReasonCode::VolumeLimitExceeded,
            names: &[
                "CSI driver disk.csi.example.com: 2 volume(s) on the node and the pod's 1 would pass its limit of 2",
            ],
            first_hint: |c| matches!(c, Change::AddToleration { taints } if taints.len() == 1 && taints[0].key == USER_TAINT),
        },
    ]
}

/// The taint a user puts on a node (tolerable, unlike the control plane's).
const USER_TAINT: &str = "dedicated";

/// A claim `data` bound to `pv-a` in zone-a; `a1`, the only zone-a node, tainted `dedicated=db`;
/// `b1` and `b2` in zone-b, free.
fn volume_in_zone_a_and_a_tainted_zone_a_node() -> ClusterObjects {
    use crate::testing::{pv, pvc};
    let mut nodes = zones(&[("b1", "zone-b"), ("b2", "zone-b")]);
    nodes.push(
        node("a1")
            .cpu("4")
            .memory("8Gi")
            .label(ZONE, "zone-a")
            .taint(USER_TAINT, "db", "NoSchedule")
            .obj(),
    );
    ClusterObjects {
        nodes,
        persistent_volumes: vec![
            pv("pv-a")
                .label(ZONE, "zone-a")
                .capacity("10Gi")
                .phase("Bound")
                .claim_ref("default", "data", "uid-data")
                .obj(),
        ],
        persistent_volume_claims: vec![pvc("data").bound("pv-a").request("10Gi").obj()],
        ..Default::default()
    }
}

/// A CSI driver allowing 2 volumes per node: `n1` holds 2 (pods e1, e2), `n2` none but is tainted
/// `dedicated=db`; claim `c3` (bound to a volume of the driver) is free for a pod.
fn one_node_at_the_attach_limit_and_a_tainted_one_with_room() -> ClusterObjects {
    use crate::testing::{csi_node, pv, pvc};
    const DRIVER: &str = "disk.csi.example.com";
    ClusterObjects {
        nodes: vec![
            node("n1").cpu("4").memory("8Gi").obj(),
            node("n2")
                .cpu("4")
                .memory("8Gi")
                .taint(USER_TAINT, "db", "NoSchedule")
                .obj(),
        ],
        csi_nodes: vec![
            csi_node("n1", &[(DRIVER, Some(2))]),
            csi_node("n2", &[(DRIVER, Some(2))]),
        ],
        persistent_volumes: (1..=3)
            .map(|i| pv(&format!("pv{i}")).csi(DRIVER, &format!("h{i}")).obj())
            .collect(),
        persistent_volume_claims: (1..=3)
            .map(|i| pvc(&format!("c{i}")).bound(&format!("pv{i}")).obj())
            .collect(),
        pods: vec![
            pod("e1").node("n1").pvc("c1").obj(),
            pod("e2").node("n1").pvc("c2").obj(),
        ],
        ..Default::default()
    }
}

/// The `local` class (no provisioner, WaitForFirstConsumer) and an unbound 10Gi ReadWriteOnce claim
/// `name` of it.
fn local_claim(
    name: &str,
) -> (
    k8s_openapi::api::core::v1::PersistentVolumeClaim,
    k8s_openapi::api::storage::v1::StorageClass,
) {
    use crate::testing::{pvc, storage_class};
    let claim = pvc(name)
        .storage_class("local")
        .request("10Gi")
        .access_modes(&["ReadWriteOnce"])
        .obj();
    let class = storage_class("local", "kubernetes.io/no-provisioner", "WaitForFirstConsumer");
    (claim, class)
}

/// A `local` class (no provisioner, WaitForFirstConsumer) whose two volumes are bound to other
/// claims, an unbound claim `data-db-2` of it, n1 with 1 cpu and n2 with 4.
fn wffc_claim_with_every_volume_bound() -> ClusterObjects {
    use crate::testing::pv;
    const HOST: &str = "kubernetes.io/hostname";
    let bound = |name: &str, claim: &str, on: &str| {
        pv(name)
            .storage_class("local")
            .capacity("10Gi")
            .access_modes(&["ReadWriteOnce"])
            .node_affinity(HOST, &[on])
            .claim_ref("default", claim, &format!("uid-{claim}"))
            .phase("Bound")
            .obj()
    };
    let (claim, class) = local_claim("data-db-2");
    ClusterObjects {
        nodes: vec![
            node("n1").cpu("1").memory("8Gi").label(HOST, "n1").obj(),
            node("n2").cpu("4").memory("8Gi").label(HOST, "n2").obj(),
        ],
        persistent_volumes: vec![bound("pv-0", "data-db-0", "n1"), bound("pv-1", "data-db-1", "n2")],
        persistent_volume_claims: vec![claim],
        storage_classes: vec![class],
        ..Default::default()
    }
}

#[test]
fn each_blocker_is_named_and_its_first_hint_makes_the_pod_schedulable() {
    for s in scenarios() {
        let (e, report) = evaluate(&s.objects, &s.pending);
        assert_eq!(e.outcome, Outcome::Unschedulable, "{}: {}", s.name, e.message);
        let finding = report
            .findings
            .iter()
            .find(|f| f.reason == s.reason)
            .unwrap_or_else(|| panic!("{}: no {} finding in {:#?}", s.name, s.reason, report.findings));
        for words in s.names {
            assert!(
                finding.message.contains(words),
                "{}: {:?} does not say {words:?}",
                s.name,
                finding.message
            );
        }
        let first = report
            .hints
            .first()
            .unwrap_or_else(|| panic!("{}: no hint; findings {:#?}", s.name, report.findings));
        assert!(
            (s.first_hint)(&first.change),
            "{}: first hint {:?}",
            s.name,
            first.change
        );
        // Every hint offered changes the verdict, checked on the objects rather than the snapshot.
        for h in &report.hints {
            assert_eq!(
                outcome_after(&s.objects, &s.pending, &h.change),
                Outcome::Scheduled,
                "{}: hint {:?}",
                s.name,
                h.description
            );
        }
    }
}

#[test]
fn a_control_plane_taint_is_never_offered_as_a_toleration() {
    let objects = ClusterObjects {
        nodes: vec![
            node("control-plane")
                .cpu("4")
                .taint("node-role.kubernetes.io/control-plane", "", "NoSchedule")
                .obj(),
        ],
        ..Default::default()
    };
    let (_, report) = evaluate(&objects, &pod("p").cpu("1").obj());
    assert_eq!(report.findings[0].reason, ReasonCode::SystemTaintNotTolerated);
    // Tolerating it would schedule the pod, which is exactly why it must not be proposed.
    assert!(report.hints.is_empty(), "{:#?}", report.hints);
}

#[test]
fn a_change_that_lifts_one_rejection_of_two_is_not_a_hint_alone() {
    // The node needs a toleration and more cpu: the toleration alone changes nothing.
    let objects = ClusterObjects {
        nodes: vec![
            node("n1")
                .cpu("1")
                .taint("dedicated", "batch", "NoSchedule")
                .obj(),
        ],
        ..Default::default()
    };
    let (_, report) = evaluate(&objects, &pod("p").cpu("2").obj());
    let kinds: Vec<&str> = report.hints.iter().map(|h| h.description.as_str()).collect();
    assert_eq!(
        kinds,
        ["add a toleration for dedicated=batch:NoSchedule and lower the pod's cpu request to 1"],
        "{:#?}",
        report.hints
    );
}

#[test]
fn reason_codes_are_documented() {
    let doc = include_str!("../../../docs/reasons.md");
    for code in ReasonCode::ALL {
        assert!(
            doc.contains(&format!("`{}`", code.as_str())),
            "{code} missing from docs/reasons.md"
        );
    }
}

#[test]
fn a_hint_that_asks_more_than_another_working_one_is_not_offered() {
    // n1 has 500m cpu free, n2 1500m: lowering the request to 1500m is enough, to 500m asks more.
    let objects = ClusterObjects {
        nodes: vec![node("n1").cpu("1").obj(), node("n2").cpu("2").obj()],
        pods: vec![
            pod("a").cpu("500m").node("n1").obj(),
            pod("b").cpu("500m").node("n2").obj(),
        ],
        ..Default::default()
    };
    let (_, report) = evaluate(&objects, &pod("p").cpu("2").obj());
    let kinds: Vec<&str> = report.hints.iter().map(|h| h.description.as_str()).collect();
    assert_eq!(
        kinds,
        ["lower the pod's cpu request to 1500m"],
        "{:#?}",
        report.hints
    );
}

#[test]
fn asking_no_more_than_compares_part_by_part() {
    let cpu = |to| Change::LowerRequest {
        resource: "cpu".to_string(),
        to,
    };
    let both = Change::All {
        changes: vec![
            cpu(400),
            Change::LowerRequest {
                resource: "memory".to_string(),
                to: 1 << 30,
            },
        ],
    };
    let delete = |pods: &[&str]| Change::DeletePods {
        pods: pods.iter().map(|p| p.to_string()).collect(),
    };
    for (smaller, larger, expected) in [
        (cpu(2500), cpu(400), true),
        (cpu(400), cpu(2500), false),
        (cpu(2500), both.clone(), true),
        (both.clone(), cpu(2500), false),
        (delete(&["ns/a"]), delete(&["ns/a", "ns/b"]), true),
        (delete(&["ns/a", "ns/b"]), delete(&["ns/a"]), false),
        (
            Change::Uncordon { node: "n1".into() },
            Change::Uncordon { node: "n2".into() },
            false,
        ),
    ] {
        assert_eq!(
            smaller.asks_no_more_than(&larger),
            expected,
            "{smaller:?} vs {larger:?}"
        );
    }
}

/// The report's finding with `code`; panics listing the findings when there is none.
fn finding_of(report: &Report, code: ReasonCode) -> &super::Finding {
    report
        .findings
        .iter()
        .find(|f| f.reason == code)
        .unwrap_or_else(|| panic!("no {code} finding: {:#?}", report.findings))
}

/// A StatefulSet-like pod whose WaitForFirstConsumer claim no PersistentVolume can serve: the finding
/// names the claim and each PV of its class with why it is refused (one bound to another claim, one
/// too small, one on another node), and the one hint is the volume that would serve it: a local PV
/// of the claim's class, size and access modes on one node, whose path the user fills in.
#[test]
fn volume_binding_names_the_claim_and_why_each_volume_is_refused() {
    use crate::testing::pv;
    const HOST: &str = "kubernetes.io/hostname";
    let local = |name: &str, size: &str, on: &str| {
        pv(name)
            .storage_class("local")
            .capacity(size)
            .phase("Available")
            .access_modes(&["ReadWriteOnce"])
            .node_affinity(HOST, &[on])
    };
    let (claim, class) = local_claim("data");
    let objects = ClusterObjects {
        nodes: vec![
            node("n1").cpu("4").memory("8Gi").label(HOST, "n1").obj(),
            node("n2").cpu("4").memory("8Gi").label(HOST, "n2").obj(),
        ],
        persistent_volumes: vec![
            local("pv-bound", "20Gi", "n1")
                .claim_ref("default", "other-data", "uid-other")
                .phase("Bound")
                .obj(),
            local("pv-small", "1Gi", "n1").obj(),
            local("pv-elsewhere", "20Gi", "n9").obj(),
        ],
        persistent_volume_claims: vec![claim],
        storage_classes: vec![class],
        ..Default::default()
    };
    let pending = pod("db-0").pvc("data").obj();
    let (explanation, report) = evaluate(&objects, &pending);
    assert_eq!(
        explanation.outcome,
        Outcome::Unschedulable,
        "{}",
        explanation.message
    );
    let finding = finding_of(&report, ReasonCode::NoVolumeForClaim);
    assert_eq!(finding.nodes, ["n1", "n2"]);
    for expected in [
        "persistentvolumeclaim default/data",
        "storageclass \"local\" does not support dynamic provisioning",
        "pv-bound (bound to persistentvolumeclaim default/other-data)",
        "pv-elsewhere (node affinity excludes the node)",
        "pv-small (capacity 1Gi is less than the 10Gi requested)",
    ] {
        assert!(
            finding.message.contains(expected),
            "{expected:?} not in {:?}",
            finding.message
        );
    }
    let super::Detail::Volumes { claim, volumes } = &finding.detail else {
        panic!("detail {:?}", finding.detail);
    };
    assert_eq!(claim, "default/data");
    let names: Vec<&str> = volumes.iter().map(|v| v.volume.as_str()).collect();
    assert_eq!(names, ["pv-bound", "pv-elsewhere", "pv-small"]);
    // One volume is offered, not one per node that could hold it.
    assert_eq!(report.hints.len(), 1, "{:#?}", report.hints);
    let (hint, claim, node, volume) = first_hint_volume(&report, &objects, &pending);
    assert_eq!((claim, node), ("default/data", "n1"));
    assert_eq!(hint.schedules_on, ["n1"]);
    let spec = volume.spec.as_ref().unwrap();
    assert_eq!(volume.metadata.name.as_deref(), Some("default-data"));
    assert_eq!(spec.storage_class_name.as_deref(), Some("local"));
    assert_eq!(spec.capacity.as_ref().unwrap()["storage"].0, "10Gi");
    assert_eq!(
        spec.access_modes.as_deref(),
        Some(&["ReadWriteOnce".to_string()][..])
    );
    assert_eq!(
        spec.local.as_ref().unwrap().path,
        super::volume_binding::LOCAL_PATH_PLACEHOLDER
    );
    assert!(
        hint.description
            .contains("set its spec.local.path to a directory of n1 first"),
        "{}",
        hint.description
    );
}

/// The report's first hint, which must create a volume that, applied to the objects, makes the pod
/// schedulable: the hint, its claim, its node and the volume.
fn first_hint_volume<'r>(
    report: &'r Report,
    objects: &ClusterObjects,
    pending: &Pod,
) -> (
    &'r super::VerifiedHint,
    &'r str,
    &'r str,
    &'r k8s_openapi::api::core::v1::PersistentVolume,
) {
    let hint = report.hints.first().expect("a hint");
    let Change::CreatePersistentVolume { claim, node, volume } = &hint.change else {
        panic!("hint {:?}", hint.change);
    };
    assert_eq!(outcome_after(objects, pending, &hint.change), Outcome::Scheduled);
    (hint, claim, node, volume)
}

/// The claim's selector, volume mode and the existing volume names are honoured: the proposed
/// volume carries labels the selector selects, the claim's Block mode, and a name no volume has.
#[test]
fn the_proposed_volume_matches_the_claims_selector_and_mode() {
    use crate::testing::{pv, pvc, storage_class};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
    let objects = ClusterObjects {
        nodes: vec![node("n1").cpu("4").label("kubernetes.io/hostname", "n1").obj()],
        persistent_volumes: vec![
            pv("default-data")
                .storage_class("fast")
                .capacity("1Gi")
                .phase("Bound")
                .claim_ref("default", "other", "uid-other")
                .obj(),
        ],
        persistent_volume_claims: vec![
            pvc("data")
                .storage_class("fast")
                .request("5Gi")
                .access_modes(&["ReadWriteOncePod"])
                .with(|c| {
                    let spec = c.spec.as_mut().unwrap();
                    spec.volume_mode = Some("Block".into());
                    spec.selector = Some(LabelSelector {
                        match_labels: Some([("tier".to_string(), "db".to_string())].into()),
                        match_expressions: Some(vec![LabelSelectorRequirement {
                            key: "disk".into(),
                            operator: "In".into(),
                            values: Some(vec!["nvme".into(), "ssd".into()]),
                        }]),
                    });
                })
                .obj(),
        ],
        storage_classes: vec![storage_class(
            "fast",
            "kubernetes.io/no-provisioner",
            "WaitForFirstConsumer",
        )],
        ..Default::default()
    };
    let pending = pod("db-0").pvc("data").obj();
    let (_, report) = evaluate(&objects, &pending);
    let (_, _, _, volume) = first_hint_volume(&report, &objects, &pending);
    assert_eq!(volume.metadata.name.as_deref(), Some("default-data-2"));
    let labels = volume.metadata.labels.as_ref().unwrap();
    assert_eq!((labels["tier"].as_str(), labels["disk"].as_str()), ("db", "nvme"));
    let spec = volume.spec.as_ref().unwrap();
    assert_eq!(spec.volume_mode.as_deref(), Some("Block"));
    assert_eq!(
        spec.access_modes.as_deref(),
        Some(&["ReadWriteOncePod".to_string()][..])
    );
}

/// A pod whose claim is bound to a volume in zone-a, on a cluster whose only free node is in zone-b:
/// the finding names the volume, its zone and the node's.
#[test]
fn volume_zone_names_the_volume_and_both_zones() {
    use crate::testing::{pv, pvc};
    let objects = ClusterObjects {
        nodes: zones(&[("b1", "zone-b")]),
        persistent_volumes: vec![
            pv("pv-a")
                .label(ZONE, "zone-a")
                .capacity("10Gi")
                .phase("Bound")
                .claim_ref("default", "data", "uid-data")
                .obj(),
        ],
        persistent_volume_claims: vec![pvc("data").bound("pv-a").request("10Gi").obj()],
        ..Default::default()
    };
    let pending = pod("db-0").pvc("data").obj();
    let (explanation, report) = evaluate(&objects, &pending);
    assert_eq!(
        explanation.outcome,
        Outcome::Unschedulable,
        "{}",
        explanation.message
    );
    let finding = finding_of(&report, ReasonCode::VolumeZoneConflict);
    assert_eq!(finding.nodes, ["b1"]);
    assert_eq!(
        finding.message,
        "persistentvolume pv-a is in topology.kubernetes.io/zone zone-a; the node has zone-b: only a node \
         in zone-a can run the pod (a bound volume does not move)"
    );
    assert!(report.hints.is_empty(), "no hint helps: {:?}", report.hints);
}

/// A node whose CSI driver allows 2 volumes and holds 2: a pod with a third is refused, and the
/// finding names the driver, both counts and the limit.
#[test]
fn node_volume_limits_names_the_driver_the_counts_and_the_limit() {
    const DRIVER: &str = "disk.csi.example.com";
    // The attach-limit cluster without its second node: n1 alone, at the limit.
    let mut objects = one_node_at_the_attach_limit_and_a_tainted_one_with_room();
    objects.nodes.retain(|n| n.metadata.name.as_deref() == Some("n1"));
    objects
        .csi_nodes
        .retain(|n| n.metadata.name.as_deref() == Some("n1"));
    let pending = pod("p").pvc("c3").obj();
    let (explanation, report) = evaluate(&objects, &pending);
    assert_eq!(
        explanation.outcome,
        Outcome::Unschedulable,
        "{}",
        explanation.message
    );
    let finding = finding_of(&report, ReasonCode::VolumeLimitExceeded);
    assert_eq!(
        finding.message,
        format!(
            "CSI driver {DRIVER}: 2 volume(s) on the node and the pod's 1 would pass its limit of 2: the pod \
             needs a node with room for 1 more of its volumes (or 1 fewer attached here)"
        )
    );
    assert!(report.hints.is_empty(), "no hint helps: {:?}", report.hints);
}

/// A ReadWriteOncePod claim in use by a running pod: the finding names the claim and its holder, and
/// the first hint (delete the holder), applied, makes the pod schedulable.
#[test]
fn volume_restrictions_names_the_pod_holding_a_read_write_once_pod_claim() {
    use crate::testing::{pv, pvc};
    let objects = ClusterObjects {
        nodes: vec![node("n1").cpu("4").memory("8Gi").obj()],
        persistent_volumes: vec![
            pv("pv-x")
                .capacity("1Gi")
                .phase("Bound")
                .claim_ref("default", "solo", "uid-solo")
                .obj(),
        ],
        persistent_volume_claims: vec![
            pvc("solo")
                .bound("pv-x")
                .access_modes(&["ReadWriteOncePod"])
                .request("1Gi")
                .obj(),
        ],
        pods: vec![pod("holder").node("n1").pvc("solo").obj()],
        ..Default::default()
    };
    let pending = pod("p").pvc("solo").obj();
    let (explanation, report) = evaluate(&objects, &pending);
    assert_eq!(
        explanation.outcome,
        Outcome::Unschedulable,
        "{}",
        explanation.message
    );
    let finding = finding_of(&report, ReasonCode::ReadWriteOncePodInUse);
    assert_eq!(
        finding.message,
        "persistentvolumeclaim default/solo is ReadWriteOncePod and in use by pod default/holder"
    );
    let first = report.hints.first().expect("a hint");
    assert_eq!(
        first.change,
        Change::DeletePods {
            pods: vec!["default/holder".into()]
        }
    );
    assert_eq!(
        outcome_after(&objects, &pending, &first.change),
        Outcome::Scheduled
    );
}

/// Only the cheapest candidates are checked ([`super::hints::MAX_CANDIDATES`]): with 40 nodes short
/// of cpu before the one that is not, the volume for that one is checked first (a change for a
/// node only one plugin rejects goes first) and offered.
#[test]
fn the_volume_is_proposed_on_the_node_that_passes_every_other_filter_among_many() {
    const HOST: &str = "kubernetes.io/hostname";
    let mut objects = wffc_claim_with_every_volume_bound();
    objects.nodes = (0..40)
        .map(|i| {
            let name = format!("a{i:02}");
            node(&name).cpu("1").memory("8Gi").label(HOST, &name).obj()
        })
        .chain([node("z").cpu("4").memory("8Gi").label(HOST, "z").obj()])
        .collect();
    let pending = pod("db-2").cpu("2").pvc("data-db-2").obj();
    let (_, report) = evaluate(&objects, &pending);
    let first = report.hints.first().expect("a hint");
    assert!(
        matches!(&first.change, Change::CreatePersistentVolume { node, .. } if node == "z"),
        "{:#?}",
        report.hints
    );
}
