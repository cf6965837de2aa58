//! Preemption against the real control plane.
//!
//! Differential: each scenario builds its cluster with kube-scheduler stopped (bound victims,
//! PriorityClasses, PodDisruptionBudgets whose status is written through the status subresource,
//! since no disruption controller runs, nominated pods, and the pending preemptor), asks
//! `kubectl sched preempt POD --dry-run=client -o json` for a prediction, then starts the real
//! kube-scheduler v1.37.2 and compares what it does: the pods it deletes (victims are created with
//! a 30 s grace period and no kubelet ever confirms the deletion, so they stay terminating with a
//! `DisruptionTarget` condition), the node it writes into the preemptor's
//! `status.nominatedNodeName`, its FailedScheduling message, and the lower-priority nominations it
//! clears. Each scenario also checks that kube-scheduler's choice is the one the scenario was built
//! for (one criterion of `pickOneNodeForPreemption`, PDB accounting, nominated pods...).
//!
//! Execution: `kubectl sched preempt POD --yes` does the preemption itself (kube-scheduler stopped),
//! then kube-scheduler, started afterwards, binds the preemptor where it was nominated;
//! `--mode=evict` stops at a PodDisruptionBudget that blocks; `--dry-run=server` changes nothing.
//!
//! Stale plans: on a pseudo-terminal, the cluster changes while the confirmation is on the screen
//! (nothing is written when the victims or the preemptor are no longer the ones shown), or, held by
//! the debug-build hook `KUBECTL_SCHED_TEST_PAUSE_BEFORE_WRITES`, between the second read and the
//! first write (the resourceVersion preconditions refuse it); sched-core's writer is also checked
//! against stale and recreated pods directly.
//!
//! The scenarios share one control plane (without kube-controller-manager) and run one at a time.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use common::{HIGH, LOW, Lab, PodBuilder, kubectl_sched_binary, pod, run_kubectl_sched};
use e2e::{ControlPlane, Options};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

/// Priority classes of these scenarios, besides `common`'s LOW (100) and HIGH (1000).
const LOWEST: (&str, i32) = ("e2e-lowest", 50);
const MID: (&str, i32) = ("e2e-mid", 500);
/// The lowest priority there is: it adds nothing to a node's sum of victim priorities, since
/// kube-scheduler adds MaxInt32 + 1 to every priority before summing.
const MIN: (&str, i32) = ("e2e-min", i32::MIN);
/// `preemptionPolicy: Never`: such a pod keeps its nomination when it fails to schedule.
const TOP_NEVER: (&str, i32) = ("e2e-top-never", 2000);
const LOWEST_NEVER: (&str, i32) = ("e2e-lowest-never", 50);

/// How long kube-scheduler gets to nominate the preemptor.
const NOMINATION_TIMEOUT: Duration = Duration::from_secs(30);
/// After the nomination, how long the victims' deletions get to show (async preemption deletes
/// them from a goroutine).
const VICTIMS_TIMEOUT: Duration = Duration::from_secs(10);
/// Quiet time after the expected victims are seen, to catch deletions nobody predicted.
const SETTLE: Duration = Duration::from_millis(1500);
/// Bounds one `kubectl-sched` run.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// Victims linger this long after DELETE (no kubelet confirms it), so they are seen terminating.
const GRACE: i64 = 30;
const POLL: Duration = Duration::from_millis(200);

static CONTROL_PLANE: OnceCell<ControlPlane> = OnceCell::const_new();
static BINARY: OnceCell<PathBuf> = OnceCell::const_new();

/// The plugin binary, built (see [`kubectl_sched_binary`]) once per test process.
async fn binary() -> Result<&'static Path> {
    Ok(BINARY.get_or_try_init(kubectl_sched_binary).await?.as_path())
}

/// etcd and kube-apiserver only; kube-scheduler is started by each scenario when its state is
/// built, and stopped at its end.
async fn control_plane() -> Result<&'static ControlPlane, e2e::Error> {
    CONTROL_PLANE
        .get_or_try_init(|| ControlPlane::start(Options::new()))
        .await
}

/// A scenario's turn: the lab, with kube-scheduler stopped until [`Scenario::start_scheduler`],
/// and stopped again when the scenario ends, however it ends.
struct Scenario {
    lab: Lab,
}

impl Scenario {
    async fn begin(id: &str) -> Result<Self> {
        // Built before taking the turn, so that no scenario holds the cluster meanwhile.
        binary().await?;
        let lab = Lab::begin_on(id, control_plane).await?;
        // A scenario that failed before stopping it leaves it to the next one.
        lab.cp.stop_scheduler();
        ensure_priority_classes(&lab.client).await?;
        Ok(Scenario { lab })
    }

    async fn start_scheduler(&self) -> Result<()> {
        self.lab.cp.start_scheduler(None).await?;
        Ok(())
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.lab.client.clone(), &self.lab.ns)
    }

    /// Merges `status` into the pod's status through the status subresource.
    async fn patch_pod_status(&self, name: &str, status: Value) -> Result<()> {
        self.pods()
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
            .with_context(|| format!("patching the status of pod {}/{name}", self.lab.ns))?;
        Ok(())
    }

    /// `status.startTime` = now - `ago` (the last criterion of pickOneNodeForPreemption, and the
    /// order among victims of equal priority).
    async fn started(&self, name: &str, ago: Duration) -> Result<()> {
        self.patch_pod_status(name, json!({ "startTime": seconds_ago(ago)? }))
            .await
    }

    /// A pending pod nominated to `node` (as a previous preemption would have left it).
    async fn nominate(&self, name: &str, node: &str) -> Result<()> {
        self.patch_pod_status(name, json!({ "nominatedNodeName": node }))
            .await
    }

    /// A PodDisruptionBudget over `app=<app>` with this status, as a disruption controller would
    /// have written it (`observedGeneration` current, so the Eviction API trusts it).
    async fn pdb(&self, name: &str, app: &str, status: Value) -> Result<()> {
        let created = self
            .lab
            .create_namespaced::<PodDisruptionBudget>(json!({
                "metadata": {"name": name},
                "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": app}}},
            }))
            .await?;
        let mut status = status;
        status["observedGeneration"] = json!(created.metadata.generation.unwrap_or(1));
        for key in ["currentHealthy", "desiredHealthy", "expectedPods"] {
            if status.get(key).is_none() {
                status[key] = json!(1);
            }
        }
        Api::<PodDisruptionBudget>::namespaced(self.lab.client.clone(), &self.lab.ns)
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
            .with_context(|| format!("setting the status of PodDisruptionBudget {name}"))?;
        Ok(())
    }
}

impl Drop for Scenario {
    fn drop(&mut self) {
        self.lab.cp.stop_scheduler();
    }
}

/// RFC 3339, whole seconds (as the API server stores times), `ago` before now.
fn seconds_ago(ago: Duration) -> Result<String> {
    use k8s_openapi::jiff::Timestamp;
    let ago = i64::try_from(ago.as_secs()).context("too far back")?;
    Ok(Timestamp::from_second(Timestamp::now().as_second() - ago)?.to_string())
}

/// A bound pod of priority `class` using `cpu`, that lingers terminating when deleted.
fn victim(name: &str, class: (&str, i32), cpu: &str, node: &str) -> PodBuilder {
    pod(name)
        .label("app", name)
        .priority_class(class)
        .cpu(cpu)
        .spec("terminationGracePeriodSeconds", json!(GRACE))
        .on(node)
}

