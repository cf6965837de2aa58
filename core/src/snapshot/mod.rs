//! The cluster as the engine sees it: nodes with their pods (`NodeInfo`), plus the objects plugins look
//! up (namespaces, volumes, storage classes, CSI objects, PDBs, priority classes, workload controllers).
//!
//! A `Snapshot` is immutable once built; evaluations that need to change a node (nominated pods,
//! preemption dry runs) clone that node's `NodeInfo`.

pub mod affinity_index;
pub mod device_taint_rules;
pub mod dra;
pub mod kinds;
#[cfg(feature = "kube")]
pub mod kube;
pub mod load;
pub mod mutate;
pub mod node_info;
pub mod node_pools;
pub mod placement;
pub mod pod_group_tree;
pub mod pod_groups;
pub mod pod_info;
pub mod requests;
pub mod volume;

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup;
use k8s_openapi::api::scheduling::v1beta1::{PodGroup, Workload};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment};

pub use dra::{AllocatedState, DeviceId, ResourceSlices};
pub use kinds::Listing;
pub use load::{
    DecodeError, Format, LoadError, LoadReport, Location, ObjectKind, Prune, load_bytes, load_file,
    load_file_with, write_list_json, write_list_yaml, write_versioned_list_json, write_versioned_list_yaml,
};
pub use node_info::{HostPortInfo, ImageStateSummary, NodeInfo};
pub use pod_info::{AffinityTerm, PodInfo, WeightedAffinityTerm};

use crate::features::FeatureGates;
use crate::labels::Labels;

/// The raw objects a snapshot is built from (what `kubectl sched snapshot` dumps): one field per row of
/// the object-kind table ([`kinds`]), in its order.
#[derive(Debug, Clone, Default)]
pub struct ClusterObjects {
    /// Nodes.
    pub nodes: Vec<Node>,
    /// Pods of every namespace (bound, pending and nominated).
    pub pods: Vec<Pod>,
    /// Namespaces (their labels feed namespaceSelectors).
    pub namespaces: Vec<Namespace>,
    /// PersistentVolumes.
    pub persistent_volumes: Vec<PersistentVolume>,
    /// PersistentVolumeClaims.
    pub persistent_volume_claims: Vec<PersistentVolumeClaim>,
    /// StorageClasses.
    pub storage_classes: Vec<StorageClass>,
    /// CSINodes.
    pub csi_nodes: Vec<CSINode>,
    /// CSIDrivers.
    pub csi_drivers: Vec<CSIDriver>,
    /// CSIStorageCapacities.
    pub csi_storage_capacities: Vec<CSIStorageCapacity>,
    /// VolumeAttachments: NodeVolumeLimits counts a node's attached CSI volumes, including those no pod
    /// on the node uses any more (still attached after their pod left).
    pub volume_attachments: Vec<VolumeAttachment>,
    /// PodDisruptionBudgets.
    pub pod_disruption_budgets: Vec<PodDisruptionBudget>,
    /// PriorityClasses (to resolve `priorityClassName` of pods without `spec.priority`).
    pub priority_classes: Vec<PriorityClass>,
    /// Services (SelectorSpread, default topology spread).
    pub services: Vec<Service>,
    /// ReplicationControllers.
    pub replication_controllers: Vec<ReplicationController>,
    /// ReplicaSets.
    pub replica_sets: Vec<ReplicaSet>,
    /// StatefulSets.
    pub stateful_sets: Vec<StatefulSet>,
    /// ResourceClaims (resource.k8s.io/v1): DynamicResources only checks that a pod's claims exist.
    pub resource_claims: Vec<ResourceClaim>,
    /// DeviceClasses (resource.k8s.io/v1): the classes claims' requests name.
    pub device_classes: Vec<DeviceClass>,
    /// ResourceSlices (resource.k8s.io/v1): the devices drivers publish, per node, per node selector
    /// or for all nodes.
    pub resource_slices: Vec<ResourceSlice>,
    /// ResourceClaimTemplates (resource.k8s.io/v1): what the resourceclaim controller makes a pod's
    /// claims from.
    pub resource_claim_templates: Vec<ResourceClaimTemplate>,
    /// DeviceTaintRules (resource.k8s.io/v1): taints added to the devices they select, as if the
    /// ResourceSlices had them (kube-scheduler's patched slices).
    pub device_taint_rules: Vec<DeviceTaintRule>,
    /// Workloads (scheduling.k8s.io/v1beta1): the templates pod groups are made from; kept for
    /// reporting (v1.37's kube-scheduler reads PodGroups, not Workloads).
    pub workloads: Vec<Workload>,
    /// PodGroups (scheduling.k8s.io/v1beta1): the groups pods name in `spec.schedulingGroup`,
    /// with their gang policy (GangScheduling reads them under GenericWorkload).
    pub pod_groups: Vec<PodGroup>,
    /// CompositePodGroups (scheduling.k8s.io/v1alpha3): the groups of groups PodGroups name in
    /// `spec.parentCompositePodGroupName` (CompositePodGroup, alpha).
    pub composite_pod_groups: Vec<CompositePodGroup>,
    /// Karpenter's NodePools (karpenter.sh/v1): not kube-scheduler's; read to say whether a new node
    /// would take a pod that fits no node.
    pub node_pools: Vec<node_pools::NodePoolObject>,
    /// Pods on nodes already reduced to their scheduling facts ([`PodInfo::placed`]), as a loader
    /// asked for [`PodDetail::CompactPlaced`] leaves them. They feed a snapshot like `pods` do (first,
    /// in their order) but are not written back by the snapshot writers: a compact load is for
    /// evaluation, not for dumping.
    pub placed_pods: Vec<Arc<PodInfo>>,
}

