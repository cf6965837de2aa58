//! `simulate`'s report: every pod's outcome with its workload and origin, the per-workload counts,
//! the nodes' load before and after, and what drains and removals did.

use std::collections::{BTreeMap, HashMap};

use std::sync::Arc;

use sched_core::features::KubeVersion;
use sched_core::framework::FeatureGates;
use sched_core::resource::Resource;
use sched_core::simulate::{GroupResult, PodOutcome, PodResult, Victim};
use sched_core::snapshot::requests::calculate_resource;
use sched_core::snapshot::{ClusterObjects, is_terminal};
use sched_core::{NodeInfo, Snapshot};
use serde::Serialize;

use crate::cli::SimulateArgs;
use crate::source::what_if::Applied;

/// Where a simulated pod came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// Pending in the cluster.
    Pending,
    /// A pod of `-f` (or of a workload there).
    Input,
    /// Recreated by its controller after `--drain` or `--remove-node` evicted the original.
    Replacement,
}

/// One pod's result, with its workload and origin.
#[derive(Debug, Clone, Serialize)]
pub struct SimulatedPod {
    /// The workload it belongs to (`deployment/web`, `pod/x`).
    pub workload: String,
    /// Where it came from.
    pub origin: Origin,
    /// What happened to it.
    #[serde(flatten)]
    pub result: PodResult,
}

/// How many pods of a workload were placed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkloadPlacement {
    /// `namespace`.
    pub namespace: String,
    /// `deployment/web`.
    pub workload: String,
    /// Pods placed.
    pub placed: usize,
    /// Pods simulated.
    pub total: usize,
}

/// One resource of a node, before and after.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Allocatable (milli-cpu, bytes, pods, units).
    pub allocatable: i64,
    /// Requested before the simulation.
    pub before: i64,
    /// Requested after.
    pub after: i64,
}

/// A node's load before and after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeUsage {
    /// The node.
    pub name: String,
    /// CPU in millicores.
    pub cpu: Usage,
    /// Memory in bytes.
    pub memory: Usage,
    /// Pods.
    pub pods: Usage,
    /// Extended resources with a request on the node, by name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extended: BTreeMap<String, Usage>,
    /// The node's state after the changes (`cordoned`, `added`, `drained`), when changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl NodeUsage {
    /// True when anything was placed on or removed from the node.
    pub fn changed(&self) -> bool {
        self.pods.before != self.pods.after
            || self.cpu.before != self.cpu.after
            || self.memory.before != self.memory.after
            || self.note.is_some()
    }
}

/// A pod a drain left where it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeptPod {
    /// `namespace/name`.
    pub pod: String,
    /// Why (DaemonSet pod, mirror pod, blocked by a PodDisruptionBudget).
    pub reason: String,
}

/// What one `--drain` or `--remove-node` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeChange {
    /// The node.
    pub node: String,
    /// `drain` or `remove`.
    pub action: &'static str,
    /// Pods evicted (or gone with the node).
    pub evicted: Vec<String>,
    /// Their replacements, queued.
    pub replacements: Vec<String>,
    /// Pods left in place.
    pub kept: Vec<KeptPod>,
}

/// The counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Pods simulated.
    pub pods: usize,
    /// Placed.
    pub scheduled: usize,
    /// Left pending (unschedulable, gated, another scheduler's, failed).
    pub pending: usize,
    /// Pods deleted by preemption.
    pub preempted: usize,
    /// True when the run had -f, --drain or --remove-node: the exit code is about their pods only.
    pub new_pods_only: bool,
    /// Pods of -f and replacements of evicted pods.
    pub inputs: usize,
    /// Of those, left pending.
    pub inputs_pending: usize,
    /// Placements decided by the seed among tied nodes.
    pub ties: usize,
    /// Scheduling cycles run.
    pub cycles: usize,
    /// Nodes evaluated over all cycles (feasible ones found plus ones a filter rejected).
    pub evaluated_nodes: usize,
    /// Nodes after the changes.
    pub nodes: usize,
    /// Wall time of the simulation proper, in milliseconds.
    pub millis: u64,
}

