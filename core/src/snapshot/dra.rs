//! Dynamic Resource Allocation state of a snapshot: ResourceSlices grouped by where their devices
//! are, and the devices allocated claims hold, as kube-scheduler's DRA manager derives them.
//!
//! Only allocated device IDs are derived so far: the counters (partitionable devices) and capacity
//! (consumable capacity) that allocations consume are not tracked yet.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};

/// One device: the driver, the pool in that driver and the device's name in the pool (as
/// `status.allocation.devices.results` names it).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId {
    /// The driver (`results[].driver`, a ResourceSlice's `spec.driver`).
    pub driver: String,
    /// The pool (`results[].pool`, a ResourceSlice's `spec.pool.name`).
    pub pool: String,
    /// The device (`results[].device`, a device's `name` in a ResourceSlice).
    pub device: String,
}

impl DeviceId {
    /// A device ID from its three parts.
    pub fn new(driver: impl Into<String>, pool: impl Into<String>, device: impl Into<String>) -> Self {
        DeviceId {
            driver: driver.into(),
            pool: pool.into(),
            device: device.into(),
        }
    }
}

impl std::fmt::Display for DeviceId {
    /// `driver/pool/device`, as kube-scheduler prints device IDs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

/// ResourceSlices grouped by the nodes their devices are on, so a node's slices are found without
/// scanning them all: [`ResourceSlices::for_node`] is the node's own slices plus every node-selector
/// and all-nodes slice (whose selectors the caller still has to match against the node).
#[derive(Debug, Clone, Default)]
pub struct ResourceSlices {
    /// Slices with `spec.nodeName`, by that node name.
    pub by_node: HashMap<String, Vec<Arc<ResourceSlice>>>,
    /// Slices with `spec.nodeSelector`, and slices with `spec.perDeviceNodeSelection` (each device
    /// says its own nodes): they may serve any node, depending on their selectors.
    pub node_selector: Vec<Arc<ResourceSlice>>,
    /// Slices with `spec.allNodes`: their devices are reachable from every node.
    pub all_nodes: Vec<Arc<ResourceSlice>>,
}

impl ResourceSlices {
    /// Groups slices, keeping their order within each group. A slice that says none of nodeName,
    /// nodeSelector, allNodes and perDeviceNodeSelection (the API server rejects it) is dropped.
    pub fn new(slices: Vec<ResourceSlice>) -> Self {
        let mut grouped = ResourceSlices::default();
        for slice in slices {
            let spec = &slice.spec;
            if let Some(node) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
                grouped
                    .by_node
                    .entry(node.to_string())
                    .or_default()
                    .push(Arc::new(slice));
            } else if spec.node_selector.is_some() || spec.per_device_node_selection == Some(true) {
                grouped.node_selector.push(Arc::new(slice));
            } else if spec.all_nodes == Some(true) {
                grouped.all_nodes.push(Arc::new(slice));
            }
        }
        grouped
    }

    /// The slices that may serve `node`: its own, then the node-selector ones, then the all-nodes
    /// ones.
    pub fn for_node<'a>(&'a self, node: &str) -> impl Iterator<Item = &'a Arc<ResourceSlice>> + 'a {
        self.by_node
            .get(node)
            .into_iter()
            .flatten()
            .chain(&self.node_selector)
            .chain(&self.all_nodes)
    }

    /// How many slices there are in all.
    pub fn len(&self) -> usize {
        self.by_node.values().map(Vec::len).sum::<usize>() + self.node_selector.len() + self.all_nodes.len()
    }

    /// True when there are no slices.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The devices that allocated claims hold exclusively, as kube-scheduler's DRA manager tracks them:
