//! The preemption evaluator (Go's `preemption.Evaluator` with DefaultPreemption's policy): is the pod
//! eligible, which nodes could work, which victims each needs, and which node to pick.
//!
//! kube-scheduler dry-runs a random sample of the potential nodes and stops early; this evaluator dry-runs
//! every potential node (in parallel) so the answer is deterministic, and reports how many nodes
//! kube-scheduler would have sampled and whether its pick could differ because of it.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use rayon::prelude::*;

use crate::framework::cycle_state::CycleState;
use crate::framework::fit_error::fit_error_message;
use crate::framework::interface::FrameworkHandle;
use crate::framework::interface::{NodeToStatus, NominatingMode, PostFilterResult};
use crate::framework::status::{Code, Status};
use crate::preemption::args::DefaultPreemptionArgs;
use crate::preemption::candidate::{Candidate, Victim, importance_order, pick_one_node_for_preemption, rank};
use crate::preemption::pdb::{self, PdbIndex};
use crate::snapshot::{NodeInfo, PodInfo, Snapshot};

/// The preemptor has `preemptionPolicy: Never`.
pub const NOT_ELIGIBLE_PREEMPTION_POLICY_NEVER: &str = "not eligible due to preemptionPolicy=Never.";
/// A lower-priority pod on the preemptor's nominated node is still terminating after an earlier preemption.
pub const NOT_ELIGIBLE_TERMINATING_POD: &str = "not eligible due to a terminating pod on the nominated node.";
/// SelectVictimsOnNode: the node has no pod of lower priority than the preemptor.
pub const NO_VICTIMS_FOUND: &str = "No preemption victims found for incoming pod";
/// The status of every node the dry run did not try (it was not Unschedulable).
pub const PREEMPTION_NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
/// SelectCandidate returned nothing (unreachable with in-tree logic).
pub const NO_CANDIDATE_NODE: &str = "no candidate node for preemption";
/// findCandidates on an empty cluster.
pub const NO_NODES_AVAILABLE: &str = "no nodes available";
/// The `DisruptionTarget` pod condition type.
pub const CONDITION_DISRUPTION_TARGET: &str = "DisruptionTarget";
/// The `DisruptionTarget` reason kube-scheduler sets on its victims.
pub const REASON_PREEMPTION_BY_SCHEDULER: &str = "PreemptionByScheduler";

// The clock is below every layer; kept reachable here for the evaluator's callers.
pub use crate::clock::now_nanos;

/// The Success message of a preemption that found a node (v1.37 on: `preemption_reports_placement`;
/// earlier releases return a Success without words, so the FitError ends after the filter reasons).
pub fn found_placement_message(node: &str, num_victims: usize) -> String {
    format!("found a potential placement for pod on node {node}, preempting {num_victims} victims")
}

/// Go's `PodTerminatingByPreemption`: deleting, and the first DisruptionTarget condition is True with
/// reason PreemptionByScheduler.
pub fn pod_terminating_by_preemption(pod: &Pod) -> bool {
    if pod.metadata.deletion_timestamp.is_none() {
        return false;
    }
    pod.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .find(|c| c.type_ == CONDITION_DISRUPTION_TARGET)
        .is_some_and(|c| c.status == "True" && c.reason.as_deref() == Some(REASON_PREEMPTION_BY_SCHEDULER))
}

/// The code a node has in the filter results. A node without an explicit status gets the absent status,
/// which kube-scheduler initialises to UnschedulableAndUnresolvable (this crate leaves it Success).
pub fn status_code(statuses: &NodeToStatus, node: &str) -> Code {
    match statuses.statuses.get(node) {
        Some(s) => s.code(),
        None if statuses.absent.is_success() => Code::UnschedulableAndUnresolvable,
        None => statuses.absent.code(),
    }
}

