//! TaintToleration: a pod may only land on nodes whose NoSchedule/NoExecute taints it tolerates,
//! and prefers nodes with fewer untolerated PreferNoSchedule taints.
//!
//! The Filter reason depends on the release: up to v1.34.1 it names the first untolerated taint,
//! `node(s) had untolerated taint {key: value}` (so the FitError counts nodes per taint); from
//! v1.34.2 it is the literal `node(s) had untolerated taint(s)`
//! (`ReleaseChanges::untolerated_taint_reason_names_taint`). The `Lt`/`Gt` toleration operators follow `TaintTolerationComparisonOperators` (alpha,
//! off in v1.37.1) from the gates the factory receives, see `helper::taints`. PreFilter only Skips under the alpha
//! `InPlacePodVerticalScalingSchedulerPreemption` gate, so here it always succeeds.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Taint, Toleration};

use crate::framework::FeatureGates;
use crate::framework::cycle_state::{CycleState, StateKey};
use crate::framework::interface::{
    FilterPlugin, MAX_NODE_SCORE, NodeScore, Plugin, PreFilterPlugin, PreFilterResult, PreScorePlugin,
    ScorePlugin,
};
use crate::framework::runtime::{Handle, PluginError};
use crate::framework::status::Status;
use crate::plugins::helper::normalize_score::default_normalize_score;
use crate::plugins::helper::taints::{
    EFFECT_PREFER_NO_SCHEDULE, do_not_schedule_taints_filter, find_matching_untolerated_taint, node_taints,
    pod_tolerations, tolerations_tolerate_taint,
};
use crate::plugins::names;
use crate::snapshot::{NodeInfo, PodInfo};

/// The plugin's registry name.
pub(crate) const NAME: &str = names::TAINT_TOLERATION;

/// Filter reason when the node has a NoSchedule/NoExecute taint the pod does not tolerate
/// (v1.34.2 and later).
pub(crate) const ERR_REASON_UNTOLERATED: &str = "node(s) had untolerated taint(s)";

/// Filter reason up to v1.34.1: Go's `fmt.Sprintf("node(s) had untolerated taint {%s: %s}",
/// taint.Key, taint.Value)` for the first untolerated taint (an absent value prints as empty).
pub(crate) fn err_reason_untolerated_taint_v1_33(taint: &Taint) -> String {
    format!(
        "node(s) had untolerated taint {{{}: {}}}",
        taint.key,
        taint.value.as_deref().unwrap_or_default()
    )
}

/// The pod's tolerations that can tolerate PreferNoSchedule taints (empty effect or PreferNoSchedule).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PreScoreState {
    /// Those tolerations.
    pub tolerations_prefer_no_schedule: Vec<Toleration>,
}

/// Where PreScore leaves its state.
pub(crate) const PRE_SCORE_STATE_KEY: StateKey<PreScoreState> = StateKey::new("PreScoreTaintToleration");

/// The TaintToleration plugin. `Default` is v1.37.1's (comparison operators off, the reason
/// without the taint).
#[derive(Debug, Default)]
pub(crate) struct TaintToleration {
    /// `TaintTolerationComparisonOperators`: `Lt`/`Gt` tolerations compare numeric taint values.
    enable_taint_toleration_comparison_operators: bool,
    /// The release's Filter reason names the taint (up to v1.34.1).
    reason_names_taint: bool,
}

fn prefer_no_schedule_tolerations(pod: &PodInfo) -> Vec<Toleration> {
    pod_tolerations(&pod.pod)
        .iter()
        .filter(|t| {
            matches!(
                t.effect.as_deref(),
                None | Some("") | Some(EFFECT_PREFER_NO_SCHEDULE)
            )
        })
        .cloned()
        .collect()
}

