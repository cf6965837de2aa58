//! `NodeInfo`: a node and the aggregate of the pods on it (requested resources, host ports, images,
//! PVC references), kept incrementally as pods are added and removed, like kube-scheduler's cache.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};

use crate::labels::Labels;
use crate::resource::Resource;
use crate::snapshot::pod_info::PodInfo;

/// The bind-all host IP.
pub const DEFAULT_BIND_ALL_HOST_IP: &str = "0.0.0.0";

/// Host ports in use on a node: IP → {(protocol, port)} (Go's `HostPortInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostPortInfo {
    ports: HashMap<String, BTreeSet<(String, i32)>>,
}

fn sanitize(ip: &str, protocol: &str) -> (String, String) {
    let ip = if ip.is_empty() {
        DEFAULT_BIND_ALL_HOST_IP
    } else {
        ip
    };
    let protocol = if protocol.is_empty() { "TCP" } else { protocol };
    (ip.to_string(), protocol.to_string())
}

impl HostPortInfo {
    /// Records a port.
    pub fn add(&mut self, ip: &str, protocol: &str, port: i32) {
        if port <= 0 {
            return;
        }
        let (ip, protocol) = sanitize(ip, protocol);
        self.ports.entry(ip).or_default().insert((protocol, port));
    }

    /// Releases a port.
    pub fn remove(&mut self, ip: &str, protocol: &str, port: i32) {
        if port <= 0 {
            return;
        }
        let (ip, protocol) = sanitize(ip, protocol);
        if let Some(set) = self.ports.get_mut(&ip) {
            set.remove(&(protocol, port));
            if set.is_empty() {
                self.ports.remove(&ip);
            }
        }
    }

    /// Number of (ip, protocol, port) entries.
    pub fn len(&self) -> usize {
        self.ports.values().map(BTreeSet::len).sum()
    }

    /// True when no port is used.
    pub fn is_empty(&self) -> bool {
        self.ports.is_empty()
    }

    /// Go's `CheckConflict`: 0.0.0.0 conflicts with any IP; a specific IP with itself and 0.0.0.0.
    pub fn check_conflict(&self, ip: &str, protocol: &str, port: i32) -> bool {
        if port <= 0 {
            return false;
        }
        let (ip, protocol) = sanitize(ip, protocol);
        let key = (protocol, port);
        if ip == DEFAULT_BIND_ALL_HOST_IP {
            return self.ports.values().any(|s| s.contains(&key));
        }
        [DEFAULT_BIND_ALL_HOST_IP, ip.as_str()]
            .iter()
            .any(|k| self.ports.get(*k).is_some_and(|s| s.contains(&key)))
    }
}

// A pod's host ports are the pod's (`pod_info`); a node keeps the ones in use.
pub use crate::snapshot::pod_info::HostPort;

/// `namespace/claimName` of each PVC volume of the pod (Go's `PodPVCKeys`).
pub fn pod_pvc_keys(pod: &Pod) -> impl Iterator<Item = String> + '_ {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("");
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(move |c| format!("{}/{}", ns, c.claim_name))
}

/// An image on a node: its size and how many nodes of the snapshot have it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageStateSummary {
    /// Size in bytes.
    pub size: i64,
    /// Number of nodes in the snapshot with this image.
    pub num_nodes: usize,
}

/// A node and the pods on it.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    /// The node.
    pub node: Arc<Node>,
    /// Pods on the node (assigned via spec.nodeName), terminating ones included.
    pub pods: Vec<Arc<PodInfo>>,
    /// The subset of `pods` with pod affinity or anti-affinity.
    pub pods_with_affinity: Vec<Arc<PodInfo>>,
    /// The subset of `pods` with required anti-affinity.
    pub pods_with_required_anti_affinity: Vec<Arc<PodInfo>>,
    /// Host ports in use.
    pub used_ports: HostPortInfo,
    /// Sum of the pods' requests.
    pub requested: Resource,
    /// Sum of the pods' requests with the 100m / 200Mi defaults for containers without requests.
    pub non_zero_requested: Resource,
    /// `status.allocatable`.
    pub allocatable: Resource,
    /// Images present on the node, by every name they are known by. Shared: it never changes after
    /// the snapshot is built, and a NodeInfo is copied for every node with nominated pods.
    pub image_states: Arc<super::NameMap<ImageStateSummary>>,
    /// `namespace/name` of PVCs used by pods on the node → number of pods using them.
    pub pvc_ref_counts: HashMap<String, i32>,
}

