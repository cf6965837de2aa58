//! The two commands, wired from their arguments: `serve` (client, caches, TLS, both ports, signals)
//! and `certs`.

use std::sync::Arc;

use axum_server::tls_rustls::RustlsConfig;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

use sched_core::Engine;
use sched_core::engine::SchedulerConfig;
use sched_core::features::{FeatureGates, KubeVersion};

use crate::cache::Cache;
use crate::certs::{self, Target};
use crate::config::{CertsArgs, ExplainerArgs, ReloadInterval, ServeArgs};
use crate::controller::stored_pod::Scope;
use crate::controller::{self, ControllerConfig};
use crate::error::StartError;
use crate::server::{AppState, Limits};
use crate::serving::{self, Listeners};
use crate::tls;

/// The client configuration from `--kubeconfig`, else kube's inference ($KUBECONFIG, ~/.kube/config,
/// then in-cluster).
async fn client_config(kubeconfig: Option<&std::path::Path>) -> Result<kube::Config, StartError> {
    match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path).map_err(|e| StartError::KubeConfig(e.to_string()))?;
            kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(|e| StartError::KubeConfig(e.to_string()))
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| StartError::KubeConfig(e.to_string())),
    }
}

/// The client of the watches: no read timeout (a quiet watch is not a hung one; kube's watcher has
/// its own idle timeout).
pub async fn client(kubeconfig: Option<&std::path::Path>) -> Result<Client, StartError> {
    Ok(Client::try_from(client_config(kubeconfig).await?)?)
}

/// The clients a replica talks to the API server with. Each has its own connection pool, so that one
/// kind of traffic never waits behind another's.
#[derive(Clone)]
pub struct ReplicaClients {
    /// The caches' lists and watches.
    pub watch: Client,
    /// The writes (PV pre-binding, nominations), including those made while the API server waits
    /// for an admission answer.
    pub write: Client,
    /// The controller's Lease (acquire, renew, release).
    pub lease: Client,
}

impl ReplicaClients {
    /// The clients `serve` uses, from one configuration: writes and the Lease get read and write
    /// timeouts, because a write that hangs must not outlive the webhook timeout
    /// (`timeoutSeconds: 5`) and a renewal that hangs must not outlive the Lease. Their read timeout
    /// counts from the request's last write, not from when its pooled connection went idle (kube's
    /// default would fail the first write after a quiet spell).
    async fn from_kubeconfig(kubeconfig: Option<&std::path::Path>) -> Result<Self, StartError> {
        let mut config = client_config(kubeconfig).await?;
        let watch = Client::try_from(config.clone())?;
        config.read_timeout = Some(WRITE_TIMEOUT);
        config.write_timeout = Some(WRITE_TIMEOUT);
        config.reset_reader_on_write = true;
        Ok(ReplicaClients {
            watch,
            write: Client::try_from(config.clone())?,
            lease: Client::try_from(config)?,
        })
    }

    /// One client for everything (tests against a real API server that need nothing else).
    pub fn shared(client: &Client) -> Self {
        ReplicaClients {
            watch: client.clone(),
            write: client.clone(),
            lease: client.clone(),
        }
    }
}

/// The read and write timeouts of the write and Lease clients (see [`ReplicaClients`]).
const WRITE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

fn bind(address: std::net::SocketAddr) -> Result<std::net::TcpListener, StartError> {
    std::net::TcpListener::bind(address).map_err(|source| StartError::Io {
        address: address.to_string(),
        source,
    })
}

/// The release of the API server `client` talks to (`GET /version`), which the webhook's engine
/// follows: its kube-scheduler is the one whose decisions the webhook must agree with.
pub async fn server_release(client: &Client) -> Result<KubeVersion, StartError> {
    let info = client
        .apiserver_version()
        .await
        .map_err(|e| StartError::Release(format!("reading the API server's version: {e}")))?;
    let version = KubeVersion::from_server(&info.git_version, &info.major, &info.minor).ok_or_else(|| {
        StartError::Release(format!(
            "the API server's version {:?} names no Kubernetes release",
            info.git_version
        ))
    })?;
    version
        .supported(&format!("the API server is {}", info.git_version))
        .map_err(|e| StartError::Release(e.to_string()))
}

/// The engine for `version`'s kube-scheduler with the configuration at `path` (default: that
/// release's default profile).
pub fn engine_for(version: KubeVersion, path: Option<&std::path::Path>) -> Result<Engine, StartError> {
    Engine::for_features(path, FeatureGates::for_version(version))
        .map_err(|e| StartError::SchedulerConfig(e.to_string()))
}

