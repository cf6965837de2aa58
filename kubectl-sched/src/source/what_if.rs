//! What-if flags (`--set`, `--without-pod`, `--uncordon`, `--add-node`): changes made in memory to the
//! loaded cluster and to the pod being evaluated, before the snapshot is built. Nothing is written.
//!
//! [`WhatIf::from_args`] checks every flag's shape (a bad path or quantity fails, naming the flag);
//! [`WhatIf::apply`] makes the changes and says what it did ([`Applied`]), so
//! that the output can tell the reader the answer is about a changed cluster. The cluster part and the
//! pod part can also be applied separately ([`WhatIf::apply_to_cluster`], [`WhatIf::apply_to_pod`]) by
//! commands that evaluate several pods.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, Node, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use sched_core::ClusterObjects;
use serde::Serialize;

use crate::cli::WhatIfArgs;

/// The taint the node controller adds to a cordoned node (and removes when it is uncordoned).
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";
/// The label kubelet sets to the node's name; a copy gets its own.
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// More copies than this is a typo, not a question (and would only exhaust memory).
pub const MAX_COPIES: u32 = 1000;

/// Why a what-if flag could not be understood or applied; every message starts with the flag and its
/// value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WhatIfError {
    /// A flag's value does not have the expected shape (`PATH=VALUE`, `NS/NAME`, `NAME=COUNT`).
    #[error("{flag} {value:?}: expected {expected}")]
    Shape {
        /// The flag.
        flag: &'static str,
        /// Its value.
        value: String,
        /// What it should look like.
        expected: &'static str,
    },
    /// `--set` names a path this command does not know.
    #[error(
        "--set {value:?}: unknown path {path:?} (use resources.requests.RES, resources.limits.RES, \
         containers[NAME].resources.requests.RES, containers[NAME].resources.limits.RES, \
         nodeSelector.KEY, priorityClassName or schedulerName)"
    )]
    UnknownPath {
        /// The flag's value.
        value: String,
        /// The path.
        path: String,
    },
    /// `--set` gives a resource a value that is not a Kubernetes quantity, or a negative one.
    #[error("--set {value:?}: invalid quantity {quantity:?} (use e.g. 500m, 2, 1Gi)")]
    Quantity {
        /// The flag's value.
        value: String,
        /// The quantity.
        quantity: String,
    },
    /// `--set` gives an empty name where one is needed.
    #[error("--set {value:?}: {what} must not be empty")]
    Empty {
        /// The flag's value.
        value: String,
        /// What is empty.
        what: &'static str,
    },
    /// `--set containers[NAME]...` names no container of the pod.
    #[error("--set {value:?}: the pod has no container {container:?} (it has {known})")]
    NoSuchContainer {
        /// The flag's value.
        value: String,
        /// The container.
        container: String,
        /// The pod's containers.
        known: String,
    },
    /// `--set priorityClassName=X` names no PriorityClass of the cluster.
    #[error("--set {value:?}: no PriorityClass {class:?} in the cluster")]
    NoSuchPriorityClass {
        /// The flag's value.
        value: String,
        /// The class.
        class: String,
    },
    /// `--set` on a pod that has no spec.
    #[error("--set {value:?}: the pod has no spec")]
    NoSpec {
        /// The flag's value.
        value: String,
    },
    /// `--without-pod` names no pod of the cluster.
    #[error("--without-pod {value:?}: pod not found")]
    PodNotFound {
        /// The flag's value.
        value: String,
    },
    /// `--without-pod` names the pod being evaluated.
    #[error("--without-pod {value:?}: that is the pod being evaluated")]
    WithoutSelf {
        /// The flag's value.
        value: String,
    },
    /// `--uncordon` or `--add-node` names no node of the cluster.
    #[error("{flag} {value:?}: node {node:?} not found")]
    NodeNotFound {
        /// The flag.
        flag: &'static str,
        /// Its value.
        value: String,
        /// The node.
        node: String,
    },
    /// `--add-node` with a count that is not 1 to [`MAX_COPIES`].
    #[error("--add-node {value:?}: COUNT must be a whole number from 1 to {MAX_COPIES}")]
    Count {
        /// The flag's value.
        value: String,
    },
}

/// One applied what-if, as the output lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Applied {
    /// The flag (`--set`, `--without-pod`, `--uncordon`, `--add-node`).
    pub flag: &'static str,
    /// Its value as given.
    pub value: String,
    /// What it changed.
    pub effect: String,
}

