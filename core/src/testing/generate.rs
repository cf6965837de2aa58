//! A deterministic synthetic cluster for benchmarks and scale tests: nodes in zones and pools (some
//! tainted, some cordoned), workloads of replicated pods with requests, labels, owner references,
//! services and PDBs, and a share of pods with pod (anti-)affinity, node affinity, topology spread,
//! host ports, sidecars, init containers, GPUs and PVCs. A share of pods is left pending.
//!
//! With `realistic`, objects also carry what `kubectl get -o json` prints but the scheduler never
//! reads (env, probes, volume mounts, container statuses, managedFields on a few), so file sizes and
//! pruning costs match real clusters.
//!
//! The same parameters always give the same objects (a tiny SplitMix64 generator, no `rand`).

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec, StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::{
    Affinity, CSIPersistentVolumeSource, Container, ContainerImage, ContainerPort, ContainerState,
    ContainerStateRunning, ContainerStatus, EnvVar, HTTPGetAction, Namespace, Node, NodeAddress,
    NodeAffinity, NodeCondition, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, NodeSpec,
    NodeStatus, NodeSystemInfo, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimStatus, PersistentVolumeClaimVolumeSource, PersistentVolumeSpec,
    PersistentVolumeStatus, Pod, PodAffinityTerm, PodAntiAffinity, PodCondition, PodIP, PodSpec, PodStatus,
    PodTemplateSpec, Probe, ProjectedVolumeSource, ResourceRequirements, Service,
    ServiceAccountTokenProjection, ServicePort, ServiceSpec, Taint, Toleration, TopologySpreadConstraint,
    Volume, VolumeMount, VolumeNodeAffinity, VolumeProjection, VolumeResourceRequirements,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{
    CSIDriver, CSIDriverSpec, CSINode, CSINodeDriver, CSINodeSpec, StorageClass, VolumeNodeResources,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    FieldsV1, LabelSelector, ManagedFieldsEntry, ObjectMeta, OwnerReference, Time,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use serde::ser::SerializeSeq;
use serde::{Serialize, Serializer};

use crate::snapshot::ClusterObjects;
use crate::snapshot::Prune;

/// What to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerateParams {
    /// Number of nodes.
    pub nodes: usize,
    /// Number of pods (bound and pending).
    pub pods: usize,
    /// Number of zones (`topology.kubernetes.io/zone`).
    pub zones: usize,
    /// PRNG seed.
    pub seed: u64,
    /// Percent of pods left pending (no `nodeName`).
    pub pending_percent: u64,
    /// Adds the fields real clusters carry that the scheduler ignores.
    pub realistic: bool,
    /// Team namespaces the workloads spread over; `None`: one per 1,500 pods (1 to 200).
    pub namespaces: Option<usize>,
}

impl Default for GenerateParams {
    fn default() -> Self {
        GenerateParams {
            nodes: 100,
            pods: 3_000,
            zones: 3,
            seed: 1,
            pending_percent: 2,
            realistic: true,
            namespaces: None,
        }
    }
}

impl GenerateParams {
    /// `nodes` nodes and `pods` pods in `zones` zones, other parameters default.
    pub fn new(nodes: usize, pods: usize, zones: usize, seed: u64) -> Self {
        GenerateParams {
            nodes,
            pods,
            zones,
            seed,
            ..Default::default()
        }
    }
}

/// SplitMix64: tiny, fast, and good enough for synthetic data.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when n is 0).
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// True with probability `percent`/100.
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

/// One generated object.
#[derive(Debug, Clone)]
pub enum Generated {
    /// A namespace.
    Namespace(Namespace),
    /// A priority class.
    PriorityClass(PriorityClass),
    /// A storage class.
    StorageClass(StorageClass),
    /// A CSI driver.
    CSIDriver(CSIDriver),
    /// A node.
    Node(Node),
    /// A CSINode.
    CSINode(CSINode),
    /// A ReplicaSet.
    ReplicaSet(ReplicaSet),
    /// A StatefulSet.
    StatefulSet(StatefulSet),
    /// A service.
    Service(Service),
    /// A PDB.
    PodDisruptionBudget(PodDisruptionBudget),
    /// A PV.
    PersistentVolume(PersistentVolume),
    /// A PVC.
    PersistentVolumeClaim(PersistentVolumeClaim),
    /// A pod.
    Pod(Pod),
}

impl Serialize for Generated {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Generated::Namespace(o) => o.serialize(s),
            Generated::PriorityClass(o) => o.serialize(s),
            Generated::StorageClass(o) => o.serialize(s),
            Generated::CSIDriver(o) => o.serialize(s),
            Generated::Node(o) => o.serialize(s),
            Generated::CSINode(o) => o.serialize(s),
            Generated::ReplicaSet(o) => o.serialize(s),
            Generated::StatefulSet(o) => o.serialize(s),
            Generated::Service(o) => o.serialize(s),
            Generated::PodDisruptionBudget(o) => o.serialize(s),
            Generated::PersistentVolume(o) => o.serialize(s),
            Generated::PersistentVolumeClaim(o) => o.serialize(s),
            Generated::Pod(o) => o.serialize(s),
        }
    }
}

