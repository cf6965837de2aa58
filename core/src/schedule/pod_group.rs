//! The pod group cycle (`schedule_one_podgroup.go`, `podGroupSchedulingDefaultAlgorithm`) as it
//! decides one gang pod: kube-scheduler takes the group's unscheduled pods together, places them
//! one after the other (each assumed before the next is tried), and asks GangScheduling's
//! PlacementFeasible after each whether `minCount` can still be reached. When it cannot, or the
//! pods run out before it is, no pod of the group is bound: a pod that fit is rejected with the
//! group's message, a pod that did not fit with its own cycle's.
//!
//! The words on each pod follow `submitPodGroupAlgorithmResult`: a pod that fit, in a group that
//! cannot be placed, gets `errPodGroupUnschedulable` ("pod group is unschedulable") before the
//! group's reasons and DefaultPreemption's PodGroupPostFilter answer ("pod group preemption: …");
//! a pod the cycle never reached gets the group's reasons alone; when PlacementFeasible refuses
//! before any pod is tried, every pod gets the prefix and the reasons, without PostFilter's part.
//!
//! Modelled here: one PodGroup with the gang policy; topology placements (TopologyAware-
//! WorkloadScheduling, alpha) are [`super::placement`], trees of groups (CompositePodGroup, alpha)
//! [`super::composite`]. The group's
//! preemption (PodGroupPostFilter) is [`crate::preemption::pod_group`], run by
//! [`super::pod_group_preemption`] with this cycle as the group's scheduling function.

use std::sync::Arc;

use super::{CycleResult, ScheduleOptions, placement, pod_cycle};
use crate::explain::Outcome;
use crate::framework::cycle_state::CycleState;
use crate::framework::fit_error::fit_error_message;
use crate::framework::runtime::Framework;
use crate::framework::status::{Code, Status};
use crate::plugins::gang_scheduling::{PlacementProgress, gang_of, placement_feasible};
use crate::plugins::names;
use crate::preemption::pod_group::GroupPreemption;
use crate::snapshot::PodInfo;
use crate::snapshot::pod_groups::pod_group_name;

/// `errPodGroupUnschedulable`: what kube-scheduler puts before the group's reasons on a pod the
/// group holds back.
pub const ERR_POD_GROUP_UNSCHEDULABLE: &str = "pod group is unschedulable";
pub use crate::preemption::pod_group::{NO_POD_GROUP_PREEMPTION_VICTIMS, POD_GROUP_PREEMPTION_PREFIX};

/// What the pod group cycle decides for the pod asked about, when it overrides the pod's own
/// cycle.
#[derive(Debug)]
pub enum GroupVerdict {
    /// The group cannot be placed: the pod is rejected with this status (Unschedulable, the
    /// PlacementFeasible message), whether it fit on its own or was never tried.
    Rejected(Status),
    /// The pod itself did not fit once the group's pods before it were placed: its cycle then.
    PodFailed(Box<CycleResult>),
    /// The group fits in a placement (TopologyAwareWorkloadScheduling): the pod's cycle there.
    InPlacement(Box<CycleResult>),
}

/// Whether `fwk` runs the pod group cycle at all: GenericWorkload on and GangScheduling in the
/// profile.
pub fn runs_pod_group_cycle(fwk: &Framework) -> bool {
    fwk.features().generic_workload && fwk.profile.permit.iter().any(|n| n == names::GANG_SCHEDULING)
}

/// Whether the pod group cycle applies to `pod` under `fwk`: it runs the cycle, and the pod is in
/// a PodGroup with the gang policy.
pub fn gang_min_count(fwk: &Framework, pod: &PodInfo) -> Option<i32> {
    if !runs_pod_group_cycle(fwk) {
        return None;
    }
    gang_of(fwk.snapshot(), pod).map(|(_, min_count)| min_count)
}

/// The group's queued pods: its pending pods without scheduling gates, `asked` (a pod explained,
/// which may come from a file) as given in place of its namesake, in queue order.
pub(super) fn queued_members(
    fwk: &Framework,
    namespace: &str,
    group: &str,
    asked: Option<&PodInfo>,
) -> Vec<Arc<PodInfo>> {
    let counts = fwk.snapshot().pod_group_counts(namespace, group);
    let mut queued: Vec<Arc<PodInfo>> = counts
        .pending
        .into_iter()
        .filter(|p| asked.is_none_or(|a| p.name() != a.name()) && !has_scheduling_gates(p))
        .collect();
    if let Some(asked) = asked {
        queued.push(Arc::new(asked.clone()));
    }
    queued.sort_by(|a, b| {
        if fwk.queue_sort_less(a, b) {
            std::cmp::Ordering::Less
        } else if fwk.queue_sort_less(b, a) {
            std::cmp::Ordering::Greater
        } else {
            a.name().cmp(b.name())
        }
    });
    queued
}

