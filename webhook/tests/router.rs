//! The router without sockets (`oneshot`): every malformed, mistyped, oversized or unknown request gets a
//! clear 4xx or an allowed review, never a crash; decisions reach the response; dry-run never writes.

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use common::{binding_review, dead_client, pod_json, pod_review, state_with, unsynced_state};
use sched_core::ClusterObjects;
use sched_core::plugins::volume_binding::ERR_REASON_BIND_CONFLICT;
use sched_core::plugins::volume_binding::pv_helpers::NOT_SUPPORTED_PROVISIONER;
use sched_core::testing::{node, pv, pvc, storage_class};
use sched_webhook::admission::Operation;
use sched_webhook::metrics::RequestOutcome;
use sched_webhook::server::{AppState, router};
use sched_webhook::serving::admin_router;

const HOST: &str = "kubernetes.io/hostname";

async fn send(app: axum::Router, content_type: Option<&str>, body: impl Into<Body>) -> (StatusCode, Value) {
    send_to(app, "/mutate", content_type, body).await
}

async fn send_to(
    app: axum::Router,
    uri: &str,
    content_type: Option<&str>,
    body: impl Into<Body>,
) -> (StatusCode, Value) {
    let mut request = Request::post(uri);
    if let Some(ct) = content_type {
        request = request.header(header::CONTENT_TYPE, ct);
    }
    let response = app
        .oneshot(request.body(body.into()).expect("request"))
        .await
        .expect("infallible");
    let status = response.status();
    let bytes = response.into_body().collect().await.expect("body").to_bytes();
    let value =
        serde_json::from_slice(&bytes).unwrap_or_else(|_| json!({"raw": String::from_utf8_lossy(&bytes)}));
    (status, value)
}

async fn post_json(app: axum::Router, body: &Value) -> (StatusCode, Value) {
    send(app, Some("application/json"), body.to_string()).await
}

/// Nodes a and c; one local PV on node-a; claim c1 (WaitForFirstConsumer, no provisioner).
fn volumes() -> ClusterObjects {
    ClusterObjects {
        nodes: vec![
            node("node-a").label(HOST, "node-a").obj(),
            node("node-c").label(HOST, "node-c").obj(),
        ],
        persistent_volumes: vec![
            pv("pv-a")
                .storage_class("local")
                .capacity("1Gi")
                .phase("Available")
                .access_modes(&["ReadWriteOnce"])
                .node_affinity(HOST, &["node-a"])
                .resource_version("4")
                .obj(),
        ],
        persistent_volume_claims: vec![
            pvc("c1")
                .namespace("ns")
                .storage_class("local")
                .request("1Gi")
                .access_modes(&["ReadWriteOnce"])
                .resource_version("2")
                .obj(),
        ],
        storage_classes: vec![storage_class(
            "local",
            NOT_SUPPORTED_PROVISIONER,
            "WaitForFirstConsumer",
        )],
        ..ClusterObjects::default()
    }
}

#[tokio::test]
async fn wrong_content_type_is_415() {
    let (state, _w) = unsynced_state();
    let body = pod_review(pod_json("p", None, None), false).to_string();
    for ct in [None, Some("text/plain"), Some("application/yaml")] {
        let (status, value) = send(router(state.clone()), ct, body.clone()).await;
        assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{ct:?}");
        assert!(
            value["error"]
                .as_str()
                .expect("error")
                .contains("application/json"),
            "{value}"
        );
    }
    let (status, _) = send(
        router(state.clone()),
        Some("application/json; charset=utf-8"),
        body,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        state
            .metrics
            .requests(Operation::Invalid, RequestOutcome::Rejected),
        3
    );
}

