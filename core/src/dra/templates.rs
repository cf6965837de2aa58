//! ResourceClaims a pod will get from its ResourceClaimTemplates, made in memory as
//! kube-controller-manager's resourceclaim controller would make them. kube-scheduler does not
//! look at a pod until its claims exist (PreEnqueue: `ResourceClaim not created yet`); explain uses
//! these to answer "once its claims are created, where would it go?" — for pods just created and
//! for `explain -f` pods that will never exist as written.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodResourceClaimStatus};
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::snapshot::{Snapshot, namespaced_key};

/// Why a pod's claims could not be made from its templates.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// The template the pod names does not exist.
    #[error("ResourceClaimTemplate {0} not found")]
    NotFound(String),
}

/// What [`with_claims_from_templates`] made.
#[derive(Debug, Clone)]
pub struct GeneratedClaims {
    /// The snapshot with the generated claims added (nothing else changes).
    pub snapshot: Snapshot,
    /// The pod with `status.resourceClaimStatuses` naming them.
    pub pod: Pod,
    /// `namespace/name` of each generated claim and the template it came from.
    pub claims: Vec<(String, String)>,
}

/// kube-controller-manager's resourceclaim controller leaves room for `-` and 5 random characters in
/// a 63-character name (`maxBaseLen` in pkg/controller/resourceclaim).
const MAX_GENERATE_NAME_BASE: usize = 57;

/// A template claim of a pod whose ResourceClaim does not exist yet: kube-scheduler does not look
/// at the pod until kube-controller-manager's resourceclaim controller has made it (and written its
/// name into `status.resourceClaimStatuses`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ClaimNotCreated {
    /// The pod's claim (`spec.resourceClaims[].name`).
    pub pod_claim: String,
    /// `namespace/name` of the ResourceClaimTemplate it is made from.
    pub template: String,
    /// False when the template does not exist either: the controller cannot make the claim.
    pub template_exists: bool,
    /// The controller's `generateName` for it: the claim is this and 5 random characters.
    pub generate_name: String,
}

/// The `generateName` kube-controller-manager's resourceclaim controller gives the claim it makes
/// for `pod_claim` of `pod_name`: `<pod>-<claim>-`, both parts cut in proportion when longer than
/// 57 characters (then without the trailing `-`, as upstream).
pub fn claim_generate_name(pod_name: &str, pod_claim: &str) -> String {
    let name = format!("{pod_name}-{pod_claim}-");
    if name.len() <= MAX_GENERATE_NAME_BASE {
        return name;
    }
    let cut = |s: &str| {
        let mut end = s.len() * MAX_GENERATE_NAME_BASE / name.len();
        // Names are ASCII; a cut inside a character of a bad name would panic on slicing.
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s[..end].to_string()
    };
    format!("{}-{}", cut(pod_name), cut(pod_claim))
}

/// The pod's template claims that have no ResourceClaim yet (no entry in
/// `status.resourceClaimStatuses`), in `spec.resourceClaims` order.
pub fn claims_not_created(snapshot: &Snapshot, pod: &Pod) -> Vec<ClaimNotCreated> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref());
    pod.spec
        .iter()
        .flat_map(|s| s.resource_claims.iter().flatten())
        .filter(|c| !statuses.into_iter().flatten().any(|s| s.name == c.name))
        .filter_map(|c| {
            let template = c.resource_claim_template_name.as_ref()?;
            let key = namespaced_key(namespace, template);
            Some(ClaimNotCreated {
                pod_claim: c.name.clone(),
                template_exists: snapshot.resource_claim_templates.contains_key(&key),
                template: key,
                generate_name: claim_generate_name(pod_name, &c.name),
            })
        })
        .collect()
}