impl std::fmt::Display for Applied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} ({})", self.flag, self.value, self.effect)
    }
}

/// `requests` or `limits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    Requests,
    Limits,
}

impl List {
    fn name(self) -> &'static str {
        match self {
            List::Requests => "request",
            List::Limits => "limit",
        }
    }
}

/// What one `--set` changes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Change {
    /// A container resource; `container` None means every (regular) container.
    Resource {
        container: Option<String>,
        list: List,
        resource: String,
        quantity: String,
    },
    NodeSelector {
        key: String,
        value: String,
    },
    PriorityClassName(String),
    SchedulerName(String),
}

/// One `--set`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Set {
    /// The flag's value, for messages.
    raw: String,
    change: Change,
}

/// The what-if flags, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WhatIf {
    sets: Vec<Set>,
    /// (raw value, namespace, name).
    without_pods: Vec<(String, String, String)>,
    uncordon: Vec<String>,
    /// (raw value, node, count).
    add_nodes: Vec<(String, String, u32)>,
}

fn shape(flag: &'static str, value: &str, expected: &'static str) -> WhatIfError {
    WhatIfError::Shape {
        flag,
        value: value.to_string(),
        expected,
    }
}

/// The resource part of `resources.requests.RES` / `resources.limits.RES`, or None for another path.
fn resource_path(path: &str) -> Option<(List, &str)> {
    let rest = path.strip_prefix("resources.")?;
    if let Some(res) = rest.strip_prefix("requests.") {
        Some((List::Requests, res))
    } else {
        rest.strip_prefix("limits.").map(|res| (List::Limits, res))
    }
}

/// A quantity the API server would accept for a container resource: well-formed and not negative.
fn check_quantity(raw: &str, quantity: &str) -> Result<(), WhatIfError> {
    let bad = || WhatIfError::Quantity {
        value: raw.to_string(),
        quantity: quantity.to_string(),
    };
    let milli = sched_core::resource::parse_milli_value(quantity).map_err(|_| bad())?;
    if milli < 0 || quantity.trim() != quantity {
        return Err(bad());
    }
    Ok(())
}

fn parse_set(raw: &str) -> Result<Set, WhatIfError> {
    let (path, value) = raw
        .split_once('=')
        .ok_or_else(|| shape("--set", raw, "PATH=VALUE"))?;
    // kubectl-style paths may start at the pod (`spec.`); both spellings mean the same field.
    let path = path.strip_prefix("spec.").unwrap_or(path);
    let unknown = || WhatIfError::UnknownPath {
        value: raw.to_string(),
        path: path.to_string(),
    };
    let empty = |what| WhatIfError::Empty {
        value: raw.to_string(),
        what,
    };
    let resource = |container: Option<String>, rest: &str| -> Result<Change, WhatIfError> {
        let (list, resource) = resource_path(rest).ok_or_else(unknown)?;
        if resource.is_empty() {
            return Err(empty("the resource name"));
        }
        check_quantity(raw, value)?;
        Ok(Change::Resource {
            container,
            list,
            resource: resource.to_string(),
            quantity: value.to_string(),
        })
    };
    let change = if let Some(rest) = path.strip_prefix("containers[") {
        let (name, rest) = rest.split_once("].").ok_or_else(unknown)?;
        if name.is_empty() {
            return Err(empty("the container name"));
        }
        resource(Some(name.to_string()), rest)?
    } else if path.starts_with("resources.") {
        resource(None, path)?
    } else if let Some(key) = path.strip_prefix("nodeSelector.") {
        if key.is_empty() {
            return Err(empty("the label key"));
        }
        Change::NodeSelector {
            key: key.to_string(),
            value: value.to_string(),
        }
    } else if path == "priorityClassName" {
        Change::PriorityClassName(value.to_string())
    } else if path == "schedulerName" {
        if value.is_empty() {
            return Err(empty("the scheduler name"));
        }
        Change::SchedulerName(value.to_string())
    } else {
        return Err(unknown());
    };
    Ok(Set {
        raw: raw.to_string(),
        change,
    })
}

fn parse_add_node(raw: &str) -> Result<(String, String, u32), WhatIfError> {
    let (node, count) = raw
        .split_once('=')
        .filter(|(node, _)| !node.is_empty())
        .ok_or_else(|| shape("--add-node", raw, "NAME=COUNT"))?;
    let count = count
        .parse::<u32>()
        .ok()
        .filter(|c| (1..=MAX_COPIES).contains(c))
        .ok_or_else(|| WhatIfError::Count {
            value: raw.to_string(),
        })?;
    Ok((raw.to_string(), node.to_string(), count))
}

