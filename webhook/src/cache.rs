//! The webhook's view of the cluster: kube-runtime reflectors for the kinds volume binding and the
//! engine's filters read, each object pruned before it is stored, plus an overlay of the webhook's own
//! writes that the watches have not delivered yet (so the next decision does not hand out a PV this
//! replica just bound).
//!
//! Snapshots are built per decision from the stores: the volume maps (PVs, PVCs, classes, CSI objects)
//! are rebuilt only when one of those kinds changed, and a volume decision adds only the node it is
//! about. The engine's full snapshot (every node and pod) is built only for opted-in pods and for
//! bindings that have nominations to check. Requests that need nothing never touch the cache.

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use sched_core::apply::Observed;
use sched_core::framework::profile::SchedulerConfig;
use sched_core::labels::Labels;
use sched_core::plugins::volume_binding::pv_helpers::is_claim_fully_bound;
use sched_core::snapshot::Prune;
// The engine's PV, which the PV store keeps (a quarter of the API object's size).
use sched_core::snapshot::volume::PersistentVolume as VolumeInfo;
use sched_core::{ClusterObjects, Snapshot};

use crate::admission::ClusterView;

/// How long an own write shadows the store when the watch never delivers a newer version.
pub const OVERLAY_TTL: Duration = Duration::from_secs(30);

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

/// Pod events buffered for the controller's subscription before the pod watch waits for it.
pub const POD_EVENT_BUFFER: usize = 1024;

/// Non-terminal pods only: the scheduler never sees the others.
const NON_TERMINAL_PODS: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// Annotations of a claim that volume binding reads.
const CLAIM_ANNOTATIONS: &[&str] = &[
    "pv.kubernetes.io/bind-completed",
    "volume.kubernetes.io/selected-node",
    "volume.beta.kubernetes.io/storage-class",
];
/// Annotations of a PV that decisions read. `pv.kubernetes.io/bound-by-controller` is not among them:
/// binding sets it on the PV it assumes whenever the PV is not already bound to the claim, whatever the
/// cached copy says, and the writes read the PV afresh. Dropping it leaves most PVs without an
/// annotation map (a B-tree node of over 500 bytes each).
const VOLUME_ANNOTATIONS: &[&str] = &["volume.beta.kubernetes.io/storage-class"];

fn keep_annotations(meta: &mut ObjectMeta, keep: &[&str]) {
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.retain(|k, _| keep.contains(&k.as_str()));
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
}

/// Drops what no decision reads of a PV's or claim's metadata. Name, namespace, uid (action plans
/// carry it as a precondition), resourceVersion (the overlay compares it), deletionTimestamp and labels
/// stay.
fn slim_volume_metadata(meta: &mut ObjectMeta, keep: &[&str]) {
    keep_annotations(meta, keep);
    meta.finalizers = None;
    meta.generate_name = None;
    meta.self_link = None;
    // Only a controller reference is read (generic ephemeral volumes must be controlled by their pod).
    if let Some(owners) = meta.owner_references.as_mut() {
        owners.retain(|r| r.controller == Some(true));
        if owners.is_empty() {
            meta.owner_references = None;
        }
    }
    shrink(&mut meta.owner_references);
}

/// Gives back the spare capacity serde leaves in a deserialized list (it grows a one-item list to four
/// slots): tens of thousands of objects keep these lists for the life of the process.
fn shrink<T>(list: &mut Option<Vec<T>>) {
    if let Some(items) = list.as_mut() {
        items.shrink_to_fit();
    }
}

/// Keeps only the `storage` quantity of a resource map (the only one volume binding compares).
fn keep_storage_only(
    resources: &mut Option<
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >,
) {
    if let Some(map) = resources.as_mut() {
        map.retain(|k, _| k == "storage");
        if map.is_empty() {
            *resources = None;
        }
    }
}

/// What the webhook stores of an object: the engine's pruning, and for PVs and claims (the kinds
/// there are tens of thousands of) only what volume binding, the volume filters and the overlay read.
/// Every tiny map costs a B-tree node (over 500 bytes), so dropping a claim's labels and status maps
/// matters at scale; apply reads every object it writes afresh, so nothing dropped here is ever
/// written back.
pub trait Slim: Prune {
    /// Prunes in place.
    fn slim(&mut self) {
        self.prune();
    }
}

