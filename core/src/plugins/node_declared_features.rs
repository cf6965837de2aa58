//! NodeDeclaredFeatures: a pod that uses a feature the kubelet must support only fits nodes that
//! declare that feature in `status.declaredFeatures` (GA and in the default profile since v1.37).
//!
//! The feature registry is component-helpers `nodedeclaredfeatures` of v0.37.1. Of its nine features,
//! three can be required by a pod at scheduling time: `RestartAllContainersOnContainerExits` (a
//! container restart rule with action `RestartAllContainers`), `UserNamespacesHostNetworkSupport`
//! (`hostNetwork: true` with `hostUsers: false`) and `VolumeBindMountOptions` (a volume mount with
//! `bindMountOptions`). The others only matter for in-place updates, which the scheduler does not
//! decide. None has a maximum version, so the scheduler's own version never drops one. A pod that
//! requires no feature makes PreFilter Skip the plugin.
//!
//! Per release: v1.35's registry infers only `RestartAllContainersOnContainerExits`, v1.36's also
//! `UserNamespacesHostNetworkSupport`, v1.37's also `VolumeBindMountOptions`; v1.35's reason lists
//! the unsatisfied requirements (`ReleaseChanges::node_declared_features_*`). With the
//! `NodeDeclaredFeatures` gate off (v1.35's default) the plugin is not in the default profile, and
//! if a profile names it PreFilter Skips, as upstream's `enabled` field does.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, PodSpec};

use crate::framework::FeatureGates;
use crate::framework::cycle_state::{CycleState, StateKey};
use crate::framework::interface::{FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult};
use crate::framework::runtime::{Handle, PluginError};
use crate::framework::status::Status;
use crate::plugins::names;
use crate::snapshot::{NodeInfo, PodInfo};

/// The plugin's registry name.
pub(crate) const NAME: &str = names::NODE_DECLARED_FEATURES;

/// Filter reason when the node lacks a feature the pod requires (v1.36 and later).
pub(crate) const ERR_REASON_UNSATISFIED_REQUIREMENTS: &str = "node(s) didn't match Pod's required features";

/// Prefix of v1.35's Filter reason, followed by the unsatisfied requirements joined by `, `.
pub(crate) const ERR_REASON_UNSATISFIED_REQUIREMENTS_V1_35_PREFIX: &str =
    "node declared features check failed - unsatisfied requirements: ";

/// v1.35's Filter reason. Upstream walks a Go map, so with several missing features its order
/// is random; v1.35's registry can require only one feature of a pod, so there is one name.
pub(crate) fn err_reason_unsatisfied_requirements_v1_35(missing: FeatureSet) -> String {
    format!(
        "{ERR_REASON_UNSATISFIED_REQUIREMENTS_V1_35_PREFIX}{}",
        missing.names().join(", ")
    )
}

/// Feature names of the v1.37 registry, sorted bytewise as the Go feature mapper sorts them; a
/// feature's index is its bit in a [`FeatureSet`].
pub(crate) const KNOWN_FEATURES: [&str; 9] = [
    FEATURE_DRA_NODE_ALLOCATABLE_RESOURCES,
    FEATURE_DRA_OPTIONAL_NODE_OPERATIONS,
    FEATURE_EXTEND_WEBSOCKETS_TO_KUBELET,
    FEATURE_IPPR_POD_LEVEL_RESOURCES,
    FEATURE_IPPR_INIT_CONTAINERS,
    FEATURE_IPPR_MEMORY_BACKED_VOLUMES,
    FEATURE_RESTART_ALL_CONTAINERS,
    FEATURE_USER_NAMESPACES_HOST_NETWORK,
    FEATURE_VOLUME_BIND_MOUNT_OPTIONS,
];

