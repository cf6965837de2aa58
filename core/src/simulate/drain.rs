//! What `kubectl drain NODE --ignore-daemonsets` would do, as data: which pods it evicts, which it
//! leaves, and the pending pods their controllers create in their place; honouring
//! PodDisruptionBudgets as the Eviction API (`pkg/registry/core/pod/storage/eviction.go`) does.
//!
//! kubectl (`k8s.io/kubectl/pkg/drain`) first cordons the node ([`cordon`]), then runs every pod on
//! it through its filters, in order: DaemonSet pods are left alone (`--ignore-daemonsets`), mirror
//! pods skipped, pods with emptyDir volumes refused without `--delete-emptydir-data`, and pods no
//! controller owns refused without `--force`; terminal pods pass every filter. One refused pod fails
//! the whole drain before anything is evicted ([`DrainError::Refused`]).
//!
//! Evictions then go through [`DisruptionBudgets`], which carries each PDB's remaining
//! `disruptionsAllowed` from one drain to the next (the disruption controller is not simulated: a
//! budget only goes down). kubectl evicts a node's pods concurrently and retries a refused eviction
//! until its timeout; here they are evicted in the order of the cluster's pods, and a refused one is
//! kept on the node ([`KeptReason::DisruptionBudget`]).

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Node, Pod, PodStatus, Taint};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::labels::Selector;
use crate::plugins::helper::taints::{EFFECT_NO_SCHEDULE, TAINT_NODE_UNSCHEDULABLE};
use crate::snapshot::ClusterObjects;

/// The annotation the kubelet puts on mirror pods (`corev1.MirrorPodAnnotationKey`).
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// kubectl's refusal of pods with emptyDir volumes.
pub const LOCAL_STORAGE_FATAL: &str = "Pods with local storage (use --delete-emptydir-data to override)";
/// kubectl's refusal of pods without a controller.
pub const UNMANAGED_FATAL: &str = "Pods that declare no controller (use --force to override)";
/// The Eviction API's refusal when a budget allows no disruption (HTTP 429).
pub const PDB_VIOLATION_MESSAGE: &str = "Cannot evict pod as it would violate the pod's disruption budget.";
/// The Eviction API's refusal when several budgets cover the pod (HTTP 500).
pub const MULTIPLE_PDBS_MESSAGE: &str =
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.";
/// `MaxDisruptedPodSize`: past this many unconfirmed evictions the API server refuses more.
const MAX_DISRUPTED_POD_SIZE: usize = 2000;
/// Go's `rand.String` alphabet, for the names controllers generate for replacement pods.
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// kubectl drain's flags that change what it does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DrainOptions {
    /// `--force`: also delete pods no controller owns (they are not recreated).
    pub force: bool,
    /// `--delete-emptydir-data`: also delete pods with emptyDir volumes (their data is lost).
    pub delete_emptydir_data: bool,
}

/// One of kubectl's refusals: a message and the pods (`namespace/name`) it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainRefusal {
    /// What kubectl cannot delete ([`LOCAL_STORAGE_FATAL`] or [`UNMANAGED_FATAL`]).
    pub message: &'static str,
    /// The pods, `namespace/name`.
    pub pods: Vec<String>,
}

impl std::fmt::Display for DrainRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot delete {}: {}", self.message, self.pods.join(", "))
    }
}

/// Why a drain cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DrainError {
    /// No node has that name.
    #[error("node {0:?} not found")]
    NodeNotFound(String),
    /// kubectl refuses to delete some pods: nothing is evicted. The message is kubectl's
    /// (`utilerrors.NewAggregate` of its filter errors, in filter order).
    #[error("unable to drain node {node:?} due to error: {}", aggregate(refusals))]
    Refused {
        /// The node.
        node: String,
        /// The refusals, local storage first, then pods without a controller.
        refusals: Vec<DrainRefusal>,
    },
}

/// `utilerrors.NewAggregate(...).Error()`: one error alone, several in brackets.
fn aggregate(refusals: &[DrainRefusal]) -> String {
    let all: Vec<String> = refusals.iter().map(ToString::to_string).collect();
    match all.as_slice() {
        [one] => one.clone(),
        _ => format!("[{}]", all.join(", ")),
    }
}

/// Why a pod stays on the drained node (or goes without anything to re-place).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeptReason {
    /// A DaemonSet's pod (`--ignore-daemonsets`): the DaemonSet tolerates the cordon.
    DaemonSet,
    /// A static pod's mirror: only the kubelet can remove it.
    MirrorPod,
    /// The Eviction API refused it.
    DisruptionBudget {
        /// The budgets that cover the pod.
        budgets: Vec<String>,
        /// The API server's message.
        message: String,
        /// The API server's cause (which budget, and why), when it gives one.
        cause: Option<String>,
    },
    /// Succeeded or Failed: deleted by the drain, but nothing is re-placed.
    Terminal,
}

impl std::fmt::Display for KeptReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeptReason::DaemonSet => write!(f, "DaemonSet pod (ignored, as with --ignore-daemonsets)"),
            KeptReason::MirrorPod => write!(f, "mirror pod (only its kubelet removes it)"),
            KeptReason::DisruptionBudget {
                budgets,
                message,
                cause,
            } => {
                write!(f, "eviction refused by {}: {message}", budgets.join(", "))?;
                match cause {
                    Some(cause) => write!(f, " ({cause})"),
                    None => Ok(()),
                }
            }
            KeptReason::Terminal => write!(f, "Succeeded or Failed: deleted, nothing to re-place"),
        }
    }
}

