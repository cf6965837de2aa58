//! kube-scheduler's in-tree plugins, one module per plugin (folders where a plugin needs several files),
//! and the registry that maps a plugin name to its factory.

use crate::framework::FeatureGates;
use crate::framework::profile::PluginRef;
use crate::framework::runtime::Registry;

pub(crate) mod default_binder;
pub(crate) mod default_preemption;
pub(crate) mod dynamic_resources;
pub mod gang_scheduling;
pub(crate) mod helper;
pub(crate) mod image_locality;
pub(crate) mod inter_pod_affinity;
pub mod names;
pub(crate) mod node_affinity;
pub(crate) mod node_declared_features;
pub(crate) mod node_name;
pub(crate) mod node_ports;
pub(crate) mod node_resources;
pub(crate) mod node_unschedulable;
pub(crate) mod node_volume_limits;
pub(crate) mod pod_topology_spread;
pub(crate) mod queue_sort;
pub(crate) mod scheduling_gates;
pub(crate) mod selector_spread;
pub(crate) mod taint_toleration;
pub(crate) mod volume_binding;
pub(crate) mod volume_restrictions;
pub(crate) mod volume_zone;

#[cfg(test)]
mod extension_points_tests;

/// Go's `NewInTreeRegistry` with v1.37.1's default feature gates: every plugin this engine
/// implements, by name.
pub fn in_tree_registry() -> Registry {
    in_tree_registry_with(FeatureGates::v1_37())
}

/// Go's `NewInTreeRegistry`: every plugin this engine implements, by name, each built with
/// `features`, and the default plugins those gates select.
pub fn in_tree_registry_with(features: FeatureGates) -> Registry {
    let mut registry = Registry::new(features, default_multi_point(&features));
    registry.set_known_to_release(names::known_to_release(features.version));
    registry.insert(names::DYNAMIC_RESOURCES, dynamic_resources::new);
    registry.insert(names::POD_TOPOLOGY_SPREAD, pod_topology_spread::new);
    registry.insert(names::NODE_RESOURCES_FIT, node_resources::fit::new);
    registry.insert(
        names::NODE_RESOURCES_BALANCED_ALLOCATION,
        node_resources::balanced_allocation::new,
    );
    registry.insert(names::SCHEDULING_GATES, scheduling_gates::new);
    registry.insert(names::GANG_SCHEDULING, gang_scheduling::new);
    registry.insert(names::PRIORITY_SORT, queue_sort::new);
    registry.insert(names::NODE_NAME, node_name::new);
    registry.insert(names::NODE_UNSCHEDULABLE, node_unschedulable::new);
    registry.insert(names::TAINT_TOLERATION, taint_toleration::new);
    registry.insert(names::NODE_AFFINITY, node_affinity::new);
    registry.insert(names::NODE_PORTS, node_ports::new);
    registry.insert(names::IMAGE_LOCALITY, image_locality::new);
    registry.insert(names::DEFAULT_BINDER, default_binder::new);
    registry.insert(names::DEFAULT_PREEMPTION, default_preemption::new);
    registry.insert(names::NODE_DECLARED_FEATURES, node_declared_features::new);
    registry.insert(names::INTER_POD_AFFINITY, inter_pod_affinity::new);
    registry.insert(names::SELECTOR_SPREAD, selector_spread::new);
    registry.insert(names::VOLUME_RESTRICTIONS, volume_restrictions::new);
    registry.insert(names::NODE_VOLUME_LIMITS, node_volume_limits::new);
    registry.insert(names::VOLUME_ZONE, volume_zone::new);
    registry.insert(names::VOLUME_BINDING, volume_binding::new);
    registry
}

