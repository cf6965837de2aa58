//! The volume binder: the pure decisions behind VolumeBinding, usable without a framework (the webhook
//! calls them for pods created with `spec.nodeName` and for `pods/binding`).
//!
//! - [`classify_pod_claims`]: the pod's claims as bound, delayed (WaitForFirstConsumer, unbound) or
//!   immediate-unbound, with PreFilter's rejections.
//! - [`find_pod_volumes_for_claims`] / [`find_pod_volumes`]: `FindPodVolumes` for one node — which PV
//!   each delayed claim would be bound to, which claims would be provisioned, or why the node cannot work.
//! - [`assume_pod_volumes`]: Reserve's in-memory binding; [`prebind_actions`]: PreBind's writes as actions.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use crate::snapshot::volume::PersistentVolume;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod, TopologySelectorTerm};
use k8s_openapi::api::storage::v1::{CSIStorageCapacity, StorageClass};

use crate::action::{Action, ObjectRef};
use crate::framework::status::{Code, Status};
use crate::labels::{Labels, Requirement, Selector};
use crate::plugins::volume_binding::assume::{AssumedVolumes, VolumeView};
use crate::plugins::volume_binding::pv_helpers::*;
use crate::plugins::volume_binding::{
    ERR_REASON_BIND_CONFLICT, ERR_REASON_NODE_CONFLICT, ERR_REASON_NOT_ENOUGH_SPACE, ERR_REASON_PV_NOT_EXIST,
    ERR_REASON_UNBOUND_IMMEDIATE_CLAIMS,
};
use crate::resource::quantity_value;
use crate::snapshot::Snapshot;

/// The pod's claims, sorted by how they stand (`PodVolumeClaims`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct PodVolumeClaims {
    /// Claims fully bound to a PV.
    pub bound_claims: Vec<Arc<PersistentVolumeClaim>>,
    /// Unbound claims of a WaitForFirstConsumer class: the scheduler binds or provisions them.
    pub unbound_claims_delay_binding: Vec<Arc<PersistentVolumeClaim>>,
    /// Unbound claims the PV controller should have bound already (Immediate, no or unknown class, or
    /// pre-bound through `spec.volumeName`).
    pub unbound_claims_immediate: Vec<Arc<PersistentVolumeClaim>>,
    /// The PVs of each delayed claim's class, by class name. Shared, not copied, when the cycle state
    /// is cloned for each node with nominated pods (upstream's stateData.Clone returns itself): at
    /// thousands of PVs a deep copy per node dominated the whole cycle.
    pub unbound_volumes_delay_binding: BTreeMap<String, Arc<Vec<CandidateVolume>>>,
}

/// A delayed claim and the PV chosen for it.
#[derive(Debug, Clone, PartialEq)]
pub struct BindingInfo {
    /// The claim.
    pub pvc: Arc<PersistentVolumeClaim>,
    /// The PV it would be bound to.
    pub pv: Arc<PersistentVolume>,
}

impl BindingInfo {
    /// The PV's storage class.
    pub fn storage_class_name(&self) -> &str {
        self.pv
            .spec
            .as_ref()
            .and_then(|s| s.storage_class_name.as_deref())
            .unwrap_or("")
    }
}

/// A delayed claim that would be provisioned, with the CSIStorageCapacity that vouched for it.
#[derive(Debug, Clone, PartialEq)]
pub struct DynamicProvision {
    /// The claim.
    pub pvc: Arc<PersistentVolumeClaim>,
    /// The capacity object that has room for it (only when the CSI driver tracks capacity).
    pub node_capacity: Option<Arc<CSIStorageCapacity>>,
}

/// Which claim made a node unusable, and how (one of the `ERR_REASON_*` constants).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimConflict {
    /// `namespace/name` of the claim.
    pub claim: String,
    /// The Filter reason it leads to.
    pub reason: &'static str,
    /// A human-readable detail (not part of kube-scheduler's messages).
    pub message: String,
}

