//! VolumeBinding tests: PreFilter classification, FindPodVolumes per node, scores, and the
//! Reserve/PreBind/Unreserve cycle with its action plan. Cases follow upstream's
//! volume_binding_test.go and binder_test.go tables.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod, Volume};
use k8s_openapi::api::storage::v1::{CSIStorageCapacity, StorageClass};
use serde_json::json;

use super::assume::AssumedVolumes;
use super::binder::find_pod_volumes;
use super::pv_helpers::*;
use super::*;
use crate::action::ObjectRef;
use crate::framework::status::Code;
use crate::snapshot::ClusterObjects;
use crate::testing::{
    PvBuilder, PvcBuilder, csi_driver, csi_storage_capacity, node, pod, pv, pvc, storage_class,
};

const HOST: &str = "kubernetes.io/hostname";
const ZONE: &str = "topology.kubernetes.io/zone";

fn classes() -> Vec<StorageClass> {
    let mut topo = storage_class("wait-topo", "csi.example.com", "WaitForFirstConsumer");
    topo.allowed_topologies = Some(vec![k8s_openapi::api::core::v1::TopologySelectorTerm {
        match_label_expressions: Some(vec![
            k8s_openapi::api::core::v1::TopologySelectorLabelRequirement {
                key: ZONE.into(),
                values: vec!["z1".into()],
            },
        ]),
    }]);
    vec![
        storage_class("wait", NOT_SUPPORTED_PROVISIONER, "WaitForFirstConsumer"),
        storage_class("wait-hdd", NOT_SUPPORTED_PROVISIONER, "WaitForFirstConsumer"),
        storage_class("wait-prov", "csi.example.com", "WaitForFirstConsumer"),
        storage_class("wait-noprov", "", "WaitForFirstConsumer"),
        storage_class("wait-cap", "cap.csi.example.com", "WaitForFirstConsumer"),
        storage_class("wait-nocap", "nocap.csi.example.com", "WaitForFirstConsumer"),
        storage_class("immediate", "csi.example.com", "Immediate"),
        storage_class("nomode", "csi.example.com", ""),
        topo,
    ]
}

fn drivers() -> Vec<k8s_openapi::api::storage::v1::CSIDriver> {
    let mut cap = csi_driver("cap.csi.example.com", None);
    cap.spec.storage_capacity = Some(true);
    let mut nocap = csi_driver("nocap.csi.example.com", None);
    nocap.spec.storage_capacity = Some(false);
    vec![cap, nocap]
}

fn nodes() -> Vec<Node> {
    vec![
        node("node-a").label(ZONE, "z1").obj(),
        node("node-b").label(ZONE, "z2").obj(),
        node("node-c").label(ZONE, "z1").obj(),
    ]
}

/// An Available local PV of class "wait" on `node`, RWO.
fn local_pv(name: &str, size: &str, on: &str) -> PvBuilder {
    pv(name)
        .storage_class("wait")
        .capacity(size)
        .phase("Available")
        .access_modes(&["ReadWriteOnce"])
        .node_affinity(HOST, &[on])
        .uid(&format!("uid-{name}"))
        .resource_version("10")
}

/// A RWO claim of `class` requesting `size`.
fn claim(name: &str, class: &str, size: &str) -> PvcBuilder {
    pvc(name)
        .storage_class(class)
        .request(size)
        .access_modes(&["ReadWriteOnce"])
        .uid(&format!("uid-{name}"))
        .resource_version("20")
}

#[derive(Default)]
struct World {
    pvs: Vec<PersistentVolume>,
    pvcs: Vec<PersistentVolumeClaim>,
    capacities: Vec<CSIStorageCapacity>,
}

impl World {
    fn pvs(mut self, pvs: Vec<PvBuilder>) -> Self {
        self.pvs = pvs.into_iter().map(PvBuilder::obj).collect();
        self
    }
    fn pvcs(mut self, pvcs: Vec<PvcBuilder>) -> Self {
        self.pvcs = pvcs.into_iter().map(PvcBuilder::obj).collect();
        self
    }
    fn capacities(mut self, capacities: Vec<CSIStorageCapacity>) -> Self {
        self.capacities = capacities;
        self
    }
    fn snapshot(self) -> Arc<Snapshot> {
        Arc::new(Snapshot::new(ClusterObjects {
            nodes: nodes(),
            persistent_volumes: self.pvs,
            persistent_volume_claims: self.pvcs,
            storage_classes: classes(),
            csi_drivers: drivers(),
            csi_storage_capacities: self.capacities,
            ..Default::default()
        }))
    }
}

fn pod_with(claims: &[&str]) -> Pod {
    claims.iter().fold(pod("p"), |p, c| p.pvc(c)).obj()
}

fn world() -> World {
    World::default()
}

fn plugin(snapshot: &Arc<Snapshot>) -> VolumeBinding {
    VolumeBinding::from_args(None, snapshot.clone(), &crate::framework::FeatureGates::v1_37()).unwrap()
}

/// v1.37's gates with StorageCapacityScoring as `on` says.
fn scoring(on: bool) -> crate::framework::FeatureGates {
    crate::framework::FeatureGates {
        storage_capacity_scoring: on,
        ..crate::framework::FeatureGates::v1_37()
    }
}

fn node_of(snapshot: &Snapshot, name: &str) -> Node {
    (*snapshot.node(name).unwrap().node).clone()
}

