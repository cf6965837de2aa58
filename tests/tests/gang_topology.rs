//! Topology-aware gang scheduling against the real kube-scheduler: a control plane whose
//! components run with GenericWorkload and TopologyAwareWorkloadScheduling (alpha) on, so that
//! kube-apiserver keeps a PodGroup's `schedulingConstraints.topology` and kube-scheduler's pod
//! group cycle tries the group in one topology domain at a time (TopologyPlacementGenerator,
//! PodGroupPodsCount). Its own binary: gang.rs's control plane runs without the alpha gate, and
//! with it every gang's words change ("0/1 placements are available, …").
//!
//! Each scenario gives its nodes a topology key of its own, so that the domains kube-scheduler
//! generates are the scenario's only (it generates them from every node of the cluster). For each
//! pod sched-core evaluates the state kube-scheduler's cycle starts from and must agree with what
//! kube-scheduler then does: bind it in the domain sched-core chose, or reject it with the same
//! message byte for byte.
//!
//! The components also run with CompositePodGroup (alpha) on and kube-apiserver serving
//! scheduling.k8s.io/v1alpha3: the gate changes nothing for a PodGroup without a parent (the
//! topology scenarios agree as without it), and the composite scenarios build trees of gangs whose
//! outcome does not depend on the order kube-scheduler tries a composite's children in (a Go map's).

mod common;

use std::collections::BTreeMap;

use anyhow::{Context, Result, ensure};
use common::{Lab, Verdict, evaluate, pod};
use e2e::{ControlPlane, Options};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use sched_core::ClusterObjects;
use sched_core::engine::Engine;
use sched_core::explain::{Explanation, Outcome};
use sched_core::features::{FeatureGates, KubeVersion};
use sched_core::schedule::composite::tree_cycle;
use sched_core::schedule::pod_group::pod_group_cycle;
use sched_core::snapshot::kube::{ApiLoadOptions, load_from_api};
use serde_json::json;
use tokio::sync::OnceCell;

static CONTROL_PLANE: OnceCell<ControlPlane> = OnceCell::const_new();

/// The workload API's gate, topology placement's and composite groups' (alpha, which need the
/// first; CompositePodGroup needs TopologyAwareWorkloadScheduling too).
const TOPOLOGY_GATES: &str =
    "GenericWorkload=true,TopologyAwareWorkloadScheduling=true,CompositePodGroup=true";
/// The PodGroup's API (beta) and the CompositePodGroup's (v1alpha3), both off by default.
const RUNTIME_CONFIG: &str = "scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true";

async fn control_plane() -> Result<&'static ControlPlane, e2e::Error> {
    CONTROL_PLANE
        .get_or_try_init(|| {
            ControlPlane::start(
                Options::new()
                    .with_scheduler(None)
                    .with_feature_gates(TOPOLOGY_GATES)
                    .with_runtime_config(RUNTIME_CONFIG),
            )
        })
        .await
}

/// A scenario: its lab, sched-core with the control plane's release and gates, and its topology key.
struct Scenario {
    lab: Lab,
    engine: Engine,
    key: String,
}

impl Scenario {
    async fn begin(id: &str) -> Result<Scenario> {
        let lab = Lab::begin_on(id, control_plane).await?;
        // A composite scenario that failed while kube-scheduler was stopped leaves it stopped.
        if lab.cp.scheduler_pid().is_none() {
            lab.cp.start_scheduler(None).await?;
        }
        let release = lab.cp.release()?;
        let gates = FeatureGates::for_version(KubeVersion::parse(release)?).with_overrides(TOPOLOGY_GATES)?;
        let engine = Engine::for_features(None, gates)?;
        Ok(Scenario {
            key: format!("zone.e2e.test/{id}"),
            lab,
            engine,
        })
    }

    /// Nodes `(short, zone, cpu)`: in `zone` of the scenario's key, kept for its pods.
    async fn create_nodes(&self, nodes: &[(&str, &str, &str)]) -> Result<()> {
        let lab = &self.lab;
        lab.create_nodes(nodes.iter().map(|(short, zone, cpu)| {
            lab.node(short, cpu, "8Gi")
                .label("gang-scenario", &lab.ns)
                .label(&self.key, zone)
        }))
        .await
    }

