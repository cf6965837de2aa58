//! Dynamic Resource Allocation: what `k8s.io/dynamic-resource-allocation` is to kube-scheduler.
//!
//! - [`cel`]: DRA's CEL environment (`device.driver`, `device.attributes`, `device.capacity`,
//!   `device.allowMultipleAllocations`, the Kubernetes quantity/semver/string/list extensions) with
//!   the API server's cost limit, and a cache of compiled selectors.
//! - [`structured`]: the structured-parameters allocator of v1.37.1 (the "incubating" implementation,
//!   which the default feature gates select): the same search order, so the same devices are chosen.
//! - [`templates`]: the claims a pod will get from its ResourceClaimTemplates, made in memory.
//!
//! `cel` and `structured` are the sched-dra crate, re-exported here: a crate of its own, which
//! depends on no part of sched-core, so the build itself keeps the library from importing the
//! plugins. The DynamicResources plugin (`crate::plugins::dynamic_resources`) drives both, and its
//! `diagnose` explains why devices were not found; `templates` is the scheduler's side (it reads
//! the snapshot) and stays here.

pub use sched_dra::{cel, structured};
pub mod templates;
