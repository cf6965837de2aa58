//! Why a pod's ResourceClaims cannot be allocated: the story behind kube-scheduler's one line
//! (`cannot allocate all claims`). For every unallocated claim and every request (each
//! `firstAvailable` subrequest on its own), every node's reachable devices are counted through the
//! same filters the allocator applies — the class's selectors, the request's selectors, devices
//! allocated to other claims, untolerated taints, incomplete pools — and the first selector that
//! rejects a device is remembered with a sample device, so the answer names the selector.
//!
//! This is diagnosis, not allocation: the counts are per request, so requests that compete for the
//! same devices, `matchAttribute` constraints, shared counters and consumed capacity can make the
//! allocator fail where every request alone has enough free devices; the hints say so when that is
//! the only explanation left.

mod hints;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::resource::v1::{
    Device, DeviceAttribute, DeviceCapacity, DeviceClass, DeviceSelector, DeviceTaint, DeviceToleration,
    ResourceClaim, ResourceSlice,
};
use serde::Serialize;

use crate::dra::cel;
use crate::dra::structured::quantity::ExactQuantity;
use crate::dra::structured::{pools, taints};
use crate::snapshot::{DeviceId, NodeInfo, PodInfo, Snapshot};

/// What explain says about a pod's claims.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Diagnosis {
    /// One entry per claim of the pod, in `spec.resourceClaims` order.
    pub claims: Vec<ClaimDiagnosis>,
    /// The reasons in plain words, most specific first.
    pub hints: Vec<String>,
}

/// One claim.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ClaimDiagnosis {
    /// `namespace/name`.
    pub claim: String,
    /// For an allocated claim: its devices (`driver/pool/device`); nothing is counted for it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allocated_devices: Vec<String>,
    /// The claim's constraints, as `matchAttribute X` / `distinctAttribute X` over its requests.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<String>,
    /// One entry per request, subrequests as `request/subrequest`.
    pub requests: Vec<RequestDiagnosis>,
}

/// How many devices a request wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Wants {
    /// `allocationMode: ExactCount` with this count.
    Count(i64),
    /// `allocationMode: All`: every matching device of the node, at least one.
    All,
}

/// Device counts, each a subset of the previous where it says so.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DeviceCounts {
    /// Devices reachable from the node (its own slices, matching node-selector slices, all-nodes
    /// slices), current pool generation only.
    pub devices: usize,
    /// Of those, the ones every selector of the device class keeps.
    pub class_match: usize,
    /// Of those, the ones every selector of the request keeps.
    pub request_match: usize,
    /// Of those, the ones allocated to other claims (not counted for admin-access requests).
    pub allocated: usize,
    /// Of those, the ones with a NoSchedule/NoExecute taint the request does not tolerate.
    pub tainted: usize,
    /// Of those, the ones in a pool whose slices are not all published (the allocator skips them).
    pub incomplete_pool: usize,
    /// Of those, partitions whose shared counters (partitionable devices) the allocated partitions
    /// of their pool have used up.
    pub counters_used_up: usize,
    /// Matching devices that are neither allocated, tainted, in an incomplete pool nor short of
    /// shared counters.
    pub free: usize,
}

/// One node's counts for one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeCounts {
    /// The node.
    pub node: String,
    /// Its counts.
    #[serde(flatten)]
    pub counts: DeviceCounts,
}