/// What the cycle did with one queued pod of the group.
#[derive(Debug)]
pub struct MemberRun {
    /// The pod.
    pub pod: Arc<PodInfo>,
    /// The node the cycle placed (assumed) it on; `None` when it did not fit.
    pub placed_on: Option<String>,
    /// For a pod that did not fit: its cycle once the group's pods before it were placed, with the
    /// message kube-scheduler writes for it (no PostFilter part: the group cycle runs none per pod).
    pub failure: Option<Box<CycleResult>>,
    /// For a pod placed: the state of its cycle (what the group's preemption filters it with).
    pub state: Option<CycleState>,
}

/// How a run over the group's members ended.
#[derive(Debug)]
pub(super) enum Stop {
    /// Every member was tried, or PlacementFeasible stopped the cycle.
    Finished,
    /// The pod asked about did not fit: its own cycle is its answer.
    AskedFailed(Box<CycleResult>),
    /// A pod's cycle failed with an error, or a placement could not be assumed.
    Error(String),
}

/// One pass of the pod group cycle over `queued`: each pod placed (assumed) before the next is
/// tried, PlacementFeasible asked after each.
pub(super) struct Run {
    pub(super) members: Vec<MemberRun>,
    /// PlacementFeasible's last answer.
    pub(super) status: Status,
    /// PlacementFeasible refused before any pod was tried.
    refused_before_start: bool,
    pub(super) stop: Stop,
    /// The snapshot with every placement assumed.
    pub(super) placed: Arc<crate::snapshot::Snapshot>,
    /// The snapshot the first pod that did not fit was tried on.
    pub(super) first_failure_on: Option<Arc<crate::snapshot::Snapshot>>,
}

impl Run {
    /// Where the cycle stopped, for the words it writes.
    pub(super) fn stop_point(&self) -> GroupStop {
        if self.refused_before_start {
            GroupStop::BeforeAnyPod
        } else {
            GroupStop::AfterTrying
        }
    }
}

pub(super) fn run_members(
    fwk: &Framework,
    min_count: i32,
    scheduled: usize,
    queued: &[Arc<PodInfo>],
    options: ScheduleOptions,
    asked: Option<&str>,
) -> Run {
    let mut progress = PlacementProgress {
        remaining: queued.len(),
        scheduled,
    };
    let mut run = Run {
        members: Vec::new(),
        status: placement_feasible(min_count, progress),
        refused_before_start: false,
        stop: Stop::Finished,
        placed: fwk.snapshot().clone(),
        first_failure_on: None,
    };
    if run.status.code() == Code::Unschedulable {
        run.refused_before_start = true;
        return run;
    }
    let mut current: Option<Framework> = None;
    for member in queued {
        let member_fwk = current.as_ref().unwrap_or(fwk);
        let cycle = pod_cycle(member_fwk, member, options);
        progress.remaining -= 1;
        match cycle.explanation.outcome {
            Outcome::Scheduled => {
                progress.scheduled += 1;
                let node = cycle.explanation.selected.first().cloned().unwrap_or_default();
                let mut placed = (*member.pod).clone();
                if let Some(spec) = placed.spec.as_mut() {
                    spec.node_name = Some(node.clone());
                }
                let mut next = (**member_fwk.snapshot()).clone();
                let placed = PodInfo::with_features(Arc::new(placed), member_fwk.features());
                if let Err(e) = next.assume_pod(Arc::new(placed)) {
                    run.stop = Stop::Error(e.to_string());
                    return run;
                }
                match member_fwk.on_snapshot(Arc::new(next)) {
                    Ok(next_fwk) => {
                        run.placed = next_fwk.snapshot().clone();
                        current = Some(next_fwk);
                    }
                    Err(e) => {
                        run.stop = Stop::Error(e.to_string());
                        return run;
                    }
                }
                run.members.push(MemberRun {
                    pod: member.clone(),
                    placed_on: Some(node),
                    failure: None,
                    state: Some(cycle.state),
                });
            }
            Outcome::Error => {
                run.stop = Stop::Error(cycle.explanation.message);
                return run;
            }
            Outcome::Unschedulable | Outcome::Gated => {
                // The pod's own failure is what kube-scheduler reports for it, whatever the group;
                // the group cycle runs no PostFilter per pod, so its message has no "preemption:".
                let failure = Box::new(without_post_filter(cycle));
                if asked == Some(member.name()) {
                    run.stop = Stop::AskedFailed(failure);
                    return run;
                }
                if run.first_failure_on.is_none() {
                    run.first_failure_on = Some(member_fwk.snapshot().clone());
                }
                run.members.push(MemberRun {
                    pod: member.clone(),
                    placed_on: None,
                    failure: Some(failure),
                    state: None,
                });
            }
        }
        run.status = placement_feasible(min_count, progress);
        if run.status.code() == Code::Unschedulable {
            break;
        }
    }
    run
}

