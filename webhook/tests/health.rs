//! The admin port's health, in process and on loopback only:
//!
//! - readiness follows the watches: the caches sync from the real kube-apiserver of the e2e harness
//!   through a loopback TCP proxy ([`e2e::latency::LatencyProxy`], no delay), `/readyz` says ok;
//!   the proxy cuts the link (every connection closed, connects refused), so every watch fails and
//!   `/readyz` turns 503 naming the failing kinds once the failures outlast the threshold; the
//!   proxy restores the link on the same port, an object of each kind changes, every watch resumes
//!   and delivers that change, and `/readyz` is ok again;
//! - liveness follows the main runtime: while every worker of the runtime serving the webhook is
//!   blocked, the admin port (its own thread) answers `/healthz` 503, and ok once it runs again.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum_server::tls_rustls::RustlsConfig;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use e2e::latency::LatencyProxy;
use sched_core::engine::{SchedulerConfig, in_tree_registry};
use sched_webhook::cache::Cache;
use sched_webhook::certs;
use sched_webhook::server::AppState;
use sched_webhook::serving::{Listeners, ServeOptions, serve_with};
use sched_webhook::tls;

/// `GET path` on 127.0.0.1:port over plain HTTP/1.0 from a blocking socket (works while the test's
/// runtime is blocked): status and body.
fn get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nhost: 127.0.0.1\r\n\r\n")?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

/// Polls `GET path` until `want` holds, for at most `limit`; returns the last answer.
async fn until(port: u16, path: &str, limit: Duration, want: impl Fn(u16, &str) -> bool) -> (u16, String) {
    let deadline = Instant::now() + limit;
    loop {
        let path = path.to_string();
        let answer = tokio::task::spawn_blocking(move || get(port, &path))
            .await
            .expect("task")
            .unwrap_or((0, String::new()));
        if want(answer.0, &answer.1) || Instant::now() >= deadline {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every kind the cache watches, as `/readyz` names them (`PersistentVolume ` with its space, so as
/// not to match `PersistentVolumeClaim`).
const KINDS: [&str; 10] = [
    "Pod",
    "Node",
    "Namespace",
    "PersistentVolume ",
    "PersistentVolumeClaim",
    "StorageClass",
    "CSINode",
    "CSIDriver",
    "CSIStorageCapacity",
    "VolumeAttachment",
];

/// One object of each kind the cache watches, so every watch has something to deliver when it
/// changes: `namespace` (already created) and one more of every other kind, created in it or named
/// after it.
async fn one_of_each_kind(client: &kube::Client, namespace: &str) -> Vec<(Api<DynamicObject>, String)> {
    fn resource<K: kube::Resource<DynamicType = ()>>() -> ApiResource {
        ApiResource::erase::<K>(&())
    }
    let node = format!("{namespace}-node");
    let class = format!("{namespace}-class");
    let driver = format!("{namespace}.example.com");
    let cluster = |resource: &ApiResource| Api::<DynamicObject>::all_with(client.clone(), resource);
    let namespaced =
        |resource: &ApiResource| Api::<DynamicObject>::namespaced_with(client.clone(), namespace, resource);
    let created: Vec<(Api<DynamicObject>, Value)> = vec![
        (
            cluster(&resource::<Node>()),
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}),
        ),
        (
            cluster(&resource::<StorageClass>()),
            json!({
                "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": class},
                "provisioner": driver, "volumeBindingMode": "WaitForFirstConsumer",
            }),
        ),
        (
            cluster(&resource::<CSIDriver>()),
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": driver}, "spec": {}}),
        ),
        (
            cluster(&resource::<CSINode>()),
            json!({
                "apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": node},
                "spec": {"drivers": [{"name": driver, "nodeID": node}]},
            }),
        ),
        (
            cluster(&resource::<PersistentVolume>()),
            json!({
                "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": format!("{namespace}-pv")},
                "spec": {
                    "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                    "storageClassName": class, "hostPath": {"path": "/tmp/health"},
                },
            }),
        ),
        (
            namespaced(&resource::<PersistentVolumeClaim>()),
            json!({
                "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "claim"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"], "storageClassName": class,
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }),
        ),
        (
            namespaced(&resource::<CSIStorageCapacity>()),
            json!({
                "apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity", "metadata": {"name": "capacity"},
                "storageClassName": class, "capacity": "1Gi",
            }),
        ),
        (
            cluster(&resource::<VolumeAttachment>()),
            json!({
                "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
                "metadata": {"name": format!("{namespace}-attachment")},
                "spec": {"attacher": driver, "nodeName": node, "source": {"persistentVolumeName": format!("{namespace}-pv")}},
            }),
        ),
        (
            // Pending (no node, no scheduler here): the pods' watch selects non-terminal pods.
            namespaced(&resource::<Pod>()),
            json!({
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pod"},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
            }),
        ),
    ];
    let mut objects = vec![(cluster(&resource::<Namespace>()), namespace.to_string())];
    for (api, object) in created {
        let object: DynamicObject = serde_json::from_value(object).expect("object");
        let created = api.create(&PostParams::default(), &object).await.expect("create");
        objects.push((api, created.metadata.name.expect("name")));
    }
    objects
}

/// Changes a label of each object (a MODIFIED event for every watch).
async fn touch(objects: &[(Api<DynamicObject>, String)], value: &str) {
    let patch = Patch::Merge(json!({"metadata": {"labels": {"health-test": value}}}));
    for (api, name) in objects {
        api.patch(name, &PatchParams::default(), &patch)
            .await
            .expect("patch");
    }
}

struct Webhook {
    admin_port: u16,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    _dir: tempfile::TempDir,
}

