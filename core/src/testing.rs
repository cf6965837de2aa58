//! Test builders: `pod("p").cpu("500m").node("n1")`, `node("n1").cpu("4").memory("8Gi")`, and
//! `snapshot(nodes, pods)`. Used by unit tests across the crate and by benchmarks (feature `testing`).

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
