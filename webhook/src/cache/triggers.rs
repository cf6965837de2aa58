//! The pods the controller must look at, handed from the pod reflector to the controller without
//! ever making the reflector wait.
//!
//! Why not kube-runtime's shared stream (`store_shared` + `reflect_shared` + `ReflectHandle`, which
//! the controller used before): in kube-runtime 5.0.0 a `ReflectHandle` that receives the reference of
//! a pod already deleted from the store returns `Pending` without registering a waker
//! (`reflector/dispatcher.rs`, `ReflectHandle::poll_next`), so the controller stops reading it; the
//! broadcast channel then fills and `reflect_shared` waits for room before it applies the next event,
//! which freezes the pod watch itself. Pod churn (pods created and deleted within moments) hit it.
//!
//! Here the reflector pushes [`ObjectRef`]s into a queue that never blocks: a push of a reference
//! already waiting is dropped (the controller reads the newest object from the store when it takes
//! the reference), and a deleted pod's reference leaves the queue (there is nothing left to do for
//! it). So the queue holds at most one entry per pod that exists, bounded by the cluster like the
//! pod store itself. The controller takes references only once the whole cache has synced (a claim,
//! PV, class or namespace not listed yet must not decide anything).
//!
//! Each entry keeps when it was queued: the age of the oldest one is the controller's lag, which the
//! watchdog ([`crate::watchdog`]) reports and fails on (a controller that stops taking references).

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::Stream;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::{Notify, watch};

/// The queue of pods to reconcile (see the module docs).
#[derive(Debug, Default)]
pub struct PodTriggers {
    queue: Mutex<Queue>,
    /// Woken on every push; `notify_one` keeps a permit when no one waits, so a push between the
    /// consumer's check and its wait is never lost.
    pushed: Notify,
}

#[derive(Debug, Default)]
struct Queue {
    /// In push order, each with when it was queued. May hold references `waiting` no longer has
    /// (deleted pods), skipped when popped.
    order: VecDeque<(ObjectRef<Pod>, Instant)>,
    waiting: HashSet<ObjectRef<Pod>>,
}

impl Queue {
    /// Drops the front entries no longer waiting, so the front is the oldest that is.
    fn skip_forgotten(&mut self) {
        while let Some((front, _)) = self.order.front() {
            if self.waiting.contains(front) {
                break;
            }
            self.order.pop_front();
        }
    }
}

impl PodTriggers {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `pod` unless it is already waiting. Never waits.
    pub fn push(&self, pod: ObjectRef<Pod>) {
        self.push_all([pod]);
    }

    /// Queues every pod of `pods` not already waiting. Never waits.
    pub fn push_all(&self, pods: impl IntoIterator<Item = ObjectRef<Pod>>) {
        let now = Instant::now();
        let mut queue = self.lock();
        let mut any = false;
        for pod in pods {
            if queue.waiting.insert(pod.clone()) {
                queue.order.push_back((pod, now));
                any = true;
            }
        }
        drop(queue);
        if any {
            self.pushed.notify_one();
        }
    }

    /// `pod` was deleted: it needs nothing any more.
    pub fn forget(&self, pod: &ObjectRef<Pod>) {
        let mut queue = self.lock();
        if queue.waiting.remove(pod) {
            queue.skip_forgotten();
            // Deleted pods leave entries behind in `order` until they reach the front; compact when
            // they outnumber the waiting ones, so churn cannot grow it past twice the live pods.
            if queue.order.len() > 2 * queue.waiting.len() + 64 {
                let Queue { order, waiting } = &mut *queue;
                order.retain(|(r, _)| waiting.contains(r));
            }
        }
    }

    fn pop(&self) -> Option<ObjectRef<Pod>> {
        let mut queue = self.lock();
        queue.skip_forgotten();
        let (pod, _) = queue.order.pop_front()?;
        queue.waiting.remove(&pod);
        Some(pod)
    }

