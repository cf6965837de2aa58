//! The diagnosis API: what the plugins know that a tool needs to explain a verdict in more words than
//! kube-scheduler's message, without reaching into a plugin. `kubectl sched explain`'s hints, fixes
//! and tables read these; each is the plugin's own function or type, re-exported, so the words a
//! diagnosis uses are the ones the plugin decided with.
//!
//! A plugin's other items are its own (`pub(crate)`): a change inside a plugin touches this module at
//! most, never the binaries.
//!
//! Beside the re-exports, the diagnosis layer itself ([`diagnose_pod`]): every rejecting filter of
//! every rejected node explained by one explainer per plugin (named as upstream names the plugin)
//! down to the object at fault ([`Finding`], with a stable [`ReasonCode`], docs/reasons.md), and the
//! hints: [`Change`]s checked by applying them to a copy of the cluster and running the scheduling
//! cycle again ([`VerifiedHint`]). explain, `explain --node`, `-o json` and triage share it. A pod
//! group is diagnosed as a whole ([`diagnose_pod_group`]): its cycle's verdict, node by node, and
//! the changes that make the whole group fit.
//!
//! ```
//! use sched_core::diagnosis::{SCHEDULING_GATED_MESSAGE, Shortfall, diagnose, pod_tolerations};
//! ```
//!
//! The plugins' own paths are not public:
//!
//! ```compile_fail,E0603
//! use sched_core::plugins::node_resources::fit::Shortfall;
//! ```
//!
//! ```compile_fail,E0603
//! use sched_core::plugins::helper::taints::pod_tolerations;
//! ```

pub mod change;
pub mod finding;
pub mod hints;
mod inter_pod_affinity;
mod node_affinity;
mod node_ports;
mod node_resources_fit;
mod node_unschedulable;
mod node_volume_limits;
pub mod pod_group;
mod pod_topology_spread;
pub mod report;
mod taint_toleration;
#[cfg(test)]
mod tests;
mod volume_binding;
mod volume_restrictions;
mod volume_zone;

pub use change::{Change, taint_text, toleration_for};
pub use finding::{Detail, DomainCount, Finding, PvRefusal, ReasonCode};
pub use hints::VerifiedHint;
pub use node_resources_fit::describe_shortfall;
pub use pod_group::{Depth, PodGroupReport, diagnose_pod_group, pod_groups_of_workload};
pub use report::{Report, diagnose_pod};
pub use taint_toleration::{system_taint_owner, untolerated_taints};
pub use volume_binding::LOCAL_PATH_PLACEHOLDER;

// NodeResourcesFit: what a pod requests and how much each node lacks.
pub use crate::plugins::node_resources::fit::{Shortfall, compute_pod_resource_request, shortfall_with_dra};

// DynamicResources: which DeviceClass backs an extended resource, and why a pod's claims cannot be
// allocated.
pub use crate::plugins::dynamic_resources::diagnose::{
    ClaimDiagnosis, DeviceCounts, Diagnosis, NodeCounts, RequestDiagnosis, SelectorMiss, Wants, diagnose,
};
pub use crate::plugins::helper::device_classes::DeviceClassResolver;

// TaintToleration: a node's taints, a pod's tolerations and the matching TaintToleration applies.
pub use crate::plugins::helper::taints::{
    do_not_schedule_taints_filter, node_taints, pod_tolerations, tolerations_tolerate_taint,
};

// SchedulingGates: the PreEnqueue reason and the message of a gated pod's condition.
pub use crate::plugins::scheduling_gates::{ERR_REASON_WAITING_FOR_GATES, SCHEDULING_GATED_MESSAGE};
