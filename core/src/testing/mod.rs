//! Test builders: `pod("p").cpu("500m").node("n1")`, `node("n1").cpu("4").memory("8Gi")`, and
//! `snapshot(nodes, pods)`, `gang("pg", 3)` with `pod("p").pod_group("pg")`; [`generate`] makes whole synthetic clusters. Used by unit tests across the
//! crate and by benchmarks and examples (feature `testing`).

pub mod generate;
mod pod_groups;

pub use pod_groups::{
    CompositeBuilder, PodGroupBuilder, composite, explain_named, gang, small_and_big_gang_tree,
};

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, Node, NodeSpec, NodeStatus, Pod, PodSpec, PodStatus,
    ResourceRequirements, Taint, Toleration, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::snapshot::{ClusterObjects, NodeInfo, PodInfo, Snapshot};

/// Builds a pod. The default namespace is "default"; uid is "<namespace>-<name>".
#[derive(Debug, Clone)]
pub struct PodBuilder(pub Pod);

/// Starts a pod with one container named "c0" and no requests.
pub fn pod(name: &str) -> PodBuilder {
    PodBuilder(Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".to_string()),
            uid: Some(format!("default-{name}")),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c0".into(),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: Some(PodStatus::default()),
    })
}

impl PodBuilder {
    fn spec(&mut self) -> &mut PodSpec {
        self.0.spec.get_or_insert_with(Default::default)
    }

    fn request(mut self, resource: &str, amount: &str) -> Self {
        let c = &mut self.spec().containers[0];
        c.resources
            .get_or_insert_with(ResourceRequirements::default)
            .requests
            .get_or_insert_with(BTreeMap::new)
            .insert(resource.to_string(), Quantity(amount.to_string()));
        self
    }

