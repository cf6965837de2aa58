//! Table-driven allocator tests, after the ideas of upstream's `allocatortesting` (own data): which
//! devices are picked, the results' node selectors, configs, share IDs and consumed capacity, and
//! the errors' texts.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::api::resource::v1::{
    AllocationResult, CELDeviceSelector, CapacityRequestPolicy, CapacityRequestPolicyRange,
    CapacityRequirements, Counter, CounterSet, Device, DeviceAttribute, DeviceCapacity, DeviceClaim,
    DeviceClaimConfiguration, DeviceClass, DeviceClassConfiguration, DeviceClassSpec, DeviceConstraint,
    DeviceCounterConsumption, DeviceRequest, DeviceSelector, DeviceSubRequest, DeviceTaint, DeviceToleration,
    ExactDeviceRequest, OpaqueDeviceConfiguration, ResourceClaim, ResourceClaimSpec, ResourcePool,
    ResourceSlice, ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;

use super::*;
use crate::structured::DeviceId;

const DRV: &str = "gpu.example.com";
const NODE: &str = "node-1";

// ---- builders -------------------------------------------------------------------------------

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        ..Default::default()
    }
}

fn node_with(name: &str, labels: &[(&str, &str)]) -> Node {
    Node {
        metadata: ObjectMeta {
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..meta(name)
        },
        ..Default::default()
    }
}

fn node() -> Node {
    node_with(NODE, &[("zone", "a")])
}

fn dev(name: &str) -> Device {
    Device {
        name: name.into(),
        ..Default::default()
    }
}

fn with_attr(mut d: Device, name: &str, value: DeviceAttribute) -> Device {
    d.attributes
        .get_or_insert_with(BTreeMap::new)
        .insert(name.into(), value);
    d
}

fn s_attr(v: &str) -> DeviceAttribute {
    DeviceAttribute {
        string: Some(v.into()),
        ..Default::default()
    }
}

fn i_attr(v: i64) -> DeviceAttribute {
    DeviceAttribute {
        int: Some(v),
        ..Default::default()
    }
}

fn devs(names: &[&str]) -> Vec<Device> {
    names.iter().map(|n| dev(n)).collect()
}

/// Where a slice's devices are.
#[derive(Clone)]
enum At {
    Node(&'static str),
    Selector(NodeSelector),
    All,
    PerDevice,
}

fn slice_at(name: &str, pool: &str, at: At, devices: Vec<Device>) -> ResourceSlice {
    let mut spec = ResourceSliceSpec {
        driver: DRV.into(),
        pool: ResourcePool {
            name: pool.into(),
            generation: 1,
            resource_slice_count: 1,
        },
        devices: Some(devices),
        ..Default::default()
    };
    match at {
        At::Node(n) => spec.node_name = Some(n.into()),
        At::Selector(s) => spec.node_selector = Some(s),
        At::All => spec.all_nodes = Some(true),
        At::PerDevice => spec.per_device_node_selection = Some(true),
    }
    ResourceSlice {
        metadata: meta(name),
        spec,
    }
}

/// A one-slice pool named after the node, on the node.
fn local(devices: Vec<Device>) -> ResourceSlice {
    slice_at("slice-1", NODE, At::Node(NODE), devices)
}

fn generation(mut s: ResourceSlice, generation: i64, count: i64) -> ResourceSlice {
    s.spec.pool.generation = generation;
    s.spec.pool.resource_slice_count = count;
    s
}

fn zone_selector(zone: &str) -> NodeSelector {
    NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: "zone".into(),
                operator: "In".into(),
                values: Some(vec![zone.into()]),
            }]),
            match_fields: None,
        }],
    }
}

fn class(name: &str) -> DeviceClass {
    DeviceClass {
        metadata: meta(name),
        spec: Some(DeviceClassSpec::default()),
    }
}

fn exact(name: &str, count: i64) -> DeviceRequest {
    DeviceRequest {
        name: name.into(),
        exactly: Some(ExactDeviceRequest {
            device_class_name: "gpu".into(),
            allocation_mode: Some("ExactCount".into()),
            count: Some(count),
            ..Default::default()
        }),
        first_available: None,
    }
}

fn all(name: &str) -> DeviceRequest {
    let mut r = exact(name, 0);
    if let Some(e) = r.exactly.as_mut() {
        e.allocation_mode = Some("All".into());
        e.count = None;
    }
    r
}

fn edit(mut r: DeviceRequest, f: impl FnOnce(&mut ExactDeviceRequest)) -> DeviceRequest {
    if let Some(e) = r.exactly.as_mut() {
        f(e);
    }
    r
}

fn sub(name: &str, count: i64) -> DeviceSubRequest {
    DeviceSubRequest {
        name: name.into(),
        device_class_name: "gpu".into(),
        allocation_mode: Some("ExactCount".into()),
        count: Some(count),
        ..Default::default()
    }
}

fn first_available(name: &str, subs: Vec<DeviceSubRequest>) -> DeviceRequest {
    DeviceRequest {
        name: name.into(),
        exactly: None,
        first_available: Some(subs),
    }
}

fn claim(name: &str, requests: Vec<DeviceRequest>) -> ResourceClaim {
    claim_with(name, requests, vec![])
}

fn claim_with(name: &str, requests: Vec<DeviceRequest>, constraints: Vec<DeviceConstraint>) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            namespace: Some("ns".into()),
            ..meta(name)
        },
        spec: Some(ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(requests),
                constraints: (!constraints.is_empty()).then_some(constraints),
                config: None,
            }),
        }),
        status: None,
    }
}

fn match_attr(requests: &[&str], attribute: &str) -> DeviceConstraint {
    DeviceConstraint {
        match_attribute: Some(attribute.into()),
        requests: (!requests.is_empty()).then(|| requests.iter().map(|r| r.to_string()).collect()),
        ..Default::default()
    }
}

fn distinct_attr(attribute: &str) -> DeviceConstraint {
    DeviceConstraint {
        distinct_attribute: Some(attribute.into()),
        ..Default::default()
    }
}

fn qty(s: &str) -> Quantity {
    Quantity(s.into())
}

/// Everything an allocation needs besides node and claims.
struct Env {
    features: Features,
    classes: HashMap<String, Arc<DeviceClass>>,
    slices: ResourceSlices,
    allocated: AllocatedState,
    cel: cel::Cache,
}

fn env(slices: Vec<ResourceSlice>) -> Env {
    Env {
        features: Features::V1_37_DEFAULTS,
        classes: [("gpu".to_string(), Arc::new(class("gpu")))].into(),
        slices: ResourceSlices::new(slices),
        allocated: AllocatedState::default(),
        cel: cel::Cache::new(10),
    }
}

impl Env {
    fn allocated(mut self, devices: &[&str]) -> Self {
        for d in devices {
            self.allocated
                .allocated_devices
                .insert(DeviceId::new(DRV, NODE, *d));
        }
        self
    }

