//! Diagnosis on in-memory snapshots: counts per node and the hints they produce.

use k8s_openapi::api::core::v1::PodResourceClaim;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use serde_json::{Value, json};

use super::*;
use crate::snapshot::ClusterObjects;
use crate::testing::{node, pod};

fn class(name: &str) -> DeviceClass {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {}})).unwrap()
}

fn slice(name: &str, placement: Value, pool: (&str, i64, i64), devices: Value) -> ResourceSlice {
    let mut spec = json!({
        "driver": "gpu.example.com",
        "pool": {"name": pool.0, "generation": pool.1, "resourceSliceCount": pool.2},
        "devices": devices,
    });
    for (k, v) in placement.as_object().unwrap() {
        spec[k] = v.clone();
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

fn gpus(n: usize) -> Value {
    Value::Array((0..n).map(|i| json!({"name": format!("gpu-{i}")})).collect())
}

fn claim(name: &str, request: Value, status: Value) -> ResourceClaim {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"devices": {"requests": [request]}},
        "status": status,
    }))
    .unwrap()
}

fn count(n: i64) -> Value {
    json!({"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": n}})
}

fn holding(pool: &str, device: &str) -> Value {
    json!({"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": "gpu.example.com", "pool": pool, "device": device}]}}})
}

fn diagnose_pod(
    claims: Vec<ResourceClaim>,
    slices: Vec<ResourceSlice>,
    classes: Vec<DeviceClass>,
) -> Diagnosis {
    let snapshot = Snapshot::new(ClusterObjects {
        nodes: vec![node("n1").label("zone", "a").0, node("n2").label("zone", "b").0],
        resource_claims: claims,
        resource_slices: slices,
        device_classes: classes,
        ..Default::default()
    });
    let p = pod("p")
        .with(|p| {
            p.spec.as_mut().unwrap().resource_claims = Some(vec![PodResourceClaim {
                name: "c".into(),
                resource_claim_name: Some("want".into()),
                ..Default::default()
            }]);
        })
        .info();
    diagnose(&snapshot, &p).expect("the pod has claims")
}

fn per_node(d: &Diagnosis) -> Vec<(String, usize, usize)> {
    d.claims[0].requests[0]
        .nodes
        .iter()
        .map(|n| (n.node.clone(), n.counts.devices, n.counts.free))
        .collect()
}

