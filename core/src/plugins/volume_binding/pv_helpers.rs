//! The PV/PVC helpers of component-helpers' `storage/volume` and `storage/ephemeral` that volume binding
//! decides with: storage class resolution, PV node affinity, claim ↔ volume matching (the PV controller's
//! `FindMatchingVolume` in its scheduler flavour), and the claimRef update a static binding makes.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    ObjectReference, PersistentVolumeClaim, PersistentVolumeClaimSpec, Pod, Volume,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::labels::{Labels, NodeSelectorMatcher, Selector};
use crate::resource::quantity_value;
use crate::snapshot::volume::{PersistentVolume, PersistentVolumeSpec};

/// PVC annotation set by the PV controller once binding has been set up; with `spec.volumeName` it
/// makes the claim "fully bound".
pub(crate) const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// PV annotation marking a binding made by a controller rather than pre-bound by a user.
pub(crate) const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// PVC annotation through which the scheduler asks for a volume to be provisioned for a node.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// The deprecated class annotation, which still wins over `storageClassName` when present.
pub(crate) const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";
/// A provisioner name that says the class cannot provision dynamically.
pub const NOT_SUPPORTED_PROVISIONER: &str = "kubernetes.io/no-provisioner";
/// `volumeBindingMode` that delays binding until a pod is scheduled.
pub(crate) const VOLUME_BINDING_WAIT_FOR_FIRST_CONSUMER: &str = "WaitForFirstConsumer";
/// The resource name of a claim's size.
pub(crate) const RESOURCE_STORAGE: &str = "storage";
/// The volume mode assumed when a PV or PVC leaves it unset.
pub(crate) const VOLUME_MODE_FILESYSTEM: &str = "Filesystem";
/// The PV phase a volume must have to be matched to a new claim.
pub(crate) const VOLUME_AVAILABLE: &str = "Available";
/// The PVC phase of a claim whose volume disappeared.
pub(crate) const CLAIM_LOST: &str = "Lost";

fn annotation<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// `namespace/name` of a claim.
pub(crate) fn claim_key(claim: &PersistentVolumeClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or(""),
        claim.metadata.name.as_deref().unwrap_or("")
    )
}

/// `metadata.name` of any object ("" when unset).
pub(crate) fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}

/// `GetPersistentVolumeClaimClass`: the beta annotation, else `storageClassName`, else "".
pub fn claim_class(claim: &PersistentVolumeClaim) -> &str {
    if let Some(class) = annotation(&claim.metadata, BETA_STORAGE_CLASS_ANNOTATION) {
        return class;
    }
    claim
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or("")
}

/// `GetPersistentVolumeClass`: the beta annotation, else `storageClassName`.
pub(crate) fn volume_class(pv: &PersistentVolume) -> &str {
    if let Some(class) = annotation(&pv.metadata, BETA_STORAGE_CLASS_ANNOTATION) {
        return class;
    }
    pv.spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or("")
}

/// `spec.volumeName` of a claim ("" when unbound).
pub fn claim_volume_name(claim: &PersistentVolumeClaim) -> &str {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or("")
}

/// The claim's storage request, if it has one.
pub(crate) fn claim_request(claim: &PersistentVolumeClaim) -> Option<&Quantity> {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get(RESOURCE_STORAGE))
}

/// The claim's storage request in bytes (0 when absent).
pub(crate) fn claim_request_bytes(claim: &PersistentVolumeClaim) -> i64 {
    claim_request(claim).map(quantity_value).unwrap_or(0)
}

/// The PV's storage capacity in bytes (0 when absent).
pub(crate) fn volume_capacity_bytes(pv: &PersistentVolume) -> i64 {
    pv.spec
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get(RESOURCE_STORAGE))
        .map(quantity_value)
        .unwrap_or(0)
}

/// `isPVCFullyBound`: bound to a volume and the PV controller has finished setting the binding up.
pub fn is_claim_fully_bound(claim: &PersistentVolumeClaim) -> bool {
    !claim_volume_name(claim).is_empty() && annotation(&claim.metadata, ANN_BIND_COMPLETED).is_some()
}

/// The node named in the claim's selected-node annotation, if any.
pub fn selected_node(claim: &PersistentVolumeClaim) -> Option<&str> {
    annotation(&claim.metadata, ANN_SELECTED_NODE)
}

/// `ephemeral.VolumeClaimName`: the PVC a generic ephemeral volume uses is `<pod>-<volume>`.
pub(crate) fn ephemeral_claim_name(pod: &Pod, volume: &Volume) -> String {
    format!("{}-{}", pod.metadata.name.as_deref().unwrap_or(""), volume.name)
}

