//! The e2e harness: a real Kubernetes control plane (etcd, kube-apiserver and, on request,
//! kube-scheduler and kube-controller-manager) on 127.0.0.1, built from the release pinned in
//! `tests/controlplane/go.mod` by `tests/controlplane/build.sh`.
//!
//! Tests either start their own [`ControlPlane`] (dropped, and so torn down, at the end of the
//! test, panics included) or share one per test binary through [`ControlPlane::shared`]. Nothing
//! is ever skipped: missing binaries are an error that names the command building them.
//!
//! Lifetime of the processes: every component runs in one process group, and a small `sh`
//! watchdog (not in that group) blocks reading a pipe whose only writer is the test process.
//! The kernel closes that pipe however the test process ends (normal exit with a shared
//! instance that is never dropped, panic, SIGKILL), so the watchdog always sees end-of-file, then
//! kills the whole group and removes the temporary directory. This needs no `unsafe`
//! (`PR_SET_PDEATHSIG` would) and no polling of PIDs that could be reused.

mod binaries;
mod control_plane;
mod error;
pub mod fixtures;
pub mod karpenter;
pub mod latency;
mod pki;
mod process;
pub mod procfs;

pub use binaries::{
    BIN_DIR_ENV, BUILD_COMMAND, Binaries, COMPONENTS, RELEASE_COMPONENTS, RELEASE_ENV, pinned_version,
    release_version, releases,
};
pub use control_plane::{ControlPlane, ETCD, KUBE_APISERVER, Options, ProcessInfo};
pub use error::Error;
