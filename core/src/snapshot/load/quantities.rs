//! Quantities in a snapshot file must parse and be sane. The API server rejects a malformed quantity
//! (`cpu: oops`) and a negative one, so such a one can only come from a hand-written or edited file;
//! the engine's arithmetic would count it as 0 (or as room on a node) and explain a decision about a
//! cluster that cannot exist. Amounts so large that kube-scheduler's int64 sums of them overflow are
//! refused on pods and nodes too ([`MAX_AMOUNT`]). The loaders check every quantity the engine reads
//! and fail naming the object and the field; `-f`'s pod goes through [`check_pod`] as well, and
//! `simulate`'s workloads, claim templates and added nodes through [`check_pod`], [`check_pvc`] and
//! [`check_node`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, Node, PersistentVolume, PersistentVolumeClaim, Pod, ResourceRequirements,
};
use k8s_openapi::api::storage::v1::CSIStorageCapacity;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use rayon::prelude::*;

use super::error::display_name;
use crate::resource::{CPU, parse_milli_value, parse_value};
use crate::snapshot::ClusterObjects;

/// What is wrong with a quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// Not a Kubernetes quantity at all (`oops`, `8 Gi`).
    DoesNotParse,
    /// Below zero: API validation requires every request, limit, capacity and allocatable amount to
    /// be at least 0, and a negative request would add room to a node.
    Negative,
    /// A pod's or node's amount above [`MAX_AMOUNT`]: the API server caps quantities at 2^63-1 and
    /// kube-scheduler's int64 sums of such amounts wrap around, so no answer about them means anything.
    TooLarge,
}

/// The largest pod or node amount a snapshot file may hold, in the engine's units (millicores for
/// cpu, else bytes or counts): 2^53, i.e. 9 billion cores, 8 PiB, 9·10^15 devices. Sums of a
/// thousand such amounts, and the score arithmetic on them (times 100), stay inside int64; longer
/// sums saturate instead of wrapping.
pub const MAX_AMOUNT: i64 = 1 << 53;

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Problem::DoesNotParse => "does not parse",
            Problem::Negative => "is negative (the API server requires it to be greater than or equal to 0)",
            Problem::TooLarge => {
                "is too large (more than 2^53 in the scheduler's units: millicores for cpu, else bytes or \
                 counts): sums of such amounts overflow kube-scheduler's int64 arithmetic"
            }
        })
    }
}

/// A quantity that does not parse or is negative, and where it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {name}: {field}: quantity {value:?} {problem}")]
pub struct BadQuantity {
    /// The object's kind (`Pod`).
    pub kind: &'static str,
    /// `namespace/name` or `name`.
    pub name: String,
    /// The field path, e.g. `spec.containers[0].resources.requests.cpu`.
    pub field: String,
    /// The text as written.
    pub value: String,
    /// What is wrong with it.
    pub problem: Problem,
}

/// Collects `(field path, resource name, quantity)` of one object (no name for a lone quantity).
#[derive(Default)]
struct Fields<'a>(Vec<(String, &'a str, &'a Quantity)>);

/// What is wrong with the amount of resource `name`, if anything. `bounded` where the object's
/// amounts are summed (pods, nodes), not where they are only compared (volumes, storage capacities:
/// a storage pool larger than 8 PiB is no error).
fn problem(name: &str, text: &str, bounded: bool) -> Option<Problem> {
    let Ok(milli) = parse_milli_value(text) else {
        return Some(Problem::DoesNotParse);
    };
    if is_negative(text) {
        return Some(Problem::Negative);
    }
    // An amount read in units is at most its milli-value: only a large milli-value needs the second parse.
    let too_large =
        bounded && milli > MAX_AMOUNT && (name == CPU || parse_value(text).is_ok_and(|v| v > MAX_AMOUNT));
    too_large.then_some(Problem::TooLarge)
}

impl<'a> Fields<'a> {
    fn list(&mut self, path: &str, list: Option<&'a BTreeMap<String, Quantity>>) {
        for (name, q) in list.into_iter().flatten() {
            self.0.push((format!("{path}.{name}"), name.as_str(), q));
        }
    }

