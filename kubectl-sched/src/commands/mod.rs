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
