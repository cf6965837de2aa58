//! The structured-parameters allocator of `k8s.io/dynamic-resource-allocation/structured` v1.37.1
//! (its "incubating" implementation, which v1.37.1's default DRA feature gates select).
//!
//! CONTRACT (placeholder until the allocator work lands): the public API below is what the
//! DynamicResources plugin calls; the bodies are being written.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{AllocationResult, DeviceClass, ResourceClaim};

use crate::dra::cel;
use crate::snapshot::{DeviceId, ResourceSlices};

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
}

impl Features {
    /// The gates that are on by default in v1.37.1.
    pub const V1_37_DEFAULTS: Features = Features {
        admin_access: true,
        prioritized_list: true,
        partitionable_devices: true,
        device_taints: true,
        device_binding_and_status: true,
        consumable_capacity: true,
        fractional_capacity_range: true,
    };
}

/// What allocated claims hold (`schedulerapi.AllocatedState`).
#[derive(Debug, Clone, Default)]
pub struct AllocatedState {
    /// Devices allocated exclusively.
    pub allocated_devices: HashSet<DeviceId>,
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

/// An allocator over one snapshot's slices, classes and allocated state; used for every node.
pub struct Allocator<'a> {
    _features: Features,
    _allocated: &'a AllocatedState,
    _classes: &'a HashMap<String, Arc<DeviceClass>>,
    _slices: &'a ResourceSlices,
    _cel: &'a cel::Cache,
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
            _features: features,
            _allocated: allocated,
            _classes: classes,
            _slices: slices,
            _cel: cel,
        }
    }

    /// `Allocate`: one allocation result per claim when every claim can be allocated on `node`,
    /// `Ok(None)` when they cannot, an error as [`AllocateError`] says.
    pub fn allocate(
        &self,
        _node: &Node,
        _claims: &[&ResourceClaim],
        _deadline: Option<Instant>,
    ) -> Result<Option<Vec<AllocationResult>>, AllocateError> {
        Err(AllocateError::Fatal(
            "the allocator is not implemented yet".into(),
        ))
    }
}
