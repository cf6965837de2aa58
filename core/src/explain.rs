//! The explanation model: what `schedule` found for one pod — per node, per plugin — in the shape
//! `kubectl sched explain -o json` prints (the contract: docs/architecture.md, "The `-o json` contract").

use std::collections::BTreeMap;

use serde::Serialize;

use crate::framework::status::{Code, Status};

/// How the cycle ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub enum Outcome {
    /// A node was selected.
    Scheduled,
    /// No node fits (FailedScheduling).
    Unschedulable,
    /// A PreEnqueue plugin keeps the pod out of the queue (scheduling gates).
    Gated,
    /// The cycle failed with an internal error (kube-scheduler retries with backoff).
    Error,
}

/// One filter plugin's verdict on one node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FilterVerdict {
    /// Plugin name.
    pub plugin: &'static str,
    /// Status code.
    pub code: Code,
    /// Reasons.
    pub reasons: Vec<String>,
    /// Time spent, nanoseconds.
    pub nanos: u64,
}

/// One score plugin's contribution on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScoreView {
    /// Before NormalizeScore.
    pub raw: i64,
    /// After NormalizeScore.
    pub normalized: i64,
    /// Profile weight.
    pub weight: i64,
    /// normalized × weight.
    pub weighted: i64,
}

/// Everything about one node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeExplanation {
    /// Node name.
    pub name: String,
    /// True when every filter passed.
    pub feasible: bool,
    /// The rejecting plugin (null when feasible).
    pub plugin: Option<String>,
    /// The node's status code.
    pub code: Code,
    /// The rejection reasons (empty when feasible).
    pub reasons: Vec<String>,
    /// Each filter that ran, in order.
    pub filters: Vec<FilterVerdict>,
    /// Total weighted score (null when infeasible or not scored).
    pub score: Option<i64>,
    /// Per score plugin.
    pub scores: BTreeMap<&'static str, ScoreView>,
}

/// How kube-scheduler would have sampled nodes (percentageOfNodesToScore).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sampling {
    /// The effective percentage (profile, else global; 0 = adaptive).
    pub percentage_of_nodes_to_score: i32,
    /// The nodes the filter phase considered (after PreFilter subsetting).
    pub nodes_considered: usize,
    /// kube-scheduler stops filtering once it has found this many feasible nodes.
    pub nodes_to_find: usize,
    /// True when more nodes are feasible than kube-scheduler would look at: its choice depends on where its
    /// rotating start index is, so it may pick a lower-scoring node than `selected`.
    pub answer_depends_on_sampling: bool,
}

/// The PostFilter outcome (DefaultPreemption's dry run lives behind it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PostFilterView {
    /// Final PostFilter code.
    pub code: Code,
    /// Its message (the FailedScheduling message's suffix when non-empty).
    pub message: String,
    /// The node that would be nominated, if any.
    pub nominated_node: Option<String>,
}

/// The answer to "why is (or isn't) this pod scheduled, and where would it go?".
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    /// `namespace/name`.
    pub pod: String,
    /// The profile (schedulerName) used.
    pub profile: String,
    /// Number of nodes in the snapshot.
    pub nodes_total: usize,
    /// How the cycle ended.
    pub outcome: Outcome,
    /// kube-scheduler's FailedScheduling message when unschedulable, the gate or error text when gated or
    /// failed, "" when the pod fits.
    pub message: String,
    /// The PreFilter status when PreFilter rejected (its message replaces the node histogram).
    pub pre_filter_message: Option<String>,
    /// Top-scoring node(s); several on a tie (kube-scheduler picks one of them at random).
    pub selected: Vec<String>,
    /// Total score of the selected node(s).
    pub selected_score: Option<i64>,
    /// Names of the feasible nodes, best first.
    pub feasible: Vec<String>,
    /// Every node, feasible ones first by score, then the rest by name.
    pub nodes: Vec<NodeExplanation>,
    /// The PostFilter result (null when the pod fits or the profile has no PostFilter).
    pub post_filter: Option<PostFilterView>,
    /// The preemption dry run (null until DefaultPreemption is available, or when not applicable).
    pub preemption: Option<serde_json::Value>,
    /// Node sampling.
    pub sampling: Sampling,
    /// The pod's nominatedNodeName when kube-scheduler would try it first and it fits.
    pub nominated_node_fast_path: Option<String>,
    /// True when the selection is a random pick among several top-scoring nodes.
    pub tie: bool,
    /// The devices DynamicResources would allocate to the pod's unallocated ResourceClaims on the
    /// first selected node (empty for pods without claims, or when nothing fits).
    pub claim_allocations: Vec<ClaimAllocation>,
}

/// The devices one ResourceClaim would get (its `status.allocation.devices.results`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClaimAllocation {
    /// `namespace/name` of the claim.
    pub claim: String,
    /// The node the allocation is for.
    pub node: String,
    /// One entry per allocated device, in the order of `status.allocation.devices.results`.
    pub devices: Vec<AllocatedDevice>,
}

/// One `status.allocation.devices.results[]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AllocatedDevice {
    /// The request (`request` or `request/subrequest`).
    pub request: String,
    /// The driver.
    pub driver: String,
    /// The pool.
    pub pool: String,
    /// The device.
    pub device: String,
}

impl NodeExplanation {
    /// An entry for a node from its final status and filter trace.
    pub fn from_status(name: &str, status: Status, filters: Vec<FilterVerdict>) -> Self {
        NodeExplanation {
            name: name.to_string(),
            feasible: status.is_success(),
            plugin: (!status.is_success() && !status.plugin().is_empty())
                .then(|| status.plugin().to_string()),
            code: status.code(),
            reasons: status.into_reasons(),
            filters,
            score: None,
            scores: BTreeMap::new(),
        }
    }
}
