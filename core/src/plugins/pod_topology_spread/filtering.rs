//! PodTopologySpread's PreFilter, AddPod/RemovePod and Filter: `DoNotSchedule` constraints.

use std::sync::Arc;

use rayon::prelude::*;

use crate::framework::cycle_state::{CycleState, StateKey};
use crate::framework::interface::{FilterPlugin, PreFilterExtensions, PreFilterPlugin, PreFilterResult};
use crate::framework::status::Status;
use crate::snapshot::{NameMap, NodeInfo, PodInfo};

use super::common::{
    DO_NOT_SCHEDULE, RequiredNodeAffinity, SpreadConstraint, count_pods_match_selector,
    node_labels_match_spread_constraints,
};
use super::{ERR_REASON_CONSTRAINTS_NOT_MATCH, ERR_REASON_NODE_LABEL_NOT_MATCH, PodTopologySpread};

/// Where PreFilter leaves its work for Filter.
pub(super) const PRE_FILTER_STATE_KEY: StateKey<PreFilterState> = StateKey::new("PreFilterPodTopologySpread");

/// Go's initial critical-path count (`math.MaxInt32`): larger than any real count.
const UNSET_MATCH_NUM: i64 = i32::MAX as i64;

/// A domain and its number of matching pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CriticalPath {
    pub topology_value: String,
    pub match_num: i64,
}

/// The two domains with the fewest matching pods; `[0]` always holds the minimum. Two suffice because
/// preemption only ever changes one node (one domain) per evaluated copy of the state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CriticalPaths([CriticalPath; 2]);

impl CriticalPaths {
    fn new() -> Self {
        let unset = CriticalPath {
            topology_value: String::new(),
            match_num: UNSET_MATCH_NUM,
        };
        CriticalPaths([unset.clone(), unset])
    }

    fn update(&mut self, value: &str, num: i64) {
        let p = &mut self.0;
        let existing = if value == p[0].topology_value {
            Some(0)
        } else if value == p[1].topology_value {
            Some(1)
        } else {
            None
        };
        match existing {
            Some(i) => {
                p[i].match_num = num;
                if p[0].match_num > p[1].match_num {
                    p.swap(0, 1);
                }
            }
            None if num < p[0].match_num => {
                p[1] = p[0].clone();
                p[0] = CriticalPath {
                    topology_value: value.to_string(),
                    match_num: num,
                };
            }
            None if num < p[1].match_num => {
                p[1] = CriticalPath {
                    topology_value: value.to_string(),
                    match_num: num,
                };
            }
            None => {}
        }
    }

    /// The minimum matching count.
    pub(super) fn min(&self) -> i64 {
        self.0[0].match_num
    }
}

/// PreFilter's result: per `DoNotSchedule` constraint, matching pods per domain and the critical paths.
#[derive(Debug, Clone)]
pub(super) struct PreFilterState {
    pub constraints: Arc<Vec<SpreadConstraint>>,
    pub critical_paths: Vec<CriticalPaths>,
    pub tp_value_to_match_num: Vec<NameMap<i64>>,
    /// The incoming pod's required node affinity (for the inclusion policies in AddPod/RemovePod).
    required_node_affinity: Arc<RequiredNodeAffinity>,
}

impl PreFilterState {
    /// The global minimum of constraint `i`: 0 while there are fewer eligible domains than `minDomains`.
    fn min_match_num(&self, i: usize, min_domains: i32) -> i64 {
        let domains = self.tp_value_to_match_num[i].len();
        if (domains as i64) < i64::from(min_domains) {
            0
        } else {
            self.critical_paths[i].min()
        }
    }
}

/// What PreFilter counted for one `DoNotSchedule` constraint, as the filter reads it: a diagnosis
/// explains a rejection with the very counts that made it.
pub(crate) struct SpreadCounts<'a> {
    /// The constraint.
    pub constraint: &'a SpreadConstraint,
    /// Matching pods per eligible domain.
    pub domains: &'a NameMap<i64>,
    /// The global minimum skew is measured from (0 while fewer domains than minDomains).
    pub global_min: i64,
}

