//! The differential lab: one scenario at a time on the shared control plane, with the real
//! kube-scheduler as the oracle for sched-core.
//!
//! A scenario starts from a clean slate (no node, no pod anywhere), creates its nodes, its bound
//! pods (`spec.nodeName` set, so kube-scheduler never sees them as pending) and other objects,
//! loads a snapshot through sched-core's `load_from_api` (what `kubectl sched explain` does),
//! and only then creates the pending pod. sched-core evaluates the pod the API server stored
//! (admission defaults included) against that snapshot; kube-scheduler evaluates it against its
//! informer cache, which holds the same objects.
//!
//! kube-scheduler's answer is its FailedScheduling event: its events recorder keys events without
//! the note, so later attempts only bump the first event's series and the note stays the message
//! of the first attempt, the one computed on the state the snapshot holds.

#![allow(dead_code)] // Each test binary uses its own subset of the lab.

pub mod dra;
pub mod scenarios;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject as _;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use e2e::ControlPlane;
use e2e::fixtures::{ready_node, wait_for};
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolumeClaim, Pod, Taint};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client, Resource};
use sched_core::Snapshot;
use sched_core::engine::{Engine, ScheduleOptions, schedule};
use sched_core::explain::{Explanation, Outcome};
use sched_core::features::{FeatureGates, KubeVersion};
use sched_core::snapshot::kube::{ApiLoadOptions, load_from_api};
use serde_json::{Value, json};
use tokio::sync::{Mutex, MutexGuard};

/// The CSI driver of the volume-limit scenarios (no driver runs: its objects are made by hand;
/// kube-scheduler's NodeVolumeLimits reads only the CSINode and the volumes).
pub const CSI_DRIVER: &str = "csi.example.com";

/// Value of the test label on every node the lab creates.
pub const TEST_NAME: &str = "differential";
/// How long kube-scheduler gets to bind the pod or report FailedScheduling.
pub const VERDICT_TIMEOUT: Duration = Duration::from_secs(20);
/// Bounds every clean-up and setup wait.
const SETUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Informers deliver within milliseconds; this margin lets kube-scheduler's cache catch up with
/// what the lab just created or deleted before the pending pod arrives.
const SETTLE: Duration = Duration::from_millis(600);
/// How long a pod kube-scheduler must stay silent about is watched.
pub const SILENCE: Duration = Duration::from_secs(4);
const POLL: Duration = Duration::from_millis(100);
pub const PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.10";

/// Priority classes the scenarios share (created once, kept).
pub const LOW: (&str, i32) = ("e2e-low", 100);
pub const HIGH: (&str, i32) = ("e2e-high", 1000);
/// As [`HIGH`], with `preemptionPolicy: Never` (admission copies it into the pod).
pub const HIGH_NEVER: (&str, i32) = ("e2e-high-never", 1000);

/// Scenarios share the cluster-wide state (every node, every pod): one at a time.
static LAB: Mutex<()> = Mutex::const_new(());

/// A node to create, built from the harness's Ready node.
#[derive(Clone, Debug)]
pub struct NodeBuilder(Node);

impl NodeBuilder {
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_owned(), value.to_owned());
        self
    }

    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        let spec = self.0.spec.get_or_insert_with(Default::default);
        spec.taints.get_or_insert_with(Vec::new).push(Taint {
            key: key.to_owned(),
            value: (!value.is_empty()).then(|| value.to_owned()),
            effect: effect.to_owned(),
            time_added: None,
        });
        self
    }

    /// `kubectl cordon`.
    pub fn cordoned(mut self) -> Self {
        self.0.spec.get_or_insert_with(Default::default).unschedulable = Some(true);
        self
    }

    /// Adds (or overrides) a resource in both capacity and allocatable.
    pub fn resource(mut self, name: &str, amount: &str) -> Self {
        if let Some(status) = self.0.status.as_mut() {
            for list in [status.capacity.as_mut(), status.allocatable.as_mut()]
                .into_iter()
                .flatten()
            {
                list.insert(name.to_owned(), Quantity(amount.to_owned()));
            }
        }
        self
    }

    /// An image the (absent) kubelet would report as present on the node.
    pub fn image(mut self, name: &str, size_bytes: i64) -> Self {
        if let Some(status) = self.0.status.as_mut() {
            status
                .images
                .get_or_insert_with(Vec::new)
                .push(k8s_openapi::api::core::v1::ContainerImage {
                    names: Some(vec![name.to_owned()]),
                    size_bytes: Some(size_bytes),
                });
        }
        self
    }

    pub fn name(&self) -> &str {
        self.0.metadata.name.as_deref().unwrap_or_default()
    }
}

