//! The search (`allocator` in `allocator_incubating.go`): one `Allocate` call for one node. Claims
//! in order, each claim's requests in order (a request with subrequests tries them in order until
//! one fits), each request's devices in pool, slice and device order, exhaustive with
//! backtracking; the first full solution wins.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::Instant;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{
    AllocationResult, Device, DeviceAllocationConfiguration, DeviceAllocationResult, DeviceAttribute,
    DeviceCapacity, DeviceClaim, DeviceClass, DeviceRequestAllocationResult, DeviceSelector, ResourceClaim,
    ResourceSlice,
};

use super::constraints::Constraint;
use super::consumable_capacity::{cmp_request_over_capacity, consumed_capacity_from_request};
use super::counters::{self, CounterSets};
use super::node_selector::create_node_selector;
use super::pools::{Pool, devices, gather_pools, node_matches};
use super::request::{AllocationMode, Req};
use super::state::ConsumedCapacity;
use super::taints::taint_prevents_allocation;
use super::{AllocateError, Allocator, DevKey};
use crate::cel;

/// `resourceapi.AllocationResultsMaxSize`: devices per claim.
pub const ALLOCATION_RESULTS_MAX_SIZE: usize = 32;

static NO_ATTRIBUTES: BTreeMap<String, DeviceAttribute> = BTreeMap::new();
static NO_CAPACITY: BTreeMap<String, DeviceCapacity> = BTreeMap::new();

/// How the search ends early.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum SearchError {
    /// `errAllocationResultMaxSizeExceeded`: more devices than a claim may hold; backtrack harder.
    #[error("allocation max size exceeded")]
    MaxSizeExceeded,
    /// A fatal error with upstream's text.
    #[error("{0}")]
    Fatal(String),
    /// The deadline passed.
    #[error("timed out")]
    Timeout,
}

/// `klog.KObj`: `namespace/name`, or `name` without a namespace.
pub fn kobj(claim: &ResourceClaim) -> String {
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    match claim.metadata.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

/// A claim's `spec.devices`.
fn claim_devices(claim: &ResourceClaim) -> Option<&DeviceClaim> {
    claim.spec.as_ref()?.devices.as_ref()
}

/// A device's position: pool, slice (in the pool's device slices), device (in the slice).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
struct Loc {
    pool: usize,
    slice: usize,
    device: usize,
}

/// `deviceIndices`: the `device`-th device of a (sub)request.
#[derive(Debug, Clone, Copy, Default)]
struct Indices {
    claim: usize,
    request: usize,
    sub: usize,
    device: usize,
}

/// `requestIndices`.
type ReqKey = (usize, usize, usize);

/// `requestData`, without the devices of "All" mode (kept apart so this stays `Copy`).
#[derive(Debug, Clone, Copy)]
struct RequestData<'s> {
    request: Req<'s>,
    /// The parent request's name, for subrequests.
    parent: Option<&'s str>,
    class: Option<&'s DeviceClass>,
    num_devices: usize,
    /// On the entry of subrequest 0: the subrequest that was picked.
    selected_sub: usize,
}

impl RequestData<'_> {
    fn request_name(&self) -> String {
        match self.parent {
            Some(parent) => format!("{parent}/{}", self.request.name()),
            None => self.request.name().to_string(),
        }
    }
}

/// `internalDeviceResult`.
#[derive(Debug, Clone)]
struct DeviceResult<'s> {
    request: Req<'s>,
    parent: Option<&'s str>,
    id: DevKey<'s>,
    loc: Loc,
    share_id: Option<String>,
    consumed: Option<ConsumedCapacity>,
    admin_access: bool,
}

/// `deviceRollbackState` plus what `rollbackDevice` needs to undo one candidate.
#[derive(Debug, Clone)]
struct Undo<'s> {
    claim: usize,
    loc: Loc,
    id: DevKey<'s>,
    base: &'s str,
    sub: &'s str,
    counters_reserved: bool,
    constraints_added: usize,
    device_marked: bool,
    capacity_inserted: bool,
    capacity_entry_existed: bool,
    result_added: bool,
    previous_len: usize,
    consumed: ConsumedCapacity,
}

/// The state of one `Allocate` call.
pub(super) struct Search<'s> {
    alloc: &'s Allocator<'s>,
    node: &'s Node,
    claims: &'s [&'s ResourceClaim],
    deadline: Option<Instant>,
    pools: Vec<Pool<'s>>,
    /// `deviceMatchesRequest`, by device position and request.
    matches: HashMap<(Loc, ReqKey), bool>,
    constraints: Vec<Vec<Constraint>>,
    available_counters: HashMap<usize, CounterSets<'s>>,
    consumed_counters: HashMap<usize, CounterSets<'s>>,
    request_data: HashMap<ReqKey, RequestData<'s>>,
    all_devices: HashMap<ReqKey, Vec<Loc>>,
    allocating_devices: HashMap<DevKey<'s>, HashSet<usize>>,
    allocating_capacity: HashMap<DevKey<'s>, ConsumedCapacity>,
    results: Vec<Vec<DeviceResult<'s>>>,
    shares: u64,
}

