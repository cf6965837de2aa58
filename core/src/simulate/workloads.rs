//! Workloads expanded into the pods their controllers would create, as the controllers of
//! Kubernetes v1.37 (`pkg/controller/{deployment,replicaset,statefulset,job,daemon}`) build them, and
//! then as the API server would store them (defaulting, Priority and DefaultTolerationSeconds
//! admission, see [`crate::admission`]).
//!
//! What a controller takes from the cluster's state rather than from the object is decided here
//! deterministically, so one input always expands into the same pods:
//!
//! - pod names: controllers use `generateName` (a random suffix); here `<owner>-sim-<n>`
//!   (StatefulSet pods keep their real `<set>-<ordinal>` names);
//! - UIDs of objects read from a file that has none (not yet created): a UUID-shaped FNV hash of
//!   kind, namespace and name;
//! - `pod-template-hash`: upstream's `ComputeHash` hashes a `go-spew` dump of the Go struct, which
//!   cannot be reproduced outside Go; this is the same FNV-32a + `SafeEncodeString` over the
//!   template's JSON instead (stable, same alphabet and shape, but not the value the real controller
//!   would pick);
//! - the `controller-revision-hash` label (StatefulSet, DaemonSet) is not set: it names a
//!   ControllerRevision, hashed the same way, and the scheduler never reads it.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    Affinity, EnvVar, EnvVarSource, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement,
    NodeSelectorTerm, ObjectFieldSelector, PersistentVolumeClaim, PersistentVolumeClaimStatus,
    PersistentVolumeClaimVolumeSource, Pod, PodSpec, PodStatus, PodTemplateSpec, Toleration, Volume,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde_json::Value;

use crate::admission;
use crate::features::FeatureGates;
use crate::labels::{NodeSelectorMatcher, Selector};
use crate::plugins::helper::taints::{
    EFFECT_NO_EXECUTE, EFFECT_NO_SCHEDULE, do_not_schedule_taints_filter, find_matching_untolerated_taint,
    node_taints,
};
use crate::triage::workload::Workload;

/// The label a Deployment adds to its ReplicaSets' pods (`apps.DefaultDeploymentUniqueLabelKey`).
pub const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";
/// The label naming a StatefulSet pod (`apps.StatefulSetPodNameLabel`).
pub const STATEFUL_SET_POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// The label holding a StatefulSet pod's ordinal (`apps.PodIndexLabel`).
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
/// The Job labels the API server adds to a Job's template when it generates the selector.
pub const JOB_NAME_LABELS: [&str; 2] = ["job-name", "batch.kubernetes.io/job-name"];
/// The controller-uid labels the API server adds to a Job's template.
pub const JOB_CONTROLLER_UID_LABELS: [&str; 2] = ["controller-uid", "batch.kubernetes.io/controller-uid"];
/// The finalizer the Job controller puts on every pod it creates.
pub const JOB_TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// Label and annotation of an Indexed Job pod's completion index.
pub const JOB_COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// The environment variable an Indexed Job's containers read their index from.
const JOB_COMPLETION_INDEX_ENV: &str = "JOB_COMPLETION_INDEX";
/// The DaemonSet annotation holding the (deprecated) template generation, copied to pods as a label.
const DAEMON_SET_TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";
/// The label the DaemonSet controller copies that generation into.
const DAEMON_SET_TEMPLATE_GENERATION_LABEL: &str = "pod-template-generation";
/// The node field a DaemonSet pod's node affinity pins it with.
const NODE_NAME_FIELD: &str = "metadata.name";
/// The preemption policy of a PriorityClass that does not set one (API defaulting).
const PREEMPT_LOWER_PRIORITY: &str = "PreemptLowerPriority";
/// The most pods one workload expands into: a typo such as `--replicas 2000000000` is an error, not
/// an attempt to build two billion pods (a cluster holds at most 150,000).
pub const MAX_REPLICAS: usize = 150_000;
/// The most pods the workloads of one simulation expand into together unless the caller allows more
/// (see [`check_expansion_total`]): 40 workloads of 150,000 replicas each would otherwise build six
/// million pods, minutes and gigabytes before the first one is scheduled.
pub const DEFAULT_MAX_EXPANDED_PODS: usize = 1_000_000;
/// How many workloads [`WorkloadsError::TooManyPods`] names, the largest first.
const LARGEST_NAMED: usize = 5;
/// `rand.SafeEncodeString`'s alphabet: digits and consonants, so hashes never spell words.
const SAFE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Why a workload object cannot be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadsError {
    /// The object has no `apiVersion` or `kind`.
    #[error("object {name:?} has no apiVersion or kind")]
    MissingKind {
        /// `metadata.name` ("" when missing too).
        name: String,
    },
    /// A kind the simulation does not expand.
    #[error(
        "{kind} {name:?} ({api_version}) is not a workload simulate expands: use a v1 Pod, an apps/v1 \
         Deployment, ReplicaSet, StatefulSet or DaemonSet, or a batch/v1 Job"
    )]
    UnsupportedKind {
        /// `apiVersion`.
        api_version: String,
        /// `kind`.
        kind: String,
        /// `metadata.name` ("" when missing).
        name: String,
    },
    /// The object does not decode as its kind.
    #[error("failed to decode {kind} {name:?}: {message}")]
    Decode {
        /// `kind`.
        kind: String,
        /// `metadata.name` ("" when missing).
        name: String,
        /// The decoder's message.
        message: String,
    },
    /// The object has no `metadata.name` (controllers name pods after their owner).
    #[error("a {kind} without metadata.name cannot be expanded")]
    MissingName {
        /// The object's kind.
        kind: String,
    },
    /// The pod (or pod template) has no spec.
    #[error("{workload} has no pod spec")]
    MissingPodSpec {
        /// The workload (`deployment/web`).
        workload: String,
    },
    /// A negative replica count (from the object or `--replicas`).
    #[error("{workload}: replicas must not be negative, got {replicas}")]
    NegativeReplicas {
        /// The workload.
        workload: String,
        /// The count.
        replicas: i32,
    },
    /// More replicas than [`MAX_REPLICAS`].
    #[error("{workload}: {replicas} replicas is more than a simulation expands (at most {MAX_REPLICAS})")]
    TooManyReplicas {
        /// The workload.
        workload: String,
        /// The count.
        replicas: i32,
    },
    /// The workloads together expand into more pods than the limit allows.
    #[error(
        "the workloads expand into {total} pods together, more than the {limit} a simulation expands: \
         {}{}",
        largest.iter().map(|(w, n)| format!("{w} {n}")).collect::<Vec<_>>().join(", "),
        if *others > 0 { format!(" and {others} more workload(s)") } else { String::new() }
    )]
    TooManyPods {
        /// Pods all the workloads expand into.
        total: usize,
        /// The limit.
        limit: usize,
        /// The workloads with the most pods (at most five), largest first, with their pod counts.
        largest: Vec<(String, usize)>,
        /// How many other workloads there are.
        others: usize,
    },
    /// A volumeClaimTemplate without a name.
    #[error("{workload}: volumeClaimTemplates[{index}] has no metadata.name")]
    UnnamedClaimTemplate {
        /// The workload.
        workload: String,
        /// Its position.
        index: usize,
    },
    /// `priorityClassName` names no PriorityClass (the Priority admission plugin refuses the pod).
    #[error("{workload}: no PriorityClass with name {class} was found")]
    UnknownPriorityClass {
        /// The workload.
        workload: String,
        /// The class.
        class: String,
    },
    /// The template sets `priority` (or `preemptionPolicy`) to something else than its class says
    /// (the Priority admission plugin refuses such pods).
    #[error("{workload}: {message}")]
    PriorityConflict {
        /// The workload.
        workload: String,
        /// The API server's message.
        message: String,
    },
}

/// One object of a workload file, by kind.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkloadObject {
    /// A bare pod (v1).
    Pod(Pod),
    /// apps/v1 Deployment.
    Deployment(Deployment),
    /// apps/v1 ReplicaSet.
    ReplicaSet(ReplicaSet),
    /// apps/v1 StatefulSet.
    StatefulSet(StatefulSet),
    /// batch/v1 Job.
    Job(Job),
    /// apps/v1 DaemonSet.
    DaemonSet(DaemonSet),
}

fn decode<T: serde::de::DeserializeOwned>(value: Value, kind: &str, name: &str) -> Result<T, WorkloadsError> {
    serde_json::from_value(value).map_err(|e| WorkloadsError::Decode {
        kind: kind.to_string(),
        name: name.to_string(),
        message: e.to_string(),
    })
}

