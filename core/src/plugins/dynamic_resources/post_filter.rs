//! DynamicResources' PostFilter, with each release's words: it deallocates one unavailable claim
//! reserved for nobody else (or deletes a left-over extended-resource claim) so that the next
//! attempt may allocate it elsewhere, and otherwise says why it did nothing — in words that changed
//! between releases (`dynamicresources.go` PostFilter):
//!
//! | pod | v1.33 | v1.34–v1.36 | v1.37 |
//! |---|---|---|---|
//! | no `spec.resourceClaims` | (no words) | `no new claims to deallocate` | (no words) |
//! | claims, none known to PreFilter (it rejected) | `no new claims to deallocate` | same | (no words) |
//! | claims, nothing to deallocate | `still not schedulable` | same | (no words) |
//!
//! All are Unschedulable, so RunPostFilterPlugins goes on to DefaultPreemption and joins the words:
//! on v1.34–v1.36 every unschedulable pod without claims gets `no new claims to deallocate, ` before
//! its `preemption: ` part. v1.33 returns before reading the cycle state, so a pod without claims
//! gets no `not found` error there when an earlier PreFilter rejected it.

use crate::framework::FeatureGates;
use crate::framework::cycle_state::CycleState;
use crate::framework::status::{Code, Status};
use crate::snapshot::PodInfo;

use super::{
    ERR_NOT_FOUND, MSG_DEALLOCATED, MSG_EXTENDED_CLAIM_DELETED, STATE_KEY, StateData, extended, lock,
};

/// PostFilter, v1.33–v1.36: the pod's cycle found no claim to deallocate.
pub(crate) const MSG_NO_NEW_CLAIMS: &str = "no new claims to deallocate";
/// PostFilter, v1.33–v1.36: no unavailable claim could be deallocated.
pub(crate) const MSG_STILL_NOT_SCHEDULABLE: &str = "still not schedulable";

/// Which of the words above the release's PostFilter says (each from `ReleaseChanges`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PostFilterWords {
    /// v1.33: a pod without `spec.resourceClaims` gets a message-less status before anything else.
    skips_pods_without_claims: bool,
    /// [`MSG_NO_NEW_CLAIMS`] when the cycle knows no claim of the pod.
    no_new_claims: bool,
    /// [`MSG_STILL_NOT_SCHEDULABLE`] when nothing could be deallocated.
    still_not_schedulable: bool,
}

impl PostFilterWords {
    /// The words of the release whose code `features` describe.
    pub(crate) fn of(features: &FeatureGates) -> Self {
        let changes = &features.changes;
        PostFilterWords {
            skips_pods_without_claims: changes.dynamic_resources_post_filter_checks_pod_claims_first,
            no_new_claims: changes.dynamic_resources_says_no_new_claims,
            still_not_schedulable: changes.dynamic_resources_says_still_not_schedulable,
        }
    }
}

/// A status that rejects without words.
fn unschedulable_without_words() -> Status {
    Status::with_reasons(Code::Unschedulable, Vec::new())
}

/// `deallocateOrDeletePodClaims` as a dry run, with the release's words: the status PostFilter
/// returns. kube-scheduler picks one unavailable claim at random (map order), deallocates it when
/// nobody else has it reserved and says so; here the lowest index is picked. A pod's
/// extended-resource claim left over from an earlier cycle is deleted instead (`deletion of
/// ResourceClaim completed`) unless a user claim was deallocated first.
pub(crate) fn post_filter_status(words: PostFilterWords, state: &CycleState, pod: &PodInfo) -> Status {
    let has_claims = pod
        .pod
        .spec
        .as_ref()
        .is_some_and(|s| s.resource_claims.as_ref().is_some_and(|c| !c.is_empty()));
    if words.skips_pods_without_claims && !has_claims {
        return unschedulable_without_words();
    }
    let Some(StateData(cycle)) = state.read(&STATE_KEY) else {
        return Status::error(ERR_NOT_FOUND);
    };
    if cycle.claims.is_empty() {
        return if words.no_new_claims {
            Status::new(Code::Unschedulable, MSG_NO_NEW_CLAIMS)
        } else {
            unschedulable_without_words()
        };
    }
    // An extended-resource claim with a real name is left over from an earlier cycle.
    let stale_extended = cycle
        .extended_index()
        .and_then(|i| cycle.claims.get(i))
        .filter(|c| !extended::is_special_claim_name(c));
    for &index in lock(&cycle.unavailable_claims).iter() {
        if Some(index) == cycle.extended_index() {
            if stale_extended.is_some() {
                break;
            }
            continue;
        }
        let Some(claim) = cycle.claims.get(index) else {
            continue;
        };
        let reserved_for = claim
            .status
            .as_ref()
            .and_then(|s| s.reserved_for.as_deref())
            .unwrap_or_default();
        if reserved_for.is_empty() || (reserved_for.len() == 1 && reserved_for[0].uid == pod.uid()) {
            return Status::new(Code::Unschedulable, MSG_DEALLOCATED);
        }
    }
    if stale_extended.is_some() {
        return Status::new(Code::Unschedulable, MSG_EXTENDED_CLAIM_DELETED);
    }
    if words.still_not_schedulable {
        Status::new(Code::Unschedulable, MSG_STILL_NOT_SCHEDULABLE)
    } else {
        unschedulable_without_words()
    }
}