/// A pod to create, as the JSON a user would apply.
#[derive(Clone, Debug)]
pub struct PodBuilder {
    value: Value,
    namespace: Option<String>,
}

/// A pod with one pause container and no requests.
pub fn pod(name: &str) -> PodBuilder {
    PodBuilder {
        value: json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {}},
            "spec": {
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "c", "image": PAUSE_IMAGE, "resources": {}}],
            },
        }),
        namespace: None,
    }
}

impl PodBuilder {
    fn container(&mut self) -> &mut Value {
        &mut self.value["spec"]["containers"][0]
    }

    /// A request on the first container.
    pub fn request(mut self, resource: &str, amount: &str) -> Self {
        self.container()["resources"]["requests"][resource] = json!(amount);
        self
    }

    pub fn cpu(self, amount: &str) -> Self {
        self.request("cpu", amount)
    }

    pub fn memory(self, amount: &str) -> Self {
        self.request("memory", amount)
    }

    /// A limit on the first container (extended resources are requested through limits).
    pub fn limit(mut self, resource: &str, amount: &str) -> Self {
        self.container()["resources"]["limits"][resource] = json!(amount);
        self
    }

    /// Sets a field of the first container.
    pub fn container_field(mut self, key: &str, value: Value) -> Self {
        self.container()[key] = value;
        self
    }

    /// Already bound: `spec.nodeName` set at creation, so kube-scheduler never schedules it.
    pub fn on(self, node: &str) -> Self {
        self.spec("nodeName", json!(node))
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.value["metadata"]["labels"][key] = json!(value);
        self
    }

    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.to_owned());
        self
    }

    /// Sets `spec.<key>`.
    pub fn spec(mut self, key: &str, value: Value) -> Self {
        self.value["spec"][key] = value;
        self
    }

    pub fn priority_class(self, (name, _): (&str, i32)) -> Self {
        self.spec("priorityClassName", json!(name))
    }

    pub fn toleration(mut self, toleration: Value) -> Self {
        let spec = &mut self.value["spec"];
        match spec["tolerations"].as_array_mut() {
            Some(list) => list.push(toleration),
            None => spec["tolerations"] = json!([toleration]),
        }
        self
    }

    pub fn host_port(mut self, port: u16) -> Self {
        self.container()["ports"] = json!([{"containerPort": port, "hostPort": port, "protocol": "TCP"}]);
        self
    }

    /// Mounts the PersistentVolumeClaim `claim` as volume `data`.
    pub fn claim(mut self, claim: &str) -> Self {
        self.value["spec"]["volumes"] =
            json!([{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]);
        self.container()["volumeMounts"] = json!([{"name": "data", "mountPath": "/data"}]);
        self
    }

    pub fn gate(self, name: &str) -> Self {
        self.spec("schedulingGates", json!([{"name": name}]))
    }

    pub fn name(&self) -> &str {
        self.value["metadata"]["name"].as_str().unwrap_or_default()
    }

    pub fn build(&self) -> Result<Pod> {
        serde_json::from_value(self.value.clone()).with_context(|| format!("pod JSON {}", self.value))
    }
}

/// What kube-scheduler did with the pending pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A FailedScheduling event: its note, the first attempt's message.
    Failed(String),
    /// Bound to this node.
    Bound(String),
    /// Neither within the watch window; the PodScheduled condition's reason and message, if any.
    Silent {
        reason: Option<String>,
        message: Option<String>,
    },
}

