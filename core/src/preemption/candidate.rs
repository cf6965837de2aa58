//! Preemption candidates (a node and the victims that must go for the preemptor to fit there), victim
//! importance, and `pickOneNodeForPreemption`'s ordered criteria.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::snapshot::PodInfo;

/// A pod that would be preempted.
#[derive(Debug, Clone)]
pub struct Victim {
    /// The pod.
    pub pod: Arc<PodInfo>,
    /// `status.startTime` in nanoseconds since the epoch, or the evaluation's "now" when unset.
    pub start_nanos: i128,
    /// True when preempting it violates a PodDisruptionBudget.
    pub pdb_violation: bool,
}

impl Victim {
    /// A victim with its start time resolved against `now_nanos`.
    pub fn new(pod: Arc<PodInfo>, now_nanos: i128) -> Self {
        let start_nanos = start_time_nanos(&pod, now_nanos);
        Victim {
            pod,
            start_nanos,
            pdb_violation: false,
        }
    }
}

/// Go's `GetPodStartTime`: `status.startTime`, or now for pods that have not started.
pub fn start_time_nanos(pod: &PodInfo, now_nanos: i128) -> i128 {
    pod.pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map(|t| t.0.as_nanosecond())
        .unwrap_or(now_nanos)
}

/// `MoreImportantVictim` for single pods as an ordering: higher priority first, then the pod that
/// started earlier. Upstream sorts with an unstable sort; callers use a stable sort so equal victims keep
/// their order on the node.
pub fn importance_order(a: &Victim, b: &Victim) -> Ordering {
    b.pod
        .priority
        .cmp(&a.pod.priority)
        .then(a.start_nanos.cmp(&b.start_nanos))
}

/// A node where preemption makes the pod fit.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The node.
    pub node: String,
    /// The victims, most important first.
    pub victims: Vec<Victim>,
    /// How many victims violate a PDB.
    pub num_pdb_violations: i64,
}

/// The criteria of `pickOneNodeForPreemption`, in order; each keeps the nodes with the highest score.
pub const CRITERIA: [&str; 5] = [
    "fewest PDB violations",
    "lowest highest-priority victim",
    "smallest sum of victim priorities",
    "fewest victims",
    "latest start time of the highest-priority victims",
];

impl Candidate {
    /// The candidate's score under criterion `i` of [`CRITERIA`] (higher is better).
    pub fn score(&self, i: usize) -> i128 {
        match i {
            0 => -i128::from(self.num_pdb_violations),
            // Victims are sorted most important first, so the first has the highest priority.
            1 => -self.victims.first().map_or(0, |v| i128::from(v.pod.priority)),
            // Shifting each priority by 2^31 makes every term non-negative, so a node with a few
            // negative-priority victims does not beat one with fewer victims of the same priority.
            2 => -self
                .victims
                .iter()
                .map(|v| i128::from(v.pod.priority) + (1i128 << 31))
                .sum::<i128>(),
            3 => -(self.victims.len() as i128),
            4 => self.earliest_start_of_highest_priority().unwrap_or(i128::MIN),
            _ => 0,
        }
    }

    /// `GetEarliestPodStartTime`: the earliest start time among the victims of the highest priority.
    pub fn earliest_start_of_highest_priority(&self) -> Option<i128> {
        let max = self.victims.iter().map(|v| v.pod.priority).max()?;
        self.victims
            .iter()
            .filter(|v| v.pod.priority == max)
            .map(|v| v.start_nanos)
            .min()
    }

    /// All criteria scores, for ranking candidates in reports.
    pub fn scores(&self) -> [i128; 5] {
        std::array::from_fn(|i| self.score(i))
    }
}

/// The outcome of `pickOneNodeForPreemption`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pick {
    /// Indices (into the candidates) of the nodes left after every criterion, in input order. One
    /// element when some criterion singled a node out; several when kube-scheduler's pick among them is
    /// effectively random (it takes the first in Go map order).
    pub tied: Vec<usize>,
    /// The criterion that singled out the node (`None` with one candidate or when a tie remains).
    pub decided_by: Option<&'static str>,
}

/// Applies the criteria in order, keeping the best-scoring nodes each time, until one node is left.
pub fn pick_one_node_for_preemption(candidates: &[Candidate]) -> Pick {
    let mut left: Vec<usize> = (0..candidates.len()).collect();
    if left.len() <= 1 {
        return Pick {
            tied: left,
            decided_by: None,
        };
    }
    for (i, name) in CRITERIA.iter().enumerate() {
        let best = left.iter().map(|&c| candidates[c].score(i)).max().unwrap_or(0);
        left.retain(|&c| candidates[c].score(i) == best);
        if left.len() == 1 {
            return Pick {
                tied: left,
                decided_by: Some(name),
            };
        }
    }
    Pick {
        tied: left,
        decided_by: None,
    }
}

