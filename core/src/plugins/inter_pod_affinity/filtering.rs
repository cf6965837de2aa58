//! InterPodAffinity's PreFilter, AddPod/RemovePod and Filter: required affinity and anti-affinity.
//!
//! PreFilter counts, per topology pair (key, value), the pods that satisfy the incoming pod's required
//! terms and the running pods whose required anti-affinity rejects it; Filter then only looks up the
//! node's labels. (The alpha InterPodAffinityHostnameFastPath gate is off in 1.37 and not modelled.)

use std::collections::HashMap;
use std::sync::Arc;

use rayon::prelude::*;

use crate::framework::cycle_state::{CycleState, StateKey};
use crate::framework::interface::{FilterPlugin, PreFilterExtensions, PreFilterPlugin, PreFilterResult};
use crate::framework::status::Status;
use crate::labels::Labels;
use crate::snapshot::{AffinityTerm, NodeInfo, PodInfo};

use super::{
    ERR_REASON_AFFINITY_RULES_NOT_MATCH, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH, InterPodAffinity, pod_matches_all_affinity_terms,
};

/// Where PreFilter leaves its work for Filter.
pub(super) const PRE_FILTER_STATE_KEY: StateKey<PreFilterState> = StateKey::new("PreFilterInterPodAffinity");

/// Matching-pod counts per topology pair: key → value → count (Go's `topologyToMatchedTermCount`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct TopologyCounts(HashMap<String, HashMap<String, i64>>);

impl TopologyCounts {
    /// The count of a pair (0 when absent).
    pub(super) fn get(&self, key: &str, value: &str) -> i64 {
        self.0.get(key).and_then(|m| m.get(value)).copied().unwrap_or(0)
    }

    /// True when no pair is recorded.
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn add(&mut self, key: &str, value: &str, delta: i64) {
        *self
            .0
            .entry(key.to_string())
            .or_default()
            .entry(value.to_string())
            .or_insert(0) += delta;
    }

    /// Go's `update`: adds `delta` to the node's pair for `key` (if the node has it), dropping pairs
    /// that fall to zero.
    fn update(&mut self, node_labels: &Labels, key: &str, delta: i64) {
        let Some(value) = node_labels.get(key) else {
            return;
        };
        self.add(key, value, delta);
        if let Some(values) = self.0.get_mut(key) {
            if values.get(value) == Some(&0) {
                values.remove(value);
            }
            if values.is_empty() {
                self.0.remove(key);
            }
        }
    }

    fn merge(&mut self, pairs: Vec<(&str, &str)>) {
        for (k, v) in pairs {
            self.add(k, v, 1);
        }
    }

    /// Updates each term's pair when `pod` matches all the terms (affinity).
    fn update_with_affinity_terms(
        &mut self,
        terms: &[AffinityTerm],
        pod: &PodInfo,
        node_labels: &Labels,
        delta: i64,
    ) {
        if pod_matches_all_affinity_terms(terms, pod) {
            for t in terms {
                self.update(node_labels, &t.topology_key, delta);
            }
        }
    }

    /// Updates the pair of each term `pod` matches (anti-affinity).
    fn update_with_anti_affinity_terms(
        &mut self,
        terms: &[AffinityTerm],
        pod: &PodInfo,
        namespace_labels: Option<&Labels>,
        node_labels: &Labels,
        delta: i64,
    ) {
        for t in terms {
            if t.matches(pod, namespace_labels) {
                self.update(node_labels, &t.topology_key, delta);
            }
        }
    }
}

/// The topology pairs of `node_labels` for `key`, if any (Go's `recordMatch`).
fn record<'a>(out: &mut Vec<(&'a str, &'a str)>, node_labels: &'a Labels, key: &'a str) {
    if let Some((k, v)) = node_labels.get_key_value(key) {
        out.push((k.as_str(), v.as_str()));
    }
}

