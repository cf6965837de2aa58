//! How `kubectl sched` lists a live cluster: in one request per kind, decoded as the response
//! streams in (the default against this v1.37 API server), or in pages (`--chunk-size N`, kubectl's
//! flag). Both must give the same answer: the same pods on the same nodes, the same verdicts.

mod common;

use anyhow::{Result, ensure};
use common::{Lab, kubectl_sched_binary, pod, run_kubectl_sched};

/// More pods than the smallest page holds, spread over nodes, and a pod that fits nowhere: explain
/// in one request, in pages of 2 and in pages of 500 gives the same report, and `-v 2` says which
/// way it listed.
#[tokio::test]
async fn one_request_and_pages_give_the_same_explanation() -> Result<()> {
    let lab = Lab::begin("listing").await?;
    let (n1, n2, n3) = (lab.n("n1"), lab.n("n2"), lab.n("n3"));
    lab.create_nodes([
        lab.node("n1", "4", "8Gi"),
        lab.node("n2", "4", "8Gi").label("zone", "b"),
        lab.node("n3", "2", "4Gi").taint("dedicated", "db", "NoSchedule"),
    ])
    .await?;
    lab.create_pods((0..7).map(|i| {
        let node = [&n1, &n2, &n3][i % 3];
        pod(&format!("run-{i}"))
            .cpu("500m")
            .memory("256Mi")
            .label("app", "web")
            .on(node)
    }))
    .await?;
    lab.create_pods([pod("big").cpu("3500m").memory("1Gi")]).await?;

    let binary = kubectl_sched_binary().await?;
    let kubeconfig = lab.cp.kubeconfig_path().display().to_string();
    let mut reports = Vec::new();
    for (chunk, said) in [
        (None, "one request per kind"),
        (Some("2"), "pages of 2"),
        (Some("500"), "pages of 500"),
        (Some("0"), "one request per kind"),
    ] {
        let mut args = vec![
            "--kubeconfig",
            &kubeconfig,
            "-v",
            "2",
            "explain",
            "big",
            "-n",
            &lab.ns,
            "-o",
            "json",
        ];
        if let Some(n) = chunk {
            args.extend(["--chunk-size", n]);
        }
        let output = run_kubectl_sched(&binary, &args).await?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        ensure!(
            matches!(output.status.code(), Some(0 | 3)),
            "--chunk-size {chunk:?}: exit {:?}: {stderr}",
            output.status.code()
        );
        ensure!(
            stderr.contains(&format!("(the latest state, {said},")),
            "--chunk-size {chunk:?}: -v 2 does not say it listed in {said:?}: {stderr}"
        );
        let mut report: serde_json::Value = serde_json::from_slice(&output.stdout)?;
        // What kube-scheduler said of the pod (its events, its condition) moves on between the runs
        // while it retries; everything the engine computed from the lists must not.
        if let Some(report) = report.as_object_mut() {
            report.remove("still_pending");
        }
        without_timings(&mut report);
        reports.push((chunk, report));
    }
    let (_, first) = &reports[0];
    ensure!(
        first["nodes_total"].as_u64() >= Some(3) && first["outcome"] != serde_json::json!("scheduled"),
        "the lab's three nodes are not all in the report, or the pod fits: {first}"
    );
    for (chunk, report) in &reports[1..] {
        ensure!(
            report == first,
            "--chunk-size {chunk:?} explains differently:\n{report}\nagainst one request:\n{first}"
        );
    }
    Ok(())
}

/// Removes the filters' `nanos` (how long each took), which differ from run to run.
fn without_timings(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.remove("nanos");
            map.values_mut().for_each(without_timings);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(without_timings),
        _ => {}
    }
}
