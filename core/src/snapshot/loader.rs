//! Loading [`ClusterObjects`] from a file, and writing them back as one `kind: List`.
//!
//! Accepted input, JSON or YAML (told apart by the first non-blank character):
//! - a `kind: List` whose items mix kinds, as `kubectl get nodes,pods,... -A -o yaml|json` prints it;
//! - a typed list as the API server returns it (`kind: PodList`, items without apiVersion/kind);
//! - several documents (YAML `---` separated, or concatenated JSON values), each a List or one object;
//! - a single object.
//!
//! Objects are dispatched on apiVersion + kind into the typed k8s-openapi objects of `ClusterObjects`;
//! other kinds are skipped and counted in the [`LoadReport`]. Every stored object is pruned of what the
//! scheduler never reads ([`Prune`]), which keeps a 150,000-pod snapshot small in memory.
//!
//! JSON is the fast path: the file is split into raw item slices without building a value tree, and
//! items are decoded straight into typed objects in parallel. YAML goes through one small value tree
//! per item, sequentially (serde_yaml has no borrowed raw values), so large snapshots should be JSON.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, PodSpec,
    PodStatus, PodTemplateSpec, ReplicationController, ResourceRequirements, Service, Volume,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rayon::prelude::*;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;

use super::{ClusterObjects, PodDetail, PodPlace, Snapshot};

// ---------------------------------------------------------------------------------------------------
// Report and errors
// ---------------------------------------------------------------------------------------------------

/// The two input formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// JSON (one value or several concatenated).
    Json,
    /// YAML (one or more documents).
    Yaml,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Json => "JSON",
            Format::Yaml => "YAML",
        })
    }
}

/// What a load read, besides the objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadReport {
    /// The format the file was read as.
    pub format: Format,
    /// Documents (top-level values) in the file, empty YAML documents included.
    pub documents: usize,
    /// Objects stored in the `ClusterObjects`.
    pub objects: usize,
    /// Objects of kinds the engine does not use, by `Kind (apiVersion)`, e.g. `Deployment (apps/v1)`.
    pub skipped: BTreeMap<String, usize>,
}

impl LoadReport {
    fn new(format: Format) -> Self {
        LoadReport {
            format,
            documents: 0,
            objects: 0,
            skipped: BTreeMap::new(),
        }
    }

    /// How many objects were skipped in all.
    pub fn skipped_total(&self) -> usize {
        self.skipped.values().sum()
    }

    /// One line per skipped kind, for the CLI to print as warnings.
    pub fn warnings(&self) -> Vec<String> {
        self.skipped
            .iter()
            .map(|(kind, n)| format!("skipped {n} object(s) of kind {kind}: not used by the scheduler"))
            .collect()
    }

    fn skip(&mut self, api_version: Option<&str>, kind: &str) {
        let key = format!("{kind} ({})", api_version.unwrap_or("no apiVersion"));
        *self.skipped.entry(key).or_insert(0) += 1;
    }
}

/// Where in a file something is: `document[d].items[i]`, plus the line and column when known.
///
/// Indices are 0-based (as in a JSON path); line and column are 1-based (as editors show them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Location {
    /// Index of the document (top-level value) in the file.
    pub document: usize,
    /// Index within the document's `items` when the document is a List.
    pub item: Option<usize>,
    /// 1-based line.
    pub line: Option<usize>,
    /// 1-based column.
    pub column: Option<usize>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "document[{}]", self.document)?;
        if let Some(i) = self.item {
            write!(f, ".items[{i}]")?;
        }
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, " (line {l}, column {c})"),
            (Some(l), None) => write!(f, " (line {l})"),
            _ => Ok(()),
        }
    }
}

/// Why a snapshot file could not be loaded. Every variant names the file; all but `Io` say where.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The text is not well-formed JSON/YAML (or not UTF-8).
    #[error("{}: {at}: malformed {format}: {message}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The format the file was read as.
        format: Format,
        /// Where the parser stopped.
        at: Location,
        /// The parser's message (without its own position suffix).
        message: String,
    },
    /// A document or item is not an object with a kind (e.g. a bare string, or no `kind` field).
    #[error("{}: {at}: {message}", path.display())]
    Shape {
        /// The file.
        path: PathBuf,
        /// The document or item.
        at: Location,
        /// What is wrong.
        message: String,
    },
    /// An object of a known kind does not match its schema (e.g. a string where a number belongs).
    #[error(transparent)]
    Decode(Box<DecodeError>),
}

/// An object of a known kind that does not match its schema.
#[derive(Debug, thiserror::Error)]
#[error("{}: {at}: {kind} {}: {message}", path.display(), name.as_deref().unwrap_or("(unnamed)"))]
pub struct DecodeError {
    /// The file.
    pub path: PathBuf,
    /// The object, and the offending position when the parser reports one.
    pub at: Location,
    /// The object's apiVersion.
    pub api_version: String,
    /// The object's kind.
    pub kind: String,
    /// `namespace/name` or `name`, when the object has one.
    pub name: Option<String>,
    /// The decoder's message, prefixed with the field path when known.
    pub message: String,
}

/// Splits serde's "... at line L column C" suffix off a message.
fn strip_position(message: &str) -> String {
    if let Some(i) = message.rfind(" at line ") {
        let tail = &message[i + " at line ".len()..];
        let well_formed = tail
            .split_once(" column ")
            .is_some_and(|(l, c)| l.parse::<usize>().is_ok() && c.parse::<usize>().is_ok());
        if well_formed {
            return message[..i].to_string();
        }
    }
    message.to_string()
}

// ---------------------------------------------------------------------------------------------------
// Pruning
// ---------------------------------------------------------------------------------------------------

/// Annotation key prefixes the engine reads (volume binding, storage classes, CSI migration, DRA
/// extended resources, scheduler hints); every other annotation is dropped.
pub const KEPT_ANNOTATION_PREFIXES: &[&str] = &[
    "volume.kubernetes.io/",
    "volume.beta.kubernetes.io/",
    "pv.kubernetes.io/",
    "scheduler.alpha.kubernetes.io/",
    "scheduler.kubernetes.io/",
    "storage.alpha.kubernetes.io/",
    "storageclass.kubernetes.io/",
    "storageclass.beta.kubernetes.io/",
    "resource.kubernetes.io/",
];

/// True for an annotation the engine may read.
pub fn keep_annotation(key: &str) -> bool {
    KEPT_ANNOTATION_PREFIXES.iter().any(|p| key.starts_with(p))
}

/// Drops managedFields and annotations no plugin reads. Labels, owner references, uid,
/// resourceVersion and timestamps stay (selectors, controllers, preconditions, preemption order).
pub fn prune_metadata(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.retain(|k, _| keep_annotation(k));
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
}

/// Keeps only what scheduling reads of a container: name, image (ImageLocality), host ports
/// (NodePorts), resources, and the restart policy that makes an init container a sidecar.
pub fn prune_container(c: &mut Container) {
    let Container {
        name,
        image,
        ports,
        resources,
        restart_policy,
        restart_policy_rules,
        ..
    } = std::mem::take(c);
    let ports = ports
        .map(|ps| {
            ps.into_iter()
                .filter(|p| p.host_port.is_some_and(|hp| hp > 0))
                .collect::<Vec<_>>()
        })
        .filter(|ps| !ps.is_empty());
    let resources = resources.map(without_limits);
    *c = Container {
        name,
        image,
        ports,
        resources,
        restart_policy,
        restart_policy_rules,
        ..Default::default()
    };
}

/// True for volume types no plugin looks at: service-account tokens and other projections, config
/// maps, secrets, downward API and emptyDir (its size limit is not a request).
fn is_scheduling_irrelevant_volume(v: &Volume) -> bool {
    v.projected.is_some()
        || v.config_map.is_some()
        || v.secret.is_some()
        || v.downward_api.is_some()
        || v.empty_dir.is_some()
}

/// Prunes a pod spec: containers as in [`prune_container`], volumes no plugin looks at (see
/// `is_scheduling_irrelevant_volume`), ephemeral containers and the fields only the kubelet reads
/// (DNS, service account, security context, host aliases, pull secrets, readiness gates) dropped.
/// Every scheduling field stays. Vectors of large structs are shrunk to fit: a pod's containers and
/// volumes are most of its memory.
pub fn prune_pod_spec(spec: &mut PodSpec) {
    for c in spec.containers.iter_mut() {
        prune_container(c);
    }
    spec.containers.shrink_to_fit();
    if let Some(init) = spec.init_containers.as_mut() {
        init.iter_mut().for_each(prune_container);
        init.shrink_to_fit();
    }
    if let Some(volumes) = spec.volumes.as_mut() {
        volumes.retain(|v| !is_scheduling_irrelevant_volume(v));
        volumes.shrink_to_fit();
        if volumes.is_empty() {
            spec.volumes = None;
        }
    }
    spec.ephemeral_containers = None;
    spec.automount_service_account_token = None;
    spec.dns_config = None;
    spec.dns_policy = None;
    spec.enable_service_links = None;
    spec.host_aliases = None;
    spec.hostname = None;
    spec.hostname_override = None;
    spec.image_pull_secrets = None;
    spec.readiness_gates = None;
    spec.security_context = None;
    spec.service_account = None;
    spec.service_account_name = None;
    spec.set_hostname_as_fqdn = None;
    spec.share_process_namespace = None;
    spec.subdomain = None;
}

fn prune_container_status(cs: &mut ContainerStatus) {
    let ContainerStatus {
        name,
        allocated_resources,
        resources,
        ..
    } = std::mem::take(cs);
    *cs = ContainerStatus {
        name,
        allocated_resources,
        resources: resources.map(without_limits),
        ..Default::default()
    };
}

/// Container limits only matter to the kubelet (and to alpha DRA node-allocatable resources, off in
/// v1.37); scheduling reads requests. Pod-level limits (`spec.resources`) are kept.
fn without_limits(r: ResourceRequirements) -> ResourceRequirements {
    ResourceRequirements { limits: None, ..r }
}

/// Pod conditions something reads: PodScheduled (the last scheduling message), the in-place resize
/// conditions (requests), DisruptionTarget (preemption skips pods already being disrupted).
const KEPT_POD_CONDITIONS: &[&str] = &[
    "PodScheduled",
    "PodResizePending",
    "PodResizeInProgress",
    "DisruptionTarget",
];

/// Keeps of a pod's status: phase, the conditions in `KEPT_POD_CONDITIONS`,
/// nominatedNodeName, startTime (preemption order), the container statuses' allocated/actual
/// resources and the pod-level ones (in-place resize), and DRA claim statuses.
pub fn prune_pod_status(status: &mut PodStatus) {
    let PodStatus {
        phase,
        conditions,
        nominated_node_name,
        start_time,
        mut container_statuses,
        mut init_container_statuses,
        allocated_resources,
        resources,
        resize,
        resource_claim_statuses,
        extended_resource_claim_status,
        ..
    } = std::mem::take(status);
    for cs in container_statuses
        .iter_mut()
        .flatten()
        .chain(init_container_statuses.iter_mut().flatten())
    {
        prune_container_status(cs);
    }
    let conditions = conditions
        .map(|mut cs| {
            cs.retain(|c| KEPT_POD_CONDITIONS.contains(&c.type_.as_str()));
            cs.shrink_to_fit();
            cs
        })
        .filter(|cs| !cs.is_empty());
    *status = PodStatus {
        phase,
        conditions,
        nominated_node_name,
        start_time,
        container_statuses,
        init_container_statuses,
        allocated_resources,
        resources,
        resize,
        resource_claim_statuses,
        extended_resource_claim_status,
        ..Default::default()
    };
}

/// Prunes a pod: metadata, spec and status as above. Container statuses that cannot change the
/// pod's requests (allocated and actual requests both absent or equal to the spec's, and no
/// infeasible resize) are dropped too: requests then fall back to the spec, with the same result.
pub fn prune_pod(pod: &mut Pod) {
    prune_metadata(&mut pod.metadata);
    if let Some(spec) = pod.spec.as_mut() {
        prune_pod_spec(spec);
    }
    if let Some(status) = pod.status.as_mut() {
        prune_pod_status(status);
    }
    drop_redundant_container_statuses(pod);
}

