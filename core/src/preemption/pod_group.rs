//! Workload-aware preemption: what DefaultPreemption's PodGroupPostFilter does when a pod group
//! cycle finds no placement for the whole group (`framework/preemption/podgrouppreemption.go`,
//! `PodGroupEvaluator.Preempt`, with `types.go`'s domain and victims and `util.go`'s ordering).
//!
//! Unlike a single pod's preemption, which dry-runs every node and picks one, the group's domain is
//! the whole cluster ("cluster-domain"): every pod of lower priority than the group goes at once,
//! the group's own cycle runs again on what is left (the caller's [`GroupScheduling`], so this
//! layer stays below the scheduling cycle), and then victims are reprieved one by one, most
//! important first (PDB-violating ones before the others), while every placement the cycle proposed
//! still passes the filters. The victims left are preempted; each pod of the group placed by that
//! cycle is nominated to its node.
//!
//! A victim is a pod, or — when its PodGroup's `disruptionMode` is `All` — every bound pod of that
//! group together. A pod of a PodGroup weighs as its group's priority. Gates: the whole path needs
//! GenericWorkload (the caller checks it); `PodGroupPreemptionPolicy` (alpha) only changes where the
//! group's preemption policy is read from (the PodGroup's `spec.preemptionPolicy` instead of its
//! pods'); the victims for a CompositePodGroup tree (alpha) are not searched here (see
//! [`crate::schedule::composite::tree_post_filter`]).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::scheduling::v1beta1::PodGroup;

use crate::framework::cycle_state::CycleState;
use crate::framework::interface::FrameworkHandle;
use crate::framework::status::{Code, Status};
use crate::preemption::candidate::start_time_nanos;
use crate::preemption::evaluator::{NOT_ELIGIBLE_PREEMPTION_POLICY_NEVER, pod_terminating_by_preemption};
use crate::preemption::pdb::{BudgetCharging, PdbIndex, split_units_by_violation};
use crate::snapshot::pod_groups::pod_group_name;
use crate::snapshot::{NodeInfo, PodInfo, Snapshot};

/// What DefaultPreemption's PodGroupPostFilter puts before its answer.
pub const POD_GROUP_PREEMPTION_PREFIX: &str = "pod group preemption: ";
/// No running pod has a lower priority than the group.
pub const NO_POD_GROUP_PREEMPTION_VICTIMS: &str = "No preemption victims found for incoming preemptor";
/// A pod of the group is nominated to a node where a lower-priority pod is still terminating after an
/// earlier preemption: the group waits for it instead of preempting more.
pub const ONGOING_PREEMPTION: &str = "ongoing preemption on nominated nodes";
/// The name of the group's candidate: its domain is the whole cluster.
pub const CLUSTER_CANDIDATE: &str = "cluster";
/// `fwk.PodGroupKeyType`: how the executor names a pod group preemptor in its messages.
pub const POD_GROUP_PREEMPTOR_TYPE: &str = "podgroup";

/// The Success message of a group preemption that found a placement.
pub fn found_group_placement_message(num_victims: usize) -> String {
    format!("found a placement for podgroup, preempting {num_victims} victims")
}

/// The pod group asking to preempt (`podGroupPreemptor`).
#[derive(Debug, Clone)]
pub struct GroupPreemptor {
    /// The PodGroup.
    pub group: Arc<PodGroup>,
    /// Its unscheduled (queued) pods.
    pub members: Vec<Arc<PodInfo>>,
    /// `util.PodGroupPriority`: `spec.priority`, 0 when unset.
    pub priority: i32,
    /// `resolvePreemptionPolicy`: true for `Never`.
    pub never: bool,
}

impl GroupPreemptor {
    /// The preemptor for `group` with its unscheduled `members`, its policy resolved as the release's
    /// `PodGroupPreemptionPolicy` gate says: on, the PodGroup's `spec.preemptionPolicy` (unset:
    /// PreemptLowerPriority); off, Never when any member says Never.
    pub fn new(group: Arc<PodGroup>, members: Vec<Arc<PodInfo>>, pod_group_preemption_policy: bool) -> Self {
        let never = if pod_group_preemption_policy {
            group.spec.preemption_policy.as_deref() == Some("Never")
        } else {
            members
                .iter()
                .any(|p| p.pod.spec.as_ref().and_then(|s| s.preemption_policy.as_deref()) == Some("Never"))
        };
        GroupPreemptor {
            priority: group.spec.priority.unwrap_or(0),
            group,
            members,
            never,
        }
    }
}

