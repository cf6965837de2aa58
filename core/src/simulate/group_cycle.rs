//! The pod group cycle in a simulation (`schedule_one_podgroup.go`): when the queue gives a pod of
//! a gang (GenericWorkload on, a PodGroup with the gang policy, GangScheduling in the profile),
//! every queued pod of its group is taken with it and the group is placed in one go — each pod's own
//! cycle on the snapshot with the group's pods before it assumed, PlacementFeasible asked after
//! each — and bound only when `minCount` is reached. Otherwise the snapshot is put back as it was,
//! no pod of the group is bound, and each pod gets kube-scheduler's words
//! ([`crate::schedule::pod_group::GroupWords`]): a pod that fit, the group's; a pod that did not,
//! its own cycle's (without a PostFilter part: the group cycle runs none per pod).
//!
//! Pods held at PreEnqueue (the group short of its quorum, a missing PodGroup, scheduling gates)
//! never reach the cycle; the simulation reports them Gated with PreEnqueue's words as the note.
//! Permit's wait ("waiting for minCount pods from a gang to be scheduled") does not arise: the
//! cycle assumes the group's pods before any reaches Permit, so a group that reaches `minCount`
//! passes it and one that does not is rejected before it.
//!
//! A group that cannot be placed runs its PodGroupPostFilter (workload-aware preemption,
//! [`super::group_preemption`]): its victims are deleted after the cycle and its pods, nominated,
//! are placed by a later cycle. Not modelled: basic-policy PodGroups, whose pods are scheduled one
//! by one.
//!
//! A PodGroup under a CompositePodGroup (alpha, gate on) is decided with its whole tree
//! ([`crate::schedule::composite`]): when the tree does not fit, no pod of the group is bound and
//! each gets the tree's words; when it fits, the group is placed as above, one group of the tree
//! at a time as the queue pops them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;

use super::hints::{ClusterEvent, HintInputs};
use super::placement::GroupPlacement;
use super::simulation::{
    Landing, PodOutcome, Simulation, SimulationError, hint_inputs, placed_on, rejecting_plugins,
};
use crate::engine::EngineError;
use crate::engine::Framework;
use crate::explain::Outcome;
use crate::framework::status::Code;
use crate::plugins::dynamic_resources::allocation_results;
use crate::plugins::gang_scheduling::{PlacementProgress, placement_feasible};
use crate::schedule::composite::{TreeCycle, schedules_trees, tree_cycle};
use crate::schedule::pod_group::{GroupStop, GroupVerdict, GroupWords, gang_min_count, without_post_filter};
use crate::schedule::{ScheduleOptions, binding_plan, pod_cycle};
use crate::snapshot::PodInfo;
use crate::snapshot::pod_group_tree::root_of;
use crate::snapshot::pod_groups::pod_group_name;

/// How a pod group fared in the simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub enum GroupOutcome {
    /// Its cycle reached `minCount`: its pods that fit are bound.
    Scheduled,
    /// Its cycle could not place it whole: no pod bound.
    Unschedulable,
    /// Held before the queue: short of its quorum, or its PodGroup does not exist.
    Waiting,
}

/// One pod group's result: `simulate`'s answer per group.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupResult {
    /// `namespace/name` of the PodGroup.
    pub group: String,
    /// The gang policy's `minCount`; `None` when the PodGroup does not exist or has another policy.
    pub min_count: Option<i32>,
    /// The outcome.
    pub outcome: GroupOutcome,
    /// Pods of the batch placed.
    pub placed: usize,
    /// Pods of the batch in the group.
    pub total: usize,
    /// Pods of the group already running before the batch.
    pub running_before: usize,
    /// Where its pods were placed: node → pods.
    pub nodes: BTreeMap<String, usize>,
    /// Kube-scheduler's words: the PodGroup's condition message for a group it could not place,
    /// PreEnqueue's for a group held back.
    pub message: Option<String>,
}

