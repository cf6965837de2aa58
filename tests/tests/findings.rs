//! Issue 30, against the real control plane: for a blocker, `kubectl sched explain` names the object
//! at fault (a finding with its reason code) and its first hint, applied to the real cluster (the
//! pod recreated with the changed spec, the named pods deleted, or the printed PersistentVolume
//! applied with kubectl), lets the real kube-scheduler bind the pod.

mod common;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use common::{CSI_DRIVER, Lab, PodBuilder, kubectl_sched_binary, pod};
use e2e::fixtures::wait_for;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use sched_core::diagnosis::{Change, LOCAL_PATH_PLACEHOLDER};
use serde_json::{Value, json};

const ZONE: &str = "topology.kubernetes.io/zone";
/// Bounds one `kubectl-sched` run.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// How long kube-scheduler gets to bind the pod once the hint is applied (it retries an
/// unschedulable pod on the cluster event the change makes, or after its backoff at the latest).
const BIND_TIMEOUT: Duration = Duration::from_secs(60);

/// `kubectl sched explain POD -n NS -o json` against the lab's API server.
async fn explain_json(lab: &Lab, pod: &str) -> Result<Value> {
    let kubeconfig = lab.cp.kubeconfig_path().display().to_string();
    let args = [
        "explain",
        pod,
        "-n",
        &lab.ns,
        "--kubeconfig",
        &kubeconfig,
        "-o",
        "json",
    ];
    let output = tokio::time::timeout(
        COMMAND_TIMEOUT,
        tokio::process::Command::new(kubectl_sched_binary().await?)
            .args(args)
            .env_remove("KUBECONFIG")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .context("kubectl-sched explain took too long")??;
    let out = String::from_utf8_lossy(&output.stdout);
    ensure!(
        output.status.success(),
        "explain exited with {}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&out).with_context(|| format!("not JSON: {out}"))
}

/// Applies `hint` (its `change`) to the real cluster as a user would: a change to the pod's spec
/// recreates it (most of a pod's spec is immutable), deleted pods are deleted (grace 0: no kubelet
/// runs here), a PersistentVolume is the hint's YAML with its placeholder path replaced by a
/// directory the test makes, applied with kubectl.
async fn apply_live(lab: &Lab, pending: &Pod, hint: &Value, change: &Change) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), &lab.ns);
    let name = pending.metadata.name.clone().unwrap_or_default();
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    let mut edited = Pod {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.clone()),
            labels: pending.metadata.labels.clone(),
            ..Default::default()
        },
        spec: pending.spec.clone(),
        status: None,
    };
    if change.edit_pod(&mut edited) {
        pods.delete(&name, &now).await?;
        wait_for(&format!("{name} to be gone"), BIND_TIMEOUT, || async {
            Ok(pods.get_opt(&name).await?.is_none().then_some(()))
        })
        .await?;
        pods.create(&PostParams::default(), &edited).await?;
    }
    for key in change.deleted_pods() {
        let (ns, other) = key.split_once('/').context("namespace/name")?;
        Api::<Pod>::namespaced(lab.client.clone(), ns)
            .delete(other, &now)
            .await
            .with_context(|| format!("deleting {key}"))?;
    }
    if let Change::CreatePersistentVolume { .. } = change {
        let yaml = hint["snippet"].as_str().context("a volume hint without YAML")?;
        ensure!(
            yaml.contains(LOCAL_PATH_PLACEHOLDER),
            "no placeholder path in {yaml}"
        );
        // No kubelet mounts it here; a user would give a directory of the node.
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("volume.yaml");
        let path = dir.path().display().to_string();
        std::fs::write(&file, yaml.replace(LOCAL_PATH_PLACEHOLDER, &path))?;
        lab.cp
            .kubectl(&["apply", "-f", &file.display().to_string()])
            .await
            .context("kubectl apply of the hint's PersistentVolume")?;
    }
    ensure!(change.uncordoned_nodes().is_empty(), "no scenario here uncordons");
    Ok(())
}