impl Generated {
    fn store(self, objects: &mut ClusterObjects) {
        match self {
            Generated::Namespace(o) => objects.namespaces.push(o),
            Generated::PriorityClass(o) => objects.priority_classes.push(o),
            Generated::StorageClass(o) => objects.storage_classes.push(o),
            Generated::CSIDriver(o) => objects.csi_drivers.push(o),
            Generated::Node(o) => objects.nodes.push(o),
            Generated::CSINode(o) => objects.csi_nodes.push(o),
            Generated::ReplicaSet(o) => objects.replica_sets.push(o),
            Generated::StatefulSet(o) => objects.stateful_sets.push(o),
            Generated::Service(o) => objects.services.push(o),
            Generated::PodDisruptionBudget(o) => objects.pod_disruption_budgets.push(o),
            Generated::PersistentVolume(o) => objects.persistent_volumes.push(o),
            Generated::PersistentVolumeClaim(o) => objects.persistent_volume_claims.push(o),
            Generated::Pod(o) => objects.pods.push(o),
        }
    }
}

/// Generates the whole cluster in memory (not pruned).
pub fn generate(params: &GenerateParams) -> ClusterObjects {
    let mut objects = ClusterObjects::default();
    for_each_object(params, |o| o.store(&mut objects));
    objects
}

/// Generates the cluster and prunes it, as the loaders would store it.
pub fn generate_pruned(params: &GenerateParams) -> ClusterObjects {
    let mut objects = generate(params);
    objects.prune();
    objects
}

/// Writes the cluster as one JSON `kind: List` (kubectl's indentation) without holding the pods in
/// memory; returns the number of bytes written.
pub fn write_json_list(params: &GenerateParams, path: &Path) -> io::Result<u64> {
    let file = std::fs::File::create(path)?;
    let mut writer = io::BufWriter::with_capacity(1 << 20, file);
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut writer, formatter);
    StreamedList(params)
        .serialize(&mut ser)
        .map_err(io::Error::other)?;
    io::Write::flush(&mut writer)?;
    drop(writer);
    Ok(std::fs::metadata(path)?.len())
}

struct StreamedList<'a>(&'a GenerateParams);
struct StreamedItems<'a>(&'a GenerateParams);

impl Serialize for StreamedItems<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        let mut failure = None;
        for_each_object(self.0, |o| {
            if failure.is_none()
                && let Err(e) = seq.serialize_element(&o)
            {
                failure = Some(e);
            }
        });
        if let Some(e) = failure {
            return Err(e);
        }
        seq.end()
    }
}

impl Serialize for StreamedList<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(4))?;
        map.serialize_entry("apiVersion", "v1")?;
        map.serialize_entry("items", &StreamedItems(self.0))?;
        map.serialize_entry("kind", "List")?;
        map.serialize_entry("metadata", &BTreeMap::from([("resourceVersion", "")]))?;
        map.end()
    }
}

// ---------------------------------------------------------------------------------------------------

const CSI_DRIVER: &str = "csi.example.com";
const STORAGE_CLASS: &str = "standard-wffc";
const GPU: &str = "nvidia.com/gpu";
const BASE_TIME: i64 = 1_760_000_000;

fn time(offset_seconds: i64) -> Time {
    Time(Timestamp::from_second(BASE_TIME + offset_seconds).unwrap_or(Timestamp::UNIX_EPOCH))
}

fn q(s: &str) -> Quantity {
    Quantity(s.to_string())
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn meta(name: &str, namespace: Option<&str>, uid: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: namespace.map(str::to_string),
        uid: Some(uid.to_string()),
        resource_version: Some("1".into()),
        creation_timestamp: Some(time(0)),
        ..Default::default()
    }
}

fn uid(prefix: &str, n: usize) -> String {
    format!("{prefix:0>8}-0000-4000-8000-{n:012}")
}

fn zone_name(z: usize) -> String {
    format!("zone-{}", (b'a' + (z % 26) as u8) as char)
}

struct Pool {
    name: &'static str,
    cpu: &'static str,
    memory: &'static str,
    gpus: u32,
}

const POOLS: &[Pool] = &[
    Pool {
        name: "general-8",
        cpu: "7910m",
        memory: "28Gi",
        gpus: 0,
    },
    Pool {
        name: "general-16",
        cpu: "15890m",
        memory: "58Gi",
        gpus: 0,
    },
    Pool {
        name: "memory-32",
        cpu: "31850m",
        memory: "240Gi",
        gpus: 0,
    },
    Pool {
        name: "gpu-8",
        cpu: "7910m",
        memory: "58Gi",
        gpus: 4,
    },
];

fn pool_of(i: usize, rng_value: u64) -> &'static Pool {
    // ~5% GPU nodes, the rest split across the general pools; the node index keeps it stable.
    let _ = i;
    match rng_value % 100 {
        0..=4 => &POOLS[3],
        5..=44 => &POOLS[0],
        45..=84 => &POOLS[1],
        _ => &POOLS[2],
    }
}

const IMAGES: &[&str] = &[
    "registry.example.com/app/api",
    "registry.example.com/app/web",
    "registry.example.com/app/worker",
    "registry.example.com/app/cache",
    "registry.example.com/infra/proxy",
    "registry.example.com/infra/log-agent",
    "registry.example.com/infra/metrics",
    "registry.example.com/ml/trainer",
    "registry.example.com/db/postgres",
    "registry.example.com/db/redis",
];

struct NodeFacts {
    name: String,
    zone: usize,
    gpu: bool,
}

