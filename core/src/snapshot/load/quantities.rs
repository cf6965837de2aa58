//! Quantities in a snapshot file must parse. The API server rejects a malformed quantity (`cpu: oops`),
//! so one can only come from a hand-written or edited file; the engine's arithmetic would count it as 0
//! and explain a decision about a cluster that cannot exist. The loaders check every quantity the
//! engine reads and fail naming the object and the field.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, Node, PersistentVolume, PersistentVolumeClaim, Pod, ResourceRequirements,
};
use k8s_openapi::api::storage::v1::CSIStorageCapacity;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use rayon::prelude::*;

use super::error::display_name;
use crate::resource::parse_milli_value;
use crate::snapshot::ClusterObjects;

/// A quantity that does not parse, and where it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {name}: {field}: quantity {value:?} does not parse")]
pub struct BadQuantity {
    /// The object's kind (`Pod`).
    pub kind: &'static str,
    /// `namespace/name` or `name`.
    pub name: String,
    /// The field path, e.g. `spec.containers[0].resources.requests.cpu`.
    pub field: String,
    /// The text as written.
    pub value: String,
}

/// Collects `(field path, quantity)` pairs of one object.
#[derive(Default)]
struct Fields<'a>(Vec<(String, &'a Quantity)>);

impl<'a> Fields<'a> {
    fn list(&mut self, path: &str, list: Option<&'a BTreeMap<String, Quantity>>) {
        for (name, q) in list.into_iter().flatten() {
            self.0.push((format!("{path}.{name}"), q));
        }
    }

    fn one(&mut self, path: &str, q: Option<&'a Quantity>) {
        if let Some(q) = q {
            self.0.push((path.to_string(), q));
        }
    }

    fn requirements(&mut self, path: &str, r: Option<&'a ResourceRequirements>) {
        if let Some(r) = r {
            self.list(&format!("{path}.requests"), r.requests.as_ref());
            self.list(&format!("{path}.limits"), r.limits.as_ref());
        }
    }

    fn containers(&mut self, path: &str, containers: Option<&'a Vec<Container>>) {
        for (i, c) in containers.into_iter().flatten().enumerate() {
            self.requirements(&format!("{path}[{i}].resources"), c.resources.as_ref());
        }
    }

    fn statuses(&mut self, path: &str, statuses: Option<&'a Vec<ContainerStatus>>) {
        for (i, s) in statuses.into_iter().flatten().enumerate() {
            self.list(
                &format!("{path}[{i}].allocatedResources"),
                s.allocated_resources.as_ref(),
            );
            self.requirements(&format!("{path}[{i}].resources"), s.resources.as_ref());
        }
    }

    /// The first quantity that does not parse (in field order).
    fn first_bad(
        self,
        kind: &'static str,
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ) -> Option<BadQuantity> {
        let (field, q) = self
            .0
            .into_iter()
            .find(|(_, q)| parse_milli_value(&q.0).is_err())?;
        Some(BadQuantity {
            kind,
            name: display_name(meta.namespace.as_deref(), meta.name.as_deref())
                .unwrap_or_else(|| "(unnamed)".to_string()),
            field,
            value: q.0.clone(),
        })
    }
}

/// The first malformed quantity of a pod: container and init container resources, overhead, pod-level
/// resources, and the resources the status reports (in-place resize).
pub(crate) fn check_pod(pod: &Pod) -> Result<(), BadQuantity> {
    let mut f = Fields::default();
    if let Some(spec) = &pod.spec {
        f.containers("spec.initContainers", spec.init_containers.as_ref());
        f.containers("spec.containers", Some(&spec.containers));
        f.list("spec.overhead", spec.overhead.as_ref());
        f.requirements("spec.resources", spec.resources.as_ref());
    }
    if let Some(status) = &pod.status {
        f.statuses(
            "status.initContainerStatuses",
            status.init_container_statuses.as_ref(),
        );
        f.statuses("status.containerStatuses", status.container_statuses.as_ref());
        f.list("status.allocatedResources", status.allocated_resources.as_ref());
        f.requirements("status.resources", status.resources.as_ref());
    }
    f.first_bad("Pod", &pod.metadata).map_or(Ok(()), Err)
}

fn check_node(node: &Node) -> Result<(), BadQuantity> {
    let mut f = Fields::default();
    if let Some(status) = &node.status {
        f.list("status.allocatable", status.allocatable.as_ref());
        f.list("status.capacity", status.capacity.as_ref());
    }
    f.first_bad("Node", &node.metadata).map_or(Ok(()), Err)
}

fn check_pvc(pvc: &PersistentVolumeClaim) -> Result<(), BadQuantity> {
    let mut f = Fields::default();
    if let Some(spec) = &pvc.spec {
        f.list(
            "spec.resources.requests",
            spec.resources.as_ref().and_then(|r| r.requests.as_ref()),
        );
    }
    if let Some(status) = &pvc.status {
        f.list("status.capacity", status.capacity.as_ref());
    }
    f.first_bad("PersistentVolumeClaim", &pvc.metadata)
        .map_or(Ok(()), Err)
}

