//! The stores the webhook reflects into, generated from the object-kind table
//! (`sched_core::object_kind_table!`): one store and one writer per row with a `webhook` column,
//! named as the row's `ClusterObjects` field, and the per-kind glue that walks them: what is kept of
//! each object ([`Slim`] for the `slim prune` rows), filling them
//! from `ClusterObjects`, starting their reflectors (which decides readiness: every kind listed once),
//! and the objects a full snapshot is built from. Adding a reflected kind is a row of the table and
//! the code that reads its store.

use std::sync::Arc;

use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{self, Store};
use tokio::task::JoinHandle;

use sched_core::ClusterObjects;

use super::reflectors::Reflectors;
use super::{Cache, Slim};

/// Expands to its tokens: puts a row's `webhook` group in a repetition that names nothing else of it.
macro_rules! in_group {
    ($group:ident, $($tokens:tt)*) => {
        $($tokens)*
    };
}

/// Starts the reflector of one store: the group says which snapshot generation its events bump, and
/// the pod reflector also queues pods for the controller.
macro_rules! spawn_reflector_of {
    (pods, $cache:expr, $reflectors:expr, $ty:ty, $stored:ty, $writer:expr) => {
        $reflectors.spawn_pods($writer)
    };
    (nodes, $cache:expr, $reflectors:expr, $ty:ty, $stored:ty, $writer:expr) => {
        $reflectors.spawn::<$ty, $stored>($writer, Some(&$cache.node_generation))
    };
    (volumes, $cache:expr, $reflectors:expr, $ty:ty, $stored:ty, $writer:expr) => {
        $reflectors.spawn::<$ty, $stored>($writer, Some(&$cache.volume_generation))
    };
    (other, $cache:expr, $reflectors:expr, $ty:ty, $stored:ty, $writer:expr) => {
        $reflectors.spawn::<$ty, $stored>($writer, None)
    };
}

/// Copies a store into the objects of a full snapshot, except the volume kinds: those come from the
/// volume snapshot, indexed once and shared.
macro_rules! copy_unindexed {
    (volumes, $objects:expr, $store:expr) => {};
    ($group:ident, $objects:expr, $store:expr) => {
        $objects = owned($store.state())
    };
}

/// The table's slim policy: `prune` kinds get the engine's pruning as their [`Slim`], `own` kinds have
/// theirs in `slim`.
macro_rules! slim_impl {
    (prune, $ty:ty) => {
        impl Slim for $ty {}
    };
    (own, $ty:ty) => {};
}

macro_rules! reflected_stores {
    ($( $variant:ident($ty:ty) = $api:literal, $kind:literal => $field:ident,
        shape $shape:ident, prune $prune:ident, list $list:ident,
        webhook [$($stored:ty => $group:ident, slim $slim:ident)?]; )*) => {
        $($( slim_impl!($slim, $ty); )?)*

        /// The reflector stores, one per kind the webhook reflects.
        pub(super) struct Stores {
            $($(
                #[doc = concat!(stringify!($kind), "s.")]
                pub(super) $field: Store<$stored>,
            )?)*
        }

        /// The writers that feed the stores (from the reflectors, or directly in tests and benchmarks).
        pub struct Writers {
            $($(
                #[doc = concat!(stringify!($kind), "s.")]
                pub(super) $field: Writer<$stored>,
            )?)*
        }

        /// Empty stores and their writers.
        pub(super) fn stores() -> (Stores, Writers) {
            $($( let $field = reflector::store::<$stored>(); )?)*
            (
                Stores { $($( $field: in_group!($group, $field.0), )?)* },
                Writers { $($( $field: in_group!($group, $field.1), )?)* },
            )
        }

        impl Writers {
            /// Replaces each store's contents with its kind's objects of `objects`.
            pub(super) fn fill(&mut self, objects: ClusterObjects) {
                $($( Writers::load_into::<$ty, $stored>(&mut self.$field, objects.$field); )?)*
            }
        }

        impl Stores {
            /// How many objects the store of `kind` holds; `None` when the webhook does not reflect it.
            #[cfg(test)]
            pub(super) fn len(&self, kind: sched_core::snapshot::ObjectKind) -> Option<usize> {
                match kind {
                    $(sched_core::snapshot::ObjectKind::$variant => None $(.or(in_group!($group, Some(self.$field.len()))))?,)*
                }
            }

            /// The reflected objects but the volume kinds', as `ClusterObjects`.
            pub(super) fn unindexed_objects(&self) -> ClusterObjects {
                let mut objects = ClusterObjects::default();
                $($( copy_unindexed!($group, objects.$field, self.$field); )?)*
                objects
            }
        }

        impl Cache {
            /// Starts one reflector per store.
            pub(super) fn spawn_stores(
                self: &Arc<Self>,
                reflectors: &Reflectors,
                writers: Writers,
            ) -> Vec<JoinHandle<()>> {
                vec![$($( spawn_reflector_of!($group, self, reflectors, $ty, $stored, writers.$field), )?)*]
            }
        }
    };
}

sched_core::object_kind_table!(reflected_stores);

/// The objects of shared entries, for `ClusterObjects`.
pub(super) fn owned<K: Clone>(items: Vec<Arc<K>>) -> Vec<K> {
    items.into_iter().map(|o| (*o).clone()).collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use sched_core::framework::profile::SchedulerConfig;
    use sched_core::plugins::in_tree_registry;
    use sched_core::snapshot::{ObjectKind, load_bytes};

    use super::*;

    /// Every row of the object-kind table the webhook reflects has a store that a fill puts its
    /// objects in (and a full snapshot reads unless it is a volume kind); every other row has none.
    #[test]
    fn every_reflected_kind_has_a_store() {
        let items: Vec<_> = ObjectKind::ALL.iter().map(|k| k.example_json()).collect();
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
        let (objects, _) = load_bytes(list.to_string().as_bytes(), Path::new("all.json")).expect("loads");
        let (cache, mut writers) = Cache::new(SchedulerConfig::default_config(&in_tree_registry()));
        cache.fill(&mut writers, objects);
        assert!(cache.is_ready());
        let unindexed = cache.stores.unindexed_objects();
        for &kind in ObjectKind::ALL {
            let reflected = kind.reflected_by_webhook();
            assert_eq!(
                cache.stores.len(kind),
                reflected.then_some(1),
                "{}: one object stored when reflected",
                kind.kind()
            );
        }
        // A full snapshot takes these from the stores, and the volume kinds from the volume snapshot.
        let snapshot_kinds: Vec<_> = ObjectKind::ALL
            .iter()
            .filter(|k| k.count(&unindexed) > 0)
            .map(|k| k.kind())
            .collect();
        assert_eq!(snapshot_kinds, ["Node", "Pod", "Namespace"]);
    }
}
