//! The what-if flags' unit tests: each flag's shape, and the changes it makes to an in-memory cluster.

use k8s_openapi::api::core::v1::AttachedVolume;
use k8s_openapi::api::core::v1::{NodeSpec, NodeStatus, PodSpec, ResourceRequirements, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;

fn args(set: &[&str], without: &[&str], uncordon: &[&str], add: &[&str]) -> WhatIfArgs {
    let v = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect();
    WhatIfArgs {
        set: v(set),
        without_pod: v(without),
        uncordon: v(uncordon),
        add_node: v(add),
    }
}

fn container(name: &str, cpu: Option<&str>) -> Container {
    Container {
        name: name.to_string(),
        resources: cpu.map(|cpu| ResourceRequirements {
            requests: Some(BTreeMap::from([("cpu".to_string(), Quantity(cpu.to_string()))])),
            ..ResourceRequirements::default()
        }),
        ..Container::default()
    }
}

fn pod(ns: &str, name: &str, node: Option<&str>, containers: Vec<Container>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            namespace: Some(ns.to_string()),
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: node.map(str::to_string),
            containers,
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

fn node(name: &str, cordoned: bool) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            uid: Some(format!("uid-{name}")),
            labels: Some(BTreeMap::from([
                (HOSTNAME_LABEL.to_string(), name.to_string()),
                ("zone".to_string(), "a".to_string()),
            ])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            unschedulable: cordoned.then_some(true),
            taints: Some(
                [
                    cordoned.then(|| Taint {
                        key: UNSCHEDULABLE_TAINT.to_string(),
                        effect: "NoSchedule".to_string(),
                        ..Taint::default()
                    }),
                    Some(Taint {
                        key: "gpu".to_string(),
                        effect: "NoSchedule".to_string(),
                        ..Taint::default()
                    }),
                ]
                .into_iter()
                .flatten()
                .collect(),
            ),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            volumes_attached: Some(vec![AttachedVolume {
                name: "v".to_string(),
                device_path: "/dev/x".to_string(),
            }]),
            volumes_in_use: Some(vec!["v".to_string()]),
            ..NodeStatus::default()
        }),
    }
}

fn requests(pod: &Pod, container: usize) -> BTreeMap<String, Quantity> {
    pod.spec.as_ref().unwrap().containers[container]
        .resources
        .as_ref()
        .and_then(|r| r.requests.clone())
        .unwrap_or_default()
}

fn set_one(value: &str, pod: &mut Pod) -> Result<Vec<Applied>, WhatIfError> {
    WhatIf::from_args(&args(&[value], &[], &[], &[]), "default")?.apply_to_pod(pod, &[])
}

#[test]
fn bad_flags_are_errors_naming_the_flag() {
    for (a, want) in [
        (
            args(&["cpu"], &[], &[], &[]),
            "--set \"cpu\": expected PATH=VALUE",
        ),
        (
            args(&["resources.request.cpu=1"], &[], &[], &[]),
            "--set \"resources.request.cpu=1\": unknown path",
        ),
        (args(&["image=x"], &[], &[], &[]), "unknown path \"image\""),
        (
            args(&["resources.requests.cpu=lots"], &[], &[], &[]),
            "--set \"resources.requests.cpu=lots\": invalid quantity \"lots\"",
        ),
        (
            args(&["resources.requests.cpu=-1"], &[], &[], &[]),
            "invalid quantity \"-1\"",
        ),
        (
            args(&["resources.requests.memory="], &[], &[], &[]),
            "invalid quantity \"\"",
        ),
        (
            args(&["resources.requests.=1"], &[], &[], &[]),
            "the resource name must not be empty",
        ),
        (
            args(&["containers[].resources.requests.cpu=1"], &[], &[], &[]),
            "the container name must not be empty",
        ),
        (
            args(&["containers[a]resources.requests.cpu=1"], &[], &[], &[]),
            "unknown path",
        ),
        (
            args(&["nodeSelector.=x"], &[], &[], &[]),
            "the label key must not be empty",
        ),
        (
            args(&["schedulerName="], &[], &[], &[]),
            "the scheduler name must not be empty",
        ),
        (
            args(&[], &["a/b/c"], &[], &[]),
            "--without-pod \"a/b/c\": expected NS/NAME",
        ),
        (args(&[], &["/x"], &[], &[]), "expected NS/NAME"),
        (
            args(&[], &[], &[""], &[]),
            "--uncordon \"\": expected a node name",
        ),
        (
            args(&[], &[], &[], &["n1"]),
            "--add-node \"n1\": expected NAME=COUNT",
        ),
        (args(&[], &[], &[], &["=2"]), "expected NAME=COUNT"),
        (
            args(&[], &[], &[], &["n1=0"]),
            "--add-node \"n1=0\": COUNT must be a whole number from 1 to 1000",
        ),
        (args(&[], &[], &[], &["n1=1001"]), "COUNT must be"),
        (args(&[], &[], &[], &["n1=x"]), "COUNT must be"),
    ] {
        let err = WhatIf::from_args(&a, "default").unwrap_err().to_string();
        assert!(err.contains(want), "{a:?}: {err}");
    }
}

