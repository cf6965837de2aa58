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

/// `resourceclaim.ErrClaimNotFound`.
pub const ERR_CLAIM_NOT_CREATED: &str = "ResourceClaim not created yet";
/// `resourceclaim.ErrAPIUnsupported`.
pub const ERR_API_UNSUPPORTED: &str = "none of the supported fields are set";

/// The DynamicResources plugin.
#[derive(Debug, Default)]
pub struct DynamicResources {
    snapshot: Arc<crate::snapshot::Snapshot>,
}

/// Builds the plugin (its args, if any, are accepted and ignored).
pub fn new(_args: Option<&serde_json::Value>, handle: &Handle) -> Result<Arc<dyn Plugin>, PluginError> {
    Ok(Arc::new(DynamicResources {
        snapshot: handle.snapshot.clone(),
    }))
}

impl DynamicResources {
    /// `foreachPodResourceClaim` without a callback: every claim the pod references must exist, not be
    /// terminating, and (for claims generated from a template) be owned by the pod.
    fn check_claims(&self, pod: &PodInfo) -> Result<(), String> {
        let Some(claims) = pod.pod.spec.as_ref().and_then(|s| s.resource_claims.as_ref()) else {
            return Ok(());
        };
        let (ns, name) = (pod.namespace(), pod.name());
        for pod_claim in claims {
            let (claim_name, must_check_owner) = if let Some(n) = &pod_claim.resource_claim_name {
                (n.clone(), false)
            } else if pod_claim.resource_claim_template_name.is_some() {
                let statuses = pod
                    .pod
                    .status
                    .as_ref()
                    .and_then(|s| s.resource_claim_statuses.as_ref());
                match statuses
                    .into_iter()
                    .flatten()
                    .find(|st| st.name == pod_claim.name)
                {
                    // No claim was generated on purpose: nothing to check.
                    Some(st) => match &st.resource_claim_name {
                        Some(n) => (n.clone(), true),
                        None => continue,
                    },
                    None => return Err(format!("pod \"{ns}/{name}\": {ERR_CLAIM_NOT_CREATED}")),
                }
            } else {
                return Err(format!(
                    "pod \"{ns}/{name}\", spec.resourceClaim {:?}: {ERR_API_UNSUPPORTED}",
                    pod_claim.name
                ));
            };
            let key = crate::snapshot::namespaced_key(ns, &claim_name);
            let Some(claim) = self.snapshot.resource_claims.get(&key) else {
                return Err(format!("could not find ResourceClaim {key:?}"));
            };
            if claim.metadata.deletion_timestamp.is_some() {
                return Err(format!("resourceclaim {claim_name:?} is being deleted"));
            }
            let owned = claim
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && o.uid == pod.uid());
            if must_check_owner && !owned {
                return Err(format!(
                    "ResourceClaim {ns}/{claim_name} was not created for Pod {ns}/{name} (Pod is not owner)"
                ));
            }
        }
        Ok(())
    }
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
    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        Some(self)
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

impl PreEnqueuePlugin for DynamicResources {
    /// Keeps a pod out of the queue while a claim it references is missing or unusable (kube-scheduler
    /// writes no FailedScheduling event for such a pod).
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        match self.check_claims(pod) {
            Ok(()) => Status::success(),
            Err(reason) => Status::unresolvable(reason),
        }
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
        let pl = DynamicResources::default();
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

    #[test]
    fn pre_enqueue_gates_pods_whose_claims_are_missing_or_unusable() {
        use k8s_openapi::api::core::v1::{PodResourceClaim, PodResourceClaimStatus};
        use k8s_openapi::api::resource::v1::ResourceClaim;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
        let claim = |name: &str, deleting: bool| ResourceClaim {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                deletion_timestamp: deleting.then_some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                )),
                ..Default::default()
            },
            ..Default::default()
        };
        let objects = crate::snapshot::ClusterObjects {
            resource_claims: vec![claim("ok", false), claim("gone", true), claim("foreign", false)],
            ..Default::default()
        };
        let pl = DynamicResources {
            snapshot: Arc::new(crate::snapshot::Snapshot::new(objects)),
        };
        let by_name = |n: &str| PodResourceClaim {
            name: "c".into(),
            resource_claim_name: Some(n.into()),
            ..Default::default()
        };
        let with = |c: PodResourceClaim, statuses: Option<Vec<PodResourceClaimStatus>>| {
            pod("p")
                .with(move |p| {
                    p.spec.as_mut().unwrap().resource_claims = Some(vec![c]);
                    p.status
                        .get_or_insert_with(Default::default)
                        .resource_claim_statuses = statuses;
                })
                .info()
        };
        let template = PodResourceClaim {
            name: "c".into(),
            resource_claim_template_name: Some("t".into()),
            ..Default::default()
        };
        let cases = [
            ("existing claim", with(by_name("ok"), None), None),
            (
                "missing claim",
                with(by_name("missing"), None),
                Some("could not find ResourceClaim \"default/missing\""),
            ),
            (
                "deleted claim",
                with(by_name("gone"), None),
                Some("resourceclaim \"gone\" is being deleted"),
            ),
            (
                "template not generated yet",
                with(template.clone(), None),
                Some("pod \"default/p\": ResourceClaim not created yet"),
            ),
            (
                "generated claim not owned by the pod",
                with(
                    template.clone(),
                    Some(vec![PodResourceClaimStatus {
                        name: "c".into(),
                        resource_claim_name: Some("foreign".into()),
                    }]),
                ),
                Some("ResourceClaim default/foreign was not created for Pod default/p (Pod is not owner)"),
            ),
            (
                "generation skipped on purpose",
                with(
                    template,
                    Some(vec![PodResourceClaimStatus {
                        name: "c".into(),
                        resource_claim_name: None,
                    }]),
                ),
                None,
            ),
        ];
        for (name, p, want) in cases {
            let s = pl.pre_enqueue(&p);
            match want {
                None => assert!(s.is_success(), "{name}: {s:?}"),
                Some(msg) => {
                    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{name}");
                    assert_eq!(s.message(), msg, "{name}");
                }
            }
        }
    }
}
