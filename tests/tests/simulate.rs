//! `kubectl sched simulate` against the real kube-scheduler v1.37.2, batch by batch.
//!
//! Each scenario builds its cluster with kube-scheduler stopped: fake nodes (no kubelet), bound
//! pods (`spec.nodeName` set at creation) and a batch of pending pods. It runs
//! `kubectl-sched simulate --kubeconfig PATH -o json` on that live cluster, then starts the real
//! kube-scheduler and waits until it has settled: its scheduling queue holds no pod in activeQ
//! or backoffQ (read from its `scheduler_pending_pods` metric), every batch pod is bound or
//! carries a `PodScheduled=False` condition, and nothing (bindings, conditions, nominations,
//! pods present) has changed for a while. It then verifies that:
//! - every batch pod is on the node the simulation put it on, or pending in both;
//! - the `PodScheduled` message of every pod left pending equals the simulated `message` byte for
//!   byte (the condition carries the message of kube-scheduler's last attempt);
//! - the nomination of every pod left pending equals the simulated `nominated_node`;
//! - the pods kube-scheduler preempted (deleted; victims have `terminationGracePeriodSeconds: 0`,
//!   so they vanish at once although no kubelet confirms the deletion), each with the node it was
//!   on and the preemptor its `Preempted` event names, equal the simulated `victims`;
//! - the exit code is 0 when every pod was placed, 3 otherwise.
//!
//! kube-scheduler breaks score ties at random, and does not schedule pods of equal priority in
//! name or creation order (it orders them by the time its informer added them to its queue,
//! which differs from run to run), while `simulate` orders them by creation time, then
//! namespace/name. The scenarios are built so that neither matters: the pods of a batch whose
//! order changes the outcome have distinct priorities (`sim-rank-N` classes), pods of equal
//! priority are alike, and node sizes and loads differ. A replay with sched-core checks the
//! score-tie part after the fact (scenarios without preemption): each placed pod, evaluated on
//! the cluster as it was when kube-scheduler scheduled it, must have a single top-scoring node,
//! or the scenario is nondeterministic (and `simulate`'s `summary.ties` is shown with every
//! result).
//!
//! The drain scenario needs kube-controller-manager (deployment and replicaset controllers):
//! `simulate --drain NODE` run before the drain must predict as many replacements per node as
//! kube-scheduler then places after a real `kubectl drain` (replacement names differ); the
//! replacements, once created, are also compared pod by pod with a plain `simulate`.
//!
//! The rollout scenarios check `simulate -f FILE` (workloads expanded into the pods their
//! controllers would create) the same way: run before the workloads exist, it must predict as many
//! pods per workload and node as kube-scheduler places once the real controllers (deployment,
//! replicaset, job and statefulset, in kube-controller-manager) have created them, and the messages of the
//! pods left pending; so must a plain `simulate` of the created pods (by workload: the replicas
//! are alike and of equal priority, kube-scheduler takes them in an order of its own).
//!
//! The scenarios share one control plane of their own (kube-scheduler is stopped and started)
//! and run one at a time, each in its own namespace with its own nodes, and leave no node and no
//! pod behind (`simulate` looks at every pending pod of the cluster).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use common::{
    HIGH, HIGH_NEVER, LOW, Lab, NodeBuilder, PodBuilder, clean_slate, evaluate, kubectl_sched_binary, pod,
    run_kubectl_sched,
};
use e2e::{ControlPlane, Options};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use sched_core::snapshot::ClusterObjects;
use sched_core::snapshot::kube::{ApiLoadOptions, load_from_api};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

static CONTROL_PLANE: OnceCell<ControlPlane> = OnceCell::const_new();
static BINARY: OnceCell<PathBuf> = OnceCell::const_new();

/// Priority classes of these scenarios, besides `common`'s LOW (100) and HIGH (1000).
const LOWEST: (&str, i32) = ("sim-lowest", 50);
const MID: (&str, i32) = ("sim-mid", 500);
/// `sim-rank-1` (1) to `sim-rank-RANKS`: distinct priorities for the pods of a batch, all below
/// LOWEST, so that they never preempt the bound pods of a scenario.
const RANKS: i32 = 40;

/// Bounds the wait for kube-scheduler to settle after it starts.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long nothing may change, queue empty, before kube-scheduler is deemed settled. A pod in
/// backoffQ shows in the metric, so this only has to cover the moments between an API write
/// and the event it causes (a preemption's deletions, a binding).
const QUIET: Duration = Duration::from_millis(1500);
/// Bounds the setup waits (replacement pods, clean-up).
const SETUP_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(200);

/// etcd, kube-apiserver and kube-controller-manager with the deployment, replicaset, job and
/// statefulset controllers (the drain and rollout scenarios); kube-scheduler is started by each scenario once
/// its state is built.
async fn control_plane() -> Result<&'static ControlPlane, e2e::Error> {
    CONTROL_PLANE
        .get_or_try_init(|| {
            ControlPlane::start(Options::new().with_controller_manager(&[
                // The volume scenario: kube-scheduler's PreBind waits for it to bind the claims.
                "persistentvolume-binder",
                "deployment-controller",
                "replicaset-controller",
                "job-controller",
                "statefulset-controller",
            ]))
        })
        .await
}

/// The plugin binary, built (see [`kubectl_sched_binary`]) once per test process.
async fn binary() -> Result<&'static Path> {
    Ok(BINARY.get_or_try_init(kubectl_sched_binary).await?.as_path())
}

// ---------------------------------------------------------------------------------------------
// The scenario

/// A scenario's turn on the control plane, kube-scheduler stopped until the batch is simulated,
/// and stopped again when the scenario ends, however it ends.
struct Scenario {
    lab: Lab,
    id: String,
    started: Instant,
}

impl Drop for Scenario {
    fn drop(&mut self) {
        self.lab.cp.stop_scheduler();
    }
}

/// What one side says about one batch pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Placement {
    node: Option<String>,
    /// The FailedScheduling message of the last attempt, for a pod left pending.
    message: Option<String>,
    nominated: Option<String>,
}

/// A deleted victim: its node and its preemptor, both `ns/name` keyed.
type Victims = BTreeMap<String, (String, String)>;

/// `kubectl-sched simulate -o json`'s document, parsed.
#[derive(Debug)]
struct Simulation {
    pods: BTreeMap<String, Placement>,
    victims: Victims,
    json: Value,
}

/// What kube-scheduler did, once settled.
#[derive(Debug)]
struct Outcome {
    pods: BTreeMap<String, Placement>,
    victims: Victims,
    settled_in: Duration,
}

impl Outcome {
    fn placed(&self) -> usize {
        self.pods.values().filter(|p| p.node.is_some()).count()
    }

    fn pending(&self) -> Vec<&str> {
        self.pods
            .iter()
            .filter(|(_, p)| p.node.is_none())
            .map(|(k, _)| k.as_str())
            .collect()
    }

    /// The node of batch pod `name` (of the scenario's namespace).
    fn node_of(&self, ns: &str, name: &str) -> Option<&str> {
        self.pods
            .get(&format!("{ns}/{name}"))
            .and_then(|p| p.node.as_deref())
    }

    fn message_of(&self, ns: &str, name: &str) -> &str {
        self.pods
            .get(&format!("{ns}/{name}"))
            .and_then(|p| p.message.as_deref())
            .unwrap_or_default()
    }

    /// Placed pods per node.
    fn per_node(&self) -> BTreeMap<String, usize> {
        per_node(self.pods.values())
    }
}

fn per_node<'a>(placements: impl Iterator<Item = &'a Placement>) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for node in placements.filter_map(|p| p.node.clone()) {
        *counts.entry(node).or_insert(0) += 1;
    }
    counts
}

fn key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

fn node_name(pod: &Pod) -> Option<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty())
}

/// Bound or not, the `PodScheduled=False` message and the nomination of a live pod.
fn placement(pod: &Pod) -> Placement {
    let status = pod.status.as_ref();
    let condition = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False");
    let node = node_name(pod);
    Placement {
        message: if node.is_none() {
            condition.and_then(|c| c.message.clone())
        } else {
            None
        },
        nominated: status
            .and_then(|s| s.nominated_node_name.clone())
            .filter(|n| !n.is_empty()),
        node,
    }
}

impl Scenario {
    async fn begin(id: &str) -> Result<Self> {
        // Built before taking the turn, so that no scenario holds the cluster meanwhile.
        binary().await?;
        let lab = Lab::begin_on(id, control_plane).await?;
        // A scenario that failed before stopping it leaves it to the next one.
        lab.cp.stop_scheduler();
        // A failed drain scenario may have left its Deployment, whose controllers would recreate
        // pods (pending ones, which every later simulation would pick up): remove the owners,
        // then the pods again.
        delete_workloads(&lab.client).await?;
        clean_slate(&lab.client).await?;
        ensure_priority_classes(&lab.client).await?;
        Ok(Scenario {
            lab,
            id: id.to_owned(),
            started: Instant::now(),
        })
    }

    fn ns(&self) -> &str {
        &self.lab.ns
    }

    fn n(&self, short: &str) -> String {
        self.lab.n(short)
    }

