//! `-f`'s objects of the workload API (`scheduling.k8s.io/v1beta1` PodGroup and Workload): they
//! expand into no pod, they join the cluster as written, and the pods of `-f` that name a PodGroup
//! in `spec.schedulingGroup` — bare pods, or a batch/v1 Job's `parallelism` pods from a template
//! that names it — are scheduled with it. PodGroups turn GenericWorkload on as the cluster's do
//! ([`crate::source::release::Release::follow_pod_groups`]).

use std::collections::HashSet;

use k8s_openapi::api::scheduling::v1beta1::{PodGroup, Workload};
use sched_core::snapshot::ClusterObjects;
use sched_core::snapshot::pod_groups::gang_min_count;
use serde_json::Value;

use super::SimulateError;

/// The API group and version of the workload API that kube-scheduler v1.37 reads.
const WORKLOAD_API_VERSION: &str = "scheduling.k8s.io/v1beta1";

/// The PodGroups and Workloads of `-f`.
#[derive(Debug, Default)]
pub(super) struct GroupInputs {
    /// PodGroups, namespaced.
    pub pod_groups: Vec<PodGroup>,
    /// Workloads, namespaced.
    pub workloads: Vec<Workload>,
}

/// Takes `value` when it is a PodGroup or a Workload (`Ok(None)` for any other object), decoded
/// and checked; `path` and `document` name it in errors.
pub(super) fn take_group_input(
    inputs: &mut GroupInputs,
    value: &Value,
    namespace: &str,
    (path, document): (&str, usize),
) -> Result<Option<()>, SimulateError> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).unwrap_or("");
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    if !matches!(kind, "PodGroup" | "Workload") || !api_version.starts_with("scheduling.k8s.io/") {
        return Ok(None);
    }
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let invalid = |message: String| SimulateError::Input {
        path: path.to_owned(),
        message: format!("document {document}: {kind} {name:?}: {message}"),
    };
    if api_version != WORKLOAD_API_VERSION {
        return Err(invalid(format!(
            "{api_version} is not served by kube-scheduler v1.37: use {WORKLOAD_API_VERSION}"
        )));
    }
    if name.is_empty() {
        return Err(invalid("metadata.name is required".to_owned()));
    }
    let decode_error = |e: serde_json::Error| invalid(format!("failed to decode: {e}"));
    match kind {
        "PodGroup" => {
            let mut group: PodGroup = serde_json::from_value(value.clone()).map_err(decode_error)?;
            group
                .metadata
                .namespace
                .get_or_insert_with(|| namespace.to_owned());
            // The API server's validation: a gang needs at least one pod.
            if let Some(min_count) = gang_min_count(&group).filter(|m| *m < 1) {
                return Err(invalid(format!(
                    "spec.schedulingPolicy.gang.minCount: Invalid value: {min_count}: must be greater than or equal to 1"
                )));
            }
            inputs.pod_groups.push(group);
        }
        _ => {
            let mut workload: Workload = serde_json::from_value(value.clone()).map_err(decode_error)?;
            workload
                .metadata
                .namespace
                .get_or_insert_with(|| namespace.to_owned());
            inputs.workloads.push(workload);
        }
    }
    Ok(Some(()))
}

/// Adds the PodGroups and Workloads of `-f` to the cluster; one that exists already is refused, as
/// `kubectl create` refuses it.
pub(super) fn add_group_inputs(
    objects: &mut ClusterObjects,
    inputs: GroupInputs,
) -> Result<(), SimulateError> {
    fn key(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
        format!(
            "{}/{}",
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default()
        )
    }
    let exists = |kind: &str, key: String| SimulateError::Input {
        path: "-f".to_owned(),
        message: format!("{kind} {key} already exists in the cluster"),
    };
    let mut groups: HashSet<String> = objects.pod_groups.iter().map(|g| key(&g.metadata)).collect();
    for group in inputs.pod_groups {
        if !groups.insert(key(&group.metadata)) {
            return Err(exists("podgroup", key(&group.metadata)));
        }
        objects.pod_groups.push(group);
    }
    let mut workloads: HashSet<String> = objects.workloads.iter().map(|w| key(&w.metadata)).collect();
    for workload in inputs.workloads {
        if !workloads.insert(key(&workload.metadata)) {
            return Err(exists("workload", key(&workload.metadata)));
        }
        objects.workloads.push(workload);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn take(value: Value) -> Result<GroupInputs, String> {
        let mut inputs = GroupInputs::default();
        take_group_input(&mut inputs, &value, "ns", ("gang.yaml", 2))
            .map(|_| inputs)
            .map_err(|e| e.to_string())
    }

    /// PodGroups and Workloads are read and namespaced; other objects are left to the workload
    /// expansion; a bad one is refused in one line naming the file, the document and the object.
    #[test]
    fn pod_groups_and_workloads_are_read_and_bad_ones_named() {
        let group = |spec: Value| {
            json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                   "metadata": {"name": "train"}, "spec": spec})
        };
        let read = take(group(json!({"schedulingPolicy": {"gang": {"minCount": 2}}}))).expect("read");
        assert_eq!(read.pod_groups[0].metadata.namespace.as_deref(), Some("ns"));
        let workload = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
                              "metadata": {"name": "w", "namespace": "team"}, "spec": {}});
        assert_eq!(take(workload).expect("read").workloads.len(), 1);
        assert!(
            take(json!({"apiVersion": "v1", "kind": "Pod"}))
                .expect("other")
                .pod_groups
                .is_empty()
        );

        // (case, object, error)
        let cases = [
            (
                "minCount 0",
                group(json!({"schedulingPolicy": {"gang": {"minCount": 0}}})),
                "gang.yaml: document 2: PodGroup \"train\": spec.schedulingPolicy.gang.minCount: Invalid value: 0: \
                 must be greater than or equal to 1",
            ),
            (
                "the alpha version",
                json!({"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "a"}}),
                "gang.yaml: document 2: PodGroup \"a\": scheduling.k8s.io/v1alpha1 is not served by kube-scheduler \
                 v1.37: use scheduling.k8s.io/v1beta1",
            ),
            (
                "no name",
                json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "spec": {}}),
                "gang.yaml: document 2: PodGroup \"\": metadata.name is required",
            ),
        ];
        for (case, value, want) in cases {
            assert_eq!(take(value).err().as_deref(), Some(want), "{case}");
        }
        let bad_type = take(group(json!({"schedulingPolicy": {"gang": {"minCount": "two"}}})))
            .err()
            .unwrap_or_default();
        assert!(
            bad_type.starts_with("gang.yaml: document 2: PodGroup \"train\": failed to decode:")
                && !bad_type.contains('\n'),
            "{bad_type}"
        );
    }

    #[test]
    fn a_pod_group_that_exists_is_refused() {
        let mut objects = ClusterObjects {
            pod_groups: vec![sched_core::testing::gang("train", 2).obj()],
            ..Default::default()
        };
        let inputs = GroupInputs {
            pod_groups: vec![sched_core::testing::gang("train", 3).obj()],
            workloads: vec![],
        };
        let err = add_group_inputs(&mut objects, inputs)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("-f: podgroup default/train already exists in the cluster")
        );
    }
}