#[test]
fn good_flags_parse_and_spec_prefix_is_optional() {
    let w = WhatIf::from_args(
        &args(
            &[
                "resources.requests.cpu=500m",
                "spec.resources.limits.nvidia.com/gpu=1",
                "containers[app].resources.requests.memory=1Gi",
                "nodeSelector.topology.kubernetes.io/zone=eu-west-1a",
                "priorityClassName=",
                "schedulerName=other",
            ],
            &["shop/db-0", "pod/web"],
            &["n1"],
            &["n1=3"],
        ),
        "shop",
    )
    .unwrap();
    assert_eq!(w.sets.len(), 6);
    assert_eq!(
        w.sets[1].change,
        Change::Resource {
            container: None,
            list: List::Limits,
            resource: "nvidia.com/gpu".into(),
            quantity: "1".into()
        }
    );
    assert_eq!(
        w.sets[3].change,
        Change::NodeSelector {
            key: "topology.kubernetes.io/zone".into(),
            value: "eu-west-1a".into()
        }
    );
    // A bare NAME is in the command's namespace.
    assert_eq!(w.without_pods[1], ("pod/web".into(), "shop".into(), "web".into()));
    assert_eq!(w.add_nodes, vec![("n1=3".into(), "n1".into(), 3)]);
    assert_eq!(
        WhatIf::from_args(&WhatIfArgs::default(), "x").unwrap(),
        WhatIf::default()
    );
}

#[test]
fn set_requests_changes_every_container_or_the_named_one() {
    let mut p = pod(
        "ns",
        "p",
        None,
        vec![container("a", Some("1")), container("b", None)],
    );
    let applied = set_one("resources.requests.cpu=500m", &mut p).unwrap();
    assert_eq!(applied[0].effect, "cpu request 500m for each of its 2 containers");
    assert_eq!(requests(&p, 0)["cpu"], Quantity("500m".into()));
    assert_eq!(requests(&p, 1)["cpu"], Quantity("500m".into()));

    let applied = set_one("containers[b].resources.requests.memory=1Gi", &mut p).unwrap();
    assert_eq!(applied[0].effect, "memory request 1Gi for container b");
    assert!(!requests(&p, 0).contains_key("memory"));
    assert_eq!(requests(&p, 1)["memory"], Quantity("1Gi".into()));

    let err = set_one("containers[c].resources.requests.cpu=1", &mut p).unwrap_err();
    assert_eq!(
        err.to_string(),
        "--set \"containers[c].resources.requests.cpu=1\": the pod has no container \"c\" (it has a, b)"
    );
}