/// One pending pod seen by both schedulers.
#[derive(Debug)]
pub struct Trial {
    pub scenario: String,
    pub pod: Pod,
    pub kube: Verdict,
    pub ours: Explanation,
    pub elapsed: Duration,
}

impl Trial {
    /// The differential rule: kube-scheduler's FailedScheduling message equals sched-core's
    /// `message` byte for byte; a node kube-scheduler bound to is one of sched-core's `selected`.
    pub fn agrees(&self) -> Result<()> {
        match &self.kube {
            Verdict::Failed(message) => {
                ensure!(
                    self.ours.outcome == Outcome::Unschedulable && &self.ours.message == message,
                    "MISMATCH in {}:\n  kube-scheduler: {message:?}\n  sched-core:     {:?} ({:?})",
                    self.scenario,
                    self.ours.message,
                    self.ours.outcome
                );
            }
            Verdict::Bound(node) => {
                ensure!(
                    self.ours.outcome == Outcome::Scheduled && self.ours.selected.contains(node),
                    "MISMATCH in {}: kube-scheduler bound the pod to {node}; sched-core: {:?}, \
                     selected {:?}, message {:?}",
                    self.scenario,
                    self.ours.outcome,
                    self.ours.selected,
                    self.ours.message
                );
            }
            Verdict::Silent { .. } => bail!(
                "{}: kube-scheduler neither bound nor rejected the pod within {VERDICT_TIMEOUT:?}",
                self.scenario
            ),
        }
        Ok(())
    }

    /// The scenario really is about `reasons`: kube-scheduler rejected the pod with a message
    /// containing each of them, and sched-core agrees.
    pub fn expect_failed(&self, reasons: &[&str]) -> Result<()> {
        self.report();
        let Verdict::Failed(message) = &self.kube else {
            bail!(
                "{}: expected FailedScheduling, kube-scheduler: {:?}",
                self.scenario,
                self.kube
            );
        };
        for reason in reasons {
            ensure!(
                message.contains(reason),
                "{}: kube-scheduler's message {message:?} lacks {reason:?} (the scenario does not \
                 exercise what it claims)",
                self.scenario
            );
        }
        self.agrees()
    }

    /// kube-scheduler bound the pod (to `node` when given) and sched-core selected that node.
    pub fn expect_bound(&self, node: Option<&str>) -> Result<()> {
        self.report();
        self.bound_to(node)?;
        self.agrees()
    }

    /// The node kube-scheduler bound the pod to, which must be `node` when given.
    pub fn bound_to(&self, node: Option<&str>) -> Result<&str> {
        let Verdict::Bound(bound) = &self.kube else {
            bail!(
                "{}: expected a binding, kube-scheduler: {:?}",
                self.scenario,
                self.kube
            );
        };
        if let Some(node) = node {
            ensure!(
                bound == node,
                "{}: kube-scheduler bound to {bound}, the scenario expects {node}",
                self.scenario
            );
        }
        Ok(bound)
    }

    pub fn report(&self) {
        let ok = match (&self.kube, self.agrees()) {
            (Verdict::Silent { .. }, _) => "(kube-scheduler silent)",
            (_, Ok(())) => "AGREE",
            (_, Err(_)) => "DISAGREE",
        };
        eprintln!(
            "[differential] {} {ok} in {:.1} s\n  kube-scheduler: {:?}\n  sched-core:     {:?} {:?} selected={:?}",
            self.scenario,
            self.elapsed.as_secs_f64(),
            self.kube,
            self.ours.outcome,
            self.ours.message,
            self.ours.selected
        );
    }
}

/// One scenario's hold on the shared control plane.
pub struct Lab {
    pub cp: &'static ControlPlane,
    pub client: Client,
    /// sched-core with the control plane's release: its default gates and code changes.
    pub engine: Engine,
    /// The scenario's namespace (pending pods and, by default, bound pods go there).
    pub ns: String,
    id: String,
    started: Instant,
    _turn: MutexGuard<'static, ()>,
}

fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code == 404)
}

