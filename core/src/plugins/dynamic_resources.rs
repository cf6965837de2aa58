//! DynamicResources (DRA). It is in v1.37.1's default profile (DRA is GA), before DefaultPreemption.
//!
//! For pods without resource claims — the only pods this engine evaluates fully — kube-scheduler's plugin
//! skips PreFilter/Filter and its PostFilter returns Unschedulable with no reasons, so it adds nothing to
//! the FailedScheduling message. Pods with claims need ResourceClaims, ResourceSlices and DeviceClasses,
//! which the snapshot does not carry: PreFilter says so as an Error instead of guessing.
//!
//! One quirk is kept on purpose: when an earlier PreFilter rejected the pod as unresolvable, this
//! plugin's PreFilter never ran, its PostFilter finds no cycle state and fails with `not found` — and
//! kube-scheduler appends that text to the FailedScheduling message.

use std::sync::Arc;

use crate::framework::cycle_state::{CycleState, StateKey};
use crate::framework::interface::*;
use crate::framework::runtime::{Framework, Handle, PluginError};
use crate::framework::status::{Code, Status};
use crate::plugins::names;
use crate::snapshot::{NodeInfo, PodInfo};

/// Plugin name.
pub const NAME: &str = names::DYNAMIC_RESOURCES;
/// Why a pod with resource claims cannot be evaluated here.
pub const ERR_CLAIMS_NOT_SUPPORTED: &str =
    "pod uses resource claims (DynamicResourceAllocation), which kubectl-sched does not evaluate";

/// Cycle state written by PreFilter (kube-scheduler's `stateData`; only its presence matters here).
#[derive(Debug, Clone, Default)]
struct StateData;
const STATE_KEY: StateKey<StateData> = StateKey::new("PreFilterDynamicResources");
/// `ErrNotFound`'s text: what PostFilter reports when PreFilter did not run.
pub const ERR_NOT_FOUND: &str = "not found";

/// The DynamicResources plugin.
#[derive(Debug, Default)]
pub struct DynamicResources;

/// Builds the plugin (its args, if any, are accepted and ignored).
pub fn new(_args: Option<&serde_json::Value>, _handle: &Handle) -> Result<Arc<dyn Plugin>, PluginError> {
    Ok(Arc::new(DynamicResources))
}

fn has_claims(pod: &PodInfo) -> bool {
    pod.pod
        .spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .is_some_and(|c| !c.is_empty())
}

impl Plugin for DynamicResources {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        Some(self)
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        Some(self)
    }
    fn as_pre_bind(&self) -> Option<&dyn PreBindPlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for DynamicResources {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        state.write(&STATE_KEY, StateData);
        if has_claims(pod) {
            (None, Status::error(ERR_CLAIMS_NOT_SUPPORTED))
        } else {
            (None, Status::skip())
        }
    }
}

impl FilterPlugin for DynamicResources {
    fn filter(&self, _: &CycleState, _: &PodInfo, _: &NodeInfo) -> Status {
        Status::success()
    }
}

impl PostFilterPlugin for DynamicResources {
    fn post_filter(
        &self,
        _: &Framework,
        state: &CycleState,
        _: &PodInfo,
        _: &NodeToStatus,
    ) -> (Option<PostFilterResult>, Status) {
        if state.read(&STATE_KEY).is_none() {
            return (None, Status::error(ERR_NOT_FOUND));
        }
        (None, Status::with_reasons(Code::Unschedulable, Vec::new()))
    }
}

impl PreScorePlugin for DynamicResources {
    fn pre_score(&self, _: &mut CycleState, _: &PodInfo, _: &[Arc<NodeInfo>]) -> Status {
        Status::skip()
    }
}

impl ScorePlugin for DynamicResources {
    fn score(&self, _: &CycleState, _: &PodInfo, _: &NodeInfo) -> (i64, Status) {
        (0, Status::success())
    }
}

impl ReservePlugin for DynamicResources {
    fn reserve(&self, _: &mut CycleState, _: &PodInfo, _: &str) -> Status {
        Status::success()
    }
    fn unreserve(&self, _: &mut CycleState, _: &PodInfo, _: &str) {}
}

impl PreBindPlugin for DynamicResources {
    fn pre_bind(&self, _: &CycleState, _: &PodInfo, _: &str) -> (Vec<crate::action::Action>, Status) {
        (Vec::new(), Status::skip())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::pod;
    use k8s_openapi::api::core::v1::PodResourceClaim;

    #[test]
    fn skips_pods_without_claims_and_refuses_to_guess_for_pods_with_claims() {
        let pl = DynamicResources;
        let mut state = CycleState::new();
        let (_, s) = pl.pre_filter(&mut state, &pod("p").info(), &[]);
        assert!(s.is_skip());
        let with_claim = pod("q")
            .with(|p| {
                p.spec.as_mut().unwrap().resource_claims = Some(vec![PodResourceClaim {
                    name: "gpu".into(),
                    ..Default::default()
                }])
            })
            .info();
        let (_, s) = pl.pre_filter(&mut state, &with_claim, &[]);
        assert_eq!(s.code(), Code::Error);
        assert_eq!(s.message(), ERR_CLAIMS_NOT_SUPPORTED);
    }
}