fn namespace_of(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}

fn name_of(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or("")
}

fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or("")
}

impl WhatIf {
    /// Checks the flags; `namespace` is the one a `--without-pod NAME` without `NS/` is in.
    pub fn from_args(args: &WhatIfArgs, namespace: &str) -> Result<WhatIf, WhatIfError> {
        let sets = args
            .set
            .iter()
            .map(|raw| parse_set(raw))
            .collect::<Result<_, _>>()?;
        let without_pods = args
            .without_pod
            .iter()
            .map(|raw| {
                let name = super::pods::pod_name(raw);
                let (ns, name) = name.split_once('/').unwrap_or((namespace, name));
                if ns.is_empty() || name.is_empty() || name.contains('/') {
                    return Err(shape("--without-pod", raw, "NS/NAME"));
                }
                Ok((raw.clone(), ns.to_string(), name.to_string()))
            })
            .collect::<Result<_, _>>()?;
        let uncordon = args
            .uncordon
            .iter()
            .map(|raw| {
                if raw.is_empty() {
                    Err(shape("--uncordon", raw, "a node name"))
                } else {
                    Ok(raw.clone())
                }
            })
            .collect::<Result<_, _>>()?;
        let add_nodes = args
            .add_node
            .iter()
            .map(|raw| parse_add_node(raw))
            .collect::<Result<_, _>>()?;
        Ok(WhatIf {
            sets,
            without_pods,
            uncordon,
            add_nodes,
        })
    }

    /// Applies everything: `--set` to `pod` (the pod being evaluated, already out of `objects`), the
    /// rest to `objects`. In the order of the flags' help: sets, removed pods, uncordoned nodes, added
    /// nodes.
    pub fn apply(&self, pod: &mut Pod, objects: &mut ClusterObjects) -> Result<Vec<Applied>, WhatIfError> {
        // Removing the pod being evaluated would leave nothing to evaluate; say so rather than "not found".
        if let Some((raw, ..)) = self
            .without_pods
            .iter()
            .find(|(_, ns, name)| ns == namespace_of(pod) && name == name_of(pod))
        {
            return Err(WhatIfError::WithoutSelf { value: raw.clone() });
        }
        let mut applied = self.apply_to_pod(pod, &objects.priority_classes)?;
        applied.extend(self.apply_to_cluster(objects)?);
        Ok(applied)
    }

    /// `--set` on one pod. `priority_classes` resolve a new priorityClassName, as the Priority admission
    /// plugin would for a pod created with it.
    pub fn apply_to_pod(
        &self,
        pod: &mut Pod,
        priority_classes: &[PriorityClass],
    ) -> Result<Vec<Applied>, WhatIfError> {
        let mut applied = Vec::new();
        for set in &self.sets {
            let effect = apply_set(set, pod, priority_classes)?;
            applied.push(Applied {
                flag: "--set",
                value: set.raw.clone(),
                effect,
            });
        }
        Ok(applied)
    }

    /// `--without-pod`, `--uncordon` and `--add-node` on the cluster.
    pub fn apply_to_cluster(&self, objects: &mut ClusterObjects) -> Result<Vec<Applied>, WhatIfError> {
        let mut applied = Vec::new();
        for (raw, ns, name) in &self.without_pods {
            let effect = remove_pod(objects, ns, name)
                .ok_or_else(|| WhatIfError::PodNotFound { value: raw.clone() })?;
            applied.push(Applied {
                flag: "--without-pod",
                value: raw.clone(),
                effect,
            });
        }
        for name in &self.uncordon {
            let node = objects
                .nodes
                .iter_mut()
                .find(|n| node_name(n) == name)
                .ok_or_else(|| WhatIfError::NodeNotFound {
                    flag: "--uncordon",
                    value: name.clone(),
                    node: name.clone(),
                })?;
            applied.push(Applied {
                flag: "--uncordon",
                value: name.clone(),
                effect: uncordon(node),
            });
        }
        for (raw, name, count) in &self.add_nodes {
            let names = add_copies(objects, name, *count).ok_or_else(|| WhatIfError::NodeNotFound {
                flag: "--add-node",
                value: raw.clone(),
                node: name.clone(),
            })?;
            applied.push(Applied {
                flag: "--add-node",
                value: raw.clone(),
                effect: if names.len() == 1 {
                    format!("added {}, an empty copy of {name}", names.join(", "))
                } else {
                    format!("added {}, empty copies of {name}", names.join(", "))
                },
            });
        }
        Ok(applied)
    }
}

