//! sched-webhook on a busy cluster, against the real control plane (its own per test binary, so that
//! the bulk pods here do not slow the other webhook tests; the tests here run one at a time):
//!
//! (l) 8,000 pods: three replicas started at different moments all become ready, the first one
//!     winning its Lease while its pod list is still running (it used to stay unready forever: two
//!     tasks waited on kube-runtime's pod store readiness, which wakes only one);
//! (m) 5,000 pods created and deleted within moments of each other: afterwards a `spec.nodeName` pod
//!     with a WaitForFirstConsumer claim gets its PV within 2 s, and an opted-in pod's narrowing
//!     sees a pod created after the churn (the controller used to stop reading kube-runtime's shared
//!     pod stream at a deleted pod, which then blocked the pod watch itself).

#[path = "webhook/harness.rs"]
mod harness;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client};
use serde_json::json;

use e2e::ControlPlane;
use e2e::fixtures::ready_node;
use sched_core::engine::{SchedulerConfig, in_tree_registry};
use sched_webhook::admission::{OPT_IN_KEY, OPT_IN_VALUE};
use sched_webhook::health::Health;
use sched_webhook::run::{Replica, ReplicaClients};
use sched_webhook::server::{AppState, Limits};

use harness::{Fixture, controller_config, from_json, pod_with_claim, start_webhook};

/// Requests in flight while pods are created in bulk (8,000 in 16 s here).
const IN_FLIGHT: usize = 32;
/// Requests in flight during the churn (the API server is the bound here: 5,000 pods created and
/// deleted took 35 s at 32 in flight, 37.6 s at 64).
const CHURN_IN_FLIGHT: usize = 64;
/// Pods of the busy cluster (l).
const BUSY_PODS: usize = 8_000;
/// Pods created and deleted (m).
const CHURNED_PODS: usize = 5_000;
/// How long a replica may take to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How soon after the churn the controller must act, and the cache see a new pod.
const KEEP_UP: Duration = Duration::from_secs(2);

/// The tests here load the control plane on purpose: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A claim-less pod in `ns`, bound to `node` when given (no kubelet runs: it stays Pending).
fn plain_pod(name: &str, node: Option<&str>) -> Result<Pod> {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": harness::PAUSE}],
        },
    });
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
    }
    from_json(pod)
}

/// A replica started alone (no webhook port), on a runtime of its own as `sched-webhook serve` runs.
struct LoneReplica {
    state: Arc<AppState>,
    stop: tokio::sync::watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LoneReplica {
    fn start(config: kube::Config, lease: &str, i: usize) -> Result<Self> {
        let controller = controller_config(lease, i);
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(format!("sched-webhook-{i}"))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("replica runtime");
                runtime.block_on(async move {
                    let client = match Client::try_from(config) {
                        Ok(client) => client,
                        Err(e) => {
                            let _ = tx.send(Err(anyhow::Error::from(e)));
                            return;
                        }
                    };
                    let replica = Replica::start(
                        ReplicaClients::shared(&client),
                        SchedulerConfig::default_config(&in_tree_registry()),
                        Limits::default(),
                        controller,
                    );
                    let stopped = replica.stopped();
                    let _ = tx.send(Ok((replica.state.clone(), replica.stop_handle())));
                    stopped.await;
                    replica.stop().await;
                });
            })?;
        let (state, stop) = rx.recv_timeout(harness::SETUP_TIMEOUT)??;
        Ok(LoneReplica {
            state,
            stop,
            thread: Some(thread),
        })
    }

    /// What `/readyz` answers.
    fn ready(&self) -> Result<(), String> {
        Health::of(&self.state.cache).ready(self.state.cache.is_ready())
    }

    fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Creates `count` pods named `{prefix}-{i}` in `ns`, `in_flight` at a time; `node(i)` binds pod
/// `i`. With `delete`, each pod is deleted as soon as it is created.
async fn bulk_pods(
    client: &Client,
    ns: &str,
    prefix: &str,
    count: usize,
    in_flight: usize,
    node: impl Fn(usize) -> Option<String>,
    delete: bool,
) -> Result<Duration> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let started = Instant::now();
    futures::stream::iter(0..count)
        .map(|i| {
            let pods = pods.clone();
            let name = format!("{prefix}-{i}");
            let pod = plain_pod(&name, node(i).as_deref());
            async move {
                pods.create(&PostParams::default(), &pod?).await?;
                if delete {
                    pods.delete(&name, &DeleteParams::default().grace_period(0))
                        .await?;
                }
                anyhow::Ok(())
            }
        })
        .buffer_unordered(in_flight)
        .try_collect::<()>()
        .await?;
    Ok(started.elapsed())
}

