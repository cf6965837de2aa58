//! VolumeZone: a pod whose claims are bound to PersistentVolumes labelled with a zone or region may only
//! run on nodes in one of those zones/regions (nodes without any topology label accept everything).

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::snapshot::volume::PersistentVolume;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;

use crate::framework::FeatureGates;
use crate::framework::cycle_state::{CycleState, StateKey};
use crate::framework::interface::{FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult};
use crate::framework::runtime::{Handle, PluginError};
use crate::framework::status::Status;
use crate::plugins::names;
use crate::snapshot::{NodeInfo, PodInfo, Snapshot};

/// The plugin's name.
pub(crate) const NAME: &str = names::VOLUME_ZONE;

/// The node is outside the zones/regions of the pod's volumes.
pub(crate) const ERR_REASON_CONFLICT: &str = "node(s) had no available volume zone";

/// `failure-domain.beta.kubernetes.io/zone`.
pub(crate) const LABEL_FAILURE_DOMAIN_BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
/// `failure-domain.beta.kubernetes.io/region`.
pub(crate) const LABEL_FAILURE_DOMAIN_BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";
/// `topology.kubernetes.io/zone`.
pub(crate) const LABEL_TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";
/// `topology.kubernetes.io/region`.
pub(crate) const LABEL_TOPOLOGY_REGION: &str = "topology.kubernetes.io/region";

/// The topology labels checked, in upstream's order.
const TOPOLOGY_LABELS: [&str; 4] = [
    LABEL_FAILURE_DOMAIN_BETA_ZONE,
    LABEL_FAILURE_DOMAIN_BETA_REGION,
    LABEL_TOPOLOGY_ZONE,
    LABEL_TOPOLOGY_REGION,
];

/// A multi-zone PV label value separates zones with this (cloud-provider's `LabelMultiZoneDelimiter`).
const MULTI_ZONE_DELIMITER: &str = "__";

/// The old annotation that names a claim's class, read before `spec.storageClassName`.
const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

const WAIT_FOR_FIRST_CONSUMER: &str = "WaitForFirstConsumer";

/// One topology label of a bound PV: the key and the zones/regions it allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PvTopology {
    /// The PV.
    pub pv_name: String,
    /// The label key.
    pub key: String,
    /// The allowed values.
    pub values: BTreeSet<String>,
}

/// The pod's PV topologies, computed once per cycle.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PreFilterState {
    /// One entry per topology label of every bound PV of the pod.
    pub pod_pv_topologies: Arc<Vec<PvTopology>>,
}

/// PreFilter state key.
pub(crate) const PRE_FILTER_STATE_KEY: StateKey<PreFilterState> = StateKey::new("PreFilterVolumeZone");

/// The VolumeZone plugin.
#[derive(Debug)]
pub(crate) struct VolumeZone {
    snapshot: Arc<Snapshot>,
}

/// Builds the plugin (it takes no args).
pub(crate) fn new(
    _args: Option<&serde_json::Value>,
    handle: &Handle,
    _features: &FeatureGates,
) -> Result<Arc<dyn Plugin>, PluginError> {
    Ok(Arc::new(VolumeZone {
        snapshot: handle.snapshot.clone(),
    }))
}

/// The beta GA-equivalent of a label (nodes may carry only the GA label).
fn translate_to_ga_label(label: &str) -> &str {
    match label {
        LABEL_FAILURE_DOMAIN_BETA_REGION => LABEL_TOPOLOGY_REGION,
        LABEL_FAILURE_DOMAIN_BETA_ZONE => LABEL_TOPOLOGY_ZONE,
        other => other,
    }
}

/// cloud-provider's `LabelZonesToSet`: `a__b` → {a, b}; an empty element makes the value invalid.
fn label_zones_to_set(value: &str) -> Option<BTreeSet<String>> {
    value
        .split(MULTI_ZONE_DELIMITER)
        .map(|z| {
            let z = z.trim();
            (!z.is_empty()).then(|| z.to_string())
        })
        .collect()
}

