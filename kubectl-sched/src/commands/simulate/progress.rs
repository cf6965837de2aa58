//! Progress on stderr while `simulate` works: expanding the workloads of `-f`, building the
//! snapshot, then the queue. As `triage` does: only when stderr is a terminal (a line rewritten
//! every 200 ms) or with `-v` (a line every 2 s), and only once the work has taken half a second, so
//! short runs print nothing.
//!
//! A reporter thread prints, reading counters the work updates with relaxed stores: a step that
//! reports nothing (the snapshot's build) still shows what it is and how long it has taken.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long work runs before its first progress line.
const QUIET_FOR: Duration = Duration::from_millis(500);
/// How often the line is rewritten on a terminal.
const TERMINAL_EVERY: Duration = Duration::from_millis(200);
/// How often a line is printed with `-v` when stderr is not a terminal.
const LOG_EVERY: Duration = Duration::from_secs(2);
/// How often the reporter wakes to check whether the work is done.
const TICK: Duration = Duration::from_millis(50);

/// What is being done (an `AtomicU8`).
const EXPANDING: u8 = 1;
const BUILDING: u8 = 2;
const SIMULATING: u8 = 3;

#[derive(Default)]
struct Counters {
    phase: AtomicU8,
    done: AtomicUsize,
    total: AtomicUsize,
    cycles: AtomicUsize,
    queued: AtomicUsize,
    stop: AtomicBool,
}

impl Counters {
    fn line(&self, elapsed: Duration) -> Option<String> {
        let done = self.done.load(Ordering::Relaxed);
        let total = self.total.load(Ordering::Relaxed);
        let what = match self.phase.load(Ordering::Relaxed) {
            EXPANDING => format!("expanding the workloads of -f: {done}/{total} pod(s)"),
            BUILDING => format!("building the snapshot: {total} pod(s)"),
            SIMULATING => format!(
                "simulating: {} cycle(s), {done}/{total} pod(s) placed, {} queued",
                self.cycles.load(Ordering::Relaxed),
                self.queued.load(Ordering::Relaxed)
            ),
            _ => return None,
        };
        Some(format!("{what} ({:.0} s)", elapsed.as_secs_f64().floor()))
    }
}

/// The counters, and the thread printing them.
pub(super) struct Progress {
    counters: Arc<Counters>,
    reporter: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts reporting when stderr is a terminal or with `-v`; otherwise updates cost a store each.
    pub(super) fn start(verbosity: u8) -> Self {
        let counters = Arc::new(Counters::default());
        let terminal = std::io::stderr().is_terminal();
        let reporter = (terminal || verbosity >= 1).then(|| {
            let counters = counters.clone();
            std::thread::spawn(move || report(&counters, terminal))
        });
        Progress { counters, reporter }
    }

    fn set(&self, phase: u8, done: usize, total: usize) {
        self.counters.phase.store(phase, Ordering::Relaxed);
        self.counters.done.store(done, Ordering::Relaxed);
        self.counters.total.store(total, Ordering::Relaxed);
    }

    /// `done` of the `total` pods of `-f` are built.
    pub(super) fn expanding(&self, done: usize, total: usize) {
        self.set(EXPANDING, done, total);
    }

    /// The snapshot of `pods` pods is being built.
    pub(super) fn building(&self, pods: usize) {
        self.set(BUILDING, 0, pods);
    }

    /// The queue's state after a cycle.
    pub(super) fn simulating(&self, cycles: usize, scheduled: usize, queued: usize, total: usize) {
        self.counters.cycles.store(cycles, Ordering::Relaxed);
        self.counters.queued.store(queued, Ordering::Relaxed);
        self.set(SIMULATING, scheduled, total);
    }
}

impl Drop for Progress {
    /// Stops the reporter, which clears its line on a terminal, before anything else is printed.
    fn drop(&mut self) {
        self.counters.stop.store(true, Ordering::Relaxed);
        if let Some(reporter) = self.reporter.take() {
            let _ = reporter.join();
        }
    }
}

fn report(counters: &Counters, terminal: bool) {
    let started = Instant::now();
    let every = if terminal { TERMINAL_EVERY } else { LOG_EVERY };
    let mut last: Option<Instant> = None;
    while !counters.stop.load(Ordering::Relaxed) {
        std::thread::sleep(TICK);
        if started.elapsed() < QUIET_FOR || last.is_some_and(|l| l.elapsed() < every) {
            continue;
        }
        let Some(line) = counters.line(started.elapsed()) else {
            continue;
        };
        last = Some(Instant::now());
        if terminal {
            eprint!("\r{line}\x1b[K");
        } else {
            eprintln!("{line}");
        }
    }
    if terminal && last.is_some() {
        eprint!("\r\x1b[K");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_say_what_is_being_done() {
        let counters = Counters::default();
        assert_eq!(counters.line(Duration::from_secs(1)), None);
        let cases = [
            (EXPANDING, "expanding the workloads of -f: 3/10 pod(s) (2 s)"),
            (BUILDING, "building the snapshot: 10 pod(s) (2 s)"),
            (
                SIMULATING,
                "simulating: 7 cycle(s), 3/10 pod(s) placed, 4 queued (2 s)",
            ),
        ];
        for (phase, want) in cases {
            counters.phase.store(phase, Ordering::Relaxed);
            counters.done.store(3, Ordering::Relaxed);
            counters.total.store(10, Ordering::Relaxed);
            counters.cycles.store(7, Ordering::Relaxed);
            counters.queued.store(4, Ordering::Relaxed);
            assert_eq!(counters.line(Duration::from_millis(2_900)).as_deref(), Some(want));
        }
    }
}
