//! VolumeRestrictions: rejects nodes where the pod's in-tree disks (GCE PD, AWS EBS, RBD, iSCSI) are
//! already mounted in a conflicting way by another pod, and rejects every node while a
//! ReadWriteOncePod claim of the pod is in use by a scheduled pod. v1.33 words that rejection
//! differently (`ReleaseChanges::read_write_once_pod_reason_before_v1_34`).

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Volume};

use crate::framework::FeatureGates;
use crate::framework::cycle_state::{CycleState, StateKey};
use crate::framework::interface::{
    FilterPlugin, Plugin, PreFilterExtensions, PreFilterPlugin, PreFilterResult,
};
use crate::framework::runtime::{Handle, PluginError};
use crate::framework::status::Status;
use crate::plugins::names;
use crate::snapshot::{NodeInfo, PodInfo, Snapshot, namespaced_key};

/// The plugin's name.
pub(crate) const NAME: &str = names::VOLUME_RESTRICTIONS;

/// An in-tree disk of the pod is mounted by another pod on the node in a conflicting way.
pub(crate) const ERR_REASON_DISK_CONFLICT: &str = "node(s) had no available disk";
/// A ReadWriteOncePod claim of the pod is already used by another pod (v1.34 and later).
pub(crate) const ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT: &str = "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod";
/// The same rejection in v1.33's words.
pub(crate) const ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT_V1_33: &str =
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode";

/// The access mode that allows a single pod.
const READ_WRITE_ONCE_POD: &str = "ReadWriteOncePod";

/// The pod's ReadWriteOncePod claims and how many scheduled pods use them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PreFilterState {
    /// Names of the pod's claims with the ReadWriteOncePod access mode.
    pub read_write_once_pod_pvcs: Arc<BTreeSet<String>>,
    /// References to those claims by scheduled pods (adjusted by AddPod/RemovePod).
    pub conflicting_pvc_ref_count: i64,
}

impl PreFilterState {
    /// How many of `pod`'s claim volumes are among the ReadWriteOncePod claims. Like upstream this
    /// matches claim names only: the pods AddPod/RemovePod see are on one node of the same evaluation.
    fn conflicting_refs_of(&self, pod: &Pod) -> i64 {
        pod.spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .filter_map(|v| v.persistent_volume_claim.as_ref())
            .filter(|c| self.read_write_once_pod_pvcs.contains(&c.claim_name))
            .count() as i64
    }
}

/// PreFilter state key.
pub(crate) const PRE_FILTER_STATE_KEY: StateKey<PreFilterState> =
    StateKey::new("PreFilterVolumeRestrictions");

/// The VolumeRestrictions plugin.
#[derive(Debug)]
pub(crate) struct VolumeRestrictions {
    snapshot: Arc<Snapshot>,
    /// The release's ReadWriteOncePod reason: v1.33's or the later one.
    read_write_once_pod_conflict_reason: &'static str,
}

/// Builds the plugin (it takes no args).
pub(crate) fn new(
    _args: Option<&serde_json::Value>,
    handle: &Handle,
    features: &FeatureGates,
) -> Result<Arc<dyn Plugin>, PluginError> {
    let read_write_once_pod_conflict_reason = if features.changes.read_write_once_pod_reason_before_v1_34 {
        ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT_V1_33
    } else {
        ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT
    };
    Ok(Arc::new(VolumeRestrictions {
        snapshot: handle.snapshot.clone(),
        read_write_once_pod_conflict_reason,
    }))
}

/// True for the in-tree sources whose mounts can conflict across pods.
fn needs_restrictions_check(v: &Volume) -> bool {
    v.gce_persistent_disk.is_some()
        || v.aws_elastic_block_store.is_some()
        || v.rbd.is_some()
        || v.iscsi.is_some()
}

fn have_overlap(a: &[String], b: &[String]) -> bool {
    a.iter().any(|x| b.contains(x))
}

