//! `triage`: every pending pod of a scope at once, grouped by the workload it belongs to and by root
//! cause. Pods kube-scheduler cannot tell apart (replicas of one template) are evaluated once
//! ([`sched_core::triage`]); shapes are evaluated in parallel, stopping at the first feasible node for
//! pods that fit. For pods that fit nowhere, every filter runs on every node (diagnostic mode) to find
//! every blocker and the smallest fixes ([`crate::diagnosis::fixes`]). The pods of a pod group that
//! kube-scheduler decides together (gang scheduling) are triaged as one group, one line each.

use std::collections::{BTreeMap, HashMap};
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rayon::prelude::*;
use sched_core::diagnosis::pod_group::{Depth, PodGroupReport, diagnose_pod_group};
use sched_core::dra::templates::claims_not_created;
use sched_core::engine::{Framework, ScheduleOptions, reason_histogram, schedule_cycle};
use sched_core::explain::{Explanation, Outcome};
use sched_core::features::KubeVersion;
use sched_core::labels::{Selector, SelectorSyntaxError};
use sched_core::schedule::pod_group::runs_pod_group_cycle;
use sched_core::snapshot::PodDetail;
use sched_core::snapshot::pod_groups::{gang_min_count, pod_group_name};
use sched_core::triage::{
    RootCause, Workload, WorkloadError, WorkloadIndex, group_by_shape, parse_workload, root_cause,
};
use sched_core::{Engine, PodInfo, Snapshot};
use serde::Serialize;

use crate::cli::{GlobalArgs, TriageArgs};
use crate::diagnosis::fixes::{Blockers, Fix, diagnose};
use crate::diagnosis::headline::claims_not_created_headline;
use crate::diagnosis::still_pending::{PendingFinding, SchedulerLease, SchedulerPresence, why_still_pending};
use crate::source::load::{LoadError, Loaded, keep_until_exit, load_keeping_cluster};
use crate::source::pods::ResolveError;
use crate::source::what_if::{Applied, WhatIf, WhatIfError};

/// Why `triage` could not answer.
#[derive(Debug, thiserror::Error)]
pub enum TriageError {
    /// The cluster could not be loaded.
    #[error(transparent)]
    Load(Box<LoadError>),
    /// `--config` could not be loaded or a profile not built.
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    /// A workload argument is not `KIND/NAME`.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// `-l` does not parse.
    #[error(transparent)]
    Selector(#[from] SelectorSyntaxError),
    /// A what-if flag is wrong.
    #[error(transparent)]
    WhatIf(#[from] WhatIfError),
}

impl From<LoadError> for TriageError {
    fn from(e: LoadError) -> Self {
        TriageError::Load(Box::new(e))
    }
}

/// What happens to a group of pods now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// No node fits (or a PreFilter plugin rejects the pod).
    Unschedulable,
    /// The scheduling cycle would fail with an error.
    Error,
    /// Scheduling gates keep kube-scheduler from trying.
    Gated,
    /// ResourceClaims the pods get from templates do not exist yet: kube-scheduler does not try them
    /// until kube-controller-manager's resourceclaim controller has made them.
    ClaimsNotCreated,
    /// No profile of the configuration has the pod's schedulerName: kube-scheduler ignores it.
    OtherScheduler,
    /// A node fits: kube-scheduler would bind it on its next attempt.
    Fits,
}

/// How many nodes gave one reason (kube-scheduler's FailedScheduling counts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReasonCount {
    /// The reason, as kube-scheduler writes it.
    pub reason: String,
    /// How many nodes; none for a PreFilter rejection, which is about the pod, not a count of nodes
    /// (kube-scheduler's message has no count there either).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<usize>,
}

/// The pods of one workload that get the same answer.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadVerdict {
    /// The workload.
    pub workload: Workload,
    /// Its pending pods with this answer (names).
    pub pods: Vec<String>,
    /// The verdict.
    pub verdict: Verdict,
    /// kube-scheduler's message (FailedScheduling, the gate, the error), or "fits on NODE".
    pub message: String,
    /// For an unschedulable pod: each reason with its node count, most nodes first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<ReasonCount>,
    /// For an unschedulable pod: what must change, and why that ([`sched_core::triage::cause`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_cause: Option<RootCause>,
    /// For a pod that fits: a node it fits on (the first found, not necessarily kube-scheduler's pick).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fits_on: Option<String>,
    /// Every filter that rejects each node, in groups (diagnostic mode: kube-scheduler stops at the
    /// first).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blockers: Vec<Blockers>,
    /// The smallest changes that make the pod fit somewhere, smallest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fixes: Vec<Fix>,
    /// For pods that fit or are gated: why they are still Pending (the group's first pod's condition
    /// and nomination, the scheduler's Lease on a live cluster; `explain POD` adds its events).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub still_pending: Vec<PendingFinding>,
}

