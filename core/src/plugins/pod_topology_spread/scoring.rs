//! PodTopologySpread's PreScore, Score and NormalizeScore: `ScheduleAnyway` constraints.
//!
//! A node's raw score is, per constraint, the matching pods in its domain times a weight that grows with
//! the log of the number of domains, plus `maxSkew - 1`; NormalizeScore reverses it so the emptiest
//! domains score highest.

use std::sync::Arc;

use rayon::prelude::*;

use crate::framework::cycle_state::{CycleState, StateKey};
use crate::framework::interface::{MAX_NODE_SCORE, NodeScore, PreScorePlugin, ScorePlugin};
use crate::framework::status::Status;
use crate::snapshot::{NameMap, NameSet, NodeInfo, PodInfo};

use super::PodTopologySpread;
use super::common::{
    LABEL_HOSTNAME, RequiredNodeAffinity, SCHEDULE_ANYWAY, SpreadConstraint, count_pods_match_selector,
    node_labels_match_spread_constraints,
};

/// Where PreScore leaves its work for Score and NormalizeScore.
pub(super) const PRE_SCORE_STATE_KEY: StateKey<PreScoreState> = StateKey::new("PreScorePodTopologySpread");

/// PreScore's result.
#[derive(Debug, Clone, Default)]
pub(super) struct PreScoreState {
    pub constraints: Vec<SpreadConstraint>,
    /// Feasible nodes lacking some topology key: they score 0.
    pub ignored_nodes: NameSet,
    /// Per constraint: matching pods per domain of a feasible node (hostname constraints are counted
    /// per node in Score instead).
    pub topology_value_to_pod_counts: Vec<NameMap<i64>>,
    /// Per constraint: log(domains + 2), so small topologies are not drowned by large ones.
    pub topology_normalizing_weight: Vec<f64>,
    /// Per constraint: matching pods on each node, by the node's position in the snapshot (what
    /// Score counts for hostname constraints, counted once in PreScore).
    pub pods_matching_on_node: Vec<Arc<Vec<u32>>>,
}

fn state_missing() -> Status {
    Status::error(format!(
        "error reading {:?} from cycleState: not found",
        PRE_SCORE_STATE_KEY.name()
    ))
}

/// Go's `topologyNormalizingWeight`.
fn topology_normalizing_weight(size: usize) -> f64 {
    ((size + 2) as f64).ln()
}

/// Go's `scoreForCount`: `maxSkew - 1` waters down differences between domains.
fn score_for_count(count: i64, max_skew: i32, weight: f64) -> f64 {
    count as f64 * weight + f64::from(max_skew - 1)
}

impl PodTopologySpread {
    /// Go's `initPreScoreState`: the soft constraints, the ignored nodes, and the domains of the feasible
    /// nodes with their weights.
    fn init_pre_score_state(
        &self,
        pod: &PodInfo,
        filtered: &[Arc<NodeInfo>],
        require_all_topologies: bool,
    ) -> Result<PreScoreState, String> {
        let mut s = PreScoreState {
            constraints: self.constraints_for(&pod.pod, SCHEDULE_ANYWAY)?,
            ..Default::default()
        };
        if s.constraints.is_empty() {
            return Ok(s);
        }
        s.topology_value_to_pod_counts = vec![NameMap::default(); s.constraints.len()];
        let mut topo_size = vec![0usize; s.constraints.len()];
        for node in filtered {
            let labels = node.labels();
            if require_all_topologies && !node_labels_match_spread_constraints(labels, &s.constraints) {
                s.ignored_nodes.insert(node.name().to_string());
                continue;
            }
            for (i, c) in s.constraints.iter().enumerate() {
                if c.topology_key == LABEL_HOSTNAME {
                    continue;
                }
                let value = labels.get(&c.topology_key).cloned().unwrap_or_default();
                if let std::collections::hash_map::Entry::Vacant(e) =
                    s.topology_value_to_pod_counts[i].entry(value)
                {
                    e.insert(0);
                    topo_size[i] += 1;
                }
            }
        }
        s.topology_normalizing_weight = s
            .constraints
            .iter()
            .zip(&topo_size)
            .map(|(c, &size)| {
                let size = if c.topology_key == LABEL_HOSTNAME {
                    filtered.len().saturating_sub(s.ignored_nodes.len())
                } else {
                    size
                };
                topology_normalizing_weight(size)
            })
            .collect();
        Ok(s)
    }
}

