//! A batch of pods through kube-scheduler's queue on an evolving snapshot (`kubectl sched simulate`).
//!
//! - [`workloads`]: Deployments, ReplicaSets, StatefulSets, Jobs and DaemonSets expanded into the
//!   pods their controllers would create;
//! - [`drain`]: what `kubectl drain` would evict from a node, as the Eviction API allows it.

pub mod drain;
pub mod workloads;
