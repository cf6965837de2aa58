//! Differential tests for pods with ResourceClaims (Dynamic Resource Allocation, structured
//! parameters): the real kube-scheduler v1.37.2 is the oracle for sched-core's DynamicResources.
//!
//! No DRA driver runs: DeviceClasses and ResourceSlices are created by hand (node-local,
//! node-selector and all-nodes pools), and kube-scheduler allocates the claims itself and writes
//! `status.allocation`. Nodes are fake (no kubelet), pods are bound by kube-scheduler. Unschedulable:
//! kube-scheduler's FailedScheduling message must equal sched-core's byte for byte. Bound: the node
//! must be one of sched-core's `selected`, and each claim kube-scheduler allocated must get the same
//! devices (request, driver, pool, device, in order) in sched-core's `claim_allocations`. Every
//! scenario first checks that kube-scheduler's answer really is about what it claims to exercise.
//!
//! The control plane runs kube-controller-manager's `resourceclaim-controller`, which makes the
//! claims of ResourceClaimTemplates and keeps `reservedFor` tidy.

mod common;

use std::time::Duration;

use anyhow::{Result, bail, ensure};
use common::dra::{
    EXTENDED_RESOURCES, KubeAllocation, claim, compare_allocations, device, first_available, gate_on,
    request, runnable_on,
};
use common::{Lab, Verdict, pod};
use e2e::{ControlPlane, Options};
use sched_core::explain::Outcome;
use serde_json::json;
use tokio::sync::OnceCell;

static CONTROL_PLANE: OnceCell<ControlPlane> = OnceCell::const_new();

/// kube-scheduler (defaults) and kube-controller-manager with the resourceclaim controller.
async fn control_plane() -> Result<&'static ControlPlane, e2e::Error> {
    CONTROL_PLANE
        .get_or_try_init(|| {
            ControlPlane::start(
                Options::new()
                    .with_scheduler(None)
                    .with_controller_manager(&["resourceclaim-controller"]),
            )
        })
        .await
}

async fn begin(id: &str) -> Result<Lab> {
    let lab = Lab::begin_on(id, control_plane).await?;
    common::dra::ensure_dra_served(&lab)?;
    Ok(lab)
}

/// `request:pool/device` for a device of node `node`'s own pool (see `Lab::node_slice`).
fn on(lab: &Lab, request: &str, node: &str, device: &str) -> String {
    format!("{request}:{}/{device}", lab.n(node))
}

/// kube-scheduler bound the pod to n1 with its claim's request `gpu` allocated device gpu-0 there,
/// and sched-core agrees.
async fn expect_gpu_0_on_n1(lab: &Lab, trial: &common::Trial) -> Result<()> {
    trial
        .expect_allocated(
            lab,
            Some(&lab.n("n1")),
            &[("gpu", &[on(lab, "gpu", "n1", "gpu-0")])],
        )
        .await
        .map(drop)
}

fn gpu(name: &str) -> common::dra::DeviceBuilder {
    device(name).attr("kind", json!("gpu"))
}

/// The usual setup: nodes `n1..` (4 cpu, 8Gi) and the class `<id>-gpu` of the scenario's driver.
async fn nodes_and_class(lab: &Lab, nodes: &[&str]) -> Result<String> {
    lab.create_nodes(nodes.iter().map(|n| lab.node(n, "4", "8Gi")))
        .await?;
    let class = lab.class("gpu");
    let name = class.name().to_owned();
    lab.create_classes([class]).await?;
    Ok(name)
}

/// A pending pod using the ResourceClaim `claim` as pod claim `gpu`.
fn claim_pod(name: &str, claim: &str) -> common::PodBuilder {
    pod(name).cpu("100m").resource_claim("gpu", claim)
}

// ---------------------------------------------------------------------------------------------
// Selectors

/// The class selects `kind == "gpu"`, the request at least 16Gi of memory: only n2's device is
/// both (n1's GPU is too small, n3's 32Gi device is an FPGA).
#[tokio::test]
async fn cel_selectors_on_class_and_request() -> Result<()> {
    let lab = begin("dra-cel").await?;
    lab.create_nodes(["n1", "n2", "n3"].map(|n| lab.node(n, "4", "8Gi")))
        .await?;
    let class = lab
        .class("gpu")
        .selector(&format!("{} == \"gpu\"", lab.attr("kind")));
    let class_name = class.name().to_owned();
    lab.create_classes([class]).await?;
    lab.create_slices([
        lab.node_slice("n1", [gpu("gpu-0").capacity("memory", "8Gi")]),
        lab.node_slice("n2", [gpu("gpu-0").capacity("memory", "16Gi")]),
        lab.node_slice(
            "n3",
            [device("fpga-0")
                .attr("kind", json!("fpga"))
                .capacity("memory", "32Gi")],
        ),
    ])
    .await?;
    lab.create_claims([claim("c").request(request("gpu", &class_name).selector(&format!(
        "{}.compareTo(quantity(\"16Gi\")) >= 0",
        lab.cap("memory")
    )))])
    .await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    trial
        .expect_allocated(
            &lab,
            Some(&lab.n("n2")),
            &[("gpu", &[on(&lab, "gpu", "n2", "gpu-0")])],
        )
        .await?;
    Ok(())
}

#[tokio::test]
async fn selector_matches_no_device() -> Result<()> {
    let lab = begin("dra-nomatch").await?;
    let class = nodes_and_class(&lab, &["n1", "n2"]).await?;
    lab.create_slices([
        lab.node_slice("n1", [gpu("gpu-0").capacity("memory", "8Gi")]),
        lab.node_slice("n2", [gpu("gpu-0").capacity("memory", "16Gi")]),
    ])
    .await?;
    lab.create_claims([claim("c").request(request("gpu", &class).selector(&format!(
        "{}.compareTo(quantity(\"64Gi\")) >= 0",
        lab.cap("memory")
    )))])
    .await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    trial.expect_failed(&["0/2 nodes are available: 2 cannot allocate all claims."])
}

/// A selector reading an attribute the device does not have: a CEL runtime error, not a mismatch.
#[tokio::test]
async fn cel_runtime_error_missing_attribute() -> Result<()> {
    let lab = begin("dra-celerr").await?;
    let class = nodes_and_class(&lab, &["n1"]).await?;
    lab.create_slices([lab.node_slice("n1", [gpu("gpu-0")])]).await?;
    lab.create_claims([
        claim("c").request(request("gpu", &class).selector(&format!("{} == \"a100\"", lab.attr("model"))))
    ])
    .await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    let on_device = format!(" on device {}/{}/gpu-0", lab.driver(), lab.n("n1"));
    let words = cel_runtime_error_words(&lab, &on_device);
    trial.expect_error(&[&format!(
        "running \"DynamicResources\" filter plugin: claim {}/c: selector #0{}: CEL runtime error: \
         no such key: model{}",
        lab.ns, words.0, words.1
    )])
}

/// What a CEL runtime error adds to the selector's number and after the error, on the control
/// plane's release: v1.37 names the device and ends the `no such key` error with a hint (`.`
/// is the hint's first character); v1.34–v1.36 add neither.
fn cel_runtime_error_words(lab: &Lab, on_device: &str) -> (String, &'static str) {
    if lab.changes().dra_cel_runtime_error_names_device {
        (on_device.to_owned(), ".")
    } else {
        eprintln!(
            "  {}: CEL runtime errors name no device",
            lab.engine.features().version
        );
        (String::new(), "")
    }
}

