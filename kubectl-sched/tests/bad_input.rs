//! The bad-input catalogue: one row per class of malformed or hostile input to the snapshot loader
//! (`--from FILE`, JSON and YAML), to `-f POD.yaml` and to `simulate -f` / `--add-nodes`, each with the
//! exact error line or the defined outcome, run through the built binary on temporary files. Never a panic: every row also checks that
//! stderr carries no panic and no "internal error". RELIABILITY.md lists the same classes.

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-sched");

/// A one-node cluster (4 cpu, 8Gi) as a List; `items` are appended after the node.
fn snapshot(items: &[&str]) -> String {
    let mut text = String::from(
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {name: n1, labels: \
         {kubernetes.io/hostname: n1}}\n  status:\n    allocatable: {cpu: \"4\", memory: 8Gi, pods: \"110\"}\n",
    );
    for item in items {
        text.push_str(item);
    }
    text
}

/// The pending pod shop/web (100m cpu) as a List item; `spec` lines (indented 4) are added to its spec,
/// `requests` replaces its requests.
fn web(spec: &str, requests: &str) -> String {
    format!(
        "- apiVersion: v1\n  kind: Pod\n  metadata: {{name: web, namespace: shop, labels: {{app: web}}}}\n  \
         spec:\n{spec}    containers:\n    - name: c\n      image: nginx\n      resources:\n        requests: \
         {requests}\n"
    )
}

/// shop/web as a single document, for `-f`.
fn web_document(spec: &str, requests: &str) -> String {
    web(spec, requests)
        .strip_prefix("- ")
        .expect("a list item")
        .replace("\n  ", "\n")
}

const PLAIN: &str = "{cpu: 100m}";

/// The headline of the answer for shop/web on the one-node cluster when it fits.
const FITS: &str = "shop/web would be scheduled on n1 with score 471 (profile default-scheduler, 1 nodes, kube-scheduler v1.37.2 semantics).\n";

/// What a row expects.
enum Want {
    /// Exit 1 and exactly this one line on stderr (`{snapshot}` and `{pod}` stand for the files).
    Error(&'static str),
    /// Exit `code`, stdout starting with `stdout` and stderr exactly `stderr` (each with the
    /// placeholders).
    Answer {
        code: i32,
        stdout: &'static str,
        stderr: &'static str,
    },
}

struct Row {
    /// The input class, as RELIABILITY.md names it.
    class: &'static str,
    /// The snapshot file's name (its extension says nothing: the loader sniffs the format) and text.
    snapshot: (&'static str, Vec<u8>),
    /// `-f`'s file, when the row is about the pod file.
    pod: Option<String>,
    /// The command, before `--from`; `{pod}` stands for `-f`'s file.
    args: &'static [&'static str],
    want: Want,
}

const EXPLAIN_WEB: &[&str] = &["explain", "web", "-n", "shop"];
const EXPLAIN_F: &[&str] = &["explain", "-f", "{pod}"];
const SIMULATE_F: &[&str] = &["simulate", "-f", "{pod}"];

fn fill(text: &str, snapshot: &Path, pod: &Path) -> String {
    text.replace("{snapshot}", &snapshot.display().to_string())
        .replace("{pod}", &pod.display().to_string())
}

fn run(row: &Row, dir: &Path) -> (Output, String, String) {
    let snapshot = dir.join(row.snapshot.0);
    std::fs::write(&snapshot, &row.snapshot.1).expect("writing the snapshot");
    let pod = dir.join("pod.yaml");
    if let Some(text) = &row.pod {
        std::fs::write(&pod, text).expect("writing the pod file");
    }
    let args: Vec<String> = row.args.iter().map(|a| fill(a, &snapshot, &pod)).collect();
    let out = Command::new(BIN)
        .args(&args)
        .arg("--from")
        .arg(&snapshot)
        // The files here record no version: the release is named, so that stderr holds only what the
        // input itself causes.
        .args(["--kube-version", "v1.37.2"])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("running kubectl-sched");
    (out, snapshot.display().to_string(), pod.display().to_string())
}

/// Deeply nested brackets, `depth` levels.
fn nested(depth: usize) -> String {
    "[".repeat(depth) + &"]".repeat(depth)
}

fn rows() -> Vec<Row> {
    let pvc_volume = "    volumes:\n    - name: d\n      persistentVolumeClaim: {claimName: data}\n";
    let node_json = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"},"status":{"allocatable":{"cpu":"4","memory":"8Gi","pods":"110"}}}"#;
    let web_json = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"shop"},"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"100m"}}}]}}"#;
    let list_json = format!(r#"{{"apiVersion":"v1","kind":"List","items":[{node_json},{web_json}]}}"#);
    let yaml = |items: &[&str]| snapshot(items).into_bytes();
    vec![
        Row {
            class: "truncated JSON",
            snapshot: (
                "snapshot.json",
                list_json.as_bytes()[..list_json.len() - 40].to_vec(),
            ),
            pod: None,
            args: EXPLAIN_WEB,
            want: Want::Error(
                "error: {snapshot}: document[0] (line 1, column 282): malformed JSON: EOF while parsing a string",
            ),
        },
        Row {
            class: "truncated YAML",
            snapshot: ("snapshot.yaml", {
                let text = snapshot(&[&web("", PLAIN)]);
                // Cut inside a flow mapping, as a copy that stopped short leaves it.
                text.as_bytes()[..text.find("labels: {ap").expect("labels") + "labels: {ap".len()].to_vec()
            }),
            pod: None,
            args: EXPLAIN_WEB,
            want: Want::Error(
                "error: {snapshot}: document[0] (line 12, column 1): malformed YAML: did not find expected ',' or '}' \
                 at line 12 column 1, while parsing a flow mapping",
            ),
        },
        Row {
            class: "not UTF-8",
            snapshot: (
                "snapshot.yaml",
                b"apiVersion: v1\nkind: List\nitems:\n- \xff\xfe\n".to_vec(),
            ),
            pod: None,
            args: EXPLAIN_WEB,
            want: Want::Error(
                "error: {snapshot}: document[0] (line 4, column 3): malformed YAML: invalid UTF-8 at byte 35",
            ),
        },
        Row {
            class: "wrong field type",
            snapshot: ("snapshot.yaml", yaml(&[&web("    priority: high\n", PLAIN)])),
            pod: None,
            args: EXPLAIN_WEB,
            want: Want::Error(
                "error: {snapshot}: document[0].items[1] (line 13, column 15): Pod shop/web: items[1].spec.priority: \
                 invalid type: string \"high\", expected i32",
            ),
        },
        Row {
            class: "item without kind",
            snapshot: (
                "snapshot.yaml",
                yaml(&["- apiVersion: v1\n  metadata: {name: x}\n"]),
            ),
            pod: None,
            args: EXPLAIN_WEB,
            want: Want::Error("error: {snapshot}: document[0].items[1]: list item has no kind"),
        },
        Row {
            class: "top-level value not an object",
            snapshot: ("snapshot.json", nested(100_000).into_bytes()),
            pod: None,
            args: EXPLAIN_WEB,
            want: Want::Error(
                "error: {snapshot}: document[0] (line 1, column 1): not a Kubernetes object or List: invalid type: \
                 sequence, expected a string",
            ),
        },
        Row {
            class: "wrong apiVersion for a kind the engine reads",
            snapshot: ("snapshot.yaml", {
                let pdb = "- apiVersion: policy/v1beta1\n  kind: PodDisruptionBudget\n  metadata: {name: b, namespace: shop}\n";
                yaml(&[&web("", PLAIN), pdb])
            }),
            pod: None,
            args: EXPLAIN_WEB,
            want: Want::Answer {
                code: 0,
                stdout: FITS,
                stderr: "warning: skipped 1 object(s) of kind PodDisruptionBudget (policy/v1beta1): kubectl-sched reads \
                         PodDisruptionBudget as policy/v1 only, so these are ignored\n",
            },
        },
        Row {
            class: "unknown kind",
            snapshot: (
                "snapshot.yaml",
                yaml(&[
                    &web("", PLAIN),
                    "- apiVersion: example.com/v1\n  kind: Frobnicator\n  metadata: {name: f}\n",
                ]),
            ),
            pod: None,
            args: EXPLAIN_WEB,
            want: Want::Answer {
                code: 0,
                stdout: FITS,
                stderr: "",
            },
        },
        Row {
            class: "deep nesting (JSON, in a skipped kind and in a pruned field)",
            snapshot: ("snapshot.json", {
                let deep = nested(100_000);
                let configmap = format!(
                    r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"x"}},"data":{deep}}}"#
                );
                let pod = web_json.replace(r#"{"name":"c","#, &format!(r#"{{"name":"c","args":{deep},"#));
                format!(r#"{{"apiVersion":"v1","kind":"List","items":[{node_json},{configmap},{pod}]}}"#)
                    .into_bytes()
            }),
            pod: None,
            args: EXPLAIN_WEB,
            want: Want::Answer {
                code: 0,
                stdout: FITS,
                stderr: "",
            },
        },
        Row {
            // Refused before the parser, whose time is quadratic in flow nesting (46 s for these
            // 100,000 levels in a debug build before the guard).
            class: "deep nesting (YAML, flow collections)",
            snapshot: (
                "snapshot.yaml",
                yaml(&[
                    &web("", PLAIN),
                    &format!(
                        "- apiVersion: v1\n  kind: ConfigMap\n  metadata: {{name: x}}\n  data: {}\n",
                        nested(100_000)
                    ),
                ]),
            ),
            pod: None,
            args: EXPLAIN_WEB,
            want: Want::Error(
                "error: {snapshot}: document[0] (line 21, column 137): malformed YAML: flow collections ([ or {) \
                 nested more than 128 levels deep",
            ),
        },
        Row {
            // Under the guard's bound, over the parser's limit on all nesting (the List and its item
            // count too): the parser's own error, as cheap.
            class: "deep nesting (YAML, past the parser's limit)",
            snapshot: (
                "snapshot.yaml",
                yaml(&[
                    &web("", PLAIN),
                    &format!(
                        "- apiVersion: v1\n  kind: ConfigMap\n  metadata: {{name: x}}\n  data: {}\n",
                        nested(128)
                    ),
                ]),
            ),
            pod: None,
            args: EXPLAIN_WEB,
            want: Want::Error(
                "error: {snapshot}: document[0] (line 21, column 134): malformed YAML: recursion limit exceeded",
            ),
        },
        Row {
            class: "huge object",
            snapshot: ("snapshot.yaml", {
                let label = "v".repeat(4 << 20);
                let containers: String = (0..2_000)
                    .map(|i| format!("    - {{name: c{i}, resources: {{requests: {{cpu: 1m}}}}}}\n"))
                    .collect();
                let pod = format!(
                    "- apiVersion: v1\n  kind: Pod\n  metadata: {{name: web, namespace: shop, labels: {{big: {label}}}}}\n  \
                     spec:\n    containers:\n{containers}"
                );
                yaml(&[&pod])
            }),
            pod: None,
            args: EXPLAIN_WEB,
            want: Want::Answer {
                code: 0,
                stdout: "shop/web would be scheduled on n1 with score 387 (profile default-scheduler, 1 nodes, kube-scheduler v1.37.2 semantics).\n",
                stderr: "",
            },
        },
        Row {
            class: "quantity that does not parse",
            snapshot: ("snapshot.yaml", yaml(&[&web("", "{cpu: oops}")])),
            pod: None,
            args: EXPLAIN_WEB,
            want: Want::Error(
                "error: {snapshot}: Pod shop/web: spec.containers[0].resources.requests.cpu: quantity \"oops\" does \
                 not parse",
            ),
        },
        Row {
            class: "negative quantity",
            snapshot: ("snapshot.yaml", yaml(&[&web("", "{memory: \"-1Gi\"}")])),
            pod: None,
            args: EXPLAIN_WEB,
            want: Want::Error(
                "error: {snapshot}: Pod shop/web: spec.containers[0].resources.requests.memory: quantity \"-1Gi\" is \
                 negative (the API server requires it to be greater than or equal to 0)",
            ),
        },
        Row {
            class: "absurd quantity",
            snapshot: ("snapshot.yaml", yaml(&[&web("", "{cpu: \"1e100\"}")])),
            pod: None,
            args: EXPLAIN_WEB,
            want: Want::Error(
                "error: {snapshot}: Pod shop/web: spec.containers[0].resources.requests.cpu: quantity \"1e100\" is too \
                 large (more than 2^53 in the scheduler's units: millicores for cpu, else bytes or counts): sums of \
                 such amounts overflow kube-scheduler's int64 arithmetic",
            ),
        },
        Row {
            class: "unknown resource",
            snapshot: ("snapshot.yaml", yaml(&[&web("", "{example.com/foo: \"1\"}")])),
            pod: None,
            args: EXPLAIN_WEB,
            want: Want::Answer {
                code: 0,
                stdout: "shop/web cannot be scheduled (profile default-scheduler, 1 nodes, kube-scheduler v1.37.2 semantics):\n  0/1 nodes are available: 1 \
                         Insufficient example.com/foo. preemption: 0/1 nodes are available: 1 Preemption is not helpful \
                         for scheduling.\n",
                stderr: "",
            },
        },
        Row {
            class: "invalid node selector operator",
            snapshot: (
                "snapshot.yaml",
                yaml(&[&web(
                    "    affinity:\n      nodeAffinity:\n        requiredDuringSchedulingIgnoredDuringExecution:\n          \
                 nodeSelectorTerms:\n          - matchExpressions:\n            - {key: kubernetes.io/hostname, \
                 operator: Near, values: [n1]}\n",
                    PLAIN,
                )]),
            ),
            pod: None,
            args: EXPLAIN_WEB,
            want: Want::Answer {
                code: 0,
                stdout: "shop/web cannot be scheduled (profile default-scheduler, 1 nodes, kube-scheduler v1.37.2 semantics):\n  0/1 nodes are available: 1 \
                         node(s) didn't match Pod's node affinity/selector. preemption: 0/1 nodes are available: 1 \
                         Preemption is not helpful for scheduling.\n",
                stderr: "",
            },
        },
        Row {
            class: "invalid label selector operator (pod affinity)",
            snapshot: (
                "snapshot.yaml",
                yaml(&[&web(
                    "    affinity:\n      podAntiAffinity:\n        requiredDuringSchedulingIgnoredDuringExecution:\n        \
                 - topologyKey: kubernetes.io/hostname\n          labelSelector:\n            matchExpressions:\n            \
                 - {key: app, operator: Near, values: [web]}\n",
                    PLAIN,
                )]),
            ),
            pod: None,
            args: EXPLAIN_WEB,
            want: Want::Answer {
                code: 0,
                stdout: "shop/web cannot be scheduled (profile default-scheduler, 1 nodes, kube-scheduler v1.37.2 semantics):\n  0/1 nodes are available: \
                         parsing pod: \"Near\" is not a valid label selector operator. not found\n",
                stderr: "",
            },
        },
        Row {
            class: "invalid label selector operator (topology spread)",
            snapshot: (
                "snapshot.yaml",
                yaml(&[&web(
                    "    topologySpreadConstraints:\n    - maxSkew: 1\n      topologyKey: kubernetes.io/hostname\n      \
                 whenUnsatisfiable: DoNotSchedule\n      labelSelector:\n        matchExpressions:\n        - {key: app, \
                 operator: Near, values: [web]}\n",
                    PLAIN,
                )]),
            ),
            pod: None,
            args: EXPLAIN_WEB,
            want: Want::Answer {
                code: 0,
                stdout: "shop/web: the scheduling cycle fails: running PreFilter plugin \"PodTopologySpread\": get \
                         constraints from pod: obtaining pod's hard topology spread constraints: \"Near\" is not a valid \
                         label selector operator (profile default-scheduler, 1 nodes, kube-scheduler v1.37.2 semantics)\n",
                stderr: "",
            },
        },
        Row {
            class: "missing PVC",
            snapshot: ("snapshot.yaml", yaml(&[&web(pvc_volume, PLAIN)])),
            pod: None,
            args: EXPLAIN_WEB,
            want: Want::Answer {
                code: 0,
                stdout: "shop/web cannot be scheduled (profile default-scheduler, 1 nodes, kube-scheduler v1.37.2 semantics):\n  0/1 nodes are available: \
                         persistentvolumeclaim \"data\" not found. not found\n",
                stderr: "",
            },
        },
        Row {
            class: "PVC bound to a missing PV",
            snapshot: (
                "snapshot.yaml",
                yaml(&[
                    &web(pvc_volume, PLAIN),
                    "- apiVersion: v1\n  kind: PersistentVolumeClaim\n  metadata: {name: data, namespace: shop, annotations: \
                 {pv.kubernetes.io/bind-completed: \"yes\"}}\n  spec: {volumeName: gone, storageClassName: \"\", \
                 accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n  status: {phase: Bound}\n",
                ]),
            ),
            pod: None,
            args: EXPLAIN_WEB,
            want: Want::Answer {
                code: 0,
                // VolumeZone's PreFilter looks the PV up before VolumeBinding's Filter would.
                stdout: "shop/web cannot be scheduled (profile default-scheduler, 1 nodes, kube-scheduler v1.37.2 semantics):\n  0/1 nodes are available: \
                         persistentvolume \"gone\" not found. not found\n",
                stderr: "",
            },
        },
        Row {
            class: "PVC of a missing StorageClass",
            snapshot: (
                "snapshot.yaml",
                yaml(&[
                    &web(pvc_volume, PLAIN),
                    "- apiVersion: v1\n  kind: PersistentVolumeClaim\n  metadata: {name: data, namespace: shop}\n  spec: \
                 {storageClassName: fast, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n  \
                 status: {phase: Pending}\n",
                ]),
            ),
            pod: None,
            args: EXPLAIN_WEB,
            want: Want::Answer {
                code: 0,
                stdout: "shop/web cannot be scheduled (profile default-scheduler, 1 nodes, kube-scheduler v1.37.2 semantics):\n  0/1 nodes are available: \
                         pod has unbound immediate PersistentVolumeClaims. not found\n",
                stderr: "",
            },
        },
        Row {
            class: "missing PriorityClass, no priority",
            snapshot: (
                "snapshot.yaml",
                yaml(&[&web("    priorityClassName: gold\n", PLAIN)]),
            ),
            pod: None,
            args: EXPLAIN_WEB,
            want: Want::Error(
                "error: {snapshot}: Pod shop/web: spec.priorityClassName: no PriorityClass with name gold was found: \
                 the API server's Priority admission refuses such a pod",
            ),
        },
        Row {
            class: "missing PriorityClass, priority set",
            snapshot: (
                "snapshot.yaml",
                yaml(&[&web("    priorityClassName: gold\n    priority: 7\n", PLAIN)]),
            ),
            pod: None,
            args: EXPLAIN_WEB,
            want: Want::Answer {
                code: 0,
                stdout: FITS,
                stderr: "",
            },
        },
        Row {
            class: "duplicate object",
            snapshot: ("snapshot.yaml", yaml(&[&web("", PLAIN), &web("", "{cpu: 200m}")])),
            pod: None,
            args: EXPLAIN_WEB,
            want: Want::Error(
                "error: {snapshot}: Pod shop/web appears twice (the 1st and the 2nd Pod read): a cluster holds one Pod \
                 of a name; remove one copy",
            ),
        },
        // -f POD.yaml
        Row {
            class: "-f: truncated",
            snapshot: ("snapshot.yaml", yaml(&[])),
            pod: Some("apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: shop\n".into()),
            args: EXPLAIN_F,
            want: Want::Error(
                "error: {pod}: document 0: did not find expected ',' or '}' at line 4 column 1, while parsing a flow \
                 mapping at line 3 column 11",
            ),
        },
        Row {
            class: "-f: not a Pod",
            snapshot: ("snapshot.yaml", yaml(&[])),
            pod: Some("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n".into()),
            args: EXPLAIN_F,
            want: Want::Error("error: {pod}: expected exactly one Pod, found 0"),
        },
        Row {
            class: "-f: several Pods",
            snapshot: ("snapshot.yaml", yaml(&[])),
            pod: Some(format!(
                "{}---\n{}",
                web_document("", PLAIN),
                web_document("", PLAIN)
            )),
            args: EXPLAIN_F,
            want: Want::Error("error: {pod}: expected exactly one Pod, found 2"),
        },
        Row {
            class: "-f: quantity that does not parse",
            snapshot: ("snapshot.yaml", yaml(&[])),
            pod: Some(web_document("", "{cpu: oops}")),
            args: EXPLAIN_F,
            want: Want::Error(
                "error: {pod}: Pod shop/web: spec.containers[0].resources.requests.cpu: quantity \"oops\" does not parse",
            ),
        },
        Row {
            class: "-f: negative limit",
            snapshot: ("snapshot.yaml", yaml(&[])),
            pod: Some(web_document("", "{cpu: 100m}\n        limits: {cpu: \"-1\"}")),
            args: EXPLAIN_F,
            want: Want::Error(
                "error: {pod}: Pod shop/web: spec.containers[0].resources.limits.cpu: quantity \"-1\" is negative (the \
                 API server requires it to be greater than or equal to 0)",
            ),
        },
        Row {
            class: "-f: missing PriorityClass",
            snapshot: ("snapshot.yaml", yaml(&[])),
            pod: Some(web_document("    priorityClassName: gold\n", PLAIN)),
            args: EXPLAIN_F,
            want: Want::Error("error: {pod}: Pod shop/web: no PriorityClass with name gold was found"),
        },
        Row {
            class: "-f: deep nesting",
            snapshot: ("snapshot.yaml", yaml(&[])),
            pod: Some(format!("{}extra: {}\n", web_document("", PLAIN), nested(100_000))),
            args: EXPLAIN_F,
            want: Want::Error(
                "error: {pod}: document 0: flow collections ([ or {) nested more than 128 levels deep at line 10 \
                 column 136",
            ),
        },
        Row {
            class: "simulate -f: deep nesting",
            snapshot: ("snapshot.yaml", yaml(&[])),
            pod: Some(format!("{}extra: {}\n", web_document("", PLAIN), nested(100_000))),
            args: SIMULATE_F,
            want: Want::Error(
                "error: {pod}: document 0: flow collections ([ or {) nested more than 128 levels deep at line 10 \
                 column 136",
            ),
        },
        // simulate -f WORKLOAD.yaml, --add-nodes NODES.yaml
        Row {
            class: "simulate -f: quantity that does not parse in a workload",
            snapshot: ("snapshot.yaml", yaml(&[])),
            pod: Some(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n  replicas: \
                 2\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    \
                 spec:\n      containers:\n      - {name: c, image: nginx, resources: {requests: {cpu: oops}}}\n"
                .to_string(),
            ),
            args: SIMULATE_F,
            want: Want::Error(
                "error: {pod}: Deployment shop/web: spec.template.spec.containers[0].resources.requests.cpu: quantity \
                 \"oops\" does not parse",
            ),
        },
        Row {
            class: "simulate -f: negative claim template",
            snapshot: ("snapshot.yaml", yaml(&[])),
            pod: Some(
                "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec:\n  replicas: 1\n  selector: \
                 {matchLabels: {app: db}}\n  template:\n    metadata: {labels: {app: db}}\n    spec:\n      \
                 containers: [{name: c, image: db}]\n  volumeClaimTemplates:\n  - metadata: {name: data}\n    \
                 spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: \"-1Gi\"}}}\n"
                .to_string(),
            ),
            args: SIMULATE_F,
            want: Want::Error(
                "error: {pod}: StatefulSet default/db: spec.volumeClaimTemplates[0].spec.resources.requests.storage: \
                 quantity \"-1Gi\" is negative (the API server requires it to be greater than or equal to 0)",
            ),
        },
        Row {
            class: "simulate --add-nodes: quantity that does not parse",
            snapshot: ("snapshot.yaml", yaml(&[])),
            pod: Some(
                "apiVersion: v1\nkind: Node\nmetadata: {name: n2}\nstatus:\n  allocatable: {cpu: oops}\n"
                    .into(),
            ),
            args: &["simulate", "--add-nodes", "{pod}"],
            want: Want::Error(
                "error: {pod}: Node n2: status.allocatable.cpu: quantity \"oops\" does not parse",
            ),
        },
    ]
}

