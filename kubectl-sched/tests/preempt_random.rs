//! `preempt` where kube-scheduler's answer is random: n1's three equal, unstarted pods go as `b` and
//! `c` or as `a` alone, depending on the order kube-scheduler meets them, and with `a` alone n1 beats n2
//! (the last criterion: its victim started later). The table and the JSON must say so.

use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-sched");

const SNAPSHOT: &str = r#"apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: n1}
  status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
- apiVersion: v1
  kind: Node
  metadata: {name: n2}
  status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
- apiVersion: v1
  kind: Pod
  metadata: {name: a, namespace: default, uid: uid-a}
  spec:
    nodeName: n1
    priority: 1
    containers: [{name: c, image: i, resources: {requests: {cpu: "2"}}}]
- apiVersion: v1
  kind: Pod
  metadata: {name: b, namespace: default, uid: uid-b}
  spec:
    nodeName: n1
    priority: 1
    containers: [{name: c, image: i, resources: {requests: {cpu: "1"}}}]
- apiVersion: v1
  kind: Pod
  metadata: {name: c, namespace: default, uid: uid-c}
  spec:
    nodeName: n1
    priority: 1
    containers: [{name: c, image: i, resources: {requests: {cpu: "1"}}}]
- apiVersion: v1
  kind: Pod
  metadata: {name: x, namespace: default, uid: uid-x}
  spec:
    nodeName: n2
    priority: 1
    containers: [{name: c, image: i, resources: {requests: {cpu: "3"}}}]
  status: {phase: Running, startTime: "2020-01-01T00:01:00Z"}
- apiVersion: v1
  kind: Pod
  metadata: {name: y, namespace: default, uid: uid-y}
  spec:
    nodeName: n2
    priority: 1
    containers: [{name: c, image: i, resources: {requests: {cpu: "1"}}}]
  status: {phase: Running, startTime: "2020-01-01T00:02:00Z"}
- apiVersion: v1
  kind: Pod
  metadata: {name: p, namespace: default, uid: uid-p}
  spec:
    priority: 100
    containers: [{name: c, image: i, resources: {requests: {cpu: "2"}}}]
  status: {phase: Pending}
"#;

fn preempt(format: &str, extra: &[&str]) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("cluster.yaml");
    std::fs::write(&file, SNAPSHOT).expect("writing the snapshot");
    let out = Command::new(BIN)
        .args(["preempt", "p", "-o", format, "--from"])
        .arg(&file)
        .args(extra)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .expect("running kubectl-sched");
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn random_parts_are_reported_in_json() {
    let v: Value = serde_json::from_str(&preempt("json", &[])).expect("JSON");
    assert_eq!(v["node"], "n2");
    assert_eq!(v["tied_nodes"], serde_json::json!(["n2"]));
    assert_eq!(v["possible_nodes"], serde_json::json!(["n2", "n1"]));
    assert_eq!(v["alternative_victims"], serde_json::json!([]));
    assert_eq!(
        v["message_alternatives"],
        serde_json::json!([
            "preemption: found a potential placement for pod on node n1, preempting 1 victims"
        ])
    );
    let n1 = v["candidates"]
        .as_array()
        .expect("candidates[]")
        .iter()
        .find(|c| c["node"] == "n1")
        .expect("n1 is a candidate");
    assert_eq!(
        n1["alternative_victims"],
        serde_json::json!([{"victims": ["default/a"], "pdb_violations": 0}])
    );
    let parts: Vec<&str> = v["random_outcome"]
        .as_array()
        .expect("random_outcome[]")
        .iter()
        .filter_map(|s| s.as_str()?.split(':').next())
        .collect();
    assert_eq!(parts, ["node", "message"]);
}

#[test]
fn random_parts_are_reported_in_the_table() {
    let table = preempt("table", &[]);
    for want in [
        "n1          2~",
        "~: which pods go there is random",
        "Random: kube-scheduler may pick any of n2, n1",
        "Instead of the message above, kube-scheduler may write:\n  preemption: found a potential placement for pod on node n1, preempting 1 victims\n",
    ] {
        assert!(table.contains(want), "{want:?} missing from:\n{table}");
    }
}

/// Planned on n1 (`--node`): its victims are one of two sets, and the table lists the other.
#[test]
fn other_victim_sets_of_the_planned_node_are_listed() {
    let table = preempt("table", &["--node", "n1"]);
    let want = "Random: these victims are one of 2 possible sets.";
    assert!(table.contains(want), "{want:?} missing from:\n{table}");
    let listed = table.split(want).nth(1).unwrap_or_default();
    assert!(listed.contains("it may take instead:\n  default/a\n"), "{table}");
    let v: Value = serde_json::from_str(&preempt("json", &["--node", "n1"])).expect("JSON");
    assert_eq!(
        v["alternative_victims"],
        serde_json::json!([{"victims": ["default/a"], "pdb_violations": 0}])
    );
    assert_eq!(v["alternative_victims_capped"], false);
}