impl WorkloadObject {
    /// Decodes an object by its `apiVersion` and `kind`.
    pub fn from_value(value: Value) -> Result<Self, WorkloadsError> {
        let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_string();
        let name = value.get("metadata").map(|m| text(m, "name")).unwrap_or_default();
        let api_version = text(&value, "apiVersion");
        let kind = text(&value, "kind");
        if api_version.is_empty() || kind.is_empty() {
            return Err(WorkloadsError::MissingKind { name });
        }
        Ok(match (api_version.as_str(), kind.as_str()) {
            ("v1", "Pod") => WorkloadObject::Pod(decode(value, &kind, &name)?),
            ("apps/v1", "Deployment") => WorkloadObject::Deployment(decode(value, &kind, &name)?),
            ("apps/v1", "ReplicaSet") => WorkloadObject::ReplicaSet(decode(value, &kind, &name)?),
            ("apps/v1", "StatefulSet") => WorkloadObject::StatefulSet(decode(value, &kind, &name)?),
            ("apps/v1", "DaemonSet") => WorkloadObject::DaemonSet(decode(value, &kind, &name)?),
            ("batch/v1", "Job") => WorkloadObject::Job(decode(value, &kind, &name)?),
            _ => {
                return Err(WorkloadsError::UnsupportedKind {
                    api_version,
                    kind,
                    name,
                });
            }
        })
    }

    /// The object's kind, as its `kind` field spells it.
    pub fn kind(&self) -> &'static str {
        match self {
            WorkloadObject::Pod(_) => "Pod",
            WorkloadObject::Deployment(_) => "Deployment",
            WorkloadObject::ReplicaSet(_) => "ReplicaSet",
            WorkloadObject::StatefulSet(_) => "StatefulSet",
            WorkloadObject::Job(_) => "Job",
            WorkloadObject::DaemonSet(_) => "DaemonSet",
        }
    }

    fn metadata(&self) -> &ObjectMeta {
        match self {
            WorkloadObject::Pod(o) => &o.metadata,
            WorkloadObject::Deployment(o) => &o.metadata,
            WorkloadObject::ReplicaSet(o) => &o.metadata,
            WorkloadObject::StatefulSet(o) => &o.metadata,
            WorkloadObject::Job(o) => &o.metadata,
            WorkloadObject::DaemonSet(o) => &o.metadata,
        }
    }
}

/// What an expansion reads from the cluster, and the simulation's choices.
#[derive(Debug, Clone)]
pub struct ExpandContext<'a> {
    /// The cluster's nodes (where DaemonSets run).
    pub nodes: &'a [Node],
    /// PriorityClasses (the Priority admission plugin's).
    pub priority_classes: &'a [PriorityClass],
    /// Existing PVCs: a StatefulSet's claims that exist are reused, not created.
    pub persistent_volume_claims: &'a [PersistentVolumeClaim],
    /// The namespace of objects that name none.
    pub default_namespace: &'a str,
    /// `--replicas`: overrides Deployment, ReplicaSet and StatefulSet replicas and Job parallelism.
    pub replicas: Option<i32>,
    /// The creationTimestamp of every pod made.
    pub creation_timestamp: Time,
    /// The cluster's feature gates: the DaemonSet controller's taint check reads
    /// `TaintTolerationComparisonOperators`, as the scheduler's plugins do.
    pub features: FeatureGates,
}

/// The pods (and new PVCs) one workload object expands into.
#[derive(Debug, Clone, PartialEq)]
pub struct Expansion {
    /// The workload as a person names it (`deployment/web`, `pod/p`).
    pub workload: Workload,
    /// The pods, pending, in creation order.
    pub pods: Vec<Pod>,
    /// New PVCs from a StatefulSet's volumeClaimTemplates that do not exist yet.
    pub claims: Vec<PersistentVolumeClaim>,
}

/// Expands `object` into the pods its controller would create, as the API server would store them.
pub fn expand(object: &WorkloadObject, ctx: &ExpandContext<'_>) -> Result<Expansion, WorkloadsError> {
    let owner = Owner::of(object, ctx)?;
    let mut claims = Vec::new();
    let pods = match object {
        WorkloadObject::Pod(pod) => vec![expand_pod(pod, &owner, ctx)?],
        WorkloadObject::Deployment(d) => expand_deployment(d, &owner, ctx)?,
        WorkloadObject::ReplicaSet(rs) => {
            let replicas = replica_count(ctx.replicas.or(rs.spec.replicas), &owner)?;
            let template = rs.spec.template.as_ref();
            let rs_ref = owner.controller_ref("apps/v1", "ReplicaSet");
            numbered_pods(template, &owner, &owner.workload.name, &rs_ref, replicas, ctx)?
        }
        WorkloadObject::StatefulSet(set) => expand_stateful_set(set, &owner, ctx, &mut claims)?,
        WorkloadObject::Job(job) => expand_job(job, &owner, ctx)?,
        WorkloadObject::DaemonSet(ds) => expand_daemon_set(ds, &owner, ctx)?,
    };
    Ok(Expansion {
        workload: owner.workload,
        pods,
        claims,
    })
}

/// How many pods [`expand`] makes of `object`, counted without making any (the same replica
/// checks, Job completions and suspension, and the nodes a DaemonSet runs on).
pub fn expanded_pod_count(object: &WorkloadObject, ctx: &ExpandContext<'_>) -> Result<usize, WorkloadsError> {
    let owner = Owner::of(object, ctx)?;
    Ok(match object {
        WorkloadObject::Pod(_) => 1,
        WorkloadObject::Deployment(d) => replica_count(ctx.replicas.or(d.spec.replicas), &owner)?,
        WorkloadObject::ReplicaSet(rs) => replica_count(ctx.replicas.or(rs.spec.replicas), &owner)?,
        WorkloadObject::StatefulSet(set) => replica_count(ctx.replicas.or(set.spec.replicas), &owner)?,
        WorkloadObject::Job(job) => {
            let spec = job.spec.as_ref().ok_or_else(|| WorkloadsError::MissingPodSpec {
                workload: owner.workload.to_string(),
            })?;
            let parallelism = replica_count(ctx.replicas.or(spec.parallelism), &owner)?;
            match (spec.suspend, spec.completions) {
                (Some(true), _) => 0,
                (_, Some(c)) => parallelism.min(usize::try_from(c).unwrap_or(0)),
                (_, None) => parallelism,
            }
        }
        WorkloadObject::DaemonSet(ds) => {
            let mut template =
                ds.spec
                    .template
                    .spec
                    .clone()
                    .ok_or_else(|| WorkloadsError::MissingPodSpec {
                        workload: owner.workload.to_string(),
                    })?;
            add_daemon_pod_tolerations(&mut template);
            let tolerations = template.tolerations.clone().unwrap_or_default();
            ctx.nodes
                .iter()
                .filter(|n| n.metadata.name.as_deref().is_some_and(|n| !n.is_empty()))
                .filter(|n| daemon_should_run(&template, &tolerations, n, &ctx.features))
                .count()
        }
    })
}

/// Refuses `objects` when the pods they expand into together pass `limit`, naming the largest
/// workloads; otherwise returns the total. Run before [`expand`], so refusing costs no pods.
pub fn check_expansion_total<'o>(
    objects: impl IntoIterator<Item = &'o WorkloadObject>,
    ctx: &ExpandContext<'_>,
    limit: usize,
) -> Result<usize, WorkloadsError> {
    let mut counts = Vec::new();
    for object in objects {
        let workload = Owner::of(object, ctx)?.workload.to_string();
        counts.push((workload, expanded_pod_count(object, ctx)?));
    }
    let total: usize = counts.iter().map(|(_, n)| n).sum();
    if total <= limit {
        return Ok(total);
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let others = counts.len().saturating_sub(LARGEST_NAMED);
    counts.truncate(LARGEST_NAMED);
    Err(WorkloadsError::TooManyPods {
        total,
        limit,
        largest: counts,
        others,
    })
}

/// The object being expanded.
struct Owner {
    workload: Workload,
    /// `metadata.uid`, when the object has one.
    uid: Option<String>,
}

impl Owner {
    /// The workload `object` is, named as a person names it, in the namespace it lands in.
    fn of(object: &WorkloadObject, ctx: &ExpandContext<'_>) -> Result<Owner, WorkloadsError> {
        let meta = object.metadata();
        let kind = object.kind();
        let name = meta
            .name
            .clone()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| WorkloadsError::MissingName { kind: kind.into() })?;
        let namespace = meta
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| ctx.default_namespace.to_string());
        Ok(Owner {
            workload: Workload {
                namespace,
                kind: kind.to_ascii_lowercase(),
                name,
            },
            uid: meta.uid.clone().filter(|u| !u.is_empty()),
        })
    }

    fn uid(&self, kind: &str) -> String {
        self.uid
            .clone()
            .unwrap_or_else(|| simulated_uid(kind, &self.workload.namespace, &self.workload.name))
    }

    fn controller_ref(&self, api_version: &str, kind: &str) -> OwnerReference {
        controller_ref(api_version, kind, &self.workload.name, self.uid(kind))
    }
}

/// `metav1.NewControllerRef`: the owner reference every controller puts on the pods it creates.
fn controller_ref(api_version: &str, kind: &str, name: &str, uid: String) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid,
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn fnv1a_32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

fn fnv1a_64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// `rand.SafeEncodeString`.
fn safe_encode(text: &str) -> String {
    text.chars()
        .map(|c| char::from(SAFE_ALPHABET[(c as usize) % SAFE_ALPHABET.len()]))
        .collect()
}

