//! VolumeBinding's score (StorageCapacityScoring, beta and on in v1.37): per storage class, the share of
//! the node's storage the pod would use, mapped through the configured shape; the node's score is the
//! rounded mean over classes.

use std::collections::BTreeMap;

use crate::plugins::helper::shape_score::{ShapePoint, utilization_score};

/// What the pod asks of one storage class on a node, and what the node has of it, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct StorageResource {
    /// Requested by the pod's claims.
    pub requested: i64,
    /// Capacity on the node.
    pub capacity: i64,
}

/// The scoring function built from a shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VolumeCapacityScorer {
    shape: Vec<ShapePoint>,
}

impl VolumeCapacityScorer {
    /// Builds the scorer.
    pub(crate) fn new(shape: Vec<ShapePoint>) -> Self {
        VolumeCapacityScorer { shape }
    }

    fn class_score(&self, resource: StorageResource) -> i64 {
        utilization_score(&self.shape, resource.requested, resource.capacity)
    }

    /// The node's score: every class weighs the same; no class scores 0.
    pub(crate) fn score(&self, classes: &BTreeMap<String, StorageResource>) -> i64 {
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
}
