//! Pods of a hand-written snapshot get the priority the API server's Priority admission plugin would
//! have given them. A pod read from the API server always has `spec.priority` (the plugin is on by
//! default), and kube-scheduler reads only that field; a pod written by hand often has only
//! `priorityClassName`, and would otherwise be evaluated at priority 0, which changes queue order and
//! every preemption answer. The rule is `-f`'s ([`crate::admission::admit_priority`]): the snapshot's
//! PriorityClasses (and the two built-in `system-*-critical` classes), the global default class for a
//! pod that names none; a class that does not exist is refused, as the API server refuses the pod.
//!
//! Pods that already have `spec.priority` are kept as they are: they were admitted when they were
//! created, and their class may have been deleted since (kube-scheduler does not care).

use k8s_openapi::api::core::v1::Pod;

use super::error::display_name;
use crate::admission::{AdmitError, admit_priority};
use crate::snapshot::ClusterObjects;

/// A pod the Priority admission plugin would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Pod {pod}: spec.priorityClassName: {source}: the API server's Priority admission refuses such a pod"
)]
pub struct PriorityRefused {
    /// `namespace/name`.
    pub pod: String,
    /// Why (the class that does not exist).
    #[source]
    pub source: AdmitError,
}

/// True when the pod still needs the Priority admission plugin (it has no `spec.priority`): such a pod
/// is kept whole by compact loads until [`admit_priorities`] has run, since the PriorityClasses may
/// come later in the file.
pub(crate) fn needs_priority(pod: &Pod) -> bool {
    pod.spec.as_ref().is_some_and(|s| s.priority.is_none())
}

