//! Smoke tests of the harness itself, against the real v1.37 control plane: the pinned release
//! answers, kube-scheduler binds a pod to a kubelet-less node, the PV binder binds a claim,
//! nothing listens beyond loopback, and no process survives the control plane or the test binary.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use e2e::fixtures::{TEST_LABEL, ready_node, wait_for};
use e2e::{ControlPlane, Options, pinned_version, procfs};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::Api;
use kube::api::PostParams;

const BIND_TIMEOUT: Duration = Duration::from_secs(60);

fn from_json<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Result<T> {
    Ok(serde_json::from_value(value)?)
}

#[tokio::test]
async fn apiserver_reports_the_pinned_release() -> Result<()> {
    let cp = ControlPlane::shared().await?;
    let live = cp.client()?.apiserver_version().await?;
    println!("real kube-apiserver {} at {}", live.git_version, cp.server_url());
    // The pinned release, unless KUBECTL_SCHED_K8S_RELEASE runs this binary against another.
    let want = match std::env::var(e2e::RELEASE_ENV) {
        Ok(minor) if !minor.is_empty() => e2e::release_version(&minor)?,
        _ => pinned_version()?.to_owned(),
    };
    ensure!(
        live.git_version == want && cp.release()? == want,
        "apiserver is {}, the harness started {}, want {want}",
        live.git_version,
        cp.release()?
    );
    ensure!(live.git_version == cp.version().git_version);
    Ok(())
}

#[tokio::test]
async fn scheduler_binds_a_pod_to_a_node_without_kubelet() -> Result<()> {
    let cp = ControlPlane::shared().await?;
    let client = cp.client()?;
    let ns = cp.new_namespace("bind").await?;
    let node_name = format!("{ns}-node");

    // No kubelet: the node is a plain API object whose status is set at creation (the node
    // strategy keeps status on create).
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .create(
            &PostParams::default(),
            &ready_node(&node_name, &ns, "4", "8Gi", "110"),
        )
        .await?;
    let stored = nodes.get(&node_name).await?;
    let allocatable = stored
        .status
        .and_then(|s| s.allocatable)
        .context("node has no allocatable")?;
    ensure!(
        allocatable.get("cpu").map(|q| q.0.as_str()) == Some("4"),
        "allocatable: {allocatable:?}"
    );

    let pods: Api<Pod> = Api::namespaced(client, &ns);
    let pod: Pod = from_json(serde_json::json!({
        "metadata": {"name": "p"},
        "spec": {
            "nodeSelector": {TEST_LABEL: ns},
            "containers": [{
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "500m", "memory": "128Mi"}},
            }],
        },
    }))?;
    pods.create(&PostParams::default(), &pod).await?;

    let bound = wait_for("pod p to be bound", BIND_TIMEOUT, || async {
        Ok(pods.get("p").await?.spec.and_then(|s| s.node_name))
    })
    .await
    .with_context(|| format!("kube-scheduler log:\n{}", cp.log_tail("kube-scheduler", 30)))?;
    ensure!(bound == node_name, "bound to {bound}, expected {node_name}");
    println!(
        "kube-scheduler {} bound {ns}/p to {bound}",
        cp.version().git_version
    );
    Ok(())
}

#[tokio::test]
async fn pv_binder_binds_a_claim() -> Result<()> {
    let cp = ControlPlane::shared().await?;
    let client = cp.client()?;
    let ns = cp.new_namespace("pv").await?;
    let pv_name = format!("{ns}-pv");

    // No storage class on either side: the binder matches them itself (Immediate binding); the
    // label keeps other tests' claims off this volume.
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pv: PersistentVolume = from_json(serde_json::json!({
        "metadata": {"name": pv_name, "labels": {TEST_LABEL: ns}},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "persistentVolumeReclaimPolicy": "Retain",
            "hostPath": {"path": "/tmp/e2e-unused"},
        },
    }))?;
    pvs.create(&PostParams::default(), &pv).await?;

    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client, &ns);
    let claim: PersistentVolumeClaim = from_json(serde_json::json!({
        "metadata": {"name": "claim"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "selector": {"matchLabels": {TEST_LABEL: ns}},
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }))?;
    claims.create(&PostParams::default(), &claim).await?;

    let volume = wait_for("claim to be bound", BIND_TIMEOUT, || async {
        let claim = claims.get("claim").await?;
        let bound = claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
        Ok(claim.spec.and_then(|s| s.volume_name).filter(|_| bound))
    })
    .await
    .with_context(|| {
        format!(
            "kube-controller-manager log:\n{}",
            cp.log_tail("kube-controller-manager", 30)
        )
    })?;
    ensure!(volume == pv_name, "claim bound to {volume}, expected {pv_name}");
    Ok(())
}

#[tokio::test]
async fn kubectl_talks_to_the_control_plane() -> Result<()> {
    let cp = ControlPlane::shared().await?;
    let ns = cp.new_namespace("kubectl").await?;
    let out = cp.kubectl(&["get", "namespace", &ns, "-o", "name"]).await?;
    ensure!(out.trim() == format!("namespace/{ns}"), "kubectl printed {out:?}");
    let err = cp
        .kubectl(&["get", "namespace", "no-such-namespace"])
        .await
        .expect_err("missing namespace");
    ensure!(
        err.to_string().contains("NotFound") || err.to_string().contains("not found"),
        "{err}"
    );
    Ok(())
}

