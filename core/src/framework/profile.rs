//! Profiles: the default profile of the pinned release (v1.37.1: plugin order, weights, feature-gated
//! plugins), and KubeSchedulerConfiguration v1 loading with kube-scheduler's merge rules — per-point
//! enabled/disabled merged into the defaults (`mergePluginSet`), then MultiPoint expanded into every
//! point a plugin implements (`expandMultiPointPlugins`), score weights from Score first, then MultiPoint.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::framework::interface::Plugin;
use crate::framework::queue_sort_validation::validate_common_queue_sort;
use crate::framework::runtime::{Handle, Registry, ResolvedProfile};
use crate::snapshot::Snapshot;

// The name is the API server's default (pod defaulting), so it lives with admission.
pub use crate::admission::DEFAULT_SCHEDULER_NAME;
/// The API version of KubeSchedulerConfiguration this engine reads.
pub const API_VERSION: &str = "kubescheduler.config.k8s.io/v1";
/// `MaxTotalScore`: the sum of weight × 100 over score plugins may not exceed it.
const MAX_TOTAL_SCORE: i64 = i64::MAX;

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid YAML/JSON for KubeSchedulerConfiguration.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// The decoder's message (with line and column).
        message: String,
    },
    /// Semantically invalid configuration (unknown plugin, bad args, duplicate profile, ...).
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// `Plugin` reference in a PluginSet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginRef {
    /// Plugin name ("*" in `disabled` means all).
    pub name: String,
    /// Score weight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

/// Enabled/disabled plugins of one extension point.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginSet {
    /// Enabled plugins (after the defaults, or replacing a default in place).
    #[serde(default)]
    pub enabled: Vec<PluginRef>,
    /// Disabled default plugins.
    #[serde(default)]
    pub disabled: Vec<PluginRef>,
}

/// The `plugins` of a profile.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(missing_docs)]
pub struct Plugins {
    #[serde(default)]
    pub pre_enqueue: PluginSet,
    #[serde(default)]
    pub queue_sort: PluginSet,
    #[serde(default)]
    pub pre_filter: PluginSet,
    #[serde(default)]
    pub filter: PluginSet,
    #[serde(default)]
    pub post_filter: PluginSet,
    #[serde(default)]
    pub pre_score: PluginSet,
    #[serde(default)]
    pub score: PluginSet,
    #[serde(default)]
    pub reserve: PluginSet,
    #[serde(default)]
    pub permit: PluginSet,
    #[serde(default)]
    pub pre_bind: PluginSet,
    #[serde(default)]
    pub bind: PluginSet,
    #[serde(default)]
    pub post_bind: PluginSet,
    #[serde(default)]
    pub multi_point: PluginSet,
}

/// A `pluginConfig` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginConfig {
    /// Plugin name.
    pub name: String,
    /// Args object (e.g. `NodeResourcesFitArgs`).
    #[serde(default)]
    pub args: serde_json::Value,
}

/// A `KubeSchedulerProfile`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeSchedulerProfile {
    /// `schedulerName` (defaults to default-scheduler when there is exactly one profile).
    #[serde(default)]
    pub scheduler_name: Option<String>,
    /// Profile-level `percentageOfNodesToScore`.
    #[serde(default)]
    pub percentage_of_nodes_to_score: Option<i32>,
    /// Plugin sets.
    #[serde(default)]
    pub plugins: Option<Plugins>,
    /// Plugin args.
    #[serde(default)]
    pub plugin_config: Vec<PluginConfig>,
}

/// The parts of `KubeSchedulerConfiguration` that affect decisions (other fields are accepted and ignored).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeSchedulerConfiguration {
    /// Must be kubescheduler.config.k8s.io/v1.
    #[serde(default)]
    pub api_version: String,
    /// Must be KubeSchedulerConfiguration.
    #[serde(default)]
    pub kind: String,
    /// Global `percentageOfNodesToScore` (0 = adaptive).
    #[serde(default)]
    pub percentage_of_nodes_to_score: Option<i32>,
    /// Profiles.
    #[serde(default)]
    pub profiles: Vec<KubeSchedulerProfile>,
}

