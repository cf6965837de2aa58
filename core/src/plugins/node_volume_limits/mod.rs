//! NodeVolumeLimits (upstream's CSI limits plugin): rejects nodes where attaching the pod's CSI volumes
//! would exceed a driver's attach limit (CSINode `allocatable.count`), counting each distinct volume
//! once across the pods on the node and the node's VolumeAttachments (a volume stays attached, and
//! counts, after the pod that used it left). Claims resolve through PVC → PV (or the StorageClass
//! provisioner while unbound) to a driver; in-tree volumes of migrated plugins (AWS EBS, GCE PD, Azure
//! Disk, Cinder, Portworx) count under their CSI driver on nodes that have a CSINode ([`in_tree`]).

mod in_tree;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Volume};
use k8s_openapi::api::storage::v1::CSINode;

use crate::framework::FeatureGates;
use crate::framework::cycle_state::{CycleState, StateKey};
use crate::framework::interface::{FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult};
use crate::framework::runtime::{Handle, PluginError};
use crate::framework::status::Status;
use crate::plugins::names;
use crate::plugins::volume_zone::pvc_class;
use crate::snapshot::{NodeInfo, PodInfo, Snapshot};
use in_tree::{
    csi_driver_of, csi_migration_on, inline_plugin, pv_plugin, translate_inline_handle, translate_pv_handle,
};

/// The plugin's name.
pub(crate) const NAME: &str = names::NODE_VOLUME_LIMITS;

/// Attaching the pod's volumes would exceed a driver's limit on the node.
pub(crate) const ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED: &str = "node(s) exceed max volume count";

/// Suffix of the reason for a driver that must be installed on the node but is not
/// (`<driver> CSI driver is not installed on the node`).
pub(crate) const ERR_REASON_DRIVER_NOT_INSTALLED_SUFFIX: &str = " CSI driver is not installed on the node";

/// The reason for a CSIDriver with `preventPodSchedulingIfMissing` that the node's CSINode lacks.
pub(crate) fn driver_not_installed_reason(driver: &str) -> String {
    format!("{driver}{ERR_REASON_DRIVER_NOT_INSTALLED_SUFFIX}")
}

/// Stands in for upstream's random per-process prefix of the handles of not-yet-bound claims, so they
/// can never collide with a real volume handle.
const UNBOUND_VOLUME_PREFIX: &str = "kubectl-sched-unbound-claim";

/// Why a pod's volumes could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum VolumeError {
    /// A claim of the pod being scheduled does not exist (UnschedulableAndUnresolvable).
    NotFound(String),
    /// Anything else (an Error status).
    Other(String),
}

impl VolumeError {
    fn status(&self) -> Status {
        match self {
            VolumeError::NotFound(m) => Status::unresolvable(m.clone()),
            VolumeError::Other(m) => Status::error(m.clone()),
        }
    }
}

/// Attachable volumes: `<driver>/<handle>` → driver.
pub(crate) type AttachableVolumes = BTreeMap<String, String>;

/// The pod's attachable volumes, resolved once per cycle for both cases a node can be in (the
/// resolution only depends on whether the node has a CSINode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PreFilterState {
    /// For nodes with a CSINode.
    pub with_csi_node: Result<AttachableVolumes, VolumeError>,
    /// For nodes without one.
    pub without_csi_node: Result<AttachableVolumes, VolumeError>,
}

/// PreFilter state key.
pub(crate) const PRE_FILTER_STATE_KEY: StateKey<PreFilterState> = StateKey::new("PreFilterNodeVolumeLimits");

/// The NodeVolumeLimits plugin.
#[derive(Debug)]
pub(crate) struct CsiLimits {
    snapshot: Arc<Snapshot>,
    /// VolumeLimitScaling: Filter rejects a node that lacks a CSI driver which requires itself
    /// installed (`preventPodSchedulingIfMissing`).
    volume_limit_scaling: bool,
}

/// Builds the plugin (it takes no args).
pub(crate) fn new(
    _args: Option<&serde_json::Value>,
    handle: &Handle,
    features: &FeatureGates,
) -> Result<Arc<dyn Plugin>, PluginError> {
    Ok(Arc::new(CsiLimits {
        snapshot: handle.snapshot.clone(),
        volume_limit_scaling: features.volume_limit_scaling,
    }))
}

