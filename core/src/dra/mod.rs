//! Dynamic Resource Allocation: what `k8s.io/dynamic-resource-allocation` is to kube-scheduler.
//!
//! - [`cel`]: DRA's CEL environment (`device.driver`, `device.attributes`, `device.capacity`,
//!   `device.allowMultipleAllocations`, the Kubernetes quantity/semver/string/list extensions) with
//!   the API server's cost limit, and a cache of compiled selectors.
//! - [`structured`]: the structured-parameters allocator of v1.37.1 (the "incubating" implementation,
//!   which the default feature gates select): the same search order, so the same devices are chosen.
//! - [`templates`]: the claims a pod will get from its ResourceClaimTemplates, made in memory.
//!
//! The DynamicResources plugin (`crate::plugins::dynamic_resources`) drives both, and its
//! `diagnose` explains why devices were not found; nothing here reads the cluster or imports the
//! plugins (the layering test, `core/tests/layers.rs`, holds it so).

pub mod cel;
pub mod structured;
pub mod templates;