fn drop_redundant_container_statuses(pod: &mut Pod) {
    let Pod { spec, status, .. } = pod;
    let (Some(spec), Some(status)) = (spec.as_ref(), status.as_mut()) else {
        return;
    };
    let resize_infeasible = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodResizePending")
        .is_some_and(|c| c.reason.as_deref() == Some("Infeasible"));
    if resize_infeasible {
        return;
    }
    let spec_requests = |name: &str| {
        spec.containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .find(|c| c.name == name)
            .map(|c| c.resources.as_ref().and_then(|r| r.requests.as_ref()))
    };
    let redundant = |cs: &ContainerStatus| {
        // A status naming no container of the spec is kept: its lookup order matters in Go.
        let Some(spec_req) = spec_requests(&cs.name) else {
            return false;
        };
        let allocated_same = cs.allocated_resources.is_none() || cs.allocated_resources.as_ref() == spec_req;
        let actual = cs.resources.as_ref().and_then(|r| r.requests.as_ref());
        let actual_same = actual.is_none() || actual == spec_req;
        allocated_same && actual_same
    };
    for list in [
        &mut status.container_statuses,
        &mut status.init_container_statuses,
    ] {
        if let Some(statuses) = list.as_mut() {
            statuses.retain(|cs| !redundant(cs));
            statuses.shrink_to_fit();
            if statuses.is_empty() {
                *list = None;
            }
        }
    }
}

/// Prunes a node: metadata, and the status parts only the kubelet or controllers use (node info,
/// daemon endpoints, attached volumes, config). Allocatable, capacity, images, conditions and
/// declared features stay.
pub fn prune_node(node: &mut Node) {
    prune_metadata(&mut node.metadata);
    if let Some(status) = node.status.as_mut() {
        status.node_info = None;
        status.daemon_endpoints = None;
        status.volumes_attached = None;
        status.volumes_in_use = None;
        status.config = None;
    }
}

fn prune_template(t: &mut PodTemplateSpec) {
    if let Some(meta) = t.metadata.as_mut() {
        prune_metadata(meta);
    }
    if let Some(spec) = t.spec.as_mut() {
        prune_pod_spec(spec);
    }
}

/// Removes what the scheduler never reads from a stored object.
pub trait Prune {
    /// Prunes in place. Idempotent: pruning twice equals pruning once.
    fn prune(&mut self);
}

impl Prune for Pod {
    fn prune(&mut self) {
        prune_pod(self);
    }
}

impl Prune for Node {
    fn prune(&mut self) {
        prune_node(self);
    }
}

impl Prune for ReplicaSet {
    fn prune(&mut self) {
        prune_metadata(&mut self.metadata);
        if let Some(t) = self.spec.template.as_mut() {
            prune_template(t);
        }
    }
}

impl Prune for ReplicationController {
    fn prune(&mut self) {
        prune_metadata(&mut self.metadata);
        if let Some(t) = self.spec.as_mut().and_then(|s| s.template.as_mut()) {
            prune_template(t);
        }
    }
}

impl Prune for StatefulSet {
    fn prune(&mut self) {
        prune_metadata(&mut self.metadata);
        prune_template(&mut self.spec.template);
        for claim in self.spec.volume_claim_templates.iter_mut().flatten() {
            prune_metadata(&mut claim.metadata);
        }
    }
}

macro_rules! prune_metadata_only {
    ($($ty:ty),* $(,)?) => {$(
        impl Prune for $ty {
            fn prune(&mut self) {
                prune_metadata(&mut self.metadata);
            }
        }
    )*};
}

prune_metadata_only!(
    Namespace,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    CSINode,
    CSIDriver,
    CSIStorageCapacity,
    PodDisruptionBudget,
    PriorityClass,
    Service,
    ResourceClaim,
);

impl ClusterObjects {
    /// Prunes every object (see [`Prune`]).
    pub fn prune(&mut self) {
        fn all<T: Prune>(v: &mut [T]) {
            v.iter_mut().for_each(Prune::prune);
        }
        all(&mut self.nodes);
        all(&mut self.pods);
        all(&mut self.namespaces);
        all(&mut self.persistent_volumes);
        all(&mut self.persistent_volume_claims);
        all(&mut self.storage_classes);
        all(&mut self.csi_nodes);
        all(&mut self.csi_drivers);
        all(&mut self.csi_storage_capacities);
        all(&mut self.pod_disruption_budgets);
        all(&mut self.priority_classes);
        all(&mut self.services);
        all(&mut self.replication_controllers);
        all(&mut self.replica_sets);
        all(&mut self.stateful_sets);
        all(&mut self.resource_claims);
    }

    /// Total number of objects.
    pub fn len(&self) -> usize {
        ObjectKind::ALL.iter().map(|k| k.count(self)).sum::<usize>() + self.placed_pods.len()
    }

    /// True when there are no objects at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

// ---------------------------------------------------------------------------------------------------
// Pruning while decoding
// ---------------------------------------------------------------------------------------------------

/// Which parts of a value to decode. Skipped parts are consumed at parser speed without allocating,
/// which is most of the time and memory a large snapshot would otherwise cost; [`Prune`] still runs
/// after decoding for what a shape cannot express (e.g. ports without a host port).
#[derive(Clone, Copy)]
enum Shape {
    /// Decode the whole value.
    Keep,
    /// Skip the value.
    Drop,
    /// An object (or each object of an array): listed fields get their own shape; the rest are
    /// decoded whole when `others` is `Keep`, skipped when it is `Drop`.
    Object {
        fields: &'static [(&'static str, Shape)],
        others_kept: bool,
    },
    /// A string map of which only the keys passing the predicate are decoded (annotations).
    Keys(fn(&str) -> bool),
}

impl Shape {
    /// The shape of a field, or `None` to skip it.
    fn child(self, key: &str) -> Option<Shape> {
        match self {
            Shape::Keep => Some(Shape::Keep),
            Shape::Drop => None,
            Shape::Object { fields, others_kept } => match fields.iter().find(|(k, _)| *k == key) {
                Some((_, Shape::Drop)) => None,
                Some((_, s)) => Some(*s),
                None => others_kept.then_some(Shape::Keep),
            },
            Shape::Keys(keep) => keep(key).then_some(Shape::Keep),
        }
    }
}

mod shapes {
    use super::{Shape, keep_annotation};

    const fn keep_listed(fields: &'static [(&'static str, Shape)]) -> Shape {
        Shape::Object {
            fields,
            others_kept: true,
        }
    }

    const fn only(fields: &'static [(&'static str, Shape)]) -> Shape {
        Shape::Object {
            fields,
            others_kept: false,
        }
    }

    const K: Shape = Shape::Keep;
    const D: Shape = Shape::Drop;

    pub(super) const META: Shape = keep_listed(&[
        ("managedFields", D),
        ("annotations", Shape::Keys(keep_annotation)),
    ]);

    /// Mirrors `prune_container` (ports are filtered afterwards).
    const CONTAINER: Shape = only(&[
        ("name", K),
        ("image", K),
        ("ports", K),
        ("resources", NO_LIMITS),
        ("restartPolicy", K),
        ("restartPolicyRules", K),
    ]);

    const ITEMS_DROPPED: Shape = keep_listed(&[("items", D)]);

    /// Mirrors `prune_volume`.
    const VOLUME: Shape = keep_listed(&[
        ("projected", keep_listed(&[("sources", D)])),
        ("configMap", ITEMS_DROPPED),
        ("secret", ITEMS_DROPPED),
        ("downwardAPI", ITEMS_DROPPED),
    ]);

    /// Mirrors `prune_pod_spec`.
    const POD_SPEC: Shape = keep_listed(&[
        ("containers", CONTAINER),
        ("initContainers", CONTAINER),
        ("volumes", VOLUME),
        ("ephemeralContainers", D),
        ("automountServiceAccountToken", D),
        ("dnsConfig", D),
        ("dnsPolicy", D),
        ("enableServiceLinks", D),
        ("hostAliases", D),
        ("hostname", D),
        ("hostnameOverride", D),
        ("imagePullSecrets", D),
        ("readinessGates", D),
        ("securityContext", D),
        ("serviceAccount", D),
        ("serviceAccountName", D),
        ("setHostnameAsFQDN", D),
        ("shareProcessNamespace", D),
        ("subdomain", D),
    ]);

    const NO_LIMITS: Shape = keep_listed(&[("limits", D)]);

    const CONTAINER_STATUS: Shape = only(&[("name", K), ("allocatedResources", K), ("resources", NO_LIMITS)]);

    /// Mirrors `prune_pod_status`.
    const POD_STATUS: Shape = only(&[
        ("phase", K),
        ("conditions", K),
        ("nominatedNodeName", K),
        ("startTime", K),
        ("containerStatuses", CONTAINER_STATUS),
        ("initContainerStatuses", CONTAINER_STATUS),
        ("allocatedResources", K),
        ("resources", K),
        ("resize", K),
        ("resourceClaimStatuses", K),
        ("extendedResourceClaimStatus", K),
    ]);

    pub(super) const POD: Shape =
        keep_listed(&[("metadata", META), ("spec", POD_SPEC), ("status", POD_STATUS)]);

    /// Mirrors `prune_node`.
    pub(super) const NODE: Shape = keep_listed(&[
        ("metadata", META),
        (
            "status",
            keep_listed(&[
                ("nodeInfo", D),
                ("daemonEndpoints", D),
                ("volumesAttached", D),
                ("volumesInUse", D),
                ("config", D),
            ]),
        ),
    ]);

    const TEMPLATE: Shape = keep_listed(&[("metadata", META), ("spec", POD_SPEC)]);

    /// ReplicaSets and ReplicationControllers.
    pub(super) const WITH_TEMPLATE: Shape = keep_listed(&[
        ("metadata", META),
        ("spec", keep_listed(&[("template", TEMPLATE)])),
    ]);

    pub(super) const STATEFUL_SET: Shape = keep_listed(&[
        ("metadata", META),
        (
            "spec",
            keep_listed(&[
                ("template", TEMPLATE),
                ("volumeClaimTemplates", keep_listed(&[("metadata", META)])),
            ]),
        ),
    ]);

    pub(super) const METADATA_ONLY: Shape = keep_listed(&[("metadata", META)]);
}

/// A deserializer that hides the parts of the input a [`Shape`] skips.
struct Filter<D> {
    de: D,
    shape: Shape,
}

/// A visitor that keeps filtering below the value it visits.
struct FilterVisitor<V> {
    visitor: V,
    shape: Shape,
}

struct FilterSeed<S> {
    seed: S,
    shape: Shape,
}

struct FilterSeq<A> {
    seq: A,
    shape: Shape,
}

struct FilterMap<A> {
    map: A,
    shape: Shape,
    value_shape: Shape,
}

/// A map key, borrowed from the input when possible.
enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key::Borrowed(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v.to_string()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v.to_string()))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

impl Key<'_> {
    fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(s) => s,
            Key::Owned(s) => s,
        }
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for FilterMap<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        while let Some(key) = self.map.next_key::<Key<'de>>()? {
            match self.shape.child(key.as_str()) {
                None => {
                    self.map.next_value::<IgnoredAny>()?;
                }
                Some(shape) => {
                    self.value_shape = shape;
                    return match key {
                        Key::Borrowed(s) => seed
                            .deserialize(de::value::BorrowedStrDeserializer::<A::Error>::new(s))
                            .map(Some),
                        Key::Owned(s) => seed
                            .deserialize(de::value::StringDeserializer::<A::Error>::new(s))
                            .map(Some),
                    };
                }
            }
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        match self.value_shape {
            Shape::Keep => self.map.next_value_seed(seed),
            shape => self.map.next_value_seed(FilterSeed { seed, shape }),
        }
    }
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for FilterSeq<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, A::Error> {
        self.seq.next_element_seed(FilterSeed {
            seed,
            shape: self.shape,
        })
    }

    fn size_hint(&self) -> Option<usize> {
        self.seq.size_hint()
    }
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for FilterSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.seed.deserialize(Filter {
            de: d,
            shape: self.shape,
        })
    }
}

