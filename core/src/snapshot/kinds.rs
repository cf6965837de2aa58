//! The object-kind table: every kind a [`ClusterObjects`](super::ClusterObjects) holds, once, with what
//! each job does with it. kube-scheduler's analog is one list too: the informer factory it starts and
//! the event handlers it registers per kind (`pkg/scheduler/eventhandlers.go`).
//!
//! [`object_kind_table!`](crate::object_kind_table) hands the table to a macro of the caller's, which
//! generates one job's per-kind glue from it: the engine's (`snapshot::load::kind`: the
//! [`ObjectKind`](super::ObjectKind) enum, file loading, pruning, live listing) and the webhook's
//! (its reflectors, stores and the objects its snapshots are built from). Adding a kind is a row here,
//! its `ClusterObjects` field, and the code that reads the kind; `tests` below walks every row
//! through each job, so a row whose glue is missing fails.
//!
//! Columns of a row:
//!
//! - `Variant(Type) = "apiVersion", "Kind"`: the [`ObjectKind`](super::ObjectKind) variant, the
//!   k8s-openapi type objects decode into, and the apiVersion and kind files and the API name it by
//!   (whether it is namespaced, and its URL, come from the type).
//! - `=> field`: the `ClusterObjects` field that holds it, in this order (the order objects are
//!   written back, counted and reported in).
//! - `shape`: what of it is decoded at all (`snapshot::load::shape::shapes`).
//! - `prune`: `metadata` (only managedFields and annotations go) or `own` (a hand-written
//!   [`Prune`](super::Prune) impl in `snapshot::load::prune`).
//! - `list`: listing it from the API server is `required` (the load fails without it) or `optional`
//!   (a 403 or 404 is a warning and an empty list).
//! - `webhook`: `[StoredType => group, slim policy]` when the webhook reflects it, `[]` when not. The
//!   group says which of its snapshots a change invalidates (`pods`, `nodes`, `volumes`, or `other`);
//!   the slim policy what the webhook keeps of an object: `prune` (the engine's pruning) or `own` (a
//!   hand-written `Slim` impl in the webhook's `cache/slim.rs`, for the kinds it holds tens of
//!   thousands of).