/// `Allocate`.
pub(super) fn allocate<'s>(
    alloc: &'s Allocator<'s>,
    node: &'s Node,
    claims: &'s [&'s ResourceClaim],
    deadline: Option<Instant>,
) -> Result<Option<Vec<AllocationResult>>, AllocateError> {
    let node_name = node.metadata.name.as_deref().unwrap_or_default();
    let pools = gather_pools(
        alloc.slices.for_node(node_name).map(|s| &**s),
        node,
        alloc.features,
        &alloc.all_slices,
    )
    .map_err(|e| AllocateError::Fatal(format!("gather pool information: {e}")))?;
    let mut search = Search {
        alloc,
        node,
        claims,
        deadline,
        pools,
        matches: HashMap::new(),
        constraints: Vec::with_capacity(claims.len()),
        available_counters: HashMap::new(),
        consumed_counters: HashMap::new(),
        request_data: HashMap::new(),
        all_devices: HashMap::new(),
        allocating_devices: HashMap::new(),
        allocating_capacity: HashMap::new(),
        results: vec![Vec::new(); claims.len()],
        shares: 0,
    };
    search.prepare().map_err(AllocateError::Fatal)?;
    match search.allocate_one(Indices::default(), false, Loc::default()) {
        Ok(true) => {}
        // Upstream returns this internal error as is when it reaches the top.
        Err(e @ SearchError::MaxSizeExceeded) => return Err(AllocateError::Fatal(e.to_string())),
        Ok(false) => {
            if search.pools.iter().any(|p| p.is_invalid) {
                // Not fatal: other nodes may do; reported only when all fail.
                return Err(AllocateError::FailedOnNode(
                    "invalid resource pools were encountered".into(),
                ));
            }
            return Ok(None);
        }
        Err(SearchError::Fatal(e)) => return Err(AllocateError::Fatal(e)),
        Err(SearchError::Timeout) => return Err(AllocateError::Timeout),
    }
    search.build_results(node_name).map(Some)
}

impl<'s> Search<'s> {
    fn features(&self) -> super::Features {
        self.alloc.features
    }

