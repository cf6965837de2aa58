//! InterPodAffinity's PreScore, Score and NormalizeScore.
//!
//! PreScore sums term weights per topology pair: the incoming pod's preferred terms matching running
//! pods (+ for affinity, − for anti-affinity), and running pods' terms matching the incoming pod
//! (required affinity × `hardPodAffinityWeight`, preferred ± weight). A node scores the sum over its
//! labels; NormalizeScore maps [min, max] onto [0, 100].

use std::collections::HashMap;
use std::sync::Arc;

use rayon::prelude::*;

use crate::framework::cycle_state::{CycleState, StateKey};
use crate::framework::interface::{MAX_NODE_SCORE, NodeScore, PreScorePlugin, ScorePlugin};
use crate::framework::status::Status;
use crate::labels::Labels;
use crate::snapshot::{AffinityTerm, NodeInfo, PodInfo, WeightedAffinityTerm};

use super::InterPodAffinity;

/// Where PreScore leaves its work for Score and NormalizeScore.
pub(super) const PRE_SCORE_STATE_KEY: StateKey<PreScoreState> = StateKey::new("PreScoreInterPodAffinity");

/// Topology key → value → summed weight.
type ScoreMap = HashMap<String, HashMap<String, i64>>;

/// PreScore's result.
#[derive(Debug, Clone, Default)]
pub(super) struct PreScoreState {
    pub topology_score: ScoreMap,
}

fn process_term(
    m: &mut ScoreMap,
    term: &AffinityTerm,
    weight: i64,
    pod: &PodInfo,
    namespace_labels: Option<&Labels>,
    node_labels: &Labels,
) {
    if term.matches(pod, namespace_labels)
        && let Some(value) = node_labels.get(&term.topology_key)
    {
        add_score(m, &term.topology_key, value, weight);
    }
}

/// `m[key][value] += weight`, copying the strings only for a pair not seen yet: PreScore adds for
/// every matching term of every pod with affinity, nearly always to a pair it already holds.
fn add_score(m: &mut ScoreMap, key: &str, value: &str, weight: i64) {
    if let Some(values) = m.get_mut(key) {
        match values.get_mut(value) {
            Some(score) => *score += weight,
            None => {
                values.insert(value.to_string(), weight);
            }
        }
        return;
    }
    m.entry(key.to_string())
        .or_default()
        .insert(value.to_string(), weight);
}

fn process_terms(
    m: &mut ScoreMap,
    terms: &[WeightedAffinityTerm],
    sign: i64,
    pod: &PodInfo,
    namespace_labels: Option<&Labels>,
    node_labels: &Labels,
) {
    for t in terms {
        process_term(
            m,
            &t.term,
            i64::from(t.weight) * sign,
            pod,
            namespace_labels,
            node_labels,
        );
    }
}

/// The incoming pod's preferred terms with namespaceSelector unrolled, and its namespace labels.
struct Incoming<'a> {
    pod: &'a PodInfo,
    preferred_affinity: Vec<WeightedAffinityTerm>,
    preferred_anti_affinity: Vec<WeightedAffinityTerm>,
    namespace_labels: Option<Arc<Labels>>,
}

/// The first half of `processExistingPod`: the incoming pod's preferred terms matching `existing`
/// (their namespaceSelector unrolled: no namespace labels needed).
fn process_incoming_terms(
    incoming: &Incoming<'_>,
    existing: &PodInfo,
    node_labels: &Labels,
    m: &mut ScoreMap,
) {
    if node_labels.is_empty() {
        return;
    }
    process_terms(m, &incoming.preferred_affinity, 1, existing, None, node_labels);
    process_terms(
        m,
        &incoming.preferred_anti_affinity,
        -1,
        existing,
        None,
        node_labels,
    );
}

/// Adds `from`'s weights to `into`.
fn merge_scores(mut into: ScoreMap, from: ScoreMap) -> ScoreMap {
    for (key, values) in from {
        let target = into.entry(key).or_default();
        for (value, w) in values {
            *target.entry(value).or_insert(0) += w;
        }
    }
    into
}

fn has_preferred_terms(pod: &PodInfo) -> bool {
    let affinity = pod.pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
    let preferred_affinity = affinity
        .and_then(|a| a.pod_affinity.as_ref())
        .and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref())
        .is_some_and(|t| !t.is_empty());
    let preferred_anti = affinity
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref())
        .is_some_and(|t| !t.is_empty());
    preferred_affinity || preferred_anti
}