/// The topology labels of a PV; malformed values are ignored, as upstream does.
fn pv_topologies(pv: &PersistentVolume) -> Vec<PvTopology> {
    let Some(labels) = pv.metadata.labels.as_ref() else {
        return Vec::new();
    };
    TOPOLOGY_LABELS
        .iter()
        .filter_map(|key| {
            let values = label_zones_to_set(labels.get(*key)?)?;
            Some(PvTopology {
                pv_name: pv.metadata.name.clone().unwrap_or_default(),
                key: key.to_string(),
                values,
            })
        })
        .collect()
}

/// component-helpers' `GetPersistentVolumeClaimClass`.
pub(crate) fn pvc_class(pvc: &PersistentVolumeClaim) -> &str {
    if let Some(class) = pvc
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION))
    {
        return class;
    }
    pvc.spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or("")
}

impl VolumeZone {
    /// Go's `getPVbyPod`: the topologies of the PVs the pod's claims are bound to. Unbound claims of a
    /// WaitForFirstConsumer class are skipped; any other problem rejects the pod everywhere.
    fn pod_pv_topologies(&self, pod: &PodInfo) -> Result<Vec<PvTopology>, Status> {
        let mut out = Vec::new();
        let claims = pod
            .pod
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .filter_map(|v| v.persistent_volume_claim.as_ref());
        for claim in claims {
            let name = &claim.claim_name;
            if name.is_empty() {
                return Err(Status::unresolvable("PersistentVolumeClaim had no name"));
            }
            let Some(pvc) = self.snapshot.pvc(pod.namespace(), name) else {
                return Err(Status::unresolvable(format!(
                    "persistentvolumeclaim {name:?} not found"
                )));
            };
            let pv_name = pvc
                .spec
                .as_ref()
                .and_then(|s| s.volume_name.as_deref())
                .unwrap_or("");
            if pv_name.is_empty() {
                let class_name = pvc_class(pvc);
                if class_name.is_empty() {
                    return Err(Status::unresolvable(
                        "PersistentVolumeClaim had no pv name and storageClass name",
                    ));
                }
                let Some(class) = self.snapshot.storage_classes.get(class_name) else {
                    return Err(Status::unresolvable(format!(
                        "storageclass.storage.k8s.io {class_name:?} not found"
                    )));
                };
                match class.volume_binding_mode.as_deref() {
                    None => {
                        return Err(Status::unresolvable(format!(
                            "VolumeBindingMode not set for StorageClass {class_name:?}"
                        )));
                    }
                    Some(WAIT_FOR_FIRST_CONSUMER) => continue,
                    Some(_) => return Err(Status::unresolvable("PersistentVolume had no name")),
                }
            }
            let Some(pv) = self.snapshot.persistent_volumes.get(pv_name) else {
                return Err(Status::unresolvable(format!(
                    "persistentvolume {pv_name:?} not found"
                )));
            };
            out.extend(pv_topologies(pv));
        }
        Ok(out)
    }
}

impl Plugin for VolumeZone {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for VolumeZone {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        let topologies = match self.pod_pv_topologies(pod) {
            Ok(t) => t,
            Err(status) => return (None, status),
        };
        if topologies.is_empty() {
            return (None, Status::skip());
        }
        state.write(
            &PRE_FILTER_STATE_KEY,
            PreFilterState {
                pod_pv_topologies: Arc::new(topologies),
            },
        );
        (None, Status::success())
    }
}

impl FilterPlugin for VolumeZone {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let has_volumes = pod
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .is_some_and(|v| !v.is_empty());
        if !has_volumes {
            return Status::success();
        }
        let computed;
        let topologies: &[PvTopology] = match state.read(&PRE_FILTER_STATE_KEY) {
            Some(s) => &s.pod_pv_topologies,
            None => {
                computed = match self.pod_pv_topologies(pod) {
                    Ok(t) => t,
                    Err(status) => return status,
                };
                &computed
            }
        };
        match zone_conflict(topologies, node.labels()) {
            Some(_) => Status::unresolvable(ERR_REASON_CONFLICT),
            None => Status::success(),
        }
    }
}

