//! `kubectl-sched simulate` run as a user runs it, on the bundled example cluster (no API server):
//! the walkthroughs of the README and docs/simulate.md (a rollout that partly fits, a drain that
//! strands pods), the JSON contract, exit codes, and one-line errors for bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-sched");

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("examples")
        .join(name)
}

/// `simulate --from examples/cluster.yaml ARGS`.
fn simulate(args: &[&str]) -> Output {
    let cluster = example("cluster.yaml");
    Command::new(BIN)
        .arg("simulate")
        .args(["--from", cluster.to_str().expect("utf-8 path")])
        .args(args)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .expect("running kubectl-sched")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The JSON report, with the exit code.
fn report(args: &[&str]) -> (Value, Option<i32>) {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    let out = simulate(&all);
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {} / {}", text(&out.stdout), text(&out.stderr)));
    (v, out.status.code())
}

/// Exit code 1 and exactly one line on stderr, starting with `error: `; returns that line.
fn one_line_error(out: &Output) -> String {
    let err = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout: {} stderr: {err}",
        text(&out.stdout)
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: "), "{err}");
    err.trim_end().to_string()
}

fn pods_of<'a>(v: &'a Value, workload: &str) -> Vec<&'a Value> {
    v["pods"]
        .as_array()
        .expect("pods")
        .iter()
        .filter(|p| p["workload"] == workload)
        .collect()
}

#[test]
fn a_rollout_that_partly_fits_places_one_replica_and_exits_3() {
    let rollout = example("rollout.yaml");
    let (v, code) = report(&["-f", rollout.to_str().expect("utf-8")]);
    assert_eq!(code, Some(3), "replicas stay pending");
    assert_eq!(v["summary"]["inputs"], 8);
    assert_eq!(v["summary"]["inputs_pending"], 7);
    let web = pods_of(&v, "deployment/web");
    assert_eq!(web.len(), 8);
    assert!(web.iter().all(|p| p["origin"] == "input"));
    let placed: Vec<&Value> = web
        .iter()
        .copied()
        .filter(|p| p["outcome"] == "Scheduled")
        .collect();
    assert_eq!(placed.len(), 1);
    assert_eq!(placed[0]["node"], "worker-small");
    for p in web.iter().filter(|p| p["outcome"] == "Unschedulable") {
        let message = p["message"].as_str().expect("a pending replica has its message");
        assert!(message.starts_with("0/5 nodes are available: "), "{message}");
        assert!(message.contains("Insufficient cpu"), "{message}");
    }
    let workloads = v["workloads"].as_array().expect("workloads");
    assert!(
        workloads
            .iter()
            .any(|w| w["workload"] == "deployment/web" && w["placed"] == 1 && w["total"] == 8),
        "{workloads:?}"
    );
}

#[test]
fn with_one_more_node_the_rollout_fits_and_exits_0() {
    let rollout = example("rollout.yaml");
    let (v, code) = report(&[
        "-f",
        rollout.to_str().expect("utf-8"),
        "--add-node",
        "worker-small=1",
    ]);
    assert_eq!(
        code,
        Some(0),
        "other pods stay pending, but only the rollout counts"
    );
    assert_eq!(v["summary"]["inputs_pending"], 0);
    assert!(v["summary"]["pending"].as_u64().expect("count") > 0);
    let added = v["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["name"] == "worker-small-copy-1")
        .expect("the added node is reported");
    assert_eq!(added["note"], "added");
    assert_eq!(added["pods"]["before"], 0);
    assert!(added["pods"]["after"].as_i64().expect("count") > 0);
}

#[test]
fn a_drain_recreates_controlled_pods_and_reports_the_stranded_ones() {
    let (v, code) = report(&["--drain", "worker-small"]);
    assert_eq!(code, Some(3), "replacements stay pending");
    let change = &v["node_changes"][0];
    assert_eq!(change["node"], "worker-small");
    assert_eq!(change["action"], "drain");
    let evicted: Vec<&str> = change["evicted"]
        .as_array()
        .expect("evicted")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        evicted,
        [
            "kube-system/coredns-7db6d8ff4d-x2x9k",
            "shop/db-0",
            "shop/frontend-1"
        ]
    );
    let replacements: Vec<&str> = change["replacements"]
        .as_array()
        .expect("replacements")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        replacements.contains(&"shop/db-0"),
        "a StatefulSet pod keeps its name: {replacements:?}"
    );
    assert!(
        replacements
            .iter()
            .any(|r| r.starts_with("shop/frontend-6b9f5c8d47-")),
        "a ReplicaSet pod gets a new name: {replacements:?}"
    );
    assert_eq!(change["kept"][0]["pod"], "shop/nightly-report-29110");
    let db0 = v["pods"]
        .as_array()
        .expect("pods")
        .iter()
        .find(|p| p["pod"] == "shop/db-0")
        .expect("db-0's replacement is simulated");
    assert_eq!(db0["origin"], "replacement");
    assert_eq!(db0["outcome"], "Unschedulable");
    let drained = v["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["name"] == "worker-small")
        .expect("the drained node");
    assert_eq!(
        (
            drained["pods"]["before"].as_i64(),
            drained["pods"]["after"].as_i64()
        ),
        (Some(3), Some(0))
    );
    assert_eq!(drained["note"], "drained");
}

