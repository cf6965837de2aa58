//! The node-affinity JSON patch of admission pre-binding: restrict a pod to the nodes that can reach the
//! PVs its claims were pre-bound to, without ever loosening what the pod already requires.
//!
//! A pod's required node affinity is an OR of terms; each PV's is one too. Requiring the pod's affinity
//! AND every PV's is, distributed, one term per combination: `T ∧ P1ᵢ ∧ P2ⱼ …`. Each new term contains an
//! old term, so the new set of nodes is a subset of the old one. Terms that already contain a PV
//! alternative are kept as they are, which makes the patch idempotent: a pod patched once gets no patch
//! the second time.

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, Pod};
use sched_core::snapshot::volume::PersistentVolume;
use serde_json::{Value, json};

use sched_core::labels::{Labels, NodeSelectorMatcher};

/// Above this many combined terms, only the alternatives the chosen node satisfies are kept (a narrower,
/// still correct restriction) instead of the full product.
pub const MAX_TERMS: usize = 16;

const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";

fn pv_terms(pv: &PersistentVolume) -> &[NodeSelectorTerm] {
    pv.spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
        .map(|r| r.node_selector_terms.as_slice())
        .unwrap_or(&[])
}

fn term_is_empty(term: &NodeSelectorTerm) -> bool {
    term.match_expressions.as_ref().is_none_or(Vec::is_empty)
        && term.match_fields.as_ref().is_none_or(Vec::is_empty)
}

fn union_into(list: &mut Option<Vec<NodeSelectorRequirement>>, extra: Option<&Vec<NodeSelectorRequirement>>) {
    for requirement in extra.into_iter().flatten() {
        let list = list.get_or_insert_with(Vec::new);
        if !list.contains(requirement) {
            list.push(requirement.clone());
        }
    }
}

/// `a ∧ b` as one term.
fn and(a: &NodeSelectorTerm, b: &NodeSelectorTerm) -> NodeSelectorTerm {
    let mut out = a.clone();
    union_into(&mut out.match_expressions, b.match_expressions.as_ref());
    union_into(&mut out.match_fields, b.match_fields.as_ref());
    out
}

/// True when `term` requires at least everything `required` does (so `term ⊆ required` as node sets).
pub fn contains(term: &NodeSelectorTerm, required: &NodeSelectorTerm) -> bool {
    let has_all = |have: Option<&Vec<NodeSelectorRequirement>>,
                   want: Option<&Vec<NodeSelectorRequirement>>| {
        want.into_iter()
            .flatten()
            .all(|w| have.is_some_and(|h| h.contains(w)))
    };
    has_all(
        term.match_expressions.as_ref(),
        required.match_expressions.as_ref(),
    ) && has_all(term.match_fields.as_ref(), required.match_fields.as_ref())
}

/// The terms that describe where all `pvs` are reachable (None when none of them is restricted). When
/// the full product would exceed [`MAX_TERMS`], each PV contributes only the terms `node` satisfies.
pub fn pv_restriction(
    pvs: &[&PersistentVolume],
    node_name: &str,
    node_labels: &Labels,
) -> Option<Vec<NodeSelectorTerm>> {
    let restricted: Vec<&[NodeSelectorTerm]> = pvs
        .iter()
        .map(|pv| pv_terms(pv))
        .filter(|t| !t.is_empty())
        .collect();
    if restricted.is_empty() {
        return None;
    }
    let product_size = restricted
        .iter()
        .try_fold(1usize, |acc, t| acc.checked_mul(t.len()))
        .unwrap_or(usize::MAX);
    let alternatives: Vec<Vec<NodeSelectorTerm>> = if product_size <= MAX_TERMS {
        restricted.iter().map(|t| t.to_vec()).collect()
    } else {
        restricted
            .iter()
            .map(|terms| {
                terms
                    .iter()
                    .filter(|t| {
                        let selector = k8s_openapi::api::core::v1::NodeSelector {
                            node_selector_terms: vec![(*t).clone()],
                        };
                        NodeSelectorMatcher::new(&selector).matches(node_labels, node_name)
                    })
                    .cloned()
                    .collect()
            })
            .collect()
    };
    let mut combined = vec![NodeSelectorTerm::default()];
    for alternative in &alternatives {
        combined = combined
            .iter()
            .flat_map(|c| alternative.iter().map(move |a| and(c, a)))
            .collect();
    }
    dedupe(&mut combined);
    (!combined.is_empty()).then_some(combined)
}

fn dedupe(terms: &mut Vec<NodeSelectorTerm>) {
    let mut out: Vec<NodeSelectorTerm> = Vec::with_capacity(terms.len());
    for t in terms.drain(..) {
        if !out.contains(&t) {
            out.push(t);
        }
    }
    *terms = out;
}

fn existing_terms(pod: &Pod) -> Option<&Vec<NodeSelectorTerm>> {
    pod.spec
        .as_ref()?
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()
        .map(|r| &r.node_selector_terms)
}

