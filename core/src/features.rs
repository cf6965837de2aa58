//! The feature gates the engine decides with (upstream's `pkg/features`, read by the plugins through
//! `framework/plugins/feature.Features`): one value per engine, handed to every plugin factory by the
//! registry, read by `default_multi_point` to build the default plugin list, and given to the
//! snapshot, whose request sums depend on gates too (upstream's `PodInfo.CalculateResource` reads the
//! process-wide gates). It sits with the foundations, below the snapshot and the framework, as
//! `pkg/features` sits below everything upstream; `framework::FeatureGates` re-exports it.
//!
//! Today the only content is v1.37.1's defaults (`pkg/features/kube_features.go`); there is no
//! `--feature-gates` flag yet. The release-versions work fills in the other releases' defaults and
//! the flag.

/// The feature gates of kube-scheduler's plugins, one field per gate of upstream's
/// `feature.Features` (the struct each plugin factory receives). Each field is named after its
/// upstream gate; its doc says the gate's v1.37.1 stage and what the engine does with it.
///
/// Fields marked "not modelled" are carried so that the set matches upstream's; the engine behaves
/// as with the v1.37.1 default whatever their value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureGates {
    /// `DRAExtendedResource` (GA, locked on): extended resources backed by DeviceClasses, served by
    /// DynamicResources and skipped by NodeResourcesFit on nodes that do not advertise them.
    pub dra_extended_resource: bool,
    /// `DRAPrioritizedList` (GA, locked on): `firstAvailable` subrequests.
    pub dra_prioritized_list: bool,
    /// `DRAAdminAccess` (GA, locked on): admin-access requests.
    pub dra_admin_access: bool,
    /// `DRAConsumableCapacity` (beta, on): devices shared by several claims, each consuming capacity.
    pub dra_consumable_capacity: bool,
    /// `DRADeviceCompatibilityGroups` (alpha, off; not modelled).
    pub dra_device_compatibility_groups: bool,
    /// `DRAFractionalCapacityRange` (beta; its on-by-default spec needs compatibility version 1.37
    /// while a v1.37 binary emulates 1.36 by default, so kube-scheduler reports it off).
    pub dra_fractional_capacity_range: bool,
    /// `DRADerivedAttributes` (alpha, off; not modelled).
    pub dra_derived_attributes: bool,
    /// `DRADeviceTaints` (GA, on): device taints and DeviceTaintRules.
    pub dra_device_taints: bool,
    /// `DRADeviceBindingConditions` (beta, on): binding conditions the binder waits for. The
    /// allocator honours it together with `dra_resource_claim_device_status`.
    pub dra_device_binding_conditions: bool,
    /// `DRAListTypeAttributes` (alpha, off; not modelled).
    pub dra_list_type_attributes: bool,
    /// `DRANodeAllocatableResources` (alpha, off; not modelled: DRA claim statuses are ignored when
    /// summing a node's requests).
    pub dra_node_allocatable_resources: bool,
    /// `DRAOptionalNodeOperations` (alpha, off; not modelled).
    pub dra_optional_node_operations: bool,
    /// `DRAPartitionableDevices` (beta, on): shared counters of partitionable devices.
    pub dra_partitionable_devices: bool,
    /// `DRAResourceClaimDeviceStatus` (GA, locked on): device status in claims.
    pub dra_resource_claim_device_status: bool,
    /// `DRASchedulerFilterTimeout` (beta, on; the timeout itself is the plugin's `filterTimeout` arg).
    pub dra_scheduler_filter_timeout: bool,
    /// `DRAWorkloadResourceClaims` (beta, off; not modelled).
    pub dra_workload_resource_claims: bool,
    /// `DynamicResourceAllocation` (GA, locked on): DynamicResources is in the default plugins,
    /// before DefaultPreemption.
    pub dynamic_resource_allocation: bool,
    /// `VolumeAttributesClass` (GA, locked on; not modelled beyond its default).
    pub volume_attributes_class: bool,
    /// `VolumeLimitScaling` (beta, on): NodeVolumeLimits checks that a CSI driver is installed on
    /// the node before counting its limit.
    pub volume_limit_scaling: bool,
    /// `NodeInclusionPolicyInPodTopologySpread` (GA, locked on): PodTopologySpread honours a
    /// constraint's `nodeAffinityPolicy`/`nodeTaintsPolicy`; off, counted nodes must match the pod's
    /// required node affinity.
    pub node_inclusion_policy_in_pod_topology_spread: bool,
    /// `MatchLabelKeysInPodTopologySpread` (beta, on): PodTopologySpread merges `matchLabelKeys`
    /// into the selector; off, they are ignored.
    pub match_label_keys_in_pod_topology_spread: bool,
    /// `InPlacePodVerticalScaling` (GA, locked on): a pod's requests are the max of spec, allocated
    /// and actuated (`RequestOptions::use_status_resources`); off, spec only.
    pub in_place_pod_vertical_scaling: bool,
    /// `SchedulerAsyncPreemption` (beta, on): preemption plans are ordered as the asynchronous
    /// executor runs them (nominations cleared first); off, as the synchronous one (victims first).
    pub scheduler_async_preemption: bool,
    /// `PodLevelResources` (beta, on): pod-level cpu/memory/hugepages requests replace the container
    /// sum (in the snapshot's request sums, NodeResourcesFit and BalancedAllocation); off, ignored.
    pub pod_level_resources: bool,
    /// `StorageCapacityScoring` (beta, on): VolumeBinding scores nodes by storage capacity.
    pub storage_capacity_scoring: bool,
    /// `NodeDeclaredFeatures` (GA, locked on): NodeDeclaredFeatures is in the default plugins.
    pub node_declared_features: bool,
    /// `GenericWorkload` (beta, off; not modelled: GangScheduling is not implemented).
    pub generic_workload: bool,
    /// `TaintTolerationComparisonOperators` (alpha, off): when on, `Lt`/`Gt` tolerations compare
    /// numeric taint values; when off they tolerate nothing.
    pub taint_toleration_comparison_operators: bool,
    /// `InPlacePodLevelResourcesVerticalScaling` (beta, on): the pod-level status lists and the
    /// pod-level resize status are read in request sums; off, the container statuses are.
    pub in_place_pod_level_resources_vertical_scaling: bool,
    /// `InPlacePodVerticalScalingSchedulerPreemption` (alpha, off; not modelled:
    /// DeferredPodScheduling is not implemented).
    pub in_place_pod_vertical_scaling_scheduler_preemption: bool,
    /// `TopologyAwareWorkloadScheduling` (alpha, off; not modelled).
    pub topology_aware_workload_scheduling: bool,
    /// `InterPodAffinityHostnameFastPath` (alpha, off; not modelled).
    pub inter_pod_affinity_hostname_fast_path: bool,
    /// `PodGroupPreemptionPolicy` (alpha, off; not modelled).
    pub pod_group_preemption_policy: bool,
    /// `CompositePodGroup` (alpha, off; not modelled).
    pub composite_pod_group: bool,
}