#[test]
fn prefilter_classifies_claims_with_upstream_messages() {
    let owned = |b: PvcBuilder| b.owned_by_pod("p", "default-p");
    let cases: Vec<(&str, World, Pod, Code, &str)> = vec![
        ("no volumes", world(), pod("p").obj(), Code::Skip, ""),
        (
            "no claim volumes",
            world(),
            pod("p")
                .volume(Volume {
                    name: "scratch".into(),
                    empty_dir: Some(Default::default()),
                    ..Default::default()
                })
                .obj(),
            Code::Skip,
            "",
        ),
        (
            "claim not found",
            world(),
            pod_with(&["pvc-a"]),
            Code::UnschedulableAndUnresolvable,
            r#"persistentvolumeclaim "pvc-a" not found"#,
        ),
        (
            "part of the claims not found",
            world().pvcs(vec![claim("pvc-a", "wait", "1Gi").bound("pv-a")]),
            pod_with(&["pvc-a", "pvc-b"]),
            Code::UnschedulableAndUnresolvable,
            r#"persistentvolumeclaim "pvc-b" not found"#,
        ),
        (
            "ephemeral claim not created yet",
            world(),
            pod("p").ephemeral("scratch").obj(),
            Code::UnschedulableAndUnresolvable,
            r#"waiting for ephemeral volume controller to create the persistentvolumeclaim "p-scratch""#,
        ),
        (
            "ephemeral claim of another owner",
            world().pvcs(vec![
                claim("p-scratch", "wait", "1Gi").owned_by_pod("p", "someone-else"),
            ]),
            pod("p").ephemeral("scratch").obj(),
            Code::UnschedulableAndUnresolvable,
            "PVC default/p-scratch was not created for pod default/p (pod is not owner)",
        ),
        (
            "ephemeral claim owned by the pod",
            world()
                .pvcs(vec![owned(claim("p-scratch", "wait", "1Gi"))])
                .pvs(vec![local_pv("pv-a", "1Gi", "node-a")]),
            pod("p").ephemeral("scratch").obj(),
            Code::Success,
            "",
        ),
        (
            "claim lost",
            world().pvcs(vec![claim("pvc-a", "wait", "1Gi").bound("pv-a").phase("Lost")]),
            pod_with(&["pvc-a"]),
            Code::UnschedulableAndUnresolvable,
            r#"persistentvolumeclaim "pvc-a" bound to non-existent persistentvolume "pv-a""#,
        ),
        (
            "claim being deleted",
            world().pvcs(vec![claim("pvc-a", "wait", "1Gi").deleting()]),
            pod_with(&["pvc-a"]),
            Code::UnschedulableAndUnresolvable,
            r#"persistentvolumeclaim "pvc-a" is being deleted"#,
        ),
        (
            "immediate claim not bound",
            world().pvcs(vec![claim("pvc-a", "immediate", "1Gi")]),
            pod_with(&["pvc-a"]),
            Code::UnschedulableAndUnresolvable,
            ERR_REASON_UNBOUND_IMMEDIATE_CLAIMS,
        ),
        (
            "claim without class is immediate",
            world().pvcs(vec![pvc("pvc-a").request("1Gi")]),
            pod_with(&["pvc-a"]),
            Code::UnschedulableAndUnresolvable,
            ERR_REASON_UNBOUND_IMMEDIATE_CLAIMS,
        ),
        (
            "claim of an unknown class is immediate",
            world().pvcs(vec![claim("pvc-a", "gone", "1Gi")]),
            pod_with(&["pvc-a"]),
            Code::UnschedulableAndUnresolvable,
            ERR_REASON_UNBOUND_IMMEDIATE_CLAIMS,
        ),
        (
            "delayed claim pre-bound through volumeName is immediate",
            world().pvcs(vec![claim("pvc-a", "wait", "1Gi").volume_name("pv-a")]),
            pod_with(&["pvc-a"]),
            Code::UnschedulableAndUnresolvable,
            ERR_REASON_UNBOUND_IMMEDIATE_CLAIMS,
        ),
        (
            "delayed and bound claims",
            world().pvcs(vec![
                claim("pvc-a", "wait", "1Gi"),
                claim("pvc-b", "immediate", "1Gi").bound("pv-b"),
            ]),
            pod_with(&["pvc-a", "pvc-b"]),
            Code::Success,
            "",
        ),
        (
            "class without volumeBindingMode",
            world().pvcs(vec![claim("pvc-a", "nomode", "1Gi")]),
            pod_with(&["pvc-a"]),
            Code::Error,
            r#"VolumeBindingMode not set for StorageClass "nomode""#,
        ),
    ];
    for (name, world, p, want_code, want_message) in cases {
        let snapshot = world.snapshot();
        let pl = plugin(&snapshot);
        let mut state = CycleState::new();
        let (result, status) = pl.pre_filter(&mut state, &PodInfo::new(p), snapshot.nodes());
        assert!(result.is_none(), "{name}");
        assert_eq!(status.code(), want_code, "{name}: {status:?}");
        assert_eq!(status.message(), want_message, "{name}");
        let state_written = state.read(&STATE_KEY).is_some();
        assert_eq!(
            state_written,
            matches!(want_code, Code::Success | Code::Skip),
            "{name}"
        );
    }
}

#[test]
fn prefilter_state_sorts_claims() {
    let snapshot = world()
        .pvcs(vec![
            claim("bound", "wait", "1Gi").bound("pv-x"),
            claim("delayed", "wait", "1Gi"),
            claim("delayed-hdd", "wait-hdd", "1Gi"),
        ])
        .pvs(vec![
            local_pv("pv-b", "1Gi", "node-a"),
            local_pv("pv-a", "1Gi", "node-b"),
            // Bound to a claim of another pod: no node could ever use it for this pod.
            local_pv("pv-taken", "1Gi", "node-a").claim_ref("default", "other", "uid-other"),
            // Pre-bound to this pod's delayed claim: the only PV that claim may take.
            local_pv("pv-pre", "1Gi", "node-a").claim_ref("default", "delayed", "uid-delayed"),
        ])
        .snapshot();
    let claims = classify_pod_claims(
        VolumeView::new(&snapshot),
        &pod_with(&["bound", "delayed", "delayed-hdd"]),
    )
    .unwrap()
    .unwrap();
    let names = |v: &[Arc<PersistentVolumeClaim>]| {
        v.iter()
            .map(|c| name_of(&c.metadata).to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&claims.bound_claims), ["bound"]);
    assert_eq!(
        names(&claims.unbound_claims_delay_binding),
        ["delayed", "delayed-hdd"]
    );
    assert!(claims.unbound_claims_immediate.is_empty());
    let pvs: Vec<&str> = claims.unbound_volumes_delay_binding["wait"]
        .iter()
        .map(|c| name_of(&c.pv.metadata))
        .collect();
    assert_eq!(pvs, ["pv-a", "pv-b", "pv-pre"]);
    assert!(claims.unbound_volumes_delay_binding["wait-hdd"].is_empty());
}

/// Expected outcome of `FindPodVolumes` on node-a.
struct Want {
    reasons: Vec<&'static str>,
    bindings: Vec<(&'static str, &'static str)>,
    provisions: Vec<(&'static str, Option<&'static str>)>,
}

fn fits(
    bindings: Vec<(&'static str, &'static str)>,
    provisions: Vec<(&'static str, Option<&'static str>)>,
) -> Want {
    Want {
        reasons: vec![],
        bindings,
        provisions,
    }
}

fn rejected(reasons: Vec<&'static str>) -> Want {
    Want {
        reasons,
        bindings: vec![],
        provisions: vec![],
    }
}

fn check_find(name: &str, world: World, p: Pod, want: Want) {
    let snapshot = world.snapshot();
    let found = find_pod_volumes(&snapshot, &p, &node_of(&snapshot, "node-a"))
        .unwrap_or_else(|s| panic!("{name}: {s:?}"));
    assert_eq!(found.reasons, want.reasons, "{name}: reasons");
    for reason in &found.reasons {
        assert!(
            found.conflicts.iter().any(|c| c.reason == *reason),
            "{name}: no conflict explains {reason:?}: {:?}",
            found.conflicts
        );
    }
    if want.reasons.is_empty() {
        let bindings: Vec<(&str, &str)> = found
            .static_bindings
            .iter()
            .map(|b| (name_of(&b.pvc.metadata), name_of(&b.pv.metadata)))
            .collect();
        assert_eq!(bindings, want.bindings, "{name}: bindings");
        let provisions: Vec<(&str, Option<&str>)> = found
            .dynamic_provisions
            .iter()
            .map(|d| {
                (
                    name_of(&d.pvc.metadata),
                    d.node_capacity.as_ref().map(|c| name_of(&c.metadata)),
                )
            })
            .collect();
        assert_eq!(provisions, want.provisions, "{name}: provisions");
    }
}

