//! What PodTopologySpread's filtering and scoring share: parsed constraints, node inclusion policies,
//! the pod's default constraints, and counting matching pods.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, TopologySpreadConstraint};

use crate::framework::FeatureGates;
use crate::labels::{Labels, Requirement, Selector, SelectorError};
use crate::plugins::helper::spreading::default_selector;
use crate::plugins::helper::taints::{
    do_not_schedule_taints_filter, find_matching_untolerated_taint, node_taints, pod_tolerations,
};
pub(crate) use crate::plugins::node_affinity::RequiredNodeAffinity;
use crate::snapshot::PodInfo;
use crate::snapshot::affinity_index::spread_counts_pod;

use super::PodTopologySpread;

/// `v1.LabelHostname`.
pub(crate) const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
/// `v1.LabelTopologyZone`.
pub(crate) const LABEL_TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";
/// `whenUnsatisfiable: DoNotSchedule` (Filter).
pub(crate) const DO_NOT_SCHEDULE: &str = "DoNotSchedule";
/// `whenUnsatisfiable: ScheduleAnyway` (Score).
pub(crate) const SCHEDULE_ANYWAY: &str = "ScheduleAnyway";
const NODE_INCLUSION_POLICY_HONOR: &str = "Honor";

/// A topology spread constraint with its selector parsed (Go's internal `topologySpreadConstraint`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpreadConstraint {
    /// `maxSkew`.
    pub max_skew: i32,
    /// `topologyKey`.
    pub topology_key: String,
    /// The label selector, with `matchLabelKeys` merged in (or the default selector).
    pub selector: Selector,
    /// `minDomains` (1 when unset).
    pub min_domains: i32,
    /// `nodeAffinityPolicy: Honor` (the default).
    pub honor_node_affinity: bool,
    /// `nodeTaintsPolicy: Honor` (default Ignore).
    pub honor_node_taints: bool,
}

/// The feature gates PodTopologySpread reads (upstream's plugin keeps the same three fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpreadGates {
    /// `MatchLabelKeysInPodTopologySpread`: `matchLabelKeys` values of the pod are merged into the
    /// selector; off, they are ignored.
    pub match_label_keys: bool,
    /// `NodeInclusionPolicyInPodTopologySpread`: the constraint's `nodeAffinityPolicy` and
    /// `nodeTaintsPolicy` apply; off, they are ignored and every counted node must match the pod's
    /// required node affinity (the defaults, Honor and Ignore, decide exactly that).
    pub node_inclusion_policy: bool,
    /// `TaintTolerationComparisonOperators`, for `nodeTaintsPolicy: Honor`.
    pub taint_comparison_operators: bool,
}

impl SpreadGates {
    /// The fields of `features` the plugin reads.
    pub fn from_features(features: &FeatureGates) -> Self {
        SpreadGates {
            match_label_keys: features.match_label_keys_in_pod_topology_spread,
            node_inclusion_policy: features.node_inclusion_policy_in_pod_topology_spread,
            taint_comparison_operators: features.taint_toleration_comparison_operators,
        }
    }
}

impl SpreadConstraint {
    /// Whether `node` counts as a domain member for this constraint under its node inclusion policies
    /// (`enable_comparison_operators`: `TaintTolerationComparisonOperators`, for the taints policy).
    pub(crate) fn match_node_inclusion_policies(
        &self,
        pod: &Pod,
        node: &Node,
        required: &RequiredNodeAffinity,
        enable_comparison_operators: bool,
    ) -> bool {
        if self.honor_node_affinity && !required.matches(node) {
            return false;
        }
        if self.honor_node_taints
            && find_matching_untolerated_taint(
                node_taints(node),
                pod_tolerations(pod),
                do_not_schedule_taints_filter,
                enable_comparison_operators,
            )
            .is_some()
        {
            return false;
        }
        true
    }
}

