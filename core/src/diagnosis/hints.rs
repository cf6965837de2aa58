//! Hints that change the verdict: each candidate change is applied to a copy of the pod and the
//! cluster and the profile's scheduling cycle runs again; only a change after which the pod is
//! schedulable becomes a hint (a change that lifts one plugin's rejection while another still rejects
//! every node changes nothing a user sees, and is not offered). Smallest change first
//! ([`Change::cost`]), then the one that leaves the most nodes feasible.

use std::collections::BTreeSet;
use std::sync::Arc;

use rayon::prelude::*;
use serde::Serialize;

use super::change::Change;
use super::finding::ReasonCode;
use crate::PodInfo;
use crate::engine::{Engine, Framework, schedule};
use crate::explain::Outcome;

/// At most this many candidate changes are checked (the cheapest first): each costs one scheduling
/// cycle.
pub const MAX_CANDIDATES: usize = 32;

/// A change proposed by an explainer, before it is checked.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    pub change: Change,
    pub plugin: String,
    pub reason: ReasonCode,
}

/// A change that, applied, makes the pod schedulable.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerifiedHint {
    /// The change, as data.
    pub change: Change,
    /// The change in words.
    pub description: String,
    /// The plugin(s) whose rejection it lifts (`A+B` for a change to several).
    pub plugin: String,
    /// The finding's code it answers.
    pub reason: ReasonCode,
    /// How big a change it is ([`Change::cost`]).
    pub cost: usize,
    /// Where kube-scheduler would then put the pod (several when tied).
    pub schedules_on: Vec<String>,
    /// How many nodes are then feasible.
    pub feasible: usize,
}

/// Checks each candidate (deduplicated, the cheapest [`MAX_CANDIDATES`]) and keeps those after which
/// the pod is schedulable, ranked.
pub(crate) fn verify(
    engine: &Engine,
    fwk: &Framework,
    pod: &PodInfo,
    mut candidates: Vec<Candidate>,
) -> Vec<VerifiedHint> {
    candidates.sort_by_key(|c| c.change.cost());
    let mut seen = BTreeSet::new();
    candidates.retain(|c| seen.insert(c.change.describe()));
    candidates.truncate(MAX_CANDIDATES);
    let mut hints: Vec<VerifiedHint> = candidates
        .into_par_iter()
        .filter_map(|c| {
            let (changed_pod, changed_snapshot) = c.change.apply(&pod.pod, fwk.snapshot())?;
            let rebuilt;
            let fwk = match changed_snapshot {
                Some(s) => {
                    rebuilt = engine.framework(&fwk.profile, Arc::new(s)).ok()?;
                    &rebuilt
                }
                None => fwk,
            };
            let info = engine.pod_info(changed_pod);
            let e = schedule(fwk, &info, engine.schedule_options(false));
            (e.outcome == Outcome::Scheduled).then(|| VerifiedHint {
                description: c.change.describe(),
                cost: c.change.cost(),
                change: c.change,
                plugin: c.plugin,
                reason: c.reason,
                schedules_on: e.selected.clone(),
                feasible: e.feasible.len(),
            })
        })
        .collect();
    hints.sort_by(|a, b| {
        a.cost
            .cmp(&b.cost)
            .then_with(|| b.feasible.cmp(&a.feasible))
            .then_with(|| a.description.cmp(&b.description))
    });
    drop_dominated(hints)
}

/// Drops each hint that asks more than another working one ([`Change::asks_no_more_than`]: lowering
/// cpu to 400m when 2500m is enough, a toleration plus a smaller request when the smaller request
/// alone is enough); of two that ask the same, the first ranked stays.
fn drop_dominated(hints: Vec<VerifiedHint>) -> Vec<VerifiedHint> {
    let dominated = |i: usize, h: &VerifiedHint| {
        hints.iter().enumerate().any(|(j, g)| {
            j != i
                && g.change.asks_no_more_than(&h.change)
                && (j < i || !h.change.asks_no_more_than(&g.change))
        })
    };
    let keep: Vec<bool> = hints.iter().enumerate().map(|(i, h)| !dominated(i, h)).collect();
    hints
        .into_iter()
        .zip(keep)
        .filter_map(|(h, keep)| keep.then_some(h))
        .collect()
}