/// A stable UUID-shaped UID for an object that was never created (so has none).
fn simulated_uid(kind: &str, namespace: &str, name: &str) -> String {
    let key = format!("{kind}/{namespace}/{name}");
    let a = fnv1a_64(key.as_bytes());
    let b = fnv1a_64(format!("{key}/uid").as_bytes());
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

/// The `pod-template-hash` of a Deployment's template: `controller.ComputeHash`'s FNV-32a, the
/// collision count appended the same way, and `SafeEncodeString` of the decimal sum; but over the
/// template's JSON rather than a go-spew dump (see the module doc).
pub fn pod_template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let mut bytes = serde_json::to_vec(template).unwrap_or_default();
    if let Some(count) = collision_count {
        // Upstream writes the uint32 into an 8-byte little-endian buffer.
        bytes.extend_from_slice(&u64::from(count as u32).to_le_bytes());
    }
    safe_encode(&fnv1a_32(&bytes).to_string())
}

/// The replica count (1 when unset), checked: not negative, at most [`MAX_REPLICAS`].
fn replica_count(replicas: Option<i32>, owner: &Owner) -> Result<usize, WorkloadsError> {
    let replicas = replicas.unwrap_or(1);
    let count = usize::try_from(replicas).map_err(|_| WorkloadsError::NegativeReplicas {
        workload: owner.workload.to_string(),
        replicas,
    })?;
    if count > MAX_REPLICAS {
        return Err(WorkloadsError::TooManyReplicas {
            workload: owner.workload.to_string(),
            replicas,
        });
    }
    Ok(count)
}

/// `controller.GetPodFromTemplate`: the template's labels, annotations, finalizers and spec, owned by
/// the controller.
fn pod_from_template(
    template: Option<&PodTemplateSpec>,
    owner: &Owner,
    name: String,
    controller: &OwnerReference,
) -> Result<Pod, WorkloadsError> {
    let missing = || WorkloadsError::MissingPodSpec {
        workload: owner.workload.to_string(),
    };
    let template = template.ok_or_else(missing)?;
    let spec = template.spec.clone().ok_or_else(missing)?;
    let template_meta = template.metadata.as_ref();
    let mut owner_references = template_meta
        .and_then(|m| m.owner_references.clone())
        .unwrap_or_default();
    owner_references.push(controller.clone());
    Ok(Pod {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(owner.workload.namespace.clone()),
            labels: Some(template_meta.and_then(|m| m.labels.clone()).unwrap_or_default()),
            annotations: template_meta.and_then(|m| m.annotations.clone()),
            finalizers: template_meta.and_then(|m| m.finalizers.clone()),
            owner_references: Some(owner_references),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    })
}

/// What the API server does to any new pod, then a fresh pending state: creationTimestamp, no node,
/// status phase Pending.
fn admit_new_pod(mut pod: Pod, owner: &Owner, ctx: &ExpandContext<'_>) -> Result<Pod, WorkloadsError> {
    pod.metadata.creation_timestamp = Some(ctx.creation_timestamp.clone());
    if let Some(spec) = pod.spec.as_mut() {
        spec.node_name = None;
    }
    pod.status = Some(PodStatus {
        phase: Some("Pending".into()),
        ..PodStatus::default()
    });
    admit(&mut pod, owner, ctx)?;
    Ok(pod)
}

/// API defaulting, the Priority admission plugin and DefaultTolerationSeconds.
fn admit(pod: &mut Pod, owner: &Owner, ctx: &ExpandContext<'_>) -> Result<(), WorkloadsError> {
    let spec = pod.spec.as_mut().ok_or_else(|| WorkloadsError::MissingPodSpec {
        workload: owner.workload.to_string(),
    })?;
    admission::apply_defaults(spec);
    resolve_priority(spec, ctx.priority_classes, owner)?;
    admission::add_default_tolerations(spec);
    Ok(())
}

/// The Priority admission plugin on pod creation: the named class's value and preemption policy,
/// or the global default class's (the lowest one if several claim it; the class name is then set),
/// or 0 and `PreemptLowerPriority` without either. A named class that does not exist, or a template
/// that sets another priority or preemption policy than the class, is refused.
fn resolve_priority(
    spec: &mut PodSpec,
    classes: &[PriorityClass],
    owner: &Owner,
) -> Result<(), WorkloadsError> {
    let established =
        admission::establish_priority(spec.priority_class_name.as_deref(), classes).map_err(|e| match e {
            admission::AdmitError::UnknownPriorityClass(class) => WorkloadsError::UnknownPriorityClass {
                workload: owner.workload.to_string(),
                class,
            },
            admission::AdmitError::NoSpec => WorkloadsError::MissingPodSpec {
                workload: owner.workload.to_string(),
            },
        })?;
    let (class_name, priority, policy) = (
        established.class_name,
        established.priority,
        established.preemption_policy,
    );
    let conflict = |message: String| WorkloadsError::PriorityConflict {
        workload: owner.workload.to_string(),
        message,
    };
    if let Some(given) = spec.priority
        && given != priority
    {
        return Err(conflict(format!(
            "the integer value of priority ({given}) must not be provided in pod spec; priority \
             admission controller computed {priority} from the given PriorityClass name"
        )));
    }
    let policy = policy.unwrap_or_else(|| PREEMPT_LOWER_PRIORITY.to_string());
    if let Some(given) = spec.preemption_policy.as_deref()
        && given != policy
    {
        return Err(conflict(format!(
            "the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority \
             admission controller computed {policy} from the given PriorityClass name"
        )));
    }
    spec.priority_class_name = class_name;
    spec.priority = Some(priority);
    spec.preemption_policy = Some(policy);
    Ok(())
}

/// A bare pod, as the API server would store it: namespace defaulted, priority resolved.
fn expand_pod(pod: &Pod, owner: &Owner, ctx: &ExpandContext<'_>) -> Result<Pod, WorkloadsError> {
    let mut pod = pod.clone();
    pod.metadata.namespace = Some(owner.workload.namespace.clone());
    if pod.metadata.creation_timestamp.is_none() {
        pod.metadata.creation_timestamp = Some(ctx.creation_timestamp.clone());
    }
    if pod.status.is_none() {
        pod.status = Some(PodStatus {
            phase: Some("Pending".into()),
            ..PodStatus::default()
        });
    }
    admit(&mut pod, owner, ctx)?;
    Ok(pod)
}

/// `count` pods named `<prefix>-sim-<n>` from a template, owned by `controller`.
fn numbered_pods(
    template: Option<&PodTemplateSpec>,
    owner: &Owner,
    prefix: &str,
    controller: &OwnerReference,
    count: usize,
    ctx: &ExpandContext<'_>,
) -> Result<Vec<Pod>, WorkloadsError> {
    (0..count)
        .map(|n| {
            let pod = pod_from_template(template, owner, format!("{prefix}-sim-{n}"), controller)?;
            admit_new_pod(pod, owner, ctx)
        })
        .collect()
}

/// A Deployment's pods are created by its new ReplicaSet, `<deployment>-<pod-template-hash>`, whose
/// template is the Deployment's plus the `pod-template-hash` label.
fn expand_deployment(
    d: &Deployment,
    owner: &Owner,
    ctx: &ExpandContext<'_>,
) -> Result<Vec<Pod>, WorkloadsError> {
    let spec = &d.spec;
    let replicas = replica_count(ctx.replicas.or(spec.replicas), owner)?;
    let collision_count = d.status.as_ref().and_then(|s| s.collision_count);
    let hash = pod_template_hash(&spec.template, collision_count);
    let mut template = spec.template.clone();
    template
        .metadata
        .get_or_insert_with(ObjectMeta::default)
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(POD_TEMPLATE_HASH_LABEL.into(), hash.clone());
    let rs_name = format!("{}-{hash}", owner.workload.name);
    let rs_ref = controller_ref(
        "apps/v1",
        "ReplicaSet",
        &rs_name,
        simulated_uid("ReplicaSet", &owner.workload.namespace, &rs_name),
    );
    numbered_pods(Some(&template), owner, &rs_name, &rs_ref, replicas, ctx)
}

