//! The framework runtime: instantiates a profile's plugins against a snapshot and runs a pod through the
//! extension points exactly as kube-scheduler's `frameworkImpl` does (Skip handling, PreFilter node
//! subsetting, filters with nominated pods, PostFilter accumulation, score range checks and weights).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;

use crate::features::FeatureGates;
use crate::framework::cycle_state::{CycleState, PluginSet};
use crate::framework::interface::*;
use crate::framework::post_filter::PostFilterFold;
use crate::framework::status::{Code, Status};
use crate::snapshot::{NodeInfo, PodInfo, Snapshot};

/// What plugins get at construction: the snapshot they decide on.
#[derive(Debug, Clone)]
pub struct Handle {
    /// The cluster view (Go's `SnapshotSharedLister` plus the informer listers plugins use).
    pub snapshot: Arc<Snapshot>,
}

/// Why a plugin could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    /// The plugin's args did not decode or failed validation.
    #[error("initializing plugin {plugin:?}: {message}")]
    InvalidArgs {
        /// The plugin.
        plugin: String,
        /// What is wrong.
        message: String,
    },
}

pub use crate::framework::registry::{PluginFactory, Registry};

/// Decodes a plugin's args (defaults when absent), with an error that names the plugin.
pub fn decode_args<T: serde::de::DeserializeOwned + Default>(
    plugin: &str,
    args: Option<&serde_json::Value>,
) -> Result<T, PluginError> {
    match args {
        None | Some(serde_json::Value::Null) => Ok(T::default()),
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| PluginError::InvalidArgs {
            plugin: plugin.to_string(),
            message: e.to_string(),
        }),
    }
}

/// The plugins of a profile per extension point, in order, with score weights and args; the output of
/// profile loading (defaults merged with the configuration).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResolvedProfile {
    /// `schedulerName`.
    pub scheduler_name: String,
    /// PreEnqueue plugins.
    pub pre_enqueue: Vec<String>,
    /// QueueSort plugins.
    pub queue_sort: Vec<String>,
    /// PreFilter plugins.
    pub pre_filter: Vec<String>,
    /// Filter plugins.
    pub filter: Vec<String>,
    /// PostFilter plugins.
    pub post_filter: Vec<String>,
    /// PreScore plugins.
    pub pre_score: Vec<String>,
    /// Score plugins with their weights.
    pub score: Vec<(String, i64)>,
    /// Reserve plugins.
    pub reserve: Vec<String>,
    /// Permit plugins.
    pub permit: Vec<String>,
    /// PreBind plugins.
    pub pre_bind: Vec<String>,
    /// Bind plugins.
    pub bind: Vec<String>,
    /// PostBind plugins.
    pub post_bind: Vec<String>,
    /// Args by plugin name.
    pub plugin_args: BTreeMap<String, serde_json::Value>,
    /// The profile's `percentageOfNodesToScore` (None = the global value, 0 = adaptive).
    pub percentage_of_nodes_to_score: Option<i32>,
}

/// Why a framework could not be built from a profile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameworkError {
    /// A plugin name the registry does not know.
    #[error("plugin {0:?} does not exist")]
    UnknownPlugin(String),
    /// A plugin listed at a point it does not implement.
    #[error("plugin {plugin:?} does not extend {point} plugin")]
    NotAnExtension {
        /// The plugin.
        plugin: String,
        /// The extension point.
        point: &'static str,
    },
    /// A plugin failed to initialize.
    #[error(transparent)]
    Plugin(#[from] PluginError),
    /// kube-scheduler requires exactly one queue-sort plugin and at least one bind plugin.
    #[error("{0}")]
    Invalid(String),
}

/// What one filter plugin said about a node in [`Framework::run_all_filter_plugins`].
#[derive(Debug, Clone, PartialEq)]
pub enum FilterVerdict {
    /// The plugin's status (stamped with the plugin name).
    Ran(Status),
    /// Its PreFilter returned Skip: kube-scheduler does not run its Filter for this pod.
    Skipped,
}

