//! The aggregated API the explainer serves, `sched.kubectl-sched.io/v1alpha1`, the way metrics-server
//! serves `metrics.k8s.io`: discovery documents, and one read-only resource,
//! `namespaces/{namespace}/podexplanations/{pod}` (GET only), whose object carries what
//! `kubectl sched explain POD` prints (`answer`) and the snapshot's resourceVersion and age
//! (`snapshot`). The query's `output`, `node`, `profile` and `exitCode` are `-o`, `--node`,
//! `--profile` and `--exit-code`.
//!
//! Every request comes through the API server, which has authenticated the user and checked RBAC
//! for `podexplanations` in the namespace; the answer is computed only after a SubjectAccessReview
//! says the user may also list the namespace's pods ([`super::identity`]); pods of other namespaces
//! the user may not list are counted but not named ([`super::redact`]). Errors are `Status`
//! objects, so kubectl and the CLI print the API server's usual lines.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json};
use kube::Client;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use kubectl_sched::served::{ServedError, explain};
use kubectl_sched::source::explainer::ExplainRequest;
use kubectl_sched::source::load::FromServer;

use super::identity::{Identity, REQUIRED_RESOURCE, REQUIRED_VERB, RequestHeaderConfig, may_list_pods};
use super::live::{Freshness, LiveSnapshot};
use super::redact::{hidden_warning, hide_pod_names, unreadable_namespaces};

/// The API group.
pub const GROUP: &str = "sched.kubectl-sched.io";
/// The version.
pub const VERSION: &str = "v1alpha1";
/// The resource.
pub const RESOURCE: &str = "podexplanations";
/// Its kind.
pub const KIND: &str = "PodExplanation";

/// Evaluations run at once; more wait (at most [`QUEUE_WAIT`]) so that a burst of requests cannot
/// take the memory of many snapshot copies at once.
pub const DEFAULT_CONCURRENT_EVALUATIONS: usize = 2;
/// How long a request waits for an evaluation slot before a 429.
pub const QUEUE_WAIT: Duration = Duration::from_secs(10);
/// How long one evaluation may take before a 504 (kube-apiserver's proxy gives up after 60 s).
pub const EVALUATION_TIMEOUT: Duration = Duration::from_secs(50);

/// The common name of the front proxy's client certificate on this connection (None: no name).
#[derive(Debug, Clone)]
pub struct ProxyName(pub Option<String>);

/// What the handlers share.
pub struct ExplainerState {
    /// The watch-fed snapshot.
    pub live: LiveSnapshot,
    /// The component's client: SubjectAccessReviews and the API server's version.
    pub client: Client,
    /// The front proxy's settings.
    pub requestheader: RequestHeaderConfig,
    /// `--kubeconfig` (None: in-cluster), for the live facts a served explain reads.
    pub kubeconfig: Option<PathBuf>,
    /// The API server URL (where answers say the objects came from).
    pub origin: String,
    /// Evaluation slots.
    pub slots: Semaphore,
}

/// The router of the API port.
pub fn router(state: Arc<ExplainerState>) -> Router {
    let group_version = format!("/apis/{GROUP}/{VERSION}");
    Router::new()
        .route("/apis", get(api_group_list))
        .route(&format!("/apis/{GROUP}"), get(api_group))
        .route(&group_version, get(api_resource_list))
        .route(
            &format!("{group_version}/namespaces/{{namespace}}/{RESOURCE}/{{name}}"),
            get(pod_explanation),
        )
        .fallback(|| async {
            status(
                StatusCode::NOT_FOUND,
                "NotFound",
                "the server could not find the requested resource",
            )
        })
        .with_state(state)
}

/// A `Status` object, as the API server writes errors.
fn status(code: StatusCode, reason: &str, message: &str) -> Response {
    let body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code.as_u16(),
    });
    (code, Json(body)).into_response()
}

