//! Bounded connections on the real ports (127.0.0.1 only, bounded in count and time): callers that
//! stall in the TLS handshake, in the request headers or in the body are all closed within the
//! timeout plus a margin while a normal request still gets through; idle HTTP/2 connections are
//! closed; connections beyond `max_connections` are closed at accept.

mod common;

use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum_server::tls_rustls::RustlsConfig;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Bytes;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use common::{pod_json, pod_review, unsynced_state};
use sched_webhook::certs;
use sched_webhook::serving::{ConnectionLimits, Listeners, ServeOptions, serve_with};
use sched_webhook::tls;

/// A running server and what tests need to reach it.
struct Server {
    port: u16,
    admin_port: u16,
    ca_pem: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    _dir: tempfile::TempDir,
}

impl Server {
    async fn start(limits: ConnectionLimits) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let generated = certs::generate(&[], &["127.0.0.1".parse().expect("ip")], 1).expect("certs");
        let files = certs::write(dir.path(), &generated).expect("write");
        let (state, _writers) = unsynced_state();
        let webhook = TcpListener::bind("127.0.0.1:0").expect("bind");
        let admin = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = webhook.local_addr().expect("addr").port();
        let admin_port = admin.local_addr().expect("addr").port();
        let tls_config = RustlsConfig::from_config(tls::server_config(&files.cert, &files.key).expect("tls"));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let options = ServeOptions {
            grace: Duration::from_secs(2),
            limits,
            ..ServeOptions::default()
        };
        let task = tokio::spawn(serve_with(
            state,
            Listeners { webhook, admin },
            tls_config,
            async {
                let _ = stopped.await;
            },
            options,
        ));
        Server {
            port,
            admin_port,
            ca_pem: generated.ca_cert_pem,
            stop: Some(stop),
            task,
            _dir: dir,
        }
    }

    fn connector(&self, alpn: &[&[u8]]) -> TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(self.ca_pem.as_bytes()).expect("ca pem"))
            .expect("root");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        TlsConnector::from(Arc::new(config))
    }

    async fn tls(&self, alpn: &[&[u8]]) -> std::io::Result<TlsStream<TcpStream>> {
        let tcp = TcpStream::connect(("127.0.0.1", self.port)).await?;
        let name = ServerName::try_from("127.0.0.1").expect("name");
        self.connector(alpn).connect(name, tcp).await
    }

    /// A pod review over a fresh HTTPS/1.1 connection: the status.
    async fn post(&self) -> Result<u16, String> {
        let tls = self.tls(&[b"http/1.1"]).await.map_err(|e| e.to_string())?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .map_err(|e| e.to_string())?;
        tokio::spawn(connection);
        let body = pod_review(pod_json("p", None, None), false).to_string();
        let request = hyper::Request::post("/mutate")
            .header("content-type", "application/json")
            .header("host", "127.0.0.1")
            .body(Full::new(Bytes::from(body)))
            .expect("request");
        let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
        Ok(response.status().as_u16())
    }

    /// One value of the admin port's `/metrics`.
    async fn metric(&self, name: &str) -> f64 {
        let text = self.metrics_text().await;
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("{name} not in /metrics:\n{text}"))
    }

    /// The admin port's `/metrics`.
    async fn metrics_text(&self) -> String {
        let tcp = TcpStream::connect(("127.0.0.1", self.admin_port))
            .await
            .expect("admin port");
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
                .await
                .expect("handshake");
        tokio::spawn(connection);
        let request = hyper::Request::get("/metrics")
            .header("host", "127.0.0.1")
            .body(Empty::<Bytes>::new())
            .expect("request");
        let response = sender.send_request(request).await.expect("metrics");
        let text = response.into_body().collect().await.expect("body").to_bytes();
        String::from_utf8_lossy(&text).into_owned()
    }

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

