//! Hints beyond what kube-scheduler says: how much a node is short of, the toleration that would let
//! the pod onto a tainted node, and when the answer depends on node sampling, a random tie or the
//! nominated node's fast path.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use sched_core::diagnosis::{
    DeviceClassResolver, Shortfall, do_not_schedule_taints_filter, node_taints, pod_tolerations,
    shortfall_with_dra, tolerations_tolerate_taint,
};
use sched_core::engine::{CycleState, FilterVerdict, Framework};
use sched_core::explain::{Explanation, Outcome};
use sched_core::features::FeatureGates;
use sched_core::plugins::names;
use sched_core::resource::{PODS, format_amount};
use sched_core::{NodeInfo, PodInfo, Snapshot, Status};
use serde::Serialize;

/// At most this many nodes get a resource hint of their own (the closest to fitting); the rest are
/// counted.
pub const MAX_RESOURCE_HINTS: usize = 10;
/// Node lists in messages name at most this many nodes, then count the rest.
pub const MAX_NAMES: usize = 5;

/// `a, b, c`, or `a, b, c, d, e and 7 more` past `max` names.
pub fn name_list(names: &[String], max: usize) -> String {
    if names.len() <= max {
        return names.join(", ");
    }
    format!("{} and {} more", names[..max].join(", "), names.len() - max)
}

/// What a hint is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HintKind {
    /// A node fails only on resources: how much is missing.
    Resources,
    /// A node has a taint the pod does not tolerate: the toleration that would match.
    Toleration,
    /// A node is cordoned.
    Cordoned,
    /// A PreFilter plugin rejected the pod before any node was looked at.
    PreFilter,
    /// kube-scheduler would stop filtering early (percentageOfNodesToScore).
    Sampling,
    /// Several nodes share the top score.
    Tie,
    /// The pod's nominated node is tried first.
    NominatedNode,
    /// The pod is being deleted.
    Terminating,
    /// Why the pod's ResourceClaims cannot get devices (DynamicResources).
    ResourceClaims,
}

/// One hint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hint {
    /// What it is about.
    pub kind: HintKind,
    /// The nodes it concerns (empty when it is about the pod).
    pub nodes: Vec<String>,
    /// The hint.
    pub message: String,
    /// YAML to add to the pod, when there is some.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snippet: Option<String>,
}

/// What the hints are computed from.
pub struct HintInput<'a> {
    /// The evaluation (for a gated pod, the one without its gates).
    pub explanation: &'a Explanation,
    /// The cycle state it left.
    pub state: &'a CycleState,
    /// The pod.
    pub pod: &'a PodInfo,
    /// The snapshot.
    pub snapshot: &'a Snapshot,
    /// The profile's framework, for filter verdicts past the first rejection.
    pub framework: &'a Framework,
}

/// Every filter that rejects `node` with its status, all of them run (kube-scheduler stops at the
/// first): diagnostic mode, for hints and fixes.
pub fn rejecting_filters(
    framework: &Framework,
    state: &CycleState,
    pod: &PodInfo,
    node: &NodeInfo,
) -> Vec<(&'static str, Status)> {
    framework
        .run_all_filter_plugins(state, pod, node)
        .into_iter()
        .filter_map(|(name, v)| match v {
            FilterVerdict::Ran(s) if !s.is_success() => Some((name, s)),
            _ => None,
        })
        .collect()
}

/// The filters that reject `node` besides `except`.
fn other_rejections(input: &HintInput<'_>, node: &NodeInfo, except: &str) -> Vec<(&'static str, Status)> {
    let mut rejections = rejecting_filters(input.framework, input.state, input.pod, node);
    rejections.retain(|(name, _)| *name != except);
    rejections
}

/// How far a node is from fitting: the share of each request that is missing, summed.
pub fn missing_share(short: &[Shortfall]) -> f64 {
    short
        .iter()
        .map(|s| s.missing() as f64 / (s.requested.max(1) as f64))
        .sum()
}