/// The counts PreFilter left in `state`, per `DoNotSchedule` constraint (None when it did not run).
pub(crate) fn pre_filter_counts(state: &CycleState) -> Option<Vec<SpreadCounts<'_>>> {
    let s = state.read(&PRE_FILTER_STATE_KEY)?;
    Some(
        s.constraints
            .iter()
            .enumerate()
            .map(|(i, c)| SpreadCounts {
                constraint: c,
                domains: &s.tp_value_to_match_num[i],
                global_min: s.min_match_num(i, c.min_domains),
            })
            .collect(),
    )
}

fn state_missing() -> Status {
    Status::error(format!(
        "reading {:?} from cycleState: not found",
        PRE_FILTER_STATE_KEY.name()
    ))
}

impl PodTopologySpread {
    /// Go's `calPreFilterState`.
    fn cal_pre_filter_state(&self, pod: &PodInfo, nodes: &[Arc<NodeInfo>]) -> Result<PreFilterState, String> {
        let constraints = self
            .constraints_for(&pod.pod, DO_NOT_SCHEDULE)
            .map_err(|e| format!("get constraints from pod: {e}"))?;
        let required = RequiredNodeAffinity::from_pod(&pod.pod);
        let mut state = PreFilterState {
            critical_paths: Vec::new(),
            tp_value_to_match_num: vec![NameMap::default(); constraints.len()],
            constraints: Arc::new(constraints),
            required_node_affinity: Arc::new(required),
        };
        if state.constraints.is_empty() {
            return Ok(state);
        }
        // The snapshot's namespace index gives the same counts without walking every pod of every node.
        if std::ptr::eq(nodes.as_ptr(), self.snapshot.nodes().as_ptr()) && state.constraints.len() <= 64 {
            self.count_through_index(&mut state, pod, nodes);
        } else {
            self.count_on_every_node(&mut state, pod, nodes);
        }
        state.critical_paths = state
            .tp_value_to_match_num
            .iter()
            .map(|domains| {
                let mut paths = CriticalPaths::new();
                for (value, num) in domains {
                    paths.update(value, *num);
                }
                paths
            })
            .collect();
        Ok(state)
    }

