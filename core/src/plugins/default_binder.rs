//! DefaultBinder: binds the pod to the chosen node with a `pods/binding` request, expressed as an
//! `Action::BindPod` for the caller to execute.

use std::sync::Arc;

use crate::action::{Action, ObjectRef};
use crate::framework::FeatureGates;
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::{BindPlugin, Plugin};
use crate::framework::runtime::{Handle, PluginError};
use crate::framework::status::Status;
use crate::plugins::names;
use crate::snapshot::PodInfo;

/// The plugin's registry name.
pub(crate) const NAME: &str = names::DEFAULT_BINDER;

/// The DefaultBinder plugin.
#[derive(Debug, Default)]
pub(crate) struct DefaultBinder;

impl Plugin for DefaultBinder {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_bind(&self) -> Option<&dyn BindPlugin> {
        Some(self)
    }
}

impl BindPlugin for DefaultBinder {
    fn bind(&self, _state: &CycleState, pod: &PodInfo, node_name: &str) -> (Vec<Action>, Status) {
        // The Binding carries the pod's UID and resourceVersion, so a pod recreated under the same name,
        // or changed since the decision, is not bound.
        let action = Action::BindPod {
            pod: ObjectRef::from_meta(&pod.pod.metadata),
            node: node_name.to_string(),
        };
        (vec![action], Status::success())
    }
}

/// Builds the plugin (it takes no args).
pub(crate) fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Handle,
    _features: &FeatureGates,
) -> Result<Arc<dyn Plugin>, PluginError> {
    Ok(Arc::new(DefaultBinder))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::pod;

    #[test]
    fn bind_is_one_binding_action() {
        for (name, p, want_uid, want_rv) in [
            (
                "with uid",
                pod("web").namespace("prod").resource_version("7"),
                Some("prod-web"),
                Some("7"),
            ),
            (
                "without uid",
                pod("web").namespace("prod").with(|p| p.metadata.uid = None),
                None,
                None,
            ),
        ] {
            let (actions, s) = DefaultBinder.bind(&CycleState::new(), &p.info(), "n1");
            assert!(s.is_success(), "{name}");
            assert_eq!(
                actions,
                vec![Action::BindPod {
                    pod: ObjectRef {
                        namespace: "prod".into(),
                        name: "web".into(),
                        uid: want_uid.map(String::from),
                        resource_version: want_rv.map(String::from),
                    },
                    node: "n1".into(),
                }],
                "{name}"
            );
        }
    }
}
