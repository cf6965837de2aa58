//! Shared by the router and TLS tests: an [`AppState`] over a filled cache and a client whose writes
//! fail (nothing listens at its address), and AdmissionReview bodies.

#![allow(dead_code)] // Each test binary uses its own subset.

use std::sync::Arc;

use sched_core::ClusterObjects;
use sched_core::engine::{SchedulerConfig, in_tree_registry};
use sched_webhook::cache::{Cache, Writers};
use sched_webhook::server::AppState;
use serde_json::{Value, json};

/// A client pointed at a closed port on loopback: any write fails at once.
pub fn dead_client() -> kube::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = kube::Config::new("http://127.0.0.1:9".parse().expect("uri"));
    kube::Client::try_from(config).expect("client")
}

/// A state over an empty, not yet synced cache.
pub fn unsynced_state() -> (Arc<AppState>, Writers) {
    let (cache, writers) = Cache::new(SchedulerConfig::default_config(&in_tree_registry()));
    (Arc::new(AppState::new(cache, dead_client())), writers)
}

/// A state over a cache filled with `objects`.
pub fn state_with(objects: ClusterObjects) -> Arc<AppState> {
    let (cache, mut writers) = Cache::new(SchedulerConfig::default_config(&in_tree_registry()));
    cache.fill(&mut writers, objects);
    // The writers must outlive nothing: the filled stores keep their contents.
    drop(writers);
    Arc::new(AppState::new(cache, dead_client()))
}

/// An AdmissionReview for a pod CREATE.
pub fn pod_review(pod: Value, dry_run: bool) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "uid-1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": pod["metadata"]["name"].clone(),
            "namespace": "ns",
            "operation": "CREATE",
            "userInfo": {"username": "tester"},
            "object": pod,
            "dryRun": dry_run,
        }
    })
}

/// An AdmissionReview for a pods/binding CREATE.
pub fn binding_review(pod: &str, node: &str) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "uid-2",
            "kind": {"group": "", "version": "v1", "kind": "Binding"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "binding",
            "name": pod,
            "namespace": "ns",
            "operation": "CREATE",
            "object": {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod, "namespace": "ns"},
                       "target": {"kind": "Node", "name": node}},
            "dryRun": false,
        }
    })
}

/// A pod with one container and, optionally, a node and a claim.
pub fn pod_json(name: &str, node: Option<&str>, claim: Option<&str>) -> Value {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    });
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
    }
    if let Some(claim) = claim {
        pod["spec"]["volumes"] = json!([{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]);
    }
    pod
}
