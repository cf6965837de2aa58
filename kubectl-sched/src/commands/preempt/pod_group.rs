//! `preempt podgroup/NAME` (and `preempt POD` for a pod of a gang): workload-aware preemption. A
//! gang pod is never preempted for alone — kube-scheduler's pod group cycle runs no PostFilter per
//! pod — so the drill is the group's: the pod group cycle, and when it cannot place the group,
//! DefaultPreemption's PodGroupPostFilter over the whole cluster (the victims node by node, the
//! node each pod of the group is nominated to).
//!
//! Executing follows the pod drill ([`super`]): the plan is shown, confirmed (or `--yes`), made
//! again on a fresh read of the cluster and executed only when it removes the same pods (same
//! UIDs) and nominates the same nodes, every write conditioned on the UID and resourceVersion just
//! read.

use std::sync::Arc;

use sched_core::action::Action;
use sched_core::apply::ActionResult;
use sched_core::diagnosis::pod_group::preemption::GroupPreemptionView;
use sched_core::diagnosis::pod_group::{Depth, GroupOutcome, diagnose_pod_group};
use sched_core::engine::VictimRemoval;
use sched_core::features::KubeVersion;
use sched_core::preemption::plan::prepare_group_candidate;
use sched_core::preemption::pod_group::GroupPreemptionOutcome;
use sched_core::{ClusterObjects, Engine, PodInfo};
use serde::Serialize;

use super::{DryRunView, Next, PreemptError, Session, cluster_to_execute_on, removal, run_plan};
use crate::cli::{GlobalArgs, PreemptArgs};
use crate::source::load::{Cluster, keep_until_exit};
use crate::source::pods::ResolveError;

/// How `preempt` names a PodGroup.
pub const POD_GROUP_PREFIX: &str = "podgroup/";

/// What the drill found about the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GroupSituation {
    /// Preempting the victims places the group: `preemption` and `actions` say how.
    Planned,
    /// The group may not preempt (preemptionPolicy Never).
    NotEligible,
    /// No running pod has a lower priority than the group.
    NoVictims,
    /// Removing every lower-priority pod does not place the group either.
    DoesNotHelp,
    /// An earlier preemption for the group is still under way (a victim terminates on a node one of
    /// its pods is nominated to).
    InProgress,
    /// The group fits without preemption, or all its pods are bound.
    Fits,
    /// kube-scheduler does not try the group now (quorum not reached, PodGroup missing, not a gang,
    /// the pod group cycle off): nothing is preempted for it.
    NotTried,
}

/// The `preempt podgroup/NAME -o json` document.
#[derive(Debug, Serialize)]
pub struct GroupPreemptReport {
    /// `namespace/name` of the PodGroup.
    pub pod_group: String,
    /// The kube-scheduler release whose semantics decided.
    pub kube_version: KubeVersion,
    /// What the drill found.
    pub situation: GroupSituation,
    /// The group in one line.
    pub summary: String,
    /// What kube-scheduler writes on a pod of the group that fit (the group's words).
    pub message: String,
    /// The group's preemption: its words, the victims per node, the nominations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preemption: Option<GroupPreemptionView>,
    /// How victims are removed.
    pub mode: VictimRemoval,
    /// The effective `--dry-run`.
    pub dry_run: DryRunView,
    /// The plan: each victim removed, then each pod of the group nominated.
    pub actions: Vec<Action>,
    /// After execution: what happened to each action, in plan order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub results: Option<Vec<ActionResult>>,
    /// After execution: true when every action's goal holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub complete: Option<bool>,
}

impl GroupPreemptReport {
    /// Exit code of a drill that ran as asked: 3 when preemption cannot place the group, else 0.
    pub fn exit_code(&self) -> u8 {
        match self.situation {
            GroupSituation::NotEligible
            | GroupSituation::NoVictims
            | GroupSituation::DoesNotHelp
            | GroupSituation::NotTried => 3,
            _ => 0,
        }
    }
}

/// The group's drill, ready to be printed and perhaps executed.
#[derive(Debug)]
pub struct GroupPlanned {
    /// The report.
    pub report: GroupPreemptReport,
    /// What to do next.
    pub next: Next,
    /// Always shown.
    pub warnings: Vec<String>,
    /// Shown with `-v 1`.
    pub notes: Vec<String>,
    cluster: Option<Cluster>,
    replan: Replan,
}