/// The first topology label of the pod's PVs the node's labels do not satisfy, with the node's value
/// for it (`None` when the node lacks the label); `None` when every one is satisfied, or when the node
/// has no topology label at all (taken to be in the cluster's only zone).
pub(crate) fn zone_conflict<'t>(
    topologies: &'t [PvTopology],
    labels: &crate::labels::Labels,
) -> Option<(&'t PvTopology, Option<String>)> {
    if !TOPOLOGY_LABELS.iter().any(|l| labels.contains_key(*l)) {
        return None;
    }
    topologies.iter().find_map(|t| {
        let value = labels
            .get(&t.key)
            .or_else(|| labels.get(translate_to_ga_label(&t.key)));
        (!value.is_some_and(|v| t.values.contains(v))).then(|| (t, value.cloned()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::status::Code;
    use crate::snapshot::ClusterObjects;
    use crate::testing::{node, pod, pv, pvc, snapshot_of, storage_class};

    fn objects() -> ClusterObjects {
        ClusterObjects {
            nodes: vec![
                node("a1")
                    .label(LABEL_TOPOLOGY_ZONE, "zone-a")
                    .label(LABEL_TOPOLOGY_REGION, "r1")
                    .obj(),
                node("b1")
                    .label(LABEL_TOPOLOGY_ZONE, "zone-b")
                    .label(LABEL_TOPOLOGY_REGION, "r1")
                    .obj(),
                node("beta-a")
                    .label(LABEL_FAILURE_DOMAIN_BETA_ZONE, "zone-a")
                    .obj(),
                node("plain").obj(),
            ],
            persistent_volumes: vec![
                pv("pv-a").label(LABEL_TOPOLOGY_ZONE, "zone-a").obj(),
                pv("pv-beta-a")
                    .label(LABEL_FAILURE_DOMAIN_BETA_ZONE, "zone-a")
                    .obj(),
                pv("pv-ab").label(LABEL_TOPOLOGY_ZONE, "zone-a__zone-b").obj(),
                pv("pv-r2").label(LABEL_TOPOLOGY_REGION, "r2").obj(),
                pv("pv-bad").label(LABEL_TOPOLOGY_ZONE, "zone-a__").obj(),
                pv("pv-none").obj(),
            ],
            persistent_volume_claims: vec![
                pvc("c-a").volume_name("pv-a").obj(),
                pvc("c-beta-a").volume_name("pv-beta-a").obj(),
                pvc("c-ab").volume_name("pv-ab").obj(),
                pvc("c-r2").volume_name("pv-r2").obj(),
                pvc("c-bad").volume_name("pv-bad").obj(),
                pvc("c-none").volume_name("pv-none").obj(),
                pvc("c-missing-pv").volume_name("gone").obj(),
                pvc("c-wffc").storage_class("wffc").obj(),
                pvc("c-immediate").storage_class("immediate").obj(),
                pvc("c-unset-mode").storage_class("unset").obj(),
                pvc("c-no-class-obj").storage_class("nope").obj(),
                pvc("c-no-class").obj(),
            ],
            storage_classes: vec![
                storage_class("wffc", "csi.example.com", "WaitForFirstConsumer"),
                storage_class("immediate", "csi.example.com", "Immediate"),
                storage_class("unset", "csi.example.com", ""),
            ],
            ..Default::default()
        }
    }

    fn plugin_and_snapshot() -> (Arc<dyn Plugin>, Arc<Snapshot>) {
        let snapshot = Arc::new(snapshot_of(objects()));
        (
            new(
                None,
                &Handle {
                    snapshot: snapshot.clone(),
                },
                &crate::framework::FeatureGates::default(),
            )
            .unwrap(),
            snapshot,
        )
    }

    #[test]
    fn filter_by_zone() {
        let (p, snap) = plugin_and_snapshot();
        for (claim, want_fit) in [
            // A GA-labelled PV does not match a node with only the beta label.
            ("c-a", ["a1", "plain"].as_slice()),
            // A beta-labelled PV matches nodes with only the GA label.
            ("c-beta-a", &["a1", "beta-a", "plain"]),
            ("c-ab", &["a1", "b1", "plain"]),
            // beta-a has a zone label, so it is constrained, but no region: not in r2.
            ("c-r2", &["plain"]),
        ] {
            let pi = pod("p").pvc(claim).info();
            let mut state = CycleState::new();
            let (_, s) = p
                .as_pre_filter()
                .unwrap()
                .pre_filter(&mut state, &pi, snap.nodes());
            assert!(s.is_success(), "{claim}: {s:?}");
            for n in snap.nodes() {
                let s = p.as_filter().unwrap().filter(&state, &pi, n);
                let fits = want_fit.contains(&n.name());
                assert_eq!(s.is_success(), fits, "{claim} on {}", n.name());
                if !fits {
                    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
                    assert_eq!(s.reasons(), [ERR_REASON_CONFLICT]);
                }
            }
        }
    }

    #[test]
    fn prefilter_outcomes() {
        let (p, snap) = plugin_and_snapshot();
        for (claim, code, reason) in [
            ("c-none", Code::Skip, ""),
            ("c-bad", Code::Skip, ""),
            ("c-wffc", Code::Skip, ""),
            (
                "",
                Code::UnschedulableAndUnresolvable,
                "PersistentVolumeClaim had no name",
            ),
            (
                "missing",
                Code::UnschedulableAndUnresolvable,
                "persistentvolumeclaim \"missing\" not found",
            ),
            (
                "c-missing-pv",
                Code::UnschedulableAndUnresolvable,
                "persistentvolume \"gone\" not found",
            ),
            (
                "c-immediate",
                Code::UnschedulableAndUnresolvable,
                "PersistentVolume had no name",
            ),
            (
                "c-unset-mode",
                Code::UnschedulableAndUnresolvable,
                "VolumeBindingMode not set for StorageClass \"unset\"",
            ),
            (
                "c-no-class-obj",
                Code::UnschedulableAndUnresolvable,
                "storageclass.storage.k8s.io \"nope\" not found",
            ),
            (
                "c-no-class",
                Code::UnschedulableAndUnresolvable,
                "PersistentVolumeClaim had no pv name and storageClass name",
            ),
        ] {
            let mut state = CycleState::new();
            let (_, s) =
                p.as_pre_filter()
                    .unwrap()
                    .pre_filter(&mut state, &pod("p").pvc(claim).info(), snap.nodes());
            assert_eq!(s.code(), code, "{claim:?}");
            assert_eq!(s.message(), reason, "{claim:?}");
        }
    }

    #[test]
    fn beta_class_annotation_wins() {
        let c = pvc("c")
            .storage_class("immediate")
            .with(|c| {
                c.metadata.annotations =
                    Some([(BETA_STORAGE_CLASS_ANNOTATION.to_string(), "wffc".to_string())].into());
            })
            .obj();
        assert_eq!(pvc_class(&c), "wffc");
    }

    #[test]
    fn filter_without_prefilter_computes_topologies() {
        let (p, snap) = plugin_and_snapshot();
        let pi = pod("p").pvc("c-a").info();
        let state = CycleState::new();
        assert!(
            p.as_filter()
                .unwrap()
                .filter(&state, &pi, snap.node("a1").unwrap())
                .is_success()
        );
        assert_eq!(
            p.as_filter()
                .unwrap()
                .filter(&state, &pi, snap.node("b1").unwrap())
                .reasons(),
            [ERR_REASON_CONFLICT]
        );
        let missing = pod("p").pvc("missing").info();
        assert_eq!(
            p.as_filter()
                .unwrap()
                .filter(&state, &missing, snap.node("a1").unwrap())
                .code(),
            Code::UnschedulableAndUnresolvable
        );
        // No volumes: nothing to check.
        assert!(
            p.as_filter()
                .unwrap()
                .filter(&state, &pod("p").info(), snap.node("a1").unwrap())
                .is_success()
        );
    }

    #[test]
    fn multi_zone_label_parsing() {
        assert_eq!(
            label_zones_to_set(" a __b"),
            Some(["a".to_string(), "b".to_string()].into())
        );
        assert_eq!(label_zones_to_set("a____b"), None);
        assert_eq!(label_zones_to_set(""), None);
    }
}
