//! Table-driven checks of the new-node verdict. The expected sentences of the first cases are the
//! events the real Karpenter v1.14.0 (KWOK provider) wrote on a v1.37.2 control plane for the same
//! pool and pods (tests/karpenter/build.sh builds it).

use serde_json::json;

use super::*;
use crate::node_pools::instance_types::{TEST_INSTANCE_TYPES, parse_instance_types};
use crate::node_pools::node_pool::{NodePool, by_weight};
use crate::testing::{pod, toleration};
use k8s_openapi::api::core::v1::Toleration;

/// The pool of the hand-run check: on-demand amd64, tainted team=ml, at most 100 cpus.
fn general() -> NodePool {
    NodePool::from_json(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "general"},
        "spec": {
            "template": {"spec": {
                "requirements": [
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
                ],
                "nodeClassRef": {"name": "default", "kind": "KWOKNodeClass", "group": "karpenter.kwok.sh"},
                "taints": [{"key": "team", "value": "ml", "effect": "NoSchedule"}]
            }},
            "limits": {"cpu": "100"}
        }
    }))
    .expect("valid NodePool")
}

fn answer(pod: &Pod, pools: &[NodePool], used: &[ResourceAmounts]) -> ScaleUpAnswer {
    let types = parse_instance_types(TEST_INSTANCE_TYPES).expect("valid types");
    let states: Vec<PoolState<'_>> = pools
        .iter()
        .map(|pool| PoolState {
            pool,
            remaining: pool.remaining(used),
        })
        .collect();
    scale_up_for_pod(pod, &states, &types)
}

fn ml() -> Toleration {
    toleration("team", "Equal", "ml", "NoSchedule")
}

#[test]
fn karpenters_events_byte_for_byte() {
    let pools = [general()];
    let cases = [
        (
            "too big for every instance type",
            pod("huge").cpu("1000").toleration(ml()).obj(),
            "no instance type has enough resources, requirements=karpenter.kwok.sh/kwoknodeclass In [default], \
             karpenter.sh/capacity-type In [on-demand], karpenter.sh/initialized In [true], karpenter.sh/nodepool \
             In [general], karpenter.sh/registered In [true], kubernetes.io/arch In [amd64], \
             resources={\"cpu\":\"1k\",\"pods\":\"1\"}",
        ),
        (
            "the pool's taint",
            pod("untolerated").cpu("1").obj(),
            "did not tolerate taint (taint=team=ml:NoSchedule)",
        ),
    ];
    for (name, pod, want) in cases {
        let got = answer(&pod, &pools, &[]);
        assert_eq!(got.outcome, Err(want.to_owned()), "{name}");
    }
}

#[test]
fn a_pod_that_fits_names_the_pool_and_the_cheapest_type() {
    let got = answer(&pod("fits").cpu("2").toleration(ml()).obj(), &[general()], &[]);
    let node = got.outcome.expect("a new node takes it");
    assert_eq!(node.pool, "general");
    // On-demand only: the 4-cpu type at 0.2 before the 16-cpu one at 0.8.
    assert_eq!(node.instance_types, ["c-4x-amd64-linux", "c-16x-amd64-linux"]);
    assert_eq!(node.price, 0.2);
    // Too big for the small type: only the large one remains.
    let got = answer(
        &pod("big").cpu("8").memory("1536Mi").toleration(ml()).obj(),
        &[general()],
        &[],
    );
    assert_eq!(
        got.outcome.map(|n| n.instance_types),
        Ok(vec!["c-16x-amd64-linux".to_owned()])
    );
}

#[test]
fn limits_are_spent_by_the_pools_nodes() {
    let mut used = ResourceAmounts::default();
    used.set("cpu", 90_000);
    let pod = pod("p").cpu("1").toleration(ml()).obj();
    // 10 cpus left: the 16-cpu type would breach the limit, the 4-cpu one fits.
    let got = answer(&pod, &[general()], std::slice::from_ref(&used));
    assert_eq!(
        got.outcome.map(|n| n.instance_types),
        Ok(vec!["c-4x-amd64-linux".to_owned()])
    );
    used.set("cpu", 98_000);
    let got = answer(&pod, &[general()], std::slice::from_ref(&used));
    assert_eq!(
        got.outcome,
        Err("all available instance types exceed limits for nodepool (NodePool=general)".to_owned())
    );
    let capped = NodePool::from_json(json!({
        "metadata": {"name": "capped"},
        "spec": {"template": {"spec": {"requirements": []}}, "limits": {"nodes": "1"}}
    }))
    .expect("valid NodePool");
    let got = answer(&pod, &[capped], &[ResourceAmounts::default()]);
    assert_eq!(
        got.outcome,
        Err("node limits have been exhausted for nodepool (NodePool=capped)".to_owned())
    );
}

