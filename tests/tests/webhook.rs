//! sched-webhook against the real control plane: the real kube-apiserver calls the webhook over TLS
//! (registered by URL on 127.0.0.1 with its caBundle), kube-controller-manager's PV binder completes
//! the bindings the webhook starts, and the real kube-scheduler places the pods.
//!
//! The webhook replicas run in this process, each on its own port, in a runtime of their own (a test's
//! runtime ends with the test). Two replicas serve the shared control plane: pods labelled
//! `e2e.kubectl-sched.dev/replica: b` go to the second, everything else (bindings included) to the
//! first. Only namespaces labelled `e2e.kubectl-sched.dev/webhook: on` are sent to the webhook.
//!
//! Scenarios: (a) pods created with spec.nodeName get their WaitForFirstConsumer claims bound or
//! provisioned for that node; (b) opted-in pods are pre-bound at admission and kube-scheduler follows
//! the affinity patch; (c) with VolumeBinding disabled in kube-scheduler, volumes are bound at
//! pods/binding; (d) a binding to a node that cannot reach the PV is denied with the reason;
//! (e) dryRun=All changes nothing; (f) two replicas, 50 concurrent pods, 50 PVs.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use axum_server::tls_rustls::RustlsConfig;
use e2e::fixtures::{TEST_LABEL, ready_node};
use e2e::{ControlPlane, Options};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Binding, Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use sched_core::framework::profile::SchedulerConfig;
use sched_core::plugins::in_tree_registry;
use sched_core::plugins::volume_binding::ERR_REASON_BIND_CONFLICT;
use sched_core::plugins::volume_binding::pv_helpers::{ANN_SELECTED_NODE, NOT_SUPPORTED_PROVISIONER};
use sched_webhook::admission::{OPT_IN_KEY, OPT_IN_VALUE, Operation};
use sched_webhook::cache::Cache;
use sched_webhook::certs::{self, Target};
use sched_webhook::metrics::RequestOutcome;
use sched_webhook::server::{AppState, Listeners, serve};

const WEBHOOK_LABEL: &str = "e2e.kubectl-sched.dev/webhook";
const REPLICA_LABEL: &str = "e2e.kubectl-sched.dev/replica";
const HOST: &str = "kubernetes.io/hostname";
const PAUSE: &str = "registry.k8s.io/pause:3.10";
const BIND_TIMEOUT: Duration = Duration::from_secs(90);
const SETUP_TIMEOUT: Duration = Duration::from_secs(60);

/// The webhook replicas serving one control plane.
struct Webhook {
    replicas: Vec<Arc<AppState>>,
    stops: Vec<tokio::sync::oneshot::Sender<()>>,
    _certs: tempfile::TempDir,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        for stop in self.stops.drain(..) {
            let _ = stop.send(());
        }
    }
}

impl Webhook {
    /// Waits until every replica's cache holds these PVs as Available (the PV controller marks new
    /// PVs Available after creation; volume binding, like kube-scheduler's, only matches those).
    async fn wait_available(&self, pvs: &[String]) -> Result<()> {
        eventually(
            "the PVs to be Available in the webhook caches",
            SETUP_TIMEOUT,
            || async {
                use sched_webhook::admission::ClusterView;
                let ready = self.replicas.iter().all(|r| {
                    let snapshot = r.cache.volume_snapshot();
                    pvs.iter().all(|name| {
                        snapshot.persistent_volumes.get(name).is_some_and(|pv| {
                            pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Available")
                        })
                    })
                });
                Ok(ready.then_some(()))
            },
        )
        .await
    }
}

