//! The webhook's own writes that the watches have not delivered yet: each shadows the stored object
//! until the store holds its version or a newer one (or [`OVERLAY_TTL`] has passed), so the next
//! decision does not hand out a PV this replica just bound.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Resource;
use kube::runtime::reflector::ObjectRef;

use sched_core::apply::Observed;
use sched_core::snapshot::volume::PersistentVolume as VolumeInfo;

use super::{Cache, Slim, key_of, lock};

/// How long an own write shadows the store when the watch never delivers a newer version.
pub const OVERLAY_TTL: Duration = Duration::from_secs(30);

/// An own write, and when it was recorded.
pub(super) struct OverlayEntry<K> {
    object: Arc<K>,
    at: Instant,
}

impl<K: Resource> OverlayEntry<K> {
    /// True while this write is younger than [`OVERLAY_TTL`] and newer than the stored version.
    fn shadows(&self, stored: Option<&K>, now: Instant) -> bool {
        now.duration_since(self.at) < OVERLAY_TTL
            && !stored.is_some_and(|s| {
                store_caught_up(
                    s.meta().resource_version.as_deref(),
                    self.object.meta().resource_version.as_deref(),
                )
            })
    }
}

/// The own writes by key, per kind.
#[derive(Default)]
pub(super) struct Overlay {
    pub(super) pvs: HashMap<String, OverlayEntry<VolumeInfo>>,
    pub(super) pvcs: HashMap<String, OverlayEntry<PersistentVolumeClaim>>,
    pub(super) classes: HashMap<String, OverlayEntry<StorageClass>>,
}

/// Moves the overlay's entries that are still newer than the store (and younger than [`OVERLAY_TTL`])
/// into `maps`, and forgets the others.
pub(super) fn merge_overlay<K>(
    overlay: &mut HashMap<String, OverlayEntry<K>>,
    maps: &mut HashMap<String, Arc<K>>,
    now: Instant,
) where
    K: Resource,
{
    overlay.retain(|key, own| {
        let keep = own.shadows(maps.get(key).map(|s| &**s), now);
        if keep {
            maps.insert(key.clone(), own.object.clone());
        }
        keep
    });
}

/// A slimmed copy, as the stores keep it.
fn slimmed<K: Slim + Clone>(object: &K) -> K {
    let mut object = object.clone();
    object.slim();
    object
}

/// Records `object` as an own write from now on.
fn own<K: Resource>(entries: &mut HashMap<String, OverlayEntry<K>>, object: K) {
    entries.insert(
        key_of(object.meta()),
        OverlayEntry {
            object: Arc::new(object),
            at: Instant::now(),
        },
    );
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

impl Cache {
    /// Records objects the webhook wrote (or found in its way) so decisions see them before the watch
    /// delivers them.
    pub fn record(&self, observed: &Observed) {
        let mut overlay = lock(&self.overlay);
        match observed {
            Observed::Pv(pv) => own(&mut overlay.pvs, VolumeInfo::from(slimmed(&**pv))),
            Observed::Pvc(pvc) => own(&mut overlay.pvcs, slimmed(&**pvc)),
        }
        self.volume_generation.fetch_add(1, Ordering::Release);
    }

    /// Records a storage class read from the API because the watch had not delivered it yet (a claim
    /// created right after its class, and a pod right after its claim, is the usual case).
    pub fn record_class(&self, class: StorageClass) {
        own(&mut lock(&self.overlay).classes, slimmed(&class));
        self.volume_generation.fetch_add(1, Ordering::Release);
    }

    /// The claim a decision sees: the own write while it shadows `stored`, else `stored`.
    pub(super) fn overlaid_pvc(
        &self,
        namespace: &str,
        name: &str,
        stored: Option<Arc<PersistentVolumeClaim>>,
    ) -> Option<Arc<PersistentVolumeClaim>> {
        let overlay = lock(&self.overlay);
        match overlay.pvcs.get(&format!("{namespace}/{name}")) {
            Some(own) if own.shadows(stored.as_deref(), Instant::now()) => Some(own.object.clone()),
            _ => stored,
        }
    }

    /// Whether a storage class is known (stored, or recorded and not yet delivered by the watch).
    pub fn has_class(&self, name: &str) -> bool {
        self.stores.storage_classes.get(&ObjectRef::new(name)).is_some()
            || lock(&self.overlay).classes.contains_key(name)
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::watcher;
    use sched_core::testing::{pv, pvc, storage_class};

    use super::super::filled;
    use super::*;
    use crate::admission::ClusterView;

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
            .persistent_volumes
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
        writers
            .storage_classes
            .apply_watcher_event(&watcher::Event::Apply(class));
        cache.volume_generation.fetch_add(1, Ordering::Release);
        assert_eq!(provisioner(&cache).as_deref(), Some("example.com/other"));
        assert!(
            lock(&cache.overlay).classes.is_empty(),
            "the overlay entry is dropped"
        );
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
