//! The structured-parameters allocator of `k8s.io/dynamic-resource-allocation/structured` v1.37.1
//! (its "incubating" implementation, which v1.37.1's default DRA feature gates select), ported
//! with the same search order so the same devices are chosen as kube-scheduler would choose.
//!
//! - [`pools`]: `GatherPools` (pools reachable from a node, generations, completeness, validity).
//! - [`allocator`]: the search (`Allocate`, `allocateOne`, `allocateDevice`) and the results.
//! - [`request`], [`constraints`], [`taints`], [`counters`], [`consumable_capacity`],
//!   [`node_selector`]: what the search checks per request and device, and the result's node
//!   selector.
//! - [`state`]: what allocated claims hold ([`AllocatedState`]); [`quantity`]: exact quantities.
//!
//! The gates v1.37.1 leaves off are off here too, as the incubating allocator handles them:
//! DRADeviceCompatibilityGroups (slices whose devices declare compatibility groups are ignored,
//! which leaves their pool incomplete), DRAListTypeAttributes (list-valued attributes never satisfy
//! a constraint), DRADerivedAttributes (a request asking for them is an error),
//! DRAOptionalNodeOperations (results carry no `skipNodeOperations`).
//!
//! Differences from upstream, none of which changes which devices are picked: share IDs are
//! derived from the claim and device (reproducible) instead of random UUIDs; the available shared
//! counters are computed once per `allocate` call instead of once per allocator; the error for a
//! node selector that does not parse prints the selector in Rust's debug form; malformed
//! quantities (which the API server rejects) count as zero; a missing `allocationMode` or `count`
//! reads as the API server's defaults (ExactCount, 1).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{AllocationResult, DeviceClass, ResourceClaim, ResourceSlice};

use crate::cel;

pub mod allocator;
pub mod constraints;
pub mod consumable_capacity;
pub mod counters;
pub mod node_selector;
pub mod pools;
pub mod quantity;
pub mod request;
pub mod slices;
pub mod state;
pub mod taints;
#[cfg(test)]
mod tests;

pub use quantity::{ExactQuantity, QuantityFormat};
pub use slices::{DeviceId, ResourceSlices};
pub use state::{AllocatedState, ConsumedCapacity, SharedDeviceId};

/// The DRA feature gates the allocator honours (`structured.Features`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// DRAAdminAccess.
    pub admin_access: bool,
    /// DRAPrioritizedList (firstAvailable).
    pub prioritized_list: bool,
    /// DRAPartitionableDevices (shared counters).
    pub partitionable_devices: bool,
    /// DRADeviceTaints.
    pub device_taints: bool,
    /// DRADeviceBindingConditions + DRAResourceClaimDeviceStatus.
    pub device_binding_and_status: bool,
    /// DRAConsumableCapacity.
    pub consumable_capacity: bool,
    /// DRAFractionalCapacityRange.
    pub fractional_capacity_range: bool,
    /// Not a gate but the library's release (dynamic-resource-allocation v0.37): a CEL runtime
    /// error names the device (`selector #1 on device d/p/x: CEL runtime error: …`) and a
    /// `no such key` error carries the optional-chaining hint (`cel/errors.go`); v0.34–v0.36 write
    /// `selector #1: CEL runtime error: no such key: k`.
    pub cel_runtime_error_names_device: bool,
    /// Not a gate but the library's release (v0.35 on): no device is ever allocated from an
    /// incomplete pool (`if pool.IsIncomplete || pool.IsInvalid { continue }`); v0.34 refuses an
    /// incomplete pool only for `allocationMode: All` and allocates from it otherwise, and counts
    /// a pool's slices among those that serve the node only.
    pub incomplete_pools_unusable: bool,
    /// Not a gate but the library's release (v0.35 on): an invalid pool fails allocation on the
    /// node only (`ErrFailedAllocationOnNode`, `invalid resource pools were encountered`); v0.34
    /// stops the search with the error `pool <name> is invalid: <reason>`.
    pub invalid_pool_fails_node_only: bool,
}

impl Features {
    /// The gates that are on in a v1.37.1 kube-scheduler started without `--feature-gates`.
    /// DRAFractionalCapacityRange is beta and on by default but has MinCompatibilityVersion 1.37,
    /// and a v1.37 binary's default compatibility version is 1.36, so it is off (kube-scheduler
    /// reports `BETA - default=false`).
    pub const V1_37_DEFAULTS: Features = Features {
        admin_access: true,
        prioritized_list: true,
        partitionable_devices: true,
        device_taints: true,
        device_binding_and_status: true,
        consumable_capacity: true,
        fractional_capacity_range: false,
        cel_runtime_error_names_device: true,
        incomplete_pools_unusable: true,
        invalid_pool_fails_node_only: true,
    };
}

