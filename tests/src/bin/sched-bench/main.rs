//! `sched-bench`: kubectl-sched and the real kube-scheduler side by side, on the same generated
//! cluster loaded into the harness's real kube-apiserver + etcd (loopback only), at several sizes.
//!
//! For each size: generate (deterministic from the seed), load, create the pending batch with
//! kube-scheduler stopped; then, on that frozen cluster, time our commands as a user runs them
//! (`explain POD` against the API server, `snapshot`, `explain --from`, `simulate` sampled and
//! full scan, a `preempt` dry run); then start kube-scheduler (`-v=2`, client QPS raised as
//! scheduler_perf does) and read its bindings from its log, `--scheduler-runs` times (the batch deleted
//! and created pending again between runs). Results: a Markdown report on stdout
//! (what BENCHMARKS.md holds) and every figure as JSON in `--out`.
//!
//! `make bench` runs it; see BENCHMARKS.md.

mod load;
mod measure;
mod report;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use clap::Parser;
use e2e::{ControlPlane, Options};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use sched_core::testing::generate::{GenerateParams, Generated};

use load::Cluster;
use measure::{Runs, SchedulerRuns, file, run_command, watch_scheduler};
use report::{LiveFigures, OfflineFigures, SimulateFigures, SizeResult};

/// Side-by-side benchmark of kubectl-sched and kube-scheduler on a real control plane.
#[derive(Debug, Parser)]
struct Args {
    /// Cluster sizes, in nodes.
    #[arg(long, value_delimiter = ',', default_values_t = [100, 1_000, 5_000])]
    nodes: Vec<usize>,
    /// Pods per node (bound and pending together).
    #[arg(long, default_value_t = 30)]
    pods_per_node: usize,
    /// Percent of the pods left pending: the batch both schedulers place.
    #[arg(long, default_value_t = 2)]
    pending_percent: u64,
    /// Runs of each of our commands (medians reported, with the spread).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Runs of kube-scheduler on the batch (recreated pending before each; medians reported).
    #[arg(long, default_value_t = 3)]
    scheduler_runs: usize,
    /// Runs of `simulate --all-nodes` (minutes at 5,000 nodes).
    #[arg(long, default_value_t = 1)]
    full_scan_runs: usize,
    /// Generator seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// The kubectl-sched binary to measure (a release build).
    #[arg(long)]
    kubectl_sched: Option<PathBuf>,
    /// Directory for outputs and results.json.
    #[arg(long, default_value = "/tmp/kubectl-sched-bench")]
    out: PathBuf,
    /// Longest wait for kube-scheduler to settle the batch, in seconds.
    #[arg(long, default_value_t = 900)]
    scheduler_timeout: u64,
    /// After loading each size, keep the control plane up this many seconds before measuring, and
    /// print its kubeconfig: time to profile the live path by hand (curl, perf). Bounded: the run
    /// goes on by itself when the time is up.
    #[arg(long, default_value_t = 0)]
    hold_seconds: u64,
    /// Measure only the live path (the pods list alone, `explain POD` both ways, the `preempt` dry
    /// run) and stop: no snapshot file, no simulation, no kube-scheduler. For the sizes the loopback
    /// control plane holds only briefly (kube-apiserver's memory grows with every full list).
    #[arg(long)]
    live_only: bool,
}