/// `PodEligibleToPreemptOthers`: `Err` carries the reason the pod may not preempt.
pub fn pod_eligible_to_preempt_others(
    snapshot: &Snapshot,
    pod: &PodInfo,
    nominated_node_code: Code,
) -> Result<(), &'static str> {
    let policy = pod.pod.spec.as_ref().and_then(|s| s.preemption_policy.as_deref());
    if policy == Some("Never") {
        return Err(NOT_ELIGIBLE_PREEMPTION_POLICY_NEVER);
    }
    let nominated = pod.nominated_node_name();
    if nominated.is_empty() {
        return Ok(());
    }
    // Filters say the nominated node cannot work any more: the pod may preempt elsewhere.
    if nominated_node_code == Code::UnschedulableAndUnresolvable {
        return Ok(());
    }
    // Victims of an earlier preemption are still terminating there: wait for them instead of preempting
    // more pods.
    if let Some(node) = snapshot.node(nominated)
        && node
            .pods
            .iter()
            .any(|p| p.priority < pod.priority && pod_terminating_by_preemption(&p.pod))
    {
        return Err(NOT_ELIGIBLE_TERMINATING_POD);
    }
    Ok(())
}

fn remove_victim(
    fwk: &dyn FrameworkHandle,
    state: &mut CycleState,
    preemptor: &PodInfo,
    node: &mut NodeInfo,
    victim: &Victim,
) -> Result<(), Status> {
    node.remove_pod(&victim.pod);
    let s = fwk.run_pre_filter_extension_remove_pod(state, preemptor, &victim.pod, node);
    if s.is_success() {
        Ok(())
    } else {
        Err(Status::error(s.message()))
    }
}

fn add_victim(
    fwk: &dyn FrameworkHandle,
    state: &mut CycleState,
    preemptor: &PodInfo,
    node: &mut NodeInfo,
    victim: &Victim,
) -> Result<(), Status> {
    node.add_pod(victim.pod.clone());
    let s = fwk.run_pre_filter_extension_add_pod(state, preemptor, &victim.pod, node);
    if s.is_success() {
        Ok(())
    } else {
        Err(Status::error(s.message()))
    }
}

/// `SelectVictimsOnNode` on a node copy and state copy: removes every lower-priority pod, checks the
/// preemptor then fits, and adds pods back (PDB-violating ones first, each group most important first)
/// while it still fits. Returns the victims (most important first) and how many violate a PDB, or the
/// status explaining why preemption on this node cannot help.
///
/// Equally important pods keep their order on the node; kube-scheduler's order among them is arbitrary
/// ([`crate::preemption::ties`] tries the others).
pub fn select_victims_on_node(
    fwk: &dyn FrameworkHandle,
    state: &mut CycleState,
    preemptor: &PodInfo,
    node: &mut NodeInfo,
    pdbs: &PdbIndex,
    now_nanos: i128,
) -> Result<(Vec<Victim>, i64), Status> {
    let potential = remove_potential_victims(fwk, state, preemptor, node, now_nanos)?;
    reprieve_in_order(fwk, state, preemptor, node, potential, pdbs)
}

/// The first half of `SelectVictimsOnNode`: removes every pod of lower priority than the preemptor from
/// `node` (and `state`) and checks the preemptor then fits. Returns the removed pods most important
/// first (a stable sort: equally important pods keep their order on the node).
pub fn remove_potential_victims(
    fwk: &dyn FrameworkHandle,
    state: &mut CycleState,
    preemptor: &PodInfo,
    node: &mut NodeInfo,
    now_nanos: i128,
) -> Result<Vec<Victim>, Status> {
    let mut potential: Vec<Victim> = node
        .pods
        .iter()
        .filter(|p| p.priority < preemptor.priority)
        .map(|p| Victim::new(p.clone(), now_nanos))
        .collect();
    if potential.is_empty() {
        return Err(Status::unresolvable(NO_VICTIMS_FOUND));
    }
    for v in &potential {
        remove_victim(fwk, state, preemptor, node, v)?;
    }
    // Not fitting even with every lower-priority pod gone ends it here (affinity to a victim is not
    // considered, as upstream).
    let s = fwk.run_filter_plugins_with_nominated_pods(state, preemptor, node);
    if !s.is_success() {
        return Err(s);
    }
    potential.sort_by(importance_order);
    Ok(potential)
}

