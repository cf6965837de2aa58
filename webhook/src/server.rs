//! The webhook server under one path: the `POST /mutate` router ([`crate::mutate`]), the bounds of
//! admission work ([`crate::admission::Limits`]) and the listeners that serve them
//! ([`crate::serving`]). It defines nothing: the router sits below the listeners (they serve it), so
//! the one path that names both sits above them (see the layer table in `core/tests/layers.rs`).

pub use crate::admission::{
    DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CLAIMS, DEFAULT_MAX_DECISION_BYTES, DEFAULT_MAX_DECISIONS, Limits,
};
pub use crate::mutate::{AppState, MAX_CATCH_UP_READS, ServerIo, router};
pub use crate::serving::{Listeners, admin_router, serve, termination_signal};