    /// A node `short` with this cpu, memory in proportion (2Gi per cpu), 110 pods.
    fn node(&self, short: &str, cpu: u32) -> NodeBuilder {
        self.lab.node(short, &cpu.to_string(), &format!("{}Gi", cpu * 2))
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.lab.client.clone(), self.ns())
    }

    fn all_pods(&self) -> Api<Pod> {
        Api::all(self.lab.client.clone())
    }

    fn events(&self) -> Api<Event> {
        Api::all(self.lab.client.clone())
    }

    /// Creates the nodes, then the bound pods, then the batch, in this order. The batch's names
    /// must sort in creation order: `simulate` orders pods of equal priority by creation time
    /// (1 s resolution), then by name, which then agree.
    async fn build(
        &self,
        nodes: Vec<NodeBuilder>,
        bound: Vec<PodBuilder>,
        batch: Vec<PodBuilder>,
    ) -> Result<()> {
        let names: Vec<&str> = batch.iter().map(PodBuilder::name).collect();
        ensure!(
            names.windows(2).all(|w| w[0] < w[1]),
            "{}: batch pods must be named in creation order: {names:?}",
            self.id
        );
        self.lab.create_nodes(nodes).await?;
        self.lab.create_pods(bound).await?;
        self.lab.create_pods(batch).await?;
        Ok(())
    }

    /// Runs `kubectl-sched simulate --kubeconfig PATH -o json [extra...]` on the live cluster.
    async fn simulate(&self, extra: &[&str]) -> Result<Simulation> {
        let binary = binary().await?;
        let kubeconfig = self.lab.cp.kubeconfig_path().display().to_string();
        let mut args = vec!["simulate", "--kubeconfig", &kubeconfig, "-o", "json"];
        args.extend_from_slice(extra);
        let output = run_kubectl_sched(binary, &args).await?;
        let shown = format!("kubectl-sched {}", args.join(" "));
        let code = output.status.code();
        ensure!(
            matches!(code, Some(0 | 3)),
            "{}: {shown} exited with {}:\n{}",
            self.id,
            output.status,
            show(&output)
        );
        let json: Value = serde_json::from_slice(&output.stdout)
            .with_context(|| format!("{}: {shown} printed no JSON:\n{}", self.id, show(&output)))?;
        let simulation = parse_simulation(json).with_context(|| format!("{}: {shown}", self.id))?;
        let all_placed = simulation.pods.values().all(|p| p.node.is_some());
        ensure!(
            code == Some(if all_placed { 0 } else { 3 }),
            "{}: {shown} exited with {code:?} although {} (0 when every pod is placed, 3 otherwise)",
            self.id,
            if all_placed {
                "every pod was placed"
            } else {
                "some pods stay pending"
            }
        );
        Ok(simulation)
    }

    /// The pending pods of the cluster (what a plain `simulate` takes as its batch).
    async fn pending_pods(&self) -> Result<BTreeSet<String>> {
        Ok(self
            .all_pods()
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|p| node_name(p).is_none())
            .map(key)
            .collect())
    }

    /// The bound pods of the cluster: `ns/name` → node.
    async fn bound_pods(&self) -> Result<BTreeMap<String, String>> {
        Ok(self
            .all_pods()
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter_map(|p| Some((key(p), node_name(p)?)))
            .collect())
    }

    /// Starts kube-scheduler and waits until it has settled (see the module doc); what it did
    /// with `batch`, and which pods it preempted (of `bound`, or of the batch once placed).
    async fn run_kube_scheduler(
        &self,
        batch: &BTreeSet<String>,
        bound: &BTreeMap<String, String>,
    ) -> Result<Outcome> {
        let started = Instant::now();
        self.lab
            .cp
            .start_scheduler(None)
            .await
            .context("starting kube-scheduler")?;
        let metrics = self.metrics_client().await?;
        let deadline = started + SETTLE_TIMEOUT;
        let mut last: Option<(BTreeMap<String, Placement>, BTreeSet<String>)> = None;
        let mut changed = Instant::now();
        // Where each pod was last seen bound: a victim may also be a batch pod placed earlier.
        let mut seen_on = bound.clone();
        loop {
            // Every namespace: a batch may span several (the cluster holds this scenario only).
            let live = self.all_pods().list(&ListParams::default()).await?.items;
            for p in &live {
                if let Some(node) = node_name(p) {
                    seen_on.insert(key(p), node);
                }
            }
            let present: BTreeSet<String> = live.iter().map(key).collect();
            let pods: BTreeMap<String, Placement> = live
                .iter()
                .filter(|p| batch.contains(&key(p)))
                .map(|p| (key(p), placement(p)))
                .collect();
            // Until kube-scheduler has loaded the client CA from the API server, it takes the
            // admin certificate for anonymous and refuses /metrics: count that as busy.
            let (queued, metrics_error) = match queued_pods(&metrics).await {
                Ok(queued) => (queued, None),
                Err(e) => (u64::MAX, Some(e)),
            };
            let state = (pods, present);
            if last.as_ref() != Some(&state) {
                last = Some(state);
                changed = Instant::now();
            }
            let (pods, present) = last.as_ref().context("state")?;
            // A batch pod that is gone was preempted after it was placed: it is a victim.
            let decided = batch.iter().all(|k| {
                pods.get(k)
                    .is_none_or(|p| p.node.is_some() || p.message.is_some())
            });
            if decided && queued == 0 && changed.elapsed() >= QUIET {
                let uids: BTreeMap<String, String> = live
                    .iter()
                    .filter_map(|p| Some((p.metadata.uid.clone()?, key(p))))
                    .collect();
                let victims = self.victims(&seen_on, present, &uids).await?;
                return Ok(Outcome {
                    pods: pods.clone(),
                    victims,
                    settled_in: started.elapsed(),
                });
            }
            if Instant::now() >= deadline {
                bail!(
                    "{}: kube-scheduler did not settle within {SETTLE_TIMEOUT:?} ({queued} pods in \
                     activeQ/backoffQ, metrics error {metrics_error:?}; batch {pods:#?})\n\
                     kube-scheduler log:\n{}",
                    self.id,
                    self.lab.cp.log_tail("kube-scheduler", 30)
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The pods seen bound that are gone, each with its node and the preemptor its `Preempted` event
    /// names: "Preempted by pod UID on node NODE" (kube-scheduler leaves `related` empty);
    /// `uids` maps the UIDs of the namespace's pods to their names.
    async fn victims(
        &self,
        bound: &BTreeMap<String, String>,
        present: &BTreeSet<String>,
        uids: &BTreeMap<String, String>,
    ) -> Result<Victims> {
        let events = self.events();
        let preemptors: BTreeMap<String, String> = events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("Preempted"))
            .filter_map(|e| {
                let victim = e.regarding?;
                let victim = format!("{}/{}", victim.namespace?, victim.name?);
                let preemptor = match e
                    .related
                    .and_then(|r| Some(format!("{}/{}", r.namespace?, r.name?)))
                {
                    Some(related) => related,
                    None => {
                        let note = e.note.unwrap_or_default();
                        let uid = note.strip_prefix("Preempted by pod ")?.split(' ').next()?;
                        uids.get(uid).cloned().unwrap_or_else(|| format!("<pod {uid}>"))
                    }
                };
                Some((victim, preemptor))
            })
            .collect();
        Ok(bound
            .iter()
            .filter(|(k, _)| !present.contains(*k))
            .map(|(k, node)| {
                let preemptor = preemptors
                    .get(k)
                    .cloned()
                    .unwrap_or_else(|| "<no Preempted event>".into());
                (k.clone(), (node.clone(), preemptor))
            })
            .collect())
    }

    /// kube-scheduler's attempts, in the order it made them (its Scheduled and FailedScheduling
    /// events; a repeated FailedScheduling only bumps its series, so a pod shows once per
    /// outcome), for the report of a mismatch.
    async fn attempts(&self) -> Result<Vec<String>> {
        let events = self.events();
        let mut attempts: Vec<(Option<_>, String)> = events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| matches!(e.reason.as_deref(), Some("Scheduled" | "FailedScheduling")))
            .map(|e| {
                let pod = e.regarding.and_then(|r| r.name).unwrap_or_default();
                let what = if e.reason.as_deref() == Some("Scheduled") {
                    "bound"
                } else {
                    "failed"
                };
                (e.event_time.map(|t| t.0), format!("{pod} {what}"))
            })
            .collect();
        attempts.sort();
        Ok(attempts.into_iter().map(|(_, a)| a).collect())
    }

    /// A client for kube-scheduler's `/metrics` (its port is in its log: every start picks a new
    /// one; the admin certificate is authorized through the API server).
    async fn metrics_client(&self) -> Result<Client> {
        let port = wait_until(
            &format!("{}: kube-scheduler's serving port in its log", self.id),
            || async { Ok(serving_port(&self.lab.cp.log_tail("kube-scheduler", 400))) },
        )
        .await?;
        let mut config = self.lab.cp.config().clone();
        config.cluster_url = format!("https://127.0.0.1:{port}").parse()?;
        config.accept_invalid_certs = true;
        config.root_cert = None;
        Ok(Client::try_from(config)?)
    }

    /// The differential rule (module doc), then a one-line summary.
    async fn compare(&self, simulation: &Simulation, outcome: &Outcome) -> Result<()> {
        let mut mismatches = Vec::new();
        let batch: BTreeSet<&String> = outcome.pods.keys().collect();
        let simulated: BTreeSet<&String> = simulation.pods.keys().collect();
        if batch != simulated {
            mismatches.push(format!(
                "batch: the cluster's pending pods were {batch:?}, the simulation's {simulated:?}"
            ));
        }
        for (pod, real) in &outcome.pods {
            let Some(sim) = simulation.pods.get(pod) else {
                continue;
            };
            if real.node != sim.node {
                mismatches.push(format!(
                    "{pod}: kube-scheduler {}, simulated {} (simulated message {:?}; kube-scheduler's {:?})",
                    shown_node(&real.node),
                    shown_node(&sim.node),
                    sim.message,
                    real.message
                ));
                continue;
            }
            if real.node.is_none() {
                if real.message != sim.message {
                    mismatches.push(format!(
                        "{pod} pending: message\n      kube-scheduler: {:?}\n      simulated:      {:?}",
                        real.message, sim.message
                    ));
                }
                if real.nominated != sim.nominated {
                    mismatches.push(format!(
                        "{pod} pending: nominated node: kube-scheduler {:?}, simulated {:?}",
                        real.nominated, sim.nominated
                    ));
                }
            } else if sim.message.is_some() {
                mismatches.push(format!(
                    "{pod}: placed, yet the simulation gives a message {:?}",
                    sim.message
                ));
            }
        }
        if outcome.victims != simulation.victims {
            mismatches.push(format!(
                "victims (pod → (node, preemptor)):\n      kube-scheduler: {:?}\n      simulated:      {:?}",
                outcome.victims, simulation.victims
            ));
        }
        // Placements simulate decided among tied nodes: kube-scheduler picks one at random there,
        // so a mismatch on such a pod is the scenario's flaw.
        let ties = simulation.json["summary"]["ties"].as_u64().unwrap_or(0);
        let summary = format!(
            "[simulate] {}: {} pods, {} placed, {} pending, {} victims, {ties} ties; kube-scheduler \
             settled in {:.1} s, scenario {:.1} s",
            self.id,
            outcome.pods.len(),
            outcome.placed(),
            outcome.pods.len() - outcome.placed(),
            outcome.victims.len(),
            outcome.settled_in.as_secs_f64(),
            self.started.elapsed().as_secs_f64()
        );
        if mismatches.is_empty() {
            eprintln!("{summary}: AGREE");
            return Ok(());
        }
        eprintln!("{summary}: {} MISMATCHES", mismatches.len());
        let attempts = self.attempts().await.unwrap_or_default();
        bail!(
            "{}: simulate disagrees with kube-scheduler:\n  - {}\nkube-scheduler's events in order: {}\n\
             simulate's pods: {:#}\nvictims: {:#}\nsummary: {:#}",
            self.id,
            mismatches.join("\n  - "),
            attempts.join(", "),
            simulation.json["pods"],
            simulation.json["victims"],
            simulation.json["summary"]
        )
    }

    /// The whole procedure for a batch: build, simulate, run kube-scheduler, check the scenario's
    /// own tie-freedom, compare. Returns kube-scheduler's outcome for the scenario's own checks.
    async fn run(
        &self,
        nodes: Vec<NodeBuilder>,
        bound: Vec<PodBuilder>,
        batch: Vec<PodBuilder>,
    ) -> Result<Outcome> {
        self.build(nodes, bound, batch).await?;
        self.run_built().await
    }

    /// [`Self::run`] once the cluster is built.
    async fn run_built(&self) -> Result<Outcome> {
        let pending = self.pending_pods().await?;
        let bound = self.bound_pods().await?;
        let (objects, warnings) = load_from_api(&self.lab.client, &ApiLoadOptions::default()).await?;
        ensure!(warnings.is_empty(), "load_from_api warned: {warnings:?}");
        let simulation = self.simulate(&[]).await?;
        let outcome = self.run_kube_scheduler(&pending, &bound).await?;
        self.check_no_ties(&objects, &outcome)?;
        self.compare(&simulation, &outcome).await?;
        Ok(outcome)
    }

    /// Replays kube-scheduler's placements with sched-core: each placed pod, evaluated on the
    /// initial cluster with the pods before it in queue order where kube-scheduler put them, must
    /// have one top-scoring node. Several mean kube-scheduler picked at random: a flaw of the
    /// scenario, not of `simulate`. Scenarios with preemptions are not replayed (the queue order
    /// says nothing of when the victims went, nor of the retries); they are built so that each
    /// pod has one node it can go to.
    fn check_no_ties(&self, objects: &ClusterObjects, outcome: &Outcome) -> Result<()> {
        if !outcome.victims.is_empty() {
            return Ok(());
        }
        let mut batch: Vec<&Pod> = objects
            .pods
            .iter()
            .filter(|p| outcome.pods.contains_key(&key(p)))
            .collect();
        batch.sort_by_key(|p| {
            (
                std::cmp::Reverse(p.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)),
                p.metadata.creation_timestamp.as_ref().map(|t| t.0),
                key(p),
            )
        });
        for (i, pod) in batch.iter().enumerate() {
            let name = key(pod);
            let Some(node) = outcome.pods[&name].node.as_deref() else {
                continue;
            };
            let before: BTreeSet<String> = batch[..i].iter().map(|p| key(p)).collect();
            let mut state = objects.clone();
            for p in &mut state.pods {
                let k = key(p);
                if before.contains(&k)
                    && let Some(placed) = outcome.pods.get(&k).and_then(|p| p.node.clone())
                {
                    p.spec.get_or_insert_with(Default::default).node_name = Some(placed);
                }
            }
            let explanation = evaluate(self.lab.engine.snapshot(state), pod)?;
            ensure!(
                explanation.selected.len() <= 1,
                "{}: scenario flaw: {name} ties between {:?} (kube-scheduler picked {node} at random); \
                 change node sizes or loads",
                self.id,
                explanation.selected
            );
            if !explanation.selected.iter().any(|s| s == node) {
                eprintln!(
                    "[simulate] {}: note: replaying {name}, sched-core selects {:?}, kube-scheduler chose {node}",
                    self.id, explanation.selected
                );
            }
        }
        Ok(())
    }

    /// Deletes what the scenario created, so that the next one starts from an empty cluster.
    async fn finish(self) -> Result<()> {
        self.lab.cp.stop_scheduler();
        delete_workloads(&self.lab.client).await?;
        clean_slate(&self.lab.client).await?;
        Ok(())
    }
}