fn group_version_for_discovery() -> Value {
    json!({"groupVersion": format!("{GROUP}/{VERSION}"), "version": VERSION})
}

fn group() -> Value {
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": GROUP,
        "versions": [group_version_for_discovery()],
        "preferredVersion": group_version_for_discovery(),
    })
}

async fn api_group_list(
    Extension(proxy): Extension<ProxyName>,
    State(state): State<Arc<ExplainerState>>,
) -> Response {
    if !state.requestheader.allows_proxy(proxy.0.as_deref()) {
        return unauthorized();
    }
    Json(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group()]})).into_response()
}

async fn api_group(
    Extension(proxy): Extension<ProxyName>,
    State(state): State<Arc<ExplainerState>>,
) -> Response {
    if !state.requestheader.allows_proxy(proxy.0.as_deref()) {
        return unauthorized();
    }
    Json(group()).into_response()
}

async fn api_resource_list(
    Extension(proxy): Extension<ProxyName>,
    State(state): State<Arc<ExplainerState>>,
) -> Response {
    if !state.requestheader.allows_proxy(proxy.0.as_deref()) {
        return unauthorized();
    }
    Json(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": format!("{GROUP}/{VERSION}"),
        "resources": [{
            "name": RESOURCE,
            "singularName": "podexplanation",
            "namespaced": true,
            "kind": KIND,
            "verbs": ["get"],
        }],
    }))
    .into_response()
}

fn unauthorized() -> Response {
    status(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized")
}

/// The identity of a request the front proxy passed, or the refusal.
fn authenticated(
    state: &ExplainerState,
    proxy: &ProxyName,
    headers: &HeaderMap,
) -> Result<Identity, Box<Response>> {
    if !state.requestheader.allows_proxy(proxy.0.as_deref()) {
        return Err(Box::new(unauthorized()));
    }
    state
        .requestheader
        .identity(headers)
        .ok_or_else(|| Box::new(unauthorized()))
}

/// The query parameters of a GET, as an [`ExplainRequest`].
fn request_of(
    namespace: String,
    name: String,
    query: &HashMap<String, String>,
) -> Result<ExplainRequest, Box<Response>> {
    let known = ["output", "node", "profile", "exitCode"];
    if let Some(unknown) = query.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(Box::new(status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            &format!(
                "unknown query parameter {unknown:?} (known: {})",
                known.join(", ")
            ),
        )));
    }
    Ok(ExplainRequest {
        namespace,
        pod: name,
        output: query.get("output").cloned(),
        node: query.get("node").cloned(),
        profile: query.get("profile").cloned(),
        exit_code: query.get("exitCode").is_some_and(|v| v == "true"),
    })
}

/// The answer's `snapshot`: its resourceVersion and age.
fn snapshot_json(freshness: &Freshness) -> Value {
    json!({
        "resourceVersion": freshness.resource_version.to_string(),
        "secondsSinceLastEvent": freshness.since_last_event.map(|d| d.as_secs_f64()),
        "inSync": freshness.in_sync,
        "staleSeconds": freshness.stale_for.as_secs_f64(),
    })
}

