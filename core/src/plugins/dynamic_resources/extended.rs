//! Extended resources backed by DRA (feature gate DRAExtendedResource, GA and on in v1.37.1), as
//! kube-scheduler's `extendeddynamicresources.go` implements it.
//!
//! A pod may request an extended resource (`example.com/gpu: 2`, or the implicit
//! `deviceclass.resource.kubernetes.io/<class>`) that no device plugin advertises but a DeviceClass
//! maps (`spec.extendedResourceName`, or the class's implicit name). DynamicResources then allocates
//! devices for it through one scheduler-owned claim, the special claim `<extended-resources>`:
//!
//! - PreFilter ([`pre_filter_extended_resources`]): when some requested extended resource maps to a
//!   class, the pod's claim from an earlier cycle (annotated and controlled by the pod) is reused, or
//!   an in-memory claim named `<extended-resources>` without requests is made. It comes after the
//!   pod's own claims.
//! - Filter ([`filter_extended_resources`]): a claim from an earlier cycle (it has requests) makes
//!   every node fail (`cannot schedule extended resource claim`) so PostFilter deletes it; otherwise
//!   each resource is served by the node's device plugin (allocatable non-zero) or by DRA, and the
//!   node gets its own copy of the claim with one request per container ([`create_requests_and_mappings`]).
//!   A resource neither advertised by the node nor mapped to a class: `cannot fit resource`.
//! - PostFilter deletes a claim from an earlier cycle (`deletion of ResourceClaim completed`).
//!
//! The [`DeviceClassResolver`] (kube-scheduler's `ExtendedResourceCache`) is also what
//! NodeResourcesFit asks whether it should leave a resource to DynamicResources.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, ContainerExtendedResourceRequest};
use k8s_openapi::api::resource::v1::{
    DeviceClaim, DeviceRequest, ExactDeviceRequest, ResourceClaim, ResourceClaimSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::framework::status::Status;
use crate::plugins::node_resources::fit::compute_pod_resource_request;

/// Upstream reads the extended requests with `PodResourcesOptions{}`, whose zero value counts
/// pod-level requests whatever PodLevelResources says (they replace only cpu, memory and hugepages,
/// never an extended resource, so the answer is the same either way).
const UPSTREAM_ZERO_OPTIONS_POD_LEVEL: bool = true;
use crate::resource::{parse_milli_value, parse_value};
use crate::snapshot::{NodeInfo, PodInfo, Snapshot};

/// The name of the in-memory claim for a pod's extended resources (`specialClaimInMemName`): not a
/// valid object name, so it never clashes with a real claim; the API server generates the real name
/// when kube-scheduler creates it in PreBind.
pub(crate) const SPECIAL_CLAIM_IN_MEM_NAME: &str = "<extended-resources>";
/// `resourceapi.ExtendedResourceClaimAnnotation`: marks the claims kube-scheduler created for
/// extended resources.
pub(crate) const EXTENDED_RESOURCE_CLAIM_ANNOTATION: &str = "resource.kubernetes.io/extended-resource-claim";
/// Filter: the pod requests an extended resource the node does not advertise and no class maps.
pub(crate) const ERR_CANNOT_FIT_RESOURCE: &str = "cannot fit resource";
/// Filter: the pod's extended-resource claim is left over from an earlier cycle.
pub(crate) const ERR_CANNOT_SCHEDULE_EXTENDED_CLAIM: &str = "cannot schedule extended resource claim";
/// PostFilter: the leftover extended-resource claim was deleted so the next attempt starts anew.
pub(crate) const MSG_EXTENDED_CLAIM_DELETED: &str = "deletion of ResourceClaim completed";
/// `resourceapi.DeviceAllocationModeExactCount`.
const ALLOCATION_MODE_EXACT_COUNT: &str = "ExactCount";

// NodeResourcesFit reads the resolver too, so it lives below both plugins; kept reachable here.
pub(crate) use crate::plugins::helper::device_classes::{DeviceClassResolver, is_dra_extended_resource_name};

/// What PreFilter found about a pod's extended resources (`draExtendedResource` upstream).
#[derive(Debug, Clone)]
pub(crate) struct PodExtendedResources {
    /// The claim: from an earlier cycle, or the in-memory `<extended-resources>` one.
    pub claim: Arc<ResourceClaim>,
    /// The pod's scalar resource requests (`podScalarResources`), by name.
    pub pod_scalar_resources: BTreeMap<String, i64>,
}

/// `hasDeviceClassMappedExtendedResource`: some non-zero request is an extended resource a class
/// maps.
fn has_device_class_mapped_extended_resource(
    scalar: &BTreeMap<String, i64>,
    resolver: &DeviceClassResolver,
) -> bool {
    scalar.iter().any(|(name, &q)| {
        q != 0 && is_dra_extended_resource_name(name) && resolver.get_device_class(name).is_some()
    })
}

/// True when kube-scheduler handles the pod's extended resources through DRA on some node: it
/// requests one a DeviceClass maps. Such a pod gets its devices (and a ResourceClaim created by
/// kube-scheduler in PreBind) only when kube-scheduler binds it, like a pod with
/// `spec.resourceClaims`.
#[cfg(test)]
pub(crate) fn uses_dra_extended_resources(
    pod: &k8s_openapi::api::core::v1::Pod,
    resolver: &DeviceClassResolver,
) -> bool {
    !resolver.is_empty()
        && has_device_class_mapped_extended_resource(
            &compute_pod_resource_request(pod, UPSTREAM_ZERO_OPTIONS_POD_LEVEL).scalar_resources,
            resolver,
        )
}

/// `preFilterExtendedResources`: `None` when no requested extended resource maps to a class.
pub(crate) fn pre_filter_extended_resources(
    pod: &PodInfo,
    resolver: &DeviceClassResolver,
    snapshot: &Snapshot,
) -> Option<PodExtendedResources> {
    if resolver.is_empty() {
        return None;
    }
    let scalar = compute_pod_resource_request(&pod.pod, UPSTREAM_ZERO_OPTIONS_POD_LEVEL).scalar_resources;
    if !has_device_class_mapped_extended_resource(&scalar, resolver) {
        return None;
    }
    let claim = find_extended_resource_claim(pod, snapshot).unwrap_or_else(|| Arc::new(in_memory_claim(pod)));
    Some(PodExtendedResources {
        claim,
        pod_scalar_resources: scalar,
    })
}

/// `findExtendedResourceClaim`: a claim annotated as an extended-resource claim and controlled by
/// the pod (an earlier cycle created it in PreBind). kube-scheduler takes the first its cache
/// lists; with several (which it never creates) the lowest `namespace/name` is taken here.
fn find_extended_resource_claim(pod: &PodInfo, snapshot: &Snapshot) -> Option<Arc<ResourceClaim>> {
    snapshot
        .resource_claims
        .iter()
        .filter(|(_, c)| {
            c.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION))
                .is_some_and(|v| v == "true")
                && c.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.name == pod.name() && o.controller == Some(true) && o.uid == pod.uid())
        })
        .min_by(|a, b| a.0.cmp(b.0))
        .map(|(_, c)| c.clone())
}

