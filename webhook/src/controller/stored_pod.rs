//! What a pod the API server has stored needs from the controller: pure functions from the pod and a
//! [`ClusterView`] to the writes, the same decisions admission makes (`admission::pod_create`,
//! `admission::binding`) but taken for an object that exists.
//!
//! | stored pod | work |
//! |---|---|
//! | bound to a node (created with `spec.nodeName`, or bound through pods/binding), claims not all bound | volume binding's PreBind for that node |
//! | unbound, opted in (annotation or namespace label), claims not all bound | pre-binding to the static PVs of the best node (the stored affinity already names where they are) |
//! | bound recently | its own `nominatedNodeName` (where the API server keeps it: before `ClearingNominatedNodeNameAfterBinding`) and the stale lower-priority nominations to its node are cleared |
//!
//! Pods in namespaces outside the controller's selector, terminating or terminal pods, pods with more
//! claims than the cap, and unbound pods whose schedulerName names no profile of the scheduler
//! configuration (another scheduler's, as kube-scheduler ignores them) are left alone.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use sched_core::action::Action;
use sched_core::labels::Selector;

use crate::admission::binding::{pod_ref, stale_nominations};
use crate::admission::pod_create::{admission_prebind, for_node};
use crate::admission::{ClusterView, Decision, claims_all_bound, pod_claims, wants_prebind};

/// Which pods the controller acts on.
#[derive(Debug, Clone)]
pub struct Scope {
    /// Namespaces (by their labels) whose pods are served; the webhook configuration's
    /// namespaceSelector should say the same.
    pub namespaces: Selector,
    /// Pods with more claims than this are left to the scheduler (no node takes that many volumes).
    pub max_claims: usize,
    /// A pod bound longer ago than this is not a new binding: its node's nominations were settled.
    pub binding_window: Duration,
}

/// The volume work of a stored pod.
#[derive(Debug, Clone, PartialEq)]
pub enum VolumeWork {
    /// Nothing to do.
    Nothing,
    /// Out of scope, with the reason (logged, counted).
    Skipped(String),
    /// The decision whose plan is to be run (its denial, if any, says why nothing can be done).
    Decide(Decision),
}

fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

/// True for a pod that is going away or has ended: nothing is prepared for it.
fn is_finished(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
        || pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p == "Succeeded" || p == "Failed")
}

/// True when `pod`'s namespace is served.
pub fn in_scope(pod: &Pod, view: &dyn ClusterView, scope: &Scope) -> bool {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    let mut labels = view.namespace_labels(namespace).unwrap_or_default();
    // As the API server does for namespaceSelector: every namespace carries its name as a label.
    labels
        .entry("kubernetes.io/metadata.name".into())
        .or_insert_with(|| namespace.to_string());
    scope.namespaces.matches(&labels)
}

/// The volume work `pod` needs now.
pub fn volume_work(pod: &Pod, view: &dyn ClusterView, scope: &Scope) -> VolumeWork {
    if is_finished(pod) || !in_scope(pod, view, scope) {
        return VolumeWork::Nothing;
    }
    let claims = pod_claims(pod);
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    if claims.is_empty() || claims_all_bound(pod, |c| view.pvc(namespace, c)) {
        return VolumeWork::Nothing;
    }
    if claims.len() > scope.max_claims {
        return VolumeWork::Skipped(format!(
            "{} claims, more than the {} considered: left to the scheduler",
            claims.len(),
            scope.max_claims
        ));
    }
    let node = node_name(pod);
    if !node.is_empty() {
        return VolumeWork::Decide(for_node(pod, node, view));
    }
    // Opted in, and a pod of a scheduler the engine runs a profile for (another scheduler's pod is left
    // to it, as kube-scheduler leaves it).
    if wants_prebind(pod, view) {
        return VolumeWork::Decide(admission_prebind(pod, view));
    }
    VolumeWork::Nothing
}

