//! NodeAffinity: `spec.nodeSelector`, required and preferred node affinity, and the scheduler-enforced
//! `addedAffinity` of the plugin args.
//!
//! PreFilter parses the pod's required terms once and, when every term pins `metadata.name` with `In`,
//! narrows the node set to those names. Filter checks the added affinity, then the pod's. PreScore
//! parses the preferred terms; Score sums the weights of matching terms; NormalizeScore scales to 100.
//!
//! Parsing follows component-helpers `nodeaffinity`: empty terms are dropped; a required term that
//! fails to parse matches no node (the other terms still count), while an invalid preferred term, or
//! any invalid term in the args, is an error. Label keys and values in `matchExpressions` are validated
//! as apimachinery's `labels.NewRequirement` does.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Node, NodeAffinity as NodeAffinitySpec, NodeSelector, NodeSelectorTerm, Pod, PreferredSchedulingTerm,
};
use serde::Deserialize;

use crate::framework::FeatureGates;
use crate::framework::cycle_state::{CycleState, StateKey};
use crate::framework::interface::{
    FilterPlugin, MAX_NODE_SCORE, NodeScore, Plugin, PreFilterPlugin, PreFilterResult, PreScorePlugin,
    ScorePlugin,
};
use crate::framework::runtime::{Handle, PluginError, decode_args};
use crate::framework::status::Status;
use crate::labels::{NodeSelectorTermMatcher, Selector};
use crate::plugins::helper::normalize_score::default_normalize_score;
use crate::plugins::names;
use crate::snapshot::{NodeInfo, PodInfo};

/// The plugin's registry name.
pub(crate) const NAME: &str = names::NODE_AFFINITY;

/// Filter reason when the node does not match the pod's nodeSelector or required node affinity.
pub(crate) const ERR_REASON_POD: &str = "node(s) didn't match Pod's node affinity/selector";
/// Filter reason when the node does not match `addedAffinity` from the plugin args.
pub(crate) const ERR_REASON_ENFORCED: &str = "node(s) didn't match scheduler-enforced node affinity";
/// PreFilter reason when the required terms' `metadata.name` requirements select no node at all.
pub(crate) const ERR_REASON_CONFLICT: &str = "pod affinity terms conflict";

const OBJECT_NAME_FIELD: &str = "metadata.name";

/// `NodeAffinityArgs`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct NodeAffinityArgs {
    /// Affinity every pod must also satisfy (required) or is also scored by (preferred).
    pub added_affinity: Option<NodeAffinitySpec>,
}

/// The pod's required node selection, parsed: `spec.nodeSelector` AND the required node affinity.
#[derive(Debug, Clone, Default)]
pub(crate) struct RequiredNodeAffinity {
    node_selector: Option<Selector>,
    /// `None` when the pod has no required node affinity; a term that failed to parse is `None`.
    terms: Option<Vec<Option<NodeSelectorTermMatcher>>>,
}

impl RequiredNodeAffinity {
    /// Go's `nodeaffinity.GetRequiredNodeAffinity(pod)` (PodTopologySpread's node inclusion policy
    /// uses it too).
    pub(crate) fn from_pod(pod: &Pod) -> Self {
        let spec = pod.spec.as_ref();
        let node_selector = spec
            .and_then(|s| s.node_selector.as_ref())
            .filter(|m| !m.is_empty())
            .map(Selector::from_map);
        let terms = spec
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())
            .map(|ns| {
                ns.node_selector_terms
                    .iter()
                    .filter(|t| !is_empty_term(t))
                    .map(|t| parse_term(t).ok())
                    .collect()
            });
        RequiredNodeAffinity { node_selector, terms }
    }

    /// Whether the node satisfies both the nodeSelector and (some term of) the required affinity.
    pub(crate) fn matches(&self, node: &Node) -> bool {
        let labels = node_labels(node);
        if let Some(sel) = &self.node_selector
            && !sel.matches(labels)
        {
            return false;
        }
        match &self.terms {
            None => true,
            Some(terms) => {
                let name = node.metadata.name.as_deref().unwrap_or("");
                terms.iter().flatten().any(|t| t.matches(labels, name))
            }
        }
    }
}

