//! `explain`: resolves the pod and the profile, loads the cluster, evaluates the pod with sched-core
//! and gathers what the output shows (bound-pod check, hints, one node in detail).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::{Pod, Toleration};
use sched_core::engine::{EngineError, UnknownProfile};
use sched_core::explain::{Explanation, NodeExplanation, Outcome, ScoreView};
use sched_core::framework::cycle_state::CycleState;
use sched_core::framework::interface::NodeToStatus;
use sched_core::framework::profile::ProfileError;
use sched_core::framework::runtime::{FilterVerdict, Framework, ResolvedProfile};
use sched_core::preemption::{DryRunOptions, dry_run};
use sched_core::schedule::{schedule, schedule_cycle};
use sched_core::snapshot::is_terminal;
use sched_core::{ClusterObjects, Code, Engine, PodInfo, Snapshot};
use serde::Serialize;

use super::hints::{Hint, HintInput, hints};
use super::load::{LoadError, Loaded, evaluation_detail, keep_until_exit, load};
use crate::cli::{ExplainArgs, GlobalArgs};

/// Why `explain` could not answer.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// The cluster could not be loaded.
    #[error(transparent)]
    Load(Box<LoadError>),
    /// `--config` could not be loaded.
    #[error("scheduler configuration {0}")]
    Config(#[from] ProfileError),
    /// No such pod.
    #[error("pod \"{name}\" not found in namespace \"{namespace}\" ({origin})")]
    PodNotFound {
        /// The namespace looked in.
        namespace: String,
        /// The pod name.
        name: String,
        /// The file or API server.
        origin: String,
    },
    /// The pod has finished: kube-scheduler never looks at it.
    #[error("pod {key} has phase {phase}: kube-scheduler does not schedule finished pods")]
    TerminalPod {
        /// `namespace/name`.
        key: String,
        /// Succeeded or Failed.
        phase: String,
    },
    /// `-f` does not hold exactly one pod, or the pod cannot be admitted.
    #[error("{path}: {message}")]
    PodFile {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The pod's schedulerName names no profile of the configuration: kube-scheduler (run with it)
    /// ignores the pod, leaving it to the scheduler of that name.
    #[error(
        "pod {pod}: {source}: kube-scheduler with this configuration ignores the pod (another scheduler's); \
         use --config with that scheduler's configuration, or --profile"
    )]
    NotThisScheduler {
        /// `namespace/name`.
        pod: String,
        /// The scheduler name and the profiles there are.
        #[source]
        source: UnknownProfile,
    },
    /// `--profile` names no profile of the configuration.
    #[error("--profile: {0}")]
    NoSuchProfile(#[source] UnknownProfile),
    /// The profile's plugins could not be built.
    #[error(transparent)]
    Framework(#[from] EngineError),
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
}

/// What `explain POD` found.
#[derive(Debug, Clone, Serialize)]
pub struct ExplainReport {
    /// The engine's explanation (the JSON contract's fields).
    #[serde(flatten)]
    pub explanation: Explanation,
    /// For a bound pod: how its node compares now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound: Option<BoundCheck>,
    /// Hints.
    pub hints: Vec<Hint>,
    /// `--node`'s detail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_detail: Option<NodeDetail>,
    /// For a gated pod: the evaluation once its gates are removed (the table shows this one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub once_ungated: Option<Explanation>,
    /// The profile's score plugins and weights (the wide table's columns).
    #[serde(skip)]
    pub score_plugins: Vec<(String, i64)>,
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
    /// `--all-pending` (in `namespace/name` order); `scope` says which namespaces were looked at.
    AllPending {
        /// The pods.
        entries: Vec<PendingEntry>,
        /// "namespace X" or "any namespace".
        scope: String,
    },
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

/// The profile `--profile` names, else the one of the pod's schedulerName (an empty one is
/// default-scheduler's).
pub(crate) fn profile_for<'e>(
    engine: &'e Engine,
    pod: &PodInfo,
    flag: Option<&str>,
) -> Result<&'e ResolvedProfile, ExplainError> {
    match flag {
        Some(name) => engine.profile(name).map_err(ExplainError::NoSuchProfile),
        None => engine
            .profile_for(&pod.pod)
            .map_err(|source| ExplainError::NotThisScheduler {
                pod: pod.key(),
                source,
            }),
    }
}

