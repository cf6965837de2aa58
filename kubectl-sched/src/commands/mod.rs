//! The subcommands, one module each: resolve the arguments, take the cluster and the subject from
//! [`crate::source`], call sched-core and [`crate::diagnosis`]. They return data; [`crate::output`]
//! renders it and `main` prints it.

pub mod complete;
pub mod explain;
pub mod preempt;
pub mod simulate;
pub mod snapshot;
pub mod triage;
pub mod watch;

/// What a command's run has to say on stderr besides its result; `main` prints it the same way for
/// every command.
pub trait Messages {
    /// Always shown.
    fn warnings(&self) -> &[String];
    /// Shown with `-v 1`.
    fn notes(&self) -> &[String];
    /// Shown with `-v 2`: how long each phase took.
    fn timings(&self) -> &[String] {
        &[]
    }
}

/// Implements [`Messages`] for command outputs with `warnings` and `notes` fields (and `timings`,
/// when named).
macro_rules! messages {
    ($output:ty) => {
        impl $crate::commands::Messages for $output {
            fn warnings(&self) -> &[String] {
                &self.warnings
            }
            fn notes(&self) -> &[String] {
                &self.notes
            }
        }
    };
    ($output:ty, timings) => {
        impl $crate::commands::Messages for $output {
            fn warnings(&self) -> &[String] {
                &self.warnings
            }
            fn notes(&self) -> &[String] {
                &self.notes
            }
            fn timings(&self) -> &[String] {
                &self.timings
            }
        }
    };
}

messages!(explain::ExplainOutput, timings);
messages!(explain::via::ServedOutput);
messages!(preempt::Planned);
messages!(preempt::pod_group::GroupPlanned);
messages!(simulate::SimulateOutput);
messages!(snapshot::SnapshotOutput);
messages!(triage::TriageOutput);
