//! NodePorts: a pod's host ports must be free on the node. PreFilter collects the ports once and
//! Skips the plugin for pods without host ports (most pods), so Filter never runs for them.

use std::sync::Arc;

use crate::framework::FeatureGates;
use crate::framework::cycle_state::{CycleState, StateKey};
use crate::framework::interface::{FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult};
use crate::framework::runtime::{Handle, PluginError};
use crate::framework::status::Status;
use crate::plugins::names;
use crate::snapshot::node_info::{HostPort, HostPortInfo};
use crate::snapshot::{NodeInfo, PodInfo};

/// The plugin's registry name.
pub(crate) const NAME: &str = names::NODE_PORTS;

/// Filter reason when a wanted host port is already in use.
pub(crate) const ERR_REASON: &str = "node(s) didn't have free ports for the requested pod ports";

/// The host ports (ip, protocol, port) the pod wants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PreFilterState(pub Vec<HostPort>);

/// Where PreFilter leaves the wanted ports.
pub(crate) const PRE_FILTER_STATE_KEY: StateKey<PreFilterState> = StateKey::new("PreFilterNodePorts");

/// The NodePorts plugin.
#[derive(Debug, Default)]
pub(crate) struct NodePorts;

fn fits_ports(wanted: &[HostPort], in_use: &HostPortInfo) -> bool {
    wanted
        .iter()
        .all(|(ip, protocol, port)| !in_use.check_conflict(ip, protocol, *port))
}

/// Go's `nodeports.Fits`: none of the pod's host ports conflicts with the node's used ports.
#[cfg(test)]
pub(crate) fn fits(pod: &PodInfo, node: &NodeInfo) -> bool {
    fits_ports(&pod.host_ports, &node.used_ports)
}

/// Go's queueing hint for AssignedPod/Delete (`isSchedulableAfterAssignedPodDeleted`): the deletion
/// can only help a pod this plugin rejected when the deleted pod was placed or nominated and held one
/// of the host ports the pod wants.
pub(crate) fn is_schedulable_after_assigned_pod_deleted(pod: &PodInfo, deleted: &PodInfo) -> bool {
    if deleted.node_name().is_empty() && deleted.nominated_node_name().is_empty() {
        return false;
    }
    if deleted.host_ports.is_empty() {
        return false;
    }
    let mut in_use = HostPortInfo::default();
    for (ip, protocol, port) in &deleted.host_ports {
        in_use.add(ip, protocol, *port);
    }
    !fits_ports(&pod.host_ports, &in_use)
}

impl Plugin for NodePorts {
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

impl PreFilterPlugin for NodePorts {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        if pod.host_ports.is_empty() {
            return (None, Status::skip());
        }
        state.write(&PRE_FILTER_STATE_KEY, PreFilterState(pod.host_ports.clone()));
        (None, Status::success())
    }
}

impl FilterPlugin for NodePorts {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(wanted) = state.read(&PRE_FILTER_STATE_KEY) else {
            return Status::error(format!(
                "reading {:?} from cycleState: not found",
                PRE_FILTER_STATE_KEY.name()
            ));
        };
        if fits_ports(&wanted.0, &node.used_ports) {
            Status::success()
        } else {
            Status::unschedulable(ERR_REASON)
        }
    }
}

