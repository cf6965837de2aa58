//! The admin port's health, in process and on loopback only:
//!
//! - readiness follows the watches: the caches sync from a fake API server on 127.0.0.1 (empty lists,
//!   watches held open), `/readyz` says ok; the fake server goes away and every watch fails, so
//!   `/readyz` turns 503 naming the failing kinds once the failures outlast the threshold; the fake
//!   server comes back (its watches answer 410 Gone, so the reflectors list again) and `/readyz` is
//!   ok again;
//! - liveness follows the main runtime: while every worker of the runtime serving the webhook is
//!   blocked, the admin port (its own thread) answers `/healthz` 503, and ok once it runs again.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Query, Request};
use axum::response::Response;
use axum_server::tls_rustls::RustlsConfig;
use futures::StreamExt;

use sched_core::framework::profile::SchedulerConfig;
use sched_core::plugins::in_tree_registry;
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

/// A fake API server on `listener` until `stop` fires: every LIST is an empty list; every watch is
/// held open with nothing (`expire`: one 410 Gone event first, which makes kube's watcher list again).
fn fake_api_server(listener: std::net::TcpListener, expire: bool) -> tokio::sync::oneshot::Sender<()> {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        // Dropping the runtime at the end closes every connection it holds.
        runtime.block_on(async move {
            listener.set_nonblocking(true).expect("nonblocking");
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            let app = axum::Router::new().fallback(
                move |Query(query): Query<std::collections::HashMap<String, String>>, request: Request| async move {
                    let path = request.uri().path().to_string();
                    if query.get("watch").is_some_and(|w| w == "true" || w == "1") {
                        let first = if expire {
                            "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"too old resource version\",\"reason\":\"Expired\",\"code\":410}}\n"
                        } else {
                            ""
                        };
                        let events = futures::stream::once(async move { Ok::<_, std::io::Error>(first.to_string()) })
                            .chain(futures::stream::pending());
                        return Response::builder()
                            .header("content-type", "application/json")
                            .body(Body::from_stream(events))
                            .expect("response");
                    }
                    let kind = path.rsplit('/').next().unwrap_or("");
                    let api_version = if path.starts_with("/api/") { "v1" } else { "storage.k8s.io/v1" };
                    let body = format!(
                        "{{\"apiVersion\":\"{api_version}\",\"kind\":\"{kind}List\",\"metadata\":{{\"resourceVersion\":\"1\"}},\"items\":[]}}"
                    );
                    Response::builder()
                        .header("content-type", "application/json")
                        .body(Body::from(body))
                        .expect("response")
                },
            );
            tokio::select! {
                _ = axum::serve(listener, app) => {}
                _ = stopped => {}
            }
        });
    });
    stop
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
async fn readiness_turns_off_while_the_watches_fail_and_back_on_when_they_recover() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let api = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = api.local_addr().expect("addr");
    let stop_api = fake_api_server(api, false);
    let client = kube::Client::try_from(kube::Config::new(
        format!("http://{address}").parse().expect("uri"),
    ))
    .expect("client");
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

    let (status, body) = until(port, "/readyz", Duration::from_secs(30), |s, _| s == 200).await;
    assert_eq!(
        (status, body.as_str()),
        (200, "ok"),
        "synced from the fake API server"
    );

    // The API server goes away: every watch ends, and every restart is refused.
    let _ = stop_api.send(());
    let gone = Instant::now();
    let (status, body) = until(port, "/readyz", Duration::from_secs(60), |s, _| s == 503).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.starts_with("watches failing:"), "{body}");
    let unready_after = gone.elapsed();
    // Each watch retries on its own backoff: soon every kind is named.
    const KINDS: [&str; 9] = [
        "Pod",
        "Node",
        "Namespace",
        "PersistentVolume ",
        "PersistentVolumeClaim",
        "StorageClass",
        "CSINode",
        "CSIDriver",
        "CSIStorageCapacity",
    ];
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

    // It comes back on the same address; its watches answer 410, so every reflector lists again and
    // reports an event.
    let api = std::net::TcpListener::bind(address).expect("rebind the API server's port");
    let stop_api = fake_api_server(api, true);
    let back = Instant::now();
    let (status, body) = until(port, "/readyz", Duration::from_secs(90), |s, _| s == 200).await;
    assert_eq!(status, 200, "ready again: {body}");
    eprintln!(
        "unready {unready_after:?} after the API server went away (threshold {threshold:?}); ready {:?} after it came back",
        back.elapsed()
    );
    let _ = stop_api.send(());
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