/// DRA node allocatable resources.
pub(crate) const FEATURE_DRA_NODE_ALLOCATABLE_RESOURCES: &str = "DRANodeAllocatableResources";
/// DRA optional node operations.
pub(crate) const FEATURE_DRA_OPTIONAL_NODE_OPERATIONS: &str = "DRAOptionalNodeOperations";
/// WebSockets to the kubelet.
pub(crate) const FEATURE_EXTEND_WEBSOCKETS_TO_KUBELET: &str = "ExtendWebSocketsToKubelet";
/// In-place resize of pod-level resources.
pub(crate) const FEATURE_IPPR_POD_LEVEL_RESOURCES: &str = "InPlacePodLevelResourcesVerticalScaling";
/// In-place resize of non-sidecar init containers.
pub(crate) const FEATURE_IPPR_INIT_CONTAINERS: &str = "InPlacePodVerticalScalingInitContainers";
/// In-place resize of memory-backed emptyDir volumes.
pub(crate) const FEATURE_IPPR_MEMORY_BACKED_VOLUMES: &str = "InPlacePodVerticalScalingMemoryBackedVolumes";
/// The `RestartAllContainers` container restart rule action.
pub(crate) const FEATURE_RESTART_ALL_CONTAINERS: &str = "RestartAllContainersOnContainerExits";
/// Host networking in a user namespace.
pub(crate) const FEATURE_USER_NAMESPACES_HOST_NETWORK: &str = "UserNamespacesHostNetworkSupport";
/// `bindMountOptions` on volume mounts.
pub(crate) const FEATURE_VOLUME_BIND_MOUNT_OPTIONS: &str = "VolumeBindMountOptions";

/// A set of known features, one bit per index of [`KNOWN_FEATURES`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct FeatureSet(u32);

impl FeatureSet {
    fn with(self, feature: &str) -> Self {
        match KNOWN_FEATURES.iter().position(|f| *f == feature) {
            Some(i) => FeatureSet(self.0 | (1 << i)),
            None => self,
        }
    }

    /// True when no feature is in the set.
    pub(crate) fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// True when every feature of `self` is in `other`.
    pub(crate) fn is_subset(self, other: FeatureSet) -> bool {
        self.0 & !other.0 == 0
    }

    /// The features of `self` not in `other`.
    pub(crate) fn without(self, other: FeatureSet) -> FeatureSet {
        FeatureSet(self.0 & !other.0)
    }

    /// The feature names, in registry order.
    pub(crate) fn names(self) -> Vec<&'static str> {
        KNOWN_FEATURES
            .iter()
            .enumerate()
            .filter(|(i, _)| self.0 & (1 << i) != 0)
            .map(|(_, f)| *f)
            .collect()
    }
}

/// Go's `FeatureMapper.TryMap` of `node.status.declaredFeatures`: unknown names are ignored. Like Go
/// it walks the list as sorted (the kubelet publishes it sorted), so a known name that appears after
/// a greater one is not seen.
pub(crate) fn node_declared_features(node: &Node) -> FeatureSet {
    let declared = node
        .status
        .as_ref()
        .and_then(|s| s.declared_features.as_deref())
        .unwrap_or_default();
    let mut set = FeatureSet::default();
    let (mut i, mut j) = (0, 0);
    while i < declared.len() && j < KNOWN_FEATURES.len() {
        let (have, known) = (declared[i].as_str(), KNOWN_FEATURES[j]);
        if have == known {
            set = set.with(known);
            i += 1;
            j += 1;
        } else if have < known {
            i += 1;
        } else {
            j += 1;
        }
    }
    set
}

/// Which features the release's registry can infer for scheduling (v1.37's has all three).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InferredFeatures {
    /// `UserNamespacesHostNetworkSupport` (v1.36+).
    pub user_namespaces_host_network: bool,
    /// `VolumeBindMountOptions` (v1.37+).
    pub volume_bind_mount_options: bool,
}

impl InferredFeatures {
    /// v1.37's registry.
    pub(crate) const ALL: InferredFeatures = InferredFeatures {
        user_namespaces_host_network: true,
        volume_bind_mount_options: true,
    };

    /// The registry of the release `features` belong to.
    pub(crate) fn of(features: &FeatureGates) -> Self {
        InferredFeatures {
            user_namespaces_host_network: features
                .changes
                .node_declared_features_infers_user_namespaces_host_network,
            volume_bind_mount_options: features
                .changes
                .node_declared_features_infers_volume_bind_mount_options,
        }
    }
}

/// Go's `InferForPodScheduling` over the v1.37 registry: the features the pod needs from its node.
#[cfg(test)]
pub(crate) fn pod_required_features(spec: &PodSpec) -> FeatureSet {
    pod_required_features_of(spec, InferredFeatures::ALL)
}

