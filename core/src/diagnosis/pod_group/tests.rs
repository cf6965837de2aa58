//! The pod group diagnosis on in-memory clusters built with the test builders.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PodSchedulingGate;

use super::*;
use crate::engine::schedule;
use crate::features::FeatureGates;
use crate::snapshot::ClusterObjects;
use crate::testing::{gang, node, pod};

/// One minCount-`min_count` gang `pg` of `members` pending pods asking `cpu` each, on
/// `nodes` nodes of 4 cpu.
fn cluster(nodes: usize, min_count: i32, members: usize, cpu: &str) -> ClusterObjects {
    ClusterObjects {
        nodes: (1..=nodes)
            .map(|i| node(&format!("n{i}")).cpu("4").memory("8Gi").pods("110").obj())
            .collect(),
        pods: (1..=members)
            .map(|i| pod(&format!("w{i}")).pod_group("pg").cpu(cpu).obj())
            .collect(),
        pod_groups: vec![gang("pg", min_count).obj()],
        ..Default::default()
    }
}

fn engine(gang_on: bool) -> Engine {
    let v1_37 = FeatureGates::v1_37();
    let gates = if gang_on {
        v1_37.with_overrides("GenericWorkload=true").expect("gate")
    } else {
        v1_37
    };
    Engine::for_features(None, gates).expect("engine")
}

fn report_on(engine: &Engine, objects: ClusterObjects) -> (Framework, Option<PodGroupReport>) {
    let snapshot = Arc::new(engine.snapshot(objects));
    let fwk = engine
        .framework(engine.profile("").expect("profile"), snapshot)
        .expect("framework");
    let report = diagnose_pod_group(engine, &fwk, "default", "pg", Depth::Full);
    (fwk, report)
}

fn gated(mut objects: ClusterObjects, name: &str) -> ClusterObjects {
    for p in &mut objects.pods {
        if p.metadata.name.as_deref() == Some(name) {
            p.spec.get_or_insert_default().scheduling_gates =
                Some(vec![PodSchedulingGate { name: "hold".into() }]);
        }
    }
    objects
}

fn without_pod_group(mut objects: ClusterObjects) -> ClusterObjects {
    objects.pod_groups.clear();
    objects
}

fn basic(mut objects: ClusterObjects) -> ClusterObjects {
    objects.pod_groups = vec![gang("pg", 1).basic().obj()];
    objects
}

fn all_bound(mut objects: ClusterObjects) -> ClusterObjects {
    for p in &mut objects.pods {
        p.spec.get_or_insert_default().node_name = Some("n1".into());
    }
    objects
}

struct Case {
    name: &'static str,
    gang_on: bool,
    objects: ClusterObjects,
    outcome: GroupOutcome,
    message: &'static str,
    /// (placeable together, fit one by one)
    placed: (usize, usize),
    blocked_by: &'static [(&'static str, usize)],
    /// node → pods the cycle placed there
    takes: &'static [(&'static str, &'static [&'static str])],
    fixes: &'static [&'static str],
}

/// A group kube-scheduler places nothing of and for which nothing is to fix: held, or not a gang.
fn held(
    name: &'static str,
    gang_on: bool,
    objects: ClusterObjects,
    outcome: GroupOutcome,
    message: &'static str,
) -> Case {
    Case {
        name,
        gang_on,
        objects,
        outcome,
        message,
        placed: (0, 0),
        blocked_by: &[],
        takes: &[],
        fixes: &[],
    }
}

