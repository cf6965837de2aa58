//! DynamicResources (DRA), as in v1.37.1's default profile (DRA is GA), before DefaultPreemption:
//! structured parameters, allocated by [`crate::dra::structured`] with CEL selectors from
//! [`crate::dra::cel`].
//!
//! - PreEnqueue keeps a pod out of the queue while a claim it references is missing, being deleted or
//!   not owned by it (kube-scheduler writes no FailedScheduling event for such a pod).
//! - PreFilter resolves the claims, rejects a request whose device class does not exist, remembers where allocated claims are available, and prepares allocation for the rest.
//! - Filter allocates the unallocated claims on each node (`cannot allocate all claims` when the
//!   allocator finds no devices) and checks that allocated claims are available there.
//! - PostFilter would deallocate one unavailable claim reserved for nobody else, or says in the
//!   release's words why it does nothing ([`post_filter`]); Score prefers nodes
//!   where `firstAvailable` requests got earlier subrequests; Reserve records the chosen node's
//!   allocation. PreBind writes nothing here: only kube-scheduler allocates devices (an outside
//!   allocator would race its in-flight allocations).
//!
//! Every rejection is UnschedulableAndUnresolvable (`statusUnschedulable` upstream), so preemption
//! never helps a pod whose claims cannot be allocated: kube-scheduler's preemption does not free
//! the victims' devices.
//!
//! Extended resources backed by DRA (`example.com/gpu: 2` served by a DeviceClass rather than a
//! device plugin) go through one more, scheduler-owned claim, `<extended-resources>`, after the
//! pod's own claims: see [`extended`]. [`diagnose`] is explain's claim-by-claim, request-by-request
//! account of why devices were not found, which kube-scheduler does not print.
//!
//! One quirk is kept on purpose: when an earlier PreFilter rejected the pod as unresolvable, this
//! plugin's PreFilter never ran, its PostFilter finds no cycle state and fails with `not found` — and
//! kube-scheduler appends that text to the FailedScheduling message.

mod claims;
pub(crate) mod diagnose;
pub(crate) mod extended;
mod post_filter;
mod score;
mod snapshot_allocator;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::resource::v1::{AllocationResult, ResourceClaim};

use crate::dra::structured::{AllocateError, Features};
use crate::explain::{AllocatedDevice, ClaimAllocation};
use crate::framework::FeatureGates;
use crate::framework::cycle_state::{CycleState, StateKey};
use crate::framework::interface::*;
use crate::framework::runtime::{Handle, PluginError};
use crate::framework::status::Status;
use crate::labels::NodeSelectorMatcher;
use crate::plugins::helper::normalize_score::default_normalize_score;
use crate::plugins::names;
use crate::snapshot::{NodeInfo, PodInfo};

use claims::is_allocated;
pub(crate) use claims::{claim_key, pod_resource_claims, requests};
pub(crate) use extended::{DeviceClassResolver, MSG_EXTENDED_CLAIM_DELETED};

/// Plugin name.
pub(crate) const NAME: &str = names::DYNAMIC_RESOURCES;
/// `ErrNotFound`'s text: what PostFilter reports when PreFilter did not run.
pub(crate) const ERR_NOT_FOUND: &str = "not found";
/// Filter: the allocator found no devices for every claim on the node.
pub(crate) const ERR_CANNOT_ALLOCATE: &str = "cannot allocate all claims";
/// Filter: the allocator ran past `filterTimeout` (v1.36 on prefixed with `node N: `).
pub(crate) const ERR_TIMED_OUT: &str = "timed out trying to allocate devices";
/// Filter: an allocated claim's devices are not reachable from the node.
pub(crate) const ERR_CLAIM_NOT_AVAILABLE: &str = "resourceclaim not available on the node";
/// PostFilter: an unavailable claim was deallocated so the next attempt can allocate it elsewhere.
pub(crate) const MSG_DEALLOCATED: &str = "deallocation of ResourceClaim completed";
/// `DynamicResourcesArgs.filterTimeout`'s default.
pub(crate) const DEFAULT_FILTER_TIMEOUT: Duration = Duration::from_secs(10);
/// `DynamicResourcesArgs.bindingTimeout`'s default.
pub(crate) const DEFAULT_BINDING_TIMEOUT: Duration = Duration::from_secs(600);
/// How many compiled selectors the plugin keeps (`celCache` upstream).
const CEL_CACHE_SIZE: usize = 10;

