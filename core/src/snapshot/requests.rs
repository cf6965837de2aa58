//! A pod's resource requests as kube-scheduler computes them (component-helpers `PodRequests`, with the
//! defaults of the pinned release's feature gates): regular containers plus restartable (sidecar) init
//! containers, the init-phase peak, pod-level requests where set, in-place-resize status, plus overhead.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::resource::{CPU, MEMORY, Resource, amount_of};

/// Resource name → amount (milli-units for cpu, units otherwise).
pub type Amounts = BTreeMap<String, i64>;

/// The default requests kube-scheduler assumes, for scoring only, for a container without one.
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// 200 MiB.
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

fn amounts(list: Option<&BTreeMap<String, Quantity>>) -> Amounts {
    list.into_iter()
        .flatten()
        .map(|(k, q)| (k.clone(), amount_of(k, q)))
        .collect()
}

fn add_into(sum: &mut Amounts, add: &Amounts) {
    for (k, v) in add {
        *sum.entry(k.clone()).or_insert(0) += v;
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

fn is_restartable_init_container(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

fn pod_resize_infeasible(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodResizePending"))
        .is_some_and(|c| c.reason.as_deref() == Some("Infeasible"))
}

/// Requests of one container as the scheduler sees it: with in-place resize, the max of spec, allocated
/// and actuated requests (only allocated/actuated when the resize was found infeasible).
fn container_requests(
    c: &Container,
    status: Option<&ContainerStatus>,
    infeasible: bool,
    non_missing: &Amounts,
) -> Amounts {
    let spec = amounts(c.resources.as_ref().and_then(|r| r.requests.as_ref()));
    let mut reqs = match status {
        Some(st) => {
            let allocated = amounts(st.allocated_resources.as_ref());
            let actuated = amounts(st.resources.as_ref().and_then(|r| r.requests.as_ref()));
            let mut m = if infeasible { Amounts::new() } else { spec };
            max_into(&mut m, &allocated);
            max_into(&mut m, &actuated);
            m
        }
        None => spec,
    };
    for (k, v) in non_missing {
        reqs.entry(k.clone()).or_insert(*v);
    }
    reqs
}

fn find_status<'a>(statuses: Option<&'a Vec<ContainerStatus>>, name: &str) -> Option<&'a ContainerStatus> {
    statuses.and_then(|s| s.iter().find(|cs| cs.name == name))
}

/// `PodRequests(pod, opts)`: `non_missing` fills requests a container does not set (used for the
/// non-zero requests scoring relies on).
pub fn pod_requests(pod: &Pod, non_missing: &Amounts) -> Amounts {
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let infeasible = pod_resize_infeasible(pod);
    let mut reqs = Amounts::new();
    for c in spec.map(|s| s.containers.as_slice()).unwrap_or_default() {
        let st = find_status(status.and_then(|s| s.container_statuses.as_ref()), &c.name);
        add_into(&mut reqs, &container_requests(c, st, infeasible, non_missing));
    }
    // Init containers run one at a time, beside the sidecars started before them; the pod needs the
    // peak of that phase if it exceeds the steady state.
    let mut restartable_sum = Amounts::new();
    let mut init_peak = Amounts::new();
    for c in spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default()
    {
        let st = find_status(status.and_then(|s| s.init_container_statuses.as_ref()), &c.name);
        let r = container_requests(c, st, infeasible, non_missing);
        if is_restartable_init_container(c) {
            add_into(&mut reqs, &r);
            add_into(&mut restartable_sum, &r);
            max_into(&mut init_peak, &restartable_sum);
        } else {
            let mut candidate = r;
            add_into(&mut candidate, &restartable_sum);
            max_into(&mut init_peak, &candidate);
        }
    }
    max_into(&mut reqs, &init_peak);

    // Pod-level resources (PodLevelResources, beta and on): cpu, memory and hugepages-* override.
    if let Some(pod_level) = spec
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
    {
        for (name, q) in pod_level {
            if name == CPU || name == MEMORY || name.starts_with("hugepages-") {
                reqs.insert(name.clone(), amount_of(name, q));
            }
        }
    }
    if let Some(overhead) = spec.and_then(|s| s.overhead.as_ref()) {
        add_into(&mut reqs, &amounts(Some(overhead)));
    }
    reqs
}

/// True when the pod sets pod-level cpu or memory requests.
pub fn pod_level_requests_set(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .is_some_and(|r| {
            r.keys()
                .any(|k| k == CPU || k == MEMORY || k.starts_with("hugepages-"))
        })
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

/// Go's `PodInfo.CalculateResource`.
pub fn calculate_resource(pod: &Pod) -> PodResource {
    let requests = pod_requests(pod, &Amounts::new());
    let mut resource = Resource::default();
    for (k, v) in &requests {
        resource.add_amount(k, *v);
    }
    let pod_level = pod_level_requests_set(pod);
    // With pod-level requests the defaults only fill what the pod level does not set.
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
        pod_requests(pod, &non_missing)
    };
    PodResource {
        resource,
        non_zero_cpu: non_zero.get(CPU).copied().unwrap_or(0),
        non_zero_mem: non_zero.get(MEMORY).copied().unwrap_or(0),
    }
}
