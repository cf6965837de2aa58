//! Admission decisions: pure functions from a request and a [`ClusterView`] to a [`Decision`] — the
//! response (allow, deny, patch, warnings) and the writes the object will need, as an action plan.
//! Nothing here does I/O of its own. Admission answers with the response only; the controller
//! (`crate::controller`) makes the same decisions for the stored object and carries out their plans.
//!
//! | request | module |
//! |---|---|
//! | pods CREATE | [`pod_create`]: PreBind for `spec.nodeName`, or admission pre-binding when opted in |
//! | pods/binding CREATE | [`binding`]: PreBind for the target node, then stale nominations |
//! | anything else | allowed, no patch |
//!
//! [`answer`] is the request pipeline: the one sequence of steps from a review body to its answer,
//! generic over the I/O between them ([`answer::AdmissionIo`]): the server passes its own, tests and
//! the fuzz target [`answer::NoIo`].

pub mod affinity;
pub mod answer;
pub mod binding;
#[cfg(test)]
mod decision_tests;
pub mod limits;
pub mod pod_create;
pub mod review;
pub mod view;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use serde::Deserialize;

use sched_core::action::Action;
use sched_core::labels::Labels;

pub use answer::RequestError;
pub use limits::{
    DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CLAIMS, DEFAULT_MAX_DECISION_BYTES, DEFAULT_MAX_DECISIONS, Limits,
};
pub use review::{AdmissionRequest, AdmissionResponse, ReviewError};
pub use view::{ClusterView, StaticView};

/// Pod annotation (or namespace label) that opts pods into admission pre-binding.
pub const OPT_IN_KEY: &str = "kubectl-sched.dev/prebind";
/// The value that opts in.
pub const OPT_IN_VALUE: &str = "admission";
/// Pod annotation set at admission on pods the controller has volume work for: the uid of the
/// admission request, which the controller's write log names (and the webhook's admission log
/// names with the user the API server gave).
pub const ADMITTED_BY_KEY: &str = "kubectl-sched.dev/admission-request";

/// Which behaviour a request got (the `operation` label of the metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// pods CREATE that needs nothing (no claims, or not in scope).
    PodCreate,
    /// pods CREATE with `spec.nodeName` and claims.
    PodCreateNodeName,
    /// pods CREATE opted into admission pre-binding.
    PodCreatePrebind,
    /// pods/binding CREATE.
    PodBinding,
    /// Any other request (allowed unchanged).
    Other,
    /// A request that could not be decoded (answered with 4xx).
    Invalid,
}

impl Operation {
    /// Every operation, in metrics order.
    pub const ALL: [Operation; 6] = [
        Operation::PodCreate,
        Operation::PodCreateNodeName,
        Operation::PodCreatePrebind,
        Operation::PodBinding,
        Operation::Other,
        Operation::Invalid,
    ];

    /// The metrics label.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::PodCreate => "pod_create",
            Operation::PodCreateNodeName => "pod_create_node_name",
            Operation::PodCreatePrebind => "pod_create_prebind",
            Operation::PodBinding => "pod_binding",
            Operation::Other => "other",
            Operation::Invalid => "invalid",
        }
    }
}

/// The answer to one request, before its plan runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Which behaviour applied.
    pub operation: Operation,
    /// `Some(message)` to deny.
    pub denial: Option<String>,
    /// JSONPatch operations (empty: no patch).
    pub patch: Vec<serde_json::Value>,
    /// The writes the object needs once it is stored (PreBind): carried out by the controller
    /// (`crate::controller`), never at admission.
    pub plan: Vec<Action>,
    /// Warnings for the client.
    pub warnings: Vec<String>,
}

