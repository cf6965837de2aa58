//! The feature gates the engine decides with (upstream's `pkg/features`, read by the plugins through
//! `framework/plugins/feature.Features`) and the release they belong to: one value per engine, handed
//! to every plugin factory by the registry, read by `default_multi_point` to build the default
//! plugin list, and given to the snapshot, whose request sums depend on gates too (upstream's
//! `PodInfo.CalculateResource` reads the process-wide gates). It sits with the foundations, below
//! the snapshot and the framework, as `pkg/features` sits below everything upstream;
//! `framework::FeatureGates` re-exports it.
//!
//! A release decides the gates' defaults ([`FeatureGates::for_version`], from the generated table
//! of [`gates`]), the code changes no gate decides ([`release::ReleaseChanges`]) and the API versions
//! its scheduler reads ([`api_versions`]); [`version::KubeVersion`] names a release.
//! `--feature-gates` is [`FeatureGates::with_overrides`].

pub mod api_versions;
pub mod gates;
pub mod release;
pub mod version;

pub use gates::{FeatureGateError, GateOverrides, ReleaseGates};
pub use release::ReleaseChanges;
pub use version::{KubeVersion, VersionError};

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
    /// `GenericWorkload` (beta, off): the workload API; in v1.37 it also adds GangScheduling to
    /// the default plugins ([`FeatureGates::gang_scheduling_enabled`]).
    pub generic_workload: bool,
    /// `GangScheduling` (alpha, off; v1.35 and v1.36 only, needs GenericWorkload): adds
    /// GangScheduling to the default plugins there. v1.37 has no such gate.
    pub gang_scheduling: bool,
    /// `TaintTolerationComparisonOperators` (alpha, off): when on, `Lt`/`Gt` tolerations compare
    /// numeric taint values; when off they tolerate nothing.
    pub taint_toleration_comparison_operators: bool,
    /// `InPlacePodLevelResourcesVerticalScaling` (beta, on): the pod-level status lists and the
    /// pod-level resize status are read in request sums; off, the container statuses are.
    pub in_place_pod_level_resources_vertical_scaling: bool,
    /// `InPlacePodVerticalScalingSchedulerPreemption` (alpha, off; not modelled:
    /// DeferredPodScheduling is not implemented).
    pub in_place_pod_vertical_scaling_scheduler_preemption: bool,
    /// `TopologyAwareWorkloadScheduling` (alpha, off): the pod group cycle tries the group in one
    /// topology domain at a time ([`crate::schedule::placement`]).
    pub topology_aware_workload_scheduling: bool,
    /// `InterPodAffinityHostnameFastPath` (alpha, off; not modelled).
    pub inter_pod_affinity_hostname_fast_path: bool,
    /// `PodGroupPreemptionPolicy` (alpha, off): a pod group's preemption policy is its PodGroup's
    /// `spec.preemptionPolicy` instead of its pods'.
    pub pod_group_preemption_policy: bool,
    /// `CompositePodGroup` (alpha, off): a PodGroup may have a parent CompositePodGroup and the
    /// pod group cycle schedules the whole tree ([`crate::schedule::composite`]).
    pub composite_pod_group: bool,
    /// `ClearingNominatedNodeNameAfterBinding` (beta, on): the API server clears
    /// `status.nominatedNodeName` when a pod is bound; off, the scheduler (or the webhook) must.
    pub clearing_nominated_node_name_after_binding: bool,
    /// Not a gate: the release whose code the engine follows.
    pub version: KubeVersion,
    /// Not a gate: that release's code changes, `ReleaseChanges::of(version)`.
    pub changes: ReleaseChanges,
    /// Not a gate: the gates `--feature-gates` set ([`FeatureGates::with_overrides`]), by row of
    /// the release's table (so they are applied after the release is chosen; `for_version`
    /// clears them).
    pub overrides: GateOverrides,
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
            gang_scheduling: false,
            taint_toleration_comparison_operators: false,
            in_place_pod_level_resources_vertical_scaling: true,
            in_place_pod_vertical_scaling_scheduler_preemption: false,
            topology_aware_workload_scheduling: false,
            inter_pod_affinity_hostname_fast_path: false,
            pod_group_preemption_policy: false,
            composite_pod_group: false,
            clearing_nominated_node_name_after_binding: true,
            version: KubeVersion::PINNED,
            changes: ReleaseChanges::of(KubeVersion::PINNED),
            overrides: GateOverrides::NONE,
        }
    }
}

impl Default for FeatureGates {
    /// v1.37.1's defaults, the release this engine is exact for.
    fn default() -> Self {
        FeatureGates::v1_37()
    }
}