/// Every row ends as it says, with no panic.
#[test]
fn bad_input_catalogue() {
    let mut failures = Vec::new();
    for row in rows() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (out, snapshot, pod) = run(&row, dir.path());
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let fill = |s: &str| s.replace("{snapshot}", &snapshot).replace("{pod}", &pod);
        if stderr.contains("panicked") || stderr.contains("internal error") {
            failures.push(format!("{}: panicked: {stderr}", row.class));
            continue;
        }
        let ok = match &row.want {
            Want::Error(line) => out.status.code() == Some(1) && stderr == fill(line) + "\n",
            Want::Answer {
                code,
                stdout: head,
                stderr: err,
            } => out.status.code() == Some(*code) && stdout.starts_with(&fill(head)) && stderr == fill(err),
        };
        if !ok {
            failures.push(format!(
                "{}: exit {:?}\n  stdout: {}\n  stderr: {stderr}",
                row.class,
                out.status.code(),
                stdout.lines().take(3).collect::<Vec<_>>().join("\n          ")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The same rows' snapshots in JSON where they were YAML: the two readers agree on the outcome. Only the
/// rows whose outcome does not depend on the text's positions (errors naming objects and fields,
/// answers).
#[test]
fn json_and_yaml_readers_agree_on_object_errors() {
    let cases = [
        (
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"shop"},"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"oops"}}}]}}"#,
            "Pod shop/web: spec.containers[0].resources.requests.cpu: quantity \"oops\" does not parse",
        ),
        (
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"shop"},"spec":{"priorityClassName":"gold","containers":[{"name":"c"}]}}"#,
            "Pod shop/web: spec.priorityClassName: no PriorityClass with name gold was found: the API server's \
             Priority admission refuses such a pod",
        ),
        (
            r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}
{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}"#,
            "Node n1 appears twice (the 1st and the 2nd Node read): a cluster holds one Node of a name; remove one copy",
        ),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    for (i, (json, want)) in cases.into_iter().enumerate() {
        // YAML needs a document separator between two objects.
        let yaml = format!("# as YAML\n{}", json.replace("}\n{", "}\n---\n{"));
        for (ext, text) in [("json", json.to_string()), ("yaml", yaml)] {
            let path = dir.path().join(format!("case-{i}.{ext}"));
            std::fs::write(&path, &text).expect("write");
            let out = Command::new(BIN)
                .args(["explain", "web", "-n", "shop", "--from"])
                .arg(&path)
                .env("KUBECONFIG", "/nonexistent/kubeconfig")
                .output()
                .expect("running kubectl-sched");
            assert_eq!(out.status.code(), Some(1), "{ext} case {i}");
            assert_eq!(
                String::from_utf8_lossy(&out.stderr),
                format!("error: {}: {want}\n", path.display()),
                "{ext} case {i}"
            );
        }
    }
}

/// Not bad input, but what a hand-written snapshot often is: pods with `priorityClassName` and no
/// `priority`. They get the priority admission would give them (the named class's, the global default
/// class's for a pod that names none), so the preemption drill sees the urgent pod outrank the one in
/// its way, which it would not at priority 0 against 0.
#[test]
fn hand_written_pods_get_their_priority_class() {
    let text = snapshot(&[
        "- apiVersion: v1\n  kind: Pod\n  metadata: {name: batch, namespace: shop, uid: u-batch}\n  spec:\n    \
         nodeName: n1\n    containers:\n    - name: c\n      resources:\n        requests: {cpu: \"4\"}\n",
        "- apiVersion: v1\n  kind: Pod\n  metadata: {name: urgent, namespace: shop, uid: u-urgent}\n  spec:\n    \
         priorityClassName: high\n    containers:\n    - name: c\n      resources:\n        requests: {cpu: \"1\"}\n",
        "- apiVersion: scheduling.k8s.io/v1\n  kind: PriorityClass\n  metadata: {name: high}\n  value: 1000\n",
        "- apiVersion: scheduling.k8s.io/v1\n  kind: PriorityClass\n  metadata: {name: base}\n  value: 10\n  \
         globalDefault: true\n",
    ]);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("snapshot.yaml");
    std::fs::write(&path, text).expect("write");
    let out = Command::new(BIN)
        .args(["preempt", "urgent", "-n", "shop", "-o", "json", "--from"])
        .arg(&path)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .expect("running kubectl-sched");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(v["node"], "n1", "{v:#}");
    let victims: Vec<(String, i64)> = v["victims"]
        .as_array()
        .expect("victims")
        .iter()
        .map(|victim| {
            (
                victim["name"].as_str().unwrap_or_default().to_string(),
                victim["priority"].as_i64().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(victims, [("batch".to_string(), 10)], "the global default's value");
}
