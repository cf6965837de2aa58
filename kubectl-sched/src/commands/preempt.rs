//! `preempt`: resolves the preemptor, runs its scheduling cycle and DefaultPreemption's dry run over every
//! node, decides what may be executed (dry run, confirmation, `--yes`, a cluster to write to), and runs
//! the plan through `sched_core::apply`.
//!
//! Executing is idempotent by construction: a run re-reads the cluster and plans again, the plan skips
//! victims that are already terminating, and every write treats a missing object as done. So a run that
//! stopped half-way is finished by running the command again.

use std::sync::Arc;

use sched_core::action::Action;
use sched_core::apply::{ActionResult, ApplyOptions, Outcome as ApplyOutcome};
use sched_core::explain::Outcome;
use sched_core::preemption::evaluator::NOT_ELIGIBLE_TERMINATING_POD;
use sched_core::preemption::{DryRunOptions, PreemptionResult, VictimRemoval, dry_run};
use sched_core::schedule::schedule_cycle;
use sched_core::snapshot::is_terminal;
use sched_core::{PodInfo, Snapshot};
use serde::Serialize;

use super::explain::{Engine, ExplainError, pod_name, read_pod_file, take_pod};
use super::load::{Cluster, LoadError, Loaded, evaluation_detail, keep_until_exit, load_keeping_cluster};
use crate::cli::{DryRun, GlobalArgs, PreemptArgs, RemovalMode};

/// The field manager of every write, and the events' reporting controller.
pub const FIELD_MANAGER: &str = "kubectl-sched";

/// Why `preempt` could not answer or act.
#[derive(Debug, thiserror::Error)]
pub enum PreemptError {
    /// The cluster could not be loaded.
    #[error(transparent)]
    Load(Box<LoadError>),
    /// The pod, its file, or its profile could not be resolved (the same errors as `explain`).
    #[error(transparent)]
    Resolve(Box<ExplainError>),
    /// `--node` names a node where preemption does not make the pod fit.
    #[error("--node: {0}")]
    NotACandidate(String),
    /// The scheduling cycle itself failed (a plugin error): there is nothing to preempt for.
    #[error("pod {pod}: the scheduling cycle fails: {message}")]
    CycleFailed {
        /// `namespace/name`.
        pod: String,
        /// The error.
        message: String,
    },
    /// Execution was refused: no confirmation possible, or no cluster to write to (exit code 2).
    #[error("{0}")]
    Refused(String),
    /// The plan stopped before its end (the report says what was done).
    #[error(
        "preemption stopped at step {step} of {total}: {reason}; {done} step(s) done, {not_run} not run; run \
         the command again to finish"
    )]
    Incomplete {
        /// 1-based index of the step that stopped the run.
        step: usize,
        /// Steps in the plan.
        total: usize,
        /// Why it stopped.
        reason: String,
        /// Steps whose goal holds.
        done: usize,
        /// Steps not attempted.
        not_run: usize,
    },
}

impl From<LoadError> for PreemptError {
    fn from(e: LoadError) -> Self {
        PreemptError::Load(Box::new(e))
    }
}

impl From<ExplainError> for PreemptError {
    fn from(e: ExplainError) -> Self {
        PreemptError::Resolve(Box::new(e))
    }
}

impl PreemptError {
    /// The process exit code: 2 when execution was refused (a usage matter), 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            PreemptError::Refused(_) => 2,
            _ => 1,
        }
    }
}

/// What the drill found about the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Situation {
    /// Preemption makes the pod fit: `node`, `victims` and `actions` say where and how.
    Planned,
    /// The pod may not preempt (`message` says why).
    NotEligible,
    /// No node where removing lower-priority pods makes the pod fit.
    NoCandidates,
    /// The pod has scheduling gates: kube-scheduler does not try it, so it does not preempt for it.
    Gated,
    /// The pod fits without preemption (`fits_on`).
    Fits,
    /// The pod is already bound (`bound_to`).
    Bound,
    /// An earlier preemption for the pod is still under way: victims are terminating on its nominated node.
    InProgress,
}

/// `--dry-run` as reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DryRunView {
    /// The plan is (or was) executed.
    None,
    /// Only printed.
    Client,
    /// Sent with dryRun=All.
    Server,
}

