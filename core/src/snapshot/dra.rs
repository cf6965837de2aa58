//! Dynamic Resource Allocation state of a snapshot: ResourceSlices grouped by where their devices
//! are, and the devices allocated claims hold. The types are the DRA library's (the allocator reads
//! them, and the library sits below the snapshot); they are named here as the snapshot's.

pub use crate::dra::structured::AllocatedState;
pub use crate::dra::structured::slices::{DeviceId, ResourceSlices};
