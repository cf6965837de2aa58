//! NodeUnschedulable: keeps pods off nodes with `spec.unschedulable` (cordoned), unless the pod
//! tolerates the `node.kubernetes.io/unschedulable:NoSchedule` taint.
//!
//! Upstream's PreFilter only Skips for pods whose resize is deferred, under the alpha
//! `InPlacePodVerticalScalingSchedulerPreemption` gate (off by default in v1.37), so here it always
//! succeeds without narrowing the node set.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Taint;

use crate::framework::FeatureGates;
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::{FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult};
use crate::framework::runtime::{Handle, PluginError};
use crate::framework::status::Status;
use crate::plugins::helper::taints::{
    EFFECT_NO_SCHEDULE, TAINT_NODE_UNSCHEDULABLE, pod_tolerations, tolerations_tolerate_taint,
};
use crate::plugins::names;
use crate::snapshot::{NodeInfo, PodInfo};

/// The plugin's registry name.
pub(crate) const NAME: &str = names::NODE_UNSCHEDULABLE;

/// Filter reason for a cordoned node the pod does not tolerate.
pub(crate) const ERR_REASON_UNSCHEDULABLE: &str = "node(s) were unschedulable";

/// The NodeUnschedulable plugin. `Default` is v1.37.1's (comparison operators off).
#[derive(Debug, Default)]
pub(crate) struct NodeUnschedulable {
    /// `TaintTolerationComparisonOperators`, passed to the toleration check as upstream does. The
    /// cordon taint has no value, so an `Lt`/`Gt` toleration of it never matches either way.
    enable_taint_toleration_comparison_operators: bool,
}

impl Plugin for NodeUnschedulable {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for NodeUnschedulable {
    fn pre_filter(
        &self,
        _state: &mut CycleState,
        _pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        (None, Status::success())
    }
}

impl FilterPlugin for NodeUnschedulable {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let unschedulable = node
            .node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false);
        if !unschedulable {
            return Status::success();
        }
        let cordon = Taint {
            key: TAINT_NODE_UNSCHEDULABLE.to_string(),
            effect: EFFECT_NO_SCHEDULE.to_string(),
            value: None,
            time_added: None,
        };
        if tolerations_tolerate_taint(
            pod_tolerations(&pod.pod),
            &cordon,
            self.enable_taint_toleration_comparison_operators,
        ) {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON_UNSCHEDULABLE)
        }
    }
}

/// Builds the plugin (it takes no args).
pub(crate) fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Handle,
    features: &FeatureGates,
) -> Result<Arc<dyn Plugin>, PluginError> {
    Ok(Arc::new(NodeUnschedulable {
        enable_taint_toleration_comparison_operators: features.taint_toleration_comparison_operators,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::status::Code;
    use crate::testing::{node, pod, toleration};

    #[test]
    fn cordoned_nodes_need_a_toleration() {
        let cases = [
            ("schedulable node", pod("p"), node("n1"), None),
            (
                "cordoned node",
                pod("p"),
                node("n1").unschedulable(),
                Some(ERR_REASON_UNSCHEDULABLE),
            ),
            (
                "tolerates the cordon",
                pod("p").toleration(toleration(TAINT_NODE_UNSCHEDULABLE, "Exists", "", "NoSchedule")),
                node("n1").unschedulable(),
                None,
            ),
            (
                "tolerates everything",
                pod("p").toleration(toleration("", "Exists", "", "")),
                node("n1").unschedulable(),
                None,
            ),
            (
                "wrong effect",
                pod("p").toleration(toleration(TAINT_NODE_UNSCHEDULABLE, "Exists", "", "NoExecute")),
                node("n1").unschedulable(),
                Some(ERR_REASON_UNSCHEDULABLE),
            ),
        ];
        for (name, p, n, want) in cases {
            let p = p.info();
            let mut state = CycleState::new();
            let (result, s) = NodeUnschedulable::default().pre_filter(&mut state, &p, &[]);
            assert!(result.is_none() && s.is_success(), "{name}: prefilter");
            let s = NodeUnschedulable::default().filter(&state, &p, &n.info_with(vec![]));
            match want {
                None => assert!(s.is_success(), "{name}: {s:?}"),
                Some(reason) => {
                    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{name}");
                    assert_eq!(s.reasons(), [reason.to_string()], "{name}");
                }
            }
        }
    }
}