fn shown_node(node: &Option<String>) -> String {
    match node {
        Some(node) => format!("bound it to {node}"),
        None => "left it pending".to_owned(),
    }
}

/// `Serving securely on 127.0.0.1:PORT` of the latest start in kube-scheduler's log.
fn serving_port(log: &str) -> Option<u16> {
    let line = log.lines().rev().find(|l| l.contains("Serving securely on"))?;
    let rest = &line[line.find("Serving securely on")?..];
    let digits: String = rest
        .rsplit(':')
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Pods in kube-scheduler's activeQ and backoffQ: while there are any, it has work left.
async fn queued_pods(metrics: &Client) -> Result<u64> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = metrics
        .request_text(request)
        .await
        .context("GET kube-scheduler /metrics")?;
    let mut queued = 0;
    let mut seen = false;
    for line in text.lines().filter(|l| l.starts_with("scheduler_pending_pods{")) {
        seen = true;
        if line.contains("queue=\"active\"") || line.contains("queue=\"backoff\"") {
            let value = line.rsplit(' ').next().unwrap_or_default();
            queued += value
                .parse::<f64>()
                .with_context(|| format!("metric line {line:?}"))? as u64;
        }
    }
    ensure!(seen, "kube-scheduler's /metrics has no scheduler_pending_pods");
    Ok(queued)
}

/// Polls `probe` until it yields `Some`, for at most [`SETUP_TIMEOUT`].
async fn wait_until<T, F, Fut>(what: &str, probe: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>>>,
{
    e2e::fixtures::eventually(what, SETUP_TIMEOUT, probe).await
}

fn parse_simulation(json: Value) -> Result<Simulation> {
    let text = |v: &Value, field: &str| -> Result<Option<String>> {
        match &v[field] {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(s.clone())),
            other => bail!("{field} is neither a string nor null: {other}"),
        }
    };
    let mut pods = BTreeMap::new();
    for entry in json["pods"].as_array().context("no pods[]")? {
        let name = text(entry, "pod")?.with_context(|| format!("pods[] entry without pod: {entry}"))?;
        let placement = Placement {
            node: text(entry, "node")?,
            message: text(entry, "message")?,
            nominated: text(entry, "nominated_node")?,
        };
        // A batch pod placed, then preempted, is listed among the victims.
        if entry["outcome"]
            .as_str()
            .is_some_and(|o| o.eq_ignore_ascii_case("preempted"))
        {
            continue;
        }
        ensure!(
            placement.node.is_some() || placement.message.is_some(),
            "{name}: a pod left pending needs its message: {entry}"
        );
        ensure!(
            pods.insert(name.clone(), placement).is_none(),
            "{name} listed twice"
        );
    }
    let mut victims = BTreeMap::new();
    for entry in json["victims"].as_array().context("no victims[]")? {
        let name = text(entry, "pod")?.with_context(|| format!("victim without pod: {entry}"))?;
        let node = text(entry, "node")?.with_context(|| format!("victim without node: {entry}"))?;
        let preemptor =
            text(entry, "preemptor")?.with_context(|| format!("victim without preemptor: {entry}"))?;
        ensure!(
            victims.insert(name.clone(), (node, preemptor)).is_none(),
            "victim {name} listed twice"
        );
    }
    let summary = &json["summary"];
    ensure!(summary.is_object(), "no summary object");
    // The counts, where the document has them, agree with the lists.
    let listed = json["pods"].as_array().map_or(0, Vec::len);
    let scheduled = pods.values().filter(|p| p.node.is_some()).count();
    for (field, expected) in [
        ("pods", listed),
        ("scheduled", scheduled),
        ("pending", pods.len() - scheduled),
        ("preempted", victims.len()),
    ] {
        if let Some(count) = summary[field].as_u64() {
            ensure!(
                usize::try_from(count).ok() == Some(expected),
                "summary.{field} is {count}, the lists say {expected}"
            );
        }
    }
    Ok(Simulation { pods, victims, json })
}

fn show(output: &Output) -> String {
    format!(
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Deletes every Deployment, ReplicaSet, StatefulSet and Job (owners first, so nothing recreates what
/// follows), then takes the Job controller's tracking finalizer off the pods left (no garbage
/// collector runs, and `clean_slate` waits until the pods are gone).
async fn delete_workloads(client: &Client) -> Result<()> {
    let jobs: Api<Job> = Api::all(client.clone());
    for j in jobs.list(&ListParams::default()).await?.items {
        let ns = j.metadata.namespace.unwrap_or_default();
        // Background: the default for Jobs orphans the pods through a finalizer that only the
        // garbage collector would remove.
        Api::<Job>::namespaced(client.clone(), &ns)
            .delete_collection(&DeleteParams::background(), &ListParams::default())
            .await?;
    }
    wait_until("every Job to be gone", || async {
        Ok(jobs
            .list(&ListParams::default().limit(1))
            .await?
            .items
            .is_empty()
            .then_some(()))
    })
    .await?;
    let pods: Api<Pod> = Api::all(client.clone());
    for p in pods.list(&ListParams::default()).await?.items {
        if p.metadata.finalizers.as_ref().is_none_or(Vec::is_empty) {
            continue;
        }
        let (ns, name) = (
            p.metadata.namespace.unwrap_or_default(),
            p.metadata.name.unwrap_or_default(),
        );
        match Api::<Pod>::namespaced(client.clone(), &ns)
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": null}})),
            )
            .await
        {
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            other => {
                other.with_context(|| format!("removing the finalizers of pod {ns}/{name}"))?;
            }
        }
    }
    let sets: Api<StatefulSet> = Api::all(client.clone());
    for set in sets.list(&ListParams::default()).await?.items {
        let ns = set.metadata.namespace.unwrap_or_default();
        Api::<StatefulSet>::namespaced(client.clone(), &ns)
            .delete_collection(&DeleteParams::background(), &ListParams::default())
            .await?;
    }
    wait_until("every StatefulSet to be gone", || async {
        Ok(sets
            .list(&ListParams::default().limit(1))
            .await?
            .items
            .is_empty()
            .then_some(()))
    })
    .await?;
    let deployments: Api<Deployment> = Api::all(client.clone());
    for d in deployments.list(&ListParams::default()).await?.items {
        let ns = d.metadata.namespace.unwrap_or_default();
        Api::<Deployment>::namespaced(client.clone(), &ns)
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await?;
    }
    let replica_sets: Api<ReplicaSet> = Api::all(client.clone());
    for r in replica_sets.list(&ListParams::default()).await?.items {
        let ns = r.metadata.namespace.unwrap_or_default();
        Api::<ReplicaSet>::namespaced(client.clone(), &ns)
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await?;
    }
    wait_until("every Deployment and ReplicaSet to be gone", || async {
        let left = deployments
            .list(&ListParams::default().limit(1))
            .await?
            .items
            .len()
            + replica_sets
                .list(&ListParams::default().limit(1))
                .await?
                .items
                .len();
        Ok((left == 0).then_some(()))
    })
    .await
}

async fn ensure_priority_classes(client: &Client) -> Result<()> {
    let api: Api<PriorityClass> = Api::all(client.clone());
    let existing: BTreeSet<String> = api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    let ranks = (1..=RANKS).map(|n| (rank_class(n), n));
    let fixed = [LOWEST, MID]
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value));
    for (name, value) in fixed.chain(ranks) {
        if existing.contains(&name) {
            continue;
        }
        let class: PriorityClass =
            serde_json::from_value(json!({"metadata": {"name": name}, "value": value}))?;
        match api.create(&PostParams::default(), &class).await {
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            other => {
                other.with_context(|| format!("creating PriorityClass {name}"))?;
            }
        }
    }
    Ok(())
}

/// The PriorityClass `sim-rank-N` of value N (1..=[`RANKS`]).
fn rank_class(n: i32) -> String {
    format!("sim-rank-{n}")
}

/// Gives every pod of `batch` its own priority, the first one the highest (N, then N-1... down
/// to 1 for the last one), so that the queue order is the list's: kube-scheduler does not
/// schedule pods of equal priority in name order (it orders them by the time its informer added
/// them, which differs from run to run).
fn ranked(batch: Vec<PodBuilder>) -> Vec<PodBuilder> {
    let n = i32::try_from(batch.len()).unwrap_or(RANKS);
    assert!(n <= RANKS, "at most {RANKS} ranked pods");
    batch
        .into_iter()
        .zip((1..=n).rev())
        .map(|(p, rank)| p.spec("priorityClassName", json!(rank_class(rank))))
        .collect()
}

/// A pending pod requesting `cpu` (millicores).
fn cpu_pod(name: &str, millis: u32) -> PodBuilder {
    pod(name).cpu(&format!("{millis}m"))
}

/// A bound pod on `node` of priority `class` using `millis` of cpu; deleted with grace 0 (its
/// `terminationGracePeriodSeconds`), a preemption victim vanishes at once.
fn bound(name: &str, node: &str, class: Option<(&str, i32)>, millis: u32) -> PodBuilder {
    let pod = cpu_pod(name, millis).label("app", name).on(node);
    match class {
        Some(class) => pod.priority_class(class),
        None => pod,
    }
}

fn required_node_affinity(terms: Value) -> Value {
    json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}})
}

fn pod_affinity(kind: &str, app: &str, topology: &str) -> Value {
    json!({kind: {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"app": app}},
        "topologyKey": topology,
    }]}})
}

const ZONE: &str = "topology.kubernetes.io/zone";
const HOSTNAME: &str = "kubernetes.io/hostname";

// ---------------------------------------------------------------------------------------------
// Scenarios

/// 12 pods of varied cpu onto 4 nodes of different sizes (17 cpu for 19.1 requested): the
/// largest pods that come late in the queue no longer fit anywhere.
#[tokio::test]
async fn s01_resources_fill_up() -> Result<()> {
    let s = Scenario::begin("sim-fill").await?;
    let nodes = vec![s.node("n2", 2), s.node("n3", 3), s.node("n5", 5), s.node("n8", 8)];
    let sizes = [
        2500, 1800, 1500, 1200, 3000, 900, 2200, 700, 1600, 2000, 600, 1100,
    ];
    let batch = sizes
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let p = cpu_pod(&format!("p{:02}", i + 1), *m);
            // Some memory too, so that BalancedAllocation has something to balance.
            if i % 3 == 0 {
                p.memory(&format!("{}Mi", 512 * (i + 1)))
            } else {
                p
            }
        })
        .collect();
    let outcome = s.run(nodes, vec![], ranked(batch)).await?;
    ensure!(
        !outcome.pending().is_empty() && outcome.placed() >= 8,
        "sim-fill: the scenario means some pods to stay pending: {outcome:?}"
    );
    ensure!(outcome.pending().iter().all(|p| {
        outcome.pods[*p]
            .message
            .as_deref()
            .is_some_and(|m| m.contains("Insufficient cpu"))
    }));
    s.finish().await
}

