//! The scorer NodeResourcesFit and NodeResourcesBalancedAllocation share (upstream
//! `resourceAllocationScorer`): it turns a node's allocatable and requested amounts of the configured
//! resources, plus the incoming pod's requests, into one score with a pluggable function
//! (LeastAllocated, MostAllocated, RequestedToCapacityRatio, or the balance of the fractions).
//!
//! Extended resources backed by DRA (a scored resource no device plugin advertises on the node but a
//! DeviceClass maps) are scored by device counts: how many devices of the class the node can reach
//! and how many of those are allocated ([`DraExtendedResources`]).
//!
//! Also home of the `ResourceSpec` arg type and of the arg-validation helpers both plugins use.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{Device, DeviceClass, ResourceSlice};
use serde::{Deserialize, Serialize};

use crate::dra::cel;
use crate::framework::interface::MAX_NODE_SCORE;
use crate::framework::status::Status;
use crate::labels::NodeSelectorMatcher;
use crate::plugins::helper::device_classes::DeviceClassResolver;
use crate::plugins::helper::device_classes::is_dra_extended_resource_name;
use crate::plugins::helper::shape_score::{ShapePoint, utilization_score};
use crate::resource::{CPU, EPHEMERAL_STORAGE, MEMORY, is_scalar_resource_name};
use crate::snapshot::requests::{
    Amounts, DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, RequestOptions, pod_requests,
};
use crate::snapshot::{DeviceId, NodeInfo, Snapshot};

/// A resource to score and its weight (`ResourceSpec` of KubeSchedulerConfiguration v1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ResourceSpec {
    /// Resource name, e.g. `cpu` or `nvidia.com/gpu`.
    pub name: String,
    /// Weight; 0 (unset) is defaulted to 1.
    #[serde(default)]
    pub weight: i64,
}

impl ResourceSpec {
    /// A spec.
    pub(crate) fn new(name: &str, weight: i64) -> Self {
        ResourceSpec {
            name: name.to_string(),
            weight,
        }
    }
}

/// The default scored resources: cpu and memory, weight 1 each.
pub(crate) fn default_resources() -> Vec<ResourceSpec> {
    vec![ResourceSpec::new(CPU, 1), ResourceSpec::new(MEMORY, 1)]
}

/// The function that turns per-resource (requested, allocated, allocatable) into a node score.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ScoringFunction {
    /// Favors nodes with more free capacity.
    LeastAllocated,
    /// Favors nodes with less free capacity (bin packing).
    MostAllocated,
    /// A broken-linear function of the utilization.
    RequestedToCapacityRatio(Vec<ShapePoint>),
    /// Favors placements that even out the resource fractions (BalancedAllocation from v1.36):
    /// scores the change the pod makes to the node's balance.
    Balanced,
    /// BalancedAllocation up to v1.35: scores the balance of the fractions with the pod,
    /// `(1 - std) * MaxNodeScore`, whatever the balance was before.
    BalancedWithPod,
}

/// How the incoming pod's requests are computed for scoring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestMode {
    /// Containers without a cpu/memory request count 100m / 200 MiB, and node usage is the non-zero
    /// requested sum. Upstream's NodeResourcesFit scorer never receives the PodLevelResources and
    /// InPlacePodVerticalScaling switches (its own fields shadow the scorer's), so pod-level requests
    /// and container statuses are ignored here too.
    NonZero,
    /// Actual requests, computed with the options the plugin's gates give
    /// ([`RequestOptions::from_features`]: pod-level requests and in-place-resize status in v1.37.1);
    /// node usage is the actual requested sum (BalancedAllocation).
    Requested(RequestOptions),
}

/// Scores nodes by how the pod's requests would use their allocatable resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourceAllocationScorer {
    /// The scored resources with their weights.
    pub resources: Vec<ResourceSpec>,
    /// The scoring function.
    pub function: ScoringFunction,
    /// How pod and node requests are read.
    pub mode: RequestMode,
}

