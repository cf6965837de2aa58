//! The "default selector" of a pod: the labels its Services, ReplicationController, ReplicaSet or
//! StatefulSet select it by (Go's `helper.DefaultSelector`). PodTopologySpread's default constraints and
//! SelectorSpread spread a pod among the pods that share it.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Service};

use crate::labels::{Labels, Requirement, Selector};
use crate::snapshot::Snapshot;

/// The Services in the pod's namespace whose selector matches the pod (Go's `GetPodServices`).
/// A Service without a selector selects nothing, not everything.
pub(crate) fn pod_services<'a>(snapshot: &'a Snapshot, pod: &Pod) -> Vec<&'a Arc<Service>> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    let pod_labels = pod.metadata.labels.as_ref();
    snapshot
        .services
        .iter()
        .filter(|s| s.metadata.namespace.as_deref().unwrap_or("") == namespace)
        .filter(|s| {
            s.spec
                .as_ref()
                .and_then(|spec| spec.selector.as_ref())
                .is_some_and(|sel| Selector::from_map(sel).matches_opt(pod_labels))
        })
        .collect()
}

/// The controller kinds whose selector joins the default selector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ControllerKind {
    ReplicationController,
    ReplicaSet,
    StatefulSet,
}

/// Go's `schema.ParseGroupVersion`: "" and "/" are the empty version, "v1" has no group, "g/v" has one,
/// anything with more slashes is invalid.
fn parse_group_version(gv: &str) -> Option<(&str, &str)> {
    if gv.is_empty() || gv == "/" {
        return Some(("", ""));
    }
    match gv.matches('/').count() {
        0 => Some(("", gv)),
        1 => gv.split_once('/'),
        _ => None,
    }
}

/// The pod's controller (the owner reference with `controller: true`), if it is one of the supported kinds.
fn controller_of(pod: &Pod) -> Option<(ControllerKind, &str)> {
    let owner = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))?;
    let kind = match (parse_group_version(&owner.api_version)?, owner.kind.as_str()) {
        (("", "v1"), "ReplicationController") => ControllerKind::ReplicationController,
        (("apps", "v1"), "ReplicaSet") => ControllerKind::ReplicaSet,
        (("apps", "v1"), "StatefulSet") => ControllerKind::StatefulSet,
        _ => return None,
    };
    Some((kind, owner.name.as_str()))
}

fn in_namespace<T>(items: &[Arc<T>], namespace: &str, name: &str) -> Option<Arc<T>>
where
    T: k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
{
    items
        .iter()
        .find(|o| {
            let m = o.metadata();
            m.namespace.as_deref().unwrap_or("") == namespace && m.name.as_deref() == Some(name)
        })
        .cloned()
}

fn set_requirements(set: &Labels) -> Vec<Requirement> {
    set.iter()
        .map(|(k, v)| Requirement::In(k.clone(), vec![v.clone()]))
        .collect()
}