/// The group's verdict in kube-scheduler's words, node by node, and the checked fixes.
#[test]
fn a_group_is_diagnosed_as_its_cycle_decides_it() {
    let cases = [
        Case {
            name: "minCount above capacity",
            gang_on: true,
            objects: cluster(1, 3, 3, "2"),
            outcome: GroupOutcome::Unschedulable,
            message: "pod group is unschedulable, minCount (3) cannot be satisfied: 2 scheduled, 0 \
                      remaining, pod group preemption: No preemption victims found for incoming preemptor",
            placed: (0, 2),
            blocked_by: &[("Insufficient cpu", 1)],
            takes: &[("n1", &["w1", "w2"])],
            fixes: &["lower the PodGroup's minCount to 2", "add 1 more node like n1"],
        },
        Case {
            name: "two pods short: two more nodes",
            gang_on: true,
            objects: cluster(2, 4, 4, "3"),
            outcome: GroupOutcome::Unschedulable,
            message: "pod group is unschedulable, minCount (4) cannot be satisfied: 2 scheduled, 1 \
                      remaining, pod group preemption: No preemption victims found for incoming preemptor",
            placed: (0, 2),
            blocked_by: &[("Insufficient cpu", 2)],
            takes: &[("n1", &["w1"]), ("n2", &["w2"])],
            fixes: &["lower the PodGroup's minCount to 2", "add 2 more nodes like n1"],
        },
        held(
            "a gated member leaves fewer queued pods than minCount",
            true,
            gated(cluster(1, 3, 3, "1"), "w3"),
            GroupOutcome::Unschedulable,
            "pod group is unschedulable, minCount (3) cannot be satisfied: 0 scheduled, 2 remaining",
        ),
        Case {
            name: "the whole gang fits",
            gang_on: true,
            objects: cluster(2, 3, 3, "2"),
            outcome: GroupOutcome::Schedulable,
            message: "",
            placed: (3, 3),
            blocked_by: &[],
            takes: &[("n1", &["w1", "w3"]), ("n2", &["w2"])],
            fixes: &[],
        },
        held(
            "quorum not reached",
            true,
            cluster(1, 3, 2, "1"),
            GroupOutcome::WaitingForQuorum,
            "waiting for minCount pods from a gang to appear in scheduling queue",
        ),
        held(
            "the PodGroup does not exist",
            true,
            without_pod_group(cluster(1, 2, 2, "1")),
            GroupOutcome::WaitingForPodGroup,
            "waiting for pods's pod group \"pg\" to appear in scheduling queue",
        ),
        held(
            "every pod bound",
            true,
            all_bound(cluster(1, 2, 2, "1")),
            GroupOutcome::AllScheduled,
            "",
        ),
        held(
            "the basic policy",
            true,
            basic(cluster(1, 3, 3, "2")),
            GroupOutcome::NotAGang,
            "",
        ),
        held(
            "GenericWorkload off (v1.37's default)",
            false,
            cluster(1, 3, 3, "2"),
            GroupOutcome::GangSchedulingOff,
            "",
        ),
    ];
    for case in cases {
        let engine = engine(case.gang_on);
        let (fwk, report) = report_on(&engine, case.objects);
        let report = report.unwrap_or_else(|| panic!("{}: no report", case.name));
        assert_eq!(
            (report.outcome, report.message.as_str()),
            (case.outcome, case.message),
            "{}",
            case.name
        );
        assert_eq!(
            (report.placeable_together, report.fit_one_by_one),
            case.placed,
            "{}",
            case.name
        );
        let blocked: Vec<(&str, usize)> = report
            .blocked_by
            .iter()
            .map(|b| (b.reason.as_str(), b.nodes))
            .collect();
        assert_eq!(blocked, case.blocked_by, "{}", case.name);
        let takes: Vec<(&str, Vec<&str>)> = report
            .nodes
            .iter()
            .filter(|n| !n.takes.is_empty())
            .map(|n| (n.node.as_str(), n.takes.iter().map(String::as_str).collect()))
            .collect();
        let expected: Vec<(&str, Vec<&str>)> =
            case.takes.iter().map(|(n, pods)| (*n, pods.to_vec())).collect();
        assert_eq!(takes, expected, "{}", case.name);
        let fixes: Vec<&str> = report.fixes.iter().map(|f| f.description.as_str()).collect();
        assert_eq!(fixes, case.fixes, "{}", case.name);
        // Each pod's words are the ones `explain POD` gives it (the per-pod cycle with the
        // group's verdict).
        if matches!(
            case.outcome,
            GroupOutcome::Unschedulable | GroupOutcome::Schedulable
        ) {
            for m in report.members.iter().filter(|m| m.state != MemberState::Gated) {
                let info = fwk.snapshot().pod("default", &m.pod).expect("member").clone();
                let alone = schedule(&fwk, &info, engine.schedule_options(false));
                assert_eq!(m.message, alone.message, "{}: {}", case.name, m.pod);
            }
        }
    }
}

