//! InterPodAffinity: places pods relative to other pods by topology domain.
//!
//! Filter enforces the incoming pod's required pod affinity and anti-affinity and the required
//! anti-affinity of pods already running; Score prefers domains by the preferred terms of both sides
//! (and by existing pods' required affinity, weighted by `hardPodAffinityWeight`).
//!
//! v1.34 to v1.36 keep the namespaceSelector of the incoming pod's terms after unrolling it
//! (`ReleaseChanges::inter_pod_affinity_namespace_selector_kept`): their
//! `mergeAffinityTermNamespacesIfNotEmpty` takes the term by value, so the reset is lost, and the
//! kept selector is then matched against no labels — one that matches an empty label set (only
//! `NotIn`/`DoesNotExist`) selects the pods of every namespace, in Filter and in Score.

mod filtering;
mod scoring;

use std::sync::Arc;

use serde::Deserialize;

use crate::framework::FeatureGates;
use crate::framework::interface::{FilterPlugin, Plugin, PreFilterPlugin, PreScorePlugin, ScorePlugin};
use crate::framework::runtime::{Handle, PluginError, decode_args};
use crate::labels::{Labels, Selector};
use crate::plugins::names;
use crate::snapshot::{AffinityTerm, PodInfo, Snapshot};

/// The plugin's registry name.
pub(crate) const NAME: &str = names::INTER_POD_AFFINITY;

/// Filter: a running pod's required anti-affinity rejects the incoming pod in the node's domain.
pub(crate) const ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";
/// Filter: the incoming pod's required affinity finds no matching pod in the node's domain.
pub(crate) const ERR_REASON_AFFINITY_RULES_NOT_MATCH: &str = "node(s) didn't match pod affinity rules";
/// Filter: the incoming pod's required anti-affinity matches a pod in the node's domain.
pub(crate) const ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't match pod anti-affinity rules";

/// `InterPodAffinityArgs`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct InterPodAffinityArgs {
    /// Score weight of existing pods' required affinity terms the incoming pod matches (0–100; unset = 1).
    pub hard_pod_affinity_weight: Option<i32>,
    /// Skip scoring unless the incoming pod has preferred (anti-)affinity terms itself.
    pub ignore_preferred_terms_of_existing_pods: bool,
}

/// The InterPodAffinity plugin.
#[derive(Debug)]
pub(crate) struct InterPodAffinity {
    snapshot: Arc<Snapshot>,
    hard_pod_affinity_weight: i32,
    ignore_preferred_terms_of_existing_pods: bool,
    /// The release keeps the incoming terms' namespaceSelector after unrolling it (v1.34–v1.36).
    namespace_selector_kept: bool,
}

/// Builds the plugin from `InterPodAffinityArgs`.
pub(crate) fn new(
    args: Option<&serde_json::Value>,
    handle: &Handle,
    features: &FeatureGates,
) -> Result<Arc<dyn Plugin>, PluginError> {
    let args: InterPodAffinityArgs = decode_args(NAME, args)?;
    let weight = args.hard_pod_affinity_weight.unwrap_or(1);
    if !(0..=100).contains(&weight) {
        return Err(PluginError::InvalidArgs {
            plugin: NAME.to_string(),
            message: format!("hardPodAffinityWeight: Invalid value: {weight}: not in valid range [0, 100]"),
        });
    }
    Ok(Arc::new(InterPodAffinity {
        snapshot: handle.snapshot.clone(),
        hard_pod_affinity_weight: weight,
        ignore_preferred_terms_of_existing_pods: args.ignore_preferred_terms_of_existing_pods,
        namespace_selector_kept: features.changes.inter_pod_affinity_namespace_selector_kept,
    }))
}

impl InterPodAffinity {
    /// Go's `mergeAffinityTermNamespacesIfNotEmpty`: an incoming pod's namespaceSelector is unrolled
    /// into the namespaces it selects now, so matching never needs the other pod's namespace labels.
    /// An empty selector (all namespaces) is kept as it is; v1.34–v1.36 keep every selector (their
    /// Go code resets a copy of the term), see the module doc.
    fn merge_term_namespaces(&self, term: &mut AffinityTerm) {
        if term.namespace_selector.is_everything() {
            return;
        }
        for (name, labels) in &self.snapshot.namespace_labels {
            if term.namespace_selector.matches(labels) {
                term.namespaces.insert(name.clone());
            }
        }
        if !self.namespace_selector_kept {
            term.namespace_selector = Selector::Nothing;
        }
    }

    /// The incoming pod's namespace labels (None for an unknown namespace, treated as no labels).
    fn namespace_labels(&self, pod: &PodInfo) -> Option<Arc<Labels>> {
        self.snapshot
            .namespace_labels(pod.namespace())
            .map(|l| Arc::new(l.clone()))
    }
}

/// Go's `podMatchesAllAffinityTerms`: the terms are non-empty and the pod matches each. Incoming terms
/// have their namespaceSelector unrolled, so no namespace labels are needed.
fn pod_matches_all_affinity_terms(terms: &[AffinityTerm], pod: &PodInfo) -> bool {
    !terms.is_empty() && terms.iter().all(|t| t.matches(pod, None))
}