/// What draining one node does.
#[derive(Debug, Clone, PartialEq)]
pub struct DrainPlan {
    /// The node.
    pub node: String,
    /// The pods evicted from it.
    pub evicted: Vec<Pod>,
    /// The pending pods their controllers (ReplicaSet, ReplicationController, Job, StatefulSet)
    /// create instead: no node, no nomination, empty status; a new name except for StatefulSet pods.
    pub replacements: Vec<Pod>,
    /// The pods that are not evicted (or, terminal, are deleted with nothing to re-place), and why.
    pub kept: Vec<(Pod, KeptReason)>,
}

/// One PodDisruptionBudget as the Eviction API checks it.
#[derive(Debug, Clone)]
struct Budget {
    namespace: String,
    name: String,
    /// `LabelSelectorAsSelector`; `None` when invalid (the Eviction API skips such a budget). An
    /// empty selector matches every pod of the namespace here, unlike in preemption.
    selector: Option<Selector>,
    disruptions_allowed: i32,
    current_healthy: i32,
    desired_healthy: i32,
    /// `status.observedGeneration < metadata.generation`: the controller has not caught up.
    stale: bool,
    disrupted_pods: usize,
    /// `unhealthyPodEvictionPolicy: AlwaysAllow`.
    always_allow_unhealthy: bool,
    /// The `DisruptionAllowed` condition when False: (reason, message).
    not_allowed_condition: Option<(String, String)>,
}

impl Budget {
    fn new(pdb: &PodDisruptionBudget) -> Self {
        let spec = pdb.spec.as_ref();
        let status = pdb.status.as_ref();
        let condition = status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "DisruptionAllowed"))
            .filter(|c| c.status == "False")
            .map(|c| (c.reason.clone(), c.message.clone()));
        Budget {
            namespace: pdb.metadata.namespace.clone().unwrap_or_default(),
            name: pdb.metadata.name.clone().unwrap_or_default(),
            selector: Selector::from_label_selector(spec.and_then(|s| s.selector.as_ref())).ok(),
            disruptions_allowed: status.and_then(|s| s.disruptions_allowed).unwrap_or(0),
            current_healthy: status.and_then(|s| s.current_healthy).unwrap_or(0),
            desired_healthy: status.and_then(|s| s.desired_healthy).unwrap_or(0),
            stale: status.and_then(|s| s.observed_generation).unwrap_or(0)
                < pdb.metadata.generation.unwrap_or(0),
            disrupted_pods: status
                .and_then(|s| s.disrupted_pods.as_ref())
                .map_or(0, |m| m.len()),
            always_allow_unhealthy: spec.and_then(|s| s.unhealthy_pod_eviction_policy.as_deref())
                == Some("AlwaysAllow"),
            not_allowed_condition: condition,
        }
    }

    fn covers(&self, pod: &Pod) -> bool {
        self.namespace == pod.metadata.namespace.as_deref().unwrap_or("")
            && self
                .selector
                .as_ref()
                .is_some_and(|s| s.matches_opt(pod.metadata.labels.as_ref()))
    }

    /// `checkAndDecrement`: takes one disruption, or says why the API server refuses it.
    fn check_and_decrement(&mut self, pod_ready: bool) -> Result<(), KeptReason> {
        let refuse = |message: String, cause: String| KeptReason::DisruptionBudget {
            budgets: vec![self.name.clone()],
            message,
            cause: Some(cause),
        };
        let forbidden = |detail: &str| {
            format!(
                "poddisruptionbudgets.policy {:?} is forbidden: {detail}",
                self.name
            )
        };
        if self.stale {
            return Err(refuse(
                PDB_VIOLATION_MESSAGE.into(),
                format!(
                    "The disruption budget {} is still being processed by the server.",
                    self.name
                ),
            ));
        }
        if self.disruptions_allowed < 0 {
            return Err(refuse(
                forbidden("pdb disruptions allowed is negative"),
                format!(
                    "The disruption budget {} does not allow evicting pods currently: pdb disruptions \
                     allowed is negative",
                    self.name
                ),
            ));
        }
        if self.disrupted_pods > MAX_DISRUPTED_POD_SIZE {
            return Err(refuse(
                forbidden("DisruptedPods map too big - too many evictions not confirmed by PDB controller"),
                format!(
                    "The disruption budget {} does not allow evicting pods currently: too many pending \
                     evictions not confirmed by PDB controller",
                    self.name
                ),
            ));
        }
        if self.disruptions_allowed == 0 {
            let cause = match &self.not_allowed_condition {
                Some((reason, message)) if reason == "SyncFailed" && !message.is_empty() => format!(
                    "The disruption budget {} does not allow evicting pods currently because it failed \
                     sync: {message}",
                    self.name
                ),
                _ if self.current_healthy <= self.desired_healthy => format!(
                    "The disruption budget {} needs {} healthy pods and has {} currently",
                    self.name, self.desired_healthy, self.current_healthy
                ),
                Some((reason, message)) if !message.is_empty() => format!(
                    "The disruption budget {} does not allow evicting pods currently ({reason}): {message}",
                    self.name
                ),
                _ => format!(
                    "The disruption budget {} does not allow evicting pods currently",
                    self.name
                ),
            };
            return Err(refuse(PDB_VIOLATION_MESSAGE.into(), cause));
        }
        self.disruptions_allowed -= 1;
        self.disrupted_pods += 1;
        // What the disruption controller will see next: one healthy pod fewer.
        if pod_ready {
            self.current_healthy -= 1;
        }
        Ok(())
    }
}

