//! "Why is it still Pending?" (`kubectl sched explain POD`'s `still_pending` findings) against the
//! real control plane.
//!
//! Most cases run on a control plane started without kube-scheduler, so that nothing changes the
//! pods behind the test's back: there the Lease `kube-system/kube-scheduler` never exists (a pending
//! pod's finding says no kube-scheduler holds it), a preemptor can be nominated by hand (the
//! status subresource) to a node whose victim is held by a finalizer, and a gated pod stays gated.
//! The pod of a scheduler no profile names runs on the shared control plane, whose kube-scheduler
//! ignores it. "It fits now" gets a control plane of its own, where kube-scheduler runs only until it
//! has said the pod is unschedulable (its condition and FailedScheduling event), before the cluster
//! changes; so does an expired Lease, written by hand. A user who may not read Leases or events
//! (impersonated through the admin's kubeconfig) gets an answer and `-v 1` notes, not an error.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use common::kubectl_sched_binary;
use e2e::fixtures::{TEST_LABEL, eventually, ready_node};
use e2e::{ControlPlane, Options};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

/// Bounds one `kubectl-sched` run.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
const STUCK_FINALIZER: &str = "example.com/stuck";

static WITHOUT_SCHEDULER: OnceCell<ControlPlane> = OnceCell::const_new();
static BINARY: OnceCell<PathBuf> = OnceCell::const_new();

async fn binary() -> Result<&'static Path> {
    Ok(BINARY.get_or_try_init(kubectl_sched_binary).await?.as_path())
}

/// etcd and kube-apiserver only: no kube-scheduler, so no Lease and no scheduling.
async fn without_scheduler() -> Result<&'static ControlPlane> {
    Ok(WITHOUT_SCHEDULER
        .get_or_try_init(|| ControlPlane::start(Options::new()))
        .await?)
}

/// A pod requesting `cpu`, restricted to the nodes of `test` (shared control planes).
fn pod(name: &str, test: &str, cpu: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {TEST_LABEL: test},
            "containers": [{
                "name": "c",
                "image": common::PAUSE_IMAGE,
                "resources": {"requests": {"cpu": cpu}},
            }],
        },
    })
}

/// Merges `extra` into a JSON object, recursively.
fn merged(mut base: Value, extra: Value) -> Value {
    if let (Some(b), Value::Object(e)) = (base.as_object_mut(), extra) {
        for (k, v) in e {
            match b.get_mut(&k) {
                Some(existing) if existing.is_object() && v.is_object() => {
                    *existing = merged(existing.take(), v);
                }
                _ => {
                    b.insert(k, v);
                }
            }
        }
    }
    base
}

async fn create(pods: &Api<Pod>, pod: Value) -> Result<Pod> {
    let pod: Pod = serde_json::from_value(pod)?;
    let name = pod.metadata.name.clone().unwrap_or_default();
    pods.create(&PostParams::default(), &pod)
        .await
        .with_context(|| format!("creating pod {name}"))
}

