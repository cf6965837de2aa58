//! `explain`: loads the cluster, resolves the pod and its profile (`crate::source::pods`), evaluates the pod
//! with sched-core and gathers what the output shows (bound-pod check, hints, one node in detail).
//! `podgroup/NAME` and `workload/NAME` are explained as groups ([`pod_group`]).

pub mod node_pools;
pub mod pod_group;
pub mod via;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use sched_core::diagnosis::{Finding, Report, diagnose_pod};
use sched_core::engine::{
    CycleState, DryRunOptions, FilterVerdict, Framework, NodeToStatus, dry_run, schedule, schedule_cycle,
};
use sched_core::explain::{Explanation, NodeExplanation, Outcome, ScoreView};
use sched_core::features::KubeVersion;
use sched_core::{ClusterObjects, Code, Engine, PodInfo, Snapshot};
use serde::Serialize;

use crate::cli::{ExplainArgs, GlobalArgs};
use crate::diagnosis::hints::{Hint, HintInput, HintKind, hints};
use crate::diagnosis::node_resources::{ResourceUse, breakdown};
use crate::diagnosis::still_pending::{LiveFacts, PendingFinding, why_still_pending};
use crate::source::load::{
    Cluster, LoadError, Loaded, evaluation_detail, keep_until_exit, load_keeping_cluster,
};
use crate::source::pods::{ResolveError, Subject, pod_name, subject_with};
use crate::source::what_if::{Applied, WhatIf, WhatIfError};

/// Why `explain` could not answer.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// The cluster could not be loaded.
    #[error(transparent)]
    Load(Box<LoadError>),
    /// The pod, its file, its profile or `--config` could not be resolved.
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    /// A what-if flag is malformed or names something that is not there.
    #[error(transparent)]
    WhatIf(#[from] WhatIfError),
    /// `podgroup/NAME` or `workload/NAME` names nothing.
    #[error("{kind} \"{name}\" not found in namespace \"{namespace}\" ({origin})")]
    NotFound {
        /// kubectl's resource name.
        kind: &'static str,
        /// The name.
        name: String,
        /// The namespace looked in.
        namespace: String,
        /// The file or API server.
        origin: String,
    },
    /// A flag about one pod given with `podgroup/NAME` or `workload/NAME`.
    #[error("{flag} applies to a pod, not to {target}")]
    NotForGroups {
        /// The flag.
        flag: &'static str,
        /// The group argument.
        target: String,
    },
    /// `--via cluster` with a flag the cluster's explainer does not take.
    #[error("--via cluster: the cluster's explainer does not take {flag}; use --via local")]
    NotServed {
        /// The flag.
        flag: &'static str,
    },
    /// `--instance-types` cannot be read.
    #[error(transparent)]
    NodePools(#[from] node_pools::NodePoolsError),
    /// `--node` names no node of the snapshot.
    #[error("node \"{node}\" not found ({origin})")]
    NodeNotFound {
        /// The node.
        node: String,
        /// The file or API server.
        origin: String,
    },
}

impl From<LoadError> for ExplainError {
    fn from(e: LoadError) -> Self {
        ExplainError::Load(Box::new(e))
    }
}

/// For a pod that is already bound: is its node still a good place for it?
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BoundCheck {
    /// The node it is bound to.
    pub node: String,
    /// False when that node is no longer in the cluster.
    pub node_exists: bool,
    /// The node still passes every filter.
    pub still_feasible: bool,
    /// The node is (one of) the top-scoring node(s).
    pub still_best: bool,
    /// The node's score now.
    pub score: Option<i64>,
}

/// Where one filter's verdict in the node detail comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reach {
    /// kube-scheduler runs it on this node (this is its verdict).
    Ran,
    /// kube-scheduler stops before it (an earlier filter rejected the node); shown for information.
    NotReached,
    /// Its PreFilter returned Skip: kube-scheduler does not run it for this pod.
    Skipped,
}

