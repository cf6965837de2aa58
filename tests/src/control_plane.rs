//! [`ControlPlane`]: start the real components on 127.0.0.1, hand out clients, tear down.

use std::ffi::OsString;
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::version::Info;
use kube::api::PostParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use tempfile::TempDir;
use tokio::sync::OnceCell;

use crate::Error;
use crate::binaries::Binaries;
use crate::pki::{self, PkiFiles};
use crate::process::{Component, Watchdog, log_tail};

const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(120);
const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// One readiness probe; the whole wait is bounded by the startup timeout.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
const KUBECTL_TIMEOUT: Duration = Duration::from_secs(120);
/// Port clashes (a port picked as free taken by someone else before the component binds it)
/// are retried with fresh ports this many times.
const START_ATTEMPTS: usize = 3;

const SCHEDULER_CONFIG_API_VERSION: &str = "kubescheduler.config.k8s.io/v1";

/// What to run besides etcd and kube-apiserver.
#[derive(Clone, Debug)]
pub struct Options {
    scheduler: Option<Option<String>>,
    controllers: Option<Vec<String>>,
    startup_timeout: Duration,
    webhook_client_certs: Vec<WebhookClientCert>,
    scheduler_flags: SchedulerFlags,
    release: Option<String>,
    feature_gates: Option<String>,
    runtime_config: Option<String>,
    aggregation_layer: bool,
}

/// The flags kube-scheduler is started with besides those every start has, kept for
/// [`ControlPlane::start_scheduler`].
#[derive(Clone, Debug, Default)]
struct SchedulerFlags {
    verbosity: Option<u8>,
    feature_gates: Option<String>,
}

/// A client certificate kube-apiserver presents when it calls an admission webhook.
#[derive(Clone, Debug)]
struct WebhookClientCert {
    /// The kubeconfig user name the API server matches the webhook against: the `host:port` of a
    /// URL webhook, a Service's `name.namespace.svc[:port]`, `*.domain`, or `*` for every webhook.
    target: String,
    cert: PathBuf,
    key: PathBuf,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            scheduler: None,
            controllers: None,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            webhook_client_certs: Vec::new(),
            scheduler_flags: SchedulerFlags::default(),
            release: None,
            feature_gates: None,
            runtime_config: None,
            aggregation_layer: false,
        }
    }
}

impl Options {
    /// kube-apiserver and kube-scheduler of `tests/controlplane/releases/<minor>` (e.g. `v1.35`)
    /// instead of the pinned release's; etcd, kubectl and kube-controller-manager stay pinned.
    pub fn with_release(mut self, minor: &str) -> Self {
        self.release = Some(minor.to_owned());
        self
    }

    pub fn new() -> Self {
        Self::default()
    }

    /// Starts kube-apiserver with an aggregation layer, as kubeadm sets it up: the front proxy's
    /// client CA and allowed name (`--requestheader-*`, published in the
    /// `kube-system/extension-apiserver-authentication` ConfigMap) and its client certificate
    /// (`--proxy-client-*`), so that APIServices can be served by extension API servers.
    pub fn with_aggregation_layer(mut self) -> Self {
        self.aggregation_layer = true;
        self
    }

    /// Also runs kube-scheduler, with this KubeSchedulerConfiguration (YAML; `None` for the
    /// defaults). The harness fills in `clientConnection.kubeconfig` and turns leader election
    /// off, since both depend on this particular control plane.
    pub fn with_scheduler(mut self, config: Option<&str>) -> Self {
        self.scheduler = Some(config.map(str::to_owned));
        self
    }

    /// Also runs kube-controller-manager with exactly these controllers
    /// (e.g. `persistentvolume-binder`). Nodes here have no kubelet: never ask for the node
    /// lifecycle controller, it would taint and evict everything.
    pub fn with_controller_manager(mut self, controllers: &[&str]) -> Self {
        self.controllers = Some(controllers.iter().map(|c| (*c).to_owned()).collect());
        self
    }

    /// Runs kube-scheduler (whenever it is started) with `-v=LEVEL`: at 2 it logs every binding
    /// with its `evaluatedNodes` and every unschedulable attempt, which the benchmark reads.
    pub fn with_scheduler_verbosity(mut self, level: u8) -> Self {
        self.scheduler_flags.verbosity = Some(level);
        self
    }

    /// `--feature-gates=GATES` (e.g. `GenericWorkload=true`) for kube-apiserver, kube-scheduler
    /// and kube-controller-manager alike, as a cluster that turns a gate on does.
    pub fn with_feature_gates(mut self, gates: &str) -> Self {
        self.feature_gates = Some(gates.to_owned());
        self.scheduler_flags.feature_gates = Some(gates.to_owned());
        self
    }

    /// kube-apiserver's `--runtime-config` (e.g. `scheduling.k8s.io/v1beta1=true`: a beta API,
    /// off by default, that a feature gate's objects live in).
    pub fn with_runtime_config(mut self, config: &str) -> Self {
        self.runtime_config = Some(config.to_owned());
        self
    }