#[test]
fn counts_and_hints_follow_what_keeps_devices_from_the_request() {
    let two_per_node = || {
        vec![
            slice("n1", json!({"nodeName": "n1"}), ("n1", 1, 1), gpus(2)),
            slice("n2", json!({"nodeName": "n2"}), ("n2", 1, 1), gpus(2)),
        ]
    };
    struct Case {
        name: &'static str,
        claims: Vec<ResourceClaim>,
        slices: Vec<ResourceSlice>,
        classes: Vec<DeviceClass>,
        nodes: Vec<(&'static str, usize, usize)>,
        hint: &'static str,
    }
    let cases = vec![
        Case {
            name: "class missing",
            claims: vec![claim("want", count(1), json!({}))],
            slices: two_per_node(),
            classes: vec![],
            nodes: vec![("n1", 2, 0), ("n2", 2, 0)],
            hint: "claim default/want request gpu: device class gpu does not exist",
        },
        Case {
            name: "no slices",
            claims: vec![claim("want", count(1), json!({}))],
            slices: vec![],
            classes: vec![class("gpu")],
            nodes: vec![("n1", 0, 0), ("n2", 0, 0)],
            hint: "claim default/want request gpu: no ResourceSlice publishes a device any node can reach",
        },
        Case {
            name: "asks for more than any node has",
            claims: vec![
                claim("want", count(4), json!({})),
                claim("other", count(1), holding("n2", "gpu-0")),
            ],
            slices: two_per_node(),
            classes: vec![class("gpu")],
            nodes: vec![("n1", 2, 2), ("n2", 2, 1)],
            hint: "claim default/want request gpu: asks for 4 devices; the closest node, n1, has 2 free devices \
                   matching class gpu",
        },
        Case {
            name: "every device allocated",
            claims: vec![
                claim("want", count(1), json!({})),
                claim("other", count(1), holding("n1", "gpu-0")),
            ],
            slices: vec![slice("n1", json!({"nodeName": "n1"}), ("n1", 1, 1), gpus(1))],
            classes: vec![class("gpu")],
            nodes: vec![("n1", 1, 0), ("n2", 0, 0)],
            hint: "claim default/want request gpu: all 1 matching devices are unavailable: 1 allocated to other \
                   claims (default/other)",
        },
        Case {
            name: "tainted devices",
            claims: vec![claim("want", count(1), json!({}))],
            slices: vec![slice(
                "n1",
                json!({"nodeName": "n1"}),
                ("n1", 1, 1),
                json!([{"name": "gpu-0", "taints": [{"key": "broken", "value": "fan", "effect": "NoSchedule"}]}]),
            )],
            classes: vec![class("gpu")],
            nodes: vec![("n1", 1, 0), ("n2", 0, 0)],
            hint: "claim default/want request gpu: all 1 matching devices are unavailable: 1 tainted \
                   broken=fan:NoSchedule without a matching toleration in the request",
        },
        Case {
            name: "incomplete pool",
            claims: vec![claim("want", count(1), json!({}))],
            slices: vec![slice("n1-a", json!({"nodeName": "n1"}), ("n1", 1, 2), gpus(1))],
            classes: vec![class("gpu")],
            nodes: vec![("n1", 1, 0), ("n2", 0, 0)],
            hint: "claim default/want request gpu: all 1 matching devices are unavailable: 1 in pools whose \
                   ResourceSlices are not all published yet",
        },
        Case {
            name: "older generations and other nodes' selectors do not count",
            claims: vec![claim("want", count(3), json!({}))],
            slices: vec![
                slice("old", json!({"nodeName": "n1"}), ("n1", 1, 1), gpus(4)),
                slice("new", json!({"nodeName": "n1"}), ("n1", 2, 1), gpus(1)),
                slice(
                    "zone-b",
                    json!({"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "zone", "operator": "In", "values": ["b"]}]}]}}),
                    ("fabric", 1, 1),
                    gpus(2),
                ),
            ],
            classes: vec![class("gpu")],
            nodes: vec![("n1", 1, 1), ("n2", 2, 2)],
            hint: "claim default/want request gpu: asks for 3 devices; the closest node, n2, has 2 free devices \
                   matching class gpu",
        },
    ];
    for case in cases {
        let d = diagnose_pod(case.claims, case.slices, case.classes);
        let want_nodes: Vec<(String, usize, usize)> = case
            .nodes
            .iter()
            .map(|(n, a, b)| (n.to_string(), *a, *b))
            .collect();
        assert_eq!(per_node(&d), want_nodes, "{}", case.name);
        let hint = case.hint.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            d.hints.iter().any(|h| h.starts_with(&hint)),
            "{}: want a hint starting {hint:?}, got {:?}",
            case.name,
            d.hints
        );
    }
}

#[test]
fn admin_access_requests_count_allocated_devices_as_free() {
    let admin = json!({"name": "gpu", "exactly": {"deviceClassName": "gpu", "adminAccess": true}});
    let d = diagnose_pod(
        vec![
            claim("want", admin, json!({})),
            claim("other", count(1), holding("n1", "gpu-0")),
        ],
        vec![slice("n1", json!({"nodeName": "n1"}), ("n1", 1, 1), gpus(1))],
        vec![class("gpu")],
    );
    assert_eq!(per_node(&d), [("n1".to_string(), 1, 1), ("n2".to_string(), 0, 0)]);
    assert_eq!(d.claims[0].requests[0].nodes_with_enough, 1);
}

#[test]
fn allocated_claims_are_listed_not_counted() {
    let d = diagnose_pod(
        vec![claim("want", count(1), holding("n1", "gpu-0"))],
        vec![slice("n1", json!({"nodeName": "n1"}), ("n1", 1, 1), gpus(1))],
        vec![class("gpu")],
    );
    assert_eq!(d.claims[0].allocated_devices, ["gpu.example.com/n1/gpu-0"]);
    assert!(d.claims[0].requests.is_empty());
}

#[test]
fn selector_references_are_found_in_expressions() {
    let refs = hints::references(
        r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("80Gi")) >= 0 &&
           device.attributes["gpu.example.com"].model == "a100" && device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("1"))"#,
    );
    assert_eq!(
        refs,
        [
            ("capacity", "gpu.example.com".to_string(), "memory".to_string()),
            ("attributes", "gpu.example.com".to_string(), "model".to_string()),
        ]
    );
    assert!(hints::references("device.driver == \"x\"").is_empty());
}