/// The pod's template claims that have no claim yet, made from their templates (named
/// `<pod>-<claim>`, owned by the pod, the template's labels and annotations, its spec); `None` when
/// every template claim already has one.
pub fn with_claims_from_templates(
    snapshot: &Snapshot,
    pod: &Pod,
) -> Result<Option<GeneratedClaims>, TemplateError> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.clone())
        .unwrap_or_default();
    let mut snapshot = snapshot.clone();
    let mut pod = pod.clone();
    let mut claims = Vec::new();
    let mut new_statuses = statuses.clone();
    for pod_claim in pod.spec.iter().flat_map(|s| s.resource_claims.iter().flatten()) {
        let Some(template_name) = &pod_claim.resource_claim_template_name else {
            continue;
        };
        if statuses.iter().any(|s| s.name == pod_claim.name) {
            continue;
        }
        let template_key = namespaced_key(&namespace, template_name);
        let template = snapshot
            .resource_claim_templates
            .get(&template_key)
            .ok_or_else(|| TemplateError::NotFound(template_key.clone()))?;
        let name = format!("{pod_name}-{}", pod_claim.name);
        let template_spec = template.spec.clone().unwrap_or_default();
        let template_meta = template_spec.metadata.unwrap_or_default();
        let claim = ResourceClaim {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                labels: template_meta.labels,
                annotations: template_meta.annotations,
                owner_references: Some(vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "Pod".into(),
                    name: pod_name.clone(),
                    uid: pod.metadata.uid.clone().unwrap_or_default(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]),
                ..Default::default()
            },
            spec: template_spec.spec,
            status: None,
        };
        let key = namespaced_key(&namespace, &name);
        snapshot.resource_claims.insert(key.clone(), Arc::new(claim));
        new_statuses.push(PodResourceClaimStatus {
            name: pod_claim.name.clone(),
            resource_claim_name: Some(name),
        });
        claims.push((key, template_key));
    }
    if claims.is_empty() {
        return Ok(None);
    }
    pod.status
        .get_or_insert_with(Default::default)
        .resource_claim_statuses = Some(new_statuses);
    Ok(Some(GeneratedClaims {
        snapshot,
        pod,
        claims,
    }))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PodResourceClaim;
    use k8s_openapi::api::resource::v1::ResourceClaimTemplate;
    use serde_json::json;

    use super::*;
    use crate::plugins::dynamic_resources::pod_resource_claims;
    use crate::snapshot::{ClusterObjects, PodInfo};
    use crate::testing::pod;

    fn template_pod(claims: &[(&str, &str)]) -> Pod {
        let claims: Vec<PodResourceClaim> = claims
            .iter()
            .map(|(c, t)| PodResourceClaim {
                name: c.to_string(),
                resource_claim_template_name: Some(t.to_string()),
                ..Default::default()
            })
            .collect();
        pod("job")
            .with(move |p| {
                p.metadata.uid = Some("uid-job".into());
                p.spec.as_mut().unwrap().resource_claims = Some(claims);
            })
            .obj()
    }

    #[test]
    fn claims_are_made_from_templates_as_the_resourceclaim_controller_would() {
        let template: ResourceClaimTemplate = serde_json::from_value(json!({
            "metadata": {"name": "gpu", "namespace": "default"},
            "spec": {"metadata": {"labels": {"team": "ml"}},
                     "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}}},
        }))
        .unwrap();
        let snapshot = Snapshot::new(ClusterObjects {
            resource_claim_templates: vec![template],
            ..Default::default()
        });
        let p = template_pod(&[("gpus", "gpu")]);
        // kube-scheduler's view before: not created yet.
        assert!(pod_resource_claims(&snapshot, &PodInfo::new(p.clone())).is_err());
        let made = with_claims_from_templates(&snapshot, &p)
            .unwrap()
            .expect("one claim to make");
        assert_eq!(
            made.claims,
            [("default/job-gpus".to_string(), "default/gpu".to_string())]
        );
        let claims =
            pod_resource_claims(&made.snapshot, &PodInfo::new(made.pod.clone())).expect("claims resolve");
        assert_eq!(claims.len(), 1);
        let claim = &claims[0];
        assert_eq!(claim.metadata.labels.as_ref().unwrap()["team"], "ml");
        assert_eq!(
            claim
                .spec
                .as_ref()
                .unwrap()
                .devices
                .as_ref()
                .unwrap()
                .requests
                .as_ref()
                .unwrap()[0]
                .name,
            "g"
        );
        // Nothing left to make the second time.
        assert!(
            with_claims_from_templates(&made.snapshot, &made.pod)
                .unwrap()
                .is_none()
        );
        // A template that does not exist.
        assert_eq!(
            with_claims_from_templates(&snapshot, &template_pod(&[("x", "missing")])).unwrap_err(),
            TemplateError::NotFound("default/missing".into())
        );
    }

    #[test]
    fn claims_not_created_name_their_template_and_the_controllers_generated_name() {
        let template: ResourceClaimTemplate = serde_json::from_value(json!({
            "metadata": {"name": "gpu", "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": []}}},
        }))
        .unwrap();
        let snapshot = Snapshot::new(ClusterObjects {
            resource_claim_templates: vec![template],
            ..Default::default()
        });
        let mut p = template_pod(&[("gpus", "gpu"), ("x", "missing"), ("made", "gpu")]);
        p.status
            .get_or_insert_with(Default::default)
            .resource_claim_statuses = Some(vec![PodResourceClaimStatus {
            name: "made".into(),
            resource_claim_name: Some("job-made-abcde".into()),
        }]);
        let missing = claims_not_created(&snapshot, &p);
        assert_eq!(
            missing,
            [
                ClaimNotCreated {
                    pod_claim: "gpus".into(),
                    template: "default/gpu".into(),
                    template_exists: true,
                    generate_name: "job-gpus-".into(),
                },
                ClaimNotCreated {
                    pod_claim: "x".into(),
                    template: "default/missing".into(),
                    template_exists: false,
                    generate_name: "job-x-".into(),
                },
            ]
        );
    }

    #[test]
    fn long_generated_names_are_cut_as_the_controller_cuts_them() {
        // pkg/controller/resourceclaim: both parts cut in proportion to 57 characters.
        let pod = "p".repeat(60);
        let claim = "c".repeat(20);
        let name = claim_generate_name(&pod, &claim);
        // 82 characters: the pod part to 60*57/82 = 41, the claim part to 20*57/82 = 13.
        assert_eq!(name, format!("{}-{}", "p".repeat(41), "c".repeat(13)));
        assert_eq!(claim_generate_name("notebook", "gpu"), "notebook-gpu-");
    }
}