async fn ensure_priority_classes(client: &Client) -> Result<()> {
    let api: Api<PriorityClass> = Api::all(client.clone());
    for ((name, value), policy) in [
        (LOWEST, "PreemptLowerPriority"),
        (MID, "PreemptLowerPriority"),
        (MIN, "PreemptLowerPriority"),
        (TOP_NEVER, "Never"),
        (LOWEST_NEVER, "Never"),
    ] {
        if api.get_opt(name).await?.is_some() {
            continue;
        }
        let class: PriorityClass = serde_json::from_value(json!({
            "metadata": {"name": name},
            "value": value,
            "preemptionPolicy": policy,
        }))?;
        match api.create(&PostParams::default(), &class).await {
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            other => {
                other.with_context(|| format!("creating PriorityClass {name}"))?;
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The prediction

/// `kubectl sched preempt POD -n NS --dry-run=client -o json`: the JSON document (exit 0, or 3
/// when preemption cannot help).
async fn predict(lab: &Lab, pod: &str) -> Result<Value> {
    let binary = binary().await?;
    let kubeconfig = lab.cp.kubeconfig_path().display().to_string();
    let args = [
        "preempt",
        pod,
        "-n",
        &lab.ns,
        "--dry-run=client",
        "-o",
        "json",
        "--kubeconfig",
        &kubeconfig,
    ];
    let output = run_kubectl_sched(binary, &args).await?;
    ensure!(
        matches!(output.status.code(), Some(0 | 3)),
        "kubectl-sched {} exited with {}:\nstdout: {}\nstderr: {}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "kubectl-sched {} printed no JSON: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

/// What the prediction says kube-scheduler will do.
#[derive(Debug)]
struct Prediction {
    node: Option<String>,
    victims: BTreeSet<String>,
    /// Pods whose nomination the plan clears.
    cleared: BTreeSet<String>,
    /// The whole FailedScheduling message, when the document carries it.
    failed_scheduling_message: Option<String>,
    message: String,
    json: Value,
}

impl Prediction {
    fn new(json: Value) -> Result<Self> {
        let key = |v: &Value| -> Result<String> {
            let namespace = v["namespace"].as_str().context("no namespace")?;
            let name = v["name"].as_str().context("no name")?;
            Ok(format!("{namespace}/{name}"))
        };
        let victims = json["victims"]
            .as_array()
            .context("no victims[]")?
            .iter()
            .map(key)
            .collect::<Result<_>>()?;
        let cleared = json["actions"]
            .as_array()
            .context("no actions[]")?
            .iter()
            .filter(|a| a["kind"] == "SetNominatedNodeName" && a["node"] == "")
            .map(|a| key(&a["pod"]))
            .collect::<Result<_>>()?;
        Ok(Prediction {
            node: json["node"].as_str().map(str::to_owned),
            victims,
            cleared,
            failed_scheduling_message: json["failed_scheduling_message"].as_str().map(str::to_owned),
            message: json["message"].as_str().unwrap_or_default().to_owned(),
            json,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// What kube-scheduler did

/// Every pod of the scenario's namespace: `ns/name` → (uid, nominatedNodeName).
async fn pods_before(api: &Api<Pod>) -> Result<BTreeMap<String, (String, String)>> {
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|p| {
            let key = format!(
                "{}/{}",
                p.metadata.namespace.unwrap_or_default(),
                p.metadata.name.unwrap_or_default()
            );
            let uid = p.metadata.uid.unwrap_or_default();
            let nominated = p.status.and_then(|s| s.nominated_node_name).unwrap_or_default();
            (key, (uid, nominated))
        })
        .collect())
}

#[derive(Debug)]
struct Outcome {
    nominated: String,
    /// Pods gone, or terminating, that existed before kube-scheduler started.
    removed: BTreeSet<String>,
    /// Pods whose nomination went from a node to none.
    cleared: BTreeSet<String>,
    /// The preemptor's first FailedScheduling note.
    failed_scheduling: Option<String>,
    /// Removed pods still present without a DisruptionTarget=True/PreemptionByScheduler condition.
    without_disruption_target: BTreeSet<String>,
    /// Removed pods without a `Preempted` event.
    without_preempted_event: BTreeSet<String>,
}

async fn observe(
    lab: &Lab,
    preemptor: &str,
    before: &BTreeMap<String, (String, String)>,
    expected_victims: &BTreeSet<String>,
) -> Result<Outcome> {
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), &lab.ns);
    let events: Api<Event> = Api::namespaced(lab.client.clone(), &lab.ns);
    let nominated = e2e::fixtures::wait_for(
        &format!("kube-scheduler to nominate {preemptor}"),
        NOMINATION_TIMEOUT,
        || async {
            let p = pods.get(preemptor).await?;
            Ok(p.status
                .and_then(|s| s.nominated_node_name)
                .filter(|n| !n.is_empty()))
        },
    )
    .await
    .with_context(|| {
        format!(
            "kube-scheduler did not preempt; its log:\n{}",
            lab.cp.log_tail("kube-scheduler", 30)
        )
    })?;

    // The victims go from a goroutine: wait for the expected ones (or time out, the comparison
    // then tells what differs), then a little longer for any nobody expected.
    let removed = || async {
        let now: BTreeMap<String, Pod> = pods
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .map(|p| {
                (
                    format!(
                        "{}/{}",
                        p.metadata.namespace.clone().unwrap_or_default(),
                        p.metadata.name.clone().unwrap_or_default()
                    ),
                    p,
                )
            })
            .collect();
        let removed: BTreeSet<String> = before
            .iter()
            .filter(|(key, (uid, _))| match now.get(*key) {
                None => true,
                Some(p) => {
                    p.metadata.uid.as_deref() != Some(uid.as_str()) || p.metadata.deletion_timestamp.is_some()
                }
            })
            .map(|(key, _)| key.clone())
            .collect();
        anyhow::Ok((removed, now))
    };
    let deadline = Instant::now() + VICTIMS_TIMEOUT;
    loop {
        let (seen, _) = removed().await?;
        if seen.is_superset(expected_victims) || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    tokio::time::sleep(SETTLE).await;
    let (removed, now) = removed().await?;

    let cleared = before
        .iter()
        .filter(|(_, (_, nominated))| !nominated.is_empty())
        .filter(|(key, _)| {
            now.get(*key).is_some_and(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.nominated_node_name.as_deref())
                    .unwrap_or_default()
                    .is_empty()
            })
        })
        .map(|(key, _)| key.clone())
        .collect();

    let without_disruption_target = removed
        .iter()
        .filter(|key| {
            now.get(*key).is_some_and(|p| {
                !p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .into_iter()
                    .flatten()
                    .any(|c| {
                        c.type_ == "DisruptionTarget"
                            && c.status == "True"
                            && c.reason.as_deref() == Some("PreemptionByScheduler")
                    })
            })
        })
        .cloned()
        .collect();

    let all_events = events.list(&ListParams::default()).await?.items;
    let preemptor_uid = pods.get(preemptor).await?.metadata.uid.unwrap_or_default();
    let mut failed: Vec<&Event> = all_events
        .iter()
        .filter(|e| {
            e.reason.as_deref() == Some("FailedScheduling")
                && e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(preemptor_uid.as_str())
        })
        .collect();
    failed.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
    let without_preempted_event = removed
        .iter()
        .filter(|key| {
            let uid = before.get(*key).map(|(uid, _)| uid.as_str());
            !all_events.iter().any(|e| {
                e.reason.as_deref() == Some("Preempted")
                    && e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == uid
            })
        })
        .cloned()
        .collect();

    Ok(Outcome {
        nominated,
        removed,
        cleared,
        failed_scheduling: failed.first().and_then(|e| e.note.clone()),
        without_disruption_target,
        without_preempted_event,
    })
}

/// The differential procedure: the state is built (kube-scheduler stopped, `preemptor` pending),
/// the prediction taken, kube-scheduler started; what it does must equal the prediction, and be
/// what the scenario was built for: preemption on `node` with exactly `victims` (short names)
/// and, when given, these nominations cleared.
async fn differential(
    scenario: &Scenario,
    preemptor: &str,
    node: &str,
    victims: &[&str],
    cleared: &[&str],
) -> Result<()> {
    let lab = &scenario.lab;
    let started = Instant::now();
    let key = |name: &str| format!("{}/{name}", lab.ns);
    let api = scenario.pods();
    let before = pods_before(&api).await?;
    let prediction = Prediction::new(predict(lab, preemptor).await?)?;
    let predicted_in = started.elapsed();

    scenario.start_scheduler().await?;
    let outcome = observe(lab, preemptor, &before, &prediction.victims).await?;
    eprintln!(
        "[preemption] {} in {:.1} s (prediction {:.0} ms)\n  predicted:      node {:?} victims {:?} cleared {:?}\n  \
         kube-scheduler: node {:?} victims {:?} cleared {:?}\n  message: {:?}",
        lab.ns,
        started.elapsed().as_secs_f64(),
        predicted_in.as_secs_f64() * 1000.0,
        prediction.node,
        prediction.victims,
        prediction.cleared,
        outcome.nominated,
        outcome.removed,
        outcome.cleared,
        outcome.failed_scheduling
    );

    // The differential rule.
    ensure!(
        prediction.node.as_deref() == Some(outcome.nominated.as_str())
            && prediction.victims == outcome.removed,
        "MISMATCH in {}: kube-scheduler nominated {:?} and removed {:?}; predicted node {:?}, \
         victims {:?}\nprediction: {}",
        lab.ns,
        outcome.nominated,
        outcome.removed,
        prediction.node,
        prediction.victims,
        prediction.json
    );
    ensure!(
        prediction.cleared == outcome.cleared,
        "MISMATCH in {}: kube-scheduler cleared the nominations of {:?}, predicted {:?}",
        lab.ns,
        outcome.cleared,
        prediction.cleared
    );
    if let Some(note) = &outcome.failed_scheduling {
        match &prediction.failed_scheduling_message {
            Some(predicted) => ensure!(
                predicted == note,
                "MISMATCH in {}: FailedScheduling\n  kube-scheduler: {note:?}\n  predicted:      {predicted:?}",
                lab.ns
            ),
            None => ensure!(
                note.ends_with(&prediction.message),
                "MISMATCH in {}: FailedScheduling {note:?} does not end with {:?}",
                lab.ns,
                prediction.message
            ),
        }
    }
    ensure!(
        outcome.without_disruption_target.is_empty(),
        "{}: victims without the DisruptionTarget condition: {:?}",
        lab.ns,
        outcome.without_disruption_target
    );
    ensure!(
        outcome.without_preempted_event.is_empty(),
        "{}: victims without a Preempted event: {:?}",
        lab.ns,
        outcome.without_preempted_event
    );

    // The scenario exercises what it claims.
    let want_victims: BTreeSet<String> = victims.iter().map(|v| key(v)).collect();
    let want_cleared: BTreeSet<String> = cleared.iter().map(|v| key(v)).collect();
    ensure!(
        outcome.nominated == lab.n(node) && outcome.removed == want_victims,
        "{}: the scenario expects preemption on {} of {want_victims:?}; kube-scheduler chose {} \
         with {:?}",
        lab.ns,
        lab.n(node),
        outcome.nominated,
        outcome.removed
    );
    ensure!(
        outcome.cleared == want_cleared,
        "{}: the scenario expects the nominations of {want_cleared:?} cleared, kube-scheduler cleared {:?}",
        lab.ns,
        outcome.cleared
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Differential scenarios

/// One node, one lower-priority pod in the way.
#[tokio::test]
async fn one_victim() -> Result<()> {
    let s = Scenario::begin("pre-one").await?;
    let lab = &s.lab;
    lab.create_nodes([lab.node("n1", "2", "4Gi")]).await?;
    lab.create_pods([
        victim("v", LOW, "1500m", &lab.n("n1")),
        pod("p").priority_class(HIGH).cpu("1"),
    ])
    .await?;
    differential(&s, "p", "n1", &["v"], &[]).await
}

/// Only as many victims as needed go, the least important first: of four pods (two of equal
/// priority, where the one started later is the less important), `mid` and `old` are spared.
#[tokio::test]
async fn fewest_victims_on_the_node_least_important_first() -> Result<()> {
    let s = Scenario::begin("pre-reprieve").await?;
    let lab = &s.lab;
    let n1 = lab.n("n1");
    lab.create_nodes([lab.node("n1", "4", "8Gi")]).await?;
    lab.create_pods([
        victim("old", LOW, "1", &n1),
        victim("young", LOW, "1", &n1),
        victim("lowest", LOWEST, "1", &n1),
        victim("mid", MID, "1", &n1),
        pod("p").priority_class(HIGH).cpu("2"),
    ])
    .await?;
    s.started("old", Duration::from_secs(3600)).await?;
    s.started("young", Duration::from_secs(60)).await?;
    s.started("lowest", Duration::from_secs(600)).await?;
    s.started("mid", Duration::from_secs(600)).await?;
    differential(&s, "p", "n1", &["lowest", "young"], &[]).await
}

/// Criterion 1: equal candidates, except that the victim on n1 is protected by a PDB that allows
/// no disruption.
#[tokio::test]
async fn node_with_fewest_pdb_violations() -> Result<()> {
    let s = Scenario::begin("pre-pdb").await?;
    let lab = &s.lab;
    lab.create_nodes([lab.node("n1", "2", "4Gi"), lab.node("n2", "2", "4Gi")])
        .await?;
    lab.create_pods([
        victim("v1", LOW, "1500m", &lab.n("n1")),
        victim("v2", LOW, "1500m", &lab.n("n2")),
        pod("p").priority_class(HIGH).cpu("1"),
    ])
    .await?;
    // n1's victim started later: without the PDB, the last criterion would pick n1.
    s.started("v1", Duration::from_secs(60)).await?;
    s.started("v2", Duration::from_secs(3600)).await?;
    s.pdb("protect-v1", "v1", json!({"disruptionsAllowed": 0}))
        .await?;
    differential(&s, "p", "n2", &["v2"], &[]).await
}

/// PDB accounting reads `status.disruptionsAllowed`: n1's budget allows one disruption, n2's none.
/// Were the status ignored (both violating), the last criterion would pick n2.
#[tokio::test]
async fn pdb_status_allows_a_disruption() -> Result<()> {
    let s = Scenario::begin("pre-allowed").await?;
    let lab = &s.lab;
    lab.create_nodes([lab.node("n1", "2", "4Gi"), lab.node("n2", "2", "4Gi")])
        .await?;
    lab.create_pods([
        victim("v1", LOW, "1500m", &lab.n("n1")),
        victim("v2", LOW, "1500m", &lab.n("n2")),
        pod("p").priority_class(HIGH).cpu("1"),
    ])
    .await?;
    s.started("v1", Duration::from_secs(3600)).await?;
    s.started("v2", Duration::from_secs(60)).await?;
    s.pdb("budget-v1", "v1", json!({"disruptionsAllowed": 1})).await?;
    s.pdb("budget-v2", "v2", json!({"disruptionsAllowed": 0})).await?;
    differential(&s, "p", "n1", &["v1"], &[]).await
}

/// A pod listed in the budget's `status.disruptedPods` is already accounted for: preempting it
/// violates nothing, even with no disruption allowed.
#[tokio::test]
async fn pdb_disrupted_pods_are_not_violations() -> Result<()> {
    let s = Scenario::begin("pre-disrupted").await?;
    let lab = &s.lab;
    lab.create_nodes([lab.node("n1", "2", "4Gi"), lab.node("n2", "2", "4Gi")])
        .await?;
    lab.create_pods([
        // n1's victim has the higher priority: without the PDBs' status n2 would win.
        victim("v1", MID, "1500m", &lab.n("n1")),
        victim("v2", LOW, "1500m", &lab.n("n2")),
        pod("p").priority_class(HIGH).cpu("1"),
    ])
    .await?;
    let now = seconds_ago(Duration::ZERO)?;
    s.pdb(
        "budget-v1",
        "v1",
        json!({"disruptionsAllowed": 0, "disruptedPods": {"v1": now}}),
    )
    .await?;
    s.pdb("budget-v2", "v2", json!({"disruptionsAllowed": 0})).await?;
    differential(&s, "p", "n1", &["v1"], &[]).await
}

/// Within a node, the budget is spent by the more important victims first: of two victims under a
/// budget allowing one disruption, only the second violates it (1 violation on n1, 2 on n2).
#[tokio::test]
async fn pdb_budget_is_shared_by_the_victims_of_a_node() -> Result<()> {
    let s = Scenario::begin("pre-budget").await?;
    let lab = &s.lab;
    let (n1, n2) = (lab.n("n1"), lab.n("n2"));
    lab.create_nodes([lab.node("n1", "2", "4Gi"), lab.node("n2", "2", "4Gi")])
        .await?;
    lab.create_pods([
        victim("a1", MID, "1", &n1).label("app", "a"),
        victim("a2", MID, "1", &n1).label("app", "a"),
        victim("b1", LOW, "1", &n2).label("app", "b"),
        victim("b2", LOW, "1", &n2).label("app", "b"),
        pod("p").priority_class(HIGH).cpu("2"),
    ])
    .await?;
    s.pdb("budget-a", "a", json!({"disruptionsAllowed": 1})).await?;
    s.pdb("budget-b", "b", json!({"disruptionsAllowed": 0})).await?;
    differential(&s, "p", "n1", &["a1", "a2"], &[]).await
}

/// Violating victims are reprieved first: on one node, the PDB-protected pod (the least
/// important) is spared and the other one goes.
#[tokio::test]
async fn pdb_protected_victims_are_reprieved_first() -> Result<()> {
    let s = Scenario::begin("pre-pdbfirst").await?;
    let lab = &s.lab;
    let n1 = lab.n("n1");
    lab.create_nodes([lab.node("n1", "2", "4Gi")]).await?;
    lab.create_pods([
        victim("protected", LOWEST, "1", &n1),
        victim("free", LOW, "1", &n1),
        pod("p").priority_class(HIGH).cpu("1"),
    ])
    .await?;
    s.pdb("protect", "protected", json!({"disruptionsAllowed": 0}))
        .await?;
    differential(&s, "p", "n1", &["free"], &[]).await
}

/// Criterion 2: the node whose most important victim has the lowest priority.
#[tokio::test]
async fn node_whose_highest_priority_victim_is_lowest() -> Result<()> {
    let s = Scenario::begin("pre-highest").await?;
    let lab = &s.lab;
    lab.create_nodes([lab.node("n1", "2", "4Gi"), lab.node("n2", "2", "4Gi")])
        .await?;
    lab.create_pods([
        victim("v1", MID, "1500m", &lab.n("n1")),
        victim("v2", LOW, "1500m", &lab.n("n2")),
        pod("p").priority_class(HIGH).cpu("1"),
    ])
    .await?;
    // n1's victim started later: the last criterion alone would pick n1.
    s.started("v1", Duration::from_secs(60)).await?;
    s.started("v2", Duration::from_secs(3600)).await?;
    differential(&s, "p", "n2", &["v2"], &[]).await
}

/// Criterion 3: same number of victims and same highest priority; n2's victims sum lower.
#[tokio::test]
async fn node_with_the_lowest_sum_of_priorities() -> Result<()> {
    let s = Scenario::begin("pre-sum").await?;
    let lab = &s.lab;
    let (n1, n2) = (lab.n("n1"), lab.n("n2"));
    lab.create_nodes([lab.node("n1", "2", "4Gi"), lab.node("n2", "2", "4Gi")])
        .await?;
    lab.create_pods([
        victim("a1", LOW, "1", &n1),
        victim("a2", LOW, "1", &n1),
        victim("b1", LOW, "1", &n2),
        victim("b2", LOWEST, "1", &n2),
        pod("p").priority_class(HIGH).cpu("2"),
    ])
    .await?;
    for (name, ago) in [("a1", 60), ("a2", 60), ("b1", 3600), ("b2", 3600)] {
        s.started(name, Duration::from_secs(ago)).await?;
    }
    differential(&s, "p", "n2", &["b1", "b2"], &[]).await
}

/// Criterion 4: victims of the lowest possible priority add nothing to the sum (kube-scheduler
/// offsets priorities by MaxInt32 + 1), so n2's two victims tie n1's one on criteria 1-3; the
/// node with fewer victims wins.
#[tokio::test]
async fn node_with_the_fewest_victims() -> Result<()> {
    let s = Scenario::begin("pre-count").await?;
    let lab = &s.lab;
    let (n1, n2) = (lab.n("n1"), lab.n("n2"));
    lab.create_nodes([lab.node("n1", "2", "4Gi"), lab.node("n2", "2", "4Gi")])
        .await?;
    lab.create_pods([
        victim("a", LOW, "1500m", &n1),
        victim("b", LOW, "1200m", &n2),
        victim("c", MIN, "800m", &n2),
        pod("p").priority_class(HIGH).cpu("1900m"),
    ])
    .await?;
    // n2's highest-priority victim started later: the last criterion alone would pick n2.
    s.started("a", Duration::from_secs(3600)).await?;
    s.started("b", Duration::from_secs(60)).await?;
    s.started("c", Duration::from_secs(60)).await?;
    differential(&s, "p", "n1", &["a"], &[]).await
}

/// Criterion 5: everything else equal, the node whose highest-priority victims started last.
#[tokio::test]
async fn node_with_the_latest_start_time() -> Result<()> {
    let s = Scenario::begin("pre-start").await?;
    let lab = &s.lab;
    lab.create_nodes(["n1", "n2", "n3"].map(|n| lab.node(n, "2", "4Gi")))
        .await?;
    lab.create_pods([
        victim("v1", LOW, "1500m", &lab.n("n1")),
        victim("v2", LOW, "1500m", &lab.n("n2")),
        victim("v3", LOW, "1500m", &lab.n("n3")),
        pod("p").priority_class(HIGH).cpu("1"),
    ])
    .await?;
    s.started("v1", Duration::from_secs(7200)).await?;
    s.started("v2", Duration::from_secs(120)).await?;
    s.started("v3", Duration::from_secs(3600)).await?;
    differential(&s, "p", "n2", &["v2"], &[]).await
}

/// Victims of equal priority that have not started are equally important: kube-scheduler spares
/// them in the order it meets them, which is not stable. On n1 (4 cpu, full) it takes `b` and `c`
/// (1 cpu each) or `a` (2 cpu), depending on that order; the prediction must report both sets, say
/// the victims are random, and kube-scheduler must take one of them and write one of the messages.
#[tokio::test]
async fn equally_important_victims_are_reported_as_random() -> Result<()> {
    let s = Scenario::begin("pre-random").await?;
    let lab = &s.lab;
    let n1 = lab.n("n1");
    lab.create_nodes([lab.node("n1", "4", "8Gi")]).await?;
    lab.create_pods([
        victim("a", LOW, "2", &n1),
        victim("b", LOW, "1", &n1),
        victim("c", LOW, "1", &n1),
        pod("p").priority_class(HIGH).cpu("2"),
    ])
    .await?;
    let key = |name: &str| format!("{}/{name}", lab.ns);
    let api = s.pods();
    let before = pods_before(&api).await?;
    let prediction = Prediction::new(predict(lab, "p").await?)?;
    let json = &prediction.json;
    let mut possible: Vec<BTreeSet<String>> = vec![prediction.victims.clone()];
    for set in json["alternative_victims"]
        .as_array()
        .context("no alternative_victims[]")?
    {
        let victims = set["victims"]
            .as_array()
            .context("no victims[] in an alternative")?;
        possible.push(
            victims
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
        );
    }
    possible.sort();
    let want: Vec<BTreeSet<String>> = vec![
        [key("a")].into_iter().collect(),
        [key("b"), key("c")].into_iter().collect(),
    ];
    ensure!(
        possible == want,
        "predicted victim sets {possible:?}, want {want:?}\n{json}"
    );
    let random = json["random_outcome"].as_array().context("no random_outcome[]")?;
    ensure!(
        random
            .iter()
            .any(|r| r.as_str().is_some_and(|r| r.starts_with("victims:"))),
        "the victims are not reported as random: {json}"
    );
    let mut messages: Vec<String> = vec![prediction.message.clone()];
    messages.extend(
        json["message_alternatives"]
            .as_array()
            .context("no message_alternatives[]")?
            .iter()
            .filter_map(|m| m.as_str().map(str::to_owned)),
    );
    // From v1.37 the message names the victim count, so it is as random as the victims; earlier
    // releases write no preemption words for a successful preemption: one message.
    let messages_wanted = if lab.changes().preemption_reports_placement {
        2
    } else {
        1
    };
    ensure!(
        messages.len() == messages_wanted,
        "want {messages_wanted} possible messages on this release (the victim count is random): {messages:?}"
    );

    s.start_scheduler().await?;
    let mut outcome = observe(lab, "p", &before, &BTreeSet::new()).await?;
    let deadline = Instant::now() + VICTIMS_TIMEOUT;
    while !possible.contains(&outcome.removed) && Instant::now() < deadline {
        outcome = observe(lab, "p", &before, &BTreeSet::new()).await?;
    }
    eprintln!(
        "[preemption] {}: kube-scheduler nominated {:?}, removed {:?}; predicted one of {possible:?}\n  message: {:?}",
        lab.ns, outcome.nominated, outcome.removed, outcome.failed_scheduling
    );
    ensure!(
        outcome.nominated == n1 && possible.contains(&outcome.removed),
        "MISMATCH in {}: kube-scheduler nominated {:?} and removed {:?}; predicted {n1:?} with one of {possible:?}",
        lab.ns,
        outcome.nominated,
        outcome.removed
    );
    if let Some(note) = &outcome.failed_scheduling {
        ensure!(
            messages.iter().any(|m| note.ends_with(m.as_str())),
            "MISMATCH in {}: FailedScheduling {note:?} ends with none of {messages:?}",
            lab.ns
        );
    }
    Ok(())
}

/// A pending pod of higher priority nominated to n1 keeps its room there: on n1 the preemptor
/// needs two victims, on n2 one. (The nominated pod fits nowhere and may not preempt, so
/// kube-scheduler leaves its nomination alone.) Without it, the start times would pick n1.
#[tokio::test]
async fn higher_priority_nominated_pod_keeps_its_room() -> Result<()> {
    let s = Scenario::begin("pre-nominated").await?;
    let lab = &s.lab;
    let (n1, n2) = (lab.n("n1"), lab.n("n2"));
    lab.create_nodes([lab.node("n1", "4", "8Gi"), lab.node("n2", "4", "8Gi")])
        .await?;
    lab.create_pods([
        victim("a1", LOW, "2", &n1),
        victim("a2", LOW, "2", &n1),
        victim("b1", LOW, "2", &n2),
        victim("b2", LOW, "2", &n2),
        pod("holder").priority_class(TOP_NEVER).cpu("2"),
        pod("p").priority_class(HIGH).cpu("2"),
    ])
    .await?;
    for (name, ago) in [("a1", 60), ("a2", 120), ("b1", 3600), ("b2", 7200)] {
        s.started(name, Duration::from_secs(ago)).await?;
    }
    s.nominate("holder", &n1).await?;
    differential(&s, "p", "n2", &["b1"], &[]).await
}

/// A lower-priority pod nominated to the chosen node does not count against the preemptor, and
/// kube-scheduler clears its nomination (it may no longer fit there).
#[tokio::test]
async fn lower_priority_nominated_pod_is_cleared() -> Result<()> {
    let s = Scenario::begin("pre-clear").await?;
    let lab = &s.lab;
    let n1 = lab.n("n1");
    lab.create_nodes([lab.node("n1", "2", "4Gi")]).await?;
    lab.create_pods([
        victim("v", LOW, "1500m", &n1),
        // Fits nowhere and may not preempt: kube-scheduler itself never changes its nomination.
        pod("waiting").priority_class(LOWEST_NEVER).cpu("3"),
        pod("p").priority_class(HIGH).cpu("1"),
    ])
    .await?;
    s.nominate("waiting", &n1).await?;
    differential(&s, "p", "n1", &["v"], &["waiting"]).await
}

/// Nodes where preemption cannot help are left out: n1 is too small even when emptied, n2 holds
/// only pods of equal priority, n3 is cordoned; only n4 is a candidate, where the least important
/// pod is small enough to be spared.
#[tokio::test]
async fn only_helpful_nodes_are_candidates() -> Result<()> {
    let s = Scenario::begin("pre-helpful").await?;
    let lab = &s.lab;
    let (n1, n2, n3, n4) = (lab.n("n1"), lab.n("n2"), lab.n("n3"), lab.n("n4"));
    lab.create_nodes([
        lab.node("n1", "1", "4Gi"),
        lab.node("n2", "2", "4Gi"),
        lab.node("n3", "2", "4Gi").cordoned(),
        lab.node("n4", "2", "4Gi"),
    ])
    .await?;
    lab.create_pods([
        victim("small", LOWEST, "500m", &n1),
        victim("peer", HIGH, "1500m", &n2),
        victim("cordoned", LOWEST, "1500m", &n3),
        victim("w1", LOW, "700m", &n4),
        victim("w2", LOW, "700m", &n4),
        victim("w3", LOWEST, "400m", &n4),
        pod("p").priority_class(HIGH).cpu("1500m"),
    ])
    .await?;
    for (name, ago) in [("w1", 60), ("w2", 120), ("w3", 180)] {
        s.started(name, Duration::from_secs(ago)).await?;
    }
    differential(&s, "p", "n4", &["w1", "w2"], &[]).await
}

/// Victims found through the PreFilter extensions: the preemptor's required anti-affinity
/// rejects n1 because of a small pod there, which preemption removes (InterPodAffinity's RemovePod);
/// n2 would need its big pod removed, of higher priority.
#[tokio::test]
async fn anti_affinity_conflict_is_preempted() -> Result<()> {
    let s = Scenario::begin("pre-anti").await?;
    let lab = &s.lab;
    lab.create_nodes([lab.node("n1", "2", "4Gi"), lab.node("n2", "2", "4Gi")])
        .await?;
    lab.create_pods([
        victim("x", LOWEST, "100m", &lab.n("n1")).label("app", "x"),
        victim("big", LOW, "1500m", &lab.n("n2")),
        pod("p").priority_class(HIGH).cpu("1").spec(
            "affinity",
            json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"app": "x"}},
                "topologyKey": "kubernetes.io/hostname",
            }]}}),
        ),
    ])
    .await?;
    differential(&s, "p", "n1", &["x"], &[]).await
}

