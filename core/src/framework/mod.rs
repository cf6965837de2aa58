//! The scheduling framework: status codes, extension-point traits, cycle state, the runtime that runs a
//! pod through the points, and profiles (KubeSchedulerConfiguration).

pub mod cycle_state;
pub mod fit_error;
pub mod interface;
pub mod post_filter;
pub mod profile;
mod queue_sort_validation;
pub mod registry;
pub mod runtime;
pub mod status;

pub use cycle_state::{CycleState, StateKey};
// The gates live with the foundations (upstream's `pkg/features`, below everything) so the snapshot
// can read them too; plugins keep their path `crate::framework::FeatureGates`.
pub use crate::features::FeatureGates;
pub use interface::*;
pub use status::{Code, Status};
