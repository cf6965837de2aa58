//! NodePorts explained: the host ports the pod wants that the node's pods hold, and which pods hold
//! them (deleting or moving them is the change; so would dropping the pod's hostPort be, but the
//! holder is what the user needs named).

use super::change::Change;
use super::finding::{Context, Detail, Explained, ReasonCode};
use crate::NodeInfo;
use crate::snapshot::HostPortInfo;

pub(crate) fn explain(ctx: &Context<'_>, node: &NodeInfo) -> Vec<Explained> {
    let mut ports = Vec::new();
    let mut holders: Vec<String> = Vec::new();
    for (ip, protocol, port) in &ctx.pod.host_ports {
        let mut held = false;
        for other in &node.pods {
            let mut in_use = HostPortInfo::default();
            for (ip, protocol, port) in &other.host_ports {
                in_use.add(ip, protocol, *port);
            }
            if in_use.check_conflict(ip, protocol, *port) {
                held = true;
                if !holders.contains(&other.key()) {
                    holders.push(other.key());
                }
            }
        }
        if held {
            let ip = if ip.is_empty() { "0.0.0.0" } else { ip.as_str() };
            let protocol = if protocol.is_empty() {
                "TCP"
            } else {
                protocol.as_str()
            };
            ports.push(format!("{protocol}/{ip}:{port}"));
        }
    }
    if holders.is_empty() {
        return Vec::new();
    }
    vec![Explained {
        reason: ReasonCode::HostPortInUse,
        message: format!(
            "host port {} is held by pod {}",
            ports.join(", "),
            holders.join(", ")
        ),
        detail: Detail::Ports {
            ports,
            holders: holders.clone(),
        },
        changes: vec![Change::DeletePods { pods: holders }],
    }]
}
