//! The kinds a [`ClusterObjects`] holds ([`ObjectKind`]) and how an object's apiVersion/kind (or the
//! element type of a typed list) resolves to one. One macro table maps each kind to its typed object,
//! its `ClusterObjects` field and its decode shape, and generates the per-kind dispatch the JSON and
//! YAML readers and the list writer use.

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment};
use serde::Deserializer;
use serde::ser::SerializeSeq;

use super::Prune;
use super::json::{RawItem, decode_json_items};
use super::shape::{Filter, decode_shaped, shapes};
use crate::snapshot::ClusterObjects;

macro_rules! object_kinds {
    ($( $variant:ident($ty:ty) = $api:literal, $kind:literal => $field:ident, $shape:expr; )*) => {
        /// The kinds a `ClusterObjects` holds.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ObjectKind {
            $(
                #[doc = concat!("`", $api, "` `", $kind, "`.")]
                $variant,
            )*
        }

        impl ObjectKind {
            /// Every kind, in `ClusterObjects` field order.
            pub const ALL: &'static [ObjectKind] = &[$(ObjectKind::$variant),*];

            /// The kind stored for an apiVersion and kind, if any.
            pub fn lookup(api_version: &str, kind: &str) -> Option<ObjectKind> {
                match (api_version, kind) {
                    $(($api, $kind) => Some(ObjectKind::$variant),)*
                    _ => None,
                }
            }

            /// The kind named `kind` when an object carries no apiVersion.
            fn lookup_kind(kind: &str) -> Option<ObjectKind> {
                match kind {
                    $($kind => Some(ObjectKind::$variant),)*
                    _ => None,
                }
            }

            /// apiVersion, e.g. `policy/v1`.
            pub fn api_version(self) -> &'static str {
                match self { $(ObjectKind::$variant => $api,)* }
            }

            /// Kind, e.g. `PodDisruptionBudget`.
            pub fn kind(self) -> &'static str {
                match self { $(ObjectKind::$variant => $kind,)* }
            }

            /// How many objects of this kind `objects` holds.
            pub fn count(self, objects: &ClusterObjects) -> usize {
                match self { $(ObjectKind::$variant => objects.$field.len(),)* }
            }

            /// `namespace/name` (or `name`) of each named object of this kind, in load order; pods
            /// already reduced to their scheduling facts included.
            pub(super) fn names(self, objects: &ClusterObjects) -> Vec<String> {
                let mut names: Vec<String> = match self {
                    $(ObjectKind::$variant => objects
                        .$field
                        .iter()
                        .filter_map(|o| {
                            super::error::display_name(o.metadata.namespace.as_deref(), o.metadata.name.as_deref())
                        })
                        .collect(),)*
                };
                if self == ObjectKind::Pod {
                    names.extend(
                        objects
                            .placed_pods
                            .iter()
                            .filter_map(|p| {
                                super::error::display_name(Some(p.namespace()), Some(p.name()).filter(|n| !n.is_empty()))
                            }),
                    );
                }
                names
            }

            /// Decodes JSON items of this kind in parallel into `objects` (appending, in order).
            /// `Err(())` when any fails; the caller then finds the first failure sequentially.
            pub(super) fn decode_json(self, items: &[RawItem<'_>], objects: &mut ClusterObjects) -> Result<(), ()> {
                match self {
                    $(ObjectKind::$variant => {
                        let decoded = decode_json_items::<$ty>(items, $shape)?;
                        objects.$field.extend(decoded);
                    })*
                }
                Ok(())
            }

            /// Decodes one JSON text as this kind, tracking the field path of an error.
            pub(super) fn check_json(self, text: &str) -> Result<(), serde_path_to_error::Error<serde_json::Error>> {
                let mut de = serde_json::Deserializer::from_str(text);
                match self {
                    $(ObjectKind::$variant => {
                        serde_path_to_error::deserialize::<_, $ty>(Filter { de: &mut de, shape: $shape }).map(drop)
                    })*
                }
            }

            /// Converts a YAML value to this kind, prunes it and stores it.
            pub(super) fn store_yaml(self, value: yaml_serde::Value, objects: &mut ClusterObjects) -> Result<(), yaml_serde::Error> {
                match self {
                    $(ObjectKind::$variant => {
                        let mut o: $ty = decode_shaped(value, $shape)?;
                        o.prune();
                        objects.$field.push(o);
                    })*
                }
                Ok(())
            }

            /// Deserializes this kind straight from a deserializer and drops it (to locate errors).
            pub(super) fn check<'de, D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
                match self {
                    $(ObjectKind::$variant => decode_shaped::<$ty, D>(d, $shape).map(drop),)*
                }
            }
        }

        impl ClusterObjects {
            /// Moves every object of `other` to the end of this one's lists, kind by kind.
            pub fn append(&mut self, mut other: ClusterObjects) {
                $(self.$field.append(&mut other.$field);)*
                self.placed_pods.append(&mut other.placed_pods);
            }
        }

        /// Writes every object, kind by kind, as elements of one sequence.
        pub(super) fn serialize_items<S: SerializeSeq>(objects: &ClusterObjects, seq: &mut S) -> Result<(), S::Error> {
            $(for o in &objects.$field { seq.serialize_element(o)?; })*
            Ok(())
        }
    };
}

