//! sched-webhook's caller authentication against the real kube-apiserver.
//!
//! Two in-process replicas serve 127.0.0.1 with `--client-ca-file` (a client CA and an API-server
//! client pair made by `sched-webhook certs --client-cert`'s code). kube-apiserver is started with an
//! AdmissionConfiguration whose webhook kubeconfig presents that client certificate to replica A's
//! `host:port` only. Both are registered by URL with their caBundle and `failurePolicy: Fail`, each
//! for its own labelled namespace:
//!
//! (a) a direct HTTPS call to A without a client certificate (or with one another CA signed) fails in
//!     the TLS handshake; with the API server's certificate it is answered;
//! (b) a pod created in A's namespace reaches A (its request counter moves): the API server
//!     authenticated with the configured certificate;
//! (c) a pod created in B's namespace is refused by the API server (it holds no certificate for B,
//!     B refuses the handshake, `failurePolicy: Fail`), and B counts no request — though B is up
//!     and answers a direct call with the certificate.
//!
//! Loopback only; every wait is bounded.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use axum_server::tls_rustls::RustlsConfig;
use e2e::{ControlPlane, Options};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::PostParams;
use kube::{Api, Client};
use rustls::pki_types::ServerName;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use sched_core::engine::{SchedulerConfig, in_tree_registry};
use sched_webhook::admission::Operation;
use sched_webhook::cache::Cache;
use sched_webhook::certs::{self, Target};
use sched_webhook::metrics::RequestOutcome;
use sched_webhook::server::AppState;
use sched_webhook::serving::{Listeners, ServeOptions, serve_with};
use sched_webhook::tls::{self, TlsFiles};

const AUTH_LABEL: &str = "e2e.kubectl-sched.dev/auth";
const PAUSE: &str = "registry.k8s.io/pause:3.10";
const WAIT: Duration = Duration::from_secs(60);

use e2e::fixtures::eventually;

mod common;
use common::tls_connector as connector;

/// Every admission request a replica has answered.
fn requests(state: &AppState) -> u64 {
    const OUTCOMES: [RequestOutcome; 4] = [
        RequestOutcome::Allowed,
        RequestOutcome::Patched,
        RequestOutcome::Denied,
        RequestOutcome::Rejected,
    ];
    Operation::ALL
        .iter()
        .flat_map(|op| {
            OUTCOMES
                .iter()
                .map(move |outcome| state.metrics.requests(*op, *outcome))
        })
        .sum()
}

/// A pod that the webhook configuration's matchCondition sends (it names a claim).
fn pod_with_claim(name: &str) -> Result<Pod> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [{"name": "c", "image": PAUSE}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "missing"}}],
        },
    }))?)
}

/// POSTs an AdmissionReview of a pod without claims straight to `port` over HTTPS/1.1: the status
/// line, or the error (TLS handshake, reset) that ended the call.
async fn direct_call(
    port: u16,
    connector: tokio_rustls::TlsConnector,
) -> std::result::Result<String, String> {
    let call = async {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| e.to_string())?;
        let name = ServerName::try_from("127.0.0.1").map_err(|e| e.to_string())?;
        let mut tls = connector
            .connect(name, tcp)
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        let review = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "direct", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "namespace": "default", "operation": "CREATE", "userInfo": {"username": "direct"},
                        "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                                   "spec": {"containers": [{"name": "c", "image": PAUSE}]}}}
        })
        .to_string();
        let request = format!(
            "POST /mutate HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{review}",
            review.len()
        );
        tls.write_all(request.as_bytes())
            .await
            .map_err(|e| format!("write: {e}"))?;
        let mut answer = Vec::new();
        tls.read_to_end(&mut answer)
            .await
            .map_err(|e| format!("read: {e}"))?;
        let answer = String::from_utf8_lossy(&answer).into_owned();
        match answer.lines().next() {
            Some(status) if !status.is_empty() => Ok(status.to_string()),
            _ => Err("closed without an answer".to_string()),
        }
    };
    tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .unwrap_or_else(|_| Err("no answer in 10 s".to_string()))
}

