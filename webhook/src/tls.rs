//! TLS for the webhook port: rustls with TLS 1.3 and 1.2 only (rustls implements nothing older), the
//! serving certificate and key read from PEM files, and reloaded when those files change (cert-manager
//! and kubelet secret volumes replace them in place). A bad new pair is logged and the old one kept.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum_server::tls_rustls::RustlsConfig;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::task::JoinHandle;

/// Why a certificate/key pair cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate file holds no usable PEM certificate.
    #[error("failed to read certificates from {path}: {message}")]
    Certificate {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The key file holds no usable PEM private key.
    #[error("failed to read the private key from {path}: {message}")]
    Key {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// rustls refused the pair (e.g. the key does not match the certificate).
    #[error("failed to build the TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// A rustls server configuration for the pair, offering HTTP/2 and HTTP/1.1.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| TlsError::Certificate {
            path: cert.to_path_buf(),
            message: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Certificate {
            path: cert.to_path_buf(),
            message: "no CERTIFICATE block".into(),
        });
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::Key {
        path: key.to_path_buf(),
        message: e.to_string(),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

/// Polls the files' modification time and size every `interval` and swaps the served configuration
/// when either file changed and the new pair loads.
pub fn spawn_reloader(
    config: RustlsConfig,
    cert: PathBuf,
    key: PathBuf,
    interval: Duration,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut seen = (stamp(&cert), stamp(&key));
        let mut reported = None;
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let now = (stamp(&cert), stamp(&key));
            if now == seen {
                continue;
            }
            match server_config(&cert, &key) {
                Ok(new) => {
                    config.reload_from_config(new);
                    seen = now;
                    tracing::info!(cert = %cert.display(), "reloaded the serving certificate");
                }
                // Files are often replaced one after the other: keep serving the old pair and try again
                // at the next tick (`seen` is not updated).
                Err(e) => {
                    if reported.as_ref() != Some(&now) {
                        tracing::warn!(error = %e, "changed certificate files not loaded; still serving the previous pair");
                        reported = Some(now);
                    }
                }
            }
        }
    })
}
