//! What a diagnosis says about one rejection: the plugin, a stable reason code, the nodes it concerns,
//! the object at fault in words, kube-scheduler's own reasons beside them, and the details a tool
//! shows (counts, pods, domains). The reason codes are a versioned list (docs/reasons.md): a code is
//! added, never renamed or removed, within a minor version.

use serde::Serialize;

/// Why a plugin rejects a node, as a stable, machine-readable code. kube-scheduler gives counts and
/// sentences; these name the cause a tool can act on. Within a plugin the codes are declared in the
/// order its Filter checks them (InterPodAffinity: the pod's affinity, its anti-affinity, then the
/// running pods' anti-affinity), so the finding kube-scheduler reports sorts first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum ReasonCode {
    /// NodeAffinity: the node's label differs from the pod's `nodeSelector`, and some node has it.
    NodeSelectorMismatch,
    /// NodeAffinity: no node at all has the `nodeSelector`'s label value.
    NodeSelectorNoNodeHasValue,
    /// NodeAffinity: the node fails a requirement of the pod's required node affinity, which some
    /// node meets.
    NodeAffinityMismatch,
    /// NodeAffinity: no node at all meets a requirement of the pod's required node affinity.
    NodeAffinityNoNodeHasValue,
    /// NodeAffinity: the profile's `addedAffinity` (scheduler-enforced) excludes the node.
    NodeAffinityEnforced,
    /// TaintToleration: a taint the pod does not tolerate, a user's taint (a toleration is proposed).
    TaintNotTolerated,
    /// TaintToleration: a taint Kubernetes itself owns (control plane, node condition, cloud
    /// provider): no toleration is proposed.
    SystemTaintNotTolerated,
    /// NodeUnschedulable: the node is cordoned.
    NodeCordoned,
    /// NodeResourcesFit: the node lacks free cpu, memory or another resource.
    InsufficientResource,
    /// NodeResourcesFit: the node runs as many pods as it allows.
    TooManyPods,
    /// NodePorts: a pod on the node holds a host port the pod wants.
    HostPortInUse,
    /// InterPodAffinity: the pod's required affinity matches pods, but none in the node's domain.
    PodAffinityNotInDomain,
    /// InterPodAffinity: the pod's required affinity matches no pod anywhere.
    PodAffinityNoMatchingPod,
    /// InterPodAffinity: the pod's required anti-affinity matches pods running in the node's domain.
    PodAntiAffinityCollision,
    /// InterPodAffinity: a running pod's required anti-affinity matches the pod in the node's domain.
    ExistingPodAntiAffinityCollision,
    /// PodTopologySpread: placing the pod in the node's domain would exceed maxSkew.
    TopologySpreadMaxSkew,
    /// PodTopologySpread: fewer domains exist than minDomains, so the global minimum counts as 0.
    TopologySpreadMinDomains,
    /// PodTopologySpread: the node lacks the constraint's topology key.
    TopologySpreadMissingTopologyKey,
    /// VolumeBinding: a bound claim's PersistentVolume does not exist.
    BoundVolumeMissing,
    /// VolumeBinding: a bound claim's PersistentVolume's node affinity excludes the node.
    BoundVolumeNodeAffinity,
    /// VolumeBinding: no PersistentVolume can serve an unbound (WaitForFirstConsumer) claim on the
    /// node, and it cannot be provisioned there.
    NoVolumeForClaim,
    /// VolumeBinding: the claim could be provisioned, but no CSIStorageCapacity reachable from the
    /// node has room for it.
    InsufficientStorageCapacity,
    /// VolumeZone: a bound PersistentVolume of the pod is in another zone or region than the node.
    VolumeZoneConflict,
    /// NodeVolumeLimits: the pod's new volumes would pass a CSI driver's attach limit on the node.
    VolumeLimitExceeded,
    /// VolumeRestrictions: a pod on the node mounts the same disk in a conflicting way.
    DiskInUse,
    /// VolumeRestrictions: the pod's ReadWriteOncePod claim is in use by another pod.
    ReadWriteOncePodInUse,
    /// Any other plugin (volume plugins, DynamicResources, out-of-tree...): its reasons as
    /// kube-scheduler gives them, not explained further yet.
    PluginRejected,
}