/// Workloads that share a root cause.
#[derive(Debug, Clone, Serialize)]
pub struct Cause {
    /// The verdict.
    pub verdict: Verdict,
    /// The root cause: for an unschedulable pod, what must change (the PreFilter rejection, or the
    /// reason of the plugin that rejects every node, else the one whose change alone opens the most
    /// nodes; see [`sched_core::triage::cause`]), without counts; otherwise the message.
    pub cause: String,
    /// How many pods.
    pub pods: usize,
    /// The workloads, most pods first.
    pub workloads: Vec<WorkloadVerdict>,
}

/// The pending pods of one pod group: kube-scheduler decides them together (all or nothing), so
/// triage gives the group one line, never one per pod.
#[derive(Debug, Clone, Serialize)]
pub struct GroupTriage {
    /// `namespace/name` of the PodGroup.
    pub pod_group: String,
    /// Its pending pods in the scope (names).
    pub pods: Vec<String>,
    /// The group in one line (the text output's).
    pub summary: String,
    /// The group's diagnosis (quorum, verdict, each pod, blockers).
    pub report: PodGroupReport,
}

/// What `triage` found.
#[derive(Debug, Clone, Serialize)]
pub struct TriageReport {
    /// "namespace X" or "any namespace", and the selection.
    pub scope: String,
    /// Pending pods triaged.
    pub pods: usize,
    /// Distinct scheduling shapes evaluated.
    pub shapes: usize,
    /// Nodes in the cluster.
    pub nodes: usize,
    /// The kube-scheduler release whose semantics decided (the API server's, the snapshot file's, or
    /// --kube-version's).
    pub kube_version: KubeVersion,
    /// The what-if changes applied.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub what_if: Vec<Applied>,
    /// Root causes, the ones that keep the most pods pending first; pods that fit come last. Pods of
    /// a pod group the pod group cycle decides are in `pod_groups` instead.
    pub causes: Vec<Cause>,
    /// One entry per pod group with pending pods (when the profile runs the pod group cycle), the
    /// groups kube-scheduler holds back first, then by name.
    pub pod_groups: Vec<GroupTriage>,
}

impl TriageReport {
    /// Pods that cannot be scheduled now (every cause but "fits").
    pub fn stuck_pods(&self) -> usize {
        let in_causes: usize = self
            .causes
            .iter()
            .filter(|c| c.verdict != Verdict::Fits)
            .map(|c| c.pods)
            .sum();
        let in_groups: usize = self
            .pod_groups
            .iter()
            .filter(|g| !g.report.schedulable())
            .map(|g| g.pods.len())
            .sum();
        in_causes + in_groups
    }
}

/// The answer plus what to tell the user on stderr.
#[derive(Debug)]
pub struct TriageOutput {
    /// The answer.
    pub report: TriageReport,
    /// Always shown.
    pub warnings: Vec<String>,
    /// Shown with `-v 1`.
    pub notes: Vec<String>,
}

/// Which pending pods to triage.
struct Scope {
    namespace: Option<String>,
    selector: Selector,
    workloads: Vec<Workload>,
}

impl Scope {
    fn describe(&self, selector_text: Option<&str>) -> String {
        let mut text = match &self.namespace {
            Some(ns) => format!("namespace \"{ns}\""),
            None => "any namespace".to_string(),
        };
        if let Some(s) = selector_text {
            text.push_str(&format!(", -l {s}"));
        }
        if !self.workloads.is_empty() {
            let names: Vec<String> = self.workloads.iter().map(Workload::to_string).collect();
            text.push_str(&format!(", {}", names.join(" ")));
        }
        text
    }

    fn selects(&self, index: &WorkloadIndex, pod: &PodInfo) -> bool {
        self.namespace.as_deref().is_none_or(|ns| pod.namespace() == ns)
            && self.selector.matches_opt(pod.labels())
            && (self.workloads.is_empty() || self.workloads.iter().any(|w| index.belongs_to(pod, w)))
    }
}

