//! Helpers shared by several plugins (score normalization, taint/toleration matching).

pub mod normalize_score;