/// Why allocation could not be decided on a node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocateError {
    /// Not fatal: allocation on other nodes may proceed (`ErrFailedAllocationOnNode`); the text is
    /// the Unschedulable reason kube-scheduler reports for the node.
    #[error("{0}")]
    FailedOnNode(String),
    /// Fatal: something is wrong with a claim or class (a CEL error, an unknown class); the whole
    /// scheduling cycle ends with this error.
    #[error("{0}")]
    Fatal(String),
    /// The deadline passed before allocation finished.
    #[error("timed out")]
    Timeout,
}

/// A device ID borrowed from the slices or the allocated state (`DeviceID`, printed
/// `driver/pool/device`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DevKey<'a> {
    /// The driver.
    pub driver: &'a str,
    /// The pool.
    pub pool: &'a str,
    /// The device.
    pub device: &'a str,
}

impl std::fmt::Display for DevKey<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

impl<'a> From<&'a slices::DeviceId> for DevKey<'a> {
    fn from(id: &'a slices::DeviceId) -> Self {
        DevKey {
            driver: &id.driver,
            pool: &id.pool,
            device: &id.device,
        }
    }
}

/// An allocator over one snapshot's slices, classes and allocated state; used for every node
/// (`NewAllocator`). It holds no per-call state, so several threads may share it.
pub struct Allocator<'a> {
    features: Features,
    classes: &'a HashMap<String, Arc<DeviceClass>>,
    slices: &'a ResourceSlices,
    cel: &'a cel::Cache,
    /// Every slice, for pools whose slices do not all serve the node.
    all_slices: Vec<&'a ResourceSlice>,
    /// `AllocatedDevices`.
    allocated_devices: HashSet<DevKey<'a>>,
    /// The devices of `AllocatedSharedDeviceIDs`.
    shared_devices: HashSet<DevKey<'a>>,
    /// `AggregatedCapacity`.
    aggregated_capacity: HashMap<DevKey<'a>, &'a ConsumedCapacity>,
    /// `numAllocateOneInvocations`: search steps of all `allocate` calls so far.
    allocate_one_invocations: AtomicU64,
}

impl<'a> Allocator<'a> {
    /// `NewAllocator`.
    pub fn new(
        features: Features,
        allocated: &'a AllocatedState,
        classes: &'a HashMap<String, Arc<DeviceClass>>,
        slices: &'a ResourceSlices,
        cel: &'a cel::Cache,
    ) -> Self {
        Allocator {
            features,
            classes,
            slices,
            cel,
            all_slices: slices.all().map(|s| &**s).collect(),
            allocated_devices: allocated.allocated_devices.iter().map(DevKey::from).collect(),
            shared_devices: allocated
                .allocated_shared_device_ids
                .iter()
                .map(|s| DevKey::from(&s.device))
                .collect(),
            aggregated_capacity: allocated
                .aggregated_capacity
                .iter()
                .map(|(id, c)| (DevKey::from(id), c))
                .collect(),
            allocate_one_invocations: AtomicU64::new(0),
        }
    }

    /// `GetStats().NumAllocateOneInvocations`: how many search steps all `allocate` calls took, a
    /// measure of the work the allocator did.
    pub fn allocate_one_invocations(&self) -> u64 {
        self.allocate_one_invocations.load(Ordering::Relaxed)
    }

    /// `IsDeviceAllocated`.
    fn is_device_allocated(&self, id: DevKey<'_>) -> bool {
        self.allocated_devices.contains(&id)
            || self.shared_devices.contains(&id)
            || self.aggregated_capacity.contains_key(&id)
    }

    /// `Allocate`: one allocation result per claim (in the claims' order) when every claim can be
    /// allocated on `node`, `Ok(None)` when they cannot, an error as [`AllocateError`] says. The
    /// deadline is checked at every step of the search.
    pub fn allocate(
        &self,
        node: &Node,
        claims: &[&ResourceClaim],
        deadline: Option<Instant>,
    ) -> Result<Option<Vec<AllocationResult>>, AllocateError> {
        allocator::allocate(self, node, claims, deadline)
    }
}
