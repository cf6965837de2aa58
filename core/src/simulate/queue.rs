//! kube-scheduler's scheduling queue, without clocks: the active queue in the QueueSort order, the
//! backoff queue, and the unschedulable pods with the plugins that rejected them, moved to the backoff
//! queue when a cluster event makes one of those plugins' queueing hints answer Queue
//! ([`super::hints`]; Go's `isPodWorthRequeuing`: a pod no plugin rejected moves on any event).
//!
//! When events reach the queue. kube-scheduler pops the next pod as soon as a cycle ends, while what
//! the cycle set in motion happens in goroutines: the binding cycle's API writes (the PersistentVolume
//! and claim updates of PreBind, then the pod's binding) and, with SchedulerAsyncPreemption (on by
//! default), the preemption's (`prepareCandidateAsync`: the nominations of lower-priority pods on the
//! node cleared, then the victims deleted). Their watch events come back at least one API round trip
//! later, when the next pod has been popped. The queue records the events that arrive while a pod is
//! in flight and, if that pod fails, checks them against its hints as it parks it
//! (`determineSchedulingHintForInFlightPod`), so such an event requeues the next pod as if it had
//! been parked already. The simulation models this as: what cycle N causes lands after cycle N+1
//! (its pod placed or parked), or before the next pop when the queues are empty. Until then the
//! snapshot still holds the victims (the cache drops a pod on its delete event), and the preemptor,
//! nominated at once (`AddNominatedPod`), stays parked and deaf to events (DefaultPreemption's
//! PreEnqueue holds it while its preemption runs): the deletions themselves then wake it. A bound
//! pod is in the snapshot from its own cycle on (kube-scheduler assumes it), only its events wait.
//!
//! Active order (PrioritySort): higher priority first, then earlier queue time. A pod's first queue
//! time is its creation time; a pod that failed gets a queue time after every pod already queued, as
//! kube-scheduler refreshes the timestamp when it parks a pod. Equal times go by `namespace/name` (the
//! order kube-scheduler's informer lists pods in).
//!
//! A pod group (GenericWorkload on, a PodGroup with the gang policy) is one entity of the queue, as
//! kube-scheduler's `QueuedPodGroupInfo`: it sorts by the PodGroup's priority (`PodGroupPriority`,
//! not its pods'), at the queue time of its earliest pod, and popping any of its pods takes every
//! queued pod of the group with it ([`SchedulingQueue::take_group`]) for the pod group cycle;
//! parked again, its pods share one queue time ([`SchedulingQueue::park_group`]).
//!
//! Backoff without a clock: a batch is scheduled in milliseconds and the shortest backoff is a second,
//! so a pod moved out of the unschedulable pods is always still backing off. It waits in the backoff
//! queue while any pod is active, and when the active queue is empty the backoff queue gives its first
//! pod anyway (kube-scheduler's PopFromBackoffQ). Backoff order is kube-scheduler's: the backoff
//! expiry — here the backoff duration (1 s doubled per failed attempt, at most 10 s), every attempt of
//! a batch falling in the same ordering window — then the active order.

use std::cmp::Ordering;
use std::collections::{BTreeSet, BinaryHeap, HashMap};
use std::sync::Arc;

use super::hints::{ClusterEvent, HintInputs, QueueingHint, plugin_hint};
use crate::snapshot::PodInfo;

/// kube-scheduler's default podInitialBackoffSeconds and podMaxBackoffSeconds.
const INITIAL_BACKOFF_SECONDS: u64 = 1;
const MAX_BACKOFF_SECONDS: u64 = 10;

/// The backoff after `failures` failed attempts, in seconds.
fn backoff_seconds(failures: u32) -> u64 {
    let doublings = failures.saturating_sub(1).min(8);
    (INITIAL_BACKOFF_SECONDS << doublings).min(MAX_BACKOFF_SECONDS)
}