/// Runs the group's cycle for `pod`; `None` when it does not apply or lets the pod's own
/// verdict stand (the whole group fits, or an internal error the pod's cycle reports anyway).
pub(super) fn group_verdict(
    fwk: &Framework,
    pod: &PodInfo,
    options: ScheduleOptions,
) -> Option<GroupVerdict> {
    // A PodGroup under a CompositePodGroup is scheduled with its whole tree.
    if let Some(verdict) = super::composite::tree_verdict(fwk, pod, options) {
        return Some(verdict);
    }
    let min_count = gang_min_count(fwk, pod)?;
    let group = pod_group_name(&pod.pod)?;
    let scheduled = fwk.snapshot().pod_group_counts(pod.namespace(), group).scheduled;
    let queued = queued_members(fwk, pod.namespace(), group, Some(pod));
    if placement::tries_placements(fwk) {
        let cycle = placement::run_placements(
            fwk,
            pod.namespace(),
            group,
            min_count,
            scheduled,
            &queued,
            options,
        );
        return Some(placement::placement_verdict(
            fwk, pod, group, &queued, cycle, options,
        ));
    }
    let run = run_members(fwk, min_count, scheduled, &queued, options, Some(pod.name()));
    match run.stop {
        Stop::Error(_) => return None,
        Stop::AskedFailed(cycle) => return Some(GroupVerdict::PodFailed(cycle)),
        Stop::Finished => {}
    }
    if run.status.code() == Code::Success {
        return None;
    }
    let asked_tried = run.members.iter().any(|m| m.pod.name() == pod.name());
    let words = GroupWords::of(fwk, pod, group, &queued, run.stop_point(), run.status);
    let message = if asked_tried {
        words.pod_that_fit
    } else {
        words.pod_not_reached
    };
    Some(GroupVerdict::Rejected(Status::unschedulable(&message)))
}

/// Where the pod group cycle stopped when the group could not be placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupStop {
    /// PlacementFeasible refused before any pod was tried.
    BeforeAnyPod,
    /// After trying pods: PlacementFeasible refused, or the pods ran out short of `minCount`.
    AfterTrying,
}

/// What kube-scheduler writes when a pod group cannot be placed (`podGroupCycle` then
/// `submitPodGroupAlgorithmResult`), from PlacementFeasible's last status.
#[derive(Debug, Clone)]
pub struct GroupWords {
    /// On a pod that fit on its own: the error, the reasons and PodGroupPostFilter's answer
    /// (refused before any pod was tried: the error and the reasons; the group waiting on its
    /// preemption: the reasons and the answer, without the error).
    pub pod_that_fit: String,
    /// On a pod the cycle did not reach: the reasons as they were when it stopped (refused before
    /// any pod was tried: as on a pod that fit).
    pub pod_not_reached: String,
    /// The PodGroup's `PodGroupInitiallyScheduled` condition: the group's status with
    /// PodGroupPostFilter's answer appended.
    pub group: String,
    /// What DefaultPreemption's PodGroupPostFilter decided (`None` when it is not in the profile).
    pub preemption: Option<Box<GroupPreemption>>,
}

