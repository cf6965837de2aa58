//! The node-resources plugins: NodeResourcesFit (Filter on requests vs allocatable, Score by strategy)
//! and NodeResourcesBalancedAllocation, with the scorer they share.

pub(crate) mod balanced_allocation;
pub(crate) mod fit;
pub(crate) mod resource_allocation;
