//! The webhook's request handling: `POST /mutate`. Listeners, the admin port and shutdown are in
//! [`crate::serving`], which serves this router; the cluster writes are the controller's
//! ([`crate::controller`]). [`crate::server`] names both under one path.
//!
//! The handler checks the content type and reads the body (size-limited), then runs the request
//! pipeline ([`crate::admission::answer`]) with the server's I/O ([`ServerIo`]): decision slots
//! (bounded in number and in the bytes being decoded; when none is free the request is allowed
//! unchanged with a warning, as `failurePolicy: Ignore` intends), reads of what the watches have not
//! delivered (concurrent, capped, within the API server's deadline), and decisions on a blocking
//! thread. Admission writes nothing to the cluster: it denies with the scheduler's reason, patches the
//! pod, and leaves the volume work to the controller once the API server has stored the pod.

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
use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::{Api, Client};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use sched_core::apply::Observed;
use sched_core::snapshot::Prune;
use sched_core::volumes::{claim_class, claim_volume_name};

use crate::admission::answer::{self, AdmissionIo};
use crate::admission::{self, AdmissionResponse, ClusterView, Decision, Limits, Operation, RequestError};
use crate::cache::Cache;
use crate::metrics::{Metrics, RequestOutcome};

/// Reads of claims and classes the watches have not delivered, per request.
pub const MAX_CATCH_UP_READS: usize = 32;
/// Catch-up reads in flight at once, per request.
const CATCH_UP_CONCURRENCY: usize = 8;

/// The warning of a request allowed unchanged because its decision failed (a bug).
const DECISION_FAILED_WARNING: &str = "sched-webhook failed to decide: nothing was done";

/// Shared by every request.
pub struct AppState {
    /// The reflector caches.
    pub cache: Arc<Cache>,
    /// The client of the reads a request makes (objects the watches have not delivered).
    pub client: Client,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// The request body limit.
    pub max_body_bytes: usize,
    limits: Limits,
    decision_slots: Arc<Semaphore>,
    decision_bytes: Arc<Semaphore>,
}

impl AppState {
    /// A state with default limits.
    pub fn new(cache: Arc<Cache>, client: Client) -> Self {
        Self::with_limits(cache, client, Limits::default())
    }

    /// A state with these limits.
    pub fn with_limits(cache: Arc<Cache>, client: Client, limits: Limits) -> Self {
        AppState {
            cache,
            client,
            metrics: Arc::new(Metrics::default()),
            max_body_bytes: limits.max_body_bytes,
            limits,
            decision_slots: Arc::new(Semaphore::new(limits.max_decisions.max(1))),
            decision_bytes: Arc::new(Semaphore::new(limits.max_decision_bytes.max(1))),
        }
    }

    /// The bounds in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// A decision slot for a request weighing `bytes` (its estimated decoded size), or `None` when the
    /// replica is saturated (the request is then shed).
    fn decision_slot(&self, bytes: usize) -> Option<(OwnedSemaphorePermit, OwnedSemaphorePermit)> {
        let slot = self.decision_slots.clone().try_acquire_owned().ok()?;
        // A request larger than the whole budget takes all of it (it is within the body limit).
        let weight = bytes.clamp(1, self.limits.max_decision_bytes.max(1));
        let weight = u32::try_from(weight).unwrap_or(u32::MAX);
        let bytes = self.decision_bytes.clone().try_acquire_many_owned(weight).ok()?;
        Some((slot, bytes))
    }
}

// The pipeline names the status of a refusal; the body is this layer's: a JSON object naming the
// problem.
impl IntoResponse for RequestError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.to_string() });
        (self.status(), axum::Json(body)).into_response()
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
    state: &AppState,
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
    // The body limit is the router's (`max_body_bytes`, which tests may set apart from the rest).
    let limits = Limits {
        max_body_bytes: state.max_body_bytes,
        ..state.limits
    };
    answer::answer(&ServerIo { state, deadline }, &body, &limits).await
}

/// The server's I/O between the pipeline's steps, for one request: the replica's decision slots, reads
/// from the API server until the request's `deadline`, decisions on a blocking thread.
pub struct ServerIo<'a> {
    state: &'a AppState,
    deadline: Option<Instant>,
}

impl AdmissionIo for ServerIo<'_> {
    type Slot = (OwnedSemaphorePermit, OwnedSemaphorePermit);

    fn view(&self) -> &dyn ClusterView {
        self.state.cache.as_ref()
    }

    fn is_synced(&self) -> bool {
        self.state.cache.is_ready()
    }

    fn decision_slot(&self, weight: usize) -> Option<Self::Slot> {
        let slot = self.state.decision_slot(weight);
        if slot.is_none() {
            self.state.metrics.request_shed();
        }
        slot
    }

    async fn fetch_pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        fetch_pod(&self.state.client, self.deadline, namespace, name).await
    }

    async fn catch_up(&self, pod: &Pod) {
        catch_up(self.state, self.deadline, pod).await;
    }

    fn decide<F>(&self, decide: F) -> impl Future<Output = Decision> + Send
    where
        F: FnOnce(&dyn ClusterView) -> Decision + Send + 'static,
    {
        let cache = self.state.cache.clone();
        async move {
            match tokio::task::spawn_blocking(move || decide(cache.as_ref())).await {
                Ok(decision) => decision,
                // A panic in a decision is a bug; answer fail-open rather than take the connection down.
                Err(e) => {
                    tracing::error!(error = %e, "decision task failed");
                    Decision::allow_with_warning(Operation::Other, DECISION_FAILED_WARNING)
                }
            }
        }
    }
}

