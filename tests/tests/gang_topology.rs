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

mod common;

use std::collections::BTreeMap;

use anyhow::{Context, Result, ensure};
use common::{Lab, Verdict, evaluate, pod};
use e2e::{ControlPlane, Options};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use sched_core::engine::Engine;
use sched_core::explain::{Explanation, Outcome};
use sched_core::features::{FeatureGates, KubeVersion};
use sched_core::schedule::pod_group::pod_group_cycle;
use sched_core::snapshot::kube::{ApiLoadOptions, load_from_api};
use serde_json::json;
use tokio::sync::OnceCell;

static CONTROL_PLANE: OnceCell<ControlPlane> = OnceCell::const_new();

/// The workload API's gate and topology placement's (alpha, which needs the first).
const TOPOLOGY_GATES: &str = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true";

async fn control_plane() -> Result<&'static ControlPlane, e2e::Error> {
    CONTROL_PLANE
        .get_or_try_init(|| {
            ControlPlane::start(
                Options::new()
                    .with_scheduler(None)
                    .with_feature_gates(TOPOLOGY_GATES)
                    .with_runtime_config("scheduling.k8s.io/v1beta1=true"),
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
        let mut kube = BTreeMap::new();
        let mut mismatches = Vec::new();
        for (pod, ours) in explained {
            let name = pod.metadata.name.clone().context("pod name")?;
            let verdict = self.lab.verdict(pod, common::VERDICT_TIMEOUT).await?;
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