/// The scenario: kube-scheduler rejects `pending`; explain's finding has `reason` and names `words`;
/// the first hint is `first`; applied, kube-scheduler binds the pod.
async fn first_hint_lets_kube_scheduler_bind(
    lab: &Lab,
    pending: PodBuilder,
    reason: &str,
    words: &[&str],
    first: fn(&Change) -> bool,
) -> Result<()> {
    let trial = lab.trial(pending.clone()).await?;
    trial.expect_failed(&[])?;
    let name = pending.name().to_string();
    let v = explain_json(lab, &name).await?;
    let finding = v["findings"]
        .as_array()
        .context("no findings")?
        .iter()
        .find(|f| f["reason"] == reason)
        .with_context(|| format!("no {reason} finding in {:#}", v["findings"]))?;
    let message = finding["message"].as_str().unwrap_or_default();
    for w in words {
        ensure!(message.contains(w), "{message:?} does not name {w:?}");
    }
    let hint = v["hints"]
        .as_array()
        .context("no hints")?
        .iter()
        .find(|h| h.get("change").is_some())
        .with_context(|| format!("no change hint in {:#}", v["hints"]))?;
    let change: Change = serde_json::from_value(hint["change"].clone())?;
    ensure!(first(&change), "first hint {change:?}");
    apply_live(lab, &trial.pod, hint, &change).await?;
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), &lab.ns);
    let node = wait_for(
        &format!("kube-scheduler to bind {name}"),
        BIND_TIMEOUT,
        || async {
            let live = pods.get(&name).await?;
            Ok(live.spec.and_then(|s| s.node_name).filter(|n| !n.is_empty()))
        },
    )
    .await
    .with_context(|| {
        format!(
            "{}\n{}",
            lab.cp.log_tail("kube-scheduler", 20),
            lab.cp.log_tail("kube-controller-manager", 10)
        )
    })?;
    let expected: Vec<String> = serde_json::from_value(hint["nodes"].clone())?;
    ensure!(
        expected.contains(&node),
        "kube-scheduler bound {name} to {node}, the hint said {expected:?}"
    );
    Ok(())
}

/// Whether the hint's change is the toleration of the `dedicated` taint alone (the user's taint of
/// the scenarios here).
fn tolerates_dedicated(change: &Change) -> bool {
    matches!(change, Change::AddToleration { taints } if taints.len() == 1 && taints[0].key == "dedicated")
}

/// Fails unless kube-scheduler bound the scenario's pod `name` to `node` (where the hint said).
async fn ensure_bound_to(lab: &Lab, name: &str, node: &str) -> Result<()> {
    let live = Api::<Pod>::namespaced(lab.client.clone(), &lab.ns)
        .get(name)
        .await?;
    ensure!(
        live.spec.and_then(|s| s.node_name).as_deref() == Some(node),
        "{name} not on {node}"
    );
    Ok(())
}

/// A required node affinity to a zone no node has: explain says which zones the nodes have, and
/// dropping the requirement lets kube-scheduler bind the pod.
#[tokio::test]
async fn a_zone_no_node_has_is_named_and_dropping_it_binds() -> Result<()> {
    let lab = Lab::begin("find-zone").await?;
    lab.create_nodes(
        [("a", "zone-a"), ("b", "zone-b"), ("c", "zone-c")]
            .map(|(n, z)| lab.node(n, "4", "8Gi").label(ZONE, z)),
    )
    .await?;
    let pending = pod("wants-d").cpu("100m").spec(
        "affinity",
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-d"]}]}
        ]}}}),
    );
    first_hint_lets_kube_scheduler_bind(
        &lab,
        pending,
        "NodeAffinityNoNodeHasValue",
        &["zone In [zone-d]", "nodes have zone-a, zone-b, zone-c"],
        |c| matches!(c, Change::RemoveNodeAffinityRequirement { key, .. } if key == ZONE),
    )
    .await
}

/// A host port held by a running pod: explain names the pod, and deleting it lets kube-scheduler
/// bind the pending one.
#[tokio::test]
async fn the_pod_holding_a_host_port_is_named_and_deleting_it_binds() -> Result<()> {
    let lab = Lab::begin("find-port").await?;
    lab.create_nodes([lab.node("a", "4", "8Gi")]).await?;
    lab.create_pods([pod("holder").host_port(8080).on(&lab.n("a"))])
        .await?;
    first_hint_lets_kube_scheduler_bind(
        &lab,
        pod("wants-port").host_port(8080),
        "HostPortInUse",
        &["host port TCP/0.0.0.0:8080 is held by pod", "/holder"],
        |c| matches!(c, Change::DeletePods { pods } if pods.len() == 1 && pods[0].ends_with("/holder")),
    )
    .await
}

