//! TaintToleration explained: the taints the pod does not tolerate, and whether a toleration is worth
//! proposing. Taints Kubernetes owns (the control plane's, node conditions', a cloud provider's) are
//! never proposed: tolerating them puts a workload where it must not run or on a broken node.

use k8s_openapi::api::core::v1::{Taint, Toleration};

use super::change::{Change, taint_text};
use super::finding::{Context, Detail, Explained, ReasonCode};
use crate::NodeInfo;
use crate::plugins::helper::taints::{
    do_not_schedule_taints_filter, node_taints, pod_tolerations, tolerations_tolerate_taint,
};

pub use crate::plugins::helper::taints::system_taint_owner;

/// The node's NoSchedule/NoExecute taints the pod does not tolerate (TaintToleration's rejection),
/// with the `Lt`/`Gt` operators as the gate says.
pub fn untolerated_taints(node: &NodeInfo, tolerations: &[Toleration], comparison: bool) -> Vec<Taint> {
    node_taints(&node.node)
        .iter()
        .filter(|t| {
            do_not_schedule_taints_filter(t) && !tolerations_tolerate_taint(tolerations, t, comparison)
        })
        .cloned()
        .collect()
}

/// One finding per untolerated taint; the change tolerates every one of the node's taints at once (a
/// node with two is opened by neither alone), and none when one of them is Kubernetes'.
pub(crate) fn explain(ctx: &Context<'_>, node: &NodeInfo) -> Vec<Explained> {
    let taints = untolerated_taints(
        node,
        pod_tolerations(&ctx.pod.pod),
        ctx.features.taint_toleration_comparison_operators,
    );
    let change = taints
        .iter()
        .all(|t| system_taint_owner(&t.key).is_none())
        .then(|| Change::AddToleration {
            taints: taints.clone(),
        });
    taints
        .into_iter()
        .map(|taint| {
            let text = taint_text(&taint);
            let owner = system_taint_owner(&taint.key);
            match owner {
                Some(owner) => Explained {
                    reason: ReasonCode::SystemTaintNotTolerated,
                    message: format!("untolerated taint {text} (the {owner}'s: not one to tolerate)"),
                    detail: Detail::Taint {
                        taint: text,
                        owner: Some(owner.to_string()),
                    },
                    changes: Vec::new(),
                },
                None => Explained {
                    reason: ReasonCode::TaintNotTolerated,
                    message: format!("untolerated taint {text}"),
                    detail: Detail::Taint {
                        taint: text,
                        owner: None,
                    },
                    changes: change.clone().into_iter().collect(),
                },
            }
        })
        .collect()
}
