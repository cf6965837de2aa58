//! Where the cluster and the subject come from: the cluster loaded from a snapshot file or the API
//! server ([`load`]), with the version-skew warning ([`skew`]); the pod a command is about
//! ([`pods`]); and the what-if changes made to both in memory ([`what_if`]).

pub mod load;
pub mod pods;
pub mod skew;
pub mod what_if;
