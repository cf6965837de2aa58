//! A change to the pod or to the cluster, as data: what a hint proposes. The diagnosis applies it to a
//! copy of the snapshot and runs the scheduling cycle again ([`super::hints`]); a test or a user
//! applies the same data to the objects ([`Change::apply_to_objects`]) or to a real cluster (edit the
//! pod's spec, delete the pods, uncordon the node).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeStatus, Pod, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::{Deserialize, Serialize};

use crate::resource::format_amount;
use crate::snapshot::{ClusterObjects, Snapshot, namespaced_key};

/// The taint the node lifecycle controller keeps on a cordoned node; uncordoning removes it too.
pub const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// The phase the PV controller gives a new PersistentVolume with no claim (the only phase
/// VolumeBinding matches an unbound claim to).
const VOLUME_AVAILABLE: &str = "Available";

/// One change (`-o json` writes it; a script or test reads it back).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Change {
    /// Add tolerations that match exactly these taints (one node's) to the pod.
    AddToleration {
        /// The taints.
        taints: Vec<Taint>,
    },
    /// Remove a key from the pod's `nodeSelector`.
    RemoveNodeSelector {
        /// The label key.
        key: String,
    },
    /// Remove one requirement (by key) from a term of the pod's required node affinity (the term when
    /// it is left empty, the whole required affinity when no term is left).
    RemoveNodeAffinityRequirement {
        /// The term's index in `nodeSelectorTerms`.
        term: usize,
        /// The requirement's key.
        key: String,
    },
    /// Lower the pod's total request of a resource (the largest container request gives way first).
    LowerRequest {
        /// The resource.
        resource: String,
        /// The new total, in the resource's units (milli-cpu for cpu, bytes for memory).
        to: i64,
    },
    /// Remove a required pod anti-affinity term from the pod.
    RemovePodAntiAffinityTerm {
        /// Its index in `requiredDuringSchedulingIgnoredDuringExecution`.
        term: usize,
    },
    /// Remove a required pod affinity term from the pod.
    RemovePodAffinityTerm {
        /// Its index in `requiredDuringSchedulingIgnoredDuringExecution`.
        term: usize,
    },
    /// Set a DoNotSchedule topology spread constraint's minDomains (null: unset).
    SetMinDomains {
        /// The constraint's index among the pod's DoNotSchedule constraints.
        constraint: usize,
        /// The new value.
        min_domains: Option<i32>,
    },
    /// Make a DoNotSchedule topology spread constraint ScheduleAnyway (a preference).
    ScheduleAnyway {
        /// The constraint's index among the pod's DoNotSchedule constraints.
        constraint: usize,
    },
    /// `kubectl uncordon NODE`.
    Uncordon {
        /// The node.
        node: String,
    },
    /// Delete (or move elsewhere) these running pods.
    DeletePods {
        /// `namespace/name` of each.
        pods: Vec<String>,
    },
    /// Create a PersistentVolume for an unbound claim no volume can serve: a local volume on one
    /// node, whose `spec.local.path` is a placeholder the user replaces with a directory (or a
    /// mounted disk) of that node.
    CreatePersistentVolume {
        /// The claim it is made for (`namespace/name`).
        claim: String,
        /// The node it is on (its node affinity).
        node: String,
        /// The PersistentVolume as it is applied (no status: the PV controller makes it Available).
        volume: Box<PersistentVolume>,
    },
    /// Several changes together (a node short of cpu and memory needs both lowered).
    All {
        /// The changes.
        changes: Vec<Change>,
    },
}

/// `key=value:Effect`, as kubectl prints taints.
pub fn taint_text(t: &Taint) -> String {
    match t.value.as_deref().filter(|v| !v.is_empty()) {
        Some(v) => format!("{}={v}:{}", t.key, t.effect),
        None => format!("{}:{}", t.key, t.effect),
    }
}

/// The toleration that tolerates exactly `taint` (`Equal` on its value, `Exists` without one).
pub fn toleration_for(taint: &Taint) -> Toleration {
    let value = taint.value.clone().filter(|v| !v.is_empty());
    Toleration {
        key: Some(taint.key.clone()),
        operator: Some(if value.is_some() { "Equal" } else { "Exists" }.to_string()),
        value,
        effect: Some(taint.effect.clone()),
        toleration_seconds: None,
    }
}

const DO_NOT_SCHEDULE: &str = "DoNotSchedule";

