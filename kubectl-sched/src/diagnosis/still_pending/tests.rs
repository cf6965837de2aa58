//! "Why is it still Pending?"'s unit tests: each finding from in-memory pods, events and leases.

use std::sync::Arc;

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::api::core::v1::{EventSeries, PodSchedulingGate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use sched_core::Engine;
use sched_core::engine::schedule;
use sched_core::testing::{PodBuilder, node, pod, snapshot};

use super::*;

const NOW: i64 = 1_800_000_000;

fn at(seconds_before_now: i64) -> Timestamp {
    Timestamp::from_second(NOW - seconds_before_now).unwrap()
}

fn unschedulable_since(p: PodBuilder, seconds_before_now: i64, message: &str) -> PodBuilder {
    p.with(|p| {
        p.status
            .get_or_insert_with(Default::default)
            .conditions
            .get_or_insert_with(Vec::new)
            .push(PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: Some("Unschedulable".into()),
                message: Some(message.into()),
                last_transition_time: Some(Time(at(seconds_before_now))),
                ..PodCondition::default()
            });
    })
}

fn gated(p: PodBuilder, gates: &[&str]) -> PodBuilder {
    let gates: Vec<PodSchedulingGate> = gates
        .iter()
        .map(|g| PodSchedulingGate { name: g.to_string() })
        .collect();
    p.with(|p| p.spec.get_or_insert_with(Default::default).scheduling_gates = Some(gates))
}

fn victim(name: &str, finalizers: &[&str]) -> PodBuilder {
    let finalizers: Vec<String> = finalizers.iter().map(ToString::to_string).collect();
    pod(name).cpu("3").node("n1").with(|p| {
        p.metadata.deletion_timestamp = Some(Time(at(120)));
        p.metadata.finalizers = (!finalizers.is_empty()).then_some(finalizers);
    })
}

fn lease(holder: &str, renewed_seconds_ago: i64) -> SchedulerPresence {
    SchedulerPresence::Lease(SchedulerLease::from_lease(&Lease {
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.into()),
            renew_time: Some(MicroTime(at(renewed_seconds_ago))),
            lease_duration_seconds: Some(15),
            ..LeaseSpec::default()
        }),
        ..Lease::default()
    }))
}

fn event(message: &str, seconds_before_now: i64, count: i32) -> LastSchedulingEvent {
    LastSchedulingEvent {
        message: message.into(),
        at: Some(at(seconds_before_now)),
        count,
    }
}

struct Case {
    name: &'static str,
    pod: PodBuilder,
    /// Pods on n1 (cpu 4), besides the pending one.
    placed: Vec<PodBuilder>,
    profile_known: bool,
    scheduler: Option<SchedulerPresence>,
    events: Vec<LastSchedulingEvent>,
    /// The kinds found, in order.
    kinds: Vec<PendingKind>,
    /// Text each finding's message must contain, in order.
    says: Vec<&'static str>,
    pods: Vec<&'static str>,
}

fn case(name: &'static str, pod: PodBuilder) -> Case {
    Case {
        name,
        pod,
        placed: Vec::new(),
        profile_known: true,
        scheduler: Some(lease("sched-1", 3)),
        events: Vec::new(),
        kinds: Vec::new(),
        says: Vec::new(),
        pods: Vec::new(),
    }
}

fn run(c: &Case) -> Vec<PendingFinding> {
    let snap = Arc::new(snapshot(
        vec![node("n1").cpu("4").obj()],
        c.placed.iter().map(|p| p.clone().obj()).collect(),
    ));
    let info = PodInfo::new(c.pod.clone().obj());
    let engine = Engine::default();
    let profile = engine.profile("default-scheduler").unwrap();
    let fwk = engine.framework(profile, snap.clone()).unwrap();
    let verdict = schedule(&fwk, &info, engine.schedule_options(false));
    why_still_pending(
        &info,
        &verdict,
        c.profile_known,
        &snap,
        c.scheduler.as_ref(),
        &c.events,
        at(0),
    )
}