/// Topology spread (DoNotSchedule) across zones: zone a holds two pods of the app, zone b none
/// but its only node is full. Removing the low-priority filler in zone b (PodTopologySpread's
/// RemovePod keeps the counts right) is the only way.
#[tokio::test]
async fn topology_spread_preempts_in_the_empty_zone() -> Result<()> {
    let s = Scenario::begin("pre-spread").await?;
    let lab = &s.lab;
    let zone = "topology.kubernetes.io/zone";
    let (a1, b1) = (lab.n("a1"), lab.n("b1"));
    lab.create_nodes([
        lab.node("a1", "4", "4Gi").label(zone, "a"),
        lab.node("b1", "2", "4Gi").label(zone, "b"),
    ])
    .await?;
    lab.create_pods([
        pod("web1")
            .label("app", "web")
            .priority_class(HIGH)
            .cpu("100m")
            .on(&a1),
        pod("web2")
            .label("app", "web")
            .priority_class(HIGH)
            .cpu("100m")
            .on(&a1),
        victim("filler", LOW, "1500m", &b1),
        pod("p").label("app", "web").priority_class(HIGH).cpu("1").spec(
            "topologySpreadConstraints",
            json!([{
                "maxSkew": 1,
                "topologyKey": zone,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
            }]),
        ),
    ])
    .await?;
    differential(&s, "p", "b1", &["filler"], &[]).await
}

