//! The pod group cycle with TopologyAwareWorkloadScheduling on (alpha, v1.37:
//! `podGroupSchedulingPlacementAlgorithm`): TopologyPlacementGenerator cuts the cluster into
//! candidate placements — one per value of the PodGroup's `schedulingConstraints.topology[0].key`
//! among the nodes that carry it, only the domain its pods already run in when some are bound, or
//! the whole cluster when the group has no constraint — and the group's cycle runs in each one
//! ([`super::pod_group`]'s pass over its pods, each pod filtered and scored on the placement's
//! nodes only). Of the placements where the group reaches `minCount`, the PlacementScore plugins
//! pick one: PodGroupPodsCount (how many pods of the group would run there, normalized to 0–100,
//! weight 1) and NodeResourcesFit (MostAllocated over the placement's nodes with the group's pods
//! on them, its profile weight); the highest total wins, a tie is broken at random.
//!
//! When no placement fits, kube-scheduler reports one of them, "0/N placements are available,
//! first placement status: …" with the error of the first placement it tried. Upstream ranges over
//! a Go map of domains, so which is first (and the tie-break) varies from one cycle to the next;
//! this engine tries the domains in name order and says when the first one decides the words.
//!
//! Not modelled: a profile that names TopologyPlacementGenerator or PodGroupPodsCount itself (the
//! registry still refuses them); the gate brings them as the default profile does.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use super::pod_group::{
    ERR_POD_GROUP_UNSCHEDULABLE, GroupCycle, GroupStop, GroupVerdict, GroupWords, MemberRun, Run, Stop,
    run_members, without_post_filter,
};
use super::{CycleResult, ScheduleOptions, pod_cycle};
use crate::explain::Outcome;
use crate::framework::runtime::Framework;
use crate::framework::status::{Code, Status};
use crate::plugins::names;
use crate::plugins::node_resources::fit::placement_scorer;
use crate::snapshot::pod_groups::{pod_group_name, topology_key};
use crate::snapshot::{PodInfo, Snapshot};

/// TopologyPlacementGenerator found no node with the group's topology key (upstream's framework
/// status when a generator returns no placement).
pub const NO_FEASIBLE_PLACEMENTS: &str = "no feasible placements found";
/// The bound pods of the group sit in more than one domain: the generator fails with this prefix.
pub const ERR_SCHEDULED_DOMAIN: &str = "cannot determine domain for already scheduled pods: ";
/// PodGroupPodsCount's and the other placement scores' top (`MaxScore`).
const MAX_PLACEMENT_SCORE: i64 = 100;
/// PodGroupPodsCount's weight in the default profile.
const POD_GROUP_PODS_COUNT_WEIGHT: i64 = 1;

/// What kube-scheduler writes when no placement fits: `first` is what the first placement's status
/// says as an error.
pub fn no_placement_available(placements: usize, first: &str) -> String {
    format!("0/{placements} placements are available, first placement status: {first}")
}

/// Whether the pod group cycle tries placements: TopologyAwareWorkloadScheduling is on.
pub fn tries_placements(fwk: &Framework) -> bool {
    fwk.features().topology_aware_workload_scheduling
}

/// A candidate placement: a topology domain and its nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Placement {
    /// The domain (the topology label's value); empty for the whole cluster (no constraint).
    pub name: String,
    /// Its nodes, in the snapshot's order.
    pub nodes: Vec<String>,
}

/// TopologyPlacementGenerator (`GeneratePlacements`) for the PodGroup `namespace/group`: one
/// placement per domain of its topology key (only the domain of its bound pods when some are
/// bound), in domain order; the parent placement (the whole cluster outside a composite group)
/// when it has no topology constraint. `Err` with Unschedulable when no node carries the key, with
/// Error when the bound pods span domains.
pub fn generate_placements(
    snapshot: &Snapshot,
    namespace: &str,
    group: &str,
) -> Result<Vec<Placement>, Status> {
    let key = snapshot
        .pod_group(namespace, group)
        .and_then(|pg| topology_key(pg));
    let bound = || bound_pods(snapshot, namespace, |name| name == group);
    placements_for(snapshot, key, bound)
}