/// `ephemeral.VolumeIsForPod`: the PVC must be in the pod's namespace and controlled by the pod, or a
/// same-named claim created by someone else would be used by mistake.
pub(crate) fn ephemeral_volume_is_for_pod(pod: &Pod, claim: &PersistentVolumeClaim) -> Result<(), String> {
    let pod_ns = pod.metadata.namespace.as_deref().unwrap_or("");
    let pod_uid = pod.metadata.uid.as_deref().unwrap_or("");
    let claim_ns = claim.metadata.namespace.as_deref().unwrap_or("");
    let controlled = claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .is_some_and(|r| r.uid == pod_uid);
    if claim_ns != pod_ns || !controlled {
        return Err(format!(
            "PVC {}/{} was not created for pod {}/{} (pod is not owner)",
            claim_ns,
            name_of(&claim.metadata),
            pod_ns,
            name_of(&pod.metadata)
        ));
    }
    Ok(())
}

/// The claim name a pod volume refers to, and whether it is a generic ephemeral volume; `None` for
/// volumes that do not use a PVC.
pub fn volume_claim_name(pod: &Pod, volume: &Volume) -> Option<(String, bool)> {
    if let Some(source) = &volume.persistent_volume_claim {
        return Some((source.claim_name.clone(), false));
    }
    if volume.ephemeral.is_some() {
        return Some((ephemeral_claim_name(pod, volume), true));
    }
    None
}

/// `IsDelayBindingMode`: the claim's class exists and is WaitForFirstConsumer. A class without a
/// binding mode is an error (the API server always defaults it).
pub(crate) fn is_delay_binding_mode(
    claim: &PersistentVolumeClaim,
    classes: &std::collections::HashMap<String, Arc<StorageClass>>,
) -> Result<bool, String> {
    let class_name = claim_class(claim);
    if class_name.is_empty() {
        return Ok(false);
    }
    let Some(class) = classes.get(class_name) else {
        return Ok(false);
    };
    match class.volume_binding_mode.as_deref() {
        None => Err(format!(
            "VolumeBindingMode not set for StorageClass {class_name:?}"
        )),
        Some(mode) => Ok(mode == VOLUME_BINDING_WAIT_FOR_FIRST_CONSUMER),
    }
}

/// A PV's required node affinity, parsed once. `None` means the PV can be used from any node.
///
/// Terms that fail to parse match nothing, as component-helpers' lazy-error selector skips them, and the
/// node is matched by labels only: `CheckNodeAffinity` builds a node without a name, so `matchFields`
/// on `metadata.name` never selects it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VolumeAffinity(Option<NodeSelectorMatcher>);

impl VolumeAffinity {
    /// Parses the PV's `spec.nodeAffinity.required`.
    pub(crate) fn of(pv: &PersistentVolume) -> Self {
        VolumeAffinity(
            pv.spec
                .as_ref()
                .and_then(|s| s.node_affinity.as_ref())
                .and_then(|a| a.required.as_ref())
                .map(NodeSelectorMatcher::new),
        )
    }

    /// Whether a node with these labels can use the PV.
    pub(crate) fn matches(&self, node_labels: &Labels) -> bool {
        self.0.as_ref().is_none_or(|m| m.matches(node_labels, ""))
    }
}

/// `CheckNodeAffinity`: Ok when the node's labels satisfy the PV's required node affinity.
pub(crate) fn check_node_affinity(pv: &PersistentVolume, node_labels: &Labels) -> Result<(), String> {
    if VolumeAffinity::of(pv).matches(node_labels) {
        Ok(())
    } else {
        Err("no matching NodeSelectorTerms".to_string())
    }
}

/// `CheckVolumeModeMismatches`: true when the modes differ, an unset mode being Filesystem.
pub(crate) fn check_volume_mode_mismatches(
    claim: &PersistentVolumeClaimSpec,
    volume: &PersistentVolumeSpec,
) -> bool {
    let requested = claim.volume_mode.as_deref().unwrap_or(VOLUME_MODE_FILESYSTEM);
    let offered = volume.volume_mode.as_deref().unwrap_or(VOLUME_MODE_FILESYSTEM);
    requested != offered
}

/// `CheckAccessModes`: the PV offers every access mode the claim asks for.
pub(crate) fn check_access_modes(claim: &PersistentVolumeClaim, volume: &PersistentVolume) -> bool {
    let offered: HashSet<&str> = volume
        .spec
        .iter()
        .flat_map(|s| s.access_modes.iter().flatten())
        .map(String::as_str)
        .collect();
    claim
        .spec
        .iter()
        .flat_map(|s| s.access_modes.iter().flatten())
        .all(|m| offered.contains(m.as_str()))
}

