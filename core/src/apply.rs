//! Executes an action plan with a `kube::Client` (feature `kube`): the one writer the CLI and the webhook
//! share.
//!
//! Every write is idempotent and guarded: pods are touched only while they keep the UID the decision saw,
//! PVs and PVCs are replaced with the resourceVersion just read, and a 409 is answered by reading the
//! object again and re-checking it (bounded). A PV already bound to the same claim, or a claim already
//! annotated with the same value, counts as done, so a retried or duplicated plan (a webhook reinvoked,
//! two replicas) converges instead of failing.
//!
//! A pod reference that carries a resourceVersion makes it a precondition of every write to that pod:
//! DELETE and the Eviction's `deleteOptions` send it (with the UID) as `preconditions`, status patches
//! and bindings carry it in `metadata.resourceVersion`, so the API server answers 409 when the pod
//! changed since the decision. That is never retried on fresh state here: it fails the action with
//! [`ApplyError::Conflict`] ("changed since the plan"), for the caller to decide again. A pod that is
//! gone, or was replaced by another of the same name (another UID), is [`Outcome::Gone`]: the planned
//! object no longer exists and the new one is not touched. Within one [`execute`], a pod the plan wrote
//! (a status patch) is expected at the resourceVersion that write returned by the plan's later actions on
//! it (a victim's condition, then its DELETE), not at the one the decision saw.
//!
//! [`execute`] runs the actions in order and stops at the first failure (events excepted: they are
//! best-effort) or at an eviction a PodDisruptionBudget blocks; the results say what happened to each
//! action, so callers can report a partial run. [`undo`] takes back a binding or annotation a result says
//! was made, for callers that must leave nothing behind when a later step fails.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use k8s_openapi::api::core::v1::{Binding, ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    DeleteOptions, MicroTime, ObjectMeta, Preconditions as MetaPreconditions,
};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Client};
use serde::Serialize;

use crate::action::{Action, EventSpec, ObjectRef, PodConditionPatch};
use crate::plugins::volume_binding::pv_helpers::{
    ANN_BOUND_BY_CONTROLLER, VOLUME_AVAILABLE, bind_volume_to_claim, claim_volume_name,
    is_volume_bound_to_claim,
};

/// How many times a replace that hit a 409 is retried on a fresh read.
pub const DEFAULT_CONFLICT_RETRIES: u32 = 5;

/// How to execute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyOptions {
    /// Send every write with `dryRun=All`: the server validates and admits it, nothing is persisted.
    pub dry_run_server: bool,
    /// `fieldManager` of every write, also the events' reporting controller.
    pub field_manager: String,
    /// The events' reporting instance (defaults to the field manager).
    pub reporting_instance: Option<String>,
    /// Retries of a replace after a 409 (each on a fresh read).
    pub conflict_retries: u32,
    /// No retry starts after this instant (the admission webhook's answer is due before the API
    /// server's webhook timeout); the first attempt always runs.
    pub deadline: Option<Instant>,
}

impl ApplyOptions {
    /// Real writes with this field manager.
    pub fn new(field_manager: impl Into<String>) -> Self {
        ApplyOptions {
            dry_run_server: false,
            field_manager: field_manager.into(),
            reporting_instance: None,
            conflict_retries: DEFAULT_CONFLICT_RETRIES,
            deadline: None,
        }
    }

    /// True once the deadline (if any) has passed.
    pub fn out_of_time(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Whether retry number `attempt` (0 is the first attempt) may start.
    fn may_attempt(&self, attempt: u32, action: &str) -> Result<(), ApplyError> {
        if attempt > 0 && self.out_of_time() {
            return Err(ApplyError::OutOfTime {
                action: action.to_string(),
                attempts: attempt,
            });
        }
        Ok(())
    }

    /// What a write that went through is: [`Outcome::DryRun`] under `dryRun=All`, else [`Outcome::Done`].
    fn done(&self) -> Outcome {
        if self.dry_run_server {
            Outcome::DryRun
        } else {
            Outcome::Done
        }
    }

    fn post(&self) -> PostParams {
        PostParams {
            dry_run: self.dry_run_server,
            field_manager: Some(self.field_manager.clone()),
        }
    }

    fn patch(&self) -> PatchParams {
        PatchParams {
            dry_run: self.dry_run_server,
            field_manager: Some(self.field_manager.clone()),
            ..PatchParams::default()
        }
    }
}

/// Why an action failed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The API server refused the request or could not be reached.
    #[error("failed to {action}: {}", brief(.source))]
    Api {
        /// What was attempted.
        action: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The object is needed but does not exist (a PV or PVC to write, a pod to bind).
    #[error("failed to {action}: {object} not found")]
    NotFound {
        /// What was attempted.
        action: String,
        /// `kind namespace/name`.
        object: String,
    },
    /// The object exists under the same name but is a different one (recreated since the decision).
    #[error("failed to {action}: {object} has uid {found}, the plan was made for uid {expected}")]
    UidMismatch {
        /// What was attempted.
        action: String,
        /// `kind namespace/name`.
        object: String,
        /// The UID the plan names.
        expected: String,
        /// The UID found.
        found: String,
    },
    /// Someone else got there first: the PV is bound to another claim, the claim to another volume or
    /// node, the pod to another node. Re-deciding on fresh state is the only way forward.
    #[error("failed to {action}: conflict: {detail}")]
    Conflict {
        /// What was attempted.
        action: String,
        /// What is in the way.
        detail: String,
    },
    /// The object changed so that the decision no longer holds (e.g. the PV is being deleted).
    #[error("failed to {action}: {detail}")]
    Invalid {
        /// What was attempted.
        action: String,
        /// Why it no longer holds.
        detail: String,
    },
    /// The deadline passed before a retry after a 409 could start.
    #[error("failed to {action}: out of time after {attempts} conflicting attempt(s)")]
    OutOfTime {
        /// What was attempted.
        action: String,
        /// How many attempts were made.
        attempts: u32,
    },
    /// Every attempt hit a 409.
    #[error("failed to {action}: still conflicting after {attempts} attempts")]
    RetriesExhausted {
        /// What was attempted.
        action: String,
        /// How many attempts were made.
        attempts: u32,
    },
}

/// A client error in one line: the API server's own message and HTTP code, without the client's dump
/// of the whole Status object.
fn brief(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => format!("{} (HTTP {})", status.message, status.code),
        other => other.to_string(),
    }
}

