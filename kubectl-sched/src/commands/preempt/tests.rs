//! `preempt`'s unit tests: `--dry-run`'s defaults and refusals, the recheck of a plan against the
//! cluster read again, the exit codes.

use clap::Parser;
use k8s_openapi::api::core::v1::Pod;

use super::*;
use crate::cli::{Cli, Command};

fn args(line: &[&str]) -> PreemptArgs {
    let cli = Cli::try_parse_from(["kubectl-sched", "preempt"].iter().chain(line)).expect("parses");
    match cli.command {
        Command::Preempt(a) => a,
        other => panic!("not preempt: {other:?}"),
    }
}

#[test]
fn dry_run_defaults_and_refusals() {
    let cases: [(&[&str], Result<DryRun, &str>); 10] = [
        (&["p"], Ok(DryRun::None)),
        (&["p", "--yes"], Ok(DryRun::None)),
        (&["p", "--dry-run"], Ok(DryRun::Client)),
        (&["p", "--dry-run=server"], Ok(DryRun::Server)),
        (&["p", "--from", "f.yaml"], Ok(DryRun::Client)),
        (
            &["p", "--from", "f.yaml", "--dry-run=client", "--yes"],
            Ok(DryRun::Client),
        ),
        (&["-f", "p.yaml"], Ok(DryRun::Client)),
        (
            &["p", "--from", "f.yaml", "--yes"],
            Err("--from reads a snapshot file"),
        ),
        (
            &["p", "--from", "f.yaml", "--dry-run=server"],
            Err("execute --dry-run=server on"),
        ),
        (&["-f", "p.yaml", "--dry-run=none"], Err("-f drills a pod")),
    ];
    for (line, want) in cases {
        match (effective_dry_run(&args(line)), want) {
            (Ok(got), Ok(want)) => assert_eq!(got, want, "{line:?}"),
            (Err(e), Err(want)) => {
                assert_eq!(e.exit_code(), 2, "{line:?}");
                assert!(e.to_string().contains(want), "{line:?}: {e}");
            }
            (got, want) => panic!("{line:?}: got {got:?}, want {want:?}"),
        }
    }
}

fn node(name: &str) -> k8s_openapi::api::core::v1::Node {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "uid": format!("uid-{name}")},
        "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}},
    }))
    .expect("node")
}

fn pod(name: &str, uid: &str, rv: &str, priority: i32, cpu: &str, node: Option<&str>) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default", "uid": uid, "resourceVersion": rv},
        "spec": {
            "priority": priority,
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": if node.is_some() { "Running" } else { "Pending" }},
    }))
    .expect("pod")
}

/// n1 (2 CPUs) holds victim v1 (1.5 CPU); the pending preemptor p needs 1 CPU; n2 is full of a
/// pod of higher priority.
fn cluster(edit: impl FnOnce(&mut ClusterObjects)) -> ClusterObjects {
    let mut objects = ClusterObjects {
        nodes: vec![node("n1"), node("n2")],
        pods: vec![
            pod("v1", "uid-v1", "10", 10, "1500m", Some("n1")),
            pod("keep", "uid-keep", "11", 5000, "2", Some("n2")),
            pod("p", "uid-p", "12", 1000, "1", None),
        ],
        ..ClusterObjects::default()
    };
    edit(&mut objects);
    objects
}

fn find<'a>(objects: &'a mut ClusterObjects, name: &str) -> &'a mut Pod {
    objects
        .pods
        .iter_mut()
        .find(|p| p.metadata.name.as_deref() == Some(name))
        .expect("the pod")
}

/// Plans on the first cluster, then says what a second read changes.
fn recheck(edit: impl FnOnce(&mut ClusterObjects)) -> (PreemptReport, Evaluation, Option<String>) {
    let engine = Engine::default();
    let a = args(&["p"]);
    let first = evaluate(&engine, &a, cluster(|_| {}), "default", "test").expect("first");
    assert_eq!(first.situation, Situation::Planned);
    let preemptor = first.preemptor.clone();
    let report = PreemptReport {
        preemption: first.preemption,
        kube_version: engine.features().version,
        situation: first.situation,
        mode: VictimRemoval::Delete,
        dry_run: DryRunView::None,
        fits_on: first.fits_on,
        bound_to: first.bound_to,
        detail: first.detail,
        results: None,
        complete: None,
    };
    let second = evaluate(&engine, &a, cluster(edit), "default", "test").expect("second");
    let changed = what_changed(&report, &preemptor, &second);
    (report, second, changed)
}

