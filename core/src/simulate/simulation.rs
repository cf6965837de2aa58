//! The simulation loop: pods taken one at a time from the [`SchedulingQueue`] through the full
//! scheduling cycle on a snapshot that changes as they are placed — kube-scheduler's loop, with its
//! sampling and rotating start index, its tie-breaking made reproducible by a seed, and preemption
//! (victims deleted, lower-priority nominations on the node cleared, the preemptor nominated and
//! retried).
//!
//! The snapshot is changed in place between cycles ([`Snapshot::assume_pod`] and friends): each
//! cycle's framework is dropped before the change, so the snapshot is never copied.
//!
//! What a cycle sets in motion — its binding's events, its preemption's deletions — lands after the
//! next cycle, as kube-scheduler's goroutines and watch events do (see [`super::queue`]).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::resource::v1::{AllocationResult, ResourceClaimConsumerReference};
use serde::Serialize;

use super::group_cycle::GroupResult;
use super::hints::{ClusterEvent, HintInputs};
use super::queue::SchedulingQueue;
use crate::action::Action;
use crate::engine::{Engine, EngineError};
use crate::explain::Outcome;
use crate::framework::interface::NodeToStatus;
use crate::framework::runtime::Framework;
use crate::plugins::dynamic_resources::allocation_results;
use crate::plugins::gang_scheduling::gang_of;
use crate::plugins::scheduling_gates::SCHEDULING_GATED_MESSAGE;
use crate::plugins::{names, pod_topology_spread};
use crate::preemption::args::DefaultPreemptionArgs;
use crate::preemption::evaluator;
use crate::schedule::{ScheduleOptions, binding_plan, schedule_cycle};
use crate::snapshot::pod_groups::pod_group_name;
use crate::snapshot::{PodInfo, Snapshot, namespaced_key};

/// Cycles allowed per queued pod before the simulation gives up (preemption loops cannot go on
/// forever: each preemption deletes pods).
const MAX_CYCLES_PER_POD: usize = 20;

/// How a simulation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimulationOptions {
    /// Seeds the choice among nodes tied for the best score (kube-scheduler picks at random).
    pub seed: u64,
    /// Filter and score every node for every pod instead of kube-scheduler's sample.
    pub all_nodes: bool,
    /// "Now" for victims without a start time (nanoseconds since the epoch).
    pub now_nanos: i128,
}

impl Default for SimulationOptions {
    fn default() -> Self {
        SimulationOptions {
            seed: 0,
            all_nodes: false,
            now_nanos: evaluator::now_nanos(),
        }
    }
}

/// Where a pod ended up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub enum PodOutcome {
    /// Placed on a node.
    Scheduled,
    /// Still pending: no node fits. (A preemptor is retried once its victims are deleted, so a
    /// nominated pod that stays pending found no room on its node after all.)
    Unschedulable,
    /// Kept out of the queue by a PreEnqueue plugin (scheduling gates).
    Gated,
    /// Its schedulerName names no profile: kube-scheduler ignores it.
    Ignored,
    /// The cycle failed with an internal error.
    Error,
    /// Placed, then deleted as another pod's preemption victim.
    Preempted,
}

/// One pod's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PodResult {
    /// `namespace/name`.
    pub pod: String,
    /// The outcome.
    pub outcome: PodOutcome,
    /// The node it was placed on (for `Preempted`, the node it was deleted from).
    pub node: Option<String>,
    /// Its PodScheduled condition message: the FailedScheduling message of its last attempt, the
    /// API server's for a gated pod; or why it is ignored or failed.
    pub message: Option<String>,
    /// More than the condition says: a gated pod's gates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Its nominatedNodeName at the end, when it has one.
    pub nominated_node: Option<String>,
    /// The pod whose preemption deleted it.
    pub preempted_by: Option<String>,
    /// Scheduling cycles it went through.
    pub attempts: u32,
    /// How many nodes tied for the best score when it was placed (more than 1: the seed chose).
    pub tied_nodes: usize,
}