impl ApplyError {
    /// True when fresh state could lead to a different, successful decision (a conflict).
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            ApplyError::Conflict { .. } | ApplyError::RetriesExhausted { .. }
        )
    }
}

/// What happened to one action.
#[derive(Debug)]
pub enum Outcome {
    /// The write was made.
    Done,
    /// The server validated the write with `dryRun=All`; nothing was persisted.
    DryRun,
    /// Nothing to do: the object already is as the action wants it.
    AlreadyDone,
    /// The object the action was about no longer exists (or was replaced): nothing left to do.
    Gone,
    /// The eviction was refused because it would violate a PodDisruptionBudget (HTTP 429); the plan stops.
    PdbBlocked {
        /// The server's message.
        message: String,
    },
    /// The action failed; the plan stops here (unless it is an event).
    Failed(ApplyError),
    /// Not attempted: an earlier action stopped the plan.
    NotRun,
}

impl Outcome {
    /// The outcome's name in reports: done, dry-run, already-done, gone, pdb-blocked, failed, not-run.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Done => "done",
            Outcome::DryRun => "dry-run",
            Outcome::AlreadyDone => "already-done",
            Outcome::Gone => "gone",
            Outcome::PdbBlocked { .. } => "pdb-blocked",
            Outcome::Failed(_) => "failed",
            Outcome::NotRun => "not-run",
        }
    }

    /// True when the action's goal holds (made now, already true, dry-run validated, or moot).
    pub fn is_success(&self) -> bool {
        matches!(
            self,
            Outcome::Done | Outcome::DryRun | Outcome::AlreadyDone | Outcome::Gone
        )
    }
}

/// The object an action left behind (after a write) or found in its way (on a conflict), for callers
/// that keep a cache and must not wait for their watch to see it.
#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    /// A PersistentVolume.
    Pv(Box<PersistentVolume>),
    /// A PersistentVolumeClaim.
    Pvc(Box<PersistentVolumeClaim>),
}

/// An action and what happened to it.
#[derive(Debug)]
pub struct ActionResult {
    /// The action.
    pub action: Action,
    /// What happened.
    pub outcome: Outcome,
    /// The object as last seen by the action (PV and PVC actions only).
    pub observed: Option<Observed>,
}

impl ActionResult {
    /// A one-line message: the outcome and, for failures and blocked evictions, why.
    pub fn message(&self) -> String {
        match &self.outcome {
            Outcome::Failed(e) => e.to_string(),
            Outcome::PdbBlocked { message } => message.clone(),
            other => format!("{}: {}", other.name(), self.action.describe()),
        }
    }
}

impl Serialize for ActionResult {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Shown<'a> {
            action: &'a Action,
            outcome: &'static str,
            #[serde(skip_serializing_if = "Option::is_none")]
            message: Option<String>,
        }
        let message = match &self.outcome {
            Outcome::Failed(e) => Some(e.to_string()),
            Outcome::PdbBlocked { message } => Some(message.clone()),
            _ => None,
        };
        Shown {
            action: &self.action,
            outcome: self.outcome.name(),
            message,
        }
        .serialize(serializer)
    }
}

/// Executes `plan` in order. Stops at the first failure (failed events are recorded and skipped) and at
/// a blocked eviction; the actions after that are reported as [`Outcome::NotRun`].
pub async fn execute(client: &Client, plan: &[Action], options: &ApplyOptions) -> Vec<ActionResult> {
    execute_with_progress(client, plan, options, |_, _| {}).await
}

/// [`execute`], calling `progress` with each action's index and result as soon as it is known (the
/// actions after a stop too, as not run), so a caller can show a long plan advancing.
pub async fn execute_with_progress(
    client: &Client,
    plan: &[Action],
    options: &ApplyOptions,
    mut progress: impl FnMut(usize, &ActionResult),
) -> Vec<ActionResult> {
    let mut results = Vec::with_capacity(plan.len());
    let mut stopped = false;
    let mut written = WrittenVersions::default();
    for action in plan {
        if stopped {
            let result = ActionResult {
                action: action.clone(),
                outcome: Outcome::NotRun,
                observed: None,
            };
            progress(results.len(), &result);
            results.push(result);
            continue;
        }
        let action = &written.current(action);
        let (outcome, observed, new_version) = execute_action(client, action, options).await;
        if let (Some(pod), Some(new_version)) = (action.pod_written(), new_version) {
            written.record(pod, new_version);
        }
        let stops = match &outcome {
            Outcome::PdbBlocked { .. } => true,
            Outcome::Failed(_) => !matches!(action, Action::Event(_)),
            _ => false,
        };
        stopped = stops;
        let result = ActionResult {
            action: action.clone(),
            outcome,
            observed,
        };
        progress(results.len(), &result);
        results.push(result);
    }
    results
}

/// The resourceVersions of pods written earlier in one plan: `(namespace, name)` → (version the write
/// was conditioned on → version it left). A later action on the same pod conditioned on the older
/// version is conditioned on the newer one instead: the plan's own write is not a change by someone else.
#[derive(Debug, Default)]
struct WrittenVersions(HashMap<(String, String), HashMap<String, String>>);

impl WrittenVersions {
    fn record(&mut self, pod: &ObjectRef, new_version: String) {
        if let Some(old) = &pod.resource_version {
            self.0
                .entry((pod.namespace.clone(), pod.name.clone()))
                .or_default()
                .insert(old.clone(), new_version);
        }
    }

    /// `action` with its pod's resourceVersion brought forward past the plan's own writes.
    fn current(&self, action: &Action) -> Action {
        let mut action = action.clone();
        if let Some(pod) = action.pod_written_mut()
            && let Some(versions) = self.0.get(&(pod.namespace.clone(), pod.name.clone()))
            && let Some(mut version) = pod.resource_version.clone()
        {
            // Each write moves the version forward once; the bound stops a cycle in a bad map.
            for _ in 0..=versions.len() {
                match versions.get(&version) {
                    Some(next) if *next != version => version = next.clone(),
                    _ => break,
                }
            }
            pod.resource_version = Some(version);
        }
        action
    }
}