/// Makes one `--set` change; returns what it did.
fn apply_set(set: &Set, pod: &mut Pod, priority_classes: &[PriorityClass]) -> Result<String, WhatIfError> {
    let raw = &set.raw;
    let spec = pod
        .spec
        .as_mut()
        .ok_or_else(|| WhatIfError::NoSpec { value: raw.clone() })?;
    match &set.change {
        Change::Resource {
            container,
            list,
            resource,
            quantity,
        } => {
            // Pod-level requests (PodLevelResources) replace the containers' sum for cpu and memory: a
            // change to the containers alone would look like it did nothing.
            let pod_level = spec
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .is_some_and(|r| r.contains_key(resource));
            let targets: Vec<&mut Container> = match container {
                None => spec.containers.iter_mut().collect(),
                Some(name) => {
                    let known: Vec<String> = spec.containers.iter().map(|c| c.name.clone()).collect();
                    let found: Vec<&mut Container> =
                        spec.containers.iter_mut().filter(|c| &c.name == name).collect();
                    if found.is_empty() {
                        return Err(WhatIfError::NoSuchContainer {
                            value: raw.clone(),
                            container: name.clone(),
                            known: if known.is_empty() {
                                "none".to_string()
                            } else {
                                known.join(", ")
                            },
                        });
                    }
                    found
                }
            };
            let mut changed = Vec::new();
            let mut defaulted = false;
            for c in targets {
                let resources = c.resources.get_or_insert_with(Default::default);
                let q = Quantity(quantity.clone());
                match list {
                    List::Requests => {
                        resources
                            .requests
                            .get_or_insert_with(BTreeMap::new)
                            .insert(resource.clone(), q);
                    }
                    List::Limits => {
                        resources
                            .limits
                            .get_or_insert_with(BTreeMap::new)
                            .insert(resource.clone(), q.clone());
                        // As the API server defaults it for a pod created with this limit: a request
                        // left unset is the limit.
                        let requests = resources.requests.get_or_insert_with(BTreeMap::new);
                        if !requests.contains_key(resource) {
                            requests.insert(resource.clone(), q);
                            defaulted = true;
                        }
                    }
                }
                changed.push(c.name.clone());
            }
            let names: BTreeSet<String> = changed.iter().cloned().collect();
            forget_resized_resources(pod, &names);
            let whom = match (container, changed.len()) {
                (_, 0) => return Ok("the pod has no containers: nothing changed".to_string()),
                (Some(name), _) => format!("container {name}"),
                (None, 1) => format!("its container {}", changed[0]),
                (None, n) => format!("each of its {n} containers"),
            };
            let mut effect = format!("{resource} {} {quantity} for {whom}", list.name());
            if defaulted {
                effect.push_str(", and the request where unset");
            }
            if pod_level {
                effect.push_str(&format!(
                    "; note: the pod-level resources.requests.{resource} still decides"
                ));
            }
            Ok(effect)
        }
        Change::NodeSelector { key, value } => {
            spec.node_selector
                .get_or_insert_with(BTreeMap::new)
                .insert(key.clone(), value.clone());
            Ok(format!("nodeSelector {key}={value}"))
        }
        Change::PriorityClassName(class) => {
            // The Priority admission plugin resolves the class when the pod is created; the old priority
            // (and preemptionPolicy) came from the old class.
            let old = (spec.priority_class_name.take(), spec.priority.take());
            spec.priority_class_name = (!class.is_empty()).then(|| class.clone());
            if let Err(_unknown) = sched_core::admission::admit_priority(spec, priority_classes) {
                (spec.priority_class_name, spec.priority) = old;
                return Err(WhatIfError::NoSuchPriorityClass {
                    value: raw.clone(),
                    class: class.clone(),
                });
            }
            let policy = priority_classes
                .iter()
                .find(|pc| pc.metadata.name.as_deref() == Some(class.as_str()))
                .and_then(|pc| pc.preemption_policy.clone());
            spec.preemption_policy = policy;
            Ok(format!(
                "priorityClassName {class}, priority {}",
                spec.priority.unwrap_or(0)
            ))
        }
        Change::SchedulerName(name) => {
            spec.scheduler_name = Some(name.clone());
            Ok(format!("schedulerName {name}"))
        }
    }
}