/// How much of the pods on nodes a loader keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum PodDetail {
    /// Every pod whole, in `ClusterObjects::pods`.
    #[default]
    Full,
    /// Pods on nodes, except those named here (`namespace/name`), go to
    /// `ClusterObjects::placed_pods` as they are read, without their container specs: what a
    /// 150,000-pod evaluation needs, at a fraction of the memory. Terminal pods are dropped.
    CompactPlaced {
        /// Pods to keep whole wherever they are (the pod being explained).
        keep: std::collections::BTreeSet<String>,
    },
}

/// Where a compact load puts one pod (see [`PodDetail::place`]).
pub(crate) enum PodPlace {
    /// Kept whole, in `ClusterObjects::pods`.
    Whole(Box<Pod>),
    /// Reduced to its scheduling facts, in `ClusterObjects::placed_pods`.
    Placed(Arc<PodInfo>),
    /// A terminal pod on a node: kube-scheduler never sees it.
    Dropped,
}

impl PodDetail {
    /// True when `pod` is kept whole: everything under [`PodDetail::Full`]; pods not on a node, pods
    /// without `spec.priority` (admission has yet to give them one, from PriorityClasses that may come
    /// later in the file) and the pods named in `keep` under [`PodDetail::CompactPlaced`].
    pub(crate) fn keeps_whole(&self, pod: &Pod) -> bool {
        match self {
            PodDetail::Full => true,
            PodDetail::CompactPlaced { keep } => {
                !is_placed(pod)
                    || load::needs_priority(pod)
                    || (!keep.is_empty()
                        && keep.contains(&namespaced_key(
                            pod.metadata.namespace.as_deref().unwrap_or(""),
                            pod.metadata.name.as_deref().unwrap_or(""),
                        )))
            }
        }
    }

    /// Where one pod goes: loaders call this on each pod as soon as it is decoded (in parallel), so a
    /// pod on a node is reduced before the next ones are read.
    pub(crate) fn place(&self, pod: Pod) -> PodPlace {
        if self.keeps_whole(&pod) {
            PodPlace::Whole(Box::new(pod))
        } else if is_terminal(&pod) {
            PodPlace::Dropped
        } else {
            PodPlace::Placed(Arc::new(PodInfo::placed(pod)))
        }
    }

