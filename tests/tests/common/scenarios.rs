//! The differential scenarios that run on every supported release: those whose words or verdict
//! differ between kube-scheduler releases (taint and ReadWriteOncePod reasons, the preemption
//! part of the message, NodeResourcesFit's unresolvable rejections, NodeName's PreFilter, a
//! PreFilter rejection's message) and a sample of plain ones. `differential.rs` runs them on the
//! shared control plane (the pinned release, or `KUBECTL_SCHED_K8S_RELEASE`'s), `versions.rs` on a
//! control plane of every other supported release, one after another.
//!
//! Each scenario asserts what it claims on every release: where kube-scheduler's words differ by
//! release, the check asks the release's code changes ([`Lab::changes`]), never a version.

use std::future::Future;
use std::pin::Pin;

use anyhow::{Result, ensure};
use e2e::ControlPlane;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use sched_core::explain::Outcome;
use serde_json::{Value, json};

use super::{HIGH, LOW, Lab, NodeBuilder, PodBuilder, Verdict, pod};

/// One scenario, on a lab begun with its id.
pub type Scenario = fn(Lab) -> Pin<Box<dyn Future<Output = Result<()>>>>;

/// Every scenario of this module, by the id its lab begins with (node names are `<id>-<short>`).
pub const SCENARIOS: &[(&str, Scenario)] = &[
    ("cpu", |lab| Box::pin(insufficient_cpu(lab))),
    ("mem", |lab| Box::pin(insufficient_memory(lab))),
    ("gpu", |lab| Box::pin(extended_resource(lab))),
    ("least", |lab| {
        Box::pin(least_allocated_picks_the_emptiest_node(lab))
    }),
    ("taint", |lab| Box::pin(untolerated_no_schedule_taints(lab))),
    ("noexec", |lab| Box::pin(no_execute_taint_and_cordoned_node(lab))),
    ("fields", |lab| {
        Box::pin(node_affinity_match_fields_prefilter(lab))
    }),
    ("cordon", |lab| Box::pin(cordoned_nodes_and_insufficient_cpu(lab))),
    ("port", |lab| Box::pin(host_port_conflict(lab))),
    ("affns", |lab| Box::pin(pod_affinity_with_namespace_selector(lab))),
    ("spread", |lab| Box::pin(topology_spread_do_not_schedule(lab))),
    ("nopvc", |lab| Box::pin(missing_pvc(lab))),
    ("rwop", |lab| Box::pin(read_write_once_pod_conflict(lab))),
    ("preempt", |lab| Box::pin(preemption_succeeds(lab))),
    ("nothelp", |lab| Box::pin(preemption_not_helpful(lab))),
    ("ghost", |lab| Box::pin(node_name_of_a_missing_node(lab))),
    ("balanced", |lab| {
        Box::pin(balanced_allocation_scores_the_change(lab))
    }),
    ("nssel", |lab| {
        Box::pin(anti_affinity_namespace_selector_not_in(lab))
    }),
];

/// Runs the scenario `id` on the shared control plane.
pub async fn run(id: &str) -> Result<()> {
    let scenario = scenario(id)?;
    scenario(Lab::begin(id).await?).await
}

/// Runs the scenario `id` on `cp`.
pub async fn run_on(id: &str, cp: &'static ControlPlane) -> Result<()> {
    let scenario = scenario(id)?;
    scenario(Lab::begin_on(id, || async move { Ok(cp) }).await?).await
}

fn scenario(id: &str) -> Result<Scenario> {
    SCENARIOS
        .iter()
        .find(|(known, _)| *known == id)
        .map(|(_, scenario)| *scenario)
        .ok_or_else(|| anyhow::anyhow!("no scenario {id}"))
}

pub const HOSTNAME: &str = "kubernetes.io/hostname";
pub const ZONE: &str = "topology.kubernetes.io/zone";

pub fn zone_spread(app: &str) -> Value {
    json!([{
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": app}},
    }])
}

/// The pending pod of the zone-spread scenarios: `app=s`, 2 cpu, spread over zones with
/// DoNotSchedule against the other `app=s` pods.
pub fn zone_spread_pod_of_2_cpu() -> PodBuilder {
    pod("p")
        .label("app", "s")
        .cpu("2")
        .spec("topologySpreadConstraints", zone_spread("s"))
}

