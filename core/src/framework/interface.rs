//! One trait per kube-scheduler extension point, and the `Plugin` trait that ties a plugin to the points
//! it implements.
//!
//! The shapes follow `k8s.io/kube-scheduler/framework`: PreFilter may narrow the node set with a
//! `PreFilterResult` and offers AddPod/RemovePod extensions (used for nominated pods and preemption dry
//! runs); Score plugins may normalize; the binding cycle's PreBind/Bind produce `Action`s instead of
//! calling the API, so the engine stays pure.
//!
//! A plugin joins an extension point twice: it implements the point's trait (`impl FilterPlugin for
//! X`), and its `impl Plugin for X` returns `Some(self)` from the matching `as_*` method (`as_filter`).
//! The framework only sees the second, so a forgotten `as_*` would silently drop the plugin from that
//! point. `plugins::extension_points_tests` closes that hole: for every registered plugin it compares
//! the traits its concrete type implements (found at compile time by [`probe`]) with the `as_*`
//! answers of an instance the registry builds, and fails naming the plugin and the point. Adding a
//! plugin therefore means: implement the traits, return `Some(self)` from each matching `as_*`,
//! register the factory in `plugins::in_tree_registry`, and add one row (name, type) to that test's
//! table (the test fails for a registered plugin without a row).

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::action::Action;
use crate::features::FeatureGates;
use crate::framework::cycle_state::CycleState;
use crate::framework::status::Status;
use crate::snapshot::{NodeInfo, PodInfo, Snapshot};

/// The lowest score a Score plugin may return after normalization.
pub const MIN_NODE_SCORE: i64 = 0;
/// The highest score a Score plugin may return after normalization.
pub const MAX_NODE_SCORE: i64 = 100;

/// A plugin: a name, and the extension points it implements.
///
/// Each `as_*` method returns `Some(self)` for the points the plugin implements; the framework builds
/// its per-point lists from these, in the profile's order.
pub trait Plugin: Send + Sync {
    /// The plugin's registry name, e.g. "NodeResourcesFit".
    fn name(&self) -> &'static str;

    /// PreEnqueue.
    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        None
    }
    /// QueueSort.
    fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
        None
    }
    /// PreFilter.
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        None
    }
    /// Filter.
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        None
    }
    /// PostFilter.
    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        None
    }
    /// PreScore.
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        None
    }
    /// Score.
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        None
    }
    /// Reserve (and Unreserve).
    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        None
    }
    /// Permit.
    fn as_permit(&self) -> Option<&dyn PermitPlugin> {
        None
    }
    /// PreBind.
    fn as_pre_bind(&self) -> Option<&dyn PreBindPlugin> {
        None
    }
    /// Bind.
    fn as_bind(&self) -> Option<&dyn BindPlugin> {
        None
    }
    /// PostBind.
    fn as_post_bind(&self) -> Option<&dyn PostBindPlugin> {
        None
    }
}

/// PreEnqueue: a non-success status keeps the pod out of the active queue (it is "gated").
pub trait PreEnqueuePlugin: Send + Sync {
    /// Decides whether the pod may enter the active queue.
    fn pre_enqueue(&self, pod: &PodInfo) -> Status;
}

/// QueueSort: orders pending pods.
pub trait QueueSortPlugin: Send + Sync {
    /// True when `a` should be scheduled before `b`.
    fn less(&self, a: &PodInfo, b: &PodInfo) -> bool;
}

/// The node subset a PreFilter plugin narrows the search to. `None` node names mean "all nodes".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreFilterResult {
    /// Names of the nodes that may fit; `None` = all.
    pub node_names: Option<BTreeSet<String>>,
}

impl PreFilterResult {
    /// True when every node may fit.
    pub fn all_nodes(&self) -> bool {
        self.node_names.is_none()
    }

    /// Go's `Merge`: intersection, where `None` is the universe.
    pub fn merge(&self, other: Option<&PreFilterResult>) -> PreFilterResult {
        let Some(other) = other else { return self.clone() };
        match (&self.node_names, &other.node_names) {
            (None, None) => PreFilterResult { node_names: None },
            (Some(a), None) => PreFilterResult {
                node_names: Some(a.clone()),
            },
            (None, Some(b)) => PreFilterResult {
                node_names: Some(b.clone()),
            },
            (Some(a), Some(b)) => PreFilterResult {
                node_names: Some(a.intersection(b).cloned().collect()),
            },
        }
    }
}