/// Required anti-affinity with pods running in every zone: explain names the pods and their zones,
/// and the first hint (drop the term) lets kube-scheduler bind the pod.
#[tokio::test]
async fn anti_affinity_collisions_are_named_and_the_first_hint_binds() -> Result<()> {
    let lab = Lab::begin("find-anti").await?;
    lab.create_nodes([("a", "zone-a"), ("b", "zone-b")].map(|(n, z)| lab.node(n, "4", "8Gi").label(ZONE, z)))
        .await?;
    lab.create_pods([
        pod("db-0").label("app", "db").on(&lab.n("a")),
        pod("db-1").label("app", "db").on(&lab.n("b")),
    ])
    .await?;
    let pending = pod("db-2").label("app", "db").spec(
        "affinity",
        json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": ZONE}
        ]}}),
    );
    first_hint_lets_kube_scheduler_bind(
        &lab,
        pending,
        "PodAntiAffinityCollision",
        &["/db-0 in topology.kubernetes.io/zone=zone-a"],
        |c| matches!(c, Change::RemovePodAntiAffinityTerm { term: 0 }),
    )
    .await
}

/// A user's taint on the only worker (and the control plane's on the other node): explain names the
/// taint, proposes no toleration of the control plane's, and the first hint (tolerate the user's
/// taint) lets kube-scheduler bind the pod to the worker.
#[tokio::test]
async fn a_users_taint_is_named_and_tolerating_it_binds() -> Result<()> {
    let lab = Lab::begin("find-taint").await?;
    lab.create_nodes([
        lab.node("a", "4", "8Gi")
            .taint("dedicated", "batch", "NoSchedule"),
        lab.node("cp", "4", "8Gi")
            .taint("node-role.kubernetes.io/control-plane", "", "NoSchedule"),
    ])
    .await?;
    first_hint_lets_kube_scheduler_bind(
        &lab,
        pod("batch-job").cpu("100m"),
        "TaintNotTolerated",
        &["untolerated taint dedicated=batch:NoSchedule"],
        tolerates_dedicated,
    )
    .await
}

/// A node short of cpu: explain says how much is missing and free, and the first hint (lower the
/// request to what is free) lets kube-scheduler bind the pod.
#[tokio::test]
async fn missing_cpu_is_named_and_lowering_the_request_binds() -> Result<()> {
    let lab = Lab::begin("find-cpu").await?;
    lab.create_nodes([lab.node("a", "2", "8Gi")]).await?;
    lab.create_pods([pod("busy").cpu("1500m").on(&lab.n("a"))])
        .await?;
    first_hint_lets_kube_scheduler_bind(
        &lab,
        pod("wants-cpu").cpu("1"),
        "InsufficientResource",
        &["needs 500m more cpu (requests 1, 500m free)"],
        |c| matches!(c, Change::LowerRequest { resource, to: 500 } if resource == "cpu"),
    )
    .await
}

/// minDomains 5 with 3 zones: explain names the constraint, the domains that exist and their
/// counts, and the first hint (minDomains = the domains that exist) lets kube-scheduler bind the pod.
#[tokio::test]
async fn min_domains_beyond_the_zones_is_named_and_lowering_it_binds() -> Result<()> {
    let lab = Lab::begin("find-spread").await?;
    lab.create_nodes(
        [("a", "zone-a"), ("b", "zone-b"), ("c", "zone-c")]
            .map(|(n, z)| lab.node(n, "4", "8Gi").label(ZONE, z)),
    )
    .await?;
    lab.create_pods(["a", "b", "c"].map(|n| pod(&format!("w-{n}")).label("app", "w").on(&lab.n(n))))
        .await?;
    let pending = pod("w-d").label("app", "w").spec(
        "topologySpreadConstraints",
        json!([{
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "w"}},
            "minDomains": 5,
        }]),
    );
    first_hint_lets_kube_scheduler_bind(
        &lab,
        pending,
        "TopologySpreadMinDomains",
        &["minDomains 5 but only 3 domain(s) exist (zone-a=1, zone-b=1, zone-c=1)"],
        |c| {
            matches!(
                c,
                Change::SetMinDomains {
                    constraint: 0,
                    min_domains: Some(3)
                }
            )
        },
    )
    .await
}