    fn run_on(
        &self,
        node: &Node,
        claims: &[ResourceClaim],
    ) -> Result<Option<Vec<AllocationResult>>, AllocateError> {
        let allocator = Allocator::new(
            self.features,
            &self.allocated,
            &self.classes,
            &self.slices,
            &self.cel,
        );
        let claims: Vec<&ResourceClaim> = claims.iter().collect();
        allocator.allocate(node, &claims, None)
    }

    fn run(&self, claims: &[ResourceClaim]) -> Result<Option<Vec<AllocationResult>>, AllocateError> {
        self.run_on(&node(), claims)
    }

    /// Per claim, `request=pool/device` of each result; `None` when allocation is impossible.
    fn picked(&self, claims: &[ResourceClaim]) -> Option<Vec<Vec<String>>> {
        let results = self.run(claims).expect("no error")?;
        Some(results.iter().map(picked).collect())
    }
}

fn picked(result: &AllocationResult) -> Vec<String> {
    result
        .devices
        .iter()
        .flat_map(|d| d.results.iter().flatten())
        .map(|r| format!("{}={}/{}", r.request, r.pool, r.device))
        .collect()
}

fn names(rows: &[&[&str]]) -> Option<Vec<Vec<String>>> {
    Some(
        rows.iter()
            .map(|r| r.iter().map(|s| s.to_string()).collect())
            .collect(),
    )
}

fn on_node(name: &str) -> Option<NodeSelector> {
    Some(NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_fields: Some(vec![NodeSelectorRequirement {
                key: "metadata.name".into(),
                operator: "In".into(),
                values: Some(vec![name.into()]),
            }]),
            match_expressions: None,
        }],
    })
}

// ---- picking devices ------------------------------------------------------------------------

#[test]
fn picks_devices_in_order() {
    struct Case {
        name: &'static str,
        env: Env,
        claims: Vec<ResourceClaim>,
        want: Option<Vec<Vec<String>>>,
    }
    let three = || env(vec![local(devs(&["gpu-0", "gpu-1", "gpu-2"]))]);
    let cases = vec![
        Case {
            name: "simple exact count",
            env: three(),
            claims: vec![claim("c", vec![exact("r", 2)])],
            want: names(&[&["r=node-1/gpu-0", "r=node-1/gpu-1"]]),
        },
        Case {
            name: "count defaults to one",
            env: three(),
            claims: vec![claim("c", vec![edit(exact("r", 1), |e| e.count = None)])],
            want: names(&[&["r=node-1/gpu-0"]]),
        },
        Case {
            name: "count above what is available",
            env: three(),
            claims: vec![claim("c", vec![exact("r", 4)])],
            want: None,
        },
        Case {
            name: "allocation mode All",
            env: three(),
            claims: vec![claim("c", vec![all("r")])],
            want: names(&[&["r=node-1/gpu-0", "r=node-1/gpu-1", "r=node-1/gpu-2"]]),
        },
        Case {
            name: "All with no devices",
            env: env(vec![]),
            claims: vec![claim("c", vec![all("r")])],
            want: None,
        },
        Case {
            name: "All with an allocated device",
            env: three().allocated(&["gpu-1"]),
            claims: vec![claim("c", vec![all("r")])],
            want: None,
        },
        Case {
            name: "claims compete for devices",
            env: three(),
            claims: vec![claim("a", vec![exact("r", 2)]), claim("b", vec![exact("r", 1)])],
            want: names(&[&["r=node-1/gpu-0", "r=node-1/gpu-1"], &["r=node-1/gpu-2"]]),
        },
        Case {
            name: "claims want more than there is",
            env: three(),
            claims: vec![claim("a", vec![exact("r", 2)]), claim("b", vec![exact("r", 2)])],
            want: None,
        },
        Case {
            name: "requests of one claim in order",
            env: three(),
            claims: vec![claim("a", vec![exact("one", 1), exact("two", 2)])],
            want: names(&[&["one=node-1/gpu-0", "two=node-1/gpu-1", "two=node-1/gpu-2"]]),
        },
        Case {
            name: "allocated devices are skipped",
            env: three().allocated(&["gpu-0", "gpu-2"]),
            claims: vec![claim("c", vec![exact("r", 1)])],
            want: names(&[&["r=node-1/gpu-1"]]),
        },
        Case {
            name: "admin access ignores allocations",
            env: three().allocated(&["gpu-0", "gpu-1", "gpu-2"]),
            claims: vec![claim(
                "c",
                vec![edit(exact("r", 2), |e| e.admin_access = Some(true))],
            )],
            want: names(&[&["r=node-1/gpu-0", "r=node-1/gpu-1"]]),
        },
        Case {
            name: "admin access and a normal request of the same claim do not share a device",
            env: three(),
            claims: vec![claim(
                "c",
                vec![
                    exact("normal", 1),
                    edit(exact("admin", 1), |e| e.admin_access = Some(true)),
                ],
            )],
            want: names(&[&["normal=node-1/gpu-0", "admin=node-1/gpu-1"]]),
        },
        Case {
            name: "pools by ID, slices by name, devices in slice order",
            env: env(vec![
                slice_at("z-slice", "pool-b", At::Node(NODE), devs(&["b-0"])),
                generation(
                    slice_at("y-slice", "pool-a", At::Node(NODE), devs(&["a-2", "a-3"])),
                    1,
                    2,
                ),
                generation(
                    slice_at("x-slice", "pool-a", At::Node(NODE), devs(&["a-1", "a-0"])),
                    1,
                    2,
                ),
            ]),
            claims: vec![claim("c", vec![exact("r", 5)])],
            want: names(&[&[
                "r=pool-a/a-1",
                "r=pool-a/a-0",
                "r=pool-a/a-2",
                "r=pool-a/a-3",
                "r=pool-b/b-0",
            ]]),
        },
        Case {
            name: "slices of other nodes are not used",
            env: env(vec![slice_at(
                "s",
                "node-2",
                At::Node("node-2"),
                devs(&["gpu-0"]),
            )]),
            claims: vec![claim("c", vec![exact("r", 1)])],
            want: None,
        },
    ];
    for case in cases {
        assert_eq!(case.env.picked(&case.claims), case.want, "{}", case.name);
    }
}

