//! VolumeZone explained: the PersistentVolume of the pod whose zone (or region) label the node does
//! not match, with both values. The volume cannot move; the pod can only go where it is, so no change
//! is proposed (explain cannot make a node in the volume's zone): the finding says so in words.

use super::finding::{Context, Detail, Explained, ReasonCode};
use crate::NodeInfo;
use crate::plugins::volume_zone::{PRE_FILTER_STATE_KEY, zone_conflict};

pub(crate) fn explain(ctx: &Context<'_>, node: &NodeInfo) -> Vec<Explained> {
    let Some(state) = ctx.state.read(&PRE_FILTER_STATE_KEY) else {
        return Vec::new();
    };
    let Some((topology, node_value)) = zone_conflict(&state.pod_pv_topologies, node.labels()) else {
        return Vec::new();
    };
    let wanted: Vec<String> = topology.values.iter().cloned().collect();
    let on_node = match &node_value {
        Some(value) => format!("the node has {value}"),
        None => "the node has no such label".to_string(),
    };
    vec![Explained {
        reason: ReasonCode::VolumeZoneConflict,
        message: format!(
            "persistentvolume {} is in {} {}; {on_node}: only a node in {} can run the pod (a bound \
             volume does not move)",
            topology.pv_name,
            topology.key,
            wanted.join(", "),
            wanted.join(" or ")
        ),
        detail: Detail::VolumeZone {
            volume: topology.pv_name.clone(),
            key: topology.key.clone(),
            volume_values: wanted,
            node_value,
        },
        changes: Vec::new(),
    }]
}
