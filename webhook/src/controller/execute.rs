//! Carries out the controller's writes for one stored pod: PreBind's plan (PV claimRefs, claim
//! annotations) and nomination clearing, each write with the preconditions its action carries (UID,
//! resourceVersion), inside a time budget, every write logged with the pod it is for and counted.
//!
//! Why nothing is undone here, unlike the admission-time writes this replaced: the pod exists and is
//! bound to (or restricted to) the node the plan is for, so a plan cut short is finished on the next
//! reconcile rather than taken back. Taking back a PV claimRef after the PV controller has completed
//! the binding would leave the claim Lost (its `spec.volumeName` cannot be cleared).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;

use sched_core::action::Action;
use sched_core::apply::{self, ApplyOptions, Outcome};

use super::Context;

/// How a plan ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanEnd {
    /// Every write done (or already done).
    Done,
    /// An object changed under the plan: decide again on fresh state.
    Conflict(String),
    /// The budget ran out before every write was made: the rest on the next reconcile.
    OutOfTime {
        /// Writes made.
        done: usize,
        /// Writes planned.
        planned: usize,
    },
    /// A write failed for another reason.
    Failed(String),
}

/// Who a write is for, for the log.
pub struct WriteFor<'a> {
    /// The stored pod.
    pub pod: &'a Pod,
    /// The node the work is for ("" when none yet).
    pub node: &'a str,
}

impl WriteFor<'_> {
    fn pod_key(&self) -> String {
        format!(
            "{}/{}",
            self.pod.metadata.namespace.as_deref().unwrap_or(""),
            self.pod.metadata.name.as_deref().unwrap_or("")
        )
    }

    /// The admission request that let the pod in, when the webhook stamped it.
    fn request(&self) -> &str {
        self.pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(crate::admission::ADMITTED_BY_KEY))
            .map(String::as_str)
            .unwrap_or("")
    }
}

/// Runs `plan` for `target`, stopping at `budget`.
pub async fn run_plan(ctx: &Context, plan: &[Action], target: &WriteFor<'_>, budget: Duration) -> PlanEnd {
    let options = ApplyOptions {
        deadline: Instant::now().checked_add(budget),
        ..ctx.apply_options.clone()
    };
    let mut done = 0;
    for action in plan {
        if options.out_of_time() {
            ctx.metrics.plan_failed();
            tracing::warn!(
                pod = %target.pod_key(),
                node = target.node,
                done,
                planned = plan.len(),
                "out of time: the rest of the plan is left for the next reconcile"
            );
            return PlanEnd::OutOfTime {
                done,
                planned: plan.len(),
            };
        }
        let (outcome, observed) = apply::execute_one(&ctx.client, action, &options).await;
        if let Some(observed) = &observed {
            ctx.cache.record(observed);
        }
        match outcome {
            Outcome::Done => {
                done += 1;
                ctx.metrics.binding_done();
                tracing::info!(
                    action = %action.describe(),
                    pod = %target.pod_key(),
                    pod_uid = target.pod.metadata.uid.as_deref().unwrap_or(""),
                    node = target.node,
                    admission_request = target.request(),
                    "written"
                );
            }
            Outcome::Failed(e) if e.is_conflict() => {
                ctx.metrics.conflict_retried();
                tracing::info!(pod = %target.pod_key(), error = %e, "conflict: deciding again on fresh state");
                return PlanEnd::Conflict(e.to_string());
            }
            Outcome::Failed(e) => {
                ctx.metrics.plan_failed();
                tracing::warn!(pod = %target.pod_key(), node = target.node, error = %e, "volume pre-binding failed");
                return PlanEnd::Failed(e.to_string());
            }
            _ => {}
        }
    }
    PlanEnd::Done
}

/// Clears nominations, each with the UID and resourceVersion the decision read: a pod that changed
/// since is left for the next reconcile. Returns true when every clearing was done or moot.
pub async fn clear_nominations(ctx: &Context, clear: &[Action], target: &WriteFor<'_>) -> bool {
    let mut settled = true;
    for action in clear {
        let (outcome, _) = apply::execute_one(&ctx.client, action, &ctx.apply_options).await;
        match outcome {
            Outcome::Done => {
                ctx.metrics.nomination_cleared();
                tracing::info!(
                    action = %action.describe(),
                    bound_pod = %target.pod_key(),
                    node = target.node,
                    "written"
                );
            }
            Outcome::Failed(e) => {
                settled = false;
                tracing::info!(action = %action.describe(), error = %e, "nomination not cleared: will look again");
            }
            _ => {}
        }
    }
    settled
}