#[test]
fn constraints_backtrack() {
    let model = |n: &str, m: &str| with_attr(dev(n), "model", s_attr(m));
    let numa = |n: &str, v: i64| with_attr(dev(n), "gpu.example.com/numa", i_attr(v));
    struct Case {
        name: &'static str,
        devices: Vec<Device>,
        claim: ResourceClaim,
        want: Option<Vec<Vec<String>>>,
    }
    let cases = vec![
        Case {
            name: "matchAttribute across requests backtracks the first request",
            devices: vec![model("gpu-0", "a"), model("gpu-1", "b"), model("gpu-2", "b")],
            claim: claim_with(
                "c",
                vec![exact("one", 1), exact("two", 1)],
                vec![match_attr(&["one", "two"], "gpu.example.com/model")],
            ),
            want: names(&[&["one=node-1/gpu-1", "two=node-1/gpu-2"]]),
        },
        Case {
            name: "matchAttribute within a request",
            devices: vec![model("gpu-0", "a"), model("gpu-1", "b"), model("gpu-2", "a")],
            claim: claim_with(
                "c",
                vec![exact("r", 2)],
                vec![match_attr(&[], "gpu.example.com/model")],
            ),
            want: names(&[&["r=node-1/gpu-0", "r=node-1/gpu-2"]]),
        },
        Case {
            name: "matchAttribute cannot be satisfied",
            devices: vec![model("gpu-0", "a"), model("gpu-1", "b"), dev("gpu-2")],
            claim: claim_with(
                "c",
                vec![exact("r", 2)],
                vec![match_attr(&[], "gpu.example.com/model")],
            ),
            want: None,
        },
        Case {
            name: "matchAttribute only for the named requests",
            devices: vec![model("gpu-0", "a"), model("gpu-1", "b"), dev("gpu-2")],
            claim: claim_with(
                "c",
                vec![exact("one", 1), exact("free", 1)],
                vec![match_attr(&["one"], "gpu.example.com/model")],
            ),
            want: names(&[&["one=node-1/gpu-0", "free=node-1/gpu-1"]]),
        },
        Case {
            name: "distinctAttribute",
            devices: vec![numa("gpu-0", 0), numa("gpu-1", 0), numa("gpu-2", 1)],
            claim: claim_with(
                "c",
                vec![exact("r", 2)],
                vec![distinct_attr("gpu.example.com/numa")],
            ),
            want: names(&[&["r=node-1/gpu-0", "r=node-1/gpu-2"]]),
        },
        Case {
            name: "distinctAttribute cannot be satisfied",
            devices: vec![numa("gpu-0", 0), numa("gpu-1", 0), numa("gpu-2", 1)],
            claim: claim_with(
                "c",
                vec![exact("r", 3)],
                vec![distinct_attr("gpu.example.com/numa")],
            ),
            want: None,
        },
        Case {
            name: "a constraint on a subrequest",
            devices: vec![model("gpu-0", "a"), model("gpu-1", "b"), model("gpu-2", "b")],
            claim: claim_with(
                "c",
                vec![exact("one", 1), first_available("two", vec![sub("x", 1)])],
                vec![match_attr(&["one", "two/x"], "gpu.example.com/model")],
            ),
            want: names(&[&["one=node-1/gpu-1", "two/x=node-1/gpu-2"]]),
        },
    ];
    for case in cases {
        let e = env(vec![local(case.devices)]);
        assert_eq!(e.picked(&[case.claim]), case.want, "{}", case.name);
    }
}

#[test]
fn first_available_subrequests() {
    let e = env(vec![local(devs(&["gpu-0", "gpu-1"]))]);
    let fits_first = claim(
        "c",
        vec![first_available("r", vec![sub("two", 2), sub("one", 1)])],
    );
    assert_eq!(
        e.picked(&[fits_first]),
        names(&[&["r/two=node-1/gpu-0", "r/two=node-1/gpu-1"]])
    );
    let falls_back = claim(
        "c",
        vec![first_available("r", vec![sub("three", 3), sub("one", 1)])],
    );
    assert_eq!(e.picked(&[falls_back]), names(&[&["r/one=node-1/gpu-0"]]));
    // The first claim's subrequest choice leaves room for the second claim.
    let first = claim(
        "a",
        vec![first_available("r", vec![sub("two", 2), sub("one", 1)])],
    );
    let second = claim("b", vec![exact("r", 1)]);
    assert_eq!(
        e.picked(&[first, second]),
        names(&[&["r/one=node-1/gpu-0"], &["r=node-1/gpu-1"]])
    );
    let none_fits = claim("c", vec![first_available("r", vec![sub("three", 3)])]);
    assert_eq!(e.picked(&[none_fits]), None);
    // A subrequest with an unknown class is an error even if an earlier one would fit.
    let mut bad = sub("bad", 1);
    bad.device_class_name = "nope".into();
    let err = e
        .run(&[claim("c", vec![first_available("r", vec![sub("one", 1), bad])])])
        .unwrap_err();
    assert_eq!(
        err,
        AllocateError::Fatal(
            "claim ns/c, request bad: could not retrieve device class nope: deviceclass.resource.k8s.io \"nope\" not found"
                .into()
        )
    );
    let mut off = env(vec![local(devs(&["gpu-0"]))]);
    off.features.prioritized_list = false;
    let err = off
        .run(&[claim("c", vec![first_available("r", vec![sub("one", 1)])])])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "claim ns/c, request r: has subrequests, but the DRAPrioritizedList feature is disabled"
    );
}