impl Decision {
    /// Allowed, nothing to do.
    pub fn allow(operation: Operation) -> Self {
        Decision {
            operation,
            denial: None,
            patch: Vec::new(),
            plan: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Allowed with a warning.
    pub fn allow_with_warning(operation: Operation, warning: impl Into<String>) -> Self {
        let mut d = Self::allow(operation);
        d.warnings.push(warning.into());
        d
    }

    /// Denied.
    pub fn deny(operation: Operation, message: impl Into<String>) -> Self {
        let mut d = Self::allow(operation);
        d.denial = Some(message.into());
        d
    }

    /// True when there is nothing to write.
    pub fn is_passive(&self) -> bool {
        self.plan.is_empty()
    }
}

/// What a request is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// pods CREATE.
    PodCreate,
    /// pods/binding CREATE.
    PodBinding,
    /// Anything else.
    Other,
}

/// Classifies a request by resource, subresource and operation.
pub fn request_kind(request: &AdmissionRequest) -> RequestKind {
    let core_pods = request.resource.group.is_empty() && request.resource.resource == "pods";
    if !core_pods || request.operation != "CREATE" {
        return RequestKind::Other;
    }
    match request.sub_resource.as_str() {
        "" => RequestKind::PodCreate,
        "binding" => RequestKind::PodBinding,
        _ => RequestKind::Other,
    }
}

/// The only fields of a pod the fast path reads: its volumes (which use claims) and how many
/// containers it has. Everything else is skipped by the parser, not decoded.
#[derive(Debug, Default, Deserialize)]
struct PodProbe {
    #[serde(default)]
    spec: Option<ProbeSpec>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProbeSpec {
    #[serde(default)]
    volumes: Option<Vec<ProbeVolume>>,
    #[serde(default)]
    containers: Option<Vec<serde::de::IgnoredAny>>,
    #[serde(default)]
    init_containers: Option<Vec<serde::de::IgnoredAny>>,
    #[serde(default)]
    ephemeral_containers: Option<Vec<serde::de::IgnoredAny>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProbeVolume {
    #[serde(default)]
    persistent_volume_claim: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    ephemeral: Option<serde::de::IgnoredAny>,
}

/// What the cheap look at a raw pod tells: enough to skip it, or to weigh its decoding.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PodShape {
    /// Volumes that use a claim (PVC or generic ephemeral).
    pub claims: usize,
    /// Volumes of any kind.
    pub volumes: usize,
    /// Containers, init and ephemeral ones included.
    pub containers: usize,
}

impl PodShape {
    /// About how many bytes decoding the pod takes (twice the large lists, for the copy a growing
    /// list makes): k8s-openapi holds every volume source inline (3.3 KB a volume, 2.3 KB a
    /// container), so a pod of many small volumes decodes to a hundred times its JSON.
    pub fn decoded_bytes(&self, json_bytes: usize) -> usize {
        let volume = std::mem::size_of::<k8s_openapi::api::core::v1::Volume>();
        let container = std::mem::size_of::<k8s_openapi::api::core::v1::Container>();
        json_bytes
            .saturating_mul(4)
            .saturating_add(self.volumes.saturating_mul(2 * volume))
            .saturating_add(self.containers.saturating_mul(2 * container))
    }
}

/// The shape of a raw pod, reading nothing else. `Err` when the JSON is not an object shaped like a
/// pod.
pub fn pod_shape(raw: &str) -> Result<PodShape, serde_json::Error> {
    let probe: PodProbe = serde_json::from_str(raw)?;
    let Some(spec) = probe.spec else {
        return Ok(PodShape::default());
    };
    let volumes = spec.volumes.unwrap_or_default();
    let count = |v: Option<Vec<serde::de::IgnoredAny>>| v.map_or(0, |v| v.len());
    Ok(PodShape {
        claims: volumes
            .iter()
            .filter(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some())
            .count(),
        volumes: volumes.len(),
        containers: count(spec.containers) + count(spec.init_containers) + count(spec.ephemeral_containers),
    })
}

/// How many of a raw pod's volumes use a claim (see [`pod_shape`]).
pub fn count_pod_claims(raw: &str) -> Result<usize, serde_json::Error> {
    pod_shape(raw).map(|s| s.claims)
}

/// Whether a raw pod uses any claim (see [`pod_shape`]).
pub fn pod_uses_claims(raw: &str) -> Result<bool, serde_json::Error> {
    count_pod_claims(raw).map(|n| n > 0)
}

/// A JSONPatch operation that sets annotation `key` on `pod` (creating the map when it has none).
pub fn annotation_patch(pod: &Pod, key: &str, value: &str) -> serde_json::Value {
    if pod.metadata.annotations.is_some() {
        // RFC 6901: '~' and '/' in a key are escaped.
        let escaped = key.replace('~', "~0").replace('/', "~1");
        serde_json::json!({"op": "add", "path": format!("/metadata/annotations/{escaped}"), "value": value})
    } else {
        serde_json::json!({"op": "add", "path": "/metadata/annotations", "value": {key: value}})
    }
}

/// The `Binding` object of a pods/binding request: the target node.
#[derive(Debug, Deserialize)]
struct BindingObject {
    #[serde(default)]
    target: Option<BindingTarget>,
}

#[derive(Debug, Deserialize)]
struct BindingTarget {
    #[serde(default)]
    name: String,
}

/// The target node of a Binding object (`Err` when malformed, `Ok("")` when it names none).
pub fn binding_target(raw: &str) -> Result<String, serde_json::Error> {
    let binding: BindingObject = serde_json::from_str(raw)?;
    Ok(binding.target.map(|t| t.name).unwrap_or_default())
}

/// The namespace labels' or the pod annotation's opt-in.
pub fn opted_in(pod: &Pod, namespace_labels: Option<&Labels>) -> bool {
    let annotated = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(OPT_IN_KEY))
        .is_some_and(|v| v == OPT_IN_VALUE);
    annotated
        || namespace_labels
            .and_then(|l| l.get(OPT_IN_KEY))
            .is_some_and(|v| v == OPT_IN_VALUE)
}

/// Whether admission pre-binding applies to `pod`: it opted in (annotation or namespace label) and its
/// schedulerName names a profile of the view's engine. kube-scheduler ignores a pod whose
/// schedulerName names no profile it runs (another scheduler's pod); so does the webhook: that
/// scheduler places the pod, and its volumes are checked at pods/binding whichever scheduler binds it.
///
/// A pod with ResourceClaims (DRA) is never pre-bound: choosing its node here would mean choosing its
/// devices, and only kube-scheduler allocates devices (an outside allocator would race its in-flight
/// allocations). Such pods pass through unchanged.
pub fn wants_prebind(pod: &Pod, view: &dyn ClusterView) -> bool {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    !uses_resource_claims(pod)
        && opted_in(pod, view.namespace_labels(namespace).as_ref())
        && view.engine().profile_for(pod).is_ok()
}

/// True when the pod has `spec.resourceClaims` (Dynamic Resource Allocation): the webhook leaves its
/// scheduling to kube-scheduler, which allocates the devices.
pub fn uses_resource_claims(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .is_some_and(|c| !c.is_empty())
}

/// The claims a pod's volumes name, as `(claim name, is generic ephemeral)`.
pub fn pod_claims(pod: &Pod) -> Vec<(String, bool)> {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| sched_core::volumes::volume_claim_name(pod, v))
        .collect()
}