    /// Namespace (also updates the uid).
    pub fn namespace(mut self, ns: &str) -> Self {
        let name = self.0.metadata.name.clone().unwrap_or_default();
        self.0.metadata.namespace = Some(ns.to_string());
        self.0.metadata.uid = Some(format!("{ns}-{name}"));
        self
    }
    /// cpu request of the first container.
    pub fn cpu(self, amount: &str) -> Self {
        self.request("cpu", amount)
    }
    /// memory request of the first container.
    pub fn memory(self, amount: &str) -> Self {
        self.request("memory", amount)
    }
    /// Any resource request of the first container.
    pub fn req(self, resource: &str, amount: &str) -> Self {
        self.request(resource, amount)
    }
    /// Adds a container with requests (name, [(resource, amount)]).
    pub fn container(mut self, name: &str, requests: &[(&str, &str)]) -> Self {
        let c = container(name, requests);
        self.spec().containers.push(c);
        self
    }
    /// Adds an init container; `sidecar` sets restartPolicy Always.
    pub fn init_container(mut self, name: &str, requests: &[(&str, &str)], sidecar: bool) -> Self {
        let mut c = container(name, requests);
        if sidecar {
            c.restart_policy = Some("Always".into());
        }
        self.spec().init_containers.get_or_insert_with(Vec::new).push(c);
        self
    }
    /// spec.nodeName.
    pub fn node(mut self, node: &str) -> Self {
        self.spec().node_name = Some(node.to_string());
        self
    }
    /// status.nominatedNodeName.
    pub fn nominated(mut self, node: &str) -> Self {
        self.0
            .status
            .get_or_insert_with(Default::default)
            .nominated_node_name = Some(node.to_string());
        self
    }
    /// spec.priority.
    pub fn priority(mut self, p: i32) -> Self {
        self.spec().priority = Some(p);
        self
    }
    /// metadata.resourceVersion.
    pub fn resource_version(mut self, rv: &str) -> Self {
        self.0.metadata.resource_version = Some(rv.into());
        self
    }
    /// A label.
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(k.into(), v.into());
        self
    }
    /// spec.nodeSelector entry.
    pub fn node_selector(mut self, k: &str, v: &str) -> Self {
        self.spec()
            .node_selector
            .get_or_insert_with(BTreeMap::new)
            .insert(k.into(), v.into());
        self
    }
    /// spec.affinity.
    pub fn affinity(mut self, a: Affinity) -> Self {
        self.spec().affinity = Some(a);
        self
    }
    /// A toleration.
    pub fn toleration(mut self, t: Toleration) -> Self {
        self.spec().tolerations.get_or_insert_with(Vec::new).push(t);
        self
    }
    /// A host port on the first container (protocol TCP unless given).
    pub fn host_port(mut self, port: i32, protocol: &str, host_ip: &str) -> Self {
        let c = &mut self.spec().containers[0];
        c.ports.get_or_insert_with(Vec::new).push(ContainerPort {
            container_port: port,
            host_port: Some(port),
            protocol: (!protocol.is_empty()).then(|| protocol.to_string()),
            host_ip: (!host_ip.is_empty()).then(|| host_ip.to_string()),
            ..Default::default()
        });
        self
    }
    /// A volume.
    pub fn volume(mut self, v: Volume) -> Self {
        self.spec().volumes.get_or_insert_with(Vec::new).push(v);
        self
    }
    /// A PVC volume named after the claim.
    pub fn pvc(self, claim: &str) -> Self {
        self.volume(Volume {
            name: claim.to_string(),
            persistent_volume_claim: Some(k8s_openapi::api::core::v1::PersistentVolumeClaimVolumeSource {
                claim_name: claim.to_string(),
                read_only: None,
            }),
            ..Default::default()
        })
    }
    /// spec.schedulerName.
    pub fn scheduler_name(mut self, name: &str) -> Self {
        self.spec().scheduler_name = Some(name.to_string());
        self
    }
    /// The image of the first container.
    pub fn image(mut self, image: &str) -> Self {
        self.spec().containers[0].image = Some(image.to_string());
        self
    }
    /// Mutates the pod directly.
    pub fn with(mut self, f: impl FnOnce(&mut Pod)) -> Self {
        f(&mut self.0);
        self
    }
    /// The pod.
    pub fn obj(self) -> Pod {
        self.0
    }
    /// The pod as a `PodInfo`.
    pub fn info(self) -> PodInfo {
        PodInfo::new(self.0)
    }
}

