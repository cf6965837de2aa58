//! Helpers shared by several plugins (score normalization, score shapes, taint/toleration matching).

pub(crate) mod device_classes;
pub(crate) mod normalize_score;
pub(crate) mod shape_score;
pub(crate) mod spreading;
pub(crate) mod taints;
