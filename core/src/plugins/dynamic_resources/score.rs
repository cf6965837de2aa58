//! DynamicResources' Score (`computeScore`): a node scores higher when the prioritized-list
//! (`firstAvailable`) requests of the pod's claims got an earlier subrequest there.
//!
//! Per release: no Score before v1.35; v1.35.4 and v1.36.1 pair allocation result `i` with claim
//! `i` and score even with `DRAPrioritizedList` off; v1.36.2 and later read allocated claims from
//! their status and need the gate (`ReleaseChanges::dynamic_resources_score*`).

use k8s_openapi::api::resource::v1::{AllocationResult, ResourceClaim};

/// `resourceapi.FirstAvailableDeviceRequestMaxSize`: the first subrequest is worth this much, the
/// next one less, and so on.
pub(crate) const FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE: i64 = 8;

/// Why a node's allocations cannot be scored.
pub(crate) const ERR_TOO_FEW_ALLOCATIONS: &str = "number of allocations";

/// How the release pairs a node's allocation results with the pod's claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClaimIndexing {
    /// v1.36.2 and later: an allocated claim's allocation is in its status; the results are those
    /// of the claims that needed one, in claim order.
    UnallocatedClaims,
    /// v1.35.4 and v1.36.1: result `i` is claim `i`'s, whether or not it was allocated already.
    EveryClaim,
}

/// The score of `node_allocations` for `claims`, paired as `indexing` says: for every claim, every
/// `firstAvailable` subrequest that got a device adds `8 - its index`.
pub(crate) fn compute_score(
    claims: &[std::sync::Arc<ResourceClaim>],
    node_allocations: &[AllocationResult],
    indexing: ClaimIndexing,
) -> Result<i64, String> {
    let mut score = 0;
    let mut unallocated = 0;
    for (i, claim) in claims.iter().enumerate() {
        let allocation = match claim.status.as_ref().and_then(|s| s.allocation.as_ref()) {
            _ if indexing == ClaimIndexing::EveryClaim => {
                let Some(a) = node_allocations.get(i) else {
                    return Err(format!(
                        "{ERR_TOO_FEW_ALLOCATIONS} {} is smaller than number of claims",
                        node_allocations.len()
                    ));
                };
                a
            }
            Some(a) => a,
            None => {
                let Some(a) = node_allocations.get(unallocated) else {
                    return Err(format!(
                        "{ERR_TOO_FEW_ALLOCATIONS} {} is smaller than number of claims needing allocation",
                        node_allocations.len()
                    ));
                };
                unallocated += 1;
                a
            }
        };
        let allocated_sub_requests: std::collections::HashSet<&str> = allocation
            .devices
            .iter()
            .flat_map(|d| d.results.iter().flatten())
            .map(|r| r.request.as_str())
            .filter(|r| r.contains('/'))
            .collect();
        for request in super::claims::requests(claim) {
            if request.exactly.is_some() {
                continue;
            }
            for (i, sub) in request.first_available.iter().flatten().enumerate() {
                let reference = format!("{}/{}", request.name, sub.name);
                if allocated_sub_requests.contains(reference.as_str()) {
                    score += FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE - i as i64;
                }
            }
        }
    }
    Ok(score)
}