/// Polls `probe` every 200 ms until it yields `Some`, for at most `timeout`.
async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await? {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn from_json<T: serde::de::DeserializeOwned>(value: Value) -> Result<T> {
    Ok(serde_json::from_value(value)?)
}

/// Starts `count` replicas against the control plane and registers them with the API server.
async fn start_webhook(cp: &ControlPlane, count: usize, configuration_name: &str) -> Result<Webhook> {
    let dir = tempfile::tempdir()?;
    let generated = certs::generate(&[], &["127.0.0.1".parse()?], 2)?;
    let files = certs::write(dir.path(), &generated)?;
    let mut listeners = Vec::new();
    let mut ports = Vec::new();
    for _ in 0..count {
        let webhook = TcpListener::bind("127.0.0.1:0")?;
        let admin = TcpListener::bind("127.0.0.1:0")?;
        ports.push(webhook.local_addr()?.port());
        listeners.push(Listeners { webhook, admin });
    }
    let tls = sched_webhook::tls::server_config(&files.cert, &files.key)?;
    let config = cp.config().clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("sched-webhook".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("webhook runtime");
            runtime.block_on(async move {
                let mut servers = Vec::new();
                for listeners in listeners {
                    let client = Client::try_from(config.clone()).expect("webhook client");
                    let (cache, writers) = Cache::new(SchedulerConfig::default_config(&in_tree_registry()));
                    let _reflectors = cache.start(&client, writers);
                    let state = Arc::new(AppState::new(cache, client));
                    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
                    servers.push(tokio::spawn(serve(
                        state.clone(),
                        listeners,
                        RustlsConfig::from_config(tls.clone()),
                        async {
                            let _ = stopped.await;
                        },
                        Duration::from_secs(5),
                    )));
                    let _ = tx.send((state, stop));
                }
                futures::future::join_all(servers).await;
            });
        })?;
    let mut replicas = Vec::new();
    let mut stops = Vec::new();
    for _ in 0..count {
        let (state, stop) = rx.recv_timeout(SETUP_TIMEOUT)?;
        replicas.push(state);
        stops.push(stop);
    }
    let webhook = Webhook {
        replicas,
        stops,
        _certs: dir,
    };
    eventually("the webhook caches to sync", SETUP_TIMEOUT, || async {
        Ok(webhook.replicas.iter().all(|r| r.cache.is_ready()).then_some(()))
    })
    .await?;

    // One entry per replica; the first takes everything not labelled for another replica (Bindings
    // carry no labels, so all bindings go to it).
    let on = LabelSelector {
        match_labels: Some([(WEBHOOK_LABEL.to_string(), "on".to_string())].into()),
        match_expressions: None,
    };
    let mut configuration: MutatingWebhookConfiguration = certs::webhook_configuration(
        configuration_name,
        &Target::Url(format!("https://127.0.0.1:{}/mutate", ports[0])),
        &generated.ca_cert_pem,
    );
    let hooks = configuration.webhooks.get_or_insert_with(Vec::new);
    let template = hooks[0].clone();
    hooks.clear();
    let others: Vec<String> = (1..count).map(replica_name).collect();
    for (i, port) in ports.iter().enumerate() {
        let mut hook = template.clone();
        hook.name = format!("r{i}.{}", certs::WEBHOOK_NAME);
        hook.client_config.url = Some(format!("https://127.0.0.1:{port}/mutate"));
        hook.namespace_selector = Some(on.clone());
        // Fail closed here: a webhook the API server cannot reach must fail the test, not be skipped.
        hook.failure_policy = Some("Fail".into());
        hook.object_selector = (count > 1).then(|| LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: REPLICA_LABEL.into(),
                operator: if i == 0 { "NotIn" } else { "In" }.into(),
                values: Some(if i == 0 {
                    others.clone()
                } else {
                    vec![replica_name(i)]
                }),
            }]),
        });
        if i > 0 {
            for rule in hook.rules.iter_mut().flatten() {
                rule.resources = Some(vec!["pods".into()]);
            }
        }
        hooks.push(hook);
    }
    certs::apply_webhook_configuration(&cp.client()?, &configuration).await?;

    // The API server picks configurations up from its informer: wait until each replica is called.
    let client = cp.client()?;
    let ns = labelled_namespace(cp, "probe", &[]).await?;
    let pods: Api<Pod> = Api::namespaced(client, &ns);
    for (i, replica) in webhook.replicas.iter().enumerate() {
        let mut attempt = 0;
        eventually(
            &format!("the API server to call replica {i}"),
            SETUP_TIMEOUT,
            || {
                attempt += 1;
                let pods = pods.clone();
                let replica = replica.clone();
                async move {
                    let before = replica
                        .metrics
                        .requests(Operation::PodCreateNodeName, RequestOutcome::Allowed);
                    let mut pod = pod_with_claim(&format!("probe-{i}-{attempt}"), "missing-claim");
                    pod["spec"]["nodeName"] = json!("nowhere");
                    pod["metadata"]["labels"] = json!({REPLICA_LABEL: replica_name(i)});
                    let _ = pods
                        .create(
                            &PostParams {
                                dry_run: true,
                                ..PostParams::default()
                            },
                            &from_json(pod)?,
                        )
                        .await;
                    let after = replica
                        .metrics
                        .requests(Operation::PodCreateNodeName, RequestOutcome::Allowed);
                    Ok((after > before).then_some(()))
                }
            },
        )
        .await?;
    }
    Ok(webhook)
}

