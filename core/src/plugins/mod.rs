//! kube-scheduler's in-tree plugins, one module per plugin (folders where a plugin needs several files),
//! and the registry that maps a plugin name to its factory.

use std::collections::BTreeMap;

use crate::framework::runtime::PluginFactory;

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

/// Go's `NewInTreeRegistry`: every plugin this engine implements, by name.
pub fn in_tree_registry() -> BTreeMap<&'static str, PluginFactory> {
    let mut registry: BTreeMap<&'static str, PluginFactory> = BTreeMap::new();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_plugin_has_a_name_constant() {
        for name in in_tree_registry().keys() {
            assert!(
                names::ALL.contains(name),
                "{name} is registered but not in names.rs"
            );
        }
    }

    #[test]
    fn every_factory_builds_the_plugin_it_is_registered_under() {
        let handle = crate::framework::runtime::Handle {
            snapshot: std::sync::Arc::new(crate::snapshot::Snapshot::default()),
        };
        for (name, factory) in in_tree_registry() {
            let plugin = factory(None, &handle).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(plugin.name(), name);
        }
    }
}
