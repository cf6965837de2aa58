//! Table-driven tests of extended resources backed by DRA: the class resolver, the requests and
//! mappings built per container, and how NodeResourcesFit and DynamicResources split a pod's
//! `example.com/gpu: 2` between device plugins and DRA (Filter, PostFilter, Reserve, Score).

use std::sync::Arc;

use k8s_openapi::api::core::v1::ContainerExtendedResourceRequest;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use serde_json::{Value, json};

use super::*;
use crate::framework::FeatureGates;
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::{FilterPlugin, Plugin, PreFilterPlugin, ReservePlugin};
use crate::framework::runtime::Handle;
use crate::framework::status::Code;
use crate::plugins::dynamic_resources::post_filter::{PostFilterWords, post_filter_status};
use crate::plugins::dynamic_resources::{
    DynamicResources, ERR_CANNOT_ALLOCATE, STATE_KEY, StateData, claim_allocations, lock,
};
use crate::plugins::node_resources::fit;
use crate::snapshot::{ClusterObjects, Snapshot};
use crate::testing::{node, pod};

const GPU: &str = "example.com/gpu";
const DRIVER: &str = "gpu.example.com";

fn class(name: &str, extended_resource_name: Option<&str>, created: &str) -> DeviceClass {
    serde_json::from_value(json!({
        "metadata": {"name": name, "creationTimestamp": created},
        "spec": {"extendedResourceName": extended_resource_name},
    }))
    .expect("class JSON")
}

fn class_with_selector(name: &str, extended_resource_name: &str, expression: &str) -> DeviceClass {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "extendedResourceName": extended_resource_name,
            "selectors": [{"cel": {"expression": expression}}],
        },
    }))
    .expect("class JSON")
}

/// A slice on `node` with `devices` devices named `dev-<i>`, in the pool named after the node.
fn slice(node: &str, devices: usize) -> ResourceSlice {
    let devices: Vec<Value> = (0..devices)
        .map(|i| json!({"name": format!("dev-{i}")}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": format!("slice-{node}")},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }))
    .expect("slice JSON")
}

/// A claim of someone else's holding `device` on `node`.
fn holding(node: &str, device: &str) -> ResourceClaim {
    serde_json::from_value(json!({
        "metadata": {"name": format!("held-{node}-{device}"), "namespace": "default", "uid": "held"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu-class"}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "r", "driver": DRIVER, "pool": node, "device": device}]}}},
    }))
    .expect("claim JSON")
}

/// The claim an earlier cycle created for pod `p` (uid `default-p`), allocated on `node`.
fn leftover_claim(owner_uid: &str) -> ResourceClaim {
    serde_json::from_value(json!({
        "metadata": {
            "name": "p-extended-resources-abcde",
            "namespace": "default",
            "uid": "leftover",
            "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": owner_uid, "controller": true}],
        },
        "spec": {"devices": {"requests": [{"name": "container-0-request-0",
            "exactly": {"deviceClassName": "gpu-class", "allocationMode": "ExactCount", "count": 2}}]}},
        "status": {"allocation": {
            "devices": {"results": [{"request": "container-0-request-0", "driver": DRIVER, "pool": "dra", "device": "dev-0"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["dra"]}]}]},
        }},
    }))
    .expect("claim JSON")
}

fn snapshot(
    classes: Vec<DeviceClass>,
    slices: Vec<ResourceSlice>,
    claims: Vec<ResourceClaim>,
) -> Arc<Snapshot> {
    Arc::new(Snapshot::new(ClusterObjects {
        device_classes: classes,
        resource_slices: slices,
        resource_claims: claims,
        ..Default::default()
    }))
}

/// The default cluster: `gpu-class` maps example.com/gpu; node `dra` has 4 devices, `dra-small` 1.
fn cluster(claims: Vec<ResourceClaim>) -> Arc<Snapshot> {
    snapshot(
        vec![class("gpu-class", Some(GPU), "2025-01-01T00:00:00Z")],
        vec![slice("dra", 4), slice("dra-small", 1)],
        claims,
    )
}

fn mapping(container: &str, resource: &str, request: &str) -> ContainerExtendedResourceRequest {
    ContainerExtendedResourceRequest {
        container_name: container.into(),
        resource_name: resource.into(),
        request_name: request.into(),
    }
}

/// (name, count) of each request.
fn request_counts(requests: &[k8s_openapi::api::resource::v1::DeviceRequest]) -> Vec<(String, i64)> {
    requests
        .iter()
        .map(|r| {
            let exactly = r.exactly.as_ref().expect("exactly");
            assert_eq!(exactly.device_class_name, "gpu-class");
            assert_eq!(exactly.allocation_mode.as_deref(), Some("ExactCount"));
            (r.name.clone(), exactly.count.unwrap_or(0))
        })
        .collect()
}

#[test]
fn resolver_maps_explicit_and_implicit_names_and_prefers_the_newest_class() {
    let classes: Vec<Arc<DeviceClass>> = [
        class("old", Some(GPU), "2025-01-01T00:00:00Z"),
        class("new", Some(GPU), "2025-06-01T00:00:00Z"),
        class("b-tie", Some("example.com/tie"), "2025-01-01T00:00:00Z"),
        class("a-tie", Some("example.com/tie"), "2025-01-01T00:00:00Z"),
        class("plain", None, "2025-01-01T00:00:00Z"),
    ]
    .into_iter()
    .map(Arc::new)
    .collect();
    // The outcome must not depend on the order classes are seen in.
    for order in [classes.clone(), classes.iter().rev().cloned().collect()] {
        let r = DeviceClassResolver::new(order.iter());
        let name = |resource: &str| r.get_device_class(resource).and_then(|c| c.metadata.name.clone());
        let cases = [
            (GPU, Some("new")),
            ("example.com/tie", Some("a-tie")),
            ("deviceclass.resource.kubernetes.io/old", Some("old")),
            ("deviceclass.resource.kubernetes.io/plain", Some("plain")),
            ("example.com/unmapped", None),
            ("deviceclass.resource.kubernetes.io/missing", None),
        ];
        for (resource, want) in cases {
            assert_eq!(name(resource).as_deref(), want, "{resource}");
        }
    }
    assert!(DeviceClassResolver::default().is_empty());
}