    /// Moves the pods that are on nodes (and not kept) into `placed`, preserving order.
    pub(crate) fn compact(&self, pods: &mut Vec<Pod>, placed: &mut Vec<Arc<PodInfo>>) {
        use rayon::prelude::*;
        if *self == PodDetail::Full {
            return;
        }
        let places: Vec<PodPlace> = std::mem::take(pods)
            .into_par_iter()
            .map(|p| self.place(p))
            .collect();
        PodPlace::push_all(places, pods, placed);
    }
}

impl PodPlace {
    /// Appends each pod where it was placed, keeping the order in which they were read.
    pub(crate) fn push_all(places: Vec<PodPlace>, pods: &mut Vec<Pod>, placed: &mut Vec<Arc<PodInfo>>) {
        for place in places {
            match place {
                PodPlace::Whole(pod) => pods.push(*pod),
                PodPlace::Placed(info) => placed.push(info),
                PodPlace::Dropped => {}
            }
        }
    }
}

/// True when the pod is bound to a node.
fn is_placed(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

/// `namespace/name`.
pub fn namespaced_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// True for pods kube-scheduler's informer never sees: phase Succeeded or Failed.
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded") | Some("Failed")
    )
}

/// A map keyed by a name the engine looks up once per node of a cycle (node and image names):
/// hashed with foldhash, which costs a fraction of the standard library's SipHash on short keys
/// and is still seeded per process.
pub type NameMap<V> = HashMap<String, V, foldhash::fast::RandomState>;

/// A set of names looked up once per node of a cycle; see [`NameMap`].
pub type NameSet = std::collections::HashSet<String, foldhash::fast::RandomState>;

/// An immutable view of the cluster.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    nodes: Vec<Arc<NodeInfo>>,
    /// Built on first use: most evaluations of one pod do not need it.
    affinity_index: std::sync::OnceLock<affinity_index::AffinityIndex>,
    node_index: NameMap<usize>,
    have_pods_with_affinity: Vec<Arc<NodeInfo>>,
    have_pods_with_required_anti_affinity: Vec<Arc<NodeInfo>>,
    /// Pods not bound to a node (pending), by `namespace/name`.
    pub pending_pods: Vec<Arc<PodInfo>>,
    /// Every non-terminal pod by `namespace/name` (bound and pending).
    pub pods_by_key: HashMap<String, Arc<PodInfo>>,
    /// Pending pods nominated to a node (status.nominatedNodeName), by node name.
    pub nominated_pods: NameMap<Vec<Arc<PodInfo>>>,
    /// Namespace labels by namespace name.
    pub namespace_labels: HashMap<String, Labels>,
    /// PVs by name.
    pub persistent_volumes: HashMap<String, Arc<volume::PersistentVolume>>,
    /// PVCs by `namespace/name`.
    pub persistent_volume_claims: HashMap<String, Arc<PersistentVolumeClaim>>,
    /// StorageClasses by name.
    pub storage_classes: HashMap<String, Arc<StorageClass>>,
    /// CSINodes by name (= node name).
    pub csi_nodes: NameMap<Arc<CSINode>>,
    /// CSIDrivers by name.
    pub csi_drivers: HashMap<String, Arc<CSIDriver>>,
    /// CSIStorageCapacities.
    pub csi_storage_capacities: Vec<Arc<CSIStorageCapacity>>,
    /// VolumeAttachments by `spec.nodeName`, in their order (kube-scheduler's informer index of them).
    pub volume_attachments: NameMap<Vec<Arc<VolumeAttachment>>>,
    /// PodDisruptionBudgets.
    pub pod_disruption_budgets: Vec<Arc<PodDisruptionBudget>>,
    /// PriorityClasses by name.
    pub priority_classes: HashMap<String, Arc<PriorityClass>>,
    /// Services.
    pub services: Vec<Arc<Service>>,
    /// ReplicationControllers.
    pub replication_controllers: Vec<Arc<ReplicationController>>,
    /// ReplicaSets.
    pub replica_sets: Vec<Arc<ReplicaSet>>,
    /// StatefulSets.
    pub stateful_sets: Vec<Arc<StatefulSet>>,
    /// ResourceClaims by `namespace/name`.
    pub resource_claims: HashMap<String, Arc<ResourceClaim>>,
    /// DeviceClasses by name.
    pub device_classes: HashMap<String, Arc<DeviceClass>>,
    /// ResourceSlices, grouped so a node's slices are found cheaply (see [`ResourceSlices`]).
    pub resource_slices: ResourceSlices,
    /// ResourceClaimTemplates by `namespace/name`.
    pub resource_claim_templates: HashMap<String, Arc<ResourceClaimTemplate>>,
    /// Workloads by `namespace/name`.
    pub workloads: HashMap<String, Arc<Workload>>,
    /// PodGroups by `namespace/name` (what pods' `spec.schedulingGroup.podGroupName` names).
    pub pod_groups: HashMap<String, Arc<PodGroup>>,
    /// CompositePodGroups by `namespace/name` (what `spec.parentCompositePodGroupName` names).
    pub composite_pod_groups: HashMap<String, Arc<CompositePodGroup>>,
    /// Karpenter's NodePools, in their order.
    pub node_pools: Vec<Arc<node_pools::NodePoolObject>>,
    /// What allocated claims hold (see [`AllocatedState::from_claims`]): devices, shared devices
    /// and their consumed capacity, as kube-scheduler's DRA manager tracks them; the allocator's
    /// input.
    pub allocated: AllocatedState,
    /// The feature gates its pods' requests were summed with ([`Snapshot::with_features`]).
    features: FeatureGates,
    /// The nodes a pod group cycle's placement limits scheduling to ([`placement`]); `None`: all.
    placement: Option<Arc<NameSet>>,
}