/// NoSchedule taints that only some pods tolerate, a PreferNoSchedule taint that scores, and
/// pods that fit nowhere they are allowed.
#[tokio::test]
async fn s02_taints_and_tolerations() -> Result<()> {
    let s = Scenario::begin("sim-taints").await?;
    let nodes = vec![
        s.node("gpu", 4).taint("dedicated", "gpu", "NoSchedule"),
        s.node("spot", 6).taint("spot", "true", "NoSchedule"),
        s.node("soon", 8).taint("maintenance", "soon", "PreferNoSchedule"),
        s.node("plain", 2),
    ];
    let gpu = json!({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"});
    let batch = vec![
        cpu_pod("p01-gpu", 1000).toleration(gpu.clone()),
        cpu_pod("p02-spot", 2000).toleration(json!({"key": "spot", "operator": "Exists"})),
        cpu_pod("p03-any", 3000).toleration(json!({"operator": "Exists"})),
        cpu_pod("p04-none", 1500),
        cpu_pod("p05-none", 3000),
        cpu_pod("p06-none-big", 6000),
        cpu_pod("p07-gpu-big", 5000).toleration(gpu),
        cpu_pod("p08-spot", 1000).toleration(json!({"key": "spot", "operator": "Equal", "value": "true"})),
    ];
    let outcome = s.run(nodes, vec![], ranked(batch)).await?;
    ensure!(
        outcome
            .message_of(s.ns(), "p06-none-big")
            .contains("untolerated taint"),
        "sim-taints: p06 must be rejected by taints too: {outcome:?}"
    );
    s.finish().await
}

/// nodeSelector, required and preferred node affinity, matchFields.
#[tokio::test]
async fn s03_node_affinity_and_selector() -> Result<()> {
    let s = Scenario::begin("sim-affinity").await?;
    let nodes = vec![
        s.node("a1", 5).label(ZONE, "a").label("disk", "ssd"),
        s.node("b1", 6).label(ZONE, "b").label("disk", "hdd"),
        s.node("c1", 8).label(ZONE, "c").label("disk", "ssd"),
        s.node("b2", 2).label(ZONE, "b").label("disk", "ssd"),
    ];
    let in_zones = |op: &str, zones: &[&str]| {
        required_node_affinity(
            json!([{"matchExpressions": [{"key": ZONE, "operator": op, "values": zones}]}]),
        )
    };
    let batch = vec![
        cpu_pod("p01-ssd", 2000).spec("nodeSelector", json!({"disk": "ssd"})),
        cpu_pod("p02-ab", 1000).spec("affinity", in_zones("In", &["a", "b"])),
        cpu_pod("p03-prefers-a", 1000).spec(
            "affinity",
            json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 80, "preference": {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a"]}]}},
                {"weight": 20, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["hdd"]}]}},
            ]}}),
        ),
        cpu_pod("p04-ssd-not-c", 2000)
            .spec("nodeSelector", json!({"disk": "ssd"}))
            .spec("affinity", in_zones("NotIn", &["c"])),
        cpu_pod("p05-gpu", 500).spec("nodeSelector", json!({"gpu": "true"})),
        cpu_pod("p06-a-big", 5000).spec("affinity", in_zones("In", &["a"])),
        cpu_pod("p07-field", 1000).spec(
            "affinity",
            required_node_affinity(json!([{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [s.n("c1")]},
            ]}])),
        ),
    ];
    let outcome = s.run(nodes, vec![], ranked(batch)).await?;
    ensure!(
        outcome
            .message_of(s.ns(), "p05-gpu")
            .contains("didn't match Pod's node affinity/selector"),
        "sim-affinity: p05 must be rejected by its selector: {outcome:?}"
    );
    ensure!(outcome.node_of(s.ns(), "p07-field") == Some(s.n("c1").as_str()));
    s.finish().await
}

/// maxSkew=1 across zones within the batch: each placement changes the counts the next pod
/// sees. Zone c holds only 2 pods (1 cpu), so zones a and b stop at 3 and the ninth stays
/// pending.
#[tokio::test]
async fn s04_topology_spread_within_the_batch() -> Result<()> {
    let s = Scenario::begin("sim-spread").await?;
    let nodes = vec![
        s.node("a8", 8).label(ZONE, "a"),
        s.node("a5", 5).label(ZONE, "a"),
        s.node("b7", 7).label(ZONE, "b"),
        s.node("c1", 1).label(ZONE, "c"),
    ];
    let batch = (1..=9)
        .map(|i| {
            cpu_pod(&format!("web-{i}"), 500).label("app", "web").spec(
                "topologySpreadConstraints",
                json!([{
                    "maxSkew": 1,
                    "topologyKey": ZONE,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "web"}},
                }]),
            )
        })
        .collect();
    // Load on b7 (not app=web: the spread does not count it), so that b7 and a8 never tie.
    let existing = vec![bound("load-b", &s.n("b7"), None, 1000)];
    let outcome = s.run(nodes, existing, ranked(batch)).await?;
    ensure!(
        outcome.placed() == 8
            && outcome
                .message_of(s.ns(), "web-9")
                .contains("topology spread constraints"),
        "sim-spread: 8 placed and web-9 rejected by the spread: {outcome:?}"
    );
    s.finish().await
}

/// Required anti-affinity on the hostname between replicas of the batch: 6 replicas, 4 nodes.
#[tokio::test]
async fn s05_anti_affinity_within_the_batch() -> Result<()> {
    let s = Scenario::begin("sim-anti").await?;
    let nodes = vec![s.node("h2", 2), s.node("h3", 3), s.node("h4", 4), s.node("h5", 5)];
    // a-web first (the highest rank): a pod queued after the rejected replicas would wake them
    // up when bound, for one more attempt each.
    let mut batch = vec![cpu_pod("a-web", 1500)];
    batch.extend((1..=6).map(|i| {
        cpu_pod(&format!("db-{i}"), 500)
            .label("app", "db")
            .spec("affinity", pod_affinity("podAntiAffinity", "db", HOSTNAME))
    }));
    let outcome = s.run(nodes, vec![], ranked(batch)).await?;
    ensure!(
        outcome.placed() == 5
            && outcome
                .message_of(s.ns(), "db-6")
                .contains("didn't match pod anti-affinity rules"),
        "sim-anti: a-web and 4 db placed, db-5 and db-6 rejected by anti-affinity: {outcome:?}"
    );
    s.finish().await
}

/// Required pod affinity to a pod of the same batch, scheduled before its followers (highest
/// rank): the followers join it until its node is full; a pod whose affinity matches no pod
/// stays pending.
#[tokio::test]
async fn s06_pod_affinity_to_the_batch() -> Result<()> {
    let s = Scenario::begin("sim-podaff").await?;
    let nodes = vec![s.node("h2", 2), s.node("h3", 3), s.node("h4", 4)];
    let follower = |name: &str| {
        cpu_pod(name, 1000)
            .label("app", "web")
            .spec("affinity", pod_affinity("podAffinity", "cache", HOSTNAME))
    };
    let batch = vec![
        cpu_pod("a-cache", 1000).label("app", "cache"),
        follower("b-web-1"),
        follower("b-web-2"),
        follower("b-web-3"),
        follower("b-web-4"),
        cpu_pod("c-lonely", 500).spec("affinity", pod_affinity("podAffinity", "nothing", HOSTNAME)),
    ];
    let outcome = s.run(nodes, vec![], ranked(batch)).await?;
    let cache = outcome
        .node_of(s.ns(), "a-cache")
        .context("a-cache placed")?
        .to_owned();
    ensure!(
        outcome.node_of(s.ns(), "b-web-1") == Some(cache.as_str())
            && outcome
                .message_of(s.ns(), "c-lonely")
                .contains("didn't match pod affinity rules"),
        "sim-podaff: followers join a-cache on {cache}, c-lonely stays pending: {outcome:?}"
    );
    s.finish().await
}

/// A high-priority pod preempts the low-priority pod filling one node (the other node's pod
/// outranks it); a priority-0 pod of the same batch finds no room and no victim.
#[tokio::test]
async fn s07_preemption() -> Result<()> {
    let s = Scenario::begin("sim-preempt").await?;
    let (a, b) = (s.n("a2"), s.n("b3"));
    let nodes = vec![s.node("a2", 2), s.node("b3", 3)];
    let existing = vec![
        bound("v-low", &a, Some(LOW), 2000),
        bound("keep-high", &b, Some(HIGH), 3000),
    ];
    let batch = vec![
        cpu_pod("p01-urgent", 1500).priority_class(HIGH),
        cpu_pod("p02-filler", 1000),
    ];
    let outcome = s.run(nodes, existing, batch).await?;
    ensure!(
        outcome.node_of(s.ns(), "p01-urgent") == Some(a.as_str())
            && outcome.victims.keys().eq([format!("{}/v-low", s.ns())].iter()),
        "sim-preempt: p01-urgent preempts v-low on {a}: {outcome:?}"
    );
    s.finish().await
}

/// Three candidate nodes for a 3-cpu HIGH preemptor: a2 would lose one MID pod; b5 one
/// LOWEST pod (its LOW pod is reprieved); c6 two LOWEST pods (its LOW pod is reprieved). The
/// lowest highest-victim priority rules a2 out, the lowest sum of priorities picks b5.
#[tokio::test]
async fn s08_preemption_node_choice() -> Result<()> {
    let s = Scenario::begin("sim-pick").await?;
    let (a, b, c) = (s.n("a4"), s.n("b5"), s.n("c6"));
    let nodes = vec![s.node("a4", 4), s.node("b5", 5), s.node("c6", 6)];
    let existing = vec![
        bound("a-mid", &a, Some(MID), 4000),
        bound("b-low", &b, Some(LOW), 2000),
        bound("b-lowest", &b, Some(LOWEST), 2000),
        bound("c-low", &c, Some(LOW), 2000),
        bound("c-lowest-1", &c, Some(LOWEST), 2000),
        bound("c-lowest-2", &c, Some(LOWEST), 2000),
    ];
    let batch = vec![
        cpu_pod("p01-urgent", 3000).priority_class(HIGH),
        cpu_pod("p02-best-effort", 500),
    ];
    let outcome = s.run(nodes, existing, batch).await?;
    ensure!(
        outcome.node_of(s.ns(), "p01-urgent") == Some(b.as_str())
            && outcome.victims.keys().eq([format!("{}/b-lowest", s.ns())].iter()),
        "sim-pick: p01-urgent preempts b-lowest on {b}: {outcome:?}"
    );
    s.finish().await
}

/// The same host port asked by more pods of the batch than there are nodes.
#[tokio::test]
async fn s09_host_ports_within_the_batch() -> Result<()> {
    let s = Scenario::begin("sim-ports").await?;
    let nodes = vec![s.node("h2", 2), s.node("h3", 3), s.node("h4", 4)];
    let mut batch: Vec<PodBuilder> = (1..=5)
        .map(|i| cpu_pod(&format!("p0{i}-8080"), 100 * i).host_port(8080))
        .collect();
    batch.push(cpu_pod("p06-9090", 300).host_port(9090));
    let outcome = s.run(nodes, vec![], ranked(batch)).await?;
    ensure!(
        outcome.placed() == 4 && outcome.message_of(s.ns(), "p05-8080").contains("free ports"),
        "sim-ports: three 8080 pods and the 9090 one placed: {outcome:?}"
    );
    s.finish().await
}

/// A drain: the replicas of 4 Deployments run on `a4`; `simulate --drain a4` (before the
/// drain) must place as many replacements per node as kube-scheduler does after a real
/// `kubectl drain`, and the replacements, once the ReplicaSet has created them, are compared pod
/// by pod with a plain `simulate`.
#[tokio::test]
async fn s10_drain() -> Result<()> {
    let s = Scenario::begin("sim-drain").await?;
    let result = drain(&s).await;
    // Whatever happened: left behind, the Deployments would recreate pods under the next
    // scenarios' feet.
    delete_workloads(&s.lab.client).await?;
    result?;
    s.finish().await
}

