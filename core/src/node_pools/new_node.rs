//! Would a new node of some pool take this pod? The provisioner's answer for one pending pod
//! (`Scheduler.addToNewNodeClaim` and `NodeClaim.CanAdd` of `provisioning/scheduling`), pool by pool
//! in weight order: the pool's limits, its taints, its requirements against the pod's, then its
//! instance types (requirements met, resources enough, an offering the requirements allow). The first
//! pool that can take the pod names the node it would launch; when none can, the answer is the error
//! Karpenter writes in its `FailedScheduling` event, after `Failed to schedule pod, `.
//!
//! Not modelled yet: DaemonSet overhead (Karpenter adds the requests of the DaemonSets a new node
//! would run), topology spread and pod (anti-)affinity across the new nodes of one batch, volume
//! topology, DRA, minValues, reserved capacity; and the batch itself (pods sharing a new node).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Pod, Taint};

use super::instance_types::InstanceType;
use super::node_pool::{NODES_RESOURCE, NodePool};
use super::requirements::{HOSTNAME_LABEL, Requirement, Requirements};
use super::resources::{ResourceAmounts, is_binary};
use crate::plugins::helper::taints::{pod_tolerations, tolerates};
use crate::resource::PODS;
use crate::snapshot::requests::{Amounts, RequestOptions, pod_requests};

/// The prefix of Karpenter's `FailedScheduling` event on a pod.
pub const FAILED_TO_SCHEDULE_PREFIX: &str = "Failed to schedule pod, ";
/// `add` when no pool has an instance type its requirements allow.
pub const NO_TEMPLATES: &str = "nodepool requirements filtered out all available instance types";
/// A pool whose `nodes` limit is used up.
const NODE_LIMIT_EXHAUSTED: &str = "node limits have been exhausted for nodepool";
/// A pool whose limits no instance type fits in.
const INSTANCE_TYPES_EXCEED_LIMITS: &str = "all available instance types exceed limits for nodepool";
/// A pool taint the pod does not tolerate.
const DID_NOT_TOLERATE: &str = "did not tolerate taint";

/// The node a pool would launch for the pod.
#[derive(Debug, Clone, PartialEq)]
pub struct NewNode {
    /// The pool.
    pub pool: String,
    /// The instance types still possible, cheapest first (the launch picks the cheapest offering).
    pub instance_types: Vec<String>,
    /// The cheapest offering's price.
    pub price: f64,
}

/// One pool's verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum PoolVerdict {
    /// A new node of this pool would take the pod.
    Fits(NewNode),
    /// It would not, in Karpenter's words.
    Refused(String),
}

/// The answer for one pod over every pool.
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleUpAnswer {
    /// Each pool tried, in the provisioner's order, with its verdict (for the last term tried).
    pub pools: Vec<(String, PoolVerdict)>,
    /// The node the provisioner would launch, or the error of its `FailedScheduling` event.
    pub outcome: Result<NewNode, String>,
}

/// A pool with what the provisioner knows of it for this run.
#[derive(Debug, Clone)]
pub struct PoolState<'a> {
    /// The pool.
    pub pool: &'a NodePool,
    /// What its limits leave (`None`: no limits).
    pub remaining: Option<ResourceAmounts>,
}

/// `RequestsForPods(pod)`: the pod's requests as Karpenter computes them (status resources
/// included), plus one `pods`.
pub fn pod_requests_for_karpenter(pod: &Pod) -> ResourceAmounts {
    let options = RequestOptions {
        use_status_resources: true,
        ..RequestOptions::default()
    };
    let mut amounts: Amounts = pod_requests(pod, &Amounts::new(), options);
    amounts.insert(PODS.to_owned(), 1);
    ResourceAmounts::from_amounts(amounts, binary_names(pod))
}

/// The resource names the pod's spec writes with binary suffixes (Go keeps the format of the first
/// quantity it adds).
fn binary_names(pod: &Pod) -> BTreeSet<String> {
    let Some(spec) = pod.spec.as_ref() else {
        return BTreeSet::new();
    };
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    containers
        .filter_map(|c| c.resources.as_ref().and_then(|r| r.requests.as_ref()))
        .chain(spec.overhead.as_ref())
        .flatten()
        .filter(|(_, q)| is_binary(&q.0))
        .map(|(name, _)| name.clone())
        .collect()
}