#[test]
fn findings_by_case() {
    let cases = vec![
        Case {
            kinds: vec![PendingKind::NoProfile],
            profile_known: false,
            says: vec!["schedulerName \"my-scheduler\" names no profile"],
            ..case("no_profile", pod("p").scheduler_name("my-scheduler"))
        },
        Case {
            scheduler: Some(SchedulerPresence::NoLease),
            kinds: vec![PendingKind::NoScheduler],
            says: vec!["no kube-scheduler holds the Lease kube-system/kube-scheduler: it does not exist"],
            ..case("no_lease", pod("p").cpu("1"))
        },
        Case {
            scheduler: Some(lease("sched-1", 100)),
            kinds: vec![PendingKind::NoScheduler],
            says: vec![
                "last renewed by sched-1 2027-01-15T07:58:20Z, 1m40s ago, longer ago than its leaseDurationSeconds (15 s)",
            ],
            ..case("stale_lease", pod("p").cpu("1"))
        },
        Case {
            scheduler: Some(SchedulerPresence::Lease(SchedulerLease {
                holder: None,
                renewed: Some(at(30)),
                lease_duration: Duration::from_secs(1),
            })),
            kinds: vec![PendingKind::NoScheduler],
            says: vec!["its last leader released it"],
            ..case("released_lease", pod("p").cpu("1"))
        },
        Case {
            // The Lease does not speak for another scheduler's pods.
            scheduler: Some(SchedulerPresence::NoLease),
            profile_known: false,
            kinds: vec![PendingKind::NoProfile],
            says: vec!["names no profile"],
            ..case("no_profile_ignores_the_lease", pod("p").scheduler_name("other"))
        },
        Case {
            kinds: vec![PendingKind::Gated],
            says: vec!["scheduling gates (example.com/wait, example.com/quota)"],
            ..case(
                "gated",
                gated(pod("p").cpu("1"), &["example.com/wait", "example.com/quota"]),
            )
        },
        Case {
            placed: vec![victim("v1", &["example.com/stuck"]), victim("v2", &[])],
            kinds: vec![PendingKind::VictimsTerminating],
            says: vec![
                "nominated to n1 (status.nominatedNodeName) and waits there for 2 terminating pod(s) \
                     to be gone, whose requests still count on the node: default/v1 (deletionTimestamp \
                     2027-01-15T07:58:00Z, 2m0s ago; finalizers: example.com/stuck), default/v2 \
                     (deletionTimestamp 2027-01-15T07:58:00Z, 2m0s ago; no finalizers: its kubelet has \
                     not confirmed it is gone); a finalizer that nobody removes",
            ],
            pods: vec!["default/v1", "default/v2"],
            ..case(
                "victims_terminating",
                unschedulable_since(pod("p").cpu("2").nominated("n1"), 60, "0/1 nodes are available"),
            )
        },
        Case {
            kinds: vec![PendingKind::FitsNow],
            events: vec![
                event("old", 600, 1),
                event("0/1 nodes are available: 1 Insufficient cpu.", 40, 3),
            ],
            says: vec![
                "it fits now (on n1), but kube-scheduler's last word was that it does not \
                     (PodScheduled=False (Unschedulable) since 2027-01-15T07:55:00Z, 5m0s ago: \"0/1 nodes \
                     are available: 1 Insufficient cpu.\"; FailedScheduling event (seen 3 times) last \
                     2027-01-15T07:59:20Z, 40s ago, same message): the cluster changed since",
            ],
            ..case(
                "fits_now",
                unschedulable_since(
                    pod("p").cpu("1"),
                    300,
                    "0/1 nodes are available: 1 Insufficient cpu.",
                ),
            )
        },
        Case {
            // No live facts (a snapshot file): the condition alone.
            scheduler: None,
            kinds: vec![PendingKind::FitsNow],
            says: vec!["at the latest after 5 min in its unschedulable queue"],
            ..case(
                "fits_now_from_a_file",
                unschedulable_since(pod("p").cpu("1"), 30, "no"),
            )
        },
        Case {
            // An event whose note differs from the condition's message is quoted too.
            events: vec![event("first words", 10, 1)],
            kinds: vec![PendingKind::FitsNow],
            says: vec![
                "since 2027-01-15T07:59:30Z, 30s ago: \"later words\"; FailedScheduling event last \
                     2027-01-15T07:59:50Z, 10s ago: \"first words\")",
            ],
            ..case(
                "fits_now_two_messages",
                unschedulable_since(pod("p").cpu("1"), 30, "later words"),
            )
        },
        Case {
            // Still unschedulable, as kube-scheduler said: nothing to add to the verdict.
            placed: vec![pod("big").cpu("3").node("n1")],
            ..case(
                "agrees",
                unschedulable_since(pod("p").cpu("2"), 30, "0/1 nodes are available"),
            )
        },
        Case {
            kinds: vec![PendingKind::NeverTried],
            says: vec![
                "no PodScheduled condition and no FailedScheduling event, although a kube-scheduler runs (sched-1 holds the Lease kube-system/kube-scheduler, renewed 2027-01-15T07:59:57Z, 3s ago)",
            ],
            ..case("never_tried", pod("p").cpu("1"))
        },
        Case {
            // Maybe one runs without leader election: what it said still counts.
            scheduler: Some(SchedulerPresence::NoLease),
            kinds: vec![PendingKind::NoScheduler, PendingKind::FitsNow],
            says: vec!["does not exist", "it fits now (on n1)"],
            ..case(
                "no_lease_but_it_said_unschedulable",
                unschedulable_since(pod("p").cpu("1"), 30, "no"),
            )
        },
        Case {
            // A snapshot file: silence proves nothing.
            scheduler: None,
            ..case("never_tried_unknown_from_a_file", pod("p").cpu("1"))
        },
        Case {
            // Gated and nobody leading: both said; "never tried" is not (the gate explains it).
            scheduler: Some(SchedulerPresence::NoLease),
            kinds: vec![PendingKind::NoScheduler, PendingKind::Gated],
            says: vec!["does not exist", "(g)"],
            ..case("gated_and_no_scheduler", gated(pod("p"), &["g"]))
        },
    ];
    for c in &cases {
        let found = run(c);
        let kinds: Vec<PendingKind> = found.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, c.kinds, "{}: {found:#?}", c.name);
        for (f, says) in found.iter().zip(&c.says) {
            assert!(
                f.message.contains(says),
                "{}: {:?} lacks {says:?}",
                c.name,
                f.message
            );
        }
        let pods: Vec<String> = found.iter().flat_map(|f| f.pods.clone()).collect();
        assert_eq!(pods, c.pods, "{}", c.name);
    }
}

