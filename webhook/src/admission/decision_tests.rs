//! Decision tests over a [`StaticView`]: plans, denials with the scheduler's reasons, JSON patches
//! applied to the pod and checked, and idempotence (a decision re-made after its writes and patch plans
//! nothing and patches nothing).

use k8s_openapi::api::core::v1::{
    Affinity, Namespace, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use sched_core::ClusterObjects;
use sched_core::action::Action;
use sched_core::labels::NodeSelectorMatcher;
use sched_core::testing::{PvBuilder, PvcBuilder, node, pod, pv, pvc, storage_class};
use sched_core::volumes::{
    ANN_SELECTED_NODE, ERR_REASON_BIND_CONFLICT, ERR_REASON_NODE_CONFLICT, NOT_SUPPORTED_PROVISIONER,
    bind_volume_to_claim,
};

use super::*;

const HOST: &str = "kubernetes.io/hostname";
const NS: &str = "ns";

fn local_pv(name: &str, size: &str, on: &str) -> PvBuilder {
    pv(name)
        .storage_class("local")
        .capacity(size)
        .phase("Available")
        .access_modes(&["ReadWriteOnce"])
        .node_affinity(HOST, &[on])
        .uid(&format!("uid-{name}"))
        .resource_version("7")
}

fn claim(name: &str, class: &str) -> PvcBuilder {
    pvc(name)
        .namespace(NS)
        .storage_class(class)
        .request("1Gi")
        .access_modes(&["ReadWriteOnce"])
        .uid(&format!("uid-{name}"))
        .resource_version("3")
}

fn namespace(name: &str, labels: &[(&str, &str)]) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    }
}

/// Three nodes; local PVs: pv-a1 (2Gi) and pv-a2 (1Gi) on node-a, pv-b (1Gi) on node-b; classes
/// "local" (no provisioner, WFFC) and "dyn" (provisioner, WFFC); claims c1 (local), c2 (local), d1 (dyn).
fn cluster() -> ClusterObjects {
    ClusterObjects {
        nodes: ["node-a", "node-b", "node-c"]
            .iter()
            .map(|n| node(n).cpu("4").memory("8Gi").label(HOST, n).obj())
            .collect(),
        namespaces: vec![namespace(NS, &[])],
        persistent_volumes: vec![
            local_pv("pv-a1", "2Gi", "node-a").obj(),
            local_pv("pv-a2", "1Gi", "node-a").obj(),
            local_pv("pv-b", "1Gi", "node-b").obj(),
        ],
        persistent_volume_claims: vec![
            claim("c1", "local").obj(),
            claim("c2", "local").obj(),
            claim("d1", "dyn").obj(),
        ],
        storage_classes: vec![
            storage_class("local", NOT_SUPPORTED_PROVISIONER, "WaitForFirstConsumer"),
            storage_class("dyn", "csi.example.com", "WaitForFirstConsumer"),
        ],
        ..ClusterObjects::default()
    }
}

fn user_pod(name: &str) -> sched_core::testing::PodBuilder {
    pod(name).namespace(NS).cpu("100m")
}

/// Carries out a plan on the view's objects, as the API would.
fn carry_out(view: &mut StaticView, plan: &[Action]) {
    let objects = view.objects_mut();
    for action in plan {
        match action {
            Action::BindPv { pv, claim, .. } => {
                let stored_claim = objects
                    .persistent_volume_claims
                    .iter()
                    .find(|c| c.metadata.name.as_deref() == Some(claim.name.as_str()))
                    .cloned()
                    .expect("claim exists");
                let volume = objects
                    .persistent_volumes
                    .iter_mut()
                    .find(|v| v.metadata.name.as_deref() == Some(pv.name.as_str()))
                    .expect("pv exists");
                let mut updated = bind_volume_to_claim(volume, &stored_claim).volume;
                updated.metadata.resource_version = Some("8".into());
                *volume = updated;
            }
            Action::AnnotatePvc { pvc, key, value, .. } => {
                let stored = objects
                    .persistent_volume_claims
                    .iter_mut()
                    .find(|c| c.metadata.name.as_deref() == Some(pvc.name.as_str()))
                    .expect("claim exists");
                stored
                    .metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert(key.clone(), value.clone());
            }
            other => panic!("unexpected action {other:?}"),
        }
    }
}

