//! Every blocker on every node, and the smallest changes that make a pod fit somewhere.
//!
//! kube-scheduler stops at the first filter that rejects a node; here every filter runs on every
//! rejected node (diagnostic mode, marked as such in the output), so a change is only proposed when it
//! removes the node's *only* blocker: a node that needs a toleration and more cpu is not opened by
//! either alone. Fixes are ranked by how small a change they are (a smaller request, a toleration,
//! uncordoning, relaxing anti-affinity), then by how many nodes they open.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use sched_core::diagnosis::{DeviceClassResolver, Shortfall, pod_tolerations, shortfall_with_dra};
use sched_core::engine::{CycleState, Framework};
use sched_core::explain::Explanation;
use sched_core::plugins::names;
use sched_core::resource::{PODS, format_amount};
use sched_core::triage::{NodeRejections, diagnostic_rejections, rejected_nodes};
use sched_core::{PodInfo, Snapshot};
use serde::Serialize;

use crate::diagnosis::hints::{
    MAX_NAMES, missing_share, name_list, taint_text, toleration_snippet, untolerated_taints,
};

/// What kind of change a fix is, smallest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FixKind {
    /// Ask for less of a resource.
    LowerRequest,
    /// Tolerate a node taint.
    AddToleration,
    /// Let new pods onto a cordoned node.
    Uncordon,
    /// Make required pod anti-affinity preferred (or drop it).
    RelaxAntiAffinity,
}

/// One change that makes the pod fit on at least one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fix {
    /// The kind of change.
    pub kind: FixKind,
    /// The change, in words.
    pub change: String,
    /// The nodes it opens (where it removes the only blocker).
    pub opens: Vec<String>,
    /// YAML to add to the pod, when there is some.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snippet: Option<String>,
}

/// A set of filters that reject the same nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Blockers {
    /// The filters (every one that rejects, not only the first).
    pub plugins: Vec<String>,
    /// How many nodes.
    pub nodes: usize,
    /// Up to [`MAX_NAMES`] of them.
    pub examples: Vec<String>,
}

/// Every blocker per rejected node, and the fixes they allow.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Diagnosis {
    /// Nodes grouped by the set of filters that reject them, most nodes first.
    pub blockers: Vec<Blockers>,
    /// The fixes, smallest change first.
    pub fixes: Vec<Fix>,
    /// Every rejected node's rejections (what the groups and fixes were made of; triage's root cause
    /// reads them).
    #[serde(skip)]
    pub rejections: Vec<NodeRejections>,
}

