//! VolumeBinding: a pod fits a node only if every PersistentVolumeClaim it uses can be served there —
//! bound claims by their PV's node affinity, WaitForFirstConsumer claims by an existing PV the node can
//! reach or by dynamic provisioning on it. Reserve binds the chosen PVs in memory, and PreBind turns
//! them into writes: PV claimRefs for static bindings, the selected-node annotation for provisioning.
//!
//! The decisions live in [`binder`] as plain functions (the webhook calls them directly); this module
//! wires them to the extension points, with per-cycle state in the `CycleState` and the in-memory
//! bindings in an [`AssumedVolumes`] value instead of kube-scheduler's process-wide assume cache.

pub(crate) mod assume;
pub(crate) mod binder;
pub(crate) mod pv_helpers;
pub(crate) mod scorer;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;

use crate::action::Action;
use crate::features::ReleaseChanges;
use crate::framework::FeatureGates;
use crate::framework::cycle_state::{CycleState, StateKey};
use crate::framework::interface::{
    FilterPlugin, MAX_NODE_SCORE, Plugin, PreBindPlugin, PreFilterPlugin, PreFilterResult, PreScorePlugin,
    ReservePlugin, ScorePlugin,
};
use crate::framework::runtime::{Handle, PluginError, decode_args};
use crate::framework::status::Status;
use crate::plugins::helper::shape_score::{
    MAX_CUSTOM_PRIORITY_SCORE, ShapePoint, UtilizationShapePoint, validate_function_shape,
};
use crate::plugins::names;
use crate::snapshot::{NodeInfo, PodInfo, Snapshot};

pub(crate) use assume::{ASSUMED_STATE_KEY, VolumeView};
pub(crate) use binder::{
    Assumption, PodVolumeClaims, PodVolumes, assume_pod_volumes, classify_pod_claims,
    find_pod_volumes_for_claims, prebind_actions, revert_assumed_pod_volumes,
};
use scorer::{StorageResource, VolumeCapacityScorer};

/// The plugin's registry name.
pub(crate) const NAME: &str = names::VOLUME_BINDING;

/// Filter reason: a delayed claim has no usable PV here and cannot be provisioned here either.
pub const ERR_REASON_BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
/// Filter reason: a bound claim's PV is not reachable from the node.
pub const ERR_REASON_NODE_CONFLICT: &str = "node(s) didn't match PersistentVolume's node affinity";
/// Filter reason: no CSIStorageCapacity reachable from the node has room for a claim to provision.
pub(crate) const ERR_REASON_NOT_ENOUGH_SPACE: &str = "node(s) did not have enough free storage";
/// Filter reason: a bound claim's PV does not exist.
pub(crate) const ERR_REASON_PV_NOT_EXIST: &str =
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
/// PreFilter reason: a claim the PV controller should bind is still unbound.
pub(crate) const ERR_REASON_UNBOUND_IMMEDIATE_CLAIMS: &str =
    "pod has unbound immediate PersistentVolumeClaims";

/// `bindTimeoutSeconds` when not configured.
pub(crate) const DEFAULT_BIND_TIMEOUT_SECONDS: i64 = 600;
/// The plugin's cycle state (Go's state key is the plugin name).
pub(crate) const STATE_KEY: StateKey<StateData> = StateKey::new(NAME);

/// What PreFilter found and Reserve decided for the pod.
#[derive(Debug, Clone, Default)]
pub(crate) struct StateData {
    /// The classified claims; `None` when the pod uses none (PreFilter skipped).
    pub claims: Option<PodVolumeClaims>,
    /// Set by Reserve: nothing to bind, PreBind does nothing.
    pub all_bound: bool,
    /// Set by Reserve when something was assumed: the node and what to write for it.
    pub reserved: Option<Reserved>,
}

