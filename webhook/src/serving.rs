//! Serving: the two listeners (TLS webhook port, plain-HTTP admin port), the admin router
//! (`/healthz`, `/readyz`, `/metrics`), graceful shutdown and the termination signal.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::routing::get;
use axum_server::tls_rustls::RustlsConfig;

use crate::server::{AppState, router};

/// The admin router: liveness, readiness (caches synced) and metrics.
pub fn admin_router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(|State(s): State<Arc<AppState>>| async move {
                if s.cache.is_ready() {
                    (StatusCode::OK, "ok")
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, "reflector caches not synced")
                }
            }),
        )
        .route(
            "/metrics",
            get(|State(s): State<Arc<AppState>>| async move {
                (
                    [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                    s.metrics.render(s.cache.is_ready()),
                )
            }),
        )
        .with_state(state)
}

/// Where and how to serve.
#[derive(Debug)]
pub struct Listeners {
    /// The webhook port (TLS).
    pub webhook: std::net::TcpListener,
    /// The admin port (plain HTTP).
    pub admin: std::net::TcpListener,
}

/// Serves both ports until `shutdown` resolves, then stops accepting and lets in-flight requests finish
/// (for at most `grace`).
pub async fn serve(
    state: Arc<AppState>,
    listeners: Listeners,
    tls: RustlsConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    let webhook_handle = axum_server::Handle::new();
    let admin_handle = axum_server::Handle::new();
    for l in [&listeners.webhook, &listeners.admin] {
        l.set_nonblocking(true)?;
    }
    let webhook = axum_server::from_tcp_rustls(listeners.webhook, tls)?
        .handle(webhook_handle.clone())
        .serve(router(state.clone()).into_make_service());
    let admin = axum_server::from_tcp(listeners.admin)?
        .handle(admin_handle.clone())
        .serve(admin_router(state).into_make_service());
    tokio::spawn(async move {
        shutdown.await;
        tracing::info!("shutting down: finishing in-flight requests");
        webhook_handle.graceful_shutdown(Some(grace));
        admin_handle.graceful_shutdown(Some(grace));
    });
    let (w, a) = tokio::join!(webhook, admin);
    w.and(a)
}

/// Resolves on SIGTERM or SIGINT.
pub async fn termination_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = term => {},
        _ = tokio::signal::ctrl_c() => {},
    }
}
