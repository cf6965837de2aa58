//! The diagnosis of one evaluation: every filter that rejects each rejected node (kube-scheduler stops
//! at the first; here all run, diagnostic mode), each rejection explained by its plugin's explainer
//! down to the object at fault, nodes with the same explanation grouped into one [`Finding`], and the
//! changes that could lift them checked into hints ([`super::hints`]). explain, `explain --node`,
//! `-o json` and triage read this one result.

use std::collections::BTreeMap;

use rayon::prelude::*;
use serde::Serialize;

use super::change::Change;
use super::finding::{Context, Detail, Explained, Finding, ReasonCode};
use super::hints::{Candidate, VerifiedHint, verify};
use super::inter_pod_affinity::AffinityFacts;
use super::{inter_pod_affinity, taint_toleration};
use super::{
    node_affinity, node_ports, node_resources_fit, node_unschedulable, node_volume_limits,
    pod_topology_spread, volume_binding, volume_restrictions, volume_zone,
};
use crate::engine::{CycleState, Engine, FilterVerdict, Framework};
use crate::explain::Explanation;
use crate::plugins::helper::device_classes::DeviceClassResolver;
use crate::plugins::names;
use crate::{NodeInfo, PodInfo, Status};

/// The findings and the checked hints of one evaluation.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Report {
    /// One per plugin and explanation, with the nodes it concerns; plugins in the profile's filter
    /// order, then most nodes first.
    pub findings: Vec<Finding>,
    /// The changes that make the pod schedulable, smallest first (each applied to a copy of the
    /// cluster and checked by a scheduling cycle).
    pub hints: Vec<VerifiedHint>,
}

/// One rejection of one node.
struct NodeRejection {
    node: String,
    plugin: &'static str,
    status: Status,
    explained: Vec<Explained>,
}

/// Explains one plugin's rejection of a node; an empty answer becomes a [`ReasonCode::PluginRejected`]
/// finding with the plugin's own reasons.
fn explain_plugin(
    ctx: &Context<'_>,
    facts: &AffinityFacts,
    dra: &DeviceClassResolver,
    plugin: &str,
    node: &NodeInfo,
) -> Vec<Explained> {
    match plugin {
        names::NODE_AFFINITY => node_affinity::explain(ctx, node),
        names::TAINT_TOLERATION => taint_toleration::explain(ctx, node),
        names::NODE_UNSCHEDULABLE => node_unschedulable::explain(node),
        names::NODE_RESOURCES_FIT => node_resources_fit::explain(ctx, node, dra),
        names::NODE_PORTS => node_ports::explain(ctx, node),
        names::INTER_POD_AFFINITY => inter_pod_affinity::explain(ctx, facts, node),
        names::POD_TOPOLOGY_SPREAD => pod_topology_spread::explain(ctx, node),
        names::VOLUME_BINDING => volume_binding::explain(ctx, node),
        names::VOLUME_ZONE => volume_zone::explain(ctx, node),
        names::NODE_VOLUME_LIMITS => node_volume_limits::explain(ctx, node),
        names::VOLUME_RESTRICTIONS => volume_restrictions::explain(ctx, node),
        _ => Vec::new(),
    }
}

