//! Placed pods indexed by namespace, for InterPodAffinity's and PodTopologySpread's PreFilter (spread
//! constraints count pods of the incoming pod's namespace only). For InterPodAffinity: an affinity term only
//! matches pods of the namespaces it names (after its namespaceSelector is unrolled), so counting
//! the pods that match an incoming pod's terms needs only those namespaces' pods, and the running pods
//! whose required anti-affinity can match an incoming pod are those whose terms name its namespace
//! (or select namespaces by label). InterPodAffinity's PreScore likewise: a running pod's scoring
//! terms (required affinity, preferred affinity and anti-affinity) can only match an incoming pod of
//! a namespace they name, unless they select namespaces by label. kube-scheduler walks every pod of
//! every node for each pod it schedules; triage evaluates thousands of pods on one snapshot, so the
//! index is built once, on first use.
//!
//! PodTopologySpread's scoring also keeps here, per (namespace, selector), how many placed pods each
//! node holds that the selector matches ([`AffinityIndex::spread_matches`]): the pods of one workload
//! share their spreading selector, so a batch counts it once instead of once per pod.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::{NodeInfo, PodInfo};
use crate::labels::Selector;

/// A placed pod and its node's position in the snapshot's nodes.
pub type PlacedPod = (usize, Arc<PodInfo>);

/// A running pod's required anti-affinity term: its node, the pod, and the term's index in
/// `required_anti_affinity_terms`.
pub type AntiAffinityTermRef = (Arc<NodeInfo>, Arc<PodInfo>, usize);

/// The index (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct AffinityIndex {
    /// Placed pods by namespace.
    pods_by_namespace: HashMap<String, Vec<PlacedPod>>,
    /// Required anti-affinity terms that name namespaces (and select none by label), by namespace.
    anti_affinity_by_namespace: HashMap<String, Vec<AntiAffinityTermRef>>,
    /// Required anti-affinity terms with a namespaceSelector: they may match a pod of any namespace.
    anti_affinity_any_namespace: Vec<AntiAffinityTermRef>,
    /// Placed pods with scoring terms that all name their namespaces, by each namespace named (a pod
    /// once per namespace).
    scoring_by_namespace: HashMap<String, Vec<PlacedPod>>,
    /// Placed pods with a scoring term that selects namespaces by label: they may match any pod.
    scoring_any_namespace: Vec<PlacedPod>,
    /// What [`AffinityIndex::spread_matches`] has counted so far.
    spread_counts: SpreadCounts,
}

/// Matching pods per node position, by namespace and selector. Behind a lock because cycles on one
/// snapshot run in parallel (triage); changed only with the index (`&mut`), when a pod is placed or
/// removed, so the counts always describe the snapshot's pods.
#[derive(Default)]
struct SpreadCounts(Mutex<HashMap<String, Vec<SelectorCounts>>>);

/// A selector and its matching pods per node position.
type SelectorCounts = (Selector, Arc<Vec<u32>>);

/// Selectors kept at most (each a counter per node: 20 kB at 5,000 nodes); past it, counts are
/// computed and not kept.
const MAX_SPREAD_SELECTORS: usize = 1024;

impl Clone for SpreadCounts {
    fn clone(&self) -> Self {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner).clone();
        SpreadCounts(Mutex::new(map))
    }
}

impl std::fmt::Debug for SpreadCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("SpreadCounts")
            .field("selectors", &map.values().map(Vec::len).sum::<usize>())
            .finish()
    }
}

/// Whether PodTopologySpread counts `pod` for `selector` (`countPodsMatchSelector`, namespaces
/// apart): terminating pods never, and an empty selector matches nothing there.
pub fn spread_counts_pod(selector: &Selector, pod: &PodInfo) -> bool {
    !pod.is_terminating() && !selector.is_everything() && selector.matches_opt(pod.labels())
}

impl SpreadCounts {
    /// A pod of the snapshot placed (`delta` 1) or removed (-1) at `position`.
    fn update(&mut self, position: usize, pod: &PodInfo, delta: i32) {
        let map = self.0.get_mut().unwrap_or_else(PoisonError::into_inner);
        for (selector, counts) in map.get_mut(pod.namespace()).into_iter().flatten() {
            if spread_counts_pod(selector, pod)
                && let Some(count) = Arc::make_mut(counts).get_mut(position)
            {
                *count = count.saturating_add_signed(delta);
            }
        }
    }
}

