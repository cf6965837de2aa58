//! One structured allocator per snapshot, kept next to the snapshot it borrows. kube-scheduler
//! builds its allocator once per pod in PreFilter and uses it for every node; building it indexes
//! every allocated device and slice, so building it per node made Filter quadratic in cluster size.
//! The snapshot does not change under a framework, so one allocator serves every pod and node.

use std::sync::Arc;

use self_cell::self_cell;

use crate::dra::cel;
use crate::dra::structured::{Allocator, Features};
use crate::snapshot::Snapshot;

/// What the allocator borrows.
pub(super) struct AllocatorInputs {
    snapshot: Arc<Snapshot>,
    cel: cel::Cache,
    features: Features,
}

self_cell!(
    /// An [`Allocator`] together with the snapshot and CEL cache it borrows.
    pub(super) struct SnapshotAllocator {
        owner: AllocatorInputs,
        #[covariant]
        dependent: Allocator,
    }
);

impl SnapshotAllocator {
    /// The allocator of `snapshot`, compiling selectors into a cache of `cel_cache_size` entries.
    pub(super) fn build(snapshot: Arc<Snapshot>, features: Features, cel_cache_size: usize) -> Self {
        let inputs = AllocatorInputs {
            snapshot,
            cel: cel::Cache::new(cel_cache_size),
            features,
        };
        SnapshotAllocator::new(inputs, |i| {
            Allocator::new(
                i.features,
                &i.snapshot.allocated,
                &i.snapshot.device_classes,
                &i.snapshot.resource_slices,
                &i.cel,
            )
        })
    }

    /// The allocator.
    pub(super) fn allocator(&self) -> &Allocator<'_> {
        self.borrow_dependent()
    }
}

impl std::fmt::Debug for SnapshotAllocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotAllocator").finish_non_exhaustive()
    }
}
