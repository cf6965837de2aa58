//! Loading [`ClusterObjects`] from the API server (feature `kube`): every kind is listed concurrently,
//! page by page, and pruned as it arrives (see [`Prune`]), so peak memory stays near the pruned size.
//!
//! Nodes and pods are required. Every other kind only refines decisions (volume binding and limits, PDBs, spread
//! defaults, namespace selectors), so a kind the user may not list (403) or the server does not serve
//! (404) becomes a warning and an empty list instead of a failure.
//!
//! To save what was loaded, use [`write_list_yaml`] (what `kubectl sched snapshot` writes) or
//! [`write_list_json`] (faster to load back for large clusters).

use std::fmt::Debug;

use ::kube::api::ListParams;
use ::kube::{Api, Client};
use serde::de::DeserializeOwned;

use super::ClusterObjects;
use super::load::{ObjectKind, Prune};
pub use super::load::{write_list_json, write_list_yaml};

/// How to list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiLoadOptions {
    /// Items per page (`limit`); the server hands a continue token for the rest.
    pub page_size: u32,
    /// Restricts namespaced kinds to one namespace. The result is then partial: pods of other
    /// namespaces still use node resources and may match affinity terms, so only use this for dumps.
    pub namespace: Option<String>,
    /// Asks the server to leave out Succeeded/Failed pods, which the scheduler ignores anyway.
    pub skip_terminal_pods: bool,
}

impl Default for ApiLoadOptions {
    fn default() -> Self {
        ApiLoadOptions {
            page_size: 500,
            namespace: None,
            skip_terminal_pods: true,
        }
    }
}

/// A required kind could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum ApiLoadError {
    /// Listing failed (connection, authorization on a required kind, server error).
    #[error("cannot list {kind} ({api_version}): {}", crate::api_error::describe(.source))]
    List {
        /// The kind.
        kind: &'static str,
        /// Its apiVersion.
        api_version: &'static str,
        /// The client error.
        #[source]
        source: ::kube::Error,
    },
}

/// The server's field selector that drops terminal pods.
const NON_TERMINAL_PODS: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// True for errors that mean "you may not, or the server has no such kind": 403 and 404.
pub fn is_forbidden_or_missing(err: &::kube::Error) -> bool {
    matches!(err, ::kube::Error::Api(status) if status.code == 403 || status.code == 404)
}

fn is_expired(err: &::kube::Error) -> bool {
    matches!(err, ::kube::Error::Api(status) if status.code == 410)
}

/// Lists every object of one kind, following continue tokens; restarts once from the beginning if
/// the server expired the token (410 Gone) in the middle.
async fn list_all<K>(
    api: &Api<K>,
    page_size: u32,
    field_selector: Option<&str>,
) -> Result<Vec<K>, ::kube::Error>
where
    K: Clone + DeserializeOwned + Debug + Prune,
{
    let mut restarted = false;
    'attempt: loop {
        let mut out = Vec::new();
        let mut params = ListParams::default().limit(page_size);
        if let Some(fs) = field_selector {
            params = params.fields(fs);
        }
        loop {
            let page = match api.list(&params).await {
                Ok(page) => page,
                Err(e) if is_expired(&e) && !restarted && params.continue_token.is_some() => {
                    restarted = true;
                    continue 'attempt;
                }
                Err(e) => return Err(e),
            };
            out.extend(page.items.into_iter().map(|mut o| {
                o.prune();
                o
            }));
            match page.metadata.continue_.filter(|t| !t.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => return Ok(out),
            }
        }
    }
}

/// What `settle` does with a failed optional kind.
fn settle<K>(
    kind: ObjectKind,
    required: bool,
    result: Result<Vec<K>, ::kube::Error>,
    warnings: &mut Vec<String>,
) -> Result<Vec<K>, ApiLoadError> {
    match result {
        Ok(items) => Ok(items),
        Err(e) if !required && is_forbidden_or_missing(&e) => {
            warnings.push(format!(
                "cannot list {} ({}): {}; continuing without them",
                kind.kind(),
                kind.api_version(),
                short_reason(&e)
            ));
            Ok(Vec::new())
        }
        Err(source) => Err(ApiLoadError::List {
            kind: kind.kind(),
            api_version: kind.api_version(),
            source,
        }),
    }
}