fn memory_gpus(sizes: &[&str]) -> Value {
    Value::Array(
        sizes
            .iter()
            .enumerate()
            .map(|(i, m)| {
                json!({"name": format!("gpu-{i}"), "attributes": {"model": {"string": format!("m{i}")}},
                       "capacity": {"memory": {"value": m}}})
            })
            .collect(),
    )
}

fn selecting(expression: &str) -> Value {
    json!({"name": "gpu", "exactly": {"deviceClassName": "gpu", "selectors": [{"cel": {"expression": expression}}]}})
}

#[test]
fn selector_hints_name_the_selector_and_what_devices_have() {
    let slices = || {
        vec![slice(
            "n1",
            json!({"nodeName": "n1"}),
            ("n1", 1, 1),
            memory_gpus(&["40Gi", "80Gi"]),
        )]
    };
    let cases = [
        (
            "capacity out of reach",
            selecting(r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("160Gi")) >= 0"#),
            "selector `device.capacity[\"gpu.example.com\"].memory.compareTo(quantity(\"160Gi\")) >= 0` matches \
             none of the 2 devices of class gpu on any node; memory ranges from 40Gi to 80Gi (the largest)",
        ),
        (
            "attribute value nobody has",
            selecting(r#"device.attributes["gpu.example.com"].model == "h100""#),
            "selector `device.attributes[\"gpu.example.com\"].model == \"h100\"` matches none of the 2 devices \
             of class gpu on any node; model is one of \"m0\", \"m1\"",
        ),
        (
            "runtime error",
            selecting(r#"device.attributes["gpu.example.com"].vendor == "acme""#),
            "selector #0 of request `device.attributes[\"gpu.example.com\"].vendor == \"acme\"` fails on device \
             gpu.example.com/n1/gpu-0: CEL runtime error: no such key: vendor",
        ),
    ];
    for (name, request, want) in cases {
        let d = diagnose_pod(
            vec![claim("want", request, json!({}))],
            slices(),
            vec![class("gpu")],
        );
        let want = format!(
            "claim default/want request gpu: {}",
            want.split_whitespace().collect::<Vec<_>>().join(" ")
        );
        assert!(
            d.hints.iter().any(|h| h.starts_with(&want)),
            "{name}: want a hint starting {want:?}, got {:?}",
            d.hints
        );
    }
    let selective: DeviceClass =
        serde_json::from_value(json!({"metadata": {"name": "gpu"}, "spec": {"selectors": [
        {"cel": {"expression": "device.driver == \"nic.example.com\""}}]}}))
        .unwrap();
    let d = diagnose_pod(
        vec![claim("want", count(1), json!({}))],
        slices(),
        vec![selective],
    );
    let miss = &d.claims[0].requests[0].selector_misses[0];
    assert_eq!(
        (miss.source.as_str(), miss.index, miss.rejected),
        ("class gpu", 0, 2)
    );
    assert!(
        d.hints[0].contains("none of the 2 devices on any node matches device class gpu"),
        "{:?}",
        d.hints
    );
}

#[test]
fn partitions_whose_shared_counters_are_used_up_are_not_free() {
    // One 80Gi GPU as two 40Gi halves or one whole: with one half allocated, the whole no longer fits
    // the counters its pool has left.
    let partition = |name: &str, memory: &str| json!({"name": name, "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": memory}}}]});
    let mut s = slice(
        "n1",
        json!({"nodeName": "n1"}),
        ("n1", 1, 1),
        json!([
            partition("gpu-0-a", "40Gi"),
            partition("gpu-0-b", "40Gi"),
            partition("gpu-0-whole", "80Gi")
        ]),
    );
    s.spec.shared_counters = Some(vec![
        serde_json::from_value(json!({"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}})).unwrap(),
    ]);
    let d = diagnose_pod(
        vec![
            claim("want", count(2), json!({})),
            claim("other", count(1), holding("n1", "gpu-0-a")),
        ],
        vec![s],
        vec![class("gpu")],
    );
    let counts = d.claims[0].requests[0].nodes[0].counts;
    assert_eq!(
        (
            counts.request_match,
            counts.allocated,
            counts.counters_used_up,
            counts.free
        ),
        (3, 1, 1, 1)
    );
    let want = "claim default/want request gpu: asks for 2 devices; the closest node, n1, has 1 free device matching \
                class gpu, and 1 more allocated to other claims (default/other), 1 more short of shared counters";
    assert!(d.hints.iter().any(|h| h == want), "{:?}", d.hints);
}