/// A container with requests.
pub fn container(name: &str, requests: &[(&str, &str)]) -> Container {
    Container {
        name: name.to_string(),
        resources: Some(ResourceRequirements {
            requests: Some(
                requests
                    .iter()
                    .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                    .collect(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Builds a node. Allocatable pods default to 110.
#[derive(Debug, Clone)]
pub struct NodeBuilder(pub Node);

/// Starts a node with `pods: 110` allocatable and the hostname label.
pub fn node(name: &str) -> NodeBuilder {
    NodeBuilder(Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some([("kubernetes.io/hostname".to_string(), name.to_string())].into()),
            ..Default::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            allocatable: Some([("pods".to_string(), Quantity("110".into()))].into()),
            ..Default::default()
        }),
    })
}

impl NodeBuilder {
    fn alloc(mut self, resource: &str, amount: &str) -> Self {
        let status = self.0.status.get_or_insert_with(Default::default);
        status
            .allocatable
            .get_or_insert_with(BTreeMap::new)
            .insert(resource.into(), Quantity(amount.into()));
        status
            .capacity
            .get_or_insert_with(BTreeMap::new)
            .insert(resource.into(), Quantity(amount.into()));
        self
    }
    /// Allocatable cpu.
    pub fn cpu(self, amount: &str) -> Self {
        self.alloc("cpu", amount)
    }
    /// Allocatable memory.
    pub fn memory(self, amount: &str) -> Self {
        self.alloc("memory", amount)
    }
    /// Allocatable pods.
    pub fn pods(self, amount: &str) -> Self {
        self.alloc("pods", amount)
    }
    /// Any allocatable resource.
    pub fn allocatable(self, resource: &str, amount: &str) -> Self {
        self.alloc(resource, amount)
    }
    /// A label.
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(k.into(), v.into());
        self
    }
    /// A taint.
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        let spec = self.0.spec.get_or_insert_with(Default::default);
        spec.taints.get_or_insert_with(Vec::new).push(Taint {
            key: key.into(),
            value: (!value.is_empty()).then(|| value.to_string()),
            effect: effect.into(),
            time_added: None,
        });
        self
    }
    /// spec.unschedulable.
    pub fn unschedulable(mut self) -> Self {
        self.0.spec.get_or_insert_with(Default::default).unschedulable = Some(true);
        self
    }
    /// An image present on the node.
    pub fn image(mut self, names: &[&str], size: i64) -> Self {
        let status = self.0.status.get_or_insert_with(Default::default);
        status
            .images
            .get_or_insert_with(Vec::new)
            .push(k8s_openapi::api::core::v1::ContainerImage {
                names: Some(names.iter().map(|s| s.to_string()).collect()),
                size_bytes: Some(size),
            });
        self
    }
    /// Mutates the node directly.
    pub fn with(mut self, f: impl FnOnce(&mut Node)) -> Self {
        f(&mut self.0);
        self
    }
    /// The node.
    pub fn obj(self) -> Node {
        self.0
    }
    /// A `NodeInfo` with the given pods on it.
    pub fn info_with(self, pods: Vec<Pod>) -> NodeInfo {
        let mut info = NodeInfo::new(Arc::new(self.0));
        for p in pods {
            info.add_pod(Arc::new(PodInfo::new(p)));
        }
        info
    }
}

/// A snapshot of nodes and pods (other objects empty).
pub fn snapshot(nodes: Vec<Node>, pods: Vec<Pod>) -> Snapshot {
    Snapshot::new(ClusterObjects {
        nodes,
        pods,
        ..Default::default()
    })
}

/// A snapshot from full cluster objects.
pub fn snapshot_of(objects: ClusterObjects) -> Snapshot {
    Snapshot::new(objects)
}

/// A taint (empty value = none).
pub fn taint(key: &str, value: &str, effect: &str) -> Taint {
    Taint {
        key: key.into(),
        value: (!value.is_empty()).then(|| value.to_string()),
        effect: effect.into(),
        time_added: None,
    }
}

/// A toleration; empty strings leave the field unset.
pub fn toleration(key: &str, operator: &str, value: &str, effect: &str) -> Toleration {
    let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
    Toleration {
        key: opt(key),
        operator: opt(operator),
        value: opt(value),
        effect: opt(effect),
        toleration_seconds: None,
    }
}

// ---- Storage objects: PersistentVolume, PersistentVolumeClaim, StorageClass, CSINode, CSIDriver ----

/// Builds a PersistentVolume.
#[derive(Debug, Clone)]
pub struct PvBuilder(pub k8s_openapi::api::core::v1::PersistentVolume);

/// Starts a PV with an empty spec.
pub fn pv(name: &str) -> PvBuilder {
    PvBuilder(k8s_openapi::api::core::v1::PersistentVolume {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        spec: Some(Default::default()),
        status: None,
    })
}

impl PvBuilder {
    fn spec(&mut self) -> &mut k8s_openapi::api::core::v1::PersistentVolumeSpec {
        self.0.spec.get_or_insert_with(Default::default)
    }
    /// A label.
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(k.into(), v.into());
        self
    }
    /// A CSI source.
    pub fn csi(mut self, driver: &str, handle: &str) -> Self {
        self.spec().csi = Some(k8s_openapi::api::core::v1::CSIPersistentVolumeSource {
            driver: driver.into(),
            volume_handle: handle.into(),
            ..Default::default()
        });
        self
    }
    /// spec.storageClassName.
    pub fn storage_class(mut self, class: &str) -> Self {
        self.spec().storage_class_name = Some(class.into());
        self
    }
    /// Mutates the PV directly.
    pub fn with(mut self, f: impl FnOnce(&mut k8s_openapi::api::core::v1::PersistentVolume)) -> Self {
        f(&mut self.0);
        self
    }
    /// The PV.
    pub fn obj(self) -> k8s_openapi::api::core::v1::PersistentVolume {
        self.0
    }

    /// The PV as the engine's snapshot holds it.
    pub fn volume(self) -> crate::snapshot::volume::PersistentVolume {
        self.0.into()
    }
}