#[test]
fn requirements_the_pool_cannot_meet() {
    let pools = [general()];
    let cases = [
        (
            pod("arm")
                .toleration(ml())
                .node_selector("kubernetes.io/arch", "arm64")
                .obj(),
            "incompatible requirements, key kubernetes.io/arch, kubernetes.io/arch In [arm64] not in \
             kubernetes.io/arch In [amd64]",
        ),
        (
            pod("tier").toleration(ml()).node_selector("tier", "db").obj(),
            "incompatible requirements, label \"tier\" does not have known values",
        ),
        (
            pod("zone-c")
                .toleration(ml())
                .node_selector("topology.kubernetes.io/zone", "test-zone-c")
                .obj(),
            "no instance type met the scheduling requirements or had a required offering, \
             requirements=karpenter.kwok.sh/kwoknodeclass In [default], karpenter.sh/capacity-type In [on-demand], \
             karpenter.sh/initialized In [true], karpenter.sh/nodepool In [general], karpenter.sh/registered In \
             [true], kubernetes.io/arch In [amd64], topology.kubernetes.io/zone In [test-zone-c], \
             resources={\"pods\":\"1\"}",
        ),
    ];
    for (pod, want) in cases {
        assert_eq!(answer(&pod, &pools, &[]).outcome, Err(want.to_owned()));
    }
}

#[test]
fn pools_are_tried_heaviest_first_and_errors_join() {
    let light = NodePool::from_json(json!({
        "metadata": {"name": "a-light"},
        "spec": {"weight": 1, "template": {"spec": {"taints": [{"key": "light", "effect": "NoSchedule"}]}}}
    }))
    .expect("valid NodePool");
    let heavy = NodePool::from_json(json!({
        "metadata": {"name": "z-heavy"},
        "spec": {"weight": 10, "template": {"spec": {"taints": [{"key": "heavy", "effect": "NoSchedule"}]}}}
    }))
    .expect("valid NodePool");
    let mut pools = vec![light, heavy];
    by_weight(&mut pools);
    assert_eq!(pools[0].name, "z-heavy");
    let got = answer(&pod("p").cpu("1").obj(), &pools, &[]);
    assert_eq!(
        got.outcome,
        Err("did not tolerate taint (taint=heavy:NoSchedule); did not tolerate taint (taint=light:NoSchedule)"
            .to_owned())
    );
    let tolerant = pod("q")
        .cpu("1")
        .toleration(toleration("light", "Exists", "", "NoSchedule"))
        .obj();
    assert_eq!(
        answer(&tolerant, &pools, &[]).outcome.map(|n| n.pool),
        Ok("a-light".to_owned())
    );
}

#[test]
fn startup_taints_need_no_toleration() {
    let pool = NodePool::from_json(json!({
        "metadata": {"name": "boot"},
        "spec": {"template": {"spec": {"startupTaints": [{"key": "init", "effect": "NoSchedule"}]}}}
    }))
    .expect("valid NodePool");
    assert!(answer(&pod("p").cpu("1").obj(), &[pool], &[]).outcome.is_ok());
}

#[test]
fn no_pool_with_an_instance_type() {
    let windows = NodePool::from_json(json!({
        "metadata": {"name": "win"},
        "spec": {"template": {"spec": {"requirements": [
            {"key": "kubernetes.io/os", "operator": "In", "values": ["windows"]}]}}}
    }))
    .expect("valid NodePool");
    // The pool's requirements still allow every offering (os is not an offering's key): it has a
    // template, and its instance types then fail the requirements.
    let got = answer(&pod("p").cpu("1").obj(), &[windows], &[]);
    assert!(
        got.outcome
            .as_ref()
            .is_err_and(|e| e.starts_with("no instance type met all requirements")),
        "{got:?}"
    );
    let spot_only = NodePool::from_json(json!({
        "metadata": {"name": "spot"},
        "spec": {"template": {"spec": {"requirements": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["nowhere"]}]}}}
    }))
    .expect("valid NodePool");
    assert_eq!(
        answer(&pod("p").cpu("1").obj(), &[spot_only], &[]).outcome,
        Err(NO_TEMPLATES.to_owned())
    );
}
