//! NodeResourcesBalancedAllocation: favors nodes whose resource fractions (requested / allocatable of
//! cpu, memory, ...) end up close to each other. From v1.36 a node is scored by how much placing the
//! pod improves that balance; up to v1.35 by the balance with the pod alone
//! (`ReleaseChanges::balanced_allocation_scores_the_change`). Best-effort pods are skipped, so they
//! are not all piled onto one node.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::framework::FeatureGates;
use crate::framework::cycle_state::{CycleState, StateKey};
use crate::framework::interface::{Plugin, PreScorePlugin, ScorePlugin};
use crate::framework::runtime::{Handle, PluginError, decode_args};
use crate::framework::status::Status;
use crate::plugins::helper::device_classes::DeviceClassResolver;
use crate::plugins::names;
use crate::plugins::node_resources::resource_allocation::{
    DraExtendedResources, RequestMode, ResourceAllocationScorer, ResourceSpec, ScoringFunction, aggregate,
    default_resources, field_error, is_best_effort,
};
use crate::snapshot::requests::RequestOptions;
use crate::snapshot::{NodeInfo, PodInfo};

/// The plugin's name.
pub(crate) const NAME: &str = names::NODE_RESOURCES_BALANCED_ALLOCATION;

/// The pod's requests per scored resource, computed once per cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PreScoreState {
    /// In the order of the configured resources.
    pub pod_requests: Vec<i64>,
}

/// PreScore state key.
pub(crate) const PRE_SCORE_STATE_KEY: StateKey<PreScoreState> =
    StateKey::new("PreScoreNodeResourcesBalancedAllocation");

/// `NodeResourcesBalancedAllocationArgs` (kubescheduler.config.k8s.io/v1).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct NodeResourcesBalancedAllocationArgs {
    /// TypeMeta, accepted and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// TypeMeta, accepted and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Resources to balance; empty = cpu and memory.
    #[serde(default)]
    pub resources: Vec<ResourceSpec>,
}

impl NodeResourcesBalancedAllocationArgs {
    /// v1 defaulting: cpu and memory when empty; weight 0 becomes 1.
    pub(crate) fn defaulted(mut self) -> Self {
        if self.resources.is_empty() {
            self.resources = default_resources();
        }
        for r in &mut self.resources {
            if r.weight == 0 {
                r.weight = 1;
            }
        }
        self
    }

    /// `ValidateNodeResourcesBalancedAllocationArgs`: unique names, every weight exactly 1.
    pub(crate) fn validate(&self) -> Result<(), String> {
        let mut errs = Vec::new();
        let mut seen = BTreeSet::new();
        for (i, r) in self.resources.iter().enumerate() {
            if !seen.insert(r.name.as_str()) {
                errs.push(field_error(
                    &format!("resources[{i}].name"),
                    "Duplicate value",
                    &format!("{:?}", r.name),
                ));
            }
            if r.weight != 1 {
                errs.push(field_error(
                    &format!("resources[{i}].weight"),
                    "Invalid value",
                    &format!("{}: must be 1", r.weight),
                ));
            }
        }
        aggregate(errs).map_or(Ok(()), Err)
    }
}

/// The NodeResourcesBalancedAllocation plugin.
#[derive(Debug)]
pub(crate) struct BalancedAllocation {
    scorer: ResourceAllocationScorer,
    /// Set when a scored resource is an extended resource backed by DRA (counted in devices).
    dra_score: Option<Arc<DraExtendedResources>>,
}

