//! The in-cluster explainer (`sched-webhook explainer`) behind the real kube-apiserver's
//! aggregation layer.
//!
//! kube-apiserver runs with the front-proxy flags a kubeadm cluster has (`--requestheader-*`,
//! `--proxy-client-*`, [`Options::with_aggregation_layer`]). The explainer runs in this process on
//! 127.0.0.1 (a runtime of its own), reads the front proxy's CA from the
//! `extension-apiserver-authentication` ConfigMap as it does in a cluster, and is registered by an
//! APIService whose Service is of type ExternalName `localhost` (kube-apiserver's default routing
//! resolves it to `localhost:PORT`). No kube-scheduler runs, so a pending pod's facts (no Lease, no
//! events) stay the same between two runs of the CLI. Then:
//!
//! - `kubectl sched explain POD --via cluster` prints what `--via local` (a listing) prints, byte for
//!   byte, in every format, and `-v 1` says which path answered;
//! - a user with RBAC in namespace A only gets an answer for A and the API server's Forbidden for
//!   B; a user allowed `podexplanations` but not `pods` in B gets the explainer's Forbidden (its
//!   SubjectAccessReview);
//! - an answer for a pod in A that names a pod of B (an anti-affinity collision) hides that name
//!   from a user who cannot list pods in B, and only the name;
//! - a call straight to the explainer's port with forged identity headers gets no answer: without
//!   the front proxy's certificate the TLS handshake fails;
//! - a pod created, then deleted, is explained, then not found, within a bounded wait;
//! - faults (the lab's turn keeps every other test out meanwhile): kube-apiserver
//!   killed and started again (`/readyz` unready while it is down; every answer carries its age
//!   until the snapshot is in sync again; ready again, new pods explained); a watch expired (a pod
//!   deleted in etcd behind the API server's back and etcd compacted past it: kube-apiserver answers
//!   410 Gone to the explainer's resourceVersion, the explainer lists again and the pod is gone);
//!   the explainer killed and started again (ready means listed: what changed while it was down is
//!   in its first answer);
//! - its pending-reason metrics, scraped by a real Prometheus, and their alerts under promtool
//!   ([`pending_metrics`]).

#[path = "../common/mod.rs"]
mod common;
mod faults;
mod pending_metrics;

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use clap::Parser;
use e2e::fixtures::eventually;
use e2e::{ControlPlane, Options};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use rustls::pki_types::ServerName;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::OnceCell;

use common::{Lab, kubectl_sched_binary, pod, run_kubectl_sched, tls_connector as connector};
use sched_webhook::certs;
use sched_webhook::config::{Cli, Command};

/// The namespace of the explainer's Service.
const SERVICE_NAMESPACE: &str = "sched-explainer";
/// The Service's name.
const SERVICE_NAME: &str = "sched-explainer";
/// Bounds the explainer's start and the APIService's availability.
const START: Duration = Duration::from_secs(60);
/// Bounds how long the explainer may take to see a change.
const FRESHNESS: Duration = Duration::from_secs(10);

/// The control plane with an aggregation layer, one per test process.
async fn control_plane() -> Result<&'static ControlPlane, e2e::Error> {
    static CP: OnceCell<ControlPlane> = OnceCell::const_new();
    CP.get_or_try_init(|| ControlPlane::start(Options::new().with_aggregation_layer()))
        .await
}

/// The explainer: its ports, the CA of its serving certificate, and its command line; it runs in
/// this process on a runtime of its own, which [`Explainer::kill`] shuts down at once (every task
/// dropped where it waits, no graceful shutdown, as SIGKILL would) and [`Explainer::restart`]
/// starts again on the same ports.
struct Explainer {
    port: u16,
    admin_port: u16,
    ca_pem: String,
    argv: Vec<String>,
    running: std::sync::Mutex<Option<Running>>,
}