#[test]
fn node_selectors_of_results() {
    struct Case {
        name: &'static str,
        slices: Vec<ResourceSlice>,
        want: Option<Option<NodeSelector>>,
    }
    let per_device = |d: Device| slice_at("s", "shared", At::PerDevice, vec![d]);
    let cases = vec![
        Case {
            name: "node-local slice",
            slices: vec![local(devs(&["gpu-0"]))],
            want: Some(on_node(NODE)),
        },
        Case {
            name: "node-selector slice",
            slices: vec![slice_at(
                "s",
                "zonal",
                At::Selector(zone_selector("a")),
                devs(&["gpu-0"]),
            )],
            want: Some(Some(zone_selector("a"))),
        },
        Case {
            name: "node-selector slice of another zone",
            slices: vec![slice_at(
                "s",
                "zonal",
                At::Selector(zone_selector("b")),
                devs(&["gpu-0"]),
            )],
            want: None,
        },
        Case {
            name: "all-nodes slice",
            slices: vec![slice_at("s", "everywhere", At::All, devs(&["gpu-0"]))],
            want: Some(None),
        },
        Case {
            name: "all-nodes device that binds to the node",
            slices: vec![slice_at(
                "s",
                "everywhere",
                At::All,
                vec![Device {
                    binds_to_node: Some(true),
                    ..dev("gpu-0")
                }],
            )],
            want: Some(on_node(NODE)),
        },
        Case {
            name: "per-device node name",
            slices: vec![per_device(Device {
                node_name: Some(NODE.into()),
                ..dev("gpu-0")
            })],
            want: Some(on_node(NODE)),
        },
        Case {
            name: "per-device all nodes",
            slices: vec![per_device(Device {
                all_nodes: Some(true),
                ..dev("gpu-0")
            })],
            want: Some(None),
        },
        Case {
            name: "per-device selector",
            slices: vec![per_device(Device {
                node_selector: Some(zone_selector("a")),
                ..dev("gpu-0")
            })],
            want: Some(Some(zone_selector("a"))),
        },
        Case {
            name: "per-device other node",
            slices: vec![per_device(Device {
                node_name: Some("node-2".into()),
                ..dev("gpu-0")
            })],
            want: None,
        },
    ];
    for case in cases {
        let got = env(case.slices)
            .run(&[claim("c", vec![exact("r", 1)])])
            .expect("no error")
            .map(|r| r[0].node_selector.clone());
        assert_eq!(got, case.want, "{}", case.name);
    }

    // Two devices from selector slices: one term with the requirements of both, without repeats.
    let region = NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: Some(vec![
                NodeSelectorRequirement {
                    key: "zone".into(),
                    operator: "In".into(),
                    values: Some(vec!["a".into()]),
                },
                NodeSelectorRequirement {
                    key: "region".into(),
                    operator: "Exists".into(),
                    values: None,
                },
            ]),
            match_fields: None,
        }],
    };
    let e = env(vec![
        slice_at("s1", "p1", At::Selector(zone_selector("a")), devs(&["gpu-0"])),
        slice_at("s2", "p2", At::Selector(region.clone()), devs(&["gpu-1"])),
        slice_at("s3", "p3", At::All, devs(&["gpu-2"])),
    ]);
    let zoned = node_with(NODE, &[("zone", "a"), ("region", "r")]);
    let got = e
        .run_on(&zoned, &[claim("c", vec![exact("r", 3)])])
        .unwrap()
        .unwrap();
    assert_eq!(got[0].node_selector, Some(region));
    // Mixed with a node-local device: the node only.
    let e = env(vec![
        slice_at("s1", "p1", At::Selector(zone_selector("a")), devs(&["gpu-0"])),
        slice_at("s2", "p2", At::Node(NODE), devs(&["gpu-1"])),
    ]);
    let got = e.run(&[claim("c", vec![exact("r", 2)])]).unwrap().unwrap();
    assert_eq!(got[0].node_selector, on_node(NODE));
}

#[test]
fn pools_generations_and_validity() {
    let one = || vec![claim("c", vec![exact("r", 1)])];
    // Older generations are ignored.
    let e = env(vec![
        generation(local(devs(&["old-0"])), 1, 1),
        generation(slice_at("slice-2", NODE, At::Node(NODE), devs(&["new-0"])), 2, 1),
    ]);
    assert_eq!(e.picked(&one()), names(&[&["r=node-1/new-0"]]));
    // Incomplete pool: no device from it; "All" is an error.
    let e = env(vec![generation(local(devs(&["gpu-0"])), 1, 2)]);
    assert_eq!(e.picked(&one()), None);
    assert_eq!(
        e.run(&[claim("c", vec![all("r")])]).unwrap_err(),
        AllocateError::Fatal(
            "claim ns/c, request r: asks for all devices, but resource pool gpu.example.com/node-1 is currently being updated"
                .into()
        )
    );
    // v0.34's library (v1.34) allocates from an incomplete pool unless the request asks for "All".
    let mut v1_34 = env(vec![generation(local(devs(&["gpu-0"])), 1, 2)]);
    v1_34.features.incomplete_pools_unusable = false;
    assert_eq!(v1_34.picked(&one()), names(&[&["r=node-1/gpu-0"]]));
    assert!(v1_34.run(&[claim("c", vec![all("r")])]).is_err());
    // The pool's other slice serves another node: complete, and only this node's devices count.
    let e = env(vec![
        generation(
            slice_at("a", "shared", At::Selector(zone_selector("a")), devs(&["a-0"])),
            1,
            2,
        ),
        generation(
            slice_at("b", "shared", At::Selector(zone_selector("b")), devs(&["b-0"])),
            1,
            2,
        ),
    ]);
    assert_eq!(
        e.picked(&[claim("c", vec![all("r")])]),
        names(&[&["r=shared/a-0"]])
    );
    // A newer generation is being published for other nodes: the old one is ignored.
    let e = env(vec![
        generation(
            slice_at("a", "shared", At::Selector(zone_selector("a")), devs(&["a-0"])),
            1,
            2,
        ),
        generation(
            slice_at("b", "shared", At::Selector(zone_selector("b")), devs(&["b-0"])),
            2,
            2,
        ),
    ]);
    assert_eq!(e.picked(&one()), None);
    assert_eq!(e.picked(&[claim("c", vec![all("r")])]), None);
    // Duplicate device names make the pool invalid: an error for this node only.
    let dup = || {
        vec![
            generation(local(devs(&["gpu-0"])), 1, 2),
            generation(slice_at("slice-2", NODE, At::Node(NODE), devs(&["gpu-0"])), 1, 2),
        ]
    };
    let e = env(dup());
    assert_eq!(
        e.run(&one()).unwrap_err(),
        AllocateError::FailedOnNode("invalid resource pools were encountered".into())
    );
    assert_eq!(
        e.run(&[claim("c", vec![all("r")])]).unwrap_err().to_string(),
        "claim ns/c, request r: asks for all devices, but resource pool gpu.example.com/node-1 is currently invalid"
    );
    // v0.34 (v1.34): an invalid pool stops the search with an error.
    let mut v1_34 = env(dup());
    v1_34.features.invalid_pool_fails_node_only = false;
    assert_eq!(
        v1_34.run(&one()).unwrap_err(),
        AllocateError::Fatal("pool node-1 is invalid: duplicate device name gpu-0".into())
    );
    // ... unless another pool serves the claim.
    let mut slices = dup();
    slices.push(slice_at("other", "other-pool", At::Node(NODE), devs(&["ok-0"])));
    assert_eq!(env(slices).picked(&one()), names(&[&["r=other-pool/ok-0"]]));
    // A slice without any node selection still counts towards its pool.
    let mut unknown = generation(slice_at("u", NODE, At::All, devs(&["u-0"])), 1, 2);
    unknown.spec.all_nodes = None;
    let e = env(vec![generation(local(devs(&["gpu-0"])), 1, 2), unknown]);
    assert_eq!(e.picked(&one()), names(&[&["r=node-1/gpu-0"]]));
}

fn counter_slice(name: &str, memory: &str) -> ResourceSlice {
    let mut s = generation(slice_at(name, NODE, At::Node(NODE), vec![]), 1, 2);
    s.spec.devices = None;
    s.spec.shared_counters = Some(vec![CounterSet {
        name: "gpu-0-counters".into(),
        counters: [("memory".to_string(), Counter { value: qty(memory) })].into(),
    }]);
    s
}

fn partition(name: &str, memory: &str) -> Device {
    Device {
        consumes_counters: Some(vec![DeviceCounterConsumption {
            counter_set: "gpu-0-counters".into(),
            counters: [("memory".to_string(), Counter { value: qty(memory) })].into(),
            compatibility_groups: None,
        }]),
        ..dev(name)
    }
}