impl ResourceAllocationScorer {
    /// The pod's request for each configured resource, in the order of `resources`
    /// (`calculatePodResourceRequestList`).
    pub(crate) fn pod_request_list(&self, pod: &Pod) -> Vec<i64> {
        let requests = match self.mode {
            RequestMode::NonZero => {
                let non_missing: Amounts = [
                    (CPU.to_string(), DEFAULT_MILLI_CPU_REQUEST),
                    (MEMORY.to_string(), DEFAULT_MEMORY_REQUEST),
                ]
                .into();
                // Upstream's Fit scorer has its gate fields unset: spec only, pod level skipped.
                let opts = RequestOptions {
                    skip_pod_level_resources: true,
                    ..RequestOptions::default()
                };
                pod_requests(pod, &non_missing, opts)
            }
            RequestMode::Requested(opts) => pod_requests(pod, &Amounts::new(), opts),
        };
        self.resources
            .iter()
            .map(|r| requests.get(&r.name).copied().unwrap_or(0))
            .collect()
    }

    /// The node's score for a pod whose requests are `pod_requests` (from `pod_request_list`).
    #[cfg(test)]
    pub(crate) fn score(&self, node: &NodeInfo, pod_requests: &[i64]) -> (i64, Status) {
        self.score_with_dra(node, pod_requests, None)
    }

    /// [`Self::score`] counting extended resources backed by DRA through `dra` (upstream's
    /// `draPreScoreState`, absent when no scored resource maps to a DeviceClass).
    pub(crate) fn score_with_dra(
        &self,
        node: &NodeInfo,
        pod_requests: &[i64],
        dra: Option<&DraExtendedResources>,
    ) -> (i64, Status) {
        if self.resources.is_empty() {
            return (0, Status::error("resources not found"));
        }
        let (requested, allocated, allocatable) =
            self.node_allocatable_request_with_dra(node, pod_requests, dra);
        let score = self.score_amounts(&requested, &allocated, &allocatable);
        (score, Status::success())
    }

    /// A whole placement's score (`scorePlacement`, TopologyAwareWorkloadScheduling): the requests
    /// of the group's pods placed there (`pod_requests`, one list per pod) plus what the
    /// placement's `nodes` already hold, against their summed allocatable, through the scoring
    /// function. Upstream passes its running sum as the "pod request" when it reads each node; only
    /// whether a scalar resource is requested depends on it, so the sum is passed here too.
    pub(crate) fn placement_score(&self, pod_requests: &[Vec<i64>], nodes: &[&NodeInfo]) -> i64 {
        let n = self.resources.len();
        let mut requested = vec![0_i64; n];
        for pod in pod_requests {
            for (sum, request) in requested.iter_mut().zip(pod) {
                *sum = sum.saturating_add(*request);
            }
        }
        let (mut allocated, mut allocatable) = (vec![0_i64; n], vec![0_i64; n]);
        for node in nodes {
            let (_, node_allocated, node_allocatable) =
                self.node_allocatable_request_with_dra(node, &requested, None);
            for i in 0..n {
                allocatable[i] = allocatable[i].saturating_add(node_allocatable[i]);
                allocated[i] = allocated[i].saturating_add(node_allocated[i]);
                requested[i] = requested[i].saturating_add(node_allocated[i]);
            }
        }
        self.score_amounts(&requested, &allocated, &allocatable)
    }

    /// The scoring function over per-resource (requested, allocated, allocatable) amounts.
    fn score_amounts(&self, requested: &[i64], allocated: &[i64], allocatable: &[i64]) -> i64 {
        match &self.function {
            ScoringFunction::LeastAllocated => {
                weighted_mean(&self.resources, requested, allocatable, least_requested_score)
            }
            ScoringFunction::MostAllocated => {
                weighted_mean(&self.resources, requested, allocatable, most_requested_score)
            }
            ScoringFunction::RequestedToCapacityRatio(shape) => {
                requested_to_capacity_ratio_score(&self.resources, shape, requested, allocatable)
            }
            ScoringFunction::Balanced => balanced_resource_scorer(requested, allocated, allocatable),
            ScoringFunction::BalancedWithPod => balanced_resource_score(requested, allocatable),
        }
    }