#[test]
fn find_pod_volumes_bound_claims() {
    let cases: Vec<(&str, World, Pod, Want)> = vec![
        (
            "bound claim, PV reachable",
            world()
                .pvcs(vec![claim("pvc-a", "wait", "1Gi").bound("pv-a")])
                .pvs(vec![local_pv("pv-a", "1Gi", "node-a").phase("Bound")]),
            pod_with(&["pvc-a"]),
            fits(vec![], vec![]),
        ),
        (
            "bound claim, PV without node affinity",
            world()
                .pvcs(vec![claim("pvc-a", "immediate", "1Gi").bound("pv-a")])
                .pvs(vec![pv("pv-a").capacity("1Gi")]),
            pod_with(&["pvc-a"]),
            fits(vec![], vec![]),
        ),
        (
            "bound claim, PV on another node",
            world()
                .pvcs(vec![claim("pvc-a", "immediate", "1Gi").bound("pv-a")])
                .pvs(vec![local_pv("pv-a", "1Gi", "node-b")]),
            pod_with(&["pvc-a"]),
            rejected(vec![ERR_REASON_NODE_CONFLICT]),
        ),
        (
            "bound claim, PV in another zone",
            world()
                .pvcs(vec![claim("pvc-a", "immediate", "1Gi").bound("pv-a")])
                .pvs(vec![pv("pv-a").node_affinity(ZONE, &["z2"])]),
            pod_with(&["pvc-a"]),
            rejected(vec![ERR_REASON_NODE_CONFLICT]),
        ),
        (
            "bound claim, PV missing",
            world().pvcs(vec![claim("pvc-a", "wait", "1Gi").bound("pv-a")]),
            pod_with(&["pvc-a"]),
            rejected(vec![ERR_REASON_PV_NOT_EXIST]),
        ),
        (
            "bound and unbound unsatisfied",
            world()
                .pvcs(vec![
                    claim("pvc-a", "wait", "1Gi").bound("pv-a"),
                    claim("pvc-b", "wait", "1Gi"),
                ])
                .pvs(vec![local_pv("pv-a", "1Gi", "node-b")]),
            pod_with(&["pvc-a", "pvc-b"]),
            rejected(vec![ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT]),
        ),
        (
            "PV missing and selected for another node: reasons in upstream order",
            world().pvcs(vec![
                claim("pvc-a", "wait", "1Gi").bound("pv-a"),
                claim("pvc-b", "wait-prov", "1Gi").selected_node("node-b"),
            ]),
            pod_with(&["pvc-a", "pvc-b"]),
            rejected(vec![ERR_REASON_BIND_CONFLICT, ERR_REASON_PV_NOT_EXIST]),
        ),
        (
            "matchFields never match a PV's node affinity",
            world()
                .pvcs(vec![claim("pvc-a", "immediate", "1Gi").bound("pv-a")])
                .pvs(vec![pv("pv-a").with(|p| {
                    p.spec.get_or_insert_with(Default::default).node_affinity =
                        Some(k8s_openapi::api::core::v1::VolumeNodeAffinity {
                            required: Some(k8s_openapi::api::core::v1::NodeSelector {
                                node_selector_terms: vec![k8s_openapi::api::core::v1::NodeSelectorTerm {
                                    match_fields: Some(vec![
                                        k8s_openapi::api::core::v1::NodeSelectorRequirement {
                                            key: "metadata.name".into(),
                                            operator: "In".into(),
                                            values: Some(vec!["node-a".into()]),
                                        },
                                    ]),
                                    ..Default::default()
                                }],
                            }),
                        });
                })]),
            pod_with(&["pvc-a"]),
            rejected(vec![ERR_REASON_NODE_CONFLICT]),
        ),
    ];
    for (name, world, p, want) in cases {
        check_find(name, world, p, want);
    }
}

