//! kube-scheduler's queueing hints for the events a batch causes: which plugins register for each
//! event (their `EventsToRegister`) and what each plugin's `QueueingHintFn` answers for a pod it
//! rejected (v1.37.1, `pkg/scheduler/framework/plugins/*/`).
//!
//! A batch changes the cluster in three ways only: a pod is bound (AssignedPod/Add, plus the
//! PersistentVolume and PersistentVolumeClaim updates of its volume binding), and a preemption
//! victim is deleted (AssignedPod/Delete). Nodes, StorageClasses, CSINodes, CSIDrivers and
//! capacities never change during a simulation, so their events are not modelled.
//!
//! | event | plugins registered (hint) |
//! |---|---|
//! | AssignedPod/Add | InterPodAffinity (added pod matches all required affinity terms), PodTopologySpread (added pod, same namespace, matches a hard constraint's selector) |
//! | AssignedPod/Delete | NodeResourcesFit (deleted pod was placed or nominated), NodePorts (it held a wanted host port), VolumeRestrictions (conflicting volume or shared claim), NodeVolumeLimits (it had a claim or ephemeral volume), InterPodAffinity (anti-affinity either way), PodTopologySpread (as for Add), DefaultPreemption (always QueueSkip) |
//! | PersistentVolume/Update | VolumeBinding (no hint: Queue), VolumeZone (topology unchanged by a binding: QueueSkip) |
//! | PersistentVolumeClaim/Update | VolumeBinding and VolumeZone (the pod uses that claim) |

use std::sync::Arc;

use crate::plugins::volume_binding::pv_helpers::volume_claim_name;
use crate::plugins::{inter_pod_affinity, names, node_ports, pod_topology_spread, volume_restrictions};
use crate::snapshot::PodInfo;

/// A plugin's answer for one pod and one event (Go's `fwk.QueueingHint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueingHint {
    /// The event may make the pod schedulable: requeue it.
    Queue,
    /// The event cannot make the pod schedulable: leave it parked.
    QueueSkip,
}

impl From<bool> for QueueingHint {
    fn from(may_help: bool) -> Self {
        if may_help {
            QueueingHint::Queue
        } else {
            QueueingHint::QueueSkip
        }
    }
}

/// A cluster event of a batch, with the object it concerns.
#[derive(Debug, Clone)]
pub enum ClusterEvent {
    /// A pod was bound to a node (the pod as bound).
    AssignedPodAdd(Arc<PodInfo>),
    /// An assigned pod was deleted (a preemption victim, as it was on its node).
    AssignedPodDelete(Arc<PodInfo>),
    /// A PersistentVolume was bound to a claim (its `claimRef` and phase updated).
    PersistentVolumeUpdate {
        /// The volume's name.
        name: String,
    },
    /// A PersistentVolumeClaim was updated (bound to a volume, or annotated with its selected node).
    PersistentVolumeClaimUpdate {
        /// The claim's namespace.
        namespace: String,
        /// The claim's name.
        name: String,
    },
}

impl ClusterEvent {
    /// Go's event label, for messages and tests.
    pub fn label(&self) -> &'static str {
        match self {
            ClusterEvent::AssignedPodAdd(_) => "AssignedPodAdd",
            ClusterEvent::AssignedPodDelete(_) => "AssignedPodDelete",
            ClusterEvent::PersistentVolumeUpdate { .. } => "PersistentVolumeUpdate",
            ClusterEvent::PersistentVolumeClaimUpdate { .. } => "PersistentVolumeClaimUpdate",
        }
    }
}

/// What the hints need besides the pod and the event, fixed when the pod is parked: the pod's hard
/// topology spread constraints under its profile (Go's `getConstraints`; Services and the profile do
/// not change during a batch).
#[derive(Debug, Clone, Default)]
pub struct HintInputs {
    /// The constraints, when PodTopologySpread rejected the pod.
    pub spread_constraints: Option<Result<Vec<pod_topology_spread::SpreadConstraint>, String>>,
}

