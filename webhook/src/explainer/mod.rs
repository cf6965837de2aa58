//! The in-cluster explainer (`sched-webhook explainer`): the same binary as the webhook, run as a
//! Deployment of its own. It keeps a snapshot of every kind the engine reads current from watches
//! ([`live`]) and serves `kubectl sched explain` as an aggregated API, `sched.kubectl-sched.io/v1alpha1`
//! ([`api`]), to the users the API server authenticated and a SubjectAccessReview allows
//! ([`identity`]), naming no pod of a namespace the user cannot read ([`redact`]), on a TLS port that only the API server's front proxy can talk to ([`serve`]).
//!
//! Why a Deployment of its own rather than a part of the webhook's: an explanation evaluates every
//! node (and copies the snapshot), hundreds of milliseconds at thousands of nodes, while an admission
//! answer must come within the webhook's 5 s timeout and usually in a millisecond; in one process
//! they would share the CPU, the allocator and the reflector thread, and a burst of explanations
//! would delay pod creations. The explainer also watches every kind, the webhook only the ones its
//! decisions read. The answers are the CLI's own: the command and renderer are kubectl-sched's
//! (`kubectl_sched::served`), run on the explainer's snapshot.

pub mod api;
pub mod identity;
pub mod live;
pub mod pending;
pub mod redact;
pub mod serve;