pub fn zoned_nodes(lab: &Lab, zone_b_cpu: &str) -> [NodeBuilder; 3] {
    [
        lab.node("n1", "4", "4Gi").label(ZONE, "a"),
        lab.node("n2", zone_b_cpu, "4Gi").label(ZONE, "b"),
        lab.node("n3", "4", "4Gi").label(ZONE, "a"),
    ]
}

/// A claim and a volume pre-bound to each other; the binder marks both Bound.
pub async fn bound_claim(lab: &Lab, access_mode: &str, node_affinity: Option<Value>) -> Result<()> {
    bound_claim_with(lab, access_mode, json!({}), node_affinity).await
}

/// As [`bound_claim`], with extra labels on the volume.
pub async fn bound_claim_with(
    lab: &Lab,
    access_mode: &str,
    mut pv_labels: Value,
    node_affinity: Option<Value>,
) -> Result<()> {
    pv_labels[e2e::fixtures::TEST_LABEL] = json!(super::TEST_NAME);
    let pv_name = format!("{}-pv", lab.ns);
    let mut spec = json!({
        "capacity": {"storage": "1Gi"},
        "accessModes": [access_mode],
        "storageClassName": "",
        "persistentVolumeReclaimPolicy": "Retain",
        "claimRef": {"namespace": lab.ns, "name": "data"},
    });
    match node_affinity {
        Some(affinity) => {
            spec["local"] = json!({"path": "/tmp/e2e-unused"});
            spec["nodeAffinity"] = affinity;
        }
        None => spec["hostPath"] = json!({"path": "/tmp/e2e-unused"}),
    }
    lab.create_cluster::<PersistentVolume>(json!({
        "metadata": {"name": pv_name, "labels": pv_labels},
        "spec": spec,
    }))
    .await?;
    lab.create_namespaced::<PersistentVolumeClaim>(json!({
        "metadata": {"name": "data"},
        "spec": {
            "accessModes": [access_mode],
            "storageClassName": "",
            "volumeName": pv_name,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }))
    .await?;
    lab.wait_claim_bound("data").await
}

pub async fn insufficient_cpu(lab: Lab) -> Result<()> {
    lab.create_nodes([lab.node("n1", "2", "4Gi")]).await?;
    lab.create_pods([pod("busy").cpu("1500m").on(&lab.n("n1"))])
        .await?;
    let trial = lab.trial(pod("p").cpu("1")).await?;
    trial.expect_failed(&["1 Insufficient cpu"])
}

pub async fn insufficient_memory(lab: Lab) -> Result<()> {
    lab.create_nodes([lab.node("n1", "4", "1Gi"), lab.node("n2", "4", "2Gi")])
        .await?;
    lab.create_pods([pod("busy").memory("1536Mi").on(&lab.n("n2"))])
        .await?;
    let trial = lab.trial(pod("p").memory("1536Mi")).await?;
    trial.expect_failed(&["2 Insufficient memory"])
}

pub async fn extended_resource(lab: Lab) -> Result<()> {
    lab.create_nodes([
        lab.node("n1", "4", "4Gi").resource("example.com/gpu", "1"),
        lab.node("n2", "4", "4Gi"),
    ])
    .await?;
    let trial = lab.trial(pod("p").limit("example.com/gpu", "2")).await?;
    trial.expect_failed(&["2 Insufficient example.com/gpu"])
}

/// LeastAllocated (and BalancedAllocation) make the emptiest node the unique best.
pub async fn least_allocated_picks_the_emptiest_node(lab: Lab) -> Result<()> {
    lab.create_nodes(["n1", "n2", "n3"].map(|n| lab.node(n, "4", "8Gi")))
        .await?;
    lab.create_pods([
        pod("a").cpu("3").on(&lab.n("n1")),
        pod("b").cpu("1").on(&lab.n("n2")),
        pod("c").cpu("2").on(&lab.n("n3")),
    ])
    .await?;
    let trial = lab.trial(pod("p").cpu("500m").memory("512Mi")).await?;
    trial.expect_bound(Some(&lab.n("n2")))?;
    ensure!(
        trial.ours.selected == [lab.n("n2")],
        "sched-core should see a unique best node: {:?}",
        trial.ours.selected
    );
    Ok(())
}

pub async fn untolerated_no_schedule_taints(lab: Lab) -> Result<()> {
    lab.create_nodes([
        lab.node("n1", "4", "4Gi")
            .taint("node-role.kubernetes.io/control-plane", "", "NoSchedule"),
        lab.node("n2", "4", "4Gi").taint("dedicated", "gpu", "NoSchedule"),
    ])
    .await?;
    let trial = lab.trial(pod("p").cpu("100m")).await?;
    // Up to v1.34.1 the reason names the taint (one histogram entry per taint); later releases
    // do not.
    if lab.changes().untolerated_taint_reason_names_taint {
        trial.expect_failed(&[
            "1 node(s) had untolerated taint {dedicated: gpu}",
            "1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }",
        ])
    } else {
        trial.expect_failed(&["2 node(s) had untolerated taint(s)"])
    }
}

pub async fn no_execute_taint_and_cordoned_node(lab: Lab) -> Result<()> {
    lab.create_nodes([
        lab.node("n1", "4", "4Gi")
            .taint("maintenance", "true", "NoExecute"),
        lab.node("n2", "4", "4Gi").cordoned(),
    ])
    .await?;
    // Tolerates the key for NoSchedule only: the NoExecute taint stays untolerated.
    let pending = pod("p").cpu("100m").toleration(json!({
        "key": "maintenance", "operator": "Exists", "effect": "NoSchedule",
    }));
    let trial = lab.trial(pending).await?;
    let taint = if lab.changes().untolerated_taint_reason_names_taint {
        "1 node(s) had untolerated taint {maintenance: true}"
    } else {
        "1 node(s) had untolerated taint(s)"
    };
    trial.expect_failed(&[taint, "1 node(s) were unschedulable"])
}

/// `matchFields` on `metadata.name`: NodeAffinity's PreFilter narrows the nodes to n1, and the
/// other nodes are reported with the "didn't satisfy plugin(s)" status.
pub async fn node_affinity_match_fields_prefilter(lab: Lab) -> Result<()> {
    lab.create_nodes([
        lab.node("n1", "4", "4Gi").cordoned(),
        lab.node("n2", "4", "4Gi"),
        lab.node("n3", "4", "4Gi"),
    ])
    .await?;
    let affinity = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [lab.n("n1")]},
        ]}],
    }}});
    let trial = lab.trial(pod("p").spec("affinity", affinity)).await?;
    trial.expect_failed(&[
        "1 node(s) were unschedulable",
        "2 node(s) didn't satisfy plugin(s) [NodeAffinity]",
    ])
}

