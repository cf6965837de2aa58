//! Differential tests: the real kube-scheduler (the pinned v1.37.2, or the release
//! `KUBECTL_SCHED_K8S_RELEASE` names) is the oracle for sched-core.
//!
//! Every scenario builds a small cluster on the shared control plane (see `common`), lets
//! kube-scheduler try the pending pod, and evaluates the same pod with sched-core on a snapshot
//! taken just before the pod was created. Unschedulable: kube-scheduler's FailedScheduling
//! message must equal sched-core's `message` byte for byte. Bound: the node must be one of
//! sched-core's `selected`. Each scenario also checks that kube-scheduler's answer really is
//! about what the scenario claims to exercise.
//!
//! Scenarios run one at a time (they share every node and pod of the cluster); the last test
//! drives the `kubectl-sched` binary through kubectl's plugin mechanism. The scenarios that show a
//! difference between releases, and a sample of plain ones, live in `common::scenarios` (their
//! docs are there), which `versions.rs` runs on every other release too.

mod common;

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use common::scenarios::{self, HOSTNAME, ZONE, bound_claim, bound_claim_with, zoned_nodes};
use common::{CSI_DRIVER, HIGH, HIGH_NEVER, LOW, Lab, PAUSE_IMAGE, Verdict, kubectl_sched_binary, pod};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use sched_core::explain::Outcome;
use serde_json::{Value, json};

fn required_anti_affinity(app: &str) -> Value {
    json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"app": app}},
        "topologyKey": HOSTNAME,
    }]}})
}

fn required_affinity(app: &str) -> Value {
    json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"app": app}},
        "topologyKey": HOSTNAME,
    }]}})
}

fn required_node_affinity(expressions: Value) -> Value {
    json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": expressions}],
    }}})
}

// ---------------------------------------------------------------------------------------------
// Resources

#[tokio::test]
async fn insufficient_cpu() -> Result<()> {
    scenarios::run("cpu").await
}

#[tokio::test]
async fn insufficient_memory() -> Result<()> {
    scenarios::run("mem").await
}

#[tokio::test]
async fn too_many_pods() -> Result<()> {
    let lab = Lab::begin("pods").await?;
    lab.create_nodes([lab.node("n1", "4", "4Gi").resource("pods", "2")])
        .await?;
    lab.create_pods([pod("a").on(&lab.n("n1")), pod("b").on(&lab.n("n1"))])
        .await?;
    let trial = lab.trial(pod("p").cpu("100m")).await?;
    trial.expect_failed(&["1 Too many pods"])
}

#[tokio::test]
async fn extended_resource() -> Result<()> {
    scenarios::run("gpu").await
}

/// A restartable init container (sidecar) runs next to the later init containers and the app:
/// the pod needs max(1 + 1.5, 0.5 + 1.5) = 2.5 cpu, which neither node has.
#[tokio::test]
async fn sidecar_and_init_container_requests() -> Result<()> {
    let lab = Lab::begin("init").await?;
    lab.create_nodes([lab.node("n1", "2", "4Gi"), lab.node("n2", "2400m", "4Gi")])
        .await?;
    let pending = pod("p").cpu("500m").spec(
        "initContainers",
        json!([
            {"name": "sidecar", "image": PAUSE_IMAGE, "restartPolicy": "Always",
             "resources": {"requests": {"cpu": "1500m"}}},
            {"name": "init", "image": PAUSE_IMAGE, "resources": {"requests": {"cpu": "1"}}},
        ]),
    );
    let trial = lab.trial(pending).await?;
    trial.expect_failed(&["2 Insufficient cpu"])
}

#[tokio::test]
async fn least_allocated_picks_the_emptiest_node() -> Result<()> {
    scenarios::run("least").await
}

#[tokio::test]
async fn no_nodes_at_all() -> Result<()> {
    let lab = Lab::begin("none").await?;
    let trial = lab.trial(pod("p").cpu("100m")).await?;
    trial.expect_failed(&["no nodes available to schedule pods"])
}

/// RuntimeClass admission copies the class's overhead into `spec.overhead`: 1500m + 1 > 2 cpu.
#[tokio::test]
async fn pod_overhead_counts() -> Result<()> {
    let lab = Lab::begin("overhead").await?;
    lab.create_nodes([lab.node("n1", "2", "4Gi")]).await?;
    let class = format!("{}-rc", lab.ns);
    lab.create_cluster::<k8s_openapi::api::node::v1::RuntimeClass>(json!({
        "metadata": {"name": class},
        "handler": "runc",
        "overhead": {"podFixed": {"cpu": "1"}},
    }))
    .await?;
    let trial = lab
        .trial(pod("p").cpu("1500m").spec("runtimeClassName", json!(class)))
        .await?;
    ensure!(
        trial
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.overhead.as_ref())
            .is_some(),
        "admission set no overhead"
    );
    trial.expect_failed(&["1 Insufficient cpu"])
}

