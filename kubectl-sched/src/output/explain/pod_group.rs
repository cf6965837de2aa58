//! `explain podgroup/NAME` and `workload/NAME` as text: the group's verdict in one line and in
//! kube-scheduler's words, the quorum, each pod's fate, node by node what the cycle placed and
//! what refuses the pod left over, why, and the checked fixes. Also `explain POD`'s short "Pod
//! group" section. A PodGroup under a CompositePodGroup shows its tree, which decides.

use std::collections::BTreeMap;

use sched_core::diagnosis::pod_group::preemption::GroupPreemptionView;
use sched_core::diagnosis::pod_group::tree::TreeReport;
use sched_core::diagnosis::pod_group::{GroupNode, MemberState, PlacementReport, PodGroupReport, Quorum};
use sched_core::preemption::pod_group::GroupPreemptionOutcome;

use super::table::{findings_section, what_if_line};
use crate::commands::explain::pod_group::GroupExplainReport;
use crate::output::table::{columns, plural};

/// Node rows shown without `-o wide` (the nodes that took pods first).
const MAX_NODE_ROWS: usize = 20;
/// Pod rows shown without `-o wide`.
const MAX_POD_ROWS: usize = 30;

fn quorum_line(q: &Quorum) -> String {
    let min = q
        .min_count
        .map_or_else(|| "no minCount".to_string(), |m| format!("minCount {m}"));
    let mut line = format!(
        "{min}; {}: {} bound, {} queued, {} gated",
        plural(q.pods, "pod", "pods"),
        q.scheduled,
        q.queued,
        q.gated
    );
    if !q.nominated.is_empty() {
        let nominated: Vec<String> = q
            .nominated
            .iter()
            .map(|n| format!("{} on {}", n.pod, n.node))
            .collect();
        line.push_str(&format!(
            "; nominated (waiting at Permit, or after a preemption): {}",
            nominated.join(", ")
        ));
    }
    line
}

/// The group's preemption (PodGroupPostFilter) when it acts: its words, the victims node by node,
/// the nominations. Empty when it did not run or preempts nothing (its words end the group's
/// verdict anyway).
pub fn preemption_text(preemption: Option<&GroupPreemptionView>) -> String {
    let Some(p) = preemption.filter(|p| {
        matches!(
            p.outcome,
            GroupPreemptionOutcome::Found | GroupPreemptionOutcome::Ongoing
        )
    }) else {
        return String::new();
    };
    let mut out = format!("  preemption for the group: {}\n", p.message);
    for line in p.victim_lines() {
        out.push_str(&format!("    would preempt on {line}\n"));
    }
    if !p.nominations.is_empty() {
        let nominated: Vec<String> = p
            .nominations
            .iter()
            .map(|n| format!("{} on {}", n.pod, n.node))
            .collect();
        out.push_str(&format!("    nominates {}\n", nominated.join(", ")));
    }
    out
}

/// `explain POD`'s section for a pod of a group.
pub fn section(g: &PodGroupReport, nodes_total: usize) -> String {
    let mut out = format!(
        "Pod group {}: {}\n  quorum: {}\n",
        g.key(),
        g.summary(nodes_total),
        quorum_line(&g.quorum)
    );
    if !g.message.is_empty() {
        out.push_str(&format!("  group verdict: {}\n", g.message));
    }
    out.push_str(&preemption_text(g.preemption.as_ref()));
    out.push_str(&format!(
        "  node by node and the smallest fix: kubectl sched explain podgroup/{} -n {}\n",
        g.pod_group, g.namespace
    ));
    out
}

fn state_text(state: MemberState) -> &'static str {
    match state {
        MemberState::Bound => "bound",
        MemberState::Placed => "placed",
        MemberState::DidNotFit => "did not fit",
        MemberState::NotReached => "not reached",
        MemberState::Gated => "gated",
        MemberState::Pending => "pending",
    }
}

