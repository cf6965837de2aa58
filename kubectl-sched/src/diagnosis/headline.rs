//! The one-line verdict the commands and the renderers share: kube-scheduler's FailedScheduling
//! message for an unschedulable pod, where a schedulable one would go, a gated pod's gates in the
//! words of its PodScheduled condition, and, for a pod kube-scheduler does not try because its
//! ResourceClaims are still to be made from templates, which claims and who makes them.

use sched_core::diagnosis::{ERR_REASON_WAITING_FOR_GATES, SCHEDULING_GATED_MESSAGE};
use sched_core::dra::templates::ClaimNotCreated;
use sched_core::explain::{Explanation, Outcome};

use crate::diagnosis::hints::{MAX_NAMES, name_list};

/// Where the pod would go: `worker-b with score 187`, its nominated node, or the tied nodes.
pub fn placement(e: &Explanation) -> String {
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
        Outcome::Gated => gated_headline(&e.message),
        Outcome::Scheduled => format!("would be scheduled on {}", placement(e)),
        Outcome::Error => format!("the scheduling cycle fails: {}", e.message),
    }
}

/// A gated pod's headline for people: the words its PodScheduled condition shows (`kubectl describe
/// pod`), then its gates, from the SchedulingGates reason (`waiting for scheduling gates: [g1 g2]`,
/// which `-o json` keeps as the engine's `message`). Another PreEnqueue plugin's reason is kept as is.
pub fn gated_headline(message: &str) -> String {
    let gates = message
        .strip_prefix(ERR_REASON_WAITING_FOR_GATES)
        .and_then(|rest| rest.strip_prefix(": ["))
        .and_then(|rest| rest.strip_suffix(']'));
    match gates {
        // Gate names are qualified names: no spaces, so Go's `[]string` print splits on them.
        Some(gates) => format!(
            "{SCHEDULING_GATED_MESSAGE}: {}",
            gates.split(' ').collect::<Vec<_>>().join(", ")
        ),
        None => message.to_string(),
    }
}

/// One claim kube-scheduler waits for, named as kube-controller-manager's resourceclaim controller
/// will name it in `namespace` (its `generateName` and 5 random characters, shown as `…`):
/// `ResourceClaim ml/notebook-gpu-… (claim gpu) is not created yet: the resourceclaim controller
/// makes it from template notebook-gpu`. Without a namespace the pod's name is left out (triage's
/// cause, shared by the replicas of a workload).
pub fn claim_not_created(namespace: Option<&str>, c: &ClaimNotCreated) -> String {
    let claim = match namespace {
        Some(ns) => format!("ResourceClaim {ns}/{}… (claim {})", c.generate_name, c.pod_claim),
        None => format!("ResourceClaim (claim {})", c.pod_claim),
    };
    let template = c.template.split_once('/').map_or(c.template.as_str(), |(_, t)| t);
    if c.template_exists {
        format!("{claim} is not created yet: the resourceclaim controller makes it from template {template}")
    } else {
        format!(
            "{claim} is not created yet, and its template {template} does not exist: the resourceclaim \
             controller cannot make it until the ResourceClaimTemplate is created"
        )
    }
}

/// The headline of a pod whose ResourceClaims are still to be made: each missing claim (see
/// [`claim_not_created`]).
pub fn claims_not_created_headline(namespace: Option<&str>, missing: &[ClaimNotCreated]) -> String {
    let each: Vec<String> = missing.iter().map(|c| claim_not_created(namespace, c)).collect();
    each.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gated_headlines_lead_with_the_pod_condition_and_list_the_gates() {
        let cases = [
            (
                "waiting for scheduling gates: [example.com/a]",
                "Scheduling is blocked due to non-empty scheduling gates: example.com/a",
            ),
            (
                "waiting for scheduling gates: [g1 g2]",
                "Scheduling is blocked due to non-empty scheduling gates: g1, g2",
            ),
            ("some other PreEnqueue reason", "some other PreEnqueue reason"),
        ];
        for (message, want) in cases {
            assert_eq!(gated_headline(message), want, "{message}");
        }
    }

    #[test]
    fn a_claim_not_created_names_the_claim_its_template_and_who_makes_it() {
        let claim = |template: &str, exists| ClaimNotCreated {
            pod_claim: "gpu".into(),
            template: template.into(),
            template_exists: exists,
            generate_name: "notebook-gpu-".into(),
        };
        assert_eq!(
            claims_not_created_headline(Some("ml"), &[claim("ml/notebook-gpu", true)]),
            "ResourceClaim ml/notebook-gpu-… (claim gpu) is not created yet: the resourceclaim controller \
             makes it from template notebook-gpu"
        );
        assert_eq!(
            claims_not_created_headline(Some("ml"), &[claim("ml/gone", false)]),
            "ResourceClaim ml/notebook-gpu-… (claim gpu) is not created yet, and its template gone does not \
             exist: the resourceclaim controller cannot make it until the ResourceClaimTemplate is created"
        );
        // triage's cause: the same for every replica.
        assert_eq!(
            claims_not_created_headline(None, &[claim("ml/notebook-gpu", true)]),
            "ResourceClaim (claim gpu) is not created yet: the resourceclaim controller makes it from \
             template notebook-gpu"
        );
    }
}