/// Runs `triage`.
pub fn run(global: &GlobalArgs, args: &TriageArgs) -> Result<TriageOutput, TriageError> {
    let (
        Loaded {
            mut objects,
            default_namespace,
            warnings,
            mut notes,
            release,
            ..
        },
        cluster,
    ) = load_keeping_cluster(
        global,
        args.from.as_deref(),
        None,
        &PodDetail::CompactPlaced {
            keep: Default::default(),
        },
        &args.release,
    )?;
    let engine =
        Engine::for_features(args.config.as_deref(), release.features).map_err(ResolveError::from)?;
    // One read of the scheduler's Lease serves every "why still pending" (events are per pod: explain).
    let scheduler = cluster.as_ref().and_then(|c| match c.scheduler_lease() {
        Ok(Some(lease)) => Some(SchedulerPresence::Lease(SchedulerLease::from_lease(&lease))),
        Ok(None) => Some(SchedulerPresence::NoLease),
        Err(e) => {
            notes.push(format!(
                "still pending: could not read kube-scheduler's Lease ({e}): whether one leads is not judged"
            ));
            None
        }
    });
    let namespace = global.namespace.clone().unwrap_or(default_namespace);
    let scope = Scope {
        namespace: (!global.all_namespaces).then(|| namespace.clone()),
        selector: Selector::parse(args.selector.as_deref().unwrap_or(""))?,
        workloads: args
            .workloads
            .iter()
            .map(|w| parse_workload(w, &namespace))
            .collect::<Result<_, _>>()?,
    };
    let what_if = WhatIf::from_args(&args.what_if, &namespace)?;
    let mut applied = what_if.apply_to_cluster(&mut objects)?;
    // --set changes every pending pod in the namespace scope (the workload filter needs the snapshot).
    if !args.what_if.set.is_empty() {
        let priority_classes = objects.priority_classes.clone();
        let mut changed = 0;
        let mut effects = Vec::new();
        for pod in objects.pods.iter_mut().filter(|p| {
            p.spec
                .as_ref()
                .is_none_or(|s| s.node_name.as_deref().unwrap_or("").is_empty())
                && scope
                    .namespace
                    .as_deref()
                    .is_none_or(|ns| p.metadata.namespace.as_deref() == Some(ns))
        }) {
            effects = what_if.apply_to_pod(pod, &priority_classes)?;
            changed += 1;
        }
        applied.extend(effects.into_iter().map(|mut a| {
            a.effect = format!("{} (on each of {changed} pending pod(s))", a.effect);
            a
        }));
    }

    let started = Instant::now();
    let snapshot = Arc::new(engine.snapshot(objects));
    keep_until_exit(&snapshot);
    notes.push(format!(
        "built the snapshot in {:.0} ms",
        started.elapsed().as_secs_f64() * 1000.0
    ));
    let report = triage(
        &engine,
        &snapshot,
        &scope,
        scope.describe(args.selector.as_deref()),
        applied,
        scheduler.as_ref(),
        global.verbosity,
    )?;
    notes.push(format!(
        "evaluated {} pod(s) as {} shape(s) in {:.0} ms",
        report.pods,
        report.shapes,
        started.elapsed().as_secs_f64() * 1000.0
    ));
    Ok(TriageOutput {
        report,
        warnings,
        notes,
    })
}

/// One shape's answer.
struct ShapeAnswer {
    /// The evaluation (none for another scheduler's pod).
    explanation: Option<Explanation>,
    verdict: Verdict,
    message: String,
    reasons: Vec<ReasonCount>,
    root_cause: Option<RootCause>,
    fits_on: Option<String>,
    blockers: Vec<Blockers>,
    fixes: Vec<Fix>,
}

