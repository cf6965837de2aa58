//! Rendering, one module per command ([`explain`], [`preempt`], [`triage`], [`simulate`]), each
//! choosing among its formats: tables for people, markdown for tickets, JSON and YAML for programs
//! ([`data`]); [`table`] holds what the tables share. Renderers only format what the commands computed.

pub mod data;
pub mod explain;
pub mod preempt;
pub mod simulate;
pub mod table;
pub mod triage;

use sched_core::plugins::scheduling_gates::{ERR_REASON_WAITING_FOR_GATES, SCHEDULING_GATED_MESSAGE};

/// What a renderer made of a command's result.
#[derive(Debug, Default)]
pub struct Rendered {
    /// For stdout.
    pub stdout: Vec<u8>,
    /// For stderr instead of an empty table, as kubectl's `No resources found in NAMESPACE namespace.`
    pub nothing_found: Option<String>,
}

impl From<String> for Rendered {
    fn from(text: String) -> Self {
        Rendered {
            stdout: text.into_bytes(),
            nothing_found: None,
        }
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