/// PreFilter's result.
#[derive(Debug, Clone)]
pub(super) struct PreFilterState {
    /// Pairs where running pods' required anti-affinity matches the incoming pod.
    pub existing_anti_affinity_counts: TopologyCounts,
    /// Pairs where pods match all of the incoming pod's required affinity terms.
    pub affinity_counts: TopologyCounts,
    /// Pairs where pods match one of the incoming pod's required anti-affinity terms.
    pub anti_affinity_counts: TopologyCounts,
    /// The incoming pod's required affinity terms, namespaceSelector unrolled.
    affinity_terms: Arc<Vec<AffinityTerm>>,
    /// The incoming pod's required anti-affinity terms, namespaceSelector unrolled.
    anti_affinity_terms: Arc<Vec<AffinityTerm>>,
    /// The incoming pod's namespace labels.
    namespace_labels: Option<Arc<Labels>>,
}

impl PreFilterState {
    /// Go's `updateWithPod` (fast path off).
    fn update_with_pod(&mut self, incoming: &PodInfo, other: &PodInfo, node: &NodeInfo, delta: i64) {
        let labels = node.labels();
        self.existing_anti_affinity_counts
            .update_with_anti_affinity_terms(
                &other.required_anti_affinity_terms,
                incoming,
                self.namespace_labels.as_deref(),
                labels,
                delta,
            );
        self.affinity_counts
            .update_with_affinity_terms(&self.affinity_terms, other, labels, delta);
        self.anti_affinity_counts.update_with_anti_affinity_terms(
            &self.anti_affinity_terms,
            other,
            None,
            labels,
            delta,
        );
    }
}

fn state_missing() -> Status {
    Status::error(format!(
        "error reading {:?} from cycleState: not found",
        PRE_FILTER_STATE_KEY.name()
    ))
}

impl InterPodAffinity {
    /// Go's `getExistingAntiAffinityCounts`: the running pods' required anti-affinity terms that match
    /// the incoming pod, found through the snapshot's namespace index.
    fn existing_anti_affinity_counts(
        &self,
        incoming: &PodInfo,
        namespace_labels: Option<&Labels>,
    ) -> TopologyCounts {
        let mut counts = TopologyCounts::default();
        // Only terms that name the incoming pod's namespace, or select namespaces by label, can match it.
        let index = self.snapshot.affinity_index();
        let mut pairs = Vec::new();
        for (node, existing, i) in index.anti_affinity_terms_for(incoming.namespace()) {
            let t = &existing.required_anti_affinity_terms[*i];
            if t.matches(incoming, namespace_labels) {
                record(&mut pairs, node.labels(), &t.topology_key);
            }
        }
        counts.merge(pairs);
        counts
    }

    /// Go's `getIncomingAffinityAntiAffinityCounts` over all nodes.
    fn incoming_counts(
        &self,
        affinity_terms: &[AffinityTerm],
        anti_affinity_terms: &[AffinityTerm],
        nodes: &[Arc<NodeInfo>],
    ) -> (TopologyCounts, TopologyCounts) {
        let mut affinity = TopologyCounts::default();
        let mut anti = TopologyCounts::default();
        if affinity_terms.is_empty() && anti_affinity_terms.is_empty() {
            return (affinity, anti);
        }
        // Terms match only pods of the namespaces they name: with the snapshot's namespace index only
        // those pods are looked at (same counts; the index is over these very nodes).
        let terms = || affinity_terms.iter().chain(anti_affinity_terms);
        if std::ptr::eq(nodes.as_ptr(), self.snapshot.nodes().as_ptr())
            && terms().all(|t| t.namespace_selector.is_nothing())
        {
            let namespaces: std::collections::BTreeSet<&str> = terms()
                .flat_map(|t| t.namespaces.iter().map(String::as_str))
                .collect();
            let index = self.snapshot.affinity_index();
            let mut aff = Vec::new();
            let mut anti_pairs = Vec::new();
            for (position, existing) in namespaces.into_iter().flat_map(|ns| index.pods_in(ns)) {
                let labels = nodes[*position].labels();
                if pod_matches_all_affinity_terms(affinity_terms, existing) {
                    for t in affinity_terms {
                        record(&mut aff, labels, &t.topology_key);
                    }
                }
                for t in anti_affinity_terms {
                    if t.matches(existing, None) {
                        record(&mut anti_pairs, labels, &t.topology_key);
                    }
                }
            }
            affinity.merge(aff);
            anti.merge(anti_pairs);
            return (affinity, anti);
        }
        type Pairs<'a> = Vec<(&'a str, &'a str)>;
        let per_node: Vec<(Pairs<'_>, Pairs<'_>)> = nodes
            .par_iter()
            .map(|node| {
                let labels = node.labels();
                let mut aff = Vec::new();
                let mut anti = Vec::new();
                for existing in &node.pods {
                    if pod_matches_all_affinity_terms(affinity_terms, existing) {
                        for t in affinity_terms {
                            record(&mut aff, labels, &t.topology_key);
                        }
                    }
                    for t in anti_affinity_terms {
                        if t.matches(existing, None) {
                            record(&mut anti, labels, &t.topology_key);
                        }
                    }
                }
                (aff, anti)
            })
            .collect();
        for (a, n) in per_node {
            affinity.merge(a);
            anti.merge(n);
        }
        (affinity, anti)
    }
}