/// One filter in the node detail.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FilterRow {
    /// The plugin.
    pub plugin: String,
    /// Whether kube-scheduler reaches it.
    pub reach: Reach,
    /// Its code (null when skipped).
    pub code: Option<Code>,
    /// Its reasons.
    pub reasons: Vec<String>,
}

/// One score plugin in the node detail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScoreRow {
    /// The plugin.
    pub plugin: String,
    /// Its weight in the profile.
    pub weight: i64,
    /// Its contribution (null when it did not score this pod, or the node is infeasible).
    pub score: Option<ScoreView>,
}

/// `--node`: one node, plugin by plugin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeDetail {
    /// The node's entry in the explanation.
    pub node: NodeExplanation,
    /// Every filter of the profile, in order (empty when PreFilter rejected the pod).
    pub filters: Vec<FilterRow>,
    /// Every score plugin of the profile, in order.
    pub scores: Vec<ScoreRow>,
    /// cpu, memory, pods and the other resources the pod requests: the node's allocatable, what its
    /// pods request, what is free, what the pod asks, and the largest users.
    pub resources: Vec<ResourceUse>,
    /// Why each rejecting filter rejects this node: the findings that concern it (docs/reasons.md).
    pub findings: Vec<Finding>,
}

/// What `explain POD` found.
#[derive(Debug, Clone, Serialize)]
pub struct ExplainReport {
    /// The engine's explanation (the JSON contract's fields).
    #[serde(flatten)]
    pub explanation: Explanation,
    /// The kube-scheduler release whose semantics decided (the API server's, the snapshot file's, or
    /// --kube-version's).
    pub kube_version: KubeVersion,
    /// The what-if flags applied before the evaluation (empty: the cluster as it is).
    pub what_if: Vec<Applied>,
    /// For a bound pod: how its node compares now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound: Option<BoundCheck>,
    /// Every rejecting filter of every rejected node, explained down to the object at fault, with a
    /// stable reason code (docs/reasons.md); empty when the pod fits.
    pub findings: Vec<Finding>,
    /// Hints.
    pub hints: Vec<Hint>,
    /// `--node`'s detail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_detail: Option<NodeDetail>,
    /// For a gated pod: the evaluation once its gates are removed (the table shows this one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub once_ungated: Option<Explanation>,
    /// For a pod with ResourceClaims that does not fit: every claim's and request's device counts per
    /// node, and why (the hints repeat its conclusions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dra: Option<sched_core::diagnosis::Diagnosis>,
    /// For a pending pod named on the command line (not `-f`'s, not with what-if flags): why it is
    /// still Pending, where kube-scheduler's last word and the verdict now differ (see
    /// `still_pending`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub still_pending: Option<Vec<PendingFinding>>,
    /// The profile's score plugins and weights (the wide table's columns).
    #[serde(skip)]
    pub score_plugins: Vec<(String, i64)>,
    /// For a gated pod: its `spec.schedulingGates`, by name, in order (the headline lists them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scheduling_gates: Vec<String>,
    /// For a pod kube-scheduler does not try because ResourceClaims it gets from templates do not
    /// exist yet: those claims, their templates and the names the resourceclaim controller gives them
    /// (the headline names them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub claims_not_created: Vec<sched_core::dra::templates::ClaimNotCreated>,
    /// For a pod of a pod group (when the profile runs the pod group cycle): the group's quorum and
    /// verdict in short; `explain podgroup/NAME` has the rest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_group: Option<sched_core::diagnosis::PodGroupReport>,
    /// For a pod that fits no node, in a cluster with Karpenter NodePools: would a new node of each
    /// pool take it, and what Karpenter would do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_pools: Option<node_pools::NodePoolsSection>,
}

/// One pending pod of `--all-pending`.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum PendingEntry {
    /// Evaluated with its profile.
    Evaluated(Box<Explanation>),
    /// No profile of the configuration handles its schedulerName.
    NotHandled {
        /// `namespace/name`.
        pod: String,
        /// Its schedulerName.
        scheduler_name: String,
    },
}

