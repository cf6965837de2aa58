//! `explain --node`'s resource breakdown: for cpu, memory, pods and every other resource the pod
//! requests, what the node has, what its pods request (as NodeResourcesFit adds them up: bound pods,
//! plus pods nominated to the node with a priority at least the pod's, which kube-scheduler counts as
//! if already there), what is free, what the pod asks, and which pods use the most.

use std::sync::Arc;

use sched_core::diagnosis::compute_pod_resource_request;
use sched_core::features::FeatureGates;
use sched_core::resource::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resource};
use sched_core::{NodeInfo, PodInfo};
use serde::Serialize;

/// The biggest users listed per resource; the rest are counted.
pub const MAX_PODS: usize = 10;

/// One pod's share of a resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodUse {
    /// `namespace/name`.
    pub pod: String,
    /// Its request (cpu in millicores, memory and storage in bytes, others in units).
    pub request: i64,
    /// True for a pod nominated to the node rather than bound to it.
    pub nominated: bool,
}

/// One resource on the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceUse {
    /// The resource name (`cpu`, `memory`, `pods`, `nvidia.com/gpu`, ...).
    pub resource: String,
    /// The node's allocatable amount (cpu in millicores, memory and storage in bytes, others in units).
    pub allocatable: i64,
    /// The sum of the requests of the pods counted (for `pods`, how many there are).
    pub requested: i64,
    /// `allocatable - requested` (negative when the node is overcommitted).
    pub free: i64,
    /// What the pod being explained asks (1 for `pods`).
    pub pod_request: i64,
    /// True when the ask is within what is free (a zero ask always is, as NodeResourcesFit sees it).
    pub fits: bool,
    /// The pods that request it, largest first (ties by name), at most [`MAX_PODS`]; empty for `pods`,
    /// where each counts one.
    pub pods: Vec<PodUse>,
    /// How many more pods request it.
    pub more_pods: usize,
}

/// The resources a breakdown shows: cpu, memory and pods always, then whatever else the pod requests
/// (ephemeral-storage, extended resources, hugepages), by name.
fn resources_shown(ask: &Resource) -> Vec<String> {
    let mut names = vec![CPU.to_string(), MEMORY.to_string(), PODS.to_string()];
    if ask.ephemeral_storage > 0 {
        names.push(EPHEMERAL_STORAGE.to_string());
    }
    names.extend(
        ask.scalar_resources
            .iter()
            .filter(|(_, v)| **v > 0)
            .map(|(k, _)| k.clone()),
    );
    names
}

