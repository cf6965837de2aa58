//! The built binary, run on examples/cluster.yaml and on temporary files: what users see, what
//! programs parse, and how errors end (one line, exit 1; usage errors exit 2).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{BIN, drill_fixture, example, json, ok, run, stderr, stdout};
use serde_json::Value;

/// The FailedScheduling message kube-scheduler v1.37.2 writes for shop/report-builder on this cluster
/// (checked against the real scheduler with the same objects).
const REPORT_BUILDER_MESSAGE: &str = "0/5 nodes are available: 1 Insufficient memory, 1 node(s) were \
     unschedulable, 2 Insufficient cpu, 2 node(s) had untolerated taint(s). preemption: 0/5 nodes are \
     available: 1 No preemption victims found for incoming pod, 4 Preemption is not helpful for scheduling.";

fn run_example(args: &[&str]) -> Output {
    let file = example();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--from", file.to_str().expect("utf-8 path")]);
    run(&all)
}

/// Exit code 1 and exactly one line on stderr, starting with `error: `; returns that line.
fn one_line_error(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(1),
        "stdout: {} stderr: {}",
        stdout(o),
        stderr(o)
    );
    let err = stderr(o);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "expected one line: {err:?}");
    assert!(lines[0].starts_with("error: "), "{err:?}");
    assert!(!err.contains("panicked") && !err.contains("backtrace"), "{err:?}");
    lines[0].to_string()
}

fn temp_file(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("writing temp file");
    (dir, path)
}

#[test]
fn unschedulable_pod_gets_the_exact_failed_scheduling_message_as_headline() {
    let out = ok(run_example(&["explain", "report-builder", "-n", "shop"]));
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some(
            "shop/report-builder cannot be scheduled (profile default-scheduler, 5 nodes, kube-scheduler v1.37.2 semantics):"
        )
    );
    assert_eq!(lines.next(), Some(format!("  {REPORT_BUILDER_MESSAGE}").as_str()));
    // The table: feasible first, then by name; header first.
    let table: Vec<&str> = out.lines().skip(3).take_while(|l| !l.is_empty()).collect();
    assert!(
        table[0].starts_with("NODE") && table[0].ends_with("SCORE"),
        "{}",
        table[0]
    );
    let names: Vec<&str> = table[1..]
        .iter()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "control-plane",
            "gpu-1",
            "worker-big",
            "worker-cordoned",
            "worker-small"
        ]
    );
    let worker_big = table.iter().find(|l| l.starts_with("worker-big")).unwrap();
    let cells: Vec<&str> = worker_big
        .split("   ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        cells,
        [
            "worker-big",
            "Unschedulable",
            "NodeResourcesFit",
            "Insufficient cpu",
            "-"
        ]
    );
}

/// The bundled example's pending pods that kube-scheduler cannot place, each with a blocker of its own.
const EXAMPLE_BLOCKED: &[&str] = &[
    "report-builder",
    "trainer",
    "db-2",
    "frontend-3",
    "zone-c-only",
    "analytics",
    "payments",
];

/// `explain POD -o json` on `file`.
fn explain_json_from(file: &Path, pod: &str) -> Value {
    json(run(&[
        "explain",
        pod,
        "-n",
        "shop",
        "-o",
        "json",
        "--from",
        file.to_str().expect("utf-8 path"),
    ]))
}

/// Issue 30's acceptance: the bundled example's explain prints no hint that would not change the
/// verdict. For every pending pod of the example (read from the file, not listed here), each change
/// hint is applied to the example's objects (not to the snapshot the diagnosis changed), written to a
/// file with the example's release, and the pod explained again: it must then be schedulable. Each
/// pod kube-scheduler cannot place for a blocker of its own gets at least one such hint.
#[test]
fn every_hint_on_the_bundled_example_makes_the_pod_schedulable() {
    let dir = tempfile::tempdir().unwrap();
    let (example_objects, report) = sched_core::snapshot::load_file(example()).unwrap();
    let version = report
        .kube_version
        .map(|v| sched_core::features::KubeVersion::parse(&v).unwrap());
    let pending: Vec<String> = example_objects
        .pods
        .iter()
        .filter(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_none_or(str::is_empty)
        })
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    for pod in EXAMPLE_BLOCKED {
        assert!(
            pending.iter().any(|p| p == pod),
            "{pod} is not pending in the example"
        );
    }
    let mut checked = 0;
    for pod in &pending {
        let v = explain_json_from(&example(), pod);
        let changes: Vec<&Value> = v["hints"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|h| h.get("change").is_some())
            .collect();
        if EXAMPLE_BLOCKED.contains(&pod.as_str()) {
            assert_eq!(v["outcome"], "Unschedulable", "{pod}");
            assert!(!changes.is_empty(), "{pod}: no change hint: {:#}", v["hints"]);
        }
        for (i, hint) in changes.into_iter().enumerate() {
            let change: sched_core::diagnosis::Change =
                serde_json::from_value(hint["change"].clone()).unwrap();
            let mut objects = example_objects.clone();
            assert!(
                change.apply_to_objects(&format!("shop/{pod}"), &mut objects),
                "{pod}: {change:?} changed nothing"
            );
            let file = dir.path().join(format!("{pod}-{i}.yaml"));
            let out = std::fs::File::create(&file).unwrap();
            sched_core::snapshot::write_versioned_list_yaml(&objects, version, out).unwrap();
            let after = explain_json_from(&file, pod);
            assert_eq!(
                after["outcome"], "Scheduled",
                "{pod}: hint {:?} did not make it schedulable: {}",
                hint["message"], after["message"]
            );
            checked += 1;
        }
    }
    assert!(checked > EXAMPLE_BLOCKED.len(), "only {checked} hints checked");
}

/// The README's explain examples print what the README shows, byte for byte (their Why/Hints lines
/// included): regenerate a block with the binary when the output changes.
#[test]
fn the_readme_examples_are_the_binarys_output() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    // The text just before the output block, and the command it shows.
    let examples: [(&str, &[&str]); 3] = [
        (
            "Example (the main-job command above):\n\n```\n",
            &[
                "explain",
                "report-builder",
                "-n",
                "shop",
                "--from",
                "examples/cluster.yaml",
            ],
        ),
        (
            "explain finetune -n ml --from examples/dra.yaml\n```\n\n```\n",
            &["explain", "finetune", "-n", "ml", "--from", "examples/dra.yaml"],
        ),
        (
            "explain mixtral-0 -n training --from examples/gang.yaml\n```\n\n```\n",
            &[
                "explain",
                "mixtral-0",
                "-n",
                "training",
                "--from",
                "examples/gang.yaml",
            ],
        ),
    ];
    for (marker, args) in examples {
        let start = readme
            .find(marker)
            .unwrap_or_else(|| panic!("no {marker:?} in the README"))
            + marker.len();
        let shown = &readme[start..start + readme[start..].find("```\n").expect("the block's end")];
        let out = Command::new(BIN)
            .args(args)
            .current_dir(&root)
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .output()
            .expect("running kubectl-sched");
        assert_eq!(shown, ok(out), "{args:?}");
    }
}

/// Issue 30: the hints are short (one line each, no YAML in the table), never tolerate the
/// control-plane taint, and the findings name the objects at fault.
#[test]
fn explain_names_the_blockers_and_hints_only_what_changes_the_verdict() {
    let out = ok(run_example(&["explain", "report-builder", "-n", "shop"]));
    let hints: Vec<&str> = out
        .lines()
        .skip_while(|l| *l != "Hints:")
        .skip(1)
        .take_while(|l| l.starts_with("  - "))
        .collect();
    assert_eq!(
        hints,
        [
            "  - add a toleration for nvidia.com/gpu=present:NoSchedule: the pod then schedules on gpu-1",
            "  - lower the pod's cpu request to 2500m: the pod then schedules on worker-big",
            "  - uncordon worker-cordoned (kubectl uncordon worker-cordoned): the pod then schedules on worker-cordoned",
        ],
        "{out}"
    );
    assert!(!out.contains("tolerations:"), "{out}");
    for words in [
        "  - control-plane: TaintToleration: untolerated taint node-role.kubernetes.io/control-plane:NoSchedule \
         (the control plane's: not one to tolerate) [SystemTaintNotTolerated]",
        "  - worker-big: NodeResourcesFit: needs 500m more cpu (requests 3, 2500m free) [InsufficientResource]",
    ] {
        assert!(out.contains(words), "{words}\n{out}");
    }
    let db = ok(run_example(&["explain", "db-2", "-n", "shop"]));
    assert!(db.contains("collides with shop/db-"), "{db}");
    let ports = ok(run_example(&["explain", "frontend-3", "-n", "shop"]));
    assert!(ports.contains("is held by pod shop/"), "{ports}");
}

/// `--node` says why the node is rejected, with the reason code (and `-o json` has the same finding).
#[test]
fn node_detail_explains_the_rejection() {
    let out = ok(run_example(&[
        "explain",
        "db-2",
        "-n",
        "shop",
        "--node",
        "worker-small",
    ]));
    let why = out
        .lines()
        .skip_while(|l| *l != "Why:")
        .nth(1)
        .unwrap_or_else(|| panic!("{out}"));
    assert!(why.contains("InterPodAffinity: "), "{out}");
    assert!(why.contains("[PodAntiAffinityCollision]"), "{out}");
    let v = json(run_example(&[
        "explain",
        "db-2",
        "-n",
        "shop",
        "--node",
        "worker-small",
        "-o",
        "json",
    ]));
    let finding = &v["node_detail"]["findings"][0];
    assert_eq!(finding["reason"], "PodAntiAffinityCollision", "{v}");
    assert_eq!(finding["detail"]["kind"], "pod_affinity", "{v}");
    assert!(!finding["detail"]["pods"].as_array().unwrap().is_empty(), "{v}");
}