/// When `pod` was bound: its PodScheduled condition's transition, or its creation when it was created
/// bound (no condition).
pub fn bound_at(pod: &Pod) -> Option<Timestamp> {
    if node_name(pod).is_empty() {
        return None;
    }
    let scheduled = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled" && c.status == "True"))
        .and_then(|c| c.last_transition_time.as_ref().map(|t| t.0));
    scheduled.or_else(|| pod.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// The nominations to clear because `pod` is bound: its own, only where the API server keeps it
/// (without `ClearingNominatedNodeNameAfterBinding`: off in v1.34, absent before; from v1.35 the API
/// server clears it as it stores the binding, and a second writer would only race it), and those of
/// lower-priority pods nominated to its node that no longer fit there. Stale nominations are only
/// looked for while the binding is new (`now` within the scope's window): an old binding's node was
/// settled when it happened, and a later nomination there was made knowing of it.
///
/// The gate is read from the view's engine, whose gates are those of the API server the webhook
/// serves (its version and `--feature-gates`).
pub fn nomination_work(pod: &Pod, view: &dyn ClusterView, scope: &Scope, now: Timestamp) -> Vec<Action> {
    let node = node_name(pod);
    if node.is_empty() || is_finished(pod) || !in_scope(pod, view, scope) {
        return Vec::new();
    }
    let mut clear = Vec::new();
    let own = pod
        .status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .unwrap_or("");
    let api_server_clears = view
        .engine()
        .features()
        .clearing_nominated_node_name_after_binding;
    if !own.is_empty() && !api_server_clears {
        clear.push(Action::SetNominatedNodeName {
            pod: pod_ref(pod),
            node: String::new(),
        });
    }
    let recent = bound_at(pod).is_some_and(|at| {
        now.duration_since(at)
            .try_into()
            .is_ok_and(|age: Duration| age <= scope.binding_window)
    });
    if recent && !view.nominated_pods(node).is_empty() {
        clear.extend(stale_nominations(pod, node, view));
    }
    clear
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::{OPT_IN_KEY, OPT_IN_VALUE, StaticView};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use sched_core::features::{FeatureGates, KubeVersion};
    use sched_core::testing::{PodBuilder, node, pod, pv, pvc, storage_class};
    use sched_core::volumes::NOT_SUPPORTED_PROVISIONER;
    use sched_core::{ClusterObjects, Engine};

    const HOST: &str = "kubernetes.io/hostname";

    fn scope() -> Scope {
        Scope {
            namespaces: Selector::everything(),
            max_claims: 4,
            binding_window: Duration::from_secs(120),
        }
    }

    /// Node n1 with `claims` local PVs and as many unbound WaitForFirstConsumer claims in "ns".
    fn view(claims: usize) -> StaticView {
        let mut objects = ClusterObjects {
            nodes: vec![node("n1").cpu("4").memory("8Gi").label(HOST, "n1").obj()],
            storage_classes: vec![storage_class(
                "local",
                NOT_SUPPORTED_PROVISIONER,
                "WaitForFirstConsumer",
            )],
            ..ClusterObjects::default()
        };
        for i in 0..claims {
            objects.persistent_volumes.push(
                pv(&format!("pv{i}"))
                    .storage_class("local")
                    .capacity("1Gi")
                    .phase("Available")
                    .access_modes(&["ReadWriteOnce"])
                    .node_affinity(HOST, &["n1"])
                    .uid(&format!("uid-pv{i}"))
                    .resource_version("7")
                    .obj(),
            );
            objects.persistent_volume_claims.push(
                pvc(&format!("c{i}"))
                    .namespace("ns")
                    .storage_class("local")
                    .request("1Gi")
                    .access_modes(&["ReadWriteOnce"])
                    .uid(&format!("uid-c{i}"))
                    .resource_version("3")
                    .obj(),
            );
        }
        StaticView::new(objects)
    }

    fn with_claims(builder: PodBuilder, claims: usize) -> PodBuilder {
        (0..claims).fold(builder, |b, i| b.pvc(&format!("c{i}")))
    }

    fn user_pod(name: &str) -> PodBuilder {
        pod(name)
            .namespace("ns")
            .cpu("100m")
            .with(|p| p.metadata.uid = Some(format!("uid-{}", "p")))
    }

    fn plan_len(work: &VolumeWork) -> Option<usize> {
        match work {
            VolumeWork::Decide(d) if d.denial.is_none() => Some(d.plan.len()),
            _ => None,
        }
    }

    #[test]
    fn bound_pods_get_prebind_for_their_node() {
        let v = view(2);
        let p = with_claims(user_pod("p").node("n1"), 2).obj();
        assert_eq!(plan_len(&volume_work(&p, &v, &scope())), Some(2));
    }

    #[test]
    fn unbound_pods_are_left_alone_unless_opted_in() {
        let v = view(1);
        let p = with_claims(user_pod("p"), 1).obj();
        assert_eq!(volume_work(&p, &v, &scope()), VolumeWork::Nothing);
        let opted = with_claims(user_pod("p"), 1)
            .with(|p| {
                p.metadata.annotations = Some([(OPT_IN_KEY.to_string(), OPT_IN_VALUE.to_string())].into());
            })
            .obj();
        assert_eq!(plan_len(&volume_work(&opted, &v, &scope())), Some(1));
    }

    #[test]
    fn finished_out_of_scope_and_oversized_pods_are_not_served() {
        let v = view(5);
        let terminating = with_claims(user_pod("p").node("n1"), 1)
            .with(|p| p.metadata.deletion_timestamp = Some(Time(Timestamp::now())))
            .obj();
        assert_eq!(volume_work(&terminating, &v, &scope()), VolumeWork::Nothing);

        let p = with_claims(user_pod("p").node("n1"), 1).obj();
        let only_other = Scope {
            namespaces: Selector::from_map(&[("team".to_string(), "x".to_string())].into()),
            ..scope()
        };
        assert_eq!(volume_work(&p, &v, &only_other), VolumeWork::Nothing);
        let by_name = Scope {
            namespaces: Selector::from_map(
                &[("kubernetes.io/metadata.name".to_string(), "ns".to_string())].into(),
            ),
            ..scope()
        };
        assert_eq!(plan_len(&volume_work(&p, &v, &by_name)), Some(1));

        let big = with_claims(user_pod("p").node("n1"), 5).obj();
        assert!(
            matches!(volume_work(&big, &v, &scope()), VolumeWork::Skipped(m) if m.starts_with("5 claims")),
            "more claims than the cap are not considered"
        );
    }

    /// A view of `v`'s objects whose engine has the gates of `version`'s API server, with
    /// ClearingNominatedNodeNameAfterBinding as `clearing` says when given.
    fn on_release(v: StaticView, version: KubeVersion, clearing: Option<bool>) -> StaticView {
        let mut features = FeatureGates::for_version(version);
        if let Some(on) = clearing {
            features.clearing_nominated_node_name_after_binding = on;
        }
        v.with_engine(Engine::for_features(None, features).expect("default profile"))
    }

    #[test]
    fn own_nomination_is_cleared_only_where_the_api_server_keeps_it() {
        let p = user_pod("p")
            .node("n1")
            .nominated("n1")
            .with(|p| {
                p.metadata.resource_version = Some("42".into());
                p.metadata.creation_timestamp = Some(Time(Timestamp::now()));
            })
            .obj();
        // (API server, ClearingNominatedNodeNameAfterBinding overridden, cleared by the webhook)
        let cases = [
            (KubeVersion::new(33, 13), None, true),
            (KubeVersion::new(34, 4), None, true),
            (KubeVersion::new(35, 4), None, false),
            (KubeVersion::new(37, 1), None, false),
            (KubeVersion::new(37, 1), Some(false), true),
            (KubeVersion::new(34, 4), Some(true), false),
        ];
        for (version, clearing, cleared) in cases {
            let v = on_release(view(0), version, clearing);
            let work = nomination_work(&p, &v, &scope(), Timestamp::now());
            let name = format!("{version}, gate {clearing:?}");
            if !cleared {
                assert!(work.is_empty(), "{name}: the API server clears it: {work:?}");
                continue;
            }
            let [Action::SetNominatedNodeName { pod, node }] = work.as_slice() else {
                panic!("{name}: one clearing expected: {work:?}");
            };
            assert_eq!(
                (pod.uid.as_deref(), pod.resource_version.as_deref()),
                (Some("uid-p"), Some("42")),
                "{name}"
            );
            assert!(node.is_empty(), "{name}");
            // A pod that is not bound keeps its nomination: it is the scheduler's.
            let pending = user_pod("p").nominated("n1").obj();
            assert!(
                nomination_work(&pending, &v, &scope(), Timestamp::now()).is_empty(),
                "{name}"
            );
        }
    }

    #[test]
    fn only_new_bindings_clear_lower_priority_nominations() {
        let bound = Timestamp::now();
        let high = pod("high")
            .namespace("ns")
            .priority(10)
            .cpu("800m")
            .node("n1")
            .with(|p| {
                p.metadata.uid = Some("h".into());
                p.metadata.creation_timestamp = Some(Time(bound));
            })
            .obj();
        let low = pod("low")
            .namespace("ns")
            .priority(1)
            .cpu("800m")
            .nominated("n1")
            .with(|p| p.metadata.uid = Some("l".into()))
            .obj();
        let v = StaticView::new(ClusterObjects {
            nodes: vec![node("n1").cpu("1").memory("1Gi").obj()],
            pods: vec![high.clone(), low],
            ..ClusterObjects::default()
        });
        let cleared = nomination_work(&high, &v, &scope(), bound);
        assert_eq!(
            cleared.len(),
            1,
            "the lower-priority pod no longer fits: {cleared:?}"
        );
        let later = bound
            .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(600))
            .expect("time");
        assert!(nomination_work(&high, &v, &scope(), later).is_empty());
    }
}
