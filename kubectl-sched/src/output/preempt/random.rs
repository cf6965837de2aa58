//! What `preempt`'s table says of the parts of the outcome kube-scheduler leaves to chance: the node
//! among tied candidates, and which of equally important pods it spares (see
//! `sched_core::preemption::ties`).

use sched_core::engine::{MAX_ORDERS_PER_NODE, MAX_VICTIM_SETS, PreemptionResult};

use crate::diagnosis::hints::{MAX_NAMES, name_list};

/// Marks a candidate whose victims are random in the candidate table.
pub const RANDOM_VICTIMS_MARK: &str = "~";

/// The footnote of the candidate table when some candidate's victims are random.
pub fn candidates_footnote(p: &PreemptionResult) -> String {
    if p.candidates.iter().all(|c| c.alternative_victims.is_empty()) {
        return String::new();
    }
    format!(
        "{RANDOM_VICTIMS_MARK}: which pods go there is random: kube-scheduler spares equally important pods (same \
         priority, equal or no start time) in an order that is not stable (other victim sets: -o json, \
         candidates[].alternative_victims).\n"
    )
}

/// After the chosen node: the other nodes kube-scheduler may pick, and the messages it may write then.
pub fn node_note(p: &PreemptionResult) -> String {
    let mut out = String::new();
    if p.possible_nodes.len() > 1 {
        let nodes = name_list(&p.possible_nodes, MAX_NAMES);
        if p.possible_nodes.iter().all(|n| p.tied_nodes.contains(n)) {
            out.push_str(&format!(
                "Its message and the pod's nominatedNodeName name whichever of {nodes} it picks.\n"
            ));
        } else {
            out.push_str(&format!(
                "Random: kube-scheduler may pick any of {nodes} (which victims it spares changes how the \
                 candidates rank); its message and the pod's nominatedNodeName name the node it picks.\n"
            ));
        }
    }
    if !p.message_alternatives.is_empty() {
        out.push_str("Instead of the message above, kube-scheduler may write:\n");
        for m in &p.message_alternatives {
            out.push_str(&format!("  {m}\n"));
        }
    }
    out
}

/// After the victim table: the other victim sets on the chosen node.
pub fn victims_note(p: &PreemptionResult) -> String {
    if p.alternative_victims.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "\nRandom: these victims are one of {}{} possible sets. kube-scheduler spares equally important pods \
         (same priority, equal or no start time) in the order it meets them, which is not stable; it may \
         take instead:\n",
        if p.alternative_victims_capped {
            "at least "
        } else {
            ""
        },
        p.alternative_victims.len() + 1
    );
    for set in &p.alternative_victims {
        out.push_str(&format!(
            "  {}{}\n",
            set.victims.join(", "),
            if set.pdb_violations > 0 {
                format!(" ({} PDB violation(s))", set.pdb_violations)
            } else {
                String::new()
            }
        ));
    }
    if p.alternative_victims_capped {
        out.push_str(&format!(
            "(The search stops at {MAX_VICTIM_SETS} other sets or {MAX_ORDERS_PER_NODE} orders: there may be \
             more.)\n"
        ));
    }
    out
}
