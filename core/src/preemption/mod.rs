//! Preemption, as kube-scheduler's DefaultPreemption does it: when a pod fits on no node, find a node
//! where removing lower-priority pods (the victims) makes it fit, pick the best such node, and nominate
//! the pod there while the victims go.
//!
//! - [`evaluator`]: eligibility, potential nodes, `SelectVictimsOnNode`, the dry run over every node;
//! - [`candidate`]: victims' importance and `pickOneNodeForPreemption`'s criteria;
//! - [`pdb`]: PodDisruptionBudget accounting;
//! - [`plan`]: the chosen candidate's side effects as actions;
//! - [`pod_group`]: workload-aware preemption, the whole cluster's victims for a pod group;
//! - [`ties`]: what rests on the arbitrary order of equally important victims (other victim sets, nodes,
//!   messages).
//!
//! [`dry_run`] is the pure entry point the CLI and `explain` use; the DefaultPreemption PostFilter plugin
//! runs the same evaluator.

pub mod args;
pub mod candidate;
pub mod evaluator;
pub mod pdb;
pub mod plan;
pub mod pod_group;
#[cfg(test)]
mod release_tests;
#[cfg(test)]
pub(crate) mod tests_support;
pub mod ties;

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::action::Action;
use crate::framework::cycle_state::CycleState;
use crate::framework::fit_error::{NO_NODES_AVAILABLE_MSG, fit_error_message};
use crate::framework::interface::NodeToStatus;
use crate::framework::runtime::Framework;
use crate::framework::status::{Code, Status};
use crate::plugins::names;
use crate::preemption::args::DefaultPreemptionArgs;
use crate::preemption::candidate::{Candidate, Victim};
pub use crate::preemption::plan::VictimRemoval;
use crate::preemption::ties::{OrderTies, VictimSetView};
use crate::snapshot::PodInfo;

/// Prefix DefaultPreemption puts before every non-empty PostFilter message.
pub const MESSAGE_PREFIX: &str = "preemption: ";
/// Adds DefaultPreemption's prefix to a non-empty message, keeping the code.
pub fn with_prefix(status: Status) -> Status {
    let message = status.message();
    if message.is_empty() {
        return status;
    }
    Status::new(status.code(), format!("{MESSAGE_PREFIX}{message}"))
}

/// Options of a dry run.
#[derive(Debug, Clone, Default)]
pub struct DryRunOptions {
    /// Plan preemption on this node instead of the one kube-scheduler would pick (it must be a candidate).
    pub force_node: Option<String>,
    /// How the plan removes victims.
    pub mode: VictimRemoval,
    /// The PreFilter rejection message of the cycle, if PreFilter rejected the pod (it replaces the node
    /// histogram in the FailedScheduling message).
    pub pre_filter_message: Option<String>,
    /// "Now" for pods without `status.startTime` (default: the current time).
    pub now: Option<Timestamp>,
}

/// A victim in a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VictimView {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
    /// Priority.
    pub priority: i32,
    /// True when preempting it violates a PodDisruptionBudget.
    pub pdb_violation: bool,
    /// True when `--mode=evict` would be refused (429) for it: it violates a budget and the Eviction
    /// API applies budgets to it. The API ignores them for pods that are Pending, Succeeded, Failed or
    /// terminating ([`pdb::eviction_ignores_pdbs`]), which are evicted whatever the budget says.
    pub eviction_blocked: bool,
    /// The PodDisruptionBudgets covering it, with the disruptions they allow (to name them when an
    /// eviction is refused).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pdbs: Vec<PdbView>,
    /// `status.startTime` (RFC 3339), null when the pod has not started.
    pub start_time: Option<Time>,
    /// True when the pod is already terminating (the plan does not touch it again).
    pub terminating: bool,
    /// The devices (`driver/pool/device`) of the ResourceClaims reserved for it. kube-scheduler's
    /// preemption does not count them as freed: DynamicResources' rejections are unresolvable, so
    /// preemption never helps a pod that waits for devices; they become free once the claims are
    /// deallocated after the victim is gone.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
}

/// A PodDisruptionBudget covering a victim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PdbView {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `status.disruptionsAllowed` as last written.
    pub disruptions_allowed: i32,
}

impl std::fmt::Display for PdbView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{} (disruptionsAllowed {})",
            self.namespace, self.name, self.disruptions_allowed
        )
    }
}

/// What a report says of victims besides themselves: their devices and their budgets.
struct VictimContext {
    devices: DevicesByPod,
    pdbs: pdb::PdbIndex,
}