fn replica_name(i: usize) -> String {
    ((b'a' + i as u8) as char).to_string()
}

/// The shared control plane's webhook: two replicas, started once per test binary.
async fn shared() -> Result<(&'static ControlPlane, &'static Webhook)> {
    static WEBHOOK: OnceCell<Webhook> = OnceCell::const_new();
    let cp = ControlPlane::shared().await?;
    let webhook = WEBHOOK
        .get_or_try_init(|| start_webhook(cp, 2, "sched-webhook-e2e"))
        .await?;
    Ok((cp, webhook))
}

/// A namespace the webhook serves, with extra labels.
async fn labelled_namespace(cp: &ControlPlane, prefix: &str, labels: &[(&str, &str)]) -> Result<String> {
    let ns = cp.new_namespace(prefix).await?;
    let mut all: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    all.insert(WEBHOOK_LABEL.into(), "on".into());
    let namespaces: Api<Namespace> = Api::all(cp.client()?);
    namespaces
        .patch(
            &ns,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": all}})),
        )
        .await?;
    // The API server matches namespaceSelector against its namespace informer: let it catch up.
    tokio::time::sleep(Duration::from_millis(500)).await;
    Ok(ns)
}

fn pod_with_claim(name: &str, claim: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": PAUSE, "resources": {"requests": {"cpu": "100m"}}}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
        },
    })
}

/// Test nodes, labelled for the test (pods select them), plus the local storage class and PVs.
struct Fixture {
    client: Client,
    ns: String,
    class: String,
}

impl Fixture {
    async fn new(cp: &ControlPlane, prefix: &str, labels: &[(&str, &str)]) -> Result<Self> {
        let ns = labelled_namespace(cp, prefix, labels).await?;
        let client = cp.client()?;
        let class = format!("{ns}-local");
        let classes: Api<StorageClass> = Api::all(client.clone());
        classes
            .create(
                &PostParams::default(),
                &from_json(json!({
                    "metadata": {"name": class},
                    "provisioner": NOT_SUPPORTED_PROVISIONER,
                    "volumeBindingMode": "WaitForFirstConsumer",
                }))?,
            )
            .await?;
        Ok(Fixture { client, ns, class })
    }

    fn node_name(&self, i: usize) -> String {
        format!("{}-n{i}", self.ns)
    }

