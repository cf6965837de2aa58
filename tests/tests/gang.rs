//! Gang scheduling against the real kube-scheduler: a control plane whose kube-apiserver serves
//! the workload API (`scheduling.k8s.io/v1beta1`) and whose components run with GenericWorkload
//! on, so that kube-scheduler's default profile has GangScheduling and the pod group cycle. For
//! each scenario, sched-core evaluates every pod of the group on the state kube-scheduler sees
//! (the cluster as loaded before the pods, plus the pods as the API server stored them), and
//! agrees with what kube-scheduler then does to that pod: binds it, rejects it with the same
//! message, or holds it without a word (PreEnqueue writes nothing on the pod).
//!
//! The pinned release only: v1.35 and v1.36 serve the workload API as v1alpha1 (GangScheduling,
//! alpha), which sched-core does not read yet.

mod common;

use std::collections::BTreeMap;

use anyhow::{Context, Result, ensure};
use common::{Lab, Verdict, evaluate, pod};
use e2e::{ControlPlane, Options};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use kube::api::ListParams;
use sched_core::engine::Engine;
use sched_core::explain::{Explanation, Outcome};
use sched_core::features::{FeatureGates, KubeVersion};
use sched_core::snapshot::kube::{ApiLoadOptions, load_from_api};
use serde_json::json;
use tokio::sync::OnceCell;

static CONTROL_PLANE: OnceCell<ControlPlane> = OnceCell::const_new();

/// The gate that brings the workload API's beta and the pod group cycle (v1.37).
const WORKLOAD_GATES: &str = "GenericWorkload=true";

/// etcd, kube-apiserver and kube-scheduler with the workload API served and its gates on.
async fn control_plane() -> Result<&'static ControlPlane, e2e::Error> {
    CONTROL_PLANE
        .get_or_try_init(|| {
            ControlPlane::start(
                Options::new()
                    .with_scheduler(None)
                    .with_feature_gates(WORKLOAD_GATES)
                    .with_runtime_config("scheduling.k8s.io/v1beta1=true"),
            )
        })
        .await
}

/// sched-core with the control plane's release and the same gates turned on.
fn gang_engine(lab: &Lab) -> Result<Engine> {
    let release = lab.cp.release()?;
    let gates = FeatureGates::for_version(KubeVersion::parse(release)?).with_overrides(WORKLOAD_GATES)?;
    Ok(Engine::for_features(None, gates)?)
}

/// A PodGroup `name` with the gang policy, in the scenario's namespace.
async fn create_gang(lab: &Lab, name: &str, min_count: i32) -> Result<PodGroup> {
    lab.create_namespaced(json!({
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }))
    .await
}

/// A member of the PodGroup `group` asking for `cpu`, kept on the scenario's nodes.
fn member(lab: &Lab, name: &str, group: &str, cpu: &str) -> common::PodBuilder {
    pod(name)
        .cpu(cpu)
        .spec("schedulingGroup", json!({"podGroupName": group}))
        .spec("nodeSelector", json!({"gang-scenario": lab.ns}))
}

/// Loads the cluster, creates `pods` (kube-scheduler may act on them at once), and evaluates each
/// with sched-core on the loaded cluster plus every pod just created: the state kube-scheduler's
/// pod group cycle starts from.
async fn create_and_explain(
    lab: &Lab,
    engine: &Engine,
    pods: Vec<common::PodBuilder>,
) -> Result<Vec<(Pod, Explanation)>> {
    let (mut objects, warnings) = load_from_api(&lab.client, &ApiLoadOptions::default()).await?;
    ensure!(warnings.is_empty(), "load_from_api warned: {warnings:?}");
    let mut created = Vec::new();
    for pod in &pods {
        created.push(lab.create_pod(pod).await?);
    }
    objects.pods.extend(created.iter().cloned());
    created
        .into_iter()
        .map(|pod| {
            let ours = evaluate(engine.snapshot(objects.clone()), &pod)?;
            Ok((pod, ours))
        })
        .collect()
}