    /// References waiting.
    pub fn len(&self) -> usize {
        self.lock().waiting.len()
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How long the oldest waiting reference has waited at `now`, counted from `since` at the
    /// earliest (when the controller could start taking them).
    pub fn oldest_wait(&self, now: Instant, since: Instant) -> Option<Duration> {
        let mut queue = self.lock();
        queue.skip_forgotten();
        let (_, queued) = queue.order.front()?;
        Some(now.saturating_duration_since((*queued).max(since)))
    }

    /// The references, in push order, from the moment `synced` turns true; for one consumer (the
    /// controller). Ends when `synced`'s sender is dropped before it turned true.
    pub fn stream(
        self: Arc<Self>,
        synced: watch::Receiver<bool>,
    ) -> impl Stream<Item = ObjectRef<Pod>> + Send {
        futures::stream::unfold((self, synced, false), |(triggers, mut synced, open)| async move {
            if !open && synced.wait_for(|s| *s).await.is_err() {
                return None;
            }
            loop {
                if let Some(pod) = triggers.pop() {
                    return Some((pod, (triggers, synced, true)));
                }
                triggers.pushed.notified().await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::{FutureExt, StreamExt};

    fn pod(name: &str) -> ObjectRef<Pod> {
        ObjectRef::new(name).within("ns")
    }

    #[test]
    fn pushes_are_deduplicated_and_deleted_pods_leave_the_queue() {
        let triggers = PodTriggers::default();
        triggers.push_all([pod("a"), pod("b"), pod("a")]);
        triggers.push(pod("b"));
        assert_eq!(triggers.len(), 2);
        triggers.forget(&pod("a"));
        assert_eq!(triggers.len(), 1);
        assert_eq!(triggers.pop(), Some(pod("b")));
        assert_eq!(triggers.pop(), None);
        // Churn: thousands of pods created and deleted leave the queue as they came.
        for i in 0..5_000 {
            triggers.push(pod(&format!("churn-{i}")));
            triggers.forget(&pod(&format!("churn-{i}")));
        }
        assert!(triggers.is_empty());
        assert!(
            triggers.lock().order.len() <= 64,
            "entries of deleted pods are compacted away"
        );
        triggers.push(pod("after"));
        assert_eq!(triggers.pop(), Some(pod("after")));
    }

    #[test]
    fn the_oldest_wait_counts_from_the_later_of_queueing_and_sync() {
        let triggers = PodTriggers::default();
        let t0 = Instant::now();
        assert_eq!(triggers.oldest_wait(t0, t0), None);
        triggers.push(pod("a"));
        let later = Instant::now() + Duration::from_secs(5);
        let waited = triggers.oldest_wait(later, t0).expect("one waits");
        assert!(
            waited >= Duration::from_secs(5) && waited < Duration::from_secs(6),
            "{waited:?}"
        );
        assert_eq!(triggers.oldest_wait(later, later), Some(Duration::ZERO));
        triggers.forget(&pod("a"));
        assert_eq!(triggers.oldest_wait(later, t0), None);
    }

    #[tokio::test]
    async fn the_stream_waits_for_the_sync_then_never_stalls_on_a_deleted_pod() {
        let triggers = Arc::new(PodTriggers::default());
        let (synced_tx, synced) = watch::channel(false);
        let mut stream = Box::pin(triggers.clone().stream(synced));
        triggers.push(pod("early"));
        assert!(
            stream.next().now_or_never().is_none(),
            "nothing before the cache has synced"
        );
        synced_tx.send_replace(true);
        assert_eq!(stream.next().await, Some(pod("early")));
        // A pod queued and deleted before the controller took it (kube-runtime's ReflectHandle stalls
        // here): the next pod still comes through.
        triggers.push(pod("deleted"));
        triggers.forget(&pod("deleted"));
        let next = tokio::spawn(async move { stream.next().await });
        tokio::task::yield_now().await;
        triggers.push(pod("next"));
        let got = tokio::time::timeout(Duration::from_secs(5), next)
            .await
            .expect("the stream wakes up for the next push")
            .expect("the task ran");
        assert_eq!(got, Some(pod("next")));
    }
}
