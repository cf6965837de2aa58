//! The allocator's inputs: ResourceSlices grouped by where their devices are, and the name of one
//! device, as kube-scheduler's DRA manager derives them. They live with the allocator (not with the
//! snapshot that holds them) so the DRA library reads no scheduler type; the snapshot re-exports them.
//!
//! What allocated claims hold is [`AllocatedState::from_claims`](super::AllocatedState::from_claims) (devices, shared devices and their
//! consumed capacity); counters consumed by partitionable devices follow from the allocated
//! devices, as the allocator derives them.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::resource::v1::ResourceSlice;

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
    /// Slices that say none of nodeName, nodeSelector, allNodes and perDeviceNodeSelection (the
    /// API server rejects them): they serve no node, but still count towards their pool's slices
    /// and generation, as in kube-scheduler.
    pub other: Vec<Arc<ResourceSlice>>,
}

impl ResourceSlices {
    /// Groups slices, keeping their order within each group.
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
            } else {
                grouped.other.push(Arc::new(slice));
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

    /// Every slice: the per-node ones (by node name), then the node-selector, all-nodes and other
    /// ones.
    pub fn all(&self) -> impl Iterator<Item = &Arc<ResourceSlice>> + '_ {
        let mut nodes: Vec<&String> = self.by_node.keys().collect();
        nodes.sort();
        nodes
            .into_iter()
            .flat_map(|n| &self.by_node[n])
            .chain(&self.node_selector)
            .chain(&self.all_nodes)
            .chain(&self.other)
    }

    /// How many slices there are in all.
    pub fn len(&self) -> usize {
        self.by_node.values().map(Vec::len).sum::<usize>()
            + self.node_selector.len()
            + self.all_nodes.len()
            + self.other.len()
    }

    /// True when there are no slices.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::NodeSelector;
    use k8s_openapi::api::resource::v1::{
        AllocationResult, DeviceAllocationResult, DeviceRequestAllocationResult, ResourceClaim,
        ResourceClaimStatus, ResourcePool, ResourceSliceSpec,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use crate::structured::{AllocatedState, ExactQuantity, SharedDeviceId};

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
        let share = |id: &str, memory: &str| DeviceRequestAllocationResult {
            share_id: Some(id.into()),
            consumed_capacity: Some([("memory".to_string(), Quantity(memory.into()))].into()),
            ..result("gpu.example.com", "n1", "gpu-4")
        };
        let admin_share = DeviceRequestAllocationResult {
            admin_access: Some(true),
            ..share("9", "1Gi")
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
            claim("share-a", Some(vec![share("a", "10Gi"), share("b", "512Mi")])),
            claim("share-c", Some(vec![share("c", "70Gi"), admin_share])),
        ];
        let state = AllocatedState::from_claims(&claims);
        let mut got: Vec<String> = state.allocated_devices.iter().map(DeviceId::to_string).collect();
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
        let mut shares: Vec<&SharedDeviceId> = state.allocated_shared_device_ids.iter().collect();
        shares.sort();
        let shares: Vec<String> = shares
            .iter()
            .map(|s| format!("{}#{}", s.device, s.share_id))
            .collect();
        assert_eq!(
            shares,
            [
                "gpu.example.com/n1/gpu-3#1234",
                "gpu.example.com/n1/gpu-4#a",
                "gpu.example.com/n1/gpu-4#b",
                "gpu.example.com/n1/gpu-4#c",
            ]
        );
        let gpu4 = DeviceId::new("gpu.example.com", "n1", "gpu-4");
        assert_eq!(
            state.aggregated_capacity.len(),
            1,
            "gpu-3's share consumed nothing"
        );
        assert_eq!(
            state.aggregated_capacity[&gpu4]["memory"],
            ExactQuantity::parse("82432Mi").unwrap(),
            "80Gi + 512Mi, exactly"
        );
        assert!(state.is_device_allocated(&gpu4));
        assert!(state.is_device_allocated(&DeviceId::new("gpu.example.com", "n1", "gpu-3")));
        assert!(!state.is_device_allocated(&DeviceId::new("gpu.example.com", "n1", "gpu-2")));
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
        assert_eq!(slices.other.len(), 1);
        assert_eq!(slices.len(), 6);
        assert_eq!(slices.all().count(), 6);
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