/// The plugin's cycle state (kube-scheduler's `stateData`). Cloning shares it, as upstream's
/// `Clone` returns the same pointer: Filter runs on many nodes at once and records into it.
#[derive(Debug, Clone, Default)]
struct StateData(Arc<CycleClaims>);

/// What PreFilter found and what Filter and Reserve record.
#[derive(Debug, Default)]
struct CycleClaims {
    /// The pod's claims, in `spec.resourceClaims` order.
    claims: Vec<Arc<ResourceClaim>>,
    /// For allocated claims with a node selector: where their devices are reachable.
    available_on_nodes: Vec<Option<NodeSelectorMatcher>>,
    /// Allocated claims whose binding conditions failed or timed out: unavailable on every node
    /// (whether they are does not depend on the node, so PreFilter decides it once).
    binding_failed: Vec<bool>,
    /// True when some claim needs allocating (upstream: an allocator was created).
    allocate: bool,
    /// Per node: the allocation of every unallocated claim, in claim order.
    node_allocations: Mutex<HashMap<String, Vec<AllocationResult>>>,
    /// Claims Filter found allocated but not reachable from some node.
    unavailable_claims: Mutex<BTreeSet<usize>>,
    /// The allocations Reserve recorded for the chosen node, by claim index.
    reserved: Mutex<HashMap<usize, AllocationResult>>,
    // --- extended resources backed by DRA (extended.rs) ---
    /// How many of `claims` are the pod's own; the extended-resource claim, if any, follows them.
    num_user_owned: usize,
    /// The pod's extended resources backed by DRA, when some requested one maps to a class.
    extended: Option<extended::PodExtendedResources>,
    /// Per node: the node's variant of the extended-resource claim (`nodeAllocation.extendedResourceClaim`).
    node_extended_claims: Mutex<HashMap<String, extended::NodeExtendedClaim>>,
}

impl CycleClaims {
    /// The index of the extended-resource claim (`claimStore.extendedResourceClaim`).
    fn extended_index(&self) -> Option<usize> {
        (self.num_user_owned < self.claims.len()).then_some(self.num_user_owned)
    }
    fn to_allocate(&self) -> impl Iterator<Item = (usize, &Arc<ResourceClaim>)> {
        self.claims.iter().enumerate().filter(|(_, c)| !is_allocated(c))
    }
}

const STATE_KEY: StateKey<StateData> = StateKey::new("PreFilterDynamicResources");

/// The DynamicResources plugin.
#[derive(Debug)]
pub(crate) struct DynamicResources {
    snapshot: Arc<crate::snapshot::Snapshot>,
    /// Built on the first pod that needs allocation (most frameworks never see one).
    allocator: std::sync::OnceLock<snapshot_allocator::SnapshotAllocator>,
    features: Features,
    /// What PostFilter says when it deallocates nothing (the release's words).
    post_filter_words: post_filter::PostFilterWords,
    filter_timeout: Duration,
    binding_timeout: Duration,
    /// Classes by extended resource name, built once for the snapshot.
    resolver: DeviceClassResolver,
    /// How the release scores (see `score`).
    scoring: Scoring,
    /// An allocation timeout is an Error (v1.36 on) rather than UnschedulableAndUnresolvable.
    timeout_is_error: bool,
}

/// What the release's Score does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Scoring {
    /// The plugin implements Score (v1.35+); before, it offers no Score, so a weight is moot.
    enabled: bool,
    /// Score returns 0 with `DRAPrioritizedList` off (v1.36.2+).
    needs_prioritized_list: bool,
    /// How allocation results pair with claims.
    indexing: score::ClaimIndexing,
}