/// `kubectl sched explain POD -n NS` with `extra` flags: its stdout (exit 0 or 3).
async fn explain(cp: &ControlPlane, ns: &str, pod: &str, extra: &[&str]) -> Result<String> {
    let output = explain_as(cp.kubeconfig_path(), ns, pod, extra).await?;
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// [`explain`] with `kubeconfig`, returning stdout and stderr.
async fn explain_as(kubeconfig: &Path, ns: &str, pod: &str, extra: &[&str]) -> Result<Output> {
    let kubeconfig = kubeconfig.display().to_string();
    let mut args = vec!["explain", pod, "-n", ns, "--kubeconfig", &kubeconfig, "-v", "1"];
    args.extend_from_slice(extra);
    let output: Output = tokio::time::timeout(
        COMMAND_TIMEOUT,
        tokio::process::Command::new(binary().await?)
            .args(&args)
            .env_remove("KUBECONFIG")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .with_context(|| format!("kubectl-sched {} took too long", args.join(" ")))??;
    ensure!(
        matches!(output.status.code(), Some(0 | 3)),
        "kubectl-sched {} exited with {}:\nstdout: {}\nstderr: {}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(output)
}

/// `explain -o json`'s `still_pending` findings.
async fn findings(cp: &ControlPlane, ns: &str, pod: &str) -> Result<Vec<Value>> {
    let out = explain(cp, ns, pod, &["-o", "json"]).await?;
    let json: Value = serde_json::from_str(&out).with_context(|| format!("not JSON: {out}"))?;
    json["still_pending"]
        .as_array()
        .cloned()
        .with_context(|| format!("no still_pending list in {json:#}"))
}

/// The one finding of `kind`.
fn finding<'a>(findings: &'a [Value], kind: &str) -> Result<&'a Value> {
    findings
        .iter()
        .find(|f| f["kind"] == kind)
        .with_context(|| format!("no {kind} finding in {findings:#?}"))
}

fn message(f: &Value) -> &str {
    f["message"].as_str().unwrap_or("")
}

/// (1) Without kube-scheduler there is no Lease: explain says no kube-scheduler holds it.
#[tokio::test]
async fn a_cluster_without_kube_scheduler_is_named() -> Result<()> {
    let cp = without_scheduler().await?;
    let ns = cp.new_namespace("sp-none").await?;
    let pods: Api<Pod> = Api::namespaced(cp.client()?, &ns);
    create(&pods, pod("waiting", "sp-none", "100m")).await?;

    let found = findings(cp, &ns, "waiting").await?;
    let f = finding(&found, "no_scheduler")?;
    ensure!(
        message(f).contains("no kube-scheduler holds the Lease kube-system/kube-scheduler"),
        "{f:#}"
    );
    let table = explain(cp, &ns, "waiting", &[]).await?;
    ensure!(
        table.contains("Why it is still Pending:\n  - no kube-scheduler holds the Lease"),
        "{table}"
    );
    Ok(())
}

/// (1) A pod of a scheduler no profile names: kube-scheduler (running) ignores it, and explain says
/// so instead of judging it as the default profile's.
#[tokio::test]
async fn a_scheduler_name_without_a_profile_is_named() -> Result<()> {
    let cp = ControlPlane::shared().await?;
    let ns = cp.new_namespace("sp-profile").await?;
    let pods: Api<Pod> = Api::namespaced(cp.client()?, &ns);
    create(
        &pods,
        merged(
            pod("custom", "sp-profile", "100m"),
            json!({"spec": {"schedulerName": "my-scheduler"}}),
        ),
    )
    .await?;

    let found = findings(cp, &ns, "custom").await?;
    let f = finding(&found, "no_profile")?;
    ensure!(
        message(f).contains("spec.schedulerName \"my-scheduler\" names no profile")
            && message(f)
                .contains("unless another scheduler named \"my-scheduler\" runs, nothing schedules it"),
        "{f:#}"
    );
    Ok(())
}

/// (2) A preemptor nominated to a node whose victim a finalizer keeps terminating: explain names the
/// victim, its finalizer and its deletionTimestamp.
#[tokio::test]
async fn a_victim_held_by_a_finalizer_is_named() -> Result<()> {
    let cp = without_scheduler().await?;
    let client = cp.client()?;
    let ns = cp.new_namespace("sp-victim").await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let nodes: Api<Node> = Api::all(client.clone());
    let node = "sp-victim-n1";
    nodes
        .create(
            &PostParams::default(),
            &ready_node(node, "sp-victim", "4", "8Gi", "110"),
        )
        .await?;
    create(
        &pods,
        merged(
            pod("victim", "sp-victim", "3"),
            json!({"metadata": {"finalizers": [STUCK_FINALIZER]}, "spec": {"nodeName": node}}),
        ),
    )
    .await?;
    pods.delete("victim", &DeleteParams::default()).await?;
    create(&pods, pod("preemptor", "sp-victim", "2")).await?;
    pods.patch_status(
        "preemptor",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"nominatedNodeName": node}})),
    )
    .await?;
    let deleted = pods
        .get("victim")
        .await?
        .metadata
        .deletion_timestamp
        .context("the victim has no deletionTimestamp")?;

    let result = async {
        let found = findings(cp, &ns, "preemptor").await?;
        let f = finding(&found, "victims_terminating")?;
        let victim = format!("{ns}/victim");
        ensure!(f["pods"] == json!([victim]), "{f:#}");
        ensure!(
            message(f).contains(&format!("it is nominated to {node}"))
                && message(f).contains(&format!("{victim} (deletionTimestamp {}", deleted.0))
                && message(f).contains(&format!("finalizers: {STUCK_FINALIZER}")),
            "{f:#}"
        );
        let table = explain(cp, &ns, "preemptor", &[]).await?;
        println!("{table}");
        ensure!(
            table.contains(
                "Why it is still Pending:\n  - no kube-scheduler holds the Lease kube-system/kube-scheduler"
            ) && table.contains(&format!("\n  - it is nominated to {node}")),
            "{table}"
        );
        Ok(())
    }
    .await;

    // Let the victim go, whatever the outcome: no kubelet confirms it, so force it.
    pods.patch(
        "victim",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await?;
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    for name in ["victim", "preemptor"] {
        let _ = pods.delete(name, &force).await;
    }
    nodes.delete(node, &DeleteParams::default()).await?;
    result
}