fn make_node(i: usize, params: &GenerateParams, rng: &mut Rng) -> (Node, NodeFacts) {
    let name = format!("node-{i:05}");
    let zone = i % params.zones.max(1);
    let pool = pool_of(i, rng.next_u64());
    let mut node_labels = labels(&[
        ("kubernetes.io/hostname", &name),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("topology.kubernetes.io/region", "region-1"),
        ("topology.kubernetes.io/zone", &zone_name(zone)),
        ("node.kubernetes.io/instance-type", pool.name),
        ("pool", pool.name),
    ]);
    if rng.chance(10) {
        node_labels.insert("disktype".into(), "ssd".into());
    }
    let mut taints = Vec::new();
    if pool.gpus > 0 {
        taints.push(Taint {
            key: GPU.into(),
            value: Some("present".into()),
            effect: "NoSchedule".into(),
            time_added: None,
        });
    }
    let cordoned = rng.chance(1);
    if cordoned {
        taints.push(Taint {
            key: "node.kubernetes.io/unschedulable".into(),
            value: None,
            effect: "NoSchedule".into(),
            time_added: Some(time(3600)),
        });
    }
    if rng.chance(2) {
        taints.push(Taint {
            key: "dedicated".into(),
            value: Some("batch".into()),
            effect: "PreferNoSchedule".into(),
            time_added: None,
        });
    }
    let mut allocatable: BTreeMap<String, Quantity> = [
        ("cpu", pool.cpu),
        ("memory", pool.memory),
        ("pods", "110"),
        ("ephemeral-storage", "95Gi"),
        ("hugepages-2Mi", "0"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), q(v)))
    .collect();
    if pool.gpus > 0 {
        allocatable.insert(GPU.into(), q(&pool.gpus.to_string()));
    }
    let images = (0..6)
        .map(|k| {
            let image = IMAGES[(i + k * 3) % IMAGES.len()];
            ContainerImage {
                names: Some(vec![
                    format!("{image}@sha256:{:064x}", (i % 7 + k) as u64 * 0x9e37_79b9),
                    format!("{image}:v1.{}", k % 3),
                ]),
                size_bytes: Some(50_000_000 + (k as i64) * 37_000_000),
            }
        })
        .collect();
    let mut node = Node {
        metadata: ObjectMeta {
            labels: Some(node_labels),
            ..meta(&name, None, &uid("node", i))
        },
        spec: Some(NodeSpec {
            taints: (!taints.is_empty()).then_some(taints),
            unschedulable: cordoned.then_some(true),
            pod_cidr: Some(format!("10.{}.{}.0/24", 64 + i / 256, i % 256)),
            provider_id: Some(format!("example://region-1/{}/{name}", zone_name(zone))),
            ..Default::default()
        }),
        status: Some(NodeStatus {
            capacity: Some(allocatable.clone()),
            allocatable: Some(allocatable),
            images: Some(images),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: Some("KubeletReady".into()),
                message: Some("kubelet is posting ready status".into()),
                last_heartbeat_time: Some(time(7200)),
                last_transition_time: Some(time(60)),
            }]),
            ..Default::default()
        }),
    };
    if params.realistic {
        let m = &mut node.metadata;
        m.annotations = Some(labels(&[
            ("node.alpha.kubernetes.io/ttl", "0"),
            ("volumes.kubernetes.io/controller-managed-attach-detach", "true"),
            (
                "csi.volume.kubernetes.io/nodeid",
                &format!("{{\"{CSI_DRIVER}\":\"{name}\"}}"),
            ),
        ]));
        if let Some(st) = node.status.as_mut() {
            st.addresses = Some(vec![
                NodeAddress {
                    type_: "InternalIP".into(),
                    address: format!("10.0.{}.{}", i / 256, i % 256),
                },
                NodeAddress {
                    type_: "Hostname".into(),
                    address: name.clone(),
                },
            ]);
            st.node_info = Some(NodeSystemInfo {
                architecture: "amd64".into(),
                boot_id: uid("boot", i),
                container_runtime_version: "containerd://2.1.0".into(),
                kernel_version: "6.8.0-1015".into(),
                kube_proxy_version: String::new(),
                kubelet_version: "v1.37.1".into(),
                machine_id: format!("{i:032x}"),
                operating_system: "linux".into(),
                os_image: "Ubuntu 24.04 LTS".into(),
                system_uuid: uid("sys", i),
                ..Default::default()
            });
            if let Some(conds) = st.conditions.as_mut() {
                for (t, reason) in [
                    ("MemoryPressure", "KubeletHasSufficientMemory"),
                    ("DiskPressure", "KubeletHasNoDiskPressure"),
                    ("PIDPressure", "KubeletHasSufficientPID"),
                ] {
                    conds.push(NodeCondition {
                        type_: t.into(),
                        status: "False".into(),
                        reason: Some(reason.into()),
                        message: Some(format!("kubelet reports {t} is False")),
                        last_heartbeat_time: Some(time(7200)),
                        last_transition_time: Some(time(60)),
                    });
                }
            }
        }
    }
    let facts = NodeFacts {
        name,
        zone,
        gpu: pool.gpus > 0,
    };
    (node, facts)
}

fn csi_node(name: &str, i: usize) -> CSINode {
    CSINode {
        metadata: meta(name, None, &uid("csinode", i)),
        spec: CSINodeSpec {
            drivers: vec![CSINodeDriver {
                name: CSI_DRIVER.into(),
                node_id: name.to_string(),
                allocatable: Some(VolumeNodeResources { count: Some(64) }),
                topology_keys: Some(vec!["topology.kubernetes.io/zone".into()]),
            }],
        },
        status: None,
    }
}

/// Traits shared by every replica of one workload.
struct Workload {
    index: usize,
    name: String,
    namespace: String,
    replicas: usize,
    stateful: bool,
    cpu: &'static str,
    memory: &'static str,
    image: &'static str,
    sidecar: bool,
    init: bool,
    gpu: bool,
    zone: Option<usize>,
    hostname_anti_affinity: bool,
    zone_preferred_anti_affinity: bool,
    zone_spread: Option<&'static str>,
    host_port: Option<i32>,
    high_priority: bool,
    pdb: bool,
    /// Where the first replica goes; replicas with hostname anti-affinity take consecutive nodes.
    node_offset: usize,
}

