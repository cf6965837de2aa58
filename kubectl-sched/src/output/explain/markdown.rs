//! `-o markdown`: the explanation as a block to paste into a ticket or a chat: the pod and its
//! outcome, the FailedScheduling message in a code block, a table of the nodes (the first
//! [`MAX_NODE_ROWS`], then a count) and the hints as a list.

use sched_core::explain::{Explanation, Outcome};

use super::table::verdict;
use crate::commands::explain::{ExplainReport, PendingEntry};
use crate::diagnosis::headline::headline;
use crate::diagnosis::hints::Hint;
use crate::source::what_if::Applied;

/// Tickets are read, not scrolled: the nodes past this many are only counted (`-o json` has them all).
pub const MAX_NODE_ROWS: usize = 20;

/// A table cell: one line, and a `|` that does not end the cell.
fn cell(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.is_empty() {
        "-".to_string()
    } else {
        flat.replace('|', "\\|")
    }
}

/// A fenced code block whose fence no line of `text` can close.
fn code_block(text: &str, lang: &str, indent: &str) -> String {
    let mut fence = "```".to_string();
    while text.contains(&fence) {
        fence.push('`');
    }
    let mut out = format!("{indent}{fence}{lang}\n");
    for line in text.lines() {
        out.push_str(indent);
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(&format!("{indent}{fence}\n"));
    out
}

fn what_if_lines(applied: &[Applied]) -> String {
    if applied.is_empty() {
        return String::new();
    }
    let mut out = String::from("What if (changed in memory before the evaluation):\n\n");
    for a in applied {
        out.push_str(&format!("- `{} {}`: {}\n", a.flag, a.value, cell(&a.effect)));
    }
    out.push('\n');
    out
}

/// The nodes, best first, at most [`MAX_NODE_ROWS`] of them.
fn node_rows(e: &Explanation) -> String {
    let mut out = String::from("| Node | Verdict | Reason | Score |\n|---|---|---|---|\n");
    for n in e.nodes.iter().take(MAX_NODE_ROWS) {
        let reason = match (&n.plugin, n.reasons.is_empty()) {
            (Some(plugin), false) => format!("{plugin}: {}", n.reasons.join(", ")),
            (Some(plugin), true) => plugin.clone(),
            (None, _) => n.reasons.join(", "),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            cell(&n.name),
            verdict(e, n),
            cell(&reason),
            n.score.map_or_else(|| "-".to_string(), |s| s.to_string())
        ));
    }
    if e.nodes.len() > MAX_NODE_ROWS {
        out.push_str(&format!(
            "\n_First {MAX_NODE_ROWS} of {} nodes; `kubectl sched explain -o json` lists every node._\n",
            e.nodes.len()
        ));
    }
    out
}

fn hint_list(hints: &[Hint]) -> String {
    let mut out = String::from("**Hints**\n\n");
    for h in hints {
        match &h.snippet {
            Some(snippet) => {
                out.push_str(&format!("- {}:\n\n", cell(&h.message)));
                out.push_str(&code_block(snippet, "yaml", "  "));
            }
            None => out.push_str(&format!("- {}\n", cell(&h.message))),
        }
    }
    out
}