impl FeatureGates {
    /// The gate of this name (upstream's spelling), if the engine reads it.
    pub fn gate_mut(&mut self, name: &str) -> Option<&mut bool> {
        Some(match name {
            "DRAExtendedResource" => &mut self.dra_extended_resource,
            "DRAPrioritizedList" => &mut self.dra_prioritized_list,
            "DRAAdminAccess" => &mut self.dra_admin_access,
            "DRAConsumableCapacity" => &mut self.dra_consumable_capacity,
            "DRADeviceCompatibilityGroups" => &mut self.dra_device_compatibility_groups,
            "DRAFractionalCapacityRange" => &mut self.dra_fractional_capacity_range,
            "DRADerivedAttributes" => &mut self.dra_derived_attributes,
            "DRADeviceTaints" => &mut self.dra_device_taints,
            "DRADeviceBindingConditions" => &mut self.dra_device_binding_conditions,
            "DRAListTypeAttributes" => &mut self.dra_list_type_attributes,
            "DRANodeAllocatableResources" => &mut self.dra_node_allocatable_resources,
            "DRAOptionalNodeOperations" => &mut self.dra_optional_node_operations,
            "DRAPartitionableDevices" => &mut self.dra_partitionable_devices,
            "DRAResourceClaimDeviceStatus" => &mut self.dra_resource_claim_device_status,
            "DRASchedulerFilterTimeout" => &mut self.dra_scheduler_filter_timeout,
            "DRAWorkloadResourceClaims" => &mut self.dra_workload_resource_claims,
            "DynamicResourceAllocation" => &mut self.dynamic_resource_allocation,
            "VolumeAttributesClass" => &mut self.volume_attributes_class,
            "VolumeLimitScaling" => &mut self.volume_limit_scaling,
            "NodeInclusionPolicyInPodTopologySpread" => {
                &mut self.node_inclusion_policy_in_pod_topology_spread
            }
            "MatchLabelKeysInPodTopologySpread" => &mut self.match_label_keys_in_pod_topology_spread,
            "InPlacePodVerticalScaling" => &mut self.in_place_pod_vertical_scaling,
            "SchedulerAsyncPreemption" => &mut self.scheduler_async_preemption,
            "PodLevelResources" => &mut self.pod_level_resources,
            "StorageCapacityScoring" => &mut self.storage_capacity_scoring,
            "NodeDeclaredFeatures" => &mut self.node_declared_features,
            "GenericWorkload" => &mut self.generic_workload,
            "GangScheduling" => &mut self.gang_scheduling,
            "TaintTolerationComparisonOperators" => &mut self.taint_toleration_comparison_operators,
            "InPlacePodLevelResourcesVerticalScaling" => {
                &mut self.in_place_pod_level_resources_vertical_scaling
            }
            "InPlacePodVerticalScalingSchedulerPreemption" => {
                &mut self.in_place_pod_vertical_scaling_scheduler_preemption
            }
            "TopologyAwareWorkloadScheduling" => &mut self.topology_aware_workload_scheduling,
            "InterPodAffinityHostnameFastPath" => &mut self.inter_pod_affinity_hostname_fast_path,
            "PodGroupPreemptionPolicy" => &mut self.pod_group_preemption_policy,
            "CompositePodGroup" => &mut self.composite_pod_group,
            "ClearingNominatedNodeNameAfterBinding" => &mut self.clearing_nominated_node_name_after_binding,
            _ => return None,
        })
    }

    /// The gates of `version`'s kube-scheduler started without `--feature-gates`, with that
    /// release's code changes: each gate the engine reads takes its default from the release's
    /// generated table ([`gates::ReleaseGates`]); a gate the release does not have is off.
    pub fn for_version(version: KubeVersion) -> Self {
        let mut features = FeatureGates::v1_37();
        features.version = version;
        features.changes = ReleaseChanges::of(version);
        features.overrides = GateOverrides::NONE;
        features.refresh_gates();
        features
    }

    /// Whether the default plugins have GangScheduling (`applyFeatureGates`): GenericWorkload's
    /// doing from v1.37, the GangScheduling gate's before.
    pub fn gang_scheduling_enabled(&self) -> bool {
        if self.changes.gang_scheduling_follows_generic_workload {
            self.generic_workload
        } else {
            self.gang_scheduling
        }
    }

    /// These gates with a `--feature-gates` value applied, in kube-scheduler's syntax
    /// (`A=true,B=false`, or `kube:A=true,…`), checked as this release's kube-scheduler checks it:
    /// an error is that binary's words. Gates the release has but the engine does not read are
    /// accepted and kept ([`FeatureGates::explicitly_set`]); applying a second value adds to the
    /// first, as repeating the flag does.
    pub fn with_overrides(mut self, text: &str) -> Result<FeatureGates, FeatureGateError> {
        self.overrides = gates::apply(self.release_gates(), self.overrides, text)?;
        self.refresh_gates();
        Ok(self)
    }

