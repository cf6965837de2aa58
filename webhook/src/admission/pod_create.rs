//! pods CREATE.
//!
//! - With `spec.nodeName` (the scheduler is bypassed, kubernetes#65604): volume binding's PreBind for
//!   that node, so WaitForFirstConsumer claims get bound (static PV `claimRef`) or provisioned
//!   (`volume.kubernetes.io/selected-node`). A node that can never serve the claims is a definite
//!   conflict: the pod is denied with the scheduler's reason, since it would wait forever.
//! - Opted in (pod annotation or namespace label `kubectl-sched.dev/prebind: admission`): the engine
//!   picks the best node, the claims are pre-bound to the static PVs that node would get, and the pod's
//!   required node affinity is narrowed to where those PVs are reachable. Dynamic claims are left to the
//!   scheduler. This path never denies: if anything fails, the pod is admitted unchanged. A pod whose
//!   `schedulerName` names no profile of the webhook's scheduler configuration is another scheduler's:
//!   kube-scheduler ignores it, and so does this path (admitted unchanged, no warning).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use sched_core::Code;
use sched_core::action::Action;
use sched_core::engine::{EngineError, ScheduleOptions, schedule};
use sched_core::explain::Outcome;
use sched_core::volumes::{
    PodVolumes, bind_volume_to_claim, find_pod_volumes, prebind_actions, selected_node,
};

use super::affinity::{affinity_patch, pv_restriction};
use super::{ClusterView, Decision, Operation, pod_claims, wants_prebind};

/// `namespace/name` of a pod (name may be empty at CREATE with generateName).
pub fn pod_key(pod: &Pod) -> String {
    let name = pod
        .metadata
        .name
        .as_deref()
        .or(pod.metadata.generate_name.as_deref())
        .unwrap_or("");
    format!("{}/{}", pod.metadata.namespace.as_deref().unwrap_or(""), name)
}

/// Why a node cannot serve the pod's claims: the scheduler's reasons, then the claims behind them.
pub fn conflict_message(pod: &Pod, node: &str, volumes: &PodVolumes) -> String {
    let mut message = format!(
        "pod {} cannot use node {node:?}: {}",
        pod_key(pod),
        volumes.reasons.join(", ")
    );
    if !volumes.conflicts.is_empty() {
        let details: Vec<String> = volumes
            .conflicts
            .iter()
            .map(|c| format!("{}: {}", c.claim, c.message))
            .collect();
        message.push_str(&format!(" ({})", details.join("; ")));
    }
    message
}

/// PreBind's writes for `node`, minus those already made (a PV already bound to its claim, a claim
/// already annotated for this node): a reinvoked or retried request plans nothing new.
pub fn prebind_plan(volumes: &PodVolumes, node: &str) -> Vec<Action> {
    let pending = PodVolumes {
        static_bindings: volumes
            .static_bindings
            .iter()
            .filter(|b| bind_volume_to_claim(b.pv.as_ref(), &b.pvc).dirty)
            .cloned()
            .collect(),
        dynamic_provisions: volumes
            .dynamic_provisions
            .iter()
            .filter(|p| selected_node(&p.pvc) != Some(node))
            .cloned()
            .collect(),
        ..PodVolumes::default()
    };
    prebind_actions(&pending, node)
}

/// Decides a pods CREATE. The pod's `metadata.namespace` must be set (the request's namespace).
pub fn decide(pod: &Pod, view: &dyn ClusterView) -> Decision {
    if pod_claims(pod).is_empty() {
        return Decision::allow(Operation::PodCreate);
    }
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("");
    if !node.is_empty() {
        return for_node(pod, node, view);
    }
    if wants_prebind(pod, view) {
        return admission_prebind(pod, view);
    }
    Decision::allow(Operation::PodCreate)
}

/// A pod created on a node: PreBind for that node, deny on a definite conflict.
pub fn for_node(pod: &Pod, node: &str, view: &dyn ClusterView) -> Decision {
    let op = Operation::PodCreateNodeName;
    let snapshot = view.volume_snapshot();
    let Some(node_info) = snapshot.node(node) else {
        return Decision::allow_with_warning(
            op,
            format!("node {node:?} is not known yet: the pod's volumes were not pre-bound"),
        );
    };
    match find_pod_volumes(&snapshot, pod, &node_info.node) {
        // A missing claim or one the PV controller has yet to bind: not for PreBind to fix.
        Err(status) => Decision::allow_with_warning(
            op,
            format!("the pod's volumes were not pre-bound: {}", status.message()),
        ),
        Ok(volumes) if !volumes.fits() => Decision::deny(op, conflict_message(pod, node, &volumes)),
        Ok(volumes) => {
            let mut d = Decision::allow(op);
            d.plan = prebind_plan(&volumes, node);
            d
        }
    }
}

/// An opted-in pod: pre-bind its WaitForFirstConsumer claims to the static PVs of the engine's best node
/// and narrow its node affinity to where those PVs are reachable. A pod of a scheduler the engine has
/// no profile for is left alone (see [`wants_prebind`]).
pub fn admission_prebind(pod: &Pod, view: &dyn ClusterView) -> Decision {
    let op = Operation::PodCreatePrebind;
    let snapshot = Arc::new(view.full_snapshot());
    let fwk = match view.engine().framework_for(pod, snapshot.clone()) {
        Ok(f) => f,
        Err(EngineError::UnknownProfile(_)) => return Decision::allow(op),
        Err(e) => return Decision::allow_with_warning(op, format!("volumes not pre-bound: {e}")),
    };
    let info = view.engine().pod_info(pod.clone());
    let explanation = schedule(
        &fwk,
        &info,
        ScheduleOptions {
            global_percentage_of_nodes_to_score: 100,
            trace_filters: false,
            stop_at_first_feasible: false,
            sample_from: None,
            record_nodes: true,
        },
    );
    let node = match (&explanation.outcome, explanation.selected.first()) {
        (Outcome::Scheduled, Some(node)) => node.clone(),
        _ => {
            return Decision::allow_with_warning(
                op,
                format!(
                    "volumes left to the scheduler: no node fits the pod now ({})",
                    explanation.message
                ),
            );
        }
    };
    let Some(node_info) = snapshot.node(&node) else {
        return Decision::allow(op);
    };
    let volumes = match find_pod_volumes(&snapshot, pod, &node_info.node) {
        Ok(v) if v.fits() => v,
        Ok(_) => return Decision::allow(op),
        Err(status) if status.code() == Code::Error => {
            return Decision::allow_with_warning(op, format!("volumes not pre-bound: {}", status.message()));
        }
        Err(_) => return Decision::allow(op),
    };
    if volumes.static_bindings.is_empty() {
        return Decision::allow(op);
    }
    let statics = PodVolumes {
        static_bindings: volumes.static_bindings.clone(),
        ..PodVolumes::default()
    };
    let pvs: Vec<&sched_core::snapshot::volume::PersistentVolume> =
        volumes.static_bindings.iter().map(|b| &*b.pv).collect();
    let mut d = Decision::allow(op);
    d.plan = prebind_plan(&statics, &node);
    if let Some(restriction) = pv_restriction(&pvs, &node, node_info.labels()) {
        d.patch = affinity_patch(pod, &restriction);
    }
    d
}