/// Go's `filterTopologySpreadConstraints`: the constraints with `whenUnsatisfiable == action`, parsed.
/// `matchLabelKeys` values of the pod are ANDed into the selector when `gates.match_label_keys`; node
/// inclusion policies default to affinity Honor, taints Ignore, and are read from the constraint only
/// when `gates.node_inclusion_policy`.
pub(crate) fn filter_constraints(
    constraints: &[TopologySpreadConstraint],
    pod_labels: Option<&Labels>,
    action: &str,
    gates: SpreadGates,
) -> Result<Vec<SpreadConstraint>, SelectorError> {
    let mut out = Vec::new();
    for c in constraints.iter().filter(|c| c.when_unsatisfiable == action) {
        let mut selector = Selector::from_label_selector(c.label_selector.as_ref())?;
        let keys = if gates.match_label_keys {
            c.match_label_keys.as_deref().unwrap_or(&[])
        } else {
            &[]
        };
        if !keys.is_empty() {
            let mut merged: Vec<Requirement> = Vec::new();
            if let Some(labels) = pod_labels {
                for key in keys {
                    if let Some(v) = labels.get(key)
                        && !merged
                            .iter()
                            .any(|r| matches!(r, Requirement::In(k, _) if k == key))
                    {
                        merged.push(Requirement::In(key.clone(), vec![v.clone()]));
                    }
                }
            }
            // A nil selector (matches nothing) stays nil: it has no requirements to merge with.
            if !merged.is_empty()
                && let Selector::Requirements(reqs) = selector
            {
                merged.extend(reqs);
                selector = Selector::Requirements(merged);
            }
        }
        out.push(SpreadConstraint {
            max_skew: c.max_skew,
            topology_key: c.topology_key.clone(),
            selector,
            min_domains: c.min_domains.unwrap_or(1),
            honor_node_affinity: !gates.node_inclusion_policy
                || c.node_affinity_policy
                    .as_deref()
                    .is_none_or(|p| p == NODE_INCLUSION_POLICY_HONOR),
            honor_node_taints: gates.node_inclusion_policy
                && c.node_taints_policy.as_deref() == Some(NODE_INCLUSION_POLICY_HONOR),
        });
    }
    Ok(out)
}

/// Whether the node has every constraint's topology key.
pub(crate) fn node_labels_match_spread_constraints(
    labels: &Labels,
    constraints: &[SpreadConstraint],
) -> bool {
    constraints.iter().all(|c| labels.contains_key(&c.topology_key))
}

/// Pods in `namespace` matching `selector`, terminating pods excluded. An empty selector counts nothing
/// (Go checks `selector.Empty()` first). The snapshot's kept counts use the same rule
/// ([`spread_counts_pod`]).
pub(crate) fn count_pods_match_selector(pods: &[Arc<PodInfo>], selector: &Selector, namespace: &str) -> i64 {
    if selector.is_everything() {
        return 0;
    }
    pods.iter()
        .filter(|p| p.namespace() == namespace && spread_counts_pod(selector, p))
        .count() as i64
}

impl PodTopologySpread {
    /// Go's `buildDefaultConstraints`: the configured default constraints for `action`, all using the
    /// pod's default selector; none when the pod belongs to no Service/RC/RS/StatefulSet.
    pub(super) fn build_default_constraints(
        &self,
        pod: &Pod,
        action: &str,
    ) -> Result<Vec<SpreadConstraint>, SelectorError> {
        let mut constraints = filter_constraints(
            &self.default_constraints,
            pod.metadata.labels.as_ref(),
            action,
            self.gates,
        )?;
        if constraints.is_empty() {
            return Ok(constraints);
        }
        let selector = default_selector(pod, &self.snapshot);
        if selector.is_everything() {
            return Ok(Vec::new());
        }
        for c in &mut constraints {
            c.selector = selector.clone();
        }
        Ok(constraints)
    }