#[test]
fn json_has_the_contract_fields() {
    let v = json(run_example(&[
        "explain",
        "report-builder",
        "-n",
        "shop",
        "-o",
        "json",
    ]));
    assert_eq!(v["pod"], "shop/report-builder");
    assert_eq!(v["nodes_total"], 5);
    assert_eq!(v["message"], REPORT_BUILDER_MESSAGE);
    assert_eq!(v["selected"], serde_json::json!([]));
    assert_eq!(v["feasible"], serde_json::json!([]));
    // The preemption dry run, as `preempt -o json` shows it: no candidate, so no node and no plan.
    let preemption = &v["preemption"];
    assert_eq!(preemption["pod"], "shop/report-builder");
    assert_eq!(preemption["eligible"], true);
    assert!(preemption["node"].is_null());
    assert_eq!(preemption["candidates"], serde_json::json!([]));
    assert_eq!(preemption["actions"], serde_json::json!([]));
    assert_eq!(preemption["failed_scheduling_message"], REPORT_BUILDER_MESSAGE);
    assert!(
        REPORT_BUILDER_MESSAGE.ends_with(preemption["message"].as_str().unwrap()),
        "{preemption}"
    );
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 5);
    for n in nodes {
        for field in ["name", "feasible", "plugin", "code", "reasons", "score", "scores"] {
            assert!(n.get(field).is_some(), "node without {field}: {n}");
        }
        assert_eq!(n["feasible"], false);
        assert!(n["score"].is_null());
    }
    let small = nodes.iter().find(|n| n["name"] == "worker-small").unwrap();
    assert_eq!(small["plugin"], "NodeResourcesFit");
    assert_eq!(small["code"], "UnschedulableAndUnresolvable");
    assert_eq!(
        small["reasons"],
        serde_json::json!(["Insufficient cpu", "Insufficient memory"])
    );
    let hint = v["hints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["kind"] == "change" && h["nodes"] == serde_json::json!(["worker-big"]))
        .unwrap();
    assert_eq!(hint["change"]["kind"], "lower_request");
    assert_eq!(hint["reason"], "InsufficientResource");
    let finding = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["nodes"] == serde_json::json!(["worker-big"]))
        .unwrap();
    assert_eq!(finding["reason"], "InsufficientResource");
    assert_eq!(
        finding["scheduler_reasons"],
        serde_json::json!(["Insufficient cpu"])
    );
    assert_eq!(finding["message"], "needs 500m more cpu (requests 3, 2500m free)");
}

#[test]
fn json_scores_add_up_for_a_pod_that_fits() {
    let v = json(run_example(&["explain", "checkout", "-n", "shop", "-o", "json"]));
    assert_eq!(v["message"], "");
    assert_eq!(v["outcome"], "Scheduled");
    assert!(v["preemption"].is_null(), "a pod that fits has no preemption");
    assert_eq!(v["selected"], serde_json::json!(["worker-big"]));
    assert_eq!(v["feasible"], serde_json::json!(["worker-big", "worker-small"]));
    for n in v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["feasible"] == true)
    {
        let scores = n["scores"].as_object().unwrap();
        assert!(!scores.is_empty());
        let mut total = 0;
        for (plugin, s) in scores {
            let (normalized, weight, weighted) = (
                s["normalized"].as_i64().unwrap(),
                s["weight"].as_i64().unwrap(),
                s["weighted"].as_i64().unwrap(),
            );
            assert!(s["raw"].is_i64(), "{plugin}");
            assert_eq!(normalized * weight, weighted, "{plugin}");
            total += weighted;
        }
        assert_eq!(n["score"].as_i64(), Some(total), "{}", n["name"]);
    }
    // Nothing is wrong, so no node-level hints.
    assert_eq!(v["hints"], serde_json::json!([]));
    let out = ok(run_example(&["explain", "checkout", "-n", "shop"]));
    assert!(
        out.starts_with("shop/checkout would be scheduled on worker-big with score 408 (profile default-scheduler, 5 nodes, kube-scheduler v1.37.2 semantics).\n"),
        "{out}"
    );
}

#[test]
fn yaml_output_parses_to_the_same_explanation() {
    let text = ok(run_example(&["explain", "trainer", "-n", "shop", "-o", "yaml"]));
    let v: yaml_serde::Value = yaml_serde::from_str(&text).expect("valid YAML");
    assert_eq!(v["pod"].as_str(), Some("shop/trainer"));
    assert_eq!(v["nodes_total"].as_u64(), Some(5));
    assert_eq!(
        v["message"].as_str(),
        Some(
            "0/5 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't match Pod's node \
             affinity/selector, 2 node(s) had untolerated taint(s). preemption: 0/5 nodes are available: 5 \
             Preemption is not helpful for scheduling."
        )
    );
    assert_eq!(
        v["preemption"]["message"].as_str(),
        Some("preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling.")
    );
    assert_eq!(v["preemption"]["potential_nodes"].as_u64(), Some(0));
}

#[test]
fn wide_adds_a_column_per_score_plugin() {
    let out = ok(run_example(&["explain", "checkout", "-n", "shop", "-o", "wide"]));
    let header = out.lines().find(|l| l.starts_with("NODE")).unwrap();
    for column in [
        "TaintToleration(x3)",
        "NodeResourcesFit(x1)",
        "NodeResourcesBalancedAllocation(x1)",
    ] {
        assert!(header.contains(column), "{header}");
    }
    let big = out.lines().find(|l| l.starts_with("worker-big")).unwrap();
    let cells: Vec<&str> = big.split_whitespace().collect();
    assert_eq!(&cells[..5], ["worker-big", "Selected", "-", "-", "408"]);
    assert_eq!(cells[5], "300", "TaintToleration's weighted score: {big}");
}

/// No feasible node, nothing scored: `-o wide` prints the normal table (no all-`-` score columns) and
/// says why there are no scores.
#[test]
fn wide_on_an_unschedulable_pod_drops_the_score_columns() {
    let normal = ok(run_example(&["explain", "report-builder", "-n", "shop"]));
    let wide = ok(run_example(&[
        "explain",
        "report-builder",
        "-n",
        "shop",
        "-o",
        "wide",
    ]));
    let header = wide.lines().find(|l| l.starts_with("NODE")).unwrap();
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["NODE", "VERDICT", "PLUGIN", "REASONS", "SCORE"],
        "{wide}"
    );
    let line = "No node is feasible, so no node is scored: there are no per-plugin scores to show.";
    assert_eq!(wide.matches(line).count(), 1, "{wide}");
    assert_eq!(wide.replace(&format!("{line}\n"), ""), normal);
    assert!(!normal.contains(line), "{normal}");
}

#[test]
fn node_detail_shows_every_filter_and_score() {
    let out = ok(run_example(&[
        "explain",
        "report-builder",
        "-n",
        "shop",
        "--node",
        "worker-big",
    ]));
    assert!(
        out.contains("Node worker-big: Unschedulable by NodeResourcesFit (Insufficient cpu).\n"),
        "{out}"
    );
    let row = out.lines().find(|l| l.starts_with("NodeResourcesFit")).unwrap();
    assert_eq!(
        row.split_whitespace().collect::<Vec<_>>(),
        ["NodeResourcesFit", "Unschedulable", "Insufficient", "cpu"]
    );
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["TaintToleration", "Success", "-"])
    );

    let out = ok(run_example(&[
        "explain",
        "checkout",
        "-n",
        "shop",
        "--node",
        "worker-small",
    ]));
    assert!(out.contains("Node worker-small: feasible, score 391.\n"), "{out}");
    let total = out.lines().find(|l| l.starts_with("TOTAL")).unwrap();
    assert_eq!(total.split_whitespace().collect::<Vec<_>>(), ["TOTAL", "391"]);

    let o = run_example(&["explain", "checkout", "-n", "shop", "--node", "nope"]);
    assert!(one_line_error(&o).contains("node \"nope\" not found"));
}

#[test]
fn bound_pod_is_evaluated_as_if_pending() {
    let out = ok(run_example(&["explain", "pod/db-0", "-n", "shop"]));
    assert!(
        out.starts_with(
            "shop/db-0 is bound to worker-small (profile default-scheduler, 5 nodes, kube-scheduler v1.37.2 semantics).\nEvaluated as if \
             pending, worker-small is still feasible and still the best (score 402).\n"
        ),
        "{out}"
    );
    let v = json(run_example(&["explain", "db-0", "-n", "shop", "-o", "json"]));
    assert_eq!(v["bound"]["node"], "worker-small");
    assert_eq!(v["bound"]["still_feasible"], true);
    assert_eq!(v["bound"]["still_best"], true);
    // Without itself on worker-small, db-1's anti-affinity still keeps it off worker-big.
    let big = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "worker-big")
        .unwrap()
        .clone();
    assert_eq!(big["plugin"], "InterPodAffinity");
}

#[test]
fn gated_pod_shows_the_gate_and_what_happens_once_ungated() {
    let out = ok(run_example(&["explain", "canary", "-n", "shop"]));
    assert!(
        out.starts_with(
            "shop/canary is gated (profile default-scheduler, 5 nodes, kube-scheduler v1.37.2 semantics):\n  Scheduling is blocked due to \
             non-empty scheduling gates: example.com/rollout-approval\nOnce ungated, it would be scheduled on \
             worker-big with score 408.\n"
        ),
        "{out}"
    );
    let v = json(run_example(&["explain", "canary", "-n", "shop", "-o", "json"]));
    assert_eq!(v["outcome"], "Gated");
    assert_eq!(
        v["message"],
        "waiting for scheduling gates: [example.com/rollout-approval]"
    );
    assert_eq!(v["once_ungated"]["selected"], serde_json::json!(["worker-big"]));
    assert_eq!(
        v["scheduling_gates"],
        serde_json::json!(["example.com/rollout-approval"])
    );
    // Markdown leads with the same words, one pod or every pending pod.
    let md = ok(run_example(&[
        "explain", "canary", "-n", "shop", "-o", "markdown",
    ]));
    assert!(
        md.starts_with(
            "### `shop/canary` is gated\n\nProfile `default-scheduler`, 5 nodes, kube-scheduler v1.37.2 \
             semantics.\n\n```\nScheduling is blocked \
             due to non-empty scheduling gates: example.com/rollout-approval\n```\n"
        ),
        "{md}"
    );
    let md = ok(run_example(&[
        "explain",
        "--all-pending",
        "-n",
        "shop",
        "-o",
        "markdown",
    ]));
    assert!(
        md.contains(
            "| `shop/canary` | Scheduling is blocked due to non-empty scheduling gates: \
             example.com/rollout-approval |\n"
        ),
        "{md}"
    );
}