async fn drain(s: &Scenario) -> Result<()> {
    let drained = s.n("a4");
    let (c, d) = (s.n("c5"), s.n("d8"));
    s.lab
        .create_nodes(vec![
            s.node("a4", 4),
            s.node("b3", 3),
            s.node("c5", 5),
            s.node("d8", 8),
        ])
        .await?;
    // Existing loads, so that the replacements spread in one way only.
    s.lab
        .create_pods(vec![
            bound("load-c", &c, None, 2000),
            bound("load-d", &d, None, 6000),
        ])
        .await?;
    // One single-replica Deployment per rank: replicas of one Deployment are alike and of equal
    // priority, so kube-scheduler would place them in an order of its own (see `ranked`).
    for (app, rank) in [("web-a", 4), ("web-b", 3), ("web-c", 2), ("web-d", 1)] {
        s.lab
            .create_namespaced::<Deployment>(json!({
                "metadata": {"name": app},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": app}},
                    "template": {
                        "metadata": {"labels": {"app": app}},
                        "spec": {
                            "priorityClassName": rank_class(rank),
                            "terminationGracePeriodSeconds": 0,
                            "containers": [{"name": "c", "image": common::PAUSE_IMAGE,
                                            "resources": {"requests": {"cpu": "1"}}}],
                        },
                    },
                },
            }))
            .await?;
    }
    // kube-scheduler is stopped: bind the replicas to the node to drain by hand.
    let replicas = wait_pending(s, 4).await?;
    for name in &replicas {
        let name = name.rsplit('/').next().unwrap_or_default();
        let binding = json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": drained},
        });
        let _: Value = s
            .pods()
            .create_subresource("binding", name, &PostParams::default(), &binding)
            .await
            .with_context(|| format!("binding {name} to {drained}"))?;
    }
    wait_until("the replicas to be bound", || async {
        Ok(s.pending_pods().await?.is_empty().then_some(()))
    })
    .await?;

    // The prediction, on the cluster before the drain (no pod pending).
    let predicted = s.simulate(&["--drain", &drained]).await?;

    // The real drain, still without kube-scheduler: the ReplicaSet creates 4 pending replacements.
    s.lab
        .cp
        .kubectl(&["drain", &drained, "--timeout=60s"])
        .await
        .context("kubectl drain")?;
    let replacements = wait_pending(s, 4).await?;
    let bound = s.bound_pods().await?;
    let (objects, warnings) = load_from_api(&s.lab.client, &ApiLoadOptions::default()).await?;
    ensure!(warnings.is_empty(), "load_from_api warned: {warnings:?}");
    let simulation = s.simulate(&[]).await?;
    let outcome = s.run_kube_scheduler(&replacements, &bound).await?;
    s.check_no_ties(&objects, &outcome)?;

    let real_counts = outcome.per_node();
    let predicted_counts = per_node(predicted.pods.values());
    let predicted_pending = predicted.pods.values().filter(|p| p.node.is_none()).count();
    ensure!(
        real_counts == predicted_counts
            && predicted_pending == outcome.pending().len()
            && predicted.victims.is_empty(),
        "sim-drain: `simulate --drain {drained}` predicted per node {predicted_counts:?} ({predicted_pending} \
         pending), kube-scheduler placed the replacements {real_counts:?} ({} pending)\nprediction: {:#}",
        outcome.pending().len(),
        predicted.json
    );
    ensure!(
        !real_counts.contains_key(&drained),
        "sim-drain: a replacement landed on the drained node: {real_counts:?}"
    );
    eprintln!("[simulate] sim-drain: --drain prediction per node {predicted_counts:?} = kube-scheduler's");
    s.compare(&simulation, &outcome).await
}

/// The pending pods of the scenario's namespace, once there are `count` of them.
async fn wait_pending(s: &Scenario, count: usize) -> Result<BTreeSet<String>> {
    wait_until(&format!("{count} pending pods in {}", s.ns()), || async {
        let pending = s.pending_pods().await?;
        Ok((pending.len() == count).then_some(pending))
    })
    .await
    .with_context(|| s.lab.cp.log_tail("kube-controller-manager", 20))
}

/// Only the higher-priority half of the batch fits: the priority-0 pods, created first (and
/// named first), are queued after the ranked ones, find the nodes full and nothing to preempt
/// (they are alike, so their order among themselves does not matter).
#[tokio::test]
async fn s11_priority_order() -> Result<()> {
    let s = Scenario::begin("sim-prio").await?;
    let nodes = vec![s.node("q2", 2), s.node("q3", 3)];
    let batch = vec![
        cpu_pod("a1-low", 1000),
        cpu_pod("a2-low", 1000),
        cpu_pod("a3-low", 1000),
        cpu_pod("b1-high", 1500).spec("priorityClassName", json!(rank_class(RANKS))),
        cpu_pod("b2-high", 1500).spec("priorityClassName", json!(rank_class(RANKS - 1))),
        cpu_pod("b3-high", 1500).spec("priorityClassName", json!(rank_class(RANKS - 2))),
    ];
    let outcome = s.run(nodes, vec![], batch).await?;
    let pending: Vec<&str> = outcome.pending();
    ensure!(
        outcome.placed() == 3 && pending.iter().all(|p| p.ends_with("-low")),
        "sim-prio: the HIGH pods fill the nodes, the low ones stay pending: {outcome:?}"
    );
    s.finish().await
}

/// Priorities in no relation to the names or the creation order: the queue is priority first.
/// 14.7 cpu asked of 13: the pods queued last find no room.
#[tokio::test]
async fn s12_mixed_priorities() -> Result<()> {
    let s = Scenario::begin("sim-mixed").await?;
    let nodes = vec![s.node("m3", 3), s.node("m4", 4), s.node("m6", 6)];
    // Ranks unrelated to the names, nor to the creation order.
    let batch = [
        ("p01", 2500, 3),
        ("p02", 1500, 6),
        ("p03", 2000, 7),
        ("p04", 3500, 2),
        ("p05", 1000, 8),
        ("p06", 2200, 5),
        ("p07", 1200, 4),
        ("p08", 800, 1),
    ]
    .into_iter()
    .map(|(name, millis, rank)| cpu_pod(name, millis).spec("priorityClassName", json!(rank_class(rank))))
    .collect();
    s.run(nodes, vec![], batch).await?;
    s.finish().await
}

/// A larger cluster: 12 nodes in 3 zones, of 4 to 15 cpu, half of them SSD, two tainted, and a
/// batch of 24 pods of four kinds interleaved in the queue: zone-spread web pods, SSD database
/// replicas that must not share a node, batch pods that tolerate the taint, and large pods that
/// only the largest nodes could take, if the others left room.
#[tokio::test]
async fn s13_larger_mixed_cluster() -> Result<()> {
    let s = Scenario::begin("sim-large").await?;
    let zones = ["a", "b", "c"];
    let nodes = (4..=15u32)
        .map(|cpu| {
            let i = cpu as usize;
            let mut node = s
                .node(&format!("n{cpu:02}"), cpu)
                .label(ZONE, zones[i % 3])
                .label("disk", if i.is_multiple_of(2) { "ssd" } else { "hdd" });
            // The node's index (cpu - 3) in binary, for the pods' preferences (below).
            for bit in 0..4 {
                if (i - 3) & (1 << bit) != 0 {
                    node = node.label(&format!("bit{bit}"), "1");
                }
            }
            if i.is_multiple_of(5) {
                node.taint("dedicated", "batch", "NoSchedule")
            } else {
                node
            }
        })
        .collect();
    // Many nodes of close sizes tie on resource scores; preferred terms of weights 1, 2, 4, 8 on
    // the index bits give each node its own NodeAffinity score (index x 100 / the highest
    // feasible index), so that one node always scores highest.
    let prefer = json!({"preferredDuringSchedulingIgnoredDuringExecution": (0..4)
        .map(|bit| json!({"weight": 1 << bit, "preference": {"matchExpressions": [
            {"key": format!("bit{bit}"), "operator": "In", "values": ["1"]},
        ]}}))
        .collect::<Vec<_>>()});
    let cpu_pod =
        |name: &str, millis: u32| cpu_pod(name, millis).spec("affinity", json!({"nodeAffinity": prefer}));
    let web = |i: usize| {
        cpu_pod(&format!("p{i:02}-web"), 1500).label("app", "web").spec(
            "topologySpreadConstraints",
            json!([{
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
            }]),
        )
    };
    let db = |i: usize| {
        cpu_pod(&format!("p{i:02}-db"), 2000)
            .label("app", "db")
            .spec("nodeSelector", json!({"disk": "ssd"}))
            .spec(
                "affinity",
                json!({
                    "nodeAffinity": prefer,
                    "podAntiAffinity": pod_affinity("podAntiAffinity", "db", HOSTNAME)["podAntiAffinity"],
                }),
            )
    };
    let batch_pod = |i: usize| {
        cpu_pod(&format!("p{i:02}-batch"), 3000).toleration(json!({
            "key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule",
        }))
    };
    let big = |i: usize| cpu_pod(&format!("p{i:02}-big"), 11000).memory("4Gi");
    let batch = (1..=24)
        .map(|i| match i % 4 {
            0 => web(i),
            1 => db(i),
            2 => batch_pod(i),
            _ => big(i),
        })
        .collect();
    // Uneven memory loads, so that nodes of close sizes do not tie on score.
    let loads = (4..=15u32)
        .map(|cpu| {
            pod(&format!("load-n{cpu:02}"))
                .memory(&format!("{}Mi", 200 + (cpu * 733) % 1900))
                .on(&s.n(&format!("n{cpu:02}")))
        })
        .collect();
    let outcome = s.run(nodes, loads, ranked(batch)).await?;
    ensure!(
        !outcome.pending().is_empty(),
        "sim-large: the scenario means some pods to stay pending: {outcome:?}"
    );
    s.finish().await
}

/// A gated pod stays pending with the condition the API server gave it (kube-scheduler never
/// tries it), next to an ordinary pod that fits and one that does not.
#[tokio::test]
async fn s14_gated_pod() -> Result<()> {
    let s = Scenario::begin("sim-gated").await?;
    let nodes = vec![s.node("g2", 2), s.node("g3", 3)];
    let batch = vec![
        cpu_pod("p01-fits", 1000),
        cpu_pod("p02-gated", 100).gate("example.com/wait"),
        cpu_pod("p03-too-big", 4000),
    ];
    let outcome = s.run(nodes, vec![], ranked(batch)).await?;
    ensure!(
        outcome.node_of(s.ns(), "p01-fits").is_some() && outcome.pending().len() == 2,
        "sim-gated: p01 placed, the gated and the too big pods pending: {outcome:?}"
    );
    s.finish().await
}

/// A pod whose required affinity target comes later in the queue: its first attempt fails (no pod
/// matches), the target's binding sends it to the backoff queue, and a lower-priority pod still in
/// the active queue goes first and takes the room next to the target. Retried, the follower cannot
/// preempt that pod: preemption's dry run removes every lower-priority pod of the node first, its
/// affinity target included, so the node no longer matches its affinity. It stays pending — the
/// backoff queue's order and preemption's victim search, both kube-scheduler's.
#[tokio::test]
async fn s15_affinity_retry_loses_its_room_to_an_active_pod() -> Result<()> {
    let s = Scenario::begin("sim-retry").await?;
    let nodes = vec![s.node("h2", 2), s.node("h4", 4)];
    let batch = vec![
        cpu_pod("a-follower", 1000)
            .label("app", "follower")
            .spec("affinity", pod_affinity("podAffinity", "cache", HOSTNAME)),
        cpu_pod("b-cache", 1000).label("app", "cache"),
        cpu_pod("c-greedy", 2500),
    ];
    let outcome = s.run(nodes, vec![], ranked(batch)).await?;
    ensure!(
        outcome.node_of(s.ns(), "a-follower").is_none()
            && outcome.node_of(s.ns(), "c-greedy") == outcome.node_of(s.ns(), "b-cache")
            && outcome
                .message_of(s.ns(), "a-follower")
                .contains("didn't match pod affinity rules"),
        "sim-retry: c-greedy takes the room next to b-cache, a-follower stays pending: {outcome:?}"
    );
    s.finish().await
}