/// All hints, most specific first.
pub fn hints(input: &HintInput<'_>) -> Vec<Hint> {
    let mut out = Vec::new();
    let e = input.explanation;
    if input.pod.is_terminating() {
        out.push(Hint {
            kind: HintKind::Terminating,
            nodes: Vec::new(),
            message: "the pod is being deleted (metadata.deletionTimestamp is set): kube-scheduler skips it"
                .to_string(),
            snippet: None,
        });
    }
    if let Some(msg) = &e.pre_filter_message {
        let plugin = e
            .nodes
            .first()
            .and_then(|n| n.plugin.as_deref())
            .unwrap_or("a PreFilter plugin");
        out.push(Hint {
            kind: HintKind::PreFilter,
            nodes: Vec::new(),
            message: format!("{plugin} rejected the pod before any node was evaluated: {msg}"),
            snippet: None,
        });
        // Without a successful PreFilter there is no cycle state to run filters on.
        return finish(out, e);
    }
    // Why other nodes were rejected only matters when no node fits.
    if e.outcome != Outcome::Scheduled {
        out.extend(resource_hints(input));
        out.extend(toleration_hints(input));
        out.extend(cordon_hints(input));
    }
    finish(out, e)
}

fn finish(mut out: Vec<Hint>, e: &Explanation) -> Vec<Hint> {
    if let Some(node) = &e.nominated_node_fast_path {
        out.push(Hint {
            kind: HintKind::NominatedNode,
            nodes: vec![node.clone()],
            message: format!(
                "the pod's status.nominatedNodeName is {node} and it fits there: kube-scheduler tries \
                 that node first and takes it without scoring the others"
            ),
            snippet: None,
        });
    }
    if e.tie {
        out.push(Hint {
            kind: HintKind::Tie,
            nodes: e.selected.clone(),
            message: format!(
                "{} nodes share the top score{}: kube-scheduler picks one of them at random",
                e.selected.len(),
                e.selected_score.map(|s| format!(" {s}")).unwrap_or_default()
            ),
            snippet: None,
        });
    }
    if e.sampling.answer_depends_on_sampling {
        let s = &e.sampling;
        out.push(Hint {
            kind: HintKind::Sampling,
            nodes: Vec::new(),
            message: format!(
                "{} of {} nodes are feasible, but kube-scheduler stops filtering once it has found {} \
                 (percentageOfNodesToScore {}): it scores only those, starting where its previous cycle \
                 stopped, so it may pick a lower-scoring node than the selected one",
                e.feasible.len(),
                s.nodes_considered,
                s.nodes_to_find,
                if s.percentage_of_nodes_to_score == 0 {
                    "adaptive".to_string()
                } else {
                    format!("{}%", s.percentage_of_nodes_to_score)
                }
            ),
            snippet: None,
        });
    }
    out
}

fn rejected_by<'e>(e: &'e Explanation, plugin: &'e str) -> impl Iterator<Item = &'e str> + 'e {
    e.nodes
        .iter()
        .filter(move |n| !n.feasible && n.plugin.as_deref() == Some(plugin))
        .map(|n| n.name.as_str())
}

/// `needs 300m more cpu (requests 2, 1700m free)`, or the pod-count variant.
pub fn describe_shortfall(s: &Shortfall) -> String {
    if s.resource == PODS {
        return "has no room for another pod (Too many pods)".to_string();
    }
    if s.can_never_fit() {
        return format!(
            "can never fit: requests {} {}, {} allocatable",
            format_amount(&s.resource, s.requested),
            s.resource,
            format_amount(&s.resource, s.allocatable)
        );
    }
    let free = if s.free <= 0 {
        "none free".to_string()
    } else {
        format!("{} free", format_amount(&s.resource, s.free))
    };
    format!(
        "needs {} more {} (requests {}, {free})",
        format_amount(&s.resource, s.missing()),
        s.resource,
        format_amount(&s.resource, s.requested)
    )
}

