//! The webhook's request handling: `POST /mutate` and the execution of decisions' plans (retries on
//! conflicts with fresh state, undo on failure). Listeners, the admin port and shutdown are in
//! [`crate::serving`].
//!
//! A request goes: content type → body (size-limited) → AdmissionReview → kind. Pods without claims and
//! bindings that need nothing are answered from the raw JSON and the cache's indexes. The rest decide
//! on a blocking thread; decisions with writes decide again under the volume lock (one writing decision
//! at a time per replica, so two requests never pick the same PV) and run the plan.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::{Api, Client};
use tokio::sync::Mutex;

use sched_core::apply::{self, ActionResult, ApplyOptions, Observed, Outcome};
use sched_core::plugins::volume_binding::pv_helpers::{claim_class, claim_volume_name};
use sched_core::snapshot::Prune;

use crate::admission::{
    self, AdmissionRequest, AdmissionResponse, ClusterView, Decision, OnFailure, Operation, RequestKind,
    binding, pod_create,
};
use crate::cache::Cache;
use crate::error::RequestError;
use crate::metrics::{Metrics, RequestOutcome};
pub use crate::serving::{Listeners, admin_router, serve, termination_signal};

/// Default request body limit: AdmissionReviews of pods are a few KiB; 3 MiB covers the largest
/// objects etcd accepts (1.5 MiB) twice (object and oldObject).
pub const DEFAULT_MAX_BODY_BYTES: usize = 3 * 1024 * 1024;
/// Attempts of a plan (the first and the retries after conflicts).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;

/// Shared by every request.
pub struct AppState {
    /// The reflector caches.
    pub cache: Arc<Cache>,
    /// The client plans are executed with.
    pub client: Client,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// How plans are executed.
    pub apply_options: ApplyOptions,
    /// Attempts per plan.
    pub max_attempts: u32,
    /// The request body limit.
    pub max_body_bytes: usize,
    volume_lock: Mutex<()>,
}

impl AppState {
    /// A state with default limits.
    pub fn new(cache: Arc<Cache>, client: Client) -> Self {
        AppState {
            cache,
            client,
            metrics: Arc::new(Metrics::default()),
            apply_options: ApplyOptions::new("sched-webhook"),
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            volume_lock: Mutex::new(()),
        }
    }
}

/// The webhook router (`POST /mutate`).
pub fn router(state: Arc<AppState>) -> Router {
    let limit = state.max_body_bytes;
    Router::new()
        .route("/mutate", post(mutate))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

async fn mutate(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let started = Instant::now();
    let deadline = crate::deadline::from_query(query.as_deref(), started);
    let (op, outcome, response) = match handle(&state, deadline, &headers, body).await {
        Ok((op, response)) => {
            let outcome = if !response.allowed {
                RequestOutcome::Denied
            } else if response.patch.is_some() {
                RequestOutcome::Patched
            } else {
                RequestOutcome::Allowed
            };
            (op, outcome, axum::Json(response.into_review()).into_response())
        }
        Err(e) => {
            tracing::info!(error = %e, "request refused");
            (Operation::Invalid, RequestOutcome::Rejected, e.into_response())
        }
    };
    state.metrics.observe(op, outcome, started.elapsed());
    response
}

fn is_json(headers: &HeaderMap) -> Result<(), RequestError> {
    let value = headers
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap_or("<not text>"))
        .unwrap_or("");
    let essence = value.split(';').next().unwrap_or("").trim();
    if essence.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        Err(RequestError::UnsupportedMediaType(value.to_string()))
    }
}

async fn handle(
    state: &Arc<AppState>,
    deadline: Option<Instant>,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<(Operation, AdmissionResponse), RequestError> {
    is_json(headers)?;
    let body = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            RequestError::TooLarge {
                limit: state.max_body_bytes,
            }
        } else {
            RequestError::Body(rejection.body_text())
        }
    })?;
    let request = admission::review::decode(&body)?;
    match admission::request_kind(&request) {
        RequestKind::Other => Ok((Operation::Other, AdmissionResponse::allow(&request.uid))),
        RequestKind::PodCreate => pod_create_request(state, deadline, request).await,
        RequestKind::PodBinding => binding_request(state, deadline, request).await,
    }
}

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

