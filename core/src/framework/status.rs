//! `Code` and `Status`: the result of every plugin call, as kube-scheduler's framework defines them.
//!
//! A rejection is a `Status` (never an `Error`): it carries the reason strings users see in
//! FailedScheduling messages, and the name of the plugin that rejected.

use serde::Serialize;

/// What a plugin call concluded. Mirrors `framework.Code`, including its numeric order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Default)]
pub enum Code {
    /// The plugin ran and the pod may proceed.
    #[default]
    Success,
    /// An internal error: the cycle aborts and the pod goes to backoff.
    Error,
    /// The pod does not fit now; preemption may help.
    Unschedulable,
    /// The pod does not fit and preemption cannot help on this node.
    UnschedulableAndUnresolvable,
    /// A Permit plugin wants the pod to wait.
    Wait,
    /// The plugin does not apply to this pod: its coupled points are skipped this cycle.
    Skip,
    /// The pod waits for something outside the scheduler; it goes back to activeQ directly.
    Pending,
}

impl Code {
    /// Go's `Code.String()`: the spelling kube-scheduler logs and `explain -o json` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Success => "Success",
            Code::Error => "Error",
            Code::Unschedulable => "Unschedulable",
            Code::UnschedulableAndUnresolvable => "UnschedulableAndUnresolvable",
            Code::Wait => "Wait",
            Code::Skip => "Skip",
            Code::Pending => "Pending",
        }
    }

    /// `IsRejected`: Unschedulable, UnschedulableAndUnresolvable or Pending.
    pub fn is_rejected(self) -> bool {
        matches!(
            self,
            Code::Unschedulable | Code::UnschedulableAndUnresolvable | Code::Pending
        )
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The result of running a plugin: a code, reasons, and the plugin that produced it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Status {
    code: Code,
    reasons: Vec<String>,
    /// The plugin that set this status ("" until the framework stamps it). Plugin names are static, so
    /// stamping a status on every node costs no allocation.
    plugin: &'static str,
}

impl Status {
    /// A successful status; allocation-free.
    pub const fn success() -> Self {
        Status {
            code: Code::Success,
            reasons: Vec::new(),
            plugin: "",
        }
    }

    /// A status with one reason.
    pub fn new(code: Code, reason: impl Into<String>) -> Self {
        Status {
            code,
            reasons: vec![reason.into()],
            plugin: "",
        }
    }

    /// A status with several reasons (e.g. `Insufficient cpu`, `Insufficient memory`).
    pub fn with_reasons(code: Code, reasons: Vec<String>) -> Self {
        Status {
            code,
            reasons,
            plugin: "",
        }
    }

    /// `Unschedulable` with one reason.
    pub fn unschedulable(reason: impl Into<String>) -> Self {
        Self::new(Code::Unschedulable, reason)
    }

    /// `UnschedulableAndUnresolvable` with one reason.
    pub fn unresolvable(reason: impl Into<String>) -> Self {
        Self::new(Code::UnschedulableAndUnresolvable, reason)
    }

    /// `Error` with the error's text as its reason (Go's `AsStatus(err)`).
    pub fn error(message: impl Into<String>) -> Self {
        Self::new(Code::Error, message)
    }

    /// `Skip`.
    pub fn skip() -> Self {
        Status {
            code: Code::Skip,
            reasons: Vec::new(),
            plugin: "",
        }
    }

    /// The status code.
    pub fn code(&self) -> Code {
        self.code
    }

    /// The reasons, in the order the plugin gave them.
    pub fn reasons(&self) -> &[String] {
        &self.reasons
    }

    /// The plugin that set this status, or "" if not stamped.
    pub fn plugin(&self) -> &'static str {
        self.plugin
    }

    /// Stamps the plugin name (the framework does this for every non-success result).
    pub fn with_plugin(mut self, plugin: &'static str) -> Self {
        self.plugin = plugin;
        self
    }

    /// Sets the plugin name in place.
    pub fn set_plugin(&mut self, plugin: &'static str) {
        self.plugin = plugin;
    }

    /// Takes the reasons out (for callers that own the status and would otherwise clone them).
    pub fn into_reasons(self) -> Vec<String> {
        self.reasons
    }

    /// Appends a reason.
    pub fn push_reason(&mut self, reason: impl Into<String>) {
        self.reasons.push(reason.into());
    }

    /// `IsSuccess`.
    pub fn is_success(&self) -> bool {
        self.code == Code::Success
    }

    /// `IsSkip`.
    pub fn is_skip(&self) -> bool {
        self.code == Code::Skip
    }

    /// `IsRejected`.
    pub fn is_rejected(&self) -> bool {
        self.code.is_rejected()
    }

    /// `Message()`: the reasons joined with ", ".
    pub fn message(&self) -> String {
        self.reasons.join(", ")
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_joins_reasons_with_comma_space() {
        let s = Status::with_reasons(
            Code::Unschedulable,
            vec!["Insufficient cpu".into(), "Insufficient memory".into()],
        );
        assert_eq!(s.message(), "Insufficient cpu, Insufficient memory");
    }

    #[test]
    fn rejected_codes() {
        for (code, rejected) in [
            (Code::Success, false),
            (Code::Error, false),
            (Code::Unschedulable, true),
            (Code::UnschedulableAndUnresolvable, true),
            (Code::Wait, false),
            (Code::Skip, false),
            (Code::Pending, true),
        ] {
            assert_eq!(code.is_rejected(), rejected, "{code}");
        }
    }
}