/// `serve`: runs until SIGTERM/SIGINT, then drains.
pub async fn serve(args: ServeArgs) -> Result<(), StartError> {
    // The configuration is checked before anything is contacted; the release's engine is built once
    // the API server has said which release it is.
    engine_for(KubeVersion::PINNED, args.scheduler_config.as_deref())?;
    let tls_files = tls::TlsFiles {
        cert: args.tls_cert.clone(),
        key: args.tls_key.clone(),
        client_ca: args.client_ca_file.clone(),
    };
    let tls_config = RustlsConfig::from_config(tls::server_config_for(&tls_files)?);
    let clients = ReplicaClients::from_kubeconfig(args.kubeconfig.as_deref()).await?;
    let version = server_release(&clients.watch).await?;
    let engine = engine_for(version, args.scheduler_config.as_deref())?;
    tracing::info!(release = %version, "evaluating with the API server's kube-scheduler release");
    let limits = Limits {
        max_decisions: args.max_decisions,
        max_decision_bytes: args.max_decision_bytes,
        max_claims: args.max_claims,
        max_body_bytes: args.max_body_bytes,
    };
    let controller_config = ControllerConfig {
        lease_name: args.lease_name.clone(),
        lease_namespace: args.lease_namespace.clone(),
        identity: args.identity.clone().unwrap_or_else(default_identity),
        lease_seconds: args.lease_duration.as_secs(),
        scope: Scope {
            namespaces: sched_core::labels::Selector::from_label_selector(Some(&args.namespace_selector))
                .map_err(|e| StartError::SchedulerConfig(format!("--namespace-selector: {e}")))?,
            max_claims: args.max_claims,
            binding_window: controller::DEFAULT_BINDING_WINDOW,
        },
        plan_budget: controller::DEFAULT_PLAN_BUDGET,
        concurrency: controller::DEFAULT_CONCURRENCY,
    };
    let replica = Replica::start_with(clients, engine, limits, controller_config);
    let state = replica.state.clone();
    let stopped = replica.stopped();
    let stop = replica.stop.clone();
    tokio::spawn(async move {
        serving::termination_signal().await;
        let _ = stop.send(true);
    });
    let _reloader = match args.cert_reload_interval {
        ReloadInterval::Every(interval) => {
            Some(tls::spawn_files_reloader(tls_config.clone(), tls_files, interval))
        }
        ReloadInterval::Never => {
            tracing::info!("--cert-reload-interval never: the certificate files are read once");
            None
        }
    };
    let listeners = Listeners {
        webhook: bind(args.listen)?,
        admin: bind(args.admin_listen)?,
    };
    tracing::info!(webhook = %args.listen, admin = %args.admin_listen, "serving");
    let options = serving::ServeOptions {
        grace: args.shutdown_grace,
        limits: serving::ConnectionLimits {
            max_connections: args.max_connections,
            tls_handshake_timeout: args.tls_handshake_timeout,
            header_read_timeout: args.header_read_timeout,
            body_read_timeout: args.body_read_timeout,
            idle_timeout: args.idle_timeout,
        },
        watch_failure_threshold: args.watch_failure_threshold,
        heartbeat_timeout: args.heartbeat_timeout,
        stall_threshold: args.stall_threshold,
    };
    let served = serving::serve_with(state, listeners, tls_config, stopped, options)
        .await
        .map_err(|source| StartError::Io {
            address: args.listen.to_string(),
            source,
        });
    replica.stop().await;
    served
}

/// One replica's moving parts: the caches (started), the request state, and the controller (running
/// on the caller's runtime until [`Replica::stop`]). `sched-webhook serve` and the e2e tests start
/// replicas this way.
pub struct Replica {
    /// What requests share (serve it with [`serving::serve`]).
    pub state: Arc<AppState>,
    stop: tokio::sync::watch::Sender<bool>,
    controller: tokio::task::JoinHandle<()>,
    _reflectors: Vec<tokio::task::JoinHandle<()>>,
}

impl Replica {
    /// Starts the caches and the controller on `clients`, with the pinned release's engine and
    /// `scheduler`.
    pub fn start(
        clients: ReplicaClients,
        scheduler: SchedulerConfig,
        limits: Limits,
        controller_config: ControllerConfig,
    ) -> Self {
        let engine = Engine::with_config(scheduler, "the scheduler configuration");
        Replica::start_with(clients, engine, limits, controller_config)
    }

    /// Starts the caches and the controller on `clients`, evaluating with `engine` (see
    /// [`engine_for`]).
    pub fn start_with(
        clients: ReplicaClients,
        engine: Engine,
        limits: Limits,
        controller_config: ControllerConfig,
    ) -> Self {
        let (cache, writers) = Cache::with_engine(engine);
        let reflectors = cache.start(&clients.watch, writers);
        let state = Arc::new(AppState::with_limits(
            cache.clone(),
            clients.write.clone(),
            limits,
        ));
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let context = Arc::new(controller::Context::new(
            cache,
            clients.write,
            state.metrics.clone(),
            controller_config,
        ));
        let controller = tokio::spawn(async move {
            if let Err(e) = controller::run(context, clients.lease, until_true(stopped)).await {
                tracing::error!(error = %e, "the controller stopped: volumes are left to the scheduler");
            }
        });
        Replica {
            state,
            stop,
            controller,
            _reflectors: reflectors,
        }
    }