macro_rules! forward_visits {
    ($($method:ident($ty:ty)),* $(,)?) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
            self.visitor.$method(v)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for FilterVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.visitor.expecting(f)
    }

    forward_visits!(
        visit_bool(bool),
        visit_i8(i8),
        visit_i16(i16),
        visit_i32(i32),
        visit_i64(i64),
        visit_i128(i128),
        visit_u8(u8),
        visit_u16(u16),
        visit_u32(u32),
        visit_u64(u64),
        visit_u128(u128),
        visit_f32(f32),
        visit_f64(f64),
        visit_char(char),
        visit_str(&str),
        visit_borrowed_str(&'de str),
        visit_string(String),
        visit_bytes(&[u8]),
        visit_borrowed_bytes(&'de [u8]),
        visit_byte_buf(Vec<u8>),
    );

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.visitor.visit_some(Filter {
            de: d,
            shape: self.shape,
        })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.visitor.visit_newtype_struct(Filter {
            de: d,
            shape: self.shape,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_seq(FilterSeq {
            seq,
            shape: self.shape,
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_map(FilterMap {
            map,
            shape: self.shape,
            value_shape: Shape::Keep,
        })
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_enum(data)
    }
}

macro_rules! forward_deserialize {
    ($($method:ident($($arg:ident: $ty:ty),*)),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
            self.de.$method($($arg,)* FilterVisitor { visitor, shape: self.shape })
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Filter<D> {
    type Error = D::Error;

    forward_deserialize!(
        deserialize_any(),
        deserialize_bool(),
        deserialize_i8(),
        deserialize_i16(),
        deserialize_i32(),
        deserialize_i64(),
        deserialize_i128(),
        deserialize_u8(),
        deserialize_u16(),
        deserialize_u32(),
        deserialize_u64(),
        deserialize_u128(),
        deserialize_f32(),
        deserialize_f64(),
        deserialize_char(),
        deserialize_str(),
        deserialize_string(),
        deserialize_bytes(),
        deserialize_byte_buf(),
        deserialize_option(),
        deserialize_unit(),
        deserialize_unit_struct(name: &'static str),
        deserialize_newtype_struct(name: &'static str),
        deserialize_seq(),
        deserialize_tuple(len: usize),
        deserialize_tuple_struct(name: &'static str, len: usize),
        deserialize_map(),
        deserialize_struct(name: &'static str, fields: &'static [&'static str]),
        deserialize_enum(name: &'static str, variants: &'static [&'static str]),
        deserialize_identifier(),
        deserialize_ignored_any(),
    );

    fn is_human_readable(&self) -> bool {
        self.de.is_human_readable()
    }
}

/// Decodes `T` from `de`, skipping what `shape` drops.
fn decode_shaped<'de, T: Deserialize<'de>, D: Deserializer<'de>>(de: D, shape: Shape) -> Result<T, D::Error> {
    T::deserialize(Filter { de, shape })
}

// ---------------------------------------------------------------------------------------------------
// Kinds
// ---------------------------------------------------------------------------------------------------

macro_rules! object_kinds {
    ($( $variant:ident($ty:ty) = $api:literal, $kind:literal => $field:ident, $shape:expr; )*) => {
        /// The kinds a `ClusterObjects` holds.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ObjectKind {
            $(
                #[doc = concat!("`", $api, "` `", $kind, "`.")]
                $variant,
            )*
        }

        impl ObjectKind {
            /// Every kind, in `ClusterObjects` field order.
            pub const ALL: &'static [ObjectKind] = &[$(ObjectKind::$variant),*];

            /// The kind stored for an apiVersion and kind, if any.
            pub fn lookup(api_version: &str, kind: &str) -> Option<ObjectKind> {
                match (api_version, kind) {
                    $(($api, $kind) => Some(ObjectKind::$variant),)*
                    _ => None,
                }
            }

            /// The kind named `kind` when an object carries no apiVersion.
            fn lookup_kind(kind: &str) -> Option<ObjectKind> {
                match kind {
                    $($kind => Some(ObjectKind::$variant),)*
                    _ => None,
                }
            }

            /// apiVersion, e.g. `policy/v1`.
            pub fn api_version(self) -> &'static str {
                match self { $(ObjectKind::$variant => $api,)* }
            }

            /// Kind, e.g. `PodDisruptionBudget`.
            pub fn kind(self) -> &'static str {
                match self { $(ObjectKind::$variant => $kind,)* }
            }

            /// How many objects of this kind `objects` holds.
            pub fn count(self, objects: &ClusterObjects) -> usize {
                match self { $(ObjectKind::$variant => objects.$field.len(),)* }
            }

            /// Decodes JSON items of this kind in parallel into `objects` (appending, in order).
            /// `Err(())` when any fails; the caller then finds the first failure sequentially.
            fn decode_json(self, items: &[RawItem<'_>], objects: &mut ClusterObjects) -> Result<(), ()> {
                match self {
                    $(ObjectKind::$variant => {
                        let decoded = decode_json_items::<$ty>(items, $shape)?;
                        objects.$field.extend(decoded);
                    })*
                }
                Ok(())
            }

            /// Decodes one JSON text as this kind, tracking the field path of an error.
            fn check_json(self, text: &str) -> Result<(), serde_path_to_error::Error<serde_json::Error>> {
                let mut de = serde_json::Deserializer::from_str(text);
                match self {
                    $(ObjectKind::$variant => {
                        serde_path_to_error::deserialize::<_, $ty>(Filter { de: &mut de, shape: $shape }).map(drop)
                    })*
                }
            }

            /// Converts a YAML value to this kind, prunes it and stores it.
            fn store_yaml(self, value: serde_yaml::Value, objects: &mut ClusterObjects) -> Result<(), serde_yaml::Error> {
                match self {
                    $(ObjectKind::$variant => {
                        let mut o: $ty = decode_shaped(value, $shape)?;
                        o.prune();
                        objects.$field.push(o);
                    })*
                }
                Ok(())
            }

            /// Deserializes this kind straight from a deserializer and drops it (to locate errors).
            fn check<'de, D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
                match self {
                    $(ObjectKind::$variant => decode_shaped::<$ty, D>(d, $shape).map(drop),)*
                }
            }
        }

        /// Writes every object, kind by kind, as elements of one sequence.
        fn serialize_items<S: SerializeSeq>(objects: &ClusterObjects, seq: &mut S) -> Result<(), S::Error> {
            $(for o in &objects.$field { seq.serialize_element(o)?; })*
            Ok(())
        }
    };
}

object_kinds! {
    Node(Node) = "v1", "Node" => nodes, shapes::NODE;
    Pod(Pod) = "v1", "Pod" => pods, shapes::POD;
    Namespace(Namespace) = "v1", "Namespace" => namespaces, shapes::METADATA_ONLY;
    PersistentVolume(PersistentVolume) = "v1", "PersistentVolume" => persistent_volumes, shapes::METADATA_ONLY;
    PersistentVolumeClaim(PersistentVolumeClaim) = "v1", "PersistentVolumeClaim" => persistent_volume_claims,
        shapes::METADATA_ONLY;
    StorageClass(StorageClass) = "storage.k8s.io/v1", "StorageClass" => storage_classes, shapes::METADATA_ONLY;
    CSINode(CSINode) = "storage.k8s.io/v1", "CSINode" => csi_nodes, shapes::METADATA_ONLY;
    CSIDriver(CSIDriver) = "storage.k8s.io/v1", "CSIDriver" => csi_drivers, shapes::METADATA_ONLY;
    CSIStorageCapacity(CSIStorageCapacity) = "storage.k8s.io/v1", "CSIStorageCapacity" => csi_storage_capacities,
        shapes::METADATA_ONLY;
    PodDisruptionBudget(PodDisruptionBudget) = "policy/v1", "PodDisruptionBudget" => pod_disruption_budgets,
        shapes::METADATA_ONLY;
    PriorityClass(PriorityClass) = "scheduling.k8s.io/v1", "PriorityClass" => priority_classes, shapes::METADATA_ONLY;
    Service(Service) = "v1", "Service" => services, shapes::METADATA_ONLY;
    ReplicationController(ReplicationController) = "v1", "ReplicationController" => replication_controllers,
        shapes::WITH_TEMPLATE;
    ReplicaSet(ReplicaSet) = "apps/v1", "ReplicaSet" => replica_sets, shapes::WITH_TEMPLATE;
    StatefulSet(StatefulSet) = "apps/v1", "StatefulSet" => stateful_sets, shapes::STATEFUL_SET;
    ResourceClaim(ResourceClaim) = "resource.k8s.io/v1", "ResourceClaim" => resource_claims, shapes::METADATA_ONLY;
}

impl ObjectKind {
    fn index(self) -> usize {
        ObjectKind::ALL.iter().position(|k| *k == self).unwrap_or(0)
    }
}

/// How an object's type is resolved: its own apiVersion/kind, or the element type of a typed list
/// (`PodList` items carry neither).
fn resolve_kind(api_version: Option<&str>, kind: Option<&str>, default: Option<(&str, &str)>) -> Resolved {
    match (api_version, kind) {
        (Some(a), Some(k)) => match ObjectKind::lookup(a, k) {
            Some(known) => Resolved::Known(known),
            None => Resolved::Skip,
        },
        (None, Some(k)) => match default {
            Some((a, dk)) if dk == k => match ObjectKind::lookup(a, k) {
                Some(known) => Resolved::Known(known),
                None => Resolved::Skip,
            },
            _ => ObjectKind::lookup_kind(k).map_or(Resolved::Skip, Resolved::Known),
        },
        (_, None) => match default {
            Some((a, k)) => ObjectKind::lookup(a, k).map_or(Resolved::Skip, Resolved::Known),
            None => Resolved::NoKind,
        },
    }
}

enum Resolved {
    Known(ObjectKind),
    Skip,
    NoKind,
}

/// `PodList` → `Some(("v1", "Pod"))`; `List` and other kinds → `None`.
fn list_element_type<'a>(api_version: Option<&'a str>, kind: Option<&'a str>) -> Option<(&'a str, &'a str)> {
    let element = kind?.strip_suffix("List")?;
    if element.is_empty() {
        return None;
    }
    Some((api_version.unwrap_or("v1"), element))
}

// ---------------------------------------------------------------------------------------------------
// Entry points
// ---------------------------------------------------------------------------------------------------

/// Reads a snapshot file (JSON or YAML). Objects are pruned.
///
/// JSON files are streamed: read and decoded chunk by chunk, in parallel, so memory holds the pruned
/// objects plus one chunk. Anything the streaming reader does not handle (an error in the file, a
/// typed list whose items carry no kind) makes it start over reading the whole file exactly.
pub fn load_file(path: impl AsRef<Path>) -> Result<(ClusterObjects, LoadReport), LoadError> {
    load_file_with(path, &PodDetail::Full)
}

/// [`load_file`], keeping pods on nodes only as much as `detail` says. With
/// [`PodDetail::CompactPlaced`] a large JSON file never holds all its pods' container specs at once.
pub fn load_file_with(
    path: impl AsRef<Path>,
    detail: &PodDetail,
) -> Result<(ClusterObjects, LoadReport), LoadError> {
    let path = path.as_ref();
    let io_error = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    if sniff_json(path).map_err(io_error)?
        && let Ok(loaded) = stream_json_file(path, CHUNK, detail)
    {
        return Ok(loaded);
    }
    let bytes = std::fs::read(path).map_err(io_error)?;
    let (mut objects, report) = load_bytes(&bytes, path)?;
    detail.compact(&mut objects.pods, &mut objects.placed_pods);
    Ok((objects, report))
}

/// True when the file's first significant byte opens a JSON object.
fn sniff_json(path: &Path) -> io::Result<bool> {
    use std::io::Read;
    let mut head = Vec::with_capacity(4096);
    std::fs::File::open(path)?.take(4096).read_to_end(&mut head)?;
    Ok(first_significant(&head) == Some(b'{'))
}

/// Reads a snapshot from memory; `origin` names it in errors (a path, or `-` for stdin).
pub fn load_bytes(bytes: &[u8], origin: &Path) -> Result<(ClusterObjects, LoadReport), LoadError> {
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let (line, column) = line_column(bytes, e.valid_up_to());
            let format = if first_significant(bytes).is_some_and(|b| b == b'{' || b == b'[') {
                Format::Json
            } else {
                Format::Yaml
            };
            return Err(LoadError::Syntax {
                path: origin.to_path_buf(),
                format,
                at: Location {
                    document: 0,
                    item: None,
                    line: Some(line),
                    column: Some(column),
                },
                message: format!("invalid UTF-8 at byte {}", e.valid_up_to()),
            });
        }
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    match first_significant(text.as_bytes()) {
        Some(b'{') | Some(b'[') => load_json(text, origin),
        _ => load_yaml(text, origin),
    }
}

impl Snapshot {
    /// Loads a snapshot file and builds the `Snapshot`; the report lists skipped kinds.
    pub fn from_file(path: impl AsRef<Path>) -> Result<(Snapshot, LoadReport), LoadError> {
        let (objects, report) = load_file(path)?;
        Ok((Snapshot::new(objects), report))
    }
}

fn first_significant(bytes: &[u8]) -> Option<u8> {
    let bytes = bytes.strip_prefix("\u{feff}".as_bytes()).unwrap_or(bytes);
    bytes.iter().copied().find(|b| !b.is_ascii_whitespace())
}

/// 1-based line and column (in characters) of a byte offset.
fn line_column(bytes: &[u8], offset: usize) -> (usize, usize) {
    let offset = offset.min(bytes.len());
    let before = &bytes[..offset];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let line_start = before.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let column = String::from_utf8_lossy(&before[line_start..]).chars().count() + 1;
    (line, column)
}

fn display_name(namespace: Option<&str>, name: Option<&str>) -> Option<String> {
    match (namespace.filter(|n| !n.is_empty()), name) {
        (Some(ns), Some(n)) => Some(format!("{ns}/{n}")),
        (None, Some(n)) => Some(n.to_string()),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------------------------------

/// A top-level JSON value, read without decoding its items.
#[derive(Deserialize)]
struct JsonDoc<'a> {
    #[serde(rename = "apiVersion", default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default, borrow)]
    items: Option<Vec<&'a RawValue>>,
}

/// One object's text, with its place in the file.
#[derive(Clone, Copy)]
struct RawItem<'a> {
    document: usize,
    item: Option<usize>,
    text: &'a str,
    kind: ObjectKind,
}

/// Decodes one JSON item (the fields `shape` skips at parser speed) and prunes it.
fn decode_json_item<T>(item: &RawItem<'_>, shape: Shape) -> Result<T, ()>
where
    T: serde::de::DeserializeOwned + Prune,
{
    let mut de = serde_json::Deserializer::from_str(item.text);
    let mut o: T = decode_shaped(&mut de, shape).map_err(drop)?;
    de.end().map_err(drop)?;
    o.prune();
    Ok(o)
}

fn decode_json_items<T>(items: &[RawItem<'_>], shape: Shape) -> Result<Vec<T>, ()>
where
    T: serde::de::DeserializeOwned + Prune + Send,
{
    items
        .par_iter()
        .with_min_len(32)
        .map(|it| decode_json_item(it, shape))
        .collect()
}

/// Decodes JSON pods in parallel, each placed as `detail` says as soon as it is decoded (see
/// [`PodDetail::place`]), appending to `objects.pods` and `objects.placed_pods` in order.
fn decode_json_pods(
    items: &[RawItem<'_>],
    detail: &PodDetail,
    objects: &mut ClusterObjects,
) -> Result<(), ()> {
    let places: Vec<PodPlace> = items
        .par_iter()
        .with_min_len(32)
        .map(|it| decode_json_item::<Pod>(it, shapes::POD).map(|pod| detail.place(pod)))
        .collect::<Result<_, ()>>()?;
    PodPlace::push_all(places, &mut objects.pods, &mut objects.placed_pods);
    Ok(())
}

/// Reads only `apiVersion` and `kind` of an item, stopping as soon as both are seen (they come first
/// in kubectl's output, so this touches a few bytes of each item).
#[derive(Default)]
struct TypePeek {
    api_version: Option<String>,
    kind: Option<String>,
    not_an_object: bool,
}

const PEEK_DONE: &str = "\u{0}peek done";

enum PeekKey {
    ApiVersion,
    Kind,
    Other,
}

impl<'de> Deserialize<'de> for PeekKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = PeekKey;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<PeekKey, E> {
                Ok(match v {
                    "apiVersion" => PeekKey::ApiVersion,
                    "kind" => PeekKey::Kind,
                    _ => PeekKey::Other,
                })
            }
        }
        d.deserialize_identifier(KeyVisitor)
    }
}

struct PeekVisitor<'p>(&'p mut TypePeek);

impl<'de> Visitor<'de> for PeekVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<PeekKey>()? {
            match key {
                PeekKey::ApiVersion => self.0.api_version = map.next_value::<Option<String>>()?,
                PeekKey::Kind => self.0.kind = map.next_value::<Option<String>>()?,
                PeekKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            if self.0.api_version.is_some() && self.0.kind.is_some() {
                return Err(de::Error::custom(PEEK_DONE));
            }
        }
        Ok(())
    }
}

/// `Err(message)` when the item is not an object or its apiVersion/kind are not strings.
fn peek_json(text: &str) -> Result<TypePeek, String> {
    let mut peek = TypePeek::default();
    let mut de = serde_json::Deserializer::from_str(text);
    match de.deserialize_map(PeekVisitor(&mut peek)) {
        Ok(()) => Ok(peek),
        Err(_) if peek.api_version.is_some() && peek.kind.is_some() => Ok(peek),
        Err(e) if e.is_data() => {
            let message = strip_position(&e.to_string());
            if text.trim_start().starts_with('{') {
                Err(message)
            } else {
                peek.not_an_object = true;
                Ok(peek)
            }
        }
        Err(e) => Err(strip_position(&e.to_string())),
    }
}

#[derive(Deserialize, Default)]
struct NameProbe {
    #[serde(default)]
    metadata: Option<NameProbeMeta>,
}

#[derive(Deserialize, Default)]
struct NameProbeMeta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
}

fn json_name(text: &str) -> Option<String> {
    let probe: NameProbe = serde_json::from_str(text).ok()?;
    let meta = probe.metadata?;
    display_name(meta.namespace.as_deref(), meta.name.as_deref())
}

fn offset_in(outer: &str, inner: &str) -> usize {
    (inner.as_ptr() as usize).saturating_sub(outer.as_ptr() as usize)
}

/// Absolute position of an error reported at (line, column) within `inner`.
fn absolute_position(outer: &str, inner: &str, line: usize, column: usize) -> (usize, usize) {
    let (base_line, base_column) = line_column(outer.as_bytes(), offset_in(outer, inner));
    if line <= 1 {
        (base_line, base_column + column.saturating_sub(1))
    } else {
        (base_line + line - 1, column)
    }
}

fn load_json(text: &str, path: &Path) -> Result<(ClusterObjects, LoadReport), LoadError> {
    let mut report = LoadReport::new(Format::Json);
    let mut buckets: Vec<Vec<RawItem<'_>>> = vec![Vec::new(); ObjectKind::ALL.len()];
    let shape = |at: Location, message: String| LoadError::Shape {
        path: path.to_path_buf(),
        at,
        message,
    };

    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<JsonDoc<'_>>();
    let mut document = 0;
    loop {
        let start = stream.byte_offset();
        let doc = match stream.next() {
            None => break,
            Some(Ok(doc)) => doc,
            Some(Err(e)) => {
                let at = Location {
                    document,
                    item: None,
                    line: Some(e.line()),
                    column: Some(e.column()),
                };
                let message = strip_position(&e.to_string());
                return Err(if e.is_data() {
                    shape(at, format!("not a Kubernetes object or List: {message}"))
                } else {
                    LoadError::Syntax {
                        path: path.to_path_buf(),
                        format: Format::Json,
                        at,
                        message,
                    }
                });
            }
        };
        let end = stream.byte_offset();
        report.documents += 1;
        let api_version = doc.api_version.as_deref();
        let kind = doc.kind.as_deref();
        if let Some(items) = doc.items {
            let default = list_element_type(api_version, kind);
            for (i, raw) in items.into_iter().enumerate() {
                let item_text = raw.get();
                let at = || Location {
                    document,
                    item: Some(i),
                    line: Some(line_column(text.as_bytes(), offset_in(text, item_text)).0),
                    column: None,
                };
                let peek = peek_json(item_text).map_err(|m| shape(at(), m))?;
                if peek.not_an_object {
                    return Err(shape(at(), "list item is not an object".into()));
                }
                match resolve_kind(peek.api_version.as_deref(), peek.kind.as_deref(), default) {
                    Resolved::Known(k) => buckets[k.index()].push(RawItem {
                        document,
                        item: Some(i),
                        text: item_text,
                        kind: k,
                    }),
                    Resolved::Skip => report.skip(
                        peek.api_version.as_deref().or(default.map(|d| d.0)),
                        peek.kind.as_deref().or(default.map(|d| d.1)).unwrap_or(""),
                    ),
                    Resolved::NoKind => return Err(shape(at(), "list item has no kind".into())),
                }
            }
        } else {
            let doc_text = &text[start..end];
            let at = Location {
                document,
                item: None,
                line: Some(line_column(text.as_bytes(), start + leading_ws(doc_text)).0),
                column: None,
            };
            match resolve_kind(api_version, kind, None) {
                Resolved::Known(k) => buckets[k.index()].push(RawItem {
                    document,
                    item: None,
                    text: doc_text,
                    kind: k,
                }),
                Resolved::Skip => report.skip(api_version, kind.unwrap_or("")),
                Resolved::NoKind => return Err(shape(at, "object has no kind".into())),
            }
        }
        document += 1;
    }

    let mut objects = ClusterObjects::default();
    let mut failed = false;
    for kind in ObjectKind::ALL {
        let items = &buckets[kind.index()];
        if !items.is_empty() && kind.decode_json(items, &mut objects).is_err() {
            failed = true;
            break;
        }
    }
    if failed {
        return Err(first_json_error(text, path, &buckets));
    }
    report.objects = objects.len();
    Ok((objects, report))
}

fn leading_ws(s: &str) -> usize {
    s.len() - s.trim_start().len()
}

/// The first item in file order that does not decode, with its field path and position.
fn first_json_error(text: &str, path: &Path, buckets: &[Vec<RawItem<'_>>]) -> LoadError {
    let mut all: Vec<&RawItem<'_>> = buckets.iter().flatten().collect();
    all.sort_by_key(|it| offset_in(text, it.text));
    for it in all {
        let Err(e) = it.kind.check_json(it.text) else {
            continue;
        };
        let field_path = e.path().to_string();
        let inner = e.into_inner();
        let (line, column) = absolute_position(text, it.text, inner.line(), inner.column());
        let message = strip_position(&inner.to_string());
        let message = if field_path.is_empty() || field_path == "." {
            message
        } else {
            format!("{field_path}: {message}")
        };
        return LoadError::Decode(Box::new(DecodeError {
            path: path.to_path_buf(),
            at: Location {
                document: it.document,
                item: it.item,
                line: Some(line),
                column: Some(column),
            },
            api_version: it.kind.api_version().to_string(),
            kind: it.kind.kind().to_string(),
            name: json_name(it.text),
            message,
        }));
    }
    // Parallel decoding failed but sequential decoding did not: cannot happen with a deterministic
    // decoder, but report something useful rather than panic.
    LoadError::Shape {
        path: path.to_path_buf(),
        at: Location::default(),
        message: "an object failed to decode".into(),
    }
}

// ---------------------------------------------------------------------------------------------------
// Streaming JSON files
// ---------------------------------------------------------------------------------------------------

/// Bytes read per step. Items are decoded and the bytes dropped chunk by chunk, so a multi-gigabyte
/// file never sits in memory next to the objects decoded from it.
const CHUNK: usize = 32 << 20;

/// Why the streaming reader gave up; the caller then reads the whole file the exact way, which also
/// yields a precise error when the file is at fault.
#[derive(Debug)]
struct Fallback;

/// Where the scanner is in the current top-level object, at depth 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyState {
    ExpectKey,
    InKey,
    ExpectValue,
    InValue,
}

/// What a chunk yields.
enum Emitted {
    /// `items[item]` of `document`, as a byte range of the chunk.
    Item {
        document: usize,
        item: usize,
        range: std::ops::Range<usize>,
    },
    /// A whole top-level object that is not a List (owned: it may span chunks).
    Single { document: usize, text: Vec<u8> },
    /// A List document ended.
    ListEnd,
}

/// Splits a stream of JSON objects into list items without decoding them, tracking only strings
/// and nesting. Everything of a document but its `items` array is kept in `header`.
struct Scanner {
    depth: u32,
    in_string: bool,
    escape: bool,
    key_state: KeyState,
    key: Vec<u8>,
    in_items: bool,
    saw_items: bool,
    header: Vec<u8>,
    document: usize,
    item: usize,
    /// Bytes of a leading UTF-8 byte order mark seen so far (3 once past the start).
    bom: usize,
}

const BOM: &[u8] = "\u{feff}".as_bytes();

impl Scanner {
    fn new() -> Self {
        Scanner {
            depth: 0,
            in_string: false,
            escape: false,
            key_state: KeyState::ExpectKey,
            key: Vec::new(),
            in_items: false,
            saw_items: false,
            header: Vec::new(),
            document: 0,
            item: 0,
            bom: 0,
        }
    }

    /// Scans `buf`; returns what it found and how many leading bytes may be dropped (all of them,
    /// or up to the start of an item that continues past the end of `buf`).
    fn scan(&mut self, buf: &[u8], out: &mut Vec<Emitted>) -> Result<usize, Fallback> {
        let mut pos = 0;
        while pos < buf.len() {
            if self.in_items && self.depth == 2 {
                // Between items.
                match buf[pos] {
                    b' ' | b'\n' | b'\r' | b'\t' | b',' => pos += 1,
                    b'{' => match scan_object(buf, pos) {
                        Some(end) => {
                            out.push(Emitted::Item {
                                document: self.document,
                                item: self.item,
                                range: pos..end,
                            });
                            self.item += 1;
                            pos = end;
                        }
                        None => return Ok(pos),
                    },
                    b']' => {
                        self.in_items = false;
                        self.depth = 1;
                        self.header.push(b']');
                        self.key_state = KeyState::InValue;
                        pos += 1;
                    }
                    _ => return Err(Fallback),
                }
                continue;
            }
            let b = buf[pos];
            pos += 1;
            if self.depth == 0 {
                if self.bom < BOM.len() {
                    if b == BOM[self.bom] {
                        self.bom += 1;
                        continue;
                    }
                    self.bom = BOM.len();
                }
                match b {
                    b' ' | b'\n' | b'\r' | b'\t' => continue,
                    b'{' => {
                        self.depth = 1;
                        self.header.clear();
                        self.header.push(b'{');
                        self.key_state = KeyState::ExpectKey;
                        self.saw_items = false;
                        self.item = 0;
                        continue;
                    }
                    _ => return Err(Fallback),
                }
            }
            self.header.push(b);
            if self.in_string {
                if self.escape {
                    self.escape = false;
                } else if b == b'\\' {
                    self.escape = true;
                    if self.key_state == KeyState::InKey {
                        // An escaped key is never `items`.
                        self.key.push(0);
                    }
                } else if b == b'"' {
                    self.in_string = false;
                    if self.depth == 1 && self.key_state == KeyState::InKey {
                        self.key_state = KeyState::ExpectValue;
                    }
                } else if self.depth == 1 && self.key_state == KeyState::InKey {
                    self.key.push(b);
                }
                continue;
            }
            match b {
                b'"' => {
                    self.in_string = true;
                    if self.depth == 1 && self.key_state == KeyState::ExpectKey {
                        self.key_state = KeyState::InKey;
                        self.key.clear();
                    }
                }
                b',' if self.depth == 1 => self.key_state = KeyState::ExpectKey,
                b'[' if self.depth == 1
                    && self.key_state == KeyState::ExpectValue
                    && self.key == b"items" =>
                {
                    self.in_items = true;
                    self.saw_items = true;
                    self.depth = 2;
                }
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        self.end_document(out);
                    }
                }
                _ => {}
            }
        }
        Ok(buf.len())
    }

    fn end_document(&mut self, out: &mut Vec<Emitted>) {
        if self.saw_items {
            out.push(Emitted::ListEnd);
        } else {
            out.push(Emitted::Single {
                document: self.document,
                text: std::mem::take(&mut self.header),
            });
        }
        self.document += 1;
    }

    fn finished(&self) -> bool {
        self.depth == 0 && !self.in_string
    }
}

/// The end (exclusive) of the object starting at `buf[start] == b'{'`, or `None` if it continues
/// past the end of `buf`. Only quotes and braces matter for finding the closing brace, so the scan
/// jumps between them; whether the object is valid JSON is for the decoder to say.
fn scan_object(buf: &[u8], start: usize) -> Option<usize> {
    let mut depth = 0u32;
    let mut pos = start;
    loop {
        pos += memchr::memchr3(b'"', b'{', b'}', buf.get(pos..)?)?;
        match buf[pos] {
            b'"' => {
                // Jump to the closing quote, skipping escaped characters.
                pos += 1;
                loop {
                    let i = memchr::memchr2(b'"', b'\\', buf.get(pos..)?)?;
                    if buf[pos + i] == b'\\' {
                        pos += i + 2;
                    } else {
                        pos += i + 1;
                        break;
                    }
                }
                continue;
            }
            b'{' => depth += 1,
            _ => {
                depth -= 1;
                if depth == 0 {
                    return Some(pos + 1);
                }
            }
        }
        pos += 1;
    }
}

/// One scanned chunk: its bytes and what was found in them.
type Scanned = Result<(Vec<u8>, Vec<Emitted>), Fallback>;

/// Reads a JSON file chunk by chunk, decoding list items as they are found. A reader thread reads
/// and splits the next chunk while this one decodes the previous one in parallel.
fn stream_json_file(
    path: &Path,
    chunk: usize,
    detail: &PodDetail,
) -> Result<(ClusterObjects, LoadReport), Fallback> {
    let file = std::fs::File::open(path).map_err(|_| Fallback)?;
    let (tx, rx) = std::sync::mpsc::sync_channel::<Scanned>(1);
    let (spare_tx, spare_rx) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::scope(|scope| {
        scope.spawn(move || read_and_scan(file, chunk, &tx, &spare_rx));
        let mut report = LoadReport::new(Format::Json);
        let mut objects = ClusterObjects::default();
        for scanned in rx {
            let (buf, emitted) = scanned?;
            decode_emitted(&buf, &emitted, detail, &mut objects, &mut report)?;
            // The reader fills it again: reusing buffers spares the kernel mapping and zeroing fresh
            // pages for every chunk (a quarter of the CPU time of a large load when it did).
            let _ = spare_tx.send(buf);
        }
        report.objects = objects.len();
        Ok((objects, report))
    })
}

/// The reader thread: sends each chunk with the items that end in it; the start of an item that
/// continues past a chunk is carried over to the next one. Buffers the decoder is done with come back
/// through `spare`. Stops when the receiver hangs up.
fn read_and_scan(
    file: std::fs::File,
    chunk: usize,
    tx: &std::sync::mpsc::SyncSender<Scanned>,
    spare: &std::sync::mpsc::Receiver<Vec<u8>>,
) {
    use std::io::Read;
    let mut scanner = Scanner::new();
    let mut file = file;
    let mut buf: Vec<u8> = Vec::with_capacity(chunk);
    loop {
        let mut eof = false;
        while buf.len() < buf.capacity() {
            let want = (buf.capacity() - buf.len()) as u64;
            match (&mut file).take(want).read_to_end(&mut buf) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    let _ = tx.send(Err(Fallback));
                    return;
                }
            }
        }
        let mut emitted = Vec::new();
        let consumed = match scanner.scan(&buf, &mut emitted) {
            Ok(c) => c,
            Err(f) => {
                let _ = tx.send(Err(f));
                return;
            }
        };
        let tail = &buf[consumed..];
        if eof {
            let complete = scanner.finished() && tail.iter().all(u8::is_ascii_whitespace);
            let last = if complete {
                Ok((buf, emitted))
            } else {
                Err(Fallback)
            };
            let _ = tx.send(last);
            return;
        }
        // A single item larger than the buffer makes the next one twice as large.
        let capacity = if consumed == 0 {
            buf.capacity() * 2
        } else {
            chunk.max(tail.len() * 2)
        };
        let mut next = spare
            .try_recv()
            .ok()
            .filter(|b| b.capacity() >= capacity)
            .unwrap_or_else(|| Vec::with_capacity(capacity));
        next.clear();
        next.extend_from_slice(tail);
        buf.truncate(consumed);
        if tx.send(Ok((buf, emitted))).is_err() {
            return;
        }
        buf = next;
    }
}

fn decode_emitted(
    buf: &[u8],
    emitted: &[Emitted],
    detail: &PodDetail,
    objects: &mut ClusterObjects,
    report: &mut LoadReport,
) -> Result<(), Fallback> {
    let mut buckets: Vec<Vec<RawItem<'_>>> = vec![Vec::new(); ObjectKind::ALL.len()];
    for e in emitted {
        let (document, item, text) = match e {
            Emitted::Item {
                document,
                item,
                range,
            } => (*document, Some(*item), &buf[range.clone()]),
            Emitted::Single { document, text } => (*document, None, text.as_slice()),
            Emitted::ListEnd => {
                report.documents += 1;
                continue;
            }
        };
        if item.is_none() {
            report.documents += 1;
        }
        let text = std::str::from_utf8(text).map_err(|_| Fallback)?;
        let peek = peek_json(text).map_err(|_| Fallback)?;
        match resolve_kind(peek.api_version.as_deref(), peek.kind.as_deref(), None) {
            Resolved::Known(k) => buckets[k.index()].push(RawItem {
                document,
                item,
                text,
                kind: k,
            }),
            Resolved::Skip => report.skip(peek.api_version.as_deref(), peek.kind.as_deref().unwrap_or("")),
            // Typed lists name the item kind in the list, possibly after the items: read exactly.
            Resolved::NoKind => return Err(Fallback),
        }
    }
    for kind in ObjectKind::ALL {
        let items = &buckets[kind.index()];
        if items.is_empty() {
            continue;
        }
        if *kind == ObjectKind::Pod && *detail != PodDetail::Full {
            decode_json_pods(items, detail, objects).map_err(|_| Fallback)?;
        } else {
            kind.decode_json(items, objects).map_err(|_| Fallback)?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------
// YAML
// ---------------------------------------------------------------------------------------------------

/// A failure inside the document visitor, carried out past serde's error type.
struct ItemFailure {
    item: Option<usize>,
    kind: ObjectKind,
    name: Option<String>,
    message: String,
}

struct YamlState<'s> {
    objects: &'s mut ClusterObjects,
    report: &'s mut LoadReport,
    failure: Option<ItemFailure>,
    shape: Option<(Option<usize>, String)>,
    /// Items without a kind, resolved against the list's kind once the document is read.
    pending: Vec<(usize, serde_yaml::Value)>,
}

/// What remains of a document once its items are stored.
#[derive(Default)]
struct YamlDoc {
    api_version: Option<String>,
    kind: Option<String>,
    had_items: bool,
    /// Every field but `items` (the object itself when the document is not a List).
    rest: serde_yaml::Mapping,
}

const YAML_ABORT: &str = "\u{0}abort";

fn yaml_str<'v>(v: &'v serde_yaml::Value, key: &str) -> Option<&'v str> {
    v.get(key).and_then(serde_yaml::Value::as_str)
}

fn yaml_name(v: &serde_yaml::Value) -> Option<String> {
    let meta = v.get("metadata")?;
    display_name(yaml_str(meta, "namespace"), yaml_str(meta, "name"))
}

impl YamlState<'_> {
    /// Stores one object; `Err` (with `failure`/`shape` set) aborts the document.
    fn store(
        &mut self,
        item: Option<usize>,
        value: serde_yaml::Value,
        default: Option<(&str, &str)>,
    ) -> Result<(), ()> {
        if !value.is_mapping() {
            let what = if item.is_some() { "list item" } else { "document" };
            self.shape = Some((item, format!("{what} is not an object")));
            return Err(());
        }
        let api_version = yaml_str(&value, "apiVersion").map(str::to_string);
        let kind = yaml_str(&value, "kind").map(str::to_string);
        match resolve_kind(api_version.as_deref(), kind.as_deref(), default) {
            Resolved::Known(k) => {
                let name = yaml_name(&value);
                k.store_yaml(value, self.objects).map_err(|e| {
                    self.failure = Some(ItemFailure {
                        item,
                        kind: k,
                        name,
                        message: strip_position(&e.to_string()),
                    });
                })
            }
            Resolved::Skip => {
                self.report.skip(
                    api_version.as_deref().or(default.map(|d| d.0)),
                    kind.as_deref().or(default.map(|d| d.1)).unwrap_or(""),
                );
                Ok(())
            }
            Resolved::NoKind => {
                let what = if item.is_some() { "list item" } else { "object" };
                self.shape = Some((item, format!("{what} has no kind")));
                Err(())
            }
        }
    }
}

