//! Score shapes (upstream `pkg/scheduler/framework/plugins/helper/shape_score.go`): a utilization →
//! score function made of linear segments, which NodeResourcesFit's RequestedToCapacityRatio strategy
//! and VolumeBinding's StorageCapacityScoring both score with; and the shape's configuration as both
//! plugins' args spell it, validated as `apis/config/validation`'s `validateFunctionShape` does.

use serde::{Deserialize, Serialize};

use crate::features::ReleaseChanges;

/// The highest score a utilization shape point may give (`MaxCustomPriorityScore`); shape scores are
/// scaled by `MAX_NODE_SCORE / MAX_CUSTOM_PRIORITY_SCORE` before use.
pub(crate) const MAX_CUSTOM_PRIORITY_SCORE: i64 = 10;

/// `UtilizationShapePoint` of KubeSchedulerConfiguration v1 (`requestedToCapacityRatio.shape[]` of
/// NodeResourcesFitArgs, `shape[]` of VolumeBindingArgs), decoded strictly as kube-scheduler decodes
/// its configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct UtilizationShapePoint {
    /// 0–100.
    pub utilization: i32,
    /// 0–[`MAX_CUSTOM_PRIORITY_SCORE`].
    pub score: i32,
}

/// `validateFunctionShape`: at least one point, utilization strictly increasing and in [0, 100],
/// score in [0, 10]; one apimachinery field error per problem, paths under `path`. The order
/// error's words are the release's (`changes.shape_order_error_says_utilization_values`).
pub(crate) fn validate_function_shape(
    shape: &[UtilizationShapePoint],
    path: &str,
    changes: &ReleaseChanges,
) -> Vec<String> {
    if shape.is_empty() {
        return vec![format!(
            "{path}: Required value: at least one point must be specified"
        )];
    }
    let mut errs = Vec::new();
    if let Some(i) = (1..shape.len()).find(|&i| shape[i - 1].utilization >= shape[i].utilization) {
        let words = if changes.shape_order_error_says_utilization_values {
            "utilization values must be sorted in increasing order"
        } else {
            "values must be sorted in increasing order"
        };
        errs.push(format!(
            "{path}[{i}].utilization: Invalid value: {}: {words}",
            shape[i].utilization
        ));
    }
    for (i, point) in shape.iter().enumerate() {
        if !(0..=MAX_UTILIZATION as i32).contains(&point.utilization) {
            errs.push(format!(
                "{path}[{i}].utilization: Invalid value: {}: not in valid range [0, {MAX_UTILIZATION}]",
                point.utilization
            ));
        }
        if !(0..=MAX_CUSTOM_PRIORITY_SCORE as i32).contains(&point.score) {
            errs.push(format!(
                "{path}[{i}].score: Invalid value: {}: not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]",
                point.score
            ));
        }
    }
    errs
}

/// Utilization of a fully used (or overcommitted, or zero-capacity) resource.
pub(crate) const MAX_UTILIZATION: i64 = 100;

/// `FunctionShapePoint`: one point of a shape, already scaled to node scores (0–100).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ShapePoint {
    /// Utilization in percent (0–100): the function's argument.
    pub utilization: i64,
    /// Score at that utilization (0–100): the function's value.
    pub score: i64,
}

/// `BuildBrokenLinearFunction`: the shape's value at `p`, its first score before its first point, its
/// last score past its last point, and linear in between (integer arithmetic, as upstream).
pub(crate) fn broken_linear(shape: &[ShapePoint], p: i64) -> i64 {
    for (i, point) in shape.iter().enumerate() {
        if p <= point.utilization {
            if i == 0 {
                return point.score;
            }
            let prev = shape[i - 1];
            let span = point.utilization - prev.utilization;
            if span == 0 {
                return point.score;
            }
            return prev.score + (point.score - prev.score) * (p - prev.utilization) / span;
        }
    }
    shape.last().map_or(0, |p| p.score)
}

/// The shape's value at the utilization `requested` makes of `capacity` (upstream's per-resource
/// scoring function, the same in both plugins): a zero capacity or a request over it counts as
/// [`MAX_UTILIZATION`].
pub(crate) fn utilization_score(shape: &[ShapePoint], requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return broken_linear(shape, MAX_UTILIZATION);
    }
    // Widened: byte counts times 100 overflow i64 for very large volumes. Within the capacity the
    // quotient is at most MAX_UTILIZATION.
    let utilization = i128::from(requested) * i128::from(MAX_UTILIZATION) / i128::from(capacity);
    broken_linear(shape, utilization as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broken_linear_is_flat_outside_and_linear_inside() {
        let shape = vec![
            ShapePoint {
                utilization: 10,
                score: 20,
            },
            ShapePoint {
                utilization: 50,
                score: 100,
            },
            ShapePoint {
                utilization: 90,
                score: 0,
            },
        ];
        for (p, want) in [
            (0, 20),
            (10, 20),
            (30, 60),
            (50, 100),
            (70, 50),
            (90, 0),
            (100, 0),
            (11, 22),
        ] {
            assert_eq!(broken_linear(&shape, p), want, "p={p}");
        }
    }
}
