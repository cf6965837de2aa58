//! The differential scenarios that touch a difference between kube-scheduler releases, plus a
//! sample of plain ones (`common::scenarios`), against the real kube-apiserver and kube-scheduler
//! of every supported release other than the pinned one (`tests/controlplane/releases/`, built by
//! `make controlplanes`). `differential.rs` runs the same scenarios, with the rest, on the pinned
//! release; `make versions-sample` (part of `make test`) runs a sample of the simulate and DRA
//! suites on every other release, and `make difftest-versions` every differential suite on every
//! release.
//!
//! One test per release, one release at a time (each starts its own control plane, runs every
//! scenario on it and stops it), so a release's failures are reported together, under its name.
//! sched-core evaluates with the release's defaults (`common::release_engine`), exactly as it
//! does for the shared control plane.

mod common;

use anyhow::{Context, Result, ensure};
use common::scenarios::{SCENARIOS, run_on};
use e2e::{ControlPlane, Options};
use tokio::sync::Mutex;

/// One release's control plane at a time: they would compete for two cores.
static ONE_RELEASE_AT_A_TIME: Mutex<()> = Mutex::const_new(());

/// The components a release's control plane runs, stopped when its scenarios are done.
const COMPONENTS: [&str; 4] = [
    "kube-scheduler",
    "kube-controller-manager",
    "kube-apiserver",
    "etcd",
];

/// Starts `minor`'s control plane (as the shared one: kube-scheduler and the PV binder), runs
/// every scenario on it, stops it, and fails listing every scenario that failed.
async fn scenarios_on(minor: &str) -> Result<()> {
    let _turn = ONE_RELEASE_AT_A_TIME.lock().await;
    let cp = ControlPlane::start(
        Options::new()
            .with_release(minor)
            .with_scheduler(None)
            .with_controller_manager(&["persistentvolume-binder"]),
    )
    .await
    .with_context(|| format!("starting the {minor} control plane"))?;
    // The lab holds a `&'static ControlPlane` (the shared one lives as long as the test binary);
    // this one's processes are stopped below, and the watchdog removes its directory when the
    // test binary ends.
    let cp: &'static ControlPlane = Box::leak(Box::new(cp));
    let mut failures = Vec::new();
    for (id, _) in SCENARIOS {
        if let Err(e) = run_on(id, cp).await {
            failures.push(format!("{minor} {id}: {e:#}"));
        }
    }
    for component in COMPONENTS {
        cp.stop_component(component);
    }
    ensure!(
        failures.is_empty(),
        "{} of {} scenarios failed on {minor} ({}):\n{}",
        failures.len(),
        SCENARIOS.len(),
        cp.release()?,
        failures.join("\n")
    );
    Ok(())
}

#[tokio::test]
async fn v1_33() -> Result<()> {
    scenarios_on("v1.33").await
}

#[tokio::test]
async fn v1_34() -> Result<()> {
    scenarios_on("v1.34").await
}

#[tokio::test]
async fn v1_35() -> Result<()> {
    scenarios_on("v1.35").await
}

#[tokio::test]
async fn v1_36() -> Result<()> {
    scenarios_on("v1.36").await
}

/// The tests above are every release of `tests/controlplane/releases/`: a release added there
/// (releases/add.sh) needs its test here.
#[test]
fn every_other_release_has_its_test() {
    assert_eq!(e2e::releases(), ["v1.33", "v1.34", "v1.35", "v1.36"]);
}
