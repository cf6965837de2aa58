//! The webhook's view of the cluster: kube-runtime reflectors for the kinds volume binding and the
//! engine's filters read, each object pruned before it is stored, plus an overlay of the webhook's own
//! writes that the watches have not delivered yet (so the next decision does not hand out a PV this
//! replica just bound).
//!
//! Snapshots are built per decision from the stores: the volume maps (PVs, PVCs, classes, CSI objects,
//! VolumeAttachments) are rebuilt only when one of those kinds changed, and a volume decision adds only
//! the node it is about. The engine's full snapshot (every node and pod) is built only for opted-in pods and for
//! bindings that have nominations to check. Requests that need nothing never touch the cache.
//!
//! By job: `stores` holds one store per kind the object-kind table (`sched_core::object_kind_table!`)
//! marks as reflected, with the glue generated from it, `slim` prunes each object before it is stored, `overlay` keeps the webhook's own writes
//! until the watches deliver them, `reflectors` runs the watches on their own thread and reports
//! readiness, `triggers` queues the pods the controller must look at, and `view` builds the snapshots
//! decisions read (`impl ClusterView for Cache`). This module holds the cache ([`Cache`]) and the
//! ways to fill it ([`Writers`]).
//!
//! Readiness is the cache's own signal, a `tokio::sync::watch` that wakes every waiter, set once every
//! kind has listed. Nothing waits on kube-runtime's `Store::wait_until_ready`: in kube-runtime 5.0.0 it
//! keeps a single waker (a `futures` oneshot receiver in `DelayedInit`), so of two tasks waiting on one
//! store only the one that polled last is woken (the readiness task lost to the controller, and the
//! replica never became ready).

mod overlay;
mod reflectors;
mod slim;
mod stores;
mod triggers;
mod view;

use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::reflector::Store;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher;

use sched_core::engine::SchedulerConfig;
use sched_core::{ClusterObjects, Engine, Snapshot};

pub use overlay::OVERLAY_TTL;
use overlay::Overlay;
pub use reflectors::{LIST_PAGE_SIZE, REFLECTOR_THREAD};
pub use slim::Slim;
use stores::Stores;
pub use stores::Writers;
pub use triggers::PodTriggers;

use crate::watchdog::Watchdog;

impl Writers {
    /// Replaces a store's contents with `items` (pruned one at a time, so a large synthetic fill never
    /// holds the unpruned objects all at once).
    fn load_into<W, K>(writer: &mut Writer<K>, items: impl IntoIterator<Item = W>)
    where
        W: Slim,
        K: Resource + Clone + From<W>,
        K::DynamicType: Eq + Hash + Clone,
    {
        writer.apply_watcher_event(&watcher::Event::Init);
        for mut item in items {
            item.slim();
            writer.apply_watcher_event(&watcher::Event::InitApply(K::from(item)));
        }
        writer.apply_watcher_event(&watcher::Event::InitDone);
    }

    /// Loads nodes (then call [`Cache::mark_filled`]).
    pub fn load_nodes(&mut self, items: impl IntoIterator<Item = Node>) {
        Self::load_into(&mut self.nodes, items);
    }

    /// Loads PersistentVolumes.
    pub fn load_pvs(&mut self, items: impl IntoIterator<Item = PersistentVolume>) {
        Self::load_into(&mut self.persistent_volumes, items);
    }

    /// Loads PersistentVolumeClaims.
    pub fn load_pvcs(&mut self, items: impl IntoIterator<Item = PersistentVolumeClaim>) {
        Self::load_into(&mut self.persistent_volume_claims, items);
    }

    /// Loads StorageClasses.
    pub fn load_classes(&mut self, items: impl IntoIterator<Item = StorageClass>) {
        Self::load_into(&mut self.storage_classes, items);
    }

    /// Loads pods.
    pub fn load_pods(&mut self, items: impl IntoIterator<Item = Pod>) {
        Self::load_into(&mut self.pods, items);
    }
}

/// The reflector caches.
pub struct Cache {
    /// One store per kind the object-kind table says the webhook reflects (see `stores`).
    stores: Stores,
    ready: AtomicBool,
    /// True once every kind has listed (or the cache was filled); wakes every waiter.
    synced: tokio::sync::watch::Sender<bool>,
    /// Kinds whose reflector has not listed yet.
    unlisted: AtomicUsize,
    /// The pods the controller must look at, fed by the pod reflector.
    pod_triggers: Arc<PodTriggers>,
    /// The watchdog on the reflectors and the controller's queue.
    watchdog: Arc<Watchdog>,
    /// Bumped on every event of a volume kind and every overlay change.
    volume_generation: Arc<AtomicU64>,
    /// Bumped on every node event.
    node_generation: Arc<AtomicU64>,
    /// The volume snapshot, by (volume generation, node generation).
    volume_snapshot: Mutex<Option<CachedSnapshot>>,
    overlay: Mutex<Overlay>,
    engine: Engine,
    /// What the reflectors report about their watches (read by `/readyz`).
    watch_health: Arc<crate::watch_health::WatchHealth>,
}

