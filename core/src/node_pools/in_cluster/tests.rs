//! The pools of a snapshot: limits counted from the pools' nodes, the catalogue from a file or from
//! those nodes, and NodePools that cannot be read reported by name.

use serde_json::{Value, json};

use super::*;
use crate::node_pools::instance_types::{TEST_INSTANCE_TYPES, parse_instance_types};
use crate::node_pools::new_node::PoolVerdict;
use crate::snapshot::ClusterObjects;
use crate::snapshot::node_pools::NodePoolObject;
use crate::testing::{node, pod, snapshot_of};

/// An on-demand amd64 pool of the KWOK node class, with `limits`.
fn pool(name: &str, limits: Value) -> NodePoolObject {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {"spec": {
                "requirements": [
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
                ],
                "nodeClassRef": {"name": "default", "kind": "KWOKNodeClass", "group": "karpenter.kwok.sh"}
            }},
            "limits": limits
        }
    }))
    .expect("a NodePool")
}

/// A 4-cpu node the pool `general` made, in zone a, on demand.
fn pool_node(name: &str) -> Node {
    node(name)
        .cpu("4")
        .memory("16Gi")
        .label(NODE_POOL_LABEL, "general")
        .label(INSTANCE_TYPE_LABEL, "c-4x-amd64-linux")
        .label("kubernetes.io/arch", "amd64")
        .label("kubernetes.io/os", "linux")
        .label(ZONE_LABEL, "test-zone-a")
        .label(CAPACITY_TYPE_LABEL, "on-demand")
        .label("karpenter.kwok.sh/instance-cpu", "4")
        .0
}

/// The pool and instance types of the node launched, or Karpenter's error.
type Launch = Result<(String, Vec<String>), String>;

fn outcome(answer: &NodePoolsAnswer) -> Launch {
    answer
        .answer
        .outcome
        .clone()
        .map(|node| (node.pool, node.instance_types))
}

#[test]
fn a_snapshot_without_node_pools_has_no_answer() {
    let snapshot = snapshot_of(ClusterObjects {
        nodes: vec![pool_node("n1")],
        ..Default::default()
    });
    assert_eq!(node_pools_answer(&snapshot, &pod("p").cpu("1").obj(), None), None);
}

#[test]
fn answers_by_catalogue_and_limits() {
    let types = parse_instance_types(TEST_INSTANCE_TYPES).expect("valid types");
    // (case, the pool's limits, types from the file (else from the nodes), the pod's cpu, launch)
    let cases: [(&str, Value, bool, &str, Launch); 4] = [
        (
            "the file's types, no limits",
            json!(null),
            true,
            "2",
            Ok(("general".into(), vec!["c-4x-amd64-linux".into(), "c-16x-amd64-linux".into()])),
        ),
        (
            "the node's 4 cpus use up a limit of 4",
            json!({"cpu": "4"}),
            true,
            "2",
            Err("all available instance types exceed limits for nodepool (NodePool=general)".into()),
        ),
        (
            "the type the pool's node shows",
            json!({"cpu": "100"}),
            false,
            "2",
            Ok(("general".into(), vec!["c-4x-amd64-linux".into()])),
        ),
        (
            "nothing the nodes show is big enough",
            json!(null),
            false,
            "8",
            Err("no instance type has enough resources, requirements=karpenter.kwok.sh/kwoknodeclass In \
                 [default], karpenter.sh/capacity-type In [on-demand], karpenter.sh/initialized In [true], \
                 karpenter.sh/nodepool In [general], karpenter.sh/registered In [true], kubernetes.io/arch In \
                 [amd64], resources={\"cpu\":\"8\",\"pods\":\"1\"}"
                .into()),
        ),
    ];
    for (name, limits, from_file, cpu, want) in cases {
        let catalogue = from_file.then_some(types.as_slice());
        let snapshot = snapshot_of(ClusterObjects {
            nodes: vec![pool_node("n1")],
            node_pools: vec![pool("general", limits)],
            ..Default::default()
        });
        let answer = node_pools_answer(&snapshot, &pod("p").cpu(cpu).obj(), catalogue).expect("pools");
        assert_eq!(outcome(&answer), want, "{name}");
        let source = if catalogue.is_some() {
            CatalogueSource::File
        } else {
            CatalogueSource::Nodes
        };
        assert_eq!(answer.catalogue, source, "{name}");
    }
}

#[test]
fn types_from_nodes_are_sold_where_their_nodes_run() {
    let mut spot = pool_node("n2");
    let labels = spot.metadata.labels.as_mut().expect("labels");
    labels.insert(ZONE_LABEL.into(), "test-zone-b".into());
    labels.insert(CAPACITY_TYPE_LABEL.into(), "spot".into());
    let not_a_pools = node("n3").cpu("64").label(INSTANCE_TYPE_LABEL, "big").0;
    let nodes = [pool_node("n1"), spot, not_a_pools];
    let types = instance_types_of_nodes(&nodes.iter().collect::<Vec<_>>());
    assert_eq!(types.len(), 1, "only nodes of a pool describe its types");
    let it = &types[0];
    assert_eq!(
        it.requirements.to_string(),
        "karpenter.kwok.sh/instance-cpu In [4], karpenter.sh/capacity-type In [on-demand spot], \
         kubernetes.io/arch In [amd64], kubernetes.io/os In [linux], node.kubernetes.io/instance-type In \
         [c-4x-amd64-linux], topology.kubernetes.io/zone In [test-zone-a test-zone-b]"
    );
    assert_eq!(it.offerings.len(), 2);
    assert_eq!(it.allocatable().get("cpu"), 4000);
}

#[test]
fn a_pool_that_cannot_be_read_is_named_and_the_others_answer() {
    let mut broken = pool("broken", json!(null));
    broken.spec["template"]["spec"]["requirements"] =
        json!([{"key": "kubernetes.io/arch", "operator": "Gt", "values": ["amd64"]}]);
    let snapshot = snapshot_of(ClusterObjects {
        nodes: vec![pool_node("n1")],
        node_pools: vec![broken, pool("general", json!(null))],
        ..Default::default()
    });
    let answer = node_pools_answer(&snapshot, &pod("p").cpu("1").obj(), None).expect("pools");
    assert_eq!(answer.warnings.len(), 1);
    assert!(
        answer.warnings[0].starts_with("NodePool broken is left out: "),
        "{:?}",
        answer.warnings
    );
    assert_eq!(answer.answer.pools.len(), 1);
    assert!(matches!(answer.answer.pools[0].1, PoolVerdict::Fits(_)));
}
