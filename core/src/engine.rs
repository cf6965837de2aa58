//! The one entry point for building a framework: a plugin registry and a scheduler configuration,
//! resolved once, from which a pod's profile and its [`Framework`] over a snapshot are had.
//!
//! kube-scheduler runs one framework per profile and *ignores* pods whose `spec.schedulerName` names no
//! profile it runs (they belong to another scheduler). [`Engine::profile_for`] says so with a typed
//! error, [`UnknownProfile`]; callers decide what ignoring means for them (`explain` answers with the
//! error, the webhook leaves the pod alone). An empty or absent `schedulerName` is
//! `default-scheduler`, as the API server defaults it.

use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::features::FeatureGates;
use crate::framework::profile::DEFAULT_SCHEDULER_NAME;
use crate::framework::runtime::FrameworkError;
use crate::snapshot::{ClusterObjects, PodInfo, Snapshot};

// The engine API: what a caller needs beside the `Engine` itself, re-exported so that the binaries name
// one module rather than the framework's, the cycle's and the preemption evaluator's files.
//
// The registry and the scheduler configuration an `Engine` is made of.
pub use crate::framework::profile::{ProfileError, SchedulerConfig};
pub use crate::framework::runtime::{Registry, ResolvedProfile};
pub use crate::plugins::in_tree_registry;
// A profile's framework over a snapshot, its cycle state and the per-node verdicts it records.
pub use crate::framework::cycle_state::CycleState;
pub use crate::framework::interface::{FrameworkHandle, NodeToStatus};
pub use crate::framework::runtime::{FilterVerdict, Framework};
// One scheduling cycle (`schedule_one.go`).
pub use crate::schedule::{ScheduleOptions, reason_histogram, schedule, schedule_cycle};
// Preemption as a dry run (`framework/preemption`): the victims, the nominated node and their ties.
pub use crate::preemption::evaluator::NOT_ELIGIBLE_TERMINATING_POD;
pub use crate::preemption::ties::{MAX_ORDERS_PER_NODE, MAX_VICTIM_SETS};
pub use crate::preemption::{DryRunOptions, PreemptionResult, VictimRemoval, VictimView, dry_run};

/// A `schedulerName` that names no profile of the configuration: kube-scheduler ignores such pods.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("schedulerName {scheduler_name:?} names no profile of {config} (profiles: {})", known.join(", "))]
pub struct UnknownProfile {
    /// The scheduler name asked for.
    pub scheduler_name: String,
    /// Where the configuration came from (a path, or "the default configuration").
    pub config: String,
    /// The scheduler names the configuration has profiles for, in its order.
    pub known: Vec<String>,
}

/// Why [`Engine::framework_for`] built no framework.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// The pod's schedulerName names no profile (kube-scheduler ignores the pod).
    #[error(transparent)]
    UnknownProfile(#[from] UnknownProfile),
    /// The profile's plugins could not be built.
    #[error("profile {profile:?}: {source}")]
    Framework {
        /// The profile's schedulerName.
        profile: String,
        /// Why.
        #[source]
        source: FrameworkError,
    },
}

/// A registry and the profiles of a scheduler configuration, resolved once.
#[derive(Debug, Clone)]
pub struct Engine {
    registry: Registry,
    config: SchedulerConfig,
    origin: String,
}

/// What [`Engine::new`]'s origin says for the default configuration.
pub const DEFAULT_CONFIG_ORIGIN: &str = "the default configuration";

impl Default for Engine {
    /// The in-tree plugins with kube-scheduler's default configuration (one profile,
    /// `default-scheduler`).
    fn default() -> Self {
        let registry = in_tree_registry();
        let config = SchedulerConfig::default_config(&registry);
        Engine::new(registry, config, DEFAULT_CONFIG_ORIGIN)
    }
}

impl Engine {
    /// An engine of `registry` and `config`; `origin` names the configuration in errors.
    pub fn new(registry: Registry, config: SchedulerConfig, origin: impl Into<String>) -> Self {
        Engine {
            registry,
            config,
            origin: origin.into(),
        }
    }

    /// The in-tree plugins with `config` (already resolved against them).
    pub fn with_config(config: SchedulerConfig, origin: impl Into<String>) -> Self {
        Engine::new(in_tree_registry(), config, origin)
    }

    /// The in-tree plugins with the KubeSchedulerConfiguration at `path`, or the default configuration
    /// when `None`.
    pub fn from_file(path: Option<&Path>) -> Result<Self, ProfileError> {
        Engine::for_features(path, FeatureGates::v1_37())
    }