impl Scoring {
    /// v1.37.1's Score.
    const V1_37: Scoring = Scoring {
        enabled: true,
        needs_prioritized_list: true,
        indexing: score::ClaimIndexing::UnallocatedClaims,
    };

    /// The Score of the release `features` belong to.
    fn of(features: &FeatureGates) -> Self {
        let changes = &features.changes;
        Scoring {
            enabled: changes.dynamic_resources_scores,
            needs_prioritized_list: changes.dynamic_resources_score_needs_prioritized_list,
            indexing: if changes.dynamic_resources_score_indexes_unallocated_claims {
                score::ClaimIndexing::UnallocatedClaims
            } else {
                score::ClaimIndexing::EveryClaim
            },
        }
    }
}

impl Default for DynamicResources {
    fn default() -> Self {
        Self::for_snapshot(Arc::default())
    }
}

/// Builds the plugin from its `DynamicResourcesArgs` (`filterTimeout`, `bindingTimeout`; a
/// `filterTimeout` of 0 turns the timeout off).
pub(crate) fn new(
    args: Option<&serde_json::Value>,
    handle: &Handle,
    features: &FeatureGates,
) -> Result<Arc<dyn Plugin>, PluginError> {
    Ok(Arc::new(
        DynamicResources::from_args(args, handle.snapshot.clone())?.with_features(features),
    ))
}

/// The gates the structured allocator honours, as upstream's `New` copies them from
/// `feature.Features` (binding conditions need the device status gate too).
pub(crate) fn allocator_features(features: &FeatureGates) -> Features {
    Features {
        admin_access: features.dra_admin_access,
        prioritized_list: features.dra_prioritized_list,
        partitionable_devices: features.dra_partitionable_devices,
        device_taints: features.dra_device_taints,
        device_binding_and_status: features.dra_device_binding_conditions
            && features.dra_resource_claim_device_status,
        consumable_capacity: features.dra_consumable_capacity,
        fractional_capacity_range: features.dra_fractional_capacity_range,
        cel_runtime_error_names_device: features.changes.dra_cel_runtime_error_names_device,
        incomplete_pools_unusable: features.changes.dra_incomplete_pools_unusable,
        invalid_pool_fails_node_only: features.changes.dra_invalid_pool_fails_node_only,
    }
}

impl DynamicResources {
    /// The plugin over `snapshot` with `DynamicResourcesArgs` applied.
    fn from_args(
        args: Option<&serde_json::Value>,
        snapshot: Arc<crate::snapshot::Snapshot>,
    ) -> Result<Self, PluginError> {
        let mut plugin = DynamicResources::for_snapshot(snapshot);
        if let Some(args) = args {
            let duration = |field: &str| -> Result<Option<Duration>, PluginError> {
                match args.get(field) {
                    None | Some(serde_json::Value::Null) => Ok(None),
                    Some(serde_json::Value::String(s)) => crate::duration::parse_go_duration(s)
                        .map(Some)
                        .ok_or_else(|| PluginError::InvalidArgs {
                            plugin: NAME.into(),
                            message: format!("{field}: invalid duration {s:?}"),
                        }),
                    Some(other) => Err(PluginError::InvalidArgs {
                        plugin: NAME.into(),
                        message: format!("{field}: expected a duration string, got {other}"),
                    }),
                }
            };
            if let Some(d) = duration("filterTimeout")? {
                plugin.filter_timeout = d;
            }
            if let Some(d) = duration("bindingTimeout")? {
                plugin.binding_timeout = d;
            }
        }
        Ok(plugin)
    }
}