#[test]
fn a_victim_in_its_grace_period_says_so() {
    let future = pod("v").cpu("3").node("n1").with(|p| {
        p.metadata.deletion_timestamp = Some(Time(at(-10)));
    });
    let c = Case {
        placed: vec![future],
        ..case("grace", pod("p").cpu("2").nominated("n1"))
    };
    let found = run(&c);
    let f = found
        .iter()
        .find(|f| f.kind == PendingKind::VictimsTerminating)
        .expect("a victims finding");
    assert!(
        f.message.contains(
            "default/v (deletionTimestamp 2027-01-15T08:00:10Z, in 10s, grace period not over; no finalizers"
        ),
        "{}",
        f.message
    );
    assert!(!f.message.contains("forever"), "{}", f.message);
}

#[test]
fn a_gated_pod_that_is_no_longer_gated_and_fits_says_so() {
    let p = pod("p")
        .cpu("1")
        .condition("PodScheduled", "False", "SchedulingGated");
    let found = run(&case("ungated", p));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].message.contains("its scheduling gates are gone"),
        "{found:#?}"
    );
}

#[test]
fn events_read_their_latest_time_and_count() {
    let mut e = Event {
        message: Some("m".into()),
        event_time: Some(MicroTime(at(50))),
        ..Event::default()
    };
    assert_eq!(
        LastSchedulingEvent::from_event(&e),
        event("m", 50, 1),
        "an event without a series"
    );
    e.series = Some(EventSeries {
        count: Some(4),
        last_observed_time: Some(MicroTime(at(5))),
    });
    assert_eq!(LastSchedulingEvent::from_event(&e), event("m", 5, 4));
    // Nothing at all: no time, seen once, no panic.
    let bare = LastSchedulingEvent::from_event(&Event::default());
    assert_eq!((bare.at, bare.count, bare.message.as_str()), (None, 1, ""));
}

