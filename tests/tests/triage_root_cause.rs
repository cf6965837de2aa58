//! Issue 30, items 2 and 4, against the real control plane: triage's root cause is what must change
//! (not the filter kube-scheduler ran first), counts are shown only where they are counts, and a pod
//! whose ResourceClaim is still to be made from a template is said to wait for
//! kube-controller-manager's resourceclaim controller, not for kube-scheduler.
//!
//! One control plane of its own: kube-scheduler, and kube-controller-manager with the statefulset
//! controller and the PV binder only — no resourceclaim controller, so a claim from a
//! ResourceClaimTemplate is never made (as when that controller is down or disabled). Its nodes are
//! its own (3 × 2 cpu), so kube-scheduler's "0/3 nodes" and triage's counts are over the same nodes.
//!
//! - `statefulset/db`: one replica asking for 3 cpu and a volume of the WaitForFirstConsumer class
//!   `local-storage` (no-provisioner), of which no PersistentVolume exists. The real statefulset
//!   controller makes the PVC and the pod; kube-scheduler counts `3 Insufficient cpu`
//!   (NodeResourcesFit runs before VolumeBinding), but more cpu would open no node: triage's root
//!   cause must be VolumeBinding's `node(s) didn't find available persistent volumes to bind`.
//! - `pod/uploads`: a pod whose PVC `uploads-data` does not exist: a PreFilter rejection, shown
//!   without a node count.
//! - `pod/notebook`: its claim `gpu` comes from the template `notebook-gpu`, which nothing turns into
//!   a ResourceClaim: explain and triage name the claim, the template and the controller.

mod common;

use std::process::Output;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use common::shown;
use e2e::fixtures::{TEST_LABEL, eventually, ready_node};
use e2e::{ControlPlane, Options};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

const TEST: &str = "root-cause";
/// The StorageClass no PersistentVolume has and nothing provisions.
const CLASS: &str = "root-cause-local";
/// Bounds the wait for the controllers and kube-scheduler.
const WAIT: Duration = Duration::from_secs(60);
/// VolumeBinding's reason when no PersistentVolume can be bound or provisioned on a node.
const NO_PV: &str = "node(s) didn't find available persistent volumes to bind";

static CONTROL_PLANE: OnceCell<ControlPlane> = OnceCell::const_new();

/// The control plane, its 3 nodes and the StorageClass, once for both tests.
async fn control_plane() -> Result<&'static ControlPlane> {
    CONTROL_PLANE
        .get_or_try_init(|| async {
            let cp = ControlPlane::start(
                Options::new()
                    .with_scheduler(None)
                    .with_controller_manager(&["statefulset", "persistentvolume-binder"]),
            )
            .await?;
            let client = cp.client()?;
            let nodes: Api<Node> = Api::all(client.clone());
            for i in 1..=3 {
                let node = ready_node(&format!("{TEST}-n{i}"), TEST, "2", "8Gi", "110");
                nodes.create(&PostParams::default(), &node).await?;
            }
            let class: StorageClass = serde_json::from_value(json!({
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": CLASS},
                "provisioner": "kubernetes.io/no-provisioner",
                "volumeBindingMode": "WaitForFirstConsumer",
            }))?;
            Api::<StorageClass>::all(client)
                .create(&PostParams::default(), &class)
                .await?;
            anyhow::Ok(cp)
        })
        .await
}

/// `kubectl-sched ARGS... -n NS` against the control plane.
async fn kubectl_sched(cp: &ControlPlane, ns: &str, args: &[&str]) -> Result<Output> {
    let mut all = args.to_vec();
    all.extend_from_slice(&["-n", ns]);
    common::run_kubectl_sched_on(cp, &all).await
}

/// A pause container requesting `cpu`, on this test's nodes.
fn pod_spec(cpu: &str) -> Value {
    json!({
        "nodeSelector": {TEST_LABEL: TEST},
        "terminationGracePeriodSeconds": 0,
        "containers": [{
            "name": "c",
            "image": common::PAUSE_IMAGE,
            "resources": {"requests": {"cpu": cpu}},
        }],
    })
}

/// kube-scheduler's PodScheduled=False message on `name`, once it starts with `prefix` (an earlier
/// attempt may have seen the cluster half made: a StatefulSet's pod before its PVC).
async fn kube_scheduler_says(pods: &Api<Pod>, name: &str, prefix: &str) -> Result<String> {
    let last = std::sync::Mutex::new(None::<String>);
    let said = eventually(&format!("kube-scheduler's verdict on {name}"), WAIT, || {
        let last = &last;
        async move {
            let Some(pod) = pods.get_opt(name).await? else {
                return Ok(None);
            };
            let message = pod
                .status
                .and_then(|s| s.conditions)
                .into_iter()
                .flatten()
                .find(|c| c.type_ == "PodScheduled" && c.status == "False")
                .and_then(|c| c.message);
            if let Ok(mut l) = last.lock() {
                l.clone_from(&message);
            }
            Ok(message.filter(|m| m.starts_with(prefix)))
        }
    })
    .await;
    let last = last.into_inner().ok().flatten();
    said.with_context(|| format!("kube-scheduler's last word on {name}: {last:?}"))
}