/// Each pod's kube-scheduler verdict, waited for `timeout` each.
async fn verdicts(
    lab: &Lab,
    explained: &[(Pod, Explanation)],
    timeout: std::time::Duration,
) -> Result<BTreeMap<String, Verdict>> {
    let mut verdicts = BTreeMap::new();
    for (pod, _) in explained {
        let name = pod.metadata.name.clone().context("pod name")?;
        verdicts.insert(name, lab.verdict(pod, timeout).await?);
    }
    Ok(verdicts)
}

/// The differential rule for a gang: per pod, a binding matches Scheduled (on a node sched-core
/// selected), a FailedScheduling note matches Unschedulable with the same message, and silence
/// with no PodScheduled condition matches a pod held at PreEnqueue (Gated).
fn agree(scenario: &str, explained: &[(Pod, Explanation)], kube: &BTreeMap<String, Verdict>) -> Result<()> {
    let mut mismatches = Vec::new();
    for (pod, ours) in explained {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let verdict = kube.get(name).context("verdict")?;
        let agrees = match verdict {
            Verdict::Bound(node) => ours.outcome == Outcome::Scheduled && ours.selected.contains(node),
            Verdict::Failed(message) => ours.outcome == Outcome::Unschedulable && &ours.message == message,
            Verdict::Silent { reason, message } => {
                ours.outcome == Outcome::Gated && reason.is_none() && message.is_none()
            }
        };
        eprintln!(
            "[gang] {scenario} {name}: {}\n  kube-scheduler: {verdict:?}\n  sched-core:     {:?} {:?} selected={:?}",
            if agrees { "AGREE" } else { "DISAGREE" },
            ours.outcome,
            ours.message,
            ours.selected
        );
        if !agrees {
            mismatches.push(name.to_owned());
        }
    }
    ensure!(mismatches.is_empty(), "{scenario}: MISMATCH for {mismatches:?}");
    Ok(())
}

/// Waits until `count` pods of the scenario's namespace are bound (`what` names the wait).
async fn wait_until_bound(lab: &Lab, count: usize, timeout: std::time::Duration, what: &str) -> Result<()> {
    let pods: kube::Api<Pod> = kube::Api::namespaced(lab.client.clone(), &lab.ns);
    e2e::fixtures::eventually(what, timeout, || async {
        let bound = pods
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
            .count();
        Ok((bound == count).then_some(()))
    })
    .await
}

async fn begin(id: &str) -> Result<(Lab, Engine)> {
    let lab = Lab::begin_on(id, control_plane).await?;
    let engine = gang_engine(&lab)?;
    Ok((lab, engine))
}

/// Nodes `short` of the scenario with `cpu` each, labelled for its pods' nodeSelector.
async fn create_nodes(lab: &Lab, nodes: &[(&str, &str)]) -> Result<()> {
    lab.create_nodes(
        nodes
            .iter()
            .map(|(short, cpu)| lab.node(short, cpu, "8Gi").label("gang-scenario", &lab.ns)),
    )
    .await
}

/// Three pods of minCount 3 on two nodes that hold two each: the whole gang is bound.
#[tokio::test]
async fn a_gang_that_fits_is_bound_whole() -> Result<()> {
    let (lab, engine) = begin("gang-fits").await?;
    create_nodes(&lab, &[("a", "4"), ("b", "4")]).await?;
    create_gang(&lab, "train", 3).await?;
    let pods = ["w1", "w2", "w3"].map(|n| member(&lab, n, "train", "2"));
    let explained = create_and_explain(&lab, &engine, pods.into()).await?;
    let kube = verdicts(&lab, &explained, common::VERDICT_TIMEOUT).await?;
    ensure!(
        kube.values().all(|v| matches!(v, Verdict::Bound(_))),
        "kube-scheduler should bind the whole gang: {kube:?}"
    );
    agree("gang-fits", &explained, &kube)
}

