//! Preemption per release, cross-plugin: the default profile of each release (its gates, its
//! plugins, its code changes) on small in-memory clusters, checked against the FailedScheduling
//! message each release's kube-scheduler writes and the candidate it picks. The rows of
//! `features::release` these scenarios show: `preemption_reports_placement`,
//! `dynamic_resources_says_no_new_claims`, `dynamic_resources_post_filter_checks_pod_claims_first`,
//! `pdb_violation_stops_at_first_budget`.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use crate::engine::Engine;
use crate::features::{FeatureGates, KubeVersion};
use crate::preemption::{DryRunOptions, PreemptionResult, dry_run};
use crate::schedule::{CycleResult, ScheduleOptions, schedule_cycle};
use crate::snapshot::ClusterObjects;
use crate::testing::{node, pdb, pod};

/// The releases whose words differ here: v1.33 (no DynamicResources), v1.35 (DynamicResources says
/// `no new claims to deallocate`), v1.37 (preemption reports its placement).
const V1_33: KubeVersion = KubeVersion::new(33, 13);
const V1_35: KubeVersion = KubeVersion::new(35, 4);
const V1_36: KubeVersion = KubeVersion::new(36, 3);
const V1_37: KubeVersion = KubeVersion::new(37, 1);

/// A cycle and a preemption dry run of `pending` with `features`' default profile.
fn run(features: FeatureGates, objects: ClusterObjects, pending: Pod) -> (CycleResult, PreemptionResult) {
    let engine = Engine::for_features(None, features).expect("default profile");
    let snapshot = Arc::new(engine.snapshot(objects));
    let fwk = engine.framework_for(&pending, snapshot).expect("framework");
    let info = engine.pod_info(pending);
    let cycle = schedule_cycle(&fwk, &info, ScheduleOptions::default());
    let options = DryRunOptions {
        pre_filter_message: cycle.explanation.pre_filter_message.clone(),
        now: Some(Timestamp::from_second(2_000_000_000).unwrap()),
        ..Default::default()
    };
    let preemption = dry_run(&fwk, &info, &cycle.node_statuses, &cycle.state, &options);
    (cycle, preemption)
}

fn release(version: KubeVersion) -> FeatureGates {
    FeatureGates::for_version(version)
}

fn cluster(nodes: Vec<k8s_openapi::api::core::v1::Node>, pods: Vec<Pod>) -> ClusterObjects {
    ClusterObjects {
        nodes,
        pods,
        ..Default::default()
    }
}

/// The FailedScheduling note the plan writes on the preemptor, if it plans anything.
fn failed_scheduling_note(p: &PreemptionResult) -> Option<&str> {
    p.actions.iter().find_map(|a| match a {
        crate::action::Action::Event(e) if e.reason == super::plan::EVENT_REASON_FAILED_SCHEDULING => {
            Some(e.note.as_str())
        }
        _ => None,
    })
}

#[test]
fn the_fit_error_of_a_pod_without_claims_follows_the_release() {
    let full = || node("n1").cpu("1").memory("1Gi");
    let placement = "0/1 nodes are available: 1 Insufficient cpu. preemption: found a potential placement for pod on node n1, preempting 1 victims";
    let no_victims = "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.";
    let never = "preemption: not eligible due to preemptionPolicy=Never.";
    let histogram = "0/1 nodes are available: 1 Insufficient cpu.";
    // (scenario, release, victim priority, preemptor policy, FailedScheduling message, planned node)
    type Case<'a> = (
        &'a str,
        FeatureGates,
        i32,
        Option<&'a str>,
        String,
        Option<&'a str>,
    );
    let cases: Vec<Case<'_>> = vec![
        (
            "v1.37: the placement is reported",
            release(V1_37),
            0,
            None,
            placement.to_string(),
            Some("n1"),
        ),
        (
            "v1.36: a successful preemption says nothing (DynamicResources' words are dropped with it)",
            release(V1_36),
            0,
            None,
            histogram.to_string(),
            Some("n1"),
        ),
        (
            "v1.35: same",
            release(V1_35),
            0,
            None,
            histogram.to_string(),
            Some("n1"),
        ),
        (
            "v1.33: same, without DynamicResources",
            release(V1_33),
            0,
            None,
            histogram.to_string(),
            Some("n1"),
        ),
        (
            "v1.37: no victims",
            release(V1_37),
            100,
            None,
            format!("{histogram} {no_victims}"),
            None,
        ),
        (
            "v1.36: DynamicResources speaks before DefaultPreemption",
            release(V1_36),
            100,
            None,
            format!("{histogram} no new claims to deallocate, {no_victims}"),
            None,
        ),
        (
            "v1.35: same",
            release(V1_35),
            100,
            None,
            format!("{histogram} no new claims to deallocate, {no_victims}"),
            None,
        ),
        (
            "v1.34: same",
            release(KubeVersion::new(34, 4)),
            100,
            None,
            format!("{histogram} no new claims to deallocate, {no_victims}"),
            None,
        ),
        (
            "v1.33: DynamicResources is not in the default profile",
            release(V1_33),
            100,
            None,
            format!("{histogram} {no_victims}"),
            None,
        ),
        (
            "v1.33 with DynamicResourceAllocation on: no words for a pod without claims",
            FeatureGates {
                dynamic_resource_allocation: true,
                ..release(V1_33)
            },
            100,
            None,
            format!("{histogram} {no_victims}"),
            None,
        ),
        (
            "v1.35: not eligible",
            release(V1_35),
            0,
            Some("Never"),
            format!("{histogram} no new claims to deallocate, {never}"),
            None,
        ),
        (
            "v1.37: not eligible",
            release(V1_37),
            0,
            Some("Never"),
            format!("{histogram} {never}"),
            None,
        ),
    ];
    for (name, features, victim_priority, policy, want, want_node) in cases {
        let mut preemptor = pod("high").cpu("500m").priority(10);
        if let Some(policy) = policy {
            preemptor = preemptor.preemption_policy(policy);
        }
        let (cycle, p) = run(
            features,
            cluster(
                vec![full().obj()],
                vec![pod("low").cpu("800m").priority(victim_priority).node("n1").obj()],
            ),
            preemptor.obj(),
        );
        // explain's message (RunPostFilterPlugins) and preempt's (the dry run) agree.
        assert_eq!(cycle.explanation.message, want, "{name}: explain");
        assert_eq!(p.failed_scheduling_message, want, "{name}: preempt");
        assert_eq!(p.node.as_deref(), want_node, "{name}");
        if want_node.is_some() {
            assert_eq!(failed_scheduling_note(&p), Some(want.as_str()), "{name}: event");
        }
    }
}

