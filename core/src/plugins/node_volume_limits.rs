//! NodeVolumeLimits (upstream's CSI limits plugin): rejects nodes where attaching the pod's CSI volumes
//! would exceed a driver's attach limit (CSINode `allocatable.count`), counting each distinct volume
//! once across the pods on the node. Claims resolve through PVC → PV (or the StorageClass provisioner
//! while unbound) to a driver; in-tree volumes of migrated plugins (AWS EBS, GCE PD, Azure Disk,
//! Cinder, Portworx) count under their CSI driver on nodes that have a CSINode.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::snapshot::volume::PersistentVolume;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Volume};
use k8s_openapi::api::storage::v1::CSINode;

use crate::framework::cycle_state::{CycleState, StateKey};
use crate::framework::interface::{FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult};
use crate::framework::runtime::{Handle, PluginError};
use crate::framework::status::Status;
use crate::plugins::names;
use crate::plugins::volume_zone::{LABEL_FAILURE_DOMAIN_BETA_ZONE, LABEL_TOPOLOGY_ZONE, pvc_class};
use crate::snapshot::{NodeInfo, PodInfo, Snapshot};

/// The plugin's name.
pub const NAME: &str = names::NODE_VOLUME_LIMITS;

/// Attaching the pod's volumes would exceed a driver's limit on the node.
pub const ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED: &str = "node(s) exceed max volume count";

/// Suffix of the reason for a driver that must be installed on the node but is not
/// (`<driver> CSI driver is not installed on the node`).
pub const ERR_REASON_DRIVER_NOT_INSTALLED_SUFFIX: &str = " CSI driver is not installed on the node";

/// The reason for a CSIDriver with `preventPodSchedulingIfMissing` that the node's CSINode lacks.
pub fn driver_not_installed_reason(driver: &str) -> String {
    format!("{driver}{ERR_REASON_DRIVER_NOT_INSTALLED_SUFFIX}")
}

/// Stands in for upstream's random per-process prefix of the handles of not-yet-bound claims, so they
/// can never collide with a real volume handle.
const UNBOUND_VOLUME_PREFIX: &str = "kubectl-sched-unbound-claim";

/// `kubernetes.io/aws-ebs`.
const AWS_EBS: &str = "kubernetes.io/aws-ebs";
/// `kubernetes.io/gce-pd`.
const GCE_PD: &str = "kubernetes.io/gce-pd";
/// `kubernetes.io/azure-disk`.
const AZURE_DISK: &str = "kubernetes.io/azure-disk";
/// `kubernetes.io/azure-file`.
const AZURE_FILE: &str = "kubernetes.io/azure-file";
/// `kubernetes.io/cinder`.
const CINDER: &str = "kubernetes.io/cinder";
/// `kubernetes.io/vsphere-volume`.
const VSPHERE: &str = "kubernetes.io/vsphere-volume";
/// `kubernetes.io/portworx-volume`.
const PORTWORX: &str = "kubernetes.io/portworx-volume";

/// In-tree plugin → CSI driver, for every plugin csi-translation-lib can translate.
const IN_TREE_TO_CSI: [(&str, &str); 7] = [
    (AWS_EBS, "ebs.csi.aws.com"),
    (GCE_PD, "pd.csi.storage.gke.io"),
    (AZURE_DISK, "disk.csi.azure.com"),
    (AZURE_FILE, "file.csi.azure.com"),
    (CINDER, "cinder.csi.openstack.org"),
    (VSPHERE, "csi.vsphere.vmware.com"),
    (PORTWORX, "pxd.portworx.com"),
];

fn csi_driver_of(in_tree: &str) -> Option<&'static str> {
    IN_TREE_TO_CSI
        .iter()
        .find(|(p, _)| *p == in_tree)
        .map(|(_, d)| *d)
}

/// Upstream's `isCSIMigrationOn`: v1.37.1 counts migrated volumes of these plugins on every node that
/// has a CSINode object (Azure File and vSphere volumes are never counted).
fn csi_migration_on(csi_node: Option<&CSINode>, in_tree: &str) -> bool {
    csi_node.is_some() && matches!(in_tree, AWS_EBS | PORTWORX | GCE_PD | AZURE_DISK | CINDER)
}

