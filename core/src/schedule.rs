//! One pod through the scheduling cycle — PreEnqueue, PreFilter, Filter (every node, in parallel),
//! PostFilter, PreScore, Score — producing an [`Explanation`] whose `message` is the FailedScheduling
//! message kube-scheduler writes, byte for byte.
//!
//! Unlike kube-scheduler, the filter phase never stops early: every node is evaluated so the explanation
//! covers all of them. `Sampling` says when kube-scheduler's early stop could make its pick differ.

use std::collections::BTreeMap;
use std::sync::Arc;

use rayon::prelude::*;

use crate::action::Action;
use crate::explain::{
    Explanation, FilterVerdict, NodeExplanation, Outcome, PostFilterView, Sampling, ScoreView,
};
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::NodeToStatus;
use crate::framework::runtime::{Framework, PluginTrace};
use crate::framework::status::{Code, Status};
use crate::snapshot::{NodeInfo, PodInfo};

pub mod composite;
pub mod placement;
pub mod pod_group;
pub mod pod_group_preemption;

/// kube-scheduler's `minFeasibleNodesToFind`.
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// kube-scheduler's `minFeasibleNodesPercentageToFind`.
pub const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: i64 = 5;
/// Nodes filtered together (in parallel) by [`ScheduleOptions::stop_at_first_feasible`] before it
/// looks for a feasible one.
const FIRST_FEASIBLE_CHUNK: usize = 128;
/// `numFeasibleNodesToFind`: how many feasible nodes kube-scheduler looks for before it stops filtering.
pub fn num_feasible_nodes_to_find(percentage: i32, num_all_nodes: usize) -> usize {
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND {
        return num_all_nodes;
    }
    let n = num_all_nodes as i64;
    let mut p = i64::from(percentage);
    if p == 0 {
        p = (50 - n / 125).max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND);
    }
    let k = (n * p / 100) as usize;
    k.max(MIN_FEASIBLE_NODES_TO_FIND)
}

// `FitError` is the framework's (framework/types.go upstream); kept reachable from here.
pub use crate::framework::fit_error::{NO_NODES_AVAILABLE_MSG, fit_error_message, reason_histogram};

/// Options of one evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleOptions {
    /// The global percentageOfNodesToScore (used when the profile sets none).
    pub global_percentage_of_nodes_to_score: i32,
    /// Record each filter plugin's verdict and duration per node.
    pub trace_filters: bool,
    /// Stop filtering at the first chunk of nodes with a feasible one and score nothing: the outcome
    /// and message are kube-scheduler's, the selected node is only a feasible one (triage: "would it
    /// fit?" over thousands of pods). A pod that fits nowhere is evaluated on every node as usual.
    pub stop_at_first_feasible: bool,
    /// Sample as kube-scheduler does, from this start index (its `nextStartNodeIndex`): a nominated node
    /// that passes the filters is taken without looking at others; otherwise nodes are filtered in
    /// rotating order from the index until `numFeasibleNodesToFind` are feasible, and only those are
    /// scored. kube-scheduler filters in parallel, so which nodes it finds first varies; this takes
    /// them in order, as one worker would. `None` evaluates every node (explain's view).
    pub sample_from: Option<usize>,
    /// Keep every evaluated node's verdict and scores in [`Explanation::nodes`] (explain's table, and
    /// `feasible`). A batch simulation reads only the outcome, the message and the selected nodes:
    /// without the records a cycle copies no node name per node and sorts nothing.
    pub record_nodes: bool,
}

impl Default for ScheduleOptions {
    fn default() -> Self {
        ScheduleOptions {
            global_percentage_of_nodes_to_score: 0,
            trace_filters: true,
            stop_at_first_feasible: false,
            sample_from: None,
            record_nodes: true,
        }
    }
}

/// What a scheduling cycle leaves behind beyond the explanation: the cycle state (for Reserve/PreBind
/// and preemption) and the node statuses PostFilter saw.
#[derive(Debug)]
pub struct CycleResult {
    /// The explanation.
    pub explanation: Explanation,
    /// The cycle state after PreFilter/PreScore.
    pub state: CycleState,
    /// Filter statuses of the rejected nodes.
    pub node_statuses: NodeToStatus,
    /// How far kube-scheduler's start index moves after this cycle (`processedNodes`: the feasible
    /// nodes found plus the nodes with a filter status; 0 when the nominated node was taken).
    pub processed_nodes: usize,
}