#[test]
fn a_pre_filter_rejection_leaves_dynamic_resources_without_state_except_on_v1_33() {
    // VolumeBinding's PreFilter rejects before DynamicResources' PreFilter runs: v1.34 on, its
    // PostFilter finds no state and fails (`not found`), which ends PostFilter (no preemption part);
    // v1.33 returns first for a pod without claims, and DefaultPreemption runs.
    let objects = || cluster(vec![node("n1").cpu("1").memory("1Gi").obj()], vec![]);
    let pending = || pod("p").pvc("missing").obj();
    let prefix = "0/1 nodes are available: persistentvolumeclaim \"missing\" not found.";
    let cases = [
        (
            "v1.33 with DynamicResourceAllocation on",
            FeatureGates {
                dynamic_resource_allocation: true,
                ..release(V1_33)
            },
            format!(
                "{prefix} preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
            ),
        ),
        ("v1.35", release(V1_35), format!("{prefix} not found")),
        ("v1.37", release(V1_37), format!("{prefix} not found")),
    ];
    for (name, features, want) in cases {
        let (cycle, p) = run(features, objects(), pending());
        assert_eq!(cycle.explanation.message, want, "{name}: explain");
        assert_eq!(p.failed_scheduling_message, want, "{name}: preempt");
    }
}

#[test]
fn tied_candidates_give_other_messages_only_where_the_message_names_the_node() {
    let n = |name: &str| node(name).cpu("1").memory("1Gi").obj();
    let low = |name: &str, on: &str| pod(name).cpu("800m").priority(0).node(on).obj();
    for (version, alternatives) in [(V1_37, 1), (V1_36, 0), (V1_33, 0)] {
        let (_, p) = run(
            release(version),
            cluster(vec![n("a"), n("b")], vec![low("la", "a"), low("lb", "b")]),
            pod("high").cpu("500m").priority(10).obj(),
        );
        assert_eq!(p.tied_nodes, ["a", "b"], "{version}");
        assert_eq!(p.message_alternatives.len(), alternatives, "{version}");
        let message_is_random = p.random_outcome.iter().any(|r| r.starts_with("message:"));
        assert_eq!(
            message_is_random,
            alternatives > 0,
            "{version}: {:?}",
            p.random_outcome
        );
    }
}

#[test]
fn a_victim_covered_by_two_budgets_changes_the_pick_from_v1_37() {
    // n1: a (budgets p1 with no disruption left, and p2 with one) and b (p2), priority 5. n2: c and
    // d, each with its own exhausted budget, priority 1. Both nodes need both victims gone.
    // v1.37 stops charging a at p1, so b keeps p2's disruption: n1 has 1 violation against n2's 2.
    // v1.36 charges p2 for a too, so b violates it: 2 against 2, and the lower victims' priority
    // picks n2.
    let objects = || ClusterObjects {
        nodes: vec![
            node("n1").cpu("2").memory("4Gi").obj(),
            node("n2").cpu("2").memory("4Gi").obj(),
        ],
        pods: vec![
            pod("a")
                .cpu("1")
                .priority(5)
                .label("app", "x")
                .label("tier", "y")
                .node("n1")
                .obj(),
            pod("b").cpu("1").priority(5).label("app", "x").node("n1").obj(),
            pod("c").cpu("1").priority(1).label("c", "1").node("n2").obj(),
            pod("d").cpu("1").priority(1).label("d", "1").node("n2").obj(),
        ],
        pod_disruption_budgets: vec![
            pdb("p1").selector("tier", "y").allowed(0).obj(),
            pdb("p2").selector("app", "x").allowed(1).obj(),
            pdb("pc").selector("c", "1").allowed(0).obj(),
            pdb("pd").selector("d", "1").allowed(0).obj(),
        ],
        ..Default::default()
    };
    for (version, want_node, want_violations) in [(V1_37, "n1", 1), (V1_36, "n2", 2), (V1_33, "n2", 2)] {
        let (_, p) = run(
            release(version),
            objects(),
            pod("high").cpu("2").priority(10).obj(),
        );
        assert_eq!(p.node.as_deref(), Some(want_node), "{version}");
        assert_eq!(p.pdb_violations, want_violations, "{version}");
        let n1 = p
            .candidates
            .iter()
            .find(|c| c.node == "n1")
            .expect("n1 is a candidate");
        let violating: Vec<&str> = n1
            .victims
            .iter()
            .filter(|v| v.pdb_violation)
            .map(|v| v.name.as_str())
            .collect();
        let want: &[&str] = if version == V1_37 { &["a"] } else { &["a", "b"] };
        assert_eq!(violating, want, "{version}");
    }
}
