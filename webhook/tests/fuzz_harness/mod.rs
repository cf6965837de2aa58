//! What the webhook's fuzz target runs on one input, with its invariants (a broken invariant panics,
//! which libFuzzer reports as a crash). Shared by `fuzz/fuzz_targets/admission_review.rs` (through
//! `#[path]`) and by `tests/fuzz_corpus.rs`, which replays the committed corpus on stable.
//!
//! The input is a request body; it is answered by [`answer`], the pipeline the server runs, with the
//! I/O of no server ([`NoIo`]) against a fixed cluster with claims of every kind PreBind handles, an
//! opted-in namespace and a nominated pod, so that pods CREATE (with `spec.nodeName`, opted in, or
//! neither) and pods/binding reach their decisions. The same body is then answered as a replica whose
//! decision slots are all taken and as one whose caches have not synced, which reach the pipeline's
//! shedding and not-synced steps.

use base64::Engine as _;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use sched_core::ClusterObjects;
use sched_core::testing::{node, pod, pv, pvc, storage_class};
use sched_core::volumes::NOT_SUPPORTED_PROVISIONER;
use sched_webhook::admission::answer::answer;
use sched_webhook::admission::answer::{NOT_SYNCED_WARNING, NoIo, SATURATED_WARNING};
use sched_webhook::admission::review::AdmissionResponse;
use sched_webhook::admission::{ClusterView, OPT_IN_KEY, OPT_IN_VALUE, Operation, StaticView};
use sched_webhook::error::RequestError;
use sched_webhook::server::Limits;

/// The body limit the harness answers with: small, so that the fuzzer reaches it.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

const HOST: &str = "kubernetes.io/hostname";

/// The cluster every input is answered against, as a view.
pub fn view() -> StaticView {
    StaticView::new(objects())
}

/// The cluster every input is answered against. Namespace `ns` is plain, `opt` is opted into
/// admission pre-binding; in each: claims `c1`, `c2` (static, WaitForFirstConsumer), `d1` (dynamic),
/// `b1` (bound to `pv-bound`); pods `p` (on no node, using `c1` and `d1`) and `nominated` (nominated
/// to node-a).
pub fn objects() -> ClusterObjects {
    let local_pv = |name: &str, size: &str, on: &str| {
        pv(name)
            .storage_class("local")
            .capacity(size)
            .phase("Available")
            .access_modes(&["ReadWriteOnce"])
            .node_affinity(HOST, &[on])
            .uid(&format!("uid-{name}"))
            .resource_version("7")
    };
    let mut objects = ClusterObjects {
        nodes: ["node-a", "node-b"]
            .iter()
            .map(|n| node(n).cpu("4").memory("8Gi").label(HOST, n).obj())
            .collect(),
        namespaces: vec![namespace("ns", false), namespace("opt", true)],
        persistent_volumes: vec![
            local_pv("pv-a1", "2Gi", "node-a").obj(),
            local_pv("pv-a2", "1Gi", "node-a").obj(),
            local_pv("pv-b", "1Gi", "node-b").obj(),
            local_pv("pv-bound", "1Gi", "node-b")
                .phase("Bound")
                .claim_ref("ns", "b1", "uid-b1-ns")
                .obj(),
        ],
        storage_classes: vec![
            storage_class("local", NOT_SUPPORTED_PROVISIONER, "WaitForFirstConsumer"),
            storage_class("dyn", "csi.example.com", "WaitForFirstConsumer"),
        ],
        ..ClusterObjects::default()
    };
    for ns in ["ns", "opt"] {
        let claim = |name: &str, class: &str| {
            pvc(name)
                .namespace(ns)
                .storage_class(class)
                .request("1Gi")
                .access_modes(&["ReadWriteOnce"])
                .uid(&format!("uid-{name}-{ns}"))
                .resource_version("3")
        };
        objects.persistent_volume_claims.extend([
            claim("c1", "local").obj(),
            claim("c2", "local").obj(),
            claim("d1", "dyn").obj(),
            claim("b1", "local").volume_name("pv-bound").phase("Bound").obj(),
        ]);
        objects.pods.extend([
            pod("p").namespace(ns).cpu("100m").pvc("c1").pvc("d1").obj(),
            pod("nominated")
                .namespace(ns)
                .cpu("100m")
                .nominated("node-a")
                .obj(),
        ]);
    }
    objects
}

fn namespace(name: &str, opted_in: bool) -> Namespace {
    let labels = opted_in.then(|| [(OPT_IN_KEY.to_string(), OPT_IN_VALUE.to_string())].into());
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels,
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    }
}

/// The limits the harness answers with: the server's defaults but a small body limit.
pub fn limits() -> Limits {
    Limits {
        max_body_bytes: MAX_BODY_BYTES,
        ..Limits::default()
    }
}

/// The answer of the pipeline with `io`. Its futures are ready at once, so no runtime is needed.
pub fn answer_with(io: &NoIo<'_>, data: &[u8]) -> Result<(Operation, AdmissionResponse), RequestError> {
    futures::executor::block_on(answer(io, data, &limits()))
}