/// Runs `future` until `deadline` (none: until it ends); `None` when the time ran out.
async fn within<T>(deadline: Option<Instant>, future: impl Future<Output = T>) -> Option<T> {
    match deadline {
        Some(at) => tokio::time::timeout_at(at.into(), future).await.ok(),
        None => Some(future.await),
    }
}

async fn fetch_pod(
    client: &Client,
    deadline: Option<Instant>,
    namespace: &str,
    name: &str,
) -> Option<Arc<Pod>> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    match within(deadline, api.get_opt(name)).await {
        Some(Ok(pod)) => pod.map(|mut p| {
            p.prune();
            Arc::new(p)
        }),
        Some(Err(e)) => {
            tracing::warn!(namespace, name, error = %e, "failed to read the pod being bound");
            None
        }
        None => {
            tracing::warn!(namespace, name, "out of time reading the pod being bound");
            None
        }
    }
}

/// What a catch-up read is for.
enum CatchUp {
    Claim(String),
    Class(String),
}

/// Reads from the API server the claims `pod` names and the classes of its unbound claims that the
/// watches have not delivered yet, and records them in the cache. Clients create a class, a claim and a
/// pod in quick succession; without this the pod's CREATE can outrun the claim's watch event. Generic
/// ephemeral claims are skipped: their controller creates them after the pod. The reads go out
/// concurrently, at most [`MAX_CATCH_UP_READS`] per request, and stop at the request's deadline.
async fn catch_up(state: &AppState, deadline: Option<Instant>, pod: &Pod) {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    let mut reads = Vec::new();
    let mut classes = std::collections::BTreeSet::new();
    for (name, ephemeral) in admission::pod_claims(pod) {
        if ephemeral {
            continue;
        }
        match state.cache.pvc(namespace, &name) {
            None => reads.push(CatchUp::Claim(name)),
            Some(claim) => {
                let class = claim_class(&claim);
                if !class.is_empty() && claim_volume_name(&claim).is_empty() && !state.cache.has_class(class)
                {
                    classes.insert(class.to_string());
                }
            }
        }
    }
    reads.extend(classes.into_iter().map(CatchUp::Class));
    if reads.is_empty() {
        return;
    }
    if reads.len() > MAX_CATCH_UP_READS {
        tracing::info!(
            namespace,
            pod = pod.metadata.name.as_deref().unwrap_or(""),
            missing = reads.len(),
            read = MAX_CATCH_UP_READS,
            "more objects missing from the cache than are read per request"
        );
        reads.truncate(MAX_CATCH_UP_READS);
    }
    let all = futures::stream::iter(reads)
        .map(|read| catch_up_one(state, namespace, read))
        .buffer_unordered(CATCH_UP_CONCURRENCY)
        .collect::<Vec<()>>();
    if within(deadline, all).await.is_none() {
        tracing::warn!(namespace, "out of time reading objects missing from the cache");
    }
}

async fn catch_up_one(state: &AppState, namespace: &str, read: CatchUp) {
    state.metrics.catch_up_read();
    match read {
        CatchUp::Claim(name) => {
            let api: Api<PersistentVolumeClaim> = Api::namespaced(state.client.clone(), namespace);
            match api.get_opt(&name).await {
                Ok(Some(claim)) => {
                    let class = claim_class(&claim).to_string();
                    let unbound = claim_volume_name(&claim).is_empty();
                    tracing::info!(namespace, claim = %name, "claim not in the cache yet: read it");
                    state.cache.record(&Observed::Pvc(Box::new(claim)));
                    // Its class, when the watch has not delivered it either (one more read, not capped
                    // separately: at most one per claim read).
                    if unbound && !class.is_empty() && !state.cache.has_class(&class) {
                        Box::pin(catch_up_one(state, namespace, CatchUp::Class(class))).await;
                    }
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(namespace, claim = %name, error = %e, "failed to read the claim"),
            }
        }
        CatchUp::Class(class) => {
            let api: Api<StorageClass> = Api::all(state.client.clone());
            match api.get_opt(&class).await {
                Ok(Some(found)) => {
                    tracing::info!(class, "storage class not in the cache yet: read it");
                    state.cache.record_class(found);
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(class, error = %e, "failed to read the storage class"),
            }
        }
    }
}