/// Calls `$callback! { rows }` with the object-kind table (see the module docs for the columns).
#[macro_export]
macro_rules! object_kind_table {
    ($callback:ident) => {
        $callback! {
            Node(::k8s_openapi::api::core::v1::Node) = "v1", "Node" => nodes,
                shape NODE, prune own, list required,
                webhook [::k8s_openapi::api::core::v1::Node => nodes, slim prune];
            Pod(::k8s_openapi::api::core::v1::Pod) = "v1", "Pod" => pods,
                shape POD, prune own, list required,
                webhook [::k8s_openapi::api::core::v1::Pod => pods, slim prune];
            Namespace(::k8s_openapi::api::core::v1::Namespace) = "v1", "Namespace" => namespaces,
                shape METADATA_ONLY, prune metadata, list optional,
                webhook [::k8s_openapi::api::core::v1::Namespace => other, slim prune];
            PersistentVolume(::k8s_openapi::api::core::v1::PersistentVolume) = "v1", "PersistentVolume"
                => persistent_volumes,
                shape METADATA_ONLY, prune metadata, list optional,
                // The engine's PV: a quarter of the API object's size.
                webhook [$crate::snapshot::volume::PersistentVolume => volumes, slim own];
            PersistentVolumeClaim(::k8s_openapi::api::core::v1::PersistentVolumeClaim) = "v1",
                "PersistentVolumeClaim" => persistent_volume_claims,
                shape METADATA_ONLY, prune metadata, list optional,
                webhook [::k8s_openapi::api::core::v1::PersistentVolumeClaim => volumes, slim own];
            StorageClass(::k8s_openapi::api::storage::v1::StorageClass) = "storage.k8s.io/v1", "StorageClass"
                => storage_classes,
                shape METADATA_ONLY, prune metadata, list optional,
                webhook [::k8s_openapi::api::storage::v1::StorageClass => volumes, slim prune];
            CSINode(::k8s_openapi::api::storage::v1::CSINode) = "storage.k8s.io/v1", "CSINode" => csi_nodes,
                shape METADATA_ONLY, prune metadata, list optional,
                webhook [::k8s_openapi::api::storage::v1::CSINode => volumes, slim prune];
            CSIDriver(::k8s_openapi::api::storage::v1::CSIDriver) = "storage.k8s.io/v1", "CSIDriver"
                => csi_drivers,
                shape METADATA_ONLY, prune metadata, list optional,
                webhook [::k8s_openapi::api::storage::v1::CSIDriver => volumes, slim prune];
            CSIStorageCapacity(::k8s_openapi::api::storage::v1::CSIStorageCapacity) = "storage.k8s.io/v1",
                "CSIStorageCapacity" => csi_storage_capacities,
                shape METADATA_ONLY, prune metadata, list optional,
                webhook [::k8s_openapi::api::storage::v1::CSIStorageCapacity => volumes, slim prune];
            VolumeAttachment(::k8s_openapi::api::storage::v1::VolumeAttachment) = "storage.k8s.io/v1",
                "VolumeAttachment" => volume_attachments,
                shape METADATA_ONLY, prune metadata, list optional,
                webhook [::k8s_openapi::api::storage::v1::VolumeAttachment => volumes, slim prune];
            PodDisruptionBudget(::k8s_openapi::api::policy::v1::PodDisruptionBudget) = "policy/v1",
                "PodDisruptionBudget" => pod_disruption_budgets,
                shape METADATA_ONLY, prune metadata, list optional, webhook [];
            PriorityClass(::k8s_openapi::api::scheduling::v1::PriorityClass) = "scheduling.k8s.io/v1",
                "PriorityClass" => priority_classes,
                shape METADATA_ONLY, prune metadata, list optional, webhook [];
            Service(::k8s_openapi::api::core::v1::Service) = "v1", "Service" => services,
                shape METADATA_ONLY, prune metadata, list optional, webhook [];
            ReplicationController(::k8s_openapi::api::core::v1::ReplicationController) = "v1",
                "ReplicationController" => replication_controllers,
                shape WITH_TEMPLATE, prune own, list optional, webhook [];
            ReplicaSet(::k8s_openapi::api::apps::v1::ReplicaSet) = "apps/v1", "ReplicaSet" => replica_sets,
                shape WITH_TEMPLATE, prune own, list optional, webhook [];
            StatefulSet(::k8s_openapi::api::apps::v1::StatefulSet) = "apps/v1", "StatefulSet" => stateful_sets,
                shape STATEFUL_SET, prune own, list optional, webhook [];
            ResourceClaim(::k8s_openapi::api::resource::v1::ResourceClaim) = "resource.k8s.io/v1",
                "ResourceClaim" => resource_claims,
                shape METADATA_ONLY, prune metadata, list optional, webhook [];
            DeviceClass(::k8s_openapi::api::resource::v1::DeviceClass) = "resource.k8s.io/v1", "DeviceClass"
                => device_classes,
                shape METADATA_ONLY, prune metadata, list optional, webhook [];
            ResourceSlice(::k8s_openapi::api::resource::v1::ResourceSlice) = "resource.k8s.io/v1",
                "ResourceSlice" => resource_slices,
                shape METADATA_ONLY, prune metadata, list optional, webhook [];
            ResourceClaimTemplate(::k8s_openapi::api::resource::v1::ResourceClaimTemplate) = "resource.k8s.io/v1",
                "ResourceClaimTemplate" => resource_claim_templates,
                shape METADATA_ONLY, prune metadata, list optional, webhook [];
            DeviceTaintRule(::k8s_openapi::api::resource::v1::DeviceTaintRule) = "resource.k8s.io/v1",
                "DeviceTaintRule" => device_taint_rules,
                shape METADATA_ONLY, prune metadata, list optional, webhook [];
            // Served only where the API server enables scheduling.k8s.io/v1beta1 (GenericWorkload,
            // beta, off by default in v1.37): a 404 is silent (`features::api_versions`).
            Workload(::k8s_openapi::api::scheduling::v1beta1::Workload) = "scheduling.k8s.io/v1beta1",
                "Workload" => workloads,
                shape METADATA_ONLY, prune metadata, list optional, webhook [];
            PodGroup(::k8s_openapi::api::scheduling::v1beta1::PodGroup) = "scheduling.k8s.io/v1beta1",
                "PodGroup" => pod_groups,
                shape METADATA_ONLY, prune metadata, list optional, webhook [];
            // scheduling.k8s.io/v1alpha3, served only where the API server enables that alpha
            // version (CompositePodGroup, alpha, off): a 404 is silent, as for PodGroups.
            CompositePodGroup(::k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup) =
                "scheduling.k8s.io/v1alpha3", "CompositePodGroup" => composite_pod_groups,
                shape METADATA_ONLY, prune metadata, list optional, webhook [];
            // A custom resource, served where Karpenter is installed: a 404 is silent
            // (`features::api_versions`). Not kube-scheduler's: only "would a new node help?" reads it.
            NodePool($crate::snapshot::node_pools::NodePoolObject) = "karpenter.sh/v1", "NodePool"
                => node_pools,
                shape METADATA_ONLY, prune metadata, list optional, webhook [];
        }
    };
}