impl Action {
    /// The pod this action writes to (events excepted: they are objects of their own).
    fn pod_written(&self) -> Option<&ObjectRef> {
        match self {
            Action::DeletePod { pod }
            | Action::EvictPod { pod }
            | Action::SetPodCondition { pod, .. }
            | Action::SetNominatedNodeName { pod, .. }
            | Action::BindPod { pod, .. } => Some(pod),
            _ => None,
        }
    }

    fn pod_written_mut(&mut self) -> Option<&mut ObjectRef> {
        match self {
            Action::DeletePod { pod }
            | Action::EvictPod { pod }
            | Action::SetPodCondition { pod, .. }
            | Action::SetNominatedNodeName { pod, .. }
            | Action::BindPod { pod, .. } => Some(pod),
            _ => None,
        }
    }
}

/// Executes one action.
pub async fn execute_one(
    client: &Client,
    action: &Action,
    options: &ApplyOptions,
) -> (Outcome, Option<Observed>) {
    let (outcome, observed, _) = execute_action(client, action, options).await;
    (outcome, observed)
}

/// [`execute_one`], also returning the resourceVersion a pod write left the pod at (status patches).
async fn execute_action(
    client: &Client,
    action: &Action,
    options: &ApplyOptions,
) -> (Outcome, Option<Observed>, Option<String>) {
    let done = options.done();
    let mut new_version = None;
    let result = match action {
        Action::DeletePod { pod } => delete_pod(client, pod, options).await,
        Action::EvictPod { pod } => evict_pod(client, pod, options).await,
        Action::SetPodCondition { pod, condition } => {
            let patch = condition_patch(pod, condition);
            patch_pod_status(client, pod, &patch, action, options)
                .await
                .map(|(step, version)| {
                    new_version = version;
                    step
                })
        }
        Action::SetNominatedNodeName { pod, node } => {
            let patch = nomination_patch(pod, node);
            patch_pod_status(client, pod, &patch, action, options)
                .await
                .map(|(step, version)| {
                    new_version = version;
                    step
                })
        }
        Action::BindPv {
            pv,
            claim,
            resource_version,
        } => {
            return match bind_pv(client, pv, claim, resource_version.as_deref(), options).await {
                Ok((changed, observed)) => {
                    (if changed { done } else { Outcome::AlreadyDone }, observed, None)
                }
                Err((e, observed)) => (Outcome::Failed(e), observed, None),
            };
        }
        Action::AnnotatePvc {
            pvc,
            key,
            value,
            resource_version,
        } => {
            return match annotate_pvc(client, pvc, key, value, resource_version.as_deref(), options).await {
                Ok((changed, observed)) => {
                    (if changed { done } else { Outcome::AlreadyDone }, observed, None)
                }
                Err((e, observed)) => (Outcome::Failed(e), observed, None),
            };
        }
        Action::BindPod { pod, node } => bind_pod(client, pod, node, options).await,
        Action::Event(spec) => record_event(client, spec, options).await,
    };
    let outcome = match result {
        Ok(Step::Done) => done,
        Ok(Step::AlreadyDone) => Outcome::AlreadyDone,
        Ok(Step::Gone) => Outcome::Gone,
        Ok(Step::PdbBlocked(message)) => Outcome::PdbBlocked { message },
        Err(e) => Outcome::Failed(e),
    };
    (outcome, None, new_version)
}

/// Takes back a write a result says was made: a PV's claimRef (and the bound-by-controller annotation)
/// when it still names the claim, a claim's annotation when it still has the value. Anything else —
/// dry runs, actions that changed nothing, other kinds — is left alone.
pub async fn undo(
    client: &Client,
    result: &ActionResult,
    options: &ApplyOptions,
) -> Result<Outcome, ApplyError> {
    if !matches!(result.outcome, Outcome::Done) {
        return Ok(Outcome::AlreadyDone);
    }
    match &result.action {
        Action::BindPv { pv, claim, .. } => unbind_pv(client, pv, claim, options).await,
        Action::AnnotatePvc { pvc, key, value, .. } => {
            remove_pvc_annotation(client, pvc, key, value, options).await
        }
        _ => Ok(Outcome::AlreadyDone),
    }
}

/// The result of one non-volume step.
enum Step {
    Done,
    AlreadyDone,
    Gone,
    PdbBlocked(String),
}

fn api_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

fn api_err(action: &Action, source: kube::Error) -> ApplyError {
    ApplyError::Api {
        action: action.describe(),
        source,
    }
}

fn pods(client: &Client, pod: &ObjectRef) -> Api<Pod> {
    Api::namespaced(client.clone(), &pod.namespace)
}

/// The preconditions of a write to `pod` in object metadata: `uid` (the API server refuses to change a
/// UID, so a write naming the planned one fails on a recreated pod) and `resourceVersion` (a write
/// carrying it fails with 409 when the pod changed since).
fn metadata_preconditions(pod: &ObjectRef) -> serde_json::Value {
    let mut meta = serde_json::Map::new();
    if let Some(uid) = &pod.uid {
        meta.insert("uid".into(), uid.clone().into());
    }
    if let Some(version) = &pod.resource_version {
        meta.insert("resourceVersion".into(), version.clone().into());
    }
    serde_json::Value::Object(meta)
}

/// DELETE's preconditions: the UID and the resourceVersion the plan was made on.
fn delete_preconditions(pod: &ObjectRef) -> Option<MetaPreconditions> {
    (pod.uid.is_some() || pod.resource_version.is_some()).then(|| MetaPreconditions {
        uid: pod.uid.clone(),
        resource_version: pod.resource_version.clone(),
    })
}

/// The query parameters of a pod's DELETE.
fn delete_params(pod: &ObjectRef, options: &ApplyOptions) -> DeleteParams {
    DeleteParams {
        dry_run: options.dry_run_server,
        preconditions: delete_preconditions(pod).map(|p| Preconditions {
            uid: p.uid,
            resource_version: p.resource_version,
        }),
        ..DeleteParams::default()
    }
}