impl AffinityIndex {
    /// Indexes the pods of `nodes`.
    pub fn new(nodes: &[Arc<NodeInfo>]) -> Self {
        let mut index = AffinityIndex::default();
        for (position, node) in nodes.iter().enumerate() {
            for pod in &node.pods {
                index.add_placed(position, pod);
            }
            for pod in &node.pods_with_required_anti_affinity {
                index.add_anti_affinity_terms(node, pod);
            }
            for pod in &node.pods_with_affinity {
                index.add_scoring_terms(position, pod);
            }
        }
        index
    }

    /// Per node position (of `nodes` nodes), the placed pods of `namespace` that `selector` matches,
    /// as PodTopologySpread counts them (`countPodsMatchSelector`: terminating pods and an empty
    /// selector count nothing). Counted once per (namespace, selector) and kept for the index's life.
    pub fn spread_matches(&self, namespace: &str, selector: &Selector, nodes: usize) -> Arc<Vec<u32>> {
        let lock = || {
            self.spread_counts
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
        };
        let cached = |map: &HashMap<String, Vec<SelectorCounts>>| {
            map.get(namespace)?
                .iter()
                .find(|(s, counts)| s == selector && counts.len() == nodes)
                .map(|(_, counts)| counts.clone())
        };
        if let Some(counts) = cached(&lock()) {
            return counts;
        }
        let mut counts = vec![0u32; nodes];
        for (position, pod) in self.pods_in(namespace) {
            if spread_counts_pod(selector, pod)
                && let Some(count) = counts.get_mut(*position)
            {
                *count += 1;
            }
        }
        let counts = Arc::new(counts);
        let mut map = lock();
        if cached(&map).is_none() && map.values().map(Vec::len).sum::<usize>() < MAX_SPREAD_SELECTORS {
            map.entry(namespace.to_string())
                .or_default()
                .push((selector.clone(), counts.clone()));
        }
        counts
    }

    /// Adds a pod just placed on `node` (at `position` in the snapshot's nodes).
    pub(crate) fn add(&mut self, position: usize, node: &Arc<NodeInfo>, pod: &Arc<PodInfo>) {
        self.spread_counts.update(position, pod, 1);
        self.add_placed(position, pod);
        if pod.has_required_anti_affinity() {
            self.add_anti_affinity_terms(node, pod);
        }
        self.add_scoring_terms(position, pod);
    }

    /// Removes a pod that was on the node at `position`.
    pub(crate) fn remove(&mut self, position: usize, pod: &PodInfo) {
        let same = |p: &PodInfo| p.namespace() == pod.namespace() && p.name() == pod.name();
        if let Some(pods) = self.pods_by_namespace.get_mut(pod.namespace()) {
            let before = pods.len();
            pods.retain(|(at, p)| !(*at == position && same(p)));
            // Counted only if it was there (the counts describe pods_by_namespace).
            for _ in pods.len()..before {
                self.spread_counts.update(position, pod, -1);
            }
        }
        if pod.has_required_anti_affinity() {
            for terms in self.anti_affinity_by_namespace.values_mut() {
                terms.retain(|(_, p, _)| !same(p));
            }
            self.anti_affinity_any_namespace.retain(|(_, p, _)| !same(p));
        }
        // Only the lists `add_scoring_terms` put the pod in.
        let placed_elsewhere = |(at, p): &PlacedPod| !(*at == position && same(p));
        match scoring_reach(pod) {
            ScoringReach::AnyNamespace => self.scoring_any_namespace.retain(placed_elsewhere),
            ScoringReach::Namespaces(namespaces) => {
                for ns in namespaces {
                    if let Some(pods) = self.scoring_by_namespace.get_mut(ns.as_str()) {
                        pods.retain(placed_elsewhere);
                    }
                }
            }
        }
    }

    fn add_scoring_terms(&mut self, position: usize, pod: &Arc<PodInfo>) {
        match scoring_reach(pod) {
            ScoringReach::AnyNamespace => self.scoring_any_namespace.push((position, pod.clone())),
            ScoringReach::Namespaces(namespaces) => {
                for ns in namespaces {
                    self.scoring_by_namespace
                        .entry(ns.clone())
                        .or_default()
                        .push((position, pod.clone()));
                }
            }
        }
    }

    fn add_placed(&mut self, position: usize, pod: &Arc<PodInfo>) {
        self.pods_by_namespace
            .entry(pod.namespace().to_string())
            .or_default()
            .push((position, pod.clone()));
    }

