//! Preemption outcomes that rest on an arbitrary order, found and reported as such.
//!
//! kube-scheduler sorts a node's potential victims by importance (`MoreImportantVictim`: higher
//! priority, then earlier `status.startTime`). Pods of equal priority and equal start time are equally
//! important, and so are pods that have not started: it stamps each with `time.Now()` as it meets it, in
//! its cache's pod order, which is not stable across runs. `SelectVictimsOnNode` reprieves the first of
//! such pods it tries, so which of them are spared is effectively random; the victim count and PDB
//! violations follow, and through them `pickOneNodeForPreemption`'s choice of node and the message
//! naming it.
//!
//! The evaluator plans with the pods' order on the node. [`explore`] tries the other orders of each run of
//! equally important pods (every order when there are at most [`MAX_ORDERS_PER_NODE`], a fixed sample
//! otherwise), keeps the distinct victim sets (at most [`MAX_VICTIM_SETS`] besides the planned one), and
//! works out which nodes, and which preemption messages, kube-scheduler may end up with.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::ops::Range;

use rayon::prelude::*;
use serde::Serialize;

use crate::framework::cycle_state::CycleState;
use crate::framework::interface::FrameworkHandle;
use crate::framework::status::Status;
use crate::preemption::candidate::{Candidate, Victim, importance_order};
use crate::preemption::evaluator::{
    Evaluation, found_placement_message, remove_potential_victims, reprieve_in_order,
};
use crate::preemption::pdb::PdbIndex;
use crate::snapshot::{NodeInfo, PodInfo};

/// Victim sets reported per node besides the planned one.
pub const MAX_VICTIM_SETS: usize = 8;
/// Orders of the equally important pods tried per node besides the planned one: every order when there
/// are no more than this (a run of 4 pods, or runs of 2 and 3), a sample otherwise.
pub const MAX_ORDERS_PER_NODE: usize = 24;
/// Preemption messages reported besides the planned one.
pub const MAX_MESSAGES: usize = 8;
/// Candidates searched for other victim sets, best first: the search costs up to
/// [`MAX_ORDERS_PER_NODE`] reprieve passes per candidate, so this bounds it to a fraction of the dry
/// run's own cost even at thousands of candidates; the ones left out are counted.
pub const MAX_EXPLORED_CANDIDATES: usize = 64;

/// The victim sets a candidate node may have besides the planned one.
#[derive(Debug, Clone, Default)]
pub struct NodeAlternatives {
    /// Distinct victim sets other orders give (as candidates of the same node), in the order found.
    pub sets: Vec<Candidate>,
    /// True when the search stopped before trying every order (at [`MAX_VICTIM_SETS`] sets, or because
    /// there were more than [`MAX_ORDERS_PER_NODE`] orders): there may be more sets.
    pub capped: bool,
}

/// What rests on an arbitrary order in one evaluation.
#[derive(Debug, Clone, Default)]
pub struct OrderTies {
    /// Candidates whose victims depend on the order of equally important pods.
    pub by_node: HashMap<String, NodeAlternatives>,
    /// Every candidate kube-scheduler may pick, best first: the tied candidates, and those that win with
    /// another of their victim sets.
    pub possible_nodes: Vec<String>,
    /// The messages (without `preemption: `) kube-scheduler may write for those picks, at most
    /// [`MAX_MESSAGES`] + 1, in the order of `possible_nodes` (none before v1.37, whose successful
    /// preemption has no message).
    pub possible_messages: Vec<String>,
    /// True when `possible_messages` was cut at its cap.
    pub messages_capped: bool,
    /// Candidates with equally important victims beyond the first [`MAX_EXPLORED_CANDIDATES`], not
    /// searched: `possible_nodes` may miss some of them.
    pub unexplored: usize,
    /// The release's preemption names the node it picks in its message (v1.37 on).
    pub reports_placement: bool,
}