impl PreFilterPlugin for InterPodAffinity {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        if let Some(err) = &pod.parse_error {
            return (None, Status::unresolvable(format!("parsing pod: {err}")));
        }
        let mut affinity_terms = pod.required_affinity_terms.clone();
        for t in &mut affinity_terms {
            self.merge_term_namespaces(t);
        }
        let mut anti_affinity_terms = pod.required_anti_affinity_terms.clone();
        for t in &mut anti_affinity_terms {
            self.merge_term_namespaces(t);
        }
        let namespace_labels = self.namespace_labels(pod);

        let existing_anti_affinity_counts =
            self.existing_anti_affinity_counts(pod, namespace_labels.as_deref());
        let (affinity_counts, anti_affinity_counts) =
            self.incoming_counts(&affinity_terms, &anti_affinity_terms, nodes);

        if existing_anti_affinity_counts.is_empty()
            && affinity_terms.is_empty()
            && anti_affinity_terms.is_empty()
        {
            return (None, Status::skip());
        }
        state.write(
            &PRE_FILTER_STATE_KEY,
            PreFilterState {
                existing_anti_affinity_counts,
                affinity_counts,
                anti_affinity_counts,
                affinity_terms: Arc::new(affinity_terms),
                anti_affinity_terms: Arc::new(anti_affinity_terms),
                namespace_labels,
            },
        );
        (None, Status::success())
    }

    fn pre_filter_extensions(&self) -> Option<&dyn PreFilterExtensions> {
        Some(self)
    }
}

impl PreFilterExtensions for InterPodAffinity {
    fn add_pod(
        &self,
        state: &mut CycleState,
        pod_to_schedule: &PodInfo,
        pod_to_add: &PodInfo,
        node: &NodeInfo,
    ) -> Status {
        let Some(s) = state.read_mut(&PRE_FILTER_STATE_KEY) else {
            return state_missing();
        };
        s.update_with_pod(pod_to_schedule, pod_to_add, node, 1);
        Status::success()
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod_to_schedule: &PodInfo,
        pod_to_remove: &PodInfo,
        node: &NodeInfo,
    ) -> Status {
        let Some(s) = state.read_mut(&PRE_FILTER_STATE_KEY) else {
            return state_missing();
        };
        s.update_with_pod(pod_to_schedule, pod_to_remove, node, -1);
        Status::success()
    }
}