/// The second half of `SelectVictimsOnNode`, on the node and state [`remove_potential_victims`] left:
/// charges the budgets and tries to add pods back in the order given (PDB-violating ones first), keeping
/// those that leave the preemptor fitting. Returns the victims and how many violate a PDB.
pub fn reprieve_in_order(
    fwk: &dyn FrameworkHandle,
    state: &mut CycleState,
    preemptor: &PodInfo,
    node: &mut NodeInfo,
    ordered: Vec<Victim>,
    pdbs: &PdbIndex,
) -> Result<(Vec<Victim>, i64), Status> {
    let charging = pdb::BudgetCharging::of(fwk.features());
    let (violating, non_violating) = pdb::split_by_violation(ordered, |v| &v.pod, pdbs, charging);
    let resort = !violating.is_empty() && !non_violating.is_empty();
    let mut victims = Vec::new();
    let mut num_violating = 0i64;
    let reprieve = |v: &Victim, state: &mut CycleState, node: &mut NodeInfo| -> Result<bool, Status> {
        add_victim(fwk, state, preemptor, node, v)?;
        let fits = fwk
            .run_filter_plugins_with_nominated_pods(state, preemptor, node)
            .is_success();
        if !fits {
            remove_victim(fwk, state, preemptor, node, v)?;
        }
        Ok(fits)
    };
    for mut v in violating {
        if !reprieve(&v, state, node)? {
            v.pdb_violation = true;
            num_violating += 1;
            victims.push(v);
        }
    }
    for v in non_violating {
        if !reprieve(&v, state, node)? {
            victims.push(v);
        }
    }
    if resort {
        victims.sort_by(importance_order);
    }
    Ok((victims, num_violating))
}

/// What the evaluator found for one preemptor.
#[derive(Debug, Clone)]
pub struct Evaluation {
    /// `Err(reason)` when the pod may not preempt (nothing else was evaluated).
    pub eligibility: Result<(), String>,
    /// Nodes in the snapshot.
    pub num_all_nodes: usize,
    /// Nodes whose filter status was exactly Unschedulable: the ones the dry run tried.
    pub potential_nodes: usize,
    /// How many candidates kube-scheduler would look for among the potential nodes
    /// (DefaultPreemptionArgs).
    pub num_candidates: usize,
    /// Every node where preemption works, best first.
    pub candidates: Vec<Candidate>,
    /// Names of the candidates left after every criterion of pickOneNodeForPreemption (the first is the
    /// pick; kube-scheduler's choice among several is effectively random).
    pub tied: Vec<String>,
    /// The criterion that singled the pick out, if one did.
    pub decided_by: Option<&'static str>,
    /// Why each tried node was not a candidate; absent nodes: `Preemption is not helpful for scheduling`.
    pub node_statuses: NodeToStatus,
    /// Internal errors of the dry run, when they left no candidate (Go returns them as an Error status).
    pub error: Option<String>,
    /// True when kube-scheduler could stop its dry run before seeing every candidate (it stops once it has
    /// `num_candidates` candidates, one of them PDB-clean), so its pick may be a worse candidate.
    pub answer_depends_on_sampling: bool,
    /// The release's `preemption_reports_placement`: a successful preemption says where and how many
    /// victims ([`found_placement_message`]); before v1.37 its Success has no message.
    pub reports_placement: bool,
}

/// Go's `utilerrors.NewAggregate(errs).Error()`: one message as is, several deduplicated in brackets.
fn aggregate(errors: &[String]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for e in errors {
        if !seen.contains(&e.as_str()) {
            seen.push(e);
        }
    }
    if seen.len() == 1 {
        seen[0].to_string()
    } else {
        format!("[{}]", seen.join(", "))
    }
}

