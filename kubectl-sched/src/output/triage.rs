//! `triage`'s text output: one block per root cause, the workloads it keeps pending (most pods
//! first) with kube-scheduler's reason counts and the smallest fix; `wide` adds every blocker per node
//! group and the pods' names. Pod groups come first, one line each.

use crate::cli::TriageFormat;
use crate::commands::triage::{Cause, TriageReport, Verdict, WorkloadVerdict};
use crate::diagnosis::hints::{MAX_NAMES, name_list};
use crate::output::Rendered;
use crate::output::data::{RenderError, json, yaml};
use crate::output::table::plural;

/// Workloads listed per cause without `wide`.
const MAX_WORKLOADS: usize = 20;

fn title(c: &Cause) -> String {
    let counts = format!(
        "{}, {}",
        plural(c.pods, "pod", "pods"),
        plural(c.workloads.len(), "workload", "workloads")
    );
    match c.verdict {
        Verdict::Unschedulable => format!("CANNOT BE SCHEDULED ({counts}): {}", c.cause),
        Verdict::Error => format!("SCHEDULING FAILS ({counts}): {}", c.cause),
        Verdict::Gated => format!(
            "GATED ({counts}): {}",
            crate::diagnosis::headline::gated_headline(&c.cause)
        ),
        Verdict::ClaimsNotCreated => format!("WAITING FOR RESOURCECLAIMS ({counts}): {}", c.cause),
        Verdict::OtherScheduler => format!("NOT THIS SCHEDULER'S ({counts}): {}", c.cause),
        Verdict::Fits => format!(
            "FIT NOW ({counts}): kube-scheduler would bind them on its next attempt; \
             `kubectl sched explain POD` says why one is still Pending"
        ),
    }
}

fn workload_name(w: &WorkloadVerdict, namespaced: bool) -> String {
    if namespaced {
        w.workload.to_string()
    } else {
        format!("{}/{}", w.workload.namespace, w.workload)
    }
}

/// Why the root cause is not the reason kube-scheduler counts on the most nodes (its counts name the
/// first filter that rejected each node); nothing when they agree.
fn root_cause_line(w: &WorkloadVerdict, nodes_total: usize) -> String {
    let Some(cause) = &w.root_cause else {
        return String::new();
    };
    let most_counted = w.reasons.first().map(|r| r.reason.as_str());
    if most_counted == Some(cause.reason.as_str()) {
        return String::new();
    }
    format!(
        "    root cause: {} — {} (kube-scheduler counts each node under the first filter that rejected it)\n",
        cause.reason,
        cause.why(nodes_total)
    )
}

fn workload_block(w: &WorkloadVerdict, namespaced: bool, wide: bool, nodes_total: usize) -> String {
    let mut out = format!(
        "  {}: {}",
        workload_name(w, namespaced),
        plural(w.pods.len(), "pod", "pods")
    );
    match w.verdict {
        Verdict::Unschedulable => {
            // Counts only where they are counts: a PreFilter message is about the pod, not nodes.
            let reasons: Vec<String> = w
                .reasons
                .iter()
                .map(|r| match r.nodes {
                    Some(n) => format!("{n} {}", r.reason),
                    None => r.reason.clone(),
                })
                .collect();
            out.push_str(&format!(" — {}\n", reasons.join(", ")));
            out.push_str(&root_cause_line(w, nodes_total));
        }
        Verdict::Fits => {
            out.push_str(&format!(
                " — fits on {}\n",
                w.fits_on.as_deref().unwrap_or("a node")
            ));
        }
        _ => out.push('\n'),
    }
    if wide {
        out.push_str(&format!("    pods: {}\n", w.pods.join(", ")));
        if w.verdict == Verdict::Unschedulable {
            out.push_str(&format!("    message: {}\n", w.message));
        }
        for b in &w.blockers {
            out.push_str(&format!(
                "    blocked by {} on {} (e.g. {}) [every filter run, diagnostic mode]\n",
                b.plugins.join(" + "),
                plural(b.nodes, "node", "nodes"),
                name_list(&b.examples, MAX_NAMES)
            ));
        }
    }
    for f in &w.still_pending {
        out.push_str(&format!("    still pending: {}\n", f.message));
    }
    let mut fixes = w.fixes.iter();
    if let Some(first) = fixes.next() {
        out.push_str(&format!(
            "    smallest fix: {} (opens {})\n",
            first.change,
            plural(first.opens.len(), "node", "nodes")
        ));
        let limit = if wide { usize::MAX } else { 2 };
        for f in fixes.take(limit) {
            out.push_str(&format!(
                "    or: {} (opens {})\n",
                f.change,
                plural(f.opens.len(), "node", "nodes")
            ));
        }
    } else if w.verdict == Verdict::Unschedulable && !w.blockers.is_empty() {
        out.push_str(&no_fix_line(w));
    }
    out
}