/// The `preempt -o json` document: the engine's dry run, what the drill concluded, and the execution.
#[derive(Debug, Serialize)]
pub struct PreemptReport {
    /// The dry run (the contract's `pod`, `eligible`, `message`, `node`, `victims`, `candidates`, `actions`).
    #[serde(flatten)]
    pub preemption: PreemptionResult,
    /// What the drill found.
    pub situation: Situation,
    /// How victims are removed.
    pub mode: VictimRemoval,
    /// The effective `--dry-run`.
    pub dry_run: DryRunView,
    /// Where the pod fits without preemption (situation `fits`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fits_on: Vec<String>,
    /// The node the pod is bound to (situation `bound`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound_to: Option<String>,
    /// For the human output: the gate (`gated`), the node (`bound`, `in-progress`).
    #[serde(skip)]
    pub detail: String,
    /// After execution: what happened to each action, in plan order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub results: Option<Vec<ActionResult>>,
    /// After execution: true when every action's goal holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub complete: Option<bool>,
}

impl PreemptReport {
    /// Exit code of a drill that ran as asked: 3 when preemption cannot make the pod fit, else 0.
    pub fn exit_code(&self) -> u8 {
        match self.situation {
            Situation::NotEligible | Situation::NoCandidates | Situation::Gated => 3,
            _ => 0,
        }
    }
}

/// What happens after the drill.
#[derive(Debug)]
pub enum Next {
    /// Print the report; nothing to execute (client dry run, or nothing to do).
    PrintOnly,
    /// Ask the user, then execute.
    Confirm,
    /// Execute (with `--yes`, or `--dry-run=server`).
    Execute,
}

/// The drill, ready to be printed and perhaps executed.
#[derive(Debug)]
pub struct Planned {
    /// The report.
    pub report: PreemptReport,
    /// What to do next.
    pub next: Next,
    /// Always shown.
    pub warnings: Vec<String>,
    /// Shown with `-v 1`.
    pub notes: Vec<String>,
    cluster: Option<Cluster>,
}

fn effective_dry_run(args: &PreemptArgs) -> Result<DryRun, PreemptError> {
    let offline = if args.from.is_some() {
        Some("--from reads a snapshot file")
    } else if args.filename.is_some() {
        Some("-f drills a pod that is not in the cluster")
    } else {
        None
    };
    match (args.dry_run, offline) {
        (Some(DryRun::Client), _) => Ok(DryRun::Client),
        (Some(mode), None) => Ok(mode),
        (None, None) => Ok(DryRun::None),
        (None, Some(_)) if !args.yes => Ok(DryRun::Client),
        (requested, Some(why)) => Err(PreemptError::Refused(format!(
            "{why}: there is nothing to execute {} on; use --dry-run=client (the default with --from and -f) \
             or drop --from/-f to act on the cluster of your kubeconfig",
            match requested {
                Some(DryRun::Server) => "--dry-run=server",
                _ => "the plan",
            }
        ))),
    }
}

