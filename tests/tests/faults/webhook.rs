//! The fault tests of sched-webhook: a replica (caches and controller) runs in this process on a
//! runtime of its own, which a test can kill; etcd stopped under it, and a replica killed in the
//! middle of a pod's pre-binding.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use e2e::fixtures::eventually;
use e2e::latency::LatencyProxy;
use e2e::{ControlPlane, ETCD, Options};
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::{Cluster, POLL, SETUP_TIMEOUT, TURN, common};

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
        use sched_core::engine::{SchedulerConfig, in_tree_registry};
        use sched_core::labels::Selector;
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
    use sched_core::volumes::{ANN_SELECTED_NODE, NOT_SUPPORTED_PROVISIONER};

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