impl GroupWords {
    /// The words for the group of `pod` (`group`, its queued pods `queued`) stopped at `stop`
    /// with PlacementFeasible's `status`.
    pub fn of(
        fwk: &Framework,
        pod: &PodInfo,
        group: &str,
        queued: &[Arc<PodInfo>],
        stop: GroupStop,
        status: Status,
    ) -> GroupWords {
        let reasons = status.into_reasons();
        let with_error = || {
            let mut with_error = vec![ERR_POD_GROUP_UNSCHEDULABLE.to_owned()];
            with_error.extend(reasons.iter().cloned());
            with_error
        };
        // The group's status: refused up front it carries the error; stopped later, only the
        // reasons. PostFilter's answer is appended to it, and a pod that fit gets the error and
        // that status.
        let mut group_reasons = match stop {
            GroupStop::BeforeAnyPod => with_error(),
            GroupStop::AfterTrying => reasons.clone(),
        };
        let answer = super::pod_group_preemption::group_post_filter(fwk, pod.namespace(), group, queued);
        group_reasons.push(answer.status.message());
        // A group waiting on its preemption: the pods that fit get the group's status as it is.
        let waiting_on_preemption = answer.status.is_success();
        let pod_that_fit = match stop {
            GroupStop::BeforeAnyPod => with_error().join(", "),
            GroupStop::AfterTrying if waiting_on_preemption => group_reasons.join(", "),
            GroupStop::AfterTrying => {
                let mut fit = vec![ERR_POD_GROUP_UNSCHEDULABLE.to_owned()];
                fit.extend(group_reasons.iter().cloned());
                fit.join(", ")
            }
        };
        let pod_not_reached = match stop {
            GroupStop::BeforeAnyPod => pod_that_fit.clone(),
            GroupStop::AfterTrying => reasons.join(", "),
        };
        GroupWords {
            pod_that_fit,
            pod_not_reached,
            group: group_reasons.join(", "),
            preemption: answer.preemption.map(Box::new),
        }
    }
}

/// The pod group cycle over a whole group, as kube-scheduler runs it when it takes the group's
/// queued pods together: what it did with each pod, and the words it writes.
#[derive(Debug)]
pub struct GroupCycle {
    /// The gang policy's `minCount`.
    pub min_count: i32,
    /// Pods of the group already bound before the cycle.
    pub scheduled_before: usize,
    /// The group's queued pods (pending, without scheduling gates), in queue order.
    pub queued: Vec<Arc<PodInfo>>,
    /// Each pod the cycle tried, in order (pods after the point where PlacementFeasible stopped it
    /// are not there).
    pub members: Vec<MemberRun>,
    /// Scheduled when the whole group can be placed (the pods that fit are bound), Unschedulable
    /// when no pod of it is bound, Error when a pod's cycle failed.
    pub outcome: Outcome,
    /// What kube-scheduler writes on a pod of the group that fit, when the group cannot be placed
    /// (`"pod group is unschedulable, minCount (3) cannot be satisfied: …"`); the error for Error;
    /// empty when the group fits.
    pub message: String,
    /// What it writes on a pod the cycle did not reach (the group's reasons alone).
    pub unreached_message: String,
    /// The cluster with every placement of the cycle assumed.
    pub placed: Arc<crate::snapshot::Snapshot>,
    /// The cluster as the first pod that did not fit saw it (its group's pods before it placed).
    pub first_failure_on: Option<Arc<crate::snapshot::Snapshot>>,
    /// When the group cannot be placed: what its PodGroupPostFilter (workload-aware preemption)
    /// decided — the victims and nominations, or why there are none.
    pub preemption: Option<Box<GroupPreemption>>,
    /// The placements tried (TopologyAwareWorkloadScheduling on); `members` are then the chosen
    /// placement's, or the first one's when none fits.
    pub placements: Option<placement::PlacementCycle>,
}

impl GroupCycle {
    /// How many pods the cycle placed, one after another, before it stopped.
    pub fn placed_count(&self) -> usize {
        self.members.iter().filter(|m| m.placed_on.is_some()).count()
    }
}

