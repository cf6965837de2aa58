//! `kubectl sched triage` against the real control plane: the acceptance test.
//!
//! Three Deployments stay pending for three different reasons and one schedules; the real
//! kube-controller-manager creates their pods (Deployment -> ReplicaSet -> pods) and the real
//! kube-scheduler writes its verdict on each (PodScheduled=False, reason Unschedulable). Then
//! `triage -n NS -o json` must put each pending Deployment in one workload group under its own
//! cause, list exactly its pods, and quote kube-scheduler's message byte for byte (the oracle).
//!
//! The control plane is this test's own ([`ControlPlane::start`]), not [`ControlPlane::shared`]:
//! the shared one runs kube-controller-manager with the PV binder only, so nothing would turn a
//! Deployment into pods; and a cluster holding only this test's nodes keeps the oracle exact and
//! stable. kube-scheduler's message counts every node of the cluster ("0/N nodes are available"),
//! so on a cluster shared with tests that add and delete nodes, the message kube-scheduler wrote
//! at its last attempt and the one triage computes a moment later could count different nodes.
//! Here the cluster does not change once the pods are pending, so both see the same 5 nodes.
//! The nodes still carry [`TEST_LABEL`] and the pods select it, as on a shared control plane.
//!
//! Nodes (2 cpu each): two plain ones, and three carrying the taint [`TAINT`] and the label
//! [`POOL`]`=tainted`. The Deployments:
//! - `big` (3 replicas): 3 cpu, tolerating the taint: `Insufficient cpu` on all 5 nodes;
//! - `gpu` (2 replicas): a nodeSelector `gpu=true` no node has, tolerating the taint: the node
//!   affinity/selector reason on all 5 nodes;
//! - `tainted` (2 replicas): 100m, selecting the tainted pool without tolerating its taint: the
//!   untolerated taint on 3 nodes (the most), node affinity/selector on the 2 plain ones;
//! - `web` (1 replica): 100m, fits on a plain node, gets bound and is not triaged.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Output;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use common::shown;
use e2e::fixtures::{TEST_LABEL, eventually, ready_node};
use e2e::{ControlPlane, Options};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::{Value, json};

const TEST: &str = "triage";
/// The taint of the tainted pool (key, value; effect NoSchedule).
const TAINT: (&str, &str) = ("e2e.kubectl-sched.dev/dedicated", "triage");
/// The label of the tainted pool's nodes.
const POOL: &str = "e2e.kubectl-sched.dev/pool";
/// Bounds the wait for the controllers and kube-scheduler.
const WAIT: Duration = Duration::from_secs(60);

/// A pending Deployment and the cause triage must give it.
struct Expected {
    name: &'static str,
    replicas: usize,
    /// How the cause (what must change: here the only blocker on the most nodes) begins.
    cause: &'static str,
    /// How many nodes that reason rejects.
    nodes: usize,
}

const PENDING: [Expected; 3] = [
    Expected {
        name: "big",
        replicas: 3,
        cause: "Insufficient cpu",
        nodes: 5,
    },
    Expected {
        name: "gpu",
        replicas: 2,
        cause: "node(s) didn't match Pod's node affinity/selector",
        nodes: 5,
    },
    Expected {
        name: "tainted",
        replicas: 2,
        cause: "node(s) had untolerated taint",
        nodes: 3,
    },
];

fn toleration() -> Value {
    json!([{"key": TAINT.0, "operator": "Equal", "value": TAINT.1, "effect": "NoSchedule"}])
}

/// A Deployment of `replicas` pause pods (label `app=NAME`) requesting `cpu`, selecting this test's
/// nodes plus `node_selector`, with `tolerations`.
fn deployment(
    name: &str,
    replicas: usize,
    cpu: &str,
    node_selector: &[(&str, &str)],
    tolerations: Value,
) -> Result<Deployment> {
    let mut selector = serde_json::Map::new();
    selector.insert(TEST_LABEL.into(), json!(TEST));
    for (k, v) in node_selector {
        selector.insert((*k).into(), json!(v));
    }
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": selector,
                    "tolerations": tolerations,
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{
                        "name": "c",
                        "image": common::PAUSE_IMAGE,
                        "resources": {"requests": {"cpu": cpu}},
                    }],
                },
            },
        },
    }))?)
}

/// kube-scheduler's PodScheduled condition of `pod`: (status, reason, message).
fn scheduled_condition(pod: &Pod) -> Option<(String, String, String)> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")
        .map(|c| {
            (
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

/// Every pod of the namespace: name, app label, node, PodScheduled condition (for failure messages).
fn describe(pods: &[Pod]) -> String {
    pods.iter()
        .map(|p| {
            format!(
                "  {} (app={}, node={:?}, deleting={}): {:?}\n",
                p.metadata.name.as_deref().unwrap_or(""),
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("app"))
                    .map_or("", String::as_str),
                p.spec.as_ref().and_then(|s| s.node_name.as_deref()),
                p.metadata.deletion_timestamp.is_some(),
                scheduled_condition(p)
            )
        })
        .collect()
}

/// The pods of `app` (not being deleted).
fn pods_of<'a>(pods: &'a [Pod], app: &str) -> Vec<&'a Pod> {
    pods.iter()
        .filter(|p| {
            p.metadata.deletion_timestamp.is_none()
                && p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("app"))
                    .is_some_and(|a| a == app)
        })
        .collect()
}