fn resource_hints(input: &HintInput<'_>) -> Vec<Hint> {
    let mut short_nodes: Vec<(f64, &str, Vec<Shortfall>)> = Vec::new();
    // Extended resources a DeviceClass backs come from devices on nodes that do not advertise them:
    // no "needs N more" for those.
    let dra = DeviceClassResolver::for_snapshot(input.snapshot);
    for name in rejected_by(input.explanation, names::NODE_RESOURCES_FIT) {
        let Some(node) = input.snapshot.node(name) else {
            continue;
        };
        if !other_rejections(input, node, names::NODE_RESOURCES_FIT).is_empty() {
            continue;
        }
        let short = shortfall_with_dra(node, input.pod, Some(&dra), input.framework.features());
        if short.is_empty() {
            // Rejected only because of pods nominated to the node: nothing to add up.
            continue;
        }
        // Closest to fitting first: the share of each request that is missing, summed; nodes too
        // small for the request last.
        let distance = if short.iter().any(Shortfall::can_never_fit) {
            f64::INFINITY
        } else {
            missing_share(&short)
        };
        short_nodes.push((distance, name, short));
    }
    short_nodes.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(b.1)));
    let too_small = too_small_everywhere(&short_nodes);
    let more = short_nodes.len().saturating_sub(MAX_RESOURCE_HINTS);
    let mut out: Vec<Hint> = short_nodes
        .into_iter()
        .take(MAX_RESOURCE_HINTS)
        .map(|(_, name, short)| {
            let parts: Vec<String> = short.iter().map(describe_shortfall).collect();
            Hint {
                kind: HintKind::Resources,
                nodes: vec![name.to_string()],
                message: format!("{name} {}", parts.join(", ")),
                snippet: None,
            }
        })
        .collect();
    if more > 0 {
        out.push(Hint {
            kind: HintKind::Resources,
            nodes: Vec::new(),
            message: format!("{more} more node(s) fail only on resources, each further from fitting"),
            snippet: None,
        });
    }
    if let Some(summary) = too_small {
        out.insert(0, summary);
    }
    out
}

/// When every node that fails only on resources is too small for a request (more than its
/// allocatable), one hint says so: no eviction or rescheduling helps, only a smaller request or a
/// bigger node.
fn too_small_everywhere(short_nodes: &[(f64, &str, Vec<Shortfall>)]) -> Option<Hint> {
    if short_nodes.is_empty() || short_nodes.iter().any(|(d, _, _)| d.is_finite()) {
        return None;
    }
    // The resources too big for every node, with the largest allocatable seen.
    let mut largest: BTreeMap<&str, (i64, i64, &str)> = BTreeMap::new();
    for (_, node, short) in short_nodes {
        for s in short {
            let entry = largest
                .entry(s.resource.as_str())
                .or_insert((s.requested, s.allocatable, node));
            if s.allocatable > entry.1 {
                *entry = (s.requested, s.allocatable, node);
            }
        }
    }
    let parts: Vec<String> = largest
        .iter()
        .filter(|(_, (requested, allocatable, _))| requested > allocatable)
        .map(|(resource, (requested, allocatable, node))| {
            format!(
                "requests {} {resource}, the most any of them has allocatable is {} ({node})",
                format_amount(resource, *requested),
                format_amount(resource, *allocatable)
            )
        })
        .collect();
    (!parts.is_empty()).then(|| Hint {
        kind: HintKind::Resources,
        nodes: Vec::new(),
        message: format!(
            "the pod can never fit on the {} node(s) that fail only on resources: it {}; lower the \
             request or add a bigger node",
            short_nodes.len(),
            parts.join(", ")
        ),
        snippet: None,
    })
}