/// The JSON patch that ANDs `restriction` (alternatives, ORed) into the pod's required node affinity,
/// creating the structure when absent. Empty when nothing would change: every term already contains an
/// alternative, or the pod's terms match no node at all.
pub fn affinity_patch(pod: &Pod, restriction: &[NodeSelectorTerm]) -> Vec<Value> {
    if restriction.is_empty() {
        return Vec::new();
    }
    let spec = pod.spec.as_ref();
    let affinity = spec.and_then(|s| s.affinity.as_ref());
    let node_affinity = affinity.and_then(|a| a.node_affinity.as_ref());
    let terms_value = |terms: &[NodeSelectorTerm]| serde_json::to_value(terms).unwrap_or(Value::Null);

    let Some(existing) = existing_terms(pod) else {
        let required = json!({ "nodeSelectorTerms": terms_value(restriction) });
        return vec![match (affinity, node_affinity) {
            (None, _) => json!({
                "op": "add", "path": "/spec/affinity",
                "value": {"nodeAffinity": {REQUIRED: required}},
            }),
            (Some(_), None) => json!({
                "op": "add", "path": "/spec/affinity/nodeAffinity",
                "value": {REQUIRED: required},
            }),
            (Some(_), Some(_)) => json!({
                "op": "add", "path": format!("/spec/affinity/nodeAffinity/{REQUIRED}"),
                "value": required,
            }),
        }];
    };

    // Empty terms match no node: ANDing anything into them would make them match some, i.e. loosen.
    let restricted_already =
        |t: &NodeSelectorTerm| term_is_empty(t) || restriction.iter().any(|r| contains(t, r));
    if existing.iter().all(restricted_already) {
        return Vec::new();
    }
    let mut terms = Vec::new();
    for term in existing {
        if restricted_already(term) {
            terms.push(term.clone());
        } else {
            terms.extend(restriction.iter().map(|r| and(term, r)));
        }
    }
    dedupe(&mut terms);
    vec![json!({
        "op": "replace",
        "path": format!("/spec/affinity/nodeAffinity/{REQUIRED}/nodeSelectorTerms"),
        "value": terms_value(&terms),
    })]
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Affinity, NodeAffinity, NodeSelector, VolumeNodeAffinity};
    use sched_core::testing::pod;

    const HOST: &str = "kubernetes.io/hostname";
    const ZONE: &str = "topology.kubernetes.io/zone";

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn term(exprs: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: Some(exprs),
            match_fields: None,
        }
    }

    fn local_pv(terms: Vec<NodeSelectorTerm>) -> PersistentVolume {
        let mut pv = PersistentVolume::default();
        pv.spec.get_or_insert_with(Default::default).node_affinity = Some(VolumeNodeAffinity {
            required: Some(NodeSelector {
                node_selector_terms: terms,
            }),
        });
        pv
    }

    fn with_required(terms: Vec<NodeSelectorTerm>) -> Pod {
        pod("p")
            .affinity(Affinity {
                node_affinity: Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                        node_selector_terms: terms,
                    }),
                    preferred_during_scheduling_ignored_during_execution: None,
                }),
                ..Affinity::default()
            })
            .obj()
    }

    fn apply(pod: &Pod, ops: &[Value]) -> Pod {
        let mut doc = serde_json::to_value(pod).expect("pod to json");
        let patch: json_patch::Patch = serde_json::from_value(Value::Array(ops.to_vec())).expect("patch");
        json_patch::patch(&mut doc, &patch).expect("patch applies");
        serde_json::from_value(doc).expect("pod from json")
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn matches(pod: &Pod, node_labels: &Labels) -> bool {
        match existing_terms(pod) {
            None => true,
            Some(terms) => NodeSelectorMatcher::new(&NodeSelector {
                node_selector_terms: terms.clone(),
            })
            .matches(node_labels, ""),
        }
    }

    fn sample_nodes() -> Vec<Labels> {
        let mut out = Vec::new();
        for host in ["n1", "n2", "n3"] {
            for zone in ["z1", "z2"] {
                for disk in ["ssd", "hdd"] {
                    out.push(labels(&[(HOST, host), (ZONE, zone), ("disk", disk)]));
                }
            }
        }
        out
    }

    /// Checks the never-loosen rule and exactness on sample nodes, then idempotence.
    fn check(pod: &Pod, restriction: &[NodeSelectorTerm]) -> Pod {
        let ops = affinity_patch(pod, restriction);
        let patched = apply(pod, &ops);
        let restriction_matcher = NodeSelectorMatcher::new(&NodeSelector {
            node_selector_terms: restriction.to_vec(),
        });
        for node in sample_nodes() {
            let expected = matches(pod, &node) && restriction_matcher.matches(&node, "");
            assert_eq!(matches(&patched, &node), expected, "node {node:?}, ops {ops:?}");
        }
        assert!(
            affinity_patch(&patched, restriction).is_empty(),
            "a patched pod must get no patch"
        );
        patched
    }

    #[test]
    fn creates_the_structure_when_absent() {
        let restriction = vec![term(vec![req(HOST, "In", &["n1"])])];
        let bare = pod("p").obj();
        let ops = affinity_patch(&bare, &restriction);
        assert_eq!(ops[0]["path"], "/spec/affinity");
        let patched = check(&bare, &restriction);
        assert_eq!(existing_terms(&patched).expect("terms"), &restriction);

        let with_pod_affinity = pod("p")
            .affinity(Affinity {
                pod_affinity: Some(Default::default()),
                ..Affinity::default()
            })
            .obj();
        assert_eq!(
            affinity_patch(&with_pod_affinity, &restriction)[0]["path"],
            "/spec/affinity/nodeAffinity"
        );
        let patched = check(&with_pod_affinity, &restriction);
        assert!(patched.spec.unwrap().affinity.unwrap().pod_affinity.is_some());

        let preferred_only = pod("p")
            .affinity(Affinity {
                node_affinity: Some(NodeAffinity::default()),
                ..Affinity::default()
            })
            .obj();
        assert_eq!(
            affinity_patch(&preferred_only, &restriction)[0]["path"],
            "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"
        );
        check(&preferred_only, &restriction);
    }

    #[test]
    fn ands_into_every_existing_term_and_never_loosens() {
        let pod = with_required(vec![
            term(vec![req(ZONE, "In", &["z1"])]),
            term(vec![req("disk", "In", &["ssd"])]),
        ]);
        let restriction = vec![
            term(vec![req(HOST, "In", &["n1"])]),
            term(vec![req(HOST, "In", &["n2"])]),
        ];
        let patched = check(&pod, &restriction);
        let terms = existing_terms(&patched).expect("terms");
        assert_eq!(terms.len(), 4);
        let old = existing_terms(&pod).expect("old terms");
        for t in terms {
            assert!(old.iter().any(|o| contains(t, o)), "{t:?} loosens");
        }
    }

    #[test]
    fn empty_terms_stay_empty() {
        // An empty term selects no node; ANDing the restriction into it would make it select some.
        let pod = with_required(vec![
            NodeSelectorTerm::default(),
            term(vec![req(ZONE, "In", &["z2"])]),
        ]);
        let restriction = vec![term(vec![req(HOST, "In", &["n3"])])];
        let patched = check(&pod, &restriction);
        let terms = existing_terms(&patched).expect("terms");
        assert!(terms.iter().any(term_is_empty));
        assert!(affinity_patch(&with_required(vec![NodeSelectorTerm::default()]), &restriction).is_empty());
    }

    #[test]
    fn already_restricted_pods_get_no_patch() {
        let restriction = vec![term(vec![req(HOST, "In", &["n1"])])];
        let pod = with_required(vec![term(vec![
            req(ZONE, "In", &["z1"]),
            req(HOST, "In", &["n1"]),
        ])]);
        assert!(affinity_patch(&pod, &restriction).is_empty());
        assert!(affinity_patch(&pod, &[]).is_empty());
    }

    #[test]
    fn restriction_is_the_product_of_pv_alternatives() {
        let a = local_pv(vec![term(vec![req(ZONE, "In", &["z1"])])]);
        let b = local_pv(vec![
            term(vec![req(HOST, "In", &["n1"])]),
            term(vec![req(HOST, "In", &["n2"])]),
        ]);
        let free = PersistentVolume::default();
        let node = labels(&[(HOST, "n1"), (ZONE, "z1")]);
        assert_eq!(pv_restriction(&[&free], "n1", &node), None);
        let r = pv_restriction(&[&a, &b, &free], "n1", &node).expect("restricted");
        assert_eq!(r.len(), 2);
        assert!(
            r.iter()
                .all(|t| t.match_expressions.as_ref().is_some_and(|e| e.len() == 2))
        );
        // Same PV twice: no duplicate requirements.
        assert_eq!(
            pv_restriction(&[&a, &a], "n1", &node),
            Some(vec![term(vec![req(ZONE, "In", &["z1"])])])
        );
    }

    #[test]
    fn large_products_keep_the_chosen_nodes_alternatives() {
        let wide = |_: usize| {
            local_pv(
                ["n1", "n2", "n3", "n4", "n5"]
                    .iter()
                    .map(|h| term(vec![req(HOST, "In", &[h])]))
                    .collect(),
            )
        };
        let pvs: Vec<PersistentVolume> = (0..3).map(wide).collect();
        let refs: Vec<&PersistentVolume> = pvs.iter().collect();
        let node = labels(&[(HOST, "n4")]);
        let r = pv_restriction(&refs, "n4", &node).expect("restricted");
        assert_eq!(r, vec![term(vec![req(HOST, "In", &["n4"])])]);
    }
}