/// A pod deleted by preemption.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Victim {
    /// `namespace/name`.
    pub pod: String,
    /// Its node.
    pub node: String,
    /// Its priority.
    pub priority: i32,
    /// The preemptor, `namespace/name`.
    pub preemptor: String,
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimulationReport {
    /// Every pod that was queued, in the order of its first attempt.
    pub pods: Vec<PodResult>,
    /// Every pod group of the batch (GenericWorkload on), in the order its first pod was tried.
    pub groups: Vec<GroupResult>,
    /// Pods deleted by preemption, in order.
    pub victims: Vec<Victim>,
    /// Scheduling cycles run.
    pub cycles: usize,
    /// Placements where several nodes tied for the best score.
    pub ties: usize,
    /// Nodes evaluated over all cycles (kube-scheduler's `processedNodes`: feasible nodes found
    /// plus nodes a filter rejected), for node evaluations per second.
    pub evaluated_nodes: usize,
    /// Set when the cycle limit stopped the run before the queue emptied.
    pub stopped_early: Option<String>,
}

/// Progress of a run, for callers that report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Cycles run so far.
    pub cycles: usize,
    /// Pods placed so far.
    pub scheduled: usize,
    /// Pods waiting in the active queue.
    pub queued: usize,
}

/// Why a simulation could not run at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimulationError {
    /// A profile's plugins could not be built.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// SplitMix64: a small, seedable generator for the tie-breaks (reproducible across platforms).
#[derive(Debug, Clone)]
pub(super) struct TieBreaker(u64);

impl TieBreaker {
    pub(super) fn pick(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z % n.max(1) as u64) as usize
    }
}

/// What a cycle set in motion, landing after the next cycle (see the module doc).
#[derive(Debug)]
pub(super) enum Landing {
    /// Events of a binding: the volume and claim updates of PreBind, then the pod's AssignedPod/Add.
    Events(Vec<ClusterEvent>),
    /// `prepareCandidateAsync`'s work: lower-priority nominations on `node` cleared, then `victims`
    /// deleted; `preemptor` (`namespace/name`) waits for it, gated.
    Preemption {
        preemptor: String,
        priority: i32,
        node: String,
        victims: Vec<Arc<PodInfo>>,
    },
    /// A pod group's preemption: `victims` deleted across the cluster; the group's pods
    /// (`namespace/name`) wait for it, gated.
    GroupPreemption {
        members: Vec<String>,
        victims: Vec<Arc<PodInfo>>,
    },
}

/// A batch simulation over one snapshot (see the module doc).
pub struct Simulation<'e> {
    pub(super) engine: &'e Engine,
    pub(super) snapshot: Arc<Snapshot>,
    pub(super) queue: SchedulingQueue,
    pub(super) options: SimulationOptions,
    pub(super) next_start_node_index: usize,
    pub(super) ties: TieBreaker,
    pub(super) results: HashMap<String, PodResult>,
    pub(super) first_attempt_order: Vec<String>,
    pub(super) victims: Vec<Victim>,
    pub(super) cycles: usize,
    pub(super) tied_placements: usize,
    pub(super) evaluated_nodes: usize,
    /// What the last cycle set in motion, not landed yet.
    pub(super) in_transit: Vec<Landing>,
    /// The PodGroup (`namespace/name`) of each pod of the batch that names one, GenericWorkload on.
    pub(super) pod_groups: HashMap<String, String>,
    /// The condition message of each group whose last cycle could not place it.
    pub(super) group_messages: HashMap<String, String>,
}