// ---------------------------------------------------------------------------------------------
// Allocation modes

/// `count: 2`: n1 has one GPU, n2 three; the first two of n2's are allocated.
#[tokio::test]
async fn exact_count() -> Result<()> {
    let lab = begin("dra-count").await?;
    let class = nodes_and_class(&lab, &["n1", "n2"]).await?;
    lab.create_slices([
        lab.node_slice("n1", [gpu("gpu-0")]),
        lab.node_slice("n2", ["gpu-0", "gpu-1", "gpu-2"].map(gpu)),
    ])
    .await?;
    lab.create_claims([claim("c").request(request("gpu", &class).count(2))])
        .await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    trial
        .expect_allocated(
            &lab,
            Some(&lab.n("n2")),
            &[(
                "gpu",
                &[on(&lab, "gpu", "n2", "gpu-0"), on(&lab, "gpu", "n2", "gpu-1")],
            )],
        )
        .await?;
    Ok(())
}

#[tokio::test]
async fn allocation_mode_all() -> Result<()> {
    let lab = begin("dra-all").await?;
    let class = nodes_and_class(&lab, &["n1"]).await?;
    lab.create_slices([lab.node_slice("n1", ["gpu-0", "gpu-1", "gpu-2"].map(gpu))])
        .await?;
    lab.create_claims([claim("c").request(request("gpu", &class).all())])
        .await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    trial
        .expect_allocated(
            &lab,
            Some(&lab.n("n1")),
            &[(
                "gpu",
                &["gpu-0", "gpu-1", "gpu-2"].map(|d| on(&lab, "gpu", "n1", d)),
            )],
        )
        .await?;
    Ok(())
}

/// `allocationMode: All` needs every matching device: one is allocated to another claim.
#[tokio::test]
async fn allocation_mode_all_with_one_device_taken() -> Result<()> {
    let lab = begin("dra-alltaken").await?;
    let class = nodes_and_class(&lab, &["n1"]).await?;
    lab.create_slices([lab.node_slice("n1", ["gpu-0", "gpu-1"].map(gpu))])
        .await?;
    lab.create_claims([
        claim("other").request(request("gpu", &class)),
        claim("c").request(request("gpu", &class).all()),
    ])
    .await?;
    lab.allocate_by_hand("other", Some(&lab.n("n1")), &[("gpu", &lab.n("n1"), "gpu-1")])
        .await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    trial.expect_failed(&["0/1 nodes are available: 1 cannot allocate all claims."])
}

/// The only device is held by a claim kube-scheduler allocated for an earlier pod.
#[tokio::test]
async fn device_already_allocated() -> Result<()> {
    let lab = begin("dra-taken").await?;
    let class = nodes_and_class(&lab, &["n1", "n2"]).await?;
    lab.create_slices([lab.node_slice("n1", [gpu("gpu-0")])]).await?;
    lab.create_claims([
        claim("first").request(request("gpu", &class)),
        claim("c").request(request("gpu", &class)),
    ])
    .await?;
    lab.schedule_first(claim_pod("first", "first")).await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    trial.expect_failed(&["0/2 nodes are available: 2 cannot allocate all claims."])
}

// ---------------------------------------------------------------------------------------------
// Prioritized list (firstAvailable)

/// No device matches the first choice: the second subrequest is allocated (`gpu/small`).
#[tokio::test]
async fn first_available_falls_back() -> Result<()> {
    let lab = begin("dra-first").await?;
    let class = nodes_and_class(&lab, &["n1"]).await?;
    lab.create_slices([lab.node_slice("n1", [device("small-0").attr("size", json!("small"))])])
        .await?;
    let size = |s: &str| format!("{} == \"{s}\"", lab.attr("size"));
    lab.create_claims([claim("c").raw_request(first_available(
        "gpu",
        &[
            request("big", &class).selector(&size("big")),
            request("small", &class).selector(&size("small")),
        ],
    ))])
    .await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    trial
        .expect_allocated(
            &lab,
            Some(&lab.n("n1")),
            &[("gpu", &[on(&lab, "gpu/small", "n1", "small-0")])],
        )
        .await?;
    Ok(())
}

