//! Faults against the real control plane: kube-apiserver killed in the middle of `preempt --yes`,
//! etcd stopped under `explain`, `preempt` and the webhook, two `preempt --yes` runs racing for one
//! node, and a webhook replica killed between the two writes of one pod's pre-binding.
//!
//! Each test starts its own control plane (restarts must not disturb other tests) and takes a turn
//! ([`TURN`]): the machines running these have few cores, and a control plane starting while another
//! test measures a time bound would only make that bound noisy. Every fault and its outcome is
//! recorded in RELIABILITY.md ("Faults against the real control plane").
//!
//! A kill is a SIGKILL ([`ControlPlane::stop_component`]), as a crash or an OOM kill would be; the
//! in-process webhook replica is killed by shutting its runtime down, which drops its tasks where
//! they wait, with no graceful shutdown and no Lease release. To land a fault between two writes of
//! one run, the writer's requests go through a loopback proxy ([`LatencyProxy`]) that holds each of
//! them for a while: the test sees the first write in the API server and strikes before the second
//! arrives.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use common::{HIGH, LOW, PodBuilder, kubectl_sched_binary, pod, run_kubectl_sched};
use e2e::fixtures::{eventually, ready_node};
use e2e::latency::LatencyProxy;
use e2e::{ControlPlane, ETCD, KUBE_APISERVER, Options};
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::sync::{Mutex, OnceCell};

/// One fault test at a time (see the module documentation).
static TURN: Mutex<()> = Mutex::const_new(());
static BINARY: OnceCell<PathBuf> = OnceCell::const_new();

/// Victims linger this long after DELETE (no kubelet confirms it), so each deletion is seen.
const GRACE: i64 = 30;
const POLL: Duration = Duration::from_millis(50);
const SETUP_TIMEOUT: Duration = Duration::from_secs(30);

/// The plugin binary, built once per test process.
async fn binary() -> Result<&'static Path> {
    Ok(BINARY.get_or_try_init(kubectl_sched_binary).await?.as_path())
}

/// A control plane of this test's own (etcd and kube-apiserver, plus what `options` adds), a
/// namespace, and the priority classes of `common`.
struct Cluster {
    cp: ControlPlane,
    client: Client,
    ns: String,
}

impl Cluster {
    async fn start(options: Options, prefix: &str) -> Result<Self> {
        let cp = ControlPlane::start(options).await?;
        let client = cp.client()?;
        let ns = cp.new_namespace(prefix).await?;
        let classes: Api<PriorityClass> = Api::all(client.clone());
        for (name, value) in [LOW, HIGH] {
            let class: PriorityClass = serde_json::from_value(json!({
                "metadata": {"name": name}, "value": value, "preemptionPolicy": "PreemptLowerPriority",
            }))?;
            classes.create(&PostParams::default(), &class).await?;
        }
        Ok(Cluster { cp, client, ns })
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    async fn node(&self, name: &str, cpu: &str) -> Result<()> {
        Api::<Node>::all(self.client.clone())
            .create(
                &PostParams::default(),
                &ready_node(name, "faults", cpu, "16Gi", "110"),
            )
            .await?;
        Ok(())
    }

    async fn create_pods(&self, pods: impl IntoIterator<Item = PodBuilder>) -> Result<()> {
        for pod in pods {
            self.pods().create(&PostParams::default(), &pod.build()?).await?;
        }
        Ok(())
    }

    /// `preempt POD -n NS --kubeconfig KUBECONFIG --yes -o json`.
    async fn preempt(&self, pod: &str, kubeconfig: &Path) -> Result<Output> {
        let kubeconfig = kubeconfig.display().to_string();
        let args = [
            "preempt",
            pod,
            "-n",
            &self.ns,
            "--kubeconfig",
            &kubeconfig,
            "--yes",
            "-o",
            "json",
        ];
        run_kubectl_sched(binary().await?, &args).await
    }

    /// Pods being deleted: name → deletionTimestamp.
    async fn terminating(&self) -> Result<BTreeMap<String, String>> {
        Ok(self
            .pods()
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter_map(|p| {
                let at = p.metadata.deletion_timestamp?;
                Some((p.metadata.name.unwrap_or_default(), at.0.to_string()))
            })
            .collect())
    }

    async fn nominated(&self, pod: &str) -> Result<Option<String>> {
        Ok(self
            .pods()
            .get(pod)
            .await?
            .status
            .and_then(|s| s.nominated_node_name)
            .filter(|n| !n.is_empty()))
    }

    /// How many `Preempted` events each pod of the namespace has.
    async fn preempted_events(&self) -> Result<BTreeMap<String, usize>> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), &self.ns);
        let mut counts = BTreeMap::new();
        for e in events.list(&ListParams::default()).await?.items {
            if e.reason.as_deref() == Some("Preempted") {
                let name = e.regarding.and_then(|r| r.name).unwrap_or_default();
                *counts.entry(name).or_insert(0) += 1;
            }
        }
        Ok(counts)
    }

    /// The admin kubeconfig with its server replaced by `url` (the proxy's).
    fn kubeconfig_via(&self, url: &str, dir: &Path) -> Result<PathBuf> {
        let text = std::fs::read_to_string(self.cp.kubeconfig_path())?;
        let path = dir.join("via-proxy.kubeconfig");
        std::fs::write(&path, text.replace(self.cp.server_url(), url))?;
        Ok(path)
    }

    fn apiserver_address(&self) -> Result<std::net::SocketAddr> {
        Ok(self.cp.server_url().trim_start_matches("https://").parse()?)
    }
}