    /// Bounds the whole startup (default 120 s).
    pub fn with_startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }

    /// Has kube-apiserver present this client certificate (PEM files) when it calls the admission
    /// webhooks `target` names: `127.0.0.1:PORT` for a webhook registered by that URL (an
    /// AdmissionConfiguration whose webhook plugins read a kubeconfig with one user per target).
    /// Repeatable; webhooks no entry names are called without a certificate.
    pub fn with_webhook_client_cert(mut self, target: &str, cert: &Path, key: &Path) -> Self {
        self.webhook_client_certs.push(WebhookClientCert {
            target: target.to_owned(),
            cert: cert.to_owned(),
            key: key.to_owned(),
        });
        self
    }
}

/// The AdmissionConfiguration (`--admission-control-config-file`) whose MutatingAdmissionWebhook
/// and ValidatingAdmissionWebhook plugins read `kubeconfig` for the credentials to present to
/// webhooks (kubernetes.io/docs: "Authenticate apiservers").
fn admission_config_yaml(kubeconfig: &Path) -> String {
    let plugin = |name: &str| {
        serde_json::json!({
            "name": name,
            "configuration": {
                "apiVersion": "apiserver.config.k8s.io/v1",
                "kind": "WebhookAdmissionConfiguration",
                "kubeConfigFile": kubeconfig,
            },
        })
    };
    let config = serde_json::json!({
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "AdmissionConfiguration",
        "plugins": [plugin("MutatingAdmissionWebhook"), plugin("ValidatingAdmissionWebhook")],
    });
    yaml_serde::to_string(&config).unwrap_or_default()
}

/// The kubeconfig of [`admission_config_yaml`]: one user per webhook target, named after it.
fn webhook_kubeconfig_yaml(certs: &[WebhookClientCert]) -> String {
    let users: Vec<serde_json::Value> = certs
        .iter()
        .map(|c| {
            serde_json::json!({
                "name": c.target,
                "user": {"client-certificate": c.cert, "client-key": c.key},
            })
        })
        .collect();
    let kubeconfig = serde_json::json!({"apiVersion": "v1", "kind": "Config", "users": users});
    yaml_serde::to_string(&kubeconfig).unwrap_or_default()
}

/// Writes the admission configuration and its kubeconfig into `dir`; the configuration's path.
fn write_admission_config(dir: &Path, certs: &[WebhookClientCert]) -> Result<PathBuf, Error> {
    let kubeconfig = dir.join("admission-webhooks.kubeconfig");
    let config = dir.join("admission-config.yaml");
    for (path, text) in [
        (&kubeconfig, webhook_kubeconfig_yaml(certs)),
        (&config, admission_config_yaml(&kubeconfig)),
    ] {
        std::fs::write(path, text).map_err(Error::io(format!("writing {}", path.display())))?;
    }
    Ok(config)
}

/// A running process of the control plane, for checks on what it exposes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessInfo {
    pub name: String,
    pub pid: u32,
}

/// The processes and their directory; dropping it tears everything down.
struct Processes {
    // `Option`s so that drop can order the teardown: watchdog first, directory last.
    watchdog: Option<Watchdog>,
    components: Vec<Component>,
    dir: Option<TempDir>,
}

impl Processes {
    fn component(&mut self, name: &str) -> Option<&mut Component> {
        self.components.iter_mut().find(|c| c.name == name)
    }

    fn check_running(&mut self) -> Result<(), Error> {
        self.components.iter_mut().try_for_each(Component::check_running)
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        // The watchdog SIGKILLs the whole group (children of components included, if any) and
        // removes the directory; the components stay zombies until reaped below, so their
        // process group cannot be reused by an unrelated process in between.
        if let Some(mut watchdog) = self.watchdog.take() {
            watchdog.fire();
        }
        for component in self.components.iter_mut().rev() {
            component.kill_and_reap();
        }
        if let Some(dir) = self.dir.take() {
            // Usually already removed by the watchdog; close() reports that as an error.
            let _ = dir.close();
        }
    }
}

/// A real Kubernetes control plane on 127.0.0.1, torn down on drop.
pub struct ControlPlane {
    processes: Mutex<Processes>,
    process_infos: Vec<ProcessInfo>,
    watchdog_pid: u32,
    /// The components' process group, which the watchdog kills; components started later join it.
    group: u32,
    dir: PathBuf,
    binaries: Binaries,
    kubeconfig: PathBuf,
    server_url: String,
    config: Config,
    version: Info,
    startup_time: Duration,
    scheduler_flags: SchedulerFlags,
    /// etcd's and kube-apiserver's command lines, for [`Self::start_component`] after a stop.
    restartable: Vec<(&'static str, Vec<OsString>)>,
}

/// The components [`ControlPlane::stop_component`] and [`ControlPlane::start_component`] handle:
/// the two whose state lives elsewhere (etcd's on disk, kube-apiserver's in etcd), so that a
/// restart on the same ports and data directory is the same cluster. kube-scheduler has its own
/// methods ([`ControlPlane::start_scheduler`]), since each start may take another configuration.
pub const ETCD: &str = "etcd";
/// See [`ETCD`].
pub const KUBE_APISERVER: &str = "kube-apiserver";

static SHARED: OnceCell<ControlPlane> = OnceCell::const_new();

impl ControlPlane {
    /// Starts etcd and kube-apiserver (plus what `options` asks for) and waits until they are
    /// ready. Fails, never skips, when the binaries are missing: the error names the command that
    /// builds them.
    pub async fn start(options: Options) -> Result<Self, Error> {
        // kube's rustls needs a process-wide crypto provider; installing twice is harmless.
        let _ = rustls_ring_provider();
        let binaries = match &options.release {
            Some(minor) => Binaries::locate()?.with_release(minor)?,
            None => Binaries::locate()?,
        };
        let mut attempt = 1;
        loop {
            match Self::start_once(&binaries, &options).await {
                Err(err) if err.is_port_clash() && attempt < START_ATTEMPTS => attempt += 1,
                result => return result,
            }
        }
    }