fn make_workload(
    index: usize,
    replicas: usize,
    params: &GenerateParams,
    rng: &mut Rng,
    namespaces: usize,
) -> Workload {
    const CPUS: &[&str] = &["50m", "100m", "100m", "250m", "250m", "500m", "1", "2"];
    const MEMS: &[&str] = &["64Mi", "128Mi", "256Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi"];
    // Replicas with required hostname anti-affinity take consecutive nodes of the whole cluster, so
    // they are kept off the narrower GPU and single-zone placements.
    let hostname_anti_affinity = rng.chance(10);
    let gpu = !hostname_anti_affinity && rng.chance(3);
    let stateful = !gpu && rng.chance(3);
    let zone =
        (!hostname_anti_affinity && rng.chance(5)).then(|| rng.below(params.zones.max(1) as u64) as usize);
    Workload {
        index,
        name: format!("app-{index:05}"),
        namespace: format!("team-{:03}", index % namespaces.max(1)),
        replicas,
        stateful,
        cpu: rng.pick(CPUS),
        memory: rng.pick(MEMS),
        image: rng.pick(IMAGES),
        sidecar: rng.chance(20),
        init: rng.chance(10),
        gpu,
        zone,
        hostname_anti_affinity,
        zone_preferred_anti_affinity: rng.chance(10),
        zone_spread: if rng.chance(15) {
            Some(if rng.chance(50) {
                "DoNotSchedule"
            } else {
                "ScheduleAnyway"
            })
        } else {
            None
        },
        host_port: rng.chance(2).then(|| 9100 + (index % 50) as i32),
        high_priority: rng.chance(10),
        pdb: rng.chance(30),
        node_offset: rng.below(params.nodes.max(1) as u64) as usize,
    }
}

fn selector(w: &Workload) -> LabelSelector {
    LabelSelector {
        match_labels: Some(labels(&[("app", &w.name)])),
        match_expressions: None,
    }
}

fn pod_template(w: &Workload, realistic: bool) -> (ObjectMeta, PodSpec) {
    let mut containers = vec![app_container(w, "main", w.image, w.cpu, w.memory, realistic)];
    if w.sidecar && !realistic {
        // Without noise a sidecar is a plain second container.
        containers.push(app_container(w, "proxy", IMAGES[4], "50m", "64Mi", false));
    }
    if let Some(port) = w.host_port {
        containers[0]
            .ports
            .get_or_insert_with(Vec::new)
            .push(ContainerPort {
                container_port: port,
                host_port: Some(port),
                protocol: Some("TCP".into()),
                name: Some("metrics".into()),
                ..Default::default()
            });
    }
    if w.gpu {
        let r = containers[0].resources.get_or_insert_with(Default::default);
        r.requests
            .get_or_insert_with(BTreeMap::new)
            .insert(GPU.into(), q("1"));
        r.limits
            .get_or_insert_with(BTreeMap::new)
            .insert(GPU.into(), q("1"));
    }
    let mut init_containers = Vec::new();
    if w.init {
        let mut migrate = app_container(w, "migrate", w.image, "200m", "128Mi", realistic);
        // The API server refuses probes on init containers that are not sidecars.
        migrate.liveness_probe = None;
        migrate.readiness_probe = None;
        init_containers.push(migrate);
    }
    if w.sidecar && realistic {
        let mut proxy = app_container(w, "proxy", IMAGES[4], "50m", "64Mi", realistic);
        proxy.restart_policy = Some("Always".into());
        init_containers.push(proxy);
    }
    let mut affinity = Affinity::default();
    if let Some(z) = w.zone {
        affinity.node_affinity = Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement {
                        key: "topology.kubernetes.io/zone".into(),
                        operator: "In".into(),
                        values: Some(vec![zone_name(z)]),
                    }]),
                    match_fields: None,
                }],
            }),
            preferred_during_scheduling_ignored_during_execution: None,
        });
    }
    if w.hostname_anti_affinity || w.zone_preferred_anti_affinity {
        let term = |key: &str| PodAffinityTerm {
            label_selector: Some(selector(w)),
            topology_key: key.into(),
            ..Default::default()
        };
        affinity.pod_anti_affinity = Some(PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: w
                .hostname_anti_affinity
                .then(|| vec![term("kubernetes.io/hostname")]),
            preferred_during_scheduling_ignored_during_execution: w.zone_preferred_anti_affinity.then(|| {
                vec![k8s_openapi::api::core::v1::WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: term("topology.kubernetes.io/zone"),
                }]
            }),
        });
    }
    let mut tolerations = Vec::new();
    if w.gpu {
        tolerations.push(Toleration {
            key: Some(GPU.into()),
            operator: Some("Exists".into()),
            effect: Some("NoSchedule".into()),
            ..Default::default()
        });
    }
    if realistic {
        for key in ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"] {
            tolerations.push(Toleration {
                key: Some(key.into()),
                operator: Some("Exists".into()),
                effect: Some("NoExecute".into()),
                toleration_seconds: Some(300),
                ..Default::default()
            });
        }
    }
    let mut volumes = Vec::new();
    if realistic {
        volumes.push(Volume {
            name: "kube-api-access".into(),
            projected: Some(ProjectedVolumeSource {
                default_mode: Some(420),
                default_user: None,
                sources: Some(vec![VolumeProjection {
                    service_account_token: Some(ServiceAccountTokenProjection {
                        expiration_seconds: Some(3607),
                        path: "token".into(),
                        audience: None,
                        user: None,
                    }),
                    ..Default::default()
                }]),
            }),
            ..Default::default()
        });
    }
    let spec = PodSpec {
        containers,
        init_containers: (!init_containers.is_empty()).then_some(init_containers),
        affinity: (affinity != Affinity::default()).then_some(affinity),
        tolerations: (!tolerations.is_empty()).then_some(tolerations),
        node_selector: w.gpu.then(|| labels(&[("pool", "gpu-8")])),
        topology_spread_constraints: w.zone_spread.map(|when| {
            vec![TopologySpreadConstraint {
                max_skew: 1,
                topology_key: "topology.kubernetes.io/zone".into(),
                when_unsatisfiable: when.into(),
                label_selector: Some(selector(w)),
                ..Default::default()
            }]
        }),
        priority_class_name: w.high_priority.then(|| "high-priority".to_string()),
        priority: Some(if w.high_priority { 1_000_000 } else { 0 }),
        preemption_policy: Some("PreemptLowerPriority".into()),
        scheduler_name: Some("default-scheduler".into()),
        restart_policy: Some("Always".into()),
        termination_grace_period_seconds: Some(30),
        volumes: (!volumes.is_empty()).then_some(volumes),
        dns_policy: realistic.then(|| "ClusterFirst".to_string()),
        service_account_name: realistic.then(|| "default".to_string()),
        enable_service_links: realistic.then_some(true),
        ..Default::default()
    };
    let m = ObjectMeta {
        labels: Some(labels(&[
            ("app", &w.name),
            (
                "tier",
                if w.index.is_multiple_of(3) {
                    "frontend"
                } else {
                    "backend"
                },
            ),
            ("pod-template-hash", &format!("{:010x}", w.index * 7919)),
        ])),
        ..Default::default()
    };
    (m, spec)
}

