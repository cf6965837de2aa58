//! A bounded load generator for `POST /mutate` over TLS on loopback, with the webhook in-process on a
//! synthetic cache, or (`--apiserver`) on a cache its reflectors fill from a real kube-apiserver, or
//! (`--target`) against a running webhook.
//!
//! ```text
//! cargo run --release -p sched-webhook --example loadgen -- \
//!     [--rate 1000] [--seconds 5] [--connections 8] [--pvs 10000] [--nodes 100] \
//!     [--mode nothing|bound-claim] [--apiserver [--webhook-bin target/release/sched-webhook]
//!                                   | --target https://127.0.0.1:8443/mutate --ca ca.crt]
//! ```
//!
//! `--apiserver` starts etcd and kube-apiserver through the e2e harness (the binaries of
//! `tests/controlplane/build.sh`), creates the nodes, `--pvs` PVs and as many claims bound to them
//! (statuses Bound, as the PV controller leaves them) in namespace `bench`, starts the webhook's
//! reflectors against that API server and waits until they hold every object before the load starts.
//! The control plane is torn down when the run ends. With `--webhook-bin` the webhook is not run
//! in-process: that binary is started against the control plane (`serve` on loopback ports, with its own
//! certificates), loaded once `/readyz` answers, and its RSS (and peak, `VmHWM`) is read from /proc when
//! it is ready and after the load: the webhook's memory alone, without the generator's.
//!
//! Open loop: request `i` is due at `start + i / rate`; its latency is measured from that instant (so a
//! slow server cannot hide queueing), and the service time from when it was sent. The run is bounded by
//! `--seconds` plus a 10 s drain. Reports p50/p90/p99/max, the achieved throughput, errors, and the
//! process's RSS before and after the cache fill, with jemalloc's allocated and resident heap (in-process
//! modes), or the webhook binary's RSS (`--webhook-bin`).
//!
//! Modes: `nothing` — pods without claims (the fast path: no decision, no snapshot); `bound-claim` —
//! pods created on a node with an already bound claim (the volume path: a decision over the cached
//! snapshot of every PV and PVC, no write).

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum_server::tls_rustls::RustlsConfig;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use sched_core::engine::{SchedulerConfig, in_tree_registry};
use sched_webhook::admission::ClusterView;
use sched_webhook::cache::{Cache, Writers};
use sched_webhook::server::AppState;
use sched_webhook::serving::{Listeners, serve};

/// The allocator the webhook binary uses (`sched_webhook::memory`), so the in-process modes measure it.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Debug, Clone)]
struct Args {
    rate: u64,
    seconds: u64,
    connections: usize,
    pvs: usize,
    nodes: usize,
    mode: String,
    target: Option<String>,
    ca: Option<String>,
    apiserver: bool,
    webhook_bin: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        rate: 1000,
        seconds: 5,
        connections: 8,
        pvs: 10_000,
        nodes: 100,
        mode: "nothing".into(),
        target: None,
        ca: None,
        apiserver: false,
        webhook_bin: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |v: String| v.parse::<u64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--rate" => args.rate = number(value()?)?.max(1),
            "--seconds" => args.seconds = number(value()?)?.clamp(1, 600),
            "--connections" => args.connections = number(value()?)?.clamp(1, 256) as usize,
            "--pvs" => args.pvs = number(value()?)? as usize,
            "--nodes" => args.nodes = number(value()?)?.max(1) as usize,
            "--mode" => args.mode = value()?,
            "--target" => args.target = Some(value()?),
            "--ca" => args.ca = Some(value()?),
            "--apiserver" => args.apiserver = true,
            "--webhook-bin" => args.webhook_bin = Some(value()?),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if args.apiserver && args.target.is_some() {
        return Err("--apiserver and --target exclude each other".into());
    }
    if args.webhook_bin.is_some() && !args.apiserver {
        return Err("--webhook-bin needs --apiserver".into());
    }
    if !matches!(args.mode.as_str(), "nothing" | "bound-claim") {
        return Err(format!("--mode {}: use nothing or bound-claim", args.mode));
    }
    Ok(args)
}