/// A pod in the active queue.
#[derive(Debug, Clone)]
struct Queued {
    pod: Arc<PodInfo>,
    /// The entity's priority: the pod's, or its PodGroup's for a pod of a group.
    priority: i32,
    /// Creation time (nanoseconds) for a first attempt; a sequence number past every creation time
    /// for a pod moved back.
    queued_at: i128,
    key: String,
}

impl Queued {
    fn order(&self, other: &Self) -> Ordering {
        self.priority
            .cmp(&other.priority)
            .then_with(|| other.queued_at.cmp(&self.queued_at))
            .then_with(|| other.key.cmp(&self.key))
    }
}

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        self.order(other) == Ordering::Equal
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Queued {
    fn cmp(&self, other: &Self) -> Ordering {
        self.order(other)
    }
}

/// A pod in the backoff queue: shorter backoff first, then the active order.
#[derive(Debug, Clone, PartialEq, Eq)]
struct BackingOff {
    backoff_seconds: u64,
    queued: Queued,
}

impl PartialOrd for BackingOff {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for BackingOff {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .backoff_seconds
            .cmp(&self.backoff_seconds)
            .then_with(|| self.queued.cmp(&other.queued))
    }
}

/// A parked pod: the pod, the plugins that rejected it, what their hints need, its queue time, and
/// whether DefaultPreemption's PreEnqueue holds it (its victims are not deleted yet).
#[derive(Debug, Clone)]
struct Parked {
    pod: Arc<PodInfo>,
    plugins: BTreeSet<&'static str>,
    inputs: HintInputs,
    queued_at: i128,
    gated: bool,
}

impl Parked {
    /// Go's `isPodWorthRequeuing`: a pod no plugin rejected is requeued by any event; otherwise one
    /// of its rejecting plugins registered for the event must answer Queue.
    fn worth_requeuing(&self, event: &ClusterEvent) -> bool {
        if self.plugins.is_empty() {
            return true;
        }
        self.plugins
            .iter()
            .any(|p| plugin_hint(p, &self.pod, &self.inputs, event) == Some(QueueingHint::Queue))
    }
}

/// The queue (see the module doc).
#[derive(Debug, Default)]
pub struct SchedulingQueue {
    active: BinaryHeap<Queued>,
    backoff: BinaryHeap<BackingOff>,
    /// Unschedulable pods by `namespace/name`.
    unschedulable: HashMap<String, Parked>,
    /// Failed attempts per pod, by `namespace/name` (the backoff grows with them).
    failures: HashMap<String, u32>,
    /// The next queue time of a pod that failed (past every creation time).
    next_requeue: i128,
    /// The pod group of each queued pod of one, by `namespace/name` of the pod.
    group_of: HashMap<String, String>,
    /// Each pod group's entity, by `namespace/name` of the PodGroup.
    groups: HashMap<String, GroupEntity>,
}

/// A pod group as one entity of the queue.
#[derive(Debug, Clone, Copy)]
struct GroupEntity {
    /// The PodGroup's priority.
    priority: i32,
    /// The group's queue time: its earliest pod's creation, or when it was parked last.
    queued_at: i128,
}

fn creation_nanos(pod: &PodInfo) -> i128 {
    pod.pod
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(0, |t| t.0.as_nanosecond())
}

impl SchedulingQueue {
    /// A queue of `pods` (their first attempt).
    pub fn new(pods: impl IntoIterator<Item = Arc<PodInfo>>) -> Self {
        Self::with_groups(pods, |_| None)
    }

    /// A queue of `pods` where `group_of` names the pod group a pod is scheduled with and that
    /// group's priority (`None`: the pod is its own entity).
    pub fn with_groups(
        pods: impl IntoIterator<Item = Arc<PodInfo>>,
        group_of: impl Fn(&PodInfo) -> Option<(String, i32)>,
    ) -> Self {
        let mut queue = SchedulingQueue::default();
        let pods: Vec<Arc<PodInfo>> = pods.into_iter().collect();
        for pod in &pods {
            let created = creation_nanos(pod);
            queue.next_requeue = queue.next_requeue.max(created + 1);
            if let Some((group, priority)) = group_of(pod) {
                let entity = queue.groups.entry(group.clone()).or_insert(GroupEntity {
                    priority,
                    queued_at: created,
                });
                entity.queued_at = entity.queued_at.min(created);
                queue.group_of.insert(pod.key(), group);
            }
        }
        for pod in pods {
            let queued = queue.queued(pod.clone(), creation_nanos(&pod));
            queue.active.push(queued);
        }
        queue
    }