/// A filter result of one plugin on one node, for the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginTrace {
    /// The plugin.
    pub plugin: &'static str,
    /// Its status on this node.
    pub status: Status,
    /// Time spent, in nanoseconds.
    pub nanos: u64,
}

/// A node's filter outcome: its final status and what each plugin said.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeFilterTrace {
    /// Success, or the first rejecting plugin's status (stamped with the plugin name).
    pub status: Status,
    /// Every plugin that ran, in order.
    pub plugins: Vec<PluginTrace>,
}

/// One node's scores: per plugin (raw, normalized, weight, weighted) and the total.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePluginScores {
    /// Node name.
    pub name: String,
    /// Per plugin, in profile order.
    pub scores: Vec<PluginScore>,
    /// Σ weighted.
    pub total_score: i64,
}

/// One plugin's score on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginScore {
    /// The plugin.
    pub plugin: &'static str,
    /// Score before NormalizeScore.
    pub raw: i64,
    /// Score after NormalizeScore (= raw if the plugin does not normalize).
    pub normalized: i64,
    /// Weight in the profile.
    pub weight: i64,
    /// normalized × weight.
    pub weighted: i64,
}

/// A profile's plugins, instantiated on a snapshot.
pub struct Framework {
    /// The profile's `schedulerName`.
    pub profile_name: String,
    /// The handle plugins were built with.
    pub handle: Handle,
    /// The profile this framework was built from.
    pub profile: ResolvedProfile,
    /// The feature gates its plugins were built with (the registry's).
    features: FeatureGates,
    pre_enqueue: Vec<Arc<dyn Plugin>>,
    queue_sort: Vec<Arc<dyn Plugin>>,
    pre_filter: Vec<Arc<dyn Plugin>>,
    filter: Vec<Arc<dyn Plugin>>,
    post_filter: Vec<Arc<dyn Plugin>>,
    pre_score: Vec<Arc<dyn Plugin>>,
    score: Vec<(Arc<dyn Plugin>, i64)>,
    reserve: Vec<Arc<dyn Plugin>>,
    permit: Vec<Arc<dyn Plugin>>,
    pre_bind: Vec<Arc<dyn Plugin>>,
    bind: Vec<Arc<dyn Plugin>>,
    post_bind: Vec<Arc<dyn Plugin>>,
    /// The registry it was built from, to build the same profile over another snapshot
    /// ([`Framework::on_snapshot`]).
    registry: Registry,
}

impl std::fmt::Debug for Framework {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Framework")
            .field("profile", &self.profile)
            .finish_non_exhaustive()
    }
}

