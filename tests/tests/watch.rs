//! `kubectl sched explain POD --watch` against the real control plane, without kube-scheduler (so
//! that only the test changes the cluster): a pod that does not fit is watched; a node that fits
//! arrives, and the watch prints a line saying where it would now be scheduled; the pod is bound by
//! hand (a Binding, as kube-scheduler posts it), and the watch ends, saying where, with exit 0.

mod common;

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use common::kubectl_sched_binary;
use e2e::fixtures::{TEST_LABEL, ready_node};
use e2e::{ControlPlane, Options};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;
use tokio::sync::mpsc;

/// Bounds each wait for a line of the watch's output (an evaluation follows a change within about
/// a second; the first one loads the cluster).
const LINE_TIMEOUT: Duration = Duration::from_secs(20);

/// The watch's stdout, line by line, and everything read so far (for failure messages).
struct Output {
    lines: mpsc::UnboundedReceiver<String>,
    seen: String,
}

impl Output {
    fn of(child: &mut Child) -> Result<Output> {
        let stdout = child.stdout.take().context("no stdout")?;
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Output {
            lines,
            seen: String::new(),
        })
    }

    /// Reads lines until one satisfies `want`.
    async fn until(&mut self, what: &str, want: impl Fn(&str) -> bool) -> Result<String> {
        let read = async {
            while let Some(line) = self.lines.recv().await {
                self.seen.push_str(&line);
                self.seen.push('\n');
                if want(&line) {
                    return Some(line);
                }
            }
            None
        };
        match tokio::time::timeout(LINE_TIMEOUT, read).await {
            Ok(Some(line)) => Ok(line),
            Ok(None) => bail!("the watch ended before {what}; it printed:\n{}", self.seen),
            Err(_) => bail!(
                "no {what} within {LINE_TIMEOUT:?}; the watch printed:\n{}",
                self.seen
            ),
        }
    }
}

/// A line of the watch (not of the first answer) starts with a UTC timestamp.
fn timestamped(line: &str) -> bool {
    line.len() > 22 && line.starts_with("20") && line.as_bytes()[19] == b'Z'
}

#[tokio::test]
async fn explain_watch_reports_a_node_that_fits_then_the_binding() -> Result<()> {
    let cp = ControlPlane::start(Options::new()).await?;
    let client = cp.client()?;
    let ns = cp.new_namespace("watch").await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .create(
            &PostParams::default(),
            &ready_node("watch-small", "watch", "1", "8Gi", "110"),
        )
        .await?;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "late"},
        "spec": {
            "nodeSelector": {TEST_LABEL: "watch"},
            "containers": [{
                "name": "c",
                "image": common::PAUSE_IMAGE,
                "resources": {"requests": {"cpu": "2"}},
            }],
        },
    }))?;
    pods.create(&PostParams::default(), &pod).await?;

    let kubeconfig = cp.kubeconfig_path().display().to_string();
    let args = [
        "explain",
        "late",
        "-n",
        &ns,
        "--kubeconfig",
        &kubeconfig,
        "--watch",
        "--watch-timeout",
        "30s",
    ];
    let mut child = tokio::process::Command::new(kubectl_sched_binary().await?)
        .args(args)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut out = Output::of(&mut child)?;

    out.until("the first answer", |l| {
        l.contains("0/1 nodes are available") && l.contains("Insufficient cpu")
    })
    .await?;
    nodes
        .create(
            &PostParams::default(),
            &ready_node("watch-big", "watch", "4", "8Gi", "110"),
        )
        .await?;
    out.until("a line saying it would now be scheduled on watch-big", |l| {
        timestamped(l) && l.contains("would be scheduled on watch-big")
    })
    .await?;

    let binding = json!({
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "late"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "watch-big"},
    });
    let _: Value = pods
        .create_subresource("binding", "late", &PostParams::default(), &binding)
        .await
        .context("binding the pod")?;
    out.until("a line saying it was bound to watch-big", |l| {
        timestamped(l) && l.ends_with("bound to watch-big")
    })
    .await?;

    let status = tokio::time::timeout(LINE_TIMEOUT, child.wait())
        .await
        .with_context(|| {
            format!(
                "the watch did not end after the binding; it printed:\n{}",
                out.seen
            )
        })??;
    println!("{}", out.seen);
    ensure!(status.success(), "the watch exited with {status}:\n{}", out.seen);
    Ok(())
}
