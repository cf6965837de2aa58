//! Errors: why a request is refused before any decision (answered with a 4xx and a JSON body naming the
//! problem), and why the server cannot start.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::admission::ReviewError;

/// A request the webhook cannot decide on.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The Content-Type is not JSON.
    #[error("unsupported content type {0:?}: send application/json")]
    UnsupportedMediaType(String),
    /// The body exceeds the limit.
    #[error("request body larger than {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// The body could not be read.
    #[error("failed to read the request body: {0}")]
    Body(String),
    /// Not a usable AdmissionReview.
    #[error(transparent)]
    Review(#[from] ReviewError),
    /// The review's object does not match its resource.
    #[error("malformed {what}: {message}")]
    Object {
        /// What was expected ("pod", "binding").
        what: &'static str,
        /// The decoder's message.
        message: String,
    },
}

impl RequestError {
    /// The HTTP status answered.
    pub fn status(&self) -> StatusCode {
        match self {
            RequestError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            RequestError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            RequestError::Body(_) | RequestError::Review(_) | RequestError::Object { .. } => {
                StatusCode::BAD_REQUEST
            }
        }
    }
}

impl IntoResponse for RequestError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.to_string() });
        (self.status(), axum::Json(body)).into_response()
    }
}

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
    /// The scheduler configuration is invalid.
    #[error("failed to load the scheduler configuration: {0}")]
    SchedulerConfig(String),
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