/// Evaluates preemption for `pod` given the filter results of its scheduling cycle.
pub fn evaluate(
    fwk: &dyn FrameworkHandle,
    state: &CycleState,
    pod: &PodInfo,
    statuses: &NodeToStatus,
    args: &DefaultPreemptionArgs,
    now_nanos: i128,
) -> Evaluation {
    let snapshot = fwk.snapshot();
    let all_nodes = snapshot.nodes();
    let mut eval = Evaluation {
        eligibility: Ok(()),
        num_all_nodes: all_nodes.len(),
        potential_nodes: 0,
        num_candidates: 0,
        candidates: Vec::new(),
        tied: Vec::new(),
        decided_by: None,
        node_statuses: NodeToStatus {
            statuses: Default::default(),
            absent: Status::unresolvable(PREEMPTION_NOT_HELPFUL),
        },
        error: None,
        answer_depends_on_sampling: false,
        reports_placement: fwk.features().changes.preemption_reports_placement,
    };
    let nominated_code = status_code(statuses, pod.nominated_node_name());
    if let Err(reason) = pod_eligible_to_preempt_others(snapshot, pod, nominated_code) {
        eval.eligibility = Err(reason.to_string());
        return eval;
    }
    if all_nodes.is_empty() {
        eval.error = Some(NO_NODES_AVAILABLE.to_string());
        return eval;
    }
    let potential: Vec<&Arc<NodeInfo>> = all_nodes
        .iter()
        .filter(|n| status_code(statuses, n.name()) == Code::Unschedulable)
        .collect();
    eval.potential_nodes = potential.len();
    eval.num_candidates = args.calculate_num_candidates(potential.len());
    if potential.is_empty() {
        return eval;
    }
    let pdbs = PdbIndex::from_objects(&snapshot.pod_disruption_budgets);
    let results: Vec<Result<Candidate, Status>> = potential
        .par_iter()
        .map(|node| {
            // Cheap rejection before cloning anything: nothing to preempt here.
            if !node.pods.iter().any(|p| p.priority < pod.priority) {
                return Err(Status::unresolvable(NO_VICTIMS_FOUND));
            }
            let mut node_copy = NodeInfo::clone(node);
            let mut state_copy = state.clone();
            let (victims, num_pdb_violations) =
                select_victims_on_node(fwk, &mut state_copy, pod, &mut node_copy, &pdbs, now_nanos)?;
            if victims.is_empty() {
                return Err(Status::error(format!(
                    "expected at least one victim pod on node {:?}",
                    node.name()
                )));
            }
            Ok(Candidate {
                node: node.name().to_string(),
                victims,
                num_pdb_violations,
            })
        })
        .collect();
    let mut errors = Vec::new();
    for (node, r) in potential.iter().zip(results) {
        match r {
            Ok(c) => eval.candidates.push(c),
            Err(s) => {
                if s.code() == Code::Error {
                    errors.push(s.message());
                }
                eval.node_statuses.statuses.insert(node.name().to_string(), s);
            }
        }
    }
    if eval.candidates.is_empty() {
        if !errors.is_empty() {
            eval.error = Some(aggregate(&errors));
        }
        return eval;
    }
    let non_violating = eval
        .candidates
        .iter()
        .filter(|c| c.num_pdb_violations == 0)
        .count();
    eval.answer_depends_on_sampling = non_violating > 0 && eval.candidates.len() > eval.num_candidates;
    rank(&mut eval.candidates);
    let pick = pick_one_node_for_preemption(&eval.candidates);
    eval.tied = pick
        .tied
        .iter()
        .map(|&i| eval.candidates[i].node.clone())
        .collect();
    eval.decided_by = pick.decided_by;
    eval
}

impl Evaluation {
    /// The candidate kube-scheduler would pick (the first by name among ties).
    pub fn chosen(&self) -> Option<&Candidate> {
        let name = self.tied.first()?;
        self.candidates.iter().find(|c| &c.node == name)
    }

    /// The candidate for a node, if preemption works there.
    pub fn candidate(&self, node: &str) -> Option<&Candidate> {
        self.candidates.iter().find(|c| c.node == node)
    }