/// Evaluates `pod` as kube-scheduler would with `fwk`'s profile.
pub fn schedule(fwk: &Framework, pod: &PodInfo, options: ScheduleOptions) -> Explanation {
    schedule_cycle(fwk, pod, options).explanation
}

fn verdicts(trace: Vec<PluginTrace>) -> Vec<FilterVerdict> {
    trace
        .into_iter()
        .map(|t| FilterVerdict {
            plugin: t.plugin,
            code: t.status.code(),
            reasons: t.status.into_reasons(),
            nanos: t.nanos,
        })
        .collect()
}

/// The scheduling cycle, keeping its state. A pod of a gang (GangScheduling, under GenericWorkload)
/// that fits on its own is then decided with its group, as kube-scheduler's pod group cycle
/// decides it ([`pod_group`]): rejected with the group's message when the group cannot be placed
/// whole, or with its own cycle's once the group's pods before it are placed.
pub fn schedule_cycle(fwk: &Framework, pod: &PodInfo, options: ScheduleOptions) -> CycleResult {
    let mut cycle = pod_cycle(fwk, pod, options);
    // Over placements (TopologyAwareWorkloadScheduling) a pod that fits nowhere alone is still
    // reported from a placement: its "0/N nodes" counts that placement's nodes.
    let in_placements =
        cycle.explanation.outcome == Outcome::Unschedulable && placement::tries_placements(fwk);
    if cycle.explanation.outcome != Outcome::Scheduled && !in_placements {
        return cycle;
    }
    match pod_group::group_verdict(fwk, pod, options) {
        None => cycle,
        Some(
            pod_group::GroupVerdict::PodFailed(in_group) | pod_group::GroupVerdict::InPlacement(in_group),
        ) => *in_group,
        Some(pod_group::GroupVerdict::Rejected(status)) => {
            let explanation = &mut cycle.explanation;
            explanation.outcome = if status.code() == Code::Error {
                Outcome::Error
            } else {
                Outcome::Unschedulable
            };
            explanation.post_filter = None;
            explanation.message = status.message();
            explanation.selected.clear();
            explanation.selected_score = None;
            explanation.tie = false;
            explanation.claim_allocations.clear();
            cycle
        }
    }
}

/// One pod's own scheduling cycle, keeping its state, without its pod group's decision (the pod
/// group cycle runs it for each pod of the group: `podGroupPodSchedulingAlgorithm`).
pub fn pod_cycle(fwk: &Framework, pod: &PodInfo, options: ScheduleOptions) -> CycleResult {
    let snapshot = fwk.snapshot().clone();
    // A pod group cycle's placement (TopologyAwareWorkloadScheduling) limits the candidates.
    let placement_nodes = snapshot.nodes_in_placement();
    let all_nodes: &[Arc<NodeInfo>] = &placement_nodes;
    let percentage = fwk
        .profile
        .percentage_of_nodes_to_score
        .unwrap_or(options.global_percentage_of_nodes_to_score);
    let mut explanation = new_explanation(fwk, pod, all_nodes.len(), percentage);
    let mut state = CycleState::new();
    let mut node_statuses = NodeToStatus::default();

    let gate = fwk.run_pre_enqueue_plugins(pod);
    let gated = (!gate.is_success()).then(|| gate.message());

    if all_nodes.is_empty() {
        explanation.outcome = Outcome::Unschedulable;
        explanation.message = NO_NODES_AVAILABLE_MSG.to_string();
        return finish(explanation, gated, state, node_statuses, 0);
    }

    let fit = find_nodes_that_fit(
        fwk,
        &mut state,
        pod,
        all_nodes,
        percentage,
        options,
        &mut explanation,
        &mut node_statuses,
    );
    let processed_nodes = match &fit {
        Ok((_, _, Found::NominatedNode)) => 0,
        Ok((feasible, _, _)) => feasible.len() + node_statuses.statuses.len(),
        Err(_) => node_statuses.statuses.len(),
    };
    let (feasible, pre_filter_msg) = match fit {
        Ok((feasible, message, _)) => (feasible, message),
        Err(message) => {
            explanation.outcome = Outcome::Error;
            explanation.message = message;
            return finish(explanation, gated, state, node_statuses, processed_nodes);
        }
    };

    if feasible.is_empty() {
        explanation.outcome = Outcome::Unschedulable;
        let mut post_filter_msg = String::new();
        if fwk.has_post_filter_plugins() {
            let (result, status) = fwk.run_post_filter_plugins(&state, pod, &node_statuses);
            post_filter_msg = status.message();
            explanation.post_filter = Some(PostFilterView {
                code: status.code(),
                message: post_filter_msg.clone(),
                nominated_node: result.map(|r| r.nominated_node_name).filter(|n| !n.is_empty()),
            });
        }
        explanation.message =
            fit_error_message(all_nodes.len(), &node_statuses, &pre_filter_msg, &post_filter_msg);
        sort_nodes(&mut explanation);
        return finish(explanation, gated, state, node_statuses, processed_nodes);
    }

    if options.stop_at_first_feasible {
        let nominated = pod.nominated_node_name();
        let pick = feasible
            .iter()
            .find(|n| n.name() == nominated)
            .unwrap_or(&feasible[0]);
        explanation.selected = vec![pick.name().to_string()];
        explanation.feasible = feasible.iter().map(|n| n.name().to_string()).collect();
        return finish(explanation, gated, state, node_statuses, processed_nodes);
    }
    explanation.sampling.answer_depends_on_sampling = feasible.len() > explanation.sampling.nodes_to_find;
    if options.sample_from.is_some() && feasible.len() == 1 {
        // kube-scheduler takes a single feasible node (or the nominated one) without scoring.
        select_host(pod, &feasible, &BTreeMap::new(), &mut explanation);
        explanation.selected = vec![feasible[0].name().to_string()];
        return finish(explanation, gated, state, node_statuses, processed_nodes);
    }
    let totals = match prioritize_nodes(fwk, &mut state, pod, &feasible, &mut explanation) {
        Ok(totals) => totals,
        Err(message) => {
            explanation.outcome = Outcome::Error;
            explanation.message = message;
            return finish(explanation, gated, state, node_statuses, processed_nodes);
        }
    };
    select_host(pod, &feasible, &totals, &mut explanation);
    if let Some(node) = explanation.selected.first() {
        explanation.claim_allocations = crate::plugins::dynamic_resources::claim_allocations(&state, node);
    }
    finish(explanation, gated, state, node_statuses, processed_nodes)
}