#[test]
fn a_drain_kubectl_would_refuse_is_refused_naming_the_pods() {
    let out = simulate(&["--drain", "worker-big"]);
    assert_eq!(
        one_line_error(&out),
        "error: unable to drain node \"worker-big\" due to error: cannot delete Pods that declare no \
         controller (use --force to override): shop/batch-7f9c"
    );
    let (v, _) = report(&["--drain", "worker-big", "--force"]);
    let change = &v["node_changes"][0];
    assert!(
        change["evicted"]
            .as_array()
            .expect("evicted")
            .iter()
            .any(|p| p == "shop/batch-7f9c"),
        "{change}"
    );
}

#[test]
fn bad_input_gets_one_line_naming_what_is_wrong() {
    let missing = simulate(&["-f", "/nonexistent/web.yaml"]);
    assert!(one_line_error(&missing).starts_with("error: /nonexistent/web.yaml: "));

    let dir = tempfile::tempdir().expect("temp dir");
    let config_map = dir.path().join("cm.yaml");
    std::fs::write(
        &config_map,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n",
    )
    .expect("write");
    let line = one_line_error(&simulate(&["-f", config_map.to_str().expect("utf-8")]));
    assert!(line.contains("ConfigMap") && line.contains("settings"), "{line}");

    let broken = dir.path().join("broken.yaml");
    std::fs::write(&broken, "kind: Deployment\nspec: [").expect("write");
    let line = one_line_error(&simulate(&["-f", broken.to_str().expect("utf-8")]));
    assert!(line.contains("broken.yaml"), "{line}");

    assert_eq!(
        one_line_error(&simulate(&["--cordon", "nope"])),
        "error: --cordon nope: no such node"
    );
    let line = one_line_error(&simulate(&["--drain", "nope"]));
    assert!(line.contains("nope"), "{line}");

    let usage = simulate(&["--replicas", "-1", "-f", "x.yaml"]);
    assert_eq!(usage.status.code(), Some(2), "{}", text(&usage.stderr));
}

#[test]
fn the_same_seed_gives_the_same_placements_and_yaml_has_them_too() {
    let rollout = example("rollout.yaml");
    let args = [
        "-f",
        rollout.to_str().expect("utf-8"),
        "--add-node",
        "worker-small=2",
        "--seed",
        "7",
    ];
    let placements = |v: &Value| -> Vec<(String, String)> {
        v["pods"]
            .as_array()
            .expect("pods")
            .iter()
            .map(|p| (p["pod"].to_string(), p["node"].to_string()))
            .collect()
    };
    let (first, _) = report(&args);
    let (second, _) = report(&args);
    assert_eq!(placements(&first), placements(&second));

    let mut yaml_args = args.to_vec();
    yaml_args.extend(["-o", "yaml"]);
    let out = simulate(&yaml_args);
    let yaml: Value = yaml_serde::from_slice(&out.stdout).expect("YAML");
    assert_eq!(placements(&yaml), placements(&first));
}