    async fn nodes(&self, count: usize) -> Result<()> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        for i in 0..count {
            nodes
                .create(
                    &PostParams::default(),
                    &ready_node(&self.node_name(i), &self.ns, "8", "16Gi", "110"),
                )
                .await?;
        }
        Ok(())
    }

    /// A 1Gi local PV on node `i`.
    async fn local_pv(&self, name: &str, node: usize) -> Result<()> {
        let pvs: Api<PersistentVolume> = Api::all(self.client.clone());
        let pv = json!({
            "metadata": {"name": name, "labels": {TEST_LABEL: self.ns}},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": self.class,
                "persistentVolumeReclaimPolicy": "Retain",
                "local": {"path": "/mnt/e2e"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": HOST, "operator": "In", "values": [self.node_name(node)]}
                ]}]}},
            },
        });
        pvs.create(&PostParams::default(), &from_json(pv)?).await?;
        Ok(())
    }

    async fn claim(&self, name: &str, class: &str) -> Result<()> {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &self.ns);
        let claim = json!({
            "metadata": {"name": name},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": class,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        });
        claims.create(&PostParams::default(), &from_json(claim)?).await?;
        Ok(())
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    fn claims(&self) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// Waits until the claim is Bound and returns its volume.
    async fn bound_volume(&self, claim: &str) -> Result<String> {
        let claims = self.claims();
        eventually(
            &format!("claim {}/{claim} to be bound", self.ns),
            BIND_TIMEOUT,
            || async {
                let c = claims.get(claim).await?;
                let bound = c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
                Ok(bound.then(|| c.spec.and_then(|s| s.volume_name).unwrap_or_default()))
            },
        )
        .await
    }

    async fn claim_ref(&self, pv: &str) -> Result<Option<String>> {
        let pvs: Api<PersistentVolume> = Api::all(self.client.clone());
        let pv = pvs.get(pv).await?;
        Ok(pv.spec.and_then(|s| s.claim_ref).map(|r| {
            format!(
                "{}/{}",
                r.namespace.unwrap_or_default(),
                r.name.unwrap_or_default()
            )
        }))
    }
}

#[tokio::test]
async fn a_node_name_pods_get_their_claims_bound_or_provisioned_for_that_node() -> Result<()> {
    let (cp, webhook) = shared().await?;
    let f = Fixture::new(cp, "wh-a", &[]).await?;
    f.nodes(2).await?;
    f.local_pv(&format!("{}-pv0", f.ns), 0).await?;
    f.local_pv(&format!("{}-pv1", f.ns), 1).await?;
    f.claim("c1", &f.class).await?;
    webhook
        .wait_available(&[format!("{}-pv0", f.ns), format!("{}-pv1", f.ns)])
        .await?;

    let mut pod = pod_with_claim("p1", "c1");
    pod["spec"]["nodeName"] = json!(f.node_name(1));
    f.pods().create(&PostParams::default(), &from_json(pod)?).await?;
    let volume = f.bound_volume("c1").await?;
    ensure!(
        volume == format!("{}-pv1", f.ns),
        "claim bound to {volume}, expected the PV of node 1"
    );
    ensure!(
        f.claim_ref(&format!("{}-pv0", f.ns)).await?.is_none(),
        "the other node's PV stays free"
    );

    // A WaitForFirstConsumer class with a provisioner: the claim is handed to it for that node.
    let dynamic = format!("{}-dyn", f.ns);
    let classes: Api<StorageClass> = Api::all(f.client.clone());
    classes
        .create(
            &PostParams::default(),
            &from_json(json!({
                "metadata": {"name": dynamic},
                "provisioner": "e2e.kubectl-sched.dev/no-such-provisioner",
                "volumeBindingMode": "WaitForFirstConsumer",
            }))?,
        )
        .await?;
    f.claim("d1", &dynamic).await?;
    let mut pod = pod_with_claim("p2", "d1");
    pod["spec"]["nodeName"] = json!(f.node_name(0));
    f.pods().create(&PostParams::default(), &from_json(pod)?).await?;
    // The webhook's write is done before the API server stores the pod.
    let claim = f.claims().get("d1").await?;
    let selected = claim
        .metadata
        .annotations
        .unwrap_or_default()
        .get(ANN_SELECTED_NODE)
        .cloned();
    ensure!(
        selected.as_deref() == Some(f.node_name(0).as_str()),
        "selected-node: {selected:?}"
    );
    ensure!(webhook.replicas[0].metrics.bindings() >= 2);
    println!(
        "(a) {}/c1 bound to {volume}; {}/d1 selected-node {:?}",
        f.ns, f.ns, selected
    );
    Ok(())
}

#[tokio::test]
async fn b_opted_in_pods_are_prebound_and_placed_on_the_pvs_node() -> Result<()> {
    let (cp, webhook) = shared().await?;
    let f = Fixture::new(cp, "wh-b", &[]).await?;
    f.nodes(3).await?;
    // Only node 2 has a PV.
    f.local_pv(&format!("{}-pv2", f.ns), 2).await?;
    f.claim("c1", &f.class).await?;
    webhook.wait_available(&[format!("{}-pv2", f.ns)]).await?;
    let mut pod = pod_with_claim("p", "c1");
    pod["metadata"]["annotations"] = json!({OPT_IN_KEY: OPT_IN_VALUE});
    pod["spec"]["nodeSelector"] = json!({TEST_LABEL: f.ns});
    let created = f.pods().create(&PostParams::default(), &from_json(pod)?).await?;

    // The patch is in the stored pod: required affinity to the PV's node, the nodeSelector kept.
    let affinity = serde_json::to_value(
        created
            .spec
            .as_ref()
            .and_then(|s| s.affinity.clone())
            .context("no affinity patched in")?,
    )?;
    let terms =
        &affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
    ensure!(
        terms.to_string().contains(&f.node_name(2)),
        "affinity does not name the PV's node: {terms}"
    );
    // Pre-bound at admission, before any scheduling.
    ensure!(
        f.claim_ref(&format!("{}-pv2", f.ns)).await?.as_deref() == Some(format!("{}/c1", f.ns).as_str()),
        "PV not pre-bound at admission"
    );
    let pods = f.pods();
    let node = eventually("kube-scheduler to bind the pod", BIND_TIMEOUT, || async {
        Ok(pods.get("p").await?.spec.and_then(|s| s.node_name))
    })
    .await
    .with_context(|| cp.log_tail("kube-scheduler", 20))?;
    ensure!(node == f.node_name(2), "scheduled to {node}");
    let volume = f.bound_volume("c1").await?;
    ensure!(volume == format!("{}-pv2", f.ns));
    println!(
        "(b) {}/p pre-bound to {volume} at admission, kube-scheduler placed it on {node}",
        f.ns
    );
    Ok(())
}

#[tokio::test]
async fn c_volumes_are_bound_at_pods_binding_when_the_scheduler_skips_volume_binding() -> Result<()> {
    // A scheduler profile without VolumeBinding stands in for a custom scheduler.
    let cp = ControlPlane::start(
        Options::new()
            .with_scheduler(Some(
                "profiles:\n- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n      disabled:\n      - name: VolumeBinding\n",
            ))
            .with_controller_manager(&["persistentvolume-binder"]),
    )
    .await?;
    let webhook = start_webhook(&cp, 1, "sched-webhook-e2e-c").await?;
    let f = Fixture::new(&cp, "wh-c", &[]).await?;
    f.nodes(2).await?;
    f.local_pv(&format!("{}-pv0", f.ns), 0).await?;
    f.local_pv(&format!("{}-pv1", f.ns), 1).await?;
    webhook
        .wait_available(&[format!("{}-pv0", f.ns), format!("{}-pv1", f.ns)])
        .await?;
    for i in 0..2 {
        f.claim(&format!("c{i}"), &f.class).await?;
        let mut pod = pod_with_claim(&format!("p{i}"), &format!("c{i}"));
        pod["spec"]["nodeSelector"] = json!({TEST_LABEL: f.ns});
        // One pod per node, so each node's PV is needed exactly once.
        pod["metadata"]["labels"] = json!({"app": "c"});
        pod["spec"]["affinity"] = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "c"}}, "topologyKey": HOST}
        ]}});
        f.pods().create(&PostParams::default(), &from_json(pod)?).await?;
    }
    for i in 0..2 {
        let pods = f.pods();
        let name = format!("p{i}");
        let node = eventually("kube-scheduler to bind the pod", BIND_TIMEOUT, || async {
            Ok(pods.get(&name).await?.spec.and_then(|s| s.node_name))
        })
        .await
        .with_context(|| cp.log_tail("kube-scheduler", 20))?;
        let volume = f.bound_volume(&format!("c{i}")).await?;
        let expected = format!("{}-pv{}", f.ns, node.rsplit("-n").next().unwrap_or_default());
        ensure!(
            volume == expected,
            "pod on {node} got {volume}, expected {expected}"
        );
        println!(
            "(c) {}/{name} bound to {node} by kube-scheduler without VolumeBinding; claim bound to {volume} at pods/binding",
            f.ns
        );
    }
    ensure!(
        webhook.replicas[0]
            .metrics
            .requests(Operation::PodBinding, RequestOutcome::Allowed)
            >= 2
    );
    Ok(())
}