/// What `FindPodVolumes` found for one node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodVolumes {
    /// Delayed claims matched to existing PVs (smallest fitting PV each, never one PV twice).
    pub static_bindings: Vec<BindingInfo>,
    /// Delayed claims to provision on this node.
    pub dynamic_provisions: Vec<DynamicProvision>,
    /// Why the node does not fit, in kube-scheduler's order; empty when it fits.
    pub reasons: Vec<&'static str>,
    /// The claims behind `reasons`.
    pub conflicts: Vec<ClaimConflict>,
}

impl PodVolumes {
    /// True when the node can serve all the pod's claims.
    pub fn fits(&self) -> bool {
        self.reasons.is_empty()
    }

    /// The Filter status: Success, or UnschedulableAndUnresolvable with the reasons.
    pub fn status(&self) -> Status {
        if self.reasons.is_empty() {
            Status::success()
        } else {
            Status::with_reasons(
                Code::UnschedulableAndUnresolvable,
                self.reasons.iter().map(|r| r.to_string()).collect(),
            )
        }
    }

    /// True when nothing has to be written for the pod's volumes on this node.
    pub fn is_empty(&self) -> bool {
        self.static_bindings.is_empty() && self.dynamic_provisions.is_empty()
    }
}

/// `podHasPVCs`: whether the pod uses any claim, failing on the first claim that is missing, lost, being
/// deleted, or (for a generic ephemeral volume) not created for this pod. Reads the snapshot only, as
/// upstream reads the informer and not the assume cache.
pub(crate) fn pod_has_pvcs(snapshot: &Snapshot, pod: &Pod) -> Result<bool, String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    let mut has_pvc = false;
    for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let Some((claim_name, ephemeral)) = volume_claim_name(pod, volume) else {
            continue;
        };
        has_pvc = true;
        let Some(claim) = snapshot.pvc(namespace, &claim_name) else {
            // Right after a pod with a generic ephemeral volume is created, its claim does not exist yet.
            return Err(if ephemeral {
                format!(
                    "waiting for ephemeral volume controller to create the persistentvolumeclaim {claim_name:?}"
                )
            } else {
                format!("persistentvolumeclaim {claim_name:?} not found")
            });
        };
        let phase = claim.status.as_ref().and_then(|s| s.phase.as_deref());
        if phase == Some(CLAIM_LOST) {
            return Err(format!(
                "persistentvolumeclaim {:?} bound to non-existent persistentvolume {:?}",
                name_of(&claim.metadata),
                claim_volume_name(claim)
            ));
        }
        if claim.metadata.deletion_timestamp.is_some() {
            return Err(format!(
                "persistentvolumeclaim {:?} is being deleted",
                name_of(&claim.metadata)
            ));
        }
        if ephemeral {
            ephemeral_volume_is_for_pod(pod, claim)?;
        }
    }
    Ok(has_pvc)
}