/// Would a new node take `pod`: `pools` in weight order, `instance_types` the provider's catalogue.
pub fn scale_up_for_pod(
    pod: &Pod,
    pools: &[PoolState<'_>],
    instance_types: &[InstanceType],
) -> ScaleUpAnswer {
    let requests = pod_requests_for_karpenter(pod);
    // Pools none of whose instance types have an offering their requirements allow get no
    // NodeClaimTemplate at all.
    let templates: Vec<(&PoolState<'_>, Vec<&InstanceType>)> = pools
        .iter()
        .filter_map(|state| {
            let types: Vec<&InstanceType> = instance_types
                .iter()
                .filter(|it| has_compatible_offering(it, &state.pool.requirements))
                .collect();
            (!types.is_empty()).then_some((state, types))
        })
        .collect();
    if templates.is_empty() {
        return ScaleUpAnswer {
            pools: Vec::new(),
            outcome: Err(NO_TEMPLATES.to_owned()),
        };
    }
    // Karpenter relaxes a pod whose required node affinity has several terms by dropping the first
    // while more remain: the answer is that of the first term any pool takes, else the last term's.
    let terms = Requirements::pod_terms(pod);
    let mut last = None;
    for term in 0..terms {
        let pod_requirements = match Requirements::for_pod(pod, term) {
            Ok(r) => r,
            Err(err) => {
                return ScaleUpAnswer {
                    pools: Vec::new(),
                    outcome: Err(err.to_string()),
                };
            }
        };
        let verdicts: Vec<(String, PoolVerdict)> = templates
            .iter()
            .map(|(state, types)| {
                let verdict = pool_verdict(pod, &pod_requirements, &requests, state, types);
                (state.pool.name.clone(), verdict)
            })
            .collect();
        let first_fit = verdicts.iter().find_map(|(_, v)| match v {
            PoolVerdict::Fits(node) => Some(node.clone()),
            PoolVerdict::Refused(_) => None,
        });
        let outcome = match first_fit {
            Some(node) => Ok(node),
            None => Err(verdicts
                .iter()
                .filter_map(|(_, v)| match v {
                    PoolVerdict::Refused(reason) => Some(reason.as_str()),
                    PoolVerdict::Fits(_) => None,
                })
                .collect::<Vec<_>>()
                .join("; ")),
        };
        let done = outcome.is_ok();
        last = Some(ScaleUpAnswer {
            pools: verdicts,
            outcome,
        });
        if done {
            break;
        }
    }
    last.expect("a pod has at least one term")
}

fn has_compatible_offering(instance_type: &InstanceType, requirements: &Requirements) -> bool {
    instance_type
        .offerings
        .iter()
        .any(|o| o.available && requirements.compatible(&o.requirements).is_ok())
}

/// One pool (`addToNewNodeClaim`'s body for one template, then `CanAdd`).
fn pool_verdict(
    pod: &Pod,
    pod_requirements: &Requirements,
    requests: &ResourceAmounts,
    state: &PoolState<'_>,
    instance_types: &[&InstanceType],
) -> PoolVerdict {
    let pool = state.pool;
    let mut types: Vec<&InstanceType> = instance_types.to_vec();
    if let Some(remaining) = &state.remaining {
        if remaining
            .iter()
            .any(|(name, amount)| name == NODES_RESOURCE && amount <= 0)
        {
            return PoolVerdict::Refused(format!("{NODE_LIMIT_EXHAUSTED} (NodePool={})", pool.name));
        }
        types.retain(|it| !it.capacity.exceeds(remaining));
        if types.is_empty() {
            return PoolVerdict::Refused(format!("{INSTANCE_TYPES_EXCEED_LIMITS} (NodePool={})", pool.name));
        }
    }
    if let Some(refusal) = untolerated_taints(pod, &pool.taints) {
        return PoolVerdict::Refused(refusal);
    }
    if let Err(err) = pool.requirements.compatible(pod_requirements) {
        return PoolVerdict::Refused(format!("incompatible requirements, {err}"));
    }
    let mut requirements = pool.requirements.clone();
    requirements.add_all(pod_requirements);
    requirements.add(Requirement::equal(HOSTNAME_LABEL, "hostname-placeholder"));
    filter_instance_types(&pool.name, &requirements, requests, &types)
}

/// `Taints.ToleratesPod`: every untolerated taint, joined as multierr joins them.
fn untolerated_taints(pod: &Pod, taints: &[Taint]) -> Option<String> {
    let tolerations = pod_tolerations(pod);
    let untolerated: Vec<String> = taints
        .iter()
        .filter(|taint| !tolerations.iter().any(|t| tolerates(t, taint, true)))
        .map(|taint| format!("{DID_NOT_TOLERATE} (taint={})", pretty_taint(taint)))
        .collect();
    (!untolerated.is_empty()).then(|| untolerated.join("; "))
}

/// `pretty.Taint`: `key=value:Effect`, or `key:Effect` without a value.
fn pretty_taint(taint: &Taint) -> String {
    match taint.value.as_deref().filter(|v| !v.is_empty()) {
        Some(value) => format!("{}={value}:{}", taint.key, taint.effect),
        None => format!("{}:{}", taint.key, taint.effect),
    }
}

/// `filterInstanceTypesByRequirements` and `InstanceTypeFilterError`: which of the three criteria
/// (and which pairs) some instance type met, and the sentence Karpenter picks from that.
fn filter_instance_types(
    pool: &str,
    requirements: &Requirements,
    requests: &ResourceAmounts,
    types: &[&InstanceType],
) -> PoolVerdict {
    let (mut requirements_met, mut fits, mut has_offering) = (false, false, false);
    let (mut requirements_and_fits, mut requirements_and_offering, mut fits_and_offering) =
        (false, false, false);
    let mut remaining: Vec<(&InstanceType, f64)> = Vec::new();
    for it in types {
        let compatible = it.requirements.intersects(requirements).is_ok();
        let offering = it.cheapest_offering(requirements);
        let it_fits = requests.fits_in(&it.allocatable());
        let it_has_offering = offering.is_some();
        requirements_met |= compatible;
        fits |= it_fits;
        has_offering |= it_has_offering;
        requirements_and_fits |= compatible && it_fits && !it_has_offering;
        requirements_and_offering |= compatible && it_has_offering && !it_fits;
        fits_and_offering |= it_fits && it_has_offering && !compatible;
        if let (true, true, Some(offering)) = (compatible, it_fits, offering) {
            remaining.push((it, offering.price));
        }
    }
    if !remaining.is_empty() {
        remaining.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.name.cmp(&b.0.name)));
        return PoolVerdict::Fits(NewNode {
            pool: pool.to_owned(),
            instance_types: remaining.iter().map(|(it, _)| it.name.clone()).collect(),
            price: remaining[0].1,
        });
    }
    let what = if !requirements_met && !fits && !has_offering {
        "no instance type met the scheduling requirements or had enough resources or had a required offering"
    } else if !requirements_met && !fits {
        "no instance type met the scheduling requirements or had enough resources"
    } else if !requirements_met && !has_offering {
        "no instance type met the scheduling requirements or had a required offering"
    } else if !fits && !has_offering {
        "no instance type had enough resources or had a required offering"
    } else if !requirements_met {
        "no instance type met all requirements"
    } else if !fits {
        "no instance type has enough resources"
    } else if !has_offering {
        "no instance type has the required offering"
    } else if requirements_and_fits {
        "no instance type which met the scheduling requirements and had enough resources, had a required offering"
    } else if fits_and_offering {
        "no instance type which had enough resources and the required offering met the scheduling requirements"
    } else if requirements_and_offering {
        "no instance type which met the scheduling requirements and the required offering had the required resources"
    } else {
        "no instance type met the requirements/resources/offering tuple"
    };
    let mut message = format!("{what}, requirements={requirements}, resources={requests}");
    // Karpenter's own hint for a typo it has seen: a request of a million cpus or more.
    if what == "no instance type has enough resources" && requests.get(crate::resource::CPU) >= 1_000_000_000
    {
        message.push_str(" (CPU request >= 1 Million, m vs M typo?)");
    }
    PoolVerdict::Refused(message)
}

#[cfg(test)]
mod tests;