/// Builds the plugin from its `NodeResourcesBalancedAllocationArgs`.
pub(crate) fn new(
    args: Option<&serde_json::Value>,
    handle: &Handle,
    features: &FeatureGates,
) -> Result<Arc<dyn Plugin>, PluginError> {
    let args = decode_args::<NodeResourcesBalancedAllocationArgs>(NAME, args)?.defaulted();
    args.validate().map_err(|message| PluginError::InvalidArgs {
        plugin: NAME.to_string(),
        message,
    })?;
    let resolver = Arc::new(DeviceClassResolver::for_snapshot(&handle.snapshot));
    let function = if features.changes.balanced_allocation_scores_the_change {
        ScoringFunction::Balanced
    } else {
        ScoringFunction::BalancedWithPod
    };
    Ok(Arc::new(BalancedAllocation {
        dra_score: DraExtendedResources::for_scoring(&handle.snapshot, &resolver, &args.resources),
        scorer: ResourceAllocationScorer {
            resources: args.resources,
            function,
            mode: RequestMode::Requested(RequestOptions::from_features(features)),
        },
    }))
}

impl Plugin for BalancedAllocation {
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

impl PreScorePlugin for BalancedAllocation {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, _nodes: &[Arc<NodeInfo>]) -> Status {
        let pod_requests = self.scorer.pod_request_list(&pod.pod);
        if is_best_effort(&pod_requests) {
            // Every node would look equally balanced with a pod that requests nothing; scoring it would
            // steer all best-effort pods to the same node (kubernetes#129138).
            return Status::skip();
        }
        state.write(&PRE_SCORE_STATE_KEY, PreScoreState { pod_requests });
        Status::success()
    }
}

