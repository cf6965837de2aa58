//! The node pools that make nodes: Karpenter's NodePools (`karpenter.sh/v1`) and their instance
//! types. The question this module answers is the one an operator asks when no node fits a pod:
//! would a new node of this pool take it, and if not, why not — in Karpenter's own words, since those
//! are what its events say.
//!
//! Karpenter's provisioner is not kube-scheduler: it reasons on label requirements
//! ([`requirements`]), a pool's taints and limits, and the instance types its cloud provider offers,
//! and only then launches a node on which kube-scheduler runs its filters.

pub mod in_cluster;
pub mod instance_types;
pub mod new_node;
pub mod node_pool;
pub mod requirements;
pub mod resources;

pub use in_cluster::{CatalogueSource, NodePoolsAnswer, node_pools_answer, pools_of};
pub use instance_types::{InstanceType, InstanceTypeError, Offering, parse_instance_types};
pub use new_node::{NewNode, PoolState, PoolVerdict, ScaleUpAnswer, scale_up_for_pod};
pub use node_pool::{NodePool, NodePoolError, by_weight};
pub use requirements::{Incompatible, Operator, Requirement, RequirementError, Requirements};
pub use resources::ResourceAmounts;