// ---------------------------------------------------------------------------------------------
// Execution

/// Every pod of the namespace: name → resourceVersion.
async fn resource_versions(api: &Api<Pod>) -> Result<BTreeMap<String, String>> {
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|p| {
            (
                p.metadata.name.unwrap_or_default(),
                p.metadata.resource_version.unwrap_or_default(),
            )
        })
        .collect())
}

async fn preempt(lab: &Lab, binary: &Path, pod: &str, extra: &[&str]) -> Result<Output> {
    let kubeconfig = lab.cp.kubeconfig_path().display().to_string();
    let mut args = vec!["preempt", pod, "-n", &lab.ns, "--kubeconfig", &kubeconfig];
    args.extend_from_slice(extra);
    run_kubectl_sched(binary, &args).await
}

fn show(output: &Output) -> String {
    format!(
        "exit {}\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// `preempt --yes` does what kube-scheduler's preemption does; kube-scheduler, started afterwards,
/// binds the preemptor to the node it was nominated to.
#[tokio::test]
async fn preempt_yes_then_kube_scheduler_binds_there() -> Result<()> {
    let binary = binary().await?;
    let s = Scenario::begin("pre-exec").await?;
    let lab = &s.lab;
    let (n1, n2) = (lab.n("n1"), lab.n("n2"));
    lab.create_nodes([lab.node("n1", "2", "4Gi"), lab.node("n2", "2", "4Gi")])
        .await?;
    lab.create_pods([
        // Deleted at once (no grace): kube-scheduler can bind the preemptor when it starts.
        victim("v1", LOW, "1", &n1).spec("terminationGracePeriodSeconds", json!(0)),
        victim("v2", LOWEST, "1", &n1).spec("terminationGracePeriodSeconds", json!(0)),
        victim("keep", HIGH, "1500m", &n2),
        pod("p").priority_class(HIGH).cpu("1500m"),
    ])
    .await?;
    let api = s.pods();
    let before = pods_before(&api).await?;
    let output = preempt(lab, binary, "p", &["--yes", "-o", "json"]).await?;
    ensure!(output.status.success(), "preempt --yes: {}", show(&output));
    let report: Value = serde_json::from_slice(&output.stdout)
        .with_context(|| format!("preempt --yes -o json: {}", show(&output)))?;
    ensure!(
        report["node"] == json!(n1),
        "preempt chose {} (expected {n1}): {report}",
        report["node"]
    );
    let results = report["results"]
        .as_array()
        .with_context(|| format!("no results[] after execution: {report}"))?;
    ensure!(
        results.len() == report["actions"].as_array().map_or(0, Vec::len)
            && results.iter().all(|r| r["outcome"] == "done"),
        "not every action of the plan is done: {}",
        report["results"]
    );

    let p = api.get("p").await?;
    let status = p.status.unwrap_or_default();
    ensure!(
        status.nominated_node_name.as_deref() == Some(n1.as_str()),
        "the preemptor's nominatedNodeName: {:?}",
        status.nominated_node_name
    );
    ensure!(
        status
            .conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "False"),
        "the preemptor has no PodScheduled=False condition"
    );
    for name in ["v1", "v2"] {
        if let Some(v) = api.get_opt(name).await? {
            ensure!(
                v.metadata.deletion_timestamp.is_some(),
                "victim {name} is neither gone nor terminating"
            );
        }
    }
    let keep = api.get("keep").await?;
    ensure!(
        keep.metadata.deletion_timestamp.is_none(),
        "keep was not a victim"
    );

    let events: Api<Event> = Api::namespaced(lab.client.clone(), &lab.ns);
    let all = events.list(&ListParams::default()).await?.items;
    for name in ["v1", "v2"] {
        let uid = &before[&format!("{}/{name}", lab.ns)].0;
        ensure!(
            all.iter().any(|e| e.reason.as_deref() == Some("Preempted")
                && e.regarding.as_ref().and_then(|r| r.uid.as_ref()) == Some(uid)),
            "no Preempted event on {name}: {all:?}"
        );
    }
    ensure!(
        all.iter().any(|e| e.reason.as_deref() == Some("FailedScheduling")
            && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("p")),
        "no FailedScheduling event on the preemptor: {all:?}"
    );
    // As kube-scheduler's: reported as the pod's profile; the instance names who wrote them.
    for e in all
        .iter()
        .filter(|e| matches!(e.reason.as_deref(), Some("Preempted" | "FailedScheduling")))
    {
        ensure!(
            e.reporting_controller.as_deref() == Some("default-scheduler")
                && e.reporting_instance.as_deref() == Some("kubectl-sched"),
            "event {:?} is not reported as default-scheduler by kubectl-sched: {e:?}",
            e.reason
        );
    }

    s.start_scheduler().await?;
    let bound = e2e::fixtures::wait_for("kube-scheduler to bind p", NOMINATION_TIMEOUT, || async {
        Ok(api
            .get("p")
            .await?
            .spec
            .and_then(|s| s.node_name)
            .filter(|n| !n.is_empty()))
    })
    .await
    .with_context(|| lab.cp.log_tail("kube-scheduler", 30))?;
    ensure!(bound == n1, "kube-scheduler bound p to {bound}, not {n1}");
    Ok(())
}

/// `--mode=evict` honours PodDisruptionBudgets: the first victim is evicted, the second is
/// protected (429), and the command stops there with a clear message and a report; the preemptor
/// is not nominated.
#[tokio::test]
async fn evict_mode_stops_at_a_blocking_pdb() -> Result<()> {
    let binary = binary().await?;
    let s = Scenario::begin("pre-evict").await?;
    let lab = &s.lab;
    let n1 = lab.n("n1");
    lab.create_nodes([lab.node("n1", "2", "4Gi")]).await?;
    lab.create_pods([
        victim("first", MID, "1", &n1).spec("terminationGracePeriodSeconds", json!(0)),
        victim("guarded", LOW, "1", &n1),
        pod("p").priority_class(HIGH).cpu("2"),
    ])
    .await?;
    // Running and Ready: the Eviction API skips the budget for pods that are not.
    for name in ["first", "guarded"] {
        s.patch_pod_status(
            name,
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}),
        )
        .await?;
    }
    s.pdb(
        "guard",
        "guarded",
        json!({"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}),
    )
    .await?;

    let output = preempt(lab, binary, "p", &["--yes", "--mode=evict", "-o", "json"]).await?;
    let text = show(&output);
    ensure!(
        !output.status.success(),
        "preempt --mode=evict succeeded past a blocking PDB: {text}"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    ensure!(
        stderr.contains("guarded") && (stderr.contains("disruption budget") || stderr.contains("429")),
        "the error does not name the blocked pod and its budget: {text}"
    );
    // Running again would be refused again: the error names the budget and what to do instead.
    let budget = format!("PodDisruptionBudget {}/guard (disruptionsAllowed 0)", lab.ns);
    ensure!(
        stderr.contains(&budget)
            && stderr.contains("--mode=delete")
            && !stderr.contains("run the command again to finish"),
        "the error does not name {budget:?} and advise --mode=delete or waiting: {text}"
    );
    eprintln!("[preemption] preempt --mode=evict against a blocking PDB: {text}");
    // The report shows what was done: the first eviction done, the second blocked, the rest
    // (the preemptor's nomination last) not run.
    let report: Value = serde_json::from_slice(&output.stdout)
        .with_context(|| format!("no JSON report after the failed run: {text}"))?;
    let results = report["results"]
        .as_array()
        .with_context(|| format!("no results[] in the report: {report}"))?;
    let outcome_of = |kind: &str, name: &str| {
        results
            .iter()
            .find(|r| r["action"]["kind"] == kind && r["action"]["pod"]["name"] == name)
            .and_then(|r| r["outcome"].as_str())
    };
    ensure!(
        outcome_of("EvictPod", "first") == Some("done")
            && outcome_of("EvictPod", "guarded") == Some("pdb-blocked")
            && outcome_of("SetNominatedNodeName", "p") == Some("not-run"),
        "results[] do not show evict first done, evict guarded blocked, nomination not run: {}",
        report["results"]
    );
    ensure!(
        report["complete"] == json!(false),
        "the report does not say the run is incomplete: {report}"
    );
    let api = s.pods();
    ensure!(
        api.get_opt("first")
            .await?
            .is_none_or(|p| p.metadata.deletion_timestamp.is_some()),
        "first was not evicted"
    );
    let guarded = api.get("guarded").await?;
    ensure!(
        guarded.metadata.deletion_timestamp.is_none(),
        "the PDB-protected pod was deleted"
    );
    let p = api.get("p").await?;
    ensure!(
        p.status
            .and_then(|s| s.nominated_node_name)
            .unwrap_or_default()
            .is_empty(),
        "the preemptor was nominated although its victims are not all gone"
    );
    Ok(())
}

/// The Eviction API does not apply budgets to Pending pods (kube-apiserver's canIgnorePDB): a Pending
/// victim whose budget allows no disruption is still a violation for kube-scheduler's choice, but the
/// prediction says its eviction is not blocked, and `--mode=evict` evicts it.
#[tokio::test]
async fn evict_mode_evicts_a_pending_victim_whatever_its_pdb() -> Result<()> {
    let binary = binary().await?;
    let s = Scenario::begin("pre-evict-pending").await?;
    let lab = &s.lab;
    let n1 = lab.n("n1");
    lab.create_nodes([lab.node("n1", "2", "4Gi")]).await?;
    // No kubelet: the bound victim stays in phase Pending.
    lab.create_pods([
        victim("guarded", LOW, "2", &n1),
        pod("p").priority_class(HIGH).cpu("2"),
    ])
    .await?;
    s.pdb(
        "guard",
        "guarded",
        json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 1, "expectedPods": 1}),
    )
    .await?;

    let output = preempt(
        lab,
        binary,
        "p",
        &["--dry-run=client", "--mode=evict", "-o", "json"],
    )
    .await?;
    let text = show(&output);
    ensure!(output.status.success(), "preempt --dry-run=client: {text}");
    let report: Value = serde_json::from_slice(&output.stdout).with_context(|| text.clone())?;
    let v = &report["victims"][0];
    ensure!(
        v["name"] == "guarded"
            && v["pdb_violation"] == json!(true)
            && v["eviction_blocked"] == json!(false)
            && report["evictions_blocked"] == json!(0)
            && v["pdbs"][0]["name"] == "guard",
        "the prediction does not say the Pending victim violates its budget but is evicted anyway: {report}"
    );

    let output = preempt(lab, binary, "p", &["--yes", "--mode=evict", "-o", "json"]).await?;
    let text = show(&output);
    ensure!(
        output.status.success(),
        "preempt --mode=evict did not evict the Pending victim: {text}"
    );
    let api = s.pods();
    ensure!(
        api.get_opt("guarded")
            .await?
            .is_none_or(|p| p.metadata.deletion_timestamp.is_some()),
        "the Pending victim was not evicted: {text}"
    );
    let p = api.get("p").await?;
    ensure!(
        p.status.and_then(|s| s.nominated_node_name).as_deref() == Some(n1.as_str()),
        "the preemptor was not nominated to {n1}: {text}"
    );
    Ok(())
}

