//! sched-apimachinery: the Kubernetes API values the scheduler and the DRA library both read, with
//! upstream's parsing and matching rules — what `k8s.io/apimachinery` (`resource.Quantity`,
//! `labels`) and `k8s.io/component-helpers` (node affinity) are to kube-scheduler.
//!
//! - [`resource`]: quantities (`500m`, `1Gi`, `1e3`) and the `Resource` vector kube-scheduler adds
//!   and compares.
//! - [`labels`]: label selectors and node selectors (`NodeSelectorMatcher`).
//!
//! It is its own crate so the layers below the scheduler are enforced by the build: it depends on
//! `k8s-openapi` and `serde` only, and cannot name the DRA library or sched-core. sched-core
//! re-exports both modules at their old paths (`sched_core::resource`, `sched_core::labels`).

#![warn(missing_docs)]

pub mod labels;
pub mod resource;