#[test]
fn leases_without_a_spec_or_with_odd_durations_are_read_safely() {
    let bare = SchedulerLease::from_lease(&Lease::default());
    assert_eq!(
        (bare.holder, bare.renewed, bare.lease_duration),
        (None, None, DEFAULT_LEASE_DURATION)
    );
    let odd = SchedulerLease::from_lease(&Lease {
        spec: Some(LeaseSpec {
            holder_identity: Some(String::new()),
            lease_duration_seconds: Some(-3),
            ..LeaseSpec::default()
        }),
        ..Lease::default()
    });
    assert_eq!((odd.holder, odd.lease_duration), (None, DEFAULT_LEASE_DURATION));
}

#[test]
fn spans_read_naturally() {
    for (seconds, text) in [
        (0, "0s"),
        (59, "59s"),
        (200, "3m20s"),
        (7500, "2h5m"),
        (273_600, "3d4h"),
        (u64::MAX, "213503982334601d7h"),
    ] {
        assert_eq!(span(seconds), text);
    }
    assert_eq!(when(at(-25), at(0)), "2027-01-15T08:00:25Z, in 25s");
}

#[test]
fn a_pod_waiting_for_its_resource_claim_blames_the_resourceclaim_controller_not_kube_scheduler() {
    use k8s_openapi::api::core::v1::PodResourceClaim;
    use k8s_openapi::api::resource::v1::ResourceClaimTemplate;
    use sched_core::snapshot::ClusterObjects;

    let template: ResourceClaimTemplate = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "notebook-gpu", "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
        ]}}},
    }))
    .unwrap();
    let notebook = pod("notebook")
        .with(|p| {
            p.spec.as_mut().unwrap().resource_claims = Some(vec![PodResourceClaim {
                name: "gpu".into(),
                resource_claim_template_name: Some("notebook-gpu".into()),
                ..Default::default()
            }]);
        })
        .obj();
    let cases = [
        (
            vec![template],
            "the resourceclaim controller makes it from template notebook-gpu",
        ),
        (Vec::new(), "its template notebook-gpu does not exist"),
    ];
    for (templates, says) in cases {
        let snap = Arc::new(Snapshot::new(ClusterObjects {
            nodes: vec![node("n1").cpu("4").obj()],
            resource_claim_templates: templates,
            ..Default::default()
        }));
        let info = PodInfo::new(notebook.clone());
        let engine = Engine::default();
        let fwk = engine
            .framework(engine.profile("default-scheduler").unwrap(), snap.clone())
            .unwrap();
        let verdict = schedule(&fwk, &info, engine.schedule_options(false));
        assert_eq!(verdict.outcome, Outcome::Gated, "{}", verdict.message);
        // A kube-scheduler leads and has said nothing: it has nothing to try, it is not to blame.
        let found = why_still_pending(
            &info,
            &verdict,
            true,
            &snap,
            Some(&lease("sched-1", 3)),
            &[],
            at(0),
        );
        let kinds: Vec<PendingKind> = found.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, [PendingKind::ClaimNotCreated], "{found:#?}");
        for part in [
            "ResourceClaim default/notebook-gpu-… (claim gpu) is not created yet",
            says,
            // kube-scheduler's own words (DynamicResources' PreEnqueue).
            r#""pod \"default/notebook\": ResourceClaim not created yet""#,
        ] {
            assert!(
                found[0].message.contains(part),
                "{:?} lacks {part:?}",
                found[0].message
            );
        }
    }
}
