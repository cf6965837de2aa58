//! Serving: the two listeners (TLS webhook port, plain-HTTP admin port), the admin router
//! (`/healthz`, `/readyz`, `/metrics`), graceful shutdown and the termination signal.
//!
//! Connections are bounded in number and in time, so that callers that open connections and then
//! stall cannot hold the webhook's memory or file descriptors (see [`ConnectionLimits`]):
//!
//! - at most `max_connections` on the webhook port (64 on the admin port); one more is closed as soon
//!   as it is accepted;
//! - the TLS handshake must finish within `tls_handshake_timeout`;
//! - HTTP/1.1 request headers must arrive within `header_read_timeout` (hyper's timer, which also
//!   closes a keep-alive connection that stays quiet that long); an HTTP/2 connection must start its
//!   first request within the same time;
//! - a request body must arrive within `body_read_timeout` of its headers (the body is wrapped: a
//!   late one ends in an error, which the handler answers with 400, and the connection is closed);
//! - a connection with no request in flight for `idle_timeout` is shut down gracefully (HTTP/2:
//!   GOAWAY), and dropped if it is still there a second later.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{Request, StatusCode, header};
use axum::routing::get;
use axum_server::tls_rustls::RustlsConfig;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::registry::Registry;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::{Instant, Sleep};
use tower::ServiceExt;

use crate::health::{self, Health, Heartbeat};
use crate::metrics;
use crate::mutate::{AppState, router};

/// Default cap of open connections on the webhook port.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// Cap of open connections on the admin port (probes and scrapes).
pub const ADMIN_MAX_CONNECTIONS: usize = 64;
/// Default time for a TLS handshake.
pub const DEFAULT_TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Default time for a request's headers (HTTP/1.1), and for an HTTP/2 connection's first request.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Default time for a request's body, from its headers.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Default time a connection may stay without a request in flight.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest timeout accepted (longer ones are cut to it: timers further out would overflow).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);
/// How long a connection that was told to close (idle, or shutdown) may linger without a request in
/// flight before it is dropped.
const CLOSE_LINGER: Duration = Duration::from_secs(1);
/// After the grace period, how long connections get to notice that they are dropped.
const ABORT_WAIT: Duration = Duration::from_secs(1);

/// How many connections, and for how long.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Open connections on the webhook port; one more is closed at accept.
    pub max_connections: usize,
    /// Time for the TLS handshake.
    pub tls_handshake_timeout: Duration,
    /// Time for a request's headers (HTTP/1.1; also how long a keep-alive connection may wait for
    /// the next request), and for an HTTP/2 connection's first request.
    pub header_read_timeout: Duration,
    /// Time for a request's body, from its headers.
    pub body_read_timeout: Duration,
    /// Time without a request in flight after which a connection is closed.
    pub idle_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            tls_handshake_timeout: DEFAULT_TLS_HANDSHAKE_TIMEOUT,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
        }
    }
}

impl ConnectionLimits {
    /// The limits with every value in range: at least one connection and at most what a semaphore
    /// holds; timeouts from 1 ms to [`MAX_TIMEOUT`].
    pub fn sanitized(&self) -> ConnectionLimits {
        let time = |d: Duration| d.clamp(Duration::from_millis(1), MAX_TIMEOUT);
        ConnectionLimits {
            max_connections: self.max_connections.clamp(1, u32::MAX as usize >> 4),
            tls_handshake_timeout: time(self.tls_handshake_timeout),
            header_read_timeout: time(self.header_read_timeout),
            body_read_timeout: time(self.body_read_timeout),
            idle_timeout: time(self.idle_timeout),
        }
    }
}

/// How to serve: the shutdown grace period, the connection limits and the health thresholds.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// After the shutdown signal, how long requests in flight may take to finish (at most
    /// [`MAX_TIMEOUT`]).
    pub grace: Duration,
    /// Connection limits.
    pub limits: ConnectionLimits,
    /// `/readyz` fails while a watch has been failing for longer than this.
    pub watch_failure_threshold: Duration,
    /// `/healthz` fails once the main runtime's heartbeat is older than this.
    pub heartbeat_timeout: Duration,
    /// `/readyz` and `/healthz` fail once an input stream has stalled for longer than this.
    pub stall_threshold: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            grace: Duration::from_secs(20),
            limits: ConnectionLimits::default(),
            watch_failure_threshold: health::DEFAULT_WATCH_FAILURE_THRESHOLD,
            heartbeat_timeout: health::DEFAULT_HEARTBEAT_TIMEOUT,
            stall_threshold: crate::watchdog::DEFAULT_STALL_THRESHOLD,
        }
    }
}

