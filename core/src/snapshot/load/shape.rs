//! Pruning while decoding: a [`Shape`] says which fields of an object to decode, and [`Filter`]
//! wraps any serde deserializer so the rest is skipped at parser speed without allocating. The
//! shapes in [`shapes`] mirror the [`Prune`](super::Prune) policy; `Prune` still runs after
//! decoding for what a shape cannot express.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Which parts of a value to decode. Skipped parts are consumed at parser speed without allocating,
/// which is most of the time and memory a large snapshot would otherwise cost;
/// [`Prune`](super::Prune) still runs after decoding for what a shape cannot express (e.g. ports
/// without a host port).
#[derive(Clone, Copy)]
pub(super) enum Shape {
    /// Decode the whole value.
    Keep,
    /// Skip the value.
    Drop,
    /// An object (or each object of an array): listed fields get their own shape; the rest are
    /// decoded whole when `others` is `Keep`, skipped when it is `Drop`.
    Object {
        fields: &'static [(&'static str, Shape)],
        others_kept: bool,
    },
    /// A string map of which only the keys passing the predicate are decoded (annotations).
    Keys(fn(&str) -> bool),
}

impl Shape {
    /// The shape of a field, or `None` to skip it.
    fn child(self, key: &str) -> Option<Shape> {
        match self {
            Shape::Keep => Some(Shape::Keep),
            Shape::Drop => None,
            Shape::Object { fields, others_kept } => match fields.iter().find(|(k, _)| *k == key) {
                Some((_, Shape::Drop)) => None,
                Some((_, s)) => Some(*s),
                None => others_kept.then_some(Shape::Keep),
            },
            Shape::Keys(keep) => keep(key).then_some(Shape::Keep),
        }
    }
}

pub(super) mod shapes {
    use super::Shape;
    use crate::snapshot::load::keep_annotation;

    const fn keep_listed(fields: &'static [(&'static str, Shape)]) -> Shape {
        Shape::Object {
            fields,
            others_kept: true,
        }
    }

    const fn only(fields: &'static [(&'static str, Shape)]) -> Shape {
        Shape::Object {
            fields,
            others_kept: false,
        }
    }

    const K: Shape = Shape::Keep;
    const D: Shape = Shape::Drop;

    pub(in crate::snapshot::load) const META: Shape = keep_listed(&[
        ("managedFields", D),
        ("annotations", Shape::Keys(keep_annotation)),
    ]);

    /// Mirrors `prune_container` (ports are filtered afterwards).
    const CONTAINER: Shape = only(&[
        ("name", K),
        ("image", K),
        ("ports", K),
        ("resources", NO_LIMITS),
        ("restartPolicy", K),
        ("restartPolicyRules", K),
    ]);

    const ITEMS_DROPPED: Shape = keep_listed(&[("items", D)]);

    /// Mirrors `prune_volume`.
    const VOLUME: Shape = keep_listed(&[
        ("projected", keep_listed(&[("sources", D)])),
        ("configMap", ITEMS_DROPPED),
        ("secret", ITEMS_DROPPED),
        ("downwardAPI", ITEMS_DROPPED),
    ]);

    /// Mirrors `prune_pod_spec`.
    const POD_SPEC: Shape = keep_listed(&[
        ("containers", CONTAINER),
        ("initContainers", CONTAINER),
        ("volumes", VOLUME),
        ("ephemeralContainers", D),
        ("automountServiceAccountToken", D),
        ("dnsConfig", D),
        ("dnsPolicy", D),
        ("enableServiceLinks", D),
        ("hostAliases", D),
        ("hostname", D),
        ("hostnameOverride", D),
        ("imagePullSecrets", D),
        ("readinessGates", D),
        ("securityContext", D),
        ("serviceAccount", D),
        ("serviceAccountName", D),
        ("setHostnameAsFQDN", D),
        ("shareProcessNamespace", D),
        ("subdomain", D),
    ]);

    const NO_LIMITS: Shape = keep_listed(&[("limits", D)]);

    const CONTAINER_STATUS: Shape = only(&[("name", K), ("allocatedResources", K), ("resources", NO_LIMITS)]);

    /// Mirrors `prune_pod_status`.
    const POD_STATUS: Shape = only(&[
        ("phase", K),
        ("conditions", K),
        ("nominatedNodeName", K),
        ("startTime", K),
        ("containerStatuses", CONTAINER_STATUS),
        ("initContainerStatuses", CONTAINER_STATUS),
        ("allocatedResources", K),
        ("resources", K),
        ("resize", K),
        ("resourceClaimStatuses", K),
        ("extendedResourceClaimStatus", K),
    ]);

    pub(in crate::snapshot::load) const POD: Shape =
        keep_listed(&[("metadata", META), ("spec", POD_SPEC), ("status", POD_STATUS)]);

    /// Mirrors `prune_node`.
    pub(in crate::snapshot::load) const NODE: Shape = keep_listed(&[
        ("metadata", META),
        (
            "status",
            keep_listed(&[
                ("nodeInfo", D),
                ("daemonEndpoints", D),
                ("volumesAttached", D),
                ("volumesInUse", D),
                ("config", D),
            ]),
        ),
    ]);

    const TEMPLATE: Shape = keep_listed(&[("metadata", META), ("spec", POD_SPEC)]);

    /// ReplicaSets and ReplicationControllers.
    pub(in crate::snapshot::load) const WITH_TEMPLATE: Shape = keep_listed(&[
        ("metadata", META),
        ("spec", keep_listed(&[("template", TEMPLATE)])),
    ]);

    pub(in crate::snapshot::load) const STATEFUL_SET: Shape = keep_listed(&[
        ("metadata", META),
        (
            "spec",
            keep_listed(&[
                ("template", TEMPLATE),
                ("volumeClaimTemplates", keep_listed(&[("metadata", META)])),
            ]),
        ),
    ]);

    pub(in crate::snapshot::load) const METADATA_ONLY: Shape = keep_listed(&[("metadata", META)]);
}