impl ReasonCode {
    /// Every code, in the order of docs/reasons.md.
    pub const ALL: [ReasonCode; 27] = [
        ReasonCode::NodeSelectorMismatch,
        ReasonCode::NodeSelectorNoNodeHasValue,
        ReasonCode::NodeAffinityMismatch,
        ReasonCode::NodeAffinityNoNodeHasValue,
        ReasonCode::NodeAffinityEnforced,
        ReasonCode::TaintNotTolerated,
        ReasonCode::SystemTaintNotTolerated,
        ReasonCode::NodeCordoned,
        ReasonCode::InsufficientResource,
        ReasonCode::TooManyPods,
        ReasonCode::HostPortInUse,
        ReasonCode::PodAffinityNotInDomain,
        ReasonCode::PodAffinityNoMatchingPod,
        ReasonCode::PodAntiAffinityCollision,
        ReasonCode::ExistingPodAntiAffinityCollision,
        ReasonCode::TopologySpreadMaxSkew,
        ReasonCode::TopologySpreadMinDomains,
        ReasonCode::TopologySpreadMissingTopologyKey,
        ReasonCode::BoundVolumeMissing,
        ReasonCode::BoundVolumeNodeAffinity,
        ReasonCode::NoVolumeForClaim,
        ReasonCode::InsufficientStorageCapacity,
        ReasonCode::VolumeZoneConflict,
        ReasonCode::VolumeLimitExceeded,
        ReasonCode::DiskInUse,
        ReasonCode::ReadWriteOncePodInUse,
        ReasonCode::PluginRejected,
    ];

    /// The code as `-o json` writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasonCode::NodeSelectorMismatch => "NodeSelectorMismatch",
            ReasonCode::NodeSelectorNoNodeHasValue => "NodeSelectorNoNodeHasValue",
            ReasonCode::NodeAffinityMismatch => "NodeAffinityMismatch",
            ReasonCode::NodeAffinityNoNodeHasValue => "NodeAffinityNoNodeHasValue",
            ReasonCode::NodeAffinityEnforced => "NodeAffinityEnforced",
            ReasonCode::TaintNotTolerated => "TaintNotTolerated",
            ReasonCode::SystemTaintNotTolerated => "SystemTaintNotTolerated",
            ReasonCode::NodeCordoned => "NodeCordoned",
            ReasonCode::InsufficientResource => "InsufficientResource",
            ReasonCode::TooManyPods => "TooManyPods",
            ReasonCode::HostPortInUse => "HostPortInUse",
            ReasonCode::PodAntiAffinityCollision => "PodAntiAffinityCollision",
            ReasonCode::ExistingPodAntiAffinityCollision => "ExistingPodAntiAffinityCollision",
            ReasonCode::PodAffinityNotInDomain => "PodAffinityNotInDomain",
            ReasonCode::PodAffinityNoMatchingPod => "PodAffinityNoMatchingPod",
            ReasonCode::TopologySpreadMaxSkew => "TopologySpreadMaxSkew",
            ReasonCode::TopologySpreadMinDomains => "TopologySpreadMinDomains",
            ReasonCode::TopologySpreadMissingTopologyKey => "TopologySpreadMissingTopologyKey",
            ReasonCode::BoundVolumeMissing => "BoundVolumeMissing",
            ReasonCode::BoundVolumeNodeAffinity => "BoundVolumeNodeAffinity",
            ReasonCode::NoVolumeForClaim => "NoVolumeForClaim",
            ReasonCode::InsufficientStorageCapacity => "InsufficientStorageCapacity",
            ReasonCode::VolumeZoneConflict => "VolumeZoneConflict",
            ReasonCode::VolumeLimitExceeded => "VolumeLimitExceeded",
            ReasonCode::DiskInUse => "DiskInUse",
            ReasonCode::ReadWriteOncePodInUse => "ReadWriteOncePodInUse",
            ReasonCode::PluginRejected => "PluginRejected",
        }
    }
}

impl std::fmt::Display for ReasonCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One topology domain's count of matching pods (PodTopologySpread, InterPodAffinity).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DomainCount {
    /// The topology value (`zone-a`).
    pub domain: String,
    /// Matching pods in it.
    pub pods: i64,
}

