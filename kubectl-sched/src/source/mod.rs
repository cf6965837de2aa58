//! Where the cluster and the subject come from: the API server reached as kubectl reaches it
//! ([`connection`]); the cluster loaded from a snapshot file or the API
//! server ([`load`]), paged as its version suits ([`skew`]); the kube-scheduler release to evaluate
//! with ([`release`]); the pod a command is about
//! ([`pods`]); the what-if changes made to both in memory ([`what_if`]); and, when the API server
//! refuses, the permission and the role of deploy/rbac/ that grants it ([`rbac`]).

pub mod connection;
pub mod explainer;
pub mod load;
pub mod pods;
pub mod rbac;
pub mod release;
pub mod skew;
pub mod what_if;