#[test]
fn find_pod_volumes_static_matching() {
    let cases: Vec<(&str, World, Pod, Want)> = vec![
        (
            "smallest fitting PV of the node",
            world().pvcs(vec![claim("pvc-a", "wait", "5Gi")]).pvs(vec![
                local_pv("pv-big", "100Gi", "node-a"),
                local_pv("pv-small", "4Gi", "node-a"),
                local_pv("pv-fit", "10Gi", "node-a"),
                local_pv("pv-other-node", "5Gi", "node-b"),
            ]),
            pod_with(&["pvc-a"]),
            fits(vec![("pvc-a", "pv-fit")], vec![]),
        ),
        (
            "only PVs of other nodes",
            world()
                .pvcs(vec![claim("pvc-a", "wait", "5Gi")])
                .pvs(vec![local_pv("pv-b", "5Gi", "node-b")]),
            pod_with(&["pvc-a"]),
            rejected(vec![ERR_REASON_BIND_CONFLICT]),
        ),
        (
            "no PVs at all, class cannot provision",
            world().pvcs(vec![claim("pvc-a", "wait", "5Gi")]),
            pod_with(&["pvc-a"]),
            rejected(vec![ERR_REASON_BIND_CONFLICT]),
        ),
        (
            "two claims, two PVs: smallest first, no PV used twice",
            world()
                .pvcs(vec![
                    claim("pvc-big", "wait", "10Gi"),
                    claim("pvc-small", "wait", "5Gi"),
                ])
                .pvs(vec![
                    local_pv("pv-10", "10Gi", "node-a"),
                    local_pv("pv-20", "20Gi", "node-a"),
                ]),
            pod_with(&["pvc-big", "pvc-small"]),
            fits(vec![("pvc-small", "pv-10"), ("pvc-big", "pv-20")], vec![]),
        ),
        (
            "two claims competing for one PV: the smaller claim wins it",
            world()
                .pvcs(vec![
                    claim("pvc-big", "wait", "8Gi"),
                    claim("pvc-small", "wait", "5Gi"),
                ])
                .pvs(vec![local_pv("pv-10", "10Gi", "node-a")]),
            pod_with(&["pvc-big", "pvc-small"]),
            rejected(vec![ERR_REASON_BIND_CONFLICT]),
        ),
        (
            "two claims of equal size take two PVs",
            world()
                .pvcs(vec![claim("pvc-1", "wait", "5Gi"), claim("pvc-2", "wait", "5Gi")])
                .pvs(vec![
                    local_pv("pv-x", "5Gi", "node-a"),
                    local_pv("pv-y", "5Gi", "node-a"),
                ]),
            pod_with(&["pvc-1", "pvc-2"]),
            fits(vec![("pvc-1", "pv-x"), ("pvc-2", "pv-y")], vec![]),
        ),
        (
            "claims of two classes",
            world()
                .pvcs(vec![
                    claim("pvc-0", "wait", "50Gi"),
                    claim("pvc-1", "wait-hdd", "100Gi"),
                ])
                .pvs(vec![
                    local_pv("pv-ssd", "200Gi", "node-a"),
                    local_pv("pv-hdd", "100Gi", "node-a").storage_class("wait-hdd"),
                ]),
            pod_with(&["pvc-0", "pvc-1"]),
            fits(vec![("pvc-0", "pv-ssd"), ("pvc-1", "pv-hdd")], vec![]),
        ),
        (
            "one bound, one matched",
            world()
                .pvcs(vec![
                    claim("pvc-a", "wait", "1Gi").bound("pv-a"),
                    claim("pvc-b", "wait", "1Gi"),
                ])
                .pvs(vec![
                    local_pv("pv-a", "1Gi", "node-a").phase("Bound"),
                    local_pv("pv-b", "1Gi", "node-a"),
                ]),
            pod_with(&["pvc-a", "pvc-b"]),
            fits(vec![("pvc-b", "pv-b")], vec![]),
        ),
        (
            "access modes must all be offered",
            world()
                .pvcs(vec![
                    claim("pvc-a", "wait", "1Gi").access_modes(&["ReadWriteOnce", "ReadOnlyMany"]),
                ])
                .pvs(vec![
                    local_pv("pv-rwo", "1Gi", "node-a"),
                    local_pv("pv-both", "2Gi", "node-a").access_modes(&["ReadOnlyMany", "ReadWriteOnce"]),
                ]),
            pod_with(&["pvc-a"]),
            fits(vec![("pvc-a", "pv-both")], vec![]),
        ),
        (
            "selector on PV labels",
            world()
                .pvcs(vec![claim("pvc-a", "wait", "1Gi").selector_label("tier", "gold")])
                .pvs(vec![
                    local_pv("pv-plain", "1Gi", "node-a"),
                    local_pv("pv-gold", "2Gi", "node-a").label("tier", "gold"),
                ]),
            pod_with(&["pvc-a"]),
            fits(vec![("pvc-a", "pv-gold")], vec![]),
        ),
        (
            "volumeMode: unset means Filesystem",
            world()
                .pvcs(vec![claim("pvc-a", "wait", "1Gi").volume_mode("Block")])
                .pvs(vec![
                    local_pv("pv-fs", "1Gi", "node-a"),
                    local_pv("pv-fs-explicit", "1Gi", "node-a").volume_mode("Filesystem"),
                    local_pv("pv-block", "2Gi", "node-a").volume_mode("Block"),
                ]),
            pod_with(&["pvc-a"]),
            fits(vec![("pvc-a", "pv-block")], vec![]),
        ),
        (
            "VolumeAttributesClass must be equal",
            world()
                .pvcs(vec![
                    claim("pvc-a", "wait", "1Gi").volume_attributes_class("fast"),
                ])
                .pvs(vec![
                    local_pv("pv-none", "1Gi", "node-a"),
                    local_pv("pv-slow", "1Gi", "node-a").volume_attributes_class("slow"),
                    local_pv("pv-fast", "2Gi", "node-a").volume_attributes_class("fast"),
                ]),
            pod_with(&["pvc-a"]),
            fits(vec![("pvc-a", "pv-fast")], vec![]),
        ),
        (
            "claim without attributes class skips PVs with one",
            world().pvcs(vec![claim("pvc-a", "wait", "1Gi")]).pvs(vec![
                local_pv("pv-fast", "1Gi", "node-a").volume_attributes_class("fast"),
            ]),
            pod_with(&["pvc-a"]),
            rejected(vec![ERR_REASON_BIND_CONFLICT]),
        ),
        (
            "PVs being deleted, not Available, or claimed by others are skipped",
            world().pvcs(vec![claim("pvc-a", "wait", "1Gi")]).pvs(vec![
                local_pv("pv-deleting", "1Gi", "node-a").deleting(),
                local_pv("pv-released", "1Gi", "node-a").phase("Released"),
                local_pv("pv-pending", "1Gi", "node-a").phase("Pending"),
                local_pv("pv-taken", "1Gi", "node-a").claim_ref("default", "other", "uid-other"),
                local_pv("pv-free", "3Gi", "node-a"),
            ]),
            pod_with(&["pvc-a"]),
            fits(vec![("pvc-a", "pv-free")], vec![]),
        ),
        (
            "PV of another class (beta annotation wins) is not considered",
            world().pvcs(vec![claim("pvc-a", "wait", "1Gi")]).pvs(vec![
                local_pv("pv-a", "1Gi", "node-a").annotation(BETA_STORAGE_CLASS_ANNOTATION, "other"),
            ]),
            pod_with(&["pvc-a"]),
            rejected(vec![ERR_REASON_BIND_CONFLICT]),
        ),
        (
            "pre-bound PV wins over a smaller free one, whatever its phase",
            world().pvcs(vec![claim("pvc-a", "wait", "1Gi")]).pvs(vec![
                local_pv("pv-free", "1Gi", "node-a"),
                local_pv("pv-prebound", "50Gi", "node-a")
                    .claim_ref("default", "pvc-a", "")
                    .phase("Pending"),
            ]),
            pod_with(&["pvc-a"]),
            fits(vec![("pvc-a", "pv-prebound")], vec![]),
        ),
        (
            "pre-bound PV unreachable from the node: no match, even with a free PV",
            world().pvcs(vec![claim("pvc-a", "wait", "1Gi")]).pvs(vec![
                local_pv("pv-free", "1Gi", "node-a"),
                local_pv("pv-prebound", "1Gi", "node-b").claim_ref("default", "pvc-a", "uid-pvc-a"),
            ]),
            pod_with(&["pvc-a"]),
            rejected(vec![ERR_REASON_BIND_CONFLICT]),
        ),
        (
            "PV pre-bound to another incarnation of the claim (uid) is skipped",
            world().pvcs(vec![claim("pvc-a", "wait", "1Gi")]).pvs(vec![
                local_pv("pv-old", "1Gi", "node-a").claim_ref("default", "pvc-a", "old-uid"),
                local_pv("pv-free", "2Gi", "node-a"),
            ]),
            pod_with(&["pvc-a"]),
            fits(vec![("pvc-a", "pv-free")], vec![]),
        ),
    ];
    for (name, world, p, want) in cases {
        check_find(name, world, p, want);
    }
}

