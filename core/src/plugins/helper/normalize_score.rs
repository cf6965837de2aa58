//! `DefaultNormalizeScore`: scale scores so the highest becomes `max_priority`, optionally reversed.

use crate::framework::interface::NodeScore;

/// Go's `helper.DefaultNormalizeScore(maxPriority, reverse, scores)`.
pub(crate) fn default_normalize_score(max_priority: i64, reverse: bool, scores: &mut [NodeScore]) {
    let max_count = scores.iter().map(|s| s.score).max().unwrap_or(0);
    if max_count == 0 {
        if reverse {
            for s in scores.iter_mut() {
                s.score = max_priority;
            }
        }
        return;
    }
    for s in scores.iter_mut() {
        let mut score = max_priority * s.score / max_count;
        if reverse {
            score = max_priority - score;
        }
        s.score = score;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scores(v: &[i64]) -> Vec<NodeScore> {
        v.iter()
            .enumerate()
            .map(|(i, s)| NodeScore {
                name: format!("n{i}"),
                score: *s,
            })
            .collect()
    }

    #[test]
    fn normalizes_like_go() {
        for (name, input, reverse, want) in [
            ("scales to max", vec![10, 5, 0], false, vec![100, 50, 0]),
            ("reverse", vec![10, 5, 0], true, vec![0, 50, 100]),
            ("all zero stays zero", vec![0, 0], false, vec![0, 0]),
            ("all zero reversed is max", vec![0, 0], true, vec![100, 100]),
            ("integer division", vec![3, 1], false, vec![100, 33]),
        ] {
            let mut s = scores(&input);
            default_normalize_score(100, reverse, &mut s);
            assert_eq!(s.iter().map(|s| s.score).collect::<Vec<_>>(), want, "{name}");
        }
    }
}
