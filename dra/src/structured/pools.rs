//! Resource pools reachable from a node (`pools_incubating.go`: `GatherPools`, `NodeMatches`,
//! `buildPool` and its validation): the newest generation of each pool's slices, whether the pool
//! is complete and valid, its counter sets, sorted by pool ID (pools whose devices have binding
//! conditions last), each pool's slices sorted by name.

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::api::core::v1::{Node, NodeSelector};
use k8s_openapi::api::resource::v1::{CounterSet, Device, ResourceSlice};

use super::Features;
use sched_apimachinery::labels::NodeSelectorMatcher;

/// Why pools could not be gathered (a fatal error, wrapped as `gather pool information: ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// A slice's node selector does not parse.
    #[error("failed to perform node selection for slice {slice}: {error}")]
    SliceSelector {
        /// The slice's name.
        slice: String,
        /// The parse error.
        error: String,
    },
    /// A device's node selector (perDeviceNodeSelection) does not parse.
    #[error("failed to perform node selection for device {device} in slice {slice}: {error}")]
    DeviceSelector {
        /// The device's name.
        device: String,
        /// The slice's name.
        slice: String,
        /// The parse error.
        error: String,
    },
}

/// A pool: driver and pool name (`PoolID`, printed `driver/pool`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PoolId<'a> {
    /// The driver.
    pub driver: &'a str,
    /// The pool's name.
    pub pool: &'a str,
}

impl std::fmt::Display for PoolId<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.driver, self.pool)
    }
}

/// One pool as the allocator sees it from one node (`Pool`).
#[derive(Debug, Clone)]
pub struct Pool<'a> {
    /// Driver and pool name.
    pub id: PoolId<'a>,
    /// Not all of the current generation's slices are known: nothing is allocated from it.
    pub is_incomplete: bool,
    /// The pool is inconsistent (duplicate device names, bad counters): nothing is allocated from
    /// it, and allocation fails with an error when no other pool can serve the claims.
    pub is_invalid: bool,
    /// Why it is invalid.
    pub invalid_reason: String,
    /// Slices with devices reachable from the node, by name.
    pub device_slices: Vec<&'a ResourceSlice>,
    /// The pool's other slices with devices (they consume the same shared counters).
    pub device_slices_not_targeting_node: Vec<&'a ResourceSlice>,
    /// Counter sets (`sharedCounters`) by name.
    pub counter_sets: BTreeMap<&'a str, &'a CounterSet>,
}

impl<'a> Pool<'a> {
    fn flagged(id: PoolId<'a>, incomplete: bool, invalid_reason: Option<String>) -> Self {
        Pool {
            id,
            is_incomplete: incomplete,
            is_invalid: invalid_reason.is_some(),
            invalid_reason: invalid_reason.unwrap_or_default(),
            device_slices: Vec::new(),
            device_slices_not_targeting_node: Vec::new(),
            counter_sets: BTreeMap::new(),
        }
    }
}

/// The devices of a slice.
pub fn devices(slice: &ResourceSlice) -> &[Device] {
    slice.spec.devices.as_deref().unwrap_or_default()
}

/// `NodeMatches`: a node name must be the node's, all-nodes matches, a node selector is matched
/// against the node's labels and name; nothing set matches nothing.
pub fn node_matches(
    node: &Node,
    node_name: Option<&str>,
    all_nodes: bool,
    selector: Option<&NodeSelector>,
) -> Result<bool, String> {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    if let Some(want) = node_name.filter(|n| !n.is_empty()) {
        return Ok(name == want);
    }
    if all_nodes {
        return Ok(true);
    }
    let Some(selector) = selector else {
        return Ok(false);
    };
    let matcher = NodeSelectorMatcher::parse(selector)
        .map_err(|e| format!("failed to parse node selector {selector:?}: {e}"))?;
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    Ok(matcher.matches(labels, name))
}

/// `sliceUsesCompatibilityGroups`.
fn uses_compatibility_groups(slice: &ResourceSlice) -> bool {
    devices(slice).iter().any(|d| {
        d.consumes_counters
            .iter()
            .flatten()
            .any(|c| c.compatibility_groups.as_ref().is_some_and(|g| !g.is_empty()))
    })
}

fn has_shared_counters(slice: &ResourceSlice) -> bool {
    slice.spec.shared_counters.as_ref().is_some_and(|c| !c.is_empty())
}

fn pool_id(slice: &ResourceSlice) -> PoolId<'_> {
    PoolId {
        driver: &slice.spec.driver,
        pool: &slice.spec.pool.name,
    }
}