/// The profiles a scheduler runs, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedulerConfig {
    /// One per schedulerName.
    pub profiles: Vec<ResolvedProfile>,
    /// The global percentageOfNodesToScore (0 = adaptive).
    pub percentage_of_nodes_to_score: i32,
}

impl SchedulerConfig {
    /// The profile for a pod's `spec.schedulerName`.
    pub fn profile(&self, scheduler_name: &str) -> Option<&ResolvedProfile> {
        self.profiles.iter().find(|p| p.scheduler_name == scheduler_name)
    }

    /// The default configuration of the pinned release: one profile, default-scheduler.
    pub fn default_config(registry: &Registry) -> Self {
        resolve(&KubeSchedulerConfiguration::default(), registry, "<default>")
            .expect("the default profile is valid for the in-tree registry")
    }

    /// Loads a KubeSchedulerConfiguration file (YAML or JSON).
    pub fn from_file(path: &Path, registry: &Registry) -> Result<Self, ProfileError> {
        let display = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Read {
            path: display.clone(),
            source,
        })?;
        Self::from_str(&text, &display, registry)
    }

    /// Parses a KubeSchedulerConfiguration document; `origin` names it in errors.
    pub fn from_str(text: &str, origin: &str, registry: &Registry) -> Result<Self, ProfileError> {
        // The snapshot loader's guard: the parser's time is quadratic in flow nesting.
        crate::snapshot::load::check_flow_depth(text.as_bytes()).map_err(|e| ProfileError::Parse {
            path: origin.to_string(),
            message: e.with_position(),
        })?;
        let config: KubeSchedulerConfiguration =
            yaml_serde::from_str(text).map_err(|e| ProfileError::Parse {
                path: origin.to_string(),
                message: e.to_string(),
            })?;
        let invalid = |message: String| ProfileError::Invalid {
            path: origin.to_string(),
            message,
        };
        if config.api_version != API_VERSION {
            return Err(invalid(format!(
                "apiVersion {:?} is not supported; use {API_VERSION:?}",
                config.api_version
            )));
        }
        if config.kind != "KubeSchedulerConfiguration" {
            return Err(invalid(format!(
                "kind {:?} is not KubeSchedulerConfiguration",
                config.kind
            )));
        }
        resolve(&config, registry, origin)
    }
}

/// `mergePluginSet`: custom disabled removes defaults ("*" all); a custom enabled plugin that is also a
/// default replaces it in place; the other custom plugins are appended.
fn merge_plugin_set(defaults: &PluginSet, custom: &PluginSet) -> PluginSet {
    let mut disabled: Vec<PluginRef> = custom
        .disabled
        .iter()
        .map(|p| PluginRef {
            name: p.name.clone(),
            weight: None,
        })
        .collect();
    disabled.extend(defaults.disabled.iter().map(|p| PluginRef {
        name: p.name.clone(),
        weight: None,
    }));
    let disabled_names: BTreeSet<&str> = disabled.iter().map(|p| p.name.as_str()).collect();
    let mut replaced = BTreeSet::new();
    let mut enabled = Vec::new();
    if !disabled_names.contains("*") {
        for d in &defaults.enabled {
            if disabled_names.contains(d.name.as_str()) {
                continue;
            }
            match custom.enabled.iter().position(|c| c.name == d.name) {
                Some(i) => {
                    replaced.insert(i);
                    enabled.push(custom.enabled[i].clone());
                }
                None => enabled.push(d.clone()),
            }
        }
    }
    for (i, c) in custom.enabled.iter().enumerate() {
        if !replaced.contains(&i) {
            enabled.push(c.clone());
        }
    }
    PluginSet { enabled, disabled }
}

/// The extension points, in the order the framework lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Point {
    PreEnqueue,
    QueueSort,
    PreFilter,
    Filter,
    PostFilter,
    PreScore,
    Score,
    Reserve,
    Permit,
    PreBind,
    Bind,
    PostBind,
}

impl Point {
    const ALL: [Point; 12] = [
        Point::PreEnqueue,
        Point::QueueSort,
        Point::PreFilter,
        Point::Filter,
        Point::PostFilter,
        Point::PreScore,
        Point::Score,
        Point::Reserve,
        Point::Permit,
        Point::PreBind,
        Point::Bind,
        Point::PostBind,
    ];