#[tokio::test]
async fn d_a_binding_to_a_node_that_cannot_reach_the_pv_is_denied() -> Result<()> {
    let (cp, webhook) = shared().await?;
    let f = Fixture::new(cp, "wh-d", &[]).await?;
    f.nodes(2).await?;
    f.local_pv(&format!("{}-pv0", f.ns), 0).await?;
    f.claim("c1", &f.class).await?;
    webhook.wait_available(&[format!("{}-pv0", f.ns)]).await?;
    let mut pod = pod_with_claim("p", "c1");
    // No scheduler picks this pod up: the test binds it by hand.
    pod["spec"]["schedulerName"] = json!("e2e-nobody");
    f.pods().create(&PostParams::default(), &from_json(pod)?).await?;
    // Wait until the webhook's cache has the pod (else it reads it from the API, also fine).
    let binding = |node: String| -> Result<Binding> {
        from_json(json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": "p", "namespace": f.ns},
            "target": {"kind": "Node", "name": node},
        }))
    };
    let denied: Result<Value, _> = f
        .pods()
        .create_subresource("binding", "p", &PostParams::default(), &binding(f.node_name(1))?)
        .await;
    let err = match denied {
        Ok(v) => bail!("binding to the wrong node was admitted: {v}"),
        Err(kube::Error::Api(status)) => status,
        Err(e) => bail!("unexpected error: {e}"),
    };
    ensure!(
        err.message.contains(ERR_REASON_BIND_CONFLICT),
        "message: {}",
        err.message
    );
    ensure!(
        err.message.contains("denied the request"),
        "message: {}",
        err.message
    );
    ensure!(f.pods().get("p").await?.spec.and_then(|s| s.node_name).is_none());
    ensure!(
        f.claim_ref(&format!("{}-pv0", f.ns)).await?.is_none(),
        "a denied binding claims nothing"
    );
    println!("(d) denied: {}", err.message);

    let _: Value = f
        .pods()
        .create_subresource("binding", "p", &PostParams::default(), &binding(f.node_name(0))?)
        .await?;
    let volume = f.bound_volume("c1").await?;
    ensure!(volume == format!("{}-pv0", f.ns));
    ensure!(
        webhook.replicas[0]
            .metrics
            .requests(Operation::PodBinding, RequestOutcome::Denied)
            >= 1
    );
    Ok(())
}

