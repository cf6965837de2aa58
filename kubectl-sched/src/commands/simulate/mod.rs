//! `simulate`: a batch through kube-scheduler's queue ([`sched_core::simulate`]). The cluster (live or
//! `--from`) is changed in memory first ([`changes`]: workloads of `-f` expanded into their pods, nodes
//! drained, removed, cordoned or added, the what-if flags), then every pending pod goes through the
//! queue, and the report ([`report`]) says where each landed, what stays Pending with kube-scheduler's
//! message, what was preempted, and how each node's load changed. Nothing is written to the cluster.

pub mod changes;
mod pod_groups;
mod progress;
pub mod report;

use std::collections::HashMap;
use std::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sched_core::Engine;
use sched_core::simulate::drain::{DisruptionBudgets, DrainError, DrainOptions};
use sched_core::simulate::workloads::WorkloadsError;
use sched_core::simulate::{Simulation, SimulationError, SimulationOptions};
use sched_core::snapshot::PodDetail;
use sched_core::triage::WorkloadIndex;

use crate::cli::{GlobalArgs, SimulateArgs};
use crate::source::load::{LoadError, Loaded, load_keeping_cluster};
use crate::source::pods::ResolveError;
use crate::source::what_if::{Applied, WhatIf, WhatIfError};
use changes::{add_inputs, add_nodes, apply_set, cordon, count_pods, drain, read_inputs, remove_node};
use pod_groups::add_group_inputs;
use progress::Progress;
use report::{
    Origin, RunCounts, SimulateReport, SimulatedPod, compare, node_notes, placements, pod_name, summarize,
    usage_of, usage_of_objects,
};