#[test]
fn set_requests_says_when_pod_level_requests_override_them() {
    let mut p = pod("ns", "p", None, vec![container("a", Some("1"))]);
    p.spec.as_mut().unwrap().resources = Some(ResourceRequirements {
        requests: Some(BTreeMap::from([("cpu".to_string(), Quantity("2".into()))])),
        ..ResourceRequirements::default()
    });
    let applied = set_one("resources.requests.cpu=500m", &mut p).unwrap();
    assert_eq!(
        applied[0].effect,
        "cpu request 500m for its container a; note: the pod-level resources.requests.cpu still decides"
    );
    let applied = set_one("resources.requests.memory=1Gi", &mut p).unwrap();
    assert_eq!(applied[0].effect, "memory request 1Gi for its container a");
}

#[test]
fn set_limits_defaults_an_unset_request_like_the_api_server() {
    let mut p = pod("ns", "p", None, vec![container("a", Some("1"))]);
    let applied = set_one("resources.limits.nvidia.com/gpu=2", &mut p).unwrap();
    assert_eq!(
        applied[0].effect,
        "nvidia.com/gpu limit 2 for its container a, and the request where unset"
    );
    assert_eq!(requests(&p, 0)["nvidia.com/gpu"], Quantity("2".into()));
    // An existing request stays.
    set_one("resources.limits.cpu=4", &mut p).unwrap();
    assert_eq!(requests(&p, 0)["cpu"], Quantity("1".into()));
}

#[test]
fn set_requests_drops_the_changed_containers_resize_reports() {
    use k8s_openapi::api::core::v1::{ContainerStatus, PodStatus};
    let mut p = pod(
        "ns",
        "p",
        None,
        vec![container("a", Some("4")), container("b", Some("4"))],
    );
    let status = |name: &str| ContainerStatus {
        name: name.to_string(),
        allocated_resources: Some(BTreeMap::from([("cpu".to_string(), Quantity("4".into()))])),
        ..ContainerStatus::default()
    };
    p.status = Some(PodStatus {
        container_statuses: Some(vec![status("a"), status("b")]),
        ..PodStatus::default()
    });
    set_one("containers[a].resources.requests.cpu=1", &mut p).unwrap();
    let statuses = p.status.as_ref().unwrap().container_statuses.as_ref().unwrap();
    assert_eq!(statuses[0].allocated_resources, None);
    assert!(statuses[1].allocated_resources.is_some());
    let requested =
        sched_core::snapshot::requests::calculate_resource(&p, &sched_core::framework::FeatureGates::v1_37());
    assert_eq!(requested.resource.milli_cpu, 5000);
}

#[test]
fn set_node_selector_scheduler_and_priority_class() {
    let class = PriorityClass {
        metadata: ObjectMeta {
            name: Some("high".into()),
            ..ObjectMeta::default()
        },
        value: Some(1000),
        preemption_policy: Some("Never".into()),
        ..PriorityClass::default()
    };
    let mut p = pod("ns", "p", None, vec![container("a", None)]);
    p.spec.as_mut().unwrap().priority = Some(5);
    let w = WhatIf::from_args(
        &args(
            &[
                "nodeSelector.disk=ssd",
                "schedulerName=batch",
                "priorityClassName=high",
            ],
            &[],
            &[],
            &[],
        ),
        "ns",
    )
    .unwrap();
    let applied = w.apply_to_pod(&mut p, std::slice::from_ref(&class)).unwrap();
    let spec = p.spec.as_ref().unwrap();
    assert_eq!(spec.node_selector.as_ref().unwrap()["disk"], "ssd");
    assert_eq!(spec.scheduler_name.as_deref(), Some("batch"));
    assert_eq!(spec.priority, Some(1000));
    assert_eq!(spec.preemption_policy.as_deref(), Some("Never"));
    assert_eq!(applied[2].effect, "priorityClassName high, priority 1000");

    let err = set_one("priorityClassName=nope", &mut p).unwrap_err();
    assert_eq!(
        err.to_string(),
        "--set \"priorityClassName=nope\": no PriorityClass \"nope\" in the cluster"
    );
    // A failed change leaves the pod as it was.
    assert_eq!(p.spec.as_ref().unwrap().priority, Some(1000));
}

