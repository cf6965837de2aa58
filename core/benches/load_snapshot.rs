//! Loading a large snapshot file: a generated 5,000-node / 150,000-pod cluster written as one JSON
//! `kind: List` (kubectl's indentation, with the fields real clusters carry), then `load_file`.
//!
//! Before the timed runs it prints the file size, one cold load with `Snapshot::new` on top, and the
//! peak RSS of that load (VmHWM, reset first where the kernel allows). A smaller YAML file is loaded
//! too, to show the YAML path's throughput.
//!
//! Sizes can be changed with SCHED_BENCH_NODES / SCHED_BENCH_PODS; SCHED_BENCH_YAML=0 skips YAML.
//! Run: `cargo bench -p sched-core --features testing --bench load_snapshot`

use std::path::Path;
use std::time::Instant;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sched_core::Snapshot;
use sched_core::snapshot::{load_file, write_list_yaml};
use sched_core::testing::generate::{GenerateParams, generate, write_json_list};

fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// User + system CPU seconds of this process so far (from /proc/self/stat, 100 ticks a second):
/// on a shared machine, CPU time says more than wall time.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses and may contain spaces).
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// Resets VmHWM to the current RSS (Linux `clear_refs` 5); false where that is not permitted.
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn cold_load(path: &Path, label: &str) {
    let reset = reset_peak();
    let rss_before = status_kib("VmRSS:").unwrap_or(0);
    let start = Instant::now();
    let cpu_start = cpu_seconds();
    let (objects, report) = load_file(path).expect("load");
    let loaded = start.elapsed();
    let load_cpu = cpu_seconds() - cpu_start;
    let load_peak = status_kib("VmHWM:").unwrap_or(0);
    let pods = objects.pods.len();
    let build_start = Instant::now();
    let snapshot = Snapshot::new(objects);
    let built = build_start.elapsed();
    let total_cpu = cpu_seconds() - cpu_start;
    let peak = status_kib("VmHWM:").unwrap_or(0);
    eprintln!(
        "{label}: {} objects ({pods} pods, {} nodes) loaded in {loaded:.2?}, Snapshot::new {built:.2?}, \
         total {:.2?} (CPU: load {load_cpu:.2}s, total {total_cpu:.2}s); peak RSS after load {:.0} MiB, \
         after Snapshot::new {:.0} MiB (RSS before {:.0} MiB{})",
        report.objects,
        snapshot.nodes().len(),
        loaded + built,
        load_peak as f64 / 1024.0,
        peak as f64 / 1024.0,
        rss_before as f64 / 1024.0,
        if reset {
            ""
        } else {
            "; peak not reset, includes generation"
        },
    );
}

fn bench(c: &mut Criterion) {
    let nodes = env_usize("SCHED_BENCH_NODES", 5_000);
    let pods = env_usize("SCHED_BENCH_PODS", 150_000);
    let dir = tempfile::tempdir().expect("tempdir");

    let json = dir.path().join("cluster.json");
    let start = Instant::now();
    let size = write_json_list(&GenerateParams::new(nodes, pods, 3, 42), &json).expect("write");
    eprintln!(
        "generated {nodes} nodes / {pods} pods: {:.0} MiB of JSON in {:.2?}",
        mib(size),
        start.elapsed()
    );
    cold_load(&json, "json cold load");

    let mut group = c.benchmark_group("load_snapshot");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(size));
    group.bench_function(format!("json_{nodes}_nodes_{pods}_pods"), |b| {
        b.iter(|| load_file(&json).expect("load"))
    });

    // YAML at a tenth of the size: the value-tree path is much slower per byte.
    if std::env::var("SCHED_BENCH_YAML").as_deref() == Ok("0") {
        group.finish();
        return;
    }
    let yaml = dir.path().join("cluster.yaml");
    let objects = generate(&GenerateParams::new(nodes / 10, pods / 10, 3, 42));
    let file = std::io::BufWriter::new(std::fs::File::create(&yaml).expect("create"));
    write_list_yaml(&objects, file).expect("write yaml");
    drop(objects);
    let yaml_size = std::fs::metadata(&yaml).map(|m| m.len()).unwrap_or(0);
    eprintln!("YAML file: {:.0} MiB", mib(yaml_size));
    cold_load(&yaml, "yaml cold load");
    group.throughput(Throughput::Bytes(yaml_size));
    group.bench_function(format!("yaml_{}_nodes_{}_pods", nodes / 10, pods / 10), |b| {
        b.iter(|| load_file(&yaml).expect("load"))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