/// The reserved node's volumes.
#[derive(Debug, Clone)]
pub(crate) struct Reserved {
    /// The node.
    pub node: String,
    /// Its volumes as Filter found them (PreBind writes from these).
    pub pod_volumes: PodVolumes,
    /// What was assumed (Unreserve takes it back).
    pub assumption: Assumption,
}

/// `VolumeBindingArgs`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct VolumeBindingArgs {
    /// How long PreBind waits for the PV controller (default 600; 0 = no waiting).
    pub bind_timeout_seconds: Option<i64>,
    /// The score shape (StorageCapacityScoring); defaults to 10 at 0% and 0 at 100% utilization.
    pub shape: Option<Vec<UtilizationShapePoint>>,
}

fn default_shape() -> Vec<UtilizationShapePoint> {
    vec![
        UtilizationShapePoint {
            utilization: 0,
            score: MAX_CUSTOM_PRIORITY_SCORE as i32,
        },
        UtilizationShapePoint {
            utilization: 100,
            score: 0,
        },
    ]
}

/// `ValidateVolumeBindingArgsWithOptions`, with apimachinery-style field messages.
fn validate_args(
    args: &VolumeBindingArgs,
    storage_capacity_scoring: bool,
    changes: &ReleaseChanges,
) -> Result<(), String> {
    let mut errs = Vec::new();
    let timeout = args.bind_timeout_seconds.unwrap_or(DEFAULT_BIND_TIMEOUT_SECONDS);
    if timeout < 0 {
        errs.push(format!(
            "bindTimeoutSeconds: Invalid value: {timeout}: invalid BindTimeoutSeconds, should not be a negative value"
        ));
    }
    match &args.shape {
        Some(shape) if storage_capacity_scoring => {
            errs.extend(validate_function_shape(shape, "shape", changes))
        }
        Some(shape) => errs.push(format!(
            "shape: Invalid value: {}: unexpected field `shape`, remove it or turn on the feature gate StorageCapacityScoring",
            serde_json::to_string(shape).unwrap_or_default()
        )),
        None => {}
    }
    match errs.len() {
        0 => Ok(()),
        1 => Err(errs.remove(0)),
        _ => Err(format!("[{}]", errs.join(", "))),
    }
}

/// The VolumeBinding plugin.
#[derive(Debug)]
pub(crate) struct VolumeBinding {
    snapshot: Arc<Snapshot>,
    /// Present only with StorageCapacityScoring; without it PreScore skips.
    scorer: Option<VolumeCapacityScorer>,
    storage_capacity_scoring: bool,
    /// Upstream's PreBind waits this long for the PV controller; the engine's PreBind is a plan and
    /// does not wait, so only the tests read it (the args are defaulted and validated as upstream's).
    #[cfg_attr(not(test), expect(dead_code, reason = "the engine's PreBind does not wait"))]
    bind_timeout_seconds: i64,
}

impl VolumeBinding {
    /// Builds the plugin from its args, with the release's StorageCapacityScoring and words.
    pub(crate) fn from_args(
        args: Option<&serde_json::Value>,
        snapshot: Arc<Snapshot>,
        features: &FeatureGates,
    ) -> Result<Self, PluginError> {
        let storage_capacity_scoring = features.storage_capacity_scoring;
        let mut args: VolumeBindingArgs = decode_args(NAME, args)?;
        if storage_capacity_scoring && args.shape.as_ref().is_none_or(Vec::is_empty) {
            args.shape = Some(default_shape());
        }
        validate_args(&args, storage_capacity_scoring, &features.changes).map_err(|message| {
            PluginError::InvalidArgs {
                plugin: NAME.to_string(),
                message,
            }
        })?;
        let scorer = storage_capacity_scoring.then(|| {
            let scale = MAX_NODE_SCORE / MAX_CUSTOM_PRIORITY_SCORE;
            VolumeCapacityScorer::new(
                args.shape
                    .iter()
                    .flatten()
                    .map(|p| ShapePoint {
                        utilization: i64::from(p.utilization),
                        score: i64::from(p.score) * scale,
                    })
                    .collect(),
            )
        });
        Ok(VolumeBinding {
            snapshot,
            scorer,
            storage_capacity_scoring,
            bind_timeout_seconds: args.bind_timeout_seconds.unwrap_or(DEFAULT_BIND_TIMEOUT_SECONDS),
        })
    }