#[tokio::test]
async fn malformed_bodies_are_400_with_the_reason() {
    let (state, _w) = unsynced_state();
    let review = |request: Value| json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request});
    let cases: Vec<(String, &str)> = vec![
        ("".into(), "failed to decode"),
        ("{".into(), "failed to decode"),
        ("null".into(), "failed to decode"),
        ("\u{0}\u{1}binary".into(), "failed to decode"),
        (json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}).to_string(), "unsupported apiVersion"),
        (json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).to_string(), "has no request"),
        (review(json!({"operation": "CREATE"})).to_string(), "has no uid"),
        (
            review(json!({"uid": "u", "resource": {"resource": "pods"}, "operation": "CREATE"})).to_string(),
            "malformed pod: the request has no object",
        ),
        (
            review(json!({"uid": "u", "resource": {"resource": "pods"}, "operation": "CREATE",
                          "object": {"spec": {"volumes": 7}}}))
            .to_string(),
            "malformed pod",
        ),
        (
            review(json!({"uid": "u", "resource": {"resource": "pods"}, "operation": "CREATE",
                          "object": {"spec": {"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": 5}}]}}}))
            .to_string(),
            "malformed pod",
        ),
        (
            review(json!({"uid": "u", "resource": {"resource": "pods"}, "subResource": "binding",
                          "operation": "CREATE", "object": {"target": "node-a"}}))
            .to_string(),
            "malformed binding",
        ),
    ];
    for (body, expected) in cases {
        let (status, value) = send(router(state.clone()), Some("application/json"), body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {value}");
        let error = value["error"].as_str().expect("error message");
        assert!(error.contains(expected), "{body}: {error}");
    }
}