/// Pod-level resources (beta, on by default in v1.37) replace the sum of the containers.
#[tokio::test]
async fn pod_level_resources() -> Result<()> {
    let lab = Lab::begin("podlevel").await?;
    lab.create_nodes([lab.node("n1", "2", "4Gi"), lab.node("n2", "4", "4Gi")])
        .await?;
    let pending = pod("p").cpu("100m").spec(
        "resources",
        json!({"requests": {"cpu": "3"}, "limits": {"cpu": "3"}}),
    );
    let trial = lab.trial(pending).await?;
    trial.expect_bound(Some(&lab.n("n2")))
}

/// A Succeeded pod holds no resources: kube-scheduler drops it, the snapshot skips it.
#[tokio::test]
async fn terminal_pods_free_their_resources() -> Result<()> {
    use kube::api::{Patch, PatchParams};
    let lab = Lab::begin("terminal").await?;
    lab.create_nodes([lab.node("n1", "2", "4Gi")]).await?;
    lab.create_pods([pod("done").cpu("1500m").on(&lab.n("n1"))])
        .await?;
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(lab.client.clone(), &lab.ns);
    pods.patch_status(
        "done",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
    )
    .await?;
    let trial = lab.trial(pod("p").cpu("1")).await?;
    trial.expect_bound(Some(&lab.n("n1")))
}

// ---------------------------------------------------------------------------------------------
// Taints and tolerations, node selection

#[tokio::test]
async fn untolerated_no_schedule_taints() -> Result<()> {
    scenarios::run("taint").await
}

#[tokio::test]
async fn tolerated_taint_fits() -> Result<()> {
    let lab = Lab::begin("tolerated").await?;
    lab.create_nodes([
        lab.node("n1", "8", "16Gi").taint("dedicated", "db", "NoSchedule"),
        lab.node("n2", "2", "4Gi"),
        lab.node("n3", "8", "16Gi").taint("other", "x", "NoSchedule"),
    ])
    .await?;
    let pending = pod("p").cpu("500m").memory("256Mi").toleration(json!({
        "key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule",
    }));
    let trial = lab.trial(pending).await?;
    trial.expect_bound(Some(&lab.n("n1")))
}

#[tokio::test]
async fn no_execute_taint_and_cordoned_node() -> Result<()> {
    scenarios::run("noexec").await
}

#[tokio::test]
async fn node_selector_mismatch() -> Result<()> {
    let lab = Lab::begin("selector").await?;
    lab.create_nodes([
        lab.node("n1", "4", "4Gi").label("disktype", "hdd"),
        lab.node("n2", "4", "4Gi").label("disktype", "hdd"),
        lab.node("n3", "4", "4Gi"),
    ])
    .await?;
    let trial = lab
        .trial(pod("p").spec("nodeSelector", json!({"disktype": "ssd"})))
        .await?;
    trial.expect_failed(&["3 node(s) didn't match Pod's node affinity/selector"])
}

fn tiered_nodes(lab: &Lab) -> [common::NodeBuilder; 3] {
    [
        lab.node("n1", "4", "4Gi").label("zone", "a").label("tier", "1"),
        lab.node("n2", "4", "4Gi")
            .label("zone", "a")
            .label("tier", "5")
            .label("env", "prod"),
        lab.node("n3", "4", "4Gi").label("zone", "b").label("tier", "9"),
    ]
}

#[tokio::test]
async fn required_node_affinity_in_notin_gt() -> Result<()> {
    let lab = Lab::begin("affin").await?;
    lab.create_nodes(tiered_nodes(&lab)).await?;
    let affinity = required_node_affinity(json!([
        {"key": "zone", "operator": "In", "values": ["a"]},
        {"key": "env", "operator": "NotIn", "values": ["prod"]},
        {"key": "tier", "operator": "Gt", "values": ["3"]},
    ]));
    let trial = lab.trial(pod("p").spec("affinity", affinity)).await?;
    trial.expect_failed(&["3 node(s) didn't match Pod's node affinity/selector"])
}

#[tokio::test]
async fn required_node_affinity_fits_one_node() -> Result<()> {
    let lab = Lab::begin("affinok").await?;
    lab.create_nodes(tiered_nodes(&lab)).await?;
    let affinity = required_node_affinity(json!([
        {"key": "zone", "operator": "In", "values": ["a", "b"]},
        {"key": "env", "operator": "NotIn", "values": ["prod"]},
        {"key": "tier", "operator": "Gt", "values": ["3"]},
    ]));
    let trial = lab.trial(pod("p").spec("affinity", affinity)).await?;
    trial.expect_bound(Some(&lab.n("n3")))
}

#[tokio::test]
async fn node_affinity_match_fields_prefilter() -> Result<()> {
    scenarios::run("fields").await
}

#[tokio::test]
async fn cordoned_nodes_and_insufficient_cpu() -> Result<()> {
    scenarios::run("cordon").await
}

#[tokio::test]
async fn host_port_conflict() -> Result<()> {
    scenarios::run("port").await
}

