//! Test-only helpers for the preemption tests: a PreFilter/Filter plugin whose state depends on other pods
//! (to exercise AddPod/RemovePod), and a framework of real plugins around DefaultPreemption.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use crate::framework::cycle_state::{CycleState, StateKey};
use crate::framework::interface::*;
use crate::framework::runtime::{Framework, Handle, PluginError, ResolvedProfile};
use crate::framework::status::Status;
use crate::plugins::{in_tree_registry, names};
use crate::snapshot::{ClusterObjects, NodeInfo, PodInfo, Snapshot};

/// A fixed "now" for start times (2001-09-09).
pub const NOW: i128 = 1_000_000_000_000_000_000;
/// The counting plugin's name.
pub const TEST_COUNT: &str = "TestCount";
/// Pods with this label are counted by TestCount; at most two per node (the preemptor included).
pub const COUNTED: &str = "counted";

/// TestCount's state: counted pods per node.
#[derive(Debug, Clone, Default)]
pub struct CountState(pub BTreeMap<String, i64>);
/// TestCount's state key.
pub const COUNT_KEY: StateKey<CountState> = StateKey::new("PreFilterTestCount");

fn is_counted(p: &PodInfo) -> bool {
    p.labels().is_some_and(|l| l.contains_key(COUNTED))
}

struct TestCount;
impl Plugin for TestCount {
    fn name(&self) -> &'static str {
        TEST_COUNT
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}
impl PreFilterPlugin for TestCount {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        _pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        let counts = nodes
            .iter()
            .map(|n| {
                (
                    n.name().to_string(),
                    n.pods.iter().filter(|p| is_counted(p)).count() as i64,
                )
            })
            .collect();
        state.write(&COUNT_KEY, CountState(counts));
        (None, Status::success())
    }
    fn pre_filter_extensions(&self) -> Option<&dyn PreFilterExtensions> {
        Some(self)
    }
}
impl PreFilterExtensions for TestCount {
    fn add_pod(&self, state: &mut CycleState, _pod: &PodInfo, other: &PodInfo, node: &NodeInfo) -> Status {
        if let Some(s) = state.read_mut(&COUNT_KEY)
            && is_counted(other)
        {
            *s.0.entry(node.name().to_string()).or_insert(0) += 1;
        }
        Status::success()
    }
    fn remove_pod(&self, state: &mut CycleState, _pod: &PodInfo, other: &PodInfo, node: &NodeInfo) -> Status {
        if let Some(s) = state.read_mut(&COUNT_KEY)
            && is_counted(other)
        {
            *s.0.entry(node.name().to_string()).or_insert(0) -= 1;
        }
        Status::success()
    }
}
impl FilterPlugin for TestCount {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read(&COUNT_KEY) else {
            return Status::error("no state");
        };
        let n = s.0.get(node.name()).copied().unwrap_or(0) + i64::from(is_counted(pod));
        if n > 2 {
            Status::unschedulable("too many counted pods")
        } else {
            Status::success()
        }
    }
}

/// The counted pods of node "n1" in the state.
pub fn counted(state: &CycleState) -> i64 {
    state
        .read(&COUNT_KEY)
        .and_then(|s| s.0.get("n1").copied())
        .unwrap_or(0)
}

fn count(
    _: Option<&serde_json::Value>,
    _: &Handle,
    _: &crate::framework::FeatureGates,
) -> Result<Arc<dyn Plugin>, PluginError> {
    Ok(Arc::new(TestCount))
}
/// A snapshot of nodes, pods and PDBs.
pub fn snapshot_with(nodes: Vec<Node>, pods: Vec<Pod>, pdbs: Vec<PodDisruptionBudget>) -> Snapshot {
    Snapshot::new(ClusterObjects {
        nodes,
        pods,
        pod_disruption_budgets: pdbs,
        ..Default::default()
    })
}

/// A framework of the in-tree registry: NodeUnschedulable and NodeResourcesFit, TestCount (PreFilter with
/// AddPod/RemovePod, and Filter) and DefaultPreemption (PostFilter) with the given args.
pub fn framework_with_args(snapshot: Snapshot, args: Option<serde_json::Value>) -> Framework {
    let mut registry = in_tree_registry();
    registry.insert(TEST_COUNT, count);
    let profile = ResolvedProfile {
        scheduler_name: "default-scheduler".into(),
        queue_sort: vec![names::PRIORITY_SORT.into()],
        pre_filter: vec![names::NODE_RESOURCES_FIT.into(), TEST_COUNT.into()],
        filter: vec![
            names::NODE_UNSCHEDULABLE.into(),
            names::NODE_RESOURCES_FIT.into(),
            TEST_COUNT.into(),
        ],
        post_filter: vec![names::DEFAULT_PREEMPTION.into()],
        bind: vec![names::DEFAULT_BINDER.into()],
        plugin_args: args
            .into_iter()
            .map(|a| (names::DEFAULT_PREEMPTION.to_string(), a))
            .collect(),
        ..Default::default()
    };
    Framework::new(&profile, &registry, Arc::new(snapshot)).expect("test framework")
}

/// [`framework_with_args`] with default args.
pub fn framework(snapshot: Snapshot) -> Framework {
    framework_with_args(snapshot, None)
}

/// Runs PreFilter for the pod.
pub fn prefilter(fwk: &Framework, pod: &PodInfo) -> (CycleState, Status) {
    let mut state = CycleState::new();
    let (_, s, _) = fwk.run_pre_filter_plugins(&mut state, pod);
    (state, s)
}