/// The breakdown of `node` for `pod`; `nominated` are the pods nominated to the node that the filter
/// counts for this pod (`Framework::nominated_pods_for`); `features` are the gates NodeResourcesFit
/// was built with (PodLevelResources decides the pod's ask).
pub fn breakdown(
    pod: &PodInfo,
    node: &NodeInfo,
    nominated: &[Arc<PodInfo>],
    features: &FeatureGates,
) -> Vec<ResourceUse> {
    let ask = compute_pod_resource_request(&pod.pod, features.pod_level_resources);
    let counted: Vec<(&PodInfo, bool)> = node
        .pods
        .iter()
        .map(|p| (p.as_ref(), false))
        .chain(nominated.iter().map(|p| (p.as_ref(), true)))
        .collect();
    resources_shown(&ask)
        .into_iter()
        .map(|name| {
            if name == PODS {
                let requested = counted.len() as i64;
                let allocatable = node.allocatable.allowed_pod_number;
                return ResourceUse {
                    resource: name,
                    allocatable,
                    requested,
                    free: allocatable - requested,
                    pod_request: 1,
                    fits: requested < allocatable,
                    pods: Vec::new(),
                    more_pods: 0,
                };
            }
            let mut users: Vec<PodUse> = counted
                .iter()
                .map(|(p, nominated)| PodUse {
                    pod: p.key(),
                    request: p.resource.resource.get(&name),
                    nominated: *nominated,
                })
                .filter(|u| u.request > 0)
                .collect();
            let requested = users.iter().fold(0_i64, |sum, u| sum.saturating_add(u.request));
            users.sort_by(|a, b| b.request.cmp(&a.request).then_with(|| a.pod.cmp(&b.pod)));
            let more_pods = users.len().saturating_sub(MAX_PODS);
            users.truncate(MAX_PODS);
            let allocatable = node.allocatable.get(&name);
            let pod_request = ask.get(&name);
            let free = allocatable.saturating_sub(requested);
            ResourceUse {
                resource: name,
                allocatable,
                requested,
                free,
                pod_request,
                fits: pod_request == 0 || pod_request <= free,
                pods: users,
                more_pods,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{
        Container, Node, NodeStatus, Pod, PodSpec, PodStatus, ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn list(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect()
    }

    fn pod(name: &str, requests: &[(&str, &str)]) -> PodInfo {
        PodInfo::new(Pod {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                node_name: Some("n1".into()),
                containers: vec![Container {
                    name: "c".into(),
                    resources: Some(ResourceRequirements {
                        requests: Some(list(requests)),
                        ..ResourceRequirements::default()
                    }),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
            status: Some(PodStatus::default()),
        })
    }

    fn node(allocatable: &[(&str, &str)], pods: Vec<PodInfo>) -> NodeInfo {
        let mut info = NodeInfo::new(Arc::new(Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                ..ObjectMeta::default()
            },
            status: Some(NodeStatus {
                allocatable: Some(list(allocatable)),
                ..NodeStatus::default()
            }),
            ..Node::default()
        }));
        for p in pods {
            info.add_pod(Arc::new(p));
        }
        info
    }

    #[test]
    fn rows_are_cpu_memory_pods_then_what_the_pod_asks() {
        let n = node(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")], vec![]);
        for (requests, want) in [
            (vec![("cpu", "1")], vec!["cpu", "memory", "pods"]),
            (
                vec![
                    ("cpu", "1"),
                    ("nvidia.com/gpu", "1"),
                    ("ephemeral-storage", "1Gi"),
                ],
                vec!["cpu", "memory", "pods", "ephemeral-storage", "nvidia.com/gpu"],
            ),
        ] {
            let rows = breakdown(&pod("me", &requests), &n, &[], &FeatureGates::v1_37());
            let names: Vec<&str> = rows.iter().map(|r| r.resource.as_str()).collect();
            assert_eq!(names, want);
        }
    }

    #[test]
    fn requested_free_and_fit_add_up_like_the_filter() {
        let n = node(
            &[
                ("cpu", "4"),
                ("memory", "8Gi"),
                ("pods", "3"),
                ("example.com/x", "2"),
            ],
            vec![
                pod("a", &[("cpu", "1"), ("memory", "1Gi")]),
                pod("b", &[("cpu", "2500m"), ("example.com/x", "2")]),
            ],
        );
        let nominated = vec![Arc::new(pod("n", &[("memory", "2Gi")]))];
        let me = pod("me", &[("cpu", "1"), ("memory", "1Gi"), ("example.com/x", "1")]);
        let rows = breakdown(&me, &n, &nominated, &FeatureGates::v1_37());
        let cpu = &rows[0];
        assert_eq!(
            (cpu.allocatable, cpu.requested, cpu.free, cpu.pod_request),
            (4000, 3500, 500, 1000)
        );
        assert!(!cpu.fits);
        assert_eq!(
            cpu.pods
                .iter()
                .map(|u| (u.pod.as_str(), u.request))
                .collect::<Vec<_>>(),
            [("ns/b", 2500), ("ns/a", 1000)]
        );
        let memory = &rows[1];
        assert_eq!(memory.requested, 3 << 30);
        assert!(memory.fits);
        assert_eq!(memory.pods[0].pod, "ns/n");
        assert!(memory.pods[0].nominated);
        let pods = &rows[2];
        assert_eq!((pods.allocatable, pods.requested, pods.free), (3, 3, 0));
        assert!(!pods.fits && pods.pods.is_empty());
        let x = &rows[3];
        assert_eq!((x.resource.as_str(), x.free, x.fits), ("example.com/x", 0, false));
    }

    #[test]
    fn at_most_ten_pods_are_listed_then_counted() {
        let pods = (0..13)
            .map(|i| pod(&format!("p{i:02}"), &[("cpu", &format!("{}m", 100 + i))]))
            .collect();
        let n = node(&[("cpu", "64"), ("memory", "8Gi"), ("pods", "110")], pods);
        let rows = breakdown(&pod("me", &[("cpu", "1")]), &n, &[], &FeatureGates::v1_37());
        assert_eq!(rows[0].pods.len(), MAX_PODS);
        assert_eq!(rows[0].more_pods, 3);
        assert_eq!(rows[0].pods[0].pod, "ns/p12");
        // Nobody requests memory: no users listed.
        assert!(rows[1].pods.is_empty() && rows[1].more_pods == 0);
    }
}
