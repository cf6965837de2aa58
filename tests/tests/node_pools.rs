//! Node pools against the real Karpenter: a control plane with kube-scheduler (which marks the pods
//! unschedulable, as Karpenter waits for), Karpenter v1.14.0's KWOK provider beside it with the
//! instance types of a file, two NodePools and pending pods. The cluster is saved with `kubectl
//! sched snapshot` (which lists the NodePools) before Karpenter starts; for each pod, `kubectl sched
//! explain POD --instance-types FILE` on that snapshot predicts what Karpenter then does: the pool
//! and instance type of the node it launches, or the error of its `FailedScheduling` event, byte for
//! byte.
//!
//! Karpenter listens on every interface: this suite runs in a network namespace of its own
//! (`tests/e2e-suites.sh` does that; see `e2e::karpenter`).

use std::time::{Duration, Instant};

mod common;

use anyhow::{Context, Result, bail, ensure};
use e2e::karpenter::Karpenter;
use e2e::{ControlPlane, Options};
use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::ListParams;
use serde_json::Value;

/// The instance types Karpenter launches from (KWOK format; sched-core's unit tests read the same
/// file): 4 and 16 cpus amd64/linux, and an arm64 type with no offering.
const INSTANCE_TYPES: &str = include_str!("../../examples/instance-types.json");

/// Two pools: `general` (on-demand amd64, tainted team=ml, 100 cpus) and `capped` (any type, at
/// most 2 cpus: every instance type breaches it), and the pods of the scenario.
const OBJECTS: &str = r#"
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {name: default}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  weight: 10
  template:
    spec:
      requirements:
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      nodeClassRef: {name: default, kind: KWOKNodeClass, group: karpenter.kwok.sh}
      taints: [{key: team, value: ml, effect: NoSchedule}]
  limits: {cpu: "100"}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: capped}
spec:
  weight: 1
  template:
    spec:
      requirements: []
      nodeClassRef: {name: default, kind: KWOKNodeClass, group: karpenter.kwok.sh}
  limits: {cpu: "2"}
"#;

/// A pending pod: its name, whether it tolerates team=ml, its node selector, its cpu.
type PendingPod = (
    &'static str,
    bool,
    Option<(&'static str, &'static str)>,
    &'static str,
);

/// The pending pods.
const PODS: &[PendingPod] = &[
    ("fits", true, None, "2"),
    ("huge", true, None, "1000"),
    ("untolerated", false, None, "1"),
    ("arm", true, Some(("kubernetes.io/arch", "arm64")), "1"),
    ("unknown-label", true, Some(("tier", "db")), "1"),
];