/// Go's `podMatchesAnyAffinityTerms`.
fn pod_matches_any_affinity_terms(terms: &[AffinityTerm], pod: &PodInfo) -> bool {
    terms.iter().any(|t| t.matches(pod, None))
}

/// Go's `isSchedulableAfterAssignedPodChange` (the queueing hint for AssignedPod/Add and Delete) for
/// an assigned pod added (`added`) or deleted (`deleted`): true (Queue) when an added pod matches
/// all of `pod`'s required affinity terms, or a deleted pod matches one of `pod`'s required
/// anti-affinity terms or has one that `pod` matches. Like upstream, the terms are matched without
/// namespace labels (a namespaceSelector other than `{}` selects nothing here), and a pod whose
/// terms do not parse is requeued.
pub(crate) fn is_schedulable_after_assigned_pod_change(
    pod: &PodInfo,
    added: Option<&PodInfo>,
    deleted: Option<&PodInfo>,
) -> bool {
    let unscheduled = |p: &PodInfo| p.node_name().is_empty() && p.nominated_node_name().is_empty();
    if added.is_some_and(unscheduled) || deleted.is_some_and(unscheduled) {
        return false;
    }
    if pod.parse_error.is_some() {
        return true;
    }
    match (added, deleted) {
        (Some(added), _) => pod_matches_all_affinity_terms(&pod.required_affinity_terms, added),
        (None, Some(deleted)) => {
            pod_matches_any_affinity_terms(&pod.required_anti_affinity_terms, deleted)
                || deleted.parse_error.is_some()
                || pod_matches_any_affinity_terms(&deleted.required_anti_affinity_terms, pod)
        }
        (None, None) => false,
    }
}

impl Plugin for InterPodAffinity {
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

#[cfg(test)]
pub(crate) mod test_util {
    //! Builders for pod (anti-)affinity terms.

