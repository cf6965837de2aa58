//! The webhook's request pipeline: the one sequence of steps `POST /mutate` runs on an AdmissionReview
//! body, generic over the I/O between the steps ([`AdmissionIo`]). The server ([`crate::server`])
//! passes its real I/O (decision slots, reads of objects the watches have not delivered, a blocking
//! thread, the API server's deadline); tests and the fuzz target (`fuzz/`) pass [`NoIo`], which
//! answers from a [`ClusterView`] at once. So the steps they exercise are the steps that serve
//! traffic, and a new check is written once, here.
//!
//! The steps: body size → AdmissionReview → kind; then
//!
//! - pods CREATE: the raw pod's shape (no claim, more claims than considered, too large to decode:
//!   answered without decoding) → a decision slot (none free: shed) → the pod decoded → caches synced
//!   (not yet: allowed) → catch-up reads when the pod is in scope → the decision → the annotation for
//!   the controller;
//! - pods/binding CREATE: the target node → caches synced → the pod (cached, or read once) → nothing
//!   to check, or more claims than considered (allowed) → a decision slot (none free: shed) → catch-up
//!   reads → the decision.

use std::future::Future;
use std::sync::Arc;

use axum::http::StatusCode;
use k8s_openapi::api::core::v1::Pod;

use super::{
    ADMITTED_BY_KEY, AdmissionRequest, AdmissionResponse, ClusterView, Decision, Limits, Operation,
    RequestKind, ReviewError, binding, pod_create,
};

/// The warning of a request allowed unchanged because every decision slot was taken.
pub const SATURATED_WARNING: &str = "sched-webhook is saturated: the pod's volumes were not checked";
/// The warning of a request allowed unchanged before the caches have synced.
pub const NOT_SYNCED_WARNING: &str = "sched-webhook caches are not synced yet: nothing was done";

/// A request the webhook cannot decide on: refused with a 4xx (its [`status`](Self::status)) and a JSON
/// body naming the problem.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The Content-Type is not JSON.
    #[error("unsupported content type {0:?}: send application/json")]
    UnsupportedMediaType(String),
    /// The body exceeds the limit.
    #[error("request body larger than {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// The body could not be read.
    #[error("failed to read the request body: {0}")]
    Body(String),
    /// Not a usable AdmissionReview.
    #[error(transparent)]
    Review(#[from] ReviewError),
    /// The review's object does not match its resource.
    #[error("malformed {what}: {message}")]
    Object {
        /// What was expected ("pod", "binding").
        what: &'static str,
        /// The decoder's message.
        message: String,
    },
}

impl RequestError {
    /// The HTTP status answered.
    pub fn status(&self) -> StatusCode {
        match self {
            RequestError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            RequestError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            RequestError::Body(_) | RequestError::Review(_) | RequestError::Object { .. } => {
                StatusCode::BAD_REQUEST
            }
        }
    }
}

/// The I/O points of the pipeline: what happens between its steps. The server's implementation
/// (`crate::server`) reads the API server and bounds the work; [`NoIo`] does nothing and answers from
/// its view.
pub trait AdmissionIo: Sync {
    /// Held while a request is decided on; dropping it frees the slot.
    type Slot: Send;

    /// What the steps read: the cluster as the watches (and the catch-up reads) delivered it.
    fn view(&self) -> &dyn ClusterView;

    /// Whether the view has synced: before that, whether a pod opted in cannot be told, and nothing is
    /// decided.
    fn is_synced(&self) -> bool;

    /// A decision slot for a request whose decoding and decision weigh about `weight` bytes, or `None`
    /// when the replica is saturated: the request is then shed (allowed unchanged, with a warning).
    fn decision_slot(&self, weight: usize) -> Option<Self::Slot>;

    /// The pod `namespace/name`, which the view does not hold, read once (`None`: it does not exist, or
    /// it could not be read in time). The scheduler can bind a pod the watch has not delivered yet.
    fn fetch_pod(&self, namespace: &str, name: &str) -> impl Future<Output = Option<Arc<Pod>>> + Send;

    /// Adds to the view the claims `pod` names, and the classes of its unbound claims, that the view
    /// does not hold yet: a client creates a class, a claim and a pod in quick succession, and the
    /// pod's CREATE can outrun the claim's watch event.
    fn catch_up(&self, pod: &Pod) -> impl Future<Output = ()> + Send;

    /// Runs `decide` against the view (the server: on a blocking thread, and a decision that panics is
    /// answered with an allowing warning).
    fn decide<F>(&self, decide: F) -> impl Future<Output = Decision> + Send
    where
        F: FnOnce(&dyn ClusterView) -> Decision + Send + 'static;
}

