//! Rendering: `table` for people, `markdown` for tickets, `json` and `yaml` for programs. Renderers
//! only format what the commands computed.

pub mod json;
pub mod markdown;
pub mod random;
pub mod simulate;
pub mod table;
pub mod triage;
pub mod yaml;

use sched_core::plugins::scheduling_gates::{ERR_REASON_WAITING_FOR_GATES, SCHEDULING_GATED_MESSAGE};

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
}
