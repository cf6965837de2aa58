//! kubectl-sched with a user's own, limited rights (deploy/rbac/): a ServiceAccount's token in a
//! kubeconfig of its own, against the real kube-apiserver (RBAC on).
//!
//! - Without any rights, `explain` fails with one line that reads as kubectl's (`Error from server
//!   (Forbidden): nodes is forbidden: User "system:serviceaccount:..." cannot list resource "nodes"
//!   ...`), not with a dump of the API server's Status.
//! - With `kubectl-sched-reader` alone, `explain` answers (every kind it loads may be listed, so there
//!   is no warning either), and `preempt --yes` is refused at its first write, changing nothing.
//! - With `kubectl-sched-preempter` bound as well, `preempt --yes` carries out the plan.
//!
//! One control plane without kube-scheduler (it would preempt for the pending pod itself).

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use common::{
    HIGH, LOW, Lab, RBAC_TIMEOUT, apiserver_only, kubectl_sched_binary, pod, run_kubectl_sched, show,
};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use serde_json::{Value, json};

fn rbac_manifest(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("deploy")
        .join("rbac")
        .join(name)
}

/// A ServiceAccount of the lab's namespace and a kubeconfig holding nothing but its token.
async fn service_account_kubeconfig(lab: &Lab, name: &str, dir: &Path) -> Result<PathBuf> {
    let cp = lab.cp;
    cp.kubectl(&["create", "serviceaccount", name, "-n", &lab.ns])
        .await?;
    let token = cp
        .kubectl(&["create", "token", name, "-n", &lab.ns, "--duration=1h"])
        .await?;
    let admin = cp
        .kubectl(&["config", "view", "--raw", "--flatten", "-o", "json"])
        .await?;
    let mut config: Value = serde_json::from_str(&admin)?;
    for user in config["users"]
        .as_array_mut()
        .context("the admin kubeconfig has users")?
    {
        user["user"] = json!({ "token": token.trim() });
    }
    let path = dir.join(format!("{name}.kubeconfig"));
    std::fs::write(&path, serde_json::to_vec_pretty(&config)?)?;
    Ok(path)
}

/// `kubectl-sched ARGS --kubeconfig KUBECONFIG`.
async fn run(binary: &Path, kubeconfig: &Path, args: &[&str]) -> Result<Output> {
    let kubeconfig = kubeconfig.display().to_string();
    run_kubectl_sched(binary, &[args, &["--kubeconfig", &kubeconfig]].concat()).await
}