#[tokio::test]
async fn l_three_replicas_on_a_cluster_of_eight_thousand_pods_all_become_ready() -> Result<()> {
    let _serial = SERIAL.lock().await;
    let cp = ControlPlane::shared().await?;
    let client = cp.client()?;
    let ns = cp.new_namespace("busy").await?;
    let nodes: Api<Node> = Api::all(client.clone());
    for i in 0..20 {
        nodes
            .create(
                &PostParams::default(),
                &ready_node(&format!("{ns}-n{i}"), &ns, "64", "256Gi", "1000"),
            )
            .await?;
    }
    let f = Fixture {
        client: client.clone(),
        ns: ns.clone(),
        class: format!("{ns}-local"),
    };
    for i in 0..20 {
        f.local_pv(&format!("{ns}-pv{i}"), i).await?;
        f.claim(&format!("c{i}"), &f.class).await?;
    }
    let took = bulk_pods(
        &client,
        &ns,
        "bulk",
        BUSY_PODS,
        IN_FLIGHT,
        |i| Some(format!("{ns}-n{}", i % 20)),
        false,
    )
    .await?;
    println!(
        "(l) {BUSY_PODS} pods created in {:.1} s ({IN_FLIGHT} in flight)",
        took.as_secs_f64()
    );

    // Three replicas of one Lease, started 0, 1 and 2 s apart. The Lease is new: the first replica
    // wins it at once, while it is still listing the pods.
    let lease = format!("sched-webhook-busy-{ns}");
    let mut replicas: Vec<LoneReplica> = Vec::new();
    let mut times: Vec<(Instant, Option<Duration>, Option<Duration>)> = Vec::new();
    let first = Instant::now();
    let deadline = first + READY_TIMEOUT;
    loop {
        // Polled every 20 ms while the replicas start, so the order of "leads" and "ready" is seen.
        let due = replicas.len() < 3 && first.elapsed() >= Duration::from_secs(replicas.len() as u64);
        if due {
            let i = replicas.len();
            replicas.push(LoneReplica::start(cp.config().clone(), &lease, i)?);
            times.push((Instant::now(), None, None));
        }
        for (replica, (started, leading, ready)) in replicas.iter().zip(times.iter_mut()) {
            if leading.is_none() && replica.state.metrics.is_leader() {
                *leading = Some(started.elapsed());
            }
            if ready.is_none() && replica.ready().is_ok() {
                *ready = Some(started.elapsed());
            }
        }
        if replicas.len() == 3 && times.iter().all(|(_, _, ready)| ready.is_some()) {
            break;
        }
        if Instant::now() > deadline {
            let states: Vec<String> = replicas
                .iter()
                .zip(&times)
                .enumerate()
                .map(|(i, (r, (_, leading, _)))| {
                    format!(
                        "replica {i}: leads since {leading:?}, /readyz {:?}, {} pods cached",
                        r.ready(),
                        r.state.cache.pod_count()
                    )
                })
                .collect();
            bail!(
                "not every replica became ready within {READY_TIMEOUT:?}: {}",
                states.join("; ")
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for (i, (_, leading, ready)) in times.iter().enumerate() {
        println!("(l) replica {i}: leads since {leading:?}, ready after {ready:?}");
    }
    let leader = times
        .iter()
        .position(|(_, leading, _)| leading.is_some())
        .context("no replica leads")?;
    let (_, leading, ready) = times[leader];
    ensure!(
        leading < ready,
        "the leader (replica {leader}) won the Lease after its caches synced ({leading:?} vs {ready:?}): \
         the test proves nothing about a Lease won during the pod list"
    );
    for replica in &replicas {
        ensure!(replica.state.cache.pod_count() >= BUSY_PODS);
    }
    for replica in replicas {
        replica.stop();
    }
    Ok(())
}

#[tokio::test]
async fn m_after_pod_churn_the_controller_acts_and_the_pod_cache_follows() -> Result<()> {
    let _serial = SERIAL.lock().await;
    let cp = ControlPlane::shared().await?;
    let webhook = start_webhook(cp, 1, "sched-webhook-churn").await?;
    webhook.leader().await?;
    let replica = webhook.replicas[0].clone();
    let f = Fixture::new(cp, "churn", &[]).await?;
    f.nodes(2).await?;
    let (n0, n1) = (f.node_name(0), f.node_name(1));
    // `a`: the spec.nodeName pod's claim, its PV on n0. `b`: the opted-in pod's claim, a PV on each node.
    for (pv, node) in [("a0", 0), ("b0", 0), ("b1", 1)] {
        f.local_pv(&format!("{}-pv-{pv}", f.ns), node).await?;
    }
    f.claim("a", &f.class).await?;
    f.claim("b", &f.class).await?;
    let pv = |name: &str| format!("{}-pv-{name}", f.ns);
    webhook.wait_available(&[pv("a0"), pv("b0"), pv("b1")]).await?;
    // Half of n0's CPU taken before the churn: n1, emptier, is the better node until it fills up.
    let mut half = plain_pod("half", Some(&n0))?;
    half.spec.as_mut().context("spec")?.containers[0].resources =
        Some(from_json(json!({"requests": {"cpu": "4"}}))?);
    f.pods().create(&PostParams::default(), &half).await?;

    // The churn, in a namespace the webhook does not serve (its admission is not what is tested).
    let churn_ns = cp.new_namespace("churn-pods").await?;
    let took = bulk_pods(
        &f.client,
        &churn_ns,
        "churn",
        CHURNED_PODS,
        CHURN_IN_FLIGHT,
        |_| None,
        true,
    )
    .await?;
    println!(
        "(m) {CHURNED_PODS} pods created and deleted in {:.1} s ({CHURN_IN_FLIGHT} in flight)",
        took.as_secs_f64()
    );

    // A pod created on n0 with claim `a`: the controller binds PV a0 to it.
    let mut pod = pod_with_claim("bound", "a");
    pod["spec"]["nodeName"] = json!(n0);
    let created = Instant::now();
    f.pods().create(&PostParams::default(), &from_json(pod)?).await?;
    let a_claimed = loop {
        if f.claim_ref(&pv("a0")).await?.as_deref() == Some(format!("{}/a", f.ns).as_str()) {
            break created.elapsed();
        }
        if created.elapsed() > KEEP_UP * 10 {
            bail!(
                "PV {} not claimed {:?} after the pod was created: the controller stopped after the churn \
                 (/readyz: {:?})",
                pv("a0"),
                created.elapsed(),
                Health::of(&replica.cache).ready(replica.cache.is_ready())
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    ensure!(
        a_claimed <= KEEP_UP,
        "PV {} claimed {a_claimed:?} after the pod was created (at most {KEEP_UP:?})",
        pv("a0")
    );

    // A pod created after the churn fills n1; the cache must see it.
    let mut filler = plain_pod("filler", Some(&n1))?;
    filler.spec.as_mut().context("spec")?.containers[0].resources =
        Some(from_json(json!({"requests": {"cpu": "8"}}))?);
    f.pods().create(&PostParams::default(), &filler).await?;
    let filler_ref = ObjectRef::<Pod>::new("filler").within(&f.ns);
    let created = Instant::now();
    let seen = loop {
        if replica.cache.pod_store().get(&filler_ref).is_some() {
            break created.elapsed();
        }
        if created.elapsed() > KEEP_UP {
            bail!(
                "the webhook's pod cache has not seen a pod created {KEEP_UP:?} ago: the pod watch froze \
                 after the churn"
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };

    // An opted-in pod that fits n0 only now: its affinity is narrowed to n0's PV, not the full n1's.
    let mut opted = pod_with_claim("opted", "b");
    opted["metadata"]["annotations"] = json!({OPT_IN_KEY: OPT_IN_VALUE});
    opted["spec"]["nodeSelector"] = json!({e2e::fixtures::TEST_LABEL: f.ns});
    let stored = f
        .pods()
        .create(&PostParams::default(), &from_json(opted)?)
        .await?;
    let affinity = serde_json::to_string(
        &stored
            .spec
            .and_then(|s| s.affinity)
            .context("the opted-in pod was not narrowed")?,
    )?;
    ensure!(
        affinity.contains(&n0) && !affinity.contains(&n1),
        "the opted-in pod was narrowed to {affinity}, expected {n0} only ({n1} is full)"
    );
    ensure!(Health::of(&replica.cache).ready(replica.cache.is_ready()).is_ok());
    println!(
        "(m) after the churn: PV claimed {:.0} ms after its pod was created, a new pod cached after {:.0} ms, \
         the opted-in pod narrowed to {n0}",
        a_claimed.as_secs_f64() * 1e3,
        seen.as_secs_f64() * 1e3
    );
    Ok(())
}