/// Whether listing a kind from the API server may fail (the table's `list` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// The load fails when the kind cannot be listed (nodes and pods: nothing to decide without them).
    Required,
    /// A 403 or 404 becomes a warning and an empty list: the kind only refines decisions.
    Optional,
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::{Value, json};

    use crate::snapshot::load::{load_bytes, load_file, write_list_json};
    use crate::snapshot::{ClusterObjects, ObjectKind};

    /// An annotation the engine reads (kept) and one it never does (pruned).
    const KEPT: &str = "volume.kubernetes.io/selected-node";
    const DROPPED: &str = "kubectl.kubernetes.io/last-applied-configuration";

    /// The table's example object of `kind`, with managedFields and both annotations, as the API
    /// server would print it.
    fn example(kind: ObjectKind) -> Value {
        let mut object = kind.example_json();
        object["metadata"]["managedFields"] = json!([{"manager": "kubectl", "operation": "Apply"}]);
        object["metadata"]["annotations"] = json!({KEPT: "n1", DROPPED: "{}"});
        object
    }

    /// The single object `objects` holds, written back as JSON.
    fn written_back(objects: &ClusterObjects) -> Value {
        let mut out = Vec::new();
        write_list_json(objects, &mut out).expect("written");
        let list: Value = serde_json::from_slice(&out).expect("JSON");
        list["items"][0].clone()
    }

    /// Every row of the table round-trips through each job: its type names the table's apiVersion
    /// and kind; a file holding one object of it (a `kind: List`, a typed `<Kind>List` whose item
    /// names no kind, YAML, and a streamed JSON file) loads into exactly its `ClusterObjects` field,
    /// pruned (managedFields and unread annotations gone, a read one kept), and is written back as
    /// the same kind; pruning again changes nothing.
    #[test]
    fn every_kind_round_trips_through_loading_pruning_and_writing() {
        let dir = tempfile::tempdir().expect("temp dir");
        for &kind in ObjectKind::ALL {
            let name = kind.kind();
            let object = example(kind);
            assert_eq!(
                (object["apiVersion"].as_str(), object["kind"].as_str()),
                (Some(kind.api_version()), Some(name)),
                "{name}: the table's apiVersion and kind are its type's"
            );
            let mut bare = object.clone();
            bare.as_object_mut()
                .map(|o| (o.remove("apiVersion"), o.remove("kind")));
            let list = json!({"apiVersion": "v1", "kind": "List", "items": [object]});
            let typed =
                json!({"apiVersion": kind.api_version(), "kind": format!("{name}List"), "items": [bare]});
            let yaml = yaml_serde::to_string(&list).expect("YAML");
            let file = dir.path().join(format!("{name}.json"));
            std::fs::write(&file, list.to_string()).expect("written");

            let loads = [
                (
                    "a List",
                    load_bytes(list.to_string().as_bytes(), Path::new("list.json")),
                ),
                (
                    "a typed list",
                    load_bytes(typed.to_string().as_bytes(), Path::new("typed.json")),
                ),
                ("YAML", load_bytes(yaml.as_bytes(), Path::new("list.yaml"))),
                ("a streamed file", load_file(&file)),
            ];
            for (how, loaded) in loads {
                let (mut objects, report) = loaded.unwrap_or_else(|e| panic!("{name} from {how}: {e}"));
                assert_eq!(report.objects, 1, "{name} from {how}: counted once");
                assert_eq!(
                    (kind.count(&objects), objects.len()),
                    (1, 1),
                    "{name} from {how}: in its own field only"
                );
                let item = written_back(&objects);
                assert_eq!(
                    (item["apiVersion"].as_str(), item["kind"].as_str()),
                    (Some(kind.api_version()), Some(name)),
                    "{name} from {how}: written back as itself"
                );
                let metadata = &item["metadata"];
                assert_eq!(metadata["name"], "x", "{name} from {how}");
                assert_eq!(metadata.get("managedFields"), None, "{name} from {how}: pruned");
                assert_eq!(
                    metadata["annotations"],
                    json!({KEPT: "n1"}),
                    "{name} from {how}: only read annotations stay"
                );
                objects.prune();
                assert_eq!(
                    written_back(&objects),
                    item,
                    "{name} from {how}: pruning is idempotent"
                );
            }
        }
    }

    /// Each kind is listed from its own URL, within the namespace only when the kind is namespaced
    /// (as its type says), and only nodes and pods are required.
    #[cfg(feature = "kube")]
    #[test]
    fn every_kind_is_listed_from_its_own_url() {
        use super::Listing;
        let mut paths = std::collections::HashSet::new();
        for &kind in ObjectKind::ALL {
            let path = kind.url_path(Some("ns"));
            assert_eq!(path.contains("/namespaces/ns/"), kind.namespaced(), "{path}");
            assert!(paths.insert(kind.url_path(None)), "{path} listed twice");
        }
        let required: Vec<_> = ObjectKind::ALL
            .iter()
            .filter(|k| k.listing() == Listing::Required)
            .collect();
        assert_eq!(required, [&ObjectKind::Node, &ObjectKind::Pod]);
    }
}