/// Go's `helper.DefaultSelector`: the merged selectors of the Services matching the pod, plus the
/// selector of its ReplicationController, ReplicaSet or StatefulSet controller. An empty result
/// (`is_everything()`) means the pod belongs to no such group.
pub(crate) fn default_selector(pod: &Pod, snapshot: &Snapshot) -> Selector {
    // Every selector here matches the pod, so the label sets cannot conflict and merging is safe.
    let mut set = Labels::new();
    for service in pod_services(snapshot, pod) {
        if let Some(sel) = service.spec.as_ref().and_then(|s| s.selector.as_ref()) {
            set.extend(sel.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    let mut requirements = set_requirements(&set);

    let Some((kind, name)) = controller_of(pod) else {
        return Selector::Requirements(requirements);
    };
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    match kind {
        ControllerKind::ReplicationController => {
            if let Some(rc) = in_namespace(&snapshot.replication_controllers, namespace, name) {
                if let Some(sel) = rc.spec.as_ref().and_then(|s| s.selector.as_ref()) {
                    set.extend(sel.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
                requirements = set_requirements(&set);
            }
        }
        ControllerKind::ReplicaSet => {
            if let Some(rs) = in_namespace(&snapshot.replica_sets, namespace, name) {
                let sel = Some(&rs.spec.selector);
                if let Ok(Selector::Requirements(r)) = Selector::from_label_selector(sel) {
                    requirements.extend(r);
                }
            }
        }
        ControllerKind::StatefulSet => {
            if let Some(ss) = in_namespace(&snapshot.stateful_sets, namespace, name) {
                let sel = Some(&ss.spec.selector);
                if let Ok(Selector::Requirements(r)) = Selector::from_label_selector(sel) {
                    requirements.extend(r);
                }
            }
        }
    }
    Selector::Requirements(requirements)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::ClusterObjects;
    use crate::testing::pod;
    use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec, StatefulSet, StatefulSetSpec};
    use k8s_openapi::api::core::v1::{ReplicationController, ReplicationControllerSpec, ServiceSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};

    fn meta(ns: &str, name: &str) -> ObjectMeta {
        ObjectMeta {
            namespace: Some(ns.into()),
            name: Some(name.into()),
            ..Default::default()
        }
    }

    fn map(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn service(ns: &str, name: &str, selector: Option<&[(&str, &str)]>) -> Service {
        Service {
            metadata: meta(ns, name),
            spec: Some(ServiceSpec {
                selector: selector.map(map),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn owned(p: crate::testing::PodBuilder, api_version: &str, kind: &str, name: &str) -> Pod {
        p.with(|p| {
            p.metadata.owner_references = Some(vec![OwnerReference {
                api_version: api_version.into(),
                kind: kind.into(),
                name: name.into(),
                uid: format!("uid-{name}"),
                controller: Some(true),
                ..Default::default()
            }])
        })
        .obj()
    }

    fn objects() -> ClusterObjects {
        ClusterObjects {
            services: vec![
                service("default", "web", Some(&[("app", "web")])),
                service("default", "tier", Some(&[("tier", "front")])),
                service("default", "none", None),
                service("other", "web", Some(&[("app", "other")])),
            ],
            replication_controllers: vec![ReplicationController {
                metadata: meta("default", "rc"),
                spec: Some(ReplicationControllerSpec {
                    selector: Some(map(&[("rc", "yes")])),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            replica_sets: vec![ReplicaSet {
                metadata: meta("default", "rs"),
                spec: ReplicaSetSpec {
                    selector: LabelSelector {
                        match_labels: Some(map(&[("rs", "yes")])),
                        ..Default::default()
                    },
                    ..Default::default()
                },
                ..Default::default()
            }],
            stateful_sets: vec![StatefulSet {
                metadata: meta("default", "ss"),
                spec: StatefulSetSpec {
                    selector: LabelSelector {
                        match_labels: Some(map(&[("ss", "yes")])),
                        ..Default::default()
                    },
                    service_name: Some("ss".into()),
                    ..Default::default()
                },
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn default_selector_merges_services_and_controllers() {
        let snap = Snapshot::new(objects());
        let base = || pod("p").label("app", "web").label("tier", "front");
        let cases: Vec<(&str, Pod, Labels, Labels, bool)> = vec![
            (
                "services only: both matching services merge",
                base().obj(),
                map(&[("app", "web"), ("tier", "front"), ("x", "y")]),
                map(&[("app", "web")]),
                false,
            ),
            (
                "no service and no controller: empty selector",
                pod("p").label("app", "db").obj(),
                map(&[]),
                map(&[]),
                true,
            ),
            (
                "replication controller selector is merged",
                owned(base(), "v1", "ReplicationController", "rc"),
                map(&[("app", "web"), ("tier", "front"), ("rc", "yes")]),
                map(&[("app", "web"), ("tier", "front")]),
                false,
            ),
            (
                "replica set requirements are added",
                owned(base(), "apps/v1", "ReplicaSet", "rs"),
                map(&[("app", "web"), ("tier", "front"), ("rs", "yes")]),
                map(&[("app", "web"), ("tier", "front")]),
                false,
            ),
            (
                "stateful set requirements are added",
                owned(base(), "apps/v1", "StatefulSet", "ss"),
                map(&[("app", "web"), ("tier", "front"), ("ss", "yes")]),
                map(&[("app", "web"), ("tier", "front"), ("rs", "yes")]),
                false,
            ),
            (
                "unknown controller kind is ignored",
                owned(base(), "batch/v1", "Job", "rs"),
                map(&[("app", "web"), ("tier", "front")]),
                map(&[("app", "web")]),
                false,
            ),
            (
                "wrong group version for a ReplicaSet is ignored",
                owned(base(), "extensions/v1beta1", "ReplicaSet", "rs"),
                map(&[("app", "web"), ("tier", "front")]),
                map(&[("app", "web")]),
                false,
            ),
            (
                "missing controller object falls back to services",
                owned(base(), "apps/v1", "ReplicaSet", "gone"),
                map(&[("app", "web"), ("tier", "front")]),
                map(&[("tier", "front")]),
                false,
            ),
        ];
        for (name, p, matching, not_matching, empty) in cases {
            let sel = default_selector(&p, &snap);
            assert_eq!(sel.is_everything(), empty, "{name}: {sel:?}");
            if !empty {
                assert!(sel.matches(&matching), "{name}: should match {matching:?}");
                assert!(
                    !sel.matches(&not_matching),
                    "{name}: should not match {not_matching:?}"
                );
            }
        }
    }

    #[test]
    fn services_are_namespaced_and_nil_selectors_select_nothing() {
        let snap = Snapshot::new(objects());
        let p = pod("p").namespace("other").label("app", "other").obj();
        let names: Vec<_> = pod_services(&snap, &p)
            .iter()
            .map(|s| s.metadata.name.clone().unwrap_or_default())
            .collect();
        assert_eq!(names, vec!["web".to_string()]);
        let p = pod("p").label("zzz", "1").obj();
        assert!(pod_services(&snap, &p).is_empty());
    }

    #[test]
    fn group_version_parsing() {
        assert_eq!(parse_group_version("v1"), Some(("", "v1")));
        assert_eq!(parse_group_version("apps/v1"), Some(("apps", "v1")));
        assert_eq!(parse_group_version(""), Some(("", "")));
        assert_eq!(parse_group_version("a/b/c"), None);
    }
}
