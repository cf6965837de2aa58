//! PrioritySort: the queue order — higher priority first, then the pod that has waited longer.
//!
//! kube-scheduler breaks priority ties with the time the pod was (re)added to the scheduling queue.
//! The engine has no queue, so `metadata.creationTimestamp` stands in for that timestamp: it is the
//! queue time of a pod that has never been retried, and a stable order for the rest. A pod without a
//! creation timestamp sorts first among its priority, as Go's zero time would.

use std::sync::Arc;

use crate::framework::FeatureGates;
use crate::framework::interface::{Plugin, QueueSortPlugin};
use crate::framework::runtime::{Handle, PluginError};
use crate::plugins::names;
use crate::snapshot::PodInfo;

/// The plugin's registry name.
pub(crate) const NAME: &str = names::PRIORITY_SORT;

/// The PrioritySort plugin.
#[derive(Debug, Default)]
pub(crate) struct PrioritySort;

impl Plugin for PrioritySort {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
        Some(self)
    }
}

impl QueueSortPlugin for PrioritySort {
    fn less(&self, a: &PodInfo, b: &PodInfo) -> bool {
        let ts = |p: &PodInfo| p.pod.metadata.creation_timestamp.as_ref().map(|t| t.0);
        a.priority > b.priority || (a.priority == b.priority && ts(a) < ts(b))
    }
}

/// Builds the plugin (it takes no args).
pub(crate) fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Handle,
    _features: &FeatureGates,
) -> Result<Arc<dyn Plugin>, PluginError> {
    Ok(Arc::new(PrioritySort))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::testing::pod;

    fn queued(priority: i32, created_secs: Option<i64>) -> PodInfo {
        pod("p")
            .priority(priority)
            .with(|p| {
                p.metadata.creation_timestamp = created_secs
                    .map(|s| Time(k8s_openapi::jiff::Timestamp::from_second(s).expect("valid time")));
            })
            .info()
    }

    #[test]
    fn higher_priority_then_older_first() {
        for (name, a, b, want) in [
            (
                "higher priority first",
                queued(10, Some(200)),
                queued(5, Some(100)),
                true,
            ),
            (
                "lower priority after",
                queued(5, Some(100)),
                queued(10, Some(200)),
                false,
            ),
            (
                "tie: older first",
                queued(5, Some(100)),
                queued(5, Some(200)),
                true,
            ),
            (
                "tie: newer after",
                queued(5, Some(200)),
                queued(5, Some(100)),
                false,
            ),
            (
                "tie: same time is not less",
                queued(5, Some(100)),
                queued(5, Some(100)),
                false,
            ),
            (
                "tie: no timestamp sorts first",
                queued(5, None),
                queued(5, Some(100)),
                true,
            ),
            (
                "tie: both without timestamp",
                queued(5, None),
                queued(5, None),
                false,
            ),
        ] {
            assert_eq!(PrioritySort.less(&a, &b), want, "{name}");
        }
    }
}