fn members_table(g: &PodGroupReport, wide: bool) -> String {
    let limit = if wide { usize::MAX } else { MAX_POD_ROWS };
    let rows: Vec<Vec<String>> = g
        .members
        .iter()
        .take(limit)
        .map(|m| {
            vec![
                m.pod.clone(),
                state_text(m.state).to_string(),
                m.node.clone().unwrap_or_else(|| "-".to_string()),
                m.message.clone(),
            ]
        })
        .collect();
    let headers = ["POD", "STATE", "NODE", "KUBE-SCHEDULER WRITES"].map(String::from);
    let mut out = columns(&headers, &rows);
    if g.members.len() > limit {
        out.push_str(&format!(
            "  and {} more pods (-o wide lists every pod)\n",
            g.members.len() - limit
        ));
    }
    out
}

fn refusal(n: &GroupNode) -> String {
    match &n.rejected_by {
        Some(plugin) => format!("{plugin}: {}", n.reasons.join(", ")),
        None => "-".to_string(),
    }
}

fn nodes_table(g: &PodGroupReport, wide: bool) -> String {
    let unplaced = g.first_unplaced.as_deref().unwrap_or("the next pod");
    let mut shown: Vec<&GroupNode> = g.nodes.iter().filter(|n| !n.takes.is_empty()).collect();
    let mut rest: Vec<&GroupNode> = g.nodes.iter().filter(|n| n.takes.is_empty()).collect();
    if wide {
        shown.append(&mut rest);
    } else if shown.len() > MAX_NODE_ROWS {
        rest.extend(shown.split_off(MAX_NODE_ROWS));
    }
    let rows: Vec<Vec<String>> = shown
        .iter()
        .map(|n| {
            vec![
                n.node.clone(),
                if n.takes.is_empty() {
                    "-".to_string()
                } else {
                    format!("{} ({})", n.takes.len(), n.takes.join(", "))
                },
                refusal(n),
            ]
        })
        .collect();
    let headers = [
        "NODE".to_string(),
        "TAKES".to_string(),
        format!("REFUSES {unplaced}"),
    ];
    let mut out = columns(&headers, &rows);
    // The other nodes, one line per refusal (a large cluster's nodes that took nothing).
    let mut grouped: BTreeMap<String, usize> = BTreeMap::new();
    for n in rest {
        *grouped.entry(refusal(n)).or_default() += 1;
    }
    let mut grouped: Vec<(String, usize)> = grouped.into_iter().collect();
    grouped.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    for (why, count) in grouped {
        out.push_str(&format!(
            "  {} that took no pod: {why}\n",
            plural(count, "other node", "other nodes")
        ));
    }
    out
}

/// The topology domains the cycle tried (TopologyAwareWorkloadScheduling): the chosen one, or
/// per domain what stops the group there.
fn placements_table(p: &PlacementReport) -> String {
    let key = p.topology_key.as_deref().unwrap_or("(no topology constraint)");
    let mut out = format!("Placements by {key}: {}\n", p.summary());
    if p.domains.is_empty() {
        return out;
    }
    let rows: Vec<Vec<String>> = p
        .domains
        .iter()
        .map(|d| {
            let why = if d.fits {
                match &d.score {
                    Some(s) => format!(
                        "fits; score {} (PodGroupPodsCount {}, NodeResourcesFit {})",
                        s.total,
                        s.pod_group_pods_count,
                        s.node_resources_fit
                            .map_or_else(|| "-".to_string(), |v| v.to_string())
                    ),
                    None => "fits".to_string(),
                }
            } else {
                match (&d.first_unplaced, &d.first_unplaced_message) {
                    (Some(pod), Some(message)) => format!("{}; {pod}: {message}", d.status),
                    _ => d.status.clone(),
                }
            };
            let chosen = if p.chosen.as_deref() == Some(d.domain.as_str()) {
                "*"
            } else {
                ""
            };
            vec![
                format!(
                    "{}{chosen}",
                    if d.domain.is_empty() { "(all)" } else { &d.domain }
                ),
                d.nodes.to_string(),
                d.placed.to_string(),
                why,
            ]
        })
        .collect();
    let headers = ["DOMAIN", "NODES", "PLACED", "WHOLE GROUP"].map(String::from);
    out.push_str(&columns(&headers, &rows));
    if let Some(note) = &p.note {
        out.push_str(&format!("  note: {note}\n"));
    }
    out
}

