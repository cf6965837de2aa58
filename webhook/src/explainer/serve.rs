//! The explainer's two ports: the API port (TLS; only the front proxy's client certificate, which the
//! requestheader client CA signed, completes the handshake; HTTP/1.1) and the admin port (plain HTTP:
//! `/healthz`, `/readyz` for the kubelet's probes). Connections are bounded in number and in time as
//! on the webhook port: at most `max_connections`, the TLS handshake within
//! [`HANDSHAKE_TIMEOUT`], a request's headers within [`HEADER_READ_TIMEOUT`].

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::routing::get;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::ServiceExt;

use super::api::{ExplainerState, ProxyName, router};

/// Time for a caller's TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Time for a request's headers, and for a keep-alive connection's next request.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Open connections on the API port by default (the API server pools its connections).
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;

/// The common name of a DER certificate's subject, if it has one.
fn common_name(der: &[u8]) -> Option<String> {
    let (_, certificate) = x509_parser::parse_x509_certificate(der).ok()?;
    let name = certificate
        .subject()
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_string();
    Some(name)
}

/// Serves the API port on `listener` until the task is dropped.
pub async fn serve_api(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    state: Arc<ExplainerState>,
    max_connections: usize,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let slots = Arc::new(Semaphore::new(max_connections.max(1)));
    let app = router(state);
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        // One more than the bound is closed at once.
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            drop(tcp);
            continue;
        };
        let (acceptor, app) = (acceptor.clone(), app.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "explainer: TLS handshake refused");
                    return;
                }
                Err(_) => return,
            };
            let proxy = ProxyName(
                stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|chain| chain.first())
                    .and_then(|leaf| common_name(leaf.as_ref())),
            );
            let app = app.layer(axum::Extension(proxy));
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                app.clone().oneshot(request.map(Body::new))
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "explainer: connection ended");
            }
        });
    }
}

/// The admin port's router: `/healthz` (the process answers), `/readyz` (the snapshot follows the
/// cluster: nodes and pods listed and watched now). `start` merges the pending-reason metrics'
/// `/metrics` in ([`super::pending::router`]).
pub fn admin_router(state: Arc<ExplainerState>) -> Router {
    Router::new().route("/healthz", get(|| async { "ok" })).route(
        "/readyz",
        get(move || {
            let ready = state.live.is_ready();
            async move {
                if ready {
                    (StatusCode::OK, "ok")
                } else {
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "the snapshot is not following the cluster: a required watch is (re-)listing or failing",
                    )
                }
            }
        }),
    )
}

/// Serves the admin port on `listener` until the task is dropped.
pub async fn serve_admin(listener: TcpListener, app: Router) {
    if let Err(e) = axum::serve(listener, app).await {
        tracing::error!(error = %e, "explainer: the admin port stopped");
    }
}