/// Builds the plugin (it takes no args).
pub(crate) fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Handle,
    _features: &FeatureGates,
) -> Result<Arc<dyn Plugin>, PluginError> {
    Ok(Arc::new(NodePorts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::status::Code;
    use crate::testing::{PodBuilder, node, pod};

    fn run(p: PodBuilder, existing: Vec<PodBuilder>) -> (Status, Option<Status>) {
        let p = p.info();
        let n = node("n1").info_with(existing.into_iter().map(|b| b.node("n1").obj()).collect());
        let mut state = CycleState::new();
        let (result, pre) = NodePorts.pre_filter(&mut state, &p, &[]);
        assert!(result.is_none());
        if pre.is_skip() {
            return (pre, None);
        }
        let s = NodePorts.filter(&state, &p, &n);
        (pre, Some(s))
    }

    #[test]
    fn prefilter_skips_pods_without_host_ports() {
        let (pre, filter) = run(pod("p"), vec![pod("other").host_port(80, "TCP", "")]);
        assert!(pre.is_skip());
        assert!(filter.is_none());
        let container_port_only = pod("p").with(|p| {
            if let Some(spec) = p.spec.as_mut() {
                spec.containers[0].ports = Some(vec![k8s_openapi::api::core::v1::ContainerPort {
                    container_port: 8080,
                    ..Default::default()
                }]);
            }
        });
        assert!(run(container_port_only, vec![]).0.is_skip());
    }

    #[test]
    fn host_port_conflicts() {
        let cases: Vec<(&str, PodBuilder, Vec<PodBuilder>, bool)> = vec![
            ("free node", pod("p").host_port(80, "TCP", ""), vec![], true),
            (
                "same port and protocol",
                pod("p").host_port(80, "TCP", ""),
                vec![pod("o").host_port(80, "TCP", "")],
                false,
            ),
            (
                "protocol defaults to TCP",
                pod("p").host_port(80, "", ""),
                vec![pod("o").host_port(80, "TCP", "")],
                false,
            ),
            (
                "different protocol",
                pod("p").host_port(80, "UDP", ""),
                vec![pod("o").host_port(80, "TCP", "")],
                true,
            ),
            (
                "different port",
                pod("p").host_port(81, "TCP", ""),
                vec![pod("o").host_port(80, "TCP", "")],
                true,
            ),
            (
                "different specific IPs",
                pod("p").host_port(80, "TCP", "10.0.0.1"),
                vec![pod("o").host_port(80, "TCP", "10.0.0.2")],
                true,
            ),
            (
                "specific IP against bind-all",
                pod("p").host_port(80, "TCP", "10.0.0.1"),
                vec![pod("o").host_port(80, "TCP", "0.0.0.0")],
                false,
            ),
            (
                "bind-all against specific IP",
                pod("p").host_port(80, "TCP", ""),
                vec![pod("o").host_port(80, "TCP", "10.0.0.2")],
                false,
            ),
            (
                "sidecar init container ports count",
                pod("p").host_port(80, "TCP", ""),
                vec![pod("o").init_container("side", &[], true).with(|p| {
                    if let Some(c) = p
                        .spec
                        .as_mut()
                        .and_then(|s| s.init_containers.as_mut())
                        .and_then(|c| c.first_mut())
                    {
                        c.ports = Some(vec![k8s_openapi::api::core::v1::ContainerPort {
                            container_port: 80,
                            host_port: Some(80),
                            ..Default::default()
                        }]);
                    }
                })],
                false,
            ),
        ];
        for (name, p, existing, fits) in cases {
            let (pre, filter) = run(p, existing);
            assert!(pre.is_success(), "{name}: prefilter {pre:?}");
            let s = filter.expect("filter ran");
            if fits {
                assert!(s.is_success(), "{name}: {s:?}");
            } else {
                assert_eq!(s.code(), Code::Unschedulable, "{name}");
                assert_eq!(s.reasons(), [ERR_REASON.to_string()], "{name}");
            }
        }
    }

    #[test]
    fn filter_without_prefilter_state_is_an_error() {
        let p = pod("p").host_port(80, "TCP", "").info();
        let s = NodePorts.filter(&CycleState::new(), &p, &node("n1").info_with(vec![]));
        assert_eq!(s.code(), Code::Error);
        assert_eq!(
            s.message(),
            "reading \"PreFilterNodePorts\" from cycleState: not found"
        );
    }

    #[test]
    fn fits_helper_matches_filter() {
        let n = node("n1").info_with(vec![pod("o").host_port(80, "TCP", "").node("n1").obj()]);
        assert!(!fits(&pod("p").host_port(80, "TCP", "").info(), &n));
        assert!(fits(&pod("p").host_port(81, "TCP", "").info(), &n));
        assert!(fits(&pod("p").info(), &n));
    }
}