fn check_pv(pv: &PersistentVolume) -> Result<(), BadQuantity> {
    let mut f = Fields::default();
    f.list(
        "spec.capacity",
        pv.spec.as_ref().and_then(|s| s.capacity.as_ref()),
    );
    f.first_bad("PersistentVolume", &pv.metadata).map_or(Ok(()), Err)
}

fn check_capacity(c: &CSIStorageCapacity) -> Result<(), BadQuantity> {
    let mut f = Fields::default();
    f.one("capacity", c.capacity.as_ref());
    f.one("maximumVolumeSize", c.maximum_volume_size.as_ref());
    f.first_bad("CSIStorageCapacity", &c.metadata).map_or(Ok(()), Err)
}

/// Every quantity the engine reads in `objects` parses; else the first that does not. Pods already
/// reduced to their scheduling facts (`placed_pods`) were checked before they were reduced.
pub(crate) fn check(objects: &ClusterObjects) -> Result<(), BadQuantity> {
    objects.nodes.iter().try_for_each(check_node)?;
    // Pods are most of a large snapshot: checked in parallel, the first bad one in file order wins.
    if let Some(bad) = objects.pods.par_iter().find_map_first(|p| check_pod(p).err()) {
        return Err(bad);
    }
    objects.persistent_volume_claims.iter().try_for_each(check_pvc)?;
    objects.persistent_volumes.iter().try_for_each(check_pv)?;
    objects.csi_storage_capacities.iter().try_for_each(check_capacity)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(value: serde_json::Value) -> Pod {
        serde_json::from_value(value).expect("a pod")
    }

    #[test]
    fn the_first_bad_quantity_is_named_with_its_field() {
        let cases = [
            (
                "container request",
                pod(
                    serde_json::json!({"metadata": {"namespace": "shop", "name": "web-1"}, "spec": {"containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "100m"}}},
                    {"name": "b", "resources": {"requests": {"cpu": "oops"}}}]}}),
                ),
                Some(("spec.containers[1].resources.requests.cpu", "oops")),
            ),
            (
                "init container limit",
                pod(
                    serde_json::json!({"metadata": {"namespace": "shop", "name": "web-1"}, "spec": {
                    "initContainers": [{"name": "i", "resources": {"limits": {"memory": "1Gb"}}}],
                    "containers": [{"name": "a"}]}}),
                ),
                Some(("spec.initContainers[0].resources.limits.memory", "1Gb")),
            ),
            (
                "overhead",
                pod(
                    serde_json::json!({"metadata": {"namespace": "shop", "name": "web-1"}, "spec": {
                    "containers": [{"name": "a"}], "overhead": {"cpu": ""}}}),
                ),
                Some(("spec.overhead.cpu", "")),
            ),
            (
                "status resources",
                pod(
                    serde_json::json!({"metadata": {"namespace": "shop", "name": "web-1"},
                    "spec": {"containers": [{"name": "a"}]},
                    "status": {"containerStatuses": [{"name": "a", "image": "i", "imageID": "", "ready": true,
                        "restartCount": 0, "allocatedResources": {"cpu": "1x"}}]}}),
                ),
                Some(("status.containerStatuses[0].allocatedResources.cpu", "1x")),
            ),
            (
                "all well formed",
                pod(
                    serde_json::json!({"metadata": {"namespace": "shop", "name": "web-1"}, "spec": {"containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "1.5", "memory": "1e3", "nvidia.com/gpu": "2"}}}],
                    "overhead": {"memory": "10Mi"}}}),
                ),
                None,
            ),
        ];
        for (name, p, want) in cases {
            let got = check_pod(&p).err();
            assert_eq!(
                got.as_ref().map(|b| (b.field.as_str(), b.value.as_str())),
                want,
                "{name}"
            );
            if let Some(b) = got {
                assert_eq!(b.kind, "Pod", "{name}");
                assert_eq!(b.name, "shop/web-1", "{name}");
            }
        }
    }

    #[test]
    fn nodes_and_volumes_are_checked() {
        let mut objects = ClusterObjects::default();
        objects.nodes.push(
            serde_json::from_value(serde_json::json!({"metadata": {"name": "n1"},
                "status": {"allocatable": {"cpu": "4", "memory": "8 Gi"}}}))
            .unwrap(),
        );
        let err = check(&objects).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Node n1: status.allocatable.memory: quantity \"8 Gi\" does not parse"
        );
        objects.nodes.clear();
        objects.persistent_volume_claims.push(
            serde_json::from_value(
                serde_json::json!({"metadata": {"namespace": "db", "name": "data"},
                "spec": {"resources": {"requests": {"storage": "ten"}}}}),
            )
            .unwrap(),
        );
        assert_eq!(
            check(&objects).unwrap_err().field,
            "spec.resources.requests.storage"
        );
    }
}