/// Requests beyond a container's cpu: an extended resource, an init container larger than the
/// app container (the pod asks for the larger), a sidecar (a restartable init container, added
/// to the app containers), memory; an image present on one node only (ImageLocality); a
/// cordoned node.
#[tokio::test]
async fn s16_requests_images_and_a_cordoned_node() -> Result<()> {
    let s = Scenario::begin("sim-requests").await?;
    const GPU: &str = "example.com/gpu";
    const IMAGE: &str = "registry.example/big:1";
    let nodes = vec![
        s.node("r4", 4).resource(GPU, "2"),
        s.node("r6", 6).image(IMAGE, 900 * 1024 * 1024),
        s.node("r8", 8).cordoned(),
        s.node("r3", 3).resource(GPU, "4"),
    ];
    let gpus = |name: &str, n: &str| cpu_pod(name, 500).limit(GPU, n).request(GPU, n);
    let batch = vec![
        gpus("p01-gpu2", "2"),
        cpu_pod("p02-init", 500).spec(
            "initContainers",
            json!([{"name": "init", "image": common::PAUSE_IMAGE,
                    "resources": {"requests": {"cpu": "3"}}}]),
        ),
        cpu_pod("p03-sidecar", 1500).spec(
            "initContainers",
            json!([{"name": "proxy", "image": common::PAUSE_IMAGE, "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "1"}}}]),
        ),
        cpu_pod("p04-image", 500).container_field("image", json!(IMAGE)),
        gpus("p05-gpu3", "3"),
        gpus("p06-gpu2", "2"),
        cpu_pod("p07-mem", 200).memory("9Gi"),
        cpu_pod("p08-huge", 7000),
    ];
    let outcome = s.run(nodes, vec![], ranked(batch)).await?;
    ensure!(
        outcome.message_of(s.ns(), "p08-huge").contains("unschedulable"),
        "sim-requests: p08-huge only fits the cordoned node: {outcome:?}"
    );
    s.finish().await
}

/// Pods already nominated (as an earlier preemption leaves them): kube-scheduler tries the
/// nominated node first and takes it if the pod fits there, whatever the scores; a nominated
/// pod that no longer fits its node goes through a full cycle.
#[tokio::test]
async fn s17_nominated_pods() -> Result<()> {
    let s = Scenario::begin("sim-nominated").await?;
    let a = s.n("a4");
    let nodes = vec![s.node("a4", 4), s.node("b8", 8)];
    let batch = vec![
        cpu_pod("p01-nominated", 2000),
        cpu_pod("p02-nominated-too-big", 3000),
        cpu_pod("p03-plain", 6000),
    ];
    s.build(nodes, vec![], ranked(batch)).await?;
    for name in ["p01-nominated", "p02-nominated-too-big"] {
        s.pods()
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"nominatedNodeName": a}})),
            )
            .await
            .with_context(|| format!("nominating {name}"))?;
    }
    let outcome = s.run_built().await?;
    ensure!(
        outcome.node_of(s.ns(), "p01-nominated") == Some(a.as_str()),
        "sim-nominated: p01 goes to its nominated node {a}: {outcome:?}"
    );
    s.finish().await
}

/// Preemption weighs PodDisruptionBudgets first: the LOW pod of a4 is protected by a budget that
/// allows no disruption (its status written by hand, as no disruption controller runs), so the
/// preemptor evicts the MID pod of b5 although a lower-priority victim was available.
#[tokio::test]
async fn s18_preemption_respects_a_pdb() -> Result<()> {
    let s = Scenario::begin("sim-pdb").await?;
    let (a, b) = (s.n("a4"), s.n("b5"));
    let nodes = vec![s.node("a4", 4), s.node("b5", 5)];
    let existing = vec![
        bound("a-low", &a, Some(LOW), 4000),
        bound("b-mid", &b, Some(MID), 5000),
    ];
    s.build(
        nodes,
        existing,
        vec![cpu_pod("p01-urgent", 3000).priority_class(HIGH)],
    )
    .await?;
    let created = s
        .lab
        .create_namespaced::<PodDisruptionBudget>(json!({
            "metadata": {"name": "a-low"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "a-low"}}},
        }))
        .await?;
    Api::<PodDisruptionBudget>::namespaced(s.lab.client.clone(), s.ns())
        .patch_status(
            "a-low",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "observedGeneration": created.metadata.generation.unwrap_or(1),
                "disruptionsAllowed": 0,
                "currentHealthy": 1,
                "desiredHealthy": 1,
                "expectedPods": 1,
            }})),
        )
        .await
        .context("setting the PodDisruptionBudget's status")?;
    let outcome = s.run_built().await?;
    ensure!(
        outcome.node_of(s.ns(), "p01-urgent") == Some(b.as_str())
            && outcome.victims.keys().eq([format!("{}/b-mid", s.ns())].iter()),
        "sim-pdb: p01-urgent preempts b-mid on {b}: {outcome:?}"
    );
    s.finish().await
}

/// Two preemptors in one batch: the first preempts on the only node large enough for it; the
/// second, while the first is nominated there (its room reserved), preempts on the other.
#[tokio::test]
async fn s19_two_preemptors() -> Result<()> {
    let s = Scenario::begin("sim-two").await?;
    let (a, b, c) = (s.n("a4"), s.n("b5"), s.n("c3"));
    let nodes = vec![s.node("a4", 4), s.node("b5", 5), s.node("c3", 3)];
    let existing = vec![
        bound("v-a", &a, Some(LOW), 4000),
        bound("v-b", &b, Some(LOWEST), 5000),
        bound("keep-c", &c, Some(HIGH), 3000),
    ];
    let batch = vec![
        // Too big for a4: whichever victim's deletion kube-scheduler sees first, p01-high can
        // only land on b5 (otherwise it could take a4 once p02-mid has emptied it).
        cpu_pod("p01-high", 4500).priority_class(HIGH),
        cpu_pod("p02-mid", 3000).priority_class(MID),
        // No third pod that would fit next to either: nominated pods reserve room in Filter but
        // not in Score, so where it lands would depend on whether p02-mid is bound yet.
    ];
    let outcome = s.run(nodes, existing, batch).await?;
    ensure!(
        outcome.node_of(s.ns(), "p01-high") == Some(b.as_str())
            && outcome.node_of(s.ns(), "p02-mid") == Some(a.as_str())
            && outcome.victims.len() == 2,
        "sim-two: p01-high preempts v-b on {b}, p02-mid v-a on {a}: {outcome:?}"
    );
    s.finish().await
}

/// Pod affinity and anti-affinity across namespaces (namespaceSelector), with a batch spanning
/// two namespaces.
#[tokio::test]
async fn s20_affinity_across_namespaces() -> Result<()> {
    let s = Scenario::begin("sim-ns").await?;
    let team = s.lab.create_namespace("team", json!({"team": "b"})).await?;
    let (x, y, z) = (s.n("x3"), s.n("y4"), s.n("z5"));
    let nodes = vec![s.node("x3", 3), s.node("y4", 4), s.node("z5", 5)];
    let existing = vec![bound("cache", &x, None, 500).namespace(&team)];
    let term = |selector: Value| {
        json!([{
            "labelSelector": {"matchLabels": {"app": "cache"}},
            "namespaceSelector": selector,
            "topologyKey": HOSTNAME,
        }])
    };
    let batch = ranked(vec![
        cpu_pod("p01-near-cache", 1000).spec(
            "affinity",
            json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": term(json!({"matchLabels": {"team": "b"}}))}}),
        ),
        cpu_pod("p02-away-from-cache", 1000).spec(
            "affinity",
            json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": term(json!({}))}}),
        ),
        // Its own namespace only: the cache of team-b does not count, so nothing matches.
        cpu_pod("p03-same-namespace-only", 500).spec(
            "affinity",
            json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"app": "cache"}},
                "topologyKey": HOSTNAME,
            }]}}),
        ),
    ]);
    // One more pending pod in team-b, queued last.
    let batch = batch
        .into_iter()
        .chain([cpu_pod("p04-team-b", 2500)
            .namespace(&team)
            .spec("priorityClassName", json!(rank_class(1)))])
        .collect();
    let outcome = s.run(nodes, existing, batch).await?;
    ensure!(
        outcome.node_of(s.ns(), "p01-near-cache") == Some(x.as_str())
            && outcome
                .node_of(s.ns(), "p02-away-from-cache")
                .is_some_and(|n| n == y || n == z)
            && outcome.node_of(s.ns(), "p03-same-namespace-only").is_none(),
        "sim-ns: p01 joins the cache on {x}, p02 avoids it, p03 finds none: {outcome:?}"
    );
    s.finish().await
}

/// Topology spread options: minDomains above the number of zones (the global minimum counts
/// as 0, so no zone may take a second pod), and nodeTaintsPolicy Honor (the tainted zone is no
/// domain for pods that do not tolerate it).
#[tokio::test]
async fn s21_topology_spread_options() -> Result<()> {
    let s = Scenario::begin("sim-spread2").await?;
    let nodes = vec![
        s.node("a6", 6).label(ZONE, "a"),
        s.node("b5", 5).label(ZONE, "b"),
        s.node("c4", 4)
            .label(ZONE, "c")
            .taint("dedicated", "x", "NoSchedule"),
        s.node("d3", 3).label(ZONE, "d"),
    ];
    let spread = |app: &str, extra: Value| {
        let mut constraint = json!({
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": app}},
        });
        if let (Some(c), Some(e)) = (constraint.as_object_mut(), extra.as_object()) {
            c.extend(e.clone());
        }
        json!([constraint])
    };
    let mut batch: Vec<PodBuilder> = (1..=4)
        .map(|i| {
            cpu_pod(&format!("a{i}-min-domains"), 500)
                .label("app", "api")
                .spec(
                    "topologySpreadConstraints",
                    spread("api", json!({"minDomains": 5})),
                )
        })
        .collect();
    batch.extend((1..=4).map(|i| {
        cpu_pod(&format!("b{i}-honor-taints"), 500)
            .label("app", "web")
            .spec(
                "topologySpreadConstraints",
                spread("web", json!({"nodeTaintsPolicy": "Honor"})),
            )
    }));
    // Load on b5 (counted by neither spread), so that a6 and b5 never tie.
    let existing = vec![bound("load-b", &s.n("b5"), None, 1000)];
    let outcome = s.run(nodes, existing, ranked(batch)).await?;
    ensure!(
        !outcome.pending().is_empty(),
        "sim-spread2: minDomains leaves pods pending: {outcome:?}"
    );
    s.finish().await
}

/// The pods allocatable: a large node that takes only three pods, two of them already there.
#[tokio::test]
async fn s22_too_many_pods() -> Result<()> {
    let s = Scenario::begin("sim-podcount").await?;
    let p = s.n("p8");
    let nodes = vec![s.node("p8", 8).resource("pods", "3"), s.node("q2", 2)];
    // Above the batch's ranks: nothing to preempt for a pod slot.
    let existing = ["tiny-1", "tiny-2"]
        .map(|name| bound(name, &p, None, 100).spec("priorityClassName", json!(rank_class(RANKS))))
        .to_vec();
    let batch = (1..=5).map(|i| cpu_pod(&format!("p{i}"), 600)).collect();
    let outcome = s.run(nodes, existing, ranked(batch)).await?;
    ensure!(
        outcome.message_of(s.ns(), "p5").contains("Too many pods"),
        "sim-podcount: p5 finds p8 full of pods and q2 full of cpu: {outcome:?}"
    );
    s.finish().await
}

/// `preemptionPolicy: Never`: the high-priority pod preempts nothing; the lower-priority pod
/// queued after it preempts on a2, but once the victim is gone the `Never` pod, retried first
/// (higher priority, and a lower-priority nomination reserves nothing against it), takes that
/// room, and the other preempts again, on b3.
#[tokio::test]
async fn s23_preemption_policy_never() -> Result<()> {
    let s = Scenario::begin("sim-never").await?;
    let (a, b) = (s.n("a2"), s.n("b3"));
    let nodes = vec![s.node("a2", 2), s.node("b3", 3)];
    let existing = vec![
        bound("v-a", &a, Some(LOWEST), 2000),
        bound("v-b", &b, Some(LOW), 3000),
    ];
    let batch = vec![
        cpu_pod("p01-never", 1500).priority_class(HIGH_NEVER),
        cpu_pod("p02-mid", 1500).priority_class(MID),
    ];
    let outcome = s.run(nodes, existing, batch).await?;
    ensure!(
        outcome.node_of(s.ns(), "p01-never") == Some(a.as_str())
            && outcome.node_of(s.ns(), "p02-mid") == Some(b.as_str())
            && outcome
                .victims
                .values()
                .all(|(_, preemptor)| preemptor.ends_with("/p02-mid")),
        "sim-never: p01-never ends on {a}, p02-mid on {b}, both victims p02-mid's: {outcome:?}"
    );
    s.finish().await
}

