//! The pools of a snapshot: its NodePools read as the provisioner reads them, what their limits
//! leave after the nodes they already made, and the instance types to try — the user's catalogue
//! (`--instance-types FILE`, Karpenter's cloud catalogue is not in the cluster) or, without one, the
//! types the pools' own nodes show (their `node.kubernetes.io/instance-type`, capacity, allocatable,
//! zone and capacity type): then only the types and zones the cluster already runs are known, and
//! the answer says so.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};

use super::instance_types::{InstanceType, Offering};
use super::new_node::{PoolState, ScaleUpAnswer, scale_up_for_pod};
use super::node_pool::{NodePool, by_weight};
use super::requirements::{CAPACITY_TYPE_LABEL, NODE_POOL_LABEL, Requirement, Requirements};
use super::resources::ResourceAmounts;
use crate::snapshot::Snapshot;

/// The label naming a node's instance type.
const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";
/// The label naming a node's zone.
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// The labels of a node that describe its instance type rather than the node itself (a provider's
/// `instance-*` labels are added to these by their key).
const INSTANCE_TYPE_LABELS: &[&str] = &[
    INSTANCE_TYPE_LABEL,
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "topology.kubernetes.io/region",
    "node.kubernetes.io/windows-build",
];

/// Where the instance types came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CatalogueSource {
    /// The user's file.
    File,
    /// The pools' existing nodes.
    Nodes,
}

/// "Would a new node help?" for one pod.
#[derive(Debug, Clone, PartialEq)]
pub struct NodePoolsAnswer {
    /// The provisioner's answer, pool by pool.
    pub answer: ScaleUpAnswer,
    /// Where the instance types came from.
    pub catalogue: CatalogueSource,
    /// How many instance types were tried.
    pub instance_types: usize,
    /// NodePools that could not be read, each in one line naming it.
    pub warnings: Vec<String>,
}

/// The snapshot's NodePools, heaviest first, and the ones that could not be read.
pub fn pools_of(snapshot: &Snapshot) -> (Vec<NodePool>, Vec<String>) {
    let mut pools = Vec::new();
    let mut warnings = Vec::new();
    for object in &snapshot.node_pools {
        match NodePool::from_json(object.to_json()) {
            Ok(pool) => pools.push(pool),
            Err(e) => warnings.push(format!("NodePool {} is left out: {e}", object.name())),
        }
    }
    by_weight(&mut pools);
    (pools, warnings)
}

/// Would a new node of some pool take `pod`: `None` when the snapshot has no NodePools.
pub fn node_pools_answer(
    snapshot: &Snapshot,
    pod: &Pod,
    catalogue: Option<&[InstanceType]>,
) -> Option<NodePoolsAnswer> {
    if snapshot.node_pools.is_empty() {
        return None;
    }
    let (pools, warnings) = pools_of(snapshot);
    let nodes: Vec<&Node> = snapshot.nodes().iter().map(|n| n.node.as_ref()).collect();
    let from_nodes;
    let (types, source) = match catalogue {
        Some(types) => (types, CatalogueSource::File),
        None => {
            from_nodes = instance_types_of_nodes(&nodes);
            (from_nodes.as_slice(), CatalogueSource::Nodes)
        }
    };
    let states: Vec<PoolState<'_>> = pools
        .iter()
        .map(|pool| PoolState {
            pool,
            remaining: pool.remaining(nodes_of_pool(&nodes, &pool.name).iter()),
        })
        .collect();
    Some(NodePoolsAnswer {
        answer: scale_up_for_pod(pod, &states, types),
        catalogue: source,
        instance_types: types.len(),
        warnings,
    })
}

/// The capacities of the nodes a pool made (its `karpenter.sh/nodepool` label), which count against
/// its limits.
fn nodes_of_pool(nodes: &[&Node], pool: &str) -> Vec<ResourceAmounts> {
    nodes
        .iter()
        .filter(|n| label(n, NODE_POOL_LABEL) == Some(pool))
        .map(|n| capacity(n))
        .collect()
}

fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn capacity(node: &Node) -> ResourceAmounts {
    node.status
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .map(ResourceAmounts::from_list)
        .unwrap_or_default()
}

/// The instance types the pools' nodes show, one per `node.kubernetes.io/instance-type` value (the
/// first node of a type gives its capacity and reservation), sold where some node of it runs: each
/// zone × capacity type seen is an available offering, at no known price.
pub fn instance_types_of_nodes(nodes: &[&Node]) -> Vec<InstanceType> {
    let mut types: BTreeMap<String, InstanceType> = BTreeMap::new();
    for node in nodes.iter().filter(|n| label(n, NODE_POOL_LABEL).is_some()) {
        let Some(name) = label(node, INSTANCE_TYPE_LABEL) else {
            continue;
        };
        let offering_labels: Vec<(String, String)> = [ZONE_LABEL, CAPACITY_TYPE_LABEL]
            .iter()
            .filter_map(|key| label(node, key).map(|v| (key.to_string(), v.to_string())))
            .collect();
        let offering = Offering {
            requirements: Requirements::from_labels(offering_labels.iter().map(|(k, v)| (k, v))),
            price: 0.0,
            available: true,
        };
        let instance_type = types.entry(name.to_owned()).or_insert_with(|| {
            let labels: Vec<(&String, &String)> = node
                .metadata
                .labels
                .iter()
                .flatten()
                .filter(|(key, _)| describes_instance_type(key))
                .collect();
            let mut capacity = capacity(node);
            let allocatable = node
                .status
                .as_ref()
                .and_then(|s| s.allocatable.as_ref())
                .map(ResourceAmounts::from_list)
                .unwrap_or_else(|| capacity.clone());
            // A resource the node reports as allocatable only is all allocatable.
            for (resource, amount) in allocatable.iter() {
                if capacity.get(resource) == 0 {
                    capacity.set(resource, amount);
                }
            }
            InstanceType {
                name: name.to_owned(),
                requirements: Requirements::from_labels(labels),
                offerings: Vec::new(),
                overhead: capacity.minus(&allocatable),
                capacity,
            }
        });
        if !instance_type.offerings.contains(&offering) {
            instance_type.offerings.push(offering);
        }
    }
    for instance_type in types.values_mut() {
        // The type's own requirements name every zone and capacity type it is sold in, as a
        // provider's do.
        for key in [ZONE_LABEL, CAPACITY_TYPE_LABEL] {
            let values: Vec<String> = instance_type
                .offerings
                .iter()
                .filter(|o| o.requirements.has(key))
                .flat_map(|o| {
                    o.requirements
                        .get(key)
                        .values()
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                })
                .fold(Vec::new(), |mut all, v| {
                    if !all.contains(&v) {
                        all.push(v);
                    }
                    all
                });
            if !values.is_empty()
                && let Ok(requirement) = Requirement::new(key, "In", &values, None)
            {
                instance_type.requirements.add(requirement);
            }
        }
    }
    types.into_values().collect()
}

/// True for a label of the instance type (arch, os, type, a provider's `…/instance-…` labels), false
/// for the node's own (hostname, pool, zone: the zone is the offering's).
fn describes_instance_type(key: &str) -> bool {
    INSTANCE_TYPE_LABELS.contains(&key)
        || key
            .split_once('/')
            .is_some_and(|(_, name)| name.starts_with("instance-"))
}

#[cfg(test)]
mod tests;