/// The I/O of tests and of the fuzz target: none. The view is taken as complete (a pod or claim it
/// lacks does not exist), decisions run at once on the caller's thread (so a panic in one reaches the
/// caller: the fuzzer reports it), and the replica is synced with a free decision slot unless
/// [`NoIo::unsynced`] or [`NoIo::saturated`] says otherwise. Its futures are ready when first polled.
#[derive(Clone, Copy)]
pub struct NoIo<'a> {
    view: &'a dyn ClusterView,
    synced: bool,
    saturated: bool,
}

impl<'a> NoIo<'a> {
    /// Synced, with a free decision slot, answering from `view`.
    pub fn new(view: &'a dyn ClusterView) -> Self {
        NoIo {
            view,
            synced: true,
            saturated: false,
        }
    }

    /// As a replica whose caches have not synced yet.
    pub fn unsynced(self) -> Self {
        NoIo {
            synced: false,
            ..self
        }
    }

    /// As a replica with no decision slot free.
    pub fn saturated(self) -> Self {
        NoIo {
            saturated: true,
            ..self
        }
    }
}

impl AdmissionIo for NoIo<'_> {
    type Slot = ();

    fn view(&self) -> &dyn ClusterView {
        self.view
    }

    fn is_synced(&self) -> bool {
        self.synced
    }

    fn decision_slot(&self, _weight: usize) -> Option<()> {
        (!self.saturated).then_some(())
    }

    fn fetch_pod(&self, _namespace: &str, _name: &str) -> impl Future<Output = Option<Arc<Pod>>> + Send {
        std::future::ready(None)
    }

    fn catch_up(&self, _pod: &Pod) -> impl Future<Output = ()> + Send {
        std::future::ready(())
    }

    fn decide<F>(&self, decide: F) -> impl Future<Output = Decision> + Send
    where
        F: FnOnce(&dyn ClusterView) -> Decision + Send + 'static,
    {
        std::future::ready(decide(self.view))
    }
}

/// The answer to a review body, as `POST /mutate` gives it once the body is read: `(the operation
/// counted in the metrics, the response)`, or why the request is refused (a 4xx). A body over
/// `limits.max_body_bytes` is refused before it is parsed (the router's body limit refuses it before
/// that; this keeps the bound for every caller).
pub async fn answer<Io: AdmissionIo>(
    io: &Io,
    body: &[u8],
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
        RequestKind::PodCreate => pod_create_request(io, &request, limits).await,
        RequestKind::PodBinding => binding_request(io, &request, limits).await,
    }
}

async fn pod_create_request<Io: AdmissionIo>(
    io: &Io,
    request: &AdmissionRequest,
    limits: &Limits,
) -> Result<(Operation, AdmissionResponse), RequestError> {
    let raw = raw_object(request, "pod")?;
    // The cheap look first: most pods name no claim, and a pod naming thousands is not decoded at all.
    let weight = match screen_pod_create(request, raw, limits)? {
        PodCreateScreen::Answered(op, response) => return Ok((op, response)),
        PodCreateScreen::Decide { weight } => weight,
    };
    let Some(_slot) = io.decision_slot(weight) else {
        return Ok(shed(request, Operation::Other));
    };
    let pod = decode_pod(request, raw)?;
    let node_name_set = pod
        .spec
        .as_ref()
        .is_some_and(|s| s.node_name.as_deref().is_some_and(|n| !n.is_empty()));
    if !io.is_synced() {
        // Whether the pod opted in cannot be told before the namespaces are cached.
        let op = if node_name_set {
            Operation::PodCreateNodeName
        } else {
            Operation::Other
        };
        return Ok(not_synced(request, op));
    }
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    let in_scope = node_name_set || super::opted_in(&pod, io.view().namespace_labels(namespace).as_ref());
    if in_scope {
        io.catch_up(&pod).await;
    }
    let pod = Arc::new(pod);
    let decision = {
        let pod = pod.clone();
        io.decide(move |view| pod_create::decide(&pod, view)).await
    };
    Ok(pod_create_response(request, &pod, decision))
}