async fn pod_create_request(
    state: &Arc<AppState>,
    deadline: Option<Instant>,
    request: AdmissionRequest,
) -> Result<(Operation, AdmissionResponse), RequestError> {
    let raw = raw_object(&request, "pod")?;
    let uses_claims = admission::pod_uses_claims(raw).map_err(|e| RequestError::Object {
        what: "pod",
        message: e.to_string(),
    })?;
    if !uses_claims {
        return Ok((Operation::PodCreate, AdmissionResponse::allow(&request.uid)));
    }
    let mut pod: Pod = serde_json::from_str(raw).map_err(|e| RequestError::Object {
        what: "pod",
        message: e.to_string(),
    })?;
    if pod.metadata.namespace.as_deref().unwrap_or("").is_empty() {
        pod.metadata.namespace = Some(request.namespace.clone());
    }
    let node_name_set = pod
        .spec
        .as_ref()
        .is_some_and(|s| s.node_name.as_deref().is_some_and(|n| !n.is_empty()));
    if !state.cache.is_ready() {
        // Whether the pod opted in cannot be told before the namespaces are cached.
        let op = if node_name_set {
            Operation::PodCreateNodeName
        } else {
            Operation::Other
        };
        return Ok(not_ready(&request, op));
    }
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    if node_name_set || admission::opted_in(&pod, state.cache.namespace_labels(&namespace).as_ref()) {
        catch_up(state, &pod).await;
    }
    let pod = Arc::new(pod);
    let decide = {
        let pod = pod.clone();
        move |cache: Arc<Cache>| pod_create::decide(&pod, cache.as_ref())
    };
    Ok(decide_and_run(state, deadline, &request, decide).await)
}

async fn binding_request(
    state: &Arc<AppState>,
    deadline: Option<Instant>,
    request: AdmissionRequest,
) -> Result<(Operation, AdmissionResponse), RequestError> {
    let raw = raw_object(&request, "binding")?;
    let node = admission::binding_target(raw).map_err(|e| RequestError::Object {
        what: "binding",
        message: e.to_string(),
    })?;
    if !state.cache.is_ready() {
        return Ok(not_ready(&request, Operation::PodBinding));
    }
    let pod = match state.cache.pod(&request.namespace, &request.name) {
        Some(pod) => Some(pod),
        // The scheduler can bind a pod this replica's watch has not delivered yet: read it once.
        None => fetch_pod(&state.client, &request.namespace, &request.name).await,
    };
    if let Some(p) = &pod
        && binding::needs_nothing(p, &node, state.cache.as_ref())
    {
        return Ok((Operation::PodBinding, AdmissionResponse::allow(&request.uid)));
    }
    if let Some(p) = &pod {
        catch_up(state, p).await;
    }
    let decide = move |cache: Arc<Cache>| binding::decide(pod.as_deref(), &node, cache.as_ref());
    Ok(decide_and_run(state, deadline, &request, decide).await)
}

async fn fetch_pod(client: &Client, namespace: &str, name: &str) -> Option<Arc<Pod>> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    match api.get_opt(name).await {
        Ok(pod) => pod.map(|mut p| {
            p.prune();
            Arc::new(p)
        }),
        Err(e) => {
            tracing::warn!(namespace, name, error = %e, "failed to read the pod being bound");
            None
        }
    }
}

