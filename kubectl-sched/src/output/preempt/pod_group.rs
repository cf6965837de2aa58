//! `preempt podgroup/NAME`'s output: the group's verdict, its preemption (victims node by node,
//! nominations) and the plan; after a run, each step's outcome.

use sched_core::action::Action;
use sched_core::engine::VictimRemoval;

use super::progress;
use crate::cli::PreemptFormat;
use crate::commands::preempt::DryRunView;
use crate::commands::preempt::pod_group::{GroupPreemptReport, GroupSituation};
use crate::output::data::{RenderError, json, yaml};
use crate::output::explain::pod_group::preemption_text;

/// The report in the requested format; the table is the plan, plus the results after a run.
pub fn render(r: &GroupPreemptReport, format: PreemptFormat) -> Result<String, RenderError> {
    Ok(match format {
        PreemptFormat::Table => report(r) + &results(r),
        PreemptFormat::Json => json(r)?,
        PreemptFormat::Yaml => yaml(r)?,
    })
}

/// What the drill concludes, in one line.
fn conclusion(r: &GroupPreemptReport) -> &'static str {
    match r.situation {
        GroupSituation::Planned => "preempting the victims below places the group",
        GroupSituation::NotEligible => "the group may not preempt",
        GroupSituation::NoVictims => "no running pod has a lower priority than the group",
        GroupSituation::DoesNotHelp => "even without every lower-priority pod the group does not fit",
        GroupSituation::InProgress => "an earlier preemption for the group is still under way",
        GroupSituation::Fits => "the group needs no preemption",
        GroupSituation::NotTried => "kube-scheduler does not try the group now: nothing is preempted for it",
    }
}

/// The drill and the plan.
pub fn report(r: &GroupPreemptReport) -> String {
    let mut out = format!(
        "PodGroup {} ({}): {}\n  {}\n",
        r.pod_group,
        crate::output::semantics(r.kube_version),
        r.summary,
        conclusion(r)
    );
    if !r.message.is_empty() {
        out.push_str(&format!("  kube-scheduler: {}\n", r.message));
    }
    out.push_str(&preemption_text(r.preemption.as_ref()));
    if !r.actions.is_empty() {
        let when = match r.dry_run {
            DryRunView::Client => "not executed: --dry-run=client",
            DryRunView::Server => "sent with --dry-run=server",
            DryRunView::None => "to execute",
        };
        out.push_str(&format!(
            "\nPlan (--mode={}, {} step(s), {when}):\n",
            mode_flag(r.mode),
            r.actions.len()
        ));
        for (i, a) in r.actions.iter().enumerate() {
            out.push_str(&format!("  {}. {}\n", i + 1, a.describe()));
        }
    }
    out
}

fn mode_flag(mode: VictimRemoval) -> &'static str {
    match mode {
        VictimRemoval::Delete => "delete",
        VictimRemoval::Evict => "evict",
    }
}

/// The confirmation question asked on a terminal before executing.
pub fn question(r: &GroupPreemptReport) -> String {
    let victims = r
        .actions
        .iter()
        .filter(|a| matches!(a, Action::DeletePod { .. } | Action::EvictPod { .. }))
        .count();
    format!(
        "{} {victims} pod(s) for PodGroup {} ({} step(s))?",
        match r.mode {
            VictimRemoval::Delete => "Delete",
            VictimRemoval::Evict => "Evict",
        },
        r.pod_group,
        r.actions.len()
    )
}

/// After execution: each step's outcome, then how many were done.
pub fn results(r: &GroupPreemptReport) -> String {
    let Some(results) = &r.results else {
        return String::new();
    };
    let mut out = String::from("\nResults:\n");
    for (i, res) in results.iter().enumerate() {
        out.push_str(&progress(i, results.len(), res));
        out.push('\n');
    }
    out.push_str(&summary(r));
    out
}

/// After execution: how many steps were done.
pub fn summary(r: &GroupPreemptReport) -> String {
    let Some(results) = &r.results else {
        return String::new();
    };
    let done = results.iter().filter(|res| res.outcome.is_success()).count();
    format!(
        "{done} of {} step(s) done for PodGroup {}{}\n",
        results.len(),
        r.pod_group,
        if r.complete == Some(true) {
            ": its pods are nominated; kube-scheduler places the group once the victims are gone"
        } else {
            ""
        }
    )
}