/// AddPod/RemovePod: keep a PreFilter plugin's cycle state right when the evaluation adds a nominated pod
/// to a node, or removes a preemption victim from it.
pub trait PreFilterExtensions: Send + Sync {
    /// `pod_to_add` is being added to `node`.
    fn add_pod(
        &self,
        state: &mut CycleState,
        pod_to_schedule: &PodInfo,
        pod_to_add: &PodInfo,
        node: &NodeInfo,
    ) -> Status;
    /// `pod_to_remove` is being removed from `node`.
    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod_to_schedule: &PodInfo,
        pod_to_remove: &PodInfo,
        node: &NodeInfo,
    ) -> Status;
}

/// PreFilter: per-pod work done once per cycle; may reject the pod or narrow the node set.
pub trait PreFilterPlugin: Send + Sync {
    /// Runs before any Filter. `nodes` are all the nodes of the snapshot.
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status);

    /// The AddPod/RemovePod extensions, if the plugin keeps state that depends on other pods.
    fn pre_filter_extensions(&self) -> Option<&dyn PreFilterExtensions> {
        None
    }
}

/// Filter: does the pod fit on this node?
pub trait FilterPlugin: Send + Sync {
    /// Runs per node, in parallel across nodes.
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status;
}

/// The nodes' statuses after filtering: explicit per node, plus the status every node not listed has.
#[derive(Debug, Clone, Default)]
pub struct NodeToStatus {
    /// Explicitly recorded statuses, by node name.
    pub statuses: std::collections::BTreeMap<String, Status>,
    /// The status of every node not in `statuses` (Go's "absent nodes status"); Success = not recorded.
    pub absent: Status,
}

impl NodeToStatus {
    /// The status of a node (explicit, else the absent status).
    pub fn get(&self, node: &str) -> &Status {
        self.statuses.get(node).unwrap_or(&self.absent)
    }
}

/// How a PostFilter wants the pod's nominated node to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NominatingMode {
    /// Leave the pod's nominatedNodeName as it is.
    Noop,
    /// Set it to the result's node (possibly "", which clears it).
    Override,
}

/// A PostFilter's nomination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostFilterResult {
    /// The node to nominate ("" clears).
    pub nominated_node_name: String,
    /// Whether to apply it.
    pub mode: NominatingMode,
}

/// What a PostFilter plugin, and the preemption evaluator it calls, may ask of the framework running
/// it: the part of upstream's `framework.Handle` they use (its snapshot lister, its gates,
/// `RunFilterPluginsWithNominatedPods` and the PreFilter extensions for dry runs). The runtime's
/// `Framework` implements it; declaring it here, with the extension points, keeps the contracts below
/// the runtime, as upstream declares `Handle` in `interface.go`.
pub trait FrameworkHandle: Send + Sync {
    /// The snapshot the framework decides on.
    fn snapshot(&self) -> &Arc<Snapshot>;
    /// The feature gates its plugins were built with.
    fn features(&self) -> &FeatureGates;
    /// RunPreFilterExtensionAddPod: every PreFilter plugin's AddPod for `to_add` on `node`.
    fn run_pre_filter_extension_add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_add: &PodInfo,
        node: &NodeInfo,
    ) -> Status;
    /// RunPreFilterExtensionRemovePod: every PreFilter plugin's RemovePod for `to_remove` on `node`.
    fn run_pre_filter_extension_remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_remove: &PodInfo,
        node: &NodeInfo,
    ) -> Status;
    /// RunFilterPluginsWithNominatedPods: the filters with and without the nominated pods of at least
    /// the pod's priority; both must pass.
    fn run_filter_plugins_with_nominated_pods(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
    ) -> Status;
}

/// PostFilter: runs after the pod was found unschedulable (preemption lives here).
pub trait PostFilterPlugin: Send + Sync {
    /// `statuses` are the filter results of every node; `fwk` is the framework running the plugin.
    fn post_filter(
        &self,
        fwk: &dyn FrameworkHandle,
        state: &CycleState,
        pod: &PodInfo,
        statuses: &NodeToStatus,
    ) -> (Option<PostFilterResult>, Status);
}

/// PreScore: per-pod work before scoring the feasible nodes.
pub trait PreScorePlugin: Send + Sync {
    /// `nodes` are the feasible nodes.
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, nodes: &[Arc<NodeInfo>]) -> Status;
}

/// A node's score from one plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeScore {
    /// Node name.
    pub name: String,
    /// The score.
    pub score: i64,
}