fn count_intolerable_prefer_no_schedule(
    node: &NodeInfo,
    tolerations: &[Toleration],
    enable_comparison_operators: bool,
) -> i64 {
    node_taints(&node.node)
        .iter()
        .filter(|t| t.effect == EFFECT_PREFER_NO_SCHEDULE)
        .filter(|t| !tolerations_tolerate_taint(tolerations, t, enable_comparison_operators))
        .count() as i64
}

impl Plugin for TaintToleration {
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

impl PreFilterPlugin for TaintToleration {
    fn pre_filter(
        &self,
        _state: &mut CycleState,
        _pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        (None, Status::success())
    }
}

impl FilterPlugin for TaintToleration {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let untolerated = find_matching_untolerated_taint(
            node_taints(&node.node),
            pod_tolerations(&pod.pod),
            do_not_schedule_taints_filter,
            self.enable_taint_toleration_comparison_operators,
        );
        match untolerated {
            None => Status::success(),
            Some(taint) if self.reason_names_taint => {
                Status::unresolvable(err_reason_untolerated_taint_v1_33(taint))
            }
            Some(_) => Status::unresolvable(ERR_REASON_UNTOLERATED),
        }
    }
}

impl PreScorePlugin for TaintToleration {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, _nodes: &[Arc<NodeInfo>]) -> Status {
        state.write(
            &PRE_SCORE_STATE_KEY,
            PreScoreState {
                tolerations_prefer_no_schedule: prefer_no_schedule_tolerations(pod),
            },
        );
        Status::success()
    }
}

impl ScorePlugin for TaintToleration {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> (i64, Status) {
        let Some(s) = state.read(&PRE_SCORE_STATE_KEY) else {
            return (
                0,
                Status::error(format!(
                    "failed to read {:?} from cycleState: not found",
                    PRE_SCORE_STATE_KEY.name()
                )),
            );
        };
        (
            count_intolerable_prefer_no_schedule(
                node,
                &s.tolerations_prefer_no_schedule,
                self.enable_taint_toleration_comparison_operators,
            ),
            Status::success(),
        )
    }

    fn has_normalize_score(&self) -> bool {
        true
    }

    /// More untolerated PreferNoSchedule taints → lower score (reverse normalization).
    fn normalize_score(&self, _state: &CycleState, _pod: &PodInfo, scores: &mut [NodeScore]) -> Status {
        default_normalize_score(MAX_NODE_SCORE, true, scores);
        Status::success()
    }
}