/// From a snapshot file, "why it is still Pending" rests on the pod alone: the gate is named; a bound
/// pod, or one from -f, gets no such section.
#[test]
fn still_pending_from_a_file_names_the_gate_and_only_for_pending_pods() {
    let out = ok(run_example(&["explain", "canary", "-n", "shop"]));
    assert!(
        out.contains(
            "\nWhy it is still Pending:\n  - it has scheduling gates (example.com/rollout-approval): \
             kube-scheduler does not try it until every gate is removed"
        ),
        "{out}"
    );
    let v = json(run_example(&["explain", "canary", "-n", "shop", "-o", "json"]));
    assert_eq!(v["still_pending"][0]["kind"], "gated", "{v:#}");
    assert_eq!(v["still_pending"].as_array().map(Vec::len), Some(1), "{v:#}");

    let (_dir, pod) = temp_file(
        "new.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: new, namespace: shop}\nspec:\n  schedulingGates:\n  \
         - name: g\n  containers:\n  - {name: c, image: nginx}\n",
    );
    let v = json(run_example(&[
        "explain",
        "-f",
        pod.to_str().unwrap(),
        "-o",
        "json",
    ]));
    assert!(v.get("still_pending").is_none(), "{v:#}");
    let v = json(run_example(&["explain", "db-0", "-n", "shop", "-o", "json"]));
    assert!(
        v["bound"].is_object() && v.get("still_pending").is_none(),
        "{v:#}"
    );
}

#[test]
fn all_pending_prints_one_line_per_pending_pod() {
    let out = ok(run_example(&["explain", "--all-pending", "-A"]));
    let lines: Vec<&str> = out.lines().collect();
    let pods: Vec<&str> = lines
        .iter()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(
        pods,
        [
            "shop/analytics",
            "shop/canary",
            "shop/checkout",
            "shop/db-2",
            "shop/frontend-3",
            "shop/payments",
            "shop/report-builder",
            "shop/trainer",
            "shop/uploads",
            "shop/zone-c-only",
        ]
    );
    assert!(lines.contains(&format!("shop/report-builder   {REPORT_BUILDER_MESSAGE}").as_str()));
    assert!(lines.contains(&"shop/checkout         would be scheduled on worker-big with score 408"));
    assert!(lines.contains(
        &"shop/canary           Scheduling is blocked due to non-empty scheduling gates: \
          example.com/rollout-approval"
    ));

    // Namespace "default" (the default with --from) has no pending pods.
    let o = run_example(&["explain", "--all-pending"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stdout(&o), "");
    assert_eq!(stderr(&o), "No pending pods in namespace \"default\".\n");

    let v = json(run_example(&[
        "explain",
        "--all-pending",
        "-n",
        "shop",
        "-o",
        "json",
    ]));
    let entries = v.as_array().unwrap();
    assert_eq!(entries.len(), 10);
    assert!(
        entries
            .iter()
            .all(|e| e["nodes_total"] == 5 && e["pod"].is_string())
    );
}

#[test]
fn a_pod_file_is_evaluated_without_existing() {
    let (_dir, pod) = temp_file(
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: gpu-job\nspec:\n  tolerations:\n  - key: nvidia.com/gpu\n    \
         operator: Exists\n    effect: NoSchedule\n  containers:\n  - name: train\n    image: trainer\n    \
         resources:\n      limits: {cpu: \"2\", nvidia.com/gpu: \"1\"}\n",
    );
    let pod = pod.to_str().unwrap();
    let v = json(run_example(&["explain", "-f", pod, "-n", "shop", "-o", "json"]));
    assert_eq!(v["pod"], "shop/gpu-job");
    assert_eq!(v["selected"], serde_json::json!(["gpu-1"]));
    // Requests default to limits, as the API server would do: worker-big lacks the GPU.
    let big = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "worker-big")
        .unwrap()
        .clone();
    assert_eq!(big["reasons"], serde_json::json!(["Insufficient nvidia.com/gpu"]));

    let (_dir, two) = temp_file(
        "two.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, image: i}]}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: b}\nspec: {containers: [{name: c, image: i}]}\n",
    );
    let line = one_line_error(&run_example(&["explain", "-f", two.to_str().unwrap()]));
    assert!(
        line.contains("two.yaml") && line.contains("expected exactly one Pod, found 2"),
        "{line}"
    );

    let (_dir, broken) = temp_file("broken-pod.yaml", "kind: Pod\nmetadata: {name: a\n");
    let line = one_line_error(&run_example(&["explain", "-f", broken.to_str().unwrap()]));
    assert!(
        line.contains("broken-pod.yaml") && line.contains("line 3"),
        "{line}"
    );
}

#[test]
fn a_snapshot_in_a_temp_file_gives_the_exact_message() {
    let (_dir, snap) = temp_file(
        "snap.json",
        r#"{"apiVersion": "v1", "kind": "List", "items": [
          {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
           "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"}}},
          {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"},
           "status": {"allocatable": {"cpu": "4", "memory": "1Gi", "pods": "10"}}},
          {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default", "uid": "u1"},
           "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "2"}}}]}}
        ]}"#,
    );
    let v = json(run(&[
        "explain",
        "p",
        "--from",
        snap.to_str().unwrap(),
        "-o",
        "json",
    ]));
    assert_eq!(v["pod"], "default/p");
    assert_eq!(v["selected"], serde_json::json!(["n2"]));
    let line = one_line_error(&run(&["explain", "p2", "--from", snap.to_str().unwrap()]));
    assert!(
        line.contains("pod \"p2\" not found in namespace \"default\""),
        "{line}"
    );

    let (_dir2, big) = temp_file(
        "big.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: big}\nspec:\n  containers:\n  - name: c\n    image: i\n    \
         resources: {requests: {cpu: \"5\"}}\n",
    );
    let v = json(run(&[
        "explain",
        "-f",
        big.to_str().unwrap(),
        "--from",
        snap.to_str().unwrap(),
        "-o",
        "json",
    ]));
    assert_eq!(
        v["message"],
        "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 Preemption is \
         not helpful for scheduling."
    );
    let line = one_line_error(&run(&[
        "explain",
        "-f",
        "/dev/null",
        "--from",
        snap.to_str().unwrap(),
    ]));
    assert!(
        line.contains("/dev/null: expected exactly one Pod, found 0"),
        "{line}"
    );
}

#[test]
fn missing_pod_is_one_line_naming_it() {
    let line = one_line_error(&run_example(&["explain", "nope", "-n", "shop"]));
    assert!(
        line.contains("pod \"nope\" not found in namespace \"shop\""),
        "{line}"
    );
    assert!(line.contains("cluster.yaml"), "{line}");
}

#[test]
fn finished_pod_is_refused() {
    let line = one_line_error(&run_example(&["explain", "nightly-report-29110", "-n", "shop"]));
    assert!(line.contains("has phase Succeeded"), "{line}");
}

#[test]
fn missing_snapshot_file_is_one_line_naming_it() {
    let line = one_line_error(&run(&["explain", "p", "--from", "/nonexistent/snap.yaml"]));
    assert!(line.contains("/nonexistent/snap.yaml"), "{line}");
}

