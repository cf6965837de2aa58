//! The real TLS port on 127.0.0.1 with rcgen certificates: a verifying HTTPS client gets an answer, a
//! plaintext request gets none, a replaced certificate is served without a restart, and shutdown
//! returns once the in-flight request is answered. With a client CA: callers without a certificate,
//! or with one another CA signed, fail the TLS handshake; a replaced client CA is used without a
//! restart.

mod common;

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use axum_server::tls_rustls::RustlsConfig;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use common::{pod_json, pod_review, unsynced_state};
use sched_webhook::certs;
use sched_webhook::serving::{Listeners, serve};
use sched_webhook::tls;

fn connector(ca_pem: &str) -> TlsConnector {
    connector_with(ca_pem, None, &rustls::version::TLS12)
}

/// A client trusting `ca_pem`, presenting `client` (certificate and key PEM) when given.
fn connector_with(
    ca_pem: &str,
    client: Option<(&str, &str)>,
    version: &'static rustls::SupportedProtocolVersion,
) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).expect("ca pem"))
        .expect("root");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[version])
        .expect("tls version")
        .with_root_certificates(roots);
    let config = match client {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(cert.as_bytes()).expect("client cert")],
                PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("client key"),
            )
            .expect("client auth"),
        None => builder.with_no_client_auth(),
    };
    TlsConnector::from(Arc::new(config))
}

/// POSTs a pod review over HTTPS/1.1 and returns the status and body.
async fn post(port: u16, ca_pem: &str) -> Result<(u16, String), String> {
    post_with(port, connector(ca_pem)).await
}

/// POSTs a pod review over HTTPS/1.1 with `connector` and returns the status and body.
async fn post_with(port: u16, connector: TlsConnector) -> Result<(u16, String), String> {
    let tcp = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    let server_name = ServerName::try_from("127.0.0.1").expect("name");
    let tls = connector
        .connect(server_name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
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
    let status = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
}

#[tokio::test]
async fn serves_tls_only_reloads_certificates_and_shuts_down_gracefully() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ip = "127.0.0.1".parse().expect("ip");
    let first = certs::generate(&[], &[ip], 1).expect("certs");
    let files = certs::write(dir.path(), &first).expect("write");

    let (state, _writers) = unsynced_state();
    let webhook = TcpListener::bind("127.0.0.1:0").expect("bind");
    let admin = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = webhook.local_addr().expect("addr").port();
    let tls_config = RustlsConfig::from_config(tls::server_config(&files.cert, &files.key).expect("tls"));
    let reloader = tls::spawn_reloader(
        tls_config.clone(),
        files.cert.clone(),
        files.key.clone(),
        Duration::from_millis(100),
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(
        state,
        Listeners { webhook, admin },
        tls_config,
        async {
            let _ = stopped.await;
        },
        Duration::from_secs(5),
    ));

    let (status, body) = tokio::time::timeout(Duration::from_secs(10), post(port, &first.ca_cert_pem))
        .await
        .expect("answered in time")
        .expect("https works");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"allowed\":true"), "{body}");

    // Plaintext on the webhook port: the TLS server answers with no HTTP response.
    let mut plain = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
    plain
        .write_all(b"POST /mutate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}")
        .await
        .expect("write");
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), plain.read_to_end(&mut buf)).await;
    assert!(
        !String::from_utf8_lossy(&buf).contains("HTTP/1.1 200"),
        "plaintext was served"
    );

    // Rotate: a new CA and pair in the same files. Clients trusting only the new CA get through once
    // the reloader has swapped the configuration.
    let second = certs::generate(&[], &[ip], 1).expect("certs");
    certs::write(dir.path(), &second).expect("rewrite");
    let mut reloaded = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if post(port, &second.ca_cert_pem).await.is_ok() {
            reloaded = true;
            break;
        }
    }
    assert!(reloaded, "the rotated certificate was never served");
    assert!(
        post(port, &first.ca_cert_pem).await.is_err(),
        "the old CA no longer verifies"
    );

    stop.send(()).expect("server running");
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("shut down in time")
        .expect("task")
        .expect("served cleanly");
    reloader.abort();
    assert!(
        TcpStream::connect(("127.0.0.1", port)).await.is_err(),
        "port closed after shutdown"
    );
}

#[tokio::test]
async fn a_client_ca_requires_client_certificates_and_is_reloaded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let serving = certs::generate(&[], &["127.0.0.1".parse().expect("ip")], 1).expect("certs");
    let files = certs::write(dir.path(), &serving).expect("write");
    let trusted = certs::generate_client("kube-apiserver", 1).expect("client certs");
    let client_files = certs::write_client(dir.path(), &trusted).expect("write");
    let stranger = certs::generate_client("kube-apiserver", 1).expect("other client certs");

    let (state, _writers) = unsynced_state();
    let webhook = TcpListener::bind("127.0.0.1:0").expect("bind");
    let admin = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = webhook.local_addr().expect("addr").port();
    let tls_files = tls::TlsFiles::new(&files.cert, &files.key).with_client_ca(&client_files.ca_cert);
    let tls_config = RustlsConfig::from_config(tls::server_config_for(&tls_files).expect("tls"));
    let reloader = tls::spawn_files_reloader(tls_config.clone(), tls_files, Duration::from_millis(100));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(
        state,
        Listeners { webhook, admin },
        tls_config,
        async {
            let _ = stopped.await;
        },
        Duration::from_secs(5),
    ));
    let call = |client: Option<(&str, &str)>, version| {
        let connector = connector_with(&serving.ca_cert_pem, client, version);
        tokio::time::timeout(Duration::from_secs(10), post_with(port, connector))
    };
    let with = |g: &certs::Generated| (g.cert_pem.clone(), g.key_pem.clone());
    let (trusted_cert, trusted_key) = with(&trusted);
    let (stranger_cert, stranger_key) = with(&stranger);

    for version in [&rustls::version::TLS12, &rustls::version::TLS13] {
        let (status, body) = call(Some((&trusted_cert, &trusted_key)), version)
            .await
            .expect("answered in time")
            .expect("a client certificate of the client CA gets through");
        assert_eq!(status, 200, "{body}");
        // No certificate: the handshake fails (TLS 1.3 reports it at the first read), no HTTP at all.
        let error = call(None, version)
            .await
            .expect("refused in time")
            .expect_err("no client certificate, no answer");
        assert!(
            error.to_lowercase().contains("certificate") || error.contains("connection"),
            "{version:?}: {error}"
        );
        call(Some((&stranger_cert, &stranger_key)), version)
            .await
            .expect("refused in time")
            .expect_err("a certificate of another CA is refused");
    }

    // Rotate the client CA: the stranger's CA replaces the trusted one, without a restart.
    std::fs::write(&client_files.ca_cert, &stranger.ca_cert_pem).expect("rewrite the client CA");
    let mut rotated = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if let Ok(Ok((200, _))) = call(Some((&stranger_cert, &stranger_key)), &rustls::version::TLS13).await {
            rotated = true;
            break;
        }
    }
    assert!(rotated, "the new client CA was never used");
    call(Some((&trusted_cert, &trusted_key)), &rustls::version::TLS13)
        .await
        .expect("refused in time")
        .expect_err("the old client CA no longer verifies");

    stop.send(()).expect("server running");
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("shut down in time")
        .expect("task")
        .expect("served cleanly");
    reloader.abort();
}