/// The Eviction for a pod, its `deleteOptions` carrying the preconditions.
fn eviction_for(pod: &ObjectRef) -> Eviction {
    Eviction {
        metadata: ObjectMeta {
            name: Some(pod.name.clone()),
            namespace: Some(pod.namespace.clone()),
            ..ObjectMeta::default()
        },
        delete_options: delete_preconditions(pod).map(|preconditions| DeleteOptions {
            preconditions: Some(preconditions),
            ..DeleteOptions::default()
        }),
    }
}

/// SetPodCondition's status patch.
fn condition_patch(pod: &ObjectRef, condition: &PodConditionPatch) -> Patch<serde_json::Value> {
    let body = serde_json::json!({
        "metadata": metadata_preconditions(pod),
        "status": {"conditions": [{
            "type": condition.type_,
            "status": condition.status,
            "reason": condition.reason,
            "message": condition.message,
            "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().to_string(),
        }]},
    });
    // Conditions are a list merged by `type`: a strategic merge patch adds or replaces one condition
    // and keeps the others (a JSON merge patch would replace the whole list).
    Patch::Strategic(body)
}

/// SetNominatedNodeName's status patch ("" clears the nomination).
fn nomination_patch(pod: &ObjectRef, node: &str) -> Patch<serde_json::Value> {
    let value = if node.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::Value::String(node.to_string())
    };
    Patch::Merge(serde_json::json!({
        "metadata": metadata_preconditions(pod),
        "status": {"nominatedNodeName": value},
    }))
}

/// The Binding of a pod to a node, conditioned on the pod's UID and resourceVersion.
fn binding_for(pod: &ObjectRef, node: &str) -> Binding {
    Binding {
        metadata: ObjectMeta {
            name: Some(pod.name.clone()),
            namespace: Some(pod.namespace.clone()),
            uid: pod.uid.clone(),
            resource_version: pod.resource_version.clone(),
            ..ObjectMeta::default()
        },
        target: ObjectReference {
            kind: Some("Node".to_string()),
            name: Some(node.to_string()),
            ..ObjectReference::default()
        },
    }
}

/// A pod write refused by the API server (409, or 422 for a patch naming another UID): what became of the
/// pod the plan names, read again. Gone (or replaced by a pod of another UID): nothing left to do. At
/// another resourceVersion than the plan's: it changed since the plan, a conflict to report (never
/// retried here). Otherwise the server's own answer.
async fn refused_pod_write(
    client: &Client,
    pod: &ObjectRef,
    action: &Action,
    e: kube::Error,
) -> Result<Step, ApplyError> {
    let code = api_code(&e);
    if code == Some(404) {
        return Ok(Step::Gone);
    }
    let guarded = pod.uid.is_some() || pod.resource_version.is_some();
    if !guarded || !matches!(code, Some(409) | Some(422)) {
        return Err(api_err(action, e));
    }
    let current = pods(client, pod)
        .get_opt(&pod.name)
        .await
        .map_err(|read| api_err(action, read))?;
    Err(
        match changed_since_plan(pod, current.as_ref().map(|p| &p.metadata)) {
            PodChange::Gone => return Ok(Step::Gone),
            PodChange::Changed(detail) => ApplyError::Conflict {
                action: action.describe(),
                detail,
            },
            PodChange::Same if code == Some(409) => ApplyError::Conflict {
                action: action.describe(),
                detail: brief(&e),
            },
            PodChange::Same => api_err(action, e),
        },
    )
}

/// What became of a planned pod, from its current metadata (None: not found).
#[derive(Debug, PartialEq, Eq)]
enum PodChange {
    /// Deleted, or replaced by another pod of the same name.
    Gone,
    /// Still there at another resourceVersion than the plan's (the detail says so).
    Changed(String),
    /// As the plan saw it, as far as the preconditions tell.
    Same,
}

fn changed_since_plan(pod: &ObjectRef, current: Option<&ObjectMeta>) -> PodChange {
    let Some(meta) = current else {
        return PodChange::Gone;
    };
    if let Some(uid) = &pod.uid
        && meta.uid.as_deref() != Some(uid.as_str())
    {
        return PodChange::Gone;
    }
    match (&pod.resource_version, &meta.resource_version) {
        (Some(planned), Some(now)) if planned != now => PodChange::Changed(format!(
            "pod {} changed since the plan was made (resourceVersion {planned}, now {now})",
            pod.key()
        )),
        _ => PodChange::Same,
    }
}

async fn delete_pod(client: &Client, pod: &ObjectRef, options: &ApplyOptions) -> Result<Step, ApplyError> {
    let params = delete_params(pod, options);
    match pods(client, pod).delete(&pod.name, &params).await {
        Ok(_) => Ok(Step::Done),
        Err(e) => refused_pod_write(client, pod, &Action::DeletePod { pod: pod.clone() }, e).await,
    }
}

async fn evict_pod(client: &Client, pod: &ObjectRef, options: &ApplyOptions) -> Result<Step, ApplyError> {
    let eviction = eviction_for(pod);
    let result: Result<serde_json::Value, _> = pods(client, pod)
        .create_subresource("eviction", &pod.name, &options.post(), &eviction)
        .await;
    match result {
        Ok(_) => Ok(Step::Done),
        Err(kube::Error::Api(status)) if status.code == 429 => Ok(Step::PdbBlocked(status.message.clone())),
        Err(e) => refused_pod_write(client, pod, &Action::EvictPod { pod: pod.clone() }, e).await,
    }
}

/// Patches the pod's status; on success also returns the resourceVersion the pod is at now.
async fn patch_pod_status(
    client: &Client,
    pod: &ObjectRef,
    patch: &Patch<serde_json::Value>,
    action: &Action,
    options: &ApplyOptions,
) -> Result<(Step, Option<String>), ApplyError> {
    match pods(client, pod)
        .patch_status(&pod.name, &options.patch(), patch)
        .await
    {
        Ok(written) => Ok((Step::Done, written.metadata.resource_version)),
        Err(e) => refused_pod_write(client, pod, action, e)
            .await
            .map(|step| (step, None)),
    }
}