    fn slice(&self, loc: Loc) -> &'s ResourceSlice {
        self.pools[loc.pool].device_slices[loc.slice]
    }

    fn device(&self, loc: Loc) -> &'s Device {
        &devices(self.slice(loc))[loc.device]
    }

    fn key(&self, loc: Loc) -> DevKey<'s> {
        let id = self.pools[loc.pool].id;
        DevKey {
            driver: id.driver,
            pool: id.pool,
            device: &self.device(loc).name,
        }
    }

    /// The validation part of `Allocate`: request data (with "All" devices) and constraints.
    fn prepare(&mut self) -> Result<(), String> {
        let features = self.features();
        for (ci, claim) in self.claims.iter().enumerate() {
            let devices_spec = claim_devices(claim);
            let requests = devices_spec
                .and_then(|d| d.requests.as_deref())
                .unwrap_or_default();
            let mut min_per_claim = 0usize;
            for (ri, request) in requests.iter().enumerate() {
                let subs = request.first_available.as_deref().unwrap_or_default();
                if !features.prioritized_list && !subs.is_empty() {
                    return Err(format!(
                        "claim {}, request {}: has subrequests, but the DRAPrioritizedList feature is disabled",
                        kobj(claim),
                        request.name
                    ));
                }
                if !features.consumable_capacity {
                    if request.exactly.as_ref().is_some_and(|e| e.capacity.is_some()) {
                        return Err(format!(
                            "claim {}, request {}: has capacity requests, but the DRAConsumableCapacity feature is disabled",
                            kobj(claim),
                            request.name
                        ));
                    }
                    if let Some(sub) = subs.iter().find(|s| s.capacity.is_some()) {
                        return Err(format!(
                            "claim {}, subrequest {}: has capacity requests, but the DRAConsumableCapacity feature is disabled",
                            kobj(claim),
                            sub.name
                        ));
                    }
                }
                let min_per_request = if subs.is_empty() {
                    let data = self.validate_request(Req::exact(request), None, (ci, ri, 0))?;
                    data.num_devices
                } else {
                    let mut min = usize::MAX;
                    for (si, sub) in subs.iter().enumerate() {
                        let data = self.validate_request(Req::Sub(sub), Some(&request.name), (ci, ri, si))?;
                        min = min.min(data.num_devices);
                    }
                    min
                };
                if min_per_request > ALLOCATION_RESULTS_MAX_SIZE - min_per_claim {
                    return Err(format!(
                        "claim {}, request {}: adding {} devices exceeds the claim limit of {}, with {} already accounted for",
                        kobj(claim),
                        request.name,
                        min_per_request,
                        ALLOCATION_RESULTS_MAX_SIZE,
                        min_per_claim
                    ));
                }
                min_per_claim += min_per_request;
            }
            let mut constraints = Vec::new();
            for (i, c) in devices_spec
                .and_then(|d| d.constraints.as_deref())
                .unwrap_or_default()
                .iter()
                .enumerate()
            {
                let requests = c.requests.as_deref().unwrap_or_default();
                if let Some(attribute) = &c.match_attribute {
                    constraints.push(Constraint::match_attribute(requests, attribute));
                } else if let Some(attribute) = &c.distinct_attribute {
                    constraints.push(Constraint::distinct_attribute(requests, attribute));
                } else {
                    return Err(format!(
                        "claim {}, constraint #{i}: empty constraint (unsupported constraint type?)",
                        kobj(claim)
                    ));
                }
            }
            self.constraints.push(constraints);
        }
        Ok(())
    }

    /// `validateDeviceRequest`; stores the request data (and the devices for "All").
    fn validate_request(
        &mut self,
        request: Req<'s>,
        parent: Option<&'s str>,
        key: ReqKey,
    ) -> Result<RequestData<'s>, String> {
        let claim = self.claims[key.0];
        let features = self.features();
        let name = request.name();
        if request.has_derived_attributes() {
            return Err(format!(
                "claim {}, request {name}: cannot handle request with derived attributes, the feature is disabled",
                kobj(claim)
            ));
        }
        if let Some(i) = request.selectors().iter().position(|s| s.cel.is_none()) {
            return Err(format!(
                "claim {}, request {name}, selector #{i}: CEL expression empty (unsupported selector type?)",
                kobj(claim)
            ));
        }
        if !features.admin_access && request.has_admin_access() {
            return Err(format!(
                "claim {}, request {name}: admin access is requested, but the feature is disabled",
                kobj(claim)
            ));
        }
        let class_name = request.device_class_name();
        if class_name.is_empty() {
            return Err(format!(
                "claim {}, request {name}: missing device class name (unsupported request type?)",
                kobj(claim)
            ));
        }
        let Some(class) = self.alloc.classes.get(class_name) else {
            return Err(format!(
                "claim {}, request {name}: could not retrieve device class {class_name}: deviceclass.resource.k8s.io \"{class_name}\" not found",
                kobj(claim)
            ));
        };
        let mut data = RequestData {
            request,
            parent,
            class: Some(&**class),
            num_devices: 0,
            selected_sub: 0,
        };
        match request.allocation_mode() {
            AllocationMode::ExactCount => {
                data.num_devices = usize::try_from(request.count().max(0)).unwrap_or(usize::MAX);
            }
            AllocationMode::All => {
                let mut all = Vec::new();
                for pi in 0..self.pools.len() {
                    let pool = &self.pools[pi];
                    if pool.is_incomplete {
                        return Err(format!(
                            "claim {}, request {name}: asks for all devices, but resource pool {} is currently being updated",
                            kobj(claim),
                            pool.id
                        ));
                    }
                    if pool.is_invalid {
                        return Err(format!(
                            "claim {}, request {name}: asks for all devices, but resource pool {} is currently invalid",
                            kobj(claim),
                            pool.id
                        ));
                    }
                    for si in 0..pool.device_slices.len() {
                        let slice = self.pools[pi].device_slices[si];
                        for (di, device) in devices(slice).iter().enumerate() {
                            let loc = Loc {
                                pool: pi,
                                slice: si,
                                device: di,
                            };
                            if !self.is_selectable(key, &data, loc).map_err(|e| e.to_string())? {
                                continue;
                            }
                            if features.consumable_capacity {
                                // Static capacity only; what is in use is checked when allocating.
                                let fits = cmp_request_over_capacity(
                                    None,
                                    request.capacities(),
                                    device.capacity.as_ref(),
                                    None,
                                    features.fractional_capacity_range,
                                )
                                .map_err(|e| {
                                    format!(
                                        "claim {}, request {name}: checking capacity for device {}: {e}",
                                        kobj(claim),
                                        device.name
                                    )
                                })?;
                                if !fits {
                                    continue;
                                }
                            }
                            all.push(loc);
                        }
                    }
                }
                data.num_devices = all.len();
                self.all_devices.insert(key, all);
            }
            AllocationMode::Unknown(mode) => {
                return Err(format!(
                    "claim {}, request {name}: unsupported count mode {mode}",
                    kobj(claim)
                ));
            }
        }
        self.request_data.insert(key, data);
        Ok(data)
    }

    fn check_deadline(&self) -> Result<(), SearchError> {
        match self.deadline {
            Some(deadline) if Instant::now() >= deadline => Err(SearchError::Timeout),
            _ => Ok(()),
        }
    }

    /// `allocateOne`: allocates the `r.device`-th device of a (sub)request and everything after
    /// it; `Ok(true)` when everything got allocated. `start` is where to look for the device
    /// (later devices of the same request only come after earlier ones: combinations, not
    /// permutations).
    fn allocate_one(&mut self, r: Indices, allocate_sub: bool, start: Loc) -> Result<bool, SearchError> {
        self.alloc
            .allocate_one_invocations
            .fetch_add(1, Ordering::Relaxed);
        self.check_deadline()?;
        if r.claim >= self.claims.len() {
            return Ok(true);
        }
        let claim = self.claims[r.claim];
        let num_requests = claim_devices(claim)
            .and_then(|d| d.requests.as_ref())
            .map_or(0, Vec::len);
        if r.request >= num_requests {
            let next = Indices {
                claim: r.claim + 1,
                ..Indices::default()
            };
            return match self.allocate_one(next, false, Loc::default()) {
                // Another choice in an earlier claim may let a smaller subrequest fit.
                Err(SearchError::MaxSizeExceeded) => Ok(false),
                other => other,
            };
        }
        let key = (r.claim, r.request, r.sub);
        let Some(data) = self.request_data.get(&key).copied() else {
            return Err(SearchError::Fatal(format!(
                "internal error: no data for request {key:?}"
            )));
        };

        if !allocate_sub && data.parent.is_some() {
            let mut all_exceeded = true;
            let mut sub = 0;
            while self.request_data.contains_key(&(r.claim, r.request, sub)) {
                match self.allocate_one(Indices { sub, ..r }, true, Loc::default()) {
                    Err(SearchError::MaxSizeExceeded) => {}
                    Err(e) => return Err(e),
                    Ok(true) => {
                        if let Some(d) = self.request_data.get_mut(&key) {
                            d.selected_sub = sub;
                        }
                        return Ok(true);
                    }
                    Ok(false) => all_exceeded = false,
                }
                sub += 1;
            }
            return if all_exceeded {
                Err(SearchError::MaxSizeExceeded)
            } else {
                Ok(false)
            };
        }

        let request = data.request;
        let all_mode = request.allocation_mode() == AllocationMode::All;
        if all_mode && self.all_devices.get(&key).is_none_or(Vec::is_empty) {
            return Ok(false);
        }
        if r.device >= data.num_devices {
            let next = Indices {
                claim: r.claim,
                request: r.request + 1,
                ..Indices::default()
            };
            return self.allocate_one(next, false, Loc::default());
        }
        let remaining = data.num_devices - r.device;
        let available = ALLOCATION_RESULTS_MAX_SIZE.saturating_sub(self.results[r.claim].len());
        if remaining > available {
            return Err(SearchError::MaxSizeExceeded);
        }

        let next = Indices {
            device: r.device + 1,
            ..r
        };
        if all_mode {
            let Some(loc) = self.all_devices.get(&key).and_then(|d| d.get(r.device)).copied() else {
                return Ok(false);
            };
            let Some(undo) = self.allocate_device(r, loc, true)? else {
                // The order does not matter for "All": without this device there is no solution.
                return Ok(false);
            };
            return match self.allocate_one(next, allocate_sub, Loc::default()) {
                Ok(true) => Ok(true),
                other => {
                    self.rollback(undo);
                    other.map(|_| false)
                }
            };
        }

        let features = self.features();
        for pi in start.pool..self.pools.len() {
            let pool = &self.pools[pi];
            if pool.is_invalid && !features.invalid_pool_fails_node_only {
                return Err(SearchError::Fatal(format!(
                    "pool {} is invalid: {}",
                    pool.id.pool, pool.invalid_reason
                )));
            }
            if pool.is_invalid || (pool.is_incomplete && features.incomplete_pools_unusable) {
                continue;
            }
            let slice_start = if pi == start.pool { start.slice } else { 0 };
            for si in slice_start..self.pools[pi].device_slices.len() {
                let slice = self.pools[pi].device_slices[si];
                let device_start = if pi == start.pool && si == start.slice {
                    start.device
                } else {
                    0
                };
                for di in device_start..devices(slice).len() {
                    let loc = Loc {
                        pool: pi,
                        slice: si,
                        device: di,
                    };
                    let id = self.key(loc);
                    if request.admin_access() && self.allocating_device_for_claim(id, r.claim) {
                        continue;
                    }
                    if !request.admin_access() && self.device_in_use(id) {
                        continue;
                    }
                    if !self.is_selectable(key, &data, loc)? {
                        continue;
                    }
                    if features.consumable_capacity {
                        let fits = self.capacity_fits(request, id, self.device(loc)).map_err(|e| {
                            SearchError::Fatal(format!(
                                "claim {}, request {}: checking capacity for device {id}: {e}",
                                kobj(claim),
                                request.name()
                            ))
                        })?;
                        if !fits {
                            continue;
                        }
                    }
                    let Some(undo) = self.allocate_device(r, loc, false)? else {
                        continue;
                    };
                    let after = Loc {
                        device: di + 1,
                        ..loc
                    };
                    let done = self.allocate_one(next, allocate_sub, after);
                    if let Ok(true) = done {
                        return Ok(true);
                    }
                    self.rollback(undo);
                    done?;
                }
            }
        }
        Ok(false)
    }

    /// `isSelectable`: the class's and the request's selectors match, and (per-device node
    /// selection) the device is reachable from the node. Cached per device and request.
    fn is_selectable(&mut self, key: ReqKey, data: &RequestData<'s>, loc: Loc) -> Result<bool, SearchError> {
        let device = self.device(loc);
        if !self.features().device_binding_and_status
            && device.binding_conditions.as_ref().is_some_and(|c| !c.is_empty())
        {
            return Ok(false);
        }
        if let Some(m) = self.matches.get(&(loc, key)) {
            return Ok(*m);
        }
        let id = self.key(loc);
        let mut matched = true;
        if let Some(class) = data.class {
            let selectors = class
                .spec
                .as_ref()
                .and_then(|s| s.selectors.as_deref())
                .unwrap_or_default();
            matched = self.selectors_match(key, device, id, Some(class), selectors)?;
        }
        if matched {
            matched = self.selectors_match(key, device, id, None, data.request.selectors())?;
        }
        if matched && self.slice(loc).spec.per_device_node_selection == Some(true) {
            matched = node_matches(
                self.node,
                device.node_name.as_deref(),
                device.all_nodes == Some(true),
                device.node_selector.as_ref(),
            )
            .map_err(SearchError::Fatal)?;
        }
        self.matches.insert((loc, key), matched);
        Ok(matched)
    }

    /// `selectorsMatch`: CEL selectors of a class (`class` set) or of a request.
    fn selectors_match(
        &self,
        key: ReqKey,
        device: &Device,
        id: DevKey<'_>,
        class: Option<&DeviceClass>,
        selectors: &[DeviceSelector],
    ) -> Result<bool, SearchError> {
        let whose = || match class {
            Some(class) => format!("class {}", class.metadata.name.as_deref().unwrap_or_default()),
            None => format!("claim {}", kobj(self.claims[key.0])),
        };
        for (i, selector) in selectors.iter().enumerate() {
            let Some(expression) = selector.cel.as_ref().map(|c| c.expression.as_str()) else {
                return Err(SearchError::Fatal(format!(
                    "{}: selector #{i}: CEL expression empty (unsupported selector type?)",
                    whose()
                )));
            };
            let compiled = self.alloc.cel.get_or_compile(expression);
            if let Some(e) = &compiled.error {
                return Err(SearchError::Fatal(format!(
                    "{}: selector #{i}: CEL compile error: {e}",
                    whose()
                )));
            }
            let matches = compiled
                .device_matches(&cel::Device {
                    driver: id.driver,
                    attributes: device.attributes.as_ref().unwrap_or(&NO_ATTRIBUTES),
                    capacity: device.capacity.as_ref().unwrap_or(&NO_CAPACITY),
                    allow_multiple_allocations: device.allow_multiple_allocations,
                })
                .map_err(|e| {
                    SearchError::Fatal(if self.features().cel_runtime_error_names_device {
                        format!(
                            "{}: selector #{i} on device {id}: CEL runtime error: {e}",
                            whose()
                        )
                    } else {
                        format!(
                            "{}: selector #{i}: CEL runtime error: {}",
                            whose(),
                            e.without_hint()
                        )
                    })
                })?;
            if !matches {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// `CmpRequestOverCapacity` (the allocator's method): fits next to what allocated claims and
    /// this search consume.
    fn capacity_fits(
        &self,
        request: Req<'_>,
        id: DevKey<'_>,
        device: &Device,
    ) -> Result<bool, super::consumable_capacity::CapacityError> {
        cmp_request_over_capacity(
            self.alloc.aggregated_capacity.get(&id).copied(),
            request.capacities(),
            device.capacity.as_ref(),
            self.allocating_capacity.get(&id),
            self.features().fractional_capacity_range,
        )
    }

    /// `deviceInUse`.
    fn device_in_use(&self, id: DevKey<'_>) -> bool {
        self.alloc.allocated_devices.contains(&id)
            || self.allocating_devices.get(&id).is_some_and(|c| !c.is_empty())
    }

    /// `allocatingDeviceForClaim`.
    fn allocating_device_for_claim(&self, id: DevKey<'_>, claim: usize) -> bool {
        self.allocating_devices
            .get(&id)
            .is_some_and(|c| c.contains(&claim))
    }

    /// `deviceCapacityInUse`: some share of the device is allocated or being allocated.
    fn device_capacity_in_use(&self, id: DevKey<'_>) -> bool {
        self.alloc.aggregated_capacity.contains_key(&id)
            || self.alloc.shared_devices.contains(&id)
            || self.allocating_capacity.contains_key(&id)
    }

    /// `checkAvailableCounters`: reserves the device's counters if they are available.
    fn reserve_counters(&mut self, loc: Loc) -> bool {
        let device = self.device(loc);
        if !self.available_counters.contains_key(&loc.pool) {
            let alloc = self.alloc;
            let available = counters::available(&self.pools[loc.pool], |driver, pool, device| {
                alloc.is_device_allocated(DevKey { driver, pool, device })
            });
            self.available_counters.insert(loc.pool, available);
        }
        let consumed = self.consumed_counters.entry(loc.pool).or_default();
        counters::account(consumed, device, true);
        let exceeded = match self.available_counters.get(&loc.pool) {
            Some(available) => counters::exceeded(available, consumed),
            None => false,
        };
        if exceeded {
            counters::account(consumed, device, false);
            return false;
        }
        true
    }

    /// `allocateDevice`: checks availability, taints, constraints and capacity of one selectable
    /// candidate and, if it may be picked, records it; the returned undo reverts that.
    fn allocate_device(&mut self, r: Indices, loc: Loc, must: bool) -> Result<Option<Undo<'s>>, SearchError> {
        let claim = self.claims[r.claim];
        let key = (r.claim, r.request, r.sub);
        let Some(data) = self.request_data.get(&key).copied() else {
            return Ok(None);
        };
        let request = data.request;
        let device = self.device(loc);
        let id = self.key(loc);
        let features = self.features();
        let allow_multiple = features.consumable_capacity && device.allow_multiple_allocations == Some(true);
        if !allow_multiple && request.admin_access() && self.allocating_device_for_claim(id, r.claim) {
            return Ok(None);
        }
        if !request.admin_access() && self.device_in_use(id) {
            return Ok(None);
        }
        let consumes_counters = device.consumes_counters.as_ref().is_some_and(|c| !c.is_empty());
        if !features.partitionable_devices && consumes_counters {
            return Ok(None);
        }
        // A share of a device already in use has had its counters charged.
        let skip_counters = allow_multiple && self.device_capacity_in_use(id);
        let mut counters_reserved = false;
        if !skip_counters && consumes_counters {
            if !self.reserve_counters(loc) {
                return Ok(None);
            }
            counters_reserved = true;
        }
        let (base, sub) = match data.parent {
            None => (request.name(), ""),
            Some(parent) => (parent, request.name()),
        };
        let mut undo = Undo {
            claim: r.claim,
            loc,
            id,
            base,
            sub,
            counters_reserved,
            constraints_added: 0,
            device_marked: false,
            capacity_inserted: false,
            capacity_entry_existed: false,
            result_added: false,
            previous_len: self.results[r.claim].len(),
            consumed: ConsumedCapacity::new(),
        };

        if features.device_taints && taint_prevents_allocation(device, request.tolerations()) {
            self.rollback(undo);
            return Ok(None);
        }

        for i in 0..self.constraints[r.claim].len() {
            if !self.constraints[r.claim][i].add(base, sub, device.attributes.as_ref(), id.driver) {
                self.rollback(undo);
                if must {
                    return Err(SearchError::Fatal(format!(
                        "claim {}, request {}: cannot add device {id} because a claim constraint would not be satisfied",
                        kobj(claim),
                        request.name()
                    )));
                }
                return Ok(None);
            }
            undo.constraints_added += 1;
        }

        if !allow_multiple {
            self.allocating_devices.entry(id).or_default().insert(r.claim);
            undo.device_marked = true;
        }

        let mut consumed = ConsumedCapacity::new();
        let mut share_id = None;
        if features.consumable_capacity {
            match self.capacity_fits(request, id, device) {
                Err(e) => {
                    self.rollback(undo);
                    return Err(SearchError::Fatal(format!(
                        "claim {}, request {}: rechecking capacity for device {id}: {e}",
                        kobj(claim),
                        request.name()
                    )));
                }
                Ok(false) => {
                    self.rollback(undo);
                    return Ok(None);
                }
                Ok(true) => {}
            }
            if allow_multiple {
                consumed = match consumed_capacity_from_request(
                    request.capacities(),
                    device.capacity.as_ref(),
                    features.fractional_capacity_range,
                ) {
                    Ok(c) => c,
                    Err(e) => {
                        self.rollback(undo);
                        return Err(SearchError::Fatal(format!(
                            "claim {}, request {}: computing consumed capacity for device {id}: {e}",
                            kobj(claim),
                            request.name()
                        )));
                    }
                };
                share_id = Some(self.new_share_id(claim, id));
                undo.capacity_entry_existed = self.allocating_capacity.contains_key(&id);
                insert_capacity(&mut self.allocating_capacity, id, &consumed);
                undo.capacity_inserted = true;
                undo.consumed = consumed.clone();
            }
        }

        self.results[r.claim].push(DeviceResult {
            request,
            parent: data.parent,
            id,
            loc,
            share_id,
            consumed: (!consumed.is_empty()).then_some(consumed),
            admin_access: request.admin_access(),
        });
        undo.result_added = true;
        Ok(Some(undo))
    }

    /// `rollbackDevice`: reverts what `allocate_device` recorded, in reverse order.
    fn rollback(&mut self, undo: Undo<'s>) {
        if undo.result_added {
            self.results[undo.claim].truncate(undo.previous_len);
        }
        if undo.capacity_inserted {
            remove_capacity(&mut self.allocating_capacity, undo.id, &undo.consumed);
            if undo.capacity_entry_existed {
                // Keep the earlier share's "in use" marker.
                self.allocating_capacity.entry(undo.id).or_default();
            }
        }
        if undo.device_marked
            && let Some(claims) = self.allocating_devices.get_mut(&undo.id)
        {
            claims.remove(&undo.claim);
        }
        for i in (0..undo.constraints_added).rev() {
            self.constraints[undo.claim][i].remove(undo.base, undo.sub);
        }
        if undo.counters_reserved {
            let device = self.device(undo.loc);
            if let Some(consumed) = self.consumed_counters.get_mut(&undo.loc.pool) {
                counters::account(consumed, device, false);
            }
        }
    }

    /// A share ID for a new share of a device (`GenerateNewShareID`). Upstream draws a random
    /// UUID; this one is derived from the claim, the device and a counter, so results are
    /// reproducible, and formatted as a version-4 UUID.
    fn new_share_id(&mut self, claim: &ResourceClaim, id: DevKey<'_>) -> String {
        self.shares += 1;
        let seed = format!(
            "{}/{}/{}/{id}/{}",
            claim.metadata.uid.as_deref().unwrap_or_default(),
            claim.metadata.namespace.as_deref().unwrap_or_default(),
            claim.metadata.name.as_deref().unwrap_or_default(),
            self.shares
        );
        let hash = |offset: u64| {
            seed.bytes().fold(offset, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
            })
        };
        let (a, b) = (hash(0xcbf2_9ce4_8422_2325), hash(0x8422_2325_cbf2_9ce4));
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            0x8000 | ((b >> 48) & 0x3fff),
            b & 0xffff_ffff_ffff
        )
    }

    /// The end of `Allocate`: results, configs and node selector per claim.
    fn build_results(&self, node_name: &str) -> Result<Vec<AllocationResult>, AllocateError> {
        let features = self.features();
        let mut out = Vec::with_capacity(self.claims.len());
        for (ci, claim) in self.claims.iter().enumerate() {
            let results: Vec<DeviceRequestAllocationResult> = self.results[ci]
                .iter()
                .map(|d| {
                    let device = self.device(d.loc);
                    let request = match d.parent {
                        Some(parent) => format!("{parent}/{}", d.request.name()),
                        None => d.request.name().to_string(),
                    };
                    let mut result = DeviceRequestAllocationResult {
                        request,
                        driver: d.id.driver.to_string(),
                        pool: d.id.pool.to_string(),
                        device: d.id.device.to_string(),
                        admin_access: d.admin_access.then_some(true),
                        tolerations: d.request.tolerations().cloned(),
                        share_id: d.share_id.clone(),
                        consumed_capacity: d.consumed.as_ref().map(|c| {
                            c.iter()
                                .map(|(name, q)| (name.clone(), q.to_quantity()))
                                .collect()
                        }),
                        ..Default::default()
                    };
                    if features.device_binding_and_status {
                        result.binding_conditions = device.binding_conditions.clone();
                        result.binding_failure_conditions = device.binding_failure_conditions.clone();
                    }
                    result
                })
                .collect();
            let config = self.configs(ci);
            let node_selector = create_node_selector(
                self.results[ci]
                    .iter()
                    .map(|d| (self.slice(d.loc), self.device(d.loc))),
                node_name,
            )
            .map_err(|e| {
                AllocateError::Fatal(format!(
                    "create NodeSelector for claim {}: {e}",
                    claim.metadata.name.as_deref().unwrap_or_default()
                ))
            })?;
            out.push(AllocationResult {
                devices: Some(DeviceAllocationResult {
                    results: Some(results),
                    config: (!config.is_empty()).then_some(config),
                }),
                node_selector,
                allocation_timestamp: None,
            });
        }
        Ok(out)
    }

    /// The request data of the (sub)request picked for request `ri` of claim `ci`.
    fn picked(&self, ci: usize, ri: usize) -> Option<RequestData<'s>> {
        let data = self.request_data.get(&(ci, ri, 0)).copied()?;
        if data.parent.is_some() {
            return self.request_data.get(&(ci, ri, data.selected_sub)).copied();
        }
        Some(data)
    }

    /// The full name (`request/subrequest`) of the subrequest picked for request `ri`, if it has
    /// subrequests.
    fn picked_sub_name(&self, ci: usize, ri: usize) -> Option<String> {
        let data = self.request_data.get(&(ci, ri, 0))?;
        data.parent?;
        self.picked(ci, ri).map(|d| d.request_name())
    }

    /// The allocation's configs: each used class's configs once (for the requests using it), then
    /// the claim's configs that apply to an allocated request; a config naming every request names
    /// none ("all").
    fn configs(&self, ci: usize) -> Vec<DeviceAllocationConfiguration> {
        let claim = self.claims[ci];
        let spec = claim_devices(claim);
        let requests = spec.and_then(|d| d.requests.as_deref()).unwrap_or_default();
        let mut configs: Vec<DeviceAllocationConfiguration> = Vec::new();
        let mut class_ranges: HashMap<&str, (usize, usize)> = HashMap::new();
        for ri in 0..requests.len() {
            let Some(data) = self.picked(ci, ri) else {
                continue;
            };
            let Some(class) = data.class else {
                continue;
            };
            let class_name = class.metadata.name.as_deref().unwrap_or_default();
            if let Some(&(start, end)) = class_ranges.get(class_name) {
                for config in &mut configs[start..end] {
                    config
                        .requests
                        .get_or_insert_with(Vec::new)
                        .push(data.request_name());
                }
                continue;
            }
            let start = configs.len();
            for config in class.spec.iter().flat_map(|s| s.config.iter().flatten()) {
                configs.push(DeviceAllocationConfiguration {
                    source: "FromClass".into(),
                    requests: Some(vec![data.request_name()]),
                    opaque: config.opaque.clone(),
                });
            }
            class_ranges.insert(class_name, (start, configs.len()));
        }
        for config in spec.and_then(|d| d.config.as_deref()).unwrap_or_default() {
            let names = config.requests.as_deref().unwrap_or_default();
            let from_claim = || DeviceAllocationConfiguration {
                source: "FromClaim".into(),
                requests: config.requests.clone().filter(|r| !r.is_empty()),
                opaque: config.opaque.clone(),
            };
            if names.is_empty() {
                configs.push(from_claim());
                continue;
            }
            for (ri, request) in requests.iter().enumerate() {
                if names.contains(&request.name) {
                    configs.push(from_claim());
                    break;
                }
                if self.picked_sub_name(ci, ri).is_some_and(|n| names.contains(&n)) {
                    configs.push(from_claim());
                    break;
                }
            }
        }
        for config in &mut configs {
            let Some(names) = config.requests.as_ref().filter(|r| !r.is_empty()) else {
                continue;
            };
            let applies_to_all = requests.iter().enumerate().all(|(ri, request)| {
                names.contains(&request.name)
                    || self.picked_sub_name(ci, ri).is_some_and(|n| names.contains(&n))
            });
            if applies_to_all {
                config.requests = None;
            }
        }
        configs
    }
}

/// `ConsumedCapacityCollection.Insert`.
fn insert_capacity<'s>(
    collection: &mut HashMap<DevKey<'s>, ConsumedCapacity>,
    id: DevKey<'s>,
    consumed: &ConsumedCapacity,
) {
    let entry = collection.entry(id).or_default();
    for (name, q) in consumed {
        match entry.get_mut(name) {
            Some(sum) => sum.add(q),
            None => {
                entry.insert(name.clone(), *q);
            }
        }
    }
}

/// `ConsumedCapacityCollection.Remove`: the entry goes once nothing is left.
fn remove_capacity<'s>(
    collection: &mut HashMap<DevKey<'s>, ConsumedCapacity>,
    id: DevKey<'s>,
    consumed: &ConsumedCapacity,
) {
    let Some(entry) = collection.get_mut(&id) else {
        return;
    };
    for (name, q) in consumed {
        if let Some(sum) = entry.get_mut(name) {
            sum.sub(q);
        }
    }
    if entry.values().all(|q| q.is_zero()) {
        collection.remove(&id);
    }
}
