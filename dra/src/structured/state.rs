//! What allocated claims hold (`schedulerapi.AllocatedState`), derived from the claims as
//! kube-scheduler's DRA manager does (`allocateddevices.go`: `foreachAllocatedDevice`).

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::api::resource::v1::ResourceClaim;

use super::quantity::ExactQuantity;
use super::slices::DeviceId;

/// Capacity consumed on one device, by capacity name (`schedulerapi.ConsumedCapacity`).
pub type ConsumedCapacity = BTreeMap<String, ExactQuantity>;

/// One share of a device that allows multiple allocations (`schedulerapi.SharedDeviceID`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SharedDeviceId {
    /// The device.
    pub device: DeviceId,
    /// The allocation result's `shareID`.
    pub share_id: String,
}

/// What allocated claims hold (`schedulerapi.AllocatedState`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllocatedState {
    /// Devices allocated exclusively.
    pub allocated_devices: HashSet<DeviceId>,
    /// Shares of devices that allow multiple allocations (results with a `shareID`).
    pub allocated_shared_device_ids: HashSet<SharedDeviceId>,
    /// Capacity consumed by those shares, summed per device.
    pub aggregated_capacity: HashMap<DeviceId, ConsumedCapacity>,
}

impl AllocatedState {
    /// The state of these claims, as kube-scheduler's DRA manager tracks it with the
    /// DRAConsumableCapacity gate on (v1.37's default): every `status.allocation.devices.results[]`
    /// entry except admin-access ones; a result with a `shareID` is a shared device ID (plus its
    /// `consumedCapacity`, summed per device), any other one an exclusively allocated device.
    pub fn from_claims<'a>(claims: impl IntoIterator<Item = &'a ResourceClaim>) -> Self {
        let mut state = AllocatedState::default();
        let results = claims
            .into_iter()
            .filter_map(|c| {
                c.status
                    .as_ref()?
                    .allocation
                    .as_ref()?
                    .devices
                    .as_ref()?
                    .results
                    .as_ref()
            })
            .flatten();
        for r in results {
            if r.admin_access == Some(true) {
                continue;
            }
            let id = DeviceId::new(&r.driver, &r.pool, &r.device);
            let Some(share_id) = &r.share_id else {
                state.allocated_devices.insert(id);
                continue;
            };
            if let Some(consumed) = &r.consumed_capacity {
                let aggregated = state.aggregated_capacity.entry(id.clone()).or_default();
                for (name, q) in consumed {
                    let q = ExactQuantity::from_quantity(q);
                    match aggregated.get_mut(name) {
                        Some(sum) => sum.add(&q),
                        None => {
                            aggregated.insert(name.clone(), q);
                        }
                    }
                }
            }
            state.allocated_shared_device_ids.insert(SharedDeviceId {
                device: id,
                share_id: share_id.clone(),
            });
        }
        state
    }

    /// `IsDeviceAllocated`: allocated exclusively, or shared, or with consumed capacity.
    pub fn is_device_allocated(&self, id: &DeviceId) -> bool {
        self.allocated_devices.contains(id)
            || self.aggregated_capacity.contains_key(id)
            || self.allocated_shared_device_ids.iter().any(|s| &s.device == id)
    }
}
