//! `explain POD --watch`: after the first answer, evaluate the pod again whenever the cluster changes
//! and report only what changed.
//!
//! Changes are learnt from two kube-runtime watchers (metadata only: any change to a pod or a node
//! bumps its resourceVersion, and the objects themselves are read by the evaluation), one on every pod
//! (a pod deleted anywhere can free room) and one on every node. Bursts are debounced: an evaluation
//! waits [`QUIET`] after the first change, and never starts less than [`DEBOUNCE`] after the previous
//! one. Each evaluation is `explain`'s own ([`super::explain::run`]), so a line says exactly what the
//! command would print as its headline at that moment.

use std::pin::Pin;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use sched_core::explain::{Explanation, Outcome};
use serde::Serialize;
use tokio::time::Instant;

use super::explain::{ExplainError, ExplainReport, ExplainResult};
use crate::cli::{ExplainArgs, GlobalArgs};
use crate::diagnosis::headline::headline;
use crate::source::load::{Cluster, LoadError};
use crate::source::pods::{ResolveError, pod_name};

/// The least time between two evaluations: a burst of events (a rollout, a node joining) costs one.
pub const DEBOUNCE: Duration = Duration::from_secs(1);
/// How long an evaluation waits after the first change, for the rest of its burst.
pub const QUIET: Duration = Duration::from_millis(300);

/// Why the watch could not go on.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The API server could not be reached to start watching.
    #[error(transparent)]
    Connect(#[from] LoadError),
    /// The pod was deleted while watched.
    #[error("pod \"{name}\" in namespace \"{namespace}\" was deleted")]
    Deleted {
        /// The namespace.
        namespace: String,
        /// The pod.
        name: String,
    },
    /// The watch stream ended (it retries on errors, so this is not expected).
    #[error("the watch on {what} ended")]
    Ended {
        /// Pods or nodes.
        what: &'static str,
    },
}

/// Why the watch stopped without an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The pod is bound to this node.
    Bound(String),
    /// `--watch-timeout` passed.
    TimedOut,
    /// Ctrl-C.
    Interrupted,
}

/// One thing the watch reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Update {
    /// The verdict or its message changed.
    Verdict {
        /// When it was seen.
        time: String,
        /// Scheduled, Unschedulable, Gated or Error.
        outcome: Outcome,
        /// The headline: the FailedScheduling message, where it would go, or the gate.
        message: String,
    },
    /// The pod was bound.
    Bound {
        /// When it was seen.
        time: String,
        /// Where.
        bound: String,
    },
}

impl Update {
    /// One line: `TIME  MESSAGE` for people, or one JSON object (valid YAML too) for `-o json|yaml`.
    pub fn line(&self, json: bool) -> String {
        if json {
            return serde_json::to_string(self).unwrap_or_default() + "\n";
        }
        match self {
            Update::Verdict { time, message, .. } => format!("{time}  {message}\n"),
            Update::Bound { time, bound } => format!("{time}  bound to {bound}\n"),
        }
    }
}

/// What a line is printed for: the outcome and, where it would go (not its score, which every other
/// pod's churn moves), or else the message.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Verdict {
    outcome: Outcome,
    key: String,
}

impl Verdict {
    fn of(e: &Explanation) -> Verdict {
        Verdict::new(e.outcome, &e.message, &e.selected)
    }

    fn new(outcome: Outcome, message: &str, selected: &[String]) -> Verdict {
        Verdict {
            outcome,
            key: match outcome {
                Outcome::Scheduled => selected.join(","),
                _ => message.to_string(),
            },
        }
    }
}