object_kinds! {
    Node(Node) = "v1", "Node" => nodes, shapes::NODE;
    Pod(Pod) = "v1", "Pod" => pods, shapes::POD;
    Namespace(Namespace) = "v1", "Namespace" => namespaces, shapes::METADATA_ONLY;
    PersistentVolume(PersistentVolume) = "v1", "PersistentVolume" => persistent_volumes, shapes::METADATA_ONLY;
    PersistentVolumeClaim(PersistentVolumeClaim) = "v1", "PersistentVolumeClaim" => persistent_volume_claims,
        shapes::METADATA_ONLY;
    StorageClass(StorageClass) = "storage.k8s.io/v1", "StorageClass" => storage_classes, shapes::METADATA_ONLY;
    CSINode(CSINode) = "storage.k8s.io/v1", "CSINode" => csi_nodes, shapes::METADATA_ONLY;
    CSIDriver(CSIDriver) = "storage.k8s.io/v1", "CSIDriver" => csi_drivers, shapes::METADATA_ONLY;
    CSIStorageCapacity(CSIStorageCapacity) = "storage.k8s.io/v1", "CSIStorageCapacity" => csi_storage_capacities,
        shapes::METADATA_ONLY;
    VolumeAttachment(VolumeAttachment) = "storage.k8s.io/v1", "VolumeAttachment" => volume_attachments,
        shapes::METADATA_ONLY;
    PodDisruptionBudget(PodDisruptionBudget) = "policy/v1", "PodDisruptionBudget" => pod_disruption_budgets,
        shapes::METADATA_ONLY;
    PriorityClass(PriorityClass) = "scheduling.k8s.io/v1", "PriorityClass" => priority_classes, shapes::METADATA_ONLY;
    Service(Service) = "v1", "Service" => services, shapes::METADATA_ONLY;
    ReplicationController(ReplicationController) = "v1", "ReplicationController" => replication_controllers,
        shapes::WITH_TEMPLATE;
    ReplicaSet(ReplicaSet) = "apps/v1", "ReplicaSet" => replica_sets, shapes::WITH_TEMPLATE;
    StatefulSet(StatefulSet) = "apps/v1", "StatefulSet" => stateful_sets, shapes::STATEFUL_SET;
    ResourceClaim(ResourceClaim) = "resource.k8s.io/v1", "ResourceClaim" => resource_claims, shapes::METADATA_ONLY;
    DeviceClass(DeviceClass) = "resource.k8s.io/v1", "DeviceClass" => device_classes, shapes::METADATA_ONLY;
    ResourceSlice(ResourceSlice) = "resource.k8s.io/v1", "ResourceSlice" => resource_slices, shapes::METADATA_ONLY;
    ResourceClaimTemplate(ResourceClaimTemplate) = "resource.k8s.io/v1", "ResourceClaimTemplate" =>
        resource_claim_templates, shapes::METADATA_ONLY;
    DeviceTaintRule(DeviceTaintRule) = "resource.k8s.io/v1", "DeviceTaintRule" => device_taint_rules,
        shapes::METADATA_ONLY;
}

impl ObjectKind {
    /// The apiVersion the engine reads `kind` in, when it reads that kind.
    pub(super) fn api_version_of(kind: &str) -> Option<&'static str> {
        ObjectKind::lookup_kind(kind).map(ObjectKind::api_version)
    }

    pub(super) fn index(self) -> usize {
        ObjectKind::ALL.iter().position(|k| *k == self).unwrap_or(0)
    }
}

/// How an object's type is resolved: its own apiVersion/kind, or the element type of a typed list
/// (`PodList` items carry neither).
pub(super) fn resolve_kind(
    api_version: Option<&str>,
    kind: Option<&str>,
    default: Option<(&str, &str)>,
) -> Resolved {
    match (api_version, kind) {
        (Some(a), Some(k)) => match ObjectKind::lookup(a, k) {
            Some(known) => Resolved::Known(known),
            None => Resolved::Skip,
        },
        (None, Some(k)) => match default {
            Some((a, dk)) if dk == k => match ObjectKind::lookup(a, k) {
                Some(known) => Resolved::Known(known),
                None => Resolved::Skip,
            },
            _ => ObjectKind::lookup_kind(k).map_or(Resolved::Skip, Resolved::Known),
        },
        (_, None) => match default {
            Some((a, k)) => ObjectKind::lookup(a, k).map_or(Resolved::Skip, Resolved::Known),
            None => Resolved::NoKind,
        },
    }
}

pub(super) enum Resolved {
    Known(ObjectKind),
    Skip,
    NoKind,
}

/// `PodList` → `Some(("v1", "Pod"))`; `List` and other kinds → `None`.
pub(super) fn list_element_type<'a>(
    api_version: Option<&'a str>,
    kind: Option<&'a str>,
) -> Option<(&'a str, &'a str)> {
    let element = kind?.strip_suffix("List")?;
    if element.is_empty() {
        return None;
    }
    Some((api_version.unwrap_or("v1"), element))
}

impl ClusterObjects {
    /// Total number of objects.
    pub fn len(&self) -> usize {
        ObjectKind::ALL.iter().map(|k| k.count(self)).sum::<usize>() + self.placed_pods.len()
    }

    /// True when there are no objects at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