    /// A gang PodGroup `name` of `min_count` that must land in one domain of the scenario's key
    /// (`topology: false`: no constraint).
    async fn create_gang(&self, name: &str, min_count: i32, topology: bool) -> Result<PodGroup> {
        let mut spec = json!({"schedulingPolicy": {"gang": {"minCount": min_count}}});
        if topology {
            spec["schedulingConstraints"] = json!({"topology": [{"key": self.key}]});
        }
        let created: PodGroup = self
            .lab
            .create_namespaced(json!({
                "apiVersion": "scheduling.k8s.io/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name},
                "spec": spec,
            }))
            .await?;
        ensure!(
            !topology || created.spec.scheduling_constraints.is_some(),
            "kube-apiserver dropped schedulingConstraints: is TopologyAwareWorkloadScheduling on? {created:?}"
        );
        Ok(created)
    }

    /// A CompositePodGroup `name` whose gang policy needs `min_group_count` of its children, under
    /// `parent` when given.
    async fn create_composite(
        &self,
        name: &str,
        min_group_count: i32,
        parent: Option<&str>,
    ) -> Result<CompositePodGroup> {
        // The API wants every group of a tree to name its Workload (none need exist).
        let mut spec = json!({
            "schedulingPolicy": {"gang": {"minGroupCount": min_group_count}},
            "workloadRef": {"workloadName": name, "templateName": name},
        });
        if let Some(parent) = parent {
            spec["parentCompositePodGroupName"] = json!(parent);
        }
        self.lab
            .create_namespaced(json!({
                "apiVersion": "scheduling.k8s.io/v1alpha3",
                "kind": "CompositePodGroup",
                "metadata": {"name": name},
                "spec": spec,
            }))
            .await
    }

    /// The tree `root` (a CompositePodGroup of minGroupCount `min_group_count`) over the gangs
    /// `gangs` (`(name, minCount, pods, cpu)`), made while kube-scheduler is stopped: started
    /// again, it finds every pod of the tree at once (made one by one under a running scheduler,
    /// the tree could be popped with some pods not yet requeued, a race upstream has too). sched-core
    /// evaluates each pod on the cluster as loaded then.
    async fn create_tree_and_explain(
        &self,
        root: &str,
        min_group_count: i32,
        gangs: &[(&str, i32, &[&str], &str)],
    ) -> Result<(Vec<(Pod, Explanation)>, ClusterObjects)> {
        let lab = &self.lab;
        lab.cp.stop_scheduler();
        self.create_composite(root, min_group_count, None).await?;
        let mut created = Vec::new();
        for (gang, min_count, names, cpu) in gangs {
            self.create_member_gang(gang, *min_count, root).await?;
            for name in *names {
                let member = pod(name)
                    .cpu(cpu)
                    .spec("schedulingGroup", json!({"podGroupName": gang}))
                    .spec("nodeSelector", json!({"gang-scenario": lab.ns}));
                created.push(lab.create_pod(&member).await?);
            }
        }
        let (objects, warnings) = load_from_api(&lab.client, &ApiLoadOptions::default()).await?;
        ensure!(warnings.is_empty(), "load_from_api warned: {warnings:?}");
        lab.cp.start_scheduler(None).await?;
        let explained = created
            .into_iter()
            .map(|pod| {
                let ours = evaluate(self.engine.snapshot(objects.clone()), &pod)?;
                Ok((pod, ours))
            })
            .collect::<Result<_>>()?;
        Ok((explained, objects))
    }