/// A running explainer's thread, and the sender whose drop stops it.
struct Running {
    stop: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Explainer {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Running>> {
        self.running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Kills the explainer and waits until its runtime is gone (its ports closed).
    fn kill(&self) {
        if let Some(running) = self.lock().take() {
            drop(running.stop);
            let _ = running.thread.join();
        }
    }

    /// Starts the explainer again with the same command line.
    fn restart(&self) -> Result<()> {
        let mut running = self.lock();
        ensure!(running.is_none(), "the explainer is running");
        *running = Some(run_explainer(&self.argv)?);
        Ok(())
    }

    /// The admin port's `/readyz` status code (None: nothing listens).
    async fn readyz(&self) -> Option<u16> {
        let call = async {
            let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", self.admin_port))
                .await
                .ok()?;
            tcp.write_all(b"GET /readyz HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
                .await
                .ok()?;
            let mut answer = Vec::new();
            tcp.read_to_end(&mut answer).await.ok()?;
            String::from_utf8_lossy(&answer)
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()
        };
        tokio::time::timeout(Duration::from_secs(5), call)
            .await
            .ok()
            .flatten()
    }
}

/// A port free on 127.0.0.1 now.
fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Starts the explainer (once per test process) and registers it; returns once its APIService is
/// Available.
async fn explainer(cp: &'static ControlPlane) -> Result<&'static Explainer> {
    static EXPLAINER: OnceCell<Explainer> = OnceCell::const_new();
    EXPLAINER.get_or_try_init(|| start_explainer(cp)).await
}

/// Runs the explainer with `argv` on a runtime of its own on a thread of its own (a test's runtime
/// ends with the test), until the returned sender is dropped.
fn run_explainer(argv: &[String]) -> Result<Running> {
    let Command::Explainer(args) = Cli::try_parse_from(argv)?.command else {
        anyhow::bail!("not the explainer's command line");
    };
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("sched-explainer".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("explainer runtime");
            runtime.spawn(async move {
                if let Err(e) = sched_webhook::run::explainer(args).await {
                    eprintln!("the explainer stopped: {e}");
                }
            });
            let _ = stopped.recv();
            runtime.shutdown_timeout(Duration::from_secs(5));
        })?;
    Ok(Running { stop, thread })
}

/// An explainer's command line on free loopback ports, with a serving certificate for `names`
/// written under `dir`.
struct ExplainerCommand {
    argv: Vec<String>,
    port: u16,
    admin_port: u16,
    generated: certs::Generated,
}

fn explainer_command(cp: &ControlPlane, dir: &std::path::Path, names: &[String]) -> Result<ExplainerCommand> {
    let generated = certs::generate(names, &["127.0.0.1".parse()?], 1)?;
    let files = certs::write(dir, &generated)?;
    let (port, admin_port) = (free_port()?, free_port()?);
    let argv = vec![
        "sched-webhook".to_string(),
        "explainer".to_string(),
        format!("--listen=127.0.0.1:{port}"),
        format!("--admin-listen=127.0.0.1:{admin_port}"),
        format!("--tls-cert={}", files.cert.display()),
        format!("--tls-key={}", files.key.display()),
        format!("--work-dir={}", dir.display()),
        format!("--kubeconfig={}", cp.kubeconfig_path().display()),
    ];
    Ok(ExplainerCommand {
        argv,
        port,
        admin_port,
        generated,
    })
}

async fn start_explainer(cp: &'static ControlPlane) -> Result<Explainer> {
    let dir = cp.dir().join("explainer");
    let names = vec![
        "localhost".to_string(),
        format!("{SERVICE_NAME}.{SERVICE_NAMESPACE}.svc"),
    ];
    let ExplainerCommand {
        argv,
        port,
        admin_port,
        generated,
    } = explainer_command(cp, &dir, &names)?;
    let running = run_explainer(&argv)?;
    register(&cp.client()?, port, &generated.ca_cert_pem).await?;
    Ok(Explainer {
        port,
        admin_port,
        ca_pem: generated.ca_cert_pem,
        argv,
        running: std::sync::Mutex::new(Some(running)),
    })
}

/// The Service (ExternalName `localhost`, the explainer's port) and the APIService; waits until the
/// APIService is Available.
async fn register(client: &Client, port: u16, ca_pem: &str) -> Result<()> {
    let apply = |value: Value| async move {
        let pp = kube::api::PatchParams::apply("explainer-e2e").force();
        let gvk = kube::core::GroupVersionKind::try_from(&kube::core::TypeMeta {
            api_version: value["apiVersion"].as_str().unwrap_or_default().to_string(),
            kind: value["kind"].as_str().unwrap_or_default().to_string(),
        })?;
        let (resource, _) = kube::discovery::pinned_kind(client, &gvk).await?;
        let name = value["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let api: Api<kube::core::DynamicObject> = match value["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        api.patch(&name, &pp, &kube::api::Patch::Apply(&value)).await?;
        anyhow::Ok(())
    };
    apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SERVICE_NAMESPACE}})).await?;
    apply(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": SERVICE_NAME, "namespace": SERVICE_NAMESPACE},
        "spec": {"type": "ExternalName", "externalName": "localhost",
                 "ports": [{"name": "https", "port": port, "protocol": "TCP"}]},
    }))
    .await?;
    apply(json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v1alpha1.sched.kubectl-sched.io"},
        "spec": {
            "group": "sched.kubectl-sched.io", "version": "v1alpha1",
            "groupPriorityMinimum": 1000, "versionPriority": 15,
            "service": {"name": SERVICE_NAME, "namespace": SERVICE_NAMESPACE, "port": port},
            "caBundle": certs::ca_bundle_base64(ca_pem),
        },
    }))
    .await?;
    let raw = client.clone();
    eventually("the explainer's APIService to be Available", START, || {
        let client = raw.clone();
        async move {
            let request = http::Request::get(
                "/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.sched.kubectl-sched.io",
            )
            .body(Vec::new())?;
            let service: Value = client.request(request).await?;
            let available = service["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Available" && c["status"] == "True");
            Ok(available.then_some(()))
        }
    })
    .await
}

