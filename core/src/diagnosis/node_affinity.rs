//! NodeAffinity explained: which `nodeSelector` entry or required node affinity requirement the node
//! fails, what the node has instead, and whether any node of the cluster meets it at all ("no node
//! has topology.kubernetes.io/zone=zone-d; nodes have zone-a, zone-b, zone-c").

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm};

use super::change::Change;
use super::finding::{Context, Detail, Explained, ReasonCode};
use crate::NodeInfo;
use crate::labels::NodeSelectorTermMatcher;

/// At most this many of a key's values are named in a message; `-o json` has them all.
const MAX_VALUES: usize = 8;

/// Every value the cluster's nodes have for `key`.
fn cluster_values(ctx: &Context<'_>, key: &str) -> Vec<String> {
    let values: BTreeSet<&str> = ctx
        .snapshot
        .nodes()
        .iter()
        .filter_map(|n| n.labels().get(key).map(String::as_str))
        .collect();
    values.into_iter().map(str::to_string).collect()
}

/// `nodes have zone-a, zone-b` / `no node has the label`.
fn values_text(key: &str, values: &[String]) -> String {
    match values.len() {
        0 => format!("no node has the label {key}"),
        n if n <= MAX_VALUES => format!("nodes have {}", values.join(", ")),
        n => format!(
            "nodes have {} and {} more",
            values[..MAX_VALUES].join(", "),
            n - MAX_VALUES
        ),
    }
}

fn node_value_text(key: &str, value: Option<&String>) -> String {
    match value {
        Some(v) => format!("the node has {key}={v}"),
        None => format!("the node has no {key} label"),
    }
}

/// `key In [a, b]`, as the requirement is written.
fn requirement_text(r: &NodeSelectorRequirement) -> String {
    match r.values.as_deref() {
        Some(values) if !values.is_empty() => format!("{} {} [{}]", r.key, r.operator, values.join(", ")),
        _ => format!("{} {}", r.key, r.operator),
    }
}

/// Whether a node meets one requirement (a term holding only it).
fn meets(r: &NodeSelectorRequirement, fields: bool, node: &NodeInfo) -> bool {
    let term = if fields {
        NodeSelectorTerm {
            match_fields: Some(vec![r.clone()]),
            ..Default::default()
        }
    } else {
        NodeSelectorTerm {
            match_expressions: Some(vec![r.clone()]),
            ..Default::default()
        }
    };
    NodeSelectorTermMatcher::parse(&term).is_ok_and(|m| m.matches(node.labels(), node.name()))
}

pub(crate) fn explain(ctx: &Context<'_>, node: &NodeInfo) -> Vec<Explained> {
    let mut out = Vec::new();
    let spec = ctx.pod.pod.spec.as_ref();
    for (key, value) in spec.and_then(|s| s.node_selector.as_ref()).into_iter().flatten() {
        let has = node.labels().get(key);
        if has == Some(value) {
            continue;
        }
        let values = cluster_values(ctx, key);
        let anywhere = values.contains(value);
        out.push(Explained {
            reason: if anywhere {
                ReasonCode::NodeSelectorMismatch
            } else {
                ReasonCode::NodeSelectorNoNodeHasValue
            },
            message: if anywhere {
                format!("nodeSelector {key}={value}: {}", node_value_text(key, has))
            } else {
                format!(
                    "nodeSelector {key}={value}: no node has {key}={value}; {}",
                    values_text(key, &values)
                )
            },
            detail: Detail::NodeAffinity {
                source: "nodeSelector".to_string(),
                requirement: format!("{key}={value}"),
                key: key.clone(),
                node_value: has.cloned(),
                cluster_values: values,
            },
            changes: vec![Change::RemoveNodeSelector { key: key.clone() }],
        });
    }
    let terms = spec
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref())
        .map(|r| r.node_selector_terms.as_slice())
        .unwrap_or_default();
    let any_term_matches = terms
        .iter()
        .any(|t| NodeSelectorTermMatcher::parse(t).is_ok_and(|m| m.matches(node.labels(), node.name())));
    if !any_term_matches {
        for (i, term) in terms.iter().enumerate() {
            let exprs = term.match_expressions.iter().flatten().map(|r| (r, false));
            let fields = term.match_fields.iter().flatten().map(|r| (r, true));
            for (r, is_field) in exprs.chain(fields) {
                if meets(r, is_field, node) {
                    continue;
                }
                let anywhere = ctx.snapshot.nodes().iter().any(|n| meets(r, is_field, n));
                let values = if is_field {
                    Vec::new()
                } else {
                    cluster_values(ctx, &r.key)
                };
                let has = (!is_field).then(|| node.labels().get(&r.key)).flatten();
                let source = format!("requiredDuringSchedulingIgnoredDuringExecution term {i}");
                let text = requirement_text(r);
                let message = match (anywhere, is_field) {
                    (true, true) => format!("node affinity ({source}) {text}: the node is {}", node.name()),
                    (true, false) => format!(
                        "node affinity ({source}) {text}: {}",
                        node_value_text(&r.key, has)
                    ),
                    (false, _) => format!(
                        "node affinity ({source}) {text}: no node meets it; {}",
                        values_text(&r.key, &values)
                    ),
                };
                out.push(Explained {
                    reason: if anywhere {
                        ReasonCode::NodeAffinityMismatch
                    } else {
                        ReasonCode::NodeAffinityNoNodeHasValue
                    },
                    message,
                    detail: Detail::NodeAffinity {
                        source,
                        requirement: text,
                        key: r.key.clone(),
                        node_value: has.cloned(),
                        cluster_values: values,
                    },
                    changes: vec![Change::RemoveNodeAffinityRequirement {
                        term: i,
                        key: r.key.clone(),
                    }],
                });
            }
        }
    }
    if out.is_empty() {
        // The pod's own selector and affinity admit the node: the profile's addedAffinity does not.
        out.push(Explained {
            reason: ReasonCode::NodeAffinityEnforced,
            message: "the scheduler profile's addedAffinity (NodeAffinityArgs) excludes the node".to_string(),
            detail: Detail::Reasons,
            changes: Vec::new(),
        });
    }
    out
}
