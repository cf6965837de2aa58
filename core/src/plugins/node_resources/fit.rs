//! NodeResourcesFit: rejects nodes without room for the pod's requests (pod count, cpu, memory,
//! ephemeral storage, extended and other scalar resources) and scores the rest with the configured
//! strategy (LeastAllocated by default, MostAllocated, or RequestedToCapacityRatio).
//!
//! [`fits`] and [`shortfall`] expose the same check as pure functions, for callers that want to say how
//! much is missing ("needs 300m more cpu").
//!
//! Extended resources backed by DRA (DRAExtendedResource, GA in v1.37.1): a requested resource the
//! node does not advertise (allocatable absent or 0) but a DeviceClass maps is left to
//! DynamicResources, which allocates devices for it; scoring counts such a resource in devices of
//! the class (see `resource_allocation`).
//!
//! Since v1.34 a request above the node's allocatable is UnschedulableAndUnresolvable (no
//! preemption on that node can help, so it is no preemption candidate); v1.33 rejects every
//! shortfall as Unschedulable (`ReleaseChanges::fit_unresolvable_above_allocatable`).

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};

use crate::features::ReleaseChanges;
use crate::framework::FeatureGates;
use crate::framework::cycle_state::{CycleState, StateKey};
use crate::framework::interface::{
    FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult, PreScorePlugin, ScorePlugin,
};
use crate::framework::runtime::{Handle, PluginError, decode_args};
use crate::framework::status::{Code, Status};
use crate::plugins::helper::device_classes::DeviceClassResolver;
use crate::plugins::helper::shape_score::{
    MAX_CUSTOM_PRIORITY_SCORE, ShapePoint, UtilizationShapePoint, validate_function_shape,
};
use crate::plugins::names;
use crate::plugins::node_resources::resource_allocation::{
    DraExtendedResources, RequestMode, ResourceAllocationScorer, ResourceSpec, ScoringFunction, aggregate,
    default_resources, field_error,
};
use crate::resource::{
    CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resource, format_amount, is_extended_resource_name,
    is_scalar_resource_name,
};
use crate::snapshot::requests::{Amounts, RequestOptions, pod_requests};
use crate::snapshot::{NodeInfo, PodInfo};

/// The plugin's name.
pub(crate) const NAME: &str = names::NODE_RESOURCES_FIT;

/// The node cannot take one more pod.
pub(crate) const ERR_REASON_TOO_MANY_PODS: &str = "Too many pods";
/// Not enough cpu left.
pub(crate) const ERR_REASON_INSUFFICIENT_CPU: &str = "Insufficient cpu";
/// Not enough memory left.
pub(crate) const ERR_REASON_INSUFFICIENT_MEMORY: &str = "Insufficient memory";
/// Not enough ephemeral storage left.
pub(crate) const ERR_REASON_INSUFFICIENT_EPHEMERAL_STORAGE: &str = "Insufficient ephemeral-storage";
/// Prefix of the reason for any other resource: `Insufficient <resource>`.
pub(crate) const ERR_REASON_INSUFFICIENT_PREFIX: &str = "Insufficient ";

/// `LeastAllocated`.
pub(crate) const LEAST_ALLOCATED: &str = "LeastAllocated";
/// `MostAllocated`.
pub(crate) const MOST_ALLOCATED: &str = "MostAllocated";
/// `RequestedToCapacityRatio`.
pub(crate) const REQUESTED_TO_CAPACITY_RATIO: &str = "RequestedToCapacityRatio";

/// The pod's requests, computed once per cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PreFilterState {
    /// cpu, memory, ephemeral storage and scalar resources the pod needs.
    pub request: Resource,
}

/// The pod's requests per scored resource, computed once per cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PreScoreState {
    /// In the order of the scoring strategy's resources.
    pub pod_requests: Vec<i64>,
}

/// PreFilter state key.
pub(crate) const PRE_FILTER_STATE_KEY: StateKey<PreFilterState> = StateKey::new("PreFilterNodeResourcesFit");
/// PreScore state key.
pub(crate) const PRE_SCORE_STATE_KEY: StateKey<PreScoreState> = StateKey::new("PreScoreNodeResourcesFit");

/// `scoringStrategy.requestedToCapacityRatio`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RequestedToCapacityRatioParam {
    /// The utilization → score points, sorted by utilization.
    #[serde(default)]
    pub shape: Vec<UtilizationShapePoint>,
}

/// `scoringStrategy`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ScoringStrategy {
    /// LeastAllocated, MostAllocated or RequestedToCapacityRatio (no default when the strategy is given).
    #[serde(rename = "type", default)]
    pub type_: String,
    /// Scored resources; empty = cpu and memory.
    #[serde(default)]
    pub resources: Vec<ResourceSpec>,
    /// Only for RequestedToCapacityRatio.
    #[serde(default)]
    pub requested_to_capacity_ratio: Option<RequestedToCapacityRatioParam>,
}