/// A `/proc/<pid>/status` memory field (`VmRSS`, `VmHWM`) in bytes.
fn status_bytes(pid: &str, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.strip_prefix(field).is_some_and(|rest| rest.starts_with(':')))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// Resident set size of this process.
fn rss_bytes() -> u64 {
    status_bytes("self", "VmRSS")
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The resident and peak resident sizes of a child process, for the report.
fn child_memory(pid: u32) -> String {
    let pid = pid.to_string();
    format!(
        "RSS {:.1} MiB (peak {:.1} MiB)",
        mib(status_bytes(&pid, "VmRSS")),
        mib(status_bytes(&pid, "VmHWM"))
    )
}

/// What the allocator says of this process's heap (allocated by the program, resident in the allocator).
fn heap() -> String {
    sched_webhook::memory::allocator_stats()
        .map(|(allocated, resident)| {
            format!(
                " | heap allocated {:.1} MiB, resident {:.1} MiB",
                mib(allocated as u64),
                mib(resident as u64)
            )
        })
        .unwrap_or_default()
}

/// A port free on loopback right now (the child binds it a moment later).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// True once `GET /readyz` on the admin port answers 200.
async fn ready(admin_port: u16) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", admin_port)).await else {
        return false;
    };
    if stream
        .write_all(b"GET /readyz HTTP/1.0\r\nhost: 127.0.0.1\r\n\r\n")
        .await
        .is_err()
    {
        return false;
    }
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response).await;
    response.starts_with(b"HTTP/1.0 200") || response.starts_with(b"HTTP/1.1 200")
}

/// Starts the sched-webhook binary against the control plane, waits until its caches are synced, and
/// reports its memory: the webhook measured alone, as it runs in a cluster.
async fn spawn_webhook(
    bin: &str,
    cp: &e2e::ControlPlane,
    dir: &std::path::Path,
) -> (tokio::process::Child, u16, Vec<u8>) {
    let generated =
        sched_webhook::certs::generate(&[], &["127.0.0.1".parse().expect("ip")], 1).expect("certs");
    let files = sched_webhook::certs::write(dir, &generated).expect("certs written");
    let (port, admin_port) = (free_port(), free_port());
    let log = std::fs::File::create(dir.join("webhook.log")).expect("webhook log");
    let mut child = tokio::process::Command::new(bin)
        .arg("serve")
        .arg("--kubeconfig")
        .arg(cp.kubeconfig_path())
        .arg("--tls-cert")
        .arg(&files.cert)
        .arg("--tls-key")
        .arg(&files.key)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--admin-listen")
        .arg(format!("127.0.0.1:{admin_port}"))
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| {
            eprintln!("loadgen: starting {bin}: {e}");
            std::process::exit(1);
        });
    let pid = child.id().expect("pid");
    let started = Instant::now();
    while !ready(admin_port).await {
        if let Ok(Some(status)) = child.try_wait() {
            eprintln!(
                "loadgen: {bin} exited ({status}); its log is {}",
                dir.join("webhook.log").display()
            );
            std::process::exit(1);
        }
        if started.elapsed() > Duration::from_secs(300) {
            eprintln!("loadgen: {bin} did not become ready within 300 s");
            std::process::exit(1);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "webhook: {bin} (pid {pid}) synced in {:.2} s | {}",
        started.elapsed().as_secs_f64(),
        child_memory(pid)
    );
    (child, port, generated.ca_cert_pem.into_bytes())
}

fn from_json<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("synthetic object")
}

fn node_name(i: usize, nodes: usize) -> String {
    format!("node-{:04}", i % nodes)
}

/// Local PV `i` on node `i % nodes`, bound to claim `i` of namespace `bench`.
fn bench_pv(i: usize, nodes: usize) -> Value {
    json!({
        "metadata": {
            "name": format!("pv-{i:05}"),
            "labels": {"app": "bench", "disk": "ssd"},
            "annotations": {"pv.kubernetes.io/bound-by-controller": "yes",
                            "pv.kubernetes.io/provisioned-by": "local-volume-provisioner"},
        },
        "spec": {
            "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
            "storageClassName": "local", "persistentVolumeReclaimPolicy": "Retain",
            "local": {"path": format!("/mnt/disks/vol{i}")},
            "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "bench",
                         "name": format!("claim-{i:05}")},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node_name(i, nodes)]}]}]}},
        },
    })
}

