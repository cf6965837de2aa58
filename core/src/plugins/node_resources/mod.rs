//! The node-resources plugins: NodeResourcesFit (Filter on requests vs allocatable, Score by strategy)
//! and NodeResourcesBalancedAllocation, with the scorer they share.

pub mod balanced_allocation;
pub mod fit;
pub mod resource_allocation;

pub use fit::{InsufficientResource, Shortfall, fits, fits_with_dra, shortfall, shortfall_with_dra};
