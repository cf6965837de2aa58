//! The pod group cycle's PodGroupPostFilter (`podGroupCycle` → `RunPodGroupPostFilterPlugins` →
//! DefaultPreemption's `PodGroupPostFilter`): when the cycle finds no placement for the whole group,
//! [`crate::preemption::pod_group::preempt`] searches the cluster's victims, running this cycle
//! again (`pgSchedulingFunc`, a fresh cycle state per pod) on the cluster without them.
//!
//! kube-scheduler runs the PostFilter plugins in order and takes the first Success or
//! UnschedulableAndUnresolvable; DefaultPreemption is the only in-tree one, so without it in the
//! profile nothing answers and the group's status gets an empty reason.

use std::sync::Arc;

use super::ScheduleOptions;
use super::pod_group::{Stop, run_members};
use crate::framework::runtime::Framework;
use crate::framework::status::{Code, Status};
use crate::plugins::names;
use crate::preemption::evaluator::now_nanos;
use crate::preemption::pod_group::{
    GroupAttempt, GroupPreemption, GroupPreemptor, ProposedAssignment, preempt,
};
use crate::snapshot::pod_groups::gang_min_count;
use crate::snapshot::{PodInfo, Snapshot};

/// The options of the group cycle preemption runs again: no per-node records (only the placements
/// are read).
fn attempt_options() -> ScheduleOptions {
    ScheduleOptions {
        trace_filters: false,
        record_nodes: false,
        ..ScheduleOptions::default()
    }
}

/// The group's cycle on `snapshot` as `pgSchedulingFunc` returns it: Success when PlacementFeasible
/// accepts the placed pods, Unschedulable with its reasons otherwise (a Wait too: the cycle turns it
/// into Unschedulable), Error when a pod's cycle failed.
fn attempt(
    fwk: &Framework,
    snapshot: Arc<Snapshot>,
    namespace: &str,
    group: &str,
    min_count: i32,
    queued: &[Arc<PodInfo>],
) -> GroupAttempt {
    let fwk = match fwk.on_snapshot(snapshot) {
        Ok(fwk) => fwk,
        Err(e) => {
            return GroupAttempt {
                status: Status::error(e.to_string()),
                assignments: Vec::new(),
            };
        }
    };
    let scheduled = fwk.snapshot().pod_group_counts(namespace, group).scheduled;
    let run = run_members(&fwk, min_count, scheduled, queued, attempt_options(), None);
    let assignments: Vec<ProposedAssignment> = run
        .members
        .into_iter()
        .filter_map(|m| {
            Some(ProposedAssignment {
                node: m.placed_on?,
                state: m.state?,
                pod: m.pod,
            })
        })
        .collect();
    let status = match run.stop {
        Stop::Error(message) => Status::error(message),
        // The framework asks for at least one pod placed before it calls a group schedulable.
        _ if run.status.code() == Code::Success && !assignments.is_empty() => Status::success(),
        _ => Status::new(Code::Unschedulable, run.status.message()),
    };
    GroupAttempt { status, assignments }
}

/// DynamicResources' PodGroupPostFilter answer once it has deallocated what it could (the group's
/// pod-level claims; the claims themselves are not modelled here).
pub const DRA_POD_GROUP_POST_FILTER: &str = "deallocation and deletion of ResourceClaims completed";

/// What the PodGroupPostFilter plugins answer together (`RunPodGroupPostFilterPlugins`).
#[derive(Debug, Clone)]
pub struct PostFilterAnswer {
    /// The status kube-scheduler appends to the group's (Success: the group waits on preemption).
    pub status: Status,
    /// DefaultPreemption's decision, when it ran.
    pub preemption: Option<GroupPreemption>,
}

/// `RunPodGroupPostFilterPlugins` for the gang `namespace/group` whose queued pods are `queued`:
/// the profile's PostFilter plugins that have a PodGroupPostFilter (DynamicResources, then
/// DefaultPreemption) in order; the first Success or UnschedulableAndUnresolvable answers alone,
/// otherwise the Unschedulable reasons are joined. With none of them, an Unschedulable without
/// words.
pub fn group_post_filter(
    fwk: &Framework,
    namespace: &str,
    group: &str,
    queued: &[Arc<PodInfo>],
) -> PostFilterAnswer {
    let mut preemption = None;
    let status = post_filter_with(fwk, || {
        let p = default_preemption(fwk, namespace, group, queued)?;
        let status = p.status.clone();
        preemption = Some(p);
        Some(status)
    });
    PostFilterAnswer { status, preemption }
}

/// `RunPodGroupPostFilterPlugins` with `default_preemption` as DefaultPreemption's answer (`None`:
/// it does not answer): the profile's plugins in order, the first Success or
/// UnschedulableAndUnresolvable alone, otherwise the Unschedulable reasons joined.
pub(super) fn post_filter_with(
    fwk: &Framework,
    mut default_preemption: impl FnMut() -> Option<Status>,
) -> Status {
    let mut reasons: Vec<String> = Vec::new();
    for plugin in &fwk.profile.post_filter {
        let status = match plugin.as_str() {
            names::DYNAMIC_RESOURCES if fwk.features().dynamic_resource_allocation => {
                Status::unschedulable(DRA_POD_GROUP_POST_FILTER)
            }
            names::DEFAULT_PREEMPTION => match default_preemption() {
                Some(status) => status,
                None => continue,
            },
            _ => continue,
        };
        match status.code() {
            Code::Success | Code::UnschedulableAndUnresolvable => return status,
            Code::Unschedulable => reasons.extend(status.reasons().iter().cloned()),
            _ => {
                return Status::error(format!(
                    "error in {plugin:?} PodGroupPostFilter plugins: {}",
                    status.message()
                ));
            }
        }
    }
    Status::new(Code::Unschedulable, reasons.join(", "))
}

/// DefaultPreemption's PodGroupPostFilter; `None` when the group is not a gang.
fn default_preemption(
    fwk: &Framework,
    namespace: &str,
    group: &str,
    queued: &[Arc<PodInfo>],
) -> Option<GroupPreemption> {
    let pod_group = fwk.snapshot().pod_group(namespace, group)?.clone();
    let min_count = gang_min_count(&pod_group)?;
    let preemptor = GroupPreemptor::new(
        pod_group,
        queued.to_vec(),
        fwk.features().pod_group_preemption_policy,
    );
    let schedule = |snapshot: Arc<Snapshot>| attempt(fwk, snapshot, namespace, group, min_count, queued);
    Some(preempt(fwk, &preemptor, &schedule, now_nanos()))
}