impl PreScorePlugin for PodTopologySpread {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, nodes: &[Arc<NodeInfo>]) -> Status {
        let all_nodes = self.snapshot.nodes();
        if all_nodes.is_empty() {
            return Status::skip();
        }
        let has_own = pod
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.topology_spread_constraints.as_ref())
            .is_some_and(|c| !c.is_empty());
        // With system defaults, nodes without a zone label still take part in hostname spreading.
        let require_all_topologies = has_own || !self.system_defaulted;
        let mut s = match self.init_pre_score_state(pod, nodes, require_all_topologies) {
            Ok(s) => s,
            Err(e) => return Status::error(format!("calculating preScoreState: {e}")),
        };
        if s.constraints.is_empty() {
            return Status::skip();
        }

        let required = RequiredNodeAffinity::from_pod(&pod.pod);
        let constraints = &s.constraints;
        let domains = &s.topology_value_to_pod_counts;
        // Matching pods per constraint and node position, from the pods of the pod's namespace only
        // (the only ones count_pods_match_selector counts): kube-scheduler walks every pod of every
        // node here, which at 100,000 pods dominates a cycle. The snapshot's index counts each
        // (namespace, selector) once, and the pods of a workload share theirs.
        let index = self.snapshot.affinity_index();
        let matching: Vec<Arc<Vec<u32>>> = constraints
            .iter()
            .map(|c| index.spread_matches(pod.namespace(), &c.selector, all_nodes.len()))
            .collect();
        // Only domains of feasible nodes are scored (hostname constraints have none: Score counts
        // them per node), so only the constraints with domains need the pass below.
        let with_domains: Vec<bool> = domains.iter().map(|d| !d.is_empty()).collect();
        let nodes_to_count = if with_domains.contains(&true) {
            all_nodes
        } else {
            &[]
        };
        // Every node of the cluster (not only the feasible ones) counts towards its domain.
        let per_node: Vec<Vec<(usize, &str, i64)>> = nodes_to_count
            .par_iter()
            .enumerate()
            .map(|(position, node_info)| {
                let labels = node_info.labels();
                if require_all_topologies && !node_labels_match_spread_constraints(labels, constraints) {
                    return Vec::new();
                }
                let mut out = Vec::new();
                for (i, c) in constraints.iter().enumerate() {
                    if !with_domains[i] || !self.counts_node(c, &pod.pod, &node_info.node, &required) {
                        continue;
                    }
                    let value = labels.get(&c.topology_key).map_or("", String::as_str);
                    if !domains[i].contains_key(value) {
                        continue;
                    }
                    out.push((i, value, i64::from(matching[i][position])));
                }
                out
            })
            .collect();
        for (i, value, count) in per_node.into_iter().flatten() {
            if let Some(n) = s.topology_value_to_pod_counts[i].get_mut(value) {
                *n += count;
            }
        }
        s.pods_matching_on_node = matching;
        state.write(&PRE_SCORE_STATE_KEY, s);
        Status::success()
    }
}

impl ScorePlugin for PodTopologySpread {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> (i64, Status) {
        let Some(s) = state.read(&PRE_SCORE_STATE_KEY) else {
            return (0, state_missing());
        };
        if !s.ignored_nodes.is_empty() && s.ignored_nodes.contains(node.name()) {
            return (0, Status::success());
        }
        let labels = node.labels();
        let mut score = 0.0;
        for (i, c) in s.constraints.iter().enumerate() {
            let Some(value) = labels.get(&c.topology_key) else {
                continue;
            };
            let count = if c.topology_key == LABEL_HOSTNAME {
                let counted = self
                    .snapshot
                    .node_position(node.name())
                    .and_then(|position| s.pods_matching_on_node.get(i)?.get(position).copied())
                    .map(i64::from);
                counted.unwrap_or_else(|| count_pods_match_selector(&node.pods, &c.selector, pod.namespace()))
            } else {
                s.topology_value_to_pod_counts[i].get(value).copied().unwrap_or(0)
            };
            score += score_for_count(count, c.max_skew, s.topology_normalizing_weight[i]);
        }
        (score.round() as i64, Status::success())
    }

    fn has_normalize_score(&self) -> bool {
        true
    }