struct YamlDocVisitor<'a, 's>(&'a mut YamlState<'s>);

impl<'de> Visitor<'de> for YamlDocVisitor<'_, '_> {
    type Value = YamlDoc;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object or List")
    }

    fn visit_unit<E: de::Error>(self) -> Result<YamlDoc, E> {
        Ok(YamlDoc::default())
    }

    fn visit_none<E: de::Error>(self) -> Result<YamlDoc, E> {
        Ok(YamlDoc::default())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<YamlDoc, A::Error> {
        let mut doc = YamlDoc::default();
        while let Some(key) = map.next_key::<serde_yaml::Value>()? {
            if key.as_str() == Some("items") {
                doc.had_items = true;
                map.next_value_seed(YamlItemsSeed(&mut *self.0))?;
                continue;
            }
            let value: serde_yaml::Value = map.next_value()?;
            match key.as_str() {
                Some("apiVersion") => doc.api_version = value.as_str().map(str::to_string),
                Some("kind") => doc.kind = value.as_str().map(str::to_string),
                _ => {}
            }
            doc.rest.insert(key, value);
        }
        Ok(doc)
    }
}

struct YamlItemsSeed<'a, 's>(&'a mut YamlState<'s>);

impl<'de> DeserializeSeed<'de> for YamlItemsSeed<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for YamlItemsSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of objects")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while let Some(value) = seq.next_element::<serde_yaml::Value>()? {
            let has_kind = value.get("kind").is_some();
            if has_kind || !value.is_mapping() {
                if self.0.store(Some(i), value, None).is_err() {
                    return Err(de::Error::custom(YAML_ABORT));
                }
            } else {
                self.0.pending.push((i, value));
            }
            i += 1;
        }
        Ok(())
    }
}