/// `GatherPools`: the pools with devices reachable from `node`. `slices_for_node` are the slices
/// that may serve the node (its own, node-selector and all-nodes ones); `all_slices` every slice,
/// for pools whose slices do not all serve the node.
pub fn gather_pools<'a>(
    slices_for_node: impl IntoIterator<Item = &'a ResourceSlice>,
    node: &Node,
    features: Features,
    all_slices: &[&'a ResourceSlice],
) -> Result<Vec<Pool<'a>>, PoolError> {
    // Pools in first-seen order, each with the newest generation's relevant slices.
    let mut order: Vec<PoolId<'a>> = Vec::new();
    let mut pools: HashMap<PoolId<'a>, Vec<&'a ResourceSlice>> = HashMap::new();
    for slice in slices_for_node {
        let spec = &slice.spec;
        if !features.partitionable_devices
            && (spec.per_device_node_selection.is_some() || has_shared_counters(slice))
        {
            continue;
        }
        // DRADeviceCompatibilityGroups is off: such slices are ignored (their pool is incomplete).
        if uses_compatibility_groups(slice) {
            continue;
        }
        let slice_name = slice.metadata.name.clone().unwrap_or_default();
        let node_name = spec.node_name.as_deref().filter(|n| !n.is_empty());
        let all_nodes = spec.all_nodes == Some(true);
        let relevant = if node_name.is_some() || all_nodes || spec.node_selector.is_some() {
            node_matches(node, node_name, all_nodes, spec.node_selector.as_ref()).map_err(|error| {
                PoolError::SliceSelector {
                    slice: slice_name.clone(),
                    error,
                }
            })?
        } else if spec.per_device_node_selection == Some(true) {
            let mut relevant = false;
            for device in devices(slice) {
                let matched = node_matches(
                    node,
                    device.node_name.as_deref(),
                    device.all_nodes == Some(true),
                    device.node_selector.as_ref(),
                )
                .map_err(|error| PoolError::DeviceSelector {
                    device: device.name.clone(),
                    slice: slice_name.clone(),
                    error,
                })?;
                if matched {
                    relevant = true;
                    break;
                }
            }
            relevant
        } else {
            // Some future way of selecting nodes: not understood, skipped.
            continue;
        };
        if relevant {
            add_slice(&mut order, &mut pools, slice);
        }
    }

    let mut result = Vec::with_capacity(order.len());
    let mut with_binding_conditions = Vec::new();
    for id in order {
        let Some(slices) = pools.remove(&id) else {
            continue;
        };
        let Some(first) = slices.first() else {
            continue;
        };
        let wanted = first.spec.pool.resource_slice_count;
        let generation = first.spec.pool.generation;
        let pool = if slices.len() as i64 == wanted {
            build_pool(id, slices, features, &[])
        } else if !features.incomplete_pools_unusable {
            // v0.34 counts only the slices that serve the node and keeps an incomplete pool's
            // devices: only "All" refuses it (`pools_stable.go` of v0.34.4).
            let mut pool = build_pool(id, slices, features, &[]);
            pool.is_incomplete = true;
            pool
        } else {
            // Look for the pool's slices that do not serve this node.
            let Some(mut all_for_pool) = slices_in_pool(all_slices, id, generation) else {
                // A newer generation is being published: ignore the pool's old devices.
                continue;
            };
            all_for_pool.retain(|s| !uses_compatibility_groups(s));
            if all_for_pool.len() as i64 != wanted {
                result.push(Pool::flagged(id, true, None));
                continue;
            }
            build_pool(id, slices, features, &all_for_pool)
        };
        if has_binding_conditions(&pool) {
            with_binding_conditions.push(pool);
        } else {
            result.push(pool);
        }
    }
    result.sort_by(|a, b| a.id.cmp(&b.id));
    with_binding_conditions.sort_by(|a, b| a.id.cmp(&b.id));
    result.extend(with_binding_conditions);
    Ok(result)
}

/// `addSlice`: a newer generation replaces the pool's slices, an older one is ignored.
fn add_slice<'a>(
    order: &mut Vec<PoolId<'a>>,
    pools: &mut HashMap<PoolId<'a>, Vec<&'a ResourceSlice>>,
    slice: &'a ResourceSlice,
) {
    let id = pool_id(slice);
    let Some(slices) = pools.get_mut(&id) else {
        order.push(id);
        pools.insert(id, vec![slice]);
        return;
    };
    let current = slices.first().map_or(i64::MIN, |s| s.spec.pool.generation);
    let generation = slice.spec.pool.generation;
    if generation < current {
        return;
    }
    if generation > current {
        slices.clear();
    }
    slices.push(slice);
}

