//! kubectl-sched's modules, as a library: the `kubectl-sched` binary (`main.rs`) runs them from the
//! command line, and the in-cluster explainer (`sched-webhook explainer`) runs the same commands and
//! renderers on its watch-fed snapshot ([`served`]), so that an answer served by the cluster is the
//! text the CLI prints from a listing, byte for byte.
//!
//! Layers, lowest first (`CLI_LAYERS` in `core/tests/layers.rs`): [`cli`] declares, [`source`] says
//! where the cluster comes from, [`diagnosis`] adds to the engine's verdict, [`commands`] resolve
//! arguments into results, [`output`] renders them, [`served`] runs a command on a snapshot handed in
//! and renders it, [`console`] prints.

pub mod cli;
pub mod commands;
pub mod console;
pub mod diagnosis;
pub mod output;
pub mod served;
pub mod source;
