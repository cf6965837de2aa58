//! Human output: the headline, the per-node table (kubectl's column style), hints, and `--node`'s
//! plugin-by-plugin detail.

use sched_core::Code;
use sched_core::explain::{Explanation, NodeExplanation, Outcome};

use crate::commands::explain::{BoundCheck, ExplainReport, NodeDetail, PendingEntry, Reach};
use crate::commands::hints::{Hint, MAX_NAMES, name_list};

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
        Outcome::Unschedulable | Outcome::Gated => e.message.clone(),
        Outcome::Scheduled => format!("would be scheduled on {}", placement(e)),
        Outcome::Error => format!("the scheduling cycle fails: {}", e.message),
    }
}

fn verdict(e: &Explanation, n: &NodeExplanation) -> String {
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
        Outcome::Gated => format!("is gated: {}", e.message),
        Outcome::Error => format!("fails with an error: {}", e.message),
    }
}

/// `explain POD` in table form.
pub fn report(r: &ExplainReport, wide: bool) -> String {
    let e = &r.explanation;
    let context = format!("profile {}, {} nodes", e.profile, e.nodes_total);
    let mut out = String::new();
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
            out.push_str(&format!("{} is gated ({context}):\n  {}\n", e.pod, e.message));
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
    let basis = r.once_ungated.as_ref().unwrap_or(e);
    out.push('\n');
    match &r.node_detail {
        Some(d) => out.push_str(&node_detail(d)),
        None => out.push_str(&node_table(basis, &r.score_plugins, wide)),
    }
    if !r.hints.is_empty() {
        out.push('\n');
        out.push_str(&hint_lines(&r.hints));
    }
    out
}

/// `--node`: the node's verdict, each filter, each score.
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