/// `validatePodGroup`: the group's queued pods must share their schedulerName and have the
/// PodGroup's priority; their preemptionPolicy must be the PodGroup's (`group_policy`, with
/// PodGroupPreemptionPolicy on) or, with the gate off, the first pod's. kube-scheduler's error
/// otherwise.
fn invalid_group(queued: &[Arc<PodInfo>], group_priority: i32, group_policy: Option<&str>) -> Option<String> {
    let scheduler_name = |p: &PodInfo| {
        p.pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.clone())
            .unwrap_or_default()
    };
    let preemption_policy = |p: &PodInfo| {
        p.pod
            .spec
            .as_ref()
            .and_then(|s| s.preemption_policy.clone())
            .unwrap_or_else(|| PREEMPT_LOWER_PRIORITY.to_owned())
    };
    let first = queued.first()?;
    let (name, policy) = (scheduler_name(first), preemption_policy(first));
    queued.iter().find_map(|pod| {
        if scheduler_name(pod) != name {
            return Some(format!(
                "all pods in a single pod group should have the same .spec.schedulerName set, got: {:?} and {name:?}",
                scheduler_name(pod)
            ));
        }
        if pod.priority != group_priority {
            return Some(format!(
                "all pods in a single pod group should have the same priority as the pod group's priority, got {} and {group_priority}",
                pod.priority
            ));
        }
        if let Some(group_policy) = group_policy {
            return (preemption_policy(pod) != group_policy).then(|| {
                format!(
                    "all pods in a single pod group should have the same preemption policy as the pod group's \
                     preemption policy, got {} and {group_policy}",
                    preemption_policy(pod)
                )
            });
        }
        (preemption_policy(pod) != policy).then(|| {
            format!(
                "all pods in a single pod group should have the same preemption policy, got {} and {policy}",
                preemption_policy(pod)
            )
        })
    })
}

/// The preemption policy a pod or group has when it sets none.
const PREEMPT_LOWER_PRIORITY: &str = "PreemptLowerPriority";

/// What one pod of the group came to in the group's cycle.
enum Tried {
    /// Fit on `node`: what its binding would set in motion, and how many nodes tied.
    Placed {
        node: String,
        tied: usize,
        events: Vec<ClusterEvent>,
    },
    /// Did not fit: its own cycle's message, and what its requeueing needs.
    Failed {
        message: String,
        plugins: BTreeSet<&'static str>,
        inputs: HintInputs,
    },
    /// An internal error, or Reserve/PreBind refused.
    Error(String),
}

