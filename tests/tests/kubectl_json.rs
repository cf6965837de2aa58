//! What the real kubectl prints, read by `kubectl sched`: `kubectl get deploy,sts -o json` of 50
//! workloads stored in the real kube-apiserver v1.37.2 (a `List` with status and kubectl's
//! indentation), given to `simulate -f` against the bundled example cluster. The YAML
//! depth guard used to refuse such a file ("flow collections nested more than 128 levels deep");
//! every replica of every workload must now be simulated.

mod common;

use std::collections::BTreeMap;

use anyhow::{Context, Result, ensure};
use common::{kubectl_sched_binary, run_kubectl_sched};
use e2e::ControlPlane;
use serde_json::{Value, json};

const DEPLOYMENTS: usize = 25;
const STATEFULSETS: usize = 25;

/// A workload of `replicas` pods of 10m CPU each, as a user would write it.
fn workload(kind: &str, name: &str, replicas: usize) -> Value {
    let labels = json!({"app": name});
    let mut spec = json!({
        "replicas": replicas,
        "selector": {"matchLabels": labels},
        "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
            }]},
        },
    });
    if kind == "StatefulSet" {
        spec["serviceName"] = json!(name);
    }
    json!({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": spec})
}

#[tokio::test]
async fn simulate_reads_kubectl_get_json_of_fifty_stored_workloads() -> Result<()> {
    let cp = ControlPlane::shared().await?;
    let ns = cp.new_namespace("kjson").await?;
    let mut expected = BTreeMap::new();
    let items: Vec<Value> = (0..DEPLOYMENTS + STATEFULSETS)
        .map(|i| {
            let (kind, name, replicas) = if i < DEPLOYMENTS {
                ("Deployment", format!("web-{i:02}"), 1 + i % 3)
            } else {
                ("StatefulSet", format!("db-{i:02}"), 1 + i % 2)
            };
            expected.insert(name.clone(), replicas);
            workload(kind, &name, replicas)
        })
        .collect();
    let dir = tempfile::tempdir()?;
    let manifests = dir.path().join("workloads.json");
    std::fs::write(
        &manifests,
        serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": items}))?,
    )?;
    cp.kubectl(&["apply", "-n", &ns, "-f", &manifests.display().to_string()])
        .await?;

    // What the user has: kubectl's own JSON of the stored objects.
    let printed = cp
        .kubectl(&["get", "deploy,sts", "-n", &ns, "-o", "json"])
        .await?;
    let listed: Value = serde_json::from_str(&printed).context("kubectl printed JSON")?;
    ensure!(
        listed["items"].as_array().map(Vec::len) == Some(DEPLOYMENTS + STATEFULSETS),
        "kubectl listed {} items",
        listed["items"].as_array().map_or(0, Vec::len)
    );
    ensure!(
        printed.contains("\"status\"") && printed.starts_with("{\n    \""),
        "kubectl's JSON of the stored objects (status, 4-space indentation): {}",
        &printed[..printed.len().min(200)]
    );
    let file = dir.path().join("kubectl-get.json");
    std::fs::write(&file, &printed)?;

    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster.yaml");
    let binary = kubectl_sched_binary().await?;
    let out = run_kubectl_sched(
        &binary,
        &[
            "simulate",
            "--from",
            &example.display().to_string(),
            "-f",
            &file.display().to_string(),
            "-o",
            "json",
        ],
    )
    .await?;
    ensure!(
        matches!(out.status.code(), Some(0 | 3)),
        "simulate -f of kubectl's JSON failed ({:?}): {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).context("simulate -o json")?;
    let total: usize = expected.values().sum();
    ensure!(
        report["summary"]["inputs"] == total,
        "{total} replicas expected: {}",
        report["summary"]
    );
    println!(
        "simulate -f of `kubectl get deploy,sts -o json` ({} bytes, {} workloads): {total} pods simulated",
        printed.len(),
        expected.len()
    );
    Ok(())
}
