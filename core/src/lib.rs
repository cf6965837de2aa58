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

// Foundations: values with no scheduling meaning of their own.
pub mod action;
#[cfg(feature = "kube")]
pub mod api_error;
pub mod clock;
pub mod duration;
pub mod features;
pub mod labels;
pub mod resource;

// What the API server does to a pod before the scheduler sees it.
pub mod admission;

// The DRA library (`k8s.io/dynamic-resource-allocation`): CEL and the structured allocator.
pub mod dra;

// The cluster model and its readers.
pub mod snapshot;

// The framework's contracts and runtime, and the explanation a cycle returns.
pub mod explain;
pub mod framework;

// The preemption evaluator, below the plugins (DefaultPreemption calls it), as upstream.
pub mod preemption;

// The in-tree plugins, their shared helpers and registry.
pub mod plugins;

// One scheduling cycle.
pub mod schedule;
#[cfg(test)]
mod schedule_tests;

// What users run.
#[cfg(feature = "kube")]
pub mod apply;
pub mod engine;
pub mod simulate;
pub mod triage;

// Test builders (pod(), node(), snapshot()).
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use engine::Engine;
pub use framework::status::{Code, Status};
pub use snapshot::{ClusterObjects, NodeInfo, PodInfo, Snapshot};