/// `NodeResourcesFitArgs` (kubescheduler.config.k8s.io/v1).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct NodeResourcesFitArgs {
    /// TypeMeta, accepted and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// TypeMeta, accepted and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Extended resources Filter does not check.
    #[serde(default)]
    pub ignored_resources: Vec<String>,
    /// Extended-resource groups (the part before `/`) Filter does not check.
    #[serde(default)]
    pub ignored_resource_groups: Vec<String>,
    /// How Score ranks nodes; absent = LeastAllocated on cpu and memory.
    #[serde(default)]
    pub scoring_strategy: Option<ScoringStrategy>,
}

impl NodeResourcesFitArgs {
    /// v1 defaulting: LeastAllocated with cpu/memory when no strategy, default resources when none
    /// are listed, and weight 1 where it is 0.
    pub(crate) fn defaulted(mut self) -> Self {
        let strategy = self.scoring_strategy.get_or_insert_with(|| ScoringStrategy {
            type_: LEAST_ALLOCATED.to_string(),
            resources: default_resources(),
            requested_to_capacity_ratio: None,
        });
        if strategy.resources.is_empty() {
            strategy.resources = default_resources();
        }
        for r in &mut strategy.resources {
            if r.weight == 0 {
                r.weight = 1;
            }
        }
        self
    }

    /// `ValidateNodeResourcesFitArgs`: every problem, each naming its field.
    pub(crate) fn validate(&self, changes: &ReleaseChanges) -> Result<(), String> {
        let mut errs = Vec::new();
        for (i, res) in self.ignored_resources.iter().enumerate() {
            if let Err(e) = validate_qualified_name(res) {
                errs.push(field_error(
                    &format!("ignoredResources[{i}]"),
                    "Invalid value",
                    &format!("{res:?}: {e}"),
                ));
            }
        }
        for (i, group) in self.ignored_resource_groups.iter().enumerate() {
            let path = format!("ignoredResourceGroups[{i}]");
            if group.contains('/') {
                errs.push(field_error(
                    &path,
                    "Invalid value",
                    &format!("{group:?}: resource group name can't contain '/'"),
                ));
            }
            if let Err(e) = validate_qualified_name(group) {
                errs.push(field_error(&path, "Invalid value", &format!("{group:?}: {e}")));
            }
        }
        match &self.scoring_strategy {
            None => errs.push(field_error(
                "scoringStrategy",
                "Required value",
                "ScoringStrategy field is required",
            )),
            Some(s) => {
                if ![LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO].contains(&s.type_.as_str())
                {
                    errs.push(field_error(
                        "scoringStrategy.type",
                        "Unsupported value",
                        &format!(
                            "{:?}: supported values: \"{LEAST_ALLOCATED}\", \"{MOST_ALLOCATED}\", \"{REQUESTED_TO_CAPACITY_RATIO}\"",
                            s.type_
                        ),
                    ));
                }
                for (i, r) in s.resources.iter().enumerate() {
                    if r.weight <= 0 || r.weight > 100 {
                        errs.push(field_error(
                            &format!("scoringStrategy.resources[{i}].weight"),
                            "Invalid value",
                            &format!(
                                "{}: resource weight of {} not in valid range (0, 100]",
                                r.weight, r.name
                            ),
                        ));
                    }
                }
                // v1.36 checks the shape under its own path and only for its strategy; up to v1.35
                // it is checked wherever it is given, under the strategy's path.
                let shape_path = if changes.fit_validates_ratio_by_strategy_type {
                    "scoringStrategy.requestedToCapacityRatio.shape"
                } else {
                    "scoringStrategy.shape"
                };
                let is_ratio = s.type_ == REQUESTED_TO_CAPACITY_RATIO;
                match &s.requested_to_capacity_ratio {
                    // v1.35 and earlier accept this, then crash at start (a nil pointer in
                    // `fit.go`'s scorer table): every release refuses it here, in v1.36's words.
                    None if is_ratio => errs.push(field_error(
                        "scoringStrategy.requestedToCapacityRatio",
                        "Required value",
                        "must be specified when type is RequestedToCapacityRatio",
                    )),
                    Some(_) if !is_ratio && changes.fit_validates_ratio_by_strategy_type => {
                        errs.push(field_error(
                            "scoringStrategy.requestedToCapacityRatio",
                            "Forbidden",
                            "must be nil when type is not RequestedToCapacityRatio",
                        ))
                    }
                    Some(p) => errs.extend(validate_function_shape(&p.shape, shape_path, changes)),
                    None => {}
                }
            }
        }
        aggregate(errs).map_or(Ok(()), Err)
    }
}

fn is_alnum(c: char) -> bool {
    c.is_ascii_alphanumeric()
}