/// The cluster's PodDisruptionBudgets with the disruptions they still allow, carried across the
/// drains of one simulation: each eviction takes one from the budget covering the pod.
#[derive(Debug, Clone, Default)]
pub struct DisruptionBudgets {
    budgets: Vec<Budget>,
}

impl DisruptionBudgets {
    /// The budgets as their status says (`disruptionsAllowed`, 0 without a status).
    pub fn new(pdbs: &[PodDisruptionBudget]) -> Self {
        DisruptionBudgets {
            budgets: pdbs.iter().map(Budget::new).collect(),
        }
    }

    /// The budgets of a cluster.
    pub fn from_objects(objects: &ClusterObjects) -> Self {
        Self::new(&objects.pod_disruption_budgets)
    }

    /// The disruptions a budget still allows; `None` when there is no such budget.
    pub fn remaining(&self, namespace: &str, name: &str) -> Option<i32> {
        self.budgets
            .iter()
            .find(|b| b.namespace == namespace && b.name == name)
            .map(|b| b.disruptions_allowed)
    }

    /// The Eviction API on `pod`: `Ok` when it would be evicted (its budget, if any, charged),
    /// otherwise why it is refused. Pods the API server deletes without a budget check (pending,
    /// terminal or terminating) are never refused.
    pub fn evict(&mut self, pod: &Pod) -> Result<(), KeptReason> {
        if eviction_skips_budgets(pod) {
            return Ok(());
        }
        let covering: Vec<usize> = (0..self.budgets.len())
            .filter(|&i| self.budgets[i].covers(pod))
            .collect();
        let index = match covering.as_slice() {
            [] => return Ok(()),
            [one] => *one,
            _ => {
                return Err(KeptReason::DisruptionBudget {
                    budgets: covering.iter().map(|&i| self.budgets[i].name.clone()).collect(),
                    message: MULTIPLE_PDBS_MESSAGE.into(),
                    cause: None,
                });
            }
        };
        let Some(budget) = self.budgets.get_mut(index) else {
            return Ok(());
        };
        let ready = is_ready(pod);
        // An unready pod does not count as healthy: deleting it disrupts nothing the budget guards.
        if !ready
            && (budget.always_allow_unhealthy
                || (budget.current_healthy >= budget.desired_healthy && budget.desired_healthy > 0))
        {
            return Ok(());
        }
        budget.check_and_decrement(ready)
    }
}

/// `canIgnorePDB`: Pending, Succeeded and Failed pods, and pods already terminating.
fn eviction_skips_budgets(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some() || matches!(phase(pod), "Pending" | "Succeeded" | "Failed")
}

fn phase(pod: &Pod) -> &str {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

/// `podutil.IsPodReady`: the Ready condition is True.
fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn controller_of(pod: &Pod) -> Option<&OwnerReference> {
    pod.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
}

fn key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

/// `kubectl cordon`: the node is unschedulable, and carries the taint the node lifecycle controller
/// keeps in step with that (new pods without a toleration are rejected by TaintToleration too).
pub fn cordon(objects: &mut ClusterObjects, node: &str) -> Result<(), DrainError> {
    let n = objects
        .nodes
        .iter_mut()
        .find(|n| n.metadata.name.as_deref() == Some(node))
        .ok_or_else(|| DrainError::NodeNotFound(node.to_string()))?;
    cordon_node(n);
    Ok(())
}

fn cordon_node(node: &mut Node) {
    let spec = node.spec.get_or_insert_with(Default::default);
    spec.unschedulable = Some(true);
    let taints = spec.taints.get_or_insert_with(Vec::new);
    if !taints
        .iter()
        .any(|t| t.key == TAINT_NODE_UNSCHEDULABLE && t.effect == EFFECT_NO_SCHEDULE)
    {
        taints.push(Taint {
            key: TAINT_NODE_UNSCHEDULABLE.into(),
            effect: EFFECT_NO_SCHEDULE.into(),
            value: None,
            time_added: None,
        });
    }
}

/// What kubectl's filters decide for one pod.
enum Verdict {
    Keep(KeptReason),
    Refuse(&'static str),
    Delete,
}

/// kubectl drain's filters in their order (daemonSet, mirrorPod, localStorage, unreplicated), with
/// `--ignore-daemonsets` on. The DaemonSet filter's check that the DaemonSet still exists is not
/// made (the snapshot has no DaemonSets): an orphaned DaemonSet pod is kept like the others.
fn filter(pod: &Pod, options: &DrainOptions) -> Verdict {
    let terminal = is_terminal(pod);
    let controller = controller_of(pod);
    if controller.is_some_and(|c| c.kind == "DaemonSet" && c.api_version == "apps/v1") && !terminal {
        return Verdict::Keep(KeptReason::DaemonSet);
    }
    if pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION))
    {
        return Verdict::Keep(KeptReason::MirrorPod);
    }
    let has_empty_dir = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .is_some_and(|v| v.iter().any(|v| v.empty_dir.is_some()));
    if has_empty_dir && !terminal && !options.delete_emptydir_data {
        return Verdict::Refuse(LOCAL_STORAGE_FATAL);
    }
    if controller.is_none() && !terminal && !options.force {
        return Verdict::Refuse(UNMANAGED_FATAL);
    }
    Verdict::Delete
}