fn apply_patch(pod: &Pod, ops: &[Value]) -> Pod {
    let mut doc = serde_json::to_value(pod).expect("pod to json");
    let patch: json_patch::Patch = serde_json::from_value(Value::Array(ops.to_vec())).expect("patch");
    json_patch::patch(&mut doc, &patch).expect("patch applies");
    serde_json::from_value(doc).expect("pod from json")
}

fn required_matcher(pod: &Pod) -> Option<NodeSelectorMatcher> {
    pod.spec
        .as_ref()?
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()
        .map(NodeSelectorMatcher::new)
}

fn allows_node(pod: &Pod, host: &str, extra: &[(&str, &str)]) -> bool {
    let mut labels: sched_core::labels::Labels = [(HOST.to_string(), host.to_string())].into();
    labels.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    required_matcher(pod).is_none_or(|m| m.matches(&labels, host))
}

fn bind_targets(plan: &[Action]) -> Vec<(String, String)> {
    plan.iter()
        .filter_map(|a| match a {
            Action::BindPv { pv, claim, .. } => Some((pv.name.clone(), claim.name.clone())),
            _ => None,
        })
        .collect()
}

// === pods CREATE ===

#[test]
fn pods_without_claims_need_nothing() {
    let view = StaticView::new(cluster());
    let d = pod_create::decide(&user_pod("p").node("node-a").obj(), &view);
    assert_eq!(d, Decision::allow(Operation::PodCreate));
}

#[test]
fn pods_without_node_or_opt_in_are_left_to_the_scheduler() {
    let view = StaticView::new(cluster());
    let d = pod_create::decide(&user_pod("p").pvc("c1").obj(), &view);
    assert_eq!(d, Decision::allow(Operation::PodCreate));
}

#[test]
fn node_name_pod_binds_the_smallest_local_pv_of_its_node_and_is_idempotent() {
    let mut view = StaticView::new(cluster());
    let p = user_pod("p").node("node-a").pvc("c1").obj();
    let d = pod_create::decide(&p, &view);
    assert_eq!(d.operation, Operation::PodCreateNodeName);
    assert_eq!(d.denial, None);
    assert!(d.patch.is_empty());
    assert_eq!(
        bind_targets(&d.plan),
        vec![("pv-a2".to_string(), "c1".to_string())]
    );
    let Action::BindPv {
        resource_version,
        claim,
        ..
    } = &d.plan[0]
    else {
        panic!("BindPv expected");
    };
    assert_eq!(resource_version.as_deref(), Some("7"));
    assert_eq!(claim.uid.as_deref(), Some("uid-c1"));

    carry_out(&mut view, &d.plan);
    let again = pod_create::decide(&p, &view);
    assert_eq!(again.plan, Vec::new(), "the PV is already bound to the claim");
    assert_eq!(again.denial, None);
}

#[test]
fn node_name_pod_with_a_dynamic_claim_selects_the_node() {
    let mut view = StaticView::new(cluster());
    let p = user_pod("p").node("node-c").pvc("d1").obj();
    let d = pod_create::decide(&p, &view);
    assert_eq!(d.denial, None);
    assert_eq!(
        d.plan,
        vec![Action::AnnotatePvc {
            pvc: sched_core::action::ObjectRef {
                namespace: NS.into(),
                name: "d1".into(),
                uid: Some("uid-d1".into()),
                resource_version: None,
            },
            key: ANN_SELECTED_NODE.into(),
            value: "node-c".into(),
            resource_version: Some("3".into()),
        }]
    );
    carry_out(&mut view, &d.plan);
    assert!(pod_create::decide(&p, &view).plan.is_empty());
}

#[test]
fn node_name_pod_without_a_usable_pv_is_denied_with_the_scheduler_reason() {
    let view = StaticView::new(cluster());
    let d = pod_create::decide(&user_pod("p").node("node-c").pvc("c1").obj(), &view);
    let message = d.denial.expect("denied");
    assert!(message.contains(ERR_REASON_BIND_CONFLICT), "{message}");
    assert!(message.contains("ns/c1"), "{message}");
    assert!(d.plan.is_empty());
}