/// Score: ranks the feasible nodes.
pub trait ScorePlugin: Send + Sync {
    /// The raw score of one node.
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> (i64, Status);

    /// Whether `normalize_score` does anything (the trace only shows normalized scores when it does).
    fn has_normalize_score(&self) -> bool {
        false
    }

    /// Rescales the raw scores of all feasible nodes into [MIN_NODE_SCORE, MAX_NODE_SCORE].
    fn normalize_score(&self, _state: &CycleState, _pod: &PodInfo, _scores: &mut [NodeScore]) -> Status {
        Status::success()
    }
}

/// Reserve/Unreserve: claim (and release) per-node resources the binding cycle will use.
pub trait ReservePlugin: Send + Sync {
    /// Reserves; a failure unreserves every reserve plugin in reverse order.
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, node_name: &str) -> Status;
    /// Undoes `reserve`; must be idempotent.
    fn unreserve(&self, state: &mut CycleState, pod: &PodInfo, node_name: &str);
}

/// Permit: approve, deny or delay the binding.
pub trait PermitPlugin: Send + Sync {
    /// Returns the decision and, for Wait, the timeout in seconds.
    fn permit(&self, state: &mut CycleState, pod: &PodInfo, node_name: &str) -> (Status, u64);
}

/// PreBind: the work before the Binding (e.g. volume binding), expressed as actions.
pub trait PreBindPlugin: Send + Sync {
    /// Returns the actions to perform, or a non-success status.
    fn pre_bind(&self, state: &CycleState, pod: &PodInfo, node_name: &str) -> (Vec<Action>, Status);
}

/// Bind: the Binding itself, as actions. Skip passes to the next bind plugin.
pub trait BindPlugin: Send + Sync {
    /// Returns the bind actions.
    fn bind(&self, state: &CycleState, pod: &PodInfo, node_name: &str) -> (Vec<Action>, Status);
}

/// PostBind: informational, after a successful bind.
pub trait PostBindPlugin: Send + Sync {
    /// Called after binding.
    fn post_bind(&self, state: &CycleState, pod: &PodInfo, node_name: &str);
}

/// The extension-point traits, in the framework's order, plus `PreFilterExtensions` (reached through
/// `PreFilterPlugin::pre_filter_extensions`, so it can be forgotten the same way).
#[cfg(test)]
pub(crate) const EXTENSION_TRAITS: [&str; 13] = [
    "PreEnqueuePlugin",
    "QueueSortPlugin",
    "PreFilterPlugin",
    "PreFilterExtensions",
    "FilterPlugin",
    "PostFilterPlugin",
    "PreScorePlugin",
    "ScorePlugin",
    "ReservePlugin",
    "PermitPlugin",
    "PreBindPlugin",
    "BindPlugin",
    "PostBindPlugin",
];

/// The traits of [`EXTENSION_TRAITS`] a plugin instance offers the framework (its `as_*` answers).
#[cfg(test)]
pub(crate) fn offered_extension_traits(plugin: &dyn Plugin) -> BTreeSet<&'static str> {
    let offered = [
        plugin.as_pre_enqueue().is_some(),
        plugin.as_queue_sort().is_some(),
        plugin.as_pre_filter().is_some(),
        plugin
            .as_pre_filter()
            .and_then(|p| p.pre_filter_extensions())
            .is_some(),
        plugin.as_filter().is_some(),
        plugin.as_post_filter().is_some(),
        plugin.as_pre_score().is_some(),
        plugin.as_score().is_some(),
        plugin.as_reserve().is_some(),
        plugin.as_permit().is_some(),
        plugin.as_pre_bind().is_some(),
        plugin.as_bind().is_some(),
        plugin.as_post_bind().is_some(),
    ];
    EXTENSION_TRAITS
        .into_iter()
        .zip(offered)
        .filter_map(|(name, yes)| yes.then_some(name))
        .collect()
}

