//! The assume cache, made pure: PVs and PVCs that a Reserve has changed in memory (claimRef set,
//! selected-node annotated) but that the API has not confirmed yet, layered over the snapshot.
//!
//! kube-scheduler keeps these in a process-wide cache so the next pods see volumes as already taken. Here
//! they are a value: the plugin keeps them in the cycle state under [`ASSUMED_STATE_KEY`], and a caller
//! that schedules several pods in a row (or the webhook, between its writes and its informer catching
//! up) carries the value from one evaluation to the next.
//!
//! As upstream, an assumed object only shadows the snapshot's object while both have the same
//! resourceVersion: a newer object from the API always wins.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::snapshot::volume::PersistentVolume;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;

use crate::framework::cycle_state::StateKey;
use crate::plugins::volume_binding::pv_helpers::{claim_key, name_of, volume_class};
use crate::snapshot::{Snapshot, namespaced_key};

/// Where the plugin keeps the assumed volumes in the cycle state.
pub(crate) const ASSUMED_STATE_KEY: StateKey<AssumedVolumes> = StateKey::new("VolumeBindingAssumedVolumes");

/// PVs (by name) and PVCs (by `namespace/name`) changed in memory only.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct AssumedVolumes {
    pvs: BTreeMap<String, Arc<PersistentVolume>>,
    pvcs: BTreeMap<String, Arc<PersistentVolumeClaim>>,
}

fn resource_version(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.resource_version.as_deref().unwrap_or("")
}

impl AssumedVolumes {
    /// Nothing assumed.
    #[cfg(test)]
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// True when nothing is assumed.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.pvs.is_empty() && self.pvcs.is_empty()
    }

    /// Assumes a PV. It must exist in the snapshot with the same resourceVersion (an assumption made on
    /// an outdated object would be lost at the first update anyway).
    pub(crate) fn assume_pv(
        &mut self,
        snapshot: &Snapshot,
        pv: PersistentVolume,
    ) -> Result<Arc<PersistentVolume>, String> {
        let key = name_of(&pv.metadata).to_string();
        let stored = snapshot
            .persistent_volumes
            .get(&key)
            .ok_or_else(|| format!("persistentvolumes {key:?} not found"))?;
        check_in_sync(
            &key,
            resource_version(&stored.metadata),
            resource_version(&pv.metadata),
        )?;
        let pv = Arc::new(pv);
        self.pvs.insert(key, pv.clone());
        Ok(pv)
    }

    /// Assumes a PVC, with the same precondition as [`AssumedVolumes::assume_pv`].
    pub(crate) fn assume_pvc(
        &mut self,
        snapshot: &Snapshot,
        pvc: PersistentVolumeClaim,
    ) -> Result<Arc<PersistentVolumeClaim>, String> {
        let key = claim_key(&pvc);
        let stored = snapshot
            .persistent_volume_claims
            .get(&key)
            .ok_or_else(|| format!("persistentvolumeclaims {key:?} not found"))?;
        check_in_sync(
            &key,
            resource_version(&stored.metadata),
            resource_version(&pvc.metadata),
        )?;
        let pvc = Arc::new(pvc);
        self.pvcs.insert(key, pvc.clone());
        Ok(pvc)
    }

    /// Drops the assumed PV if it is the given version (`Restore`).
    pub(crate) fn restore_pv(&mut self, pv: &PersistentVolume) {
        let key = name_of(&pv.metadata);
        if self
            .pvs
            .get(key)
            .is_some_and(|a| resource_version(&a.metadata) == resource_version(&pv.metadata))
        {
            self.pvs.remove(key);
        }
    }

    /// Drops the assumed PVC if it is the given version (`Restore`).
    pub(crate) fn restore_pvc(&mut self, pvc: &PersistentVolumeClaim) {
        let key = claim_key(pvc);
        if self
            .pvcs
            .get(&key)
            .is_some_and(|a| resource_version(&a.metadata) == resource_version(&pvc.metadata))
        {
            self.pvcs.remove(&key);
        }
    }

    /// The assumed PV of that name, whatever the snapshot holds.
    #[cfg(test)]
    pub(crate) fn assumed_pv(&self, name: &str) -> Option<&Arc<PersistentVolume>> {
        self.pvs.get(name)
    }

    /// The assumed PVC of that `namespace/name`, whatever the snapshot holds.
    #[cfg(test)]
    pub(crate) fn assumed_pvc(&self, key: &str) -> Option<&Arc<PersistentVolumeClaim>> {
        self.pvcs.get(key)
    }
}

fn check_in_sync(key: &str, stored: &str, assumed: &str) -> Result<(), String> {
    if stored != assumed {
        return Err(format!(
            "{key:?} is out of sync (stored: {stored}, assume: {assumed})"
        ));
    }
    Ok(())
}

/// The snapshot seen through the assumed volumes: what the binder reads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct VolumeView<'a> {
    /// The cluster.
    pub snapshot: &'a Snapshot,
    /// In-memory changes not yet confirmed by the API.
    pub assumed: Option<&'a AssumedVolumes>,
}