impl<'e> Simulation<'e> {
    /// A simulation of every pending pod of `snapshot`, in queue order.
    pub fn new(engine: &'e Engine, snapshot: Snapshot, options: SimulationOptions) -> Self {
        let generic_workload = engine.features().generic_workload;
        let pod_groups: HashMap<String, String> = if generic_workload {
            snapshot
                .pending_pods
                .iter()
                .filter_map(|p| Some((p.key(), namespaced_key(p.namespace(), pod_group_name(&p.pod)?))))
                .collect()
        } else {
            HashMap::new()
        };
        // A gang's pods are one entity of the queue, at their PodGroup's priority.
        let queue = SchedulingQueue::with_groups(snapshot.pending_pods.iter().cloned(), |p| {
            let (group, _) = gang_of(&snapshot, p).filter(|_| generic_workload)?;
            let priority = snapshot
                .pod_group(p.namespace(), &group)?
                .spec
                .priority
                .unwrap_or(0);
            Some((namespaced_key(p.namespace(), &group), priority))
        });
        Simulation {
            engine,
            snapshot: Arc::new(snapshot),
            queue,
            options,
            next_start_node_index: 0,
            ties: TieBreaker(options.seed),
            results: HashMap::new(),
            first_attempt_order: Vec::new(),
            victims: Vec::new(),
            cycles: 0,
            tied_placements: 0,
            evaluated_nodes: 0,
            in_transit: Vec::new(),
            pod_groups,
            group_messages: HashMap::new(),
        }
    }

    /// The snapshot as it stands (after [`Simulation::run`]: with every placement made).
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// Runs until the active queue is empty; `progress` is called after every cycle.
    pub fn run(&mut self, progress: &mut dyn FnMut(Progress)) -> Result<SimulationReport, SimulationError> {
        let limit = MAX_CYCLES_PER_POD * (self.queue.active_len() + 1);
        let mut stopped_early = None;
        let mut scheduled = 0;
        loop {
            let Some(pod) = self.queue.pop() else {
                // Nothing to pop: kube-scheduler waits, and what is in transit lands.
                if self.in_transit.is_empty() {
                    break;
                }
                let landing = std::mem::take(&mut self.in_transit);
                self.land(landing);
                continue;
            };
            if self.cycles >= limit {
                stopped_early = Some(format!(
                    "stopped after {} scheduling cycles with {} pods still queued",
                    self.cycles,
                    self.queue.active_len() + 1
                ));
                break;
            }
            self.cycles += 1;
            let mut landing = std::mem::take(&mut self.in_transit);
            let (outcome, placed) = match self.gang_group_of(&pod) {
                Some(group) => self.attempt_group(pod, &group)?,
                None => {
                    let outcome = self.attempt(pod)?;
                    (outcome, usize::from(outcome == PodOutcome::Scheduled))
                }
            };
            if matches!(outcome, PodOutcome::Gated | PodOutcome::Ignored) {
                // kube-scheduler never pops such a pod: what was in transit still is.
                landing.append(&mut self.in_transit);
                self.in_transit = landing;
            } else {
                self.land(landing);
            }
            scheduled += placed;
            progress(Progress {
                cycles: self.cycles,
                scheduled,
                queued: self.queue.active_len(),
            });
        }
        let landing = std::mem::take(&mut self.in_transit);
        self.land(landing);
        let mut pods: Vec<PodResult> = self
            .first_attempt_order
            .iter()
            .filter_map(|key| self.results.get(key).cloned())
            .collect();
        for result in &mut pods {
            if result.outcome == PodOutcome::Unschedulable {
                result.nominated_node = self
                    .snapshot
                    .pods_by_key
                    .get(&result.pod)
                    .map(|p| p.nominated_node_name().to_string())
                    .filter(|n| !n.is_empty());
            }
        }
        Ok(SimulationReport {
            pods,
            groups: self.group_results(),
            victims: self.victims.clone(),
            cycles: self.cycles,
            ties: self.tied_placements,
            evaluated_nodes: self.evaluated_nodes,
            stopped_early,
        })
    }

    pub(super) fn result_for(&mut self, pod: &PodInfo) -> &mut PodResult {
        let key = pod.key();
        if !self.results.contains_key(&key) {
            self.first_attempt_order.push(key.clone());
        }
        self.results.entry(key.clone()).or_insert_with(|| PodResult {
            pod: key,
            outcome: PodOutcome::Unschedulable,
            node: None,
            message: None,
            note: None,
            nominated_node: None,
            preempted_by: None,
            attempts: 0,
            tied_nodes: 0,
        })
    }