    /// The order kube-scheduler's `getExtensionPoints` lists them (the order its framework
    /// checks a profile's lists in).
    const UPSTREAM_ORDER: [Point; 12] = [
        Point::PreFilter,
        Point::Filter,
        Point::PostFilter,
        Point::Reserve,
        Point::PreScore,
        Point::Score,
        Point::PreBind,
        Point::Bind,
        Point::PostBind,
        Point::Permit,
        Point::PreEnqueue,
        Point::QueueSort,
    ];

    fn type_name(self) -> &'static str {
        match self {
            Point::PreEnqueue => "PreEnqueuePlugin",
            Point::QueueSort => "QueueSortPlugin",
            Point::PreFilter => "PreFilterPlugin",
            Point::Filter => "FilterPlugin",
            Point::PostFilter => "PostFilterPlugin",
            Point::PreScore => "PreScorePlugin",
            Point::Score => "ScorePlugin",
            Point::Reserve => "ReservePlugin",
            Point::Permit => "PermitPlugin",
            Point::PreBind => "PreBindPlugin",
            Point::Bind => "BindPlugin",
            Point::PostBind => "PostBindPlugin",
        }
    }

    fn set(self, p: &Plugins) -> &PluginSet {
        match self {
            Point::PreEnqueue => &p.pre_enqueue,
            Point::QueueSort => &p.queue_sort,
            Point::PreFilter => &p.pre_filter,
            Point::Filter => &p.filter,
            Point::PostFilter => &p.post_filter,
            Point::PreScore => &p.pre_score,
            Point::Score => &p.score,
            Point::Reserve => &p.reserve,
            Point::Permit => &p.permit,
            Point::PreBind => &p.pre_bind,
            Point::Bind => &p.bind,
            Point::PostBind => &p.post_bind,
        }
    }

    fn implemented_by(self, p: &dyn Plugin) -> bool {
        match self {
            Point::PreEnqueue => p.as_pre_enqueue().is_some(),
            Point::QueueSort => p.as_queue_sort().is_some(),
            Point::PreFilter => p.as_pre_filter().is_some(),
            Point::Filter => p.as_filter().is_some(),
            Point::PostFilter => p.as_post_filter().is_some(),
            Point::PreScore => p.as_pre_score().is_some(),
            Point::Score => p.as_score().is_some(),
            Point::Reserve => p.as_reserve().is_some(),
            Point::Permit => p.as_permit().is_some(),
            Point::PreBind => p.as_pre_bind().is_some(),
            Point::Bind => p.as_bind().is_some(),
            Point::PostBind => p.as_post_bind().is_some(),
        }
    }
}

/// Resolves every profile of a configuration against v1.37.1's default plugins.
pub fn resolve(
    config: &KubeSchedulerConfiguration,
    registry: &Registry,
    origin: &str,
) -> Result<SchedulerConfig, ProfileError> {
    resolve_with_defaults(config, registry, origin, registry.default_multi_point())
}