/// A PV whose binding to a claim can be checked and written: the engine's [`PersistentVolume`] in
/// decisions, the API's when a binding is executed on a PV read afresh.
pub trait BindableVolume: Clone {
    /// The metadata.
    fn meta(&self) -> &ObjectMeta;
    /// The metadata, to change.
    fn meta_mut(&mut self) -> &mut ObjectMeta;
    /// `spec.claimRef`.
    fn claim_ref(&self) -> Option<&ObjectReference>;
    /// Sets `spec.claimRef`.
    fn set_claim_ref(&mut self, claim_ref: ObjectReference);
}

/// Both PV types have the same fields under the same names.
macro_rules! bindable_volume {
    ($volume:ty) => {
        impl BindableVolume for $volume {
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
            fn claim_ref(&self) -> Option<&ObjectReference> {
                self.spec.as_ref().and_then(|s| s.claim_ref.as_ref())
            }
            fn set_claim_ref(&mut self, claim_ref: ObjectReference) {
                self.spec.get_or_insert_with(Default::default).claim_ref = Some(claim_ref);
            }
        }
    };
}

bindable_volume!(PersistentVolume);
bindable_volume!(k8s_openapi::api::core::v1::PersistentVolume);

/// `IsVolumeBoundToClaim`: the PV's claimRef names the claim (and its UID, when the ref has one).
pub(crate) fn is_volume_bound_to_claim<V: BindableVolume>(volume: &V, claim: &PersistentVolumeClaim) -> bool {
    let Some(claim_ref) = volume.claim_ref() else {
        return false;
    };
    if claim_ref.name.as_deref().unwrap_or("") != name_of(&claim.metadata)
        || claim_ref.namespace.as_deref().unwrap_or("") != claim.metadata.namespace.as_deref().unwrap_or("")
    {
        return false;
    }
    let ref_uid = claim_ref.uid.as_deref().unwrap_or("");
    ref_uid.is_empty() || ref_uid == claim.metadata.uid.as_deref().unwrap_or("")
}

/// The result of `GetBindVolumeToClaim`: the PV as the binding writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct VolumeBindUpdate<V = PersistentVolume> {
    /// The PV with its claimRef (and, unless pre-bound, the bound-by-controller annotation) set.
    pub volume: V,
    /// Whether anything changed.
    pub dirty: bool,
    /// Whether `pv.kubernetes.io/bound-by-controller: "yes"` was added (the PV was not pre-bound).
    pub set_bound_by_controller: bool,
}

/// `GetBindVolumeToClaim`: sets the PV's claimRef to the claim (kind, apiVersion, namespace, name, uid,
/// resourceVersion, as `reference.GetReference` does) unless it already names it, and marks the binding
/// as the controller's unless the user pre-bound the PV.
pub fn bind_volume_to_claim<V: BindableVolume>(
    volume: &V,
    claim: &PersistentVolumeClaim,
) -> VolumeBindUpdate<V> {
    let should_set_bound_by_controller = !is_volume_bound_to_claim(volume, claim);
    let mut updated = volume.clone();
    let mut dirty = false;

    let claim_ns = claim.metadata.namespace.as_deref().unwrap_or("");
    let claim_uid = claim.metadata.uid.as_deref().unwrap_or("");
    let ref_matches = volume.claim_ref().is_some_and(|r| {
        r.name.as_deref().unwrap_or("") == name_of(&claim.metadata)
            && r.namespace.as_deref().unwrap_or("") == claim_ns
            && r.uid.as_deref().unwrap_or("") == claim_uid
    });
    if !ref_matches {
        let non_empty = |s: Option<&String>| s.filter(|s| !s.is_empty()).cloned();
        updated.set_claim_ref(ObjectReference {
            api_version: Some("v1".to_string()),
            kind: Some("PersistentVolumeClaim".to_string()),
            namespace: non_empty(claim.metadata.namespace.as_ref()),
            name: non_empty(claim.metadata.name.as_ref()),
            uid: non_empty(claim.metadata.uid.as_ref()),
            resource_version: non_empty(claim.metadata.resource_version.as_ref()),
            ..Default::default()
        });
        dirty = true;
    }

    let mut set_bound_by_controller = false;
    if should_set_bound_by_controller && annotation(updated.meta(), ANN_BOUND_BY_CONTROLLER).is_none() {
        updated
            .meta_mut()
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(ANN_BOUND_BY_CONTROLLER.to_string(), "yes".to_string());
        dirty = true;
        set_bound_by_controller = true;
    }

    VolumeBindUpdate {
        volume: updated,
        dirty,
        set_bound_by_controller,
    }
}