/// apimachinery's `IsQualifiedName` (what `ValidateLabelName` checks): `[prefix/]name`, name at most
/// 63 characters of `[A-Za-z0-9_.-]` starting and ending alphanumeric, prefix a DNS-1123 subdomain.
pub(crate) fn validate_qualified_name(value: &str) -> Result<(), String> {
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                return Err("prefix part must be non-empty".into());
            }
            let valid_prefix = prefix.len() <= 253
                && prefix.split('.').all(|label| {
                    !label.is_empty()
                        && label.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                        && label.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                        && label
                            .chars()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                });
            if !valid_prefix {
                return Err("prefix part must be a lowercase RFC 1123 subdomain".into());
            }
            *name
        }
        _ => {
            return Err(
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', with an optional DNS subdomain prefix and '/'"
                    .into(),
            );
        }
    };
    if name.is_empty() {
        return Err("name part must be non-empty".into());
    }
    if name.len() > 63 {
        return Err("name part must be no more than 63 characters".into());
    }
    let valid = name.starts_with(is_alnum)
        && name.ends_with(is_alnum)
        && name
            .chars()
            .all(|c| is_alnum(c) || c == '-' || c == '_' || c == '.');
    if !valid {
        return Err(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
                .into(),
        );
    }
    Ok(())
}

/// One resource the node is short of (Go's `InsufficientResource`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct InsufficientResource {
    /// The resource (`pods`, `cpu`, `memory`, `ephemeral-storage`, or a scalar resource name).
    pub resource_name: String,
    /// The Filter reason, e.g. `Insufficient cpu`.
    pub reason: String,
    /// What the pod requests (1 for pods).
    pub requested: i64,
    /// What the node's pods already request (the pod count for pods).
    pub used: i64,
    /// The node's allocatable amount.
    pub capacity: i64,
    /// The pod asks for more than the node has at all: preemption cannot help.
    pub unresolvable: bool,
}

/// How much of one resource a pod needs beyond what a node has free.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shortfall {
    /// The resource name.
    pub resource: String,
    /// The pod's request (milli-units for cpu; 1 for pods).
    pub requested: i64,
    /// What the node has free: allocatable minus what its pods request (may be negative).
    pub free: i64,
    /// The node's allocatable amount.
    pub allocatable: i64,
}

impl Shortfall {
    /// `requested - free`: how much more the node would need.
    pub fn missing(&self) -> i64 {
        self.requested.saturating_sub(self.free)
    }

    /// The request is more than the node has at all: no eviction makes room.
    pub fn can_never_fit(&self) -> bool {
        self.requested > self.allocatable
    }
}

impl std::fmt::Display for Shortfall {
    /// `needs 300m more cpu`, `needs 1Gi more memory`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "needs {} more {}",
            format_amount(&self.resource, self.missing()),
            self.resource
        )
    }
}

/// The pod's requests as Filter compares them (Go's `computePodResourceRequest`): pod-level requests
/// apply when `enable_pod_level_resources` (the PodLevelResources gate), container statuses do not
/// (the pod is not running yet), overhead is added.
pub fn compute_pod_resource_request(pod: &Pod, enable_pod_level_resources: bool) -> Resource {
    let opts = RequestOptions {
        skip_pod_level_resources: !enable_pod_level_resources,
        ..RequestOptions::default()
    };
    let mut r = Resource::default();
    for (name, &amount) in &pod_requests(pod, &Amounts::new(), opts) {
        // Negative amounts cannot pass API validation; like Go's SetMaxResource they count as 0.
        let amount = amount.max(0);
        match name.as_str() {
            CPU => r.milli_cpu = amount,
            MEMORY => r.memory = amount,
            EPHEMERAL_STORAGE => r.ephemeral_storage = amount,
            _ if is_scalar_resource_name(name) => {
                r.scalar_resources.insert(name.clone(), amount);
            }
            _ => {}
        }
    }
    r
}

/// `shouldDelegateResourceToDRA`: the node does not advertise the resource (no device plugin) and a
/// DeviceClass maps it, so DynamicResources decides.
pub(crate) fn should_delegate_resource_to_dra(
    name: &str,
    node: &NodeInfo,
    dra: Option<&DeviceClassResolver>,
) -> bool {
    let Some(resolver) = dra else {
        return false;
    };
    if node.allocatable.scalar_resources.get(name).copied().unwrap_or(0) > 0 {
        return false;
    }
    resolver.get_device_class(name).is_some()
}