impl Framework {
    /// Instantiates every plugin the profile names (once each) and checks each extends its points.
    pub fn new(
        profile: &ResolvedProfile,
        registry: &Registry,
        snapshot: Arc<Snapshot>,
    ) -> Result<Self, FrameworkError> {
        let handle = Handle { snapshot };
        let mut instances: BTreeMap<String, Arc<dyn Plugin>> = BTreeMap::new();
        let mut instance = |name: &str| -> Result<Arc<dyn Plugin>, FrameworkError> {
            if let Some(p) = instances.get(name) {
                return Ok(p.clone());
            }
            let factory = registry
                .get(name)
                .ok_or_else(|| FrameworkError::UnknownPlugin(name.to_string()))?;
            let p = factory(profile.plugin_args.get(name), &handle, registry.features())?;
            instances.insert(name.to_string(), p.clone());
            Ok(p)
        };
        macro_rules! point {
            ($list:expr, $as:ident, $label:literal) => {{
                let mut out = Vec::new();
                for name in $list {
                    let p = instance(name)?;
                    if p.$as().is_none() {
                        return Err(FrameworkError::NotAnExtension {
                            plugin: name.clone(),
                            point: $label,
                        });
                    }
                    out.push(p);
                }
                out
            }};
        }
        let pre_enqueue = point!(&profile.pre_enqueue, as_pre_enqueue, "PreEnqueuePlugin");
        let queue_sort = point!(&profile.queue_sort, as_queue_sort, "QueueSortPlugin");
        let pre_filter = point!(&profile.pre_filter, as_pre_filter, "PreFilterPlugin");
        let filter = point!(&profile.filter, as_filter, "FilterPlugin");
        let post_filter = point!(&profile.post_filter, as_post_filter, "PostFilterPlugin");
        let pre_score = point!(&profile.pre_score, as_pre_score, "PreScorePlugin");
        let score_names: Vec<String> = profile.score.iter().map(|(n, _)| n.clone()).collect();
        let score_plugins = point!(&score_names, as_score, "ScorePlugin");
        let score = score_plugins
            .into_iter()
            .zip(profile.score.iter().map(|(_, w)| (*w).max(1)))
            .collect();
        let reserve = point!(&profile.reserve, as_reserve, "ReservePlugin");
        let permit = point!(&profile.permit, as_permit, "PermitPlugin");
        let pre_bind = point!(&profile.pre_bind, as_pre_bind, "PreBindPlugin");
        let bind = point!(&profile.bind, as_bind, "BindPlugin");
        let post_bind = point!(&profile.post_bind, as_post_bind, "PostBindPlugin");
        if queue_sort.len() != 1 {
            return Err(FrameworkError::Invalid(format!(
                "only one queue sort plugin required for profile with scheduler name {:?}, but got {}",
                profile.scheduler_name,
                queue_sort.len()
            )));
        }
        if bind.is_empty() {
            return Err(FrameworkError::Invalid(format!(
                "at least one bind plugin is needed for profile with scheduler name {:?}",
                profile.scheduler_name
            )));
        }
        Ok(Framework {
            profile_name: profile.scheduler_name.clone(),
            handle,
            profile: profile.clone(),
            features: *registry.features(),
            pre_enqueue,
            queue_sort,
            pre_filter,
            filter,
            post_filter,
            pre_score,
            score,
            reserve,
            permit,
            pre_bind,
            bind,
            post_bind,
            registry: registry.clone(),
        })
    }

    /// The same profile's plugins built over `snapshot` (the pod group cycle's view once it has
    /// placed some of the group's pods, as kube-scheduler's assumed pods change its cache).
    pub fn on_snapshot(&self, snapshot: Arc<Snapshot>) -> Result<Framework, FrameworkError> {
        Framework::new(&self.profile, &self.registry, snapshot)
    }

    /// The snapshot this framework decides on.
    pub fn snapshot(&self) -> &Arc<Snapshot> {
        &self.handle.snapshot
    }

    /// The feature gates its plugins were built with.
    pub fn features(&self) -> &FeatureGates {
        &self.features
    }

    /// True when the profile has Filter plugins.
    pub fn has_filter_plugins(&self) -> bool {
        !self.filter.is_empty()
    }

    /// True when the profile has PostFilter plugins.
    pub fn has_post_filter_plugins(&self) -> bool {
        !self.post_filter.is_empty()
    }

    /// True when the profile has Score plugins.
    pub fn has_score_plugins(&self) -> bool {
        !self.score.is_empty()
    }

    /// Names of the score plugins, in order, with weights.
    pub fn score_plugin_names(&self) -> Vec<(&'static str, i64)> {
        self.score.iter().map(|(p, w)| (p.name(), *w)).collect()
    }

    /// Runs PreEnqueue plugins; the first non-success gates the pod.
    pub fn run_pre_enqueue_plugins(&self, pod: &PodInfo) -> Status {
        for p in &self.pre_enqueue {
            let Some(pl) = p.as_pre_enqueue() else { continue };
            let s = pl.pre_enqueue(pod);
            if !s.is_success() {
                return s.with_plugin(p.name());
            }
        }
        Status::success()
    }

    /// QueueSort's `Less`.
    pub fn queue_sort_less(&self, a: &PodInfo, b: &PodInfo) -> bool {
        self.queue_sort
            .first()
            .and_then(|p| p.as_queue_sort())
            .is_some_and(|q| q.less(a, b))
    }