/// Go's `nodeTopologyMatchesAffinity`: every term's domain on the node holds a pod matching all terms;
/// failing that, the pod may be the first of a group with affinity to itself: allowed when no pod in
/// the cluster matches yet, the pod matches its own terms, and the node has every topology key.
fn satisfies_pod_affinity(s: &PreFilterState, pod: &PodInfo, labels: &Labels) -> bool {
    if s.affinity_terms.is_empty() {
        return true;
    }
    let mut pods_exist = true;
    for t in s.affinity_terms.iter() {
        let Some(value) = labels.get(&t.topology_key) else {
            return false;
        };
        if s.affinity_counts.get(&t.topology_key, value) <= 0 {
            pods_exist = false;
        }
    }
    pods_exist || (s.affinity_counts.is_empty() && pod_matches_all_affinity_terms(&s.affinity_terms, pod))
}

/// Go's `satisfyPodAntiAffinity`: no term's domain on the node holds a pod the term matches.
fn satisfies_pod_anti_affinity(s: &PreFilterState, labels: &Labels) -> bool {
    if s.anti_affinity_counts.is_empty() {
        return true;
    }
    !s.anti_affinity_terms.iter().any(|t| {
        labels
            .get(&t.topology_key)
            .is_some_and(|v| s.anti_affinity_counts.get(&t.topology_key, v) > 0)
    })
}

/// Go's `satisfyExistingPodsAntiAffinity`: none of the node's topology pairs is rejected by a running pod.
fn satisfies_existing_pods_anti_affinity(s: &PreFilterState, labels: &Labels) -> bool {
    if s.existing_anti_affinity_counts.is_empty() {
        return true;
    }
    !labels
        .iter()
        .any(|(k, v)| s.existing_anti_affinity_counts.get(k, v) > 0)
}