/// True when the PVC's controller owner is the pod (component-helpers `VolumeIsForPod`).
fn volume_is_for_pod(pod: &Pod, pvc: &PersistentVolumeClaim) -> Result<(), String> {
    let controlled = pvc
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .is_some_and(|r| Some(r.uid.as_str()) == pod.metadata.uid.as_deref());
    if pvc.metadata.namespace != pod.metadata.namespace || !controlled {
        let s = |o: &Option<String>| o.clone().unwrap_or_default();
        return Err(format!(
            "PVC {}/{} was not created for pod {}/{} (pod is not owner)",
            s(&pvc.metadata.namespace),
            s(&pvc.metadata.name),
            s(&pod.metadata.namespace),
            s(&pod.metadata.name)
        ));
    }
    Ok(())
}

/// The counting behind the plugin, over a borrowed snapshot: the plugin's Filter and the diagnosis
/// layer (which volumes, which limit) read the same numbers.
pub(crate) struct VolumeCounter<'s> {
    snapshot: &'s Snapshot,
    volume_limit_scaling: bool,
}

/// What the count says for a pod on a node.
#[derive(Debug)]
pub(crate) enum CountVerdict {
    /// Within every limit (or nothing to count).
    Fits,
    /// Rejected before counting (a driver missing, an error): the plugin's status.
    Rejected(Status),
    /// The pod's new volumes of `driver` would take the node past its limit.
    Exceeded {
        /// The CSI driver.
        driver: String,
        /// Volumes of the driver already attached or used on the node.
        attached: i64,
        /// The pod's volumes of the driver not yet on the node.
        new: i64,
        /// The CSINode's `allocatable.count` for the driver.
        limit: i64,
    },
}

/// A counter over `snapshot` with the gates' VolumeLimitScaling.
pub(crate) fn volume_counter<'s>(snapshot: &'s Snapshot, features: &FeatureGates) -> VolumeCounter<'s> {
    VolumeCounter {
        snapshot,
        volume_limit_scaling: features.volume_limit_scaling,
    }
}

impl CsiLimits {
    fn counter(&self) -> VolumeCounter<'_> {
        VolumeCounter {
            snapshot: &self.snapshot,
            volume_limit_scaling: self.volume_limit_scaling,
        }
    }
}