async fn bind_pod(
    client: &Client,
    pod: &ObjectRef,
    node: &str,
    options: &ApplyOptions,
) -> Result<Step, ApplyError> {
    let action = Action::BindPod {
        pod: pod.clone(),
        node: node.to_string(),
    };
    let binding = binding_for(pod, node);
    let api = pods(client, pod);
    let result: Result<serde_json::Value, _> = api
        .create_subresource("binding", &pod.name, &options.post(), &binding)
        .await;
    match result {
        Ok(_) => Ok(Step::Done),
        Err(e) if api_code(&e) == Some(409) => {
            // Already bound: done if to this node, a conflict otherwise.
            let current = api.get_opt(&pod.name).await.map_err(|e| api_err(&action, e))?;
            let bound_to = current
                .as_ref()
                .and_then(|p| p.spec.as_ref())
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default();
            if bound_to == node {
                return Ok(Step::AlreadyDone);
            }
            let detail = match changed_since_plan(pod, current.as_ref().map(|p| &p.metadata)) {
                _ if !bound_to.is_empty() => format!("pod {} is bound to node {bound_to}", pod.key()),
                PodChange::Gone if current.is_some() => {
                    format!("pod {} was replaced by another pod of the same name", pod.key())
                }
                PodChange::Changed(detail) => detail,
                _ => brief(&e),
            };
            Err(ApplyError::Conflict {
                action: action.describe(),
                detail,
            })
        }
        Err(e) if api_code(&e) == Some(404) => Err(ApplyError::NotFound {
            action: action.describe(),
            object: format!("pod {}", pod.key()),
        }),
        Err(e) => Err(api_err(&action, e)),
    }
}

async fn record_event(client: &Client, spec: &EventSpec, options: &ApplyOptions) -> Result<Step, ApplyError> {
    let now = k8s_openapi::jiff::Timestamp::now();
    let reference = |r: &ObjectRef, kind: &str| ObjectReference {
        kind: Some(kind.to_string()),
        api_version: Some("v1".to_string()),
        namespace: (!r.namespace.is_empty()).then(|| r.namespace.clone()),
        name: Some(r.name.clone()),
        uid: r.uid.clone(),
        ..ObjectReference::default()
    };
    let namespace = if spec.regarding.namespace.is_empty() {
        "default".to_string()
    } else {
        spec.regarding.namespace.clone()
    };
    let event = Event {
        metadata: ObjectMeta {
            // The name only has to be unique; the timestamp in hex is what client-go's recorder uses too.
            name: Some(format!("{}.{:x}", spec.regarding.name, now.as_nanosecond())),
            namespace: Some(namespace.clone()),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(now)),
        action: Some(spec.action.clone()),
        reason: Some(spec.reason.clone()),
        note: Some(spec.note.clone()),
        type_: Some(spec.type_.clone()),
        regarding: Some(reference(&spec.regarding, "Pod")),
        related: spec.related.as_ref().map(|r| reference(r, "Pod")),
        reporting_controller: Some(options.field_manager.clone()),
        reporting_instance: Some(
            options
                .reporting_instance
                .clone()
                .unwrap_or_else(|| options.field_manager.clone()),
        ),
        ..Event::default()
    };
    let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
    api.create(&options.post(), &event)
        .await
        .map(|_| Step::Done)
        .map_err(|e| api_err(&Action::Event(spec.clone()), e))
}

/// A claim as `bind_volume_to_claim` needs it: only its identity.
fn claim_stub(claim: &ObjectRef) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(claim.name.clone()),
            namespace: Some(claim.namespace.clone()),
            uid: claim.uid.clone(),
            ..ObjectMeta::default()
        },
        ..PersistentVolumeClaim::default()
    }
}

fn claim_ref_key(pv: &PersistentVolume) -> Option<String> {
    let r = pv.spec.as_ref()?.claim_ref.as_ref()?;
    Some(format!(
        "{}/{}",
        r.namespace.as_deref().unwrap_or(""),
        r.name.as_deref().unwrap_or("")
    ))
}

type VolumeResult = Result<(bool, Option<Observed>), (ApplyError, Option<Observed>)>;

/// What to do with a fresh read of the object a read-modify-replace loop writes.
enum Edit<K> {
    /// It already is as wanted: nothing to write.
    Unchanged,
    /// Replace it with this (which keeps the read's resourceVersion as the precondition).
    Replace(K),
}

/// How a read-modify-replace loop ended without an error.
enum Ended<K> {
    /// Nothing to write: the object read.
    Unchanged(K),
    /// Replaced: the object the server returned.
    Written(K),
    /// The read found no such object.
    Missing,
    /// The replace found the object gone (404): the error, and the object read before it.
    GoneBeforeWrite(kube::Error, K),
}

/// An error of a read-modify-replace loop, with the object read last (for callers that report what
/// they saw), if any.
type LoopError<K> = (ApplyError, Option<K>);

/// Reads `name`, checks it still has the planned `uid` (if any), lets `edit` decide, and replaces it
/// with what `edit` made (the read's resourceVersion as the precondition). A 409 is answered by a fresh
/// read, up to [`ApplyOptions::conflict_retries`] times, and no retry starts past the deadline. `object`
/// (`kind namespace/name`) and `describe` (the action) name it in errors.
async fn read_modify_replace<K>(
    api: &Api<K>,
    name: &str,
    uid: Option<&str>,
    object: &str,
    describe: &str,
    options: &ApplyOptions,
    mut edit: impl FnMut(&K) -> Result<Edit<K>, ApplyError>,
) -> Result<Ended<K>, LoopError<K>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + Serialize + std::fmt::Debug,
{
    let api_error = |source| ApplyError::Api {
        action: describe.to_string(),
        source,
    };
    let attempts = options.conflict_retries + 1;
    let mut last_seen = None;
    for attempt in 0..attempts {
        if let Err(e) = options.may_attempt(attempt, describe) {
            return Err((e, last_seen));
        }
        let current = match api.get_opt(name).await {
            Ok(Some(current)) => current,
            Ok(None) => return Ok(Ended::Missing),
            Err(e) => return Err((api_error(e), last_seen)),
        };
        if let Some(uid) = uid
            && current.meta().uid.as_deref() != Some(uid)
        {
            let found = current.meta().uid.clone().unwrap_or_default();
            return Err((
                ApplyError::UidMismatch {
                    action: describe.to_string(),
                    object: object.to_string(),
                    expected: uid.to_string(),
                    found,
                },
                Some(current),
            ));
        }
        let updated = match edit(&current) {
            Ok(Edit::Unchanged) => return Ok(Ended::Unchanged(current)),
            Ok(Edit::Replace(updated)) => updated,
            Err(e) => return Err((e, Some(current))),
        };
        match api.replace(name, &options.post(), &updated).await {
            Ok(written) => return Ok(Ended::Written(written)),
            Err(e) if api_code(&e) == Some(409) => last_seen = Some(current),
            Err(e) if api_code(&e) == Some(404) => return Ok(Ended::GoneBeforeWrite(e, current)),
            Err(e) => return Err((api_error(e), Some(current))),
        }
    }
    Err((
        ApplyError::RetriesExhausted {
            action: describe.to_string(),
            attempts,
        },
        last_seen,
    ))
}