// ---------------------------------------------------------------------------------------------
// When parked pods get another attempt: queueing hints, volume events, asynchronous preemption

/// Queueing hints (issue 27, 7a): a bound pod wakes a pod InterPodAffinity or PodTopologySpread
/// rejected only when it matches that pod's affinity terms or spread selector. `a-follower`
/// (affinity to app=cache, which no pod has) and `b-spread` (zone spread of app=web, zone a
/// already holding two) fail first; `c-filler` then takes h4, matching neither. kube-scheduler
/// leaves both pending with their first message; a queue that woke them on every binding would
/// retry them and find h4 full: "Insufficient cpu" instead.
#[tokio::test]
async fn s28_bound_pods_wake_only_the_pods_their_labels_matter_to() -> Result<()> {
    let s = Scenario::begin("sim-hints").await?;
    let nodes = vec![
        s.node("h2", 2).label(ZONE, "a"),
        s.node("h3", 3).label(ZONE, "b"),
        s.node("h4", 4).label(ZONE, "a"),
    ];
    let existing = vec![
        bound("web-1", &s.n("h2"), None, 100).label("app", "web"),
        bound("web-2", &s.n("h2"), None, 100).label("app", "web"),
    ];
    let batch = vec![
        cpu_pod("a-follower", 2500).spec("affinity", pod_affinity("podAffinity", "cache", HOSTNAME)),
        cpu_pod("b-spread", 3500).label("app", "web").spec(
            "topologySpreadConstraints",
            json!([{
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
            }]),
        ),
        cpu_pod("c-filler", 2000),
    ];
    let outcome = s.run(nodes, existing, ranked(batch)).await?;
    ensure!(
        outcome.node_of(s.ns(), "c-filler") == Some(s.n("h4").as_str())
            && outcome
                .message_of(s.ns(), "a-follower")
                .contains("2 node(s) didn't match pod affinity rules")
            && outcome
                .message_of(s.ns(), "b-spread")
                .contains("1 node(s) didn't match pod topology spread constraints"),
        "sim-hints: c-filler on h4, the others keep their first messages: {outcome:?}"
    );
    s.finish().await
}

/// Volume events (issue 27, 7b): `p01-first` binds the only PersistentVolume (local, on l4) in
/// its binding cycle; `p02-second`, tried next, finds none left ("didn't find available
/// persistent volumes to bind"), and `p03-filler` then fills r6. The volume's update (its
/// claimRef, written in p01's PreBind) requeues p02 (VolumeBinding registers PersistentVolume
/// updates without a hint), whose retry finds r6 full: "Insufficient cpu" there. A queue deaf
/// to volume events would keep p02's first message.
#[tokio::test]
async fn s29_a_volume_binding_requeues_the_pods_volume_binding_rejected() -> Result<()> {
    let s = Scenario::begin("sim-volumes").await?;
    let (l, r) = (s.n("l4"), s.n("r6"));
    let class = format!("{}-local", s.ns());
    let pv = format!("{}-only", s.ns());
    s.lab
        .create_cluster::<StorageClass>(json!({
            "metadata": {"name": class},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        }))
        .await?;
    s.lab
        .create_cluster::<PersistentVolume>(json!({
            "metadata": {"name": pv},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": class,
                "persistentVolumeReclaimPolicy": "Retain",
                "local": {"path": "/mnt/only"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": HOSTNAME, "operator": "In", "values": [l]},
                ]}]}},
            },
        }))
        .await?;
    for claim in ["c1", "c2"] {
        s.lab
            .create_namespaced::<PersistentVolumeClaim>(json!({
                "metadata": {"name": claim},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": class,
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }))
            .await?;
    }
    let nodes = vec![s.node("l4", 4), s.node("r6", 6)];
    let batch = vec![
        cpu_pod("p01-first", 1000).claim("c1"),
        cpu_pod("p02-second", 1000).claim("c2"),
        cpu_pod("p03-filler", 5500),
    ];
    let result = s.run(nodes, vec![], ranked(batch)).await;
    delete_volumes(&s, &class, &pv).await?;
    let outcome = result?;
    ensure!(
        outcome.node_of(s.ns(), "p01-first") == Some(l.as_str())
            && outcome.node_of(s.ns(), "p03-filler") == Some(r.as_str())
            && outcome
                .message_of(s.ns(), "p02-second")
                .contains("1 Insufficient cpu, 1 node(s) didn't find available persistent volumes to bind"),
        "sim-volumes: p02-second retried after p03-filler took r6: {outcome:?}"
    );
    s.finish().await
}

/// Deletes the claims, the PersistentVolume and the StorageClass of
/// [`s29_a_volume_binding_requeues_the_pods_volume_binding_rejected`], so that later scenarios'
/// simulations do not load them.
async fn delete_volumes(s: &Scenario, class: &str, pv: &str) -> Result<()> {
    let ignore_missing = |r: Result<(), kube::Error>| match r {
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        other => other,
    };
    for claim in ["c1", "c2"] {
        ignore_missing(
            Api::<PersistentVolumeClaim>::namespaced(s.lab.client.clone(), s.ns())
                .delete(claim, &DeleteParams::default())
                .await
                .map(|_| ()),
        )?;
    }
    ignore_missing(
        Api::<PersistentVolume>::all(s.lab.client.clone())
            .delete(pv, &DeleteParams::default())
            .await
            .map(|_| ()),
    )?;
    ignore_missing(
        Api::<StorageClass>::all(s.lab.client.clone())
            .delete(class, &DeleteParams::default())
            .await
            .map(|_| ()),
    )?;
    Ok(())
}

/// Asynchronous preemption (issue 27, 7c): `p01-preemptor` preempts `v-low` on a2, whose deletion
/// kube-scheduler issues in a goroutine; `p02-next`, popped at once, still sees v-low, fails,
/// and is requeued when the deletion arrives. Before its retry `p03-port` takes host port 8080 on
/// c1 (the only node it fits), and p01, now free to go, takes a2. p02's last message then has
/// "didn't have free ports" for c1 where its first had "Insufficient memory". Deleting the
/// victims inside the preemptor's cycle, p02's only attempt would come after the deletion and
/// nothing would retry it.
#[tokio::test]
async fn s30_victims_are_deleted_after_the_next_cycle() -> Result<()> {
    let s = Scenario::begin("sim-async").await?;
    let (a, c) = (s.n("a2"), s.n("c1"));
    // c1: too little cpu for p01, too little memory for p02.
    let nodes = vec![s.node("a2", 2), s.node("b3", 3), s.lab.node("c1", "1200m", "1Gi")];
    let existing = vec![
        bound("v-low", &a, Some(LOWEST), 2000),
        bound("keep-high", &s.n("b3"), Some(HIGH), 3000),
    ];
    let batch = vec![
        cpu_pod("p01-preemptor", 1500).priority_class(MID),
        cpu_pod("p02-next", 1000)
            .memory("2Gi")
            .host_port(8080)
            .priority_class(LOW),
        // 600m: never room for it on a2 next to p01's nomination, victim gone or not.
        cpu_pod("p03-port", 600)
            .memory("100Mi")
            .host_port(8080)
            .spec("priorityClassName", json!(rank_class(1))),
    ];
    let outcome = s.run(nodes, existing, batch).await?;
    ensure!(
        outcome.node_of(s.ns(), "p01-preemptor") == Some(a.as_str())
            && outcome.node_of(s.ns(), "p03-port") == Some(c.as_str())
            && outcome.victims.keys().eq([format!("{}/v-low", s.ns())].iter())
            && outcome
                .message_of(s.ns(), "p02-next")
                .contains("didn't have free ports"),
        "sim-async: p01 on {a}, p03 on {c}, p02 retried after the deletion: {outcome:?}"
    );
    s.finish().await
}

// ---------------------------------------------------------------------------------------------
// Rollouts from a file

/// What one side says about one workload's pods: how many on each node, and the messages of
/// those left pending (sorted).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Rollout {
    per_node: BTreeMap<String, usize>,
    pending: Vec<String>,
}

impl Rollout {
    fn add(&mut self, placement: &Placement) {
        match &placement.node {
            Some(node) => *self.per_node.entry(node.clone()).or_insert(0) += 1,
            None => self.pending.push(placement.message.clone().unwrap_or_default()),
        }
    }

    fn pods(&self) -> usize {
        self.per_node.values().sum::<usize>() + self.pending.len()
    }
}

/// Rollouts by workload (`deployment/web`).
type Rollouts = BTreeMap<String, Rollout>;

/// The completions of the rollout scenarios' Jobs: above any parallelism they ask, so that the
/// parallelism is the number of pods.
const JOB_COMPLETIONS: i32 = 12;

/// A workload's manifest, as the file holds it and as it is created: pods labelled `app: NAME`
/// requesting `millis` of cpu and 512Mi, of priority `sim-rank-RANK` (distinct ranks order the
/// workloads in kube-scheduler's queue; the replicas of one are alike), deleted with grace 0.
fn workload_manifest(ns: &str, kind: &str, name: &str, count: i32, rank: i32, millis: u32) -> Value {
    let template = |restart: &str| {
        json!({
            "metadata": {"labels": {"app": name}},
            "spec": {
                "priorityClassName": rank_class(rank),
                "terminationGracePeriodSeconds": 0,
                "restartPolicy": restart,
                "containers": [{"name": "c", "image": common::PAUSE_IMAGE,
                                "resources": {"requests": {"cpu": format!("{millis}m"), "memory": "512Mi"}}}],
            },
        })
    };
    match kind {
        "Job" => json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "parallelism": count,
                "completions": JOB_COMPLETIONS,
                "backoffLimit": 0,
                "template": template("Never"),
            },
        }),
        "StatefulSet" => json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "replicas": count,
                "serviceName": name,
                "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": {"app": name}},
                "template": template("Always"),
            },
        }),
        _ => json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "replicas": count,
                "selector": {"matchLabels": {"app": name}},
                "template": template("Always"),
            },
        }),
    }
}

/// `manifests` as a `kind: List` in a temporary file.
fn manifest_file(manifests: &[Value]) -> Result<tempfile::NamedTempFile> {
    let file = tempfile::Builder::new().suffix(".json").tempfile()?;
    serde_json::to_writer_pretty(
        file.as_file(),
        &json!({"apiVersion": "v1", "kind": "List", "items": manifests}),
    )?;
    Ok(file)
}

/// The pods of `simulate -f`'s document by workload. Every pod must be of one of `workloads`
/// (no other pod is pending) and come from the file.
fn predicted_rollouts(simulation: &Simulation, workloads: &[&str]) -> Result<Rollouts> {
    let mut rollouts: Rollouts = workloads
        .iter()
        .map(|w| ((*w).to_owned(), Rollout::default()))
        .collect();
    for entry in simulation.json["pods"].as_array().context("no pods[]")? {
        let workload = entry["workload"].as_str().unwrap_or_default();
        let name = entry["pod"].as_str().unwrap_or_default();
        let rollout = rollouts
            .get_mut(workload)
            .with_context(|| format!("{name}: a pod of {workload:?}, none of {workloads:?}: {entry}"))?;
        ensure!(
            entry["origin"]
                .as_str()
                .is_some_and(|o| o.eq_ignore_ascii_case("input")),
            "{name} does not come from the file: {entry}"
        );
        let placement = simulation
            .pods
            .get(name)
            .with_context(|| format!("{name}: no placement (preempted?): {entry}"))?;
        rollout.add(placement);
    }
    Ok(rollouts)
}