/// Builds the plugin (it takes no args).
pub(crate) fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Handle,
    features: &FeatureGates,
) -> Result<Arc<dyn Plugin>, PluginError> {
    Ok(Arc::new(TaintToleration {
        enable_taint_toleration_comparison_operators: features.taint_toleration_comparison_operators,
        reason_names_taint: features.changes.untolerated_taint_reason_names_taint,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::status::Code;
    use crate::testing::{NodeBuilder, PodBuilder, node, pod, toleration};

    #[test]
    fn filter_on_no_schedule_and_no_execute() {
        let cases: Vec<(&str, PodBuilder, NodeBuilder, bool)> = vec![
            ("no taints", pod("p"), node("n1"), true),
            (
                "untolerated NoSchedule",
                pod("p"),
                node("n1").taint("k", "v", "NoSchedule"),
                false,
            ),
            (
                "untolerated NoExecute",
                pod("p"),
                node("n1").taint("k", "v", "NoExecute"),
                false,
            ),
            (
                "PreferNoSchedule never filters",
                pod("p"),
                node("n1").taint("k", "v", "PreferNoSchedule"),
                true,
            ),
            (
                "tolerated by Equal",
                pod("p").toleration(toleration("k", "Equal", "v", "NoSchedule")),
                node("n1").taint("k", "v", "NoSchedule"),
                true,
            ),
            (
                "value mismatch",
                pod("p").toleration(toleration("k", "Equal", "x", "NoSchedule")),
                node("n1").taint("k", "v", "NoSchedule"),
                false,
            ),
            (
                "one of two tolerated",
                pod("p").toleration(toleration("a", "Exists", "", "")),
                node("n1")
                    .taint("a", "", "NoSchedule")
                    .taint("b", "", "NoExecute"),
                false,
            ),
            (
                "both tolerated",
                pod("p")
                    .toleration(toleration("a", "Exists", "", ""))
                    .toleration(toleration("b", "Exists", "", "NoExecute")),
                node("n1")
                    .taint("a", "", "NoSchedule")
                    .taint("b", "", "NoExecute"),
                true,
            ),
        ];
        for (name, p, n, fits) in cases {
            let s = TaintToleration::default().filter(&CycleState::new(), &p.info(), &n.info_with(vec![]));
            if fits {
                assert!(s.is_success(), "{name}: {s:?}");
            } else {
                assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{name}");
                assert_eq!(s.reasons(), [ERR_REASON_UNTOLERATED.to_string()], "{name}");
            }
        }
    }

    #[test]
    fn prefilter_succeeds_without_narrowing() {
        let (r, s) = TaintToleration::default().pre_filter(&mut CycleState::new(), &pod("p").info(), &[]);
        assert!(r.is_none() && s.is_success());
    }

    fn scores(p: PodBuilder, nodes: Vec<NodeBuilder>) -> (Vec<i64>, Vec<i64>) {
        let p = p.info();
        let infos: Vec<Arc<NodeInfo>> = nodes.into_iter().map(|n| Arc::new(n.info_with(vec![]))).collect();
        let mut state = CycleState::new();
        assert!(
            TaintToleration::default()
                .pre_score(&mut state, &p, &infos)
                .is_success()
        );
        let mut list: Vec<NodeScore> = infos
            .iter()
            .map(|n| {
                let (score, s) = TaintToleration::default().score(&state, &p, n);
                assert!(s.is_success());
                NodeScore {
                    name: n.name().to_string(),
                    score,
                }
            })
            .collect();
        let raw = list.iter().map(|s| s.score).collect();
        assert!(
            TaintToleration::default()
                .normalize_score(&state, &p, &mut list)
                .is_success()
        );
        (raw, list.iter().map(|s| s.score).collect())
    }

    #[test]
    fn score_counts_untolerated_prefer_no_schedule() {
        let (raw, normalized) = scores(
            pod("p").toleration(toleration("tolerated", "Exists", "", "PreferNoSchedule")),
            vec![
                node("clean"),
                node("one").taint("a", "", "PreferNoSchedule"),
                node("two")
                    .taint("a", "", "PreferNoSchedule")
                    .taint("b", "", "PreferNoSchedule")
                    .taint("tolerated", "", "PreferNoSchedule"),
                node("hard-only").taint("c", "", "NoSchedule"),
            ],
        );
        assert_eq!(raw, vec![0, 1, 2, 0]);
        assert_eq!(normalized, vec![100, 50, 0, 100]);
    }

    #[test]
    fn score_ignores_tolerations_for_other_effects() {
        // A NoSchedule toleration does not help with a PreferNoSchedule taint.
        let (raw, normalized) = scores(
            pod("p").toleration(toleration("a", "Exists", "", "NoSchedule")),
            vec![node("n1").taint("a", "", "PreferNoSchedule"), node("n2")],
        );
        assert_eq!(raw, vec![1, 0]);
        assert_eq!(normalized, vec![0, 100]);
        // An empty effect tolerates every effect.
        let (raw, _) = scores(
            pod("p").toleration(toleration("a", "Exists", "", "")),
            vec![node("n1").taint("a", "", "PreferNoSchedule")],
        );
        assert_eq!(raw, vec![0]);
    }

    #[test]
    fn all_zero_scores_normalize_to_max() {
        let (_, normalized) = scores(pod("p"), vec![node("n1"), node("n2")]);
        assert_eq!(normalized, vec![100, 100]);
    }

    #[test]
    fn score_without_prescore_state_is_an_error() {
        let (_, s) = TaintToleration::default().score(
            &CycleState::new(),
            &pod("p").info(),
            &node("n1").info_with(vec![]),
        );
        assert_eq!(s.code(), Code::Error);
    }

    /// `TaintTolerationComparisonOperators` decides whether a `Gt` toleration tolerates a larger
    /// numeric taint value, in Filter and in Score, as upstream's plugin built with the gate on/off.
    #[test]
    fn comparison_operators_follow_the_gate() {
        let handle = Handle {
            snapshot: Arc::new(crate::testing::snapshot(vec![], vec![])),
        };
        let p = pod("p")
            .toleration(toleration("level", "Gt", "3", "NoSchedule"))
            .toleration(toleration("soft", "Gt", "3", "PreferNoSchedule"))
            .info();
        let n = node("n1")
            .taint("level", "5", "NoSchedule")
            .taint("soft", "5", "PreferNoSchedule")
            .info_with(vec![]);
        for (name, enabled, fits, untolerated_soft) in [
            ("gate off (v1.37.1)", false, false, 1),
            ("gate on", true, true, 0),
        ] {
            let features = FeatureGates {
                taint_toleration_comparison_operators: enabled,
                ..FeatureGates::v1_37()
            };
            let plugin = new(None, &handle, &features).expect("plugin");
            let s = plugin
                .as_filter()
                .expect("filter")
                .filter(&CycleState::new(), &p, &n);
            assert_eq!(s.is_success(), fits, "{name}: {s:?}");
            let mut state = CycleState::new();
            let nodes = vec![Arc::new(n.clone())];
            assert!(
                plugin
                    .as_pre_score()
                    .expect("pre_score")
                    .pre_score(&mut state, &p, &nodes)
                    .is_success()
            );
            let (score, _) = plugin.as_score().expect("score").score(&state, &p, &n);
            assert_eq!(score, untolerated_soft, "{name}");
        }
    }

    /// The Filter reason per release: v1.33.13 and v1.34.1 name the first untolerated
    /// NoSchedule/NoExecute taint in Go's `{%s: %s}` form (an absent value prints empty, a
    /// tolerated or PreferNoSchedule taint before it is passed over); v1.34.2 and later write one
    /// literal for every taint.
    #[test]
    fn filter_reason_follows_the_release() {
        use crate::features::KubeVersion;
        let handle = Handle {
            snapshot: Arc::new(crate::testing::snapshot(vec![], vec![])),
        };
        let p = pod("p")
            .toleration(toleration("tolerated", "Exists", "", ""))
            .info();
        let nodes = [
            (
                "first untolerated after a tolerated and a soft taint",
                node("n1")
                    .taint("tolerated", "x", "NoSchedule")
                    .taint("soft", "y", "PreferNoSchedule")
                    .taint("gpu", "present", "NoExecute")
                    .taint("zone", "a", "NoSchedule"),
                "node(s) had untolerated taint {gpu: present}",
            ),
            (
                "absent value",
                node("n2").taint("node-role.kubernetes.io/control-plane", "", "NoSchedule"),
                "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }",
            ),
        ];
        for (version, names_taint) in [
            (KubeVersion::new(33, 13), true),
            (KubeVersion::new(34, 1), true),
            (KubeVersion::new(34, 2), false),
            (KubeVersion::new(37, 1), false),
        ] {
            let plugin = new(None, &handle, &FeatureGates::for_version(version)).expect("plugin");
            for (name, n, named_reason) in &nodes {
                let s = plugin.as_filter().expect("filter").filter(
                    &CycleState::new(),
                    &p,
                    &n.clone().info_with(vec![]),
                );
                let want = if names_taint {
                    named_reason
                } else {
                    ERR_REASON_UNTOLERATED
                };
                assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{version} {name}");
                assert_eq!(s.reasons(), [want.to_string()], "{version} {name}");
            }
        }
    }
}