    /// One control plane per test binary, with kube-scheduler (default configuration) and
    /// kube-controller-manager running the PV binder, started by the first test that asks.
    /// Tests sharing it must isolate themselves: their own namespace ([`Self::new_namespace`]),
    /// nodes labelled for the test and selected by its pods. It is never dropped; the watchdog
    /// removes it when the test binary exits.
    pub async fn shared() -> Result<&'static ControlPlane, Error> {
        SHARED
            .get_or_try_init(|| {
                ControlPlane::start(
                    Options::new()
                        .with_scheduler(None)
                        .with_controller_manager(&["persistentvolume-binder"]),
                )
            })
            .await
    }

    async fn start_once(binaries: &Binaries, options: &Options) -> Result<Self, Error> {
        let started = Instant::now();
        let deadline = started + options.startup_timeout;
        let tempdir = tempfile::Builder::new()
            .prefix("kubectl-sched-e2e-")
            .tempdir()
            .map_err(Error::io("creating the control plane's temporary directory"))?;
        let dir = tempdir.path().to_path_buf();
        let watchdog = Watchdog::spawn(&dir)?;
        let watchdog_pid = watchdog.pid();
        // From here on, any early return drops `processes`, which kills whatever was started.
        let mut processes = Processes {
            watchdog: Some(watchdog),
            components: Vec::new(),
            dir: Some(tempdir),
        };

        let pki = pki::write(&dir.join("pki"))?;
        let [etcd_client, etcd_peer, apiserver_port, scheduler_port, kcm_port] = free_ports::<5>()?;
        let server_url = format!("https://127.0.0.1:{apiserver_port}");
        let kubeconfig = dir.join("admin.kubeconfig");
        write_kubeconfig(&kubeconfig, &server_url, &pki)?;

        let etcd_flags = etcd_args(&dir.join("etcd"), etcd_client, etcd_peer);
        let etcd = Component::spawn(
            ETCD,
            &binaries.path(ETCD),
            &etcd_flags,
            dir.join("etcd.log"),
            None,
        )?;
        let group = etcd.pid;
        processes.components.push(etcd);
        if let Some(watchdog) = processes.watchdog.as_mut() {
            watchdog.guard_group(group)?;
        }
        let mut apiserver_flags = apiserver_args(&dir, &pki, apiserver_port, etcd_client);
        if let Some(gates) = &options.feature_gates {
            apiserver_flags.extend(flags([("feature-gates", gates.clone())]));
        }
        if let Some(config) = &options.runtime_config {
            apiserver_flags.extend(flags([("runtime-config", config.clone())]));
        }
        if options.aggregation_layer {
            apiserver_flags.extend(aggregation_args(&pki));
        }
        if !options.webhook_client_certs.is_empty() {
            let config = write_admission_config(&dir, &options.webhook_client_certs)?;
            apiserver_flags.extend(flags([(
                "admission-control-config-file",
                config.display().to_string(),
            )]));
        }
        processes.components.push(Component::spawn(
            KUBE_APISERVER,
            &binaries.path(KUBE_APISERVER),
            &apiserver_flags,
            dir.join("kube-apiserver.log"),
            Some(group),
        )?);

        let config = Config::from_custom_kubeconfig(
            Kubeconfig::read_from(&kubeconfig)?,
            &KubeConfigOptions::default(),
        )
        .await?;
        let client = Client::try_from(config.clone())?;
        wait_ready(&mut processes, "kube-apiserver", &client, "/readyz", deadline).await?;
        let version = client.apiserver_version().await?;

        let mut extra = Vec::new();
        if let Some(scheduler_config) = &options.scheduler {
            processes.components.push(spawn_scheduler(
                binaries,
                &dir,
                &kubeconfig,
                scheduler_config.as_deref(),
                &options.scheduler_flags,
                scheduler_port,
                group,
            )?);
            extra.push(("kube-scheduler", scheduler_port));
        }
        if let Some(controllers) = &options.controllers {
            let mut kcm_flags = controller_manager_args(&dir, &kubeconfig, &pki, controllers, kcm_port);
            if let Some(gates) = &options.feature_gates {
                kcm_flags.extend(flags([("feature-gates", gates.clone())]));
            }
            processes.components.push(Component::spawn(
                "kube-controller-manager",
                &binaries.path("kube-controller-manager"),
                &kcm_flags,
                dir.join("kube-controller-manager.log"),
                Some(group),
            )?);
            extra.push(("kube-controller-manager", kcm_port));
        }
        for (name, port) in extra {
            let probe = health_probe(&config, name, port)?;
            wait_ready(&mut processes, name, &probe, "/healthz", deadline).await?;
        }

        let startup_time = started.elapsed();
        let names: Vec<&str> = processes.components.iter().map(|c| c.name).collect();
        // Straight to the process's stderr, past the test harness's output capture: the release
        // under test and the startup cost belong in every test log.
        let _ = writeln!(
            std::io::stderr(),
            "real kube-apiserver {} at {server_url} ({}; ready in {:.2} s)",
            version.git_version,
            names.join(", "),
            startup_time.as_secs_f64()
        );
        let process_infos = processes
            .components
            .iter()
            .map(|c| ProcessInfo {
                name: c.name.to_owned(),
                pid: c.pid,
            })
            .collect();
        Ok(Self {
            processes: Mutex::new(processes),
            process_infos,
            watchdog_pid,
            group,
            dir,
            binaries: binaries.clone(),
            kubeconfig,
            server_url,
            config,
            version,
            startup_time,
            scheduler_flags: options.scheduler_flags.clone(),
            restartable: vec![(ETCD, etcd_flags), (KUBE_APISERVER, apiserver_flags)],
        })
    }