    /// The tree's pods as a whole: kube-scheduler's verdicts and sched-core's, as a multiset (a
    /// binding as `bound NODE`, silence as `held`). kube-scheduler orders a gang's pods by the time
    /// they entered its queue, and a restarted kube-scheduler enqueues them all at once, so which
    /// pod of a gang is the one left over varies; what each gang's pods are told does not.
    async fn agree_as_a_whole(&self, scenario: &str, explained: &[(Pod, Explanation)]) -> Result<()> {
        let mut kube = Vec::new();
        let mut ours = Vec::new();
        for (pod, e) in explained {
            kube.push(match self.lab.verdict(pod, common::VERDICT_TIMEOUT).await? {
                Verdict::Bound(node) => format!("bound {node}"),
                Verdict::Failed(message) => message,
                Verdict::Silent { .. } => "held".to_owned(),
            });
            ours.push(match e.outcome {
                Outcome::Scheduled => format!("bound {}", e.selected.first().cloned().unwrap_or_default()),
                Outcome::Gated => "held".to_owned(),
                _ => e.message.clone(),
            });
        }
        kube.sort();
        ours.sort();
        eprintln!("[gang-topology] {scenario}\n  kube-scheduler: {kube:#?}\n  sched-core:     {ours:#?}");
        ensure!(kube == ours, "{scenario}: MISMATCH between the tree's verdicts");
        Ok(())
    }

    /// Each PodGroup of the tree under `root`: kube-scheduler's PodGroupInitiallyScheduled condition
    /// (status, message) must be sched-core's (True and empty when the tree fits, else False and the
    /// group's status).
    async fn agree_on_conditions(&self, scenario: &str, objects: ClusterObjects, root: &str) -> Result<()> {
        let snapshot = std::sync::Arc::new(self.engine.snapshot(objects));
        let profile = self.engine.profile("default-scheduler")?;
        let fwk = self.engine.framework(profile, snapshot)?;
        let cycle = tree_cycle(
            &fwk,
            &self.lab.ns,
            root,
            None,
            self.engine.schedule_options(false),
        )
        .context("sched-core: the tree exists")?;
        for leaf in cycle.tree.leaves() {
            let kube = self
                .group_condition(&leaf.name)
                .await?
                .with_context(|| format!("kube-scheduler wrote no condition on {}", leaf.name))?;
            let ours = (
                if cycle.fits() { "True" } else { "False" }.to_owned(),
                cycle.condition(&leaf.name).unwrap_or_default(),
            );
            eprintln!(
                "[gang-topology] {scenario} PodGroup {} condition\n  kube-scheduler: {kube:?}\n  sched-core:     {ours:?}",
                leaf.name
            );
            ensure!(
                kube == ours,
                "{scenario}: MISMATCH PodGroup {} condition",
                leaf.name
            );
        }
        Ok(())
    }

    /// A gang PodGroup `name` of `min_count`, a child of the CompositePodGroup `parent`.
    async fn create_member_gang(&self, name: &str, min_count: i32, parent: &str) -> Result<()> {
        let created: PodGroup = self
            .lab
            .create_namespaced(json!({
                "apiVersion": "scheduling.k8s.io/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name},
                "spec": {
                    "schedulingPolicy": {"gang": {"minCount": min_count}},
                    "parentCompositePodGroupName": parent,
                    "workloadRef": {"workloadName": parent, "templateName": name},
                },
            }))
            .await?;
        ensure!(
            created.spec.parent_composite_pod_group_name.as_deref() == Some(parent),
            "kube-apiserver dropped parentCompositePodGroupName: is CompositePodGroup on? {created:?}"
        );
        Ok(())
    }

    /// The PodGroupInitiallyScheduled condition kube-scheduler wrote on the PodGroup `name`.
    async fn group_condition(&self, name: &str) -> Result<Option<(String, String)>> {
        let groups: kube::Api<PodGroup> = kube::Api::namespaced(self.lab.client.clone(), &self.lab.ns);
        Ok(groups
            .get(name)
            .await?
            .status
            .and_then(|s| s.conditions)
            .into_iter()
            .flatten()
            .find(|c| c.type_ == "PodGroupInitiallyScheduled")
            .map(|c| (c.status, c.message)))
    }

