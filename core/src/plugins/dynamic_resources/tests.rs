//! Table-driven tests of DynamicResources' extension points on in-memory snapshots. Allocation
//! itself is tested with the allocator (`crate::dra::structured`); these cover what the plugin
//! decides around it.

use k8s_openapi::api::core::v1::{PodResourceClaim, PodResourceClaimStatus};
use k8s_openapi::api::resource::v1::{AllocationResult, DeviceClass, ResourceClaim};
use serde_json::{Value, json};

use super::post_filter::{PostFilterWords, post_filter_status};
use super::*;
use crate::features::KubeVersion;
use crate::framework::status::Code;
use crate::snapshot::{ClusterObjects, Snapshot};
use crate::testing::{node, pod};

fn claim(name: &str, spec: Value, status: Value) -> ResourceClaim {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": spec,
        "status": status,
    }))
    .expect("claim JSON")
}

fn class(name: &str) -> DeviceClass {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {}})).expect("class JSON")
}

fn exactly(request: &str, class: &str) -> Value {
    json!({"devices": {"requests": [{"name": request, "exactly": {"deviceClassName": class}}]}})
}

fn allocation_on(node: &str) -> Value {
    json!({"allocation": {
        "devices": {"results": [{"request": "gpu", "driver": "d", "pool": node, "device": "dev-0"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
    }})
}

fn plugin(claims: Vec<ResourceClaim>, classes: Vec<DeviceClass>) -> DynamicResources {
    DynamicResources::for_snapshot(Arc::new(Snapshot::new(ClusterObjects {
        resource_claims: claims,
        device_classes: classes,
        ..Default::default()
    })))
}

fn pod_with_claims(names: &[&str]) -> PodInfo {
    let claims: Vec<PodResourceClaim> = names
        .iter()
        .map(|n| PodResourceClaim {
            name: format!("c-{n}"),
            resource_claim_name: Some(n.to_string()),
            ..Default::default()
        })
        .collect();
    pod("p")
        .with(move |p| {
            p.metadata.uid = Some("uid-p".into());
            p.spec.as_mut().unwrap().resource_claims = Some(claims);
        })
        .info()
}

#[test]
fn pre_filter_skips_pods_without_claims_and_rejects_what_kube_scheduler_rejects() {
    let allocated_elsewhere = claim("allocated", exactly("gpu", "gpu"), allocation_on("n1"));
    let unknown_type = claim(
        "odd",
        json!({"devices": {"requests": [{"name": "r"}]}}),
        json!({}),
    );
    let sub_requests = claim(
        "subs",
        json!({"devices": {"requests": [{"name": "r", "firstAvailable": [
            {"name": "big", "deviceClassName": "gpu"}, {"name": "small", "deviceClassName": "nope"}]}]}}),
        json!({}),
    );
    let pl = plugin(
        vec![
            claim("ok", exactly("gpu", "gpu"), json!({})),
            claim("no-class", exactly("gpu", "missing"), json!({})),
            allocated_elsewhere,
            unknown_type,
            sub_requests,
        ],
        vec![class("gpu")],
    );
    let cases: [(&str, PodInfo, Code, &str); 6] = [
        ("no claims", pod("p").info(), Code::Skip, ""),
        ("class exists", pod_with_claims(&["ok"]), Code::Success, ""),
        (
            "missing class",
            pod_with_claims(&["ok", "no-class"]),
            Code::UnschedulableAndUnresolvable,
            "request gpu: device class missing does not exist",
        ),
        (
            "allocated claims need no class check",
            pod_with_claims(&["allocated"]),
            Code::Success,
            "",
        ),
        (
            "request without exactly or firstAvailable",
            pod_with_claims(&["odd"]),
            Code::UnschedulableAndUnresolvable,
            "resource claim default/odd, request r: unknown request type",
        ),
        (
            "every subrequest's class must exist",
            pod_with_claims(&["subs"]),
            Code::UnschedulableAndUnresolvable,
            "request r/small: device class nope does not exist",
        ),
    ];
    for (name, p, code, message) in cases {
        let mut state = CycleState::new();
        let (_, s) = pl.pre_filter(&mut state, &p, &[]);
        assert_eq!(s.code(), code, "{name}: {s:?}");
        assert_eq!(s.message(), message, "{name}");
        assert!(
            state.read(&STATE_KEY).is_some(),
            "{name}: state is written even on rejection"
        );
    }
}

#[test]
fn allocated_claims_are_available_only_where_their_node_selector_matches() {
    let pl = plugin(
        vec![claim("a", exactly("gpu", "gpu"), allocation_on("n1"))],
        vec![class("gpu")],
    );
    let p = pod_with_claims(&["a"]);
    let mut state = CycleState::new();
    assert!(pl.pre_filter(&mut state, &p, &[]).1.is_success());
    let n1 = node("n1").info_with(vec![]);
    let n2 = node("n2").info_with(vec![]);
    assert!(pl.filter(&state, &p, &n1).is_success());
    let s = pl.filter(&state, &p, &n2);
    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(s.message(), ERR_CLAIM_NOT_AVAILABLE);

    // Nobody else holds the claim: PostFilter deallocates it so the next attempt can move it.
    let post = post_filter_status(PostFilterWords::of(&FeatureGates::v1_37()), &state, &p);
    assert_eq!(post.code(), Code::Unschedulable);
    assert_eq!(post.message(), MSG_DEALLOCATED);
}

#[test]
fn post_filter_leaves_claims_reserved_for_other_pods_alone() {
    let mut status = allocation_on("n1");
    status["reservedFor"] = json!([{"resource": "pods", "name": "other", "uid": "uid-other"}]);
    let pl = plugin(
        vec![claim("shared", exactly("gpu", "gpu"), status)],
        vec![class("gpu")],
    );
    let p = pod_with_claims(&["shared"]);
    let mut state = CycleState::new();
    assert!(pl.pre_filter(&mut state, &p, &[]).1.is_success());
    assert!(!pl.filter(&state, &p, &node("n2").info_with(vec![])).is_success());
    let post = post_filter_status(PostFilterWords::of(&FeatureGates::v1_37()), &state, &p);
    assert_eq!(post.code(), Code::Unschedulable);
    assert_eq!(post.message(), "");
}

#[test]
fn binding_conditions_gate_allocated_claims() {
    let with_conditions = |device_status: Value| {
        let mut status = json!({"allocation": {"devices": {"results": [{
            "request": "gpu", "driver": "d", "pool": "p", "device": "dev-0",
            "bindingConditions": ["Attached"], "bindingFailureConditions": ["Failed"],
        }]}}});
        status["devices"] = device_status;
        claim("c", exactly("gpu", "gpu"), status)
    };
    let device = |conditions: Value| json!([{"driver": "d", "pool": "p", "device": "dev-0", "conditions": conditions}]);
    let condition = |t: &str, s: &str| json!({"type": t, "status": s, "reason": "R", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"});
    let cases = [
        ("no device status yet", with_conditions(json!(null)), Ok(false)),
        (
            "condition not true yet",
            with_conditions(device(json!([condition("Attached", "False")]))),
            Ok(false),
        ),
        (
            "condition true",
            with_conditions(device(json!([condition("Attached", "True")]))),
            Ok(true),
        ),
        (
            "failure condition",
            with_conditions(device(json!([condition("Failed", "True")]))),
            Err("device binding failed: claim=c, reason=R, message=\"m\"".to_string()),
        ),
    ];
    for (name, c, want) in cases {
        assert_eq!(DynamicResources::claim_ready_for_binding(&c), want, "{name}");
    }
}

#[test]
fn score_prefers_earlier_subrequests() {
    let c = claim(
        "c",
        json!({"devices": {"requests": [{"name": "r", "firstAvailable": [
            {"name": "big", "deviceClassName": "gpu"}, {"name": "small", "deviceClassName": "gpu"}]}]}}),
        json!({}),
    );
    let result = |request: &str| -> AllocationResult {
        serde_json::from_value(json!({"devices": {"results": [
            {"request": request, "driver": "d", "pool": "p", "device": "x"}]}}))
        .unwrap()
    };
    let claims = vec![Arc::new(c)];
    let latest = score::ClaimIndexing::UnallocatedClaims;
    assert_eq!(score::compute_score(&claims, &[result("r/big")], latest), Ok(8));
    assert_eq!(score::compute_score(&claims, &[result("r/small")], latest), Ok(7));
    assert!(score::compute_score(&claims, &[], latest).is_err());
}

/// Score per release: none before v1.35 (the plugin offers no Score, whatever its weight);
/// v1.35.4 and v1.36.1 pair result `i` with claim `i` (a pod with an allocated claim before the
/// one allocated now gets an error) and score with `DRAPrioritizedList` off; v1.36.2+ read the
/// allocated claim's status and give 0 with the gate off.
#[test]
fn score_follows_the_release() {
    let first_available = json!({"devices": {"requests": [{"name": "r", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu"}, {"name": "small", "deviceClassName": "gpu"}]}]}});
    let allocated = claim(
        "done",
        first_available.clone(),
        json!({"allocation": {"devices": {"results": [
            {"request": "r/small", "driver": "d", "pool": "n1", "device": "dev-1"}]}}}),
    );
    let pending = claim("new", first_available, json!({}));
    let result: AllocationResult = serde_json::from_value(json!({"devices": {"results": [
        {"request": "r/big", "driver": "d", "pool": "n1", "device": "dev-0"}]}}))
    .unwrap();
    let cycle = |claims: Vec<ResourceClaim>| {
        let mut state = CycleState::new();
        let data = CycleClaims {
            claims: claims.into_iter().map(Arc::new).collect(),
            ..Default::default()
        };
        lock(&data.node_allocations).insert("n1".into(), vec![result.clone()]);
        state.write(&STATE_KEY, StateData(Arc::new(data)));
        state
    };
    let n1 = node("n1").info_with(vec![]);
    let p = pod_with_claims(&["done", "new"]);
    let gates = |minor, patch, prioritized_list| FeatureGates {
        dra_prioritized_list: prioritized_list,
        ..FeatureGates::for_version(KubeVersion::new(minor, patch))
    };
    // (release, gates, only the pending claim, the allocated one first); None: no Score.
    type Want = Option<(Result<i64, &'static str>, Result<i64, &'static str>)>;
    let cases: Vec<(&str, FeatureGates, Want)> = vec![
        ("v1.34.4", gates(34, 4, true), None),
        (
            "v1.35.4",
            gates(35, 4, true),
            Some((
                Ok(8),
                Err("number of allocations 1 is smaller than number of claims"),
            )),
        ),
        (
            "v1.35.4, DRAPrioritizedList off",
            gates(35, 4, false),
            Some((
                Ok(8),
                Err("number of allocations 1 is smaller than number of claims"),
            )),
        ),
        (
            "v1.36.1",
            gates(36, 1, true),
            Some((
                Ok(8),
                Err("number of allocations 1 is smaller than number of claims"),
            )),
        ),
        ("v1.36.3", gates(36, 3, true), Some((Ok(8), Ok(7 + 8)))),
        (
            "v1.36.3, DRAPrioritizedList off",
            gates(36, 3, false),
            Some((Ok(0), Ok(0))),
        ),
        ("v1.37.1", gates(37, 1, true), Some((Ok(8), Ok(7 + 8)))),
    ];
    for (name, features, want) in cases {
        let pl = plugin(vec![], vec![class("gpu")]).with_features(&features);
        let Some((pending_only, allocated_first)) = want else {
            assert!(pl.as_score().is_none(), "{name}");
            continue;
        };
        let scorer = pl.as_score().expect("score");
        for (claims, want) in [
            (vec![pending.clone()], pending_only),
            (vec![allocated.clone(), pending.clone()], allocated_first),
        ] {
            let (score, s) = scorer.score(&cycle(claims), &p, &n1);
            match want {
                Ok(want) => assert_eq!((score, s.code()), (want, Code::Success), "{name}: {s:?}"),
                Err(message) => {
                    assert_eq!(s.code(), Code::Error, "{name}");
                    assert_eq!(s.message(), message, "{name}");
                }
            }
        }
    }
}

#[test]
fn filter_timeout_and_binding_timeout_come_from_args() {
    let args = json!({"filterTimeout": "1m30s", "bindingTimeout": "0"});
    let pl = DynamicResources::from_args(Some(&args), Arc::default()).expect("valid args");
    assert_eq!(
        (pl.filter_timeout, pl.binding_timeout),
        (Duration::from_secs(90), Duration::ZERO)
    );
    let defaults = DynamicResources::from_args(None, Arc::default()).expect("no args");
    assert_eq!(
        (defaults.filter_timeout, defaults.binding_timeout),
        (DEFAULT_FILTER_TIMEOUT, DEFAULT_BINDING_TIMEOUT)
    );
    for bad in [json!({"filterTimeout": "soon"}), json!({"bindingTimeout": 5})] {
        assert!(
            DynamicResources::from_args(Some(&bad), Arc::default()).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn pre_enqueue_gates_pods_whose_claims_are_missing_or_unusable() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    let named = |name: &str, deleting: bool| ResourceClaim {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            deletion_timestamp: deleting.then_some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
            ..Default::default()
        },
        ..Default::default()
    };
    let pl = plugin(
        vec![named("ok", false), named("gone", true), named("foreign", false)],
        vec![],
    );
    let by_name = |n: &str| PodResourceClaim {
        name: "c".into(),
        resource_claim_name: Some(n.into()),
        ..Default::default()
    };
    let with = |c: PodResourceClaim, statuses: Option<Vec<PodResourceClaimStatus>>| {
        pod("p")
            .with(move |p| {
                p.spec.as_mut().unwrap().resource_claims = Some(vec![c]);
                p.status
                    .get_or_insert_with(Default::default)
                    .resource_claim_statuses = statuses;
            })
            .info()
    };
    let template = PodResourceClaim {
        name: "c".into(),
        resource_claim_template_name: Some("t".into()),
        ..Default::default()
    };
    let generated = |claim: Option<&str>| {
        Some(vec![PodResourceClaimStatus {
            name: "c".into(),
            resource_claim_name: claim.map(str::to_string),
        }])
    };
    let cases = [
        ("existing claim", with(by_name("ok"), None), None),
        (
            "missing claim",
            with(by_name("missing"), None),
            Some("could not find ResourceClaim \"default/missing\""),
        ),
        (
            "deleted claim",
            with(by_name("gone"), None),
            Some("resourceclaim \"gone\" is being deleted"),
        ),
        (
            "template not generated yet",
            with(template.clone(), None),
            Some("pod \"default/p\": ResourceClaim not created yet"),
        ),
        (
            "generated claim not owned by the pod",
            with(template.clone(), generated(Some("foreign"))),
            Some("ResourceClaim default/foreign was not created for Pod default/p (Pod is not owner)"),
        ),
        (
            "generation skipped on purpose",
            with(template, generated(None)),
            None,
        ),
    ];
    for (name, p, want) in cases {
        let s = pl.pre_enqueue(&p);
        match want {
            None => assert!(s.is_success(), "{name}: {s:?}"),
            Some(msg) => {
                assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{name}");
                assert_eq!(s.message(), msg, "{name}");
            }
        }
    }
}

/// A slice on `n1` whose devices are named `names` (duplicates make its pool invalid).
fn slice_with(names: &[&str]) -> k8s_openapi::api::resource::v1::ResourceSlice {
    let devices: Vec<Value> = names.iter().map(|n| json!({"name": n})).collect();
    serde_json::from_value(json!({
        "metadata": {"name": "slice-n1"},
        "spec": {
            "driver": "d",
            "nodeName": "n1",
            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }))
    .expect("slice JSON")
}

#[test]
fn filter_words_of_a_timeout_and_an_invalid_pool_follow_the_release() {
    let pl = |version: KubeVersion, devices: &[&str], timeout: Duration| {
        let mut pl = DynamicResources::for_snapshot(Arc::new(Snapshot::new(ClusterObjects {
            resource_claims: vec![claim("ok", exactly("gpu", "gpu"), json!({}))],
            device_classes: vec![class("gpu")],
            resource_slices: vec![slice_with(devices)],
            ..Default::default()
        })))
        .with_features(&FeatureGates::for_version(version));
        pl.filter_timeout = timeout;
        pl
    };
    let n1 = node("n1").info_with(vec![]);
    let p = pod_with_claims(&["ok"]);
    let filter = |pl: DynamicResources| {
        let mut state = CycleState::new();
        assert!(pl.pre_filter(&mut state, &p, &[]).1.is_success());
        let s = pl.filter(&state, &p, &n1);
        (s.code(), s.message().to_string())
    };
    let unresolvable = |m: &str| (Code::UnschedulableAndUnresolvable, m.to_string());
    let error = |m: &str| (Code::Error, m.to_string());
    // (release, filter on a timeout, filter on a pool with a duplicate device name)
    let cases = [
        (
            KubeVersion::new(34, 4),
            unresolvable("timed out trying to allocate devices"),
            error("pool n1 is invalid: duplicate device name dev-0"),
        ),
        (
            KubeVersion::new(35, 4),
            unresolvable("timed out trying to allocate devices"),
            unresolvable("invalid resource pools were encountered"),
        ),
        (
            KubeVersion::new(36, 3),
            error("node n1: timed out trying to allocate devices"),
            unresolvable("invalid resource pools were encountered"),
        ),
        (
            KubeVersion::new(37, 1),
            error("node n1: timed out trying to allocate devices"),
            unresolvable("invalid resource pools were encountered"),
        ),
    ];
    for (version, on_timeout, on_invalid_pool) in cases {
        let timed_out = pl(version, &["dev-0"], Duration::from_nanos(1));
        assert_eq!(filter(timed_out), on_timeout, "{version}: timeout");
        let invalid = pl(version, &["dev-0", "dev-0"], DEFAULT_FILTER_TIMEOUT);
        assert_eq!(filter(invalid), on_invalid_pool, "{version}: invalid pool");
        let fine = pl(version, &["dev-0"], DEFAULT_FILTER_TIMEOUT);
        assert_eq!(filter(fine), (Code::Success, String::new()), "{version}");
    }
}