/// The traits of [`EXTENSION_TRAITS`] the concrete type `$plugin` implements, as a
/// `BTreeSet<&'static str>` (see [`probe`]).
#[cfg(test)]
macro_rules! implemented_extension_traits {
    ($plugin:ty) => {{
        #[allow(unused_imports)]
        use $crate::framework::interface::probe::*;
        let probe = &Probe::<$plugin>::new();
        let implemented = [
            probe.pre_enqueue_plugin(),
            probe.queue_sort_plugin(),
            probe.pre_filter_plugin(),
            probe.pre_filter_extensions(),
            probe.filter_plugin(),
            probe.post_filter_plugin(),
            probe.pre_score_plugin(),
            probe.score_plugin(),
            probe.reserve_plugin(),
            probe.permit_plugin(),
            probe.pre_bind_plugin(),
            probe.bind_plugin(),
            probe.post_bind_plugin(),
        ];
        $crate::framework::interface::EXTENSION_TRAITS
            .into_iter()
            .zip(implemented)
            .filter_map(|(name, yes)| yes.then_some(name))
            .collect::<std::collections::BTreeSet<&'static str>>()
    }};
}
#[cfg(test)]
pub(crate) use implemented_extension_traits;

/// Compile-time answers to "does type `T` implement trait X?" for the extension traits, without
/// specialization: autoref-based dispatch. `(&Probe::<T>::new()).filter_plugin()` first looks for a
/// method whose receiver is `&Probe<T>`, which only `IsFilterPlugin` provides and only when
/// `T: FilterPlugin`; failing that, the compiler adds one more `&` and finds `NotFilterPlugin`'s
/// (`&&Probe<T>`), which answers false. It works on concrete types only, hence the macro
/// [`implemented_extension_traits!`](crate::framework::interface::implemented_extension_traits).
#[cfg(test)]
pub(crate) mod probe {
    use std::marker::PhantomData;

    use super::{
        BindPlugin, FilterPlugin, PermitPlugin, PostBindPlugin, PostFilterPlugin, PreBindPlugin,
        PreEnqueuePlugin, PreFilterExtensions, PreFilterPlugin, PreScorePlugin, QueueSortPlugin,
        ReservePlugin, ScorePlugin,
    };

    /// A stand-in for the plugin type `T`, which need not be constructible.
    pub(crate) struct Probe<T>(PhantomData<T>);

    impl<T> Probe<T> {
        /// The probe of `T`.
        pub(crate) fn new() -> Self {
            Probe(PhantomData)
        }
    }

    /// One pair of traits per extension trait: `$yes` answers true on `Probe<T>` when `T`
    /// implements it, `$no` answers false one autoref later.
    macro_rules! probes {
        ($($trait:ident => $yes:ident, $no:ident, $method:ident;)*) => {$(
            #[doc = concat!("Answers true: the type implements `", stringify!($trait), "`.")]
            // Never picked for a trait no plugin implements yet (Permit, PostBind).
            #[allow(dead_code)]
            pub(crate) trait $yes {
                #[doc = concat!("Whether the type implements `", stringify!($trait), "`.")]
                fn $method(&self) -> bool {
                    true
                }
            }
            impl<T: $trait> $yes for Probe<T> {}
            #[doc = concat!("Answers false: the fallback when the type lacks `", stringify!($trait), "`.")]
            pub(crate) trait $no {
                #[doc = concat!("Whether the type implements `", stringify!($trait), "`.")]
                fn $method(&self) -> bool {
                    false
                }
            }
            impl<T> $no for &Probe<T> {}
        )*};
    }

    probes! {
        PreEnqueuePlugin => IsPreEnqueuePlugin, NotPreEnqueuePlugin, pre_enqueue_plugin;
        QueueSortPlugin => IsQueueSortPlugin, NotQueueSortPlugin, queue_sort_plugin;
        PreFilterPlugin => IsPreFilterPlugin, NotPreFilterPlugin, pre_filter_plugin;
        PreFilterExtensions => IsPreFilterExtensions, NotPreFilterExtensions, pre_filter_extensions;
        FilterPlugin => IsFilterPlugin, NotFilterPlugin, filter_plugin;
        PostFilterPlugin => IsPostFilterPlugin, NotPostFilterPlugin, post_filter_plugin;
        PreScorePlugin => IsPreScorePlugin, NotPreScorePlugin, pre_score_plugin;
        ScorePlugin => IsScorePlugin, NotScorePlugin, score_plugin;
        ReservePlugin => IsReservePlugin, NotReservePlugin, reserve_plugin;
        PermitPlugin => IsPermitPlugin, NotPermitPlugin, permit_plugin;
        PreBindPlugin => IsPreBindPlugin, NotPreBindPlugin, pre_bind_plugin;
        BindPlugin => IsBindPlugin, NotBindPlugin, bind_plugin;
        PostBindPlugin => IsPostBindPlugin, NotPostBindPlugin, post_bind_plugin;
    }
}
