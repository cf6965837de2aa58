//! Plugin names, as kube-scheduler's `plugins/names` spells them (profiles and messages use these),
//! and which of them each release's kube-scheduler registers (`plugins/registry.go`
//! `NewInTreeRegistry`): a profile naming a plugin its release does not have is refused there.
#![allow(missing_docs)] // each constant is its own documentation

use crate::features::KubeVersion;

pub const PRIORITY_SORT: &str = "PrioritySort";
pub const DEFAULT_BINDER: &str = "DefaultBinder";
pub const DEFAULT_PREEMPTION: &str = "DefaultPreemption";
pub const DYNAMIC_RESOURCES: &str = "DynamicResources";
pub const IMAGE_LOCALITY: &str = "ImageLocality";
pub const INTER_POD_AFFINITY: &str = "InterPodAffinity";
pub const NODE_AFFINITY: &str = "NodeAffinity";
pub const NODE_DECLARED_FEATURES: &str = "NodeDeclaredFeatures";
pub const NODE_NAME: &str = "NodeName";
pub const NODE_PORTS: &str = "NodePorts";
pub const NODE_RESOURCES_BALANCED_ALLOCATION: &str = "NodeResourcesBalancedAllocation";
pub const NODE_RESOURCES_FIT: &str = "NodeResourcesFit";
pub const NODE_UNSCHEDULABLE: &str = "NodeUnschedulable";
pub const NODE_VOLUME_LIMITS: &str = "NodeVolumeLimits";
pub const POD_TOPOLOGY_SPREAD: &str = "PodTopologySpread";
pub const SCHEDULING_GATES: &str = "SchedulingGates";
pub const SELECTOR_SPREAD: &str = "SelectorSpread";
pub const TAINT_TOLERATION: &str = "TaintToleration";
pub const VOLUME_BINDING: &str = "VolumeBinding";
pub const VOLUME_RESTRICTIONS: &str = "VolumeRestrictions";
pub const VOLUME_ZONE: &str = "VolumeZone";
pub const GANG_SCHEDULING: &str = "GangScheduling";
// Upstream plugins this engine does not implement (a profile naming them is refused as not
// implemented on the releases that have them).
pub const TOPOLOGY_PLACEMENT_GENERATOR: &str = "TopologyPlacementGenerator";
pub const POD_GROUP_PODS_COUNT: &str = "PodGroupPodsCount";
pub const DEFERRED_POD_SCHEDULING: &str = "DeferredPodScheduling";

/// Every name above (the registry test checks registered plugins against it).
pub const ALL: &[&str] = &[
    PRIORITY_SORT,
    DEFAULT_BINDER,
    DEFAULT_PREEMPTION,
    DYNAMIC_RESOURCES,
    GANG_SCHEDULING,
    IMAGE_LOCALITY,
    INTER_POD_AFFINITY,
    NODE_AFFINITY,
    NODE_DECLARED_FEATURES,
    NODE_NAME,
    NODE_PORTS,
    NODE_RESOURCES_BALANCED_ALLOCATION,
    NODE_RESOURCES_FIT,
    NODE_UNSCHEDULABLE,
    NODE_VOLUME_LIMITS,
    POD_TOPOLOGY_SPREAD,
    SCHEDULING_GATES,
    SELECTOR_SPREAD,
    TAINT_TOLERATION,
    VOLUME_BINDING,
    VOLUME_RESTRICTIONS,
    VOLUME_ZONE,
];

/// The plugins every supported release's `NewInTreeRegistry` has (v1.33's registry).
const IN_EVERY_RELEASE: &[&str] = &[
    DYNAMIC_RESOURCES,
    IMAGE_LOCALITY,
    TAINT_TOLERATION,
    NODE_NAME,
    NODE_PORTS,
    NODE_AFFINITY,
    POD_TOPOLOGY_SPREAD,
    NODE_UNSCHEDULABLE,
    NODE_RESOURCES_FIT,
    NODE_RESOURCES_BALANCED_ALLOCATION,
    VOLUME_BINDING,
    VOLUME_RESTRICTIONS,
    VOLUME_ZONE,
    NODE_VOLUME_LIMITS,
    INTER_POD_AFFINITY,
    PRIORITY_SORT,
    DEFAULT_BINDER,
    DEFAULT_PREEMPTION,
    SCHEDULING_GATES,
];

/// The plugins later registries added, with the first release that has each
/// (`plugins/registry.go` of v1.35.4, v1.36.3, v1.37.1).
const ADDED_AFTER_V1_33: &[(&str, KubeVersion)] = &[
    (NODE_DECLARED_FEATURES, KubeVersion::new(35, 0)),
    (GANG_SCHEDULING, KubeVersion::new(35, 0)),
    (TOPOLOGY_PLACEMENT_GENERATOR, KubeVersion::new(36, 0)),
    (POD_GROUP_PODS_COUNT, KubeVersion::new(36, 0)),
    (DEFERRED_POD_SCHEDULING, KubeVersion::new(37, 0)),
];

/// Plugins this engine offers that no supported release registers: accepted on every release
/// (SelectorSpread, removed upstream after 1.26, for profiles that still enable it).
const ENGINE_EXTENSIONS: &[&str] = &[SELECTOR_SPREAD];

/// The plugin names a profile may use on `version`: its kube-scheduler's in-tree registry plus
/// this engine's extensions. Any other name is refused with that release's words.
pub fn known_to_release(version: KubeVersion) -> Vec<&'static str> {
    IN_EVERY_RELEASE
        .iter()
        .copied()
        .chain(
            ADDED_AFTER_V1_33
                .iter()
                .filter(|(_, since)| *since <= version)
                .map(|(name, _)| *name),
        )
        .chain(ENGINE_EXTENSIONS.iter().copied())
        .collect()
}