#[test]
fn dra_extended_resource_names() {
    let cases = [
        (GPU, true),
        ("deviceclass.resource.kubernetes.io/gpu-class", true),
        ("cpu", false),
        ("kubernetes.io/foo", false),
        ("hugepages-2Mi", false),
        ("requests.example.com/gpu", false),
    ];
    for (name, want) in cases {
        assert_eq!(is_dra_extended_resource_name(name), want, "{name}");
    }
}

#[test]
fn requests_and_mappings_per_container() {
    let resolver =
        DeviceClassResolver::new([Arc::new(class("gpu-class", Some(GPU), "2025-01-01T00:00:00Z"))].iter());
    type Case = (
        &'static str,
        PodInfo,
        Vec<(&'static str, i64)>,
        Vec<(&'static str, &'static str)>,
    );
    // Containers are numbered across init containers then containers; the default container `c0`
    // requests nothing.
    let cases: Vec<Case> = vec![
        (
            "one container",
            pod("p").req(GPU, "2").info(),
            vec![("container-0-request-0", 2)],
            vec![("c0", "container-0-request-0")],
        ),
        (
            "the request index is the resource's position among the container's sorted requests",
            pod("p").cpu("1").req(GPU, "2").info(),
            vec![("container-0-request-1", 2)],
            vec![("c0", "container-0-request-1")],
        ),
        (
            "one request per container",
            pod("p")
                .container("c1", &[(GPU, "1")])
                .container("c2", &[(GPU, "3")])
                .info(),
            vec![("container-1-request-0", 1), ("container-2-request-0", 3)],
            vec![("c1", "container-1-request-0"), ("c2", "container-2-request-0")],
        ),
        (
            "an init container reuses a later container's devices",
            pod("p")
                .init_container("i0", &[(GPU, "1")], false)
                .container("c1", &[(GPU, "2")])
                .info(),
            vec![("container-2-request-0", 2)],
            vec![("c1", "container-2-request-0"), ("i0", "container-2-request-0")],
        ),
        (
            "an init container asks for what it cannot reuse",
            pod("p")
                .init_container("i0", &[(GPU, "3")], false)
                .container("c1", &[(GPU, "1")])
                .info(),
            vec![("container-0-request-0", 2), ("container-2-request-0", 1)],
            vec![
                ("c1", "container-2-request-0"),
                ("i0", "container-2-request-0"),
                ("i0", "container-0-request-0"),
            ],
        ),
        (
            "init containers share the largest init request",
            pod("p")
                .init_container("i0", &[(GPU, "1")], false)
                .init_container("i1", &[(GPU, "2")], false)
                .info(),
            vec![("container-1-request-0", 2)],
            vec![("i0", "container-1-request-0"), ("i1", "container-1-request-0")],
        ),
        (
            "equal init requests: the first stays",
            pod("p")
                .init_container("i0", &[(GPU, "2")], false)
                .init_container("i1", &[(GPU, "2")], false)
                .info(),
            vec![("container-0-request-0", 2)],
            vec![("i0", "container-0-request-0"), ("i1", "container-0-request-0")],
        ),
        (
            "a sidecar keeps its own devices; a later init container cannot reuse an earlier sidecar's",
            pod("p")
                .init_container("s0", &[(GPU, "1")], true)
                .init_container("i1", &[(GPU, "1")], false)
                .container("c1", &[(GPU, "1")])
                .info(),
            vec![("container-0-request-0", 1), ("container-3-request-0", 1)],
            vec![
                ("s0", "container-0-request-0"),
                ("c1", "container-3-request-0"),
                ("i1", "container-3-request-0"),
            ],
        ),
        (
            "an init container before a sidecar reuses it",
            pod("p")
                .init_container("i0", &[(GPU, "2")], false)
                .init_container("s1", &[(GPU, "2")], true)
                .info(),
            vec![("container-1-request-0", 2)],
            vec![("s1", "container-1-request-0"), ("i0", "container-1-request-0")],
        ),
        (
            "a fraction is not an integer: nothing is requested",
            pod("p").req(GPU, "500m").info(),
            vec![],
            vec![],
        ),
        (
            "zero requests nothing",
            pod("p").req(GPU, "0").info(),
            vec![],
            vec![],
        ),
    ];
    for (name, p, want_requests, want_mappings) in cases {
        let extended = [(GPU.to_string(), 2)].into();
        let (requests, mappings) = create_requests_and_mappings(&p, &extended, &resolver);
        let want_requests: Vec<(String, i64)> = want_requests
            .into_iter()
            .map(|(n, c)| (n.to_string(), c))
            .collect();
        assert_eq!(request_counts(&requests), want_requests, "{name}");
        let want_mappings: Vec<_> = want_mappings
            .into_iter()
            .map(|(c, r)| mapping(c, GPU, r))
            .collect();
        assert_eq!(mappings, want_mappings, "{name}");
    }
}

#[test]
fn requests_for_several_resources_are_sorted_by_name() {
    let resolver = DeviceClassResolver::new(
        [
            Arc::new(class("gpu-class", Some(GPU), "2025-01-01T00:00:00Z")),
            Arc::new(class("fpga", None, "2025-01-01T00:00:00Z")),
        ]
        .iter(),
    );
    let fpga = "deviceclass.resource.kubernetes.io/fpga";
    let p = pod("p")
        .req(GPU, "1")
        .req(fpga, "1")
        .container("c1", &[(GPU, "1")])
        .info();
    let extended = [(GPU.to_string(), 2), (fpga.to_string(), 1)].into();
    let (requests, mappings) = create_requests_and_mappings(&p, &extended, &resolver);
    let names: Vec<(&str, &str)> = requests
        .iter()
        .map(|r| {
            (
                r.name.as_str(),
                r.exactly.as_ref().unwrap().device_class_name.as_str(),
            )
        })
        .collect();
    // c0's requests sort as [deviceclass..., example.com/gpu]: the gpu is request 1.
    assert_eq!(
        names,
        vec![
            ("container-0-request-0", "fpga"),
            ("container-0-request-1", "gpu-class"),
            ("container-1-request-0", "gpu-class"),
        ]
    );
    assert_eq!(
        mappings,
        vec![
            mapping("c0", fpga, "container-0-request-0"),
            mapping("c0", GPU, "container-0-request-1"),
            mapping("c1", GPU, "container-1-request-0"),
        ]
    );
}

/// NodeResourcesFit and DynamicResources as the default profile runs them on one node: PreFilter
/// both, then Filter in profile order (Fit first; the first rejection is the node's status).
struct Run {
    fit: Arc<dyn Plugin>,
    dra: DynamicResources,
    state: CycleState,
    fit_status: Status,
    dra_pre_filter: Status,
}

fn run(snapshot: Arc<Snapshot>, fit_args: Option<Value>, p: &PodInfo) -> Run {
    run_with(snapshot, fit_args, p, &FeatureGates::v1_37())
}

fn run_with(snapshot: Arc<Snapshot>, fit_args: Option<Value>, p: &PodInfo, features: &FeatureGates) -> Run {
    let fit = fit::new(
        fit_args.as_ref(),
        &Handle {
            snapshot: snapshot.clone(),
        },
        features,
    )
    .expect("fit args");
    let dra = DynamicResources::for_snapshot(snapshot).with_features(features);
    let mut state = CycleState::new();
    let (_, fit_status) = fit.as_pre_filter().unwrap().pre_filter(&mut state, p, &[]);
    let (_, dra_pre_filter) = dra.pre_filter(&mut state, p, &[]);
    Run {
        fit,
        dra,
        state,
        fit_status,
        dra_pre_filter,
    }
}

impl Run {
    fn filter(&self, p: &PodInfo, n: &NodeInfo) -> (Status, Status) {
        let fit = self.fit.as_filter().unwrap().filter(&self.state, p, n);
        // The framework skips a plugin whose PreFilter said Skip.
        let dra = if self.dra_pre_filter.is_skip() {
            Status::skip()
        } else {
            self.dra.filter(&self.state, p, n)
        };
        (fit, dra)
    }
}

#[test]
fn device_plugin_or_dra_decides_per_node() {
    let p = pod("p").req(GPU, "2").info();
    let device_plugin = node("dp").allocatable(GPU, "4").info_with(vec![]);
    let device_plugin_small = node("dp-small").allocatable(GPU, "1").info_with(vec![]);
    let dra = node("dra").info_with(vec![]);
    let dra_small = node("dra-small").info_with(vec![]);
    let none = node("none").info_with(vec![]);
    let advertises_zero = node("dra").allocatable(GPU, "0").info_with(vec![]);
    type Case<'a> = (
        &'a str,
        Arc<Snapshot>,
        &'a NodeInfo,
        (Code, &'a str),
        (Code, &'a str),
        usize,
    );
    let cases: Vec<Case<'_>> = vec![
        (
            "(a) the node's device plugin serves it: Fit decides, DRA does nothing",
            cluster(vec![]),
            &device_plugin,
            (Code::Success, ""),
            (Code::Success, ""),
            0,
        ),
        (
            "(a) a device plugin with too little: Fit rejects, DRA stays out",
            cluster(vec![]),
            &device_plugin_small,
            (Code::UnschedulableAndUnresolvable, "Insufficient example.com/gpu"),
            (Code::Success, ""),
            0,
        ),
        (
            "(b) no device plugin, a class maps it: Fit leaves it to DRA, which allocates 2 devices",
            cluster(vec![]),
            &dra,
            (Code::Success, ""),
            (Code::Success, ""),
            2,
        ),
        (
            "(b) a node advertising 0 has no device plugin for it: DRA allocates",
            cluster(vec![]),
            &advertises_zero,
            (Code::Success, ""),
            (Code::Success, ""),
            2,
        ),
        (
            "(b) too few devices: the allocator's verdict",
            cluster(vec![]),
            &dra_small,
            (Code::Success, ""),
            (Code::UnschedulableAndUnresolvable, ERR_CANNOT_ALLOCATE),
            0,
        ),
        (
            "(c) neither: Fit's Insufficient (DynamicResources skips the pod)",
            snapshot(vec![], vec![], vec![]),
            &none,
            (Code::UnschedulableAndUnresolvable, "Insufficient example.com/gpu"),
            (Code::Skip, ""),
            0,
        ),
    ];
    for (name, snapshot, n, (fit_code, fit_message), (dra_code, dra_message), devices) in cases {
        let r = run(snapshot, None, &p);
        assert!(r.fit_status.is_success(), "{name}");
        let (fit, dra) = r.filter(&p, n);
        assert_eq!(
            (fit.code(), fit.message().as_str()),
            (fit_code, fit_message),
            "{name}: Fit"
        );
        assert_eq!(
            (dra.code(), dra.message().as_str()),
            (dra_code, dra_message),
            "{name}: DRA"
        );
        let allocations = claim_allocations(&r.state, n.name());
        if devices == 0 {
            assert!(allocations.is_empty(), "{name}: {allocations:?}");
            continue;
        }
        assert_eq!(allocations.len(), 1, "{name}");
        assert_eq!(allocations[0].claim, "default/<extended-resources>", "{name}");
        let requests: Vec<&str> = allocations[0]
            .devices
            .iter()
            .map(|d| d.request.as_str())
            .collect();
        assert_eq!(requests, vec!["container-0-request-0"; devices], "{name}");
        assert!(
            allocations[0]
                .devices
                .iter()
                .all(|d| d.driver == DRIVER && d.pool == "dra")
        );
    }
}

#[test]
fn without_the_dra_extended_resource_gate_no_class_backs_a_resource() {
    let p = pod("p").req(GPU, "2").info();
    let n = node("dra").info_with(vec![]);
    let features = FeatureGates {
        dra_extended_resource: false,
        ..FeatureGates::v1_37()
    };
    // The case DRA serves with the gate on (see above): with it off, Fit checks the resource
    // against the node's allocatable and DynamicResources has nothing to do.
    let r = run_with(cluster(vec![]), None, &p, &features);
    let (fit, dra) = r.filter(&p, &n);
    assert_eq!(
        (fit.code(), fit.message().as_str()),
        (Code::UnschedulableAndUnresolvable, "Insufficient example.com/gpu")
    );
    assert_eq!(dra.code(), Code::Skip, "{dra:?}");
    assert!(claim_allocations(&r.state, n.name()).is_empty());
}

#[test]
fn a_resource_neither_advertised_nor_mapped_cannot_fit() {
    let p = pod("p").req(GPU, "2").req("example.com/other", "1").info();
    let n = node("dra").info_with(vec![]);
    // Fit runs first and reports the shortage itself.
    let r = run(cluster(vec![]), None, &p);
    let (fit, _) = r.filter(&p, &n);
    assert_eq!(fit.code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(fit.message(), "Insufficient example.com/other");
    // With the resource ignored by Fit, DynamicResources still refuses it.
    let r = run(
        cluster(vec![]),
        Some(json!({"ignoredResources": ["example.com/other"]})),
        &p,
    );
    let (fit, dra) = r.filter(&p, &n);
    assert!(fit.is_success(), "{fit:?}");
    assert_eq!(dra.code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(dra.message(), ERR_CANNOT_FIT_RESOURCE);
}

#[test]
fn the_implicit_class_name_is_backed_by_dra() {
    let implicit = "deviceclass.resource.kubernetes.io/gpu-class";
    let p = pod("p").req(implicit, "1").info();
    let n = node("dra").info_with(vec![]);
    let r = run(cluster(vec![]), None, &p);
    let (fit, dra) = r.filter(&p, &n);
    assert!(fit.is_success(), "{fit:?}");
    assert!(dra.is_success(), "{dra:?}");
    let allocations = claim_allocations(&r.state, "dra");
    assert_eq!(allocations.len(), 1);
    assert_eq!(allocations[0].devices.len(), 1);
    // Without the class, the name is just a resource nobody advertises.
    let r = run(snapshot(vec![], vec![slice("dra", 4)], vec![]), None, &p);
    let (fit, dra) = r.filter(&p, &n);
    assert_eq!(fit.message(), format!("Insufficient {implicit}"));
    assert!(dra.is_skip());
}

#[test]
fn init_containers_and_sidecars_get_their_devices_allocated() {
    let p = pod("p")
        .init_container("i0", &[(GPU, "3")], false)
        .init_container("s1", &[(GPU, "1")], true)
        .info();
    let n = node("dra").info_with(vec![]);
    let r = run(cluster(vec![]), None, &p);
    let (fit, dra) = r.filter(&p, &n);
    assert!(fit.is_success(), "{fit:?}");
    assert!(dra.is_success(), "{dra:?}");
    let allocations = claim_allocations(&r.state, "dra");
    let mut requests: Vec<&str> = allocations[0]
        .devices
        .iter()
        .map(|d| d.request.as_str())
        .collect();
    requests.sort();
    // i0 reuses s1's device and needs 2 more of its own.
    assert_eq!(
        requests,
        vec![
            "container-0-request-0",
            "container-0-request-0",
            "container-1-request-0"
        ]
    );
    let StateData(cycle) = r.state.read(&STATE_KEY).expect("state");
    let extended = lock(&cycle.node_extended_claims);
    assert_eq!(
        extended["dra"].mappings,
        vec![
            mapping("s1", GPU, "container-1-request-0"),
            mapping("i0", GPU, "container-1-request-0"),
            mapping("i0", GPU, "container-0-request-0"),
        ]
    );
}

#[test]
fn reserve_needs_no_allocation_when_a_device_plugin_served_the_pod() {
    let p = pod("p").req(GPU, "2").info();
    for (node_name, n) in [
        ("dp", node("dp").allocatable(GPU, "4").info_with(vec![])),
        ("dra", node("dra").info_with(vec![])),
    ] {
        let mut r = run(cluster(vec![]), None, &p);
        assert!(r.filter(&p, &n).1.is_success(), "{node_name}");
        let s = r.dra.reserve(&mut r.state, &p, node_name);
        assert!(s.is_success(), "{node_name}: {s:?}");
    }
}

#[test]
fn a_claim_left_over_from_an_earlier_cycle_is_deleted_in_post_filter() {
    let p = pod("p").req(GPU, "2").info();
    let r = run(cluster(vec![leftover_claim("default-p")]), None, &p);
    assert!(r.dra_pre_filter.is_success(), "{:?}", r.dra_pre_filter);
    for n in [
        node("dra").info_with(vec![]),
        node("dp").allocatable(GPU, "4").info_with(vec![]),
    ] {
        let (_, dra) = r.filter(&p, &n);
        assert_eq!(dra.code(), Code::UnschedulableAndUnresolvable, "{}", n.name());
        assert_eq!(dra.message(), ERR_CANNOT_SCHEDULE_EXTENDED_CLAIM);
    }
    let post = post_filter_status(PostFilterWords::of(&FeatureGates::v1_37()), &r.state, &p);
    assert_eq!(post.code(), Code::Unschedulable);
    assert_eq!(post.message(), MSG_EXTENDED_CLAIM_DELETED);

    // Another pod's claim is not this pod's: it gets a fresh in-memory claim.
    let r = run(cluster(vec![leftover_claim("someone-else")]), None, &p);
    let n = node("dra").info_with(vec![]);
    assert!(r.filter(&p, &n).1.is_success());
    assert_eq!(
        claim_allocations(&r.state, "dra")[0].claim,
        "default/<extended-resources>"
    );
    let post = post_filter_status(PostFilterWords::of(&FeatureGates::v1_37()), &r.state, &p);
    assert_eq!(
        (post.code(), post.message()),
        (Code::Unschedulable, String::new())
    );
}

#[test]
fn a_pod_without_mapped_extended_resources_is_not_dynamic_resources_business() {
    let r = run(
        cluster(vec![]),
        None,
        &pod("p").cpu("1").req("example.com/other", "1").info(),
    );
    assert!(r.dra_pre_filter.is_skip());
    let r = run(cluster(vec![]), None, &pod("p").req(GPU, "0").info());
    assert!(r.dra_pre_filter.is_skip());
}

#[test]
fn fit_scores_extended_resources_backed_by_dra_in_devices() {
    let scored = |strategy: &str| json!({"scoringStrategy": {"type": strategy, "resources": [{"name": GPU, "weight": 1}]}});
    let p = pod("p").req(GPU, "2").info();
    // One of dra's 4 devices is someone else's.
    let with_held = cluster(vec![holding("dra", "dev-3")]);
    let selector_rejects = snapshot(
        vec![class_with_selector(
            "gpu-class",
            GPU,
            "device.driver == \"other.example.com\"",
        )],
        vec![slice("dra", 4)],
        vec![],
    );
    let selector_accepts = snapshot(
        vec![class_with_selector(
            "gpu-class",
            GPU,
            &format!("device.driver == \"{DRIVER}\""),
        )],
        vec![slice("dra", 4)],
        vec![],
    );
    let dra = node("dra").info_with(vec![]);
    let device_plugin = node("dp").allocatable(GPU, "4").info_with(vec![]);
    let cases = [
        (
            "least allocated: (4 - 1 - 2) / 4",
            with_held.clone(),
            "LeastAllocated",
            &dra,
            25,
        ),
        (
            "most allocated: (1 + 2) / 4",
            with_held.clone(),
            "MostAllocated",
            &dra,
            75,
        ),
        (
            "a device plugin's allocatable as before",
            with_held,
            "LeastAllocated",
            &device_plugin,
            50,
        ),
        (
            "nothing reachable: the resource is left out",
            cluster(vec![]),
            "LeastAllocated",
            &node("none").info_with(vec![]),
            0,
        ),
        (
            "a class selector rejecting every device",
            selector_rejects,
            "LeastAllocated",
            &dra,
            0,
        ),
        (
            "a class selector accepting them",
            selector_accepts,
            "LeastAllocated",
            &dra,
            50,
        ),
    ];
    for (name, snapshot, strategy, n, want) in cases {
        let fit = fit::new(
            Some(&scored(strategy)),
            &Handle { snapshot },
            &crate::framework::FeatureGates::default(),
        )
        .expect("args");
        let mut state = CycleState::new();
        assert!(
            fit.as_pre_score()
                .unwrap()
                .pre_score(&mut state, &p, &[])
                .is_success()
        );
        let (score, s) = fit.as_score().unwrap().score(&state, &p, n);
        assert!(s.is_success(), "{name}: {s:?}");
        assert_eq!(score, want, "{name}");
    }
}

#[test]
fn balanced_allocation_counts_devices_too() {
    use crate::plugins::node_resources::balanced_allocation;
    let args = json!({"resources": [{"name": "cpu", "weight": 1}, {"name": GPU, "weight": 1}]});
    let p = pod("p").cpu("1").req(GPU, "2").info();
    let n = node("dra").cpu("4").info_with(vec![]);
    let score = |snapshot| {
        let ba = balanced_allocation::new(
            Some(&args),
            &Handle { snapshot },
            &crate::framework::FeatureGates::default(),
        )
        .expect("args");
        let mut state = CycleState::new();
        assert!(
            ba.as_pre_score()
                .unwrap()
                .pre_score(&mut state, &p, &[])
                .is_success()
        );
        ba.as_score().unwrap().score(&state, &p, &n).0
    };
    // With DRA: cpu 1/4 and gpu 2/4 → std 0.125 → 87; before, 0/4 → 100: (50 + 87 - 100) / 2 + 50 = 68.
    assert_eq!(score(cluster(vec![])), 68);
    // Without a class the gpu is left out: one fraction, std 0 both ways → 75.
    assert_eq!(score(snapshot(vec![], vec![slice("dra", 4)], vec![])), 75);
}

/// The pod's own claim `user` (one device of `gpu-class`).
fn user_claim() -> ResourceClaim {
    serde_json::from_value(json!({
        "metadata": {"name": "user", "namespace": "default", "uid": "uid-user"},
        "spec": {"devices": {"requests": [{"name": "one", "exactly": {"deviceClassName": "gpu-class"}}]}},
    }))
    .expect("claim JSON")
}

fn with_user_claim(p: crate::testing::PodBuilder) -> PodInfo {
    p.with(|p| {
        p.spec.as_mut().unwrap().resource_claims = Some(vec![k8s_openapi::api::core::v1::PodResourceClaim {
            name: "mine".into(),
            resource_claim_name: Some("user".into()),
            ..Default::default()
        }]);
    })
    .info()
}

#[test]
fn the_extended_claim_comes_after_the_pods_own_claims() {
    let p = with_user_claim(pod("p").req(GPU, "2"));
    // On a DRA node both claims get devices: 1 for the user claim, 2 for the extended one.
    let n = node("dra").info_with(vec![]);
    let mut r = run(cluster(vec![user_claim()]), None, &p);
    let (fit, dra) = r.filter(&p, &n);
    assert!(fit.is_success() && dra.is_success(), "{fit:?} {dra:?}");
    let allocations = claim_allocations(&r.state, "dra");
    let summary: Vec<(&str, usize)> = allocations
        .iter()
        .map(|a| (a.claim.as_str(), a.devices.len()))
        .collect();
    assert_eq!(
        summary,
        vec![("default/user", 1), ("default/<extended-resources>", 2)]
    );
    assert!(r.dra.reserve(&mut r.state, &p, "dra").is_success());

    // On a device-plugin node kube-scheduler still allocates the extended claim, without requests
    // (and would create it in PreBind).
    let dp = node("dp").allocatable(GPU, "4").info_with(vec![]);
    let r = run(
        snapshot(
            vec![class("gpu-class", Some(GPU), "2025-01-01T00:00:00Z")],
            vec![slice("dp", 1)],
            vec![user_claim()],
        ),
        None,
        &p,
    );
    let (fit, dra) = r.filter(&p, &dp);
    assert!(fit.is_success() && dra.is_success(), "{fit:?} {dra:?}");
    let summary: Vec<(String, usize)> = claim_allocations(&r.state, "dp")
        .into_iter()
        .map(|a| (a.claim, a.devices.len()))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("default/user".to_string(), 1),
            ("default/<extended-resources>".to_string(), 0)
        ]
    );
}

#[test]
fn which_pods_use_dra_extended_resources() {
    let resolver = DeviceClassResolver::for_snapshot(&cluster(vec![]));
    let cases = [
        ("a mapped resource", pod("p").req(GPU, "1").obj(), true),
        (
            "the implicit name",
            pod("p")
                .req("deviceclass.resource.kubernetes.io/gpu-class", "1")
                .obj(),
            true,
        ),
        (
            "in an init container",
            pod("p").init_container("i", &[(GPU, "1")], false).obj(),
            true,
        ),
        ("zero", pod("p").req(GPU, "0").obj(), false),
        (
            "an unmapped resource",
            pod("p").req("example.com/other", "1").obj(),
            false,
        ),
        ("cpu only", pod("p").cpu("1").obj(), false),
    ];
    for (name, p, want) in cases {
        assert_eq!(uses_dra_extended_resources(&p, &resolver), want, "{name}");
    }
    assert!(!uses_dra_extended_resources(
        &pod("p").req(GPU, "1").obj(),
        &DeviceClassResolver::default()
    ));
}

#[test]
fn whole_quantities_only() {
    let cases = [
        ("2", Some(2)),
        ("2.0", Some(2)),
        ("1k", Some(1000)),
        ("1e3", Some(1000)),
        ("0", Some(0)),
        ("500m", None),
        ("1.5", None),
        ("1Ki", Some(1024)),
        ("junk", None),
    ];
    for (q, want) in cases {
        assert_eq!(as_int64(q), want, "{q}");
    }
}

/// The default profile over a cluster: what kube-scheduler would say.
fn explain(
    nodes: Vec<k8s_openapi::api::core::v1::Node>,
    classes: Vec<DeviceClass>,
    slices: Vec<ResourceSlice>,
    claims: Vec<ResourceClaim>,
    pending: k8s_openapi::api::core::v1::Pod,
) -> crate::explain::Explanation {
    use crate::framework::profile::SchedulerConfig;
    use crate::framework::runtime::Framework;
    let registry = crate::plugins::in_tree_registry();
    let config = SchedulerConfig::default_config(&registry);
    let profile = config.profile("default-scheduler").expect("default profile");
    let snapshot = Snapshot::new(ClusterObjects {
        nodes,
        device_classes: classes,
        resource_slices: slices,
        resource_claims: claims,
        ..Default::default()
    });
    let fwk = Framework::new(profile, &registry, Arc::new(snapshot)).expect("framework");
    crate::schedule::schedule(
        &fwk,
        &PodInfo::new(pending),
        crate::schedule::ScheduleOptions::default(),
    )
}

#[test]
fn the_default_profile_end_to_end() {
    use crate::explain::Outcome;
    let nodes = || {
        vec![
            node("dp-small").allocatable(GPU, "1").obj(),
            node("dra").obj(),
            node("none").obj(),
        ]
    };
    let gpu_class = || vec![class("gpu-class", Some(GPU), "2025-01-01T00:00:00Z")];
    let p = || pod("p").req(GPU, "2").obj();

    let e = explain(nodes(), gpu_class(), vec![slice("dra", 4)], vec![], p());
    assert_eq!(e.outcome, Outcome::Scheduled, "{}", e.message);
    assert_eq!(e.selected, vec!["dra".to_string()]);
    assert_eq!(e.claim_allocations.len(), 1);
    assert_eq!(e.claim_allocations[0].claim, "default/<extended-resources>");
    assert_eq!(e.claim_allocations[0].devices.len(), 2);

    let e = explain(nodes(), gpu_class(), vec![slice("dra", 1)], vec![], p());
    assert_eq!(e.outcome, Outcome::Unschedulable);
    // dp-small's device plugin has too little (Fit runs first); the DRA nodes too few devices.
    assert_eq!(
        e.message,
        "0/3 nodes are available: 1 Insufficient example.com/gpu, 2 cannot allocate all claims. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );

    let e = explain(nodes(), vec![], vec![slice("dra", 4)], vec![], p());
    assert_eq!(e.outcome, Outcome::Unschedulable);
    // Without a class nothing is DRA's: Fit rejects every node, DynamicResources skips the pod.
    assert_eq!(
        e.message,
        "0/3 nodes are available: 3 Insufficient example.com/gpu. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );

    let e = explain(
        nodes(),
        gpu_class(),
        vec![slice("dra", 4)],
        vec![leftover_claim("default-p")],
        p(),
    );
    assert_eq!(e.outcome, Outcome::Unschedulable);
    // DynamicResources' PostFilter (before DefaultPreemption) deletes the leftover claim; its
    // Unschedulable reason joins the preemption message.
    assert_eq!(
        e.message,
        "0/3 nodes are available: 1 Insufficient example.com/gpu, 2 cannot schedule extended resource claim. deletion of ResourceClaim completed, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
}

/// A pod as kube-scheduler's `st.MakePod()` builds it: regular containers `con<i>`, init containers
/// `init-con<i>` or (sidecars) `sidecar-con<i>`.
fn make_pod(init: &[(&[(&str, &str)], bool)], containers: &[&[(&str, &str)]]) -> PodInfo {
    let mut b = pod("p").with(|p| p.spec.as_mut().unwrap().containers.clear());
    for (i, (requests, sidecar)) in init.iter().enumerate() {
        let name = if *sidecar {
            format!("sidecar-con{i}")
        } else {
            format!("init-con{i}")
        };
        b = b.init_container(&name, requests, *sidecar);
    }
    for (i, requests) in containers.iter().enumerate() {
        b = b.container(&format!("con{i}"), requests);
    }
    b.info()
}

/// kube-scheduler's own `Test_createRequestsAndMappings_requests` and `_mappings` cases.
#[test]
fn upstream_create_requests_and_mappings_cases() {
    const GPU1: &str = "example.com/gpu1";
    const INIT: &str = "example.com/gpuinit";
    const IMPLICIT: &str = "deviceclass.resource.kubernetes.io/classInit";
    let t = "2025-01-01T00:00:00Z";
    let dev_map = [class("class", Some(GPU), t)];
    let dev_map2 = [class("class", Some(GPU), t), class("class1", Some(GPU1), t)];
    let dev_map_init = [class("class", Some(GPU), t), class("classInit", Some(INIT), t)];
    let pod1 = make_pod(&[], &[&[(GPU, "1"), (GPU1, "2")]]);
    let pod1_init_implicit = make_pod(&[(&[(INIT, "1"), (IMPLICIT, "2")], false)], &[]);
    let pod2 = make_pod(&[], &[&[(GPU, "1")], &[(GPU1, "2")]]);
    let pod_init = make_pod(&[(&[(INIT, "2")], false)], &[&[(GPU, "1")]]);
    let pod_init2 = make_pod(
        &[(&[(INIT, "1")], false), (&[(INIT, "2")], false)],
        &[&[(GPU, "1")]],
    );
    let pod_init_implicit = make_pod(
        &[(&[(INIT, "1")], false), (&[(IMPLICIT, "2")], false)],
        &[&[(GPU, "1")]],
    );
    let pod_init3 = make_pod(
        &[
            (&[(INIT, "1")], false),
            (&[(INIT, "1")], true),
            (&[(INIT, "2")], false),
        ],
        &[&[(GPU, "1")]],
    );
    let res: &[(&str, i64)] = &[(GPU, 1)];
    let res2: &[(&str, i64)] = &[(GPU, 1), (GPU1, 2)];
    let res_init: &[(&str, i64)] = &[(GPU, 1), (INIT, 2)];
    let res_init_implicit: &[(&str, i64)] = &[(GPU, 1), (INIT, 2), (IMPLICIT, 2)];
    type Want = (
        &'static [(&'static str, &'static str, i64)],
        &'static [(&'static str, &'static str, &'static str)],
    );
    // (pod, extended resources, classes, requests (name, class, count), mappings sorted by request
    // then container (container, resource, request)).
    type Case<'a> = (
        &'a str,
        &'a PodInfo,
        &'a [(&'a str, i64)],
        &'a [DeviceClass],
        Want,
    );
    let cases: Vec<Case<'_>> = vec![
        ("nil", &pod1, &[], &[], (&[], &[])),
        (
            "one resource match",
            &pod1,
            res,
            &dev_map,
            (
                &[("container-0-request-0", "class", 1)],
                &[("con0", GPU, "container-0-request-0")],
            ),
        ),
        (
            "one resource match, one resource not match",
            &pod1,
            res2,
            &dev_map,
            (
                &[("container-0-request-0", "class", 1)],
                &[("con0", GPU, "container-0-request-0")],
            ),
        ),
        (
            "two resources match",
            &pod1,
            res2,
            &dev_map2,
            (
                &[
                    ("container-0-request-0", "class", 1),
                    ("container-0-request-1", "class1", 2),
                ],
                &[
                    ("con0", GPU, "container-0-request-0"),
                    ("con0", GPU1, "container-0-request-1"),
                ],
            ),
        ),
        (
            "two containers match",
            &pod2,
            res2,
            &dev_map2,
            (
                &[
                    ("container-0-request-0", "class", 1),
                    ("container-1-request-0", "class1", 2),
                ],
                &[
                    ("con0", GPU, "container-0-request-0"),
                    ("con1", GPU1, "container-1-request-0"),
                ],
            ),
        ),
        (
            "one container, one explicit and one implicit request",
            &pod1_init_implicit,
            res_init_implicit,
            &dev_map_init,
            (
                &[
                    ("container-0-request-0", "classInit", 2),
                    ("container-0-request-1", "classInit", 1),
                ],
                &[
                    ("init-con0", IMPLICIT, "container-0-request-0"),
                    ("init-con0", INIT, "container-0-request-1"),
                ],
            ),
        ),
        (
            "one init container, one regular container",
            &pod_init,
            res_init,
            &dev_map_init,
            (
                &[
                    ("container-0-request-0", "classInit", 2),
                    ("container-1-request-0", "class", 1),
                ],
                &[
                    ("init-con0", INIT, "container-0-request-0"),
                    ("con0", GPU, "container-1-request-0"),
                ],
            ),
        ),
        (
            "two init containers, one regular container",
            &pod_init2,
            res_init,
            &dev_map_init,
            (
                &[
                    ("container-1-request-0", "classInit", 2),
                    ("container-2-request-0", "class", 1),
                ],
                &[
                    ("init-con0", INIT, "container-1-request-0"),
                    ("init-con1", INIT, "container-1-request-0"),
                    ("con0", GPU, "container-2-request-0"),
                ],
            ),
        ),
        (
            "two init containers (explicit and implicit), one regular container",
            &pod_init_implicit,
            res_init_implicit,
            &dev_map_init,
            (
                &[
                    ("container-0-request-0", "classInit", 1),
                    ("container-1-request-0", "classInit", 2),
                    ("container-2-request-0", "class", 1),
                ],
                &[
                    ("init-con0", INIT, "container-0-request-0"),
                    ("init-con1", IMPLICIT, "container-1-request-0"),
                    ("con0", GPU, "container-2-request-0"),
                ],
            ),
        ),
        (
            "two init containers, one sidecar, one regular container",
            &pod_init3,
            res_init,
            &dev_map_init,
            (
                &[
                    ("container-1-request-0", "classInit", 1),
                    ("container-2-request-0", "classInit", 2),
                    ("container-3-request-0", "class", 1),
                ],
                &[
                    ("init-con0", INIT, "container-1-request-0"),
                    ("sidecar-con1", INIT, "container-1-request-0"),
                    ("init-con2", INIT, "container-2-request-0"),
                    ("con0", GPU, "container-3-request-0"),
                ],
            ),
        ),
    ];
    for (name, p, extended, classes, (want_requests, want_mappings)) in cases {
        let classes: Vec<Arc<DeviceClass>> = classes.iter().cloned().map(Arc::new).collect();
        let resolver = DeviceClassResolver::new(classes.iter());
        let extended = extended.iter().map(|(n, q)| (n.to_string(), *q)).collect();
        let (requests, mut mappings) = create_requests_and_mappings(p, &extended, &resolver);
        let got: Vec<(&str, &str, i64)> = requests
            .iter()
            .map(|r| {
                let e = r.exactly.as_ref().unwrap();
                assert_eq!(e.allocation_mode.as_deref(), Some("ExactCount"));
                (
                    r.name.as_str(),
                    e.device_class_name.as_str(),
                    e.count.unwrap_or(0),
                )
            })
            .collect();
        assert_eq!(got, want_requests, "{name}: requests");
        mappings
            .sort_by(|a, b| (&a.request_name, &a.container_name).cmp(&(&b.request_name, &b.container_name)));
        let want: Vec<_> = want_mappings.iter().map(|(c, r, q)| mapping(c, r, q)).collect();
        assert_eq!(mappings, want, "{name}: mappings");
    }
}

