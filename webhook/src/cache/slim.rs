//! What the webhook keeps of each object it caches: the engine's pruning, and for PVs and claims
//! (tens of thousands of them) only what volume binding, the volume filters and the overlay read.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use sched_core::snapshot::Prune;
use sched_core::volumes::is_claim_fully_bound;

/// Annotations of a claim that volume binding reads.
const CLAIM_ANNOTATIONS: &[&str] = &[
    "pv.kubernetes.io/bind-completed",
    "volume.kubernetes.io/selected-node",
    "volume.beta.kubernetes.io/storage-class",
];
/// Annotations of a PV that decisions read. `pv.kubernetes.io/bound-by-controller` is not among them:
/// binding sets it on the PV it assumes whenever the PV is not already bound to the claim, whatever the
/// cached copy says, and the writes read the PV afresh. Dropping it leaves most PVs without an
/// annotation map (a B-tree node of over 500 bytes each).
const VOLUME_ANNOTATIONS: &[&str] = &["volume.beta.kubernetes.io/storage-class"];

/// The engine's annotation pruning, narrowed to `keep`.
fn keep_annotations(meta: &mut ObjectMeta, keep: &[&str]) {
    sched_core::snapshot::load::retain_annotations(meta, |k| keep.contains(&k));
}

/// Drops what no decision reads of a PV's or claim's metadata. Name, namespace, uid (action plans
/// carry it as a precondition), resourceVersion (the overlay compares it), deletionTimestamp and labels
/// stay.
fn slim_volume_metadata(meta: &mut ObjectMeta, keep: &[&str]) {
    keep_annotations(meta, keep);
    meta.finalizers = None;
    meta.generate_name = None;
    meta.self_link = None;
    // Only a controller reference is read (generic ephemeral volumes must be controlled by their pod).
    if let Some(owners) = meta.owner_references.as_mut() {
        owners.retain(|r| r.controller == Some(true));
        if owners.is_empty() {
            meta.owner_references = None;
        }
    }
    shrink(&mut meta.owner_references);
}

/// Gives back the spare capacity serde leaves in a deserialized list (it grows a one-item list to four
/// slots): tens of thousands of objects keep these lists for the life of the process.
fn shrink<T>(list: &mut Option<Vec<T>>) {
    if let Some(items) = list.as_mut() {
        items.shrink_to_fit();
    }
}

/// Keeps only the `storage` quantity of a resource map (the only one volume binding compares).
fn keep_storage_only(
    resources: &mut Option<
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >,
) {
    if let Some(map) = resources.as_mut() {
        map.retain(|k, _| k == "storage");
        if map.is_empty() {
            *resources = None;
        }
    }
}

/// What the webhook stores of an object: the engine's pruning, and for PVs and claims (the kinds
/// there are tens of thousands of) only what volume binding, the volume filters and the overlay read.
/// Every tiny map costs a B-tree node (over 500 bytes), so dropping a claim's labels and status maps
/// matters at scale; apply reads every object it writes afresh, so nothing dropped here is ever
/// written back. The object-kind table's `slim` column says which kinds keep the default (`prune`,
/// implemented in `stores`) and which have their own impl here (`own`).
pub trait Slim: Prune {
    /// Prunes in place.
    fn slim(&mut self) {
        self.prune();
    }
}

impl Slim for PersistentVolumeClaim {
    fn slim(&mut self) {
        self.prune();
        // Claim labels are never matched (PV labels are, by the claim's selector).
        self.metadata.labels = None;
        slim_volume_metadata(&mut self.metadata, CLAIM_ANNOTATIONS);
        let fully_bound = is_claim_fully_bound(self);
        if let Some(spec) = self.spec.as_mut() {
            shrink(&mut spec.access_modes);
            if let Some(resources) = spec.resources.as_mut() {
                resources.limits = None;
                keep_storage_only(&mut resources.requests);
                if fully_bound {
                    // Sizes are compared only while a claim is matched or provisioned; a fully bound
                    // one never is again (a later change of it arrives whole from the watch).
                    resources.requests = None;
                }
            }
        }
        if let Some(status) = self.status.as_mut() {
            // Only the phase is read (a Lost claim makes the pod unschedulable).
            *status = k8s_openapi::api::core::v1::PersistentVolumeClaimStatus {
                phase: status.phase.take(),
                ..Default::default()
            };
        }
    }
}