    /// Per configured resource: (node requested + pod request, node requested, node allocatable).
    /// A resource stays all-zero (and is left out of the score) when the node has none of it, or when
    /// it is a scalar resource the pod does not request.
    #[cfg(test)]
    pub(crate) fn node_allocatable_request(
        &self,
        node: &NodeInfo,
        pod_requests: &[i64],
    ) -> (Vec<i64>, Vec<i64>, Vec<i64>) {
        self.node_allocatable_request_with_dra(node, pod_requests, None)
    }

    /// [`Self::node_allocatable_request`] with extended resources backed by DRA counted in devices.
    pub(crate) fn node_allocatable_request_with_dra(
        &self,
        node: &NodeInfo,
        pod_requests: &[i64],
        dra: Option<&DraExtendedResources>,
    ) -> (Vec<i64>, Vec<i64>, Vec<i64>) {
        let n = self.resources.len();
        let (mut requested, mut allocated, mut allocatable) = (vec![0; n], vec![0; n], vec![0; n]);
        for (i, spec) in self.resources.iter().enumerate() {
            let pod_request = pod_requests.get(i).copied().unwrap_or(0);
            if pod_request == 0 && is_scalar_resource_name(&spec.name) {
                continue;
            }
            let (node_allocatable, node_allocated) = self.resource_allocatable_request(node, &spec.name, dra);
            if node_allocatable == 0 {
                continue;
            }
            allocatable[i] = node_allocatable;
            allocated[i] = node_allocated;
            requested[i] = node_allocated.saturating_add(pod_request);
        }
        (requested, allocated, allocatable)
    }

    fn resource_allocatable_request(
        &self,
        node: &NodeInfo,
        name: &str,
        dra: Option<&DraExtendedResources>,
    ) -> (i64, i64) {
        let usage = match self.mode {
            RequestMode::NonZero => &node.non_zero_requested,
            RequestMode::Requested(_) => &node.requested,
        };
        match name {
            CPU => (node.allocatable.milli_cpu, usage.milli_cpu),
            MEMORY => (node.allocatable.memory, usage.memory),
            // Ephemeral storage has no non-zero default: always the actual requests.
            EPHEMERAL_STORAGE => (
                node.allocatable.ephemeral_storage,
                node.requested.ephemeral_storage,
            ),
            _ => {
                let alloc = node.allocatable.scalar_resources.get(name).copied();
                // No device plugin's amount (absent or 0): count the devices of the class backing it.
                if alloc.unwrap_or(0) == 0
                    && let Some(dra) = dra
                {
                    let (capacity, allocated) = dra.allocatable_request(node, name);
                    if capacity > 0 {
                        return (capacity, allocated);
                    }
                }
                match alloc {
                    Some(alloc) => (alloc, node.requested.get(name)),
                    None => (0, 0),
                }
            }
        }
    }
}

/// What scoring needs to count the devices behind extended resources backed by DRA (upstream's
/// `draPreScoreState` with the scorer's DRA manager and CEL cache), built once per snapshot.
#[derive(Debug)]
pub(crate) struct DraExtendedResources {
    resolver: Arc<DeviceClassResolver>,
    snapshot: Arc<Snapshot>,
    cel: cel::Cache,
}

impl DraExtendedResources {
    /// `getDRAPreScoredParams`: `None` unless one of the scored `resources` is an extended resource
    /// name a DeviceClass maps (then nothing is backed by DRA and scoring stays as before).
    pub(crate) fn for_scoring(
        snapshot: &Arc<Snapshot>,
        resolver: &Arc<DeviceClassResolver>,
        resources: &[ResourceSpec],
    ) -> Option<Arc<Self>> {
        let any_backed_by_dra = resources
            .iter()
            .any(|r| is_dra_extended_resource_name(&r.name) && resolver.get_device_class(&r.name).is_some());
        if !any_backed_by_dra {
            return None;
        }
        Some(Arc::new(DraExtendedResources {
            resolver: resolver.clone(),
            snapshot: snapshot.clone(),
            cel: cel::Cache::new(DRA_CEL_CACHE_SIZE),
        }))
    }

