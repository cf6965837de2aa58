//! VolumeBinding's score (StorageCapacityScoring, beta and on in v1.37): per storage class, the share of
//! the node's storage the pod would use, mapped through the configured shape; the node's score is the
//! rounded mean over classes.

use std::collections::BTreeMap;

/// Utilization of a fully used (or overcommitted, or zero-capacity) class.
pub const MAX_UTILIZATION: i64 = 100;

/// One point of the score shape, already scaled to node scores (0–100).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShapePoint {
    /// Utilization, 0–100.
    pub utilization: i64,
    /// Score at that utilization, 0–100.
    pub score: i64,
}

/// What the pod asks of one storage class on a node, and what the node has of it, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StorageResource {
    /// Requested by the pod's claims.
    pub requested: i64,
    /// Capacity on the node.
    pub capacity: i64,
}

/// `BuildBrokenLinearFunction`: the shape's value at `p`, flat before the first and after the last point
/// and linear in between (integer arithmetic, as upstream).
pub fn broken_linear(shape: &[ShapePoint], p: i64) -> i64 {
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

/// The scoring function built from a shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeCapacityScorer {
    shape: Vec<ShapePoint>,
}

impl VolumeCapacityScorer {
    /// Builds the scorer.
    pub fn new(shape: Vec<ShapePoint>) -> Self {
        VolumeCapacityScorer { shape }
    }

    fn class_score(&self, resource: StorageResource) -> i64 {
        if resource.capacity == 0 || resource.requested > resource.capacity {
            return broken_linear(&self.shape, MAX_UTILIZATION);
        }
        // Widened: byte counts times 100 overflow i64 for very large volumes.
        let utilization =
            i128::from(resource.requested) * i128::from(MAX_UTILIZATION) / i128::from(resource.capacity);
        broken_linear(&self.shape, utilization as i64)
    }

    /// The node's score: every class weighs the same; no class scores 0.
    pub fn score(&self, classes: &BTreeMap<String, StorageResource>) -> i64 {
        if classes.is_empty() {
            return 0;
        }
        let total: i64 = classes.values().map(|r| self.class_score(*r)).sum();
        (total as f64 / classes.len() as f64).round() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_shape() -> Vec<ShapePoint> {
        vec![
            ShapePoint {
                utilization: 0,
                score: 100,
            },
            ShapePoint {
                utilization: 100,
                score: 0,
            },
        ]
    }

    #[test]
    fn class_scores_follow_the_shape() {
        let scorer = VolumeCapacityScorer::new(default_shape());
        for (requested, capacity, want) in [
            (50, 200, 75),
            (50, 100, 50),
            (10, 10, 0),
            (0, 100, 100),
            (20, 10, 0), // overcommitted: fully used
            (0, 0, 0),   // no capacity: fully used
        ] {
            let classes = BTreeMap::from([("sc".to_string(), StorageResource { requested, capacity })]);
            assert_eq!(scorer.score(&classes), want, "{requested}/{capacity}");
        }
        assert_eq!(scorer.score(&BTreeMap::new()), 0);
    }

    #[test]
    fn node_score_is_the_rounded_mean_over_classes() {
        let scorer = VolumeCapacityScorer::new(default_shape());
        let classes = BTreeMap::from([
            (
                "a".to_string(),
                StorageResource {
                    requested: 50,
                    capacity: 200,
                },
            ), // 75
            (
                "b".to_string(),
                StorageResource {
                    requested: 100,
                    capacity: 200,
                },
            ), // 50
        ]);
        assert_eq!(scorer.score(&classes), 63); // 62.5 rounds half away from zero
    }

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
        ] {
            assert_eq!(broken_linear(&shape, p), want, "p={p}");
        }
    }
}