/// A selector that rejected devices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SelectorMiss {
    /// `class NAME` or `request`.
    pub source: String,
    /// The selector's index in its list.
    pub index: usize,
    /// The CEL expression.
    pub expression: String,
    /// How many distinct devices it was the first selector to reject.
    pub rejected: usize,
    /// One device it rejected (`driver/pool/device`).
    pub sample_device: String,
    /// The CEL error, when it failed instead of returning false (kube-scheduler aborts the cycle).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One request (or subrequest).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestDiagnosis {
    /// `request` or `request/subrequest`.
    pub request: String,
    /// Its device class.
    pub device_class: String,
    /// False when the class does not exist.
    pub class_exists: bool,
    /// How many devices it wants.
    pub wants: Wants,
    /// adminAccess requests may use allocated devices.
    pub admin_access: bool,
    /// Devices reachable from any node, counted once each.
    pub cluster: DeviceCounts,
    /// Per node, in snapshot order.
    pub nodes: Vec<NodeCounts>,
    /// Nodes with enough free matching devices for this request alone.
    pub nodes_with_enough: usize,
    /// Selectors that rejected devices (class selectors first).
    pub selector_misses: Vec<SelectorMiss>,
}

static NO_ATTRIBUTES: BTreeMap<String, DeviceAttribute> = BTreeMap::new();
static NO_CAPACITY: BTreeMap<String, DeviceCapacity> = BTreeMap::new();

/// The request's parts that filtering needs (an `exactly` request or one subrequest).
struct RequestView<'a> {
    name: String,
    class: &'a str,
    selectors: &'a [DeviceSelector],
    tolerations: &'a [DeviceToleration],
    wants: Wants,
    admin_access: bool,
}

fn wants(mode: Option<&str>, count: Option<i64>) -> Wants {
    match mode {
        Some("All") => Wants::All,
        _ => Wants::Count(count.unwrap_or(1)),
    }
}

fn request_views(claim: &ResourceClaim) -> Vec<RequestView<'_>> {
    let mut out = Vec::new();
    for request in crate::plugins::dynamic_resources::requests(claim) {
        if let Some(e) = &request.exactly {
            out.push(RequestView {
                name: request.name.clone(),
                class: &e.device_class_name,
                selectors: e.selectors.as_deref().unwrap_or_default(),
                tolerations: e.tolerations.as_deref().unwrap_or_default(),
                wants: wants(e.allocation_mode.as_deref(), e.count),
                admin_access: e.admin_access == Some(true),
            });
        }
        for sub in request.first_available.iter().flatten() {
            out.push(RequestView {
                name: format!("{}/{}", request.name, sub.name),
                class: &sub.device_class_name,
                selectors: sub.selectors.as_deref().unwrap_or_default(),
                tolerations: sub.tolerations.as_deref().unwrap_or_default(),
                wants: wants(sub.allocation_mode.as_deref(), sub.count),
                admin_access: false,
            });
        }
    }
    out
}

/// A reachable device with what filtering needs of its slice.
#[derive(Clone, Copy)]
struct DeviceRef<'a> {
    slice: &'a ResourceSlice,
    device: &'a Device,
    incomplete_pool: bool,
    counters_used_up: bool,
}

impl DeviceRef<'_> {
    fn id(&self) -> DeviceId {
        DeviceId::new(
            &self.slice.spec.driver,
            &self.slice.spec.pool.name,
            &self.device.name,
        )
    }
}

/// Per pool (driver, pool): the newest generation and whether its slices at that generation are all
/// there, and what is left of its shared counters once the allocated devices took theirs.
struct Pools {
    newest: HashMap<(String, String), (i64, bool)>,
    /// (driver, pool) → (counter set, counter) → what allocated devices left.
    counters_left: HashMap<(String, String), HashMap<(String, String), ExactQuantity>>,
}