/// A snapshot built for (volume generation, node generation).
type CachedSnapshot = ((u64, u64), Arc<Snapshot>);

fn key_of(meta: &ObjectMeta) -> String {
    match meta.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{}", meta.name.as_deref().unwrap_or("")),
        _ => meta.name.clone().unwrap_or_default(),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Cache {
    /// Empty stores and their writers, evaluated with the pinned release's engine and `config`.
    pub fn new(config: SchedulerConfig) -> (Arc<Cache>, Writers) {
        Cache::with_engine(Engine::with_config(config, "the scheduler configuration"))
    }

    /// Empty stores and their writers, evaluated with `engine` (built for the API server's release).
    pub fn with_engine(engine: Engine) -> (Arc<Cache>, Writers) {
        // The controller reads the pod store too, and is fed from `pod_triggers`, not a second watch.
        let (stores, writers) = stores::stores();
        let pod_triggers = Arc::new(PodTriggers::default());
        let cache = Arc::new(Cache {
            stores,
            ready: AtomicBool::new(false),
            synced: tokio::sync::watch::Sender::new(false),
            unlisted: AtomicUsize::new(usize::MAX),
            watchdog: Arc::new(Watchdog::new(pod_triggers.clone())),
            pod_triggers,
            volume_generation: Arc::new(AtomicU64::new(0)),
            node_generation: Arc::new(AtomicU64::new(0)),
            volume_snapshot: Mutex::new(None),
            overlay: Mutex::new(Overlay::default()),
            engine,
            watch_health: Arc::default(),
        });
        (cache, writers)
    }

    /// Fills the stores with fixed objects (tests, benchmarks) and marks the cache ready.
    pub fn fill(self: &Arc<Self>, writers: &mut Writers, objects: ClusterObjects) {
        writers.fill(objects);
        self.mark_filled();
    }

    /// Marks a cache filled through [`Writers`]' `load_*` methods as ready.
    pub fn mark_filled(&self) {
        self.volume_generation.fetch_add(1, Ordering::Release);
        self.node_generation.fetch_add(1, Ordering::Release);
        self.set_synced();
    }

    /// Marks the cache ready and wakes everything waiting for it.
    fn set_synced(&self) {
        self.ready.store(true, Ordering::Release);
        self.watchdog.synced();
        self.synced.send_replace(true);
    }

    /// Turns true once every reflector has listed its kind (every receiver is woken).
    pub fn synced(&self) -> tokio::sync::watch::Receiver<bool> {
        self.synced.subscribe()
    }

    /// The pods the controller must look at (see [`PodTriggers`]).
    pub fn pod_triggers(&self) -> Arc<PodTriggers> {
        self.pod_triggers.clone()
    }

    /// The watchdog on this cache's streams.
    pub fn watchdog(&self) -> Arc<Watchdog> {
        self.watchdog.clone()
    }

    /// True once every reflector has listed its kind.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Number of (PVs, PVCs, pods, nodes) cached.
    pub fn sizes(&self) -> (usize, usize, usize, usize) {
        let stores = &self.stores;
        (
            stores.persistent_volumes.len(),
            stores.persistent_volume_claims.len(),
            stores.pods.len(),
            stores.nodes.len(),
        )
    }

    /// The state of this cache's watches, which its reflectors keep.
    pub fn watch_health(&self) -> Arc<crate::watch_health::WatchHealth> {
        self.watch_health.clone()
    }

    /// The pod store (what the controller reconciles from).
    pub fn pod_store(&self) -> Store<Pod> {
        self.stores.pods.clone()
    }

    /// Pods in the store (for tests and sizing).
    pub fn pod_count(&self) -> usize {
        self.stores.pods.len()
    }
}

#[cfg(test)]
/// A ready cache with two nodes, a PV and a claim (for the submodules' tests).
fn filled() -> (Arc<Cache>, Writers) {
    use sched_core::engine::in_tree_registry;
    use sched_core::testing::{node, pv, pvc};

    let (cache, mut writers) = Cache::new(SchedulerConfig::default_config(&in_tree_registry()));
    cache.fill(
        &mut writers,
        ClusterObjects {
            nodes: vec![node("n1").obj(), node("n2").obj()],
            persistent_volumes: vec![pv("pv1").resource_version("5").obj()],
            persistent_volume_claims: vec![pvc("c1").namespace("ns").resource_version("5").obj()],
            ..ClusterObjects::default()
        },
    );
    (cache, writers)
}