pub async fn cordoned_nodes_and_insufficient_cpu(lab: Lab) -> Result<()> {
    lab.create_nodes([
        lab.node("n1", "4", "4Gi").cordoned(),
        lab.node("n2", "4", "4Gi").cordoned(),
        lab.node("n3", "1", "4Gi"),
    ])
    .await?;
    let trial = lab.trial(pod("p").cpu("2")).await?;
    trial.expect_failed(&["2 node(s) were unschedulable", "1 Insufficient cpu"])
}

pub async fn host_port_conflict(lab: Lab) -> Result<()> {
    lab.create_nodes([
        lab.node("n1", "4", "4Gi"),
        lab.node("n2", "4", "4Gi").resource("pods", "1"),
    ])
    .await?;
    lab.create_pods([
        pod("web").host_port(8080).on(&lab.n("n1")),
        pod("other").on(&lab.n("n2")),
    ])
    .await?;
    let trial = lab.trial(pod("p").host_port(8080)).await?;
    trial.expect_failed(&[
        "1 node(s) didn't have free ports for the requested pod ports",
        "1 Too many pods",
    ])
}

/// The affinity term looks in the namespaces its namespaceSelector picks by label.
pub async fn pod_affinity_with_namespace_selector(lab: Lab) -> Result<()> {
    lab.create_nodes([lab.node("n1", "4", "4Gi"), lab.node("n2", "4", "4Gi")])
        .await?;
    let data = lab.create_namespace("data", json!({"team": "data"})).await?;
    lab.create_pods([
        pod("db").label("app", "db").namespace(&data).on(&lab.n("n2")),
        // Same labels, but in a namespace the selector does not pick.
        pod("decoy").label("app", "db").on(&lab.n("n1")),
    ])
    .await?;
    let pending = pod("p").spec(
        "affinity",
        json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": "db"}},
            "namespaceSelector": {"matchLabels": {"team": "data"}},
            "topologyKey": HOSTNAME,
        }]}}),
    );
    let trial = lab.trial(pending).await?;
    trial.expect_bound(Some(&lab.n("n2")))
}