/// Resolves every profile of a configuration against the given default MultiPoint plugins.
pub fn resolve_with_defaults(
    config: &KubeSchedulerConfiguration,
    registry: &Registry,
    origin: &str,
    default_plugins: &[PluginRef],
) -> Result<SchedulerConfig, ProfileError> {
    let invalid = |message: String| ProfileError::Invalid {
        path: origin.to_string(),
        message,
    };
    let mut profiles_in = config.profiles.clone();
    if profiles_in.is_empty() {
        profiles_in.push(KubeSchedulerProfile::default());
    }
    if profiles_in.len() == 1 && profiles_in[0].scheduler_name.is_none() {
        profiles_in[0].scheduler_name = Some(DEFAULT_SCHEDULER_NAME.to_string());
    }
    let global = config.percentage_of_nodes_to_score.unwrap_or(0);
    if !(0..=100).contains(&global) {
        return Err(invalid(format!(
            "percentageOfNodesToScore: Invalid value: {global}: not in valid range [0-100]"
        )));
    }
    let mut seen = BTreeSet::new();
    for (i, p) in profiles_in.iter().enumerate() {
        let name = p.scheduler_name.clone().unwrap_or_default();
        if name.is_empty() {
            return Err(invalid(format!("profiles[{i}].schedulerName: Required value")));
        }
        if !seen.insert(name.clone()) {
            return Err(invalid(format!(
                "profiles[{i}].schedulerName: Duplicate value: {name:?}"
            )));
        }
        validate_profile(p).map_err(|m| invalid(format!("profiles[{i}].{m}")))?;
    }
    // Validation (above and here) comes before any profile is built, as in kube-scheduler.
    let queue_sort_errors = validate_common_queue_sort(&profiles_in, &registry.features().changes);
    if !queue_sort_errors.is_empty() {
        return Err(invalid(match queue_sort_errors.len() {
            1 => queue_sort_errors.join(""),
            _ => format!("[{}]", queue_sort_errors.join(", ")),
        }));
    }
    let mut profiles = Vec::new();
    for p in &profiles_in {
        let name = p.scheduler_name.clone().unwrap_or_default();
        if let Some(refusal) = unknown_to_release(p, registry) {
            // kube-scheduler's profile.go wraps the framework's error with the profile's name, and
            // scheduler.go's New with what it was doing.
            return Err(invalid(format!(
                "initializing profiles: creating profile for scheduler name {name}: {refusal}"
            )));
        }
        // kube-scheduler's own refusal first: a plugin it lacks, then one only the engine lacks.
        if let Some(refusal) = not_implemented(p, registry) {
            return Err(invalid(format!("profile {name}: {refusal}")));
        }
        profiles.push(
            resolve_profile(p, &name, registry, default_plugins)
                // kube-scheduler's profile.go wraps the framework's error with the profile's
                // name, and scheduler.go's New with what it was doing.
                .map_err(|m| {
                    invalid(format!(
                        "initializing profiles: creating profile for scheduler name {name}: {m}"
                    ))
                })?,
        );
    }
    Ok(SchedulerConfig {
        profiles,
        percentage_of_nodes_to_score: global,
    })
}

/// The first plugin the profile enables that the release's kube-scheduler does not register, in
/// its framework's words: `NewFramework` checks the explicit extension points first, in
/// `getExtensionPoints` order, then the MultiPoint list (whose first expansion is PreFilter).
/// Defaults are the release's own plugins, so only the profile's own lists are looked at.
fn unknown_to_release(profile: &KubeSchedulerProfile, registry: &Registry) -> Option<String> {
    enabled_in_upstream_order(profile)
        .find(|(_, name)| !registry.known_to_release(name))
        .map(|(point, name)| format!("{point} {name:?} does not exist"))
}

/// The first plugin the profile enables that the release's kube-scheduler registers but the
/// engine does not implement: kube-scheduler would accept the profile, the engine cannot
/// evaluate it, and says so rather than "does not exist".
fn not_implemented(profile: &KubeSchedulerProfile, registry: &Registry) -> Option<String> {
    enabled_in_upstream_order(profile)
        .find(|(_, name)| registry.listed_by_release(name) && registry.get(name).is_none())
        .map(|(_, name)| {
            format!(
                "kubectl-sched does not implement plugin {name:?} of kube-scheduler {}",
                registry.features().version
            )
        })
}

/// The plugins a profile enables, as `NewFramework` checks them: the explicit extension points
/// first, in `getExtensionPoints` order, then the MultiPoint list (whose first expansion is
/// PreFilter); each with the point it is checked at.
fn enabled_in_upstream_order(
    profile: &KubeSchedulerProfile,
) -> impl Iterator<Item = (&'static str, &String)> {
    let plugins = profile.plugins.as_ref();
    let explicit = Point::UPSTREAM_ORDER.iter().flat_map(move |point| {
        plugins
            .into_iter()
            .flat_map(move |plugins| point.set(plugins).enabled.iter())
            .map(move |p| (point.type_name(), &p.name))
    });
    let multi_point = plugins
        .into_iter()
        .flat_map(|plugins| plugins.multi_point.enabled.iter())
        .map(|p| (Point::PreFilter.type_name(), &p.name));
    explicit.chain(multi_point)
}