impl FeatureGates {
    /// The gates of a v1.37.1 kube-scheduler started without `--feature-gates`.
    pub const fn v1_37() -> Self {
        FeatureGates {
            dra_extended_resource: true,
            dra_prioritized_list: true,
            dra_admin_access: true,
            dra_consumable_capacity: true,
            dra_device_compatibility_groups: false,
            dra_fractional_capacity_range: false,
            dra_derived_attributes: false,
            dra_device_taints: true,
            dra_device_binding_conditions: true,
            dra_list_type_attributes: false,
            dra_node_allocatable_resources: false,
            dra_optional_node_operations: false,
            dra_partitionable_devices: true,
            dra_resource_claim_device_status: true,
            dra_scheduler_filter_timeout: true,
            dra_workload_resource_claims: false,
            dynamic_resource_allocation: true,
            volume_attributes_class: true,
            volume_limit_scaling: true,
            node_inclusion_policy_in_pod_topology_spread: true,
            match_label_keys_in_pod_topology_spread: true,
            in_place_pod_vertical_scaling: true,
            scheduler_async_preemption: true,
            pod_level_resources: true,
            storage_capacity_scoring: true,
            node_declared_features: true,
            generic_workload: false,
            taint_toleration_comparison_operators: false,
            in_place_pod_level_resources_vertical_scaling: true,
            in_place_pod_vertical_scaling_scheduler_preemption: false,
            topology_aware_workload_scheduling: false,
            inter_pod_affinity_hostname_fast_path: false,
            pod_group_preemption_policy: false,
            composite_pod_group: false,
        }
    }
}

impl Default for FeatureGates {
    /// v1.37.1's defaults, the release this engine is exact for.
    fn default() -> Self {
        FeatureGates::v1_37()
    }
}
