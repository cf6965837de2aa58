//! Dynamic Resource Allocation: what `k8s.io/dynamic-resource-allocation` is to kube-scheduler.
//!
//! - [`cel`]: DRA's CEL environment (`device.driver`, `device.attributes`, `device.capacity`,
//!   `device.allowMultipleAllocations`, the Kubernetes quantity/semver/string/list extensions) with
//!   the API server's cost limit, and a cache of compiled selectors.
//! - [`structured`]: the structured-parameters allocator of v1.37.1 (the "incubating" implementation,
//!   which the default feature gates select): the same search order, so the same devices are chosen.
//! - [`templates`]: the claims a pod will get from its ResourceClaimTemplates, made in memory.
//! - [`diagnose`]: explain's claim-by-claim, request-by-request account of why devices were not
//!   found, which kube-scheduler does not print.
//!
//! The DynamicResources plugin (`crate::plugins::dynamic_resources`) drives both; nothing here reads
//! the cluster.

pub mod cel;
pub mod diagnose;
pub mod structured;
pub mod templates;
