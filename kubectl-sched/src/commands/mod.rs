//! The subcommands: resolve arguments, load the cluster, call sched-core. They return data; `output`
//! renders it and `main` prints it.

pub mod complete;
pub mod explain;
pub mod fixes;
pub mod hints;
pub mod load;
pub mod node_resources;
pub mod pods;
pub mod preempt;
pub mod simulate;
pub mod skew;
pub mod snapshot;
pub mod still_pending;
pub mod triage;
pub mod watch;
pub mod what_if;
