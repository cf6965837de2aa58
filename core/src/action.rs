//! Side effects as data. Decisions return `Action`s; the binaries execute them in one place (`apply`,
//! feature `kube`), which lets `--dry-run` print exactly what would happen and keeps the engine pure.

use serde::Serialize;

/// A reference to a namespaced object, with the UID (and, for pods, the resourceVersion) it must still
/// have when the action runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ObjectRef {
    /// Namespace ("" for cluster-scoped objects).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID, when known: a precondition so that a recreated object of the same name is not touched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// The resourceVersion the decision was made on, when known: a precondition of every write to the
    /// object (pods: DELETE and Eviction preconditions, status patches carrying it), so that an object
    /// changed since the decision is reported as a conflict instead of being written over.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
}

impl ObjectRef {
    /// A reference by namespace and name only (no preconditions).
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ObjectRef {
            namespace: namespace.into(),
            name: name.into(),
            uid: None,
            resource_version: None,
        }
    }

    /// The reference to an object with this metadata: namespace, name, and its UID and resourceVersion
    /// (empty strings count as unknown) as preconditions.
    pub fn from_meta(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Self {
        let known = |v: &Option<String>| v.clone().filter(|v| !v.is_empty());
        ObjectRef {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            uid: known(&meta.uid),
            resource_version: known(&meta.resource_version),
        }
    }

    /// The same reference with `uid` as its UID precondition.
    pub fn with_uid(mut self, uid: impl Into<String>) -> Self {
        self.uid = Some(uid.into()).filter(|u: &String| !u.is_empty());
        self
    }

    /// The same reference with `resource_version` as its resourceVersion precondition.
    pub fn with_resource_version(mut self, resource_version: impl Into<String>) -> Self {
        self.resource_version = Some(resource_version.into()).filter(|v: &String| !v.is_empty());
        self
    }

    /// `namespace/name` (or `name` when cluster-scoped).
    pub fn key(&self) -> String {
        if self.namespace.is_empty() {
            self.name.clone()
        } else {
            format!("{}/{}", self.namespace, self.name)
        }
    }
}

/// A pod condition to set through the status subresource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodConditionPatch {
    /// Condition type, e.g. "DisruptionTarget" or "PodScheduled".
    #[serde(rename = "type")]
    pub type_: String,
    /// "True" or "False".
    pub status: String,
    /// Machine-readable reason, e.g. "PreemptionByScheduler".
    pub reason: String,
    /// Human-readable message.
    pub message: String,
}

/// An event to record (events.k8s.io/v1 semantics: reason, action, note, regarding, related).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventSpec {
    /// The object the event is about.
    pub regarding: ObjectRef,
    /// A related object (e.g. the preemptor for a `Preempted` event).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub related: Option<ObjectRef>,
    /// "Normal" or "Warning".
    #[serde(rename = "type")]
    pub type_: String,
    /// e.g. "Preempted", "FailedScheduling", "Scheduled".
    pub reason: String,
    /// e.g. "Preempting", "Scheduling", "Binding".
    pub action: String,
    /// The note (message).
    pub note: String,
    /// The `reportingController` to record: kube-scheduler reports as the profile's scheduler name
    /// (`default-scheduler`). None: the writer's field manager.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reporting_controller: Option<String>,
}

/// One side effect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "PascalCase")]
pub enum Action {
    /// DELETE a pod (kube-scheduler's preemption does a plain delete).
    DeletePod {
        /// The pod.
        pod: ObjectRef,
    },
    /// POST an Eviction for a pod (honours PodDisruptionBudgets; 429 means blocked).
    EvictPod {
        /// The pod.
        pod: ObjectRef,
    },
    /// Set a condition in a pod's status.
    SetPodCondition {
        /// The pod.
        pod: ObjectRef,
        /// The condition.
        condition: PodConditionPatch,
    },
    /// Set (or with "" clear) a pod's `status.nominatedNodeName`.
    SetNominatedNodeName {
        /// The pod.
        pod: ObjectRef,
        /// The node, or "" to clear.
        node: String,
    },
    /// Set a PV's claimRef (static binding; kube-scheduler's PreBind), with
    /// `pv.kubernetes.io/bound-by-controller: "yes"` unless the PV was pre-bound.
    BindPv {
        /// The PersistentVolume (namespace "").
        pv: ObjectRef,
        /// The claim it is bound to.
        claim: ObjectRef,
        /// The PV's resourceVersion the decision was made on.
        #[serde(skip_serializing_if = "Option::is_none")]
        resource_version: Option<String>,
    },
    /// Annotate a PVC (`volume.kubernetes.io/selected-node: <node>`: dynamic provisioning's trigger).
    AnnotatePvc {
        /// The claim.
        pvc: ObjectRef,
        /// Annotation key.
        key: String,
        /// Annotation value.
        value: String,
        /// The PVC's resourceVersion the decision was made on.
        #[serde(skip_serializing_if = "Option::is_none")]
        resource_version: Option<String>,
    },
    /// POST pods/binding.
    BindPod {
        /// The pod.
        pod: ObjectRef,
        /// Target node.
        node: String,
    },
    /// Record an event.
    Event(EventSpec),
}