    /// What `Evaluator.Preempt` returns when `chosen` is acted on: the nomination and the status, whose
    /// message DefaultPreemption prefixes with `preemption: `.
    pub fn post_filter(&self, chosen: Option<&Candidate>) -> (Option<PostFilterResult>, Status) {
        if let Err(reason) = &self.eligibility {
            // No result: the pod's nominatedNodeName stays as it is.
            return (None, Status::unschedulable(reason.clone()));
        }
        if let Some(err) = &self.error {
            return (None, Status::error(err.clone()));
        }
        if self.candidates.is_empty() {
            let message = fit_error_message(self.num_all_nodes, &self.node_statuses, "", "");
            // "Preemption is not helpful" clears the pod's nominatedNodeName.
            let clear = PostFilterResult {
                nominated_node_name: String::new(),
                mode: NominatingMode::Override,
            };
            return (Some(clear), Status::unschedulable(message));
        }
        let Some(c) = chosen else {
            return (None, Status::unschedulable(NO_CANDIDATE_NODE));
        };
        let status = if self.reports_placement {
            Status::new(Code::Success, found_placement_message(&c.node, c.victims.len()))
        } else {
            Status::success()
        };
        (
            Some(PostFilterResult {
                nominated_node_name: c.node.clone(),
                mode: NominatingMode::Override,
            }),
            status,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preemption::tests_support::*;
    use crate::testing::{node, pdb, pod};

    fn eligibility(pods: Vec<Pod>, preemptor: PodInfo, code: Code) -> Result<(), &'static str> {
        let snap = crate::testing::snapshot(vec![node("n1").cpu("4").obj()], pods);
        pod_eligible_to_preempt_others(&snap, &preemptor, code)
    }

    #[test]
    fn eligibility_rules() {
        let high = || pod("p").priority(100);
        type Case<'a> = (&'a str, Vec<Pod>, PodInfo, Code, Result<(), &'a str>);
        let cases: Vec<Case<'_>> = vec![
            (
                "no nomination",
                vec![],
                high().info(),
                Code::Unschedulable,
                Ok(()),
            ),
            (
                "preemptionPolicy Never",
                vec![],
                high().preemption_policy("Never").info(),
                Code::Unschedulable,
                Err(NOT_ELIGIBLE_PREEMPTION_POLICY_NEVER),
            ),
            (
                "PreemptLowerPriority is eligible",
                vec![],
                high().preemption_policy("PreemptLowerPriority").info(),
                Code::Unschedulable,
                Ok(()),
            ),
            (
                "lower-priority victim of scheduler preemption terminating on the nominated node",
                vec![pod("v").priority(1).node("n1").preempted().obj()],
                high().nominated("n1").info(),
                Code::Unschedulable,
                Err(NOT_ELIGIBLE_TERMINATING_POD),
            ),
            (
                "nominated node now UnschedulableAndUnresolvable: eligible again",
                vec![pod("v").priority(1).node("n1").preempted().obj()],
                high().nominated("n1").info(),
                Code::UnschedulableAndUnresolvable,
                Ok(()),
            ),
            (
                "terminating without the DisruptionTarget condition does not block",
                vec![pod("v").priority(1).node("n1").terminating().obj()],
                high().nominated("n1").info(),
                Code::Unschedulable,
                Ok(()),
            ),
            (
                "DisruptionTarget for another reason does not block",
                vec![
                    pod("v")
                        .priority(1)
                        .node("n1")
                        .terminating()
                        .condition("DisruptionTarget", "True", "EvictionByEvictionAPI")
                        .obj(),
                ],
                high().nominated("n1").info(),
                Code::Unschedulable,
                Ok(()),
            ),
            (
                "DisruptionTarget=False does not block",
                vec![
                    pod("v")
                        .priority(1)
                        .node("n1")
                        .terminating()
                        .condition("DisruptionTarget", "False", "PreemptionByScheduler")
                        .obj(),
                ],
                high().nominated("n1").info(),
                Code::Unschedulable,
                Ok(()),
            ),
            (
                "condition without deletionTimestamp does not block",
                vec![
                    pod("v")
                        .priority(1)
                        .node("n1")
                        .condition("DisruptionTarget", "True", "PreemptionByScheduler")
                        .obj(),
                ],
                high().nominated("n1").info(),
                Code::Unschedulable,
                Ok(()),
            ),
            (
                "a terminating pod of equal priority does not block",
                vec![pod("v").priority(100).node("n1").preempted().obj()],
                high().nominated("n1").info(),
                Code::Unschedulable,
                Ok(()),
            ),
            (
                "terminating victim on another node does not block",
                vec![pod("v").priority(1).node("n1").preempted().obj()],
                high().nominated("n2").info(),
                Code::Unschedulable,
                Ok(()),
            ),
        ];
        for (name, pods, preemptor, code, want) in cases {
            assert_eq!(eligibility(pods, preemptor, code), want, "{name}");
        }
    }