/// Three pods of minCount 3 on one node that holds two: kube-scheduler binds none, the two that
/// fit are rejected with the group's words and the third with its own.
#[tokio::test]
async fn a_gang_larger_than_the_cluster_binds_no_pod() -> Result<()> {
    let (lab, engine) = begin("gang-too-big").await?;
    create_nodes(&lab, &[("a", "4")]).await?;
    create_gang(&lab, "train", 3).await?;
    let pods = ["w1", "w2", "w3"].map(|n| member(&lab, n, "train", "2"));
    let explained = create_and_explain(&lab, &engine, pods.into()).await?;
    let kube = verdicts(&lab, &explained, common::VERDICT_TIMEOUT).await?;
    ensure!(
        kube.values().all(|v| matches!(v, Verdict::Failed(_))),
        "kube-scheduler should reject every pod of the gang: {kube:?}"
    );
    ensure!(
        kube.values()
            .any(|v| matches!(v, Verdict::Failed(m) if m.contains("minCount (3) cannot be satisfied"))),
        "the scenario should exercise PlacementFeasible's words: {kube:?}"
    );
    agree("gang-too-big", &explained, &kube)?;

    // The same through the CLI, without --feature-gates: the cluster's PodGroup turns the gate on.
    let (json, stderr) = common::kubectl_sched_json(&lab, &["explain", "w1"]).await?;
    ensure!(
        stderr.contains("PodGroup(s): evaluating with GenericWorkload on"),
        "explain should say why it evaluates with GenericWorkload on: {stderr}"
    );
    let Some(Verdict::Failed(kube_message)) = kube.get("w1") else {
        anyhow::bail!("no FailedScheduling for w1: {kube:?}");
    };
    ensure!(
        json["message"].as_str() == Some(kube_message.as_str()),
        "MISMATCH explain -o json vs kube-scheduler:\n  kube-scheduler: {kube_message:?}\n  explain:        {}",
        json["message"]
    );

    // explain podgroup/train: the group's verdict is what kube-scheduler wrote on the pods that fit,
    // and each pod's words are the ones on its PodScheduled condition.
    let (json, _) = common::kubectl_sched_json(&lab, &["explain", "podgroup/train"]).await?;
    let group = &json["pod_groups"][0];
    ensure!(
        group["outcome"] == "Unschedulable",
        "explain podgroup/train: {group}"
    );
    let group_words: Vec<&String> = kube
        .values()
        .filter_map(|v| match v {
            Verdict::Failed(m) if m.starts_with("pod group is unschedulable") => Some(m),
            _ => None,
        })
        .collect();
    ensure!(
        !group_words.is_empty()
            && group_words
                .iter()
                .all(|m| group["message"].as_str() == Some(m.as_str())),
        "MISMATCH explain podgroup/train vs kube-scheduler:\n  kube-scheduler: {group_words:?}\n  explain:        {}",
        group["message"]
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
    // triage: the gang is one group, not three pods.
    let (json, _) = common::kubectl_sched_json(&lab, &["triage"]).await?;
    let groups = json["pod_groups"].as_array().context("pod_groups")?;
    ensure!(
        groups.len() == 1 && groups[0]["pods"].as_array().map(Vec::len) == Some(3),
        "triage should list the gang once: {json}"
    );
    Ok(())
}

/// Two pods of minCount 3: both are held at PreEnqueue, where kube-scheduler writes nothing;
/// the third pod lets the whole gang through.
#[tokio::test]
async fn a_gang_short_of_its_quorum_is_held_until_it_is_reached() -> Result<()> {
    let (lab, engine) = begin("gang-quorum").await?;
    create_nodes(&lab, &[("a", "4"), ("b", "4")]).await?;
    create_gang(&lab, "train", 3).await?;
    let pods = ["w1", "w2"].map(|n| member(&lab, n, "train", "1"));
    let explained = create_and_explain(&lab, &engine, pods.into()).await?;
    for (_, ours) in &explained {
        ensure!(
            ours.message == "waiting for minCount pods from a gang to appear in scheduling queue",
            "sched-core: {ours:?}"
        );
    }
    let kube = verdicts(&lab, &explained, common::SILENCE).await?;
    agree("gang-quorum", &explained, &kube)?;

    let last = create_and_explain(&lab, &engine, vec![member(&lab, "w3", "train", "1")]).await?;
    let kube = verdicts(&lab, &last, common::VERDICT_TIMEOUT).await?;
    agree("gang-quorum, third pod", &last, &kube)?;
    // The pod group cycle binds the three together; the bindings land one by one.
    wait_until_bound(
        &lab,
        3,
        common::VERDICT_TIMEOUT,
        "the quorum reached, the whole gang to be bound",
    )
    .await?;
    Ok(())
}

/// Pods naming a PodGroup that does not exist are held with the group's name; once it exists,
/// they are scheduled.
#[tokio::test]
async fn pods_of_a_missing_pod_group_wait_for_it() -> Result<()> {
    let (lab, engine) = begin("gang-missing").await?;
    create_nodes(&lab, &[("a", "4")]).await?;
    let pods = ["w1", "w2"].map(|n| member(&lab, n, "later", "1"));
    let explained = create_and_explain(&lab, &engine, pods.into()).await?;
    for (_, ours) in &explained {
        ensure!(
            ours.message == "waiting for pods's pod group \"later\" to appear in scheduling queue",
            "sched-core: {ours:?}"
        );
    }
    let kube = verdicts(&lab, &explained, common::SILENCE).await?;
    agree("gang-missing", &explained, &kube)?;

    create_gang(&lab, "later", 2).await?;
    // Bound in the end; kube-scheduler's first attempt right after the PodGroup appears may fail
    // (its DynamicResources PodGroupPostFilter has seen it once answer "not found"), so the binding is
    // waited for rather than the first verdict.
    wait_until_bound(
        &lab,
        explained.len(),
        2 * common::VERDICT_TIMEOUT,
        "once their PodGroup exists, both pods to be bound",
    )
    .await?;
    Ok(())
}

/// A batch with two gangs and a plain pod through `simulate`'s queue, then through the real
/// kube-scheduler: the same pods bind — the gang that fits whole, the plain pod, and none of the
/// gang larger than the cluster (its pods get FailedScheduling, none is bound).
#[tokio::test]
async fn simulate_binds_the_pods_kube_scheduler_binds() -> Result<()> {
    use sched_core::simulate::{GroupOutcome, PodOutcome, Simulation, SimulationOptions};
    let (lab, engine) = begin("gang-simulate").await?;
    create_nodes(&lab, &[("a", "4"), ("b", "4")]).await?;
    create_gang(&lab, "fits", 2).await?;
    create_gang(&lab, "too-big", 3).await?;
    let (mut objects, warnings) = load_from_api(&lab.client, &ApiLoadOptions::default()).await?;
    ensure!(warnings.is_empty(), "load_from_api warned: {warnings:?}");
    let batch = vec![
        member(&lab, "big-1", "too-big", "3"),
        member(&lab, "big-2", "too-big", "3"),
        member(&lab, "big-3", "too-big", "3"),
        member(&lab, "fit-1", "fits", "2"),
        member(&lab, "fit-2", "fits", "2"),
        pod("plain")
            .cpu("1")
            .spec("nodeSelector", json!({"gang-scenario": lab.ns})),
    ];
    let mut created = Vec::new();
    for pod in &batch {
        created.push(lab.create_pod(pod).await?);
    }
    objects.pods.extend(created.iter().cloned());

    let mut simulation = Simulation::new(&engine, engine.snapshot(objects), SimulationOptions::default());
    let report = simulation.run(&mut |_| {})?;
    let in_scenario = |key: &str| key.strip_prefix(&format!("{}/", lab.ns)).map(str::to_owned);
    let ours: std::collections::BTreeSet<String> = report
        .pods
        .iter()
        .filter(|p| p.outcome == PodOutcome::Scheduled)
        .filter_map(|p| in_scenario(&p.pod))
        .collect();
    let groups: Vec<(String, GroupOutcome, usize)> = report
        .groups
        .iter()
        .filter_map(|g| Some((in_scenario(&g.group)?, g.outcome, g.placed)))
        .collect();
    eprintln!("[gang] simulate: bound {ours:?}, groups {groups:?}");

    // kube-scheduler: wait for as many bindings as simulate made, then for a verdict on every other
    // pod (a FailedScheduling), and compare the bound pods.
    wait_until_bound(
        &lab,
        ours.len(),
        common::VERDICT_TIMEOUT,
        "kube-scheduler to bind the batch",
    )
    .await?;
    for pod in &created {
        let name = pod.metadata.name.clone().unwrap_or_default();
        if !ours.contains(&name) {
            let verdict = lab.verdict(pod, common::VERDICT_TIMEOUT).await?;
            ensure!(
                matches!(verdict, Verdict::Failed(_)),
                "{name}: simulate leaves it pending, kube-scheduler: {verdict:?}"
            );
        }
    }
    let pods: kube::Api<Pod> = kube::Api::namespaced(lab.client.clone(), &lab.ns);
    let theirs: std::collections::BTreeSet<String> = pods
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
        .filter_map(|p| p.metadata.name)
        .collect();
    eprintln!("[gang] kube-scheduler: bound {theirs:?}");
    ensure!(
        ours == theirs,
        "MISMATCH: simulate binds {ours:?}, kube-scheduler {theirs:?}"
    );
    let want: std::collections::BTreeSet<String> = ["fit-1", "fit-2", "plain"].map(str::to_owned).into();
    ensure!(
        ours == want,
        "the scenario should bind the fitting gang and the plain pod: {ours:?}"
    );
    ensure!(
        groups
            == [
                ("too-big".to_owned(), GroupOutcome::Unschedulable, 0),
                ("fits".to_owned(), GroupOutcome::Scheduled, 2),
            ],
        "groups: {groups:?}"
    );
    Ok(())
}

/// A PodGroup `name` with the gang policy and the priority class `class` (admission resolves its
/// `spec.priority` from it, as for a pod).
async fn create_gang_with_priority(lab: &Lab, name: &str, min_count: i32, class: &str) -> Result<PodGroup> {
    lab.create_namespaced(json!({
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"priorityClassName": class, "schedulingPolicy": {"gang": {"minCount": min_count}}},
    }))
    .await
}