/// The workload group of `kind/name` in triage's JSON report, with its cause.
fn group<'a>(report: &'a Value, kind: &str, name: &str) -> Result<(&'a Value, &'a Value)> {
    common::triage_groups(report)
        .find(|(_, w)| w["workload"]["kind"] == kind && w["workload"]["name"] == name)
        .with_context(|| format!("no {kind}/{name} group in {report:#}"))
}

#[tokio::test]
async fn a_statefulset_without_a_persistent_volume_is_filed_under_volume_binding() -> Result<()> {
    let started = Instant::now();
    let cp = control_plane().await?;
    let client = cp.client()?;
    let ns = cp.new_namespace(TEST).await?;
    let db: StatefulSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db"},
        "spec": {
            "replicas": 1,
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {
                "metadata": {"labels": {"app": "db"}},
                "spec": {
                    "volumes": [],
                    "containers": [{
                        "name": "c",
                        "image": common::PAUSE_IMAGE,
                        "resources": {"requests": {"cpu": "3"}},
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    }],
                    "nodeSelector": {TEST_LABEL: TEST},
                    "terminationGracePeriodSeconds": 0,
                },
            },
            "volumeClaimTemplates": [{
                "metadata": {"name": "data"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": CLASS,
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }],
        },
    }))?;
    Api::<StatefulSet>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &db)
        .await?;
    let mut spec = pod_spec("100m");
    spec["volumes"] = json!([{"name": "data", "persistentVolumeClaim": {"claimName": "uploads-data"}}]);
    let uploads: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "uploads"},
        "spec": spec,
    }))?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    pods.create(&PostParams::default(), &uploads).await?;

    // The premise: kube-scheduler counts the StatefulSet's pod under cpu, the first filter that
    // rejected each node, and the missing claim as a whole-cluster message.
    let db_said = kube_scheduler_says(&pods, "db-0", "0/3 nodes are available: 3 Insufficient cpu.").await?;
    kube_scheduler_says(
        &pods,
        "uploads",
        "0/3 nodes are available: persistentvolumeclaim \"uploads-data\" not found.",
    )
    .await?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    ensure!(
        claims.get_opt("data-db-0").await?.is_some(),
        "the statefulset controller made no PVC data-db-0"
    );
    println!("kube-scheduler's verdicts after {:?}", started.elapsed());

    let output = kubectl_sched(cp, &ns, &["triage", "-o", "json"]).await?;
    ensure!(output.status.code() == Some(3), "{}", shown(&output));
    let report: Value =
        serde_json::from_slice(&output.stdout).with_context(|| format!("not JSON\n{}", shown(&output)))?;
    let (cause, db) = group(&report, "statefulset", "db")?;
    ensure!(
        cause["cause"] == NO_PV
            && db["root_cause"]["plugin"] == "VolumeBinding"
            && db["root_cause"]["basis"] == "every_node",
        "statefulset/db is not a VolumeBinding group:\n{cause:#}"
    );
    // kube-scheduler's own counts are kept beside it, as it wrote them.
    ensure!(
        db["reasons"] == json!([{"reason": "Insufficient cpu", "nodes": 3}])
            && db["message"] == db_said.as_str(),
        "kube-scheduler's counts are not kept:\n{db:#}"
    );
    let (cause, uploads) = group(&report, "pod", "uploads")?;
    ensure!(
        cause["cause"] == "persistentvolumeclaim \"uploads-data\" not found"
            && uploads["root_cause"]["basis"] == "pre_filter"
            && uploads["reasons"] == json!([{"reason": "persistentvolumeclaim \"uploads-data\" not found"}]),
        "the missing claim is not a PreFilter cause without a count:\n{cause:#}"
    );

    let output = kubectl_sched(cp, &ns, &["triage"]).await?;
    let text = String::from_utf8_lossy(&output.stdout);
    ensure!(
        text.contains(&format!("CANNOT BE SCHEDULED (1 pod, 1 workload): {NO_PV}\n  statefulset/db: 1 pod — 3 Insufficient cpu\n    root cause: {NO_PV} — VolumeBinding rejects all 3 nodes"))
            && text.contains("  pod/uploads: 1 pod — persistentvolumeclaim \"uploads-data\" not found\n")
            && !text.contains("3 persistentvolumeclaim"),
        "{}",
        shown(&output)
    );
    Ok(())
}

/// Writes the Lease `kube-system/kube-scheduler` as a leading kube-scheduler renews it (a long
/// duration, so that a slow machine does not see it expire before explain reads it).
async fn leases_say_kube_scheduler_leads(client: &kube::Client) -> Result<()> {
    let now = MicroTime(Timestamp::now());
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some("kube-scheduler".into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(format!("{TEST}-kube-scheduler_1")),
            lease_duration_seconds: Some(3600),
            renew_time: Some(now.clone()),
            acquire_time: Some(now),
            ..LeaseSpec::default()
        }),
    };
    Api::<Lease>::namespaced(client.clone(), "kube-system")
        .create(&PostParams::default(), &lease)
        .await?;
    Ok(())
}