    /// An admin (`system:masters`) kubeconfig for this control plane.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// `https://127.0.0.1:<port>`.
    pub fn server_url(&self) -> &str {
        &self.server_url
    }

    /// A new admin client. Clients belong to the Tokio runtime they were made in and each
    /// `#[tokio::test]` has its own runtime, so make one per test rather than keeping one.
    pub fn client(&self) -> Result<Client, Error> {
        Ok(Client::try_from(self.config.clone())?)
    }

    /// The client configuration behind [`Self::client`], to tweak before building a client.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The release kube-apiserver and kube-scheduler were built from: the pinned one, or the one
    /// [`Options::with_release`] / `KUBECTL_SCHED_K8S_RELEASE` chose.
    pub fn release(&self) -> Result<&str, Error> {
        match self.binaries.release_version() {
            Some(version) => Ok(version),
            None => crate::pinned_version(),
        }
    }

    pub fn bin_dir(&self) -> &Path {
        self.binaries.dir()
    }

    /// The temporary directory holding certificates, kubeconfig, etcd data and logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `GET /version` of the apiserver, as read at startup.
    pub fn version(&self) -> &Info {
        &self.version
    }

    /// From the first file written to every component being ready.
    pub fn startup_time(&self) -> Duration {
        self.startup_time
    }

    /// The component processes as started (etcd, kube-apiserver, then the optional ones); a
    /// kube-scheduler started or stopped later is not reflected here.
    pub fn processes(&self) -> &[ProcessInfo] {
        &self.process_infos
    }

    pub fn watchdog_pid(&self) -> u32 {
        self.watchdog_pid
    }

    /// The last `lines` lines of a component's log, e.g. to explain a test failure.
    pub fn log_tail(&self, component: &str, lines: usize) -> String {
        log_tail(&self.dir.join(format!("{component}.log")), lines)
    }

    /// Fails, with the log tail, if a component has exited since startup.
    pub fn check_running(&self) -> Result<(), Error> {
        self.processes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .check_running()
    }

    /// Starts kube-scheduler on a running control plane (one started without it, or after
    /// [`Self::stop_scheduler`]), with this KubeSchedulerConfiguration as in
    /// [`Options::with_scheduler`], and waits until it answers `/healthz`. Tests use it to build
    /// a state (pending pods included) that kube-scheduler must not act on before they are done.
    /// Its log starts afresh in `kube-scheduler.log`.
    pub async fn start_scheduler(&self, config: Option<&str>) -> Result<(), Error> {
        const NAME: &str = "kube-scheduler";
        let mut attempt = 1;
        loop {
            let deadline = Instant::now() + DEFAULT_STARTUP_TIMEOUT;
            let [port] = free_ports::<1>()?;
            {
                let mut processes = self.lock_processes();
                if processes.component(NAME).is_some() {
                    return Err(Error::AlreadyRunning(NAME.to_owned()));
                }
                processes.components.push(spawn_scheduler(
                    &self.binaries,
                    &self.dir,
                    &self.kubeconfig,
                    config,
                    &self.scheduler_flags,
                    port,
                    self.group,
                )?);
            }
            let probe = health_probe(&self.config, NAME, port)?;
            let ready = poll_ready(NAME, &probe, "/healthz", deadline, || {
                self.lock_processes().check_running()
            })
            .await;
            let err = match ready {
                Ok(()) => return Ok(()),
                Err(NotReady::Failed(err)) => err,
                Err(NotReady::TimedOut(reason)) => match self.lock_processes().component(NAME) {
                    Some(c) => c.startup_error(reason),
                    None => Error::Timeout {
                        timeout: DEFAULT_STARTUP_TIMEOUT,
                        what: reason,
                    },
                },
            };
            self.stop_scheduler();
            if !(err.is_port_clash() && attempt < START_ATTEMPTS) {
                return Err(err);
            }
            attempt += 1;
        }
    }

    /// Starts another program beside the components (a controller the test compares against, such
    /// as Karpenter), in their process group so that the watchdog ends it with them; its output goes
    /// to `<name>.log` in the control plane's directory, whose path is returned. `program` runs with
    /// the test's environment: give it variables through `/usr/bin/env` if it needs its own.
    pub fn spawn_beside(
        &self,
        name: &'static str,
        program: &Path,
        args: &[OsString],
    ) -> Result<PathBuf, Error> {
        let log = self.dir.join(format!("{name}.log"));
        let mut processes = self.lock_processes();
        if processes.component(name).is_some() {
            return Err(Error::AlreadyRunning(name.to_owned()));
        }
        processes.components.push(Component::spawn(
            name,
            program,
            args,
            log.clone(),
            Some(self.group),
        )?);
        Ok(log)
    }