/// [`fits_request`] with extended resources backed by DRA left to DynamicResources (`dra` resolves
/// them; `None` checks every resource against allocatable).
pub(crate) fn fits_request_with_dra(
    request: &Resource,
    node: &NodeInfo,
    ignored: &BTreeSet<String>,
    ignored_groups: &BTreeSet<String>,
    dra: Option<&DeviceClassResolver>,
) -> Vec<InsufficientResource> {
    let mut out = Vec::new();
    let allowed_pods = node.allocatable.allowed_pod_number;
    let pod_count = node.pods.len() as i64;
    if pod_count + 1 > allowed_pods {
        out.push(InsufficientResource {
            resource_name: PODS.to_string(),
            reason: ERR_REASON_TOO_MANY_PODS.to_string(),
            requested: 1,
            used: pod_count,
            capacity: allowed_pods,
            unresolvable: false,
        });
    }
    if request.milli_cpu == 0
        && request.memory == 0
        && request.ephemeral_storage == 0
        && request.scalar_resources.is_empty()
    {
        return out;
    }
    let mut check = |name: &str, reason: &str, wanted: i64, used: i64, capacity: i64| {
        if wanted > 0 && wanted > capacity.saturating_sub(used) {
            out.push(InsufficientResource {
                resource_name: name.to_string(),
                reason: reason.to_string(),
                requested: wanted,
                used,
                capacity,
                unresolvable: wanted > capacity,
            });
        }
    };
    let (alloc, used) = (&node.allocatable, &node.requested);
    check(
        CPU,
        ERR_REASON_INSUFFICIENT_CPU,
        request.milli_cpu,
        used.milli_cpu,
        alloc.milli_cpu,
    );
    check(
        MEMORY,
        ERR_REASON_INSUFFICIENT_MEMORY,
        request.memory,
        used.memory,
        alloc.memory,
    );
    check(
        EPHEMERAL_STORAGE,
        ERR_REASON_INSUFFICIENT_EPHEMERAL_STORAGE,
        request.ephemeral_storage,
        used.ephemeral_storage,
        alloc.ephemeral_storage,
    );
    for (name, &wanted) in &request.scalar_resources {
        if wanted == 0 {
            continue;
        }
        if is_extended_resource_name(name) {
            let group = name.split('/').next().unwrap_or_default();
            if ignored.contains(name) || ignored_groups.contains(group) {
                continue;
            }
        }
        if should_delegate_resource_to_dra(name, node, dra) {
            continue;
        }
        check(
            name,
            &format!("{ERR_REASON_INSUFFICIENT_PREFIX}{name}"),
            wanted,
            used.get(name),
            alloc.scalar_resources.get(name).copied().unwrap_or(0),
        );
    }
    out
}

/// Go's `Fits`: what the node is short of for this pod, leaving the extended resources `dra` says a
/// DeviceClass backs (and the node does not advertise) to DynamicResources; `features` give its
/// `ResourceRequestsOptions` (PodLevelResources).
pub(crate) fn fits_with_dra(
    pod: &PodInfo,
    node: &NodeInfo,
    dra: Option<&DeviceClassResolver>,
    features: &FeatureGates,
) -> Vec<InsufficientResource> {
    fits_request_with_dra(
        &compute_pod_resource_request(&pod.pod, features.pod_level_resources),
        node,
        &BTreeSet::new(),
        &BTreeSet::new(),
        dra,
    )
}

/// Per resource the node is short of: the pod's request and what the node has free.
#[cfg(test)]
pub(crate) fn shortfall(node: &NodeInfo, pod: &PodInfo, features: &FeatureGates) -> Vec<Shortfall> {
    shortfall_with_dra(node, pod, None, features)
}

/// [`shortfall`] without the extended resources backed by DRA on this node (see [`fits_with_dra`]).
pub fn shortfall_with_dra(
    node: &NodeInfo,
    pod: &PodInfo,
    dra: Option<&DeviceClassResolver>,
    features: &FeatureGates,
) -> Vec<Shortfall> {
    fits_with_dra(pod, node, dra, features)
        .into_iter()
        .map(|r| Shortfall {
            free: r.capacity.saturating_sub(r.used),
            allocatable: r.capacity,
            resource: r.resource_name,
            requested: r.requested,
        })
        .collect()
}

/// The Filter status for a list of shortfalls: Unschedulable, or UnschedulableAndUnresolvable when the
/// pod requests more of some resource than the node has at all and the release says so
/// (`unresolvable_above_allocatable`, v1.34 and later).
pub(crate) fn status_for(
    insufficient: &[InsufficientResource],
    unresolvable_above_allocatable: bool,
) -> Status {
    if insufficient.is_empty() {
        return Status::success();
    }
    let code = if unresolvable_above_allocatable && insufficient.iter().any(|r| r.unresolvable) {
        Code::UnschedulableAndUnresolvable
    } else {
        Code::Unschedulable
    };
    Status::with_reasons(code, insufficient.iter().map(|r| r.reason.clone()).collect())
}

/// The NodeResourcesFit plugin.
#[derive(Debug)]
pub(crate) struct Fit {
    ignored_resources: BTreeSet<String>,
    ignored_resource_groups: BTreeSet<String>,
    scorer: ResourceAllocationScorer,
    /// Classes by extended resource name: Filter leaves resources they back to DynamicResources.
    resolver: Arc<DeviceClassResolver>,
    /// Set when a scored resource is backed by DRA (upstream's `draPreScoreState`).
    dra_score: Option<Arc<DraExtendedResources>>,
    /// `PodLevelResources`: PreFilter counts pod-level requests.
    enable_pod_level_resources: bool,
    /// The release rejects a request above allocatable as UnschedulableAndUnresolvable (v1.34+).
    unresolvable_above_allocatable: bool,
}