/// What `explain` produced.
#[derive(Debug)]
pub enum ExplainResult {
    /// One pod.
    One(Box<ExplainReport>),
    /// `podgroup/NAME` or `workload/NAME`.
    Group(Box<pod_group::GroupExplainReport>),
    /// `--all-pending` (in `namespace/name` order); `scope` says which namespaces were looked at.
    AllPending {
        /// The pods.
        entries: Vec<PendingEntry>,
        /// "namespace X" or "any namespace".
        scope: String,
        /// The what-if flags applied to the cluster first.
        what_if: Vec<Applied>,
    },
}

/// `--exit-code`'s code when a pod cannot be scheduled: the one `preempt` exits with when it cannot
/// make the pod fit, so that scripts test one number.
pub const EXIT_CANNOT_SCHEDULE: u8 = 3;

impl ExplainResult {
    /// True when the pod would be scheduled (with `--all-pending`: every pod this configuration
    /// handles; another scheduler's pods are not judged).
    pub fn all_scheduled(&self) -> bool {
        match self {
            ExplainResult::One(r) => r.explanation.outcome == Outcome::Scheduled,
            ExplainResult::Group(g) => g.all_scheduled(),
            ExplainResult::AllPending { entries, .. } => entries.iter().all(|e| match e {
                PendingEntry::Evaluated(e) => e.outcome == Outcome::Scheduled,
                PendingEntry::NotHandled { .. } => true,
            }),
        }
    }

    /// The process exit code after a successful run: 0, or [`EXIT_CANNOT_SCHEDULE`] when `exit_code`
    /// (`--exit-code`) is set and a pod cannot be scheduled.
    pub fn exit_code(&self, exit_code: bool) -> u8 {
        if exit_code && !self.all_scheduled() {
            EXIT_CANNOT_SCHEDULE
        } else {
            0
        }
    }
}

/// The answer plus what to tell the user on stderr.
#[derive(Debug)]
pub struct ExplainOutput {
    /// The answer.
    pub result: ExplainResult,
    /// Always shown.
    pub warnings: Vec<String>,
    /// Shown with `-v 1`.
    pub notes: Vec<String>,
    /// Shown with `-v 2`: how long each phase took.
    pub timings: Vec<String>,
}

/// Runs `explain`.
pub fn run(global: &GlobalArgs, args: &ExplainArgs) -> Result<ExplainOutput, ExplainError> {
    let group = args.pod.as_deref().and_then(pod_group::group_target);
    if let (Some(_), Some(arg)) = (&group, args.pod.as_deref()) {
        refuse_pod_flags(args, arg)?;
    }
    let target = (!args.all_pending && args.filename.is_none() && group.is_none())
        .then_some(args.pod.as_deref())
        .flatten();
    let (loaded, cluster) = load_keeping_cluster(
        global,
        args.from.as_deref(),
        None,
        &evaluation_detail(global, target),
        &args.release,
    )?;
    run_loaded(global, args, loaded, cluster)
}

