//! sched-core: kube-scheduler's decision logic as a pure library.
//!
//! ```text
//!  Snapshot ──► Framework (profile) ──► PreFilter ─► Filter (parallel) ─► PostFilter (preemption)
//!                                                   └► PreScore ─► Score ─► Normalize ─► weights ─► Explanation
//! ```
//!
//! Nothing here does I/O (except the `kube` feature's loaders and `apply`): decisions are data, and every
//! side effect is an [`action::Action`].

#![warn(missing_docs)]

// The modules by layer, lowest first: each imports only the layers above it in this list, never one
// below, and no two modules import each other (`core/tests/layers.rs` fails the build otherwise and
// holds the table; `make lint` runs it).

// Foundations: values with no scheduling meaning of their own. Quantities and selectors are the
// sched-apimachinery crate's (the DRA library reads them too), re-exported at their old paths.
pub mod action;
#[cfg(feature = "kube")]
pub mod api_error;
pub mod clock;
pub mod duration;
pub mod features;
pub use sched_apimachinery::{labels, resource};

// What the API server does to a pod before the scheduler sees it.
pub mod admission;

// The DRA library (`k8s.io/dynamic-resource-allocation`: CEL and the structured allocator, the
// sched-dra crate) re-exported, and the claims a pod's templates make.
pub mod dra;

// The cluster model and its readers.
pub mod snapshot;

// The framework's contracts and runtime, and the explanation a cycle returns.
pub mod explain;
pub mod framework;

// The preemption evaluator, below the plugins (DefaultPreemption calls it), as upstream.
pub mod preemption;

// The in-tree plugins, their shared helpers and registry. Public: the registry and the plugin names
// (what a scheduler configuration names); each plugin's module is the crate's own.
pub mod plugins;

// One scheduling cycle.
pub mod schedule;
#[cfg(test)]
mod schedule_tests;

// What users run. `engine` is the engine API: `Engine`, and what a command runs with it (a profile's
// framework, one cycle, the preemption dry run).
#[cfg(feature = "kube")]
pub mod apply;
pub mod engine;
pub mod node_pools;
pub mod simulate;
pub mod triage;

// The named façades other crates use instead of a plugin's internals: what explains a verdict, and
// what acts on a pod's volumes.
pub mod diagnosis;
pub mod volumes;

// Test builders (pod(), node(), snapshot()).
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use engine::Engine;
pub use framework::status::{Code, Status};
pub use snapshot::{ClusterObjects, NodeInfo, PodInfo, Snapshot};