/// True when every claim the pod uses exists and is fully bound (nothing for PreBind to do).
pub fn claims_all_bound(pod: &Pod, lookup: impl Fn(&str) -> Option<Arc<PersistentVolumeClaim>>) -> bool {
    pod_claims(pod)
        .iter()
        .all(|(name, _)| lookup(name).is_some_and(|c| sched_core::volumes::is_claim_fully_bound(&c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_finds_claims_only() {
        assert!(!pod_uses_claims(r#"{"spec":{"containers":[{"name":"c"}]}}"#).expect("ok"));
        assert!(!pod_uses_claims(r#"{"spec":{"volumes":[{"name":"v","emptyDir":{}}]}}"#).expect("ok"));
        assert!(
            pod_uses_claims(
                r#"{"spec":{"volumes":[{"name":"v","persistentVolumeClaim":{"claimName":"c"}}]}}"#
            )
            .expect("ok")
        );
        assert!(
            pod_uses_claims(r#"{"spec":{"volumes":[{"name":"v","ephemeral":{"volumeClaimTemplate":{}}}]}}"#)
                .expect("ok")
        );
        assert!(!pod_uses_claims(r#"{}"#).expect("ok"));
        assert!(pod_uses_claims(r#""pod""#).is_err());
        assert!(pod_uses_claims(r#"{"spec":{"volumes":7}}"#).is_err());
    }

    #[test]
    fn binding_targets() {
        assert_eq!(
            binding_target(r#"{"kind":"Binding","target":{"kind":"Node","name":"n1"}}"#).expect("ok"),
            "n1"
        );
        assert_eq!(binding_target("{}").expect("ok"), "");
        assert!(binding_target("3").is_err());
    }

    #[test]
    fn opt_in_by_annotation_or_namespace_label() {
        let mut pod = Pod::default();
        assert!(!opted_in(&pod, None));
        let ns: Labels = [(OPT_IN_KEY.to_string(), OPT_IN_VALUE.to_string())].into();
        assert!(opted_in(&pod, Some(&ns)));
        let other: Labels = [(OPT_IN_KEY.to_string(), "never".to_string())].into();
        assert!(!opted_in(&pod, Some(&other)));
        pod.metadata.annotations = Some([(OPT_IN_KEY.to_string(), OPT_IN_VALUE.to_string())].into());
        assert!(opted_in(&pod, Some(&other)));
    }
}