fn short_reason(e: &::kube::Error) -> String {
    match e {
        ::kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        ::kube::Error::Api(status) => format!("HTTP {}", status.code),
        other => other.to_string(),
    }
}

/// Lists everything the engine needs. Returns the (pruned) objects and warnings for optional kinds
/// that could not be listed.
pub async fn load_from_api(
    client: &Client,
    options: &ApiLoadOptions,
) -> Result<(ClusterObjects, Vec<String>), ApiLoadError> {
    let page = options.page_size.max(1);
    let cluster = || client.clone();
    macro_rules! scoped {
        ($ty:ty) => {{
            let api: Api<$ty> = match options.namespace.as_deref() {
                Some(ns) => Api::namespaced(client.clone(), ns),
                None => Api::all(client.clone()),
            };
            api
        }};
    }
    let pod_fields = options.skip_terminal_pods.then_some(NON_TERMINAL_PODS);

    let nodes_api: Api<k8s_openapi::api::core::v1::Node> = Api::all(cluster());
    let pods_api = scoped!(k8s_openapi::api::core::v1::Pod);
    let namespaces_api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(cluster());
    let pvs_api: Api<k8s_openapi::api::core::v1::PersistentVolume> = Api::all(cluster());
    let pvcs_api = scoped!(k8s_openapi::api::core::v1::PersistentVolumeClaim);
    let scs_api: Api<k8s_openapi::api::storage::v1::StorageClass> = Api::all(cluster());
    let csinodes_api: Api<k8s_openapi::api::storage::v1::CSINode> = Api::all(cluster());
    let csidrivers_api: Api<k8s_openapi::api::storage::v1::CSIDriver> = Api::all(cluster());
    let capacities_api = scoped!(k8s_openapi::api::storage::v1::CSIStorageCapacity);
    let attachments_api: Api<k8s_openapi::api::storage::v1::VolumeAttachment> = Api::all(cluster());
    let pdbs_api = scoped!(k8s_openapi::api::policy::v1::PodDisruptionBudget);
    let pcs_api: Api<k8s_openapi::api::scheduling::v1::PriorityClass> = Api::all(cluster());
    let services_api = scoped!(k8s_openapi::api::core::v1::Service);
    let rcs_api = scoped!(k8s_openapi::api::core::v1::ReplicationController);
    let rss_api = scoped!(k8s_openapi::api::apps::v1::ReplicaSet);
    let stss_api = scoped!(k8s_openapi::api::apps::v1::StatefulSet);
    let claims_api = scoped!(k8s_openapi::api::resource::v1::ResourceClaim);
    let classes_api: Api<k8s_openapi::api::resource::v1::DeviceClass> = Api::all(cluster());
    let slices_api: Api<k8s_openapi::api::resource::v1::ResourceSlice> = Api::all(cluster());
    let templates_api = scoped!(k8s_openapi::api::resource::v1::ResourceClaimTemplate);
    let taint_rules_api: Api<k8s_openapi::api::resource::v1::DeviceTaintRule> = Api::all(cluster());

    let (
        nodes,
        pods,
        namespaces,
        pvs,
        pvcs,
        scs,
        csinodes,
        csidrivers,
        capacities,
        attachments,
        pdbs,
        pcs,
        services,
        rcs,
        rss,
        stss,
        claims,
        classes,
        slices,
        templates,
        taint_rules,
    ) = futures::join!(
        list_all(&nodes_api, page, None),
        list_all(&pods_api, page, pod_fields),
        list_all(&namespaces_api, page, None),
        list_all(&pvs_api, page, None),
        list_all(&pvcs_api, page, None),
        list_all(&scs_api, page, None),
        list_all(&csinodes_api, page, None),
        list_all(&csidrivers_api, page, None),
        list_all(&capacities_api, page, None),
        list_all(&attachments_api, page, None),
        list_all(&pdbs_api, page, None),
        list_all(&pcs_api, page, None),
        list_all(&services_api, page, None),
        list_all(&rcs_api, page, None),
        list_all(&rss_api, page, None),
        list_all(&stss_api, page, None),
        list_all(&claims_api, page, None),
        list_all(&classes_api, page, None),
        list_all(&slices_api, page, None),
        list_all(&templates_api, page, None),
        list_all(&taint_rules_api, page, None),
    );

    let mut warnings = Vec::new();
    let w = &mut warnings;
    let objects = ClusterObjects {
        nodes: settle(ObjectKind::Node, true, nodes, w)?,
        pods: settle(ObjectKind::Pod, true, pods, w)?,
        namespaces: settle(ObjectKind::Namespace, false, namespaces, w)?,
        persistent_volumes: settle(ObjectKind::PersistentVolume, false, pvs, w)?,
        persistent_volume_claims: settle(ObjectKind::PersistentVolumeClaim, false, pvcs, w)?,
        storage_classes: settle(ObjectKind::StorageClass, false, scs, w)?,
        csi_nodes: settle(ObjectKind::CSINode, false, csinodes, w)?,
        csi_drivers: settle(ObjectKind::CSIDriver, false, csidrivers, w)?,
        csi_storage_capacities: settle(ObjectKind::CSIStorageCapacity, false, capacities, w)?,
        volume_attachments: settle(ObjectKind::VolumeAttachment, false, attachments, w)?,
        pod_disruption_budgets: settle(ObjectKind::PodDisruptionBudget, false, pdbs, w)?,
        priority_classes: settle(ObjectKind::PriorityClass, false, pcs, w)?,
        services: settle(ObjectKind::Service, false, services, w)?,
        replication_controllers: settle(ObjectKind::ReplicationController, false, rcs, w)?,
        replica_sets: settle(ObjectKind::ReplicaSet, false, rss, w)?,
        stateful_sets: settle(ObjectKind::StatefulSet, false, stss, w)?,
        resource_claims: settle(ObjectKind::ResourceClaim, false, claims, w)?,
        device_classes: settle(ObjectKind::DeviceClass, false, classes, w)?,
        resource_slices: settle(ObjectKind::ResourceSlice, false, slices, w)?,
        resource_claim_templates: settle(ObjectKind::ResourceClaimTemplate, false, templates, w)?,
        device_taint_rules: settle(ObjectKind::DeviceTaintRule, false, taint_rules, w)?,
        placed_pods: Vec::new(),
    };
    Ok((objects, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, message: &str) -> ::kube::Error {
        let status: ::kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure",
            "code": code,
            "message": message,
            "reason": "Forbidden",
        }))
        .unwrap();
        ::kube::Error::Api(Box::new(status))
    }

    #[test]
    fn optional_kinds_forbidden_or_missing_become_warnings() {
        for code in [403, 404] {
            let mut warnings = Vec::new();
            let got: Vec<k8s_openapi::api::storage::v1::CSIStorageCapacity> = settle(
                ObjectKind::CSIStorageCapacity,
                false,
                Err(api_error(code, "csistoragecapacities is forbidden")),
                &mut warnings,
            )
            .unwrap();
            assert!(got.is_empty());
            assert_eq!(
                warnings,
                vec![
                    "cannot list CSIStorageCapacity (storage.k8s.io/v1): csistoragecapacities is forbidden; \
                     continuing without them"
                        .to_string()
                ]
            );
        }
    }

    #[test]
    fn required_kinds_and_other_errors_fail() {
        let mut warnings = Vec::new();
        let err = settle::<k8s_openapi::api::core::v1::Pod>(
            ObjectKind::Pod,
            true,
            Err(api_error(403, "pods is forbidden")),
            &mut warnings,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot list Pod (v1): Error from server (Forbidden): pods is forbidden"
        );
        let err = settle::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(
            ObjectKind::PodDisruptionBudget,
            false,
            Err(api_error(500, "etcd unavailable")),
            &mut warnings,
        )
        .unwrap_err();
        assert!(matches!(
            err,
            ApiLoadError::List {
                kind: "PodDisruptionBudget",
                ..
            }
        ));
        assert!(warnings.is_empty());
    }

    #[test]
    fn expired_tokens_are_recognized() {
        assert!(is_expired(&api_error(410, "too old resource version")));
        assert!(!is_forbidden_or_missing(&api_error(410, "gone")));
        assert!(is_forbidden_or_missing(&api_error(404, "not found")));
    }
}