/// An explanation for `pod` before any plugin ran: every node still considered, nothing decided.
fn new_explanation(fwk: &Framework, pod: &PodInfo, nodes: usize, percentage: i32) -> Explanation {
    Explanation {
        pod: pod.key(),
        profile: fwk.profile_name.clone(),
        nodes_total: nodes,
        outcome: Outcome::Scheduled,
        message: String::new(),
        pre_filter_message: None,
        selected: Vec::new(),
        selected_score: None,
        feasible: Vec::new(),
        nodes: Vec::new(),
        post_filter: None,
        preemption: None,
        sampling: Sampling {
            percentage_of_nodes_to_score: percentage,
            nodes_considered: nodes,
            nodes_to_find: num_feasible_nodes_to_find(percentage, nodes),
            answer_depends_on_sampling: false,
        },
        nominated_node_fast_path: None,
        tie: false,
        claim_allocations: Vec::new(),
    }
}

/// How [`find_nodes_that_fit`] found its feasible nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// By filtering (every node, or a sample).
    Filtering,
    /// The pod's nominated node passed the filters and was taken alone (sampling only).
    NominatedNode,
}

/// `findNodesThatFitPod`: PreFilter, then Filter on every node PreFilter left (in parallel, nominated
/// pods included), or on kube-scheduler's sample ([`ScheduleOptions::sample_from`]). Records each
/// node's verdict in `explanation` and the failures in `node_statuses`; returns the feasible nodes and
/// PreFilter's rejection message ("" when it passed), or `Err` with the message of an internal error.
fn find_nodes_that_fit(
    fwk: &Framework,
    state: &mut CycleState,
    pod: &PodInfo,
    all_nodes: &[Arc<NodeInfo>],
    percentage: i32,
    options: ScheduleOptions,
    explanation: &mut Explanation,
    node_statuses: &mut NodeToStatus,
) -> Result<(Vec<Arc<NodeInfo>>, String, Found), String> {
    let trace_filters = options.trace_filters;
    let (pre_result, pre_status, plugins_with_nodes) = fwk.run_pre_filter_plugins(state, pod);
    if !pre_status.is_success() {
        if !pre_status.is_rejected() {
            return Err(pre_status.message());
        }
        let pre_filter_msg = pre_status.message();
        explanation.pre_filter_message = Some(pre_filter_msg.clone());
        if options.record_nodes {
            explanation.nodes = all_nodes
                .iter()
                .map(|n| NodeExplanation::from_status(n.name(), pre_status.clone(), Vec::new()))
                .collect();
        }
        node_statuses.absent = pre_status;
        return Ok((Vec::new(), pre_filter_msg, Found::Filtering));
    }
    let candidates: Vec<Arc<NodeInfo>> = match pre_result.as_ref().and_then(|r| r.node_names.as_ref()) {
        None => all_nodes.to_vec(),
        Some(allowed) => {
            let plugins: Vec<&str> = plugins_with_nodes.iter().copied().collect();
            node_statuses.absent = Status::unresolvable(format!(
                "node(s) didn't satisfy plugin(s) [{}]",
                plugins.join(" ")
            ));
            // Names that are not nodes of the snapshot are dropped, as kube-scheduler does.
            all_nodes
                .iter()
                .filter(|n| allowed.contains(n.name()))
                .cloned()
                .collect()
        }
    };
    explanation.sampling.nodes_considered = candidates.len();
    explanation.sampling.nodes_to_find = num_feasible_nodes_to_find(percentage, candidates.len());
    let state = &*state;
    let filter = |node: &Arc<NodeInfo>| {
        let mut trace = Vec::new();
        let s =
            fwk.run_filter_plugins_with_nominated_pods(state, pod, node, trace_filters.then_some(&mut trace));
        (s, trace)
    };
    let mut candidates = candidates;
    if options.sample_from.is_some() {
        // evaluateNominatedNode: the node preemption made room on is tried first, alone.
        let nominated = pod.nominated_node_name();
        if let Some(node) = all_nodes
            .iter()
            .find(|n| !nominated.is_empty() && n.name() == nominated)
        {
            let (status, trace) = filter(node);
            if status.code() == Code::Error {
                return Err(status.message());
            }
            if status.is_success() {
                if options.record_nodes {
                    explanation.nodes.push(NodeExplanation::from_status(
                        node.name(),
                        status,
                        verdicts(trace),
                    ));
                }
                return Ok((vec![node.clone()], String::new(), Found::NominatedNode));
            }
        }
    }
    let results: Vec<(Status, Vec<PluginTrace>)> = if let Some(start) = options.sample_from {
        if !candidates.is_empty() {
            let start = start % candidates.len();
            candidates.rotate_left(start);
        }
        let to_find = if fwk.has_score_plugins() {
            explanation.sampling.nodes_to_find
        } else {
            1
        };
        let mut results = Vec::with_capacity(candidates.len());
        let mut found = 0;
        'chunks: for chunk in candidates.chunks(FIRST_FEASIBLE_CHUNK) {
            for result in chunk.par_iter().map(filter).collect::<Vec<_>>() {
                found += usize::from(result.0.is_success());
                results.push(result);
                if found == to_find {
                    break 'chunks;
                }
            }
        }
        candidates.truncate(results.len());
        results
    } else if options.stop_at_first_feasible {
        // The nominated node first, as kube-scheduler does; then chunks, each filtered in parallel.
        let nominated = pod.nominated_node_name();
        if let Some(i) = candidates.iter().position(|n| n.name() == nominated) {
            candidates[..=i].rotate_right(1);
        }
        let mut results = Vec::with_capacity(candidates.len());
        for chunk in candidates.chunks(FIRST_FEASIBLE_CHUNK) {
            let chunk_results: Vec<_> = chunk.par_iter().map(filter).collect();
            let found = chunk_results.iter().any(|(s, _)| s.is_success());
            results.extend(chunk_results);
            if found {
                break;
            }
        }
        results
    } else {
        candidates.par_iter().map(filter).collect()
    };
    if let Some((err, _)) = results.iter().find(|(s, _)| s.code() == Code::Error) {
        return Err(err.message());
    }
    // PreFilter narrowed the nodes: the others are listed with the absent status.
    let narrowed = candidates.len() < all_nodes.len();
    let candidate_names: std::collections::HashSet<&str> = if narrowed && options.record_nodes {
        candidates.iter().map(|n| n.name()).collect()
    } else {
        Default::default()
    };
    let mut feasible = Vec::new();
    // With stop_at_first_feasible the nodes after the chunk that found one are not evaluated, and not
    // listed: they are neither feasible nor rejected.
    for (node, (status, trace)) in candidates.iter().zip(results) {
        if status.is_success() {
            feasible.push(node.clone());
        } else if !options.record_nodes {
            node_statuses.statuses.insert(node.name().to_string(), status);
            continue;
        } else {
            node_statuses
                .statuses
                .insert(node.name().to_string(), status.clone());
        }
        if options.record_nodes {
            explanation
                .nodes
                .push(NodeExplanation::from_status(node.name(), status, verdicts(trace)));
        }
    }
    for n in all_nodes
        .iter()
        .filter(|n| options.record_nodes && narrowed && !candidate_names.contains(n.name()))
    {
        explanation.nodes.push(NodeExplanation::from_status(
            n.name(),
            node_statuses.absent.clone(),
            Vec::new(),
        ));
    }
    Ok((feasible, String::new(), Found::Filtering))
}

