//! SelectorSpread: prefers nodes (and zones) with fewer pods of the same Service, ReplicationController,
//! ReplicaSet or StatefulSet.
//!
//! Not in kube-scheduler's default profiles since 1.19 (PodTopologySpread's system defaults replaced
//! it) and removed after 1.26; kept for profiles that enable it, with the 1.26 semantics: pods with
//! topology spread constraints score 0 everywhere, zones (region + zone labels) weigh 2/3.

use std::collections::HashMap;
use std::sync::Arc;

use crate::framework::FeatureGates;
use crate::framework::cycle_state::{CycleState, StateKey};
use crate::framework::interface::{MAX_NODE_SCORE, NodeScore, Plugin, PreScorePlugin, ScorePlugin};
use crate::framework::runtime::{Handle, PluginError};
use crate::framework::status::Status;
use crate::labels::{Labels, Selector};
use crate::plugins::helper::spreading::default_selector;
use crate::plugins::names;
use crate::snapshot::{NodeInfo, PodInfo, Snapshot};

/// The plugin's registry name.
pub(crate) const NAME: &str = names::SELECTOR_SPREAD;

/// With zone information, zone spreading gets 2/3 of the score and node spreading 1/3.
const ZONE_WEIGHTING: f64 = 2.0 / 3.0;

const PRE_SCORE_STATE_KEY: StateKey<PreScoreState> = StateKey::new("PreScoreSelectorSpread");

/// PreScore's result: the pod's default selector.
#[derive(Debug, Clone)]
struct PreScoreState {
    selector: Selector,
}

/// The SelectorSpread plugin.
#[derive(Debug)]
pub(crate) struct SelectorSpread {
    snapshot: Arc<Snapshot>,
}

/// Builds the plugin (it takes no args).
pub(crate) fn new(
    _args: Option<&serde_json::Value>,
    handle: &Handle,
    _features: &FeatureGates,
) -> Result<Arc<dyn Plugin>, PluginError> {
    Ok(Arc::new(SelectorSpread {
        snapshot: handle.snapshot.clone(),
    }))
}

/// Pods with their own topology spread constraints are left to PodTopologySpread.
fn skip_selector_spread(pod: &PodInfo) -> bool {
    pod.pod
        .spec
        .as_ref()
        .and_then(|s| s.topology_spread_constraints.as_ref())
        .is_some_and(|c| !c.is_empty())
}

/// Go's `utilnode.GetZoneKey`: "region:\0:zone" from the beta or GA labels, "" without either.
fn zone_key(labels: &Labels) -> String {
    let get = |beta: &str, ga: &str| {
        labels
            .get(beta)
            .or_else(|| labels.get(ga))
            .map_or("", String::as_str)
            .to_string()
    };
    let zone = get(
        "failure-domain.beta.kubernetes.io/zone",
        "topology.kubernetes.io/zone",
    );
    let region = get(
        "failure-domain.beta.kubernetes.io/region",
        "topology.kubernetes.io/region",
    );
    if region.is_empty() && zone.is_empty() {
        return String::new();
    }
    format!("{region}:\0:{zone}")
}

/// Pods in `namespace`, not being deleted, matching `selector` (an empty selector counts nothing).
fn count_matching_pods(namespace: &str, selector: &Selector, node: &NodeInfo) -> i64 {
    if node.pods.is_empty() || selector.is_everything() {
        return 0;
    }
    node.pods
        .iter()
        .filter(|p| p.namespace() == namespace && !p.is_terminating())
        .filter(|p| selector.matches_opt(p.labels()))
        .count() as i64
}

impl SelectorSpread {
    fn node_zone(&self, name: &str) -> Result<String, Status> {
        self.snapshot
            .node(name)
            .map(|n| zone_key(n.labels()))
            .ok_or_else(|| {
                Status::error(format!(
                    "getting node {name:?} from Snapshot: nodeinfo not found for node name {name:?}"
                ))
            })
    }
}

impl Plugin for SelectorSpread {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

impl PreScorePlugin for SelectorSpread {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, _nodes: &[Arc<NodeInfo>]) -> Status {
        if skip_selector_spread(pod) {
            return Status::success();
        }
        let selector = default_selector(&pod.pod, &self.snapshot);
        state.write(&PRE_SCORE_STATE_KEY, PreScoreState { selector });
        Status::success()
    }
}