fn load_yaml(text: &str, path: &Path) -> Result<(ClusterObjects, LoadReport), LoadError> {
    let mut objects = ClusterObjects::default();
    let mut report = LoadReport::new(Format::Yaml);
    for (document, de) in serde_yaml::Deserializer::from_str(text).enumerate() {
        report.documents += 1;
        let mut state = YamlState {
            objects: &mut objects,
            report: &mut report,
            failure: None,
            shape: None,
            pending: Vec::new(),
        };
        let result = de.deserialize_any(YamlDocVisitor(&mut state));
        let doc = match result {
            Ok(doc) => doc,
            Err(e) => {
                if let Some(f) = state.failure.take() {
                    return Err(yaml_decode_error(text, path, document, f));
                }
                if let Some((item, message)) = state.shape.take() {
                    return Err(yaml_shape(path, document, item, message));
                }
                let location = e.location();
                let at = Location {
                    document,
                    item: None,
                    line: location.as_ref().map(|l| l.line()),
                    column: location.as_ref().map(|l| l.column()),
                };
                let message = strip_position(&e.to_string());
                return Err(if message.contains("invalid type") {
                    LoadError::Shape {
                        path: path.to_path_buf(),
                        at,
                        message: format!("not a Kubernetes object or List: {message}"),
                    }
                } else {
                    LoadError::Syntax {
                        path: path.to_path_buf(),
                        format: Format::Yaml,
                        at,
                        message,
                    }
                });
            }
        };
        if doc.had_items {
            let default = list_element_type(doc.api_version.as_deref(), doc.kind.as_deref());
            for (i, value) in std::mem::take(&mut state.pending) {
                if state.store(Some(i), value, default).is_err() {
                    return Err(yaml_state_error(text, path, document, &mut state));
                }
            }
        } else if !doc.rest.is_empty() {
            let value = serde_yaml::Value::Mapping(doc.rest);
            if state.store(None, value, None).is_err() {
                return Err(yaml_state_error(text, path, document, &mut state));
            }
        }
    }
    report.objects = objects.len();
    Ok((objects, report))
}