/// What `simulate` found.
#[derive(Debug, Clone, Serialize)]
pub struct SimulateReport {
    /// The counts.
    pub summary: Summary,
    /// The kube-scheduler release whose semantics decided (the API server's, the snapshot file's, or
    /// --kube-version's).
    pub kube_version: KubeVersion,
    /// Per workload: placed / total.
    pub workloads: Vec<WorkloadPlacement>,
    /// Per pod group (GenericWorkload on): placed / total, where its pods went or why none did.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupResult>,
    /// Every simulated pod, in the order of its first attempt.
    pub pods: Vec<SimulatedPod>,
    /// Pods deleted by preemption.
    pub victims: Vec<Victim>,
    /// Drained and removed nodes.
    pub node_changes: Vec<NodeChange>,
    /// Every node's load before → after.
    pub nodes: Vec<NodeUsage>,
    /// The what-if changes made.
    pub what_if: Vec<Applied>,
    /// Set when the simulation hit its cycle limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_early: Option<String>,
}

impl SimulateReport {
    /// 3 when a pod that counts stays pending (see the command's exit codes), else 0.
    pub fn exit_code(&self) -> u8 {
        let stranded = if self.summary.new_pods_only {
            self.summary.inputs_pending
        } else {
            self.summary.pending
        };
        if stranded > 0 || self.stopped_early.is_some() {
            3
        } else {
            0
        }
    }
}

pub(super) fn pod_name(key: &str) -> &str {
    key.split_once('/').map_or(key, |(_, name)| name)
}

/// How the run went, besides its pods: copied into the [`Summary`].
pub(super) struct RunCounts {
    pub ties: usize,
    pub cycles: usize,
    pub evaluated_nodes: usize,
    pub nodes: usize,
    pub millis: u64,
}

pub(super) fn summarize(
    pods: &[SimulatedPod],
    victims: &[Victim],
    run: RunCounts,
    new_pods_only: bool,
) -> Summary {
    let placed = |p: &&SimulatedPod| p.result.outcome == PodOutcome::Scheduled;
    let inputs: Vec<&SimulatedPod> = pods.iter().filter(|p| p.origin != Origin::Pending).collect();
    let scheduled = pods.iter().filter(placed).count();
    let preempted_in_batch = pods
        .iter()
        .filter(|p| p.result.outcome == PodOutcome::Preempted)
        .count();
    Summary {
        pods: pods.len(),
        new_pods_only,
        scheduled,
        pending: pods.len() - scheduled - preempted_in_batch,
        preempted: victims.len(),
        inputs: inputs.len(),
        inputs_pending: inputs
            .iter()
            .filter(|p| !matches!(p.result.outcome, PodOutcome::Scheduled))
            .count(),
        ties: run.ties,
        cycles: run.cycles,
        evaluated_nodes: run.evaluated_nodes,
        nodes: run.nodes,
        millis: run.millis,
    }
}

pub(super) fn placements(
    pods: &[SimulatedPod],
    workload_of: &HashMap<String, (String, String)>,
) -> Vec<WorkloadPlacement> {
    let mut by_workload: BTreeMap<(String, String), (usize, usize)> = BTreeMap::new();
    for p in pods {
        let namespace = workload_of
            .get(&p.result.pod)
            .map(|(ns, _)| ns.clone())
            .unwrap_or_default();
        let entry = by_workload.entry((namespace, p.workload.clone())).or_default();
        entry.1 += 1;
        entry.0 += usize::from(p.result.outcome == PodOutcome::Scheduled);
    }
    let mut out: Vec<WorkloadPlacement> = by_workload
        .into_iter()
        .map(|((namespace, workload), (placed, total))| WorkloadPlacement {
            namespace,
            workload,
            placed,
            total,
        })
        .collect();
    // Most pods left behind first: what a reader looks for.
    out.sort_by(|a, b| {
        (b.total - b.placed)
            .cmp(&(a.total - a.placed))
            .then(b.total.cmp(&a.total))
            .then_with(|| (&a.namespace, &a.workload).cmp(&(&b.namespace, &b.workload)))
    });
    out
}