/// A running pod's kubelet-reported resources (in-place resize) count over its spec; a what-if on the
/// spec is about the pod as if created with it, so the changed containers' reports (and the pod-level
/// ones, which sum them) are dropped.
fn forget_resized_resources(pod: &mut Pod, containers: &BTreeSet<String>) {
    let Some(status) = pod.status.as_mut() else {
        return;
    };
    status.allocated_resources = None;
    status.resources = None;
    for cs in status
        .container_statuses
        .iter_mut()
        .flatten()
        .filter(|cs| containers.contains(&cs.name))
    {
        cs.allocated_resources = None;
        cs.resources = None;
    }
}

/// Removes the pod wherever the loader put it (whole, or reduced to its scheduling facts); None when
/// there is no such pod.
fn remove_pod(objects: &mut ClusterObjects, ns: &str, name: &str) -> Option<String> {
    let mut node = None;
    let mut found = false;
    objects.pods.retain(|p| {
        let hit = namespace_of(p) == ns && name_of(p) == name;
        if hit {
            found = true;
            node = p.spec.as_ref().and_then(|s| s.node_name.clone());
        }
        !hit
    });
    objects.placed_pods.retain(|p| {
        let hit = p.namespace() == ns && p.name() == name;
        if hit {
            found = true;
            node = Some(p.node_name().to_string());
        }
        !hit
    });
    found.then(|| match node.filter(|n| !n.is_empty()) {
        Some(node) => format!("removed {ns}/{name} from {node}"),
        None => format!("removed pending pod {ns}/{name}"),
    })
}

/// `kubectl uncordon`: the node is schedulable again, and the taint the node controller keeps in step
/// with spec.unschedulable goes with it (TaintToleration would still reject the pod otherwise).
fn uncordon(node: &mut Node) -> String {
    let spec = node.spec.get_or_insert_with(Default::default);
    let was_cordoned = spec.unschedulable.unwrap_or(false);
    spec.unschedulable = Some(false);
    let mut removed_taint = false;
    if let Some(taints) = spec.taints.as_mut() {
        let before = taints.len();
        taints.retain(|t| t.key != UNSCHEDULABLE_TAINT);
        removed_taint = taints.len() != before;
    }
    match (was_cordoned, removed_taint) {
        (true, true) => format!("uncordoned, {UNSCHEDULABLE_TAINT} taint removed"),
        (true, false) => "uncordoned".to_string(),
        (false, true) => format!("was not cordoned; {UNSCHEDULABLE_TAINT} taint removed"),
        (false, false) => "was not cordoned: nothing changed".to_string(),
    }
}

/// Adds `count` copies of node `name` (and of its CSINode, which says how many volumes its drivers
/// can attach), as freshly joined nodes of the same kind: new names `NAME-copy-N` (the next free
/// ones), the same labels but the hostname, no pods, no attached volumes. None when there is no such
/// node. ResourceSlices published for the node are not copied: its DRA devices are its own.
fn add_copies(objects: &mut ClusterObjects, name: &str, count: u32) -> Option<Vec<String>> {
    let original = objects.nodes.iter().find(|n| node_name(n) == name)?.clone();
    let csi_node = objects
        .csi_nodes
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(name))
        .cloned();
    let mut taken: BTreeSet<String> = objects.nodes.iter().map(|n| node_name(n).to_string()).collect();
    let mut names = Vec::new();
    let mut i = 0u64;
    while names.len() < count as usize {
        i += 1;
        let candidate = format!("{name}-copy-{i}");
        if !taken.insert(candidate.clone()) {
            continue;
        }
        let mut copy = original.clone();
        copy.metadata.name = Some(candidate.clone());
        copy.metadata.uid = None;
        copy.metadata.resource_version = None;
        copy.metadata.creation_timestamp = None;
        copy.metadata.managed_fields = None;
        if let Some(labels) = copy.metadata.labels.as_mut()
            && labels.contains_key(HOSTNAME_LABEL)
        {
            labels.insert(HOSTNAME_LABEL.to_string(), candidate.clone());
        }
        if let Some(status) = copy.status.as_mut() {
            status.volumes_attached = None;
            status.volumes_in_use = None;
        }
        objects.nodes.push(copy);
        if let Some(csi) = &csi_node {
            let mut csi = csi.clone();
            csi.metadata.name = Some(candidate.clone());
            csi.metadata.uid = None;
            csi.metadata.resource_version = None;
            csi.metadata.owner_references = None;
            objects.csi_nodes.push(csi);
        }
        names.push(candidate);
    }
    Some(names)
}

#[cfg(test)]
mod tests;
