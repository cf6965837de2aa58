//! `preempt`: resolves the preemptor, runs its scheduling cycle and DefaultPreemption's dry run over every
//! node, decides what may be executed (dry run, confirmation, `--yes`, a cluster to write to), and runs
//! the plan through `sched_core::apply`.
//!
//! A plan shown before the confirmation is never executed as it was shown: after the answer, the
//! cluster is read again and the plan made again ([`Planned::recheck`]); only when the preemptor is still
//! the same pending pod and the fresh plan removes the same pods (same UIDs) from the same node is the
//! fresh plan executed, every write conditioned on the UID and resourceVersion just read. Otherwise
//! nothing is written and the command fails with what changed.
//!
//! Executing is idempotent by construction: a run re-reads the cluster and plans again, the plan skips
//! victims that are already terminating, and every write treats a missing object as done. So a run that
//! stopped half-way is finished by running the command again.

use sched_core::action::Action;
use sched_core::apply::{ActionResult, ApplyOptions, Outcome as ApplyOutcome};
use sched_core::engine::{
    DryRunOptions, NOT_ELIGIBLE_TERMINATING_POD, PreemptionResult, VictimRemoval, dry_run, schedule_cycle,
};
use sched_core::explain::Outcome;
use sched_core::features::KubeVersion;
use sched_core::{ClusterObjects, Engine, PodInfo};
use serde::Serialize;

use crate::cli::{DryRun, GlobalArgs, PreemptArgs, RemovalMode};
use crate::source::load::{
    Cluster, LoadError, Loaded, evaluation_detail, keep_until_exit, load_keeping_cluster,
};
use crate::source::pods::{ResolveError, Subject, subject};

pub mod pod_group;

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
    Resolve(Box<ResolveError>),
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
    /// The pod belongs to a gang: kube-scheduler preempts for its whole group, never for the pod
    /// alone (the caller drills the group instead).
    #[error(
        "pod {pod} belongs to the gang PodGroup {group}: preemption is the group's (preempt podgroup/{group})"
    )]
    GangPod {
        /// `namespace/name`.
        pod: String,
        /// The PodGroup's name.
        group: String,
    },
    /// `podgroup/NAME` names a PodGroup that neither exists nor is named by a pod.
    #[error("podgroup {0}: neither the PodGroup nor a pod naming it exists")]
    PodGroupNotFound(String),
    /// Execution was refused: no confirmation possible, or no cluster to write to (exit code 2).
    #[error("{0}")]
    Refused(String),
    /// After the confirmation, the cluster no longer matches the plan that was confirmed: nothing was
    /// written.
    #[error("the cluster changed since the plan was shown: {reason}; nothing was changed, run again")]
    Changed {
        /// What changed.
        reason: String,
        /// True when the report now holds the fresh plan (to be shown), false when there is none (the
        /// preemptor is gone).
        replanned: bool,
    },
    /// Reading the cluster again after the confirmation failed: nothing was written.
    #[error("reading the cluster again after the confirmation: {0}; nothing was changed")]
    Reread(Box<PreemptError>),
    /// The plan stopped before its end (the report says what was done).
    #[error(
        "preemption stopped at step {step} of {total}: {reason}; {done} step(s) done, {not_run} not run; {advice}"
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
        /// What to do next: run again, or (after a refused eviction, which running again would only
        /// repeat) wait for the budget or delete instead.
        advice: String,
    },
}

/// What to do after a stopped run that running again finishes.
const ADVICE_RUN_AGAIN: &str = "run the command again to finish";

/// The PodDisruptionBudgets covering `pod` (`namespace/name`) as the plan read them, for messages:
/// `PodDisruptionBudget shop/web (disruptionsAllowed 0)`, or a generic phrase when none is known.
pub fn blocking_budgets(report: &PreemptReport, pod: &str) -> String {
    let budgets: Vec<String> = report
        .preemption
        .victims
        .iter()
        .filter(|v| format!("{}/{}", v.namespace, v.name) == pod)
        .flat_map(|v| v.pdbs.iter().map(ToString::to_string))
        .collect();
    match budgets.as_slice() {
        [] => "a PodDisruptionBudget".to_string(),
        [one] => format!("PodDisruptionBudget {one}"),
        many => format!("PodDisruptionBudgets {}", many.join(", ")),
    }
}

