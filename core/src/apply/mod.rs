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
//!
//! The module is laid out by what is written: `pods` (deletes, evictions, status patches, bindings and
//! the classification of a refused pod write), `volumes` (PV binding and claim annotations, through one
//! read-modify-replace loop, and their undo), `events` (event recording). This file holds the options,
//! the results and errors, and the dispatch of a plan's actions to those writers.

mod events;
mod pods;
mod volumes;

use std::collections::HashMap;
use std::time::Instant;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Client;
use kube::api::{PatchParams, PostParams};
use serde::Serialize;

use crate::action::{Action, ObjectRef};

use events::record_event;
use pods::{bind_pod, condition_patch, delete_pod, evict_pod, nomination_patch, patch_pod_status};
use volumes::{annotate_pvc, bind_pv, remove_pvc_annotation, unbind_pv};

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
        other => crate::api_error::with_causes(other),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::{EventSpec, PodConditionPatch};

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

    fn planned_pod() -> ObjectRef {
        ObjectRef::new("ns", "v")
            .with_uid("u1")
            .with_resource_version("41")
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
            reporting_controller: None,
        });
        assert_eq!(written.current(&event), event);
    }
}