/// The pods of `namespace` bound to a node whose PodGroup `in_group` accepts, in name order.
pub(super) fn bound_pods<'a>(
    snapshot: &'a Snapshot,
    namespace: &str,
    in_group: impl Fn(&str) -> bool,
) -> Vec<&'a Arc<PodInfo>> {
    let mut bound: Vec<&Arc<PodInfo>> = snapshot
        .pods_by_key
        .values()
        .filter(|p| {
            p.namespace() == namespace
                && !p.node_name().is_empty()
                && pod_group_name(&p.pod).is_some_and(&in_group)
        })
        .collect();
    bound.sort_by(|a, b| a.name().cmp(b.name()));
    bound
}

/// `GeneratePlacements` over the nodes of the snapshot's placement (a composite group's children
/// are placed inside their parent's): one placement per domain of `key`, only the domain of the
/// group's `bound` pods when some are; the parent placement itself without a key.
pub(super) fn placements_for<'a>(
    snapshot: &'a Snapshot,
    key: Option<&str>,
    bound: impl FnOnce() -> Vec<&'a Arc<PodInfo>>,
) -> Result<Vec<Placement>, Status> {
    let parent = snapshot.nodes_in_placement();
    let Some(key) = key else {
        return Ok(vec![Placement {
            name: String::new(),
            nodes: parent.iter().map(|n| n.name().to_owned()).collect(),
        }]);
    };
    let required = scheduled_domain(snapshot, &bound(), key).map_err(|e| {
        Status::error(format!("{ERR_SCHEDULED_DOMAIN}{e}")).with_plugin(names::TOPOLOGY_PLACEMENT_GENERATOR)
    })?;
    let mut domains: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for node in parent.iter() {
        let Some(domain) = node.labels().get(key) else {
            continue;
        };
        if required.as_deref().is_none_or(|r| r == domain) {
            domains.entry(domain).or_default().push(node.name().to_owned());
        }
    }
    if domains.is_empty() {
        return Err(
            Status::unschedulable(NO_FEASIBLE_PLACEMENTS).with_plugin(names::TOPOLOGY_PLACEMENT_GENERATOR)
        );
    }
    Ok(domains
        .into_iter()
        .map(|(name, nodes)| Placement {
            name: name.to_owned(),
            nodes,
        })
        .collect())
}

/// `getScheduledPodsTopologyDomain`: the one domain of `key` the group's `bound` pods run in
/// (`None` when none is bound); the words of upstream's error otherwise.
fn scheduled_domain(
    snapshot: &Snapshot,
    bound: &[&Arc<PodInfo>],
    key: &str,
) -> Result<Option<String>, String> {
    let mut found: Option<String> = None;
    for pod in bound {
        let domain = snapshot
            .node(pod.node_name())
            .and_then(|n| n.labels().get(key).cloned())
            .ok_or_else(|| format!("no topology domain found for pod {}", pod.key()))?;
        match &found {
            Some(first) if *first != domain => {
                return Err(format!(
                    "more than 1 domain found for pod group: {first}, {domain}"
                ));
            }
            _ => found = Some(domain),
        }
    }
    Ok(found)
}

/// One placement's PlacementScore: each plugin's weighted score and their sum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlacementScore {
    /// PodGroupPodsCount: the group's pods running there (bound before plus placed), normalized
    /// against the best placement to 0–100, times its weight (1).
    pub pod_group_pods_count: i64,
    /// NodeResourcesFit: MostAllocated over the placement's nodes with the group's pods on them,
    /// times its weight; `None` when the profile does not score with it.
    pub node_resources_fit: Option<i64>,
    /// The sum the best placement is chosen by.
    pub total: i64,
}