#[test]
fn partitionable_devices_share_counters() {
    let partitions = || {
        vec![
            counter_slice("counters", "80Gi"),
            generation(
                local(vec![
                    partition("whole", "80Gi"),
                    partition("half-0", "40Gi"),
                    partition("half-1", "40Gi"),
                ]),
                1,
                2,
            ),
        ]
    };
    let e = env(partitions());
    assert_eq!(
        e.picked(&[claim("c", vec![exact("r", 1)])]),
        names(&[&["r=node-1/whole"]])
    );
    assert_eq!(
        e.picked(&[claim("c", vec![exact("r", 2)])]),
        names(&[&["r=node-1/half-0", "r=node-1/half-1"]])
    );
    assert_eq!(e.picked(&[claim("c", vec![exact("r", 3)])]), None);
    assert_eq!(
        e.picked(&[claim("a", vec![exact("r", 1)]), claim("b", vec![exact("r", 1)])]),
        names(&[&["r=node-1/half-0"], &["r=node-1/half-1"]])
    );
    // An allocated partition consumes its counters.
    let e = env(partitions()).allocated(&["half-1"]);
    assert_eq!(
        e.picked(&[claim("c", vec![exact("r", 1)])]),
        names(&[&["r=node-1/half-0"]])
    );
    assert_eq!(e.picked(&[claim("c", vec![exact("r", 2)])]), None);
    // Without the counter set the pool is invalid.
    let e = env(vec![local(vec![partition("whole", "80Gi")])]);
    assert_eq!(
        e.run(&[claim("c", vec![exact("r", 1)])]).unwrap_err(),
        AllocateError::FailedOnNode("invalid resource pools were encountered".into())
    );
    // Without the feature, devices that consume counters are not used.
    let mut off = env(vec![local(vec![partition("whole", "1"), dev("plain")])]);
    off.features.partitionable_devices = false;
    assert_eq!(
        off.picked(&[claim("c", vec![exact("r", 1)])]),
        names(&[&["r=node-1/plain"]])
    );
}

fn shareable(name: &str, capacity: &str, policy: Option<CapacityRequestPolicy>) -> Device {
    Device {
        allow_multiple_allocations: Some(true),
        capacity: Some(
            [(
                "memory".to_string(),
                DeviceCapacity {
                    value: qty(capacity),
                    request_policy: policy,
                },
            )]
            .into(),
        ),
        ..dev(name)
    }
}

fn wants_memory(name: &str, memory: &str) -> ResourceClaim {
    claim(
        name,
        vec![edit(exact("r", 1), |e| {
            e.capacity = Some(CapacityRequirements {
                requests: Some([("memory".to_string(), qty(memory))].into()),
            })
        })],
    )
}

fn consumed(result: &AllocationResult) -> Vec<String> {
    result
        .devices
        .iter()
        .flat_map(|d| d.results.iter().flatten())
        .map(|r| {
            let c = r
                .consumed_capacity
                .as_ref()
                .map(|c| c["memory"].0.clone())
                .unwrap_or_default();
            format!("{} {} share={}", r.device, c, r.share_id.is_some())
        })
        .collect()
}

#[test]
fn consumable_capacity() {
    let stepped = CapacityRequestPolicy {
        default: Some(qty("1Gi")),
        valid_range: Some(CapacityRequestPolicyRange {
            min: qty("1Gi"),
            max: Some(qty("40Gi")),
            step: Some(qty("1Gi")),
        }),
        valid_values: None,
    };
    let e = env(vec![local(vec![shareable(
        "gpu-0",
        "80Gi",
        Some(stepped.clone()),
    )])]);
    // Two claims share the device; the request is rounded up to the step.
    let got = e
        .run(&[wants_memory("a", "30Gi"), wants_memory("b", "1500Mi")])
        .unwrap()
        .unwrap();
    assert_eq!(consumed(&got[0]), ["gpu-0 30Gi share=true"]);
    assert_eq!(consumed(&got[1]), ["gpu-0 2Gi share=true"]);
    let share = |r: &AllocationResult| {
        r.devices.as_ref().unwrap().results.as_ref().unwrap()[0]
            .share_id
            .clone()
    };
    assert_ne!(share(&got[0]), share(&got[1]));
    // The capacity is used up.
    assert_eq!(
        e.run(&[
            wants_memory("a", "40Gi"),
            wants_memory("b", "40Gi"),
            wants_memory("c", "1Gi")
        ])
        .unwrap(),
        None
    );
    // Above the policy's maximum.
    assert_eq!(e.run(&[wants_memory("a", "41Gi")]).unwrap(), None);
    // No capacity request: the policy's default.
    let got = e.run(&[claim("a", vec![exact("r", 1)])]).unwrap().unwrap();
    assert_eq!(consumed(&got[0]), ["gpu-0 1Gi share=true"]);
    // What allocated claims consume counts.
    let mut e = env(vec![local(vec![shareable("gpu-0", "80Gi", Some(stepped))])]);
    let id = DeviceId::new(DRV, NODE, "gpu-0");
    e.allocated.aggregated_capacity.insert(
        id.clone(),
        [("memory".to_string(), ExactQuantity::parse("60Gi").unwrap())].into(),
    );
    e.allocated.allocated_shared_device_ids.insert(SharedDeviceId {
        device: id,
        share_id: "x".into(),
    });
    assert_eq!(e.run(&[wants_memory("a", "21Gi")]).unwrap(), None);
    let got = e.run(&[wants_memory("a", "20Gi")]).unwrap().unwrap();
    assert_eq!(consumed(&got[0]), ["gpu-0 20Gi share=true"]);
    // Valid values round up to the next one.
    let values = CapacityRequestPolicy {
        default: None,
        valid_range: None,
        valid_values: Some(vec![qty("10Gi"), qty("20Gi")]),
    };
    let e = env(vec![local(vec![shareable("gpu-0", "30Gi", Some(values))])]);
    let got = e.run(&[wants_memory("a", "15Gi")]).unwrap().unwrap();
    assert_eq!(consumed(&got[0]), ["gpu-0 20Gi share=true"]);
    assert_eq!(
        e.run(&[wants_memory("a", "25Gi")]).unwrap(),
        None,
        "not a valid value"
    );
    // A request for capacity the device does not have skips it; an exclusive device is checked
    // against its whole capacity and not shared.
    let exclusive = Device {
        allow_multiple_allocations: None,
        ..shareable("gpu-1", "16Gi", None)
    };
    let e = env(vec![local(vec![dev("plain"), exclusive])]);
    let got = e.run(&[wants_memory("a", "8Gi")]).unwrap().unwrap();
    assert_eq!(consumed(&got[0]), ["gpu-1  share=false"]);
    assert_eq!(
        e.run(&[wants_memory("a", "8Gi"), wants_memory("b", "8Gi")])
            .unwrap(),
        None
    );
    // Without a policy a huge request simply does not fit.
    assert_eq!(
        e.run(&[wants_memory("a", "99999999999999999999999")]).unwrap(),
        None
    );
}