/// Go's `InferForPodScheduling` over the registry `inferred` describes.
pub(crate) fn pod_required_features_of(spec: &PodSpec, inferred: InferredFeatures) -> FeatureSet {
    let mut set = FeatureSet::default();

    let restart_all = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .flat_map(|c| c.restart_policy_rules.iter().flatten())
        .any(|r| r.action == "RestartAllContainers");
    if restart_all {
        set = set.with(FEATURE_RESTART_ALL_CONTAINERS);
    }

    if inferred.user_namespaces_host_network
        && spec.host_network == Some(true)
        && spec.host_users == Some(false)
    {
        set = set.with(FEATURE_USER_NAMESPACES_HOST_NETWORK);
    }

    let has_bind_options = |mounts: Option<&Vec<k8s_openapi::api::core::v1::VolumeMount>>| {
        mounts
            .into_iter()
            .flatten()
            .any(|m| m.bind_mount_options.as_ref().is_some_and(|o| !o.is_empty()))
    };
    let bind_mount_options = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .any(|c| has_bind_options(c.volume_mounts.as_ref()))
        || spec
            .ephemeral_containers
            .iter()
            .flatten()
            .any(|c| has_bind_options(c.volume_mounts.as_ref()));
    if inferred.volume_bind_mount_options && bind_mount_options {
        set = set.with(FEATURE_VOLUME_BIND_MOUNT_OPTIONS);
    }
    set
}

/// The features the pod requires, computed once in PreFilter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PreFilterState {
    /// Required features (never empty: PreFilter Skips otherwise).
    pub required: FeatureSet,
}

/// Where PreFilter leaves its state.
pub(crate) const PRE_FILTER_STATE_KEY: StateKey<PreFilterState> =
    StateKey::new("PreFilterNodeDeclaredFeatures");

/// The NodeDeclaredFeatures plugin.
#[derive(Debug)]
pub(crate) struct NodeDeclaredFeatures {
    /// The `NodeDeclaredFeatures` gate: off, PreFilter Skips.
    enabled: bool,
    /// The features the release's registry infers.
    inferred: InferredFeatures,
    /// The release's reason lists the unsatisfied requirements (v1.35).
    reason_lists_requirements: bool,
}

impl Default for NodeDeclaredFeatures {
    /// v1.37.1's plugin.
    fn default() -> Self {
        NodeDeclaredFeatures {
            enabled: true,
            inferred: InferredFeatures::ALL,
            reason_lists_requirements: false,
        }
    }
}

impl Plugin for NodeDeclaredFeatures {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for NodeDeclaredFeatures {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        if !self.enabled {
            return (None, Status::skip());
        }
        let required = pod
            .pod
            .spec
            .as_ref()
            .map(|spec| pod_required_features_of(spec, self.inferred))
            .unwrap_or_default();
        if required.is_empty() {
            return (None, Status::skip());
        }
        state.write(&PRE_FILTER_STATE_KEY, PreFilterState { required });
        (None, Status::success())
    }
}

impl FilterPlugin for NodeDeclaredFeatures {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read(&PRE_FILTER_STATE_KEY) else {
            return Status::error(format!(
                "error reading {:?} from cycle-state: not found",
                PRE_FILTER_STATE_KEY.name()
            ));
        };
        let declared = node_declared_features(&node.node);
        if s.required.is_subset(declared) {
            Status::success()
        } else if self.reason_lists_requirements {
            Status::unresolvable(err_reason_unsatisfied_requirements_v1_35(
                s.required.without(declared),
            ))
        } else {
            Status::unresolvable(ERR_REASON_UNSATISFIED_REQUIREMENTS)
        }
    }
}