/// A PV that an unbound claim of the pod could be matched to, with its node affinity parsed once per
/// cycle (matching runs for every node).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CandidateVolume {
    /// The PV.
    pub pv: Arc<PersistentVolume>,
    /// Its required node affinity.
    pub affinity: VolumeAffinity,
}

impl CandidateVolume {
    /// Wraps a PV.
    pub(crate) fn new(pv: Arc<PersistentVolume>) -> Self {
        let affinity = VolumeAffinity::of(&pv);
        CandidateVolume { pv, affinity }
    }
}

/// `FindMatchingVolume` in the scheduler's flavour (a node is given; VolumeAttributesClass is GA and
/// locked on in v1.37): a PV pre-bound to the claim wins at once if the node can use it (and if it
/// cannot, nothing matches); otherwise the smallest Available PV of the claim's class that is big
/// enough, has the same volume mode and attributes class, is not being deleted, matches the claim's
/// selector, offers the claim's access modes and is reachable from the node. `excluded` are PVs already
/// chosen for other claims of the pod. Without a node (the PV controller's path) and with
/// `delay_binding`, only pre-bound PVs match.
pub(crate) fn find_matching_volume<'a>(
    claim: &PersistentVolumeClaim,
    volumes: &'a [CandidateVolume],
    node_labels: Option<&Labels>,
    excluded: &HashSet<String>,
    delay_binding: bool,
) -> Result<Option<&'a CandidateVolume>, String> {
    let wants = ClaimWants::of(claim)?;
    let mut smallest: Option<(&CandidateVolume, i64)> = None;
    for candidate in volumes {
        let volume = &*candidate.pv;
        if excluded.contains(name_of(&volume.metadata)) {
            continue;
        }
        if wants.volume_mismatch(volume).is_some() {
            continue;
        }
        let affinity_ok = node_labels.is_none_or(|labels| candidate.affinity.matches(labels));
        if is_volume_bound_to_claim(volume, claim) {
            // A pre-bound PV is the only acceptable one for its claim: if this node cannot reach it, the
            // claim has no match here at all.
            return Ok(affinity_ok.then_some(candidate));
        }
        if node_labels.is_none() && delay_binding {
            continue;
        }
        if wants.binding_mismatch(candidate, node_labels).is_some() {
            continue;
        }
        let capacity = volume_capacity_bytes(volume);
        if smallest.is_none_or(|(_, size)| size > capacity) {
            smallest = Some((candidate, capacity));
        }
    }
    Ok(smallest.map(|(c, _)| c))
}

/// Why a PV cannot serve a claim: the first check of `FindMatchingVolume` it fails, in its order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PvMismatch {
    /// `spec.claimRef` names another claim (`namespace/name`).
    ClaimedByAnother(String),
    /// Smaller than the claim's request (both as written).
    TooSmall {
        /// The PV's capacity.
        capacity: String,
        /// The claim's request.
        requested: String,
    },
    /// `volumeMode` differs (Filesystem when unset).
    VolumeMode,
    /// `volumeAttributesClassName` differs.
    VolumeAttributesClass,
    /// Being deleted.
    Deleting,
    /// Not Available (`Released`, `Failed`, `Pending`…).
    Phase(String),
    /// Its labels do not match the claim's selector.
    Selector,
    /// Another storage class.
    Class(String),
    /// Its node affinity excludes the node.
    NodeAffinity,
    /// It lacks an access mode the claim asks for.
    AccessModes,
}

impl std::fmt::Display for PvMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PvMismatch::ClaimedByAnother(claim) => write!(f, "bound to persistentvolumeclaim {claim}"),
            PvMismatch::TooSmall { capacity, requested } => {
                write!(f, "capacity {capacity} is less than the {requested} requested")
            }
            PvMismatch::VolumeMode => f.write_str("another volumeMode"),
            PvMismatch::VolumeAttributesClass => f.write_str("another volumeAttributesClassName"),
            PvMismatch::Deleting => f.write_str("being deleted"),
            PvMismatch::Phase(phase) => write!(f, "phase {phase}, not Available"),
            PvMismatch::Selector => f.write_str("labels the claim's selector does not match"),
            PvMismatch::Class(class) => write!(f, "storage class {class:?}"),
            PvMismatch::NodeAffinity => f.write_str("node affinity excludes the node"),
            PvMismatch::AccessModes => f.write_str("lacks an access mode the claim asks for"),
        }
    }
}