/// Runs of at least two equally important victims in `sorted` (most important first).
pub fn tie_groups(sorted: &[Victim]) -> Vec<Range<usize>> {
    let mut groups = Vec::new();
    let mut start = 0;
    for i in 1..=sorted.len() {
        let run_ends = i == sorted.len() || importance_order(&sorted[start], &sorted[i]) != Ordering::Equal;
        if run_ends {
            if i - start >= 2 {
                groups.push(start..i);
            }
            start = i;
        }
    }
    groups
}

fn factorial(n: usize) -> Option<usize> {
    (1..=n).try_fold(1usize, usize::checked_mul)
}

/// The next permutation in lexicographic order; on the last one, back to the first and `false`.
fn next_permutation(items: &mut [usize]) -> bool {
    let Some(i) = (1..items.len()).rev().find(|&i| items[i - 1] < items[i]) else {
        items.reverse();
        return false;
    };
    let pivot = i - 1;
    let Some(j) = (i..items.len()).rev().find(|&j| items[j] > items[pivot]) else {
        return false;
    };
    items.swap(pivot, j);
    items[i..].reverse();
    true
}

/// Orders (permutations of `0..len` that only reorder within `groups`) to try besides the identity, and
/// whether they are all such orders.
pub fn orders(len: usize, groups: &[Range<usize>], budget: usize) -> (Vec<Vec<usize>>, bool) {
    let identity: Vec<usize> = (0..len).collect();
    let total = groups.iter().try_fold(1usize, |acc, g| {
        factorial(g.len()).and_then(|f| acc.checked_mul(f))
    });
    let mut out: Vec<Vec<usize>> = Vec::new();
    if total.is_some_and(|t| t <= budget.saturating_add(1)) {
        // An odometer over the permutations of each group, the last group turning fastest.
        let mut current = identity;
        loop {
            let advanced = groups
                .iter()
                .rev()
                .any(|g| next_permutation(&mut current[g.clone()]));
            if !advanced {
                return (out, true);
            }
            out.push(current.clone());
        }
    }
    // Too many orders: each pod of a group tried first (rotations), each group reversed, then every
    // group rotated at once; distinct orders only, up to the budget.
    let mut candidates: Vec<Vec<usize>> = Vec::new();
    for g in groups {
        for r in 1..g.len() {
            let mut o = identity.clone();
            o[g.clone()].rotate_left(r);
            candidates.push(o);
        }
    }
    for g in groups {
        let mut o = identity.clone();
        o[g.clone()].reverse();
        candidates.push(o);
    }
    let longest = groups.iter().map(ExactSizeIterator::len).max().unwrap_or(0);
    for r in 1..longest {
        let mut o = identity.clone();
        for g in groups {
            o[g.clone()].rotate_left(r % g.len());
        }
        candidates.push(o);
    }
    for o in candidates {
        if out.len() >= budget {
            break;
        }
        if o != identity && !out.contains(&o) {
            out.push(o);
        }
    }
    (out, false)
}

/// A victim set's identity: its pods (by UID, sorted) and its PDB violations.
fn set_key(c: &Candidate) -> (Vec<String>, i64) {
    let mut uids: Vec<String> = c.victims.iter().map(|v| v.pod.uid().to_string()).collect();
    uids.sort();
    (uids, c.num_pdb_violations)
}

/// The runs of equally important pods among a node's potential victims (a cheap check before cloning
/// anything: the same stable sort the evaluator does).
fn potential_tie_groups(node: &NodeInfo, preemptor: &PodInfo, now_nanos: i128) -> Vec<Range<usize>> {
    let mut potential: Vec<Victim> = node
        .pods
        .iter()
        .filter(|p| p.priority < preemptor.priority)
        .map(|p| Victim::new(p.clone(), now_nanos))
        .collect();
    potential.sort_by(importance_order);
    tie_groups(&potential)
}