/// Candidates best first: lexicographically by the criteria scores (which is what applying them in
/// order amounts to), then by node name.
pub fn rank(candidates: &mut Vec<Candidate>) {
    let mut keyed: Vec<([i128; 5], Candidate)> = candidates.drain(..).map(|c| (c.scores(), c)).collect();
    keyed.sort_by(|(sa, a), (sb, b)| sb.cmp(sa).then_with(|| a.node.cmp(&b.node)));
    candidates.extend(keyed.into_iter().map(|(_, c)| c));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::pod;

    const NOW: i128 = 1_000_000_000_000_000_000;

    fn victim(name: &str, priority: i32, start_secs: Option<i64>) -> Victim {
        let mut b = pod(name).priority(priority);
        if let Some(s) = start_secs {
            b = b.start_time(s);
        }
        Victim::new(Arc::new(b.info()), NOW)
    }

    fn cand(node: &str, pdb: i64, victims: Vec<Victim>) -> Candidate {
        let mut victims = victims;
        victims.sort_by(importance_order);
        Candidate {
            node: node.to_string(),
            victims,
            num_pdb_violations: pdb,
        }
    }

    #[test]
    fn importance_is_priority_then_earlier_start() {
        let mut v = [
            victim("late-low", 1, Some(200)),
            victim("unstarted-high", 5, None),
            victim("early-high", 5, Some(100)),
            victim("early-low", 1, Some(50)),
        ];
        v.sort_by(importance_order);
        let names: Vec<&str> = v.iter().map(|v| v.pod.name()).collect();
        assert_eq!(
            names,
            vec!["early-high", "unstarted-high", "early-low", "late-low"]
        );
    }

    #[test]
    fn each_criterion_singles_out_a_node() {
        let cases: Vec<(&str, Vec<Candidate>, &str, &str)> = vec![
            (
                "fewest PDB violations wins over lower priorities",
                vec![
                    cand("n1", 1, vec![victim("a", 1, Some(1))]),
                    cand("n2", 0, vec![victim("b", 100, Some(1))]),
                ],
                "n2",
                CRITERIA[0],
            ),
            (
                "lowest highest-priority victim",
                vec![
                    cand("n1", 0, vec![victim("a", 10, Some(1)), victim("b", 1, Some(1))]),
                    cand(
                        "n2",
                        0,
                        vec![
                            victim("c", 5, Some(1)),
                            victim("d", 5, Some(1)),
                            victim("e", 5, Some(1)),
                        ],
                    ),
                ],
                "n2",
                CRITERIA[1],
            ),
            (
                "smallest sum of priorities",
                vec![
                    cand("n1", 0, vec![victim("a", 10, Some(1)), victim("b", 9, Some(1))]),
                    cand("n2", 0, vec![victim("c", 10, Some(1)), victim("d", 1, Some(1))]),
                ],
                "n2",
                CRITERIA[2],
            ),
            (
                "sum is shifted by 2^31: two negative victims cost more than one",
                vec![
                    cand(
                        "n1",
                        0,
                        vec![victim("a", -10, Some(1)), victim("b", -10, Some(1))],
                    ),
                    cand("n2", 0, vec![victim("c", -10, Some(1))]),
                ],
                "n2",
                CRITERIA[2],
            ),
            (
                "more victims of the same priorities cost more through the shifted sum",
                vec![
                    cand("n1", 0, vec![victim("a", 2, Some(1)), victim("b", 2, Some(1))]),
                    cand(
                        "n2",
                        0,
                        vec![
                            victim("c", 2, Some(1)),
                            victim("d", 1, Some(1)),
                            victim("e", 1, Some(1)),
                        ],
                    ),
                ],
                // Sums: n1 = 4 + 2·2^31, n2 = 4 + 3·2^31, so the shifted sum already decides.
                "n1",
                CRITERIA[2],
            ),
            (
                "latest start time of the highest-priority victims",
                vec![
                    cand(
                        "n1",
                        0,
                        vec![victim("a", 5, Some(100)), victim("b", 1, Some(500))],
                    ),
                    cand("n2", 0, vec![victim("c", 5, Some(300)), victim("d", 1, Some(10))]),
                ],
                "n2",
                CRITERIA[4],
            ),
            (
                "an unstarted victim counts as starting now",
                vec![
                    cand("n1", 0, vec![victim("a", 5, Some(100))]),
                    cand("n2", 0, vec![victim("c", 5, None)]),
                ],
                "n2",
                CRITERIA[4],
            ),
        ];
        for (name, cands, want, by) in cases {
            let pick = pick_one_node_for_preemption(&cands);
            assert_eq!(pick.tied.len(), 1, "{name}");
            assert_eq!(cands[pick.tied[0]].node, want, "{name}");
            assert_eq!(pick.decided_by, Some(by), "{name}");
            let mut ranked = cands.clone();
            rank(&mut ranked);
            assert_eq!(ranked[0].node, want, "{name}: ranking agrees with the pick");
        }
    }

    #[test]
    fn fewest_victims_decides_when_shifted_sums_tie() {
        // The 2^31 shift makes equal sums with different counts possible only with a victim at the
        // lowest int32 priority, whose shifted term is zero.
        let cands = vec![
            cand(
                "n2",
                0,
                vec![victim("a", 0, Some(1)), victim("b", i32::MIN, Some(1))],
            ),
            cand("n1", 0, vec![victim("c", 0, Some(1))]),
        ];
        let pick = pick_one_node_for_preemption(&cands);
        assert_eq!(cands[pick.tied[0]].node, "n1");
        assert_eq!(pick.decided_by, Some(CRITERIA[3]));
    }

    #[test]
    fn ties_are_reported() {
        let cands = vec![
            cand("n2", 0, vec![victim("a", 1, Some(5))]),
            cand("n1", 0, vec![victim("b", 1, Some(5))]),
            cand("n3", 0, vec![victim("c", 1, Some(4))]),
        ];
        let pick = pick_one_node_for_preemption(&cands);
        assert_eq!(pick.tied, vec![0, 1]);
        assert_eq!(pick.decided_by, None);

        let single = vec![cand("n1", 3, vec![victim("a", 1, None)])];
        assert_eq!(
            pick_one_node_for_preemption(&single),
            Pick {
                tied: vec![0],
                decided_by: None
            }
        );
        assert_eq!(
            pick_one_node_for_preemption(&[]),
            Pick {
                tied: vec![],
                decided_by: None
            }
        );
    }
}
