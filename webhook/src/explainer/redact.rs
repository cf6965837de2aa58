//! What an answer may tell of namespaces the user cannot read. An explanation of a pod in namespace
//! A is computed on the whole cluster, and its text can name pods of namespace B: the running pod
//! whose anti-affinity repels it, the pods its own anti-affinity collides with, a preemption's
//! victims. A user who may not list pods in B must not learn their names from it; what B's pods do
//! to a node (their requests, their counts per node or domain, that "a pod" collides) is the
//! node's state, which the answer exists to explain, and stays.
//!
//! So before the evaluation, every pod of a namespace the user may not list pods in gets a name of
//! the form `hidden-pod-N` (and its owners `hidden-owner-N`; ResourceClaims reserved for it follow
//! the new name), in place: the order of the snapshot, and so the verdict, is unchanged, and every
//! renderer (table, JSON, YAML, Markdown) shows the placeholder, wherever the name would have been.
//! Namespaces keep their names (affinity terms select them by name and by label). The answer warns
//! how many pods were hidden.
//!
//! Who may read what is asked of the API server (SubjectAccessReviews, as for the pod's own
//! namespace): one for pods in all namespaces (an administrator: nothing hidden), else one per other
//! namespace holding pods, at most [`MAX_NAMESPACE_REVIEWS`] of them ([`CONCURRENT_REVIEWS`] at a
//! time); namespaces past that bound are hidden without asking.

use std::collections::{BTreeSet, HashMap};

use futures::StreamExt;
use kube::Client;

use sched_core::ClusterObjects;

use super::identity::{Identity, may_list_pods};

/// Namespaces asked about per request at most; the others are hidden.
pub const MAX_NAMESPACE_REVIEWS: usize = 64;
/// SubjectAccessReviews in flight at once for one request.
pub const CONCURRENT_REVIEWS: usize = 8;
/// The name a hidden pod gets, followed by its number.
pub const HIDDEN_POD_PREFIX: &str = "hidden-pod-";
/// The name a hidden pod's owner gets, followed by its number.
pub const HIDDEN_OWNER_PREFIX: &str = "hidden-owner-";

/// The namespaces (other than `asked`, which the caller has checked) whose pods `identity` may not
/// list, among those holding pods in `objects`.
pub async fn unreadable_namespaces(
    client: &Client,
    identity: &Identity,
    asked: &str,
    objects: &ClusterObjects,
) -> Result<BTreeSet<String>, kube::Error> {
    if may_list_pods(client, identity, None).await? {
        return Ok(BTreeSet::new());
    }
    let others: BTreeSet<&str> = objects
        .pods
        .iter()
        .filter_map(|p| p.metadata.namespace.as_deref())
        .filter(|ns| *ns != asked)
        .collect();
    let mut hidden: BTreeSet<String> = others
        .iter()
        .skip(MAX_NAMESPACE_REVIEWS)
        .map(|ns| ns.to_string())
        .collect();
    let asked_about: Vec<String> = others
        .iter()
        .take(MAX_NAMESPACE_REVIEWS)
        .map(|ns| ns.to_string())
        .collect();
    let reviews = asked_about.into_iter().map(|namespace| {
        let (client, identity) = (client.clone(), identity.clone());
        async move {
            let allowed = may_list_pods(&client, &identity, Some(&namespace)).await;
            (namespace, allowed)
        }
    });
    let answers: Vec<(String, Result<bool, kube::Error>)> = futures::stream::iter(reviews)
        .buffer_unordered(CONCURRENT_REVIEWS)
        .collect()
        .await;
    for (namespace, allowed) in answers {
        if !allowed? {
            hidden.insert(namespace);
        }
    }
    Ok(hidden)
}