impl Pools {
    fn new(snapshot: &Snapshot) -> Self {
        let mut counts: HashMap<(String, String), (i64, i64, usize)> = HashMap::new();
        for slice in snapshot.resource_slices.all() {
            let key = (slice.spec.driver.clone(), slice.spec.pool.name.clone());
            let generation = slice.spec.pool.generation;
            let expected = slice.spec.pool.resource_slice_count;
            let entry = counts.entry(key).or_insert((generation, expected, 0));
            if generation > entry.0 {
                *entry = (generation, expected, 0);
            }
            if generation == entry.0 {
                entry.2 += 1;
            }
        }
        let mut pools = Pools {
            newest: counts
                .into_iter()
                .map(|(k, (generation, expected, seen))| (k, (generation, (seen as i64) < expected)))
                .collect(),
            counters_left: HashMap::new(),
        };
        // Shared counters of the current generation, less what allocated devices consume (as the
        // allocator's checkAvailableCounters starts from).
        let current: Vec<&ResourceSlice> = snapshot
            .resource_slices
            .all()
            .map(|s| s.as_ref())
            .filter(|s| pools.current(s).is_some())
            .collect();
        for slice in &current {
            let key = (slice.spec.driver.clone(), slice.spec.pool.name.clone());
            for set in slice.spec.shared_counters.iter().flatten() {
                for (name, counter) in &set.counters {
                    pools.counters_left.entry(key.clone()).or_default().insert(
                        (set.name.clone(), name.clone()),
                        ExactQuantity::from_quantity(&counter.value),
                    );
                }
            }
        }
        for slice in &current {
            let key = (slice.spec.driver.clone(), slice.spec.pool.name.clone());
            let Some(left) = pools.counters_left.get_mut(&key) else {
                continue;
            };
            for device in slice.spec.devices.iter().flatten() {
                let id = DeviceId::new(&slice.spec.driver, &slice.spec.pool.name, &device.name);
                if !snapshot.allocated.is_device_allocated(&id) {
                    continue;
                }
                for consumption in device.consumes_counters.iter().flatten() {
                    for (name, counter) in &consumption.counters {
                        if let Some(q) = left.get_mut(&(consumption.counter_set.clone(), name.clone())) {
                            q.sub(&ExactQuantity::from_quantity(&counter.value));
                        }
                    }
                }
            }
        }
        pools
    }

    /// True when `device` consumes more of some shared counter than allocated devices left.
    fn counters_used_up(&self, slice: &ResourceSlice, device: &Device) -> bool {
        let Some(consumes) = device.consumes_counters.as_ref().filter(|c| !c.is_empty()) else {
            return false;
        };
        let key = (slice.spec.driver.clone(), slice.spec.pool.name.clone());
        let Some(left) = self.counters_left.get(&key) else {
            return false;
        };
        consumes.iter().any(|consumption| {
            consumption.counters.iter().any(|(name, counter)| {
                left.get(&(consumption.counter_set.clone(), name.clone()))
                    .is_some_and(|l| *l < ExactQuantity::from_quantity(&counter.value))
            })
        })
    }

    /// `Some(incomplete)` for a slice of its pool's newest generation, `None` for an older one.
    fn current(&self, slice: &ResourceSlice) -> Option<bool> {
        let key = (slice.spec.driver.clone(), slice.spec.pool.name.clone());
        let &(generation, incomplete) = self.newest.get(&key)?;
        (slice.spec.pool.generation == generation).then_some(incomplete)
    }
}

/// The devices reachable from `node`, as the allocator's GatherPools finds them.
fn devices_for_node<'a>(snapshot: &'a Snapshot, pools: &Pools, node: &NodeInfo) -> Vec<DeviceRef<'a>> {
    let mut out = Vec::new();
    for slice in snapshot.resource_slices.for_node(node.name()) {
        let Some(incomplete_pool) = pools.current(slice) else {
            continue;
        };
        let spec = &slice.spec;
        // `NodeMatches`, as GatherPools applies it (a selector that does not parse reaches nothing).
        let matches = |name: Option<&str>, all: Option<bool>, selector| {
            pools::node_matches(&node.node, name, all == Some(true), selector).unwrap_or(false)
        };
        let slice_reaches = matches(
            spec.node_name.as_deref(),
            spec.all_nodes,
            spec.node_selector.as_ref(),
        );
        let per_device = spec.per_device_node_selection == Some(true);
        for device in spec.devices.iter().flatten() {
            let reaches = if per_device {
                matches(
                    device.node_name.as_deref(),
                    device.all_nodes,
                    device.node_selector.as_ref(),
                )
            } else {
                slice_reaches
            };
            if reaches {
                out.push(DeviceRef {
                    slice,
                    device,
                    incomplete_pool,
                    counters_used_up: pools.counters_used_up(slice, device),
                });
            }
        }
    }
    out
}