/// Whether `pod`, parked with `plugin` among the plugins that rejected it, may become schedulable
/// by `event`: None when the plugin does not register for the event (Go skips it), else its hint.
pub fn plugin_hint(
    plugin: &str,
    pod: &PodInfo,
    inputs: &HintInputs,
    event: &ClusterEvent,
) -> Option<QueueingHint> {
    use ClusterEvent as E;
    let hint = match (plugin, event) {
        (names::INTER_POD_AFFINITY, E::AssignedPodAdd(added)) => {
            inter_pod_affinity::is_schedulable_after_assigned_pod_change(pod, Some(added), None)
        }
        (names::INTER_POD_AFFINITY, E::AssignedPodDelete(deleted)) => {
            inter_pod_affinity::is_schedulable_after_assigned_pod_change(pod, None, Some(deleted))
        }
        (names::POD_TOPOLOGY_SPREAD, E::AssignedPodAdd(changed) | E::AssignedPodDelete(changed)) => {
            let (added, deleted) = match event {
                E::AssignedPodAdd(_) => (Some(changed.as_ref()), None),
                _ => (None, Some(changed.as_ref())),
            };
            match &inputs.spread_constraints {
                Some(constraints) => pod_topology_spread::is_schedulable_after_assigned_pod_change(
                    pod,
                    constraints,
                    added,
                    deleted,
                ),
                // Not computed: treated as a hint error, which upstream answers with Queue.
                None => true,
            }
        }
        (names::NODE_RESOURCES_FIT, E::AssignedPodDelete(deleted)) => {
            // Any deletion of a placed or nominated pod may free resources.
            !(deleted.node_name().is_empty() && deleted.nominated_node_name().is_empty())
        }
        (names::NODE_PORTS, E::AssignedPodDelete(deleted)) => {
            node_ports::is_schedulable_after_assigned_pod_deleted(pod, deleted)
        }
        (names::VOLUME_RESTRICTIONS, E::AssignedPodDelete(deleted)) => {
            volume_restrictions::is_schedulable_after_assigned_pod_deleted(pod, deleted)
        }
        (names::NODE_VOLUME_LIMITS, E::AssignedPodDelete(deleted)) => {
            csi_limits_after_assigned_pod_deleted(deleted)
        }
        // DefaultPreemption registers the deletion only to lift its PreEnqueue gate; it leaves the
        // decision to the plugins that rejected the pod.
        (names::DEFAULT_PREEMPTION, E::AssignedPodDelete(_)) => false,
        // PersistentVolume Add|Update is registered without a hint: Queue.
        (names::VOLUME_BINDING, E::PersistentVolumeUpdate { .. }) => true,
        // A binding changes a volume's claimRef and phase, never its topology labels or node
        // affinity: VolumeZone's isSchedulableAfterPersistentVolumeChange answers QueueSkip.
        (names::VOLUME_ZONE, E::PersistentVolumeUpdate { .. }) => false,
        (names::VOLUME_BINDING, E::PersistentVolumeClaimUpdate { namespace, name }) => {
            pod_uses_claim(pod, namespace, name, true)
        }
        (names::VOLUME_ZONE, E::PersistentVolumeClaimUpdate { namespace, name }) => {
            pod_uses_claim(pod, namespace, name, false)
        }
        _ => return None,
    };
    Some(hint.into())
}

/// NodeVolumeLimits' (CSILimits) `isSchedulableAfterAssignedPodDeleted`: the deleted pod was placed
/// or nominated and had a claim or a generic ephemeral volume (in-tree volumes that CSI migration
/// translates count too: upstream's translator knows them; the in-tree disks sched-core models are
/// those of VolumeRestrictions, never counted by CSILimits, so they are left out).
fn csi_limits_after_assigned_pod_deleted(deleted: &PodInfo) -> bool {
    let volumes = deleted.pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
    if deleted.node_name().is_empty() && deleted.nominated_node_name().is_empty() {
        return false;
    }
    volumes
        .clone()
        .any(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some() || is_inline_migratable(v))
}

/// Go's `IsInlineMigratable` for the in-tree plugins with a CSI translation.
fn is_inline_migratable(volume: &k8s_openapi::api::core::v1::Volume) -> bool {
    volume.gce_persistent_disk.is_some()
        || volume.aws_elastic_block_store.is_some()
        || volume.azure_disk.is_some()
        || volume.azure_file.is_some()
        || volume.cinder.is_some()
        || volume.vsphere_volume.is_some()
        || volume.portworx_volume.is_some()
}

/// VolumeBinding's `isSchedulableAfterPersistentVolumeClaimChange` (with `ephemeral`: a generic
/// ephemeral volume names the claim `<pod>-<volume>`) and VolumeZone's `isPVCRequestedFromPod`
/// (claim volumes only): the claim is in the pod's namespace and one of the pod's volumes names it.
fn pod_uses_claim(pod: &PodInfo, namespace: &str, name: &str, ephemeral: bool) -> bool {
    if pod.namespace() != namespace {
        return false;
    }
    pod.pod
        .spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter(|v| ephemeral || v.ephemeral.is_none())
        .filter_map(|v| volume_claim_name(&pod.pod, v))
        .any(|(claim, _)| claim == name)
}