/// Devices of allocated claims by the UID of each pod they are reserved for.
pub type DevicesByPod = HashMap<String, Vec<String>>;

/// [`DevicesByPod`] of a snapshot.
pub fn devices_by_pod(snapshot: &crate::snapshot::Snapshot) -> DevicesByPod {
    let mut out: DevicesByPod = HashMap::new();
    for claim in snapshot.resource_claims.values() {
        let Some(status) = claim.status.as_ref() else {
            continue;
        };
        let devices: Vec<String> = status
            .allocation
            .iter()
            .flat_map(|a| a.devices.iter())
            .flat_map(|d| d.results.iter().flatten())
            .map(|r| format!("{}/{}/{}", r.driver, r.pool, r.device))
            .collect();
        if devices.is_empty() {
            continue;
        }
        for consumer in status.reserved_for.iter().flatten() {
            out.entry(consumer.uid.clone())
                .or_default()
                .extend(devices.iter().cloned());
        }
    }
    for devices in out.values_mut() {
        devices.sort();
        devices.dedup();
    }
    out
}

impl VictimView {
    fn new(v: &Victim, context: &VictimContext) -> Self {
        VictimView {
            devices: context.devices.get(v.pod.uid()).cloned().unwrap_or_default(),
            namespace: v.pod.namespace().to_string(),
            name: v.pod.name().to_string(),
            uid: v.pod.uid().to_string(),
            priority: v.pod.priority,
            pdb_violation: v.pdb_violation,
            eviction_blocked: v.pdb_violation && !pdb::eviction_ignores_pdbs(&v.pod.pod),
            pdbs: context
                .pdbs
                .covering(&v.pod)
                .map(|p| PdbView {
                    namespace: p.namespace.clone(),
                    name: p.name.clone(),
                    disruptions_allowed: p.disruptions_allowed,
                })
                .collect(),
            start_time: v
                .pod
                .pod
                .status
                .as_ref()
                .and_then(|s| s.start_time.as_ref())
                .cloned(),
            terminating: v.pod.is_terminating(),
        }
    }
}

/// A candidate node in a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CandidateView {
    /// Node name.
    pub node: String,
    /// Its victims, most important first.
    pub victims: Vec<VictimView>,
    /// How many victims violate a PDB.
    pub pdb_violations: i64,
    /// Other victim sets kube-scheduler may choose here: which of equally important pods it spares is
    /// random ([`ties`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alternative_victims: Vec<VictimSetView>,
    /// True when the search for `alternative_victims` was capped: there may be more.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub alternatives_capped: bool,
}

impl CandidateView {
    fn new(c: &Candidate, context: &VictimContext, ties: &OrderTies) -> Self {
        let (alternative_victims, alternatives_capped) = ties.views(&c.node);
        CandidateView {
            node: c.node.clone(),
            victims: c.victims.iter().map(|v| VictimView::new(v, context)).collect(),
            pdb_violations: c.num_pdb_violations,
            alternative_victims,
            alternatives_capped,
        }
    }
}

/// Why a node the dry run tried is not a candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeRejection {
    /// Status code.
    pub code: Code,
    /// The rejecting plugin, when a filter rejected.
    pub plugin: Option<String>,
    /// Reasons.
    pub reasons: Vec<String>,
}