/// One placement the group's cycle proposed (`fwk.ProposedAssignment`): the pod, its node and the
/// cycle state its filters read.
#[derive(Debug, Clone)]
pub struct ProposedAssignment {
    /// The pod of the group.
    pub pod: Arc<PodInfo>,
    /// The node the cycle placed it on.
    pub node: String,
    /// The state of its cycle (PreFilter's data, with the group's pods before it assumed).
    pub state: CycleState,
}

/// What the group's cycle answered on a cluster (`fwk.PodGroupSchedulingFunc`'s result).
#[derive(Debug, Clone)]
pub struct GroupAttempt {
    /// Success when the whole group can be placed; Unschedulable with PlacementFeasible's reasons
    /// otherwise; Error for an internal error.
    pub status: Status,
    /// The placements of the pods that fit, in the cycle's order.
    pub assignments: Vec<ProposedAssignment>,
}

/// The group's own cycle, run on a snapshot (the cluster with the potential victims removed).
pub type GroupScheduling<'a> = dyn Fn(Arc<Snapshot>) -> GroupAttempt + 'a;

/// What kind of preemption unit a victim is (`fwk.EntityKeyType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VictimKind {
    /// A pod on its own.
    Pod,
    /// A pod of a PodGroup (`NewPodVictim` types it so), or all bound pods of a PodGroup whose
    /// `disruptionMode` is `All`.
    #[serde(rename = "podgroup")]
    PodGroup,
}

impl VictimKind {
    /// `victimRank`: groups outrank pods.
    fn rank(self) -> u8 {
        match self {
            VictimKind::Pod => 1,
            VictimKind::PodGroup => 2,
        }
    }
}

/// A preemption unit (`DomainVictim`).
#[derive(Debug, Clone)]
pub struct GroupVictim {
    /// Its pods (one, or every bound pod of a PodGroup with `disruptionMode: All`).
    pub pods: Vec<Arc<PodInfo>>,
    /// `GetPodPriority`: its PodGroup's priority, or the pod's own.
    pub priority: i32,
    /// Pod or pod group.
    pub kind: VictimKind,
    /// `namespace/name` of the PodGroup whose pods go together (`disruptionMode: All`).
    pub whole_group: Option<String>,
    /// The earliest start of its pods (now for a pod that has not started).
    pub earliest_start_nanos: i128,
    /// How many of its pods violate a PodDisruptionBudget when preempted.
    pub pdb_violations: usize,
}

impl GroupVictim {
    /// True for a pod group unit (`IsGroup`): what `numPodGroupDisruptions` counts.
    pub fn is_group(&self) -> bool {
        self.kind == VictimKind::PodGroup
    }
}

/// `MoreImportantVictim` as an ordering, most important first: priority, then groups before pods,
/// then more pods, then the earlier start. Upstream sorts with an unstable sort; a stable sort keeps
/// equally important victims in the cluster's order.
pub fn group_importance_order(a: &GroupVictim, b: &GroupVictim) -> std::cmp::Ordering {
    b.priority
        .cmp(&a.priority)
        .then(b.kind.rank().cmp(&a.kind.rank()))
        .then(b.pods.len().cmp(&a.pods.len()))
        .then(a.earliest_start_nanos.cmp(&b.earliest_start_nanos))
}

/// How the group's preemption ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GroupPreemptionOutcome {
    /// The group may not preempt (preemptionPolicy Never).
    NotEligible,
    /// A pod of the group is nominated where an earlier preemption's victim still terminates.
    Ongoing,
    /// No running pod has a lower priority than the group.
    NoVictims,
    /// Even with every lower-priority pod gone the group does not fit.
    DoesNotHelp,
    /// Preempting the victims places the group: its pods are nominated.
    Found,
    /// An internal error.
    Error,
}