impl Change {
    /// The change in words (`tolerate nvidia.com/gpu=present:NoSchedule`).
    pub fn describe(&self) -> String {
        match self {
            Change::AddToleration { taints } => format!(
                "add a toleration for {}",
                taints.iter().map(taint_text).collect::<Vec<_>>().join(", ")
            ),
            Change::RemoveNodeSelector { key } => format!("remove {key} from the pod's nodeSelector"),
            Change::RemoveNodeAffinityRequirement { term, key } => {
                format!("remove the {key} requirement from the pod's required node affinity (term {term})")
            }
            Change::LowerRequest { resource, to } => {
                format!(
                    "lower the pod's {resource} request to {}",
                    format_amount(resource, *to)
                )
            }
            Change::RemovePodAntiAffinityTerm { term } => {
                format!("drop the pod's required anti-affinity term {term} (or make it preferred)")
            }
            Change::RemovePodAffinityTerm { term } => {
                format!("drop the pod's required affinity term {term} (or make it preferred)")
            }
            Change::SetMinDomains {
                constraint,
                min_domains,
            } => match min_domains {
                Some(n) => format!("set minDomains to {n} in topology spread constraint {constraint}"),
                None => format!("unset minDomains in topology spread constraint {constraint}"),
            },
            Change::ScheduleAnyway { constraint } => {
                format!("make topology spread constraint {constraint} whenUnsatisfiable: ScheduleAnyway")
            }
            Change::Uncordon { node } => format!("uncordon {node} (kubectl uncordon {node})"),
            Change::DeletePods { pods } => format!("delete or move {}", pods.join(", ")),
            Change::CreatePersistentVolume { claim, node, volume } => format!(
                "create persistentvolume {} for persistentvolumeclaim {claim} on node {node} (set its \
                 spec.local.path to a directory of {node} first)",
                volume.metadata.name.as_deref().unwrap_or("")
            ),
            Change::All { changes } => changes
                .iter()
                .map(Change::describe)
                .collect::<Vec<_>>()
                .join(" and "),
        }
    }

    /// How big a change it is, smallest first: an edit of the pod's own spec, then a relaxed placement
    /// rule or a smaller request (the pod gives something up), then a change to the cluster (an
    /// administrator's act; deleting pods costs more the more pods).
    pub fn cost(&self) -> usize {
        match self {
            Change::AddToleration { .. }
            | Change::RemoveNodeSelector { .. }
            | Change::RemoveNodeAffinityRequirement { .. }
            | Change::SetMinDomains { .. } => 1,
            Change::LowerRequest { .. }
            | Change::RemovePodAntiAffinityTerm { .. }
            | Change::RemovePodAffinityTerm { .. }
            | Change::ScheduleAnyway { .. } => 2,
            Change::Uncordon { .. } | Change::CreatePersistentVolume { .. } => 3,
            Change::DeletePods { pods } => 3 + pods.len(),
            Change::All { changes } => changes.iter().map(Change::cost).sum(),
        }
    }

    /// The changes this one is made of: an `All`'s parts (flattened), or itself.
    fn parts(&self) -> Vec<&Change> {
        match self {
            Change::All { changes } => changes.iter().flat_map(Change::parts).collect(),
            c => vec![c],
        }
    }

    /// True when this change asks no more than `other`: each of its parts is one of `other`'s, or
    /// smaller (a request lowered less, fewer taints tolerated, fewer pods deleted). A hint that
    /// asks more than another one that works is not offered.
    pub fn asks_no_more_than(&self, other: &Change) -> bool {
        let theirs = other.parts();
        self.parts()
            .iter()
            .all(|mine| theirs.iter().any(|t| mine.part_within(t)))
    }

    /// One part (not an `All`) against another.
    fn part_within(&self, other: &Change) -> bool {
        match (self, other) {
            (
                Change::LowerRequest { resource, to },
                Change::LowerRequest {
                    resource: r,
                    to: other_to,
                },
            ) => resource == r && to >= other_to,
            (Change::AddToleration { taints }, Change::AddToleration { taints: t }) => {
                taints.iter().all(|taint| t.contains(taint))
            }
            (Change::DeletePods { pods }, Change::DeletePods { pods: p }) => {
                pods.iter().all(|pod| p.contains(pod))
            }
            // One volume for the claim is as much to ask as another on another node: of two that
            // work, the first ranked is offered.
            (
                Change::CreatePersistentVolume { claim, .. },
                Change::CreatePersistentVolume { claim: other, .. },
            ) => claim == other,
            _ => self == other,
        }
    }

