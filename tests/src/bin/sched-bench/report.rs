//! The benchmark's results and their Markdown rendering (the tables BENCHMARKS.md holds).

use serde::Serialize;

use crate::load::LoadFigures;
use crate::measure::{Runs, SchedulerRun, SchedulerRuns, median, spread};

/// `simulate` runs on one snapshot.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SimulateFigures {
    /// Process wall time per run (reading the file included).
    pub wall_seconds: Vec<f64>,
    /// The simulation proper per run (the report's `millis`).
    pub simulation_seconds: Vec<f64>,
    pub max_rss_mib: Vec<f64>,
    pub pods: usize,
    pub scheduled: usize,
    pub cycles: usize,
    pub evaluated_nodes: u64,
}

impl SimulateFigures {
    fn seconds(&self) -> f64 {
        median(&self.simulation_seconds)
    }

    pub fn pods_per_second(&self) -> f64 {
        self.scheduled as f64 / self.seconds()
    }

    pub fn evaluations_per_second(&self) -> f64 {
        self.evaluated_nodes as f64 / self.seconds()
    }

    /// Milliseconds per scheduling cycle.
    pub fn cycle_ms(&self) -> f64 {
        self.seconds() * 1e3 / self.cycles.max(1) as f64
    }

    fn show_spread(&self) -> String {
        let (lo, hi) = spread(&self.simulation_seconds);
        if self.simulation_seconds.len() > 1 {
            format!(" ({lo:.2}–{hi:.2} s)")
        } else {
            String::new()
        }
    }
}

/// Everything measured at one size.
#[derive(Debug, Clone, Serialize)]
pub struct SizeResult {
    pub nodes: usize,
    pub bound_pods: usize,
    pub batch: usize,
    pub load: LoadFigures,
    pub live: LiveFigures,
    /// Everything after the live path; `None` with `--live-only`.
    pub offline: Option<OfflineFigures>,
}

/// Our commands against the API server, and the floor they share.
#[derive(Debug, Clone, Serialize)]
pub struct LiveFigures {
    /// kube-apiserver serving the pods list alone (`kubectl get --raw`, output discarded).
    pub list_floor: Runs,
    pub explain_live: Runs,
    /// The same in pages of 500 (`--chunk-size 500`).
    pub explain_live_paged: Runs,
    pub preempt: Runs,
}

/// The snapshot file, what runs on it, and kube-scheduler on the batch.
#[derive(Debug, Clone, Serialize)]
pub struct OfflineFigures {
    pub snapshot: Runs,
    pub snapshot_mib: f64,
    pub explain_file: Runs,
    pub sampled: SimulateFigures,
    pub full: SimulateFigures,
    pub scheduler: SchedulerRuns,
}

fn ratio(ours: f64, theirs: f64) -> String {
    format!("{:.2}×", ours / theirs)
}

