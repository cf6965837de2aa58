//! `kubectl sched <TAB>` against the real control plane: kubectl's plugin completion runs
//! `kubectl-sched __complete explain ""`, which lists the pods of the namespace the words name through
//! the kubeconfig they name.

mod common;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use common::kubectl_sched_binary;
use e2e::ControlPlane;
use e2e::fixtures::TEST_LABEL;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

/// Completion answers within its own lookup timeout; this bounds a run that would not.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// `kubectl-sched __complete WORDS...`: its stdout, which must end with cobra's directive.
async fn complete(words: &[&str]) -> Result<String> {
    let output = tokio::time::timeout(
        COMMAND_TIMEOUT,
        tokio::process::Command::new(kubectl_sched_binary().await?)
            .arg("__complete")
            .args(words)
            .env_remove("KUBECONFIG")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .context("kubectl-sched __complete took too long")??;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    ensure!(
        output.status.success(),
        "kubectl-sched __complete {words:?} exited with {}:\nstdout: {stdout}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(stdout)
}

/// A pending pod of the namespace `-n` names is offered to `explain`, described as Pending; a
/// kubeconfig that does not exist yields no candidate and no error, only the directive.
#[tokio::test]
async fn explain_completes_the_pods_of_the_namespace_named() -> Result<()> {
    let cp = ControlPlane::shared().await?;
    let ns = cp.new_namespace("complete").await?;
    let pods: Api<Pod> = Api::namespaced(cp.client()?, &ns);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "waiting-for-tab"},
        "spec": {
            // No node has this label: the pod stays pending.
            "nodeSelector": {TEST_LABEL: "complete"},
            "containers": [{"name": "c", "image": common::PAUSE_IMAGE}],
        },
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    let kubeconfig = cp.kubeconfig_path().display().to_string();

    let out = complete(&["--kubeconfig", &kubeconfig, "explain", "-n", &ns, ""]).await?;
    ensure!(
        out.lines().any(|l| l == "waiting-for-tab\tPending") && out.ends_with(":4\n"),
        "{out}"
    );
    let out = complete(&["explain", "--kubeconfig", &kubeconfig, "--namespace", &ns, "wait"]).await?;
    ensure!(out == "waiting-for-tab\tPending\n:4\n", "{out}");
    // Another namespace has no such pod.
    let out = complete(&["explain", "--kubeconfig", &kubeconfig, "-n", "kube-public", ""]).await?;
    ensure!(!out.contains("waiting-for-tab"), "{out}");

    let missing = cp.dir().join("no-such-kubeconfig").display().to_string();
    let out = complete(&["explain", "--kubeconfig", &missing, "-n", &ns, ""]).await?;
    ensure!(out == ":4\n", "{out}");
    Ok(())
}