pub async fn topology_spread_do_not_schedule(lab: Lab) -> Result<()> {
    lab.create_nodes(zoned_nodes(&lab, "1")).await?;
    lab.create_pods([pod("s1").label("app", "s").on(&lab.n("n1"))])
        .await?;
    let pending = zone_spread_pod_of_2_cpu();
    let trial = lab.trial(pending).await?;
    trial.expect_failed(&[
        "2 node(s) didn't match pod topology spread constraints",
        "1 Insufficient cpu",
    ])
}

/// PreFilter rejects (the claim does not exist): its message replaces the node histogram. What
/// follows depends on the release: v1.37.1 appends " not found" (DynamicResources' PostFilter runs
/// without the PreFilter state it expects, PreFilter having stopped before reaching it, and its
/// error message becomes the PostFilter message); v1.33, without DynamicResources in its default
/// plugins, the preemption part. The comparison checks those words byte for byte.
pub async fn missing_pvc(lab: Lab) -> Result<()> {
    lab.create_nodes([lab.node("n1", "4", "4Gi"), lab.node("n2", "4", "4Gi")])
        .await?;
    let trial = lab.trial(pod("p").claim("nope")).await?;
    trial.expect_failed(&["0/2 nodes are available: persistentvolumeclaim \"nope\" not found."])
}

pub async fn read_write_once_pod_conflict(lab: Lab) -> Result<()> {
    lab.create_nodes([lab.node("n1", "4", "4Gi"), lab.node("n2", "4", "4Gi")])
        .await?;
    bound_claim(&lab, "ReadWriteOncePod", None).await?;
    lab.create_pods([pod("owner").claim("data").on(&lab.n("n1"))])
        .await?;
    let trial = lab.trial(pod("p").claim("data")).await?;
    // The words changed in v1.34; both name the access mode.
    trial.expect_failed(&["ReadWriteOncePod"])
}

pub async fn preemption_succeeds(lab: Lab) -> Result<()> {
    lab.create_nodes([lab.node("n1", "2", "4Gi")]).await?;
    lab.create_pods([pod("victim").priority_class(LOW).cpu("1500m").on(&lab.n("n1"))])
        .await?;
    let trial = lab.trial(pod("p").priority_class(HIGH).cpu("1")).await?;
    lab.expect_preempted(&trial, &lab.n("n1"), 1).await
}

pub async fn preemption_not_helpful(lab: Lab) -> Result<()> {
    lab.create_nodes([lab.node("n1", "2", "4Gi"), lab.node("n2", "2", "4Gi")])
        .await?;
    lab.create_pods([
        pod("low1").priority_class(LOW).cpu("1").on(&lab.n("n1")),
        pod("low2").priority_class(LOW).cpu("1").on(&lab.n("n2")),
    ])
    .await?;
    let pending = pod("p")
        .priority_class(HIGH)
        .spec("nodeSelector", json!({"disktype": "ssd"}));
    let trial = lab.trial(pending).await?;
    trial.expect_failed(&["2 Preemption is not helpful for scheduling"])
}