/// The side-by-side table of one size.
pub fn print_size(r: &SizeResult) {
    println!(
        "\n### {} nodes, {} bound pods, a batch of {} pending pods\n",
        r.nodes, r.bound_pods, r.batch
    );
    println!(
        "Loaded {} objects into kube-apiserver in {:.1} s ({:.0} objects/s, {} failed requests).\n",
        r.load.objects,
        r.load.seconds,
        r.load.objects as f64 / r.load.seconds,
        r.load.failed
    );
    let Some(o) = &r.offline else {
        print_ours_alone(r);
        println!("\n`--live-only`: no snapshot file, simulation or kube-scheduler at this size.");
        return;
    };
    let k = &o.scheduler;
    println!("| measure | kubectl-sched | kube-scheduler | ratio (ours / theirs) |");
    println!("|---|---|---|---|");
    println!(
        "| batch throughput, kube-scheduler's sampling (placed pods/s) | {:.0}{} — {} of {} placed | {:.0}{} — {} of {} bound | {} |",
        o.sampled.pods_per_second(),
        o.sampled.show_spread(),
        o.sampled.scheduled,
        o.sampled.pods,
        k.pods_per_second(),
        k.show_spread(SchedulerRun::pods_per_second, 0),
        k.bound(),
        r.batch,
        ratio(o.sampled.pods_per_second(), k.pods_per_second())
    );
    println!(
        "| node evaluations/s, sampled | {:.0} | {:.0}{} | {} |",
        o.sampled.evaluations_per_second(),
        k.evaluations_per_second(),
        k.show_spread(SchedulerRun::evaluations_per_second, 0),
        ratio(o.sampled.evaluations_per_second(), k.evaluations_per_second())
    );
    println!(
        "| node evaluations/s, ours scanning every node | {:.0} ({:.1} ms per cycle) | {:.0}{} | {} |",
        o.full.evaluations_per_second(),
        o.full.cycle_ms(),
        k.evaluations_per_second(),
        k.show_spread(SchedulerRun::evaluations_per_second, 0),
        ratio(o.full.evaluations_per_second(), k.evaluations_per_second())
    );
    println!(
        "| cold start to the first decision (ours: `explain POD` end to end; kube-scheduler: process start to its first scheduling decision) | {} | {:.2} s{} | {} |",
        r.live.explain_live.show(),
        k.first_decision_seconds(),
        k.show_spread(|r| r.first_decision_seconds, 2),
        ratio(r.live.explain_live.median_seconds(), k.first_decision_seconds())
    );
    println!(
        "| peak RSS (ours: `explain POD`; kube-scheduler: VmHWM after the batch) | {:.0} MiB | {:.0} MiB | {} |",
        r.live.explain_live.median_rss(),
        k.max_rss_mib(),
        ratio(r.live.explain_live.median_rss(), k.max_rss_mib())
    );
    print_ours_alone(r);
    println!(
        "| `simulate --from FILE` (batch, sampled): whole process / simulation | {:.2} s / {:.2} s | {:.0} MiB | — |",
        median(&o.sampled.wall_seconds),
        median(&o.sampled.simulation_seconds),
        median(&o.sampled.max_rss_mib)
    );
    println!(
        "| `simulate --from FILE --all-nodes`: whole process / simulation | {:.2} s / {:.2} s | {:.0} MiB | — |",
        median(&o.full.wall_seconds),
        median(&o.full.simulation_seconds),
        median(&o.full.max_rss_mib)
    );
    println!("\nSnapshot file: {:.0} MiB.", o.snapshot_mib);
}

/// The table of our commands as processes, with the floor and kube-apiserver's CPU.
fn print_ours_alone(r: &SizeResult) {
    println!();
    println!("| ours alone | median (min–max) | peak RSS | kube-apiserver CPU meanwhile |");
    println!("|---|---|---|---|");
    for (what, runs) in [
        (
            "the pods list alone, one request (`kubectl get --raw`, output discarded): the floor",
            &r.live.list_floor,
        ),
        ("`explain POD` against the API server", &r.live.explain_live),
        (
            "`explain POD --chunk-size 500` (pages, as before)",
            &r.live.explain_live_paged,
        ),
        ("`preempt POD` dry run against the API server", &r.live.preempt),
    ]
    .into_iter()
    .chain(r.offline.iter().flat_map(|o| {
        [
            ("`snapshot -A -o FILE.json`", &o.snapshot),
            ("`explain POD --from FILE.json`", &o.explain_file),
        ]
    })) {
        let server = if runs.server_cpu_seconds.is_empty() {
            "—".to_string()
        } else {
            format!("{:.2} s", median(&runs.server_cpu_seconds))
        };
        println!(
            "| {what} | {} | {:.0} MiB | {server} |",
            runs.show(),
            runs.median_rss()
        );
    }
}

/// How each cost grows with the cluster.
pub fn print_scaling(results: &[SizeResult]) {
    println!("\n### Scaling\n");
    println!(
        "| nodes | pods | load | the pods list alone (floor) | `explain POD` live | `explain --from` | `preempt` dry run | full-scan cycle | sampled pods/s (ours / kube-scheduler) | kube-scheduler first decision |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for r in results {
        println!(
            "| {} | {} | {:.1} s | {} | {} | {} | {} | {} | {} | {} |",
            r.nodes,
            r.bound_pods + r.batch,
            r.load.seconds,
            r.live.list_floor.show(),
            r.live.explain_live.show(),
            r.offline.as_ref().map_or("—".into(), |o| o.explain_file.show()),
            r.live.preempt.show(),
            r.offline
                .as_ref()
                .map_or("—".into(), |o| format!("{:.2} ms", o.full.cycle_ms())),
            r.offline.as_ref().map_or("—".into(), |o| format!(
                "{:.0} / {:.0}",
                o.sampled.pods_per_second(),
                o.scheduler.pods_per_second()
            )),
            r.offline.as_ref().map_or("—".into(), |o| format!(
                "{:.2} s",
                o.scheduler.first_decision_seconds()
            )),
        );
    }
}