    /// Edits the pod's spec; false when the change is not to the pod (or does not apply to it).
    pub fn edit_pod(&self, pod: &mut Pod) -> bool {
        if let Change::All { changes } = self {
            return changes.iter().fold(false, |any, c| c.edit_pod(pod) | any);
        }
        let Some(spec) = pod.spec.as_mut() else {
            return false;
        };
        match self {
            Change::AddToleration { taints } => {
                spec.tolerations
                    .get_or_insert_with(Vec::new)
                    .extend(taints.iter().map(toleration_for));
                !taints.is_empty()
            }
            Change::RemoveNodeSelector { key } => spec
                .node_selector
                .as_mut()
                .is_some_and(|selector| selector.remove(key).is_some()),
            Change::RemoveNodeAffinityRequirement { term, key } => {
                let Some(required) = spec
                    .affinity
                    .as_mut()
                    .and_then(|a| a.node_affinity.as_mut())
                    .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_mut())
                else {
                    return false;
                };
                let Some(t) = required.node_selector_terms.get_mut(*term) else {
                    return false;
                };
                let before = t.match_expressions.as_ref().map_or(0, Vec::len);
                if let Some(exprs) = t.match_expressions.as_mut() {
                    exprs.retain(|r| r.key != *key);
                }
                if t.match_expressions.as_ref().map_or(0, Vec::len) == before {
                    return false;
                }
                // An empty term matches no node: drop it, and the requirement when no term is left.
                let empty = t.match_expressions.as_ref().is_none_or(Vec::is_empty)
                    && t.match_fields.as_ref().is_none_or(Vec::is_empty);
                if empty {
                    required.node_selector_terms.remove(*term);
                }
                if required.node_selector_terms.is_empty()
                    && let Some(node) = spec.affinity.as_mut().and_then(|a| a.node_affinity.as_mut())
                {
                    node.required_during_scheduling_ignored_during_execution = None;
                }
                true
            }
            Change::LowerRequest { resource, to } => lower_request(spec, resource, *to),
            Change::RemovePodAntiAffinityTerm { term } => spec
                .affinity
                .as_mut()
                .and_then(|a| a.pod_anti_affinity.as_mut())
                .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_mut())
                .is_some_and(|terms| remove_at(terms, *term)),
            Change::RemovePodAffinityTerm { term } => spec
                .affinity
                .as_mut()
                .and_then(|a| a.pod_affinity.as_mut())
                .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_mut())
                .is_some_and(|terms| remove_at(terms, *term)),
            Change::SetMinDomains {
                constraint,
                min_domains,
            } => match hard_constraint(spec, *constraint) {
                Some(c) => {
                    c.min_domains = *min_domains;
                    true
                }
                None => false,
            },
            Change::ScheduleAnyway { constraint } => match hard_constraint(spec, *constraint) {
                Some(c) => {
                    c.when_unsatisfiable = "ScheduleAnyway".to_string();
                    c.min_domains = None;
                    true
                }
                None => false,
            },
            Change::All { .. }
            | Change::Uncordon { .. }
            | Change::DeletePods { .. }
            | Change::CreatePersistentVolume { .. } => false,
        }
    }

    /// Edits a node; false when the change is not to this node.
    pub fn edit_node(&self, node: &mut Node) -> bool {
        if let Change::All { changes } = self {
            return changes.iter().fold(false, |any, c| c.edit_node(node) | any);
        }
        let Change::Uncordon { node: name } = self else {
            return false;
        };
        if node.metadata.name.as_deref() != Some(name.as_str()) {
            return false;
        }
        if let Some(spec) = node.spec.as_mut() {
            spec.unschedulable = None;
            if let Some(taints) = spec.taints.as_mut() {
                taints.retain(|t| t.key != UNSCHEDULABLE_TAINT);
            }
        }
        true
    }

    /// The pods the change deletes (`namespace/name`).
    pub fn deleted_pods(&self) -> Vec<String> {
        match self {
            Change::DeletePods { pods } => pods.clone(),
            Change::All { changes } => changes.iter().flat_map(Change::deleted_pods).collect(),
            _ => Vec::new(),
        }
    }

    /// The PersistentVolumes the change creates, as the cluster holds them once the PV controller
    /// has seen them (phase Available).
    pub fn created_volumes(&self) -> Vec<PersistentVolume> {
        match self {
            Change::CreatePersistentVolume { volume, .. } => {
                let mut volume = (**volume).clone();
                volume.status = Some(PersistentVolumeStatus {
                    phase: Some(VOLUME_AVAILABLE.to_string()),
                    ..Default::default()
                });
                vec![volume]
            }
            Change::All { changes } => changes.iter().flat_map(Change::created_volumes).collect(),
            _ => Vec::new(),
        }
    }

    /// The nodes the change uncordons.
    pub fn uncordoned_nodes(&self) -> Vec<String> {
        match self {
            Change::Uncordon { node } => vec![node.clone()],
            Change::All { changes } => changes.iter().flat_map(Change::uncordoned_nodes).collect(),
            _ => Vec::new(),
        }
    }

    /// Applies the change to a copy of `snapshot` and of `pod`: the pod edited, and a new snapshot
    /// when the cluster changes (None: the snapshot as it is).
    pub fn apply(&self, pod: &Pod, snapshot: &Snapshot) -> Option<(Pod, Option<Snapshot>)> {
        let mut pod = pod.clone();
        let pod_changed = self.edit_pod(&mut pod);
        let deleted = self.deleted_pods();
        let uncordoned = self.uncordoned_nodes();
        let created = self.created_volumes();
        if deleted.is_empty() && uncordoned.is_empty() && created.is_empty() {
            return pod_changed.then_some((pod, None));
        }
        let mut changed = snapshot.clone();
        for key in &deleted {
            let (namespace, name) = key.split_once('/')?;
            changed.remove_pod(namespace, name)?;
        }
        for node in &uncordoned {
            let mut object = (*snapshot.node(node)?.node).clone();
            self.edit_node(&mut object);
            changed.replace_node(Arc::new(object)).ok()?;
        }
        for volume in created {
            let name = volume.metadata.name.clone()?;
            changed.persistent_volumes.insert(
                name,
                Arc::new(crate::snapshot::volume::PersistentVolume::from(volume)),
            );
        }
        Some((pod, Some(changed)))
    }

    /// Applies the change to the objects a snapshot is built from (`pod` is `namespace/name` of the
    /// pod the hint is for); false when it changes nothing.
    pub fn apply_to_objects(&self, pod: &str, objects: &mut ClusterObjects) -> bool {
        let mut changed = false;
        for p in &mut objects.pods {
            let key = namespaced_key(
                p.metadata.namespace.as_deref().unwrap_or("default"),
                p.metadata.name.as_deref().unwrap_or(""),
            );
            if key == pod {
                changed |= self.edit_pod(p);
            }
        }
        for n in &mut objects.nodes {
            changed |= self.edit_node(n);
        }
        let deleted = self.deleted_pods();
        let before = objects.pods.len();
        objects.pods.retain(|p| {
            let key = namespaced_key(
                p.metadata.namespace.as_deref().unwrap_or("default"),
                p.metadata.name.as_deref().unwrap_or(""),
            );
            !deleted.contains(&key)
        });
        let created = self.created_volumes();
        let creates = !created.is_empty();
        objects.persistent_volumes.extend(created);
        changed || creates || objects.pods.len() != before
    }
}

