//! Pod groups through the built binary (issue 31, items 2 and 3), on tests/fixtures/gang.yaml:
//! `explain podgroup/NAME` and `workload/NAME` (the group's verdict in kube-scheduler's words, node
//! by node, the checked fixes), the "Pod group" section of `explain POD`, and triage's one line per
//! group. The fixture has PodGroups, so GenericWorkload is on unless `--feature-gates` turns it off.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{json, ok, run, stderr, stdout};
use serde_json::Value;

/// What kube-scheduler writes on a pod of llama that fit: two pods placed, the third does not fit,
/// no pod runs that could be preempted.
const LLAMA_MESSAGE: &str = "pod group is unschedulable, minCount (3) cannot be satisfied: 2 scheduled, 0 \
     remaining, pod group preemption: No preemption victims found for incoming preemptor";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("fixtures")
        .join("gang.yaml")
}

/// The binary on the fixture, in namespace training.
fn sched(args: &[&str]) -> Output {
    let file = fixture();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["-n", "training", "--from", file.to_str().expect("utf-8 path")]);
    run(&all)
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|s| s.as_str().expect("string").to_string())
        .collect()
}

/// Each group's verdict, counts, first blocker and fixes, as `explain podgroup/NAME -o json` has them.
#[test]
fn explain_podgroup_gives_the_groups_verdict_node_by_node_and_checked_fixes() {
    // (group, outcome, message, placeable together, fit one by one, fixes)
    let cases = [
        (
            "llama",
            "Unschedulable",
            LLAMA_MESSAGE,
            0,
            2,
            vec!["lower the PodGroup's minCount to 2", "add 1 more node like g1"],
        ),
        ("small", "Schedulable", "", 2, 2, vec![]),
        (
            "waiting",
            "WaitingForQuorum",
            "waiting for minCount pods from a gang to appear in scheduling queue",
            0,
            0,
            vec![],
        ),
    ];
    for (group, outcome, message, together, one_by_one, fixes) in cases {
        let arg = format!("podgroup/{group}");
        let v = json(sched(&["explain", &arg, "-o", "json"]));
        assert_eq!(v["kind"], "PodGroup", "{group}");
        let g = &v["pod_groups"][0];
        assert_eq!(g["outcome"], outcome, "{group}");
        assert_eq!(g["message"], message, "{group}");
        assert_eq!(g["placeable_together"], together, "{group}");
        assert_eq!(g["fit_one_by_one"], one_by_one, "{group}");
        let described: Vec<String> = g["fixes"]
            .as_array()
            .expect("fixes")
            .iter()
            .map(|f| f["description"].as_str().expect("description").to_string())
            .collect();
        assert_eq!(described, fixes, "{group}");
    }
    let v = json(sched(&["explain", "podgroups/llama", "-o", "json"]));
    let g = &v["pod_groups"][0];
    assert_eq!(g["quorum"]["min_count"], 3);
    assert_eq!(g["quorum"]["queued"], 3);
    assert_eq!(g["workload"], "llama-wl");
    assert_eq!(g["first_unplaced"], "llama-2");
    assert_eq!(g["blocked_by"][0]["reason"], "Insufficient cpu");
    assert_eq!(g["blocked_by"][0]["nodes"], 2);
    // Node by node: one pod each, and each refuses the third for cpu.
    for (node, pod) in [("g1", "llama-0"), ("g2", "llama-1")] {
        let n = g["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .find(|n| n["node"] == node)
            .unwrap_or_else(|| panic!("{node} in {g}"));
        assert_eq!(strings(&n["takes"]), [pod], "{node}");
        assert_eq!(n["rejected_by"], "NodeResourcesFit", "{node}");
        assert_eq!(strings(&n["reasons"]), ["Insufficient cpu"], "{node}");
    }
    assert_eq!(g["findings"][0]["reason"], "InsufficientResource");
}

/// The text: the one-line verdict, kube-scheduler's words, the node table and the fixes.
#[test]
fn explain_podgroup_text_names_the_verdict_nodes_and_fixes() {
    let out = ok(sched(&["explain", "podgroup/llama"]));
    for expected in [
        "PodGroup training/llama (profile default-scheduler, 2 nodes, kube-scheduler v1.37.2 semantics): 0 of \
         3 pods placeable together (minCount 3, 0 bound), 2 fit one by one: blocked by Insufficient cpu on 2 \
         of 2 nodes",
        &format!("kube-scheduler: {LLAMA_MESSAGE}"),
        "made from Workload llama-wl",
        "REFUSES llama-2",
        "1 (llama-0)",
        "NodeResourcesFit: Insufficient cpu",
        "- lower the PodGroup's minCount to 2 (then 2 pods placed together)",
        "- add 1 more node like g1 (then 3 pods placed together)",
        "waiting at Permit",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in:\n{out}");
    }
}

/// A Workload is explained as its PodGroups; an unknown name is one line, exit 1; a flag about one
/// pod is refused; `--exit-code` says 3 for a group kube-scheduler holds back.
#[test]
fn workloads_unknown_names_pod_flags_and_exit_codes() {
    let v = json(sched(&["explain", "workload/llama-wl", "-o", "json"]));
    assert_eq!(v["kind"], "Workload");
    let names: Vec<&str> = v["pod_groups"]
        .as_array()
        .expect("pod_groups")
        .iter()
        .map(|g| g["pod_group"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["llama"]);

    for (args, error) in [
        (
            vec!["explain", "podgroup/nope"],
            "podgroups.scheduling.k8s.io \"nope\" not found in namespace \"training\"",
        ),
        (
            vec!["explain", "workload/nope"],
            "workloads.scheduling.k8s.io \"nope\" not found in namespace \"training\"",
        ),
        (
            vec!["explain", "podgroup/llama", "--node", "g1"],
            "--node applies to a pod, not to podgroup/llama",
        ),
    ] {
        let o = sched(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains(error), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: one line: {err}");
    }

    // kubectl's -o name: the group's pods.
    let names = ok(sched(&["explain", "podgroup/llama", "-o", "name"]));
    assert_eq!(names, "pod/llama-0\npod/llama-1\npod/llama-2\n");

    let held = sched(&["explain", "podgroup/llama", "--exit-code"]);
    assert_eq!(held.status.code(), Some(3), "{}", stderr(&held));
    let fits = sched(&["explain", "podgroup/small", "--exit-code"]);
    assert_eq!(fits.status.code(), Some(0), "{}", stderr(&fits));
}

/// `explain POD` of a gang pod: its message is the group's, and a short section points at the
/// group.
#[test]
fn explain_pod_of_a_group_has_a_pod_group_section() {
    let v = json(sched(&["explain", "llama-0", "-o", "json"]));
    assert_eq!(v["message"], LLAMA_MESSAGE);
    assert_eq!(v["pod_group"]["pod_group"], "llama");
    assert_eq!(v["pod_group"]["message"], LLAMA_MESSAGE);
    assert_eq!(v["pod_group"]["quorum"]["min_count"], 3);

    let out = ok(sched(&["explain", "llama-0"]));
    for expected in [
        "Pod group training/llama: 0 of 3 pods placeable together",
        "quorum: minCount 3; 3 pods: 0 bound, 3 queued, 0 gated",
        "kubectl sched explain podgroup/llama -n training",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in:\n{out}");
    }
    let solo = json(sched(&["explain", "solo", "-o", "json"]));
    assert!(solo.get("pod_group").is_none(), "a pod of no group: {solo}");
}

/// triage: one line per pod group, never one per pod; pods of no group as before. With
/// GenericWorkload off, no group: each pod is its own.
#[test]
fn triage_lists_each_pod_group_once() {
    // Exit 3: pods kube-scheduler cannot bind now (llama's three, waiting's one).
    let o = sched(&["triage", "-o", "json"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("JSON");
    assert_eq!(v["pods"], 7);
    let groups: Vec<(String, usize)> = v["pod_groups"]
        .as_array()
        .expect("pod_groups")
        .iter()
        .map(|g| {
            (
                g["pod_group"].as_str().expect("name").to_string(),
                g["pods"].as_array().expect("pods").len(),
            )
        })
        .collect();
    assert_eq!(
        groups,
        [
            ("training/llama".to_string(), 3),
            ("training/waiting".to_string(), 1),
            ("training/small".to_string(), 2)
        ]
    );
    let in_causes: Vec<String> = v["causes"]
        .as_array()
        .expect("causes")
        .iter()
        .flat_map(|c| c["workloads"].as_array().expect("workloads").iter())
        .flat_map(|w| strings(&w["pods"]))
        .collect();
    assert_eq!(in_causes, ["solo"]);

    let out = stdout(&sched(&["triage"]));
    let llama_lines = out.lines().filter(|l| l.contains("llama")).count();
    assert_eq!(llama_lines, 1, "one line for llama:\n{out}");
    assert!(
        out.contains(
            "  llama: 0 of 3 pods placeable together (minCount 3, 0 bound), 2 fit one by one: blocked by \
             Insufficient cpu on 2 of 2 nodes"
        ),
        "{out}"
    );

    let off = json(sched(&[
        "triage",
        "-o",
        "json",
        "--feature-gates",
        "GenericWorkload=false",
    ]));
    assert_eq!(off["pod_groups"].as_array().map(Vec::len), Some(0), "{off}");
    let g = json(sched(&[
        "explain",
        "podgroup/llama",
        "-o",
        "json",
        "--feature-gates",
        "GenericWorkload=false",
    ]));
    assert_eq!(g["pod_groups"][0]["outcome"], "GangSchedulingOff");
}

/// The README's pod group example prints what the README shows, byte for byte: regenerate the
/// block with the binary when the output changes.
#[test]
fn the_readme_pod_group_example_is_the_binarys_output() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let marker =
        "$ kubectl sched explain podgroup/llama -n training --from kubectl-sched/tests/fixtures/gang.yaml\n";
    let start = readme.find(marker).expect("the example in the README") + marker.len();
    let shown = &readme[start..start + readme[start..].find("```\n").expect("the block's end")];
    let out = std::process::Command::new(common::BIN)
        .args([
            "explain",
            "podgroup/llama",
            "-n",
            "training",
            "--from",
            "kubectl-sched/tests/fixtures/gang.yaml",
        ])
        .current_dir(&root)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .expect("running kubectl-sched");
    assert_eq!(shown, ok(out));
}

/// A pod its group holds at PreEnqueue (short of minCount) is headlined as held before the queue,
/// in GangScheduling's words: not as gated by an empty list of scheduling gates, and without a tie
/// hint for a pod that has no selected node.
#[test]
fn a_pod_short_of_its_quorum_is_held_before_the_queue_not_gated() {
    for format in ["table", "markdown"] {
        let out = sched(&["explain", "waiting-0", "-o", format]);
        let text = stdout(&out);
        assert!(
            text.contains("is held before the scheduling queue")
                && text.contains("waiting for minCount pods from a gang to appear in scheduling queue"),
            "{format}: {text}"
        );
        for wrong in ["scheduling gates", "Once ungated", "share the top score"] {
            assert!(!text.contains(wrong), "{format} says {wrong:?}: {text}");
        }
    }
}

/// examples/gang-preempt.yaml, from the workspace root.
fn preempt_example(args: &[&str]) -> Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let file = root.join("examples").join("gang-preempt.yaml");
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["-n", "research", "--from", file.to_str().expect("utf-8 path")]);
    run(&all)
}

/// `preempt podgroup/NAME` (and `preempt` of a gang's pod, which drills its group) plans the
/// group's workload-aware preemption: the victims node by node, the spared pod left out, each pod
/// of the group nominated, and the plan (each victim removed, then the nominations), not executed
/// on a file.
#[test]
fn preempt_podgroup_plans_the_groups_victims_per_node() {
    for target in ["podgroup/train", "train-1"] {
        let v = json(preempt_example(&["preempt", target, "-o", "json"]));
        assert_eq!(v["pod_group"], "research/train", "{target}");
        assert_eq!(v["situation"], "planned", "{target}");
        assert_eq!(v["dry_run"], "client", "{target}");
        let p = &v["preemption"];
        assert_eq!(
            p["message"],
            "pod group preemption: found a placement for podgroup, preempting 3 victims"
        );
        let per_node: Vec<(String, Vec<String>)> = p["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .map(|n| {
                let names = n["victims"]
                    .as_array()
                    .expect("victims")
                    .iter()
                    .map(|v| v["name"].as_str().expect("name").to_string())
                    .collect();
                (n["node"].as_str().expect("node").to_string(), names)
            })
            .collect();
        assert_eq!(
            per_node,
            [
                ("gpu-1".to_string(), vec!["batch-a".to_string()]),
                (
                    "gpu-2".to_string(),
                    vec!["batch-b".to_string(), "batch-c".to_string()]
                ),
            ],
            "{target}: logger is spared"
        );
        let kinds: Vec<&str> = v["actions"]
            .as_array()
            .expect("actions")
            .iter()
            .map(|a| a["kind"].as_str().expect("kind"))
            .collect();
        assert_eq!(
            kinds,
            [
                "SetPodCondition",
                "DeletePod",
                "Event",
                "SetPodCondition",
                "DeletePod",
                "Event",
                "SetPodCondition",
                "DeletePod",
                "Event",
                "SetNominatedNodeName",
                "SetNominatedNodeName"
            ],
            "{target}"
        );
        assert_eq!(
            v["actions"][0]["condition"]["message"],
            "default-scheduler: preempting to accommodate a higher priority podgroup"
        );
    }
    // -o name: the victims.
    let names = ok(preempt_example(&["preempt", "podgroup/train", "-o", "name"]));
    assert_eq!(names, "pod/batch-a\npod/batch-b\npod/batch-c\n");
}

/// What `preempt podgroup/NAME` refuses: an unknown group (exit 1), `--node` (a group's domain is
/// the whole cluster) and `-f` with it (exit 2), each in one line.
#[test]
fn preempt_podgroup_refuses_what_does_not_apply() {
    // (args, exit code, words in the error)
    let cases: [(&[&str], i32, &str); 3] = [
        (
            &["preempt", "podgroup/nope"],
            1,
            "podgroup research/nope: neither the PodGroup nor a pod",
        ),
        (
            &["preempt", "podgroup/train", "--node", "gpu-1"],
            2,
            "--node: a pod group's preemption",
        ),
        (
            &["preempt", "podgroup/train", "-f", "-"],
            2,
            "cannot be used with",
        ),
    ];
    for (args, code, words) in cases {
        let out = preempt_example(args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(words), "{args:?}: {err}");
    }
}

/// The README's group preemption example prints what the binary prints.
#[test]
fn the_readme_group_preemption_example_is_the_binarys_output() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let marker = "$ kubectl sched preempt podgroup/train -n research --from examples/gang-preempt.yaml\n";
    let start = readme.find(marker).expect("the example in the README") + marker.len();
    let shown = &readme[start..start + readme[start..].find("```\n").expect("the block's end")];
    let out = std::process::Command::new(common::BIN)
        .args([
            "preempt",
            "podgroup/train",
            "-n",
            "research",
            "--from",
            "examples/gang-preempt.yaml",
        ])
        .current_dir(&root)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .expect("running kubectl-sched");
    assert_eq!(shown, ok(out));
}
