//! The code changes between kube-scheduler releases that no feature gate decides: reason strings
//! reworded, fixes, a formula replaced. One table, each row a named behaviour and the versions
//! whose code has it (`[from, until)`, patch-exact where a change was back-ported into a patch);
//! plugins read the named booleans of [`ReleaseChanges`], never a version.
//!
//! Sources are each release's `pkg/scheduler` (module cache); the file and line of each change
//! are in the rows' docs and in docs/versions.md.

use super::version::KubeVersion;

/// The first version of all (the table's open lower bound).
const ANY: KubeVersion = KubeVersion::new(0, 0);
/// Past every version (the table's open upper bound).
const NEVER: KubeVersion = KubeVersion::new(u32::MAX, u32::MAX);

/// `v1.<minor>.<patch>`, for the table.
const fn v(minor: u32, patch: u32) -> KubeVersion {
    KubeVersion::new(minor, patch)
}

macro_rules! release_changes {
    ($(
        $(#[doc = $doc:literal])*
        $field:ident: $from:expr => $until:expr;
    )*) => {
        /// How one release's kube-scheduler code differs where no gate decides: one boolean per
        /// change, true when the release has the behaviour the field names.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct ReleaseChanges {
            $( $(#[doc = $doc])* pub $field: bool, )*
        }

        /// Every row of the table: the field's name and the versions `[from, until)` that have it.
        pub const RELEASE_CHANGES: &[(&str, KubeVersion, KubeVersion)] = &[
            $( (stringify!($field), $from, $until), )*
        ];

        impl ReleaseChanges {
            /// The behaviours of `version`'s code.
            pub const fn of(version: KubeVersion) -> Self {
                ReleaseChanges {
                    $( $field: in_range(version, $from, $until), )*
                }
            }
        }
    };
}

/// `from <= version < until`, in a const context.
const fn in_range(version: KubeVersion, from: KubeVersion, until: KubeVersion) -> bool {
    let after_from =
        version.minor > from.minor || (version.minor == from.minor && version.patch >= from.patch);
    let before_until =
        version.minor < until.minor || (version.minor == until.minor && version.patch < until.patch);
    after_from && before_until
}

release_changes! {
    /// TaintToleration's Filter names the first untolerated taint, one reason per taint:
    /// `node(s) had untolerated taint {key: value}` (up to v1.34.1; v1.34.2 and later write
    /// `node(s) had untolerated taint(s)`; `tainttoleration/taint_toleration.go`).
    untolerated_taint_reason_names_taint: ANY => v(34, 2);
    /// VolumeRestrictions' ReadWriteOncePod reason is the v1.33 wording, `node has pod using
    /// PersistentVolumeClaim with the same name and ReadWriteOncePod access mode`
    /// (`volumerestrictions/volume_restrictions.go`).
    read_write_once_pod_reason_before_v1_34: ANY => v(34, 0);
    /// NodeResourcesFit rejects with UnschedulableAndUnresolvable when a request exceeds the
    /// node's allocatable (no preemption can help); v1.33 always says Unschedulable
    /// (`noderesources/fit.go`).
    fit_unresolvable_above_allocatable: v(34, 0) => NEVER;
    /// NodeName has a PreFilter that restricts the cycle to `spec.nodeName`, and the default
    /// plugins list NodeName before NodeUnschedulable (`nodename/node_name.go`,
    /// `apis/config/v1/default_plugins.go`).
    node_name_pre_filter: v(37, 0) => NEVER;
    /// NodeResourcesBalancedAllocation scores the change the pod makes to the node's balance
    /// (`MaxNodeScore/2 + (MaxNodeScore/2 + withPod - withoutPod)/2`) rather than the balance with
    /// the pod (`noderesources/balanced_allocation.go`).
    balanced_allocation_scores_the_change: v(36, 0) => NEVER;
    /// ImageLocality adds the images of image volumes to the score's sum
    /// (`imagelocality/image_locality.go`).
    image_locality_sums_image_volumes: v(36, 0) => NEVER;
    /// ImageLocality also counts image volumes in the score's threshold.
    image_locality_counts_image_volumes: v(37, 0) => NEVER;
    /// InterPodAffinity loses the `namespaceSelector` reset of a term that lists namespaces
    /// (`mergeAffinityTermNamespacesIfNotEmpty` takes the term by value), so a selector that
    /// matches an empty label set matches pods of every namespace (`interpodaffinity/plugin.go`).
    inter_pod_affinity_namespace_selector_kept: v(34, 0) => v(37, 0);
    /// Preemption stops decrementing PodDisruptionBudgets for a victim at the first budget it
    /// violates (`preemption/util.go FilterVictimsWithPDBViolation`); earlier releases decrement
    /// every matching budget.
    pdb_violation_stops_at_first_budget: v(37, 0) => NEVER;
    /// A successful preemption reports `found a potential placement for pod on node N,
    /// preempting K victims` after `preemption: ` (`preemption/preemption.go`).
    preemption_reports_placement: v(37, 0) => NEVER;
    /// DynamicResources' PostFilter says `no new claims to deallocate` when the cycle knows no claim
    /// of the pod — on v1.34–v1.36 for every pod without claims, so kube-scheduler writes it before
    /// the preemption part of every FitError (`dynamicresources/dynamicresources.go` PostFilter;
    /// v1.37 logs it only).
    dynamic_resources_says_no_new_claims: ANY => v(37, 0);
    /// DynamicResources' PostFilter returns a message-less Unschedulable for a pod without
    /// `spec.resourceClaims` before reading the cycle state (v1.33.13 dynamicresources.go:631), so
    /// such a pod never gets `no new claims to deallocate` (nor `not found`).
    dynamic_resources_post_filter_checks_pod_claims_first: ANY => v(34, 0);
    /// DynamicResources' PostFilter says `still not schedulable` when no unavailable claim could be
    /// deallocated (v1.37's `deallocateOrDeletePodClaims` returns a message-less status).
    dynamic_resources_says_still_not_schedulable: ANY => v(37, 0);
    /// DynamicResources implements Score (weight 2 in the default plugins) for `firstAvailable`
    /// subrequests.
    dynamic_resources_scores: v(35, 0) => NEVER;
    /// DynamicResources' Score returns 0 unless `DRAPrioritizedList` is on (v1.36.2 and later;
    /// v1.35.4 and v1.36.1 score whatever the gate says).
    dynamic_resources_score_needs_prioritized_list: v(36, 2) => NEVER;
    /// DynamicResources' `computeScore` reads an already allocated claim's allocation from its
    /// status and indexes the node's allocation results among the claims that needed one (v1.36.2
    /// and later); before, result `i` belongs to claim `i`, and a pod with more claims than results
    /// gets the error `number of allocations N is smaller than number of claims`.
    dynamic_resources_score_indexes_unallocated_claims: v(36, 2) => NEVER;
    /// The DRA allocator's CEL runtime error names the device (`selector #1 on device d/p/x: CEL
    /// runtime error: …`) and a `no such key` error carries the optional-chaining hint
    /// (dynamic-resource-allocation v0.37 `structured/internal/*/allocator_*.go`, `cel/errors.go`).
    dra_cel_runtime_error_names_device: v(37, 0) => NEVER;
    /// The DRA allocator never allocates from an incomplete pool and counts a pool's slices across
    /// all nodes (v0.35 `allocator_*.go` `if pool.IsIncomplete || pool.IsInvalid { continue }`,
    /// `pools_*.go`); v0.34 refuses an incomplete pool only for `allocationMode: All`.
    dra_incomplete_pools_unusable: v(35, 0) => NEVER;
    /// An invalid pool fails the DRA allocation on the node only (`ErrFailedAllocationOnNode`:
    /// DynamicResources' Filter says `invalid resource pools were encountered`, Unschedulable and
    /// unresolvable); v0.34's allocator returns `pool <name> is invalid: <reason>`, which v1.34's
    /// Filter reports as an Error.
    dra_invalid_pool_fails_node_only: v(35, 0) => NEVER;
    /// DynamicResources' Filter reports an allocation timeout as an Error (`node N: timed out
    /// trying to allocate devices`); v1.34–v1.35 as UnschedulableAndUnresolvable `timed out
    /// trying to allocate devices` (`dynamicresources/dynamicresources.go` Filter).
    dynamic_resources_timeout_is_error: v(36, 0) => NEVER;
    /// A utilization shape out of order is refused with `utilization values must be sorted in
    /// increasing order` (v1.34 and later: `values must be sorted in increasing order`;
    /// `apis/config/validation/validation_pluginargs.go` validateFunctionShape).
    shape_order_error_says_utilization_values: ANY => v(34, 0);
    /// A profile whose queue sort differs from the first profile's is refused with `queueSort must
    /// be the same for all profiles` and its plugin set in Go syntax (`config.PluginSet{…}`);
    /// v1.34 and later say `must be the same for all profiles` and print the set as JSON
    /// (`apis/config/validation/validation.go` validateCommonQueueSort, apimachinery's
    /// `field.Error.ErrorBody`).
    queue_sort_refusal_in_v1_33_form: ANY => v(34, 0);
    /// NodeResourcesFitArgs' `requestedToCapacityRatio` is required with, and forbidden without,
    /// the RequestedToCapacityRatio strategy, and its shape is checked under
    /// `scoringStrategy.requestedToCapacityRatio.shape`; up to v1.35 it is checked wherever given,
    /// under `scoringStrategy.shape` (`validation_pluginargs.go` ValidateNodeResourcesFitArgs).
    fit_validates_ratio_by_strategy_type: v(36, 0) => NEVER;
    /// NodeDeclaredFeatures' reason lists the unsatisfied requirements (`node declared features
    /// check failed - unsatisfied requirements: …`) instead of `node(s) didn't match Pod's required
    /// features`.
    node_declared_features_reason_lists_requirements: ANY => v(36, 0);
    /// NodeDeclaredFeatures infers `UserNamespacesHostNetworkSupport` for a pod with
    /// `hostNetwork: true` and `hostUsers: false` (component-helpers `nodedeclaredfeatures`
    /// registry; v1.35's infers only `RestartAllContainersOnContainerExits`).
    node_declared_features_infers_user_namespaces_host_network: v(36, 0) => NEVER;
    /// NodeDeclaredFeatures infers `VolumeBindMountOptions` for a volume mount with
    /// `bindMountOptions` (component-helpers `nodedeclaredfeatures` registry).
    node_declared_features_infers_volume_bind_mount_options: v(37, 0) => NEVER;
    /// GenericWorkload adds GangScheduling to the default plugins; v1.35 and v1.36 have a
    /// GangScheduling gate of their own for it (`apis/config/v1/default_plugins.go`).
    gang_scheduling_follows_generic_workload: v(37, 0) => NEVER;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_apply_from_their_first_version_and_stop_at_their_last() {
        let taint = |minor, patch| {
            ReleaseChanges::of(KubeVersion::new(minor, patch)).untolerated_taint_reason_names_taint
        };
        assert!(taint(33, 13));
        assert!(taint(34, 1));
        assert!(!taint(34, 2));
        assert!(!taint(37, 1));
        let leak =
            |minor| ReleaseChanges::of(KubeVersion::new(minor, 0)).inter_pod_affinity_namespace_selector_kept;
        assert_eq!([33, 34, 35, 36, 37].map(leak), [false, true, true, true, false]);
    }

    #[test]
    fn every_row_names_a_range_that_is_not_empty() {
        for (name, from, until) in RELEASE_CHANGES {
            assert!(from < until, "{name}: {from}..{until} is empty");
        }
    }
}
