//! The reflectors that feed the stores: one watch per kind the object-kind table marks as reflected
//! (`stores`), every object slimmed before it is stored,
//! all on a thread of their own; the last kind to list marks the cache ready. The pod reflector also
//! queues pods for the controller ([`PodTriggers`]), and a heartbeat on the same thread tells the
//! watchdog the reflectors still run.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::reflector::store::Writer;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use super::{Cache, PodTriggers, Slim, Writers};
use crate::admission::ClusterView;

/// The thread the reflectors run on. One thread decodes every LIST page and watch event, so the cached
/// objects all come from one jemalloc arena (one per thread, round robin): spread over the worker
/// threads, each arena keeps its own partly used pages of the decoded-then-pruned objects, which cost
/// about 7 MiB more resident memory with 10,000 PVs and claims. Decoding off the workers also keeps a
/// relist's burst from delaying admission requests.
pub const REFLECTOR_THREAD: &str = "sched-reflectors";

/// Objects per LIST page. Each page is decoded in full (managedFields included) before its objects are
/// pruned, so the page size bounds that transient memory and the holes it leaves between the kept
/// objects: with 10,000 PVs and claims, 100 instead of client-go's 500 took 8 MiB off the synced RSS
/// for a few more round trips (sync 0.6 s -> 0.8 s on loopback).
pub const LIST_PAGE_SIZE: u32 = 100;

/// Non-terminal pods only: the scheduler never sees the others.
const NON_TERMINAL_PODS: &str = "status.phase!=Succeeded,status.phase!=Failed";

impl Cache {
    /// Starts one reflector per kind, and a task that marks the cache ready once all have listed, on a
    /// thread of their own (see [`REFLECTOR_THREAD`]). They run as long as the returned task, which
    /// lives on the caller's runtime: aborting it, or shutting that runtime down, stops them.
    pub fn start(self: &Arc<Self>, client: &Client, writers: Writers) -> Vec<JoinHandle<()>> {
        let (alive, dropped) = tokio::sync::oneshot::channel::<()>();
        let (cache, client) = (self.clone(), client.clone());
        let thread = std::thread::Builder::new()
            .name(REFLECTOR_THREAD.into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot start the reflectors' runtime");
                        return;
                    }
                };
                runtime.block_on(async move {
                    let _reflectors = cache.spawn_reflectors(&client, writers);
                    // Err once the caller's task is gone; the runtime's drop then stops the reflectors.
                    let _ = dropped.await;
                });
            });
        if let Err(e) = thread {
            tracing::error!(error = %e, "cannot start the reflector thread");
        }
        vec![tokio::spawn(async move {
            let _alive = alive;
            std::future::pending::<()>().await
        })]
    }

    /// Spawns the reflectors and the reflectors' heartbeat on the current runtime.
    fn spawn_reflectors(self: &Arc<Self>, client: &Client, writers: Writers) -> Vec<JoinHandle<()>> {
        let config = watcher::Config::default()
            .any_semantic()
            .page_size(LIST_PAGE_SIZE);
        let reflectors = Reflectors {
            client: client.clone(),
            pods_config: config.clone().fields(NON_TERMINAL_PODS),
            config,
            cache: self.clone(),
        };
        let mut tasks = self.spawn_stores(&reflectors, writers);
        // Set before this (current-thread) runtime runs any of the tasks just spawned, so no kind
        // can report its list first.
        self.unlisted.store(tasks.len(), Ordering::Release);
        tasks.push(self.watchdog.spawn_reflector_heartbeat());
        tasks
    }

    /// A reflector listed its kind for the first time; the last one marks the cache ready.
    fn kind_listed(&self) {
        if self.unlisted.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        // Built before the first request needs it, on this thread rather than a worker's.
        let _ = self.volume_snapshot();
        self.set_synced();
        let heap = crate::memory::allocator_stats();
        tracing::info!(
            heap_allocated_bytes = heap.map(|h| h.0),
            heap_resident_bytes = heap.map(|h| h.1),
            "reflector caches synced"
        );
    }
}

