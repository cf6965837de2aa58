//! kube-scheduler's scheduling queue, without clocks: the active queue in the QueueSort order, the
//! backoff queue, and the unschedulable pods with the plugins that rejected them, moved to the backoff
//! queue when a cluster event those plugins register for happens.
//!
//! Active order (PrioritySort): higher priority first, then earlier queue time. A pod's first queue
//! time is its creation time; a pod that failed gets a queue time after every pod already queued, as
//! kube-scheduler refreshes the timestamp when it parks a pod. Equal times go by `namespace/name` (the
//! order kube-scheduler's informer lists pods in).
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

use crate::plugins::names;
use crate::snapshot::PodInfo;

/// Plugins whose rejection an assigned pod's addition can undo (their `EventsToRegister` include
/// `AssignedPod/Add`).
const WAKE_ON_POD_ADD: [&str; 2] = [names::INTER_POD_AFFINITY, names::POD_TOPOLOGY_SPREAD];

/// Plugins whose rejection an assigned pod's deletion can undo (`AssignedPod/Delete`).
const WAKE_ON_POD_DELETE: [&str; 7] = [
    names::NODE_RESOURCES_FIT,
    names::NODE_PORTS,
    names::NODE_VOLUME_LIMITS,
    names::VOLUME_RESTRICTIONS,
    names::INTER_POD_AFFINITY,
    names::POD_TOPOLOGY_SPREAD,
    names::DEFAULT_PREEMPTION,
];

/// A cluster event that may make unschedulable pods schedulable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterEvent {
    /// A pod was assigned to a node.
    AssignedPodAdd,
    /// An assigned pod was deleted (a preemption victim).
    AssignedPodDelete,
}

impl ClusterEvent {
    fn wakes(self, plugin: &str) -> bool {
        match self {
            ClusterEvent::AssignedPodAdd => WAKE_ON_POD_ADD.contains(&plugin),
            ClusterEvent::AssignedPodDelete => WAKE_ON_POD_DELETE.contains(&plugin),
        }
    }
}

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
    /// Creation time (nanoseconds) for a first attempt; a sequence number past every creation time
    /// for a pod moved back.
    queued_at: i128,
    key: String,
}

impl Queued {
    fn order(&self, other: &Self) -> Ordering {
        self.pod
            .priority
            .cmp(&other.pod.priority)
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

/// A parked pod: the pod, the plugins that rejected it, and its queue time.
#[derive(Debug, Clone)]
struct Parked {
    pod: Arc<PodInfo>,
    plugins: BTreeSet<&'static str>,
    queued_at: i128,
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
        let mut queue = SchedulingQueue::default();
        for pod in pods {
            queue.next_requeue = queue.next_requeue.max(creation_nanos(&pod) + 1);
            queue.active.push(Queued {
                key: pod.key(),
                queued_at: creation_nanos(&pod),
                pod,
            });
        }
        queue
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

    /// Parks a pod that failed, with the plugins that rejected it.
    pub fn add_unschedulable(&mut self, pod: Arc<PodInfo>, plugins: BTreeSet<&'static str>) {
        let key = pod.key();
        *self.failures.entry(key.clone()).or_insert(0) += 1;
        let queued_at = self.next_requeue;
        self.next_requeue += 1;
        self.unschedulable.insert(
            key,
            Parked {
                pod,
                plugins,
                queued_at,
            },
        );
    }

    /// Replaces a parked pod's object (its nomination changed), keeping its plugins.
    pub fn update_unschedulable(&mut self, pod: Arc<PodInfo>) {
        if let Some(entry) = self.unschedulable.get_mut(&pod.key()) {
            entry.pod = pod;
        }
    }

    /// Moves to the backoff queue every parked pod one of whose rejecting plugins registers for
    /// `event`; returns how many moved.
    pub fn on_event(&mut self, event: ClusterEvent) -> usize {
        let moving: Vec<String> = self
            .unschedulable
            .iter()
            .filter(|(_, parked)| parked.plugins.iter().any(|p| event.wakes(p)))
            .map(|(key, _)| key.clone())
            .collect();
        for key in &moving {
            if let Some(parked) = self.unschedulable.remove(key) {
                let failures = self.failures.get(key).copied().unwrap_or(1);
                self.backoff.push(BackingOff {
                    backoff_seconds: backoff_seconds(failures),
                    queued: Queued {
                        key: key.clone(),
                        queued_at: parked.queued_at,
                        pod: parked.pod,
                    },
                });
            }
        }
        moving.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        queue.add_unschedulable(first, [names::NODE_RESOURCES_FIT].into());
        assert_eq!(queue.on_event(ClusterEvent::AssignedPodDelete), 1);
        assert_eq!(drain(&mut queue), ["y", "z", "x"]);
    }

    #[test]
    fn the_backoff_queue_gives_shorter_backoffs_first_then_the_active_order() {
        let mut queue =
            SchedulingQueue::new([queued("twice", 1, 1), queued("low", 1, 2), queued("high", 9, 3)]);
        let fit = || -> BTreeSet<&'static str> { [names::NODE_RESOURCES_FIT].into() };
        // "twice" fails twice (2 s backoff), "high" and "low" once (1 s).
        while let Some(pod) = queue.pop() {
            queue.add_unschedulable(pod, fit());
        }
        let twice = queued("twice", 1, 1);
        queue.on_event(ClusterEvent::AssignedPodDelete);
        assert_eq!(
            drain(&mut queue),
            ["high", "twice", "low"],
            "all at 1 s: priority, then queue time"
        );
        for pod in [twice, queued("low", 1, 2), queued("high", 9, 3)] {
            queue.add_unschedulable(pod, fit());
        }
        queue.add_unschedulable(queued("twice", 1, 1), fit());
        queue.on_event(ClusterEvent::AssignedPodDelete);
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
    fn events_wake_only_the_plugins_that_register_for_them() {
        let cases: Vec<(&'static str, ClusterEvent, usize)> = vec![
            (names::NODE_RESOURCES_FIT, ClusterEvent::AssignedPodAdd, 0),
            (names::NODE_RESOURCES_FIT, ClusterEvent::AssignedPodDelete, 1),
            (names::TAINT_TOLERATION, ClusterEvent::AssignedPodDelete, 0),
            (names::NODE_AFFINITY, ClusterEvent::AssignedPodAdd, 0),
            (names::INTER_POD_AFFINITY, ClusterEvent::AssignedPodAdd, 1),
            (names::POD_TOPOLOGY_SPREAD, ClusterEvent::AssignedPodAdd, 1),
            (names::NODE_PORTS, ClusterEvent::AssignedPodDelete, 1),
        ];
        for (plugin, event, moved) in cases {
            let mut queue = SchedulingQueue::default();
            queue.add_unschedulable(queued("p", 0, 0), [plugin].into());
            assert_eq!(queue.on_event(event), moved, "{plugin} {event:?}");
            assert_eq!(queue.active_len(), moved);
        }
    }
}
