//! The CLI speaks the cluster's release: `kubectl sched explain` against a real v1.33 kube-apiserver
//! (built from that release, `tests/controlplane/releases/v1.33`) evaluates with kube-scheduler
//! v1.33.13's semantics and says so in its header; `--kube-version v1.37.2` evaluates the same
//! cluster as v1.37.2 would (with one warning line naming both); `snapshot` records the server's
//! release and `explain --from` uses it; a release outside the supported range is a one-line usage
//! error (exit 2).
//!
//! The taint message differs between the two releases (`node(s) had untolerated taint {key: value}`
//! on 1.33, `node(s) had untolerated taint(s)` on 1.37): those assertions hold once the engine's
//! TaintToleration follows the release (its reason string is a release change).

mod common;

use anyhow::{Context, Result, ensure};
use common::{kubectl_sched_binary, run_kubectl_sched};
use e2e::fixtures::ready_node;
use e2e::{ControlPlane, Options};
use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

/// The headline of the tainted scenario with `release`'s semantics.
fn header(ns: &str, release: &str) -> String {
    format!(
        "{ns}/web cannot be scheduled (profile default-scheduler, 1 nodes, kube-scheduler {release} semantics):"
    )
}

/// One node tainted `dedicated=gpu:NoSchedule` and a pending pod that does not tolerate it (no
/// kube-scheduler runs: the pod stays Pending, as `explain` needs).
async fn tainted_cluster(cp: &ControlPlane) -> Result<String> {
    let client = cp.client()?;
    let ns = cp.new_namespace("versions").await?;
    let mut node: Node = ready_node("versions-gpu", "versions-cli", "4", "8Gi", "110");
    node.spec.get_or_insert_with(Default::default).taints = Some(vec![Taint {
        key: "dedicated".into(),
        value: Some("gpu".into()),
        effect: "NoSchedule".into(),
        time_added: None,
    }]);
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .context("creating the tainted node")?;
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"containers": [{
            "name": "c",
            "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": "100m"}},
        }]},
    }))?;
    Api::<Pod>::namespaced(client, &ns)
        .create(&PostParams::default(), &pod)
        .await
        .context("creating the pending pod")?;
    Ok(ns)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn explain_against_a_v1_33_api_server_speaks_v1_33_unless_kube_version_says_otherwise() -> Result<()> {
    let cp = ControlPlane::start(Options::new().with_release("v1.33")).await?;
    ensure!(
        cp.release()?.starts_with("v1.33."),
        "the control plane runs {}",
        cp.release()?
    );
    let ns = tainted_cluster(&cp).await?;
    let binary = kubectl_sched_binary().await?;
    let kubeconfig = cp.kubeconfig_path().display().to_string();
    let base = [
        "--kubeconfig",
        kubeconfig.as_str(),
        "explain",
        "web",
        "-n",
        ns.as_str(),
    ];
    let mut problems = Vec::new();

    // The API server's release, by default.
    let out = run_kubectl_sched(&binary, &base).await?;
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    ensure!(out.status.code() == Some(0), "explain failed: {stderr}");
    let first = stdout.lines().next().unwrap_or_default().to_string();
    if first != header(&ns, "v1.33.13") {
        problems.push(format!("v1.33 header: {first:?}"));
    }
    if stderr.contains("semantics") {
        problems.push(format!("no version warning is due on v1.33: {stderr:?}"));
    }
    if !stdout.contains("1 node(s) had untolerated taint {dedicated: gpu}") {
        problems.push(format!("v1.33's taint message: {stdout}"));
    }

    // --kube-version over the server's: v1.37.2's semantics, one warning line naming both.
    let mut args = base.to_vec();
    args.extend(["--kube-version", "v1.37.2"]);
    let out = run_kubectl_sched(&binary, &args).await?;
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    ensure!(
        out.status.code() == Some(0),
        "explain --kube-version failed: {stderr}"
    );
    let first = stdout.lines().next().unwrap_or_default().to_string();
    if first != header(&ns, "v1.37.2") {
        problems.push(format!("--kube-version header: {first:?}"));
    }
    let want = "warning: the API server is v1.33.13; evaluating with kube-scheduler v1.37.2's semantics, as \
                --kube-version says\n";
    if stderr != want {
        problems.push(format!("--kube-version warning: {stderr:?}"));
    }
    if !stdout.contains("1 node(s) had untolerated taint(s)") {
        problems.push(format!("v1.37's taint message: {stdout}"));
    }

    // snapshot records the server's release; explain --from evaluates with it.
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("snap.yaml");
    let file_arg = file.display().to_string();
    let out = run_kubectl_sched(
        &binary,
        &[
            "--kubeconfig",
            kubeconfig.as_str(),
            "snapshot",
            "-A",
            "-o",
            file_arg.as_str(),
        ],
    )
    .await?;
    ensure!(
        out.status.code() == Some(0),
        "snapshot failed: {}",
        text(&out.stderr)
    );
    let saved = std::fs::read_to_string(&file)?;
    if !saved.contains("\nkubeVersion: v1.33.13\n") {
        problems.push("the snapshot records no kubeVersion: v1.33.13".into());
    }
    let out = run_kubectl_sched(
        &binary,
        &["explain", "web", "-n", ns.as_str(), "--from", file_arg.as_str()],
    )
    .await?;
    let first = text(&out.stdout).lines().next().unwrap_or_default().to_string();
    if out.status.code() != Some(0) || first != header(&ns, "v1.33.13") {
        problems.push(format!(
            "explain --from the snapshot: {first:?} {}",
            text(&out.stderr)
        ));
    }

    // A release outside the supported range: one line, exit 2.
    let mut args = base.to_vec();
    args.extend(["--kube-version", "v1.32"]);
    let out = run_kubectl_sched(&binary, &args).await?;
    let stderr = text(&out.stderr);
    if out.status.code() != Some(2)
        || stderr
            != "error: --kube-version: Kubernetes v1.32.0 is not supported: kubectl-sched models kube-scheduler \
                v1.33 to v1.37\n"
    {
        problems.push(format!(
            "--kube-version v1.32: exit {:?}, {stderr:?}",
            out.status.code()
        ));
    }
    ensure!(problems.is_empty(), "{}", problems.join("\n"));
    Ok(())
}
