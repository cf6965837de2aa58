//! The chosen candidate's side effects as [`Action`]s: what kube-scheduler's preemption executor and
//! failure handler write to the API.
//!
//! Order of the plan, as the executor (`framework/preemption/executor.go`) runs it. With
//! `SchedulerAsyncPreemption` (beta, on in v1.37.1) preemption runs asynchronously:
//! 1. clear `status.nominatedNodeName` of lower-priority pods nominated to the node (the async goroutine
//!    does this first);
//! 2. per victim, most important first, skipping victims that are already terminating: the
//!    `DisruptionTarget=True` condition (reason `PreemptionByScheduler`), then DELETE (or, instead of
//!    both, an Eviction: the API server sets the condition itself when it admits one),
//!    then the `Preempted` event (kube-scheduler deletes all but the last victim in parallel, then the
//!    last one);
//! 3. the preemptor, as the failure handler writes it: the `FailedScheduling` warning event, then its
//!    `status.nominatedNodeName` and `PodScheduled=False` condition (one status patch upstream).
//!
//! With the gate off (`prepareCandidate`, synchronous) the victims go first and the lower-priority
//! nominations are cleared after them, before the failure handler writes the preemptor.
//!
//! Upstream the preemptor's status patch races with the victims' deletions; putting it last means a
//! plan interrupted half-way leaves the preemptor un-nominated, so running the drill again re-evaluates
//! (a nominated preemptor with victims still terminating would be "not eligible").

use serde::Serialize;

use crate::action::{Action, EventSpec, ObjectRef, PodConditionPatch};
use crate::preemption::candidate::Victim;
use std::sync::Arc;

use crate::preemption::evaluator::{CONDITION_DISRUPTION_TARGET, REASON_PREEMPTION_BY_SCHEDULER};
use crate::preemption::pod_group::{CLUSTER_CANDIDATE, POD_GROUP_PREEMPTOR_TYPE};
use crate::snapshot::{PodInfo, Snapshot};

/// Event reason on a victim.
pub const EVENT_REASON_PREEMPTED: &str = "Preempted";
/// Event action on a victim.
pub const EVENT_ACTION_PREEMPTING: &str = "Preempting";
/// Event reason on a pod that did not fit.
pub const EVENT_REASON_FAILED_SCHEDULING: &str = "FailedScheduling";
/// Event action on a pod that did not fit.
pub const EVENT_ACTION_SCHEDULING: &str = "Scheduling";
/// The `PodScheduled` condition type.
pub const CONDITION_POD_SCHEDULED: &str = "PodScheduled";
/// `PodScheduled=False` reason for rejected pods.
pub const REASON_UNSCHEDULABLE: &str = "Unschedulable";
/// Events' note length limit (longer notes are cut and end with " ...").
pub const NOTE_LENGTH_LIMIT: usize = 1024;

/// How victims are removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VictimRemoval {
    /// A plain DELETE, as kube-scheduler does (PDBs were only weighed, not enforced).
    #[default]
    Delete,
    /// The Eviction API, which enforces PDBs (429 when a budget is exhausted). The plan writes no
    /// DisruptionTarget condition first: the API server sets its own (reason `EvictionByEvictionAPI`)
    /// when it admits the eviction, and a refused eviction must leave the pod as it was.
    Evict,
}

/// The DisruptionTarget condition's message. v1.36 words it `… a higher priority <type>` from the
/// preemptor's type (`executor.go`), which for a pod is `pod`: the same words in every release.
pub fn disruption_message(scheduler_name: &str) -> String {
    format!("{scheduler_name}: preempting to accommodate a higher priority pod")
}

/// The `Preempted` event's note. v1.36 words it `Preempted by <type> <uid> …` (`executor.go`),
/// which for a pod preemptor is the `Preempted by pod <uid> …` of earlier releases.
pub fn preempted_note(preemptor_uid: &str, node: &str) -> String {
    format!("Preempted by pod {preemptor_uid} on node {node}")
}

/// `truncateMessage`: notes longer than the limit are cut (at a character boundary) and end with " ...".
pub fn truncate_note(message: &str) -> String {
    if message.len() <= NOTE_LENGTH_LIMIT {
        return message.to_string();
    }
    let mut end = NOTE_LENGTH_LIMIT - " ...".len();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{} ...", &message[..end])
}