/// Connection counters of one server, rendered with `/metrics`.
#[derive(Debug)]
pub struct ConnectionStats {
    slots: Arc<Semaphore>,
    max: usize,
    rejected: AtomicU64,
    handshake_failed: AtomicU64,
    handshake_timed_out: AtomicU64,
    read_timed_out: AtomicU64,
    idle_closed: AtomicU64,
    last_rejection_log: Mutex<Option<Instant>>,
}

impl ConnectionStats {
    fn new(slots: Arc<Semaphore>, max: usize) -> Self {
        ConnectionStats {
            slots,
            max,
            rejected: AtomicU64::new(0),
            handshake_failed: AtomicU64::new(0),
            handshake_timed_out: AtomicU64::new(0),
            read_timed_out: AtomicU64::new(0),
            idle_closed: AtomicU64::new(0),
            last_rejection_log: Mutex::new(None),
        }
    }

    /// Connections open on the webhook port.
    pub fn open(&self) -> usize {
        self.max.saturating_sub(self.slots.available_permits())
    }

    /// Connections closed at accept because the cap was reached.
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    fn reject(&self) {
        let total = self.rejected.fetch_add(1, Ordering::Relaxed) + 1;
        let mut last = self
            .last_rejection_log
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if last.is_none_or(|at| at.elapsed() >= Duration::from_secs(10)) {
            *last = Some(Instant::now());
            tracing::warn!(
                max_connections = self.max,
                rejected_total = total,
                "connection cap reached: new connections are closed at accept"
            );
        }
    }

    /// Adds the connection counters to `registry`, read at each encoding.
    pub fn register(self: &Arc<Self>, registry: &mut Registry) {
        registry.register_collector(Box::new(self.clone()));
    }
}

impl Collector for ConnectionStats {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        metrics::gauge(
            &mut encoder,
            "sched_webhook_connections_open",
            "Connections open on the webhook port.",
            self.open() as u64,
        )?;
        metrics::counter(
            &mut encoder,
            "sched_webhook_connections_rejected",
            "Connections closed at accept because --max-connections were open.",
            self.rejected(),
        )?;
        let mut closed = metrics::family(
            &mut encoder,
            "sched_webhook_connections_closed",
            "Webhook connections closed by the server, by reason.",
            MetricType::Counter,
        )?;
        for (reason, counter) in [
            ("tls_handshake_failed", &self.handshake_failed),
            ("tls_handshake_timeout", &self.handshake_timed_out),
            ("read_timeout", &self.read_timed_out),
            ("idle", &self.idle_closed),
        ] {
            ConstCounter::new(counter.load(Ordering::Relaxed))
                .encode(closed.encode_family(&[("reason", reason)])?)?;
        }
        Ok(())
    }
}

/// The admin router: liveness, readiness (caches synced, no watch failing for longer than the
/// default threshold) and metrics.
pub fn admin_router(state: Arc<AppState>) -> Router {
    let health = Health::of(&state.cache);
    admin_router_with(state, health, None)
}