/// What the pod reflector does with each event it applied: queue the pod for the controller, or
/// drop it from the queue once deleted. A (re)list queues its pods at its end, once the store holds
/// them (queued earlier, the controller could look them up before the store has them, and drop them).
fn pod_triggers_feed(triggers: Arc<PodTriggers>) -> impl FnMut(&watcher::Event<Pod>) + Send + 'static {
    let mut listed = Vec::new();
    move |event| match event {
        watcher::Event::Apply(pod) => triggers.push(ObjectRef::from_obj(pod)),
        watcher::Event::Delete(pod) => triggers.forget(&ObjectRef::from_obj(pod)),
        watcher::Event::Init => listed.clear(),
        watcher::Event::InitApply(pod) => listed.push(ObjectRef::from_obj(pod)),
        watcher::Event::InitDone => triggers.push_all(listed.drain(..)),
    }
}

/// What the reflectors share: the client, the watch configurations and the cache.
pub(super) struct Reflectors {
    client: Client,
    config: watcher::Config,
    /// Non-terminal pods only.
    pods_config: watcher::Config,
    cache: Arc<Cache>,
}

impl Reflectors {
    /// [`spawn_reflector`] for every object of `W` in the cluster, into an unshared store.
    pub(super) fn spawn<W, K>(&self, writer: Writer<K>, generation: Option<&Arc<AtomicU64>>) -> JoinHandle<()>
    where
        W: Resource + Clone + DeserializeOwned + Debug + Send + Sync + Slim + 'static,
        W::DynamicType: Default,
        K: Resource + Clone + From<W> + Debug + Send + Sync + 'static,
        K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
    {
        spawn_reflector(
            Api::all(self.client.clone()),
            self.config.clone(),
            writer,
            generation.cloned(),
            self.cache.clone(),
            |_: &watcher::Event<K>| {},
        )
    }

    /// The pod reflector: non-terminal pods only, each event also queues or forgets the pod for the
    /// controller ([`PodTriggers`]).
    pub(super) fn spawn_pods(&self, writer: Writer<Pod>) -> JoinHandle<()> {
        spawn_reflector(
            Api::all(self.client.clone()),
            self.pods_config.clone(),
            writer,
            None,
            self.cache.clone(),
            pod_triggers_feed(self.cache.pod_triggers()),
        )
    }
}

/// A watcher event of the API type as an event of the stored type.
fn stored_event<W, K: From<W>>(event: watcher::Event<W>) -> watcher::Event<K> {
    match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(K::from(o)),
        watcher::Event::Delete(o) => watcher::Event::Delete(K::from(o)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(K::from(o)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// Watches `W`, slims each object, stores it as `K` (the same type, or the engine's compact one),
/// then hands the event to `on_event`. The loop awaits nothing but the watch, so nothing downstream
/// can hold it back.
fn spawn_reflector<W, K>(
    api: Api<W>,
    config: watcher::Config,
    writer: Writer<K>,
    generation: Option<Arc<AtomicU64>>,
    cache: Arc<Cache>,
    mut on_event: impl FnMut(&watcher::Event<K>) + Send + 'static,
) -> JoinHandle<()>
where
    W: Resource + Clone + DeserializeOwned + Debug + Send + Sync + Slim + 'static,
    W::DynamicType: Default,
    K: Resource + Clone + From<W> + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    let kind = W::kind(&W::DynamicType::default()).to_string();
    let health = cache.watch_health();
    let clock = cache.watchdog.event_clock(&kind);
    tokio::spawn(async move {
        let stream = watcher(api, config)
            .modify(|o: &mut W| o.slim())
            .map_ok(stored_event::<W, K>)
            .default_backoff()
            .reflect(writer);
        futures::pin_mut!(stream);
        let mut listed = false;
        while let Some(event) = stream.next().await {
            match event {
                Ok(event) => {
                    clock.tick();
                    if let Some(g) = &generation {
                        g.fetch_add(1, Ordering::Release);
                    }
                    health.ok(&kind);
                    on_event(&event);
                    if !listed && matches!(event, watcher::Event::InitDone) {
                        listed = true;
                        cache.kind_listed();
                    }
                }
                Err(e) => {
                    tracing::warn!(kind = %kind, error = %e, "watch failed; retrying with backoff");
                    health.error(&kind, &e.to_string());
                }
            }
        }
    })
}