/// A volume write's loop as its action's result: `Ok(true)` when written, `Ok(false)` when the object
/// already was as wanted, each with the object seen. `gone_before_write` answers a 404 on the replace.
fn volume_result<K>(
    ended: Result<Ended<K>, LoopError<K>>,
    observe: fn(K) -> Observed,
    not_found: impl FnOnce() -> ApplyError,
    gone_before_write: impl FnOnce(kube::Error, K) -> (ApplyError, Option<Observed>),
) -> VolumeResult {
    match ended {
        Ok(Ended::Unchanged(seen)) => Ok((false, Some(observe(seen)))),
        Ok(Ended::Written(written)) => Ok((true, Some(observe(written)))),
        Ok(Ended::Missing) => Err((not_found(), None)),
        Ok(Ended::GoneBeforeWrite(e, seen)) => Err(gone_before_write(e, seen)),
        Err((e, seen)) => Err((e, seen.map(observe))),
    }
}

/// An undo's loop as an outcome: a missing object is [`Outcome::Gone`], nothing to write
/// [`Outcome::AlreadyDone`].
fn undo_outcome<K>(
    ended: Result<Ended<K>, LoopError<K>>,
    options: &ApplyOptions,
) -> Result<Outcome, ApplyError> {
    match ended {
        Ok(Ended::Unchanged(_)) => Ok(Outcome::AlreadyDone),
        Ok(Ended::Written(_)) => Ok(options.done()),
        Ok(Ended::Missing | Ended::GoneBeforeWrite(..)) => Ok(Outcome::Gone),
        Err((e, _)) => Err(e),
    }
}

fn observe_pv(pv: PersistentVolume) -> Observed {
    Observed::Pv(Box::new(pv))
}

fn observe_pvc(pvc: PersistentVolumeClaim) -> Observed {
    Observed::Pvc(Box::new(pvc))
}

/// Binds the PV to the claim: `Ok(true)` when written, `Ok(false)` when it already was.
async fn bind_pv(
    client: &Client,
    pv_ref: &ObjectRef,
    claim: &ObjectRef,
    decided_version: Option<&str>,
    options: &ApplyOptions,
) -> VolumeResult {
    let action = Action::BindPv {
        pv: pv_ref.clone(),
        claim: claim.clone(),
        resource_version: decided_version.map(str::to_string),
    };
    let describe = action.describe();
    let object = format!("persistentvolume {}", pv_ref.name);
    let api: Api<PersistentVolume> = Api::all(client.clone());
    let stub = claim_stub(claim);
    let ended = read_modify_replace(
        &api,
        &pv_ref.name,
        pv_ref.uid.as_deref(),
        &object,
        &describe,
        options,
        |pv| {
            let update = bind_volume_to_claim(pv, &stub);
            if !update.dirty {
                return Ok(Edit::Unchanged);
            }
            if pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()).is_some()
                && !is_volume_bound_to_claim(pv, &stub)
            {
                return Err(ApplyError::Conflict {
                    action: describe.clone(),
                    detail: format!(
                        "persistentvolume {} is bound to claim {}",
                        pv_ref.name,
                        claim_ref_key(pv).unwrap_or_default()
                    ),
                });
            }
            let current_version = pv.metadata.resource_version.as_deref();
            if decided_version.is_some() && current_version != decided_version {
                // The PV changed since the decision: bind only if it still could be chosen for the claim.
                if pv.metadata.deletion_timestamp.is_some() {
                    return Err(ApplyError::Invalid {
                        action: describe.clone(),
                        detail: format!("persistentvolume {} is being deleted", pv_ref.name),
                    });
                }
                let phase = pv.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("");
                if phase != VOLUME_AVAILABLE && !is_volume_bound_to_claim(pv, &stub) {
                    return Err(ApplyError::Conflict {
                        action: describe.clone(),
                        detail: format!("persistentvolume {} is {phase}, not Available", pv_ref.name),
                    });
                }
            }
            Ok(Edit::Replace(update.volume))
        },
    )
    .await;
    let not_found = || ApplyError::NotFound {
        action: describe.clone(),
        object: object.clone(),
    };
    volume_result(ended, observe_pv, not_found, |_, _| (not_found(), None))
}

fn annotation_of<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

/// Sets one annotation on a claim: `Ok(true)` when written, `Ok(false)` when it already had the value.
async fn annotate_pvc(
    client: &Client,
    pvc_ref: &ObjectRef,
    key: &str,
    value: &str,
    decided_version: Option<&str>,
    options: &ApplyOptions,
) -> VolumeResult {
    let action = Action::AnnotatePvc {
        pvc: pvc_ref.clone(),
        key: key.to_string(),
        value: value.to_string(),
        resource_version: decided_version.map(str::to_string),
    };
    let describe = action.describe();
    let object = format!("persistentvolumeclaim {}", pvc_ref.key());
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &pvc_ref.namespace);
    let ended = read_modify_replace(
        &api,
        &pvc_ref.name,
        pvc_ref.uid.as_deref(),
        &object,
        &describe,
        options,
        |pvc| {
            match annotation_of(&pvc.metadata, key) {
                Some(current) if current == value => return Ok(Edit::Unchanged),
                Some(current) => {
                    return Err(ApplyError::Conflict {
                        action: describe.clone(),
                        detail: format!(
                            "persistentvolumeclaim {} already has {key}={current}",
                            pvc_ref.key()
                        ),
                    });
                }
                None => {}
            }
            let volume = claim_volume_name(pvc);
            if !volume.is_empty() {
                return Err(ApplyError::Conflict {
                    action: describe.clone(),
                    detail: format!(
                        "persistentvolumeclaim {} is already bound to persistentvolume {volume}",
                        pvc_ref.key()
                    ),
                });
            }
            if pvc.metadata.deletion_timestamp.is_some() {
                return Err(ApplyError::Invalid {
                    action: describe.clone(),
                    detail: format!("persistentvolumeclaim {} is being deleted", pvc_ref.key()),
                });
            }
            let mut pvc = pvc.clone();
            pvc.metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(key.to_string(), value.to_string());
            Ok(Edit::Replace(pvc))
        },
    )
    .await;
    let not_found = || ApplyError::NotFound {
        action: describe.clone(),
        object: object.clone(),
    };
    volume_result(ended, observe_pvc, not_found, |e, seen| {
        (api_err(&action, e), Some(observe_pvc(seen)))
    })
}