#[test]
fn malformed_snapshot_file_names_file_and_line() {
    let (_dir, bad) = temp_file(
        "broken.yaml",
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {name: a\n",
    );
    let line = one_line_error(&run(&["explain", "p", "--from", bad.to_str().unwrap()]));
    assert!(line.contains("broken.yaml") && line.contains("line 7"), "{line}");

    let (_dir, bad) = temp_file(
        "typed.yaml",
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata:\n    name: a\n  \
         status:\n    allocatable: {cpu: [1]}\n",
    );
    let line = one_line_error(&run(&["explain", "p", "--from", bad.to_str().unwrap()]));
    assert!(
        line.contains("typed.yaml") && line.contains("line 9") && line.contains("Node a"),
        "{line}"
    );
}

/// A quantity that does not parse is an error naming the file, the object and the field, not a 0.
#[test]
fn malformed_quantity_names_file_object_and_field() {
    let (_dir, bad) = temp_file(
        "snapshot.yaml",
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {name: n1}\n  \
         status:\n    allocatable: {cpu: \"4\", memory: 8Gi, pods: \"110\"}\n- apiVersion: v1\n  kind: Pod\n  \
         metadata: {name: web-1, namespace: shop}\n  spec:\n    containers:\n    - name: c\n      image: nginx\n      \
         resources:\n        requests: {cpu: oops}\n",
    );
    let path = bad.to_str().unwrap();
    for args in [
        &["explain", "web-1", "-n", "shop", "--from", path][..],
        &["preempt", "web-1", "-n", "shop", "--from", path][..],
    ] {
        let line = one_line_error(&run(args));
        assert_eq!(
            line,
            format!(
                "error: {path}: Pod shop/web-1: spec.containers[0].resources.requests.cpu: quantity \"oops\" does \
                 not parse"
            ),
            "{args:?}"
        );
    }
}

#[test]
fn bad_kubeconfig_is_one_line_naming_it() {
    let (_dir, kc) = temp_file("kubeconfig", "clusters: [\n");
    let line = one_line_error(&run(&["explain", "p", "--kubeconfig", kc.to_str().unwrap()]));
    assert!(
        line.contains("kubeconfig") && line.contains(kc.to_str().unwrap()),
        "{line}"
    );

    let line = one_line_error(&run(&["explain", "p", "--kubeconfig", "/nonexistent/kc"]));
    assert!(line.contains("/nonexistent/kc"), "{line}");

    // A server nobody listens on: the error names the server and what could not be listed.
    let (_dir, dead) = temp_file(
        "dead",
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: x\n  cluster:\n    server: \
         http://127.0.0.1:1\ncontexts:\n- name: c\n  context: {cluster: x, user: u}\nusers:\n- name: u\n  user: \
         {token: t}\n",
    );
    let line = one_line_error(&run(&[
        "--request-timeout",
        "5s",
        "explain",
        "p",
        "--kubeconfig",
        dead.to_str().unwrap(),
    ]));
    assert!(
        line.contains("127.0.0.1:1") && line.contains("cannot list Node"),
        "{line}"
    );
}

#[test]
fn bad_profile_and_config_are_errors() {
    let line = one_line_error(&run_example(&[
        "explain",
        "checkout",
        "-n",
        "shop",
        "--profile",
        "mine",
    ]));
    assert!(
        line.contains("\"mine\"") && line.contains("default-scheduler"),
        "{line}"
    );
    let (_dir, cfg) = temp_file(
        "ksc.yaml",
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: Nope\n",
    );
    let line = one_line_error(&run_example(&[
        "explain",
        "checkout",
        "-n",
        "shop",
        "--config",
        cfg.to_str().unwrap(),
    ]));
    assert!(line.contains("ksc.yaml"), "{line}");
}

/// kube-scheduler ignores a pod whose schedulerName names none of its profiles: explain says so in one
/// line, naming the scheduler and the profiles there are.
#[test]
fn a_pod_of_another_scheduler_is_an_error_naming_it_and_the_profiles() {
    let (_dir, pod) = temp_file(
        "custom.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: custom, namespace: shop}\nspec:\n  \
         schedulerName: my-scheduler\n  containers:\n  - {name: c, image: nginx}\n",
    );
    let line = one_line_error(&run_example(&["explain", "-f", pod.to_str().unwrap()]));
    assert_eq!(
        line,
        "error: pod shop/custom: schedulerName \"my-scheduler\" names no profile of the default \
         configuration (profiles: default-scheduler): kube-scheduler with this configuration ignores \
         the pod (another scheduler's); use --config with that scheduler's configuration, or --profile"
    );
    // --profile evaluates it with a profile of the configuration.
    ok(run_example(&[
        "explain",
        "-f",
        pod.to_str().unwrap(),
        "--profile",
        "default-scheduler",
    ]));
}

#[test]
fn a_config_profile_changes_the_answer() {
    // A second profile without TaintToleration: the GPU and control-plane nodes become feasible.
    let (_dir, cfg) = temp_file(
        "ksc.yaml",
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n\
         - schedulerName: default-scheduler\n- schedulerName: no-taints\n  plugins:\n    multiPoint:\n      \
         disabled:\n      - name: TaintToleration\n",
    );
    let v = json(run_example(&[
        "explain",
        "report-builder",
        "-n",
        "shop",
        "--config",
        cfg.to_str().unwrap(),
        "--profile",
        "no-taints",
        "-o",
        "json",
    ]));
    assert_eq!(v["profile"], "no-taints");
    let feasible: Vec<&str> = v["feasible"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    let mut sorted = feasible.clone();
    sorted.sort();
    assert_eq!(sorted, ["control-plane", "gpu-1"]);
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        vec!["explain"],
        vec!["explain", "p", "--bogus"],
        vec!["explain", "p", "-o", "xml"],
        vec!["explain", "p", "-n", "a", "-A"],
        vec!["explain", "p", "--all-pending"],
        vec!["frobnicate"],
        vec!["completion", "tcsh"],
        vec!["preempt"],
        vec!["preempt", "p", "--dry-run=maybe"],
        vec!["preempt", "p", "--mode=drain"],
        vec!["preempt", "p", "-o", "wide"],
        vec!["--request-timeout", "soon", "explain", "p"],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).starts_with("error: "), "{args:?}");
    }
}

#[test]
fn completions_generate() {
    for (shell, marker) in [
        ("bash", "_kubectl__sched()"),
        ("zsh", "#compdef kubectl-sched"),
        ("fish", "complete -c kubectl-sched"),
    ] {
        let out = ok(run(&["completion", shell]));
        assert!(out.contains(marker), "{shell}: {}", &out[..out.len().min(200)]);
        assert!(out.contains("all-pending"), "{shell}");
        assert!(out.contains("preempt") && out.contains("dry-run"), "{shell}");
    }
}

#[test]
fn help_and_version() {
    let out = ok(run(&["explain", "--help"]));
    for flag in [
        "--from",
        "--filename",
        "--config",
        "--profile",
        "--node",
        "--all-pending",
        "--output",
        "--kubeconfig",
        "--context",
        "--request-timeout",
    ] {
        assert!(out.contains(flag), "{flag} missing from help");
    }
    assert!(ok(run(&["--version"])).starts_with("kubectl-sched "));
}

// ------------------------------------------------------------------------------------------- preempt

/// `preempt POD -n drill --from tests/fixtures/preemption.yaml ARGS...`
fn drill(pod: &str, args: &[&str]) -> Output {
    let file = drill_fixture();
    let mut all = vec![
        "preempt",
        pod,
        "-n",
        "drill",
        "--from",
        file.to_str().expect("utf-8 path"),
    ];
    all.extend_from_slice(args);
    run(&all)
}

fn names(values: &Value) -> Vec<String> {
    values
        .as_array()
        .expect("an array")
        .iter()
        .map(|v| {
            format!(
                "{}/{}",
                v["namespace"].as_str().unwrap(),
                v["name"].as_str().unwrap()
            )
        })
        .collect()
}

/// Exit code 2 and one `error:` line on stderr mentioning `needle`; nothing on stdout.
fn refused(o: &Output, needle: &str) {
    assert_eq!(
        o.status.code(),
        Some(2),
        "stdout: {} stderr: {}",
        stdout(o),
        stderr(o)
    );
    let err = stderr(o);
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert!(err.starts_with("error: ") && err.contains(needle), "{err:?}");
    assert_eq!(stdout(o), "");
}

#[test]
fn preempt_dry_run_prints_candidates_victims_choice_and_plan() {
    // --from implies --dry-run=client; saying it changes nothing.
    for extra in [&[][..], &["--dry-run=client"][..], &["--dry-run"][..]] {
        let out = ok(drill("urgent", extra));
        assert!(
            out.starts_with(
                "drill/urgent cannot be scheduled (4 nodes, kube-scheduler v1.37.2 semantics):\n  0/4 nodes are available: 4 Insufficient cpu. \
                 preemption: found a potential placement for pod on node n2, preempting 1 victims\n"
            ),
            "{out}"
        );
        assert!(out.contains("(4 of 4 nodes) and found 3 candidate(s)"), "{out}");
        assert!(out.contains("until it has 4 candidate(s)"), "{out}");
        let candidate_rows: Vec<Vec<&str>> = out
            .lines()
            .skip_while(|l| !l.starts_with("CANDIDATE"))
            .skip(1)
            .take_while(|l| !l.is_empty())
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            candidate_rows,
            [
                vec!["n2", "*", "1", "0", "10", "drill/w2(10)"],
                vec!["n3", "1", "0", "50", "drill/mid(50)"],
                vec!["n1", "1", "1", "10", "drill/db(10)"],
            ]
        );
        assert!(
            out.contains("n4     -        No preemption victims found for incoming pod"),
            "{out}"
        );
        assert!(
            out.contains("Chosen node: n2 (best by lowest highest-priority victim)."),
            "{out}"
        );
        assert!(
            out.contains("\n  1. clear nominatedNodeName of pod drill/waiting\n"),
            "{out}"
        );
        assert!(out.contains("\n  3. delete pod drill/w2\n"), "{out}");
        assert!(
            out.contains("\n  6. set nominatedNodeName=n2 on pod drill/urgent\n"),
            "{out}"
        );
        assert!(out.contains("Dry run (client): nothing was changed."), "{out}");
    }
}