/// `GetPodVolumeClaims`: the pod's claims by binding state (through the assumed volumes), and the PVs of
/// each delayed claim's class.
pub(crate) fn get_pod_volume_claims(view: VolumeView<'_>, pod: &Pod) -> Result<PodVolumeClaims, String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    let mut claims = PodVolumeClaims::default();
    for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let Some((claim_name, ephemeral)) = volume_claim_name(pod, volume) else {
            continue;
        };
        let Some(claim) = view.pvc(namespace, &claim_name) else {
            let key = format!("{namespace}/{claim_name}");
            return Err(format!(
                "error getting PVC {key:?}: persistentvolumeclaims {key:?} not found"
            ));
        };
        if ephemeral {
            ephemeral_volume_is_for_pod(pod, &claim)?;
        }
        if is_claim_fully_bound(&claim) {
            claims.bound_claims.push(claim);
        } else if is_delay_binding_mode(&claim, &view.snapshot.storage_classes)?
            && claim_volume_name(&claim).is_empty()
        {
            claims.unbound_claims_delay_binding.push(claim);
        } else {
            claims.unbound_claims_immediate.push(claim);
        }
    }
    for claim in &claims.unbound_claims_delay_binding {
        let class = claim_class(claim).to_string();
        if let std::collections::btree_map::Entry::Vacant(entry) =
            claims.unbound_volumes_delay_binding.entry(class)
        {
            // A PV bound to a claim other than this pod's delayed ones is skipped by FindMatchingVolume
            // on every node; leaving it out here, once, spares each node's walk (with every PV of a
            // busy class bound, that walk was most of the cycle) and changes no match.
            let delayed = &claims.unbound_claims_delay_binding;
            let pvs = view
                .pvs_of_class(entry.key())
                .into_iter()
                .filter(|pv| {
                    pv.spec.as_ref().is_none_or(|s| s.claim_ref.is_none())
                        || delayed.iter().any(|c| is_volume_bound_to_claim(&**pv, c))
                })
                .map(CandidateVolume::new)
                .collect();
            entry.insert(Arc::new(pvs));
        }
    }
    Ok(claims)
}

/// VolumeBinding's PreFilter as a function: `Ok(None)` when the pod uses no claim (the plugin Skips),
/// the classified claims otherwise, or the rejection (UnschedulableAndUnresolvable for a missing, lost,
/// deleted, foreign or immediate-unbound claim; Error for an internal failure).
pub(crate) fn classify_pod_claims(
    view: VolumeView<'_>,
    pod: &Pod,
) -> Result<Option<PodVolumeClaims>, Status> {
    match pod_has_pvcs(view.snapshot, pod) {
        Err(message) => return Err(Status::unresolvable(message)),
        Ok(false) => return Ok(None),
        Ok(true) => {}
    }
    let claims = get_pod_volume_claims(view, pod).map_err(Status::error)?;
    if !claims.unbound_claims_immediate.is_empty() {
        // The PV controller binds these; the pod can only wait for it.
        return Err(Status::unresolvable(ERR_REASON_UNBOUND_IMMEDIATE_CLAIMS));
    }
    Ok(Some(claims))
}

/// `FindPodVolumes` for a pod straight from the snapshot: classification, then the node check. A pod
/// without claims gets an empty, fitting result; PreFilter rejections and internal errors are `Err`.
pub fn find_pod_volumes(snapshot: &Snapshot, pod: &Pod, node: &Node) -> Result<PodVolumes, Status> {
    find_pod_volumes_in(VolumeView::new(snapshot), pod, node)
}

/// [`find_pod_volumes`] through assumed volumes (claims bound or annotated in memory by earlier pods).
pub(crate) fn find_pod_volumes_in(
    view: VolumeView<'_>,
    pod: &Pod,
    node: &Node,
) -> Result<PodVolumes, Status> {
    match classify_pod_claims(view, pod)? {
        None => Ok(PodVolumes::default()),
        Some(claims) => find_pod_volumes_for_claims(view, &claims, node).map_err(Status::error),
    }
}