/// `--dry-run=server` sends every write with dryRun=All: nothing changes.
#[tokio::test]
async fn server_dry_run_changes_nothing() -> Result<()> {
    let binary = binary().await?;
    let s = Scenario::begin("pre-serverdry").await?;
    let lab = &s.lab;
    let (n1, n2) = (lab.n("n1"), lab.n("n2"));
    lab.create_nodes([lab.node("n1", "2", "4Gi"), lab.node("n2", "2", "4Gi")])
        .await?;
    lab.create_pods([
        victim("v1", LOW, "1500m", &n1),
        victim("v2", MID, "1500m", &n2),
        pod("waiting").priority_class(LOWEST_NEVER).cpu("3"),
        pod("p").priority_class(HIGH).cpu("1"),
    ])
    .await?;
    s.nominate("waiting", &n1).await?;
    let api = s.pods();
    let events: Api<Event> = Api::namespaced(lab.client.clone(), &lab.ns);
    let versions = resource_versions(&api).await?;
    let events_before = events.list(&ListParams::default()).await?.items.len();

    let output = preempt(lab, binary, "p", &["--dry-run=server", "--yes", "-o", "json"]).await?;
    ensure!(
        output.status.success(),
        "preempt --dry-run=server: {}",
        show(&output)
    );
    let report: Value = serde_json::from_slice(&output.stdout)
        .with_context(|| format!("preempt --dry-run=server -o json: {}", show(&output)))?;
    ensure!(report["node"] == json!(n1), "the plan is not on {n1}: {report}");
    ensure!(
        report["actions"].as_array().is_some_and(|a| a.len() >= 4),
        "the plan has too few actions to prove anything: {report}"
    );
    ensure!(
        report["results"]
            .as_array()
            .is_some_and(|r| !r.is_empty() && r.iter().all(|r| r["outcome"] == "dry-run")),
        "not every action was validated with dryRun=All: {}",
        report["results"]
    );
    let after = resource_versions(&api).await?;
    ensure!(
        versions == after,
        "--dry-run=server changed pods:\n  before {versions:?}\n  after  {after:?}"
    );
    let events_after = events.list(&ListParams::default()).await?.items.len();
    ensure!(
        events_before == events_after,
        "--dry-run=server recorded {} events",
        events_after - events_before
    );

    // The table shows the plan once: its steps with their dry-run outcomes, not also as a plan before
    // the run and as progress lines during it.
    let output = preempt(lab, binary, "p", &["--dry-run=server"]).await?;
    let text = show(&output);
    ensure!(output.status.success(), "preempt --dry-run=server: {text}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    ensure!(
        stdout.matches("Plan (--mode=delete").count() == 1 && stdout.contains("sent with --dry-run=server"),
        "the plan header is not shown exactly once: {text}"
    );
    let deletion = format!("delete pod {}/v1", lab.ns);
    let shown = format!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
    ensure!(
        shown.matches(&deletion).count() == 1,
        "the step {deletion:?} is not shown exactly once: {text}"
    );
    ensure!(
        versions == resource_versions(&api).await?,
        "--dry-run=server (table) changed pods"
    );
    Ok(())
}