    fn add_anti_affinity_terms(&mut self, node: &Arc<NodeInfo>, pod: &Arc<PodInfo>) {
        for (i, term) in pod.required_anti_affinity_terms.iter().enumerate() {
            let entry = (node.clone(), pod.clone(), i);
            if term.namespace_selector.is_nothing() {
                for ns in &term.namespaces {
                    self.anti_affinity_by_namespace
                        .entry(ns.clone())
                        .or_default()
                        .push(entry.clone());
                }
            } else {
                self.anti_affinity_any_namespace.push(entry);
            }
        }
    }

    /// The placed pods of `namespace`.
    pub fn pods_in(&self, namespace: &str) -> &[PlacedPod] {
        self.pods_by_namespace
            .get(namespace)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The placed pods whose scoring terms may match a pod of `namespace`, each once: InterPodAffinity's
    /// PreScore needs no others for the running pods' half of its sum.
    pub fn pods_with_scoring_terms_for(&self, namespace: &str) -> impl Iterator<Item = &PlacedPod> {
        self.scoring_by_namespace
            .get(namespace)
            .into_iter()
            .flatten()
            .chain(&self.scoring_any_namespace)
    }

    /// The running pods' required anti-affinity terms that may match a pod of `namespace`: each term
    /// once (a term naming the namespace, or one with a namespaceSelector).
    pub fn anti_affinity_terms_for(&self, namespace: &str) -> impl Iterator<Item = &AntiAffinityTermRef> {
        self.anti_affinity_by_namespace
            .get(namespace)
            .into_iter()
            .flatten()
            .chain(&self.anti_affinity_any_namespace)
    }
}

/// Which incoming pods a running pod's scoring terms can match.
enum ScoringReach<'a> {
    /// A term selects namespaces by label: a pod of any namespace.
    AnyNamespace,
    /// Pods of these namespaces only (each once; none for a pod without scoring terms).
    Namespaces(Vec<&'a String>),
}

fn scoring_reach(pod: &PodInfo) -> ScoringReach<'_> {
    let mut namespaces: Vec<&String> = Vec::new();
    for term in scoring_terms(pod) {
        if !term.namespace_selector.is_nothing() {
            return ScoringReach::AnyNamespace;
        }
        namespaces.extend(&term.namespaces);
    }
    namespaces.sort_unstable();
    namespaces.dedup();
    ScoringReach::Namespaces(namespaces)
}

/// The terms of a running pod InterPodAffinity's PreScore matches against an incoming pod.
fn scoring_terms(pod: &PodInfo) -> impl Iterator<Item = &super::AffinityTerm> {
    pod.required_affinity_terms
        .iter()
        .chain(pod.preferred_affinity_terms.iter().map(|t| &t.term))
        .chain(pod.preferred_anti_affinity_terms.iter().map(|t| &t.term))
}

#[cfg(all(test, feature = "testing"))]
mod tests {
    use super::*;
    use crate::framework::cycle_state::CycleState;
    use crate::framework::runtime::Handle;
    use crate::plugins::{inter_pod_affinity, pod_topology_spread};
    use crate::snapshot::Snapshot;
    use crate::testing::generate::{GenerateParams, generate};

    /// PreFilter through the index (the snapshot's own node list) and by walking every node (a copy of
    /// the list) leave states under which Filter gives the same verdict on every node.
    #[test]
    fn the_index_gives_the_counts_walking_every_node_gives() {
        let mut params = GenerateParams::new(60, 2_400, 3, 7);
        params.pending_percent = 10;
        let snapshot = Arc::new(Snapshot::new(generate(&params)));
        let handle = Handle {
            snapshot: snapshot.clone(),
        };
        let every_node: Vec<Arc<NodeInfo>> = snapshot.nodes().to_vec();
        let mut checked = 0;
        for plugin in [
            inter_pod_affinity::new(None, &handle, &crate::framework::FeatureGates::v1_37()).unwrap(),
            pod_topology_spread::new(None, &handle, &crate::framework::FeatureGates::v1_37()).unwrap(),
        ] {
            let (pre, filter) = (plugin.as_pre_filter().unwrap(), plugin.as_filter().unwrap());
            for pod in &snapshot.pending_pods {
                let verdicts = |nodes: &[Arc<NodeInfo>]| {
                    let mut state = CycleState::new();
                    let (_, s) = pre.pre_filter(&mut state, pod, nodes);
                    let mut out = vec![format!("{:?}", s.code())];
                    if s.is_success() {
                        out.extend(
                            snapshot
                                .nodes()
                                .iter()
                                .map(|n| format!("{:?}", filter.filter(&state, pod, n))),
                        );
                    }
                    out
                };
                let (indexed, walked) = (verdicts(snapshot.nodes()), verdicts(&every_node));
                assert_eq!(indexed, walked, "{} {}", plugin.name(), pod.key());
                checked += usize::from(indexed.len() > 1);
            }
        }
        assert!(checked > 20, "only {checked} pods reached Filter");
    }
}