/// kube-scheduler's outcome by workload: each pod's is `KIND/APP` of its `app` label (`kinds`
/// maps the app to its workload).
async fn real_rollouts(s: &Scenario, outcome: &Outcome, kinds: &BTreeMap<&str, &str>) -> Result<Rollouts> {
    let mut rollouts: Rollouts = kinds
        .values()
        .map(|w| ((*w).to_owned(), Rollout::default()))
        .collect();
    let live = s.pods().list(&ListParams::default()).await?.items;
    for (name, placement) in &outcome.pods {
        let pod = live
            .iter()
            .find(|p| key(p) == *name)
            .with_context(|| format!("{name} is gone"))?;
        let app = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app"))
            .map(String::as_str)
            .unwrap_or_default();
        let workload = kinds
            .get(app)
            .with_context(|| format!("{name}: app {app:?} is none of {kinds:?}"))?;
        rollouts.get_mut(*workload).context("workload")?.add(placement);
    }
    Ok(rollouts)
}

/// `simulate -f FILE` (with `extra` arguments), before the workloads exist, by workload.
async fn predict(
    s: &Scenario,
    file: &Path,
    extra: &[&str],
    workloads: &[&str],
) -> Result<(Rollouts, Simulation)> {
    let path = file.display().to_string();
    let mut args = vec!["-f", path.as_str()];
    args.extend_from_slice(extra);
    let simulation = s.simulate(&args).await?;
    ensure!(
        simulation.victims.is_empty(),
        "{}: simulate -f predicted victims: {:?}",
        s.id,
        simulation.victims
    );
    Ok((predicted_rollouts(&simulation, workloads)?, simulation))
}

/// The rollout procedure: `manifests(N)` are the workloads with N replicas (or parallelism).
/// Predict with `simulate -f FILE --replicas COUNT`, FILE holding `manifests(in_file)` (and
/// check that without `--replicas` the file's count is used); create `manifests(COUNT)`, wait
/// for their pods, run kube-scheduler, check the prediction, and that of a plain `simulate` of
/// the created pods, by workload. `kinds` maps each workload's app label to its `kind/name`.
async fn rollout(
    s: &Scenario,
    manifests: impl Fn(i32) -> Vec<Value>,
    in_file: i32,
    count: i32,
    kinds: &BTreeMap<&str, &str>,
) -> Result<Outcome> {
    let workloads: Vec<&str> = kinds.values().copied().collect();
    let file = manifest_file(&manifests(in_file))?;
    // The file's own counts first: --replicas is what changes them.
    let (as_written, _) = predict(s, file.path(), &[], &workloads).await?;
    let replicas = count.to_string();
    let (predicted, prediction) = predict(s, file.path(), &["--replicas", &replicas], &workloads).await?;
    let (in_file, count) = (usize::try_from(in_file)?, usize::try_from(count)?);
    ensure!(
        in_file != count
            && predicted.values().all(|r| r.pods() == count)
            && as_written.values().all(|r| r.pods() == in_file),
        "{}: each workload makes {in_file} pods as written, {count} with --replicas {count}: \
         with it {predicted:?}, without {as_written:?}",
        s.id
    );

    for manifest in &manifests(i32::try_from(count)?) {
        match manifest["kind"].as_str() {
            Some("Job") => {
                s.lab.create_namespaced::<Job>(manifest.clone()).await?;
            }
            Some("StatefulSet") => {
                s.lab.create_namespaced::<StatefulSet>(manifest.clone()).await?;
            }
            _ => {
                s.lab.create_namespaced::<Deployment>(manifest.clone()).await?;
            }
        }
    }
    let pending = wait_pending(s, count * workloads.len()).await?;
    let bound = s.bound_pods().await?;
    let (objects, warnings) = load_from_api(&s.lab.client, &ApiLoadOptions::default()).await?;
    ensure!(warnings.is_empty(), "load_from_api warned: {warnings:?}");
    let simulation = s.simulate(&[]).await?;
    let outcome = s.run_kube_scheduler(&pending, &bound).await?;
    s.check_no_ties(&objects, &outcome)?;

    // Replicas are alike and of equal priority: kube-scheduler takes them in an order of its
    // own, so the pods compare by workload (per node, and the pending ones' messages), not by
    // name.
    let real = real_rollouts(s, &outcome, kinds).await?;
    let live = s.pods().list(&ListParams::default()).await?.items;
    let mut plain = Rollouts::new();
    for (name, placement) in &simulation.pods {
        let app = live
            .iter()
            .find(|p| key(p) == *name)
            .and_then(|p| p.metadata.labels.as_ref()?.get("app").cloned())
            .unwrap_or_default();
        let workload = kinds.get(app.as_str()).copied().unwrap_or("?");
        plain.entry(workload.to_owned()).or_default().add(placement);
    }
    eprintln!(
        "[simulate] {}: {} pods, {} placed, {} pending; kube-scheduler settled in {:.1} s, scenario {:.1} s\n  \
         kube-scheduler:                     {real:?}\n  simulate -f --replicas {count}:     {predicted:?}\n  \
         plain simulate of the created pods: {plain:?}",
        s.id,
        outcome.pods.len(),
        outcome.placed(),
        outcome.pods.len() - outcome.placed(),
        outcome.settled_in.as_secs_f64(),
        s.started.elapsed().as_secs_f64()
    );
    ensure!(
        real == predicted,
        "{}: `simulate -f FILE --replicas {count}` (before the workloads existed) disagrees with \
         kube-scheduler on the pods the controllers created:\n  kube-scheduler: {real:?}\n  \
         simulate -f:    {predicted:?}\nprediction: {:#}\nkube-scheduler's events in order: {}",
        s.id,
        prediction.json["pods"],
        s.attempts().await.unwrap_or_default().join(", ")
    );
    ensure!(
        real == plain,
        "{}: a plain `simulate` of the pods the controllers created disagrees with kube-scheduler:\n  \
         kube-scheduler: {real:?}\n  simulate:       {plain:?}\nsimulate's pods: {:#}",
        s.id,
        simulation.json["pods"]
    );
    ensure!(
        outcome.victims.is_empty(),
        "{}: kube-scheduler preempted {:?}",
        s.id,
        outcome.victims
    );
    Ok(outcome)
}

/// `simulate -f FILE` with two Deployments, before they exist: `web` (higher rank, 1 cpu)
/// spreads by score over three nodes of distinct sizes and loads, `big` (2.5 cpu) takes what room
/// is left and partly stays pending. The file says 3 replicas, `--replicas 4` overrides both.
/// Once the Deployments are created for real (4 replicas each) and kube-scheduler has placed
/// what the ReplicaSets created, the pods per workload and node, and the pending replicas'
/// messages, must be those predicted.
#[tokio::test]
async fn s24_rollout_from_a_file() -> Result<()> {
    let s = Scenario::begin("sim-rollout").await?;
    let result = rollout_deployments(&s).await;
    delete_workloads(&s.lab.client).await?;
    result?;
    s.finish().await
}

async fn rollout_deployments(s: &Scenario) -> Result<()> {
    let (b, c) = (s.n("b6"), s.n("c9"));
    s.lab
        .create_nodes(vec![s.node("a4", 4), s.node("b6", 6), s.node("c9", 9)])
        .await?;
    // Above the ranks: nothing to preempt.
    s.lab
        .create_pods(vec![
            bound("load-b", &b, Some(LOWEST), 1000),
            bound("load-c", &c, Some(LOWEST), 2500),
        ])
        .await?;
    let ns = s.ns().to_owned();
    let manifests = |count| {
        vec![
            workload_manifest(&ns, "Deployment", "web", count, 2, 1000),
            workload_manifest(&ns, "Deployment", "big", count, 1, 2500),
        ]
    };
    let kinds = BTreeMap::from([("web", "deployment/web"), ("big", "deployment/big")]);
    let outcome = rollout(s, manifests, 3, 4, &kinds).await?;
    ensure!(
        !outcome.pending().is_empty(),
        "sim-rollout: some big replicas stay pending: {outcome:?}"
    );
    Ok(())
}

/// `simulate -f FILE` with a Job (parallelism 2 in the file, `--replicas 9` overrides it,
/// completions above it): the pods the job controller creates (its labels, its tracking
/// finalizer) fill three nodes of distinct sizes and loads, and the ninth stays pending with the
/// predicted message.
#[tokio::test]
async fn s25_job_from_a_file() -> Result<()> {
    let s = Scenario::begin("sim-job").await?;
    let result = rollout_job(&s).await;
    delete_workloads(&s.lab.client).await?;
    result?;
    s.finish().await
}

async fn rollout_job(s: &Scenario) -> Result<()> {
    let (b, c) = (s.n("b5"), s.n("c8"));
    s.lab
        .create_nodes(vec![s.node("a3", 3), s.node("b5", 5), s.node("c8", 8)])
        .await?;
    s.lab
        .create_pods(vec![
            bound("load-b", &b, Some(LOWEST), 1700),
            bound("load-c", &c, Some(LOWEST), 2900),
        ])
        .await?;
    let ns = s.ns().to_owned();
    let manifest = |count| vec![workload_manifest(&ns, "Job", "crunch", count, 1, 1200)];
    let kinds = BTreeMap::from([("crunch", "job/crunch")]);
    let outcome = rollout(s, manifest, 2, 9, &kinds).await?;
    ensure!(
        outcome.pending().len() == 1,
        "sim-job: the ninth pod stays pending: {outcome:?}"
    );
    Ok(())
}

/// A rollout where the ReplicaSet matters: one node much larger and emptier than the others, so
/// that by resources alone every replica would go there. kube-scheduler spreads the replicas of a
/// ReplicaSet over the hostnames (PodTopologySpread's system default constraints, which select a
/// pod by its ReplicaSet), so `simulate -f` must account for the ReplicaSet the Deployment will
/// create, although it does not exist yet.
#[tokio::test]
async fn s26_rollout_spreads_over_hostnames() -> Result<()> {
    let s = Scenario::begin("sim-rs-spread").await?;
    let result = rollout_spread(&s).await;
    delete_workloads(&s.lab.client).await?;
    result?;
    s.finish().await
}

async fn rollout_spread(s: &Scenario) -> Result<()> {
    let b = s.n("b6");
    s.lab
        .create_nodes(vec![s.node("a4", 4), s.node("b6", 6), s.node("c32", 32)])
        .await?;
    s.lab
        .create_pods(vec![bound("load-b", &b, Some(LOWEST), 1000)])
        .await?;
    let ns = s.ns().to_owned();
    let manifests = |count| vec![workload_manifest(&ns, "Deployment", "web", count, 1, 1000)];
    let kinds = BTreeMap::from([("web", "deployment/web")]);
    let outcome = rollout(s, manifests, 3, 4, &kinds).await?;
    ensure!(
        outcome.per_node().len() > 1,
        "sim-rs-spread: the replicas spread over several nodes: {outcome:?}"
    );
    Ok(())
}

/// As s26 with a StatefulSet (podManagementPolicy Parallel, no volumeClaimTemplates): its pods
/// are spread by the StatefulSet's selector (the system default constraints), which `simulate -f`
/// must account for before the set exists.
#[tokio::test]
async fn s27_statefulset_spreads_over_hostnames() -> Result<()> {
    let s = Scenario::begin("sim-sts-spread").await?;
    let result = rollout_stateful_set(&s).await;
    delete_workloads(&s.lab.client).await?;
    result?;
    s.finish().await
}

async fn rollout_stateful_set(s: &Scenario) -> Result<()> {
    let b = s.n("b6");
    s.lab
        .create_nodes(vec![s.node("a4", 4), s.node("b6", 6), s.node("c32", 32)])
        .await?;
    s.lab
        .create_pods(vec![bound("load-b", &b, Some(LOWEST), 1000)])
        .await?;
    let ns = s.ns().to_owned();
    let manifests = |count| vec![workload_manifest(&ns, "StatefulSet", "db", count, 1, 1000)];
    let kinds = BTreeMap::from([("db", "statefulset/db")]);
    let outcome = rollout(s, manifests, 3, 4, &kinds).await?;
    ensure!(
        outcome.per_node().len() > 1,
        "sim-sts-spread: the replicas spread over several nodes: {outcome:?}"
    );
    Ok(())
}