/// What woke the loop up.
enum Wake {
    Evaluate,
    Deleted,
    TimedOut,
    Interrupted,
    Ended(&'static str),
}

/// What a watcher event means to the watch.
enum Signal {
    Changed,
    Deleted,
}

type Signals = Pin<Box<dyn Stream<Item = (Result<Signal, watcher::Error>, &'static str)> + Send>>;

fn now() -> String {
    Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Watches the pod of `args` after its first `report`, calling `print` with each update, until it is
/// bound, deleted, `--watch-timeout` passes or Ctrl-C. `report` is the last answer at the end (for
/// `--exit-code`).
pub fn run(
    global: &GlobalArgs,
    args: &ExplainArgs,
    report: &mut ExplainReport,
    mut print: impl FnMut(&Update) -> anyhow::Result<()>,
    mut warn: impl FnMut(&str),
) -> anyhow::Result<Stop> {
    if let Some(bound) = &report.bound {
        return Ok(Stop::Bound(bound.node.clone()));
    }
    let cluster = Cluster::connect(global).map_err(WatchError::from)?;
    let namespace = global
        .namespace
        .clone()
        .unwrap_or_else(|| cluster.default_namespace.clone());
    let name = pod_name(args.pod.as_deref().unwrap_or_default()).to_string();
    let deadline = args.watch_timeout.map(|d| Instant::now() + d);
    let mut signals = signals(&cluster, &namespace, &name);
    // Created on its first poll, inside the runtime, then kept: a Ctrl-C during an evaluation is
    // still seen by the next wait.
    let mut interrupt = Box::pin(async { tokio::signal::ctrl_c().await });
    let mut last = Verdict::of(&report.explanation);
    let mut last_evaluation = Instant::now();
    let mut warned = false;
    loop {
        let wake = cluster.block_on(async {
            let mut changed_at: Option<Instant> = None;
            loop {
                let evaluate_at = changed_at.map(|t| (t + QUIET).max(last_evaluation + DEBOUNCE));
                let far = Instant::now() + Duration::from_secs(86_400);
                tokio::select! {
                    _ = &mut interrupt => return Wake::Interrupted,
                    () = tokio::time::sleep_until(deadline.unwrap_or(far)), if deadline.is_some() => {
                        return Wake::TimedOut;
                    }
                    () = tokio::time::sleep_until(evaluate_at.unwrap_or(far)), if evaluate_at.is_some() => {
                        return Wake::Evaluate;
                    }
                    item = signals.next() => match item {
                        None => return Wake::Ended("pods and nodes"),
                        Some((Ok(Signal::Deleted), _)) => return Wake::Deleted,
                        Some((Ok(Signal::Changed), _)) => {
                            changed_at.get_or_insert_with(Instant::now);
                        }
                        Some((Err(e), what)) => {
                            // The watcher retries with a backoff; say it once, not at every retry.
                            if !warned {
                                warn(&format!("watching {what}: {e} (retrying)"));
                                warned = true;
                            }
                        }
                    },
                }
            }
        });
        match wake {
            Wake::Interrupted => return Ok(Stop::Interrupted),
            Wake::TimedOut => return Ok(Stop::TimedOut),
            Wake::Ended(what) => return Err(WatchError::Ended { what }.into()),
            Wake::Deleted => return Err(WatchError::Deleted { namespace, name }.into()),
            Wake::Evaluate => {}
        }
        last_evaluation = Instant::now();
        let out = match super::explain::run(global, args) {
            Ok(out) => out,
            Err(ExplainError::Resolve(ResolveError::PodNotFound { .. })) => {
                return Err(WatchError::Deleted { namespace, name }.into());
            }
            Err(e) => {
                // The API server may be restarting: the watch goes on, and the next change tries again.
                warn(&format!("evaluating again: {e}"));
                continue;
            }
        };
        let ExplainResult::One(now_report) = out.result else {
            continue;
        };
        *report = *now_report;
        if let Some(bound) = &report.bound {
            print(&Update::Bound {
                time: now(),
                bound: bound.node.clone(),
            })?;
            return Ok(Stop::Bound(bound.node.clone()));
        }
        let verdict = Verdict::of(&report.explanation);
        if verdict != last {
            print(&Update::Verdict {
                time: now(),
                outcome: report.explanation.outcome,
                message: headline(&report.explanation),
            })?;
            last = verdict;
        }
    }
}

/// The pod and node watchers, merged: what changed, and whether it was the pod's deletion.
fn signals(cluster: &Cluster, namespace: &str, name: &str) -> Signals {
    let config = watcher::Config::default();
    let (namespace, name) = (namespace.to_string(), name.to_string());
    let pods = watcher::watcher(
        Api::<PartialObjectMeta<Pod>>::all(cluster.client()),
        config.clone(),
    )
    .default_backoff()
    .filter_map(move |event| {
        let signal = match event {
            Ok(Event::Delete(pod))
                if pod.metadata.namespace.as_deref() == Some(namespace.as_str())
                    && pod.metadata.name.as_deref() == Some(name.as_str()) =>
            {
                Some(Ok(Signal::Deleted))
            }
            // Every (re)listing's end counts as a change: what happened before the watch started
            // (or while it was down) is evaluated.
            Ok(Event::Apply(_) | Event::Delete(_) | Event::InitDone) => Some(Ok(Signal::Changed)),
            Ok(Event::Init | Event::InitApply(_)) => None,
            Err(e) => Some(Err(e)),
        };
        futures::future::ready(signal.map(|s| (s, "pods")))
    });
    let nodes = watcher::watcher(Api::<PartialObjectMeta<Node>>::all(cluster.client()), config)
        .default_backoff()
        .filter_map(|event| {
            let signal = match event {
                Ok(Event::Apply(_) | Event::Delete(_) | Event::InitDone) => Some(Ok(Signal::Changed)),
                Ok(Event::Init | Event::InitApply(_)) => None,
                Err(e) => Some(Err(e)),
            };
            futures::future::ready(signal.map(|s| (s, "nodes")))
        });
    Box::pin(futures::stream::select(pods, nodes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_due_when_the_verdict_or_the_message_changes_not_the_score() {
        let n1 = ["n1".to_string()];
        let a = Verdict::new(Outcome::Unschedulable, "0/1 nodes are available", &[]);
        let b = Verdict::new(Outcome::Unschedulable, "0/2 nodes are available", &[]);
        let on_n1 = Verdict::new(Outcome::Scheduled, "", &n1);
        assert_ne!(a, b);
        assert_ne!(a, on_n1);
        // Where it goes matters, not the message of a pod that fits.
        assert_eq!(on_n1, Verdict::new(Outcome::Scheduled, "other", &n1));
        assert_ne!(on_n1, Verdict::new(Outcome::Scheduled, "", &["n2".to_string()]));
    }

    #[test]
    fn lines_read_as_text_or_json() {
        let bound = Update::Bound {
            time: "2026-01-01T00:00:00Z".into(),
            bound: "n1".into(),
        };
        assert_eq!(bound.line(false), "2026-01-01T00:00:00Z  bound to n1\n");
        assert_eq!(
            bound.line(true),
            "{\"time\":\"2026-01-01T00:00:00Z\",\"bound\":\"n1\"}\n"
        );
        let verdict = Update::Verdict {
            time: "2026-01-01T00:00:00Z".into(),
            outcome: Outcome::Scheduled,
            message: "would be scheduled on n1 with score 90".into(),
        };
        assert_eq!(
            verdict.line(false),
            "2026-01-01T00:00:00Z  would be scheduled on n1 with score 90\n"
        );
    }
}