#[test]
fn node_name_pod_whose_bound_pv_is_elsewhere_is_denied() {
    let mut objects = cluster();
    objects.persistent_volumes.push(
        local_pv("pv-bound", "1Gi", "node-b")
            .claim_ref(NS, "bound", "uid-bound")
            .phase("Bound")
            .obj(),
    );
    objects
        .persistent_volume_claims
        .push(claim("bound", "local").bound("pv-bound").obj());
    let view = StaticView::new(objects);
    let d = pod_create::decide(&user_pod("p").node("node-a").pvc("bound").obj(), &view);
    let message = d.denial.expect("denied");
    assert!(message.contains(ERR_REASON_NODE_CONFLICT), "{message}");
    // On the PV's node the same pod is fine and needs nothing.
    let ok = pod_create::decide(&user_pod("p").node("node-b").pvc("bound").obj(), &view);
    assert_eq!(ok.denial, None);
    assert!(ok.plan.is_empty());
}

#[test]
fn node_name_pod_with_a_missing_claim_or_node_is_allowed_with_a_warning() {
    let view = StaticView::new(cluster());
    let d = pod_create::decide(&user_pod("p").node("node-a").pvc("nope").obj(), &view);
    assert_eq!(d.denial, None);
    assert!(d.plan.is_empty());
    assert!(d.warnings[0].contains("\"nope\" not found"), "{:?}", d.warnings);
    let d = pod_create::decide(&user_pod("p").node("node-z").pvc("c1").obj(), &view);
    assert_eq!(d.denial, None);
    assert!(d.warnings[0].contains("node-z"), "{:?}", d.warnings);
}

fn opted_in_pod(name: &str) -> sched_core::testing::PodBuilder {
    user_pod(name).with(|p| {
        p.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(OPT_IN_KEY.into(), OPT_IN_VALUE.into());
    })
}

#[test]
fn opted_in_pod_is_prebound_and_restricted_to_the_pv_node() {
    let mut view = StaticView::new(cluster());
    // Two claims: only node-a has two PVs.
    let p = opted_in_pod("p").pvc("c1").pvc("c2").obj();
    let d = pod_create::decide(&p, &view);
    assert_eq!(d.operation, Operation::PodCreatePrebind);
    assert_eq!(d.denial, None);
    let mut targets = bind_targets(&d.plan);
    targets.sort();
    assert_eq!(
        targets,
        vec![
            ("pv-a1".to_string(), "c2".to_string()),
            ("pv-a2".to_string(), "c1".to_string())
        ]
    );
    let patched = apply_patch(&p, &d.patch);
    assert!(allows_node(&patched, "node-a", &[]));
    assert!(!allows_node(&patched, "node-b", &[]));
    assert!(!allows_node(&patched, "node-c", &[]));

    // Reinvocation on the patched pod after the writes: nothing to do, no patch.
    carry_out(&mut view, &d.plan);
    let again = pod_create::decide(&patched, &view);
    assert_eq!(again.plan, Vec::new());
    assert_eq!(again.patch, Vec::<Value>::new());
}

#[test]
fn namespace_label_opts_in_and_existing_terms_are_never_loosened() {
    let mut objects = cluster();
    objects.namespaces = vec![namespace(NS, &[(OPT_IN_KEY, OPT_IN_VALUE)])];
    let view = StaticView::new(objects);
    let required = NodeSelector {
        node_selector_terms: vec![
            NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: HOST.into(),
                    operator: "In".into(),
                    values: Some(vec!["node-b".into(), "node-c".into()]),
                }]),
                match_fields: None,
            },
            NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: "rack".into(),
                    operator: "In".into(),
                    values: Some(vec!["r1".into()]),
                }]),
                match_fields: None,
            },
        ],
    };
    let p = user_pod("p")
        .pvc("c1")
        .affinity(Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(required),
                preferred_during_scheduling_ignored_during_execution: None,
            }),
            ..Affinity::default()
        })
        .obj();
    let d = pod_create::decide(&p, &view);
    assert_eq!(
        bind_targets(&d.plan),
        vec![("pv-b".to_string(), "c1".to_string())]
    );
    let patched = apply_patch(&p, &d.patch);
    for (host, extra, before) in [
        ("node-b", vec![], true),
        ("node-c", vec![], true),
        ("node-a", vec![], false),
        ("node-a", vec![("rack", "r1")], true),
        ("node-b", vec![("rack", "r1")], true),
    ] {
        assert_eq!(allows_node(&p, host, &extra), before, "{host} {extra:?} before");
        // After: only where the PV is (node-b), and only where the pod was allowed before.
        assert_eq!(
            allows_node(&patched, host, &extra),
            before && host == "node-b",
            "{host} {extra:?} after"
        );
    }
}