/// n1 can only serve the second choice, n2 the first: DynamicResources scores n2 higher.
#[tokio::test]
async fn first_available_prefers_the_first_choice() -> Result<()> {
    let lab = begin("dra-firstscore").await?;
    let class = nodes_and_class(&lab, &["n1", "n2"]).await?;
    lab.create_slices([
        lab.node_slice("n1", [device("small-0").attr("size", json!("small"))]),
        lab.node_slice("n2", [device("big-0").attr("size", json!("big"))]),
    ])
    .await?;
    let size = |s: &str| format!("{} == \"{s}\"", lab.attr("size"));
    lab.create_claims([claim("c").raw_request(first_available(
        "gpu",
        &[
            request("big", &class).selector(&size("big")),
            request("small", &class).selector(&size("small")),
        ],
    ))])
    .await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    if !lab.changes().dynamic_resources_scores {
        // No DynamicResources Score before v1.35: the two nodes tie.
        eprintln!("  no DynamicResources Score on {}", lab.engine.features().version);
        trial.expect_bound(None)?;
        ensure!(
            trial.ours.selected.len() == 2,
            "dra-firstscore: without DynamicResources' Score both nodes tie; sched-core selected {:?}",
            trial.ours.selected
        );
        return Ok(());
    }
    trial
        .expect_allocated(
            &lab,
            Some(&lab.n("n2")),
            &[("gpu", &[on(&lab, "gpu/big", "n2", "big-0")])],
        )
        .await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Admin access

/// An admin-access request (in a namespace labelled for it) gets a device another claim holds.
#[tokio::test]
async fn admin_access_to_an_allocated_device() -> Result<()> {
    let lab = begin("dra-admin").await?;
    lab.label_namespace("resource.kubernetes.io/admin-access", "true")
        .await?;
    let class = nodes_and_class(&lab, &["n1"]).await?;
    lab.create_slices([lab.node_slice("n1", [gpu("gpu-0")])]).await?;
    lab.create_claims([
        claim("other").request(request("gpu", &class)),
        claim("c").request(request("gpu", &class).admin_access()),
    ])
    .await?;
    lab.allocate_by_hand("other", Some(&lab.n("n1")), &[("gpu", &lab.n("n1"), "gpu-0")])
        .await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    let expected = [("gpu", &[on(&lab, "gpu", "n1", "gpu-0")][..])];
    let kube = trial.kube_allocated(&lab, Some(&lab.n("n1")), &expected).await?;
    ensure!(
        kube[0].allocation["devices"]["results"][0]["adminAccess"] == json!(true),
        "no adminAccess in {}",
        kube[0].allocation
    );
    trial.expect_devices(&kube, &expected)
}

/// Not a scheduling scenario: the API server refuses admin access outside a labelled namespace
/// (recorded so that sched-core never has to handle such a claim).
#[tokio::test]
async fn admin_access_needs_a_labelled_namespace() -> Result<()> {
    let lab = begin("dra-adminns").await?;
    let class = nodes_and_class(&lab, &["n1"]).await?;
    let refused = lab
        .try_create_claim(claim("c").request(request("gpu", &class).admin_access()))
        .await?;
    eprintln!("[differential] dra-adminns: the API server says {refused:?}");
    let Err(kube::Error::Api(status)) = refused else {
        bail!("the API server accepted an admin-access claim in an unlabelled namespace");
    };
    ensure!(status.message.contains("admin-access"), "{}", status.message);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Constraints

fn numa_gpu(name: &str, numa: i64) -> common::dra::DeviceBuilder {
    gpu(name).attr("numa", json!(numa))
}

/// Two requests whose devices must share `numa`: only n2 has two GPUs on one NUMA node.
#[tokio::test]
async fn match_attribute_constraint() -> Result<()> {
    let lab = begin("dra-match").await?;
    let class = nodes_and_class(&lab, &["n1", "n2"]).await?;
    lab.create_slices([
        lab.node_slice("n1", [numa_gpu("gpu-0", 0), numa_gpu("gpu-1", 1)]),
        lab.node_slice("n2", [numa_gpu("gpu-0", 1), numa_gpu("gpu-1", 1)]),
    ])
    .await?;
    lab.create_claims([claim("c")
        .request(request("a", &class))
        .request(request("b", &class))
        .match_attribute(&format!("{}/numa", lab.driver()), &[])])
        .await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    trial
        .expect_allocated(
            &lab,
            Some(&lab.n("n2")),
            &[(
                "gpu",
                &[on(&lab, "a", "n2", "gpu-0"), on(&lab, "b", "n2", "gpu-1")],
            )],
        )
        .await?;
    Ok(())
}

#[tokio::test]
async fn match_attribute_unsatisfiable() -> Result<()> {
    let lab = begin("dra-nomatchattr").await?;
    let class = nodes_and_class(&lab, &["n1"]).await?;
    lab.create_slices([lab.node_slice("n1", [numa_gpu("gpu-0", 0), numa_gpu("gpu-1", 1)])])
        .await?;
    lab.create_claims([claim("c")
        .request(request("a", &class))
        .request(request("b", &class))
        .match_attribute(&format!("{}/numa", lab.driver()), &["a", "b"])])
        .await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    trial.expect_failed(&["0/1 nodes are available: 1 cannot allocate all claims."])
}

// ---------------------------------------------------------------------------------------------
// Partitionable devices (shared counters)

/// n1's pool: a counter set of 8Gi (its own slice) and a full GPU (8Gi) with two 4Gi partitions.
async fn partitionable_pool(lab: &Lab) -> Result<String> {
    let class = nodes_and_class(lab, &["n1"]).await?;
    let pool = lab.n("n1");
    let set = "gpu-0-counters";
    lab.create_slices([
        lab.slice("n1-counters")
            .node(&pool)
            .pool(&pool, 1, 2)
            .counter_set(set, &[("memory", "8Gi")]),
        lab.slice("n1-devices").node(&pool).pool(&pool, 1, 2).devices([
            gpu("gpu-0")
                .attr("part", json!(false))
                .consumes(set, &[("memory", "8Gi")]),
            gpu("gpu-0-a")
                .attr("part", json!(true))
                .consumes(set, &[("memory", "4Gi")]),
            gpu("gpu-0-b")
                .attr("part", json!(true))
                .consumes(set, &[("memory", "4Gi")]),
        ]),
    ])
    .await?;
    Ok(class)
}

/// One partition is allocated: the whole GPU's counters are no longer available.
#[tokio::test]
async fn partitionable_counters_exhausted() -> Result<()> {
    let lab = begin("dra-counters").await?;
    let class = partitionable_pool(&lab).await?;
    let part = |yes: bool| format!("{} == {yes}", lab.attr("part"));
    lab.create_claims([
        claim("first").request(request("gpu", &class).selector(&part(true))),
        claim("c").request(request("gpu", &class).selector(&part(false))),
    ])
    .await?;
    lab.schedule_first(claim_pod("first", "first")).await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    if !gate_on(
        &lab,
        "DRAPartitionableDevices",
        lab.engine.features().dra_partitionable_devices,
    ) {
        // The counters are not read (the API server drops them): the whole GPU is free.
        return trial.expect_bound(Some(&lab.n("n1")));
    }
    trial.expect_failed(&["0/1 nodes are available: 1 cannot allocate all claims."])
}

/// One partition is allocated: the other one still fits in the counters.
#[tokio::test]
async fn partitionable_second_partition_fits() -> Result<()> {
    let lab = begin("dra-partition").await?;
    let class = partitionable_pool(&lab).await?;
    let part = format!("{} == true", lab.attr("part"));
    lab.create_claims([
        claim("first").request(request("gpu", &class).selector(&part)),
        claim("c").request(request("gpu", &class).selector(&part)),
    ])
    .await?;
    lab.schedule_first(claim_pod("first", "first")).await?;
    let first = lab.kube_allocations("first").await?;
    eprintln!("  setup: {first:?}");
    let trial = lab.trial(claim_pod("p", "c")).await?;
    trial
        .expect_allocated(
            &lab,
            Some(&lab.n("n1")),
            &[("gpu", &[on(&lab, "gpu", "n1", "gpu-0-b")])],
        )
        .await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Consumable capacity

/// n1: one GPU of 8Gi that several claims may share, in steps of 1Gi; a first pod took 6Gi.
async fn shared_gpu_with_6gi_taken(lab: &Lab, request_gi: &str) -> Result<()> {
    let class = nodes_and_class(lab, &["n1"]).await?;
    lab.create_slices([lab.node_slice(
        "n1",
        [gpu("gpu-0").shareable().capacity_policy(
            "memory",
            "8Gi",
            json!({"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}),
        )],
    )])
    .await?;
    lab.create_claims([
        claim("first").request(request("gpu", &class).capacity("memory", "6Gi")),
        claim("c").request(request("gpu", &class).capacity("memory", request_gi)),
    ])
    .await?;
    lab.schedule_first(claim_pod("first", "first")).await?;
    Ok(())
}

/// A second claim gets a share of the same device; the share records the rounded amount.
#[tokio::test]
async fn consumable_capacity_shared_device() -> Result<()> {
    let lab = begin("dra-capacity").await?;
    // 1025Mi, rounded up to the 1Gi step: a 2Gi share, which still fits (6Gi + 2Gi = 8Gi).
    shared_gpu_with_6gi_taken(&lab, "1025Mi").await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    if !gate_on(
        &lab,
        "DRAConsumableCapacity",
        lab.engine.features().dra_consumable_capacity,
    ) {
        // The device cannot be shared: the first pod holds it whole.
        return trial.expect_failed(&["0/1 nodes are available: 1 cannot allocate all claims."]);
    }
    let expected = [("gpu", &[on(&lab, "gpu", "n1", "gpu-0")][..])];
    let kube = trial.kube_allocated(&lab, Some(&lab.n("n1")), &expected).await?;
    let result = &kube[0].allocation["devices"]["results"][0];
    eprintln!("  the share: {result}");
    ensure!(
        result["shareID"].is_string() && result["consumedCapacity"]["memory"] == json!("2Gi"),
        "expected a share of 2Gi: {result}"
    );
    trial.expect_devices(&kube, &expected)
}

#[tokio::test]
async fn consumable_capacity_exceeded() -> Result<()> {
    let lab = begin("dra-capfull").await?;
    shared_gpu_with_6gi_taken(&lab, "3Gi").await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    trial.expect_failed(&["0/1 nodes are available: 1 cannot allocate all claims."])
}

/// 2049Mi is rounded up to the policy's 1Gi step: 3Gi do not fit next to the 6Gi taken (2049Mi
/// alone would).
#[tokio::test]
async fn consumable_capacity_rounds_up_to_the_step() -> Result<()> {
    let lab = begin("dra-capstep").await?;
    shared_gpu_with_6gi_taken(&lab, "2049Mi").await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    trial.expect_failed(&["0/1 nodes are available: 1 cannot allocate all claims."])
}

// ---------------------------------------------------------------------------------------------
// Device taints

const BROKEN: &str = "example.com/broken";

#[tokio::test]
async fn device_taint_not_tolerated() -> Result<()> {
    let lab = begin("dra-taint").await?;
    let class = nodes_and_class(&lab, &["n1"]).await?;
    lab.create_slices([lab.node_slice("n1", [gpu("gpu-0").taint(BROKEN, "true", "NoSchedule")])])
        .await?;
    lab.create_claims([claim("c").request(request("gpu", &class))])
        .await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    if !gate_on(&lab, "DRADeviceTaints", lab.engine.features().dra_device_taints) {
        // Device taints are ignored: the tainted GPU is allocated.
        return expect_gpu_0_on_n1(&lab, &trial).await;
    }
    trial.expect_failed(&["0/1 nodes are available: 1 cannot allocate all claims."])
}

/// A DeviceTaintRule taints n1's only GPU (the slice has no taint): the device is not allocated.
#[tokio::test]
async fn device_taint_rule() -> Result<()> {
    let lab = begin("dra-taintrule").await?;
    let release = lab.engine.features().version;
    if !runnable_on(
        &lab,
        "its kube-scheduler reads no resource.k8s.io/v1 DeviceTaintRule (v1.37 on)",
        sched_core::features::api_versions::scheduler_reads_at(
            release,
            "DeviceTaintRule",
            "resource.k8s.io/v1",
        ),
    ) {
        return Ok(());
    }
    let class = nodes_and_class(&lab, &["n1"]).await?;
    lab.create_slices([lab.node_slice("n1", [gpu("gpu-0")])]).await?;
    let created = lab
        .try_create_taint_rule(
            "broken",
            &lab.n("n1"),
            "gpu-0",
            json!({"key": BROKEN, "value": "true", "effect": "NoSchedule"}),
        )
        .await?;
    if let Err(e) = created {
        bail!("dra-taintrule: the API server refused the DeviceTaintRule: {e}");
    }
    lab.create_claims([claim("c").request(request("gpu", &class))])
        .await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    trial.expect_failed(&["0/1 nodes are available: 1 cannot allocate all claims."])
}

/// The only GPU is tainted: a request tolerating the taint gets it.
#[tokio::test]
async fn device_taint_tolerated() -> Result<()> {
    let lab = begin("dra-tolerate").await?;
    let class = nodes_and_class(&lab, &["n1"]).await?;
    lab.create_slices([lab.node_slice("n1", [gpu("gpu-0").taint(BROKEN, "true", "NoSchedule")])])
        .await?;
    lab.create_claims([claim("c")
        .request(request("gpu", &class).toleration(
            json!({"key": BROKEN, "operator": "Equal", "value": "true", "effect": "NoSchedule"}),
        ))])
    .await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    expect_gpu_0_on_n1(&lab, &trial).await
}

// ---------------------------------------------------------------------------------------------
// Binding conditions

const READY: &str = "example.com/ready";
const FAILED: &str = "example.com/failed";

/// n1 with a GPU that has binding conditions; a pod using it. kube-scheduler allocates the device
/// and waits in PreBind for the (absent) driver: the trial must see it silent with the allocation
/// written (binding conditions copied). Then the scenario reports `condition` as the driver
/// would, and returns the trial and kube-scheduler's final verdict.
async fn binding_condition_reported(
    lab: &Lab,
    condition: &str,
) -> Result<(common::Trial, Verdict, Vec<KubeAllocation>)> {
    device_with_binding_conditions(lab).await?;
    let trial = lab
        .trial_with(claim_pod("p", "c"), Duration::from_secs(8))
        .await?;
    trial.report();
    ensure!(
        matches!(trial.kube, Verdict::Silent { .. }),
        "{}: kube-scheduler should wait for the binding condition: {:?}",
        trial.scenario,
        trial.kube
    );
    let waiting = lab.kube_allocations("p").await?;
    let [allocation] = waiting.as_slice() else {
        bail!("kube-scheduler allocated no claim while waiting: {waiting:?}");
    };
    eprintln!("  allocated while waiting: {}", allocation.allocation);
    ensure!(
        allocation.allocation["devices"]["results"][0]["bindingConditions"] == json!([READY]),
        "the allocation carries no binding conditions: {}",
        allocation.allocation
    );
    let claims: kube::Api<k8s_openapi::api::resource::v1::ResourceClaim> =
        kube::Api::namespaced(lab.client.clone(), &lab.ns);
    let reserved_for = claims.get("c").await?.status.and_then(|s| s.reserved_for);
    lab.write_claim_status(
        "c",
        json!({
            "allocation": allocation.allocation,
            "reservedFor": reserved_for,
            "devices": [{
                "driver": lab.driver(),
                "pool": lab.n("n1"),
                "device": "gpu-0",
                "conditions": [{
                    "type": condition, "status": "True", "reason": "Reported", "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }],
            }],
        }),
    )
    .await?;
    let verdict = lab.wait_verdict(&trial.pod).await?;
    eprintln!("  once {condition} was reported, kube-scheduler: {verdict:?}");
    Ok((trial, verdict, waiting))
}

/// n1 with a GPU that has binding conditions; a claim `c` for it.
async fn device_with_binding_conditions(lab: &Lab) -> Result<()> {
    let class = nodes_and_class(lab, &["n1"]).await?;
    lab.create_slices([lab.node_slice(
        "n1",
        [gpu("gpu-0")
            .field("bindingConditions", json!([READY]))
            .field("bindingFailureConditions", json!([FAILED]))],
    )])
    .await?;
    lab.create_claims([claim("c").request(request("gpu", &class))])
        .await
}

/// With DRADeviceBindingConditions (or DRAResourceClaimDeviceStatus) off the binding conditions
/// are not read: the pod is bound to n1 at once. `None` when both gates are on.
async fn bound_without_binding_conditions(lab: &Lab) -> Option<Result<()>> {
    let features = lab.engine.features();
    let on = features.dra_device_binding_conditions && features.dra_resource_claim_device_status;
    if gate_on(lab, "DRADeviceBindingConditions/DRAResourceClaimDeviceStatus", on) {
        return None;
    }
    let bound = async {
        device_with_binding_conditions(lab).await?;
        let trial = lab.trial(claim_pod("p", "c")).await?;
        trial.expect_bound(Some(&lab.n("n1")))
    };
    Some(bound.await)
}

/// sched-core answers for the scheduling cycle (binding conditions are PreBind's business): it
/// must select n1, where kube-scheduler allocated and waited, and pick the device kube-scheduler
/// allocated.
fn expect_cycle_selected(trial: &common::Trial, node: &str, waiting: &[KubeAllocation]) -> Result<()> {
    ensure!(
        trial.ours.outcome == Outcome::Scheduled && trial.ours.selected.iter().any(|n| n == node),
        "MISMATCH in {}: kube-scheduler's scheduling cycle picked {node}; sched-core: {:?} {:?} \
         selected {:?}",
        trial.scenario,
        trial.ours.outcome,
        trial.ours.message,
        trial.ours.selected
    );
    let fresh: Vec<(&str, &[String])> = waiting.iter().map(|a| (a.pod_claim.as_str(), &[][..])).collect();
    compare_allocations(trial, node, waiting, &fresh)
}

/// The driver reports the binding condition: the pod is bound.
#[tokio::test]
async fn binding_conditions_met() -> Result<()> {
    let lab = begin("dra-binding").await?;
    if let Some(off) = bound_without_binding_conditions(&lab).await {
        return off;
    }
    let (trial, verdict, waiting) = binding_condition_reported(&lab, READY).await?;
    ensure!(
        verdict == Verdict::Bound(lab.n("n1")),
        "dra-binding: kube-scheduler: {verdict:?}"
    );
    expect_cycle_selected(&trial, &lab.n("n1"), &waiting)
}

/// The driver reports a binding failure condition: PreBind fails (kube-scheduler's message is
/// recorded; it is not a scheduling-cycle verdict sched-core could give).
#[tokio::test]
async fn binding_failure_condition() -> Result<()> {
    let lab = begin("dra-bindfail").await?;
    if let Some(off) = bound_without_binding_conditions(&lab).await {
        return off;
    }
    let (trial, verdict, waiting) = binding_condition_reported(&lab, FAILED).await?;
    let Verdict::Failed(message) = &verdict else {
        bail!("dra-bindfail: expected FailedScheduling, kube-scheduler: {verdict:?}");
    };
    ensure!(
        message.starts_with(
            "running PreBind plugin \"DynamicResources\": device binding failed: claim=c, \
             reason=Reported"
        ),
        "dra-bindfail: kube-scheduler's message {message:?} is not about the binding failure"
    );
    expect_cycle_selected(&trial, &lab.n("n1"), &waiting)
}

// ---------------------------------------------------------------------------------------------
// Extended resources backed by DRA

/// `<id>.example.com/gpu`, the extended resource name of the scenario's class.
fn extended(lab: &Lab) -> String {
    format!("{}.example.com/gpu", lab.n("er"))
}

/// With DRAExtendedResource off no class backs an extended resource: NodeResourcesFit finds too
/// little of `resource` on every node that does not advertise enough. `None` when the gate is on.
fn without_dra_extended_resource(lab: &Lab, trial: &common::Trial, resource: &str) -> Option<Result<()>> {
    (!gate_on(
        lab,
        "DRAExtendedResource",
        lab.engine.features().dra_extended_resource,
    ))
    .then(|| trial.expect_failed(&[&format!("Insufficient {resource}")]))
}

/// No node advertises the extended resource: the class maps it to devices, kube-scheduler makes a
/// claim for the pod and allocates it.
#[tokio::test]
async fn extended_resource_backed_by_dra() -> Result<()> {
    let lab = begin("dra-er").await?;
    lab.create_nodes([lab.node("n1", "4", "8Gi")]).await?;
    lab.create_classes([lab.class("gpu").extended_resource(&extended(&lab))])
        .await?;
    lab.create_slices([lab.node_slice("n1", ["gpu-0", "gpu-1"].map(gpu))])
        .await?;
    let trial = lab
        .trial(pod("p").cpu("100m").limit(&extended(&lab), "1"))
        .await?;
    if let Some(off) = without_dra_extended_resource(&lab, &trial, &extended(&lab)) {
        return off;
    }
    trial
        .expect_allocated(
            &lab,
            Some(&lab.n("n1")),
            &[(
                EXTENDED_RESOURCES,
                &[on(&lab, "container-0-request-1", "n1", "gpu-0")],
            )],
        )
        .await?;
    Ok(())
}

/// n1 advertises one unit in its allocatable (NodeResourcesFit counts it there), n2 has two
/// devices of the class: a pod asking for two goes to n2, with two devices.
#[tokio::test]
async fn extended_resource_node_allocatable_or_dra() -> Result<()> {
    let lab = begin("dra-ernode").await?;
    lab.create_nodes([
        lab.node("n1", "4", "8Gi").resource(&extended(&lab), "1"),
        lab.node("n2", "4", "8Gi"),
    ])
    .await?;
    lab.create_classes([lab.class("gpu").extended_resource(&extended(&lab))])
        .await?;
    lab.create_slices([lab.node_slice("n2", ["gpu-0", "gpu-1"].map(gpu))])
        .await?;
    let trial = lab
        .trial(pod("p").cpu("100m").limit(&extended(&lab), "2"))
        .await?;
    if let Some(off) = without_dra_extended_resource(&lab, &trial, &extended(&lab)) {
        return off;
    }
    trial
        .expect_allocated(
            &lab,
            Some(&lab.n("n2")),
            &[(
                EXTENDED_RESOURCES,
                &[
                    on(&lab, "container-0-request-1", "n2", "gpu-0"),
                    on(&lab, "container-0-request-1", "n2", "gpu-1"),
                ],
            )],
        )
        .await?;
    Ok(())
}

/// Neither n1's allocatable (one unit) nor n2's devices (one) cover two units.
#[tokio::test]
async fn extended_resource_insufficient() -> Result<()> {
    let lab = begin("dra-erfull").await?;
    lab.create_nodes([
        lab.node("n1", "4", "8Gi").resource(&extended(&lab), "1"),
        lab.node("n2", "4", "8Gi"),
    ])
    .await?;
    lab.create_classes([lab.class("gpu").extended_resource(&extended(&lab))])
        .await?;
    lab.create_slices([lab.node_slice("n2", [gpu("gpu-0")])]).await?;
    let trial = lab
        .trial(pod("p").cpu("100m").limit(&extended(&lab), "2"))
        .await?;
    if let Some(off) = without_dra_extended_resource(&lab, &trial, &extended(&lab)) {
        return off;
    }
    trial.expect_failed(&[&format!(
        "0/2 nodes are available: 1 Insufficient {}, 1 cannot allocate all claims.",
        extended(&lab)
    )])
}

/// A node that advertises the extended resource in its allocatable is not served by DRA, even
/// with devices of the class: one unit in the allocatable, two devices, a pod asking for two.
#[tokio::test]
async fn extended_resource_allocatable_shadows_devices() -> Result<()> {
    let lab = begin("dra-ershadow").await?;
    lab.create_nodes([lab.node("n1", "4", "8Gi").resource(&extended(&lab), "1")])
        .await?;
    lab.create_classes([lab.class("gpu").extended_resource(&extended(&lab))])
        .await?;
    lab.create_slices([lab.node_slice("n1", ["gpu-0", "gpu-1"].map(gpu))])
        .await?;
    let trial = lab
        .trial(pod("p").cpu("100m").limit(&extended(&lab), "2"))
        .await?;
    trial.expect_failed(&[&format!(
        "0/1 nodes are available: 1 Insufficient {}.",
        extended(&lab)
    )])
}

/// Every class is also reachable as `deviceclass.resource.kubernetes.io/<class>`.
#[tokio::test]
async fn implicit_extended_resource_name() -> Result<()> {
    let lab = begin("dra-erimplicit").await?;
    let class = nodes_and_class(&lab, &["n1"]).await?;
    lab.create_slices([lab.node_slice("n1", [gpu("gpu-0")])]).await?;
    let resource = format!("deviceclass.resource.kubernetes.io/{class}");
    let trial = lab.trial(pod("p").cpu("100m").limit(&resource, "1")).await?;
    if let Some(off) = without_dra_extended_resource(&lab, &trial, &resource) {
        return off;
    }
    trial
        .expect_allocated(
            &lab,
            Some(&lab.n("n1")),
            &[(
                EXTENDED_RESOURCES,
                &[on(&lab, "container-0-request-1", "n1", "gpu-0")],
            )],
        )
        .await?;
    Ok(())
}

/// Two containers asking for the extended resource: one claim with a request per container.
#[tokio::test]
async fn extended_resource_two_containers() -> Result<()> {
    let lab = begin("dra-ertwo").await?;
    lab.create_nodes([lab.node("n1", "4", "8Gi")]).await?;
    lab.create_classes([lab.class("gpu").extended_resource(&extended(&lab))])
        .await?;
    lab.create_slices([lab.node_slice("n1", ["gpu-0", "gpu-1", "gpu-2"].map(gpu))])
        .await?;
    let container = |name: &str, gpus: &str| {
        json!({"name": name, "image": common::PAUSE_IMAGE, "resources": {
            "requests": {"cpu": "100m"},
            "limits": {extended(&lab): gpus},
        }})
    };
    let pending = pod("p").spec("containers", json!([container("a", "1"), container("b", "2")]));
    let trial = lab.trial(pending).await?;
    if let Some(off) = without_dra_extended_resource(&lab, &trial, &extended(&lab)) {
        return off;
    }
    trial
        .expect_allocated(
            &lab,
            Some(&lab.n("n1")),
            &[(
                EXTENDED_RESOURCES,
                &[
                    on(&lab, "container-0-request-1", "n1", "gpu-0"),
                    on(&lab, "container-1-request-1", "n1", "gpu-1"),
                    on(&lab, "container-1-request-1", "n1", "gpu-2"),
                ],
            )],
        )
        .await?;
    Ok(())
}

/// A pod with a ResourceClaim and the extended resource of the same class: two different devices.
#[tokio::test]
async fn extended_resource_and_claim_in_one_pod() -> Result<()> {
    let lab = begin("dra-erclaim").await?;
    lab.create_nodes([lab.node("n1", "4", "8Gi")]).await?;
    let class = lab.class("gpu").extended_resource(&extended(&lab));
    let class_name = class.name().to_owned();
    lab.create_classes([class]).await?;
    lab.create_slices([lab.node_slice("n1", ["gpu-0", "gpu-1"].map(gpu))])
        .await?;
    lab.create_claims([claim("c").request(request("gpu", &class_name))])
        .await?;
    let trial = lab.trial(claim_pod("p", "c").limit(&extended(&lab), "1")).await?;
    if let Some(off) = without_dra_extended_resource(&lab, &trial, &extended(&lab)) {
        return off;
    }
    trial
        .expect_allocated(
            &lab,
            Some(&lab.n("n1")),
            &[
                ("gpu", &[on(&lab, "gpu", "n1", "gpu-0")]),
                (
                    EXTENDED_RESOURCES,
                    &[on(&lab, "container-0-request-1", "n1", "gpu-1")],
                ),
            ],
        )
        .await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Claims and templates

/// kube-controller-manager makes the claim from the template; kube-scheduler allocates it.
#[tokio::test]
async fn claim_template() -> Result<()> {
    let lab = begin("dra-template").await?;
    let class = nodes_and_class(&lab, &["n1", "n2"]).await?;
    lab.create_slices([lab.node_slice("n2", [gpu("gpu-0")])]).await?;
    lab.create_template("one-gpu", &claim("t").request(request("gpu", &class)))
        .await?;
    let trial = lab
        .trial_generated(pod("p").cpu("100m").claim_template("gpu", "one-gpu"))
        .await?;
    trial
        .expect_allocated(
            &lab,
            Some(&lab.n("n2")),
            &[("gpu", &[on(&lab, "gpu", "n2", "gpu-0")])],
        )
        .await?;
    Ok(())
}

/// The template does not exist, so no claim is made: DynamicResources' PreEnqueue holds the pod
/// (no event, no condition). sched-core should say Gated with the PreEnqueue message.
#[tokio::test]
async fn claim_template_without_claim() -> Result<()> {
    let lab = begin("dra-notemplate").await?;
    nodes_and_class(&lab, &["n1"]).await?;
    let trial = lab
        .trial_silent(pod("p").cpu("100m").claim_template("gpu", "missing"))
        .await?;
    trial.report();
    ensure!(
        matches!(&trial.kube, Verdict::Silent { reason: None, .. }),
        "kube-scheduler: {:?}",
        trial.kube
    );
    let expected = format!("pod \"{}/p\": ResourceClaim not created yet", lab.ns);
    ensure!(
        trial.ours.outcome == Outcome::Gated && trial.ours.message == expected,
        "MISMATCH in dra-notemplate: kube-scheduler holds the pod in PreEnqueue \
         (DynamicResources: {expected:?}); sched-core: {:?} {:?}",
        trial.ours.outcome,
        trial.ours.message
    );
    Ok(())
}

#[tokio::test]
async fn missing_device_class() -> Result<()> {
    let lab = begin("dra-noclass").await?;
    nodes_and_class(&lab, &["n1"]).await?;
    lab.create_slices([lab.node_slice("n1", [gpu("gpu-0")])]).await?;
    lab.create_claims([claim("c").request(request("gpu", &lab.n("missing")))])
        .await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    trial.expect_failed(&[&format!(
        "0/1 nodes are available: request gpu: device class {} does not exist.",
        lab.n("missing")
    )])
}

/// A claim being deleted (held by a finalizer): DynamicResources' PreEnqueue holds the pod.
#[tokio::test]
async fn claim_being_deleted() -> Result<()> {
    let lab = begin("dra-deleting").await?;
    let class = nodes_and_class(&lab, &["n1"]).await?;
    lab.create_slices([lab.node_slice("n1", [gpu("gpu-0")])]).await?;
    lab.create_claims([claim("c")
        .request(request("gpu", &class))
        .finalizer("e2e.example.com/hold")])
        .await?;
    lab.delete_claim("c").await?;
    let trial = lab.trial_silent(claim_pod("p", "c")).await?;
    trial.report();
    ensure!(
        matches!(&trial.kube, Verdict::Silent { reason: None, .. }),
        "kube-scheduler: {:?}",
        trial.kube
    );
    let expected = "resourceclaim \"c\" is being deleted";
    ensure!(
        trial.ours.outcome == Outcome::Gated && trial.ours.message == expected,
        "MISMATCH in dra-deleting: kube-scheduler holds the pod in PreEnqueue \
         (DynamicResources: {expected:?}); sched-core: {:?} {:?}",
        trial.ours.outcome,
        trial.ours.message
    );
    Ok(())
}

/// The pod's node selector rules out the node with the device: both reasons in the message.
#[tokio::test]
async fn node_selector_and_claim() -> Result<()> {
    let lab = begin("dra-nodesel").await?;
    lab.create_nodes([
        lab.node("n1", "4", "8Gi").label("example.com/pool", "x"),
        lab.node("n2", "4", "8Gi").label("example.com/pool", "y"),
    ])
    .await?;
    let class = lab.class("gpu");
    let class_name = class.name().to_owned();
    lab.create_classes([class]).await?;
    lab.create_slices([lab.node_slice("n1", [gpu("gpu-0")])]).await?;
    lab.create_claims([claim("c").request(request("gpu", &class_name))])
        .await?;
    let pending = claim_pod("p", "c").spec("nodeSelector", json!({"example.com/pool": "y"}));
    let trial = lab.trial(pending).await?;
    trial.expect_failed(&[
        "0/2 nodes are available: 1 cannot allocate all claims, 1 node(s) didn't match Pod's node \
         affinity/selector.",
    ])
}

/// The class's own selector reads a missing attribute: the CEL runtime error names the class.
#[tokio::test]
async fn cel_runtime_error_in_class() -> Result<()> {
    let lab = begin("dra-classerr").await?;
    lab.create_nodes([lab.node("n1", "4", "8Gi")]).await?;
    let class = lab
        .class("gpu")
        .selector(&format!("{} == \"a100\"", lab.attr("model")));
    let class_name = class.name().to_owned();
    lab.create_classes([class]).await?;
    lab.create_slices([lab.node_slice("n1", [gpu("gpu-0")])]).await?;
    lab.create_claims([claim("c").request(request("gpu", &class_name))])
        .await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    // Selector #0 is the class's driver selector (see `Lab::class`).
    let on_device = format!(" on device {}/{}/gpu-0", lab.driver(), lab.n("n1"));
    let words = cel_runtime_error_words(&lab, &on_device);
    trial.expect_error(&[&format!(
        "running \"DynamicResources\" filter plugin: class {class_name}: selector #1{}: CEL runtime \
         error: no such key: model{}",
        words.0, words.1
    )])
}

/// Two generations of one pool (one slice each): only the newest counts.
async fn two_generations(lab: &Lab, generation: i64) -> Result<common::Trial> {
    let class = nodes_and_class(lab, &["n1"]).await?;
    let pool = lab.n("n1");
    lab.create_slices([
        lab.slice("old")
            .node(&pool)
            .pool(&pool, 1, 1)
            .device(gpu("gpu-old").attr("gen", json!(1))),
        lab.slice("new")
            .node(&pool)
            .pool(&pool, 2, 1)
            .device(gpu("gpu-new").attr("gen", json!(2))),
    ])
    .await?;
    lab.create_claims([
        claim("c").request(request("gpu", &class).selector(&format!("{} == {generation}", lab.attr("gen"))))
    ])
    .await?;
    lab.trial(claim_pod("p", "c")).await
}

/// The device of generation 1 is gone.
#[tokio::test]
async fn pool_generation_old_device_is_gone() -> Result<()> {
    let lab = begin("dra-oldgen").await?;
    let trial = two_generations(&lab, 1).await?;
    trial.expect_failed(&["0/1 nodes are available: 1 cannot allocate all claims."])
}

/// The device of generation 2 is there (the pool is complete at its newest generation).
#[tokio::test]
async fn pool_generation_new_device_is_used() -> Result<()> {
    let lab = begin("dra-newgen").await?;
    let trial = two_generations(&lab, 2).await?;
    trial
        .expect_allocated(
            &lab,
            Some(&lab.n("n1")),
            &[("gpu", &[on(&lab, "gpu", "n1", "gpu-new")])],
        )
        .await?;
    Ok(())
}

/// A claim already reserved for the maximum number of consumers (256, non-pod ones, which
/// kube-controller-manager leaves alone). kube-scheduler v1.37.2 has no "resourceclaim in use"
/// check any more (`resourceclaim.CanBeReserved` is always true): the scheduling cycle picks n1,
/// and only PreBind fails, when the API server refuses a 257th `reservedFor` entry. sched-core
/// answers for the scheduling cycle, so it must select n1.
#[tokio::test]
async fn claim_reserved_for_256_consumers() -> Result<()> {
    let lab = begin("dra-inuse").await?;
    let class = nodes_and_class(&lab, &["n1"]).await?;
    lab.create_slices([lab.node_slice("n1", [gpu("gpu-0")])]).await?;
    lab.create_claims([claim("c").request(request("gpu", &class))])
        .await?;
    let consumers: Vec<serde_json::Value> = (0..256)
        .map(|i| {
            json!({"apiGroup": "example.com", "resource": "widgets", "name": format!("w{i}"),
                   "uid": format!("00000000-0000-0000-0000-{i:012}")})
        })
        .collect();
    lab.write_claim_status(
        "c",
        json!({
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": lab.driver(),
                                         "pool": lab.n("n1"), "device": "gpu-0"}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [lab.n("n1")]},
                ]}]},
            },
            "reservedFor": consumers,
        }),
    )
    .await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    trial.report();
    let Verdict::Failed(message) = &trial.kube else {
        bail!(
            "dra-inuse: expected a PreBind failure, kube-scheduler: {:?}",
            trial.kube
        );
    };
    ensure!(
        message.starts_with(&format!(
            "running PreBind plugin \"DynamicResources\": add reservation to claim {}/c:",
            lab.ns
        )) && message.contains("must have at most 256 items"),
        "dra-inuse: kube-scheduler's message {message:?} is not the PreBind refusal"
    );
    ensure!(
        trial.ours.outcome == Outcome::Scheduled && trial.ours.selected == [lab.n("n1")],
        "MISMATCH in dra-inuse: kube-scheduler's scheduling cycle picked n1 (PreBind failed \
         later); sched-core: {:?} {:?} selected {:?}",
        trial.ours.outcome,
        trial.ours.message,
        trial.ours.selected
    );
    Ok(())
}

/// The claim is shared with a pod on n1 (allocated there); n1 has no cpu left for the second
/// pod, and on n2 the claim is not available.
#[tokio::test]
async fn shared_claim_allocated_elsewhere() -> Result<()> {
    let lab = begin("dra-elsewhere").await?;
    let class = nodes_and_class(&lab, &["n1", "n2"]).await?;
    lab.create_slices([lab.node_slice("n1", [gpu("gpu-0")])]).await?;
    lab.create_claims([claim("c").request(request("gpu", &class))])
        .await?;
    lab.schedule_first(pod("first").cpu("3").resource_claim("gpu", "c"))
        .await?;
    let trial = lab.trial(pod("p").cpu("2").resource_claim("gpu", "c")).await?;
    trial.expect_failed(&[
        "0/2 nodes are available: 1 Insufficient cpu, 1 resourceclaim not available on the node.",
    ])
}

/// Two claims: a GPU and a NIC; only n2 has both.
#[tokio::test]
async fn pod_with_two_claims() -> Result<()> {
    let lab = begin("dra-twoclaims").await?;
    let gpu_class = nodes_and_class(&lab, &["n1", "n2"]).await?;
    let nic = lab
        .class("nic")
        .selector(&format!("{} == \"nic\"", lab.attr("kind")));
    let nic_class = nic.name().to_owned();
    lab.create_classes([nic]).await?;
    lab.create_slices([
        lab.node_slice("n1", [gpu("gpu-0")]),
        lab.node_slice("n2", [gpu("gpu-0"), device("nic-0").attr("kind", json!("nic"))]),
    ])
    .await?;
    lab.create_claims([
        claim("g").request(request("gpu", &gpu_class)),
        claim("n").request(request("nic", &nic_class)),
    ])
    .await?;
    let trial = lab.trial(claim_pod("p", "g").resource_claim("nic", "n")).await?;
    trial
        .expect_allocated(
            &lab,
            Some(&lab.n("n2")),
            &[
                ("gpu", &[on(&lab, "gpu", "n2", "gpu-0")]),
                ("nic", &[on(&lab, "nic", "n2", "nic-0")]),
            ],
        )
        .await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Pools

/// A pool for the nodes of rack a: only n1 is in it.
#[tokio::test]
async fn node_selector_slice() -> Result<()> {
    let lab = begin("dra-rack").await?;
    lab.create_nodes([
        lab.node("n1", "4", "8Gi").label("example.com/rack", "a"),
        lab.node("n2", "4", "8Gi").label("example.com/rack", "b"),
    ])
    .await?;
    let class = lab.class("gpu");
    let class_name = class.name().to_owned();
    lab.create_classes([class]).await?;
    lab.create_slices([lab
        .slice("rack-a")
        .node_label("example.com/rack", "a")
        .device(gpu("gpu-0"))])
        .await?;
    lab.create_claims([claim("c").request(request("gpu", &class_name))])
        .await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    let expected = [("gpu", &[format!("gpu:{}/gpu-0", lab.n("rack-a"))][..])];
    let kube = trial.kube_allocated(&lab, Some(&lab.n("n1")), &expected).await?;
    eprintln!("  allocation: {}", kube[0].allocation);
    ensure!(
        !kube[0].allocation["nodeSelector"].is_null(),
        "no node selector in {}",
        kube[0].allocation
    );
    trial.expect_devices(&kube, &expected)
}

/// `perDeviceNodeSelection`: each device of the slice says where it is reachable; the request
/// selects the device of n2.
#[tokio::test]
async fn per_device_node_selection() -> Result<()> {
    let lab = begin("dra-perdevice").await?;
    if !runnable_on(
        &lab,
        "DRAPartitionableDevices is off: the API server refuses a slice with perDeviceNodeSelection",
        lab.engine.features().dra_partitionable_devices,
    ) {
        return Ok(());
    }
    let class = nodes_and_class(&lab, &["n1", "n2"]).await?;
    lab.create_slices([lab
        .slice("fabric")
        .spec("perDeviceNodeSelection", json!(true))
        .devices([
            gpu("gpu-a")
                .attr("model", json!("a"))
                .field("nodeName", json!(lab.n("n1"))),
            gpu("gpu-b")
                .attr("model", json!("b"))
                .field("nodeName", json!(lab.n("n2"))),
        ])])
    .await?;
    lab.create_claims([
        claim("c").request(request("gpu", &class).selector(&format!("{} == \"b\"", lab.attr("model"))))
    ])
    .await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    trial
        .expect_allocated(
            &lab,
            Some(&lab.n("n2")),
            &[("gpu", &[format!("gpu:{}/gpu-b", lab.n("fabric"))])],
        )
        .await?;
    Ok(())
}

/// A claim already allocated for (and reserved by) a pod on one node: a second pod sharing it goes
/// to that node, with nothing new to allocate.
#[tokio::test]
async fn shared_claim_follows_its_allocation() -> Result<()> {
    let lab = begin("dra-follow").await?;
    let class = nodes_and_class(&lab, &["n1", "n2"]).await?;
    lab.create_slices([
        lab.node_slice("n1", [gpu("gpu-0")]),
        lab.node_slice("n2", [gpu("gpu-0")]),
    ])
    .await?;
    lab.create_claims([claim("c").request(request("gpu", &class))])
        .await?;
    let node = lab.schedule_first(claim_pod("first", "c")).await?;
    // The second pod would rather go to the other, empty node.
    let trial = lab.trial(claim_pod("p", "c").cpu("1")).await?;
    trial.expect_allocated(&lab, Some(&node), &[]).await?;
    ensure!(
        trial.ours.claim_allocations.is_empty(),
        "MISMATCH in dra-follow: the claim was already allocated; sched-core allocates {:?}",
        trial.ours.claim_allocations
    );
    Ok(())
}

/// A network-attached device reachable from every node: the least allocated node wins.
#[tokio::test]
async fn all_nodes_slice() -> Result<()> {
    let lab = begin("dra-allnodes").await?;
    let class = nodes_and_class(&lab, &["n1", "n2"]).await?;
    lab.create_pods([pod("busy").cpu("3").on(&lab.n("n1"))]).await?;
    lab.create_slices([lab.slice("fabric").all_nodes().device(gpu("gpu-0"))])
        .await?;
    lab.create_claims([claim("c").request(request("gpu", &class))])
        .await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    trial
        .expect_allocated(
            &lab,
            Some(&lab.n("n2")),
            &[("gpu", &[format!("gpu:{}/gpu-0", lab.n("fabric"))])],
        )
        .await?;
    Ok(())
}

/// The pool says it has two slices; only one is published, so its devices are not used.
#[tokio::test]
async fn incomplete_pool() -> Result<()> {
    let lab = begin("dra-incomplete").await?;
    let class = nodes_and_class(&lab, &["n1"]).await?;
    lab.create_slices([lab.node_slice("n1", [gpu("gpu-0")]).pool(&lab.n("n1"), 1, 2)])
        .await?;
    lab.create_claims([claim("c").request(request("gpu", &class))])
        .await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    if !lab.changes().dra_incomplete_pools_unusable {
        eprintln!("  v1.34's allocator takes devices from an incomplete pool");
        return expect_gpu_0_on_n1(&lab, &trial).await;
    }
    trial.expect_failed(&["0/1 nodes are available: 1 cannot allocate all claims."])
}

/// `allocationMode: All` on an incomplete pool: all devices cannot be known.
#[tokio::test]
async fn incomplete_pool_allocation_mode_all() -> Result<()> {
    let lab = begin("dra-incompleteall").await?;
    let class = nodes_and_class(&lab, &["n1"]).await?;
    lab.create_slices([lab.node_slice("n1", [gpu("gpu-0")]).pool(&lab.n("n1"), 1, 2)])
        .await?;
    lab.create_claims([claim("c").request(request("gpu", &class).all())])
        .await?;
    let trial = lab.trial(claim_pod("p", "c")).await?;
    trial.expect_error(&[&format!(
        "request gpu: asks for all devices, but resource pool {}/{} is currently being updated",
        lab.driver(),
        lab.n("n1")
    )])
}