/// The in-memory claim kube-scheduler makes when the pod has none yet: no requests, owned by the pod.
/// Its UID is a stand-in (kube-scheduler uses a random one for its in-flight bookkeeping).
fn in_memory_claim(pod: &PodInfo) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            namespace: Some(pod.namespace().to_string()),
            name: Some(SPECIAL_CLAIM_IN_MEM_NAME.to_string()),
            uid: Some(format!("{}{SPECIAL_CLAIM_IN_MEM_NAME}", pod.uid())),
            generate_name: Some(format!("{}-extended-resources-", pod.name())),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: pod.name().to_string(),
                uid: pod.uid().to_string(),
                controller: Some(true),
                ..Default::default()
            }]),
            annotations: Some([(EXTENDED_RESOURCE_CLAIM_ANNOTATION.to_string(), "true".to_string())].into()),
            ..Default::default()
        },
        spec: Some(ResourceClaimSpec::default()),
        status: None,
    }
}

/// True for the in-memory claim (`isSpecialClaimName`): a claim with any other name exists in the
/// API server (it is left over from an earlier cycle).
pub(crate) fn is_special_claim_name(claim: &ResourceClaim) -> bool {
    claim.metadata.name.as_deref() == Some(SPECIAL_CLAIM_IN_MEM_NAME)
}

/// True when the claim has `spec.devices.requests` (Go: the slice is not nil).
fn has_requests(claim: &ResourceClaim) -> bool {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.devices.as_ref())
        .is_some_and(|d| d.requests.is_some())
}

/// The node's variant of the extended-resource claim and how containers map to its requests.
#[derive(Debug, Clone)]
pub(crate) struct NodeExtendedClaim {
    /// The claim with the requests DRA must allocate on this node.
    pub claim: Arc<ResourceClaim>,
    /// `containerResourceRequestMappings`: which request serves which container's resource (what
    /// kube-scheduler writes to `status.extendedResourceClaimStatus` in PreBind).
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "the engine's PreBind plan does not write the status yet")
    )]
    pub mappings: Vec<ContainerExtendedResourceRequest>,
}