/// Why no fix is proposed: nodes with several blockers (no single change opens them), or single
/// blockers of kinds triage proposes no change for (node affinity, ports, volumes, ...).
fn no_fix_line(w: &WorkloadVerdict) -> String {
    let single: Vec<&str> = w
        .blockers
        .iter()
        .filter(|b| b.plugins.len() == 1)
        .map(|b| b.plugins[0].as_str())
        .collect();
    if single.is_empty() {
        return "    no single change opens a node: every node has several blockers (see -o wide)\n"
            .to_string();
    }
    let nodes: usize = w
        .blockers
        .iter()
        .filter(|b| b.plugins.len() == 1)
        .map(|b| b.nodes)
        .sum();
    format!(
        "    {} blocked only by {}: change the pod or the nodes for that filter (no fix of the kinds \
         triage proposes applies; see -o wide)\n",
        plural(nodes, "node is", "nodes are"),
        single.join(", ")
    )
}

/// The pod groups: one line each (kube-scheduler places a gang's pods all or nothing), the ones
/// it holds back first.
fn pod_groups_block(r: &TriageReport, namespaced: bool, wide: bool) -> String {
    let pods: usize = r.pod_groups.iter().map(|g| g.pods.len()).sum();
    let mut out = format!(
        "POD GROUPS ({}, {}): all or nothing; `kubectl sched explain podgroup/NAME` says node by node why\n",
        plural(r.pod_groups.len(), "group", "groups"),
        plural(pods, "pending pod", "pending pods")
    );
    for g in &r.pod_groups {
        // `namespace/name` (a tree's `namespace/compositepodgroup/ROOT`): the name alone when the
        // scope is one namespace.
        let name = if namespaced {
            g.pod_group
                .split_once('/')
                .map_or(g.pod_group.clone(), |(_, name)| name.to_owned())
        } else {
            g.pod_group.clone()
        };
        out.push_str(&format!("  {name}: {}\n", g.summary));
        if wide {
            out.push_str(&format!("    pods: {}\n", g.pods.join(", ")));
            if !g.report.message.is_empty() {
                out.push_str(&format!("    kube-scheduler: {}\n", g.report.message));
            }
        }
    }
    out
}

/// The report as text.
pub fn report(r: &TriageReport, namespaced: bool, wide: bool) -> String {
    let stuck = r.stuck_pods();
    let mut out = format!(
        "{} pending in {} ({} distinct shape(s), {} nodes, {}): {} cannot be scheduled now, {} fit now.\n",
        plural(r.pods, "pod", "pods"),
        r.scope,
        r.shapes,
        r.nodes,
        crate::output::semantics(r.kube_version),
        stuck,
        r.pods - stuck
    );
    for a in &r.what_if {
        out.push_str(&format!("What if: {a}\n"));
    }
    if !r.pod_groups.is_empty() {
        out.push('\n');
        out.push_str(&pod_groups_block(r, namespaced, wide));
    }
    for c in &r.causes {
        out.push('\n');
        out.push_str(&title(c));
        out.push('\n');
        let shown = if wide { c.workloads.len() } else { MAX_WORKLOADS };
        for w in c.workloads.iter().take(shown) {
            out.push_str(&workload_block(w, namespaced, wide, r.nodes));
        }
        if c.workloads.len() > shown {
            out.push_str(&format!(
                "  ... and {} more (-o wide lists every one)\n",
                plural(c.workloads.len() - shown, "workload", "workloads")
            ));
        }
    }
    out
}

/// `triage`'s report in the requested format; `namespaced` (one namespace) leaves namespaces out of
/// the table's names.
pub fn render(r: &TriageReport, format: TriageFormat, namespaced: bool) -> Result<Rendered, RenderError> {
    Ok(match format {
        TriageFormat::Json => json(r)?.into(),
        TriageFormat::Yaml => yaml(r)?.into(),
        TriageFormat::Table | TriageFormat::Wide if r.pods == 0 => Rendered {
            stdout: Vec::new(),
            nothing_found: Some(format!("No pending pods in {}.", r.scope)),
        },
        TriageFormat::Table | TriageFormat::Wide => {
            report(r, namespaced, format == TriageFormat::Wide).into()
        }
    })
}
