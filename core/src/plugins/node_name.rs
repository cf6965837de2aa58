//! NodeName: a pod with `spec.nodeName` fits only that node. From v1.37 PreFilter narrows the node
//! set to it, so the other nodes are never filtered (the FitError counts them as `node(s) didn't
//! satisfy plugin(s) [NodeName]`); up to v1.36 the plugin has no PreFilter and Filter rejects each
//! other node with `node(s) didn't match the requested node name`
//! (`ReleaseChanges::node_name_pre_filter`).

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::framework::FeatureGates;
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::{FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult};
use crate::framework::runtime::{Handle, PluginError};
use crate::framework::status::Status;
use crate::plugins::names;
use crate::snapshot::{NodeInfo, PodInfo};

/// The plugin's registry name.
pub(crate) const NAME: &str = names::NODE_NAME;

/// Filter reason for a node other than the requested one.
pub(crate) const ERR_REASON: &str = "node(s) didn't match the requested node name";

/// The NodeName plugin.
#[derive(Debug, Default)]
pub(crate) struct NodeName {
    /// The release's plugin has a PreFilter (v1.37 and later).
    has_pre_filter: bool,
}

/// Go's `nodename.Fits`: no node name requested, or this is the node.
pub(crate) fn fits(pod: &PodInfo, node: &NodeInfo) -> bool {
    let wanted = pod.node_name();
    wanted.is_empty() || wanted == node.name()
}

impl Plugin for NodeName {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        if self.has_pre_filter { Some(self) } else { None }
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for NodeName {
    fn pre_filter(
        &self,
        _state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        let wanted = pod.node_name();
        if wanted.is_empty() {
            return (None, Status::success());
        }
        let result = PreFilterResult {
            node_names: Some(BTreeSet::from([wanted.to_string()])),
        };
        (Some(result), Status::success())
    }
}

impl FilterPlugin for NodeName {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if fits(pod, node) {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON)
        }
    }
}

/// Builds the plugin (it takes no args).
pub(crate) fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Handle,
    features: &FeatureGates,
) -> Result<Arc<dyn Plugin>, PluginError> {
    Ok(Arc::new(NodeName {
        has_pre_filter: features.changes.node_name_pre_filter,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::status::Code;
    use crate::testing::{node, pod};

    #[test]
    fn only_the_requested_node_fits() {
        for (name, p, node_name, want_prefilter, want_reason) in [
            ("no node name", pod("p"), "n1", None, None),
            ("requested node", pod("p").node("n1"), "n1", Some("n1"), None),
            (
                "other node",
                pod("p").node("n2"),
                "n1",
                Some("n2"),
                Some(ERR_REASON),
            ),
        ] {
            let p = p.info();
            let mut state = CycleState::new();
            let plugin = NodeName { has_pre_filter: true };
            let (result, s) = plugin.pre_filter(&mut state, &p, &[]);
            assert!(s.is_success(), "{name}");
            let want_nodes = want_prefilter.map(|n: &str| BTreeSet::from([n.to_string()]));
            assert_eq!(result.and_then(|r| r.node_names), want_nodes, "{name}: prefilter");

            let s = plugin.filter(&state, &p, &node(node_name).info_with(vec![]));
            match want_reason {
                None => assert!(s.is_success(), "{name}: {s:?}"),
                Some(reason) => {
                    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{name}");
                    assert_eq!(s.reasons(), [reason.to_string()], "{name}");
                }
            }
        }
    }

    /// v1.37 has the PreFilter, v1.36 and earlier do not (Filter alone rejects the other nodes).
    #[test]
    fn pre_filter_follows_the_release() {
        use crate::features::KubeVersion;
        let handle = Handle {
            snapshot: Arc::new(crate::testing::snapshot(vec![], vec![])),
        };
        let p = pod("p").node("n2").info();
        for (version, has_pre_filter) in [
            (KubeVersion::new(33, 13), false),
            (KubeVersion::new(36, 3), false),
            (KubeVersion::new(37, 1), true),
        ] {
            let plugin = new(None, &handle, &FeatureGates::for_version(version)).expect("plugin");
            assert_eq!(plugin.as_pre_filter().is_some(), has_pre_filter, "{version}");
            let s = plugin.as_filter().expect("filter").filter(
                &CycleState::new(),
                &p,
                &node("n1").info_with(vec![]),
            );
            assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{version}");
            assert_eq!(s.reasons(), [ERR_REASON.to_string()], "{version}");
        }
    }
}