/// Resolves the pod, runs the drill and decides what may happen next. `stdin_is_terminal` tells whether
/// a confirmation can be asked for; without one (and without `--yes`) execution is refused up front.
pub fn plan(
    global: &GlobalArgs,
    args: &PreemptArgs,
    stdin_is_terminal: bool,
) -> Result<Planned, PreemptError> {
    let dry_run_mode = effective_dry_run(args)?;
    // Refused before anything is read: a script must not depend on whether this run has victims.
    if dry_run_mode == DryRun::None && !args.yes && !stdin_is_terminal {
        return Err(PreemptError::Refused(
            "refusing to preempt without confirmation: stdin is not a terminal; add --yes to execute, or \
             --dry-run=client to only print the plan"
                .into(),
        ));
    }
    let engine = Engine::new(args.config.as_deref())?;
    let target = args.filename.is_none().then_some(args.pod.as_deref()).flatten();
    let detail = evaluation_detail(global, target);
    let (loaded, cluster) = load_keeping_cluster(global, args.from.as_deref(), None, &detail)?;
    let Loaded {
        mut objects,
        origin,
        default_namespace,
        warnings,
        notes,
    } = loaded;
    let namespace = global.namespace.clone().unwrap_or(default_namespace);
    let mut pod = match (&args.filename, &args.pod) {
        (Some(path), _) => {
            let pod = read_pod_file(path, &namespace, &objects)?;
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            take_pod(&mut objects, &ns, &name);
            pod
        }
        (None, Some(arg)) => {
            let name = pod_name(arg);
            let pod = take_pod(&mut objects, &namespace, name).ok_or_else(|| ExplainError::PodNotFound {
                namespace: namespace.clone(),
                name: name.to_string(),
                origin: origin.clone(),
            })?;
            if is_terminal(&pod) {
                return Err(ExplainError::TerminalPod {
                    key: format!("{namespace}/{name}"),
                    phase: pod
                        .status
                        .as_ref()
                        .and_then(|s| s.phase.clone())
                        .unwrap_or_default(),
                }
                .into());
            }
            pod
        }
        // clap requires POD unless -f.
        (None, None) => {
            return Err(PreemptError::Refused("no pod given".into()));
        }
    };
    let bound_to = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty());
    if bound_to.is_some()
        && let Some(spec) = pod.spec.as_mut()
    {
        // Evaluated as if pending only to fill the report; a bound pod has nothing to preempt for.
        spec.node_name = None;
    }

    let snapshot = Arc::new(Snapshot::new(objects));
    keep_until_exit(&snapshot);
    let info = PodInfo::new(pod);
    let profile = engine.profile_for(&info, args.profile.as_deref())?;
    let fwk = engine.framework(profile, snapshot.clone())?;
    let cycle = schedule_cycle(&fwk, &info, engine.options(false));
    let mode = match args.mode {
        RemovalMode::Delete => VictimRemoval::Delete,
        RemovalMode::Evict => VictimRemoval::Evict,
    };
    let e = &cycle.explanation;
    let runs_default_preemption = fwk
        .profile
        .post_filter
        .iter()
        .any(|p| p == sched_core::plugins::names::DEFAULT_PREEMPTION);
    let (preemption, situation, fits_on, detail) = match (e.outcome, &bound_to) {
        (Outcome::Error, _) => {
            return Err(PreemptError::CycleFailed {
                pod: info.key(),
                message: e.message.clone(),
            });
        }
        (_, Some(node)) => (
            nothing_to_preempt(&info, e.nodes_total, runs_default_preemption),
            Situation::Bound,
            Vec::new(),
            format!("bound to node {node}"),
        ),
        (Outcome::Gated, None) => (
            nothing_to_preempt(&info, e.nodes_total, runs_default_preemption),
            Situation::Gated,
            Vec::new(),
            e.message.clone(),
        ),
        (Outcome::Scheduled, None) => (
            nothing_to_preempt(&info, e.nodes_total, runs_default_preemption),
            Situation::Fits,
            e.selected.clone(),
            String::new(),
        ),
        (Outcome::Unschedulable, None) => {
            let options = DryRunOptions {
                force_node: args.node.clone(),
                mode,
                pre_filter_message: e.pre_filter_message.clone(),
                now: None,
            };
            let r = dry_run(&fwk, &info, &cycle.node_statuses, &cycle.state, &options);
            if let Some(err) = &r.force_node_error {
                return Err(PreemptError::NotACandidate(err.clone()));
            }
            let (situation, detail) = if !r.eligible {
                if r.message.ends_with(NOT_ELIGIBLE_TERMINATING_POD) {
                    (Situation::InProgress, info.nominated_node_name().to_string())
                } else {
                    (Situation::NotEligible, String::new())
                }
            } else if r.node.is_some() {
                (Situation::Planned, String::new())
            } else {
                (Situation::NoCandidates, String::new())
            };
            (r, situation, Vec::new(), detail)
        }
    };

    let dry_run_view = match dry_run_mode {
        DryRun::None => DryRunView::None,
        DryRun::Client => DryRunView::Client,
        DryRun::Server => DryRunView::Server,
    };
    let executable = situation == Situation::Planned && !preemption.actions.is_empty();
    let next = match dry_run_mode {
        _ if !executable => Next::PrintOnly,
        DryRun::Client => Next::PrintOnly,
        DryRun::Server => Next::Execute,
        DryRun::None if args.yes => Next::Execute,
        DryRun::None => Next::Confirm,
    };
    Ok(Planned {
        report: PreemptReport {
            preemption,
            situation,
            mode,
            dry_run: dry_run_view,
            fits_on,
            bound_to,
            detail,
            results: None,
            complete: None,
        },
        next,
        warnings,
        notes,
        cluster,
    })
}

