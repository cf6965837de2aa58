//! `explain`'s table for people: the headline, the per-node table (kubectl's column style), the
//! claims and devices, why each node is rejected (the findings), the hints, `--node`'s plugin-by-plugin
//! detail with its findings and `--all-pending`'s lines.

use sched_core::Code;
use sched_core::diagnosis::{Change, Diagnosis, Finding, SCHEDULING_GATED_MESSAGE, Wants};
use sched_core::explain::{Explanation, NodeExplanation, Outcome};
use sched_core::node_pools::CatalogueSource;
use sched_core::resource::format_amount;

use crate::commands::explain::node_pools::{NewNodeView, NodePoolsSection};
use crate::commands::explain::{BoundCheck, ExplainReport, NodeDetail, PendingEntry, Reach};
use crate::diagnosis::headline::{claims_not_created_headline, gated_headline, headline, placement};
use crate::diagnosis::hints::{Hint, MAX_NAMES, name_list};
use crate::diagnosis::node_resources::ResourceUse;
use crate::output::table::{columns, plural};
use crate::source::what_if::Applied;

fn score_text(score: Option<i64>) -> String {
    score.map_or_else(|| "-".to_string(), |s| s.to_string())
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

/// One line per hint; a toleration's YAML is in `-o json` and `-o markdown`, a PersistentVolume's
/// is printed under its hint (the words alone do not let a user make it).
fn hint_lines(hints: &[Hint]) -> String {
    let mut out = String::from("Hints:\n");
    for h in hints {
        out.push_str(&format!("  - {}\n", h.message));
        if let (Some(snippet), Some(Change::CreatePersistentVolume { .. })) = (&h.snippet, &h.change) {
            for line in snippet.lines() {
                out.push_str(&format!("      {line}\n"));
            }
        }
    }
    out
}

/// Findings listed at most; `-o json` has them all.
const MAX_FINDING_LINES: usize = 10;

/// One finding on one line: its nodes, plugin, the object at fault and the reason code.
fn finding_line(f: &Finding, with_nodes: bool) -> String {
    let also = if f.reported {
        ""
    } else {
        " (not the first filter to reject)"
    };
    if with_nodes {
        format!(
            "  - {}: {}: {} [{}]{also}\n",
            name_list(&f.nodes, MAX_NAMES),
            f.plugin,
            f.message,
            f.reason
        )
    } else {
        format!("  - {}: {} [{}]{also}\n", f.plugin, f.message, f.reason)
    }
}

/// Why the nodes are rejected: every rejecting filter of every node (kube-scheduler names only the
/// first), grouped by explanation.
pub(super) fn findings_section(findings: &[Finding]) -> String {
    let mut out = String::from("Why:\n");
    for f in findings.iter().take(MAX_FINDING_LINES) {
        out.push_str(&finding_line(f, true));
    }
    if findings.len() > MAX_FINDING_LINES {
        out.push_str(&format!(
            "  - and {} more (-o json has every finding)\n",
            findings.len() - MAX_FINDING_LINES
        ));
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
        Outcome::Gated => format!("is gated: {}", gated_headline(&e.message)),
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
    let context = format!(
        "profile {}, {} nodes, {}",
        e.profile,
        e.nodes_total,
        crate::output::semantics(r.kube_version)
    );
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
            // Scheduling gates: the words of the pod's own PodScheduled condition (what `kubectl
            // describe pod` shows), then the gates. ResourceClaims still to be made from templates:
            // which ones and who makes them, then kube-scheduler's own words.
            let once = if r.scheduling_gates.is_empty() && r.claims_not_created.is_empty() {
                // Held by another PreEnqueue plugin (GangScheduling's quorum): its words, and no
                // condition on the pod, which kube-scheduler writes only once it tries the pod.
                out.push_str(&format!(
                    "{} is held before the scheduling queue ({context}):\n  {}\n  kube-scheduler has not \
                     tried it and writes no condition on it until then.\n",
                    e.pod, e.message
                ));
                None
            } else if r.scheduling_gates.is_empty() && !r.claims_not_created.is_empty() {
                out.push_str(&format!(
                    "{} waits for its ResourceClaims ({context}):\n  {}\n  kube-scheduler: {}\n",
                    e.pod,
                    claims_not_created_headline(
                        e.pod.split_once('/').map(|(ns, _)| ns),
                        &r.claims_not_created
                    ),
                    e.message
                ));
                Some("Once its claims exist")
            } else {
                out.push_str(&format!(
                    "{} is gated ({context}):\n  {SCHEDULING_GATED_MESSAGE}: {}\n",
                    e.pod,
                    r.scheduling_gates.join(", ")
                ));
                Some("Once ungated")
            };
            if let (Some(once), Some(u)) = (once, &r.once_ungated) {
                match u.outcome {
                    Outcome::Unschedulable => {
                        out.push_str(&format!("{once}, it could not be scheduled:\n  {}\n", u.message))
                    }
                    _ => out.push_str(&format!("{once}, it {}.\n", outcome_clause(u))),
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
    if let Some(g) = &r.pod_group {
        out.push('\n');
        out.push_str(&super::pod_group::section(g, e.nodes_total));
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
    if r.node_detail.is_none() && !r.findings.is_empty() {
        out.push('\n');
        out.push_str(&findings_section(&r.findings));
    }
    if let Some(pools) = &r.node_pools {
        out.push('\n');
        out.push_str(&node_pools_section(pools));
    }
    if !r.hints.is_empty() {
        out.push('\n');
        out.push_str(&hint_lines(&r.hints));
    }
    out
}

/// "Would a new node help?": one line per pool, naming it, then Karpenter's own answer.
fn node_pools_section(s: &NodePoolsSection) -> String {
    let types = match s.catalogue {
        CatalogueSource::File => format!("{} from --instance-types", instance_types(s.instance_types)),
        CatalogueSource::Nodes => format!(
            "{} the pools' nodes show; --instance-types FILE gives the whole catalogue",
            instance_types(s.instance_types)
        ),
    };
    let mut out =
        format!("Would a new node help? (Karpenter NodePools in the order it tries them; {types}):\n");
    for w in &s.warnings {
        out.push_str(&format!("  warning: {w}\n"));
    }
    for p in &s.pools {
        match (&p.new_node, &p.reason) {
            (Some(n), _) => out.push_str(&format!("  {}: yes, a new node ({})\n", p.pool, type_list(n))),
            (None, reason) => out.push_str(&format!(
                "  {}: no, {}\n",
                p.pool,
                reason.as_deref().unwrap_or_default()
            )),
        }
    }
    match (&s.launch, &s.karpenter_event) {
        (Some(n), _) => out.push_str(&format!(
            "Karpenter would launch a node of NodePool {} ({}, the cheapest of {} that fit).\n",
            n.pool,
            n.instance_types.first().map(String::as_str).unwrap_or("?"),
            instance_types(n.instance_types.len())
        )),
        (None, Some(event)) => out.push_str(&format!("Karpenter's event on the pod: {event}\n")),
        (None, None) => {}
    }
    out
}

/// "1 instance type", "3 instance types".
fn instance_types(n: usize) -> String {
    plural(n, "instance type", "instance types")
}

/// The instance types a new node could be, cheapest first: three, then how many more.
fn type_list(n: &NewNodeView) -> String {
    const SHOWN: usize = 3;
    let mut text = n
        .instance_types
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if n.instance_types.len() > SHOWN {
        text.push_str(&format!(" and {} more", n.instance_types.len() - SHOWN));
    }
    text
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
    if !d.findings.is_empty() {
        out.push_str("\nWhy:\n");
        for f in &d.findings {
            out.push_str(&finding_line(f, false));
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
