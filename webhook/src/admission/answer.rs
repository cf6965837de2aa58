//! The answer to an AdmissionReview body, without I/O: the steps of `POST /mutate` that read nothing
//! but the request, its limits and a [`ClusterView`]. The server runs the same steps with its own I/O
//! between them (decision slots, reads of objects the watches have not delivered, a blocking thread);
//! [`answer`] runs them back to back, for tests and the fuzz target (`fuzz/`), so the path they exercise
//! is the server's.

use k8s_openapi::api::core::v1::Pod;

use crate::error::RequestError;
use crate::server::Limits;

use super::{
    ADMITTED_BY_KEY, AdmissionRequest, AdmissionResponse, ClusterView, Decision, Operation, RequestKind,
    binding, pod_create,
};

/// What the cheap look at a pods CREATE leaves to do.
#[derive(Debug)]
pub enum PodCreateScreen {
    /// Answered without decoding the pod.
    Answered(Operation, AdmissionResponse),
    /// The pod must be decoded and decided on; `weight` is its estimated decoded size
    /// ([`super::PodShape::decoded_bytes`]).
    Decide {
        /// Estimated bytes the decoded pod takes.
        weight: usize,
    },
}

/// The raw object of a request; `what` names it in the error.
pub fn raw_object<'a>(request: &'a AdmissionRequest, what: &'static str) -> Result<&'a str, RequestError> {
    request
        .object
        .as_deref()
        .map(|r| r.get())
        .ok_or(RequestError::Object {
            what,
            message: "the request has no object".into(),
        })
}

/// The cheap look at a pods CREATE: most pods name no claim, and a pod naming more claims than
/// `limits` allow, or too large to decode, is left to the scheduler without being decoded.
pub fn screen_pod_create(
    request: &AdmissionRequest,
    raw: &str,
    limits: &Limits,
) -> Result<PodCreateScreen, RequestError> {
    let shape = super::pod_shape(raw).map_err(|e| RequestError::Object {
        what: "pod",
        message: e.to_string(),
    })?;
    let claims = shape.claims;
    if claims == 0 {
        return Ok(PodCreateScreen::Answered(
            Operation::PodCreate,
            AdmissionResponse::allow(&request.uid),
        ));
    }
    if claims > limits.max_claims {
        return Ok(PodCreateScreen::Answered(
            Operation::Other,
            AdmissionResponse::allow(&request.uid).with_warnings(vec![format!(
                "the pod names {claims} claims, more than the {} sched-webhook considers: its volumes are left to the scheduler",
                limits.max_claims
            )]),
        ));
    }
    let weight = shape.decoded_bytes(raw.len());
    if weight > limits.max_decision_bytes {
        return Ok(PodCreateScreen::Answered(
            Operation::Other,
            AdmissionResponse::allow(&request.uid).with_warnings(vec![format!(
                "the pod is too large for sched-webhook to check ({} volumes, {} containers): its volumes are left to the scheduler",
                shape.volumes, shape.containers
            )]),
        ));
    }
    Ok(PodCreateScreen::Decide { weight })
}

/// Decodes the pod of a pods CREATE; a pod without a namespace gets the request's.
pub fn decode_pod(request: &AdmissionRequest, raw: &str) -> Result<Pod, RequestError> {
    let mut pod: Pod = serde_json::from_str(raw).map_err(|e| RequestError::Object {
        what: "pod",
        message: e.to_string(),
    })?;
    // The API server always sends metadata; without it the annotation patch (a path under
    // /metadata) could not apply to the object, so the request is refused as malformed (found by
    // fuzzing). Only an empty ObjectMeta needs the second look at the raw object.
    if pod.metadata == Default::default() && !has_metadata_object(raw) {
        return Err(RequestError::Object {
            what: "pod",
            message: "the object has no metadata".to_string(),
        });
    }
    if pod.metadata.namespace.as_deref().unwrap_or("").is_empty() {
        pod.metadata.namespace = Some(request.namespace.clone());
    }
    Ok(pod)
}