    /// `pod` as an entry of the active queue: queued at `queued_at`, or at its group's time.
    fn queued(&self, pod: Arc<PodInfo>, queued_at: i128) -> Queued {
        let key = pod.key();
        let (priority, queued_at) = match self.group_of.get(&key).and_then(|g| self.groups.get(g)) {
            Some(group) => (group.priority, group.queued_at),
            None => (pod.priority, queued_at),
        };
        Queued {
            pod,
            priority,
            queued_at,
            key,
        }
    }

    /// The pod group `pod` (`namespace/name`) is scheduled with, if any.
    pub fn group_of(&self, pod: &str) -> Option<&str> {
        self.group_of.get(pod).map(String::as_str)
    }

    /// Takes every pod of `group` still waiting — active, backing off or parked — out of the queue:
    /// popping one pod of a group pops the group (its `QueuedPodInfos`).
    pub fn take_group(&mut self, group: &str) -> Vec<Arc<PodInfo>> {
        let members: std::collections::HashSet<String> = self
            .group_of
            .iter()
            .filter(|(_, g)| g.as_str() == group)
            .map(|(key, _)| key.clone())
            .collect();
        let of_group = |key: &str| members.contains(key);
        let mut taken: Vec<Arc<PodInfo>> = Vec::new();
        let mut active = Vec::new();
        for queued in std::mem::take(&mut self.active).into_vec() {
            if of_group(&queued.key) {
                taken.push(queued.pod);
            } else {
                active.push(queued);
            }
        }
        let mut backoff = Vec::new();
        for backing_off in std::mem::take(&mut self.backoff).into_vec() {
            if of_group(&backing_off.queued.key) {
                taken.push(backing_off.queued.pod);
            } else {
                backoff.push(backing_off);
            }
        }
        let mut parked: Vec<String> = self
            .unschedulable
            .keys()
            .filter(|key| of_group(key))
            .cloned()
            .collect();
        parked.sort();
        for key in parked {
            taken.extend(self.unschedulable.remove(&key).map(|p| p.pod));
        }
        self.active = active.into();
        self.backoff = backoff.into();
        taken
    }

