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
use sched_core::testing::{node, pv, pvc, storage_class};
use sched_core::volumes::{ERR_REASON_BIND_CONFLICT, NOT_SUPPORTED_PROVISIONER};
use sched_webhook::admission::Operation;
use sched_webhook::metrics::RequestOutcome;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sched_core::engine::{SchedulerConfig, in_tree_registry};
use sched_webhook::admission::ADMITTED_BY_KEY;
use sched_webhook::cache::Cache;
use sched_webhook::server::{AppState, Limits, MAX_CATCH_UP_READS, router};
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
    let (cache, _w) = sched_webhook::cache::Cache::new(sched_core::engine::SchedulerConfig::default_config(
        &sched_core::engine::in_tree_registry(),
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
async fn admission_never_writes_and_stamps_pods_with_work_for_the_controller() {
    let state = state_with(volumes());
    // A write is needed once the pod is stored (bind pv-a to c1). The client cannot reach any server:
    // an attempted write would fail and show in the answer. Admission answers from the decision alone.
    for dry_run in [true, false] {
        let (status, value) = post_json(
            router(state.clone()),
            &pod_review(pod_json("p", Some("node-a"), Some("c1")), dry_run),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(value["response"]["allowed"], true, "{value}");
        assert!(value["response"].get("warnings").is_none(), "{value}");
        let patch = value["response"]["patch"].as_str().map(|p| {
            use base64::Engine;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(p)
                .expect("base64");
            serde_json::from_slice::<Value>(&bytes).expect("json")
        });
        // The request's uid on the pod, for the controller's write log.
        assert_eq!(
            patch,
            Some(json!([{"op": "add", "path": "/metadata/annotations",
                         "value": {ADMITTED_BY_KEY: "uid-1"}}])),
            "dry run {dry_run}: {value}"
        );
    }
    assert_eq!(state.metrics.bindings(), 0);
}

#[tokio::test]
async fn saturated_replicas_allow_with_a_warning_instead_of_waiting() {
    let (cache, mut writers) = Cache::new(SchedulerConfig::default_config(&in_tree_registry()));
    cache.fill(&mut writers, volumes());
    let limits = Limits {
        max_decisions: 1,
        max_decision_bytes: 64 * 1024,
        max_claims: 2,
        ..Limits::default()
    };
    let state = Arc::new(AppState::with_limits(cache, dead_client(), limits));
    // Hold the only decision slot with a request that waits on a catch-up read (claim c9 is not cached)
    // against a server that accepts and never answers.
    let (status, value) = post_json(
        router(state.clone()),
        &pod_review(pod_json("p", Some("node-a"), Some("c1")), false),
    )
    .await;
    assert_eq!(
        (status, &value["response"]["allowed"]),
        (StatusCode::OK, &json!(true))
    );
    assert_eq!(state.metrics.requests_shed(), 0, "a free slot is used");
    // A pod whose decoded size alone is over the budget (20 volumes of 3.3 KB, twice) is not decoded.
    let mut many = pod_json("many", Some("node-a"), Some("c1"));
    many["spec"]["volumes"]
        .as_array_mut()
        .expect("volumes")
        .extend((0..20).map(|i| json!({"name": format!("e{i}"), "emptyDir": {}})));
    let (_, value) = post_json(router(state.clone()), &pod_review(many, false)).await;
    assert_eq!(value["response"]["allowed"], true, "{value}");
    let warning = value["response"]["warnings"][0].as_str().expect("warning");
    assert!(
        warning.contains("too large") && warning.contains("21 volumes"),
        "{warning}"
    );

    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    let url = format!("http://{}", silent.local_addr().expect("addr"));
    let hanging = kube::Client::try_from(kube::Config::new(url.parse().expect("uri"))).expect("client");
    let (cache, mut writers) = Cache::new(SchedulerConfig::default_config(&in_tree_registry()));
    cache.fill(&mut writers, volumes());
    let state = Arc::new(AppState::with_limits(cache, hanging, limits));
    let held = tokio::spawn(send_to(
        router(state.clone()),
        "/mutate?timeout=2s",
        Some("application/json"),
        pod_review(pod_json("held", Some("node-a"), Some("c9")), false).to_string(),
    ));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let (status, value) = post_json(
        router(state.clone()),
        &pod_review(pod_json("p", Some("node-a"), Some("c1")), false),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(value["response"]["allowed"], true, "{value}");
    let warning = value["response"]["warnings"][0].as_str().expect("warning");
    assert!(warning.contains("saturated"), "{warning}");
    assert!(started.elapsed() < Duration::from_millis(500), "shed at once");
    assert_eq!(state.metrics.requests_shed(), 1);
    // The held request's catch-up read stops at its deadline (1.5 s of the 2 s), and it is answered.
    let (status, value) = tokio::time::timeout(Duration::from_secs(5), held)
        .await
        .expect("answered within the API server's timeout")
        .expect("task");
    assert_eq!(
        (status, &value["response"]["allowed"]),
        (StatusCode::OK, &json!(true)),
        "{value}"
    );
    drop(silent);
}

#[tokio::test]
async fn pods_with_more_claims_than_considered_are_not_decoded_or_read() {
    let state = state_with(volumes());
    let limit = state.limits().max_claims;
    let volumes: Vec<Value> = (0..limit + 1)
        .map(|i| json!({"name": format!("v{i}"), "persistentVolumeClaim": {"claimName": format!("missing-{i}")}}))
        .collect();
    let mut pod = pod_json("p", Some("node-a"), None);
    pod["spec"]["volumes"] = json!(volumes);
    let (status, value) = post_json(router(state.clone()), &pod_review(pod, false)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(value["response"]["allowed"], true, "{value}");
    let warning = value["response"]["warnings"][0].as_str().expect("warning");
    assert!(warning.contains(&format!("{} claims", limit + 1)), "{warning}");
    assert_eq!(state.metrics.catch_up_reads(), 0, "no claim read");

    // Under the cap, missing claims are read, but never more than MAX_CATCH_UP_READS per request.
    let volumes: Vec<Value> = (0..limit)
        .map(|i| json!({"name": format!("v{i}"), "persistentVolumeClaim": {"claimName": format!("missing-{i}")}}))
        .collect();
    let mut pod = pod_json("q", Some("node-a"), None);
    pod["spec"]["volumes"] = json!(volumes);
    let (_, value) = post_json(router(state.clone()), &pod_review(pod, false)).await;
    assert_eq!(value["response"]["allowed"], true, "{value}");
    assert_eq!(state.metrics.catch_up_reads(), MAX_CATCH_UP_READS as u64);
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