/// Runs `explain` on a cluster already loaded (by [`run`] from a listing or a file, or handed in by
/// the in-cluster explainer from its watch-fed snapshot); `cluster` is the connection the live facts
/// (kube-scheduler's Lease, FailedScheduling events) are read through, none for a file.
pub fn run_loaded(
    global: &GlobalArgs,
    args: &ExplainArgs,
    loaded: Loaded,
    cluster: Option<Cluster>,
) -> Result<ExplainOutput, ExplainError> {
    let group = args.pod.as_deref().and_then(pod_group::group_target);
    if let (Some(_), Some(arg)) = (&group, args.pod.as_deref()) {
        refuse_pod_flags(args, arg)?;
    }
    let Loaded {
        objects,
        origin,
        default_namespace,
        warnings,
        mut notes,
        release,
    } = loaded;
    let engine =
        Engine::for_features(args.config.as_deref(), release.features).map_err(ResolveError::from)?;
    let namespace = global.namespace.clone().unwrap_or(default_namespace);
    let what_if = WhatIf::from_args(&args.what_if, &namespace)?;
    let mut timings = Vec::new();
    let result = if let Some(group) = &group {
        let mut objects = objects;
        let applied = what_if.apply_to_cluster(&mut objects)?;
        let mut report = pod_group::explain_group(
            &engine,
            objects,
            &namespace,
            &origin,
            group,
            args.profile.as_deref(),
        )?;
        report.what_if = applied;
        ExplainResult::Group(Box::new(report))
    } else if args.all_pending {
        let scope = (!global.all_namespaces).then_some(namespace.as_str());
        let mut objects = objects;
        let applied = what_if.apply_to_cluster(&mut objects)?;
        all_pending(&engine, objects, scope, applied)?
    } else {
        ExplainResult::One(Box::new(explain_one(
            &engine,
            args,
            &what_if,
            objects,
            &namespace,
            &origin,
            cluster.as_ref(),
            &mut notes,
            &mut timings,
        )?))
    };
    Ok(ExplainOutput {
        result,
        warnings,
        notes,
        timings,
    })
}

/// The flags about one pod, refused with `podgroup/NAME` and `workload/NAME` (the what-if flags
/// that change the cluster apply to a group as to a pod).
fn refuse_pod_flags(args: &ExplainArgs, target: &str) -> Result<(), ExplainError> {
    let what_if = &args.what_if;
    let given = [
        ("--node", args.node.is_some()),
        ("--watch", args.watch),
        ("--set", !what_if.set.is_empty()),
    ];
    match given.into_iter().find(|(_, on)| *on) {
        Some((flag, _)) => Err(ExplainError::NotForGroups {
            flag,
            target: target.to_string(),
        }),
        None => Ok(()),
    }
}