/// The in-tree plugin of an inline volume, if csi-translation-lib knows it.
fn inline_plugin(v: &Volume) -> Option<&'static str> {
    if v.gce_persistent_disk.is_some() {
        Some(GCE_PD)
    } else if v.aws_elastic_block_store.is_some() {
        Some(AWS_EBS)
    } else if v.cinder.is_some() {
        Some(CINDER)
    } else if v.azure_disk.is_some() {
        Some(AZURE_DISK)
    } else if v.azure_file.is_some() {
        Some(AZURE_FILE)
    } else if v.vsphere_volume.is_some() {
        Some(VSPHERE)
    } else if v.portworx_volume.is_some() {
        Some(PORTWORX)
    } else {
        None
    }
}

/// The in-tree plugin of a PV's source, if csi-translation-lib knows it.
fn pv_plugin(pv: &PersistentVolume) -> Option<&'static str> {
    let s = pv.spec.as_ref()?;
    if s.gce_persistent_disk.is_some() {
        Some(GCE_PD)
    } else if s.aws_elastic_block_store.is_some() {
        Some(AWS_EBS)
    } else if s.cinder.is_some() {
        Some(CINDER)
    } else if s.azure_disk.is_some() {
        Some(AZURE_DISK)
    } else if s.azure_file.is_some() {
        Some(AZURE_FILE)
    } else if s.vsphere_volume.is_some() {
        Some(VSPHERE)
    } else if s.portworx_volume.is_some() {
        Some(PORTWORX)
    } else {
        None
    }
}

/// csi-translation-lib's `KubernetesVolumeIDToEBSVolumeID`: `aws://<zone>/vol-…` → `vol-…`.
fn ebs_volume_id(kubernetes_id: &str) -> Result<String, String> {
    let Some(rest) = kubernetes_id.strip_prefix("aws://") else {
        return Ok(kubernetes_id.to_string());
    };
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let path = rest.find('/').map_or("", |i| &rest[i..]);
    let id = path.trim_matches('/');
    if id.starts_with("vol-") && !id.contains('/') {
        Ok(id.to_string())
    } else {
        Err(format!("Invalid format for AWS volume ({kubernetes_id})"))
    }
}

fn check_azure_kind(kind: Option<&str>) -> Result<(), String> {
    match kind {
        Some(k) if !k.eq_ignore_ascii_case("Managed") => {
            Err(format!("kind({k}) is not supported in csi migration"))
        }
        _ => Ok(()),
    }
}

const GCE_UNSPECIFIED: &str = "UNSPECIFIED";

fn gce_zonal_handle(zone: &str, disk: &str) -> String {
    format!("projects/{GCE_UNSPECIFIED}/zones/{zone}/disks/{disk}")
}

/// The volume handle csi-translation-lib gives an inline volume of a migrated plugin.
fn translate_inline_handle(v: &Volume) -> Result<String, String> {
    if let Some(pd) = &v.gce_persistent_disk {
        return Ok(gce_zonal_handle(GCE_UNSPECIFIED, &pd.pd_name));
    }
    if let Some(ebs) = &v.aws_elastic_block_store {
        return ebs_volume_id(&ebs.volume_id)
            .map_err(|e| format!("failed to translate Kubernetes ID to EBS Volume ID {e}"));
    }
    if let Some(disk) = &v.azure_disk {
        check_azure_kind(disk.kind.as_deref())?;
        return Ok(disk.disk_uri.clone());
    }
    if let Some(c) = &v.cinder {
        return Ok(c.volume_id.clone());
    }
    if let Some(p) = &v.portworx_volume {
        return Ok(p.volume_id.clone());
    }
    Err(format!(
        "could not find in-tree plugin translation logic for {:?}",
        v.name
    ))
}

/// `gceGetRegionFromZones`: every zone must be `<locale>-<region>-<zone>` of one region.
fn gce_region_from_zones(zones: &[&str]) -> Option<String> {
    let mut region: Option<String> = None;
    for zone in zones {
        let parts: Vec<&str> = zone.split('-').collect();
        if parts.len() != 3 {
            return None;
        }
        let r = format!("{}-{}", parts[0], parts[1]);
        match &region {
            Some(existing) if *existing != r => return None,
            _ => region = Some(r),
        }
    }
    region
}