impl<'a> VolumeView<'a> {
    /// The snapshot alone.
    pub(crate) fn new(snapshot: &'a Snapshot) -> Self {
        VolumeView {
            snapshot,
            assumed: None,
        }
    }

    /// The snapshot with assumed volumes over it.
    pub(crate) fn with_assumed(snapshot: &'a Snapshot, assumed: Option<&'a AssumedVolumes>) -> Self {
        VolumeView { snapshot, assumed }
    }

    /// A PV (`Get`): the assumed version while it is current.
    pub(crate) fn pv(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        let stored = self.snapshot.persistent_volumes.get(name)?;
        Some(self.shadow_pv(stored))
    }

    /// A PVC (`Get`): the assumed version while it is current.
    pub(crate) fn pvc(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        let key = namespaced_key(namespace, name);
        let stored = self.snapshot.persistent_volume_claims.get(&key)?;
        match self.assumed.and_then(|a| a.pvcs.get(&key)) {
            Some(a) if resource_version(&a.metadata) == resource_version(&stored.metadata) => Some(a.clone()),
            _ => Some(stored.clone()),
        }
    }

    /// The PVs of a storage class (`ListPVs`), ordered by name. The class is the stored object's: the
    /// scheduler never changes a PV's class, and assumed PVs are included so a PV assumed for one pod is
    /// seen as taken by the next.
    pub(crate) fn pvs_of_class(&self, class: &str) -> Vec<Arc<PersistentVolume>> {
        let mut pvs: Vec<Arc<PersistentVolume>> = self
            .snapshot
            .persistent_volumes
            .values()
            .filter(|pv| volume_class(pv) == class)
            .map(|pv| self.shadow_pv(pv))
            .collect();
        pvs.sort_by(|a, b| name_of(&a.metadata).cmp(name_of(&b.metadata)));
        pvs
    }

    fn shadow_pv(&self, stored: &Arc<PersistentVolume>) -> Arc<PersistentVolume> {
        match self.assumed.and_then(|a| a.pvs.get(name_of(&stored.metadata))) {
            Some(a) if resource_version(&a.metadata) == resource_version(&stored.metadata) => a.clone(),
            _ => stored.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::ClusterObjects;
    use crate::testing::{pv, pvc};

    fn snap() -> Snapshot {
        Snapshot::new(ClusterObjects {
            persistent_volumes: vec![
                pv("pv-b").storage_class("sc").resource_version("5").obj(),
                pv("pv-a").storage_class("sc").resource_version("3").obj(),
                pv("pv-c").storage_class("other").obj(),
            ],
            persistent_volume_claims: vec![pvc("c").resource_version("7").obj()],
            ..Default::default()
        })
    }

    #[test]
    fn assumed_objects_shadow_only_the_same_version() {
        let snapshot = snap();
        let mut assumed = AssumedVolumes::new();
        let changed = pv("pv-a")
            .storage_class("sc")
            .resource_version("3")
            .label("assumed", "yes")
            .volume();
        assumed.assume_pv(&snapshot, changed).unwrap();
        let view = VolumeView::with_assumed(&snapshot, Some(&assumed));
        assert!(view.pv("pv-a").unwrap().metadata.labels.is_some());
        let names: Vec<String> = view
            .pvs_of_class("sc")
            .iter()
            .map(|p| name_of(&p.metadata).to_string())
            .collect();
        assert_eq!(names, ["pv-a", "pv-b"]);
        assert!(view.pvs_of_class("sc")[0].metadata.labels.is_some());

        // The API moved on: the snapshot's newer object wins.
        let newer = Snapshot::new(ClusterObjects {
            persistent_volumes: vec![pv("pv-a").storage_class("sc").resource_version("4").obj()],
            ..Default::default()
        });
        let view = VolumeView::with_assumed(&newer, Some(&assumed));
        assert!(view.pv("pv-a").unwrap().metadata.labels.is_none());
    }

    #[test]
    fn assume_requires_the_stored_version_and_restore_is_idempotent() {
        let snapshot = snap();
        let mut assumed = AssumedVolumes::new();
        let err = assumed
            .assume_pv(&snapshot, pv("pv-a").resource_version("2").volume())
            .unwrap_err();
        assert_eq!(err, "\"pv-a\" is out of sync (stored: 3, assume: 2)");
        let err = assumed.assume_pv(&snapshot, pv("missing").volume()).unwrap_err();
        assert_eq!(err, "persistentvolumes \"missing\" not found");

        let claim = pvc("c").resource_version("7").selected_node("n1").obj();
        assumed.assume_pvc(&snapshot, claim.clone()).unwrap();
        let view = VolumeView::with_assumed(&snapshot, Some(&assumed));
        assert!(view.pvc("default", "c").unwrap().metadata.annotations.is_some());
        assumed.restore_pvc(&claim);
        assumed.restore_pvc(&claim);
        assert!(assumed.is_empty());
    }
}