/// What sched-core's group preemption decides for the PodGroup `group` on the cluster `objects`:
/// the victims' names (sorted) and PodGroupPostFilter's words.
fn predicted_group_preemption(
    lab: &Lab,
    engine: &Engine,
    objects: sched_core::ClusterObjects,
    group: &str,
) -> Result<(Vec<String>, String)> {
    use sched_core::diagnosis::pod_group::{Depth, diagnose_pod_group};
    let snapshot = std::sync::Arc::new(engine.snapshot(objects));
    let profile = engine.profile("default-scheduler")?;
    let fwk = engine.framework(profile, snapshot)?;
    let report = diagnose_pod_group(engine, &fwk, &lab.ns, group, Depth::Summary).context("the group")?;
    let preemption = report
        .preemption
        .context("sched-core runs no PodGroupPostFilter")?;
    let mut victims: Vec<String> = preemption
        .nodes
        .iter()
        .flat_map(|n| n.victims.iter().map(|v| v.name.clone()))
        .collect();
    victims.sort();
    Ok((victims, preemption.message))
}

/// The names of the scenario's pods that exist now, sorted.
async fn pod_names(lab: &Lab) -> Result<Vec<String>> {
    let pods: kube::Api<Pod> = kube::Api::namespaced(lab.client.clone(), &lab.ns);
    let mut names: Vec<String> = pods
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    Ok(names)
}