/// The volume handle csi-translation-lib gives an in-tree PV of a migrated plugin; `None` when the
/// translation fails (upstream then does not count the volume).
fn translate_pv_handle(pv: &PersistentVolume) -> Option<String> {
    let spec = pv.spec.as_ref()?;
    if let Some(pd) = &spec.gce_persistent_disk {
        let labels = pv.metadata.labels.as_ref();
        let label = |k: &str| labels.and_then(|l| l.get(k)).map(String::as_str).unwrap_or("");
        let zones_label = match label(LABEL_FAILURE_DOMAIN_BETA_ZONE) {
            "" => label(LABEL_TOPOLOGY_ZONE),
            z => z,
        };
        let zones: Vec<&str> = zones_label.split("__").collect();
        return match zones.as_slice() {
            [zone] if !zone.is_empty() => Some(gce_zonal_handle(zone, &pd.pd_name)),
            [_] => Some(gce_zonal_handle(GCE_UNSPECIFIED, &pd.pd_name)),
            _ => gce_region_from_zones(&zones)
                .map(|region| format!("projects/{GCE_UNSPECIFIED}/regions/{region}/disks/{}", pd.pd_name)),
        };
    }
    if let Some(ebs) = &spec.aws_elastic_block_store {
        return ebs_volume_id(&ebs.volume_id).ok();
    }
    if let Some(disk) = &spec.azure_disk {
        return check_azure_kind(disk.kind.as_deref())
            .ok()
            .map(|()| disk.disk_uri.clone());
    }
    if let Some(c) = &spec.cinder {
        return Some(c.volume_id.clone());
    }
    if let Some(p) = &spec.portworx_volume {
        return Some(p.volume_id.clone());
    }
    None
}

/// Why a pod's volumes could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeError {
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
pub type AttachableVolumes = BTreeMap<String, String>;

/// The pod's attachable volumes, resolved once per cycle for both cases a node can be in (the
/// resolution only depends on whether the node has a CSINode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreFilterState {
    /// For nodes with a CSINode.
    pub with_csi_node: Result<AttachableVolumes, VolumeError>,
    /// For nodes without one.
    pub without_csi_node: Result<AttachableVolumes, VolumeError>,
}

/// PreFilter state key.
pub const PRE_FILTER_STATE_KEY: StateKey<PreFilterState> = StateKey::new("PreFilterNodeVolumeLimits");

/// The NodeVolumeLimits plugin.
#[derive(Debug)]
pub struct CsiLimits {
    snapshot: Arc<Snapshot>,
}