    /// The gate table of this release.
    pub fn release_gates(&self) -> &'static ReleaseGates {
        ReleaseGates::of(self.version)
    }

    /// The gates `--feature-gates` set, with their values, by name (including those the engine
    /// does not read).
    pub fn explicitly_set(&self) -> Vec<(&'static str, bool)> {
        self.overrides.listed(self.release_gates())
    }

    /// Sets every gate the engine reads from the release's table and the explicit settings.
    fn refresh_gates(&mut self) {
        let release = self.release_gates();
        let overrides = self.overrides;
        for name in ENGINE_GATES {
            let value = gates::effective(release, &overrides, name).unwrap_or(false);
            if let Some(gate) = self.gate_mut(name) {
                *gate = value;
            }
        }
    }
}

/// The gates the engine reads: the names `gate_mut` knows.
pub const ENGINE_GATES: &[&str] = &[
    "DRAExtendedResource",
    "DRAPrioritizedList",
    "DRAAdminAccess",
    "DRAConsumableCapacity",
    "DRADeviceCompatibilityGroups",
    "DRAFractionalCapacityRange",
    "DRADerivedAttributes",
    "DRADeviceTaints",
    "DRADeviceBindingConditions",
    "DRAListTypeAttributes",
    "DRANodeAllocatableResources",
    "DRAOptionalNodeOperations",
    "DRAPartitionableDevices",
    "DRAResourceClaimDeviceStatus",
    "DRASchedulerFilterTimeout",
    "DRAWorkloadResourceClaims",
    "DynamicResourceAllocation",
    "VolumeAttributesClass",
    "VolumeLimitScaling",
    "NodeInclusionPolicyInPodTopologySpread",
    "MatchLabelKeysInPodTopologySpread",
    "InPlacePodVerticalScaling",
    "SchedulerAsyncPreemption",
    "PodLevelResources",
    "StorageCapacityScoring",
    "NodeDeclaredFeatures",
    "GenericWorkload",
    "GangScheduling",
    "TaintTolerationComparisonOperators",
    "InPlacePodLevelResourcesVerticalScaling",
    "InPlacePodVerticalScalingSchedulerPreemption",
    "TopologyAwareWorkloadScheduling",
    "InterPodAffinityHostnameFastPath",
    "PodGroupPreemptionPolicy",
    "CompositePodGroup",
    "ClearingNominatedNodeNameAfterBinding",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pinned_release_has_the_pinned_defaults() {
        assert_eq!(
            FeatureGates::for_version(KubeVersion::PINNED),
            FeatureGates::v1_37()
        );
    }

    #[test]
    fn older_releases_have_their_own_defaults_and_changes() {
        let v1_33 = FeatureGates::for_version(KubeVersion::new(33, 13));
        assert!(!v1_33.dynamic_resource_allocation);
        assert!(!v1_33.pod_level_resources);
        assert!(!v1_33.node_declared_features);
        assert!(v1_33.changes.untolerated_taint_reason_names_taint);
        let v1_36 = FeatureGates::for_version(KubeVersion::new(36, 3));
        assert!(v1_36.node_declared_features);
        assert!(!v1_36.storage_capacity_scoring);
        assert!(!v1_36.changes.preemption_reports_placement);
        assert_eq!(v1_36.version, KubeVersion::new(36, 3));
    }

    #[test]
    fn every_gate_the_engine_reads_has_a_field_and_a_release() {
        let mut gates = FeatureGates::v1_37();
        for name in ENGINE_GATES {
            assert!(gates.gate_mut(name).is_some(), "{name} has no field");
            assert!(
                KubeVersion::SUPPORTED
                    .iter()
                    .any(|v| ReleaseGates::of(*v).get(name).is_some()),
                "{name} is in no release's table"
            );
        }
    }

    /// docs/versions.md "Feature gates" is rendered from the tables; `make feature-gates`
    /// rewrites it (KUBECTL_SCHED_WRITE_DOCS=1).
    #[test]
    fn gate_table_in_docs_is_current() {
        const BEGIN: &str = "<!-- gate table: generated by `make feature-gates` -->\n";
        const END: &str = "<!-- end of gate table -->";
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/versions.md");
        let docs = std::fs::read_to_string(path).expect("docs/versions.md");
        let (head, rest) = docs.split_once(BEGIN).expect("the gate table's begin marker");
        let (current, tail) = rest.split_once(END).expect("the gate table's end marker");
        let table = gates::markdown_table(ENGINE_GATES);
        if current == table {
            return;
        }
        if std::env::var_os("KUBECTL_SCHED_WRITE_DOCS").is_some() {
            std::fs::write(path, format!("{head}{BEGIN}{table}{END}{tail}")).expect("write docs");
            return;
        }
        panic!("docs/versions.md's gate table is stale: run `make feature-gates`");
    }
}
