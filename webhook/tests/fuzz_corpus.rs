//! Replays the committed `admission_review` fuzz corpus (`fuzz/corpus/admission_review/`, see
//! CONTRIBUTING.md#fuzzing) through the function the fuzz target runs, with the same invariants: every
//! input the fuzzer kept, and every crash it found (kept in the corpus once fixed), is a regression
//! test on stable. The router answers every corpus body as that function does.

mod common;
#[allow(dead_code)]
mod fuzz_harness;

use std::path::PathBuf;
use std::sync::Arc;

use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use sched_core::engine::{SchedulerConfig, in_tree_registry};
use sched_webhook::admission::answer::NoIo;
use sched_webhook::cache::Cache;
use sched_webhook::error::RequestError;
use sched_webhook::server::{AppState, router};

/// The committed corpus files, sorted.
fn corpus() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/admission_review");
    let entries =
        std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("corpus {} is missing: {e}", dir.display()));
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "corpus {} is empty", dir.display());
    files
}

#[test]
fn admission_review_corpus() {
    let view = fuzz_harness::view();
    for file in corpus() {
        let data = std::fs::read(&file).expect("corpus file reads");
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            fuzz_harness::admission_review(&data, &view)
        }));
        assert!(
            result.is_ok(),
            "admission_review: {} breaks an invariant",
            file.display()
        );
    }
}

/// The harness's invariants hold for the reviews that reach every step, denials and patches
/// included, which the mostly malformed corpus has few of.
#[test]
fn well_formed_reviews_keep_the_invariants() {
    let view = fuzz_harness::view();
    for (review, data) in well_formed_reviews() {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            fuzz_harness::admission_review(&data, &view)
        }));
        assert!(result.is_ok(), "admission_review: {review} breaks an invariant");
    }
}

/// The harness's limit is what the server's body limit does: a body one byte over it is refused
/// before it is parsed (it is not even JSON here), one at the limit is parsed.
#[test]
fn oversized_bodies_are_refused_before_parsing() {
    let view = fuzz_harness::view();
    let io = NoIo::new(&view);
    let limits = fuzz_harness::limits();
    let over = vec![b'x'; limits.max_body_bytes + 1];
    assert!(matches!(
        fuzz_harness::answer_with(&io, &over),
        Err(RequestError::TooLarge { .. })
    ));
    let at = vec![b'x'; limits.max_body_bytes];
    assert!(matches!(
        fuzz_harness::answer_with(&io, &at),
        Err(RequestError::Review(_))
    ));
}

/// Reviews that reach each step of the pipeline against the harness's cluster (most corpus inputs
/// are malformed): pods CREATE on a node, opted in, out of scope, naming a claim nobody has; bindings
/// of a cached pod, of a nominated one, and of one no cache holds.
fn well_formed_reviews() -> Vec<(String, Vec<u8>)> {
    let pod = |namespace: &str, node: Option<&str>, claims: &[&str]| {
        let mut pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "new", "namespace": namespace},
            "spec": {"containers": [{"name": "c", "image": "pause"}]},
        });
        if let Some(node) = node {
            pod["spec"]["nodeName"] = json!(node);
        }
        let volumes: Vec<Value> = claims
            .iter()
            .map(|c| json!({"name": c, "persistentVolumeClaim": {"claimName": c}}))
            .collect();
        pod["spec"]["volumes"] = json!(volumes);
        (namespace.to_string(), "", "new".to_string(), pod)
    };
    let binding = |name: &str, node: &str| {
        let object = json!({"apiVersion": "v1", "kind": "Binding",
                            "metadata": {"name": name, "namespace": "ns"},
                            "target": {"kind": "Node", "name": node}});
        ("ns".to_string(), "binding", name.to_string(), object)
    };
    let cases = [
        pod("ns", Some("node-a"), &["c1"]),
        pod("ns", Some("node-a"), &["b1"]),
        pod("ns", Some("node-b"), &["c1", "c2"]),
        pod("ns", Some("node-a"), &["missing"]),
        pod("ns", None, &["c1"]),
        pod("ns", None, &[]),
        pod("opt", None, &["c1", "d1"]),
        binding("p", "node-a"),
        binding("p", "node-b"),
        binding("nominated", "node-b"),
        binding("ghost", "node-a"),
    ];
    cases
        .into_iter()
        .map(|(namespace, sub_resource, name, object)| {
            let review = json!({
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {
                    "uid": "uid-1",
                    "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "resource": {"group": "", "version": "v1", "resource": "pods"},
                    "subResource": sub_resource,
                    "name": name,
                    "namespace": namespace,
                    "operation": "CREATE",
                    "userInfo": {"username": "tester"},
                    "object": object,
                }
            });
            (review.to_string(), review.to_string().into_bytes())
        })
        .collect()
}

/// The router, over a synced cache holding the harness's cluster and with the harness's limits,
/// answers every corpus body with the status and the JSON the fuzzed function gives: what the fuzzer
/// exercises is what serves traffic, and its I/O-free answers are the server's once the watches have
/// delivered everything (the router's catch-up and pod reads go to a closed port and find nothing, as
/// [`NoIo`] does).
#[tokio::test]
async fn the_router_answers_the_corpus_as_the_fuzz_target_does() {
    let (cache, mut writers) = Cache::new(SchedulerConfig::default_config(&in_tree_registry()));
    cache.fill(&mut writers, fuzz_harness::objects());
    let state = Arc::new(AppState::with_limits(
        cache,
        common::dead_client(),
        fuzz_harness::limits(),
    ));
    let view = fuzz_harness::view();
    let io = NoIo::new(&view);
    // How many bodies (corpus and well-formed) were refused, allowed unchanged, denied and patched: the comparison must cover each.
    let mut seen = [0usize; 4];
    let bodies = corpus()
        .into_iter()
        .map(|file| {
            let data = std::fs::read(&file).expect("corpus file reads");
            (file.display().to_string(), data)
        })
        .chain(well_formed_reviews());
    for (name, data) in bodies {
        let (want_status, want_body) = match fuzz_harness::answer_with(&io, &data) {
            Ok((_, response)) => {
                let outcome = match (response.allowed, response.patch.is_some()) {
                    (false, _) => 2,
                    (true, true) => 3,
                    (true, false) => 1,
                };
                seen[outcome] += 1;
                (
                    StatusCode::OK,
                    serde_json::to_vec(&response.into_review()).expect("review serializes"),
                )
            }
            Err(e) => {
                seen[0] += 1;
                (
                    e.status(),
                    serde_json::to_vec(&serde_json::json!({ "error": e.to_string() })).expect("serializes"),
                )
            }
        };
        let request = Request::post("/mutate")
            .header(header::CONTENT_TYPE, "application/json")
            .body(axum::body::Body::from(data))
            .expect("request");
        let response = router(state.clone()).oneshot(request).await.expect("infallible");
        let status = response.status();
        let body = response.into_body().collect().await.expect("body").to_bytes();
        assert_eq!(
            (status, String::from_utf8_lossy(&body)),
            (want_status, String::from_utf8_lossy(&want_body)),
            "{name}: the router answers unlike the fuzz target"
        );
    }
    assert!(
        seen.iter().all(|&n| n > 0),
        "refused, allowed, denied, patched: {seen:?}"
    );
}