    /// The matching pods of each eligible node, counted by walking every pod of every node.
    fn count_on_every_node(&self, state: &mut PreFilterState, pod: &PodInfo, nodes: &[Arc<NodeInfo>]) {
        let constraints = &state.constraints;
        let required = &state.required_node_affinity;
        let namespace = pod.namespace();
        // (constraint index, domain, count) of each node, computed in parallel and summed after.
        let per_node: Vec<Vec<(usize, &str, i64)>> = nodes
            .par_iter()
            .map(|node_info| {
                let labels = node_info.labels();
                if !node_labels_match_spread_constraints(labels, constraints) {
                    return Vec::new();
                }
                constraints
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| self.counts_node(c, &pod.pod, &node_info.node, required))
                    .map(|(i, c)| {
                        let value = labels.get(&c.topology_key).map_or("", String::as_str);
                        let count = count_pods_match_selector(&node_info.pods, &c.selector, namespace);
                        (i, value, count)
                    })
                    .collect()
            })
            .collect();
        for (i, value, count) in per_node.into_iter().flatten() {
            *state.tp_value_to_match_num[i]
                .entry(value.to_string())
                .or_insert(0) += count;
        }
    }

    /// The same counts as [`Self::count_on_every_node`]: every eligible node's domain gets the
    /// matching pods of the incoming pod's namespace on that node, from the snapshot's index
    /// ([`AffinityIndex::spread_matches`](crate::snapshot::affinity_index::AffinityIndex::spread_matches)).
    fn count_through_index(&self, state: &mut PreFilterState, pod: &PodInfo, nodes: &[Arc<NodeInfo>]) {
        let constraints = &state.constraints;
        let required = &state.required_node_affinity;
        // Per node: a bit per constraint it counts for.
        let eligible: Vec<u64> = nodes
            .par_iter()
            .map(|node_info| {
                if !node_labels_match_spread_constraints(node_info.labels(), constraints) {
                    return 0;
                }
                constraints
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| self.counts_node(c, &pod.pod, &node_info.node, required))
                    .fold(0u64, |bits, (i, _)| bits | (1 << i))
            })
            .collect();
        // The matching pods per node come from the index's kept counts (each (namespace, selector)
        // counted once for the snapshot); every eligible node's domain gets its node's count.
        let index = self.snapshot.affinity_index();
        for (i, c) in constraints.iter().enumerate() {
            let matching = index.spread_matches(pod.namespace(), &c.selector, nodes.len());
            for (position, (node_info, bits)) in nodes.iter().zip(&eligible).enumerate() {
                if bits & (1 << i) != 0 {
                    let value = node_info.labels().get(&c.topology_key).map_or("", String::as_str);
                    let count = matching.get(position).copied().map_or(0, i64::from);
                    let domains = &mut state.tp_value_to_match_num[i];
                    match domains.get_mut(value) {
                        Some(n) => *n += count,
                        None => {
                            domains.insert(value.to_string(), count);
                        }
                    }
                }
            }
        }
    }

    /// Go's `updateWithPod`: adds `delta` for `other` on `node` to every constraint it counts for.
    fn update_with_pod(
        &self,
        state: &mut PreFilterState,
        other: &PodInfo,
        preemptor: &PodInfo,
        node: &NodeInfo,
        delta: i64,
    ) {
        if other.namespace() != preemptor.namespace() {
            return;
        }
        let labels = node.labels();
        if !node_labels_match_spread_constraints(labels, &state.constraints) {
            return;
        }
        let constraints = state.constraints.clone();
        for (i, c) in constraints.iter().enumerate() {
            if !c.selector.matches_opt(other.labels()) {
                continue;
            }
            if !self.counts_node(c, &preemptor.pod, &node.node, &state.required_node_affinity) {
                continue;
            }
            let value = labels.get(&c.topology_key).map_or("", String::as_str);
            let num = state.tp_value_to_match_num[i]
                .entry(value.to_string())
                .or_insert(0);
            *num += delta;
            let num = *num;
            state.critical_paths[i].update(value, num);
        }
    }

    fn update_state(
        &self,
        state: &mut CycleState,
        preemptor: &PodInfo,
        other: &PodInfo,
        node: &NodeInfo,
        delta: i64,
    ) -> Status {
        let Some(s) = state.read_mut(&PRE_FILTER_STATE_KEY) else {
            return state_missing();
        };
        self.update_with_pod(s, other, preemptor, node, delta);
        Status::success()
    }
}

impl PreFilterPlugin for PodTopologySpread {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        match self.cal_pre_filter_state(pod, nodes) {
            Err(e) => (None, Status::error(e)),
            Ok(s) if s.constraints.is_empty() => (None, Status::skip()),
            Ok(s) => {
                state.write(&PRE_FILTER_STATE_KEY, s);
                (None, Status::success())
            }
        }
    }

    fn pre_filter_extensions(&self) -> Option<&dyn PreFilterExtensions> {
        Some(self)
    }
}

impl PreFilterExtensions for PodTopologySpread {
    fn add_pod(
        &self,
        state: &mut CycleState,
        pod_to_schedule: &PodInfo,
        pod_to_add: &PodInfo,
        node: &NodeInfo,
    ) -> Status {
        self.update_state(state, pod_to_schedule, pod_to_add, node, 1)
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod_to_schedule: &PodInfo,
        pod_to_remove: &PodInfo,
        node: &NodeInfo,
    ) -> Status {
        self.update_state(state, pod_to_schedule, pod_to_remove, node, -1)
    }
}

