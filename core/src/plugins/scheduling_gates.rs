//! SchedulingGates: keeps a pod out of the active queue while it has `spec.schedulingGates`, so
//! `explain` can say the scheduler has not even tried it yet.

use std::sync::Arc;

use crate::framework::FeatureGates;
use crate::framework::interface::{Plugin, PreEnqueuePlugin};
use crate::framework::runtime::{Handle, PluginError};
use crate::framework::status::{Code, Status};
use crate::plugins::names;
use crate::snapshot::PodInfo;

/// The plugin's registry name.
pub(crate) const NAME: &str = names::SCHEDULING_GATES;

/// The reason prefix; the gate names follow as Go prints a `[]string` (`[g1 g2]`).
pub const ERR_REASON_WAITING_FOR_GATES: &str = "waiting for scheduling gates";

/// The PodScheduled condition message the API server gives a pod created with scheduling gates
/// (reason `SchedulingGated`; `applySchedulingGatedCondition` in pkg/registry/core/pod/strategy.go):
/// what `kubectl describe pod` shows, so what explain's and simulate's headlines say for a gated pod.
pub const SCHEDULING_GATED_MESSAGE: &str = "Scheduling is blocked due to non-empty scheduling gates";

/// The SchedulingGates plugin.
#[derive(Debug, Default)]
pub(crate) struct SchedulingGates;

impl Plugin for SchedulingGates {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        Some(self)
    }
}

impl PreEnqueuePlugin for SchedulingGates {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        let gates = pod
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduling_gates.as_deref())
            .unwrap_or_default();
        if gates.is_empty() {
            return Status::success();
        }
        let names: Vec<&str> = gates.iter().map(|g| g.name.as_str()).collect();
        Status::new(
            Code::UnschedulableAndUnresolvable,
            format!("{ERR_REASON_WAITING_FOR_GATES}: [{}]", names.join(" ")),
        )
    }
}

/// Builds the plugin (it takes no args).
pub(crate) fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Handle,
    _features: &FeatureGates,
) -> Result<Arc<dyn Plugin>, PluginError> {
    Ok(Arc::new(SchedulingGates))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PodSchedulingGate;

    use super::*;
    use crate::testing::pod;

    #[test]
    fn gates_keep_the_pod_out_of_the_queue() {
        for (name, gates, want) in [
            ("no gates", None, None),
            ("empty list", Some(vec![]), None),
            (
                "one gate",
                Some(vec!["g1"]),
                Some("waiting for scheduling gates: [g1]"),
            ),
            (
                "two gates in order",
                Some(vec!["g1", "g2"]),
                Some("waiting for scheduling gates: [g1 g2]"),
            ),
        ] {
            let p = pod("p")
                .with(|p| {
                    if let Some(spec) = p.spec.as_mut() {
                        spec.scheduling_gates = gates.map(|g: Vec<&str>| {
                            g.into_iter()
                                .map(|n| PodSchedulingGate { name: n.to_string() })
                                .collect()
                        });
                    }
                })
                .info();
            let s = SchedulingGates.pre_enqueue(&p);
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