#[tokio::test]
async fn e_dry_run_creates_change_nothing() -> Result<()> {
    let (cp, webhook) = shared().await?;
    let f = Fixture::new(cp, "wh-e", &[]).await?;
    f.nodes(1).await?;
    f.local_pv(&format!("{}-pv0", f.ns), 0).await?;
    f.claim("c1", &f.class).await?;
    webhook.wait_available(&[format!("{}-pv0", f.ns)]).await?;
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let mut on_node = pod_with_claim("p1", "c1");
    on_node["spec"]["nodeName"] = json!(f.node_name(0));
    f.pods().create(&dry, &from_json(on_node)?).await?;
    let mut opted_in = pod_with_claim("p2", "c1");
    opted_in["metadata"]["annotations"] = json!({OPT_IN_KEY: OPT_IN_VALUE});
    opted_in["spec"]["nodeSelector"] = json!({TEST_LABEL: f.ns});
    let preview = f.pods().create(&dry, &from_json(opted_in)?).await?;
    // The dry-run answer shows what admission would do (the affinity patch)...
    ensure!(
        preview.spec.and_then(|s| s.affinity).is_some(),
        "dry-run shows the patch"
    );
    // ...and nothing happened.
    tokio::time::sleep(Duration::from_secs(2)).await;
    ensure!(
        f.claim_ref(&format!("{}-pv0", f.ns)).await?.is_none(),
        "dry-run bound a PV"
    );
    let claim = f.claims().get("c1").await?;
    ensure!(claim.spec.and_then(|s| s.volume_name).is_none());
    ensure!(
        !claim
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key(ANN_SELECTED_NODE)
    );
    ensure!(f.pods().list(&ListParams::default()).await?.items.is_empty());
    println!("(e) dry-run pod creates in {} left PV and claim untouched", f.ns);
    Ok(())
}

