//! A pod's resource requests as kube-scheduler computes them (component-helpers `PodRequests`):
//! regular containers plus restartable (sidecar) init containers, the init-phase peak, in-place-resize
//! status, pod-level requests where set, plus overhead.
//!
//! Which of these count is decided by [`RequestOptions`] (upstream's `PodResourcesOptions`), which
//! [`RequestOptions::from_features`] fills from the gates as `PodInfo.CalculateResource` does:
//! InPlacePodVerticalScaling (status resources), PodLevelResources and
//! InPlacePodLevelResourcesVerticalScaling. DRANodeAllocatableResources (alpha, off in v1.37.1) is not
//! modelled: DRA claim statuses are ignored.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::features::FeatureGates;
use crate::resource::{CPU, MEMORY, Resource, amount_of};

/// Resource name → amount (milli-units for cpu, units otherwise).
pub type Amounts = BTreeMap<String, i64>;

/// The default requests kube-scheduler assumes, for scoring only, for a container without one.
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// 200 MiB.
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

type QuantityList = BTreeMap<String, Quantity>;

fn amounts(list: Option<&QuantityList>) -> Amounts {
    list.into_iter()
        .flatten()
        .map(|(k, q)| (k.clone(), amount_of(k, q)))
        .collect()
}

/// Saturating: absurd quantities in a hand-written file must not overflow (see `Resource::add_amount`).
fn add_into(sum: &mut Amounts, add: &Amounts) {
    for (k, v) in add {
        let s = sum.entry(k.clone()).or_insert(0);
        *s = s.saturating_add(*v);
    }
}

fn max_into(acc: &mut Amounts, other: &Amounts) {
    for (k, v) in other {
        let e = acc.entry(k.clone()).or_insert(*v);
        if *v > *e {
            *e = *v;
        }
    }
}

fn max_of(lists: &[&Amounts]) -> Amounts {
    let mut out = Amounts::new();
    for l in lists {
        max_into(&mut out, l);
    }
    out
}

fn is_restartable_init_container(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// Go's `IsPodResizeInfeasible`: only the first PodResizePending condition counts.
fn pod_resize_infeasible(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodResizePending"))
        .is_some_and(|c| c.reason.as_deref() == Some("Infeasible"))
}

/// Go's `findContainerStatus`: regular statuses first, then init statuses, for either kind of container.
fn find_status<'a>(pod: &'a Pod, name: &str) -> Option<&'a ContainerStatus> {
    let status = pod.status.as_ref()?;
    status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten())
        .find(|cs| cs.name == name)
}

/// Which of a container's request lists an aggregate reads.
#[derive(Clone, Copy)]
enum Source {
    /// `spec.containers[].resources.requests`.
    Spec,
    /// The kubelet-allocated requests, falling back to spec unless the resize is infeasible.
    Allocated,
    /// The requests the runtime reports, falling back to allocated, then spec unless infeasible.
    Actuated,
}

fn container_list<'a>(
    c: &'a Container,
    status: Option<&'a ContainerStatus>,
    infeasible: bool,
    source: Source,
) -> Option<&'a QuantityList> {
    let spec = c.resources.as_ref().and_then(|r| r.requests.as_ref());
    let fallback = if infeasible { None } else { spec };
    match source {
        Source::Spec => spec,
        Source::Allocated => status.and_then(|s| s.allocated_resources.as_ref()).or(fallback),
        Source::Actuated => status
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .or_else(|| status.and_then(|s| s.allocated_resources.as_ref()))
            .or(fallback),
    }
}

/// Go's `aggregateContainerResourcesByFn`: regular containers plus sidecars, or the init-phase peak
/// when that is larger. `non_missing` fills each container's unset requests.
fn aggregate(pod: &Pod, source: Source, infeasible: bool, non_missing: &Amounts) -> Amounts {
    let spec = pod.spec.as_ref();
    let requests_of = |c: &Container| {
        let mut r = amounts(container_list(c, find_status(pod, &c.name), infeasible, source));
        for (k, v) in non_missing {
            r.entry(k.clone()).or_insert(*v);
        }
        r
    };
    let mut result = Amounts::new();
    for c in spec.map(|s| s.containers.as_slice()).unwrap_or_default() {
        add_into(&mut result, &requests_of(c));
    }
    // Init containers run one at a time, beside the sidecars started before them; the pod needs the
    // peak of that phase if it exceeds the steady state.
    let mut restartable_sum = Amounts::new();
    let mut init_peak = Amounts::new();
    for c in spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default()
    {
        let r = requests_of(c);
        if is_restartable_init_container(c) {
            add_into(&mut result, &r);
            add_into(&mut restartable_sum, &r);
            max_into(&mut init_peak, &restartable_sum);
        } else {
            let mut candidate = r;
            add_into(&mut candidate, &restartable_sum);
            max_into(&mut init_peak, &candidate);
        }
    }
    max_into(&mut result, &init_peak);
    result
}