/// Plans `kubectl drain NODE --ignore-daemonsets` (plus `options`) on `objects`, charging evictions
/// to `budgets`. The caller cordons the node ([`cordon`]) and adds the replacements to the cluster;
/// they must be there before the next drain so that its generated names stay unique. Pods loaded
/// compact ([`ClusterObjects::placed_pods`]) are drained too, but lack container specs: load with
/// `PodDetail::Full` to re-place them faithfully.
pub fn plan_drain(
    objects: &ClusterObjects,
    node: &str,
    options: &DrainOptions,
    budgets: &mut DisruptionBudgets,
) -> Result<DrainPlan, DrainError> {
    if !objects
        .nodes
        .iter()
        .any(|n| n.metadata.name.as_deref() == Some(node))
    {
        return Err(DrainError::NodeNotFound(node.to_string()));
    }
    let on_node = |p: &&Pod| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node);
    let pods: Vec<&Pod> = objects
        .placed_pods
        .iter()
        .map(|p| p.pod.as_ref())
        .chain(objects.pods.iter())
        .filter(on_node)
        .collect();

    // kubectl lists every refusal and evicts nothing when there is one.
    let verdicts: Vec<(&Pod, Verdict)> = pods.into_iter().map(|p| (p, filter(p, options))).collect();
    let mut refusals: Vec<DrainRefusal> = Vec::new();
    for message in [LOCAL_STORAGE_FATAL, UNMANAGED_FATAL] {
        let named: Vec<String> = verdicts
            .iter()
            .filter(|(_, v)| matches!(v, Verdict::Refuse(m) if *m == message))
            .map(|(p, _)| key(p))
            .collect();
        if !named.is_empty() {
            refusals.push(DrainRefusal { message, pods: named });
        }
    }
    if !refusals.is_empty() {
        return Err(DrainError::Refused {
            node: node.to_string(),
            refusals,
        });
    }

    let mut taken: HashSet<String> = objects
        .placed_pods
        .iter()
        .map(|p| p.key())
        .chain(objects.pods.iter().map(key))
        .collect();
    let mut plan = DrainPlan {
        node: node.to_string(),
        evicted: Vec::new(),
        replacements: Vec::new(),
        kept: Vec::new(),
    };
    for (pod, verdict) in verdicts {
        match verdict {
            Verdict::Keep(reason) => plan.kept.push((pod.clone(), reason)),
            Verdict::Refuse(_) => {}
            Verdict::Delete if is_terminal(pod) => plan.kept.push((pod.clone(), KeptReason::Terminal)),
            Verdict::Delete => match budgets.evict(pod) {
                Err(reason) => plan.kept.push((pod.clone(), reason)),
                Ok(()) => {
                    if let Some(replacement) = replacement(pod, &mut taken) {
                        plan.replacements.push(replacement);
                    }
                    plan.evicted.push(pod.clone());
                }
            },
        }
    }
    Ok(plan)
}

/// The pod the evicted pod's controller creates: a StatefulSet recreates the same pod (same name,
/// same claims); a ReplicaSet, ReplicationController or Job makes a new one from the same template
/// (a generated name). A pod already terminating was replaced before the drain, except by a
/// StatefulSet, which waits for it to be gone. Pods without a controller, or with another kind of
/// controller, get none.
fn replacement(pod: &Pod, taken: &mut HashSet<String>) -> Option<Pod> {
    let controller = controller_of(pod)?;
    let same_name = match controller.kind.as_str() {
        "StatefulSet" => true,
        "ReplicaSet" | "ReplicationController" | "Job" if pod.metadata.deletion_timestamp.is_none() => false,
        _ => return None,
    };
    let mut new = pod.clone();
    let namespace = new.metadata.namespace.clone().unwrap_or_default();
    if !same_name {
        let prefix = new
            .metadata
            .generate_name
            .clone()
            .filter(|g| !g.is_empty())
            .unwrap_or_else(|| format!("{}-", controller.name));
        let old = new.metadata.name.clone().unwrap_or_default();
        let name = (0u32..)
            .map(|attempt| format!("{prefix}{}", generated_suffix(&namespace, &old, attempt)))
            .find(|name| !taken.contains(&format!("{namespace}/{name}")))
            .unwrap_or_default();
        taken.insert(format!("{namespace}/{name}"));
        new.metadata.name = Some(name);
    }
    let meta = &mut new.metadata;
    meta.uid = None;
    meta.resource_version = None;
    meta.creation_timestamp = None;
    meta.deletion_timestamp = None;
    meta.deletion_grace_period_seconds = None;
    meta.managed_fields = None;
    meta.generation = None;
    if let Some(spec) = new.spec.as_mut() {
        spec.node_name = None;
    }
    new.status = Some(PodStatus {
        phase: Some("Pending".into()),
        ..PodStatus::default()
    });
    Some(new)
}

