//! What decisions read: a view of the cluster. The server's view is the reflector cache (plus the writes
//! it made that the watches have not delivered yet); tests and benchmarks use [`StaticView`].

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};

use sched_core::labels::Labels;
use sched_core::{ClusterObjects, Engine, Snapshot};

/// A read-only view of the cluster for one decision.
pub trait ClusterView: Send + Sync {
    /// A namespace's labels (None when the namespace is unknown).
    fn namespace_labels(&self, namespace: &str) -> Option<Labels>;
    /// A pod.
    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>>;
    /// A claim.
    fn pvc(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>>;
    /// Pending pods whose `status.nominatedNodeName` is `node`.
    fn nominated_pods(&self, node: &str) -> Vec<Arc<Pod>>;
    /// A snapshot with every node and every volume object (PVs, PVCs, StorageClasses, CSI objects), but
    /// no pods: what volume binding reads. Shared: views may hand out the same one until something
    /// changes.
    fn volume_snapshot(&self) -> Arc<Snapshot>;
    /// A snapshot of everything: every node with its pods, for the engine's filters and scores.
    fn full_snapshot(&self) -> Snapshot;
    /// The engine decisions evaluate pods with: the plugins and the scheduler configuration's profiles.
    /// A pod whose schedulerName names none of them is another scheduler's: left alone.
    fn engine(&self) -> &Engine;
}

/// True for a pod not bound yet whose `status.nominatedNodeName` is `node`: what
/// [`ClusterView::nominated_pods`] lists.
pub fn is_nominated_to(pod: &Pod, node: &str) -> bool {
    pod.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()) == Some(node)
        && pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or("")
            .is_empty()
}

/// A view over fixed objects.
#[derive(Debug, Clone)]
pub struct StaticView {
    objects: ClusterObjects,
    engine: Engine,
}

impl StaticView {
    /// A view of `objects` with the default scheduler configuration.
    pub fn new(objects: ClusterObjects) -> Self {
        StaticView {
            objects,
            engine: Engine::default(),
        }
    }

    /// With another engine (another scheduler configuration).
    pub fn with_engine(mut self, engine: Engine) -> Self {
        self.engine = engine;
        self
    }

    /// The objects, to change between decisions.
    pub fn objects_mut(&mut self) -> &mut ClusterObjects {
        &mut self.objects
    }
}

fn named<'a, T: k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>>(
    items: &'a [T],
    namespace: &str,
    name: &str,
) -> Option<&'a T> {
    items.iter().find(|o| {
        let m = o.metadata();
        m.name.as_deref() == Some(name) && m.namespace.as_deref().unwrap_or("") == namespace
    })
}

impl ClusterView for StaticView {
    fn namespace_labels(&self, namespace: &str) -> Option<Labels> {
        named(&self.objects.namespaces, "", namespace).map(|n| n.metadata.labels.clone().unwrap_or_default())
    }

    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        named(&self.objects.pods, namespace, name).cloned().map(Arc::new)
    }

    fn pvc(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        named(&self.objects.persistent_volume_claims, namespace, name)
            .cloned()
            .map(Arc::new)
    }

    fn nominated_pods(&self, node: &str) -> Vec<Arc<Pod>> {
        self.objects
            .pods
            .iter()
            .filter(|p| is_nominated_to(p, node))
            .cloned()
            .map(Arc::new)
            .collect()
    }

    fn volume_snapshot(&self) -> Arc<Snapshot> {
        let o = &self.objects;
        Arc::new(self.engine.snapshot(ClusterObjects {
            nodes: o.nodes.clone(),
            persistent_volumes: o.persistent_volumes.clone(),
            persistent_volume_claims: o.persistent_volume_claims.clone(),
            storage_classes: o.storage_classes.clone(),
            csi_nodes: o.csi_nodes.clone(),
            csi_drivers: o.csi_drivers.clone(),
            csi_storage_capacities: o.csi_storage_capacities.clone(),
            volume_attachments: o.volume_attachments.clone(),
            ..ClusterObjects::default()
        }))
    }

    fn full_snapshot(&self) -> Snapshot {
        self.engine.snapshot(self.objects.clone())
    }

    fn engine(&self) -> &Engine {
        &self.engine
    }
}
