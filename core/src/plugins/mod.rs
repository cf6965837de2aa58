//! kube-scheduler's in-tree plugins, one module per plugin (folders where a plugin needs several files),
//! and the registry that maps a plugin name to its factory.

use crate::framework::profile::PluginRef;
use crate::framework::runtime::Registry;

pub mod default_binder;
pub mod default_preemption;
pub mod dynamic_resources;
pub mod helper;
pub mod image_locality;
pub mod inter_pod_affinity;
pub mod names;
pub mod node_affinity;
pub mod node_declared_features;
pub mod node_name;
pub mod node_ports;
pub mod node_resources;
pub mod node_unschedulable;
pub mod node_volume_limits;
pub mod pod_topology_spread;
pub mod queue_sort;
pub mod scheduling_gates;
pub mod selector_spread;
pub mod taint_toleration;
pub mod volume_binding;
pub mod volume_restrictions;
pub mod volume_zone;

#[cfg(test)]
mod extension_points_tests;

/// Go's `NewInTreeRegistry`: every plugin this engine implements, by name.
pub fn in_tree_registry() -> Registry {
    let mut registry = Registry::new(default_multi_point());
    registry.insert(names::DYNAMIC_RESOURCES, dynamic_resources::new);
    registry.insert(names::POD_TOPOLOGY_SPREAD, pod_topology_spread::new);
    registry.insert(names::NODE_RESOURCES_FIT, node_resources::fit::new);
    registry.insert(
        names::NODE_RESOURCES_BALANCED_ALLOCATION,
        node_resources::balanced_allocation::new,
    );
    registry.insert(names::SCHEDULING_GATES, scheduling_gates::new);
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

/// The default MultiPoint plugins of v1.37.1 with the release's default feature gates: DRA (GA) inserts
/// DynamicResources before DefaultPreemption; NodeDeclaredFeatures (GA) is appended; GenericWorkload and
/// InPlacePodVerticalScalingSchedulerPreemption are off.
pub fn default_multi_point() -> Vec<PluginRef> {
    let w = |name: &str, weight: i32| PluginRef {
        name: name.to_string(),
        weight: Some(weight),
    };
    let p = |name: &str| PluginRef {
        name: name.to_string(),
        weight: None,
    };
    vec![
        p(names::SCHEDULING_GATES),
        p(names::PRIORITY_SORT),
        p(names::NODE_NAME),
        p(names::NODE_UNSCHEDULABLE),
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
        w(names::DYNAMIC_RESOURCES, 2),
        p(names::DEFAULT_PREEMPTION),
        w(names::NODE_RESOURCES_BALANCED_ALLOCATION, 1),
        w(names::IMAGE_LOCALITY, 1),
        p(names::DEFAULT_BINDER),
        p(names::NODE_DECLARED_FEATURES),
    ]
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
            let plugin = factory(None, &handle).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(plugin.name(), name);
        }
    }
}