impl Slim for PersistentVolumeClaim {
    fn slim(&mut self) {
        self.prune();
        // Claim labels are never matched (PV labels are, by the claim's selector).
        self.metadata.labels = None;
        slim_volume_metadata(&mut self.metadata, CLAIM_ANNOTATIONS);
        let fully_bound = is_claim_fully_bound(self);
        if let Some(spec) = self.spec.as_mut() {
            shrink(&mut spec.access_modes);
            if let Some(resources) = spec.resources.as_mut() {
                resources.limits = None;
                keep_storage_only(&mut resources.requests);
                if fully_bound {
                    // Sizes are compared only while a claim is matched or provisioned; a fully bound
                    // one never is again (a later change of it arrives whole from the watch).
                    resources.requests = None;
                }
            }
        }
        if let Some(status) = self.status.as_mut() {
            // Only the phase is read (a Lost claim makes the pod unschedulable).
            *status = k8s_openapi::api::core::v1::PersistentVolumeClaimStatus {
                phase: status.phase.take(),
                ..Default::default()
            };
        }
    }
}

impl Slim for PersistentVolume {
    fn slim(&mut self) {
        self.prune();
        slim_volume_metadata(&mut self.metadata, VOLUME_ANNOTATIONS);
        if let Some(spec) = self.spec.as_mut() {
            shrink(&mut spec.access_modes);
            keep_storage_only(&mut spec.capacity);
            spec.mount_options = None;
            spec.persistent_volume_reclaim_policy = None;
            if let Some(claim) = spec.claim_ref.as_mut() {
                // A binding is matched by the claim's namespace, name and uid.
                claim.api_version = None;
                claim.kind = None;
                claim.field_path = None;
                claim.resource_version = None;
            }
            if let Some(csi) = spec.csi.as_mut() {
                // The CSI limits read the driver and the volume handle; attributes and secrets are the
                // driver's business.
                csi.volume_attributes = None;
                csi.controller_expand_secret_ref = None;
                csi.controller_publish_secret_ref = None;
                csi.node_expand_secret_ref = None;
                csi.node_publish_secret_ref = None;
                csi.node_stage_secret_ref = None;
            }
            if let Some(required) = spec.node_affinity.as_mut().and_then(|a| a.required.as_mut()) {
                required.node_selector_terms.shrink_to_fit();
                for term in &mut required.node_selector_terms {
                    for requirements in [&mut term.match_expressions, &mut term.match_fields] {
                        shrink(requirements);
                        for requirement in requirements.iter_mut().flatten() {
                            shrink(&mut requirement.values);
                        }
                    }
                }
            }
        }
        if let Some(status) = self.status.as_mut() {
            *status = k8s_openapi::api::core::v1::PersistentVolumeStatus {
                phase: status.phase.take(),
                ..Default::default()
            };
        }
    }
}

impl Slim for Pod {}
impl Slim for Node {}
impl Slim for Namespace {}
impl Slim for StorageClass {}
impl Slim for CSINode {}
impl Slim for CSIDriver {}
impl Slim for CSIStorageCapacity {}

/// The writers that feed the stores (from the reflectors, or directly in tests and benchmarks).
pub struct Writers {
    pods: Writer<Pod>,
    nodes: Writer<Node>,
    namespaces: Writer<Namespace>,
    pvs: Writer<VolumeInfo>,
    pvcs: Writer<PersistentVolumeClaim>,
    classes: Writer<StorageClass>,
    csi_nodes: Writer<CSINode>,
    csi_drivers: Writer<CSIDriver>,
    capacities: Writer<CSIStorageCapacity>,
}

impl Writers {
    /// A subscription to the events the pod reflector applies, for the controller. Call it at most once,
    /// and keep consuming it: a subscriber that stops reading stalls the pod watch once
    /// [`POD_EVENT_BUFFER`] events are waiting.
    pub fn subscribe_pods(&self) -> Option<reflector::ReflectHandle<Pod>> {
        self.pods.subscribe()
    }

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
        Self::load_into(&mut self.pvs, items);
    }

    /// Loads PersistentVolumeClaims.
    pub fn load_pvcs(&mut self, items: impl IntoIterator<Item = PersistentVolumeClaim>) {
        Self::load_into(&mut self.pvcs, items);
    }

    /// Loads StorageClasses.
    pub fn load_classes(&mut self, items: impl IntoIterator<Item = StorageClass>) {
        Self::load_into(&mut self.classes, items);
    }

    /// Loads pods.
    pub fn load_pods(&mut self, items: impl IntoIterator<Item = Pod>) {
        Self::load_into(&mut self.pods, items);
    }
}

struct OverlayEntry<K> {
    object: Arc<K>,
    at: Instant,
}

#[derive(Default)]
struct Overlay {
    pvs: HashMap<String, OverlayEntry<VolumeInfo>>,
    pvcs: HashMap<String, OverlayEntry<PersistentVolumeClaim>>,
    classes: HashMap<String, OverlayEntry<StorageClass>>,
}