fn app_container(
    w: &Workload,
    name: &str,
    image: &str,
    cpu: &str,
    memory: &str,
    realistic: bool,
) -> Container {
    let mut c = Container {
        name: name.into(),
        image: Some(format!("{image}:v1.{}", w.index % 3)),
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".into(), q(cpu)),
                ("memory".into(), q(memory)),
            ])),
            limits: Some(BTreeMap::from([("memory".into(), q(memory))])),
            ..Default::default()
        }),
        ..Default::default()
    };
    if realistic {
        c.image_pull_policy = Some("IfNotPresent".into());
        c.command = Some(vec!["/bin/server".into()]);
        c.env = Some(
            [
                ("APP_NAME", w.name.as_str()),
                ("APP_NAMESPACE", w.namespace.as_str()),
                ("LOG_FORMAT", "json"),
            ]
            .iter()
            .map(|(k, v)| EnvVar {
                name: k.to_string(),
                value: Some(v.to_string()),
                value_from: None,
            })
            .collect(),
        );
        c.ports = Some(vec![ContainerPort {
            container_port: 8080,
            name: Some("http".into()),
            protocol: Some("TCP".into()),
            ..Default::default()
        }]);
        let probe = |path: &str| Probe {
            http_get: Some(HTTPGetAction {
                path: Some(path.into()),
                port: IntOrString::Int(8080),
                scheme: Some("HTTP".into()),
                ..Default::default()
            }),
            failure_threshold: Some(3),
            period_seconds: Some(10),
            success_threshold: Some(1),
            timeout_seconds: Some(1),
            ..Default::default()
        };
        c.liveness_probe = Some(probe("/healthz"));
        c.readiness_probe = Some(probe("/readyz"));
        c.termination_message_path = Some("/dev/termination-log".into());
        c.termination_message_policy = Some("File".into());
        c.volume_mounts = Some(vec![VolumeMount {
            name: "kube-api-access".into(),
            mount_path: "/var/run/secrets/kubernetes.io/serviceaccount".into(),
            read_only: Some(true),
            ..Default::default()
        }]);
    }
    c
}

fn owner(kind: &str, name: &str, uid_value: &str, api_version: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid_value.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn managed_fields(realistic_index: usize) -> Vec<ManagedFieldsEntry> {
    let fields = serde_json::json!({
        "f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}},
                       "f:ownerReferences": {".": {}, "k:{\"uid\":\"x\"}": {}}},
        "f:spec": {"f:containers": {"k:{\"name\":\"main\"}": {".": {}, "f:env": {}, "f:image": {},
                   "f:imagePullPolicy": {}, "f:name": {}, "f:ports": {}, "f:resources": {}}},
                   "f:dnsPolicy": {}, "f:restartPolicy": {}, "f:schedulerName": {}}
    });
    vec![ManagedFieldsEntry {
        api_version: Some("v1".into()),
        fields_type: Some("FieldsV1".into()),
        fields_v1: Some(FieldsV1(fields)),
        manager: Some("kube-controller-manager".into()),
        operation: Some("Update".into()),
        time: Some(time(realistic_index as i64 % 1000)),
        subresource: None,
    }]
}

struct Cluster<'a> {
    params: &'a GenerateParams,
    nodes: Vec<NodeFacts>,
    gpu_nodes: Vec<usize>,
    zone_nodes: Vec<Vec<usize>>,
}

impl Cluster<'_> {
    /// Node index for replica `r` of `w`, or None for a pending pod.
    fn place(&self, w: &Workload, r: usize, rng: &mut Rng) -> Option<usize> {
        if self.nodes.is_empty() || rng.chance(self.params.pending_percent) {
            return None;
        }
        let candidates: Option<&[usize]> = if w.gpu {
            Some(&self.gpu_nodes)
        } else {
            w.zone.map(|z| self.zone_nodes[z].as_slice())
        };
        match candidates {
            Some([]) => None,
            Some(list) => Some(list[(w.node_offset + r) % list.len()]),
            None if w.hostname_anti_affinity => Some((w.node_offset + r) % self.nodes.len()),
            None => Some(rng.below(self.nodes.len() as u64) as usize),
        }
    }
}