/// `prioritizeNodes`: PreScore and Score on the feasible nodes, each node's per-plugin scores recorded
/// in `explanation`; the total per node, or `Err` with the message of an internal error. Scores are
/// computed for every feasible node so the table can show them, even where kube-scheduler would skip
/// scoring (a single feasible node, or the nominated node's fast path).
fn prioritize_nodes(
    fwk: &Framework,
    state: &mut CycleState,
    pod: &PodInfo,
    feasible: &[Arc<NodeInfo>],
    explanation: &mut Explanation,
) -> Result<BTreeMap<String, i64>, String> {
    let mut totals: BTreeMap<String, i64> = BTreeMap::new();
    if !fwk.has_score_plugins() {
        // No score plugins: every feasible node scores 1.
        for n in feasible {
            totals.insert(n.name().to_string(), 1);
        }
        for e in explanation.nodes.iter_mut().filter(|e| e.feasible) {
            e.score = Some(1);
        }
        return Ok(totals);
    }
    let s = fwk.run_pre_score_plugins(state, pod, feasible);
    if !s.is_success() {
        return Err(s.message());
    }
    let scores = fwk
        .run_score_plugins(state, pod, feasible)
        .map_err(|s| s.message())?;
    let by_name: BTreeMap<&str, usize> = explanation
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    let mut updates = Vec::new();
    for ns in &scores {
        if let Some(&i) = by_name.get(ns.name.as_str()) {
            updates.push((i, ns.clone()));
        }
        totals.insert(ns.name.clone(), ns.total_score);
    }
    for (i, ns) in updates {
        let entry = &mut explanation.nodes[i];
        entry.score = Some(ns.total_score);
        entry.scores = ns
            .scores
            .iter()
            .map(|p| {
                (
                    p.plugin,
                    ScoreView {
                        raw: p.raw,
                        normalized: p.normalized,
                        weight: p.weight,
                        weighted: p.weighted,
                    },
                )
            })
            .collect();
    }
    Ok(totals)
}