impl Lab {
    /// Waits for its turn, then wipes every node and pod and creates a namespace for `id`.
    pub async fn begin(id: &str) -> Result<Self> {
        Self::begin_on(id, ControlPlane::shared).await
    }

    /// As [`Self::begin`], on the control plane `control_plane` yields (one with other
    /// components than the shared one), fetched once the turn is taken.
    pub async fn begin_on<F, Fut>(id: &str, control_plane: F) -> Result<Self>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<&'static ControlPlane, e2e::Error>>,
    {
        let turn = LAB.lock().await;
        let started = Instant::now();
        let cp = control_plane().await?;
        let client = cp.client()?;
        let engine = release_engine(cp)?;
        clean_slate(&client).await?;
        dra::clean_dra(&client).await?;
        ensure_priority_classes(&client).await?;
        let ns = cp.new_namespace(id).await?;
        Ok(Lab {
            cp,
            client,
            engine,
            ns,
            id: id.to_owned(),
            started,
            _turn: turn,
        })
    }

    /// The code changes of the control plane's release, for scenario checks whose words differ
    /// by release (each names what it shows on both sides of the change).
    pub fn changes(&self) -> sched_core::features::ReleaseChanges {
        self.engine.features().changes
    }

    /// kube-scheduler preempted `victims` pods on `node` for the trial's pod, and sched-core agrees
    /// on the message. v1.37 says so in the message (`preemption: found a potential placement for
    /// pod on node N, preempting K victims`); earlier releases write no preemption part for a
    /// successful preemption, so there the message must end at the filter reasons and the pod must
    /// be nominated to `node`.
    pub async fn expect_preempted(&self, trial: &Trial, node: &str, victims: usize) -> Result<()> {
        if self.changes().preemption_reports_placement {
            return trial.expect_failed(&[&format!(
                "preemption: found a potential placement for pod on node {node}, preempting {victims} victims"
            )]);
        }
        trial.expect_failed(&[])?;
        let Verdict::Failed(message) = &trial.kube else {
            unreachable!("expect_failed checked the verdict")
        };
        ensure!(
            !message.contains("preemption: "),
            "{}: a successful preemption writes no preemption part on this release: {message:?}",
            self.id
        );
        let name = trial.pod.metadata.name.clone().unwrap_or_default();
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        // Nominated to `node`, or already bound there: once the victims are gone the pod may bind
        // before a poll sees the nomination, and from v1.35 binding clears it
        // (ClearingNominatedNodeNameAfterBinding).
        wait_for(
            &format!("{name} to be nominated to (or bound on) {node}"),
            SETUP_TIMEOUT,
            || async {
                let live = pods.get(&name).await?;
                let bound = live.spec.as_ref().and_then(|s| s.node_name.clone());
                let nominated = live.status.and_then(|s| s.nominated_node_name);
                Ok((nominated.as_deref() == Some(node) || bound.as_deref() == Some(node)).then_some(()))
            },
        )
        .await?;
        Ok(())
    }

    /// The full name of this scenario's node `short` (names are unique per scenario, so nothing
    /// kube-scheduler still remembers of an earlier scenario can be mistaken for it).
    pub fn n(&self, short: &str) -> String {
        format!("{}-{short}", self.id)
    }

    /// A Ready node `short` with this capacity and 110 pods.
    pub fn node(&self, short: &str, cpu: &str, memory: &str) -> NodeBuilder {
        NodeBuilder(ready_node(&self.n(short), TEST_NAME, cpu, memory, "110"))
    }

    pub async fn create_nodes(&self, nodes: impl IntoIterator<Item = NodeBuilder>) -> Result<()> {
        let api: Api<Node> = Api::all(self.client.clone());
        for node in nodes {
            api.create(&PostParams::default(), &node.0)
                .await
                .with_context(|| format!("creating node {}", node.name()))?;
        }
        Ok(())
    }

    /// Creates bound (or otherwise pre-existing) pods.
    pub async fn create_pods(&self, pods: impl IntoIterator<Item = PodBuilder>) -> Result<()> {
        for pod in pods {
            self.create_pod(&pod).await?;
        }
        Ok(())
    }

