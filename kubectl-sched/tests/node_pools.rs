//! "Would a new node help?" through the built binary (issue 34, item 2), on examples/node-pools.yaml
//! and examples/instance-types.json: for each pending pod, one line per Karpenter NodePool naming it,
//! in the provisioner's order, and Karpenter's own answer (the node it launches or the event it
//! writes); the catalogue from the file or from the pools' nodes; no section for a pod that fits or a
//! cluster without pools; a broken catalogue refused in one line.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{json, run, stderr, stdout};
use serde_json::Value;

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("examples")
        .join(name)
}

fn explain(pod: &str, extra: &[&str]) -> Output {
    let cluster = example("node-pools.yaml");
    let mut args = vec!["explain", pod, "--from", cluster.to_str().expect("utf-8 path")];
    args.extend(extra);
    run(&args)
}

fn with_catalogue(pod: &str, extra: &[&str]) -> Output {
    let types = example("instance-types.json");
    let mut args = vec!["--instance-types", types.to_str().expect("utf-8 path")];
    args.extend(extra);
    explain(pod, &args)
}

/// `(pool, verdict)` of each pool line of `-o json`: `yes <first type>` or `no <reason>`.
fn pool_lines(section: &Value) -> Vec<(String, String)> {
    section["pools"]
        .as_array()
        .unwrap_or_else(|| panic!("no pools: {section}"))
        .iter()
        .map(|p| {
            let verdict = match p["new_node"]["instance_types"][0].as_str() {
                Some(first) => format!("yes {first}"),
                None => format!("no {}", p["reason"].as_str().unwrap_or_default()),
            };
            (p["pool"].as_str().unwrap_or_default().to_string(), verdict)
        })
        .collect()
}

const GENERAL_LIMIT: &str = "no all available instance types exceed limits for nodepool (NodePool=general)";

#[test]
fn each_pool_answers_in_karpenters_words() {
    let cases = [
        ("worker", "yes c-4x-amd64-linux", Ok("batch")),
        (
            "report",
            "no incompatible requirements, key karpenter.sh/nodepool, karpenter.sh/nodepool In [general] not \
             in karpenter.sh/nodepool In [batch]",
            Err(
                "Failed to schedule pod, incompatible requirements, key karpenter.sh/nodepool, \
                 karpenter.sh/nodepool In [general] not in karpenter.sh/nodepool In [batch]; all available \
                 instance types exceed limits for nodepool (NodePool=general)",
            ),
        ),
        (
            "etl",
            "no did not tolerate taint (taint=team=batch:NoSchedule)",
            Err(
                "Failed to schedule pod, did not tolerate taint (taint=team=batch:NoSchedule); all available \
                 instance types exceed limits for nodepool (NodePool=general)",
            ),
        ),
        (
            "giant",
            "no no instance type has enough resources, requirements=karpenter.kwok.sh/kwoknodeclass In \
             [default], karpenter.sh/capacity-type In [on-demand spot], karpenter.sh/initialized In [true], \
             karpenter.sh/nodepool In [batch], karpenter.sh/registered In [true], kubernetes.io/arch In \
             [amd64], resources={\"cpu\":\"64\",\"pods\":\"1\"}",
            Err("Failed to schedule pod, no instance type has enough resources"),
        ),
    ];
    for (pod, batch, karpenter) in cases {
        let report = json(with_catalogue(pod, &["-o", "json"]));
        let section = &report["node_pools"];
        assert_eq!(section["catalogue"], "file", "{pod}");
        assert_eq!(section["instance_types"], 3, "{pod}");
        assert_eq!(
            pool_lines(section),
            [
                ("batch".to_string(), batch.to_string()),
                ("general".to_string(), GENERAL_LIMIT.to_string())
            ],
            "{pod}: batch (weight 10) is tried before general (weight 5)"
        );
        match karpenter {
            Ok(pool) => {
                assert_eq!(section["launch"]["pool"], pool, "{pod}");
                assert_eq!(section.get("karpenter_event"), None, "{pod}");
            }
            Err(event) => {
                let got = section["karpenter_event"].as_str().unwrap_or_default();
                assert!(got.starts_with(event), "{pod}: {got}");
                assert_eq!(section.get("launch"), None, "{pod}");
            }
        }
    }
}

#[test]
fn the_table_names_the_pool_on_each_line() {
    let out = with_catalogue("etl", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let section: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Would a new node help?"))
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(
        section,
        [
            "Would a new node help? (Karpenter NodePools in the order it tries them; 3 instance types from \
             --instance-types):",
            "  batch: no, did not tolerate taint (taint=team=batch:NoSchedule)",
            "  general: no, all available instance types exceed limits for nodepool (NodePool=general)",
            "Karpenter's event on the pod: Failed to schedule pod, did not tolerate taint \
             (taint=team=batch:NoSchedule); all available instance types exceed limits for nodepool \
             (NodePool=general)",
        ],
        "{text}"
    );
}

#[test]
fn without_a_catalogue_the_pools_nodes_give_the_instance_types() {
    let report = json(explain("worker", &["-o", "json"]));
    let section = &report["node_pools"];
    assert_eq!(section["catalogue"], "nodes");
    assert_eq!(
        section["instance_types"], 1,
        "only c-4x-amd64-linux runs in the cluster"
    );
    assert_eq!(
        section["launch"]["instance_types"],
        serde_json::json!(["c-4x-amd64-linux"])
    );
}

#[test]
fn no_section_for_a_pod_that_fits_or_a_cluster_without_pools() {
    let fits = json(with_catalogue(
        "worker",
        &["--set", "resources.requests.cpu=100m", "-o", "json"],
    ));
    assert_eq!(fits["outcome"], "Scheduled");
    assert_eq!(fits.get("node_pools"), None);
    let cluster = common::example();
    let no_pools = json(run(&[
        "explain",
        "report-builder",
        "-n",
        "shop",
        "--from",
        cluster.to_str().expect("utf-8 path"),
        "-o",
        "json",
    ]));
    assert_eq!(no_pools["outcome"], "Unschedulable");
    assert_eq!(no_pools.get("node_pools"), None);
}

#[test]
fn a_broken_catalogue_is_refused_in_one_line_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("types.json");
    std::fs::write(&file, "[{\"name\": \"x\",\n \"resources\": 4}]").expect("written");
    let out = explain(
        "worker",
        &["--instance-types", file.to_str().expect("utf-8 path")],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("--instance-types {}", file.display())) && err.contains("line 2"),
        "{err}"
    );
    let missing = explain("worker", &["--instance-types", "/nonexistent/types.json"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).contains("--instance-types /nonexistent/types.json: "));
}