    /// The in-tree plugins built with `features` (a release's gates, see
    /// [`FeatureGates::for_version`]) and the configuration at `path`, or that release's default
    /// configuration when `None`.
    pub fn for_features(path: Option<&Path>, features: FeatureGates) -> Result<Self, ProfileError> {
        let registry = crate::plugins::in_tree_registry_with(features);
        match path {
            None => {
                let config = SchedulerConfig::default_config(&registry);
                Ok(Engine::new(registry, config, DEFAULT_CONFIG_ORIGIN))
            }
            Some(path) => {
                let config = SchedulerConfig::from_file(path, &registry)?;
                Ok(Engine::new(registry, config, path.display().to_string()))
            }
        }
    }

    /// The plugin registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The feature gates its plugins are built with (the registry's).
    pub fn features(&self) -> &FeatureGates {
        self.registry.features()
    }

    /// A snapshot of `objects` whose requests are summed with this engine's gates: what its
    /// frameworks decide on (upstream's cache and plugins read the same gates).
    pub fn snapshot(&self, objects: ClusterObjects) -> Snapshot {
        Snapshot::with_features(objects, *self.features())
    }

    /// `pod` precomputed with this engine's gates (its requests summed as its frameworks sum them).
    pub fn pod_info(&self, pod: Pod) -> PodInfo {
        PodInfo::with_features(Arc::new(pod), self.features())
    }

    /// The resolved scheduler configuration.
    pub fn config(&self) -> &SchedulerConfig {
        &self.config
    }

    /// Where the configuration came from.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The scheduler names of the profiles, in configuration order.
    pub fn profile_names(&self) -> Vec<&str> {
        self.config
            .profiles
            .iter()
            .map(|p| p.scheduler_name.as_str())
            .collect()
    }

    /// The options a scheduling cycle runs with under this configuration.
    pub fn schedule_options(&self, trace_filters: bool) -> ScheduleOptions {
        ScheduleOptions {
            global_percentage_of_nodes_to_score: self.config.percentage_of_nodes_to_score,
            trace_filters,
            stop_at_first_feasible: false,
            sample_from: None,
            record_nodes: true,
        }
    }

    /// The profile of `scheduler_name` (empty means `default-scheduler`).
    pub fn profile(&self, scheduler_name: &str) -> Result<&ResolvedProfile, UnknownProfile> {
        let name = if scheduler_name.is_empty() {
            DEFAULT_SCHEDULER_NAME
        } else {
            scheduler_name
        };
        self.config.profile(name).ok_or_else(|| UnknownProfile {
            scheduler_name: name.to_string(),
            config: self.origin.clone(),
            known: self.profile_names().into_iter().map(str::to_string).collect(),
        })
    }

    /// The profile that schedules `pod`: the one of its `spec.schedulerName` (absent or empty means
    /// `default-scheduler`). [`UnknownProfile`] when the configuration has none: kube-scheduler ignores
    /// the pod.
    pub fn profile_for(&self, pod: &Pod) -> Result<&ResolvedProfile, UnknownProfile> {
        self.profile(scheduler_name(pod))
    }

    /// `profile`'s plugins instantiated over `snapshot`.
    pub fn framework(
        &self,
        profile: &ResolvedProfile,
        snapshot: Arc<Snapshot>,
    ) -> Result<Framework, EngineError> {
        Framework::new(profile, &self.registry, snapshot).map_err(|source| EngineError::Framework {
            profile: profile.scheduler_name.clone(),
            source,
        })
    }

    /// The framework of the profile that schedules `pod`, over `snapshot`.
    pub fn framework_for(&self, pod: &Pod, snapshot: Arc<Snapshot>) -> Result<Framework, EngineError> {
        let profile = self.profile_for(pod)?;
        self.framework(profile, snapshot)
    }
}

