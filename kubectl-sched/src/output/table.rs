//! Human output: the headline, the per-node table (kubectl's column style), hints, and `--node`'s
//! plugin-by-plugin detail.

use sched_core::Code;
use sched_core::action::Action;
use sched_core::apply::{ActionResult, Outcome as ApplyOutcome};
use sched_core::explain::{Explanation, NodeExplanation, Outcome};
use sched_core::plugins::dynamic_resources::diagnose::{Diagnosis, Wants};
use sched_core::plugins::scheduling_gates::SCHEDULING_GATED_MESSAGE;
use sched_core::preemption::{PreemptionResult, VictimRemoval, VictimView};
use sched_core::resource::format_amount;

use crate::commands::explain::{BoundCheck, ExplainReport, NodeDetail, PendingEntry, Reach};
use crate::commands::hints::{Hint, MAX_NAMES, name_list};
use crate::commands::node_resources::ResourceUse;
use crate::commands::preempt::{
    DryRunView, PreemptReport, Situation, advice_after_refused_eviction, blocking_budgets,
};
use crate::commands::what_if::Applied;
use crate::output::random;

/// Columns separated by three spaces, as kubectl prints them; no trailing blanks.
pub fn columns(headers: &[String], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    for row in std::iter::once(headers).chain(rows.iter().map(Vec::as_slice)) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 < row.len() {
                let pad = widths[i].saturating_sub(cell.chars().count());
                line.push_str(cell);
                line.push_str(&" ".repeat(pad + 3));
            } else {
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn score_text(score: Option<i64>) -> String {
    score.map_or_else(|| "-".to_string(), |s| s.to_string())
}

/// Where the pod would go: `worker-b with score 187`, its nominated node, or the tied nodes.
fn placement(e: &Explanation) -> String {
    let score = e
        .selected_score
        .map(|s| s.to_string())
        .unwrap_or_else(|| "-".into());
    match e.selected.as_slice() {
        [] => "no node".to_string(),
        [one] if e.nominated_node_fast_path.as_deref() == Some(one.as_str()) => {
            format!("its nominated node {one}")
        }
        [one] => format!("{one} with score {score}"),
        many => format!("one of {} (tied at score {score})", name_list(many, MAX_NAMES)),
    }
}

/// The one-line answer: the FailedScheduling message, where the pod would go, or the gate.
pub fn headline(e: &Explanation) -> String {
    match e.outcome {
        Outcome::Unschedulable => e.message.clone(),
        Outcome::Gated => super::gated_headline(&e.message),
        Outcome::Scheduled => format!("would be scheduled on {}", placement(e)),
        Outcome::Error => format!("the scheduling cycle fails: {}", e.message),
    }
}

/// A node's verdict: Selected, Feasible, or its rejection code (Unresolvable for
/// UnschedulableAndUnresolvable).
pub(crate) fn verdict(e: &Explanation, n: &NodeExplanation) -> String {
    if n.feasible {
        if e.selected.contains(&n.name) {
            "Selected".to_string()
        } else {
            "Feasible".to_string()
        }
    } else {
        match n.code {
            Code::UnschedulableAndUnresolvable => "Unresolvable".to_string(),
            code => code.to_string(),
        }
    }
}

/// The per-node table; `wide` adds each score plugin's weighted score.
pub fn node_table(e: &Explanation, score_plugins: &[(String, i64)], wide: bool) -> String {
    let mut headers: Vec<String> = ["NODE", "VERDICT", "PLUGIN", "REASONS", "SCORE"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if wide {
        headers.extend(score_plugins.iter().map(|(p, w)| format!("{p}(x{w})")));
    }
    let rows: Vec<Vec<String>> = e
        .nodes
        .iter()
        .map(|n| {
            let mut row = vec![
                n.name.clone(),
                verdict(e, n),
                n.plugin.clone().unwrap_or_else(|| "-".to_string()),
                if n.reasons.is_empty() {
                    "-".to_string()
                } else {
                    n.reasons.join(", ")
                },
                score_text(n.score),
            ];
            if wide {
                row.extend(
                    score_plugins
                        .iter()
                        .map(|(p, _)| score_text(n.scores.get(p.as_str()).map(|s| s.weighted))),
                );
            }
            row
        })
        .collect();
    columns(&headers, &rows)
}

fn hint_lines(hints: &[Hint]) -> String {
    let mut out = String::from("Hints:\n");
    for h in hints {
        out.push_str(&format!("  - {}", h.message));
        match &h.snippet {
            Some(snippet) => {
                out.push_str(":\n");
                for line in snippet.lines() {
                    out.push_str(&format!("      {line}\n"));
                }
            }
            None => out.push('\n'),
        }
    }
    out
}

fn bound_text(b: &BoundCheck, e: &Explanation) -> String {
    if !b.node_exists {
        return format!(
            "Its node {} is no longer in the cluster; evaluated as if pending, it {}.",
            b.node,
            outcome_clause(e)
        );
    }
    let node = &b.node;
    if b.still_best {
        format!(
            "Evaluated as if pending, {node} is still feasible and still the best (score {}).",
            score_text(b.score)
        )
    } else if b.still_feasible {
        format!(
            "Evaluated as if pending, {node} is still feasible (score {}) but no longer the best: it {}.",
            score_text(b.score),
            outcome_clause(e)
        )
    } else {
        let why = e
            .nodes
            .iter()
            .find(|n| n.name == *node)
            .map(|n| {
                format!(
                    " ({}: {})",
                    n.plugin.as_deref().unwrap_or("-"),
                    n.reasons.join(", ")
                )
            })
            .unwrap_or_default();
        format!(
            "Evaluated as if pending, {node} is no longer feasible{why}; it {}.",
            outcome_clause(e)
        )
    }
}

/// "would be scheduled on X" / "could not be scheduled: MESSAGE".
fn outcome_clause(e: &Explanation) -> String {
    match e.outcome {
        Outcome::Scheduled => format!("would be scheduled on {}", placement(e)),
        Outcome::Unschedulable => format!("could not be scheduled: {}", e.message),
        Outcome::Gated => format!("is gated: {}", super::gated_headline(&e.message)),
        Outcome::Error => format!("fails with an error: {}", e.message),
    }
}

/// The what-if flags applied, on one line ("" when none): the answer is about a changed cluster.
pub fn what_if_line(applied: &[Applied]) -> String {
    if applied.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = applied.iter().map(ToString::to_string).collect();
    format!("What if: {}.\n", parts.join("; "))
}

/// What `-o wide` says instead of score columns when no node passed the filters.
const NOTHING_SCORED: &str =
    "No node is feasible, so no node is scored: there are no per-plugin scores to show.\n";

/// `explain POD` in table form.
pub fn report(r: &ExplainReport, wide: bool) -> String {
    let e = &r.explanation;
    let context = format!("profile {}, {} nodes", e.profile, e.nodes_total);
    let mut out = what_if_line(&r.what_if);
    match (&r.bound, e.outcome) {
        (Some(b), _) => {
            out.push_str(&format!("{} is bound to {} ({context}).\n", e.pod, b.node));
            out.push_str(&bound_text(b, e));
            out.push('\n');
        }
        (None, Outcome::Scheduled) => {
            out.push_str(&format!("{} {} ({context}).\n", e.pod, headline(e)));
        }
        (None, Outcome::Unschedulable) => {
            out.push_str(&format!(
                "{} cannot be scheduled ({context}):\n  {}\n",
                e.pod, e.message
            ));
        }
        (None, Outcome::Gated) => {
            // The words of the pod's own PodScheduled condition (what `kubectl describe pod` shows),
            // then the gates it waits for.
            out.push_str(&format!(
                "{} is gated ({context}):\n  {SCHEDULING_GATED_MESSAGE}: {}\n",
                e.pod,
                r.scheduling_gates.join(", ")
            ));
            if let Some(u) = &r.once_ungated {
                match u.outcome {
                    Outcome::Unschedulable => out.push_str(&format!(
                        "Once ungated, it could not be scheduled:\n  {}\n",
                        u.message
                    )),
                    _ => out.push_str(&format!("Once ungated, it {}.\n", outcome_clause(u))),
                }
            }
        }
        (None, Outcome::Error) => {
            out.push_str(&format!("{}: {} ({context})\n", e.pod, headline(e)));
        }
    }
    if let Some(findings) = r.still_pending.as_ref().filter(|f| !f.is_empty()) {
        out.push_str("\nWhy it is still Pending:\n");
        for f in findings {
            out.push_str(&format!("  - {}\n", f.message));
        }
    }
    let basis = r.once_ungated.as_ref().unwrap_or(e);
    out.push('\n');
    match &r.node_detail {
        Some(d) => out.push_str(&node_detail(d)),
        // kube-scheduler scores only feasible nodes: without one, every score column would be all `-`.
        None if wide && !basis.nodes.iter().any(|n| n.feasible) => {
            out.push_str(&node_table(basis, &r.score_plugins, false));
            out.push_str(NOTHING_SCORED);
        }
        None => out.push_str(&node_table(basis, &r.score_plugins, wide)),
    }
    if let Some(d) = &r.dra {
        out.push('\n');
        out.push_str(&claims_section(d));
    }
    if !basis.claim_allocations.is_empty() {
        out.push('\n');
        out.push_str(&allocations_section(basis));
    }
    if !r.hints.is_empty() {
        out.push('\n');
        out.push_str(&hint_lines(&r.hints));
    }
    out
}

fn wants_text(w: Wants) -> String {
    match w {
        Wants::Count(n) => n.to_string(),
        Wants::All => "all".to_string(),
    }
}

/// The pod's claims, one row per request: devices reachable from any node and how each filter
/// narrows them, and on how many nodes the request alone has enough.
fn claims_section(d: &Diagnosis) -> String {
    let headers = [
        "CLAIM",
        "REQUEST",
        "CLASS",
        "WANTS",
        "DEVICES",
        "CLASS-OK",
        "SELECTED",
        "ALLOCATED",
        "TAINTED",
        "NO-COUNTERS",
        "FREE",
        "NODES-WITH-ENOUGH",
    ]
    .map(String::from);
    let mut rows = Vec::new();
    for claim in &d.claims {
        if !claim.allocated_devices.is_empty() {
            rows.push(vec![
                claim.claim.clone(),
                "(allocated)".to_string(),
                String::new(),
                String::new(),
                claim.allocated_devices.join(","),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ]);
        }
        for r in &claim.requests {
            let c = r.cluster;
            rows.push(vec![
                claim.claim.clone(),
                r.request.clone(),
                if r.class_exists {
                    r.device_class.clone()
                } else {
                    format!("{} (missing)", r.device_class)
                },
                wants_text(r.wants),
                c.devices.to_string(),
                c.class_match.to_string(),
                c.request_match.to_string(),
                c.allocated.to_string(),
                c.tainted.to_string(),
                c.counters_used_up.to_string(),
                c.free.to_string(),
                format!("{}/{}", r.nodes_with_enough, r.nodes.len()),
            ]);
        }
    }
    format!(
        "Resource claims (devices reachable from any node, counted once; -o json has every node):\n{}",
        columns(&headers, &rows)
    )
}

/// The devices DynamicResources would allocate on the selected node.
fn allocations_section(e: &Explanation) -> String {
    let headers = ["CLAIM", "REQUEST", "DEVICE"].map(String::from);
    let rows: Vec<Vec<String>> = e
        .claim_allocations
        .iter()
        .flat_map(|c| {
            c.devices.iter().map(|d| {
                vec![
                    c.claim.clone(),
                    d.request.clone(),
                    format!("{}/{}/{}", d.driver, d.pool, d.device),
                ]
            })
        })
        .collect();
    let node = e.claim_allocations.first().map(|c| c.node.as_str()).unwrap_or("");
    format!("Devices it would get on {node}:\n{}", columns(&headers, &rows))
}

/// `--node`'s resource breakdown: one row per resource, then each resource's largest users.
fn resources_section(node: &str, resources: &[ResourceUse]) -> String {
    let headers = ["RESOURCE", "ALLOCATABLE", "REQUESTED", "FREE", "THIS POD", "FITS"].map(String::from);
    let amount = |name: &str, v: i64| {
        if v < 0 {
            format!("-{}", format_amount(name, v.saturating_neg()))
        } else {
            format_amount(name, v)
        }
    };
    let rows: Vec<Vec<String>> = resources
        .iter()
        .map(|r| {
            vec![
                r.resource.clone(),
                amount(&r.resource, r.allocatable),
                amount(&r.resource, r.requested),
                amount(&r.resource, r.free),
                amount(&r.resource, r.pod_request),
                if r.fits { "yes" } else { "no" }.to_string(),
            ]
        })
        .collect();
    let mut out = format!(
        "Resources on {node} (requested: its pods, as NodeResourcesFit adds them up):\n{}",
        columns(&headers, &rows)
    );
    for r in resources.iter().filter(|r| !r.pods.is_empty()) {
        let mut users: Vec<String> = r
            .pods
            .iter()
            .map(|u| {
                let nominated = if u.nominated { ", nominated" } else { "" };
                format!("{} ({}{nominated})", u.pod, amount(&r.resource, u.request))
            })
            .collect();
        if r.more_pods > 0 {
            users.push(format!("and {} more", r.more_pods));
        }
        out.push_str(&format!("  {}: {}\n", r.resource, users.join(", ")));
    }
    out
}

/// `--node`: the node's verdict, each filter, each score, and its resources.
pub fn node_detail(d: &NodeDetail) -> String {
    let n = &d.node;
    let mut out = if n.feasible {
        format!("Node {}: feasible, score {}.\n", n.name, score_text(n.score))
    } else {
        format!(
            "Node {}: {} by {} ({}).\n",
            n.name,
            n.code,
            n.plugin.as_deref().unwrap_or("-"),
            n.reasons.join(", ")
        )
    };
    if d.filters.is_empty() {
        out.push_str("No filter ran: PreFilter rejected the pod before any node was evaluated.\n");
    } else {
        out.push('\n');
        let mut not_reached = false;
        let rows: Vec<Vec<String>> = d
            .filters
            .iter()
            .map(|f| {
                let verdict = match (f.reach, f.code) {
                    (Reach::Skipped, _) | (_, None) => "Skip".to_string(),
                    (Reach::Ran, Some(c)) => c.to_string(),
                    (Reach::NotReached, Some(c)) => {
                        not_reached = true;
                        format!("({c})")
                    }
                };
                vec![
                    f.plugin.clone(),
                    verdict,
                    if f.reasons.is_empty() {
                        "-".to_string()
                    } else {
                        f.reasons.join(", ")
                    },
                ]
            })
            .collect();
        out.push_str(&columns(
            &["FILTER".into(), "VERDICT".into(), "REASONS".into()],
            &rows,
        ));
        if not_reached {
            out.push_str(
                "(...) kube-scheduler stops at the first rejecting filter; later verdicts are shown as if it \
                 went on.\n",
            );
        }
        if d.filters.iter().any(|f| f.reach == Reach::Skipped) {
            out.push_str("Skip: the plugin's PreFilter found nothing to check for this pod.\n");
        }
    }
    if n.feasible && !d.scores.is_empty() {
        out.push('\n');
        let mut rows: Vec<Vec<String>> = d
            .scores
            .iter()
            .map(|s| match &s.score {
                Some(v) => vec![
                    s.plugin.clone(),
                    v.raw.to_string(),
                    v.normalized.to_string(),
                    v.weight.to_string(),
                    v.weighted.to_string(),
                ],
                None => vec![
                    s.plugin.clone(),
                    "-".into(),
                    "-".into(),
                    s.weight.to_string(),
                    "-".into(),
                ],
            })
            .collect();
        rows.push(vec![
            "TOTAL".into(),
            String::new(),
            String::new(),
            String::new(),
            score_text(n.score),
        ]);
        out.push_str(&columns(
            &[
                "SCORE".into(),
                "RAW".into(),
                "NORMALIZED".into(),
                "WEIGHT".into(),
                "WEIGHTED".into(),
            ],
            &rows,
        ));
    }
    if !d.resources.is_empty() {
        out.push('\n');
        out.push_str(&resources_section(&n.name, &d.resources));
    }
    out
}

/// `--all-pending`: one line per pod.
pub fn pending(entries: &[PendingEntry]) -> String {
    let lines: Vec<(String, String)> = entries
        .iter()
        .map(|entry| match entry {
            PendingEntry::Evaluated(e) => (e.pod.clone(), headline(e)),
            PendingEntry::NotHandled { pod, scheduler_name } => (
                pod.clone(),
                format!("schedulerName {scheduler_name:?} has no profile here: another scheduler's pod"),
            ),
        })
        .collect();
    let width = lines.iter().map(|(p, _)| p.chars().count()).max().unwrap_or(0);
    lines
        .iter()
        .map(|(pod, text)| format!("{pod:<width$}   {text}\n"))
        .collect()
}

// ---------------------------------------------------------------------------------------------- preempt

fn victim_key(v: &VictimView) -> String {
    format!("{}/{}", v.namespace, v.name)
}

/// Why the chosen node is the chosen one.
fn choice(p: &PreemptionResult) -> String {
    let Some(node) = &p.node else {
        return String::new();
    };
    let kube_pick = p.tied_nodes.first();
    if kube_pick != Some(node) && !p.tied_nodes.contains(node) {
        return format!(
            "forced with --node; kube-scheduler would pick {}",
            name_list(&p.tied_nodes, MAX_NAMES)
        );
    }
    match (p.candidates.len(), p.tied_nodes.len(), p.decided_by) {
        (1, _, _) => "the only candidate".to_string(),
        (_, 1, Some(criterion)) => format!("best by {criterion}"),
        (_, n, _) if n > 1 => format!(
            "first by name of {n} tied candidates ({}): kube-scheduler picks one of them at random",
            name_list(&p.tied_nodes, MAX_NAMES)
        ),
        _ => "best candidate".to_string(),
    }
}

fn search_line(p: &PreemptionResult) -> String {
    let mut line = format!(
        "Searched every potential node ({} of {} nodes{}) and found {} candidate(s). kube-scheduler samples \
         potential nodes from a random offset until it has {} candidate(s)",
        p.potential_nodes,
        p.nodes_total,
        if p.potential_nodes < p.nodes_total {
            "; on the others preemption cannot help"
        } else {
            ""
        },
        p.candidates.len(),
        p.kube_scheduler_would_sample
    );
    if p.answer_depends_on_sampling {
        line.push_str(": it may stop before the best one and pick a worse candidate.\n");
    } else {
        line.push_str(": here it sees every candidate.\n");
    }
    line
}

fn candidate_table(p: &PreemptionResult) -> String {
    let rows: Vec<Vec<String>> = p
        .candidates
        .iter()
        .map(|c| {
            let names: Vec<String> = c
                .victims
                .iter()
                .map(|v| format!("{}({})", victim_key(v), v.priority))
                .collect();
            vec![
                if p.node.as_deref() == Some(c.node.as_str()) {
                    format!("{} *", c.node)
                } else {
                    c.node.clone()
                },
                if c.alternative_victims.is_empty() {
                    c.victims.len().to_string()
                } else {
                    format!("{}{}", c.victims.len(), random::RANDOM_VICTIMS_MARK)
                },
                c.pdb_violations.to_string(),
                c.victims
                    .first()
                    .map_or_else(|| "-".to_string(), |v| v.priority.to_string()),
                name_list(&names, MAX_NAMES),
            ]
        })
        .collect();
    columns(
        &[
            "CANDIDATE".into(),
            "VICTIMS".into(),
            "PDB VIOLATIONS".into(),
            "TOP PRIORITY".into(),
            "VICTIM PODS (PRIORITY)".into(),
        ],
        &rows,
    )
}

fn victim_table(victims: &[VictimView]) -> String {
    let with_devices = victims.iter().any(|v| !v.devices.is_empty());
    let rows: Vec<Vec<String>> = victims
        .iter()
        .map(|v| {
            let mut row = vec![
                victim_key(v),
                v.priority.to_string(),
                if v.pdb_violation { "violated" } else { "-" }.to_string(),
                v.start_time
                    .as_ref()
                    .map_or_else(|| "-".to_string(), |t| t.0.to_string()),
                if v.terminating {
                    "terminating (left as is)"
                } else {
                    "to remove"
                }
                .to_string(),
            ];
            if with_devices {
                row.push(if v.devices.is_empty() {
                    "-".to_string()
                } else {
                    v.devices.join(",")
                });
            }
            row
        })
        .collect();
    let mut headers: Vec<String> = ["VICTIM", "PRIORITY", "PDB", "STARTED", "STATE"]
        .map(String::from)
        .into();
    if with_devices {
        headers.push("DEVICES (FREED ONCE ITS CLAIMS ARE DEALLOCATED)".to_string());
    }
    columns(&headers, &rows)
}

fn rejected_table(p: &PreemptionResult) -> String {
    let rows: Vec<Vec<String>> = p
        .rejected_nodes
        .iter()
        .map(|(node, r)| {
            vec![
                node.clone(),
                r.plugin.clone().unwrap_or_else(|| "-".to_string()),
                r.reasons.join(", "),
            ]
        })
        .collect();
    columns(
        &[
            "NODE".into(),
            "PLUGIN".into(),
            "WHY PREEMPTION DOES NOT HELP".into(),
        ],
        &rows,
    )
}

fn mode_flag(r: &PreemptReport) -> &'static str {
    match r.mode {
        VictimRemoval::Delete => "delete",
        VictimRemoval::Evict => "evict",
    }
}

/// `preempt` in table form: the situation, the candidates and their victims, the chosen node and the plan.
pub fn preempt_report(r: &PreemptReport) -> String {
    let p = &r.preemption;
    let mut out = String::new();
    match r.situation {
        Situation::Fits => {
            out.push_str(&format!(
                "{} fits without preemption: kube-scheduler would schedule it on {}. Nothing to preempt.\n",
                p.pod,
                name_list(&r.fits_on, MAX_NAMES)
            ));
            return out;
        }
        Situation::Bound => {
            out.push_str(&format!("{} is {}. Nothing to preempt.\n", p.pod, r.detail));
            return out;
        }
        Situation::Gated => {
            out.push_str(&format!(
                "{} is gated: {}\nkube-scheduler does not try to schedule it, nor preempt for it, until its \
                 scheduling gates are removed.\n",
                p.pod, r.detail
            ));
            return out;
        }
        _ => {}
    }
    out.push_str(&format!(
        "{} cannot be scheduled ({} nodes):\n  {}\n",
        p.pod, p.nodes_total, p.failed_scheduling_message
    ));
    match r.situation {
        Situation::NotEligible => {
            out.push_str(&format!(
                "\nIt may not preempt: {}\n",
                p.message.trim_start_matches("preemption: ")
            ));
            return out;
        }
        Situation::InProgress => {
            out.push_str(&format!(
                "\nA preemption for it is already under way: lower-priority pods preempted for it are still \
                 terminating on its nominated node {}. kube-scheduler binds it once they are gone; nothing to \
                 do.\n",
                r.detail
            ));
            return out;
        }
        _ => {}
    }
    out.push_str(&search_line(p));
    if !p.candidates.is_empty() {
        out.push('\n');
        out.push_str(&candidate_table(p));
        out.push_str(&random::candidates_footnote(p));
    }
    if !p.rejected_nodes.is_empty() {
        out.push_str("\nPotential nodes where preemption does not help:\n");
        out.push_str(&rejected_table(p));
    }
    let Some(node) = &p.node else {
        out.push_str("\nNo node where removing lower-priority pods makes the pod fit.\n");
        return out;
    };
    out.push_str(&format!("\nChosen node: {node} ({}).\n", choice(p)));
    out.push_str(&random::node_note(p));
    if p.pdb_violations > 0 {
        out.push_str(&format!(
            "Preempting there violates {} PodDisruptionBudget(s){}.\n",
            p.pdb_violations,
            match (r.mode, p.evictions_blocked) {
                (VictimRemoval::Evict, 0) => {
                    ", which the Eviction API does not apply to the victims concerned (Pending, finished or \
                     terminating pods): --mode=evict evicts them anyway"
                        .to_string()
                }
                (VictimRemoval::Evict, n) => {
                    format!(": the Eviction API will refuse {n} eviction(s) (--mode=evict stops at the first)")
                }
                (VictimRemoval::Delete, 0) => {
                    " (kube-scheduler deletes anyway; the Eviction API would not apply them either: the victims \
                     concerned are Pending, finished or terminating)"
                        .to_string()
                }
                (VictimRemoval::Delete, _) => {
                    " (kube-scheduler deletes anyway; --mode=evict would be refused)".to_string()
                }
            }
        ));
    }
    out.push('\n');
    out.push_str(&victim_table(&p.victims));
    out.push_str(&random::victims_note(p));
    if r.results.is_some() {
        // After a run, the results list the steps with their outcomes (preempt_results).
        return out;
    }
    out.push_str(&format!(
        "\nPlan (--mode={}, {} step(s)):\n",
        mode_flag(r),
        p.actions.len()
    ));
    let width = p.actions.len().to_string().len();
    for (i, a) in p.actions.iter().enumerate() {
        out.push_str(&format!("  {:>width$}. {}\n", i + 1, a.describe()));
    }
    if r.dry_run == DryRunView::Client {
        out.push_str(
            "\nDry run (client): nothing was changed. Without --dry-run the plan is executed after \
             confirmation (--yes skips it).\n",
        );
    }
    out
}

/// The confirmation question asked on a terminal before executing.
pub fn preempt_question(r: &PreemptReport) -> String {
    let p = &r.preemption;
    let victims = p.victims.iter().filter(|v| !v.terminating).count();
    let node = p.node.as_deref().unwrap_or("-");
    if victims == 0 {
        // Every victim is already terminating: only nominations are left to write.
        return format!(
            "Nominate {} to node {node} (no pod left to remove; {} step(s))?",
            p.pod,
            p.actions.len()
        );
    }
    format!(
        "{} {victims} pod(s) on node {node} for {} ({} step(s))?",
        match r.mode {
            VictimRemoval::Delete => "Delete",
            VictimRemoval::Evict => "Evict",
        },
        p.pod,
        p.actions.len()
    )
}

/// A step of an executed plan: what it does, and why it failed or was blocked; with the report, a
/// refused eviction names the budgets covering the pod.
fn step_text(result: &ActionResult, report: Option<&PreemptReport>) -> String {
    match (&result.outcome, &result.action, report) {
        // The error already says what was attempted.
        (ApplyOutcome::Failed(_), ..) => result.message(),
        (ApplyOutcome::PdbBlocked { message }, Action::EvictPod { pod }, Some(r)) => format!(
            "{}: blocked by {} (HTTP 429): {message}",
            result.action.describe(),
            blocking_budgets(r, &pod.key())
        ),
        (ApplyOutcome::PdbBlocked { message }, ..) => format!(
            "{}: blocked by a PodDisruptionBudget (HTTP 429): {message}",
            result.action.describe()
        ),
        _ => result.action.describe(),
    }
}

/// One progress line for stderr while a plan runs.
pub fn preempt_progress(index: usize, total: usize, result: &ActionResult) -> String {
    let width = total.to_string().len();
    format!(
        "[{:>width$}/{total}] {:<12} {}",
        index + 1,
        result.outcome.name(),
        step_text(result, None)
    )
}

/// After execution: each step's outcome, then what was done and what was not.
pub fn preempt_results(r: &PreemptReport) -> String {
    let Some(results) = &r.results else {
        return String::new();
    };
    let p = &r.preemption;
    let mut out = String::from("\n");
    out.push_str(&match r.dry_run {
        DryRunView::Server => format!(
            "Plan (--mode={}, {} step(s)) sent with --dry-run=server: every write was validated by the API \
             server, nothing changed:\n",
            mode_flag(r),
            p.actions.len()
        ),
        _ => "Results:\n".to_string(),
    });
    let rows: Vec<Vec<String>> = results
        .iter()
        .enumerate()
        .map(|(i, res)| {
            vec![
                (i + 1).to_string(),
                res.outcome.name().to_string(),
                step_text(res, Some(r)),
            ]
        })
        .collect();
    out.push_str(&columns(
        &["STEP".into(), "OUTCOME".into(), "ACTION".into()],
        &rows,
    ));
    let removed: Vec<String> = results
        .iter()
        .filter(|res| {
            matches!(res.action, Action::DeletePod { .. } | Action::EvictPod { .. })
                && res.outcome.is_success()
        })
        .filter_map(|res| match &res.action {
            Action::DeletePod { pod } | Action::EvictPod { pod } => Some(pod.key()),
            _ => None,
        })
        .collect();
    let remaining: Vec<String> = results
        .iter()
        .filter(|res| !res.outcome.is_success())
        .filter_map(|res| match &res.action {
            Action::DeletePod { pod } | Action::EvictPod { pod } => Some(pod.key()),
            _ => None,
        })
        .collect();
    let node = p.node.as_deref().unwrap_or("-");
    let verb = match r.mode {
        VictimRemoval::Delete => "deleted",
        VictimRemoval::Evict => "evicted",
    };
    out.push('\n');
    match (r.complete, r.dry_run) {
        (Some(true), DryRunView::Server) => out.push_str(&format!(
            "The API server accepts the whole plan: {} victim(s) on {node} could be {verb}. Nothing was changed.\n",
            removed.len()
        )),
        (Some(true), _) => out.push_str(&format!(
            "Done: {} victim(s) {verb} on {node}{}; {} is nominated to {node}. kube-scheduler binds it there \
             once the victims are gone.\n",
            removed.len(),
            if removed.is_empty() {
                String::new()
            } else {
                format!(" ({})", name_list(&removed, MAX_NAMES))
            },
            p.pod
        )),
        _ => {
            out.push_str(&format!(
                "Not finished. {} so far: {}. Still to remove: {}. {} is {}nominated to {node}.\n",
                match r.mode {
                    VictimRemoval::Delete => "Deleted",
                    VictimRemoval::Evict => "Evicted",
                },
                if removed.is_empty() {
                    "none".to_string()
                } else {
                    name_list(&removed, MAX_NAMES)
                },
                if remaining.is_empty() {
                    "none".to_string()
                } else {
                    name_list(&remaining, MAX_NAMES)
                },
                p.pod,
                if results.iter().any(|res| {
                    matches!(&res.action, Action::SetNominatedNodeName { pod, node: n }
                        if !n.is_empty() && pod.key() == p.pod)
                        && res.outcome.is_success()
                }) {
                    ""
                } else {
                    "not yet "
                }
            ));
            let refused = results.iter().find_map(|res| match (&res.outcome, &res.action) {
                (ApplyOutcome::PdbBlocked { .. }, Action::EvictPod { pod }) => Some(pod.key()),
                _ => None,
            });
            match refused {
                // Running again would only be refused again.
                Some(pod) => {
                    let budgets = blocking_budgets(r, &pod);
                    out.push_str(&format!(
                        "The Eviction API refused to evict {pod}: {budgets} allows no more disruption. {}.\n",
                        capitalized(&advice_after_refused_eviction(&budgets))
                    ));
                }
                None if r.dry_run == DryRunView::None => out.push_str(
                    "Running the same command again re-reads the cluster and finishes the job (victims already \
                     gone or terminating count as done).\n",
                ),
                None => {}
            }
        }
    }
    out
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_pad_all_but_the_last() {
        let got = columns(
            &["A".into(), "BB".into(), "C".into()],
            &[
                vec!["xxx".into(), "y".into(), "z".into()],
                vec!["x".into(), String::new(), String::new()],
            ],
        );
        assert_eq!(got, "A     BB   C\nxxx   y    z\nx\n");
    }
}