/// A strictly parsed `NodeSelector` (Go's `nodeaffinity.NewNodeSelector`): any bad term is an error.
#[derive(Debug, Clone, Default)]
pub(crate) struct StrictNodeSelector {
    terms: Vec<NodeSelectorTermMatcher>,
}

impl StrictNodeSelector {
    /// Parses every non-empty term.
    pub(crate) fn parse(ns: &NodeSelector) -> Result<Self, String> {
        let terms = ns
            .node_selector_terms
            .iter()
            .enumerate()
            .filter(|(_, t)| !is_empty_term(t))
            .map(|(i, t)| parse_term(t).map_err(|e| format!("nodeSelectorTerms[{i}]: {e}")))
            .collect::<Result<_, _>>()?;
        Ok(StrictNodeSelector { terms })
    }

    /// Whether any term matches.
    pub(crate) fn matches(&self, node: &Node) -> bool {
        let name = node.metadata.name.as_deref().unwrap_or("");
        self.terms.iter().any(|t| t.matches(node_labels(node), name))
    }
}

/// Parsed preferred terms with their weights (Go's `nodeaffinity.PreferredSchedulingTerms`).
#[derive(Debug, Clone, Default)]
pub(crate) struct PreferredSchedulingTerms {
    terms: Vec<(NodeSelectorTermMatcher, i64)>,
}

impl PreferredSchedulingTerms {
    /// Parses the terms, dropping zero-weight and empty ones; any bad term is an error.
    pub(crate) fn parse(terms: &[PreferredSchedulingTerm]) -> Result<Self, String> {
        let terms = terms
            .iter()
            .enumerate()
            .filter(|(_, t)| t.weight != 0 && !is_empty_term(&t.preference))
            .map(|(i, t)| {
                parse_term(&t.preference)
                    .map(|m| (m, i64::from(t.weight)))
                    .map_err(|e| format!("[{i}]: {e}"))
            })
            .collect::<Result<_, _>>()?;
        Ok(PreferredSchedulingTerms { terms })
    }

    /// The sum of the weights of the terms the node matches.
    pub(crate) fn score(&self, node: &Node) -> i64 {
        let name = node.metadata.name.as_deref().unwrap_or("");
        self.terms
            .iter()
            .filter(|(t, _)| t.matches(node_labels(node), name))
            .map(|(_, w)| w)
            .sum()
    }
}

fn node_labels(node: &Node) -> &crate::labels::Labels {
    static EMPTY: crate::labels::Labels = std::collections::BTreeMap::new();
    node.metadata.labels.as_ref().unwrap_or(&EMPTY)
}

fn is_empty_term(term: &NodeSelectorTerm) -> bool {
    term.match_expressions.as_ref().is_none_or(Vec::is_empty)
        && term.match_fields.as_ref().is_none_or(Vec::is_empty)
}

/// Parses a term, first applying the key/value checks of `labels.NewRequirement` that the shared
/// parser leaves out.
fn parse_term(term: &NodeSelectorTerm) -> Result<NodeSelectorTermMatcher, String> {
    for (i, r) in term.match_expressions.iter().flatten().enumerate() {
        if !is_label_key(&r.key) {
            return Err(format!("matchExpressions[{i}].key: Invalid value: {:?}", r.key));
        }
        if let Some(v) = r.values.iter().flatten().find(|v| !is_label_value(v)) {
            return Err(format!("matchExpressions[{i}].values: Invalid value: {v:?}"));
        }
    }
    NodeSelectorTermMatcher::parse(term).map_err(|e| e.to_string())
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, at most 63 bytes (empty allowed).
fn is_label_value(v: &str) -> bool {
    let b = v.as_bytes();
    if b.is_empty() {
        return true;
    }
    b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// A qualified name: `[prefix/]name`, prefix a DNS-1123 subdomain, name a non-empty label value.
fn is_label_key(k: &str) -> bool {
    let (prefix, name) = match k.split_once('/') {
        None => (None, k),
        Some((p, n)) => (Some(p), n),
    };
    if name.contains('/') || name.is_empty() || !is_label_value(name) {
        return false;
    }
    prefix.is_none_or(is_dns1123_subdomain)
}

fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
                && b.iter()
                    .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase() || *c == b'-')
        })
}