/// A pod's `spec.schedulerName`, `default-scheduler` when absent or empty.
pub fn scheduler_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .filter(|n| !n.is_empty())
        .unwrap_or(DEFAULT_SCHEDULER_NAME)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::cycle_state::CycleState;
    use crate::framework::runtime::FilterVerdict;
    use crate::plugins::names;
    use crate::testing::{node, pod, snapshot};

    const TWO_PROFILES: &str = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
        profiles:\n- schedulerName: default-scheduler\n- schedulerName: no-taints\n  plugins:\n    \
        multiPoint:\n      disabled:\n      - name: TaintToleration\n";

    fn two_profiles() -> Engine {
        let registry = in_tree_registry();
        let config = SchedulerConfig::from_str(TWO_PROFILES, "ksc.yaml", &registry).expect("valid");
        Engine::new(registry, config, "ksc.yaml")
    }

    #[test]
    fn profile_for_resolves_the_pods_scheduler_name() {
        let engine = two_profiles();
        let cases: [(&str, Option<&str>, Result<&str, &str>); 5] = [
            ("absent", None, Ok("default-scheduler")),
            ("empty", Some(""), Ok("default-scheduler")),
            ("default", Some("default-scheduler"), Ok("default-scheduler")),
            ("named", Some("no-taints"), Ok("no-taints")),
            (
                "unknown",
                Some("my-scheduler"),
                Err(
                    "schedulerName \"my-scheduler\" names no profile of ksc.yaml (profiles: \
                     default-scheduler, no-taints)",
                ),
            ),
        ];
        for (case, name, want) in cases {
            let mut p = pod("p").obj();
            p.spec.get_or_insert_with(Default::default).scheduler_name = name.map(str::to_string);
            let got = engine
                .profile_for(&p)
                .map(|profile| profile.scheduler_name.as_str())
                .map_err(|e| e.to_string());
            assert_eq!(got, want.map_err(str::to_string), "{case}");
        }
    }

    #[test]
    fn unknown_profile_is_typed_and_the_default_engine_says_so() {
        let p = pod("p").scheduler_name("other").obj();
        let err = Engine::default().profile_for(&p).unwrap_err();
        assert_eq!(
            err,
            UnknownProfile {
                scheduler_name: "other".into(),
                config: DEFAULT_CONFIG_ORIGIN.into(),
                known: vec!["default-scheduler".into()],
            }
        );
        assert_eq!(
            err.to_string(),
            "schedulerName \"other\" names no profile of the default configuration (profiles: \
             default-scheduler)"
        );
        let snap = Arc::new(snapshot(vec![node("n1").obj()], vec![]));
        assert!(matches!(
            Engine::default().framework_for(&p, snap),
            Err(EngineError::UnknownProfile(_))
        ));
    }

    #[test]
    fn framework_for_builds_the_pods_profile() {
        let engine = two_profiles();
        let snap = Arc::new(snapshot(vec![node("n1").obj()], vec![]));
        let fwk = engine
            .framework_for(&pod("p").scheduler_name("no-taints").obj(), snap.clone())
            .expect("framework");
        assert_eq!(fwk.profile_name, "no-taints");
        assert!(!fwk.profile.filter.iter().any(|f| f == names::TAINT_TOLERATION));
        let fwk = engine.framework_for(&pod("p").obj(), snap).expect("framework");
        assert_eq!(fwk.profile_name, "default-scheduler");
        assert_eq!(
            engine.schedule_options(true).global_percentage_of_nodes_to_score,
            0
        );
    }

    #[test]
    fn every_filter_runs_past_the_first_rejection() {
        let n = node("n1")
            .cpu("1")
            .memory("1Gi")
            .pods("10")
            .taint("k", "v", "NoSchedule")
            .obj();
        let snap = Arc::new(snapshot(vec![n], vec![]));
        let engine = Engine::default();
        let p = pod("p").cpu("2").info();
        let fwk = engine.framework_for(&p.pod, snap.clone()).expect("framework");
        let mut state = CycleState::new();
        let (_, status, _) = fwk.run_pre_filter_plugins(&mut state, &p);
        assert!(status.is_success(), "{status:?}");
        let node_info = snap.node("n1").expect("n1");
        let first = fwk.run_filter_plugins(&state, &p, node_info);
        assert!(!first.is_success());
        let verdicts = fwk.run_all_filter_plugins(&state, &p, node_info);
        let names: Vec<&str> = verdicts.iter().map(|(n, _)| *n).collect();
        let profile_filters: Vec<&str> = fwk.profile.filter.iter().map(String::as_str).collect();
        assert_eq!(names, profile_filters);
        let rejected: Vec<&str> = verdicts
            .iter()
            .filter(|(_, v)| matches!(v, FilterVerdict::Ran(s) if !s.is_success()))
            .map(|(n, _)| *n)
            .collect();
        assert_eq!(rejected, [names::TAINT_TOLERATION, names::NODE_RESOURCES_FIT]);
        // Plugins whose PreFilter skipped are reported as such, never run.
        assert!(
            verdicts
                .iter()
                .any(|(n, v)| *n == names::VOLUME_BINDING && *v == FilterVerdict::Skipped),
            "{verdicts:?}"
        );
    }
}