/// `FindPodVolumes`: can this node serve the classified claims?
///
/// Bound claims need their PV to exist and accept the node. Delayed claims annotated with a selected
/// node only fit that node; the others are matched to existing PVs (smallest requests first, each PV
/// used once), and those left over must be provisionable here: a provisioner, the class's
/// allowedTopologies, and room in a CSIStorageCapacity when the CSI driver tracks capacity.
/// `Err` is an internal error (a claim without class, an unknown class, a bad selector).
pub(crate) fn find_pod_volumes_for_claims(
    view: VolumeView<'_>,
    claims: &PodVolumeClaims,
    node: &Node,
) -> Result<PodVolumes, String> {
    static EMPTY: Labels = BTreeMap::new();
    let node_labels = node.metadata.labels.as_ref().unwrap_or(&EMPTY);
    let node_name = name_of(&node.metadata);

    let mut result = PodVolumes::default();
    let mut bound_volumes_satisfied = true;
    let mut bound_pvs_found = true;
    let mut unbound_volumes_satisfied = true;
    let mut sufficient_storage = true;

    // The checks below stop at the first failure of each kind, as upstream's early returns do; the
    // reasons are then listed in a fixed order whatever order they were found in.
    'checks: {
        if !claims.bound_claims.is_empty() {
            let (satisfied, found) =
                check_bound_claims(view, &claims.bound_claims, node_labels, node_name, &mut result);
            bound_volumes_satisfied = satisfied;
            bound_pvs_found = found;
        }

        if claims.unbound_claims_delay_binding.is_empty() {
            break 'checks;
        }
        let mut to_match = Vec::new();
        let mut to_provision = Vec::new();
        for claim in &claims.unbound_claims_delay_binding {
            match selected_node(claim) {
                Some(selected) if selected != node_name => {
                    result.conflicts.push(ClaimConflict {
                        claim: claim_key(claim),
                        reason: ERR_REASON_BIND_CONFLICT,
                        message: format!(
                            "persistentvolumeclaim {:?} is being provisioned for node {selected:?} ({ANN_SELECTED_NODE})",
                            name_of(&claim.metadata)
                        ),
                    });
                    unbound_volumes_satisfied = false;
                    break 'checks;
                }
                Some(_) => to_provision.push(ProvisionCandidate {
                    claim: claim.clone(),
                    no_static_match: false,
                }),
                None => to_match.push(claim.clone()),
            }
        }

        if !to_match.is_empty() {
            let matched = find_matching_volumes(claims, to_match, node_labels)?;
            unbound_volumes_satisfied = matched.found_matches;
            result.static_bindings = matched.bindings;
            to_provision.extend(matched.unmatched.into_iter().map(|claim| ProvisionCandidate {
                claim,
                no_static_match: true,
            }));
        }

        if !to_provision.is_empty() {
            // Provisioning decides for the claims no PV matched, so its verdict replaces the matching one.
            let outcome = check_volume_provisions(view.snapshot, &to_provision, node_labels, node_name)?;
            unbound_volumes_satisfied = outcome.satisfied;
            sufficient_storage = outcome.sufficient_storage;
            result.dynamic_provisions = outcome.provisions;
            result.conflicts.extend(outcome.conflict);
        }
    }

    if !bound_volumes_satisfied {
        result.reasons.push(ERR_REASON_NODE_CONFLICT);
    }
    if !unbound_volumes_satisfied {
        result.reasons.push(ERR_REASON_BIND_CONFLICT);
    }
    if !sufficient_storage {
        result.reasons.push(ERR_REASON_NOT_ENOUGH_SPACE);
    }
    if !bound_pvs_found {
        result.reasons.push(ERR_REASON_PV_NOT_EXIST);
    }
    Ok(result)
}

/// `checkBoundClaims`: (node affinity satisfied, PVs found), stopping at the first failing claim.
fn check_bound_claims(
    view: VolumeView<'_>,
    claims: &[Arc<PersistentVolumeClaim>],
    node_labels: &Labels,
    node_name: &str,
    result: &mut PodVolumes,
) -> (bool, bool) {
    for claim in claims {
        let pv_name = claim_volume_name(claim);
        let Some(pv) = view.pv(pv_name) else {
            result.conflicts.push(ClaimConflict {
                claim: claim_key(claim),
                reason: ERR_REASON_PV_NOT_EXIST,
                message: format!(
                    "persistentvolumeclaim {:?} is bound to persistentvolume {pv_name:?}, which does not exist",
                    name_of(&claim.metadata)
                ),
            });
            return (true, false);
        };
        if let Err(e) = check_node_affinity(&pv, node_labels) {
            result.conflicts.push(ClaimConflict {
                claim: claim_key(claim),
                reason: ERR_REASON_NODE_CONFLICT,
                message: format!("pv {pv_name:?} node affinity doesn't match node {node_name:?}: {e}"),
            });
            return (false, true);
        }
    }
    (true, true)
}