/// Calls `f` with every object, in a stable order: cluster-scoped objects, nodes, then workloads.
pub fn for_each_object(params: &GenerateParams, mut f: impl FnMut(Generated)) {
    let mut rng = Rng(params.seed ^ 0x005E_ED0F_C1A5);
    let namespaces = params
        .namespaces
        .unwrap_or((params.pods / 1_500).clamp(1, 200))
        .max(1);

    for ns in ["default", "kube-system"]
        .into_iter()
        .map(String::from)
        .chain((0..namespaces).map(|i| format!("team-{i:03}")))
    {
        let uid_value = uid("ns", ns.len());
        f(Generated::Namespace(Namespace {
            metadata: ObjectMeta {
                labels: Some(labels(&[("kubernetes.io/metadata.name", &ns)])),
                ..meta(&ns, None, &uid_value)
            },
            ..Default::default()
        }));
    }
    for (i, (name, value)) in [("high-priority", 1_000_000), ("low-priority", -10)]
        .iter()
        .enumerate()
    {
        f(Generated::PriorityClass(PriorityClass {
            metadata: meta(name, None, &uid("pc", i)),
            value: Some(*value),
            preemption_policy: Some("PreemptLowerPriority".into()),
            ..Default::default()
        }));
    }
    f(Generated::StorageClass(StorageClass {
        metadata: meta(STORAGE_CLASS, None, &uid("sc", 0)),
        provisioner: CSI_DRIVER.into(),
        volume_binding_mode: Some("WaitForFirstConsumer".into()),
        reclaim_policy: Some("Delete".into()),
        ..Default::default()
    }));
    f(Generated::CSIDriver(CSIDriver {
        metadata: meta(CSI_DRIVER, None, &uid("csidriver", 0)),
        spec: CSIDriverSpec {
            attach_required: Some(true),
            storage_capacity: Some(false),
            ..Default::default()
        },
    }));

    let mut cluster = Cluster {
        params,
        nodes: Vec::with_capacity(params.nodes),
        gpu_nodes: Vec::new(),
        zone_nodes: vec![Vec::new(); params.zones.max(1)],
    };
    for i in 0..params.nodes {
        let (node, facts) = make_node(i, params, &mut rng);
        f(Generated::Node(node));
        f(Generated::CSINode(csi_node(&facts.name, i)));
        if facts.gpu {
            cluster.gpu_nodes.push(i);
        }
        cluster.zone_nodes[facts.zone].push(i);
        cluster.nodes.push(facts);
    }

    let mut pod_count = 0;
    let mut workload_index = 0;
    while pod_count < params.pods {
        let replicas = (1 + rng.below(60) as usize).min(params.pods - pod_count);
        let w = make_workload(workload_index, replicas, params, &mut rng, namespaces);
        emit_workload(&w, &cluster, &mut rng, pod_count, &mut f);
        pod_count += replicas;
        workload_index += 1;
    }
}