    /// RunPreFilterPlugins: returns the merged result, the status, and the plugins that narrowed nodes.
    pub fn run_pre_filter_plugins(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
    ) -> (Option<PreFilterResult>, Status, BTreeSet<&'static str>) {
        let nodes = self.handle.snapshot.nodes();
        let mut result: Option<PreFilterResult> = None;
        let mut plugins_with_nodes = BTreeSet::new();
        let mut return_status = Status::success();
        let mut skip = PluginSet::default();
        for p in &self.pre_filter {
            let Some(pl) = p.as_pre_filter() else { continue };
            let (r, s) = pl.pre_filter(state, pod, nodes);
            if s.is_skip() {
                skip.insert(p.name());
                continue;
            }
            if !s.is_success() {
                let s = s.with_plugin(p.name());
                match s.code() {
                    Code::UnschedulableAndUnresolvable => {
                        state.skip_filter_plugins = skip;
                        return (None, s, BTreeSet::new());
                    }
                    Code::Unschedulable => {
                        return_status = s;
                        continue;
                    }
                    _ => {
                        state.skip_filter_plugins = skip;
                        return (
                            None,
                            Status::error(format!(
                                "running PreFilter plugin {:?}: {}",
                                p.name(),
                                s.message()
                            ))
                            .with_plugin(p.name()),
                            BTreeSet::new(),
                        );
                    }
                }
            }
            let r = r.unwrap_or_default();
            if !r.all_nodes() {
                plugins_with_nodes.insert(p.name());
            }
            let merged = match &result {
                None => r,
                Some(prev) => prev.merge(Some(&r)),
            };
            if merged.node_names.as_ref().is_some_and(|n| n.is_empty()) {
                let names: Vec<&str> = plugins_with_nodes.iter().copied().collect();
                let msg = if names.len() == 1 {
                    format!("node(s) didn't satisfy plugin {}", names[0])
                } else {
                    format!(
                        "node(s) didn't satisfy plugin(s) [{}] simultaneously",
                        names.join(" ")
                    )
                };
                state.skip_filter_plugins = skip;
                return (Some(merged), Status::unresolvable(msg), plugins_with_nodes);
            }
            result = Some(merged);
        }
        state.skip_filter_plugins = skip;
        (result, return_status, plugins_with_nodes)
    }

    fn run_pre_filter_extension(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        other: &PodInfo,
        node: &NodeInfo,
        add: bool,
    ) -> Status {
        for p in &self.pre_filter {
            let Some(ext) = p.as_pre_filter().and_then(|pl| pl.pre_filter_extensions()) else {
                continue;
            };
            if state.skip_filter_plugins.contains(p.name()) {
                continue;
            }
            let s = if add {
                ext.add_pod(state, pod, other, node)
            } else {
                ext.remove_pod(state, pod, other, node)
            };
            if !s.is_success() {
                let op = if add { "AddPod" } else { "RemovePod" };
                return Status::error(format!(
                    "running {op} on PreFilter plugin {:?}: {}",
                    p.name(),
                    s.message()
                ));
            }
        }
        Status::success()
    }

    /// RunFilterPlugins: stops at the first non-success; non-rejection codes become Errors.
    pub fn run_filter_plugins(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        self.run_filter_plugins_traced(state, pod, node, None)
    }

    /// RunFilterPlugins, recording each plugin's verdict and duration when `trace` is given.
    pub fn run_filter_plugins_traced(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        mut trace: Option<&mut Vec<PluginTrace>>,
    ) -> Status {
        for p in &self.filter {
            if state.skip_filter_plugins.contains(p.name()) {
                continue;
            }
            let Some(pl) = p.as_filter() else { continue };
            let start = trace.as_ref().map(|_| Instant::now());
            let s = pl.filter(state, pod, node);
            if let (Some(t), Some(start)) = (trace.as_deref_mut(), start) {
                t.push(PluginTrace {
                    plugin: p.name(),
                    status: s.clone().with_plugin(p.name()),
                    nanos: start.elapsed().as_nanos() as u64,
                });
            }
            if !s.is_success() {
                let s = if s.is_rejected() {
                    s
                } else {
                    Status::error(format!("running {:?} filter plugin: {}", p.name(), s.message()))
                };
                return s.with_plugin(p.name());
            }
        }
        Status::success()
    }