impl NodeInfo {
    /// A node without pods.
    pub fn new(node: Arc<Node>) -> Self {
        let allocatable = node
            .status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .map(Resource::from_list)
            .unwrap_or_default();
        NodeInfo {
            node,
            pods: Vec::new(),
            pods_with_affinity: Vec::new(),
            pods_with_required_anti_affinity: Vec::new(),
            used_ports: HostPortInfo::default(),
            requested: Resource::default(),
            non_zero_requested: Resource::default(),
            allocatable,
            image_states: Arc::default(),
            pvc_ref_counts: HashMap::new(),
        }
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.node.metadata.name.as_deref().unwrap_or("")
    }

    /// `metadata.labels` (empty when unset).
    pub fn labels(&self) -> &Labels {
        static EMPTY: Labels = BTreeMap::new();
        self.node.metadata.labels.as_ref().unwrap_or(&EMPTY)
    }

    /// Adds a pod and its resources, ports and PVC references.
    pub fn add_pod(&mut self, pod: Arc<PodInfo>) {
        if pod.has_affinity() {
            self.pods_with_affinity.push(pod.clone());
        }
        if pod.has_required_anti_affinity() {
            self.pods_with_required_anti_affinity.push(pod.clone());
        }
        self.update(&pod, 1);
        self.pods.push(pod);
    }

    /// Removes a pod (matched by namespace/name); returns it if it was there.
    pub fn remove_pod(&mut self, pod: &PodInfo) -> Option<Arc<PodInfo>> {
        let same = |p: &Arc<PodInfo>| p.namespace() == pod.namespace() && p.name() == pod.name();
        self.pods_with_affinity.retain(|p| !same(p));
        self.pods_with_required_anti_affinity.retain(|p| !same(p));
        let idx = self.pods.iter().position(same)?;
        let removed = self.pods.swap_remove(idx);
        self.update(&removed, -1);
        Some(removed)
    }

    fn update(&mut self, pod: &PodInfo, sign: i64) {
        let r = &pod.resource;
        // Saturating, as `Resource::add_resource` (Go's int64 wraps): absurd requests in a
        // hand-written file must not overflow. Like Go's NodeInfo.update, the pod count is not summed.
        let add = |sum: &mut i64, v: i64| *sum = sum.saturating_add(v.saturating_mul(sign));
        add(&mut self.requested.milli_cpu, r.resource.milli_cpu);
        add(&mut self.requested.memory, r.resource.memory);
        add(
            &mut self.requested.ephemeral_storage,
            r.resource.ephemeral_storage,
        );
        for (k, v) in &r.resource.scalar_resources {
            add(self.requested.scalar_resources.entry(k.clone()).or_insert(0), *v);
        }
        add(&mut self.non_zero_requested.milli_cpu, r.non_zero_cpu);
        add(&mut self.non_zero_requested.memory, r.non_zero_mem);
        for (ip, protocol, port) in &pod.host_ports {
            if sign > 0 {
                self.used_ports.add(ip, protocol, *port);
            } else {
                self.used_ports.remove(ip, protocol, *port);
            }
        }
        for key in pod_pvc_keys(&pod.pod) {
            let count = self.pvc_ref_counts.entry(key.clone()).or_insert(0);
            *count += if sign > 0 { 1 } else { -1 };
            if *count <= 0 {
                self.pvc_ref_counts.remove(&key);
            }
        }
    }
}
