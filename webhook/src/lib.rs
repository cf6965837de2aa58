//! sched-webhook: a mutating admission webhook that does kube-scheduler's volume PreBind work for pods
//! created on a node, bound through `pods/binding`, or opted in, and clears stale nominations.
//!
//! ```text
//!  kube-apiserver ──TLS──► serving (connection limits) ──► server (/mutate: bounded, sheds under load)
//!                                                            │
//!                                                            ▼
//!                          admission::{pod_create, binding}  (pure: view → Decision; answer only)
//!                                 ▲                  ▲
//!  cache (reflectors + own writes)┘                  │ the same decisions, for stored pods
//!        │ pod events                                │
//!        └──────────────► controller (Lease holder) ─┴──► sched_core::apply (UID/resourceVersion
//!                                                          preconditions)
//!  admin port (plain HTTP, loopback by default): /healthz /readyz /metrics
//! ```
//!
//! `sched-webhook explainer` runs the same binary as a second Deployment: [`explainer`] serves
//! `kubectl sched explain` as an aggregated API from a watch-fed snapshot.
//!
//! Admission writes nothing to the cluster; see [`controller`] for why the writes wait until the API
//! server has stored the pod.

pub mod admission;
pub mod cache;
pub mod certs;
pub mod config;
pub mod controller;
pub mod deadline;
pub mod error;
pub mod explainer;
pub mod health;
pub mod memory;
pub mod metrics;
pub mod mutate;
pub mod run;
pub mod server;
pub mod serving;
pub mod tls;
pub mod watch_health;
pub mod watchdog;