/// Removes the PV's claimRef if it still names `claim` (and the bound-by-controller annotation with it).
async fn unbind_pv(
    client: &Client,
    pv_ref: &ObjectRef,
    claim: &ObjectRef,
    options: &ApplyOptions,
) -> Result<Outcome, ApplyError> {
    let describe = format!(
        "unbind persistentvolume {} from claim {}",
        pv_ref.name,
        claim.key()
    );
    let object = format!("persistentvolume {}", pv_ref.name);
    let api: Api<PersistentVolume> = Api::all(client.clone());
    let stub = claim_stub(claim);
    let ended = read_modify_replace(&api, &pv_ref.name, None, &object, &describe, options, |pv| {
        if !is_volume_bound_to_claim(pv, &stub) {
            return Ok(Edit::Unchanged);
        }
        let mut pv = pv.clone();
        if let Some(spec) = pv.spec.as_mut() {
            spec.claim_ref = None;
        }
        if let Some(annotations) = pv.metadata.annotations.as_mut() {
            annotations.remove(ANN_BOUND_BY_CONTROLLER);
        }
        Ok(Edit::Replace(pv))
    })
    .await;
    undo_outcome(ended, options)
}

/// Removes `key` from the claim's annotations if it still has `value`.
async fn remove_pvc_annotation(
    client: &Client,
    pvc_ref: &ObjectRef,
    key: &str,
    value: &str,
    options: &ApplyOptions,
) -> Result<Outcome, ApplyError> {
    let describe = format!(
        "remove annotation {key} from persistentvolumeclaim {}",
        pvc_ref.key()
    );
    let object = format!("persistentvolumeclaim {}", pvc_ref.key());
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &pvc_ref.namespace);
    let ended = read_modify_replace(&api, &pvc_ref.name, None, &object, &describe, options, |pvc| {
        if annotation_of(&pvc.metadata, key) != Some(value) {
            return Ok(Edit::Unchanged);
        }
        let mut pvc = pvc.clone();
        if let Some(annotations) = pvc.metadata.annotations.as_mut() {
            annotations.remove(key);
        }
        Ok(Edit::Replace(pvc))
    })
    .await;
    undo_outcome(ended, options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_stops_retries_but_never_the_first_attempt() {
        let mut options = ApplyOptions::new("t");
        assert!(!options.out_of_time());
        assert!(
            options.may_attempt(3, "bind").is_ok(),
            "no deadline: retries are bounded by count"
        );

        options.deadline = Some(Instant::now() - std::time::Duration::from_millis(1));
        assert!(options.out_of_time());
        assert!(
            options.may_attempt(0, "bind").is_ok(),
            "the first attempt always runs"
        );
        let err = options.may_attempt(2, "bind pv-a").unwrap_err();
        assert!(
            !err.is_conflict(),
            "out of time is final, not a reason to decide again"
        );
        assert_eq!(
            err.to_string(),
            "failed to bind pv-a: out of time after 2 conflicting attempt(s)"
        );

        options.deadline = Some(Instant::now() + std::time::Duration::from_secs(60));
        assert!(options.may_attempt(5, "bind").is_ok());
    }

    #[test]
    fn outcomes_name_and_success() {
        assert!(Outcome::Done.is_success());
        assert!(Outcome::AlreadyDone.is_success());
        assert!(Outcome::Gone.is_success());
        assert!(Outcome::DryRun.is_success());
        assert!(!Outcome::NotRun.is_success());
        assert!(!Outcome::PdbBlocked { message: "x".into() }.is_success());
        assert_eq!(Outcome::PdbBlocked { message: "x".into() }.name(), "pdb-blocked");
    }

    #[test]
    fn results_serialize_with_outcome_and_message() {
        let result = ActionResult {
            action: Action::BindPv {
                pv: ObjectRef::new("", "pv1"),
                claim: ObjectRef::new("ns", "c"),
                resource_version: None,
            },
            outcome: Outcome::Failed(ApplyError::Conflict {
                action: "bind".into(),
                detail: "persistentvolume pv1 is bound to claim ns/other".into(),
            }),
            observed: None,
        };
        let value = serde_json::to_value(&result).expect("serializes");
        assert_eq!(value["outcome"], "failed");
        assert_eq!(value["action"]["kind"], "BindPv");
        assert_eq!(
            value["message"],
            "failed to bind: conflict: persistentvolume pv1 is bound to claim ns/other"
        );
        assert!(matches!(&result.outcome, Outcome::Failed(e) if e.is_conflict()));
    }

    #[test]
    fn claim_ref_key_and_stub() {
        let stub = claim_stub(&ObjectRef::new("ns", "c").with_uid("u1"));
        let pv = PersistentVolume::default();
        let update = bind_volume_to_claim(&pv, &stub);
        assert!(update.dirty && update.set_bound_by_controller);
        assert_eq!(claim_ref_key(&update.volume).as_deref(), Some("ns/c"));
        // A second binding of the written PV to the same claim changes nothing: the plan is idempotent.
        assert!(!bind_volume_to_claim(&update.volume, &stub).dirty);
    }

    fn planned_pod() -> ObjectRef {
        ObjectRef::new("ns", "v")
            .with_uid("u1")
            .with_resource_version("41")
    }

    fn body(patch: &Patch<serde_json::Value>) -> serde_json::Value {
        match patch {
            Patch::Strategic(v) | Patch::Merge(v) => v.clone(),
            other => panic!("not a strategic or merge patch: {other:?}"),
        }
    }

    #[test]
    fn delete_and_eviction_carry_uid_and_resource_version_preconditions() {
        let options = ApplyOptions::new("t");
        let params = delete_params(&planned_pod(), &options);
        let preconditions = params.preconditions.expect("preconditions");
        assert_eq!(preconditions.uid.as_deref(), Some("u1"));
        assert_eq!(preconditions.resource_version.as_deref(), Some("41"));
        assert!(!params.dry_run);

        let eviction = serde_json::to_value(eviction_for(&planned_pod())).expect("json");
        assert_eq!(
            eviction["metadata"],
            serde_json::json!({"name": "v", "namespace": "ns"})
        );
        assert_eq!(
            eviction["deleteOptions"]["preconditions"],
            serde_json::json!({"uid": "u1", "resourceVersion": "41"})
        );

        // Without preconditions in the reference (a hand-made plan), none are sent.
        let bare = ObjectRef::new("ns", "v");
        assert!(delete_params(&bare, &options).preconditions.is_none());
        assert!(eviction_for(&bare).delete_options.is_none());
        let uid_only = ObjectRef::new("ns", "v").with_uid("u1");
        let preconditions = delete_params(&uid_only, &options).preconditions.expect("uid");
        assert_eq!(
            (preconditions.uid.as_deref(), preconditions.resource_version),
            (Some("u1"), None)
        );
    }

    #[test]
    fn status_patches_and_bindings_carry_the_resource_version() {
        let condition = PodConditionPatch {
            type_: "DisruptionTarget".into(),
            status: "True".into(),
            reason: "PreemptionByScheduler".into(),
            message: "m".into(),
        };
        let patch = condition_patch(&planned_pod(), &condition);
        assert!(matches!(patch, Patch::Strategic(_)));
        let value = body(&patch);
        assert_eq!(
            value["metadata"],
            serde_json::json!({"uid": "u1", "resourceVersion": "41"})
        );
        assert_eq!(value["status"]["conditions"][0]["type"], "DisruptionTarget");

        let patch = nomination_patch(&planned_pod(), "n1");
        assert!(matches!(patch, Patch::Merge(_)));
        assert_eq!(
            body(&patch),
            serde_json::json!({
                "metadata": {"uid": "u1", "resourceVersion": "41"},
                "status": {"nominatedNodeName": "n1"},
            })
        );
        // Clearing writes null; a reference without preconditions patches unconditionally.
        assert_eq!(
            body(&nomination_patch(&ObjectRef::new("ns", "w"), "")),
            serde_json::json!({"metadata": {}, "status": {"nominatedNodeName": null}})
        );

        let binding = serde_json::to_value(binding_for(&planned_pod(), "n1")).expect("json");
        assert_eq!(binding["metadata"]["uid"], "u1");
        assert_eq!(binding["metadata"]["resourceVersion"], "41");
        assert_eq!(binding["target"]["name"], "n1");
    }

    #[test]
    fn a_refused_write_is_classified_by_what_became_of_the_pod() {
        let meta = |uid: &str, version: &str| ObjectMeta {
            uid: Some(uid.into()),
            resource_version: Some(version.into()),
            ..ObjectMeta::default()
        };
        let planned = planned_pod();
        assert_eq!(changed_since_plan(&planned, None), PodChange::Gone);
        assert_eq!(
            changed_since_plan(&planned, Some(&meta("u2", "41"))),
            PodChange::Gone,
            "a pod of another UID is not the planned one"
        );
        assert_eq!(
            changed_since_plan(&planned, Some(&meta("u1", "57"))),
            PodChange::Changed(
                "pod ns/v changed since the plan was made (resourceVersion 41, now 57)".into()
            )
        );
        assert_eq!(
            changed_since_plan(&planned, Some(&meta("u1", "41"))),
            PodChange::Same
        );
        assert_eq!(
            changed_since_plan(&ObjectRef::new("ns", "v"), Some(&meta("u1", "57"))),
            PodChange::Same,
            "without preconditions nothing is known to have changed"
        );
        let conflict = ApplyError::Conflict {
            action: "delete pod ns/v".into(),
            detail: "pod ns/v changed since the plan was made (resourceVersion 41, now 57)".into(),
        };
        assert!(conflict.is_conflict());
    }

    #[test]
    fn later_actions_expect_the_version_the_plans_own_write_left() {
        let condition = Action::SetPodCondition {
            pod: planned_pod(),
            condition: PodConditionPatch {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                reason: "PreemptionByScheduler".into(),
                message: "m".into(),
            },
        };
        let delete = Action::DeletePod { pod: planned_pod() };
        let other = Action::DeletePod {
            pod: ObjectRef::new("ns", "w").with_resource_version("41"),
        };
        let mut written = WrittenVersions::default();
        assert_eq!(written.current(&delete), delete, "nothing written yet");
        written.record(condition.pod_written().expect("a pod"), "42".into());
        let Action::DeletePod { pod } = written.current(&delete) else {
            panic!("still a delete")
        };
        assert_eq!(pod.resource_version.as_deref(), Some("42"));
        assert_eq!(pod.uid.as_deref(), Some("u1"));
        assert_eq!(written.current(&other), other, "another pod is unaffected");
        // Two writes in a row (nomination, then condition): the version moves forward twice.
        written.record(
            &ObjectRef::new("ns", "v").with_resource_version("42"),
            "43".into(),
        );
        let Action::DeletePod { pod } = written.current(&delete) else {
            panic!("still a delete")
        };
        assert_eq!(pod.resource_version.as_deref(), Some("43"));
        // A stale reference of the plan (another version than the one written over) stays stale.
        let stale = Action::DeletePod {
            pod: ObjectRef::new("ns", "v").with_resource_version("40"),
        };
        assert_eq!(written.current(&stale), stale);
        // Events are not pod writes.
        let event = Action::Event(EventSpec {
            regarding: planned_pod(),
            related: None,
            type_: "Normal".into(),
            reason: "Preempted".into(),
            action: "Preempting".into(),
            note: "n".into(),
        });
        assert_eq!(written.current(&event), event);
    }
}