/// `filterExtendedResources`: `Ok(None)` when nothing is left to allocate through DRA on the node
/// (every resource is the device plugin's), `Ok(Some(_))` with the node's claim, or the Filter
/// status.
pub(crate) fn filter_extended_resources(
    ext: Option<&PodExtendedResources>,
    no_user_claim: bool,
    pod: &PodInfo,
    node: &NodeInfo,
    resolver: &DeviceClassResolver,
) -> Result<Option<NodeExtendedClaim>, Status> {
    let Some(ext) = ext else {
        return Ok(None);
    };
    // Left over from an earlier cycle: fail everywhere so PostFilter deletes it and the pod retries.
    if has_requests(&ext.claim) {
        return Err(Status::unresolvable(ERR_CANNOT_SCHEDULE_EXTENDED_CLAIM));
    }
    let mut extended = BTreeMap::new();
    for (name, &quantity) in &ext.pod_scalar_resources {
        if !is_dra_extended_resource_name(name) || quantity == 0 {
            continue;
        }
        let allocatable = node.allocatable.scalar_resources.get(name);
        let backed_by_dra = resolver.get_device_class(name).is_some();
        if backed_by_dra && allocatable.copied().unwrap_or(0) == 0 {
            // No device plugin serves it here: DRA must.
            extended.insert(name.clone(), quantity);
        } else if allocatable.is_none() {
            // Neither a device plugin's nor backed by DRA: the pod does not fit.
            return Err(Status::unresolvable(ERR_CANNOT_FIT_RESOURCE));
        }
    }
    // Everything is the device plugins' (NodeResourcesFit checked it) and there is nothing else.
    if no_user_claim && extended.is_empty() {
        return Ok(None);
    }
    // An allocated claim is one from an earlier cycle, which was rejected above.
    if ext.claim.status.as_ref().is_some_and(|s| s.allocation.is_some()) {
        return Ok(None);
    }
    let (requests, mappings) = create_requests_and_mappings(pod, &extended, resolver);
    let mut claim = ResourceClaim::clone(&ext.claim);
    // Go leaves the slice nil when there is nothing to request.
    claim
        .spec
        .get_or_insert_with(ResourceClaimSpec::default)
        .devices
        .get_or_insert_with(DeviceClaim::default)
        .requests = (!requests.is_empty()).then_some(requests);
    Ok(Some(NodeExtendedClaim {
        claim: Arc::new(claim),
        mappings,
    }))
}

/// `partitionContainerIndices`: indices (into init containers followed by containers) of long-lived
/// containers (sidecars and regular containers) and of short-lived ones (init containers that are
/// not sidecars).
pub(crate) fn partition_container_indices(
    containers: &[&Container],
    num_init: usize,
) -> (Vec<usize>, Vec<usize>) {
    let mut long_lived = Vec::with_capacity(containers.len());
    let mut short_lived = Vec::with_capacity(num_init);
    for (i, c) in containers.iter().enumerate() {
        let sidecar = c.restart_policy.as_deref() == Some("Always");
        if i < num_init && !sidecar {
            short_lived.push(i);
        } else {
            long_lived.push(i);
        }
    }
    (long_lived, short_lived)
}

/// `Quantity.AsInt64`: the value when the quantity is a whole number, `None` otherwise (or when it
/// does not parse).
fn as_int64(q: &str) -> Option<i64> {
    let value = parse_value(q).ok()?;
    let milli = parse_milli_value(q).ok()?;
    // Past i64::MAX / 1000 the milli value saturates and cannot show a fraction; no device count
    // gets near that.
    if value.checked_mul(1000).is_none_or(|m| m == milli) {
        Some(value)
    } else {
        None
    }
}

