//! Scheduling shapes: pods that kube-scheduler cannot tell apart get the same answer, so a batch of
//! pending pods is evaluated once per shape (the replicas of one template are one shape).
//!
//! A shape is the part of a pod the default plugins read: its namespace, labels, spec and nominated
//! node, less what differs between replicas without changing a verdict (name, uid, hostname,
//! timestamps, owner references, status conditions). Pods whose claims are named after the pod
//! (generic ephemeral volumes, ResourceClaims made from templates) keep their name in the shape:
//! their claims differ even when their specs do not.

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use serde::Serialize;

use crate::snapshot::PodInfo;

/// The bytes that identify a pod's shape (equal bytes, same scheduling answer).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShapeKey(Vec<u8>);

#[derive(Serialize)]
struct Shape<'a> {
    namespace: &'a str,
    /// Only for pods whose claims are named after them.
    name: Option<&'a str>,
    labels: Option<&'a std::collections::BTreeMap<String, String>>,
    terminating: bool,
    nominated_node: &'a str,
    spec: Option<PodSpec>,
}

/// True when the pod's volumes or claims are named after the pod itself.
fn claims_named_after_pod(pod: &Pod) -> bool {
    let Some(spec) = &pod.spec else {
        return false;
    };
    let ephemeral = spec.volumes.iter().flatten().any(|v| v.ephemeral.is_some());
    let claims = spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty());
    ephemeral || claims
}

/// The shape of `pod`.
pub fn shape_key(pod: &PodInfo) -> ShapeKey {
    let spec = pod.pod.spec.as_ref().map(|s| PodSpec {
        hostname: None,
        subdomain: None,
        ..s.clone()
    });
    let shape = Shape {
        namespace: pod.namespace(),
        name: claims_named_after_pod(&pod.pod).then(|| pod.name()),
        labels: pod.pod.metadata.labels.as_ref(),
        terminating: pod.is_terminating(),
        nominated_node: pod.nominated_node_name(),
        spec,
    };
    // Serializing plain data cannot fail; an empty key would only merge nothing-like pods.
    ShapeKey(serde_json::to_vec(&shape).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{pod, toleration};

    fn key(p: k8s_openapi::api::core::v1::Pod) -> ShapeKey {
        shape_key(&PodInfo::new(p))
    }

    #[test]
    fn replicas_of_one_template_share_a_shape() {
        let a = pod("web-1")
            .cpu("500m")
            .label("app", "web")
            .with(|p| p.metadata.uid = Some("u1".into()))
            .obj();
        let mut b = pod("web-2")
            .cpu("500m")
            .label("app", "web")
            .with(|p| p.metadata.uid = Some("u2".into()))
            .obj();
        b.spec.as_mut().unwrap().hostname = Some("web-2".into());
        assert_eq!(key(a), key(b));
    }

    #[test]
    fn anything_a_plugin_reads_makes_another_shape() {
        let base = || pod("web-1").cpu("500m").label("app", "web");
        let same = key(base().obj());
        for (what, other) in [
            ("request", pod("web-1").cpu("600m").label("app", "web").obj()),
            ("label", pod("web-1").cpu("500m").label("app", "api").obj()),
            ("namespace", base().namespace("other").obj()),
            ("nominated node", base().nominated("n1").obj()),
            (
                "toleration",
                base()
                    .toleration(toleration("k", "Equal", "v", "NoSchedule"))
                    .obj(),
            ),
            ("priority", base().priority(10).obj()),
        ] {
            assert_ne!(same, key(other), "{what}");
        }
    }

    #[test]
    fn pods_with_claims_named_after_them_are_their_own_shape() {
        let with_ephemeral = |name: &str| {
            let mut p = pod(name).cpu("500m").obj();
            p.spec.as_mut().unwrap().volumes = Some(vec![k8s_openapi::api::core::v1::Volume {
                name: "scratch".into(),
                ephemeral: Some(Default::default()),
                ..Default::default()
            }]);
            p
        };
        assert_ne!(key(with_ephemeral("a")), key(with_ephemeral("b")));
    }
}