/// Whether `volume` conflicts with any volume of `existing`: the same GCE PD unless both are read-only,
/// the same EBS volume always, the same iSCSI IQN or RBD image (sharing a monitor and pool) unless both
/// are read-only.
fn is_volume_conflict(volume: &Volume, existing: &Pod) -> bool {
    let ro = |b: Option<bool>| b.unwrap_or(false);
    existing
        .spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .any(|ev| {
            if let (Some(d), Some(ed)) = (&volume.gce_persistent_disk, &ev.gce_persistent_disk)
                && d.pd_name == ed.pd_name
                && !(ro(d.read_only) && ro(ed.read_only))
            {
                return true;
            }
            if let (Some(d), Some(ed)) = (&volume.aws_elastic_block_store, &ev.aws_elastic_block_store)
                && d.volume_id == ed.volume_id
            {
                return true;
            }
            if let (Some(d), Some(ed)) = (&volume.iscsi, &ev.iscsi)
                && d.iqn == ed.iqn
                && !(ro(d.read_only) && ro(ed.read_only))
            {
                return true;
            }
            if let (Some(d), Some(ed)) = (&volume.rbd, &ev.rbd) {
                // The API server defaults the pool to "rbd"; treat an unset pool the same way.
                let pool = |p: &Option<String>| p.as_deref().unwrap_or("rbd").to_string();
                if have_overlap(&d.monitors, &ed.monitors)
                    && pool(&d.pool) == pool(&ed.pool)
                    && d.image == ed.image
                    && !(ro(d.read_only) && ro(ed.read_only))
                {
                    return true;
                }
            }
            false
        })
}

/// True when none of the pod's restricted volumes conflicts with a pod on the node.
fn satisfies_volume_conflicts(pod: &Pod, node: &NodeInfo) -> bool {
    disk_conflicts(pod, node).next().is_none()
}

/// Each restricted volume of `pod` with a pod on the node it conflicts with.
pub(crate) fn disk_conflicts<'a>(
    pod: &'a Pod,
    node: &'a NodeInfo,
) -> impl Iterator<Item = (&'a Volume, &'a Arc<PodInfo>)> + 'a {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter(|v| needs_restrictions_check(v))
        .flat_map(move |v| {
            node.pods
                .iter()
                .filter(move |existing| is_volume_conflict(v, &existing.pod))
                .map(move |existing| (v, existing))
        })
}

/// Go's queueing hint for AssignedPod/Delete (`isSchedulableAfterAssignedPodDeleted`): a deleted pod
/// of the same namespace helps when one of its volumes conflicts with the pod's, or when it used a
/// claim the pod uses (ReadWriteOncePod; upstream does not fetch the claim to check the mode).
pub(crate) fn is_schedulable_after_assigned_pod_deleted(pod: &PodInfo, deleted: &PodInfo) -> bool {
    if deleted.namespace() != pod.namespace() {
        return false;
    }
    let mut node = NodeInfo::new(Arc::new(Default::default()));
    node.add_pod(Arc::new(deleted.clone()));
    if !satisfies_volume_conflicts(&pod.pod, &node) {
        return true;
    }
    let claims = |p: &PodInfo| -> BTreeSet<String> {
        p.pod
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .filter_map(|v| v.persistent_volume_claim.as_ref().map(|c| c.claim_name.clone()))
            .collect()
    };
    !claims(pod).is_disjoint(&claims(deleted))
}

impl VolumeRestrictions {
    /// The names of the pod's claims that have the ReadWriteOncePod access mode; a missing claim is
    /// the not-found error upstream's lister returns.
    fn read_write_once_pod_pvcs(&self, pod: &PodInfo) -> Result<BTreeSet<String>, String> {
        let mut out = BTreeSet::new();
        for claim in pod
            .pod
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .filter_map(|v| v.persistent_volume_claim.as_ref())
        {
            let Some(pvc) = self.snapshot.pvc(pod.namespace(), &claim.claim_name) else {
                return Err(format!("persistentvolumeclaim {:?} not found", claim.claim_name));
            };
            let rwop = pvc
                .spec
                .as_ref()
                .and_then(|s| s.access_modes.as_ref())
                .is_some_and(|m| m.iter().any(|m| m == READ_WRITE_ONCE_POD));
            if rwop {
                out.insert(pvc.metadata.name.clone().unwrap_or_default());
            }
        }
        Ok(out)
    }
}