impl InterPodAffinity {
    /// The incoming pod as PreScore matches it: its preferred terms with namespaceSelector unrolled.
    fn incoming<'a>(&self, pod: &'a PodInfo) -> Incoming<'a> {
        let mut incoming = Incoming {
            pod,
            preferred_affinity: pod.preferred_affinity_terms.clone(),
            preferred_anti_affinity: pod.preferred_anti_affinity_terms.clone(),
            namespace_labels: self.namespace_labels(pod),
        };
        for t in incoming
            .preferred_affinity
            .iter_mut()
            .chain(incoming.preferred_anti_affinity.iter_mut())
        {
            self.merge_term_namespaces(&mut t.term);
        }
        incoming
    }

    /// Go's `processExistingPod`: the incoming pod's terms matching `existing`, and `existing`'s terms
    /// matching the incoming pod.
    fn process_existing_pod(
        &self,
        incoming: &Incoming<'_>,
        existing: &PodInfo,
        node_labels: &Labels,
        m: &mut ScoreMap,
    ) {
        process_incoming_terms(incoming, existing, node_labels, m);
        self.process_existing_terms(incoming, existing, node_labels, m);
    }

    /// The second half of `processExistingPod`: `existing`'s terms matching the incoming pod.
    fn process_existing_terms(
        &self,
        incoming: &Incoming<'_>,
        existing: &PodInfo,
        node_labels: &Labels,
        m: &mut ScoreMap,
    ) {
        if node_labels.is_empty() {
            return;
        }
        let ns = incoming.namespace_labels.as_deref();
        if self.hard_pod_affinity_weight > 0 {
            for t in &existing.required_affinity_terms {
                process_term(
                    m,
                    t,
                    i64::from(self.hard_pod_affinity_weight),
                    incoming.pod,
                    ns,
                    node_labels,
                );
            }
        }
        process_terms(
            m,
            &existing.preferred_affinity_terms,
            1,
            incoming.pod,
            ns,
            node_labels,
        );
        process_terms(
            m,
            &existing.preferred_anti_affinity_terms,
            -1,
            incoming.pod,
            ns,
            node_labels,
        );
    }
}

impl InterPodAffinity {
    /// The running pods' half of PreScore's sum: their terms matching the incoming pod. Only pods whose
    /// terms name the incoming pod's namespace (or select namespaces by label) can add anything, and
    /// the snapshot's affinity index holds exactly those; kube-scheduler walks every pod with
    /// affinity on every node.
    fn existing_terms_scores(&self, incoming: &Incoming<'_>) -> ScoreMap {
        let nodes = self.snapshot.nodes();
        let pods: Vec<_> = self
            .snapshot
            .affinity_index()
            .pods_with_scoring_terms_for(incoming.pod.namespace())
            .collect();
        pods.par_iter()
            .with_min_len(64)
            .fold(ScoreMap::new, |mut m, (position, existing)| {
                self.process_existing_terms(incoming, existing, nodes[*position].labels(), &mut m);
                m
            })
            .reduce(ScoreMap::new, merge_scores)
    }
}

impl PreScorePlugin for InterPodAffinity {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, _nodes: &[Arc<NodeInfo>]) -> Status {
        let has_constraints = has_preferred_terms(pod);
        if self.ignore_preferred_terms_of_existing_pods && !has_constraints {
            return Status::skip();
        }
        if let Some(err) = &pod.parse_error {
            return Status::error(format!("failed to parse pod: {err}"));
        }
        let incoming = self.incoming(pod);

