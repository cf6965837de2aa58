//! The real Karpenter beside a control plane: its KWOK cloud provider (`sigs.k8s.io/karpenter/kwok`,
//! built by `tests/karpenter/build.sh`), which launches nodes as API objects from the instance types
//! of a file, so that what `kubectl sched` predicts for node pools can be compared with what
//! Karpenter does: the NodeClaims it creates and the `FailedScheduling` events it writes on pods.
//!
//! Karpenter binds its metrics and health ports on every interface (`:port`), which this project's
//! tests never do; it is therefore started only inside a network namespace of its own whose only
//! interface is loopback (`tests/e2e-suites.sh` runs the node-pool suite under `unshare -n`), and
//! refuses to start elsewhere.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::control_plane::free_ports;
use crate::{ControlPlane, Error};

/// The Karpenter release `tests/karpenter/build.sh` pins.
pub const KARPENTER_VERSION: &str = "v1.14.0";
/// Where to point the tests at a Karpenter built elsewhere.
pub const KARPENTER_DIR_ENV: &str = "KUBECTL_SCHED_KARPENTER_DIR";
/// The command that builds it.
pub const KARPENTER_BUILD_COMMAND: &str = "tests/karpenter/build.sh";
/// The namespace Karpenter runs in (`SYSTEM_NAMESPACE`).
pub const KARPENTER_NAMESPACE: &str = "karpenter";
/// The CRDs it serves, as the build script copies them.
const CRDS: &[&str] = &[
    "karpenter.sh_nodepools.yaml",
    "karpenter.sh_nodeclaims.yaml",
    "karpenter.kwok.sh_kwoknodeclasses.yaml",
];
/// How long Karpenter may take to become ready (it starts in about ten seconds here).
const STARTUP_TIMEOUT: Duration = Duration::from_secs(90);

/// A running Karpenter; it ends with the control plane it was started beside.
#[derive(Debug)]
pub struct Karpenter {
    log: PathBuf,
}

/// The directory holding `bin/karpenter-kwok` and `crds/`.
pub fn karpenter_dir() -> Result<PathBuf, Error> {
    let dir = match std::env::var_os(KARPENTER_DIR_ENV) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
                .ok_or(Error::NoBinDir)?;
            cache
                .join("kubectl-sched")
                .join(format!("karpenter-{KARPENTER_VERSION}"))
        }
    };
    if !dir.join("bin/karpenter-kwok").is_file()
        || !CRDS.iter().all(|crd| dir.join("crds").join(crd).is_file())
    {
        return Err(Error::Startup {
            component: "karpenter".to_owned(),
            reason: format!(
                "Karpenter {KARPENTER_VERSION} is missing from {}; build it with `{KARPENTER_BUILD_COMMAND}` \
                 (or `make karpenter`; needs Go), or point {KARPENTER_DIR_ENV} at a directory holding it",
                dir.display()
            ),
            log: PathBuf::new(),
            tail: String::new(),
        });
    }
    Ok(dir)
}

/// The network interfaces of this process's network namespace (`/proc/self/net/dev`: sysfs shows
/// the namespace that mounted it).
fn network_interfaces() -> Result<Vec<String>, Error> {
    let dev =
        std::fs::read_to_string("/proc/self/net/dev").map_err(Error::io("reading /proc/self/net/dev"))?;
    let mut names: Vec<String> = dev
        .lines()
        .skip(2)
        .filter_map(|line| line.split_once(':'))
        .map(|(name, _)| name.trim().to_owned())
        .collect();
    names.sort();
    Ok(names)
}

impl Karpenter {
    /// Installs Karpenter's CRDs on `cp`, and starts Karpenter with the instance types of
    /// `instance_types` (a KWOK instance-types file), short batching windows (pods are provisioned
    /// a second after they are pending), and waits until it is ready.
    pub async fn start(cp: &ControlPlane, instance_types: &Path) -> Result<Self, Error> {
        let interfaces = network_interfaces()?;
        if interfaces != ["lo"] {
            return Err(Error::Startup {
                component: "karpenter".to_owned(),
                reason: format!(
                    "Karpenter listens on every interface, and this network namespace has {interfaces:?}: \
                     run the suite in one of its own, `tests/e2e-suites.sh node_pools` (or `unshare -n sh -c \
                     'ip link set lo up && cargo test -p e2e --test node_pools'`)"
                ),
                log: PathBuf::new(),
                tail: String::new(),
            });
        }
        let dir = karpenter_dir()?;
        Self::install_crds(cp).await?;
        if cp
            .kubectl(&[
                "get",
                "namespace",
                KARPENTER_NAMESPACE,
                "--ignore-not-found",
                "-o",
                "name",
            ])
            .await?
            .trim()
            .is_empty()
        {
            cp.kubectl(&["create", "namespace", KARPENTER_NAMESPACE]).await?;
        }
        let [metrics_port, health_port] = free_ports::<2>()?;
        let mut args: Vec<OsString> = vec![
            format!("KUBECONFIG={}", cp.kubeconfig_path().display()).into(),
            format!("SYSTEM_NAMESPACE={KARPENTER_NAMESPACE}").into(),
            dir.join("bin/karpenter-kwok").into(),
        ];
        for flag in [
            "--disable-leader-election".to_owned(),
            format!("--metrics-port={metrics_port}"),
            format!("--health-probe-port={health_port}"),
            format!("--instance-types-file-path={}", instance_types.display()),
            "--batch-idle-duration=200ms".to_owned(),
            "--batch-max-duration=2s".to_owned(),
            "--log-level=debug".to_owned(),
        ] {
            args.push(flag.into());
        }
        let log = cp.spawn_beside("karpenter", Path::new("/usr/bin/env"), &args)?;
        let karpenter = Karpenter { log };
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            cp.check_beside("karpenter")?;
            if readyz(health_port) {
                return Ok(karpenter);
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout {
                    timeout: STARTUP_TIMEOUT,
                    what: format!(
                        "Karpenter's /readyz on 127.0.0.1:{health_port} (log: {})",
                        karpenter.log.display()
                    ),
                });
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Installs Karpenter's CRDs on `cp` (NodePools, NodeClaims, KWOKNodeClasses) and waits until
    /// they are served: a scenario can then create its pools before Karpenter starts acting on them.
    /// [`Karpenter::start`] does it too; applying them again changes nothing.
    pub async fn install_crds(cp: &ControlPlane) -> Result<(), Error> {
        let dir = karpenter_dir()?;
        for crd in CRDS {
            let path = dir.join("crds").join(crd);
            cp.kubectl(&["apply", "--server-side", "-f", &path.to_string_lossy()])
                .await?;
        }
        cp.kubectl(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/nodepools.karpenter.sh",
            "crd/nodeclaims.karpenter.sh",
            "crd/kwoknodeclasses.karpenter.kwok.sh",
        ])
        .await?;
        Ok(())
    }

    /// Karpenter's log.
    pub fn log(&self) -> &Path {
        &self.log
    }
}

/// Whether `GET /readyz` on the health port answers 200.
fn readyz(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(1))
    else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(b"GET /readyz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut status = [0u8; 12];
    stream.read_exact(&mut status).is_ok() && status.ends_with(b"200")
}
