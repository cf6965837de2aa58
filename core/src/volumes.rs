//! The volume API: the VolumeBinding plugin's decisions and the PersistentVolume helpers a caller
//! outside the engine needs to act on a pod's claims (the webhook decides on a pod's volumes at
//! admission, binds PVs and annotates claims through the same functions kube-scheduler's PreBind
//! would). Each is the plugin's own item, re-exported: the webhook cannot disagree with the plugin.
//!
//! The plugin's other items (its binder, assume cache, scorer, PV matching) are its own
//! (`pub(crate)`).
//!
//! ```
//! use sched_core::volumes::{PodVolumes, claim_class, find_pod_volumes};
//! ```
//!
//! The plugin's own paths are not public:
//!
//! ```compile_fail,E0603
//! use sched_core::plugins::volume_binding::pv_helpers::claim_class;
//! ```

// FindPodVolumes and the PreBind writes it leads to.
pub use crate::plugins::volume_binding::binder::{
    BindingInfo, ClaimConflict, DynamicProvision, PodVolumes, find_pod_volumes, prebind_actions,
};

// The Filter reasons VolumeBinding rejects a node with.
pub use crate::plugins::volume_binding::{ERR_REASON_BIND_CONFLICT, ERR_REASON_NODE_CONFLICT};

// The PV controller's helpers (`pkg/controller/volume/persistentvolume/util`).
pub use crate::plugins::volume_binding::pv_helpers::{
    ANN_SELECTED_NODE, BindableVolume, NOT_SUPPORTED_PROVISIONER, VolumeBindUpdate, bind_volume_to_claim,
    claim_class, claim_volume_name, is_claim_fully_bound, selected_node, volume_claim_name,
};