    use k8s_openapi::api::core::v1::{
        Affinity, PodAffinity, PodAffinityTerm, PodAntiAffinity, WeightedPodAffinityTerm,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    /// A term selecting pods labelled `key: value` in the pod's namespace.
    pub(crate) fn term(key: &str, value: &str, topology_key: &str) -> PodAffinityTerm {
        PodAffinityTerm {
            label_selector: Some(LabelSelector {
                match_labels: Some([(key.to_string(), value.to_string())].into()),
                ..Default::default()
            }),
            topology_key: topology_key.to_string(),
            ..Default::default()
        }
    }

    /// A weighted term.
    pub(crate) fn weighted(weight: i32, t: PodAffinityTerm) -> WeightedPodAffinityTerm {
        WeightedPodAffinityTerm {
            weight,
            pod_affinity_term: t,
        }
    }

    /// Pod affinity and anti-affinity, required and preferred.
    pub(crate) fn affinity(
        required: Vec<PodAffinityTerm>,
        preferred: Vec<WeightedPodAffinityTerm>,
        anti_required: Vec<PodAffinityTerm>,
        anti_preferred: Vec<WeightedPodAffinityTerm>,
    ) -> Affinity {
        let some = |v: Vec<PodAffinityTerm>| (!v.is_empty()).then_some(v);
        let some_w = |v: Vec<WeightedPodAffinityTerm>| (!v.is_empty()).then_some(v);
        let pa = (!required.is_empty() || !preferred.is_empty()).then(|| PodAffinity {
            required_during_scheduling_ignored_during_execution: some(required),
            preferred_during_scheduling_ignored_during_execution: some_w(preferred),
        });
        let paa = (!anti_required.is_empty() || !anti_preferred.is_empty()).then(|| PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: some(anti_required),
            preferred_during_scheduling_ignored_during_execution: some_w(anti_preferred),
        });
        Affinity {
            pod_affinity: pa,
            pod_anti_affinity: paa,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::snapshot;
    use serde_json::json;

    #[test]
    fn args_defaults_and_validation() {
        let handle = Handle {
            snapshot: Arc::new(snapshot(vec![], vec![])),
        };
        for (name, args, want) in [
            ("defaults", None, Ok(())),
            (
                "zero weight is valid",
                Some(json!({"hardPodAffinityWeight": 0})),
                Ok(()),
            ),
            (
                "ignore preferred terms",
                Some(json!({"ignorePreferredTermsOfExistingPods": true})),
                Ok(()),
            ),
            (
                "weight above 100",
                Some(json!({"hardPodAffinityWeight": 101})),
                Err("hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]"),
            ),
            (
                "negative weight",
                Some(json!({"hardPodAffinityWeight": -1})),
                Err("hardPodAffinityWeight: Invalid value: -1: not in valid range [0, 100]"),
            ),
        ] {
            match (
                new(args.as_ref(), &handle, &crate::framework::FeatureGates::default()).map(|_| ()),
                want,
            ) {
                (Ok(()), Ok(())) => {}
                (Err(PluginError::InvalidArgs { message, .. }), Err(w)) => assert_eq!(message, w, "{name}"),
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
        assert!(matches!(
            new(
                Some(&json!({"hardPodAffinityWeight": "x"})),
                &handle,
                &crate::framework::FeatureGates::default()
            ),
            Err(PluginError::InvalidArgs { .. })
        ));
    }

    /// The incoming pod's namespaceSelector `team NotIn [a]` per release: v1.33 and v1.37 unroll it
    /// to the namespace `other`, so the `app: db` pod in `default` neither repels (Filter) nor
    /// attracts (Score); v1.34–v1.36 keep the selector, which matches no labels, so that pod counts
    /// in both. A `matchLabels` selector and an existing pod's own selector behave alike in all.
    #[test]
    fn namespace_selector_reset_follows_the_release() {
        use super::test_util::{affinity, term, weighted};
        use crate::features::KubeVersion;
        use crate::framework::cycle_state::CycleState;
        use crate::framework::interface::NodeScore;
        use crate::framework::status::Code;
        use crate::snapshot::ClusterObjects;
        use crate::testing::{node, pod};
        use k8s_openapi::api::core::v1::Namespace;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
            LabelSelector, LabelSelectorRequirement, ObjectMeta,
        };

        let namespace = |name: &str, team: &str| Namespace {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([("team".to_string(), team.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };

        let not_in_team_a = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "team".into(),
                operator: "NotIn".into(),
                values: Some(vec!["a".into()]),
            }]),
            ..Default::default()
        };
        let team_b = LabelSelector {
            match_labels: Some([("team".to_string(), "b".to_string())].into()),
            ..Default::default()
        };
        let with_selector = |sel: &LabelSelector| {
            let mut t = term("app", "db", "zone");
            t.namespace_selector = Some(sel.clone());
            t
        };
        let snap = Arc::new(Snapshot::new(ClusterObjects {
            nodes: vec![
                node("a").label("zone", "z1").obj(),
                node("c").label("zone", "z2").obj(),
            ],
            pods: vec![pod("d").label("app", "db").node("a").obj()],
            namespaces: vec![namespace("default", "a"), namespace("other", "b")],
            ..Default::default()
        }));
        let handle = Handle {
            snapshot: snap.clone(),
        };
        // (name, incoming pod, leaks: Filter codes / Score raw on nodes a, c; unrolled: the same)
        type Case = (&'static str, crate::testing::PodBuilder, [i64; 2], [i64; 2]);
        let cases: Vec<Case> = vec![
            (
                "required anti-affinity, NotIn selector (Filter: 1 = rejected)",
                pod("p").affinity(affinity(
                    vec![],
                    vec![],
                    vec![with_selector(&not_in_team_a)],
                    vec![],
                )),
                [1, 0],
                [0, 0],
            ),
            (
                "required anti-affinity, matchLabels selector",
                pod("p").affinity(affinity(vec![], vec![], vec![with_selector(&team_b)], vec![])),
                [0, 0],
                [0, 0],
            ),
            (
                "preferred affinity, NotIn selector (Score raw)",
                pod("p").affinity(affinity(
                    vec![],
                    vec![weighted(5, with_selector(&not_in_team_a))],
                    vec![],
                    vec![],
                )),
                [5, 0],
                [0, 0],
            ),
        ];
        for (version, kept) in [
            (KubeVersion::new(33, 13), false),
            (KubeVersion::new(34, 4), true),
            (KubeVersion::new(36, 3), true),
            (KubeVersion::new(37, 1), false),
        ] {
            let pl = new(None, &handle, &FeatureGates::for_version(version)).expect("plugin");
            for (name, incoming, leaks, unrolled) in &cases {
                let p = incoming.clone().info();
                let want = if kept { leaks } else { unrolled };
                let got: Vec<i64> = if name.contains("Score") {
                    let mut state = CycleState::new();
                    let s = pl.as_pre_score().unwrap().pre_score(&mut state, &p, snap.nodes());
                    if s.code() == Code::Skip {
                        // No pod matched any term: upstream skips Score, every node gets 0.
                        assert_eq!(want, unrolled, "{version} {name}: {s:?}");
                        continue;
                    }
                    assert!(s.is_success(), "{version} {name}: {s:?}");
                    let mut scores: Vec<NodeScore> = snap
                        .nodes()
                        .iter()
                        .map(|n| NodeScore {
                            name: n.name().to_string(),
                            score: pl.as_score().unwrap().score(&state, &p, n).0,
                        })
                        .collect();
                    let raw = scores.iter().map(|s| s.score).collect();
                    assert!(
                        pl.as_score()
                            .unwrap()
                            .normalize_score(&state, &p, &mut scores)
                            .is_success()
                    );
                    raw
                } else {
                    let mut state = CycleState::new();
                    let (_, s) = pl
                        .as_pre_filter()
                        .unwrap()
                        .pre_filter(&mut state, &p, snap.nodes());
                    assert!(s.is_success(), "{version} {name}: {s:?}");
                    snap.nodes()
                        .iter()
                        .map(|n| {
                            let s = pl.as_filter().unwrap().filter(&state, &p, n);
                            i64::from(s.code() == Code::Unschedulable)
                        })
                        .collect()
                };
                assert_eq!(got, want.to_vec(), "{version} {name}");
            }
        }
    }
}