#[test]
fn opted_in_pod_that_fits_nowhere_is_admitted_unchanged() {
    let view = StaticView::new(cluster());
    let p = opted_in_pod("p").cpu("64").pvc("c1").obj();
    let d = pod_create::decide(&p, &view);
    assert_eq!(d.denial, None);
    assert!(d.plan.is_empty() && d.patch.is_empty());
    assert!(d.warnings[0].contains("no node fits"), "{:?}", d.warnings);
}

#[test]
fn opted_in_pod_with_only_dynamic_claims_is_left_to_the_scheduler() {
    let view = StaticView::new(cluster());
    let d = pod_create::decide(&opted_in_pod("p").pvc("d1").obj(), &view);
    assert_eq!(d.denial, None);
    assert!(d.plan.is_empty() && d.patch.is_empty());
}

// === pods/binding ===

#[test]
fn binding_of_a_pod_with_bound_claims_needs_nothing() {
    let mut objects = cluster();
    objects
        .persistent_volume_claims
        .push(claim("ready", "local").bound("pv-x").obj());
    let p = user_pod("p").pvc("ready").obj();
    objects.pods.push(p.clone());
    let view = StaticView::new(objects);
    assert!(binding::needs_no_volume_check(&p, "node-a", &view));
    let d = binding::decide(Some(&p), "node-a", &view);
    assert!(d.is_passive());
    assert_eq!(d.denial, None);
}

#[test]
fn binding_prebinds_for_the_target_node() {
    let view = StaticView::new(cluster());
    let p = user_pod("p").pvc("c1").obj();
    assert!(!binding::needs_no_volume_check(&p, "node-b", &view));
    let d = binding::decide(Some(&p), "node-b", &view);
    assert_eq!(d.denial, None);
    assert_eq!(
        bind_targets(&d.plan),
        vec![("pv-b".to_string(), "c1".to_string())]
    );
}

#[test]
fn binding_to_a_node_that_cannot_reach_the_pv_is_denied() {
    let view = StaticView::new(cluster());
    let d = binding::decide(Some(&user_pod("p").pvc("c1").obj()), "node-c", &view);
    let message = d.denial.expect("denied");
    assert!(message.contains(ERR_REASON_BIND_CONFLICT), "{message}");
    assert!(d.plan.is_empty());
}

#[test]
fn binding_of_an_unknown_pod_is_allowed_with_a_warning() {
    let view = StaticView::new(cluster());
    let d = binding::decide(None, "node-a", &view);
    assert_eq!(d.denial, None);
    assert_eq!(d.warnings.len(), 1);
}

fn cleared(actions: &[Action]) -> Vec<String> {
    let mut names: Vec<String> = actions
        .iter()
        .filter_map(|a| match a {
            Action::SetNominatedNodeName { pod, node } if node.is_empty() => Some(pod.name.clone()),
            _ => None,
        })
        .collect();
    names.sort();
    names
}