/// One group in full.
fn group_text(g: &PodGroupReport, nodes_total: usize, wide: bool, context: &str) -> String {
    let mut out = format!("PodGroup {}{context}: {}\n", g.key(), g.summary(nodes_total));
    if !g.message.is_empty() {
        out.push_str(&format!("  kube-scheduler: {}\n", g.message));
    }
    out.push_str(&preemption_text(g.preemption.as_ref()));
    if let Some(w) = &g.workload {
        out.push_str(&format!("  made from Workload {w}\n"));
    }
    out.push_str(&format!("  quorum: {}\n", quorum_line(&g.quorum)));
    for note in &g.not_visible {
        out.push_str(&format!("  not in a snapshot: {note}\n"));
    }
    if let Some(p) = &g.placements {
        out.push('\n');
        out.push_str(&placements_table(p));
    }
    if let Some(t) = &g.tree {
        out.push('\n');
        out.push_str(&tree_table(t));
    }
    if !g.members.is_empty() {
        out.push('\n');
        out.push_str(&members_table(g, wide));
    }
    if !g.nodes.is_empty() {
        out.push('\n');
        out.push_str(&nodes_table(g, wide));
    }
    if !g.findings.is_empty() {
        out.push('\n');
        if let Some(pod) = &g.first_unplaced {
            out.push_str(&format!("{pod} is the first pod the cycle could not place. "));
        }
        out.push_str(&findings_section(&g.findings));
    }
    if !g.fixes.is_empty() {
        out.push_str("\nSmallest changes that make the whole group fit (each checked by running the group's cycle again):\n");
        for f in &g.fixes {
            out.push_str(&format!(
                "  - {} (then {} placed together)\n",
                f.description,
                plural(f.places, "pod", "pods")
            ));
        }
    }
    out
}

/// The tree a PodGroup belongs to (CompositePodGroup): each group indented under its parent, what
/// it needs and has, whether it fit and kube-scheduler's words on it.
fn tree_table(t: &TreeReport) -> String {
    let mut out = format!(
        "Tree under CompositePodGroup {} (kube-scheduler schedules it whole, all or nothing):\n",
        t.root
    );
    let rows: Vec<Vec<String>> = t
        .groups
        .iter()
        .map(|g| {
            let unit = if g.kind == "PodGroup" { "pods" } else { "groups" };
            let domains: Vec<String> = g
                .placements
                .iter()
                .map(|(d, fits)| format!("{d}:{}", if *fits { "fits" } else { "no" }))
                .collect();
            vec![
                format!("{}{} {}", "  ".repeat(g.depth), g.kind, g.name),
                format!("{} of {} {unit}", g.has, g.needs),
                if g.fits { "yes" } else { "no" }.to_string(),
                if domains.is_empty() {
                    g.message.clone()
                } else {
                    format!("[{}] {}", domains.join(" "), g.message)
                },
            ]
        })
        .collect();
    let headers: Vec<String> = ["GROUP", "QUORUM", "FITS", "STATUS"].map(String::from).to_vec();
    out.push_str(&columns(&headers, &rows));
    if let Some(held) = &t.held {
        out.push_str(&format!("  held before any cycle: {held}\n"));
    } else if !t.fits {
        out.push_str(&format!("  why the whole tree does not fit: {}\n", t.message));
    }
    out.push_str(&format!("  note: {}\n", t.note));
    out
}

/// `explain podgroup/NAME` or `workload/NAME` as text.
pub fn report(r: &GroupExplainReport, wide: bool) -> String {
    let mut out = what_if_line(&r.what_if);
    let context = format!(
        " (profile {}, {} nodes, {})",
        r.profile,
        r.nodes_total,
        crate::output::semantics(r.kube_version)
    );
    // A PodGroup is its own headline; a Workload's line counts its groups, each then in full.
    let group_context = if r.kind == "PodGroup" {
        context.as_str()
    } else {
        out.push_str(&format!(
            "{} {}/{}{context}: {}\n",
            r.kind,
            r.namespace,
            r.name,
            plural(r.pod_groups.len(), "PodGroup", "PodGroups")
        ));
        if r.pod_groups.is_empty() && r.kind == "Workload" {
            out.push_str("  none exists yet (its controller makes them from its podGroupTemplates)\n");
        }
        ""
    };
    for (i, g) in r.pod_groups.iter().enumerate() {
        if i > 0 || r.kind != "PodGroup" {
            out.push('\n');
        }
        out.push_str(&group_text(g, r.nodes_total, wide, group_context));
    }
    out
}