    /// Fails with the tail of its log if the program started by [`Self::spawn_beside`] as `name`
    /// has exited.
    pub fn check_beside(&self, name: &str) -> Result<(), Error> {
        match self.lock_processes().component(name) {
            Some(component) => component.check_running(),
            None => Err(Error::Startup {
                component: name.to_owned(),
                reason: "was never started".to_owned(),
                log: PathBuf::new(),
                tail: String::new(),
            }),
        }
    }

    /// kube-scheduler's process id while it runs (for reading its memory from /proc).
    pub fn scheduler_pid(&self) -> Option<u32> {
        self.lock_processes().component("kube-scheduler").map(|c| c.pid)
    }

    /// Stops kube-scheduler (SIGKILL: nothing of its state needs saving) and waits for it to
    /// exit. Returns whether it was running.
    pub fn stop_scheduler(&self) -> bool {
        let mut processes = self.lock_processes();
        let Some(index) = processes
            .components
            .iter()
            .position(|c| c.name == "kube-scheduler")
        else {
            return false;
        };
        let mut component = processes.components.remove(index);
        component.kill_and_reap();
        true
    }

    /// Stops etcd or kube-apiserver ([`ETCD`], [`KUBE_APISERVER`]) with SIGKILL, as a crash or an
    /// OOM kill would, and waits for it to exit. Returns whether it was running. For fault tests:
    /// clients of the API server see refused connections (kube-apiserver) or requests that time
    /// out or fail inside the API server (etcd). The process group (and so the watchdog's cleanup)
    /// is unaffected: it lives on in the other components, even when etcd, its first member, is
    /// gone.
    pub fn stop_component(&self, name: &str) -> bool {
        let mut processes = self.lock_processes();
        let Some(index) = processes.components.iter().position(|c| c.name == name) else {
            return false;
        };
        let mut component = processes.components.remove(index);
        component.kill_and_reap();
        true
    }

    /// etcd's client address (plain HTTP on 127.0.0.1; its gRPC gateway answers JSON under `/v3/`),
    /// for fault tests that change what is stored behind the API server's back (a deletion no watch
    /// delivers, a compaction that expires every older resourceVersion).
    pub fn etcd_address(&self) -> Option<std::net::SocketAddr> {
        let (_, args) = self.restartable.iter().find(|(n, _)| *n == ETCD)?;
        args.iter().find_map(|arg| {
            arg.to_str()?
                .strip_prefix("--listen-client-urls=http://")?
                .parse()
                .ok()
        })
    }

    /// Starts etcd or kube-apiserver again after [`Self::stop_component`], with the command line of
    /// the first start (same ports, same data directory, same certificates: the same cluster, and
    /// kubeconfigs and clients made before keep working), and waits until the API server answers
    /// `/readyz` (which needs etcd too). Its log starts afresh. [`Self::processes`] still shows
    /// the first process ids.
    pub async fn start_component(&self, name: &str) -> Result<(), Error> {
        let Some((name, args)) = self.restartable.iter().find(|(n, _)| *n == name) else {
            return Err(Error::Startup {
                component: name.to_owned(),
                reason: format!("only {ETCD} and {KUBE_APISERVER} can be started again"),
                log: PathBuf::new(),
                tail: String::new(),
            });
        };
        {
            let mut processes = self.lock_processes();
            if processes.component(name).is_some() {
                return Err(Error::AlreadyRunning((*name).to_owned()));
            }
            processes.components.push(Component::spawn(
                name,
                &self.binaries.path(name),
                args,
                self.dir.join(format!("{name}.log")),
                Some(self.group),
            )?);
        }
        let deadline = Instant::now() + DEFAULT_STARTUP_TIMEOUT;
        let client = self.client()?;
        let ready = poll_ready(name, &client, "/readyz", deadline, || {
            self.lock_processes().check_running()
        })
        .await;
        match ready {
            Ok(()) => Ok(()),
            Err(NotReady::Failed(err)) => Err(err),
            Err(NotReady::TimedOut(reason)) => Err(match self.lock_processes().component(name) {
                Some(c) => c.startup_error(reason),
                None => Error::Timeout {
                    timeout: DEFAULT_STARTUP_TIMEOUT,
                    what: reason,
                },
            }),
        }
    }