/// Builds the plugin from its `NodeResourcesFitArgs`.
pub(crate) fn new(
    args: Option<&serde_json::Value>,
    handle: &Handle,
    features: &FeatureGates,
) -> Result<Arc<dyn Plugin>, PluginError> {
    let invalid = |message: String| PluginError::InvalidArgs {
        plugin: NAME.to_string(),
        message,
    };
    let args = decode_args::<NodeResourcesFitArgs>(NAME, args)?.defaulted();
    args.validate(&features.changes).map_err(invalid)?;
    let strategy = args.scoring_strategy.unwrap_or_default();
    let function = match strategy.type_.as_str() {
        LEAST_ALLOCATED => ScoringFunction::LeastAllocated,
        MOST_ALLOCATED => ScoringFunction::MostAllocated,
        REQUESTED_TO_CAPACITY_RATIO => ScoringFunction::RequestedToCapacityRatio(
            strategy
                .requested_to_capacity_ratio
                .unwrap_or_default()
                .shape
                .iter()
                .map(|p| ShapePoint {
                    utilization: i64::from(p.utilization),
                    score: i64::from(p.score)
                        * (crate::framework::interface::MAX_NODE_SCORE / MAX_CUSTOM_PRIORITY_SCORE),
                })
                .collect(),
        ),
        other => return Err(invalid(format!("scoring strategy {other} is not supported"))),
    };
    // Without DRAExtendedResource no extended resource is backed by DRA: every one is checked
    // against the node's allocatable, as upstream's Fit does when the gate is off.
    let resolver = Arc::new(if features.dra_extended_resource {
        DeviceClassResolver::for_snapshot(&handle.snapshot)
    } else {
        DeviceClassResolver::default()
    });
    let dra_score = DraExtendedResources::for_scoring(&handle.snapshot, &resolver, &strategy.resources);
    Ok(Arc::new(Fit {
        ignored_resources: args.ignored_resources.into_iter().collect(),
        ignored_resource_groups: args.ignored_resource_groups.into_iter().collect(),
        resolver,
        dra_score,
        enable_pod_level_resources: features.pod_level_resources,
        unresolvable_above_allocatable: features.changes.fit_unresolvable_above_allocatable,
        scorer: ResourceAllocationScorer {
            resources: strategy.resources,
            function,
            mode: RequestMode::NonZero,
        },
    }))
}

/// The scorer of Fit's PlacementScore (TopologyAwareWorkloadScheduling): MostAllocated over the
/// resources its args score, whatever its node strategy (`NewFit`'s `placementScorer`), so that the
/// placement the group fills best wins.
pub(crate) fn placement_scorer(
    args: Option<&serde_json::Value>,
) -> Result<ResourceAllocationScorer, PluginError> {
    let args = decode_args::<NodeResourcesFitArgs>(NAME, args)?.defaulted();
    Ok(ResourceAllocationScorer {
        resources: args.scoring_strategy.unwrap_or_default().resources,
        function: ScoringFunction::MostAllocated,
        mode: RequestMode::NonZero,
    })
}

impl Plugin for Fit {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for Fit {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        state.write(
            &PRE_FILTER_STATE_KEY,
            PreFilterState {
                request: compute_pod_resource_request(&pod.pod, self.enable_pod_level_resources),
            },
        );
        (None, Status::success())
    }
}

impl FilterPlugin for Fit {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read(&PRE_FILTER_STATE_KEY) else {
            return Status::error(format!(
                "error reading {:?} from cycleState: not found",
                PRE_FILTER_STATE_KEY.name()
            ));
        };
        status_for(
            &fits_request_with_dra(
                &s.request,
                node,
                &self.ignored_resources,
                &self.ignored_resource_groups,
                Some(&self.resolver),
            ),
            self.unresolvable_above_allocatable,
        )
    }
}

impl PreScorePlugin for Fit {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, _nodes: &[Arc<NodeInfo>]) -> Status {
        state.write(
            &PRE_SCORE_STATE_KEY,
            PreScoreState {
                pod_requests: self.scorer.pod_request_list(&pod.pod),
            },
        );
        Status::success()
    }
}