impl Simulation<'_> {
    /// The group `pod` (popped) is scheduled with, when the pod group cycle applies to it.
    pub(super) fn gang_group_of(&self, pod: &PodInfo) -> Option<String> {
        self.queue.group_of(&pod.key()).map(str::to_owned)
    }

    /// The pod group cycle for `first` and every queued pod of `group`: returns the outcome of the
    /// group's pods (Scheduled when the group was bound) and how many were placed.
    pub(super) fn attempt_group(
        &mut self,
        first: Arc<PodInfo>,
        group: &str,
    ) -> Result<(PodOutcome, usize), SimulationError> {
        let mut members = vec![first.clone()];
        members.extend(self.queue.take_group(group));
        let fwk = match self.engine.framework_for(&first.pod, self.snapshot.clone()) {
            Ok(fwk) => fwk,
            Err(EngineError::UnknownProfile(_)) => return self.attempt_one_by_one(members),
            Err(e) => return Err(e.into()),
        };
        let Some(min_count) = gang_min_count(&fwk, &first) else {
            drop(fwk);
            return self.attempt_one_by_one(members);
        };
        // PreEnqueue per pod: a held pod is not part of the group's entity.
        let mut queued = Vec::new();
        for member in members {
            let gate = fwk.run_pre_enqueue_plugins(&member);
            if gate.is_success() {
                queued.push(member);
            } else {
                self.record_gated(&member, gate.message());
            }
        }
        if queued.is_empty() {
            return Ok((PodOutcome::Gated, 0));
        }
        // QueuedPodInfos' order (PodGroupMemberPodsOrderingFunc): priority, attempts, queue time,
        // name.
        let attempts = |p: &PodInfo| self.results.get(&p.key()).map_or(0, |r| r.attempts);
        let created = |p: &PodInfo| p.pod.metadata.creation_timestamp.as_ref().map(|t| t.0);
        queued.sort_by(|a, b| {
            b.priority
                .cmp(&a.priority)
                .then_with(|| attempts(b).cmp(&attempts(a)))
                .then_with(|| created(a).cmp(&created(b)))
                .then_with(|| a.name().cmp(b.name()))
        });
        let group_name = pod_group_name(&first.pod).unwrap_or_default().to_owned();
        let counts = self.snapshot.pod_group_counts(first.namespace(), &group_name);
        let pod_group = self.snapshot.pod_group(first.namespace(), &group_name);
        let group_priority = pod_group.and_then(|g| g.spec.priority).unwrap_or(0);
        // `podGroupPreemptionPolicy`: the PodGroup's, PreemptLowerPriority when unset.
        let group_policy = fwk.features().pod_group_preemption_policy.then(|| {
            pod_group
                .and_then(|g| g.spec.preemption_policy.clone())
                .unwrap_or_else(|| PREEMPT_LOWER_PRIORITY.to_owned())
        });
        let tree = self.tree_that_does_not_fit(&fwk, &first, &group_name);
        drop(fwk);
        if let Some(error) = invalid_group(&queued, group_priority, group_policy.as_deref()) {
            // handlePodGroupFailureBeforeScheduling: every pod gets the error; none is tried.
            for member in &queued {
                let result = self.result_for(member);
                result.attempts += 1;
                result.outcome = PodOutcome::Error;
                result.message = Some(error.clone());
            }
            self.group_messages.insert(group.to_owned(), error);
            return Ok((PodOutcome::Error, 0));
        }

        if let Some(mut tree) = tree {
            return self.refuse_with_tree(group, &group_name, &first, &queued, &mut tree);
        }

        let placement = self.group_placement(&first, &group_name, min_count, counts.scheduled, &queued)?;
        if let GroupPlacement::Refused { message, error } = &placement {
            // TopologyPlacementGenerator found no placement: no pod is tried.
            return Ok(self.refuse_group(group, &queued, message, *error));
        }
        let saved = self.snapshot.clone();
        if let GroupPlacement::Domain(nodes, _) = &placement {
            self.snapshot = Arc::new(saved.with_placement(nodes.iter().map(String::as_str)));
        }
        let mut progress = PlacementProgress {
            remaining: queued.len(),
            scheduled: counts.scheduled,
        };
        let mut status = placement_feasible(min_count, progress);
        let mut tried: Vec<Tried> = Vec::new();
        if status.code() != Code::Unschedulable {
            for member in &queued {
                let outcome = self.try_in_group(member)?;
                let stop = matches!(outcome, Tried::Error(_));
                progress.remaining -= 1;
                progress.scheduled += usize::from(matches!(outcome, Tried::Placed { .. }));
                tried.push(outcome);
                if stop {
                    break;
                }
                status = placement_feasible(min_count, progress);
                if status.code() == Code::Unschedulable {
                    break;
                }
            }
        }
        self.cycles += tried.len().saturating_sub(1);
        for member in &queued {
            self.result_for(member).attempts += 1;
        }

        if let Some(error) = tried.iter().find_map(|t| match t {
            Tried::Error(message) => Some(message.clone()),
            _ => None,
        }) {
            // `failed to schedule other pod from a pod group`: nothing is bound, none requeued.
            self.snapshot = saved;
            for (i, member) in queued.iter().enumerate() {
                let message = match tried.get(i) {
                    Some(Tried::Error(own)) => own.clone(),
                    _ => format!("failed to schedule other pod from a pod group: {error}"),
                };
                let result = self.result_for(member);
                result.outcome = PodOutcome::Error;
                result.message = Some(message);
            }
            return Ok((PodOutcome::Error, 0));
        }

        if status.code() == Code::Success {
            Arc::make_mut(&mut self.snapshot).forget_placement();
            let mut placed = 0;
            let mut parked = Vec::new();
            for (member, outcome) in queued.iter().zip(tried) {
                match outcome {
                    Tried::Placed { node, tied, events } => {
                        placed += 1;
                        if tied > 1 {
                            self.tied_placements += 1;
                        }
                        let result = self.result_for(member);
                        result.outcome = PodOutcome::Scheduled;
                        result.node = Some(node);
                        result.message = None;
                        result.tied_nodes = tied;
                        self.in_transit.push(Landing::Events(events));
                    }
                    Tried::Failed {
                        message,
                        plugins,
                        inputs,
                    } => {
                        let result = self.result_for(member);
                        result.outcome = PodOutcome::Unschedulable;
                        result.message = Some(message);
                        parked.push((member.clone(), plugins, inputs));
                    }
                    Tried::Error(_) => {}
                }
            }
            self.group_messages.remove(group);
            if !parked.is_empty() {
                self.queue.park_group(group, parked);
            }
            return Ok((PodOutcome::Scheduled, placed));
        }

        // The group cannot be placed: back to the snapshot before its cycle, and the words.
        self.snapshot = saved;
        let fwk = self.engine.framework_for(&first.pod, self.snapshot.clone())?;
        let stop = if tried.is_empty() {
            GroupStop::BeforeAnyPod
        } else {
            GroupStop::AfterTrying
        };
        let words = match &placement {
            GroupPlacement::Domain(_, cycle) => cycle.words(&fwk, &first, &group_name, &queued),
            _ => GroupWords::of(&fwk, &first, &group_name, &queued, stop, status),
        };
        drop(fwk);
        let mut parked = Vec::new();
        for (i, member) in queued.iter().enumerate() {
            let (message, plugins, inputs) = match tried.get(i) {
                Some(Tried::Placed { .. }) => {
                    (words.pod_that_fit.clone(), BTreeSet::new(), HintInputs::default())
                }
                Some(Tried::Failed {
                    message,
                    plugins,
                    inputs,
                }) => (message.clone(), plugins.clone(), inputs.clone()),
                Some(Tried::Error(_)) | None => (
                    words.pod_not_reached.clone(),
                    BTreeSet::new(),
                    HintInputs::default(),
                ),
            };
            let result = self.result_for(member);
            result.outcome = PodOutcome::Unschedulable;
            result.node = None;
            result.message = Some(message);
            parked.push((member.clone(), plugins, inputs));
        }
        self.group_messages.insert(group.to_owned(), words.group);
        let waiting = self.start_group_preemption(group, words.preemption.as_deref(), &mut parked);
        self.queue.park_group(group, parked);
        for key in waiting {
            self.queue.set_gated(&key, true);
        }
        Ok((PodOutcome::Unschedulable, 0))
    }

    /// The cycle of the tree `group` (of `first`) belongs to, when CompositePodGroup is on and the
    /// tree does not fit whole.
    fn tree_that_does_not_fit(&self, fwk: &Framework, first: &PodInfo, group: &str) -> Option<TreeCycle> {
        if !schedules_trees(fwk) {
            return None;
        }
        let root = root_of(&self.snapshot, first.namespace(), group).ok()??;
        let options = ScheduleOptions {
            trace_filters: false,
            record_nodes: false,
            ..self.engine.schedule_options(false)
        };
        tree_cycle(fwk, first.namespace(), &root, None, options).filter(|c| !c.fits())
    }

    /// The group's pods when its tree does not fit: none bound, each with the tree's words, the
    /// group parked until the cluster changes.
    fn refuse_with_tree(
        &mut self,
        group: &str,
        group_name: &str,
        first: &PodInfo,
        queued: &[Arc<PodInfo>],
        tree: &mut TreeCycle,
    ) -> Result<(PodOutcome, usize), SimulationError> {
        let fwk = self.engine.framework_for(&first.pod, self.snapshot.clone())?;
        let options = ScheduleOptions {
            trace_filters: false,
            record_nodes: false,
            ..self.engine.schedule_options(false)
        };
        let mut parked = Vec::new();
        for member in queued {
            let message = match tree.pod_verdict(&fwk, group_name, member.name(), options) {
                GroupVerdict::Rejected(status) => status.message(),
                GroupVerdict::PodFailed(cycle) | GroupVerdict::InPlacement(cycle) => {
                    cycle.explanation.message
                }
            };
            let result = self.result_for(member);
            result.attempts += 1;
            result.outcome = PodOutcome::Unschedulable;
            result.node = None;
            result.message = Some(message);
            parked.push((member.clone(), BTreeSet::new(), HintInputs::default()));
        }
        drop(fwk);
        if let Some(condition) = tree.condition(group_name) {
            self.group_messages.insert(group.to_owned(), condition);
        }
        self.queue.park_group(group, parked);
        Ok((PodOutcome::Unschedulable, 0))
    }

    /// Every queued pod of a group no placement was generated for gets `message` untried
    /// (Unschedulable, parked with its group; Error when the generator failed).
    fn refuse_group(
        &mut self,
        group: &str,
        queued: &[Arc<PodInfo>],
        message: &str,
        error: bool,
    ) -> (PodOutcome, usize) {
        let outcome = if error {
            PodOutcome::Error
        } else {
            PodOutcome::Unschedulable
        };
        let mut parked = Vec::new();
        for member in queued {
            let result = self.result_for(member);
            result.attempts += 1;
            result.outcome = outcome;
            result.node = None;
            result.message = Some(message.to_owned());
            parked.push((member.clone(), BTreeSet::new(), HintInputs::default()));
        }
        self.group_messages.insert(group.to_owned(), message.to_owned());
        if !error {
            self.queue.park_group(group, parked);
        }
        (outcome, 0)
    }

    /// One pod's own cycle within its group's, on the snapshot with the group's pods before it
    /// assumed; a pod that fits is assumed too (the group's revert puts the snapshot back).
    fn try_in_group(&mut self, member: &Arc<PodInfo>) -> Result<Tried, SimulationError> {
        let fwk = self.engine.framework_for(&member.pod, self.snapshot.clone())?;
        let options = ScheduleOptions {
            trace_filters: false,
            record_nodes: false,
            sample_from: (!self.options.all_nodes).then_some(self.next_start_node_index),
            ..self.engine.schedule_options(false)
        };
        let mut cycle = pod_cycle(&fwk, member, options);
        self.evaluated_nodes += cycle.processed_nodes;
        let num_nodes = self.snapshot.nodes().len().max(1);
        self.next_start_node_index = (self.next_start_node_index + cycle.processed_nodes) % num_nodes;
        match cycle.explanation.outcome {
            Outcome::Scheduled => {
                let tied = cycle.explanation.selected.len();
                let node = if tied > 1 {
                    cycle.explanation.selected[self.ties.pick(tied)].clone()
                } else {
                    cycle.explanation.selected.first().cloned().unwrap_or_default()
                };
                let (actions, status) = binding_plan(&fwk, &mut cycle.state, member, &node);
                let claim_results = allocation_results(&cycle.state, &node);
                drop(cycle);
                drop(fwk);
                if !status.is_success() {
                    return Ok(Tried::Error(status.message()));
                }
                let mut events = self.apply_volume_actions(&actions);
                self.record_claims(member, claim_results);
                let placed = Arc::new(placed_on(member, &node));
                if let Err(e) = Arc::make_mut(&mut self.snapshot).assume_pod(placed.clone()) {
                    return Ok(Tried::Error(e.to_string()));
                }
                events.push(ClusterEvent::AssignedPodAdd(placed));
                Ok(Tried::Placed { node, tied, events })
            }
            Outcome::Unschedulable | Outcome::Gated => {
                let plugins = rejecting_plugins(&cycle.node_statuses);
                let inputs = hint_inputs(&fwk, member, &plugins);
                drop(fwk);
                let message = without_post_filter(cycle).explanation.message;
                Ok(Tried::Failed {
                    message,
                    plugins,
                    inputs,
                })
            }
            Outcome::Error => Ok(Tried::Error(cycle.explanation.message)),
        }
    }

    /// The pods of a group the cycle does not apply to (another scheduler's, no GangScheduling in
    /// the profile), each in its own cycle.
    fn attempt_one_by_one(
        &mut self,
        members: Vec<Arc<PodInfo>>,
    ) -> Result<(PodOutcome, usize), SimulationError> {
        let mut last = PodOutcome::Ignored;
        let mut placed = 0;
        for member in members {
            last = self.attempt(member)?;
            placed += usize::from(last == PodOutcome::Scheduled);
        }
        Ok((last, placed))
    }

    /// Every pod group of the batch, in the order its first pod was tried.
    pub(super) fn group_results(&self) -> Vec<GroupResult> {
        let mut order: Vec<String> = Vec::new();
        let mut groups: BTreeMap<String, GroupResult> = BTreeMap::new();
        for key in &self.first_attempt_order {
            let (Some(result), Some(group)) = (self.results.get(key), self.pod_groups.get(key)) else {
                continue;
            };
            let entry = groups.entry(group.clone()).or_insert_with(|| {
                order.push(group.clone());
                let (namespace, name) = group.split_once('/').unwrap_or(("", group));
                let pod_group = self.snapshot.pod_group(namespace, name);
                let running = self.snapshot.pod_group_counts(namespace, name).scheduled;
                GroupResult {
                    group: group.clone(),
                    min_count: pod_group.and_then(|g| crate::snapshot::pod_groups::gang_min_count(g)),
                    outcome: GroupOutcome::Waiting,
                    placed: 0,
                    total: 0,
                    // Counted after the run: the batch's placements are not "before".
                    running_before: running,
                    nodes: BTreeMap::new(),
                    message: None,
                }
            });
            entry.total += 1;
            match result.outcome {
                PodOutcome::Scheduled => {
                    entry.placed += 1;
                    entry.running_before = entry.running_before.saturating_sub(1);
                    if let Some(node) = &result.node {
                        *entry.nodes.entry(node.clone()).or_insert(0) += 1;
                    }
                }
                PodOutcome::Gated if entry.message.is_none() => {
                    entry.message = result.note.clone().or_else(|| result.message.clone());
                }
                _ => {}
            }
        }
        order
            .into_iter()
            .filter_map(|group| groups.remove(&group))
            .map(|mut g| {
                let rejected = self.group_messages.get(&g.group);
                g.outcome = if g.placed > 0 {
                    GroupOutcome::Scheduled
                } else if rejected.is_some() {
                    GroupOutcome::Unschedulable
                } else if g.message.is_some() {
                    GroupOutcome::Waiting
                } else {
                    GroupOutcome::Unschedulable
                };
                if g.outcome != GroupOutcome::Waiting {
                    g.message = rejected.cloned();
                }
                g
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::engine::Engine;
    use crate::features::FeatureGates;
    use crate::simulate::{SimulationOptions, SimulationReport};
    use crate::snapshot::ClusterObjects;
    use crate::testing::{gang, node, pod};

    /// Runs `objects` with v1.37's gates and GenericWorkload on (`gang_on`) or off.
    fn simulate(objects: ClusterObjects, gang_on: bool) -> SimulationReport {
        let gates = if gang_on {
            FeatureGates::v1_37()
                .with_overrides("GenericWorkload=true")
                .expect("gate")
        } else {
            FeatureGates::v1_37()
        };
        let engine = Engine::for_features(None, gates).expect("engine");
        let mut simulation = Simulation::new(&engine, engine.snapshot(objects), SimulationOptions::default());
        simulation.run(&mut |_| {}).expect("runs")
    }

    fn created(secs: i64) -> impl FnOnce(&mut Pod) {
        move |p: &mut Pod| {
            p.metadata.creation_timestamp = Some(Time(
                k8s_openapi::jiff::Timestamp::from_second(secs).expect("time"),
            ));
        }
    }

    fn outcome_of(report: &SimulationReport, name: &str) -> (PodOutcome, Option<String>, Option<String>) {
        let p = report
            .pods
            .iter()
            .find(|p| p.pod == format!("default/{name}"))
            .expect("simulated");
        (p.outcome, p.node.clone(), p.message.clone())
    }

    /// kube-scheduler queues a gang as one entity at its earliest pod's time and places its pods
    /// together: a plain pod created between two gang pods waits behind the whole gang. Popping pods
    /// one by one instead placed the plain pod between them and left the gang half bound.
    #[test]
    fn a_gang_is_one_entity_of_the_queue() {
        let objects = ClusterObjects {
            nodes: vec![node("n1").cpu("4").memory("8Gi").obj()],
            pods: vec![
                pod("g0").pod_group("train").cpu("2").with(created(10)).obj(),
                pod("plain").cpu("2").with(created(11)).obj(),
                pod("g1").pod_group("train").cpu("2").with(created(12)).obj(),
            ],
            pod_groups: vec![gang("train", 2).obj()],
            ..Default::default()
        };
        let report = simulate(objects.clone(), true);
        assert_eq!(outcome_of(&report, "g0").1.as_deref(), Some("n1"));
        assert_eq!(outcome_of(&report, "g1").1.as_deref(), Some("n1"));
        assert_eq!(
            outcome_of(&report, "plain"),
            (
                PodOutcome::Unschedulable,
                None,
                Some("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.".into())
            )
        );
        let group = &report.groups[0];
        assert_eq!(
            (group.group.as_str(), group.outcome, group.placed, group.total),
            ("default/train", GroupOutcome::Scheduled, 2, 2)
        );
        assert_eq!(group.nodes, BTreeMap::from([("n1".to_owned(), 2)]));
        // Gates off (v1.37's default): no group, the pods in creation order.
        let off = simulate(objects, false);
        assert_eq!(outcome_of(&off, "plain").1.as_deref(), Some("n1"));
        assert_eq!(outcome_of(&off, "g1").0, PodOutcome::Unschedulable);
        assert!(off.groups.is_empty());
    }

    /// The report per group, in kube-scheduler's words: a gang that fits (where its pods went), one
    /// whose minCount exceeds the cluster (the PodGroup's condition message, each pod's own), one
    /// short of its quorum and one whose PodGroup does not exist (held at PreEnqueue: no
    /// PodScheduled condition, PreEnqueue's words as the note), and a group whose pods do not have
    /// its priority (validatePodGroup's error).
    #[test]
    fn each_group_is_reported_with_kube_schedulers_words() {
        let member = |name: &str, group: &str, cpu: &str| pod(name).pod_group(group).cpu(cpu);
        let objects = ClusterObjects {
            nodes: vec![
                node("n1").cpu("4").memory("8Gi").obj(),
                node("n2").cpu("4").memory("8Gi").obj(),
            ],
            pods: vec![
                member("big-0", "big", "3").with(created(2)).obj(),
                member("big-1", "big", "3").with(created(2)).obj(),
                member("big-2", "big", "3").with(created(2)).obj(),
                member("big-3", "big", "3").with(created(2)).obj(),
                member("fit-0", "fit", "1").with(created(1)).obj(),
                member("fit-1", "fit", "1").with(created(1)).obj(),
                member("quorum-0", "quorum", "1").with(created(3)).obj(),
                member("lost-0", "missing", "1").with(created(4)).obj(),
                member("odd-0", "odd", "1").priority(7).with(created(5)).obj(),
            ],
            pod_groups: vec![
                gang("big", 4).obj(),
                gang("fit", 2).obj(),
                gang("quorum", 2).obj(),
                gang("odd", 1).obj(),
            ],
            ..Default::default()
        };
        let report = simulate(objects, true);
        let no_victims = "pod group preemption: No preemption victims found for incoming preemptor";
        // (group, outcome, placed/total, message)
        type Row<'a> = (&'a str, GroupOutcome, (usize, usize), Option<String>);
        let want: [Row<'_>; 5] = [
            ("default/fit", GroupOutcome::Scheduled, (2, 2), None),
            (
                "default/big",
                GroupOutcome::Unschedulable,
                (0, 4),
                Some(format!("minCount (4) cannot be satisfied: 2 scheduled, 1 remaining, {no_victims}")),
            ),
            (
                "default/quorum",
                GroupOutcome::Waiting,
                (0, 1),
                Some("waiting for minCount pods from a gang to appear in scheduling queue".into()),
            ),
            (
                "default/missing",
                GroupOutcome::Waiting,
                (0, 1),
                Some("waiting for pods's pod group \"missing\" to appear in scheduling queue".into()),
            ),
            (
                "default/odd",
                GroupOutcome::Unschedulable,
                (0, 1),
                Some(
                    "all pods in a single pod group should have the same priority as the pod group's priority, got 7 and 0"
                        .into(),
                ),
            ),
        ];
        let got: Vec<_> = report
            .groups
            .iter()
            .map(|g| {
                (
                    g.group.as_str(),
                    g.outcome,
                    (g.placed, g.total),
                    g.message.clone(),
                )
            })
            .collect();
        assert_eq!(got, want);

        // The pods of the gang that cannot be placed: none bound; those that fit get the group's
        // words, the one that did not its own, the one never tried the reasons where it stopped.
        let big: Vec<_> = ["big-0", "big-1", "big-2", "big-3"]
            .iter()
            .map(|n| outcome_of(&report, n))
            .collect();
        assert!(
            big.iter()
                .all(|(o, node, _)| *o == PodOutcome::Unschedulable && node.is_none()),
            "{big:?}"
        );
        let messages: Vec<&str> = big
            .iter()
            .map(|(_, _, m)| m.as_deref().unwrap_or_default())
            .collect();
        let fit = format!(
            "pod group is unschedulable, minCount (4) cannot be satisfied: 2 scheduled, 1 remaining, {no_victims}"
        );
        assert_eq!(
            messages,
            [
                fit.as_str(),
                fit.as_str(),
                "0/2 nodes are available: 2 Insufficient cpu.",
                "minCount (4) cannot be satisfied: 2 scheduled, 1 remaining",
            ]
        );
        // Held at PreEnqueue: kube-scheduler writes no PodScheduled condition.
        let quorum = report
            .pods
            .iter()
            .find(|p| p.pod == "default/quorum-0")
            .expect("quorum-0");
        assert_eq!(
            (quorum.outcome, quorum.message.as_deref(), quorum.note.as_deref()),
            (
                PodOutcome::Gated,
                None,
                Some("waiting for minCount pods from a gang to appear in scheduling queue")
            )
        );
    }

    /// Runs `objects` with v1.37's gates and `overrides` on.
    fn simulate_with(objects: ClusterObjects, overrides: &str) -> SimulationReport {
        let gates = FeatureGates::v1_37().with_overrides(overrides).expect("gates");
        let engine = Engine::for_features(None, gates).expect("engine");
        let mut simulation = Simulation::new(&engine, engine.snapshot(objects), SimulationOptions::default());
        simulation.run(&mut |_| {}).expect("runs")
    }

    /// A tree (CompositePodGroup `job`, minGroupCount 2) of a gang that fits alone and one that
    /// does not: with the gate on no pod of either is bound, and the one that fits alone gets the
    /// tree's words; with it off the first is bound on its own.
    #[test]
    fn a_tree_is_bound_all_or_nothing() {
        let objects = crate::testing::small_and_big_gang_tree();
        let on = simulate_with(
            objects.clone(),
            "GenericWorkload=true,TopologyAwareWorkloadScheduling=true,CompositePodGroup=true",
        );
        for name in ["s1", "b1", "b2"] {
            let (outcome, node, _) = outcome_of(&on, name);
            assert_eq!(
                (outcome, node),
                (PodOutcome::Unschedulable, None),
                "{name}: gate on"
            );
        }
        assert_eq!(
            outcome_of(&on, "s1").2.as_deref(),
            Some(
                "pod group is unschedulable, 0/1 placements are available, first placement status: \
                 minCount (2) cannot be satisfied: 1 scheduled, 0 remaining"
            )
        );
        let off = simulate_with(
            objects,
            "GenericWorkload=true,TopologyAwareWorkloadScheduling=true",
        );
        assert_eq!(
            outcome_of(&off, "s1").0,
            PodOutcome::Scheduled,
            "gate off: the small gang alone"
        );
    }

    /// `validatePodGroup`: with PodGroupPreemptionPolicy on, a pod whose preemptionPolicy is not
    /// its PodGroup's (PreemptLowerPriority when unset) fails the group before any is tried; with it
    /// off, only pods that differ from the first are refused.
    #[test]
    fn pods_must_share_the_groups_preemption_policy() {
        let member = |name: &str, policy: Option<&str>| {
            let mut p = pod(name).pod_group("pg").cpu("1").obj();
            p.spec.get_or_insert_default().preemption_policy = policy.map(str::to_owned);
            Arc::new(PodInfo::new(p))
        };
        let never = Some("Never");
        // (case, pods, the PodGroup's policy under the gate (None: gate off), want)
        let cases = [
            (
                "gate off, alike",
                vec![member("a", never), member("b", never)],
                None,
                None,
            ),
            (
                "gate off, the second differs",
                vec![member("a", never), member("b", None)],
                None,
                Some(
                    "all pods in a single pod group should have the same preemption policy, got PreemptLowerPriority and Never",
                ),
            ),
            (
                "gate on: pods alike but not the group's",
                vec![member("a", never), member("b", never)],
                Some("PreemptLowerPriority"),
                Some(
                    "all pods in a single pod group should have the same preemption policy as the pod group's \
                     preemption policy, got Never and PreemptLowerPriority",
                ),
            ),
            (
                "gate on: the group's",
                vec![member("a", never), member("b", never)],
                Some("Never"),
                None,
            ),
        ];
        for (case, pods, group_policy, want) in cases {
            assert_eq!(invalid_group(&pods, 0, group_policy).as_deref(), want, "{case}");
        }
    }
}