/// Builds a PersistentVolumeClaim (namespace "default").
#[derive(Debug, Clone)]
pub struct PvcBuilder(pub k8s_openapi::api::core::v1::PersistentVolumeClaim);

/// Starts a PVC in "default" with an empty spec.
pub fn pvc(name: &str) -> PvcBuilder {
    PvcBuilder(k8s_openapi::api::core::v1::PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".to_string()),
            ..Default::default()
        },
        spec: Some(Default::default()),
        status: None,
    })
}

impl PvcBuilder {
    fn spec(&mut self) -> &mut k8s_openapi::api::core::v1::PersistentVolumeClaimSpec {
        self.0.spec.get_or_insert_with(Default::default)
    }
    /// Namespace.
    pub fn namespace(mut self, ns: &str) -> Self {
        self.0.metadata.namespace = Some(ns.into());
        self
    }
    /// spec.volumeName (bound to that PV).
    pub fn volume_name(mut self, pv: &str) -> Self {
        self.spec().volume_name = Some(pv.into());
        self
    }
    /// spec.storageClassName.
    pub fn storage_class(mut self, class: &str) -> Self {
        self.spec().storage_class_name = Some(class.into());
        self
    }
    /// spec.accessModes.
    pub fn access_modes(mut self, modes: &[&str]) -> Self {
        self.spec().access_modes = Some(modes.iter().map(|m| m.to_string()).collect());
        self
    }
    /// A controller owner reference to a pod (what generic ephemeral volumes carry).
    pub fn owned_by_pod(mut self, pod_name: &str, pod_uid: &str) -> Self {
        self.0
            .metadata
            .owner_references
            .get_or_insert_with(Vec::new)
            .push(k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: pod_name.into(),
                uid: pod_uid.into(),
                controller: Some(true),
                ..Default::default()
            });
        self
    }
    /// Mutates the PVC directly.
    pub fn with(mut self, f: impl FnOnce(&mut k8s_openapi::api::core::v1::PersistentVolumeClaim)) -> Self {
        f(&mut self.0);
        self
    }
    /// The PVC.
    pub fn obj(self) -> k8s_openapi::api::core::v1::PersistentVolumeClaim {
        self.0
    }
}

/// A StorageClass; an empty `binding_mode` leaves volumeBindingMode unset.
pub fn storage_class(
    name: &str,
    provisioner: &str,
    binding_mode: &str,
) -> k8s_openapi::api::storage::v1::StorageClass {
    k8s_openapi::api::storage::v1::StorageClass {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        provisioner: provisioner.into(),
        volume_binding_mode: (!binding_mode.is_empty()).then(|| binding_mode.to_string()),
        ..Default::default()
    }
}

/// A CSINode named after its node, with (driver name, allocatable count) entries.
pub fn csi_node(node: &str, drivers: &[(&str, Option<i32>)]) -> k8s_openapi::api::storage::v1::CSINode {
    k8s_openapi::api::storage::v1::CSINode {
        metadata: ObjectMeta {
            name: Some(node.to_string()),
            ..Default::default()
        },
        spec: k8s_openapi::api::storage::v1::CSINodeSpec {
            drivers: drivers
                .iter()
                .map(|(name, count)| k8s_openapi::api::storage::v1::CSINodeDriver {
                    name: name.to_string(),
                    node_id: node.to_string(),
                    allocatable: count
                        .map(|c| k8s_openapi::api::storage::v1::VolumeNodeResources { count: Some(c) }),
                    topology_keys: None,
                })
                .collect(),
        },
        ..Default::default()
    }
}