#[test]
fn preempt_json_has_the_contract_fields() {
    let v = json(drill("urgent", &["-o", "json"]));
    assert_eq!(v["pod"], "drill/urgent");
    assert_eq!(v["eligible"], true);
    assert_eq!(v["situation"], "planned");
    assert_eq!(v["dry_run"], "client");
    assert_eq!(v["mode"], "delete");
    assert_eq!(
        v["message"],
        "preemption: found a potential placement for pod on node n2, preempting 1 victims"
    );
    assert_eq!(v["node"], "n2");
    assert_eq!(names(&v["victims"]), ["drill/w2"]);
    assert_eq!(v["victims"][0]["priority"], 10);
    assert_eq!(v["victims"][0]["pdb_violation"], false);
    let candidates = v["candidates"].as_array().unwrap();
    let summary: Vec<(&str, Vec<String>, i64)> = candidates
        .iter()
        .map(|c| {
            (
                c["node"].as_str().unwrap(),
                names(&c["victims"]),
                c["pdb_violations"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("n2", vec!["drill/w2".to_string()], 0),
            ("n3", vec!["drill/mid".to_string()], 0),
            ("n1", vec!["drill/db".to_string()], 1),
        ]
    );
    assert_eq!(candidates[2]["victims"][0]["pdb_violation"], true);
    assert_eq!(v["kube_scheduler_would_sample"], 4);
    assert_eq!(v["potential_nodes"], 4);
    let kinds: Vec<&str> = v["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "SetNominatedNodeName",
            "SetPodCondition",
            "DeletePod",
            "Event",
            "Event",
            "SetNominatedNodeName",
            "SetPodCondition"
        ]
    );
    assert_eq!(v["actions"][2]["pod"]["uid"], "uid-w2");
    assert!(v.get("results").is_none(), "nothing was executed: {v}");

    // YAML is the same document.
    let y: yaml_serde::Value = yaml_serde::from_str(&ok(drill("urgent", &["-o", "yaml"]))).unwrap();
    assert_eq!(y["node"].as_str(), Some("n2"));

    // --mode=evict plans evictions instead of deletions.
    let v = json(drill("urgent", &["-o", "json", "--mode=evict"]));
    assert_eq!(v["mode"], "evict");
    let kinds: Vec<&str> = v["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["kind"].as_str())
        .collect();
    assert!(
        kinds.contains(&"EvictPod") && !kinds.contains(&"DeletePod"),
        "{kinds:?}"
    );
    // The API server sets DisruptionTarget when it admits an eviction; the plan does not.
    assert_eq!(
        kinds.iter().filter(|k| **k == "SetPodCondition").count(),
        1,
        "{kinds:?}"
    );
}

#[test]
fn preempt_node_forces_a_candidate_and_names_a_node_that_is_not_one() {
    let v = json(drill("urgent", &["--node", "n3", "-o", "json"]));
    assert_eq!(v["node"], "n3");
    assert_eq!(names(&v["victims"]), ["drill/mid"]);
    assert_eq!(
        v["tied_nodes"],
        serde_json::json!(["n2"]),
        "kube-scheduler's own pick"
    );
    // Nothing nominated to n3 with a lower priority: no nomination to clear.
    assert_eq!(v["actions"][0]["kind"], "SetPodCondition");
    // Kubernetes' own field names in the plan: a condition's and an event's `type`.
    assert_eq!(v["actions"][0]["condition"]["type"], "DisruptionTarget");
    let event = v["actions"]
        .as_array()
        .expect("actions")
        .iter()
        .find(|a| a["kind"] == "Event")
        .expect("an event in the plan");
    assert_eq!(event["type"], "Normal");
    assert!(!v["actions"].to_string().contains("type_"), "{}", v["actions"]);
    let out = ok(drill("urgent", &["--node", "n3"]));
    assert!(
        out.contains("Chosen node: n3 (forced with --node; kube-scheduler would pick n2)."),
        "{out}"
    );

    let err = one_line_error(&drill("urgent", &["--node", "n4"]));
    assert_eq!(
        err,
        "error: --node: node \"n4\" is not a preemption candidate: No preemption victims found for incoming pod"
    );
    let err = one_line_error(&drill("urgent", &["--node", "nope", "-o", "json"]));
    assert_eq!(err, "error: --node: node \"nope\" not found");
}

#[test]
fn preempt_exits_3_when_preemption_cannot_help() {
    // preemptionPolicy: Never.
    let o = drill("polite", &["-o", "json"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["eligible"], false);
    assert_eq!(v["situation"], "not-eligible");
    assert_eq!(
        v["message"],
        "preemption: not eligible due to preemptionPolicy=Never."
    );
    assert!(v["node"].is_null());
    assert_eq!(v["actions"], serde_json::json!([]));
    let o = drill("polite", &[]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        stdout(&o).contains("It may not preempt: not eligible due to preemptionPolicy=Never."),
        "{}",
        stdout(&o)
    );

    // Nothing of lower priority anywhere: no candidate.
    let o = drill("lowly", &["-o", "json"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["eligible"], true);
    assert_eq!(v["situation"], "no-candidates");
    assert!(v["node"].is_null());
    assert_eq!(v["candidates"], serde_json::json!([]));
    assert_eq!(
        v["message"],
        "preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod."
    );
    let o = drill("lowly", &[]);
    assert_eq!(o.status.code(), Some(3));
    assert!(stdout(&o).contains("No node where removing lower-priority pods makes the pod fit."));

    // A gated pod is never tried, so nothing is preempted for it either.
    let o = run_example(&["preempt", "canary", "-n", "shop"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "shop/canary is gated: Scheduling is blocked due to non-empty scheduling gates: \
         example.com/rollout-approval\nkube-scheduler does not try to schedule it, nor preempt for it, until \
         its scheduling gates are removed.\n"
    );
}

#[test]
fn preempt_has_nothing_to_do_for_a_pod_that_fits() {
    let o = run_example(&["preempt", "checkout", "-n", "shop", "-o", "json"]);
    let v = json(o);
    assert_eq!(v["situation"], "fits");
    assert_eq!(v["fits_on"], serde_json::json!(["worker-big"]));
    assert_eq!(v["actions"], serde_json::json!([]));
}

#[test]
fn preempt_refuses_to_execute_without_yes_when_stdin_is_not_a_terminal() {
    // Refused before the cluster is read (the kubeconfig does not even exist), so a script learns at once.
    let o = run(&["preempt", "urgent", "-n", "drill"]);
    refused(&o, "stdin is not a terminal; add --yes");
    let o = run(&["preempt", "urgent", "-n", "drill", "--dry-run=none", "-o", "json"]);
    refused(&o, "--yes");
    // --dry-run=server writes nothing, so it needs no confirmation: it goes on to the (missing) cluster.
    let o = run(&["preempt", "urgent", "-n", "drill", "--dry-run=server"]);
    let err = one_line_error(&o);
    assert!(err.contains("/nonexistent/kubeconfig"), "{err}");
}

#[test]
fn preempt_refuses_to_execute_without_a_cluster() {
    for args in [
        &["--yes"][..],
        &["--dry-run=none"][..],
        &["--dry-run=server", "--yes"][..],
        &["--dry-run=server"][..],
    ] {
        let o = drill("urgent", args);
        refused(&o, "--from reads a snapshot file: there is nothing to execute");
    }
    let (_dir, pod) = temp_file(
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: new}\nspec:\n  priority: 1000\n  containers:\n  - name: c\n    \
         image: x\n    resources: {requests: {cpu: \"2\"}}\n",
    );
    let o = run(&["preempt", "-f", pod.to_str().unwrap(), "-n", "drill", "--yes"]);
    refused(&o, "-f drills a pod that is not in the cluster");
}

#[test]
fn preempt_drills_a_pod_file_without_a_cluster() {
    let (_dir, pod) = temp_file(
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: new}\nspec:\n  priority: 1000\n  containers:\n  - name: c\n    \
         image: x\n    resources: {requests: {cpu: \"2\"}}\n",
    );
    let file = drill_fixture();
    let v = json(run(&[
        "preempt",
        "-f",
        pod.to_str().unwrap(),
        "-n",
        "drill",
        "--from",
        file.to_str().unwrap(),
        "-o",
        "json",
    ]));
    assert_eq!(v["pod"], "drill/new");
    assert_eq!(v["node"], "n2");
    assert_eq!(names(&v["victims"]), ["drill/w2"]);
}

#[test]
fn preempt_on_the_example_spares_the_pdb_protected_pod() {
    let v = json(run_example(&["preempt", "payments", "-n", "shop", "-o", "json"]));
    assert_eq!(v["node"], "worker-big");
    // Removing batch-7f9c alone would do, but its PodDisruptionBudget allows no disruption: it is
    // reprieved first, and frontend-2 goes instead.
    assert_eq!(names(&v["victims"]), ["shop/frontend-2"]);
    assert_eq!(v["victims"][0]["pdb_violation"], false);
    assert_eq!(v["candidates"].as_array().unwrap().len(), 1);

    // explain shows the same dry run for the pod.
    let e = json(run_example(&["explain", "payments", "-n", "shop", "-o", "json"]));
    assert_eq!(e["preemption"]["node"], "worker-big");
    assert_eq!(e["preemption"]["victims"], v["victims"]);
    assert_eq!(e["preemption"]["actions"], v["actions"]);
}

#[test]
fn would_it_fit_example_pod_is_placed_on_the_roomiest_worker() {
    let pod = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/pod.yaml");
    let v = json(run_example(&[
        "explain",
        "-f",
        pod.to_str().expect("utf-8 path"),
        "-o",
        "json",
    ]));
    assert_eq!(v["pod"], "shop/batch-worker");
    assert_eq!(v["selected"], serde_json::json!(["worker-big"]));
    assert_eq!(v["message"], "", "the contract: \"\" when the pod fits");
}

#[test]
fn preempt_uses_the_profile_of_a_config() {
    // A profile without NodeResourcesFit: urgent's 2 cpu no longer count, so it fits without preempting.
    let (_dir, cfg) = temp_file(
        "ksc.yaml",
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n\
         - schedulerName: default-scheduler\n- schedulerName: no-fit\n  plugins:\n    multiPoint:\n      \
         disabled:\n      - name: NodeResourcesFit\n",
    );
    let cfg = cfg.to_str().expect("utf-8 path");
    let v = json(drill(
        "urgent",
        &["--config", cfg, "--profile", "no-fit", "-o", "json"],
    ));
    assert_eq!(v["situation"], "fits", "{v}");
    assert_eq!(v["actions"], serde_json::json!([]));
    // The same configuration's default profile still preempts on n2.
    let v = json(drill("urgent", &["--config", cfg, "-o", "json"]));
    assert_eq!(v["node"], "n2", "{v}");
    let line = one_line_error(&drill("urgent", &["--config", cfg, "--profile", "mine"]));
    assert!(
        line.contains("--profile") && line.contains("\"mine\"") && line.contains("no-fit"),
        "{line}"
    );
}

/// Corrupted snapshot files (truncated, bytes changed, pieces spliced in, generated from the example
/// with a fixed seed): every run ends with an answer (exit 0) or one error line (exit 1), never a panic.
#[test]
fn corrupted_snapshot_files_end_in_an_answer_or_one_error_line() {
    const SPLICES: [&[u8]; 10] = [
        b"",
        b"\t",
        b": :",
        b"- ",
        b"{",
        b"\"",
        b"\n  ",
        b"99999999999999999999999",
        b"-1",
        b"null",
    ];
    let original = std::fs::read(example()).expect("example");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |bound: usize| {
        // xorshift64: reproducible without a dependency.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % bound as u64) as usize
    };
    let (mut answered, mut refused) = (0, 0);
    for case in 0..60 {
        let mut bytes = original.clone();
        match case % 3 {
            0 => bytes.truncate(next(bytes.len())),
            1 => {
                for _ in 0..=next(20) {
                    let at = next(bytes.len());
                    bytes[at] = next(256) as u8;
                }
            }
            _ => {
                for _ in 0..=next(5) {
                    let from = next(bytes.len());
                    let to = (from + 1 + next(200)).min(bytes.len());
                    bytes.splice(from..to, SPLICES[next(SPLICES.len())].iter().copied());
                }
            }
        }
        let path = dir.path().join(format!("case-{case}.yaml"));
        std::fs::write(&path, &bytes).expect("writing case");
        let out = run(&[
            "explain",
            "report-builder",
            "-n",
            "shop",
            "--from",
            path.to_str().expect("utf-8 path"),
        ]);
        if out.status.code() == Some(0) {
            answered += 1;
        } else {
            one_line_error(&out);
            refused += 1;
        }
    }
    assert!(refused > 0, "no case was refused: the corruption does nothing");
    println!("{answered} answered, {refused} refused with one line");
}

// ---------------------------------------------------------------------------------------------- what-if

fn run_example_with_stdin(args: &[&str], input: &str) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    let file = example();
    let mut child = Command::new(BIN)
        .args(args)
        .args(["--from", file.to_str().expect("utf-8 path")])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running kubectl-sched");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("writing stdin");
    child.wait_with_output().expect("waiting for kubectl-sched")
}

/// `explain POD -n shop -o json` with extra flags, on the example cluster.
fn explain_json(pod: &str, extra: &[&str]) -> Value {
    let mut args = vec!["explain", pod, "-n", "shop", "-o", "json"];
    args.extend(extra);
    json(run_example(&args))
}

#[test]
fn dash_f_reads_the_pod_from_stdin_for_explain_and_preempt() {
    let pod = std::fs::read_to_string(example().with_file_name("pod.yaml")).unwrap();
    let o = run_example_with_stdin(&["explain", "-f", "-", "-o", "json"], &pod);
    let v: Value = serde_json::from_str(&ok(o)).unwrap();
    assert_eq!(v["pod"], "shop/batch-worker");
    assert_eq!(v["outcome"], "Scheduled");
    let o = run_example_with_stdin(&["preempt", "-f", "-", "-o", "json"], &pod);
    let v: Value = serde_json::from_str(&ok(o)).unwrap();
    assert_eq!(v["pod"], "shop/batch-worker");
    // A broken pod on stdin is named as such.
    let line = one_line_error(&run_example_with_stdin(
        &["explain", "-f", "-"],
        "kind: Pod\nmetadata: {name: a\n",
    ));
    assert!(line.contains("<stdin>"), "{line}");
}

#[test]
fn what_if_set_requests_makes_a_pod_fit() {
    // analytics asks 20Gi: no untainted node has that much free.
    assert_eq!(explain_json("analytics", &[])["outcome"], "Unschedulable");
    let v = explain_json("analytics", &["--set", "resources.requests.memory=8Gi"]);
    assert_eq!(v["outcome"], "Scheduled");
    assert_eq!(v["what_if"][0]["flag"], "--set");
    assert_eq!(v["what_if"][0]["value"], "resources.requests.memory=8Gi");
    assert_eq!(
        v["what_if"][0]["effect"],
        "memory request 8Gi for its container app"
    );
    // One container by name, too.
    let v = explain_json(
        "analytics",
        &["--set", "containers[app].resources.requests.memory=8Gi"],
    );
    assert_eq!(v["outcome"], "Scheduled");
    // The table says what was changed, on top.
    let out = ok(run_example(&[
        "explain",
        "analytics",
        "-n",
        "shop",
        "--set",
        "resources.requests.memory=8Gi",
    ]));
    assert_eq!(
        out.lines().next(),
        Some("What if: --set resources.requests.memory=8Gi (memory request 8Gi for its container app).")
    );
    assert!(
        out.lines()
            .nth(1)
            .unwrap()
            .starts_with("shop/analytics would be scheduled on"),
        "{out}"
    );
    // Without what-ifs there is no such line, and JSON has an empty list.
    assert_eq!(explain_json("checkout", &[])["what_if"], serde_json::json!([]));
}

#[test]
fn what_if_set_node_selector_and_scheduler_name_change_the_answer() {
    let v = explain_json(
        "checkout",
        &["--set", "nodeSelector.kubernetes.io/hostname=worker-small"],
    );
    assert_eq!(v["selected"], serde_json::json!(["worker-small"]));
    let v = explain_json(
        "checkout",
        &["--set", "nodeSelector.topology.kubernetes.io/zone=eu-west-1c"],
    );
    assert_eq!(v["outcome"], "Unschedulable");
    // Another scheduler's pod: this configuration has no such profile.
    let line = one_line_error(&run_example(&[
        "explain",
        "checkout",
        "-n",
        "shop",
        "--set",
        "schedulerName=other",
    ]));
    assert!(line.contains("other"), "{line}");
    let v = explain_json("checkout", &["--set", "priorityClassName=shop-critical"]);
    assert_eq!(
        v["what_if"][0]["effect"],
        "priorityClassName shop-critical, priority 100000"
    );
}

#[test]
fn what_if_bad_set_is_one_line_naming_the_flag() {
    for (value, needle) in [
        (
            "resources.requests.cpu=lots",
            "--set \"resources.requests.cpu=lots\": invalid quantity",
        ),
        ("image=nginx", "--set \"image=nginx\": unknown path \"image\""),
        (
            "containers[nope].resources.requests.cpu=1",
            "the pod has no container \"nope\" (it has app)",
        ),
        ("priorityClassName=nope", "no PriorityClass \"nope\""),
    ] {
        let line = one_line_error(&run_example(&[
            "explain",
            "analytics",
            "-n",
            "shop",
            "--set",
            value,
        ]));
        assert!(line.contains(needle), "{value}: {line}");
    }
}

#[test]
fn what_if_without_pod_frees_its_node() {
    // batch-7f9c holds 16Gi on worker-big; without it analytics fits there.
    let v = explain_json("analytics", &["--without-pod", "shop/batch-7f9c"]);
    assert_eq!(v["outcome"], "Scheduled");
    assert_eq!(v["selected"], serde_json::json!(["worker-big"]));
    assert_eq!(
        v["what_if"][0]["effect"],
        "removed shop/batch-7f9c from worker-big"
    );
    let line = one_line_error(&run_example(&[
        "explain",
        "analytics",
        "-n",
        "shop",
        "--without-pod",
        "shop/nope",
    ]));
    assert_eq!(line, "error: --without-pod \"shop/nope\": pod not found");
    let line = one_line_error(&run_example(&[
        "explain",
        "analytics",
        "-n",
        "shop",
        "--without-pod",
        "shop/analytics",
    ]));
    assert!(line.contains("that is the pod being evaluated"), "{line}");
}

#[test]
fn what_if_uncordon_opens_the_cordoned_node() {
    // zone-c-only may only go to eu-west-1c, whose only node is cordoned.
    assert_eq!(explain_json("zone-c-only", &[])["outcome"], "Unschedulable");
    let v = explain_json("zone-c-only", &["--uncordon", "worker-cordoned"]);
    assert_eq!(v["selected"], serde_json::json!(["worker-cordoned"]));
    assert_eq!(
        v["what_if"][0]["effect"],
        "uncordoned, node.kubernetes.io/unschedulable taint removed"
    );
    let line = one_line_error(&run_example(&[
        "explain",
        "zone-c-only",
        "-n",
        "shop",
        "--uncordon",
        "nope",
    ]));
    assert_eq!(line, "error: --uncordon \"nope\": node \"nope\" not found");
}

#[test]
fn what_if_add_node_gives_room() {
    let v = explain_json("analytics", &["--add-node", "worker-big=2"]);
    assert_eq!(v["outcome"], "Scheduled");
    assert_eq!(v["nodes_total"], 7);
    let selected = v["selected"].as_array().unwrap();
    assert!(
        selected
            .iter()
            .all(|n| n.as_str().unwrap().starts_with("worker-big-copy-")),
        "{selected:?}"
    );
    assert_eq!(
        v["what_if"][0]["effect"],
        "added worker-big-copy-1, worker-big-copy-2, empty copies of worker-big"
    );
    let line = one_line_error(&run_example(&[
        "explain",
        "analytics",
        "-n",
        "shop",
        "--add-node",
        "nope=1",
    ]));
    assert_eq!(line, "error: --add-node \"nope=1\": node \"nope\" not found");
    // Cluster what-ifs apply to --all-pending too, listed on top.
    let out = ok(run_example(&[
        "explain",
        "--all-pending",
        "-n",
        "shop",
        "--add-node",
        "worker-big=1",
    ]));
    assert!(
        out.starts_with("What if: --add-node worker-big=1 (added worker-big-copy-1"),
        "{out}"
    );
    let analytics = out.lines().find(|l| l.starts_with("shop/analytics")).unwrap();
    assert!(
        analytics.contains("would be scheduled on worker-big-copy-1"),
        "{analytics}"
    );
}

#[test]
fn exit_code_is_3_when_the_pod_cannot_be_scheduled() {
    for (args, want) in [
        (vec!["explain", "report-builder", "-n", "shop", "--exit-code"], 3),
        (vec!["explain", "canary", "-n", "shop", "--exit-code"], 3),
        (vec!["explain", "checkout", "-n", "shop", "--exit-code"], 0),
        // Without the flag an answer is an answer: 0.
        (vec!["explain", "report-builder", "-n", "shop"], 0),
        // A what-if that makes it fit turns the code to 0.
        (
            vec![
                "explain",
                "zone-c-only",
                "-n",
                "shop",
                "--exit-code",
                "--uncordon",
                "worker-cordoned",
            ],
            0,
        ),
        (
            vec![
                "explain",
                "--all-pending",
                "-n",
                "shop",
                "--exit-code",
                "-o",
                "json",
            ],
            3,
        ),
    ] {
        let o = run_example(&args);
        assert_eq!(o.status.code(), Some(want), "{args:?}: {}", stderr(&o));
        // The answer is printed either way.
        assert!(!stdout(&o).is_empty(), "{args:?}");
    }
    // Errors stay 1.
    let o = run_example(&["explain", "nope", "-n", "shop", "--exit-code"]);
    assert_eq!(o.status.code(), Some(1));
    let help = ok(run(&["explain", "--help"]));
    assert!(
        help.contains("Exit codes:") && help.contains("3 with --exit-code"),
        "{help}"
    );
}

#[test]
fn markdown_is_a_block_for_a_ticket() {
    let out = ok(run_example(&[
        "explain",
        "report-builder",
        "-n",
        "shop",
        "-o",
        "markdown",
    ]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "### `shop/report-builder` cannot be scheduled");
    // The FailedScheduling message, verbatim, in a code block.
    let fence = lines.iter().position(|l| *l == "```").expect("a code block");
    assert_eq!(lines[fence + 1], REPORT_BUILDER_MESSAGE);
    assert_eq!(lines[fence + 2], "```");
    // The node table.
    let header = lines
        .iter()
        .position(|l| *l == "| Node | Verdict | Reason | Score |")
        .expect("a table");
    assert_eq!(lines[header + 1], "|---|---|---|---|");
    assert!(
        lines.contains(&"| worker-big | Unschedulable | NodeResourcesFit: Insufficient cpu | - |"),
        "{out}"
    );
    let rows = lines[header + 2..]
        .iter()
        .take_while(|l| l.starts_with('|'))
        .count();
    assert_eq!(rows, 5);
    // The hints as a list, their YAML in code blocks.
    assert!(lines.contains(&"**Hints**"), "{out}");
    assert!(
        lines.contains(&"- lower the pod's cpu request to 2500m: the pod then schedules on worker-big"),
        "{out}"
    );
    assert!(lines.contains(&"  ```yaml"), "{out}");

    // A pod that fits: where it goes, no message block.
    let out = ok(run_example(&[
        "explain", "checkout", "-n", "shop", "-o", "markdown",
    ]));
    assert!(
        out.starts_with("### `shop/checkout` would be scheduled on worker-big with score"),
        "{out}"
    );
    assert!(!out.contains("```"), "{out}");
}

#[test]
fn markdown_truncates_the_node_table_at_20_rows() {
    let out = ok(run_example(&[
        "explain",
        "analytics",
        "-n",
        "shop",
        "-o",
        "markdown",
        "--add-node",
        "worker-small=20",
    ]));
    let rows = out
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| Node "))
        .count();
    assert_eq!(rows, 20, "{out}");
    assert!(
        out.contains("_First 20 of 25 nodes; `kubectl sched explain -o json` lists every node._"),
        "{out}"
    );
    assert!(
        out.contains("- `--add-node worker-small=20`: added worker-small-copy-1"),
        "{out}"
    );
}

#[test]
fn node_detail_breaks_down_the_nodes_resources() {
    let out = ok(run_example(&[
        "explain",
        "report-builder",
        "-n",
        "shop",
        "--node",
        "worker-big",
    ]));
    let words = |prefix: &str| {
        out.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line: {out}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        words("RESOURCE "),
        [
            "RESOURCE",
            "ALLOCATABLE",
            "REQUESTED",
            "FREE",
            "THIS",
            "POD",
            "FITS"
        ]
    );
    assert_eq!(words("cpu "), ["cpu", "8", "5500m", "2500m", "3", "no"]);
    assert_eq!(
        words("memory "),
        ["memory", "32Gi", "18944Mi", "13824Mi", "4Gi", "yes"]
    );
    assert_eq!(words("pods "), ["pods", "110", "3", "107", "1", "yes"]);
    assert!(
        out.contains("  cpu: shop/batch-7f9c (4), shop/db-1 (1), shop/frontend-2 (500m)\n"),
        "{out}"
    );

    // In JSON, node_detail.resources, amounts in the scheduler's units (millicores, bytes).
    let v = explain_json("trainer", &["--node", "gpu-1"]);
    let resources = v["node_detail"]["resources"].as_array().unwrap();
    let names: Vec<&str> = resources
        .iter()
        .map(|r| r["resource"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["cpu", "memory", "pods", "nvidia.com/gpu"]);
    let gpu = &resources[3];
    assert_eq!(
        (
            &gpu["allocatable"],
            &gpu["requested"],
            &gpu["free"],
            &gpu["pod_request"],
            &gpu["fits"]
        ),
        (
            &serde_json::json!(4),
            &serde_json::json!(0),
            &serde_json::json!(4),
            &serde_json::json!(1),
            &serde_json::json!(true)
        )
    );
    let v = explain_json("report-builder", &["--node", "worker-big"]);
    let cpu = &v["node_detail"]["resources"][0];
    assert_eq!(cpu["requested"], 5500);
    assert_eq!(
        cpu["pods"][0],
        serde_json::json!({"pod": "shop/batch-7f9c", "request": 4000, "nominated": false})
    );
}

#[test]
fn triage_groups_pending_pods_by_root_cause_with_the_smallest_fix() {
    let o = run_example(&["triage", "-n", "shop", "-o", "json"]);
    assert_eq!(o.status.code(), Some(3), "some pods cannot be scheduled");
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["pods"], 10);
    assert_eq!(v["shapes"], 10);
    let causes = v["causes"].as_array().unwrap();
    let cause = |name: &str| {
        causes
            .iter()
            .find(|c| c["cause"] == name)
            .unwrap_or_else(|| panic!("no cause {name:?} in {causes:?}"))
    };
    let cpu = cause("Insufficient cpu");
    assert_eq!(cpu["verdict"], "unschedulable");
    let names: Vec<&str> = cpu["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["workload"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["payments", "report-builder"]);
    let payments = &cpu["workloads"][0];
    assert_eq!(payments["fixes"][0]["kind"], "lower_request");
    assert_eq!(
        payments["fixes"][0]["change"],
        "lower the request: cpu from 3 to 2500m (then it fits on worker-big)"
    );
    // kube-scheduler's own counts, as in its FailedScheduling message.
    assert!(
        payments["message"]
            .as_str()
            .unwrap()
            .contains("2 Insufficient cpu")
    );
    assert_eq!(cause("fits now")["workloads"][0]["fits_on"], "worker-small");
    assert_eq!(
        cause("waiting for scheduling gates: [example.com/rollout-approval]")["verdict"],
        "gated"
    );
    // JSON keeps the engine's reason as the cause; the text leads with the pod condition's words.
    let text = stdout(&run_example(&["triage", "-n", "shop"]));
    assert!(
        text.contains(
            "\nGATED (1 pod, 1 workload): Scheduling is blocked due to non-empty scheduling gates: \
             example.com/rollout-approval\n  pod/canary: 1 pod\n"
        ),
        "{text}"
    );
    // The pods that fit come last.
    assert_eq!(causes.last().unwrap()["verdict"], "fits");

    // Selecting by workload or label; a pod that fits exits 0.
    let o = run_example(&["triage", "-n", "shop", "pod/checkout"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).starts_with("1 pod pending in namespace \"shop\", pod/checkout"));
    let o = run_example(&["triage", "-n", "shop", "deployment/nothing"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("No pending pods"), "{}", stderr(&o));
    let o = run_example(&["triage", "-n", "shop", "service/web"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("\"service/web\" is not a workload"),
        "{}",
        stderr(&o)
    );
    let o = run_example(&["triage", "-n", "shop", "-l", "app in (x"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("label selector"), "{}", stderr(&o));
}

// === Files as kubectl writes them, and simulations too large to build (issue 27, items 4 and 5) ===

/// A workload as `kubectl get deploy,sts -o json` prints it: status, managedFields (whose keys hold
/// escaped JSON such as `k:{"type":"Available"}`), and the last-applied annotation.
fn kubectl_workload(kind: &str, name: &str, replicas: u32) -> Value {
    serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": format!("0f0e0d0c-0000-4000-8000-{:012}", name.len()),
            "resourceVersion": "4242",
            "generation": 1,
            "creationTimestamp": "2026-11-02T10:00:00Z",
            "labels": {"app": name},
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration":
                    format!("{{\"apiVersion\":\"apps/v1\",\"kind\":\"{kind}\",\"metadata\":{{\"name\":\"{name}\"}}}}\n")
            },
            "managedFields": [{
                "manager": "kube-controller-manager",
                "operation": "Update",
                "apiVersion": "apps/v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:conditions": {
                    ".": {},
                    "k:{\"type\":\"Available\"}": {".": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}},
                    "k:{\"type\":\"Progressing\"}": {".": {}, "f:message": {}, "f:reason": {}}
                }}},
                "subresource": "status"
            }]
        },
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{
                    "name": "app",
                    "image": "nginx:1.27",
                    "args": ["--listen=[::]:8080", "--greeting=it's \"fine\""],
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}
                }]}
            }
        },
        "status": {
            "observedGeneration": 1,
            "replicas": replicas,
            "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}]
        }
    })
}

