//! CSI migration for NodeVolumeLimits: which CSI driver an in-tree volume (inline or PV) of a migrated
//! plugin counts under, and the volume handle csi-translation-lib gives it, so that the same disk
//! reached through an in-tree volume and through a CSI PV counts once.

use k8s_openapi::api::core::v1::Volume;
use k8s_openapi::api::storage::v1::CSINode;

use crate::plugins::volume_zone::{LABEL_FAILURE_DOMAIN_BETA_ZONE, LABEL_TOPOLOGY_ZONE};
use crate::snapshot::volume::PersistentVolume;

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

pub(super) fn csi_driver_of(in_tree: &str) -> Option<&'static str> {
    IN_TREE_TO_CSI
        .iter()
        .find(|(p, _)| *p == in_tree)
        .map(|(_, d)| *d)
}

/// Upstream's `isCSIMigrationOn`: v1.37.1 counts migrated volumes of these plugins on every node that
/// has a CSINode object (Azure File and vSphere volumes are never counted).
pub(super) fn csi_migration_on(csi_node: Option<&CSINode>, in_tree: &str) -> bool {
    csi_node.is_some() && matches!(in_tree, AWS_EBS | PORTWORX | GCE_PD | AZURE_DISK | CINDER)
}

/// The in-tree plugin of an inline volume, if csi-translation-lib knows it.
pub(super) fn inline_plugin(v: &Volume) -> Option<&'static str> {
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
pub(super) fn pv_plugin(pv: &PersistentVolume) -> Option<&'static str> {
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
pub(super) fn translate_inline_handle(v: &Volume) -> Result<String, String> {
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
pub(super) fn translate_pv_handle(pv: &PersistentVolume) -> Option<String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::pv;
    use k8s_openapi::api::core::v1::GCEPersistentDiskVolumeSource;

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