fn pod_yaml(name: &str, tolerates: bool, selector: Option<(&str, &str)>, cpu: &str) -> String {
    let toleration = if tolerates {
        "  tolerations: [{key: team, operator: Equal, value: ml, effect: NoSchedule}]\n"
    } else {
        ""
    };
    let selector = selector.map_or(String::new(), |(k, v)| format!("  nodeSelector: {{{k}: {v}}}\n"));
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec:\n{toleration}{selector}  \
         containers: [{{name: c, image: registry.k8s.io/pause:3.10, resources: {{requests: {{cpu: \"{cpu}\"}}}}}}]\n"
    )
}

/// What Karpenter did for a pod.
#[derive(Debug, PartialEq)]
enum Karpentered {
    /// Launched a node: its pool and instance type.
    Launched { pool: String, instance_type: String },
    /// Its FailedScheduling event, without the prefix.
    Failed(String),
}

const KARPENTER_TIMEOUT: Duration = Duration::from_secs(60);
const FAILED_PREFIX: &str = "Failed to schedule pod, ";
const NOMINATED_PREFIX: &str = "Pod should schedule on: nodeclaim/";

/// Waits for Karpenter's event on `pod` (its FailedScheduling, or Nominated with the NodeClaim, whose
/// node then carries the pool and instance type labels).
async fn karpenter_verdict(cp: &ControlPlane, pod: &str) -> Result<Karpentered> {
    let events: Api<Event> = Api::namespaced(cp.client()?, "default");
    let deadline = Instant::now() + KARPENTER_TIMEOUT;
    loop {
        cp.check_beside("karpenter")?;
        let list = events
            .list(&ListParams::default().fields(&format!("involvedObject.name={pod}")))
            .await?;
        for event in list.items {
            let message = event.message.unwrap_or_default();
            if let Some(error) = message.strip_prefix(FAILED_PREFIX) {
                return Ok(Karpentered::Failed(error.to_owned()));
            }
            if let Some(claim) = message.strip_prefix(NOMINATED_PREFIX) {
                let claim = claim.split(',').next().unwrap_or_default().trim();
                let json = cp.kubectl(&["get", "nodeclaim", claim, "-o", "json"]).await?;
                let claim: Value = serde_json::from_str(&json)?;
                let labels = &claim["metadata"]["labels"];
                let label = |key: &str| labels[key].as_str().unwrap_or_default().to_owned();
                let instance_type = label("node.kubernetes.io/instance-type");
                if instance_type.is_empty() {
                    // Launched a moment ago: the provider fills the type in when it creates the node.
                    continue;
                }
                return Ok(Karpentered::Launched {
                    pool: label("karpenter.sh/nodepool"),
                    instance_type,
                });
            }
        }
        if Instant::now() > deadline {
            bail!(
                "no Karpenter event on pod {pod} in {KARPENTER_TIMEOUT:?}; Karpenter's log: {}",
                cp.dir().join("karpenter.log").display()
            );
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn scale_up_predictions_agree_with_karpenter() -> Result<()> {
    let cp = ControlPlane::start(Options::new().with_scheduler(None)).await?;
    let types_file = cp.dir().join("instance-types.json");
    std::fs::write(&types_file, INSTANCE_TYPES)?;
    Karpenter::install_crds(&cp).await?;
    cp.kubectl(&["create", "serviceaccount", "default", "-n", "default"])
        .await
        .ok();

    let mut manifest = OBJECTS.to_owned();
    for (name, tolerates, selector, cpu) in PODS {
        manifest.push_str(&pod_yaml(name, *tolerates, *selector, cpu));
    }
    let manifest_file = cp.dir().join("scenario.yaml");
    std::fs::write(&manifest_file, &manifest)?;
    cp.kubectl(&["apply", "-f", &manifest_file.to_string_lossy()])
        .await?;

    // The cluster as `kubectl sched` lists it (the NodePools included), before Karpenter acts.
    let binary = common::kubectl_sched_binary().await?;
    let kubeconfig = cp.kubeconfig_path().display().to_string();
    let snapshot = cp.dir().join("snapshot.json");
    let listed = sched(
        &binary,
        &["snapshot", "-A", "-o", "json", "--kubeconfig", &kubeconfig],
    )
    .await?;
    let pools_listed = serde_json::from_str::<Value>(&listed)?["items"]
        .as_array()
        .context("a List")?
        .iter()
        .filter(|item| item["kind"] == "NodePool")
        .count();
    ensure!(
        pools_listed == 2,
        "the snapshot holds {pools_listed} NodePools, not 2"
    );
    std::fs::write(&snapshot, listed)?;
    let _karpenter = Karpenter::start(&cp, &types_file).await?;

    let mut disagreements = Vec::new();
    for (name, ..) in PODS {
        let predicted = explained(&binary, name, &snapshot, &types_file).await?;
        let actual = karpenter_verdict(&cp, name).await?;
        println!("{name}: Karpenter {actual:?}");
        if predicted != actual {
            disagreements.push(format!(
                "{name}:\n  predicted {predicted:?}\n  Karpenter {actual:?}"
            ));
        }
    }
    if !disagreements.is_empty() {
        bail!(
            "{} of {} pods disagree:\n{}",
            disagreements.len(),
            PODS.len(),
            disagreements.join("\n")
        );
    }
    Ok(())
}

/// What `kubectl sched explain POD --instance-types FILE -o json` on the snapshot says Karpenter
/// does: the pool and cheapest instance type of the node it launches, or its event's error.
async fn explained(
    binary: &std::path::Path,
    pod: &str,
    snapshot: &std::path::Path,
    instance_types: &std::path::Path,
) -> Result<Karpentered> {
    let (snapshot, types) = (
        snapshot.display().to_string(),
        instance_types.display().to_string(),
    );
    let args = [
        "explain",
        pod,
        "-n",
        "default",
        "--from",
        &snapshot,
        "--instance-types",
        &types,
        "-o",
        "json",
    ];
    let report: Value = serde_json::from_str(&sched(binary, &args).await?)?;
    let section = &report["node_pools"];
    if let Some(pool) = section["launch"]["pool"].as_str() {
        return Ok(Karpentered::Launched {
            pool: pool.to_owned(),
            instance_type: section["launch"]["instance_types"][0]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        });
    }
    let event = section["karpenter_event"]
        .as_str()
        .with_context(|| format!("explain {pod}: no node_pools section: {report}"))?;
    Ok(Karpentered::Failed(
        event.strip_prefix(FAILED_PREFIX).unwrap_or(event).to_owned(),
    ))
}

/// The binary's stdout; a failure names the command and its stderr.
async fn sched(binary: &std::path::Path, args: &[&str]) -> Result<String> {
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(binary)
            .args(args)
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .with_context(|| format!("kubectl sched {args:?} took more than 60 s"))??;
    ensure!(
        output.status.success(),
        "kubectl sched {args:?} failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8(output.stdout)?)
}