    /// `calculateDRAExtendedResourceAllocatableRequest`: (devices of the class backing `resource`
    /// that the node reaches, how many of them are allocated); (0, 0) when no class backs it or a
    /// node selector or CEL selector fails (kube-scheduler logs the error and scores without it).
    pub(crate) fn allocatable_request(&self, node: &NodeInfo, resource: &str) -> (i64, i64) {
        let Some(class) = self.resolver.get_device_class(resource) else {
            return (0, 0);
        };
        self.resource_totals(node, class).unwrap_or((0, 0))
    }

    /// `calculateDRAResourceTotals`: counts every device of every slice that reaches the node and
    /// matches the class, whatever its pool generation.
    fn resource_totals(&self, node: &NodeInfo, class: &DeviceClass) -> Result<(i64, i64), String> {
        let (mut capacity, mut allocated) = (0_i64, 0_i64);
        let slices = &self.snapshot.resource_slices;
        // Slices naming no node at all (the API server rejects them) pass kube-scheduler's checks.
        for slice in slices.for_node(node.name()).chain(&slices.other) {
            for device in devices_for_node(slice, node)? {
                if self.device_matches_class(device, class, &slice.spec.driver)? {
                    capacity += 1;
                    let id = DeviceId::new(&slice.spec.driver, &slice.spec.pool.name, &device.name);
                    // `structured.IsDeviceAllocated` over `GatherAllocatedState`: admin-access
                    // allocations do not count.
                    if self.snapshot.allocated.is_device_allocated(&id) {
                        allocated += 1;
                    }
                }
            }
        }
        Ok((capacity, allocated))
    }

