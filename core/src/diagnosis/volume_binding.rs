//! VolumeBinding explained, per claim of the pod that the node cannot serve: a bound claim whose
//! PersistentVolume is missing or out of the node's reach, or an unbound (WaitForFirstConsumer)
//! claim with the PVs of its class and why each is refused — bound to another claim, too small,
//! another access or volume mode, out of the node's reach — and what dynamic provisioning says
//! (the class cannot provision, the node is outside its allowedTopologies, no capacity has room).
//! Each reason is the plugin's own check (`FindMatchingVolume`'s, in its order).
//!
//! For an unbound claim no volume can serve on the node (and none is being provisioned for another
//! node), the change proposed is the volume that would: a local PersistentVolume on this node that
//! `FindMatchingVolume` accepts ([`volume_for`]); checked like every hint, so it is offered only on
//! a node that passes every other filter. Its path is a placeholder the user fills in. A bound
//! claim's volume cannot be moved, and a provisioner's capacity is the storage's: nothing is
//! proposed for those.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    LocalVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PersistentVolume,
    PersistentVolumeClaim, PersistentVolumeSpec, VolumeNodeAffinity,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::change::Change;
use super::finding::{Context, Detail, Explained, PvRefusal, ReasonCode};
use crate::NodeInfo;
use crate::labels::Labels;
use crate::plugins::volume_binding::binder::find_pod_volumes;
use crate::plugins::volume_binding::pv_helpers::{
    CandidateVolume, ClaimWants, RESOURCE_STORAGE, claim_class, claim_volume_name, selected_node,
    volume_class,
};
use crate::plugins::volume_binding::{
    ERR_REASON_BIND_CONFLICT, ERR_REASON_NODE_CONFLICT, ERR_REASON_NOT_ENOUGH_SPACE, ERR_REASON_PV_NOT_EXIST,
};

pub(crate) fn explain(ctx: &Context<'_>, node: &NodeInfo) -> Vec<Explained> {
    let Ok(volumes) = find_pod_volumes(ctx.snapshot, &ctx.pod.pod, &node.node) else {
        return Vec::new();
    };
    let node_labels = node.labels();
    let change = new_volumes_change(ctx, &volumes.conflicts, node);
    volumes
        .conflicts
        .iter()
        .map(|conflict| {
            let reason = match conflict.reason {
                ERR_REASON_NODE_CONFLICT => ReasonCode::BoundVolumeNodeAffinity,
                ERR_REASON_PV_NOT_EXIST => ReasonCode::BoundVolumeMissing,
                ERR_REASON_NOT_ENOUGH_SPACE => ReasonCode::InsufficientStorageCapacity,
                _ => ReasonCode::NoVolumeForClaim,
            };
            let refusals = if conflict.reason == ERR_REASON_BIND_CONFLICT {
                candidate_refusals(ctx, &conflict.claim, node_labels)
            } else {
                Vec::new()
            };
            let mut message = format!("persistentvolumeclaim {}: {}", conflict.claim, conflict.message);
            if !refusals.is_empty() {
                let listed: Vec<String> = refusals
                    .iter()
                    .map(|r| format!("{} ({})", r.volume, r.reason))
                    .collect();
                message.push_str(&format!("; the class's persistentvolumes: {}", listed.join(", ")));
            }
            Explained {
                reason,
                message,
                detail: Detail::Volumes {
                    claim: conflict.claim.clone(),
                    volumes: refusals,
                },
                changes: change.clone().into_iter().collect(),
            }
        })
        .collect()
}

/// Every PV of the claim's storage class (and one pre-bound to it) with why it cannot serve the
/// claim on this node, by name.
fn candidate_refusals(ctx: &Context<'_>, claim_key: &str, node_labels: &Labels) -> Vec<PvRefusal> {
    let Some((namespace, name)) = claim_key.split_once('/') else {
        return Vec::new();
    };
    let Some(claim) = ctx.snapshot.pvc(namespace, name) else {
        return Vec::new();
    };
    let Ok(wants) = ClaimWants::of(claim) else {
        return Vec::new();
    };
    let class = claim_class(claim);
    let mut refusals: Vec<PvRefusal> = ctx
        .snapshot
        .persistent_volumes
        .values()
        .filter(|pv| volume_class(pv) == class)
        .filter_map(|pv| {
            let candidate = CandidateVolume::new(pv.clone());
            let reason = wants.mismatch(&candidate, node_labels)?;
            Some(PvRefusal {
                volume: pv.metadata.name.clone().unwrap_or_default(),
                reason: reason.to_string(),
            })
        })
        .collect();
    refusals.sort_by(|a, b| a.volume.cmp(&b.volume));
    refusals
}

/// What the proposed local volume's `spec.local.path` says until the user sets it to a directory (or
/// a mounted disk) of the node.
pub const LOCAL_PATH_PLACEHOLDER: &str = "/REPLACE/WITH/A/DIRECTORY/OF/THE/NODE";
/// The label the proposed volume's node affinity names its node by: VolumeBinding matches a PV's
/// node affinity against the node's labels only (never `metadata.name`).
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// A manually made volume keeps its data when its claim goes (as the local static provisioner's do).
const RECLAIM_RETAIN: &str = "Retain";
/// The longest object name the API server accepts (a DNS subdomain).
const MAX_NAME: usize = 253;