fn emit_workload(
    w: &Workload,
    cluster: &Cluster<'_>,
    rng: &mut Rng,
    first_pod: usize,
    f: &mut impl FnMut(Generated),
) {
    let realistic = cluster.params.realistic;
    let (template_meta, template_spec) = pod_template(w, realistic);
    let owner_uid = uid("owner", w.index);
    let template = PodTemplateSpec {
        metadata: Some(template_meta.clone()),
        spec: Some(template_spec.clone()),
    };
    let controller_name = if w.stateful {
        w.name.clone()
    } else {
        format!("{}-{:010x}", w.name, w.index * 7919)
    };
    let controller_meta = ObjectMeta {
        labels: Some(labels(&[("app", &w.name)])),
        ..meta(&controller_name, Some(&w.namespace), &owner_uid)
    };
    let owner_ref = if w.stateful {
        f(Generated::StatefulSet(StatefulSet {
            metadata: controller_meta,
            spec: StatefulSetSpec {
                replicas: Some(w.replicas as i32),
                selector: selector(w),
                service_name: Some(w.name.clone()),
                template,
                ..Default::default()
            },
            status: None,
        }));
        owner("StatefulSet", &controller_name, &owner_uid, "apps/v1")
    } else {
        f(Generated::ReplicaSet(ReplicaSet {
            metadata: controller_meta,
            spec: ReplicaSetSpec {
                replicas: Some(w.replicas as i32),
                selector: selector(w),
                template: Some(template),
                ..Default::default()
            },
            status: None,
        }));
        owner("ReplicaSet", &controller_name, &owner_uid, "apps/v1")
    };
    f(Generated::Service(Service {
        metadata: meta(&w.name, Some(&w.namespace), &uid("svc", w.index)),
        spec: Some(ServiceSpec {
            selector: Some(labels(&[("app", &w.name)])),
            ports: Some(vec![ServicePort {
                port: 80,
                target_port: Some(IntOrString::Int(8080)),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            type_: Some("ClusterIP".into()),
            ..Default::default()
        }),
        status: None,
    }));
    if w.pdb {
        f(Generated::PodDisruptionBudget(PodDisruptionBudget {
            metadata: meta(&w.name, Some(&w.namespace), &uid("pdb", w.index)),
            spec: Some(PodDisruptionBudgetSpec {
                max_unavailable: Some(IntOrString::Int(1)),
                selector: Some(selector(w)),
                ..Default::default()
            }),
            status: Some(PodDisruptionBudgetStatus {
                current_healthy: Some(w.replicas as i32),
                desired_healthy: Some(w.replicas.saturating_sub(1) as i32),
                disruptions_allowed: Some(1),
                expected_pods: Some(w.replicas as i32),
                ..Default::default()
            }),
        }));
    }

    for r in 0..w.replicas {
        let n = first_pod + r;
        let pod_name = if w.stateful {
            format!("{}-{r}", w.name)
        } else {
            format!("{controller_name}-{:05x}", (n * 2_654_435_761) & 0xfffff)
        };
        let node = cluster.place(w, r, rng);
        let mut spec = template_spec.clone();
        spec.node_name = node.map(|i| cluster.nodes[i].name.clone());
        if w.stateful {
            let claim = format!("data-{pod_name}");
            spec.volumes.get_or_insert_with(Vec::new).push(Volume {
                name: "data".into(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: claim.clone(),
                    read_only: None,
                }),
                ..Default::default()
            });
            emit_volume(w, &claim, node.map(|i| &cluster.nodes[i]), n, f);
        }
        let mut metadata = ObjectMeta {
            labels: template_meta.labels.clone(),
            owner_references: Some(vec![owner_ref.clone()]),
            generate_name: (!w.stateful).then(|| format!("{controller_name}-")),
            ..meta(&pod_name, Some(&w.namespace), &uid("pod", n))
        };
        let bound = node.is_some();
        let mut status = PodStatus {
            phase: Some(if bound { "Running" } else { "Pending" }.into()),
            qos_class: Some("Burstable".into()),
            ..Default::default()
        };
        if bound {
            status.start_time = Some(time(100 + (n % 5000) as i64));
            status.conditions = Some(vec![PodCondition {
                type_: "PodScheduled".into(),
                status: "True".into(),
                last_transition_time: Some(time(100)),
                ..Default::default()
            }]);
        } else {
            status.conditions = Some(vec![PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: Some("Unschedulable".into()),
                message: Some("0/1 nodes are available: 1 Insufficient cpu.".into()),
                last_transition_time: Some(time(100)),
                ..Default::default()
            }]);
            if rng.chance(10) && !cluster.nodes.is_empty() {
                let nominated = rng.below(cluster.nodes.len() as u64) as usize;
                status.nominated_node_name = Some(cluster.nodes[nominated].name.clone());
            }
        }
        if realistic {
            metadata.annotations = Some(labels(&[
                ("kubectl.kubernetes.io/restartedAt", "2025-10-09T08:00:00Z"),
                ("prometheus.io/scrape", "true"),
                ("prometheus.io/port", "8080"),
            ]));
            if n.is_multiple_of(20) {
                metadata.managed_fields = Some(managed_fields(n));
            }
            if bound {
                add_status_noise(&mut status, &spec, n);
            }
        }
        f(Generated::Pod(Pod {
            metadata,
            spec: Some(spec),
            status: Some(status),
        }));
    }
}

fn add_status_noise(status: &mut PodStatus, spec: &PodSpec, n: usize) {
    let ip = format!("10.{}.{}.{}", 64 + (n >> 16) % 64, (n >> 8) % 256, n % 256);
    status.pod_ip = Some(ip.clone());
    status.pod_ips = Some(vec![PodIP { ip }]);
    status.host_ip = Some(format!("10.0.{}.{}", (n >> 8) % 256, n % 256));
    if let Some(conds) = status.conditions.as_mut() {
        for t in [
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
        ] {
            conds.push(PodCondition {
                type_: t.into(),
                status: "True".into(),
                last_transition_time: Some(time(130)),
                ..Default::default()
            });
        }
    }
    status.container_statuses = Some(
        spec.containers
            .iter()
            .map(|c| ContainerStatus {
                name: c.name.clone(),
                image: c.image.clone().unwrap_or_default(),
                image_id: format!("{}@sha256:{:064x}", c.image.as_deref().unwrap_or(""), n),
                container_id: Some(format!("containerd://{n:064x}")),
                ready: true,
                started: Some(true),
                restart_count: (n % 3) as i32,
                state: Some(ContainerState {
                    running: Some(ContainerStateRunning {
                        started_at: Some(time(120)),
                    }),
                    ..Default::default()
                }),
                allocated_resources: c.resources.as_ref().and_then(|r| r.requests.clone()),
                resources: c.resources.clone(),
                ..Default::default()
            })
            .collect(),
    );
}

fn emit_volume(w: &Workload, claim: &str, node: Option<&NodeFacts>, n: usize, f: &mut impl FnMut(Generated)) {
    let pv_name = format!("pvc-{}", uid("vol", n));
    // Bound pods have a provisioned, bound volume in their node's zone; pending pods an unbound claim.
    let bound = node.is_some();
    let mut claim_meta = meta(claim, Some(&w.namespace), &uid("pvc", n));
    let mut annotations = BTreeMap::from([
        (
            "volume.kubernetes.io/storage-provisioner".to_string(),
            CSI_DRIVER.to_string(),
        ),
        (
            "volume.beta.kubernetes.io/storage-provisioner".to_string(),
            CSI_DRIVER.to_string(),
        ),
    ]);
    if let Some(node) = node {
        annotations.insert("pv.kubernetes.io/bind-completed".into(), "yes".into());
        annotations.insert("volume.kubernetes.io/selected-node".into(), node.name.clone());
    }
    claim_meta.annotations = Some(annotations);
    f(Generated::PersistentVolumeClaim(PersistentVolumeClaim {
        metadata: claim_meta,
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: Some(STORAGE_CLASS.into()),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".into(), q("10Gi"))])),
                limits: None,
            }),
            volume_name: bound.then(|| pv_name.clone()),
            volume_mode: Some("Filesystem".into()),
            ..Default::default()
        }),
        status: Some(PersistentVolumeClaimStatus {
            phase: Some(if bound { "Bound" } else { "Pending" }.into()),
            ..Default::default()
        }),
    }));
    let Some(node) = node else { return };
    f(Generated::PersistentVolume(PersistentVolume {
        metadata: ObjectMeta {
            annotations: Some(labels(&[("pv.kubernetes.io/provisioned-by", CSI_DRIVER)])),
            ..meta(&pv_name, None, &uid("pv", n))
        },
        spec: Some(PersistentVolumeSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            capacity: Some(BTreeMap::from([("storage".into(), q("10Gi"))])),
            claim_ref: Some(k8s_openapi::api::core::v1::ObjectReference {
                kind: Some("PersistentVolumeClaim".into()),
                namespace: Some(w.namespace.clone()),
                name: Some(claim.to_string()),
                uid: Some(uid("pvc", n)),
                api_version: Some("v1".into()),
                ..Default::default()
            }),
            csi: Some(CSIPersistentVolumeSource {
                driver: CSI_DRIVER.into(),
                volume_handle: format!("vol-{n}"),
                fs_type: Some("ext4".into()),
                ..Default::default()
            }),
            node_affinity: Some(VolumeNodeAffinity {
                required: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_expressions: Some(vec![NodeSelectorRequirement {
                            key: "topology.kubernetes.io/zone".into(),
                            operator: "In".into(),
                            values: Some(vec![zone_name(node.zone)]),
                        }]),
                        match_fields: None,
                    }],
                }),
            }),
            persistent_volume_reclaim_policy: Some("Delete".into()),
            storage_class_name: Some(STORAGE_CLASS.into()),
            volume_mode: Some("Filesystem".into()),
            ..Default::default()
        }),
        status: Some(PersistentVolumeStatus {
            phase: Some("Bound".into()),
            ..Default::default()
        }),
    }));
}