/// The result of a preemption dry run (the `kubectl sched preempt -o json` document, minus execution).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PreemptionResult {
    /// `namespace/name` of the preemptor.
    pub pod: String,
    /// False when the pod may not preempt (`message` says why).
    pub eligible: bool,
    /// DefaultPreemption's PostFilter message, as kube-scheduler words it (`preemption: ...`).
    pub message: String,
    /// The FailedScheduling message kube-scheduler would write for this cycle (filter histogram, then the
    /// PostFilter plugins' messages: the preemption message, after DynamicResources' words in
    /// v1.34–v1.36); also the preemptor's PodScheduled condition message.
    pub failed_scheduling_message: String,
    /// The node preemption is planned on (null when none).
    pub node: Option<String>,
    /// The best candidates after every criterion; kube-scheduler picks one of them at random, `node` is
    /// the first by name.
    pub tied_nodes: Vec<String>,
    /// The criterion that singled out the best candidate, if one did.
    pub decided_by: Option<&'static str>,
    /// Every candidate kube-scheduler may pick: `tied_nodes`, and candidates that win when it spares
    /// other equally important pods ([`ties`]). Its message names the one it picks.
    pub possible_nodes: Vec<String>,
    /// The victims on `node`, most important first.
    pub victims: Vec<VictimView>,
    /// Other victim sets on `node`: kube-scheduler spares equally important pods (same priority, equal
    /// or no `status.startTime`) in an order that is not stable, so any of these may be its victims.
    pub alternative_victims: Vec<VictimSetView>,
    /// True when the search for `alternative_victims` was capped: there may be more.
    pub alternative_victims_capped: bool,
    /// Other PostFilter messages kube-scheduler may write instead of `message` (another tied node, or
    /// another victim count), at most [`ties::MAX_MESSAGES`].
    pub message_alternatives: Vec<String>,
    /// One sentence per part of the outcome that is random (starting `node:`, `victims:` or
    /// `message:`); empty when the outcome is determined.
    pub random_outcome: Vec<String>,
    /// PDB violations on `node`.
    pub pdb_violations: i64,
    /// Victims on `node` whose eviction the Eviction API would refuse (see
    /// [`VictimView::eviction_blocked`]); `--mode=evict` stops at the first.
    pub evictions_blocked: i64,
    /// Every candidate, best first.
    pub candidates: Vec<CandidateView>,
    /// Nodes in the snapshot.
    pub nodes_total: usize,
    /// Nodes whose filter status was Unschedulable (the ones preemption may help on).
    pub potential_nodes: usize,
    /// How many candidates kube-scheduler looks for before it stops its (randomly offset) dry run.
    pub kube_scheduler_would_sample: usize,
    /// True when kube-scheduler may stop before seeing the best candidate.
    pub answer_depends_on_sampling: bool,
    /// Potential nodes where preemption does not help, and why.
    pub rejected_nodes: BTreeMap<String, NodeRejection>,
    /// The preemptor's nominatedNodeName after the cycle: the node, "" when it is cleared, null when
    /// unchanged.
    pub nominated_node_name: Option<String>,
    /// Why `force_node` could not be used.
    pub force_node_error: Option<String>,
    /// Whether the profile runs DefaultPreemption at all (kube-scheduler does not preempt otherwise).
    pub profile_has_default_preemption: bool,
    /// The plan, in execution order (empty when there is nothing to do).
    pub actions: Vec<Action>,
}