/// Claim `i` of namespace `bench`, bound to PV `i` (bind completed).
fn bench_pvc(i: usize, nodes: usize) -> Value {
    json!({
        "metadata": {
            "name": format!("claim-{i:05}"), "namespace": "bench",
            "labels": {"app": "bench"},
            "annotations": {"pv.kubernetes.io/bind-completed": "yes",
                            "pv.kubernetes.io/bound-by-controller": "yes",
                            "volume.kubernetes.io/selected-node": node_name(i, nodes)},
        },
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                 "resources": {"requests": {"storage": "10Gi"}}, "volumeName": format!("pv-{i:05}"),
                 "volumeMode": "Filesystem"},
    })
}

fn bench_node(i: usize, nodes: usize) -> Value {
    let name = node_name(i, nodes);
    json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                   "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    })
}

fn bench_class() -> Value {
    json!({
        "metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
    })
}

/// The bench objects as a watch would deliver them from a cluster where the PV controller bound them
/// (uids, resourceVersions, managedFields, statuses), streamed into the cache's writers one at a time.
fn fill_synthetic(writers: &mut Writers, nodes: usize, pvs: usize) {
    let managed = json!([{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
        "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:annotations": {"f:pv.kubernetes.io/bound-by-controller": {}}},
                      "f:spec": {"f:claimRef": {".": {}, "f:name": {}, "f:namespace": {}, "f:uid": {}}},
                      "f:status": {"f:phase": {}}}}]);
    writers.load_nodes((0..nodes).map(|i| from_json::<Node>(bench_node(i, nodes))));
    writers.load_classes([from_json::<StorageClass>(bench_class())]);
    writers.load_pvs((0..pvs).map(|i| {
        let mut pv = bench_pv(i, nodes);
        pv["metadata"]["uid"] = json!(format!("00000000-0000-0000-0000-{i:012}"));
        pv["metadata"]["resourceVersion"] = json!(format!("{}", 1000 + i));
        pv["metadata"]["managedFields"] = managed.clone();
        pv["spec"]["claimRef"]["uid"] = json!(format!("11111111-0000-0000-0000-{i:012}"));
        pv["status"] = json!({"phase": "Bound"});
        from_json::<PersistentVolume>(pv)
    }));
    writers.load_pvcs((0..pvs).map(|i| {
        let mut pvc = bench_pvc(i, nodes);
        pvc["metadata"]["uid"] = json!(format!("11111111-0000-0000-0000-{i:012}"));
        pvc["metadata"]["resourceVersion"] = json!(format!("{}", 50_000 + i));
        pvc["metadata"]["managedFields"] = managed.clone();
        pvc["status"] =
            json!({"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "10Gi"}});
        from_json::<PersistentVolumeClaim>(pvc)
    }));
}

/// Creates the bench objects in a real API server: nodes, the class, then PVs and claims (and their
/// Bound statuses) with `parallel` requests in flight.
async fn populate(
    client: &kube::Client,
    nodes: usize,
    pvs: usize,
    parallel: usize,
) -> Result<(), kube::Error> {
    use futures::{StreamExt, TryStreamExt};
    use kube::api::{Api, Patch, PatchParams, PostParams};
    let post = PostParams::default();
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    namespaces
        .create(&post, &from_json(json!({"metadata": {"name": "bench"}})))
        .await?;
    let node_api: Api<Node> = Api::all(client.clone());
    for i in 0..nodes {
        node_api.create(&post, &from_json(bench_node(i, nodes))).await?;
    }
    let classes: Api<StorageClass> = Api::all(client.clone());
    classes.create(&post, &from_json(bench_class())).await?;
    let pv_api: Api<PersistentVolume> = Api::all(client.clone());
    let pvc_api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "bench");
    let bound = Patch::Merge(json!({"status": {"phase": "Bound"}}));
    let status = PatchParams::default();
    futures::stream::iter(0..pvs)
        .map(|i| {
            let (pv_api, pvc_api, post, bound, status) = (&pv_api, &pvc_api, &post, &bound, &status);
            async move {
                let pv = pv_api.create(post, &from_json(bench_pv(i, nodes))).await?;
                let pvc = pvc_api.create(post, &from_json(bench_pvc(i, nodes))).await?;
                pv_api
                    .patch_status(pv.metadata.name.as_deref().unwrap_or_default(), status, bound)
                    .await?;
                pvc_api
                    .patch_status(pvc.metadata.name.as_deref().unwrap_or_default(), status, bound)
                    .await?;
                if (i + 1) % 1000 == 0 {
                    println!("populate: {} PV/PVC pairs created", i + 1);
                }
                Ok::<_, kube::Error>(())
            }
        })
        .buffer_unordered(parallel)
        .try_collect::<()>()
        .await
}

