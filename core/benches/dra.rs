//! One GPU pod with two ResourceClaims evaluated against a generated 1,000-node cluster with 8 GPUs
//! per node (a DRA driver's ResourceSlice per node) of which half are allocated, with the default
//! profile, scanning every node — next to the same pod without claims in the same run, so the
//! figure reads as "DynamicResources costs N× a pod without claims" on a noisy shared machine.
//!
//! Sizes: SCHED_BENCH_NODES (1,000), SCHED_BENCH_PODS (30 per node). Run:
//! `cargo bench -p sched-core --features testing --bench dra`

use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::{Pod, PodResourceClaim};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use sched_core::engine::{Framework, ScheduleOptions, SchedulerConfig, in_tree_registry, schedule};
use sched_core::explain::Outcome;
use sched_core::snapshot::{PodInfo, Snapshot};
use sched_core::testing::generate::{GenerateParams, generate};
use sched_core::testing::pod;
use serde_json::json;

const DRIVER: &str = "gpu.example.com";
const DEVICES_PER_NODE: usize = 8;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn from_json<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).expect("bench object JSON")
}

/// A slice of 8 GPUs for `node` (even devices 40Gi, odd ones 80Gi) and a claim holding half of them.
fn node_devices(node: &str, index: usize) -> (ResourceSlice, ResourceClaim) {
    let devices: Vec<_> = (0..DEVICES_PER_NODE)
        .map(|d| {
            json!({"name": format!("gpu-{d}"),
                   "attributes": {"model": {"string": if d % 2 == 0 { "a100" } else { "h100" }}},
                   "capacity": {"memory": {"value": if d % 2 == 0 { "40Gi" } else { "80Gi" }}}})
        })
        .collect();
    let slice = from_json(json!({
        "metadata": {"name": format!("{node}-gpus")},
        "spec": {"driver": DRIVER, "nodeName": node, "devices": devices,
                 "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}},
    }));
    let results: Vec<_> = (0..DEVICES_PER_NODE / 2)
        .map(|d| json!({"request": "gpus", "driver": DRIVER, "pool": node, "device": format!("gpu-{d}")}))
        .collect();
    let claim = from_json(json!({
        "metadata": {"name": format!("held-{index}"), "namespace": "default", "uid": format!("held-{index}")},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": DRIVER, "count": 4}}]}},
        "status": {"allocation": {"devices": {"results": results}},
                   "reservedFor": [{"resource": "pods", "name": format!("holder-{index}"), "uid": format!("holder-{index}")}]},
    }));
    (slice, claim)
}

/// The pending pod's two claims: two 80Gi GPUs, and one a100.
fn pending_claims() -> Vec<ResourceClaim> {
    let claim = |name: &str, count: i64, expression: &str| {
        from_json(json!({
            "metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                "deviceClassName": DRIVER, "count": count,
                "selectors": [{"cel": {"expression": expression}}]}}]}},
        }))
    };
    vec![
        claim(
            "train-big",
            2,
            r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("80Gi")) >= 0"#,
        ),
        claim(
            "train-small",
            1,
            r#"device.attributes["gpu.example.com"].model == "a100""#,
        ),
    ]
}

fn pods() -> (Pod, Pod) {
    let plain = pod("gpu-job").cpu("2").memory("4Gi").obj();
    let mut with_claims = plain.clone();
    with_claims.spec.as_mut().expect("spec").resource_claims = Some(
        ["train-big", "train-small"]
            .iter()
            .map(|c| PodResourceClaim {
                name: c.to_string(),
                resource_claim_name: Some(c.to_string()),
                ..Default::default()
            })
            .collect(),
    );
    (plain, with_claims)
}

fn bench(c: &mut Criterion) {
    let nodes = env_usize("SCHED_BENCH_NODES", 1_000);
    let pods_total = env_usize("SCHED_BENCH_PODS", nodes * 30);
    let mut objects = generate(&GenerateParams::new(nodes, pods_total, 3, 7));
    let node_names: Vec<String> = objects
        .nodes
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    for (i, node) in node_names.iter().enumerate() {
        let (slice, claim) = node_devices(node, i);
        objects.resource_slices.push(slice);
        objects.resource_claims.push(claim);
    }
    objects.resource_claims.extend(pending_claims());
    objects.device_classes.push(from_json::<DeviceClass>(json!({
        "metadata": {"name": DRIVER},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}]},
    })));
    let snapshot = Arc::new(Snapshot::new(objects));

    let registry = in_tree_registry();
    let config = SchedulerConfig::default_config(&registry);
    let profile = config.profile("default-scheduler").expect("default profile");
    let fwk = Framework::new(profile, &registry, snapshot).expect("framework");
    let options = ScheduleOptions {
        global_percentage_of_nodes_to_score: 100,
        trace_filters: true,
        stop_at_first_feasible: false,
        sample_from: None,
        record_nodes: true,
    };
    let (plain, with_claims) = pods();
    let plain = PodInfo::new(plain);
    let with_claims = PodInfo::new(with_claims);
    for (name, info) in [("without claims", &plain), ("with 2 claims", &with_claims)] {
        let e = schedule(&fwk, info, options);
        assert_eq!(e.outcome, Outcome::Scheduled, "{name}: {}", e.message);
        eprintln!(
            "{name}: {} feasible of {nodes}, selected {:?}, devices {:?}",
            e.feasible.len(),
            e.selected.first(),
            e.claim_allocations
                .iter()
                .flat_map(|c| c.devices.iter().map(|d| d.device.as_str()))
                .collect::<Vec<_>>()
        );
    }

    let mut group = c.benchmark_group("dra");
    group.sample_size(20);
    group.bench_with_input(
        BenchmarkId::new("full_scan", "without_claims"),
        &plain,
        |b, info| b.iter(|| schedule(&fwk, info, options)),
    );
    group.bench_with_input(
        BenchmarkId::new("full_scan", "with_2_claims"),
        &with_claims,
        |b, info| b.iter(|| schedule(&fwk, info, options)),
    );
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