    /// One scheduling cycle for `pod`, and its consequences on the snapshot and the queue.
    pub(super) fn attempt(&mut self, pod: Arc<PodInfo>) -> Result<PodOutcome, SimulationError> {
        let fwk = match self.engine.framework_for(&pod.pod, self.snapshot.clone()) {
            Ok(fwk) => fwk,
            Err(EngineError::UnknownProfile(e)) => {
                let result = self.result_for(&pod);
                result.outcome = PodOutcome::Ignored;
                result.message = Some(e.to_string());
                return Ok(PodOutcome::Ignored);
            }
            Err(e) => return Err(e.into()),
        };
        let options = ScheduleOptions {
            trace_filters: false,
            record_nodes: false,
            sample_from: (!self.options.all_nodes).then_some(self.next_start_node_index),
            ..self.engine.schedule_options(false)
        };
        let mut cycle = schedule_cycle(&fwk, &pod, options);
        self.evaluated_nodes += cycle.processed_nodes;
        let num_nodes = self.snapshot.nodes().len().max(1);
        self.next_start_node_index = (self.next_start_node_index + cycle.processed_nodes) % num_nodes;
        let outcome = cycle.explanation.outcome;
        let message = cycle.explanation.message.clone();
        match outcome {
            Outcome::Scheduled => {
                let tied = cycle.explanation.selected.len();
                let node = if tied > 1 {
                    self.tied_placements += 1;
                    cycle.explanation.selected[self.ties.pick(tied)].clone()
                } else {
                    cycle.explanation.selected.first().cloned().unwrap_or_default()
                };
                let (actions, status) = binding_plan(&fwk, &mut cycle.state, &pod, &node);
                let claim_results = allocation_results(&cycle.state, &node);
                // Plugin states may hold the snapshot: nothing of the cycle may outlive it, or the
                // change below would copy the whole snapshot.
                drop(cycle);
                drop(fwk);
                if !status.is_success() {
                    // Reserve, Permit or PreBind refused: kube-scheduler un-reserves and retries later.
                    let result = self.result_for(&pod);
                    result.attempts += 1;
                    result.outcome = PodOutcome::Error;
                    result.message = Some(status.message());
                    return Ok(PodOutcome::Error);
                }
                let mut events = self.apply_volume_actions(&actions);
                self.record_claims(&pod, claim_results);
                let placed = Arc::new(placed_on(&pod, &node));
                let snapshot = Arc::make_mut(&mut self.snapshot);
                if let Err(e) = snapshot.assume_pod(placed.clone()) {
                    let result = self.result_for(&pod);
                    result.outcome = PodOutcome::Error;
                    result.message = Some(e.to_string());
                    return Ok(PodOutcome::Error);
                }
                let result = self.result_for(&pod);
                result.attempts += 1;
                result.outcome = PodOutcome::Scheduled;
                result.node = Some(node);
                result.message = None;
                result.tied_nodes = tied;
                events.push(ClusterEvent::AssignedPodAdd(placed));
                self.in_transit.push(Landing::Events(events));
                Ok(PodOutcome::Scheduled)
            }
            Outcome::Unschedulable => {
                let mut plugins = rejecting_plugins(&cycle.node_statuses);
                let nominated = cycle
                    .explanation
                    .post_filter
                    .as_ref()
                    .and_then(|p| p.nominated_node.clone());
                let victims = match &nominated {
                    Some(node) => {
                        plugins.insert(names::DEFAULT_PREEMPTION);
                        let args = DefaultPreemptionArgs::from_profile(&fwk.profile);
                        let eval = evaluator::evaluate(
                            &fwk,
                            &cycle.state,
                            &pod,
                            &cycle.node_statuses,
                            &args,
                            self.options.now_nanos,
                        );
                        eval.candidate(node)
                            .map(|c| c.victims.iter().map(|v| v.pod.clone()).collect::<Vec<_>>())
                            .unwrap_or_default()
                    }
                    None => Vec::new(),
                };
                let inputs = hint_inputs(&fwk, &pod, &plugins);
                drop(cycle);
                drop(fwk);
                let result = self.result_for(&pod);
                result.attempts += 1;
                result.outcome = PodOutcome::Unschedulable;
                result.message = Some(message);
                let parked = match &nominated {
                    Some(node) => {
                        self.record_victims(&pod, node, &victims);
                        let nominated = Arc::new(with_nomination(&pod, node));
                        Arc::make_mut(&mut self.snapshot).add_pending_pod(nominated.clone());
                        nominated
                    }
                    None => pod,
                };
                let key = parked.key();
                let priority = parked.priority;
                self.queue.add_unschedulable(parked, plugins, inputs);
                if let Some(node) = nominated {
                    // Without victims, prepareCandidateAsync starts no goroutine and gates nothing.
                    if !victims.is_empty() {
                        self.queue.set_gated(&key, true);
                    }
                    self.in_transit.push(Landing::Preemption {
                        preemptor: key,
                        priority,
                        node,
                        victims,
                    });
                }
                Ok(PodOutcome::Unschedulable)
            }
            Outcome::Gated => {
                self.record_gated(&pod, message);
                Ok(PodOutcome::Gated)
            }
            Outcome::Error => {
                let result = self.result_for(&pod);
                result.attempts += 1;
                result.outcome = PodOutcome::Error;
                result.message = Some(message);
                Ok(PodOutcome::Error)
            }
        }
    }