async fn binding_request<Io: AdmissionIo>(
    io: &Io,
    request: &AdmissionRequest,
    limits: &Limits,
) -> Result<(Operation, AdmissionResponse), RequestError> {
    let raw = raw_object(request, "binding")?;
    let node = super::binding_target(raw).map_err(|e| RequestError::Object {
        what: "binding",
        message: e.to_string(),
    })?;
    if !io.is_synced() {
        return Ok(not_synced(request, Operation::PodBinding));
    }
    let cached = io.view().pod(&request.namespace, &request.name);
    let pod = match cached {
        Some(pod) => Some(pod),
        None => io.fetch_pod(&request.namespace, &request.name).await,
    };
    let Some(pod) = pod else {
        return Ok((Operation::PodBinding, AdmissionResponse::allow(&request.uid)));
    };
    if binding::needs_no_volume_check(&pod, &node, io.view())
        || super::pod_claims(&pod).len() > limits.max_claims
    {
        return Ok((Operation::PodBinding, AdmissionResponse::allow(&request.uid)));
    }
    let Some(_slot) = io.decision_slot(raw.len()) else {
        return Ok(shed(request, Operation::PodBinding));
    };
    io.catch_up(&pod).await;
    let decision = io
        .decide(move |view| binding::decide(Some(&pod), &node, view))
        .await;
    Ok((decision.operation, respond(request, decision)))
}

/// Allowed unchanged, with a warning, because every decision slot is taken: the webhook fails open
/// under load as it does when it is down (`failurePolicy: Ignore`), instead of making the API server
/// wait and time out.
fn shed(request: &AdmissionRequest, operation: Operation) -> (Operation, AdmissionResponse) {
    tracing::warn!(
        request_uid = %request.uid,
        user = %request.user(),
        namespace = %request.namespace,
        name = %request.name,
        "saturated: request allowed unchanged"
    );
    (
        operation,
        AdmissionResponse::allow(&request.uid).with_warnings(vec![SATURATED_WARNING.into()]),
    )
}

/// Allowed unchanged before the caches have synced, counted under the request's operation.
fn not_synced(request: &AdmissionRequest, operation: Operation) -> (Operation, AdmissionResponse) {
    (
        operation,
        AdmissionResponse::allow(&request.uid).with_warnings(vec![NOT_SYNCED_WARNING.into()]),
    )
}

