//! The measurements: our commands as processes (wall time and peak RSS from `/usr/bin/time`, so
//! the figure is what a user waits for), and kube-scheduler's bindings read from its `-v=2` log.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// Wall time and peak RSS of several runs of one command.
#[derive(Debug, Clone, Serialize)]
pub struct Runs {
    /// Seconds, in run order.
    pub seconds: Vec<f64>,
    /// Peak RSS in MiB, in run order.
    pub max_rss_mib: Vec<f64>,
    /// kube-apiserver's CPU seconds (user + system) during each run, for commands that talk to it.
    pub server_cpu_seconds: Vec<f64>,
    /// Exit code of the last run.
    pub exit_code: i32,
}

impl Runs {
    pub fn median_seconds(&self) -> f64 {
        median(&self.seconds)
    }

    pub fn median_rss(&self) -> f64 {
        median(&self.max_rss_mib)
    }

    /// "median (min–max)" in seconds, or milliseconds under a second.
    pub fn show(&self) -> String {
        let (lo, hi) = spread(&self.seconds);
        let m = self.median_seconds();
        if hi < 1.0 {
            format!("{:.0} ms ({:.0}–{:.0})", m * 1e3, lo * 1e3, hi * 1e3)
        } else {
            format!("{m:.2} s ({lo:.2}–{hi:.2})")
        }
    }
}

pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

pub fn spread(values: &[f64]) -> (f64, f64) {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lo, hi)
}

/// CPU seconds (user + system) a process has used so far, from `/proc/PID/stat`.
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at ") "; utime and stime are the
    // 12th and 13th of them, in clock ticks (100 per second on Linux).
    let fields: Vec<&str> = stat.rsplit_once(") ")?.1.split(' ').collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
    Some((ticks(11)? + ticks(12)?) / 100.0)
}

/// Runs `binary args` `runs` times under `/usr/bin/time`; stdout of the last run goes to `stdout`.
/// Exit codes 0 and 3 (explain/simulate: a pod stays pending) count as success. With `server`,
/// the CPU that process (kube-apiserver) used during each run is recorded too.
pub fn run_command(
    binary: &Path,
    args: &[String],
    runs: usize,
    stdout: &Path,
    server: Option<u32>,
) -> Result<Runs, String> {
    let time_file = stdout.with_extension("time");
    let stderr_file = stdout.with_extension("stderr");
    let mut result = Runs {
        seconds: Vec::new(),
        max_rss_mib: Vec::new(),
        server_cpu_seconds: Vec::new(),
        exit_code: 0,
    };
    for _ in 0..runs {
        let out = std::fs::File::create(stdout).map_err(|e| format!("{}: {e}", stdout.display()))?;
        let err =
            std::fs::File::create(&stderr_file).map_err(|e| format!("{}: {e}", stderr_file.display()))?;
        let server_cpu = server.and_then(process_cpu_seconds);
        let started = Instant::now();
        let status = Command::new("/usr/bin/time")
            .arg("-f")
            .arg("%M")
            .arg("-o")
            .arg(&time_file)
            .arg(binary)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .status()
            .map_err(|e| format!("running /usr/bin/time {}: {e}", binary.display()))?;
        let seconds = started.elapsed().as_secs_f64();
        if let (Some(before), Some(after)) = (server_cpu, server.and_then(process_cpu_seconds)) {
            result.server_cpu_seconds.push(after - before);
        }
        let code = status.code().unwrap_or(-1);
        if code != 0 && code != 3 {
            let stderr = std::fs::read_to_string(&stderr_file).unwrap_or_default();
            return Err(format!(
                "{} {} exited with {code}: {}",
                binary.display(),
                args.join(" "),
                stderr.lines().rev().take(5).collect::<Vec<_>>().join(" | ")
            ));
        }
        let rss_kib: f64 = std::fs::read_to_string(&time_file)
            .ok()
            .and_then(|t| t.split_whitespace().last().and_then(|v| v.parse().ok()))
            .unwrap_or(f64::NAN);
        result.seconds.push(seconds);
        result.max_rss_mib.push(rss_kib / 1024.0);
        result.exit_code = code;
    }
    Ok(result)
}

