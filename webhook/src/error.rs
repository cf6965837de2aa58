//! Errors: why the server cannot start. Why a request is refused before any decision is the request
//! pipeline's own error, [`RequestError`] (in [`crate::admission::answer`], which returns it); it is
//! named here too, where it was first defined.

pub use crate::admission::RequestError;

/// Why the webhook cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The serving certificate or key cannot be used.
    #[error("failed to load the TLS certificate: {0}")]
    Tls(#[from] crate::tls::TlsError),
    /// No usable kubeconfig or in-cluster configuration.
    #[error("failed to load the Kubernetes client configuration: {0}")]
    KubeConfig(String),
    /// The client could not be built from the configuration.
    #[error("failed to configure the Kubernetes client: {0}")]
    Kube(#[from] kube::Error),
    /// The API server's version could not be read, or is outside the supported releases.
    #[error("kube-scheduler release: {0}")]
    Release(String),
    /// The scheduler configuration is invalid.
    #[error("failed to load the scheduler configuration: {0}")]
    SchedulerConfig(String),
    /// The explainer cannot authenticate the front proxy (no aggregation layer, or its settings
    /// cannot be read).
    #[error("explainer: {0}")]
    Explainer(#[from] crate::explainer::identity::IdentityError),
    /// A listener could not be bound or served.
    #[error("failed to serve on {address}: {source}")]
    Io {
        /// The address.
        address: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}
