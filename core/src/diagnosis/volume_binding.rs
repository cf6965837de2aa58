//! VolumeBinding explained, per claim of the pod that the node cannot serve: a bound claim whose
//! PersistentVolume is missing or out of the node's reach, or an unbound (WaitForFirstConsumer)
//! claim with the PVs of its class and why each is refused — bound to another claim, too small,
//! another access or volume mode, out of the node's reach — and what dynamic provisioning says
//! (the class cannot provision, the node is outside its allowedTopologies, no capacity has room).
//! Each reason is the plugin's own check (`FindMatchingVolume`'s, in its order); no change is
//! proposed: a volume is provisioned by its owner, not by a hint.

use super::finding::{Context, Detail, Explained, PvRefusal, ReasonCode};
use crate::NodeInfo;
use crate::labels::Labels;
use crate::plugins::volume_binding::binder::find_pod_volumes;
use crate::plugins::volume_binding::pv_helpers::{CandidateVolume, ClaimWants, claim_class, volume_class};
use crate::plugins::volume_binding::{
    ERR_REASON_BIND_CONFLICT, ERR_REASON_NODE_CONFLICT, ERR_REASON_NOT_ENOUGH_SPACE, ERR_REASON_PV_NOT_EXIST,
};

pub(crate) fn explain(ctx: &Context<'_>, node: &NodeInfo) -> Vec<Explained> {
    let Ok(volumes) = find_pod_volumes(ctx.snapshot, &ctx.pod.pod, &node.node) else {
        return Vec::new();
    };
    let node_labels = node.labels();
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
                changes: Vec::new(),
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