/// Workload-aware preemption: a gang of two 3-cpu pods where one node is free and the other holds
/// two lower-priority pods (2 and 1 cpu). The pod group cycle places one pod and not the other;
/// PodGroupPostFilter removes every lower-priority pod, places the group, and reprieves what the
/// placement leaves room for. sched-core's victims are the pods kube-scheduler deletes, the words on
/// each pod are kube-scheduler's, and the gang then binds.
#[tokio::test]
async fn a_gang_preempts_lower_priority_pods_then_binds() -> Result<()> {
    let (lab, engine) = begin("gang-preempt").await?;
    create_nodes(&lab, &[("a", "4"), ("b", "4")]).await?;
    let low = |name: &str, cpu: &str| pod(name).cpu(cpu).priority_class(common::LOW).on(&lab.n("b"));
    lab.create_pods([low("l-big", "2"), low("l-small", "1")]).await?;
    create_gang_with_priority(&lab, "train", 2, common::HIGH.0).await?;
    let (objects, warnings) = load_from_api(&lab.client, &ApiLoadOptions::default()).await?;
    ensure!(warnings.is_empty(), "load_from_api warned: {warnings:?}");
    let pods = ["w1", "w2"].map(|n| member(&lab, n, "train", "3").priority_class(common::HIGH));
    let explained = create_and_explain(&lab, &engine, pods.into()).await?;
    let mut with_gang = objects;
    with_gang.pods.extend(explained.iter().map(|(p, _)| p.clone()));
    let (victims, words) = predicted_group_preemption(&lab, &engine, with_gang, "train")?;
    eprintln!("[gang] gang-preempt: sched-core preempts {victims:?}: {words:?}");
    ensure!(
        words == "pod group preemption: found a placement for podgroup, preempting 1 victims",
        "sched-core's PodGroupPostFilter: {words:?}"
    );

    let kube = verdicts(&lab, &explained, common::VERDICT_TIMEOUT).await?;
    ensure!(
        kube.values()
            .any(|v| matches!(v, Verdict::Failed(m) if m.ends_with(&words))),
        "kube-scheduler should write its group preemption on the pod that fit: {kube:?}"
    );
    agree("gang-preempt", &explained, &kube)?;

    // The victims go, the gang binds on the next cycle: both gang pods and the reprieved pod remain.
    wait_until_bound(
        &lab,
        3,
        common::VERDICT_TIMEOUT,
        "the victims gone, the gang and the reprieved pod to be bound",
    )
    .await?;
    let left = pod_names(&lab).await?;
    let deleted: Vec<String> = ["l-big", "l-small"]
        .into_iter()
        .filter(|n| !left.iter().any(|l| l == n))
        .map(str::to_owned)
        .collect();
    eprintln!("[gang] gang-preempt: kube-scheduler deleted {deleted:?}, pods left {left:?}");
    ensure!(
        deleted == victims,
        "MISMATCH victims: sched-core {victims:?}, kube-scheduler deleted {deleted:?}"
    );
    Ok(())
}

