//! Times the phases of one pod's evaluation on a generated cluster, for profiling
//! (`perf record` on this binary sees only the evaluation loop after the `ready` line).
//!
//! `cargo run --release -p sched-core --features testing --example profile_schedule -- [nodes] [pods] [iterations] [pending] [namespaces=N]`
//!
//! With `pending` it evaluates the generated cluster's own pending pods (affinities, spread, PVCs:
//! the shapes `sched-bench` gives both schedulers) instead of one plain pod, each once per iteration.
//! `namespaces=N` puts the workloads in N namespaces (default: one per 1,500 pods).

use std::sync::Arc;
use std::time::Instant;

use sched_core::engine::{Framework, ScheduleOptions, SchedulerConfig, in_tree_registry, schedule};
use sched_core::snapshot::{PodInfo, Snapshot};
use sched_core::testing::generate::{GenerateParams, generate_pruned};
use sched_core::testing::pod;

// kubectl-sched's allocator: with the system allocator the profile is mostly malloc.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (nodes, pods, iterations) = (
        args.first().copied().unwrap_or(5_000),
        args.get(1).copied().unwrap_or(150_000),
        args.get(2).copied().unwrap_or(50),
    );
    let start = Instant::now();
    let mut params = GenerateParams::new(nodes, pods, 3, 7);
    params.namespaces = std::env::args().find_map(|a| a.strip_prefix("namespaces=")?.parse().ok());
    let objects = generate_pruned(&params);
    eprintln!("generated in {:.2?}", start.elapsed());
    let pending: Vec<_> = if std::env::args().any(|a| a == "pending") {
        let unbound =
            |p: &&k8s_openapi::api::core::v1::Pod| p.spec.as_ref().is_some_and(|s| s.node_name.is_none());
        objects.pods.iter().filter(unbound).take(200).cloned().collect()
    } else {
        Vec::new()
    };
    let start = Instant::now();
    let snapshot = Arc::new(Snapshot::new(objects));
    eprintln!("Snapshot::new in {:.2?}", start.elapsed());
    let registry = in_tree_registry();
    let config = SchedulerConfig::default_config(&registry);
    let fwk = Framework::new(config.profile("default-scheduler").unwrap(), &registry, snapshot).unwrap();
    let infos: Vec<PodInfo> = if pending.is_empty() {
        vec![PodInfo::new(pod("plain").cpu("500m").memory("512Mi").obj())]
    } else {
        pending.into_iter().map(PodInfo::new).collect()
    };
    eprintln!("{} pod(s) per iteration", infos.len());
    // explain (traced filters, every node recorded), then without the traces, then as a batch
    // simulation's cycle (no per-node records).
    for (trace_filters, record_nodes) in [(true, true), (false, true), (false, false)] {
        let options = ScheduleOptions {
            global_percentage_of_nodes_to_score: 0,
            trace_filters,
            stop_at_first_feasible: false,
            sample_from: None,
            record_nodes,
        };
        eprintln!("ready (trace_filters={trace_filters}, record_nodes={record_nodes})");
        let start = Instant::now();
        let cpu_start = process_cpu_seconds();
        for _ in 0..iterations {
            for info in &infos {
                std::hint::black_box(schedule(&fwk, info, options));
            }
        }
        let cycles = (iterations * infos.len()) as f64;
        eprintln!(
            "per pod: {:.2?} wall, {:.2} ms CPU (all threads; the figure to compare on a busy machine)",
            start.elapsed() / cycles as u32,
            (process_cpu_seconds() - cpu_start) * 1000.0 / cycles
        );
    }
}

/// User + system CPU time of this process so far (`/proc/self/stat`, clock ticks of 1/100 s): wall
/// time means little on a shared machine.
fn process_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may contain spaces) start at ") ".
    let fields: Vec<&str> = stat
        .rsplit_once(") ")
        .map(|(_, r)| r)
        .unwrap_or("")
        .split(' ')
        .collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    (ticks(11) + ticks(12)) / 100.0
}
