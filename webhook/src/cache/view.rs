//! The cache as the admission handlers read it (`impl ClusterView for Cache`): lookups, and the
//! snapshots built from the stores and the overlay. The volume maps are rebuilt only when a volume
//! kind changed; the full snapshot (every node and pod) only when a decision needs it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment};
use kube::Resource;
use kube::runtime::reflector::ObjectRef;

use sched_core::labels::Labels;
use sched_core::snapshot::NameMap;
use sched_core::snapshot::volume::PersistentVolume as VolumeInfo;
use sched_core::{ClusterObjects, Engine, Snapshot};

use super::overlay::merge_overlay;
use super::stores::owned;
use super::{Cache, key_of, lock};
use crate::admission::ClusterView;
use crate::admission::view::is_nominated_to;

/// The volume objects by key, as the engine's snapshot holds them.
#[derive(Debug, Default)]
struct VolumeMaps {
    pvs: HashMap<String, Arc<VolumeInfo>>,
    pvcs: HashMap<String, Arc<PersistentVolumeClaim>>,
    classes: HashMap<String, Arc<StorageClass>>,
    csi_nodes: NameMap<Arc<CSINode>>,
    csi_drivers: HashMap<String, Arc<CSIDriver>>,
    capacities: Vec<Arc<CSIStorageCapacity>>,
    /// By `spec.nodeName`, as the engine's snapshot indexes them.
    attachments: NameMap<Vec<Arc<VolumeAttachment>>>,
}

fn by_key<K, S>(items: Vec<Arc<K>>) -> HashMap<String, Arc<K>, S>
where
    K: Resource<Scope = k8s_openapi::ClusterResourceScope>,
    S: std::hash::BuildHasher + Default,
{
    items.into_iter().map(|o| (key_of(o.meta()), o)).collect()
}

impl Cache {
    /// The volume objects from the stores and the overlay.
    fn volume_maps(&self) -> VolumeMaps {
        let mut maps = VolumeMaps {
            pvs: by_key(self.stores.persistent_volumes.state()),
            pvcs: self
                .stores
                .persistent_volume_claims
                .state()
                .into_iter()
                .map(|c| (key_of(&c.metadata), c))
                .collect(),
            classes: by_key(self.stores.storage_classes.state()),
            csi_nodes: by_key(self.stores.csi_nodes.state()),
            csi_drivers: by_key(self.stores.csi_drivers.state()),
            capacities: self.stores.csi_storage_capacities.state(),
            attachments: by_node_name(self.stores.volume_attachments.state()),
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
    snapshot.volume_attachments = maps.attachments;
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
        attachments: snapshot.volume_attachments.clone(),
    }
}

/// VolumeAttachments grouped by the node they attach to, ordered by name within a node (a store's
/// order is a hash map's; the engine's file and API loaders keep the API server's, which is by name).
fn by_node_name(items: Vec<Arc<VolumeAttachment>>) -> NameMap<Vec<Arc<VolumeAttachment>>> {
    let mut out: NameMap<Vec<Arc<VolumeAttachment>>> = NameMap::default();
    for va in items {
        out.entry(va.spec.node_name.clone()).or_default().push(va);
    }
    for list in out.values_mut() {
        list.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    }
    out
}

impl ClusterView for Cache {
    fn namespace_labels(&self, namespace: &str) -> Option<Labels> {
        self.stores
            .namespaces
            .get(&ObjectRef::new(namespace))
            .map(|n| n.metadata.labels.clone().unwrap_or_default())
    }

    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.stores.pods.get(&ObjectRef::new(name).within(namespace))
    }

    fn pvc(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        let stored = self
            .stores
            .persistent_volume_claims
            .get(&ObjectRef::new(name).within(namespace));
        self.overlaid_pvc(namespace, name, stored)
    }

    fn nominated_pods(&self, node: &str) -> Vec<Arc<Pod>> {
        self.stores.pods.state_filter(|p| is_nominated_to(p, node))
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
        // Through the engine: request sums follow its release's gates.
        let mut snapshot = self.engine.snapshot(ClusterObjects {
            nodes: owned(self.stores.nodes.state()),
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
        let mut snapshot = self.engine.snapshot(self.stores.unindexed_objects());
        set_volumes(&mut snapshot, volumes_of(&volumes));
        snapshot
    }

    fn engine(&self) -> &Engine {
        &self.engine
    }
}

#[cfg(test)]
mod tests {
    use super::super::filled;
    use super::*;

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
}