/// Why `simulate` could not answer.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    /// The cluster could not be loaded.
    #[error(transparent)]
    Load(Box<LoadError>),
    /// `--config` could not be loaded or a profile not built.
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    /// A what-if flag is wrong.
    #[error(transparent)]
    WhatIf(#[from] WhatIfError),
    /// A file of `-f` or `--add-nodes` could not be read or understood.
    #[error("{path}: {message}")]
    Input {
        /// The file (`<stdin>` for `-`).
        path: String,
        /// What is wrong, with the document and line when known.
        message: String,
    },
    /// A workload of `-f` could not be expanded.
    #[error("{path}: {source}")]
    Workload {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: WorkloadsError,
    },
    /// `kubectl drain` would refuse the drain.
    #[error(transparent)]
    Drain(#[from] DrainError),
    /// A node flag names no node.
    #[error("{flag} {node}: no such node")]
    NodeNotFound {
        /// The flag.
        flag: &'static str,
        /// The node named.
        node: String,
    },
    /// The workloads of -f expand into more pods than `--max-simulated-pods`.
    #[error("-f: {source} (--max-simulated-pods raises the limit)")]
    TooManyPods {
        /// The total, the limit and the largest workloads.
        #[source]
        source: WorkloadsError,
    },
    /// The simulation could not run.
    #[error(transparent)]
    Simulation(#[from] SimulationError),
}

impl From<LoadError> for SimulateError {
    fn from(e: LoadError) -> Self {
        SimulateError::Load(Box::new(e))
    }
}

/// `simulate`'s result and what to tell the user on stderr.
#[derive(Debug)]
pub struct SimulateOutput {
    /// The report.
    pub report: SimulateReport,
    /// Always shown.
    pub warnings: Vec<String>,
    /// Shown with -v.
    pub notes: Vec<String>,
}

/// Runs `simulate`.
pub fn run(global: &GlobalArgs, args: &SimulateArgs) -> Result<SimulateOutput, SimulateError> {
    // Drains and removals recreate pods from their specs: those need the placed pods whole.
    let detail = if args.drain.is_empty() && args.remove_node.is_empty() {
        PodDetail::CompactPlaced {
            keep: Default::default(),
        }
    } else {
        PodDetail::Full
    };
    let (
        Loaded {
            mut objects,
            default_namespace,
            mut warnings,
            mut notes,
            mut release,
            ..
        },
        _cluster,
    ) = load_keeping_cluster(global, args.from.as_deref(), None, &detail, &args.release)?;
    let namespace = global.namespace.clone().unwrap_or(default_namespace);
    // Every -f object is read before the engine is built: its PodGroups turn GenericWorkload on as
    // the cluster's do.
    let (inputs, group_inputs) = read_inputs(&args.filenames, &namespace)?;
    warnings.extend(release.follow_pod_groups(
        objects.pod_groups.len() + group_inputs.pod_groups.len(),
        "the cluster and -f have",
    ));
    add_group_inputs(&mut objects, group_inputs)?;
    let engine =
        Engine::for_features(args.config.as_deref(), release.features).map_err(ResolveError::from)?;
    let mut origins: HashMap<String, Origin> = HashMap::new();
    let now = Time(k8s_openapi::jiff::Timestamp::now());

    let what_if = WhatIf::from_args(&args.what_if, &namespace)?;
    // The load before any change, for the before → after columns.
    let features = *engine.features();
    let before = usage_of_objects(&objects, &features);
    let mut applied = what_if.apply_to_cluster(&mut objects)?;
    if let Some(path) = &args.add_nodes {
        applied.push(add_nodes(&mut objects, path)?);
    }
    for node in &args.cordon {
        cordon(&mut objects, node, "--cordon")?;
        applied.push(Applied {
            flag: "--cordon",
            value: node.clone(),
            effect: format!("cordoned {node}"),
        });
    }
    let mut node_changes = Vec::new();
    let mut budgets = DisruptionBudgets::new(&objects.pod_disruption_budgets);
    let drain_options = DrainOptions {
        force: args.force,
        delete_emptydir_data: args.delete_emptydir_data,
    };
    for node in &args.drain {
        node_changes.push(drain(
            &mut objects,
            node,
            &drain_options,
            &mut budgets,
            &mut origins,
        )?);
    }
    for node in &args.remove_node {
        node_changes.push(remove_node(&mut objects, node, &mut origins)?);
    }

    // Every -f object's pods are counted before any pod is built.
    let total = count_pods(
        &objects,
        &inputs,
        &namespace,
        args.replicas,
        args.max_simulated_pods,
        &features,
    )?;
    let progress = Progress::start(global.verbosity);
    let input_keys = add_inputs(
        &mut objects,
        inputs,
        &namespace,
        args.replicas,
        &now,
        &features,
        (&progress, total),
    )?;
    for key in &input_keys {
        origins.insert(key.clone(), Origin::Input);
    }
    if !args.what_if.set.is_empty() {
        applied.extend(apply_set(&what_if, &mut objects, &input_keys, &namespace)?);
    }

    let started = Instant::now();
    progress.building(objects.pods.len());
    let snapshot = engine.snapshot(objects);
    notes.push(format!(
        "built the snapshot in {:.0} ms",
        started.elapsed().as_secs_f64() * 1000.0
    ));
    let workloads = WorkloadIndex::new(&snapshot);
    let workload_of: HashMap<String, (String, String)> = snapshot
        .pending_pods
        .iter()
        .map(|p| {
            let w = workloads.workload_of(p);
            (p.key(), (w.namespace.clone(), w.to_string()))
        })
        .collect();
    let changed_nodes = node_notes(args);

    let options = SimulationOptions {
        seed: args.seed,
        all_nodes: args.all_nodes,
        ..SimulationOptions::default()
    };
    let queued = snapshot.pending_pods.len();
    let mut simulation = Simulation::new(&engine, snapshot, options);
    let simulated_at = Instant::now();
    let outcome = simulation.run(&mut |p| progress.simulating(p.cycles, p.scheduled, p.queued, queued))?;
    drop(progress);
    let millis = simulated_at.elapsed().as_millis() as u64;
    let after = usage_of(simulation.snapshot());
    // The process ends after the output: freeing a large snapshot pod by pod would only delay it.
    std::mem::forget(simulation);
    notes.push(format!(
        "simulated {} pod(s) in {} cycle(s), {millis} ms",
        outcome.pods.len(),
        outcome.cycles
    ));
    if outcome.ties > 0 {
        notes.push(format!(
            "{} placement(s) chose among nodes tied for the best score (--seed {})",
            outcome.ties, args.seed
        ));
    }
    if let Some(stopped) = &outcome.stopped_early {
        warnings.push(stopped.clone());
    }

    let pods: Vec<SimulatedPod> = outcome
        .pods
        .into_iter()
        .map(|result| {
            let (_, workload) = workload_of
                .get(&result.pod)
                .cloned()
                .unwrap_or_else(|| (String::new(), format!("pod/{}", pod_name(&result.pod))));
            SimulatedPod {
                workload,
                origin: origins.get(&result.pod).copied().unwrap_or(Origin::Pending),
                result,
            }
        })
        .collect();
    let report = SimulateReport {
        kube_version: engine.features().version,
        summary: summarize(
            &pods,
            &outcome.victims,
            RunCounts {
                ties: outcome.ties,
                cycles: outcome.cycles,
                evaluated_nodes: outcome.evaluated_nodes,
                nodes: after.len(),
                millis,
            },
            !(args.filenames.is_empty() && args.drain.is_empty() && args.remove_node.is_empty()),
        ),
        workloads: placements(&pods, &workload_of),
        groups: outcome.groups,
        nodes: compare(&before, &after, &changed_nodes),
        pods,
        victims: outcome.victims,
        node_changes,
        what_if: applied,
        stopped_early: outcome.stopped_early,
    };
    Ok(SimulateOutput {
        report,
        warnings,
        notes,
    })
}
