//! The harness's error type: every failure says which component or step failed and, for a
//! process that did not come up, ends with the tail of its log.

use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "the real control-plane binaries are missing from {dir} ({missing}); build them with \
         `tests/controlplane/build.sh` (or `make controlplane`; needs Go), or point \
         KUBECTL_SCHED_K8S_BIN at a directory holding them"
    )]
    BinariesMissing { dir: PathBuf, missing: String },

    #[error(
        "the control-plane binaries in {dir} are {found} but tests/controlplane/go.mod pins {pinned}; \
         rebuild them with `tests/controlplane/build.sh` (or `make controlplane`)"
    )]
    WrongVersion {
        dir: PathBuf,
        found: String,
        pinned: String,
    },

    #[error(
        "kube-apiserver/kube-scheduler of release {release} are missing from {dir} ({missing}); build \
         them with `tests/controlplane/build.sh {release}` (needs Go)"
    )]
    ReleaseMissing {
        dir: PathBuf,
        missing: String,
        release: String,
    },

    #[error(
        "no release {release} in tests/controlplane/releases (there: {known}); add one with `tests/controlplane/releases/add.sh vX.Y.Z`"
    )]
    UnknownRelease { release: String, known: String },

    #[error(
        "cannot locate the control-plane binaries: neither KUBECTL_SCHED_K8S_BIN, XDG_CACHE_HOME nor \
         HOME is set; build them with `tests/controlplane/build.sh` and set KUBECTL_SCHED_K8S_BIN"
    )]
    NoBinDir,

    #[error("tests/controlplane/go.mod pins no k8s.io/kubernetes version")]
    NoPinnedVersion,

    #[error("{component} failed to start: {reason}\n--- last lines of {} ---\n{tail}", log.display())]
    Startup {
        component: String,
        reason: String,
        log: PathBuf,
        tail: String,
    },

    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },

    #[error("generating certificates: {0}")]
    Pki(#[from] rcgen::Error),

    #[error("kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),

    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),

    #[error("invalid KubeSchedulerConfiguration: {0}")]
    SchedulerConfig(String),

    #[error("kubectl {args}: {reason}")]
    Kubectl { args: String, reason: String },

    #[error("{0} is already running")]
    AlreadyRunning(String),

    #[error("timed out after {timeout:?} waiting for {what}")]
    Timeout { timeout: Duration, what: String },
}

impl Error {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let context = context.into();
        move |source| Error::Io { context, source }
    }

    /// A component lost the race for a port picked as free (another process bound it between the
    /// pick and the component's own bind); starting again with new ports is the remedy.
    pub(crate) fn is_port_clash(&self) -> bool {
        matches!(self, Error::Startup { tail, .. } if tail.contains("address already in use"))
    }
}