impl Action {
    /// A one-line description for plans and progress output.
    pub fn describe(&self) -> String {
        match self {
            Action::DeletePod { pod } => format!("delete pod {}", pod.key()),
            Action::EvictPod { pod } => format!("evict pod {}", pod.key()),
            Action::SetPodCondition { pod, condition } => format!(
                "set condition {}={} ({}) on pod {}",
                condition.type_,
                condition.status,
                condition.reason,
                pod.key()
            ),
            Action::SetNominatedNodeName { pod, node } if node.is_empty() => {
                format!("clear nominatedNodeName of pod {}", pod.key())
            }
            Action::SetNominatedNodeName { pod, node } => {
                format!("set nominatedNodeName={} on pod {}", node, pod.key())
            }
            Action::BindPv { pv, claim, .. } => {
                format!("bind persistentvolume {} to claim {}", pv.name, claim.key())
            }
            Action::AnnotatePvc { pvc, key, value, .. } => {
                format!("annotate persistentvolumeclaim {} {}={}", pvc.key(), key, value)
            }
            Action::BindPod { pod, node } => format!("bind pod {} to node {}", pod.key(), node),
            Action::Event(e) => {
                format!(
                    "event {} {} on {}: {}",
                    e.type_,
                    e.reason,
                    e.regarding.key(),
                    e.note
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod_ref() -> ObjectRef {
        ObjectRef::new("ns", "p")
    }

    #[test]
    fn json_uses_kubernetes_field_names() {
        let condition = Action::SetPodCondition {
            pod: pod_ref(),
            condition: PodConditionPatch {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                reason: "PreemptionByScheduler".into(),
                message: "m".into(),
            },
        };
        let event = Action::Event(EventSpec {
            regarding: pod_ref(),
            related: None,
            type_: "Normal".into(),
            reason: "Preempted".into(),
            action: "Preempting".into(),
            note: "n".into(),
            reporting_controller: None,
        });
        let condition = serde_json::to_value(&condition).expect("json");
        assert_eq!(condition["kind"], "SetPodCondition");
        assert_eq!(condition["condition"]["type"], "DisruptionTarget");
        assert!(condition["condition"].get("type_").is_none());
        let event = serde_json::to_value(&event).expect("json");
        assert_eq!(event["kind"], "Event");
        assert_eq!(event["type"], "Normal");
        assert!(event.get("type_").is_none());
    }

    #[test]
    fn preconditions_are_serialized_only_when_known() {
        let bare = serde_json::to_value(ObjectRef::new("ns", "p")).expect("json");
        assert_eq!(bare, serde_json::json!({"namespace": "ns", "name": "p"}));
        let meta = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            namespace: Some("ns".into()),
            name: Some("p".into()),
            uid: Some("u1".into()),
            resource_version: Some("42".into()),
            ..Default::default()
        };
        let full = ObjectRef::from_meta(&meta);
        assert_eq!(
            full,
            ObjectRef::new("ns", "p")
                .with_uid("u1")
                .with_resource_version("42")
        );
        assert_eq!(
            serde_json::to_value(&full).expect("json"),
            serde_json::json!({"namespace": "ns", "name": "p", "uid": "u1", "resource_version": "42"})
        );
        let empty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            uid: Some(String::new()),
            resource_version: Some(String::new()),
            ..meta
        };
        assert_eq!(ObjectRef::from_meta(&empty), ObjectRef::new("ns", "p"));
    }
}