/// PreFilter's parsed required node selection.
#[derive(Debug, Clone)]
pub(crate) struct PreFilterState {
    /// nodeSelector AND required node affinity.
    pub required: RequiredNodeAffinity,
}

/// Where PreFilter leaves its state.
pub(crate) const PRE_FILTER_STATE_KEY: StateKey<PreFilterState> = StateKey::new("PreFilterNodeAffinity");

/// PreScore's parsed preferred terms of the pod.
#[derive(Debug, Clone)]
pub(crate) struct PreScoreState {
    /// `None` when the pod has no preferred node affinity.
    pub preferred: Option<PreferredSchedulingTerms>,
}

/// Where PreScore leaves its state.
pub(crate) const PRE_SCORE_STATE_KEY: StateKey<PreScoreState> = StateKey::new("PreScoreNodeAffinity");

/// The NodeAffinity plugin.
#[derive(Debug, Clone, Default)]
pub(crate) struct NodeAffinity {
    added_node_selector: Option<StrictNodeSelector>,
    added_preferred: Option<PreferredSchedulingTerms>,
}

fn pod_node_affinity(pod: &PodInfo) -> Option<&NodeAffinitySpec> {
    pod.pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
}

fn pod_preferred(pod: &PodInfo) -> Result<Option<PreferredSchedulingTerms>, String> {
    pod_node_affinity(pod)
        .and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_deref())
        .map(PreferredSchedulingTerms::parse)
        .transpose()
}

/// The node names the required terms pin with `metadata.name In`, if every term pins some.
fn pinned_node_names(terms: &[NodeSelectorTerm]) -> Option<BTreeSet<String>> {
    let mut union: Option<BTreeSet<String>> = None;
    for term in terms {
        let mut term_names: Option<BTreeSet<String>> = None;
        for r in term.match_fields.iter().flatten() {
            if r.key == OBJECT_NAME_FIELD && r.operator == "In" {
                let values: BTreeSet<String> = r.values.iter().flatten().cloned().collect();
                term_names = Some(match term_names {
                    None => values,
                    Some(prev) => prev.intersection(&values).cloned().collect(),
                });
            }
        }
        // A term that does not pin names may match any node.
        let term_names = term_names?;
        union.get_or_insert_with(BTreeSet::new).extend(term_names);
    }
    union
}

impl Plugin for NodeAffinity {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for NodeAffinity {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        let required = pod_node_affinity(pod)
            .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref());
        let has_node_selector = pod.pod.spec.as_ref().is_some_and(|s| s.node_selector.is_some());
        if required.is_none() && self.added_node_selector.is_none() && !has_node_selector {
            return (None, Status::skip());
        }
        state.write(
            &PRE_FILTER_STATE_KEY,
            PreFilterState {
                required: RequiredNodeAffinity::from_pod(&pod.pod),
            },
        );
        let Some(required) = required.filter(|r| !r.node_selector_terms.is_empty()) else {
            return (None, Status::success());
        };
        match pinned_node_names(&required.node_selector_terms) {
            Some(names) if names.is_empty() => (None, Status::unresolvable(ERR_REASON_CONFLICT)),
            Some(names) => (
                Some(PreFilterResult {
                    node_names: Some(names),
                }),
                Status::success(),
            ),
            None => (None, Status::success()),
        }
    }
}

impl FilterPlugin for NodeAffinity {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if let Some(added) = &self.added_node_selector
            && !added.matches(&node.node)
        {
            return Status::unresolvable(ERR_REASON_ENFORCED);
        }
        let matched = match state.read(&PRE_FILTER_STATE_KEY) {
            Some(s) => s.required.matches(&node.node),
            None => RequiredNodeAffinity::from_pod(&pod.pod).matches(&node.node),
        };
        if matched {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON_POD)
        }
    }
}