    /// The pod's own constraints for `action`, or the default ones when it has none. The error text
    /// carries Go's wrapping for the hard (Filter) or soft (Score) constraints.
    pub(super) fn constraints_for(&self, pod: &Pod, action: &str) -> Result<Vec<SpreadConstraint>, String> {
        let own = pod
            .spec
            .as_ref()
            .and_then(|s| s.topology_spread_constraints.as_deref())
            .unwrap_or(&[]);
        let kind = if action == DO_NOT_SCHEDULE { "hard" } else { "soft" };
        if !own.is_empty() {
            filter_constraints(own, pod.metadata.labels.as_ref(), action, self.gates)
                .map_err(|e| format!("obtaining pod's {kind} topology spread constraints: {e}"))
        } else {
            self.build_default_constraints(pod, action)
                .map_err(|e| format!("setting default {kind} topology spread constraints: {e}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, pod};
    use k8s_openapi::api::core::v1::{
        Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Toleration,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    const V1_37: SpreadGates = SpreadGates {
        match_label_keys: true,
        node_inclusion_policy: true,
        taint_comparison_operators: false,
    };

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn tsc(key: &str, action: &str, match_labels: Option<&[(&str, &str)]>) -> TopologySpreadConstraint {
        TopologySpreadConstraint {
            max_skew: 1,
            topology_key: key.into(),
            when_unsatisfiable: action.into(),
            label_selector: match_labels.map(|m| LabelSelector {
                match_labels: Some(labels(m)),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn filter_constraints_by_action_with_defaults() {
        let cs = vec![
            tsc("zone", DO_NOT_SCHEDULE, Some(&[("app", "a")])),
            tsc("host", SCHEDULE_ANYWAY, Some(&[("app", "a")])),
        ];
        let got = filter_constraints(&cs, None, DO_NOT_SCHEDULE, V1_37).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].topology_key, "zone");
        assert_eq!(got[0].min_domains, 1);
        assert!(got[0].honor_node_affinity);
        assert!(!got[0].honor_node_taints);
    }

    #[test]
    fn match_label_keys_are_merged_into_the_selector() {
        let mut c = tsc("zone", DO_NOT_SCHEDULE, Some(&[("app", "a")]));
        c.match_label_keys = Some(vec!["hash".into(), "absent".into()]);
        let pod_labels = labels(&[("app", "a"), ("hash", "h1")]);
        for (name, c, candidate, want) in [
            (
                "same hash matches",
                c.clone(),
                labels(&[("app", "a"), ("hash", "h1")]),
                true,
            ),
            (
                "other hash does not",
                c.clone(),
                labels(&[("app", "a"), ("hash", "h2")]),
                false,
            ),
            (
                "selector still applies",
                c.clone(),
                labels(&[("app", "b"), ("hash", "h1")]),
                false,
            ),
            (
                "nil selector stays nothing",
                TopologySpreadConstraint {
                    label_selector: None,
                    ..c.clone()
                },
                labels(&[("app", "a"), ("hash", "h1")]),
                false,
            ),
        ] {
            let got = filter_constraints(&[c], Some(&pod_labels), DO_NOT_SCHEDULE, V1_37).unwrap();
            assert_eq!(got[0].selector.matches(&candidate), want, "{name}");
        }
    }

    #[test]
    fn node_inclusion_policies() {
        let affinity_pod = pod("p")
            .affinity(Affinity {
                node_affinity: Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                        node_selector_terms: vec![NodeSelectorTerm {
                            match_expressions: Some(vec![NodeSelectorRequirement {
                                key: "disk".into(),
                                operator: "In".into(),
                                values: Some(vec!["ssd".into()]),
                            }]),
                            match_fields: None,
                        }],
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .toleration(Toleration {
                key: Some("tolerated".into()),
                operator: Some("Exists".into()),
                ..Default::default()
            })
            .obj();
        let base = SpreadConstraint {
            max_skew: 1,
            topology_key: "zone".into(),
            selector: Selector::everything(),
            min_domains: 1,
            honor_node_affinity: true,
            honor_node_taints: true,
        };
        let ignore_all = SpreadConstraint {
            honor_node_affinity: false,
            honor_node_taints: false,
            ..base.clone()
        };
        let required = RequiredNodeAffinity::from_pod(&affinity_pod);
        for (name, n, c, want) in [
            (
                "affinity match, no taints",
                node("a").label("disk", "ssd").obj(),
                &base,
                true,
            ),
            (
                "affinity mismatch honored",
                node("b").label("disk", "hdd").obj(),
                &base,
                false,
            ),
            (
                "affinity mismatch ignored",
                node("b").label("disk", "hdd").obj(),
                &ignore_all,
                true,
            ),
            (
                "tolerated taint",
                node("c")
                    .label("disk", "ssd")
                    .taint("tolerated", "", "NoSchedule")
                    .obj(),
                &base,
                true,
            ),
            (
                "untolerated NoSchedule taint honored",
                node("d")
                    .label("disk", "ssd")
                    .taint("bad", "x", "NoSchedule")
                    .obj(),
                &base,
                false,
            ),
            (
                "PreferNoSchedule taint never excludes",
                node("e")
                    .label("disk", "ssd")
                    .taint("bad", "x", "PreferNoSchedule")
                    .obj(),
                &base,
                true,
            ),
            (
                "untolerated taint ignored",
                node("f")
                    .label("disk", "hdd")
                    .taint("bad", "x", "NoExecute")
                    .obj(),
                &ignore_all,
                true,
            ),
        ] {
            assert_eq!(
                c.match_node_inclusion_policies(&affinity_pod, &n, &required, false),
                want,
                "{name}"
            );
        }
        let with_selector = pod("q").node_selector("disk", "ssd").obj();
        let r = RequiredNodeAffinity::from_pod(&with_selector);
        assert!(r.matches(&node("a").label("disk", "ssd").obj()));
        assert!(!r.matches(&node("a").obj()));
        assert!(RequiredNodeAffinity::from_pod(&pod("none").obj()).matches(&node("a").obj()));
    }

    #[test]
    fn counting_skips_terminating_other_namespaces_and_empty_selectors() {
        let pods: Vec<Arc<PodInfo>> = vec![
            pod("a").label("app", "x").info(),
            pod("b").label("app", "x").namespace("other").info(),
            pod("c").label("app", "y").info(),
            pod("d")
                .label("app", "x")
                .with(|p| {
                    p.metadata.deletion_timestamp = Some(
                        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()),
                    )
                })
                .info(),
        ]
        .into_iter()
        .map(Arc::new)
        .collect();
        let sel = Selector::from_map(&labels(&[("app", "x")]));
        assert_eq!(count_pods_match_selector(&pods, &sel, "default"), 1);
        assert_eq!(
            count_pods_match_selector(&pods, &Selector::everything(), "default"),
            0
        );
        assert_eq!(count_pods_match_selector(&pods, &Selector::Nothing, "default"), 0);
    }

    /// `MatchLabelKeysInPodTopologySpread` off: `matchLabelKeys` are ignored, so a pod with another
    /// hash matches the selector too.
    #[test]
    fn match_label_keys_follow_the_gate() {
        let mut c = tsc("zone", DO_NOT_SCHEDULE, Some(&[("app", "a")]));
        c.match_label_keys = Some(vec!["hash".into()]);
        let pod_labels = labels(&[("app", "a"), ("hash", "h1")]);
        let other_hash = labels(&[("app", "a"), ("hash", "h2")]);
        for (name, gates, want) in [
            ("gate on (v1.37.1)", V1_37, false),
            (
                "gate off",
                SpreadGates {
                    match_label_keys: false,
                    ..V1_37
                },
                true,
            ),
        ] {
            let got = filter_constraints(
                std::slice::from_ref(&c),
                Some(&pod_labels),
                DO_NOT_SCHEDULE,
                gates,
            )
            .unwrap();
            assert_eq!(got[0].selector.matches(&other_hash), want, "{name}");
        }
    }

    /// `NodeInclusionPolicyInPodTopologySpread` off: the constraint's policies are ignored (affinity
    /// Honor, taints Ignore), so a node outside the pod's required affinity no longer counts under
    /// `nodeAffinityPolicy: Ignore`, and an untolerated taint no longer excludes under
    /// `nodeTaintsPolicy: Honor`.
    #[test]
    fn node_inclusion_policies_follow_the_gate() {
        let mut c = tsc("zone", DO_NOT_SCHEDULE, Some(&[("app", "a")]));
        c.node_affinity_policy = Some("Ignore".into());
        c.node_taints_policy = Some("Honor".into());
        let selective = pod("p").node_selector("disk", "ssd").obj();
        let required = RequiredNodeAffinity::from_pod(&selective);
        let off = SpreadGates {
            node_inclusion_policy: false,
            ..V1_37
        };
        let hdd = node("a").label("disk", "hdd").obj();
        let tainted = node("b")
            .label("disk", "ssd")
            .taint("bad", "x", "NoSchedule")
            .obj();
        for (name, gates, n, want) in [
            ("on: affinity ignored", V1_37, &hdd, true),
            ("off: affinity honored", off, &hdd, false),
            ("on: taint honored", V1_37, &tainted, false),
            ("off: taint ignored", off, &tainted, true),
        ] {
            let got = filter_constraints(std::slice::from_ref(&c), None, DO_NOT_SCHEDULE, gates).unwrap();
            assert_eq!(
                got[0].match_node_inclusion_policies(
                    &selective,
                    n,
                    &required,
                    gates.taint_comparison_operators
                ),
                want,
                "{name}"
            );
        }
    }

    /// `TaintTolerationComparisonOperators` decides whether a `Gt` toleration keeps a node with a
    /// larger numeric taint value in the count under `nodeTaintsPolicy: Honor`.
    #[test]
    fn taint_policy_comparison_operators_follow_the_gate() {
        let mut c = tsc("zone", DO_NOT_SCHEDULE, Some(&[("app", "a")]));
        c.node_taints_policy = Some("Honor".into());
        let tolerating = pod("p")
            .toleration(crate::testing::toleration("level", "Gt", "3", "NoSchedule"))
            .obj();
        let required = RequiredNodeAffinity::from_pod(&tolerating);
        let n = node("a").taint("level", "5", "NoSchedule").obj();
        let got = filter_constraints(std::slice::from_ref(&c), None, DO_NOT_SCHEDULE, V1_37).unwrap();
        assert!(
            !got[0].match_node_inclusion_policies(&tolerating, &n, &required, false),
            "gate off"
        );
        assert!(
            got[0].match_node_inclusion_policies(&tolerating, &n, &required, true),
            "gate on"
        );
    }
}
