//! DynamicResources' Score (`computeScore`): a node scores higher when the prioritized-list
//! (`firstAvailable`) requests of the pod's claims got an earlier subrequest there.

use k8s_openapi::api::resource::v1::{AllocationResult, ResourceClaim};

/// `resourceapi.FirstAvailableDeviceRequestMaxSize`: the first subrequest is worth this much, the
/// next one less, and so on.
pub(crate) const FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE: i64 = 8;

/// Why a node's allocations cannot be scored.
pub(crate) const ERR_TOO_FEW_ALLOCATIONS: &str = "number of allocations";

/// The score of `node_allocations` (one result per unallocated claim, in claim order) for
/// `claims`: for every claim, every `firstAvailable` subrequest that got a device adds
/// `8 - its index`.
pub(crate) fn compute_score(
    claims: &[std::sync::Arc<ResourceClaim>],
    node_allocations: &[AllocationResult],
) -> Result<i64, String> {
    let mut score = 0;
    let mut unallocated = 0;
    for claim in claims {
        let allocation = match claim.status.as_ref().and_then(|s| s.allocation.as_ref()) {
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