impl ScorePlugin for SelectorSpread {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> (i64, Status) {
        if skip_selector_spread(pod) {
            return (0, Status::success());
        }
        let Some(s) = state.read(&PRE_SCORE_STATE_KEY) else {
            return (
                0,
                Status::error(format!(
                    "reading {:?} from cycleState: not found",
                    PRE_SCORE_STATE_KEY.name()
                )),
            );
        };
        (
            count_matching_pods(pod.namespace(), &s.selector, node),
            Status::success(),
        )
    }

    fn has_normalize_score(&self) -> bool {
        true
    }

    fn normalize_score(&self, _state: &CycleState, pod: &PodInfo, scores: &mut [NodeScore]) -> Status {
        if skip_selector_spread(pod) {
            return Status::success();
        }
        let mut zones = Vec::with_capacity(scores.len());
        let mut counts_by_zone: HashMap<String, i64> = HashMap::new();
        let mut max_count_by_node = 0i64;
        for s in scores.iter() {
            max_count_by_node = max_count_by_node.max(s.score);
            let zone = match self.node_zone(&s.name) {
                Ok(z) => z,
                Err(st) => return st,
            };
            if !zone.is_empty() {
                *counts_by_zone.entry(zone.clone()).or_insert(0) += s.score;
            }
            zones.push(zone);
        }
        let max_count_by_zone = counts_by_zone.values().copied().max().unwrap_or(0).max(0);
        let have_zones = !counts_by_zone.is_empty();
        let max = MAX_NODE_SCORE as f64;
        for (s, zone) in scores.iter_mut().zip(zones) {
            let mut f = max;
            if max_count_by_node > 0 {
                f = max * ((max_count_by_node - s.score) as f64 / max_count_by_node as f64);
            }
            if have_zones && !zone.is_empty() {
                let zone_count = counts_by_zone.get(&zone).copied().unwrap_or(0);
                let mut zone_score = max;
                if max_count_by_zone > 0 {
                    zone_score = max * ((max_count_by_zone - zone_count) as f64 / max_count_by_zone as f64);
                }
                f = f * (1.0 - ZONE_WEIGHTING) + ZONE_WEIGHTING * zone_score;
            }
            s.score = f as i64;
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Code;
    use crate::snapshot::ClusterObjects;
    use crate::testing::{node, pod};
    use k8s_openapi::api::core::v1::{Node, Pod, Service, ServiceSpec, TopologySpreadConstraint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    const ZONE: &str = "topology.kubernetes.io/zone";

    fn web_service() -> Service {
        Service {
            metadata: ObjectMeta {
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

    fn web(name: &str, n: &str) -> Pod {
        pod(name).label("app", "web").node(n).obj()
    }

    /// PreScore, Score and NormalizeScore over every node: (raw, normalized).
    fn run(nodes: Vec<Node>, pods: Vec<Pod>, incoming: Pod) -> (Vec<i64>, Vec<i64>) {
        let snap = Arc::new(Snapshot::new(ClusterObjects {
            nodes,
            pods,
            services: vec![web_service()],
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
        let pod = PodInfo::new(incoming);
        let mut state = CycleState::new();
        assert!(
            pl.as_pre_score()
                .unwrap()
                .pre_score(&mut state, &pod, snap.nodes())
                .is_success()
        );
        let sp = pl.as_score().unwrap();
        let mut scores: Vec<NodeScore> = snap
            .nodes()
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
        (raw, scores.iter().map(|s| s.score).collect())
    }

    #[test]
    fn score_table() {
        let incoming = || pod("p").label("app", "web").obj();
        type Case = (&'static str, Vec<Node>, Vec<Pod>, Pod, Vec<i64>, Vec<i64>);
        let cases: Vec<Case> = vec![
            (
                "no zones: 100 × (max − count) / max",
                vec![node("a").obj(), node("b").obj(), node("c").obj()],
                vec![web("1", "a"), web("2", "a"), web("3", "b")],
                incoming(),
                vec![2, 1, 0],
                vec![0, 50, 100],
            ),
            (
                "no matching pods anywhere: all max",
                vec![node("a").obj(), node("b").obj()],
                vec![pod("x").label("app", "db").node("a").obj()],
                incoming(),
                vec![0, 0],
                vec![100, 100],
            ),
            (
                // node part: a 0, b 100, c 100; zones z1=2, z2=0 → zone part 0, 0, 100
                // a: 0; b: 100/3 = 33.3; c: 100/3 + 2/3 × 100 = 100
                "zones weigh two thirds",
                vec![
                    node("a").label(ZONE, "z1").obj(),
                    node("b").label(ZONE, "z1").obj(),
                    node("c").label(ZONE, "z2").obj(),
                ],
                vec![web("1", "a"), web("2", "a")],
                incoming(),
                vec![2, 0, 0],
                vec![0, 33, 100],
            ),
            (
                // a: node 0, zone 0; b: node 100, zone 100; c has no zone: node part only, 100 × 1/2
                "mixed zoned and unzoned nodes",
                vec![
                    node("a").label(ZONE, "z1").obj(),
                    node("b").label(ZONE, "z2").obj(),
                    node("c").obj(),
                ],
                vec![web("1", "a"), web("2", "a"), web("3", "c")],
                incoming(),
                vec![2, 0, 1],
                vec![0, 100, 50],
            ),
            (
                "terminating pods and other namespaces are not counted",
                vec![node("a").obj(), node("b").obj()],
                vec![
                    web("1", "a"),
                    pod("2").namespace("other").label("app", "web").node("b").obj(),
                    pod("3")
                        .label("app", "web")
                        .node("b")
                        .with(|p| {
                            p.metadata.deletion_timestamp = Some(
                                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()),
                            )
                        })
                        .obj(),
                ],
                incoming(),
                vec![1, 0],
                vec![0, 100],
            ),
            (
                "pod not selected by any service: empty selector counts nothing",
                vec![node("a").obj(), node("b").obj()],
                vec![web("1", "a")],
                pod("p").label("app", "db").obj(),
                vec![0, 0],
                vec![100, 100],
            ),
            (
                "pods with topology spread constraints score 0",
                vec![node("a").obj(), node("b").obj()],
                vec![web("1", "a")],
                pod("p")
                    .label("app", "web")
                    .with(|p| {
                        if let Some(spec) = p.spec.as_mut() {
                            spec.topology_spread_constraints = Some(vec![TopologySpreadConstraint {
                                max_skew: 1,
                                topology_key: ZONE.into(),
                                when_unsatisfiable: "ScheduleAnyway".into(),
                                ..Default::default()
                            }]);
                        }
                    })
                    .obj(),
                vec![0, 0],
                vec![0, 0],
            ),
        ];
        for (name, nodes, pods, incoming, raw, normalized) in cases {
            let got = run(nodes, pods, incoming);
            assert_eq!(got, (raw, normalized), "{name}");
        }
    }

    #[test]
    fn zone_key_prefers_beta_labels_and_includes_region() {
        let l = |pairs: &[(&str, &str)]| -> Labels {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(zone_key(&l(&[])), "");
        assert_eq!(zone_key(&l(&[(ZONE, "z1")])), ":\0:z1");
        assert_eq!(
            zone_key(&l(&[
                (ZONE, "z1"),
                ("failure-domain.beta.kubernetes.io/zone", "old"),
                ("topology.kubernetes.io/region", "r")
            ])),
            "r:\0:old"
        );
    }

    #[test]
    fn errors() {
        let snap = Arc::new(Snapshot::new(ClusterObjects {
            nodes: vec![node("a").obj()],
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
        let pod = PodInfo::new(pod("p").obj());
        let sp = pl.as_score().unwrap();
        let (_, st) = sp.score(&CycleState::new(), &pod, &snap.nodes()[0]);
        assert_eq!(st.code(), Code::Error);
        let mut scores = vec![NodeScore {
            name: "gone".into(),
            score: 0,
        }];
        let st = sp.normalize_score(&CycleState::new(), &pod, &mut scores);
        assert_eq!(
            st.message(),
            "getting node \"gone\" from Snapshot: nodeinfo not found for node name \"gone\""
        );
    }
}