impl ScorePlugin for Fit {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> (i64, Status) {
        match state.read(&PRE_SCORE_STATE_KEY) {
            Some(s) => self
                .scorer
                .score_with_dra(node, &s.pod_requests, self.dra_score.as_deref()),
            // Like upstream, Score works without PreScore by computing the requests itself.
            None => self.scorer.score_with_dra(
                node,
                &self.scorer.pod_request_list(&pod.pod),
                self.dra_score.as_deref(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, pod, snapshot};
    use serde_json::json;

    fn handle() -> Handle {
        Handle {
            snapshot: Arc::new(snapshot(vec![], vec![])),
        }
    }

    fn plugin(args: Option<serde_json::Value>) -> Arc<dyn Plugin> {
        new(
            args.as_ref(),
            &handle(),
            &crate::framework::FeatureGates::default(),
        )
        .expect("valid args")
    }

    fn run_filter(p: &dyn Plugin, pod: &PodInfo, node: &NodeInfo) -> Status {
        let mut state = CycleState::new();
        let (_, s) = p.as_pre_filter().unwrap().pre_filter(&mut state, pod, &[]);
        assert!(s.is_success());
        p.as_filter().unwrap().filter(&state, pod, node)
    }

    fn run_score(p: &dyn Plugin, pod: &PodInfo, node: &NodeInfo) -> i64 {
        let mut state = CycleState::new();
        let s = p.as_pre_score().unwrap().pre_score(&mut state, pod, &[]);
        assert!(s.is_success());
        let (score, s) = p.as_score().unwrap().score(&state, pod, node);
        assert!(s.is_success(), "{s:?}");
        score
    }

    /// `PodLevelResources` decides whether PreFilter counts the pod-level cpu (3) or the container
    /// sum (1) against a node with 2 cpu free, as upstream's `computePodResourceRequest` does; its
    /// default is off in v1.33 and on from v1.34.
    #[test]
    fn pod_level_requests_follow_the_gate() {
        use crate::features::{FeatureGates, KubeVersion};
        let p = pod("p")
            .cpu("1")
            .with(|p| {
                p.spec.as_mut().unwrap().resources = Some(k8s_openapi::api::core::v1::ResourceRequirements {
                    requests: Some(
                        [(
                            "cpu".to_string(),
                            k8s_openapi::apimachinery::pkg::api::resource::Quantity("3".into()),
                        )]
                        .into(),
                    ),
                    ..Default::default()
                });
            })
            .info();
        let n = node("n").cpu("2").memory("4Gi").info_with(vec![]);
        let v1_37_gate_off = FeatureGates {
            pod_level_resources: false,
            ..FeatureGates::v1_37()
        };
        for (name, features, want) in [
            // More than the node's allocatable: unresolvable, as upstream.
            (
                "v1.37.1: 3 cpu on a 2-cpu node",
                FeatureGates::v1_37(),
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "gate off: the container's 1 cpu fits",
                v1_37_gate_off,
                Code::Success,
            ),
            (
                "v1.33.13 default (off)",
                FeatureGates::for_version(KubeVersion::new(33, 13)),
                Code::Success,
            ),
            (
                "v1.34.4 default (on)",
                FeatureGates::for_version(KubeVersion::new(34, 4)),
                Code::UnschedulableAndUnresolvable,
            ),
        ] {
            let fit = new(None, &handle(), &features).expect("plugin");
            assert_eq!(run_filter(fit.as_ref(), &p, &n).code(), want, "{name}");
        }
    }

    /// A request above the node's allocatable is UnschedulableAndUnresolvable from v1.34 on and
    /// Unschedulable in v1.33, with the same reasons; a shortfall of free room is Unschedulable in
    /// every release.
    #[test]
    fn unresolvable_above_allocatable_follows_the_release() {
        use crate::features::{FeatureGates, KubeVersion};
        let used = pod("used").cpu("3").node("n").obj();
        let cases: Vec<(&str, PodInfo, NodeInfo, Code, Code)> = vec![
            (
                "cpu above allocatable",
                pod("p").cpu("5").info(),
                node("n").cpu("4").info_with(vec![used.clone()]),
                Code::Unschedulable,
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "extended resource the node lacks",
                pod("p").req("example.com/fpga", "1").info(),
                node("n").info_with(vec![]),
                Code::Unschedulable,
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "free cpu used up",
                pod("p").cpu("2").info(),
                node("n").cpu("4").info_with(vec![used]),
                Code::Unschedulable,
                Code::Unschedulable,
            ),
        ];
        for (version, is_v1_33) in [
            (KubeVersion::new(33, 13), true),
            (KubeVersion::new(34, 4), false),
            (KubeVersion::new(37, 1), false),
        ] {
            let fit = new(None, &handle(), &FeatureGates::for_version(version)).expect("plugin");
            for (name, p, n, v1_33_code, later_code) in &cases {
                let s = run_filter(fit.as_ref(), p, n);
                let want = if is_v1_33 { *v1_33_code } else { *later_code };
                assert_eq!(s.code(), want, "{version} {name}");
                assert_eq!(s.reasons().len(), 1, "{version} {name}");
            }
        }
    }

    #[test]
    fn ignored_resources_and_groups() {
        let node = node("n").info_with(vec![]);
        let pod = pod("p")
            .req("example.com/gpu", "1")
            .req("vendor.io/fpga", "1")
            .info();
        for (args, want) in [
            (
                json!({}),
                vec!["Insufficient example.com/gpu", "Insufficient vendor.io/fpga"],
            ),
            (
                json!({"ignoredResources": ["example.com/gpu"]}),
                vec!["Insufficient vendor.io/fpga"],
            ),
            (
                json!({"ignoredResourceGroups": ["vendor.io"]}),
                vec!["Insufficient example.com/gpu"],
            ),
            (
                json!({"ignoredResources": ["example.com/gpu"], "ignoredResourceGroups": ["vendor.io"]}),
                vec![],
            ),
        ] {
            let s = run_filter(plugin(Some(args.clone())).as_ref(), &pod, &node);
            assert_eq!(
                s.reasons(),
                want.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
                "{args}"
            );
        }
        // Only extended resources can be ignored: hugepages are always checked.
        let s = run_filter(
            plugin(Some(json!({"ignoredResourceGroups": ["hugepages-2Mi"]}))).as_ref(),
            &crate::testing::pod("p").req("hugepages-2Mi", "2Mi").info(),
            &node,
        );
        assert_eq!(s.reasons(), ["Insufficient hugepages-2Mi"]);
    }

    #[test]
    fn filter_without_prefilter_is_an_error() {
        let p = plugin(None);
        let s =
            p.as_filter()
                .unwrap()
                .filter(&CycleState::new(), &pod("p").info(), &node("n").info_with(vec![]));
        assert_eq!(s.code(), Code::Error);
        assert_eq!(
            s.message(),
            "error reading \"PreFilterNodeResourcesFit\" from cycleState: not found"
        );
    }

    #[test]
    fn pod_level_requests_and_overhead_in_prefilter() {
        let p = pod("p")
            .cpu("100m")
            .with(|p| {
                let spec = p.spec.as_mut().unwrap();
                spec.resources = Some(k8s_openapi::api::core::v1::ResourceRequirements {
                    requests: Some(
                        [(
                            "cpu".to_string(),
                            k8s_openapi::apimachinery::pkg::api::resource::Quantity("1".into()),
                        )]
                        .into(),
                    ),
                    ..Default::default()
                });
                spec.overhead = Some(
                    [(
                        "cpu".to_string(),
                        k8s_openapi::apimachinery::pkg::api::resource::Quantity("250m".into()),
                    )]
                    .into(),
                );
            })
            .obj();
        assert_eq!(compute_pod_resource_request(&p, true).milli_cpu, 1250);
    }

    #[test]
    fn shortfall_reports_missing_amounts() {
        let n = node("n")
            .cpu("1")
            .memory("1Gi")
            .info_with(vec![pod("a").cpu("700m").memory("512Mi").node("n").obj()]);
        let got = shortfall(
            &n,
            &pod("p").cpu("600m").memory("1Gi").info(),
            &FeatureGates::v1_37(),
        );
        assert_eq!(
            got,
            vec![
                Shortfall {
                    resource: "cpu".into(),
                    requested: 600,
                    free: 300,
                    allocatable: 1000,
                },
                Shortfall {
                    resource: "memory".into(),
                    requested: 1 << 30,
                    free: 512 << 20,
                    allocatable: 1 << 30,
                },
            ]
        );
        assert_eq!(got[0].to_string(), "needs 300m more cpu");
        assert_eq!(got[1].to_string(), "needs 512Mi more memory");
        assert!(shortfall(&n, &pod("q").cpu("300m").info(), &FeatureGates::v1_37()).is_empty());
    }

    #[test]
    fn least_allocated_default_score() {
        // Node 4 cpu / 8Gi with 1 cpu / 2Gi requested; pod 1 cpu / 2Gi → 50% and 50% free → 50.
        let n = node("n")
            .cpu("4")
            .memory("8Gi")
            .info_with(vec![pod("a").cpu("1").memory("2Gi").node("n").obj()]);
        assert_eq!(
            run_score(plugin(None).as_ref(), &pod("p").cpu("1").memory("2Gi").info(), &n),
            50
        );
        // Best-effort pods count 100m / 200Mi: cpu (4000-1100)*100/4000 = 72, memory
        // (8192-2248)Mi*100/8192Mi = 72 → 72.
        assert_eq!(run_score(plugin(None).as_ref(), &pod("p").info(), &n), 72);
    }

    #[test]
    fn strategies_score() {
        let n = node("n")
            .cpu("4")
            .memory("8Gi")
            .info_with(vec![pod("a").cpu("1").memory("2Gi").node("n").obj()]);
        let p = pod("p").cpu("1").memory("4Gi").info();
        for (name, args, want) in [
            // cpu 50% free (50), memory 25% free (25): (50 + 25) / 2 = 37.
            ("least", json!({}), 37),
            // cpu weight 3: (50*3 + 25) / 4 = 43.
            (
                "least weighted",
                json!({"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 3}, {"name": "memory"}]}}),
                43,
            ),
            // cpu 50% used (50), memory 75% (75): 62.
            ("most", json!({"scoringStrategy": {"type": "MostAllocated"}}), 62),
            // shape 0→0, 100→10 (×10): 50 and 75 → 62.5 → 63 (rounded).
            (
                "rtcr",
                json!({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}}}),
                63,
            ),
            // Reversed shape favors empty nodes: 50 and 25 → 37.5 → 38.
            (
                "rtcr reversed",
                json!({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]}}}),
                38,
            ),
        ] {
            assert_eq!(run_score(plugin(Some(args)).as_ref(), &p, &n), want, "{name}");
        }
    }