/// A node the cycle refuses the next pod on is explained down to the resource, and every fix,
/// applied, makes the group schedulable.
#[test]
fn findings_explain_the_first_pod_left_over_and_fixes_are_checked() {
    let engine = engine(true);
    let (fwk, report) = report_on(&engine, cluster(1, 3, 3, "2"));
    let report = report.expect("report");
    assert_eq!(report.first_unplaced.as_deref(), Some("w3"));
    let finding = report.findings.first().expect("a finding");
    assert_eq!(
        (finding.plugin.as_str(), finding.nodes.as_slice()),
        ("NodeResourcesFit", ["n1".to_string()].as_slice())
    );
    let node = &report.nodes[0];
    assert_eq!(
        (node.rejected_by.as_deref(), node.reasons.as_slice()),
        (
            Some("NodeResourcesFit"),
            ["Insufficient cpu".to_string()].as_slice()
        )
    );
    for fix in &report.fixes {
        let mut changed = (**fwk.snapshot()).clone();
        match &fix.change {
            GroupChange::LowerMinCount { to } => {
                let mut group = (**changed.pod_group("default", "pg").expect("pg")).clone();
                group
                    .spec
                    .scheduling_policy
                    .gang
                    .as_mut()
                    .expect("gang")
                    .min_count = *to;
                changed.pod_groups.insert("default/pg".into(), Arc::new(group));
            }
            GroupChange::AddNodesLike { node, count } => {
                for i in 0..*count {
                    changed.add_node_like(node, &format!("extra-{i}")).expect("node");
                }
            }
        }
        let changed = fwk.on_snapshot(Arc::new(changed)).expect("framework");
        let again = diagnose_pod_group(&engine, &changed, "default", "pg", Depth::Summary).expect("report");
        assert_eq!(again.outcome, GroupOutcome::Schedulable, "{}", fix.description);
    }
}

#[test]
fn nothing_to_report_when_neither_the_group_nor_its_pods_exist() {
    let engine = engine(true);
    let mut objects = cluster(1, 3, 3, "2");
    objects.pods.clear();
    objects.pod_groups.clear();
    assert!(report_on(&engine, objects).1.is_none());
}

/// A PodGroup under a CompositePodGroup (gate on) is reported with its tree: the gang that fits
/// alone is held with the tree, whose root says why, and each group shows what it needs and has.
#[test]
fn a_member_of_a_tree_is_reported_with_its_tree() {
    let objects = crate::testing::small_and_big_gang_tree();
    let gates = FeatureGates::v1_37()
        .with_overrides("GenericWorkload=true,TopologyAwareWorkloadScheduling=true,CompositePodGroup=true")
        .expect("gates");
    let engine = Engine::for_features(None, gates).expect("engine");
    let snapshot = Arc::new(engine.snapshot(objects));
    let fwk = engine
        .framework(engine.profile("").expect("profile"), snapshot)
        .expect("framework");
    let report = diagnose_pod_group(&engine, &fwk, "default", "a-small", Depth::Full).expect("report");
    assert_eq!(report.outcome, GroupOutcome::Unschedulable);
    let tree = report.tree.as_ref().expect("tree");
    assert!(!tree.fits);
    assert_eq!(
        tree.message,
        "pod group is unschedulable, 0/1 placements are available, first placement status: minCount (2) \
         cannot be satisfied: 1 scheduled, 0 remaining, pod group preemption: No preemption victims found \
         for incoming preemptor, pod group preemption: No preemption victims found for incoming preemptor"
    );
    let groups: Vec<(usize, &str, i32, usize)> = tree
        .groups
        .iter()
        .map(|g| (g.depth, g.name.as_str(), g.needs, g.has))
        .collect();
    assert_eq!(
        groups,
        [(0, "job", 2, 2), (1, "a-small", 1, 1), (1, "b-big", 2, 2)]
    );
    let s1 = &report.members[0];
    assert_eq!((s1.pod.as_str(), s1.state), ("s1", MemberState::NotReached));
    assert!(
        report.summary(1).contains("tree job: does not fit whole"),
        "{}",
        report.summary(1)
    );
}