#[tokio::test]
async fn a_claim_the_resourceclaim_controller_has_not_made_is_named() -> Result<()> {
    let cp = control_plane().await?;
    let client = cp.client()?;
    let ns = cp.new_namespace(&format!("{TEST}-dra")).await?;
    let class: DeviceClass = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": format!("{ns}.example.com")},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{ns}.example.com\"")}}]},
    }))?;
    Api::<DeviceClass>::all(client.clone())
        .create(&PostParams::default(), &class)
        .await?;
    let template: ResourceClaimTemplate = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "notebook-gpu"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": format!("{ns}.example.com")}}
        ]}}},
    }))?;
    Api::<ResourceClaimTemplate>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &template)
        .await?;
    let mut spec = pod_spec("100m");
    spec["resourceClaims"] = json!([{"name": "gpu", "resourceClaimTemplateName": "notebook-gpu"}]);
    spec["containers"][0]["resources"]["claims"] = json!([{"name": "gpu"}]);
    let notebook: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "notebook"},
        "spec": spec,
    }))?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    pods.create(&PostParams::default(), &notebook).await?;

    // The premise: kube-scheduler runs and leads, and yet leaves the pod alone, and no ResourceClaim
    // appears (no resourceclaim controller runs). The harness runs kube-scheduler without leader
    // election, so it writes no Lease: the test writes the one a leading kube-scheduler renews
    // (explain reads it to tell "no scheduler runs" from "the scheduler has nothing to try").
    leases_say_kube_scheduler_leads(&client).await?;
    // A pod created after the notebook is bound: kube-scheduler has worked through its queue.
    let witness: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "witness"},
        "spec": pod_spec("100m"),
    }))?;
    pods.create(&PostParams::default(), &witness).await?;
    eventually("kube-scheduler to bind the witness pod", WAIT, || async {
        let pod = pods.get("witness").await?;
        Ok(pod.spec.and_then(|s| s.node_name))
    })
    .await?;
    let pod = pods.get("notebook").await?;
    ensure!(
        pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_none()
            && pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_none_or(Vec::is_empty),
        "kube-scheduler tried the pod: {:?}",
        pod.status
    );
    let claims = Api::<ResourceClaim>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await?;
    ensure!(
        claims.items.is_empty(),
        "a ResourceClaim was made: {:?}",
        claims.items
    );

    let headline = format!(
        "ResourceClaim {ns}/notebook-gpu-… (claim gpu) is not created yet: the resourceclaim controller makes \
         it from template notebook-gpu"
    );
    let output = kubectl_sched(cp, &ns, &["explain", "notebook"]).await?;
    let text = String::from_utf8_lossy(&output.stdout);
    ensure!(
        text.contains(&format!(
            "{ns}/notebook waits for its ResourceClaims (profile default-scheduler, 3 nodes"
        )) && text.contains(&format!(
            "\n  {headline}\n  kube-scheduler: pod \"{ns}/notebook\": ResourceClaim not created yet\n"
        )) && !text.contains("non-empty scheduling gates"),
        "{}",
        shown(&output)
    );

    let output = kubectl_sched(cp, &ns, &["explain", "notebook", "-o", "json"]).await?;
    let report: Value =
        serde_json::from_slice(&output.stdout).with_context(|| format!("not JSON\n{}", shown(&output)))?;
    let findings = report["still_pending"].as_array().cloned().unwrap_or_default();
    let kinds: Vec<&str> = findings.iter().filter_map(|f| f["kind"].as_str()).collect();
    // kube-scheduler leads and has nothing to try: it is not the one to blame.
    ensure!(kinds == ["claim_not_created"], "findings: {findings:#?}");
    let message = findings[0]["message"].as_str().unwrap_or_default();
    ensure!(
        message.starts_with("it waits for kube-controller-manager, not for kube-scheduler: ")
            && message.contains(&headline)
            && message.contains("--controllers"),
        "{message}"
    );
    ensure!(
        report["claims_not_created"]
            == json!([{
                "pod_claim": "gpu",
                "template": format!("{ns}/notebook-gpu"),
                "template_exists": true,
                "generate_name": "notebook-gpu-",
            }]),
        "{:#}",
        report["claims_not_created"]
    );

    let output = kubectl_sched(cp, &ns, &["triage", "-o", "json"]).await?;
    let report: Value =
        serde_json::from_slice(&output.stdout).with_context(|| format!("not JSON\n{}", shown(&output)))?;
    let (cause, notebook) = group(&report, "pod", "notebook")?;
    ensure!(
        output.status.code() == Some(3)
            && cause["verdict"] == "claims_not_created"
            && cause["cause"]
                == "ResourceClaim (claim gpu) is not created yet: the resourceclaim controller makes it from \
                    template notebook-gpu"
            && notebook["still_pending"][0]["kind"] == "claim_not_created",
        "{}",
        shown(&output)
    );
    Ok(())
}