impl Plugin for VolumeRestrictions {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for VolumeRestrictions {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        let needs_check = pod
            .pod
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .any(needs_restrictions_check);
        let pvcs = match self.read_write_once_pod_pvcs(pod) {
            Ok(p) => p,
            Err(not_found) => return (None, Status::unresolvable(not_found)),
        };
        // A ReadWriteOncePod claim can be used by at most one pod, so each used claim counts once.
        let conflicting = pvcs
            .iter()
            .filter(|name| {
                let key = namespaced_key(pod.namespace(), name);
                nodes.iter().any(|n| n.pvc_ref_counts.contains_key(&key))
            })
            .count() as i64;
        if !needs_check && conflicting == 0 {
            return (None, Status::skip());
        }
        state.write(
            &PRE_FILTER_STATE_KEY,
            PreFilterState {
                read_write_once_pod_pvcs: Arc::new(pvcs),
                conflicting_pvc_ref_count: conflicting,
            },
        );
        (None, Status::success())
    }

    fn pre_filter_extensions(&self) -> Option<&dyn PreFilterExtensions> {
        Some(self)
    }
}

fn missing_state() -> Status {
    Status::error(format!(
        "cannot read {:?} from cycleState",
        PRE_FILTER_STATE_KEY.name()
    ))
}

impl PreFilterExtensions for VolumeRestrictions {
    fn add_pod(
        &self,
        state: &mut CycleState,
        _pod: &PodInfo,
        pod_to_add: &PodInfo,
        _node: &NodeInfo,
    ) -> Status {
        let Some(s) = state.read_mut(&PRE_FILTER_STATE_KEY) else {
            return missing_state();
        };
        s.conflicting_pvc_ref_count += s.conflicting_refs_of(&pod_to_add.pod);
        Status::success()
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        _pod: &PodInfo,
        pod_to_remove: &PodInfo,
        _node: &NodeInfo,
    ) -> Status {
        let Some(s) = state.read_mut(&PRE_FILTER_STATE_KEY) else {
            return missing_state();
        };
        s.conflicting_pvc_ref_count -= s.conflicting_refs_of(&pod_to_remove.pod);
        Status::success()
    }
}