/// What `PodGroupEvaluator.Preempt` decides, with DefaultPreemption's prefix on its message.
#[derive(Debug, Clone)]
pub struct GroupPreemption {
    /// How it ended.
    pub outcome: GroupPreemptionOutcome,
    /// PodGroupPostFilter's status: its message is what kube-scheduler appends to the group's.
    pub status: Status,
    /// The victims to preempt, most important first (outcome Found).
    pub victims: Vec<GroupVictim>,
    /// How many of their pods violate a PodDisruptionBudget.
    pub num_pdb_violations: usize,
    /// How many victims are pod groups (`numPodGroupDisruptions`).
    pub num_pod_group_disruptions: usize,
    /// `(pod name, node)`: where each pod of the group is nominated (Found: the cycle's placements;
    /// Ongoing: the nominations it already has).
    pub nominations: Vec<(String, String)>,
}

impl GroupPreemption {
    fn ended(outcome: GroupPreemptionOutcome, status: Status) -> Self {
        GroupPreemption {
            outcome,
            status: with_group_prefix(status),
            victims: Vec::new(),
            num_pdb_violations: 0,
            num_pod_group_disruptions: 0,
            nominations: Vec::new(),
        }
    }

    /// The victims' pods, most important victim first.
    pub fn victim_pods(&self) -> impl Iterator<Item = &Arc<PodInfo>> {
        self.victims.iter().flat_map(|v| v.pods.iter())
    }
}

/// PodGroupPostFilter's prefix on a non-empty message, keeping the code.
pub fn with_group_prefix(status: Status) -> Status {
    let message = status.message();
    if message.is_empty() {
        return status;
    }
    Status::new(status.code(), format!("{POD_GROUP_PREEMPTION_PREFIX}{message}"))
}

/// `GetPodPriority` without composite groups: a pod of an existing PodGroup weighs as its group.
pub fn effective_priority(snapshot: &Snapshot, pod: &PodInfo) -> i32 {
    pod_group_name(&pod.pod)
        .and_then(|name| snapshot.pod_group(pod.namespace(), name))
        .map_or(pod.priority, |group| group.spec.priority.unwrap_or(0))
}

/// `newDomainForWorkloadPreemption`'s victims: every pod of the cluster, those of a PodGroup with
/// `disruptionMode: All` gathered into one victim, in the cluster's node order.
pub fn cluster_victims(snapshot: &Snapshot, now_nanos: i128) -> Vec<GroupVictim> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut victims = Vec::new();
    for node in snapshot.nodes() {
        for pod in &node.pods {
            let group = pod_group_name(&pod.pod)
                .and_then(|name| snapshot.pod_group(pod.namespace(), name).map(|g| (name, g)));
            let all = group.filter(|(_, g)| g.spec.disruption_mode.as_ref().is_some_and(|m| m.all.is_some()));
            let victim = match all {
                Some((name, _)) => {
                    let key = format!("podgroup:{}/{name}", pod.namespace());
                    if !seen.insert(key) {
                        continue;
                    }
                    let mut pods: Vec<Arc<PodInfo>> = snapshot
                        .nodes()
                        .iter()
                        .flat_map(|n| n.pods.iter())
                        .filter(|p| p.namespace() == pod.namespace() && pod_group_name(&p.pod) == Some(name))
                        .cloned()
                        .collect();
                    pods.sort_by(|a, b| a.name().cmp(b.name()));
                    unit(
                        snapshot,
                        pods,
                        VictimKind::PodGroup,
                        Some(format!("{}/{name}", pod.namespace())),
                        now_nanos,
                    )
                }
                None => {
                    if !seen.insert(format!("pod:{}", pod.key())) {
                        continue;
                    }
                    // NewPodVictim types a pod naming a PodGroup as a group unit, whether the group
                    // exists or not.
                    let kind = if pod_group_name(&pod.pod).is_some() {
                        VictimKind::PodGroup
                    } else {
                        VictimKind::Pod
                    };
                    unit(snapshot, vec![pod.clone()], kind, None, now_nanos)
                }
            };
            victims.push(victim);
        }
    }
    victims
}

