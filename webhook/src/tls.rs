//! TLS for the webhook port: rustls with TLS 1.3 and 1.2 only (rustls implements nothing older), the
//! serving certificate and key read from PEM files, and reloaded when those files change (cert-manager
//! and kubelet secret volumes replace them in place). A bad new pair is logged and the old one kept.
//!
//! With a client CA (`--client-ca-file`) every caller must present a certificate that CA signed
//! (rustls' WebPKI client verifier): a caller without one fails the TLS handshake and never reaches
//! HTTP. The CA file is reloaded with the pair.

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
    /// The client CA file holds no usable CA certificate.
    #[error("failed to read the client CA from {path}: {message}")]
    ClientCa {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// rustls refused the pair (e.g. the key does not match the certificate).
    #[error("failed to build the TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// The files the webhook port's TLS is made of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// Serving certificate chain (PEM).
    pub cert: PathBuf,
    /// Serving key (PEM).
    pub key: PathBuf,
    /// CA bundle (PEM) that callers' client certificates must chain to; `None`: no client
    /// certificate is asked for.
    pub client_ca: Option<PathBuf>,
}

impl TlsFiles {
    /// A serving pair without client authentication.
    pub fn new(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        TlsFiles {
            cert: cert.into(),
            key: key.into(),
            client_ca: None,
        }
    }

    /// Requires client certificates signed by the CA(s) in `client_ca`.
    pub fn with_client_ca(mut self, client_ca: impl Into<PathBuf>) -> Self {
        self.client_ca = Some(client_ca.into());
        self
    }
}

fn client_verifier(
    path: &Path,
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, TlsError> {
    let error = |message: String| TlsError::ClientCa {
        path: path.to_path_buf(),
        message,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| error(e.to_string()))?;
    if certs.is_empty() {
        return Err(error("no CERTIFICATE block".into()));
    }
    let mut roots = rustls::RootCertStore::empty();
    for cert in certs {
        roots.add(cert).map_err(|e| error(e.to_string()))?;
    }
    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| error(e.to_string()))
}

/// A rustls server configuration for the pair, offering HTTP/2 and HTTP/1.1, without client
/// authentication.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    server_config_for(&TlsFiles::new(cert, key))
}

/// A rustls server configuration from `files`, offering HTTP/2 and HTTP/1.1; with a client CA,
/// callers without a certificate it signed fail the handshake.
pub fn server_config_for(files: &TlsFiles) -> Result<Arc<ServerConfig>, TlsError> {
    let (cert, key) = (files.cert.as_path(), files.key.as_path());
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
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?;
    let builder = match &files.client_ca {
        Some(path) => builder.with_client_cert_verifier(client_verifier(path, provider)?),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(certs, key_der)?;
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
    spawn_files_reloader(config, TlsFiles::new(cert, key), interval)
}

/// The shortest reload interval (a zero interval would make `tokio::time::interval` panic).
pub const MIN_RELOAD_INTERVAL: Duration = Duration::from_millis(10);

/// Polls the modification time and size of `files` (the client CA included) every `interval`
/// (at least [`MIN_RELOAD_INTERVAL`]) and swaps the served configuration when one changed and the
/// new set loads.
pub fn spawn_files_reloader(config: RustlsConfig, files: TlsFiles, interval: Duration) -> JoinHandle<()> {
    let interval = interval.max(MIN_RELOAD_INTERVAL);
    tokio::spawn(async move {
        let stamps = |files: &TlsFiles| {
            (
                stamp(&files.cert),
                stamp(&files.key),
                files.client_ca.as_deref().map(stamp),
            )
        };
        let mut seen = stamps(&files);
        let mut reported = None;
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let now = stamps(&files);
            if now == seen {
                continue;
            }
            match server_config_for(&files) {
                Ok(new) => {
                    config.reload_from_config(new);
                    seen = now;
                    tracing::info!(
                        cert = %files.cert.display(),
                        client_ca = files.client_ca.as_ref().map(|p| p.display().to_string()),
                        "reloaded the serving certificate"
                    );
                }
                // Files are often replaced one after the other: keep serving the old set and try again
                // at the next tick (`seen` is not updated).
                Err(e) => {
                    if reported.as_ref() != Some(&now) {
                        tracing::warn!(error = %e, "changed certificate files not loaded; still serving the previous ones");
                        reported = Some(now);
                    }
                }
            }
        }
    })
}