/// What to do after the Eviction API refused an eviction: running again is refused again while the
/// budget allows no disruption.
pub fn advice_after_refused_eviction(budgets: &str) -> String {
    format!(
        "running it again is refused again until {budgets} allows a disruption: wait for that, or use \
         --mode=delete (kube-scheduler's way: budgets are weighed when choosing victims, not enforced)"
    )
}

impl From<LoadError> for PreemptError {
    fn from(e: LoadError) -> Self {
        PreemptError::Load(Box::new(e))
    }
}

impl From<ResolveError> for PreemptError {
    fn from(e: ResolveError) -> Self {
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
    /// The kube-scheduler release whose semantics decided (the API server's, the snapshot file's, or
    /// --kube-version's).
    pub kube_version: KubeVersion,
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
    /// What planning again needs: the engine, the namespace, the preemptor as it was.
    replan: Replan,
}

/// The preemptor as a plan saw it: what must still hold when the plan is executed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Preemptor {
    /// `namespace/name`.
    key: String,
    /// metadata.uid.
    uid: String,
    /// spec.nodeName (the evaluation clears it to fill the report).
    bound_to: Option<String>,
    /// metadata.deletionTimestamp is set.
    terminating: bool,
}

struct Replan {
    engine: Engine,
    namespace: String,
    preemptor: Preemptor,
}

impl std::fmt::Debug for Replan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replan")
            .field("namespace", &self.namespace)
            .field("preemptor", &self.preemptor)
            .finish_non_exhaustive()
    }
}

/// One evaluation of the preemptor against one read of the cluster.
struct Evaluation {
    preemption: PreemptionResult,
    situation: Situation,
    fits_on: Vec<String>,
    bound_to: Option<String>,
    detail: String,
    preemptor: Preemptor,
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
    refuse_without_confirmation(dry_run_mode, args, stdin_is_terminal)?;
    let target = args.filename.is_none().then_some(args.pod.as_deref()).flatten();
    let Session {
        objects,
        origin,
        warnings,
        notes,
        engine,
        namespace,
        cluster,
    } = Session::open(global, args, target)?;
    let evaluation = evaluate(&engine, args, objects, &namespace, &origin)?;