/// (3) A gated pod: explain names its gate.
#[tokio::test]
async fn a_scheduling_gate_is_named() -> Result<()> {
    let cp = without_scheduler().await?;
    let ns = cp.new_namespace("sp-gated").await?;
    let pods: Api<Pod> = Api::namespaced(cp.client()?, &ns);
    create(
        &pods,
        merged(
            pod("gated", "sp-gated", "100m"),
            json!({"spec": {"schedulingGates": [{"name": "example.com/wait-for-quota"}]}}),
        ),
    )
    .await?;

    let found = findings(cp, &ns, "gated").await?;
    let f = finding(&found, "gated")?;
    ensure!(
        message(f).contains("scheduling gates (example.com/wait-for-quota)"),
        "{f:#}"
    );
    Ok(())
}

/// (d) kube-scheduler said the pod does not fit (condition and FailedScheduling event, read through
/// the field-selected LIST); then it stops and a bigger node arrives: explain says the pod fits now,
/// quoting kube-scheduler's last word, and when it would be retried.
#[tokio::test]
async fn a_pod_that_fits_since_kube_scheduler_gave_up_is_named() -> Result<()> {
    let cp = ControlPlane::start(Options::new()).await?;
    let client = cp.client()?;
    let ns = cp.new_namespace("sp-fits").await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .create(
            &PostParams::default(),
            &ready_node("sp-fits-small", "sp-fits", "1", "8Gi", "110"),
        )
        .await?;
    let created = create(&pods, pod("late", "sp-fits", "2")).await?;
    let uid = created.metadata.uid.clone().unwrap_or_default();

    cp.start_scheduler(None).await?;
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    let said = eventually(
        "kube-scheduler's FailedScheduling event",
        Duration::from_secs(30),
        || async {
            let list = events
                .list(
                    &ListParams::default()
                        .fields(&format!("involvedObject.uid={uid},reason=FailedScheduling")),
                )
                .await?;
            let unschedulable = pods
                .get("late")
                .await?
                .status
                .and_then(|s| s.conditions)
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "PodScheduled" && c.reason.as_deref() == Some("Unschedulable"))
                });
            Ok(list
                .items
                .first()
                .filter(|_| unschedulable)
                .and_then(|e| e.message.clone()))
        },
    )
    .await?;
    ensure!(cp.stop_scheduler(), "kube-scheduler was not running");
    nodes
        .create(
            &PostParams::default(),
            &ready_node("sp-fits-big", "sp-fits", "4", "8Gi", "110"),
        )
        .await?;

    let found = findings(&cp, &ns, "late").await?;
    let f = finding(&found, "fits_now")?;
    ensure!(
        message(f)
            .contains("it fits now (on sp-fits-big), but kube-scheduler's last word was that it does not")
            && message(f).contains("PodScheduled=False (Unschedulable) since")
            && message(f).contains("FailedScheduling event last ")
            && message(f).contains(&format!("{said:?}"))
            && message(f).contains("at the latest after 5 min in its unschedulable queue"),
        "{f:#}"
    );
    Ok(())
}

