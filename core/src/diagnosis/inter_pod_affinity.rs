//! InterPodAffinity explained: for the pod's required anti-affinity, the running pods it collides with
//! and in which topology domain; for a running pod's anti-affinity, that pod; for the pod's required
//! affinity, the domains that do hold matching pods (or that none does). The cluster is read once per
//! diagnosis ([`AffinityFacts::new`]), not once per node.

use std::collections::{BTreeMap, BTreeSet};

use super::change::Change;
use super::finding::{Context, Detail, Explained, ReasonCode};
use crate::NodeInfo;

/// Pods named in one message at most; `-o json` has them all.
const MAX_PODS_NAMED: usize = 5;
/// Deleting more pods than this is not a change anyone would make to place one pod.
const MAX_PODS_TO_DELETE: usize = 10;

/// A running pod whose required anti-affinity matches the incoming pod.
struct Repeller {
    pod: String,
    topology_key: String,
    domain: String,
}

/// What the cluster holds for the pod's required (anti-)affinity terms.
pub(crate) struct AffinityFacts {
    /// Per required anti-affinity term: domain → matching pods.
    anti: Vec<BTreeMap<String, Vec<String>>>,
    /// Per required affinity term: domains holding matching pods.
    affinity: Vec<BTreeSet<String>>,
    /// Running pods whose anti-affinity repels the pod.
    repellers: Vec<Repeller>,
}

fn names_text(pods: &[String]) -> String {
    if pods.len() <= MAX_PODS_NAMED {
        pods.join(", ")
    } else {
        format!(
            "{} and {} more",
            pods[..MAX_PODS_NAMED].join(", "),
            pods.len() - MAX_PODS_NAMED
        )
    }
}

impl AffinityFacts {
    pub(crate) fn new(ctx: &Context<'_>) -> Self {
        let pod = ctx.pod;
        let mut anti = vec![BTreeMap::<String, Vec<String>>::new(); pod.required_anti_affinity_terms.len()];
        let mut affinity = vec![BTreeSet::new(); pod.required_affinity_terms.len()];
        let mut repellers = Vec::new();
        for node in ctx.snapshot.nodes() {
            for other in &node.pods {
                if other.key() == pod.key() {
                    continue;
                }
                let ns_labels = ctx.snapshot.namespace_labels(other.namespace());
                for (i, term) in pod.required_anti_affinity_terms.iter().enumerate() {
                    if let Some(domain) = node.labels().get(&term.topology_key)
                        && term.matches(other, ns_labels)
                    {
                        anti[i].entry(domain.clone()).or_default().push(other.key());
                    }
                }
                for (i, term) in pod.required_affinity_terms.iter().enumerate() {
                    if let Some(domain) = node.labels().get(&term.topology_key)
                        && term.matches(other, ns_labels)
                    {
                        affinity[i].insert(domain.clone());
                    }
                }
            }
        }
        let own_ns_labels = ctx.snapshot.namespace_labels(pod.namespace());
        for node in ctx.snapshot.have_pods_with_required_anti_affinity() {
            for other in &node.pods_with_required_anti_affinity {
                for term in &other.required_anti_affinity_terms {
                    if let Some(domain) = node.labels().get(&term.topology_key)
                        && term.matches(pod, own_ns_labels)
                    {
                        repellers.push(Repeller {
                            pod: other.key(),
                            topology_key: term.topology_key.clone(),
                            domain: domain.clone(),
                        });
                    }
                }
            }
        }
        AffinityFacts {
            anti,
            affinity,
            repellers,
        }
    }
}

pub(crate) fn explain(ctx: &Context<'_>, facts: &AffinityFacts, node: &NodeInfo) -> Vec<Explained> {
    let mut out = Vec::new();
    for (i, term) in ctx.pod.required_anti_affinity_terms.iter().enumerate() {
        let key = &term.topology_key;
        let Some(domain) = node.labels().get(key) else {
            continue;
        };
        let Some(pods) = facts.anti[i].get(domain) else {
            continue;
        };
        let mut changes = vec![Change::RemovePodAntiAffinityTerm { term: i }];
        if pods.len() <= MAX_PODS_TO_DELETE {
            changes.insert(0, Change::DeletePods { pods: pods.clone() });
        }
        out.push(Explained {
            reason: ReasonCode::PodAntiAffinityCollision,
            message: format!(
                "the pod's anti-affinity (term {i}, topologyKey {key}) collides with {} in {key}={domain}",
                names_text(pods)
            ),
            detail: Detail::PodAffinity {
                owner: "incoming".to_string(),
                term: i,
                topology_key: key.clone(),
                domain: Some(domain.clone()),
                pods: pods.clone(),
                domains_with_matches: facts.anti[i].keys().cloned().collect(),
            },
            changes,
        });
    }
    let repellers: Vec<&Repeller> = facts
        .repellers
        .iter()
        .filter(|r| node.labels().get(&r.topology_key) == Some(&r.domain))
        .collect();
    for r in &repellers {
        out.push(Explained {
            reason: ReasonCode::ExistingPodAntiAffinityCollision,
            message: format!(
                "running pod {}'s anti-affinity (topologyKey {}) excludes this pod from {}={}",
                r.pod, r.topology_key, r.topology_key, r.domain
            ),
            detail: Detail::PodAffinity {
                owner: r.pod.clone(),
                term: 0,
                topology_key: r.topology_key.clone(),
                domain: Some(r.domain.clone()),
                pods: vec![r.pod.clone()],
                domains_with_matches: Vec::new(),
            },
            changes: vec![Change::DeletePods {
                pods: vec![r.pod.clone()],
            }],
        });
    }
    for (i, term) in ctx.pod.required_affinity_terms.iter().enumerate() {
        let key = &term.topology_key;
        let domain = node.labels().get(key);
        let domains = &facts.affinity[i];
        if domain.is_some_and(|d| domains.contains(d)) {
            continue;
        }
        let (reason, message) = if domains.is_empty() {
            (
                ReasonCode::PodAffinityNoMatchingPod,
                format!("the pod's affinity (term {i}, topologyKey {key}) matches no running pod anywhere"),
            )
        } else {
            let list: Vec<String> = domains.iter().cloned().collect();
            (
                ReasonCode::PodAffinityNotInDomain,
                format!(
                    "the pod's affinity (term {i}, topologyKey {key}) matches pods only in {key}={}; {}",
                    names_text(&list),
                    match domain {
                        Some(d) => format!("the node is in {key}={d}"),
                        None => format!("the node has no {key} label"),
                    }
                ),
            )
        };
        out.push(Explained {
            reason,
            message,
            detail: Detail::PodAffinity {
                owner: "incoming".to_string(),
                term: i,
                topology_key: key.clone(),
                domain: domain.cloned(),
                pods: Vec::new(),
                domains_with_matches: domains.iter().cloned().collect(),
            },
            changes: vec![Change::RemovePodAffinityTerm { term: i }],
        });
    }
    out
}