impl DynamicResources {
    /// The plugin with `features` instead of v1.37.1's defaults: the allocator's gates, and no
    /// extended resources backed by DRA unless DRAExtendedResource is on (upstream's
    /// `extendedResourceCache` is only built with the gate).
    fn with_features(mut self, features: &FeatureGates) -> Self {
        self.features = allocator_features(features);
        self.scoring = Scoring::of(features);
        if !features.dra_extended_resource {
            self.resolver = DeviceClassResolver::default();
        }
        self.post_filter_words = post_filter::PostFilterWords::of(features);
        self.timeout_is_error = features.changes.dynamic_resources_timeout_is_error;
        self
    }

    /// The plugin over `snapshot` with v1.37.1's default gates and args.
    pub(crate) fn for_snapshot(snapshot: Arc<crate::snapshot::Snapshot>) -> Self {
        DynamicResources {
            resolver: DeviceClassResolver::for_snapshot(&snapshot),
            snapshot,
            allocator: std::sync::OnceLock::new(),
            features: Features::V1_37_DEFAULTS,
            post_filter_words: post_filter::PostFilterWords::of(&FeatureGates::v1_37()),
            filter_timeout: DEFAULT_FILTER_TIMEOUT,
            binding_timeout: DEFAULT_BINDING_TIMEOUT,
            scoring: Scoring::V1_37,
            timeout_is_error: true,
        }
    }

    /// `validateDeviceClass`: a request names a class that must exist.
    fn validate_device_class(&self, class: &str, request: &str) -> Option<Status> {
        if class.is_empty() {
            return Some(Status::error(format!(
                "request {request}: unsupported request type"
            )));
        }
        (!self.snapshot.device_classes.contains_key(class))
            .then(|| Status::unresolvable(format!("request {request}: device class {class} does not exist")))
    }

    /// `isClaimReadyForBinding`: every allocated device with binding conditions has them all true;
    /// a true binding-failure condition is an error.
    fn claim_ready_for_binding(claim: &ResourceClaim) -> Result<bool, String> {
        let Some(status) = claim.status.as_ref() else {
            return Ok(false);
        };
        let Some(allocation) = status.allocation.as_ref() else {
            return Ok(false);
        };
        for result in allocation.devices.iter().flat_map(|d| d.results.iter().flatten()) {
            let conditions = result.binding_conditions.as_deref().unwrap_or_default();
            if conditions.is_empty() {
                continue;
            }
            let device_status = status.devices.iter().flatten().find(|d| {
                d.driver == result.driver
                    && d.pool == result.pool
                    && d.device == result.device
                    && d.share_id == result.share_id
            });
            let Some(device_status) = device_status else {
                return Ok(false);
            };
            let condition = |t: &str| device_status.conditions.iter().flatten().find(|c| c.type_ == t);
            for failure in result.binding_failure_conditions.iter().flatten() {
                if let Some(c) = condition(failure).filter(|c| c.status == "True") {
                    return Err(format!(
                        "device binding failed: claim={}, reason={}, message={:?}",
                        claim.metadata.name.as_deref().unwrap_or(""),
                        c.reason,
                        c.message
                    ));
                }
            }
            if !conditions
                .iter()
                .all(|t| condition(t).is_some_and(|c| c.status == "True"))
            {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// `isClaimTimeout`: the claim has waited for its binding conditions longer than bindingTimeout.
    fn claim_binding_timed_out(&self, claim: &ResourceClaim) -> bool {
        let Some(allocation) = claim.status.as_ref().and_then(|s| s.allocation.as_ref()) else {
            return false;
        };
        let Some(allocated_at) = allocation.allocation_timestamp.as_ref() else {
            return false;
        };
        let waits = allocation
            .devices
            .iter()
            .flat_map(|d| d.results.iter().flatten())
            .any(|r| r.binding_conditions.is_some());
        let deadline =
            allocated_at.0.as_millisecond() as i128 * 1_000_000 + self.binding_timeout.as_nanos() as i128;
        waits && deadline < crate::clock::now_nanos()
    }
}

impl Plugin for DynamicResources {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        Some(self)
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        if self.scoring.enabled { Some(self) } else { None }
    }
    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        Some(self)
    }
    fn as_pre_bind(&self) -> Option<&dyn PreBindPlugin> {
        Some(self)
    }
}

impl PreEnqueuePlugin for DynamicResources {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        match pod_resource_claims(&self.snapshot, pod) {
            Ok(_) => Status::success(),
            Err(reason) => Status::unresolvable(reason),
        }
    }
}

