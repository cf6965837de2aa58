//! kube-scheduler's scheduling queue, without clocks: an active queue in the QueueSort order, and the
//! unschedulable pods with the plugins that rejected them, moved back when a cluster event those
//! plugins register for happens.
//!
//! Order (PrioritySort): higher priority first, then earlier queue time. A pod's first queue time is
//! its creation time; a pod moved back after a failed attempt gets a queue time after every pod
//! already queued, as kube-scheduler refreshes the timestamp when it re-adds a pod. Equal times go by
//! `namespace/name` (the order kube-scheduler's informer lists pods in).
//!
//! Backoff is not timed: a pod moved back is retried after the pods already active of its priority,
//! which is what kube-scheduler's backoff amounts to when a batch is scheduled faster than a backoff
//! expires.

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

/// The queue (see the module doc).
#[derive(Debug, Default)]
pub struct SchedulingQueue {
    active: BinaryHeap<Queued>,
    /// Unschedulable pods by `namespace/name`, with the plugins that rejected them.
    unschedulable: HashMap<String, (Arc<PodInfo>, BTreeSet<&'static str>)>,
    /// The next queue time of a pod moved back (past every creation time).
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

    /// The next pod to schedule.
    pub fn pop(&mut self) -> Option<Arc<PodInfo>> {
        self.active.pop().map(|q| q.pod)
    }

    /// Pods waiting in the active queue.
    pub fn active_len(&self) -> usize {
        self.active.len()
    }

    /// Parks a pod that failed, with the plugins that rejected it.
    pub fn add_unschedulable(&mut self, pod: Arc<PodInfo>, plugins: BTreeSet<&'static str>) {
        self.unschedulable.insert(pod.key(), (pod, plugins));
    }

    /// Replaces a parked pod's object (its nomination changed), keeping its plugins.
    pub fn update_unschedulable(&mut self, pod: Arc<PodInfo>) {
        if let Some(entry) = self.unschedulable.get_mut(&pod.key()) {
            entry.0 = pod;
        }
    }

    /// Moves back to the active queue every parked pod one of whose rejecting plugins registers for
    /// `event`; returns how many moved. Moved pods queue in key order (deterministic).
    pub fn on_event(&mut self, event: ClusterEvent) -> usize {
        let mut moving: Vec<String> = self
            .unschedulable
            .iter()
            .filter(|(_, (_, plugins))| plugins.iter().any(|p| event.wakes(p)))
            .map(|(key, _)| key.clone())
            .collect();
        moving.sort();
        for key in &moving {
            if let Some((pod, _)) = self.unschedulable.remove(key) {
                self.active.push(Queued {
                    key: key.clone(),
                    queued_at: self.next_requeue,
                    pod,
                });
                self.next_requeue += 1;
            }
        }
        moving.len()
    }

    /// The pods still parked, by key.
    pub fn unschedulable_keys(&self) -> impl Iterator<Item = &String> {
        self.unschedulable.keys()
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
    fn a_moved_back_pod_queues_after_pods_of_its_priority_but_before_lower_ones() {
        let mut queue = SchedulingQueue::new([queued("x", 5, 1), queued("y", 5, 2), queued("z", 1, 0)]);
        let first = queue.pop().expect("x");
        assert_eq!(first.name(), "x");
        queue.add_unschedulable(first, [names::NODE_RESOURCES_FIT].into());
        assert_eq!(queue.on_event(ClusterEvent::AssignedPodDelete), 1);
        assert_eq!(drain(&mut queue), ["y", "x", "z"]);
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