/// On a terminal, `preempt` asks before executing; any answer but yes cancels, exits 0 (as `kubectl
/// delete --interactive` does) and changes nothing. The terminal is util-linux's `script` (a pty).
#[tokio::test]
async fn declining_the_confirmation_on_a_terminal_changes_nothing() -> Result<()> {
    let binary = binary().await?;
    let s = Scenario::begin("pre-decline").await?;
    let lab = &s.lab;
    let n1 = lab.n("n1");
    lab.create_nodes([lab.node("n1", "2", "4Gi")]).await?;
    lab.create_pods([
        victim("v1", LOW, "1500m", &n1),
        pod("p").priority_class(HIGH).cpu("1"),
    ])
    .await?;
    let api = s.pods();
    let versions = resource_versions(&api).await?;
    let command = format!(
        "{} preempt p -n {} --kubeconfig {}",
        binary.display(),
        lab.ns,
        lab.cp.kubeconfig_path().display()
    );
    let mut child = tokio::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env_remove("KUBECONFIG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("running util-linux's script (a pseudo-terminal for the confirmation)")?;
    {
        use tokio::io::AsyncWriteExt;
        let mut stdin = child.stdin.take().context("script's stdin")?;
        stdin.write_all(b"n\n").await?;
    }
    let output = tokio::time::timeout(COMMAND_TIMEOUT, child.wait_with_output())
        .await
        .context("preempt on a terminal did not finish")??;
    let text = String::from_utf8_lossy(&output.stdout);
    ensure!(output.status.success(), "declining: {}", show(&output));
    ensure!(text.contains("[y/N]"), "no confirmation asked: {}", show(&output));
    ensure!(
        text.contains("preemption is cancelled: nothing was changed"),
        "declining: {}",
        show(&output)
    );
    let after = resource_versions(&api).await?;
    ensure!(
        versions == after,
        "declining changed pods:\n  before {versions:?}\n  after  {after:?}"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// A confirmed plan is not executed stale

/// `preempt` on a terminal (util-linux's `script` gives it a pseudo-terminal): the test reads what it
/// prints and answers when it chooses, so the cluster can change while the plan is on the screen.
struct Terminal {
    child: tokio::process::Child,
    stdin: Option<tokio::process::ChildStdin>,
    stdout: tokio::process::ChildStdout,
    /// Everything printed so far (stdout and stderr share the terminal).
    seen: String,
}

impl Terminal {
    async fn preempt(lab: &Lab, binary: &Path, pod: &str, extra: &str, env: &[(&str, &str)]) -> Result<Self> {
        let command = format!(
            "{} preempt {pod} -n {} --kubeconfig {} {extra}",
            binary.display(),
            lab.ns,
            lab.cp.kubeconfig_path().display()
        );
        let mut child = tokio::process::Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .env_remove("KUBECONFIG")
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("running util-linux's script (a pseudo-terminal for the confirmation)")?;
        Ok(Terminal {
            stdin: child.stdin.take(),
            stdout: child.stdout.take().context("script's stdout")?,
            child,
            seen: String::new(),
        })
    }

    /// Reads until `text` has been printed.
    async fn wait_for(&mut self, text: &str) -> Result<()> {
        use tokio::io::AsyncReadExt;
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        let mut buf = [0u8; 4096];
        while !self.seen.contains(text) {
            let left = deadline.saturating_duration_since(Instant::now());
            let n = tokio::time::timeout(left, self.stdout.read(&mut buf))
                .await
                .with_context(|| {
                    format!(
                        "preempt did not print {text:?} in time; it printed: {}",
                        self.seen
                    )
                })??;
            if n == 0 {
                bail!(
                    "preempt ended without printing {text:?}; it printed: {}",
                    self.seen
                );
            }
            self.seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        Ok(())
    }

    async fn type_line(&mut self, line: &str) -> Result<()> {
        use tokio::io::AsyncWriteExt;
        let stdin = self.stdin.as_mut().context("stdin already closed")?;
        stdin.write_all(format!("{line}\n").as_bytes()).await?;
        stdin.flush().await?;
        Ok(())
    }

    /// Waits for the end: the exit code and everything printed.
    async fn finish(mut self) -> Result<(Option<i32>, String)> {
        use tokio::io::AsyncReadExt;
        let mut rest = Vec::new();
        tokio::time::timeout(COMMAND_TIMEOUT, self.stdout.read_to_end(&mut rest))
            .await
            .with_context(|| format!("preempt did not finish; it printed: {}", self.seen))??;
        self.seen.push_str(&String::from_utf8_lossy(&rest));
        drop(self.stdin.take());
        let status = tokio::time::timeout(COMMAND_TIMEOUT, self.child.wait())
            .await
            .context("script did not exit")??;
        Ok((status.code(), self.seen))
    }
}

/// The scenario the stale-plan tests share: victim `v1` on n1, a lower-priority pod `waiting`
/// nominated to n1 (the plan's first step clears its nomination: the first write the old code made),
/// the pending preemptor `p`, and on n2 a pod preemption may not touch.
async fn stale_plan_scenario(id: &str) -> Result<Scenario> {
    let s = Scenario::begin(id).await?;
    let lab = &s.lab;
    let (n1, n2) = (lab.n("n1"), lab.n("n2"));
    lab.create_nodes([lab.node("n1", "2", "4Gi"), lab.node("n2", "2", "4Gi")])
        .await?;
    lab.create_pods([
        victim("v1", LOW, "1500m", &n1),
        victim("keep", HIGH, "1500m", &n2),
        pod("waiting").priority_class(LOWEST_NEVER).cpu("3"),
        pod("p").priority_class(HIGH).cpu("1"),
    ])
    .await?;
    s.nominate("waiting", &n1).await?;
    Ok(s)
}

/// Events of the namespace.
async fn event_count(lab: &Lab) -> Result<usize> {
    let events: Api<Event> = Api::namespaced(lab.client.clone(), &lab.ns);
    Ok(events.list(&ListParams::default()).await?.items.len())
}

/// The cluster changed while the plan was on the screen: the answer `y` writes nothing, the new plan
/// is printed with what changed, and the command fails (exit 1).
async fn expect_nothing_written(
    s: &Scenario,
    terminal: Terminal,
    changed: &str,
    what: &str,
) -> Result<String> {
    let api = s.pods();
    let versions = resource_versions(&api).await?;
    let events = event_count(&s.lab).await?;
    let mut terminal = terminal;
    terminal.type_line("y").await?;
    let (code, text) = terminal.finish().await?;
    eprintln!("[preemption] {what}: exit {code:?}\n{text}");
    ensure!(code == Some(1), "{what}: exit {code:?}, not 1:\n{text}");
    ensure!(
        text.contains("the cluster changed since the plan was shown") && text.contains(changed),
        "{what}: no message saying {changed:?}:\n{text}"
    );
    ensure!(
        text.contains("nothing was changed, run again"),
        "{what}: the message does not say nothing was changed:\n{text}"
    );
    let after = resource_versions(&api).await?;
    ensure!(
        versions == after,
        "{what}: pods were written after the answer:\n  before {versions:?}\n  after  {after:?}"
    );
    ensure!(
        event_count(&s.lab).await? == events,
        "{what}: events were recorded after the answer"
    );
    Ok(text)
}

/// A victim deleted and created again under its name (a new UID) while the plan is shown is not the
/// pod the user agreed to remove: nothing is written, not even the first step (clearing a
/// nomination), and the new pod is left alone.
#[tokio::test]
async fn a_victim_recreated_while_the_plan_is_shown_is_not_touched() -> Result<()> {
    let binary = binary().await?;
    let s = stale_plan_scenario("pre-recreated").await?;
    let lab = &s.lab;
    let api = s.pods();
    let old_uid = api.get("v1").await?.metadata.uid.unwrap_or_default();
    let mut terminal = Terminal::preempt(lab, binary, "p", "", &[]).await?;
    terminal.wait_for("[y/N]").await?;
    ensure!(
        terminal.seen.contains("delete pod") && terminal.seen.contains("/v1"),
        "the plan shown does not delete v1: {}",
        terminal.seen
    );
    api.delete("v1", &DeleteParams::default().grace_period(0)).await?;
    e2e::fixtures::wait_for("v1 to be gone", COMMAND_TIMEOUT, || async {
        Ok(api.get_opt("v1").await?.is_none().then_some(()))
    })
    .await?;
    lab.create_pods([victim("v1", LOW, "1500m", &lab.n("n1"))])
        .await?;
    let new_uid = api.get("v1").await?.metadata.uid.unwrap_or_default();
    ensure!(new_uid != old_uid, "v1 was not recreated with a new UID");

    expect_nothing_written(
        &s,
        terminal,
        &format!(
            "victim {}/v1 was replaced by another pod of the same name (uid {old_uid}, now {new_uid})",
            lab.ns
        ),
        "victim recreated",
    )
    .await?;
    let v1 = api.get("v1").await?;
    ensure!(
        v1.metadata.deletion_timestamp.is_none(),
        "the recreated v1 is being deleted"
    );
    Ok(())
}

/// The preemptor bound (here by a direct pods/binding) while the plan is shown: there is nothing to
/// preempt for any more, and nothing is written.
#[tokio::test]
async fn a_preemptor_bound_while_the_plan_is_shown_stops_the_preemption() -> Result<()> {
    let binary = binary().await?;
    let s = stale_plan_scenario("pre-bound").await?;
    let lab = &s.lab;
    let api = s.pods();
    let n2 = lab.n("n2");
    let mut terminal = Terminal::preempt(lab, binary, "p", "", &[]).await?;
    terminal.wait_for("[y/N]").await?;
    let binding = json!({
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p", "namespace": lab.ns},
        "target": {"apiVersion": "v1", "kind": "Node", "name": n2},
    });
    let _: Value = api
        .create_subresource("binding", "p", &PostParams::default(), &binding)
        .await
        .context("binding p to n2")?;

    expect_nothing_written(
        &s,
        terminal,
        &format!("pod {}/p is now bound to node {n2}", lab.ns),
        "preemptor bound",
    )
    .await?;
    let v1 = api.get("v1").await?;
    ensure!(v1.metadata.deletion_timestamp.is_none(), "v1 is being deleted");
    Ok(())
}

/// A victim that merely changed while the plan is shown (a label) is still the pod the user agreed
/// to remove: the plan is made again on the cluster as it is now and executed, every write
/// conditioned on the versions just read.
#[tokio::test]
async fn a_victim_changed_while_the_plan_is_shown_is_still_preempted() -> Result<()> {
    let binary = binary().await?;
    let s = stale_plan_scenario("pre-relabelled").await?;
    let lab = &s.lab;
    let api = s.pods();
    let mut terminal = Terminal::preempt(lab, binary, "p", "", &[]).await?;
    terminal.wait_for("[y/N]").await?;
    api.patch(
        "v1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
    )
    .await?;
    terminal.type_line("y").await?;
    let (code, text) = terminal.finish().await?;
    ensure!(code == Some(0), "exit {code:?}:\n{text}");
    let v1 = api.get_opt("v1").await?;
    ensure!(
        v1.is_none_or(|v| v.metadata.deletion_timestamp.is_some()),
        "v1 was not deleted:\n{text}"
    );
    let p = api.get("p").await?;
    ensure!(
        p.status.and_then(|s| s.nominated_node_name).as_deref() == Some(lab.n("n1").as_str()),
        "p is not nominated to n1:\n{text}"
    );
    Ok(())
}

/// A victim that changes after the cluster was read again, before the write reaches it (the
/// window the preconditions guard; a debug-build hook holds the command there): the write is refused
/// with 409, the run stops there and says what was done and what was not; the victim is untouched
/// and the preemptor not nominated. Delete mode (the first write to the victim is its
/// DisruptionTarget condition) and evict mode (the Eviction's deleteOptions preconditions).
#[tokio::test]
async fn a_victim_changed_before_its_write_stops_the_run() -> Result<()> {
    let binary = binary().await?;
    for (mode, step) in [
        ("delete", "set condition DisruptionTarget"),
        ("evict", "evict pod"),
    ] {
        let s = stale_plan_scenario(&format!("pre-rv-{mode}")).await?;
        let lab = &s.lab;
        let api = s.pods();
        let mut terminal = Terminal::preempt(
            lab,
            binary,
            "p",
            &format!("--mode={mode}"),
            &[("KUBECTL_SCHED_TEST_PAUSE_BEFORE_WRITES", "1")],
        )
        .await?;
        terminal.wait_for("[y/N]").await?;
        terminal.type_line("y").await?;
        terminal
            .wait_for("[test hook] paused before the first write")
            .await
            .context("the binary has no pause hook (built without debug assertions?)")?;
        let planned = api.get("v1").await?.metadata.resource_version.unwrap_or_default();
        let touched = api
            .patch(
                "v1",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
            )
            .await?
            .metadata
            .resource_version
            .unwrap_or_default();
        terminal.type_line("").await?;
        let (code, text) = terminal.finish().await?;
        eprintln!("[preemption] --mode={mode}, victim changed before its write: exit {code:?}\n{text}");
        ensure!(code == Some(1), "--mode={mode}: exit {code:?}:\n{text}");
        let changed = format!(
            "conflict: pod {}/v1 changed since the plan was made (resourceVersion {planned}, now {touched})",
            lab.ns
        );
        ensure!(
            text.contains(&changed) && text.contains(step),
            "--mode={mode}: the failure does not say {step} met {changed:?}:\n{text}"
        );
        ensure!(
            text.contains("preemption stopped at step 2 of") && text.contains("1 step(s) done"),
            "--mode={mode}: the report does not say the run stopped at step 2 after 1 step:\n{text}"
        );
        let v1 = api.get("v1").await?;
        ensure!(
            v1.metadata.deletion_timestamp.is_none(),
            "--mode={mode}: v1 is being deleted"
        );
        ensure!(
            !v1.status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "DisruptionTarget"),
            "--mode={mode}: v1 got a DisruptionTarget condition"
        );
        let p = api.get("p").await?;
        ensure!(
            p.status
                .and_then(|s| s.nominated_node_name)
                .unwrap_or_default()
                .is_empty(),
            "--mode={mode}: p was nominated"
        );
    }
    Ok(())
}

/// sched-core's writer against the real API server: each kind of pod write refuses a pod whose
/// resourceVersion is not the planned one (409: a conflict naming both versions, the pod unchanged),
/// succeeds on the planned one, and leaves a pod recreated under the planned name alone.
#[tokio::test]
async fn pod_writes_are_conditioned_on_the_planned_version() -> Result<()> {
    use sched_core::action::{Action, ObjectRef, PodConditionPatch};
    use sched_core::apply::{ApplyOptions, Outcome as Applied, execute_one};

    let s = Scenario::begin("pre-apply").await?;
    let lab = &s.lab;
    let n1 = lab.n("n1");
    lab.create_nodes([lab.node("n1", "4", "4Gi")]).await?;
    lab.create_pods([
        victim("a", LOW, "100m", &n1),
        pod("pending").priority_class(LOW).cpu("100m"),
    ])
    .await?;
    let api = s.pods();
    let options = ApplyOptions::new("e2e");
    let reference = |pod: &Pod| ObjectRef::from_meta(&pod.metadata);
    let touch = |name: &'static str| {
        let api = api.clone();
        async move {
            api.patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
            )
            .await
            .map(|p| p.metadata.resource_version.unwrap_or_default())
        }
    };
    let condition = PodConditionPatch {
        type_: "DisruptionTarget".into(),
        status: "True".into(),
        reason: "PreemptionByScheduler".into(),
        message: "e2e".into(),
    };

    let planned_a = reference(&api.get("a").await?);
    let planned_pending = reference(&api.get("pending").await?);
    let now_a = touch("a").await?;
    let now_pending = touch("pending").await?;
    let stale = [
        Action::SetPodCondition {
            pod: planned_a.clone(),
            condition: condition.clone(),
        },
        Action::SetNominatedNodeName {
            pod: planned_pending.clone(),
            node: n1.clone(),
        },
        Action::BindPod {
            pod: planned_pending.clone(),
            node: n1.clone(),
        },
        Action::EvictPod {
            pod: planned_a.clone(),
        },
        Action::DeletePod {
            pod: planned_a.clone(),
        },
    ];
    for action in &stale {
        let (outcome, _) = execute_one(&lab.client, action, &options).await;
        let (name, planned, now) = match action {
            Action::SetPodCondition { .. } | Action::EvictPod { .. } | Action::DeletePod { .. } => {
                ("a", &planned_a, &now_a)
            }
            _ => ("pending", &planned_pending, &now_pending),
        };
        let want = format!(
            "changed since the plan was made (resourceVersion {}, now {now})",
            planned.resource_version.as_deref().unwrap_or_default()
        );
        match &outcome {
            Applied::Failed(e) if e.is_conflict() && e.to_string().contains(&want) => {}
            other => bail!("{}: {other:?}, not a conflict saying {want:?}", action.describe()),
        }
        let current = api.get(name).await?;
        ensure!(
            current.metadata.resource_version.as_deref() == Some(now.as_str()),
            "{}: the pod was written despite the failed precondition",
            action.describe()
        );
    }

    // On the version just read, the same writes go through (condition, then the delete conditioned
    // on the version the condition left: one plan, chained by `execute`).
    let fresh_a = reference(&api.get("a").await?);
    let results = sched_core::apply::execute(
        &lab.client,
        &[
            Action::SetPodCondition {
                pod: fresh_a.clone(),
                condition: condition.clone(),
            },
            Action::DeletePod { pod: fresh_a },
        ],
        &options,
    )
    .await;
    ensure!(
        results.iter().all(|r| matches!(r.outcome, Applied::Done)),
        "writes on the current version: {results:?}"
    );

    // A pod recreated under the planned name (a new UID) is not the planned pod: gone, untouched.
    let planned_pending = reference(&api.get("pending").await?);
    api.delete("pending", &DeleteParams::default().grace_period(0))
        .await?;
    e2e::fixtures::wait_for("pending to be gone", COMMAND_TIMEOUT, || async {
        Ok(api.get_opt("pending").await?.is_none().then_some(()))
    })
    .await?;
    lab.create_pods([pod("pending").priority_class(LOW).cpu("100m")])
        .await?;
    let recreated = api.get("pending").await?;
    for action in [
        Action::DeletePod {
            pod: planned_pending.clone(),
        },
        Action::SetNominatedNodeName {
            pod: planned_pending.clone(),
            node: n1.clone(),
        },
    ] {
        let (outcome, _) = execute_one(&lab.client, &action, &options).await;
        ensure!(
            matches!(outcome, Applied::Gone),
            "{} on a recreated pod: {outcome:?}",
            action.describe()
        );
    }
    let after = api.get("pending").await?;
    ensure!(
        after.metadata.resource_version == recreated.metadata.resource_version
            && after.metadata.deletion_timestamp.is_none(),
        "the recreated pod was written"
    );
    Ok(())
}

/// The harness's control over kube-scheduler, which every scenario above relies on.
#[tokio::test]
async fn kube_scheduler_starts_and_stops_on_demand() -> Result<()> {
    let s = Scenario::begin("pre-harness").await?;
    let cp = s.lab.cp;
    s.start_scheduler().await?;
    match cp.start_scheduler(None).await {
        Err(e2e::Error::AlreadyRunning(name)) if name == "kube-scheduler" => {}
        other => bail!("a second start_scheduler: {other:?}"),
    }
    cp.check_running()?;
    ensure!(cp.stop_scheduler(), "kube-scheduler was not running");
    ensure!(!cp.stop_scheduler(), "kube-scheduler still running after stop");
    s.start_scheduler().await?;
    Ok(())
}

/// Guards against a silently empty run: the scenarios above must have found the binary's JSON
/// fields they compare.
#[test]
fn prediction_reads_the_documented_fields() -> Result<()> {
    let json = json!({
        "pod": "ns/p", "eligible": true, "message": "preemption: found a potential placement for pod on node n1, preempting 1 victims",
        "node": "n1",
        "victims": [{"namespace": "ns", "name": "v", "priority": 100, "pdb_violation": false}],
        "candidates": [{"node": "n1", "victims": [], "pdb_violations": 0}],
        "actions": [
            {"kind": "SetNominatedNodeName", "pod": {"namespace": "ns", "name": "w"}, "node": ""},
            {"kind": "SetNominatedNodeName", "pod": {"namespace": "ns", "name": "p"}, "node": "n1"},
            {"kind": "DeletePod", "pod": {"namespace": "ns", "name": "v"}},
        ],
    });
    let prediction = Prediction::new(json)?;
    ensure!(prediction.node.as_deref() == Some("n1"));
    ensure!(prediction.victims == BTreeSet::from(["ns/v".to_owned()]));
    ensure!(prediction.cleared == BTreeSet::from(["ns/w".to_owned()]));
    ensure!(prediction.failed_scheduling_message.is_none());
    if Prediction::new(json!({"node": null})).is_ok() {
        bail!("a document without victims[] must be rejected");
    }
    Ok(())
}