impl PreFilterPlugin for DynamicResources {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        // An empty state first: PostFilter and Score read it even when PreFilter rejects.
        state.write(&STATE_KEY, StateData::default());
        let mut claims = match pod_resource_claims(&self.snapshot, pod) {
            Ok(claims) => claims,
            Err(reason) => return (None, Status::unresolvable(reason)),
        };
        // Extended resources backed by DRA: their claim comes after the pod's own.
        let num_user_owned = claims.len();
        let extended = extended::pre_filter_extended_resources(pod, &self.resolver, &self.snapshot);
        claims.extend(extended.as_ref().map(|e| e.claim.clone()));
        if claims.is_empty() {
            return (None, Status::skip());
        }
        let mut available_on_nodes = Vec::with_capacity(claims.len());
        let binding_failed: Vec<bool> = claims
            .iter()
            .map(|claim| {
                is_allocated(claim)
                    && self.features.device_binding_and_status
                    && match Self::claim_ready_for_binding(claim) {
                        Err(_) => true,
                        Ok(ready) => !ready && self.claim_binding_timed_out(claim),
                    }
            })
            .collect();
        let mut allocate = false;
        for (index, claim) in claims.iter().enumerate() {
            let allocation = claim.status.as_ref().and_then(|s| s.allocation.as_ref());
            if let Some(allocation) = allocation {
                // `CanBeReserved` is always true in v1.37.1 (an allocated claim takes any number of
                // consumers), so kube-scheduler's "resourceclaim in use" cannot happen.
                let selector = match allocation.node_selector.as_ref().map(NodeSelectorMatcher::parse) {
                    None => None,
                    Some(Ok(m)) => Some(m),
                    Some(Err(e)) => return (None, Status::error(e.to_string())),
                };
                available_on_nodes.push(selector);
                continue;
            }
            available_on_nodes.push(None);
            allocate = true;
            // The extended-resource claim is not validated here: the in-memory one has no requests
            // yet, and Filter rejects one left over from an earlier cycle.
            if index >= num_user_owned {
                continue;
            }
            for request in claims::requests(claim) {
                if let Some(exactly) = &request.exactly {
                    if let Some(s) = self.validate_device_class(&exactly.device_class_name, &request.name) {
                        return (None, s);
                    }
                } else if let Some(subs) = request.first_available.as_ref().filter(|s| !s.is_empty()) {
                    for sub in subs {
                        let name = format!("{}/{}", request.name, sub.name);
                        if let Some(s) = self.validate_device_class(&sub.device_class_name, &name) {
                            return (None, s);
                        }
                    }
                } else {
                    return (
                        None,
                        Status::unresolvable(format!(
                            "resource claim {}, request {}: unknown request type",
                            claim_key(claim),
                            request.name
                        )),
                    );
                }
            }
        }
        state.write(
            &STATE_KEY,
            StateData(Arc::new(CycleClaims {
                claims,
                available_on_nodes,
                binding_failed,
                allocate,
                num_user_owned,
                extended,
                ..CycleClaims::default()
            })),
        );
        (None, Status::success())
    }
}

