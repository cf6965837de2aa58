//! The preemption dry run for one preemptor at 5,000 nodes / 150,000 pods, every node searched
//! (`kubectl sched preempt`'s search; kube-scheduler samples candidates instead).
//!
//! Baseline in the same run: the scheduling cycle of the same pod over the same snapshot (every node
//! filtered and scored), so the figure reads "a full preemption search costs N× one full scheduling
//! cycle", which stays meaningful on a noisy shared machine.
//!
//! The preemptor (7.9 cpu, top priority, tolerating every taint) does not fit on ~4,200 of the
//! generated nodes, all of them potential nodes with ~30 victims each.
//!
//! Sizes: SCHED_BENCH_NODES / SCHED_BENCH_PODS. Run:
//! `cargo bench -p sched-core --features testing --bench preemption`

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use sched_core::engine::{
    DryRunOptions, Framework, ScheduleOptions, SchedulerConfig, dry_run, in_tree_registry, schedule_cycle,
};
use sched_core::snapshot::Snapshot;
use sched_core::testing::generate::{GenerateParams, generate};
use sched_core::testing::{pod, toleration};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn bench(c: &mut Criterion) {
    let nodes = env_usize("SCHED_BENCH_NODES", 5_000);
    let pods = env_usize("SCHED_BENCH_PODS", 150_000);
    let snapshot = Arc::new(Snapshot::new(generate(&GenerateParams::new(nodes, pods, 3, 1))));
    let registry = in_tree_registry();
    let config = SchedulerConfig::default_config(&registry);
    let profile = config.profile("default-scheduler").expect("default profile");
    let fwk = Framework::new(profile, &registry, snapshot).expect("framework");
    let preemptor = pod("preemptor")
        .cpu("7900m")
        .memory("1Gi")
        .priority(1_000_000_000)
        .toleration(toleration("", "Exists", "", ""))
        .info();
    let options = ScheduleOptions {
        global_percentage_of_nodes_to_score: 0,
        trace_filters: false,
        stop_at_first_feasible: false,
        sample_from: None,
        record_nodes: true,
    };
    let cycle = schedule_cycle(&fwk, &preemptor, options);
    let result = dry_run(
        &fwk,
        &preemptor,
        &cycle.node_statuses,
        &cycle.state,
        &DryRunOptions::default(),
    );
    eprintln!(
        "{nodes} nodes / {pods} pods: {} potential nodes, {} candidates, chosen {:?} with {} victims",
        result.potential_nodes,
        result.candidates.len(),
        result.node,
        result.victims.len()
    );
    assert!(
        result.potential_nodes > 0,
        "the bench needs nodes where preemption can help"
    );

    let mut group = c.benchmark_group("preemption");
    group.sample_size(10);
    group.bench_function("baseline_schedule_cycle", |b| {
        b.iter(|| schedule_cycle(&fwk, &preemptor, options))
    });
    group.bench_function("dry_run_all_nodes", |b| {
        b.iter(|| {
            dry_run(
                &fwk,
                &preemptor,
                &cycle.node_statuses,
                &cycle.state,
                &DryRunOptions::default(),
            )
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