/// The facts behind a finding, by plugin; `-o json` writes them with a `kind` tag. Volume plugins
/// will add their own variants (claims, candidate PVs) without changing the others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Detail {
    /// A `nodeSelector` entry or a required node affinity requirement.
    NodeAffinity {
        /// `nodeSelector` or `requiredDuringScheduling…` term index (`term 0`).
        source: String,
        /// The requirement as written (`topology.kubernetes.io/zone In [zone-d]`).
        requirement: String,
        /// The label key.
        key: String,
        /// The node's value for the key (null when it has no such label).
        node_value: Option<String>,
        /// Every value the cluster's nodes have for the key.
        cluster_values: Vec<String>,
    },
    /// An untolerated taint.
    Taint {
        /// `key=value:Effect`.
        taint: String,
        /// Who owns it when Kubernetes does (`control plane`, `node condition`, `cloud provider`).
        owner: Option<String>,
    },
    /// The node is cordoned.
    Cordon,
    /// What the node lacks, per resource.
    Resources {
        /// One entry per short resource.
        shortfalls: Vec<crate::plugins::node_resources::fit::Shortfall>,
    },
    /// A host port conflict.
    Ports {
        /// The wanted ports in conflict (`TCP/0.0.0.0:8080`).
        ports: Vec<String>,
        /// The pods holding them (`namespace/name`).
        holders: Vec<String>,
    },
    /// A required pod (anti-)affinity term.
    PodAffinity {
        /// Which pod's term: `incoming` or the running pod (`namespace/name`).
        owner: String,
        /// The term's index among the owner's required terms.
        term: usize,
        /// The term's topologyKey.
        topology_key: String,
        /// The node's domain (null when the node lacks the key).
        domain: Option<String>,
        /// The pods that collide (anti-affinity) in that domain.
        pods: Vec<String>,
        /// Domains that hold matching pods (required affinity).
        domains_with_matches: Vec<String>,
    },
    /// One DoNotSchedule topology spread constraint.
    TopologySpread {
        /// The constraint's index among the pod's DoNotSchedule constraints.
        constraint: usize,
        /// Its topologyKey.
        topology_key: String,
        /// maxSkew.
        max_skew: i32,
        /// minDomains (1 when unset).
        min_domains: i32,
        /// Matching pods per eligible domain.
        domains: Vec<DomainCount>,
        /// The global minimum the skew is measured from (0 when fewer domains than minDomains).
        global_min: i64,
        /// The node's domain (null when the node lacks the key).
        node_domain: Option<String>,
        /// The skew placing the pod in the node's domain would make.
        skew: i64,
        /// The domains where the pod would keep the skew within maxSkew.
        allowed_domains: Vec<String>,
    },
    /// A claim of the pod the node cannot serve (VolumeBinding).
    Volumes {
        /// The claim (`namespace/name`).
        claim: String,
        /// For an unbound claim: each PersistentVolume of its class and why it cannot serve it here.
        volumes: Vec<PvRefusal>,
    },
    /// A bound PersistentVolume's zone or region label the node does not match (VolumeZone).
    VolumeZone {
        /// The PersistentVolume.
        volume: String,
        /// The label (`topology.kubernetes.io/zone`).
        key: String,
        /// The values the volume allows.
        volume_values: Vec<String>,
        /// The node's value (null when it lacks the label).
        node_value: Option<String>,
    },
    /// A CSI driver's attach limit on the node (NodeVolumeLimits).
    VolumeLimit {
        /// The CSI driver.
        driver: String,
        /// Its volumes already on the node.
        attached: i64,
        /// The pod's volumes of it not yet on the node.
        new: i64,
        /// The node's limit for it.
        limit: i64,
    },
    /// The volumes (or claims) the pod wants and the pods holding them (VolumeRestrictions).
    VolumeHolders {
        /// The pod's volumes by name, or its ReadWriteOncePod claims (`namespace/name`).
        volumes: Vec<String>,
        /// The pods holding them (`namespace/name`).
        holders: Vec<String>,
    },
    /// Nothing beyond the plugin's own reasons.
    Reasons,
}

/// A PersistentVolume that cannot serve a claim on a node, and why (VolumeBinding's own check).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PvRefusal {
    /// The PersistentVolume.
    pub volume: String,
    /// Why, in words (`bound to persistentvolumeclaim shop/db-0`, `capacity 5Gi is less than the
    /// 10Gi requested`).
    pub reason: String,
}

/// One plugin's rejection explained, for the nodes it concerns (nodes with the same explanation are
/// one finding).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The plugin.
    pub plugin: String,
    /// The stable code.
    pub reason: ReasonCode,
    /// The nodes, by name.
    pub nodes: Vec<String>,
    /// The object at fault, in words.
    pub message: String,
    /// kube-scheduler's reasons (its words, byte for byte).
    pub scheduler_reasons: Vec<String>,
    /// True when kube-scheduler reports this plugin for every one of these nodes (it stops at the first
    /// rejecting filter; the others are found by running every filter).
    pub reported: bool,
    /// The facts.
    pub detail: Detail,
}

/// What a plugin's explainer reads: the pod, the cluster and the gates the engine decided with.
pub(crate) struct Context<'a> {
    /// The pod.
    pub pod: &'a crate::PodInfo,
    /// The cluster.
    pub snapshot: &'a crate::Snapshot,
    /// The engine's feature gates.
    pub features: &'a crate::features::FeatureGates,
    /// The cycle state PreFilter left (the counts some plugins filtered with).
    pub state: &'a crate::framework::cycle_state::CycleState,
}

/// One explained rejection of one node, with the changes that could lift it (each is checked
/// before it becomes a hint).
#[derive(Debug, Clone)]
pub(crate) struct Explained {
    /// The code.
    pub reason: ReasonCode,
    /// The object at fault, in words.
    pub message: String,
    /// The facts.
    pub detail: Detail,
    /// Candidate changes.
    pub changes: Vec<super::change::Change>,
}