    fn one(&mut self, path: &str, q: Option<&'a Quantity>) {
        if let Some(q) = q {
            self.0.push((path.to_string(), "", q));
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

    /// The first quantity that does not parse, is negative or (`bounded`) too large, in field order.
    fn first_bad(
        self,
        kind: &'static str,
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        bounded: bool,
    ) -> Option<BadQuantity> {
        let (field, q, problem) = self
            .0
            .into_iter()
            .find_map(|(field, name, q)| problem(name, &q.0, bounded).map(|p| (field, q, p)))?;
        Some(BadQuantity {
            kind,
            name: display_name(meta.namespace.as_deref(), meta.name.as_deref())
                .unwrap_or_else(|| "(unnamed)".to_string()),
            field,
            value: q.0.clone(),
            problem,
        })
    }
}

/// True for a well-formed quantity below zero, however small (`-1n` rounds to 0 milli-units, but
/// the API server's `Sign() < 0` refuses it): a minus sign and a non-zero digit before the suffix.
fn is_negative(text: &str) -> bool {
    text.trim().strip_prefix('-').is_some_and(|rest| {
        rest.chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .any(|c| ('1'..='9').contains(&c))
    })
}

/// The first malformed or negative quantity of a pod: container and init container resources,
/// overhead, pod-level resources, and the resources the status reports (in-place resize). Snapshot
/// loaders call it on every pod; `-f`'s pod is checked with it too.
pub fn check_pod(pod: &Pod) -> Result<(), BadQuantity> {
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
    f.first_bad("Pod", &pod.metadata, true).map_or(Ok(()), Err)
}

/// The first malformed, negative or too large quantity of a node's allocatable and capacity.
pub fn check_node(node: &Node) -> Result<(), BadQuantity> {
    let mut f = Fields::default();
    if let Some(status) = &node.status {
        f.list("status.allocatable", status.allocatable.as_ref());
        f.list("status.capacity", status.capacity.as_ref());
    }
    f.first_bad("Node", &node.metadata, true).map_or(Ok(()), Err)
}

/// The first malformed or negative quantity of a claim's requests and status capacity (sizes are only
/// compared, so no upper bound).
pub fn check_pvc(pvc: &PersistentVolumeClaim) -> Result<(), BadQuantity> {
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
    f.first_bad("PersistentVolumeClaim", &pvc.metadata, false)
        .map_or(Ok(()), Err)
}

fn check_pv(pv: &PersistentVolume) -> Result<(), BadQuantity> {
    let mut f = Fields::default();
    f.list(
        "spec.capacity",
        pv.spec.as_ref().and_then(|s| s.capacity.as_ref()),
    );
    f.first_bad("PersistentVolume", &pv.metadata, false)
        .map_or(Ok(()), Err)
}

fn check_capacity(c: &CSIStorageCapacity) -> Result<(), BadQuantity> {
    let mut f = Fields::default();
    f.one("capacity", c.capacity.as_ref());
    f.one("maximumVolumeSize", c.maximum_volume_size.as_ref());
    f.first_bad("CSIStorageCapacity", &c.metadata, false)
        .map_or(Ok(()), Err)
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
                "negative request, however small",
                pod(
                    serde_json::json!({"metadata": {"namespace": "shop", "name": "web-1"}, "spec": {"containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "-0", "memory": "-0e3"}, "limits": {"cpu": "-1n"}}}]}}),
                ),
                Some(("spec.containers[0].resources.limits.cpu", "-1n")),
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
                let problem = if b.value.starts_with('-') {
                    Problem::Negative
                } else {
                    Problem::DoesNotParse
                };
                assert_eq!(b.problem, problem, "{name}");
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

    /// Amounts above 2^53 in the engine's unit are refused on pods and nodes (millicores for cpu:
    /// 9e12 cores is too many; bytes for memory: 9e15 bytes is not), never on volumes.
    #[test]
    fn absurd_amounts_are_refused_where_they_are_summed() {
        let cases = [
            ("cpu", "9007199254740m", None),
            ("cpu", "9007199254741", Some(Problem::TooLarge)),
            ("cpu", "1e100", Some(Problem::TooLarge)),
            ("memory", "9e15", None),
            ("memory", "8Ei", Some(Problem::TooLarge)),
            ("example.com/gpu", "1e16", Some(Problem::TooLarge)),
            ("example.com/gpu", "-2", Some(Problem::Negative)),
            ("pods", "99999999999999999999999", Some(Problem::TooLarge)),
        ];
        for (name, value, want) in cases {
            assert_eq!(problem(name, value, true), want, "{name}: {value}");
        }
        assert_eq!(
            problem("storage", "1e100", false),
            None,
            "volumes are only compared"
        );
    }
}