/// A gang of three 2-cpu pods on one 4-cpu node with a lower-priority 1-cpu pod: preempting it
/// makes room for two pods, not three. kube-scheduler preempts nothing and writes the cycle's
/// words again after "pod group preemption: "; sched-core's words are the same, byte for byte, on
/// each pod and on the PodGroup's condition.
#[tokio::test]
async fn a_gang_that_preemption_cannot_place_keeps_its_victims() -> Result<()> {
    let (lab, engine) = begin("gang-preempt-no-help").await?;
    create_nodes(&lab, &[("a", "4")]).await?;
    lab.create_pods([pod("l1").cpu("1").priority_class(common::LOW).on(&lab.n("a"))])
        .await?;
    create_gang_with_priority(&lab, "train", 3, common::HIGH.0).await?;
    let pods = ["w1", "w2", "w3"].map(|n| member(&lab, n, "train", "2").priority_class(common::HIGH));
    let explained = create_and_explain(&lab, &engine, pods.into()).await?;
    let kube = verdicts(&lab, &explained, common::VERDICT_TIMEOUT).await?;
    ensure!(
        kube.values().any(|v| matches!(
            v,
            Verdict::Failed(m) if m.contains("pod group preemption: minCount (3) cannot be satisfied")
        )),
        "the scenario should exercise a group preemption that does not help: {kube:?}"
    );
    agree("gang-preempt-no-help", &explained, &kube)?;

    // The PodGroup's condition: the group's status with PodGroupPostFilter's answer, which is what
    // the pod that fit carries after "pod group is unschedulable, ".
    let groups: kube::Api<PodGroup> = kube::Api::namespaced(lab.client.clone(), &lab.ns);
    let condition = groups
        .get("train")
        .await?
        .status
        .and_then(|s| s.conditions)
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "PodGroupInitiallyScheduled")
        .context("kube-scheduler wrote no PodGroupInitiallyScheduled condition")?;
    let ours = explained
        .iter()
        .find_map(|(_, e)| e.message.strip_prefix("pod group is unschedulable, "))
        .context("sched-core: no pod carries the group's words")?;
    eprintln!(
        "[gang] gang-preempt-no-help PodGroup condition\n  kube-scheduler: {:?}\n  sched-core:     {ours:?}",
        condition.message
    );
    ensure!(
        condition.status == "False" && condition.message == ours,
        "MISMATCH PodGroup condition: kube-scheduler {condition:?}, sched-core {ours:?}"
    );
    ensure!(
        pod_names(&lab).await?.contains(&"l1".to_owned()),
        "no victim should be deleted"
    );
    Ok(())
}