impl VolumeCounter<'_> {
    /// Upstream's `filterAttachableVolumes`: adds the pod's attachable volumes to `result`. For the
    /// pod being scheduled a missing claim is an error; for pods already on the node it is skipped.
    fn attachable_volumes(
        &self,
        pod: &Pod,
        csi_node: Option<&CSINode>,
        new_pod: bool,
        result: &mut AttachableVolumes,
    ) -> Result<(), VolumeError> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
        let pod_name = pod.metadata.name.as_deref().unwrap_or("");
        for vol in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            let (claim_name, ephemeral) = if let Some(c) = &vol.persistent_volume_claim {
                (c.claim_name.clone(), false)
            } else if vol.ephemeral.is_some() {
                (format!("{pod_name}-{}", vol.name), true)
            } else {
                self.add_inline_volume(vol, csi_node, result)?;
                continue;
            };
            if claim_name.is_empty() {
                return Err(VolumeError::Other("PersistentVolumeClaim had no name".into()));
            }
            let Some(pvc) = self.snapshot.pvc(namespace, &claim_name) else {
                if new_pod {
                    return Err(VolumeError::NotFound(format!(
                        "looking up PVC {namespace}/{claim_name}: persistentvolumeclaim {claim_name:?} not found"
                    )));
                }
                continue;
            };
            if ephemeral {
                volume_is_for_pod(pod, pvc).map_err(VolumeError::Other)?;
            }
            if let Some((driver, handle)) = self.csi_driver_info(csi_node, pvc) {
                result.insert(format!("{driver}/{handle}"), driver);
            }
        }
        Ok(())
    }

    /// Upstream's `checkAttachableInlineVolume`: an inline volume of a migrated plugin counts under its
    /// CSI driver when migration is on for the node.
    fn add_inline_volume(
        &self,
        vol: &Volume,
        csi_node: Option<&CSINode>,
        result: &mut AttachableVolumes,
    ) -> Result<(), VolumeError> {
        let Some(plugin) = inline_plugin(vol) else {
            return Ok(());
        };
        if !csi_migration_on(csi_node, plugin) {
            return Ok(());
        }
        let handle = translate_inline_handle(vol).map_err(|e| {
            VolumeError::Other(format!("converting volume({}) from inline to csi: {e}", vol.name))
        })?;
        let Some(driver) = csi_driver_of(plugin) else {
            return Ok(());
        };
        result.insert(format!("{driver}/{handle}"), driver.to_string());
        Ok(())
    }

    /// Upstream's `getCSIDriverInfo`: the driver and volume handle of a claim, through its PV (in-tree
    /// PVs translated when migrated) or, while unbound or when the PV is missing, its StorageClass.
    fn csi_driver_info(
        &self,
        csi_node: Option<&CSINode>,
        pvc: &PersistentVolumeClaim,
    ) -> Option<(String, String)> {
        let pv_name = pvc
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.as_deref())
            .unwrap_or("");
        if pv_name.is_empty() {
            return self.csi_driver_info_from_class(csi_node, pvc);
        }
        let Some(pv) = self.snapshot.persistent_volumes.get(pv_name) else {
            return self.csi_driver_info_from_class(csi_node, pvc);
        };
        if let Some(csi) = pv.spec.as_ref().and_then(|s| s.csi.as_ref()) {
            return nonempty(&csi.driver, &csi.volume_handle);
        }
        let plugin = pv_plugin(pv)?;
        if !csi_migration_on(csi_node, plugin) {
            return None;
        }
        let handle = translate_pv_handle(pv)?;
        nonempty(csi_driver_of(plugin)?, &handle)
    }

    /// Upstream's `getCSIDriverInfoFromSC`: an unbound claim counts under its class's provisioner, with
    /// a handle unique to the claim.
    fn csi_driver_info_from_class(
        &self,
        csi_node: Option<&CSINode>,
        pvc: &PersistentVolumeClaim,
    ) -> Option<(String, String)> {
        let class_name = pvc_class(pvc);
        if class_name.is_empty() {
            return None;
        }
        let class = self.snapshot.storage_classes.get(class_name)?;
        let handle = format!(
            "{UNBOUND_VOLUME_PREFIX}-{}/{}",
            pvc.metadata.namespace.as_deref().unwrap_or(""),
            pvc.metadata.name.as_deref().unwrap_or("")
        );
        let provisioner = class.provisioner.as_str();
        if let Some(driver) = csi_driver_of(provisioner) {
            if !csi_migration_on(csi_node, provisioner) {
                return None;
            }
            return nonempty(driver, &handle);
        }
        nonempty(provisioner, &handle)
    }

    fn new_volumes(&self, pod: &Pod, csi_node: Option<&CSINode>) -> Result<AttachableVolumes, VolumeError> {
        let mut out = AttachableVolumes::new();
        self.attachable_volumes(pod, csi_node, true, &mut out)?;
        Ok(out)
    }

    /// Upstream's `getNodeVolumeAttachmentInfo`: the CSI volumes the node's VolumeAttachments attach,
    /// `<attacher>/<handle>` → attacher. Like upstream, the driver is the attachment's `attacher` (not
    /// the PV's driver), the handle is the PV's, and the status is not read: an attachment counts
    /// while it exists, attached or not, being deleted or not. Skipped: no attacher, an inline volume
    /// spec instead of a PV name, a PV that does not exist, a PV without a CSI source (an in-tree PV
    /// is not translated here, unlike a pod's).
    fn node_attachments(&self, node_name: &str) -> AttachableVolumes {
        let mut out = AttachableVolumes::new();
        for va in self
            .snapshot
            .volume_attachments
            .get(node_name)
            .into_iter()
            .flatten()
        {
            let spec = &va.spec;
            if spec.attacher.is_empty() {
                continue;
            }
            let Some(pv) = spec
                .source
                .persistent_volume_name
                .as_deref()
                .and_then(|name| self.snapshot.persistent_volumes.get(name))
            else {
                continue;
            };
            let Some(csi) = pv.spec.as_ref().and_then(|s| s.csi.as_ref()) else {
                continue;
            };
            out.insert(
                format!("{}/{}", spec.attacher, csi.volume_handle),
                spec.attacher.clone(),
            );
        }
        out
    }

    /// Upstream's `checkCSIDriverOnNode` (run only under VolumeLimitScaling): a driver whose
    /// CSIDriver opts in with `preventPodSchedulingIfMissing` must be listed in the node's CSINode.
    fn driver_installed(&self, driver: &str, csi_node: Option<&CSINode>) -> bool {
        let Some(d) = self.snapshot.csi_drivers.get(driver) else {
            return true;
        };
        if d.spec.prevent_pod_scheduling_if_missing != Some(true) {
            return true;
        }
        csi_node.is_some_and(|n| n.spec.drivers.iter().any(|x| x.name == driver))
    }
}

fn nonempty(driver: &str, handle: &str) -> Option<(String, String)> {
    (!driver.is_empty() && !handle.is_empty()).then(|| (driver.to_string(), handle.to_string()))
}