/// The dry-run part of a report for a pod that needs no preemption (it fits, is bound, or is gated).
fn nothing_to_preempt(
    pod: &PodInfo,
    nodes_total: usize,
    profile_has_default_preemption: bool,
) -> PreemptionResult {
    PreemptionResult {
        pod: pod.key(),
        eligible: true,
        message: String::new(),
        failed_scheduling_message: String::new(),
        node: None,
        tied_nodes: Vec::new(),
        decided_by: None,
        victims: Vec::new(),
        pdb_violations: 0,
        candidates: Vec::new(),
        nodes_total,
        potential_nodes: 0,
        kube_scheduler_would_sample: 0,
        answer_depends_on_sampling: false,
        rejected_nodes: Default::default(),
        nominated_node_name: None,
        force_node_error: None,
        profile_has_default_preemption,
        actions: Vec::new(),
    }
}

impl Planned {
    /// Executes the plan (with dryRun=All for `--dry-run=server`), reporting each action to `progress`
    /// (index, plan length, result). Fails with [`PreemptError::Incomplete`] when the run stopped early;
    /// the report carries the results either way.
    pub fn execute(
        &mut self,
        mut progress: impl FnMut(usize, usize, &ActionResult),
    ) -> Result<(), PreemptError> {
        let Some(cluster) = &self.cluster else {
            return Err(PreemptError::Refused(
                "there is no cluster to execute on (the cluster was read from a file)".into(),
            ));
        };
        let options = ApplyOptions {
            dry_run_server: self.report.dry_run == DryRunView::Server,
            ..ApplyOptions::new(FIELD_MANAGER)
        };
        let plan = &self.report.preemption.actions;
        let total = plan.len();
        let results = cluster.execute(plan, &options, |i, r| progress(i, total, r));
        // Where the run stopped: a blocked eviction, or a failed write (failed events do not stop it:
        // they are best-effort, and the results show them).
        let stop = results.iter().position(|r| match &r.outcome {
            ApplyOutcome::PdbBlocked { .. } => true,
            ApplyOutcome::Failed(_) => !matches!(r.action, Action::Event(_)),
            _ => false,
        });
        let done = results.iter().filter(|r| r.outcome.is_success()).count();
        let not_run = results
            .iter()
            .filter(|r| matches!(r.outcome, ApplyOutcome::NotRun))
            .count();
        let outcome = match stop {
            Some(i) => Err(PreemptError::Incomplete {
                step: i + 1,
                total,
                reason: match &results[i].outcome {
                    ApplyOutcome::PdbBlocked { message } => format!(
                        "{}: blocked by a PodDisruptionBudget (HTTP 429): {message}",
                        results[i].action.describe()
                    ),
                    _ => results[i].message(),
                },
                done,
                not_run,
            }),
            None => Ok(()),
        };
        self.report.complete = Some(stop.is_none());
        self.report.results = Some(results);
        outcome
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn args(line: &[&str]) -> PreemptArgs {
        let cli = Cli::try_parse_from(["kubectl-sched", "preempt"].iter().chain(line)).expect("parses");
        match cli.command {
            Command::Preempt(a) => a,
            other => panic!("not preempt: {other:?}"),
        }
    }

    #[test]
    fn dry_run_defaults_and_refusals() {
        let cases: [(&[&str], Result<DryRun, &str>); 10] = [
            (&["p"], Ok(DryRun::None)),
            (&["p", "--yes"], Ok(DryRun::None)),
            (&["p", "--dry-run"], Ok(DryRun::Client)),
            (&["p", "--dry-run=server"], Ok(DryRun::Server)),
            (&["p", "--from", "f.yaml"], Ok(DryRun::Client)),
            (
                &["p", "--from", "f.yaml", "--dry-run=client", "--yes"],
                Ok(DryRun::Client),
            ),
            (&["-f", "p.yaml"], Ok(DryRun::Client)),
            (
                &["p", "--from", "f.yaml", "--yes"],
                Err("--from reads a snapshot file"),
            ),
            (
                &["p", "--from", "f.yaml", "--dry-run=server"],
                Err("execute --dry-run=server on"),
            ),
            (&["-f", "p.yaml", "--dry-run=none"], Err("-f drills a pod")),
        ];
        for (line, want) in cases {
            match (effective_dry_run(&args(line)), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{line:?}"),
                (Err(e), Err(want)) => {
                    assert_eq!(e.exit_code(), 2, "{line:?}");
                    assert!(e.to_string().contains(want), "{line:?}: {e}");
                }
                (got, want) => panic!("{line:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn only_refusals_exit_2() {
        assert_eq!(PreemptError::Refused("x".into()).exit_code(), 2);
        assert_eq!(PreemptError::NotACandidate("x".into()).exit_code(), 1);
    }
}