    /// A pod held at PreEnqueue: kube-scheduler never tries it. Its PodScheduled condition is the
    /// API server's for a pod with scheduling gates, and none for a pod another PreEnqueue plugin
    /// holds (GangScheduling's quorum): PreEnqueue's words are the note.
    pub(super) fn record_gated(&mut self, pod: &PodInfo, pre_enqueue_message: String) {
        let has_gates = pod
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduling_gates.as_ref())
            .is_some_and(|g| !g.is_empty());
        let result = self.result_for(pod);
        result.outcome = PodOutcome::Gated;
        result.message = has_gates.then(|| SCHEDULING_GATED_MESSAGE.to_string());
        result.note = Some(pre_enqueue_message);
    }

    /// Reports `victims` as deleted by `preemptor`'s preemption on `node` (their deletion lands
    /// later, see [`Landing::Preemption`]). A pod already reported, whose deletion has not landed
    /// yet when another preemptor picks it, is reported once.
    fn record_victims(&mut self, preemptor: &PodInfo, node: &str, victims: &[Arc<PodInfo>]) {
        for victim in victims {
            let key = victim.key();
            if self.victims.iter().any(|v| v.pod == key) {
                continue;
            }
            self.victims.push(Victim {
                pod: key.clone(),
                node: node.to_string(),
                priority: victim.priority,
                preemptor: preemptor.key(),
            });
            if let Some(result) = self.results.get_mut(&key) {
                result.outcome = PodOutcome::Preempted;
                result.preempted_by = Some(preemptor.key());
            }
        }
    }

    /// Applies what a cycle set in motion and hands its events to the queue.
    fn land(&mut self, landings: Vec<Landing>) {
        for landing in landings {
            match landing {
                Landing::Events(events) => {
                    for event in &events {
                        self.queue.on_event(event, None);
                    }
                }
                Landing::Preemption {
                    preemptor,
                    priority,
                    node,
                    victims,
                } => self.land_preemption(&preemptor, priority, &node, &victims),
                Landing::GroupPreemption { members, victims } => {
                    self.land_group_preemption(&members, &victims);
                }
            }
        }
    }

    /// `prepareCandidateAsync`'s goroutine: clears the nominations of lower-priority pods on `node`
    /// (each an AssignedPod/Delete of the nominated pod for pods of its priority or lower, as
    /// kube-scheduler's `updatePodInSchedulingQueue` sends it), then deletes the victims (each an
    /// AssignedPod/Delete); the preemptor's gate lifts as the last victim goes.
    fn land_preemption(&mut self, preemptor: &str, priority: i32, node: &str, victims: &[Arc<PodInfo>]) {
        self.queue.set_gated(preemptor, false);
        let snapshot = Arc::make_mut(&mut self.snapshot);
        let lower: Vec<Arc<PodInfo>> = snapshot
            .nominated_pods
            .get(node)
            .into_iter()
            .flatten()
            .filter(|p| p.priority < priority && p.key() != preemptor)
            .cloned()
            .collect();
        for pod in lower {
            let cleared = Arc::new(without_nomination(&pod));
            snapshot.add_pending_pod(cleared.clone());
            self.queue.update_unschedulable(cleared);
            self.queue
                .on_event(&ClusterEvent::AssignedPodDelete(pod.clone()), Some(pod.priority));
        }
        self.delete_victims(victims);
    }

    /// Deletes `victims` from the snapshot, each an AssignedPod/Delete for the queue.
    pub(super) fn delete_victims(&mut self, victims: &[Arc<PodInfo>]) {
        let snapshot = Arc::make_mut(&mut self.snapshot);
        let deleted: Vec<Arc<PodInfo>> = victims
            .iter()
            .filter_map(|v| snapshot.remove_pod(v.namespace(), v.name()))
            .collect();
        for victim in deleted {
            self.queue
                .on_event(&ClusterEvent::AssignedPodDelete(victim), None);
        }
    }

    /// Records volume binding decisions in the snapshot as the PV controller would complete them:
    /// a PV bound to a claim holds its claimRef and the claim names the PV; a claim left to dynamic
    /// provisioning carries its selected node. Returns the events those writes cause: PreBind's
    /// PersistentVolume update (claimRef) or claim update (selected node), and for a bound PV the PV
    /// controller's claim update (volumeName).
    pub(super) fn apply_volume_actions(&mut self, actions: &[Action]) -> Vec<ClusterEvent> {
        let snapshot = Arc::make_mut(&mut self.snapshot);
        let mut events = Vec::new();
        for action in actions {
            match action {
                Action::BindPv { pv, claim, .. } => {
                    if let Some(volume) = snapshot.persistent_volumes.get_mut(&pv.name) {
                        let spec = Arc::make_mut(volume).spec.get_or_insert_with(Default::default);
                        spec.claim_ref = Some(k8s_openapi::api::core::v1::ObjectReference {
                            namespace: Some(claim.namespace.clone()),
                            name: Some(claim.name.clone()),
                            uid: claim.uid.clone(),
                            ..Default::default()
                        });
                    }
                    update_claim(snapshot, &claim.namespace, &claim.name, |c| {
                        c.spec.get_or_insert_with(Default::default).volume_name = Some(pv.name.clone());
                    });
                    events.push(ClusterEvent::PersistentVolumeUpdate {
                        name: pv.name.clone(),
                    });
                    events.push(ClusterEvent::PersistentVolumeClaimUpdate {
                        namespace: claim.namespace.clone(),
                        name: claim.name.clone(),
                    });
                }
                Action::AnnotatePvc { pvc, key, value, .. } => {
                    update_claim(snapshot, &pvc.namespace, &pvc.name, |c| {
                        c.metadata
                            .annotations
                            .get_or_insert_with(Default::default)
                            .insert(key.clone(), value.clone());
                    });
                    events.push(ClusterEvent::PersistentVolumeClaimUpdate {
                        namespace: pvc.namespace.clone(),
                        name: pvc.name.clone(),
                    });
                }
                _ => {}
            }
        }
        events
    }
}