/// A CSIDriver; `prevent_scheduling_if_missing` sets spec.preventPodSchedulingIfMissing.
pub fn csi_driver(
    name: &str,
    prevent_scheduling_if_missing: Option<bool>,
) -> k8s_openapi::api::storage::v1::CSIDriver {
    k8s_openapi::api::storage::v1::CSIDriver {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        spec: k8s_openapi::api::storage::v1::CSIDriverSpec {
            prevent_pod_scheduling_if_missing: prevent_scheduling_if_missing,
            ..Default::default()
        },
    }
}

/// A VolumeAttachment `name` of the PV `pv` (None: an inline volume spec instead, empty here) to
/// `node` by `attacher`, reported attached.
pub fn volume_attachment(
    name: &str,
    attacher: &str,
    node: &str,
    pv: Option<&str>,
) -> k8s_openapi::api::storage::v1::VolumeAttachment {
    k8s_openapi::api::storage::v1::VolumeAttachment {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        spec: k8s_openapi::api::storage::v1::VolumeAttachmentSpec {
            attacher: attacher.to_string(),
            node_name: node.to_string(),
            source: k8s_openapi::api::storage::v1::VolumeAttachmentSource {
                persistent_volume_name: pv.map(str::to_string),
                inline_volume_spec: pv.is_none().then(Default::default),
            },
        },
        status: Some(k8s_openapi::api::storage::v1::VolumeAttachmentStatus {
            attached: true,
            ..Default::default()
        }),
    }
}

// --- preemption builders: preemptionPolicy, start time, termination, conditions, PDBs ---

impl PodBuilder {
    /// spec.preemptionPolicy ("Never" or "PreemptLowerPriority").
    pub fn preemption_policy(mut self, policy: &str) -> Self {
        self.spec().preemption_policy = Some(policy.to_string());
        self
    }
    /// status.startTime, in seconds since the epoch.
    pub fn start_time(mut self, secs: i64) -> Self {
        let t = k8s_openapi::jiff::Timestamp::from_second(secs).unwrap_or_default();
        self.0.status.get_or_insert_with(Default::default).start_time =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t));
        self
    }
    /// metadata.deletionTimestamp (the pod is terminating).
    pub fn terminating(mut self) -> Self {
        self.0.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        self
    }
    /// A status condition.
    pub fn condition(mut self, type_: &str, status: &str, reason: &str) -> Self {
        self.0
            .status
            .get_or_insert_with(Default::default)
            .conditions
            .get_or_insert_with(Vec::new)
            .push(k8s_openapi::api::core::v1::PodCondition {
                type_: type_.to_string(),
                status: status.to_string(),
                reason: (!reason.is_empty()).then(|| reason.to_string()),
                ..Default::default()
            });
        self
    }
    /// Terminating because kube-scheduler preempted it (deletionTimestamp + DisruptionTarget=True).
    pub fn preempted(self) -> Self {
        self.terminating()
            .condition("DisruptionTarget", "True", "PreemptionByScheduler")
    }
}

/// Builds a PodDisruptionBudget (namespace "default", status with 0 disruptions allowed).
#[derive(Debug, Clone)]
pub struct PdbBuilder(pub k8s_openapi::api::policy::v1::PodDisruptionBudget);

/// Starts a PDB without a selector.
pub fn pdb(name: &str) -> PdbBuilder {
    PdbBuilder(k8s_openapi::api::policy::v1::PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".to_string()),
            ..Default::default()
        },
        spec: Some(Default::default()),
        status: Some(k8s_openapi::api::policy::v1::PodDisruptionBudgetStatus {
            disruptions_allowed: Some(0),
            ..Default::default()
        }),
    })
}