    /// Every filter plugin's verdict on `node`, in profile order, past the first rejection: for
    /// diagnostics (kube-scheduler, and [`Framework::run_filter_plugins`], stop at the first plugin that
    /// rejects a node, which hides whether fixing that one reason would be enough). `state` must be the
    /// cycle state after PreFilter succeeded. Plugins whose PreFilter returned Skip are reported as
    /// [`FilterVerdict::Skipped`]. Pods nominated to the node are not added (kube-scheduler's own verdict
    /// accounts for them).
    pub fn run_all_filter_plugins(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
    ) -> Vec<(&'static str, FilterVerdict)> {
        self.filter
            .iter()
            .filter_map(|p| {
                let filter = p.as_filter()?;
                if state.skip_filter_plugins.contains(p.name()) {
                    return Some((p.name(), FilterVerdict::Skipped));
                }
                Some((
                    p.name(),
                    FilterVerdict::Ran(filter.filter(state, pod, node).with_plugin(p.name())),
                ))
            })
            .collect()
    }

    /// Pods nominated to `node` with priority ≥ the pod's (excluding the pod itself).
    pub fn nominated_pods_for(&self, pod: &PodInfo, node: &str) -> Vec<Arc<PodInfo>> {
        self.handle
            .snapshot
            .nominated_pods
            .get(node)
            .into_iter()
            .flatten()
            .filter(|n| n.priority >= pod.priority && !is_same_pod(n, pod))
            .cloned()
            .collect()
    }

    /// RunFilterPluginsWithNominatedPods: first with higher-or-equal-priority nominated pods added, then,
    /// if that passed and any were added, without them; both must pass.
    pub fn run_filter_plugins_with_nominated_pods(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        trace: Option<&mut Vec<PluginTrace>>,
    ) -> Status {
        let nominated = self.nominated_pods_for(pod, node.name());
        if nominated.is_empty() {
            return self.run_filter_plugins_traced(state, pod, node, trace);
        }
        let mut node_with = node.clone();
        let mut state_with = state.clone();
        for n in &nominated {
            node_with.add_pod(n.clone());
            let s = self.run_pre_filter_extension_add_pod(&mut state_with, pod, n, &node_with);
            if !s.is_success() {
                return s;
            }
        }
        let mut trace = trace;
        let first = self.run_filter_plugins_traced(&state_with, pod, &node_with, trace.as_deref_mut());
        if !first.is_success() {
            return first;
        }
        if let Some(t) = trace.as_deref_mut() {
            t.clear();
        }
        self.run_filter_plugins_traced(state, pod, node, trace)
    }

    /// RunPostFilterPlugins: until the first Success, UAU or Error; Unschedulable reasons accumulate.
    pub fn run_post_filter_plugins(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        statuses: &NodeToStatus,
    ) -> (Option<PostFilterResult>, Status) {
        self.run_post_filter_plugins_with(state, pod, statuses, None)
    }

