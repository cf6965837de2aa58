//! Every registered plugin joins exactly the extension points whose traits its type implements: a
//! plugin that implements, say, `FilterPlugin` but whose `Plugin::as_filter` still returns the default
//! `None` would be silently left out of Filter by the framework. The traits implemented are found at
//! compile time on the concrete type (`implemented_extension_traits!`); the points joined are the
//! `as_*` answers of the instance the registry builds.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::framework::interface::{implemented_extension_traits, offered_extension_traits};
use crate::framework::runtime::Handle;
use crate::plugins::{
    default_binder, default_preemption, dynamic_resources, gang_scheduling, image_locality, in_tree_registry,
    inter_pod_affinity, names, node_affinity, node_declared_features, node_name, node_ports, node_resources,
    node_unschedulable, node_volume_limits, pod_topology_spread, queue_sort, scheduling_gates,
    selector_spread, taint_toleration, volume_binding, volume_restrictions, volume_zone,
};
use crate::snapshot::Snapshot;

/// The extension traits each registered plugin's type implements, by plugin name. A new plugin
/// needs a row here; the test below fails for a registered plugin without one.
fn implemented_by_name() -> BTreeMap<&'static str, std::collections::BTreeSet<&'static str>> {
    BTreeMap::from([
        (
            names::DEFAULT_BINDER,
            implemented_extension_traits!(default_binder::DefaultBinder),
        ),
        (
            names::DEFAULT_PREEMPTION,
            implemented_extension_traits!(default_preemption::DefaultPreemption),
        ),
        (
            names::DYNAMIC_RESOURCES,
            implemented_extension_traits!(dynamic_resources::DynamicResources),
        ),
        (
            names::GANG_SCHEDULING,
            implemented_extension_traits!(gang_scheduling::GangScheduling),
        ),
        (
            names::IMAGE_LOCALITY,
            implemented_extension_traits!(image_locality::ImageLocality),
        ),
        (
            names::INTER_POD_AFFINITY,
            implemented_extension_traits!(inter_pod_affinity::InterPodAffinity),
        ),
        (
            names::NODE_AFFINITY,
            implemented_extension_traits!(node_affinity::NodeAffinity),
        ),
        (
            names::NODE_DECLARED_FEATURES,
            implemented_extension_traits!(node_declared_features::NodeDeclaredFeatures),
        ),
        (
            names::NODE_NAME,
            implemented_extension_traits!(node_name::NodeName),
        ),
        (
            names::NODE_PORTS,
            implemented_extension_traits!(node_ports::NodePorts),
        ),
        (
            names::NODE_RESOURCES_BALANCED_ALLOCATION,
            implemented_extension_traits!(node_resources::balanced_allocation::BalancedAllocation),
        ),
        (
            names::NODE_RESOURCES_FIT,
            implemented_extension_traits!(node_resources::fit::Fit),
        ),
        (
            names::NODE_UNSCHEDULABLE,
            implemented_extension_traits!(node_unschedulable::NodeUnschedulable),
        ),
        (
            names::NODE_VOLUME_LIMITS,
            implemented_extension_traits!(node_volume_limits::CsiLimits),
        ),
        (
            names::POD_TOPOLOGY_SPREAD,
            implemented_extension_traits!(pod_topology_spread::PodTopologySpread),
        ),
        (
            names::PRIORITY_SORT,
            implemented_extension_traits!(queue_sort::PrioritySort),
        ),
        (
            names::SCHEDULING_GATES,
            implemented_extension_traits!(scheduling_gates::SchedulingGates),
        ),
        (
            names::SELECTOR_SPREAD,
            implemented_extension_traits!(selector_spread::SelectorSpread),
        ),
        (
            names::TAINT_TOLERATION,
            implemented_extension_traits!(taint_toleration::TaintToleration),
        ),
        (
            names::VOLUME_BINDING,
            implemented_extension_traits!(volume_binding::VolumeBinding),
        ),
        (
            names::VOLUME_RESTRICTIONS,
            implemented_extension_traits!(volume_restrictions::VolumeRestrictions),
        ),
        (
            names::VOLUME_ZONE,
            implemented_extension_traits!(volume_zone::VolumeZone),
        ),
    ])
}

#[test]
fn every_plugin_offers_each_extension_point_its_type_implements() {
    let implemented = implemented_by_name();
    let handle = Handle {
        snapshot: Arc::new(Snapshot::default()),
    };
    let mut wrong = Vec::new();
    let registry = in_tree_registry();
    for (name, factory) in registry.iter() {
        let Some(implemented) = implemented.get(name) else {
            wrong.push(format!(
                "{name} is registered but has no row in implemented_by_name (add its type there)"
            ));
            continue;
        };
        let plugin = factory(None, &handle, registry.features()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let offered = offered_extension_traits(plugin.as_ref());
        for point in implemented.difference(&offered) {
            wrong.push(format!(
                "{name} implements {point} but its Plugin impl does not offer it (the as_* method \
                 for that point returns None, so the framework never calls it)"
            ));
        }
        for point in offered.difference(implemented) {
            wrong.push(format!(
                "{name} offers {point} through another type than the one in implemented_by_name"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The probe itself: a type with no extension trait implements none, and one with a single trait
/// implements exactly that one (so the test above cannot pass by a probe that always answers the same).
#[test]
fn the_probe_tells_implemented_traits_from_missing_ones() {
    struct Nothing;
    assert!(implemented_extension_traits!(Nothing).is_empty());
    assert_eq!(
        implemented_extension_traits!(queue_sort::PrioritySort)
            .into_iter()
            .collect::<Vec<_>>(),
        vec!["QueueSortPlugin"]
    );
    assert_eq!(
        implemented_extension_traits!(pod_topology_spread::PodTopologySpread)
            .into_iter()
            .collect::<Vec<_>>(),
        vec![
            "FilterPlugin",
            "PreFilterExtensions",
            "PreFilterPlugin",
            "PreScorePlugin",
            "ScorePlugin"
        ]
    );
}