/// A ReadWriteOncePod claim in use by a running pod: explain names the claim and its holder, and the
/// first hint (delete the holder) lets kube-scheduler bind the pending pod.
#[tokio::test]
async fn the_holder_of_a_read_write_once_pod_claim_is_named_and_deleting_it_binds() -> Result<()> {
    let lab = Lab::begin("find-rwop").await?;
    lab.create_nodes([lab.node("a", "4", "8Gi")]).await?;
    // Pre-bound both ways, so the PV binder binds them at once whatever else the cluster holds.
    let volume = format!("{}-solo", lab.ns);
    lab.create_cluster::<PersistentVolume>(json!({
        "metadata": {"name": volume},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOncePod"],
            "storageClassName": "",
            "persistentVolumeReclaimPolicy": "Retain",
            "claimRef": {"namespace": lab.ns, "name": "solo"},
            "hostPath": {"path": "/tmp/e2e-unused"},
        },
    }))
    .await?;
    lab.create_namespaced::<PersistentVolumeClaim>(json!({
        "metadata": {"name": "solo"},
        "spec": {
            "accessModes": ["ReadWriteOncePod"],
            "storageClassName": "",
            "volumeName": volume,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }))
    .await?;
    lab.wait_claim_bound("solo").await?;
    lab.create_pods([pod("holder").claim("solo").on(&lab.n("a"))])
        .await?;
    first_hint_lets_kube_scheduler_bind(
        &lab,
        pod("wants-solo").claim("solo"),
        "ReadWriteOncePodInUse",
        &[
            "persistentvolumeclaim ",
            "/solo is ReadWriteOncePod and in use by pod ",
            "/holder",
        ],
        |c| matches!(c, Change::DeletePods { pods } if pods.len() == 1 && pods[0].ends_with("/holder")),
    )
    .await
}

/// The StatefulSet pod: its WaitForFirstConsumer claim's class has no provisioner and both
/// its volumes are bound to other claims. explain names the claim and the volumes; the first hint is
/// the PersistentVolume that would serve it, on the node that passes every other filter (a lacks
/// cpu), printed as YAML; applied with kubectl, the PV controller and kube-scheduler bind claim and
/// pod.
#[tokio::test]
async fn a_claim_no_volume_serves_is_named_and_the_proposed_volume_binds() -> Result<()> {
    let lab = Lab::begin("find-pv").await?;
    lab.create_nodes([lab.node("a", "1", "8Gi"), lab.node("b", "4", "8Gi")])
        .await?;
    let class = format!("{}-local", lab.ns);
    lab.create_cluster::<StorageClass>(json!({
        "metadata": {"name": class},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
    }))
    .await?;
    let claim = |name: &str, volume: Option<&str>| {
        json!({
            "metadata": {"name": name},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": class,
                "volumeName": volume,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        })
    };
    for (i, node) in ["a", "b"].into_iter().enumerate() {
        let (volume, owner) = (format!("{}-pv-{i}", lab.ns), format!("data-db-{i}"));
        lab.create_cluster::<PersistentVolume>(json!({
            "metadata": {"name": volume},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": class,
                "persistentVolumeReclaimPolicy": "Retain",
                "claimRef": {"namespace": lab.ns, "name": owner},
                "local": {"path": "/mnt/unused"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [lab.n(node)]},
                ]}]}},
            },
        }))
        .await?;
        lab.create_namespaced::<PersistentVolumeClaim>(claim(&owner, Some(&volume)))
            .await?;
        lab.wait_claim_bound(&owner).await?;
    }
    lab.create_namespaced::<PersistentVolumeClaim>(claim("data-db-2", None))
        .await?;
    let (ns, b) = (lab.ns.clone(), lab.n("b"));
    first_hint_lets_kube_scheduler_bind(
        &lab,
        pod("db-2").cpu("2").claim("data-db-2"),
        "NoVolumeForClaim",
        &[
            &format!("persistentvolumeclaim {ns}/data-db-2"),
            &format!("{ns}-pv-0 (bound to persistentvolumeclaim {ns}/data-db-0)"),
            &format!("{ns}-pv-1 (bound to persistentvolumeclaim {ns}/data-db-1)"),
        ],
        |c| matches!(c, Change::CreatePersistentVolume { claim, .. } if claim.ends_with("/data-db-2")),
    )
    .await?;
    // The pod went where the volume was proposed, and the claim is bound to that volume.
    ensure_bound_to(&lab, "db-2", &b).await?;
    let bound = Api::<PersistentVolumeClaim>::namespaced(lab.client.clone(), &lab.ns)
        .get("data-db-2")
        .await?;
    ensure!(
        bound.spec.and_then(|s| s.volume_name).as_deref() == Some(format!("{ns}-data-db-2").as_str()),
        "data-db-2 is not bound to the proposed volume"
    );
    Ok(())
}