/// `createResourceRequestAndMappings`: the request container `index` needs for `resource` beyond
/// what it can reuse from `reusable` (requests of long-lived containers that start after it), and
/// its mappings. No request when the reusable ones suffice; nothing at all when the container does
/// not request the resource (or requests a fraction, which `AsInt64` rejects).
fn create_resource_request_and_mappings(
    index: usize,
    container: &Container,
    resource: &str,
    class_name: &str,
    reusable: &[Option<DeviceRequest>],
) -> (Option<DeviceRequest>, Vec<ContainerExtendedResourceRequest>) {
    let mut mappings = Vec::new();
    let Some(requests) = container.resources.as_ref().and_then(|r| r.requests.as_ref()) else {
        return (None, mappings);
    };
    let Some(wanted) = requests
        .get(resource)
        .and_then(|q| as_int64(&q.0))
        .filter(|&n| n != 0)
    else {
        return (None, mappings);
    };
    let mapping = |request_name: &str| ContainerExtendedResourceRequest {
        container_name: container.name.clone(),
        resource_name: resource.to_string(),
        request_name: request_name.to_string(),
    };
    let mut sum = 0_i64;
    for r in reusable.iter().flatten() {
        sum = sum.saturating_add(r.exactly.as_ref().and_then(|e| e.count).unwrap_or(0));
        mappings.push(mapping(&r.name));
        if sum >= wanted {
            return (None, mappings);
        }
    }
    // The resource's position among the container's requests, sorted by name (a BTreeMap's order).
    let resource_index = requests.keys().position(|k| k == resource).unwrap_or(0);
    let name = format!("container-{index}-request-{resource_index}");
    let request = DeviceRequest {
        name: name.clone(),
        exactly: Some(ExactDeviceRequest {
            device_class_name: class_name.to_string(),
            allocation_mode: Some(ALLOCATION_MODE_EXACT_COUNT.to_string()),
            count: Some(wanted.saturating_sub(sum)),
            ..Default::default()
        }),
        ..Default::default()
    };
    mappings.push(mapping(&name));
    (Some(request), mappings)
}

/// `createRequestsAndMappings`: the device requests of the node's extended-resource claim, sorted by
/// name, and the container mappings. Per resource (by name): one request per long-lived container
/// that asks for it; short-lived init containers first reuse the requests of long-lived containers
/// that come after them, and what they still need collapses into the largest such request, which all
/// of them map to (they run one at a time).
pub(crate) fn create_requests_and_mappings(
    pod: &PodInfo,
    extended: &BTreeMap<String, i64>,
    resolver: &DeviceClassResolver,
) -> (Vec<DeviceRequest>, Vec<ContainerExtendedResourceRequest>) {
    let Some(spec) = pod.pod.spec.as_ref() else {
        return (Vec::new(), Vec::new());
    };
    let init = spec.init_containers.as_deref().unwrap_or_default();
    let containers: Vec<&Container> = init.iter().chain(&spec.containers).collect();
    let (long_lived, short_lived) = partition_container_indices(&containers, init.len());
    let mut device_requests = Vec::new();
    let mut mappings = Vec::new();
    for resource in extended.keys() {
        let Some(class) = resolver.get_device_class(resource) else {
            continue;
        };
        let class_name = class.metadata.name.as_deref().unwrap_or("");
        let mut long_lived_requests: Vec<Option<DeviceRequest>> = vec![None; containers.len()];
        let mut long_lived_mappings = Vec::new();
        for &i in &long_lived {
            let (request, m) =
                create_resource_request_and_mappings(i, containers[i], resource, class_name, &[]);
            long_lived_requests[i] = request;
            long_lived_mappings.extend(m);
        }
        let mut max_short_lived: Option<DeviceRequest> = None;
        let mut short_lived_names = BTreeSet::new();
        let mut short_lived_mappings = Vec::new();
        for &i in &short_lived {
            let (request, m) = create_resource_request_and_mappings(
                i,
                containers[i],
                resource,
                class_name,
                long_lived_requests.get(i..).unwrap_or_default(),
            );
            if let Some(request) = request {
                short_lived_names.insert(request.name.clone());
                let count = |r: &DeviceRequest| r.exactly.as_ref().and_then(|e| e.count).unwrap_or(0);
                // Strictly larger: the first of equal requests stays.
                if max_short_lived
                    .as_ref()
                    .is_none_or(|max| count(max) < count(&request))
                {
                    max_short_lived = Some(request);
                }
            }
            short_lived_mappings.extend(m);
        }
        if let Some(max) = &max_short_lived
            && short_lived_names.len() > 1
        {
            short_lived_names.remove(&max.name);
            for m in &mut short_lived_mappings {
                if short_lived_names.contains(&m.request_name) {
                    m.request_name = max.name.clone();
                }
            }
        }
        device_requests.extend(max_short_lived);
        device_requests.extend(long_lived_requests.into_iter().flatten());
        mappings.extend(long_lived_mappings);
        mappings.extend(short_lived_mappings);
    }
    device_requests.sort_by(|a, b| a.name.cmp(&b.name));
    (device_requests, mappings)
}

#[cfg(test)]
#[path = "extended_tests.rs"]
mod tests;