/// Moves the overlay's entries that are still newer than the store (and younger than [`OVERLAY_TTL`])
/// into `maps`, and forgets the others.
fn merge_overlay<K>(
    overlay: &mut HashMap<String, OverlayEntry<K>>,
    maps: &mut HashMap<String, Arc<K>>,
    now: Instant,
) where
    K: Resource,
{
    overlay.retain(|key, own| {
        let stored = maps.get(key);
        let keep = now.duration_since(own.at) < OVERLAY_TTL
            && !stored.is_some_and(|s| {
                store_caught_up(
                    s.meta().resource_version.as_deref(),
                    own.object.meta().resource_version.as_deref(),
                )
            });
        if keep {
            maps.insert(key.clone(), own.object.clone());
        }
        keep
    });
}

/// The volume objects by key, as the engine's snapshot holds them.
#[derive(Debug, Default)]
struct VolumeMaps {
    pvs: HashMap<String, Arc<VolumeInfo>>,
    pvcs: HashMap<String, Arc<PersistentVolumeClaim>>,
    classes: HashMap<String, Arc<StorageClass>>,
    csi_nodes: HashMap<String, Arc<CSINode>>,
    csi_drivers: HashMap<String, Arc<CSIDriver>>,
    capacities: Vec<Arc<CSIStorageCapacity>>,
}

/// The reflector caches.
pub struct Cache {
    pods: Store<Pod>,
    nodes: Store<Node>,
    namespaces: Store<Namespace>,
    pvs: Store<VolumeInfo>,
    pvcs: Store<PersistentVolumeClaim>,
    classes: Store<StorageClass>,
    csi_nodes: Store<CSINode>,
    csi_drivers: Store<CSIDriver>,
    capacities: Store<CSIStorageCapacity>,
    ready: AtomicBool,
    /// Bumped on every event of a volume kind and every overlay change.
    volume_generation: Arc<AtomicU64>,
    /// Bumped on every node event.
    node_generation: Arc<AtomicU64>,
    /// The volume snapshot, by (volume generation, node generation).
    volume_snapshot: Mutex<Option<CachedSnapshot>>,
    overlay: Mutex<Overlay>,
    config: SchedulerConfig,
    /// What the reflectors report about their watches (read by `/readyz`).
    watch_health: Arc<crate::health::WatchHealth>,
}

/// A snapshot built for (volume generation, node generation).
type CachedSnapshot = ((u64, u64), Arc<Snapshot>);

fn key_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    match meta.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{}", meta.name.as_deref().unwrap_or("")),
        _ => meta.name.clone().unwrap_or_default(),
    }
}

fn by_key<K>(items: Vec<Arc<K>>) -> HashMap<String, Arc<K>>
where
    K: Resource<Scope = k8s_openapi::ClusterResourceScope>,
{
    items.into_iter().map(|o| (key_of(o.meta()), o)).collect()
}