    /// Parks the pods of `group` that its cycle did not bind, each with the plugins that rejected
    /// it: the group gets a queue time after every pod already queued, shared by its pods.
    pub fn park_group(&mut self, group: &str, pods: Vec<(Arc<PodInfo>, BTreeSet<&'static str>, HintInputs)>) {
        let queued_at = self.next_requeue;
        self.next_requeue += 1;
        if let Some(entity) = self.groups.get_mut(group) {
            entity.queued_at = queued_at;
        }
        for (pod, plugins, inputs) in pods {
            self.park(pod, plugins, inputs, queued_at);
        }
    }

    /// Counts a failure of `pod` and parks it as unschedulable, queued at `queued_at`.
    fn park(
        &mut self,
        pod: Arc<PodInfo>,
        plugins: BTreeSet<&'static str>,
        inputs: HintInputs,
        queued_at: i128,
    ) {
        let key = pod.key();
        *self.failures.entry(key.clone()).or_insert(0) += 1;
        self.unschedulable.insert(
            key,
            Parked {
                pod,
                plugins,
                inputs,
                queued_at,
                gated: false,
            },
        );
    }

    /// The next pod to schedule: the active queue's first, else the backoff queue's.
    pub fn pop(&mut self) -> Option<Arc<PodInfo>> {
        self.active
            .pop()
            .or_else(|| self.backoff.pop().map(|b| b.queued))
            .map(|q| q.pod)
    }

    /// Pods waiting to be tried (active and backing off).
    pub fn active_len(&self) -> usize {
        self.active.len() + self.backoff.len()
    }

    /// Parks a pod that failed, with the plugins that rejected it and what their hints need.
    pub fn add_unschedulable(
        &mut self,
        pod: Arc<PodInfo>,
        plugins: BTreeSet<&'static str>,
        inputs: HintInputs,
    ) {
        let queued_at = self.next_requeue;
        self.next_requeue += 1;
        self.park(pod, plugins, inputs, queued_at);
    }

    /// Replaces a parked pod's object (its nomination changed), keeping its plugins.
    pub fn update_unschedulable(&mut self, pod: Arc<PodInfo>) {
        if let Some(entry) = self.unschedulable.get_mut(&pod.key()) {
            entry.pod = pod;
        }
    }

    /// Holds a parked pod (`namespace/name`) back from every event while its preemption's victims
    /// are being deleted (DefaultPreemption's PreEnqueue), or lets it go again.
    pub fn set_gated(&mut self, key: &str, gated: bool) {
        if let Some(entry) = self.unschedulable.get_mut(key) {
            entry.gated = gated;
        }
    }

    /// Whether `namespace/name` is parked.
    pub fn is_parked(&self, key: &str) -> bool {
        self.unschedulable.contains_key(key)
    }

    /// Go's `MoveAllToActiveOrBackoffQueue`: moves to the backoff queue every parked pod, not gated,
    /// that the event may make schedulable (see [`Parked::worth_requeuing`]); with `max_priority`,
    /// only pods of that priority or lower are looked at (Go's `getLEPriorityPreCheck`). Returns how
    /// many moved.
    pub fn on_event(&mut self, event: &ClusterEvent, max_priority: Option<i32>) -> usize {
        let mut moving: Vec<String> = self
            .unschedulable
            .iter()
            .filter(|(_, parked)| !parked.gated)
            .filter(|(key, parked)| max_priority.is_none_or(|max| self.priority_of(key, &parked.pod) <= max))
            .filter(|(_, parked)| parked.worth_requeuing(event))
            .map(|(key, _)| key.clone())
            .collect();
        moving.sort();
        for key in &moving {
            if let Some(parked) = self.unschedulable.remove(key) {
                let failures = self.failures.get(key).copied().unwrap_or(1);
                let queued = self.queued(parked.pod, parked.queued_at);
                self.backoff.push(BackingOff {
                    backoff_seconds: backoff_seconds(failures),
                    queued,
                });
            }
        }
        moving.len()
    }

    /// The priority the queue sorts `pod` (`key`) by: its group's, or its own.
    fn priority_of(&self, key: &str, pod: &PodInfo) -> i32 {
        self.group_of
            .get(key)
            .and_then(|g| self.groups.get(g))
            .map_or(pod.priority, |g| g.priority)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::names;
    use crate::testing::pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn queued(name: &str, priority: i32, created: i64) -> Arc<PodInfo> {
        Arc::new(
            pod(name)
                .priority(priority)
                .with(|p| {
                    p.metadata.creation_timestamp = Some(Time(
                        k8s_openapi::jiff::Timestamp::from_second(created).expect("time"),
                    ));
                })
                .info(),
        )
    }

    /// The deletion of a placed pod (wakes NodeResourcesFit's rejections).
    fn deletion() -> ClusterEvent {
        ClusterEvent::AssignedPodDelete(Arc::new(pod("victim").node("n1").info()))
    }

    fn drain(queue: &mut SchedulingQueue) -> Vec<String> {
        std::iter::from_fn(|| queue.pop())
            .map(|p| p.name().to_string())
            .collect()
    }

    #[test]
    fn priority_then_creation_then_name() {
        type Queued<'a> = Vec<(&'a str, i32, i64)>;
        let cases: Vec<(Queued<'_>, Vec<&str>)> = vec![
            (vec![("a", 0, 1), ("b", 10, 2)], vec!["b", "a"]),
            (vec![("a", 5, 2), ("b", 5, 1)], vec!["b", "a"]),
            (vec![("b", 5, 1), ("a", 5, 1)], vec!["a", "b"]),
            (
                vec![("low", -1, 0), ("mid", 0, 5), ("high", 1000, 9), ("mid2", 0, 3)],
                vec!["high", "mid2", "mid", "low"],
            ),
        ];
        for (pods, want) in cases {
            let mut queue = SchedulingQueue::new(pods.iter().map(|(n, p, c)| queued(n, *p, *c)));
            assert_eq!(drain(&mut queue), want, "{pods:?}");
        }
    }

    #[test]
    fn a_moved_back_pod_backs_off_behind_every_active_pod() {
        let mut queue = SchedulingQueue::new([queued("x", 5, 1), queued("y", 5, 2), queued("z", 1, 0)]);
        let first = queue.pop().expect("x");
        assert_eq!(first.name(), "x");
        queue.add_unschedulable(first, [names::NODE_RESOURCES_FIT].into(), HintInputs::default());
        assert_eq!(queue.on_event(&deletion(), None), 1);
        assert_eq!(drain(&mut queue), ["y", "z", "x"]);
    }

    #[test]
    fn the_backoff_queue_gives_shorter_backoffs_first_then_the_active_order() {
        let mut queue =
            SchedulingQueue::new([queued("twice", 1, 1), queued("low", 1, 2), queued("high", 9, 3)]);
        let fit = || -> BTreeSet<&'static str> { [names::NODE_RESOURCES_FIT].into() };
        // "twice" fails twice (2 s backoff), "high" and "low" once (1 s).
        while let Some(pod) = queue.pop() {
            queue.add_unschedulable(pod, fit(), HintInputs::default());
        }
        let twice = queued("twice", 1, 1);
        queue.on_event(&deletion(), None);
        assert_eq!(
            drain(&mut queue),
            ["high", "twice", "low"],
            "all at 1 s: priority, then queue time"
        );
        for pod in [twice, queued("low", 1, 2), queued("high", 9, 3)] {
            queue.add_unschedulable(pod, fit(), HintInputs::default());
        }
        queue.add_unschedulable(queued("twice", 1, 1), fit(), HintInputs::default());
        queue.on_event(&deletion(), None);
        assert_eq!(
            drain(&mut queue),
            ["high", "low", "twice"],
            "twice failed 3 times: 4 s"
        );
        assert_eq!(
            (1..=6).map(backoff_seconds).collect::<Vec<_>>(),
            [1, 2, 4, 8, 10, 10]
        );
    }

    #[test]
    fn a_gated_pod_ignores_events_and_a_priority_bound_skips_higher_pods() {
        let mut queue = SchedulingQueue::default();
        let fit = || -> BTreeSet<&'static str> { [names::NODE_RESOURCES_FIT].into() };
        queue.add_unschedulable(queued("preemptor", 100, 0), fit(), HintInputs::default());
        queue.add_unschedulable(queued("high", 50, 0), fit(), HintInputs::default());
        queue.add_unschedulable(queued("low", 5, 0), fit(), HintInputs::default());
        queue.set_gated("default/preemptor", true);
        assert_eq!(queue.on_event(&deletion(), Some(10)), 1, "only low");
        assert!(queue.is_parked("default/high") && queue.is_parked("default/preemptor"));
        assert_eq!(
            queue.on_event(&deletion(), None),
            1,
            "high; the preemptor is gated"
        );
        queue.set_gated("default/preemptor", false);
        assert_eq!(queue.on_event(&deletion(), None), 1);
        assert_eq!(drain(&mut queue), ["preemptor", "high", "low"]);
    }

    #[test]
    fn a_pod_no_plugin_rejected_is_requeued_by_any_event() {
        let mut queue = SchedulingQueue::default();
        queue.add_unschedulable(queued("p", 0, 0), BTreeSet::new(), HintInputs::default());
        let added = ClusterEvent::AssignedPodAdd(Arc::new(pod("other").node("n1").info()));
        assert_eq!(queue.on_event(&added, None), 1);
    }
}