struct MatchOutcome {
    found_matches: bool,
    bindings: Vec<BindingInfo>,
    unmatched: Vec<Arc<PersistentVolumeClaim>>,
}

/// `findMatchingVolumes`: the bindings found and the claims left for provisioning. Claims are taken by
/// increasing request so small claims do not take the PVs big ones need.
fn find_matching_volumes(
    claims: &PodVolumeClaims,
    mut to_match: Vec<Arc<PersistentVolumeClaim>>,
    node_labels: &Labels,
) -> Result<MatchOutcome, String> {
    to_match.sort_by_key(|c| claim_request_bytes(c));
    let mut chosen: HashSet<String> = HashSet::new();
    let mut found_matches = true;
    let mut bindings = Vec::new();
    let mut unmatched = Vec::new();
    for claim in to_match {
        let volumes = claims
            .unbound_volumes_delay_binding
            .get(claim_class(&claim))
            .map(|v| v.as_slice())
            .unwrap_or(&[]);
        match find_matching_volume(&claim, volumes, Some(node_labels), &chosen, true)? {
            None => {
                unmatched.push(claim);
                found_matches = false;
            }
            Some(candidate) => {
                chosen.insert(name_of(&candidate.pv.metadata).to_string());
                bindings.push(BindingInfo {
                    pvc: claim,
                    pv: candidate.pv.clone(),
                });
            }
        }
    }
    Ok(MatchOutcome {
        found_matches,
        bindings,
        unmatched,
    })
}

struct ProvisionCandidate {
    claim: Arc<PersistentVolumeClaim>,
    /// The claim went through static matching and found no PV (for the conflict message only).
    no_static_match: bool,
}

struct ProvisionOutcome {
    satisfied: bool,
    sufficient_storage: bool,
    provisions: Vec<DynamicProvision>,
    conflict: Option<ClaimConflict>,
}

/// `checkVolumeProvisions`: every claim must be provisionable on the node; stops at the first that is not.
fn check_volume_provisions(
    snapshot: &Snapshot,
    candidates: &[ProvisionCandidate],
    node_labels: &Labels,
    node_name: &str,
) -> Result<ProvisionOutcome, String> {
    let mut provisions = Vec::new();
    for ProvisionCandidate {
        claim,
        no_static_match,
    } in candidates
    {
        let class_name = claim_class(claim);
        if class_name.is_empty() {
            return Err(format!("no class for claim {:?}", claim_key(claim)));
        }
        let Some(class) = snapshot.storage_classes.get(class_name) else {
            return Err(format!("failed to find storage class {class_name:?}"));
        };
        let claim_name = name_of(&claim.metadata);
        let no_match_note = if *no_static_match {
            format!(
                "no available persistentvolume matches persistentvolumeclaim {claim_name:?} on this node and "
            )
        } else {
            String::new()
        };
        let unsatisfied = |message: String| ProvisionOutcome {
            satisfied: false,
            sufficient_storage: true,
            provisions: Vec::new(),
            conflict: Some(ClaimConflict {
                claim: claim_key(claim),
                reason: ERR_REASON_BIND_CONFLICT,
                message,
            }),
        };
        let provisioner = class.provisioner.as_str();
        if provisioner.is_empty() || provisioner == NOT_SUPPORTED_PROVISIONER {
            return Ok(unsatisfied(format!(
                "{no_match_note}storageclass {class_name:?} does not support dynamic provisioning"
            )));
        }
        if !match_topology_selector_terms(class.allowed_topologies.as_deref(), node_labels) {
            return Ok(unsatisfied(format!(
                "{no_match_note}node {node_name:?} is outside the allowedTopologies of storageclass {class_name:?}"
            )));
        }
        let (sufficient, capacity) = has_enough_capacity(snapshot, provisioner, claim, class, node_labels);
        if !sufficient {
            let size = claim_request(claim).map(|q| q.0.clone()).unwrap_or_default();
            return Ok(ProvisionOutcome {
                satisfied: true,
                sufficient_storage: false,
                provisions: Vec::new(),
                conflict: Some(ClaimConflict {
                    claim: claim_key(claim),
                    reason: ERR_REASON_NOT_ENOUGH_SPACE,
                    message: format!(
                        "no CSIStorageCapacity of storageclass {class_name:?} reachable from node {node_name:?} has room for {size} (persistentvolumeclaim {claim_name:?})"
                    ),
                }),
            });
        }
        provisions.push(DynamicProvision {
            pvc: claim.clone(),
            node_capacity: capacity,
        });
    }
    Ok(ProvisionOutcome {
        satisfied: true,
        sufficient_storage: true,
        provisions,
        conflict: None,
    })
}