fn explain_one(
    engine: &Engine,
    args: &ExplainArgs,
    what_if: &WhatIf,
    objects: ClusterObjects,
    namespace: &str,
    origin: &str,
    cluster: Option<&Cluster>,
    notes: &mut Vec<String>,
    timings: &mut Vec<String>,
) -> Result<ExplainReport, ExplainError> {
    let mut phase = Instant::now();
    let mut lap = |what: &str, timings: &mut Vec<String>| {
        timings.push(format!(
            "{what} in {:.0} ms",
            phase.elapsed().as_secs_f64() * 1000.0
        ));
        phase = Instant::now();
    };
    let catalogue = args
        .node_pools
        .instance_types
        .as_deref()
        .map(node_pools::read_catalogue)
        .transpose()?;
    let mut applied = Vec::new();
    // A pending pod whose schedulerName names no profile is still explained, with the first profile,
    // so that "why it is still Pending" can say that nothing schedules it.
    let fallback_profile = unhandled_pending_pod(engine, args, what_if, &objects, namespace);
    let Subject {
        pod: info,
        bound_node,
        snapshot,
        profile,
    } = subject_with(
        engine,
        objects,
        args.filename.as_deref(),
        args.pod.as_deref(),
        fallback_profile.as_deref().or(args.profile.as_deref()),
        namespace,
        origin,
        |pod, objects| {
            applied = what_if.apply(pod, objects)?;
            Ok::<_, ExplainError>(())
        },
    )?;
    // A watch evaluates again and again: each snapshot must be freed, not kept until the exit.
    if !args.watch {
        keep_until_exit(&snapshot);
    }
    lap("built the snapshot", timings);
    if let Some(node) = &args.node
        && snapshot.node(node).is_none()
    {
        return Err(ExplainError::NodeNotFound {
            node: node.clone(),
            origin: origin.to_string(),
        });
    }
    let fwk = engine
        .framework(profile, snapshot.clone())
        .map_err(ResolveError::from)?;

    let cycle = schedule_cycle(&fwk, &info, engine.schedule_options(true));
    let pod_group = pod_group::pod_group_section(engine, &fwk, &info);
    let mut explanation = cycle.explanation;
    explanation.preemption =
        preemption_preview(&fwk, &info, &explanation, &cycle.node_statuses, &cycle.state);
    // A gated pod is explained as it would be once ungated; hints and the table use that evaluation.
    // A pod whose ResourceClaims are still to be made from templates (kube-scheduler waits for the
    // resourceclaim controller) is explained with those claims made in memory.
    let mut generated_note = None;
    let claims_not_created = if explanation.outcome == Outcome::Gated {
        sched_core::dra::templates::claims_not_created(&snapshot, &info.pod)
    } else {
        Vec::new()
    };
    let (once_ungated, basis_state, basis_pod, fwk, snapshot) = if explanation.outcome == Outcome::Gated {
        let mut ungated = (*info.pod).clone();
        if let Some(spec) = ungated.spec.as_mut() {
            spec.scheduling_gates = None;
        }
        let (fwk, snapshot, ungated) = match sched_core::dra::templates::with_claims_from_templates(
            &snapshot, &ungated,
        ) {
            Ok(Some(made)) => {
                let names: Vec<String> = made
                    .claims
                    .iter()
                    .map(|(claim, template)| format!("{claim} from {template}"))
                    .collect();
                generated_note = Some(format!(
                    "its ResourceClaims do not exist yet (kube-scheduler waits until kube-controller-manager \
                     makes them from their templates); evaluated with the claims the controller would make: {}",
                    names.join(", ")
                ));
                let snapshot = Arc::new(made.snapshot);
                let fwk = engine
                    .framework(profile, snapshot.clone())
                    .map_err(ResolveError::from)?;
                (fwk, snapshot, made.pod)
            }
            _ => (fwk, snapshot, ungated),
        };
        let ungated = engine.pod_info(ungated);
        let c = schedule_cycle(&fwk, &ungated, engine.schedule_options(true));
        let mut e = c.explanation;
        e.preemption = preemption_preview(&fwk, &ungated, &e, &c.node_statuses, &c.state);
        (Some(e), c.state, ungated, fwk, snapshot)
    } else {
        (None, cycle.state, info.clone(), fwk, snapshot)
    };
    let basis = once_ungated.as_ref().unwrap_or(&explanation);
    lap("evaluated the pod", timings);

    // Why each node is rejected, and the changes that make the pod schedulable (each checked by a
    // scheduling cycle on a changed copy of the cluster): only for a pod that does not fit.
    let report = if basis.outcome == Outcome::Unschedulable {
        diagnose_pod(engine, &fwk, &basis_state, &basis_pod, basis)
    } else {
        Report::default()
    };
    let node_pools = (basis.outcome == Outcome::Unschedulable)
        .then(|| node_pools::section(&snapshot, &basis_pod.pod, catalogue.as_deref()))
        .flatten();
    let mut hints = hints(&HintInput {
        explanation: basis,
        pod: &basis_pod,
        report: &report,
    });
    // The claim-by-claim story matters when the pod does not fit; when it fits, the devices it would
    // get are in `claim_allocations`.
    let dra = (basis.outcome != Outcome::Scheduled)
        .then(|| sched_core::diagnosis::diagnose(&snapshot, &basis_pod))
        .flatten();
    if let Some(note) = generated_note {
        hints.insert(
            0,
            Hint {
                kind: HintKind::ResourceClaims,
                nodes: Vec::new(),
                message: note,
                snippet: None,
                change: None,
                reason: None,
            },
        );
    }
    if let Some(d) = &dra {
        hints.extend(d.hints.iter().map(|h| Hint {
            kind: HintKind::ResourceClaims,
            nodes: Vec::new(),
            message: h.clone(),
            snippet: None,
            change: None,
            reason: None,
        }));
    }
    let still_pending = (bound_node.is_none() && args.filename.is_none() && applied.is_empty()).then(|| {
        let live = cluster.map(|c| LiveFacts::fetch(c, &info)).unwrap_or_default();
        notes.extend(live.notes);
        why_still_pending(
            &info,
            &explanation,
            // kube-scheduler goes by the pod's schedulerName, whatever --profile evaluated it with.
            engine.profile_for(&info.pod).is_ok(),
            &snapshot,
            live.scheduler.as_ref(),
            &live.events,
            k8s_openapi::jiff::Timestamp::now(),
        )
    });
    let bound = bound_node.map(|node| bound_check(basis, &snapshot, node));
    let node_detail = args
        .node
        .as_deref()
        .and_then(|name| node_detail(basis, &fwk, &basis_state, &basis_pod, &snapshot, name, &report));
    lap("computed hints", timings);
    let explanation_gated = explanation.outcome == Outcome::Gated;
    Ok(ExplainReport {
        score_plugins: fwk
            .score_plugin_names()
            .into_iter()
            .map(|(n, w)| (n.to_string(), w))
            .collect(),
        explanation,
        kube_version: engine.features().version,
        what_if: applied,
        bound,
        findings: report.findings,
        hints,
        node_detail,
        once_ungated,
        dra,
        still_pending,
        scheduling_gates: if explanation_gated {
            crate::diagnosis::still_pending::scheduling_gates(&info.pod)
        } else {
            Vec::new()
        },
        claims_not_created,
        pod_group,
        node_pools,
    })
}