/// `newStatefulSetPod`: `<set>-<ordinal>` from `spec.ordinals.start`, identity labels,
/// hostname/subdomain, and a PVC volume per volumeClaimTemplate (`<template>-<set>-<ordinal>`), the
/// claims that do not exist yet going to `claims`.
fn expand_stateful_set(
    set: &StatefulSet,
    owner: &Owner,
    ctx: &ExpandContext<'_>,
    claims: &mut Vec<PersistentVolumeClaim>,
) -> Result<Vec<Pod>, WorkloadsError> {
    let spec = &set.spec;
    let replicas = replica_count(ctx.replicas.or(spec.replicas), owner)?;
    let start = spec.ordinals.as_ref().and_then(|o| o.start).unwrap_or(0).max(0);
    let set_name = &owner.workload.name;
    let namespace = &owner.workload.namespace;
    let templates = spec.volume_claim_templates.as_deref().unwrap_or_default();
    let mut template_names = Vec::with_capacity(templates.len());
    for (index, t) in templates.iter().enumerate() {
        let name = t.metadata.name.clone().filter(|n| !n.is_empty()).ok_or_else(|| {
            WorkloadsError::UnnamedClaimTemplate {
                workload: owner.workload.to_string(),
                index,
            }
        })?;
        template_names.push(name);
    }
    let selector_labels = spec.selector.match_labels.clone().unwrap_or_default();
    let claimed: HashSet<&str> = ctx
        .persistent_volume_claims
        .iter()
        .filter(|c| c.metadata.namespace.as_deref().unwrap_or("") == namespace.as_str())
        .filter_map(|c| c.metadata.name.as_deref())
        .collect();
    let mut made: HashSet<String> = HashSet::new();
    let set_ref = owner.controller_ref("apps/v1", "StatefulSet");
    let mut pods = Vec::with_capacity(replicas);
    for i in 0..replicas {
        let ordinal = i64::from(start) + i as i64;
        let pod_name = format!("{set_name}-{ordinal}");
        let mut pod = pod_from_template(Some(&spec.template), owner, pod_name.clone(), &set_ref)?;
        let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
        labels.insert(STATEFUL_SET_POD_NAME_LABEL.into(), pod_name.clone());
        labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
        let pod_spec = pod.spec.get_or_insert_with(PodSpec::default);
        pod_spec.hostname = Some(pod_name.clone());
        pod_spec.subdomain = spec.service_name.clone().filter(|s| !s.is_empty());
        // updateStorage: one volume per template, then the template's own volumes not shadowed.
        let mut volumes = Vec::with_capacity(templates.len());
        for (template, template_name) in templates.iter().zip(&template_names) {
            let claim_name = format!("{template_name}-{set_name}-{ordinal}");
            volumes.push(Volume {
                name: template_name.clone(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: claim_name.clone(),
                    read_only: None,
                }),
                ..Volume::default()
            });
            // A claim that exists is reused, as the controller does (it only creates missing ones).
            if !claimed.contains(claim_name.as_str()) && made.insert(claim_name.clone()) {
                claims.push(new_claim(template, claim_name, namespace, &selector_labels, ctx));
            }
        }
        for v in pod_spec.volumes.take().unwrap_or_default() {
            if !template_names.contains(&v.name) {
                volumes.push(v);
            }
        }
        pod_spec.volumes = (!volumes.is_empty()).then_some(volumes);
        pods.push(admit_new_pod(pod, owner, ctx)?);
    }
    Ok(pods)
}

/// `getPersistentVolumeClaims`: the template renamed into the set's namespace, with the set's
/// selector labels, as a new pending claim.
fn new_claim(
    template: &PersistentVolumeClaim,
    name: String,
    namespace: &str,
    selector_labels: &BTreeMap<String, String>,
    ctx: &ExpandContext<'_>,
) -> PersistentVolumeClaim {
    let mut claim = template.clone();
    claim.metadata.name = Some(name);
    claim.metadata.namespace = Some(namespace.to_string());
    claim.metadata.uid = None;
    claim.metadata.resource_version = None;
    claim.metadata.creation_timestamp = Some(ctx.creation_timestamp.clone());
    let labels = claim.metadata.labels.get_or_insert_with(BTreeMap::new);
    for (k, v) in selector_labels {
        labels.insert(k.clone(), v.clone());
    }
    claim.status = Some(PersistentVolumeClaimStatus {
        phase: Some("Pending".into()),
        ..PersistentVolumeClaimStatus::default()
    });
    claim
}

/// A Job's first pods: min(parallelism, completions) of them (none while suspended), with the
/// labels the API server adds to the template (unless `manualSelector`), the job-tracking finalizer,
/// and for Indexed Jobs the completion index (label, annotation, hostname, env var).
fn expand_job(job: &Job, owner: &Owner, ctx: &ExpandContext<'_>) -> Result<Vec<Pod>, WorkloadsError> {
    let spec = job.spec.as_ref().ok_or_else(|| WorkloadsError::MissingPodSpec {
        workload: owner.workload.to_string(),
    })?;
    let parallelism = replica_count(ctx.replicas.or(spec.parallelism), owner)?;
    if spec.suspend == Some(true) {
        return Ok(Vec::new());
    }
    let count = match spec.completions {
        Some(c) => parallelism.min(usize::try_from(c).unwrap_or(0)),
        None => parallelism,
    };
    let indexed = spec.completion_mode.as_deref() == Some("Indexed");
    let job_name = &owner.workload.name;
    let uid = owner.uid("Job");
    let mut template = spec.template.clone();
    let meta = template.metadata.get_or_insert_with(ObjectMeta::default);
    if spec.manual_selector != Some(true) {
        let labels = meta.labels.get_or_insert_with(BTreeMap::new);
        for key in JOB_NAME_LABELS {
            labels.entry(key.into()).or_insert_with(|| job_name.clone());
        }
        for key in JOB_CONTROLLER_UID_LABELS {
            labels.entry(key.into()).or_insert_with(|| uid.clone());
        }
    }
    let finalizers = meta.finalizers.get_or_insert_with(Vec::new);
    if !finalizers.iter().any(|f| f == JOB_TRACKING_FINALIZER) {
        finalizers.push(JOB_TRACKING_FINALIZER.into());
    }
    if indexed && let Some(pod_spec) = template.spec.as_mut() {
        add_completion_index_env(pod_spec);
    }
    let job_ref = controller_ref("batch/v1", "Job", job_name, uid);
    let mut pods = Vec::with_capacity(count);
    for n in 0..count {
        let name = if indexed {
            format!("{job_name}-{n}-sim")
        } else {
            format!("{job_name}-sim-{n}")
        };
        let mut pod = pod_from_template(Some(&template), owner, name, &job_ref)?;
        if indexed {
            let index = n.to_string();
            pod.metadata
                .labels
                .get_or_insert_with(BTreeMap::new)
                .insert(JOB_COMPLETION_INDEX.into(), index.clone());
            pod.metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(JOB_COMPLETION_INDEX.into(), index);
            if let Some(pod_spec) = pod.spec.as_mut() {
                pod_spec.hostname = Some(format!("{job_name}-{n}"));
            }
        }
        pods.push(admit_new_pod(pod, owner, ctx)?);
    }
    Ok(pods)
}

/// `addCompletionIndexEnvVariables`.
fn add_completion_index_env(spec: &mut PodSpec) {
    for c in spec
        .init_containers
        .iter_mut()
        .flatten()
        .chain(spec.containers.iter_mut())
    {
        let env = c.env.get_or_insert_with(Vec::new);
        if env.iter().any(|e| e.name == JOB_COMPLETION_INDEX_ENV) {
            continue;
        }
        env.push(EnvVar {
            name: JOB_COMPLETION_INDEX_ENV.into(),
            value: None,
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    api_version: None,
                    field_path: format!("metadata.labels['{JOB_COMPLETION_INDEX}']"),
                }),
                ..EnvVarSource::default()
            }),
        });
    }
}

/// `util.AddOrUpdateDaemonPodTolerations`: every daemon pod tolerates node problems (not-ready and
/// unreachable forever, the pressure and unschedulable taints, and network-unavailable for
/// host-network pods), replacing a toleration with the same key, operator, value and effect.
pub fn add_daemon_pod_tolerations(spec: &mut PodSpec) {
    let mut wanted = vec![
        ("node.kubernetes.io/not-ready", EFFECT_NO_EXECUTE),
        ("node.kubernetes.io/unreachable", EFFECT_NO_EXECUTE),
        ("node.kubernetes.io/disk-pressure", EFFECT_NO_SCHEDULE),
        ("node.kubernetes.io/memory-pressure", EFFECT_NO_SCHEDULE),
        ("node.kubernetes.io/pid-pressure", EFFECT_NO_SCHEDULE),
        ("node.kubernetes.io/unschedulable", EFFECT_NO_SCHEDULE),
    ];
    if spec.host_network == Some(true) {
        wanted.push(("node.kubernetes.io/network-unavailable", EFFECT_NO_SCHEDULE));
    }
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for (key, effect) in wanted {
        let toleration = Toleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            effect: Some(effect.into()),
            value: None,
            toleration_seconds: None,
        };
        // Toleration.MatchToleration: same key, operator, value and effect.
        let same = |t: &Toleration| {
            t.key.as_deref().unwrap_or("") == key
                && t.operator.as_deref().unwrap_or("") == "Exists"
                && t.value.as_deref().unwrap_or("").is_empty()
                && t.effect.as_deref().unwrap_or("") == effect
        };
        match tolerations.iter_mut().find(|t| same(t)) {
            Some(existing) => *existing = toleration,
            None => tolerations.push(toleration),
        }
    }
}

/// `NodeShouldRunDaemonPod`'s "should run": the template's nodeName (if any) is this node, the
/// nodeSelector and required node affinity match it, and every NoSchedule/NoExecute taint is
/// tolerated by `tolerations` (the template's plus the daemon tolerations).
pub fn daemon_should_run(
    template: &PodSpec,
    tolerations: &[Toleration],
    node: &Node,
    features: &FeatureGates,
) -> bool {
    let node_name = node.metadata.name.as_deref().unwrap_or("");
    if let Some(pinned) = template.node_name.as_deref().filter(|n| !n.is_empty())
        && pinned != node_name
    {
        return false;
    }
    static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&NO_LABELS);
    if let Some(selector) = template.node_selector.as_ref()
        && !Selector::from_map(selector).matches(labels)
    {
        return false;
    }
    if let Some(required) = template
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())
        && !NodeSelectorMatcher::new(required).matches(labels, node_name)
    {
        return false;
    }
    find_matching_untolerated_taint(
        node_taints(node),
        tolerations,
        do_not_schedule_taints_filter,
        features.taint_toleration_comparison_operators,
    )
    .is_none()
}