/// Thirteen nodes: "10 Insufficient cpu" sorts before "2 node(s) were unschedulable", as strings.
#[tokio::test]
async fn many_nodes_histogram_sorts_as_strings() -> Result<()> {
    let lab = Lab::begin("many").await?;
    let mut nodes: Vec<_> = (0..10).map(|i| lab.node(&format!("s{i}"), "1", "4Gi")).collect();
    nodes.push(lab.node("c1", "8", "8Gi").cordoned());
    nodes.push(lab.node("c2", "8", "8Gi").cordoned());
    nodes.push(lab.node("t1", "8", "8Gi").taint("team", "infra", "NoSchedule"));
    lab.create_nodes(nodes).await?;
    let trial = lab.trial(pod("p").cpu("2")).await?;
    trial.expect_failed(&[
        "0/13 nodes are available: ",
        "10 Insufficient cpu",
        "2 node(s) were unschedulable",
    ])
}

// ---------------------------------------------------------------------------------------------
// Scoring: kube-scheduler's node must be among sched-core's top-scoring nodes, and each scenario
// is built so that there is exactly one.

async fn expect_unique_best(lab: &Lab, trial: &common::Trial, node: &str) -> Result<()> {
    let node = lab.n(node);
    trial.expect_bound(Some(&node))?;
    ensure!(
        trial.ours.selected == [node.clone()],
        "{}: sched-core should see {node} as the unique best node: {:?}",
        lab.ns,
        trial.ours.selected
    );
    Ok(())
}

#[tokio::test]
async fn prefer_no_schedule_taint_scores_lower() -> Result<()> {
    let lab = Lab::begin("prefer").await?;
    lab.create_nodes([
        lab.node("n1", "4", "4Gi")
            .taint("spot", "true", "PreferNoSchedule"),
        lab.node("n2", "4", "4Gi"),
    ])
    .await?;
    let trial = lab.trial(pod("p").cpu("100m")).await?;
    expect_unique_best(&lab, &trial, "n2").await
}

#[tokio::test]
async fn preferred_node_affinity_scores_higher() -> Result<()> {
    let lab = Lab::begin("prefaff").await?;
    lab.create_nodes([
        lab.node("n1", "4", "4Gi").label(ZONE, "a"),
        lab.node("n2", "4", "4Gi").label(ZONE, "b"),
    ])
    .await?;
    let affinity = json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
        "weight": 50,
        "preference": {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["b"]}]},
    }]}});
    let trial = lab.trial(pod("p").cpu("100m").spec("affinity", affinity)).await?;
    expect_unique_best(&lab, &trial, "n2").await
}

#[tokio::test]
async fn preferred_pod_affinity_scores_higher() -> Result<()> {
    let lab = Lab::begin("prefpod").await?;
    lab.create_nodes([lab.node("n1", "4", "4Gi"), lab.node("n2", "4", "4Gi")])
        .await?;
    lab.create_pods([pod("db").label("app", "db").on(&lab.n("n2"))])
        .await?;
    let affinity = json!({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
        "weight": 100,
        "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": HOSTNAME},
    }]}});
    let trial = lab.trial(pod("p").cpu("100m").spec("affinity", affinity)).await?;
    expect_unique_best(&lab, &trial, "n2").await
}

#[tokio::test]
async fn topology_spread_schedule_anyway_scores_the_empty_zone() -> Result<()> {
    let lab = Lab::begin("anyway").await?;
    lab.create_nodes([
        lab.node("n1", "4", "4Gi").label(ZONE, "a"),
        lab.node("n2", "4", "4Gi").label(ZONE, "b"),
    ])
    .await?;
    // The pods in zone a request nothing, so resource scores barely move.
    lab.create_pods((1..=3).map(|i| pod(&format!("s{i}")).label("app", "s").on(&lab.n("n1"))))
        .await?;
    let pending = pod("p").label("app", "s").cpu("100m").spec(
        "topologySpreadConstraints",
        json!([{
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": "s"}},
        }]),
    );
    let trial = lab.trial(pending).await?;
    expect_unique_best(&lab, &trial, "n2").await
}

#[tokio::test]
async fn image_locality_scores_the_node_with_the_image() -> Result<()> {
    let lab = Lab::begin("image").await?;
    lab.create_nodes([
        lab.node("n1", "4", "4Gi"),
        lab.node("n2", "4", "4Gi").image(PAUSE_IMAGE, 800 * 1024 * 1024),
    ])
    .await?;
    let trial = lab.trial(pod("p").cpu("100m")).await?;
    expect_unique_best(&lab, &trial, "n2").await
}

// ---------------------------------------------------------------------------------------------
// Inter-pod affinity

#[tokio::test]
async fn pod_anti_affinity_on_hostname() -> Result<()> {
    let lab = Lab::begin("anti").await?;
    lab.create_nodes([lab.node("n1", "4", "4Gi"), lab.node("n2", "4", "4Gi")])
        .await?;
    lab.create_pods([
        pod("c1").label("app", "cache").on(&lab.n("n1")),
        pod("c2").label("app", "cache").on(&lab.n("n2")),
    ])
    .await?;
    let pending = pod("p").spec("affinity", required_anti_affinity("cache"));
    let trial = lab.trial(pending).await?;
    trial.expect_failed(&["2 node(s) didn't match pod anti-affinity rules"])
}

