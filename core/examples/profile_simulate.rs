//! Times a batch simulation on a generated cluster in memory (no file loading): the per-pod cost of
//! `kubectl sched simulate`, for profiling.
//!
//! Run: `cargo run --release -p sched-core --features testing --example profile_simulate -- \
//!       [NODES [PODS [PENDING_PERCENT [all]]]]` (default 5000 100000 10).

use std::time::Instant;

use sched_core::simulate::{PodOutcome, Simulation, SimulationOptions};
use sched_core::testing::generate::{GenerateParams, generate};
use sched_core::{Engine, Snapshot};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |i: usize, default: usize| args.get(i).and_then(|v| v.parse().ok()).unwrap_or(default);
    let mut params = GenerateParams::new(number(0, 5_000), number(1, 100_000), 3, 42);
    params.pending_percent = number(2, 10) as u64;
    let all_nodes = args.get(3).is_some_and(|a| a == "all");
    let snapshot = Snapshot::new(generate(&params));
    let queued = snapshot.pending_pods.len();
    let engine = Engine::default();
    let options = SimulationOptions {
        all_nodes,
        ..SimulationOptions::default()
    };
    let mut simulation = Simulation::new(&engine, snapshot, options);
    let started = Instant::now();
    let report = simulation.run(&mut |_| {}).expect("runs");
    let seconds = started.elapsed().as_secs_f64();
    let scheduled = report
        .pods
        .iter()
        .filter(|p| p.outcome == PodOutcome::Scheduled)
        .count();
    println!(
        "{} nodes, {queued} pods queued ({}): {scheduled} scheduled, {} cycles, {} victims in {seconds:.2} s = {:.0} pods/s",
        params.nodes,
        if all_nodes { "every node" } else { "sampled" },
        report.cycles,
        report.victims.len(),
        queued as f64 / seconds
    );
    std::mem::forget(simulation);
}
