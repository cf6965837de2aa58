//! sched-dra: Dynamic Resource Allocation as kube-scheduler uses it — what
//! `k8s.io/dynamic-resource-allocation` is to kube-scheduler.
//!
//! - [`cel`]: DRA's CEL environment (`device.driver`, `device.attributes`, `device.capacity`,
//!   `device.allowMultipleAllocations`, the Kubernetes quantity/semver/string/list extensions) with
//!   the API server's cost limit, and a cache of compiled selectors.
//! - [`structured`]: the structured-parameters allocator of v1.37.1 (the "incubating"
//!   implementation, which the default feature gates select): the same search order, so the same
//!   devices are chosen.
//!
//! It is its own crate so the build enforces its layer: it depends on `sched-apimachinery`
//! (quantities, node selectors) and `k8s-openapi`, never on sched-core, so it cannot import the
//! scheduler's plugins, snapshot or framework. Within it, `structured` uses `cel` and `cel` uses
//! nothing of `structured` (`core/tests/layers.rs` holds that). sched-core re-exports both
//! modules as `sched_core::dra::{cel, structured}`; its DynamicResources plugin drives them.

#![warn(missing_docs)]

pub mod cel;
pub mod structured;