/// What kube-scheduler did with the batch, from its log.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SchedulerRun {
    /// Pods bound.
    pub bound: usize,
    /// Unschedulable attempts ("Unable to schedule pod; no fit").
    pub unschedulable_attempts: usize,
    /// Pods never bound.
    pub not_bound: usize,
    /// Σ evaluatedNodes over the bindings.
    pub evaluated_nodes_bound: u64,
    /// Nodes evaluated by the unschedulable attempts (all nodes each: the log does not say).
    pub evaluated_nodes_unschedulable: u64,
    /// First to last scheduling log line of the batch (bindings and failed attempts), seconds.
    pub span_seconds: f64,
    /// Process start to the first scheduling decision (informer sync included), seconds.
    pub first_decision_seconds: f64,
    /// Peak RSS (VmHWM) at the end, MiB.
    pub max_rss_mib: f64,
}

impl SchedulerRun {
    pub fn pods_per_second(&self) -> f64 {
        self.bound as f64 / self.span_seconds
    }

    pub fn evaluations_per_second(&self) -> f64 {
        (self.evaluated_nodes_bound + self.evaluated_nodes_unschedulable) as f64 / self.span_seconds
    }
}

/// kube-scheduler's runs on the same batch (the batch recreated pending before each), summarized by
/// medians with their spread, as our commands are.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SchedulerRuns {
    pub runs: Vec<SchedulerRun>,
}

impl SchedulerRuns {
    fn figures(&self, figure: impl Fn(&SchedulerRun) -> f64) -> Vec<f64> {
        self.runs.iter().map(figure).collect()
    }

    pub fn pods_per_second(&self) -> f64 {
        median(&self.figures(SchedulerRun::pods_per_second))
    }

    pub fn evaluations_per_second(&self) -> f64 {
        median(&self.figures(SchedulerRun::evaluations_per_second))
    }

    pub fn first_decision_seconds(&self) -> f64 {
        median(&self.figures(|r| r.first_decision_seconds))
    }

    pub fn max_rss_mib(&self) -> f64 {
        median(&self.figures(|r| r.max_rss_mib))
    }

    /// The fewest pods bound in any run (the runs place the same batch).
    pub fn bound(&self) -> usize {
        self.runs.iter().map(|r| r.bound).min().unwrap_or(0)
    }

    /// " (min–max)" of a figure over the runs, empty for a single run.
    pub fn show_spread(&self, figure: impl Fn(&SchedulerRun) -> f64, decimals: usize) -> String {
        if self.runs.len() < 2 {
            return String::new();
        }
        let (lo, hi) = spread(&self.figures(figure));
        format!(" ({lo:.decimals$}–{hi:.decimals$})")
    }
}

/// One scheduling line of the log.
struct Decision {
    /// Seconds since midnight (klog writes local time; the machine runs in UTC).
    at: f64,
    pod: String,
    evaluated: Option<u64>,
}

fn parse_decision(line: &str) -> Option<Decision> {
    let bound = line.contains("\"Successfully bound pod to node\"");
    if !bound && !line.contains("\"Unable to schedule pod; no fit; waiting\"") {
        return None;
    }
    // I1125 18:40:01.123456   12345 schedule_one.go:483] "..." pod="ns/name" ...
    let clock = line.get(6..21)?;
    let mut parts = clock.split(':');
    let (h, m, s): (f64, f64, f64) = (
        parts.next()?.parse().ok()?,
        parts.next()?.parse().ok()?,
        parts.next()?.parse().ok()?,
    );
    let field = |name: &str| -> Option<&str> {
        let start = line.find(&format!(" {name}="))? + name.len() + 2;
        let rest = &line[start..];
        let rest = rest.strip_prefix('"').unwrap_or(rest);
        Some(rest.split(['"', ' ']).next().unwrap_or(rest))
    };
    Some(Decision {
        at: h * 3600.0 + m * 60.0 + s,
        pod: field("pod")?.to_owned(),
        evaluated: if bound {
            field("evaluatedNodes").and_then(|v| v.parse().ok())
        } else {
            None
        },
    })
}

fn seconds_of_day(time: SystemTime) -> f64 {
    time.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64() % 86_400.0
}