/// Runs `explain`.
pub fn run(global: &GlobalArgs, args: &ExplainArgs) -> Result<ExplainOutput, ExplainError> {
    let engine = Engine::from_file(args.config.as_deref())?;
    let target = (!args.all_pending && args.filename.is_none())
        .then_some(args.pod.as_deref())
        .flatten();
    let loaded = load(
        global,
        args.from.as_deref(),
        None,
        &evaluation_detail(global, target),
    )?;
    let Loaded {
        objects,
        origin,
        default_namespace,
        warnings,
        notes,
    } = loaded;
    let namespace = global.namespace.clone().unwrap_or(default_namespace);
    let mut timings = Vec::new();
    let result = if args.all_pending {
        let scope = (!global.all_namespaces).then_some(namespace.as_str());
        all_pending(&engine, objects, scope)?
    } else {
        ExplainResult::One(Box::new(explain_one(
            &engine,
            args,
            objects,
            &namespace,
            &origin,
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

/// `pod/NAME`, `pods/NAME` and `po/NAME` name a pod as kubectl accepts them.
pub(crate) fn pod_name(arg: &str) -> &str {
    for prefix in ["pod/", "pods/", "po/"] {
        if let Some(rest) = arg.strip_prefix(prefix) {
            return rest;
        }
    }
    arg
}

/// Takes the named pod out of the objects. A pod of that name already reduced to its scheduling
/// facts (a compact load) is dropped too, so a pod from `-f` replaces it; it is returned only when
/// whole.
pub(crate) fn take_pod(objects: &mut ClusterObjects, namespace: &str, name: &str) -> Option<Pod> {
    objects
        .placed_pods
        .retain(|p| !(p.namespace() == namespace && p.name() == name));
    let idx = objects.pods.iter().position(|p| {
        p.metadata.namespace.as_deref().unwrap_or("default") == namespace
            && p.metadata.name.as_deref() == Some(name)
    })?;
    Some(objects.pods.remove(idx))
}

fn explain_one(
    engine: &Engine,
    args: &ExplainArgs,
    mut objects: ClusterObjects,
    namespace: &str,
    origin: &str,
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
    let mut pod = match (&args.filename, &args.pod) {
        (Some(path), _) => {
            let pod = read_pod_file(path, namespace, &objects)?;
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            // The file's pod replaces one of the same name, as if it were created instead.
            take_pod(&mut objects, &ns, &name);
            pod
        }
        (None, Some(arg)) => {
            let name = pod_name(arg);
            let pod = take_pod(&mut objects, namespace, name).ok_or_else(|| ExplainError::PodNotFound {
                namespace: namespace.to_string(),
                name: name.to_string(),
                origin: origin.to_string(),
            })?;
            if is_terminal(&pod) {
                return Err(ExplainError::TerminalPod {
                    key: format!("{namespace}/{name}"),
                    phase: pod
                        .status
                        .as_ref()
                        .and_then(|s| s.phase.clone())
                        .unwrap_or_default(),
                });
            }
            pod
        }
        // clap requires POD unless -f or --all-pending.
        (None, None) => {
            return Err(ExplainError::PodFile {
                path: "-".into(),
                message: "no pod given".into(),
            });
        }
    };

    // A bound pod is evaluated as if it were pending: off its node, not yet nominated anywhere.
    let bound_node = pod
        .spec
        .as_mut()
        .and_then(|s| s.node_name.take())
        .filter(|n| !n.is_empty());
    if bound_node.is_some()
        && let Some(status) = pod.status.as_mut()
    {
        status.nominated_node_name = None;
    }

    let snapshot = Arc::new(Snapshot::new(objects));
    keep_until_exit(&snapshot);
    lap("built the snapshot", timings);
    let info = PodInfo::new(pod);
    let profile = profile_for(engine, &info, args.profile.as_deref())?;
    if let Some(node) = &args.node
        && snapshot.node(node).is_none()
    {
        return Err(ExplainError::NodeNotFound {
            node: node.clone(),
            origin: origin.to_string(),
        });
    }
    let fwk = engine.framework(profile, snapshot.clone())?;

    let cycle = schedule_cycle(&fwk, &info, engine.schedule_options(true));
    let mut explanation = cycle.explanation;
    explanation.preemption =
        preemption_preview(&fwk, &info, &explanation, &cycle.node_statuses, &cycle.state);
    // A gated pod is explained as it would be once ungated; hints and the table use that evaluation.
    let (once_ungated, basis_state, basis_pod) = if explanation.outcome == Outcome::Gated {
        let mut ungated = (*info.pod).clone();
        if let Some(spec) = ungated.spec.as_mut() {
            spec.scheduling_gates = None;
        }
        let ungated = PodInfo::new(ungated);
        let c = schedule_cycle(&fwk, &ungated, engine.schedule_options(true));
        let mut e = c.explanation;
        e.preemption = preemption_preview(&fwk, &ungated, &e, &c.node_statuses, &c.state);
        (Some(e), c.state, ungated)
    } else {
        (None, cycle.state, info.clone())
    };
    let basis = once_ungated.as_ref().unwrap_or(&explanation);
    lap("evaluated the pod", timings);

    let hints = hints(&HintInput {
        explanation: basis,
        state: &basis_state,
        pod: &basis_pod,
        snapshot: &snapshot,
        framework: &fwk,
    });
    let bound = bound_node.map(|node| bound_check(basis, &snapshot, node));
    let node_detail = args
        .node
        .as_deref()
        .and_then(|name| node_detail(basis, &fwk, &basis_state, &basis_pod, &snapshot, name));
    lap("computed hints", timings);
    Ok(ExplainReport {
        score_plugins: fwk
            .score_plugin_names()
            .into_iter()
            .map(|(n, w)| (n.to_string(), w))
            .collect(),
        explanation,
        bound,
        hints,
        node_detail,
        once_ungated,
    })
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
) -> Option<NodeDetail> {
    let entry = e.nodes.iter().find(|n| n.name == name)?.clone();
    let rows = if e.pre_filter_message.is_some() {
        Vec::new()
    } else {
        let node = snapshot.node(name)?;
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
    Some(NodeDetail {
        node: entry,
        filters: rows,
        scores,
    })
}

fn all_pending(
    engine: &Engine,
    objects: ClusterObjects,
    namespace: Option<&str>,
) -> Result<ExplainResult, ExplainError> {
    let snapshot = Arc::new(Snapshot::new(objects));
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
                Ok(profile) => Some(engine.framework(profile, snapshot.clone())?),
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
    })
}

/// Reads `-f`'s pod and applies what the API server's defaulting and default admission plugins
/// would before kube-scheduler sees it.
pub(crate) fn read_pod_file(
    path: &Path,
    namespace: &str,
    objects: &ClusterObjects,
) -> Result<Pod, ExplainError> {
    let invalid = |message: String| ExplainError::PodFile {
        path: path.display().to_string(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| invalid(e.to_string()))?;
    let mut pods = parse_pods(&text).map_err(invalid)?;
    if pods.len() != 1 {
        return Err(invalid(format!("expected exactly one Pod, found {}", pods.len())));
    }
    // Not pruned like snapshot objects: limits still matter here, requests default to them below.
    let mut pod = pods.remove(0);
    if pod.metadata.name.as_deref().unwrap_or("").is_empty() {
        let generated = pod
            .metadata
            .generate_name
            .as_deref()
            .map(|g| format!("{g}xxxxx"))
            .ok_or_else(|| invalid("the Pod has neither metadata.name nor metadata.generateName".into()))?;
        pod.metadata.name = Some(generated);
    }
    if pod.metadata.namespace.as_deref().unwrap_or("").is_empty() {
        pod.metadata.namespace = Some(namespace.to_string());
    }
    if pod.metadata.uid.as_deref().unwrap_or("").is_empty() {
        // The API server assigns one; without it the pod would count as every uid-less pod (nominated
        // pods are told apart from the pod being scheduled by uid).
        pod.metadata.uid = Some(format!("kubectl-sched-file-{}", path.display()));
    }
    admit(&mut pod, objects).map_err(invalid)?;
    Ok(pod)
}

/// The pods of a YAML or JSON text: one or more documents, each a Pod or a List of them. Errors say
/// where (document, line and column) when the parser knows.
fn parse_pods(text: &str) -> Result<Vec<Pod>, String> {
    use serde::Deserialize;
    let mut pods = Vec::new();
    for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value = serde_yaml::Value::deserialize(doc).map_err(|e| format!("document {i}: {e}"))?;
        if value.is_null() {
            continue;
        }
        match value.get("kind").and_then(serde_yaml::Value::as_str) {
            Some("Pod") => {
                // Decoded again straight from the text, so a schema error carries its line.
                let doc = serde_yaml::Deserializer::from_str(text)
                    .nth(i)
                    .ok_or_else(|| format!("document {i} vanished"))?;
                pods.push(Pod::deserialize(doc).map_err(|e| format!("document {i}: Pod: {e}"))?);
            }
            Some(kind) if kind.ends_with("List") => {
                let items = value.get("items").cloned().unwrap_or(serde_yaml::Value::Null);
                let items: Vec<serde_yaml::Value> =
                    serde_yaml::from_value(items).map_err(|e| format!("document {i}: items: {e}"))?;
                for (j, item) in items.into_iter().enumerate() {
                    if item.get("kind").and_then(serde_yaml::Value::as_str) == Some("Pod") {
                        pods.push(
                            serde_yaml::from_value(item)
                                .map_err(|e| format!("document {i}: items[{j}]: Pod: {e}"))?,
                        );
                    }
                }
            }
            Some(_) => {}
            None => return Err(format!("document {i} has no kind")),
        }
    }
    Ok(pods)
}

/// The parts of API defaulting and admission that change scheduling: requests default to limits,
/// host-network ports are host ports, the Priority admission plugin resolves the priority class, and
/// DefaultTolerationSeconds adds the not-ready/unreachable tolerations.
fn admit(pod: &mut Pod, objects: &ClusterObjects) -> Result<(), String> {
    let Some(spec) = pod.spec.as_mut() else {
        return Err("the Pod has no spec".into());
    };
    let host_network = spec.host_network.unwrap_or(false);
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        if let Some(resources) = c.resources.as_mut()
            && let Some(limits) = resources.limits.clone()
        {
            let requests = resources.requests.get_or_insert_with(Default::default);
            for (name, q) in limits {
                requests.entry(name).or_insert(q);
            }
        }
        if host_network {
            for port in c.ports.iter_mut().flatten() {
                if port.host_port.unwrap_or(0) == 0 {
                    port.host_port = Some(port.container_port);
                }
            }
        }
    }
    if let Some(resources) = spec.resources.as_mut()
        && let Some(limits) = resources.limits.clone()
    {
        let requests = resources.requests.get_or_insert_with(Default::default);
        for (name, q) in limits {
            requests.entry(name).or_insert(q);
        }
    }
    if spec.scheduler_name.as_deref().unwrap_or("").is_empty() {
        spec.scheduler_name = Some(sched_core::framework::profile::DEFAULT_SCHEDULER_NAME.to_string());
    }
    if spec.priority.is_none() {
        let class = match spec.priority_class_name.as_deref().filter(|c| !c.is_empty()) {
            Some(name) => Some(
                objects
                    .priority_classes
                    .iter()
                    .find(|pc| pc.metadata.name.as_deref() == Some(name))
                    .map(|pc| pc.value.unwrap_or(0))
                    .or_else(|| builtin_priority(name))
                    .ok_or_else(|| format!("no PriorityClass with name {name} was found"))?,
            ),
            None => objects
                .priority_classes
                .iter()
                .find(|pc| pc.global_default == Some(true))
                .map(|pc| pc.value.unwrap_or(0)),
        };
        spec.priority = Some(class.unwrap_or(0));
    }
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for key in ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"] {
        let covered = tolerations.iter().any(|t| {
            let effect = t.effect.as_deref().unwrap_or("");
            (effect.is_empty() || effect == "NoExecute")
                && (t.key.as_deref() == Some(key)
                    || (t.key.is_none() && t.operator.as_deref() == Some("Exists")))
        });
        if !covered {
            tolerations.push(Toleration {
                key: Some(key.to_string()),
                operator: Some("Exists".to_string()),
                effect: Some("NoExecute".to_string()),
                toleration_seconds: Some(300),
                value: None,
            });
        }
    }
    Ok(())
}

/// The two priority classes every cluster has even when a snapshot omits them.
fn builtin_priority(name: &str) -> Option<i32> {
    match name {
        "system-cluster-critical" => Some(2_000_000_000),
        "system-node-critical" => Some(2_000_001_000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn pod_with(spec: PodSpec) -> Pod {
        Pod {
            spec: Some(spec),
            ..Pod::default()
        }
    }

    #[test]
    fn admission_defaults_requests_priority_and_tolerations() {
        let limits = BTreeMap::from([("cpu".to_string(), Quantity("2".into()))]);
        let mut pod = pod_with(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                resources: Some(ResourceRequirements {
                    limits: Some(limits),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            priority_class_name: Some("system-node-critical".into()),
            ..Default::default()
        });
        admit(&mut pod, &ClusterObjects::default()).unwrap();
        let spec = pod.spec.unwrap();
        let requests = spec.containers[0]
            .resources
            .as_ref()
            .and_then(|r| r.requests.clone())
            .unwrap();
        assert_eq!(requests.get("cpu"), Some(&Quantity("2".into())));
        assert_eq!(spec.priority, Some(2_000_001_000));
        assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
        let keys: Vec<_> = spec
            .tolerations
            .unwrap()
            .iter()
            .map(|t| t.key.clone().unwrap_or_default())
            .collect();
        assert_eq!(
            keys,
            ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"]
        );
    }

    #[test]
    fn unknown_priority_class_is_refused_like_the_api_server() {
        let mut pod = pod_with(PodSpec {
            priority_class_name: Some("gold".into()),
            ..Default::default()
        });
        assert_eq!(
            admit(&mut pod, &ClusterObjects::default()),
            Err("no PriorityClass with name gold was found".to_string())
        );
    }

    #[test]
    fn pod_files_keep_limits_and_say_where_they_break() {
        let pods = parse_pods(
            "kind: Pod\nmetadata: {name: a}\nspec:\n  containers:\n  - name: c\n    resources:\n      \
             limits: {cpu: \"2\"}\n---\nkind: Service\nmetadata: {name: s}\n",
        )
        .unwrap();
        assert_eq!(pods.len(), 1);
        let limits = pods[0].spec.as_ref().unwrap().containers[0]
            .resources
            .as_ref()
            .and_then(|r| r.limits.clone())
            .unwrap();
        assert_eq!(limits.get("cpu"), Some(&Quantity("2".into())));

        let err = parse_pods("kind: Pod\nmetadata: {name: a}\nspec:\n  containers: 7\n").unwrap_err();
        assert!(
            err.starts_with("document 0: Pod: spec.containers: invalid type") && err.contains("line 4"),
            "{err}"
        );
        let err = parse_pods("metadata: {name: a}\n").unwrap_err();
        assert_eq!(err, "document 0 has no kind");
    }

    #[test]
    fn pod_names_accept_kubectl_prefixes() {
        assert_eq!(pod_name("pod/web"), "web");
        assert_eq!(pod_name("pods/web"), "web");
        assert_eq!(pod_name("web"), "web");
    }
}
