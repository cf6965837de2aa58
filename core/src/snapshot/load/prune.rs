//! The pruning policy: what of each stored object the scheduler never reads, removed by [`Prune`]
//! (a 150,000-pod snapshot stays small in memory). Every loader applies it (files here, the API
//! server in `snapshot::kube`), and the webhook's cache extends it for the kinds it keeps tens of
//! thousands of. [`super::shape`] mirrors it at decode time so dropped fields are never allocated.

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, Node, Pod, PodSpec, PodStatus, PodTemplateSpec, ReplicationController,
    ResourceRequirements, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Annotation key prefixes the engine reads (volume binding, storage classes, CSI migration, DRA
/// extended resources, scheduler hints); every other annotation is dropped.
pub const KEPT_ANNOTATION_PREFIXES: &[&str] = &[
    "volume.kubernetes.io/",
    "volume.beta.kubernetes.io/",
    "pv.kubernetes.io/",
    "scheduler.alpha.kubernetes.io/",
    "scheduler.kubernetes.io/",
    "storage.alpha.kubernetes.io/",
    "storageclass.kubernetes.io/",
    "storageclass.beta.kubernetes.io/",
    "resource.kubernetes.io/",
];

/// True for an annotation the engine may read.
pub fn keep_annotation(key: &str) -> bool {
    KEPT_ANNOTATION_PREFIXES.iter().any(|p| key.starts_with(p))
}

/// Drops managedFields and annotations no plugin reads. Labels, owner references, uid,
/// resourceVersion and timestamps stay (selectors, controllers, preconditions, preemption order).
pub fn prune_metadata(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
    retain_annotations(meta, keep_annotation);
}

/// Keeps the annotations whose key `keep` accepts, and no map at all when none is left. The engine's
/// policy keeps [`keep_annotation`]; an extension of it (the webhook's cache, for the kinds it holds
/// tens of thousands of) narrows that further with its own list.
pub fn retain_annotations(meta: &mut ObjectMeta, keep: impl Fn(&str) -> bool) {
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.retain(|k, _| keep(k));
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
}

/// Keeps only what scheduling reads of a container: name, image (ImageLocality), host ports
/// (NodePorts), resources, and the restart policy that makes an init container a sidecar.
pub fn prune_container(c: &mut Container) {
    let Container {
        name,
        image,
        ports,
        resources,
        restart_policy,
        restart_policy_rules,
        ..
    } = std::mem::take(c);
    let ports = ports
        .map(|ps| {
            ps.into_iter()
                .filter(|p| p.host_port.is_some_and(|hp| hp > 0))
                .collect::<Vec<_>>()
        })
        .filter(|ps| !ps.is_empty());
    let resources = resources.map(without_limits);
    *c = Container {
        name,
        image,
        ports,
        resources,
        restart_policy,
        restart_policy_rules,
        ..Default::default()
    };
}

/// True for volume types no plugin looks at: service-account tokens and other projections, config
/// maps, secrets, downward API and emptyDir (its size limit is not a request).
fn is_scheduling_irrelevant_volume(v: &Volume) -> bool {
    v.projected.is_some()
        || v.config_map.is_some()
        || v.secret.is_some()
        || v.downward_api.is_some()
        || v.empty_dir.is_some()
}

/// Prunes a pod spec: containers as in [`prune_container`], volumes no plugin looks at (see
/// `is_scheduling_irrelevant_volume`), ephemeral containers and the fields only the kubelet reads
/// (DNS, service account, security context, host aliases, pull secrets, readiness gates) dropped.
/// Every scheduling field stays. Vectors of large structs are shrunk to fit: a pod's containers and
/// volumes are most of its memory.
pub fn prune_pod_spec(spec: &mut PodSpec) {
    for c in spec.containers.iter_mut() {
        prune_container(c);
    }
    spec.containers.shrink_to_fit();
    if let Some(init) = spec.init_containers.as_mut() {
        init.iter_mut().for_each(prune_container);
        init.shrink_to_fit();
    }
    if let Some(volumes) = spec.volumes.as_mut() {
        volumes.retain(|v| !is_scheduling_irrelevant_volume(v));
        volumes.shrink_to_fit();
        if volumes.is_empty() {
            spec.volumes = None;
        }
    }
    spec.ephemeral_containers = None;
    spec.automount_service_account_token = None;
    spec.dns_config = None;
    spec.dns_policy = None;
    spec.enable_service_links = None;
    spec.host_aliases = None;
    spec.hostname = None;
    spec.hostname_override = None;
    spec.image_pull_secrets = None;
    spec.readiness_gates = None;
    spec.security_context = None;
    spec.service_account = None;
    spec.service_account_name = None;
    spec.set_hostname_as_fqdn = None;
    spec.share_process_namespace = None;
    spec.subdomain = None;
}

fn prune_container_status(cs: &mut ContainerStatus) {
    let ContainerStatus {
        name,
        allocated_resources,
        resources,
        ..
    } = std::mem::take(cs);
    *cs = ContainerStatus {
        name,
        allocated_resources,
        resources: resources.map(without_limits),
        ..Default::default()
    };
}

/// Container limits only matter to the kubelet (and to alpha DRA node-allocatable resources, off in
/// v1.37); scheduling reads requests. Pod-level limits (`spec.resources`) are kept.
fn without_limits(r: ResourceRequirements) -> ResourceRequirements {
    ResourceRequirements { limits: None, ..r }
}

/// Pod conditions something reads: PodScheduled (the last scheduling message), the in-place resize
/// conditions (requests), DisruptionTarget (preemption skips pods already being disrupted).
const KEPT_POD_CONDITIONS: &[&str] = &[
    "PodScheduled",
    "PodResizePending",
    "PodResizeInProgress",
    "DisruptionTarget",
];

/// Keeps of a pod's status: phase, the conditions in `KEPT_POD_CONDITIONS`,
/// nominatedNodeName, startTime (preemption order), the container statuses' allocated/actual
/// resources and the pod-level ones (in-place resize), and DRA claim statuses.
pub fn prune_pod_status(status: &mut PodStatus) {
    let PodStatus {
        phase,
        conditions,
        nominated_node_name,
        start_time,
        mut container_statuses,
        mut init_container_statuses,
        allocated_resources,
        resources,
        resize,
        resource_claim_statuses,
        extended_resource_claim_status,
        ..
    } = std::mem::take(status);
    for cs in container_statuses
        .iter_mut()
        .flatten()
        .chain(init_container_statuses.iter_mut().flatten())
    {
        prune_container_status(cs);
    }
    let conditions = conditions
        .map(|mut cs| {
            cs.retain(|c| KEPT_POD_CONDITIONS.contains(&c.type_.as_str()));
            cs.shrink_to_fit();
            cs
        })
        .filter(|cs| !cs.is_empty());
    *status = PodStatus {
        phase,
        conditions,
        nominated_node_name,
        start_time,
        container_statuses,
        init_container_statuses,
        allocated_resources,
        resources,
        resize,
        resource_claim_statuses,
        extended_resource_claim_status,
        ..Default::default()
    };
}

/// Prunes a pod: metadata, spec and status as above. Container statuses that cannot change the
/// pod's requests (allocated and actual requests both absent or equal to the spec's, and no
/// infeasible resize) are dropped too: requests then fall back to the spec, with the same result.
pub fn prune_pod(pod: &mut Pod) {
    prune_metadata(&mut pod.metadata);
    if let Some(spec) = pod.spec.as_mut() {
        prune_pod_spec(spec);
    }
    if let Some(status) = pod.status.as_mut() {
        prune_pod_status(status);
    }
    drop_redundant_container_statuses(pod);
}

fn drop_redundant_container_statuses(pod: &mut Pod) {
    let Pod { spec, status, .. } = pod;
    let (Some(spec), Some(status)) = (spec.as_ref(), status.as_mut()) else {
        return;
    };
    let resize_infeasible = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodResizePending")
        .is_some_and(|c| c.reason.as_deref() == Some("Infeasible"));
    if resize_infeasible {
        return;
    }
    let spec_requests = |name: &str| {
        spec.containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .find(|c| c.name == name)
            .map(|c| c.resources.as_ref().and_then(|r| r.requests.as_ref()))
    };
    let redundant = |cs: &ContainerStatus| {
        // A status naming no container of the spec is kept: its lookup order matters in Go.
        let Some(spec_req) = spec_requests(&cs.name) else {
            return false;
        };
        let allocated_same = cs.allocated_resources.is_none() || cs.allocated_resources.as_ref() == spec_req;
        let actual = cs.resources.as_ref().and_then(|r| r.requests.as_ref());
        let actual_same = actual.is_none() || actual == spec_req;
        allocated_same && actual_same
    };
    for list in [
        &mut status.container_statuses,
        &mut status.init_container_statuses,
    ] {
        if let Some(statuses) = list.as_mut() {
            statuses.retain(|cs| !redundant(cs));
            statuses.shrink_to_fit();
            if statuses.is_empty() {
                *list = None;
            }
        }
    }
}

/// Prunes a node: metadata, and the status parts only the kubelet or controllers use (node info,
/// daemon endpoints, attached volumes, config). Allocatable, capacity, images, conditions and
/// declared features stay.
pub fn prune_node(node: &mut Node) {
    prune_metadata(&mut node.metadata);
    if let Some(status) = node.status.as_mut() {
        status.node_info = None;
        status.daemon_endpoints = None;
        status.volumes_attached = None;
        status.volumes_in_use = None;
        status.config = None;
    }
}

fn prune_template(t: &mut PodTemplateSpec) {
    if let Some(meta) = t.metadata.as_mut() {
        prune_metadata(meta);
    }
    if let Some(spec) = t.spec.as_mut() {
        prune_pod_spec(spec);
    }
}

/// Removes what the scheduler never reads from a stored object. The kinds whose metadata is all
/// there is to prune get their impl from the object-kind table (`snapshot::kinds`, `prune metadata`);
/// the `prune own` kinds have theirs here.
pub trait Prune {
    /// Prunes in place. Idempotent: pruning twice equals pruning once.
    fn prune(&mut self);
}

impl Prune for Pod {
    fn prune(&mut self) {
        prune_pod(self);
    }
}

impl Prune for Node {
    fn prune(&mut self) {
        prune_node(self);
    }
}

impl Prune for ReplicaSet {
    fn prune(&mut self) {
        prune_metadata(&mut self.metadata);
        if let Some(t) = self.spec.template.as_mut() {
            prune_template(t);
        }
    }
}

impl Prune for ReplicationController {
    fn prune(&mut self) {
        prune_metadata(&mut self.metadata);
        if let Some(t) = self.spec.as_mut().and_then(|s| s.template.as_mut()) {
            prune_template(t);
        }
    }
}

impl Prune for StatefulSet {
    fn prune(&mut self) {
        prune_metadata(&mut self.metadata);
        prune_template(&mut self.spec.template);
        for claim in self.spec.volume_claim_templates.iter_mut().flatten() {
            prune_metadata(&mut claim.metadata);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::snapshot::Snapshot;
    use crate::snapshot::load::tests::assert_same;
    use crate::snapshot::requests::calculate_resource;
    use crate::testing::generate::{GenerateParams, generate};

    #[test]
    fn pruning_keeps_what_scheduling_reads() {
        let params = GenerateParams::new(30, 1_500, 3, 2);
        let raw = generate(&params);
        let mut pruned = raw.clone();
        pruned.prune();

        // Requests (and so every resource plugin) are unchanged by pruning, pod by pod.
        for (a, b) in raw.pods.iter().zip(&pruned.pods) {
            let v1_37 = crate::features::FeatureGates::v1_37();
            assert_eq!(calculate_resource(a, &v1_37), calculate_resource(b, &v1_37));
        }
        // The snapshot's accounting and parsed terms are unchanged.
        let before = Snapshot::new(raw.clone());
        let after = Snapshot::new(pruned.clone());
        for (a, b) in before.nodes().iter().zip(after.nodes()) {
            assert_eq!(a.requested, b.requested);
            assert_eq!(a.non_zero_requested, b.non_zero_requested);
            assert_eq!(a.used_ports, b.used_ports);
            assert_eq!(a.image_states, b.image_states);
            assert_eq!(a.pvc_ref_counts, b.pvc_ref_counts);
            assert_eq!(a.pods_with_affinity.len(), b.pods_with_affinity.len());
        }
        assert_eq!(before.pending_pods.len(), after.pending_pods.len());

        for (a, b) in raw.pods.iter().zip(&pruned.pods) {
            let (sa, sb) = (a.spec.as_ref().unwrap(), b.spec.as_ref().unwrap());
            assert_eq!(a.metadata.labels, b.metadata.labels);
            assert_eq!(a.metadata.owner_references, b.metadata.owner_references);
            assert_eq!(a.metadata.uid, b.metadata.uid);
            assert!(b.metadata.managed_fields.is_none());
            assert!(
                b.metadata.annotations.is_none(),
                "no kept annotations on generated pods"
            );
            assert_eq!(sa.node_name, sb.node_name);
            assert_eq!(sa.affinity, sb.affinity);
            assert_eq!(sa.tolerations, sb.tolerations);
            assert_eq!(sa.node_selector, sb.node_selector);
            assert_eq!(sa.topology_spread_constraints, sb.topology_spread_constraints);
            assert_eq!(sa.priority, sb.priority);
            assert_eq!(sa.priority_class_name, sb.priority_class_name);
            assert_eq!(sa.preemption_policy, sb.preemption_policy);
            assert_eq!(sa.scheduler_name, sb.scheduler_name);
            assert_eq!(
                sa.termination_grace_period_seconds,
                sb.termination_grace_period_seconds
            );
            for (ca, cb) in sa.containers.iter().zip(&sb.containers) {
                let requests = |c: &Container| c.resources.as_ref().and_then(|r| r.requests.clone());
                assert_eq!(
                    (&ca.name, &ca.image, requests(ca)),
                    (&cb.name, &cb.image, requests(cb))
                );
                assert!(cb.resources.as_ref().is_none_or(|r| r.limits.is_none()));
                assert!(cb.env.is_none() && cb.liveness_probe.is_none() && cb.command.is_none());
                assert!(cb.volume_mounts.is_none());
                let host_ports = |c: &Container| {
                    c.ports
                        .iter()
                        .flatten()
                        .filter(|p| p.host_port.is_some())
                        .cloned()
                        .collect::<Vec<_>>()
                };
                assert_eq!(host_ports(ca), host_ports(cb));
            }
            let (ta, tb) = (a.status.as_ref().unwrap(), b.status.as_ref().unwrap());
            assert_eq!(ta.phase, tb.phase);
            let scheduling_conditions = |st: &PodStatus| {
                st.conditions
                    .iter()
                    .flatten()
                    .filter(|c| c.type_ == "PodScheduled")
                    .cloned()
                    .collect::<Vec<_>>()
            };
            assert_eq!(scheduling_conditions(ta), scheduling_conditions(tb));
            assert!(tb.conditions.iter().flatten().all(|c| c.type_ != "Ready"));
            assert_eq!(ta.nominated_node_name, tb.nominated_node_name);
            assert_eq!(ta.start_time, tb.start_time);
            assert!(tb.pod_ip.is_none() && tb.qos_class.is_none());
            assert!(
                tb.container_statuses.is_none(),
                "statuses equal to the spec are dropped"
            );
            let claims = |v: &Volume| v.persistent_volume_claim.clone();
            let claims_a: Vec<_> = sa.volumes.iter().flatten().filter_map(claims).collect();
            let claims_b: Vec<_> = sb.volumes.iter().flatten().filter_map(claims).collect();
            assert_eq!(claims_a, claims_b);
            assert!(
                sb.volumes.iter().flatten().all(|v| v.projected.is_none()),
                "token volumes are dropped"
            );
        }
        for (a, b) in raw.nodes.iter().zip(&pruned.nodes) {
            let (sa, sb) = (a.status.as_ref().unwrap(), b.status.as_ref().unwrap());
            assert_eq!((&sa.allocatable, &sa.images), (&sb.allocatable, &sb.images));
            assert_eq!(a.spec, b.spec);
            assert_eq!(a.metadata.labels, b.metadata.labels);
            assert!(sb.node_info.is_none());
        }
        for (a, b) in raw
            .persistent_volume_claims
            .iter()
            .zip(&pruned.persistent_volume_claims)
        {
            assert_eq!(
                a.metadata.annotations, b.metadata.annotations,
                "volume annotations are kept"
            );
            assert_eq!(a.spec, b.spec);
        }
        assert_eq!(raw.persistent_volumes, pruned.persistent_volumes);

        // Idempotent.
        let mut twice = pruned.clone();
        twice.prune();
        assert_same(&twice, &pruned);
    }

    #[test]
    fn prune_pod_table() {
        use k8s_openapi::api::core::v1::{ContainerPort, EnvVar};
        let mut pod = crate::testing::pod("p")
            .init_container("side", &[("cpu", "100m")], true)
            .host_port(8080, "TCP", "")
            .with(|p| {
                p.metadata.annotations = Some(BTreeMap::from([
                    ("scheduler.alpha.kubernetes.io/critical-pod".into(), "".into()),
                    (
                        "kubectl.kubernetes.io/last-applied-configuration".into(),
                        "{...}".into(),
                    ),
                    ("pv.kubernetes.io/bind-completed".into(), "yes".into()),
                ]));
                let spec = p.spec.as_mut().unwrap();
                spec.containers[0].env = Some(vec![EnvVar {
                    name: "A".into(),
                    ..Default::default()
                }]);
                spec.containers[0].ports.as_mut().unwrap().push(ContainerPort {
                    container_port: 9090,
                    ..Default::default()
                });
                spec.service_account_name = Some("sa".into());
                spec.scheduling_gates = Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
                    name: "gate".into(),
                }]);
                let st = p.status.as_mut().unwrap();
                st.pod_ip = Some("10.0.0.1".into());
                st.nominated_node_name = Some("n2".into());
            })
            .obj();
        prune_pod(&mut pod);
        let annotations: Vec<&String> = pod.metadata.annotations.as_ref().unwrap().keys().collect();
        assert_eq!(
            annotations,
            [
                "pv.kubernetes.io/bind-completed",
                "scheduler.alpha.kubernetes.io/critical-pod"
            ]
        );
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.containers[0].env, None);
        let ports = spec.containers[0].ports.as_ref().unwrap();
        assert_eq!(ports.len(), 1, "only host ports stay");
        assert_eq!(ports[0].host_port, Some(8080));
        assert_eq!(
            spec.init_containers.as_ref().unwrap()[0]
                .restart_policy
                .as_deref(),
            Some("Always"),
            "sidecars stay sidecars"
        );
        assert_eq!(spec.service_account_name, None);
        assert!(spec.scheduling_gates.is_some(), "scheduling gates stay");
        let st = pod.status.as_ref().unwrap();
        assert_eq!(
            (st.pod_ip.as_deref(), st.nominated_node_name.as_deref()),
            (None, Some("n2"))
        );
    }

    #[test]
    fn container_statuses_stay_only_when_they_change_requests() {
        use k8s_openapi::api::core::v1::{PodCondition, ResourceRequirements};
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        let status_with = |allocated: &str, actual: Option<&str>| ContainerStatus {
            name: "c0".into(),
            image: "img".into(),
            allocated_resources: Some(BTreeMap::from([("cpu".into(), Quantity(allocated.into()))])),
            resources: actual.map(|a| ResourceRequirements {
                requests: Some(BTreeMap::from([("cpu".into(), Quantity(a.into()))])),
                ..Default::default()
            }),
            ..Default::default()
        };
        let cases: Vec<(&str, ContainerStatus, bool, bool)> = vec![
            // name, status, infeasible resize, kept
            ("allocated equals spec", status_with("500m", None), false, false),
            (
                "allocated and actual equal spec",
                status_with("500m", Some("500m")),
                false,
                false,
            ),
            (
                "allocated differs (resize in progress)",
                status_with("1", None),
                false,
                true,
            ),
            ("actual differs", status_with("500m", Some("250m")), false, true),
            (
                "infeasible resize keeps everything",
                status_with("500m", None),
                true,
                true,
            ),
        ];
        for (name, cs, infeasible, kept) in cases {
            let mut pod = crate::testing::pod("p")
                .cpu("500m")
                .with(|p| {
                    let st = p.status.as_mut().unwrap();
                    st.container_statuses = Some(vec![cs.clone()]);
                    if infeasible {
                        st.conditions = Some(vec![PodCondition {
                            type_: "PodResizePending".into(),
                            status: "True".into(),
                            reason: Some("Infeasible".into()),
                            ..Default::default()
                        }]);
                    }
                })
                .obj();
            let before = calculate_resource(&pod, &crate::features::FeatureGates::v1_37());
            prune_pod(&mut pod);
            let statuses = pod.status.as_ref().unwrap().container_statuses.as_ref();
            assert_eq!(statuses.is_some(), kept, "{name}");
            if let Some(s) = statuses {
                assert_eq!(s[0].image, "", "{name}: only resource fields stay");
                assert_eq!(s[0].allocated_resources, cs.allocated_resources, "{name}");
            }
            assert_eq!(
                calculate_resource(&pod, &crate::features::FeatureGates::v1_37()),
                before,
                "{name}: requests unchanged"
            );
        }
    }
}