/// Waits until every one of `batch` pods was bound or found unschedulable and no new decision was
/// logged for a few seconds, or until decisions stopped for longer (a pod kube-scheduler never logs a
/// decision for, e.g. one whose binding failed and waits in backoff), or `timeout`; then reads the
/// figures. Only scheduling decisions count as activity: kube-scheduler logs other lines all the time.
pub async fn watch_scheduler(
    log: &Path,
    started: SystemTime,
    batch: usize,
    nodes: usize,
    timeout: Duration,
    pid: Option<u32>,
) -> SchedulerRun {
    const QUIET: Duration = Duration::from_secs(5);
    const STALLED: Duration = Duration::from_secs(30);
    let deadline = Instant::now() + timeout;
    let mut last_decisions = 0;
    let mut quiet_since = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let run = summarize(&text, started, batch, nodes);
        let decisions = run.bound + run.unschedulable_attempts;
        if decisions != last_decisions {
            last_decisions = decisions;
            quiet_since = Instant::now();
        }
        let settled = run.bound + distinct_unschedulable(&text) >= batch;
        let quiet = quiet_since.elapsed();
        let stalled = decisions > 0 && quiet >= STALLED;
        if (settled && quiet >= QUIET) || stalled || Instant::now() >= deadline {
            let mut run = run;
            run.max_rss_mib = pid.and_then(vm_hwm_mib).unwrap_or(f64::NAN);
            return run;
        }
    }
}

fn distinct_unschedulable(text: &str) -> usize {
    let mut pods: Vec<String> = text
        .lines()
        .filter_map(parse_decision)
        .filter(|d| d.evaluated.is_none())
        .map(|d| d.pod)
        .collect();
    pods.sort();
    pods.dedup();
    pods.len()
}

fn summarize(text: &str, started: SystemTime, batch: usize, nodes: usize) -> SchedulerRun {
    let decisions: Vec<Decision> = text.lines().filter_map(parse_decision).collect();
    let mut bound_pods: Vec<&str> = decisions
        .iter()
        .filter(|d| d.evaluated.is_some())
        .map(|d| d.pod.as_str())
        .collect();
    bound_pods.sort_unstable();
    bound_pods.dedup();
    let start = seconds_of_day(started);
    // A log past midnight wraps; shift times before the start by a day.
    let at = |d: &Decision| {
        if d.at + 60.0 < start {
            d.at + 86_400.0
        } else {
            d.at
        }
    };
    let first = decisions.iter().map(at).fold(f64::INFINITY, f64::min);
    let last = decisions.iter().map(at).fold(f64::NEG_INFINITY, f64::max);
    let unschedulable = decisions.iter().filter(|d| d.evaluated.is_none()).count();
    SchedulerRun {
        bound: bound_pods.len(),
        unschedulable_attempts: unschedulable,
        not_bound: batch.saturating_sub(bound_pods.len()),
        evaluated_nodes_bound: decisions.iter().filter_map(|d| d.evaluated).sum(),
        evaluated_nodes_unschedulable: (unschedulable * nodes) as u64,
        span_seconds: (last - first).max(1e-3),
        first_decision_seconds: first - start,
        max_rss_mib: f64::NAN,
    }
}

fn vm_hwm_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: f64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

/// Where a run's files go.
pub fn file(dir: &Path, size: usize, name: &str) -> PathBuf {
    dir.join(format!("{size}-{name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn klog_lines_are_read() {
        let bound = r#"I1125 18:40:01.500000   12345 schedule_one.go:483] "Successfully bound pod to node" pod="team-001/web-1" node="node-7" evaluatedNodes=500 feasibleNodes=500"#;
        let d = parse_decision(bound).expect("a binding");
        assert_eq!(d.pod, "team-001/web-1");
        assert_eq!(d.evaluated, Some(500));
        assert!((d.at - (18.0 * 3600.0 + 40.0 * 60.0 + 1.5)).abs() < 1e-6);
        let failed = r#"I1125 18:40:02.000000   12345 schedule_one.go:1194] "Unable to schedule pod; no fit; waiting" pod="team-001/big-0" err="0/5 nodes are available: 5 Insufficient cpu.""#;
        let d = parse_decision(failed).expect("an attempt");
        assert_eq!((d.pod.as_str(), d.evaluated), ("team-001/big-0", None));
        assert!(parse_decision("I1125 18:40:02.000000 1 x.go:1] \"Starting\"").is_none());
        let started = UNIX_EPOCH + Duration::from_secs(18 * 3600 + 39 * 60);
        let run = summarize(&format!("{bound}\n{failed}\n"), started, 2, 5);
        assert_eq!((run.bound, run.not_bound, run.unschedulable_attempts), (1, 1, 1));
        assert_eq!(run.evaluated_nodes_bound + run.evaluated_nodes_unschedulable, 505);
        assert!((run.span_seconds - 0.5).abs() < 1e-6);
        assert!((run.first_decision_seconds - 61.5).abs() < 1e-6);
    }
}
