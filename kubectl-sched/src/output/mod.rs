//! Rendering, one module per command ([`explain`], [`preempt`], [`triage`], [`simulate`]), each
//! choosing among its formats: tables for people, markdown for tickets, JSON and YAML for programs
//! ([`data`]), and kubectl's `name` and `jsonpath` printers over the JSON ([`printer`]); [`table`] holds
//! what the tables share. Renderers only format what the commands computed.

pub mod data;
pub mod explain;
pub mod preempt;
pub mod printer;
pub mod simulate;
pub mod table;
pub mod triage;

/// The words every header uses to say which release decided: `kube-scheduler v1.34.4 semantics`.
pub fn semantics(version: sched_core::features::KubeVersion) -> String {
    format!("kube-scheduler {version} semantics")
}

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