/// For `explain POD` without `--profile`, `-f` or what-if flags: the profile to evaluate the pod with
/// when it is pending and its schedulerName names no profile (the configuration's first), else none.
fn unhandled_pending_pod(
    engine: &Engine,
    args: &ExplainArgs,
    what_if: &WhatIf,
    objects: &ClusterObjects,
    namespace: &str,
) -> Option<String> {
    if args.filename.is_some() || args.profile.is_some() || *what_if != WhatIf::default() {
        return None;
    }
    let name = pod_name(args.pod.as_deref()?);
    let pod = objects.pods.iter().find(|p| {
        p.metadata.namespace.as_deref().unwrap_or("default") == namespace
            && p.metadata.name.as_deref() == Some(name)
    })?;
    let pending = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_none_or(str::is_empty);
    (pending && engine.profile_for(pod).is_err())
        .then(|| engine.profile_names().first().map(ToString::to_string))
        .flatten()
}

/// The preemption dry run of an unschedulable pod, as `preempt --dry-run=client -o json` shows it; null
/// when the pod fits, is gated or failed, or its profile runs no DefaultPreemption.
fn preemption_preview(
    fwk: &Framework,
    pod: &PodInfo,
    e: &Explanation,
    node_statuses: &NodeToStatus,
    state: &CycleState,
) -> Option<serde_json::Value> {
    let runs_default_preemption = fwk
        .profile
        .post_filter
        .iter()
        .any(|p| p == sched_core::plugins::names::DEFAULT_PREEMPTION);
    if e.outcome != Outcome::Unschedulable || !runs_default_preemption {
        return None;
    }
    let options = DryRunOptions {
        pre_filter_message: e.pre_filter_message.clone(),
        ..DryRunOptions::default()
    };
    serde_json::to_value(dry_run(fwk, pod, node_statuses, state, &options)).ok()
}

fn bound_check(e: &Explanation, snapshot: &Snapshot, node: String) -> BoundCheck {
    let entry = e.nodes.iter().find(|n| n.name == node);
    BoundCheck {
        node_exists: snapshot.node(&node).is_some(),
        still_feasible: entry.is_some_and(|n| n.feasible),
        still_best: e.selected.contains(&node),
        score: entry.and_then(|n| n.score),
        node,
    }
}