/// `selectHost`: the nominated node when it is feasible (kube-scheduler's fast path), the only
/// feasible node, or every node with the top score (kube-scheduler picks one of them at random).
fn select_host(
    pod: &PodInfo,
    feasible: &[Arc<NodeInfo>],
    totals: &BTreeMap<String, i64>,
    explanation: &mut Explanation,
) {
    let nominated = pod.nominated_node_name();
    if !nominated.is_empty() && feasible.iter().any(|n| n.name() == nominated) {
        explanation.nominated_node_fast_path = Some(nominated.to_string());
        explanation.selected = vec![nominated.to_string()];
    } else if feasible.len() == 1 {
        explanation.selected = vec![feasible[0].name().to_string()];
    } else {
        let best = totals.values().copied().max().unwrap_or(0);
        explanation.selected = totals
            .iter()
            .filter(|(_, s)| **s == best)
            .map(|(n, _)| n.clone())
            .collect();
        explanation.tie = explanation.selected.len() > 1;
    }
    explanation.selected_score = explanation.selected.first().and_then(|n| totals.get(n).copied());
    sort_nodes(explanation);
    explanation.feasible = explanation
        .nodes
        .iter()
        .filter(|n| n.feasible)
        .map(|n| n.name.clone())
        .collect();
}

fn sort_nodes(explanation: &mut Explanation) {
    explanation.nodes.sort_by(|a, b| {
        b.feasible
            .cmp(&a.feasible)
            .then(b.score.unwrap_or(i64::MIN).cmp(&a.score.unwrap_or(i64::MIN)))
            .then(a.name.cmp(&b.name))
    });
}

