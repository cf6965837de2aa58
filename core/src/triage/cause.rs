//! A group's root cause: what must change for its pods to schedule, not the filter kube-scheduler
//! happened to run first.
//!
//! kube-scheduler's FailedScheduling counts name, per node, the *first* filter that rejected it: a
//! pod that needs a PersistentVolume that does not exist, on nodes also short of cpu, is counted as
//! `Insufficient cpu` everywhere (NodeResourcesFit runs before VolumeBinding), although adding cpu
//! would open no node. In diagnostic mode every filter runs on every node ([`diagnostic_rejections`]),
//! and [`root_cause`] ranks the rejecting plugins by what changing each would do:
//!
//! 1. a PreFilter rejection: it holds before any node is looked at, so it must change whatever the
//!    nodes (a missing PVC, an unbound immediate claim, a claim of an unknown DeviceClass);
//! 2. a plugin that rejects *every* node: no node opens until it changes. Among several, the pod's
//!    own objects first (VolumeBinding, DynamicResources: no change to a node creates a missing
//!    PersistentVolume or device), then unresolvable rejections (preemption cannot lift them), then
//!    the rest;
//! 3. a plugin that is the *only* rejection on some node: changing it alone opens that node (the
//!    most such nodes first). The cluster's background does not count here: the taints Kubernetes
//!    itself puts on nodes (control plane, node conditions, cloud initialisation), which no pod
//!    should tolerate, and cordoned nodes. A taint someone put on a pool (`dedicated=gpu`) is no
//!    background: tolerating it is what a pod meant for that pool must do;
//! 4. otherwise (every node has several blockers, none common to all) the plugin that rejects the
//!    most nodes (background rejections not counted), a plugin that only ever rejects for the
//!    background last.
//!
//! The cause's words are the plugin's own reason (the one it gives on most of the nodes it rejects).

use std::collections::BTreeMap;
use std::sync::Arc;

use rayon::prelude::*;
use serde::Serialize;

use crate::engine::{CycleState, FilterVerdict, Framework};
use crate::explain::Explanation;
use crate::plugins::helper::taints::{
    do_not_schedule_taints_filter, node_taints, pod_tolerations, system_taint_owner,
    tolerations_tolerate_taint,
};
use crate::plugins::names;
use crate::snapshot::{NodeInfo, PodInfo, Snapshot};
use crate::{Code, Status};

/// Plugins whose rejection is about the pod's own objects (PersistentVolumes, devices): changing a
/// node's labels, taints or capacity does not create what is missing.
const POD_OBJECT_PLUGINS: &[&str] = &[names::VOLUME_BINDING, names::DYNAMIC_RESOURCES];

/// One filter's rejection of a node.
#[derive(Debug, Clone)]
pub struct Rejection {
    /// The filter.
    pub plugin: &'static str,
    /// Its status.
    pub status: Status,
    /// The rejection describes the cluster rather than the pod: a cordoned node, or taints that
    /// Kubernetes itself owns (see the module's rule); a root cause only when nothing else explains
    /// as much.
    pub background: bool,
}

/// Every filter that rejects one node (diagnostic mode: kube-scheduler stops at the first).
#[derive(Debug, Clone)]
pub struct NodeRejections {
    /// The node.
    pub node: String,
    /// Each rejecting filter, in the profile's filter order.
    pub rejections: Vec<Rejection>,
}

impl NodeRejections {
    /// The rejecting plugins, in filter order.
    pub fn plugins(&self) -> Vec<&'static str> {
        self.rejections.iter().map(|r| r.plugin).collect()
    }
}

/// Whether `plugin`'s rejection of `node` is the cluster's background: a cordon, or untolerated
/// taints that are all Kubernetes' own.
fn is_background(fwk: &Framework, pod: &PodInfo, node: &NodeInfo, plugin: &str) -> bool {
    match plugin {
        names::NODE_UNSCHEDULABLE => true,
        names::TAINT_TOLERATION => {
            let comparison = fwk.features().taint_toleration_comparison_operators;
            let tolerations = pod_tolerations(&pod.pod);
            let mut untolerated = node_taints(&node.node).iter().filter(|t| {
                do_not_schedule_taints_filter(t) && !tolerations_tolerate_taint(tolerations, t, comparison)
            });
            untolerated.all(|t| system_taint_owner(&t.key).is_some())
        }
        _ => false,
    }
}

