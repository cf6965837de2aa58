//! `FitError`: the "0/N nodes are available" message a pod that fits nowhere gets, built from the
//! nodes' statuses (kube-scheduler's `framework/types.go`). The scheduling cycle and preemption both
//! write it, so it lives with the framework below them.

use std::collections::BTreeMap;

use crate::framework::interface::NodeToStatus;

/// `ErrNoNodesAvailable`'s text.
pub const NO_NODES_AVAILABLE_MSG: &str = "no nodes available to schedule pods";

/// How many nodes gave each reason (a node with several reasons counts for each), nodes without a
/// status of their own counted with the absent status: the numbers of `FitError.Error()`.
pub fn reason_histogram(num_all_nodes: usize, statuses: &NodeToStatus) -> BTreeMap<&str, usize> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for status in statuses.statuses.values() {
        for r in status.reasons() {
            *counts.entry(r.as_str()).or_insert(0) += 1;
        }
    }
    let explicit = statuses.statuses.len();
    if explicit < num_all_nodes {
        for r in statuses.absent.reasons() {
            *counts.entry(r.as_str()).or_insert(0) += num_all_nodes - explicit;
        }
    }
    counts
}

/// `FitError.Error()`: `0/N nodes are available:` then the PreFilter message, or the sorted histogram of
/// node reasons (absent nodes counted with the absent status), then the PostFilter message.
pub fn fit_error_message(
    num_all_nodes: usize,
    statuses: &NodeToStatus,
    pre_filter_msg: &str,
    post_filter_msg: &str,
) -> String {
    let mut msg = format!("0/{num_all_nodes} nodes are available:");
    if !pre_filter_msg.is_empty() {
        msg.push_str(&format!(" {pre_filter_msg}."));
    } else {
        let counts = reason_histogram(num_all_nodes, statuses);
        let mut lines: Vec<String> = counts.iter().map(|(r, c)| format!("{c} {r}")).collect();
        // Plain string sort, as Go's sort.Strings: "10 x" sorts before "2 y".
        lines.sort();
        if !lines.is_empty() {
            msg.push_str(&format!(" {}.", lines.join(", ")));
        }
    }
    if !post_filter_msg.is_empty() {
        msg.push_str(&format!(" {post_filter_msg}"));
    }
    msg
}
