//! The workload a pod belongs to, as a person names it: `deployment/web` (through its ReplicaSet),
//! `statefulset/db`, `job/x`, `daemonset/agent`, or `pod/NAME` for a pod no controller owns. Also
//! the reverse: the pods of a workload argument such as `deployment/web`.

use std::collections::HashMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::snapshot::{PodInfo, Snapshot};

/// Why a workload argument is not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    /// Not `KIND/NAME`, or a kind triage does not expand.
    #[error(
        "{0:?} is not a workload: use KIND/NAME with KIND one of deployment, replicaset, statefulset, \
         daemonset, job, pod (e.g. deployment/web)"
    )]
    NotAWorkload(String),
}

/// A workload: its kind (lower case, as kubectl's resource names) and name, in a namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct Workload {
    /// The namespace.
    pub namespace: String,
    /// `deployment`, `replicaset`, `statefulset`, `daemonset`, `job`, `replicationcontroller`, or
    /// `pod` for a pod without a controller (the kind of another controller, lower case, otherwise).
    pub kind: String,
    /// The workload's name.
    pub name: String,
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kind, self.name)
    }
}

/// kubectl's short names and plurals for the kinds a workload argument may name.
fn canonical_kind(kind: &str) -> Option<&'static str> {
    Some(match kind.to_ascii_lowercase().as_str() {
        "deployment" | "deployments" | "deploy" => "deployment",
        "replicaset" | "replicasets" | "rs" => "replicaset",
        "statefulset" | "statefulsets" | "sts" => "statefulset",
        "daemonset" | "daemonsets" | "ds" => "daemonset",
        "job" | "jobs" => "job",
        "pod" | "pods" | "po" => "pod",
        _ => return None,
    })
}

/// Parses `deployment/web` (kubectl's spellings: `deploy/web`, `deployments/web`, `sts/db`, ...) in
/// `namespace`.
pub fn parse_workload(text: &str, namespace: &str) -> Result<Workload, WorkloadError> {
    let (kind, name) = text
        .split_once('/')
        .filter(|(_, name)| !name.is_empty() && !name.contains('/'))
        .ok_or_else(|| WorkloadError::NotAWorkload(text.to_string()))?;
    let kind = canonical_kind(kind).ok_or_else(|| WorkloadError::NotAWorkload(text.to_string()))?;
    Ok(Workload {
        namespace: namespace.to_string(),
        kind: kind.to_string(),
        name: name.to_string(),
    })
}

fn controller_of(refs: Option<&Vec<OwnerReference>>) -> Option<&OwnerReference> {
    refs?.iter().find(|r| r.controller == Some(true))
}

/// Resolves pods to their workloads: a ReplicaSet's owner Deployment is looked up in the snapshot, or,
/// when the ReplicaSet is not in it, recognised by the pod's `pod-template-hash` suffix.
pub struct WorkloadIndex {
    /// `namespace/replicaset` → its Deployment.
    deployment_of_replica_set: HashMap<String, String>,
}

impl WorkloadIndex {
    /// The index of `snapshot`'s ReplicaSets.
    pub fn new(snapshot: &Snapshot) -> Self {
        let deployment_of_replica_set = snapshot
            .replica_sets
            .iter()
            .filter_map(|rs| {
                let owner = controller_of(rs.metadata.owner_references.as_ref())?;
                (owner.kind == "Deployment").then(|| {
                    (
                        format!(
                            "{}/{}",
                            rs.metadata.namespace.as_deref().unwrap_or(""),
                            rs.metadata.name.as_deref().unwrap_or("")
                        ),
                        owner.name.clone(),
                    )
                })
            })
            .collect();
        WorkloadIndex {
            deployment_of_replica_set,
        }
    }