impl FilterPlugin for InterPodAffinity {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read(&PRE_FILTER_STATE_KEY) else {
            return state_missing();
        };
        let labels = node.labels();
        if !satisfies_pod_affinity(s, pod, labels) {
            return Status::unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH);
        }
        if !satisfies_pod_anti_affinity(s, labels) {
            return Status::unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH);
        }
        if !satisfies_existing_pods_anti_affinity(s, labels) {
            return Status::unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH);
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::super::new;
    use super::super::test_util::{affinity, term};
    use super::*;
    use crate::Code;
    use crate::framework::runtime::Handle;
    use crate::snapshot::{ClusterObjects, Snapshot};
    use crate::testing::{node, pod};
    use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

    const ZONE: &str = "zone";
    const HOST: &str = "kubernetes.io/hostname";

    fn namespace(name: &str, labels: &[(&str, &str)]) -> Namespace {
        Namespace {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn zoned(name: &str, zone: &str) -> Node {
        node(name).label(ZONE, zone).obj()
    }

    /// PreFilter, then Filter on every node: PreFilter's code and each node's (code, reasons).
    fn run(objects: ClusterObjects, incoming: Pod) -> (Code, Vec<(Code, Vec<String>)>) {
        let snap = Arc::new(Snapshot::new(objects));
        let pl = new(
            None,
            &Handle {
                snapshot: snap.clone(),
            },
            &crate::framework::FeatureGates::default(),
        )
        .expect("plugin");
        let pod = PodInfo::new(incoming);
        let mut state = CycleState::new();
        let (_, st) = pl
            .as_pre_filter()
            .unwrap()
            .pre_filter(&mut state, &pod, snap.nodes());
        if !st.is_success() {
            return (st.code(), Vec::new());
        }
        let results = snap
            .nodes()
            .iter()
            .map(|n| {
                let st = pl.as_filter().unwrap().filter(&state, &pod, n);
                (st.code(), st.reasons().to_vec())
            })
            .collect();
        (Code::Success, results)
    }

    fn objects(nodes: Vec<Node>, pods: Vec<Pod>) -> ClusterObjects {
        ClusterObjects {
            nodes,
            pods,
            namespaces: vec![
                namespace("default", &[("team", "a")]),
                namespace("other", &[("team", "b")]),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn filter_table() {
        use Code::{Success as S, Unschedulable as U, UnschedulableAndUnresolvable as UAU};
        let nodes = || {
            vec![
                zoned("a", "z1"),
                zoned("b", "z1"),
                zoned("c", "z2"),
                node("bare").obj(),
            ]
        };
        let db = |name: &str, n: &str| pod(name).label("app", "db").node(n).obj();
        let with = |a| pod("p").label("app", "web").affinity(a).obj();
        type Case = (&'static str, Vec<Pod>, Pod, Code, Vec<Code>);
        let cases: Vec<Case> = vec![
            (
                "no terms anywhere: PreFilter skips",
                vec![db("d", "a")],
                pod("p").obj(),
                Code::Skip,
                vec![],
            ),
            (
                "affinity to db by zone",
                vec![db("d", "a")],
                with(affinity(vec![term("app", "db", ZONE)], vec![], vec![], vec![])),
                S,
                vec![S, S, UAU, UAU],
            ),
            (
                "anti-affinity to db by zone",
                vec![db("d", "a")],
                with(affinity(vec![], vec![], vec![term("app", "db", ZONE)], vec![])),
                S,
                vec![U, U, S, S],
            ),
            (
                "anti-affinity by hostname",
                vec![db("d", "a")],
                with(affinity(vec![], vec![], vec![term("app", "db", HOST)], vec![])),
                S,
                vec![U, S, S, S],
            ),
            (
                "existing pod's anti-affinity rejects the incoming pod in its zone",
                vec![
                    pod("d")
                        .label("app", "db")
                        .node("c")
                        .affinity(affinity(vec![], vec![], vec![term("app", "web", ZONE)], vec![]))
                        .obj(),
                ],
                pod("p").label("app", "web").obj(),
                S,
                vec![S, S, U, S],
            ),
            (
                "first pod of a self-affine group may go anywhere with the keys",
                vec![],
                with(affinity(vec![term("app", "web", ZONE)], vec![], vec![], vec![])),
                S,
                vec![S, S, S, UAU],
            ),
            (
                "self-affinity does not apply once a matching pod exists",
                vec![pod("w").label("app", "web").node("c").obj()],
                with(affinity(vec![term("app", "web", ZONE)], vec![], vec![], vec![])),
                S,
                vec![UAU, UAU, S, UAU],
            ),
            (
                "not self-matching and nothing matches: unresolvable everywhere",
                vec![],
                with(affinity(vec![term("app", "db", ZONE)], vec![], vec![], vec![])),
                S,
                vec![UAU, UAU, UAU, UAU],
            ),
            (
                "affinity needs one pod matching all terms",
                vec![db("d", "a"), pod("x").label("tier", "be").node("a").obj()],
                with(affinity(
                    vec![term("app", "db", ZONE), term("tier", "be", ZONE)],
                    vec![],
                    vec![],
                    vec![],
                )),
                S,
                vec![UAU, UAU, UAU, UAU],
            ),
            (
                "terms only see the pod's namespace",
                vec![pod("d").namespace("other").label("app", "db").node("a").obj()],
                with(affinity(vec![], vec![], vec![term("app", "db", ZONE)], vec![])),
                S,
                vec![S, S, S, S],
            ),
        ];
        for (name, pods, incoming, pre, want) in cases {
            let (code, results) = run(objects(nodes(), pods), incoming);
            assert_eq!(code, pre, "{name}: prefilter");
            assert_eq!(results.iter().map(|r| r.0).collect::<Vec<_>>(), want, "{name}");
        }
    }

    #[test]
    fn reasons_are_upstream_strings() {
        let nodes = vec![zoned("a", "z1"), zoned("c", "z2")];
        let incoming = pod("p")
            .label("app", "web")
            .affinity(affinity(
                vec![term("app", "db", ZONE)],
                vec![],
                vec![term("app", "cache", ZONE)],
                vec![],
            ))
            .obj();
        let pods = vec![
            pod("d").label("app", "db").node("a").obj(),
            pod("d2").label("app", "db").node("c").obj(),
            pod("c").label("app", "cache").node("a").obj(),
            pod("x")
                .label("app", "x")
                .node("c")
                .affinity(affinity(vec![], vec![], vec![term("app", "web", HOST)], vec![]))
                .obj(),
        ];
        let (_, results) = run(objects(nodes.clone(), pods), incoming);
        assert_eq!(
            results[0],
            (
                Code::Unschedulable,
                vec!["node(s) didn't match pod anti-affinity rules".into()]
            )
        );
        assert_eq!(
            results[1],
            (
                Code::Unschedulable,
                vec!["node(s) didn't satisfy existing pods anti-affinity rules".into()]
            )
        );
        let lonely = pod("p")
            .affinity(affinity(vec![term("app", "db", ZONE)], vec![], vec![], vec![]))
            .obj();
        let (_, results) = run(objects(nodes, vec![]), lonely);
        assert_eq!(
            results[0],
            (
                Code::UnschedulableAndUnresolvable,
                vec!["node(s) didn't match pod affinity rules".into()]
            )
        );
    }

    #[test]
    fn namespace_selectors() {
        let nodes = || vec![zoned("a", "z1"), zoned("c", "z2")];
        let in_other = || vec![pod("d").namespace("other").label("app", "db").node("a").obj()];
        let ns_term = |sel: Option<LabelSelector>| {
            let mut t = term("app", "db", ZONE);
            t.namespace_selector = sel;
            t
        };
        let team_b = LabelSelector {
            match_labels: Some([("team".to_string(), "b".to_string())].into()),
            ..Default::default()
        };
        let team_c = LabelSelector {
            match_labels: Some([("team".to_string(), "c".to_string())].into()),
            ..Default::default()
        };
        for (name, sel, want) in [
            (
                "selector picks the other namespace",
                Some(team_b.clone()),
                vec![Code::Unschedulable, Code::Success],
            ),
            (
                "empty selector is every namespace",
                Some(LabelSelector::default()),
                vec![Code::Unschedulable, Code::Success],
            ),
            (
                "selector matching no namespace",
                Some(team_c),
                vec![Code::Success, Code::Success],
            ),
        ] {
            let incoming = pod("p")
                .affinity(affinity(vec![], vec![], vec![ns_term(sel)], vec![]))
                .obj();
            let (_, results) = run(objects(nodes(), in_other()), incoming);
            assert_eq!(results.iter().map(|r| r.0).collect::<Vec<_>>(), want, "{name}");
        }

        // An existing pod's term with a namespaceSelector is matched against the incoming pod's
        // namespace labels.
        let mut t = term("app", "web", ZONE);
        t.namespace_selector = Some(LabelSelector {
            match_labels: Some([("team".to_string(), "a".to_string())].into()),
            ..Default::default()
        });
        let guard = pod("g")
            .namespace("other")
            .node("a")
            .affinity(affinity(vec![], vec![], vec![t], vec![]))
            .obj();
        let (_, results) = run(
            objects(nodes(), vec![guard.clone()]),
            pod("p").label("app", "web").obj(),
        );
        assert_eq!(results[0].0, Code::Unschedulable);
        let (code, _) = run(
            objects(nodes(), vec![guard]),
            pod("p").namespace("other").label("app", "web").obj(),
        );
        assert_eq!(
            code,
            Code::Skip,
            "team b namespace is not selected: nothing to check"
        );
    }

    #[test]
    fn add_and_remove_pod() {
        let snap = Arc::new(Snapshot::new(objects(
            vec![zoned("a", "z1"), zoned("c", "z2")],
            vec![pod("d").label("app", "db").node("a").obj()],
        )));
        let pl = new(
            None,
            &Handle {
                snapshot: snap.clone(),
            },
            &crate::framework::FeatureGates::default(),
        )
        .unwrap();
        let incoming = PodInfo::new(
            pod("p")
                .label("app", "web")
                .affinity(affinity(
                    vec![term("app", "db", ZONE)],
                    vec![],
                    vec![term("app", "cache", ZONE)],
                    vec![],
                ))
                .obj(),
        );
        let mut state = CycleState::new();
        let (_, st) = pl
            .as_pre_filter()
            .unwrap()
            .pre_filter(&mut state, &incoming, snap.nodes());
        assert!(st.is_success());
        let ext = pl.as_pre_filter().unwrap().pre_filter_extensions().unwrap();
        let f = |state: &CycleState, i: usize| {
            pl.as_filter()
                .unwrap()
                .filter(state, &incoming, &snap.nodes()[i])
                .code()
        };
        assert_eq!(
            (f(&state, 0), f(&state, 1)),
            (Code::Success, Code::UnschedulableAndUnresolvable)
        );

        // A nominated db pod in z2 satisfies the affinity there.
        let mut s2 = state.clone();
        let db2 = PodInfo::new(pod("db2").label("app", "db").node("c").obj());
        assert!(
            ext.add_pod(&mut s2, &incoming, &db2, &snap.nodes()[1])
                .is_success()
        );
        assert_eq!(f(&s2, 1), Code::Success);
        // A cache pod in z1 violates the anti-affinity there.
        let cache = PodInfo::new(pod("cache").label("app", "cache").node("a").obj());
        assert!(
            ext.add_pod(&mut s2, &incoming, &cache, &snap.nodes()[0])
                .is_success()
        );
        assert_eq!(f(&s2, 0), Code::Unschedulable);
        // A pod with anti-affinity to web pods added to z2 rejects the incoming pod there.
        let guard = PodInfo::new(
            pod("g")
                .node("c")
                .affinity(affinity(vec![], vec![], vec![term("app", "web", ZONE)], vec![]))
                .obj(),
        );
        assert!(
            ext.add_pod(&mut s2, &incoming, &guard, &snap.nodes()[1])
                .is_success()
        );
        assert_eq!(f(&s2, 1), Code::Unschedulable);
        // Removing them all restores the original verdicts; removing the only db pod leaves the pod
        // without a match (and it does not match itself).
        for (p, n) in [(&cache, 0), (&guard, 1), (&db2, 1)] {
            assert!(
                ext.remove_pod(&mut s2, &incoming, p, &snap.nodes()[n])
                    .is_success()
            );
        }
        assert_eq!(
            (f(&s2, 0), f(&s2, 1)),
            (Code::Success, Code::UnschedulableAndUnresolvable)
        );
        let db = PodInfo::new(pod("d").label("app", "db").node("a").obj());
        assert!(
            ext.remove_pod(&mut s2, &incoming, &db, &snap.nodes()[0])
                .is_success()
        );
        assert!(s2.read(&PRE_FILTER_STATE_KEY).unwrap().affinity_counts.is_empty());
        assert_eq!(f(&s2, 0), Code::UnschedulableAndUnresolvable);
        assert_eq!(f(&state, 0), Code::Success, "original state untouched");

        let mut empty = CycleState::new();
        let st = ext.add_pod(&mut empty, &incoming, &db, &snap.nodes()[0]);
        assert_eq!(
            (st.code(), st.message()),
            (
                Code::Error,
                "error reading \"PreFilterInterPodAffinity\" from cycleState: not found".to_string()
            )
        );
    }

    #[test]
    fn unparsable_terms_are_unresolvable() {
        let mut t = term("app", "db", ZONE);
        t.label_selector = Some(LabelSelector {
            match_expressions: Some(vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                    key: "app".into(),
                    operator: "Near".into(),
                    values: None,
                },
            ]),
            ..Default::default()
        });
        let (code, _) = run(
            objects(vec![zoned("a", "z1")], vec![]),
            pod("p").affinity(affinity(vec![t], vec![], vec![], vec![])).obj(),
        );
        assert_eq!(code, Code::UnschedulableAndUnresolvable);
    }

    #[test]
    fn topology_counts_drop_zero_pairs() {
        let labels: Labels = [("zone".to_string(), "z1".to_string())].into();
        let mut c = TopologyCounts::default();
        c.update(&labels, "zone", 1);
        assert_eq!(c.get("zone", "z1"), 1);
        c.update(&labels, "missing", 1);
        assert_eq!(c.get("missing", ""), 0);
        c.update(&labels, "zone", -1);
        assert!(c.is_empty());
    }
}