impl FilterPlugin for DynamicResources {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node_info: &NodeInfo) -> Status {
        let Some(StateData(cycle)) = state.read(&STATE_KEY) else {
            return Status::error(ERR_NOT_FOUND);
        };
        if cycle.claims.is_empty() {
            return Status::success();
        }
        // --- extended resources backed by DRA ---
        let node_extended = match extended::filter_extended_resources(
            cycle.extended.as_ref(),
            cycle.num_user_owned == 0,
            pod,
            node_info,
            &self.resolver,
        ) {
            Ok(node_extended) => node_extended,
            Err(status) => return status,
        };
        // Only device-plugin resources and no claim of the pod's own: nothing left to do here.
        if node_extended.is_none() && cycle.num_user_owned == 0 {
            return Status::success();
        }
        // --- end extended resources ---
        let node = &node_info.node;
        let mut unavailable = Vec::new();
        for index in 0..cycle.claims.len() {
            if let Some(selector) = &cycle.available_on_nodes[index]
                && !selector.matches(node_info.labels(), node_info.name())
            {
                unavailable.push(index);
                continue;
            }
            if cycle.binding_failed[index] {
                unavailable.push(index);
            }
        }
        let mut allocations = None;
        if cycle.allocate {
            // The extended-resource claim is replaced by the node's variant of it.
            let to_allocate: Vec<&ResourceClaim> = cycle
                .to_allocate()
                .map(|(i, c)| match &node_extended {
                    Some(n) if Some(i) == cycle.extended_index() => n.claim.as_ref(),
                    _ => c.as_ref(),
                })
                .collect();
            let allocator = self
                .allocator
                .get_or_init(|| {
                    snapshot_allocator::SnapshotAllocator::build(
                        self.snapshot.clone(),
                        self.features,
                        CEL_CACHE_SIZE,
                    )
                })
                .allocator();
            let deadline = (!self.filter_timeout.is_zero()).then(|| Instant::now() + self.filter_timeout);
            match allocator.allocate(node, &to_allocate, deadline) {
                Err(AllocateError::Timeout) if self.timeout_is_error => {
                    return Status::error(format!("node {}: {ERR_TIMED_OUT}", node_info.name()));
                }
                Err(AllocateError::Timeout) => return Status::unresolvable(ERR_TIMED_OUT),
                Err(AllocateError::FailedOnNode(reason)) => return Status::unresolvable(reason),
                Err(AllocateError::Fatal(message)) => return Status::error(message),
                Ok(Some(results)) if results.len() == to_allocate.len() => allocations = Some(results),
                Ok(_) => return Status::unresolvable(ERR_CANNOT_ALLOCATE),
            }
        }
        if !unavailable.is_empty() {
            lock(&cycle.unavailable_claims).extend(unavailable);
            return Status::unresolvable(ERR_CLAIM_NOT_AVAILABLE);
        }
        if let Some(results) = allocations {
            lock(&cycle.node_allocations).insert(node_info.name().to_string(), results);
            if let Some(n) = node_extended {
                lock(&cycle.node_extended_claims).insert(node_info.name().to_string(), n);
            }
        }
        Status::success()
    }
}

/// Locks a mutex, recovering the data of a poisoned one (a panicking Filter elsewhere must not
/// turn every later node into an error).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl PostFilterPlugin for DynamicResources {
    fn post_filter(
        &self,
        _: &dyn FrameworkHandle,
        state: &CycleState,
        pod: &PodInfo,
        _: &NodeToStatus,
    ) -> (Option<PostFilterResult>, Status) {
        (
            None,
            post_filter::post_filter_status(self.post_filter_words, state, pod),
        )
    }
}

impl ScorePlugin for DynamicResources {
    fn score(&self, state: &CycleState, _: &PodInfo, node: &NodeInfo) -> (i64, Status) {
        let Some(StateData(cycle)) = state.read(&STATE_KEY) else {
            return (0, Status::error(ERR_NOT_FOUND));
        };
        if cycle.claims.is_empty() || (self.scoring.needs_prioritized_list && !self.features.prioritized_list)
        {
            return (0, Status::success());
        }
        let allocations = lock(&cycle.node_allocations);
        let Some(results) = allocations.get(node.name()) else {
            return (0, Status::success());
        };
        match score::compute_score(&cycle.claims, results, self.scoring.indexing) {
            Ok(score) => (score, Status::success()),
            Err(message) => (0, Status::error(message)),
        }
    }
    fn has_normalize_score(&self) -> bool {
        true
    }
    fn normalize_score(&self, _: &CycleState, _: &PodInfo, scores: &mut [NodeScore]) -> Status {
        default_normalize_score(crate::framework::interface::MAX_NODE_SCORE, false, scores);
        Status::success()
    }
}