async fn pod_explanation(
    Extension(proxy): Extension<ProxyName>,
    State(state): State<Arc<ExplainerState>>,
    Path((namespace, name)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let identity = match authenticated(&state, &proxy, &headers) {
        Ok(identity) => identity,
        Err(refusal) => return *refusal,
    };
    match may_list_pods(&state.client, &identity, Some(&namespace)).await {
        Ok(true) => {}
        Ok(false) => {
            return status(
                StatusCode::FORBIDDEN,
                "Forbidden",
                &format!(
                    "{RESOURCE}.{GROUP} \"{name}\" is forbidden: User \"{}\" cannot {REQUIRED_VERB} resource \
                     \"{REQUIRED_RESOURCE}\" in API group \"\" in the namespace \"{namespace}\"",
                    identity.user
                ),
            );
        }
        Err(e) => {
            return status(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                &format!(
                    "asking whether the user may read pods: {}",
                    sched_core::api_error::describe(&e)
                ),
            );
        }
    }
    // Answered while re-listing too (unready then), from the previous state with its age.
    if !state.live.has_listed() {
        return status(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "the explainer has not listed the cluster yet",
        );
    }
    let request = match request_of(namespace.clone(), name.clone(), &query) {
        Ok(r) => r,
        Err(refusal) => return *refusal,
    };
    let Ok(Ok(_slot)) = tokio::time::timeout(QUEUE_WAIT, state.slots.acquire()).await else {
        return status(
            StatusCode::TOO_MANY_REQUESTS,
            "TooManyRequests",
            "the explainer is busy; try again",
        );
    };
    let version = state.client.apiserver_version().await.ok();
    let (mut objects, freshness) = state.live.objects();
    // Pods of namespaces the user may not list are counted, not named (`super::redact`).
    let hidden = match unreadable_namespaces(&state.client, &identity, &namespace, &objects).await {
        Ok(hidden) => hidden,
        Err(e) => {
            return status(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                &format!(
                    "asking which namespaces the user may read pods in: {}",
                    sched_core::api_error::describe(&e)
                ),
            );
        }
    };
    let hidden_pods = hide_pod_names(&mut objects, &hidden);
    let mut warnings = freshness.warnings.clone();
    if hidden_pods > 0 {
        warnings.push(hidden_warning(hidden_pods));
    }
    let note = format!(
        "explained by the cluster's explainer ({GROUP}) from its watch-fed snapshot at resourceVersion {}{}",
        freshness.resource_version,
        freshness
            .since_last_event
            .map(|d| format!(", last event {:.1} s ago", d.as_secs_f64()))
            .unwrap_or_default()
    );
    let from = FromServer {
        origin: state.origin.clone(),
        default_namespace: namespace.clone(),
        warnings,
        notes: vec![note],
        version,
    };
    // The evaluation blocks (and reads the live facts on a runtime of its own): a thread of its own,
    // bounded by the slots and the timeout.
    let (send, receive) = tokio::sync::oneshot::channel();
    let kubeconfig = state.kubeconfig.clone();
    let spawned = std::thread::Builder::new()
        .name("sched-explain".into())
        .spawn(move || {
            let _ = send.send(explain(&request, objects, from, kubeconfig.as_deref()));
        });
    if let Err(e) = spawned {
        return status(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            &format!("starting an evaluation: {e}"),
        );
    }
    let answer = match tokio::time::timeout(EVALUATION_TIMEOUT, receive).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(_)) => {
            return status(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                "the evaluation ended without an answer",
            );
        }
        Err(_) => {
            return status(
                StatusCode::GATEWAY_TIMEOUT,
                "Timeout",
                &format!("the evaluation took longer than {EVALUATION_TIMEOUT:?}"),
            );
        }
    };
    match answer {
        Ok(answer) => Json(json!({
            "kind": KIND,
            "apiVersion": format!("{GROUP}/{VERSION}"),
            "metadata": {
                "name": name,
                "namespace": namespace,
                "resourceVersion": freshness.resource_version.to_string(),
            },
            "snapshot": snapshot_json(&freshness),
            "answer": answer,
        }))
        .into_response(),
        Err(e) => {
            let message = error_line(&e);
            if e.is_not_found() {
                status(StatusCode::NOT_FOUND, "NotFound", &message)
            } else if matches!(
                e,
                ServedError::Usage(_) | ServedError::Explain(_) | ServedError::Render(_)
            ) {
                status(StatusCode::BAD_REQUEST, "BadRequest", &message)
            } else {
                status(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", &message)
            }
        }
    }
}

/// The error and its causes in one line, as the CLI prints them.
fn error_line(err: &ServedError) -> String {
    let mut line = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        source = cause.source();
    }
    line
}