/// How the group's cycle went in one placement.
#[derive(Debug)]
pub struct PlacementTry {
    /// The placement.
    pub placement: Placement,
    /// Each pod the cycle tried there, in order.
    pub members: Vec<MemberRun>,
    /// PlacementFeasible's last status there (success: `minCount` reached).
    pub status: Status,
    /// Where the cycle stopped there.
    pub stop: GroupStop,
    /// The score, for a placement that fits when more than one does.
    pub score: Option<PlacementScore>,
    /// How many pods of the group the cycle placed there.
    pub placed_pods: usize,
    /// The cluster with the placement's pods assumed (the placement itself forgotten).
    pub assumed: Arc<Snapshot>,
    /// The cluster (limited to the placement) as the first pod that did not fit saw it.
    pub first_failure_on: Option<Arc<Snapshot>>,
}

impl PlacementTry {
    /// The group reaches `minCount` in this placement.
    pub fn fits(&self) -> bool {
        self.status.code() == Code::Success
    }

    /// The placement's status as an error (`AsError`), what "first placement status" shows: the
    /// group error when PlacementFeasible refused before any pod or left the group waiting,
    /// PlacementFeasible's own words when it stopped the cycle.
    pub fn status_as_error(&self) -> String {
        if self.stop == GroupStop::BeforeAnyPod || self.status.code() != Code::Unschedulable {
            ERR_POD_GROUP_UNSCHEDULABLE.to_owned()
        } else {
            self.status.message()
        }
    }
}

/// The pod group cycle over its placements.
#[derive(Debug)]
pub struct PlacementCycle {
    /// The PodGroup's topology key (`None`: one placement, the whole cluster).
    pub topology_key: Option<String>,
    /// Each placement tried, in the order tried (domain order).
    pub tries: Vec<PlacementTry>,
    /// The placement chosen (index into `tries`), when one fits.
    pub chosen: Option<usize>,
    /// The placements whose total equals the chosen one's (more than one: kube-scheduler picks
    /// among them at random; this engine takes the first).
    pub tied: Vec<String>,
    /// The generator's refusal (Unschedulable, no placement) or error; no placement was tried.
    pub refused: Option<Status>,
    /// A pod's cycle failed with an error in some placement: the cycle stops with it.
    pub error: Option<String>,
}

impl PlacementCycle {
    /// The try whose pods kube-scheduler reports: the chosen placement's, or the first one's when
    /// none fits.
    pub fn reported(&self) -> Option<&PlacementTry> {
        self.chosen.map_or(self.tries.first(), |i| self.tries.get(i))
    }

    /// The words kube-scheduler writes when no placement fits or none was generated, for the
    /// group of `pod` (`queued`: its queued pods).
    pub fn words(&self, fwk: &Framework, pod: &PodInfo, group: &str, queued: &[Arc<PodInfo>]) -> GroupWords {
        // DefaultPreemption's PodGroupPostFilter answers as without placements: its victim search
        // re-runs the group's cycle on the whole cluster (the placements of its re-run are not
        // modelled).
        let answer = super::pod_group_preemption::group_post_filter(fwk, pod.namespace(), group, queued);
        let post_filter = answer.status.message();
        let preemption = answer.preemption.map(Box::new);
        if let Some(refused) = &self.refused {
            let message = refused.message();
            return GroupWords {
                pod_that_fit: message.clone(),
                pod_not_reached: message.clone(),
                group: [message, post_filter].join(", "),
                preemption,
            };
        }
        let first = self
            .tries
            .first()
            .map(PlacementTry::status_as_error)
            .unwrap_or_default();
        let reason = no_placement_available(self.tries.len(), &first);
        let group_reasons = [
            ERR_POD_GROUP_UNSCHEDULABLE.to_owned(),
            reason.clone(),
            post_filter,
        ];
        let mut fit = vec![ERR_POD_GROUP_UNSCHEDULABLE.to_owned()];
        fit.extend(group_reasons.iter().cloned());
        GroupWords {
            pod_that_fit: fit.join(", "),
            pod_not_reached: [ERR_POD_GROUP_UNSCHEDULABLE, reason.as_str()].join(", "),
            group: group_reasons.join(", "),
            preemption,
        }
    }
}