fn unit(
    snapshot: &Snapshot,
    pods: Vec<Arc<PodInfo>>,
    kind: VictimKind,
    whole_group: Option<String>,
    now_nanos: i128,
) -> GroupVictim {
    let earliest_start_nanos = pods
        .iter()
        .map(|p| start_time_nanos(p, now_nanos))
        .min()
        .unwrap_or(now_nanos);
    GroupVictim {
        priority: pods.first().map_or(0, |p| effective_priority(snapshot, p)),
        pods,
        kind,
        whole_group,
        earliest_start_nanos,
        pdb_violations: 0,
    }
}

/// `isOngoingPreemption`: a pod of the group is nominated to a node where a pod of lower priority is
/// terminating because kube-scheduler preempted it.
fn ongoing_preemption(snapshot: &Snapshot, preemptor: &GroupPreemptor) -> bool {
    let nominated: HashSet<&str> = preemptor
        .members
        .iter()
        .map(|p| p.nominated_node_name())
        .filter(|n| !n.is_empty())
        .collect();
    nominated
        .into_iter()
        .filter_map(|n| snapshot.node(n))
        .any(|node| {
            node.pods.iter().any(|p| {
                effective_priority(snapshot, p) < preemptor.priority && pod_terminating_by_preemption(&p.pod)
            })
        })
}

/// `PodGroupEvaluator.Preempt` for `preemptor` on `fwk`'s cluster: eligibility, the ongoing
/// preemption check, the victim search with `schedule` as the group's cycle. `now_nanos` stands for
/// the start of pods that have not started.
pub fn preempt(
    fwk: &dyn FrameworkHandle,
    preemptor: &GroupPreemptor,
    schedule: &GroupScheduling<'_>,
    now_nanos: i128,
) -> GroupPreemption {
    let snapshot = fwk.snapshot();
    if preemptor.never {
        return GroupPreemption::ended(
            GroupPreemptionOutcome::NotEligible,
            Status::unschedulable(NOT_ELIGIBLE_PREEMPTION_POLICY_NEVER),
        );
    }
    if ongoing_preemption(snapshot, preemptor) {
        let mut ongoing = GroupPreemption::ended(
            GroupPreemptionOutcome::Ongoing,
            Status::new(Code::Success, ONGOING_PREEMPTION),
        );
        ongoing.nominations = preemptor
            .members
            .iter()
            .map(|p| (p.name().to_string(), p.nominated_node_name().to_string()))
            .collect();
        return ongoing;
    }
    match select_victims(fwk, preemptor, schedule, now_nanos) {
        Ok(found) => found,
        Err((outcome, status)) => GroupPreemption::ended(outcome, status),
    }
}

/// The victims' pods put back on (`add`) or taken off their nodes in `nodes`, with every proposed
/// assignment's PreFilter extensions told.
fn move_victim(
    fwk: &dyn FrameworkHandle,
    nodes: &mut HashMap<String, NodeInfo>,
    assignments: &mut [ProposedAssignment],
    victim: &GroupVictim,
    add: bool,
) -> Result<(), Status> {
    for pod in &victim.pods {
        let Some(node) = nodes.get_mut(pod.node_name()) else {
            continue;
        };
        if add {
            node.add_pod(pod.clone());
        } else {
            node.remove_pod(pod);
        }
        for a in assignments.iter_mut() {
            let s = if add {
                fwk.run_pre_filter_extension_add_pod(&mut a.state, &a.pod, pod, node)
            } else {
                fwk.run_pre_filter_extension_remove_pod(&mut a.state, &a.pod, pod, node)
            };
            if !s.is_success() {
                return Err(Status::error(s.message()));
            }
        }
    }
    Ok(())
}