fn remove_at<T>(items: &mut Vec<T>, i: usize) -> bool {
    if i < items.len() {
        items.remove(i);
        true
    } else {
        false
    }
}

/// The pod's `i`-th DoNotSchedule constraint.
fn hard_constraint(
    spec: &mut k8s_openapi::api::core::v1::PodSpec,
    i: usize,
) -> Option<&mut k8s_openapi::api::core::v1::TopologySpreadConstraint> {
    spec.topology_spread_constraints
        .as_mut()?
        .iter_mut()
        .filter(|c| c.when_unsatisfiable == DO_NOT_SCHEDULE)
        .nth(i)
}

/// Lowers the containers' requests of `resource` until their sum is at most `to`, the largest request
/// first.
fn lower_request(spec: &mut k8s_openapi::api::core::v1::PodSpec, resource: &str, to: i64) -> bool {
    let amount = |q: &Quantity| crate::resource::amount_of(resource, q);
    let mut requests: Vec<(usize, i64)> = spec
        .containers
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let q = c.resources.as_ref()?.requests.as_ref()?.get(resource)?;
            Some((i, amount(q)))
        })
        .collect();
    let total: i64 = requests.iter().map(|(_, v)| v).sum();
    if total <= to {
        return false;
    }
    requests.sort_by_key(|r| std::cmp::Reverse(r.1));
    let mut excess = total - to;
    for (i, v) in requests {
        if excess <= 0 {
            break;
        }
        let new = (v - excess).max(0);
        excess -= v - new;
        // A lower request stays within the container's limit, which was at least the old request.
        spec.containers[i]
            .resources
            .get_or_insert_with(Default::default)
            .requests
            .get_or_insert_with(Default::default)
            .insert(resource.to_string(), Quantity(format_amount(resource, new)));
    }
    true
}