/// Builds the plugin (it takes no args).
pub fn new(_args: Option<&serde_json::Value>, handle: &Handle) -> Result<Arc<dyn Plugin>, PluginError> {
    Ok(Arc::new(CsiLimits {
        snapshot: handle.snapshot.clone(),
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

impl CsiLimits {
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

    /// Upstream's `checkCSIDriverOnNode` (VolumeLimitScaling, beta and on in v1.37): a driver whose
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
                with_csi_node: self.new_volumes(&pod.pod, Some(&present)),
                without_csi_node: self.new_volumes(&pod.pod, None),
            },
        );
        (None, Status::success())
    }
}

impl FilterPlugin for CsiLimits {
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
        let csi_node = self.snapshot.csi_nodes.get(node.name()).map(|n| n.as_ref());
        let resolved = match state.read(&PRE_FILTER_STATE_KEY) {
            Some(s) if csi_node.is_some() => s.with_csi_node.clone(),
            Some(s) => s.without_csi_node.clone(),
            None => self.new_volumes(&pod.pod, csi_node),
        };
        let mut new_volumes = match resolved {
            Ok(v) => v,
            Err(e) => return e.status(),
        };
        if new_volumes.is_empty() {
            return Status::success();
        }
        for driver in new_volumes.values() {
            if !self.driver_installed(driver, csi_node) {
                return Status::unschedulable(driver_not_installed_reason(driver));
            }
        }
        let limits = volume_limits(csi_node);
        if limits.is_empty() {
            return Status::success();
        }
        let mut attached = AttachableVolumes::new();
        for existing in &node.pods {
            if let Err(e) = self.attachable_volumes(&existing.pod, csi_node, false, &mut attached) {
                return Status::error(match e {
                    VolumeError::NotFound(m) | VolumeError::Other(m) => m,
                });
            }
        }
        let mut attached_count: BTreeMap<&str, i64> = BTreeMap::new();
        for (unique_name, driver) in &attached {
            // A volume already attached for another pod does not need another attachment.
            new_volumes.remove(unique_name);
            *attached_count.entry(driver.as_str()).or_insert(0) += 1;
        }
        let mut new_count: BTreeMap<&str, i64> = BTreeMap::new();
        for driver in new_volumes.values() {
            *new_count.entry(driver.as_str()).or_insert(0) += 1;
        }
        for (driver, count) in new_count {
            if let Some(limit) = limits.get(driver)
                && attached_count.get(driver).copied().unwrap_or(0) + count > *limit
            {
                return Status::unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED);
            }
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::status::Code;
    use crate::snapshot::ClusterObjects;
    use crate::testing::{csi_driver, csi_node, node, pod, pv, pvc, snapshot_of, storage_class};
    use k8s_openapi::api::core::v1::{
        AWSElasticBlockStoreVolumeSource, AzureDiskVolumeSource, EphemeralVolumeSource,
        GCEPersistentDiskVolumeSource,
    };

    const DRIVER: &str = "csi.example.com";

    fn ebs_volume(name: &str, id: &str) -> Volume {
        Volume {
            name: name.into(),
            aws_elastic_block_store: Some(AWSElasticBlockStoreVolumeSource {
                volume_id: id.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn base_objects() -> ClusterObjects {
        ClusterObjects {
            nodes: vec![
                node("limited").obj(),
                node("no-csinode").obj(),
                node("unlimited").obj(),
            ],
            csi_nodes: vec![
                csi_node("limited", &[(DRIVER, Some(2)), ("ebs.csi.aws.com", Some(1))]),
                csi_node("unlimited", &[(DRIVER, None)]),
            ],
            persistent_volumes: (1..=4)
                .map(|i| pv(&format!("pv{i}")).csi(DRIVER, &format!("h{i}")).obj())
                .chain([pv("pv-ebs")
                    .with(|p| {
                        p.spec
                            .get_or_insert_with(Default::default)
                            .aws_elastic_block_store = Some(AWSElasticBlockStoreVolumeSource {
                            volume_id: "aws://us-east-1a/vol-1".into(),
                            ..Default::default()
                        })
                    })
                    .obj()])
                .collect(),
            persistent_volume_claims: (1..=4)
                .map(|i| pvc(&format!("c{i}")).volume_name(&format!("pv{i}")).obj())
                .chain([
                    pvc("c-ebs").volume_name("pv-ebs").obj(),
                    pvc("unbound").storage_class("sc").obj(),
                    pvc("unbound2").storage_class("sc").obj(),
                    pvc("unbound-no-class").obj(),
                    pvc("p-scratch")
                        .storage_class("sc")
                        .owned_by_pod("p", "default-p")
                        .obj(),
                    pvc("q-scratch").owned_by_pod("other", "uid-other").obj(),
                ])
                .collect(),
            storage_classes: vec![storage_class("sc", DRIVER, "WaitForFirstConsumer")],
            ..Default::default()
        }
    }

    fn run(objects: ClusterObjects, p: &PodInfo, node_name: &str) -> Status {
        let snapshot = Arc::new(snapshot_of(objects));
        let plugin = new(
            None,
            &Handle {
                snapshot: snapshot.clone(),
            },
        )
        .unwrap();
        let mut state = CycleState::new();
        let (_, s) = plugin
            .as_pre_filter()
            .unwrap()
            .pre_filter(&mut state, p, snapshot.nodes());
        if !s.is_success() {
            return s;
        }
        plugin
            .as_filter()
            .unwrap()
            .filter(&state, p, snapshot.node(node_name).unwrap())
    }

    fn with_pods(pods: Vec<Pod>) -> ClusterObjects {
        ClusterObjects {
            pods,
            ..base_objects()
        }
    }

    #[test]
    fn counts_against_csinode_limits() {
        let two_existing = vec![
            pod("e1").node("limited").pvc("c1").obj(),
            pod("e2").node("limited").pvc("c2").obj(),
        ];
        let cases: Vec<(&str, ClusterObjects, PodInfo, &str, Code)> = vec![
            (
                "under the limit",
                with_pods(vec![pod("e1").node("limited").pvc("c1").obj()]),
                pod("p").pvc("c2").info(),
                "limited",
                Code::Success,
            ),
            (
                "over the limit",
                with_pods(two_existing.clone()),
                pod("p").pvc("c3").info(),
                "limited",
                Code::Unschedulable,
            ),
            (
                "two new volumes over the limit",
                base_objects(),
                pod("p").pvc("c1").pvc("c2").pvc("c3").info(),
                "limited",
                Code::Unschedulable,
            ),
            (
                "shared volume counts once",
                with_pods(two_existing.clone()),
                pod("p").pvc("c1").info(),
                "limited",
                Code::Success,
            ),
            (
                "same PV through two claims counts once",
                base_objects(),
                pod("p").pvc("c1").pvc("c1").pvc("c2").info(),
                "limited",
                Code::Success,
            ),
            (
                "no CSINode: no limit",
                with_pods(two_existing.clone()),
                pod("p").pvc("c3").info(),
                "no-csinode",
                Code::Success,
            ),
            (
                "driver without count: no limit",
                base_objects(),
                pod("p").pvc("c1").pvc("c2").pvc("c3").info(),
                "unlimited",
                Code::Success,
            ),
            (
                "unbound claims count by class provisioner",
                with_pods(two_existing.clone()),
                pod("p").pvc("unbound").info(),
                "limited",
                Code::Unschedulable,
            ),
            (
                "unbound claim without class is not counted",
                with_pods(two_existing.clone()),
                pod("p").pvc("unbound-no-class").info(),
                "limited",
                Code::Success,
            ),
            (
                "existing pod with a missing claim is skipped",
                with_pods(vec![
                    pod("e1").node("limited").pvc("c1").obj(),
                    pod("e2").node("limited").pvc("gone").obj(),
                ]),
                pod("p").pvc("c2").info(),
                "limited",
                Code::Success,
            ),
            (
                "migrated in-tree PV counts under its CSI driver",
                with_pods(vec![
                    pod("e1").node("limited").volume(ebs_volume("v", "vol-1")).obj(),
                ]),
                pod("p").pvc("c-ebs").info(),
                "limited",
                Code::Success,
            ),
            (
                "inline EBS volumes count against the EBS limit",
                with_pods(vec![
                    pod("e1").node("limited").volume(ebs_volume("v", "vol-2")).obj(),
                ]),
                pod("p").volume(ebs_volume("w", "aws://us-east-1a/vol-1")).info(),
                "limited",
                Code::Unschedulable,
            ),
            (
                "generic ephemeral volume counts by its claim's class",
                with_pods(two_existing.clone()),
                pod("p")
                    .volume(Volume {
                        name: "scratch".into(),
                        ephemeral: Some(EphemeralVolumeSource::default()),
                        ..Default::default()
                    })
                    .info(),
                "limited",
                Code::Unschedulable,
            ),
        ];
        for (name, objects, p, node_name, code) in cases {
            let s = run(objects, &p, node_name);
            assert_eq!(s.code(), code, "{name}: {s:?}");
            if code == Code::Unschedulable {
                assert_eq!(s.reasons(), [ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED], "{name}");
            }
        }
    }

    #[test]
    fn errors_and_skips() {
        let p_none = pod("p").info();
        assert_eq!(run(base_objects(), &p_none, "limited").code(), Code::Skip);
        let host_path_only = pod("p")
            .volume(Volume {
                name: "h".into(),
                host_path: Some(Default::default()),
                ..Default::default()
            })
            .info();
        assert_eq!(run(base_objects(), &host_path_only, "limited").code(), Code::Skip);

        // A missing claim of the new pod is reported by Filter, on every node.
        for n in ["limited", "no-csinode"] {
            let s = run(base_objects(), &pod("p").pvc("gone").info(), n);
            assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
            assert_eq!(
                s.message(),
                "looking up PVC default/gone: persistentvolumeclaim \"gone\" not found"
            );
        }

        // An ephemeral claim owned by someone else.
        let q = pod("q")
            .volume(Volume {
                name: "scratch".into(),
                ephemeral: Some(EphemeralVolumeSource::default()),
                ..Default::default()
            })
            .info();
        let s = run(base_objects(), &q, "limited");
        assert_eq!(s.code(), Code::Error);
        assert_eq!(
            s.message(),
            "PVC default/q-scratch was not created for pod default/q (pod is not owner)"
        );

        // An inline Azure disk of kind Shared cannot be migrated: an error where migration is on only.
        let azure = pod("p")
            .volume(Volume {
                name: "az".into(),
                azure_disk: Some(AzureDiskVolumeSource {
                    disk_uri: "uri".into(),
                    kind: Some("Shared".into()),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .info();
        let s = run(base_objects(), &azure, "limited");
        assert_eq!(s.code(), Code::Error);
        assert_eq!(
            s.message(),
            "converting volume(az) from inline to csi: kind(Shared) is not supported in csi migration"
        );
        assert!(run(base_objects(), &azure, "no-csinode").is_success());

        let bad_ebs = pod("p").volume(ebs_volume("w", "aws://zone/notavol")).info();
        assert_eq!(
            run(base_objects(), &bad_ebs, "limited").message(),
            "converting volume(w) from inline to csi: failed to translate Kubernetes ID to EBS Volume ID Invalid format for AWS volume (aws://zone/notavol)"
        );
    }

    #[test]
    fn driver_must_be_installed_when_required() {
        for (prevent, node_name, want) in [
            (
                Some(true),
                "no-csinode",
                Some(driver_not_installed_reason(DRIVER)),
            ),
            (Some(true), "limited", None),
            (Some(false), "no-csinode", None),
            (None, "no-csinode", None),
        ] {
            let mut objects = base_objects();
            objects.csi_drivers = vec![csi_driver(DRIVER, prevent)];
            let s = run(objects, &pod("p").pvc("c1").info(), node_name);
            match want {
                Some(reason) => {
                    assert_eq!(s.code(), Code::Unschedulable);
                    assert_eq!(s.reasons(), [reason]);
                }
                None => assert!(s.is_success(), "{prevent:?} {node_name}: {s:?}"),
            }
        }
        assert_eq!(
            driver_not_installed_reason("x.io"),
            "x.io CSI driver is not installed on the node"
        );
    }

    #[test]
    fn in_tree_translation() {
        assert_eq!(ebs_volume_id("vol-1"), Ok("vol-1".into()));
        assert_eq!(ebs_volume_id("aws://us-east-1a/vol-1"), Ok("vol-1".into()));
        assert_eq!(ebs_volume_id("aws:///vol-1"), Ok("vol-1".into()));
        assert!(ebs_volume_id("aws://us-east-1a/").is_err());
        let gce_pv = |zones: &str| {
            pv("g")
                .label(LABEL_TOPOLOGY_ZONE, zones)
                .with(|p| {
                    p.spec.get_or_insert_with(Default::default).gce_persistent_disk =
                        Some(GCEPersistentDiskVolumeSource {
                            pd_name: "d".into(),
                            ..Default::default()
                        })
                })
                .volume()
        };
        assert_eq!(
            translate_pv_handle(&gce_pv("us-central1-a")).as_deref(),
            Some("projects/UNSPECIFIED/zones/us-central1-a/disks/d")
        );
        assert_eq!(
            translate_pv_handle(&gce_pv("us-central1-a__us-central1-b")).as_deref(),
            Some("projects/UNSPECIFIED/regions/us-central1/disks/d")
        );
        assert_eq!(
            translate_pv_handle(&gce_pv("us-central1-a__europe-west1-b")),
            None
        );
        assert_eq!(
            translate_pv_handle(&gce_pv("")).as_deref(),
            Some("projects/UNSPECIFIED/zones/UNSPECIFIED/disks/d")
        );
    }
}