/// A Deployment-made pod as admission sees it (~2 KB), with or without a bound claim on a node.
fn review(i: u64, mode: &str, nodes: usize, pvs: usize) -> Vec<u8> {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "web-7d4b9c-", "namespace": "bench",
                     "labels": {"app": "web", "pod-template-hash": "7d4b9c", "tier": "frontend"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4b9c",
                                          "uid": "22222222-0000-0000-0000-000000000000", "controller": true}]},
        "spec": {
            "containers": [{"name": "web", "image": "registry.example.com/web:1.2.3",
                            "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                            "env": [{"name": "MODE", "value": "production"}, {"name": "LOG", "value": "json"}],
                            "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
                            "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}]}],
            "volumes": [{"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "schedulerName": "default-scheduler", "priority": 0,
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
        },
    });
    if mode == "bound-claim" && pvs > 0 {
        let k = (i as usize) % pvs;
        pod["spec"]["nodeName"] = json!(format!("node-{:04}", k % nodes));
        pod["spec"]["volumes"]
            .as_array_mut()
            .expect("volumes")
            .push(json!({"name": "data", "persistentVolumeClaim": {"claimName": format!("claim-{k:05}")}}));
    }
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": format!("req-{i}"), "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "resource": {"group": "", "version": "v1", "resource": "pods"},
                    "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
                    "requestResource": {"group": "", "version": "v1", "resource": "pods"},
                    "namespace": "bench", "operation": "CREATE",
                    "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller",
                                 "groups": ["system:serviceaccounts", "system:authenticated"]},
                    "object": pod, "oldObject": null, "dryRun": false,
                    "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}},
    }))
    .expect("json")
}

fn connector(ca_pem: &[u8]) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(cert.expect("ca pem")).expect("root");
    }
    let config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
    TlsConnector::from(Arc::new(config))
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