#[test]
fn an_unchanged_cluster_yields_the_same_plan_with_fresh_resource_versions() {
    let (report, fresh, changed) = recheck(|_| {});
    assert_eq!(changed, None);
    assert_eq!(report.preemption.actions, fresh.preemption.actions);

    // The victim changed (a label, a status update): still the same victim, so the fresh plan goes
    // ahead, conditioned on the version read now.
    let (report, fresh, changed) = recheck(|o| {
        find(o, "v1").metadata.resource_version = Some("20".into());
    });
    assert_eq!(changed, None);
    let delete_rv = |actions: &[Action]| {
        actions.iter().find_map(|a| match a {
            Action::DeletePod { pod } => pod.resource_version.clone(),
            _ => None,
        })
    };
    assert_eq!(delete_rv(&report.preemption.actions).as_deref(), Some("10"));
    assert_eq!(delete_rv(&fresh.preemption.actions).as_deref(), Some("20"));
}

#[test]
fn a_victim_recreated_under_its_name_is_a_change() {
    let (_, _, changed) = recheck(|o| {
        let v1 = find(o, "v1");
        v1.metadata.uid = Some("uid-v1-new".into());
        v1.metadata.resource_version = Some("30".into());
    });
    assert_eq!(
        changed.as_deref(),
        Some("victim default/v1 was replaced by another pod of the same name (uid uid-v1, now uid-v1-new)")
    );
}

#[test]
fn a_preemptor_bound_recreated_or_deleted_is_a_change() {
    let (_, fresh, changed) = recheck(|o| {
        find(o, "p").spec.as_mut().expect("spec").node_name = Some("n2".into());
    });
    assert_eq!(fresh.situation, Situation::Bound);
    assert_eq!(changed.as_deref(), Some("pod default/p is now bound to node n2"));

    let (_, _, changed) = recheck(|o| find(o, "p").metadata.uid = Some("uid-p2".into()));
    assert_eq!(
        changed.as_deref(),
        Some("pod default/p was deleted and created again (uid uid-p, now uid-p2)")
    );

    let (_, _, changed) = recheck(|o| {
        find(o, "p").metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now()),
        );
    });
    assert_eq!(changed.as_deref(), Some("pod default/p is being deleted"));
}

#[test]
fn another_node_victim_or_step_is_a_change() {
    // The victim is gone: the pod fits.
    let (_, _, changed) = recheck(|o| o.pods.retain(|p| p.metadata.name.as_deref() != Some("v1")));
    assert_eq!(
        changed.as_deref(),
        Some("pod default/p now fits without preemption (on n1)")
    );
    // A second, cheaper victim on n2 instead: another node.
    let (_, _, changed) = recheck(|o| {
        o.pods.retain(|p| p.metadata.name.as_deref() != Some("keep"));
        o.pods
            .push(pod("cheap", "uid-cheap", "40", 1, "1500m", Some("n2")));
    });
    assert_eq!(
        changed.as_deref(),
        Some("preemption now chooses node n2 instead of n1")
    );
    // A lower-priority pod nominated to n1 meanwhile: its nomination would be cleared, a step
    // nobody confirmed.
    let (_, _, changed) = recheck(|o| {
        let mut waiting = pod("waiting", "uid-w", "50", 1, "100m", None);
        waiting
            .status
            .get_or_insert_with(Default::default)
            .nominated_node_name = Some("n1".into());
        o.pods.push(waiting);
    });
    assert_eq!(
        changed.as_deref(),
        Some("newly planned: clear nominatedNodeName of pod default/waiting (uid uid-w)")
    );
}

#[test]
fn changed_and_reread_errors_say_nothing_was_changed() {
    let e = PreemptError::Changed {
        reason: "pod default/p is now bound to node n2".into(),
        replanned: true,
    };
    assert_eq!(e.exit_code(), 1);
    assert_eq!(
        e.to_string(),
        "the cluster changed since the plan was shown: pod default/p is now bound to node n2; nothing \
             was changed, run again"
    );
    let e = PreemptError::Reread(Box::new(PreemptError::CycleFailed {
        pod: "default/p".into(),
        message: "boom".into(),
    }));
    assert_eq!(e.exit_code(), 1);
    assert!(e.to_string().ends_with("; nothing was changed"), "{e}");
}

#[test]
fn only_refusals_exit_2() {
    assert_eq!(PreemptError::Refused("x".into()).exit_code(), 2);
    assert_eq!(PreemptError::NotACandidate("x".into()).exit_code(), 1);
}