fn kubectl_list(items: Vec<Value>) -> String {
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items});
    serde_json::to_string_pretty(&list).expect("JSON")
}

/// A Node as `kubectl get nodes -o json` prints it.
fn kubectl_node(name: &str) -> Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
            "managedFields": [{"manager": "kubelet", "operation": "Update", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}}}}}}]
        },
        "spec": {},
        "status": {
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
        }
    })
}

/// A simulation's JSON report; exit code 3 only says some pods stay pending.
fn simulated(out: Output) -> Value {
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "stderr: {}",
        stderr(&out)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(&out)))
}

/// `simulate -f` of a List of 50 workloads as kubectl prints them in JSON: read as JSON (it used to go
/// through the YAML guard, which refused it as nested past 128 levels), every replica simulated.
#[test]
fn simulate_reads_kubectl_json_of_fifty_workloads() {
    let items = (0..50)
        .map(|i| match i % 2 {
            0 => kubectl_workload("Deployment", &format!("web-{i}"), 2),
            _ => kubectl_workload("StatefulSet", &format!("db-{i}"), 1),
        })
        .collect();
    let (_dir, file) = temp_file("workloads.json", &kubectl_list(items));
    let out = run_example(&["simulate", "-f", file.to_str().unwrap(), "-o", "json"]);
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "stderr: {}",
        stderr(&out)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(report["summary"]["inputs"], 25 * 2 + 25, "{}", report["summary"]);

    // The same objects as a YAML stream of JSON documents (`---` between them) read alike.
    let stream: String = (0..50)
        .map(|i| {
            let w = kubectl_workload("Deployment", &format!("web-{i}"), 1);
            format!("---\n{}\n", serde_json::to_string_pretty(&w).unwrap())
        })
        .collect();
    let (_dir, file) = temp_file("stream.yaml", &stream);
    let out = run_example(&["simulate", "-f", file.to_str().unwrap(), "-o", "json"]);
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(report["summary"]["inputs"], 50, "{}", stderr(&out));

    // A JSON error names the document, line and column.
    let (_dir, file) = temp_file("bad.json", "{\"kind\": \"Deployment\"}\n{\"kind\": ,}\n");
    let err = one_line_error(&run_example(&["simulate", "-f", file.to_str().unwrap()]));
    assert!(
        err.ends_with("bad.json: document 1: expected value at line 2 column 10"),
        "{err}"
    );
}