    #[test]
    fn absent_status_counts_as_unresolvable() {
        let statuses = NodeToStatus::default();
        assert_eq!(status_code(&statuses, "n1"), Code::UnschedulableAndUnresolvable);
        let statuses = NodeToStatus {
            statuses: Default::default(),
            absent: Status::unschedulable("x"),
        };
        assert_eq!(status_code(&statuses, "n1"), Code::Unschedulable);
    }

    fn victims_on(
        node_pods: Vec<Pod>,
        pdbs: Vec<k8s_openapi::api::policy::v1::PodDisruptionBudget>,
        preemptor: PodInfo,
    ) -> Result<(Vec<String>, Vec<String>, i64), Status> {
        let snap = snapshot_with(vec![node("n1").cpu("4").memory("8Gi").obj()], node_pods, pdbs);
        let fwk = framework(snap);
        let (mut state, _) = prefilter(&fwk, &preemptor);
        let mut ni = NodeInfo::clone(&fwk.snapshot().nodes()[0]);
        let pdbs = PdbIndex::from_objects(&fwk.snapshot().pod_disruption_budgets);
        let (victims, n) = select_victims_on_node(&fwk, &mut state, &preemptor, &mut ni, &pdbs, NOW)?;
        let names = victims.iter().map(|v| v.pod.name().to_string()).collect();
        let violating = victims
            .iter()
            .filter(|v| v.pdb_violation)
            .map(|v| v.pod.name().to_string())
            .collect();
        Ok((names, violating, n))
    }