/// Gives every pod without `spec.priority` the priority admission would give it; the first pod (in
/// file order) whose class does not exist is an error.
pub(crate) fn admit_priorities(objects: &mut ClusterObjects) -> Result<(), PriorityRefused> {
    let classes = &objects.priority_classes;
    for pod in objects.pods.iter_mut().filter(|p| needs_priority(p)) {
        let name = display_name(pod.metadata.namespace.as_deref(), pod.metadata.name.as_deref());
        if let Some(spec) = pod.spec.as_mut() {
            admit_priority(spec, classes).map_err(|source| PriorityRefused {
                pod: name.unwrap_or_else(|| "(unnamed)".to_string()),
                source,
            })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::scheduling::v1::PriorityClass;

    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "shop", "name": "web"},
            "spec": spec,
        }))
        .expect("a pod")
    }

    fn class(name: &str, value: i32, global_default: bool, policy: Option<&str>) -> PriorityClass {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name}, "value": value, "globalDefault": global_default,
            "preemptionPolicy": policy,
        }))
        .expect("a class")
    }

    /// (case, classes, pod spec, priority, class name, preemption policy after admission)
    type Case = (
        &'static str,
        Vec<PriorityClass>,
        serde_json::Value,
        i32,
        Option<&'static str>,
        Option<&'static str>,
    );

    #[test]
    fn pods_without_priority_get_what_admission_gives() {
        let gold = || class("gold", 1000, false, Some("Never"));
        let cases: [Case; 6] = [
            (
                "named class, its policy",
                vec![gold()],
                serde_json::json!({"containers": [], "priorityClassName": "gold"}),
                1000,
                Some("gold"),
                Some("Never"),
            ),
            (
                "the pod's own policy is kept",
                vec![gold()],
                serde_json::json!({"containers": [], "priorityClassName": "gold",
                    "preemptionPolicy": "PreemptLowerPriority"}),
                1000,
                Some("gold"),
                Some("PreemptLowerPriority"),
            ),
            (
                "global default, the lowest when several claim it",
                vec![
                    class("high-default", 50, true, None),
                    class("low-default", 5, true, None),
                ],
                serde_json::json!({"containers": []}),
                5,
                Some("low-default"),
                None,
            ),
            (
                "built-in class absent from the snapshot",
                vec![],
                serde_json::json!({"containers": [], "priorityClassName": "system-node-critical"}),
                2_000_001_000,
                Some("system-node-critical"),
                None,
            ),
            (
                "no class, no default",
                vec![gold()],
                serde_json::json!({"containers": []}),
                0,
                None,
                None,
            ),
            (
                "admitted already: kept, even with its class gone",
                vec![],
                serde_json::json!({"containers": [], "priorityClassName": "deleted", "priority": 7}),
                7,
                Some("deleted"),
                None,
            ),
        ];
        for (case, classes, spec, priority, class_name, policy) in cases {
            let mut objects = ClusterObjects {
                priority_classes: classes,
                pods: vec![pod(spec)],
                ..ClusterObjects::default()
            };
            admit_priorities(&mut objects).unwrap_or_else(|e| panic!("{case}: {e}"));
            let spec = objects.pods[0].spec.as_ref().expect("spec");
            assert_eq!(spec.priority, Some(priority), "{case}");
            assert_eq!(spec.priority_class_name.as_deref(), class_name, "{case}");
            assert_eq!(spec.preemption_policy.as_deref(), policy, "{case}");
        }
    }

    #[test]
    fn a_missing_class_names_the_pod_and_the_class() {
        let mut objects = ClusterObjects {
            pods: vec![pod(
                serde_json::json!({"containers": [], "priorityClassName": "gold"}),
            )],
            ..ClusterObjects::default()
        };
        let err = admit_priorities(&mut objects).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Pod shop/web: spec.priorityClassName: no PriorityClass with name gold was found: the API \
             server's Priority admission refuses such a pod"
        );
    }

    /// The class may come after the pods; a compact JSON load reduces pods on nodes while it streams,
    /// so a pod without priority must wait for admission: the reduced pod has the class's priority.
    #[test]
    fn file_loads_admit_pods_before_reducing_them() {
        use crate::snapshot::PodDetail;
        let text = r#"{"apiVersion":"v1","kind":"List","items":[
            {"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"},"status":{"allocatable":{"cpu":"4"}}},
            {"apiVersion":"v1","kind":"Pod","metadata":{"namespace":"shop","name":"placed"},
             "spec":{"nodeName":"n1","priorityClassName":"gold","containers":[{"name":"c"}]}},
            {"apiVersion":"v1","kind":"Pod","metadata":{"namespace":"shop","name":"pending"},
             "spec":{"containers":[{"name":"c"}]}},
            {"apiVersion":"scheduling.k8s.io/v1","kind":"PriorityClass","metadata":{"name":"gold"},"value":1000},
            {"apiVersion":"scheduling.k8s.io/v1","kind":"PriorityClass","metadata":{"name":"base"},"value":3,
             "globalDefault":true}]}"#;
        let dir = tempfile::tempdir().expect("tempdir");
        let compact = PodDetail::CompactPlaced {
            keep: Default::default(),
        };
        for (file, text) in [
            ("snapshot.json", text.to_string()),
            ("snapshot.yaml", format!("# YAML\n{text}")),
        ] {
            let path = dir.path().join(file);
            std::fs::write(&path, &text).expect("write");
            let (objects, _) = super::super::load_file_with(&path, &compact).expect(file);
            let placed: Vec<(&str, i32)> = objects
                .placed_pods
                .iter()
                .map(|p| (p.name(), p.priority))
                .collect();
            assert_eq!(placed, [("placed", 1000)], "{file}");
            let pending = objects
                .pods
                .iter()
                .map(|p| p.spec.as_ref().and_then(|s| s.priority));
            assert_eq!(
                pending.collect::<Vec<_>>(),
                [Some(3)],
                "{file}: the global default"
            );

            let missing = dir.path().join(format!("missing-{file}"));
            std::fs::write(
                &missing,
                text.replace("{\"name\":\"gold\"}", "{\"name\":\"silver\"}"),
            )
            .expect("write");
            let err = super::super::load_file_with(&missing, &compact).expect_err(file);
            assert_eq!(
                err.to_string(),
                format!(
                    "{}: Pod shop/placed: spec.priorityClassName: no PriorityClass with name gold was found: \
                     the API server's Priority admission refuses such a pod",
                    missing.display()
                )
            );
        }
    }
}