#[test]
fn stale_lower_priority_nominations_are_found_for_the_bound_node() {
    let mut objects = cluster();
    let binding_pod = user_pod("high").cpu("3").priority(100).nominated("node-a").obj();
    objects.pods = vec![
        binding_pod.clone(),
        // Lower priority, 2 CPUs: no room next to the 3-CPU pod on a 4-CPU node.
        user_pod("low-big")
            .cpu("2")
            .priority(10)
            .nominated("node-a")
            .obj(),
        // Lower priority, small: still fits.
        user_pod("low-small")
            .cpu("500m")
            .priority(10)
            .nominated("node-a")
            .obj(),
        // Higher priority: never cleared by a lower-priority binding.
        user_pod("higher")
            .cpu("2")
            .priority(1000)
            .nominated("node-a")
            .obj(),
        // Nominated elsewhere.
        user_pod("other-node")
            .cpu("2")
            .priority(10)
            .nominated("node-b")
            .obj(),
    ];
    let view = StaticView::new(objects);
    // No claims: nothing for admission to check; the nominations are the controller's, once stored.
    assert!(binding::needs_no_volume_check(&binding_pod, "node-a", &view));
    let d = binding::decide(Some(&binding_pod), "node-a", &view);
    assert_eq!(d.denial, None);
    assert!(d.is_passive(), "admission writes nothing: {d:?}");
    let stale = binding::stale_nominations(&binding_pod, "node-a", &view);
    assert_eq!(cleared(&stale), vec!["low-big".to_string()]);
    let Action::SetNominatedNodeName { pod, .. } = &stale[0] else {
        panic!("a clearing");
    };
    assert_eq!(pod.uid.as_deref(), Some("ns-low-big"));

    // Counted once when the view already has the pod on the node (the controller's case).
    let mut bound = binding_pod.clone();
    bound.spec.as_mut().expect("spec").node_name = Some("node-a".into());
    let mut objects = cluster();
    objects.pods = vec![
        bound.clone(),
        user_pod("low-small")
            .cpu("500m")
            .priority(10)
            .nominated("node-a")
            .obj(),
    ];
    let view = StaticView::new(objects);
    assert!(binding::stale_nominations(&bound, "node-a", &view).is_empty());
}

// === another scheduler's pods ===

#[test]
fn pods_of_a_scheduler_without_a_profile_are_left_alone_but_their_bindings_are_checked() {
    let view = StaticView::new(cluster());
    // Opted in, with a claim the engine would pre-bind for a default-scheduler pod.
    let p = opted_in_pod("p").pvc("c1").scheduler_name("my-scheduler").obj();
    assert_eq!(
        pod_create::decide(&p, &view),
        Decision::allow(Operation::PodCreate),
        "kube-scheduler ignores the pod: no decision, admitted unchanged"
    );
    assert!(!wants_prebind(&p, &view));
    assert_eq!(
        pod_create::admission_prebind(&p, &view),
        Decision::allow(Operation::PodCreatePrebind),
        "the controller's path leaves it alone too, without a warning"
    );
    // The same pod under a configuration that runs a profile of that name is pre-bound.
    let registry = sched_core::engine::in_tree_registry();
    let config = sched_core::engine::SchedulerConfig::from_str(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n\
         - schedulerName: my-scheduler\n",
        "test",
        &registry,
    )
    .expect("config");
    let mine = StaticView::new(cluster()).with_engine(sched_core::Engine::new(registry, config, "test"));
    let d = pod_create::decide(&p, &mine);
    assert_eq!(d.operation, Operation::PodCreatePrebind);
    assert_eq!(bind_targets(&d.plan).len(), 1, "{d:?}");

    // Its binding, by whichever scheduler, is checked for the target node: PreBind needs no profile.
    let d = binding::decide(Some(&p), "node-b", &view);
    assert_eq!(d.denial, None);
    assert_eq!(
        bind_targets(&d.plan),
        vec![("pv-b".to_string(), "c1".to_string())]
    );
    let d = binding::decide(Some(&p), "node-c", &view);
    assert!(d.denial.expect("denied").contains(ERR_REASON_BIND_CONFLICT));
}

#[test]
fn nominations_of_another_schedulers_pods_are_left_to_it() {
    let mut objects = cluster();
    let binding_pod = user_pod("high").cpu("3").priority(100).nominated("node-a").obj();
    objects.pods = vec![
        binding_pod.clone(),
        // Would no longer fit next to the bound pod, but no profile judges it: left alone.
        user_pod("theirs")
            .cpu("2")
            .priority(10)
            .nominated("node-a")
            .scheduler_name("my-scheduler")
            .obj(),
        user_pod("ours").cpu("2").priority(10).nominated("node-a").obj(),
    ];
    let view = StaticView::new(objects);
    let stale = binding::stale_nominations(&binding_pod, "node-a", &view);
    assert_eq!(cleared(&stale), vec!["ours".to_string()]);
}