    /// Creates pods `names` of `group` asking `cpu` each and evaluates each with sched-core on the
    /// cluster as loaded before them plus every pod just created (what the group's cycle sees).
    async fn create_and_explain(
        &self,
        group: &str,
        names: &[&str],
        cpu: &str,
    ) -> Result<Vec<(Pod, Explanation)>> {
        let lab = &self.lab;
        let (mut objects, warnings) = load_from_api(&lab.client, &ApiLoadOptions::default()).await?;
        ensure!(warnings.is_empty(), "load_from_api warned: {warnings:?}");
        let mut created = Vec::new();
        for name in names {
            let member = pod(name)
                .cpu(cpu)
                .spec("schedulingGroup", json!({"podGroupName": group}))
                .spec("nodeSelector", json!({"gang-scenario": lab.ns}));
            created.push(lab.create_pod(&member).await?);
        }
        objects.pods.extend(created.iter().cloned());
        created
            .into_iter()
            .map(|pod| {
                let ours = evaluate(self.engine.snapshot(objects.clone()), &pod)?;
                Ok((pod, ours))
            })
            .collect()
    }

    /// The domain sched-core's cycle chooses for `group` on the cluster as it is now (`None`: none).
    async fn chosen_domain(&self, group: &str) -> Result<Option<String>> {
        let (objects, _) = load_from_api(&self.lab.client, &ApiLoadOptions::default()).await?;
        let snapshot = std::sync::Arc::new(self.engine.snapshot(objects));
        let profile = self.engine.profile("default-scheduler")?;
        let fwk = self.engine.framework(profile, snapshot)?;
        let cycle = pod_group_cycle(&fwk, &self.lab.ns, group, self.engine.schedule_options(false))
            .context("the pod group cycle applies")?;
        let placements = cycle.placements.context("placements tried")?;
        Ok(placements
            .chosen
            .map(|i| placements.tries[i].placement.name.clone()))
    }

    /// Each pod's kube-scheduler verdict, and per pod whether sched-core agrees: a binding matches
    /// Scheduled on the same node, a FailedScheduling note Unschedulable with the same message.
    async fn agree(
        &self,
        scenario: &str,
        explained: &[(Pod, Explanation)],
    ) -> Result<BTreeMap<String, Verdict>> {
        self.agree_within(scenario, explained, common::VERDICT_TIMEOUT)
            .await
    }

    /// [`Scenario::agree`], waiting `timeout` per pod (silence is only known at its end).
    async fn agree_within(
        &self,
        scenario: &str,
        explained: &[(Pod, Explanation)],
        timeout: std::time::Duration,
    ) -> Result<BTreeMap<String, Verdict>> {
        let mut kube = BTreeMap::new();
        let mut mismatches = Vec::new();
        for (pod, ours) in explained {
            let name = pod.metadata.name.clone().context("pod name")?;
            let verdict = self.lab.verdict(pod, timeout).await?;
            let agrees = match &verdict {
                Verdict::Bound(node) => ours.outcome == Outcome::Scheduled && ours.selected.contains(node),
                Verdict::Failed(message) => {
                    ours.outcome == Outcome::Unschedulable && &ours.message == message
                }
                Verdict::Silent { .. } => ours.outcome == Outcome::Gated,
            };
            eprintln!(
                "[gang-topology] {scenario} {name}: {}\n  kube-scheduler: {verdict:?}\n  sched-core:     {:?} {:?} selected={:?}",
                if agrees { "AGREE" } else { "DISAGREE" },
                ours.outcome,
                ours.message,
                ours.selected
            );
            if !agrees {
                mismatches.push(name.clone());
            }
            kube.insert(name, verdict);
        }
        ensure!(mismatches.is_empty(), "{scenario}: MISMATCH for {mismatches:?}");
        Ok(kube)
    }
}