/// Prunes a generated object list in place (for comparisons with what loaders store).
pub fn prune_all<T: Prune>(items: &mut [T]) {
    items.iter_mut().for_each(Prune::prune);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_cluster_other_seed_differs() {
        let p = GenerateParams::new(20, 300, 3, 7);
        let a = generate(&p);
        let b = generate(&p);
        assert_eq!(a.pods, b.pods);
        assert_eq!(a.nodes, b.nodes);
        let c = generate(&GenerateParams { seed: 8, ..p });
        assert_ne!(a.pods, c.pods);
    }

    #[test]
    fn counts_zones_and_features() {
        let p = GenerateParams::new(60, 3_000, 3, 1);
        let objects = generate(&p);
        assert_eq!(objects.nodes.len(), 60);
        assert_eq!(objects.csi_nodes.len(), 60);
        assert_eq!(objects.pods.len(), 3_000);
        let zones: std::collections::BTreeSet<_> = objects
            .nodes
            .iter()
            .filter_map(|n| {
                n.metadata
                    .labels
                    .as_ref()?
                    .get("topology.kubernetes.io/zone")
                    .cloned()
            })
            .collect();
        assert_eq!(zones.len(), 3);
        let spec = |p: &Pod| p.spec.clone().unwrap_or_default();
        let pending = objects
            .pods
            .iter()
            .filter(|p| spec(p).node_name.is_none())
            .count();
        assert!(pending > 0 && pending < 300, "pending {pending}");
        assert!(
            objects
                .pods
                .iter()
                .any(|p| spec(p).affinity.is_some_and(|a| a.pod_anti_affinity.is_some()))
        );
        assert!(
            objects
                .pods
                .iter()
                .any(|p| spec(p).topology_spread_constraints.is_some())
        );
        assert!(objects.pods.iter().any(|p| {
            spec(p)
                .containers
                .iter()
                .any(|c| c.ports.iter().flatten().any(|port| port.host_port.is_some()))
        }));
        assert!(
            objects
                .nodes
                .iter()
                .any(|n| n.spec.as_ref().is_some_and(|s| s.taints.is_some()))
        );
        assert!(!objects.replica_sets.is_empty() && !objects.services.is_empty());
        // Every claim a pod names exists.
        for p in &objects.pods {
            for v in spec(p).volumes.iter().flatten() {
                if let Some(c) = &v.persistent_volume_claim {
                    assert!(
                        objects
                            .persistent_volume_claims
                            .iter()
                            .any(|pvc| pvc.metadata.name.as_deref() == Some(&c.claim_name))
                    );
                }
            }
        }
    }

    #[test]
    fn hostname_anti_affinity_replicas_land_on_distinct_nodes() {
        let objects = generate(&GenerateParams::new(80, 2_000, 4, 3));
        let mut by_app: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for p in &objects.pods {
            let spec = p.spec.as_ref().unwrap();
            let required = spec
                .affinity
                .as_ref()
                .and_then(|a| a.pod_anti_affinity.as_ref())
                .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())
                .is_some();
            if let (true, Some(node)) = (required, &spec.node_name) {
                let app = p.metadata.labels.as_ref().unwrap()["app"].clone();
                by_app.entry(app).or_default().push(node.clone());
            }
        }
        assert!(!by_app.is_empty());
        for (app, nodes) in by_app {
            let distinct: std::collections::BTreeSet<_> = nodes.iter().collect();
            assert_eq!(distinct.len(), nodes.len(), "{app}");
        }
    }
}
