//! Helpers shared by several plugins (score normalization, score shapes, taint/toleration matching).

pub mod device_classes;
pub mod normalize_score;
pub mod shape_score;
pub mod spreading;
pub mod taints;