/// Runs the group's cycle in each placement of the PodGroup `namespace/group` and picks the best.
pub fn run_placements(
    fwk: &Framework,
    namespace: &str,
    group: &str,
    min_count: i32,
    scheduled: usize,
    queued: &[Arc<PodInfo>],
    options: ScheduleOptions,
) -> PlacementCycle {
    let snapshot = fwk.snapshot();
    let mut cycle = PlacementCycle {
        topology_key: snapshot
            .pod_group(namespace, group)
            .and_then(|pg| topology_key(pg))
            .map(str::to_owned),
        tries: Vec::new(),
        chosen: None,
        tied: Vec::new(),
        refused: None,
        error: None,
    };
    let placements = match generate_placements(snapshot, namespace, group) {
        Ok(placements) => placements,
        Err(status) => {
            cycle.refused = Some(status);
            return cycle;
        }
    };
    for placement in placements {
        let limited = snapshot.with_placement(placement.nodes.iter().map(String::as_str));
        let in_placement = match fwk.on_snapshot(Arc::new(limited)) {
            Ok(f) => f,
            Err(e) => {
                cycle.error = Some(e.to_string());
                return cycle;
            }
        };
        let run: Run = run_members(&in_placement, min_count, scheduled, queued, options, None);
        let stop = run.stop_point();
        if let Stop::Error(message) = run.stop {
            cycle.error = Some(message);
            return cycle;
        }
        let mut assumed = (*run.placed).clone();
        assumed.forget_placement();
        cycle.tries.push(PlacementTry {
            placement,
            placed_pods: run.members.iter().filter(|m| m.placed_on.is_some()).count(),
            members: run.members,
            status: run.status,
            stop,
            score: None,
            assumed: Arc::new(assumed),
            first_failure_on: run.first_failure_on,
        });
    }
    choose(fwk, scheduled, &mut cycle);
    cycle
}

/// A placement that fits, as the PlacementScore plugins see it.
pub(super) struct ScoredCandidate<'a> {
    /// The group's pods running there: bound before the cycle plus placed by it.
    pub(super) group_pods: usize,
    /// The pods the cycle placed there.
    pub(super) placed: Vec<&'a Arc<PodInfo>>,
    /// The placement's nodes.
    pub(super) nodes: &'a [String],
}