impl PdbBuilder {
    /// Namespace.
    pub fn namespace(mut self, ns: &str) -> Self {
        self.0.metadata.namespace = Some(ns.to_string());
        self
    }
    /// Adds a matchLabels entry to the selector.
    pub fn selector(mut self, k: &str, v: &str) -> Self {
        self.0
            .spec
            .get_or_insert_with(Default::default)
            .selector
            .get_or_insert_with(Default::default)
            .match_labels
            .get_or_insert_with(BTreeMap::new)
            .insert(k.into(), v.into());
        self
    }
    /// An empty (non-nil) selector.
    pub fn empty_selector(mut self) -> Self {
        self.0.spec.get_or_insert_with(Default::default).selector = Some(Default::default());
        self
    }
    /// status.disruptionsAllowed.
    pub fn allowed(mut self, n: i32) -> Self {
        self.0
            .status
            .get_or_insert_with(Default::default)
            .disruptions_allowed = Some(n);
        self
    }
    /// Adds a pod name to status.disruptedPods.
    pub fn disrupted(mut self, pod: &str) -> Self {
        self.0
            .status
            .get_or_insert_with(Default::default)
            .disrupted_pods
            .get_or_insert_with(BTreeMap::new)
            .insert(
                pod.to_string(),
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ),
            );
        self
    }
    /// Removes the status (as before the disruption controller first reconciled the PDB).
    pub fn no_status(mut self) -> Self {
        self.0.status = None;
        self
    }
    /// The PDB.
    pub fn obj(self) -> k8s_openapi::api::policy::v1::PodDisruptionBudget {
        self.0
    }
}

// --- volume binding builders: PV/PVC binding state, generic ephemeral volumes, CSIStorageCapacity ---

fn set_annotation(meta: &mut ObjectMeta, k: &str, v: &str) {
    meta.annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(k.into(), v.into());
}

fn deletion_now() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default())
}

impl PodBuilder {
    /// A generic ephemeral volume (its claim is `<pod>-<volume>`).
    pub fn ephemeral(self, volume: &str) -> Self {
        self.volume(Volume {
            name: volume.to_string(),
            ephemeral: Some(k8s_openapi::api::core::v1::EphemeralVolumeSource {
                volume_claim_template: Some(Default::default()),
            }),
            ..Default::default()
        })
    }
}

impl PvBuilder {
    /// capacity.storage.
    pub fn capacity(mut self, size: &str) -> Self {
        self.spec()
            .capacity
            .get_or_insert_with(BTreeMap::new)
            .insert("storage".into(), Quantity(size.into()));
        self
    }
    /// spec.accessModes.
    pub fn access_modes(mut self, modes: &[&str]) -> Self {
        self.spec().access_modes = Some(modes.iter().map(|m| m.to_string()).collect());
        self
    }
    /// Required node affinity: adds `key In values` to the first term.
    pub fn node_affinity(mut self, key: &str, values: &[&str]) -> Self {
        let required = self
            .spec()
            .node_affinity
            .get_or_insert_with(Default::default)
            .required
            .get_or_insert_with(Default::default);
        if required.node_selector_terms.is_empty() {
            required.node_selector_terms.push(Default::default());
        }
        required.node_selector_terms[0]
            .match_expressions
            .get_or_insert_with(Vec::new)
            .push(k8s_openapi::api::core::v1::NodeSelectorRequirement {
                key: key.into(),
                operator: "In".into(),
                values: Some(values.iter().map(|v| v.to_string()).collect()),
            });
        self
    }
    /// status.phase.
    pub fn phase(mut self, phase: &str) -> Self {
        self.0.status.get_or_insert_with(Default::default).phase = Some(phase.into());
        self
    }
    /// spec.claimRef (an empty uid leaves it unset).
    pub fn claim_ref(mut self, namespace: &str, name: &str, uid: &str) -> Self {
        self.spec().claim_ref = Some(k8s_openapi::api::core::v1::ObjectReference {
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            uid: (!uid.is_empty()).then(|| uid.to_string()),
            ..Default::default()
        });
        self
    }
    /// spec.volumeMode.
    pub fn volume_mode(mut self, mode: &str) -> Self {
        self.spec().volume_mode = Some(mode.into());
        self
    }
    /// spec.volumeAttributesClassName.
    pub fn volume_attributes_class(mut self, class: &str) -> Self {
        self.spec().volume_attributes_class_name = Some(class.into());
        self
    }
    /// An annotation.
    pub fn annotation(mut self, k: &str, v: &str) -> Self {
        set_annotation(&mut self.0.metadata, k, v);
        self
    }
    /// metadata.resourceVersion.
    pub fn resource_version(mut self, rv: &str) -> Self {
        self.0.metadata.resource_version = Some(rv.into());
        self
    }
    /// metadata.uid.
    pub fn uid(mut self, uid: &str) -> Self {
        self.0.metadata.uid = Some(uid.into());
        self
    }
    /// metadata.deletionTimestamp.
    pub fn deleting(mut self) -> Self {
        self.0.metadata.deletion_timestamp = Some(deletion_now());
        self
    }
}