fn by_name<
    T: k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
    S: std::hash::BuildHasher + Default,
>(
    items: Vec<T>,
) -> HashMap<String, Arc<T>, S> {
    items
        .into_iter()
        .map(|o| (o.metadata().name.clone().unwrap_or_default(), Arc::new(o)))
        .collect()
}

fn by_namespaced_name<
    T: k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
>(
    items: Vec<T>,
) -> HashMap<String, Arc<T>> {
    items
        .into_iter()
        .map(|o| {
            let meta = o.metadata();
            let key = namespaced_key(
                meta.namespace.as_deref().unwrap_or(""),
                meta.name.as_deref().unwrap_or(""),
            );
            (key, Arc::new(o))
        })
        .collect()
}

/// VolumeAttachments grouped by the node they attach to.
fn by_node_name(items: Vec<VolumeAttachment>) -> NameMap<Vec<Arc<VolumeAttachment>>> {
    let mut out: NameMap<Vec<Arc<VolumeAttachment>>> = NameMap::default();
    for va in items {
        out.entry(va.spec.node_name.clone())
            .or_default()
            .push(Arc::new(va));
    }
    out
}

/// How many pods [`build_pod_infos`] converts at a time.
const POD_INFO_CHUNK: usize = 16_384;

/// PodInfos of the non-terminal pods, in their order. Pods on nodes keep no container specs
/// ([`PodInfo::placed`]). The input is consumed from its end a chunk at a time and shrunk as it goes:
/// a `Pod` is 2.4 KB inline, so holding the whole input until every PodInfo exists would add
/// hundreds of megabytes to the peak at 150,000 pods.
fn build_pod_infos(mut pods: Vec<Pod>, features: &FeatureGates) -> Vec<Arc<PodInfo>> {
    use rayon::prelude::*;
    let mut chunks: Vec<Vec<Arc<PodInfo>>> = Vec::new();
    while !pods.is_empty() {
        let chunk = pods.split_off(pods.len().saturating_sub(POD_INFO_CHUNK));
        pods.shrink_to_fit();
        chunks.push(
            chunk
                .into_par_iter()
                .filter(|p| !is_terminal(p))
                .map(|p| {
                    let placed = p
                        .spec
                        .as_ref()
                        .and_then(|s| s.node_name.as_deref())
                        .is_some_and(|n| !n.is_empty());
                    Arc::new(if placed {
                        PodInfo::placed_with_features(p, features)
                    } else {
                        PodInfo::with_features(Arc::new(p), features)
                    })
                })
                .collect(),
        );
    }
    chunks.into_iter().rev().flatten().collect()
}