/// Reads from the API server the claims `pod` names and the classes of its unbound claims that the
/// watches have not delivered yet, and records them in the cache. Clients create a class, a claim and a
/// pod in quick succession; without this the pod's CREATE can outrun the claim's watch event and the
/// pod would be admitted with nothing pre-bound. Generic ephemeral claims are skipped: their controller
/// creates them after the pod.
async fn catch_up(state: &AppState, pod: &Pod) {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    for (name, ephemeral) in admission::pod_claims(pod) {
        if ephemeral {
            continue;
        }
        let claim = match state.cache.pvc(namespace, &name) {
            Some(claim) => claim,
            None => {
                let api: Api<PersistentVolumeClaim> = Api::namespaced(state.client.clone(), namespace);
                match api.get_opt(&name).await {
                    Ok(Some(claim)) => {
                        tracing::info!(namespace, claim = %name, "claim not in the cache yet: read it");
                        state.cache.record(&Observed::Pvc(Box::new(claim.clone())));
                        Arc::new(claim)
                    }
                    Ok(None) => continue,
                    Err(e) => {
                        tracing::warn!(namespace, claim = %name, error = %e, "failed to read the claim");
                        continue;
                    }
                }
            }
        };
        let class = claim_class(&claim);
        if class.is_empty() || !claim_volume_name(&claim).is_empty() || state.cache.has_class(class) {
            continue;
        }
        let api: Api<StorageClass> = Api::all(state.client.clone());
        match api.get_opt(class).await {
            Ok(Some(found)) => {
                tracing::info!(class, "storage class not in the cache yet: read it");
                state.cache.record_class(found);
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(class, error = %e, "failed to read the storage class"),
        }
    }
}

/// Allowed unchanged before the caches have synced, counted under the request's operation.
fn not_ready(request: &AdmissionRequest, operation: Operation) -> (Operation, AdmissionResponse) {
    (
        operation,
        AdmissionResponse::allow(&request.uid).with_warnings(vec![
            "sched-webhook caches are not synced yet: nothing was done".into(),
        ]),
    )
}

async fn decide_on_cache<F>(state: &Arc<AppState>, decide: &F) -> Decision
where
    F: Fn(Arc<Cache>) -> Decision + Clone + Send + Sync + 'static,
{
    let cache = state.cache.clone();
    let decide = decide.clone();
    match tokio::task::spawn_blocking(move || decide(cache)).await {
        Ok(decision) => decision,
        // A panic in a decision is a bug; answer fail-open rather than take the connection down.
        Err(e) => {
            tracing::error!(error = %e, "decision task failed");
            Decision::allow_with_warning(
                Operation::Other,
                "sched-webhook failed to decide: nothing was done",
            )
        }
    }
}

/// Decides, and when the decision has writes, decides again under the volume lock (one replica never
/// hands out the same PV twice; decisions that write nothing never wait for it) and runs the plan —
/// unless the request is a dry run.
async fn decide_and_run<F>(
    state: &Arc<AppState>,
    deadline: Option<Instant>,
    request: &AdmissionRequest,
    decide: F,
) -> (Operation, AdmissionResponse)
where
    F: Fn(Arc<Cache>) -> Decision + Clone + Send + Sync + 'static,
{
    let decision = decide_on_cache(state, &decide).await;
    let op = decision.operation;
    if request.is_dry_run() || decision.denial.is_some() || decision.is_passive() {
        return (
            op,
            respond(request, &decision.denial, &decision.patch, decision.warnings),
        );
    }
    let _guard = state.volume_lock.lock().await;
    let decision = decide_on_cache(state, &decide).await;
    let result = run_plan(state, deadline, decision, || decide_on_cache(state, &decide)).await;
    (
        op,
        respond(request, &result.denial, &result.patch, result.warnings),
    )
}

fn respond(
    request: &AdmissionRequest,
    denial: &Option<String>,
    patch: &[serde_json::Value],
    warnings: Vec<String>,
) -> AdmissionResponse {
    match denial {
        Some(message) => AdmissionResponse::deny(&request.uid, message).with_warnings(warnings),
        None => AdmissionResponse::allow(&request.uid)
            .with_patch(patch)
            .with_warnings(warnings),
    }
}

/// What a plan's execution leaves to answer.
#[derive(Debug)]
pub struct PlanResult {
    /// Deny with this message.
    pub denial: Option<String>,
    /// The patch to return.
    pub patch: Vec<serde_json::Value>,
    /// Warnings.
    pub warnings: Vec<String>,
}

/// Runs `decision`'s plan: on a conflict the decision is made again (`redecide`, on the cache that now
/// holds what the conflict revealed), up to `max_attempts`; on failure everything written for this
/// request is taken back and the decision's [`OnFailure`] answers. Then the follow-up actions run,
/// best-effort. Past `deadline` (see [`crate::deadline`]) no retry and no follow-up starts: what was
/// written is taken back and the decision's [`OnFailure`] answers while the API server still listens.
pub async fn run_plan<R, Fut>(
    state: &AppState,
    deadline: Option<Instant>,
    mut decision: Decision,
    mut redecide: R,
) -> PlanResult
where
    R: FnMut() -> Fut,
    Fut: Future<Output = Decision>,
{
    let options = &ApplyOptions {
        deadline,
        ..state.apply_options.clone()
    };
    let mut written: Vec<ActionResult> = Vec::new();
    let mut attempt = 1;
    loop {
        if let Some(message) = decision.denial.clone() {
            undo_all(state, &written).await;
            return PlanResult {
                denial: Some(message),
                patch: Vec::new(),
                warnings: decision.warnings,
            };
        }
        if decision.plan.is_empty() {
            break;
        }
        // Waiting for the volume lock or deciding again can use up the time: then nothing starts.
        if options.out_of_time() {
            let message = format!("out of time after {} attempt(s)", attempt - 1);
            return fail_plan(state, &written, decision, &message).await;
        }
        let results = apply::execute(&state.client, &decision.plan, options).await;
        for r in &results {
            if let Some(observed) = &r.observed {
                state.cache.record(observed);
            }
            if matches!(r.outcome, Outcome::Done) {
                state.metrics.binding_done();
                tracing::info!(action = %r.action.describe(), "written");
            }
        }
        let failure = results.iter().find_map(|r| match &r.outcome {
            Outcome::Failed(e) => Some((e.is_conflict(), e.to_string())),
            Outcome::PdbBlocked { message } => Some((false, message.clone())),
            _ => None,
        });
        written.extend(results.into_iter().filter(|r| matches!(r.outcome, Outcome::Done)));
        match failure {
            None => break,
            Some((true, message)) if attempt < state.max_attempts => {
                tracing::info!(attempt, error = %message, "conflict: deciding again on fresh state");
                state.metrics.conflict_retried();
                attempt += 1;
                decision = redecide().await;
            }
            Some((_, message)) => return fail_plan(state, &written, decision, &message).await,
        }
    }
    for action in &decision.follow_up {
        if options.out_of_time() {
            tracing::warn!(action = %action.describe(), "out of time: follow-up skipped");
            continue;
        }
        let (outcome, _) = apply::execute_one(&state.client, action, options).await;
        match outcome {
            Outcome::Done => {
                state.metrics.nomination_cleared();
                tracing::info!(action = %action.describe(), "written");
            }
            Outcome::Failed(e) => tracing::warn!(error = %e, "follow-up failed"),
            _ => {}
        }
    }
    PlanResult {
        denial: None,
        patch: decision.patch,
        warnings: decision.warnings,
    }
}

/// A plan that cannot finish: everything written for the request is taken back, and the decision's
/// [`OnFailure`] says whether the request is denied or allowed unchanged.
async fn fail_plan(
    state: &AppState,
    written: &[ActionResult],
    decision: Decision,
    message: &str,
) -> PlanResult {
    state.metrics.plan_failed();
    tracing::warn!(error = %message, "volume pre-binding failed");
    undo_all(state, written).await;
    let mut warnings = decision.warnings;
    match decision.on_failure {
        OnFailure::Deny => PlanResult {
            denial: Some(format!("volume pre-binding failed: {message}")),
            patch: Vec::new(),
            warnings,
        },
        OnFailure::AllowUnchanged => {
            warnings.push(format!(
                "volumes left to the scheduler: pre-binding failed: {message}"
            ));
            PlanResult {
                denial: None,
                patch: Vec::new(),
                warnings,
            }
        }
    }
}

async fn undo_all(state: &AppState, written: &[ActionResult]) {
    for result in written.iter().rev() {
        match apply::undo(&state.client, result, &state.apply_options).await {
            Ok(Outcome::Done) => {
                state.metrics.write_undone();
                tracing::info!(action = %result.action.describe(), "undone");
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "failed to undo"),
        }
    }
}