    /// `deviceMatchesClass`: every CEL selector of the class accepts the device.
    fn device_matches_class(
        &self,
        device: &Device,
        class: &DeviceClass,
        driver: &str,
    ) -> Result<bool, String> {
        let empty_attributes = BTreeMap::new();
        let empty_capacity = BTreeMap::new();
        for selector in class.spec.iter().flat_map(|s| s.selectors.iter().flatten()) {
            let Some(expression) = selector.cel.as_ref().map(|c| c.expression.as_str()) else {
                continue;
            };
            let compiled = self.cel.get_or_compile(expression);
            if let Some(e) = &compiled.error {
                return Err(e.to_string());
            }
            // Scoring gives the selector the driver, attributes and capacity only.
            let cel_device = cel::Device {
                driver,
                attributes: device.attributes.as_ref().unwrap_or(&empty_attributes),
                capacity: device.capacity.as_ref().unwrap_or(&empty_capacity),
                allow_multiple_allocations: None,
            };
            if !compiled.device_matches(&cel_device).map_err(|e| e.to_string())? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// How many compiled selectors scoring keeps (`cel.NewCache(10, ...)` upstream).
const DRA_CEL_CACHE_SIZE: usize = 10;

/// The devices of `slice` reachable from `node`, as `calculateDRAResourceTotals` selects them: per
/// device with `perDeviceNodeSelection`, else the whole slice by node name, all nodes or selector.
fn devices_for_node<'a>(slice: &'a ResourceSlice, node: &NodeInfo) -> Result<Vec<&'a Device>, String> {
    let spec = &slice.spec;
    let node_name = node.name();
    let devices = spec.devices.as_deref().unwrap_or_default();
    let selector_matches = |selector: &k8s_openapi::api::core::v1::NodeSelector| {
        NodeSelectorMatcher::parse(selector)
            .map(|m| m.matches(node.labels(), node_name))
            .map_err(|e| format!("failed to parse node selector: {e}"))
    };
    if spec.per_device_node_selection == Some(true) {
        let mut out = Vec::with_capacity(devices.len());
        for device in devices {
            let device_node = device.node_name.as_deref().unwrap_or("");
            let all_nodes = device.all_nodes == Some(true);
            if all_nodes || (!device_node.is_empty() && device_node == node_name) {
                out.push(device);
                continue;
            }
            if let Some(selector) = &device.node_selector {
                // `NodeMatches` checks a node name first, then all nodes, then the selector.
                let matches = if !device_node.is_empty() {
                    false
                } else {
                    selector_matches(selector)?
                };
                if matches {
                    out.push(device);
                }
            }
        }
        return Ok(out);
    }
    let slice_node = spec.node_name.as_deref().unwrap_or("");
    let all_nodes = spec.all_nodes == Some(true);
    if !all_nodes && slice_node != node_name && spec.node_selector.is_some() {
        let matches = if !slice_node.is_empty() {
            false
        } else if let Some(selector) = &spec.node_selector {
            selector_matches(selector)?
        } else {
            false
        };
        if !matches {
            return Ok(Vec::new());
        }
    } else if !all_nodes && !slice_node.is_empty() && slice_node != node_name {
        return Ok(Vec::new());
    }
    Ok(devices.iter().collect())
}

/// True when the pod requests none of the scored resources.
pub(crate) fn is_best_effort(pod_requests: &[i64]) -> bool {
    pod_requests.iter().all(|r| *r == 0)
}

/// `(a * b) / c` without overflow (quantities saturate at i64::MAX); `c` must be non-zero.
fn mul_div(a: i64, b: i64, c: i64) -> i64 {
    let v = i128::from(a) * i128::from(b) / i128::from(c);
    v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// LeastAllocated per resource: the free fraction on a 0–100 scale.
pub(crate) fn least_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    mul_div(capacity.saturating_sub(requested), MAX_NODE_SCORE, capacity)
}

/// MostAllocated per resource: the used fraction on a 0–100 scale (requests past capacity, possible
/// through the non-zero defaults, count as full).
pub(crate) fn most_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 {
        return 0;
    }
    mul_div(requested.min(capacity), MAX_NODE_SCORE, capacity)
}

fn weighted_mean(
    resources: &[ResourceSpec],
    requested: &[i64],
    allocatable: &[i64],
    per_resource: fn(i64, i64) -> i64,
) -> i64 {
    let (mut node_score, mut weight_sum) = (0_i64, 0_i64);
    for (i, spec) in resources.iter().enumerate() {
        if allocatable[i] == 0 {
            continue;
        }
        node_score =
            node_score.saturating_add(per_resource(requested[i], allocatable[i]).saturating_mul(spec.weight));
        weight_sum = weight_sum.saturating_add(spec.weight);
    }
    if weight_sum == 0 {
        return 0;
    }
    node_score / weight_sum
}

fn requested_to_capacity_ratio_score(
    resources: &[ResourceSpec],
    shape: &[ShapePoint],
    requested: &[i64],
    allocatable: &[i64],
) -> i64 {
    let (mut node_score, mut weight_sum) = (0_i64, 0_i64);
    for (i, spec) in resources.iter().enumerate() {
        if allocatable[i] == 0 {
            continue;
        }
        let score = utilization_score(shape, requested[i], allocatable[i]);
        // A zero-scoring resource does not dilute the mean: only positive scores are averaged.
        if score > 0 {
            node_score = node_score.saturating_add(score.saturating_mul(spec.weight));
            weight_sum = weight_sum.saturating_add(spec.weight);
        }
    }
    if weight_sum == 0 {
        return 0;
    }
    (node_score as f64 / weight_sum as f64).round() as i64
}