/// `ReplaceDaemonSetPodNodeNameNodeAffinity`: the required node affinity becomes the single term
/// `metadata.name In [node]` (preferred terms stay).
fn pin_to_node(affinity: Option<Affinity>, node: &str) -> Affinity {
    let selector = NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![NodeSelectorRequirement {
                key: NODE_NAME_FIELD.into(),
                operator: "In".into(),
                values: Some(vec![node.to_string()]),
            }]),
        }],
    };
    let mut affinity = affinity.unwrap_or_default();
    let node_affinity = affinity.node_affinity.get_or_insert_with(NodeAffinity::default);
    node_affinity.required_during_scheduling_ignored_during_execution = Some(selector);
    affinity
}

/// One pod per node the DaemonSet controller would run it on, pinned there by node affinity.
fn expand_daemon_set(
    ds: &DaemonSet,
    owner: &Owner,
    ctx: &ExpandContext<'_>,
) -> Result<Vec<Pod>, WorkloadsError> {
    let spec = &ds.spec;
    let mut template = spec.template.clone();
    let pod_spec = template
        .spec
        .as_mut()
        .ok_or_else(|| WorkloadsError::MissingPodSpec {
            workload: owner.workload.to_string(),
        })?;
    add_daemon_pod_tolerations(pod_spec);
    // util.CreatePodTemplate copies a parseable template generation into a label.
    if let Some(generation) = ds
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DAEMON_SET_TEMPLATE_GENERATION_ANNOTATION))
        .and_then(|g| g.parse::<i64>().ok())
    {
        template
            .metadata
            .get_or_insert_with(ObjectMeta::default)
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(
                DAEMON_SET_TEMPLATE_GENERATION_LABEL.into(),
                generation.to_string(),
            );
    }
    let Some(pod_spec) = template.spec.as_ref() else {
        return Ok(Vec::new());
    };
    let tolerations = pod_spec.tolerations.clone().unwrap_or_default();
    let ds_ref = owner.controller_ref("apps/v1", "DaemonSet");
    let mut pods = Vec::new();
    for node in ctx.nodes {
        let Some(node_name) = node.metadata.name.as_deref().filter(|n| !n.is_empty()) else {
            continue;
        };
        if !daemon_should_run(pod_spec, &tolerations, node, &ctx.features) {
            continue;
        }
        let name = format!("{}-sim-{}", owner.workload.name, pods.len());
        let mut pod = pod_from_template(Some(&template), owner, name, &ds_ref)?;
        if let Some(s) = pod.spec.as_mut() {
            s.affinity = Some(pin_to_node(s.affinity.take(), node_name));
        }
        pods.push(admit_new_pod(pod, owner, ctx)?);
    }
    Ok(pods)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Taint;
    use serde_json::json;

    use super::*;

    fn time() -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap_or_default())
    }

    fn node(name: &str, labels: &[(&str, &str)], taints: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            spec: Some(k8s_openapi::api::core::v1::NodeSpec {
                taints: Some(
                    taints
                        .iter()
                        .map(|(key, effect)| Taint {
                            key: key.to_string(),
                            effect: effect.to_string(),
                            value: None,
                            time_added: None,
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn class(name: &str, value: i32, global_default: bool, policy: Option<&str>) -> PriorityClass {
        PriorityClass {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            value: Some(value),
            global_default: Some(global_default),
            preemption_policy: policy.map(str::to_string),
            ..PriorityClass::default()
        }
    }

    fn claim(namespace: &str, name: &str) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(namespace.into()),
                ..ObjectMeta::default()
            },
            ..PersistentVolumeClaim::default()
        }
    }

    struct World {
        nodes: Vec<Node>,
        classes: Vec<PriorityClass>,
        claims: Vec<PersistentVolumeClaim>,
    }

    impl World {
        fn new() -> Self {
            World {
                nodes: vec![
                    node("plain", &[("role", "worker")], &[]),
                    node("other-role", &[("role", "infra")], &[]),
                    node("tainted", &[("role", "worker")], &[("dedicated", "NoSchedule")]),
                    node("evicting", &[("role", "worker")], &[("dedicated", "NoExecute")]),
                    node(
                        "cordoned",
                        &[("role", "worker")],
                        &[("node.kubernetes.io/unschedulable", "NoSchedule")],
                    ),
                    node(
                        "soft",
                        &[("role", "worker")],
                        &[("dedicated", "PreferNoSchedule")],
                    ),
                ],
                classes: vec![
                    class("high", 1000, false, Some("Never")),
                    class("low", -5, true, None),
                    class("lower", -10, true, None),
                ],
                claims: vec![claim("default", "data-db-0")],
            }
        }

        fn ctx(&self, replicas: Option<i32>) -> ExpandContext<'_> {
            ExpandContext {
                nodes: &self.nodes,
                priority_classes: &self.classes,
                persistent_volume_claims: &self.claims,
                default_namespace: "default",
                replicas,
                creation_timestamp: time(),
                features: FeatureGates::v1_37(),
            }
        }
    }

    fn template(labels: serde_json::Value, spec: serde_json::Value) -> serde_json::Value {
        let mut spec = spec;
        if spec.get("containers").is_none() {
            spec["containers"] = json!([{"name": "app", "image": "nginx"}]);
        }
        json!({"metadata": {"labels": labels}, "spec": spec})
    }

    fn object(api_version: &str, kind: &str, name: &str, spec: serde_json::Value) -> WorkloadObject {
        let value =
            json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, "spec": spec});
        match WorkloadObject::from_value(value) {
            Ok(o) => o,
            Err(e) => panic!("{kind}/{name}: {e}"),
        }
    }

    fn expand_ok(object: &WorkloadObject, ctx: &ExpandContext<'_>) -> Expansion {
        match expand(object, ctx) {
            Ok(e) => e,
            Err(e) => panic!("{}: {e}", object.kind()),
        }
    }

    fn names(pods: &[Pod]) -> Vec<String> {
        pods.iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
        pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
    }

    fn owner(pod: &Pod) -> (String, String) {
        let refs = pod.metadata.owner_references.clone().unwrap_or_default();
        let r = refs
            .iter()
            .find(|r| r.controller == Some(true))
            .cloned()
            .unwrap_or_default();
        assert_eq!(r.block_owner_deletion, Some(true), "blockOwnerDeletion");
        (r.kind, r.name)
    }

    fn spec(pod: &Pod) -> &PodSpec {
        pod.spec.as_ref().unwrap_or_else(|| panic!("pod without spec"))
    }

    #[test]
    fn every_kind_expands_into_its_controllers_pods() {
        let world = World::new();
        let web_template = template(json!({"app": "web"}), json!({}));
        let deployment = object(
            "apps/v1",
            "Deployment",
            "web",
            json!({"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": web_template}),
        );
        let hash = match &deployment {
            WorkloadObject::Deployment(d) => pod_template_hash(&d.spec.template, None),
            _ => unreachable!(),
        };
        let rs_name = format!("web-{hash}");
        // (object, --replicas, workload, pod names, owner kind, owner name)
        type Case<'a> = (WorkloadObject, Option<i32>, &'a str, Vec<String>, &'a str, String);
        let cases: Vec<Case<'_>> = vec![
            (
                deployment.clone(),
                None,
                "deployment/web",
                (0..3).map(|n| format!("{rs_name}-sim-{n}")).collect(),
                "ReplicaSet",
                rs_name.clone(),
            ),
            (
                deployment.clone(),
                Some(1),
                "deployment/web",
                vec![format!("{rs_name}-sim-0")],
                "ReplicaSet",
                rs_name.clone(),
            ),
            (deployment, Some(0), "deployment/web", vec![], "", String::new()),
            (
                object(
                    "apps/v1",
                    "ReplicaSet",
                    "front",
                    json!({"replicas": 2, "selector": {"matchLabels": {"app": "f"}}, "template": template(json!({"app": "f"}), json!({}))}),
                ),
                None,
                "replicaset/front",
                vec!["front-sim-0".into(), "front-sim-1".into()],
                "ReplicaSet",
                "front".into(),
            ),
            (
                object(
                    "apps/v1",
                    "StatefulSet",
                    "db",
                    json!({"replicas": 1, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}}, "template": template(json!({"app": "db"}), json!({}))}),
                ),
                Some(3),
                "statefulset/db",
                vec!["db-0".into(), "db-1".into(), "db-2".into()],
                "StatefulSet",
                "db".into(),
            ),
            (
                object(
                    "batch/v1",
                    "Job",
                    "batch",
                    json!({"parallelism": 3, "completions": 2, "template": template(json!({}), json!({"restartPolicy": "Never"}))}),
                ),
                None,
                "job/batch",
                vec!["batch-sim-0".into(), "batch-sim-1".into()],
                "Job",
                "batch".into(),
            ),
            (
                object(
                    "batch/v1",
                    "Job",
                    "wide",
                    json!({"parallelism": 1, "template": template(json!({}), json!({"restartPolicy": "Never"}))}),
                ),
                Some(4),
                "job/wide",
                (0..4).map(|n| format!("wide-sim-{n}")).collect(),
                "Job",
                "wide".into(),
            ),
            (
                object(
                    "batch/v1",
                    "Job",
                    "default-parallelism",
                    json!({"template": template(json!({}), json!({"restartPolicy": "Never"}))}),
                ),
                None,
                "job/default-parallelism",
                vec!["default-parallelism-sim-0".into()],
                "Job",
                "default-parallelism".into(),
            ),
            (
                object(
                    "batch/v1",
                    "Job",
                    "paused",
                    json!({"suspend": true, "parallelism": 2, "template": template(json!({}), json!({"restartPolicy": "Never"}))}),
                ),
                None,
                "job/paused",
                vec![],
                "",
                String::new(),
            ),
            (
                object(
                    "apps/v1",
                    "DaemonSet",
                    "agent",
                    json!({"selector": {"matchLabels": {"app": "agent"}}, "template": template(json!({"app": "agent"}), json!({"nodeSelector": {"role": "worker"}}))}),
                ),
                Some(7),
                "daemonset/agent",
                vec!["agent-sim-0".into(), "agent-sim-1".into(), "agent-sim-2".into()],
                "DaemonSet",
                "agent".into(),
            ),
        ];
        for (object, replicas, workload, want_names, owner_kind, owner_name) in cases {
            let ctx = world.ctx(replicas);
            let expansion = expand_ok(&object, &ctx);
            let what = format!("{workload} --replicas={replicas:?}");
            assert_eq!(expansion.workload.to_string(), workload, "{what}");
            assert_eq!(expansion.workload.namespace, "default", "{what}");
            assert_eq!(names(&expansion.pods), want_names, "{what}");
            for pod in &expansion.pods {
                assert_eq!(owner(pod), (owner_kind.to_string(), owner_name.clone()), "{what}");
                assert_eq!(pod.metadata.namespace.as_deref(), Some("default"), "{what}");
                assert_eq!(pod.metadata.creation_timestamp, Some(time()), "{what}");
                assert_eq!(spec(pod).node_name, None, "{what}");
                assert_eq!(
                    spec(pod).scheduler_name.as_deref(),
                    Some("default-scheduler"),
                    "{what}"
                );
                assert_eq!(
                    pod.status.as_ref().and_then(|s| s.phase.as_deref()),
                    Some("Pending"),
                    "{what}"
                );
                // The global default class (the lowest of the two that claim it).
                assert_eq!(spec(pod).priority, Some(-10), "{what}");
                assert_eq!(spec(pod).priority_class_name.as_deref(), Some("lower"), "{what}");
            }
        }
    }

    #[test]
    fn deployment_pods_carry_the_template_hash_of_their_replica_set() {
        let world = World::new();
        let make = |image: &str, collisions: Option<i32>| {
            let mut value = json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "shop"},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                         "template": {"metadata": {"labels": {"app": "web"}},
                                      "spec": {"containers": [{"name": "c", "image": image}]}}}
            });
            if let Some(c) = collisions {
                value["status"] = json!({"collisionCount": c});
            }
            WorkloadObject::from_value(value).unwrap_or_else(|e| panic!("{e}"))
        };
        let hash_of = |o: &WorkloadObject| {
            let e = expand_ok(o, &world.ctx(None));
            let pod = &e.pods[0];
            let hash = label(pod, POD_TEMPLATE_HASH_LABEL)
                .unwrap_or_default()
                .to_string();
            assert_eq!(label(pod, "app"), Some("web"));
            assert_eq!(owner(pod).1, format!("web-{hash}"));
            assert_eq!(pod.metadata.namespace.as_deref(), Some("shop"));
            assert_eq!(e.workload.namespace, "shop");
            hash
        };
        let a = hash_of(&make("nginx:1", None));
        assert!(
            !a.is_empty() && a.bytes().all(|b| SAFE_ALPHABET.contains(&b)),
            "{a}"
        );
        assert_eq!(a, hash_of(&make("nginx:1", None)), "deterministic");
        assert_ne!(a, hash_of(&make("nginx:2", None)), "template changes the hash");
        assert_ne!(
            a,
            hash_of(&make("nginx:1", Some(1))),
            "collisionCount changes the hash"
        );
    }

    #[test]
    fn stateful_set_pods_have_identity_and_claims() {
        let world = World::new();
        let set = object(
            "apps/v1",
            "StatefulSet",
            "db",
            json!({
                "replicas": 2, "serviceName": "db-headless",
                "selector": {"matchLabels": {"app": "db"}},
                "template": template(json!({"app": "db"}), json!({"volumes": [
                    {"name": "data", "emptyDir": {}}, {"name": "scratch", "emptyDir": {}}
                ]})),
                "volumeClaimTemplates": [
                    {"metadata": {"name": "data", "labels": {"tier": "storage"}},
                     "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}},
                    {"metadata": {"name": "logs"},
                     "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
                ]
            }),
        );
        let e = expand_ok(&set, &world.ctx(None));
        assert_eq!(names(&e.pods), ["db-0", "db-1"]);
        for (ordinal, pod) in e.pods.iter().enumerate() {
            let name = format!("db-{ordinal}");
            assert_eq!(label(pod, STATEFUL_SET_POD_NAME_LABEL), Some(name.as_str()));
            assert_eq!(label(pod, POD_INDEX_LABEL), Some(ordinal.to_string().as_str()));
            assert_eq!(spec(pod).hostname.as_deref(), Some(name.as_str()));
            assert_eq!(spec(pod).subdomain.as_deref(), Some("db-headless"));
            let volumes: Vec<(String, Option<String>, bool)> = spec(pod)
                .volumes
                .iter()
                .flatten()
                .map(|v| {
                    (
                        v.name.clone(),
                        v.persistent_volume_claim.as_ref().map(|c| c.claim_name.clone()),
                        v.empty_dir.is_some(),
                    )
                })
                .collect();
            assert_eq!(
                volumes,
                [
                    ("data".to_string(), Some(format!("data-db-{ordinal}")), false),
                    ("logs".to_string(), Some(format!("logs-db-{ordinal}")), false),
                    ("scratch".to_string(), None, true),
                ],
                "the template's own 'data' volume is replaced by the claim"
            );
        }
        // data-db-0 already exists in the cluster.
        let claims: Vec<String> = e
            .claims
            .iter()
            .map(|c| c.metadata.name.clone().unwrap_or_default())
            .collect();
        assert_eq!(claims, ["logs-db-0", "data-db-1", "logs-db-1"]);
        let data1 = &e.claims[1];
        assert_eq!(data1.metadata.namespace.as_deref(), Some("default"));
        let labels = data1.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("tier").map(String::as_str), Some("storage"));
        assert_eq!(labels.get("app").map(String::as_str), Some("db"));
        assert_eq!(
            data1.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Pending")
        );

        let offset = object(
            "apps/v1",
            "StatefulSet",
            "late",
            json!({"replicas": 2, "ordinals": {"start": 5}, "selector": {"matchLabels": {"app": "l"}},
                   "template": template(json!({"app": "l"}), json!({}))}),
        );
        let e = expand_ok(&offset, &world.ctx(None));
        assert_eq!(names(&e.pods), ["late-5", "late-6"]);
        assert_eq!(spec(&e.pods[0]).subdomain, None);
        assert!(e.claims.is_empty());
    }

    #[test]
    fn job_pods_get_the_job_controllers_labels() {
        let world = World::new();
        let plain = object(
            "batch/v1",
            "Job",
            "pi",
            json!({"template": template(json!({"team": "math"}), json!({"restartPolicy": "Never"}))}),
        );
        let e = expand_ok(&plain, &world.ctx(None));
        let pod = &e.pods[0];
        for key in JOB_NAME_LABELS {
            assert_eq!(label(pod, key), Some("pi"), "{key}");
        }
        let uid = simulated_uid("Job", "default", "pi");
        for key in JOB_CONTROLLER_UID_LABELS {
            assert_eq!(label(pod, key), Some(uid.as_str()), "{key}");
        }
        assert_eq!(label(pod, "team"), Some("math"));
        assert_eq!(
            pod.metadata.finalizers.clone().unwrap_or_default(),
            [JOB_TRACKING_FINALIZER]
        );
        assert_eq!(label(pod, JOB_COMPLETION_INDEX), None);

        let manual = object(
            "batch/v1",
            "Job",
            "manual",
            json!({"manualSelector": true, "selector": {"matchLabels": {"x": "y"}},
                   "template": template(json!({"x": "y"}), json!({"restartPolicy": "Never"}))}),
        );
        let e = expand_ok(&manual, &world.ctx(None));
        assert_eq!(
            label(&e.pods[0], "job-name"),
            None,
            "manualSelector: no generated labels"
        );

        let indexed = object(
            "batch/v1",
            "Job",
            "idx",
            json!({"completionMode": "Indexed", "completions": 5, "parallelism": 2,
                   "template": template(json!({}), json!({"restartPolicy": "Never"}))}),
        );
        let e = expand_ok(&indexed, &world.ctx(None));
        assert_eq!(names(&e.pods), ["idx-0-sim", "idx-1-sim"]);
        for (i, pod) in e.pods.iter().enumerate() {
            let index = i.to_string();
            assert_eq!(label(pod, JOB_COMPLETION_INDEX), Some(index.as_str()));
            assert_eq!(
                pod.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(JOB_COMPLETION_INDEX))
                    .map(String::as_str),
                Some(index.as_str())
            );
            assert_eq!(spec(pod).hostname, Some(format!("idx-{i}")));
            let env = spec(pod).containers[0].env.clone().unwrap_or_default();
            assert!(env.iter().any(|e| e.name == "JOB_COMPLETION_INDEX"), "{env:?}");
        }
    }

    #[test]
    fn daemon_set_pods_go_where_the_daemon_controller_puts_them() {
        let world = World::new();
        let ds = object(
            "apps/v1",
            "DaemonSet",
            "agent",
            json!({"selector": {"matchLabels": {"app": "agent"}},
                   "template": template(json!({"app": "agent"}), json!({"nodeSelector": {"role": "worker"}}))}),
        );
        let e = expand_ok(&ds, &world.ctx(None));
        let pinned: Vec<String> = e
            .pods
            .iter()
            .map(|p| {
                let terms = spec(p)
                    .affinity
                    .as_ref()
                    .and_then(|a| a.node_affinity.as_ref())
                    .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())
                    .map(|s| s.node_selector_terms.clone())
                    .unwrap_or_default();
                assert_eq!(terms.len(), 1);
                let fields = terms[0].match_fields.clone().unwrap_or_default();
                assert_eq!(fields.len(), 1);
                assert_eq!(
                    (fields[0].key.as_str(), fields[0].operator.as_str()),
                    ("metadata.name", "In")
                );
                fields[0].values.clone().unwrap_or_default().join(",")
            })
            .collect();
        // other-role: nodeSelector; tainted/evicting: untolerated NoSchedule/NoExecute. The
        // unschedulable taint is tolerated by every daemon pod; PreferNoSchedule never keeps one off.
        assert_eq!(pinned, ["plain", "cordoned", "soft"]);
        let tolerations: Vec<(String, String, Option<i64>)> = spec(&e.pods[0])
            .tolerations
            .iter()
            .flatten()
            .map(|t| {
                (
                    t.key.clone().unwrap_or_default(),
                    t.effect.clone().unwrap_or_default(),
                    t.toleration_seconds,
                )
            })
            .collect();
        let want: Vec<(String, String, Option<i64>)> = [
            ("node.kubernetes.io/not-ready", "NoExecute"),
            ("node.kubernetes.io/unreachable", "NoExecute"),
            ("node.kubernetes.io/disk-pressure", "NoSchedule"),
            ("node.kubernetes.io/memory-pressure", "NoSchedule"),
            ("node.kubernetes.io/pid-pressure", "NoSchedule"),
            ("node.kubernetes.io/unschedulable", "NoSchedule"),
        ]
        .iter()
        .map(|(k, e)| (k.to_string(), e.to_string(), None))
        .collect();
        assert_eq!(
            tolerations, want,
            "no DefaultTolerationSeconds on top of the daemon's"
        );

        // Required node affinity and tolerations of the template, a host-network daemon, and a
        // template pinned by nodeName.
        let cases: Vec<(&str, serde_json::Value, Vec<&str>)> = vec![
            (
                "affinity",
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "role", "operator": "In", "values": ["infra"]}]}]
                }}}}),
                vec!["other-role"],
            ),
            (
                "tolerates dedicated",
                json!({"tolerations": [{"key": "dedicated", "operator": "Exists"}]}),
                vec!["plain", "other-role", "tainted", "evicting", "cordoned", "soft"],
            ),
            ("nodeName", json!({"nodeName": "soft"}), vec!["soft"]),
        ];
        for (name, pod_spec, want) in cases {
            let ds = object(
                "apps/v1",
                "DaemonSet",
                "d",
                json!({"selector": {"matchLabels": {"a": "b"}}, "template": template(json!({"a": "b"}), pod_spec)}),
            );
            let e = expand_ok(&ds, &world.ctx(None));
            let nodes: Vec<String> = e
                .pods
                .iter()
                .filter_map(|p| {
                    let s = spec(p).affinity.as_ref()?.node_affinity.as_ref()?;
                    let terms = &s
                        .required_during_scheduling_ignored_during_execution
                        .as_ref()?
                        .node_selector_terms;
                    terms
                        .first()?
                        .match_fields
                        .as_ref()?
                        .first()?
                        .values
                        .as_ref()?
                        .first()
                        .cloned()
                })
                .collect();
            assert_eq!(nodes, want, "{name}");
            assert!(e.pods.iter().all(|p| spec(p).node_name.is_none()), "{name}");
        }

        let mut host = PodSpec {
            host_network: Some(true),
            tolerations: Some(vec![Toleration {
                key: Some("node.kubernetes.io/unschedulable".into()),
                operator: Some("Exists".into()),
                effect: Some("NoSchedule".into()),
                value: None,
                toleration_seconds: Some(5),
            }]),
            ..PodSpec::default()
        };
        add_daemon_pod_tolerations(&mut host);
        let keys: Vec<(String, Option<i64>)> = host
            .tolerations
            .iter()
            .flatten()
            .map(|t| (t.key.clone().unwrap_or_default(), t.toleration_seconds))
            .collect();
        assert_eq!(keys.len(), 7, "{keys:?}");
        assert_eq!(
            keys[0],
            ("node.kubernetes.io/unschedulable".to_string(), None),
            "a matching toleration is replaced in place"
        );
        assert_eq!(keys[6].0, "node.kubernetes.io/network-unavailable");
    }

    #[test]
    fn priority_is_resolved_as_the_priority_admission_plugin_does() {
        let world = World::new();
        let no_default: Vec<PriorityClass> = vec![class("high", 1000, false, Some("Never"))];
        // (class name, template priority, classes, want (priority, class, policy) or error)
        type Want = Result<(i32, Option<&'static str>, &'static str), &'static str>;
        type Case<'a> = (&'a str, Option<&'a str>, Option<i32>, &'a [PriorityClass], Want);
        let cases: Vec<Case<'_>> = vec![
            (
                "named",
                Some("high"),
                None,
                &world.classes,
                Ok((1000, Some("high"), "Never")),
            ),
            (
                "global default",
                None,
                None,
                &world.classes,
                Ok((-10, Some("lower"), PREEMPT_LOWER_PRIORITY)),
            ),
            (
                "no default",
                None,
                None,
                &no_default,
                Ok((0, None, PREEMPT_LOWER_PRIORITY)),
            ),
            (
                "builtin",
                Some("system-node-critical"),
                None,
                &no_default,
                Ok((
                    2_000_001_000,
                    Some("system-node-critical"),
                    PREEMPT_LOWER_PRIORITY,
                )),
            ),
            (
                "same priority given",
                Some("high"),
                Some(1000),
                &world.classes,
                Ok((1000, Some("high"), "Never")),
            ),
            (
                "missing",
                Some("gold"),
                None,
                &world.classes,
                Err("no PriorityClass with name gold was found"),
            ),
            (
                "conflict",
                Some("high"),
                Some(7),
                &world.classes,
                Err("the integer value of priority (7)"),
            ),
        ];
        for (name, class_name, priority, classes, want) in cases {
            let mut pod_spec = json!({"containers": [{"name": "c"}]});
            if let Some(c) = class_name {
                pod_spec["priorityClassName"] = json!(c);
            }
            if let Some(p) = priority {
                pod_spec["priority"] = json!(p);
            }
            let pod = WorkloadObject::from_value(
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": pod_spec}),
            )
            .unwrap_or_else(|e| panic!("{e}"));
            let ctx = ExpandContext {
                priority_classes: classes,
                ..world.ctx(None)
            };
            match (expand(&pod, &ctx), want) {
                (Ok(e), Ok((value, class, policy))) => {
                    let s = spec(&e.pods[0]);
                    assert_eq!(s.priority, Some(value), "{name}");
                    assert_eq!(s.priority_class_name.as_deref(), class, "{name}");
                    assert_eq!(s.preemption_policy.as_deref(), Some(policy), "{name}");
                }
                (Err(e), Err(message)) => {
                    let text = e.to_string();
                    assert!(text.starts_with("pod/p: "), "{name}: {text}");
                    assert!(text.contains(message), "{name}: {text}");
                }
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
        // A workload's missing class names the workload and the class.
        let d = object(
            "apps/v1",
            "Deployment",
            "web",
            json!({"selector": {}, "template": template(json!({"a": "b"}), json!({"priorityClassName": "gold"}))}),
        );
        assert_eq!(
            expand(&d, &world.ctx(None)),
            Err(WorkloadsError::UnknownPriorityClass {
                workload: "deployment/web".into(),
                class: "gold".into()
            })
        );
    }

    #[test]
    fn a_bare_pod_is_returned_as_is() {
        let world = World::new();
        let pod = WorkloadObject::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "solo", "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1"}}}], "schedulerName": "custom"}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let e = expand_ok(&pod, &world.ctx(Some(9)));
        assert_eq!(e.workload.to_string(), "pod/solo");
        assert_eq!(names(&e.pods), ["solo"]);
        let p = &e.pods[0];
        assert_eq!(p.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(p.metadata.owner_references, None);
        assert_eq!(label(p, "a"), Some("b"));
        assert_eq!(spec(p).scheduler_name.as_deref(), Some("custom"));
        assert_eq!(spec(p).priority, Some(-10));
        let requests = spec(p).containers[0]
            .resources
            .as_ref()
            .and_then(|r| r.requests.clone())
            .unwrap_or_default();
        assert!(requests.contains_key("cpu"), "requests default to limits");
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        let world = World::new();
        let decode_err = |value: serde_json::Value| WorkloadObject::from_value(value).err();
        let cases: Vec<(&str, serde_json::Value, &str)> = vec![
            (
                "unsupported kind",
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}}),
                "Service \"web\" (v1) is not a workload",
            ),
            (
                "old api version",
                json!({"apiVersion": "extensions/v1beta1", "kind": "Deployment", "metadata": {"name": "old"}}),
                "Deployment \"old\" (extensions/v1beta1) is not a workload",
            ),
            (
                "no kind",
                json!({"metadata": {"name": "x"}}),
                "object \"x\" has no apiVersion or kind",
            ),
            ("not an object", json!(42), "has no apiVersion or kind"),
            (
                "wrong type",
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w"},
                       "spec": {"replicas": "three", "selector": {}, "template": {}}}),
                "failed to decode Deployment \"w\"",
            ),
        ];
        for (name, value, want) in cases {
            match decode_err(value) {
                Some(e) => assert!(e.to_string().contains(want), "{name}: {e}"),
                None => panic!("{name}: decoded"),
            }
        }

        let template_ok = template(json!({"a": "b"}), json!({}));
        let cases: Vec<(&str, serde_json::Value, Option<i32>, WorkloadsError)> = vec![
            (
                "missing name",
                json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {},
                       "spec": {"selector": {}, "template": template_ok.clone()}}),
                None,
                WorkloadsError::MissingName {
                    kind: "ReplicaSet".into(),
                },
            ),
            (
                "pod without name",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": ""}, "spec": {"containers": []}}),
                None,
                WorkloadsError::MissingName { kind: "Pod".into() },
            ),
            (
                "negative replicas in the object",
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                       "spec": {"replicas": -1, "selector": {}, "template": template_ok.clone()}}),
                None,
                WorkloadsError::NegativeReplicas {
                    workload: "deployment/d".into(),
                    replicas: -1,
                },
            ),
            (
                "negative --replicas",
                json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                       "spec": {"template": template_ok.clone()}}),
                Some(-3),
                WorkloadsError::NegativeReplicas {
                    workload: "job/j".into(),
                    replicas: -3,
                },
            ),
            (
                "absurd --replicas",
                json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"},
                       "spec": {"selector": {}, "template": template_ok.clone()}}),
                Some(i32::MAX),
                WorkloadsError::TooManyReplicas {
                    workload: "statefulset/s".into(),
                    replicas: i32::MAX,
                },
            ),
            (
                "replica set without template",
                json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "r"},
                       "spec": {"replicas": 1, "selector": {}}}),
                None,
                WorkloadsError::MissingPodSpec {
                    workload: "replicaset/r".into(),
                },
            ),
            (
                "template without spec",
                json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"},
                       "spec": {"selector": {}, "template": {"metadata": {}}}}),
                None,
                WorkloadsError::MissingPodSpec {
                    workload: "statefulset/s".into(),
                },
            ),
            (
                "pod without spec",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}),
                None,
                WorkloadsError::MissingPodSpec {
                    workload: "pod/p".into(),
                },
            ),
            (
                "unnamed claim template",
                json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"},
                       "spec": {"selector": {}, "template": template_ok.clone(),
                                "volumeClaimTemplates": [{"metadata": {}}]}}),
                None,
                WorkloadsError::UnnamedClaimTemplate {
                    workload: "statefulset/s".into(),
                    index: 0,
                },
            ),
        ];
        for (name, value, replicas, want) in cases {
            let object = WorkloadObject::from_value(value).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(expand(&object, &world.ctx(replicas)), Err(want), "{name}");
        }
        // A deployment with zero replicas and a job with negative completions make no pods.
        let job = object(
            "batch/v1",
            "Job",
            "none",
            json!({"completions": -1, "template": template_ok.clone()}),
        );
        assert!(expand_ok(&job, &world.ctx(None)).pods.is_empty());
    }

    #[test]
    fn odd_objects_never_panic() {
        let world = World::new();
        let values = [
            json!(null),
            json!({"apiVersion": "apps/v1", "kind": "Deployment"}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}, "spec": {}}),
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "x"},
                   "spec": {"selector": {}, "template": {}}}),
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "x"},
                   "spec": {"selector": {}, "template": {"spec": {"containers": [],
                   "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                   {"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Bogus"}]}]}}}}}}}),
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "x"},
                   "spec": {"selector": {}, "ordinals": {"start": -4}, "template": {"spec": {"containers": []}}}}),
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"},
                   "spec": {"completionMode": "Indexed", "template": {"spec": {"containers": []}}}}),
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"}}),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": ""}, "spec": {"containers": []}}),
        ];
        for value in values {
            let text = value.to_string();
            if let Ok(object) = WorkloadObject::from_value(value) {
                for replicas in [None, Some(0), Some(2), Some(-1)] {
                    // Either answer is fine; reaching here is the test.
                    let _ = expand(&object, &world.ctx(replicas)).map_err(|e| (text.clone(), e));
                    // Where the expansion succeeds, the count is its number of pods (an object it
                    // refuses is refused when expanded, whatever the count said).
                    if let Ok(expansion) = expand(&object, &world.ctx(replicas)) {
                        let count = expanded_pod_count(&object, &world.ctx(replicas));
                        assert_eq!(count, Ok(expansion.pods.len()), "{text} --replicas={replicas:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn counted_pods_are_the_expanded_pods() {
        let world = World::new();
        let t = || template(json!({"app": "a"}), json!({}));
        let objects = [
            object("v1", "Pod", "p", json!({"containers": [{"name": "c"}]})),
            object(
                "apps/v1",
                "Deployment",
                "d",
                json!({"replicas": 3, "selector": {}, "template": t()}),
            ),
            object(
                "apps/v1",
                "ReplicaSet",
                "r",
                json!({"selector": {}, "template": t()}),
            ),
            object(
                "apps/v1",
                "StatefulSet",
                "s",
                json!({"replicas": 2, "selector": {}, "template": t()}),
            ),
            object(
                "batch/v1",
                "Job",
                "j",
                json!({"parallelism": 4, "completions": 3, "template": t()}),
            ),
            object(
                "batch/v1",
                "Job",
                "held",
                json!({"parallelism": 4, "suspend": true, "template": t()}),
            ),
            object(
                "apps/v1",
                "DaemonSet",
                "ds",
                json!({"selector": {}, "template": t()}),
            ),
            object(
                "apps/v1",
                "DaemonSet",
                "workers",
                json!({"selector": {}, "template": template(json!({}), json!({"nodeSelector": {"role": "worker"}}))}),
            ),
        ];
        for replicas in [None, Some(0), Some(5)] {
            let ctx = world.ctx(replicas);
            let mut total = 0;
            for o in &objects {
                let made = expand_ok(o, &ctx).pods.len();
                assert_eq!(
                    expanded_pod_count(o, &ctx),
                    Ok(made),
                    "{} --replicas={replicas:?}",
                    o.kind()
                );
                total += made;
            }
            assert_eq!(check_expansion_total(&objects, &ctx, total), Ok(total));
        }
    }

    /// The issue's case: 40 workloads of 150,000 replicas each (each within [`MAX_REPLICAS`]) are six
    /// million pods together, refused before any is built, naming the largest workloads.
    #[test]
    fn too_many_pods_together_are_refused_before_expansion() {
        let world = World::new();
        let objects: Vec<WorkloadObject> = (0..40)
            .map(|i| {
                let replicas = 150_000 - i;
                let t = template(json!({"app": "a"}), json!({}));
                object(
                    "apps/v1",
                    "Deployment",
                    &format!("w{i:02}"),
                    json!({"replicas": replicas, "selector": {}, "template": t}),
                )
            })
            .collect();
        let started = std::time::Instant::now();
        let refused = check_expansion_total(&objects, &world.ctx(None), DEFAULT_MAX_EXPANDED_PODS);
        let took = started.elapsed();
        let total = (0..40).map(|i| 150_000 - i).sum();
        let want = WorkloadsError::TooManyPods {
            total,
            limit: DEFAULT_MAX_EXPANDED_PODS,
            largest: (0..5)
                .map(|i| (format!("deployment/w{i:02}"), 150_000 - i))
                .collect(),
            others: 35,
        };
        assert_eq!(refused, Err(want.clone()));
        assert_eq!(
            want.to_string(),
            "the workloads expand into 5999220 pods together, more than the 1000000 a simulation expands: \
             deployment/w00 150000, deployment/w01 149999, deployment/w02 149998, deployment/w03 149997, \
             deployment/w04 149996 and 35 more workload(s)"
        );
        assert!(took < std::time::Duration::from_secs(1), "{took:?}");
        // At the limit exactly, accepted.
        assert_eq!(
            check_expansion_total(&objects, &world.ctx(None), total),
            Ok(total)
        );
    }
}
