//! pods/binding CREATE: the scheduler (any scheduler) has chosen a node.
//!
//! 1. Volume binding's PreBind for the target node when the pod's claims are not all bound — what a
//!    scheduler without the VolumeBinding plugin skipped. A node that cannot serve the claims denies
//!    the binding with the scheduler's reason; the scheduler retries, as after a failed PreBind.
//! 2. Nominations, once the binding is stored (the controller, `crate::controller::stored_pod`): the
//!    pod's own `nominatedNodeName` is cleared where the API server keeps it (before
//!    `ClearingNominatedNodeNameAfterBinding`, on from v1.35), and so is that of every lower-priority pod nominated to
//!    the node that no longer fits there with this pod on it ([`stale_nominations`]: the engine's
//!    PreFilter/Filter with the pod on the node).
//!
//! The decision's plan is what the controller writes once the API server has stored the binding;
//! admission itself writes nothing.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use sched_core::action::{Action, ObjectRef};
use sched_core::engine::CycleState;
use sched_core::engine::FrameworkHandle;
use sched_core::volumes::find_pod_volumes;
use sched_core::{Code, PodInfo};

use super::pod_create::{conflict_message, prebind_plan};
use super::{ClusterView, Decision, Operation, claims_all_bound, pod_claims};

/// The pod as the object of a write: its UID and the resourceVersion the decision read are
/// preconditions, so a pod that changed since is re-examined rather than overwritten.
pub fn pod_ref(pod: &Pod) -> ObjectRef {
    ObjectRef {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().filter(|u| !u.is_empty()),
        resource_version: pod.metadata.resource_version.clone().filter(|v| !v.is_empty()),
    }
}

fn priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

/// True when a binding of `pod` to `node` has no volume to check: no claims, or all bound. Reads the
/// view's indexes only (no snapshot).
pub fn needs_no_volume_check(pod: &Pod, _node: &str, view: &dyn ClusterView) -> bool {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    pod_claims(pod).is_empty() || claims_all_bound(pod, |c| view.pvc(namespace, c))
}

/// Decides a binding of `pod` (as the view has it; `None` when unknown) to `node`.
pub fn decide(pod: Option<&Pod>, node: &str, view: &dyn ClusterView) -> Decision {
    let op = Operation::PodBinding;
    let Some(pod) = pod else {
        return Decision::allow_with_warning(op, "the pod is not known to the webhook: nothing pre-bound");
    };
    if node.is_empty() {
        return Decision::allow(op);
    }
    let mut d = Decision::allow(op);

    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    if !pod_claims(pod).is_empty() && !claims_all_bound(pod, |c| view.pvc(namespace, c)) {
        let snapshot = view.volume_snapshot();
        let Some(node_info) = snapshot.node(node) else {
            return Decision::allow_with_warning(
                op,
                format!("node {node:?} is not known yet: the pod's volumes were not pre-bound"),
            );
        };
        match find_pod_volumes(&snapshot, pod, &node_info.node) {
            Err(status) if status.code() == Code::Error => {
                d.warnings.push(format!(
                    "the pod's volumes were not pre-bound: {}",
                    status.message()
                ));
            }
            // The claim is missing, lost, being deleted or waits for the PV controller: kube-scheduler
            // would not have bound the pod either.
            Err(status) => {
                let denied = Decision::deny(
                    op,
                    format!(
                        "pod {namespace}/{} cannot be bound to node {node:?}: {}",
                        pod.metadata.name.as_deref().unwrap_or(""),
                        status.message()
                    ),
                );
                return denied;
            }
            Ok(volumes) if !volumes.fits() => {
                let denied = Decision::deny(op, conflict_message(pod, node, &volumes));
                return denied;
            }
            Ok(volumes) => d.plan = prebind_plan(&volumes, node),
        }
    }

    d
}

/// Lower-priority pods nominated to `node` that do not fit there with `pod` bound to it (`pod` may
/// already be on the node in the view: it is counted once).
pub fn stale_nominations(pod: &Pod, node: &str, view: &dyn ClusterView) -> Vec<Action> {
    let pod_priority = priority(pod);
    let same = |other: &Pod| {
        other.metadata.namespace == pod.metadata.namespace && other.metadata.name == pod.metadata.name
    };
    let lower: Vec<Arc<Pod>> = view
        .nominated_pods(node)
        .into_iter()
        // A DRA pod's fit depends on devices the webhook does not track: its nomination is
        // kube-scheduler's to clear.
        .filter(|p| !same(p) && priority(p) < pod_priority && !super::uses_resource_claims(p))
        .collect();
    if lower.is_empty() {
        return Vec::new();
    }
    let snapshot = Arc::new(view.full_snapshot());
    let Some(node_info) = snapshot.node(node) else {
        return Vec::new();
    };
    let mut bound = pod.clone();
    bound.spec.get_or_insert_with(Default::default).node_name = Some(node.to_string());
    let bound = Arc::new(view.engine().pod_info(bound));
    let mut with_pod = (**node_info).clone();
    let already_there = with_pod.pods.iter().any(|p| {
        p.pod.metadata.namespace == pod.metadata.namespace && p.pod.metadata.name == pod.metadata.name
    });
    if !already_there {
        with_pod.add_pod(bound.clone());
    }

    let mut clear = Vec::new();
    for nominated in lower {
        // A pod of a scheduler the configuration has no profile for is that scheduler's to judge (and
        // so is a profile whose plugins cannot be built): its nomination is left alone.
        let Ok(fwk) = view.engine().framework_for(&nominated, snapshot.clone()) else {
            continue;
        };
        let info = PodInfo::with_features(nominated.clone(), view.engine().features());
        let mut state = CycleState::new();
        let (result, status, _) = fwk.run_pre_filter_plugins(&mut state, &info);
        let fits = status.is_success()
            && result.is_none_or(|r| r.node_names.as_ref().is_none_or(|n| n.contains(node)))
            && fwk
                .run_pre_filter_extension_add_pod(&mut state, &info, &bound, &with_pod)
                .is_success()
            && fwk.run_filter_plugins(&state, &info, &with_pod).is_success();
        if !fits {
            clear.push(Action::SetNominatedNodeName {
                pod: pod_ref(&nominated),
                node: String::new(),
            });
        }
    }
    clear
}