#[test]
fn taints_and_tolerations() {
    let tainted = |name: &str, effect: &str| Device {
        taints: Some(vec![DeviceTaint {
            key: "broken".into(),
            value: Some("yes".into()),
            effect: effect.into(),
            time_added: None,
        }]),
        ..dev(name)
    };
    let tolerate = |op: &str, value: Option<&str>| DeviceToleration {
        key: Some("broken".into()),
        operator: Some(op.into()),
        value: value.map(Into::into),
        effect: None,
        toleration_seconds: None,
    };
    let e = env(vec![local(vec![
        tainted("gpu-0", "NoSchedule"),
        tainted("gpu-1", "NoExecute"),
        tainted("gpu-2", "None"),
    ])]);
    assert_eq!(
        e.picked(&[claim("c", vec![exact("r", 1)])]),
        names(&[&["r=node-1/gpu-2"]])
    );
    assert_eq!(e.picked(&[claim("c", vec![exact("r", 2)])]), None);
    for toleration in [tolerate("Exists", None), tolerate("Equal", Some("yes"))] {
        let request = edit(exact("r", 2), |e| e.tolerations = Some(vec![toleration.clone()]));
        let got = e.run(&[claim("c", vec![request])]).unwrap().unwrap();
        assert_eq!(picked(&got[0]), ["r=node-1/gpu-0", "r=node-1/gpu-1"]);
        let results = got[0].devices.as_ref().unwrap().results.as_ref().unwrap();
        assert_eq!(results[0].tolerations, Some(vec![toleration]));
    }
    let wrong_value = edit(exact("r", 1), |e| {
        e.tolerations = Some(vec![tolerate("Equal", Some("no"))])
    });
    assert_eq!(
        e.picked(&[claim("c", vec![wrong_value])]),
        names(&[&["r=node-1/gpu-2"]])
    );
    let mut off = env(vec![local(vec![tainted("gpu-0", "NoSchedule")])]);
    off.features.device_taints = false;
    assert_eq!(
        off.picked(&[claim("c", vec![exact("r", 1)])]),
        names(&[&["r=node-1/gpu-0"]])
    );
}

#[test]
fn binding_conditions() {
    let bound = Device {
        binding_conditions: Some(vec!["attached".into()]),
        binding_failure_conditions: Some(vec!["failed".into()]),
        ..dev("gpu-0")
    };
    // The pool with binding conditions comes last, though its ID sorts first.
    let e = env(vec![
        slice_at("s-a", "a-pool", At::Node(NODE), vec![bound.clone()]),
        slice_at("s-b", "b-pool", At::Node(NODE), devs(&["gpu-0"])),
    ]);
    assert_eq!(
        e.picked(&[claim("c", vec![exact("r", 1)])]),
        names(&[&["r=b-pool/gpu-0"]])
    );
    let got = e.run(&[claim("c", vec![exact("r", 2)])]).unwrap().unwrap();
    let results = got[0].devices.as_ref().unwrap().results.as_ref().unwrap();
    assert_eq!(results[1].pool, "a-pool");
    assert_eq!(results[1].binding_conditions, Some(vec!["attached".to_string()]));
    assert_eq!(
        results[1].binding_failure_conditions,
        Some(vec!["failed".to_string()])
    );
    assert_eq!(results[0].binding_conditions, None);
    // Without the feature such devices are not used.
    let mut off = env(vec![slice_at("s-a", "a-pool", At::Node(NODE), vec![bound])]);
    off.features.device_binding_and_status = false;
    assert_eq!(off.picked(&[claim("c", vec![exact("r", 1)])]), None);
}

#[test]
fn configs_of_classes_and_claims() {
    let opaque = |p: &str| {
        Some(OpaqueDeviceConfiguration {
            driver: DRV.into(),
            parameters: RawExtension(serde_json::json!({ "p": p })),
        })
    };
    let mut e = env(vec![local(devs(&["gpu-0", "gpu-1"]))]);
    let mut gpu = class("gpu");
    gpu.spec = Some(DeviceClassSpec {
        config: Some(vec![DeviceClassConfiguration {
            opaque: opaque("class"),
        }]),
        ..Default::default()
    });
    e.classes.insert("gpu".into(), Arc::new(gpu));
    let mut c = claim(
        "c",
        vec![exact("one", 1), first_available("two", vec![sub("x", 1)])],
    );
    if let Some(devices) = c.spec.as_mut().and_then(|s| s.devices.as_mut()) {
        devices.config = Some(vec![
            DeviceClaimConfiguration {
                requests: None,
                opaque: opaque("all"),
            },
            DeviceClaimConfiguration {
                requests: Some(vec!["two/x".into()]),
                opaque: opaque("x"),
            },
            DeviceClaimConfiguration {
                requests: Some(vec!["one".into(), "two".into()]),
                opaque: opaque("both"),
            },
            DeviceClaimConfiguration {
                requests: Some(vec!["three".into()]),
                opaque: opaque("unused"),
            },
        ]);
    }
    let got = e.run(&[c]).unwrap().unwrap();
    let configs: Vec<String> = got[0]
        .devices
        .as_ref()
        .unwrap()
        .config
        .iter()
        .flatten()
        .map(|c| {
            format!(
                "{} {:?} {}",
                c.source,
                c.requests,
                c.opaque.as_ref().unwrap().parameters.0["p"]
            )
        })
        .collect();
    assert_eq!(
        configs,
        [
            "FromClass None \"class\"",
            "FromClaim None \"all\"",
            "FromClaim Some([\"two/x\"]) \"x\"",
            "FromClaim None \"both\"",
        ]
    );
}

// ---- errors ---------------------------------------------------------------------------------