/// The node's NoSchedule/NoExecute taints that `tolerations` do not tolerate (TaintToleration's
/// rejection reasons), with the `Lt`/`Gt` operators as `features` say.
pub fn untolerated_taints(
    node: &sched_core::NodeInfo,
    tolerations: &[k8s_openapi::api::core::v1::Toleration],
    features: &FeatureGates,
) -> Vec<Taint> {
    node_taints(&node.node)
        .iter()
        .filter(|t| {
            do_not_schedule_taints_filter(t)
                && !tolerations_tolerate_taint(tolerations, t, features.taint_toleration_comparison_operators)
        })
        .cloned()
        .collect()
}

/// `key=value:Effect`, as kubectl prints taints.
pub fn taint_text(t: &Taint) -> String {
    match t.value.as_deref().filter(|v| !v.is_empty()) {
        Some(v) => format!("{}={v}:{}", t.key, t.effect),
        None => format!("{}:{}", t.key, t.effect),
    }
}

/// The `tolerations:` YAML that tolerates exactly these taints.
pub fn toleration_snippet(taints: &[Taint]) -> String {
    let mut out = String::from("tolerations:\n");
    for t in taints {
        out.push_str(&format!("- key: {}\n", t.key));
        match t.value.as_deref().filter(|v| !v.is_empty()) {
            Some(v) => {
                out.push_str("  operator: Equal\n");
                // JSON string syntax is valid YAML and keeps values like "true" strings.
                let quoted = serde_json::to_string(v).unwrap_or_else(|_| format!("{v:?}"));
                out.push_str(&format!("  value: {quoted}\n"));
            }
            None => out.push_str("  operator: Exists\n"),
        }
        out.push_str(&format!("  effect: {}\n", t.effect));
    }
    out
}

fn rejection_text(plugin: &str, s: &Status) -> String {
    format!("{plugin} ({})", s.reasons().join(", "))
}

fn toleration_hints(input: &HintInput<'_>) -> Vec<Hint> {
    struct Group {
        taints: Vec<Taint>,
        /// Nodes that pass every other filter once the taints are tolerated.
        passing: Vec<String>,
        /// Nodes that would still fail, with why.
        failing: Vec<(String, String)>,
    }
    // Nodes with the same untolerated taints share one snippet.
    let mut groups: BTreeMap<Vec<String>, Group> = BTreeMap::new();
    let tolerations = pod_tolerations(&input.pod.pod);
    for name in rejected_by(input.explanation, names::TAINT_TOLERATION) {
        let Some(node) = input.snapshot.node(name) else {
            continue;
        };
        let untolerated = untolerated_taints(node, tolerations, input.framework.features());
        if untolerated.is_empty() {
            continue;
        }
        let key: Vec<String> = untolerated.iter().map(taint_text).collect();
        let others = other_rejections(input, node, names::TAINT_TOLERATION);
        let group = groups.entry(key).or_insert_with(|| Group {
            taints: untolerated,
            passing: Vec::new(),
            failing: Vec::new(),
        });
        if others.is_empty() {
            group.passing.push(name.to_string());
        } else {
            let why: Vec<String> = others.iter().map(|(p, s)| rejection_text(p, s)).collect();
            group.failing.push((name.to_string(), why.join(", ")));
        }
    }
    groups
        .into_iter()
        .map(|(texts, g)| {
            let nodes: Vec<String> = g
                .passing
                .iter()
                .chain(g.failing.iter().map(|(n, _)| n))
                .cloned()
                .collect();
            let mut outcome = Vec::new();
            if !g.passing.is_empty() {
                let verb = if g.passing.len() == 1 { "passes" } else { "pass" };
                outcome.push(format!(
                    "{} then {verb} every other filter",
                    name_list(&g.passing, MAX_NAMES)
                ));
            }
            if g.failing.len() <= MAX_NAMES {
                outcome.extend(g.failing.iter().map(|(n, why)| format!("{n} still fails {why}")));
            } else {
                let (n, why) = &g.failing[0];
                outcome.push(format!(
                    "{} nodes still fail other filters (e.g. {n}: {why})",
                    g.failing.len()
                ));
            }
            let message = format!(
                "{} {} untolerated taint{} {}; with this toleration, {}",
                name_list(&nodes, MAX_NAMES),
                if nodes.len() == 1 { "has" } else { "have" },
                if texts.len() == 1 { "" } else { "s" },
                texts.join(", "),
                outcome.join("; ")
            );
            Hint {
                kind: HintKind::Toleration,
                nodes,
                message,
                snippet: Some(toleration_snippet(&g.taints)),
            }
        })
        .collect()
}