/// Renames every pod of the `hidden` namespaces (see the module documentation); returns how many.
pub fn hide_pod_names(objects: &mut ClusterObjects, hidden: &BTreeSet<String>) -> usize {
    if hidden.is_empty() {
        return 0;
    }
    // (namespace, old name) → new name, for the references to the pods.
    let mut renamed: HashMap<(String, String), String> = HashMap::new();
    // An owner keeps one placeholder for all its pods (they still look like one workload).
    let mut owners: HashMap<String, String> = HashMap::new();
    for pod in &mut objects.pods {
        let Some(namespace) = pod.metadata.namespace.clone() else {
            continue;
        };
        if !hidden.contains(&namespace) {
            continue;
        }
        let new_name = format!("{HIDDEN_POD_PREFIX}{}", renamed.len());
        let old_name = pod.metadata.name.replace(new_name.clone()).unwrap_or_default();
        pod.metadata.generate_name = None;
        for owner in pod.metadata.owner_references.iter_mut().flatten() {
            let next = format!("{HIDDEN_OWNER_PREFIX}{}", owners.len());
            owner.name = owners.entry(owner.uid.clone()).or_insert(next).clone();
        }
        renamed.insert((namespace, old_name), new_name);
    }
    for claim in &mut objects.resource_claims {
        let Some(namespace) = claim.metadata.namespace.clone() else {
            continue;
        };
        let consumers = claim
            .status
            .iter_mut()
            .flat_map(|s| s.reserved_for.iter_mut().flatten());
        for consumer in consumers.filter(|c| c.resource == "pods") {
            if let Some(new_name) = renamed.get(&(namespace.clone(), consumer.name.clone())) {
                consumer.name = new_name.clone();
            }
        }
    }
    renamed.len()
}

/// The warning of an answer with `count` pods hidden.
pub fn hidden_warning(count: usize) -> String {
    format!(
        "the names of {count} pods in namespaces you may not list pods in are hidden (shown as \
         {HIDDEN_POD_PREFIX}N); what they take on their nodes is counted as usual"
    )
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::api::resource::v1::{
        ResourceClaim, ResourceClaimConsumerReference, ResourceClaimStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    use super::*;

    fn pod(namespace: &str, name: &str, owner_uid: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                owner_references: owner_uid.map(|uid| {
                    vec![OwnerReference {
                        kind: "ReplicaSet".into(),
                        name: format!("{name}-owner"),
                        uid: uid.into(),
                        ..OwnerReference::default()
                    }]
                }),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    fn names(objects: &ClusterObjects) -> Vec<String> {
        objects
            .pods
            .iter()
            .map(|p| {
                format!(
                    "{}/{}",
                    p.metadata.namespace.as_deref().unwrap_or_default(),
                    p.metadata.name.as_deref().unwrap_or_default()
                )
            })
            .collect()
    }

    #[test]
    fn pods_of_hidden_namespaces_are_renamed_in_place() {
        let mut objects = ClusterObjects {
            pods: vec![
                pod("a", "mine", None),
                pod("b", "secret-1", Some("rs-1")),
                pod("b", "secret-2", Some("rs-1")),
                pod("c", "visible", None),
            ],
            resource_claims: vec![ResourceClaim {
                metadata: ObjectMeta {
                    namespace: Some("b".into()),
                    name: Some("gpu".into()),
                    ..ObjectMeta::default()
                },
                status: Some(ResourceClaimStatus {
                    reserved_for: Some(vec![ResourceClaimConsumerReference {
                        resource: "pods".into(),
                        name: "secret-2".into(),
                        uid: "u2".into(),
                        ..ResourceClaimConsumerReference::default()
                    }]),
                    ..ResourceClaimStatus::default()
                }),
                ..ResourceClaim::default()
            }],
            ..ClusterObjects::default()
        };
        let hidden = BTreeSet::from(["b".to_string()]);
        assert_eq!(hide_pod_names(&mut objects, &hidden), 2);
        assert_eq!(
            names(&objects),
            ["a/mine", "b/hidden-pod-0", "b/hidden-pod-1", "c/visible"],
            "renamed in place, the order kept"
        );
        let owners: Vec<&str> = objects.pods[1..3]
            .iter()
            .flat_map(|p| p.metadata.owner_references.iter().flatten())
            .map(|o| o.name.as_str())
            .collect();
        assert_eq!(
            owners,
            ["hidden-owner-0", "hidden-owner-0"],
            "one owner, one placeholder"
        );
        let reserved = &objects.resource_claims[0]
            .status
            .as_ref()
            .and_then(|s| s.reserved_for.as_ref())
            .expect("reserved")[0];
        assert_eq!(reserved.name, "hidden-pod-1", "the claim follows its pod");
        let text = format!("{objects:?}");
        assert!(!text.contains("secret-"), "a hidden name is left: {text}");
        // Nothing hidden: nothing changes.
        let before = names(&objects);
        assert_eq!(hide_pod_names(&mut objects, &BTreeSet::new()), 0);
        assert_eq!(names(&objects), before);
    }
}