/// every `status.allocation.devices.results[]` entry, except allocations with admin access (which do
/// not make a device unavailable) and shared allocations of consumable-capacity devices (those
/// with a `shareID`, which consume capacity instead). Consumed counters and capacity are not derived
/// yet.
pub fn allocated_devices<'a>(claims: impl IntoIterator<Item = &'a ResourceClaim>) -> HashSet<DeviceId> {
    claims
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
        .flatten()
        .filter(|r| r.admin_access != Some(true) && r.share_id.is_none())
        .map(|r| DeviceId::new(&r.driver, &r.pool, &r.device))
        .collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::NodeSelector;
    use k8s_openapi::api::resource::v1::{
        AllocationResult, DeviceAllocationResult, DeviceRequestAllocationResult, ResourceClaimStatus,
        ResourcePool, ResourceSliceSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn result(driver: &str, pool: &str, device: &str) -> DeviceRequestAllocationResult {
        DeviceRequestAllocationResult {
            driver: driver.into(),
            pool: pool.into(),
            device: device.into(),
            request: "req".into(),
            ..Default::default()
        }
    }

    fn claim(name: &str, results: Option<Vec<DeviceRequestAllocationResult>>) -> ResourceClaim {
        ResourceClaim {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            status: results.map(|results| ResourceClaimStatus {
                allocation: Some(AllocationResult {
                    devices: Some(DeviceAllocationResult {
                        results: Some(results),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn allocated_devices_come_from_allocated_claims() {
        let admin = DeviceRequestAllocationResult {
            admin_access: Some(true),
            ..result("gpu.example.com", "n1", "gpu-2")
        };
        let shared = DeviceRequestAllocationResult {
            share_id: Some("1234".into()),
            ..result("gpu.example.com", "n1", "gpu-3")
        };
        let claims = [
            claim("pending", None),
            claim(
                "two",
                Some(vec![
                    result("gpu.example.com", "n1", "gpu-0"),
                    result("gpu.example.com", "n1", "gpu-1"),
                ]),
            ),
            // Same device name in another pool and another driver: different devices.
            claim(
                "other",
                Some(vec![
                    result("gpu.example.com", "n2", "gpu-0"),
                    result("nic.example.com", "n1", "gpu-0"),
                ]),
            ),
            claim("admin", Some(vec![admin])),
            claim("shared", Some(vec![shared])),
            claim("empty", Some(vec![])),
        ];
        let got = allocated_devices(&claims);
        let mut got: Vec<String> = got.iter().map(DeviceId::to_string).collect();
        got.sort();
        assert_eq!(
            got,
            [
                "gpu.example.com/n1/gpu-0",
                "gpu.example.com/n1/gpu-1",
                "gpu.example.com/n2/gpu-0",
                "nic.example.com/n1/gpu-0",
            ]
        );
    }

    fn slice(name: &str, node: Option<&str>, selector: bool, all: bool) -> ResourceSlice {
        ResourceSlice {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: ResourceSliceSpec {
                driver: "gpu.example.com".into(),
                pool: ResourcePool {
                    name: name.into(),
                    generation: 1,
                    resource_slice_count: 1,
                },
                node_name: node.map(Into::into),
                node_selector: selector.then(NodeSelector::default),
                all_nodes: all.then_some(true),
                ..Default::default()
            },
        }
    }

    #[test]
    fn slices_are_grouped_by_node() {
        let slices = ResourceSlices::new(vec![
            slice("a1", Some("a"), false, false),
            slice("sel", None, true, false),
            slice("b1", Some("b"), false, false),
            slice("all", None, false, true),
            slice("a2", Some("a"), false, false),
            slice("none", None, false, false),
        ]);
        assert_eq!(slices.len(), 5);
        let names = |node: &str| -> Vec<String> {
            slices
                .for_node(node)
                .map(|s| s.metadata.name.clone().unwrap())
                .collect()
        };
        assert_eq!(names("a"), ["a1", "a2", "sel", "all"]);
        assert_eq!(names("b"), ["b1", "sel", "all"]);
        assert_eq!(names("c"), ["sel", "all"]);
        assert!(ResourceSlices::default().is_empty());
    }
}