#[test]
fn error_texts() {
    let e = env(vec![local(devs(&["gpu-0", "gpu-1"]))]);
    let fatal = |claims: &[ResourceClaim]| match e.run(claims) {
        Err(AllocateError::Fatal(text)) => text,
        other => panic!("want a fatal error, got {other:?}"),
    };
    let mut unknown = exact("r", 1);
    if let Some(x) = unknown.exactly.as_mut() {
        x.device_class_name = "missing".into();
    }
    assert_eq!(
        fatal(&[claim("c", vec![unknown])]),
        "claim ns/c, request r: could not retrieve device class missing: deviceclass.resource.k8s.io \"missing\" not found"
    );
    assert_eq!(
        fatal(&[claim("c", vec![exact("r", 33)])]),
        "claim ns/c, request r: adding 33 devices exceeds the claim limit of 32, with 0 already accounted for"
    );
    assert_eq!(
        fatal(&[claim("c", vec![exact("a", 30), exact("b", 3)])]),
        "claim ns/c, request b: adding 3 devices exceeds the claim limit of 32, with 30 already accounted for"
    );
    assert_eq!(
        fatal(&[claim(
            "c",
            vec![edit(exact("r", 1), |x| x.allocation_mode = Some("Some".into()))]
        )]),
        "claim ns/c, request r: unsupported count mode Some"
    );
    assert_eq!(
        fatal(&[claim(
            "c",
            vec![DeviceRequest {
                name: "r".into(),
                exactly: None,
                first_available: None
            }]
        )]),
        "claim ns/c, request r: missing device class name (unsupported request type?)"
    );
    assert_eq!(
        fatal(&[claim(
            "c",
            vec![edit(exact("r", 1), |x| x.selectors =
                Some(vec![DeviceSelector { cel: None }]))]
        )]),
        "claim ns/c, request r, selector #0: CEL expression empty (unsupported selector type?)"
    );
    assert_eq!(
        fatal(&[claim_with(
            "c",
            vec![exact("r", 1)],
            vec![DeviceConstraint::default()]
        )]),
        "claim ns/c, constraint #0: empty constraint (unsupported constraint type?)"
    );
    // "All" devices must satisfy the constraints.
    let mixed = env(vec![local(vec![
        with_attr(dev("gpu-0"), "model", s_attr("a")),
        with_attr(dev("gpu-1"), "model", s_attr("b")),
    ])]);
    assert_eq!(
        mixed
            .run(&[claim_with("c", vec![all("r")], vec![match_attr(&[], "gpu.example.com/model")])])
            .unwrap_err(),
        AllocateError::Fatal(
            "claim ns/c, request r: cannot add device gpu.example.com/node-1/gpu-1 because a claim constraint would not be satisfied"
                .into()
        )
    );
    let mut off = env(vec![local(devs(&["gpu-0"]))]);
    off.features.admin_access = false;
    assert_eq!(
        off.run(&[claim(
            "c",
            vec![edit(exact("r", 1), |x| x.admin_access = Some(false))]
        )])
        .unwrap_err()
        .to_string(),
        "claim ns/c, request r: admin access is requested, but the feature is disabled"
    );
    off.features.consumable_capacity = false;
    assert_eq!(
        off.run(&[wants_memory("c", "1Gi")]).unwrap_err().to_string(),
        "claim ns/c, request r: has capacity requests, but the DRAConsumableCapacity feature is disabled"
    );
}

#[test]
fn cel_selectors_are_evaluated_where_upstream_does() {
    // A class selector that cannot compile (whatever the CEL implementation's state).
    let mut e = env(vec![local(devs(&["gpu-0"]))]);
    let mut gpu = class("gpu");
    gpu.spec = Some(DeviceClassSpec {
        selectors: Some(vec![DeviceSelector {
            cel: Some(CELDeviceSelector {
                expression: "device.driver ==".into(),
            }),
        }]),
        ..Default::default()
    });
    e.classes.insert("gpu".into(), Arc::new(gpu));
    match e.run(&[claim("c", vec![exact("r", 1)])]) {
        Err(AllocateError::Fatal(text)) => {
            assert!(
                text.starts_with("class gpu: selector #0: CEL compile error: "),
                "{text}"
            )
        }
        other => panic!("{other:?}"),
    }
    // Selectors are not evaluated when there is no device at all.
    let e2 = Env {
        slices: ResourceSlices::default(),
        ..e
    };
    assert_eq!(e2.run(&[claim("c", vec![exact("r", 1)])]).unwrap(), None);
}