/// Diagnoses an unschedulable evaluation (nothing when PreFilter rejected the pod: no node was
/// looked at).
pub fn diagnose(
    e: &Explanation,
    fwk: &Framework,
    state: &CycleState,
    pod: &PodInfo,
    snapshot: &Snapshot,
) -> Diagnosis {
    if e.pre_filter_message.is_some() {
        return Diagnosis::default();
    }
    let rejected = rejected_nodes(e, snapshot);
    let rejections = diagnostic_rejections(fwk, state, pod, &rejected);
    let per_node: Vec<(&str, Vec<&'static str>)> = rejections
        .iter()
        .map(|r| (r.node.as_str(), r.plugins()))
        .collect();

    let mut groups: BTreeMap<Vec<&'static str>, Vec<&str>> = BTreeMap::new();
    let mut only: BTreeMap<&'static str, Vec<&str>> = BTreeMap::new();
    let tolerations = pod_tolerations(&pod.pod);
    for (name, plugins) in &per_node {
        if let [single] = plugins.as_slice() {
            only.entry(single).or_default().push(name);
        } else if cordon_is_the_only_blocker(plugins, snapshot, name, tolerations) {
            only.entry(names::NODE_UNSCHEDULABLE).or_default().push(name);
        }
        groups.entry(plugins.clone()).or_default().push(name);
    }
    let mut blockers: Vec<Blockers> = groups
        .into_iter()
        .filter(|(plugins, _)| !plugins.is_empty())
        .map(|(plugins, nodes)| Blockers {
            plugins: plugins.iter().map(|p| p.to_string()).collect(),
            nodes: nodes.len(),
            examples: nodes.iter().take(MAX_NAMES).map(|n| n.to_string()).collect(),
        })
        .collect();
    blockers.sort_by(|a, b| b.nodes.cmp(&a.nodes).then_with(|| a.plugins.cmp(&b.plugins)));

    let mut fixes = Vec::new();
    let no_nodes = Vec::new();
    fixes.extend(lower_request(
        pod,
        snapshot,
        only.get(names::NODE_RESOURCES_FIT).unwrap_or(&no_nodes),
    ));
    fixes.extend(add_toleration(
        pod,
        snapshot,
        only.get(names::TAINT_TOLERATION).unwrap_or(&no_nodes),
    ));
    if let Some(nodes) = only.get(names::NODE_UNSCHEDULABLE) {
        let names: Vec<String> = nodes.iter().map(|n| n.to_string()).collect();
        fixes.push(Fix {
            kind: FixKind::Uncordon,
            change: format!(
                "uncordon {} (kubectl uncordon NODE)",
                name_list(&names, MAX_NAMES)
            ),
            opens: names,
            snippet: None,
        });
    }
    if let Some(nodes) = only.get(names::INTER_POD_AFFINITY)
        && pod.has_required_anti_affinity()
    {
        let names: Vec<String> = nodes.iter().map(|n| n.to_string()).collect();
        fixes.push(Fix {
            kind: FixKind::RelaxAntiAffinity,
            change: "make the pod's required anti-affinity preferred \
                     (preferredDuringSchedulingIgnoredDuringExecution), or relax its topologyKey"
                .to_string(),
            opens: names,
            snippet: None,
        });
    }
    fixes.sort_by(|a, b| {
        a.kind
            .cmp(&b.kind)
            .then_with(|| b.opens.len().cmp(&a.opens.len()))
    });
    Diagnosis {
        blockers,
        fixes,
        rejections,
    }
}

/// `kubectl cordon` sets spec.unschedulable and the node controller adds the
/// `node.kubernetes.io/unschedulable` taint: a node rejected by NodeUnschedulable and by that taint
/// alone is opened by uncordoning it.
fn cordon_is_the_only_blocker(
    plugins: &[&str],
    snapshot: &Snapshot,
    name: &str,
    tolerations: &[k8s_openapi::api::core::v1::Toleration],
) -> bool {
    let mut sorted = plugins.to_vec();
    sorted.sort_unstable();
    if sorted != [names::NODE_UNSCHEDULABLE, names::TAINT_TOLERATION] {
        return false;
    }
    snapshot.node(name).is_some_and(|node| {
        untolerated_taints(node, tolerations, snapshot.features())
            .iter()
            .all(|t| t.key == UNSCHEDULABLE_TAINT)
    })
}

/// The taint the node lifecycle controller puts on cordoned nodes.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// The smallest request that fits on one of `nodes` (nodes that fail only on resources): the node
/// where the requests must shrink least, and how many of them that request opens.
fn lower_request(pod: &PodInfo, snapshot: &Snapshot, nodes: &[&str]) -> Option<Fix> {
    let dra = DeviceClassResolver::for_snapshot(snapshot);
    let shortfalls: Vec<(&str, Vec<Shortfall>)> = nodes
        .iter()
        .filter_map(|name| {
            let node = snapshot.node(name)?;
            Some((
                *name,
                shortfall_with_dra(node, pod, Some(&dra), snapshot.features()),
            ))
        })
        // The pod count cannot be lowered; nothing free means there is nothing to fit into.
        .filter(|(_, s)| !s.is_empty() && s.iter().all(|s| s.resource != PODS && s.free > 0))
        .collect();
    let (best, short) = shortfalls.iter().min_by(|(a, x), (b, y)| {
        missing_share(x)
            .total_cmp(&missing_share(y))
            .then_with(|| a.cmp(b))
    })?;
    // The lowered requests: what the best node has free of each short resource.
    let lowered: BTreeMap<&str, i64> = short.iter().map(|s| (s.resource.as_str(), s.free)).collect();
    let opens: Vec<String> = shortfalls
        .iter()
        .filter(|(_, s)| {
            s.iter()
                .all(|s| lowered.get(s.resource.as_str()).is_some_and(|&v| v <= s.free))
        })
        .map(|(n, _)| n.to_string())
        .collect();
    let parts: Vec<String> = short
        .iter()
        .map(|s| {
            format!(
                "{} from {} to {}",
                s.resource,
                format_amount(&s.resource, s.requested),
                format_amount(&s.resource, s.free)
            )
        })
        .collect();
    Some(Fix {
        kind: FixKind::LowerRequest,
        change: format!(
            "lower the request{}: {} (then it fits on {best})",
            if parts.len() == 1 { "" } else { "s" },
            parts.join(", ")
        ),
        opens,
        snippet: None,
    })
}

/// Taints Kubernetes itself puts on nodes (control plane, node conditions, cordon, cloud
/// initialisation): never proposed as a toleration (the diagnosis layer's one rule).
fn is_system_taint(key: &str) -> bool {
    sched_core::diagnosis::system_taint_owner(key).is_some()
}

/// One toleration per set of untolerated taints on nodes that fail only on them, the set that opens
/// the most nodes first.
fn add_toleration(pod: &PodInfo, snapshot: &Snapshot, nodes: &[&str]) -> Vec<Fix> {
    let tolerations = pod_tolerations(&pod.pod);
    let mut groups: BTreeMap<Vec<String>, (Vec<Taint>, Vec<String>)> = BTreeMap::new();
    for name in nodes {
        let Some(node) = snapshot.node(name) else {
            continue;
        };
        let untolerated = untolerated_taints(node, tolerations, snapshot.features());
        // Tolerating a control-plane or node-condition taint is not a fix anyone should make.
        if untolerated.is_empty() || untolerated.iter().any(|t| is_system_taint(&t.key)) {
            continue;
        }
        let key = untolerated.iter().map(taint_text).collect();
        groups
            .entry(key)
            .or_insert_with(|| (untolerated, Vec::new()))
            .1
            .push(name.to_string());
    }
    groups
        .into_iter()
        .map(|(texts, (taints, opens))| Fix {
            kind: FixKind::AddToleration,
            change: format!("tolerate {}", texts.join(", ")),
            opens,
            snippet: Some(toleration_snippet(&taints)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sched_core::Engine;
    use sched_core::engine::{ScheduleOptions, schedule_cycle};
    use sched_core::testing::{node, pod};
    use std::sync::Arc;

    fn diagnosis(nodes: Vec<k8s_openapi::api::core::v1::Node>, p: PodInfo) -> Diagnosis {
        let snapshot = Arc::new(Snapshot::new(sched_core::ClusterObjects {
            nodes,
            pods: vec![pod("busy").cpu("1500m").node("small").obj()],
            ..Default::default()
        }));
        let engine = Engine::default();
        let fwk = engine
            .framework(engine.profile("").unwrap(), snapshot.clone())
            .unwrap();
        let c = schedule_cycle(&fwk, &p, ScheduleOptions::default());
        diagnose(&c.explanation, &fwk, &c.state, &p, &snapshot)
    }

    #[test]
    fn fixes_remove_a_nodes_only_blocker_smallest_change_first() {
        let d = diagnosis(
            vec![
                node("small").cpu("2").obj(),
                node("tainted")
                    .cpu("8")
                    .taint("dedicated", "gpu", "NoSchedule")
                    .obj(),
                node("cordoned")
                    .cpu("8")
                    .with(|n| n.spec.get_or_insert_with(Default::default).unschedulable = Some(true))
                    .obj(),
                // Two blockers: neither fix alone opens it.
                node("both")
                    .cpu("500m")
                    .taint("dedicated", "gpu", "NoSchedule")
                    .obj(),
            ],
            pod("p").cpu("1").info(),
        );
        let kinds: Vec<FixKind> = d.fixes.iter().map(|f| f.kind).collect();
        assert_eq!(
            kinds,
            [FixKind::LowerRequest, FixKind::AddToleration, FixKind::Uncordon]
        );
        assert_eq!(
            d.fixes[0].change,
            "lower the request: cpu from 1 to 500m (then it fits on small)"
        );
        assert_eq!(d.fixes[0].opens, ["small"]);
        assert_eq!(d.fixes[1].change, "tolerate dedicated=gpu:NoSchedule");
        assert_eq!(d.fixes[1].opens, ["tainted"]);
        assert_eq!(d.fixes[2].opens, ["cordoned"]);
        let both = d.blockers.iter().find(|b| b.examples == ["both"]).unwrap();
        // In the profile's filter order.
        assert_eq!(both.plugins, ["TaintToleration", "NodeResourcesFit"]);
    }

    #[test]
    fn a_request_bigger_than_every_node_is_lowered_to_what_is_free() {
        // 1500m of 2 used on "small": 500m free, the pod asks 3; nothing else blocks.
        let d = diagnosis(vec![node("small").cpu("2").obj()], pod("p").cpu("3").info());
        assert_eq!(
            d.fixes[0].change,
            "lower the request: cpu from 3 to 500m (then it fits on small)"
        );
    }

    #[test]
    fn a_cordoned_nodes_own_taint_is_part_of_the_cordon() {
        let cordoned = node("cordoned")
            .cpu("8")
            .taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
            .with(|n| n.spec.get_or_insert_with(Default::default).unschedulable = Some(true))
            .obj();
        let d = diagnosis(vec![cordoned], pod("p").cpu("1").info());
        assert_eq!(d.fixes.len(), 1, "{:?}", d.fixes);
        assert_eq!(d.fixes[0].kind, FixKind::Uncordon);
        assert_eq!(d.fixes[0].opens, ["cordoned"]);
    }
}