    /// The workload `pod` belongs to.
    pub fn workload_of(&self, pod: &PodInfo) -> Workload {
        let namespace = pod.namespace().to_string();
        let Some(owner) = controller_of(pod.pod.metadata.owner_references.as_ref()) else {
            return Workload {
                namespace,
                kind: "pod".into(),
                name: pod.name().to_string(),
            };
        };
        if owner.kind == "ReplicaSet" {
            let key = format!("{namespace}/{}", owner.name);
            if let Some(deployment) = self.deployment_of_replica_set.get(&key) {
                return Workload {
                    namespace,
                    kind: "deployment".into(),
                    name: deployment.clone(),
                };
            }
            // A Deployment names its ReplicaSets NAME-HASH, HASH being the pods' pod-template-hash.
            let hash = pod
                .labels()
                .and_then(|l| l.get("pod-template-hash"))
                .map(String::as_str)
                .unwrap_or("");
            if let Some(deployment) = owner
                .name
                .strip_suffix(hash)
                .and_then(|n| n.strip_suffix('-'))
                .filter(|n| !hash.is_empty() && !n.is_empty())
            {
                return Workload {
                    namespace,
                    kind: "deployment".into(),
                    name: deployment.to_string(),
                };
            }
        }
        Workload {
            namespace,
            kind: owner.kind.to_ascii_lowercase(),
            name: owner.name.clone(),
        }
    }

    /// True when `pod` belongs to `workload` (a ReplicaSet argument also matches the pods a Deployment
    /// owns through it).
    pub fn belongs_to(&self, pod: &PodInfo, workload: &Workload) -> bool {
        if pod.namespace() != workload.namespace {
            return false;
        }
        if workload.kind == "pod" {
            return pod.name() == workload.name;
        }
        if workload.kind == "replicaset" {
            return controller_of(pod.pod.metadata.owner_references.as_ref())
                .is_some_and(|o| o.kind == "ReplicaSet" && o.name == workload.name);
        }
        &self.workload_of(pod) == workload
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::ClusterObjects;
    use crate::testing::pod;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn owned(kind: &str, name: &str) -> OwnerReference {
        OwnerReference {
            api_version: "apps/v1".into(),
            kind: kind.into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            controller: Some(true),
            block_owner_deletion: None,
        }
    }

    fn pod_of(name: &str, owner: Option<OwnerReference>, hash: Option<&str>) -> PodInfo {
        let mut b = pod(name);
        if let Some(h) = hash {
            b = b.label("pod-template-hash", h);
        }
        b.with(|p| p.metadata.owner_references = owner.map(|o| vec![o]))
            .info()
    }

    #[test]
    fn pods_are_named_by_the_workload_a_person_knows() {
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some("api-7d9f".into()),
                namespace: Some("default".into()),
                owner_references: Some(vec![owned("Deployment", "api")]),
                ..Default::default()
            },
            ..Default::default()
        };
        let snapshot = Snapshot::new(ClusterObjects {
            replica_sets: vec![rs],
            ..Default::default()
        });
        let index = WorkloadIndex::new(&snapshot);
        for (p, want) in [
            (
                pod_of("api-7d9f-x", Some(owned("ReplicaSet", "api-7d9f")), None),
                "deployment/api",
            ),
            // Not in the snapshot: recognised by the pod-template-hash suffix.
            (
                pod_of("web-5c6b-y", Some(owned("ReplicaSet", "web-5c6b")), Some("5c6b")),
                "deployment/web",
            ),
            (
                pod_of("bare-rs-z", Some(owned("ReplicaSet", "bare-rs")), None),
                "replicaset/bare-rs",
            ),
            (
                pod_of("db-0", Some(owned("StatefulSet", "db")), None),
                "statefulset/db",
            ),
            (pod_of("x-abc", Some(owned("Job", "x")), None), "job/x"),
            (pod_of("solo", None, None), "pod/solo"),
        ] {
            assert_eq!(index.workload_of(&p).to_string(), want, "{}", p.name());
        }
        let api = parse_workload("deploy/api", "default").unwrap();
        assert!(index.belongs_to(
            &pod_of("api-7d9f-x", Some(owned("ReplicaSet", "api-7d9f")), None),
            &api
        ));
        assert!(!index.belongs_to(&pod_of("solo", None, None), &api));
    }

    #[test]
    fn workload_arguments_parse_like_kubectl() {
        for (text, want) in [
            ("deployment/web", "deployment/web"),
            ("deploy/web", "deployment/web"),
            ("sts/db", "statefulset/db"),
            ("jobs/x", "job/x"),
            ("pod/p", "pod/p"),
        ] {
            assert_eq!(parse_workload(text, "ns").unwrap().to_string(), want);
        }
        for bad in ["web", "service/web", "deployment/", "a/b/c"] {
            assert!(parse_workload(bad, "ns").is_err(), "{bad}");
        }
    }
}