/// The victim sets `planned`'s node may have with other orders of its equally important pods. `None`
/// when it has no such pods, or when no order tried gives another set.
pub fn alternatives_on_node(
    fwk: &dyn FrameworkHandle,
    state: &CycleState,
    preemptor: &PodInfo,
    node: &NodeInfo,
    pdbs: &PdbIndex,
    now_nanos: i128,
    planned: &Candidate,
) -> Result<Option<NodeAlternatives>, Status> {
    let groups = potential_tie_groups(node, preemptor, now_nanos);
    if groups.is_empty() {
        return Ok(None);
    }
    let mut emptied_node = NodeInfo::clone(node);
    let mut emptied_state = state.clone();
    let sorted = remove_potential_victims(fwk, &mut emptied_state, preemptor, &mut emptied_node, now_nanos)?;
    let (orders, every_order) = orders(sorted.len(), &groups, MAX_ORDERS_PER_NODE);
    let mut seen = vec![set_key(planned)];
    let mut found = NodeAlternatives {
        sets: Vec::new(),
        capped: false,
    };
    for (tried, order) in orders.iter().enumerate() {
        if found.sets.len() == MAX_VICTIM_SETS {
            found.capped = tried < orders.len();
            break;
        }
        let ordered: Vec<Victim> = order.iter().map(|&i| sorted[i].clone()).collect();
        let (victims, num_pdb_violations) = reprieve_in_order(
            fwk,
            &mut emptied_state.clone(),
            preemptor,
            &mut emptied_node.clone(),
            ordered,
            pdbs,
        )?;
        let set = Candidate {
            node: planned.node.clone(),
            victims,
            num_pdb_violations,
        };
        let key = set_key(&set);
        if !seen.contains(&key) {
            seen.push(key);
            found.sets.push(set);
        }
    }
    if found.sets.is_empty() {
        return Ok(None);
    }
    found.capped |= !every_order;
    Ok(Some(found))
}

/// Finds, for every candidate of `eval`, the victim sets other orders give, then the nodes and messages
/// kube-scheduler may end up with.
pub fn explore(
    fwk: &dyn FrameworkHandle,
    state: &CycleState,
    preemptor: &PodInfo,
    eval: &Evaluation,
    now_nanos: i128,
) -> OrderTies {
    let snapshot = fwk.snapshot();
    let pdbs = PdbIndex::from_objects(&snapshot.pod_disruption_budgets);
    let explored = eval.candidates.len().min(MAX_EXPLORED_CANDIDATES);
    let unexplored = eval.candidates[explored..]
        .par_iter()
        .filter(|c| {
            snapshot
                .node(&c.node)
                .is_some_and(|n| !potential_tie_groups(n, preemptor, now_nanos).is_empty())
        })
        .count();
    let by_node: HashMap<String, NodeAlternatives> = eval.candidates[..explored]
        .par_iter()
        .filter_map(|c| {
            let node = snapshot.node(&c.node)?;
            // An order the planned run got through cannot fail in another for a reason of its own;
            // should it, the node is reported without alternatives.
            let found = alternatives_on_node(fwk, state, preemptor, node, &pdbs, now_nanos, c).ok()??;
            Some((c.node.clone(), found))
        })
        .collect();
    let mut ties = OrderTies {
        by_node,
        unexplored,
        reports_placement: eval.reports_placement,
        ..Default::default()
    };
    ties.possible(&eval.candidates);
    ties
}

impl OrderTies {
    /// Every victim set of a candidate: the planned one, then the alternatives.
    fn sets<'a>(&'a self, planned: &'a Candidate) -> impl Iterator<Item = &'a Candidate> {
        std::iter::once(planned).chain(self.by_node.get(&planned.node).into_iter().flat_map(|a| &a.sets))
    }