/// Go's `getDefaultPlugins` (`apis/config/v1/default_plugins.go`): the default MultiPoint plugins
/// with `features` applied as `applyFeatureGates` does. DynamicResourceAllocation inserts
/// DynamicResources before DefaultPreemption (deallocating an idle claim beats evicting a pod);
/// NodeDeclaredFeatures appends its plugin, then GangScheduling is appended where GenericWorkload
/// is on (v1.37; the GangScheduling gate before). InPlacePodVerticalScalingSchedulerPreemption
/// (DeferredPodScheduling) and TopologyAwareWorkloadScheduling add plugins this engine does not
/// implement; they are off in v1.37.1.
pub fn default_multi_point(features: &FeatureGates) -> Vec<PluginRef> {
    let w = |name: &str, weight: i32| PluginRef {
        name: name.to_string(),
        weight: Some(weight),
    };
    let p = |name: &str| PluginRef {
        name: name.to_string(),
        weight: None,
    };
    let mut plugins = vec![
        p(names::SCHEDULING_GATES),
        p(names::PRIORITY_SORT),
        p(names::NODE_UNSCHEDULABLE),
        p(names::NODE_NAME),
        w(names::TAINT_TOLERATION, 3),
        w(names::NODE_AFFINITY, 2),
        p(names::NODE_PORTS),
        w(names::NODE_RESOURCES_FIT, 1),
        p(names::VOLUME_RESTRICTIONS),
        p(names::NODE_VOLUME_LIMITS),
        p(names::VOLUME_BINDING),
        p(names::VOLUME_ZONE),
        w(names::POD_TOPOLOGY_SPREAD, 2),
        w(names::INTER_POD_AFFINITY, 2),
        p(names::DEFAULT_PREEMPTION),
        w(names::NODE_RESOURCES_BALANCED_ALLOCATION, 1),
        w(names::IMAGE_LOCALITY, 1),
        p(names::DEFAULT_BINDER),
    ];
    if features.changes.node_name_pre_filter {
        // v1.37 lists NodeName first: its PreFilter narrows the cycle before anything else runs.
        plugins.swap(2, 3);
    }
    // Same order as Go's applyFeatureGates: NodeDeclaredFeatures is appended before DRA's insert.
    if features.node_declared_features {
        plugins.push(p(names::NODE_DECLARED_FEATURES));
    }
    if features.dynamic_resource_allocation
        && let Some(at) = plugins.iter().position(|r| r.name == names::DEFAULT_PREEMPTION)
    {
        let dynamic_resources = if features.changes.dynamic_resources_scores {
            w(names::DYNAMIC_RESOURCES, 2)
        } else {
            p(names::DYNAMIC_RESOURCES)
        };
        plugins.insert(at, dynamic_resources);
    }
    if features.gang_scheduling_enabled() {
        plugins.push(p(names::GANG_SCHEDULING));
    }
    plugins
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_plugin_is_registered() {
        let registry = in_tree_registry();
        for plugin in registry.default_multi_point() {
            assert!(
                registry.contains(&plugin.name),
                "{} is a default but not registered",
                plugin.name
            );
        }
    }

    fn names_of(plugins: &[PluginRef]) -> Vec<&str> {
        plugins.iter().map(|p| p.name.as_str()).collect()
    }

    #[test]
    fn default_plugins_follow_the_gates() {
        let v1_37 = FeatureGates::v1_37();
        let defaults = default_multi_point(&v1_37);
        let names = names_of(&defaults);
        // DynamicResources right before DefaultPreemption, NodeDeclaredFeatures last (Go's order).
        let dra = names
            .iter()
            .position(|n| *n == names::DYNAMIC_RESOURCES)
            .expect("DRA on");
        assert_eq!(names[dra + 1], names::DEFAULT_PREEMPTION);
        assert_eq!(defaults[dra].weight, Some(2));
        assert_eq!(names.last(), Some(&names::NODE_DECLARED_FEATURES));
        for (gate, features, removed) in [
            (
                "DynamicResourceAllocation",
                FeatureGates {
                    dynamic_resource_allocation: false,
                    ..v1_37
                },
                names::DYNAMIC_RESOURCES,
            ),
            (
                "NodeDeclaredFeatures",
                FeatureGates {
                    node_declared_features: false,
                    ..v1_37
                },
                names::NODE_DECLARED_FEATURES,
            ),
        ] {
            let want: Vec<&str> = names.iter().copied().filter(|n| *n != removed).collect();
            assert_eq!(names_of(&default_multi_point(&features)), want, "{gate} off");
            let registry = in_tree_registry_with(features);
            assert_eq!(registry.features(), &features, "{gate} off");
            assert_eq!(names_of(registry.default_multi_point()), want, "{gate} off");
        }
    }

    /// GangScheduling is appended (after everything else, as `applyGangScheduling` does) where
    /// GenericWorkload is on from v1.37, and where v1.35's and v1.36's own GangScheduling gate is.
    #[test]
    fn gang_scheduling_is_a_default_plugin_where_its_gate_is_on() {
        use crate::features::KubeVersion;
        let last = |features: FeatureGates| {
            default_multi_point(&features)
                .last()
                .map(|p| (p.name.clone(), p.weight))
        };
        let gang = Some((names::GANG_SCHEDULING.to_string(), None));
        let with = |minor, patch, gates: &str| {
            let features = FeatureGates::for_version(KubeVersion::new(minor, patch));
            if gates.is_empty() {
                features
            } else {
                features.with_overrides(gates).expect("gates")
            }
        };
        // (release, --feature-gates, GangScheduling a default plugin)
        let cases = [
            ((37, 1), "", false),
            ((37, 1), "GenericWorkload=true", true),
            ((36, 3), "GenericWorkload=true", false),
            ((36, 3), "GenericWorkload=true,GangScheduling=true", true),
            ((35, 4), "GenericWorkload=true,GangScheduling=true", true),
        ];
        for ((minor, patch), gates, want) in cases {
            let features = with(minor, patch, gates);
            assert_eq!(last(features) == gang, want, "v1.{minor} {gates:?}");
            let registry = in_tree_registry_with(features);
            assert_eq!(
                registry
                    .default_multi_point()
                    .iter()
                    .any(|p| p.name == names::GANG_SCHEDULING),
                want,
                "v1.{minor} {gates:?}"
            );
        }
    }

    /// Each release's `getDefaultPlugins` with its default gates (`apis/config/v1/default_plugins.go`).
    #[test]
    fn each_release_has_its_own_default_plugins() {
        use crate::features::KubeVersion;
        let base = [
            "SchedulingGates:",
            "PrioritySort:",
            "NodeUnschedulable:",
            "NodeName:",
            "TaintToleration:3",
            "NodeAffinity:2",
            "NodePorts:",
            "NodeResourcesFit:1",
            "VolumeRestrictions:",
            "NodeVolumeLimits:",
            "VolumeBinding:",
            "VolumeZone:",
            "PodTopologySpread:2",
            "InterPodAffinity:2",
            "DefaultPreemption:",
            "NodeResourcesBalancedAllocation:1",
            "ImageLocality:1",
            "DefaultBinder:",
        ]
        .join(" ");
        let with_dra = |dra: &str| base.replace("DefaultPreemption:", &format!("{dra} DefaultPreemption:"));
        let cases = [
            (KubeVersion::new(33, 13), base.clone()),
            (KubeVersion::new(34, 4), with_dra("DynamicResources:")),
            (KubeVersion::new(35, 4), with_dra("DynamicResources:2")),
            (
                KubeVersion::new(36, 3),
                with_dra("DynamicResources:2") + " NodeDeclaredFeatures:",
            ),
            (
                KubeVersion::new(37, 1),
                with_dra("DynamicResources:2")
                    .replace("NodeUnschedulable: NodeName:", "NodeName: NodeUnschedulable:")
                    + " NodeDeclaredFeatures:",
            ),
        ];
        for (version, want) in cases {
            let got: Vec<String> = default_multi_point(&FeatureGates::for_version(version))
                .iter()
                .map(|p| {
                    format!(
                        "{}:{}",
                        p.name,
                        p.weight.map(|w| w.to_string()).unwrap_or_default()
                    )
                })
                .collect();
            assert_eq!(got.join(" "), want, "{version}");
        }
    }

    #[test]
    fn the_registry_builds_plugins_with_its_gates() {
        use crate::framework::CycleState;
        use crate::snapshot::ClusterObjects;
        use crate::testing::{csi_driver, node, pod, pv, pvc, snapshot_of};
        // A CSI driver that must be installed, and a node without a CSINode: NodeVolumeLimits
        // rejects the node only under VolumeLimitScaling (on in v1.37).
        let snapshot = std::sync::Arc::new(snapshot_of(ClusterObjects {
            nodes: vec![node("n").obj()],
            persistent_volumes: vec![pv("pv").csi("csi.example.com", "h").obj()],
            persistent_volume_claims: vec![pvc("c").volume_name("pv").obj()],
            csi_drivers: vec![csi_driver("csi.example.com", Some(true))],
            ..Default::default()
        }));
        let handle = crate::framework::runtime::Handle {
            snapshot: snapshot.clone(),
        };
        let p = pod("p").pvc("c").info();
        let filter = |features: FeatureGates| {
            let plugin = in_tree_registry_with(features)
                .build(names::NODE_VOLUME_LIMITS, None, &handle)
                .expect("registered")
                .expect("built");
            let mut state = CycleState::new();
            let _ = plugin
                .as_pre_filter()
                .unwrap()
                .pre_filter(&mut state, &p, snapshot.nodes());
            plugin
                .as_filter()
                .unwrap()
                .filter(&state, &p, snapshot.node("n").unwrap())
        };
        assert!(!filter(FeatureGates::v1_37()).is_success());
        let off = FeatureGates {
            volume_limit_scaling: false,
            ..FeatureGates::v1_37()
        };
        assert!(filter(off).is_success(), "{:?}", filter(off));
    }

    #[test]
    fn every_registered_plugin_has_a_name_constant() {
        for (name, _) in in_tree_registry().iter() {
            assert!(
                names::ALL.contains(&name),
                "{name} is registered but not in names.rs"
            );
        }
    }

    #[test]
    fn every_factory_builds_the_plugin_it_is_registered_under() {
        let handle = crate::framework::runtime::Handle {
            snapshot: std::sync::Arc::new(crate::snapshot::Snapshot::default()),
        };
        for (name, factory) in in_tree_registry().iter() {
            let plugin =
                factory(None, &handle, &FeatureGates::v1_37()).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(plugin.name(), name);
        }
    }

    #[test]
    fn a_profile_naming_a_plugin_its_release_lacks_is_refused_in_its_words() {
        use crate::features::KubeVersion;
        use crate::framework::profile::SchedulerConfig;
        let header = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";
        // (release, profile, the refusal, or None when the release has the plugin)
        let cases: &[(KubeVersion, &str, Option<&str>)] = &[
            (
                KubeVersion::new(33, 13),
                "profiles: [{plugins: {multiPoint: {enabled: [{name: NodeDeclaredFeatures}]}}}]",
                Some("PreFilterPlugin \"NodeDeclaredFeatures\" does not exist"),
            ),
            (
                KubeVersion::new(34, 4),
                "profiles: [{plugins: {filter: {enabled: [{name: NodeDeclaredFeatures}]}}}]",
                Some("FilterPlugin \"NodeDeclaredFeatures\" does not exist"),
            ),
            (
                KubeVersion::new(35, 4),
                "profiles: [{plugins: {filter: {enabled: [{name: NodeDeclaredFeatures}]}}}]",
                None,
            ),
            (
                KubeVersion::new(34, 4),
                "profiles: [{schedulerName: gang, plugins: {multiPoint: {enabled: [{name: GangScheduling}]}}}]",
                Some(
                    "creating profile for scheduler name gang: PreFilterPlugin \"GangScheduling\" does not exist",
                ),
            ),
            (
                KubeVersion::new(35, 4),
                "profiles: [{plugins: {multiPoint: {enabled: [{name: GangScheduling}]}}}]",
                None,
            ),
            (
                KubeVersion::new(37, 1),
                "profiles: [{plugins: {preEnqueue: {enabled: [{name: GangScheduling}]}, \
                 permit: {enabled: [{name: GangScheduling}]}}}]",
                None,
            ),
            (
                KubeVersion::new(35, 4),
                "profiles: [{plugins: {score: {enabled: [{name: PodGroupPodsCount}]}}}]",
                Some("ScorePlugin \"PodGroupPodsCount\" does not exist"),
            ),
            (
                KubeVersion::new(36, 3),
                "profiles: [{plugins: {multiPoint: {enabled: [{name: DeferredPodScheduling}]}, \
                 queueSort: {enabled: [{name: TopologyPlacementGenerator}]}}}]",
                Some("PreFilterPlugin \"DeferredPodScheduling\" does not exist"),
            ),
            (
                KubeVersion::new(37, 1),
                "profiles: [{plugins: {multiPoint: {enabled: [{name: Nope}]}}}]",
                Some(
                    "creating profile for scheduler name default-scheduler: PreFilterPlugin \"Nope\" does not exist",
                ),
            ),
            (
                KubeVersion::new(33, 13),
                "profiles: [{plugins: {score: {enabled: [{name: SelectorSpread, weight: 1}]}}}]",
                None,
            ),
        ];
        for (version, profile, refusal) in cases {
            let registry = in_tree_registry_with(FeatureGates::for_version(*version));
            let loaded = SchedulerConfig::from_str(&format!("{header}{profile}"), "c.yaml", &registry);
            match (refusal, loaded) {
                (None, Ok(_)) => {}
                (None, Err(e)) => panic!("{version} {profile}: refused: {e}"),
                (Some(want), Ok(_)) => panic!("{version} {profile}: accepted, want {want:?}"),
                (Some(want), Err(e)) => {
                    let got = e.to_string();
                    assert!(
                        got.starts_with(
                            "c.yaml: initializing profiles: creating profile for scheduler name "
                        ) && got.ends_with(want),
                        "{version} {profile}: got {got:?}, want it to end with {want:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn upstream_plugins_the_engine_lacks_keep_their_error_where_the_release_has_them() {
        use crate::features::KubeVersion;
        use crate::framework::profile::SchedulerConfig;
        let registry = in_tree_registry_with(FeatureGates::for_version(KubeVersion::new(37, 1)));
        let err = SchedulerConfig::from_str(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
             profiles: [{plugins: {multiPoint: {enabled: [{name: TopologyPlacementGenerator}]}}}]",
            "c.yaml",
            &registry,
        )
        .unwrap_err()
        .to_string();
        assert!(!err.contains("creating profile"), "{err}");
        assert!(err.contains("TopologyPlacementGenerator"), "{err}");
    }
}