/// A bound pod of priority `class` using `cpu` on `node`, that lingers terminating when deleted.
fn victim(name: &str, class: (&str, i32), cpu: &str, node: &str) -> PodBuilder {
    pod(name)
        .priority_class(class)
        .cpu(cpu)
        .spec("terminationGracePeriodSeconds", json!(GRACE))
        .on(node)
}

fn show(output: &Output) -> String {
    format!(
        "exit {}\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The pods a `preempt -o json` report's results deleted (outcome `done`), and every outcome of
/// its DeletePod steps by pod.
fn deletions(report: &Value) -> (Vec<String>, BTreeMap<String, String>) {
    let mut done = Vec::new();
    let mut outcomes = BTreeMap::new();
    for r in report["results"].as_array().into_iter().flatten() {
        if r["action"]["kind"] == "DeletePod" {
            let name = r["action"]["pod"]["name"].as_str().unwrap_or_default().to_owned();
            let outcome = r["outcome"].as_str().unwrap_or_default().to_owned();
            if outcome == "done" {
                done.push(name.clone());
            }
            outcomes.insert(name, outcome);
        }
    }
    (done, outcomes)
}

/// The non-empty lines of stderr.
fn stderr_lines(output: &Output) -> Vec<String> {
    String::from_utf8_lossy(&output.stderr)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// 1. kube-apiserver killed in the middle of `preempt --yes`

/// kube-apiserver is SIGKILLed once the first victim's deletion is stored (the run's requests go
/// through a proxy holding each for 300 ms, so the next write is still on its way). The run fails
/// with exit 1, saying which step failed and how far it got; once the API server is back, the
/// same command finishes the job: each victim is deleted exactly once (the second run does not
/// delete again what the first did, and the deletion times are unchanged), the preemptor is
/// nominated, and the higher-priority pod is untouched. Lost: the Preempted event of the victim
/// whose DELETE was the last write before the kill (its event was the next write; the second run
/// skips victims already terminating, events included). No event is written twice.
#[tokio::test]
async fn apiserver_killed_mid_preemption_then_a_rerun_finishes_the_job() -> Result<()> {
    let _turn = TURN.lock().await;
    let binary = binary().await?;
    let c = Cluster::start(Options::new(), "fault-apiserver").await?;
    c.node("n1", "4").await?;
    c.node("n2", "4").await?;
    let victims = ["v1", "v2", "v3", "v4"];
    c.create_pods(victims.iter().map(|v| victim(v, LOW, "1", "n1")))
        .await?;
    c.create_pods([
        victim("keep", HIGH, "4", "n2"),
        pod("p").priority_class(HIGH).cpu("4"),
    ])
    .await?;
    let dir = tempfile::tempdir()?;
    let proxy = LatencyProxy::start(c.apiserver_address()?, Duration::from_millis(300)).await?;
    let via_proxy = c.kubeconfig_via(&proxy.url(), dir.path())?;

    let first = {
        let (ns, kubeconfig) = (c.ns.clone(), via_proxy.display().to_string());
        tokio::spawn(async move {
            let args = [
                "preempt",
                "p",
                "-n",
                &ns,
                "--kubeconfig",
                &kubeconfig,
                "--yes",
                "-o",
                "json",
            ];
            run_kubectl_sched(binary, &args).await
        })
    };
    // Polled faster than `eventually` does: the strike must land before the next write.
    let watching = Instant::now();
    let deleted_first = loop {
        let terminating = c.terminating().await?;
        if !terminating.is_empty() {
            break terminating;
        }
        ensure!(
            watching.elapsed() < Duration::from_secs(45) && !first.is_finished(),
            "no victim was deleted while the first run ran"
        );
        tokio::time::sleep(POLL).await;
    };
    ensure!(
        c.cp.stop_component(KUBE_APISERVER),
        "kube-apiserver was not running"
    );
    let killed_at = Instant::now();
    let first = first.await??;
    let first_took = killed_at.elapsed();
    eprintln!(
        "[faults] killed kube-apiserver after {deleted_first:?} were deleted; first run ended {:.1} s later:\n{}",
        first_took.as_secs_f64(),
        show(&first)
    );
    ensure!(
        first.status.code() == Some(1),
        "the interrupted run: {}",
        show(&first)
    );
    let lines = stderr_lines(&first);
    let last = lines.last().cloned().unwrap_or_default();
    ensure!(
        last.starts_with("error: ") && last.contains("failed to ") && last.contains("run the command again"),
        "the interrupted run's last line does not name the failed step: {}",
        show(&first)
    );
    ensure!(
        last.to_lowercase().contains("connection") || last.contains("connect error"),
        "the interrupted run's last line does not say the connection failed: {last}"
    );
    ensure!(
        lines.iter().any(|l| l.contains("preemption stopped at step")),
        "the interrupted run does not say where it stopped: {}",
        show(&first)
    );

    c.cp.start_component(KUBE_APISERVER).await?;
    let after_kill = c.terminating().await?;
    ensure!(
        !after_kill.is_empty() && after_kill.len() < victims.len(),
        "the kill did not land between two victims: {after_kill:?} deleted"
    );
    ensure!(
        c.nominated("p").await?.is_none(),
        "p was nominated by the interrupted run"
    );

    let second = c.preempt("p", c.cp.kubeconfig_path()).await?;
    eprintln!("[faults] the second run:\n{}", show(&second));
    ensure!(second.status.success(), "the second run: {}", show(&second));
    let report: Value = serde_json::from_slice(&second.stdout).context("the second run's JSON")?;
    let (deleted_again, outcomes) = deletions(&report);
    ensure!(
        deleted_again.iter().all(|v| !after_kill.contains_key(v)),
        "the second run deleted again what the first did: {deleted_again:?} (first: {after_kill:?}); outcomes {outcomes:?}"
    );
    let terminating = c.terminating().await?;
    ensure!(
        victims.iter().all(|v| terminating.contains_key(*v)) && terminating.len() == victims.len(),
        "not exactly the victims are being deleted: {terminating:?}"
    );
    for (name, at) in &after_kill {
        ensure!(
            terminating.get(name) == Some(at),
            "{name}'s deletion changed: {at} then {:?}",
            terminating.get(name)
        );
    }
    ensure!(
        c.nominated("p").await?.as_deref() == Some("n1"),
        "p is not nominated to n1"
    );
    let events = c.preempted_events().await?;
    eprintln!(
        "[faults] Preempted events per victim after both runs: {events:?}; second run's deletes: {outcomes:?}"
    );
    ensure!(
        events.values().all(|n| *n == 1),
        "a victim has more than one Preempted event: {events:?}"
    );
    let missing: Vec<&str> = victims
        .iter()
        .copied()
        .filter(|v| !events.contains_key(*v))
        .collect();
    ensure!(
        missing.len() <= 1 && missing.iter().all(|v| after_kill.contains_key(*v)),
        "Preempted events lost beyond the one the kill interrupted: {missing:?} (deleted by the first run: {after_kill:?})"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 2. etcd stopped

/// With etcd SIGKILLed, kube-apiserver still accepts connections but cannot serve a read that
/// needs etcd. With `--request-timeout 5s`, `explain` and `preempt --yes` end with one error line
/// naming the API server, exit 1, within [`ETCD_DOWN_BOUND`]; `preempt` writes nothing (it never
/// gets past reading). Without `--request-timeout` they do not end within the harness's 60 s bound
/// (RELIABILITY.md says why), so that case is not run here.
#[tokio::test]
async fn etcd_stopped_explain_and_preempt_fail_clearly_in_bounded_time() -> Result<()> {
    let _turn = TURN.lock().await;
    let binary = binary().await?;
    let c = Cluster::start(Options::new(), "fault-etcd").await?;
    c.node("n1", "2").await?;
    c.create_pods([
        victim("v1", LOW, "2", "n1"),
        pod("p").priority_class(HIGH).cpu("2"),
    ])
    .await?;
    ensure!(c.cp.stop_component(ETCD), "etcd was not running");
    let kubeconfig = c.cp.kubeconfig_path().display().to_string();
    let server = c.cp.server_url().to_owned();
    for (command, extra) in [("explain", &[][..]), ("preempt", &["--yes"][..])] {
        let mut args = vec![
            command,
            "p",
            "-n",
            &c.ns,
            "--kubeconfig",
            &kubeconfig,
            "--request-timeout",
            "5s",
        ];
        args.extend_from_slice(extra);
        let started = Instant::now();
        let output = run_kubectl_sched(binary, &args).await?;
        let took = started.elapsed();
        eprintln!(
            "[faults] etcd stopped: {command} {extra:?} --request-timeout 5s ended in {:.1} s:\n{}",
            took.as_secs_f64(),
            show(&output)
        );
        let lines = stderr_lines(&output);
        ensure!(
            output.status.code() == Some(1),
            "{command} {extra:?}: exit {:?}",
            output.status.code()
        );
        ensure!(
            lines.len() == 1 && lines[0].starts_with(&format!("error: {server}")),
            "{command} {extra:?}: not one error line naming {server}: {lines:?}"
        );
        ensure!(
            lines[0].contains("timed out"),
            "{command} {extra:?}: the error does not say the request timed out: {lines:?}"
        );
        ensure!(took <= ETCD_DOWN_BOUND, "{command} {extra:?} took {took:?}");
    }
    Ok(())
}

/// How long a command with `--request-timeout 5s` may take to give up while etcd is down.
const ETCD_DOWN_BOUND: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------------------------
// 3. Two `preempt --yes` for different preemptors racing for one node

/// Preemptors `a` and `b` (priority 1000, 2 CPUs each) run `preempt --yes` at the same instant
/// for the only node where preemption helps, full with six 1-CPU pods of priority 100. Who wins is
/// timing-dependent, so only the invariants are asserted: no victim is deleted twice, nothing of
/// the preemptors' priority or higher is deleted, at most the room both need (4 pods) is freed,
/// and each run either finished (exit 0, its pod nominated) or stopped with one clear error
/// (exit 1). kube-scheduler never races with itself: it preempts for one pod at a time, and the
/// second sees the first's nomination.
#[tokio::test]
async fn two_preemptions_racing_for_one_node_keep_the_invariants() -> Result<()> {
    let _turn = TURN.lock().await;
    binary().await?;
    let c = Cluster::start(Options::new(), "fault-race").await?;
    c.node("n1", "6").await?;
    c.node("n2", "4").await?;
    let victims: Vec<String> = (1..=6).map(|i| format!("v{i}")).collect();
    c.create_pods(victims.iter().map(|v| victim(v, LOW, "1", "n1")))
        .await?;
    c.create_pods([
        victim("keep", HIGH, "4", "n2"),
        pod("a").priority_class(HIGH).cpu("2"),
        pod("b").priority_class(HIGH).cpu("2"),
    ])
    .await?;
    let kubeconfig = c.cp.kubeconfig_path();
    let (a, b) = tokio::join!(c.preempt("a", kubeconfig), c.preempt("b", kubeconfig));
    let mut deleted: BTreeMap<String, usize> = BTreeMap::new();
    let mut summary = Vec::new();
    for (name, output) in [("a", a?), ("b", b?)] {
        eprintln!("[faults] race: preempt {name}:\n{}", show(&output));
        let report: Option<Value> = serde_json::from_slice(&output.stdout).ok();
        let (done, outcomes) = report.as_ref().map(deletions).unwrap_or_default();
        for v in &done {
            *deleted.entry(v.clone()).or_insert(0) += 1;
        }
        let nominated = c.nominated(name).await?;
        match output.status.code() {
            Some(0) => ensure!(
                nominated.as_deref() == Some("n1"),
                "preempt {name} succeeded but {name} is nominated to {nominated:?}"
            ),
            Some(1) => {
                let lines = stderr_lines(&output);
                let last = lines.last().cloned().unwrap_or_default();
                ensure!(
                    last.starts_with("error: ") && !last.contains("ServiceError"),
                    "preempt {name} failed without a clear last line: {}",
                    show(&output)
                );
                ensure!(
                    nominated.is_none(),
                    "preempt {name} failed but {name} is nominated"
                );
            }
            other => anyhow::bail!("preempt {name}: exit {other:?}: {}", show(&output)),
        }
        summary.push(format!(
            "{name}: exit {:?}, deleted {done:?}, deletes {outcomes:?}, nominated {nominated:?}",
            output.status.code()
        ));
    }
    let terminating = c.terminating().await?;
    eprintln!(
        "[faults] race outcome: {summary:?}; terminating {:?}",
        terminating.keys()
    );
    ensure!(
        deleted.values().all(|n| *n == 1),
        "a victim was deleted by both runs: {deleted:?}"
    );
    ensure!(
        terminating.keys().all(|p| victims.contains(p)),
        "a pod of the preemptors' priority or higher is being deleted: {terminating:?}"
    );
    ensure!(
        terminating.len() <= 4,
        "more room freed than both preemptors need: {terminating:?}"
    );
    ensure!(
        deleted.keys().all(|v| terminating.contains_key(v)),
        "a reported deletion is not stored: {deleted:?} vs {terminating:?}"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The webhook, in process

/// A sched-webhook replica (caches and controller; no HTTP server: tests call its router) on a
/// runtime of its own in a thread. [`Self::kill`] shuts that runtime down at once: every task is
/// dropped where it waits, with no graceful shutdown and no Lease release, as SIGKILL would.
struct InProcessReplica {
    state: Arc<sched_webhook::server::AppState>,
    runtime: tokio::runtime::Handle,
    kill: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Label of the namespaces the replicas serve.
const WEBHOOK_LABEL: &str = "e2e.kubectl-sched.dev/webhook";
/// The replicas' Lease (in `default`) and its duration: short, so a successor takes over soon.
const LEASE: &str = "sched-webhook-faults";
const LEASE_SECONDS: u64 = 4;

impl InProcessReplica {
    /// Starts replica `identity` against `cp`; its writes go to `write_url` when given (a proxy),
    /// its lists, watches and Lease straight to the API server.
    fn start(cp: &ControlPlane, identity: &str, write_url: Option<String>) -> Result<Self> {
        use sched_core::framework::profile::SchedulerConfig;
        use sched_core::labels::Selector;
        use sched_core::plugins::in_tree_registry;
        use sched_webhook::controller::{self, ControllerConfig, stored_pod::Scope};
        use sched_webhook::run::{Replica, ReplicaClients};

        let config = cp.config().clone();
        let mut write_config = config.clone();
        if let Some(url) = write_url {
            write_config.cluster_url = url.parse()?;
        }
        let controller_config = ControllerConfig {
            lease_name: LEASE.into(),
            lease_namespace: "default".into(),
            identity: identity.into(),
            lease_seconds: LEASE_SECONDS,
            scope: Scope {
                namespaces: Selector::from_map(&[(WEBHOOK_LABEL.to_string(), "on".to_string())].into()),
                max_claims: sched_webhook::server::DEFAULT_MAX_CLAIMS,
                binding_window: controller::DEFAULT_BINDING_WINDOW,
            },
            plan_budget: controller::DEFAULT_PLAN_BUDGET,
            concurrency: controller::DEFAULT_CONCURRENCY,
        };
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (kill, killed) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("replica-{identity}"))
            .spawn(move || {
                let Ok(runtime) = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                else {
                    return;
                };
                let replica = runtime.block_on(async move {
                    let clients = (|| -> kube::Result<ReplicaClients> {
                        Ok(ReplicaClients {
                            watch: Client::try_from(config.clone())?,
                            write: Client::try_from(write_config)?,
                            lease: Client::try_from(config)?,
                        })
                    })();
                    clients.map(|clients| {
                        Replica::start(
                            clients,
                            SchedulerConfig::default_config(&in_tree_registry()),
                            sched_webhook::server::Limits::default(),
                            controller_config,
                        )
                    })
                });
                let replica = match replica {
                    Ok(replica) => replica,
                    Err(e) => {
                        let _ = started_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                let _ = started_tx.send(Ok((replica.state.clone(), runtime.handle().clone())));
                // Until killed (or the test drops the sender).
                let _ = killed.recv();
                drop(replica);
                runtime.shutdown_background();
            })?;
        let (state, runtime) = started_rx
            .recv_timeout(SETUP_TIMEOUT)
            .context("the replica's thread did not start")?
            .map_err(anyhow::Error::msg)?;
        Ok(InProcessReplica {
            state,
            runtime,
            kill: Some(kill),
            thread: Some(thread),
        })
    }

    async fn wait_ready(&self) -> Result<()> {
        eventually("the replica's caches to sync", SETUP_TIMEOUT, || async {
            Ok(self.state.cache.is_ready().then_some(()))
        })
        .await
    }

    async fn wait_leader(&self) -> Result<()> {
        eventually("the replica to hold the Lease", SETUP_TIMEOUT, || async {
            Ok(self.state.metrics.is_leader().then_some(()))
        })
        .await
    }

    /// Kills the replica (see the type's documentation) and waits for its thread.
    fn kill(&mut self) {
        self.kill.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for InProcessReplica {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Labels the cluster's namespace for the replicas.
async fn serve_namespace(c: &Cluster) -> Result<()> {
    Api::<Namespace>::all(c.client.clone())
        .patch(
            &c.ns,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {WEBHOOK_LABEL: "on"}}})),
        )
        .await?;
    Ok(())
}

/// A pod bound to `node` (created with `spec.nodeName`) mounting these claims.
fn pod_with_claims(name: &str, node: &str, claims: &[&str]) -> Value {
    let volumes: Vec<Value> = claims
        .iter()
        .map(|c| json!({"name": c, "persistentVolumeClaim": {"claimName": c}}))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": common::PAUSE_IMAGE}],
            "volumes": volumes,
        },
    })
}

/// With etcd stopped after the replica's caches synced, a pod created on a node with a claim the
/// caches have not seen makes the webhook read the claim from the API server, which cannot answer.
/// The webhook gives up on the read at four fifths of the API server's `timeout` (5 s here), and
/// answers before the API server stops waiting: allowed, unchanged (failing open, as
/// docs/webhook.md says). A review for a pod without claims is answered at once.
#[tokio::test]
async fn etcd_stopped_the_webhook_answers_in_time_and_fails_open() -> Result<()> {
    use tower::ServiceExt;

    let _turn = TURN.lock().await;
    let c = Cluster::start(Options::new(), "fault-etcd-webhook").await?;
    serve_namespace(&c).await?;
    c.node("n1", "2").await?;
    let replica = InProcessReplica::start(&c.cp, "a", None)?;
    replica.wait_ready().await?;
    ensure!(c.cp.stop_component(ETCD), "etcd was not running");

    let review = |uid: &str, object: Value| {
        json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "name": "p", "namespace": c.ns, "operation": "CREATE",
                "userInfo": {"username": "e2e"},
                "object": object,
            }
        })
    };
    let mut no_claim = pod_with_claims("p", "n1", &[]);
    no_claim["metadata"]["namespace"] = json!(c.ns);
    let mut unseen_claim = pod_with_claims("p", "n1", &["never-listed"]);
    unseen_claim["metadata"]["namespace"] = json!(c.ns);
    let reads_before = replica.state.metrics.catch_up_reads();
    for (case, object, bound) in [
        ("no claim", no_claim, Duration::from_millis(500)),
        (
            "a claim the caches have not seen",
            unseen_claim,
            Duration::from_secs(5),
        ),
    ] {
        let body = serde_json::to_vec(&review(case, object))?;
        let request = http::Request::post("/mutate?timeout=5s")
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(axum::body::Body::from(body))?;
        let router = sched_webhook::server::router(replica.state.clone());
        let started = Instant::now();
        // On the replica's runtime, where its client lives.
        let answered = replica.runtime.spawn(async move {
            let response = router.oneshot(request).await?;
            let status = response.status();
            let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await?;
            anyhow::Ok((status, bytes))
        });
        let (status, bytes) = tokio::time::timeout(Duration::from_secs(10), answered)
            .await
            .with_context(|| format!("{case}: no answer in 10 s"))???;
        let took = started.elapsed();
        let answer: Value = serde_json::from_slice(&bytes)?;
        eprintln!(
            "[faults] etcd stopped, webhook, {case}: {status} in {:.2} s: {answer}",
            took.as_secs_f64()
        );
        ensure!(status == http::StatusCode::OK, "{case}: HTTP {status}");
        ensure!(
            answer["response"]["allowed"] == json!(true) && answer["response"].get("patch").is_none(),
            "{case}: not allowed unchanged: {answer}"
        );
        ensure!(took < bound, "{case}: answered in {took:?}, not within {bound:?}");
    }
    ensure!(
        replica.state.metrics.catch_up_reads() > reads_before,
        "the webhook never tried to read the claim"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 4. The webhook killed in the middle of pre-binding

/// A pod created on node n1 with two WaitForFirstConsumer claims: one a static local PV on n1
/// matches, one of a provisioner. The controller's plan is PreBind's: the PV's claimRef, then the
/// claim's `selected-node` annotation. Replica `a` writes through a proxy holding each request
/// 700 ms; once the claimRef is stored the replica is killed (and the proxy cut, so the write on
/// its way never arrives). Left: the PV's claimRef, which kube-controller-manager's PV binder
/// completes (the static claim Bound), and the other claim without its annotation. Replica `b`
/// takes the Lease once `a`'s expires, looks at every pod, and writes exactly the missing
/// annotation (one write; the claimRef counts as already done).
#[tokio::test]
async fn webhook_killed_mid_prebinding_is_repaired_by_the_next_replica() -> Result<()> {
    use sched_core::plugins::volume_binding::pv_helpers::{ANN_SELECTED_NODE, NOT_SUPPORTED_PROVISIONER};

    let _turn = TURN.lock().await;
    let c = Cluster::start(
        Options::new().with_controller_manager(&["persistentvolume-binder"]),
        "fault-prebind",
    )
    .await?;
    serve_namespace(&c).await?;
    c.node("n1", "4").await?;
    let (local, dynamic) = (format!("{}-local", c.ns), format!("{}-dyn", c.ns));
    let classes: Api<StorageClass> = Api::all(c.client.clone());
    for (name, provisioner) in [
        (&local, NOT_SUPPORTED_PROVISIONER),
        (&dynamic, "e2e.kubectl-sched.dev/no-such-provisioner"),
    ] {
        let class: StorageClass = serde_json::from_value(json!({
            "metadata": {"name": name}, "provisioner": provisioner,
            "volumeBindingMode": "WaitForFirstConsumer",
        }))?;
        classes.create(&PostParams::default(), &class).await?;
    }
    let pvs: Api<PersistentVolume> = Api::all(c.client.clone());
    let pv_name = format!("{}-pv", c.ns);
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": pv_name},
        "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "storageClassName": local, "persistentVolumeReclaimPolicy": "Retain",
            "local": {"path": "/mnt/e2e"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}
            ]}]}},
        },
    }))?;
    pvs.create(&PostParams::default(), &pv).await?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(c.client.clone(), &c.ns);
    for (name, class) in [("static", &local), ("dynamic", &dynamic)] {
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                     "resources": {"requests": {"storage": "1Gi"}}},
        }))?;
        claims.create(&PostParams::default(), &claim).await?;
    }

    let mut proxy = LatencyProxy::start(c.apiserver_address()?, Duration::from_millis(700)).await?;
    let mut a = InProcessReplica::start(&c.cp, "a", Some(proxy.url()))?;
    a.wait_ready().await?;
    a.wait_leader().await?;
    eventually(
        "the PV to be Available in the replica's cache",
        SETUP_TIMEOUT,
        || async {
            use sched_webhook::admission::ClusterView;
            let snapshot = a.state.cache.volume_snapshot();
            let phase = snapshot
                .persistent_volumes
                .get(&pv_name)
                .and_then(|pv| pv.status.as_ref().and_then(|s| s.phase.clone()));
            Ok((phase.as_deref() == Some("Available")).then_some(()))
        },
    )
    .await?;

    let annotation = |claim: PersistentVolumeClaim| {
        claim
            .metadata
            .annotations
            .unwrap_or_default()
            .get(ANN_SELECTED_NODE)
            .cloned()
    };
    let claim_ref = |pv: PersistentVolume| {
        pv.spec
            .and_then(|s| s.claim_ref)
            .map(|r| (r.name.unwrap_or_default(), r.uid.unwrap_or_default()))
    };
    c.pods()
        .create(
            &PostParams::default(),
            &serde_json::from_value(pod_with_claims("p", "n1", &["static", "dynamic"]))?,
        )
        .await?;
    let watching = Instant::now();
    let written = loop {
        if let Some(written) = claim_ref(pvs.get(&pv_name).await?) {
            break written;
        }
        ensure!(
            watching.elapsed() < Duration::from_secs(30),
            "replica a never wrote the claimRef"
        );
        tokio::time::sleep(POLL).await;
    };
    a.kill();
    proxy.cut().await;
    let static_uid = claims.get("static").await?.metadata.uid.unwrap_or_default();
    ensure!(
        written == ("static".to_string(), static_uid.clone()),
        "the PV was bound to {written:?}"
    );
    ensure!(
        annotation(claims.get("dynamic").await?).is_none(),
        "the kill came too late: the dynamic claim was annotated already"
    );
    // What the dead replica left: the PV controller completes the static binding on its own.
    let volume = eventually("the static claim to be Bound", SETUP_TIMEOUT, || async {
        let claim = claims.get("static").await?;
        let bound = claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
        Ok(bound.then(|| claim.spec.and_then(|s| s.volume_name).unwrap_or_default()))
    })
    .await?;
    ensure!(volume == pv_name, "static bound to {volume}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    ensure!(
        annotation(claims.get("dynamic").await?).is_none(),
        "something else annotated the dynamic claim"
    );
    let pv_version = pvs.get(&pv_name).await?.metadata.resource_version;

    let b = InProcessReplica::start(&c.cp, "b", None)?;
    b.wait_ready().await?;
    let selected = eventually(
        "replica b to annotate the dynamic claim",
        Duration::from_secs(30),
        || async { Ok(annotation(claims.get("dynamic").await?)) },
    )
    .await?;
    eprintln!(
        "[faults] replica a killed after the claimRef; replica b (leader: {}) wrote {} write(s) and selected-node={selected}",
        b.state.metrics.is_leader(),
        b.state.metrics.bindings()
    );
    ensure!(selected == "n1", "selected-node {selected}");
    ensure!(
        b.state.metrics.bindings() == 1,
        "replica b made {} writes, expected only the annotation",
        b.state.metrics.bindings()
    );
    let pv_now = pvs.get(&pv_name).await?;
    ensure!(
        pv_now.metadata.resource_version == pv_version
            && claim_ref(pv_now) == Some(("static".to_string(), static_uid)),
        "the PV was written again"
    );
    Ok(())
}
