//! VolumeRestrictions explained: the pod on the node that mounts the same disk (GCE PD, EBS, RBD,
//! iSCSI) in a way that conflicts, or the pod anywhere that uses the pod's ReadWriteOncePod claim.
//! Deleting (or moving) that pod is the change, checked like every other.

use super::change::Change;
use super::finding::{Context, Detail, Explained, ReasonCode};
use crate::NodeInfo;
use crate::plugins::volume_restrictions::{PRE_FILTER_STATE_KEY, disk_conflicts};

pub(crate) fn explain(ctx: &Context<'_>, node: &NodeInfo) -> Vec<Explained> {
    let mut holders: Vec<String> = Vec::new();
    let mut volumes: Vec<String> = Vec::new();
    for (volume, holder) in disk_conflicts(&ctx.pod.pod, node) {
        if !volumes.contains(&volume.name) {
            volumes.push(volume.name.clone());
        }
        if !holders.contains(&holder.key()) {
            holders.push(holder.key());
        }
    }
    if !holders.is_empty() {
        return vec![Explained {
            reason: ReasonCode::DiskInUse,
            message: format!(
                "volume {} is mounted by pod {} on the node",
                volumes.join(", "),
                holders.join(", ")
            ),
            detail: Detail::VolumeHolders {
                volumes,
                holders: holders.clone(),
            },
            changes: vec![Change::DeletePods { pods: holders }],
        }];
    }
    let Some(state) = ctx.state.read(&PRE_FILTER_STATE_KEY) else {
        return Vec::new();
    };
    if state.conflicting_pvc_ref_count == 0 {
        return Vec::new();
    }
    // A ReadWriteOncePod claim is held by whichever pod on any node uses it.
    let namespace = ctx.pod.namespace();
    let mut claims: Vec<String> = Vec::new();
    for other in ctx.snapshot.nodes().iter().flat_map(|n| n.pods.iter()) {
        if other.namespace() != namespace || other.key() == ctx.pod.key() {
            continue;
        }
        let used: Vec<&String> = other
            .pod
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .filter_map(|v| v.persistent_volume_claim.as_ref())
            .map(|c| &c.claim_name)
            .filter(|name| state.read_write_once_pod_pvcs.contains(*name))
            .collect();
        if used.is_empty() {
            continue;
        }
        for claim in used {
            let key = format!("{namespace}/{claim}");
            if !claims.contains(&key) {
                claims.push(key);
            }
        }
        if !holders.contains(&other.key()) {
            holders.push(other.key());
        }
    }
    if holders.is_empty() {
        return Vec::new();
    }
    vec![Explained {
        reason: ReasonCode::ReadWriteOncePodInUse,
        message: format!(
            "persistentvolumeclaim {} is ReadWriteOncePod and in use by pod {}",
            claims.join(", "),
            holders.join(", ")
        ),
        detail: Detail::VolumeHolders {
            volumes: claims,
            holders: holders.clone(),
        },
        changes: vec![Change::DeletePods { pods: holders }],
    }]
}
