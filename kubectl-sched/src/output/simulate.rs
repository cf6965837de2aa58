//! `simulate`'s text output: the counts, the workloads not fully placed, the pods left pending with
//! kube-scheduler's message, the victims of preemption, drained and removed nodes, and every node
//! whose load changed (before → after). `wide` lists every pod's node and every node.

use sched_core::simulate::{GroupOutcome, GroupResult, PodOutcome};

use crate::cli::SimulateFormat;
use crate::commands::simulate::report::{NodeUsage, SimulateReport, SimulatedPod, Usage};
use crate::output::Rendered;
use crate::output::data::{RenderError, json, yaml};
use crate::output::table::{columns, plural};

fn percent(value: i64, of: i64) -> String {
    if of <= 0 {
        return "-".to_string();
    }
    format!("{}%", value * 100 / of)
}

fn change(u: &Usage) -> String {
    let (before, after) = (percent(u.before, u.allocatable), percent(u.after, u.allocatable));
    if before == after {
        after
    } else {
        format!("{before} → {after}")
    }
}

fn count_change(u: &Usage) -> String {
    if u.before == u.after {
        format!("{}/{}", u.after, u.allocatable)
    } else {
        format!("{} → {}/{}", u.before, u.after, u.allocatable)
    }
}

fn outcome(p: &SimulatedPod) -> String {
    match p.result.outcome {
        PodOutcome::Scheduled => p.result.node.clone().unwrap_or_default(),
        PodOutcome::Unschedulable => match &p.result.nominated_node {
            Some(node) => format!("<pending, nominated to {node}>"),
            None => "<pending>".to_string(),
        },
        PodOutcome::Gated => "<gated>".to_string(),
        PodOutcome::Ignored => "<another scheduler's>".to_string(),
        PodOutcome::Error => "<error>".to_string(),
        PodOutcome::Preempted => format!(
            "<preempted by {}>",
            p.result.preempted_by.as_deref().unwrap_or("?")
        ),
    }
}

/// The pod's condition message, and the note when there is one (a gated pod's gates; alone for a
/// pod held without a condition, as GangScheduling holds a gang short of its quorum).
fn message_of(p: &SimulatedPod) -> String {
    let message = p.result.message.clone().unwrap_or_default();
    match &p.result.note {
        Some(note) if message.is_empty() => note.clone(),
        Some(note) => format!("{message} ({note})"),
        None => message,
    }
}

/// A pod group's row: where its pods went, or kube-scheduler's words for why none did.
fn group_row(g: &GroupResult) -> Vec<String> {
    let outcome = match g.outcome {
        GroupOutcome::Scheduled => "Scheduled",
        GroupOutcome::Unschedulable => "Unschedulable",
        GroupOutcome::Waiting => "Waiting",
    };
    let detail = match g.outcome {
        GroupOutcome::Scheduled => g
            .nodes
            .iter()
            .map(|(node, pods)| format!("{node} ({pods})"))
            .collect::<Vec<_>>()
            .join(", "),
        _ => g.message.clone().unwrap_or_default(),
    };
    vec![
        g.group.clone(),
        g.min_count.map_or("-".to_owned(), |m| m.to_string()),
        format!("{}/{}", g.placed, g.total),
        outcome.to_owned(),
        detail,
    ]
}