async fn start_webhook(state: Arc<AppState>, options: ServeOptions) -> Webhook {
    let dir = tempfile::tempdir().expect("tempdir");
    let generated = certs::generate(&[], &["127.0.0.1".parse().expect("ip")], 1).expect("certs");
    let files = certs::write(dir.path(), &generated).expect("write");
    let webhook = TcpListener::bind("127.0.0.1:0").expect("bind");
    let admin = TcpListener::bind("127.0.0.1:0").expect("bind");
    let admin_port = admin.local_addr().expect("addr").port();
    let tls_config = RustlsConfig::from_config(tls::server_config(&files.cert, &files.key).expect("tls"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(serve_with(
        state,
        Listeners { webhook, admin },
        tls_config,
        async {
            let _ = stopped.await;
        },
        options,
    ));
    Webhook {
        admin_port,
        stop: Some(stop),
        task,
        _dir: dir,
    }
}

impl Webhook {
    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(Duration::from_secs(10), &mut self.task)
            .await
            .expect("shut down in time")
            .expect("task")
            .expect("served cleanly");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_turns_off_while_the_api_server_is_cut_off_and_back_on_when_the_link_is_restored() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cp = e2e::ControlPlane::start(e2e::Options::new())
        .await
        .expect("control plane");
    // The test's own writes go straight to the API server; only the webhook's go through the proxy.
    let admin = cp.client().expect("client");
    let namespace = cp.new_namespace("health").await.expect("namespace");
    let objects = one_of_each_kind(&admin, &namespace).await;

    let upstream = cp
        .server_url()
        .trim_start_matches("https://")
        .parse()
        .expect("the API server's address");
    let mut proxy = LatencyProxy::start(upstream, Duration::ZERO)
        .await
        .expect("proxy");
    // The API server's certificate names 127.0.0.1: the proxy's URL verifies as well.
    let mut config = cp.config().clone();
    config.cluster_url = proxy.url().parse().expect("uri");
    let client = kube::Client::try_from(config).expect("client");
    let (cache, writers) = Cache::new(SchedulerConfig::default_config(&in_tree_registry()));
    let _reflectors = cache.start(&client, writers);
    let state = Arc::new(AppState::new(cache, client));
    let threshold = Duration::from_secs(1);
    let webhook = start_webhook(
        state,
        ServeOptions {
            watch_failure_threshold: threshold,
            ..ServeOptions::default()
        },
    )
    .await;
    let port = webhook.admin_port;

    let (status, body) = until(port, "/readyz", Duration::from_secs(60), |s, _| s == 200).await;
    assert_eq!(
        (status, body.as_str()),
        (200, "ok"),
        "synced from the API server through the proxy"
    );

    // The link is cut: every watch's connection closes, and every restart is refused.
    tokio::time::timeout(Duration::from_secs(10), proxy.cut())
        .await
        .expect("the link is cut in time");
    let cut = Instant::now();
    let (status, body) = until(port, "/readyz", Duration::from_secs(60), |s, _| s == 503).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.starts_with("watches failing:"), "{body}");
    let unready_after = cut.elapsed();
    // Each watch retries on its own backoff: soon every kind is named.
    let (status, body) = until(port, "/readyz", Duration::from_secs(60), |_, body| {
        KINDS.iter().all(|kind| body.contains(kind))
    })
    .await;
    assert_eq!(status, 503, "{body}");
    assert!(
        KINDS.iter().all(|kind| body.contains(kind)),
        "every kind is named: {body}"
    );
    let (_, metrics) = until(port, "/metrics", Duration::from_secs(5), |s, _| s == 200).await;
    assert!(
        metrics.contains("sched_webhook_watch_errors_total{kind=\"Pod\"}"),
        "{metrics}"
    );
    assert!(!metrics.contains("sched_webhook_watches_failing 0"), "{metrics}");

    // The link comes back on the same port. kube's watcher resumes a watch from its last
    // resourceVersion without a word, so each kind changes once: every watch delivers that change
    // when its backoff lets it reconnect, which clears the kind.
    proxy
        .restore()
        .await
        .expect("the proxy listens on its port again");
    let back = Instant::now();
    tokio::time::timeout(Duration::from_secs(30), touch(&objects, "restored"))
        .await
        .expect("touched in time");
    let (status, body) = until(port, "/readyz", Duration::from_secs(90), |s, _| s == 200).await;
    assert_eq!(status, 200, "ready again: {body}");
    eprintln!(
        "unready {unready_after:?} after the link was cut (threshold {threshold:?}); ready {:?} after it was restored",
        back.elapsed()
    );
    webhook.stop().await;
}

#[test]
fn liveness_fails_while_the_main_runtime_is_wedged() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let (state, _writers) = common::unsynced_state();
        let webhook = start_webhook(
            state,
            ServeOptions {
                heartbeat_timeout: Duration::from_secs(1),
                ..ServeOptions::default()
            },
        )
        .await;
        let port = webhook.admin_port;
        let (status, body) = until(port, "/healthz", Duration::from_secs(10), |s, _| s == 200).await;
        assert_eq!((status, body.as_str()), (200, "ok"));

        // Block the runtime's only worker for 3 s; meanwhile another thread asks the admin port.
        let prober = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1800));
            get(port, "/healthz").expect("the admin port answers while the runtime is wedged")
        });
        std::thread::sleep(Duration::from_secs(3));
        let (status, body) = prober.join().expect("prober");
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("wedged"), "{body}");

        // Running again: the heartbeat is fresh, /healthz is ok.
        let (status, body) = until(port, "/healthz", Duration::from_secs(5), |s, _| s == 200).await;
        assert_eq!((status, body.as_str()), (200, "ok"));
        webhook.stop().await;
    });
}