#[test]
fn without_pod_removes_whole_and_compact_pods_and_refuses_the_evaluated_one() {
    let mut objects = ClusterObjects::default();
    objects.pods.push(pod("ns", "pending", None, vec![]));
    objects
        .placed_pods
        .push(std::sync::Arc::new(sched_core::PodInfo::placed(pod(
            "ns",
            "running",
            Some("n1"),
            vec![container("a", Some("1"))],
        ))));
    let w = WhatIf::from_args(&args(&[], &["ns/running", "pending"], &[], &[]), "ns").unwrap();
    let applied = w.apply_to_cluster(&mut objects).unwrap();
    assert!(objects.pods.is_empty() && objects.placed_pods.is_empty());
    assert_eq!(applied[0].effect, "removed ns/running from n1");
    assert_eq!(applied[1].effect, "removed pending pod ns/pending");

    let err = w.apply_to_cluster(&mut objects).unwrap_err();
    assert_eq!(err.to_string(), "--without-pod \"ns/running\": pod not found");

    let mut me = pod("ns", "pending", None, vec![]);
    let err = w.apply(&mut me, &mut objects).unwrap_err();
    assert_eq!(
        err.to_string(),
        "--without-pod \"pending\": that is the pod being evaluated"
    );
}

#[test]
fn uncordon_clears_the_flag_and_only_the_unschedulable_taint() {
    let mut objects = ClusterObjects {
        nodes: vec![node("n1", true), node("n2", false)],
        ..ClusterObjects::default()
    };
    let w = WhatIf::from_args(&args(&[], &[], &["n1", "n2"], &[]), "ns").unwrap();
    let applied = w.apply_to_cluster(&mut objects).unwrap();
    let spec = objects.nodes[0].spec.as_ref().unwrap();
    assert_eq!(spec.unschedulable, Some(false));
    let keys: Vec<&str> = spec.taints.iter().flatten().map(|t| t.key.as_str()).collect();
    assert_eq!(keys, ["gpu"]);
    assert_eq!(
        applied[0].effect,
        "uncordoned, node.kubernetes.io/unschedulable taint removed"
    );
    assert_eq!(applied[1].effect, "was not cordoned: nothing changed");

    let w = WhatIf::from_args(&args(&[], &[], &["n9"], &[]), "ns").unwrap();
    assert_eq!(
        w.apply_to_cluster(&mut objects).unwrap_err().to_string(),
        "--uncordon \"n9\": node \"n9\" not found"
    );
}

#[test]
fn add_node_copies_with_fresh_names_hostname_and_no_volumes() {
    let mut objects = ClusterObjects {
        nodes: vec![node("n1", false)],
        ..ClusterObjects::default()
    };
    // A second flag on the same node continues the numbering.
    let w = WhatIf::from_args(&args(&[], &[], &[], &["n1=2", "n1=1"]), "ns").unwrap();
    let applied = w.apply_to_cluster(&mut objects).unwrap();
    let names: Vec<&str> = objects.nodes.iter().map(node_name).collect();
    assert_eq!(names, ["n1", "n1-copy-1", "n1-copy-2", "n1-copy-3"]);
    assert_eq!(
        applied[0].effect,
        "added n1-copy-1, n1-copy-2, empty copies of n1"
    );
    let copy = &objects.nodes[1];
    let labels = copy.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[HOSTNAME_LABEL], "n1-copy-1");
    assert_eq!(labels["zone"], "a");
    assert_eq!(copy.metadata.uid, None);
    let status = copy.status.as_ref().unwrap();
    assert_eq!(
        (status.volumes_attached.as_ref(), status.volumes_in_use.as_ref()),
        (None, None)
    );
    assert_eq!(copy.spec, objects.nodes[0].spec);
    // The original is untouched.
    assert_eq!(
        objects.nodes[0].metadata.labels.as_ref().unwrap()[HOSTNAME_LABEL],
        "n1"
    );

    let w = WhatIf::from_args(&args(&[], &[], &[], &["nope=1"]), "ns").unwrap();
    assert_eq!(
        w.apply_to_cluster(&mut objects).unwrap_err().to_string(),
        "--add-node \"nope=1\": node \"nope\" not found"
    );
}