    /// The node's volumes as Filter decides them; `None` when the pod has no claims or the node does not
    /// fit (upstream keeps volumes only for nodes that passed Filter).
    fn fitting_pod_volumes(
        &self,
        state: &CycleState,
        claims: &PodVolumeClaims,
        node_name: &str,
    ) -> Option<PodVolumes> {
        let node = self.snapshot.node(node_name)?;
        let view = VolumeView::with_assumed(&self.snapshot, state.read(&ASSUMED_STATE_KEY));
        find_pod_volumes_for_claims(view, claims, &node.node)
            .ok()
            .filter(PodVolumes::fits)
    }

    /// Groups what the score weighs by storage class: the static bindings when there are any (PV
    /// capacities), else the provisioned claims against their CSIStorageCapacity.
    fn class_resources(&self, pod_volumes: &PodVolumes) -> BTreeMap<String, StorageResource> {
        let mut classes: BTreeMap<String, StorageResource> = BTreeMap::new();
        if !pod_volumes.static_bindings.is_empty() || !self.storage_capacity_scoring {
            for binding in &pod_volumes.static_bindings {
                let entry = classes
                    .entry(binding.storage_class_name().to_string())
                    .or_default();
                entry.requested += pv_helpers::claim_request_bytes(&binding.pvc);
                entry.capacity += pv_helpers::volume_capacity_bytes(&binding.pv);
            }
        } else {
            for provision in &pod_volumes.dynamic_provisions {
                let Some(capacity) = &provision.node_capacity else {
                    continue;
                };
                let class = provision
                    .pvc
                    .spec
                    .as_ref()
                    .and_then(|s| s.storage_class_name.as_deref())
                    .unwrap_or_else(|| pv_helpers::claim_class(&provision.pvc));
                let entry = classes.entry(class.to_string()).or_default();
                // Several claims of one class share the class's capacity: it is set, not summed.
                entry.capacity = capacity
                    .capacity
                    .as_ref()
                    .map(crate::resource::quantity_value)
                    .unwrap_or(0);
                entry.requested += pv_helpers::claim_request_bytes(&provision.pvc);
            }
        }
        classes
    }
}

/// Builds the plugin from `VolumeBindingArgs`; it scores nodes only with StorageCapacityScoring.
pub(crate) fn new(
    args: Option<&serde_json::Value>,
    handle: &Handle,
    features: &FeatureGates,
) -> Result<Arc<dyn Plugin>, PluginError> {
    Ok(Arc::new(VolumeBinding::from_args(
        args,
        handle.snapshot.clone(),
        features,
    )?))
}

/// Go's `framework.ErrNotFound`, as a status: the state PreFilter should have written is missing.
fn state_not_found() -> Status {
    Status::error("not found")
}

impl Plugin for VolumeBinding {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
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

impl PreFilterPlugin for VolumeBinding {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        let classified = {
            let view = VolumeView::with_assumed(&self.snapshot, state.read(&ASSUMED_STATE_KEY));
            classify_pod_claims(view, &pod.pod)
        };
        match classified {
            Err(status) => (None, status),
            Ok(None) => {
                state.write(&STATE_KEY, StateData::default());
                (None, Status::skip())
            }
            Ok(Some(claims)) => {
                state.write(
                    &STATE_KEY,
                    StateData {
                        claims: Some(claims),
                        ..Default::default()
                    },
                );
                (None, Status::success())
            }
        }
    }
}