/// Dry-runs preemption for `pod` after a scheduling cycle that found no feasible node: `state` is the
/// cycle's state after PreFilter and `node_statuses` its filter results.
pub fn dry_run(
    fwk: &Framework,
    pod: &PodInfo,
    node_statuses: &NodeToStatus,
    state: &CycleState,
    options: &DryRunOptions,
) -> PreemptionResult {
    let snapshot = fwk.snapshot();
    let args = DefaultPreemptionArgs::from_profile(&fwk.profile);
    let now = options
        .now
        .map_or_else(evaluator::now_nanos, |t| t.as_nanosecond());
    let eval = evaluator::evaluate(fwk, state, pod, node_statuses, &args, now);
    let ties = ties::explore(fwk, state, pod, &eval, now);

    let mut force_node_error = None;
    let chosen = match &options.force_node {
        Some(forced) if eval.eligibility.is_ok() && eval.error.is_none() => {
            let c = eval.candidate(forced);
            if c.is_none() {
                force_node_error = Some(if snapshot.node(forced).is_none() {
                    format!("node {forced:?} not found")
                } else {
                    format!(
                        "node {forced:?} is not a preemption candidate: {}",
                        eval.node_statuses.get(forced).message()
                    )
                });
            }
            c
        }
        _ => eval.chosen(),
    };
    let (result, status) = eval.post_filter(chosen);
    let status = with_prefix(status);
    let message = status.message();
    // The other PostFilter plugins speak too: DynamicResources, before DefaultPreemption, adds its
    // words to the message (v1.34–v1.36), and one that ends the run first leaves nothing to do.
    let (_, post_filter) = fwk.run_post_filter_plugins_with(
        state,
        pod,
        node_statuses,
        Some((names::DEFAULT_PREEMPTION, (result.clone(), status.clone()))),
    );
    let failed_scheduling_message = if snapshot.nodes().is_empty() {
        NO_NODES_AVAILABLE_MSG.to_string()
    } else {
        fit_error_message(
            snapshot.nodes().len(),
            node_statuses,
            options.pre_filter_message.as_deref().unwrap_or(""),
            &post_filter.message(),
        )
    };
    // A forced node that is no candidate leaves nothing to do, whatever kube-scheduler would pick.
    let chosen = if force_node_error.is_some() { None } else { chosen };
    let actions = match chosen {
        Some(c) if status.is_success() && post_filter.is_success() => plan::prepare_candidate(
            snapshot,
            pod,
            &fwk.profile_name,
            &c.node,
            &c.victims,
            plan::Execution {
                removal: options.mode,
                async_preemption: fwk.features().scheduler_async_preemption,
            },
            &failed_scheduling_message,
        ),
        _ => Vec::new(),
    };
    let context = VictimContext {
        devices: devices_by_pod(snapshot),
        pdbs: pdb::PdbIndex::from_objects(&snapshot.pod_disruption_budgets),
    };
    let victims: Vec<VictimView> = chosen
        .map(|c| c.victims.iter().map(|v| VictimView::new(v, &context)).collect())
        .unwrap_or_default();
    let planned_node = chosen.filter(|_| status.is_success()).map(|c| c.node.as_str());
    let (alternative_victims, alternative_victims_capped) =
        planned_node.map_or((Vec::new(), false), |n| ties.views(n));
    let message_alternatives = if planned_node.is_some() {
        ties.possible_messages
            .iter()
            .map(|m| format!("{MESSAGE_PREFIX}{m}"))
            .filter(|m| *m != message)
            .take(ties::MAX_MESSAGES)
            .collect()
    } else {
        Vec::new()
    };
    let random_outcome = ties.random_parts(&eval.tied, planned_node);
    PreemptionResult {
        pod: pod.key(),
        eligible: eval.eligibility.is_ok(),
        message,
        failed_scheduling_message,
        node: chosen.filter(|_| status.is_success()).map(|c| c.node.clone()),
        tied_nodes: eval.tied.clone(),
        decided_by: eval.decided_by,
        possible_nodes: ties.possible_nodes.clone(),
        evictions_blocked: victims.iter().filter(|v| v.eviction_blocked).count() as i64,
        victims,
        alternative_victims,
        alternative_victims_capped,
        message_alternatives,
        random_outcome,
        pdb_violations: chosen.map_or(0, |c| c.num_pdb_violations),
        candidates: eval
            .candidates
            .iter()
            .map(|c| CandidateView::new(c, &context, &ties))
            .collect(),
        nodes_total: eval.num_all_nodes,
        potential_nodes: eval.potential_nodes,
        kube_scheduler_would_sample: eval.num_candidates,
        answer_depends_on_sampling: eval.answer_depends_on_sampling,
        rejected_nodes: eval
            .node_statuses
            .statuses
            .iter()
            .map(|(n, s)| {
                (
                    n.clone(),
                    NodeRejection {
                        code: s.code(),
                        plugin: (!s.plugin().is_empty()).then(|| s.plugin().to_string()),
                        reasons: s.reasons().to_vec(),
                    },
                )
            })
            .collect(),
        nominated_node_name: if force_node_error.is_some() {
            None
        } else {
            result.map(|r| r.nominated_node_name)
        },
        force_node_error,
        profile_has_default_preemption: fwk
            .profile
            .post_filter
            .iter()
            .any(|p| p == names::DEFAULT_PREEMPTION),
        actions,
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::*;
    use super::*;
    use crate::schedule::{ScheduleOptions, schedule_cycle};
    use crate::testing::{node, pdb, pod};

    fn run(fwk: &Framework, preemptor: &PodInfo, options: DryRunOptions) -> PreemptionResult {
        let r = schedule_cycle(fwk, preemptor, ScheduleOptions::default());
        let options = DryRunOptions {
            now: Some(Timestamp::from_second(2_000_000_000).unwrap()),
            ..options
        };
        dry_run(fwk, preemptor, &r.node_statuses, &r.state, &options)
    }

    fn cluster() -> Framework {
        // n1: one low-priority pod, PDB-protected. n2: two low-priority pods. n3: one medium pod.
        // n4: only higher-priority pods. n5: blocked.
        let n = |name: &str| node(name).cpu("4").memory("8Gi");
        framework(snapshot_with(
            vec![
                n("n1").obj(),
                n("n2").obj(),
                n("n3").obj(),
                n("n4").obj(),
                n("n5").unschedulable().obj(),
            ],
            vec![
                pod("db").cpu("3").priority(1).label("app", "db").node("n1").obj(),
                pod("w1").cpu("2").priority(1).node("n2").obj(),
                pod("w2").cpu("2").priority(1).node("n2").obj(),
                pod("mid")
                    .cpu("3")
                    .priority(50)
                    .start_time(1_000)
                    .node("n3")
                    .obj(),
                pod("vip").cpu("3").priority(1000).node("n4").obj(),
                pod("low-nominee").priority(1).nominated("n3").obj(),
            ],
            vec![pdb("db").selector("app", "db").allowed(0).obj()],
        ))
    }

    /// The Eviction API ignores budgets for Pending, Succeeded, Failed and terminating pods
    /// (kube-apiserver's canIgnorePDB): such a victim still counts as a violation (kube-scheduler's
    /// accounting) but its eviction is not blocked; the budgets covering it are named either way.
    #[test]
    fn evictions_are_blocked_only_for_pods_the_eviction_api_guards() {
        let cases = [
            ("running", Some("Running"), false, true),
            ("no phase (as Go's empty phase)", None, false, true),
            // Succeeded and Failed pods are never victims: the snapshot leaves them out, as kube-scheduler's
            // informer does (eviction_ignores_pdbs_as_kube_apiserver_does covers them).
            ("pending", Some("Pending"), false, false),
            ("running but terminating", Some("Running"), true, false),
        ];
        for (name, phase, terminating, blocked) in cases {
            let mut victim = pod("db").cpu("3").priority(1).label("app", "db").node("n1");
            if terminating {
                victim = victim.terminating();
            }
            let mut victim = victim.obj();
            victim.status.get_or_insert_with(Default::default).phase = phase.map(str::to_string);
            let fwk = framework(snapshot_with(
                vec![node("n1").cpu("4").memory("8Gi").obj()],
                vec![victim],
                vec![pdb("db").selector("app", "db").allowed(0).obj()],
            ));
            let preemptor = pod("p").cpu("2").priority(100).info();
            let options = DryRunOptions {
                mode: VictimRemoval::Evict,
                ..DryRunOptions::default()
            };
            let r = run(&fwk, &preemptor, options);
            assert_eq!(r.node.as_deref(), Some("n1"), "{name}");
            assert_eq!(r.pdb_violations, 1, "{name}: kube-scheduler still counts it");
            assert!(r.victims[0].pdb_violation, "{name}");
            assert_eq!(r.victims[0].eviction_blocked, blocked, "{name}");
            assert_eq!(r.evictions_blocked, i64::from(blocked), "{name}");
            assert_eq!(
                r.victims[0]
                    .pdbs
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>(),
                ["default/db (disruptionsAllowed 0)"],
                "{name}"
            );
        }
    }

    /// What the plan writes in the scheduler's name names the pod's profile, as kube-scheduler's per-profile
    /// event recorders and its DisruptionTarget message do: `default-scheduler` only for pods of that
    /// profile.
    #[test]
    fn the_plan_reports_as_the_pods_profile() {
        use crate::framework::profile::SchedulerConfig;
        use crate::plugins::in_tree_registry;
        const TWO_PROFILES: &str = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
            profiles:\n- schedulerName: default-scheduler\n- schedulerName: batch-scheduler\n";
        let registry = in_tree_registry();
        let config = SchedulerConfig::from_str(TWO_PROFILES, "ksc.yaml", &registry).expect("valid");
        let engine = crate::Engine::new(registry, config, "ksc.yaml");
        let cases = [
            ("no schedulerName", None, "default-scheduler"),
            (
                "default-scheduler",
                Some("default-scheduler"),
                "default-scheduler",
            ),
            ("another profile", Some("batch-scheduler"), "batch-scheduler"),
        ];
        for (name, scheduler_name, want) in cases {
            let snap = std::sync::Arc::new(snapshot_with(
                vec![node("n1").cpu("4").memory("8Gi").obj()],
                vec![pod("v").cpu("3").priority(1).node("n1").obj()],
                vec![],
            ));
            let mut p = pod("p").cpu("2").priority(100);
            if let Some(s) = scheduler_name {
                p = p.scheduler_name(s);
            }
            let preemptor = PodInfo::new(p.obj());
            let fwk = engine.framework_for(&preemptor.pod, snap).expect("framework");
            let r = run(&fwk, &preemptor, DryRunOptions::default());
            assert_eq!(r.node.as_deref(), Some("n1"), "{name}");
            let events: Vec<&Option<String>> = r
                .actions
                .iter()
                .filter_map(|a| match a {
                    Action::Event(e) => Some(&e.reporting_controller),
                    _ => None,
                })
                .collect();
            assert_eq!(events.len(), 2, "{name}: Preempted and FailedScheduling");
            assert!(
                events.iter().all(|c| c.as_deref() == Some(want)),
                "{name}: {events:?}"
            );
            let disruption = r.actions.iter().find_map(|a| match a {
                Action::SetPodCondition { condition, .. } if condition.type_ == "DisruptionTarget" => {
                    Some(condition.message.as_str())
                }
                _ => None,
            });
            assert_eq!(
                disruption,
                Some(format!("{want}: preempting to accommodate a higher priority pod").as_str()),
                "{name}"
            );
        }
    }

    #[test]
    fn dry_run_reports_candidates_pick_and_plan() {
        let fwk = cluster();
        let preemptor = pod("p").cpu("2").priority(100).info();
        let r = run(&fwk, &preemptor, DryRunOptions::default());
        assert!(r.eligible);
        // n1 violates a PDB; n2 needs two victims of priority 1; n3 one victim of priority 50.
        // Criterion 1 removes n1; criterion 2 (lowest highest priority) prefers n2 (1 < 50).
        assert_eq!(r.node.as_deref(), Some("n2"));
        assert_eq!(r.tied_nodes, vec!["n2"]);
        assert_eq!(r.decided_by, Some(candidate::CRITERIA[1]));
        let cands: Vec<(&str, usize, i64)> = r
            .candidates
            .iter()
            .map(|c| (c.node.as_str(), c.victims.len(), c.pdb_violations))
            .collect();
        assert_eq!(cands, vec![("n2", 1, 0), ("n3", 1, 0), ("n1", 1, 1)]);
        assert_eq!(r.victims.len(), 1);
        assert_eq!(r.potential_nodes, 4);
        assert_eq!(r.kube_scheduler_would_sample, 4);
        assert!(!r.answer_depends_on_sampling);
        assert_eq!(
            r.rejected_nodes.get("n4"),
            Some(&NodeRejection {
                code: Code::UnschedulableAndUnresolvable,
                plugin: None,
                reasons: vec![evaluator::NO_VICTIMS_FOUND.into()]
            })
        );
        assert_eq!(
            r.message,
            "preemption: found a potential placement for pod on node n2, preempting 1 victims"
        );
        assert_eq!(
            r.failed_scheduling_message,
            "0/5 nodes are available: 1 node(s) were unschedulable, 4 Insufficient cpu. preemption: found a potential placement for pod on node n2, preempting 1 victims"
        );
        assert_eq!(r.nominated_node_name.as_deref(), Some("n2"));
        assert!(r.profile_has_default_preemption);
        // Both n2 pods are equal (priority 1, unstarted): the one listed later on the node goes first,
        // since equal victims keep node order and reprieve runs most important first; kube-scheduler's
        // order among them is arbitrary, so the other is reported as an alternative.
        assert_eq!(r.victims[0].name, "w2");
        assert_eq!(
            r.alternative_victims,
            vec![VictimSetView {
                victims: vec!["default/w1".into()],
                pdb_violations: 0
            }]
        );
        assert_eq!(r.possible_nodes, vec!["n2"]);
        assert!(r.message_alternatives.is_empty());
        assert_eq!(r.random_outcome.len(), 1, "{:?}", r.random_outcome);
        assert!(
            r.random_outcome[0].starts_with("victims: on n2"),
            "{:?}",
            r.random_outcome
        );
        let kinds: Vec<String> = r.actions.iter().map(Action::describe).collect();
        assert_eq!(
            kinds,
            vec![
                "set condition DisruptionTarget=True (PreemptionByScheduler) on pod default/w2",
                "delete pod default/w2",
                "event Normal Preempted on default/w2: Preempted by pod default-p on node n2",
                &format!(
                    "event Warning FailedScheduling on default/p: {}",
                    r.failed_scheduling_message
                ),
                "set nominatedNodeName=n2 on pod default/p",
                "set condition PodScheduled=False (Unschedulable) on pod default/p",
            ]
        );
        let json = serde_json::to_value(&r).unwrap();
        for key in [
            "pod",
            "eligible",
            "message",
            "node",
            "victims",
            "candidates",
            "actions",
            "tied_nodes",
            "kube_scheduler_would_sample",
        ] {
            assert!(json.get(key).is_some(), "{key}");
        }
        assert_eq!(json["victims"][0]["pdb_violation"], false);
        assert_eq!(json["candidates"][2]["victims"][0]["pdb_violation"], true);
    }

    #[test]
    fn forced_node_plans_there_and_clears_lower_nominations() {
        let fwk = cluster();
        let preemptor = pod("p").cpu("2").priority(100).info();
        let r = run(
            &fwk,
            &preemptor,
            DryRunOptions {
                force_node: Some("n3".into()),
                mode: VictimRemoval::Evict,
                ..Default::default()
            },
        );
        assert_eq!(r.node.as_deref(), Some("n3"));
        assert_eq!(
            r.tied_nodes,
            vec!["n2"],
            "kube-scheduler's own pick is still reported"
        );
        assert_eq!(
            r.victims.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(),
            vec!["mid"]
        );
        assert_eq!(
            r.actions[0].describe(),
            "clear nominatedNodeName of pod default/low-nominee"
        );
        // With the Eviction API no DisruptionTarget condition of ours comes first: the API server
        // sets its own when it admits the eviction.
        assert_eq!(r.actions[1].describe(), "evict pod default/mid");
        assert!(
            !r.actions
                .iter()
                .any(|a| a.describe().contains("DisruptionTarget")),
            "{:?}",
            r.actions.iter().map(Action::describe).collect::<Vec<_>>()
        );

        for (forced, want) in [
            (
                "n4",
                "node \"n4\" is not a preemption candidate: No preemption victims found for incoming pod",
            ),
            (
                "n5",
                "node \"n5\" is not a preemption candidate: Preemption is not helpful for scheduling",
            ),
            ("nope", "node \"nope\" not found"),
        ] {
            let r = run(
                &fwk,
                &preemptor,
                DryRunOptions {
                    force_node: Some(forced.into()),
                    ..Default::default()
                },
            );
            assert_eq!(r.force_node_error.as_deref(), Some(want));
            assert_eq!(r.node, None);
            assert!(r.actions.is_empty());
            assert_eq!(r.nominated_node_name, None);
        }
    }

    #[test]
    fn ties_are_all_reported_and_the_first_by_name_is_planned() {
        let n = |name: &str| node(name).cpu("2").memory("4Gi");
        let fwk = framework(snapshot_with(
            vec![n("b").obj(), n("a").obj(), n("c").obj()],
            vec![
                pod("x").cpu("2").priority(1).start_time(500).node("b").obj(),
                pod("y").cpu("2").priority(1).start_time(500).node("a").obj(),
                pod("z").cpu("2").priority(1).start_time(400).node("c").obj(),
            ],
            vec![],
        ));
        let r = run(
            &fwk,
            &pod("p").cpu("1").priority(10).info(),
            DryRunOptions::default(),
        );
        assert_eq!(r.tied_nodes, vec!["a", "b"]);
        assert_eq!(r.decided_by, None);
        assert_eq!(r.node.as_deref(), Some("a"));
        // kube-scheduler's message names whichever it picks.
        assert_eq!(r.possible_nodes, vec!["a", "b"]);
        assert_eq!(
            r.message_alternatives,
            vec!["preemption: found a potential placement for pod on node b, preempting 1 victims"]
        );
        assert!(r.random_outcome[0].starts_with("node: kube-scheduler picks any of a, b (they tie"));
    }

    #[test]
    fn no_candidates_clears_the_nomination() {
        // n1: removing the only lower-priority pod frees too little; n2: nothing to preempt;
        // n3: cordoned (UnschedulableAndUnresolvable, never tried).
        let n = |name: &str| node(name).cpu("4").memory("8Gi");
        let fwk = framework(snapshot_with(
            vec![n("n1").obj(), n("n2").obj(), n("n3").unschedulable().obj()],
            vec![
                pod("hi").cpu("2").priority(500).node("n1").obj(),
                pod("lo").cpu("1").priority(1).node("n1").obj(),
                pod("vip").cpu("3").priority(1000).node("n2").obj(),
            ],
            vec![],
        ));
        let preemptor = pod("p").cpu("3").priority(100).nominated("n2").info();
        let r = run(&fwk, &preemptor, DryRunOptions::default());
        assert!(r.eligible);
        assert!(r.candidates.is_empty());
        assert_eq!(r.node, None);
        assert!(r.actions.is_empty());
        assert_eq!(r.nominated_node_name.as_deref(), Some(""));
        assert_eq!(
            r.message,
            "preemption: 0/3 nodes are available: 1 Insufficient cpu, 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."
        );
        assert_eq!(
            r.failed_scheduling_message,
            "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu. preemption: 0/3 nodes are available: 1 Insufficient cpu, 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."
        );
        assert_eq!(
            r.rejected_nodes["n1"].plugin.as_deref(),
            Some(names::NODE_RESOURCES_FIT)
        );
    }

    #[test]
    fn sampling_is_reported() {
        let n = |name: String| node(&name).cpu("2").memory("4Gi").obj();
        let nodes: Vec<_> = (0..6).map(|i| n(format!("n{i}"))).collect();
        let pods: Vec<_> = (0..6)
            .map(|i| {
                pod(&format!("v{i}"))
                    .cpu("2")
                    .priority(1)
                    .node(&format!("n{i}"))
                    .obj()
            })
            .collect();
        let fwk = framework_with_args(
            snapshot_with(nodes, pods, vec![]),
            Some(serde_json::json!({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 2})),
        );
        let r = run(
            &fwk,
            &pod("p").cpu("1").priority(10).info(),
            DryRunOptions::default(),
        );
        assert_eq!(r.candidates.len(), 6);
        assert_eq!(r.kube_scheduler_would_sample, 2);
        assert!(r.answer_depends_on_sampling);
        assert_eq!(r.tied_nodes.len(), 6);
    }

    #[test]
    fn ineligible_pods_have_no_plan() {
        let fwk = cluster();
        let preemptor = pod("p").cpu("2").priority(100).preemption_policy("Never").info();
        let r = run(&fwk, &preemptor, DryRunOptions::default());
        assert!(!r.eligible);
        assert_eq!(
            r.message,
            "preemption: not eligible due to preemptionPolicy=Never."
        );
        assert!(r.candidates.is_empty() && r.actions.is_empty());
        assert_eq!(r.nominated_node_name, None);
    }

    #[test]
    fn nominated_higher_priority_pods_keep_their_room() {
        // A pending pod of higher priority nominated to n1 takes its room: filters-with-nominated-pods
        // make n1 need more victims than n2.
        let n = |name: &str| node(name).cpu("4").memory("8Gi");
        let fwk = framework(snapshot_with(
            vec![n("n1").obj(), n("n2").obj()],
            vec![
                pod("a1").cpu("2").priority(2).node("n1").obj(),
                pod("a2").cpu("2").priority(2).node("n1").obj(),
                pod("b1").cpu("2").priority(2).node("n2").obj(),
                pod("b2").cpu("2").priority(2).node("n2").obj(),
                pod("big").cpu("2").priority(500).nominated("n1").obj(),
            ],
            vec![],
        ));
        let r = run(
            &fwk,
            &pod("p").cpu("2").priority(100).info(),
            DryRunOptions::default(),
        );
        let cands: Vec<(&str, usize)> = r
            .candidates
            .iter()
            .map(|c| (c.node.as_str(), c.victims.len()))
            .collect();
        assert_eq!(cands, vec![("n2", 1), ("n1", 2)]);
        assert_eq!(r.node.as_deref(), Some("n2"));
        assert_eq!(r.decided_by, Some(candidate::CRITERIA[2]));
    }
}

#[cfg(test)]
mod devices_tests {
    use super::*;
    use crate::snapshot::{ClusterObjects, Snapshot};

    #[test]
    fn devices_are_attributed_to_every_pod_their_claim_is_reserved_for() {
        let claim = |name: &str, devices: &[&str], consumers: &[&str]| {
            let results: Vec<_> = devices
                .iter()
                .map(|d| serde_json::json!({"request": "r", "driver": "gpu", "pool": "n1", "device": d}))
                .collect();
            let reserved: Vec<_> = consumers
                .iter()
                .map(|uid| serde_json::json!({"resource": "pods", "name": uid, "uid": uid}))
                .collect();
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {},
                "status": {"allocation": {"devices": {"results": results}}, "reservedFor": reserved},
            }))
            .unwrap()
        };
        let snapshot = Snapshot::new(ClusterObjects {
            resource_claims: vec![
                claim("a", &["g1", "g0"], &["pod-1"]),
                claim("shared", &["g2"], &["pod-1", "pod-2"]),
                claim("unreserved", &["g3"], &[]),
            ],
            ..Default::default()
        });
        let by_pod = devices_by_pod(&snapshot);
        assert_eq!(by_pod["pod-1"], ["gpu/n1/g0", "gpu/n1/g1", "gpu/n1/g2"]);
        assert_eq!(by_pod["pod-2"], ["gpu/n1/g2"]);
        assert_eq!(by_pod.len(), 2);
    }
}
