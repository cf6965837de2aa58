//! sched-webhook: a mutating admission webhook that does kube-scheduler's volume PreBind work at pod
//! admission and at `pods/binding`, and clears stale nominations.
//!
//! ```text
//!  kube-apiserver ──TLS──► server (/mutate) ──► admission::{pod_create, binding}  (pure: view → Decision)
//!                                │                         ▲
//!                                │                         └── cache (reflectors + own writes)
//!                                └──► run_plan ──► sched_core::apply (kube::Client; retries, undo)
//!  admin port (plain HTTP, loopback by default): /healthz /readyz /metrics
//! ```

pub mod admission;
pub mod cache;
pub mod certs;
pub mod config;
pub mod controller;
pub mod deadline;
pub mod error;
pub mod health;
pub mod memory;
pub mod metrics;
pub mod run;
pub mod server;
pub mod serving;
pub mod tls;