impl PvcBuilder {
    /// resources.requests.storage.
    pub fn request(mut self, size: &str) -> Self {
        self.spec()
            .resources
            .get_or_insert_with(Default::default)
            .requests
            .get_or_insert_with(BTreeMap::new)
            .insert("storage".into(), Quantity(size.into()));
        self
    }
    /// Fully bound to a PV: spec.volumeName plus the PV controller's bind-completed annotation.
    pub fn bound(self, pv: &str) -> Self {
        self.volume_name(pv)
            .annotation("pv.kubernetes.io/bind-completed", "yes")
    }
    /// The scheduler's selected-node annotation.
    pub fn selected_node(self, node: &str) -> Self {
        self.annotation("volume.kubernetes.io/selected-node", node)
    }
    /// An annotation.
    pub fn annotation(mut self, k: &str, v: &str) -> Self {
        set_annotation(&mut self.0.metadata, k, v);
        self
    }
    /// status.phase.
    pub fn phase(mut self, phase: &str) -> Self {
        self.0.status.get_or_insert_with(Default::default).phase = Some(phase.into());
        self
    }
    /// spec.selector.matchLabels entry.
    pub fn selector_label(mut self, k: &str, v: &str) -> Self {
        self.spec()
            .selector
            .get_or_insert_with(Default::default)
            .match_labels
            .get_or_insert_with(BTreeMap::new)
            .insert(k.into(), v.into());
        self
    }
    /// spec.volumeMode.
    pub fn volume_mode(mut self, mode: &str) -> Self {
        self.spec().volume_mode = Some(mode.into());
        self
    }
    /// spec.volumeAttributesClassName.
    pub fn volume_attributes_class(mut self, class: &str) -> Self {
        self.spec().volume_attributes_class_name = Some(class.into());
        self
    }
    /// metadata.uid.
    pub fn uid(mut self, uid: &str) -> Self {
        self.0.metadata.uid = Some(uid.into());
        self
    }
    /// metadata.resourceVersion.
    pub fn resource_version(mut self, rv: &str) -> Self {
        self.0.metadata.resource_version = Some(rv.into());
        self
    }
    /// metadata.deletionTimestamp.
    pub fn deleting(mut self) -> Self {
        self.0.metadata.deletion_timestamp = Some(deletion_now());
        self
    }
}

/// A CSIStorageCapacity in "default"; `topology` None leaves nodeTopology unset (reachable from no
/// node), `Some(&[])` is the empty selector (every node).
pub fn csi_storage_capacity(
    name: &str,
    class: &str,
    capacity: Option<&str>,
    maximum_volume_size: Option<&str>,
    topology: Option<&[(&str, &str)]>,
) -> k8s_openapi::api::storage::v1::CSIStorageCapacity {
    k8s_openapi::api::storage::v1::CSIStorageCapacity {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".to_string()),
            ..Default::default()
        },
        storage_class_name: class.into(),
        capacity: capacity.map(|c| Quantity(c.into())),
        maximum_volume_size: maximum_volume_size.map(|c| Quantity(c.into())),
        node_topology: topology.map(
            |labels| k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                match_labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
        ),
    }
}