fn yaml_shape(path: &Path, document: usize, item: Option<usize>, message: String) -> LoadError {
    LoadError::Shape {
        path: path.to_path_buf(),
        at: Location {
            document,
            item,
            line: None,
            column: None,
        },
        message,
    }
}

fn yaml_state_error(text: &str, path: &Path, document: usize, state: &mut YamlState<'_>) -> LoadError {
    if let Some(f) = state.failure.take() {
        return yaml_decode_error(text, path, document, f);
    }
    let (item, message) = state
        .shape
        .take()
        .unwrap_or((None, "object could not be read".into()));
    yaml_shape(path, document, item, message)
}

/// Builds a decode error, re-reading the failing object straight from the text to learn the line,
/// column and field path (conversion from a value tree knows neither).
fn yaml_decode_error(text: &str, path: &Path, document: usize, f: ItemFailure) -> LoadError {
    let located = serde_yaml::Deserializer::from_str(text)
        .nth(document)
        .and_then(|de| {
            let result = match f.item {
                None => f.kind.check(de),
                Some(index) => de.deserialize_any(LocateItem { index, kind: f.kind }),
            };
            result.err()
        })
        .and_then(|e| {
            let loc = e.location()?;
            Some((loc.line(), loc.column(), strip_position(&e.to_string())))
        });
    let (line, column, message) = match located {
        Some((l, c, m)) => (Some(l), Some(c), m),
        None => (None, None, f.message),
    };
    LoadError::Decode(Box::new(DecodeError {
        path: path.to_path_buf(),
        at: Location {
            document,
            item: f.item,
            line,
            column,
        },
        api_version: f.kind.api_version().to_string(),
        kind: f.kind.kind().to_string(),
        name: f.name,
        message,
    }))
}

/// Walks a List document to `items[index]` and deserializes it as `kind` straight from the parser.
struct LocateItem {
    index: usize,
    kind: ObjectKind,
}

impl<'de> Visitor<'de> for LocateItem {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a List")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<serde_yaml::Value>()? {
            if key.as_str() == Some("items") {
                return map.next_value_seed(LocateInSeq {
                    index: self.index,
                    kind: self.kind,
                });
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }
}

struct LocateInSeq {
    index: usize,
    kind: ObjectKind,
}

impl<'de> DeserializeSeed<'de> for LocateInSeq {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for LocateInSeq {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        for _ in 0..self.index {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Ok(());
            }
        }
        seq.next_element_seed(KindSeed(self.kind))?;
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }
}

struct KindSeed(ObjectKind);

impl<'de> DeserializeSeed<'de> for KindSeed {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.0.check(d)
    }
}

// ---------------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------------

/// Serializes as `{apiVersion: v1, kind: List, metadata: {resourceVersion: ""}, items: [...]}`, the
/// shape `kubectl get -o yaml|json` prints for several kinds.
pub struct ListView<'a>(pub &'a ClusterObjects);

struct ItemsView<'a>(&'a ClusterObjects);

impl Serialize for ItemsView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        serialize_items(self.0, &mut seq)?;
        seq.end()
    }
}

impl Serialize for ListView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(4))?;
        map.serialize_entry("apiVersion", "v1")?;
        map.serialize_entry("items", &ItemsView(self.0))?;
        map.serialize_entry("kind", "List")?;
        map.serialize_entry("metadata", &BTreeMap::from([("resourceVersion", "")]))?;
        map.end()
    }
}

/// Writes the objects as one YAML `kind: List` (what `kubectl sched snapshot` saves).
pub fn write_list_yaml<W: io::Write>(objects: &ClusterObjects, writer: W) -> Result<(), serde_yaml::Error> {
    serde_yaml::to_writer(writer, &ListView(objects))
}