/// `--add-nodes` of 150 nodes in kubectl's JSON, `--add-node` of 150 copies, and `explain --from` a
/// YAML stream whose documents are JSON (20 nodes): all read.
#[test]
fn many_nodes_in_json_are_read() {
    let nodes: Vec<Value> = (0..150).map(|i| kubectl_node(&format!("extra-{i}"))).collect();
    let (_dir, file) = temp_file("nodes.json", &kubectl_list(nodes));
    let report = simulated(run_example(&[
        "simulate",
        "--add-nodes",
        file.to_str().unwrap(),
        "-o",
        "json",
    ]));
    let added = report["what_if"][0]["effect"].as_str().unwrap_or_default();
    assert_eq!(added.matches("extra-").count(), 150, "{added}");

    let report = simulated(run_example(&[
        "simulate",
        "--add-node",
        "worker-big=150",
        "-o",
        "json",
    ]));
    assert_eq!(report["summary"]["nodes"], 5 + 150, "{}", report["summary"]);

    let mut stream: String = (0..20)
        .map(|i| {
            format!(
                "---\n{}\n",
                serde_json::to_string_pretty(&kubectl_node(&format!("n{i}"))).unwrap()
            )
        })
        .collect();
    let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "shop", "uid": "u-web"},
        "spec": {"containers": [{"name": "app", "image": "nginx",
            "resources": {"requests": {"cpu": "100m"}}}]},
        "status": {"phase": "Pending"}});
    stream.push_str(&format!("---\n{}\n", serde_json::to_string_pretty(&pod).unwrap()));
    let (_dir, file) = temp_file("cluster.yaml", &stream);
    let answer = json(run(&[
        "explain",
        "web",
        "-n",
        "shop",
        "--from",
        file.to_str().unwrap(),
        "-o",
        "json",
    ]));
    assert_eq!(answer["nodes_total"], 20);
    assert_eq!(answer["outcome"], "Scheduled");
}