fn cordon_hints(input: &HintInput<'_>) -> Vec<Hint> {
    let nodes: Vec<String> = rejected_by(input.explanation, names::NODE_UNSCHEDULABLE)
        .map(str::to_string)
        .collect();
    if nodes.is_empty() {
        return Vec::new();
    }
    let verb = if nodes.len() == 1 { "is" } else { "are" };
    vec![Hint {
        kind: HintKind::Cordoned,
        message: format!(
            "{} {verb} cordoned (spec.unschedulable): `kubectl uncordon` lets new pods in",
            name_list(&nodes, MAX_NAMES)
        ),
        nodes,
        snippet: None,
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
        Taint {
            key: key.to_string(),
            value: value.map(str::to_string),
            effect: effect.to_string(),
            time_added: None,
        }
    }

    #[test]
    fn long_node_lists_are_cut() {
        let names: Vec<String> = (1..=8).map(|i| format!("n{i}")).collect();
        assert_eq!(name_list(&names[..2], 5), "n1, n2");
        assert_eq!(name_list(&names, 5), "n1, n2, n3, n4, n5 and 3 more");
    }

    #[test]
    fn shortfalls_read_like_quantities() {
        let cpu = Shortfall {
            resource: "cpu".into(),
            requested: 2000,
            free: 1700,
            allocatable: 4000,
        };
        assert_eq!(
            describe_shortfall(&cpu),
            "needs 300m more cpu (requests 2, 1700m free)"
        );
        let mem = Shortfall {
            resource: "memory".into(),
            requested: 4 << 30,
            free: -(1 << 20),
            allocatable: 8 << 30,
        };
        assert_eq!(
            describe_shortfall(&mem),
            "needs 4097Mi more memory (requests 4Gi, none free)"
        );
        let pods = Shortfall {
            resource: "pods".into(),
            requested: 1,
            free: 0,
            allocatable: 110,
        };
        assert_eq!(
            describe_shortfall(&pods),
            "has no room for another pod (Too many pods)"
        );
        let too_big = Shortfall {
            resource: "cpu".into(),
            requested: 3000,
            free: 1500,
            allocatable: 2000,
        };
        assert_eq!(
            describe_shortfall(&too_big),
            "can never fit: requests 3 cpu, 2 allocatable"
        );
    }

    #[test]
    fn snippets_tolerate_exactly_the_taints() {
        let taints = vec![
            taint("nvidia.com/gpu", Some("true"), "NoSchedule"),
            taint("node-role.kubernetes.io/control-plane", None, "NoSchedule"),
        ];
        let snippet = toleration_snippet(&taints);
        assert_eq!(
            snippet,
            "tolerations:\n- key: nvidia.com/gpu\n  operator: Equal\n  value: \"true\"\n  effect: NoSchedule\n\
             - key: node-role.kubernetes.io/control-plane\n  operator: Exists\n  effect: NoSchedule\n"
        );
        #[derive(serde::Deserialize)]
        struct Doc {
            tolerations: Vec<k8s_openapi::api::core::v1::Toleration>,
        }
        let doc: Doc = yaml_serde::from_str(&snippet).unwrap();
        for t in &taints {
            assert!(
                tolerations_tolerate_taint(&doc.tolerations, t, false),
                "{}",
                taint_text(t)
            );
        }
        assert_eq!(taint_text(&taints[0]), "nvidia.com/gpu=true:NoSchedule");
        assert_eq!(
            taint_text(&taints[1]),
            "node-role.kubernetes.io/control-plane:NoSchedule"
        );
    }
}