impl Slim for PersistentVolume {
    fn slim(&mut self) {
        self.prune();
        slim_volume_metadata(&mut self.metadata, VOLUME_ANNOTATIONS);
        if let Some(spec) = self.spec.as_mut() {
            shrink(&mut spec.access_modes);
            keep_storage_only(&mut spec.capacity);
            spec.mount_options = None;
            spec.persistent_volume_reclaim_policy = None;
            if let Some(claim) = spec.claim_ref.as_mut() {
                // A binding is matched by the claim's namespace, name and uid.
                claim.api_version = None;
                claim.kind = None;
                claim.field_path = None;
                claim.resource_version = None;
            }
            if let Some(csi) = spec.csi.as_mut() {
                // The CSI limits read the driver and the volume handle; attributes and secrets are the
                // driver's business.
                csi.volume_attributes = None;
                csi.controller_expand_secret_ref = None;
                csi.controller_publish_secret_ref = None;
                csi.node_expand_secret_ref = None;
                csi.node_publish_secret_ref = None;
                csi.node_stage_secret_ref = None;
            }
            if let Some(required) = spec.node_affinity.as_mut().and_then(|a| a.required.as_mut()) {
                required.node_selector_terms.shrink_to_fit();
                for term in &mut required.node_selector_terms {
                    for requirements in [&mut term.match_expressions, &mut term.match_fields] {
                        shrink(requirements);
                        for requirement in requirements.iter_mut().flatten() {
                            shrink(&mut requirement.values);
                        }
                    }
                }
            }
        }
        if let Some(status) = self.status.as_mut() {
            *status = k8s_openapi::api::core::v1::PersistentVolumeStatus {
                phase: status.phase.take(),
                ..Default::default()
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volumes_keep_only_what_decisions_read() {
        let mut pv: PersistentVolume = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "pv1", "uid": "u1", "resourceVersion": "7", "labels": {"disk": "ssd"},
                         "finalizers": ["kubernetes.io/pv-protection"],
                         "annotations": {"pv.kubernetes.io/bound-by-controller": "yes",
                                         "volume.beta.kubernetes.io/storage-class": "fast"}},
            "spec": {"capacity": {"storage": "10Gi", "ephemeral-storage": "1Gi"},
                     "accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Retain",
                     "mountOptions": ["noatime"],
                     "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "ns",
                                  "name": "c1", "uid": "cu1", "resourceVersion": "3"},
                     "csi": {"driver": "example.com/csi", "volumeHandle": "h1",
                             "volumeAttributes": {"a": "b"}},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}},
            "status": {"phase": "Bound", "message": "m"},
        }))
        .expect("pv");
        pv.slim();
        let meta = &pv.metadata;
        assert_eq!(
            (meta.uid.as_deref(), meta.resource_version.as_deref()),
            (Some("u1"), Some("7"))
        );
        assert!(meta.finalizers.is_none());
        assert_eq!(
            meta.annotations
                .as_ref()
                .map(|a| a.keys().cloned().collect::<Vec<_>>()),
            Some(vec!["volume.beta.kubernetes.io/storage-class".to_string()])
        );
        assert_eq!(meta.labels.as_ref().map(|l| l.len()), Some(1));
        let spec = pv.spec.as_ref().expect("spec");
        assert_eq!(spec.capacity.as_ref().map(|c| c.len()), Some(1));
        assert!(spec.mount_options.is_none() && spec.persistent_volume_reclaim_policy.is_none());
        let claim = spec.claim_ref.as_ref().expect("claimRef");
        assert_eq!(
            (
                claim.namespace.as_deref(),
                claim.name.as_deref(),
                claim.uid.as_deref()
            ),
            (Some("ns"), Some("c1"), Some("cu1"))
        );
        assert!(claim.kind.is_none() && claim.resource_version.is_none());
        let csi = spec.csi.as_ref().expect("csi");
        assert_eq!(
            (csi.driver.as_str(), csi.volume_handle.as_str()),
            ("example.com/csi", "h1")
        );
        assert!(csi.volume_attributes.is_none());
        assert!(spec.node_affinity.is_some());
        assert_eq!(pv.status.as_ref().and_then(|s| s.message.as_deref()), None);

        let mut claim: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c1", "namespace": "ns", "uid": "cu1", "labels": {"app": "db"},
                         "finalizers": ["kubernetes.io/pvc-protection"],
                         "annotations": {"pv.kubernetes.io/bind-completed": "yes",
                                         "pv.kubernetes.io/bound-by-controller": "yes"},
                         "ownerReferences": [
                             {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pu", "controller": true},
                             {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "xu"}]},
            "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": "pv1",
                     "resources": {"requests": {"storage": "5Gi"}, "limits": {"storage": "6Gi"}}},
            "status": {"phase": "Bound", "capacity": {"storage": "10Gi"}},
        }))
        .expect("claim");
        claim.slim();
        let meta = &claim.metadata;
        assert!(meta.labels.is_none() && meta.finalizers.is_none());
        assert_eq!(
            meta.annotations
                .as_ref()
                .map(|a| a.keys().cloned().collect::<Vec<_>>()),
            Some(vec!["pv.kubernetes.io/bind-completed".to_string()])
        );
        assert_eq!(
            meta.owner_references
                .as_ref()
                .map(|o| o.iter().map(|r| r.uid.clone()).collect::<Vec<_>>()),
            Some(vec!["pu".to_string()]),
            "only the controller reference is read"
        );
        let resources = claim
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .expect("resources");
        assert!(resources.limits.is_none());
        assert!(
            resources.requests.is_none(),
            "a fully bound claim's size is never read"
        );
        assert_eq!(
            claim
                .status
                .as_ref()
                .map(|s| (s.phase.as_deref(), s.capacity.is_none())),
            Some((Some("Bound"), true))
        );

        // Not yet fully bound (no bind-completed): the storage request is what matching compares.
        let mut pending: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c2", "namespace": "ns"},
            "spec": {"volumeName": "pv2",
                     "resources": {"requests": {"storage": "5Gi", "cpu": "1"}}},
        }))
        .expect("claim");
        pending.slim();
        let requests = pending
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .expect("requests");
        assert_eq!(requests.keys().collect::<Vec<_>>(), ["storage"]);
    }
}