/// Whether a raw object has a `metadata` object.
fn has_metadata_object(raw: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Metadata {
        metadata: Option<serde_json::Map<String, serde_json::Value>>,
    }
    serde_json::from_str::<Metadata>(raw).is_ok_and(|m| m.metadata.is_some())
}

/// The answer to a pods CREATE once decided: a pod the controller has volume work for is annotated
/// with the request uid ([`ADMITTED_BY_KEY`]).
pub fn pod_create_response(
    request: &AdmissionRequest,
    pod: &Pod,
    mut decision: Decision,
) -> (Operation, AdmissionResponse) {
    if decision.denial.is_none() && !decision.plan.is_empty() {
        decision
            .patch
            .push(super::annotation_patch(pod, ADMITTED_BY_KEY, &request.uid));
    }
    (decision.operation, respond(request, decision))
}

/// The answer to `decision`. Denials and decisions with work for the controller are logged with the
/// request uid and the user the API server names.
pub fn respond(request: &AdmissionRequest, decision: Decision) -> AdmissionResponse {
    let Decision {
        operation,
        denial,
        patch,
        plan,
        warnings,
        ..
    } = decision;
    if let Some(message) = denial {
        tracing::info!(
            request_uid = %request.uid,
            user = %request.user(),
            operation = operation.as_str(),
            namespace = %request.namespace,
            name = %request.name,
            reason = %message,
            "denied"
        );
        return AdmissionResponse::deny(&request.uid, &message).with_warnings(warnings);
    }
    if !plan.is_empty() {
        tracing::info!(
            request_uid = %request.uid,
            user = %request.user(),
            operation = operation.as_str(),
            namespace = %request.namespace,
            name = %request.name,
            writes = plan.len(),
            "admitted: the controller pre-binds once the object is stored"
        );
    }
    AdmissionResponse::allow(&request.uid)
        .with_patch(&patch)
        .with_warnings(warnings)
}

/// The whole answer to a review body against `view`, as the server gives it once its caches have
/// synced and hold every object the pod names, with a free decision slot. A body over
/// `limits.max_body_bytes` is refused before it is parsed, as the router's body limit refuses it.
pub fn answer(
    body: &[u8],
    view: &dyn ClusterView,
    limits: &Limits,
) -> Result<(Operation, AdmissionResponse), RequestError> {
    if body.len() > limits.max_body_bytes {
        return Err(RequestError::TooLarge {
            limit: limits.max_body_bytes,
        });
    }
    let request = super::review::decode(body)?;
    match super::request_kind(&request) {
        RequestKind::Other => Ok((Operation::Other, AdmissionResponse::allow(&request.uid))),
        RequestKind::PodCreate => {
            let raw = raw_object(&request, "pod")?;
            match screen_pod_create(&request, raw, limits)? {
                PodCreateScreen::Answered(op, response) => Ok((op, response)),
                PodCreateScreen::Decide { .. } => {
                    let pod = decode_pod(&request, raw)?;
                    let decision = pod_create::decide(&pod, view);
                    Ok(pod_create_response(&request, &pod, decision))
                }
            }
        }
        RequestKind::PodBinding => {
            let raw = raw_object(&request, "binding")?;
            let node = super::binding_target(raw).map_err(|e| RequestError::Object {
                what: "binding",
                message: e.to_string(),
            })?;
            let Some(pod) = view.pod(&request.namespace, &request.name) else {
                return Ok((Operation::PodBinding, AdmissionResponse::allow(&request.uid)));
            };
            if binding::needs_no_volume_check(&pod, &node, view)
                || super::pod_claims(&pod).len() > limits.max_claims
            {
                return Ok((Operation::PodBinding, AdmissionResponse::allow(&request.uid)));
            }
            let decision = binding::decide(Some(&pod), &node, view);
            Ok((decision.operation, respond(&request, decision)))
        }
    }
}