async fn connect(connector: &TlsConnector, host: &str, port: u16) -> Result<Sender, String> {
    let tcp = TcpStream::connect((host, port))
        .await
        .map_err(|e| e.to_string())?;
    tcp.set_nodelay(true).map_err(|e| e.to_string())?;
    let name = ServerName::try_from(host.to_string()).map_err(|e| e.to_string())?;
    let tls = connector.connect(name, tcp).await.map_err(|e| e.to_string())?;
    let (sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    Ok(sender)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn show(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{label:<22} n={:<6} p50={:.3} ms  p90={:.3} ms  p99={:.3} ms  p99.9={:.3} ms  max={:.3} ms",
        samples.len(),
        ms(percentile(&samples, 0.50)),
        ms(percentile(&samples, 0.90)),
        ms(percentile(&samples, 0.99)),
        ms(percentile(&samples, 0.999)),
        ms(samples.last().copied().unwrap_or_default()),
    );
}

/// Starts etcd and kube-apiserver and creates the bench objects in them.
async fn populated_control_plane(args: &Args) -> (e2e::ControlPlane, kube::Client) {
    let started = Instant::now();
    let cp = e2e::ControlPlane::start(e2e::Options::new())
        .await
        .unwrap_or_else(|e| {
            eprintln!("loadgen: {e}");
            std::process::exit(1);
        });
    let client = cp.client().expect("client");
    println!(
        "apiserver: real kube-apiserver at {} (ready in {:.1} s)",
        cp.server_url(),
        started.elapsed().as_secs_f64()
    );
    let filling = Instant::now();
    if let Err(e) = populate(&client, args.nodes, args.pvs, 32).await {
        eprintln!("loadgen: creating the bench objects: {e}");
        std::process::exit(1);
    }
    println!(
        "apiserver: {} nodes, {} bound PV/PVC pairs created in {:.1} s",
        args.nodes,
        args.pvs,
        filling.elapsed().as_secs_f64()
    );
    (cp, client)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("loadgen: {e}");
            std::process::exit(2);
        }
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    sched_webhook::memory::purge_in_background();

    let _certs_dir;
    let mut control_plane: Option<e2e::ControlPlane> = None;
    let mut webhook: Option<tokio::process::Child> = None;
    let (host, port, ca_pem, state) = match (&args.target, &args.webhook_bin) {
        (None, Some(bin)) => {
            let (cp, _client) = populated_control_plane(&args).await;
            let dir = tempfile::tempdir().expect("tempdir");
            let (child, port, ca) = spawn_webhook(bin, &cp, dir.path()).await;
            _certs_dir = dir;
            webhook = Some(child);
            control_plane = Some(cp);
            ("127.0.0.1".to_string(), port, ca, None)
        }
        (Some(url), _) => {
            let rest = url.trim_start_matches("https://");
            let authority = rest.split('/').next().unwrap_or(rest);
            let (host, port) = authority
                .rsplit_once(':')
                .expect("--target https://HOST:PORT/mutate");
            let ca = std::fs::read(args.ca.as_deref().expect("--ca with --target")).expect("read --ca");
            (host.to_string(), port.parse::<u16>().expect("port"), ca, None)
        }
        (None, None) => {
            let config = SchedulerConfig::default_config(&in_tree_registry());
            let (cache, client) = if args.apiserver {
                let (cp, client) = populated_control_plane(&args).await;
                let rss_start = rss_bytes();
                let (cache, writers) = Cache::new(config);
                let syncing = Instant::now();
                let _reflectors = cache.start(&client, writers);
                let sync_deadline = syncing + Duration::from_secs(300);
                loop {
                    let (pvs, pvcs, _, nodes) = cache.sizes();
                    if cache.is_ready() && pvs >= args.pvs && pvcs >= args.pvs && nodes >= args.nodes {
                        break;
                    }
                    if Instant::now() > sync_deadline {
                        eprintln!("loadgen: the reflectors did not sync within 300 s");
                        std::process::exit(1);
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                let rss_synced = rss_bytes();
                let _ = cache.volume_snapshot();
                println!(
                    "cache: synced from the API server in {:.2} s: {} PVs, {} PVCs, {} nodes | RSS before reflectors {:.1} MiB, synced {:.1} MiB, with volume snapshot {:.1} MiB{}",
                    syncing.elapsed().as_secs_f64(),
                    args.pvs,
                    args.pvs,
                    args.nodes,
                    mib(rss_start),
                    mib(rss_synced),
                    mib(rss_bytes()),
                    heap()
                );
                // Dropped (torn down) when main returns.
                control_plane = Some(cp);
                (cache, client)
            } else {
                let rss_start = rss_bytes();
                let (cache, mut writers) = Cache::new(config);
                fill_synthetic(&mut writers, args.nodes, args.pvs);
                cache.mark_filled();
                let rss_filled = rss_bytes();
                let _ = cache.volume_snapshot();
                let rss_snapshot = rss_bytes();
                println!(
                    "cache: {} PVs, {} PVCs, {} nodes | RSS start {:.1} MiB, after fill {:.1} MiB, with volume snapshot {:.1} MiB{}",
                    args.pvs,
                    args.pvs,
                    args.nodes,
                    mib(rss_start),
                    mib(rss_filled),
                    mib(rss_snapshot),
                    heap()
                );
                // Plans are never run in this mode (pods need nothing or their claims are bound).
                let client =
                    kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().expect("uri")))
                        .expect("client");
                (cache, client)
            };
            let dir = tempfile::tempdir().expect("tempdir");
            let generated =
                sched_webhook::certs::generate(&[], &["127.0.0.1".parse().expect("ip")], 1).expect("certs");
            let files = sched_webhook::certs::write(dir.path(), &generated).expect("certs written");
            _certs_dir = dir;
            let state = Arc::new(AppState::new(cache, client));
            let webhook = TcpListener::bind("127.0.0.1:0").expect("bind");
            let admin = TcpListener::bind("127.0.0.1:0").expect("bind");
            let port = webhook.local_addr().expect("addr").port();
            let tls = RustlsConfig::from_config(
                sched_webhook::tls::server_config(&files.cert, &files.key).expect("tls"),
            );
            tokio::spawn(serve(
                state.clone(),
                Listeners { webhook, admin },
                tls,
                std::future::pending(),
                Duration::from_secs(1),
            ));
            (
                "127.0.0.1".to_string(),
                port,
                generated.ca_cert_pem.into_bytes(),
                Some(state),
            )
        }
    };

    let connector = connector(&ca_pem);
    let total = args.rate * args.seconds;
    let bodies: Arc<Vec<Bytes>> = Arc::new(
        (0..total.min(4096))
            .map(|i| Bytes::from(review(i, &args.mode, args.nodes, args.pvs)))
            .collect(),
    );
    println!(
        "load: {} req/s for {} s ({} requests, mode {}, {} connections, body {} bytes)",
        args.rate,
        args.seconds,
        total,
        args.mode,
        args.connections,
        bodies[0].len()
    );
    let next = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicUsize::new(0));
    let statuses = Arc::new(std::sync::Mutex::new(BTreeMap::<String, usize>::new()));
    let start = Instant::now() + Duration::from_millis(200);
    let deadline = start + Duration::from_secs(args.seconds + 10);
    let mut workers = Vec::new();
    for _ in 0..args.connections {
        let (connector, host, next, errors, bodies, statuses) = (
            connector.clone(),
            host.clone(),
            next.clone(),
            errors.clone(),
            bodies.clone(),
            statuses.clone(),
        );
        let rate = args.rate;
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut services = Vec::new();
            let mut sender = connect(&connector, &host, port).await.ok();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total || Instant::now() > deadline {
                    break;
                }
                let due = start + Duration::from_secs_f64(i as f64 / rate as f64);
                tokio::time::sleep_until(due.into()).await;
                if sender.as_ref().is_none_or(|s| s.is_closed()) {
                    sender = connect(&connector, &host, port).await.ok();
                }
                let Some(s) = sender.as_mut() else {
                    errors.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                let body = bodies[(i as usize) % bodies.len()].clone();
                let request = hyper::Request::post("/mutate")
                    .header("host", host.as_str())
                    .header("content-type", "application/json")
                    .body(Full::new(body))
                    .expect("request");
                let sent = Instant::now();
                let outcome = async {
                    s.ready().await.map_err(|e| e.to_string())?;
                    let response = s.send_request(request).await.map_err(|e| e.to_string())?;
                    let status = response.status();
                    let bytes = response
                        .into_body()
                        .collect()
                        .await
                        .map_err(|e| e.to_string())?
                        .to_bytes();
                    Ok::<_, String>((status, bytes))
                }
                .await;
                let done = Instant::now();
                match outcome {
                    Ok((status, bytes)) if status.is_success() => {
                        let allowed = memchr_allowed(&bytes);
                        *statuses
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .entry(format!("{} allowed={allowed}", status.as_u16()))
                            .or_default() += 1;
                        latencies.push(done - due);
                        services.push(done - sent);
                    }
                    _ => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        sender = None;
                    }
                }
            }
            (latencies, services)
        }));
    }
    let mut latencies = Vec::new();
    let mut services = Vec::new();
    for w in workers {
        if let Ok((l, s)) = w.await {
            latencies.extend(l);
            services.extend(s);
        }
    }
    let elapsed = Instant::now().saturating_duration_since(start);
    let ok = latencies.len();
    println!(
        "done: {ok} ok, {} errors in {:.2} s = {:.0} req/s achieved; responses {:?}",
        errors.load(Ordering::Relaxed),
        elapsed.as_secs_f64(),
        ok as f64 / elapsed.as_secs_f64(),
        statuses.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    );
    show("latency (from due)", latencies);
    show("service (from send)", services);
    if let Some(state) = state {
        let (pvs, pvcs, _, _) = state.cache.sizes();
        println!(
            "server: RSS {:.1} MiB with {pvs} PVs and {pvcs} PVCs cached{}",
            mib(rss_bytes()),
            heap()
        );
        let text = state.metrics.render(true);
        for line in text.lines().filter(|l| {
            l.starts_with("sched_webhook_request_duration_seconds_bucket")
                || l.starts_with("sched_webhook_request_duration_seconds_count")
        }) {
            println!("  {line}");
        }
    }
    if let Some(mut child) = webhook.take() {
        if let Some(pid) = child.id() {
            println!("webhook: after the load {}", child_memory(pid));
        }
        let _ = child.kill().await;
    }
    if let Some(cp) = control_plane.take() {
        println!("apiserver: stopping the control plane");
        drop(cp);
    }
}

fn memchr_allowed(bytes: &[u8]) -> bool {
    bytes.windows(14).any(|w| w == b"\"allowed\":true")
}
