//! Plugin names, as kube-scheduler's `plugins/names` spells them (profiles and messages use these).
#![allow(missing_docs)] // each constant is its own documentation

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

/// Every name above (the registry test checks registered plugins against it).
pub const ALL: &[&str] = &[
    PRIORITY_SORT,
    DEFAULT_BINDER,
    DEFAULT_PREEMPTION,
    DYNAMIC_RESOURCES,
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
