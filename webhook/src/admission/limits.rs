//! The bounds of admission work: how many decisions at once, how much memory the pods under decision
//! may take, how many claims of one pod are considered, and the request body limit. They belong to
//! the request pipeline ([`super::answer`]), which enforces them for every caller (the server, tests,
//! the fuzz target); the flags set them (`--max-decisions`, …).

/// Default request body limit: AdmissionReviews of pods are a few KiB; 3 MiB covers the largest
/// objects etcd accepts (1.5 MiB) twice (object and oldObject).
pub const DEFAULT_MAX_BODY_BYTES: usize = 3 * 1024 * 1024;
/// Decisions made at once (each on a blocking thread).
pub const DEFAULT_MAX_DECISIONS: usize = 8;
/// Memory the pods under decision may take once decoded, estimated from their shape
/// ([`super::PodShape::decoded_bytes`]): a pod of many small volumes decodes to a hundred times its
/// JSON (an AdmissionReview of 2.7 MB took over 400 MB), so this, not the body size, bounds the memory
/// of decisions. A pod estimated over it is not decoded at all; one that would take the total over it
/// is shed.
pub const DEFAULT_MAX_DECISION_BYTES: usize = 128 * 1024 * 1024;
/// Claims of one pod considered. No node attaches more volumes than this (cloud CSI drivers stop at
/// 16 to 128); a pod that names more is left to the scheduler without reading any of them.
pub const DEFAULT_MAX_CLAIMS: usize = 256;

/// The bounds of admission work.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Decisions at once.
    pub max_decisions: usize,
    /// Estimated decoded bytes of the pods under decision at once.
    pub max_decision_bytes: usize,
    /// Claims of one pod considered.
    pub max_claims: usize,
    /// The request body limit.
    pub max_body_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_decisions: DEFAULT_MAX_DECISIONS,
            max_decision_bytes: DEFAULT_MAX_DECISION_BYTES,
            max_claims: DEFAULT_MAX_CLAIMS,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        }
    }
}