/// The nodes `e` rejected, as `snapshot` holds them (what [`diagnostic_rejections`] looks at).
pub fn rejected_nodes(e: &Explanation, snapshot: &Snapshot) -> Vec<Arc<NodeInfo>> {
    e.nodes
        .iter()
        .filter(|n| !n.feasible)
        .filter_map(|n| snapshot.node(&n.name).cloned())
        .collect()
}

/// Runs every filter on each of `nodes` (the nodes the cycle rejected) with the cycle's `state`;
/// nodes not in the snapshot are left out.
pub fn diagnostic_rejections(
    fwk: &Framework,
    state: &CycleState,
    pod: &PodInfo,
    nodes: &[Arc<NodeInfo>],
) -> Vec<NodeRejections> {
    nodes
        .par_iter()
        .map(|node| NodeRejections {
            node: node.name().to_string(),
            rejections: fwk
                .run_all_filter_plugins(state, pod, node)
                .into_iter()
                .filter_map(|(plugin, v)| match v {
                    FilterVerdict::Ran(status) if !status.is_success() => Some(Rejection {
                        plugin,
                        background: is_background(fwk, pod, node, plugin),
                        status,
                    }),
                    _ => None,
                })
                .collect(),
        })
        .collect()
}

/// Why a cause was chosen (see the module's rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CauseBasis {
    /// PreFilter rejected the pod before any node was looked at.
    PreFilter,
    /// The plugin rejects every node.
    EveryNode,
    /// The plugin is the only rejection on some nodes: changing it alone opens them.
    OnlyBlocker,
    /// No node is opened by one change a pod should make (each has several blockers, or only the
    /// cluster's background); the plugin rejects the most nodes.
    MostNodes,
}

/// What must change for a group's pods to schedule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RootCause {
    /// The plugin (none for a PreFilter rejection, whose message already says what is missing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    /// The reason, in the plugin's words.
    pub reason: String,
    /// Why this one.
    pub basis: CauseBasis,
    /// The nodes it rejects (none for PreFilter: it rejects the pod, not nodes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<usize>,
    /// The nodes where it is the only rejection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub only_blocker_on: Option<usize>,
}

impl RootCause {
    /// Why this cause, in words, for the text output.
    pub fn why(&self, nodes_total: usize) -> String {
        let plugin = self.plugin.as_deref().unwrap_or("PreFilter");
        match self.basis {
            CauseBasis::PreFilter => {
                "a PreFilter plugin rejects the pod before any node is looked at: it must change whatever \
                 the nodes"
                    .to_string()
            }
            CauseBasis::EveryNode => format!(
                "{plugin} rejects all {nodes_total} nodes (every filter run): no node opens until it changes, \
                 whatever else also fails"
            ),
            CauseBasis::OnlyBlocker => format!(
                "{plugin} is the only filter rejecting {} of {nodes_total} nodes: changing it alone opens them",
                self.only_blocker_on.unwrap_or(0)
            ),
            CauseBasis::MostNodes => format!(
                "no single change a pod should make opens a node; {plugin} rejects the most ({} of {nodes_total})",
                self.nodes.unwrap_or(0)
            ),
        }
    }
}

/// What one plugin does across the rejected nodes.
struct Candidate {
    plugin: &'static str,
    /// When it was first seen (nodes in order, each node's filters in filter order): the last tie
    /// breaker.
    order: usize,
    /// The nodes it rejects.
    nodes: usize,
    /// The nodes where its rejection is not the cluster's background.
    fixable: usize,
    /// The nodes where it is the only rejection, and not the cluster's background: changing it
    /// alone opens them.
    only: usize,
    /// The nodes where it is the only rejection, and the cluster's background (a cordon, a
    /// control-plane taint): it alone keeps them, but no pod should change to get there.
    only_background: usize,
    unresolvable: bool,
    reasons: BTreeMap<String, usize>,
}