/// minCount 3 of 1 cpu each: zone-a's two 1-cpu nodes hold two, zone-b's 3-cpu node all three.
/// The whole cluster would take the group split over both zones; kube-scheduler binds it in
/// zone-b, the placement sched-core chooses.
#[tokio::test]
async fn a_group_that_fits_one_zone_only_is_bound_in_that_zone() -> Result<()> {
    let s = Scenario::begin("topo-one-zone").await?;
    s.create_nodes(&[
        ("a1", "zone-a", "1"),
        ("a2", "zone-a", "1"),
        ("b1", "zone-b", "3"),
    ])
    .await?;
    s.create_gang("train", 3, true).await?;
    let chosen_before = {
        let explained = s.create_and_explain("train", &["w1", "w2", "w3"], "1").await?;
        let kube = s.agree("topo-one-zone", &explained).await?;
        let b1 = s.lab.n("b1");
        ensure!(
            kube.values()
                .all(|v| matches!(v, Verdict::Bound(node) if *node == b1)),
            "kube-scheduler should bind the whole group on zone-b's node: {kube:?}"
        );
        explained
    };
    ensure!(
        chosen_before.iter().all(|(_, e)| e.selected == [s.lab.n("b1")]),
        "sched-core should place every pod in zone-b"
    );
    Ok(())
}

/// minCount 3 of 1 cpu each on two 2-cpu nodes in two zones: the cluster holds the group, no zone
/// does. kube-scheduler binds no pod; the two that fit in the first zone tried get the group's
/// words ("0/2 placements are available, first placement status: …"), the third its own in that
/// zone ("0/1 nodes are available: …"); explain podgroup/ says the same, per domain.
#[tokio::test]
async fn a_group_that_fits_no_single_zone_binds_no_pod() -> Result<()> {
    let s = Scenario::begin("topo-no-zone").await?;
    s.create_nodes(&[("a1", "zone-a", "2"), ("b1", "zone-b", "2")])
        .await?;
    s.create_gang("train", 3, true).await?;
    ensure!(
        s.chosen_domain("train").await?.is_none(),
        "no domain before any pod exists"
    );
    let explained = s.create_and_explain("train", &["w1", "w2", "w3"], "1").await?;
    let kube = s.agree("topo-no-zone", &explained).await?;
    let group_words: Vec<&String> = kube
        .values()
        .filter_map(|v| match v {
            Verdict::Failed(m) if m.contains("placements are available") => Some(m),
            _ => None,
        })
        .collect();
    ensure!(
        group_words.len() == 2,
        "the scenario should exercise the placement words on the two pods that fit: {kube:?}"
    );

    let (json, _) = common::kubectl_sched_json(&s.lab, &["explain", "podgroup/train"]).await?;
    let group = &json["pod_groups"][0];
    ensure!(
        group["outcome"] == "Unschedulable",
        "explain podgroup/train: {group}"
    );
    for member in group["members"].as_array().context("members")? {
        let name = member["pod"].as_str().context("member name")?;
        let Some(Verdict::Failed(kube_message)) = kube.get(name) else {
            anyhow::bail!("no FailedScheduling for {name}: {kube:?}");
        };
        ensure!(
            member["message"].as_str() == Some(kube_message.as_str()),
            "MISMATCH {name}: kube-scheduler {kube_message:?}, explain podgroup/train {}",
            member["message"]
        );
    }
    let domains = group["placements"]["domains"].as_array().context("placements")?;
    ensure!(
        domains.len() == 2 && domains.iter().all(|d| d["fits"] == false),
        "explain podgroup/train should try both zones and fit neither: {}",
        group["placements"]
    );
    Ok(())
}

/// With the gate on, a gang without a topology constraint is tried in one placement, the whole
/// cluster: its words change to "0/1 placements are available, …" (minCount 3 of 2 cpu on one
/// 4-cpu node).
#[tokio::test]
async fn a_group_without_constraint_is_one_placement() -> Result<()> {
    let s = Scenario::begin("topo-unconstrained").await?;
    s.create_nodes(&[("a1", "zone-a", "4")]).await?;
    s.create_gang("train", 3, false).await?;
    let explained = s.create_and_explain("train", &["w1", "w2", "w3"], "2").await?;
    let kube = s.agree("topo-unconstrained", &explained).await?;
    ensure!(
        kube.values()
            .any(|v| matches!(v, Verdict::Failed(m) if m.contains("0/1 placements are available"))),
        "the scenario should exercise the one-placement words: {kube:?}"
    );
    Ok(())
}