/// `validateKubeSchedulerProfile`'s checks of one profile the engine makes (the scheduler name is
/// checked with the others'): field errors relative to `profiles[i]`.
fn validate_profile(profile: &KubeSchedulerProfile) -> Result<(), String> {
    if let Some(p) = profile.percentage_of_nodes_to_score
        && !(0..=100).contains(&p)
    {
        return Err(format!(
            "percentageOfNodesToScore: Invalid value: {p}: not in valid range [0-100]"
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, c) in profile.plugin_config.iter().enumerate() {
        if !seen.insert(c.name.as_str()) {
            return Err(format!("pluginConfig[{i}]: Duplicate value: {:?}", c.name));
        }
    }
    Ok(())
}

fn resolve_profile(
    profile: &KubeSchedulerProfile,
    scheduler_name: &str,
    registry: &Registry,
    default_plugins: &[PluginRef],
) -> Result<ResolvedProfile, String> {
    let defaults = Plugins {
        multi_point: PluginSet {
            enabled: default_plugins.to_vec(),
            disabled: vec![],
        },
        ..Default::default()
    };
    let custom = profile.plugins.clone().unwrap_or_default();
    let merged = Plugins {
        pre_enqueue: merge_plugin_set(&defaults.pre_enqueue, &custom.pre_enqueue),
        queue_sort: merge_plugin_set(&defaults.queue_sort, &custom.queue_sort),
        pre_filter: merge_plugin_set(&defaults.pre_filter, &custom.pre_filter),
        filter: merge_plugin_set(&defaults.filter, &custom.filter),
        post_filter: merge_plugin_set(&defaults.post_filter, &custom.post_filter),
        pre_score: merge_plugin_set(&defaults.pre_score, &custom.pre_score),
        score: merge_plugin_set(&defaults.score, &custom.score),
        reserve: merge_plugin_set(&defaults.reserve, &custom.reserve),
        permit: merge_plugin_set(&defaults.permit, &custom.permit),
        pre_bind: merge_plugin_set(&defaults.pre_bind, &custom.pre_bind),
        bind: merge_plugin_set(&defaults.bind, &custom.bind),
        post_bind: merge_plugin_set(&defaults.post_bind, &custom.post_bind),
        multi_point: merge_plugin_set(&defaults.multi_point, &custom.multi_point),
    };

    let mut plugin_args: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    for c in &profile.plugin_config {
        plugin_args.insert(c.name.clone(), c.args.clone());
    }

    // Instantiate every plugin the profile names once, on an empty snapshot, to learn which extension
    // points it implements and to validate its args (the real framework does both at startup).
    let handle = Handle {
        snapshot: Arc::new(Snapshot::default()),
    };
    let mut instances: BTreeMap<String, Arc<dyn Plugin>> = BTreeMap::new();
    let mut needed: Vec<(String, Option<Point>)> = merged
        .multi_point
        .enabled
        .iter()
        .map(|p| (p.name.clone(), None))
        .collect();
    for point in Point::ALL {
        needed.extend(
            point
                .set(&merged)
                .enabled
                .iter()
                .map(|p| (p.name.clone(), Some(point))),
        );
    }
    for (name, point) in &needed {
        if instances.contains_key(name) {
            continue;
        }
        let Some(factory) = registry.get(name.as_str()) else {
            return Err(match point {
                Some(point) => format!("{} {name:?} does not exist", point.type_name()),
                None => format!("plugin {name:?} does not exist"),
            });
        };
        let instance =
            factory(plugin_args.get(name), &handle, registry.features()).map_err(|e| e.to_string())?;
        instances.insert(name.clone(), instance);
    }
    for name in plugin_args.keys() {
        if !instances.contains_key(name) && !registry.contains(name.as_str()) {
            return Err(format!("pluginConfig: plugin {name:?} does not exist"));
        }
    }

    let mut lists: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    for point in Point::ALL {
        let set = point.set(&merged);
        let mut specific: Vec<String> = Vec::new();
        for p in &set.enabled {
            if !point.implemented_by(instances[&p.name].as_ref()) {
                return Err(format!(
                    "plugin {:?} does not extend {} plugin",
                    p.name,
                    point.type_name()
                ));
            }
            if specific.contains(&p.name) {
                return Err(format!(
                    "plugin {:?} already registered as {:?}",
                    p.name,
                    point.type_name()
                ));
            }
            specific.push(p.name.clone());
        }
        let disabled: BTreeSet<&str> = set.disabled.iter().map(|p| p.name.as_str()).collect();
        let mut result = Vec::new();
        if disabled.contains("*") {
            result = specific;
        } else {
            let mut multi = Vec::new();
            let mut overrides = BTreeSet::new();
            for p in &merged.multi_point.enabled {
                if !point.implemented_by(instances[&p.name].as_ref()) || disabled.contains(p.name.as_str()) {
                    continue;
                }
                if specific.contains(&p.name) {
                    overrides.insert(p.name.clone());
                    continue;
                }
                if multi.contains(&p.name) {
                    return Err(format!(
                        "plugin {:?} already registered as {:?}",
                        p.name,
                        point.type_name()
                    ));
                }
                multi.push(p.name.clone());
            }
            result.extend(specific.iter().filter(|n| overrides.contains(*n)).cloned());
            result.extend(multi);
            result.extend(specific.into_iter().filter(|n| !overrides.contains(n)));
        }
        lists.insert(point.type_name(), result);
    }

    // Weights: the Score point's own entries win over MultiPoint's; 0 or unset means 1.
    let mut weights: BTreeMap<String, i64> = BTreeMap::new();
    let mut total: i64 = 0;
    for p in merged
        .score
        .enabled
        .iter()
        .chain(merged.multi_point.enabled.iter())
    {
        if !Point::Score.implemented_by(instances[&p.name].as_ref()) || weights.contains_key(&p.name) {
            continue;
        }
        let w = i64::from(p.weight.unwrap_or(0)).max(1);
        if w * 100 > MAX_TOTAL_SCORE - total {
            return Err("score plugins: total score of Score plugins could overflow".into());
        }
        total += w * 100;
        weights.insert(p.name.clone(), w);
    }
    let mut take = |point: Point| lists.remove(point.type_name()).unwrap_or_default();
    let score = take(Point::Score).into_iter().map(|n| {
        let w = weights.get(&n).copied().unwrap_or(1);
        (n, w)
    });
    Ok(ResolvedProfile {
        scheduler_name: scheduler_name.to_string(),
        pre_enqueue: take(Point::PreEnqueue),
        queue_sort: take(Point::QueueSort),
        pre_filter: take(Point::PreFilter),
        filter: take(Point::Filter),
        post_filter: take(Point::PostFilter),
        pre_score: take(Point::PreScore),
        score: score.collect(),
        reserve: take(Point::Reserve),
        permit: take(Point::Permit),
        pre_bind: take(Point::PreBind),
        bind: take(Point::Bind),
        post_bind: take(Point::PostBind),
        plugin_args,
        percentage_of_nodes_to_score: profile.percentage_of_nodes_to_score,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::cycle_state::CycleState;
    use crate::framework::interface::*;
    use crate::framework::runtime::{PluginError, PluginFactory};
    use crate::framework::status::Status;
    use crate::snapshot::{NodeInfo, PodInfo};

    /// A test plugin implementing the points its name says: F=Filter, S=Score, Q=QueueSort, B=Bind.
    struct Fake(&'static str);
    impl Plugin for Fake {
        fn name(&self) -> &'static str {
            self.0
        }
        fn as_filter(&self) -> Option<&dyn FilterPlugin> {
            self.0.contains('F').then_some(self as &dyn FilterPlugin)
        }
        fn as_score(&self) -> Option<&dyn ScorePlugin> {
            self.0.contains('S').then_some(self as &dyn ScorePlugin)
        }
        fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
            self.0.contains('Q').then_some(self as &dyn QueueSortPlugin)
        }
        fn as_bind(&self) -> Option<&dyn BindPlugin> {
            self.0.contains('B').then_some(self as &dyn BindPlugin)
        }
    }
    impl FilterPlugin for Fake {
        fn filter(&self, _: &CycleState, _: &PodInfo, _: &NodeInfo) -> Status {
            Status::success()
        }
    }
    impl ScorePlugin for Fake {
        fn score(&self, _: &CycleState, _: &PodInfo, _: &NodeInfo) -> (i64, Status) {
            (0, Status::success())
        }
    }
    impl QueueSortPlugin for Fake {
        fn less(&self, _: &PodInfo, _: &PodInfo) -> bool {
            false
        }
    }
    impl BindPlugin for Fake {
        fn bind(&self, _: &CycleState, _: &PodInfo, _: &str) -> (Vec<crate::action::Action>, Status) {
            (Vec::new(), Status::success())
        }
    }

    macro_rules! fake {
        ($name:literal) => {{
            fn f(
                args: Option<&serde_json::Value>,
                _: &Handle,
                _: &crate::framework::FeatureGates,
            ) -> Result<Arc<dyn Plugin>, PluginError> {
                if args.and_then(|a| a.get("bad")).is_some() {
                    return Err(PluginError::InvalidArgs {
                        plugin: $name.into(),
                        message: "bad: unknown field".into(),
                    });
                }
                Ok(Arc::new(Fake($name)))
            }
            ($name, f as PluginFactory)
        }};
    }

    fn registry() -> Registry {
        let mut registry = Registry::new(crate::framework::FeatureGates::default(), defaults());
        for (name, factory) in [
            fake!("Q"),
            fake!("F1"),
            fake!("FS2"),
            fake!("S3"),
            fake!("B"),
            fake!("F4"),
            fake!("S5"),
        ] {
            registry.insert(name, factory);
        }
        registry
    }

    fn defaults() -> Vec<PluginRef> {
        let p = |n: &str, w: Option<i32>| PluginRef {
            name: n.into(),
            weight: w,
        };
        vec![
            p("Q", None),
            p("F1", None),
            p("FS2", Some(2)),
            p("S3", Some(3)),
            p("B", None),
        ]
    }

    fn load(yaml: &str) -> Result<SchedulerConfig, ProfileError> {
        let config: KubeSchedulerConfiguration = yaml_serde::from_str(yaml).unwrap();
        resolve_with_defaults(&config, &registry(), "test.yaml", &defaults())
    }

    fn names(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }

    #[test]
    fn defaults_expand_multipoint_into_each_point() {
        let c = load("profiles: []").unwrap();
        let p = &c.profiles[0];
        assert_eq!(p.scheduler_name, DEFAULT_SCHEDULER_NAME);
        assert_eq!(names(&p.filter), ["F1", "FS2"]);
        assert_eq!(p.score, vec![("FS2".to_string(), 2), ("S3".to_string(), 3)]);
        assert_eq!(names(&p.queue_sort), ["Q"]);
        assert_eq!(names(&p.bind), ["B"]);
    }

    #[test]
    fn merge_rules_of_kube_scheduler() {
        type Case<'a> = (&'a str, &'a str, Vec<&'a str>, Vec<(&'a str, i64)>);
        let cases: &[Case<'_>] = &[
            (
                "disable one default at one point keeps it elsewhere",
                "profiles: [{plugins: {filter: {disabled: [{name: FS2}]}}}]",
                vec!["F1"],
                vec![("FS2", 2), ("S3", 3)],
            ),
            (
                "disable all at a point, then enable explicitly",
                "profiles: [{plugins: {filter: {disabled: [{name: '*'}], enabled: [{name: F4}, {name: F1}]}}}]",
                vec!["F4", "F1"],
                vec![("FS2", 2), ("S3", 3)],
            ),
            (
                "point-specific enable appends after multipoint plugins",
                "profiles: [{plugins: {filter: {enabled: [{name: F4}]}}}]",
                vec!["F1", "FS2", "F4"],
                vec![("FS2", 2), ("S3", 3)],
            ),
            (
                "re-enabling a default at a point overrides and moves it first",
                "profiles: [{plugins: {filter: {enabled: [{name: FS2}]}}}]",
                vec!["FS2", "F1"],
                vec![("FS2", 2), ("S3", 3)],
            ),
            (
                "score weight from the Score point wins over MultiPoint",
                "profiles: [{plugins: {score: {enabled: [{name: S3, weight: 7}]}}}]",
                vec!["F1", "FS2"],
                vec![("S3", 7), ("FS2", 2)],
            ),
            (
                "multipoint replacement keeps position and takes the new weight",
                "profiles: [{plugins: {multiPoint: {enabled: [{name: FS2, weight: 5}, {name: S5}]}}}]",
                vec!["F1", "FS2"],
                vec![("FS2", 5), ("S3", 3), ("S5", 1)],
            ),
            (
                "disabling at multipoint removes it everywhere",
                "profiles: [{plugins: {multiPoint: {disabled: [{name: S3}]}}}]",
                vec!["F1", "FS2"],
                vec![("FS2", 2)],
            ),
        ];
        for (name, yaml, filter, score) in cases {
            let c = load(yaml).unwrap_or_else(|e| panic!("{name}: {e}"));
            let p = &c.profiles[0];
            assert_eq!(names(&p.filter), *filter, "{name}: filter");
            let got: Vec<(&str, i64)> = p.score.iter().map(|(n, w)| (n.as_str(), *w)).collect();
            assert_eq!(got, *score, "{name}: score");
        }
    }

    #[test]
    fn errors_name_the_problem() {
        let cases = [
            (
                "profiles: [{plugins: {filter: {enabled: [{name: Nope}]}}}]",
                "FilterPlugin \"Nope\" does not exist",
            ),
            (
                "profiles: [{plugins: {filter: {enabled: [{name: S3}]}}}]",
                "plugin \"S3\" does not extend FilterPlugin plugin",
            ),
            (
                "profiles: [{pluginConfig: [{name: F1, args: {bad: 1}}]}]",
                "initializing plugin \"F1\": bad: unknown field",
            ),
            (
                "profiles: [{schedulerName: a}, {schedulerName: a}]",
                "profiles[1].schedulerName: Duplicate value: \"a\"",
            ),
            (
                "profiles: [{schedulerName: a}, {}]",
                "profiles[1].schedulerName: Required value",
            ),
            (
                "percentageOfNodesToScore: 101",
                "percentageOfNodesToScore: Invalid value: 101",
            ),
            (
                "profiles: [{pluginConfig: [{name: Ghost, args: {}}]}]",
                "pluginConfig: plugin \"Ghost\" does not exist",
            ),
        ];
        for (yaml, want) in cases {
            let err = load(yaml).unwrap_err().to_string();
            assert!(
                err.contains(want),
                "{yaml}: got {err:?}, want it to contain {want:?}"
            );
            assert!(err.starts_with("test.yaml: "), "{err}");
        }
    }

    #[test]
    fn rejects_wrong_api_version_and_kind() {
        let reg = registry();
        let err = SchedulerConfig::from_str(
            "apiVersion: v1\nkind: KubeSchedulerConfiguration\n",
            "f.yaml",
            &reg,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("apiVersion \"v1\" is not supported"), "{err}");
        let err =
            SchedulerConfig::from_str(&format!("apiVersion: {API_VERSION}\nkind: Pod\n"), "f.yaml", &reg)
                .unwrap_err()
                .to_string();
        assert!(
            err.contains("kind \"Pod\" is not KubeSchedulerConfiguration"),
            "{err}"
        );
        let err = SchedulerConfig::from_str("profiles: [", "f.yaml", &reg)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("f.yaml: "), "{err}");
        // Refused before the parser, whose time is quadratic in flow nesting.
        let deep = format!("profiles: {}", "[".repeat(100_000));
        let err = SchedulerConfig::from_str(&deep, "f.yaml", &reg)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "f.yaml: document 0: flow collections ([ or {) nested more than 128 levels deep at line 1 column 139"
        );
    }

    #[test]
    fn profile_percentage_and_multiple_profiles() {
        let c = load("percentageOfNodesToScore: 30\nprofiles: [{schedulerName: a, percentageOfNodesToScore: 10}, {schedulerName: b}]").unwrap();
        assert_eq!(c.percentage_of_nodes_to_score, 30);
        assert_eq!(c.profile("a").unwrap().percentage_of_nodes_to_score, Some(10));
        assert_eq!(c.profile("b").unwrap().percentage_of_nodes_to_score, None);
        assert!(c.profile("default-scheduler").is_none());
    }
}