/// `explain POD -o markdown`.
pub fn report(r: &ExplainReport) -> String {
    let e = &r.explanation;
    let pod = &e.pod;
    let title = match e.outcome {
        Outcome::Scheduled => format!("`{pod}` {}", headline(e)),
        Outcome::Unschedulable => format!("`{pod}` cannot be scheduled"),
        // DynamicResources' PreEnqueue, not a gate: the same words as the table's headline.
        Outcome::Gated if r.scheduling_gates.is_empty() && !r.claims_not_created.is_empty() => {
            format!("`{pod}` waits for its ResourceClaims")
        }
        // Another PreEnqueue plugin (GangScheduling's quorum), as the table's headline says.
        Outcome::Gated if r.scheduling_gates.is_empty() && r.claims_not_created.is_empty() => {
            format!("`{pod}` is held before the scheduling queue")
        }
        Outcome::Gated => format!("`{pod}` is gated"),
        Outcome::Error => format!("`{pod}`: the scheduling cycle fails"),
    };
    let mut out = format!(
        "### {title}\n\nProfile `{}`, {} nodes, {}.\n\n",
        e.profile,
        e.nodes_total,
        crate::output::semantics(r.kube_version)
    );
    if let Some(b) = &r.bound {
        out.push_str(&format!("Bound to `{}`; evaluated as if pending.\n\n", b.node));
    }
    out.push_str(&what_if_lines(&r.what_if));
    if !e.message.is_empty() {
        let message = match e.outcome {
            Outcome::Gated if r.scheduling_gates.is_empty() && !r.claims_not_created.is_empty() => {
                format!(
                    "{}\nkube-scheduler: {}",
                    crate::diagnosis::headline::claims_not_created_headline(
                        e.pod.split_once('/').map(|(ns, _)| ns),
                        &r.claims_not_created
                    ),
                    e.message
                )
            }
            Outcome::Gated => crate::diagnosis::headline::gated_headline(&e.message),
            _ => e.message.clone(),
        };
        out.push_str(&code_block(&message, "", ""));
        out.push('\n');
    }
    let held = r.scheduling_gates.is_empty() && r.claims_not_created.is_empty();
    let basis = match &r.once_ungated {
        // Held before the queue: nothing to ungate; the nodes are evaluated past PreEnqueue.
        Some(u) if held => u,
        Some(u) => {
            out.push_str(&format!("Once ungated, it {}:\n\n", ungated_clause(u)));
            if !u.message.is_empty() {
                out.push_str(&code_block(&u.message, "", ""));
                out.push('\n');
            }
            u
        }
        None => e,
    };
    if let Some(findings) = r.still_pending.as_ref().filter(|f| !f.is_empty()) {
        out.push_str("**Why it is still Pending**\n\n");
        for f in findings {
            out.push_str(&format!("- {}\n", cell(&f.message)));
        }
        out.push('\n');
    }
    out.push_str(&node_rows(basis));
    if !r.hints.is_empty() {
        out.push('\n');
        out.push_str(&hint_list(&r.hints));
    }
    out
}

fn ungated_clause(u: &Explanation) -> String {
    match u.outcome {
        Outcome::Unschedulable => "could not be scheduled".to_string(),
        _ => headline(u),
    }
}

/// `explain --all-pending -o markdown`: one row per pod.
pub fn pending(entries: &[PendingEntry], applied: &[Applied]) -> String {
    let mut out = what_if_lines(applied);
    out.push_str("| Pod | Answer |\n|---|---|\n");
    for entry in entries {
        let (pod, text) = match entry {
            PendingEntry::Evaluated(e) => (e.pod.clone(), headline(e)),
            PendingEntry::NotHandled { pod, scheduler_name } => (
                pod.clone(),
                format!("schedulerName {scheduler_name:?} has no profile here: another scheduler's pod"),
            ),
        };
        out.push_str(&format!("| `{}` | {} |\n", cell(&pod), cell(&text)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_stay_on_one_line_and_in_their_column() {
        for (text, want) in [
            ("a | b", "a \\| b"),
            ("two\nlines", "two lines"),
            ("", "-"),
            ("  spaced  out ", "spaced out"),
        ] {
            assert_eq!(cell(text), want, "{text:?}");
        }
    }

    #[test]
    fn code_blocks_are_not_closed_by_their_content() {
        assert_eq!(code_block("x", "", ""), "```\nx\n```\n");
        assert_eq!(code_block("a ``` b", "", ""), "````\na ``` b\n````\n");
        assert_eq!(code_block("k: v", "yaml", "  "), "  ```yaml\n  k: v\n  ```\n");
    }
}