#[test]
fn find_pod_volumes_provisioning() {
    let cases: Vec<(&str, World, Pod, Want)> = vec![
        (
            "class with a provisioner",
            world().pvcs(vec![claim("pvc-a", "wait-prov", "1Gi")]),
            pod_with(&["pvc-a"]),
            fits(vec![], vec![("pvc-a", None)]),
        ),
        (
            "one matched, one provisioned",
            world()
                .pvcs(vec![
                    claim("pvc-a", "wait", "1Gi"),
                    claim("pvc-b", "wait-prov", "1Gi"),
                ])
                .pvs(vec![local_pv("pv-a", "1Gi", "node-a")]),
            pod_with(&["pvc-a", "pvc-b"]),
            fits(vec![("pvc-a", "pv-a")], vec![("pvc-b", None)]),
        ),
        (
            "static PVs of a provisioning class are preferred, the rest provisioned",
            world()
                .pvcs(vec![
                    claim("pvc-a", "wait-prov", "1Gi"),
                    claim("pvc-b", "wait-prov", "2Gi"),
                ])
                .pvs(vec![local_pv("pv-a", "1Gi", "node-a").storage_class("wait-prov")]),
            pod_with(&["pvc-a", "pvc-b"]),
            fits(vec![("pvc-a", "pv-a")], vec![("pvc-b", None)]),
        ),
        (
            "selected node is this node: provisioned without static matching",
            world()
                .pvcs(vec![claim("pvc-a", "wait-prov", "1Gi").selected_node("node-a")])
                .pvs(vec![local_pv("pv-a", "1Gi", "node-a").storage_class("wait-prov")]),
            pod_with(&["pvc-a"]),
            fits(vec![], vec![("pvc-a", None)]),
        ),
        (
            "selected node is another node",
            world().pvcs(vec![claim("pvc-a", "wait-prov", "1Gi").selected_node("node-b")]),
            pod_with(&["pvc-a"]),
            rejected(vec![ERR_REASON_BIND_CONFLICT]),
        ),
        (
            "no-provisioner class",
            world().pvcs(vec![claim("pvc-a", "wait", "1Gi")]),
            pod_with(&["pvc-a"]),
            rejected(vec![ERR_REASON_BIND_CONFLICT]),
        ),
        (
            "empty provisioner",
            world().pvcs(vec![claim("pvc-a", "wait-noprov", "1Gi")]),
            pod_with(&["pvc-a"]),
            rejected(vec![ERR_REASON_BIND_CONFLICT]),
        ),
        (
            "allowedTopologies satisfied",
            world().pvcs(vec![claim("pvc-a", "wait-topo", "1Gi")]),
            pod_with(&["pvc-a"]),
            fits(vec![], vec![("pvc-a", None)]),
        ),
        (
            "driver does not track capacity",
            world().pvcs(vec![claim("pvc-a", "wait-nocap", "1Ti")]),
            pod_with(&["pvc-a"]),
            fits(vec![], vec![("pvc-a", None)]),
        ),
        (
            "capacity: claim without request is not checked",
            world().pvcs(vec![pvc("pvc-a").storage_class("wait-cap")]),
            pod_with(&["pvc-a"]),
            fits(vec![], vec![("pvc-a", None)]),
        ),
        (
            "capacity: local storage",
            world()
                .pvcs(vec![claim("pvc-a", "wait-cap", "1Gi")])
                .capacities(vec![
                    csi_storage_capacity("b", "wait-cap", Some("100Gi"), None, Some(&[(HOST, "node-b")])),
                    csi_storage_capacity("a", "wait-cap", Some("1Gi"), None, Some(&[(HOST, "node-a")])),
                ]),
            pod_with(&["pvc-a"]),
            fits(vec![], vec![("pvc-a", Some("a"))]),
        ),
        (
            "capacity: network attached (empty topology selector)",
            world()
                .pvcs(vec![claim("pvc-a", "wait-cap", "1Gi")])
                .capacities(vec![csi_storage_capacity(
                    "net",
                    "wait-cap",
                    Some("1Gi"),
                    None,
                    Some(&[]),
                )]),
            pod_with(&["pvc-a"]),
            fits(vec![], vec![("pvc-a", Some("net"))]),
        ),
        (
            "capacity: the first sufficient object is used",
            world()
                .pvcs(vec![claim("pvc-a", "wait-cap", "1Gi")])
                .capacities(vec![
                    csi_storage_capacity("small", "wait-cap", Some("1Mi"), None, Some(&[])),
                    csi_storage_capacity("first", "wait-cap", Some("2Gi"), None, Some(&[])),
                    csi_storage_capacity("second", "wait-cap", Some("5Gi"), None, Some(&[])),
                ]),
            pod_with(&["pvc-a"]),
            fits(vec![], vec![("pvc-a", Some("first"))]),
        ),
        (
            "capacity: maximumVolumeSize wins over capacity",
            world()
                .pvcs(vec![claim("pvc-a", "wait-cap", "1Gi")])
                .capacities(vec![csi_storage_capacity(
                    "m",
                    "wait-cap",
                    Some("1Mi"),
                    Some("1Gi"),
                    Some(&[]),
                )]),
            pod_with(&["pvc-a"]),
            fits(vec![], vec![("pvc-a", Some("m"))]),
        ),
    ];
    for (name, world, p, want) in cases {
        check_find(name, world, p, want);
    }

    let not_enough: Vec<(&str, Vec<CSIStorageCapacity>)> = vec![
        ("no capacity objects", vec![]),
        (
            "other node",
            vec![csi_storage_capacity(
                "c",
                "wait-cap",
                Some("1Gi"),
                None,
                Some(&[(HOST, "node-b")]),
            )],
        ),
        (
            "other class",
            vec![csi_storage_capacity("c", "wait", Some("1Gi"), None, Some(&[]))],
        ),
        (
            "insufficient",
            vec![csi_storage_capacity(
                "c",
                "wait-cap",
                Some("1Mi"),
                None,
                Some(&[]),
            )],
        ),
        (
            "insufficient maximumVolumeSize",
            vec![csi_storage_capacity(
                "c",
                "wait-cap",
                Some("1Gi"),
                Some("1Mi"),
                Some(&[]),
            )],
        ),
        (
            "zero capacity",
            vec![csi_storage_capacity(
                "c",
                "wait-cap",
                Some("0Mi"),
                None,
                Some(&[]),
            )],
        ),
        (
            "zero maximumVolumeSize",
            vec![csi_storage_capacity(
                "c",
                "wait-cap",
                None,
                Some("0Mi"),
                Some(&[]),
            )],
        ),
        (
            "neither reported",
            vec![csi_storage_capacity("c", "wait-cap", None, None, Some(&[]))],
        ),
        (
            "no node topology",
            vec![csi_storage_capacity("c", "wait-cap", Some("1Gi"), None, None)],
        ),
    ];
    for (name, capacities) in not_enough {
        check_find(
            name,
            world()
                .pvcs(vec![claim("pvc-a", "wait-cap", "1Gi")])
                .capacities(capacities),
            pod_with(&["pvc-a"]),
            rejected(vec![ERR_REASON_NOT_ENOUGH_SPACE]),
        );
    }

    // allowedTopologies on the other zone.
    let snapshot = world().pvcs(vec![claim("pvc-a", "wait-topo", "1Gi")]).snapshot();
    let found = find_pod_volumes(&snapshot, &pod_with(&["pvc-a"]), &node_of(&snapshot, "node-b")).unwrap();
    assert_eq!(found.reasons, [ERR_REASON_BIND_CONFLICT]);
    assert!(
        found.conflicts[0].message.contains("allowedTopologies"),
        "{:?}",
        found.conflicts
    );
}

#[test]
fn find_pod_volumes_errors_and_skips() {
    // A pod without claims fits with nothing to do.
    let snapshot = world().snapshot();
    let found = find_pod_volumes(&snapshot, &pod("p").obj(), &node_of(&snapshot, "node-a")).unwrap();
    assert!(found.fits() && found.is_empty());

    // PreFilter rejections come back as the status.
    let err = find_pod_volumes(&snapshot, &pod_with(&["pvc-a"]), &node_of(&snapshot, "node-a")).unwrap_err();
    assert_eq!(err.code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(err.message(), r#"persistentvolumeclaim "pvc-a" not found"#);

    // An invalid claim selector is an internal error.
    let snapshot = world()
        .pvcs(vec![claim("pvc-a", "wait", "1Gi").with(|c| {
            c.spec.get_or_insert_with(Default::default).selector =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                    match_expressions: Some(vec![
                        k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                            key: "tier".into(),
                            operator: "Bogus".into(),
                            values: None,
                        },
                    ]),
                    ..Default::default()
                });
        })])
        .pvs(vec![local_pv("pv-a", "1Gi", "node-a")])
        .snapshot();
    let err = find_pod_volumes(&snapshot, &pod_with(&["pvc-a"]), &node_of(&snapshot, "node-a")).unwrap_err();
    assert_eq!(err.code(), Code::Error);
    assert!(
        err.message()
            .starts_with("error creating internal label selector for claim: default/pvc-a: "),
        "{}",
        err.message()
    );
}

