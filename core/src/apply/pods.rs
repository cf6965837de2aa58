//! Pod writes: DELETE, eviction, the status patches (a condition, `nominatedNodeName`) and the binding,
//! each conditioned on the UID and resourceVersion the plan names, and what a refused write means once
//! the pod is read again (gone, changed since the plan, or the server's own answer).

use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    DeleteOptions, ObjectMeta, Preconditions as MetaPreconditions,
};
use kube::api::{DeleteParams, Patch, Preconditions};
use kube::{Api, Client};

use super::{ApplyError, ApplyOptions, Step, api_code, api_err, brief};
use crate::action::{Action, ObjectRef, PodConditionPatch};

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
pub(super) fn condition_patch(pod: &ObjectRef, condition: &PodConditionPatch) -> Patch<serde_json::Value> {
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
pub(super) fn nomination_patch(pod: &ObjectRef, node: &str) -> Patch<serde_json::Value> {
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

pub(super) async fn delete_pod(
    client: &Client,
    pod: &ObjectRef,
    options: &ApplyOptions,
) -> Result<Step, ApplyError> {
    let params = delete_params(pod, options);
    match pods(client, pod).delete(&pod.name, &params).await {
        Ok(_) => Ok(Step::Done),
        Err(e) => refused_pod_write(client, pod, &Action::DeletePod { pod: pod.clone() }, e).await,
    }
}

pub(super) async fn evict_pod(
    client: &Client,
    pod: &ObjectRef,
    options: &ApplyOptions,
) -> Result<Step, ApplyError> {
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
pub(super) async fn patch_pod_status(
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

pub(super) async fn bind_pod(
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