/// Five characters of Go's `rand.String` alphabet, derived from the evicted pod (so a plan is
/// reproducible) and an attempt number (to step past names in use).
fn generated_suffix(namespace: &str, evicted: &str, attempt: u32) -> String {
    let key = format!("{namespace}/{evicted}/{attempt}");
    let mut h = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    (0..5)
        .map(|_| {
            let c = NAME_ALPHABET[(h % NAME_ALPHABET.len() as u64) as usize];
            h /= NAME_ALPHABET.len() as u64;
            char::from(c)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, Volume};
    use k8s_openapi::api::policy::v1::PodDisruptionBudgetStatus;

    use super::*;
    use crate::testing::{PodBuilder, node, pdb, pod};

    fn owned(b: PodBuilder, api_version: &str, kind: &str, name: &str) -> PodBuilder {
        let (api_version, kind, name) = (api_version.to_string(), kind.to_string(), name.to_string());
        b.with(move |p| {
            p.metadata.owner_references = Some(vec![OwnerReference {
                api_version,
                kind,
                uid: format!("uid-{name}"),
                name,
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]);
        })
    }

    /// A running, ready pod on `node`.
    fn running(name: &str, node_name: &str) -> PodBuilder {
        pod(name)
            .node(node_name)
            .nominated("elsewhere")
            .condition("Ready", "True", "")
            .with(|p| {
                if let Some(s) = p.status.as_mut() {
                    s.phase = Some("Running".into());
                }
            })
    }

    fn of_rs(name: &str, node_name: &str) -> PodBuilder {
        owned(running(name, node_name), "apps/v1", "ReplicaSet", "web-7d9f")
            .label("app", "web")
            .with(|p| p.metadata.generate_name = Some("web-7d9f-".into()))
    }

    fn phase(b: PodBuilder, phase: &str) -> PodBuilder {
        let phase = phase.to_string();
        b.with(move |p| {
            if let Some(s) = p.status.as_mut() {
                s.phase = Some(phase);
            }
        })
    }

    fn empty_dir(b: PodBuilder) -> PodBuilder {
        b.volume(Volume {
            name: "scratch".into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        })
    }

    fn mirror(b: PodBuilder) -> PodBuilder {
        b.with(|p| {
            p.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(MIRROR_POD_ANNOTATION.into(), "abc".into());
        })
    }

    fn cluster(pods: Vec<Pod>, pdbs: Vec<PodDisruptionBudget>) -> ClusterObjects {
        ClusterObjects {
            nodes: vec![node("n1").obj(), node("n2").obj()],
            pods,
            pod_disruption_budgets: pdbs,
            ..ClusterObjects::default()
        }
    }

    fn name(p: &Pod) -> &str {
        p.metadata.name.as_deref().unwrap_or("")
    }

    fn names(pods: &[Pod]) -> Vec<&str> {
        pods.iter().map(name).collect()
    }

    fn kept(plan: &DrainPlan) -> Vec<(&str, KeptReason)> {
        plan.kept.iter().map(|(p, r)| (name(p), r.clone())).collect()
    }

    fn plan(objects: &ClusterObjects, node: &str, options: DrainOptions) -> Result<DrainPlan, DrainError> {
        plan_drain(
            objects,
            node,
            &options,
            &mut DisruptionBudgets::from_objects(objects),
        )
    }

    #[test]
    fn kubectl_filters_decide_what_is_evicted_and_what_stays() {
        let force = DrainOptions {
            force: true,
            delete_emptydir_data: false,
        };
        let both = DrainOptions {
            force: true,
            delete_emptydir_data: true,
        };
        // (case, pod, options, evicted?, replacement name (None: none; "*": generated), kept reason)
        type Case = (
            &'static str,
            Pod,
            DrainOptions,
            bool,
            Option<&'static str>,
            Option<KeptReason>,
        );
        let cases: Vec<Case> = vec![
            (
                "replica set pod",
                of_rs("web-7d9f-abcde", "n1").obj(),
                DrainOptions::default(),
                true,
                Some("*"),
                None,
            ),
            (
                "stateful set pod keeps its name",
                owned(running("db-0", "n1"), "apps/v1", "StatefulSet", "db").obj(),
                DrainOptions::default(),
                true,
                Some("db-0"),
                None,
            ),
            (
                "job pod",
                owned(running("pi-xyz", "n1"), "batch/v1", "Job", "pi").obj(),
                DrainOptions::default(),
                true,
                Some("*"),
                None,
            ),
            (
                "replication controller pod",
                owned(running("rc-xyz", "n1"), "v1", "ReplicationController", "rc").obj(),
                DrainOptions::default(),
                true,
                Some("*"),
                None,
            ),
            (
                "another controller: evicted, not known to be recreated",
                owned(running("x-0", "n1"), "example.com/v1", "Thing", "x").obj(),
                DrainOptions::default(),
                true,
                None,
                None,
            ),
            (
                "daemon set pod",
                owned(running("agent-1", "n1"), "apps/v1", "DaemonSet", "agent").obj(),
                DrainOptions::default(),
                false,
                None,
                Some(KeptReason::DaemonSet),
            ),
            (
                "terminal daemon set pod",
                phase(
                    owned(running("agent-2", "n1"), "apps/v1", "DaemonSet", "agent"),
                    "Succeeded",
                )
                .obj(),
                DrainOptions::default(),
                false,
                None,
                Some(KeptReason::Terminal),
            ),
            (
                "mirror pod, even without controller",
                mirror(running("static-n1", "n1")).obj(),
                DrainOptions::default(),
                false,
                None,
                Some(KeptReason::MirrorPod),
            ),
            (
                "terminal bare pod with emptyDir is not refused",
                empty_dir(phase(running("done", "n1"), "Failed")).obj(),
                DrainOptions::default(),
                false,
                None,
                Some(KeptReason::Terminal),
            ),
            (
                "bare pod with --force: no replacement",
                running("solo", "n1").obj(),
                force,
                true,
                None,
                None,
            ),
            (
                "emptyDir with --delete-emptydir-data",
                empty_dir(of_rs("web-7d9f-eeeee", "n1")).obj(),
                both,
                true,
                Some("*"),
                None,
            ),
            (
                "terminating replica set pod was already replaced",
                of_rs("web-7d9f-ttttt", "n1").terminating().obj(),
                DrainOptions::default(),
                true,
                None,
                None,
            ),
            (
                "pod on another node",
                running("far", "n2").obj(),
                DrainOptions::default(),
                false,
                None,
                None,
            ),
        ];
        for (case, p, options, evicted, replacement, reason) in cases {
            let original = p.clone();
            let objects = cluster(vec![p], vec![]);
            let plan = plan(&objects, "n1", options).unwrap_or_else(|e| panic!("{case}: {e}"));
            assert_eq!(plan.node, "n1");
            assert_eq!(plan.evicted.len(), usize::from(evicted), "{case}");
            assert_eq!(
                kept(&plan),
                reason
                    .map(|r| (name(&original), r))
                    .into_iter()
                    .collect::<Vec<_>>(),
                "{case}"
            );
            match replacement {
                None => assert!(plan.replacements.is_empty(), "{case}"),
                Some(want) => {
                    assert_eq!(plan.replacements.len(), 1, "{case}");
                    let r = &plan.replacements[0];
                    if want == "*" {
                        assert_ne!(name(r), name(&original), "{case}");
                        assert!(name(r).len() > 5, "{case}: {}", name(r));
                    } else {
                        assert_eq!(name(r), want, "{case}");
                    }
                    assert_eq!(r.metadata.namespace, original.metadata.namespace, "{case}");
                    assert_eq!(r.metadata.labels, original.metadata.labels, "{case}");
                    assert_eq!(
                        r.metadata.owner_references, original.metadata.owner_references,
                        "{case}"
                    );
                    assert_eq!(r.metadata.uid, None, "{case}");
                    assert_eq!(r.metadata.deletion_timestamp, None, "{case}");
                    assert_eq!(r.spec.as_ref().and_then(|s| s.node_name.clone()), None, "{case}");
                    assert_eq!(
                        r.status,
                        Some(PodStatus {
                            phase: Some("Pending".into()),
                            ..PodStatus::default()
                        }),
                        "{case}: status cleared, no nomination"
                    );
                }
            }
        }
    }

    #[test]
    fn generated_names_are_unique_and_look_like_the_controllers() {
        let objects = cluster(
            vec![
                of_rs("web-7d9f-aaaaa", "n1").obj(),
                of_rs("web-7d9f-bbbbb", "n1").obj(),
                owned(running("plain", "n1"), "apps/v1", "ReplicaSet", "api").obj(),
            ],
            vec![],
        );
        let p = plan(&objects, "n1", DrainOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        let new = names(&p.replacements);
        assert_eq!(new.len(), 3);
        assert!(
            new[0].starts_with("web-7d9f-") && new[0].len() == "web-7d9f-".len() + 5,
            "{new:?}"
        );
        assert!(
            new[2].starts_with("api-"),
            "without generateName: <owner>-: {new:?}"
        );
        assert_ne!(new[0], new[1]);
        assert!(new.iter().all(|n| !names(&objects.pods).contains(n)), "{new:?}");
        // Deterministic.
        let again = plan(&objects, "n1", DrainOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(names(&again.replacements), new);
        // A name already in use is stepped over.
        let taken = new[0].to_string();
        let mut crowded = objects.clone();
        crowded.pods.push(of_rs(&taken, "n2").obj());
        let p = plan(&crowded, "n1", DrainOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !names(&p.replacements).contains(&taken.as_str()),
            "{:?}",
            names(&p.replacements)
        );
    }

    #[test]
    fn refusals_fail_the_whole_drain_as_kubectl_does() {
        let bare = || running("solo", "n1").obj();
        let scratch = || empty_dir(of_rs("web-7d9f-sssss", "n1")).obj();
        let fine = || of_rs("web-7d9f-fffff", "n1").obj();
        let force = DrainOptions {
            force: true,
            delete_emptydir_data: false,
        };
        let cases: Vec<(&str, Vec<Pod>, DrainOptions, &str)> = vec![
            (
                "no controller",
                vec![fine(), bare()],
                DrainOptions::default(),
                "unable to drain node \"n1\" due to error: cannot delete Pods that declare no controller (use \
                 --force to override): default/solo",
            ),
            (
                "local storage",
                vec![scratch(), fine()],
                force,
                "unable to drain node \"n1\" due to error: cannot delete Pods with local storage (use \
                 --delete-emptydir-data to override): default/web-7d9f-sssss",
            ),
            (
                "both, and a bare pod with emptyDir is refused for its storage first",
                vec![bare(), scratch(), empty_dir(running("both", "n1")).obj()],
                DrainOptions::default(),
                "unable to drain node \"n1\" due to error: [cannot delete Pods with local storage (use \
                 --delete-emptydir-data to override): default/web-7d9f-sssss, default/both, cannot delete \
                 Pods that declare no controller (use --force to override): default/solo]",
            ),
        ];
        for (case, pods, options, want) in cases {
            let objects = cluster(pods, vec![pdb("p").selector("app", "web").allowed(5).obj()]);
            let mut budgets = DisruptionBudgets::from_objects(&objects);
            match plan_drain(&objects, "n1", &options, &mut budgets) {
                Err(e @ DrainError::Refused { .. }) => assert_eq!(e.to_string(), want, "{case}"),
                other => panic!("{case}: {other:?}"),
            }
            assert_eq!(
                budgets.remaining("default", "p"),
                Some(5),
                "{case}: nothing evicted"
            );
        }
    }

    #[test]
    fn a_node_that_does_not_exist_is_an_error() {
        let mut objects = cluster(vec![], vec![]);
        assert_eq!(
            plan(&objects, "ghost", DrainOptions::default()),
            Err(DrainError::NodeNotFound("ghost".into()))
        );
        assert_eq!(
            cordon(&mut objects, "ghost").map_err(|e| e.to_string()),
            Err("node \"ghost\" not found".to_string())
        );
    }

    #[test]
    fn cordon_makes_the_node_unschedulable_and_taints_it_once() {
        let mut objects = cluster(vec![], vec![]);
        for _ in 0..2 {
            assert_eq!(cordon(&mut objects, "n1"), Ok(()));
        }
        let spec = objects.nodes[0].spec.clone().unwrap_or_default();
        assert_eq!(spec.unschedulable, Some(true));
        let taints: Vec<(String, String)> = spec
            .taints
            .unwrap_or_default()
            .into_iter()
            .map(|t| (t.key, t.effect))
            .collect();
        assert_eq!(
            taints,
            [(
                TAINT_NODE_UNSCHEDULABLE.to_string(),
                EFFECT_NO_SCHEDULE.to_string()
            )]
        );
        assert_eq!(
            objects.nodes[1].spec.clone().unwrap_or_default().unschedulable,
            None
        );
    }

    fn healthy(b: PdbBuilder, current: i32, desired: i32) -> PdbBuilder {
        b.with_status(move |s| {
            s.current_healthy = Some(current);
            s.desired_healthy = Some(desired);
        })
    }

    use crate::testing::PdbBuilder;

    trait WithStatus {
        fn with_status(self, f: impl FnOnce(&mut PodDisruptionBudgetStatus)) -> Self;
    }

    impl WithStatus for PdbBuilder {
        fn with_status(mut self, f: impl FnOnce(&mut PodDisruptionBudgetStatus)) -> Self {
            f(self.0.status.get_or_insert_with(Default::default));
            self
        }
    }

    #[test]
    fn budgets_run_out_across_drains() {
        let objects = cluster(
            vec![of_rs("web-1", "n1").obj(), of_rs("web-2", "n2").obj()],
            vec![healthy(pdb("web").selector("app", "web").allowed(1), 2, 1).obj()],
        );
        let mut budgets = DisruptionBudgets::from_objects(&objects);
        let options = DrainOptions::default();
        let first = plan_drain(&objects, "n1", &options, &mut budgets).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(names(&first.evicted), ["web-1"]);
        assert_eq!(first.replacements.len(), 1);
        assert_eq!(budgets.remaining("default", "web"), Some(0));
        let second = plan_drain(&objects, "n2", &options, &mut budgets).unwrap_or_else(|e| panic!("{e}"));
        assert!(second.evicted.is_empty() && second.replacements.is_empty());
        assert_eq!(
            kept(&second),
            [(
                "web-2",
                KeptReason::DisruptionBudget {
                    budgets: vec!["web".into()],
                    message: PDB_VIOLATION_MESSAGE.into(),
                    cause: Some("The disruption budget web needs 1 healthy pods and has 1 currently".into()),
                }
            )]
        );
        assert_eq!(budgets.remaining("default", "web"), Some(0));
        assert_eq!(budgets.remaining("default", "nope"), None);
    }

    #[test]
    fn evictions_follow_the_eviction_api() {
        let web = |name: &str| of_rs(name, "n1");
        let unready = |name: &str| {
            owned(
                phase(pod(name).node("n1"), "Running"),
                "apps/v1",
                "ReplicaSet",
                "web-7d9f",
            )
            .label("app", "web")
        };
        let refused = |budgets: &[&str], message: &str, cause: Option<&str>| {
            Some(KeptReason::DisruptionBudget {
                budgets: budgets.iter().map(|b| b.to_string()).collect(),
                message: message.into(),
                cause: cause.map(str::to_string),
            })
        };
        // (case, pod, budgets, refusal (None: evicted), budget "p" left afterwards)
        type Case = (
            &'static str,
            Pod,
            Vec<PodDisruptionBudget>,
            Option<KeptReason>,
            Option<i32>,
        );
        let cases: Vec<Case> = vec![
            ("no budget", web("a").obj(), vec![], None, None),
            (
                "budget charged",
                web("a").obj(),
                vec![pdb("p").selector("app", "web").allowed(2).obj()],
                None,
                Some(1),
            ),
            (
                "other namespace is not covered",
                web("a").obj(),
                vec![
                    pdb("p")
                        .namespace("other")
                        .selector("app", "web")
                        .allowed(0)
                        .obj(),
                ],
                None,
                None,
            ),
            (
                "an empty selector covers the whole namespace",
                web("a").obj(),
                vec![pdb("p").empty_selector().allowed(0).obj()],
                refused(
                    &["p"],
                    PDB_VIOLATION_MESSAGE,
                    Some("The disruption budget p needs 0 healthy pods and has 0 currently"),
                ),
                Some(0),
            ),
            (
                "a nil selector covers nothing",
                web("a").obj(),
                vec![pdb("p").allowed(0).obj()],
                None,
                Some(0),
            ),
            (
                "no status: nothing allowed",
                web("a").obj(),
                vec![pdb("p").selector("app", "web").no_status().obj()],
                refused(
                    &["p"],
                    PDB_VIOLATION_MESSAGE,
                    Some("The disruption budget p needs 0 healthy pods and has 0 currently"),
                ),
                Some(0),
            ),
            (
                "two budgets",
                web("a").obj(),
                vec![
                    pdb("p").selector("app", "web").allowed(3).obj(),
                    pdb("q").empty_selector().allowed(3).obj(),
                ],
                refused(&["p", "q"], MULTIPLE_PDBS_MESSAGE, None),
                Some(3),
            ),
            (
                "pending pods skip the check",
                phase(web("a"), "Pending").obj(),
                vec![pdb("p").selector("app", "web").allowed(0).obj()],
                None,
                Some(0),
            ),
            (
                "terminating pods skip the check",
                web("a").terminating().obj(),
                vec![pdb("p").selector("app", "web").allowed(0).obj()],
                None,
                Some(0),
            ),
            (
                "unready pod, AlwaysAllow",
                unready("a").obj(),
                vec![
                    pdb("p")
                        .selector("app", "web")
                        .allowed(0)
                        .with_spec(|s| s.unhealthy_pod_eviction_policy = Some("AlwaysAllow".into()))
                        .obj(),
                ],
                None,
                Some(0),
            ),
            (
                "unready pod while the application is healthy",
                unready("a").obj(),
                vec![healthy(pdb("p").selector("app", "web").allowed(0), 3, 3).obj()],
                None,
                Some(0),
            ),
            (
                "unready pod of an unhealthy application is charged",
                unready("a").obj(),
                vec![healthy(pdb("p").selector("app", "web").allowed(1), 2, 3).obj()],
                None,
                Some(0),
            ),
            (
                "stale budget",
                web("a").obj(),
                vec![
                    pdb("p")
                        .selector("app", "web")
                        .allowed(1)
                        .with_meta(|m| m.generation = Some(2))
                        .with_status(|s| s.observed_generation = Some(1))
                        .obj(),
                ],
                refused(
                    &["p"],
                    PDB_VIOLATION_MESSAGE,
                    Some("The disruption budget p is still being processed by the server."),
                ),
                Some(1),
            ),
            (
                "negative budget",
                web("a").obj(),
                vec![pdb("p").selector("app", "web").allowed(-1).obj()],
                refused(
                    &["p"],
                    "poddisruptionbudgets.policy \"p\" is forbidden: pdb disruptions allowed is negative",
                    Some(
                        "The disruption budget p does not allow evicting pods currently: pdb disruptions allowed is negative",
                    ),
                ),
                Some(-1),
            ),
            (
                "failed sync",
                web("a").obj(),
                vec![
                    healthy(pdb("p").selector("app", "web").allowed(0), 5, 1)
                        .with_status(|s| {
                            s.conditions =
                                Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
                                    type_: "DisruptionAllowed".into(),
                                    status: "False".into(),
                                    reason: "SyncFailed".into(),
                                    message: "boom".into(),
                                    last_transition_time:
                                        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                                            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                                        ),
                                    observed_generation: None,
                                }]);
                        })
                        .obj(),
                ],
                refused(
                    &["p"],
                    PDB_VIOLATION_MESSAGE,
                    Some(
                        "The disruption budget p does not allow evicting pods currently because it failed sync: boom",
                    ),
                ),
                Some(0),
            ),
            (
                "healthy enough but no disruption allowed",
                web("a").obj(),
                vec![healthy(pdb("p").selector("app", "web").allowed(0), 5, 1).obj()],
                refused(
                    &["p"],
                    PDB_VIOLATION_MESSAGE,
                    Some("The disruption budget p does not allow evicting pods currently"),
                ),
                Some(0),
            ),
        ];
        for (case, p, pdbs, refusal, left) in cases {
            let mut budgets = DisruptionBudgets::new(&pdbs);
            let got = budgets.evict(&p).err();
            assert_eq!(got, refusal, "{case}");
            assert_eq!(budgets.remaining("default", "p"), left, "{case}");
        }
    }

    trait WithParts {
        fn with_meta(
            self,
            f: impl FnOnce(&mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta),
        ) -> Self;
        fn with_spec(
            self,
            f: impl FnOnce(&mut k8s_openapi::api::policy::v1::PodDisruptionBudgetSpec),
        ) -> Self;
    }

    impl WithParts for PdbBuilder {
        fn with_meta(
            mut self,
            f: impl FnOnce(&mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta),
        ) -> Self {
            f(&mut self.0.metadata);
            self
        }
        fn with_spec(
            mut self,
            f: impl FnOnce(&mut k8s_openapi::api::policy::v1::PodDisruptionBudgetSpec),
        ) -> Self {
            f(self.0.spec.get_or_insert_with(Default::default));
            self
        }
    }

    #[test]
    fn compact_loaded_pods_are_drained_too() {
        let mut objects = cluster(vec![], vec![]);
        objects.placed_pods = vec![std::sync::Arc::new(crate::snapshot::PodInfo::placed(
            of_rs("web-7d9f-ppppp", "n1").obj(),
        ))];
        let p = plan(&objects, "n1", DrainOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(names(&p.evicted), ["web-7d9f-ppppp"]);
        assert_eq!(p.replacements.len(), 1);
    }
}