    fn lock_processes(&self) -> std::sync::MutexGuard<'_, Processes> {
        self.processes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs the pinned kubectl against this control plane and returns its stdout; a non-zero
    /// exit is an error carrying stderr.
    pub async fn kubectl(&self, args: &[&str]) -> Result<String, Error> {
        let shown = args.join(" ");
        let run = tokio::process::Command::new(self.binaries.path("kubectl"))
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .env_remove("KUBECONFIG")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(KUBECTL_TIMEOUT, run)
            .await
            .map_err(|_| Error::Kubectl {
                args: shown.clone(),
                reason: format!("no answer in {KUBECTL_TIMEOUT:?}"),
            })?
            .map_err(|e| Error::Kubectl {
                args: shown.clone(),
                reason: e.to_string(),
            })?;
        if !output.status.success() {
            return Err(Error::Kubectl {
                args: shown,
                reason: format!(
                    "{}: {}",
                    output.status,
                    String::from_utf8_lossy(&output.stderr).trim()
                ),
            });
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Creates a namespace named `<prefix>-<random>` and returns its name, so tests sharing a
    /// control plane do not see each other's objects.
    pub async fn new_namespace(&self, prefix: &str) -> Result<String, Error> {
        let namespaces: Api<Namespace> = Api::all(self.client()?);
        let namespace = Namespace {
            metadata: ObjectMeta {
                generate_name: Some(format!("{prefix}-")),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        let created = namespaces.create(&PostParams::default(), &namespace).await?;
        created.metadata.name.ok_or_else(|| Error::Kubectl {
            args: format!("create namespace {prefix}-"),
            reason: "the apiserver returned no name".into(),
        })
    }
}

fn rustls_ring_provider() -> Result<(), std::sync::Arc<rustls::crypto::CryptoProvider>> {
    rustls::crypto::ring::default_provider().install_default()
}

/// Polls `path` on `client` until it answers 200, failing early (with the log tail) when any
/// component exits and at `deadline` otherwise.
async fn wait_ready(
    processes: &mut Processes,
    component: &'static str,
    client: &Client,
    path: &str,
    deadline: Instant,
) -> Result<(), Error> {
    let ready = poll_ready(component, client, path, deadline, || processes.check_running()).await;
    match ready {
        Ok(()) => Ok(()),
        Err(NotReady::Failed(err)) => Err(err),
        Err(NotReady::TimedOut(reason)) => Err(match processes.component(component) {
            Some(c) => c.startup_error(reason),
            None => Error::Timeout {
                timeout: Duration::ZERO,
                what: reason,
            },
        }),
    }
}

/// Why [`poll_ready`] gave up.
enum NotReady {
    /// A component exited (or the probe could not be built).
    Failed(Error),
    /// The deadline passed; the reason names the last error.
    TimedOut(String),
}

/// Polls `path` on `client` until it answers 200; `check_running` runs before every probe.
async fn poll_ready(
    component: &'static str,
    client: &Client,
    path: &str,
    deadline: Instant,
    mut check_running: impl FnMut() -> Result<(), Error>,
) -> Result<(), NotReady> {
    loop {
        check_running().map_err(NotReady::Failed)?;
        let request = http::Request::get(path).body(Vec::new()).map_err(|e| {
            NotReady::Failed(Error::Startup {
                component: component.to_owned(),
                reason: format!("building GET {path}: {e}"),
                log: PathBuf::new(),
                tail: String::new(),
            })
        })?;
        let last_error = match tokio::time::timeout(PROBE_TIMEOUT, client.request_text(request)).await {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(err)) => err.to_string(),
            Err(_) => format!("GET {path} took more than {PROBE_TIMEOUT:?}"),
        };
        if Instant::now() >= deadline {
            return Err(NotReady::TimedOut(format!(
                "not ready (GET {path}) before the startup timeout; last error: {last_error}"
            )));
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// A client for `/healthz` of a component serving on `port`: their serving certificates are
/// self-signed in memory, and the probe only asks whether the process is up, which /healthz
/// answers without authorization.
fn health_probe(config: &Config, name: &str, port: u16) -> Result<Client, Error> {
    let mut probe_config = config.clone();
    probe_config.cluster_url = format!("https://127.0.0.1:{port}")
        .parse()
        .map_err(|e| Error::SchedulerConfig(format!("bad URL for {name}: {e}")))?;
    probe_config.accept_invalid_certs = true;
    probe_config.root_cert = None;
    Ok(Client::try_from(probe_config)?)
}

/// Writes kube-scheduler's configuration into `dir` and starts it in process group `group`.
fn spawn_scheduler(
    binaries: &Binaries,
    dir: &Path,
    kubeconfig: &Path,
    config: Option<&str>,
    scheduler_flags: &SchedulerFlags,
    port: u16,
    group: u32,
) -> Result<Component, Error> {
    let config_path = dir.join("kube-scheduler-config.yaml");
    let yaml = scheduler_config_yaml(config, kubeconfig)?;
    std::fs::write(&config_path, yaml).map_err(Error::io(format!("writing {}", config_path.display())))?;
    Component::spawn(
        "kube-scheduler",
        &binaries.path("kube-scheduler"),
        &scheduler_args(dir, kubeconfig, &config_path, port, scheduler_flags),
        dir.join("kube-scheduler.log"),
        Some(group),
    )
}

/// `N` distinct loopback ports free right now. All listeners are held until every port is picked,
/// so the kernel cannot hand the same port out twice.
pub(crate) fn free_ports<const N: usize>() -> Result<[u16; N], Error> {
    let mut listeners = Vec::with_capacity(N);
    let mut ports = [0u16; N];
    for port in &mut ports {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(Error::io("picking a free loopback port"))?;
        *port = listener
            .local_addr()
            .map_err(Error::io("picking a free loopback port"))?
            .port();
        listeners.push(listener);
    }
    Ok(ports)
}

fn write_kubeconfig(path: &Path, server: &str, pki: &PkiFiles) -> Result<(), Error> {
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {
            "server": server,
            "certificate-authority": pki.ca_cert,
        }}],
        "users": [{"name": "admin", "user": {
            "client-certificate": pki.admin_cert,
            "client-key": pki.admin_key,
        }}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "admin", "namespace": "default"}}],
        "current-context": "e2e",
    });
    let yaml = yaml_serde::to_string(&kubeconfig).map_err(|e| Error::Io {
        context: "serializing the kubeconfig".into(),
        source: std::io::Error::other(e),
    })?;
    std::fs::write(path, yaml).map_err(Error::io(format!("writing {}", path.display())))
}

