//! How RunPostFilterPlugins combines the PostFilter plugins' outcomes: the first Success,
//! UnschedulableAndUnresolvable or Error ends the run; Unschedulable reasons accumulate in plugin
//! order, so one plugin's words come before the next one's in the FitError (`no new claims to
//! deallocate, preemption: …` in v1.34–v1.36).

use crate::framework::interface::{NominatingMode, PostFilterResult};
use crate::framework::status::{Code, Status};

/// RunPostFilterPlugins' accumulator: the last nomination of a rejecting plugin, the reasons of every
/// Unschedulable status in plugin order (joined by `, ` in the message) and the first rejector.
#[derive(Default)]
pub(crate) struct PostFilterFold {
    result: Option<PostFilterResult>,
    reasons: Vec<String>,
    rejector: &'static str,
}

impl PostFilterFold {
    /// Takes one plugin's outcome; `Some` when it ends the run (Success, UAU or Error).
    pub(crate) fn add(
        &mut self,
        plugin: &'static str,
        (r, s): (Option<PostFilterResult>, Status),
    ) -> Option<(Option<PostFilterResult>, Status)> {
        if s.is_success() {
            return Some((r, s));
        } else if s.code() == Code::UnschedulableAndUnresolvable {
            return Some((r, s.with_plugin(plugin)));
        } else if !s.is_rejected() {
            return Some((None, Status::error(s.message()).with_plugin(plugin)));
        } else if let Some(r) = r.filter(|r| r.mode != NominatingMode::Noop) {
            self.result = Some(r);
        }
        self.reasons.extend(s.reasons().iter().cloned());
        if self.rejector.is_empty() {
            self.rejector = plugin;
        }
        None
    }

    /// The status of a run no plugin ended: Unschedulable with every reason.
    pub(crate) fn finish(self) -> (Option<PostFilterResult>, Status) {
        (
            self.result,
            Status::with_reasons(Code::Unschedulable, self.reasons).with_plugin(self.rejector),
        )
    }
}