    #[test]
    fn victim_selection() {
        let on = |name: &str, cpu: &str, prio: i32| pod(name).cpu(cpu).priority(prio).node("n1");
        let preemptor = || pod("p").cpu("2").priority(100).info();
        type Case<'a> = (
            &'a str,
            Vec<Pod>,
            Vec<k8s_openapi::api::policy::v1::PodDisruptionBudget>,
            Result<(Vec<&'a str>, Vec<&'a str>, i64), Status>,
        );
        let cases: Vec<Case<'_>> = vec![
            (
                "one lower-priority pod must go",
                vec![on("a", "3", 1).obj()],
                vec![],
                Ok((vec!["a"], vec![], 0)),
            ),
            (
                "lower priority is preempted, higher reprieved",
                vec![on("a", "2", 10).obj(), on("b", "2", 5).obj()],
                vec![],
                Ok((vec!["b"], vec![], 0)),
            ),
            (
                "equal priority: the later-started pod is preempted",
                vec![
                    on("old", "2", 5).start_time(100).obj(),
                    on("new", "2", 5).start_time(200).obj(),
                ],
                vec![],
                Ok((vec!["new"], vec![], 0)),
            ),
            (
                "equal priority: a pod that has not started counts as the newest",
                vec![
                    on("unstarted", "2", 5).obj(),
                    on("old", "2", 5).start_time(100).obj(),
                ],
                vec![],
                Ok((vec!["unstarted"], vec![], 0)),
            ),
            (
                "pods of higher or equal priority are never victims",
                vec![on("a", "2", 100).obj(), on("b", "2", 1).obj()],
                vec![],
                Ok((vec!["b"], vec![], 0)),
            ),
            (
                "PDB-violating pods are reprieved first, even at lower priority",
                vec![
                    on("protected", "2", 1).label("app", "db").obj(),
                    on("free", "2", 5).obj(),
                ],
                vec![pdb("db").selector("app", "db").allowed(0).obj()],
                Ok((vec!["free"], vec![], 0)),
            ),
            (
                "when only the protected pod can make room it is a violating victim",
                vec![
                    on("protected", "3", 1).label("app", "db").obj(),
                    on("small", "1", 5).obj(),
                ],
                vec![pdb("db").selector("app", "db").allowed(0).obj()],
                Ok((vec!["protected"], vec!["protected"], 1)),
            ),
            (
                "a PDB with budget left does not count as violated",
                vec![on("protected", "3", 1).label("app", "db").obj()],
                vec![pdb("db").selector("app", "db").allowed(1).obj()],
                Ok((vec!["protected"], vec![], 0)),
            ),
            (
                "no lower-priority pods",
                vec![on("a", "4", 100).obj()],
                vec![],
                Err(Status::unresolvable(NO_VICTIMS_FOUND)),
            ),
        ];
        for (name, pods, pdbs, want) in cases {
            let got = victims_on(pods, pdbs, preemptor());
            match want {
                Err(s) => assert_eq!(got.unwrap_err().reasons(), s.reasons(), "{name}"),
                Ok((names, violating, n)) => {
                    let (gn, gv, gc) = got.unwrap_or_else(|s| panic!("{name}: {s:?}"));
                    assert_eq!(gn, names, "{name}");
                    assert_eq!(gv, violating, "{name}");
                    assert_eq!(gc, n, "{name}");
                }
            }
        }
    }

    #[test]
    fn victims_are_resorted_by_importance_after_both_passes() {
        // The preemptor needs the whole node: the violating low-priority pod is tried (and fails) first,
        // but the reported order is by importance.
        let (names, violating, n) = victims_on(
            vec![
                pod("v-low")
                    .cpu("2")
                    .priority(1)
                    .label("app", "db")
                    .node("n1")
                    .obj(),
                pod("n-high").cpu("2").priority(7).node("n1").obj(),
            ],
            vec![pdb("db").selector("app", "db").allowed(0).obj()],
            pod("p").cpu("4").priority(100).info(),
        )
        .unwrap();
        assert_eq!(names, vec!["n-high", "v-low"]);
        assert_eq!(violating, vec!["v-low"]);
        assert_eq!(n, 1);
    }

    #[test]
    fn not_fitting_after_removing_all_victims_returns_the_filter_status() {
        let got = victims_on(
            vec![
                pod("big").cpu("3").priority(200).node("n1").obj(),
                pod("small").cpu("1").priority(1).node("n1").obj(),
            ],
            vec![],
            pod("p").cpu("2").priority(100).info(),
        );
        let s = got.unwrap_err();
        assert_eq!(s.code(), Code::Unschedulable);
        assert_eq!(s.reasons(), ["Insufficient cpu"]);
        assert_eq!(s.plugin(), crate::plugins::names::NODE_RESOURCES_FIT);
    }

    #[test]
    fn prefilter_extensions_see_removals_and_reprieves() {
        // The test PreFilter counts pods it was told about; the filter rejects when the count exceeds 1,
        // so exactly one of the two lower-priority pods must go, and it is the less important one.
        let snap = snapshot_with(
            vec![node("n1").cpu("8").memory("8Gi").obj()],
            vec![
                pod("a")
                    .priority(5)
                    .label(COUNTED, "")
                    .start_time(10)
                    .node("n1")
                    .obj(),
                pod("b")
                    .priority(5)
                    .label(COUNTED, "")
                    .start_time(20)
                    .node("n1")
                    .obj(),
            ],
            vec![],
        );
        let fwk = framework(snap);
        let preemptor = pod("p").priority(100).label(COUNTED, "").info();
        let (mut state, _) = prefilter(&fwk, &preemptor);
        let mut ni = NodeInfo::clone(&fwk.snapshot().nodes()[0]);
        let (victims, _) =
            select_victims_on_node(&fwk, &mut state, &preemptor, &mut ni, &PdbIndex::default(), NOW).unwrap();
        assert_eq!(
            victims.iter().map(|v| v.pod.name()).collect::<Vec<_>>(),
            vec!["b"]
        );
        assert_eq!(counted(&state), 1, "both removed, then only a added back");
    }
}
