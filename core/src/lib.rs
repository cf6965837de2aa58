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

pub mod action;
pub mod admission;
#[cfg(feature = "kube")]
pub mod api_error;
#[cfg(feature = "kube")]
pub mod apply;
pub mod dra;
pub mod duration;
pub mod engine;
pub mod explain;
pub mod framework;
pub mod labels;
pub mod plugins;
pub mod preemption;
pub mod resource;
pub mod schedule;
#[cfg(test)]
mod schedule_tests;
pub mod simulate;
pub mod snapshot;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod triage;

pub use engine::Engine;
pub use framework::status::{Code, Status};
pub use snapshot::{ClusterObjects, NodeInfo, PodInfo, Snapshot};