impl PreScorePlugin for NodeAffinity {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, _nodes: &[Arc<NodeInfo>]) -> Status {
        let preferred = match pod_preferred(pod) {
            Ok(p) => p,
            Err(e) => return Status::error(e),
        };
        if preferred.is_none() && self.added_preferred.is_none() {
            return Status::skip();
        }
        state.write(&PRE_SCORE_STATE_KEY, PreScoreState { preferred });
        Status::success()
    }
}

impl ScorePlugin for NodeAffinity {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> (i64, Status) {
        let mut count = self.added_preferred.as_ref().map_or(0, |t| t.score(&node.node));
        let pod_terms = match state.read(&PRE_SCORE_STATE_KEY) {
            Some(s) => s.preferred.as_ref().map_or(0, |t| t.score(&node.node)),
            None => match pod_preferred(pod) {
                Ok(p) => p.map_or(0, |t| t.score(&node.node)),
                Err(e) => return (0, Status::error(e)),
            },
        };
        count += pod_terms;
        (count, Status::success())
    }

    fn has_normalize_score(&self) -> bool {
        true
    }

    fn normalize_score(&self, _state: &CycleState, _pod: &PodInfo, scores: &mut [NodeScore]) -> Status {
        default_normalize_score(MAX_NODE_SCORE, false, scores);
        Status::success()
    }
}

fn invalid(message: String) -> PluginError {
    PluginError::InvalidArgs {
        plugin: NAME.to_string(),
        message,
    }
}

