//! What the built binary's tests share: running it apart from the machine's kubeconfig, and the
//! bundled example cluster.

#![allow(dead_code)] // Each test binary uses its own subset.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_kubectl-sched");

/// The binary run with `args`; nothing may depend on the machine's kubeconfig or backtrace setting.
pub fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("running kubectl-sched")
}

/// examples/cluster.yaml.
pub fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("examples")
        .join("cluster.yaml")
}

/// tests/fixtures/preemption.yaml: the preemption drill's cluster.
pub fn drill_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("fixtures")
        .join("preemption.yaml")
}

/// What the run printed on stdout.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// What the run printed on stderr.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// stdout of a run that must exit 0.
pub fn ok(o: Output) -> String {
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    stdout(&o)
}

/// stdout of a run that must exit 0, as JSON.
pub fn json(o: Output) -> serde_json::Value {
    let text = ok(o);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}