/// Driver → attach limit, for the drivers of the CSINode that declare one.
fn volume_limits(csi_node: Option<&CSINode>) -> BTreeMap<&str, i64> {
    csi_node
        .into_iter()
        .flat_map(|n| n.spec.drivers.iter())
        .filter_map(|d| Some((d.name.as_str(), i64::from(d.allocatable.as_ref()?.count?))))
        .collect()
}

/// True for volumes this plugin may count: claims, generic ephemeral volumes, migratable inline ones.
fn may_count(v: &Volume) -> bool {
    v.persistent_volume_claim.is_some() || v.ephemeral.is_some() || inline_plugin(v).is_some()
}

impl Plugin for CsiLimits {
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

impl PreFilterPlugin for CsiLimits {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        let relevant = pod
            .pod
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .any(may_count);
        if !relevant {
            return (None, Status::skip());
        }
        // Resolution only looks at whether a CSINode exists, so any CSINode stands in for "present".
        let present = CSINode::default();
        state.write(
            &PRE_FILTER_STATE_KEY,
            PreFilterState {
                with_csi_node: self.counter().new_volumes(&pod.pod, Some(&present)),
                without_csi_node: self.counter().new_volumes(&pod.pod, None),
            },
        );
        (None, Status::success())
    }
}

impl FilterPlugin for CsiLimits {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        match self.counter().verdict(state, pod, node) {
            CountVerdict::Fits => Status::success(),
            CountVerdict::Rejected(status) => status,
            CountVerdict::Exceeded { .. } => Status::unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED),
        }
    }
}

impl VolumeCounter<'_> {
    /// Filter's count for `pod` on `node`, with PreFilter's volumes from `state` when it ran.
    pub(crate) fn verdict(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> CountVerdict {
        let has_volumes = pod
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .is_some_and(|v| !v.is_empty());
        if !has_volumes {
            return CountVerdict::Fits;
        }
        let csi_node = self.snapshot.csi_nodes.get(node.name()).map(|n| n.as_ref());
        let resolved = match state.read(&PRE_FILTER_STATE_KEY) {
            Some(s) if csi_node.is_some() => s.with_csi_node.clone(),
            Some(s) => s.without_csi_node.clone(),
            None => self.new_volumes(&pod.pod, csi_node),
        };
        let mut new_volumes = match resolved {
            Ok(v) => v,
            Err(e) => return CountVerdict::Rejected(e.status()),
        };
        if new_volumes.is_empty() {
            return CountVerdict::Fits;
        }
        for driver in new_volumes.values() {
            if self.volume_limit_scaling && !self.driver_installed(driver, csi_node) {
                return CountVerdict::Rejected(Status::unschedulable(driver_not_installed_reason(driver)));
            }
        }
        let limits = volume_limits(csi_node);
        if limits.is_empty() {
            return CountVerdict::Fits;
        }
        let mut attached = AttachableVolumes::new();
        for existing in &node.pods {
            if let Err(e) = self.attachable_volumes(&existing.pod, csi_node, false, &mut attached) {
                return CountVerdict::Rejected(Status::error(match e {
                    VolumeError::NotFound(m) | VolumeError::Other(m) => m,
                }));
            }
        }
        let attachments = self.node_attachments(node.name());
        let mut attached_count: BTreeMap<&str, i64> = BTreeMap::new();
        for (unique_name, driver) in &attached {
            // A volume already attached for another pod does not need another attachment.
            new_volumes.remove(unique_name);
            *attached_count.entry(driver.as_str()).or_insert(0) += 1;
        }
        for (unique_name, driver) in &attachments {
            // An attachment of a volume a pod on the node uses is that volume, counted above. As
            // upstream, the pod's own new volumes are not compared: one already attached here (its
            // previous pod's) counts as attached and as new.
            if !attached.contains_key(unique_name) {
                *attached_count.entry(driver.as_str()).or_insert(0) += 1;
            }
        }
        let mut new_count: BTreeMap<&str, i64> = BTreeMap::new();
        for driver in new_volumes.values() {
            *new_count.entry(driver.as_str()).or_insert(0) += 1;
        }
        for (driver, count) in new_count {
            let attached = attached_count.get(driver).copied().unwrap_or(0);
            if let Some(limit) = limits.get(driver)
                && attached + count > *limit
            {
                return CountVerdict::Exceeded {
                    driver: driver.to_owned(),
                    attached,
                    new: count,
                    limit: *limit,
                };
            }
        }
        CountVerdict::Fits
    }
}