/// NodeVolumeLimits counts the node's VolumeAttachments, volumes still attached after their pod left
/// included: node-a's CSINode allows one volume of the driver, so a nominated pod bringing one no
/// longer fits once another volume is attached there (kube-scheduler's `node(s) exceed max volume
/// count`). Checked on the reflector cache the webhook runs with, and on the static view.
#[test]
fn a_volume_attachment_filling_the_attach_limit_makes_a_nomination_stale() {
    use sched_core::engine::{SchedulerConfig, in_tree_registry};
    use sched_core::testing::{csi_node, volume_attachment};

    use crate::cache::Cache;

    const DRIVER: &str = "csi.example.com";
    let binding_pod = user_pod("high").priority(100).nominated("node-a").obj();
    let objects = |attached: bool| {
        let mut o = cluster();
        o.csi_nodes = vec![csi_node("node-a", &[(DRIVER, Some(1))])];
        o.persistent_volumes.extend([
            pv("pv-new").csi(DRIVER, "h-new").obj(),
            pv("pv-left").csi(DRIVER, "h-left").obj(),
        ]);
        o.persistent_volume_claims
            .push(pvc("vol").namespace(NS).bound("pv-new").obj());
        o.pods = vec![
            binding_pod.clone(),
            user_pod("low").priority(10).pvc("vol").nominated("node-a").obj(),
        ];
        if attached {
            // No pod uses pv-left any more; it is still attached to node-a.
            o.volume_attachments = vec![volume_attachment("csi-left", DRIVER, "node-a", Some("pv-left"))];
        }
        o
    };
    for attached in [false, true] {
        let want = if attached {
            vec!["low".to_string()]
        } else {
            Vec::new()
        };
        let (cache, mut writers) = Cache::new(SchedulerConfig::default_config(&in_tree_registry()));
        cache.fill(&mut writers, objects(attached));
        let stale = binding::stale_nominations(&binding_pod, "node-a", &*cache);
        assert_eq!(cleared(&stale), want, "reflector cache, attached: {attached}");
        let view = StaticView::new(objects(attached));
        let stale = binding::stale_nominations(&binding_pod, "node-a", &view);
        assert_eq!(cleared(&stale), want, "static view, attached: {attached}");
    }
}

// === pods with ResourceClaims (DRA) ===

fn with_resource_claim(builder: sched_core::testing::PodBuilder) -> sched_core::testing::PodBuilder {
    builder.with(|p| {
        p.spec.as_mut().expect("spec").resource_claims =
            Some(vec![k8s_openapi::api::core::v1::PodResourceClaim {
                name: "gpu".into(),
                resource_claim_name: Some("gpu-claim".into()),
                ..Default::default()
            }]);
    })
}

#[test]
fn pods_with_resource_claims_pass_through_and_keep_their_nominations() {
    // Opted in and with a claim node-a's PVs could serve: still no pre-binding, since choosing its
    // node would choose its devices, which only kube-scheduler allocates.
    let view = StaticView::new(cluster());
    let p = with_resource_claim(opted_in_pod("p").pvc("c1")).obj();
    let d = pod_create::decide(&p, &view);
    assert_eq!(d.denial, None);
    assert!(d.plan.is_empty() && d.patch.is_empty(), "{d:?}");
    // The same pod without its ResourceClaim is pre-bound: the claim is what makes the difference.
    let plain = opted_in_pod("p").pvc("c1").obj();
    assert!(!pod_create::decide(&plain, &view).plan.is_empty());

    // A lower-priority DRA pod nominated to the node the binding takes is left to kube-scheduler,
    // whose fit depends on devices the webhook does not track.
    let mut objects = cluster();
    let binding_pod = user_pod("high").cpu("3").priority(100).nominated("node-a").obj();
    objects.pods = vec![
        binding_pod.clone(),
        with_resource_claim(user_pod("low-dra").cpu("2").priority(10).nominated("node-a")).obj(),
        user_pod("low-big")
            .cpu("2")
            .priority(10)
            .nominated("node-a")
            .obj(),
    ];
    let view = StaticView::new(objects);
    let stale = binding::stale_nominations(&binding_pod, "node-a", &view);
    assert_eq!(cleared(&stale), vec!["low-big".to_string()]);
}