#[tokio::test]
async fn pod_anti_affinity_fits_the_other_node() -> Result<()> {
    let lab = Lab::begin("antiok").await?;
    lab.create_nodes([lab.node("n1", "4", "4Gi"), lab.node("n2", "4", "4Gi")])
        .await?;
    lab.create_pods([pod("c1").label("app", "cache").on(&lab.n("n1"))])
        .await?;
    let pending = pod("p").spec("affinity", required_anti_affinity("cache"));
    let trial = lab.trial(pending).await?;
    trial.expect_bound(Some(&lab.n("n2")))
}

#[tokio::test]
async fn pod_affinity_unsatisfied() -> Result<()> {
    let lab = Lab::begin("affpod").await?;
    lab.create_nodes([lab.node("n1", "4", "4Gi"), lab.node("n2", "4", "4Gi")])
        .await?;
    lab.create_pods([pod("web").label("app", "web").on(&lab.n("n1"))])
        .await?;
    let pending = pod("p")
        .label("app", "api")
        .spec("affinity", required_affinity("db"));
    let trial = lab.trial(pending).await?;
    trial.expect_failed(&["2 node(s) didn't match pod affinity rules"])
}

/// The first pod of a group that selects itself may go anywhere when no pod matches yet.
#[tokio::test]
async fn pod_affinity_matching_itself_fits() -> Result<()> {
    let lab = Lab::begin("affself").await?;
    lab.create_nodes([lab.node("n1", "4", "4Gi"), lab.node("n2", "4", "4Gi")])
        .await?;
    let pending = pod("p")
        .label("app", "db")
        .spec("affinity", required_affinity("db"));
    let trial = lab.trial(pending).await?;
    trial.expect_bound(None)
}

#[tokio::test]
async fn pod_affinity_with_namespace_selector() -> Result<()> {
    scenarios::run("affns").await
}

#[tokio::test]
async fn existing_pods_anti_affinity() -> Result<()> {
    let lab = Lab::begin("exanti").await?;
    lab.create_nodes([lab.node("n1", "4", "4Gi"), lab.node("n2", "2", "4Gi")])
        .await?;
    lab.create_pods([
        pod("guard")
            .spec("affinity", required_anti_affinity("web"))
            .on(&lab.n("n1")),
        pod("big").cpu("1900m").on(&lab.n("n2")),
    ])
    .await?;
    let trial = lab.trial(pod("p").label("app", "web").cpu("500m")).await?;
    trial.expect_failed(&[
        "1 node(s) didn't satisfy existing pods anti-affinity rules",
        "1 Insufficient cpu",
    ])
}

// ---------------------------------------------------------------------------------------------
// Topology spread

#[tokio::test]
async fn topology_spread_do_not_schedule() -> Result<()> {
    scenarios::run("spread").await
}

#[tokio::test]
async fn topology_spread_fits_the_empty_zone() -> Result<()> {
    let lab = Lab::begin("spreadok").await?;
    lab.create_nodes(zoned_nodes(&lab, "4")).await?;
    lab.create_pods([pod("s1").label("app", "s").on(&lab.n("n1"))])
        .await?;
    let pending = scenarios::zone_spread_pod_of_2_cpu();
    let trial = lab.trial(pending).await?;
    trial.expect_bound(Some(&lab.n("n2")))
}

#[tokio::test]
async fn topology_spread_missing_label() -> Result<()> {
    let lab = Lab::begin("spreadlbl").await?;
    lab.create_nodes([
        lab.node("n1", "4", "4Gi"),
        lab.node("n2", "1", "4Gi").label(ZONE, "a"),
    ])
    .await?;
    let pending = scenarios::zone_spread_pod_of_2_cpu();
    let trial = lab.trial(pending).await?;
    trial.expect_failed(&[
        "1 node(s) didn't match pod topology spread constraints (missing required label)",
        "1 Insufficient cpu",
    ])
}

// ---------------------------------------------------------------------------------------------
// Volumes

#[tokio::test]
async fn missing_pvc() -> Result<()> {
    scenarios::run("nopvc").await
}

#[tokio::test]
async fn unbound_immediate_pvc() -> Result<()> {
    let lab = Lab::begin("unbound").await?;
    lab.create_nodes([lab.node("n1", "4", "4Gi"), lab.node("n2", "4", "4Gi")])
        .await?;
    // No class and a selector no volume matches: the binder leaves it Pending.
    lab.create_namespaced::<PersistentVolumeClaim>(json!({
        "metadata": {"name": "data"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "selector": {"matchLabels": {"no-volume": "matches"}},
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }))
    .await?;
    let trial = lab.trial(pod("p").claim("data")).await?;
    // VolumeBinding's PreFilter rejected first. What follows depends on the release (v1.34+:
    // DynamicResources' PostFilter finds no state, " not found"; v1.33: a preemption part), and the
    // agreement check compares it byte for byte.
    trial.expect_failed(&["0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."])
}

#[tokio::test]
async fn read_write_once_pod_conflict() -> Result<()> {
    scenarios::run("rwop").await
}

#[tokio::test]
async fn volume_node_affinity_conflict() -> Result<()> {
    let lab = Lab::begin("pvaff").await?;
    lab.create_nodes([lab.node("n1", "4", "4Gi"), lab.node("n2", "4", "4Gi")])
        .await?;
    let nowhere = lab.n("nowhere");
    bound_claim(
        &lab,
        "ReadWriteOnce",
        Some(json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": HOSTNAME, "operator": "In", "values": [nowhere]},
        ]}]}})),
    )
    .await?;
    let trial = lab.trial(pod("p").claim("data")).await?;
    trial.expect_failed(&["2 node(s) didn't match PersistentVolume's node affinity"])
}

