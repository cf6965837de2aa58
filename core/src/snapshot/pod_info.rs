//! `PodInfo`: a pod plus what kube-scheduler precomputes about it once (requests, priority, parsed
//! affinity terms), so per-node work never re-parses the spec.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodAffinityTerm, WeightedPodAffinityTerm};

use crate::features::FeatureGates;
use crate::labels::{Labels, Selector, SelectorError};
use crate::snapshot::requests::{PodResource, calculate_resource};

/// A parsed pod (anti-)affinity term (Go's `fwk.AffinityTerm`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AffinityTerm {
    /// Namespaces named in the term (or the pod's own when neither namespaces nor a selector is given).
    pub namespaces: BTreeSet<String>,
    /// The label selector for pods.
    pub selector: Selector,
    /// The topology key.
    pub topology_key: String,
    /// The namespace selector (`Nothing` when unset).
    pub namespace_selector: Selector,
}

impl AffinityTerm {
    /// Parses a term of `pod`.
    pub fn new(pod: &Pod, term: &PodAffinityTerm) -> Result<Self, SelectorError> {
        let pod_namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let mut namespaces: BTreeSet<String> = term.namespaces.iter().flatten().cloned().collect();
        if namespaces.is_empty() && term.namespace_selector.is_none() {
            namespaces.insert(pod_namespace);
        }
        Ok(AffinityTerm {
            namespaces,
            selector: Selector::from_label_selector(term.label_selector.as_ref())?,
            topology_key: term.topology_key.clone(),
            namespace_selector: Selector::from_label_selector(term.namespace_selector.as_ref())?,
        })
    }

    /// Go's `AffinityTerm.Matches`: the pod's namespace is selected and its labels match.
    pub fn matches(&self, pod: &PodInfo, namespace_labels: Option<&Labels>) -> bool {
        if self.namespaces.contains(pod.namespace()) || self.namespace_selector.matches_opt(namespace_labels)
        {
            return self.selector.matches_opt(pod.labels());
        }
        false
    }
}

/// A preferred term with its weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightedAffinityTerm {
    /// The term.
    pub term: AffinityTerm,
    /// Its weight (1–100).
    pub weight: i32,
}

/// A host port a container asks for: (hostIP, protocol, hostPort).
pub type HostPort = (String, String, i32);

/// Go's `GetHostPorts`: host ports of regular containers and of sidecar (restartable init) containers.
pub fn host_ports(pod: &Pod) -> Vec<HostPort> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    sidecars
        .chain(spec.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.host_port.unwrap_or(0) > 0)
        .map(|p| {
            (
                p.host_ip.clone().unwrap_or_default(),
                p.protocol.clone().unwrap_or_default(),
                p.host_port.unwrap_or(0),
            )
        })
        .collect()
}

/// A pod with its precomputed scheduling facts.
#[derive(Debug, Clone)]
pub struct PodInfo {
    /// The pod (pruned of fields the scheduler never reads).
    pub pod: Arc<Pod>,
    /// Requests and non-zero requests.
    pub resource: PodResource,
    /// Host ports of its containers and sidecars (Go's `GetHostPorts`).
    pub host_ports: Vec<HostPort>,
    /// `spec.priority` (0 when unset).
    pub priority: i32,
    /// Required pod affinity terms.
    pub required_affinity_terms: Vec<AffinityTerm>,
    /// Required pod anti-affinity terms.
    pub required_anti_affinity_terms: Vec<AffinityTerm>,
    /// Preferred pod affinity terms.
    pub preferred_affinity_terms: Vec<WeightedAffinityTerm>,
    /// Preferred pod anti-affinity terms.
    pub preferred_anti_affinity_terms: Vec<WeightedAffinityTerm>,
    /// The first affinity parse error, if any (the API server does not validate everything).
    pub parse_error: Option<String>,
}

fn parse_terms(
    pod: &Pod,
    terms: Option<&Vec<PodAffinityTerm>>,
    err: &mut Option<String>,
) -> Vec<AffinityTerm> {
    terms
        .into_iter()
        .flatten()
        .filter_map(|t| match AffinityTerm::new(pod, t) {
            Ok(t) => Some(t),
            Err(e) => {
                err.get_or_insert_with(|| e.to_string());
                None
            }
        })
        .collect()
}

fn parse_weighted(
    pod: &Pod,
    terms: Option<&Vec<WeightedPodAffinityTerm>>,
    err: &mut Option<String>,
) -> Vec<WeightedAffinityTerm> {
    terms
        .into_iter()
        .flatten()
        .filter_map(|t| match AffinityTerm::new(pod, &t.pod_affinity_term) {
            Ok(term) => Some(WeightedAffinityTerm {
                term,
                weight: t.weight,
            }),
            Err(e) => {
                err.get_or_insert_with(|| e.to_string());
                None
            }
        })
        .collect()
}