fn evaluate_shape(
    engine: &Engine,
    frameworks: &HashMap<String, Framework>,
    snapshot: &Arc<Snapshot>,
    pod: &PodInfo,
) -> ShapeAnswer {
    let profile = engine.profile_for(&pod.pod).ok();
    let Some(fwk) = profile.and_then(|p| frameworks.get(&p.scheduler_name)) else {
        return ShapeAnswer {
            explanation: None,
            verdict: Verdict::OtherScheduler,
            message: format!(
                "schedulerName {:?} names no profile of the configuration: kube-scheduler ignores the pod",
                pod.scheduler_name()
            ),
            reasons: Vec::new(),
            root_cause: None,
            fits_on: None,
            blockers: Vec::new(),
            fixes: Vec::new(),
        };
    };
    let options = ScheduleOptions {
        trace_filters: false,
        stop_at_first_feasible: true,
        sample_from: None,
        ..engine.schedule_options(false)
    };
    let cycle = schedule_cycle(fwk, pod, options);
    let e = &cycle.explanation;
    let mut answer = ShapeAnswer {
        explanation: None,
        verdict: match e.outcome {
            Outcome::Scheduled => Verdict::Fits,
            Outcome::Unschedulable => Verdict::Unschedulable,
            // DynamicResources' PreEnqueue, not a scheduling gate: the pod has none.
            Outcome::Gated
                if pod
                    .pod
                    .spec
                    .as_ref()
                    .is_none_or(|s| s.scheduling_gates.as_ref().is_none_or(Vec::is_empty))
                    && !claims_not_created(snapshot, &pod.pod).is_empty() =>
            {
                Verdict::ClaimsNotCreated
            }
            Outcome::Gated => Verdict::Gated,
            Outcome::Error => Verdict::Error,
        },
        message: e.message.clone(),
        reasons: Vec::new(),
        root_cause: None,
        fits_on: None,
        blockers: Vec::new(),
        fixes: Vec::new(),
    };
    match e.outcome {
        Outcome::Scheduled => {
            answer.fits_on = e.selected.first().cloned();
            answer.message = format!(
                "fits on {}",
                e.selected.first().map(String::as_str).unwrap_or("?")
            );
        }
        Outcome::Unschedulable => {
            answer.reasons = match &e.pre_filter_message {
                Some(m) => vec![ReasonCount {
                    reason: m.clone(),
                    nodes: None,
                }],
                None => {
                    let mut r: Vec<ReasonCount> = reason_histogram(e.nodes_total, &cycle.node_statuses)
                        .into_iter()
                        .map(|(reason, nodes)| ReasonCount {
                            reason: reason.to_string(),
                            nodes: Some(nodes),
                        })
                        .collect();
                    r.sort_by(|a, b| b.nodes.cmp(&a.nodes).then_with(|| a.reason.cmp(&b.reason)));
                    r
                }
            };
            let d = diagnose(e, fwk, &cycle.state, pod, snapshot);
            answer.root_cause = root_cause(e.pre_filter_message.as_deref(), &d.rejections, e.nodes_total);
            answer.blockers = d.blockers;
            answer.fixes = d.fixes;
        }
        Outcome::Gated if answer.verdict == Verdict::ClaimsNotCreated => {
            // The same words for every pod of a workload (kube-scheduler's name the pod): the templates.
            answer.message = claims_not_created_headline(None, &claims_not_created(snapshot, &pod.pod));
        }
        Outcome::Gated | Outcome::Error => {}
    }
    answer.explanation = Some(cycle.explanation);
    answer
}

/// Prints `evaluated N/M pods` on stderr while `done` grows, when stderr is a terminal or `-v 1`.
fn progress(
    total: usize,
    done: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    verbosity: u8,
) -> Option<std::thread::JoinHandle<()>> {
    let terminal = std::io::stderr().is_terminal();
    if !terminal && verbosity == 0 {
        return None;
    }
    Some(std::thread::spawn(move || {
        let started = Instant::now();
        let mut last_line = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(100));
            let every = if terminal {
                Duration::from_millis(200)
            } else {
                Duration::from_secs(2)
            };
            if started.elapsed() < Duration::from_millis(500) || last_line.elapsed() < every {
                continue;
            }
            last_line = Instant::now();
            let n = done.load(Ordering::Relaxed);
            if terminal {
                eprint!("\revaluated {n}/{total} pods ");
            } else {
                eprintln!("evaluated {n}/{total} pods");
            }
        }
        if terminal && started.elapsed() >= Duration::from_millis(500) {
            eprint!("\r\x1b[K");
        }
    }))
}

