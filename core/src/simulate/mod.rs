//! A batch of pods through kube-scheduler's queue on an evolving snapshot (`kubectl sched simulate`).
//!
//! - [`queue`]: the scheduling queue (QueueSort order, unschedulable pods moved back by events);
//! - [`hints`]: the events a batch causes and the plugins' queueing hints for them;
//! - [`simulation`]: the loop — cycle, assume, preemption — and its report;
//! - [`group_cycle`]: the pod group cycle for a gang's pods, and the report per group;
//! - [`workloads`]: Deployments, ReplicaSets, StatefulSets, Jobs and DaemonSets expanded into the
//!   pods their controllers would create;
//! - [`drain`]: what `kubectl drain` would evict from a node, as the Eviction API allows it.

pub mod drain;
pub mod group_cycle;
mod group_preemption;
pub mod hints;
mod placement;
pub mod queue;
pub mod simulation;
pub mod workloads;

pub use group_cycle::{GroupOutcome, GroupResult};
pub use simulation::{
    PodOutcome, PodResult, Progress, Simulation, SimulationError, SimulationOptions, SimulationReport, Victim,
};

#[cfg(test)]
mod tests;