    /// Fills `possible_nodes` and `possible_messages`. Each node's victim set is chosen independently, and
    /// `pickOneNodeForPreemption`'s criteria in order amount to the lexicographic maximum of the score
    /// vectors: a node can be picked with one of its sets when that set scores at least as well as the
    /// worst set of every other node. A release whose preemption does not report the placement
    /// (before v1.37) writes no message, whichever node it picks.
    fn possible(&mut self, candidates: &[Candidate]) {
        let worst: Vec<[i128; 5]> = candidates
            .iter()
            .map(|c| self.sets(c).map(Candidate::scores).min().unwrap_or(c.scores()))
            .collect();
        // The two highest "worst" scores, so each node can be compared with the best of the others.
        let mut top: Vec<usize> = (0..worst.len()).collect();
        top.sort_by(|&a, &b| worst[b].cmp(&worst[a]));
        let bar = |i: usize| top.iter().find(|&&j| j != i).map(|&j| worst[j]);
        let mut nodes = Vec::new();
        let mut messages: Vec<String> = Vec::new();
        let mut capped = false;
        for (i, c) in candidates.iter().enumerate() {
            let bar = bar(i);
            let mut picked = false;
            for set in self.sets(c) {
                if bar.is_some_and(|b| set.scores() < b) {
                    continue;
                }
                picked = true;
                if !self.reports_placement {
                    continue;
                }
                let message = found_placement_message(&c.node, set.victims.len());
                if messages.contains(&message) {
                    continue;
                }
                if messages.len() > MAX_MESSAGES {
                    capped = true;
                } else {
                    messages.push(message);
                }
            }
            if picked {
                nodes.push(c.node.clone());
            }
        }
        self.possible_nodes = nodes;
        self.possible_messages = messages;
        self.messages_capped = capped;
    }
}

/// A victim set in a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VictimSetView {
    /// The victims (`namespace/name`), most important first.
    pub victims: Vec<String>,
    /// How many of them violate a PodDisruptionBudget.
    pub pdb_violations: i64,
}

impl VictimSetView {
    /// The view of one victim set.
    pub fn new(set: &Candidate) -> Self {
        VictimSetView {
            victims: set.victims.iter().map(|v| v.pod.key()).collect(),
            pdb_violations: set.num_pdb_violations,
        }
    }
}

impl OrderTies {
    /// The alternative victim sets of a node, as reported, and whether they were capped.
    pub fn views(&self, node: &str) -> (Vec<VictimSetView>, bool) {
        self.by_node.get(node).map_or((Vec::new(), false), |a| {
            (a.sets.iter().map(VictimSetView::new).collect(), a.capped)
        })
    }

    /// One sentence per part of the outcome that kube-scheduler leaves to chance, for a plan on `node`;
    /// `tied` are the candidates tied on every criterion. Empty when the outcome is determined.
    pub fn random_parts(&self, tied: &[String], node: Option<&str>) -> Vec<String> {
        let mut parts = Vec::new();
        if self.possible_nodes.len() > 1 {
            let cause = if self.possible_nodes.iter().all(|n| tied.contains(n)) {
                "they tie on every criterion"
            } else {
                "which victims it spares on some of them changes how they rank"
            };
            // Before v1.37 the message does not name the node: only the nomination does.
            let naming = if self.reports_placement {
                "its message (\"on node X\") and the preemptor's nominatedNodeName name"
            } else {
                "the preemptor's nominatedNodeName names"
            };
            parts.push(format!(
                "{NODE_PART}: kube-scheduler picks any of {} ({cause}); {naming} the node it picks",
                self.possible_nodes.join(", ")
            ));
        }
        if let Some(alternatives) = node.and_then(|n| self.by_node.get(n).map(|a| (n, a))) {
            let (node, a) = alternatives;
            parts.push(format!(
                "{VICTIMS_PART}: on {node}, pods of equal priority and equal (or no) status.startTime are \
                 equally important and kube-scheduler spares the first it meets, in an order that is not \
                 stable: {}{} victim sets are possible, the planned one and alternative_victims",
                if a.capped { "at least " } else { "" },
                a.sets.len() + 1
            ));
        }
        if self.unexplored > 0 {
            parts.push(format!(
                "{NODE_PART}: {} more candidate(s) with equally important victims were not searched for other \
                 victim sets (only the best {MAX_EXPLORED_CANDIDATES} are): possible_nodes may miss some of \
                 them",
                self.unexplored
            ));
        }
        if self.possible_messages.len() > 1 {
            parts.push(format!(
                "{MESSAGE_PART}: kube-scheduler writes message or one of message_alternatives{}",
                if self.messages_capped {
                    " (capped: there are more)"
                } else {
                    ""
                }
            ));
        }
        parts
    }
}