/// `RunPlacementScorePlugins` over the placements that fit: PodGroupPodsCount (the group's pods
/// there, normalized against the most to 0–100, weight 1) and NodeResourcesFit (MostAllocated over
/// the placement's nodes with the placed pods on them, its profile weight).
pub(super) fn score_placements(fwk: &Framework, candidates: &[ScoredCandidate<'_>]) -> Vec<PlacementScore> {
    let fit_weight = fwk
        .profile
        .score
        .iter()
        .find(|(name, _)| name == names::NODE_RESOURCES_FIT)
        .map(|(_, weight)| *weight);
    let scorer = fit_weight
        .and_then(|_| placement_scorer(fwk.profile.plugin_args.get(names::NODE_RESOURCES_FIT)).ok());
    let counts: Vec<i64> = candidates
        .iter()
        .map(|c| i64::try_from(c.group_pods).unwrap_or(i64::MAX))
        .collect();
    let max_count = counts.iter().copied().max().unwrap_or(0).max(1);
    let snapshot = fwk.snapshot();
    candidates
        .iter()
        .zip(counts)
        .map(|(candidate, count)| {
            let pods_count = count * MAX_PLACEMENT_SCORE / max_count * POD_GROUP_PODS_COUNT_WEIGHT;
            let node_resources_fit = scorer.as_ref().zip(fit_weight).map(|(scorer, weight)| {
                let requests: Vec<Vec<i64>> = candidate
                    .placed
                    .iter()
                    .map(|p| scorer.pod_request_list(&p.pod))
                    .collect();
                let nodes: Vec<&crate::snapshot::NodeInfo> = candidate
                    .nodes
                    .iter()
                    .filter_map(|n| snapshot.node(n).map(|n| &**n))
                    .collect();
                scorer.placement_score(&requests, &nodes) * weight
            });
            PlacementScore {
                pod_group_pods_count: pods_count,
                node_resources_fit,
                total: pods_count + node_resources_fit.unwrap_or(0),
            }
        })
        .collect()
}

/// `findBestPodGroupPlacement`: one fitting placement is taken as it is; among several, the
/// highest PlacementScore total.
fn choose(fwk: &Framework, scheduled: usize, cycle: &mut PlacementCycle) {
    let fitting: Vec<usize> = (0..cycle.tries.len())
        .filter(|&i| cycle.tries[i].fits())
        .collect();
    match fitting.as_slice() {
        [] => return,
        [only] => {
            cycle.chosen = Some(*only);
            cycle.tied = vec![cycle.tries[*only].placement.name.clone()];
            return;
        }
        _ => {}
    }
    let candidates: Vec<ScoredCandidate<'_>> = fitting
        .iter()
        .map(|&i| {
            let try_ = &cycle.tries[i];
            ScoredCandidate {
                group_pods: scheduled + try_.placed_pods,
                placed: try_
                    .members
                    .iter()
                    .filter(|m| m.placed_on.is_some())
                    .map(|m| &m.pod)
                    .collect(),
                nodes: &try_.placement.nodes,
            }
        })
        .collect();
    for (&i, score) in fitting.iter().zip(score_placements(fwk, &candidates)) {
        cycle.tries[i].score = Some(score);
    }
    let total = |i: usize| cycle.tries[i].score.as_ref().map_or(0, |s| s.total);
    let best = fitting.iter().copied().map(total).max().unwrap_or(0);
    let tied: Vec<usize> = fitting.iter().copied().filter(|&i| total(i) == best).collect();
    cycle.chosen = tied.first().copied();
    cycle.tied = tied
        .iter()
        .map(|&i| cycle.tries[i].placement.name.clone())
        .collect();
}

/// The verdict on `pod` (asked about; one of `queued`) of its group's cycle over placements.
pub(super) fn placement_verdict(
    fwk: &Framework,
    pod: &PodInfo,
    group: &str,
    queued: &[Arc<PodInfo>],
    mut cycle: PlacementCycle,
    options: ScheduleOptions,
) -> GroupVerdict {
    if let Some(error) = &cycle.error {
        return GroupVerdict::Rejected(Status::error(error.clone()));
    }
    let words = cycle.words(fwk, pod, group, queued);
    let fits = cycle.chosen.is_some();
    let reported = cycle.chosen.unwrap_or(0);
    let Some(try_) = cycle.tries.get_mut(reported) else {
        return GroupVerdict::Rejected(refusal(&cycle, words.pod_not_reached));
    };
    let Some(index) = try_.members.iter().position(|m| m.pod.name() == pod.name()) else {
        // Not reached in the reported placement (PlacementFeasible stopped before it).
        return GroupVerdict::Rejected(Status::unschedulable(words.pod_not_reached));
    };
    if try_.members[index].placed_on.is_none() {
        return match try_.members[index].failure.take() {
            Some(failure) => GroupVerdict::PodFailed(failure),
            None => GroupVerdict::Rejected(Status::unschedulable(words.pod_not_reached)),
        };
    }
    if fits {
        GroupVerdict::InPlacement(Box::new(cycle_in_placement(fwk, try_, index, options)))
    } else {
        GroupVerdict::Rejected(Status::unschedulable(words.pod_that_fit))
    }
}

/// The generator's refusal as the pods get it: Unschedulable with its words, or the error.
fn refusal(cycle: &PlacementCycle, words: String) -> Status {
    match &cycle.refused {
        Some(status) if status.code() == Code::Error => Status::error(status.message()),
        _ => Status::unschedulable(words),
    }
}

/// The cycle of the `index`-th pod of `try_` as it ran in its placement: the placement's nodes
/// only, the group's pods before it assumed where the cycle put them.
pub(super) fn cycle_in_placement(
    fwk: &Framework,
    try_: &PlacementTry,
    index: usize,
    options: ScheduleOptions,
) -> CycleResult {
    let mut limited = fwk
        .snapshot()
        .with_placement(try_.placement.nodes.iter().map(String::as_str));
    for before in &try_.members[..index] {
        if let Some(node) = &before.placed_on {
            let mut placed = (*before.pod.pod).clone();
            placed.spec.get_or_insert_default().node_name = Some(node.clone());
            // The same placement was assumed once already: it cannot fail now.
            let _ = limited.assume_pod(Arc::new(PodInfo::with_features(Arc::new(placed), fwk.features())));
        }
    }
    let member = &try_.members[index].pod;
    match fwk.on_snapshot(Arc::new(limited)) {
        Ok(in_placement) => without_post_filter(pod_cycle(&in_placement, member, options)),
        Err(_) => without_post_filter(pod_cycle(fwk, member, options)),
    }
}

/// [`super::pod_group::pod_group_cycle`] over placements: the reported placement's pods (the
/// chosen one's, or the first one's when none fits) and the words kube-scheduler writes.
pub(super) fn group_cycle_over_placements(
    fwk: &Framework,
    namespace: &str,
    group: &str,
    min_count: i32,
    scheduled_before: usize,
    queued: Vec<Arc<PodInfo>>,
    options: ScheduleOptions,
) -> GroupCycle {
    let mut cycle = run_placements(
        fwk,
        namespace,
        group,
        min_count,
        scheduled_before,
        &queued,
        options,
    );
    // PodGroupPostFilter runs only when no placement fits.
    let words = match (&cycle.error, cycle.chosen) {
        (None, None) => queued
            .first()
            .map(|first| cycle.words(fwk, first, group, &queued)),
        _ => None,
    };
    let mut preemption = None;
    let (outcome, message, unreached_message) = match (&cycle.error, &cycle.refused, cycle.chosen, words) {
        (Some(error), _, _, _) => (Outcome::Error, error.clone(), String::new()),
        (None, Some(refused), _, _) if refused.code() == Code::Error => {
            (Outcome::Error, refused.message(), refused.message())
        }
        (None, _, Some(_), _) => (Outcome::Scheduled, String::new(), String::new()),
        (None, _, None, Some(words)) => {
            preemption = words.preemption;
            (Outcome::Unschedulable, words.pod_that_fit, words.pod_not_reached)
        }
        // No queued pod: every placement refused up front, and no PostFilter runs.
        (None, _, None, None) => {
            let first = cycle
                .tries
                .first()
                .map(PlacementTry::status_as_error)
                .unwrap_or_default();
            let message = [
                ERR_POD_GROUP_UNSCHEDULABLE,
                &no_placement_available(cycle.tries.len(), &first),
            ]
            .join(", ");
            (Outcome::Unschedulable, message.clone(), message)
        }
    };
    let reported = cycle.chosen.unwrap_or(0);
    let (members, placed, first_failure_on) = match cycle.tries.get_mut(reported) {
        Some(try_) => (
            std::mem::take(&mut try_.members),
            try_.assumed.clone(),
            try_.first_failure_on.clone(),
        ),
        None => (Vec::new(), fwk.snapshot().clone(), None),
    };
    GroupCycle {
        min_count,
        scheduled_before,
        queued,
        members,
        outcome,
        message,
        unreached_message,
        placed,
        first_failure_on,
        preemption,
        placements: Some(cycle),
    }
}

#[cfg(test)]
mod tests;