impl ScorePlugin for BalancedAllocation {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> (i64, Status) {
        if let Some(s) = state.read(&PRE_SCORE_STATE_KEY) {
            return self
                .scorer
                .score_with_dra(node, &s.pod_requests, self.dra_score.as_deref());
        }
        let pod_requests = self.scorer.pod_request_list(&pod.pod);
        if is_best_effort(&pod_requests) {
            return (0, Status::success());
        }
        self.scorer
            .score_with_dra(node, &pod_requests, self.dra_score.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::status::Code;
    use crate::testing::{node, pod, snapshot};
    use serde_json::json;

    fn plugin(args: Option<serde_json::Value>) -> Result<Arc<dyn Plugin>, PluginError> {
        let handle = Handle {
            snapshot: Arc::new(snapshot(vec![], vec![])),
        };
        new(args.as_ref(), &handle, &crate::framework::FeatureGates::default())
    }

    #[test]
    fn best_effort_pods_are_skipped() {
        let p = plugin(None).unwrap();
        let mut state = CycleState::new();
        let s = p
            .as_pre_score()
            .unwrap()
            .pre_score(&mut state, &pod("p").info(), &[]);
        assert_eq!(s.code(), Code::Skip);
        assert!(state.read(&PRE_SCORE_STATE_KEY).is_none());
        // Score without PreScore state: 0 for a best-effort pod.
        let n = node("n").cpu("4").memory("4Gi").info_with(vec![]);
        assert_eq!(
            p.as_score().unwrap().score(&state, &pod("p").info(), &n),
            (0, Status::success())
        );
    }

    /// PreScore then Score of `pb` on `n`.
    fn score_of(p: &dyn Plugin, n: &NodeInfo, pb: crate::testing::PodBuilder) -> i64 {
        let pi = pb.info();
        let mut state = CycleState::new();
        assert!(
            p.as_pre_score()
                .unwrap()
                .pre_score(&mut state, &pi, &[])
                .is_success()
        );
        let (score, s) = p.as_score().unwrap().score(&state, &pi, n);
        assert!(s.is_success());
        score
    }

    /// Actual requests, not the 100m / 200Mi defaults: memory without the pod is 0 (87), with it
    /// 25% like cpu (100): 50 + 63 / 2 = 81. With the defaults it would be 80. (The formula's
    /// cases are in `score_follows_the_release`.)
    #[test]
    fn scores_use_actual_requests() {
        let n = node("n")
            .cpu("4")
            .memory("8Gi")
            .info_with(vec![pod("a").cpu("1").node("n").obj()]);
        assert_eq!(
            score_of(plugin(None).unwrap().as_ref(), &n, pod("p").memory("2Gi")),
            81
        );
    }

    /// The score per release: up to v1.35 `(1 - std) * 100` of the fractions with the pod
    /// (|f1 - f2| / 2 for cpu and memory), from v1.36 the change the pod makes to that balance.
    #[test]
    fn score_follows_the_release() {
        use crate::features::{FeatureGates, KubeVersion};
        let cases = [
            // With the pod 50% cpu, 25% memory: std .125 → 87; without 100 → 50 + (50 - 13) / 2 = 68.
            (
                "unbalancing",
                node("n").cpu("4").memory("8Gi").info_with(vec![]),
                pod("p").cpu("2").memory("2Gi"),
                87,
                68,
            ),
            // With the pod 50% / 50% → 100; without 50% / 0% → 75: 50 + (50 + 25) / 2 = 87.
            (
                "balancing",
                node("n")
                    .cpu("4")
                    .memory("8Gi")
                    .info_with(vec![pod("a").cpu("2").node("n").obj()]),
                pod("p").memory("4Gi"),
                100,
                87,
            ),
            // 25% / 25% with the pod, 0 / 0 without: 100 vs 50 + 50 / 2 = 75.
            (
                "neutral",
                node("n").cpu("4").memory("8Gi").info_with(vec![]),
                pod("p").cpu("1").memory("2Gi"),
                100,
                75,
            ),
            // Fractions capped at 1: cpu 6/4 → 1, memory 25% → std .375 → 62; without 100 →
            // 50 + (50 + 62 - 100) / 2 = 56.
            (
                "over allocatable",
                node("n").cpu("4").memory("8Gi").info_with(vec![]),
                pod("p").cpu("6").memory("2Gi"),
                62,
                56,
            ),
        ];
        let handle = Handle {
            snapshot: Arc::new(snapshot(vec![], vec![])),
        };
        for (version, scores_the_change) in [
            (KubeVersion::new(33, 13), false),
            (KubeVersion::new(35, 4), false),
            (KubeVersion::new(36, 3), true),
            (KubeVersion::new(37, 1), true),
        ] {
            let p = new(None, &handle, &FeatureGates::for_version(version)).expect("plugin");
            for (name, n, pb, with_pod, change) in &cases {
                let want = if scores_the_change { *change } else { *with_pod };
                assert_eq!(score_of(p.as_ref(), n, pb.clone()), want, "{version} {name}");
            }
        }
    }

    #[test]
    fn three_resources_use_population_std() {
        let p = plugin(Some(json!({"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "example.com/gpu", "weight": 1}]})))
            .unwrap();
        let n = node("n")
            .cpu("4")
            .memory("4Gi")
            .allocatable("example.com/gpu", "4")
            .info_with(vec![]);
        // With the pod: .5, .5, 1 → std .2357 → 76; without: 0, 0, 0 → 100. 50 + (50 + 76 - 100) / 2 = 63.
        let pb = pod("p").cpu("2").memory("2Gi").req("example.com/gpu", "4");
        assert_eq!(score_of(p.as_ref(), &n, pb), 63);
    }

    #[test]
    fn invalid_args() {
        for (args, want) in [
            (
                json!({"resources": [{"name": "cpu", "weight": 2}]}),
                "resources[0].weight: Invalid value: 2: must be 1",
            ),
            (
                json!({"resources": [{"name": "cpu"}, {"name": "cpu"}]}),
                "resources[1].name: Duplicate value: \"cpu\"",
            ),
            (json!({"resource": []}), "unknown field `resource`"),
        ] {
            match plugin(Some(args.clone())) {
                Ok(_) => panic!("{args} should be rejected"),
                Err(PluginError::InvalidArgs { plugin, message }) => {
                    assert_eq!(plugin, NAME);
                    assert!(message.contains(want), "{args}: {message}");
                }
            }
        }
        assert!(plugin(Some(json!({"kind": "NodeResourcesBalancedAllocationArgs", "resources": [{"name": "cpu", "weight": 0}]}))).is_ok());
    }
}