/// `spec.nodeName` set to a node that does not exist: the pod is assigned, so kube-scheduler
/// never looks at it (no event, nodeName untouched). sched-core, asked to evaluate it as if it
/// were pending, finds no node: from v1.37 NodeName's PreFilter keeps only the named node, which is
/// absent; before, NodeName's Filter rejects every node.
pub async fn node_name_of_a_missing_node(lab: Lab) -> Result<()> {
    lab.create_nodes([lab.node("n1", "4", "4Gi"), lab.node("n2", "4", "4Gi")])
        .await?;
    let trial = lab.trial_silent(pod("p").on(&lab.n("ghost"))).await?;
    trial.report();
    ensure!(
        matches!(&trial.kube, Verdict::Silent { reason: None, .. }),
        "kube-scheduler should ignore an assigned pod: {:?}",
        trial.kube
    );
    let expected = if lab.changes().node_name_pre_filter {
        "0/2 nodes are available: 2 node(s) didn't satisfy plugin(s) [NodeName]."
    } else {
        "0/2 nodes are available: 2 node(s) didn't match the requested node name."
    };
    ensure!(
        trial.ours.outcome == Outcome::Unschedulable && trial.ours.message.starts_with(expected),
        "sched-core: {:?} {:?}",
        trial.ours.outcome,
        trial.ours.message
    );
    Ok(())
}

/// NodeResourcesBalancedAllocation's formula changed in v1.36. Both nodes have 10 cpu and 10Gi and
/// end with the same LeastAllocated score (35); the pod asks for 30% of the cpu and 10% of the
/// memory. n1 is balanced (45%/45%) and the pod unbalances it (75%/55%); n2 is memory-heavy
/// (5%/85%) and the pod improves it (35%/95%). Up to v1.35 the balance *with* the pod decides (n1
/// 90, n2 70): n1. From v1.36 the change the pod makes does (n1 75 - 5 = 70, n2 75 + 5 = 80): n2.
pub async fn balanced_allocation_scores_the_change(lab: Lab) -> Result<()> {
    lab.create_nodes([lab.node("n1", "10", "10Gi"), lab.node("n2", "10", "10Gi")])
        .await?;
    lab.create_pods([
        pod("even").cpu("4500m").memory("4608Mi").on(&lab.n("n1")),
        pod("heavy").cpu("500m").memory("8704Mi").on(&lab.n("n2")),
    ])
    .await?;
    let trial = lab.trial(pod("p").cpu("3").memory("1Gi")).await?;
    let best = lab.n(if lab.changes().balanced_allocation_scores_the_change {
        "n2"
    } else {
        "n1"
    });
    trial.expect_bound(Some(&best))?;
    ensure!(
        trial.ours.selected == [best.clone()],
        "{}: sched-core should see {best} as the unique best node: {:?}",
        lab.ns,
        trial.ours.selected
    );
    Ok(())
}

/// A required anti-affinity term whose namespaceSelector matches an empty label set (`NotIn`).
/// The only pod it could match runs in the namespace the selector leaves out, so n1 is free.
/// v1.34 to v1.36 keep the selector after merging its namespaces into the term (the term is taken
/// by value) and match it against no labels for existing pods: the pod counts, and n1 is refused
/// (n2 is cordoned), while v1.33 and v1.37 bind the pod to n1.
pub async fn anti_affinity_namespace_selector_not_in(lab: Lab) -> Result<()> {
    lab.create_nodes([lab.node("n1", "4", "4Gi"), lab.node("n2", "4", "4Gi").cordoned()])
        .await?;
    let data = lab.create_namespace("data", json!({"team": "data"})).await?;
    lab.create_pods([pod("db").label("app", "db").namespace(&data).on(&lab.n("n1"))])
        .await?;
    let pending = pod("p").spec(
        "affinity",
        json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": "db"}},
            "namespaceSelector": {"matchExpressions": [
                {"key": "team", "operator": "NotIn", "values": ["data"]},
            ]},
            "topologyKey": HOSTNAME,
        }]}}),
    );
    let trial = lab.trial(pending).await?;
    if lab.changes().inter_pod_affinity_namespace_selector_kept {
        trial.expect_failed(&[
            "1 node(s) didn't match pod anti-affinity rules",
            "1 node(s) were unschedulable",
        ])
    } else {
        trial.expect_bound(Some(&lab.n("n1")))
    }
}