/// How [`OrderTies::random_parts`] names the chosen node as random.
pub const NODE_PART: &str = "node";
/// How [`OrderTies::random_parts`] names the victims as random.
pub const VICTIMS_PART: &str = "victims";
/// How [`OrderTies::random_parts`] names the message as random.
pub const MESSAGE_PART: &str = "message";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_order_within_groups_is_listed_once() {
        // Groups 0..2 and 3..5 (index 2 alone): 2 × 6 = 12 orders, 11 besides the identity.
        let (all, every) = orders(6, &[0..2, 3..6], 24);
        assert!(every);
        assert_eq!(all.len(), 11);
        let mut distinct = all.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 11);
        assert!(
            all.iter()
                .all(|o| o[2] == 2 && o[..2].contains(&0) && o[..2].contains(&1))
        );
        assert!(!all.contains(&(0..6).collect::<Vec<_>>()));
    }

    #[test]
    fn too_many_orders_are_sampled_within_the_budget() {
        let one_group = [Range { start: 0, end: 10 }];
        let (sample, every) = orders(10, &one_group, 24);
        assert!(!every);
        assert!(sample.len() <= 24);
        // Each pod but the first of the planned order is tried first.
        let firsts: std::collections::BTreeSet<usize> = sample.iter().map(|o| o[0]).collect();
        assert_eq!(firsts, (1..10).collect());
    }
}

#[cfg(test)]
mod dry_run_tests {
    use k8s_openapi::api::core::v1::{Node, Pod};
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::preemption::tests_support::{framework, snapshot_with};
    use crate::preemption::{DryRunOptions, PreemptionResult, dry_run};
    use crate::schedule::{ScheduleOptions, schedule_cycle};
    use crate::testing::{PodBuilder, node, pod};

    fn run(nodes: Vec<Node>, pods: Vec<Pod>, preemptor: PodBuilder) -> PreemptionResult {
        let fwk = framework(snapshot_with(nodes, pods, vec![]));
        let preemptor = preemptor.info();
        let cycle = schedule_cycle(&fwk, &preemptor, ScheduleOptions::default());
        let options = DryRunOptions {
            now: Some(Timestamp::from_second(2_000_000_000).unwrap()),
            ..Default::default()
        };
        dry_run(&fwk, &preemptor, &cycle.node_statuses, &cycle.state, &options)
    }

    fn on(name: &str, node: &str, cpu: &str, priority: i32) -> PodBuilder {
        pod(name).cpu(cpu).priority(priority).node(node)
    }

    fn placement(node: &str, victims: usize) -> String {
        format!("preemption: {}", found_placement_message(node, victims))
    }

    /// What a case expects of the report.
    struct Want {
        node: &'static str,
        victims: Vec<&'static str>,
        alternatives: Vec<Vec<&'static str>>,
        capped: bool,
        possible_nodes: Vec<&'static str>,
        message_alternatives: Vec<String>,
        random: Vec<&'static str>,
    }