impl FilterPlugin for VolumeBinding {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(data) = state.read(&STATE_KEY) else {
            return state_not_found();
        };
        let Some(claims) = &data.claims else {
            return Status::success();
        };
        let view = VolumeView::with_assumed(&self.snapshot, state.read(&ASSUMED_STATE_KEY));
        match find_pod_volumes_for_claims(view, claims, &node.node) {
            Err(message) => Status::error(message),
            Ok(pod_volumes) => pod_volumes.status(),
        }
    }
}

impl PreScorePlugin for VolumeBinding {
    fn pre_score(&self, state: &mut CycleState, _pod: &PodInfo, _nodes: &[Arc<NodeInfo>]) -> Status {
        if self.scorer.is_none() {
            return Status::skip();
        }
        if state.read(&STATE_KEY).is_none() {
            return state_not_found();
        }
        // The scorer exists only with StorageCapacityScoring, and then every pod is scored (nodes
        // without volumes to bind score 0), static bindings or not.
        Status::success()
    }
}

impl ScorePlugin for VolumeBinding {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> (i64, Status) {
        let Some(scorer) = &self.scorer else {
            return (0, Status::success());
        };
        let Some(data) = state.read(&STATE_KEY) else {
            return (0, state_not_found());
        };
        let Some(claims) = &data.claims else {
            return (0, Status::success());
        };
        let Some(pod_volumes) = self.fitting_pod_volumes(state, claims, node.name()) else {
            return (0, Status::success());
        };
        (
            scorer.score(&self.class_resources(&pod_volumes)),
            Status::success(),
        )
    }
}

impl ReservePlugin for VolumeBinding {
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, node_name: &str) -> Status {
        let found = {
            let Some(data) = state.read(&STATE_KEY) else {
                return state_not_found();
            };
            data.claims
                .as_ref()
                .and_then(|claims| self.fitting_pod_volumes(state, claims, node_name))
        };
        let Some(pod_volumes) = found else {
            // No claims, or no volumes recorded for this node: nothing to bind.
            if let Some(data) = state.read_mut(&STATE_KEY) {
                data.all_bound = true;
            }
            return Status::success();
        };

        let mut assumed = state.read(&ASSUMED_STATE_KEY).cloned().unwrap_or_default();
        let assumption =
            match assume_pod_volumes(&self.snapshot, &mut assumed, &pod.pod, node_name, &pod_volumes) {
                Ok(a) => a,
                Err(message) => return Status::error(message),
            };
        state.write(&ASSUMED_STATE_KEY, assumed);
        if let Some(data) = state.read_mut(&STATE_KEY) {
            data.all_bound = assumption.all_bound;
            data.reserved = Some(Reserved {
                node: node_name.to_string(),
                pod_volumes,
                assumption,
            });
        }
        Status::success()
    }

    fn unreserve(&self, state: &mut CycleState, _pod: &PodInfo, node_name: &str) {
        let Some(assumption) = state
            .read(&STATE_KEY)
            .and_then(|d| d.reserved.as_ref())
            .filter(|r| r.node == node_name)
            .map(|r| r.assumption.clone())
        else {
            return;
        };
        if let Some(assumed) = state.read_mut(&ASSUMED_STATE_KEY) {
            revert_assumed_pod_volumes(assumed, &assumption);
        }
    }
}

impl PreBindPlugin for VolumeBinding {
    fn pre_bind(&self, state: &CycleState, _pod: &PodInfo, node_name: &str) -> (Vec<Action>, Status) {
        let Some(data) = state.read(&STATE_KEY) else {
            return (Vec::new(), state_not_found());
        };
        if data.all_bound {
            return (Vec::new(), Status::success());
        }
        match &data.reserved {
            Some(r) if r.node == node_name => (prebind_actions(&r.pod_volumes, node_name), Status::success()),
            _ => (
                Vec::new(),
                Status::error(format!("no pod volume found for node {node_name:?}")),
            ),
        }
    }
}
