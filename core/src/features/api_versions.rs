//! The API versions each release's kube-scheduler reads its kinds at, for the kinds whose version
//! changed between the supported releases (resource.k8s.io); every other kind the engine reads is
//! read at the same version by all of them (`v1`, `storage.k8s.io/v1`, `policy/v1`, …).
//!
//! The live loader lists each kind at the one version of the object-kind table
//! (`snapshot::kinds`). When an API server does not serve that version, this table says whether the
//! cluster's own scheduler would have read the kind there: if it reads another version (a v1.33
//! scheduler reads DRA at `v1beta1`, which v1.33 does not serve by default either, and its DRA is
//! off by default), the missing list is not a loss and nothing is said; if it reads the same
//! version, the missing list is worth a warning.
//!
//! Sources: the informers and clients of each release's `pkg/scheduler` and
//! `k8s.io/dynamic-resource-allocation` (`.Resource().V1beta1()`, `.V1alpha3()`, …), summarized in
//! docs/versions.md.

use super::version::KubeVersion;

/// Per kind of resource.k8s.io: the apiVersion each supported minor's kube-scheduler (and, for
/// ResourceClaimTemplate, the resourceclaim controller the engine stands in for) reads it at, in
/// `KubeVersion::SUPPORTED` order (v1.33, v1.34, v1.35, v1.36, v1.37).
const READ_VERSIONS: &[(&str, [&str; 5])] = &[
    (
        "ResourceClaim",
        [V1BETA1, RESOURCE_V1, RESOURCE_V1, RESOURCE_V1, RESOURCE_V1],
    ),
    (
        "ResourceClaimTemplate",
        [V1BETA1, RESOURCE_V1, RESOURCE_V1, RESOURCE_V1, RESOURCE_V1],
    ),
    (
        "ResourceSlice",
        [V1BETA1, RESOURCE_V1, RESOURCE_V1, RESOURCE_V1, RESOURCE_V1],
    ),
    (
        "DeviceClass",
        [V1BETA1, RESOURCE_V1, RESOURCE_V1, RESOURCE_V1, RESOURCE_V1],
    ),
    (
        // Read only with DRADeviceTaintRules on (alpha, off by default, until v1.36's beta, still
        // off by default; GA in v1.37).
        "DeviceTaintRule",
        [V1ALPHA3, V1ALPHA3, V1ALPHA3, V1BETA2, RESOURCE_V1],
    ),
];

/// The kinds of scheduling.k8s.io's workload API (Workload, PodGroup, CompositePodGroup): a kube-scheduler reads
/// them only with GenericWorkload on (alpha in v1.35 and v1.36, beta and off by default in v1.37),
/// and an API server serves them only where their (non-GA) version is enabled. A server that does
/// not serve them has no pod groups to read, whatever its release: nothing is missing. Karpenter's
/// NodePool likewise: a cluster without Karpenter has no pools, and kube-scheduler never reads them.
const READ_ONLY_WHERE_SERVED: &[&str] = &["Workload", "PodGroup", "CompositePodGroup", "NodePool"];

const RESOURCE_V1: &str = "resource.k8s.io/v1";
const V1BETA2: &str = "resource.k8s.io/v1beta2";
const V1BETA1: &str = "resource.k8s.io/v1beta1";
const V1ALPHA3: &str = "resource.k8s.io/v1alpha3";

/// The apiVersion `release`'s kube-scheduler reads `kind` at, when the table names one (a
/// release outside the supported range reads as the nearest supported one).
pub fn scheduler_read_version(release: KubeVersion, kind: &str) -> Option<&'static str> {
    let column = KubeVersion::SUPPORTED
        .iter()
        .rposition(|v| v.minor <= release.minor)
        .unwrap_or(0);
    READ_VERSIONS
        .iter()
        .find(|(name, _)| *name == kind)
        .map(|(_, versions)| versions[column])
}

/// Whether `release`'s kube-scheduler reads `kind` at `api_version` (true for the kinds whose
/// version never changed).
pub fn scheduler_reads_at(release: KubeVersion, kind: &str, api_version: &str) -> bool {
    scheduler_read_version(release, kind).is_none_or(|read| read == api_version)
}

/// Whether a server that does not serve `kind` (404) lacks nothing its own kube-scheduler would
/// read, whatever its release: the workload API's kinds (see [`READ_ONLY_WHERE_SERVED`]).
pub fn read_only_where_served(kind: &str) -> bool {
    READ_ONLY_WHERE_SERVED.contains(&kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_workload_api_and_node_pools_are_read_only_where_served() {
        for (kind, want) in [
            ("PodGroup", true),
            ("Workload", true),
            ("CompositePodGroup", true),
            ("NodePool", true),
            ("DeviceTaintRule", false),
            ("PriorityClass", false),
        ] {
            assert_eq!(read_only_where_served(kind), want, "{kind}");
        }
    }

    #[test]
    fn resource_kinds_are_read_at_v1_from_v1_34_and_device_taint_rules_from_v1_37() {
        let reads = |kind| KubeVersion::SUPPORTED.map(|v| scheduler_reads_at(v, kind, RESOURCE_V1));
        for kind in [
            "ResourceClaim",
            "ResourceClaimTemplate",
            "ResourceSlice",
            "DeviceClass",
        ] {
            assert_eq!(reads(kind), [false, true, true, true, true], "{kind}");
        }
        assert_eq!(reads("DeviceTaintRule"), [false, false, false, false, true]);
        assert_eq!(
            scheduler_read_version(KubeVersion::new(36, 3), "DeviceTaintRule"),
            Some(V1BETA2)
        );
        // Kinds whose version never changed are read where the engine reads them.
        assert!(scheduler_reads_at(KubeVersion::new(33, 13), "Pod", "v1"));
        // Outside the range: the nearest release's column.
        assert!(!scheduler_reads_at(
            KubeVersion::new(31, 0),
            "DeviceClass",
            RESOURCE_V1
        ));
        assert!(scheduler_reads_at(
            KubeVersion::new(38, 0),
            "DeviceTaintRule",
            RESOURCE_V1
        ));
    }
}