    /// RunPostFilterPlugins with the outcome of the plugin `given` names taken as given rather than
    /// run (a preemption dry run, perhaps on a node the user chose), or appended last when the
    /// profile lacks that plugin: the PostFilter status kube-scheduler would end with, the words of
    /// the plugins before it (DynamicResources' `no new claims to deallocate`) included.
    pub fn run_post_filter_plugins_with(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        statuses: &NodeToStatus,
        mut given: Option<(&'static str, (Option<PostFilterResult>, Status))>,
    ) -> (Option<PostFilterResult>, Status) {
        let mut fold = PostFilterFold::default();
        for p in &self.post_filter {
            let Some(pl) = p.as_post_filter() else { continue };
            let outcome = match given.take_if(|(name, _)| *name == p.name()) {
                Some((_, outcome)) => outcome,
                None => pl.post_filter(self, state, pod, statuses),
            };
            if let Some(done) = fold.add(p.name(), outcome) {
                return done;
            }
        }
        if let Some((name, outcome)) = given
            && let Some(done) = fold.add(name, outcome)
        {
            return done;
        }
        fold.finish()
    }

    /// RunPreScorePlugins: Skip marks the coupled Score plugin skipped; other non-success is an Error.
    pub fn run_pre_score_plugins(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> Status {
        let mut skip = PluginSet::default();
        for p in &self.pre_score {
            let Some(pl) = p.as_pre_score() else { continue };
            let s = pl.pre_score(state, pod, nodes);
            if s.is_skip() {
                skip.insert(p.name());
                continue;
            }
            if !s.is_success() {
                state.skip_score_plugins = skip;
                return Status::error(format!("running PreScore plugin {:?}: {}", p.name(), s.message()))
                    .with_plugin(p.name());
            }
        }
        state.skip_score_plugins = skip;
        Status::success()
    }

    /// RunScorePlugins: raw scores in parallel per node, NormalizeScore per plugin, range check, weights.
    pub fn run_score_plugins(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> Result<Vec<NodePluginScores>, Status> {
        let plugins: Vec<(&Arc<dyn Plugin>, i64)> = self
            .score
            .iter()
            .filter(|(p, _)| !state.skip_score_plugins.contains(p.name()))
            .map(|(p, w)| (p, *w))
            .collect();
        let raw: Vec<Result<Vec<i64>, Status>> = nodes
            .par_iter()
            .map(|node| {
                plugins
                    .iter()
                    .map(|(p, _)| {
                        let pl = p.as_score().expect("score plugin checked at construction");
                        let (score, s) = pl.score(state, pod, node);
                        if s.is_success() {
                            Ok(score)
                        } else {
                            Err(Status::error(format!(
                                "running Score plugins: plugin {:?} failed with: {}",
                                p.name(),
                                s.message()
                            )))
                        }
                    })
                    .collect()
            })
            .collect();
        let raw: Vec<Vec<i64>> = raw.into_iter().collect::<Result<_, _>>()?;
        let mut out: Vec<NodePluginScores> = nodes
            .iter()
            .map(|n| NodePluginScores {
                name: n.name().to_string(),
                scores: Vec::with_capacity(plugins.len()),
                total_score: 0,
            })
            .collect();
        for (i, (p, weight)) in plugins.iter().enumerate() {
            let pl = p.as_score().expect("score plugin checked at construction");
            // Only NormalizeScore reads the node names: other plugins' scores are used as they are.
            let normalized: Vec<i64> = if pl.has_normalize_score() {
                let mut list: Vec<NodeScore> = nodes
                    .iter()
                    .zip(&raw)
                    .map(|(n, r)| NodeScore {
                        name: n.name().to_string(),
                        score: r[i],
                    })
                    .collect();
                let s = pl.normalize_score(state, pod, &mut list);
                if !s.is_success() {
                    return Err(Status::error(format!(
                        "running Normalize on Score plugins: plugin {:?} failed with: {}",
                        p.name(),
                        s.message()
                    )));
                }
                list.into_iter().map(|ns| ns.score).collect()
            } else {
                raw.iter().map(|r| r[i]).collect()
            };
            for (j, &score) in normalized.iter().enumerate() {
                if !(MIN_NODE_SCORE..=MAX_NODE_SCORE).contains(&score) {
                    return Err(Status::error(format!(
                        "applying score defaultWeights on Score plugins: plugin {:?} returns an invalid score {}, it should in the range of [{}, {}] after normalizing",
                        p.name(),
                        score,
                        MIN_NODE_SCORE,
                        MAX_NODE_SCORE
                    )));
                }
                let weighted = score * weight;
                out[j].scores.push(PluginScore {
                    plugin: p.name(),
                    raw: raw[j][i],
                    normalized: score,
                    weight: *weight,
                    weighted,
                });
                out[j].total_score += weighted;
            }
        }
        Ok(out)
    }

    /// RunReservePluginsReserve: on the first failure, every reserve plugin is unreserved in reverse.
    pub fn run_reserve_plugins(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        for p in &self.reserve {
            let Some(pl) = p.as_reserve() else { continue };
            let s = pl.reserve(state, pod, node);
            if !s.is_success() {
                self.run_unreserve_plugins(state, pod, node);
                if s.is_rejected() {
                    return s.with_plugin(p.name());
                }
                return Status::error(format!("running Reserve plugin {:?}: {}", p.name(), s.message()))
                    .with_plugin(p.name());
            }
        }
        Status::success()
    }

    /// RunReservePluginsUnreserve, in reverse order.
    pub fn run_unreserve_plugins(&self, state: &mut CycleState, pod: &PodInfo, node: &str) {
        for p in self.reserve.iter().rev() {
            if let Some(pl) = p.as_reserve() {
                pl.unreserve(state, pod, node);
            }
        }
    }

    /// RunPermitPlugins: the first rejection stops; Wait is reported with the longest timeout.
    pub fn run_permit_plugins(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        let mut waiting = false;
        for p in &self.permit {
            let Some(pl) = p.as_permit() else { continue };
            let (s, _timeout) = pl.permit(state, pod, node);
            if s.is_rejected() {
                return s.with_plugin(p.name());
            }
            if s.code() == Code::Wait {
                waiting = true;
            } else if !s.is_success() {
                return Status::error(format!("running Permit plugin {:?}: {}", p.name(), s.message()))
                    .with_plugin(p.name());
            }
        }
        if waiting {
            Status::new(Code::Wait, "one or more plugins asked to wait")
        } else {
            Status::success()
        }
    }

    /// RunPreBindPlugins: the actions of every PreBind plugin, in order, until the first failure.
    pub fn run_pre_bind_plugins(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &str,
    ) -> (Vec<crate::action::Action>, Status) {
        let mut actions = Vec::new();
        for p in &self.pre_bind {
            let Some(pl) = p.as_pre_bind() else { continue };
            let (a, s) = pl.pre_bind(state, pod, node);
            if s.is_skip() {
                continue;
            }
            if !s.is_success() {
                if s.is_rejected() {
                    return (actions, s.with_plugin(p.name()));
                }
                return (
                    actions,
                    Status::error(format!("running PreBind plugin {:?}: {}", p.name(), s.message()))
                        .with_plugin(p.name()),
                );
            }
            actions.extend(a);
        }
        (actions, Status::success())
    }

    /// RunBindPlugins: the first non-Skip bind plugin decides.
    pub fn run_bind_plugins(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &str,
    ) -> (Vec<crate::action::Action>, Status) {
        for p in &self.bind {
            let Some(pl) = p.as_bind() else { continue };
            let (a, s) = pl.bind(state, pod, node);
            if s.is_skip() {
                continue;
            }
            return (
                a,
                if s.is_success() {
                    s
                } else {
                    s.with_plugin(p.name())
                },
            );
        }
        (Vec::new(), Status::skip())
    }

    /// RunPostBindPlugins.
    pub fn run_post_bind_plugins(&self, state: &CycleState, pod: &PodInfo, node: &str) {
        for p in &self.post_bind {
            if let Some(pl) = p.as_post_bind() {
                pl.post_bind(state, pod, node);
            }
        }
    }
}

/// Whether two PodInfos are the same pod: same UID when both have one (kube-scheduler's test), or the
/// same namespace/name. Pods read from files or `-f` often have no UID, and two of them must not be
/// taken for one another just because both UIDs are empty.
fn is_same_pod(a: &PodInfo, b: &PodInfo) -> bool {
    (!a.uid().is_empty() && a.uid() == b.uid()) || (a.namespace() == b.namespace() && a.name() == b.name())
}

/// The handle PostFilter plugins and preemption get: the PreFilter extensions live only here (every
/// caller runs them through the handle); the other methods are the inherent ones.
impl FrameworkHandle for Framework {
    fn snapshot(&self) -> &Arc<Snapshot> {
        Framework::snapshot(self)
    }

    fn features(&self) -> &FeatureGates {
        Framework::features(self)
    }

    fn run_pre_filter_extension_add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_add: &PodInfo,
        node: &NodeInfo,
    ) -> Status {
        self.run_pre_filter_extension(state, pod, to_add, node, true)
    }

    fn run_pre_filter_extension_remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_remove: &PodInfo,
        node: &NodeInfo,
    ) -> Status {
        self.run_pre_filter_extension(state, pod, to_remove, node, false)
    }

    fn run_filter_plugins_with_nominated_pods(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
    ) -> Status {
        Framework::run_filter_plugins_with_nominated_pods(self, state, pod, node, None)
    }
}