/// Every rejecting filter of every rejected node, explained (nothing when PreFilter rejected the pod:
/// no node was looked at).
fn rejections(
    fwk: &Framework,
    state: &CycleState,
    pod: &PodInfo,
    explanation: &Explanation,
) -> Vec<NodeRejection> {
    if explanation.pre_filter_message.is_some() {
        return Vec::new();
    }
    let snapshot = fwk.snapshot();
    let ctx = Context {
        pod,
        snapshot,
        features: fwk.features(),
        state,
    };
    let facts = AffinityFacts::new(&ctx);
    let dra = DeviceClassResolver::for_snapshot(snapshot);
    let rejected: Vec<&str> = explanation
        .nodes
        .iter()
        .filter(|n| !n.feasible)
        .map(|n| n.name.as_str())
        .collect();
    rejected
        .par_iter()
        .filter_map(|name| snapshot.node(name).map(|n| (*name, n)))
        .flat_map_iter(|(name, node)| {
            fwk.run_all_filter_plugins(state, pod, node)
                .into_iter()
                .filter_map(|(plugin, verdict)| match verdict {
                    FilterVerdict::Ran(s) if !s.is_success() => Some((plugin, s)),
                    _ => None,
                })
                .map(|(plugin, status)| NodeRejection {
                    node: name.to_string(),
                    plugin,
                    explained: explain_plugin(&ctx, &facts, &dra, plugin, node),
                    status,
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Diagnoses an evaluation: the findings, and the hints checked against `engine` (the profile's
/// framework over a changed copy of the cluster).
pub fn diagnose_pod(
    engine: &Engine,
    fwk: &Framework,
    state: &CycleState,
    pod: &PodInfo,
    explanation: &Explanation,
) -> Report {
    let rejections = rejections(fwk, state, pod, explanation);
    let reported: BTreeMap<&str, &str> = explanation
        .nodes
        .iter()
        .filter_map(|n| Some((n.name.as_str(), n.plugin.as_deref()?)))
        .collect();
    let order = |plugin: &str| {
        fwk.profile
            .filter
            .iter()
            .position(|p| p == plugin)
            .unwrap_or(usize::MAX)
    };

    let mut groups: BTreeMap<(usize, String, ReasonCode, String), Finding> = BTreeMap::new();
    let mut per_node: BTreeMap<&str, Vec<&NodeRejection>> = BTreeMap::new();
    for r in &rejections {
        per_node.entry(r.node.as_str()).or_default().push(r);
    }
    // A change for a node that only one plugin rejects is checked first: alone it may be enough (a
    // volume made for a node that also lacks cpu is not), and only the cheapest candidates are
    // checked.
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut shared_candidates: Vec<Candidate> = Vec::new();
    for r in &rejections {
        let alone = per_node.get(r.node.as_str()).is_some_and(|rs| rs.len() == 1);
        let is_reported = reported.get(r.node.as_str()) == Some(&r.plugin);
        let explained = if r.explained.is_empty() {
            vec![Explained {
                reason: ReasonCode::PluginRejected,
                message: r.status.reasons().join(", "),
                detail: Detail::Reasons,
                changes: Vec::new(),
            }]
        } else {
            r.explained.clone()
        };
        for e in explained {
            for change in &e.changes {
                let list = if alone {
                    &mut candidates
                } else {
                    &mut shared_candidates
                };
                list.push(Candidate {
                    change: change.clone(),
                    plugin: r.plugin.to_string(),
                    reason: e.reason,
                });
            }
            let key = (order(r.plugin), r.plugin.to_string(), e.reason, e.message.clone());
            let finding = groups.entry(key).or_insert_with(|| Finding {
                plugin: r.plugin.to_string(),
                reason: e.reason,
                nodes: Vec::new(),
                message: e.message.clone(),
                scheduler_reasons: Vec::new(),
                reported: true,
                detail: e.detail.clone(),
            });
            finding.nodes.push(r.node.clone());
            finding.reported &= is_reported;
            for reason in r.status.reasons() {
                if !finding.scheduler_reasons.contains(reason) {
                    finding.scheduler_reasons.push(reason.clone());
                }
            }
        }
    }
    candidates.append(&mut shared_candidates);
    // A node rejected by several plugins opens only when each of them is lifted: one change per
    // plugin, together.
    for rs in per_node.values() {
        if rs.len() < 2 {
            continue;
        }
        let firsts: Option<Vec<Change>> = rs
            .iter()
            .map(|r| r.explained.iter().find_map(|e| e.changes.first().cloned()))
            .collect();
        if let Some(changes) = firsts {
            candidates.push(Candidate {
                change: Change::All { changes },
                plugin: rs.iter().map(|r| r.plugin).collect::<Vec<_>>().join("+"),
                reason: rs[0]
                    .explained
                    .first()
                    .map_or(ReasonCode::PluginRejected, |e| e.reason),
            });
        }
    }
    let mut findings: Vec<Finding> = groups.into_values().collect();
    // Nodes by name within a finding (the node table's order); plugins in filter order, then most
    // nodes first, then the order the plugin checks its causes in (the reported one first), then by
    // the first node.
    for f in &mut findings {
        f.nodes.sort();
    }
    findings.sort_by(|a, b| {
        order(&a.plugin)
            .cmp(&order(&b.plugin))
            .then_with(|| b.nodes.len().cmp(&a.nodes.len()))
            .then_with(|| a.reason.cmp(&b.reason))
            .then_with(|| a.nodes.first().cmp(&b.nodes.first()))
            .then_with(|| a.message.cmp(&b.message))
    });
    Report {
        hints: verify(engine, fwk, pod, candidates),
        findings,
    }
}