/// `(1 - std) * 100` of the requested/allocatable fractions (each capped at 1); std is |f1 - f2| / 2
/// for two resources and the population standard deviation for more.
pub(crate) fn balanced_resource_score(requested: &[i64], allocatable: &[i64]) -> i64 {
    let fractions: Vec<f64> = requested
        .iter()
        .zip(allocatable)
        .filter(|(_, a)| **a != 0)
        .map(|(r, a)| (*r as f64 / *a as f64).min(1.0))
        .collect();
    let std = match fractions.len() {
        2 => ((fractions[0] - fractions[1]) / 2.0).abs(),
        n if n > 2 => {
            let mean = fractions.iter().sum::<f64>() / n as f64;
            let sum: f64 = fractions.iter().map(|f| (f - mean) * (f - mean)).sum();
            (sum / n as f64).sqrt()
        }
        _ => 0.0,
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

/// BalancedAllocation: how much placing the pod improves the node's balance. Both balance scores lie in
/// [50, 100], so their difference lies in [-50, 50]; the result is mapped back into [50, 100], around 75
/// when the pod changes little.
pub(crate) fn balanced_resource_scorer(requested: &[i64], allocated: &[i64], allocatable: &[i64]) -> i64 {
    let with_pod = balanced_resource_score(requested, allocatable);
    let without_pod = balanced_resource_score(allocated, allocatable);
    MAX_NODE_SCORE / 2 + (MAX_NODE_SCORE / 2 + with_pod - without_pod) / 2
}

/// One validation failure, formatted like apimachinery's `field.Error`.
pub(crate) fn field_error(path: &str, kind: &str, detail: &str) -> String {
    if detail.is_empty() {
        format!("{path}: {kind}")
    } else {
        format!("{path}: {kind}: {detail}")
    }
}

/// apimachinery's aggregate formatting: one error as is, several as `[a, b]`.
pub(crate) fn aggregate(errors: Vec<String>) -> Option<String> {
    match errors.len() {
        0 => None,
        1 => errors.into_iter().next(),
        _ => Some(format!("[{}]", errors.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, pod};

    fn scorer(
        function: ScoringFunction,
        mode: RequestMode,
        resources: &[(&str, i64)],
    ) -> ResourceAllocationScorer {
        ResourceAllocationScorer {
            resources: resources.iter().map(|(n, w)| ResourceSpec::new(n, *w)).collect(),
            function,
            mode,
        }
    }

    #[test]
    fn least_and_most_requested_per_resource() {
        for (requested, capacity, least, most) in [
            (0, 4000, 100, 0),
            (1000, 4000, 75, 25),
            (3000, 4000, 25, 75),
            (4000, 4000, 0, 100),
            (5000, 4000, 0, 100),
            (1, 3, 66, 33),
            (100, 0, 0, 0),
        ] {
            assert_eq!(
                least_requested_score(requested, capacity),
                least,
                "least {requested}/{capacity}"
            );
            assert_eq!(
                most_requested_score(requested, capacity),
                most,
                "most {requested}/{capacity}"
            );
        }
    }

    #[test]
    fn balanced_score_math() {
        // Two resources: std = |0.5 - 0.25| / 2 = 0.125 → 87.
        assert_eq!(balanced_resource_score(&[2000, 1024], &[4000, 4096]), 87);
        // Three resources: fractions .5 .5 1 → mean 2/3, std ≈ 0.2357 → 76.
        assert_eq!(balanced_resource_score(&[1, 1, 2], &[2, 2, 2]), 76);
        // One resource, or none: std 0.
        assert_eq!(balanced_resource_score(&[3, 0], &[4, 0]), 100);
        // Fractions above 1 are capped: 1 and 0.5 → std 0.25 → 75.
        assert_eq!(balanced_resource_score(&[8, 1], &[4, 2]), 75);
        // Improvement mapping: without the pod 87 (.5 vs .25), with it 100 → 50 + (50 + 13) / 2 = 81.
        assert_eq!(balanced_resource_scorer(&[2, 2], &[2, 1], &[4, 4]), 81);
        // Worsening: without 100, with 87 → 50 + (50 - 13) / 2 = 68.
        assert_eq!(balanced_resource_scorer(&[2, 1], &[1, 1], &[4, 4]), 68);
    }

    #[test]
    fn rtcr_rounds_and_ignores_zero_scores() {
        let shape = vec![
            ShapePoint {
                utilization: 0,
                score: 0,
            },
            ShapePoint {
                utilization: 100,
                score: 100,
            },
        ];
        // cpu 25% → 25, memory 0% → 0 (left out of the mean): 25.
        assert_eq!(
            requested_to_capacity_ratio_score(
                &[ResourceSpec::new(CPU, 1), ResourceSpec::new(MEMORY, 1)],
                &shape,
                &[1000, 0],
                &[4000, 1000]
            ),
            25
        );
        // 33 * 1 + 67 * 2 = 167, / 3 = 55.67 → 56 (rounded, not truncated).
        assert_eq!(
            requested_to_capacity_ratio_score(
                &[ResourceSpec::new(CPU, 1), ResourceSpec::new(MEMORY, 2)],
                &shape,
                &[33, 67],
                &[100, 100]
            ),
            56
        );
        // Over capacity counts as 100% utilization.
        assert_eq!(
            requested_to_capacity_ratio_score(&[ResourceSpec::new(CPU, 1)], &shape, &[5, 0], &[4, 0]),
            100
        );
    }

    #[test]
    fn non_zero_mode_defaults_missing_requests_and_ignores_pod_level() {
        let s = scorer(
            ScoringFunction::LeastAllocated,
            RequestMode::NonZero,
            &[(CPU, 1), (MEMORY, 1)],
        );
        let p = pod("p").obj();
        assert_eq!(s.pod_request_list(&p), vec![100, 200 * 1024 * 1024]);
        let with_pod_level = pod("p")
            .cpu("200m")
            .with(|p| {
                p.spec.as_mut().unwrap().resources = Some(k8s_openapi::api::core::v1::ResourceRequirements {
                    requests: Some(
                        [(
                            "cpu".to_string(),
                            k8s_openapi::apimachinery::pkg::api::resource::Quantity("2".into()),
                        )]
                        .into(),
                    ),
                    ..Default::default()
                })
            })
            .obj();
        assert_eq!(s.pod_request_list(&with_pod_level)[0], 200);
        let r = scorer(
            ScoringFunction::Balanced,
            RequestMode::Requested(RequestOptions::from_features(
                &crate::framework::FeatureGates::v1_37(),
            )),
            &[(CPU, 1), (MEMORY, 1)],
        );
        assert_eq!(r.pod_request_list(&with_pod_level)[0], 2000);
        assert_eq!(r.pod_request_list(&p), vec![0, 0]);
    }

    #[test]
    fn unrequested_scalar_and_absent_resources_are_left_out() {
        let s = scorer(
            ScoringFunction::LeastAllocated,
            RequestMode::NonZero,
            &[
                (CPU, 1),
                (MEMORY, 1),
                ("example.com/gpu", 5),
                (EPHEMERAL_STORAGE, 1),
            ],
        );
        let n = node("n")
            .cpu("4")
            .memory("4Gi")
            .allocatable("example.com/gpu", "4")
            .info_with(vec![]);
        let (req, _, alloc) = s.node_allocatable_request(&n, &[1000, 1 << 30, 0, 100]);
        assert_eq!(alloc, vec![4000, 4 << 30, 0, 0]);
        assert_eq!(req, vec![1000, 1 << 30, 0, 0]);
        // 75 and 75 → 75; the gpu (not requested) and ephemeral storage (no allocatable) do not count.
        assert_eq!(s.score(&n, &[1000, 1 << 30, 0, 100]).0, 75);
    }

    #[test]
    fn empty_resources_is_an_error() {
        let s = scorer(ScoringFunction::LeastAllocated, RequestMode::NonZero, &[]);
        let n = node("n").info_with(vec![]);
        assert_eq!(s.score(&n, &[]).1, Status::error("resources not found"));
    }
}