impl Snapshot {
    /// Builds a snapshot with v1.37.1's default gates ([`Snapshot::with_features`]).
    pub fn new(objects: ClusterObjects) -> Self {
        Self::with_features(objects, FeatureGates::v1_37())
    }

    /// Builds a snapshot whose pods' requests are summed as `features` say: the gates of the engine
    /// that will decide on it (upstream's cache and plugins read the same process-wide gates; here
    /// the snapshot carries its own, below the framework, and [`Snapshot::features`] reports them).
    /// Terminal pods are dropped; pods bound to nodes that do not exist are kept only in
    /// `pods_by_key` (kube-scheduler's cache keeps them too, outside any listed node). Pods given
    /// already built (`placed_pods`) keep the requests they were built with.
    pub fn with_features(objects: ClusterObjects, features: FeatureGates) -> Self {
        let ClusterObjects {
            nodes,
            pods,
            namespaces,
            persistent_volumes,
            persistent_volume_claims,
            storage_classes,
            csi_nodes,
            csi_drivers,
            csi_storage_capacities,
            volume_attachments,
            pod_disruption_budgets,
            priority_classes,
            services,
            replication_controllers,
            replica_sets,
            stateful_sets,
            resource_claims,
            device_classes,
            resource_slices,
            resource_claim_templates,
            device_taint_rules,
            workloads,
            pod_groups,
            composite_pod_groups,
            node_pools,
            placed_pods,
        } = objects;
        let allocated = AllocatedState::from_claims(&resource_claims);

        let mut infos: Vec<NodeInfo> = nodes.into_iter().map(|n| NodeInfo::new(Arc::new(n))).collect();
        let node_index: NameMap<usize> = infos
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name().to_string(), i))
            .collect();

        let mut pending_pods = Vec::new();
        let mut pods_by_key = HashMap::with_capacity(pods.len());
        let mut nominated_pods: NameMap<Vec<Arc<PodInfo>>> = NameMap::default();
        // Parsing requests and affinity terms is the expensive part of building a snapshot: do it in
        // parallel, then place the pods serially.
        let pod_infos = build_pod_infos(pods, &features);
        for info in placed_pods.into_iter().chain(pod_infos) {
            pods_by_key.insert(info.key(), info.clone());
            let node_name = info.node_name();
            if node_name.is_empty() {
                let nominated = info.nominated_node_name();
                if !nominated.is_empty() {
                    nominated_pods
                        .entry(nominated.to_string())
                        .or_default()
                        .push(info.clone());
                }
                pending_pods.push(info);
            } else if let Some(&i) = node_index.get(node_name) {
                infos[i].add_pod(info);
            }
        }

        // Image sizes and how many nodes hold each image (ImageLocality spreads by that count). As in
        // kube-scheduler's cache, an image name's size is the one reported by the first node (in
        // snapshot order) that lists it, for every node: the cache keeps one state per name.
        let mut image_nodes: HashMap<String, (i64, usize)> = HashMap::new();
        for info in &infos {
            let mut seen = std::collections::HashSet::new();
            for image in info.node.status.iter().flat_map(|s| s.images.iter().flatten()) {
                for name in image.names.iter().flatten() {
                    if seen.insert(name.clone()) {
                        image_nodes
                            .entry(name.clone())
                            .or_insert((image.size_bytes.unwrap_or(0), 0))
                            .1 += 1;
                    }
                }
            }
        }
        for info in &mut infos {
            let mut states = NameMap::default();
            for image in info.node.status.iter().flat_map(|s| s.images.iter().flatten()) {
                for name in image.names.iter().flatten() {
                    let (size, num_nodes) = image_nodes.get(name).copied().unwrap_or((0, 0));
                    states
                        .entry(name.clone())
                        .or_insert(ImageStateSummary { size, num_nodes });
                }
            }
            info.image_states = Arc::new(states);
        }

        let nodes: Vec<Arc<NodeInfo>> = infos.into_iter().map(Arc::new).collect();
        let have_pods_with_affinity = nodes
            .iter()
            .filter(|n| !n.pods_with_affinity.is_empty())
            .cloned()
            .collect();
        let have_pods_with_required_anti_affinity = nodes
            .iter()
            .filter(|n| !n.pods_with_required_anti_affinity.is_empty())
            .cloned()
            .collect();

        Snapshot {
            nodes,
            affinity_index: Default::default(),
            node_index,
            have_pods_with_affinity,
            have_pods_with_required_anti_affinity,
            pending_pods,
            pods_by_key,
            nominated_pods,
            namespace_labels: namespaces
                .into_iter()
                .map(|n| {
                    (
                        n.metadata.name.unwrap_or_default(),
                        n.metadata.labels.unwrap_or_default(),
                    )
                })
                .collect(),
            persistent_volumes: persistent_volumes
                .into_iter()
                .map(|pv| {
                    let pv = volume::PersistentVolume::from(pv);
                    (pv.metadata.name.clone().unwrap_or_default(), Arc::new(pv))
                })
                .collect(),
            persistent_volume_claims: persistent_volume_claims
                .into_iter()
                .map(|c| {
                    let key = namespaced_key(
                        c.metadata.namespace.as_deref().unwrap_or(""),
                        c.metadata.name.as_deref().unwrap_or(""),
                    );
                    (key, Arc::new(c))
                })
                .collect(),
            storage_classes: by_name(storage_classes),
            csi_nodes: by_name(csi_nodes),
            csi_drivers: by_name(csi_drivers),
            csi_storage_capacities: csi_storage_capacities.into_iter().map(Arc::new).collect(),
            volume_attachments: by_node_name(volume_attachments),
            pod_disruption_budgets: pod_disruption_budgets.into_iter().map(Arc::new).collect(),
            priority_classes: by_name(priority_classes),
            services: services.into_iter().map(Arc::new).collect(),
            replication_controllers: replication_controllers.into_iter().map(Arc::new).collect(),
            replica_sets: replica_sets.into_iter().map(Arc::new).collect(),
            stateful_sets: stateful_sets.into_iter().map(Arc::new).collect(),
            allocated,
            resource_claims: by_namespaced_name(resource_claims),
            device_classes: by_name(device_classes),
            resource_slices: ResourceSlices::new(device_taint_rules::apply(
                resource_slices,
                &device_taint_rules,
            )),
            resource_claim_templates: by_namespaced_name(resource_claim_templates),
            workloads: by_namespaced_name(workloads),
            pod_groups: by_namespaced_name(pod_groups),
            composite_pod_groups: by_namespaced_name(composite_pod_groups),
            node_pools: node_pools.into_iter().map(Arc::new).collect(),
            features,
            placement: None,
        }
    }

    /// The feature gates its pods' requests were summed with.
    pub fn features(&self) -> &FeatureGates {
        &self.features
    }

    /// The position of node `name` in [`Snapshot::nodes`].
    pub fn node_position(&self, name: &str) -> Option<usize> {
        self.node_index.get(name).copied()
    }

    /// All nodes, in the order they were given.
    pub fn nodes(&self) -> &[Arc<NodeInfo>] {
        &self.nodes
    }

    /// Placed pods and required anti-affinity terms by namespace (built on first use).
    pub fn affinity_index(&self) -> &affinity_index::AffinityIndex {
        self.affinity_index
            .get_or_init(|| affinity_index::AffinityIndex::new(&self.nodes))
    }

    /// A node by name.
    pub fn node(&self, name: &str) -> Option<&Arc<NodeInfo>> {
        self.node_index.get(name).map(|&i| &self.nodes[i])
    }

    /// Nodes with at least one pod with pod affinity or anti-affinity.
    pub fn have_pods_with_affinity(&self) -> &[Arc<NodeInfo>] {
        &self.have_pods_with_affinity
    }

    /// Nodes with at least one pod with required anti-affinity.
    pub fn have_pods_with_required_anti_affinity(&self) -> &[Arc<NodeInfo>] {
        &self.have_pods_with_required_anti_affinity
    }

    /// A pod by namespace and name.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<&Arc<PodInfo>> {
        self.pods_by_key.get(&namespaced_key(namespace, name))
    }

    /// Namespace labels (None when the namespace is unknown).
    pub fn namespace_labels(&self, namespace: &str) -> Option<&Labels> {
        self.namespace_labels.get(namespace)
    }

    /// A PVC by namespace and name.
    pub fn pvc(&self, namespace: &str, name: &str) -> Option<&Arc<PersistentVolumeClaim>> {
        self.persistent_volume_claims
            .get(&namespaced_key(namespace, name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, pod, snapshot};

    /// Pods on nodes lose their container specs, yet the node totals equal those computed from the full
    /// pods, and the pods being scheduled (pending, nominated) keep theirs.
    #[test]
    fn placed_pods_keep_their_totals_without_container_specs() {
        let web = pod("web")
            .container("main", &[("cpu", "500m"), ("memory", "1Gi")])
            .init_container("proxy", &[("cpu", "100m")], true)
            .init_container("setup", &[("cpu", "2")], false)
            .host_port(8080, "", "")
            .node("n1");
        let bare = pod("bare").node("n1");
        let pending = pod("pending").cpu("1").host_port(9090, "UDP", "");
        let nominated = pod("nominated").cpu("1").nominated("n1");
        let full_node = node("n1")
            .cpu("8")
            .memory("32Gi")
            .info_with(vec![web.clone().obj(), bare.clone().obj()]);

        let snap = snapshot(
            vec![node("n1").cpu("8").memory("32Gi").obj()],
            vec![web.obj(), bare.obj(), pending.obj(), nominated.obj()],
        );
        let n1 = &snap.nodes()[0];
        assert_eq!(n1.requested, full_node.requested);
        assert_eq!(n1.non_zero_requested, full_node.non_zero_requested);
        assert!(n1.used_ports.check_conflict("", "TCP", 8080));
        assert!(!n1.used_ports.check_conflict("", "TCP", 9090));
        for placed in &n1.pods {
            let spec = placed.pod.spec.as_ref().expect("spec");
            assert!(
                spec.containers.is_empty() && spec.init_containers.is_none(),
                "{}",
                placed.key()
            );
        }
        let web_info = &snap.pods_by_key["default/web"];
        assert_eq!(web_info.resource, full_node.pods[0].resource);

        for key in ["default/pending", "default/nominated"] {
            let info = &snap.pods_by_key[key];
            assert_eq!(info.pod.spec.as_ref().expect("spec").containers.len(), 1, "{key}");
        }
        assert_eq!(snap.pods_by_key["default/pending"].host_ports.len(), 1);
    }

    /// Chunked construction keeps the input order (it decides NodeInfo.pods order, which victim
    /// selection and messages follow).
    #[test]
    fn pod_infos_keep_input_order_across_chunks() {
        let pods: Vec<Pod> = (0..POD_INFO_CHUNK * 2 + 7)
            .map(|i| {
                pod(&format!("p{i}"))
                    .node(if i % 2 == 0 { "a" } else { "" })
                    .obj()
            })
            .collect();
        let names: Vec<String> = pods
            .iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect();
        let infos = build_pod_infos(pods, &FeatureGates::v1_37());
        let built: Vec<String> = infos.iter().map(|p| p.name().to_string()).collect();
        assert_eq!(built, names);
    }
}