    /// A future that resolves once [`Replica::stop`] is called (for [`serving::serve`]'s shutdown).
    pub fn stopped(&self) -> impl std::future::Future<Output = ()> + Send + Sync + 'static {
        until_true(self.stop.subscribe())
    }

    /// A handle that stops the replica when sent `true` (from another thread or runtime).
    pub fn stop_handle(&self) -> tokio::sync::watch::Sender<bool> {
        self.stop.clone()
    }

    /// Stops the controller (it releases its Lease) and waits a little for it.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), self.controller).await;
    }
}

async fn until_true(mut flag: tokio::sync::watch::Receiver<bool>) {
    let _ = flag.wait_for(|s| *s).await;
}

/// The host name, else a fixed name: a Lease identity (two replicas with the same one would both
/// believe they lead, so Deployments set POD_NAME).
fn default_identity() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| format!("sched-webhook-{}", std::process::id()))
}

/// `certs`: writes the files, then (with --webhook-config) applies the configuration.
pub async fn certs(args: CertsArgs) -> anyhow::Result<()> {
    let generated = certs::generate(&args.dns_names, &args.ips, args.days)?;
    let files = certs::write(&args.out, &generated)?;
    println!(
        "wrote {}, {}, {}, {}",
        files.ca_cert.display(),
        files.ca_key.display(),
        files.cert.display(),
        files.key.display()
    );
    if let Some(common_name) = &args.client_cert {
        let client = certs::generate_client(common_name, args.days)?;
        let files = certs::write_client(&args.out, &client)?;
        println!(
            "wrote {}, {}, {}, {}",
            files.ca_cert.display(),
            files.ca_key.display(),
            files.cert.display(),
            files.key.display()
        );
    }
    let Some(name) = args.webhook_config else {
        return Ok(());
    };
    let target = match (&args.url, &args.service) {
        (Some(url), _) => Target::Url(url.clone()),
        (None, Some(service)) => Target::service(service)
            .ok_or_else(|| anyhow::anyhow!("--service {service:?}: expected NAMESPACE/NAME[:PORT]"))?,
        (None, None) => anyhow::bail!("--webhook-config needs --url or --service"),
    };
    let client = client(args.kubeconfig.as_deref()).await?;
    let configuration = certs::webhook_configuration(&name, &target, &generated.ca_cert_pem);
    certs::apply_webhook_configuration(&client, &configuration).await?;
    println!("applied MutatingWebhookConfiguration {name} with the new caBundle");
    Ok(())
}

/// `explainer`: the watch-fed snapshot, the front proxy's settings read from the API server, the API
/// port (TLS, the front proxy's certificate required) and the admin port, until SIGTERM.
pub async fn explainer(args: ExplainerArgs) -> Result<(), StartError> {
    use crate::explainer::api::ExplainerState;
    use crate::explainer::identity::RequestHeaderConfig;
    use crate::explainer::live::LiveSnapshot;
    use crate::explainer::serve;

    let config = client_config(args.kubeconfig.as_deref()).await?;
    let origin = config.cluster_url.to_string().trim_end_matches('/').to_string();
    let client = Client::try_from(config)?;
    let requestheader = RequestHeaderConfig::from_cluster(&client).await?;
    // rustls reads the client CA from a file; the ConfigMap's copy is written where the pod may write.
    let ca_path = args.work_dir.join(format!(
        "sched-explainer-{}-requestheader-ca.pem",
        std::process::id()
    ));
    std::fs::write(&ca_path, &requestheader.client_ca_pem).map_err(|source| StartError::Io {
        address: ca_path.display().to_string(),
        source,
    })?;
    let files = tls::TlsFiles::new(&args.tls_cert, &args.tls_key).with_client_ca(&ca_path);
    let mut tls_config = (*tls::server_config_for(&files)?).clone();
    // The API port speaks HTTP/1.1 (the API server's proxy does too).
    tls_config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let bind = |address: std::net::SocketAddr| async move {
        tokio::net::TcpListener::bind(address)
            .await
            .map_err(|source| StartError::Io {
                address: address.to_string(),
                source,
            })
    };
    let (api_listener, admin_listener) = (bind(args.listen).await?, bind(args.admin_listen).await?);
    let state = Arc::new(ExplainerState {
        live: LiveSnapshot::start(&client),
        client,
        requestheader,
        kubeconfig: args.kubeconfig.clone(),
        origin,
        slots: tokio::sync::Semaphore::new(args.concurrent_evaluations),
    });
    tracing::info!(listen = %args.listen, admin = %args.admin_listen, "explainer serving");
    let pending = Arc::new(crate::explainer::pending::PendingMetrics::default());
    let evaluator = tokio::spawn(crate::explainer::pending::run(state.clone(), pending.clone()));
    let admin_routes = serve::admin_router(state.clone()).merge(crate::explainer::pending::router(pending));
    let admin = tokio::spawn(serve::serve_admin(admin_listener, admin_routes));
    tokio::select! {
        () = serve::serve_api(api_listener, Arc::new(tls_config), state, args.max_connections) => {}
        () = serving::termination_signal() => {}
    }
    admin.abort();
    evaluator.abort();
    let _ = std::fs::remove_file(&ca_path);
    Ok(())
}