/// Runs the pod group cycle for the PodGroup `namespace/group`; `None` when the cycle does not
/// apply (GenericWorkload off, no GangScheduling in the profile, no such PodGroup, or not the gang
/// policy).
pub fn pod_group_cycle(
    fwk: &Framework,
    namespace: &str,
    group: &str,
    options: ScheduleOptions,
) -> Option<GroupCycle> {
    if !runs_pod_group_cycle(fwk) {
        return None;
    }
    let snapshot = fwk.snapshot();
    let pod_group = snapshot.pod_group(namespace, group)?;
    let min_count = crate::snapshot::pod_groups::gang_min_count(pod_group)?;
    let scheduled_before = snapshot.pod_group_counts(namespace, group).scheduled;
    let queued = queued_members(fwk, namespace, group, None);
    if placement::tries_placements(fwk) {
        return Some(placement::group_cycle_over_placements(
            fwk,
            namespace,
            group,
            min_count,
            scheduled_before,
            queued,
            options,
        ));
    }
    let run = run_members(fwk, min_count, scheduled_before, &queued, options, None);
    let mut preemption = None;
    let (outcome, message, unreached_message) = match &run.stop {
        Stop::Error(message) => (Outcome::Error, message.clone(), String::new()),
        _ if run.status.code() == Code::Success => (Outcome::Scheduled, String::new(), String::new()),
        _ => match queued.first() {
            Some(first) => {
                let words = GroupWords::of(fwk, first, group, &queued, run.stop_point(), run.status.clone());
                preemption = words.preemption;
                (Outcome::Unschedulable, words.pod_that_fit, words.pod_not_reached)
            }
            // No queued pod: PlacementFeasible refused up front, and no PostFilter runs.
            None => {
                let mut reasons = vec![ERR_POD_GROUP_UNSCHEDULABLE.to_owned()];
                reasons.extend(run.status.reasons().iter().cloned());
                let message = reasons.join(", ");
                (Outcome::Unschedulable, message.clone(), message)
            }
        },
    };
    Some(GroupCycle {
        min_count,
        scheduled_before,
        queued,
        members: run.members,
        outcome,
        message,
        unreached_message,
        placed: run.placed,
        first_failure_on: run.first_failure_on,
        preemption,
        placements: None,
    })
}

/// A failed cycle as the pod group cycle reports it: the FailedScheduling message without the
/// PostFilter part (`podGroupPodSchedulingAlgorithm` runs no PostFilter).
pub fn without_post_filter(mut cycle: CycleResult) -> CycleResult {
    let explanation = &mut cycle.explanation;
    if explanation.outcome == Outcome::Unschedulable && explanation.post_filter.take().is_some() {
        explanation.message = fit_error_message(
            explanation.nodes_total,
            &cycle.node_statuses,
            explanation.pre_filter_message.as_deref().unwrap_or(""),
            "",
        );
    }
    cycle
}