impl Simulation<'_> {
    /// Marks the pod's claims allocated (the devices chosen in its cycle) and reserved for it, as
    /// kube-scheduler's PreBind writes them, so that later pods of the batch find those devices taken.
    pub(super) fn record_claims(&mut self, pod: &PodInfo, results: Vec<(String, AllocationResult)>) {
        let names: Vec<String> = pod
            .pod
            .spec
            .iter()
            .flat_map(|s| s.resource_claims.iter().flatten())
            .filter_map(|c| c.resource_claim_name.clone())
            .collect();
        if results.is_empty() && names.is_empty() {
            return;
        }
        let snapshot = Arc::make_mut(&mut self.snapshot);
        let reference = ResourceClaimConsumerReference {
            api_group: None,
            resource: "pods".to_string(),
            name: pod.name().to_string(),
            uid: pod.uid().to_string(),
        };
        let mut results: HashMap<String, AllocationResult> = results.into_iter().collect();
        let keys: Vec<String> = names
            .iter()
            .map(|n| namespaced_key(pod.namespace(), n))
            .chain(results.keys().cloned())
            .collect();
        for key in keys {
            let Some(claim) = snapshot.resource_claims.get_mut(&key) else {
                continue;
            };
            let claim = Arc::make_mut(claim);
            let status = claim.status.get_or_insert_with(Default::default);
            if let Some(result) = results.remove(&key) {
                status.allocation = Some(result);
            }
            let reserved = status.reserved_for.get_or_insert_with(Vec::new);
            if !reserved.iter().any(|r| r.uid == reference.uid) {
                reserved.push(reference.clone());
            }
        }
        snapshot.allocated = crate::snapshot::AllocatedState::from_claims(
            snapshot.resource_claims.values().map(|c| c.as_ref()),
        );
    }
}