/// `reprieveVictim`: puts the victim back and checks every proposed placement still passes the
/// filters, each with the group's pods before it assumed; takes it off again when one does not.
fn reprieve(
    fwk: &dyn FrameworkHandle,
    nodes: &mut HashMap<String, NodeInfo>,
    assignments: &mut [ProposedAssignment],
    victim: &GroupVictim,
) -> Result<bool, Status> {
    move_victim(fwk, nodes, assignments, victim, true)?;
    let mut assumed: Vec<(String, Arc<PodInfo>)> = Vec::new();
    let mut fits = true;
    for a in assignments.iter() {
        let Some(node) = nodes.get_mut(&a.node) else {
            fits = false;
            break;
        };
        if !fwk
            .run_filter_plugins_with_nominated_pods(&a.state, &a.pod, node)
            .is_success()
        {
            fits = false;
            break;
        }
        let mut placed = (*a.pod.pod).clone();
        placed.spec.get_or_insert_default().node_name = Some(a.node.clone());
        let placed = Arc::new(PodInfo::with_features(Arc::new(placed), fwk.features()));
        node.add_pod(placed.clone());
        assumed.push((a.node.clone(), placed));
    }
    for (node, pod) in assumed.iter().rev() {
        if let Some(node) = nodes.get_mut(node) {
            node.remove_pod(pod);
        }
    }
    if !fits {
        move_victim(fwk, nodes, assignments, victim, false)?;
    }
    Ok(fits)
}

type Ended = (GroupPreemptionOutcome, Status);