        // The incoming pod's terms (every one naming its namespaces once unrolled) can only match
        // pods of those namespaces: count them from the snapshot's namespace index instead of
        // walking every pod of every node; the running pods' terms come from the index too
        // ([`Self::existing_terms_scores`]). kube-scheduler walks every pod here. Without preferred
        // terms of its own, only the running pods' terms can add anything.
        let term_namespaces: Option<std::collections::BTreeSet<&str>> = has_constraints
            .then(|| {
                incoming
                    .preferred_affinity
                    .iter()
                    .chain(&incoming.preferred_anti_affinity)
                    .map(|t| {
                        t.term
                            .namespace_selector
                            .is_nothing()
                            .then_some(t.term.namespaces.iter().map(String::as_str))
                    })
                    .collect::<Option<Vec<_>>>()
                    .map(|sets| sets.into_iter().flatten().collect())
            })
            .flatten();
        let per_node: Vec<ScoreMap> = match &term_namespaces {
            Some(namespaces) => {
                let nodes = self.snapshot.nodes();
                let index = self.snapshot.affinity_index();
                let incoming_terms = namespaces
                    .iter()
                    .map(|ns| {
                        index
                            .pods_in(ns)
                            .par_iter()
                            .fold(ScoreMap::new, |mut m, (position, existing)| {
                                process_incoming_terms(
                                    &incoming,
                                    existing,
                                    nodes[*position].labels(),
                                    &mut m,
                                );
                                m
                            })
                            .reduce(ScoreMap::new, merge_scores)
                    })
                    .collect::<Vec<_>>();
                incoming_terms
                    .into_iter()
                    .chain([self.existing_terms_scores(&incoming)])
                    .filter(|m| !m.is_empty())
                    .collect()
            }
            None if !has_constraints => {
                let m = self.existing_terms_scores(&incoming);
                if m.is_empty() { Vec::new() } else { vec![m] }
            }
            // A term of the incoming pod selects namespaces by label: every pod is walked.
            None => self
                .snapshot
                .nodes()
                .par_iter()
                .map(|node| {
                    let mut m = ScoreMap::new();
                    for existing in &node.pods {
                        self.process_existing_pod(&incoming, existing, node.labels(), &mut m);
                    }
                    m
                })
                .filter(|m| !m.is_empty())
                .collect(),
        };
        if per_node.is_empty() {
            return Status::skip();
        }
        let topology_score = per_node.into_iter().fold(ScoreMap::new(), merge_scores);
        state.write(&PRE_SCORE_STATE_KEY, PreScoreState { topology_score });
        Status::success()
    }
}

fn state_missing() -> Status {
    Status::error(format!(
        "failed to read {:?} from cycleState: not found",
        PRE_SCORE_STATE_KEY.name()
    ))
}

impl ScorePlugin for InterPodAffinity {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> (i64, Status) {
        let Some(s) = state.read(&PRE_SCORE_STATE_KEY) else {
            return (0, state_missing());
        };
        let labels = node.labels();
        let score = s
            .topology_score
            .iter()
            .filter_map(|(key, values)| labels.get(key).and_then(|v| values.get(v)))
            .sum();
        (score, Status::success())
    }

    fn has_normalize_score(&self) -> bool {
        true
    }

