//! Helpers shared by several plugins (score normalization, taint/toleration matching).

pub mod normalize_score;
pub mod spreading;
pub mod taints;