/// What the selectors said about one device for one request.
#[derive(Clone)]
struct Verdict {
    class_match: bool,
    request_match: bool,
    /// (class selector?, index, error) of the first selector that rejected it.
    first_miss: Option<(bool, usize, Option<String>)>,
}

fn evaluate(
    cache: &cel::Cache,
    selectors: &[DeviceSelector],
    device: &cel::Device<'_>,
) -> Result<(), (usize, Option<String>)> {
    for (i, selector) in selectors.iter().enumerate() {
        let Some(expression) = selector.cel.as_ref().map(|c| c.expression.as_str()) else {
            continue;
        };
        let compiled = cache.get_or_compile(expression);
        if let Some(e) = &compiled.error {
            return Err((i, Some(format!("CEL compile error: {e}"))));
        }
        match compiled.device_matches(device) {
            Ok(true) => {}
            Ok(false) => return Err((i, None)),
            Err(e) => return Err((i, Some(format!("CEL runtime error: {e}")))),
        }
    }
    Ok(())
}

fn verdict(
    cache: &cel::Cache,
    class: Option<&DeviceClass>,
    request: &RequestView<'_>,
    d: DeviceRef<'_>,
) -> Verdict {
    let device = cel::Device {
        driver: &d.slice.spec.driver,
        attributes: d.device.attributes.as_ref().unwrap_or(&NO_ATTRIBUTES),
        capacity: d.device.capacity.as_ref().unwrap_or(&NO_CAPACITY),
        allow_multiple_allocations: d.device.allow_multiple_allocations,
    };
    let Some(class) = class else {
        // No class, no device: kube-scheduler stops at PreFilter ("device class ... does not exist").
        return Verdict {
            class_match: false,
            request_match: false,
            first_miss: None,
        };
    };
    let class_selectors = class
        .spec
        .as_ref()
        .and_then(|s| s.selectors.as_deref())
        .unwrap_or_default();
    if let Err((i, e)) = evaluate(cache, class_selectors, &device) {
        return Verdict {
            class_match: false,
            request_match: false,
            first_miss: Some((true, i, e)),
        };
    }
    match evaluate(cache, request.selectors, &device) {
        Ok(()) => Verdict {
            class_match: true,
            request_match: true,
            first_miss: None,
        },
        Err((i, e)) => Verdict {
            class_match: true,
            request_match: false,
            first_miss: Some((false, i, e)),
        },
    }
}

/// The taints of `device` that keep `request` off it (NoSchedule/NoExecute, not tolerated).
fn blocking_taints<'a>(device: &'a Device, request: &RequestView<'_>) -> Vec<&'a DeviceTaint> {
    device
        .taints
        .iter()
        .flatten()
        .filter(|t| matches!(t.effect.as_str(), "NoSchedule" | "NoExecute"))
        .filter(|t| !request.tolerations.iter().any(|tol| taints::tolerates(tol, t)))
        .collect()
}

/// Everything one request's diagnosis gathers besides the counts.
#[derive(Default)]
struct RequestFindings {
    misses: BTreeMap<(bool, usize), (usize, String, Option<String>)>,
    taints: BTreeMap<String, usize>,
    holders: HashSet<String>,
}