#[cfg(test)]
mod spread_matches_tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    use super::*;
    use crate::snapshot::{ClusterObjects, Snapshot};
    use crate::testing::{node, pod, snapshot_of};

    fn app(value: &str) -> Selector {
        Selector::from_label_selector(Some(&LabelSelector {
            match_labels: Some(BTreeMap::from([("app".to_string(), value.to_string())])),
            ..Default::default()
        }))
        .expect("valid selector")
    }

    fn cluster() -> Snapshot {
        snapshot_of(ClusterObjects {
            nodes: vec![node("n0").obj(), node("n1").obj(), node("n2").obj()],
            pods: vec![
                pod("w0").namespace("a").label("app", "web").node("n0").obj(),
                pod("w1").namespace("a").label("app", "web").node("n0").obj(),
                pod("w2").namespace("a").label("app", "web").node("n2").obj(),
                pod("gone")
                    .namespace("a")
                    .label("app", "web")
                    .node("n1")
                    .terminating()
                    .obj(),
                pod("db").namespace("a").label("app", "db").node("n1").obj(),
                pod("other-ns")
                    .namespace("b")
                    .label("app", "web")
                    .node("n1")
                    .obj(),
            ],
            ..Default::default()
        })
    }

    /// What spread_matches must equal: the count over the snapshot's pods as they are now.
    fn counted_afresh(snapshot: &Snapshot, namespace: &str, selector: &Selector) -> Vec<u32> {
        AffinityIndex::new(snapshot.nodes())
            .spread_matches(namespace, selector, snapshot.nodes().len())
            .to_vec()
    }

    #[test]
    fn spread_matches_counts_the_namespace_pods_the_selector_matches_per_node() {
        let snapshot = cluster();
        let index = snapshot.affinity_index();
        // Terminating pods and other namespaces' pods are not counted; an empty selector counts none.
        assert_eq!(*index.spread_matches("a", &app("web"), 3), vec![2, 0, 1]);
        assert_eq!(*index.spread_matches("a", &app("db"), 3), vec![0, 1, 0]);
        assert_eq!(*index.spread_matches("b", &app("web"), 3), vec![0, 1, 0]);
        let everything = Selector::Requirements(Vec::new());
        assert_eq!(*index.spread_matches("a", &everything, 3), vec![0, 0, 0]);
        // Asked again, the kept counts are the same.
        assert_eq!(*index.spread_matches("a", &app("web"), 3), vec![2, 0, 1]);
    }

    #[test]
    fn kept_spread_matches_follow_pods_placed_and_removed() {
        let mut snapshot = cluster();
        for selector in [app("web"), app("db")] {
            snapshot.affinity_index().spread_matches("a", &selector, 3);
        }
        let placed = pod("w3").namespace("a").label("app", "web").node("n1").info();
        snapshot.assume_pod(Arc::new(placed)).expect("n1 is a node");
        snapshot.remove_pod("a", "w0").expect("w0 is placed");
        snapshot.remove_pod("a", "db").expect("db is placed");
        // A copy of the snapshot keeps its own counts: changing it leaves the original as it was.
        let mut copy = snapshot.clone();
        copy.remove_pod("a", "w2").expect("w2 is placed");
        for (snapshot, expected_web) in [(&snapshot, vec![1, 1, 1]), (&copy, vec![1, 1, 0])] {
            let index = snapshot.affinity_index();
            assert_eq!(*index.spread_matches("a", &app("web"), 3), expected_web);
            assert_eq!(
                *index.spread_matches("a", &app("web"), 3),
                counted_afresh(snapshot, "a", &app("web"))
            );
            assert_eq!(*index.spread_matches("a", &app("db"), 3), vec![0, 0, 0]);
        }
    }
}