/// The admin router answering from `health`: `/healthz` fails when the heartbeat is stale, `/readyz`
/// when the caches have not synced or a watch is failing; both say why.
pub fn admin_router_with(
    state: Arc<AppState>,
    health: Health,
    connections: Option<Arc<ConnectionStats>>,
) -> Router {
    let (live, ready) = (health.clone(), health.clone());
    Router::new()
        .route(
            "/healthz",
            get(move || async move {
                match live.live() {
                    Ok(()) => (StatusCode::OK, "ok".to_string()),
                    Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
                }
            }),
        )
        .route(
            "/readyz",
            get(move |State(s): State<Arc<AppState>>| async move {
                match ready.ready(s.cache.is_ready()) {
                    Ok(()) => (StatusCode::OK, "ok".to_string()),
                    Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
                }
            }),
        )
        .route(
            "/metrics",
            get(move |State(s): State<Arc<AppState>>| async move {
                let mut registry = Registry::default();
                s.metrics.register(&mut registry, s.cache.is_ready());
                health.register(&mut registry);
                if let Some(connections) = &connections {
                    connections.register(&mut registry);
                }
                (
                    [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
                    metrics::exposition(&registry),
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

/// Serves both ports with the default [`ConnectionLimits`] until `shutdown` resolves, then stops
/// accepting and lets in-flight requests finish (for at most `grace`).
pub async fn serve(
    state: Arc<AppState>,
    listeners: Listeners,
    tls: RustlsConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    let options = ServeOptions {
        grace,
        ..ServeOptions::default()
    };
    serve_with(state, listeners, tls, shutdown, options).await
}

/// Where the server is in its life; connections watch it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    Serving,
    /// Finish what is in flight, take no new requests.
    Draining,
    /// Drop every connection now.
    Aborting,
}

/// Serves both ports until `shutdown` resolves, then stops accepting and lets in-flight requests
/// finish (for at most `options.grace`); connections are bounded by `options.limits`. The TLS
/// configuration is read from `tls` at every handshake, so a reload applies to new connections.
///
/// The webhook port runs on the caller's runtime, where a heartbeat task ticks too; the admin port
/// runs on a thread and runtime of its own, so that `/healthz` can still answer (503) when the
/// caller's runtime is wedged.
pub async fn serve_with(
    state: Arc<AppState>,
    listeners: Listeners,
    tls: RustlsConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
    options: ServeOptions,
) -> std::io::Result<()> {
    let limits = options.limits.sanitized();
    let grace = options.grace.min(MAX_TIMEOUT);
    for l in [&listeners.webhook, &listeners.admin] {
        l.set_nonblocking(true)?;
    }
    let webhook_listener = TcpListener::from_std(listeners.webhook)?;
    let (phase, phase_rx) = watch::channel(Phase::Serving);
    let webhook_slots = Arc::new(Semaphore::new(limits.max_connections));
    let stats = Arc::new(ConnectionStats::new(
        webhook_slots.clone(),
        limits.max_connections,
    ));
    let heartbeat = Heartbeat::new();
    heartbeat.beat();
    let beating = AbortOnDrop(heartbeat.spawn());
    let health = Health {
        heartbeat: Some(heartbeat),
        heartbeat_timeout: options.heartbeat_timeout,
        watch_failure_threshold: options.watch_failure_threshold,
        stall_threshold: options.stall_threshold,
        ..Health::of(&state.cache)
    };
    let admin_running = spawn_admin(
        listeners.admin,
        admin_router_with(state.clone(), health, Some(stats.clone())),
        limits.clone(),
        phase_rx.clone(),
    )?;
    let app = router(state);
    let webhook_loop = accept_loop(webhook_listener, webhook_slots.clone(), stats.clone(), {
        let (limits, phase) = (limits.clone(), phase_rx);
        move |tcp, permit| {
            let connection = Connection {
                app: app.clone(),
                limits: limits.clone(),
                phase: phase.clone(),
                stats: stats.clone(),
                _permit: permit,
            };
            connection.serve_tls(tcp, tls.clone())
        }
    });
    tokio::select! {
        _ = webhook_loop => {}
        _ = shutdown => {}
    }
    // The listener is dropped with the loop: new connections are refused from here on.
    tracing::info!("shutting down: finishing in-flight requests");
    let _ = phase.send(Phase::Draining);
    let all_closed = || async {
        let _webhook = webhook_slots.acquire_many(limits.max_connections as u32).await;
        let _admin = admin_running.acquire().await;
    };
    if tokio::time::timeout(grace, all_closed()).await.is_err() {
        tracing::warn!(grace = ?grace, "grace period over: dropping the connections still open");
        let _ = phase.send(Phase::Aborting);
        let _ = tokio::time::timeout(ABORT_WAIT, all_closed()).await;
    }
    drop(beating);
    Ok(())
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Serves the admin port on a thread with a runtime of its own until the phase leaves `Serving` and
/// its connections have ended (or the phase is `Aborting`). The returned semaphore's one permit is
/// held by that thread until then.
fn spawn_admin(
    listener: std::net::TcpListener,
    app: Router,
    limits: ConnectionLimits,
    phase: watch::Receiver<Phase>,
) -> std::io::Result<Arc<Semaphore>> {
    let running = Arc::new(Semaphore::new(1));
    let done = running
        .clone()
        .try_acquire_owned()
        .map_err(std::io::Error::other)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("sched-webhook-admin".into())
        .spawn(move || {
            runtime.block_on(async move {
                let listener = match TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot serve the admin port");
                        return;
                    }
                };
                let slots = Arc::new(Semaphore::new(ADMIN_MAX_CONNECTIONS));
                let stats = Arc::new(ConnectionStats::new(slots.clone(), ADMIN_MAX_CONNECTIONS));
                let serve = accept_loop(listener, slots.clone(), stats.clone(), {
                    let phase = phase.clone();
                    move |tcp, permit| {
                        let connection = Connection {
                            app: app.clone(),
                            limits: limits.clone(),
                            phase: phase.clone(),
                            stats: stats.clone(),
                            _permit: permit,
                        };
                        connection.serve_plain(tcp)
                    }
                });
                let mut phase = phase;
                tokio::select! {
                    _ = serve => {}
                    _ = phase.wait_for(|p| *p != Phase::Serving) => {}
                }
                tokio::select! {
                    _ = slots.acquire_many(ADMIN_MAX_CONNECTIONS as u32) => {}
                    _ = phase.wait_for(|p| *p == Phase::Aborting) => {}
                }
            });
            drop(done);
        })?;
    Ok(running)
}

/// Accepts connections until the phase leaves `Serving`; each gets a slot of `slots` or is closed.
async fn accept_loop<F, Fut>(
    listener: TcpListener,
    slots: Arc<Semaphore>,
    stats: Arc<ConnectionStats>,
    serve: F,
) where
    F: Fn(TcpStream, OwnedSemaphorePermit) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut last_error_log: Option<Instant> = None;
    loop {
        match listener.accept().await {
            Ok((tcp, _)) => match slots.clone().try_acquire_owned() {
                Ok(permit) => {
                    let _ = tcp.set_nodelay(true);
                    tokio::spawn(serve(tcp, permit));
                }
                Err(_) => {
                    stats.reject();
                    drop(tcp);
                }
            },
            // Out of file descriptors and the like: wait rather than spin.
            Err(e) => {
                if last_error_log.is_none_or(|at| at.elapsed() >= Duration::from_secs(10)) {
                    last_error_log = Some(Instant::now());
                    tracing::warn!(error = %e, "failed to accept a connection");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// One accepted connection and what it needs.
struct Connection {
    app: Router,
    limits: ConnectionLimits,
    phase: watch::Receiver<Phase>,
    stats: Arc<ConnectionStats>,
    _permit: OwnedSemaphorePermit,
}

impl Connection {
    async fn serve_tls(self, tcp: TcpStream, tls: RustlsConfig) {
        let acceptor = tokio_rustls::TlsAcceptor::from(tls.get_inner());
        let stream = match tokio::time::timeout(self.limits.tls_handshake_timeout, acceptor.accept(tcp)).await
        {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => {
                self.stats.handshake_failed.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(error = %e, "TLS handshake failed");
                return;
            }
            Err(_) => {
                self.stats.handshake_timed_out.fetch_add(1, Ordering::Relaxed);
                tracing::debug!("TLS handshake timed out");
                return;
            }
        };
        let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
        self.serve_http(TokioIo::new(stream), h2).await;
    }

    async fn serve_plain(self, tcp: TcpStream) {
        self.serve_http(TokioIo::new(tcp), false).await;
    }

    async fn serve_http<I>(self, io: I, h2: bool)
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let activity = Arc::new(Activity::new());
        let service = {
            let (app, activity, body_timeout) =
                (self.app.clone(), activity.clone(), self.limits.body_read_timeout);
            hyper::service::service_fn(move |request: Request<Incoming>| {
                let (app, activity) = (app.clone(), activity.clone());
                async move {
                    let _in_flight = activity.begin();
                    let request = request.map(|body| Body::new(TimedBody::new(body, body_timeout)));
                    app.oneshot(request).await
                }
            })
        };
        if h2 {
            let connection = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .serve_connection(io, service);
            self.drive(connection, activity).await;
        } else {
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(self.limits.header_read_timeout)
                .serve_connection(io, service);
            self.drive(connection, activity).await;
        }
    }

    /// How long `activity` may stay without a request in flight: a connection told to close lingers
    /// [`CLOSE_LINGER`]; one that has asked nothing yet has as long as for one request's headers.
    fn idle_limit(&self, activity: &Activity, closing: bool) -> Duration {
        if closing {
            CLOSE_LINGER
        } else if activity.served() {
            self.limits.idle_timeout
        } else {
            self.limits.header_read_timeout
        }
    }

    /// Runs `connection` until it ends, is idle too long, or the server shuts down.
    async fn drive<C: GracefulConnection>(mut self, connection: C, activity: Arc<Activity>) {
        tokio::pin!(connection);
        let mut closing = false;
        loop {
            let phase = *self.phase.borrow_and_update();
            if phase == Phase::Aborting {
                return;
            }
            if phase == Phase::Draining && !closing {
                connection.as_mut().shut_down();
                activity.touch();
                closing = true;
                continue;
            }
            let deadline = activity.idle_deadline(self.idle_limit(&activity, closing));
            tokio::select! {
                result = &mut connection => {
                    if let Err(e) = result {
                        if e.is_timeout() {
                            self.stats.read_timed_out.fetch_add(1, Ordering::Relaxed);
                        }
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    return;
                }
                changed = self.phase.changed() => {
                    // The server is gone without saying so: nothing will drain this connection.
                    if changed.is_err() {
                        return;
                    }
                }
                _ = tokio::time::sleep_until(deadline) => {
                    if !activity.is_idle_for(self.idle_limit(&activity, closing)) {
                        continue;
                    }
                    // Told to close and still there without a request: drop it.
                    if closing {
                        return;
                    }
                    let counter = if activity.served() {
                        &self.stats.idle_closed
                    } else {
                        &self.stats.read_timed_out
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                    connection.as_mut().shut_down();
                    activity.touch();
                    closing = true;
                }
            }
        }
    }
}

/// hyper's HTTP/1 and HTTP/2 server connections, shut down the same way.
trait GracefulConnection: Future<Output = Result<(), hyper::Error>> {
    fn shut_down(self: Pin<&mut Self>);
}

impl<I, S> GracefulConnection for hyper::server::conn::http1::Connection<I, S>
where
    S: hyper::service::HttpService<Incoming>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    S::ResBody: http_body::Body + 'static,
    <S::ResBody as http_body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn shut_down(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

impl<I, S, E> GracefulConnection for hyper::server::conn::http2::Connection<I, S, E>
where
    S: hyper::service::HttpService<Incoming>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    S::ResBody: http_body::Body + 'static,
    <S::ResBody as http_body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    E: hyper::rt::bounds::Http2ServerConnExec<S::Future, S::ResBody>,
{
    fn shut_down(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

/// Requests in flight on one connection, and when the last one began or ended.
#[derive(Debug)]
struct Activity {
    state: Mutex<ActivityState>,
}

#[derive(Debug)]
struct ActivityState {
    in_flight: usize,
    served: bool,
    since: Instant,
}

impl Activity {
    fn new() -> Self {
        Activity {
            state: Mutex::new(ActivityState {
                in_flight: 0,
                served: false,
                since: Instant::now(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ActivityState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn begin(self: &Arc<Self>) -> InFlight {
        let mut state = self.lock();
        state.in_flight += 1;
        state.served = true;
        state.since = Instant::now();
        InFlight(self.clone())
    }

    /// Counts now as activity: the linger of a connection told to close starts here.
    fn touch(&self) {
        self.lock().since = Instant::now();
    }

    fn served(&self) -> bool {
        self.lock().served
    }

    /// When the connection will have been idle for `limit` if nothing happens (with a request in
    /// flight: `limit` from now, to look again).
    fn idle_deadline(&self, limit: Duration) -> Instant {
        let state = self.lock();
        let from = if state.in_flight > 0 {
            Instant::now()
        } else {
            state.since
        };
        from.checked_add(limit)
            .unwrap_or_else(|| Instant::now() + MAX_TIMEOUT)
    }

    fn is_idle_for(&self, limit: Duration) -> bool {
        let state = self.lock();
        state.in_flight == 0 && state.since.elapsed() >= limit
    }
}

/// A request in flight; its end counts as activity.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.in_flight = state.in_flight.saturating_sub(1);
        state.since = Instant::now();
    }
}

/// The request body did not arrive in time.
#[derive(Debug, thiserror::Error)]
#[error("request body not received within {0:?}")]
pub struct BodyReadTimeout(Duration);

/// A request body that fails with [`BodyReadTimeout`] once `timeout` has passed since the request's
/// headers arrived.
struct TimedBody {
    inner: Incoming,
    deadline: Pin<Box<Sleep>>,
    timeout: Duration,
}

impl TimedBody {
    fn new(inner: Incoming, timeout: Duration) -> Self {
        TimedBody {
            inner,
            deadline: Box::pin(tokio::time::sleep(timeout)),
            timeout,
        }
    }
}

impl http_body::Body for TimedBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => Poll::Ready(frame.map(|f| f.map_err(Into::into))),
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(BodyReadTimeout(this.timeout).into()))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
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