/// Reads until the server closes (EOF or an error) and returns what came and when, or `None` if it
/// is still open after `limit`.
async fn closed_within<S: AsyncRead + Unpin>(stream: &mut S, limit: Duration) -> Option<(Instant, Vec<u8>)> {
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    tokio::time::timeout(limit, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return (Instant::now(), received),
                Ok(n) => received.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .ok()
}

/// The start of a TLS 1.2/1.3 ClientHello record that announces more bytes than it sends.
const HALF_CLIENT_HELLO: &[u8] = &[
    0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03, 0x00,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stall {
    /// Plain TCP, half a ClientHello.
    Handshake,
    /// TLS done, half the request headers.
    Headers,
    /// TLS done, headers sent, 10 of 1,000 body bytes.
    Body,
}

enum Stalled {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

async fn stall(server: &Server, how: Stall) -> (Stalled, Instant) {
    match how {
        Stall::Handshake => {
            let mut tcp = TcpStream::connect(("127.0.0.1", server.port))
                .await
                .expect("connect");
            tcp.write_all(HALF_CLIENT_HELLO).await.expect("write");
            (Stalled::Plain(tcp), Instant::now())
        }
        Stall::Headers | Stall::Body => {
            let mut tls = server.tls(&[b"http/1.1"]).await.expect("tls");
            let bytes: &[u8] = if how == Stall::Headers {
                b"POST /mutate HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: appl"
            } else {
                b"POST /mutate HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{\"apiVersi"
            };
            tls.write_all(bytes).await.expect("write");
            tls.flush().await.expect("flush");
            (Stalled::Tls(Box::new(tls)), Instant::now())
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_callers_are_closed_within_the_timeouts_while_a_normal_request_gets_through() {
    // Long enough to open 500 connections (150 with TLS) in a debug build before the first is closed.
    let timeout = Duration::from_secs(3);
    let margin = Duration::from_millis(1500);
    let server = Server::start(ConnectionLimits {
        tls_handshake_timeout: timeout,
        header_read_timeout: timeout,
        body_read_timeout: timeout,
        ..ConnectionLimits::default()
    })
    .await;

    // 500 stalled callers: 350 stop in the handshake, 100 in the headers, 50 in the body.
    let plan: Vec<Stall> = std::iter::repeat_n(Stall::Handshake, 350)
        .chain(std::iter::repeat_n(Stall::Headers, 100))
        .chain(std::iter::repeat_n(Stall::Body, 50))
        .collect();
    let started = Instant::now();
    let server = Arc::new(server);
    let stalled = futures::future::join_all(plan.iter().map(|how| {
        let (server, how) = (server.clone(), *how);
        async move {
            tokio::spawn(async move { stall(&server, how).await })
                .await
                .expect("stall")
        }
    }))
    .await;
    let setup = started.elapsed();

    // While they are held, a normal caller is answered.
    let open_before = server.metric("sched_webhook_connections_open").await;
    let status = tokio::time::timeout(Duration::from_secs(5), server.post())
        .await
        .expect("answered in time")
        .expect("https works");
    assert_eq!(status, 200);

    // Every stalled caller is closed by the server within its timeout plus the margin.
    let closes = futures::future::join_all(stalled.into_iter().zip(&plan).map(
        |((stream, since), how)| async move {
            let closed = match stream {
                Stalled::Plain(mut tcp) => closed_within(&mut tcp, timeout + margin * 2).await,
                Stalled::Tls(mut tls) => closed_within(&mut *tls, timeout + margin * 2).await,
            };
            (*how, closed.map(|(at, bytes)| (at - since, bytes)))
        },
    ))
    .await;
    for (how, closed) in &closes {
        let (after, bytes) = closed
            .as_ref()
            .unwrap_or_else(|| panic!("{how:?}: still open after {:?}", timeout + margin * 2));
        assert!(*after <= timeout + margin, "{how:?}: closed after {after:?}");
        if *how == Stall::Body {
            let text = String::from_utf8_lossy(bytes);
            assert!(text.starts_with("HTTP/1.1 400"), "{how:?}: {text}");
        }
    }
    let slowest = closes
        .iter()
        .filter_map(|(_, c)| c.as_ref().map(|(after, _)| *after))
        .max()
        .unwrap_or_default();
    eprintln!(
        "500 stalled connections set up in {setup:?}, {open_before} open during the normal request, slowest closed after {slowest:?}"
    );
    assert!(
        open_before >= 400.0,
        "the stalled connections were open while the normal request went through ({open_before})"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(server.metric("sched_webhook_connections_open").await, 0.0);
    assert!(
        server
            .metric("sched_webhook_connections_closed_total{reason=\"tls_handshake_timeout\"}")
            .await
            >= 350.0
    );
    assert!(
        server
            .metric("sched_webhook_connections_closed_total{reason=\"read_timeout\"}")
            .await
            >= 100.0
    );
    Arc::into_inner(server).expect("one owner").stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_http2_connections_are_closed() {
    let server = Server::start(ConnectionLimits {
        header_read_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(1),
        ..ConnectionLimits::default()
    })
    .await;

    // HTTP/2 that never asks anything: closed after the header read timeout.
    let mut silent = server.tls(&[b"h2"]).await.expect("tls");
    assert_eq!(silent.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let since = Instant::now();
    let (at, _) = closed_within(&mut silent, Duration::from_secs(5))
        .await
        .expect("a silent HTTP/2 connection is closed");
    assert!(
        at - since <= Duration::from_millis(2500),
        "closed after {:?}",
        at - since
    );

    // HTTP/2 that asks once, then idles: answered, then GOAWAY and closed after the idle timeout.
    let tls = server.tls(&[b"h2"]).await.expect("tls");
    let (mut sender, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tls),
    )
    .await
    .expect("h2 handshake");
    let connection = tokio::spawn(connection);
    let body = pod_review(pod_json("p", None, None), false).to_string();
    let request = hyper::Request::post("https://127.0.0.1/mutate")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .expect("request");
    let response = sender.send_request(request).await.expect("h2 request");
    assert_eq!(response.status().as_u16(), 200);
    let since = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), connection)
        .await
        .expect("the idle connection is closed")
        .expect("task")
        .expect("closed gracefully (GOAWAY)");
    assert!(
        since.elapsed() <= Duration::from_millis(2500),
        "closed after {:?}",
        since.elapsed()
    );
    let idle = server
        .metric("sched_webhook_connections_closed_total{reason=\"idle\"}")
        .await;
    let read = server
        .metric("sched_webhook_connections_closed_total{reason=\"read_timeout\"}")
        .await;
    assert!(idle >= 1.0, "idle {idle}, read timeouts {read}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_are_closed_at_accept() {
    let cap = 8;
    let server = Server::start(ConnectionLimits {
        max_connections: cap,
        header_read_timeout: Duration::from_secs(30),
        idle_timeout: Duration::from_secs(30),
        ..ConnectionLimits::default()
    })
    .await;

    // `cap` connections that finished their handshake and wait: each holds a slot.
    let mut held = Vec::new();
    for _ in 0..cap {
        held.push(server.tls(&[b"http/1.1"]).await.expect("within the cap"));
    }
    assert_eq!(server.metric("sched_webhook_connections_open").await, cap as f64);

    // One more: accepted by the kernel, closed by the server before any TLS.
    let mut extra = TcpStream::connect(("127.0.0.1", server.port))
        .await
        .expect("connect");
    extra.write_all(HALF_CLIENT_HELLO).await.expect("write");
    let (_, bytes) = closed_within(&mut extra, Duration::from_secs(2))
        .await
        .expect("closed at once");
    assert!(bytes.is_empty(), "nothing is answered beyond the cap");
    assert!(
        server.tls(&[b"http/1.1"]).await.is_err(),
        "no handshake beyond the cap"
    );
    assert!(server.post().await.is_err(), "no request beyond the cap");
    assert!(server.metric("sched_webhook_connections_rejected_total").await >= 3.0);

    // A slot freed is a slot for the next caller.
    drop(held.pop());
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.metric("sched_webhook_connections_open").await >= cap as f64 {
        assert!(
            Instant::now() < deadline,
            "the closed connection's slot was never freed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(server.post().await, Ok(200));
    drop(held);
    server.stop().await;
}

/// Every metric family of a serving replica's `/metrics`: name (as exposed, `_total` included), type,
/// help text, and a label every sample of it carries (`None`: no labels). These are the families,
/// types and help texts the hand-written exposition had before prometheus-client wrote it, less
/// `sched_webhook_writes_undone_total`: nothing is undone since the writes moved to the controller
/// (a plan cut short is finished, not taken back), so it could only ever read 0.
const FAMILIES: [(&str, &str, &str, Option<&str>); 21] = [
    (
        "sched_webhook_requests_total",
        "counter",
        "Admission requests by operation and outcome.",
        Some("operation"),
    ),
    (
        "sched_webhook_request_duration_seconds",
        "histogram",
        "Time to answer an admission request.",
        Some("le"),
    ),
    (
        "sched_webhook_bindings_total",
        "counter",
        "PersistentVolumes bound and claims annotated with a selected node.",
        None,
    ),
    (
        "sched_webhook_conflicts_retried_total",
        "counter",
        "Plans decided again on fresh state after a write conflict.",
        None,
    ),
    (
        "sched_webhook_nominations_cleared_total",
        "counter",
        "nominatedNodeName values cleared.",
        None,
    ),
    (
        "sched_webhook_plan_failures_total",
        "counter",
        "Plans that could not be carried out.",
        None,
    ),
    (
        "sched_webhook_pods_skipped_total",
        "counter",
        "Stored pods left to the scheduler because they use more claims than are considered.",
        None,
    ),
    (
        "sched_webhook_requests_shed_total",
        "counter",
        "Requests allowed unchanged, with a warning, because every decision slot was taken.",
        None,
    ),
    (
        "sched_webhook_catch_up_reads_total",
        "counter",
        "Claims and classes read from the API server because the watches had not delivered them.",
        None,
    ),
    (
        "sched_webhook_leader",
        "gauge",
        "Whether this replica holds the controller's Lease (only the leader writes).",
        None,
    ),
    (
        "sched_webhook_cache_ready",
        "gauge",
        "Whether every reflector cache has synced.",
        None,
    ),
    (
        "sched_webhook_watch_errors_total",
        "counter",
        "Watch errors of the reflector caches, by kind.",
        Some("kind"),
    ),
    (
        "sched_webhook_watches_failing",
        "gauge",
        "Kinds whose watch has failed for longer than --watch-failure-threshold.",
        None,
    ),
    (
        "sched_webhook_heartbeat_age_seconds",
        "gauge",
        "Age of the main runtime's heartbeat.",
        None,
    ),
    (
        "sched_webhook_watch_newest_event_age_seconds",
        "gauge",
        "Age of the newest event each reflector applied (a quiet kind is old and healthy).",
        Some("kind"),
    ),
    (
        "sched_webhook_pod_queue_length",
        "gauge",
        "Pods queued for the controller.",
        None,
    ),
    (
        "sched_webhook_pod_queue_oldest_wait_seconds",
        "gauge",
        "How long the oldest pod queued for the controller has waited since the caches synced.",
        None,
    ),
    (
        "sched_webhook_streams_stalled",
        "gauge",
        "Input streams (reflectors, controller queue) stalled for longer than --stall-threshold.",
        None,
    ),
    (
        "sched_webhook_connections_open",
        "gauge",
        "Connections open on the webhook port.",
        None,
    ),
    (
        "sched_webhook_connections_rejected_total",
        "counter",
        "Connections closed at accept because --max-connections were open.",
        None,
    ),
    (
        "sched_webhook_connections_closed_total",
        "counter",
        "Webhook connections closed by the server, by reason.",
        Some("reason"),
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_name_every_family_with_its_type_help_and_labels() {
    let server = Server::start(ConnectionLimits::default()).await;
    // One answered request, so the request families have samples.
    assert_eq!(server.post().await, Ok(200));
    let text = server.metrics_text().await;
    for (name, kind, help, label) in FAMILIES {
        assert!(
            text.contains(&format!("# HELP {name} {help}\n")),
            "HELP of {name}:\n{text}"
        );
        assert!(
            text.contains(&format!("# TYPE {name} {kind}\n")),
            "TYPE of {name}:\n{text}"
        );
        let samples: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#') && l.starts_with(name))
            .collect();
        // The watches of an unsynced cache have no errors and have applied no event: families that
        // are only their header.
        if name == "sched_webhook_watch_errors_total"
            || name == "sched_webhook_watch_newest_event_age_seconds"
        {
            continue;
        }
        assert!(!samples.is_empty(), "no sample of {name}:\n{text}");
        for sample in samples {
            let series = sample.split(' ').next().unwrap_or_default();
            // A histogram's buckets carry `le`; its `_sum` and `_count` no label.
            let labelled = match label {
                Some("le") => series.starts_with(&format!("{name}_bucket{{")),
                other => other.is_some(),
            };
            match label.filter(|_| labelled) {
                Some(label) => assert!(
                    series.contains(&format!("{label}=\"")),
                    "{sample}: no {label} label"
                ),
                None => assert!(!series.contains('{'), "{sample}: unexpected labels"),
            }
        }
    }
    // Nothing else: the exposition has exactly these families.
    let types = text.lines().filter(|l| l.starts_with("# TYPE ")).count();
    assert_eq!(types, FAMILIES.len(), "{text}");
    server.stop().await;
}