/// True when the pod waits behind scheduling gates (it is not queued).
pub fn has_scheduling_gates(pod: &PodInfo) -> bool {
    pod.pod
        .spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| !g.is_empty())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::explain::{Explanation, Outcome};
    use crate::features::FeatureGates;
    use crate::framework::profile::SchedulerConfig;
    use crate::framework::runtime::Framework;
    use crate::plugins::in_tree_registry_with;
    use crate::snapshot::{ClusterObjects, Snapshot};
    use crate::testing::{gang, node, pod};

    /// v1.37.1's gates, with GenericWorkload on when `gang_on`.
    fn gates(gang_on: bool) -> FeatureGates {
        let v1_37 = FeatureGates::v1_37();
        if gang_on {
            v1_37.with_overrides("GenericWorkload=true").expect("gate")
        } else {
            v1_37
        }
    }

    /// Explains `asked` (a pod of `objects`, by name) with the default profile of those gates.
    fn explain(gang_on: bool, objects: &ClusterObjects, asked: &str) -> Explanation {
        let features = gates(gang_on);
        let registry = in_tree_registry_with(features);
        let config = SchedulerConfig::default_config(&registry);
        let profile = config.profile("default-scheduler").expect("default profile");
        let snapshot = Arc::new(Snapshot::with_features(objects.clone(), features));
        let fwk = Framework::new(profile, &registry, snapshot).expect("framework");
        crate::testing::explain_named(&fwk, objects, asked)
    }

    /// One 4-cpu node, PodGroup `pg` (gang, `min_count`) and `members` pending pods of it asking
    /// `cpu` each.
    fn cluster(min_count: i32, members: &[&str], cpu: &str, with_group: bool) -> ClusterObjects {
        ClusterObjects {
            nodes: vec![node("n1").cpu("4").memory("8Gi").pods("110").obj()],
            pods: members
                .iter()
                .map(|name| pod(name).pod_group("pg").cpu(cpu).obj())
                .collect(),
            pod_groups: if with_group {
                vec![gang("pg", min_count).obj()]
            } else {
                vec![]
            },
            ..Default::default()
        }
    }

    /// `objects` with the pod `name`'s `preemptionPolicy: Never`.
    fn with_preemption_policy_never(mut objects: ClusterObjects, name: &str) -> ClusterObjects {
        for p in &mut objects.pods {
            if p.metadata.name.as_deref() == Some(name) {
                p.spec.get_or_insert_default().preemption_policy = Some("Never".into());
            }
        }
        objects
    }

    /// `objects` with a pod of priority -1 (below the group's 0) running on a second node.
    fn with_running_pod(mut objects: ClusterObjects) -> ClusterObjects {
        objects
            .nodes
            .push(node("n2").cpu("1").memory("1Gi").pods("110").obj());
        objects.pods.push(pod("low").priority(-1).node("n2").obj());
        objects
    }

    /// `objects` with the pod `name` behind a scheduling gate.
    fn with_gated(mut objects: ClusterObjects, name: &str) -> ClusterObjects {
        for p in &mut objects.pods {
            if p.metadata.name.as_deref() == Some(name) {
                p.spec.get_or_insert_default().scheduling_gates =
                    Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
                        name: "hold".into(),
                    }]);
            }
        }
        objects
    }

    /// With the gates on, a gang pod is held where kube-scheduler holds it, with its words; with
    /// them off (v1.37's default) every pod is scheduled on its own, as before.
    #[test]
    fn gang_pods_are_held_or_rejected_with_upstream_words() {
        // (case, cluster, pod asked about, outcome with the gates on, message)
        let cases = [
            (
                "quorum not reached: 2 of minCount 3 exist",
                cluster(3, &["a", "b"], "1", true),
                "a",
                Outcome::Gated,
                "waiting for minCount pods from a gang to appear in scheduling queue",
            ),
            (
                "the PodGroup does not exist",
                cluster(2, &["a", "b"], "1", false),
                "b",
                Outcome::Gated,
                "waiting for pods's pod group \"pg\" to appear in scheduling queue",
            ),
            (
                "minCount above capacity: a pod that fits alone",
                cluster(3, &["a", "b", "c"], "2", true),
                "a",
                Outcome::Unschedulable,
                "pod group is unschedulable, minCount (3) cannot be satisfied: 2 scheduled, 0 \
                 remaining, pod group preemption: No preemption victims found for incoming preemptor",
            ),
            (
                "minCount above capacity, a pod of the group may not preempt",
                with_preemption_policy_never(cluster(3, &["a", "b", "c"], "2", true), "c"),
                "a",
                Outcome::Unschedulable,
                "pod group is unschedulable, minCount (3) cannot be satisfied: 2 scheduled, 0 \
                 remaining, deallocation and deletion of ResourceClaims completed, pod group \
                 preemption: not eligible due to preemptionPolicy=Never.",
            ),
            (
                "a lower-priority pod runs but preempting it does not help: the cycle's words again",
                with_running_pod(cluster(3, &["a", "b", "c"], "2", true)),
                "a",
                Outcome::Unschedulable,
                "pod group is unschedulable, minCount (3) cannot be satisfied: 2 scheduled, 0 \
                 remaining, deallocation and deletion of ResourceClaims completed, pod group \
                 preemption: minCount (3) cannot be satisfied: 2 scheduled, 0 remaining",
            ),
            (
                "a gated member leaves fewer queued pods than minCount: refused before any is tried",
                with_gated(cluster(3, &["a", "b", "c"], "1", true), "c"),
                "a",
                Outcome::Unschedulable,
                "pod group is unschedulable, minCount (3) cannot be satisfied: 0 scheduled, 2 remaining",
            ),
            (
                "minCount above capacity: the pod that does not fit once the others are placed",
                cluster(3, &["a", "b", "c"], "2", true),
                "c",
                Outcome::Unschedulable,
                "0/1 nodes are available: 1 Insufficient cpu.",
            ),
            (
                "the whole gang fits",
                cluster(2, &["a", "b"], "2", true),
                "b",
                Outcome::Scheduled,
                "",
            ),
        ];
        for (case, objects, asked, outcome, message) in cases {
            let on = explain(true, &objects, asked);
            assert_eq!((on.outcome, on.message.as_str()), (outcome, message), "{case}");
            if outcome != Outcome::Scheduled {
                assert!(on.selected.is_empty(), "{case}: nothing selected");
            }
            let off = explain(false, &objects, asked);
            assert_eq!(off.outcome, Outcome::Scheduled, "{case}: gates off");
        }
    }

    /// Pods already bound count as scheduled: a gang whose other members run needs only the
    /// pending one to fit.
    #[test]
    fn bound_members_count_towards_min_count() {
        let mut objects = cluster(3, &["c"], "2", true);
        objects
            .nodes
            .push(node("n2").cpu("4").memory("8Gi").pods("110").obj());
        for name in ["a", "b"] {
            objects
                .pods
                .push(pod(name).pod_group("pg").cpu("2").node("n2").obj());
        }
        let e = explain(true, &objects, "c");
        assert_eq!((e.outcome, e.message.as_str()), (Outcome::Scheduled, ""));
    }
}