/// The change that creates a volume on `node` for each claim no volume serves there (one volume,
/// or all of them together); None when a claim cannot have one (see [`volume_for`]).
fn new_volumes_change(
    ctx: &Context<'_>,
    conflicts: &[crate::plugins::volume_binding::binder::ClaimConflict],
    node: &NodeInfo,
) -> Option<Change> {
    use crate::plugins::volume_binding::ERR_REASON_BIND_CONFLICT;
    let mut changes = Vec::new();
    for conflict in conflicts.iter().filter(|c| c.reason == ERR_REASON_BIND_CONFLICT) {
        let (namespace, name) = conflict.claim.split_once('/')?;
        let claim = ctx.snapshot.pvc(namespace, name)?;
        let volume = volume_for(ctx, claim, node)?;
        changes.push(Change::CreatePersistentVolume {
            claim: conflict.claim.clone(),
            node: node.name().to_string(),
            volume: Box::new(volume),
        });
    }
    match changes.len() {
        0 => None,
        1 => changes.pop(),
        _ => Some(Change::All { changes }),
    }
}

/// A local PersistentVolume that `FindMatchingVolume` would match to `claim` on `node`: the claim's
/// class, its request as capacity, its access modes, volume mode and attributes class, labels its
/// selector selects, and a node affinity to the node's hostname label. None for a claim that is
/// being provisioned for a node (the selected-node annotation) or waits for a named volume, that
/// requests no storage, or a node without a hostname label.
fn volume_for(ctx: &Context<'_>, claim: &PersistentVolumeClaim, node: &NodeInfo) -> Option<PersistentVolume> {
    if selected_node(claim).is_some() || !claim_volume_name(claim).is_empty() {
        return None;
    }
    let spec = claim.spec.as_ref()?;
    let request = spec
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get(RESOURCE_STORAGE)?
        .clone();
    let hostname = node.labels().get(HOSTNAME_LABEL)?.clone();
    let access_modes = spec
        .access_modes
        .clone()
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| vec!["ReadWriteOnce".to_string()]);
    Some(PersistentVolume {
        metadata: ObjectMeta {
            name: Some(free_name(ctx, claim)),
            labels: selected_labels(claim),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            access_modes: Some(access_modes),
            capacity: Some(BTreeMap::from([(RESOURCE_STORAGE.to_string(), request)])),
            storage_class_name: Some(claim_class(claim).to_string()),
            volume_mode: spec.volume_mode.clone(),
            volume_attributes_class_name: spec.volume_attributes_class_name.clone(),
            persistent_volume_reclaim_policy: Some(RECLAIM_RETAIN.to_string()),
            local: Some(LocalVolumeSource {
                path: LOCAL_PATH_PLACEHOLDER.to_string(),
                fs_type: None,
            }),
            node_affinity: Some(VolumeNodeAffinity {
                required: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_expressions: Some(vec![NodeSelectorRequirement {
                            key: HOSTNAME_LABEL.to_string(),
                            operator: "In".to_string(),
                            values: Some(vec![hostname]),
                        }]),
                        match_fields: None,
                    }],
                }),
            }),
            ..Default::default()
        }),
        status: None,
    })
}

/// `<namespace>-<claim>`, with `-2`, `-3`… when a volume of that name exists.
fn free_name(ctx: &Context<'_>, claim: &PersistentVolumeClaim) -> String {
    let mut base = format!(
        "{}-{}",
        claim.metadata.namespace.as_deref().unwrap_or("default"),
        claim.metadata.name.as_deref().unwrap_or("claim")
    );
    base.truncate(MAX_NAME - 4);
    let base = base.trim_end_matches(['-', '.']).to_string();
    let taken = |name: &str| ctx.snapshot.persistent_volumes.contains_key(name);
    if !taken(&base) {
        return base;
    }
    (2..)
        .map(|i| format!("{base}-{i}"))
        .find(|name| !taken(name))
        .unwrap_or(base)
}

/// Labels the claim's selector selects: its `matchLabels`, and for each `In` (`Exists`) expression
/// the first value (an empty one). None without a selector.
fn selected_labels(claim: &PersistentVolumeClaim) -> Option<BTreeMap<String, String>> {
    let selector = claim.spec.as_ref()?.selector.as_ref()?;
    let mut labels = selector.match_labels.clone().unwrap_or_default();
    for e in selector.match_expressions.iter().flatten() {
        let value = match e.operator.as_str() {
            "In" => e.values.as_ref().and_then(|v| v.first()).cloned(),
            "Exists" => Some(String::new()),
            _ => None,
        };
        if let Some(value) = value {
            labels.entry(e.key.clone()).or_insert(value);
        }
    }
    (!labels.is_empty()).then_some(labels)
}