    #[test]
    fn score_without_prescore_falls_back() {
        let n = node("n").cpu("4").memory("8Gi").info_with(vec![]);
        let p = pod("p").cpu("2").memory("4Gi").info();
        let (score, s) = plugin(None).as_score().unwrap().score(&CycleState::new(), &p, &n);
        assert!(s.is_success());
        assert_eq!(score, 50);
    }

    #[test]
    fn args_decode_and_default() {
        let args: NodeResourcesFitArgs = serde_json::from_value(json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "NodeResourcesFitArgs",
            "scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu"}, {"name": "nvidia.com/gpu", "weight": 5}]}
        }))
        .unwrap();
        let args = args.defaulted();
        let s = args.scoring_strategy.unwrap();
        assert_eq!(s.type_, MOST_ALLOCATED);
        assert_eq!(
            s.resources,
            vec![
                ResourceSpec::new("cpu", 1),
                ResourceSpec::new("nvidia.com/gpu", 5)
            ]
        );
        let defaults = NodeResourcesFitArgs::default()
            .defaulted()
            .scoring_strategy
            .unwrap();
        assert_eq!(defaults.type_, LEAST_ALLOCATED);
        assert_eq!(defaults.resources, default_resources());
    }

    #[test]
    fn invalid_args_name_the_field() {
        for (args, field) in [
            (
                json!({"scoringStrategy": {"type": "Spread"}}),
                "scoringStrategy.type: Unsupported value: \"Spread\"",
            ),
            (
                json!({"scoringStrategy": {"resources": [{"name": "cpu"}]}}),
                "scoringStrategy.type: Unsupported value: \"\"",
            ),
            (
                json!({"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 101}]}}),
                "scoringStrategy.resources[0].weight: Invalid value: 101",
            ),
            (
                json!({"scoringStrategy": {"type": "RequestedToCapacityRatio"}}),
                "scoringStrategy.requestedToCapacityRatio: Required value",
            ),
            (
                json!({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": []}}}),
                "scoringStrategy.requestedToCapacityRatio.shape: Required value",
            ),
            (
                json!({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}]}}}),
                "scoringStrategy.requestedToCapacityRatio.shape[1].utilization: Invalid value: 50: values must be sorted in increasing order",
            ),
            (
                json!({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [{"utilization": 101, "score": 11}]}}}),
                "scoringStrategy.requestedToCapacityRatio.shape[0].score: Invalid value: 11",
            ),
            (
                json!({"scoringStrategy": {"type": "MostAllocated", "requestedToCapacityRatio": {"shape": [{"utilization": 1, "score": 1}]}}}),
                "scoringStrategy.requestedToCapacityRatio: Forbidden",
            ),
            (
                json!({"ignoredResources": ["bad name"]}),
                "ignoredResources[0]: Invalid value: \"bad name\"",
            ),
            (
                json!({"ignoredResourceGroups": ["a/b"]}),
                "ignoredResourceGroups[0]: Invalid value: \"a/b\": resource group name can't contain '/'",
            ),
            (
                json!({"ignoredResource": ["x"]}),
                "unknown field `ignoredResource`",
            ),
            (json!({"scoringStrategy": {"type": 3}}), "invalid type"),
        ] {
            let err = match new(Some(&args), &handle(), &crate::framework::FeatureGates::default()) {
                Ok(_) => panic!("{args} should be rejected"),
                Err(e) => e,
            };
            let PluginError::InvalidArgs { plugin, message } = err;
            assert_eq!(plugin, NAME);
            assert!(message.contains(field), "{args}: {message}");
        }
    }

    #[test]
    fn ratio_args_are_validated_as_each_release_does() {
        let unsorted = json!({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio":
            {"shape": [{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}]}}});
        let missing = json!({"scoringStrategy": {"type": "RequestedToCapacityRatio"}});
        let unused = json!({"scoringStrategy": {"type": "MostAllocated", "requestedToCapacityRatio":
            {"shape": [{"utilization": 1, "score": 1}]}}});
        // (release, args, the refusal or None when the release accepts them)
        let cases = [
            (
                (33, 13),
                &unsorted,
                Some(
                    "scoringStrategy.shape[1].utilization: Invalid value: 50: utilization values must be sorted in increasing order",
                ),
            ),
            (
                (35, 4),
                &unsorted,
                Some(
                    "scoringStrategy.shape[1].utilization: Invalid value: 50: values must be sorted in increasing order",
                ),
            ),
            (
                (36, 3),
                &unsorted,
                Some(
                    "scoringStrategy.requestedToCapacityRatio.shape[1].utilization: Invalid value: 50: values must be sorted in increasing order",
                ),
            ),
            (
                (35, 4),
                &missing,
                Some(
                    "scoringStrategy.requestedToCapacityRatio: Required value: must be specified when type is RequestedToCapacityRatio",
                ),
            ),
            (
                (36, 3),
                &missing,
                Some(
                    "scoringStrategy.requestedToCapacityRatio: Required value: must be specified when type is RequestedToCapacityRatio",
                ),
            ),
            ((35, 4), &unused, None),
            (
                (36, 3),
                &unused,
                Some(
                    "scoringStrategy.requestedToCapacityRatio: Forbidden: must be nil when type is not RequestedToCapacityRatio",
                ),
            ),
        ];
        for ((minor, patch), args, want) in cases {
            let features =
                crate::framework::FeatureGates::for_version(crate::features::KubeVersion::new(minor, patch));
            let got = new(Some(args), &handle(), &features).err().map(|e| {
                let PluginError::InvalidArgs { message, .. } = e;
                message
            });
            assert_eq!(got.as_deref(), want, "v1.{minor}.{patch} {args}");
        }
    }

    #[test]
    fn qualified_names() {
        for (v, ok) in [
            ("example.com/gpu", true),
            ("gpu", true),
            ("a_b.c-d", true),
            ("", false),
            ("-a", false),
            ("Example.com/gpu", false),
            ("a/b/c", false),
            ("/gpu", false),
            (&"x".repeat(64), false),
        ] {
            assert_eq!(validate_qualified_name(v).is_ok(), ok, "{v:?}");
        }
    }
}