/// A claim bound to a volume in zone-a whose only zone-a node carries a user's taint (the zone-b
/// nodes are free): explain names the volume and both zones, offers nothing for the zone-b nodes (a
/// bound volume does not move), and the first hint (tolerate the zone-a node's taint) lets
/// kube-scheduler bind the pod there.
#[tokio::test]
async fn a_volume_in_another_zone_is_named_and_the_zone_a_nodes_fix_binds() -> Result<()> {
    let lab = Lab::begin("find-vzone").await?;
    lab.create_nodes([
        lab.node("a", "4", "8Gi")
            .label(ZONE, "zone-a")
            .taint("dedicated", "db", "NoSchedule"),
        lab.node("b", "4", "8Gi").label(ZONE, "zone-b"),
        lab.node("c", "4", "8Gi").label(ZONE, "zone-b"),
    ])
    .await?;
    // Pre-bound both ways, so the PV binder binds them at once whatever else the cluster holds.
    let volume = format!("{}-zonal", lab.ns);
    lab.create_cluster::<PersistentVolume>(json!({
        "metadata": {"name": volume, "labels": {ZONE: "zone-a"}},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "persistentVolumeReclaimPolicy": "Retain",
            "claimRef": {"namespace": lab.ns, "name": "data"},
            "hostPath": {"path": "/tmp/e2e-unused"},
        },
    }))
    .await?;
    lab.create_namespaced::<PersistentVolumeClaim>(json!({
        "metadata": {"name": "data"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "volumeName": volume,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }))
    .await?;
    lab.wait_claim_bound("data").await?;
    let a = lab.n("a");
    first_hint_lets_kube_scheduler_bind(
        &lab,
        pod("db-0").cpu("100m").claim("data"),
        "VolumeZoneConflict",
        &[
            &format!("persistentvolume {volume} is in topology.kubernetes.io/zone zone-a"),
            "the node has zone-b",
        ],
        tolerates_dedicated,
    )
    .await?;
    ensure_bound_to(&lab, "db-0", &a).await?;
    Ok(())
}

/// a at its CSI driver's attach limit (CSINode `allocatable.count` 2, two pods there holding a volume
/// each), b with room but a user's taint: explain names the driver, the counts and the limit, and the
/// first hint (tolerate b's taint; the attach limit is the node's, no hint of its own) lets
/// kube-scheduler bind the pod to b.
#[tokio::test]
async fn a_node_at_its_attach_limit_is_named_and_the_node_with_rooms_fix_binds() -> Result<()> {
    let lab = Lab::begin("find-vlimit").await?;
    lab.create_nodes([
        lab.node("a", "4", "8Gi"),
        lab.node("b", "4", "8Gi").taint("dedicated", "db", "NoSchedule"),
    ])
    .await?;
    let (a, b) = (lab.n("a"), lab.n("b"));
    lab.create_csi_volumes(&a, 2, &["data-0", "data-1"]).await?;
    lab.create_csi_volumes(&b, 2, &["data-2"]).await?;
    lab.create_pods([
        pod("holder-0").claim("data-0").on(&a),
        pod("holder-1").claim("data-1").on(&a),
    ])
    .await?;
    first_hint_lets_kube_scheduler_bind(
        &lab,
        pod("db-2").cpu("100m").claim("data-2"),
        "VolumeLimitExceeded",
        &[
            &format!(
                "CSI driver {CSI_DRIVER}: 2 volume(s) on the node and the pod's 1 would pass its limit of 2"
            ),
            // No hint can change the limit: the finding says what would have to.
            "the pod needs a node with room for 1 more of its volumes (or 1 fewer attached here)",
        ],
        tolerates_dedicated,
    )
    .await?;
    ensure_bound_to(&lab, "db-2", &b).await?;
    Ok(())
}