fn update_claim(
    snapshot: &mut Snapshot,
    namespace: &str,
    name: &str,
    change: impl FnOnce(&mut PersistentVolumeClaim),
) {
    if let Some(claim) = snapshot
        .persistent_volume_claims
        .get_mut(&namespaced_key(namespace, name))
    {
        change(Arc::make_mut(claim));
    }
}

/// What the rejecting plugins' hints need, read from the cycle's profile: PodTopologySpread's hard
/// constraints for the pod.
pub(super) fn hint_inputs(fwk: &Framework, pod: &PodInfo, plugins: &BTreeSet<&'static str>) -> HintInputs {
    let spread_constraints = plugins.contains(names::POD_TOPOLOGY_SPREAD).then(|| {
        pod_topology_spread::hard_constraints_for_hints(
            fwk.profile.plugin_args.get(names::POD_TOPOLOGY_SPREAD),
            &fwk.handle,
            fwk.features(),
            &pod.pod,
        )
    });
    HintInputs { spread_constraints }
}

/// The plugins that rejected the pod in this cycle (PreFilter's, or each node's Filter's).
pub(super) fn rejecting_plugins(statuses: &NodeToStatus) -> BTreeSet<&'static str> {
    statuses
        .statuses
        .values()
        .chain(std::iter::once(&statuses.absent))
        .filter(|s| s.is_rejected())
        .map(|s| s.plugin())
        .filter(|p| !p.is_empty())
        .collect()
}

/// `pod` as kube-scheduler assumes it: bound to `node`, its nomination gone.
pub(super) fn placed_on(pod: &PodInfo, node: &str) -> PodInfo {
    let mut info = pod.clone();
    let mut object = (*pod.pod).clone();
    object.spec.get_or_insert_with(Default::default).node_name = Some(node.to_string());
    if let Some(status) = object.status.as_mut() {
        status.nominated_node_name = None;
    }
    info.pod = Arc::new(object);
    info
}

pub(super) fn with_nomination(pod: &PodInfo, node: &str) -> PodInfo {
    let mut info = pod.clone();
    let mut object = (*pod.pod).clone();
    object
        .status
        .get_or_insert_with(Default::default)
        .nominated_node_name = Some(node.to_string());
    info.pod = Arc::new(object);
    info
}

fn without_nomination(pod: &PodInfo) -> PodInfo {
    let mut info = pod.clone();
    let mut object = (*pod.pod).clone();
    if let Some(status) = object.status.as_mut() {
        status.nominated_node_name = None;
    }
    info.pod = Arc::new(object);
    info
}