/// The claim is bound to a volume labelled with another zone than the nodes'.
#[tokio::test]
async fn volume_zone_conflict() -> Result<()> {
    let lab = Lab::begin("pvzone").await?;
    lab.create_nodes([
        lab.node("n1", "4", "4Gi").label(ZONE, "a"),
        lab.node("n2", "4", "4Gi").label(ZONE, "a"),
    ])
    .await?;
    bound_claim_with(&lab, "ReadWriteOnce", json!({ZONE: "b"}), None).await?;
    let trial = lab.trial(pod("p").claim("data")).await?;
    trial.expect_failed(&["2 node(s) had no available volume zone"])
}

/// WaitForFirstConsumer with no provisioner: only a matching static volume could serve it.
#[tokio::test]
async fn wait_for_first_consumer_without_volumes() -> Result<()> {
    let lab = Lab::begin("wffc").await?;
    lab.create_nodes([lab.node("n1", "4", "4Gi"), lab.node("n2", "4", "4Gi")])
        .await?;
    let class = format!("{}-local", lab.ns);
    lab.create_cluster::<k8s_openapi::api::storage::v1::StorageClass>(json!({
        "metadata": {"name": class},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
    }))
    .await?;
    lab.create_namespaced::<PersistentVolumeClaim>(json!({
        "metadata": {"name": "data"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": class,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }))
    .await?;
    let trial = lab.trial(pod("p").claim("data")).await?;
    trial.expect_failed(&["2 node(s) didn't find available persistent volumes to bind"])
}

/// A VolumeAttachment of `claim`'s volume to `node`, as the attach-detach controller would leave
/// one. Created without a status (not reported attached): kube-scheduler counts it all the same.
async fn attach(lab: &Lab, claim: &str, node: &str) -> Result<()> {
    let pv_name = format!("{}-{claim}", lab.ns);
    lab.create_cluster::<k8s_openapi::api::storage::v1::VolumeAttachment>(json!({
        "metadata": {"name": pv_name},
        "spec": {"attacher": CSI_DRIVER, "nodeName": node, "source": {"persistentVolumeName": pv_name}},
    }))
    .await?;
    Ok(())
}

/// A CSINode allows one volume of the driver on n1, which already has one; n2 is cordoned.
#[tokio::test]
async fn csi_volume_limit() -> Result<()> {
    let lab = Lab::begin("csilimit").await?;
    lab.create_nodes([lab.node("n1", "4", "4Gi"), lab.node("n2", "4", "4Gi").cordoned()])
        .await?;
    lab.create_csi_volumes(&lab.n("n1"), 1, &["used", "data"]).await?;
    lab.create_pods([pod("owner").claim("used").on(&lab.n("n1"))])
        .await?;
    let trial = lab.trial(pod("p").claim("data")).await?;
    trial.expect_failed(&[
        "1 node(s) exceed max volume count",
        "1 node(s) were unschedulable",
    ])
}

/// n1 allows two volumes: one is its pod's (attached too), one is still attached after its pod
/// left (a VolumeAttachment no pod's volume matches). kube-scheduler counts both, so a third does
/// not fit; n2 is cordoned.
#[tokio::test]
async fn csi_volume_limit_counts_attachments_no_pod_uses() -> Result<()> {
    let lab = Lab::begin("csiattach").await?;
    let n1 = lab.n("n1");
    lab.create_nodes([lab.node("n1", "4", "4Gi"), lab.node("n2", "4", "4Gi").cordoned()])
        .await?;
    lab.create_csi_volumes(&n1, 2, &["used", "left", "data"]).await?;
    lab.create_pods([pod("owner").claim("used").on(&n1)]).await?;
    attach(&lab, "used", &n1).await?;
    attach(&lab, "left", &n1).await?;
    let trial = lab.trial(pod("p").claim("data")).await?;
    trial.expect_failed(&[
        "1 node(s) exceed max volume count",
        "1 node(s) were unschedulable",
    ])
}

/// As above without the left-over attachment: the attachment of the pod's own volume is that
/// volume, counted once, so a second volume fits on n1.
#[tokio::test]
async fn csi_volume_limit_counts_an_attached_pod_volume_once() -> Result<()> {
    let lab = Lab::begin("csiattached").await?;
    let n1 = lab.n("n1");
    lab.create_nodes([lab.node("n1", "4", "4Gi"), lab.node("n2", "4", "4Gi").cordoned()])
        .await?;
    lab.create_csi_volumes(&n1, 2, &["used", "data"]).await?;
    lab.create_pods([pod("owner").claim("used").on(&n1)]).await?;
    attach(&lab, "used", &n1).await?;
    let trial = lab.trial(pod("p").claim("data")).await?;
    trial.expect_bound(Some(&n1))
}

/// A ResourceClaim that does not exist: DynamicResources' PreEnqueue keeps the pod out of the
/// queue (like a scheduling gate), so kube-scheduler writes no event and sets no condition.
/// sched-core should say Gated with that PreEnqueue message: the error of v1.37.2's assume cache
/// for ResourceClaims (read from the Go source; kube-scheduler does not publish it). Where
/// DynamicResourceAllocation is off by default (v1.33) the claim is ignored and the pod binds.
#[tokio::test]
async fn missing_resource_claim() -> Result<()> {
    let lab = Lab::begin("draclaim").await?;
    lab.create_nodes([lab.node("n1", "4", "4Gi")]).await?;
    let pending = pod("p")
        .spec(
            "resourceClaims",
            json!([{"name": "gpu", "resourceClaimName": "missing"}]),
        )
        .container_field("resources", json!({"claims": [{"name": "gpu"}]}));
    if !lab.engine.features().dynamic_resource_allocation {
        // v1.33: DynamicResources is not among the default plugins, so nothing reads the claim.
        let trial = lab.trial(pending).await?;
        return trial.expect_bound(Some(&lab.n("n1")));
    }
    let trial = lab.trial_silent(pending).await?;
    trial.report();
    ensure!(
        matches!(&trial.kube, Verdict::Silent { reason: None, .. }),
        "kube-scheduler: {:?}",
        trial.kube
    );
    let expected = format!("could not find ResourceClaim \"{}/missing\"", lab.ns);
    ensure!(
        trial.ours.outcome == Outcome::Gated && trial.ours.message == expected,
        "MISMATCH in draclaim: kube-scheduler holds the pod in PreEnqueue (DynamicResources: \
         {expected:?}); sched-core: {:?} {:?}",
        trial.ours.outcome,
        trial.ours.message
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Priorities and preemption

#[tokio::test]
async fn preemption_succeeds() -> Result<()> {
    scenarios::run("preempt").await
}

/// After a preemption the preemptor is nominated to the node while its victim terminates (no
/// kubelet ever finishes that). A later, lower-priority pod must leave room for the nominated
/// one: 1500m (terminating victim) + 1 (nominated) + 400m > 2 cpu, while without the
/// nomination it would fit.
#[tokio::test]
async fn nominated_pod_reserves_room() -> Result<()> {
    let lab = Lab::begin("nominated").await?;
    let n1 = lab.n("n1");
    lab.create_nodes([lab.node("n1", "2", "4Gi")]).await?;
    lab.create_pods([
        pod("victim")
            .priority_class(LOW)
            .cpu("1500m")
            .spec("terminationGracePeriodSeconds", json!(30))
            .on(&n1),
        // Deleted later to make kube-scheduler retry the preemptor (an assigned pod's deletion
        // is an event NodeResourcesFit requeues on).
        pod("filler").on(&n1),
    ])
    .await?;
    let first = lab.trial(pod("a").priority_class(HIGH).cpu("1")).await?;
    lab.expect_preempted(&first, &n1, 1).await?;

    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(lab.client.clone(), &lab.ns);
    e2e::fixtures::wait_for(
        "a nominated to n1 and its victim terminating",
        Duration::from_secs(20),
        || async {
            let a = pods.get("a").await?;
            let victim = pods.get("victim").await?;
            let nominated = a.status.and_then(|s| s.nominated_node_name);
            let terminating = victim.metadata.deletion_timestamp.is_some();
            Ok((nominated.as_deref() == Some(n1.as_str()) && terminating).then_some(()))
        },
    )
    .await?;

    let trial = lab.trial(pod("b").cpu("400m")).await?;
    trial.expect_failed(&["1 Insufficient cpu"])?;

    // The preemptor's own retry (its PodScheduled condition carries the latest attempt's
    // message): its victim is still terminating on the nominated node, so it may not preempt
    // again; and its own nomination must not count against it.
    let Verdict::Failed(first_message) = &first.kube else {
        bail!("checked by expect_failed")
    };
    let force = kube::api::DeleteParams {
        grace_period_seconds: Some(0),
        ..kube::api::DeleteParams::default()
    };
    pods.delete("filler", &force).await?;
    let retried = e2e::fixtures::wait_for("a to be retried", Duration::from_secs(20), || async {
        let a = pods.get("a").await?;
        let message = a
            .status
            .and_then(|s| s.conditions)
            .into_iter()
            .flatten()
            .find(|c| c.type_ == "PodScheduled")
            .and_then(|c| c.message);
        Ok(message.filter(|m| m != first_message))
    })
    .await?;
    let a = pods.get("a").await?;
    let ours = common::evaluate(lab.snapshot().await?, &a)?;
    eprintln!(
        "[differential] nominated retry\n  kube-scheduler: {retried:?}\n  sched-core:     {:?} {:?}",
        ours.outcome, ours.message
    );
    ensure!(
        retried.contains("not eligible due to a terminating pod on the nominated node"),
        "the retry is not about the terminating victim: {retried:?}"
    );
    ensure!(
        ours.outcome == Outcome::Unschedulable && ours.message == retried,
        "MISMATCH in nominated (retry of a):\n  kube-scheduler: {retried:?}\n  sched-core:     {:?} ({:?})",
        ours.message,
        ours.outcome
    );
    Ok(())
}

/// Two equal candidates; a PodDisruptionBudget (no disruption controller runs, so it allows no
/// disruption) protects the victim on n1: the pick is n2.
#[tokio::test]
async fn preemption_avoids_pdb_violations() -> Result<()> {
    let lab = Lab::begin("pdb").await?;
    lab.create_nodes([lab.node("n1", "2", "4Gi"), lab.node("n2", "2", "4Gi")])
        .await?;
    lab.create_pods([
        pod("v1")
            .label("app", "v1")
            .priority_class(LOW)
            .cpu("1500m")
            .on(&lab.n("n1")),
        pod("v2")
            .label("app", "v2")
            .priority_class(LOW)
            .cpu("1500m")
            .on(&lab.n("n2")),
    ])
    .await?;
    lab.create_namespaced::<PodDisruptionBudget>(json!({
        "metadata": {"name": "protect-v1"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "v1"}}},
    }))
    .await?;
    let trial = lab.trial(pod("p").priority_class(HIGH).cpu("1")).await?;
    lab.expect_preempted(&trial, &lab.n("n2"), 1).await
}

#[tokio::test]
async fn preemption_not_helpful() -> Result<()> {
    scenarios::run("nothelp").await
}

#[tokio::test]
async fn preemption_policy_never() -> Result<()> {
    let lab = Lab::begin("never").await?;
    lab.create_nodes([lab.node("n1", "2", "4Gi")]).await?;
    lab.create_pods([pod("low").priority_class(LOW).cpu("1500m").on(&lab.n("n1"))])
        .await?;
    let pending = pod("p").priority_class(HIGH_NEVER).cpu("1");
    let trial = lab.trial(pending).await?;
    trial.expect_failed(&["1 Insufficient cpu", "preemptionPolicy=Never"])
}

#[tokio::test]
async fn preemption_finds_no_lower_priority_victims() -> Result<()> {
    let lab = Lab::begin("novictim").await?;
    lab.create_nodes([lab.node("n1", "2", "4Gi"), lab.node("n2", "2", "4Gi")])
        .await?;
    lab.create_pods([
        pod("peer1").cpu("1500m").on(&lab.n("n1")),
        pod("peer2").cpu("1500m").on(&lab.n("n2")),
    ])
    .await?;
    let trial = lab.trial(pod("p").cpu("1")).await?;
    trial.expect_failed(&["2 Insufficient cpu", "preemption: "])
}

/// Even without every lower-priority pod the node is too small: no candidate.
#[tokio::test]
async fn preemption_cannot_make_room() -> Result<()> {
    let lab = Lab::begin("noroom").await?;
    lab.create_nodes([lab.node("n1", "2", "4Gi")]).await?;
    lab.create_pods([pod("low").priority_class(LOW).cpu("1").on(&lab.n("n1"))])
        .await?;
    let trial = lab.trial(pod("p").priority_class(HIGH).cpu("3")).await?;
    trial.expect_failed(&["1 Insufficient cpu", "preemption: "])
}

// ---------------------------------------------------------------------------------------------
// Pods kube-scheduler does not schedule

/// A gated pod never reaches a scheduling cycle: kube-scheduler writes no FailedScheduling event
/// and the API server itself set PodScheduled=False/SchedulingGated at creation. sched-core says
/// Gated, with the message of v1.37.2's SchedulingGates PreEnqueue plugin.
#[tokio::test]
async fn scheduling_gates() -> Result<()> {
    let lab = Lab::begin("gated").await?;
    lab.create_nodes([lab.node("n1", "4", "4Gi")]).await?;
    let trial = lab
        .trial_silent(pod("p").cpu("100m").gate("example.com/gate"))
        .await?;
    trial.report();
    ensure!(
        matches!(&trial.kube, Verdict::Silent { reason: Some(r), .. } if r == "SchedulingGated"),
        "kube-scheduler: {:?}",
        trial.kube
    );
    ensure!(
        trial.ours.outcome == Outcome::Gated,
        "sched-core: {:?}",
        trial.ours.outcome
    );
    ensure!(
        trial.ours.message == "waiting for scheduling gates: [example.com/gate]",
        "sched-core's gate message: {:?}",
        trial.ours.message
    );
    Ok(())
}

#[tokio::test]
async fn node_name_of_a_missing_node() -> Result<()> {
    scenarios::run("ghost").await
}

// ---------------------------------------------------------------------------------------------
// Differences between releases (common::scenarios, also run by versions.rs)

#[tokio::test]
async fn balanced_allocation_scores_the_change() -> Result<()> {
    scenarios::run("balanced").await
}

#[tokio::test]
async fn anti_affinity_namespace_selector_not_in() -> Result<()> {
    scenarios::run("nssel").await
}

// ---------------------------------------------------------------------------------------------
// kubectl plugin mechanism

/// Runs `program` with this PATH and KUBECONFIG, bounded to 60 s.
async fn run_raw(
    program: &Path,
    args: &[&str],
    path_env: &std::ffi::OsStr,
    kubeconfig: &Path,
) -> Result<std::process::Output> {
    tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(program)
            .args(args)
            .env("PATH", path_env)
            .env("KUBECONFIG", kubeconfig)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .with_context(|| format!("{} {} did not finish in 60 s", program.display(), args.join(" ")))?
    .with_context(|| format!("running {}", program.display()))
}

/// As [`run_raw`], requiring success; returns stdout.
async fn run(program: &Path, args: &[&str], path_env: &std::ffi::OsStr, kubeconfig: &Path) -> Result<String> {
    let output = run_raw(program, args, path_env, kubeconfig).await?;
    if !output.status.success() {
        bail!(
            "{} {} exited with {}:\nstdout: {}\nstderr: {}",
            program.display(),
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[tokio::test]
async fn kubectl_sched_runs_as_a_kubectl_plugin() -> Result<()> {
    // Built before taking the lab, so the other scenarios run meanwhile.
    let binary = kubectl_sched_binary().await?;
    let lab = Lab::begin("plugin").await?;
    lab.create_nodes([lab.node("n1", "2", "4Gi"), lab.node("n2", "4", "4Gi").cordoned()])
        .await?;
    lab.create_pods([pod("busy").cpu("1500m").on(&lab.n("n1"))])
        .await?;
    let trial = lab.trial(pod("p").cpu("1")).await?;
    trial.expect_failed(&["1 Insufficient cpu", "1 node(s) were unschedulable"])?;
    let Verdict::Failed(kube_message) = &trial.kube else {
        bail!("checked by expect_failed")
    };

    // Only the plugin in its own directory: kubectl warns (and fails `plugin list`) about
    // anything else named kubectl-* that is not executable, such as cargo's dep-info files.
    let plugins = tempfile::tempdir()?;
    std::os::unix::fs::symlink(&binary, plugins.path().join("kubectl-sched"))?;
    let mut path = std::ffi::OsString::from(plugins.path());
    path.push(":");
    path.push(lab.cp.bin_dir());
    if let Some(inherited) = std::env::var_os("PATH") {
        path.push(":");
        path.push(inherited);
    }
    let kubectl = lab.cp.bin_dir().join("kubectl");
    let kubeconfig = lab.cp.kubeconfig_path();

    let listed = run(&kubectl, &["plugin", "list"], &path, kubeconfig).await?;
    ensure!(
        listed.lines().any(|l| l.trim().ends_with("/kubectl-sched")),
        "kubectl plugin list does not show kubectl-sched:\n{listed}"
    );

    let kubeconfig_arg = kubeconfig.display().to_string();
    let out = run(
        &kubectl,
        &[
            "sched",
            "explain",
            "p",
            "-n",
            &lab.ns,
            "-o",
            "json",
            "--kubeconfig",
            &kubeconfig_arg,
        ],
        &path,
        kubeconfig,
    )
    .await?;
    let json: Value =
        serde_json::from_str(&out).with_context(|| format!("explain -o json printed {out:?}"))?;
    ensure!(
        json["pod"] == json!(format!("{}/p", lab.ns)),
        "pod field: {}",
        json["pod"]
    );
    ensure!(
        json["message"].as_str() == Some(kube_message.as_str()),
        "MISMATCH kubectl sched explain vs kube-scheduler:\n  kube-scheduler: {kube_message:?}\n  explain:        {}",
        json["message"]
    );
    ensure!(
        json["nodes_total"] == json!(2),
        "nodes_total: {}",
        json["nodes_total"]
    );

    // Through kubectl too, a pod that does not exist is a one-line error naming it, exit 1.
    let missing = run_raw(
        &kubectl,
        &["sched", "explain", "no-such-pod", "-n", &lab.ns],
        &path,
        kubeconfig,
    )
    .await?;
    let stderr = String::from_utf8_lossy(&missing.stderr);
    ensure!(
        missing.status.code() == Some(1)
            && stderr.trim().lines().count() == 1
            && stderr.contains("no-such-pod"),
        "explain of a missing pod: {} with stderr {stderr:?}",
        missing.status
    );

    // `kubectl sched <TAB>`: kubectl's plugin completion runs kubectl_complete-sched, the script
    // `kubectl-sched completion kubectl` prints.
    let script = run(&binary, &["completion", "kubectl"], &path, kubeconfig).await?;
    let helper = plugins.path().join("kubectl_complete-sched");
    std::fs::write(&helper, script)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755))?;
    let completed = run(&kubectl, &["__complete", "sched", "ex"], &path, kubeconfig).await?;
    ensure!(
        completed
            .lines()
            .next()
            .is_some_and(|l| l.starts_with("explain\t"))
            && completed.lines().any(|l| l == ":4"),
        "kubectl __complete sched ex printed {completed:?}"
    );
    let completed = run(
        &kubectl,
        &["__complete", "sched", "preempt", "p", "--mode", ""],
        &path,
        kubeconfig,
    )
    .await?;
    ensure!(
        completed.contains("delete\t") && completed.contains("evict\t"),
        "kubectl __complete sched preempt p --mode '' printed {completed:?}"
    );
    Ok(())
}