/// The explainer's snapshot resourceVersion, asked through the API server as the admin.
async fn snapshot_resource_version(client: &Client, namespace: &str, pod: &str) -> Result<Option<u64>> {
    let path = format!("/apis/sched.kubectl-sched.io/v1alpha1/namespaces/{namespace}/podexplanations/{pod}");
    let request = http::Request::get(&path).body(Vec::new())?;
    match client.request::<Value>(request).await {
        Ok(answer) => Ok(answer["snapshot"]["resourceVersion"]
            .as_str()
            .and_then(|v| v.parse().ok())),
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 503 => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Waits until the explainer's snapshot has every change up to `resource_version`.
async fn caught_up(client: &Client, namespace: &str, pod: &str, resource_version: u64) -> Result<Duration> {
    let started = Instant::now();
    eventually("the explainer to catch up", FRESHNESS, || async {
        Ok(snapshot_resource_version(client, namespace, pod)
            .await?
            .filter(|rv| *rv >= resource_version)
            .map(|_| ()))
    })
    .await?;
    Ok(started.elapsed())
}

/// The resourceVersion of the last object created.
fn rv_of(pod: &Pod) -> u64 {
    pod.metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The CLI with the control plane's admin kubeconfig, and `args`.
async fn cli(cp: &ControlPlane, args: &[&str]) -> Result<std::process::Output> {
    let binary = kubectl_sched_binary().await?;
    let kubeconfig = cp.kubeconfig_path().display().to_string();
    let mut all = vec!["--kubeconfig", kubeconfig.as_str()];
    all.extend_from_slice(args);
    run_kubectl_sched(&binary, &all).await
}

/// Explained through the cluster's explainer, the output is a listing's, byte for byte, in every
/// format, with the same exit code; `-v 1` says which path answered.
#[tokio::test]
async fn explained_by_the_cluster_as_by_a_listing() -> Result<()> {
    let lab = Lab::begin_on("explainer-same", control_plane).await?;
    explainer(lab.cp).await?;
    let (n1, n2) = (lab.n("n1"), lab.n("n2"));
    lab.create_nodes([
        lab.node("n1", "4", "8Gi"),
        lab.node("n2", "2", "4Gi").taint("dedicated", "db", "NoSchedule"),
    ])
    .await?;
    lab.create_pods((0..4).map(|i| pod(&format!("run-{i}")).cpu("900m").memory("256Mi").on(&n1)))
        .await?;
    let big = lab.create_pod(&pod("big").cpu("3").memory("1Gi")).await?;
    let small = lab.create_pod(&pod("small").cpu("100m").memory("64Mi")).await?;
    let waited = caught_up(&lab.client, &lab.ns, "big", rv_of(&big).max(rv_of(&small))).await?;
    eprintln!(
        "the explainer had the pods created (resourceVersion {}) {:.2} s later",
        rv_of(&big).max(rv_of(&small)),
        waited.as_secs_f64()
    );
    for (target, format) in [
        ("big", "table"),
        ("big", "wide"),
        ("big", "json"),
        ("big", "yaml"),
        ("big", "jsonpath={.outcome}"),
        ("small", "table"),
    ] {
        let local = cli(
            lab.cp,
            &["explain", target, "-n", &lab.ns, "-o", format, "--via", "local"],
        )
        .await?;
        let served = cli(
            lab.cp,
            &[
                "-v", "1", "explain", target, "-n", &lab.ns, "-o", format, "--via", "cluster",
            ],
        )
        .await?;
        let stderr = String::from_utf8_lossy(&served.stderr);
        ensure!(
            !local.stdout.is_empty(),
            "{target} -o {format}: the listing printed nothing: {}",
            String::from_utf8_lossy(&local.stderr)
        );
        // The phases' timings (`nanos`, in JSON and YAML) differ between any two runs, two listings
        // too; everything else must be the same bytes.
        let (local_text, served_text) = match format {
            "json" | "yaml" => (
                without_timings(&local.stdout, format)?,
                without_timings(&served.stdout, format)?,
            ),
            _ => (local.stdout.clone(), served.stdout.clone()),
        };
        ensure!(
            served_text == local_text,
            "{target} -o {format}: the cluster's answer differs from the listing's\n--- listing:\n{}\n--- cluster:\n{}\n--- stderr:\n{stderr}",
            String::from_utf8_lossy(&local.stdout),
            String::from_utf8_lossy(&served.stdout)
        );
        ensure!(
            served.status.code() == local.status.code(),
            "{target} -o {format}: exit {:?} via the cluster, {:?} by listing",
            served.status.code(),
            local.status.code()
        );
        ensure!(
            stderr.contains("answered by the cluster's explainer") && stderr.contains("resourceVersion"),
            "{target} -o {format}: -v 1 does not say the explainer answered: {stderr}"
        );
    }
    // --node is served too.
    let args = |via: &'static str| {
        ["explain", "big", "-n", &lab.ns, "--node", &n2, "--via", via].map(str::to_string)
    };
    let local = cli(lab.cp, &args("local").each_ref().map(String::as_str)).await?;
    let served = cli(lab.cp, &args("cluster").each_ref().map(String::as_str)).await?;
    ensure!(
        served.stdout == local.stdout && !local.stdout.is_empty(),
        "--node: the cluster's answer differs from the listing's\n{}\n---\n{}",
        String::from_utf8_lossy(&local.stdout),
        String::from_utf8_lossy(&served.stdout)
    );
    // auto takes the cluster's path when the APIService is Available, and says so.
    let auto = cli(lab.cp, &["-v", "1", "explain", "big", "-n", &lab.ns]).await?;
    let stderr = String::from_utf8_lossy(&auto.stderr);
    ensure!(
        stderr.contains("answered by the cluster's explainer"),
        "--via auto did not ask the explainer: {stderr}"
    );
    Ok(())
}

/// `text` (JSON or YAML) with every `nanos` line removed: the phases' timings.
fn without_timings(text: &[u8], format: &str) -> Result<Vec<u8>> {
    let text = std::str::from_utf8(text)?;
    let key = if format == "json" { "\"nanos\":" } else { "nanos:" };
    ensure!(
        text.contains(key) || !text.contains("timings"),
        "no {key} in the {format} output"
    );
    Ok(text
        .lines()
        .filter(|line| !line.trim_start().starts_with(key))
        .flat_map(|line| [line, "\n"])
        .collect::<String>()
        .into_bytes())
}

/// A Role in `namespace` for `user` with `rules`, bound.
async fn grant(client: &Client, namespace: &str, user: &str, rules: Value) -> Result<()> {
    let roles: Api<k8s_openapi::api::rbac::v1::Role> = Api::namespaced(client.clone(), namespace);
    roles
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": user}, "rules": rules}))?,
        )
        .await?;
    let bindings: Api<k8s_openapi::api::rbac::v1::RoleBinding> = Api::namespaced(client.clone(), namespace);
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": user},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": user},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
            }))?,
        )
        .await?;
    Ok(())
}