/// Arguments as `--flag=value` strings; paths are formatted lossily, which only matters for
/// non-UTF-8 temporary directories, never created by `tempfile`.
fn flags<const N: usize>(pairs: [(&str, String); N]) -> Vec<OsString> {
    pairs
        .into_iter()
        .map(|(flag, value)| OsString::from(format!("--{flag}={value}")))
        .collect()
}

fn etcd_args(data_dir: &Path, client_port: u16, peer_port: u16) -> Vec<OsString> {
    let client = format!("http://127.0.0.1:{client_port}");
    let peer = format!("http://127.0.0.1:{peer_port}");
    flags([
        ("name", "e2e".into()),
        ("data-dir", data_dir.display().to_string()),
        ("listen-client-urls", client.clone()),
        ("advertise-client-urls", client),
        ("listen-peer-urls", peer.clone()),
        ("initial-advertise-peer-urls", peer.clone()),
        ("initial-cluster", format!("e2e={peer}")),
        // Test data is thrown away: durability only costs time.
        ("unsafe-no-fsync", "true".into()),
        // The default 2 GiB quota is less than the benchmark's 150,000 realistic pods take with
        // their revisions; reaching it would make etcd refuse every write.
        ("quota-backend-bytes", (8u64 << 30).to_string()),
        ("log-level", "warn".into()),
    ])
}

fn apiserver_args(dir: &Path, pki: &PkiFiles, port: u16, etcd_port: u16) -> Vec<OsString> {
    let path = |p: &Path| p.display().to_string();
    flags([
        ("bind-address", "127.0.0.1".into()),
        ("advertise-address", "127.0.0.1".into()),
        ("secure-port", port.to_string()),
        ("etcd-servers", format!("http://127.0.0.1:{etcd_port}")),
        ("client-ca-file", path(&pki.ca_cert)),
        ("tls-cert-file", path(&pki.serving_cert)),
        ("tls-private-key-file", path(&pki.serving_key)),
        ("authorization-mode", "Node,RBAC".into()),
        (
            "service-account-issuer",
            "https://kubernetes.default.svc.cluster.local".into(),
        ),
        ("service-account-key-file", path(&pki.service_account_pub)),
        ("service-account-signing-key-file", path(&pki.service_account_key)),
        ("service-cluster-ip-range", "10.0.0.0/24".into()),
        // ServiceAccount would reject every pod until the (absent) serviceaccount controller
        // creates `default` in its namespace; TaintNodesByCondition would put a not-ready taint
        // on every new node that only a node lifecycle controller, fed by a kubelet, removes.
        (
            "disable-admission-plugins",
            "ServiceAccount,TaintNodesByCondition".into(),
        ),
        // The `kubernetes` Service's endpoints would be 127.0.0.1, which Endpoints validation
        // rejects; the reconciler would log that error every few seconds.
        ("endpoint-reconciler-type", "none".into()),
        // Anything the apiserver generates goes to the temporary directory, not /var/run.
        ("cert-dir", path(&dir.join("kube-apiserver-certs"))),
        ("allow-privileged", "true".into()),
    ])
}

/// kube-apiserver's aggregation-layer flags (kubeadm's): the front proxy's CA, name and headers, and
/// its client certificate.
fn aggregation_args(pki: &PkiFiles) -> Vec<OsString> {
    let path = |p: &Path| p.display().to_string();
    flags([
        ("requestheader-client-ca-file", path(&pki.front_proxy_ca_cert)),
        ("requestheader-allowed-names", pki::FRONT_PROXY_CLIENT.into()),
        ("requestheader-username-headers", "X-Remote-User".into()),
        ("requestheader-group-headers", "X-Remote-Group".into()),
        ("requestheader-extra-headers-prefix", "X-Remote-Extra-".into()),
        ("proxy-client-cert-file", path(&pki.front_proxy_client_cert)),
        ("proxy-client-key-file", path(&pki.front_proxy_client_key)),
    ])
}

fn scheduler_args(
    dir: &Path,
    kubeconfig: &Path,
    config: &Path,
    port: u16,
    extra: &SchedulerFlags,
) -> Vec<OsString> {
    let path = |p: &Path| p.display().to_string();
    let mut args = flags([
        ("config", path(config)),
        // With --config, kube-scheduler ignores --kubeconfig: the file carries it. These two are
        // still read from flags and let /healthz callers authenticate.
        ("authentication-kubeconfig", path(kubeconfig)),
        ("authorization-kubeconfig", path(kubeconfig)),
        ("bind-address", "127.0.0.1".into()),
        ("secure-port", port.to_string()),
        ("leader-elect", "false".into()),
        ("cert-dir", path(&dir.join("kube-scheduler-certs"))),
    ]);
    if let Some(level) = extra.verbosity {
        args.extend(flags([("v", level.to_string())]));
    }
    if let Some(gates) = &extra.feature_gates {
        args.extend(flags([("feature-gates", gates.clone())]));
    }
    args
}