    #[test]
    fn outcomes_that_rest_on_an_arbitrary_order_are_reported() {
        let n = |name: &str, cpu: &str| node(name).cpu(cpu).memory("8Gi").obj();
        let ten_equal: Vec<Pod> = (0..10)
            .map(|i| on(&format!("r{i}"), "n1", "1", 1).obj())
            .collect();
        type Case = (&'static str, Vec<Node>, Vec<Pod>, PodBuilder, Want);
        let cases: Vec<Case> = vec![
            (
                "equal priority, no start times: either pod may be spared",
                vec![n("n1", "4")],
                vec![on("w1", "n1", "2", 1).obj(), on("w2", "n1", "2", 1).obj()],
                pod("p").cpu("2").priority(100),
                Want {
                    node: "n1",
                    victims: vec!["w2"],
                    alternatives: vec![vec!["default/w1"]],
                    capped: false,
                    possible_nodes: vec!["n1"],
                    message_alternatives: vec![],
                    random: vec![VICTIMS_PART],
                },
            ),
            (
                "equal priority, identical start times: either pod may be spared",
                vec![n("n1", "4")],
                vec![
                    on("w1", "n1", "2", 1).start_time(500).obj(),
                    on("w2", "n1", "2", 1).start_time(500).obj(),
                ],
                pod("p").cpu("2").priority(100),
                Want {
                    node: "n1",
                    victims: vec!["w2"],
                    alternatives: vec![vec!["default/w1"]],
                    capped: false,
                    possible_nodes: vec!["n1"],
                    message_alternatives: vec![],
                    random: vec![VICTIMS_PART],
                },
            ),
            (
                "distinct start times: the later-started pod goes, determined",
                vec![n("n1", "4")],
                vec![
                    on("w1", "n1", "2", 1).start_time(200).obj(),
                    on("w2", "n1", "2", 1).start_time(100).obj(),
                ],
                pod("p").cpu("2").priority(100),
                Want {
                    node: "n1",
                    victims: vec!["w1"],
                    alternatives: vec![],
                    capped: false,
                    possible_nodes: vec!["n1"],
                    message_alternatives: vec![],
                    random: vec![],
                },
            ),
            (
                "an unstarted pod is newer than a started one: determined",
                vec![n("n1", "4")],
                vec![
                    on("w1", "n1", "2", 1).obj(),
                    on("w2", "n1", "2", 1).start_time(100).obj(),
                ],
                pod("p").cpu("2").priority(100),
                Want {
                    node: "n1",
                    victims: vec!["w1"],
                    alternatives: vec![],
                    capped: false,
                    possible_nodes: vec!["n1"],
                    message_alternatives: vec![],
                    random: vec![],
                },
            ),
            (
                "the order decides the victim count, and so the message",
                vec![n("n1", "4")],
                vec![
                    on("a", "n1", "2", 1).obj(),
                    on("b", "n1", "1", 1).obj(),
                    on("c", "n1", "1", 1).obj(),
                ],
                pod("p").cpu("2").priority(100),
                Want {
                    node: "n1",
                    victims: vec!["b", "c"],
                    alternatives: vec![vec!["default/a"]],
                    capped: false,
                    possible_nodes: vec!["n1"],
                    message_alternatives: vec![placement("n1", 1)],
                    random: vec![VICTIMS_PART, MESSAGE_PART],
                },
            ),
            (
                "candidates tied on every criterion: the message may name either",
                vec![n("b", "2"), n("a", "2")],
                vec![on("x", "b", "2", 1).obj(), on("y", "a", "2", 1).obj()],
                pod("p").cpu("1").priority(10),
                Want {
                    node: "a",
                    victims: vec!["y"],
                    alternatives: vec![],
                    capped: false,
                    possible_nodes: vec!["a", "b"],
                    message_alternatives: vec![placement("b", 1)],
                    random: vec![NODE_PART, MESSAGE_PART],
                },
            ),
            (
                "a node that wins only when other pods are spared may be picked too",
                vec![n("n1", "4"), n("n2", "4")],
                vec![
                    on("a", "n1", "2", 1).obj(),
                    on("b", "n1", "1", 1).obj(),
                    on("c", "n1", "1", 1).obj(),
                    on("x", "n2", "3", 1).start_time(100).obj(),
                    on("y", "n2", "1", 1).start_time(200).obj(),
                ],
                pod("p").cpu("2").priority(100),
                Want {
                    // Planned: n1 loses b and c (2 victims) against n2's one; sparing b and c instead of
                    // a leaves n1 one victim that started later than n2's, and n1 wins.
                    node: "n2",
                    victims: vec!["x"],
                    alternatives: vec![],
                    capped: false,
                    possible_nodes: vec!["n2", "n1"],
                    message_alternatives: vec![placement("n1", 1)],
                    random: vec![NODE_PART, MESSAGE_PART],
                },
            ),
            (
                "ten equal pods: the alternatives are capped",
                vec![n("n1", "10")],
                ten_equal,
                pod("p").cpu("1").priority(100),
                Want {
                    node: "n1",
                    victims: vec!["r9"],
                    alternatives: (1..=8)
                        .map(|r| match r {
                            1 => vec!["default/r0"],
                            2 => vec!["default/r1"],
                            3 => vec!["default/r2"],
                            4 => vec!["default/r3"],
                            5 => vec!["default/r4"],
                            6 => vec!["default/r5"],
                            7 => vec!["default/r6"],
                            _ => vec!["default/r7"],
                        })
                        .collect(),
                    capped: true,
                    possible_nodes: vec!["n1"],
                    message_alternatives: vec![],
                    random: vec![VICTIMS_PART],
                },
            ),
        ];
        for (name, nodes, pods, preemptor, want) in cases {
            let r = run(nodes, pods, preemptor);
            assert_eq!(r.node.as_deref(), Some(want.node), "{name}");
            let victims: Vec<&str> = r.victims.iter().map(|v| v.name.as_str()).collect();
            assert_eq!(victims, want.victims, "{name}");
            let mut alternatives: Vec<Vec<String>> =
                r.alternative_victims.iter().map(|s| s.victims.clone()).collect();
            alternatives.sort();
            assert_eq!(alternatives, want.alternatives, "{name}");
            assert_eq!(r.alternative_victims_capped, want.capped, "{name}");
            assert_eq!(r.possible_nodes, want.possible_nodes, "{name}");
            assert_eq!(r.message_alternatives, want.message_alternatives, "{name}");
            let random: Vec<&str> = r
                .random_outcome
                .iter()
                .map(|s| s.split(':').next().unwrap_or(""))
                .collect();
            assert_eq!(random, want.random, "{name}: {:?}", r.random_outcome);
            // The planned node's candidate carries the same alternatives.
            let planned = r
                .candidates
                .iter()
                .find(|c| c.node == want.node)
                .expect("candidate");
            assert_eq!(planned.alternative_victims, r.alternative_victims, "{name}");
        }
    }

    #[test]
    fn candidates_beyond_the_search_bound_are_counted() {
        let total = MAX_EXPLORED_CANDIDATES + 2;
        let nodes: Vec<Node> = (0..total)
            .map(|i| node(&format!("n{i:03}")).cpu("2").memory("4Gi").obj())
            .collect();
        let pods: Vec<Pod> = (0..total)
            .flat_map(|i| {
                let n = format!("n{i:03}");
                [
                    on(&format!("a{i}"), &n, "1", 1).obj(),
                    on(&format!("b{i}"), &n, "1", 1).obj(),
                ]
            })
            .collect();
        let r = run(nodes, pods, pod("p").cpu("1").priority(100));
        assert_eq!(r.candidates.len(), total);
        let searched = r
            .candidates
            .iter()
            .filter(|c| !c.alternative_victims.is_empty())
            .count();
        assert_eq!(searched, MAX_EXPLORED_CANDIDATES);
        assert!(
            r.random_outcome
                .iter()
                .any(|s| s.starts_with("node: 2 more candidate(s)")),
            "{:?}",
            r.random_outcome
        );
    }
}