/// A user allowed in namespace A only is answered for A and refused by the API server for B; a
/// user allowed `podexplanations` but not `pods` in B is refused by the explainer's
/// SubjectAccessReview. Neither refusal carries anything of B's pods.
#[tokio::test]
async fn a_user_learns_nothing_of_a_namespace_they_cannot_read() -> Result<()> {
    let lab = Lab::begin_on("explainer-rbac", control_plane).await?;
    explainer(lab.cp).await?;
    let ns_b = lab.create_namespace("b", json!({})).await?;
    lab.create_nodes([lab.node("n1", "2", "4Gi")]).await?;
    let a = lab.create_pod(&pod("secret-a").cpu("3")).await?;
    let b = lab.create_pod(&pod("secret-b").cpu("3").namespace(&ns_b)).await?;
    let reader = json!([
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
        {"apiGroups": ["sched.kubectl-sched.io"], "resources": ["podexplanations"], "verbs": ["get"]},
    ]);
    grant(&lab.client, &lab.ns, "alice", reader).await?;
    grant(
        &lab.client,
        &ns_b,
        "bob",
        json!([{"apiGroups": ["sched.kubectl-sched.io"], "resources": ["podexplanations"], "verbs": ["get"]}]),
    )
    .await?;
    caught_up(&lab.client, &lab.ns, "secret-a", rv_of(&a).max(rv_of(&b))).await?;

    let in_a = cli(
        lab.cp,
        &[
            "--as", "alice", "explain", "secret-a", "-n", &lab.ns, "--via", "cluster",
        ],
    )
    .await?;
    let stdout = String::from_utf8_lossy(&in_a.stdout);
    ensure!(
        matches!(in_a.status.code(), Some(0)) && stdout.contains("secret-a"),
        "alice in her namespace: exit {:?}\n{stdout}\n{}",
        in_a.status.code(),
        String::from_utf8_lossy(&in_a.stderr)
    );
    for (user, namespace, refused_by) in [
        (
            "alice",
            ns_b.as_str(),
            "podexplanations.sched.kubectl-sched.io \"secret-b\" is forbidden: User \"alice\" cannot get resource \"podexplanations\"",
        ),
        (
            "bob",
            ns_b.as_str(),
            "is forbidden: User \"bob\" cannot list resource \"pods\"",
        ),
    ] {
        let out = cli(
            lab.cp,
            &[
                "--as", user, "explain", "secret-b", "-n", namespace, "--via", "cluster",
            ],
        )
        .await?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        ensure!(
            out.status.code() == Some(1) && out.stdout.is_empty(),
            "{user} in {namespace}: exit {:?}, stdout {:?}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout)
        );
        ensure!(
            stderr.contains(refused_by),
            "{user} in {namespace}: not refused as expected: {stderr}"
        );
        ensure!(
            !stderr.contains("Insufficient cpu") && !stderr.contains("0/"),
            "{user} in {namespace}: the refusal tells of B's pod: {stderr}"
        );
    }
    Ok(())
}

