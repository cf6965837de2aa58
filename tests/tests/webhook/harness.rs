//! The harness of the webhook e2e tests (`webhook.rs` and `webhook_churn.rs` include it): replicas
//! started in this process and registered with a control plane's API server, and the fixtures (nodes,
//! local PVs, WaitForFirstConsumer claims) the tests build on.

// Each test binary uses part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use axum_server::tls_rustls::RustlsConfig;
use e2e::ControlPlane;
use e2e::fixtures::{TEST_LABEL, ready_node};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use sched_core::engine::{SchedulerConfig, in_tree_registry};
use sched_core::labels::Selector;
use sched_core::volumes::NOT_SUPPORTED_PROVISIONER;
use sched_webhook::admission::Operation;
use sched_webhook::certs::{self, Target};
use sched_webhook::controller::stored_pod::Scope;
use sched_webhook::controller::{self, ControllerConfig};
use sched_webhook::metrics::RequestOutcome;
use sched_webhook::run::{Replica, ReplicaClients};
use sched_webhook::server::{AppState, Limits, Listeners, serve};

pub const WEBHOOK_LABEL: &str = "e2e.kubectl-sched.dev/webhook";
pub const REPLICA_LABEL: &str = "e2e.kubectl-sched.dev/replica";
pub const HOST: &str = "kubernetes.io/hostname";
pub const PAUSE: &str = "registry.k8s.io/pause:3.10";
pub const BIND_TIMEOUT: Duration = Duration::from_secs(90);
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(60);

/// The webhook replicas serving one control plane.
pub struct Webhook {
    pub replicas: Vec<Arc<AppState>>,
    pub stops: Vec<tokio::sync::watch::Sender<bool>>,
    pub ports: Vec<u16>,
    pub ca_cert_pem: String,
    pub _certs: tempfile::TempDir,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        for stop in self.stops.drain(..) {
            let _ = stop.send(true);
        }
    }
}

/// The controller of replica `i`: Lease `lease` in `default`, a short lease so a test does not wait
/// long for the first leader, and the test namespaces only.
pub fn controller_config(lease: &str, i: usize) -> ControllerConfig {
    ControllerConfig {
        lease_name: lease.to_string(),
        lease_namespace: "default".into(),
        identity: format!("replica-{i}"),
        lease_seconds: 4,
        scope: Scope {
            namespaces: Selector::from_map(&[(WEBHOOK_LABEL.to_string(), "on".to_string())].into()),
            max_claims: sched_webhook::server::DEFAULT_MAX_CLAIMS,
            binding_window: controller::DEFAULT_BINDING_WINDOW,
        },
        plan_budget: controller::DEFAULT_PLAN_BUDGET,
        concurrency: controller::DEFAULT_CONCURRENCY,
    }
}

impl Webhook {
    /// PV writes made by all replicas so far.
    pub fn bindings(&self) -> u64 {
        self.replicas.iter().map(|r| r.metrics.bindings()).sum()
    }

    /// Waits until one replica leads, and returns its index.
    pub async fn leader(&self) -> Result<usize> {
        eventually(
            "a replica to hold the controller's Lease",
            SETUP_TIMEOUT,
            || async { Ok(self.replicas.iter().position(|r| r.metrics.is_leader())) },
        )
        .await
    }

    /// Waits until every replica's cache holds these PVs as Available (the PV controller marks new
    /// PVs Available after creation; volume binding, like kube-scheduler's, only matches those).
    pub async fn wait_available(&self, pvs: &[String]) -> Result<()> {
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

pub use e2e::fixtures::eventually;

pub fn from_json<T: serde::de::DeserializeOwned>(value: Value) -> Result<T> {
    Ok(serde_json::from_value(value)?)
}

/// Starts `count` replicas against the control plane and registers them with the API server.
pub async fn start_webhook(cp: &ControlPlane, count: usize, configuration_name: &str) -> Result<Webhook> {
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
    let lease = configuration_name.to_string();
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
                for (i, listeners) in listeners.into_iter().enumerate() {
                    let client = Client::try_from(config.clone()).expect("webhook client");
                    let replica = Replica::start(
                        ReplicaClients::shared(&client),
                        SchedulerConfig::default_config(&in_tree_registry()),
                        Limits::default(),
                        controller_config(&lease, i),
                    );
                    let (state, stop, stopped) =
                        (replica.state.clone(), replica.stop_handle(), replica.stopped());
                    let tls = tls.clone();
                    servers.push(tokio::spawn(async move {
                        let served = serve(
                            replica.state.clone(),
                            listeners,
                            RustlsConfig::from_config(tls),
                            stopped,
                            Duration::from_secs(5),
                        )
                        .await;
                        replica.stop().await;
                        served
                    }));
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
        ports: ports.clone(),
        ca_cert_pem: generated.ca_cert_pem.clone(),
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

pub fn replica_name(i: usize) -> String {
    ((b'a' + i as u8) as char).to_string()
}

/// The shared control plane's webhook: two replicas, started once per test binary.
pub async fn shared() -> Result<(&'static ControlPlane, &'static Webhook)> {
    static WEBHOOK: OnceCell<Webhook> = OnceCell::const_new();
    let cp = ControlPlane::shared().await?;
    let webhook = WEBHOOK
        .get_or_try_init(|| start_webhook(cp, 2, "sched-webhook-e2e"))
        .await?;
    Ok((cp, webhook))
}

/// A namespace the webhook serves, with extra labels.
pub async fn labelled_namespace(cp: &ControlPlane, prefix: &str, labels: &[(&str, &str)]) -> Result<String> {
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

pub fn pod_with_claim(name: &str, claim: &str) -> Value {
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
pub struct Fixture {
    pub client: Client,
    pub ns: String,
    pub class: String,
}

impl Fixture {
    pub async fn new(cp: &ControlPlane, prefix: &str, labels: &[(&str, &str)]) -> Result<Self> {
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

    pub fn node_name(&self, i: usize) -> String {
        format!("{}-n{i}", self.ns)
    }

    pub async fn nodes(&self, count: usize) -> Result<()> {
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
    pub async fn local_pv(&self, name: &str, node: usize) -> Result<()> {
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

    pub async fn claim(&self, name: &str, class: &str) -> Result<()> {
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

    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    pub fn claims(&self) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// Waits until the claim is Bound and returns its volume.
    pub async fn bound_volume(&self, claim: &str) -> Result<String> {
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

    pub async fn claim_ref(&self, pv: &str) -> Result<Option<String>> {
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