/// A replica's state and the sender that stops it.
struct Replica {
    state: Arc<AppState>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// Starts one replica per listener in a runtime of their own (a test's runtime ends with the test),
/// each requiring client certificates of `client_ca`.
fn start_replicas(cp: &ControlPlane, listeners: Vec<Listeners>, files: TlsFiles) -> Result<Vec<Replica>> {
    let tls = tls::server_config_for(&files)?;
    let config = cp.config().clone();
    let count = listeners.len();
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
                    let reflectors = cache.start(&client, writers);
                    let state = Arc::new(AppState::new(cache, client));
                    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
                    let served = serve_with(
                        state.clone(),
                        listeners,
                        RustlsConfig::from_config(tls.clone()),
                        async {
                            let _ = stopped.await;
                        },
                        ServeOptions {
                            grace: Duration::from_secs(2),
                            ..ServeOptions::default()
                        },
                    );
                    servers.push(tokio::spawn(async move {
                        let _reflectors = reflectors;
                        served.await
                    }));
                    let _ = tx.send(Replica { state, _stop: stop });
                }
                futures::future::join_all(servers).await;
            });
        })?;
    (0..count)
        .map(|_| rx.recv_timeout(WAIT).context("a replica to start"))
        .collect()
}

#[tokio::test]
async fn only_the_api_server_holding_the_client_certificate_gets_through() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let serving = certs::generate(&[], &["127.0.0.1".parse()?], 1)?;
    let serving_files = certs::write(dir.path(), &serving)?;
    let client = certs::generate_client("kube-apiserver", 1)?;
    let client_files = certs::write_client(dir.path(), &client)?;
    let stranger = certs::generate_client("kube-apiserver", 1)?;

    // The ports first: the API server's admission configuration names A's host:port.
    let listeners: Vec<Listeners> = (0..2)
        .map(|_| {
            Ok(Listeners {
                webhook: TcpListener::bind("127.0.0.1:0")?,
                admin: TcpListener::bind("127.0.0.1:0")?,
            })
        })
        .collect::<Result<_>>()?;
    let ports: Vec<u16> = listeners
        .iter()
        .map(|l| l.webhook.local_addr().map(|a| a.port()))
        .collect::<std::io::Result<_>>()?;
    let (port_a, port_b) = (ports[0], ports[1]);
    let cp = ControlPlane::start(Options::new().with_webhook_client_cert(
        &format!("127.0.0.1:{port_a}"),
        &client_files.cert,
        &client_files.key,
    ))
    .await?;
    let files = TlsFiles::new(&serving_files.cert, &serving_files.key).with_client_ca(&client_files.ca_cert);
    let replicas = start_replicas(&cp, listeners, files)?;
    eventually("the replicas' caches to sync", WAIT, || async {
        Ok(replicas.iter().all(|r| r.state.cache.is_ready()).then_some(()))
    })
    .await?;

    // (a) Straight to A: no certificate, or one of another CA, fails in the handshake.
    let trusted = Some((client.cert_pem.as_str(), client.key_pem.as_str()));
    let wrong = Some((stranger.cert_pem.as_str(), stranger.key_pem.as_str()));
    let anonymous = direct_call(port_a, connector(&serving.ca_cert_pem, None)?).await;
    ensure!(
        anonymous
            .as_ref()
            .is_err_and(|e| e.to_lowercase().contains("certificate")),
        "a caller without a certificate must fail the handshake: {anonymous:?}"
    );
    let with_wrong = direct_call(port_a, connector(&serving.ca_cert_pem, wrong)?).await;
    ensure!(
        with_wrong.is_err(),
        "another CA's certificate was answered: {with_wrong:?}"
    );
    for port in [port_a, port_b] {
        let answered = direct_call(port, connector(&serving.ca_cert_pem, trusted)?).await;
        ensure!(
            answered.as_deref().is_ok_and(|s| s.starts_with("HTTP/1.1 200")),
            "port {port} answers the client certificate: {answered:?}"
        );
    }
    println!(
        "direct calls to A: without a certificate {}; with another CA's {}",
        anonymous.err().unwrap_or_default(),
        with_wrong.err().unwrap_or_default()
    );
    let direct = [requests(&replicas[0].state), requests(&replicas[1].state)];

    // Register both, each for its own namespace, failing closed.
    let admin = cp.client()?;
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    for side in ["a", "b"] {
        let ns: Namespace = serde_json::from_value(json!({
            "metadata": {"name": format!("auth-{side}"), "labels": {AUTH_LABEL: side}}
        }))?;
        namespaces.create(&PostParams::default(), &ns).await?;
    }
    let mut configuration: MutatingWebhookConfiguration = certs::webhook_configuration(
        "sched-webhook-auth",
        &Target::Url(format!("https://127.0.0.1:{port_a}/mutate")),
        &serving.ca_cert_pem,
    );
    let hooks = configuration.webhooks.get_or_insert_with(Vec::new);
    let template = hooks[0].clone();
    hooks.clear();
    for (side, port) in [("a", port_a), ("b", port_b)] {
        let mut hook = template.clone();
        hook.name = format!("{side}.{}", certs::WEBHOOK_NAME);
        hook.client_config.url = Some(format!("https://127.0.0.1:{port}/mutate"));
        hook.namespace_selector = Some(LabelSelector {
            match_labels: Some([(AUTH_LABEL.to_string(), side.to_string())].into()),
            match_expressions: None,
        });
        hook.failure_policy = Some("Fail".into());
        hooks.push(hook);
    }
    certs::apply_webhook_configuration(&admin, &configuration).await?;

    // (b) A pod in A's namespace reaches A (once the API server has loaded the configuration).
    let pods_a: Api<Pod> = Api::namespaced(admin.clone(), "auth-a");
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let mut attempt = 0;
    eventually(
        "the API server to call A with its client certificate",
        WAIT,
        || {
            attempt += 1;
            let (pods, dry_run, state) = (pods_a.clone(), dry_run.clone(), replicas[0].state.clone());
            async move {
                let created = pods
                    .create(&dry_run, &pod_with_claim(&format!("probe-{attempt}"))?)
                    .await;
                Ok((created.is_ok() && requests(&state) > direct[0]).then_some(()))
            }
        },
    )
    .await?;
    let created = pods_a
        .create(&PostParams::default(), &pod_with_claim("through-a")?)
        .await?;
    ensure!(
        created.metadata.uid.is_some(),
        "the pod in A's namespace was stored"
    );
    println!(
        "A: {} admission request(s) from the API server",
        requests(&replicas[0].state) - direct[0]
    );

    // (c) A pod in B's namespace: the API server holds no certificate for B, B refuses the
    // handshake, and failurePolicy Fail refuses the pod. (The configuration is loaded: (b) saw it.)
    let pods_b: Api<Pod> = Api::namespaced(admin.clone(), "auth-b");
    let refused = pods_b
        .create(&PostParams::default(), &pod_with_claim("refused-b")?)
        .await
        .err()
        .context("a pod in B's namespace must be refused")?;
    let message = refused.to_string();
    ensure!(
        // Go's client reports the TLS alert ("remote error: tls: certificate required") when it
        // reads it, or the reset that follows when its first write comes first.
        message.contains("failed calling webhook") && message.contains(&format!("127.0.0.1:{port_b}")),
        "refused for the call to B: {message}"
    );
    ensure!(
        requests(&replicas[1].state) == direct[1],
        "B answered no request of the API server"
    );
    let stored: Value = serde_json::to_value(pods_b.get_opt("refused-b").await?)?;
    ensure!(stored.is_null(), "the refused pod was not stored");
    println!("B: the API server without a certificate for it was refused: {message}");
    Ok(())
}