/// kube-scheduler's configuration for the run: scheduler_perf raises the client's QPS the same
/// way, so that API rate limits do not stand in for scheduling speed.
const SCHEDULER_CONFIG: &str = "clientConnection:\n  qps: 5000\n  burst: 5000\n";

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sched-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: &Args) -> Result<(), String> {
    let binary = match &args.kubectl_sched {
        Some(path) => path.clone(),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/kubectl-sched"),
    };
    if !binary.is_file() {
        return Err(format!(
            "{} not found: build it with `cargo build --release -p kubectl-sched` (make bench does)",
            binary.display()
        ));
    }
    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    let mut results = Vec::new();
    for &nodes in &args.nodes {
        let result = bench_size(args, &binary, nodes).await?;
        report::print_size(&result);
        results.push(result);
        let json = serde_json::to_string_pretty(&results).map_err(|e| e.to_string())?;
        let path = args.out.join("results.json");
        std::fs::write(&path, json).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    report::print_scaling(&results);
    Ok(())
}

async fn bench_size(args: &Args, binary: &std::path::Path, nodes: usize) -> Result<SizeResult, String> {
    let mut params = GenerateParams::new(nodes, nodes * args.pods_per_node, 3, args.seed);
    params.pending_percent = args.pending_percent;
    let cluster = Cluster::generate(&params);
    eprintln!(
        "sched-bench: {nodes} nodes: {} objects, {} bound pods, {} pending",
        cluster.objects.len(),
        cluster.bound_pods(),
        cluster.pending.len()
    );
    let plane = ControlPlane::start(
        Options::new()
            .with_controller_manager(&["persistentvolume-binder"])
            .with_scheduler_verbosity(2)
            .with_startup_timeout(Duration::from_secs(180)),
    )
    .await
    .map_err(|e| e.to_string())?;
    let client = plane.client().map_err(|e| e.to_string())?;
    let loaded = load::load(&client, &cluster).await;
    let pending_failed = load::create_pending(&client, &cluster.pending).await;
    eprintln!(
        "sched-bench: loaded {} objects in {:.1} s ({} failed), {} pending pods ({} failed)",
        loaded.objects,
        loaded.seconds,
        loaded.failed,
        cluster.pending.len(),
        pending_failed
    );

    let kubeconfig = plane.kubeconfig_path().display().to_string();
    let target = &cluster.pending[0];
    let (ns, name) = (target.namespace().unwrap_or_default(), target.name_any());
    if args.hold_seconds > 0 {
        eprintln!(
            "sched-bench: holding for {} s: --kubeconfig {kubeconfig}, pending pod {ns}/{name}",
            args.hold_seconds
        );
        tokio::time::sleep(Duration::from_secs(args.hold_seconds)).await;
    }
    let ours = |extra: &[&str]| -> Vec<String> {
        ["--kubeconfig", &kubeconfig, "-v", "2"]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect()
    };
    let runs = args.runs;
    let out = |what: &str| file(&args.out, nodes, what);
    let apiserver = plane
        .processes()
        .iter()
        .find(|p| p.name == "kube-apiserver")
        .map(|p| p.pid);

    // The floor of the live path: kube-apiserver serving the pods list alone, in one request, to a
    // client that only writes it out (kubectl get --raw, output discarded).
    eprintln!("sched-bench: {nodes} nodes: the pods list alone (kubectl get --raw)");
    let kubectl = plane.bin_dir().join("kubectl");
    let raw_pods = "/api/v1/pods?fieldSelector=status.phase!%3DSucceeded,status.phase!%3DFailed";
    let list_floor = run_command(
        &kubectl,
        &["--kubeconfig", kubeconfig.as_str(), "get", "--raw", raw_pods].map(String::from),
        runs,
        std::path::Path::new("/dev/null"),
        apiserver,
    )?;

    eprintln!("sched-bench: {nodes} nodes: explain {ns}/{name} against the API server");
    let explain_live = run_command(
        binary,
        &ours(&["explain", &name, "-n", &ns]),
        runs,
        &out("explain-live.txt"),
        apiserver,
    )?;
    eprintln!(
        "sched-bench: {nodes} nodes: explain in pages of 500 (kubectl's chunking, our previous default)"
    );
    let explain_live_paged = run_command(
        binary,
        &ours(&["explain", &name, "-n", &ns, "--chunk-size", "500"]),
        runs,
        &out("explain-live-paged.txt"),
        apiserver,
    )?;
    eprintln!("sched-bench: {nodes} nodes: preemption dry run");
    let preemptor = create_preemptor(&client, &cluster).await?;
    let preempt = run_command(
        binary,
        &ours(&["preempt", &preemptor, "-n", "default", "--dry-run=client"]),
        runs,
        &out("preempt.txt"),
        apiserver,
    )?;
    Api::<Pod>::namespaced(client.clone(), "default")
        .delete(&preemptor, &DeleteParams::default().grace_period(0))
        .await
        .map_err(|e| format!("deleting {preemptor}: {e}"))?;

    let live = LiveFigures {
        list_floor,
        explain_live,
        explain_live_paged,
        preempt,
    };
    let batch = cluster.pending.len() - pending_failed;
    let mut result = SizeResult {
        nodes,
        bound_pods: cluster.bound_pods(),
        batch,
        load: loaded,
        live,
        offline: None,
    };
    if args.live_only {
        return Ok(result);
    }

    let snapshot_path = out("snapshot.json").display().to_string();
    eprintln!("sched-bench: {nodes} nodes: snapshot");
    let snapshot = run_command(
        binary,
        &ours(&["snapshot", "-A", "--output-file", &snapshot_path]),
        runs,
        &out("snapshot.txt"),
        apiserver,
    )?;
    let explain_file = run_command(
        binary,
        &ours(&["explain", &name, "-n", &ns, "--from", &snapshot_path]),
        runs,
        &out("explain-file.txt"),
        None,
    )?;
    eprintln!("sched-bench: {nodes} nodes: simulate the batch, sampled and full scan");
    let sampled = simulate(binary, &snapshot_path, false, runs, &out("simulate-sampled.json"))?;
    let full = simulate(
        binary,
        &snapshot_path,
        true,
        args.full_scan_runs,
        &out("simulate-full.json"),
    )?;

    let mut scheduler = SchedulerRuns::default();
    let mut batch = batch;
    for run in 0..args.scheduler_runs.max(1) {
        if run > 0 {
            plane.stop_scheduler();
            batch = cluster.pending.len() - load::recreate_pending(&client, &cluster.pending).await;
        }
        eprintln!(
            "sched-bench: {nodes} nodes: kube-scheduler on the batch, run {}",
            run + 1
        );
        let started = SystemTime::now();
        plane
            .start_scheduler(Some(SCHEDULER_CONFIG))
            .await
            .map_err(|e| e.to_string())?;
        let log = plane.dir().join("kube-scheduler.log");
        scheduler.runs.push(
            watch_scheduler(
                &log,
                started,
                batch,
                nodes,
                Duration::from_secs(args.scheduler_timeout),
                plane.scheduler_pid(),
            )
            .await,
        );
        let _ = std::fs::copy(&log, out(&format!("kube-scheduler-{}.log", run + 1)));
    }
    result.batch = batch;
    result.offline = Some(OfflineFigures {
        snapshot,
        snapshot_mib: std::fs::metadata(&snapshot_path).map_or(0.0, |m| m.len() as f64 / 1048576.0),
        explain_file,
        sampled,
        full,
        scheduler,
    });
    Ok(result)
}

/// Runs `simulate --from FILE -o json` `runs` times and reads each run's summary.
fn simulate(
    binary: &std::path::Path,
    snapshot: &str,
    all_nodes: bool,
    runs: usize,
    out: &std::path::Path,
) -> Result<SimulateFigures, String> {
    let mut args = vec![
        "simulate".to_string(),
        "--from".into(),
        snapshot.into(),
        "-o".into(),
        "json".into(),
    ];
    if all_nodes {
        args.push("--all-nodes".into());
    }
    let mut figures = SimulateFigures::default();
    for _ in 0..runs.max(1) {
        let run: Runs = run_command(binary, &args, 1, out, None)?;
        let text = std::fs::read_to_string(out).map_err(|e| format!("{}: {e}", out.display()))?;
        let report: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", out.display()))?;
        let summary = &report["summary"];
        let number = |key: &str| summary[key].as_f64().unwrap_or(f64::NAN);
        figures.wall_seconds.push(run.seconds[0]);
        figures.max_rss_mib.push(run.max_rss_mib[0]);
        figures.simulation_seconds.push(number("millis") / 1e3);
        figures.scheduled = number("scheduled") as usize;
        figures.pods = number("pods") as usize;
        figures.cycles = number("cycles") as usize;
        figures.evaluated_nodes = number("evaluated_nodes") as u64;
    }
    Ok(figures)
}

/// A pod of the highest generated priority that fits nowhere without preemption: it asks for the
/// largest node's whole allocatable CPU, and every node runs pods.
async fn create_preemptor(client: &kube::Client, cluster: &Cluster) -> Result<String, String> {
    let millis = cluster
        .objects
        .iter()
        .filter_map(|o| match o {
            Generated::Node(n) => n.status.as_ref()?.allocatable.as_ref()?.get("cpu").cloned(),
            _ => None,
        })
        .map(|q| sched_core::resource::quantity_milli_value(&q))
        .max()
        .unwrap_or(1000);
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bench-preemptor", "namespace": "default"},
        "spec": {
            "priorityClassName": "high-priority",
            "containers": [{
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": format!("{millis}m"), "memory": "1Gi"}},
            }],
        },
    }))
    .map_err(|e| e.to_string())?;
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &pod)
        .await
        .map_err(|e| format!("creating the preemptor: {e}"))?;
    Ok("bench-preemptor".into())
}