/// `preempt podgroup/NAME --yes` executes the group's plan: the victims sched-core chose are
/// deleted (the pod it spares stays) and each pod of the gang is nominated to its node. The gang's
/// pods name a scheduler that does not run, so kube-scheduler leaves them (and their victims) alone
/// and only the command acts; `--profile default-scheduler` drills them as kube-scheduler's default
/// profile would.
#[tokio::test]
async fn preempt_podgroup_deletes_the_victims_and_nominates_the_gang() -> Result<()> {
    let (lab, _engine) = begin("gang-preempt-cli").await?;
    create_nodes(&lab, &[("a", "4"), ("b", "4")]).await?;
    let low =
        |name: &str, cpu: &str, node: &str| pod(name).cpu(cpu).priority_class(common::LOW).on(&lab.n(node));
    lab.create_pods([
        low("l-a", "2", "a"),
        low("l-small", "1", "a"),
        low("l-b", "2", "b"),
    ])
    .await?;
    create_gang_with_priority(&lab, "train", 2, common::HIGH.0).await?;
    let members = ["w1", "w2"].map(|n| {
        member(&lab, n, "train", "3")
            .priority_class(common::HIGH)
            .spec("schedulerName", json!("not-running"))
    });
    lab.create_pods(members).await?;
    let (json, stderr) = common::kubectl_sched_json(
        &lab,
        &[
            "preempt",
            "podgroup/train",
            "--profile",
            "default-scheduler",
            "--yes",
        ],
    )
    .await?;
    eprintln!("[gang] preempt podgroup/train: {}\n{stderr}", json["preemption"]);
    ensure!(
        json["situation"] == "planned" && json["complete"] == true,
        "preempt podgroup/train should plan and complete: {json}"
    );
    let mut victims: Vec<String> = json["preemption"]["nodes"]
        .as_array()
        .context("victims per node")?
        .iter()
        .flat_map(|n| n["victims"].as_array().into_iter().flatten())
        .filter_map(|v| v["name"].as_str().map(str::to_owned))
        .collect();
    victims.sort();
    ensure!(victims == ["l-a", "l-b"], "victims: {victims:?}");
    let left = pod_names(&lab).await?;
    ensure!(
        left == ["l-small", "w1", "w2"],
        "the victims should be gone and the spared pod left: {left:?}"
    );
    let pods: kube::Api<Pod> = kube::Api::namespaced(lab.client.clone(), &lab.ns);
    let mut nominated = Vec::new();
    for name in ["w1", "w2"] {
        let live = pods.get(name).await?;
        nominated.push(
            live.status
                .and_then(|s| s.nominated_node_name)
                .unwrap_or_default(),
        );
    }
    nominated.sort();
    ensure!(
        nominated == [lab.n("a"), lab.n("b")],
        "each gang pod should be nominated to its node: {nominated:?}"
    );
    Ok(())
}