fn controller_manager_args(
    dir: &Path,
    kubeconfig: &Path,
    pki: &PkiFiles,
    controllers: &[String],
    port: u16,
) -> Vec<OsString> {
    let path = |p: &Path| p.display().to_string();
    flags([
        ("kubeconfig", path(kubeconfig)),
        ("authentication-kubeconfig", path(kubeconfig)),
        ("authorization-kubeconfig", path(kubeconfig)),
        ("controllers", controllers.join(",")),
        ("bind-address", "127.0.0.1".into()),
        ("secure-port", port.to_string()),
        ("leader-elect", "false".into()),
        ("use-service-account-credentials", "false".into()),
        // Only read by the controllers that need them (token, root CA publisher, CSR signer).
        ("service-account-private-key-file", path(&pki.service_account_key)),
        ("root-ca-file", path(&pki.ca_cert)),
        ("cluster-signing-cert-file", path(&pki.ca_cert)),
        ("cluster-signing-key-file", path(&pki.ca_key)),
        ("cert-dir", path(&dir.join("kube-controller-manager-certs"))),
    ])
}

/// The caller's KubeSchedulerConfiguration (or an empty one) with what only the harness knows:
/// the kubeconfig, and leader election off (a single scheduler that must start at once).
fn scheduler_config_yaml(config: Option<&str>, kubeconfig: &Path) -> Result<String, Error> {
    use yaml_serde::{Mapping, Value};
    let mut root = match config {
        Some(text) => {
            yaml_serde::from_str::<Value>(text).map_err(|e| Error::SchedulerConfig(e.to_string()))?
        }
        None => Value::Mapping(Mapping::new()),
    };
    let Value::Mapping(map) = &mut root else {
        return Err(Error::SchedulerConfig("the document is not a mapping".into()));
    };
    let mut set_default = |key: &str, value: &str| {
        map.entry(Value::from(key)).or_insert_with(|| Value::from(value));
    };
    set_default("apiVersion", SCHEDULER_CONFIG_API_VERSION);
    set_default("kind", "KubeSchedulerConfiguration");
    for (section, key, value) in [
        (
            "clientConnection",
            "kubeconfig",
            Value::from(kubeconfig.display().to_string()),
        ),
        ("leaderElection", "leaderElect", Value::from(false)),
    ] {
        let entry = map
            .entry(Value::from(section))
            .or_insert_with(|| Value::Mapping(Mapping::new()));
        let Value::Mapping(inner) = entry else {
            return Err(Error::SchedulerConfig(format!("{section} is not a mapping")));
        };
        inner.insert(Value::from(key), value);
    }
    yaml_serde::to_string(&root).map_err(|e| Error::SchedulerConfig(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduler_config_gets_the_kubeconfig_and_no_leader_election() {
        let kubeconfig = Path::new("/tmp/x/admin.kubeconfig");
        let user = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
                    leaderElection:\n  leaderElect: true\nprofiles:\n- schedulerName: default-scheduler\n";
        for config in [None, Some(user)] {
            let yaml = scheduler_config_yaml(config, kubeconfig).expect("valid");
            let value: yaml_serde::Value = yaml_serde::from_str(&yaml).expect("yaml");
            assert_eq!(value["apiVersion"].as_str(), Some(SCHEDULER_CONFIG_API_VERSION));
            assert_eq!(value["kind"].as_str(), Some("KubeSchedulerConfiguration"));
            assert_eq!(
                value["clientConnection"]["kubeconfig"].as_str(),
                Some("/tmp/x/admin.kubeconfig")
            );
            assert_eq!(value["leaderElection"]["leaderElect"].as_bool(), Some(false));
        }
        let yaml = scheduler_config_yaml(Some(user), kubeconfig).expect("valid");
        assert!(yaml.contains("default-scheduler"), "profiles kept: {yaml}");
        assert!(scheduler_config_yaml(Some("- a list"), kubeconfig).is_err());
        assert!(scheduler_config_yaml(Some("leaderElection: 3"), kubeconfig).is_err());
    }

    #[test]
    fn admission_config_presents_client_certificates_per_webhook() {
        let dir = tempfile::tempdir().expect("tempdir");
        let certs = [WebhookClientCert {
            target: "127.0.0.1:8443".into(),
            cert: dir.path().join("client.crt"),
            key: dir.path().join("client.key"),
        }];
        let path = write_admission_config(dir.path(), &certs).expect("written");
        let config: serde_json::Value =
            yaml_serde::from_str(&std::fs::read_to_string(&path).expect("read")).expect("yaml");
        assert_eq!(config["kind"], "AdmissionConfiguration");
        let plugin = &config["plugins"][0];
        assert_eq!(plugin["name"], "MutatingAdmissionWebhook");
        assert_eq!(plugin["configuration"]["kind"], "WebhookAdmissionConfiguration");
        let kubeconfig_path = plugin["configuration"]["kubeConfigFile"].as_str().expect("path");
        let kubeconfig: serde_json::Value =
            yaml_serde::from_str(&std::fs::read_to_string(kubeconfig_path).expect("read")).expect("yaml");
        assert_eq!(kubeconfig["users"][0]["name"], "127.0.0.1:8443");
        assert!(
            kubeconfig["users"][0]["user"]["client-certificate"]
                .as_str()
                .expect("cert")
                .ends_with("client.crt")
        );
    }

    #[test]
    fn free_ports_are_distinct() {
        let ports = free_ports::<5>().expect("ports");
        for (i, a) in ports.iter().enumerate() {
            assert!(ports[i + 1..].iter().all(|b| a != b), "{ports:?}");
        }
    }
}
