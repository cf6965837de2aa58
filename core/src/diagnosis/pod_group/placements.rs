//! `explain podgroup/NAME` under TopologyAwareWorkloadScheduling: which placement (topology
//! domain) the group's cycle chooses, and for each domain it tried, whether the whole group fits
//! there and, when it does not, what stops it — PlacementFeasible's words and the first pod that
//! did not fit there with kube-scheduler's message for it (counted on that domain's nodes).

use serde::Serialize;

use crate::schedule::placement::{PlacementCycle, PlacementScore};
use crate::schedule::pod_group::{GroupCycle, MemberRun};

/// Said when the words depend on the order kube-scheduler tries the domains in.
pub const FIRST_PLACEMENT_VARIES: &str = "kube-scheduler tries the domains in a random order and reports the \
     first one it tried: the \"first placement status\" may name another domain's result";

/// One domain the group's cycle tried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DomainVerdict {
    /// The domain (the topology label's value; empty for the whole cluster).
    pub domain: String,
    /// Its nodes.
    pub nodes: usize,
    /// The whole group (`minCount`) fits there.
    pub fits: bool,
    /// Pods of the group the cycle placed there.
    pub placed: usize,
    /// PlacementFeasible's words there when the group does not fit ("minCount (3) cannot be
    /// satisfied: 2 scheduled, 0 remaining"); empty when it fits.
    pub status: String,
    /// The first pod that did not fit there.
    pub first_unplaced: Option<String>,
    /// kube-scheduler's message for that pod in that domain ("0/2 nodes are available: …").
    pub first_unplaced_message: Option<String>,
    /// The placement scores, when more than one domain fits.
    pub score: Option<PlacementScore>,
}

/// The placements of the group's cycle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlacementReport {
    /// The PodGroup's topology key (null: one placement, the whole cluster).
    pub topology_key: Option<String>,
    /// The domain the cycle chooses, when the group fits one.
    pub chosen: Option<String>,
    /// Domains scoring as high as the chosen one (more than one: kube-scheduler picks at random).
    pub tied: Vec<String>,
    /// No domain was tried: the generator's words ("no feasible placements found") or error.
    pub refused: Option<String>,
    /// Each domain tried, in the order this engine tried them (domain names in order).
    pub domains: Vec<DomainVerdict>,
    /// What a reader should know about upstream's order (set when it changes the words).
    pub note: Option<String>,
}

impl PlacementReport {
    /// The placements in one line: the chosen domain, or none fits.
    pub fn summary(&self) -> String {
        let key = self.topology_key.as_deref().unwrap_or("the whole cluster");
        if let Some(refused) = &self.refused {
            return format!("placements by {key}: {refused}");
        }
        match &self.chosen {
            Some(chosen) if self.tied.len() > 1 => format!(
                "placement {key}={chosen} (tied with {}: kube-scheduler picks one of them at random)",
                self.tied
                    .iter()
                    .filter(|t| *t != chosen)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Some(chosen) => format!("placement {key}={chosen}"),
            None => format!(
                "the whole group fits in none of {} domains of {key}",
                self.domains.len()
            ),
        }
    }
}

/// The report of `cycle`'s placements; `None` when the cycle tried none (the gate is off).
pub fn placement_report(cycle: &GroupCycle) -> Option<PlacementReport> {
    let placements: &PlacementCycle = cycle.placements.as_ref()?;
    let reported = placements.chosen.unwrap_or(0);
    let domains: Vec<DomainVerdict> = placements
        .tries
        .iter()
        .enumerate()
        .map(|(i, t)| {
            // The reported domain's pods moved to the cycle itself.
            let members: &[MemberRun] = if i == reported { &cycle.members } else { &t.members };
            let first = members.iter().find(|m| m.placed_on.is_none());
            DomainVerdict {
                domain: t.placement.name.clone(),
                nodes: t.placement.nodes.len(),
                fits: t.fits(),
                placed: t.placed_pods,
                status: if t.fits() {
                    String::new()
                } else {
                    t.status.message()
                },
                first_unplaced: first.map(|m| m.pod.name().to_owned()),
                first_unplaced_message: first
                    .and_then(|m| m.failure.as_ref())
                    .map(|f| f.explanation.message.clone()),
                score: t.score.clone(),
            }
        })
        .collect();
    let differs = domains.iter().any(|d| !d.fits && d.status != domains[0].status);
    Some(PlacementReport {
        topology_key: placements.topology_key.clone(),
        chosen: placements
            .chosen
            .map(|i| placements.tries[i].placement.name.clone()),
        tied: if placements.tied.len() > 1 {
            placements.tied.clone()
        } else {
            Vec::new()
        },
        refused: placements.refused.as_ref().map(|s| s.message()),
        note: (placements.chosen.is_none() && differs).then(|| FIRST_PLACEMENT_VARIES.to_owned()),
        domains,
    })
}
