//! NodeUnschedulable explained: the node is cordoned; uncordoning it is the change (the node
//! lifecycle controller's `node.kubernetes.io/unschedulable` taint goes with the cordon).

use super::change::Change;
use super::finding::{Detail, Explained, ReasonCode};
use crate::NodeInfo;

pub(crate) fn explain(node: &NodeInfo) -> Vec<Explained> {
    vec![Explained {
        reason: ReasonCode::NodeCordoned,
        message: "cordoned (spec.unschedulable)".to_string(),
        detail: Detail::Cordon,
        changes: vec![Change::Uncordon {
            node: node.name().to_string(),
        }],
    }]
}