#[tokio::test]
async fn f_two_replicas_fifty_concurrent_pods_fifty_pvs() -> Result<()> {
    const NODES: usize = 5;
    const PODS: usize = 50;
    let (cp, webhook) = shared().await?;
    let f = Fixture::new(cp, "wh-f", &[]).await?;
    f.nodes(NODES).await?;
    for i in 0..PODS {
        f.local_pv(&format!("{}-pv{i:02}", f.ns), i % NODES).await?;
        f.claim(&format!("c{i:02}"), &f.class).await?;
    }
    // Let both replicas' caches see the volumes, Available.
    let names: Vec<String> = (0..PODS).map(|i| format!("{}-pv{i:02}", f.ns)).collect();
    webhook.wait_available(&names).await?;
    eventually("the replicas to cache the claims", SETUP_TIMEOUT, || async {
        Ok(webhook
            .replicas
            .iter()
            .all(|r| {
                use sched_webhook::admission::ClusterView;
                r.cache.pvc(&f.ns, &format!("c{:02}", PODS - 1)).is_some()
            })
            .then_some(()))
    })
    .await?;
    let before: Vec<(u64, u64)> = webhook
        .replicas
        .iter()
        .map(|r| (r.metrics.bindings(), r.metrics.conflicts_retried()))
        .collect();

    // 50 pods at once, 10 per node, alternating replicas: every node's 10 PVs are contended.
    let pods = f.pods();
    let started = Instant::now();
    let creates = (0..PODS).map(|i| {
        let pods = pods.clone();
        let mut pod = pod_with_claim(&format!("p{i:02}"), &format!("c{i:02}"));
        pod["spec"]["nodeName"] = json!(f.node_name(i % NODES));
        pod["metadata"]["labels"] = json!({REPLICA_LABEL: replica_name(i % 2)});
        async move {
            let pod: Pod = from_json(pod)?;
            pods.create(&PostParams::default(), &pod)
                .await
                .map_err(anyhow::Error::from)
        }
    });
    let results = futures::future::join_all(creates).await;
    let admitted = started.elapsed();
    let denied: Vec<String> = results
        .iter()
        .filter_map(|r| r.as_ref().err().map(|e| e.to_string()))
        .collect();
    ensure!(
        denied.is_empty(),
        "{} pods wrongly denied: {denied:?}",
        denied.len()
    );

    let claims = f.claims();
    eventually("all 50 claims to be bound", BIND_TIMEOUT, || async {
        let list = claims.list(&ListParams::default()).await?;
        let bound = list
            .items
            .iter()
            .filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"))
            .count();
        Ok((bound == PODS).then_some(()))
    })
    .await?;

    let pvs: Api<PersistentVolume> = Api::all(f.client.clone());
    let list = pvs
        .list(&ListParams::default().labels(&format!("{TEST_LABEL}={}", f.ns)))
        .await?;
    let mut claimed = BTreeSet::new();
    for pv in &list.items {
        let name = pv.metadata.name.clone().unwrap_or_default();
        let claim = pv
            .spec
            .as_ref()
            .and_then(|s| s.claim_ref.as_ref())
            .and_then(|r| r.name.clone())
            .with_context(|| format!("PV {name} is not claimed"))?;
        ensure!(claimed.insert(claim.clone()), "claim {claim} holds two PVs");
        // The claim's pod runs on the PV's node.
        let pod_index: usize = claim.trim_start_matches('c').parse()?;
        let pv_index: usize = name.rsplit("pv").next().unwrap_or_default().parse()?;
        ensure!(
            pod_index % NODES == pv_index % NODES,
            "claim {claim} (pod on node {}) bound to {name} on node {}",
            pod_index % NODES,
            pv_index % NODES
        );
    }
    ensure!(claimed.len() == PODS, "{} of {PODS} PVs claimed", claimed.len());
    let after: Vec<(u64, u64)> = webhook
        .replicas
        .iter()
        .map(|r| (r.metrics.bindings(), r.metrics.conflicts_retried()))
        .collect();
    let writes: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a.0 - b.0).collect();
    let conflicts: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a.1 - b.1).collect();
    ensure!(
        writes.iter().all(|w| *w > 0),
        "both replicas must have bound PVs: {writes:?}"
    );
    // Other tests share the replicas, so their writes may be counted too: at least one per claim.
    ensure!(
        writes.iter().sum::<u64>() >= PODS as u64,
        "one write per claim: {writes:?}"
    );
    println!(
        "(f) {PODS} pods admitted in {:.2} s by 2 replicas (PV writes {writes:?}, conflicts retried {conflicts:?}); every PV claimed once",
        admitted.as_secs_f64()
    );
    Ok(())
}