/// `checkSlicesInPool`: every slice of the pool with `generation`, or `None` when some slice has a
/// newer generation (the current one is obsolete).
fn slices_in_pool<'a>(
    all_slices: &[&'a ResourceSlice],
    id: PoolId<'_>,
    generation: i64,
) -> Option<Vec<&'a ResourceSlice>> {
    let mut found = Vec::new();
    for slice in all_slices {
        if pool_id(slice) != id {
            continue;
        }
        match slice.spec.pool.generation.cmp(&generation) {
            std::cmp::Ordering::Equal => found.push(*slice),
            std::cmp::Ordering::Greater => return None,
            std::cmp::Ordering::Less => {}
        }
    }
    Some(found)
}

fn slice_name(slice: &ResourceSlice) -> &str {
    slice.metadata.name.as_deref().unwrap_or_default()
}

/// `buildPool`: sorts the slices by name, separates counter-set slices, validates.
fn build_pool<'a>(
    id: PoolId<'a>,
    mut slices: Vec<&'a ResourceSlice>,
    features: Features,
    all_for_pool: &[&'a ResourceSlice],
) -> Pool<'a> {
    slices.sort_by(|a, b| slice_name(a).cmp(slice_name(b)));
    let mut device_slices = Vec::new();
    let mut counter_set_slices = Vec::new();
    let mut not_targeting = Vec::new();
    for slice in &slices {
        if features.partitionable_devices && has_shared_counters(slice) {
            counter_set_slices.push(*slice);
        } else {
            device_slices.push(*slice);
        }
    }
    if slices.len() < all_for_pool.len() {
        let targeting: HashSet<&str> = slices.iter().map(|s| slice_name(s)).collect();
        for slice in all_for_pool {
            if targeting.contains(slice_name(slice)) {
                continue;
            }
            if features.partitionable_devices && has_shared_counters(slice) {
                counter_set_slices.push(*slice);
            } else {
                not_targeting.push(*slice);
            }
        }
    }
    let invalid = |reason: String| Pool::flagged(id, false, Some(reason));
    if let Err(reason) = validate_device_names(&device_slices) {
        return invalid(reason);
    }
    if !features.partitionable_devices {
        return Pool {
            device_slices,
            ..Pool::flagged(id, false, None)
        };
    }
    let counter_sets = match counter_sets(&counter_set_slices) {
        Ok(sets) => sets,
        Err(reason) => return invalid(reason),
    };
    for group in [&device_slices, &not_targeting] {
        if let Err(reason) = validate_counter_consumption(&counter_sets, group) {
            return invalid(reason);
        }
    }
    Pool {
        device_slices,
        device_slices_not_targeting_node: not_targeting,
        counter_sets,
        ..Pool::flagged(id, false, None)
    }
}

/// `getAndValidateCounterSets`.
fn counter_sets<'a>(slices: &[&'a ResourceSlice]) -> Result<BTreeMap<&'a str, &'a CounterSet>, String> {
    let mut sets = BTreeMap::new();
    for slice in slices {
        for set in slice.spec.shared_counters.iter().flatten() {
            if sets.insert(set.name.as_str(), set).is_some() {
                return Err(format!("duplicate counter set name {}", set.name));
            }
        }
    }
    Ok(sets)
}

/// `validateDeviceNames`.
fn validate_device_names(slices: &[&ResourceSlice]) -> Result<(), String> {
    let mut names = HashSet::new();
    for slice in slices {
        for device in devices(slice) {
            if !names.insert(device.name.as_str()) {
                return Err(format!("duplicate device name {}", device.name));
            }
        }
    }
    Ok(())
}

/// `validateDeviceCounterConsumption`: consumed counters exist in their counter sets.
fn validate_counter_consumption(
    sets: &BTreeMap<&str, &CounterSet>,
    slices: &[&ResourceSlice],
) -> Result<(), String> {
    for slice in slices {
        for device in devices(slice) {
            for consumption in device.consumes_counters.iter().flatten() {
                let Some(set) = sets.get(consumption.counter_set.as_str()) else {
                    return Err(format!("counter set {} not found", consumption.counter_set));
                };
                for counter in consumption.counters.keys() {
                    if !set.counters.contains_key(counter) {
                        return Err(format!("counter {counter} not found in counter set {}", set.name));
                    }
                }
            }
        }
    }
    Ok(())
}

/// `poolHasBindingConditions`: some device reachable from the node has binding conditions (set,
/// even if empty).
fn has_binding_conditions(pool: &Pool<'_>) -> bool {
    pool.device_slices
        .iter()
        .flat_map(|s| devices(s))
        .any(|d| d.binding_conditions.is_some())
}
