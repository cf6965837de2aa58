//! Times the phases of one pod's evaluation on a generated cluster, for profiling
//! (`perf record` on this binary sees only the evaluation loop after the `ready` line).
//!
//! `cargo run --release -p sched-core --features testing --example profile_schedule -- [nodes] [pods] [iterations]`

use std::sync::Arc;
use std::time::Instant;

use sched_core::framework::profile::SchedulerConfig;
use sched_core::framework::runtime::Framework;
use sched_core::plugins::in_tree_registry;
use sched_core::schedule::{ScheduleOptions, schedule};
use sched_core::snapshot::{PodInfo, Snapshot};
use sched_core::testing::generate::{GenerateParams, generate_pruned};
use sched_core::testing::pod;

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (nodes, pods, iterations) = (
        args.first().copied().unwrap_or(5_000),
        args.get(1).copied().unwrap_or(150_000),
        args.get(2).copied().unwrap_or(50),
    );
    let start = Instant::now();
    let objects = generate_pruned(&GenerateParams::new(nodes, pods, 3, 7));
    eprintln!("generated in {:.2?}", start.elapsed());
    let start = Instant::now();
    let snapshot = Arc::new(Snapshot::new(objects));
    eprintln!("Snapshot::new in {:.2?}", start.elapsed());
    let registry = in_tree_registry();
    let config = SchedulerConfig::default_config(&registry);
    let fwk = Framework::new(config.profile("default-scheduler").unwrap(), &registry, snapshot).unwrap();
    let info = PodInfo::new(pod("plain").cpu("500m").memory("512Mi").obj());
    for trace_filters in [true, false] {
        let options = ScheduleOptions {
            global_percentage_of_nodes_to_score: 0,
            trace_filters,
            stop_at_first_feasible: false,
            sample_from: None,
        };
        eprintln!("ready (trace_filters={trace_filters})");
        let start = Instant::now();
        for _ in 0..iterations {
            std::hint::black_box(schedule(&fwk, &info, options));
        }
        eprintln!("per pod: {:.2?}", start.elapsed() / iterations as u32);
    }
}