impl FilterPlugin for PodTopologySpread {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read(&PRE_FILTER_STATE_KEY) else {
            return state_missing();
        };
        let labels = node.labels();
        for (i, c) in s.constraints.iter().enumerate() {
            let Some(value) = labels.get(&c.topology_key) else {
                return Status::unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH);
            };
            // existing matches in the node's domain + the pod itself (if it matches) - global minimum
            let min_match_num = s.min_match_num(i, c.min_domains);
            let self_match = i64::from(c.selector.matches_opt(pod.labels()));
            let match_num = s.tp_value_to_match_num[i].get(value).copied().unwrap_or(0);
            let skew = match_num + self_match - min_match_num;
            if skew > i64::from(c.max_skew) {
                return Status::unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH);
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
    use crate::testing::{node, pod, snapshot};
    use k8s_openapi::api::core::v1::{Node, Pod, Toleration};
    use serde_json::json;

    const ZONE: &str = "zone";
    const HOST: &str = "kubernetes.io/hostname";

    fn zoned(name: &str, zone: &str) -> Node {
        node(name).label(ZONE, zone).obj()
    }

    /// Runs PreFilter and then Filter on every node; returns PreFilter's code and each node's result.
    fn run(
        args: Option<serde_json::Value>,
        nodes: Vec<Node>,
        existing: Vec<Pod>,
        incoming: Pod,
    ) -> (Code, Vec<(String, Code, Vec<String>)>) {
        let snap = Arc::new(snapshot(nodes, existing));
        let handle = Handle {
            snapshot: snap.clone(),
        };
        let pl = new(args.as_ref(), &handle, &crate::framework::FeatureGates::default()).expect("plugin");
        let pod = PodInfo::new(incoming);
        let mut state = CycleState::new();
        let (_, s) = pl
            .as_pre_filter()
            .expect("prefilter")
            .pre_filter(&mut state, &pod, snap.nodes());
        if !s.is_success() {
            return (s.code(), Vec::new());
        }
        let results = snap
            .nodes()
            .iter()
            .map(|n| {
                let st = pl.as_filter().expect("filter").filter(&state, &pod, n);
                (n.name().to_string(), st.code(), st.reasons().to_vec())
            })
            .collect();
        (Code::Success, results)
    }

    /// PreFilter's counts through the snapshot's index (its own node list, the kept per-selector
    /// counts) equal those of walking every pod of every node (a copy of the list), for every pending
    /// pod of a generated cluster, and stay equal once the kept counts exist (asked a second time).
    /// Filter's verdicts read only these: the domains' counts and each constraint's minimum.
    #[cfg(feature = "testing")]
    #[test]
    fn counts_through_the_index_equal_counts_walking_every_node() {
        use crate::testing::generate::{GenerateParams, generate};
        let mut params = GenerateParams::new(60, 2_400, 3, 11);
        params.pending_percent = 10;
        let snap = Arc::new(crate::snapshot::Snapshot::new(generate(&params)));
        let handle = Handle {
            snapshot: snap.clone(),
        };
        let pl = new(None, &handle, &crate::framework::FeatureGates::v1_37()).expect("plugin");
        let pre = pl.as_pre_filter().expect("prefilter");
        let every_node: Vec<Arc<NodeInfo>> = snap.nodes().to_vec();
        let counts = |pod: &PodInfo, nodes: &[Arc<NodeInfo>]| {
            let mut state = CycleState::new();
            pre.pre_filter(&mut state, pod, nodes);
            state
                .read(&PRE_FILTER_STATE_KEY)
                // Critical paths are compared by their minimum: which of two tied domains is kept
                // follows a map's iteration order, as upstream's does.
                .map(|s| {
                    let minimums: Vec<i64> = s.critical_paths.iter().map(CriticalPaths::min).collect();
                    (s.tp_value_to_match_num.clone(), minimums)
                })
        };
        let mut compared = 0;
        for _ in 0..2 {
            for pod in &snap.pending_pods {
                let walked = counts(pod, &every_node);
                assert_eq!(counts(pod, snap.nodes()), walked, "{}", pod.key());
                compared += usize::from(
                    walked.is_some_and(|(domains, _)| domains.iter().any(|d| d.values().any(|n| *n > 0))),
                );
            }
        }
        assert!(compared > 10, "only {compared} pods had pods to count");
    }