/// A deserializer that hides the parts of the input a [`Shape`] skips.
pub(super) struct Filter<D> {
    pub(super) de: D,
    pub(super) shape: Shape,
}

/// A visitor that keeps filtering below the value it visits.
struct FilterVisitor<V> {
    visitor: V,
    shape: Shape,
}

struct FilterSeed<S> {
    seed: S,
    shape: Shape,
}

struct FilterSeq<A> {
    seq: A,
    shape: Shape,
}

struct FilterMap<A> {
    map: A,
    shape: Shape,
    value_shape: Shape,
}

/// A map key, borrowed from the input when possible.
enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key::Borrowed(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v.to_string()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v.to_string()))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

impl Key<'_> {
    fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(s) => s,
            Key::Owned(s) => s,
        }
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for FilterMap<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        while let Some(key) = self.map.next_key::<Key<'de>>()? {
            match self.shape.child(key.as_str()) {
                None => {
                    self.map.next_value::<IgnoredAny>()?;
                }
                Some(shape) => {
                    self.value_shape = shape;
                    return match key {
                        Key::Borrowed(s) => seed
                            .deserialize(de::value::BorrowedStrDeserializer::<A::Error>::new(s))
                            .map(Some),
                        Key::Owned(s) => seed
                            .deserialize(de::value::StringDeserializer::<A::Error>::new(s))
                            .map(Some),
                    };
                }
            }
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        match self.value_shape {
            Shape::Keep => self.map.next_value_seed(seed),
            shape => self.map.next_value_seed(FilterSeed { seed, shape }),
        }
    }
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for FilterSeq<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, A::Error> {
        self.seq.next_element_seed(FilterSeed {
            seed,
            shape: self.shape,
        })
    }

    fn size_hint(&self) -> Option<usize> {
        self.seq.size_hint()
    }
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for FilterSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.seed.deserialize(Filter {
            de: d,
            shape: self.shape,
        })
    }
}

macro_rules! forward_visits {
    ($($method:ident($ty:ty)),* $(,)?) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
            self.visitor.$method(v)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for FilterVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.visitor.expecting(f)
    }

    forward_visits!(
        visit_bool(bool),
        visit_i8(i8),
        visit_i16(i16),
        visit_i32(i32),
        visit_i64(i64),
        visit_i128(i128),
        visit_u8(u8),
        visit_u16(u16),
        visit_u32(u32),
        visit_u64(u64),
        visit_u128(u128),
        visit_f32(f32),
        visit_f64(f64),
        visit_char(char),
        visit_str(&str),
        visit_borrowed_str(&'de str),
        visit_string(String),
        visit_bytes(&[u8]),
        visit_borrowed_bytes(&'de [u8]),
        visit_byte_buf(Vec<u8>),
    );

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.visitor.visit_some(Filter {
            de: d,
            shape: self.shape,
        })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.visitor.visit_newtype_struct(Filter {
            de: d,
            shape: self.shape,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_seq(FilterSeq {
            seq,
            shape: self.shape,
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_map(FilterMap {
            map,
            shape: self.shape,
            value_shape: Shape::Keep,
        })
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_enum(data)
    }
}

macro_rules! forward_deserialize {
    ($($method:ident($($arg:ident: $ty:ty),*)),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
            self.de.$method($($arg,)* FilterVisitor { visitor, shape: self.shape })
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Filter<D> {
    type Error = D::Error;

    forward_deserialize!(
        deserialize_any(),
        deserialize_bool(),
        deserialize_i8(),
        deserialize_i16(),
        deserialize_i32(),
        deserialize_i64(),
        deserialize_i128(),
        deserialize_u8(),
        deserialize_u16(),
        deserialize_u32(),
        deserialize_u64(),
        deserialize_u128(),
        deserialize_f32(),
        deserialize_f64(),
        deserialize_char(),
        deserialize_str(),
        deserialize_string(),
        deserialize_bytes(),
        deserialize_byte_buf(),
        deserialize_option(),
        deserialize_unit(),
        deserialize_unit_struct(name: &'static str),
        deserialize_newtype_struct(name: &'static str),
        deserialize_seq(),
        deserialize_tuple(len: usize),
        deserialize_tuple_struct(name: &'static str, len: usize),
        deserialize_map(),
        deserialize_struct(name: &'static str, fields: &'static [&'static str]),
        deserialize_enum(name: &'static str, variants: &'static [&'static str]),
        deserialize_identifier(),
        deserialize_ignored_any(),
    );

    fn is_human_readable(&self) -> bool {
        self.de.is_human_readable()
    }
}

/// Decodes `T` from `de`, skipping what `shape` drops.
pub(super) fn decode_shaped<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
    de: D,
    shape: Shape,
) -> Result<T, D::Error> {
    T::deserialize(Filter { de, shape })
}