fn triage(
    engine: &Engine,
    snapshot: &Arc<Snapshot>,
    scope: &Scope,
    scope_text: String,
    what_if: Vec<Applied>,
    scheduler: Option<&SchedulerPresence>,
    verbosity: u8,
) -> Result<TriageReport, TriageError> {
    let index = WorkloadIndex::new(snapshot);
    let mut pending: Vec<Arc<PodInfo>> = snapshot
        .pending_pods
        .iter()
        .filter(|p| scope.selects(&index, p))
        .cloned()
        .collect();
    pending.sort_by_key(|p| p.key());
    let total = pending.len();

    // One framework per profile: building one prepares per-snapshot state (DRA, volumes).
    let mut frameworks = HashMap::new();
    for pod in &pending {
        if let Ok(profile) = engine.profile_for(&pod.pod)
            && !frameworks.contains_key(&profile.scheduler_name)
        {
            let fwk = engine
                .framework(profile, snapshot.clone())
                .map_err(ResolveError::from)?;
            frameworks.insert(profile.scheduler_name.clone(), fwk);
        }
    }
    let (pod_groups, pending) = triage_pod_groups(engine, &frameworks, snapshot, pending);
    let shapes = group_by_shape(&pending);

    let done = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let reporter = progress(pending.len(), done.clone(), stop.clone(), verbosity);
    let answers: Vec<ShapeAnswer> = shapes
        .par_iter()
        .map(|g| {
            let answer = evaluate_shape(engine, &frameworks, snapshot, g.representative());
            done.fetch_add(g.pods.len(), Ordering::Relaxed);
            answer
        })
        .collect();
    stop.store(true, Ordering::Relaxed);
    if let Some(r) = reporter {
        let _ = r.join();
    }

    // (workload, verdict, message) → the pods with that answer.
    type Group<'a> = (Vec<String>, &'a ShapeAnswer, &'a Arc<PodInfo>);
    let mut by_workload: BTreeMap<(Workload, Verdict, String), Group<'_>> = BTreeMap::new();
    for (g, answer) in shapes.iter().zip(&answers) {
        for pod in &g.pods {
            by_workload
                .entry((index.workload_of(pod), answer.verdict, answer.message.clone()))
                .or_insert_with(|| (Vec::new(), answer, pod))
                .0
                .push(pod.name().to_string());
        }
    }
    let now = k8s_openapi::jiff::Timestamp::now();
    let mut causes: BTreeMap<(Verdict, String), Cause> = BTreeMap::new();
    for ((workload, verdict, message), (pods, answer, first)) in by_workload {
        // Why pods that kube-scheduler could place (or is kept from trying) are still Pending; the
        // first pod of the group speaks for it (its condition, its nomination).
        let still_pending = match (&answer.explanation, verdict) {
            (Some(e), Verdict::Fits | Verdict::Gated | Verdict::ClaimsNotCreated) => {
                why_still_pending(first, e, true, snapshot, scheduler, &[], now)
            }
            (_, Verdict::OtherScheduler) => vec![PendingFinding {
                kind: crate::diagnosis::still_pending::PendingKind::NoProfile,
                message: message.clone(),
                pods: Vec::new(),
            }],
            _ => Vec::new(),
        };
        let cause = match verdict {
            Verdict::Unschedulable => answer
                .root_cause
                .as_ref()
                .map(|c| c.reason.clone())
                .unwrap_or_else(|| message.clone()),
            Verdict::Fits => "fits now".to_string(),
            _ => message.clone(),
        };
        let entry = causes.entry((verdict, cause.clone())).or_insert_with(|| Cause {
            verdict,
            cause,
            pods: 0,
            workloads: Vec::new(),
        });
        entry.pods += pods.len();
        entry.workloads.push(WorkloadVerdict {
            workload,
            pods,
            verdict,
            message: if verdict == Verdict::Fits {
                String::new()
            } else {
                message
            },
            reasons: answer.reasons.clone(),
            root_cause: answer.root_cause.clone(),
            fits_on: answer.fits_on.clone(),
            blockers: answer.blockers.clone(),
            fixes: answer.fixes.clone(),
            still_pending,
        });
    }
    let mut causes: Vec<Cause> = causes.into_values().collect();
    for c in &mut causes {
        c.workloads.sort_by(|a, b| {
            b.pods
                .len()
                .cmp(&a.pods.len())
                .then_with(|| a.workload.cmp(&b.workload))
        });
    }
    causes.sort_by(|a, b| {
        (a.verdict == Verdict::Fits)
            .cmp(&(b.verdict == Verdict::Fits))
            .then(b.pods.cmp(&a.pods))
            .then_with(|| a.cause.cmp(&b.cause))
    });
    Ok(TriageReport {
        scope: scope_text,
        pods: total,
        shapes: shapes.len(),
        nodes: snapshot.nodes().len(),
        kube_version: engine.features().version,
        what_if,
        causes,
        pod_groups,
    })
}