    let dry_run_view = DryRunView::of(dry_run_mode);
    let executable = evaluation.situation == Situation::Planned && !evaluation.preemption.actions.is_empty();
    let next = Next::after(executable, dry_run_mode, args.yes);
    let mode = removal(args);
    let Evaluation {
        preemption,
        situation,
        fits_on,
        bound_to,
        detail,
        preemptor,
    } = evaluation;
    Ok(Planned {
        report: PreemptReport {
            preemption,
            kube_version: engine.features().version,
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
        replan: Replan {
            engine,
            namespace,
            preemptor,
        },
    })
}

/// Refused before anything is read: a script must not depend on whether this run has victims.
fn refuse_without_confirmation(
    dry_run_mode: DryRun,
    args: &PreemptArgs,
    stdin_is_terminal: bool,
) -> Result<(), PreemptError> {
    if dry_run_mode == DryRun::None && !args.yes && !stdin_is_terminal {
        return Err(PreemptError::Refused(
            "refusing to preempt without confirmation: stdin is not a terminal; add --yes to execute, or \
             --dry-run=client to only print the plan"
                .into(),
        ));
    }
    Ok(())
}

/// The cluster a drill reads, with the engine of its release and the namespace it looks in.
struct Session {
    objects: ClusterObjects,
    origin: String,
    warnings: Vec<String>,
    notes: Vec<String>,
    engine: Engine,
    namespace: String,
    cluster: Option<Cluster>,
}

impl Session {
    /// Loads the cluster (or `--from`) for a drill about `target`, keeping the connection to write
    /// to.
    fn open(global: &GlobalArgs, args: &PreemptArgs, target: Option<&str>) -> Result<Self, PreemptError> {
        let detail = evaluation_detail(global, target);
        let (loaded, cluster) =
            load_keeping_cluster(global, args.from.as_deref(), None, &detail, &args.release)?;
        let Loaded {
            objects,
            origin,
            default_namespace,
            warnings,
            notes,
            release,
        } = loaded;
        let engine =
            Engine::for_features(args.config.as_deref(), release.features).map_err(ResolveError::from)?;
        Ok(Session {
            objects,
            origin,
            warnings,
            notes,
            engine,
            namespace: global.namespace.clone().unwrap_or(default_namespace),
            cluster,
        })
    }
}

impl DryRunView {
    /// The view of the effective `--dry-run`.
    fn of(mode: DryRun) -> Self {
        match mode {
            DryRun::None => DryRunView::None,
            DryRun::Client => DryRunView::Client,
            DryRun::Server => DryRunView::Server,
        }
    }
}

impl Next {
    /// What follows a drill: a plan that can be executed is executed (`--yes`, `--dry-run=server`) or
    /// confirmed first; anything else is printed.
    fn after(executable: bool, dry_run_mode: DryRun, yes: bool) -> Self {
        match dry_run_mode {
            _ if !executable => Next::PrintOnly,
            DryRun::Client => Next::PrintOnly,
            DryRun::Server => Next::Execute,
            DryRun::None if yes => Next::Execute,
            DryRun::None => Next::Confirm,
        }
    }
}

fn removal(args: &PreemptArgs) -> VictimRemoval {
    match args.mode {
        RemovalMode::Delete => VictimRemoval::Delete,
        RemovalMode::Evict => VictimRemoval::Evict,
    }
}

/// Resolves the preemptor in `objects` (or `-f`), runs its scheduling cycle and, when it does not fit,
/// DefaultPreemption's dry run.
fn evaluate(
    engine: &Engine,
    args: &PreemptArgs,
    objects: ClusterObjects,
    namespace: &str,
    origin: &str,
) -> Result<Evaluation, PreemptError> {
    let Subject {
        pod: info,
        bound_node: bound_to,
        snapshot,
        profile,
    } = subject(
        engine,
        objects,
        args.filename.as_deref(),
        args.pod.as_deref(),
        args.profile.as_deref(),
        namespace,
        origin,
    )?;
    keep_until_exit(&snapshot);
    let preemptor = Preemptor {
        key: info.key(),
        uid: info.pod.metadata.uid.clone().unwrap_or_default(),
        bound_to: bound_to.clone(),
        terminating: info.pod.metadata.deletion_timestamp.is_some(),
    };
    let fwk = engine
        .framework(profile, snapshot.clone())
        .map_err(ResolveError::from)?;
    // A pending gang pod is preempted for with its group (the pod group cycle runs no PostFilter per
    // pod).
    if bound_to.is_none()
        && sched_core::schedule::pod_group::gang_min_count(&fwk, &info).is_some()
        && let Some(group) = sched_core::snapshot::pod_groups::pod_group_name(&info.pod)
    {
        return Err(PreemptError::GangPod {
            pod: info.key(),
            group: group.to_string(),
        });
    }
    let cycle = schedule_cycle(&fwk, &info, engine.schedule_options(false));
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
            crate::diagnosis::headline::gated_headline(&e.message),
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
                mode: removal(args),
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
    Ok(Evaluation {
        preemption,
        situation,
        fits_on,
        bound_to,
        detail,
        preemptor,
    })
}

/// Why a fresh evaluation does not carry out the plan that was confirmed, or None when it does: the
/// preemptor must be the same pod (UID), still pending (unbound, not being deleted), and the fresh plan
/// must remove the same pods (UIDs) from the same node and write the same steps (the texts of events
/// and conditions may differ: they describe the cluster as read now).
fn what_changed(before: &PreemptReport, preemptor_before: &Preemptor, after: &Evaluation) -> Option<String> {
    let pod = &preemptor_before.key;
    let now = &after.preemptor;
    if now.uid != preemptor_before.uid {
        return Some(format!(
            "pod {pod} was deleted and created again (uid {}, now {})",
            preemptor_before.uid, now.uid
        ));
    }
    if let Some(node) = &now.bound_to {
        return Some(format!("pod {pod} is now bound to node {node}"));
    }
    if now.terminating {
        return Some(format!("pod {pod} is being deleted"));
    }
    let p = &after.preemption;
    match after.situation {
        Situation::Planned => {}
        Situation::Fits => {
            return Some(format!(
                "pod {pod} now fits without preemption (on {})",
                after.fits_on.join(", ")
            ));
        }
        Situation::Gated => return Some(format!("pod {pod} is now gated: {}", after.detail)),
        Situation::Bound => return Some(format!("pod {pod} is now {}", after.detail)),
        Situation::NotEligible => {
            return Some(format!(
                "pod {pod} may no longer preempt: {}",
                p.message.trim_start_matches("preemption: ")
            ));
        }
        Situation::NoCandidates => {
            return Some("no node where removing lower-priority pods makes the pod fit any more".into());
        }
        Situation::InProgress => {
            return Some(format!(
                "a preemption for pod {pod} is already under way on node {}",
                after.detail
            ));
        }
    }
    let old = &before.preemption;
    if p.node != old.node {
        return Some(format!(
            "preemption now chooses node {} instead of {}",
            p.node.as_deref().unwrap_or("-"),
            old.node.as_deref().unwrap_or("-")
        ));
    }
    let mut changes = Vec::new();
    for v in &old.victims {
        match p
            .victims
            .iter()
            .find(|n| n.namespace == v.namespace && n.name == v.name)
        {
            None => changes.push(format!("{}/{} is no longer a victim", v.namespace, v.name)),
            Some(n) if n.uid != v.uid => changes.push(format!(
                "victim {}/{} was replaced by another pod of the same name (uid {}, now {})",
                v.namespace, v.name, v.uid, n.uid
            )),
            Some(n) if n.terminating && !v.terminating => {
                changes.push(format!(
                    "victim {}/{} is already being deleted",
                    v.namespace, v.name
                ));
            }
            Some(n) if !n.terminating && v.terminating => changes.push(format!(
                "victim {}/{} is no longer being deleted",
                v.namespace, v.name
            )),
            Some(_) => {}
        }
    }
    for n in &p.victims {
        if !old
            .victims
            .iter()
            .any(|v| v.namespace == n.namespace && v.name == n.name)
        {
            changes.push(format!("{}/{} is a new victim", n.namespace, n.name));
        }
    }
    if changes.is_empty() {
        let steps_before: Vec<String> = old.actions.iter().filter_map(step_identity).collect();
        let steps_after: Vec<String> = p.actions.iter().filter_map(step_identity).collect();
        if steps_before != steps_after {
            for step in steps_before.iter().filter(|s| !steps_after.contains(s)) {
                changes.push(format!("no longer planned: {step}"));
            }
            for step in steps_after.iter().filter(|s| !steps_before.contains(s)) {
                changes.push(format!("newly planned: {step}"));
            }
            if changes.is_empty() {
                changes.push("the plan's steps are in another order".into());
            }
        }
    }
    (!changes.is_empty()).then(|| changes.join("; "))
}

/// What a step writes, for comparing two plans: the write and the pod's UID; not the resourceVersion
/// (the fresh one is meant to differ), not the text of conditions, and no events.
fn step_identity(action: &Action) -> Option<String> {
    let uid = |pod: &sched_core::action::ObjectRef| pod.uid.clone().unwrap_or_default();
    match action {
        Action::Event(_) => None,
        Action::SetPodCondition { pod, condition } => Some(format!(
            "set condition {}={} ({}) on pod {} (uid {})",
            condition.type_,
            condition.status,
            condition.reason,
            pod.key(),
            uid(pod)
        )),
        Action::DeletePod { pod }
        | Action::EvictPod { pod }
        | Action::SetNominatedNodeName { pod, .. }
        | Action::BindPod { pod, .. } => Some(format!("{} (uid {})", action.describe(), uid(pod))),
        other => Some(other.describe()),
    }
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
        possible_nodes: Vec::new(),
        victims: Vec::new(),
        alternative_victims: Vec::new(),
        alternative_victims_capped: false,
        message_alternatives: Vec::new(),
        random_outcome: Vec::new(),
        pdb_violations: 0,
        evictions_blocked: 0,
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

/// The cluster a plan was read from: executing (or re-reading before executing) needs one, and a plan
/// read from a file has none.
fn cluster_to_execute_on(cluster: Option<&Cluster>) -> Result<&Cluster, PreemptError> {
    cluster.ok_or_else(|| {
        PreemptError::Refused("there is no cluster to execute on (the cluster was read from a file)".into())
    })
}

impl Planned {
    /// After the confirmation: reads the cluster again and plans again. When the preemptor is still the
    /// same pending pod and the fresh plan removes the same pods from the same node ([`what_changed`]),
    /// the report takes the fresh plan (its writes conditioned on the resourceVersions just read) and
    /// [`Planned::execute`] may run it. Otherwise fails with [`PreemptError::Changed`], the report holding
    /// the fresh evaluation when there is one; nothing is written either way.
    pub fn recheck(&mut self, args: &PreemptArgs) -> Result<(), PreemptError> {
        let cluster = cluster_to_execute_on(self.cluster.as_ref())?;
        let reread = |e: PreemptError| PreemptError::Reread(Box::new(e));
        let (objects, _warnings) = cluster.load(None).map_err(|e| reread(e.into()))?;
        let pod = self.replan.preemptor.key.clone();
        let fresh = match evaluate(
            &self.replan.engine,
            args,
            objects,
            &self.replan.namespace,
            &cluster.server,
        ) {
            Ok(fresh) => fresh,
            Err(PreemptError::Resolve(e)) => {
                let reason = match *e {
                    ResolveError::PodNotFound { .. } => format!("pod {pod} no longer exists"),
                    ResolveError::TerminalPod { phase, .. } => {
                        format!("pod {pod} has finished (phase {phase})")
                    }
                    other => return Err(reread(other.into())),
                };
                return Err(PreemptError::Changed {
                    reason,
                    replanned: false,
                });
            }
            Err(e) => return Err(reread(e)),
        };
        let changed = what_changed(&self.report, &self.replan.preemptor, &fresh);
        let Evaluation {
            preemption,
            situation,
            fits_on,
            bound_to,
            detail,
            preemptor,
        } = fresh;
        self.report.preemption = preemption;
        self.report.situation = situation;
        self.report.fits_on = fits_on;
        self.report.bound_to = bound_to;
        self.report.detail = detail;
        self.replan.preemptor = preemptor;
        match changed {
            Some(reason) => Err(PreemptError::Changed {
                reason,
                replanned: true,
            }),
            None => Ok(()),
        }
    }

    /// Executes the plan (with dryRun=All for `--dry-run=server`), reporting each action to `progress`
    /// (index, plan length, result). Fails with [`PreemptError::Incomplete`] when the run stopped early;
    /// the report carries the results either way.
    pub fn execute(
        &mut self,
        mut progress: impl FnMut(usize, usize, &ActionResult),
    ) -> Result<(), PreemptError> {
        let cluster = cluster_to_execute_on(self.cluster.as_ref())?;
        let plan = &self.report.preemption.actions;
        let report = &self.report;
        let (results, outcome) = run_plan(
            cluster,
            plan,
            report.dry_run == DryRunView::Server,
            |pod| blocking_budgets(report, pod),
            &mut progress,
        );
        self.report.complete = Some(outcome.is_ok());
        self.report.results = Some(results);
        outcome
    }
}

/// Runs `plan` on `cluster` (with dryRun=All when `dry_run_server`), reporting each action to
/// `progress` (index, plan length, result): the results, and [`PreemptError::Incomplete`] when the
/// run stopped early — at a refused eviction (`budgets` names the budgets covering a pod, by
/// `namespace/name`) or a failed write (failed events do not stop it: they are best-effort, and the
/// results show them).
pub fn run_plan(
    cluster: &Cluster,
    plan: &[Action],
    dry_run_server: bool,
    budgets: impl Fn(&str) -> String,
    mut progress: impl FnMut(usize, usize, &ActionResult),
) -> (Vec<ActionResult>, Result<(), PreemptError>) {
    let options = ApplyOptions {
        dry_run_server,
        ..ApplyOptions::new(FIELD_MANAGER)
    };
    let total = plan.len();
    let results = cluster.execute(plan, &options, |i, r| progress(i, total, r));
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
        Some(i) => {
            let (reason, advice) = match (&results[i].outcome, &results[i].action) {
                (ApplyOutcome::PdbBlocked { message }, Action::EvictPod { pod }) => {
                    let budgets = budgets(&pod.key());
                    (
                        format!(
                            "{}: blocked by {budgets} (HTTP 429): {message}",
                            results[i].action.describe()
                        ),
                        advice_after_refused_eviction(&budgets),
                    )
                }
                // Running again cannot grant a missing permission: name it and its role.
                _ => match crate::source::rbac::denied_write(&results[i]) {
                    Some(denied) => (results[i].message(), denied.advice()),
                    None => (results[i].message(), ADVICE_RUN_AGAIN.to_string()),
                },
            };
            Err(PreemptError::Incomplete {
                step: i + 1,
                total,
                reason,
                done,
                not_run,
                advice,
            })
        }
        None => Ok(()),
    };
    (results, outcome)
}

#[cfg(test)]
mod tests;
