//! The engine's PersistentVolume: the fields of a `v1.PersistentVolume` that scheduling reads, under
//! the same names and types, so plugins read `pv.spec.claim_ref` as they would on the API object.
//!
//! Why not k8s-openapi's struct: it holds every volume source inline (3,472 bytes a PV whatever the
//! PV is), and the webhook caches every PV of the cluster for its life. This one is 840 bytes: the CSI
//! source and the in-tree sources that CSI migration translates are boxed, the rest (NFS, iSCSI, host
//! paths, …) is never read by a scheduler plugin and is dropped. The loaders and `kubectl sched
//! snapshot` keep the API type (`ClusterObjects`); [`crate::Snapshot::new`] converts.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as api;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// A PersistentVolume as the engine holds it (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PersistentVolume {
    /// The object's metadata.
    pub metadata: ObjectMeta,
    /// What scheduling reads of the spec.
    pub spec: Option<PersistentVolumeSpec>,
    /// The status (the phase is what is read).
    pub status: Option<api::PersistentVolumeStatus>,
}

/// The fields of `v1.PersistentVolumeSpec` that scheduling reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PersistentVolumeSpec {
    /// `accessModes`.
    pub access_modes: Option<Vec<String>>,
    /// `capacity`.
    pub capacity: Option<BTreeMap<String, Quantity>>,
    /// `claimRef`.
    pub claim_ref: Option<api::ObjectReference>,
    /// `nodeAffinity`.
    pub node_affinity: Option<api::VolumeNodeAffinity>,
    /// `storageClassName`.
    pub storage_class_name: Option<String>,
    /// `volumeAttributesClassName`.
    pub volume_attributes_class_name: Option<String>,
    /// `volumeMode`.
    pub volume_mode: Option<String>,
    /// `csi` (NodeVolumeLimits counts CSI volumes by driver and handle).
    pub csi: Option<Box<api::CSIPersistentVolumeSource>>,
    /// `gcePersistentDisk` (in-tree, translated to CSI for volume limits).
    pub gce_persistent_disk: Option<Box<api::GCEPersistentDiskVolumeSource>>,
    /// `awsElasticBlockStore` (idem).
    pub aws_elastic_block_store: Option<Box<api::AWSElasticBlockStoreVolumeSource>>,
    /// `azureDisk` (idem).
    pub azure_disk: Option<Box<api::AzureDiskVolumeSource>>,
    /// `azureFile` (idem).
    pub azure_file: Option<Box<api::AzureFilePersistentVolumeSource>>,
    /// `cinder` (idem).
    pub cinder: Option<Box<api::CinderPersistentVolumeSource>>,
    /// `portworxVolume` (idem).
    pub portworx_volume: Option<Box<api::PortworxVolumeSource>>,
    /// `vsphereVolume` (idem).
    pub vsphere_volume: Option<Box<api::VsphereVirtualDiskVolumeSource>>,
}

impl From<api::PersistentVolume> for PersistentVolume {
    fn from(pv: api::PersistentVolume) -> Self {
        PersistentVolume {
            metadata: pv.metadata,
            spec: pv.spec.map(PersistentVolumeSpec::from),
            status: pv.status,
        }
    }
}

impl From<api::PersistentVolumeSpec> for PersistentVolumeSpec {
    fn from(spec: api::PersistentVolumeSpec) -> Self {
        PersistentVolumeSpec {
            access_modes: spec.access_modes,
            capacity: spec.capacity,
            claim_ref: spec.claim_ref,
            node_affinity: spec.node_affinity,
            storage_class_name: spec.storage_class_name,
            volume_attributes_class_name: spec.volume_attributes_class_name,
            volume_mode: spec.volume_mode,
            csi: spec.csi.map(Box::new),
            gce_persistent_disk: spec.gce_persistent_disk.map(Box::new),
            aws_elastic_block_store: spec.aws_elastic_block_store.map(Box::new),
            azure_disk: spec.azure_disk.map(Box::new),
            azure_file: spec.azure_file.map(Box::new),
            cinder: spec.cinder.map(Box::new),
            portworx_volume: spec.portworx_volume.map(Box::new),
            vsphere_volume: spec.vsphere_volume.map(Box::new),
        }
    }
}

#[cfg(feature = "kube")]
impl kube::Resource for PersistentVolume {
    type DynamicType = ();
    type Scope = k8s_openapi::ClusterResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        "PersistentVolume".into()
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        "persistentvolumes".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_what_scheduling_reads_in_a_fraction_of_the_space() {
        assert!(
            std::mem::size_of::<PersistentVolume>() * 3 < std::mem::size_of::<api::PersistentVolume>(),
            "{} vs {} bytes",
            std::mem::size_of::<PersistentVolume>(),
            std::mem::size_of::<api::PersistentVolume>()
        );
        let full: api::PersistentVolume = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "pv1", "labels": {"zone": "a"}},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "storageClassName": "fast", "volumeMode": "Block",
                     "volumeAttributesClassName": "gold",
                     "claimRef": {"namespace": "ns", "name": "c1"},
                     "csi": {"driver": "d", "volumeHandle": "h"},
                     "awsElasticBlockStore": {"volumeID": "vol-1"},
                     "nfs": {"server": "s", "path": "/"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "k", "operator": "In", "values": ["v"]}]}]}}},
            "status": {"phase": "Bound"},
        }))
        .expect("pv");
        let pv = PersistentVolume::from(full.clone());
        let spec = pv.spec.as_ref().expect("spec");
        let full_spec = full.spec.as_ref().expect("spec");
        assert_eq!(pv.metadata, full.metadata);
        assert_eq!(pv.status, full.status);
        assert_eq!(spec.capacity, full_spec.capacity);
        assert_eq!(spec.access_modes, full_spec.access_modes);
        assert_eq!(spec.storage_class_name, full_spec.storage_class_name);
        assert_eq!(spec.volume_mode, full_spec.volume_mode);
        assert_eq!(
            spec.volume_attributes_class_name,
            full_spec.volume_attributes_class_name
        );
        assert_eq!(spec.claim_ref, full_spec.claim_ref);
        assert_eq!(spec.node_affinity, full_spec.node_affinity);
        assert_eq!(spec.csi.as_deref(), full_spec.csi.as_ref());
        assert_eq!(
            spec.aws_elastic_block_store.as_deref(),
            full_spec.aws_elastic_block_store.as_ref()
        );
    }
}