#[tokio::test]
async fn nothing_listens_beyond_loopback() -> Result<()> {
    let cp = ControlPlane::shared().await?;
    cp.check_running()?;
    let mut seen = BTreeMap::new();
    for process in cp.processes() {
        let listeners = procfs::tcp_listeners(process.pid)?;
        ensure!(
            !listeners.is_empty(),
            "{} ({}) listens on nothing",
            process.name,
            process.pid
        );
        let exposed: Vec<_> = listeners.iter().filter(|a| !procfs::is_loopback(a)).collect();
        if !exposed.is_empty() {
            bail!(
                "{} ({}) listens beyond loopback: {exposed:?}",
                process.name,
                process.pid
            );
        }
        seen.insert(process.name.clone(), listeners);
    }
    ensure!(
        procfs::tcp_listeners(cp.watchdog_pid())?.is_empty(),
        "the watchdog listens"
    );
    for name in [
        "etcd",
        "kube-apiserver",
        "kube-scheduler",
        "kube-controller-manager",
    ] {
        ensure!(seen.contains_key(name), "{name} is not running: {seen:?}");
    }
    println!("listeners: {seen:?}");
    Ok(())
}

/// Every process of `cp` with its start time, so a later PID reuse is not mistaken for survival.
fn process_identities(cp: &ControlPlane) -> Result<Vec<(String, u32, u64)>> {
    let mut all: Vec<(String, u32)> = cp.processes().iter().map(|p| (p.name.clone(), p.pid)).collect();
    all.push(("watchdog".into(), cp.watchdog_pid()));
    all.into_iter()
        .map(|(name, pid)| {
            let start = procfs::start_time(pid).with_context(|| format!("{name} ({pid}) is not running"))?;
            Ok((name, pid, start))
        })
        .collect()
}

#[tokio::test]
async fn dropping_the_control_plane_leaves_no_process() -> Result<()> {
    let cp = ControlPlane::start(
        Options::new()
            .with_scheduler(None)
            .with_controller_manager(&["persistentvolume-binder"]),
    )
    .await?;
    println!(
        "own control plane ready in {:.2} s",
        cp.startup_time().as_secs_f64()
    );
    let identities = process_identities(&cp)?;
    let dir = cp.dir().to_path_buf();
    ensure!(dir.exists());
    drop(cp);
    // Drop waits for every process: nothing may be left right after it returns.
    let survivors: Vec<_> = identities
        .iter()
        .filter(|(_, pid, start)| procfs::is_running(*pid, *start))
        .collect();
    ensure!(survivors.is_empty(), "still running after drop: {survivors:?}");
    ensure!(!dir.exists(), "{} survived the drop", dir.display());
    Ok(())
}

const ORPHAN_HELPER_ENV: &str = "KUBECTL_SCHED_E2E_ORPHAN_HELPER";
const ORPHAN_HELPER_PREFIX: &str = "e2e-orphan-helper:";

/// Run by `the_control_plane_dies_with_the_test_binary` in a child test process, which is then
/// SIGKILLed: starts a control plane, reports its processes and waits to be killed.
#[tokio::test]
#[ignore = "helper process of the_control_plane_dies_with_the_test_binary"]
async fn orphan_helper() -> Result<()> {
    if std::env::var_os(ORPHAN_HELPER_ENV).is_none() {
        return Ok(());
    }
    let cp = ControlPlane::start(Options::new().with_scheduler(None)).await?;
    let pids: Vec<String> = process_identities(&cp)?
        .iter()
        .map(|(_, pid, _)| pid.to_string())
        .collect();
    println!("{ORPHAN_HELPER_PREFIX} {} {}", cp.dir().display(), pids.join(","));
    tokio::time::sleep(Duration::from_secs(600)).await;
    bail!("the orphan helper was not killed")
}

#[tokio::test]
async fn the_control_plane_dies_with_the_test_binary() -> Result<()> {
    use tokio::io::{AsyncBufReadExt, BufReader};

    let exe = std::env::current_exe()?;
    let mut child = tokio::process::Command::new(exe)
        .args([
            "orphan_helper",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ORPHAN_HELPER_ENV, "1")
        .stdout(std::process::Stdio::piped())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let report = tokio::time::timeout(Duration::from_secs(180), async {
        while let Some(line) = lines.next_line().await? {
            // libtest prints "test orphan_helper ... " without a newline first.
            if let Some((_, rest)) = line.split_once(ORPHAN_HELPER_PREFIX) {
                return Ok(rest.trim().to_owned());
            }
        }
        bail!("the helper exited without reporting its control plane")
    })
    .await
    .context("the helper did not start a control plane in time")??;
    let (dir, pids) = report.split_once(' ').context("malformed helper report")?;
    let identities: Vec<(u32, u64)> = pids
        .split(',')
        .map(|pid| {
            let pid: u32 = pid.parse()?;
            Ok((
                pid,
                procfs::start_time(pid).with_context(|| format!("{pid} already gone"))?,
            ))
        })
        .collect::<Result<_>>()?;
    ensure!(
        identities.len() >= 4,
        "etcd, kube-apiserver, kube-scheduler and the watchdog: {identities:?}"
    );

    // SIGKILL: no destructor, no panic hook, nothing of the helper runs any more.
    child.kill().await?;
    let dir = std::path::PathBuf::from(dir);
    wait_for(
        "the orphaned control plane to go away",
        Duration::from_secs(30),
        || async {
            let running = identities
                .iter()
                .any(|(pid, start)| procfs::is_running(*pid, *start));
            Ok((!running && !dir.exists()).then_some(()))
        },
    )
    .await?;
    Ok(())
}