/// `text` with the run's wall time ("in 20 ms:") made constant.
fn without_millis(text: &str) -> String {
    text.lines()
        .map(|line| match (line.find(" in "), line.find(" ms: ")) {
            (Some(start), Some(end))
                if start < end && line[start + 4..end].bytes().all(|b| b.is_ascii_digit()) =>
            {
                format!("{} in N ms: {}", &line[..start], &line[end + 5..])
            }
            _ => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The README's gang walkthrough prints what the binary prints, byte for byte but the wall time.
#[test]
fn the_readme_gang_walkthrough_is_the_binarys_output() {
    let readme = std::fs::read_to_string(example("../README.md")).expect("README");
    let marker = "$ kubectl sched simulate --from examples/gang.yaml -f examples/gang-job.yaml\n";
    let start = readme.find(marker).expect("the gang walkthrough in the README") + marker.len();
    let shown = &readme[start..start + readme[start..].find("```\n").expect("the block's end")];
    let out = Command::new(BIN)
        .args([
            "simulate",
            "--from",
            "examples/gang.yaml",
            "-f",
            "examples/gang-job.yaml",
        ])
        .current_dir(example(".."))
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .expect("running kubectl-sched");
    assert_eq!(
        out.status.code(),
        Some(0),
        "the -f gang is placed: {}",
        text(&out.stderr)
    );
    assert_eq!(without_millis(shown), without_millis(&text(&out.stdout)));
}

/// Issue 31: per pod group, -o json says placed/total, where its pods went, or kube-scheduler's
/// words; a gang is bound whole or not at all; a Job whose template names a PodGroup of -f is
/// that gang's pods.
#[test]
fn simulate_reports_each_pod_group() {
    let gang = example("gang.yaml");
    let job = example("gang-job.yaml");
    let out = Command::new(BIN)
        .args(["simulate", "-o", "json", "--from", gang.to_str().expect("utf-8")])
        .args(["-f", job.to_str().expect("utf-8")])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .expect("running kubectl-sched");
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(
        text(&out.stderr).contains("PodGroup(s): evaluating with GenericWorkload on"),
        "{}",
        text(&out.stderr)
    );
    let groups: Vec<(String, String, u64, u64)> = v["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| {
            (
                g["group"].as_str().unwrap_or_default().to_owned(),
                g["outcome"].as_str().unwrap_or_default().to_owned(),
                g["placed"].as_u64().unwrap_or(99),
                g["total"].as_u64().unwrap_or(99),
            )
        })
        .collect();
    let want = [
        ("training/mixtral", "Unschedulable", 0, 6),
        ("training/llama", "Scheduled", 4, 4),
        ("training/bert", "Waiting", 0, 2),
        ("training/whisper", "Scheduled", 3, 3),
    ]
    .map(|(g, o, p, t)| (g.to_owned(), o.to_owned(), p, t));
    assert_eq!(groups, want);
    let mixtral = &v["groups"][0];
    assert_eq!(
        mixtral["message"],
        "minCount (6) cannot be satisfied: 0 scheduled, 5 remaining, pod group preemption: No preemption \
         victims found for incoming preemptor"
    );
    assert_eq!(mixtral["min_count"], 6);
    assert_eq!(
        v["groups"][2]["message"],
        "waiting for minCount pods from a gang to appear in scheduling queue"
    );
    // No pod of the gang that cannot be placed is bound.
    let mixtral_bound = v["pods"]
        .as_array()
        .expect("pods")
        .iter()
        .filter(|p| {
            p["pod"]
                .as_str()
                .is_some_and(|k| k.starts_with("training/mixtral-"))
                && !p["node"].is_null()
        })
        .count();
    assert_eq!(mixtral_bound, 0);
}

/// A bad PodGroup of -f is refused in one line naming the file, the document and the field.
#[test]
fn a_bad_pod_group_of_f_is_one_line() {
    let dir = std::env::temp_dir().join(format!("kubectl-sched-gang-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("bad-gang.yaml");
    std::fs::write(
        &file,
        "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: g}\nspec:\n  \
         schedulingPolicy: {gang: {minCount: 0}}\n",
    )
    .expect("write");
    let err = one_line_error(&simulate(&["-f", file.to_str().expect("utf-8")]));
    assert!(
        err.ends_with(
            "bad-gang.yaml: document 0: PodGroup \"g\": spec.schedulingPolicy.gang.minCount: Invalid value: 0: \
             must be greater than or equal to 1"
        ),
        "{err}"
    );
}
