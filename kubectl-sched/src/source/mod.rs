//! Where the cluster and the subject come from: the cluster loaded from a snapshot file or the API
//! server ([`load`]), paged as its version suits ([`skew`]); the kube-scheduler release to evaluate
//! with ([`release`]); the pod a command is about
//! ([`pods`]); and the what-if changes made to both in memory ([`what_if`]).

pub mod load;
pub mod pods;
pub mod release;
pub mod skew;
pub mod what_if;