fn finish(
    mut explanation: Explanation,
    gated: Option<String>,
    state: CycleState,
    node_statuses: NodeToStatus,
    processed_nodes: usize,
) -> CycleResult {
    if let Some(gate) = gated {
        // A gated pod never reaches a cycle: the evaluation above says what would happen once ungated.
        explanation.outcome = Outcome::Gated;
        explanation.message = gate;
        explanation.selected.clear();
        explanation.selected_score = None;
    }
    CycleResult {
        explanation,
        state,
        node_statuses,
        processed_nodes,
    }
}

/// The binding cycle for a chosen node, as data: Reserve, Permit, PreBind and Bind, returning the actions
/// kube-scheduler would perform (volume pre-binding, then the Binding). On failure, reserve plugins are
/// unreserved (the returned status says why).
pub fn binding_plan(
    fwk: &Framework,
    state: &mut CycleState,
    pod: &PodInfo,
    node: &str,
) -> (Vec<Action>, Status) {
    let s = fwk.run_reserve_plugins(state, pod, node);
    if !s.is_success() {
        return (Vec::new(), s);
    }
    let s = fwk.run_permit_plugins(state, pod, node);
    if s.is_rejected() || s.code() == Code::Error {
        fwk.run_unreserve_plugins(state, pod, node);
        return (Vec::new(), s);
    }
    let (mut actions, s) = fwk.run_pre_bind_plugins(state, pod, node);
    if !s.is_success() {
        fwk.run_unreserve_plugins(state, pod, node);
        return (actions, s);
    }
    let (bind, s) = fwk.run_bind_plugins(state, pod, node);
    if !s.is_success() {
        fwk.run_unreserve_plugins(state, pod, node);
        return (actions, s);
    }
    actions.extend(bind);
    (actions, Status::success())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statuses(explicit: &[(&str, Status)], absent: Status) -> NodeToStatus {
        NodeToStatus {
            statuses: explicit.iter().map(|(n, s)| (n.to_string(), s.clone())).collect(),
            absent,
        }
    }

    #[test]
    fn histogram_is_sorted_as_strings_and_counts_every_reason() {
        let s = statuses(
            &[
                (
                    "n1",
                    Status::with_reasons(
                        Code::Unschedulable,
                        vec!["Insufficient cpu".into(), "Insufficient memory".into()],
                    ),
                ),
                ("n2", Status::unschedulable("Insufficient cpu")),
                (
                    "n3",
                    Status::unresolvable(
                        "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }",
                    ),
                ),
            ],
            Status::success(),
        );
        assert_eq!(
            fit_error_message(3, &s, "", ""),
            "0/3 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 2 Insufficient cpu."
        );
    }

    #[test]
    fn ten_sorts_before_two() {
        let mut explicit = Vec::new();
        for i in 0..10 {
            explicit.push((format!("a{i}"), Status::unschedulable("Insufficient cpu")));
        }
        for i in 0..2 {
            explicit.push((
                format!("b{i}"),
                Status::unresolvable("node(s) were unschedulable"),
            ));
        }
        let s = NodeToStatus {
            statuses: explicit.into_iter().collect(),
            absent: Status::success(),
        };
        assert_eq!(
            fit_error_message(12, &s, "", ""),
            "0/12 nodes are available: 10 Insufficient cpu, 2 node(s) were unschedulable."
        );
    }

    #[test]
    fn absent_nodes_get_the_absent_reason() {
        let s = statuses(
            &[("n1", Status::unschedulable("Insufficient cpu"))],
            Status::unresolvable("node(s) didn't satisfy plugin(s) [NodeAffinity]"),
        );
        assert_eq!(
            fit_error_message(4, &s, "", ""),
            "0/4 nodes are available: 1 Insufficient cpu, 3 node(s) didn't satisfy plugin(s) [NodeAffinity]."
        );
    }

    #[test]
    fn pre_filter_message_replaces_histogram_and_post_filter_appends() {
        let s = statuses(
            &[],
            Status::unresolvable("pod has unbound immediate PersistentVolumeClaims"),
        );
        assert_eq!(
            fit_error_message(
                3,
                &s,
                "pod has unbound immediate PersistentVolumeClaims",
                "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
            ),
            "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        );
    }

    #[test]
    fn nodes_to_find_follows_adaptive_percentage() {
        for (pct, n, want) in [
            (0, 50, 50),
            (0, 100, 100),
            (0, 1000, 420),
            (0, 5000, 500),
            (0, 6000, 300),
            (0, 20000, 1000),
            (10, 500, 100),
            (50, 1000, 500),
            (100, 300, 300),
        ] {
            assert_eq!(num_feasible_nodes_to_find(pct, n), want, "pct={pct} n={n}");
        }
    }
}