/// One request body → the answer. Invariants: no panic; a body over the limit is refused as too
/// large (before it is parsed), and only such a body; an answer echoes the request's uid; a denial
/// carries a 403 status and no patch, an admission no status; a patch is base64 JSONPatch that
/// applies cleanly to the request's object; the review serializes. Then [`unchecked_answers`]' for the
/// same body.
pub fn admission_review(data: &[u8], view: &StaticView) {
    let result = answer_with(&NoIo::new(view), data);
    unchecked_answers(data, view, &result);
    checked_answer(data, result);
}

/// The invariants of a body answered without a check (see [`admission_review`]).
fn checked_answer(data: &[u8], result: Result<(Operation, AdmissionResponse), RequestError>) {
    let limits = limits();
    let too_large = data.len() > limits.max_body_bytes;
    let response = match result {
        Err(RequestError::TooLarge { limit }) => {
            assert!(
                too_large,
                "a body of {} bytes refused as larger than {limit}",
                data.len()
            );
            return;
        }
        Err(e) => {
            assert!(!too_large, "a body over the limit was parsed: {e}");
            let _ = (e.status(), e.to_string());
            return;
        }
        Ok((_, response)) => response,
    };
    assert!(!too_large, "a body over the limit was answered");
    assert!(
        std::str::from_utf8(data).is_ok(),
        "answered a body that is not UTF-8"
    );
    // Some JSON texts do not fit serde_json's Value (numbers past f64's range, lone surrogate
    // escapes) though they are JSON; the webhook's decoder skips such values in fields it does not
    // read (found by fuzzing). For those bodies the request's uid is read as the webhook reads it,
    // and the patch is checked on the bodies Value can hold.
    let body: Option<Value> = serde_json::from_slice(data).ok();
    let request_uid = match &body {
        Some(body) => body["request"]["uid"].as_str().map(str::to_owned),
        None => uid_as_the_webhook_reads_it(data),
    };
    assert_eq!(
        Some(response.uid.as_str()),
        request_uid.as_deref(),
        "the response uid is not the request uid"
    );
    assert!(!response.uid.is_empty(), "answered a request without uid");
    if response.allowed {
        assert!(response.status.is_none(), "an admission carries a status");
    } else {
        let status = response.status.as_ref().expect("a denial carries a status");
        assert_eq!(status.code, 403);
        assert!(!status.message.is_empty(), "a denial says why");
        assert!(response.patch.is_none(), "a denial carries a patch");
    }
    match &response.patch {
        None => assert!(response.patch_type.is_none(), "patchType without a patch"),
        Some(encoded) => {
            assert_eq!(response.patch_type.as_deref(), Some("JSONPatch"));
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .expect("the patch is base64");
            let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("the patch is a JSONPatch");
            if let Some(body) = &body {
                let mut object = body["request"]["object"].clone();
                json_patch::patch(&mut object, &patch)
                    .unwrap_or_else(|e| panic!("the patch does not apply to the request's object: {e}"));
            }
        }
    }
    let review = response.into_review();
    serde_json::to_vec(&review).expect("the review serializes");
}

/// The same body answered by a saturated replica and by one whose caches have not synced, given
/// `synced_result`, the answer of a synced one with a free slot. Invariants: the not-synced replica
/// refuses exactly the bodies the synced one refuses, with the same error (every malformed request is
/// refused whatever the caches hold); what the saturated one refuses the synced one refuses too, with
/// the same error (it stops before decoding the pod, so it refuses no more); what either answers is
/// allowed, unpatched, with the request's uid; a request the synced replica denied or patched was
/// shed by the saturated one with the saturation warning; a request the not-synced replica answered
/// differently from the synced one carries the not-synced warning.
fn unchecked_answers(
    data: &[u8],
    view: &dyn ClusterView,
    synced_result: &Result<(Operation, AdmissionResponse), RequestError>,
) {
    let synced_error = synced_result.as_ref().err().map(ToString::to_string);
    let unsynced = answer_with(&NoIo::new(view).unsynced(), data);
    assert_eq!(
        unsynced.as_ref().err().map(ToString::to_string),
        synced_error,
        "the not-synced replica refuses other bodies than the synced one"
    );
    let saturated = answer_with(&NoIo::new(view).saturated(), data);
    if let Err(e) = &saturated {
        assert_eq!(
            Some(e.to_string()),
            synced_error,
            "the saturated replica refuses a body the synced one does not"
        );
    }
    let Ok((_, synced)) = synced_result else {
        return;
    };
    for (result, warning) in [(unsynced, NOT_SYNCED_WARNING), (saturated, SATURATED_WARNING)] {
        let Ok((_, response)) = result else {
            continue;
        };
        assert_eq!(
            response.uid, synced.uid,
            "the response uid is not the request uid"
        );
        assert!(response.allowed, "denied without a check: {:?}", response.status);
        assert!(response.patch.is_none(), "patched without a check");
        let warned = response.warnings.iter().any(|w| w == warning);
        let checked = !synced.allowed || synced.patch.is_some();
        assert!(
            !checked || warned,
            "a checked request answered without {warning:?}"
        );
        assert!(
            warned || response == *synced,
            "answered unlike the synced replica without {warning:?}"
        );
    }
}

/// `request.uid` read leniently, skipping every other field as the webhook's decoder does.
fn uid_as_the_webhook_reads_it(data: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Review {
        request: Option<Request>,
    }
    #[derive(serde::Deserialize)]
    struct Request {
        #[serde(default)]
        uid: String,
    }
    let review: Review = serde_json::from_slice(data).ok()?;
    review.request.map(|r| r.uid)
}