/// What kube-scheduler said about one pending Deployment: its pods and their (one) message.
#[derive(Debug)]
struct Verdict {
    pods: BTreeSet<String>,
    message: String,
}

/// Waits until every pending Deployment has its replicas, each Unschedulable with kube-scheduler's
/// message counting all 5 nodes (the same message for the replicas of one Deployment), and `web`'s
/// pod is bound.
async fn wait_for_kube_scheduler(api: &Api<Pod>) -> Result<BTreeMap<&'static str, Verdict>> {
    let last = Mutex::new(String::new());
    let waited = eventually(
        "kube-controller-manager's pods and kube-scheduler's verdicts",
        WAIT,
        || {
            let last = &last;
            async move {
                let pods = api.list(&ListParams::default()).await?.items;
                if let Ok(mut l) = last.lock() {
                    *l = describe(&pods);
                }
                let web = pods_of(&pods, "web");
                let web_bound = web.len() == 1
                    && web[0]
                        .spec
                        .as_ref()
                        .and_then(|s| s.node_name.as_deref())
                        .is_some_and(|n| !n.is_empty());
                if !web_bound {
                    return Ok(None);
                }
                let mut verdicts = BTreeMap::new();
                for e in &PENDING {
                    let mine = pods_of(&pods, e.name);
                    if mine.len() != e.replicas {
                        return Ok(None);
                    }
                    let mut messages = BTreeSet::new();
                    for p in &mine {
                        match scheduled_condition(p) {
                            Some((status, reason, message))
                                if status == "False"
                                    && reason == "Unschedulable"
                                    && message.starts_with("0/5 nodes are available: ") =>
                            {
                                messages.insert(message);
                            }
                            _ => return Ok(None),
                        }
                    }
                    // Replicas kube-scheduler last tried at different moments may still differ.
                    if messages.len() != 1 {
                        return Ok(None);
                    }
                    let names = mine.iter().filter_map(|p| p.metadata.name.clone()).collect();
                    verdicts.insert(
                        e.name,
                        Verdict {
                            pods: names,
                            message: messages.into_iter().next().unwrap_or_default(),
                        },
                    );
                }
                Ok(Some(verdicts))
            }
        },
    )
    .await;
    let last = last.into_inner().unwrap_or_default();
    waited.with_context(|| format!("the namespace's pods at the end of the wait:\n{last}"))
}

/// `kubectl-sched triage -n NS ARGS...` against the control plane: its output.
async fn triage(cp: &ControlPlane, ns: &str, args: &[&str]) -> Result<Output> {
    let mut all = vec!["triage", "-n", ns];
    all.extend_from_slice(args);
    let run = Instant::now();
    let output = common::run_kubectl_sched_on(cp, &all).await?;
    println!("kubectl-sched {} ran for {:?}", args.join(" "), run.elapsed());
    Ok(output)
}

/// The workload groups of `report` for `deployment/NAME` in `ns`, with their cause.
fn groups<'a>(report: &'a Value, ns: &str, name: &str) -> Vec<(&'a Value, &'a Value)> {
    let wanted = json!({"namespace": ns, "kind": "deployment", "name": name});
    common::triage_groups(report)
        .filter(|(_, w)| w["workload"] == wanted)
        .collect()
}