/// The report as text.
pub fn report(r: &SimulateReport, wide: bool) -> String {
    let s = &r.summary;
    let mut out = format!(
        "Simulated {} on {} with {} in {} ms: {} scheduled, {} pending, {} preempted.\n",
        plural(s.pods, "pod", "pods"),
        plural(s.nodes, "node", "nodes"),
        crate::output::semantics(r.kube_version),
        s.millis,
        s.scheduled,
        s.pending,
        s.preempted
    );
    if s.inputs > 0 {
        out.push_str(&format!(
            "Of the {} new pod(s) (-f, replacements of evicted pods): {} placed, {} pending.\n",
            s.inputs,
            s.inputs - s.inputs_pending,
            s.inputs_pending
        ));
    }
    if s.ties > 0 {
        out.push_str(&format!(
            "{} placement(s) chose among nodes tied for the best score (kube-scheduler picks at random; --seed \
             changes the choice).\n",
            s.ties
        ));
    }
    for a in &r.what_if {
        out.push_str(&format!("What if: {} {}: {}\n", a.flag, a.value, a.effect));
    }
    if let Some(stopped) = &r.stopped_early {
        out.push_str(&format!("Warning: {stopped}\n"));
    }

    for c in &r.node_changes {
        let verb = if c.action == "drain" { "Drain" } else { "Remove" };
        out.push_str(&format!(
            "\n{verb} {}: {} evicted, {} recreated by their controllers",
            c.node,
            c.evicted.len(),
            c.replacements.len()
        ));
        if c.kept.is_empty() {
            out.push_str(".\n");
        } else {
            out.push_str(&format!(", {} kept:\n", c.kept.len()));
            for k in &c.kept {
                out.push_str(&format!("  {}: {}\n", k.pod, k.reason));
            }
        }
    }

    // Workloads of more than one pod (a bare pod's answer is in the pending table).
    let workloads: Vec<_> = r
        .workloads
        .iter()
        .filter(|w| wide || !w.workload.starts_with("pod/"))
        .collect();
    if !workloads.is_empty() {
        let rows: Vec<Vec<String>> = workloads
            .iter()
            .map(|w| {
                vec![
                    w.namespace.clone(),
                    w.workload.clone(),
                    format!("{}/{}", w.placed, w.total),
                ]
            })
            .collect();
        out.push('\n');
        out.push_str(&columns(
            &["NAMESPACE".into(), "WORKLOAD".into(), "PLACED".into()],
            &rows,
        ));
    }

    if !r.groups.is_empty() {
        let rows: Vec<Vec<String>> = r.groups.iter().map(group_row).collect();
        out.push_str("\nPod groups:\n");
        out.push_str(&columns(
            &[
                "POD GROUP".into(),
                "MINCOUNT".into(),
                "PLACED".into(),
                "OUTCOME".into(),
                "NODES / MESSAGE".into(),
            ],
            &rows,
        ));
    }

    if wide {
        let rows: Vec<Vec<String>> = r
            .pods
            .iter()
            .map(|p| {
                vec![
                    p.result.pod.clone(),
                    p.workload.clone(),
                    outcome(p),
                    message_of(p),
                ]
            })
            .collect();
        if !rows.is_empty() {
            out.push('\n');
            out.push_str(&columns(
                &["POD".into(), "WORKLOAD".into(), "NODE".into(), "MESSAGE".into()],
                &rows,
            ));
        }
    } else {
        // Pods left behind, one row per workload and answer: replicas share their message.
        let mut groups: Vec<(String, String, String, String, usize)> = Vec::new();
        for p in r
            .pods
            .iter()
            .filter(|p| p.result.outcome != PodOutcome::Scheduled)
        {
            let namespace = p.result.pod.split_once('/').map_or("", |(ns, _)| ns).to_string();
            let state = outcome(p);
            let message = message_of(p);
            match groups
                .iter_mut()
                .find(|g| g.0 == namespace && g.1 == p.workload && g.2 == state && g.3 == message)
            {
                Some(group) => group.4 += 1,
                None => groups.push((namespace, p.workload.clone(), state, message, 1)),
            }
        }
        if !groups.is_empty() {
            let rows: Vec<Vec<String>> = groups
                .into_iter()
                .map(|(namespace, workload, state, message, n)| {
                    vec![namespace, workload, n.to_string(), state, message]
                })
                .collect();
            out.push_str("\nNot placed:\n");
            out.push_str(&columns(
                &[
                    "NAMESPACE".into(),
                    "WORKLOAD".into(),
                    "PODS".into(),
                    "STATE".into(),
                    "MESSAGE".into(),
                ],
                &rows,
            ));
        }
    }

    if !r.victims.is_empty() {
        let rows: Vec<Vec<String>> = r
            .victims
            .iter()
            .map(|v| {
                vec![
                    v.pod.clone(),
                    v.node.clone(),
                    v.priority.to_string(),
                    v.preemptor.clone(),
                ]
            })
            .collect();
        out.push_str("\nPreempted:\n");
        out.push_str(&columns(
            &[
                "VICTIM".into(),
                "NODE".into(),
                "PRIORITY".into(),
                "PREEMPTOR".into(),
            ],
            &rows,
        ));
    }

    let nodes: Vec<&NodeUsage> = r.nodes.iter().filter(|n| wide || n.changed()).collect();
    if !nodes.is_empty() {
        let rows: Vec<Vec<String>> = nodes
            .iter()
            .map(|n| {
                let extended: Vec<String> = n
                    .extended
                    .iter()
                    .map(|(name, u)| format!("{name} {}", count_change(u)))
                    .collect();
                vec![
                    n.name.clone(),
                    change(&n.cpu),
                    change(&n.memory),
                    count_change(&n.pods),
                    extended.join(", "),
                    n.note.clone().unwrap_or_default(),
                ]
            })
            .collect();
        out.push_str("\nRequested (before → after):\n");
        out.push_str(&columns(
            &[
                "NODE".into(),
                "CPU".into(),
                "MEMORY".into(),
                "PODS".into(),
                "EXTENDED".into(),
                "NOTE".into(),
            ],
            &rows,
        ));
    }
    out
}

/// `simulate`'s report in the requested format.
pub fn render(r: &SimulateReport, format: SimulateFormat) -> Result<Rendered, RenderError> {
    Ok(match format {
        SimulateFormat::Json => json(r)?,
        SimulateFormat::Yaml => yaml(r)?,
        SimulateFormat::Table | SimulateFormat::Wide => report(r, format == SimulateFormat::Wide),
    }
    .into())
}