/// Takes the pods of pod groups the pod group cycle decides out of `pending`, and diagnoses each
/// group once (its cycle, in parallel); returns the groups and the pods left.
fn triage_pod_groups(
    engine: &Engine,
    frameworks: &HashMap<String, Framework>,
    snapshot: &Arc<Snapshot>,
    pending: Vec<Arc<PodInfo>>,
) -> (Vec<GroupTriage>, Vec<Arc<PodInfo>>) {
    // Keyed by PodGroup, or by the root of the tree a PodGroup belongs to (CompositePodGroup, gate
    // on: kube-scheduler decides the tree whole, so triage gives it one line).
    let mut members: BTreeMap<(String, String), (Vec<String>, &Framework, String)> = BTreeMap::new();
    let mut rest = Vec::with_capacity(pending.len());
    for pod in pending {
        let fwk = engine
            .profile_for(&pod.pod)
            .ok()
            .and_then(|p| frameworks.get(&p.scheduler_name));
        let group = pod_group_name(&pod.pod).map(str::to_string);
        match (fwk, group) {
            (Some(fwk), Some(group)) if decided_as_group(fwk, snapshot, pod.namespace(), &group) => {
                let line = match tree_root(fwk, snapshot, pod.namespace(), &group) {
                    Some(root) => format!("{COMPOSITE_LINE_PREFIX}{root}"),
                    None => group.clone(),
                };
                members
                    .entry((pod.namespace().to_string(), line))
                    .or_insert_with(|| (Vec::new(), fwk, group))
                    .0
                    .push(pod.name().to_string());
            }
            _ => rest.push(pod),
        }
    }
    let nodes_total = snapshot.nodes().len();
    let mut groups: Vec<GroupTriage> = members
        .into_par_iter()
        .filter_map(|((namespace, line), (pods, fwk, group))| {
            let report = diagnose_pod_group(engine, fwk, &namespace, &group, Depth::Summary)?;
            let summary = match &report.tree {
                Some(tree) => format!("{} pending pods of the tree: {}", pods.len(), tree.summary()),
                None => report.summary(nodes_total),
            };
            Some(GroupTriage {
                pod_group: sched_core::snapshot::namespaced_key(&namespace, &line),
                pods,
                summary,
                report,
            })
        })
        .collect();
    groups.sort_by(|a, b| {
        a.report
            .schedulable()
            .cmp(&b.report.schedulable())
            .then_with(|| a.pod_group.cmp(&b.pod_group))
    });
    (groups, rest)
}

/// What a tree's triage line is named after its root: kubectl's resource name.
const COMPOSITE_LINE_PREFIX: &str = "compositepodgroup/";

/// The root of the tree the PodGroup `namespace/group` belongs to, when `fwk` schedules trees.
fn tree_root(fwk: &Framework, snapshot: &Snapshot, namespace: &str, group: &str) -> Option<String> {
    if !sched_core::schedule::composite::schedules_trees(fwk) {
        return None;
    }
    sched_core::snapshot::pod_group_tree::root_of(snapshot, namespace, group).ok()?
}

/// True when kube-scheduler decides the pods of `namespace/group` together: the profile runs the pod
/// group cycle and the PodGroup is a gang or does not exist yet (its pods are held for it).
fn decided_as_group(fwk: &Framework, snapshot: &Snapshot, namespace: &str, group: &str) -> bool {
    runs_pod_group_cycle(fwk)
        && snapshot
            .pod_group(namespace, group)
            .is_none_or(|g| gang_min_count(g).is_some())
}

/// `triage -A` on objects handed in rather than listed (the in-cluster explainer's pending-reason
/// metrics, `sched_webhook::explainer::pending`): every pending pod of every namespace, evaluated as
/// `kubectl sched triage -A` evaluates a listing of the same objects with the default scheduler
/// configuration. `scheduler` is kube-scheduler's Lease when the caller read it (None: not judged).
pub fn triage_all_namespaces(
    loaded: Loaded,
    scheduler: Option<&SchedulerPresence>,
) -> Result<TriageReport, TriageError> {
    let engine = Engine::for_features(None, loaded.release.features).map_err(ResolveError::from)?;
    let snapshot = Arc::new(engine.snapshot(loaded.objects));
    let scope = Scope {
        namespace: None,
        selector: Selector::parse("")?,
        workloads: Vec::new(),
    };
    let text = scope.describe(None);
    triage(&engine, &snapshot, &scope, text, Vec::new(), scheduler, 0)
}