impl FilterPlugin for VolumeRestrictions {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if !satisfies_volume_conflicts(&pod.pod, node) {
            return Status::unschedulable(ERR_REASON_DISK_CONFLICT);
        }
        let Some(s) = state.read(&PRE_FILTER_STATE_KEY) else {
            return missing_state();
        };
        if s.conflicting_pvc_ref_count > 0 {
            return Status::unschedulable(self.read_write_once_pod_conflict_reason);
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::status::Code;
    use crate::snapshot::ClusterObjects;
    use crate::testing::{node, pod, pvc, snapshot_of};
    use k8s_openapi::api::core::v1::{
        AWSElasticBlockStoreVolumeSource, GCEPersistentDiskVolumeSource, ISCSIVolumeSource, RBDVolumeSource,
    };

    fn gce(name: &str, pd: &str, ro: bool) -> Volume {
        Volume {
            name: name.into(),
            gce_persistent_disk: Some(GCEPersistentDiskVolumeSource {
                pd_name: pd.into(),
                read_only: Some(ro),
                ..Default::default()
            }),
            ..Default::default()
        }
    }
    fn ebs(id: &str) -> Volume {
        Volume {
            name: "ebs".into(),
            aws_elastic_block_store: Some(AWSElasticBlockStoreVolumeSource {
                volume_id: id.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }
    fn iscsi(iqn: &str, ro: bool) -> Volume {
        Volume {
            name: "iscsi".into(),
            iscsi: Some(ISCSIVolumeSource {
                iqn: iqn.into(),
                read_only: Some(ro),
                ..Default::default()
            }),
            ..Default::default()
        }
    }
    fn rbd(monitors: &[&str], pool: Option<&str>, image: &str, ro: bool) -> Volume {
        Volume {
            name: "rbd".into(),
            rbd: Some(RBDVolumeSource {
                monitors: monitors.iter().map(|m| m.to_string()).collect(),
                pool: pool.map(str::to_string),
                image: image.into(),
                read_only: Some(ro),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    struct Env {
        plugin: Arc<dyn Plugin>,
        snapshot: Arc<Snapshot>,
    }

    fn env(objects: ClusterObjects) -> Env {
        env_for(objects, &crate::framework::FeatureGates::default())
    }

    fn env_for(objects: ClusterObjects, features: &crate::framework::FeatureGates) -> Env {
        let snapshot = Arc::new(snapshot_of(objects));
        let plugin = new(
            None,
            &Handle {
                snapshot: snapshot.clone(),
            },
            features,
        )
        .unwrap();
        Env { plugin, snapshot }
    }

    impl Env {
        fn pre_filter(&self, state: &mut CycleState, p: &PodInfo) -> Status {
            self.plugin
                .as_pre_filter()
                .unwrap()
                .pre_filter(state, p, self.snapshot.nodes())
                .1
        }
        fn run(&self, p: &PodInfo, node: &str) -> Status {
            let mut state = CycleState::new();
            let s = self.pre_filter(&mut state, p);
            if !s.is_success() {
                return s;
            }
            self.plugin
                .as_filter()
                .unwrap()
                .filter(&state, p, self.snapshot.node(node).unwrap())
        }
    }

    #[test]
    fn disk_conflicts() {
        let cases: Vec<(&str, Volume, Volume, Code)> = vec![
            (
                "gce same disk rw",
                gce("a", "pd1", false),
                gce("b", "pd1", false),
                Code::Unschedulable,
            ),
            (
                "gce one read-only",
                gce("a", "pd1", true),
                gce("b", "pd1", false),
                Code::Unschedulable,
            ),
            (
                "gce both read-only",
                gce("a", "pd1", true),
                gce("b", "pd1", true),
                Code::Success,
            ),
            (
                "gce different disks",
                gce("a", "pd1", false),
                gce("b", "pd2", false),
                Code::Success,
            ),
            ("ebs same id", ebs("vol-1"), ebs("vol-1"), Code::Unschedulable),
            ("ebs different id", ebs("vol-1"), ebs("vol-2"), Code::Success),
            (
                "iscsi same iqn",
                iscsi("iqn.1", false),
                iscsi("iqn.1", true),
                Code::Unschedulable,
            ),
            (
                "iscsi both read-only",
                iscsi("iqn.1", true),
                iscsi("iqn.1", true),
                Code::Success,
            ),
            (
                "rbd shared monitor, same pool and image",
                rbd(&["m1", "m2"], Some("p"), "img", false),
                rbd(&["m2", "m3"], Some("p"), "img", false),
                Code::Unschedulable,
            ),
            (
                "rbd default pool equals explicit rbd",
                rbd(&["m1"], None, "img", false),
                rbd(&["m1"], Some("rbd"), "img", false),
                Code::Unschedulable,
            ),
            (
                "rbd no shared monitor",
                rbd(&["m1"], Some("p"), "img", false),
                rbd(&["m2"], Some("p"), "img", false),
                Code::Success,
            ),
            (
                "rbd both read-only",
                rbd(&["m1"], Some("p"), "img", true),
                rbd(&["m1"], Some("p"), "img", true),
                Code::Success,
            ),
            (
                "different kinds never conflict",
                gce("a", "vol-1", false),
                ebs("vol-1"),
                Code::Success,
            ),
        ];
        for (name, mine, theirs, code) in cases {
            let e = env(ClusterObjects {
                nodes: vec![node("n1").obj(), node("n2").obj()],
                pods: vec![pod("existing").node("n1").volume(theirs).obj()],
                ..Default::default()
            });
            let p = pod("p").volume(mine).info();
            let s = e.run(&p, "n1");
            assert_eq!(s.code(), code, "{name}");
            if code == Code::Unschedulable {
                assert_eq!(s.reasons(), [ERR_REASON_DISK_CONFLICT], "{name}");
            }
            assert!(e.run(&p, "n2").is_success(), "{name}: other node");
        }
    }

    #[test]
    fn prefilter_skips_pods_without_restricted_volumes_or_used_rwop_claims() {
        let e = env(ClusterObjects {
            nodes: vec![node("n1").obj()],
            persistent_volume_claims: vec![
                pvc("rwo").access_modes(&["ReadWriteOnce"]).obj(),
                pvc("rwop").access_modes(&["ReadWriteOncePod"]).obj(),
            ],
            ..Default::default()
        });
        for p in [
            pod("none").info(),
            pod("rwo").pvc("rwo").info(),
            pod("unused-rwop").pvc("rwop").info(),
        ] {
            let mut state = CycleState::new();
            assert_eq!(e.pre_filter(&mut state, &p).code(), Code::Skip, "{}", p.name());
        }
    }

    #[test]
    fn missing_pvc_is_unresolvable() {
        let e = env(ClusterObjects {
            nodes: vec![node("n1").obj()],
            ..Default::default()
        });
        let s = e.pre_filter(&mut CycleState::new(), &pod("p").pvc("x").info());
        assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(s.reasons(), ["persistentvolumeclaim \"x\" not found"]);
    }

    #[test]
    fn read_write_once_pod_conflict_and_extensions() {
        let e = env(ClusterObjects {
            nodes: vec![node("n1").obj(), node("n2").obj()],
            pods: vec![pod("holder").node("n1").pvc("claim").obj()],
            persistent_volume_claims: vec![
                pvc("claim").access_modes(&["ReadWriteOncePod"]).obj(),
                pvc("claim")
                    .namespace("other")
                    .access_modes(&["ReadWriteOncePod"])
                    .obj(),
            ],
            ..Default::default()
        });
        let p = pod("p").pvc("claim").info();
        // Rejected on every node, not only where the holder runs.
        for n in ["n1", "n2"] {
            let s = e.run(&p, n);
            assert_eq!(s.code(), Code::Unschedulable, "{n}");
            assert_eq!(s.reasons(), [ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT]);
        }
        // Removing the holder (a preemption victim) clears the conflict; adding it back restores it.
        let mut state = CycleState::new();
        assert!(e.pre_filter(&mut state, &p).is_success());
        let ext = e.plugin.as_pre_filter().unwrap().pre_filter_extensions().unwrap();
        let holder = e.snapshot.pod("default", "holder").unwrap().clone();
        let n1 = e.snapshot.node("n1").unwrap().clone();
        assert!(ext.remove_pod(&mut state, &p, &holder, &n1).is_success());
        assert!(e.plugin.as_filter().unwrap().filter(&state, &p, &n1).is_success());
        assert!(ext.add_pod(&mut state, &p, &holder, &n1).is_success());
        assert_eq!(
            e.plugin.as_filter().unwrap().filter(&state, &p, &n1).code(),
            Code::Unschedulable
        );
        // The same claim name in another namespace is another claim: unused, so nothing to check.
        let q = pod("q").namespace("other").pvc("claim").info();
        assert_eq!(e.run(&q, "n1").code(), Code::Skip);
    }

    #[test]
    fn filter_without_state_is_an_error() {
        let e = env(ClusterObjects {
            nodes: vec![node("n1").obj()],
            ..Default::default()
        });
        let s = e.plugin.as_filter().unwrap().filter(
            &CycleState::new(),
            &pod("p").info(),
            e.snapshot.node("n1").unwrap(),
        );
        assert_eq!(s.code(), Code::Error);
        assert_eq!(
            s.message(),
            "cannot read \"PreFilterVolumeRestrictions\" from cycleState"
        );
    }

    /// The ReadWriteOncePod reason per release: v1.33.13 writes its own words, v1.34.0 and later
    /// the `node(s) unavailable …` ones; the verdict (Unschedulable on every node) is the same.
    #[test]
    fn read_write_once_pod_reason_follows_the_release() {
        use crate::features::{FeatureGates, KubeVersion};
        for (version, reason) in [
            (
                KubeVersion::new(33, 13),
                ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT_V1_33,
            ),
            (KubeVersion::new(34, 0), ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT),
            (KubeVersion::new(37, 1), ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT),
        ] {
            let e = env_for(
                ClusterObjects {
                    nodes: vec![node("n1").obj(), node("n2").obj()],
                    pods: vec![pod("holder").node("n1").pvc("claim").obj()],
                    persistent_volume_claims: vec![pvc("claim").access_modes(&["ReadWriteOncePod"]).obj()],
                    ..Default::default()
                },
                &FeatureGates::for_version(version),
            );
            for n in ["n1", "n2"] {
                let s = e.run(&pod("p").pvc("claim").info(), n);
                assert_eq!(s.code(), Code::Unschedulable, "{version} {n}");
                assert_eq!(s.reasons(), [reason], "{version} {n}");
            }
        }
    }
}