/// What a claim asks of a PV, parsed once for all the candidates.
pub(crate) struct ClaimWants<'c> {
    claim: &'c PersistentVolumeClaim,
    spec: std::borrow::Cow<'c, PersistentVolumeClaimSpec>,
    requested: i64,
    selector: Option<Selector>,
}

impl<'c> ClaimWants<'c> {
    /// Parses the claim's selector; an invalid one is upstream's error.
    pub(crate) fn of(claim: &'c PersistentVolumeClaim) -> Result<Self, String> {
        let spec = match &claim.spec {
            Some(spec) => std::borrow::Cow::Borrowed(spec),
            None => std::borrow::Cow::Owned(PersistentVolumeClaimSpec::default()),
        };
        let selector = match &spec.selector {
            None => None,
            Some(s) => Some(Selector::from_label_selector(Some(s)).map_err(|e| {
                format!(
                    "error creating internal label selector for claim: {}: {e}",
                    claim_key(claim)
                )
            })?),
        };
        Ok(ClaimWants {
            claim,
            requested: claim_request_bytes(claim),
            spec,
            selector,
        })
    }

    /// The checks every PV must pass, pre-bound ones included: not another claim's, big enough, the
    /// same volume mode and attributes class, not being deleted.
    pub(crate) fn volume_mismatch(&self, volume: &PersistentVolume) -> Option<PvMismatch> {
        let default_pv_spec = PersistentVolumeSpec::default();
        let spec = volume.spec.as_ref().unwrap_or(&default_pv_spec);
        if let Some(claim_ref) = &spec.claim_ref
            && !is_volume_bound_to_claim(volume, self.claim)
        {
            return Some(PvMismatch::ClaimedByAnother(format!(
                "{}/{}",
                claim_ref.namespace.as_deref().unwrap_or(""),
                claim_ref.name.as_deref().unwrap_or("")
            )));
        }
        if volume_capacity_bytes(volume) < self.requested {
            let capacity = spec
                .capacity
                .as_ref()
                .and_then(|c| c.get(RESOURCE_STORAGE))
                .map(|q| q.0.clone())
                .unwrap_or_else(|| "0".into());
            let requested = claim_request(self.claim).map(|q| q.0.clone()).unwrap_or_default();
            return Some(PvMismatch::TooSmall { capacity, requested });
        }
        if check_volume_mode_mismatches(&self.spec, spec) {
            return Some(PvMismatch::VolumeMode);
        }
        let claim_vac = self.spec.volume_attributes_class_name.as_deref().unwrap_or("");
        if spec.volume_attributes_class_name.as_deref().unwrap_or("") != claim_vac {
            return Some(PvMismatch::VolumeAttributesClass);
        }
        if volume.metadata.deletion_timestamp.is_some() {
            return Some(PvMismatch::Deleting);
        }
        None
    }

    /// The checks a PV not pre-bound to the claim must pass too: Available, selected, of the claim's
    /// class, reachable from the node and offering the claim's access modes (both only with a node).
    pub(crate) fn binding_mismatch(
        &self,
        candidate: &CandidateVolume,
        node_labels: Option<&Labels>,
    ) -> Option<PvMismatch> {
        let volume = &*candidate.pv;
        let phase = volume
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or("");
        if phase != VOLUME_AVAILABLE {
            // Volumes in other phases are about to change state; binding them would likely conflict.
            return Some(PvMismatch::Phase(phase.to_owned()));
        }
        if let Some(selector) = &self.selector
            && !selector.matches_opt(volume.metadata.labels.as_ref())
        {
            return Some(PvMismatch::Selector);
        }
        if volume_class(volume) != claim_class(self.claim) {
            return Some(PvMismatch::Class(volume_class(volume).to_owned()));
        }
        if node_labels.is_some_and(|labels| !candidate.affinity.matches(labels)) {
            return Some(PvMismatch::NodeAffinity);
        }
        if node_labels.is_some() && !check_access_modes(self.claim, volume) {
            return Some(PvMismatch::AccessModes);
        }
        None
    }

    /// Why `candidate` cannot serve the claim on a node with `node_labels`, `None` when it can.
    pub(crate) fn mismatch(&self, candidate: &CandidateVolume, node_labels: &Labels) -> Option<PvMismatch> {
        if let Some(mismatch) = self.volume_mismatch(&candidate.pv) {
            return Some(mismatch);
        }
        if is_volume_bound_to_claim(&*candidate.pv, self.claim) {
            return (!candidate.affinity.matches(node_labels)).then_some(PvMismatch::NodeAffinity);
        }
        self.binding_mismatch(candidate, Some(node_labels))
    }
}