struct Replan {
    engine: Engine,
    namespace: String,
    group: String,
}

impl std::fmt::Debug for Replan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replan")
            .field("namespace", &self.namespace)
            .field("group", &self.group)
            .finish_non_exhaustive()
    }
}

/// The PodGroup `preempt` names with `podgroup/NAME`, if it does.
pub fn named_group(args: &PreemptArgs) -> Option<&str> {
    args.pod.as_deref()?.strip_prefix(POD_GROUP_PREFIX)
}

/// Resolves the PodGroup `group`, runs its drill and decides what may happen next (as
/// [`super::plan`] for a pod).
pub fn plan_group(
    global: &GlobalArgs,
    args: &PreemptArgs,
    group: &str,
    stdin_is_terminal: bool,
) -> Result<GroupPlanned, PreemptError> {
    if args.node.is_some() {
        return Err(PreemptError::Refused(
            "--node: a pod group's preemption has no node to choose (its domain is the whole cluster)".into(),
        ));
    }
    let dry_run_mode = super::effective_dry_run(args)?;
    super::refuse_without_confirmation(dry_run_mode, args, stdin_is_terminal)?;
    let Session {
        objects,
        warnings,
        notes,
        engine,
        namespace,
        cluster,
        ..
    } = Session::open(global, args, None)?;
    let mode = removal(args);
    let report = GroupPreemptReport {
        dry_run: DryRunView::of(dry_run_mode),
        ..evaluate_group(&engine, objects, &namespace, group, args.profile.as_deref(), mode)?
    };
    let executable = report.situation == GroupSituation::Planned && !report.actions.is_empty();
    let next = Next::after(executable, dry_run_mode, args.yes);
    Ok(GroupPlanned {
        report,
        next,
        warnings,
        notes,
        cluster,
        replan: Replan {
            engine,
            namespace,
            group: group.to_string(),
        },
    })
}

/// The group's drill on `objects`: the pod group cycle and its PodGroupPostFilter, and the plan.
fn evaluate_group(
    engine: &Engine,
    objects: ClusterObjects,
    namespace: &str,
    group: &str,
    profile: Option<&str>,
    mode: VictimRemoval,
) -> Result<GroupPreemptReport, PreemptError> {
    let key = format!("{namespace}/{group}");
    let snapshot = Arc::new(engine.snapshot(objects));
    keep_until_exit(&snapshot);
    // The profile of the group's pods (they all name one: kube-scheduler refuses a group whose
    // pods do not), unless --profile names another.
    let members = snapshot.pod_group_counts(namespace, group);
    let scheduler_name = match profile {
        Some(p) => p.to_string(),
        None => members
            .pending
            .first()
            .map_or("default-scheduler", |p| p.scheduler_name())
            .to_string(),
    };
    let profile = engine
        .profile(&scheduler_name)
        .map_err(ResolveError::NoSuchProfile)?;
    let fwk = engine
        .framework(profile, snapshot.clone())
        .map_err(ResolveError::from)?;
    let Some(diagnosis) = diagnose_pod_group(engine, &fwk, namespace, group, Depth::Summary) else {
        return Err(PreemptError::PodGroupNotFound(key));
    };
    let summary = diagnosis.summary(snapshot.nodes().len());
    let preemption = diagnosis.preemption.clone();
    let situation = match (&diagnosis.outcome, &preemption) {
        (GroupOutcome::Schedulable | GroupOutcome::AllScheduled, _) => GroupSituation::Fits,
        (GroupOutcome::Error, _) => {
            return Err(PreemptError::CycleFailed {
                pod: key,
                message: diagnosis.message,
            });
        }
        (GroupOutcome::Unschedulable, Some(p)) => match p.outcome {
            GroupPreemptionOutcome::Found => GroupSituation::Planned,
            GroupPreemptionOutcome::NotEligible => GroupSituation::NotEligible,
            GroupPreemptionOutcome::NoVictims => GroupSituation::NoVictims,
            GroupPreemptionOutcome::DoesNotHelp => GroupSituation::DoesNotHelp,
            GroupPreemptionOutcome::Ongoing => GroupSituation::InProgress,
            GroupPreemptionOutcome::Error => {
                return Err(PreemptError::CycleFailed {
                    pod: key,
                    message: p.message.clone(),
                });
            }
        },
        _ => GroupSituation::NotTried,
    };
    let actions = match (&preemption, situation) {
        (Some(p), GroupSituation::Planned) => {
            let pod = |namespace: &str, name: &str| -> Option<Arc<PodInfo>> {
                snapshot.pod(namespace, name).cloned()
            };
            let victims: Vec<Arc<PodInfo>> = p
                .nodes
                .iter()
                .flat_map(|n| n.victims.iter())
                .filter_map(|v| pod(&v.namespace, &v.name))
                .collect();
            let nominations: Vec<(Arc<PodInfo>, String)> = p
                .nominations
                .iter()
                .filter_map(|n| Some((pod(namespace, &n.pod)?, n.node.clone())))
                .collect();
            let uid = snapshot
                .pod_group(namespace, group)
                .and_then(|g| g.metadata.uid.clone())
                .unwrap_or_default();
            prepare_group_candidate(&victims, &nominations, &uid, &scheduler_name, mode)
        }
        _ => Vec::new(),
    };
    Ok(GroupPreemptReport {
        pod_group: key,
        kube_version: engine.features().version,
        situation,
        summary,
        message: diagnosis.message,
        preemption,
        mode,
        dry_run: DryRunView::Client,
        actions,
        results: None,
        complete: None,
    })
}