#[test]
fn deadline_times_out() {
    let e = env(vec![local(devs(&["gpu-0"]))]);
    let allocator = Allocator::new(e.features, &e.allocated, &e.classes, &e.slices, &e.cel);
    let c = claim("c", vec![exact("r", 1)]);
    let past = Some(Instant::now());
    assert_eq!(
        allocator.allocate(&node(), &[&c], past),
        Err(AllocateError::Timeout)
    );
    let future = Instant::now() + Duration::from_secs(60);
    assert!(
        allocator
            .allocate(&node(), &[&c], Some(future))
            .unwrap()
            .is_some()
    );
    // A search that would take very long stops at the deadline: the first claim tries every
    // way of taking 12 of 24 devices, and for each the second claim every way of failing to find
    // 13 among the rest.
    let e = env(vec![local((0..24).map(|i| dev(&format!("gpu-{i}"))).collect())]);
    let allocator = Allocator::new(e.features, &e.allocated, &e.classes, &e.slices, &e.cel);
    let (a, b) = (claim("a", vec![exact("r", 12)]), claim("b", vec![exact("r", 13)]));
    let started = Instant::now();
    let got = allocator.allocate(&node(), &[&a, &b], Some(started + Duration::from_millis(50)));
    assert_eq!(got, Err(AllocateError::Timeout));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn results_carry_admin_access_and_names() {
    let e = env(vec![local(devs(&["gpu-0"]))]);
    let got = e
        .run(&[claim(
            "c",
            vec![edit(exact("r", 1), |x| x.admin_access = Some(true))],
        )])
        .unwrap()
        .unwrap();
    let r = &got[0].devices.as_ref().unwrap().results.as_ref().unwrap()[0];
    assert_eq!(
        (r.driver.as_str(), r.pool.as_str(), r.device.as_str()),
        (DRV, NODE, "gpu-0")
    );
    assert_eq!(r.admin_access, Some(true));
    assert_eq!(r.share_id, None);
    assert!(got[0].devices.as_ref().unwrap().config.is_none());
}

// ---- CEL selectors ------------------------------------------------------------------------------

fn cel_selector(expression: &str) -> DeviceSelector {
    DeviceSelector {
        cel: Some(CELDeviceSelector {
            expression: expression.into(),
        }),
    }
}

fn with_class_selectors(mut e: Env, expressions: &[&str]) -> Env {
    let mut gpu = class("gpu");
    gpu.spec = Some(DeviceClassSpec {
        selectors: Some(expressions.iter().map(|x| cel_selector(x)).collect()),
        ..Default::default()
    });
    e.classes.insert("gpu".into(), Arc::new(gpu));
    e
}

#[test]
fn selectors_pick_devices() {
    let devices = vec![
        with_attr(dev("gpu-0"), "model", s_attr("small")),
        with_attr(
            Device {
                capacity: Some(
                    [(
                        "memory".to_string(),
                        DeviceCapacity {
                            value: qty("80Gi"),
                            request_policy: None,
                        },
                    )]
                    .into(),
                ),
                ..dev("gpu-1")
            },
            "model",
            s_attr("big"),
        ),
        with_attr(dev("gpu-2"), "model", s_attr("big")),
    ];
    let other_driver = {
        let mut s = slice_at("other", "other", At::Node(NODE), devs(&["nic-0"]));
        s.spec.driver = "nic.example.com".into();
        s
    };
    let e = with_class_selectors(
        env(vec![local(devices), other_driver]),
        &["device.driver == 'gpu.example.com'"],
    );
    let big = |count| {
        edit(exact("r", count), |x| {
            x.selectors = Some(vec![cel_selector(
                "device.attributes['gpu.example.com'].model == 'big'",
            )])
        })
    };
    assert_eq!(
        e.picked(&[claim("c", vec![big(1)])]),
        names(&[&["r=node-1/gpu-1"]])
    );
    assert_eq!(
        e.picked(&[claim("c", vec![big(2)])]),
        names(&[&["r=node-1/gpu-1", "r=node-1/gpu-2"]])
    );
    assert_eq!(e.picked(&[claim("c", vec![big(3)])]), None);
    // The class alone: every device of the driver, none of the other driver.
    assert_eq!(
        e.picked(&[claim("c", vec![all("r")])]),
        names(&[&["r=node-1/gpu-0", "r=node-1/gpu-1", "r=node-1/gpu-2"]])
    );
    // Capacity in a selector, with exact quantities.
    let memory = edit(exact("r", 1), |x| {
        x.selectors = Some(vec![cel_selector(
            "has(device.capacity['gpu.example.com'].memory) && \
             device.capacity['gpu.example.com'].memory.compareTo(quantity('64Gi')) >= 0",
        )])
    });
    assert_eq!(
        e.picked(&[claim("c", vec![memory])]),
        names(&[&["r=node-1/gpu-1"]])
    );
    // firstAvailable: the first subrequest's selector matches nothing, the second's does.
    let mut none = sub("none", 1);
    none.selectors = Some(vec![cel_selector(
        "device.attributes['gpu.example.com'].model == 'huge'",
    )]);
    let mut small = sub("small", 1);
    small.selectors = Some(vec![cel_selector(
        "device.attributes['gpu.example.com'].model == 'small'",
    )]);
    assert_eq!(
        e.picked(&[claim("c", vec![first_available("r", vec![none, small])])]),
        names(&[&["r/small=node-1/gpu-0"]])
    );
}

#[test]
fn selector_errors() {
    let e = env(vec![local(devs(&["gpu-0"]))]);
    // Runtime error: the device has no such attribute.
    let request = edit(exact("r", 1), |x| {
        x.selectors = Some(vec![cel_selector(
            "device.attributes['gpu.example.com'].model == 'big'",
        )])
    });
    match e.run(&[claim("c", vec![request])]) {
        Err(AllocateError::Fatal(text)) => assert!(
            text.starts_with(
                "claim ns/c: selector #0 on device gpu.example.com/node-1/gpu-0: CEL runtime error: no such key: model"
            ),
            "{text}"
        ),
        other => panic!("{other:?}"),
    }
    // Compile error in a claim's selector.
    let request = edit(exact("r", 1), |x| {
        x.selectors = Some(vec![cel_selector("device.driver ==")])
    });
    match e.run(&[claim("c", vec![request])]) {
        Err(AllocateError::Fatal(text)) => {
            assert!(
                text.starts_with("claim ns/c: selector #0: CEL compile error: "),
                "{text}"
            )
        }
        other => panic!("{other:?}"),
    }
    // The second class selector is the one that fails.
    let e = with_class_selectors(
        env(vec![local(devs(&["gpu-0"]))]),
        &["true", "device.attributes['x'].y"],
    );
    match e.run(&[claim("c", vec![exact("r", 1)])]) {
        Err(AllocateError::Fatal(text)) => assert!(
            text.starts_with(
                "class gpu: selector #1 on device gpu.example.com/node-1/gpu-0: CEL runtime error: "
            ),
            "{text}"
        ),
        other => panic!("{other:?}"),
    }
    // v0.34–v0.36 (v1.34–v1.36) name neither the device nor the optional-chaining hint.
    let request = edit(exact("r", 1), |x| {
        x.selectors = Some(vec![cel_selector(
            "device.attributes['gpu.example.com'].model == 'big'",
        )])
    });
    let mut before_v1_37 = env(vec![local(devs(&["gpu-0"]))]);
    before_v1_37.features.cel_runtime_error_names_device = false;
    assert_eq!(
        before_v1_37.run(&[claim("c", vec![request.clone()])]),
        Err(AllocateError::Fatal(
            "claim ns/c: selector #0: CEL runtime error: no such key: model".into()
        ))
    );
    assert_eq!(
        env(vec![local(devs(&["gpu-0"]))]).run(&[claim("c", vec![request])]),
        Err(AllocateError::Fatal(
            "claim ns/c: selector #0 on device gpu.example.com/node-1/gpu-0: CEL runtime error: no such key: model. consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields".into()
        ))
    );
    // A selector that does not match comes before one that would fail: no error.
    let e = with_class_selectors(
        env(vec![local(devs(&["gpu-0"]))]),
        &["false", "device.attributes['x'].y"],
    );
    assert_eq!(e.run(&[claim("c", vec![exact("r", 1)])]).unwrap(), None);
}

#[test]
fn search_steps_are_counted() {
    let e = env(vec![local(devs(&["gpu-0", "gpu-1"]))]);
    let allocator = Allocator::new(e.features, &e.allocated, &e.classes, &e.slices, &e.cel);
    let c = claim("c", vec![exact("r", 1)]);
    // The device, the end of the request, the end of the claim, the end of the claims.
    assert!(allocator.allocate(&node(), &[&c], None).unwrap().is_some());
    assert_eq!(allocator.allocate_one_invocations(), 4);
    // gpu-0 then gpu-1 for the first device, each followed by a failing second claim.
    let d = claim("d", vec![exact("r", 2)]);
    assert_eq!(allocator.allocate(&node(), &[&c, &d], None).unwrap(), None);
    assert!(allocator.allocate_one_invocations() > 4);
}

#[test]
fn allocator_is_shared_across_threads() {
    fn shareable<T: Sync + Send>() {}
    shareable::<Allocator<'_>>();
    shareable::<AllocatedState>();
    // One allocator, several nodes in parallel, as the Filter extension point does.
    let e = env(vec![
        slice_at("s1", "node-1", At::Node("node-1"), devs(&["gpu-0"])),
        slice_at("s2", "node-2", At::Node("node-2"), devs(&["gpu-0", "gpu-1"])),
    ]);
    let allocator = Allocator::new(e.features, &e.allocated, &e.classes, &e.slices, &e.cel);
    let c = claim("c", vec![exact("r", 2)]);
    let nodes = [node_with("node-1", &[]), node_with("node-2", &[])];
    let got: Vec<bool> = std::thread::scope(|s| {
        let handles: Vec<_> = nodes
            .iter()
            .map(|n| s.spawn(|| allocator.allocate(n, &[&c], None).unwrap().is_some()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(got, [false, true]);
}