    fn normalize_score(&self, state: &CycleState, _pod: &PodInfo, scores: &mut [NodeScore]) -> Status {
        let Some(s) = state.read(&PRE_SCORE_STATE_KEY) else {
            return state_missing();
        };
        if s.topology_score.is_empty() {
            return Status::success();
        }
        let min = scores.iter().map(|s| s.score).min().unwrap_or(0);
        let max = scores.iter().map(|s| s.score).max().unwrap_or(0);
        let diff = max.saturating_sub(min);
        for score in scores.iter_mut() {
            score.score = if diff > 0 {
                (MAX_NODE_SCORE as f64 * ((score.score - min) as f64 / diff as f64)) as i64
            } else {
                0
            };
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::super::new;
    use super::super::test_util::{affinity, term, weighted};
    use super::*;
    use crate::Code;
    use crate::framework::runtime::Handle;
    use crate::snapshot::{ClusterObjects, Snapshot};
    use crate::testing::{node, pod};
    use k8s_openapi::api::core::v1::{Node, Pod};
    use serde_json::json;

    const ZONE: &str = "zone";
    const HOST: &str = "kubernetes.io/hostname";

    struct Outcome {
        pre_score: Code,
        raw: Vec<i64>,
        normalized: Vec<i64>,
    }

    fn run(nodes: Vec<Node>, pods: Vec<Pod>, incoming: Pod, args: Option<serde_json::Value>) -> Outcome {
        let snap = Arc::new(Snapshot::new(ClusterObjects {
            nodes,
            pods,
            ..Default::default()
        }));
        let pl = new(
            args.as_ref(),
            &Handle {
                snapshot: snap.clone(),
            },
            &crate::framework::FeatureGates::default(),
        )
        .expect("plugin");
        let pod = PodInfo::new(incoming);
        let mut state = CycleState::new();
        let st = pl
            .as_pre_score()
            .unwrap()
            .pre_score(&mut state, &pod, snap.nodes());
        if !st.is_success() {
            return Outcome {
                pre_score: st.code(),
                raw: vec![],
                normalized: vec![],
            };
        }
        let sp = pl.as_score().unwrap();
        let mut scores: Vec<NodeScore> = snap
            .nodes()
            .iter()
            .map(|n| NodeScore {
                name: n.name().to_string(),
                score: sp.score(&state, &pod, n).0,
            })
            .collect();
        let raw = scores.iter().map(|s| s.score).collect();
        assert!(sp.normalize_score(&state, &pod, &mut scores).is_success());
        Outcome {
            pre_score: Code::Success,
            raw,
            normalized: scores.iter().map(|s| s.score).collect(),
        }
    }

    fn nodes() -> Vec<Node> {
        vec![
            node("a").label(ZONE, "z1").obj(),
            node("b").label(ZONE, "z1").obj(),
            node("c").label(ZONE, "z2").obj(),
        ]
    }

    #[test]
    fn score_table() {
        let db = |name: &str, n: &str| pod(name).label("app", "db").node(n).obj();
        let web = || pod("p").label("app", "web");
        type Case = (
            &'static str,
            Vec<Pod>,
            Pod,
            Option<serde_json::Value>,
            Vec<i64>,
            Vec<i64>,
        );
        let cases: Vec<Case> = vec![
            (
                "preferred affinity by zone",
                vec![db("d1", "a"), db("d2", "c")],
                web()
                    .affinity(affinity(
                        vec![],
                        vec![weighted(5, term("app", "db", ZONE))],
                        vec![],
                        vec![],
                    ))
                    .obj(),
                None,
                // z1: one db (5), z2: one db (5) → all equal
                vec![5, 5, 5],
                vec![0, 0, 0],
            ),
            (
                "affinity and anti-affinity weights combine",
                vec![
                    db("d1", "a"),
                    db("d2", "a"),
                    pod("x").label("app", "cache").node("c").obj(),
                ],
                web()
                    .affinity(affinity(
                        vec![],
                        vec![weighted(2, term("app", "db", ZONE))],
                        vec![],
                        vec![weighted(3, term("app", "cache", HOST))],
                    ))
                    .obj(),
                None,
                // z1: 2 dbs × 2 = 4 for a and b; c: cache on host c → −3
                vec![4, 4, -3],
                vec![100, 100, 0],
            ),
            (
                "existing pods' required affinity weighs hardPodAffinityWeight",
                vec![
                    pod("e")
                        .node("c")
                        .affinity(affinity(vec![term("app", "web", ZONE)], vec![], vec![], vec![]))
                        .obj(),
                ],
                web().obj(),
                Some(json!({"hardPodAffinityWeight": 10})),
                vec![0, 0, 10],
                vec![0, 0, 100],
            ),
            (
                "existing pods' preferred terms count for the incoming pod",
                vec![
                    pod("e1")
                        .node("a")
                        .affinity(affinity(
                            vec![],
                            vec![weighted(7, term("app", "web", HOST))],
                            vec![],
                            vec![],
                        ))
                        .obj(),
                    pod("e2")
                        .node("b")
                        .affinity(affinity(
                            vec![],
                            vec![],
                            vec![],
                            vec![weighted(4, term("app", "web", ZONE))],
                        ))
                        .obj(),
                ],
                web().obj(),
                None,
                // a: +7 (host a) −4 (z1); b: −4; c: 0 → min −4, max 3: 100*(s+4)/7
                vec![3, -4, 0],
                vec![100, 0, 57],
            ),
        ];
        for (name, pods, incoming, args, raw, normalized) in cases {
            let out = run(nodes(), pods, incoming, args);
            assert_eq!(out.pre_score, Code::Success, "{name}");
            assert_eq!(out.raw, raw, "{name}: raw");
            assert_eq!(out.normalized, normalized, "{name}: normalized");
        }
    }

    #[test]
    fn skips() {
        let guarded = vec![
            pod("e")
                .node("c")
                .affinity(affinity(vec![term("app", "web", ZONE)], vec![], vec![], vec![]))
                .obj(),
        ];
        let web = || pod("p").label("app", "web").obj();
        for (name, pods, incoming, args) in [
            (
                "no affinity anywhere",
                vec![pod("x").node("a").obj()],
                web(),
                None,
            ),
            (
                "hard weight 0 ignores required terms",
                guarded.clone(),
                web(),
                Some(json!({"hardPodAffinityWeight": 0})),
            ),
            (
                "ignorePreferredTermsOfExistingPods without own terms",
                guarded,
                web(),
                Some(json!({"ignorePreferredTermsOfExistingPods": true})),
            ),
            (
                "own preferred terms matching nothing",
                vec![],
                pod("p")
                    .affinity(affinity(
                        vec![],
                        vec![weighted(1, term("app", "db", ZONE))],
                        vec![],
                        vec![],
                    ))
                    .obj(),
                None,
            ),
        ] {
            let out = run(nodes(), pods, incoming, args);
            assert_eq!(out.pre_score, Code::Skip, "{name}");
        }
    }

    #[test]
    fn missing_state_is_an_error() {
        let snap = Arc::new(Snapshot::new(ClusterObjects {
            nodes: nodes(),
            ..Default::default()
        }));
        let pl = new(
            None,
            &Handle {
                snapshot: snap.clone(),
            },
            &crate::framework::FeatureGates::default(),
        )
        .unwrap();
        let (_, st) = pl.as_score().unwrap().score(
            &CycleState::new(),
            &PodInfo::new(pod("p").obj()),
            &snap.nodes()[0],
        );
        assert_eq!(
            (st.code(), st.message()),
            (
                Code::Error,
                "failed to read \"PreScoreInterPodAffinity\" from cycleState: not found".to_string()
            )
        );
    }

    /// PreScore through the namespace index gives the topology scores a walk of every pod of every
    /// node gives (kube-scheduler's way), for every pending pod of generated clusters, incl. pods
    /// with preferred (anti-)affinity of their own.
    #[cfg(feature = "testing")]
    #[test]
    fn the_index_gives_the_scores_walking_every_pod_gives() {
        use crate::testing::generate::{GenerateParams, generate};
        let mut checked = 0;
        // The third cluster's running pods name other namespaces in their terms, or select
        // namespaces by label: the index must still hand every pod whose terms can match.
        for (seed, widen_terms) in [(3, false), (11, false), (5, true)] {
            let mut params = GenerateParams::new(50, 3_000, 3, seed);
            params.pending_percent = 15;
            let mut objects = generate(&params);
            if widen_terms {
                widen_affinity_namespaces(&mut objects.pods);
            }
            let snap = Arc::new(Snapshot::new(objects));
            let handle = Handle {
                snapshot: snap.clone(),
            };
            let plugin = super::super::InterPodAffinity {
                snapshot: handle.snapshot.clone(),
                hard_pod_affinity_weight: 1,
                ignore_preferred_terms_of_existing_pods: false,
                namespace_selector_kept: false,
            };
            for pod in &snap.pending_pods {
                let mut state = CycleState::new();
                let status = plugin.pre_score(&mut state, pod, snap.nodes());
                let indexed = state
                    .read(&PRE_SCORE_STATE_KEY)
                    .map(|s| sorted(&s.topology_score))
                    .unwrap_or_default();
                let incoming = plugin.incoming(pod);
                let mut walked = ScoreMap::new();
                for node in snap.nodes() {
                    for existing in &node.pods {
                        plugin.process_existing_pod(&incoming, existing, node.labels(), &mut walked);
                    }
                }
                walked.retain(|_, values| !values.is_empty());
                assert_eq!(indexed, sorted(&walked), "{} ({:?})", pod.key(), status.code());
                checked += usize::from(has_preferred_terms(pod));
            }
        }
        assert!(
            checked > 5,
            "only {checked} pods with preferred terms of their own"
        );
    }

    /// Every running pod's preferred affinity and anti-affinity terms: a third also name `team-000`
    /// and `team-001`, a third select every namespace (an empty namespaceSelector), a third select
    /// namespaces labelled with a label none has.
    #[cfg(feature = "testing")]
    fn widen_affinity_namespaces(pods: &mut [Pod]) {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
        let placed = pods
            .iter_mut()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some());
        for (i, pod) in placed.enumerate() {
            let Some(affinity) = pod.spec.as_mut().and_then(|s| s.affinity.as_mut()) else {
                continue;
            };
            let preferred = affinity
                .pod_affinity
                .iter_mut()
                .flat_map(|a| {
                    a.preferred_during_scheduling_ignored_during_execution
                        .iter_mut()
                        .flatten()
                })
                .chain(affinity.pod_anti_affinity.iter_mut().flat_map(|a| {
                    a.preferred_during_scheduling_ignored_during_execution
                        .iter_mut()
                        .flatten()
                }));
            for weighted in preferred {
                let term = &mut weighted.pod_affinity_term;
                match i % 3 {
                    0 => term.namespaces = Some(vec!["team-000".into(), "team-001".into()]),
                    1 => term.namespace_selector = Some(LabelSelector::default()),
                    _ => {
                        term.namespace_selector = Some(LabelSelector {
                            match_labels: Some([("tier".to_string(), "none".to_string())].into()),
                            ..LabelSelector::default()
                        })
                    }
                }
            }
        }
    }

    fn sorted(m: &ScoreMap) -> Vec<(String, Vec<(String, i64)>)> {
        let mut out: Vec<(String, Vec<(String, i64)>)> = m
            .iter()
            .map(|(k, v)| {
                let mut values: Vec<(String, i64)> = v.iter().map(|(a, b)| (a.clone(), *b)).collect();
                values.sort();
                (k.clone(), values)
            })
            .collect();
        out.sort();
        out
    }
}