#[test]
fn filter_reports_reasons_as_unschedulable_and_unresolvable() {
    let snapshot = world()
        .pvcs(vec![claim("pvc-a", "wait", "50Gi")])
        .pvs(vec![
            local_pv("pv-a-0", "200Gi", "node-a"),
            local_pv("pv-b-0", "100Gi", "node-b"),
        ])
        .snapshot();
    let pl = plugin(&snapshot);
    let p = PodInfo::new(pod_with(&["pvc-a"]));
    let mut state = CycleState::new();
    assert!(pl.pre_filter(&mut state, &p, snapshot.nodes()).1.is_success());
    let statuses: Vec<Status> = snapshot
        .nodes()
        .iter()
        .map(|n| pl.filter(&state, &p, n))
        .collect();
    assert!(statuses[0].is_success());
    assert!(statuses[1].is_success());
    assert_eq!(statuses[2].code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(statuses[2].reasons(), [ERR_REASON_BIND_CONFLICT.to_string()]);

    // Without PreFilter's state, Filter is an error.
    let s = pl.filter(&CycleState::new(), &p, &snapshot.nodes()[0]);
    assert_eq!((s.code(), s.message()), (Code::Error, "not found".to_string()));
}

fn scores(world: World, p: Pod, args: Option<serde_json::Value>) -> Vec<i64> {
    scores_with(world, p, args, true).expect("PreScore succeeds with StorageCapacityScoring")
}

/// The scores with StorageCapacityScoring on or off; None when PreScore Skips.
fn scores_with(
    world: World,
    p: Pod,
    args: Option<serde_json::Value>,
    storage_capacity_scoring: bool,
) -> Option<Vec<i64>> {
    let snapshot = world.snapshot();
    let pl = VolumeBinding::from_args(
        args.as_ref(),
        snapshot.clone(),
        &scoring(storage_capacity_scoring),
    )
    .unwrap();
    let p = PodInfo::new(p);
    let mut state = CycleState::new();
    let s = pl.pre_filter(&mut state, &p, snapshot.nodes()).1;
    assert!(s.is_success() || s.is_skip(), "{s:?}");
    let s = pl.pre_score(&mut state, &p, snapshot.nodes());
    if s.is_skip() {
        return None;
    }
    assert!(s.is_success(), "{s:?}");
    let scores = snapshot
        .nodes()
        .iter()
        .map(|n| {
            let (score, s) = pl.score(&state, &p, n);
            assert!(s.is_success());
            score
        })
        .collect();
    Some(scores)
}

#[test]
fn scores_follow_storage_utilization() {
    let local = |name: &str, size: &str, on: &str| local_pv(name, size, on);
    let node_cap =
        |on: &str, size: &str| csi_storage_capacity(on, "wait-cap", Some(size), None, Some(&[(HOST, on)]));
    type Case = (&'static str, World, Pod, Option<serde_json::Value>, Vec<i64>);
    let cases: Vec<Case> = vec![
        (
            "no claims: every node scores 0",
            world(),
            pod("p").obj(),
            None,
            vec![0, 0, 0],
        ),
        (
            "local volumes with close capacity are preferred",
            world().pvcs(vec![claim("pvc-a", "wait", "50Gi")]).pvs(vec![
                local("pv-a-0", "200Gi", "node-a"),
                local("pv-a-1", "200Gi", "node-a"),
                local("pv-b-0", "100Gi", "node-b"),
                local("pv-b-1", "100Gi", "node-b"),
            ]),
            pod_with(&["pvc-a"]),
            None,
            vec![75, 50, 0],
        ),
        (
            "multiple claims: mean over classes",
            world()
                .pvcs(vec![
                    claim("pvc-0", "wait", "50Gi"),
                    claim("pvc-1", "wait-hdd", "100Gi"),
                ])
                .pvs(vec![
                    local("pv-a-0", "200Gi", "node-a"),
                    local("pv-a-2", "200Gi", "node-a").storage_class("wait-hdd"),
                    local("pv-b-0", "100Gi", "node-b"),
                    local("pv-b-2", "100Gi", "node-b").storage_class("wait-hdd"),
                ]),
            pod_with(&["pvc-0", "pvc-1"]),
            None,
            vec![63, 25, 0],
        ),
        (
            "storage capacity score",
            world()
                .pvcs(vec![claim("pvc-dynamic", "wait-cap", "10Gi")])
                .capacities(vec![
                    node_cap("node-a", "100Gi"),
                    node_cap("node-b", "50Gi"),
                    node_cap("node-c", "10Gi"),
                ]),
            pod_with(&["pvc-dynamic"]),
            None,
            vec![90, 80, 0],
        ),
        (
            "static bindings outweigh provisioning",
            world()
                .pvcs(vec![
                    claim("pvc-dynamic", "wait-cap", "10Gi"),
                    claim("pvc-static", "wait", "50Gi"),
                ])
                .pvs(vec![
                    local("pv-static-a", "100Gi", "node-a"),
                    local("pv-static-b", "100Gi", "node-b"),
                    local("pv-static-c", "100Gi", "node-c"),
                ])
                .capacities(vec![
                    node_cap("node-a", "100Gi"),
                    node_cap("node-b", "50Gi"),
                    node_cap("node-c", "10Gi"),
                ]),
            pod_with(&["pvc-dynamic", "pvc-static"]),
            None,
            vec![50, 50, 50],
        ),
        (
            "claims of one class share its capacity",
            world()
                .pvcs(vec![
                    claim("pvc-0", "wait-cap", "50Gi"),
                    claim("pvc-1", "wait-cap", "50Gi"),
                ])
                .capacities(vec![node_cap("node-a", "100Gi")]),
            pod_with(&["pvc-0", "pvc-1"]),
            None,
            vec![0, 0, 0],
        ),
        (
            "custom shape prefers the fullest node",
            world()
                .pvcs(vec![claim("pvc-dynamic", "wait-cap", "10Gi")])
                .capacities(vec![
                    node_cap("node-a", "100Gi"),
                    node_cap("node-b", "20Gi"),
                    node_cap("node-c", "10Gi"),
                ]),
            pod_with(&["pvc-dynamic"]),
            Some(json!({"bindTimeoutSeconds": 300, "shape": [
                {"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]})),
            vec![10, 50, 100],
        ),
        (
            "provisioning without capacity tracking scores 0",
            world().pvcs(vec![claim("pvc-a", "wait-prov", "10Gi")]),
            pod_with(&["pvc-a"]),
            None,
            vec![0, 0, 0],
        ),
    ];
    for (name, world, p, args, want) in cases {
        assert_eq!(scores(world, p, args), want, "{name}");
    }
}

#[test]
fn prescore_skips_without_storage_capacity_scoring() {
    let snapshot = world().pvcs(vec![claim("pvc-a", "wait", "1Gi")]).snapshot();
    let pl = VolumeBinding::from_args(None, snapshot.clone(), &scoring(false)).unwrap();
    let p = PodInfo::new(pod_with(&["pvc-a"]));
    let mut state = CycleState::new();
    pl.pre_filter(&mut state, &p, snapshot.nodes());
    assert!(pl.pre_score(&mut state, &p, snapshot.nodes()).is_skip());
    assert_eq!(pl.score(&state, &p, &snapshot.nodes()[0]).0, 0);

    // With scoring on, a missing state is an error.
    let on = plugin(&snapshot);
    let s = on.pre_score(&mut CycleState::new(), &p, snapshot.nodes());
    assert_eq!((s.code(), s.message()), (Code::Error, "not found".to_string()));
}

/// `StorageCapacityScoring` by release default: off up to v1.36 (VolumeBinding scores nothing,
/// PreScore Skips), on in v1.37 (local volumes with close capacity preferred).
#[test]
fn storage_capacity_scoring_follows_the_release_default() {
    use crate::features::KubeVersion;
    let world = || {
        world().pvcs(vec![claim("pvc-a", "wait", "50Gi")]).pvs(vec![
            local_pv("pv-a-0", "200Gi", "node-a"),
            local_pv("pv-b-0", "100Gi", "node-b"),
        ])
    };
    for (version, want) in [
        (KubeVersion::new(33, 13), None),
        (KubeVersion::new(36, 3), None),
        (KubeVersion::new(37, 1), Some(vec![75, 50, 0])),
    ] {
        let on = FeatureGates::for_version(version).storage_capacity_scoring;
        assert_eq!(
            scores_with(world(), pod_with(&["pvc-a"]), None, on),
            want,
            "{version}"
        );
    }
}

fn obj_ref(namespace: &str, name: &str, uid: &str) -> ObjectRef {
    ObjectRef::new(namespace, name).with_uid(uid)
}

/// Runs PreFilter, Filter on `node`, Reserve and PreBind.
fn bind_cycle(pl: &VolumeBinding, state: &mut CycleState, p: &PodInfo, node: &str) -> (Vec<Action>, Status) {
    let s = pl.pre_filter(state, p, &[]).1;
    assert!(s.is_success() || s.is_skip(), "{s:?}");
    if s.is_success() {
        let n = pl.snapshot.node(node).unwrap().clone();
        let s = pl.filter(state, p, &n);
        assert!(s.is_success(), "{s:?}");
    }
    let s = pl.reserve(state, p, node);
    assert!(s.is_success(), "{s:?}");
    pl.pre_bind(state, p, node)
}

#[test]
fn prebind_plans_pv_binding_and_provisioning() {
    let snapshot = world()
        .pvcs(vec![
            claim("pvc-static", "wait", "1Gi"),
            claim("pvc-dynamic", "wait-prov", "1Gi"),
            claim("pvc-bound", "immediate", "1Gi").bound("pv-bound"),
        ])
        .pvs(vec![
            local_pv("pv-a", "1Gi", "node-a"),
            pv("pv-bound").capacity("1Gi").phase("Bound"),
        ])
        .snapshot();
    let pl = plugin(&snapshot);
    let p = PodInfo::new(pod_with(&["pvc-static", "pvc-dynamic", "pvc-bound"]));
    let mut state = CycleState::new();
    let (actions, s) = bind_cycle(&pl, &mut state, &p, "node-a");
    assert!(s.is_success());
    assert_eq!(
        actions,
        vec![
            Action::BindPv {
                pv: obj_ref("", "pv-a", "uid-pv-a"),
                claim: obj_ref("default", "pvc-static", "uid-pvc-static"),
                resource_version: Some("10".into()),
            },
            Action::AnnotatePvc {
                pvc: obj_ref("default", "pvc-dynamic", "uid-pvc-dynamic"),
                key: ANN_SELECTED_NODE.into(),
                value: "node-a".into(),
                resource_version: Some("20".into()),
            },
        ]
    );

    // Reserve assumed both in memory: the PV is bound to the claim, the claim selected for the node.
    let assumed = state.read(&ASSUMED_STATE_KEY).unwrap();
    let pv_a = assumed.assumed_pv("pv-a").unwrap();
    let claim_ref = pv_a.spec.as_ref().unwrap().claim_ref.as_ref().unwrap();
    assert_eq!(claim_ref.name.as_deref(), Some("pvc-static"));
    assert_eq!(claim_ref.uid.as_deref(), Some("uid-pvc-static"));
    assert_eq!(claim_ref.kind.as_deref(), Some("PersistentVolumeClaim"));
    assert_eq!(
        pv_a.metadata
            .annotations
            .as_ref()
            .unwrap()
            .get(ANN_BOUND_BY_CONTROLLER)
            .map(String::as_str),
        Some("yes")
    );
    let dynamic = assumed.assumed_pvc("default/pvc-dynamic").unwrap();
    assert_eq!(selected_node(dynamic), Some("node-a"));

    // PreBind for a node that was not reserved is an error.
    let (actions, s) = pl.pre_bind(&state, &p, "node-b");
    assert!(actions.is_empty());
    assert_eq!(
        (s.code(), s.message()),
        (
            Code::Error,
            r#"no pod volume found for node "node-b""#.to_string()
        )
    );

    // Unreserve takes the assumptions back, twice without harm.
    pl.unreserve(&mut state, &p, "node-a");
    pl.unreserve(&mut state, &p, "node-a");
    assert!(state.read(&ASSUMED_STATE_KEY).unwrap().is_empty());
}

#[test]
fn all_bound_and_no_claims_plan_nothing() {
    let snapshot = world()
        .pvcs(vec![claim("pvc-a", "wait", "1Gi").bound("pv-a")])
        .pvs(vec![local_pv("pv-a", "1Gi", "node-a").phase("Bound")])
        .snapshot();
    let pl = plugin(&snapshot);
    for p in [pod_with(&["pvc-a"]), pod("p").obj()] {
        let p = PodInfo::new(p);
        let mut state = CycleState::new();
        let (actions, s) = bind_cycle(&pl, &mut state, &p, "node-a");
        assert!(s.is_success() && actions.is_empty(), "{s:?} {actions:?}");
        assert!(state.read(&STATE_KEY).unwrap().all_bound);
        assert!(
            state
                .read(&ASSUMED_STATE_KEY)
                .is_none_or(AssumedVolumes::is_empty)
        );
    }
}

#[test]
fn assumed_volumes_carry_over_to_the_next_pod() {
    let snapshot = world()
        .pvcs(vec![
            claim("pvc-1", "wait", "1Gi"),
            claim("pvc-2", "wait", "1Gi"),
            claim("shared", "wait-prov", "1Gi"),
        ])
        .pvs(vec![local_pv("pv-only", "1Gi", "node-a")])
        .snapshot();
    let pl = plugin(&snapshot);

    let first = PodInfo::new(pod("first").pvc("pvc-1").pvc("shared").obj());
    let mut state = CycleState::new();
    let (actions, s) = bind_cycle(&pl, &mut state, &first, "node-a");
    assert!(s.is_success());
    assert_eq!(actions.len(), 2);
    let assumed = state.read(&ASSUMED_STATE_KEY).unwrap().clone();

    // The next cycle starts from what the first assumed: pv-only is taken, and the shared claim is now
    // selected for node-a, so node-b no longer fits.
    let second = PodInfo::new(pod("second").pvc("pvc-2").pvc("shared").obj());
    let mut next = CycleState::new();
    next.write(&ASSUMED_STATE_KEY, assumed.clone());
    assert!(pl.pre_filter(&mut next, &second, &[]).1.is_success());
    let on_a = pl.filter(&next, &second, &snapshot.nodes()[0]);
    assert_eq!(on_a.reasons(), [ERR_REASON_BIND_CONFLICT.to_string()]);
    let on_b = pl.filter(&next, &second, &snapshot.nodes()[1]);
    assert_eq!(on_b.reasons(), [ERR_REASON_BIND_CONFLICT.to_string()]);

    // After the first pod's Unreserve, the PV is free again.
    pl.unreserve(&mut state, &first, "node-a");
    let mut again = CycleState::new();
    again.write(
        &ASSUMED_STATE_KEY,
        state.read(&ASSUMED_STATE_KEY).unwrap().clone(),
    );
    assert!(pl.pre_filter(&mut again, &second, &[]).1.is_success());
    assert!(pl.filter(&again, &second, &snapshot.nodes()[0]).is_success());
}

#[test]
fn prebind_actions_is_callable_without_a_framework() {
    let snapshot = world()
        .pvcs(vec![
            claim("pvc-a", "wait", "1Gi"),
            claim("pvc-b", "wait-cap", "1Gi"),
        ])
        .pvs(vec![local_pv("pv-a", "1Gi", "node-b")])
        .capacities(vec![csi_storage_capacity(
            "c",
            "wait-cap",
            Some("1Gi"),
            None,
            Some(&[]),
        )])
        .snapshot();
    let p = pod_with(&["pvc-a", "pvc-b"]);
    let on_b = find_pod_volumes(&snapshot, &p, &node_of(&snapshot, "node-b")).unwrap();
    assert!(on_b.fits());
    let actions = prebind_actions(&on_b, "node-b");
    let described: Vec<String> = actions.iter().map(Action::describe).collect();
    assert_eq!(
        described,
        [
            "bind persistentvolume pv-a to claim default/pvc-a",
            "annotate persistentvolumeclaim default/pvc-b volume.kubernetes.io/selected-node=node-b",
        ]
    );
    let on_a = find_pod_volumes(&snapshot, &p, &node_of(&snapshot, "node-a")).unwrap();
    assert_eq!(on_a.status().code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(on_a.conflicts[0].claim, "default/pvc-a");
}

#[test]
fn bind_volume_to_claim_marks_controller_bindings_only() {
    let c = claim("pvc-a", "wait", "1Gi").obj();
    // Unbound PV: claimRef set and marked as the controller's.
    let update = bind_volume_to_claim(&local_pv("pv", "1Gi", "node-a").obj(), &c);
    assert!(update.dirty && update.set_bound_by_controller);
    // Pre-bound by name only: the uid is filled in, the binding stays the user's.
    let update = bind_volume_to_claim(
        &local_pv("pv", "1Gi", "node-a")
            .claim_ref("default", "pvc-a", "")
            .obj(),
        &c,
    );
    assert!(update.dirty && !update.set_bound_by_controller);
    let r = update.volume.spec.unwrap().claim_ref.unwrap();
    assert_eq!(
        (r.uid.as_deref(), r.resource_version.as_deref()),
        (Some("uid-pvc-a"), Some("20"))
    );
    assert!(update.volume.metadata.annotations.is_none());
    // Already bound exactly: nothing to write.
    let update = bind_volume_to_claim(
        &local_pv("pv", "1Gi", "node-a")
            .claim_ref("default", "pvc-a", "uid-pvc-a")
            .annotation(ANN_BOUND_BY_CONTROLLER, "yes")
            .obj(),
        &c,
    );
    assert!(!update.dirty);
}

#[test]
fn args_are_defaulted_and_validated() {
    let snapshot = Arc::new(Snapshot::default());
    let pl = VolumeBinding::from_args(None, snapshot.clone(), &scoring(true)).unwrap();
    assert_eq!(pl.bind_timeout_seconds, DEFAULT_BIND_TIMEOUT_SECONDS);
    let pl = VolumeBinding::from_args(
        Some(&json!({"bindTimeoutSeconds": 0})),
        snapshot.clone(),
        &scoring(true),
    )
    .unwrap();
    assert_eq!(pl.bind_timeout_seconds, 0);

    let cases: Vec<(serde_json::Value, bool, &str)> = vec![
        (
            json!({"bindTimeoutSeconds": -1}),
            true,
            "bindTimeoutSeconds: Invalid value: -1: invalid BindTimeoutSeconds, should not be a negative value",
        ),
        (
            json!({"shape": [{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}]}),
            true,
            "shape[1].utilization: Invalid value: 50: values must be sorted in increasing order",
        ),
        (
            json!({"shape": [{"utilization": -1, "score": 11}]}),
            true,
            "[shape[0].utilization: Invalid value: -1: not in valid range [0, 100], shape[0].score: Invalid value: 11: not in valid range [0, 10]]",
        ),
        (
            json!({"shape": [{"utilization": 0, "score": 1}]}),
            false,
            "shape: Invalid value: [{\"utilization\":0,\"score\":1}]: unexpected field `shape`, remove it or turn on the feature gate StorageCapacityScoring",
        ),
    ];
    for (args, gate, want) in cases {
        match VolumeBinding::from_args(Some(&args), snapshot.clone(), &scoring(gate)) {
            Err(PluginError::InvalidArgs { plugin, message }) => {
                assert_eq!(plugin, NAME);
                assert_eq!(message, want);
            }
            Ok(_) => panic!("{args} accepted"),
        }
    }
}

#[test]
fn check_node_affinity_and_binding_mode_helpers() {
    let labels = crate::labels::Labels::from([(ZONE.to_string(), "z1".to_string())]);
    assert!(check_node_affinity(&pv("x").volume(), &labels).is_ok());
    assert!(check_node_affinity(&pv("x").node_affinity(ZONE, &["z1", "z2"]).volume(), &labels).is_ok());
    assert_eq!(
        check_node_affinity(&pv("x").node_affinity(ZONE, &["z2"]).volume(), &labels),
        Err("no matching NodeSelectorTerms".to_string())
    );
    // Required with no terms matches no node.
    let empty = pv("x").with(|p| {
        p.spec.get_or_insert_with(Default::default).node_affinity =
            Some(k8s_openapi::api::core::v1::VolumeNodeAffinity {
                required: Some(Default::default()),
            });
    });
    assert!(check_node_affinity(&empty.volume(), &labels).is_err());

    let classes = Snapshot::new(ClusterObjects {
        storage_classes: classes(),
        ..Default::default()
    })
    .storage_classes;
    assert_eq!(
        is_delay_binding_mode(&claim("c", "wait", "1Gi").obj(), &classes),
        Ok(true)
    );
    assert_eq!(
        is_delay_binding_mode(&claim("c", "immediate", "1Gi").obj(), &classes),
        Ok(false)
    );
    assert_eq!(
        is_delay_binding_mode(&claim("c", "missing", "1Gi").obj(), &classes),
        Ok(false)
    );
    // The beta annotation wins over storageClassName.
    let beta = claim("c", "immediate", "1Gi")
        .annotation(BETA_STORAGE_CLASS_ANNOTATION, "wait")
        .obj();
    assert_eq!(is_delay_binding_mode(&beta, &classes), Ok(true));
}