/// True when the stored version is at least the overlay's: resourceVersions are opaque, but etcd's are
/// integers, and anything else is compared for equality only.
fn store_caught_up(stored: Option<&str>, own: Option<&str>) -> bool {
    match (
        stored.and_then(|s| s.parse::<u64>().ok()),
        own.and_then(|s| s.parse::<u64>().ok()),
    ) {
        (Some(s), Some(o)) => s >= o,
        _ => stored == own,
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Cache {
    /// Empty stores and their writers.
    pub fn new(config: SchedulerConfig) -> (Arc<Cache>, Writers) {
        // Shared: the controller (crate::controller) subscribes to the pod events this reflector sees
        // instead of keeping a second watch and a second copy of every pod.
        let (pods, pods_w) = reflector::store_shared(POD_EVENT_BUFFER);
        let (nodes, nodes_w) = reflector::store();
        let (namespaces, namespaces_w) = reflector::store();
        let (pvs, pvs_w) = reflector::store();
        let (pvcs, pvcs_w) = reflector::store();
        let (classes, classes_w) = reflector::store();
        let (csi_nodes, csi_nodes_w) = reflector::store();
        let (csi_drivers, csi_drivers_w) = reflector::store();
        let (capacities, capacities_w) = reflector::store();
        let cache = Arc::new(Cache {
            pods,
            nodes,
            namespaces,
            pvs,
            pvcs,
            classes,
            csi_nodes,
            csi_drivers,
            capacities,
            ready: AtomicBool::new(false),
            volume_generation: Arc::new(AtomicU64::new(0)),
            node_generation: Arc::new(AtomicU64::new(0)),
            volume_snapshot: Mutex::new(None),
            overlay: Mutex::new(Overlay::default()),
            config,
            watch_health: Arc::default(),
        });
        let writers = Writers {
            pods: pods_w,
            nodes: nodes_w,
            namespaces: namespaces_w,
            pvs: pvs_w,
            pvcs: pvcs_w,
            classes: classes_w,
            csi_nodes: csi_nodes_w,
            csi_drivers: csi_drivers_w,
            capacities: capacities_w,
        };
        (cache, writers)
    }

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

    /// Spawns the reflectors and the readiness task on the current runtime.
    fn spawn_reflectors(self: &Arc<Self>, client: &Client, writers: Writers) -> Vec<JoinHandle<()>> {
        let generation = &self.volume_generation;
        let config = watcher::Config::default()
            .any_semantic()
            .page_size(LIST_PAGE_SIZE);
        let pods_config = config.clone().fields(NON_TERMINAL_PODS);
        let health = self.watch_health();
        let mut tasks = vec![
            spawn_reflector(
                Api::all(client.clone()),
                pods_config,
                writers.pods,
                None,
                true,
                health.clone(),
            ),
            spawn_reflector(
                Api::all(client.clone()),
                config.clone(),
                writers.nodes,
                Some(self.node_generation.clone()),
                false,
                health.clone(),
            ),
            spawn_reflector(
                Api::all(client.clone()),
                config.clone(),
                writers.namespaces,
                None,
                false,
                health.clone(),
            ),
            spawn_reflector(
                Api::<PersistentVolume>::all(client.clone()),
                config.clone(),
                writers.pvs,
                Some(generation.clone()),
                false,
                health.clone(),
            ),
            spawn_reflector(
                Api::all(client.clone()),
                config.clone(),
                writers.pvcs,
                Some(generation.clone()),
                false,
                health.clone(),
            ),
            spawn_reflector(
                Api::all(client.clone()),
                config.clone(),
                writers.classes,
                Some(generation.clone()),
                false,
                health.clone(),
            ),
            spawn_reflector(
                Api::all(client.clone()),
                config.clone(),
                writers.csi_nodes,
                Some(generation.clone()),
                false,
                health.clone(),
            ),
            spawn_reflector(
                Api::all(client.clone()),
                config.clone(),
                writers.csi_drivers,
                Some(generation.clone()),
                false,
                health.clone(),
            ),
            spawn_reflector(
                Api::all(client.clone()),
                config,
                writers.capacities,
                Some(generation.clone()),
                false,
                health.clone(),
            ),
        ];
        tasks.push(self.spawn_readiness());
        tasks
    }

    /// Fills the stores with fixed objects (tests, benchmarks) and marks the cache ready.
    pub fn fill(self: &Arc<Self>, writers: &mut Writers, objects: ClusterObjects) {
        Writers::load_into(&mut writers.pods, objects.pods);
        Writers::load_into(&mut writers.nodes, objects.nodes);
        Writers::load_into(&mut writers.namespaces, objects.namespaces);
        Writers::load_into(&mut writers.pvs, objects.persistent_volumes);
        Writers::load_into(&mut writers.pvcs, objects.persistent_volume_claims);
        Writers::load_into(&mut writers.classes, objects.storage_classes);
        Writers::load_into(&mut writers.csi_nodes, objects.csi_nodes);
        Writers::load_into(&mut writers.csi_drivers, objects.csi_drivers);
        Writers::load_into(&mut writers.capacities, objects.csi_storage_capacities);
        self.mark_filled();
    }

    /// Marks a cache filled through [`Writers`]' `load_*` methods as ready.
    pub fn mark_filled(&self) {
        self.volume_generation.fetch_add(1, Ordering::Release);
        self.node_generation.fetch_add(1, Ordering::Release);
        self.ready.store(true, Ordering::Release);
    }

    fn spawn_readiness(self: &Arc<Self>) -> JoinHandle<()> {
        let cache = self.clone();
        tokio::spawn(async move {
            let synced = futures::future::join_all([
                Box::pin(cache.pods.wait_until_ready())
                    as std::pin::Pin<Box<dyn std::future::Future<Output = _> + Send>>,
                Box::pin(cache.nodes.wait_until_ready()),
                Box::pin(cache.namespaces.wait_until_ready()),
                Box::pin(cache.pvs.wait_until_ready()),
                Box::pin(cache.pvcs.wait_until_ready()),
                Box::pin(cache.classes.wait_until_ready()),
                Box::pin(cache.csi_nodes.wait_until_ready()),
                Box::pin(cache.csi_drivers.wait_until_ready()),
                Box::pin(cache.capacities.wait_until_ready()),
            ])
            .await;
            if synced.iter().all(Result::is_ok) {
                // Built before the first request needs it, on this thread rather than a worker's.
                let _ = cache.volume_snapshot();
                cache.ready.store(true, Ordering::Release);
                let heap = crate::memory::allocator_stats();
                tracing::info!(
                    heap_allocated_bytes = heap.map(|h| h.0),
                    heap_resident_bytes = heap.map(|h| h.1),
                    "reflector caches synced"
                );
            }
        })
    }

    /// True once every reflector has listed its kind.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Number of (PVs, PVCs, pods, nodes) cached.
    pub fn sizes(&self) -> (usize, usize, usize, usize) {
        (self.pvs.len(), self.pvcs.len(), self.pods.len(), self.nodes.len())
    }

    /// Records objects the webhook wrote (or found in its way) so decisions see them before the watch
    /// delivers them.
    pub fn record(&self, observed: &Observed) {
        let mut overlay = lock(&self.overlay);
        let at = Instant::now();
        match observed {
            Observed::Pv(pv) => {
                let mut pv = (**pv).clone();
                pv.slim();
                overlay.pvs.insert(
                    key_of(&pv.metadata),
                    OverlayEntry {
                        object: Arc::new(VolumeInfo::from(pv)),
                        at,
                    },
                );
            }
            Observed::Pvc(pvc) => {
                let mut pvc = (**pvc).clone();
                pvc.slim();
                overlay.pvcs.insert(
                    key_of(&pvc.metadata),
                    OverlayEntry {
                        object: Arc::new(pvc),
                        at,
                    },
                );
            }
        }
        self.volume_generation.fetch_add(1, Ordering::Release);
    }

    /// Records a storage class read from the API because the watch had not delivered it yet (a claim
    /// created right after its class, and a pod right after its claim, is the usual case).
    pub fn record_class(&self, class: StorageClass) {
        let mut class = class;
        class.slim();
        lock(&self.overlay).classes.insert(
            key_of(&class.metadata),
            OverlayEntry {
                object: Arc::new(class),
                at: Instant::now(),
            },
        );
        self.volume_generation.fetch_add(1, Ordering::Release);
    }

    /// Whether a storage class is known (stored, or recorded and not yet delivered by the watch).
    pub fn has_class(&self, name: &str) -> bool {
        self.classes.get(&ObjectRef::new(name)).is_some() || lock(&self.overlay).classes.contains_key(name)
    }

    /// The state of this cache's watches, which its reflectors keep.
    pub fn watch_health(&self) -> Arc<crate::health::WatchHealth> {
        self.watch_health.clone()
    }

    /// The pod store (what the controller reconciles from).
    pub fn pod_store(&self) -> Store<Pod> {
        self.pods.clone()
    }

    /// Pods in the store (for tests and sizing).
    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    /// The volume objects from the stores and the overlay.
    fn volume_maps(&self) -> VolumeMaps {
        let mut maps = VolumeMaps {
            pvs: by_key(self.pvs.state()),
            pvcs: self
                .pvcs
                .state()
                .into_iter()
                .map(|c| (key_of(&c.metadata), c))
                .collect(),
            classes: by_key(self.classes.state()),
            csi_nodes: by_key(self.csi_nodes.state()),
            csi_drivers: by_key(self.csi_drivers.state()),
            capacities: self.capacities.state(),
        };
        let mut overlay = lock(&self.overlay);
        let now = Instant::now();
        merge_overlay(&mut overlay.pvs, &mut maps.pvs, now);
        merge_overlay(&mut overlay.pvcs, &mut maps.pvcs, now);
        merge_overlay(&mut overlay.classes, &mut maps.classes, now);
        maps
    }
}

/// Moves the volume maps into a snapshot.
fn set_volumes(snapshot: &mut Snapshot, maps: VolumeMaps) {
    snapshot.persistent_volumes = maps.pvs;
    snapshot.persistent_volume_claims = maps.pvcs;
    snapshot.storage_classes = maps.classes;
    snapshot.csi_nodes = maps.csi_nodes;
    snapshot.csi_drivers = maps.csi_drivers;
    snapshot.csi_storage_capacities = maps.capacities;
}

/// The volume maps of a snapshot, shared objects in new maps.
fn volumes_of(snapshot: &Snapshot) -> VolumeMaps {
    VolumeMaps {
        pvs: snapshot.persistent_volumes.clone(),
        pvcs: snapshot.persistent_volume_claims.clone(),
        classes: snapshot.storage_classes.clone(),
        csi_nodes: snapshot.csi_nodes.clone(),
        csi_drivers: snapshot.csi_drivers.clone(),
        capacities: snapshot.csi_storage_capacities.clone(),
    }
}

fn owned<K: Clone>(items: Vec<Arc<K>>) -> Vec<K> {
    items.into_iter().map(|o| (*o).clone()).collect()
}

impl ClusterView for Cache {
    fn namespace_labels(&self, namespace: &str) -> Option<Labels> {
        self.namespaces
            .get(&ObjectRef::new(namespace))
            .map(|n| n.metadata.labels.clone().unwrap_or_default())
    }

    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.pods.get(&ObjectRef::new(name).within(namespace))
    }

    fn pvc(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        let stored = self.pvcs.get(&ObjectRef::new(name).within(namespace));
        let overlay = lock(&self.overlay);
        match overlay.pvcs.get(&format!("{namespace}/{name}")) {
            Some(own)
                if own.at.elapsed() < OVERLAY_TTL
                    && !stored.as_ref().is_some_and(|s| {
                        store_caught_up(
                            s.metadata.resource_version.as_deref(),
                            own.object.metadata.resource_version.as_deref(),
                        )
                    }) =>
            {
                Some(own.object.clone())
            }
            _ => stored,
        }
    }

    fn nominated_pods(&self, node: &str) -> Vec<Arc<Pod>> {
        self.pods.state_filter(|p| {
            p.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()) == Some(node)
                && p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_deref())
                    .unwrap_or("")
                    .is_empty()
        })
    }

    fn volume_snapshot(&self) -> Arc<Snapshot> {
        // Read the generations before the stores: a change racing with the build bumps them again, and
        // the next request rebuilds.
        let key = (
            self.volume_generation.load(Ordering::Acquire),
            self.node_generation.load(Ordering::Acquire),
        );
        // Held while building: concurrent requests wait for one build instead of each making its own
        // copy of the volume maps (8 connections arriving together made 8).
        let mut cached = lock(&self.volume_snapshot);
        if let Some((k, snapshot)) = cached.as_ref()
            && *k == key
        {
            return snapshot.clone();
        }
        let mut snapshot = Snapshot::new(ClusterObjects {
            nodes: owned(self.nodes.state()),
            ..ClusterObjects::default()
        });
        // Only the nodes changed: the volume maps are taken over from the previous snapshot (which
        // holds the only copy of them: at 10,000 PVs and claims a second one costs about 2 MiB).
        let maps = match cached.as_ref() {
            Some(((volumes, _), previous)) if *volumes == key.0 => volumes_of(previous),
            _ => self.volume_maps(),
        };
        set_volumes(&mut snapshot, maps);
        let snapshot = Arc::new(snapshot);
        *cached = Some((key, snapshot.clone()));
        snapshot
    }

    fn full_snapshot(&self) -> Snapshot {
        let volumes = self.volume_snapshot();
        let mut snapshot = Snapshot::new(ClusterObjects {
            nodes: owned(self.nodes.state()),
            pods: owned(self.pods.state()),
            namespaces: owned(self.namespaces.state()),
            ..ClusterObjects::default()
        });
        set_volumes(&mut snapshot, volumes_of(&volumes));
        snapshot
    }

    fn scheduler_config(&self) -> &SchedulerConfig {
        &self.config
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

/// Watches `W`, slims each object and stores it as `K` (the same type, or the engine's compact one).
fn spawn_reflector<W, K>(
    api: Api<W>,
    config: watcher::Config,
    writer: Writer<K>,
    generation: Option<Arc<AtomicU64>>,
    shared: bool,
    health: Arc<crate::health::WatchHealth>,
) -> JoinHandle<()>
where
    W: Resource + Clone + DeserializeOwned + Debug + Send + Sync + Slim + 'static,
    W::DynamicType: Default,
    K: Resource + Clone + From<W> + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    let kind = W::kind(&W::DynamicType::default()).to_string();
    tokio::spawn(async move {
        let events = watcher(api, config)
            .modify(|o: &mut W| o.slim())
            .map_ok(stored_event::<W, K>)
            .default_backoff();
        // A shared store (the pods') must be fed with reflect_shared, which also hands each event to
        // the store's subscribers (the controller); reflect alone would leave them waiting.
        let stream = if shared {
            events.reflect_shared(writer).boxed()
        } else {
            events.reflect(writer).boxed()
        };
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(_) => {
                    if let Some(g) = &generation {
                        g.fetch_add(1, Ordering::Release);
                    }
                    health.ok(&kind);
                }
                Err(e) => {
                    tracing::warn!(kind = %kind, error = %e, "watch failed; retrying with backoff");
                    health.error(&kind, &e.to_string());
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sched_core::plugins::in_tree_registry;
    use sched_core::testing::{node, pv, pvc, storage_class};

    fn filled() -> (Arc<Cache>, Writers) {
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

    #[test]
    fn volume_snapshot_holds_every_node_and_volume_but_no_pod() {
        let (cache, _w) = filled();
        assert!(cache.is_ready());
        let s = cache.volume_snapshot();
        assert_eq!(s.nodes().len(), 2);
        assert!(s.node("n2").is_some());
        assert!(s.pods_by_key.is_empty());
        assert!(
            Arc::ptr_eq(&s, &cache.volume_snapshot()),
            "unchanged caches share one snapshot"
        );
        assert!(s.persistent_volumes.contains_key("pv1"));
        assert!(s.pvc("ns", "c1").is_some());
        assert_eq!(cache.full_snapshot().nodes().len(), 2);
    }

    #[test]
    fn own_writes_shadow_the_store_until_it_catches_up() {
        let (cache, mut writers) = filled();
        let written = pv("pv1").resource_version("9").claim_ref("ns", "c1", "u").obj();
        cache.record(&Observed::Pv(Box::new(written.clone())));
        let claim_ref = |c: &Cache| {
            c.volume_snapshot().persistent_volumes["pv1"]
                .spec
                .as_ref()
                .and_then(|s| s.claim_ref.clone())
        };
        assert!(
            claim_ref(&cache).is_some(),
            "the overlay wins over the older stored PV"
        );
        // The watch delivers a newer version (here: without claimRef, e.g. released by the controller).
        writers
            .pvs
            .apply_watcher_event(&watcher::Event::Apply(pv("pv1").resource_version("10").volume()));
        cache.volume_generation.fetch_add(1, Ordering::Release);
        assert!(claim_ref(&cache).is_none(), "the newer stored PV wins");

        let annotated = pvc("c1")
            .namespace("ns")
            .resource_version("6")
            .selected_node("n1")
            .obj();
        cache.record(&Observed::Pvc(Box::new(annotated)));
        assert!(
            cache
                .pvc("ns", "c1")
                .expect("claim")
                .metadata
                .annotations
                .is_some()
        );
    }

    #[test]
    fn classes_read_from_the_api_are_seen_until_the_watch_delivers_them() {
        let (cache, mut writers) = filled();
        assert!(!cache.has_class("fast"));
        let mut class = storage_class("fast", "example.com/csi", "WaitForFirstConsumer");
        class.metadata.resource_version = Some("7".into());
        cache.record_class(class.clone());
        assert!(cache.has_class("fast"));
        let provisioner = |c: &Cache| {
            c.volume_snapshot()
                .storage_classes
                .get("fast")
                .map(|c| c.provisioner.clone())
        };
        assert_eq!(provisioner(&cache).as_deref(), Some("example.com/csi"));
        // The watch delivers it: the store's copy is used from then on.
        class.provisioner = "example.com/other".into();
        writers.classes.apply_watcher_event(&watcher::Event::Apply(class));
        cache.volume_generation.fetch_add(1, Ordering::Release);
        assert_eq!(provisioner(&cache).as_deref(), Some("example.com/other"));
        assert!(
            lock(&cache.overlay).classes.is_empty(),
            "the overlay entry is dropped"
        );
    }

    #[test]
    fn volumes_keep_only_what_decisions_read() {
        let mut pv: PersistentVolume = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "pv1", "uid": "u1", "resourceVersion": "7", "labels": {"disk": "ssd"},
                         "finalizers": ["kubernetes.io/pv-protection"],
                         "annotations": {"pv.kubernetes.io/bound-by-controller": "yes",
                                         "volume.beta.kubernetes.io/storage-class": "fast"}},
            "spec": {"capacity": {"storage": "10Gi", "ephemeral-storage": "1Gi"},
                     "accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Retain",
                     "mountOptions": ["noatime"],
                     "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "ns",
                                  "name": "c1", "uid": "cu1", "resourceVersion": "3"},
                     "csi": {"driver": "example.com/csi", "volumeHandle": "h1",
                             "volumeAttributes": {"a": "b"}},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}},
            "status": {"phase": "Bound", "message": "m"},
        }))
        .expect("pv");
        pv.slim();
        let meta = &pv.metadata;
        assert_eq!(
            (meta.uid.as_deref(), meta.resource_version.as_deref()),
            (Some("u1"), Some("7"))
        );
        assert!(meta.finalizers.is_none());
        assert_eq!(
            meta.annotations
                .as_ref()
                .map(|a| a.keys().cloned().collect::<Vec<_>>()),
            Some(vec!["volume.beta.kubernetes.io/storage-class".to_string()])
        );
        assert_eq!(meta.labels.as_ref().map(|l| l.len()), Some(1));
        let spec = pv.spec.as_ref().expect("spec");
        assert_eq!(spec.capacity.as_ref().map(|c| c.len()), Some(1));
        assert!(spec.mount_options.is_none() && spec.persistent_volume_reclaim_policy.is_none());
        let claim = spec.claim_ref.as_ref().expect("claimRef");
        assert_eq!(
            (
                claim.namespace.as_deref(),
                claim.name.as_deref(),
                claim.uid.as_deref()
            ),
            (Some("ns"), Some("c1"), Some("cu1"))
        );
        assert!(claim.kind.is_none() && claim.resource_version.is_none());
        let csi = spec.csi.as_ref().expect("csi");
        assert_eq!(
            (csi.driver.as_str(), csi.volume_handle.as_str()),
            ("example.com/csi", "h1")
        );
        assert!(csi.volume_attributes.is_none());
        assert!(spec.node_affinity.is_some());
        assert_eq!(pv.status.as_ref().and_then(|s| s.message.as_deref()), None);

        let mut claim: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c1", "namespace": "ns", "uid": "cu1", "labels": {"app": "db"},
                         "finalizers": ["kubernetes.io/pvc-protection"],
                         "annotations": {"pv.kubernetes.io/bind-completed": "yes",
                                         "pv.kubernetes.io/bound-by-controller": "yes"},
                         "ownerReferences": [
                             {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pu", "controller": true},
                             {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "xu"}]},
            "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": "pv1",
                     "resources": {"requests": {"storage": "5Gi"}, "limits": {"storage": "6Gi"}}},
            "status": {"phase": "Bound", "capacity": {"storage": "10Gi"}},
        }))
        .expect("claim");
        claim.slim();
        let meta = &claim.metadata;
        assert!(meta.labels.is_none() && meta.finalizers.is_none());
        assert_eq!(
            meta.annotations
                .as_ref()
                .map(|a| a.keys().cloned().collect::<Vec<_>>()),
            Some(vec!["pv.kubernetes.io/bind-completed".to_string()])
        );
        assert_eq!(
            meta.owner_references
                .as_ref()
                .map(|o| o.iter().map(|r| r.uid.clone()).collect::<Vec<_>>()),
            Some(vec!["pu".to_string()]),
            "only the controller reference is read"
        );
        let resources = claim
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .expect("resources");
        assert!(resources.limits.is_none());
        assert!(
            resources.requests.is_none(),
            "a fully bound claim's size is never read"
        );
        assert_eq!(
            claim
                .status
                .as_ref()
                .map(|s| (s.phase.as_deref(), s.capacity.is_none())),
            Some((Some("Bound"), true))
        );

        // Not yet fully bound (no bind-completed): the storage request is what matching compares.
        let mut pending: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c2", "namespace": "ns"},
            "spec": {"volumeName": "pv2",
                     "resources": {"requests": {"storage": "5Gi", "cpu": "1"}}},
        }))
        .expect("claim");
        pending.slim();
        let requests = pending
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .expect("requests");
        assert_eq!(requests.keys().collect::<Vec<_>>(), ["storage"]);
    }

    #[test]
    fn full_snapshots_share_the_volume_snapshot_objects() {
        let (cache, _w) = filled();
        let volumes = cache.volume_snapshot();
        let full = cache.full_snapshot();
        assert!(Arc::ptr_eq(
            &volumes.persistent_volumes["pv1"],
            &full.persistent_volumes["pv1"]
        ));
        // A node change rebuilds the snapshot but takes the volume objects over.
        cache.node_generation.fetch_add(1, Ordering::Release);
        let rebuilt = cache.volume_snapshot();
        assert!(!Arc::ptr_eq(&volumes, &rebuilt));
        assert!(Arc::ptr_eq(
            &volumes.persistent_volumes["pv1"],
            &rebuilt.persistent_volumes["pv1"]
        ));
    }

    #[test]
    fn resource_versions_compare_numerically() {
        assert!(store_caught_up(Some("10"), Some("9")));
        assert!(!store_caught_up(Some("9"), Some("10")));
        assert!(store_caught_up(Some("x"), Some("x")));
        assert!(!store_caught_up(Some("x"), Some("y")));
        assert!(!store_caught_up(None, Some("1")));
    }
}