/// Why a fresh drill does not carry out the plan that was confirmed: another situation, other
/// victims (by UID) or other nominations.
fn what_changed(before: &GroupPreemptReport, after: &GroupPreemptReport) -> Option<String> {
    if after.situation != GroupSituation::Planned {
        return Some(format!(
            "the group's preemption is now {:?}: {}",
            after.situation,
            after
                .preemption
                .as_ref()
                .map_or(after.summary.as_str(), |p| p.message.as_str())
        ));
    }
    let victims = |r: &GroupPreemptReport| -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = r
            .preemption
            .iter()
            .flat_map(|p| p.nodes.iter().flat_map(|n| n.victims.iter()))
            .map(|v| (format!("{}/{}", v.namespace, v.name), v.uid.clone()))
            .collect();
        v.sort();
        v
    };
    let (old, new) = (victims(before), victims(after));
    if old != new {
        let names = |v: &[(String, String)]| v.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ");
        return Some(format!(
            "the victims are now [{}] instead of [{}]",
            names(&new),
            names(&old)
        ));
    }
    let nominations = |r: &GroupPreemptReport| r.preemption.as_ref().map(|p| p.nominations.clone());
    (nominations(before) != nominations(after))
        .then(|| "the group's pods would now be nominated to other nodes".to_string())
}

impl GroupPlanned {
    /// After the confirmation: reads the cluster again and plans again; the fresh plan replaces the
    /// shown one only when it removes the same pods and nominates the same nodes.
    pub fn recheck(&mut self, args: &PreemptArgs) -> Result<(), PreemptError> {
        let cluster = cluster_to_execute_on(self.cluster.as_ref())?;
        let reread = |e: PreemptError| PreemptError::Reread(Box::new(e));
        let (objects, _warnings) = cluster.load(None).map_err(|e| reread(e.into()))?;
        let fresh = evaluate_group(
            &self.replan.engine,
            objects,
            &self.replan.namespace,
            &self.replan.group,
            args.profile.as_deref(),
            self.report.mode,
        )
        .map_err(reread)?;
        let changed = what_changed(&self.report, &fresh);
        let dry_run = self.report.dry_run;
        self.report = GroupPreemptReport { dry_run, ..fresh };
        match changed {
            Some(reason) => Err(PreemptError::Changed {
                reason,
                replanned: true,
            }),
            None => Ok(()),
        }
    }

    /// Executes the plan (with dryRun=All for `--dry-run=server`), reporting each action to
    /// `progress`.
    pub fn execute(&mut self, progress: impl FnMut(usize, usize, &ActionResult)) -> Result<(), PreemptError> {
        let cluster = cluster_to_execute_on(self.cluster.as_ref())?;
        let (results, outcome) = run_plan(
            cluster,
            &self.report.actions,
            self.report.dry_run == DryRunView::Server,
            |_| "a PodDisruptionBudget".to_string(),
            progress,
        );
        self.report.complete = Some(outcome.is_ok());
        self.report.results = Some(results);
        outcome
    }
}