fn is_supported_pod_level_resource(name: &str) -> bool {
    name == CPU || name == MEMORY || name.starts_with("hugepages-")
}

/// Go's `PodResourcesOptions`: the switches of a request computation. `Default` is upstream's zero
/// value (spec only, pod-level requests included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestOptions {
    /// `UseStatusResources` (InPlacePodVerticalScaling): the max of spec, allocated and actuated
    /// requests, rather than spec only.
    pub use_status_resources: bool,
    /// `InPlacePodLevelResourcesVerticalScalingEnabled`: the pod-level status lists (and, with
    /// `use_status_resources`, the pod-level resize status) are read.
    pub in_place_pod_level_resources_vertical_scaling: bool,
    /// `SkipPodLevelResources` (PodLevelResources off): pod-level requests are ignored.
    pub skip_pod_level_resources: bool,
}

impl RequestOptions {
    /// The options `PodInfo.CalculateResource` sets from the gates (and BalancedAllocation's scorer
    /// from its own copy of them).
    pub fn from_features(features: &FeatureGates) -> Self {
        RequestOptions {
            use_status_resources: features.in_place_pod_vertical_scaling,
            in_place_pod_level_resources_vertical_scaling: features
                .in_place_pod_level_resources_vertical_scaling,
            skip_pod_level_resources: !features.pod_level_resources,
        }
    }
}

/// `PodRequests(pod, opts)`: `non_missing` fills requests a container does not set (used for the
/// non-zero requests scoring relies on).
pub fn pod_requests(pod: &Pod, non_missing: &Amounts, opts: RequestOptions) -> Amounts {
    let infeasible = pod_resize_infeasible(pod);
    let status = pod.status.as_ref();
    let spec_reqs = aggregate(pod, Source::Spec, infeasible, non_missing);
    // Pod-level status lists already aggregate every container when the kubelet fills them.
    let pod_allocated = status.and_then(|s| s.allocated_resources.as_ref());
    let pod_actuated = status
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref());
    let mut reqs = if !opts.use_status_resources {
        spec_reqs
    } else {
        let (allocated, actuated) = match (pod_allocated, pod_actuated) {
            (Some(allocated), Some(actuated)) if opts.in_place_pod_level_resources_vertical_scaling => {
                (amounts(Some(allocated)), amounts(Some(actuated)))
            }
            _ => (
                aggregate(pod, Source::Allocated, infeasible, non_missing),
                aggregate(pod, Source::Actuated, infeasible, non_missing),
            ),
        };
        if infeasible {
            max_of(&[&actuated, &allocated])
        } else {
            max_of(&[&spec_reqs, &actuated, &allocated])
        }
    };

    // Pod-level resources: cpu, memory and hugepages-* replace the container aggregate.
    if !opts.skip_pod_level_resources && pod_level_requests_set(pod) {
        let spec_level = pod
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref());
        let status_resources = status
            .and_then(|s| s.resources.as_ref())
            .filter(|_| opts.in_place_pod_level_resources_vertical_scaling && opts.use_status_resources);
        let effective = match status_resources {
            Some(status_resources) => {
                let spec_part = if infeasible {
                    Amounts::new()
                } else {
                    amounts(spec_level)
                };
                max_of(&[
                    &spec_part,
                    &amounts(status_resources.requests.as_ref()),
                    &amounts(pod_allocated),
                ])
            }
            None => amounts(spec_level),
        };
        for (name, v) in effective {
            if is_supported_pod_level_resource(&name) {
                reqs.insert(name, v);
            }
        }
    }
    if let Some(overhead) = pod.spec.as_ref().and_then(|s| s.overhead.as_ref()) {
        add_into(&mut reqs, &amounts(Some(overhead)));
    }
    reqs
}

