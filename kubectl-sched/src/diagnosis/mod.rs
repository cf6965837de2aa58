//! What the commands say beyond the engine's verdict: hints ([`hints`]), the smallest fixes
//! ([`fixes`]), why a pod that fits is still Pending ([`still_pending`]) and a node's resource
//! breakdown ([`node_resources`]).

pub mod fixes;
pub mod headline;
pub mod hints;
pub mod node_resources;
pub mod still_pending;