/// A CompositePodGroup of two gangs (minGroupCount 2), each of two 1-cpu pods, on one 4-cpu node:
/// the whole tree fits and kube-scheduler binds every pod, as sched-core places them, and marks
/// both PodGroups scheduled.
#[tokio::test]
async fn a_composite_group_that_fits_is_bound_whole() -> Result<()> {
    let s = Scenario::begin("composite-fits").await?;
    s.create_nodes(&[("a1", "zone-a", "4")]).await?;
    let (explained, objects) = s
        .create_tree_and_explain(
            "job",
            2,
            &[("ps", 2, &["p1", "p2"], "1"), ("workers", 2, &["w1", "w2"], "1")],
        )
        .await?;
    let kube = s.agree("composite-fits", &explained).await?;
    ensure!(
        kube.values().all(|v| matches!(v, Verdict::Bound(_))),
        "kube-scheduler should bind the whole tree: {kube:?}"
    );
    s.agree_on_conditions("composite-fits", objects, "job").await
}

/// A CompositePodGroup (minGroupCount 1) of two gangs of three 2-cpu pods (minCount 3) on one
/// 4-cpu node: each gang fits two pods, neither fits whole, so the tree binds no pod. Both gangs
/// fail alike whichever kube-scheduler tries first (it ranges over a Go map of children): in each,
/// the two pods that fit carry the gang's status, the third its own words (which of the three is
/// left over follows kube-scheduler's queue order, so the pods are compared as a whole).
#[tokio::test]
async fn a_composite_group_that_does_not_fit_binds_no_pod() -> Result<()> {
    let s = Scenario::begin("composite-no-fit").await?;
    s.create_nodes(&[("a1", "zone-a", "4")]).await?;
    let (explained, objects) = s
        .create_tree_and_explain(
            "job",
            1,
            &[
                ("left", 3, &["l1", "l2", "l3"], "2"),
                ("right", 3, &["r1", "r2", "r3"], "2"),
            ],
        )
        .await?;
    s.agree_as_a_whole("composite-no-fit", &explained).await?;
    ensure!(
        explained.iter().all(|(_, e)| e.outcome == Outcome::Unschedulable),
        "no pod of the tree should be bound"
    );
    let failed: Vec<&str> = explained
        .iter()
        .filter(|(_, e)| e.message.contains("placements are available"))
        .map(|(_, e)| e.message.as_str())
        .collect();
    ensure!(
        failed.len() == 4,
        "the scenario should exercise a gang's words inside the tree on the four pods that fit: {failed:?}"
    );
    s.agree_on_conditions("composite-no-fit", objects, "job").await
}

/// A CompositePodGroup (minGroupCount 2) of two gangs of minCount 2, one with a single pod: the tree
/// is short of its quorum, so kube-scheduler holds every pod of it, even those of the gang whose
/// pods all exist, and writes nothing; sched-core says so ("waiting for composite pod group "job"
/// tree to meet quorum"). Without the tree, the full gang fits and would be bound.
#[tokio::test]
async fn a_composite_group_short_of_its_quorum_holds_every_pod() -> Result<()> {
    let s = Scenario::begin("composite-quorum").await?;
    s.create_nodes(&[("a1", "zone-a", "4")]).await?;
    let (explained, _) = s
        .create_tree_and_explain(
            "job",
            2,
            &[("ps", 2, &["p1", "p2"], "1"), ("workers", 2, &["w1"], "1")],
        )
        .await?;
    let kube = s
        .agree_within("composite-quorum", &explained, common::SILENCE)
        .await?;
    ensure!(
        kube.values().all(|v| matches!(v, Verdict::Silent { .. })),
        "kube-scheduler should hold every pod of the tree: {kube:?}"
    );
    ensure!(
        explained
            .iter()
            .all(|(_, e)| e.message == "waiting for composite pod group \"job\" tree to meet quorum"),
        "sched-core should give the tree's PreEnqueue words"
    );
    Ok(())
}