/// `MatchTopologySelectorTerms`: no terms match every node; otherwise any term whose requirements (key
/// In values) all hold. Empty or invalid terms match nothing.
fn match_topology_selector_terms(terms: Option<&[TopologySelectorTerm]>, node_labels: &Labels) -> bool {
    let terms = terms.unwrap_or(&[]);
    if terms.is_empty() {
        return true;
    }
    terms.iter().any(|term| {
        let exprs = term.match_label_expressions.as_deref().unwrap_or(&[]);
        !exprs.is_empty()
            && exprs.iter().all(|e| {
                // A requirement without values is invalid, which makes the whole term match nothing.
                !e.values.is_empty() && Requirement::In(e.key.clone(), e.values.clone()).matches(node_labels)
            })
    })
}

/// `hasEnoughCapacity`: only CSI drivers that opted into capacity tracking are checked; then some
/// CSIStorageCapacity of the class, reachable from the node, must fit the request.
fn has_enough_capacity(
    snapshot: &Snapshot,
    provisioner: &str,
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    node_labels: &Labels,
) -> (bool, Option<Arc<CSIStorageCapacity>>) {
    let Some(quantity) = claim_request(claim) else {
        return (true, None);
    };
    let Some(driver) = snapshot.csi_drivers.get(provisioner) else {
        return (true, None);
    };
    if driver.spec.storage_capacity != Some(true) {
        return (true, None);
    }
    let size = quantity_value(quantity);
    let class_name = name_of(&class.metadata);
    let found = snapshot.csi_storage_capacities.iter().find(|c| {
        c.storage_class_name == class_name && capacity_sufficient(c, size) && node_has_access(node_labels, c)
    });
    match found {
        Some(c) => (true, Some(c.clone())),
        None => (false, None),
    }
}

/// `volumeLimit`: maximumVolumeSize when reported (it is the precise limit for one volume), else capacity.
pub(crate) fn volume_limit(capacity: &CSIStorageCapacity) -> Option<i64> {
    capacity
        .maximum_volume_size
        .as_ref()
        .or(capacity.capacity.as_ref())
        .map(quantity_value)
}

fn capacity_sufficient(capacity: &CSIStorageCapacity, size: i64) -> bool {
    volume_limit(capacity).is_some_and(|limit| limit >= size)
}

fn node_has_access(node_labels: &Labels, capacity: &CSIStorageCapacity) -> bool {
    let Some(topology) = &capacity.node_topology else {
        return false;
    };
    Selector::from_label_selector(Some(topology)).is_ok_and(|s| s.matches(node_labels))
}

/// `arePodVolumesBound`: every claim the pod uses is fully bound (through the assumed volumes).
pub(crate) fn are_pod_volumes_bound(view: VolumeView<'_>, pod: &Pod) -> bool {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .all(|volume| match volume_claim_name(pod, volume) {
            None => true,
            Some((claim_name, ephemeral)) => view.pvc(namespace, &claim_name).is_some_and(|claim| {
                (!ephemeral || ephemeral_volume_is_for_pod(pod, &claim).is_ok())
                    && is_claim_fully_bound(&claim)
            }),
        })
}