/// A reference to a pod with its UID and the resourceVersion the plan was made on as preconditions:
/// a pod recreated or changed since is not written over.
pub fn pod_ref(pod: &PodInfo) -> ObjectRef {
    ObjectRef::from_meta(&pod.pod.metadata)
}

/// Pods nominated to `node` with a lower priority than the preemptor (`getLowerPriorityNominatedPods`).
pub fn lower_priority_nominated_pods<'a>(
    snapshot: &'a Snapshot,
    preemptor: &'a PodInfo,
    node: &str,
) -> impl Iterator<Item = &'a std::sync::Arc<PodInfo>> + 'a {
    snapshot
        .nominated_pods
        .get(node)
        .into_iter()
        .flatten()
        .filter(move |p| p.priority < preemptor.priority && p.key() != preemptor.key())
}

/// How the plan carries the preemption out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Execution {
    /// How victims are removed.
    pub removal: VictimRemoval,
    /// `SchedulerAsyncPreemption` (upstream's executor reads `feature.Features.EnableAsyncPreemption`):
    /// the order of the nomination clearing, see the module documentation.
    pub async_preemption: bool,
}

/// The actions that carry out preemption of `victims` on `node` for `preemptor`, in the order described
/// in the module documentation. `failed_scheduling_message` is the preemptor's FailedScheduling text;
/// `profile` the scheduler name of the profile that schedules it (its `spec.schedulerName`), which
/// kube-scheduler writes into the DisruptionTarget message and reports its events as.
pub fn prepare_candidate(
    snapshot: &Snapshot,
    preemptor: &PodInfo,
    profile: &str,
    node: &str,
    victims: &[Victim],
    execution: Execution,
    failed_scheduling_message: &str,
) -> Vec<Action> {
    let preemptor_ref = pod_ref(preemptor);
    let mut actions = Vec::new();
    let clear_lower_nominations = |actions: &mut Vec<Action>| {
        for p in lower_priority_nominated_pods(snapshot, preemptor, node) {
            actions.push(Action::SetNominatedNodeName {
                pod: pod_ref(p),
                node: String::new(),
            });
        }
    };
    if execution.async_preemption {
        clear_lower_nominations(&mut actions);
    }
    for v in victims.iter().filter(|v| !v.pod.is_terminating()) {
        let removal = VictimWords {
            disruption: disruption_message(profile),
            note: preempted_note(preemptor.uid(), node),
            related: Some(preemptor_ref.clone()),
        };
        actions.extend(victim_actions(&v.pod, profile, execution.removal, removal));
    }
    if !execution.async_preemption {
        clear_lower_nominations(&mut actions);
    }
    actions.push(Action::Event(EventSpec {
        regarding: preemptor_ref.clone(),
        related: None,
        type_: "Warning".to_string(),
        reason: EVENT_REASON_FAILED_SCHEDULING.to_string(),
        action: EVENT_ACTION_SCHEDULING.to_string(),
        note: truncate_note(failed_scheduling_message),
        reporting_controller: Some(profile.to_string()),
    }));
    actions.push(Action::SetNominatedNodeName {
        pod: preemptor_ref.clone(),
        node: node.to_string(),
    });
    actions.push(Action::SetPodCondition {
        pod: preemptor_ref,
        condition: PodConditionPatch {
            type_: CONDITION_POD_SCHEDULED.to_string(),
            status: "False".to_string(),
            reason: REASON_UNSCHEDULABLE.to_string(),
            message: failed_scheduling_message.to_string(),
        },
    });
    actions
}

/// What the executor writes about one victim: the DisruptionTarget message, the `Preempted` note,
/// and the preemptor the event relates to.
struct VictimWords {
    disruption: String,
    note: String,
    related: Option<ObjectRef>,
}

/// The removal of one victim (`PreemptPod`): the DisruptionTarget condition then DELETE, or an
/// Eviction, then the `Preempted` event.
fn victim_actions(
    victim: &PodInfo,
    profile: &str,
    removal: VictimRemoval,
    words: VictimWords,
) -> Vec<Action> {
    let victim = pod_ref(victim);
    let mut actions = Vec::new();
    match removal {
        VictimRemoval::Delete => {
            actions.push(Action::SetPodCondition {
                pod: victim.clone(),
                condition: PodConditionPatch {
                    type_: CONDITION_DISRUPTION_TARGET.to_string(),
                    status: "True".to_string(),
                    reason: REASON_PREEMPTION_BY_SCHEDULER.to_string(),
                    message: words.disruption,
                },
            });
            actions.push(Action::DeletePod { pod: victim.clone() });
        }
        VictimRemoval::Evict => actions.push(Action::EvictPod { pod: victim.clone() }),
    }
    actions.push(Action::Event(EventSpec {
        regarding: victim,
        related: words.related,
        type_: "Normal".to_string(),
        reason: EVENT_REASON_PREEMPTED.to_string(),
        action: EVENT_ACTION_PREEMPTING.to_string(),
        note: words.note,
        reporting_controller: Some(profile.to_string()),
    }));
    actions
}

