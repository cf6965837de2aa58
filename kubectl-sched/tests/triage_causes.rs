//! Issue 30, items 2 and 4, on snapshot files: triage's root cause is what must change (not the
//! first filter kube-scheduler ran), node counts are attached only to per-node reasons, and a pod
//! whose ResourceClaim is still to be made from a template is headlined with that claim and who
//! makes it. The same on the real control plane: `tests/tests/triage_root_cause.rs`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-sched");
const NO_PV: &str = "node(s) didn't find available persistent volumes to bind";

fn repo_file(parts: &[&str]) -> PathBuf {
    parts
        .iter()
        .fold(Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf(), |p, part| {
            p.join(part)
        })
}

fn run(args: &[&str], from: &Path) -> Output {
    Command::new(BIN)
        .args(args)
        .args(["--from", from.to_str().expect("utf-8 path")])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("running kubectl-sched")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The workload group `kind/name` of triage's JSON and its cause.
fn group<'a>(report: &'a Value, kind: &str, name: &str) -> (&'a Value, &'a Value) {
    report["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| {
            c["workloads"]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |w| (c, w))
        })
        .find(|(_, w)| w["workload"]["kind"] == kind && w["workload"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind}/{name} in {report:#}"))
}

#[test]
fn a_pod_needing_a_volume_that_does_not_exist_is_a_volume_binding_group_whatever_else_fails() {
    let file = repo_file(&["tests", "fixtures", "root-cause.yaml"]);
    let o = run(&["triage", "-n", "shop", "-o", "json"], &file);
    assert_eq!(o.status.code(), Some(3), "{}", String::from_utf8_lossy(&o.stderr));
    let report: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let (cause, db) = group(&report, "statefulset", "db");
    assert_eq!(cause["cause"], NO_PV, "{cause:#}");
    assert_eq!(
        db["root_cause"],
        json!({"plugin": "VolumeBinding", "reason": NO_PV, "basis": "every_node", "nodes": 3})
    );
    // kube-scheduler's own counts stay beside it: the first filter that rejected each node.
    assert_eq!(db["reasons"], json!([{"reason": "Insufficient cpu", "nodes": 3}]));
    // A PreFilter rejection is about the pod: no node count.
    let (cause, uploads) = group(&report, "pod", "uploads");
    let missing = "persistentvolumeclaim \"uploads-data\" not found";
    assert_eq!(cause["cause"], missing);
    assert_eq!(uploads["reasons"], json!([{"reason": missing}]));
    assert_eq!(uploads["root_cause"]["basis"], "pre_filter");

    let text = stdout(&run(&["triage", "-n", "shop"], &file));
    for part in [
        format!(
            "CANNOT BE SCHEDULED (1 pod, 1 workload): {NO_PV}\n  statefulset/db: 1 pod — 3 Insufficient cpu\n"
        ),
        format!(
            "    root cause: {NO_PV} — VolumeBinding rejects all 3 nodes (every filter run): no node opens \
             until it changes, whatever else also fails (kube-scheduler counts each node under the first \
             filter that rejected it)\n"
        ),
        format!("  pod/uploads: 1 pod — {missing}\n"),
    ] {
        assert!(text.contains(&part), "{part:?} not in:\n{text}");
    }
    assert!(!text.contains("3 persistentvolumeclaim"), "{text}");
}

#[test]
fn a_claim_not_created_yet_is_named_with_its_template_and_the_controller_that_makes_it() {
    let file = repo_file(&["..", "examples", "dra.yaml"]);
    let o = run(&["explain", "notebook", "-n", "ml"], &file);
    let text = stdout(&o);
    assert!(
        text.starts_with(
            "ml/notebook waits for its ResourceClaims (profile default-scheduler, 4 nodes, kube-scheduler \
             v1.37.2 semantics):\n  ResourceClaim ml/notebook-gpu-… (claim gpu) is not created yet: the \
             resourceclaim controller makes it from template notebook-gpu\n  kube-scheduler: pod \
             \"ml/notebook\": ResourceClaim not created yet\nOnce its claims exist, it would be scheduled on "
        ),
        "{text}"
    );
    assert!(!text.contains("non-empty scheduling gates"), "{text}");
    // The ticket form says the same, not "is gated".
    let markdown = stdout(&run(
        &["explain", "notebook", "-n", "ml", "-o", "markdown"],
        &file,
    ));
    assert!(
        markdown.starts_with("### `ml/notebook` waits for its ResourceClaims\n")
            && markdown.contains(
                "ResourceClaim ml/notebook-gpu-… (claim gpu) is not created yet: the resourceclaim controller \
                 makes it from template notebook-gpu\nkube-scheduler: pod \"ml/notebook\": ResourceClaim not \
                 created yet\n"
            ),
        "{markdown}"
    );

    let o = run(&["triage", "-n", "ml", "-o", "json"], &file);
    let report: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let (cause, notebook) = group(&report, "pod", "notebook");
    assert_eq!(cause["verdict"], "claims_not_created");
    assert_eq!(
        cause["cause"],
        "ResourceClaim (claim gpu) is not created yet: the resourceclaim controller makes it from template \
         notebook-gpu"
    );
    assert_eq!(notebook["still_pending"][0]["kind"], "claim_not_created");
}
