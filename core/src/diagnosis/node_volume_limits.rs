//! NodeVolumeLimits explained: the CSI driver whose attach limit the pod's new volumes would pass on
//! the node, with the count already there, the pod's own and the limit (the CSINode's
//! `allocatable.count`). The count is the plugin's own; no change is proposed (the limit is the
//! node's hardware; a volume counts while it is attached, which deleting its pods does not undo
//! within a scheduling cycle): the finding says in words what would have to change.

use super::finding::{Context, Detail, Explained, ReasonCode};
use crate::NodeInfo;
use crate::plugins::node_volume_limits::{CountVerdict, volume_counter};

pub(crate) fn explain(ctx: &Context<'_>, node: &NodeInfo) -> Vec<Explained> {
    let CountVerdict::Exceeded {
        driver,
        attached,
        new,
        limit,
    } = volume_counter(ctx.snapshot, ctx.features).verdict(ctx.state, ctx.pod, node)
    else {
        return Vec::new();
    };
    vec![Explained {
        reason: ReasonCode::VolumeLimitExceeded,
        message: format!(
            "CSI driver {driver}: {attached} volume(s) on the node and the pod's {new} would pass its limit of \
             {limit}: the pod needs a node with room for {new} more of its volumes (or {} fewer attached here)",
            attached + new - limit
        ),
        detail: Detail::VolumeLimit {
            driver,
            attached,
            new,
            limit,
        },
        changes: Vec::new(),
    }]
}