    /// Creates one pod and returns it as the API server stored it (admission defaults included).
    pub async fn create_pod(&self, pod: &PodBuilder) -> Result<Pod> {
        let ns = pod.namespace.as_deref().unwrap_or(&self.ns);
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        api.create(&PostParams::default(), &pod.build()?)
            .await
            .with_context(|| format!("creating pod {ns}/{}", pod.name()))
    }

    /// Creates a namespace `<id>-<suffix>` with these labels and returns its name.
    pub async fn create_namespace(&self, suffix: &str, labels: Value) -> Result<String> {
        let name = format!(
            "{}-{suffix}-{}",
            self.id,
            &self.ns[self.ns.len().saturating_sub(5)..]
        );
        let namespace: Namespace = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
        }))?;
        Api::<Namespace>::all(self.client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .with_context(|| format!("creating namespace {name}"))?;
        Ok(name)
    }

    /// Creates a namespaced object (in the scenario's namespace) from JSON.
    pub async fn create_namespaced<K>(&self, value: Value) -> Result<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + std::fmt::Debug
            + serde::Serialize
            + serde::de::DeserializeOwned,
        K::DynamicType: Default,
    {
        let object: K = serde_json::from_value(value.clone()).with_context(|| format!("{value}"))?;
        Api::<K>::namespaced(self.client.clone(), &self.ns)
            .create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("creating {value}"))
    }

    /// Creates a cluster-scoped object from JSON.
    pub async fn create_cluster<K>(&self, value: Value) -> Result<K>
    where
        K: Resource<Scope = k8s_openapi::ClusterResourceScope>
            + Clone
            + std::fmt::Debug
            + serde::Serialize
            + serde::de::DeserializeOwned,
        K::DynamicType: Default,
    {
        let object: K = serde_json::from_value(value.clone()).with_context(|| format!("{value}"))?;
        Api::<K>::all(self.client.clone())
            .create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("creating {value}"))
    }

    /// A CSINode for `node` allowing `count` volumes of [`CSI_DRIVER`], and for each claim a CSI
    /// volume `<ns>-<claim>` pre-bound to it both ways (so the PV binder binds them at once), bound.
    pub async fn create_csi_volumes(&self, node: &str, count: i32, claims: &[&str]) -> Result<()> {
        self.create_cluster::<k8s_openapi::api::storage::v1::CSINode>(json!({
            "metadata": {"name": node},
            "spec": {"drivers": [{"name": CSI_DRIVER, "nodeID": node, "allocatable": {"count": count}}]},
        }))
        .await?;
        for claim in claims {
            let pv_name = format!("{}-{claim}", self.ns);
            self.create_cluster::<k8s_openapi::api::core::v1::PersistentVolume>(json!({
                "metadata": {"name": pv_name},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "",
                    "persistentVolumeReclaimPolicy": "Retain",
                    "claimRef": {"namespace": self.ns, "name": claim},
                    "csi": {"driver": CSI_DRIVER, "volumeHandle": pv_name},
                },
            }))
            .await?;
            self.create_namespaced::<PersistentVolumeClaim>(json!({
                "metadata": {"name": claim},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "",
                    "volumeName": pv_name,
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }))
            .await?;
            self.wait_claim_bound(claim).await?;
        }
        Ok(())
    }

    /// Waits for the PV binder to bind the claim `name` of the scenario's namespace.
    pub async fn wait_claim_bound(&self, name: &str) -> Result<()> {
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &self.ns);
        wait_for(&format!("claim {name} to be bound"), SETUP_TIMEOUT, || async {
            let claim = api.get(name).await?;
            let phase = claim.status.and_then(|s| s.phase);
            Ok((phase.as_deref() == Some("Bound")).then_some(()))
        })
        .await
        .with_context(|| self.cp.log_tail("kube-controller-manager", 20))?;
        Ok(())
    }

    /// Snapshot, create `pending`, evaluate it with sched-core, and wait for kube-scheduler.
    pub async fn trial(&self, pending: PodBuilder) -> Result<Trial> {
        self.trial_with(pending, VERDICT_TIMEOUT).await
    }

    /// As [`Self::trial`], waiting at most `timeout` for kube-scheduler (a pod it must ignore
    /// is watched for [`SILENCE`] instead).
    pub async fn trial_with(&self, pending: PodBuilder, timeout: Duration) -> Result<Trial> {
        tokio::time::sleep(SETTLE).await;
        let snapshot = self.snapshot().await?;
        let created = self.create_pod(&pending).await?;
        let ours = evaluate(snapshot, &created)?;
        let kube = self.verdict(&created, timeout).await?;
        Ok(Trial {
            scenario: self.id.clone(),
            pod: created,
            kube,
            ours,
            elapsed: self.started.elapsed(),
        })
    }

    /// A pod kube-scheduler never looks at (gated, or with `nodeName` set): watch it for a while.
    pub async fn trial_silent(&self, pending: PodBuilder) -> Result<Trial> {
        self.trial_with(pending, SILENCE).await
    }

    /// What `kubectl sched explain` sees: the whole cluster through `load_from_api`.
    pub async fn snapshot(&self) -> Result<Snapshot> {
        let (objects, warnings) = load_from_api(&self.client, &ApiLoadOptions::default()).await?;
        ensure!(warnings.is_empty(), "load_from_api warned: {warnings:?}");
        Ok(self.engine.snapshot(objects))
    }

    /// What kube-scheduler does with `pod` within `timeout`: its first FailedScheduling note, its
    /// binding, or silence.
    pub async fn verdict(&self, pod: &Pod, timeout: Duration) -> Result<Verdict> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        let events: Api<Event> = Api::namespaced(self.client.clone(), &self.ns);
        let deadline = Instant::now() + timeout;
        let original_node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        loop {
            let mut failed: Vec<Event> = events
                .list(&ListParams::default())
                .await?
                .items
                .into_iter()
                .filter(|e| {
                    e.reason.as_deref() == Some("FailedScheduling")
                        && e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(uid.as_str())
                })
                .collect();
            failed.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
            if let Some(first) = failed.into_iter().next() {
                return Ok(Verdict::Failed(first.note.unwrap_or_default()));
            }
            let live = pods.get(&name).await?;
            let node = live.spec.as_ref().and_then(|s| s.node_name.clone());
            if node.is_some() && node != original_node {
                return Ok(Verdict::Bound(node.unwrap_or_default()));
            }
            if Instant::now() >= deadline {
                let condition = live
                    .status
                    .and_then(|s| s.conditions)
                    .into_iter()
                    .flatten()
                    .find(|c| c.type_ == "PodScheduled");
                if original_node.is_none() && timeout >= VERDICT_TIMEOUT {
                    eprintln!(
                        "[differential] {}: no verdict; kube-scheduler log:\n{}",
                        self.id,
                        self.cp.log_tail("kube-scheduler", 20)
                    );
                }
                return Ok(Verdict::Silent {
                    reason: condition.as_ref().and_then(|c| c.reason.clone()),
                    message: condition.and_then(|c| c.message),
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// sched-core with the defaults of the release `cp` runs (its kube-apiserver and kube-scheduler:
/// the pinned one, or `KUBECTL_SCHED_K8S_RELEASE`'s): that release's gates, code changes and
/// default profile.
pub fn release_engine(cp: &ControlPlane) -> Result<Engine> {
    let version = KubeVersion::parse(cp.release()?)?;
    Ok(Engine::for_features(None, FeatureGates::for_version(version))?)
}

/// sched-core's answer for `pod` on `snapshot`, with the default profile of the release the
/// snapshot was built for (its gates: [`Lab::snapshot`] builds it with the control plane's).
pub fn evaluate(snapshot: Snapshot, pod: &Pod) -> Result<Explanation> {
    let engine = Engine::for_features(None, *snapshot.features())?;
    let pod_info = engine.pod_info(pod.clone());
    let fwk = engine.framework_for(pod, Arc::new(snapshot))?;
    Ok(schedule(&fwk, &pod_info, ScheduleOptions::default()))
}

/// Deletes every pod (forcefully: no kubelet will ever confirm a graceful deletion) and every
/// node, and waits until the API server lists none.
pub async fn clean_slate(client: &Client) -> Result<()> {
    let pods: Api<Pod> = Api::all(client.clone());
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    for pod in pods.list(&ListParams::default()).await?.items {
        let (Some(ns), Some(name)) = (pod.metadata.namespace, pod.metadata.name) else {
            continue;
        };
        match Api::<Pod>::namespaced(client.clone(), &ns)
            .delete(&name, &force)
            .await
        {
            Err(e) if !is_not_found(&e) => return Err(e).context(format!("deleting pod {ns}/{name}")),
            _ => {}
        }
    }
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await?;
    wait_for("every pod and node to be gone", SETUP_TIMEOUT, || async {
        let pods_left = pods.list(&ListParams::default().limit(1)).await?.items.len();
        let nodes_left = nodes.list(&ListParams::default().limit(1)).await?.items.len();
        Ok((pods_left == 0 && nodes_left == 0).then_some(()))
    })
    .await?;
    Ok(())
}

async fn ensure_priority_classes(client: &Client) -> Result<()> {
    use k8s_openapi::api::scheduling::v1::PriorityClass;
    let api: Api<PriorityClass> = Api::all(client.clone());
    for ((name, value), policy) in [
        (LOW, "PreemptLowerPriority"),
        (HIGH, "PreemptLowerPriority"),
        (HIGH_NEVER, "Never"),
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

/// `kubectl-sched ARGS...` against `cp` (its kubeconfig), as [`run_kubectl_sched`] runs it.
pub async fn run_kubectl_sched_on(cp: &ControlPlane, args: &[&str]) -> Result<std::process::Output> {
    static BINARY: tokio::sync::OnceCell<PathBuf> = tokio::sync::OnceCell::const_new();
    let binary = BINARY.get_or_try_init(kubectl_sched_binary).await?;
    let kubeconfig = cp.kubeconfig_path().display().to_string();
    let mut all = args.to_vec();
    all.extend_from_slice(&["--kubeconfig", &kubeconfig]);
    run_kubectl_sched(binary, &all).await
}

/// Every workload group of `triage -o json`'s report, with the cause it is filed under.
pub fn triage_groups(
    report: &serde_json::Value,
) -> impl Iterator<Item = (&serde_json::Value, &serde_json::Value)> {
    report["causes"].as_array().into_iter().flatten().flat_map(|c| {
        c["workloads"]
            .as_array()
            .into_iter()
            .flatten()
            .map(move |w| (c, w))
    })
}

/// A command's exit status, stdout and stderr, for a failure message.
pub fn shown(output: &std::process::Output) -> String {
    format!(
        "exit {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// `$KUBECTL_SCHED_BIN` when set. Otherwise the workspace's binary, built by the cargo that runs
/// this test (`$CARGO`; cargo releases its build lock before running tests) for this test
/// binary's profile, so the plugin under test is never a stale leftover. Missing is a failure.
pub async fn kubectl_sched_binary() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("KUBECTL_SCHED_BIN").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        ensure!(
            path.is_file(),
            "KUBECTL_SCHED_BIN={} is not a file",
            path.display()
        );
        return Ok(path);
    }
    let exe = std::env::current_exe()?;
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .context("the test binary is not in target/<profile>/deps")?;
    let binary = profile_dir.join("kubectl-sched");
    let Some(cargo) = std::env::var_os("CARGO") else {
        ensure!(
            binary.is_file(),
            "{} is missing: build it with `cargo build -p kubectl-sched` (or set KUBECTL_SCHED_BIN)",
            binary.display()
        );
        return Ok(binary);
    };
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev".to_owned(),
        Some(other) => other.to_owned(),
    };
    let build = tokio::process::Command::new(cargo)
        .args(["build", "--quiet", "-p", "kubectl-sched", "--profile", &profile])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(480), build)
        .await
        .context("cargo build -p kubectl-sched took more than 8 minutes")??;
    ensure!(
        output.status.success(),
        "cargo build -p kubectl-sched failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    ensure!(
        binary.is_file(),
        "cargo build -p kubectl-sched left no {}",
        binary.display()
    );
    Ok(binary)
}

/// etcd and kube-apiserver only (no kube-scheduler: pods stay pending as created), started once per
/// test binary.
pub async fn apiserver_only() -> Result<&'static ControlPlane, e2e::Error> {
    static CONTROL_PLANE: tokio::sync::OnceCell<ControlPlane> = tokio::sync::OnceCell::const_new();
    CONTROL_PLANE
        .get_or_try_init(|| ControlPlane::start(e2e::Options::new()))
        .await
}

/// RBAC changes reach the authorizer's cache within about a second; a test that grants a role waits
/// this long at most for it to take effect.
pub const RBAC_TIMEOUT: Duration = Duration::from_secs(15);

/// A finished command for an assertion's message: its exit status, stdout and stderr.
pub fn show(output: &std::process::Output) -> String {
    format!(
        "exit {}\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// How long one run of the plugin binary may take in [`run_kubectl_sched`].
pub const KUBECTL_SCHED_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs the plugin binary directly (no kubeconfig from the environment, stdin closed), bounded in
/// time ([`KUBECTL_SCHED_TIMEOUT`]).
#[allow(dead_code)] // not every test binary runs the plugin
pub async fn run_kubectl_sched(binary: &Path, args: &[&str]) -> Result<std::process::Output> {
    run_kubectl_sched_within(binary, args, KUBECTL_SCHED_TIMEOUT).await
}

/// [`run_kubectl_sched`] with another bound, for runs that wait on purpose (an API server that only
/// answers after its own 60 s timeout).
#[allow(dead_code)] // not every test binary runs the plugin
pub async fn run_kubectl_sched_within(
    binary: &Path,
    args: &[&str],
    limit: Duration,
) -> Result<std::process::Output> {
    tokio::time::timeout(
        limit,
        tokio::process::Command::new(binary)
            .args(args)
            .env_remove("KUBECONFIG")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .with_context(|| format!("kubectl-sched {} took more than {limit:?}", args.join(" ")))?
    .with_context(|| format!("running {}", binary.display()))
}

/// Runs kubectl-sched against the control plane in the scenario's namespace with `-o json`: the
/// document and stderr (exit 0, or triage's 3 for pods that cannot be scheduled).
pub async fn kubectl_sched_json(lab: &Lab, args: &[&str]) -> Result<(serde_json::Value, String)> {
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        tokio::process::Command::new(kubectl_sched_binary().await?)
            .args(["--kubeconfig"])
            .arg(lab.cp.kubeconfig_path())
            .args(args)
            .args(["-n", &lab.ns, "-o", "json"])
            .env_remove("KUBECONFIG")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .with_context(|| format!("kubectl-sched {args:?} took too long"))??;
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    ensure!(
        matches!(output.status.code(), Some(0 | 3)),
        "kubectl-sched {args:?}: {}\n{stderr}",
        output.status
    );
    let json = serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "kubectl-sched {args:?} -o json printed {:?}",
            String::from_utf8_lossy(&output.stdout)
        )
    })?;
    Ok((json, stderr))
}

/// A TLS client (HTTPS straight to a component, past the API server) trusting `ca_pem`, presenting `client` (certificate and key PEM) when given.
pub fn tls_connector(ca_pem: &str, client: Option<(&str, &str)>) -> Result<tokio_rustls::TlsConnector> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(rustls::pki_types::CertificateDer::from_pem_slice(
        ca_pem.as_bytes(),
    )?)?;
    let builder = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots);
    let config = match client {
        Some((cert, key)) => builder.with_client_auth_cert(
            vec![rustls::pki_types::CertificateDer::from_pem_slice(
                cert.as_bytes(),
            )?],
            rustls::pki_types::PrivateKeyDer::from_pem_slice(key.as_bytes())?,
        )?,
        None => builder.with_no_client_auth(),
    };
    Ok(tokio_rustls::TlsConnector::from(std::sync::Arc::new(config)))
}