/// A user who may read what the snapshot needs but neither Leases nor events: explain still answers,
/// makes no finding about the scheduler, and `-v 1` says what it could not read.
#[tokio::test]
async fn forbidden_lease_and_events_are_notes_not_errors() -> Result<()> {
    const READER: &str = "sp-reader";
    let cp = without_scheduler().await?;
    let client = cp.client()?;
    let ns = cp.new_namespace("sp-rbac").await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    create(&pods, pod("waiting", "sp-rbac", "100m")).await?;

    let read = json!(["get", "list", "watch"]);
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": READER},
        "rules": [
            {"apiGroups": [""], "verbs": read, "resources": [
                "nodes", "pods", "namespaces", "persistentvolumes", "persistentvolumeclaims", "services",
                "replicationcontrollers",
            ]},
            {"apiGroups": ["apps"], "verbs": read, "resources": ["replicasets", "statefulsets"]},
            {"apiGroups": ["storage.k8s.io", "policy", "scheduling.k8s.io", "resource.k8s.io"],
             "verbs": read, "resources": ["*"]},
        ],
    }))?;
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": READER},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": READER},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": READER}],
    }))?;
    for result in [
        Api::<ClusterRole>::all(client.clone())
            .create(&PostParams::default(), &role)
            .await
            .map(drop),
        Api::<ClusterRoleBinding>::all(client.clone())
            .create(&PostParams::default(), &binding)
            .await
            .map(drop),
    ] {
        match result {
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            other => other?,
        }
    }
    // The admin's kubeconfig, impersonating the reader.
    let mut kubeconfig: yaml_serde::Value =
        yaml_serde::from_str(&std::fs::read_to_string(cp.kubeconfig_path())?)?;
    kubeconfig["users"][0]["user"]["as"] = yaml_serde::Value::from(READER);
    let dir = tempfile::tempdir()?;
    let reader_kubeconfig = dir.path().join("reader.kubeconfig");
    std::fs::write(&reader_kubeconfig, yaml_serde::to_string(&kubeconfig)?)?;

    // RBAC takes effect once the authorizer's informers see the binding.
    let output = eventually("explain as the reader", Duration::from_secs(20), || async {
        Ok(explain_as(&reader_kubeconfig, &ns, "waiting", &["-o", "json"])
            .await
            .ok())
    })
    .await?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    let json: Value = serde_json::from_slice(&output.stdout)?;
    let found = json["still_pending"]
        .as_array()
        .with_context(|| format!("no still_pending list in {json:#}"))?;
    ensure!(found.iter().all(|f| f["kind"] != "no_scheduler"), "{found:#?}");
    ensure!(
        stderr.contains("could not read the Lease kube-system/kube-scheduler")
            && stderr.contains("whether a kube-scheduler leads is not judged")
            && stderr.contains(&format!(
                "could not list the FailedScheduling events of {ns}/waiting"
            )),
        "{stderr}"
    );
    Ok(())
}

/// (1) A Lease left to expire (written by hand on a control plane of its own, as a kube-scheduler that
/// stopped would leave it): explain names its holder and how long ago it was renewed. Renewed, the
/// Lease says a scheduler leads, and a pod without any condition is "never tried".
#[tokio::test]
async fn an_expired_lease_names_its_holder() -> Result<()> {
    let cp = ControlPlane::start(Options::new()).await?;
    let client = cp.client()?;
    let ns = cp.new_namespace("sp-lease").await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    create(&pods, pod("waiting", "sp-lease", "100m")).await?;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let renewed = Timestamp::now()
        .checked_sub(SignedDuration::from_secs(120))
        .context("two minutes ago")?;
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some("kube-scheduler".into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("old-scheduler_1234".into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(renewed)),
            acquire_time: Some(MicroTime(renewed)),
            ..LeaseSpec::default()
        }),
    };
    leases.create(&PostParams::default(), &lease).await?;

    let found = findings(&cp, &ns, "waiting").await?;
    let f = finding(&found, "no_scheduler")?;
    ensure!(
        message(f).contains("no kube-scheduler is leading: the Lease kube-system/kube-scheduler was last renewed by old-scheduler_1234")
            && message(f).contains("longer ago than its leaseDurationSeconds (15 s)"),
        "{f:#}"
    );
    ensure!(found.len() == 1, "{found:#?}");

    // A long lease, so that a slow machine does not see it expire before explain reads it.
    let renewed_now = json!({"spec": {
        "renewTime": MicroTime(Timestamp::now()),
        "leaseDurationSeconds": 3600,
    }});
    leases
        .patch(
            "kube-scheduler",
            &PatchParams::default(),
            &Patch::Merge(renewed_now),
        )
        .await?;
    let found = findings(&cp, &ns, "waiting").await?;
    let f = finding(&found, "never_tried")?;
    ensure!(
        message(f).contains("although a kube-scheduler runs (old-scheduler_1234 holds the Lease"),
        "{f:#}"
    );
    ensure!(found.len() == 1, "{found:#?}");
    Ok(())
}