impl ReservePlugin for DynamicResources {
    fn reserve(&self, state: &mut CycleState, _: &PodInfo, node_name: &str) -> Status {
        let Some(StateData(cycle)) = state.read(&STATE_KEY) else {
            return Status::error(ERR_NOT_FOUND);
        };
        let to_allocate: Vec<usize> = cycle.to_allocate().map(|(i, _)| i).collect();
        if to_allocate.is_empty() || !cycle.allocate {
            return Status::success();
        }
        let allocations = lock(&cycle.node_allocations);
        let Some(results) = allocations.get(node_name).filter(|r| !r.is_empty()) else {
            // Only the extended-resource claim, served by the node's device plugin: nothing to do.
            if to_allocate.iter().all(|&i| Some(i) == cycle.extended_index()) {
                return Status::success();
            }
            return Status::error("claim allocation not found for node");
        };
        if results.len() != to_allocate.len() {
            return Status::error(format!(
                "internal error, have {} allocations, {} claims to allocate, want {} claims",
                results.len(),
                to_allocate.len(),
                to_allocate.len()
            ));
        }
        let mut reserved = lock(&cycle.reserved);
        for (index, result) in to_allocate.into_iter().zip(results) {
            reserved.insert(index, result.clone());
        }
        Status::success()
    }
    fn unreserve(&self, state: &mut CycleState, _: &PodInfo, _: &str) {
        if let Some(StateData(cycle)) = state.read(&STATE_KEY) {
            lock(&cycle.reserved).clear();
        }
    }
}

impl PreBindPlugin for DynamicResources {
    /// kube-scheduler writes each claim's allocation and reservation here; kubectl-sched never
    /// allocates devices, so there is nothing to plan.
    fn pre_bind(&self, state: &CycleState, _: &PodInfo, _: &str) -> (Vec<crate::action::Action>, Status) {
        match state.read(&STATE_KEY) {
            Some(StateData(cycle)) if !cycle.claims.is_empty() => (Vec::new(), Status::success()),
            _ => (Vec::new(), Status::skip()),
        }
    }
}

/// The devices the pod's unallocated claims would get on `node`, from a cycle's state after Filter
/// (empty when the pod has no such claims or the node was not feasible).
pub(crate) fn claim_allocations(state: &CycleState, node: &str) -> Vec<ClaimAllocation> {
    allocation_results(state, node)
        .into_iter()
        .map(|(claim, result)| ClaimAllocation {
            claim,
            node: node.to_string(),
            devices: result
                .devices
                .iter()
                .flat_map(|d| d.results.iter().flatten())
                .map(|r| AllocatedDevice {
                    request: r.request.clone(),
                    driver: r.driver.clone(),
                    pool: r.pool.clone(),
                    device: r.device.clone(),
                })
                .collect(),
        })
        .collect()
}

/// The allocation each of the pod's unallocated claims would get on `node` (by `namespace/name`), from
/// a cycle's state after Filter: what kube-scheduler's PreBind writes into the claims' status (empty
/// when the pod has no such claims or the node was not feasible).
pub(crate) fn allocation_results(state: &CycleState, node: &str) -> Vec<(String, AllocationResult)> {
    let Some(StateData(cycle)) = state.read(&STATE_KEY) else {
        return Vec::new();
    };
    let allocations = lock(&cycle.node_allocations);
    let Some(results) = allocations.get(node) else {
        return Vec::new();
    };
    cycle
        .to_allocate()
        .zip(results)
        .map(|((_, claim), result)| (claim_key(claim), result.clone()))
        .collect()
}

#[cfg(test)]
mod tests;