/// `selectVictimsOnDomain`.
fn select_victims(
    fwk: &dyn FrameworkHandle,
    preemptor: &GroupPreemptor,
    schedule: &GroupScheduling<'_>,
    now_nanos: i128,
) -> Result<GroupPreemption, Ended> {
    let snapshot = fwk.snapshot();
    let mut potential: Vec<GroupVictim> = cluster_victims(snapshot, now_nanos)
        .into_iter()
        .filter(|v| v.priority < preemptor.priority)
        .collect();
    if potential.is_empty() {
        return Err((
            GroupPreemptionOutcome::NoVictims,
            Status::unresolvable(NO_POD_GROUP_PREEMPTION_VICTIMS),
        ));
    }
    let mut without = Snapshot::clone(snapshot);
    for pod in potential.iter().flat_map(|v| v.pods.iter()) {
        without.remove_pod(pod.namespace(), pod.name());
    }
    let without = Arc::new(without);
    let attempt = schedule(without.clone());
    match attempt.status.code() {
        Code::Success => {}
        Code::Error => return Err((GroupPreemptionOutcome::Error, attempt.status)),
        _ => return Err((GroupPreemptionOutcome::DoesNotHelp, attempt.status)),
    }
    let mut assignments = attempt.assignments;
    let mut nodes: HashMap<String, NodeInfo> = without
        .nodes()
        .iter()
        .map(|n| (n.name().to_string(), NodeInfo::clone(n)))
        .collect();
    potential.sort_by(group_importance_order);
    let pdbs = PdbIndex::from_objects(&snapshot.pod_disruption_budgets);
    let (violating, non_violating) = split_units_by_violation(
        potential,
        |v: &GroupVictim| v.pods.iter().map(|p| &**p).collect(),
        &pdbs,
        BudgetCharging::UntilFirstViolation,
    );
    let error = |s: Status| (GroupPreemptionOutcome::Error, s);
    let mut victims = Vec::new();
    let mut num_pdb_violations = 0;
    for (mut v, count) in violating {
        if !reprieve(fwk, &mut nodes, &mut assignments, &v).map_err(error)? {
            v.pdb_violations = count;
            num_pdb_violations += count;
            victims.push(v);
        }
    }
    for v in non_violating {
        if !reprieve(fwk, &mut nodes, &mut assignments, &v).map_err(error)? {
            victims.push(v);
        }
    }
    victims.sort_by(group_importance_order);
    let num_victim_pods = victims.iter().map(|v| v.pods.len()).sum();
    Ok(GroupPreemption {
        outcome: GroupPreemptionOutcome::Found,
        status: with_group_prefix(Status::new(
            Code::Success,
            found_group_placement_message(num_victim_pods),
        )),
        num_pod_group_disruptions: victims.iter().filter(|v| v.is_group()).count(),
        num_pdb_violations,
        victims,
        nominations: assignments
            .iter()
            .map(|a| (a.pod.name().to_string(), a.node.clone()))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::explain::Outcome;
    use crate::features::FeatureGates;
    use crate::framework::profile::SchedulerConfig;
    use crate::framework::runtime::Framework;
    use crate::plugins::in_tree_registry_with;
    use crate::schedule::ScheduleOptions;
    use crate::schedule::pod_group::{GroupCycle, pod_group_cycle};
    use crate::snapshot::ClusterObjects;
    use crate::testing::{PodGroupBuilder, gang, node, pdb, pod};

    /// The group cycle of `pg` with GenericWorkload on (and PodGroupPreemptionPolicy when `policy_gate`).
    fn cycle(objects: &ClusterObjects, policy_gate: bool) -> GroupCycle {
        let overrides = if policy_gate {
            "GenericWorkload=true,PodGroupPreemptionPolicy=true"
        } else {
            "GenericWorkload=true"
        };
        let features = FeatureGates::v1_37().with_overrides(overrides).expect("gates");
        let registry = in_tree_registry_with(features);
        let config = SchedulerConfig::default_config(&registry);
        let profile = config.profile("default-scheduler").expect("default profile");
        let snapshot = Arc::new(Snapshot::with_features(objects.clone(), features));
        let fwk = Framework::new(profile, &registry, snapshot).expect("framework");
        pod_group_cycle(&fwk, "default", "pg", ScheduleOptions::default()).expect("a gang")
    }

    /// Nodes `n1`, `n2` of 4 cpus; the gang `pg` (priority 100) of `members` pods asking `cpu` each;
    /// `running` pods already bound; `groups` other PodGroups.
    fn cluster(
        group: PodGroupBuilder,
        members: &[&str],
        cpu: &str,
        running: Vec<k8s_openapi::api::core::v1::Pod>,
        groups: Vec<PodGroupBuilder>,
    ) -> ClusterObjects {
        let mut pods: Vec<_> = members
            .iter()
            .map(|name| pod(name).pod_group("pg").priority(100).cpu(cpu).obj())
            .collect();
        pods.extend(running);
        ClusterObjects {
            nodes: vec![
                node("n1").cpu("4").memory("8Gi").pods("110").obj(),
                node("n2").cpu("4").memory("8Gi").pods("110").obj(),
            ],
            pods,
            pod_groups: std::iter::once(group.priority(100))
                .chain(groups)
                .map(PodGroupBuilder::obj)
                .collect(),
            ..Default::default()
        }
    }

    fn names(p: &GroupPreemption) -> Vec<&str> {
        let mut v: Vec<&str> = p.victim_pods().map(|p| p.name()).collect();
        v.sort_unstable();
        v
    }

    /// PodGroupEvaluator.Preempt's answers, each with the victims it chooses and the words kube-scheduler
    /// appends to the group's status.
    #[test]
    fn the_group_preempts_what_its_placement_needs() {
        let low = |name: &str, n: &str, prio: i32, cpu: &str| pod(name).priority(prio).cpu(cpu).node(n);
        // (case, cluster, PodGroupPreemptionPolicy on, outcome, victims, message)
        let cases = [
            (
                "both nodes are needed: one lower-priority pod goes from each",
                cluster(
                    gang("pg", 2),
                    &["a", "b"],
                    "3",
                    vec![low("l1", "n1", 0, "2").obj(), low("l2", "n2", 0, "2").obj()],
                    vec![],
                ),
                false,
                GroupPreemptionOutcome::Found,
                vec!["l1", "l2"],
                "pod group preemption: found a placement for podgroup, preempting 2 victims",
            ),
            (
                "the more important victim is reprieved once the group fits without it",
                cluster(
                    gang("pg", 1),
                    &["a"],
                    "3",
                    vec![
                        low("keep", "n1", 50, "1").obj(),
                        low("go", "n1", 10, "1").obj(),
                        low("big", "n2", 60, "3").obj(),
                    ],
                    vec![],
                ),
                false,
                GroupPreemptionOutcome::Found,
                vec!["go"],
                "pod group preemption: found a placement for podgroup, preempting 1 victims",
            ),
            (
                "equal priorities: the older pod is reprieved",
                cluster(
                    gang("pg", 1),
                    &["a"],
                    "3",
                    vec![
                        low("old", "n1", 0, "1").start_time(100).obj(),
                        low("young", "n1", 0, "1").start_time(200).obj(),
                        low("big", "n2", 60, "3").obj(),
                    ],
                    vec![],
                ),
                false,
                GroupPreemptionOutcome::Found,
                vec!["young"],
                "pod group preemption: found a placement for podgroup, preempting 1 victims",
            ),
            (
                "a victim a budget protects is reprieved first, whatever its age",
                {
                    let mut c = cluster(
                        gang("pg", 1),
                        &["a"],
                        "3",
                        vec![
                            low("old", "n1", 0, "1").start_time(100).obj(),
                            low("young", "n1", 0, "1")
                                .start_time(200)
                                .label("app", "db")
                                .obj(),
                            low("big", "n2", 60, "3").obj(),
                        ],
                        vec![],
                    );
                    c.pod_disruption_budgets = vec![pdb("db").selector("app", "db").obj()];
                    c
                },
                false,
                GroupPreemptionOutcome::Found,
                vec!["old"],
                "pod group preemption: found a placement for podgroup, preempting 1 victims",
            ),
            (
                "disruptionMode All: the victim group's pods go together, from both nodes",
                cluster(
                    gang("pg", 1),
                    &["a"],
                    "3",
                    vec![
                        low("w1", "n1", 0, "2").pod_group("low").obj(),
                        low("w2", "n2", 0, "2").pod_group("low").obj(),
                    ],
                    vec![gang("low", 2).priority(0).disruption_all()],
                ),
                false,
                GroupPreemptionOutcome::Found,
                vec!["w1", "w2"],
                "pod group preemption: found a placement for podgroup, preempting 2 victims",
            ),
            (
                "disruptionMode Single: only the pod on the group's node goes",
                cluster(
                    gang("pg", 1),
                    &["a"],
                    "3",
                    vec![
                        low("w1", "n1", 0, "2").pod_group("low").obj(),
                        low("w2", "n2", 0, "3").pod_group("low").obj(),
                    ],
                    vec![gang("low", 2).priority(0)],
                ),
                false,
                GroupPreemptionOutcome::Found,
                vec!["w1"],
                "pod group preemption: found a placement for podgroup, preempting 1 victims",
            ),
            (
                "a pod weighs as its PodGroup: a high-priority group's pod of priority 0 is no victim",
                cluster(
                    gang("pg", 2),
                    &["a", "b"],
                    "3",
                    vec![
                        low("w1", "n1", 0, "2").pod_group("high").obj(),
                        low("w2", "n2", 0, "2").pod_group("high").obj(),
                    ],
                    vec![gang("high", 2).priority(1000)],
                ),
                false,
                GroupPreemptionOutcome::NoVictims,
                vec![],
                "pod group preemption: No preemption victims found for incoming preemptor",
            ),
            (
                "removing every lower-priority pod does not make room: the cycle's reasons",
                cluster(
                    gang("pg", 3),
                    &["a", "b", "c"],
                    "3",
                    vec![low("l1", "n1", 0, "1").obj()],
                    vec![],
                ),
                false,
                GroupPreemptionOutcome::DoesNotHelp,
                vec![],
                "pod group preemption: minCount (3) cannot be satisfied: 2 scheduled, 0 remaining",
            ),
            (
                "a member says Never (PodGroupPreemptionPolicy off): not eligible",
                {
                    let mut c = cluster(
                        gang("pg", 2),
                        &["a", "b"],
                        "3",
                        vec![low("l1", "n1", 0, "2").obj(), low("l2", "n2", 0, "2").obj()],
                        vec![],
                    );
                    c.pods[1].spec.get_or_insert_default().preemption_policy = Some("Never".into());
                    c
                },
                false,
                GroupPreemptionOutcome::NotEligible,
                vec![],
                "pod group preemption: not eligible due to preemptionPolicy=Never.",
            ),
            (
                "the PodGroup says Never (PodGroupPreemptionPolicy on): not eligible",
                cluster(
                    gang("pg", 2).preemption_policy("Never"),
                    &["a", "b"],
                    "3",
                    vec![low("l1", "n1", 0, "2").obj(), low("l2", "n2", 0, "2").obj()],
                    vec![],
                ),
                true,
                GroupPreemptionOutcome::NotEligible,
                vec![],
                "pod group preemption: not eligible due to preemptionPolicy=Never.",
            ),
            (
                "the PodGroup says Never but the gate is off: its pods decide",
                cluster(
                    gang("pg", 2).preemption_policy("Never"),
                    &["a", "b"],
                    "3",
                    vec![low("l1", "n1", 0, "2").obj(), low("l2", "n2", 0, "2").obj()],
                    vec![],
                ),
                false,
                GroupPreemptionOutcome::Found,
                vec!["l1", "l2"],
                "pod group preemption: found a placement for podgroup, preempting 2 victims",
            ),
            (
                "a member's nominated node still has a victim terminating: the group waits",
                {
                    let mut c = cluster(
                        gang("pg", 2),
                        &["a", "b"],
                        "3",
                        vec![
                            low("l1", "n1", 0, "2").preempted().obj(),
                            low("l2", "n2", 0, "2").obj(),
                        ],
                        vec![],
                    );
                    c.pods[0].status.get_or_insert_default().nominated_node_name = Some("n1".into());
                    c
                },
                false,
                GroupPreemptionOutcome::Ongoing,
                vec![],
                "pod group preemption: ongoing preemption on nominated nodes",
            ),
        ];
        for (case, objects, policy_gate, outcome, victims, message) in cases {
            let cycle = cycle(&objects, policy_gate);
            assert_eq!(cycle.outcome, Outcome::Unschedulable, "{case}");
            let preemption = cycle.preemption.as_deref().expect("PodGroupPostFilter ran");
            assert_eq!(preemption.outcome, outcome, "{case}");
            assert_eq!(names(preemption), victims, "{case}");
            assert_eq!(preemption.status.message(), message, "{case}");
            assert!(
                cycle.message.ends_with(&format!(", {message}")),
                "{case}: the group's words end with PodGroupPostFilter's: {}",
                cycle.message
            );
        }
    }

    /// Every pod the cycle placed is nominated to its node, each node taking what its victims freed.
    #[test]
    fn the_group_is_nominated_where_its_cycle_placed_it() {
        let objects = cluster(
            gang("pg", 2),
            &["a", "b"],
            "3",
            vec![
                pod("l1").priority(0).cpu("2").node("n1").obj(),
                pod("l2").priority(0).cpu("2").node("n2").obj(),
            ],
            vec![],
        );
        let cycle = cycle(&objects, false);
        let preemption = cycle.preemption.expect("PodGroupPostFilter ran");
        let mut nominated: Vec<&str> = preemption.nominations.iter().map(|(_, n)| n.as_str()).collect();
        nominated.sort_unstable();
        assert_eq!(nominated, ["n1", "n2"]);
        let pods: Vec<&str> = preemption.nominations.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(pods, ["a", "b"]);
        assert_eq!(
            cycle.message,
            // Waiting on its preemption, the group's status is written as it is: no error before it.
            "minCount (2) cannot be satisfied: 0 scheduled, 1 remaining, \
             pod group preemption: found a placement for podgroup, preempting 2 victims"
        );
    }

    /// Importance: priority, then groups before pods, then bigger groups, then the earlier start.
    #[test]
    fn importance_ranks_groups_by_size_and_pods_by_age() {
        let v = |kind, n: usize, prio, start| GroupVictim {
            pods: (0..n)
                .map(|i| Arc::new(PodInfo::new(pod(&format!("p{i}")).obj())))
                .collect(),
            priority: prio,
            kind,
            whole_group: None,
            earliest_start_nanos: start,
            pdb_violations: 0,
        };
        let mut victims = [
            v(VictimKind::Pod, 1, 0, 5),
            v(VictimKind::Pod, 1, 0, 1),
            v(VictimKind::PodGroup, 2, 0, 9),
            v(VictimKind::PodGroup, 3, 0, 9),
            v(VictimKind::Pod, 1, 5, 9),
        ];
        victims.sort_by(group_importance_order);
        let order: Vec<(i32, VictimKind, usize, i128)> = victims
            .iter()
            .map(|v| (v.priority, v.kind, v.pods.len(), v.earliest_start_nanos))
            .collect();
        assert_eq!(
            order,
            [
                (5, VictimKind::Pod, 1, 9),
                (0, VictimKind::PodGroup, 3, 9),
                (0, VictimKind::PodGroup, 2, 9),
                (0, VictimKind::Pod, 1, 1),
                (0, VictimKind::Pod, 1, 5),
            ]
        );
    }
}
