//! The kinds a [`ClusterObjects`] holds ([`ObjectKind`]) and how an object's apiVersion/kind (or the
//! element type of a typed list) resolves to one. The object-kind table (`snapshot::kinds`) generates
//! here the engine's per-kind glue: the enum, the dispatch the JSON and YAML readers and the list
//! writer use, the metadata-only pruning and the live-listing descriptors.

use serde::Deserializer;
use serde::ser::SerializeSeq;

use super::Prune;
use super::json::{RawItem, decode_json_items};
use super::prune::prune_metadata;
use super::shape::{Filter, decode_shaped, shapes};
use crate::snapshot::ClusterObjects;
use crate::snapshot::kinds::Listing;

/// Whether objects of a k8s-openapi scope live in a namespace.
trait Scope {
    const NAMESPACED: bool;
}

impl Scope for k8s_openapi::NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl Scope for k8s_openapi::ClusterResourceScope {
    const NAMESPACED: bool = false;
}

/// The table's `list` column as a [`Listing`].
macro_rules! listing {
    (required) => {
        Listing::Required
    };
    (optional) => {
        Listing::Optional
    };
}

/// The table's `prune` column: `metadata` kinds get their [`Prune`] impl here, `own` kinds have one
/// in `prune`.
macro_rules! prune_impl {
    (metadata, $ty:ty) => {
        impl Prune for $ty {
            fn prune(&mut self) {
                prune_metadata(&mut self.metadata);
            }
        }
    };
    (own, $ty:ty) => {};
}

/// True for a row whose `webhook` column names a store.
macro_rules! reflected {
    ($group:ident) => {
        true
    };
}

macro_rules! object_kinds {
    ($( $variant:ident($ty:ty) = $api:literal, $kind:literal => $field:ident,
        shape $shape:ident, prune $prune:ident, list $list:ident,
        webhook [$($stored:ty => $group:ident, slim $slim:ident)?]; )*) => {
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

            /// Whether objects of this kind live in a namespace (from the k8s-openapi type).
            pub fn namespaced(self) -> bool {
                match self { $(ObjectKind::$variant => <<$ty as k8s_openapi::Resource>::Scope as Scope>::NAMESPACED,)* }
            }

            /// Whether listing this kind from the API server may fail.
            pub fn listing(self) -> Listing {
                match self { $(ObjectKind::$variant => listing!($list),)* }
            }

            /// True when the webhook reflects this kind into a store of its own.
            pub fn reflected_by_webhook(self) -> bool {
                match self { $(ObjectKind::$variant => false $(|| reflected!($group))?,)* }
            }

            /// The API server's path listing this kind, within `namespace` when it is namespaced.
            #[cfg(feature = "kube")]
            pub fn url_path(self, namespace: Option<&str>) -> String {
                let namespace = namespace.filter(|_| self.namespaced());
                match self { $(ObjectKind::$variant => <$ty as ::kube::Resource>::url_path(&(), namespace),)* }
            }

            /// A default object of this kind named `x` (in namespace `ns` when the kind is
            /// namespaced) as JSON, apiVersion and kind included: the tests that walk the object-kind
            /// table start from it.
            #[cfg(any(test, feature = "testing"))]
            pub fn example_json(self) -> serde_json::Value {
                let mut object = match self {
                    $(ObjectKind::$variant => serde_json::to_value(<$ty>::default()).unwrap_or_default(),)*
                };
                object["metadata"] = if self.namespaced() {
                    serde_json::json!({"name": "x", "namespace": "ns"})
                } else {
                    serde_json::json!({"name": "x"})
                };
                object
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
                        let decoded = decode_json_items::<$ty>(items, shapes::$shape)?;
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
                        serde_path_to_error::deserialize::<_, $ty>(Filter { de: &mut de, shape: shapes::$shape }).map(drop)
                    })*
                }
            }

            /// Converts a YAML value to this kind, prunes it and stores it.
            pub(super) fn store_yaml(self, value: yaml_serde::Value, objects: &mut ClusterObjects) -> Result<(), yaml_serde::Error> {
                match self {
                    $(ObjectKind::$variant => {
                        let mut o: $ty = decode_shaped(value, shapes::$shape)?;
                        o.prune();
                        objects.$field.push(o);
                    })*
                }
                Ok(())
            }

            /// Deserializes this kind straight from a deserializer and drops it (to locate errors).
            pub(super) fn check<'de, D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
                match self {
                    $(ObjectKind::$variant => decode_shaped::<$ty, D>(d, shapes::$shape).map(drop),)*
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

        $(prune_impl!($prune, $ty);)*

        impl ClusterObjects {
            /// Prunes every object (see [`Prune`]).
            pub fn prune(&mut self) {
                $(self.$field.iter_mut().for_each(Prune::prune);)*
            }
        }
    };
}

crate::object_kind_table!(object_kinds);

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