/// An answer for a pod in namespace A can name pods of namespace B (here: the running pod B's
/// that A's pod's anti-affinity collides with). A user who may list pods in A but not in B gets the
/// same answer with B's pod counted but its name hidden (a placeholder, and a warning saying so);
/// the administrator gets the name. In every format: `-o json` carries no hidden name either.
#[tokio::test]
async fn names_of_pods_a_user_cannot_read_are_hidden() -> Result<()> {
    let lab = Lab::begin_on("explainer-hidden", control_plane).await?;
    explainer(lab.cp).await?;
    let ns_b = lab.create_namespace("b", json!({})).await?;
    let n1 = lab.n("n1");
    lab.create_nodes([lab.node("n1", "4", "8Gi")]).await?;
    let secret = lab
        .create_pod(
            &pod("secret-runner")
                .cpu("100m")
                .label("app", "db")
                .namespace(&ns_b)
                .on(&n1),
        )
        .await?;
    let seeker = lab
        .create_pod(&pod("seeker").cpu("100m").spec(
            "affinity",
            json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"app": "db"}},
                "namespaceSelector": {},
                "topologyKey": "kubernetes.io/hostname",
            }]}}),
        ))
        .await?;
    grant(
        &lab.client,
        &lab.ns,
        "carol",
        json!([
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
            {"apiGroups": ["sched.kubectl-sched.io"], "resources": ["podexplanations"], "verbs": ["get"]},
        ]),
    )
    .await?;
    caught_up(&lab.client, &lab.ns, "seeker", rv_of(&secret).max(rv_of(&seeker))).await?;
    for format in ["table", "json"] {
        let explain = |user: Option<&'static str>| {
            let mut args: Vec<String> = user
                .map(|u| vec!["--as".to_string(), u.to_string()])
                .unwrap_or_default();
            args.extend(
                [
                    "explain", "seeker", "-n", &lab.ns, "-o", format, "--via", "cluster",
                ]
                .map(str::to_string),
            );
            async move { cli(lab.cp, &args.iter().map(String::as_str).collect::<Vec<_>>()).await }
        };
        let admin = explain(None).await?;
        let carol = explain(Some("carol")).await?;
        let (admin_out, carol_out) = (
            String::from_utf8_lossy(&admin.stdout).into_owned(),
            String::from_utf8_lossy(&carol.stdout).into_owned(),
        );
        let carol_err = String::from_utf8_lossy(&carol.stderr);
        ensure!(
            admin_out.contains("secret-runner"),
            "-o {format}: the administrator's answer does not name B's pod:\n{admin_out}"
        );
        ensure!(
            !carol_out.contains("secret-runner") && !carol_err.contains("secret-runner"),
            "-o {format}: carol learns the name of a pod in a namespace she cannot read:\n{carol_out}\n{carol_err}"
        );
        ensure!(
            carol_err.contains("are hidden"),
            "-o {format}: carol is not told that names are hidden: {carol_err}"
        );
        // The same answer otherwise: the pod is counted and collides as for the administrator
        // (compared word by word: a table's columns may be as wide as the longer name).
        // (JSON: without the phases' timings, which differ between any two runs.)
        let words = |text: &str| -> Result<Vec<String>> {
            let text = match format {
                "json" => String::from_utf8(without_timings(text.as_bytes(), format)?)?,
                _ => text.to_string(),
            };
            Ok(text.split_whitespace().map(str::to_string).collect())
        };
        let unhidden = replace_hidden(&carol_out, "secret-runner");
        ensure!(
            words(&unhidden)? == words(&admin_out)? && carol.status.code() == admin.status.code(),
            "-o {format}: carol's answer differs beyond the hidden name\n--- admin:\n{admin_out}\n--- carol:\n{carol_out}"
        );
    }
    Ok(())
}