/// True when the pod sets pod-level cpu, memory or hugepages requests (Go's `IsPodLevelRequestsSet`).
pub fn pod_level_requests_set(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .is_some_and(|r| r.keys().any(|k| is_supported_pod_level_resource(k)))
}

/// What the scheduler accounts for a pod: its requests, and the non-zero cpu/memory used for scoring.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodResource {
    /// Requests (Go `Resource`).
    pub resource: Resource,
    /// Milli-CPU with 100m for each container that requests none.
    pub non_zero_cpu: i64,
    /// Memory with 200 MiB for each container that requests none.
    pub non_zero_mem: i64,
}

/// Go's `PodInfo.CalculateResource`, with the gates the snapshot was built with.
pub fn calculate_resource(pod: &Pod, features: &FeatureGates) -> PodResource {
    let opts = RequestOptions::from_features(features);
    let requests = pod_requests(pod, &Amounts::new(), opts);
    let mut resource = Resource::default();
    for (k, v) in &requests {
        resource.add_amount(k, *v);
    }
    let pod_level = features.pod_level_resources && pod_level_requests_set(pod);
    // With pod-level requests the defaults only fill what neither level sets.
    let mut non_missing = Amounts::new();
    if !(pod_level && requests.contains_key(CPU)) {
        non_missing.insert(CPU.to_string(), DEFAULT_MILLI_CPU_REQUEST);
    }
    if !(pod_level && requests.contains_key(MEMORY)) {
        non_missing.insert(MEMORY.to_string(), DEFAULT_MEMORY_REQUEST);
    }
    let non_zero = if non_missing.is_empty() {
        requests
    } else {
        pod_requests(pod, &non_missing, opts)
    };
    PodResource {
        resource,
        non_zero_cpu: non_zero.get(CPU).copied().unwrap_or(0),
        non_zero_mem: non_zero.get(MEMORY).copied().unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{container, pod};
    use k8s_openapi::api::core::v1::{PodCondition, ResourceRequirements};

    const MI: i64 = 1024 * 1024;

    fn list(pairs: &[(&str, &str)]) -> QuantityList {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect()
    }

    fn status_of(
        name: &str,
        allocated: Option<&[(&str, &str)]>,
        actual: Option<&[(&str, &str)]>,
    ) -> ContainerStatus {
        ContainerStatus {
            name: name.to_string(),
            allocated_resources: allocated.map(list),
            resources: actual.map(|a| ResourceRequirements {
                requests: Some(list(a)),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn with_statuses(p: Pod, statuses: Vec<ContainerStatus>) -> Pod {
        let mut p = p;
        p.status.get_or_insert_with(Default::default).container_statuses = Some(statuses);
        p
    }

    fn infeasible(mut p: Pod) -> Pod {
        p.status
            .get_or_insert_with(Default::default)
            .conditions
            .get_or_insert_with(Vec::new)
            .push(PodCondition {
                type_: "PodResizePending".into(),
                status: "True".into(),
                reason: Some("Infeasible".into()),
                ..Default::default()
            });
        p
    }

    fn pod_level(mut p: Pod, requests: &[(&str, &str)]) -> Pod {
        p.spec.get_or_insert_with(Default::default).resources = Some(ResourceRequirements {
            requests: Some(list(requests)),
            ..Default::default()
        });
        p
    }

    /// A container allocated 5 cpu, while the pod-level status lists (which the kubelet fills with
    /// the aggregate) say 1500m allocated, 1200m actuated.
    fn pod_level_status_lists() -> Pod {
        let mut p = with_statuses(
            pod("p").cpu("1").obj(),
            vec![status_of("c0", Some(&[("cpu", "5")]), None)],
        );
        let st = p.status.as_mut().unwrap();
        st.allocated_resources = Some(list(&[("cpu", "1500m")]));
        st.resources = Some(ResourceRequirements {
            requests: Some(list(&[("cpu", "1200m")])),
            ..Default::default()
        });
        p
    }

    fn amounts_of(pairs: &[(&str, i64)]) -> Amounts {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn pod_requests_table() {
        let cases: Vec<(&str, Pod, Amounts)> = vec![
            (
                "regular containers add up",
                pod("p")
                    .cpu("500m")
                    .memory("1Gi")
                    .container("c1", &[("cpu", "250m"), ("example.com/gpu", "1")])
                    .obj(),
                amounts_of(&[("cpu", 750), ("memory", 1024 * MI), ("example.com/gpu", 1)]),
            ),
            (
                "init container peak above the steady state wins",
                pod("p")
                    .cpu("500m")
                    .init_container("init", &[("cpu", "2"), ("memory", "10Mi")], false)
                    .obj(),
                amounts_of(&[("cpu", 2000), ("memory", 10 * MI)]),
            ),
            (
                "init container below the steady state does not count",
                pod("p")
                    .cpu("500m")
                    .init_container("init", &[("cpu", "100m")], false)
                    .obj(),
                amounts_of(&[("cpu", 500)]),
            ),
            (
                "sidecar adds to the steady state and to later init containers",
                pod("p")
                    .cpu("1")
                    .init_container("sidecar", &[("cpu", "500m")], true)
                    .init_container("init", &[("cpu", "1200m")], false)
                    .obj(),
                // steady 1000+500; init phase 500+1200 = 1700.
                amounts_of(&[("cpu", 1700)]),
            ),
            (
                "init container before the sidecar does not see it",
                pod("p")
                    .cpu("1")
                    .init_container("init", &[("cpu", "1200m")], false)
                    .init_container("sidecar", &[("cpu", "500m")], true)
                    .obj(),
                amounts_of(&[("cpu", 1500)]),
            ),
            (
                "overhead is added last",
                pod("p")
                    .cpu("1")
                    .with(|p| {
                        p.spec.as_mut().unwrap().overhead =
                            Some(list(&[("cpu", "250m"), ("memory", "64Mi")]));
                    })
                    .obj(),
                amounts_of(&[("cpu", 1250), ("memory", 64 * MI)]),
            ),
            (
                "pod-level cpu/memory/hugepages replace the aggregate, other resources stay",
                pod_level(
                    pod("p")
                        .cpu("1")
                        .memory("1Gi")
                        .req("ephemeral-storage", "1Gi")
                        .req("hugepages-2Mi", "4Mi")
                        .obj(),
                    &[
                        ("cpu", "3"),
                        ("hugepages-2Mi", "8Mi"),
                        ("ephemeral-storage", "5Gi"),
                    ],
                ),
                amounts_of(&[
                    ("cpu", 3000),
                    ("memory", 1024 * MI),
                    ("ephemeral-storage", 1024 * MI),
                    ("hugepages-2Mi", 8 * MI),
                ]),
            ),
            (
                "pod-level requests then overhead",
                pod_level(pod("p").cpu("1").obj(), &[("cpu", "2")]).with_overhead(&[("cpu", "100m")]),
                amounts_of(&[("cpu", 2100)]),
            ),
            (
                "resized up: the max of the spec and status aggregates, not of each container",
                with_statuses(
                    pod("p").cpu("1").container("c1", &[("cpu", "1")]).obj(),
                    vec![
                        status_of("c0", Some(&[("cpu", "2")]), None),
                        status_of("c1", Some(&[("cpu", "500m")]), None),
                    ],
                ),
                // spec 2000, allocated 2500, actuated (falls back to allocated) 2500.
                amounts_of(&[("cpu", 2500)]),
            ),
            (
                "resized down but not actuated yet: the larger spec stays",
                with_statuses(
                    pod("p").cpu("2").obj(),
                    vec![status_of("c0", Some(&[("cpu", "1")]), Some(&[("cpu", "1")]))],
                ),
                amounts_of(&[("cpu", 2000)]),
            ),
            (
                "infeasible resize ignores the spec",
                infeasible(with_statuses(
                    pod("p").cpu("4").obj(),
                    vec![status_of("c0", Some(&[("cpu", "1")]), Some(&[("cpu", "1")]))],
                )),
                amounts_of(&[("cpu", 1000)]),
            ),
            (
                "infeasible resize without status counts nothing for that container",
                infeasible(pod("p").cpu("4").obj()),
                Amounts::new(),
            ),
            (
                "pod-level status lists replace the container status aggregate",
                pod_level_status_lists(),
                amounts_of(&[("cpu", 1500)]),
            ),
            (
                "pod-level requests with a resized pod-level status take the max",
                {
                    let mut p = pod_level(pod("p").obj(), &[("cpu", "1")]);
                    let st = p.status.get_or_insert_with(Default::default);
                    st.resources = Some(ResourceRequirements {
                        requests: Some(list(&[("cpu", "3")])),
                        ..Default::default()
                    });
                    p
                },
                amounts_of(&[("cpu", 3000)]),
            ),
            (
                "statuses of init containers are found by name",
                {
                    let mut p = pod("p").init_container("side", &[("cpu", "100m")], true).obj();
                    p.status
                        .get_or_insert_with(Default::default)
                        .init_container_statuses =
                        Some(vec![status_of("side", Some(&[("cpu", "300m")]), None)]);
                    p
                },
                amounts_of(&[("cpu", 300)]),
            ),
        ];
        let v1_37 = RequestOptions::from_features(&FeatureGates::v1_37());
        for (name, p, want) in cases {
            assert_eq!(pod_requests(&p, &Amounts::new(), v1_37), want, "{name}");
        }
    }

    /// Each gate `PodInfo.CalculateResource` reads, flipped from its v1.37.1 default, changes the
    /// requests as upstream's `PodResourcesOptions` do.
    #[test]
    fn request_gates_change_the_sum() {
        let resized_up = with_statuses(
            pod("p").cpu("1").container("c1", &[("cpu", "1")]).obj(),
            vec![
                status_of("c0", Some(&[("cpu", "2")]), None),
                status_of("c1", Some(&[("cpu", "500m")]), None),
            ],
        );
        let pod_level_set = pod_level(pod("p").cpu("1").obj(), &[("cpu", "2")]);
        let pod_level_status = pod_level_status_lists();
        let pod_level_resized = {
            let mut p = pod_level(pod("p").obj(), &[("cpu", "1")]);
            p.status.get_or_insert_with(Default::default).resources = Some(ResourceRequirements {
                requests: Some(list(&[("cpu", "3")])),
                ..Default::default()
            });
            p
        };
        let v1_37 = FeatureGates::v1_37();
        let no_status = FeatureGates {
            in_place_pod_vertical_scaling: false,
            ..v1_37
        };
        let no_pod_level = FeatureGates {
            pod_level_resources: false,
            ..v1_37
        };
        let no_pod_level_resize = FeatureGates {
            in_place_pod_level_resources_vertical_scaling: false,
            ..v1_37
        };
        let cases: Vec<(&str, &Pod, FeatureGates, i64)> = vec![
            ("resized up, status read (v1.37.1)", &resized_up, v1_37, 2500),
            (
                "resized up, InPlacePodVerticalScaling off: spec only",
                &resized_up,
                no_status,
                2000,
            ),
            ("pod-level requests (v1.37.1)", &pod_level_set, v1_37, 2000),
            (
                "PodLevelResources off: the container aggregate",
                &pod_level_set,
                no_pod_level,
                1000,
            ),
            ("pod-level status lists (v1.37.1)", &pod_level_status, v1_37, 1500),
            (
                "InPlacePodLevelResourcesVerticalScaling off: container statuses",
                &pod_level_status,
                no_pod_level_resize,
                5000,
            ),
            (
                "pod-level resize status (v1.37.1)",
                &pod_level_resized,
                v1_37,
                3000,
            ),
            (
                "InPlacePodLevelResourcesVerticalScaling off: pod-level spec",
                &pod_level_resized,
                no_pod_level_resize,
                1000,
            ),
        ];
        for (name, p, features, want_cpu) in cases {
            let got = calculate_resource(p, &features);
            assert_eq!(got.resource.milli_cpu, want_cpu, "{name}");
        }
        // PodLevelResources off: the non-zero default (100m) fills each of the two containers
        // without a cpu request, although the pod level sets one.
        let p = pod_level(pod("p").container("c", &[]).obj(), &[("cpu", "2")]);
        assert_eq!(calculate_resource(&p, &v1_37).non_zero_cpu, 2000);
        assert_eq!(calculate_resource(&p, &no_pod_level).non_zero_cpu, 200);
    }

    /// The snapshot sums its pods' requests with the gates it is built with: NodeInfo's requested
    /// cpu follows PodLevelResources.
    #[test]
    fn snapshot_aggregates_with_its_gates() {
        let objects = || crate::snapshot::ClusterObjects {
            nodes: vec![crate::testing::node("n1").cpu("8").obj()],
            pods: vec![pod_level(pod("p").cpu("1").node("n1").obj(), &[("cpu", "3")])],
            ..Default::default()
        };
        let no_pod_level = FeatureGates {
            pod_level_resources: false,
            ..FeatureGates::v1_37()
        };
        for (name, features, want) in [
            ("v1.37.1", FeatureGates::v1_37(), 3000),
            ("PodLevelResources off", no_pod_level, 1000),
        ] {
            let snap = crate::snapshot::Snapshot::with_features(objects(), features);
            assert_eq!(snap.features(), &features, "{name}");
            assert_eq!(snap.nodes()[0].requested.milli_cpu, want, "{name}");
        }
    }

    trait WithOverhead {
        fn with_overhead(self, o: &[(&str, &str)]) -> Pod;
    }
    impl WithOverhead for Pod {
        fn with_overhead(mut self, o: &[(&str, &str)]) -> Pod {
            self.spec.get_or_insert_with(Default::default).overhead = Some(list(o));
            self
        }
    }

    #[test]
    fn calculate_resource_non_zero_table() {
        let cases: Vec<(&str, Pod, i64, i64, i64, i64)> = vec![
            // name, pod, cpu, mem, non-zero cpu, non-zero mem
            (
                "no requests: defaults per container",
                pod("p").container("c1", &[]).obj(),
                0,
                0,
                200,
                400 * MI,
            ),
            (
                "cpu only: memory defaulted",
                pod("p").cpu("250m").obj(),
                250,
                0,
                250,
                200 * MI,
            ),
            (
                "explicit zero is not missing",
                pod("p").cpu("0").memory("0").obj(),
                0,
                0,
                0,
                0,
            ),
            (
                "init containers get defaults too (peak of 100m vs 100m)",
                pod("p").init_container("i", &[], false).obj(),
                0,
                0,
                100,
                200 * MI,
            ),
            (
                "sidecar defaults add to the steady state",
                pod("p").init_container("s", &[], true).obj(),
                0,
                0,
                200,
                400 * MI,
            ),
            (
                "pod-level cpu: no cpu default, memory defaulted per container",
                pod_level(pod("p").container("c1", &[]).obj(), &[("cpu", "2")]),
                2000,
                0,
                2000,
                400 * MI,
            ),
            (
                "pod-level cpu and memory: no defaults",
                pod_level(pod("p").obj(), &[("cpu", "2"), ("memory", "1Gi")]),
                2000,
                1024 * MI,
                2000,
                1024 * MI,
            ),
            (
                "overhead counts in the non-zero values",
                pod("p")
                    .obj()
                    .with_overhead(&[("cpu", "50m"), ("memory", "10Mi")]),
                50,
                10 * MI,
                150,
                210 * MI,
            ),
        ];
        for (name, p, cpu, mem, nz_cpu, nz_mem) in cases {
            let r = calculate_resource(&p, &FeatureGates::v1_37());
            assert_eq!(
                (
                    r.resource.milli_cpu,
                    r.resource.memory,
                    r.non_zero_cpu,
                    r.non_zero_mem
                ),
                (cpu, mem, nz_cpu, nz_mem),
                "{name}"
            );
        }
    }

    #[test]
    fn pod_level_requests_set_only_for_supported_resources() {
        assert!(!pod_level_requests_set(&pod("p").obj()));
        assert!(!pod_level_requests_set(&pod_level(
            pod("p").obj(),
            &[("ephemeral-storage", "1Gi")]
        )));
        assert!(pod_level_requests_set(&pod_level(
            pod("p").obj(),
            &[("memory", "1Gi")]
        )));
        assert!(pod_level_requests_set(&pod_level(
            pod("p").obj(),
            &[("hugepages-1Gi", "1Gi")]
        )));
    }

    #[test]
    fn extended_resources_and_container_builder_agree() {
        let c = container("x", &[("example.com/foo", "3")]);
        let p = pod("p")
            .with(|p| p.spec.as_mut().unwrap().containers = vec![c])
            .obj();
        assert_eq!(
            calculate_resource(&p, &FeatureGates::v1_37())
                .resource
                .get("example.com/foo"),
            3
        );
    }
}