/// What Reserve assumed, so Unreserve can take exactly that back.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Assumption {
    /// Every claim was already fully bound: nothing assumed, nothing to write.
    pub all_bound: bool,
    /// PVs assumed bound to the pod's claims.
    pub pvs: Vec<Arc<PersistentVolume>>,
    /// PVCs assumed annotated with the selected node.
    pub pvcs: Vec<Arc<PersistentVolumeClaim>>,
}

/// `AssumePodVolumes`: binds the chosen PVs and annotates the claims to provision, in memory only. On
/// failure nothing stays assumed.
pub(crate) fn assume_pod_volumes(
    snapshot: &Snapshot,
    assumed: &mut AssumedVolumes,
    pod: &Pod,
    node_name: &str,
    pod_volumes: &PodVolumes,
) -> Result<Assumption, String> {
    if are_pod_volumes_bound(VolumeView::with_assumed(snapshot, Some(assumed)), pod) {
        return Ok(Assumption {
            all_bound: true,
            ..Default::default()
        });
    }
    let mut done = Assumption::default();
    for binding in &pod_volumes.static_bindings {
        let update = bind_volume_to_claim(binding.pv.as_ref(), &binding.pvc);
        if !update.dirty {
            continue;
        }
        match assumed.assume_pv(snapshot, update.volume) {
            Ok(pv) => done.pvs.push(pv),
            Err(e) => {
                revert_assumed_pod_volumes(assumed, &done);
                return Err(e);
            }
        }
    }
    for provision in &pod_volumes.dynamic_provisions {
        let mut claim = (*provision.pvc).clone();
        claim
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(ANN_SELECTED_NODE.to_string(), node_name.to_string());
        match assumed.assume_pvc(snapshot, claim) {
            Ok(pvc) => done.pvcs.push(pvc),
            Err(e) => {
                revert_assumed_pod_volumes(assumed, &done);
                return Err(e);
            }
        }
    }
    Ok(done)
}

/// `RevertAssumedPodVolumes`: drops what [`assume_pod_volumes`] assumed (idempotent).
pub(crate) fn revert_assumed_pod_volumes(assumed: &mut AssumedVolumes, assumption: &Assumption) {
    for pv in &assumption.pvs {
        assumed.restore_pv(pv);
    }
    for pvc in &assumption.pvcs {
        assumed.restore_pvc(pvc);
    }
}

/// A PV's or claim's reference: its UID as precondition. The resourceVersion the decision was made on
/// is the action's own `resource_version` (the PV's for BindPv), not the reference's.
fn object_ref(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> ObjectRef {
    ObjectRef {
        resource_version: None,
        ..ObjectRef::from_meta(meta)
    }
}

/// PreBind's writes (`bindAPIUpdate`): first every PV's claimRef (with the bound-by-controller
/// annotation unless the PV was pre-bound; see [`bind_volume_to_claim`]), then every claim to provision
/// gets `volume.kubernetes.io/selected-node: <node>`. Each write is conditioned on the resourceVersion
/// the decision was made on. `pod_volumes` is the node's [`PodVolumes`] as found (not as assumed).
pub fn prebind_actions(pod_volumes: &PodVolumes, node_name: &str) -> Vec<Action> {
    let binds = pod_volumes.static_bindings.iter().map(|b| Action::BindPv {
        pv: object_ref(&b.pv.metadata),
        claim: object_ref(&b.pvc.metadata),
        resource_version: b.pv.metadata.resource_version.clone(),
    });
    let annotations = pod_volumes
        .dynamic_provisions
        .iter()
        .map(|p| Action::AnnotatePvc {
            pvc: object_ref(&p.pvc.metadata),
            key: ANN_SELECTED_NODE.to_string(),
            value: node_name.to_string(),
            resource_version: p.pvc.metadata.resource_version.clone(),
        });
    binds.chain(annotations).collect()
}
