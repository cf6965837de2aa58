//! `preempt`'s output: the table for people (the situation, the candidates and their victims, the
//! chosen node and the plan; after a run, each step's outcome), the confirmation question, the progress
//! lines, and the choice of format.

pub mod pod_group;
pub mod random;

use sched_core::action::Action;
use sched_core::apply::{ActionResult, Outcome as ApplyOutcome};
use sched_core::engine::{PreemptionResult, VictimRemoval, VictimView};

use crate::cli::PreemptFormat;
use crate::commands::preempt::{
    DryRunView, PreemptReport, Situation, advice_after_refused_eviction, blocking_budgets,
};
use crate::diagnosis::hints::{MAX_NAMES, name_list};
use crate::output::data::{RenderError, json, yaml};
use crate::output::table::columns;

/// `preempt`'s report in the requested format; the table is the plan, plus the results after a run.
pub fn render(r: &PreemptReport, format: PreemptFormat) -> Result<String, RenderError> {
    Ok(match format {
        PreemptFormat::Table => report(r) + &results(r),
        PreemptFormat::Json => json(r)?,
        PreemptFormat::Yaml => yaml(r)?,
    })
}

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
pub fn report(r: &PreemptReport) -> String {
    report_with(r, true)
}

/// [`report`] without the plan: for a run with `--yes`, whose steps are printed once, as they run.
pub fn drill(r: &PreemptReport) -> String {
    report_with(r, false)
}

fn report_with(r: &PreemptReport, with_plan: bool) -> String {
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
        "{} cannot be scheduled ({} nodes, {}):\n  {}\n",
        p.pod,
        p.nodes_total,
        crate::output::semantics(r.kube_version),
        p.failed_scheduling_message
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
    // After a run, the results list the steps with their outcomes ([`results`]); before a run with
    // --yes, each step is printed as it runs instead.
    if with_plan && r.results.is_none() {
        out.push_str(&plan(r));
    }
    out
}

/// The steps about to be executed and, for a client dry run, that nothing was changed.
fn plan(r: &PreemptReport) -> String {
    let p = &r.preemption;
    let mut out = String::new();
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
pub fn question(r: &PreemptReport) -> String {
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

/// One step's line as the plan runs: its number, its outcome and what it did (under
/// [`PROGRESS_HEADING`] on stdout with the table output, on stderr beside JSON or YAML).
pub fn progress(index: usize, total: usize, result: &ActionResult) -> String {
    let width = total.to_string().len();
    format!(
        "[{:>width$}/{total}] {:<12} {}",
        index + 1,
        result.outcome.name(),
        step_text(result, None)
    )
}

/// After execution: each step's outcome in a table, then what was done and what was not ([`summary`]).
pub fn results(r: &PreemptReport) -> String {
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
    out.push_str(&summary(r));
    out
}

/// The heading of the step lines [`progress`] prints while a plan runs.
pub const PROGRESS_HEADING: &str = "\nResults:\n";

/// After execution: what was done and what was not (the steps themselves are in [`results`]' table, or
/// were printed by [`progress`] as they ran).
pub fn summary(r: &PreemptReport) -> String {
    let Some(results) = &r.results else {
        return String::new();
    };
    let p = &r.preemption;
    let mut out = String::new();
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
                None => match results.iter().find_map(crate::source::rbac::denied_write) {
                    // Nor would a missing permission be granted by running again.
                    Some(denied) => out.push_str(&format!("{}.\n", capitalized(&denied.advice()))),
                    None if r.dry_run == DryRunView::None => out.push_str(
                        "Running the same command again re-reads the cluster and finishes the job (victims \
                         already gone or terminating count as done).\n",
                    ),
                    None => {}
                },
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