/// Writes the objects as one JSON `kind: List`, indented like `kubectl get -o json`. Loading JSON is
/// several times faster than YAML, so prefer it for large clusters.
pub fn write_list_json<W: io::Write>(objects: &ClusterObjects, writer: W) -> Result<(), serde_json::Error> {
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(writer, formatter);
    ListView(objects).serialize(&mut ser)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::generate::{GenerateParams, generate, generate_pruned};
    use crate::snapshot::requests::calculate_resource;

    fn load(text: &str) -> Result<(ClusterObjects, LoadReport), LoadError> {
        load_bytes(text.as_bytes(), Path::new("snap.yaml"))
    }

    /// Objects per kind, for compact assertions.
    fn counts(o: &ClusterObjects) -> BTreeMap<&'static str, usize> {
        ObjectKind::ALL
            .iter()
            .map(|k| (k.kind(), k.count(o)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    fn names<T: k8s_openapi::Metadata<Ty = ObjectMeta>>(items: &[T]) -> Vec<String> {
        items
            .iter()
            .map(|o| o.metadata().name.clone().unwrap_or_default())
            .collect()
    }

    const YAML_LIST: &str = r#"apiVersion: v1
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: n1
    labels: {topology.kubernetes.io/zone: a}
  status:
    allocatable: {cpu: "4", memory: 8Gi, pods: "110"}
- apiVersion: v1
  kind: Pod
  metadata:
    name: web-0
    namespace: default
  spec:
    nodeName: n1
    containers:
    - name: c
      image: nginx
      resources:
        requests: {cpu: 500m}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web, namespace: default}
  spec: {selector: {matchLabels: {app: web}}, template: {spec: {containers: []}}}
- apiVersion: policy/v1
  kind: PodDisruptionBudget
  metadata: {name: pdb, namespace: default}
  spec: {maxUnavailable: 1}
- apiVersion: policy/v1beta1
  kind: PodDisruptionBudget
  metadata: {name: old-pdb, namespace: default}
kind: List
metadata:
  resourceVersion: ""
"#;

    const YAML_MULTI: &str = r#"# a comment before the first document
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {team: a}}
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Pod, metadata: {name: p1, namespace: team-a}, spec: {containers: [{name: c}]}}
- {apiVersion: v1, kind: ConfigMap, metadata: {name: cm, namespace: team-a}}
---
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
"#;

    const JSON_LIST: &str = r#"{
    "apiVersion": "v1",
    "items": [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"}},
        {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p", "namespace": "default"}},
        {"metadata": {"name": "sc"}, "provisioner": "x", "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass"},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}
    ],
    "kind": "List",
    "metadata": {"resourceVersion": ""}
}"#;

    const JSON_STREAM: &str = r#"{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}]}
{"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "d"}, "spec": {}}"#;

    const JSON_POD_LIST: &str = r#"{"apiVersion": "v1", "kind": "PodList", "metadata": {},
 "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}"#;

    const YAML_NODE_LIST: &str =
        "apiVersion: v1\nkind: NodeList\nitems:\n- metadata: {name: a}\n- metadata: {name: b}\n";

    const YAML_SINGLE: &str = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n  namespace: db\n  annotations:\n    volume.kubernetes.io/selected-node: n1\n    example.com/noise: x\nspec:\n  storageClassName: fast\n";

    #[test]
    fn loads_every_supported_shape() {
        struct Case {
            name: &'static str,
            text: &'static str,
            format: Format,
            documents: usize,
            counts: &'static [(&'static str, usize)],
            skipped: &'static [(&'static str, usize)],
        }
        let cases = [
            Case {
                name: "yaml List of mixed kinds",
                text: YAML_LIST,
                format: Format::Yaml,
                documents: 1,
                counts: &[("Node", 1), ("Pod", 1), ("PodDisruptionBudget", 1)],
                skipped: &[
                    ("Deployment (apps/v1)", 1),
                    ("PodDisruptionBudget (policy/v1beta1)", 1),
                ],
            },
            Case {
                name: "multi-document yaml with a List and empty documents",
                text: YAML_MULTI,
                format: Format::Yaml,
                documents: 4,
                counts: &[("Namespace", 1), ("Pod", 1), ("PriorityClass", 1)],
                skipped: &[("ConfigMap (v1)", 1)],
            },
            Case {
                name: "json List (keys in any order)",
                text: JSON_LIST,
                format: Format::Json,
                documents: 1,
                counts: &[("Node", 2), ("Pod", 1), ("StorageClass", 1)],
                skipped: &[("Secret (v1)", 1)],
            },
            Case {
                name: "concatenated json values",
                text: JSON_STREAM,
                format: Format::Json,
                documents: 3,
                counts: &[("Node", 1), ("Pod", 1), ("CSIDriver", 1)],
                skipped: &[],
            },
            Case {
                name: "json typed list without item kinds",
                text: JSON_POD_LIST,
                format: Format::Json,
                documents: 1,
                counts: &[("Pod", 2)],
                skipped: &[],
            },
            Case {
                name: "yaml typed list without item kinds",
                text: YAML_NODE_LIST,
                format: Format::Yaml,
                documents: 1,
                counts: &[("Node", 2)],
                skipped: &[],
            },
            Case {
                name: "single yaml object",
                text: YAML_SINGLE,
                format: Format::Yaml,
                documents: 1,
                counts: &[("PersistentVolumeClaim", 1)],
                skipped: &[],
            },
            Case {
                name: "single json object",
                text: r#"  {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "x"}}"#,
                format: Format::Json,
                documents: 1,
                counts: &[("Service", 1)],
                skipped: &[],
            },
            Case {
                // The YAML parser reports an empty stream as one empty document.
                name: "empty file",
                text: "",
                format: Format::Yaml,
                documents: 1,
                counts: &[],
                skipped: &[],
            },
        ];
        for c in cases {
            let (objects, report) = load(c.text).unwrap_or_else(|e| panic!("{}: {e}", c.name));
            assert_eq!(report.format, c.format, "{}", c.name);
            assert_eq!(report.documents, c.documents, "{}", c.name);
            let want: BTreeMap<&str, usize> = c.counts.iter().copied().collect();
            assert_eq!(counts(&objects), want, "{}", c.name);
            assert_eq!(report.objects, want.values().sum::<usize>(), "{}", c.name);
            let skipped: BTreeMap<String, usize> =
                c.skipped.iter().map(|(k, n)| (k.to_string(), *n)).collect();
            assert_eq!(report.skipped, skipped, "{}", c.name);
        }
    }

    #[test]
    fn loaded_objects_keep_their_fields_and_order() {
        let (o, _) = load(YAML_LIST).unwrap();
        assert_eq!(names(&o.nodes), ["n1"]);
        let pod = &o.pods[0];
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("n1"));
        assert_eq!(calculate_resource(pod).resource.milli_cpu, 500);

        let (o, _) = load(JSON_LIST).unwrap();
        assert_eq!(names(&o.nodes), ["n1", "n2"]);
        let (o, _) = load(JSON_POD_LIST).unwrap();
        assert_eq!(names(&o.pods), ["a", "b"]);

        let (o, _) = load(YAML_SINGLE).unwrap();
        let pvc = &o.persistent_volume_claims[0];
        assert_eq!(
            pvc.metadata.annotations,
            Some(BTreeMap::from([(
                "volume.kubernetes.io/selected-node".to_string(),
                "n1".to_string()
            )])),
            "scheduler annotations stay, others go"
        );
        let (o, _) = load(YAML_MULTI).unwrap();
        assert_eq!(o.priority_classes[0].value, Some(1000));
        assert_eq!(
            o.namespaces[0].metadata.labels.as_ref().unwrap()["team"],
            "a",
            "namespace labels feed namespaceSelectors"
        );
    }

    #[test]
    fn warnings_name_skipped_kinds() {
        let (_, report) = load(YAML_LIST).unwrap();
        assert_eq!(report.skipped_total(), 2);
        assert_eq!(
            report.warnings(),
            [
                "skipped 1 object(s) of kind Deployment (apps/v1): not used by the scheduler",
                "skipped 1 object(s) of kind PodDisruptionBudget (policy/v1beta1): not used by the scheduler",
            ]
        );
    }

    struct ErrCase {
        name: &'static str,
        text: &'static str,
        want: &'static str,
    }

    #[test]
    fn errors_say_where_and_what() {
        let cases = [
            ErrCase {
                name: "malformed yaml",
                text: "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n   bad: indent\n",
                want: "snap.yaml: document[0] (line 5, column 7): malformed YAML: mapping values are not allowed in this context",
            },
            ErrCase {
                name: "malformed yaml in the second document",
                text: "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\nkind: [unclosed\n",
                want: "snap.yaml: document[1]",
            },
            ErrCase {
                name: "malformed json",
                text: "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"items\": [\n    {\"kind\": \"Pod\" \"apiVersion\": \"v1\"}\n  ]\n}\n",
                want: "snap.yaml: document[0] (line 5, column 20): malformed JSON: expected `,` or `}`",
            },
            ErrCase {
                name: "wrong type in a yaml List item",
                text: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: ok, namespace: default}\n- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: web-1\n    namespace: default\n  spec:\n    priority: high\n    containers: []\n",
                want: "snap.yaml: document[0].items[1] (line 13, column 15): Pod default/web-1: ",
            },
            ErrCase {
                name: "wrong type in a single yaml object",
                text: "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\nspec:\n  unschedulable: maybe\n",
                want: "snap.yaml: document[0] (line 6, column 18): Node n1: ",
            },
            ErrCase {
                name: "wrong type in a json List item",
                text: "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [\n {\"apiVersion\": \"v1\", \"kind\": \"Node\", \"metadata\": {\"name\": \"n1\"}},\n {\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {\"name\": \"p\", \"namespace\": \"ns\"},\n  \"spec\": {\"containers\": [], \"priority\": \"high\"}}\n]}",
                want: "snap.yaml: document[0].items[1] (line 4, column 47): Pod ns/p: spec.priority: invalid type: string \"high\", expected i32",
            },
            ErrCase {
                name: "wrong type in a typed list item without kind",
                text: "{\"kind\": \"PodList\", \"apiVersion\": \"v1\", \"items\": [{\"metadata\": {\"name\": 5}}]}",
                want: "snap.yaml: document[0].items[0] (line 1, column 73): Pod (unnamed): metadata.name: invalid type: integer `5`, expected a string",
            },
            ErrCase {
                name: "list item without kind",
                text: "apiVersion: v1\nkind: List\nitems:\n- metadata: {name: x}\n",
                want: "snap.yaml: document[0].items[0]: list item has no kind",
            },
            ErrCase {
                name: "json list item that is not an object",
                text: "{\"kind\": \"List\", \"apiVersion\": \"v1\", \"items\": [\"nope\"]}",
                want: "snap.yaml: document[0].items[0] (line 1): list item is not an object",
            },
            ErrCase {
                name: "document that is a scalar",
                text: "just a string\n",
                want: "snap.yaml: document[0]",
            },
            ErrCase {
                name: "object without kind",
                text: "apiVersion: v1\nmetadata: {name: x}\n",
                want: "snap.yaml: document[0]: object has no kind",
            },
        ];
        for c in cases {
            let err = load(c.text).err().unwrap_or_else(|| panic!("{}: loaded", c.name));
            let msg = err.to_string();
            assert!(
                msg.starts_with(c.want),
                "{}:\n got  {msg}\n want {}",
                c.name,
                c.want
            );
        }
    }

    #[test]
    fn decode_errors_carry_structured_fields() {
        let text = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p, namespace: ns}\n  spec: {containers: [{name: c, ports: [{containerPort: x}]}]}\n";
        match load(text) {
            Err(LoadError::Decode(d)) => {
                assert_eq!((d.at.document, d.at.item, d.at.line), (0, Some(0), Some(7)));
                assert_eq!((d.kind.as_str(), d.api_version.as_str()), ("Pod", "v1"));
                assert_eq!(d.name.as_deref(), Some("ns/p"));
            }
            other => panic!("{other:?}"),
        }
        match load_bytes(b"\xff\xfe", Path::new("bin.json")) {
            Err(LoadError::Syntax { message, .. }) => assert!(message.contains("UTF-8"), "{message}"),
            other => panic!("{other:?}"),
        }
        match load_file("/nonexistent/snap.yaml") {
            Err(e @ LoadError::Io { .. }) => assert!(e.to_string().starts_with("/nonexistent/snap.yaml: ")),
            other => panic!("{other:?}"),
        }
    }

    fn assert_same(a: &ClusterObjects, b: &ClusterObjects) {
        assert_eq!(a.nodes, b.nodes);
        assert_eq!(a.pods, b.pods);
        assert_eq!(a.namespaces, b.namespaces);
        assert_eq!(a.persistent_volumes, b.persistent_volumes);
        assert_eq!(a.persistent_volume_claims, b.persistent_volume_claims);
        assert_eq!(a.storage_classes, b.storage_classes);
        assert_eq!(a.csi_nodes, b.csi_nodes);
        assert_eq!(a.csi_drivers, b.csi_drivers);
        assert_eq!(a.csi_storage_capacities, b.csi_storage_capacities);
        assert_eq!(a.pod_disruption_budgets, b.pod_disruption_budgets);
        assert_eq!(a.priority_classes, b.priority_classes);
        assert_eq!(a.services, b.services);
        assert_eq!(a.replication_controllers, b.replication_controllers);
        assert_eq!(a.replica_sets, b.replica_sets);
        assert_eq!(a.stateful_sets, b.stateful_sets);
        assert_eq!(a.resource_claims, b.resource_claims);
    }

    #[test]
    fn dump_then_load_round_trips_in_both_formats() {
        let original = generate_pruned(&GenerateParams::new(12, 400, 3, 5));
        assert!(original.len() > 400);

        let mut yaml = Vec::new();
        write_list_yaml(&original, &mut yaml).unwrap();
        let text = String::from_utf8(yaml).unwrap();
        assert!(text.starts_with("apiVersion: v1\nitems:\n"), "{}", &text[..40]);
        let (loaded, report) = load(&text).unwrap();
        assert_same(&loaded, &original);
        assert_eq!((report.format, report.objects), (Format::Yaml, original.len()));

        let mut json = Vec::new();
        write_list_json(&original, &mut json).unwrap();
        let (loaded, report) = load_bytes(&json, Path::new("snap.json")).unwrap();
        assert_same(&loaded, &original);
        assert_eq!((report.format, report.skipped_total()), (Format::Json, 0));
    }

    #[test]
    fn generated_json_file_loads_pruned_and_snapshot_builds() {
        let params = GenerateParams::new(30, 1_500, 3, 11);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.json");
        let size = crate::snapshot::generate::write_json_list(&params, &path).unwrap();
        assert!(size > 1_000_000, "realistic objects: {size} bytes");
        let (loaded, report) = load_file(&path).unwrap();
        assert_same(&loaded, &generate_pruned(&params));
        assert_eq!(report.documents, 1);
        let (snapshot, _) = Snapshot::from_file(&path).unwrap();
        assert_eq!(snapshot.nodes().len(), 30);
    }

    /// A compact load (pods on nodes reduced as they are read) builds the same snapshot as a full one,
    /// in the JSON streaming path and in the YAML path, and keeps the named pod whole.
    #[test]
    fn compact_placed_load_builds_the_same_snapshot() {
        let params = GenerateParams::new(12, 400, 2, 5);
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("cluster.json");
        crate::snapshot::generate::write_json_list(&params, &json).unwrap();
        let yaml = dir.path().join("cluster.yaml");
        write_list_yaml(&generate(&params), std::fs::File::create(&yaml).unwrap()).unwrap();

        let (full, _) = load_file(&json).unwrap();
        let kept = full
            .pods
            .iter()
            .find(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
            .map(|p| {
                crate::snapshot::namespaced_key(
                    p.metadata.namespace.as_deref().unwrap_or(""),
                    p.metadata.name.as_deref().unwrap_or(""),
                )
            })
            .expect("a bound pod");
        let expected = Snapshot::new(full);
        let detail = PodDetail::CompactPlaced {
            keep: [kept.clone()].into(),
        };
        let loads = [
            load_file_with(&json, &detail).unwrap().0,
            // Small chunks: pods are placed chunk by chunk and the reader reuses buffers.
            stream_json_file(&json, 4096, &detail)
                .unwrap_or_else(|_| panic!("fell back"))
                .0,
            load_file_with(&yaml, &detail).unwrap().0,
        ];
        for (path, compact) in [&json, &json, &yaml].into_iter().zip(loads) {
            assert!(!compact.placed_pods.is_empty(), "{}", path.display());
            assert_eq!(
                compact
                    .pods
                    .iter()
                    .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
                    .count(),
                1,
                "only the kept pod stays whole among pods on nodes"
            );
            let whole = compact
                .pods
                .iter()
                .find(|p| p.metadata.name.as_deref() == kept.split('/').nth(1));
            assert!(whole.is_some_and(|p| p.spec.as_ref().is_some_and(|s| !s.containers.is_empty())));
            let got = Snapshot::new(compact);
            assert_eq!(got.nodes().len(), expected.nodes().len());
            for (a, b) in got.nodes().iter().zip(expected.nodes()) {
                assert_eq!(a.name(), b.name());
                assert_eq!(a.requested, b.requested, "{}", a.name());
                assert_eq!(a.non_zero_requested, b.non_zero_requested, "{}", a.name());
                assert_eq!(a.used_ports, b.used_ports, "{}", a.name());
                assert_eq!(a.pvc_ref_counts, b.pvc_ref_counts, "{}", a.name());
                let names =
                    |n: &crate::snapshot::NodeInfo| n.pods.iter().map(|p| p.key()).collect::<Vec<_>>();
                let names_with_kept_last = |n: &crate::snapshot::NodeInfo| {
                    let mut v = names(n);
                    v.sort_by_key(|k| *k == kept);
                    v
                };
                assert_eq!(names(a), names_with_kept_last(b), "{}", a.name());
            }
            let keys = |s: &Snapshot| s.pending_pods.iter().map(|p| p.key()).collect::<Vec<_>>();
            assert_eq!(keys(&got), keys(&expected));
        }
    }

    #[test]
    fn pruning_keeps_what_scheduling_reads() {
        let params = GenerateParams::new(30, 1_500, 3, 2);
        let raw = generate(&params);
        let mut pruned = raw.clone();
        pruned.prune();

        // Requests (and so every resource plugin) are unchanged by pruning, pod by pod.
        for (a, b) in raw.pods.iter().zip(&pruned.pods) {
            assert_eq!(calculate_resource(a), calculate_resource(b));
        }
        // The snapshot's accounting and parsed terms are unchanged.
        let before = Snapshot::new(raw.clone());
        let after = Snapshot::new(pruned.clone());
        for (a, b) in before.nodes().iter().zip(after.nodes()) {
            assert_eq!(a.requested, b.requested);
            assert_eq!(a.non_zero_requested, b.non_zero_requested);
            assert_eq!(a.used_ports, b.used_ports);
            assert_eq!(a.image_states, b.image_states);
            assert_eq!(a.pvc_ref_counts, b.pvc_ref_counts);
            assert_eq!(a.pods_with_affinity.len(), b.pods_with_affinity.len());
        }
        assert_eq!(before.pending_pods.len(), after.pending_pods.len());

        for (a, b) in raw.pods.iter().zip(&pruned.pods) {
            let (sa, sb) = (a.spec.as_ref().unwrap(), b.spec.as_ref().unwrap());
            assert_eq!(a.metadata.labels, b.metadata.labels);
            assert_eq!(a.metadata.owner_references, b.metadata.owner_references);
            assert_eq!(a.metadata.uid, b.metadata.uid);
            assert!(b.metadata.managed_fields.is_none());
            assert!(
                b.metadata.annotations.is_none(),
                "no kept annotations on generated pods"
            );
            assert_eq!(sa.node_name, sb.node_name);
            assert_eq!(sa.affinity, sb.affinity);
            assert_eq!(sa.tolerations, sb.tolerations);
            assert_eq!(sa.node_selector, sb.node_selector);
            assert_eq!(sa.topology_spread_constraints, sb.topology_spread_constraints);
            assert_eq!(sa.priority, sb.priority);
            assert_eq!(sa.priority_class_name, sb.priority_class_name);
            assert_eq!(sa.preemption_policy, sb.preemption_policy);
            assert_eq!(sa.scheduler_name, sb.scheduler_name);
            assert_eq!(
                sa.termination_grace_period_seconds,
                sb.termination_grace_period_seconds
            );
            for (ca, cb) in sa.containers.iter().zip(&sb.containers) {
                let requests = |c: &Container| c.resources.as_ref().and_then(|r| r.requests.clone());
                assert_eq!(
                    (&ca.name, &ca.image, requests(ca)),
                    (&cb.name, &cb.image, requests(cb))
                );
                assert!(cb.resources.as_ref().is_none_or(|r| r.limits.is_none()));
                assert!(cb.env.is_none() && cb.liveness_probe.is_none() && cb.command.is_none());
                assert!(cb.volume_mounts.is_none());
                let host_ports = |c: &Container| {
                    c.ports
                        .iter()
                        .flatten()
                        .filter(|p| p.host_port.is_some())
                        .cloned()
                        .collect::<Vec<_>>()
                };
                assert_eq!(host_ports(ca), host_ports(cb));
            }
            let (ta, tb) = (a.status.as_ref().unwrap(), b.status.as_ref().unwrap());
            assert_eq!(ta.phase, tb.phase);
            let scheduling_conditions = |st: &PodStatus| {
                st.conditions
                    .iter()
                    .flatten()
                    .filter(|c| c.type_ == "PodScheduled")
                    .cloned()
                    .collect::<Vec<_>>()
            };
            assert_eq!(scheduling_conditions(ta), scheduling_conditions(tb));
            assert!(tb.conditions.iter().flatten().all(|c| c.type_ != "Ready"));
            assert_eq!(ta.nominated_node_name, tb.nominated_node_name);
            assert_eq!(ta.start_time, tb.start_time);
            assert!(tb.pod_ip.is_none() && tb.qos_class.is_none());
            assert!(
                tb.container_statuses.is_none(),
                "statuses equal to the spec are dropped"
            );
            let claims = |v: &Volume| v.persistent_volume_claim.clone();
            let claims_a: Vec<_> = sa.volumes.iter().flatten().filter_map(claims).collect();
            let claims_b: Vec<_> = sb.volumes.iter().flatten().filter_map(claims).collect();
            assert_eq!(claims_a, claims_b);
            assert!(
                sb.volumes.iter().flatten().all(|v| v.projected.is_none()),
                "token volumes are dropped"
            );
        }
        for (a, b) in raw.nodes.iter().zip(&pruned.nodes) {
            let (sa, sb) = (a.status.as_ref().unwrap(), b.status.as_ref().unwrap());
            assert_eq!((&sa.allocatable, &sa.images), (&sb.allocatable, &sb.images));
            assert_eq!(a.spec, b.spec);
            assert_eq!(a.metadata.labels, b.metadata.labels);
            assert!(sb.node_info.is_none());
        }
        for (a, b) in raw
            .persistent_volume_claims
            .iter()
            .zip(&pruned.persistent_volume_claims)
        {
            assert_eq!(
                a.metadata.annotations, b.metadata.annotations,
                "volume annotations are kept"
            );
            assert_eq!(a.spec, b.spec);
        }
        assert_eq!(raw.persistent_volumes, pruned.persistent_volumes);

        // Idempotent.
        let mut twice = pruned.clone();
        twice.prune();
        assert_same(&twice, &pruned);
    }

    #[test]
    fn prune_pod_table() {
        use k8s_openapi::api::core::v1::{ContainerPort, EnvVar};
        let mut pod = crate::testing::pod("p")
            .init_container("side", &[("cpu", "100m")], true)
            .host_port(8080, "TCP", "")
            .with(|p| {
                p.metadata.annotations = Some(BTreeMap::from([
                    ("scheduler.alpha.kubernetes.io/critical-pod".into(), "".into()),
                    (
                        "kubectl.kubernetes.io/last-applied-configuration".into(),
                        "{...}".into(),
                    ),
                    ("pv.kubernetes.io/bind-completed".into(), "yes".into()),
                ]));
                let spec = p.spec.as_mut().unwrap();
                spec.containers[0].env = Some(vec![EnvVar {
                    name: "A".into(),
                    ..Default::default()
                }]);
                spec.containers[0].ports.as_mut().unwrap().push(ContainerPort {
                    container_port: 9090,
                    ..Default::default()
                });
                spec.service_account_name = Some("sa".into());
                spec.scheduling_gates = Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
                    name: "gate".into(),
                }]);
                let st = p.status.as_mut().unwrap();
                st.pod_ip = Some("10.0.0.1".into());
                st.nominated_node_name = Some("n2".into());
            })
            .obj();
        prune_pod(&mut pod);
        let annotations: Vec<&String> = pod.metadata.annotations.as_ref().unwrap().keys().collect();
        assert_eq!(
            annotations,
            [
                "pv.kubernetes.io/bind-completed",
                "scheduler.alpha.kubernetes.io/critical-pod"
            ]
        );
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.containers[0].env, None);
        let ports = spec.containers[0].ports.as_ref().unwrap();
        assert_eq!(ports.len(), 1, "only host ports stay");
        assert_eq!(ports[0].host_port, Some(8080));
        assert_eq!(
            spec.init_containers.as_ref().unwrap()[0]
                .restart_policy
                .as_deref(),
            Some("Always"),
            "sidecars stay sidecars"
        );
        assert_eq!(spec.service_account_name, None);
        assert!(spec.scheduling_gates.is_some(), "scheduling gates stay");
        let st = pod.status.as_ref().unwrap();
        assert_eq!(
            (st.pod_ip.as_deref(), st.nominated_node_name.as_deref()),
            (None, Some("n2"))
        );
    }

    #[test]
    fn container_statuses_stay_only_when_they_change_requests() {
        use k8s_openapi::api::core::v1::{PodCondition, ResourceRequirements};
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        let status_with = |allocated: &str, actual: Option<&str>| ContainerStatus {
            name: "c0".into(),
            image: "img".into(),
            allocated_resources: Some(BTreeMap::from([("cpu".into(), Quantity(allocated.into()))])),
            resources: actual.map(|a| ResourceRequirements {
                requests: Some(BTreeMap::from([("cpu".into(), Quantity(a.into()))])),
                ..Default::default()
            }),
            ..Default::default()
        };
        let cases: Vec<(&str, ContainerStatus, bool, bool)> = vec![
            // name, status, infeasible resize, kept
            ("allocated equals spec", status_with("500m", None), false, false),
            (
                "allocated and actual equal spec",
                status_with("500m", Some("500m")),
                false,
                false,
            ),
            (
                "allocated differs (resize in progress)",
                status_with("1", None),
                false,
                true,
            ),
            ("actual differs", status_with("500m", Some("250m")), false, true),
            (
                "infeasible resize keeps everything",
                status_with("500m", None),
                true,
                true,
            ),
        ];
        for (name, cs, infeasible, kept) in cases {
            let mut pod = crate::testing::pod("p")
                .cpu("500m")
                .with(|p| {
                    let st = p.status.as_mut().unwrap();
                    st.container_statuses = Some(vec![cs.clone()]);
                    if infeasible {
                        st.conditions = Some(vec![PodCondition {
                            type_: "PodResizePending".into(),
                            status: "True".into(),
                            reason: Some("Infeasible".into()),
                            ..Default::default()
                        }]);
                    }
                })
                .obj();
            let before = calculate_resource(&pod);
            prune_pod(&mut pod);
            let statuses = pod.status.as_ref().unwrap().container_statuses.as_ref();
            assert_eq!(statuses.is_some(), kept, "{name}");
            if let Some(s) = statuses {
                assert_eq!(s[0].image, "", "{name}: only resource fields stay");
                assert_eq!(s[0].allocated_resources, cs.allocated_resources, "{name}");
            }
            assert_eq!(calculate_resource(&pod), before, "{name}: requests unchanged");
        }
    }

    #[test]
    fn streaming_matches_reading_whole_files_at_any_chunk_size() {
        let dir = tempfile::tempdir().unwrap();
        let generated = dir.path().join("gen.json");
        crate::snapshot::generate::write_json_list(&GenerateParams::new(5, 60, 2, 9), &generated).unwrap();
        let mut files = vec![generated];
        for (i, text) in [
            JSON_LIST,
            JSON_STREAM,
            "\u{feff}{\"apiVersion\": \"v1\", \"kind\": \"Node\", \"metadata\": {\"name\": \"a\\\"{\"}}",
        ]
        .iter()
        .enumerate()
        {
            let path = dir.path().join(format!("{i}.json"));
            std::fs::write(&path, text).unwrap();
            files.push(path);
        }
        for path in &files {
            let bytes = std::fs::read(path).unwrap();
            let (want, want_report) = load_bytes(&bytes, path).unwrap();
            for chunk in [1, 2, 7, 64, 1000, CHUNK] {
                let (got, report) = stream_json_file(path, chunk, &PodDetail::Full)
                    .unwrap_or_else(|_| panic!("{} at chunk {chunk}: fell back", path.display()));
                assert_same(&got, &want);
                assert_eq!(report, want_report, "{} at chunk {chunk}", path.display());
            }
        }
    }

    #[test]
    fn streaming_falls_back_to_exact_errors_and_typed_lists() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            ("typed list", JSON_POD_LIST, true),
            (
                "truncated",
                "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [{\"kind\": \"Pod\"",
                false,
            ),
            (
                "bad field",
                "{\"kind\": \"List\", \"items\": [{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"spec\": 5}]}",
                false,
            ),
            (
                "top-level array",
                "[{\"apiVersion\": \"v1\", \"kind\": \"Pod\"}]",
                false,
            ),
        ];
        for (name, text, loads) in cases {
            let path = dir.path().join("f.json");
            std::fs::write(&path, text).unwrap();
            assert!(
                stream_json_file(&path, 16, &PodDetail::Full).is_err(),
                "{name}: streaming declines"
            );
            let exact = load_bytes(text.as_bytes(), &path).map(|(o, _)| o.len());
            let via_file = load_file(&path).map(|(o, _)| o.len());
            assert_eq!(via_file.is_ok(), loads, "{name}");
            assert_eq!(
                via_file.map_err(|e| e.to_string()),
                exact.map_err(|e| e.to_string()),
                "{name}: same result as reading the whole file"
            );
        }
    }

    #[test]
    fn strip_position_only_removes_a_real_suffix() {
        assert_eq!(strip_position("bad at line 3 column 4"), "bad");
        assert_eq!(strip_position("look at line up"), "look at line up");
    }
}