/// Builds the plugin from `NodeAffinityArgs`; invalid `addedAffinity` terms are an error.
pub(crate) fn new(
    args: Option<&serde_json::Value>,
    _handle: &Handle,
    _features: &FeatureGates,
) -> Result<Arc<dyn Plugin>, PluginError> {
    let args: NodeAffinityArgs = decode_args(NAME, args)?;
    let mut plugin = NodeAffinity::default();
    if let Some(added) = &args.added_affinity {
        if let Some(ns) = &added.required_during_scheduling_ignored_during_execution {
            plugin.added_node_selector = Some(StrictNodeSelector::parse(ns).map_err(|e| {
                invalid(format!(
                    "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.{e}"
                ))
            })?);
        }
        if let Some(terms) = added
            .preferred_during_scheduling_ignored_during_execution
            .as_deref()
            .filter(|t| !t.is_empty())
        {
            plugin.added_preferred = Some(PreferredSchedulingTerms::parse(terms).map_err(|e| {
                invalid(format!(
                    "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution{e}"
                ))
            })?);
        }
    }
    Ok(Arc::new(plugin))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Affinity, NodeSelectorRequirement};
    use serde_json::json;

    use super::*;
    use crate::framework::status::Code;
    use crate::testing::{NodeBuilder, PodBuilder, node, pod, snapshot};

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|s| s.to_string()).collect()),
        }
    }

    fn term(exprs: Vec<NodeSelectorRequirement>, fields: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: (!exprs.is_empty()).then_some(exprs),
            match_fields: (!fields.is_empty()).then_some(fields),
        }
    }

    fn required(terms: Vec<NodeSelectorTerm>) -> Affinity {
        Affinity {
            node_affinity: Some(NodeAffinitySpec {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: terms,
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn preferred(terms: Vec<(i32, NodeSelectorTerm)>) -> Affinity {
        Affinity {
            node_affinity: Some(NodeAffinitySpec {
                preferred_during_scheduling_ignored_during_execution: Some(
                    terms
                        .into_iter()
                        .map(|(weight, preference)| PreferredSchedulingTerm { weight, preference })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn plugin(args: Option<serde_json::Value>) -> Arc<dyn Plugin> {
        let handle = Handle {
            snapshot: Arc::new(snapshot(vec![], vec![])),
        };
        new(args.as_ref(), &handle, &crate::framework::FeatureGates::default()).expect("valid args")
    }

    /// PreFilter then Filter; `None` = PreFilter skipped the plugin.
    fn run_filter(pl: &dyn Plugin, p: &PodInfo, n: NodeBuilder) -> Option<Status> {
        let mut state = CycleState::new();
        let (_, s) = pl.as_pre_filter().unwrap().pre_filter(&mut state, p, &[]);
        if s.is_skip() {
            return None;
        }
        assert!(s.is_success(), "prefilter: {s:?}");
        Some(pl.as_filter().unwrap().filter(&state, p, &n.info_with(vec![])))
    }

    #[test]
    fn prefilter_skips_pods_without_constraints() {
        assert!(run_filter(&*plugin(None), &pod("p").info(), node("n1")).is_none());
        let only_preferred =
            pod("p").affinity(preferred(vec![(1, term(vec![req("a", "Exists", &[])], vec![]))]));
        assert!(run_filter(&*plugin(None), &only_preferred.info(), node("n1")).is_none());
    }

    #[test]
    fn filter_selector_and_required_affinity() {
        let zone_a = || node("n1").label("zone", "a").label("cores", "8");
        let cases: Vec<(&str, PodBuilder, NodeBuilder, bool)> = vec![
            (
                "nodeSelector matches",
                pod("p").node_selector("zone", "a"),
                zone_a(),
                true,
            ),
            (
                "nodeSelector differs",
                pod("p").node_selector("zone", "b"),
                zone_a(),
                false,
            ),
            (
                "nodeSelector label missing",
                pod("p").node_selector("disk", "ssd"),
                zone_a(),
                false,
            ),
            (
                "In matches",
                pod("p").affinity(required(vec![term(vec![req("zone", "In", &["a", "b"])], vec![])])),
                zone_a(),
                true,
            ),
            (
                "expressions are ANDed",
                pod("p").affinity(required(vec![term(
                    vec![req("zone", "In", &["a"]), req("cores", "Gt", &["8"])],
                    vec![],
                )])),
                zone_a(),
                false,
            ),
            (
                "terms are ORed",
                pod("p").affinity(required(vec![
                    term(vec![req("zone", "In", &["b"])], vec![]),
                    term(vec![req("cores", "Gt", &["4"])], vec![]),
                ])),
                zone_a(),
                true,
            ),
            (
                "NotIn with missing label matches",
                pod("p").affinity(required(vec![term(vec![req("disk", "NotIn", &["hdd"])], vec![])])),
                zone_a(),
                true,
            ),
            (
                "DoesNotExist",
                pod("p").affinity(required(vec![term(
                    vec![req("zone", "DoesNotExist", &[])],
                    vec![],
                )])),
                zone_a(),
                false,
            ),
            (
                "nodeSelector and affinity must both match",
                pod("p")
                    .node_selector("zone", "b")
                    .affinity(required(vec![term(vec![req("zone", "In", &["a"])], vec![])])),
                zone_a(),
                false,
            ),
            (
                "no terms match no node",
                pod("p").affinity(required(vec![])),
                zone_a(),
                false,
            ),
            (
                "empty terms are dropped",
                pod("p").affinity(required(vec![term(vec![], vec![])])),
                zone_a(),
                false,
            ),
            (
                "matchFields on the node name",
                pod("p").affinity(required(vec![term(
                    vec![],
                    vec![req("metadata.name", "In", &["n1"])],
                )])),
                zone_a(),
                true,
            ),
            (
                "matchFields NotIn the node name",
                pod("p").affinity(required(vec![term(
                    vec![],
                    vec![req("metadata.name", "NotIn", &["n1"])],
                )])),
                zone_a(),
                false,
            ),
            (
                "a bad term matches nothing, the others still count",
                pod("p").affinity(required(vec![
                    term(vec![req("zone", "Near", &["a"])], vec![]),
                    term(vec![req("zone", "In", &["a"])], vec![]),
                ])),
                zone_a(),
                true,
            ),
            (
                "an invalid label value makes NotIn fail, as labels.NewRequirement rejects it",
                pod("p").affinity(required(vec![term(
                    vec![req("zone", "NotIn", &["not valid!"])],
                    vec![],
                )])),
                zone_a(),
                false,
            ),
            (
                "an invalid key makes DoesNotExist fail",
                pod("p").affinity(required(vec![term(
                    vec![req("-bad", "DoesNotExist", &[])],
                    vec![],
                )])),
                zone_a(),
                false,
            ),
        ];
        let pl = plugin(None);
        for (name, p, n, fits) in cases {
            let s = run_filter(&*pl, &p.info(), n).expect("prefilter ran");
            if fits {
                assert!(s.is_success(), "{name}: {s:?}");
            } else {
                assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{name}");
                assert_eq!(s.reasons(), [ERR_REASON_POD.to_string()], "{name}");
            }
        }
    }

    #[test]
    fn added_affinity_is_enforced_first() {
        let pl = plugin(Some(json!({
            "addedAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["batch"]}]}]
                }
            }
        })));
        let p = pod("p").node_selector("zone", "a").info();
        let cases = [
            (
                "matches both",
                node("n1").label("pool", "batch").label("zone", "a"),
                None,
            ),
            (
                "pod mismatch",
                node("n1").label("pool", "batch"),
                Some(ERR_REASON_POD),
            ),
            (
                "enforced mismatch wins",
                node("n1").label("zone", "b"),
                Some(ERR_REASON_ENFORCED),
            ),
        ];
        for (name, n, want) in cases {
            let s = run_filter(&*pl, &p, n).expect("added affinity disables the skip");
            match want {
                None => assert!(s.is_success(), "{name}: {s:?}"),
                Some(reason) => {
                    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{name}");
                    assert_eq!(s.reasons(), [reason.to_string()], "{name}");
                }
            }
        }
        // Without any pod constraint the plugin still runs because of addedAffinity.
        let s = run_filter(&*pl, &pod("p").info(), node("n1")).expect("not skipped");
        assert_eq!(s.reasons(), [ERR_REASON_ENFORCED.to_string()]);
    }

    #[test]
    fn prefilter_narrows_to_pinned_names() {
        let names = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>());
        let f = |op: &str, v: &[&str]| req("metadata.name", op, v);
        type Case<'a> = (
            &'a str,
            Vec<NodeSelectorTerm>,
            Option<BTreeSet<String>>,
            Option<&'a str>,
        );
        let cases: Vec<Case<'_>> = vec![
            (
                "one term",
                vec![term(vec![], vec![f("In", &["n1"])])],
                names(&["n1"]),
                None,
            ),
            (
                "union over terms",
                vec![
                    term(vec![], vec![f("In", &["n1"])]),
                    term(vec![], vec![f("In", &["n2"])]),
                ],
                names(&["n1", "n2"]),
                None,
            ),
            (
                "intersection within a term",
                vec![term(vec![], vec![f("In", &["n1", "n2"]), f("In", &["n2", "n3"])])],
                names(&["n2"]),
                None,
            ),
            (
                "a term without names means all nodes",
                vec![
                    term(vec![], vec![f("In", &["n1"])]),
                    term(vec![req("zone", "Exists", &[])], vec![]),
                ],
                None,
                None,
            ),
            (
                "NotIn does not narrow",
                vec![term(vec![], vec![f("NotIn", &["n1"])])],
                None,
                None,
            ),
            (
                "disjoint requirements conflict",
                vec![term(vec![], vec![f("In", &["n1"]), f("In", &["n2"])])],
                None,
                Some(ERR_REASON_CONFLICT),
            ),
        ];
        let pl = plugin(None);
        for (name, terms, want_names, want_reason) in cases {
            let p = pod("p").affinity(required(terms)).info();
            let (result, s) = pl
                .as_pre_filter()
                .unwrap()
                .pre_filter(&mut CycleState::new(), &p, &[]);
            match want_reason {
                Some(reason) => {
                    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{name}");
                    assert_eq!(s.reasons(), [reason.to_string()], "{name}");
                }
                None => {
                    assert!(s.is_success(), "{name}: {s:?}");
                    assert_eq!(result.and_then(|r| r.node_names), want_names, "{name}");
                }
            }
        }
    }

    fn score_all(
        pl: &dyn Plugin,
        p: &PodInfo,
        nodes: Vec<NodeBuilder>,
    ) -> Result<(Vec<i64>, Vec<i64>), Status> {
        let infos: Vec<Arc<NodeInfo>> = nodes.into_iter().map(|n| Arc::new(n.info_with(vec![]))).collect();
        let mut state = CycleState::new();
        let s = pl.as_pre_score().unwrap().pre_score(&mut state, p, &infos);
        if !s.is_success() {
            return Err(s);
        }
        let scorer = pl.as_score().unwrap();
        let mut list: Vec<NodeScore> = infos
            .iter()
            .map(|n| NodeScore {
                name: n.name().to_string(),
                score: scorer.score(&state, p, n).0,
            })
            .collect();
        let raw = list.iter().map(|s| s.score).collect();
        assert!(scorer.normalize_score(&state, p, &mut list).is_success());
        Ok((raw, list.iter().map(|s| s.score).collect()))
    }

    #[test]
    fn score_sums_matching_preferred_weights() {
        let p = pod("p")
            .affinity(preferred(vec![
                (2, term(vec![req("zone", "In", &["a"])], vec![])),
                (5, term(vec![req("disk", "In", &["ssd"])], vec![])),
                (0, term(vec![req("zone", "Exists", &[])], vec![])),
                (7, term(vec![], vec![])),
            ]))
            .info();
        let (raw, normalized) = score_all(
            &*plugin(None),
            &p,
            vec![
                node("a-ssd").label("zone", "a").label("disk", "ssd"),
                node("a").label("zone", "a"),
                node("none"),
            ],
        )
        .expect("scored");
        assert_eq!(raw, vec![7, 2, 0]);
        assert_eq!(normalized, vec![100, 28, 0]);
    }

    #[test]
    fn added_preferred_terms_add_to_the_score() {
        let pl = plugin(Some(json!({
            "addedAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 3, "preference": {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["batch"]}]}}
                ]
            }
        })));
        let p = pod("p")
            .affinity(preferred(vec![(
                1,
                term(vec![req("zone", "In", &["a"])], vec![]),
            )]))
            .info();
        let (raw, normalized) = score_all(
            &*pl,
            &p,
            vec![
                node("both").label("pool", "batch").label("zone", "a"),
                node("zone").label("zone", "a"),
            ],
        )
        .expect("scored");
        assert_eq!(raw, vec![4, 1]);
        assert_eq!(normalized, vec![100, 25]);
        // The added terms alone keep PreScore from skipping.
        let (raw, _) =
            score_all(&*pl, &pod("p").info(), vec![node("n").label("pool", "batch")]).expect("scored");
        assert_eq!(raw, vec![3]);
    }

    #[test]
    fn prescore_skips_and_errors() {
        let s = score_all(&*plugin(None), &pod("p").info(), vec![node("n1")]).unwrap_err();
        assert!(s.is_skip());
        let bad = pod("p").affinity(preferred(vec![(
            1,
            term(vec![req("zone", "Near", &["a"])], vec![]),
        )]));
        let s = score_all(&*plugin(None), &bad.info(), vec![node("n1")]).unwrap_err();
        assert_eq!(s.code(), Code::Error);
    }

    #[test]
    fn invalid_added_affinity_is_rejected() {
        let handle = Handle {
            snapshot: Arc::new(snapshot(vec![], vec![])),
        };
        for (name, args) in [
            (
                "bad required operator",
                json!({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Near", "values": ["x"]}]}]}}}),
            ),
            (
                "bad preferred key",
                json!({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": {"matchExpressions": [{"key": "a/b/c", "operator": "Exists"}]}}]}}),
            ),
            ("not an object", json!({"addedAffinity": 5})),
        ] {
            assert!(
                new(Some(&args), &handle, &crate::framework::FeatureGates::default()).is_err(),
                "{name}"
            );
        }
    }

    #[test]
    fn label_key_and_value_rules() {
        for (k, ok) in [
            ("zone", true),
            ("topology.kubernetes.io/zone", true),
            ("Example.com/zone", false),
            ("/zone", false),
            ("a/b/c", false),
            ("-zone", false),
            ("z_o.n-e", true),
            (&"x".repeat(64) as &str, false),
        ] {
            assert_eq!(is_label_key(k), ok, "key {k}");
        }
        for (v, ok) in [
            ("", true),
            ("a", true),
            ("A_b.c-9", true),
            ("a-", false),
            ("a b", false),
        ] {
            assert_eq!(is_label_value(v), ok, "value {v}");
        }
    }
}