/// Diagnoses `pod`'s claims on `snapshot` (`None` when the pod has no claim the snapshot knows).
pub fn diagnose(snapshot: &Snapshot, pod: &PodInfo) -> Option<Diagnosis> {
    let claims = crate::plugins::dynamic_resources::pod_resource_claims(snapshot, pod).ok()?;
    if claims.is_empty() {
        return None;
    }
    let cache = cel::Cache::new(64);
    let pools = Pools::new(snapshot);
    let holders = device_holders(snapshot);
    let node_devices: Vec<(&Arc<NodeInfo>, Vec<DeviceRef<'_>>)> = snapshot
        .nodes()
        .iter()
        .map(|n| (n, devices_for_node(snapshot, &pools, n)))
        .collect();
    let mut diagnosis = Diagnosis::default();
    for claim in &claims {
        diagnosis.claims.push(diagnose_claim(
            snapshot,
            &cache,
            &holders,
            &node_devices,
            claim,
            &mut diagnosis.hints,
        ));
    }
    hints::overall(&mut diagnosis, snapshot);
    Some(diagnosis)
}

/// Which claim holds each allocated device (`namespace/name`).
fn device_holders(snapshot: &Snapshot) -> HashMap<DeviceId, String> {
    let mut out = HashMap::new();
    for (key, claim) in &snapshot.resource_claims {
        let results = claim
            .status
            .as_ref()
            .and_then(|s| s.allocation.as_ref())
            .and_then(|a| a.devices.as_ref())
            .and_then(|d| d.results.as_ref());
        for r in results.into_iter().flatten() {
            out.insert(DeviceId::new(&r.driver, &r.pool, &r.device), key.clone());
        }
    }
    out
}

fn diagnose_claim(
    snapshot: &Snapshot,
    cache: &cel::Cache,
    holders: &HashMap<DeviceId, String>,
    node_devices: &[(&Arc<NodeInfo>, Vec<DeviceRef<'_>>)],
    claim: &ResourceClaim,
    hints: &mut Vec<String>,
) -> ClaimDiagnosis {
    let key = crate::plugins::dynamic_resources::claim_key(claim);
    let mut out = ClaimDiagnosis {
        claim: key.clone(),
        ..Default::default()
    };
    if let Some(allocation) = claim.status.as_ref().and_then(|s| s.allocation.as_ref()) {
        out.allocated_devices = allocation
            .devices
            .iter()
            .flat_map(|d| d.results.iter().flatten())
            .map(|r| format!("{}/{}/{}", r.driver, r.pool, r.device))
            .collect();
        return out;
    }
    out.constraints = claim
        .spec
        .iter()
        .flat_map(|s| s.devices.iter())
        .flat_map(|d| d.constraints.iter().flatten())
        .map(|c| {
            let over = c
                .requests
                .as_ref()
                .map(|r| r.join(", "))
                .unwrap_or_else(|| "all requests".into());
            match (&c.match_attribute, &c.distinct_attribute) {
                (Some(a), _) => format!("matchAttribute {a} over {over}"),
                (_, Some(a)) => format!("distinctAttribute {a} over {over}"),
                _ => format!("constraint over {over}"),
            }
        })
        .collect();
    for request in request_views(claim) {
        let class = snapshot.device_classes.get(request.class).map(Arc::as_ref);
        let mut findings = RequestFindings::default();
        let mut verdicts: HashMap<DeviceId, Verdict> = HashMap::new();
        let mut cluster_seen: HashSet<DeviceId> = HashSet::new();
        let mut cluster = DeviceCounts::default();
        let mut nodes = Vec::with_capacity(node_devices.len());
        for (node, devices) in node_devices {
            let mut counts = DeviceCounts::default();
            for &d in devices {
                let id = d.id();
                let v = verdicts
                    .entry(id.clone())
                    .or_insert_with(|| verdict(cache, class, &request, d))
                    .clone();
                let first_time = cluster_seen.insert(id.clone());
                let counted = count_device(&mut counts, &v, d, &id, snapshot, &request);
                if first_time {
                    count_device(&mut cluster, &v, d, &id, snapshot, &request);
                    record_findings(&mut findings, &v, d, &id, holders, &request, counted);
                }
            }
            nodes.push(NodeCounts {
                node: node.name().to_string(),
                counts,
            });
        }
        let nodes_with_enough = nodes.iter().filter(|n| enough(&n.counts, request.wants)).count();
        let selector_misses = findings
            .misses
            .iter()
            .map(|(&(is_class, index), (rejected, sample, error))| {
                let selectors = if is_class {
                    class
                        .and_then(|c| c.spec.as_ref().and_then(|s| s.selectors.as_deref()))
                        .unwrap_or_default()
                } else {
                    request.selectors
                };
                SelectorMiss {
                    source: if is_class {
                        format!("class {}", request.class)
                    } else {
                        "request".to_string()
                    },
                    index,
                    expression: selectors
                        .get(index)
                        .and_then(|s| s.cel.as_ref())
                        .map(|c| c.expression.clone())
                        .unwrap_or_default(),
                    rejected: *rejected,
                    sample_device: sample.clone(),
                    error: error.clone(),
                }
            })
            .collect();
        let diagnosis = RequestDiagnosis {
            request: request.name.clone(),
            device_class: request.class.to_string(),
            class_exists: class.is_some(),
            wants: request.wants,
            admin_access: request.admin_access,
            cluster,
            nodes,
            nodes_with_enough,
            selector_misses,
        };
        hints::for_request(
            hints,
            &key,
            &diagnosis,
            &findings,
            node_devices,
            cache,
            class,
            &request,
        );
        out.requests.push(diagnosis);
    }
    out
}

/// Adds one device to `counts`; returns which bucket it fell in ("free", "allocated", ...), or
/// `None` when no selector kept it.
fn count_device(
    counts: &mut DeviceCounts,
    v: &Verdict,
    d: DeviceRef<'_>,
    id: &DeviceId,
    snapshot: &Snapshot,
    request: &RequestView<'_>,
) -> Option<&'static str> {
    counts.devices += 1;
    if !v.class_match {
        return None;
    }
    counts.class_match += 1;
    if !v.request_match {
        return None;
    }
    counts.request_match += 1;
    if !request.admin_access && snapshot.allocated.allocated_devices.contains(id) {
        counts.allocated += 1;
        return Some("allocated");
    }
    if !blocking_taints(d.device, request).is_empty() {
        counts.tainted += 1;
        return Some("tainted");
    }
    if d.incomplete_pool {
        counts.incomplete_pool += 1;
        return Some("incomplete_pool");
    }
    if d.counters_used_up {
        counts.counters_used_up += 1;
        return Some("counters_used_up");
    }
    counts.free += 1;
    Some("free")
}

fn record_findings(
    findings: &mut RequestFindings,
    v: &Verdict,
    d: DeviceRef<'_>,
    id: &DeviceId,
    holders: &HashMap<DeviceId, String>,
    request: &RequestView<'_>,
    bucket: Option<&'static str>,
) {
    if let Some((is_class, index, error)) = &v.first_miss {
        let entry = findings
            .misses
            .entry((*is_class, *index))
            .or_insert_with(|| (0, id.to_string(), error.clone()));
        entry.0 += 1;
    }
    match bucket {
        Some("allocated") => {
            if let Some(holder) = holders.get(id) {
                findings.holders.insert(holder.clone());
            }
        }
        Some("tainted") => {
            for t in blocking_taints(d.device, request) {
                let text = match t.value.as_deref() {
                    Some(v) if !v.is_empty() => format!("{}={}:{}", t.key, v, t.effect),
                    _ => format!("{}:{}", t.key, t.effect),
                };
                *findings.taints.entry(text).or_default() += 1;
            }
        }
        _ => {}
    }
}

/// Whether `counts` has enough free devices for `wants` (All: every matching device is free, and
/// there is at least one).
fn enough(counts: &DeviceCounts, wants: Wants) -> bool {
    match wants {
        Wants::Count(n) => counts.free as i64 >= n,
        Wants::All => counts.request_match > 0 && counts.free == counts.request_match,
    }
}