impl PodInfo {
    /// Precomputes everything for `pod`, with v1.37.1's default gates (see [`PodInfo::with_features`]).
    pub fn new(pod: Pod) -> Self {
        Self::with_features(Arc::new(pod), &FeatureGates::v1_37())
    }

    /// Precomputes everything for a shared pod, with v1.37.1's default gates.
    pub fn from_arc(pod: Arc<Pod>) -> Self {
        Self::with_features(pod, &FeatureGates::v1_37())
    }

    /// Precomputes everything for a shared pod; its requests are summed as `features` say (upstream's
    /// `CalculateResource` reads the scheduler's gates), so a snapshot builds its pods with its own.
    pub fn with_features(pod: Arc<Pod>, features: &FeatureGates) -> Self {
        let mut err = None;
        let affinity = pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
        let pa = affinity.and_then(|a| a.pod_affinity.as_ref());
        let paa = affinity.and_then(|a| a.pod_anti_affinity.as_ref());
        let required_affinity_terms = parse_terms(
            &pod,
            pa.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref()),
            &mut err,
        );
        let required_anti_affinity_terms = parse_terms(
            &pod,
            paa.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref()),
            &mut err,
        );
        let preferred_affinity_terms = parse_weighted(
            &pod,
            pa.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref()),
            &mut err,
        );
        let preferred_anti_affinity_terms = parse_weighted(
            &pod,
            paa.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref()),
            &mut err,
        );
        PodInfo {
            resource: calculate_resource(&pod, features),
            host_ports: host_ports(&pod),
            priority: pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0),
            required_affinity_terms,
            required_anti_affinity_terms,
            preferred_affinity_terms,
            preferred_anti_affinity_terms,
            parse_error: err,
            pod,
        }
    }

    /// Precomputes everything for a pod already on a node, then drops its container specs and
    /// statuses: once requests and host ports are taken, nothing reads the containers of a pod that is
    /// not being scheduled, and a k8s-openapi `Container` is over 2 KB inline, so at 150,000 pods they
    /// are more than half of a snapshot's memory. The pod being scheduled must keep its containers:
    /// build it with [`PodInfo::new`]. v1.37.1's default gates; see [`PodInfo::placed_with_features`].
    pub fn placed(pod: Pod) -> Self {
        Self::placed_with_features(pod, &FeatureGates::v1_37())
    }

    /// [`PodInfo::placed`] with the requests summed as `features` say.
    pub fn placed_with_features(pod: Pod, features: &FeatureGates) -> Self {
        let mut info = PodInfo::with_features(Arc::new(pod), features);
        if let Some(pod) = Arc::get_mut(&mut info.pod) {
            if let Some(spec) = pod.spec.as_mut() {
                spec.containers = Vec::new();
                spec.init_containers = None;
                spec.ephemeral_containers = None;
            }
            if let Some(status) = pod.status.as_mut() {
                status.container_statuses = None;
                status.init_container_statuses = None;
                status.ephemeral_container_statuses = None;
            }
        }
        info
    }

    /// `metadata.namespace`.
    pub fn namespace(&self) -> &str {
        self.pod.metadata.namespace.as_deref().unwrap_or("")
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.pod.metadata.name.as_deref().unwrap_or("")
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> &str {
        self.pod.metadata.uid.as_deref().unwrap_or("")
    }

    /// `namespace/name`: the key kube-scheduler uses in caches and messages.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace(), self.name())
    }

    /// `metadata.labels`.
    pub fn labels(&self) -> Option<&Labels> {
        self.pod.metadata.labels.as_ref()
    }

    /// `spec.nodeName` ("" when unbound).
    pub fn node_name(&self) -> &str {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or("")
    }

    /// `status.nominatedNodeName` ("" when none).
    pub fn nominated_node_name(&self) -> &str {
        self.pod
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.as_deref())
            .unwrap_or("")
    }

    /// `spec.schedulerName` (default "default-scheduler").
    pub fn scheduler_name(&self) -> &str {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or("default-scheduler")
    }

    /// True when `metadata.deletionTimestamp` is set.
    pub fn is_terminating(&self) -> bool {
        self.pod.metadata.deletion_timestamp.is_some()
    }

    /// True when the pod has pod affinity or anti-affinity (Go's `podWithAffinity`).
    pub fn has_affinity(&self) -> bool {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.affinity.as_ref())
            .is_some_and(|a| a.pod_affinity.is_some() || a.pod_anti_affinity.is_some())
    }

    /// True when the pod has required anti-affinity terms.
    pub fn has_required_anti_affinity(&self) -> bool {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.pod_anti_affinity.as_ref())
            .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())
            .is_some_and(|t| !t.is_empty())
    }
}