/// 40 workloads of 150,000 replicas are six million pods: refused at once, naming the largest, before
/// any pod is built (the process stays small and quick).
#[test]
fn simulations_too_large_to_build_are_refused_at_once() {
    let items = (0..40)
        .map(|i| kubectl_workload("Deployment", &format!("big-{i:02}"), 150_000))
        .collect();
    let (_dir, file) = temp_file("big.json", &kubectl_list(items));
    let started = std::time::Instant::now();
    let out = run_example(&["simulate", "-f", file.to_str().unwrap()]);
    let took = started.elapsed();
    let err = one_line_error(&out);
    assert!(
        err.contains("the workloads expand into 6000000 pods together, more than the 1000000 a simulation expands: deployment/big-00 150000")
            && err.ends_with("and 35 more workload(s) (--max-simulated-pods raises the limit)"),
        "{err}"
    );
    assert!(took < std::time::Duration::from_secs(3), "{took:?}");

    // Raised past the total, the same file is accepted (with --replicas keeping it small).
    let out = run_example(&[
        "simulate",
        "-f",
        file.to_str().unwrap(),
        "--replicas",
        "1",
        "--max-simulated-pods",
        "40",
    ]);
    assert!(matches!(out.status.code(), Some(0 | 3)), "{}", stderr(&out));
    let out = run_example(&[
        "simulate",
        "-f",
        file.to_str().unwrap(),
        "--replicas",
        "2",
        "--max-simulated-pods",
        "79",
    ]);
    assert!(
        one_line_error(&out).contains("expand into 80 pods together"),
        "{}",
        stderr(&out)
    );
}

/// Long work shows progress on stderr (with -v when stderr is not a terminal) within about a second.
#[test]
fn long_simulations_show_progress() {
    let items = vec![kubectl_workload("Deployment", "many", 1)];
    let (_dir, file) = temp_file("many.json", &kubectl_list(items));
    let started = std::time::Instant::now();
    let out = run_example(&[
        "simulate",
        "-f",
        file.to_str().unwrap(),
        "--replicas",
        "20000",
        "-v",
        "1",
    ]);
    let took = started.elapsed();
    let err = stderr(&out);
    assert!(matches!(out.status.code(), Some(0 | 3)), "{err}");
    assert!(
        took > std::time::Duration::from_secs(1),
        "too quick to need progress: {took:?}"
    );
    let first = err
        .lines()
        .find(|l| {
            l.starts_with("expanding the workloads of -f: ")
                || l.starts_with("simulating: ")
                || l.starts_with("building the snapshot: ")
        })
        .unwrap_or_else(|| panic!("no progress line in {err}"));
    assert!(first.ends_with("(0 s)") || first.ends_with("(1 s)"), "{first}");
}

/// examples/cluster.yaml with its `kubeVersion` line replaced by `line` (empty: none).
fn example_recording(line: &str) -> (tempfile::TempDir, PathBuf) {
    let text = std::fs::read_to_string(example()).expect("the example");
    assert!(
        text.contains("\nkubeVersion: v1.37.2\n"),
        "the example records its release"
    );
    let text = text.replace("\nkubeVersion: v1.37.2\n", &format!("\n{line}"));
    temp_file("cluster.yaml", &text)
}

/// `explain report-builder -n shop` on the example recording `line`, with `extra` flags.
fn explain_recording(line: &str, extra: &[&str]) -> Output {
    let (_dir, file) = example_recording(line);
    let mut args = vec![
        "explain",
        "report-builder",
        "-n",
        "shop",
        "--from",
        file.to_str().unwrap(),
    ];
    args.extend(extra);
    run(&args)
}

#[test]
fn a_snapshot_is_evaluated_with_the_release_it_records_unless_kube_version_says_otherwise() {
    // (recorded line, extra flags, release in the header, warning on stderr)
    let cases: [(&str, &[&str], &str, &str); 5] = [
        ("kubeVersion: v1.34.4\n", &[], "v1.34.4", ""),
        ("kubeVersion: v1.33.5-eks-3025e55\n", &[], "v1.33.5", ""),
        (
            "",
            &[],
            "v1.37.2",
            "records no Kubernetes version (a file from kubectl, or an older kubectl-sched); evaluating with \
             kube-scheduler v1.37.2's semantics (use --kube-version to pick another release)",
        ),
        (
            "kubeVersion: v1.34.4\n",
            &["--kube-version", "v1.37"],
            "v1.37.2",
            "was taken from Kubernetes v1.34.4; evaluating with kube-scheduler v1.37.2's semantics, as \
             --kube-version says",
        ),
        ("", &["--kube-version", "v1.35"], "v1.35.4", ""),
    ];
    for (line, extra, release, warning) in cases {
        let out = explain_recording(line, extra);
        let text = ok(out.clone());
        let header = format!(
            "shop/report-builder cannot be scheduled (profile default-scheduler, 5 nodes, kube-scheduler \
             {release} semantics):"
        );
        assert_eq!(text.lines().next(), Some(header.as_str()), "{line:?} {extra:?}");
        let err = stderr(&out);
        if warning.is_empty() {
            assert_eq!(err, "", "{line:?} {extra:?}");
        } else {
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.starts_with("warning: ") && err.contains(warning), "{err}");
        }
        let mut json_args = extra.to_vec();
        json_args.extend(["-o", "json"]);
        let v: Value = serde_json::from_str(&ok(explain_recording(line, &json_args))).expect("JSON");
        assert_eq!(v["kube_version"], release, "{line:?} {extra:?}");
    }
}

#[test]
fn every_evaluating_command_names_the_release_in_its_header() {
    let (_dir, file) = example_recording("kubeVersion: v1.36.3\n");
    let from = file.to_str().unwrap();
    let cases: [(&[&str], &str); 3] = [
        (&["triage", "-n", "shop"], "kube-scheduler v1.36.3 semantics): "),
        (
            &["simulate", "-n", "shop"],
            " with kube-scheduler v1.36.3 semantics in ",
        ),
        (
            &["preempt", "payments", "-n", "shop"],
            "kube-scheduler v1.36.3 semantics):\n",
        ),
    ];
    for (args, words) in cases {
        let mut all = args.to_vec();
        all.extend(["--from", from]);
        let out = run(&all);
        assert!(
            matches!(out.status.code(), Some(0 | 3)),
            "{args:?}: {}",
            stderr(&out)
        );
        assert!(stdout(&out).contains(words), "{args:?}: {}", stdout(&out));
        let mut json = all.clone();
        json.extend(["-o", "json"]);
        let v: Value = serde_json::from_slice(&run(&json).stdout).expect("JSON");
        assert_eq!(v["kube_version"], "v1.36.3", "{args:?}");
    }
}

#[test]
fn a_release_outside_the_supported_range_is_a_one_line_usage_error() {
    let range = "is not supported: kubectl-sched models kube-scheduler v1.33 to v1.37";
    let cases: [(&str, &[&str], &str); 4] = [
        (
            "kubeVersion: v1.34.4\n",
            &["--kube-version", "v1.32"],
            "error: --kube-version: Kubernetes v1.32.0 ",
        ),
        (
            "",
            &["--kube-version", "v1.38.0"],
            "error: --kube-version: Kubernetes v1.38.0 ",
        ),
        ("kubeVersion: v1.31.2\n", &[], "error: Kubernetes v1.31.2 "),
        (
            "",
            &["--kube-version", "latest"],
            "error: --kube-version: \"latest\" is not a Kubernetes version",
        ),
    ];
    for (line, extra, start) in cases {
        for command in [
            &["explain", "report-builder"][..],
            &["triage"],
            &["simulate"],
            &["preempt", "payments"],
        ] {
            let (_dir, file) = example_recording(line);
            let mut args = command.to_vec();
            args.extend(["-n", "shop", "--from", file.to_str().unwrap()]);
            args.extend(extra);
            let out = run(&args);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
            assert!(err.starts_with(start), "{args:?}: {err}");
            assert!(start.contains("latest") || err.contains(range), "{args:?}: {err}");
        }
    }
    // Picked by --kube-version, an out-of-range file is evaluated (and said so).
    let out = explain_recording("kubeVersion: v1.31.2\n", &["--kube-version", "v1.33"]);
    assert!(ok(out.clone()).contains("kube-scheduler v1.33.13 semantics"));
    assert!(
        stderr(&out).contains("was taken from Kubernetes v1.31.2; evaluating with kube-scheduler v1.33.13's")
    );
}