    fn normalize_score(&self, state: &CycleState, _pod: &PodInfo, scores: &mut [NodeScore]) -> Status {
        let Some(s) = state.read(&PRE_SCORE_STATE_KEY) else {
            return state_missing();
        };
        let mut min_score = i64::MAX;
        let mut max_score = 0i64;
        let mut ignored = vec![false; scores.len()];
        for (i, score) in scores.iter().enumerate() {
            if !s.ignored_nodes.is_empty() && s.ignored_nodes.contains(&score.name) {
                ignored[i] = true;
                continue;
            }
            min_score = min_score.min(score.score);
            max_score = max_score.max(score.score);
        }
        for (score, ignored) in scores.iter_mut().zip(ignored) {
            if ignored {
                score.score = 0;
            } else if max_score == 0 {
                score.score = MAX_NODE_SCORE;
            } else {
                score.score = MAX_NODE_SCORE * (max_score + min_score - score.score) / max_score;
            }
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{spread, tsc};
    use super::*;
    use crate::Code;
    use crate::framework::runtime::Handle;
    use crate::plugins::pod_topology_spread::new;
    use crate::snapshot::ClusterObjects;
    use crate::testing::{node, pod, snapshot_of};
    use k8s_openapi::api::core::v1::{Node, Pod, Service, ServiceSpec};

    const ZONE: &str = "topology.kubernetes.io/zone";
    const HOST: &str = "kubernetes.io/hostname";

    struct Outcome {
        pre_score: Code,
        raw: Vec<i64>,
        normalized: Vec<i64>,
    }

    /// PreScore on `feasible` (names), then Score and NormalizeScore on them.
    fn run(
        objects: ClusterObjects,
        incoming: Pod,
        feasible: &[&str],
        args: Option<serde_json::Value>,
    ) -> Outcome {
        let snap = Arc::new(snapshot_of(objects));
        let pl = new(
            args.as_ref(),
            &Handle {
                snapshot: snap.clone(),
            },
            &crate::framework::FeatureGates::default(),
        )
        .expect("plugin");
        let pod = PodInfo::new(incoming);
        let nodes: Vec<Arc<NodeInfo>> = feasible
            .iter()
            .map(|n| snap.node(n).expect("node").clone())
            .collect();
        let mut state = CycleState::new();
        let st = pl.as_pre_score().unwrap().pre_score(&mut state, &pod, &nodes);
        if !st.is_success() {
            return Outcome {
                pre_score: st.code(),
                raw: vec![],
                normalized: vec![],
            };
        }
        let sp = pl.as_score().unwrap();
        let mut scores: Vec<NodeScore> = nodes
            .iter()
            .map(|n| {
                let (score, st) = sp.score(&state, &pod, n);
                assert!(st.is_success(), "{st:?}");
                NodeScore {
                    name: n.name().to_string(),
                    score,
                }
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

    fn objects(nodes: Vec<Node>, pods: Vec<Pod>) -> ClusterObjects {
        ClusterObjects {
            nodes,
            pods,
            ..Default::default()
        }
    }

    fn foo(name: &str, n: &str) -> Pod {
        pod(name).label("foo", "").node(n).obj()
    }

    #[test]
    fn score_table() {
        let soft = |key: &str, skew| {
            spread(
                pod("p").label("foo", ""),
                vec![tsc(skew, key, "ScheduleAnyway", &[("foo", "")])],
            )
        };
        type Case = (
            &'static str,
            Vec<Node>,
            Vec<Pod>,
            Pod,
            Vec<&'static str>,
            Vec<i64>,
            Vec<i64>,
        );
        let cases: Vec<Case> = vec![
            (
                // weight ln(3+2): counts 2,1,0 → 3.22, 1.61, 0 → raw 3,2,0 → 100*(3+0-s)/3
                "hostname spreading",
                vec![node("a").obj(), node("b").obj(), node("c").obj()],
                vec![foo("1", "a"), foo("2", "a"), foo("3", "b")],
                soft(HOST, 1),
                vec!["a", "b", "c"],
                vec![3, 2, 0],
                vec![0, 33, 100],
            ),
            (
                // two zones → weight ln 4 = 1.386; z1 has 3 pods (one on a node that is not feasible)
                "zone counts include infeasible nodes",
                vec![
                    node("a").label(ZONE, "z1").obj(),
                    node("b").label(ZONE, "z1").obj(),
                    node("c").label(ZONE, "z2").obj(),
                ],
                vec![foo("1", "a"), foo("2", "a"), foo("3", "b"), foo("4", "c")],
                soft(ZONE, 1),
                vec!["a", "c"],
                vec![4, 1],
                vec![25, 100],
            ),
            (
                // maxSkew 3 adds 2 to every raw score: 1.386+2 → 3 and 0+2 → 2, 100*(3+2-s)/3
                "max skew softens differences",
                vec![node("a").obj(), node("b").obj()],
                vec![foo("1", "a")],
                soft(HOST, 3),
                vec!["a", "b"],
                vec![3, 2],
                vec![66, 100],
            ),
            (
                "nodes missing the key score 0",
                vec![node("a").label(ZONE, "z1").obj(), node("b").obj()],
                vec![foo("1", "a")],
                soft(ZONE, 1),
                vec!["a", "b"],
                vec![1, 0],
                vec![100, 0],
            ),
            (
                "all zero raw scores normalize to max",
                vec![node("a").obj(), node("b").obj()],
                vec![],
                soft(HOST, 1),
                vec!["a", "b"],
                vec![0, 0],
                vec![100, 100],
            ),
        ];
        for (name, nodes, pods, incoming, feasible, raw, normalized) in cases {
            let out = run(objects(nodes, pods), incoming, &feasible, None);
            assert_eq!(out.pre_score, Code::Success, "{name}");
            assert_eq!(out.raw, raw, "{name}: raw");
            assert_eq!(out.normalized, normalized, "{name}: normalized");
        }
    }

    #[test]
    fn weights_are_log_of_domain_count() {
        assert!((topology_normalizing_weight(0) - 2f64.ln()).abs() < 1e-12);
        assert!((topology_normalizing_weight(3) - 5f64.ln()).abs() < 1e-12);
        assert!((score_for_count(2, 3, 1.5) - 5.0).abs() < 1e-12);
    }

    #[test]
    fn skip_without_soft_constraints() {
        let nodes = vec![node("a").obj()];
        for (name, incoming) in [
            (
                "only hard constraints",
                spread(
                    pod("p").label("foo", ""),
                    vec![tsc(1, HOST, "DoNotSchedule", &[("foo", "")])],
                ),
            ),
            ("no constraints and no service", pod("p").label("foo", "").obj()),
        ] {
            let out = run(objects(nodes.clone(), vec![]), incoming, &["a"], None);
            assert_eq!(out.pre_score, Code::Skip, "{name}");
        }
        let out = run(ClusterObjects::default(), pod("p").obj(), &[], None);
        assert_eq!(out.pre_score, Code::Skip, "no nodes");
    }

    fn web_service() -> Service {
        Service {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("web".into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                selector: Some([("app".to_string(), "web".to_string())].into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn system_defaults_spread_service_pods_by_host_and_zone() {
        let web = |name: &str, n: &str| pod(name).label("app", "web").node(n).obj();
        let objs = ClusterObjects {
            nodes: vec![
                node("a").label(ZONE, "z1").obj(),
                node("b").label(ZONE, "z2").obj(),
                // No zone label: with system defaults it still takes part (hostname spreading).
                node("c").obj(),
            ],
            pods: vec![web("1", "a"), web("2", "a"), web("3", "b")],
            services: vec![web_service()],
            ..Default::default()
        };
        let out = run(objs, pod("p").label("app", "web").obj(), &["a", "b", "c"], None);
        assert_eq!(out.pre_score, Code::Success);
        // host weight ln5=1.609, maxSkew 3 → +2; zone domains z1,z2,"" → ln5, maxSkew 5 → +4.
        // a: 2*1.609+2 + 2*1.609+4 = 12.44 → 12; b: 1.609+2 + 1.609+4 = 9.22 → 9; c: 0+2 (no zone label) → 2
        assert_eq!(out.raw, vec![12, 9, 2]);
        // 100*(12+2-s)/12
        assert_eq!(out.normalized, vec![16, 41, 100]);
    }

    #[test]
    fn list_defaults_require_all_topologies() {
        let args = serde_json::json!({"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"}
        ]});
        let objs = ClusterObjects {
            nodes: vec![node("a").label(ZONE, "z1").obj(), node("c").obj()],
            pods: vec![pod("1").label("app", "web").node("a").obj()],
            services: vec![web_service()],
            ..Default::default()
        };
        let out = run(objs, pod("p").label("app", "web").obj(), &["a", "c"], Some(args));
        assert_eq!(out.pre_score, Code::Success);
        // One zone domain (c is ignored): ln3 * 1 = 1.1 → 1; c ignored → 0 after normalizing.
        assert_eq!(out.raw, vec![1, 0]);
        assert_eq!(out.normalized, vec![100, 0]);
    }

    #[test]
    fn missing_state_is_an_error() {
        let snap = Arc::new(snapshot_of(objects(vec![node("a").obj()], vec![])));
        let pl = new(
            None,
            &Handle {
                snapshot: snap.clone(),
            },
            &crate::framework::FeatureGates::default(),
        )
        .unwrap();
        let pod = PodInfo::new(pod("p").obj());
        let (_, st) = pl
            .as_score()
            .unwrap()
            .score(&CycleState::new(), &pod, &snap.nodes()[0]);
        assert_eq!(st.code(), Code::Error);
        assert_eq!(
            st.message(),
            "error reading \"PreScorePodTopologySpread\" from cycleState: not found"
        );
    }
}