#[tokio::test]
async fn oversized_bodies_are_413() {
    let (cache, _w) =
        sched_webhook::cache::Cache::new(sched_core::framework::profile::SchedulerConfig::default_config(
            &sched_core::plugins::in_tree_registry(),
        ));
    let mut state = AppState::new(cache, dead_client());
    state.max_body_bytes = 1024;
    let state = std::sync::Arc::new(state);
    let mut pod = pod_json("p", None, None);
    pod["metadata"]["annotations"] = json!({"big": "x".repeat(4096)});
    let (status, value) = post_json(router(state.clone()), &pod_review(pod, false)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        value["error"]
            .as_str()
            .expect("error")
            .contains("larger than 1024 bytes"),
        "{value}"
    );
    // Just under the limit is fine.
    let (status, _) = post_json(router(state), &pod_review(pod_json("p", None, None), false)).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn unknown_kinds_and_operations_are_allowed_unchanged() {
    let (state, _w) = unsynced_state();
    for (resource, sub, op) in [
        ("configmaps", "", "CREATE"),
        ("pods", "", "UPDATE"),
        ("pods", "", "DELETE"),
        ("pods", "status", "UPDATE"),
        ("pods", "eviction", "CREATE"),
        ("widgets", "", "CONNECT"),
    ] {
        let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u9", "kind": {"group": "", "version": "v1", "kind": "X"},
                        "resource": {"group": "", "version": "v1", "resource": resource},
                        "subResource": sub, "operation": op, "object": {"anything": [1, 2]}}});
        let (status, value) = post_json(router(state.clone()), &body).await;
        assert_eq!(status, StatusCode::OK, "{resource}/{sub} {op}");
        assert_eq!(value["response"]["allowed"], true);
        assert_eq!(value["response"]["uid"], "u9");
        assert!(value["response"].get("patch").is_none());
    }
    // Pods of another API group are not pods.
    let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "resource": {"group": "example.com", "resource": "pods"}, "operation": "CREATE",
                    "object": {"spec": {"volumes": 7}}}});
    let (status, _) = post_json(router(state), &body).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn pods_without_claims_are_allowed_even_before_sync() {
    let (state, _w) = unsynced_state();
    let (status, value) = post_json(
        router(state.clone()),
        &pod_review(pod_json("p", Some("n"), None), false),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(value["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(value["kind"], "AdmissionReview");
    assert_eq!(value["response"]["allowed"], true);
    assert_eq!(value["response"]["uid"], "uid-1");
    assert_eq!(
        state
            .metrics
            .requests(Operation::PodCreate, RequestOutcome::Allowed),
        1
    );
    // With claims, an unsynced cache admits with a warning rather than guessing, counted under the
    // operation it would have been.
    let (_, value) = post_json(
        router(state.clone()),
        &pod_review(pod_json("p", Some("n"), Some("c1")), false),
    )
    .await;
    assert_eq!(value["response"]["allowed"], true);
    assert!(
        value["response"]["warnings"][0]
            .as_str()
            .expect("warning")
            .contains("not synced")
    );
    assert_eq!(
        state
            .metrics
            .requests(Operation::PodCreateNodeName, RequestOutcome::Allowed),
        1
    );
}

#[tokio::test]
async fn definite_conflicts_are_denied_with_the_scheduler_reason() {
    let state = state_with(volumes());
    let (status, value) = post_json(
        router(state.clone()),
        &pod_review(pod_json("p", Some("node-c"), Some("c1")), false),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(value["response"]["allowed"], false);
    assert_eq!(value["response"]["status"]["code"], 403);
    let message = value["response"]["status"]["message"].as_str().expect("message");
    assert!(message.contains(ERR_REASON_BIND_CONFLICT), "{message}");
    assert_eq!(
        state
            .metrics
            .requests(Operation::PodCreateNodeName, RequestOutcome::Denied),
        1
    );

    // The same through pods/binding: the pod is read from the cache... or, when absent, from the API,
    // which here is unreachable: the binding is admitted with a warning, never crashes.
    let (status, value) = post_json(router(state), &binding_review("unknown", "node-c")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(value["response"]["allowed"], true);
}

#[tokio::test]
async fn dry_run_decides_without_writing() {
    let state = state_with(volumes());
    // A write is needed (bind pv-a to c1). The client cannot reach any server, so a write attempt would
    // fail and deny the pod; dry-run must answer from the decision alone.
    let (status, value) = post_json(
        router(state.clone()),
        &pod_review(pod_json("p", Some("node-a"), Some("c1")), true),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(value["response"]["allowed"], true, "{value}");
    assert!(value["response"].get("warnings").is_none(), "{value}");
    assert_eq!(state.metrics.bindings(), 0);

    // Not dry-run: the write is attempted, fails, and the pod is denied with the cause (fail closed
    // only for a pod that would otherwise wait forever).
    let (status, value) = post_json(
        router(state.clone()),
        &pod_review(pod_json("p", Some("node-a"), Some("c1")), false),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(value["response"]["allowed"], false, "{value}");
    let message = value["response"]["status"]["message"].as_str().expect("message");
    assert!(message.starts_with("volume pre-binding failed"), "{message}");
}

#[tokio::test]
async fn admin_port_reports_health_readiness_and_metrics() {
    let (state, mut writers) = unsynced_state();
    let get = |path: &'static str, state| async move {
        let response = admin_router(state)
            .oneshot(Request::get(path).body(Body::empty()).expect("request"))
            .await
            .expect("infallible");
        let status = response.status();
        let bytes = response.into_body().collect().await.expect("body").to_bytes();
        (status, String::from_utf8_lossy(&bytes).into_owned())
    };
    assert_eq!(get("/healthz", state.clone()).await.0, StatusCode::OK);
    assert_eq!(
        get("/readyz", state.clone()).await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    state.cache.fill(&mut writers, ClusterObjects::default());
    assert_eq!(get("/readyz", state.clone()).await.0, StatusCode::OK);
    let _ = post_json(
        router(state.clone()),
        &pod_review(pod_json("p", None, None), false),
    )
    .await;
    let (status, text) = get("/metrics", state.clone()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        text.contains("sched_webhook_requests_total{operation=\"pod_create\",outcome=\"allowed\"} 1"),
        "{text}"
    );
    assert!(text.contains("sched_webhook_request_duration_seconds_count 1"));
    assert!(text.contains("sched_webhook_cache_ready 1"));
    // Only POST /mutate exists on the webhook port.
    let response = router(state)
        .oneshot(Request::get("/mutate").body(Body::empty()).expect("request"))
        .await
        .expect("infallible");
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn no_write_starts_once_the_api_servers_timeout_is_near() {
    let state = state_with(volumes());
    // The API server's `timeout` parameter, already used up: the plan (bind pv-a to c1) does not start,
    // and the pod is answered as a failed plan (denied, for a spec.nodeName pod) naming the cause. An
    // attempted write would instead fail on the unreachable client with a connection error.
    let body = pod_review(pod_json("p", Some("node-a"), Some("c1")), false).to_string();
    let (status, value) = send_to(
        router(state.clone()),
        "/mutate?timeout=1ms",
        Some("application/json"),
        body.clone(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(value["response"]["allowed"], false, "{value}");
    let message = value["response"]["status"]["message"].as_str().expect("message");
    assert_eq!(
        message,
        "volume pre-binding failed: out of time after 0 attempt(s)"
    );

    // With time to spare the write is attempted (and fails here on the unreachable client).
    let (_, value) = send_to(
        router(state),
        "/mutate?timeout=30s",
        Some("application/json"),
        body,
    )
    .await;
    let message = value["response"]["status"]["message"].as_str().expect("message");
    assert!(
        message.starts_with("volume pre-binding failed: failed to"),
        "{message}"
    );
}