#[test]
fn shortfall_leaves_dra_backed_resources_out() {
    let resolver = DeviceClassResolver::for_snapshot(&cluster(vec![]));
    let p = pod("p").cpu("2").req(GPU, "2").info();
    let short = |n: &NodeInfo, dra: Option<&DeviceClassResolver>| -> Vec<String> {
        fit::shortfall_with_dra(n, &p, dra, &crate::framework::FeatureGates::v1_37())
            .into_iter()
            .map(|s| s.resource)
            .collect()
    };
    let dra_node = node("dra").cpu("1").info_with(vec![]);
    let device_plugin = node("dp").cpu("1").allocatable(GPU, "1").info_with(vec![]);
    assert_eq!(short(&dra_node, Some(&resolver)), vec!["cpu"]);
    assert_eq!(short(&dra_node, None), vec!["cpu", GPU]);
    assert_eq!(short(&device_plugin, Some(&resolver)), vec!["cpu", GPU]);
}

#[test]
fn the_allocator_gates_follow_the_feature_gates() {
    use crate::dra::structured::Features;
    use crate::plugins::dynamic_resources::allocator_features;
    assert_eq!(
        allocator_features(&FeatureGates::v1_37()),
        Features::V1_37_DEFAULTS
    );
    // Binding conditions need the device status gate as well (upstream's DeviceBindingAndStatus).
    let no_status = FeatureGates {
        dra_resource_claim_device_status: false,
        ..FeatureGates::v1_37()
    };
    assert!(!allocator_features(&no_status).device_binding_and_status);
}