/// What the cheap look at a pods CREATE leaves to do.
#[derive(Debug)]
enum PodCreateScreen {
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
fn raw_object<'a>(request: &'a AdmissionRequest, what: &'static str) -> Result<&'a str, RequestError> {
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
fn screen_pod_create(
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
fn decode_pod(request: &AdmissionRequest, raw: &str) -> Result<Pod, RequestError> {
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
fn pod_create_response(
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
fn respond(request: &AdmissionRequest, decision: Decision) -> AdmissionResponse {
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

#[cfg(test)]
mod tests {
    use sched_core::ClusterObjects;
    use sched_core::testing::{node, pod, pv, pvc, storage_class};
    use sched_core::volumes::NOT_SUPPORTED_PROVISIONER;
    use serde_json::{Value, json};

    use super::*;
    use crate::admission::StaticView;

    const HOST: &str = "kubernetes.io/hostname";

    /// Nodes `node-a` with a local PV and `node-b` without; claim `c1` in `ns` (WaitForFirstConsumer); pod `p` using it.
    fn view() -> StaticView {
        StaticView::new(ClusterObjects {
            nodes: ["node-a", "node-b"]
                .iter()
                .map(|n| node(n).cpu("4").memory("8Gi").label(HOST, n).obj())
                .collect(),
            persistent_volumes: vec![
                pv("pv-a")
                    .storage_class("local")
                    .capacity("1Gi")
                    .phase("Available")
                    .access_modes(&["ReadWriteOnce"])
                    .node_affinity(HOST, &["node-a"])
                    .obj(),
            ],
            persistent_volume_claims: vec![
                pvc("c1")
                    .namespace("ns")
                    .storage_class("local")
                    .request("1Gi")
                    .access_modes(&["ReadWriteOnce"])
                    .obj(),
            ],
            storage_classes: vec![storage_class(
                "local",
                NOT_SUPPORTED_PROVISIONER,
                "WaitForFirstConsumer",
            )],
            pods: vec![pod("p").namespace("ns").pvc("c1").obj()],
            ..ClusterObjects::default()
        })
    }

    fn review(sub_resource: &str, name: &str, object: Value) -> Vec<u8> {
        json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u", "name": name, "namespace": "ns", "operation": "CREATE",
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "subResource": sub_resource, "object": object,
            }
        })
        .to_string()
        .into_bytes()
    }

    fn pod_create(node: Option<&str>, claim: Option<&str>) -> Vec<u8> {
        let mut object = json!({"metadata": {"name": "new", "namespace": "ns"},
                                "spec": {"containers": [{"name": "c"}]}});
        if let Some(node) = node {
            object["spec"]["nodeName"] = json!(node);
        }
        if let Some(claim) = claim {
            object["spec"]["volumes"] = json!([{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]);
        }
        review("", "new", object)
    }

    fn binding(pod: &str, target: Value) -> Vec<u8> {
        review(
            "binding",
            pod,
            json!({"metadata": {"name": pod}, "target": target}),
        )
    }

    #[derive(Clone, Copy, Debug)]
    enum State {
        Synced,
        Saturated,
        Unsynced,
    }

    impl State {
        fn io(self, view: &StaticView) -> NoIo<'_> {
            match self {
                State::Synced => NoIo::new(view),
                State::Saturated => NoIo::new(view).saturated(),
                State::Unsynced => NoIo::new(view).unsynced(),
            }
        }
    }

    /// What a request was answered with.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Answer {
        /// Allowed with a patch.
        Patched,
        /// Denied.
        Denied,
        /// Allowed unchanged with this warning.
        Warned(&'static str),
        /// Allowed unchanged, no warning.
        Allowed,
    }

    fn answered(response: &AdmissionResponse) -> Answer {
        match (
            response.allowed,
            response.patch.is_some(),
            response.warnings.first(),
        ) {
            (false, _, _) => Answer::Denied,
            (true, true, _) => Answer::Patched,
            (true, false, Some(warning)) if warning == SATURATED_WARNING => Answer::Warned(SATURATED_WARNING),
            (true, false, Some(warning)) if warning == NOT_SYNCED_WARNING => {
                Answer::Warned(NOT_SYNCED_WARNING)
            }
            _ => Answer::Allowed,
        }
    }

    /// Each step's answer and the operation it is counted under, in each state of the replica.
    #[test]
    fn each_step_answers_with_its_operation_and_warning() {
        use Answer::*;
        use State::*;
        let on_a = || pod_create(Some("node-a"), Some("c1"));
        let to_b = || binding("p", json!({"name": "node-b"}));
        let (saturated, not_synced) = (Warned(SATURATED_WARNING), Warned(NOT_SYNCED_WARNING));
        let cases: Vec<(State, Vec<u8>, Operation, Answer)> = vec![
            (Synced, on_a(), Operation::PodCreateNodeName, Patched),
            (Saturated, on_a(), Operation::Other, saturated),
            (Unsynced, on_a(), Operation::PodCreateNodeName, not_synced),
            (
                Unsynced,
                pod_create(None, Some("c1")),
                Operation::Other,
                not_synced,
            ),
            // A pod without claims is answered before any slot or cache is needed.
            (
                Saturated,
                pod_create(Some("node-a"), None),
                Operation::PodCreate,
                Allowed,
            ),
            (
                Unsynced,
                pod_create(Some("node-a"), None),
                Operation::PodCreate,
                Allowed,
            ),
            // node-b has no PV for c1.
            (Synced, to_b(), Operation::PodBinding, Denied),
            (Saturated, to_b(), Operation::PodBinding, saturated),
            (Unsynced, to_b(), Operation::PodBinding, not_synced),
            // A pod no view holds and no read finds: nothing to check.
            (
                Synced,
                binding("ghost", json!({"name": "node-b"})),
                Operation::PodBinding,
                Allowed,
            ),
        ];
        let view = view();
        for (state, body, operation, want) in cases {
            let io = state.io(&view);
            let what = format!("{state:?} {}", String::from_utf8_lossy(&body));
            let (op, response) = futures::executor::block_on(answer(&io, &body, &Limits::default()))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(
                (op, answered(&response)),
                (operation, want),
                "{what}: {response:?}"
            );
        }
    }

    /// A malformed object is refused (400) by the step that reads it: the binding's target and the pod's
    /// shape before any I/O point, in every state; the decoded pod after the decision slot, so a
    /// saturated replica sheds such a pod unread.
    #[test]
    fn malformed_objects_are_refused_by_the_step_that_reads_them() {
        use State::*;
        let unreadable_target = binding("p", json!("node-a"));
        let unreadable_shape = review("", "new", json!({"spec": {"volumes": 7}}));
        let unreadable_claim = review(
            "",
            "new",
            json!({"metadata": {"name": "new"},
                   "spec": {"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": 7}}]}}),
        );
        // (state, body, refused)
        let cases = [
            (Synced, &unreadable_target, true),
            (Saturated, &unreadable_target, true),
            (Unsynced, &unreadable_target, true),
            (Synced, &unreadable_shape, true),
            (Saturated, &unreadable_shape, true),
            (Unsynced, &unreadable_shape, true),
            (Synced, &unreadable_claim, true),
            (Saturated, &unreadable_claim, false),
            (Unsynced, &unreadable_claim, true),
        ];
        let view = view();
        for (state, body, refused) in cases {
            let io = state.io(&view);
            let result = futures::executor::block_on(answer(&io, body, &Limits::default()));
            assert_eq!(
                matches!(result, Err(RequestError::Object { .. })),
                refused,
                "{state:?} {}: {result:?}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