    fn codes(results: &[(String, Code, Vec<String>)]) -> Vec<(&str, Code)> {
        results.iter().map(|(n, c, _)| (n.as_str(), *c)).collect()
    }

    fn foo(name: &str, node_name: &str) -> Pod {
        pod(name).label("foo", "").node(node_name).obj()
    }

    #[test]
    fn filter_table() {
        use Code::{Success as S, Unschedulable as U, UnschedulableAndUnresolvable as UAU};
        let hard_zone = |skew| vec![tsc(skew, ZONE, "DoNotSchedule", &[("foo", "")])];
        let incoming = |cs| spread(pod("p").label("foo", ""), cs);
        type Case = (
            &'static str,
            Vec<Node>,
            Vec<Pod>,
            Pod,
            Code,
            Vec<(&'static str, Code)>,
        );
        let cases: Vec<Case> = vec![
            (
                "no existing pods: every labelled node fits",
                vec![zoned("a", "z1"), zoned("b", "z2")],
                vec![],
                incoming(hard_zone(1)),
                S,
                vec![("a", S), ("b", S)],
            ),
            (
                "skew against the emptier zone",
                vec![zoned("a", "z1"), zoned("b", "z1"), zoned("c", "z2")],
                vec![foo("e1", "a"), foo("e2", "b"), foo("e3", "c")],
                incoming(hard_zone(1)),
                S,
                vec![("a", U), ("b", U), ("c", S)],
            ),
            (
                "maxSkew 2 tolerates the difference",
                vec![zoned("a", "z1"), zoned("c", "z2")],
                vec![foo("e1", "a"), foo("e2", "a")],
                incoming(hard_zone(2)),
                S,
                vec![("a", U), ("c", S)],
            ),
            (
                "node without the topology label is unresolvable",
                vec![zoned("a", "z1"), node("bare").obj()],
                vec![],
                incoming(hard_zone(1)),
                S,
                vec![("a", S), ("bare", UAU)],
            ),
            (
                "incoming pod not matching its own selector does not count itself",
                vec![zoned("a", "z1"), zoned("c", "z2")],
                vec![foo("e1", "a")],
                spread(pod("p"), hard_zone(1)),
                S,
                vec![("a", S), ("c", S)],
            ),
            (
                "pods in other namespaces and terminating pods are not counted",
                vec![zoned("a", "z1"), zoned("c", "z2")],
                vec![
                    pod("o").namespace("other").label("foo", "").node("a").obj(),
                    pod("t")
                        .label("foo", "")
                        .node("a")
                        .with(|p| {
                            p.metadata.deletion_timestamp = Some(
                                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()),
                            )
                        })
                        .obj(),
                ],
                incoming(hard_zone(1)),
                S,
                vec![("a", S), ("c", S)],
            ),
            (
                "only soft constraints: PreFilter skips",
                vec![zoned("a", "z1")],
                vec![],
                incoming(vec![tsc(1, ZONE, "ScheduleAnyway", &[("foo", "")])]),
                Code::Skip,
                vec![],
            ),
            (
                "no constraints and system defaults: PreFilter skips",
                vec![zoned("a", "z1")],
                vec![],
                pod("p").label("foo", "").obj(),
                Code::Skip,
                vec![],
            ),
            (
                "hostname and zone constraints both apply",
                vec![
                    node("a").label(ZONE, "z1").obj(),
                    node("b").label(ZONE, "z1").obj(),
                    node("c").label(ZONE, "z2").obj(),
                ],
                vec![foo("e1", "a"), foo("e2", "c")],
                incoming(vec![
                    tsc(1, ZONE, "DoNotSchedule", &[("foo", "")]),
                    tsc(1, HOST, "DoNotSchedule", &[("foo", "")]),
                ]),
                S,
                vec![("a", U), ("b", S), ("c", U)],
            ),
            (
                "bad selector operator is an error",
                vec![zoned("a", "z1")],
                vec![],
                spread(
                    pod("p"),
                    vec![k8s_openapi::api::core::v1::TopologySpreadConstraint {
                        max_skew: 1,
                        topology_key: ZONE.into(),
                        when_unsatisfiable: "DoNotSchedule".into(),
                        label_selector: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                            match_expressions: Some(vec![
                                k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                                    key: "foo".into(),
                                    operator: "Near".into(),
                                    values: None,
                                },
                            ]),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }],
                ),
                Code::Error,
                vec![],
            ),
        ];
        for (name, nodes, existing, incoming, pre_code, want) in cases {
            let (code, results) = run(None, nodes, existing, incoming);
            assert_eq!(code, pre_code, "{name}: prefilter");
            assert_eq!(codes(&results), want, "{name}");
        }
    }

    #[test]
    fn reasons_are_upstream_strings() {
        let (_, results) = run(
            None,
            vec![zoned("a", "z1"), zoned("b", "z2"), node("bare").obj()],
            vec![foo("e1", "a")],
            spread(
                pod("p").label("foo", ""),
                vec![tsc(1, ZONE, "DoNotSchedule", &[("foo", "")])],
            ),
        );
        assert_eq!(
            results[0].2,
            vec!["node(s) didn't match pod topology spread constraints".to_string()]
        );
        assert!(results[1].2.is_empty());
        assert_eq!(
            results[2].2,
            vec!["node(s) didn't match pod topology spread constraints (missing required label)".to_string()]
        );
    }

    #[test]
    fn min_domains_treats_global_minimum_as_zero() {
        let mut c = tsc(1, ZONE, "DoNotSchedule", &[("foo", "")]);
        for (min_domains, want_b) in [(None, Code::Success), (Some(3), Code::Unschedulable)] {
            c.min_domains = min_domains;
            let (_, results) = run(
                None,
                vec![zoned("a", "z1"), zoned("b", "z2")],
                vec![foo("e1", "a"), foo("e2", "b")],
                spread(pod("p").label("foo", ""), vec![c.clone()]),
            );
            // Two domains with one pod each: skew 1 fits, unless the minimum is forced to 0.
            assert_eq!(results[1].1, want_b, "minDomains {min_domains:?}");
        }
    }

    #[test]
    fn node_inclusion_policies_shape_the_domains() {
        // z2 has a node the pod cannot go to (tainted, or not matching its nodeSelector): whether z2 is
        // a domain decides the global minimum.
        let nodes = || {
            vec![
                node("a").label(ZONE, "z1").label("pool", "x").obj(),
                node("b")
                    .label(ZONE, "z2")
                    .label("pool", "y")
                    .taint("dedicated", "y", "NoSchedule")
                    .obj(),
            ]
        };
        let existing = || vec![foo("e1", "a")];
        let base = || pod("p").label("foo", "");
        let with = |affinity: Option<&str>, taints: Option<&str>| {
            let mut c = tsc(1, ZONE, "DoNotSchedule", &[("foo", "")]);
            c.node_affinity_policy = affinity.map(Into::into);
            c.node_taints_policy = taints.map(Into::into);
            vec![c]
        };
        let cases: Vec<(&str, Pod, Code)> = vec![
            // Taints ignored by default: z2 is a domain with 0 pods, z1 has 1 → a would make skew 2.
            (
                "taints ignored by default",
                spread(base(), with(None, None)),
                Code::Unschedulable,
            ),
            // Taints honored: z2 is not a domain, the minimum is z1's 1 → skew 1.
            (
                "taints honored",
                spread(base(), with(None, Some("Honor"))),
                Code::Success,
            ),
            (
                "taint tolerated and honored",
                spread(
                    base().toleration(Toleration {
                        key: Some("dedicated".into()),
                        operator: Some("Exists".into()),
                        ..Default::default()
                    }),
                    with(None, Some("Honor")),
                ),
                Code::Unschedulable,
            ),
            (
                "node affinity honored by default",
                spread(base().node_selector("pool", "x"), with(None, None)),
                Code::Success,
            ),
            (
                "node affinity ignored",
                spread(base().node_selector("pool", "x"), with(Some("Ignore"), None)),
                Code::Unschedulable,
            ),
        ];
        for (name, incoming, want_a) in cases {
            let (_, results) = run(None, nodes(), existing(), incoming);
            assert_eq!(results[0].1, want_a, "{name}");
        }
    }

    #[test]
    fn match_label_keys_narrow_the_counted_pods() {
        let mut c = tsc(1, ZONE, "DoNotSchedule", &[("foo", "")]);
        c.match_label_keys = Some(vec!["rev".into()]);
        let old = |name: &str, n: &str| pod(name).label("foo", "").label("rev", "1").node(n).obj();
        let (_, results) = run(
            None,
            vec![zoned("a", "z1"), zoned("b", "z2")],
            vec![old("e1", "a"), old("e2", "a")],
            spread(pod("p").label("foo", "").label("rev", "2"), vec![c.clone()]),
        );
        // Old-revision pods do not count for the new revision, so both zones are empty for it.
        assert_eq!(codes(&results), vec![("a", Code::Success), ("b", Code::Success)]);
        let (_, results) = run(
            None,
            vec![zoned("a", "z1"), zoned("b", "z2")],
            vec![old("e1", "a"), old("e2", "a")],
            spread(pod("p").label("foo", "").label("rev", "1"), vec![c]),
        );
        assert_eq!(
            codes(&results),
            vec![("a", Code::Unschedulable), ("b", Code::Success)]
        );
    }

    #[test]
    fn list_default_constraints_use_the_service_selector() {
        use k8s_openapi::api::core::v1::{Service, ServiceSpec};
        let args = json!({"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
        ]});
        let nodes = vec![zoned("a", "z1"), zoned("b", "z2")];
        let existing = vec![
            pod("e1").label("app", "web").node("a").obj(),
            pod("e2").label("app", "web").node("a").obj(),
        ];
        let service = Service {
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
        };
        let snap = Arc::new(crate::testing::snapshot_of(crate::snapshot::ClusterObjects {
            nodes: nodes.clone(),
            pods: existing.clone(),
            services: vec![service],
            ..Default::default()
        }));
        let pl = new(
            Some(&args),
            &Handle {
                snapshot: snap.clone(),
            },
            &crate::framework::FeatureGates::default(),
        )
        .expect("plugin");
        let incoming = PodInfo::new(pod("p").label("app", "web").obj());
        let mut state = CycleState::new();
        let (_, s) = pl
            .as_pre_filter()
            .unwrap()
            .pre_filter(&mut state, &incoming, snap.nodes());
        assert!(s.is_success(), "{s:?}");
        let got: Vec<Code> = snap
            .nodes()
            .iter()
            .map(|n| pl.as_filter().unwrap().filter(&state, &incoming, n).code())
            .collect();
        assert_eq!(got, vec![Code::Unschedulable, Code::Success]);

        // Without a Service selecting it, the pod has no default constraints.
        let (code, _) = run(Some(args), nodes, existing, pod("p").label("app", "web").obj());
        assert_eq!(code, Code::Skip);
    }

    #[test]
    fn add_and_remove_pod_update_counts_and_critical_paths() {
        let snap = Arc::new(snapshot(
            vec![zoned("a", "z1"), zoned("b", "z2")],
            vec![foo("e1", "a")],
        ));
        let pl = new(
            None,
            &Handle {
                snapshot: snap.clone(),
            },
            &crate::framework::FeatureGates::default(),
        )
        .unwrap();
        let incoming = PodInfo::new(spread(
            pod("p").label("foo", ""),
            vec![tsc(1, ZONE, "DoNotSchedule", &[("foo", "")])],
        ));
        let mut state = CycleState::new();
        let (_, s) = pl
            .as_pre_filter()
            .unwrap()
            .pre_filter(&mut state, &incoming, snap.nodes());
        assert!(s.is_success());
        let ext = pl.as_pre_filter().unwrap().pre_filter_extensions().unwrap();
        let filter = |state: &CycleState, n: usize| {
            pl.as_filter()
                .unwrap()
                .filter(state, &incoming, &snap.nodes()[n])
                .code()
        };
        assert_eq!(filter(&state, 1), Code::Success);

        // A nominated matching pod on b balances the zones: a fits again.
        let added = PodInfo::new(foo("nominated", "b"));
        assert_eq!(filter(&state, 0), Code::Unschedulable);
        let mut with = state.clone();
        assert!(
            ext.add_pod(&mut with, &incoming, &added, &snap.nodes()[1])
                .is_success()
        );
        assert_eq!(filter(&with, 0), Code::Success);
        assert_eq!(filter(&state, 0), Code::Unschedulable, "original state untouched");

        // Removing the only pod on a (a preemption victim) makes a the emptier zone.
        let victim = PodInfo::new(foo("e1", "a"));
        assert!(
            ext.remove_pod(&mut with, &incoming, &victim, &snap.nodes()[0])
                .is_success()
        );
        assert_eq!(filter(&with, 1), Code::Unschedulable);
        let s = with.read(&PRE_FILTER_STATE_KEY).unwrap();
        assert_eq!(s.critical_paths[0].min(), 0);
        assert_eq!(s.tp_value_to_match_num[0].get("z1"), Some(&0));

        // Pods of other namespaces or not matching the selector change nothing.
        let before = with
            .read(&PRE_FILTER_STATE_KEY)
            .unwrap()
            .tp_value_to_match_num
            .clone();
        let other_ns = PodInfo::new(pod("x").namespace("other").label("foo", "").node("a").obj());
        let unrelated = PodInfo::new(pod("y").node("a").obj());
        assert!(
            ext.add_pod(&mut with, &incoming, &other_ns, &snap.nodes()[0])
                .is_success()
        );
        assert!(
            ext.add_pod(&mut with, &incoming, &unrelated, &snap.nodes()[0])
                .is_success()
        );
        assert_eq!(
            with.read(&PRE_FILTER_STATE_KEY).unwrap().tp_value_to_match_num,
            before
        );

        // Without PreFilter state the extensions and Filter report an error.
        let mut empty = CycleState::new();
        let st = ext.add_pod(&mut empty, &incoming, &added, &snap.nodes()[0]);
        assert_eq!(st.code(), Code::Error);
        assert_eq!(
            st.message(),
            "reading \"PreFilterPodTopologySpread\" from cycleState: not found"
        );
        assert_eq!(filter(&empty, 0), Code::Error);
    }

    #[test]
    fn critical_paths_track_the_two_smallest() {
        let mut p = CriticalPaths::new();
        for (value, num) in [("z1", 3), ("z2", 1), ("z3", 2)] {
            p.update(value, num);
        }
        assert_eq!(p.min(), 1);
        assert_eq!(p.0[1].match_num, 2);
        // z2 grows past z3: the paths swap.
        p.update("z2", 5);
        assert_eq!((p.0[0].topology_value.as_str(), p.min()), ("z3", 2));
        p.update("z3", 0);
        assert_eq!(p.min(), 0);
    }
}