/// `text` with every `hidden-pod-N` replaced by `name`.
fn replace_hidden(text: &str, name: &str) -> String {
    const PREFIX: &str = "hidden-pod-";
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(PREFIX) {
        out.push_str(&rest[..at]);
        out.push_str(name);
        rest = rest[at + PREFIX.len()..].trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out.push_str(rest);
    out
}

/// A GET with forged identity headers straight to the explainer's port: the status line, or the
/// error that ended the call.
async fn forged_call(
    port: u16,
    connector: tokio_rustls::TlsConnector,
    path: &str,
) -> std::result::Result<String, String> {
    let call = async {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| e.to_string())?;
        let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
        let mut tls = connector
            .connect(name, tcp)
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        let request = format!(
            "GET {path} HTTP/1.1\r\nhost: localhost\r\nx-remote-user: system:admin\r\nx-remote-group: system:masters\r\nconnection: close\r\n\r\n"
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
            Some(status) if !status.is_empty() => Ok(answer),
            _ => Err("closed without an answer".to_string()),
        }
    };
    tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .unwrap_or_else(|_| Err("no answer in 10 s".to_string()))
}

/// A GET straight to the explainer's port with the front proxy's certificate (`cert`, `key`) and
/// the administrator's identity headers, as the API server sends it: the whole answer.
async fn as_front_proxy(explainer: &Explainer, (cert, key): (&str, &str), path: &str) -> Result<String> {
    forged_call(
        explainer.port,
        connector(&explainer.ca_pem, Some((cert, key)))?,
        path,
    )
    .await
    .map_err(anyhow::Error::msg)
}