fn node_detail(
    e: &Explanation,
    fwk: &Framework,
    state: &CycleState,
    pod: &PodInfo,
    snapshot: &Snapshot,
    name: &str,
    report: &Report,
) -> Option<NodeDetail> {
    let entry = e.nodes.iter().find(|n| n.name == name)?.clone();
    let node = snapshot.node(name)?;
    let resources = breakdown(pod, node, &fwk.nominated_pods_for(pod, name), fwk.features());
    let rows = if e.pre_filter_message.is_some() {
        Vec::new()
    } else {
        let traced: HashMap<&str, _> = entry.filters.iter().map(|f| (f.plugin, f)).collect();
        fwk.run_all_filter_plugins(state, pod, node)
            .into_iter()
            .map(|(plugin, verdict)| match (traced.get(plugin), verdict) {
                (_, FilterVerdict::Skipped) => FilterRow {
                    plugin: plugin.to_string(),
                    reach: Reach::Skipped,
                    code: None,
                    reasons: Vec::new(),
                },
                (Some(t), _) => FilterRow {
                    plugin: plugin.to_string(),
                    reach: Reach::Ran,
                    code: Some(t.code),
                    reasons: t.reasons.clone(),
                },
                (None, FilterVerdict::Ran(s)) => FilterRow {
                    plugin: plugin.to_string(),
                    reach: Reach::NotReached,
                    code: Some(s.code()),
                    reasons: s.reasons().to_vec(),
                },
            })
            .collect()
    };
    let scores = fwk
        .score_plugin_names()
        .into_iter()
        .map(|(plugin, weight)| ScoreRow {
            plugin: plugin.to_string(),
            weight,
            score: entry.scores.get(plugin).cloned(),
        })
        .collect();
    let mut findings: Vec<Finding> = report
        .findings
        .iter()
        .filter(|f| f.nodes.iter().any(|n| n == name))
        .cloned()
        .collect();
    // One node: each plugin's causes in the order the plugin checks them, the one kube-scheduler
    // reports first (the overview sorts by how many nodes a finding concerns).
    let position = |plugin: &str| {
        fwk.profile
            .filter
            .iter()
            .position(|p| p == plugin)
            .unwrap_or(usize::MAX)
    };
    findings.sort_by_key(|f| (position(&f.plugin), f.reason));
    Some(NodeDetail {
        node: entry,
        filters: rows,
        scores,
        resources,
        findings,
    })
}

fn all_pending(
    engine: &Engine,
    objects: ClusterObjects,
    namespace: Option<&str>,
    what_if: Vec<Applied>,
) -> Result<ExplainResult, ExplainError> {
    let snapshot = Arc::new(engine.snapshot(objects));
    keep_until_exit(&snapshot);
    let mut pending: Vec<Arc<PodInfo>> = snapshot
        .pending_pods
        .iter()
        .filter(|p| namespace.is_none_or(|ns| p.namespace() == ns))
        .cloned()
        .collect();
    pending.sort_by_key(|p| p.key());
    let mut frameworks: HashMap<String, Option<Framework>> = HashMap::new();
    let mut entries = Vec::with_capacity(pending.len());
    for pod in pending {
        let scheduler = pod.scheduler_name().to_string();
        if !frameworks.contains_key(&scheduler) {
            let fwk = match engine.profile(&scheduler) {
                Ok(profile) => Some(
                    engine
                        .framework(profile, snapshot.clone())
                        .map_err(ResolveError::from)?,
                ),
                Err(_) => None,
            };
            frameworks.insert(scheduler.clone(), fwk);
        }
        match frameworks.get(&scheduler).and_then(Option::as_ref) {
            Some(fwk) => entries.push(PendingEntry::Evaluated(Box::new(schedule(
                fwk,
                &pod,
                engine.schedule_options(false),
            )))),
            None => entries.push(PendingEntry::NotHandled {
                pod: pod.key(),
                scheduler_name: scheduler,
            }),
        }
    }
    Ok(ExplainResult::AllPending {
        entries,
        scope: match namespace {
            Some(ns) => format!("namespace \"{ns}\""),
            None => "any namespace".to_string(),
        },
        what_if,
    })
}