fn strings(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn triage_groups_deployments_by_cause_as_kube_scheduler_says() -> Result<()> {
    let started = Instant::now();
    let cp = ControlPlane::start(
        Options::new()
            .with_scheduler(None)
            .with_controller_manager(&["deployment", "replicaset"]),
    )
    .await?;
    let client = cp.client()?;
    let ns = cp.new_namespace(TEST).await?;

    // The nodes first, so that kube-scheduler has all of them when the pods arrive (it retries the
    // pods on node events anyway; the wait below insists on "0/5 nodes").
    let nodes: Api<Node> = Api::all(client.clone());
    let mut tainted_nodes = BTreeSet::new();
    for i in 1..=5 {
        let name = format!("{TEST}-n{i}");
        let mut node = ready_node(&name, TEST, "2", "8Gi", "110");
        if i > 2 {
            node.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert(POOL.into(), "tainted".into());
            node.spec.get_or_insert_with(Default::default).taints = Some(vec![Taint {
                key: TAINT.0.into(),
                value: Some(TAINT.1.into()),
                effect: "NoSchedule".into(),
                time_added: None,
            }]);
            tainted_nodes.insert(name.clone());
        }
        nodes.create(&PostParams::default(), &node).await?;
    }

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    for d in [
        deployment("big", 3, "3", &[], toleration())?,
        deployment("gpu", 2, "100m", &[("gpu", "true")], toleration())?,
        deployment("tainted", 2, "100m", &[(POOL, "tainted")], json!([]))?,
        deployment("web", 1, "100m", &[], json!([]))?,
    ] {
        deployments.create(&PostParams::default(), &d).await?;
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let said = wait_for_kube_scheduler(&pods).await?;
    let ready = started.elapsed();

    // The whole namespace, as JSON.
    let output = triage(&cp, &ns, &["-o", "json"]).await?;
    let context = || {
        format!(
            "kube-scheduler said: {said:#?}\ntriage -n {ns} -o json: {}",
            shown(&output)
        )
    };
    ensure!(
        output.status.code() == Some(3),
        "exit code is not 3\n{}",
        context()
    );
    let report: Value = serde_json::from_slice(&output.stdout)
        .with_context(|| format!("triage's output is not JSON\n{}", context()))?;
    ensure!(report["pods"] == 7, "not 7 pending pods\n{}", context());
    ensure!(
        groups(&report, &ns, "web").is_empty(),
        "deployment/web (bound) was triaged\n{}",
        context()
    );
    let mut causes = BTreeSet::new();
    for e in &PENDING {
        let found = groups(&report, &ns, e.name);
        let [(cause, group)] = found.as_slice() else {
            anyhow::bail!(
                "deployment/{} is in {} workload groups, not one\n{}",
                e.name,
                found.len(),
                context()
            );
        };
        let verdict = &said[e.name];
        let name = e.name;
        let cause_text = cause["cause"].as_str().unwrap_or_default();
        ensure!(
            cause["verdict"] == "unschedulable" && group["verdict"] == "unschedulable",
            "deployment/{name} is not unschedulable\n{}",
            context()
        );
        ensure!(
            cause_text.starts_with(e.cause),
            "deployment/{name}'s cause is {cause_text:?}, not {:?}...\n{}",
            e.cause,
            context()
        );
        let top = group["reasons"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["reason"] == cause_text))
            .with_context(|| format!("the cause is not among the reasons\n{}", context()))?;
        ensure!(
            top["nodes"] == e.nodes,
            "deployment/{name}'s cause rejects {} nodes, not {}\n{}",
            top["nodes"],
            e.nodes,
            context()
        );
        ensure!(
            strings(&group["pods"]) == verdict.pods,
            "deployment/{name}'s pods are not {:?}\n{}",
            verdict.pods,
            context()
        );
        // The oracle: kube-scheduler's own FailedScheduling message, byte for byte.
        ensure!(
            group["message"] == verdict.message.as_str(),
            "deployment/{name}'s message differs from kube-scheduler's\n  kube-scheduler: {:?}\n  triage:         {}\n{}",
            verdict.message,
            group["message"],
            context()
        );
        causes.insert(cause_text.to_owned());
        if name == "tainted" {
            let smallest = &group["fixes"][0];
            let change = smallest["change"].as_str().unwrap_or_default();
            ensure!(
                smallest["kind"] == "add_toleration"
                    && change.contains(TAINT.0)
                    && change.contains(TAINT.1)
                    && change.contains("NoSchedule")
                    && strings(&smallest["opens"]) == tainted_nodes,
                "deployment/tainted's smallest fix is not to tolerate {}={}:NoSchedule on {:?}\n{}",
                TAINT.0,
                TAINT.1,
                tainted_nodes,
                context()
            );
        }
    }
    ensure!(
        causes.len() == 3,
        "the causes are not distinct: {causes:?}\n{}",
        context()
    );

    // One workload.
    let output = triage(&cp, &ns, &["deployment/big", "-o", "json"]).await?;
    ensure!(output.status.code() == Some(3), "{}", shown(&output));
    let only: Value =
        serde_json::from_slice(&output.stdout).with_context(|| format!("not JSON: {}", shown(&output)))?;
    let workloads: Vec<&Value> = only["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["workloads"].as_array().into_iter().flatten())
        .collect();
    ensure!(
        only["pods"] == 3
            && workloads.len() == 1
            && workloads[0]["workload"] == json!({"namespace": ns, "kind": "deployment", "name": "big"})
            && strings(&workloads[0]["pods"]) == said["big"].pods,
        "triage deployment/big is not only deployment/big's group\n{}",
        shown(&output)
    );

    // The table.
    let output = triage(&cp, &ns, &["-o", "table"]).await?;
    let table = String::from_utf8_lossy(&output.stdout);
    ensure!(
        output.status.code() == Some(3) && table.lines().any(|l| l.starts_with("  deployment/big: 3 pods")),
        "no line \"  deployment/big: 3 pods\" in the table\n{}",
        shown(&output)
    );
    println!("{table}");
    for (name, verdict) in &said {
        println!(
            "kube-scheduler on deployment/{name}'s pods: {:?}",
            verdict.message
        );
    }
    println!(
        "pods pending with kube-scheduler's verdicts after {ready:?}; done after {:?}",
        started.elapsed()
    );
    Ok(())
}