/// The actions that carry out a pod group's preemption (`actuatePodGroupPreemption`, then the
/// failure handler of each pod of the group): every victim removed as for a pod (skipping those
/// already terminating), with the executor's words for a `podgroup` preemptor (`… a higher priority
/// podgroup`, `Preempted by podgroup <uid> on node cluster`: the group's candidate is the whole
/// cluster), then each pod of the group nominated to the node its cycle placed it on. The victims'
/// events name no related object (the recorder here relates pods only). `group_uid` is the
/// PodGroup's UID; `profile` the group's scheduler name.
pub fn prepare_group_candidate(
    victims: &[Arc<PodInfo>],
    nominations: &[(Arc<PodInfo>, String)],
    group_uid: &str,
    profile: &str,
    removal: VictimRemoval,
) -> Vec<Action> {
    let mut actions = Vec::new();
    for victim in victims.iter().filter(|v| !v.is_terminating()) {
        let words = VictimWords {
            disruption: format!(
                "{profile}: preempting to accommodate a higher priority {POD_GROUP_PREEMPTOR_TYPE}"
            ),
            note: format!("Preempted by {POD_GROUP_PREEMPTOR_TYPE} {group_uid} on node {CLUSTER_CANDIDATE}"),
            related: None,
        };
        actions.extend(victim_actions(victim, profile, removal, words));
    }
    for (pod, node) in nominations {
        actions.push(Action::SetNominatedNodeName {
            pod: pod_ref(pod),
            node: node.clone(),
        });
    }
    actions
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::features::FeatureGates;
    use crate::testing::{node, pod, snapshot};

    /// v1.37.1's execution: DELETE, asynchronous preemption.
    const ASYNC_DELETE: Execution = Execution {
        removal: VictimRemoval::Delete,
        async_preemption: FeatureGates::v1_37().scheduler_async_preemption,
    };

    #[test]
    fn plan_contents_and_order() {
        let snap = snapshot(
            vec![node("n1").cpu("4").obj()],
            vec![
                pod("low-nominated").priority(1).nominated("n1").obj(),
                pod("high-nominated").priority(500).nominated("n1").obj(),
                pod("elsewhere").priority(1).nominated("n2").obj(),
            ],
        );
        let preemptor = pod("p")
            .priority(100)
            .scheduler_name("my-scheduler")
            .resource_version("7")
            .info();
        let victims = vec![
            Victim::new(
                Arc::new(pod("v1").priority(5).node("n1").resource_version("11").info()),
                0,
            ),
            Victim::new(Arc::new(pod("gone").priority(4).node("n1").preempted().info()), 0),
            Victim::new(
                Arc::new(pod("v2").namespace("other").priority(3).node("n1").info()),
                0,
            ),
        ];
        let msg = "0/1 nodes are available: 1 Insufficient cpu. preemption: found a potential placement for pod on node n1, preempting 3 victims";
        let actions = prepare_candidate(
            &snap,
            &preemptor,
            "my-scheduler",
            "n1",
            &victims,
            ASYNC_DELETE,
            msg,
        );
        let described: Vec<String> = actions.iter().map(Action::describe).collect();
        assert_eq!(
            described,
            vec![
                "clear nominatedNodeName of pod default/low-nominated",
                "set condition DisruptionTarget=True (PreemptionByScheduler) on pod default/v1",
                "delete pod default/v1",
                "event Normal Preempted on default/v1: Preempted by pod default-p on node n1",
                "set condition DisruptionTarget=True (PreemptionByScheduler) on pod other/v2",
                "delete pod other/v2",
                "event Normal Preempted on other/v2: Preempted by pod default-p on node n1",
                &format!("event Warning FailedScheduling on default/p: {msg}"),
                "set nominatedNodeName=n1 on pod default/p",
                "set condition PodScheduled=False (Unschedulable) on pod default/p",
            ]
        );
        let Action::SetPodCondition { condition, pod } = &actions[1] else {
            panic!("{:?}", actions[1])
        };
        assert_eq!(
            condition.message,
            "my-scheduler: preempting to accommodate a higher priority pod"
        );
        assert_eq!(pod.uid.as_deref(), Some("default-v1"));
        // Every write to a pod is conditioned on the resourceVersion the plan was made on.
        assert_eq!(pod.resource_version.as_deref(), Some("11"));
        let Action::DeletePod { pod } = &actions[2] else {
            panic!()
        };
        assert_eq!(pod.resource_version.as_deref(), Some("11"));
        let Action::SetNominatedNodeName { pod, .. } = &actions[8] else {
            panic!()
        };
        assert_eq!(
            (pod.uid.as_deref(), pod.resource_version.as_deref()),
            (Some("default-p"), Some("7"))
        );
        let Action::Event(e) = &actions[3] else { panic!() };
        assert_eq!(e.action, "Preempting");
        assert_eq!(e.related.as_ref().map(|r| r.name.as_str()), Some("p"));
        let Action::SetPodCondition { condition, .. } = &actions[9] else {
            panic!()
        };
        assert_eq!(condition.message, msg);
    }

    /// `SchedulerAsyncPreemption` off: the synchronous executor removes the victims first and
    /// clears the lower-priority nominations after them; on, the nominations are cleared first.
    #[test]
    fn nominations_are_cleared_where_the_gate_says() {
        let snap = snapshot(
            vec![node("n1").obj()],
            vec![pod("low").priority(1).nominated("n1").obj()],
        );
        let preemptor = pod("p").priority(100).info();
        let victims = vec![Victim::new(Arc::new(pod("v").priority(5).node("n1").info()), 0)];
        for (name, async_preemption, want_first) in [
            (
                "async (v1.37.1)",
                true,
                "clear nominatedNodeName of pod default/low",
            ),
            (
                "sync",
                false,
                "set condition DisruptionTarget=True (PreemptionByScheduler) on pod default/v",
            ),
        ] {
            let execution = Execution {
                async_preemption,
                ..ASYNC_DELETE
            };
            let actions = prepare_candidate(
                &snap,
                &preemptor,
                "default-scheduler",
                "n1",
                &victims,
                execution,
                "m",
            );
            let described: Vec<String> = actions.iter().map(Action::describe).collect();
            assert_eq!(described[0], want_first, "{name}");
            let clear = described
                .iter()
                .position(|d| d == "clear nominatedNodeName of pod default/low")
                .expect("cleared");
            let deleted = described
                .iter()
                .position(|d| d == "delete pod default/v")
                .expect("deleted");
            assert_eq!(clear < deleted, async_preemption, "{name}: {described:?}");
            // The preemptor is written last either way.
            assert_eq!(
                described.last().map(String::as_str),
                Some("set condition PodScheduled=False (Unschedulable) on pod default/p"),
                "{name}"
            );
        }
    }

    #[test]
    fn evict_mode_uses_the_eviction_api() {
        let snap = snapshot(vec![node("n1").obj()], vec![]);
        let preemptor = pod("p").priority(100).info();
        let victims = vec![Victim::new(Arc::new(pod("v").node("n1").info()), 0)];
        let actions = prepare_candidate(
            &snap,
            &preemptor,
            "default-scheduler",
            "n1",
            &victims,
            Execution {
                removal: VictimRemoval::Evict,
                ..ASYNC_DELETE
            },
            "m",
        );
        assert!(actions.contains(&Action::EvictPod {
            pod: pod_ref(&victims[0].pod)
        }));
        assert!(!actions.iter().any(|a| matches!(a, Action::DeletePod { .. })));
        // No DisruptionTarget condition of ours: a refused eviction must leave the victim untouched.
        assert!(matches!(actions[0], Action::EvictPod { .. }), "{actions:?}");
        let victim_conditions = actions
            .iter()
            .filter(|a| matches!(a, Action::SetPodCondition { pod, .. } if pod.name == "v"))
            .count();
        assert_eq!(victim_conditions, 0);
    }

    #[test]
    fn long_notes_are_truncated() {
        let long = "x".repeat(2000);
        let t = truncate_note(&long);
        assert_eq!(t.len(), NOTE_LENGTH_LIMIT);
        assert!(t.ends_with("x ..."));
        assert_eq!(truncate_note("short"), "short");
        // Never cuts inside a character.
        let wide = "é".repeat(600);
        assert!(truncate_note(&wide).ends_with(" ..."));
    }
}
