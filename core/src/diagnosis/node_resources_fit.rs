//! NodeResourcesFit explained: what the node lacks of each resource (as `explain` has always said),
//! and the request that would fit into what it has free.

use super::change::Change;
use super::finding::{Context, Detail, Explained, ReasonCode};
use crate::NodeInfo;
use crate::plugins::helper::device_classes::DeviceClassResolver;
use crate::plugins::node_resources::fit::{Shortfall, shortfall_with_dra};
use crate::resource::{PODS, format_amount};

/// `needs 300m more cpu (requests 2, 1700m free)`, or the pod-count and never-fits variants.
pub fn describe_shortfall(s: &Shortfall) -> String {
    if s.resource == PODS {
        return "has no room for another pod (Too many pods)".to_string();
    }
    if s.can_never_fit() {
        return format!(
            "can never fit: requests {} {}, {} allocatable",
            format_amount(&s.resource, s.requested),
            s.resource,
            format_amount(&s.resource, s.allocatable)
        );
    }
    let free = if s.free <= 0 {
        "none free".to_string()
    } else {
        format!("{} free", format_amount(&s.resource, s.free))
    };
    format!(
        "needs {} more {} (requests {}, {free})",
        format_amount(&s.resource, s.missing()),
        s.resource,
        format_amount(&s.resource, s.requested)
    )
}

pub(crate) fn explain(ctx: &Context<'_>, node: &NodeInfo, dra: &DeviceClassResolver) -> Vec<Explained> {
    let short = shortfall_with_dra(node, ctx.pod, Some(dra), ctx.features);
    if short.is_empty() {
        // Rejected only because of pods nominated to the node: nothing to add up.
        return Vec::new();
    }
    let too_many_pods = short.iter().any(|s| s.resource == PODS);
    // Lowering helps only where something is free and the pod count is not the limit; one change
    // lowers every short resource to what this node has free.
    let changes = if too_many_pods || short.iter().any(|s| s.free <= 0) {
        Vec::new()
    } else {
        short
            .iter()
            .map(|s| Change::LowerRequest {
                resource: s.resource.clone(),
                to: s.free,
            })
            .collect::<Vec<_>>()
    };
    let changes = match changes.len() {
        0 => Vec::new(),
        1 => changes,
        _ => vec![Change::All { changes }],
    };
    vec![Explained {
        reason: if too_many_pods {
            ReasonCode::TooManyPods
        } else {
            ReasonCode::InsufficientResource
        },
        message: short
            .iter()
            .map(describe_shortfall)
            .collect::<Vec<_>>()
            .join(", "),
        detail: Detail::Resources { shortfalls: short },
        changes,
    }]
}