impl Candidate {
    /// Every one of its rejections is the cluster's background.
    fn background(&self) -> bool {
        self.fixable == 0
    }

    /// The nodes it alone keeps the pod from, as reported: the ones whose change is a pod's to make,
    /// else (a background cause) the others.
    fn only_blocker_on(&self) -> usize {
        if self.only > 0 {
            self.only
        } else {
            self.only_background
        }
    }

    /// The tier of the module's rule (lower first).
    fn tier(&self, nodes_total: usize) -> u8 {
        let every = nodes_total > 0 && self.nodes == nodes_total;
        match () {
            _ if every && POD_OBJECT_PLUGINS.contains(&self.plugin) => 0,
            _ if every && self.unresolvable => 1,
            _ if every => 2,
            _ if self.only > 0 => 3,
            _ if !self.background() => 4,
            _ => 5,
        }
    }

    /// The reason it gives on the most nodes (ties: alphabetical).
    fn reason(&self) -> String {
        self.reasons
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
            .map(|(r, _)| r.clone())
            .unwrap_or_else(|| format!("rejected by {}", self.plugin))
    }
}

/// The root cause of an unschedulable evaluation: `pre_filter` is the PreFilter rejection's message
/// (then it is the cause), `rejected` every node's rejections in diagnostic mode, `nodes_total` the
/// cluster's nodes (a plugin "rejects every node" only when all of them are in `rejected`). None
/// when nothing rejects anything.
pub fn root_cause(
    pre_filter: Option<&str>,
    rejected: &[NodeRejections],
    nodes_total: usize,
) -> Option<RootCause> {
    if let Some(message) = pre_filter {
        return Some(RootCause {
            plugin: None,
            reason: message.to_string(),
            basis: CauseBasis::PreFilter,
            nodes: None,
            only_blocker_on: None,
        });
    }
    let mut candidates: Vec<Candidate> = Vec::new();
    for node in rejected {
        let only = node.rejections.len() == 1;
        for rejection in &node.rejections {
            let (plugin, status) = (rejection.plugin, &rejection.status);
            let i = match candidates.iter().position(|c| c.plugin == plugin) {
                Some(i) => i,
                None => {
                    candidates.push(Candidate {
                        plugin,
                        order: candidates.len(),
                        nodes: 0,
                        fixable: 0,
                        only: 0,
                        only_background: 0,
                        unresolvable: false,
                        reasons: BTreeMap::new(),
                    });
                    candidates.len() - 1
                }
            };
            let c = &mut candidates[i];
            c.nodes += 1;
            if rejection.background {
                c.only_background += usize::from(only);
            } else {
                c.fixable += 1;
                c.only += usize::from(only);
            }
            c.unresolvable |= status.code() == Code::UnschedulableAndUnresolvable;
            for r in status.reasons() {
                *c.reasons.entry(r.clone()).or_default() += 1;
            }
        }
    }
    // Only nodes whose rejections were all seen count towards "every node".
    let total = if rejected.len() == nodes_total {
        nodes_total
    } else {
        usize::MAX
    };
    let best = candidates.iter().min_by(|a, b| {
        a.tier(total)
            .cmp(&b.tier(total))
            .then(b.only.cmp(&a.only))
            .then(b.fixable.cmp(&a.fixable))
            .then(b.nodes.cmp(&a.nodes))
            .then(a.order.cmp(&b.order))
    })?;
    let only_blocker_on = best.only_blocker_on();
    let basis = match best.tier(total) {
        0..=2 => CauseBasis::EveryNode,
        _ if only_blocker_on > 0 => CauseBasis::OnlyBlocker,
        _ => CauseBasis::MostNodes,
    };
    Some(RootCause {
        plugin: Some(best.plugin.to_string()),
        reason: best.reason(),
        basis,
        nodes: Some(best.nodes),
        only_blocker_on: (only_blocker_on > 0).then_some(only_blocker_on),
    })
}

#[cfg(test)]
mod tests;
