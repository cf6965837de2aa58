//! The pod's ResourceClaims as kube-scheduler resolves them (`foreachPodResourceClaim`,
//! `resourceclaim.Name`, `IsForPod`) and the claim store a cycle works on.

use std::sync::Arc;

use k8s_openapi::api::resource::v1::ResourceClaim;

use crate::snapshot::{PodInfo, Snapshot, namespaced_key};

/// `resourceclaim.ErrClaimNotFound`.
pub(crate) const ERR_CLAIM_NOT_CREATED: &str = "ResourceClaim not created yet";
/// `resourceclaim.ErrAPIUnsupported`.
pub(crate) const ERR_API_UNSUPPORTED: &str = "none of the supported fields are set";

/// The pod's claims, in `spec.resourceClaims` order, skipping template claims that were not
/// generated on purpose. The error is kube-scheduler's text for the first claim that is missing,
/// being deleted, or (for a generated claim) not owned by the pod.
pub(crate) fn pod_resource_claims(
    snapshot: &Snapshot,
    pod: &PodInfo,
) -> Result<Vec<Arc<ResourceClaim>>, String> {
    let Some(pod_claims) = pod.pod.spec.as_ref().and_then(|s| s.resource_claims.as_ref()) else {
        return Ok(Vec::new());
    };
    let (ns, name) = (pod.namespace(), pod.name());
    let mut claims = Vec::with_capacity(pod_claims.len());
    for pod_claim in pod_claims {
        let (claim_name, must_check_owner) = if let Some(n) = &pod_claim.resource_claim_name {
            (n.clone(), false)
        } else if pod_claim.resource_claim_template_name.is_some() {
            let statuses = pod
                .pod
                .status
                .as_ref()
                .and_then(|s| s.resource_claim_statuses.as_ref());
            match statuses
                .into_iter()
                .flatten()
                .find(|st| st.name == pod_claim.name)
            {
                // No claim was generated on purpose: nothing to check.
                Some(st) => match &st.resource_claim_name {
                    Some(n) => (n.clone(), true),
                    None => continue,
                },
                None => return Err(format!("pod \"{ns}/{name}\": {ERR_CLAIM_NOT_CREATED}")),
            }
        } else {
            return Err(format!(
                "pod \"{ns}/{name}\", spec.resourceClaim {:?}: {ERR_API_UNSUPPORTED}",
                pod_claim.name
            ));
        };
        let key = namespaced_key(ns, &claim_name);
        let Some(claim) = snapshot.resource_claims.get(&key) else {
            return Err(format!("could not find ResourceClaim {key:?}"));
        };
        if claim.metadata.deletion_timestamp.is_some() {
            return Err(format!("resourceclaim {claim_name:?} is being deleted"));
        }
        if must_check_owner && !is_controlled_by(claim, pod) {
            return Err(format!(
                "ResourceClaim {ns}/{claim_name} was not created for Pod {ns}/{name} (Pod is not owner)"
            ));
        }
        claims.push(claim.clone());
    }
    Ok(claims)
}

/// `metav1.IsControlledBy(claim, pod)`.
fn is_controlled_by(claim: &ResourceClaim, pod: &PodInfo) -> bool {
    claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == pod.uid())
}

/// True when the claim has `status.allocation`.
pub(crate) fn is_allocated(claim: &ResourceClaim) -> bool {
    claim.status.as_ref().is_some_and(|s| s.allocation.is_some())
}

/// `namespace/name` of a claim, as `klog.KObj` prints it.
pub(crate) fn claim_key(claim: &ResourceClaim) -> String {
    namespaced_key(
        claim.metadata.namespace.as_deref().unwrap_or(""),
        claim.metadata.name.as_deref().unwrap_or(""),
    )
}

/// The claim's `spec.devices.requests`.
pub(crate) fn requests(
    claim: &ResourceClaim,
) -> impl Iterator<Item = &k8s_openapi::api::resource::v1::DeviceRequest> {
    claim
        .spec
        .iter()
        .flat_map(|s| s.devices.iter())
        .flat_map(|d| d.requests.iter().flatten())
}