/// [`run`] until it succeeds or [`RBAC_TIMEOUT`] passes (a new binding takes effect within a moment);
/// the last output either way.
async fn run_once_allowed(binary: &Path, kubeconfig: &Path, args: &[&str]) -> Result<Output> {
    let deadline = std::time::Instant::now() + RBAC_TIMEOUT;
    loop {
        let output = run(binary, kubeconfig, args).await?;
        if output.status.success() || std::time::Instant::now() >= deadline {
            return Ok(output);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn reader_and_preempter_roles_are_enough_and_denials_read_as_kubectls() -> Result<()> {
    let binary = kubectl_sched_binary().await?;
    let lab = Lab::begin_on("perm", apiserver_only).await?;
    let cp = lab.cp;
    let ns = lab.ns.clone();
    let n1 = lab.n("n1");
    lab.create_nodes([lab.node("n1", "2", "4Gi")]).await?;
    lab.create_pods([
        pod("victim")
            .label("app", "victim")
            .priority_class(LOW)
            .cpu("2")
            .on(&n1),
        pod("p").priority_class(HIGH).cpu("1"),
    ])
    .await?;
    let dir = tempfile::tempdir()?;

    // No rights at all: one line, as kubectl words a 403.
    let nobody = service_account_kubeconfig(&lab, "nobody", dir.path()).await?;
    let output = run(&binary, &nobody, &["explain", "p", "-n", &ns]).await?;
    let text = show(&output);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let want = format!(
        "cannot list Node (v1): Error from server (Forbidden): nodes is forbidden: User \
         \"system:serviceaccount:{ns}:nobody\" cannot list resource \"nodes\" in API group \"\" at the \
         cluster scope"
    );
    // Then the permission, and the role of deploy/rbac/ that grants it.
    let advice = "missing permission: list nodes cluster-wide; the ClusterRole kubectl-sched-reader grants it \
                  (deploy/rbac/kubectl-sched-reader.yaml)";
    ensure!(
        output.status.code() == Some(1)
            && stderr.lines().count() == 1
            && stderr.starts_with("error: ")
            && stderr.contains(&format!("{want}; {advice}"))
            && !stderr.contains("Status {"),
        "a 403 is not one kubectl-like line with {want:?} and {advice:?}: {text}"
    );

    // The reader role: explain answers, preempt --yes is refused at its first write.
    for manifest in ["kubectl-sched-reader.yaml", "kubectl-sched-preempter.yaml"] {
        let path = rbac_manifest(manifest);
        cp.kubectl(&["apply", "--server-side", "-f", &path.display().to_string()])
            .await?;
    }
    let reader = service_account_kubeconfig(&lab, "reader", dir.path()).await?;
    let subject = format!("{ns}:reader");
    let binding = format!("{ns}-reader");
    cp.kubectl(&[
        "create",
        "clusterrolebinding",
        &binding,
        "--clusterrole=kubectl-sched-reader",
        &format!("--serviceaccount={subject}"),
    ])
    .await?;
    let output = run_once_allowed(&binary, &reader, &["explain", "p", "-n", &ns, "-o", "json"]).await?;
    let text = show(&output);
    ensure!(output.status.success(), "explain as kubectl-sched-reader: {text}");
    let report: Value = serde_json::from_slice(&output.stdout).with_context(|| text.clone())?;
    ensure!(
        report["pod"] == json!(format!("{ns}/p")) && report["nodes_total"].as_u64() >= Some(1),
        "explain as the reader: {text}"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    ensure!(
        !stderr.contains("cannot list") && !stderr.contains("warning: the API server is"),
        "the reader role misses a kind explain lists (or a skew warning at the same version): {text}"
    );

    let output = run(&binary, &reader, &["preempt", "p", "-n", &ns, "--yes"]).await?;
    let text = show(&output);
    ensure!(
        output.status.code() == Some(1) && String::from_utf8_lossy(&output.stderr).contains("forbidden"),
        "preempt --yes with the reader role alone did not fail on a denied write: {text}"
    );
    // Running again cannot grant a permission: the error and the summary name it (the first write is the
    // victim's DisruptionTarget condition) and its role instead.
    // "missing permission: ..." in the error on stderr, "Missing permission: ..." starting the summary's
    // line on stdout.
    let named = |missing: &str| {
        format!(
            "{missing} permission: patch pods/status in namespace \"{ns}\"; the ClusterRole \
             kubectl-sched-preempter grants it (deploy/rbac/kubectl-sched-preempter.yaml)"
        )
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    ensure!(
        String::from_utf8_lossy(&output.stderr).contains(&named("missing"))
            && stdout.contains(&named("Missing"))
            && !text.contains("run the command again")
            && !text.contains("Running the same command again"),
        "a denied write does not name {:?}, or advises running again: {text}",
        named("missing")
    );
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), &ns);
    ensure!(
        pods.get("victim").await?.metadata.deletion_timestamp.is_none(),
        "the victim was deleted without the preempter role: {text}"
    );

    // With the preempter role too, the plan is carried out.
    cp.kubectl(&[
        "create",
        "clusterrolebinding",
        &format!("{ns}-preempter"),
        "--clusterrole=kubectl-sched-preempter",
        &format!("--serviceaccount={subject}"),
    ])
    .await?;
    let output = run_once_allowed(&binary, &reader, &["preempt", "p", "-n", &ns, "--yes"]).await?;
    let text = show(&output);
    ensure!(
        output.status.success(),
        "preempt --yes as kubectl-sched-reader + kubectl-sched-preempter: {text}"
    );
    // Each step is printed once, as it completes: not also as a plan before, nor in a results table
    // after.
    for step in [
        format!("delete pod {ns}/victim"),
        format!("set nominatedNodeName={n1} on pod {ns}/p"),
    ] {
        ensure!(
            text.matches(&step).count() == 1,
            "{step:?} is not printed exactly once: {text}"
        );
    }
    ensure!(
        pods.get_opt("victim")
            .await?
            .is_none_or(|p| p.metadata.deletion_timestamp.is_some()),
        "the victim was not deleted: {text}"
    );
    let p = pods.get("p").await?;
    ensure!(
        p.status.and_then(|s| s.nominated_node_name).as_deref() == Some(n1.as_str()),
        "the preemptor was not nominated to {n1}: {text}"
    );
    Ok(())
}