/// Builds the plugin (it takes no args).
pub(crate) fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Handle,
    features: &FeatureGates,
) -> Result<Arc<dyn Plugin>, PluginError> {
    Ok(Arc::new(NodeDeclaredFeatures {
        enabled: features.node_declared_features,
        inferred: InferredFeatures::of(features),
        reason_lists_requirements: features.changes.node_declared_features_reason_lists_requirements,
    }))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Container, ContainerRestartRule, EphemeralContainer, Pod, VolumeMount};

    use super::*;
    use crate::framework::status::Code;
    use crate::testing::{NodeBuilder, PodBuilder, node, pod};

    fn spec_of(b: PodBuilder) -> PodSpec {
        b.obj().spec.unwrap_or_default()
    }

    fn edit(f: impl FnOnce(&mut PodSpec)) -> PodBuilder {
        pod("p").with(|p: &mut Pod| {
            if let Some(spec) = p.spec.as_mut() {
                f(spec);
            }
        })
    }

    fn restart_rule(action: &str) -> Vec<ContainerRestartRule> {
        vec![ContainerRestartRule {
            action: action.into(),
            exit_codes: None,
        }]
    }

    fn bind_mount(options: Vec<&str>) -> Vec<VolumeMount> {
        vec![VolumeMount {
            name: "v".into(),
            mount_path: "/v".into(),
            bind_mount_options: Some(options.into_iter().map(String::from).collect()),
            ..Default::default()
        }]
    }

    fn declaring(features: &[&str]) -> NodeBuilder {
        let features: Vec<String> = features.iter().map(|s| s.to_string()).collect();
        node("n1").with(move |n| {
            n.status.get_or_insert_with(Default::default).declared_features = Some(features);
        })
    }

    #[test]
    fn registry_is_sorted_like_the_go_mapper() {
        let mut sorted = KNOWN_FEATURES;
        sorted.sort_unstable();
        assert_eq!(sorted, KNOWN_FEATURES);
    }

    #[test]
    fn infers_what_a_pod_requires() {
        let cases: Vec<(&str, PodBuilder, Vec<&str>)> = vec![
            ("plain pod", pod("p"), vec![]),
            (
                "restart-all rule on a container",
                edit(|s| s.containers[0].restart_policy_rules = Some(restart_rule("RestartAllContainers"))),
                vec![FEATURE_RESTART_ALL_CONTAINERS],
            ),
            (
                "restart-all rule on an init container",
                edit(|s| {
                    s.init_containers = Some(vec![Container {
                        name: "i".into(),
                        restart_policy_rules: Some(restart_rule("RestartAllContainers")),
                        ..Default::default()
                    }])
                }),
                vec![FEATURE_RESTART_ALL_CONTAINERS],
            ),
            (
                "other restart action",
                edit(|s| s.containers[0].restart_policy_rules = Some(restart_rule("Restart"))),
                vec![],
            ),
            (
                "host network in a user namespace",
                edit(|s| {
                    s.host_network = Some(true);
                    s.host_users = Some(false);
                }),
                vec![FEATURE_USER_NAMESPACES_HOST_NETWORK],
            ),
            (
                "host network alone",
                edit(|s| s.host_network = Some(true)),
                vec![],
            ),
            (
                "user namespace alone",
                edit(|s| s.host_users = Some(false)),
                vec![],
            ),
            (
                "bind mount options on a container",
                edit(|s| s.containers[0].volume_mounts = Some(bind_mount(vec!["rro"]))),
                vec![FEATURE_VOLUME_BIND_MOUNT_OPTIONS],
            ),
            (
                "bind mount options on an ephemeral container",
                edit(|s| {
                    s.ephemeral_containers = Some(vec![EphemeralContainer {
                        name: "debug".into(),
                        volume_mounts: Some(bind_mount(vec!["rro"])),
                        ..Default::default()
                    }])
                }),
                vec![FEATURE_VOLUME_BIND_MOUNT_OPTIONS],
            ),
            (
                "empty bind mount options",
                edit(|s| s.containers[0].volume_mounts = Some(bind_mount(vec![]))),
                vec![],
            ),
            (
                "several at once, in registry order",
                edit(|s| {
                    s.containers[0].volume_mounts = Some(bind_mount(vec!["rro"]));
                    s.containers[0].restart_policy_rules = Some(restart_rule("RestartAllContainers"));
                }),
                vec![FEATURE_RESTART_ALL_CONTAINERS, FEATURE_VOLUME_BIND_MOUNT_OPTIONS],
            ),
        ];
        for (name, p, want) in cases {
            assert_eq!(pod_required_features(&spec_of(p)).names(), want, "{name}");
        }
    }

    #[test]
    fn prefilter_skips_pods_that_require_nothing() {
        let mut state = CycleState::new();
        let (result, s) = NodeDeclaredFeatures::default().pre_filter(&mut state, &pod("p").info(), &[]);
        assert!(result.is_none());
        assert!(s.is_skip());
        assert!(state.read(&PRE_FILTER_STATE_KEY).is_none());
    }

    #[test]
    fn filter_needs_every_required_feature_declared() {
        let needs_restart =
            || edit(|s| s.containers[0].restart_policy_rules = Some(restart_rule("RestartAllContainers")));
        let needs_both = || {
            edit(|s| {
                s.containers[0].restart_policy_rules = Some(restart_rule("RestartAllContainers"));
                s.host_network = Some(true);
                s.host_users = Some(false);
            })
        };
        let cases: Vec<(&str, PodBuilder, NodeBuilder, bool)> = vec![
            (
                "declared",
                needs_restart(),
                declaring(&[FEATURE_RESTART_ALL_CONTAINERS]),
                true,
            ),
            ("nothing declared", needs_restart(), node("n1"), false),
            (
                "other feature declared",
                needs_restart(),
                declaring(&[FEATURE_VOLUME_BIND_MOUNT_OPTIONS]),
                false,
            ),
            (
                "unknown names are ignored",
                needs_restart(),
                declaring(&["AFutureFeature", FEATURE_RESTART_ALL_CONTAINERS, "ZFeature"]),
                true,
            ),
            (
                "one of two declared",
                needs_both(),
                declaring(&[FEATURE_RESTART_ALL_CONTAINERS]),
                false,
            ),
            (
                "both declared",
                needs_both(),
                declaring(&[
                    FEATURE_RESTART_ALL_CONTAINERS,
                    FEATURE_USER_NAMESPACES_HOST_NETWORK,
                ]),
                true,
            ),
            (
                "an unsorted list hides earlier names, as in Go",
                needs_restart(),
                declaring(&[FEATURE_VOLUME_BIND_MOUNT_OPTIONS, FEATURE_RESTART_ALL_CONTAINERS]),
                false,
            ),
        ];
        for (name, p, n, fits) in cases {
            let p = p.info();
            let mut state = CycleState::new();
            let (_, pre) = NodeDeclaredFeatures::default().pre_filter(&mut state, &p, &[]);
            assert!(pre.is_success(), "{name}: {pre:?}");
            let s = NodeDeclaredFeatures::default().filter(&state, &p, &n.info_with(vec![]));
            if fits {
                assert!(s.is_success(), "{name}: {s:?}");
            } else {
                assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{name}");
                assert_eq!(
                    s.reasons(),
                    [ERR_REASON_UNSATISFIED_REQUIREMENTS.to_string()],
                    "{name}"
                );
            }
        }
    }

    /// Per release: what a pod requires (v1.35 infers only the restart rule, v1.36 adds host
    /// network in a user namespace, v1.37 bind mount options), v1.35's reason naming the missing
    /// feature, and v1.35's gate (off by default) making PreFilter Skip.
    #[test]
    fn inference_and_reason_follow_the_release() {
        use crate::features::KubeVersion;
        let handle = Handle {
            snapshot: Arc::new(crate::testing::snapshot(vec![], vec![])),
        };
        let restart =
            || edit(|s| s.containers[0].restart_policy_rules = Some(restart_rule("RestartAllContainers")));
        let host_network = || {
            edit(|s| {
                s.host_network = Some(true);
                s.host_users = Some(false);
            })
        };
        let bind = || edit(|s| s.containers[0].volume_mounts = Some(bind_mount(vec!["rro"])));
        let v1_35 = || FeatureGates {
            node_declared_features: true,
            ..FeatureGates::for_version(KubeVersion::new(35, 4))
        };
        let later = ERR_REASON_UNSATISFIED_REQUIREMENTS.to_string();
        // (release, pod, Filter reason on a node declaring nothing; None: PreFilter Skips)
        let cases: Vec<(&str, FeatureGates, PodBuilder, Option<String>)> = vec![
            (
                "v1.35 restart rule",
                v1_35(),
                restart(),
                Some(format!(
                    "node declared features check failed - unsatisfied requirements: {FEATURE_RESTART_ALL_CONTAINERS}"
                )),
            ),
            ("v1.35 host network", v1_35(), host_network(), None),
            ("v1.35 bind mount options", v1_35(), bind(), None),
            (
                "v1.35 gate off (default)",
                FeatureGates::for_version(KubeVersion::new(35, 4)),
                restart(),
                None,
            ),
            (
                "v1.36 restart rule",
                FeatureGates::for_version(KubeVersion::new(36, 3)),
                restart(),
                Some(later.clone()),
            ),
            (
                "v1.36 host network",
                FeatureGates::for_version(KubeVersion::new(36, 3)),
                host_network(),
                Some(later.clone()),
            ),
            (
                "v1.36 bind mount options",
                FeatureGates::for_version(KubeVersion::new(36, 3)),
                bind(),
                None,
            ),
            (
                "v1.37 bind mount options",
                FeatureGates::for_version(KubeVersion::new(37, 1)),
                bind(),
                Some(later.clone()),
            ),
        ];
        for (name, features, p, want) in cases {
            let plugin = new(None, &handle, &features).expect("plugin");
            let p = p.info();
            let mut state = CycleState::new();
            let (_, pre) = plugin.as_pre_filter().unwrap().pre_filter(&mut state, &p, &[]);
            let Some(reason) = want else {
                assert!(pre.is_skip(), "{name}: {pre:?}");
                continue;
            };
            assert!(pre.is_success(), "{name}: {pre:?}");
            let s = plugin
                .as_filter()
                .unwrap()
                .filter(&state, &p, &node("n1").info_with(vec![]));
            assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{name}");
            assert_eq!(s.reasons(), [reason], "{name}");
        }
    }
}