/// Identity headers sent straight to the explainer's port are not believed: without a client
/// certificate, or with one the cluster CA (not the front proxy's) signed, the handshake fails;
/// with the front proxy's certificate the same request is answered (the port itself works).
#[tokio::test]
async fn forged_identity_headers_straight_to_the_port_are_refused() -> Result<()> {
    let lab = Lab::begin_on("explainer-forged", control_plane).await?;
    let explainer = explainer(lab.cp).await?;
    lab.create_nodes([lab.node("n1", "2", "4Gi")]).await?;
    lab.create_pod(&pod("p").cpu("3")).await?;
    let path = format!(
        "/apis/sched.kubectl-sched.io/v1alpha1/namespaces/{}/podexplanations/p",
        lab.ns
    );
    let pki = lab.cp.dir().join("pki");
    let read =
        |name: &str| std::fs::read_to_string(pki.join(name)).with_context(|| format!("reading {name}"));
    let (admin_cert, admin_key) = (read("admin.crt")?, read("admin.key")?);
    let (proxy_cert, proxy_key) = (read("front-proxy-client.crt")?, read("front-proxy-client.key")?);
    for (who, client) in [
        ("no client certificate", None),
        (
            "the cluster CA's admin certificate",
            Some((admin_cert.as_str(), admin_key.as_str())),
        ),
    ] {
        let answer = forged_call(explainer.port, connector(&explainer.ca_pem, client)?, &path).await;
        ensure!(
            answer.is_err(),
            "{who}: the explainer answered forged headers: {answer:?}"
        );
    }
    let answer = as_front_proxy(explainer, (&proxy_cert, &proxy_key), &path).await?;
    ensure!(
        answer.starts_with("HTTP/1.1 200") && answer.contains("PodExplanation"),
        "the front proxy's certificate: {answer}"
    );
    Ok(())
}

/// A pod created is explained through the cluster within a bounded wait, and once deleted is not
/// found there any more.
#[tokio::test]
async fn the_explainer_follows_pods_created_and_deleted() -> Result<()> {
    let lab = Lab::begin_on("explainer-follows", control_plane).await?;
    explainer(lab.cp).await?;
    lab.create_nodes([lab.node("n1", "2", "4Gi")]).await?;
    let created = Instant::now();
    lab.create_pod(&pod("late").cpu("3")).await?;
    let ask = || async { cli(lab.cp, &["explain", "late", "-n", &lab.ns, "--via", "cluster"]).await };
    eventually(
        "the new pod to be explained through the cluster",
        FRESHNESS,
        || async {
            let out = ask().await?;
            Ok(
                (out.status.code() == Some(0) && String::from_utf8_lossy(&out.stdout).contains("late"))
                    .then_some(()),
            )
        },
    )
    .await?;
    eprintln!(
        "created → explained through the cluster in {:.2} s",
        created.elapsed().as_secs_f64()
    );
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), &lab.ns);
    pods.delete("late", &DeleteParams::default().grace_period(0))
        .await?;
    let deleted = Instant::now();
    eventually(
        "the deleted pod to be gone from the explainer",
        FRESHNESS,
        || async {
            let out = ask().await?;
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            Ok((out.status.code() == Some(1) && stderr.contains("not found")).then_some(()))
        },
    )
    .await?;
    eprintln!(
        "deleted → not found through the cluster in {:.2} s",
        deleted.elapsed().as_secs_f64()
    );
    Ok(())
}