/// Requested and allocatable per node.
pub(super) struct NodeLoad {
    requested: Resource,
    allocatable: Resource,
    pods: i64,
    max_pods: i64,
}

pub(super) fn usage_of(snapshot: &Snapshot) -> BTreeMap<String, NodeLoad> {
    snapshot
        .nodes()
        .iter()
        .map(|n| {
            (
                n.name().to_string(),
                NodeLoad {
                    requested: n.requested.clone(),
                    allocatable: n.allocatable.clone(),
                    pods: n.pods.len() as i64,
                    max_pods: n.allocatable.allowed_pod_number,
                },
            )
        })
        .collect()
}

/// [`usage_of`] for the objects before any change, without building a snapshot of them.
pub(super) fn usage_of_objects(
    objects: &ClusterObjects,
    features: &FeatureGates,
) -> BTreeMap<String, NodeLoad> {
    let mut loads: BTreeMap<String, NodeLoad> = objects
        .nodes
        .iter()
        .map(|n| {
            let info = NodeInfo::new(Arc::new(n.clone()));
            (
                info.name().to_string(),
                NodeLoad {
                    requested: Resource::default(),
                    max_pods: info.allocatable.allowed_pod_number,
                    allocatable: info.allocatable,
                    pods: 0,
                },
            )
        })
        .collect();
    let mut add = |node: &str, r: &Resource| {
        if let Some(load) = loads.get_mut(node) {
            // Saturating, as the engine's sums (absurd requests in a file must not overflow).
            let add = |sum: &mut i64, v: i64| *sum = sum.saturating_add(v);
            add(&mut load.requested.milli_cpu, r.milli_cpu);
            add(&mut load.requested.memory, r.memory);
            add(&mut load.requested.ephemeral_storage, r.ephemeral_storage);
            for (name, v) in &r.scalar_resources {
                add(
                    load.requested.scalar_resources.entry(name.clone()).or_insert(0),
                    *v,
                );
            }
            load.pods += 1;
        }
    };
    for p in &objects.placed_pods {
        add(p.node_name(), &p.resource.resource);
    }
    for p in objects.pods.iter().filter(|p| !is_terminal(p)) {
        if let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            add(node, &calculate_resource(p, features).resource);
        }
    }
    loads
}

pub(super) fn node_notes(args: &SimulateArgs) -> HashMap<String, String> {
    let mut notes = HashMap::new();
    for n in &args.cordon {
        notes.insert(n.clone(), "cordoned".to_string());
    }
    for n in &args.what_if.uncordon {
        notes.insert(n.clone(), "uncordoned".to_string());
    }
    for n in &args.drain {
        notes.insert(n.clone(), "drained".to_string());
    }
    notes
}

pub(super) fn compare(
    before: &BTreeMap<String, NodeLoad>,
    after: &BTreeMap<String, NodeLoad>,
    notes: &HashMap<String, String>,
) -> Vec<NodeUsage> {
    after
        .iter()
        .map(|(name, now)| {
            let was = before.get(name);
            let usage = |f: &dyn Fn(&NodeLoad) -> i64, cap: i64| Usage {
                allocatable: cap,
                before: was.map_or(0, f),
                after: f(now),
            };
            let mut extended = BTreeMap::new();
            for (resource, cap) in &now.allocatable.scalar_resources {
                let get = |l: &NodeLoad| l.requested.scalar_resources.get(resource).copied().unwrap_or(0);
                let u = usage(&get, *cap);
                if u.before != 0 || u.after != 0 {
                    extended.insert(resource.clone(), u);
                }
            }
            NodeUsage {
                name: name.clone(),
                cpu: usage(&|l| l.requested.milli_cpu, now.allocatable.milli_cpu),
                memory: usage(&|l| l.requested.memory, now.allocatable.memory),
                pods: usage(&|l| l.pods, now.max_pods),
                extended,
                note: notes
                    .get(name)
                    .cloned()
                    .or_else(|| was.is_none().then(|| "added".to_string())),
            }
        })
        .collect()
}
