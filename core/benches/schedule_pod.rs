//! Evaluating one pod against a generated 5,000-node / 150,000-pod cluster with the default profile,
//! scanning every node (explain's full scan), for three kinds of pod: plain requests, required pod
//! anti-affinity, and topology spread.
//!
//! Baseline in the same run: the same pod against the first 500 nodes only — the 10 % kube-scheduler
//! samples at 5,000 nodes — so the figures read as "full scan costs N× a kube-scheduler-sized scan",
//! which stays meaningful on a noisy shared machine. Memory: RSS growth from building the Snapshot.
//!
//! Sizes: SCHED_BENCH_NODES / SCHED_BENCH_PODS. Run:
//! `cargo bench -p sched-core --features testing --bench schedule_pod`

use std::sync::Arc;
use std::time::Instant;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::{Affinity, Pod, PodAffinityTerm, PodAntiAffinity, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use sched_core::engine::{Framework, ScheduleOptions, SchedulerConfig, in_tree_registry, schedule};
use sched_core::snapshot::{ClusterObjects, PodInfo, Snapshot};
use sched_core::testing::generate::{GenerateParams, generate};
use sched_core::testing::pod;

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn pods_to_evaluate() -> Vec<(&'static str, Pod)> {
    let selector = |app: &str| LabelSelector {
        match_labels: Some([("app".to_string(), app.to_string())].into()),
        ..Default::default()
    };
    let anti = pod("anti")
        .cpu("250m")
        .memory("256Mi")
        .label("app", "bench-anti")
        .affinity(Affinity {
            pod_anti_affinity: Some(PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                    label_selector: Some(selector("app-1")),
                    topology_key: "kubernetes.io/hostname".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        })
        .obj();
    let spread = pod("spread")
        .cpu("250m")
        .memory("256Mi")
        .label("app", "app-1")
        .with(|p| {
            p.spec.as_mut().unwrap().topology_spread_constraints = Some(vec![TopologySpreadConstraint {
                max_skew: 1,
                topology_key: "topology.kubernetes.io/zone".into(),
                when_unsatisfiable: "DoNotSchedule".into(),
                label_selector: Some(selector("app-1")),
                ..Default::default()
            }])
        })
        .obj();
    vec![
        ("plain", pod("plain").cpu("500m").memory("512Mi").obj()),
        ("anti-affinity", anti),
        ("topology-spread", spread),
    ]
}

fn bench(c: &mut Criterion) {
    let nodes = env_usize("SCHED_BENCH_NODES", 5_000);
    let pods = env_usize("SCHED_BENCH_PODS", 150_000);
    let objects = generate(&GenerateParams::new(nodes, pods, 3, 7));
    let rss_before = status_kib("VmRSS:");
    let start = Instant::now();
    let full = Arc::new(Snapshot::new(objects.clone()));
    let build = start.elapsed();
    let rss_after = status_kib("VmRSS:");
    eprintln!(
        "snapshot: {nodes} nodes, {pods} pods; Snapshot::new {build:.2?}; RSS +{:.0} MiB (total {:.0} MiB)",
        (rss_after.saturating_sub(rss_before)) as f64 / 1024.0,
        rss_after as f64 / 1024.0
    );
    // The kube-scheduler-sized baseline: the nodes it would sample at this size, with their pods.
    let sampled_nodes = sched_core::schedule::num_feasible_nodes_to_find(0, nodes);
    let keep: std::collections::HashSet<String> = objects
        .nodes
        .iter()
        .take(sampled_nodes)
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    let sampled = Arc::new(Snapshot::new(ClusterObjects {
        nodes: objects.nodes.iter().take(sampled_nodes).cloned().collect(),
        pods: objects
            .pods
            .iter()
            .filter(|p| {
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_ref())
                    .is_some_and(|n| keep.contains(n))
            })
            .cloned()
            .collect(),
        ..objects.clone()
    }));
    drop(objects);

    let registry = in_tree_registry();
    let config = SchedulerConfig::default_config(&registry);
    let profile = config.profile("default-scheduler").expect("default profile");
    let fwk_full = Framework::new(profile, &registry, full).expect("framework");
    let fwk_sampled = Framework::new(profile, &registry, sampled).expect("framework");
    let options = ScheduleOptions {
        global_percentage_of_nodes_to_score: 0,
        trace_filters: true,
        stop_at_first_feasible: false,
        sample_from: None,
        record_nodes: true,
    };

    let mut group = c.benchmark_group("schedule_pod");
    group.sample_size(20);
    for (name, p) in pods_to_evaluate() {
        let info = PodInfo::new(p);
        let e = schedule(&fwk_full, &info, options);
        eprintln!(
            "{name}: outcome {:?}, {} feasible, selected {:?}",
            e.outcome,
            e.feasible.len(),
            e.selected
        );
        group.bench_with_input(BenchmarkId::new("full_scan", name), &info, |b, info| {
            b.iter(|| schedule(&fwk_full, info, options))
        });
        group.bench_with_input(
            BenchmarkId::new(format!("baseline_{sampled_nodes}_nodes"), name),
            &info,
            |b, info| b.iter(|| schedule(&fwk_sampled, info, options)),
        );
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
