//! PodTopologySpread: spreads pods matching a selector evenly across topology domains.
//!
//! `DoNotSchedule` constraints are enforced in PreFilter/Filter (skew against the global minimum, with
//! `minDomains` and node inclusion policies); `ScheduleAnyway` constraints rank nodes in
//! PreScore/Score/NormalizeScore. Pods without constraints get the configured default constraints (by
//! default the system ones, soft only), selecting the pods of the same Service/RC/RS/StatefulSet.

mod common;
mod filtering;
mod scoring;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, TopologySpreadConstraint};
use serde::Deserialize;

use crate::framework::FeatureGates;
use crate::framework::interface::{FilterPlugin, Plugin, PreFilterPlugin, PreScorePlugin, ScorePlugin};
use crate::framework::runtime::{Handle, PluginError, decode_args};
use crate::plugins::names;
use crate::snapshot::{PodInfo, Snapshot};

use common::RequiredNodeAffinity;
pub(crate) use common::{LABEL_HOSTNAME, LABEL_TOPOLOGY_ZONE, SpreadConstraint, SpreadGates};
pub(crate) use filtering::{SpreadCounts, pre_filter_counts};

/// The plugin's registry name.
pub(crate) const NAME: &str = names::POD_TOPOLOGY_SPREAD;

/// Filter: a `DoNotSchedule` constraint would be violated on the node.
pub(crate) const ERR_REASON_CONSTRAINTS_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints";
/// Filter: the node lacks a constraint's topology key.
pub(crate) const ERR_REASON_NODE_LABEL_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

/// `defaultingType: System`: the built-in default constraints.
pub(crate) const SYSTEM_DEFAULTING: &str = "System";
/// `defaultingType: List`: the constraints given in `defaultConstraints`.
pub(crate) const LIST_DEFAULTING: &str = "List";

/// The constraints applied to pods without their own when `defaultingType` is System.
pub(crate) fn system_default_constraints() -> Vec<TopologySpreadConstraint> {
    [(LABEL_HOSTNAME, 3), (LABEL_TOPOLOGY_ZONE, 5)]
        .into_iter()
        .map(|(key, max_skew)| TopologySpreadConstraint {
            topology_key: key.to_string(),
            when_unsatisfiable: common::SCHEDULE_ANYWAY.to_string(),
            max_skew,
            ..Default::default()
        })
        .collect()
}

/// `PodTopologySpreadArgs`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct PodTopologySpreadArgs {
    /// Constraints for pods without their own (List defaulting only).
    pub default_constraints: Vec<TopologySpreadConstraint>,
    /// "System" (default) or "List".
    pub defaulting_type: String,
}

impl Default for PodTopologySpreadArgs {
    fn default() -> Self {
        PodTopologySpreadArgs {
            default_constraints: Vec::new(),
            defaulting_type: SYSTEM_DEFAULTING.to_string(),
        }
    }
}

/// Go's `ValidatePodTopologySpreadArgs`, with field-path messages like apimachinery's.
fn validate_args(args: &PodTopologySpreadArgs) -> Result<(), String> {
    let mut errs: Vec<String> = Vec::new();
    match args.defaulting_type.as_str() {
        SYSTEM_DEFAULTING if !args.default_constraints.is_empty() => errs.push(format!(
            "defaultingType: Invalid value: {:?}: when .defaultConstraints are not empty",
            args.defaulting_type
        )),
        SYSTEM_DEFAULTING | LIST_DEFAULTING => {}
        other => errs.push(format!(
            "defaultingType: Unsupported value: {other:?}: supported values: \"System\", \"List\""
        )),
    }
    for (i, c) in args.default_constraints.iter().enumerate() {
        let p = format!("defaultConstraints[{i}]");
        if c.max_skew <= 0 {
            errs.push(format!(
                "{p}.maxSkew: Invalid value: {}: not in valid range (0, inf)",
                c.max_skew
            ));
        }
        if c.topology_key.is_empty() {
            errs.push(format!("{p}.topologyKey: Required value: can not be empty"));
        }
        match c.when_unsatisfiable.as_str() {
            "" => errs.push(format!("{p}.whenUnsatisfiable: Required value: can not be empty")),
            common::DO_NOT_SCHEDULE | common::SCHEDULE_ANYWAY => {}
            other => errs.push(format!(
                "{p}.whenUnsatisfiable: Unsupported value: {other:?}: supported values: \"DoNotSchedule\", \"ScheduleAnyway\""
            )),
        }
        if c.label_selector.is_some() {
            errs.push(format!(
                "{p}.labelSelector: Forbidden: constraint must not define a selector, as they deduced for each pod"
            ));
        }
        let repeated = args.default_constraints[..i]
            .iter()
            .any(|o| o.topology_key == c.topology_key && o.when_unsatisfiable == c.when_unsatisfiable);
        if repeated {
            errs.push(format!(
                "{p}: Duplicate value: \"{{{}, {}}}\"",
                c.topology_key, c.when_unsatisfiable
            ));
        }
    }
    match errs.len() {
        0 => Ok(()),
        1 => Err(errs.remove(0)),
        _ => Err(format!("[{}]", errs.join(", "))),
    }
}

/// The PodTopologySpread plugin.
#[derive(Debug)]
pub(crate) struct PodTopologySpread {
    snapshot: Arc<Snapshot>,
    default_constraints: Vec<TopologySpreadConstraint>,
    /// True with System defaulting: nodes without the zone label still take part in hostname spreading.
    system_defaulted: bool,
    /// The gates it was built with.
    gates: SpreadGates,
}

impl PodTopologySpread {
    /// Go's `matchNodeInclusionPolicies` with the plugin's comparison-operators gate.
    fn counts_node(
        &self,
        c: &SpreadConstraint,
        pod: &Pod,
        node: &Node,
        required: &RequiredNodeAffinity,
    ) -> bool {
        c.match_node_inclusion_policies(pod, node, required, self.gates.taint_comparison_operators)
    }
}

/// Builds the plugin from `PodTopologySpreadArgs`.
pub(crate) fn new(
    args: Option<&serde_json::Value>,
    handle: &Handle,
    features: &FeatureGates,
) -> Result<Arc<dyn Plugin>, PluginError> {
    Ok(Arc::new(build(args, handle, features)?))
}

fn build(
    args: Option<&serde_json::Value>,
    handle: &Handle,
    features: &FeatureGates,
) -> Result<PodTopologySpread, PluginError> {
    let mut args: PodTopologySpreadArgs = decode_args(NAME, args)?;
    if args.defaulting_type.is_empty() {
        args.defaulting_type = SYSTEM_DEFAULTING.to_string();
    }
    validate_args(&args).map_err(|message| PluginError::InvalidArgs {
        plugin: NAME.to_string(),
        message,
    })?;
    let system_defaulted = args.defaulting_type == SYSTEM_DEFAULTING;
    let default_constraints = if system_defaulted {
        system_default_constraints()
    } else {
        args.default_constraints
    };
    Ok(PodTopologySpread {
        snapshot: handle.snapshot.clone(),
        default_constraints,
        system_defaulted,
        gates: SpreadGates::from_features(features),
    })
}

/// Go's `getConstraints` as the queueing hints call it: the pod's `DoNotSchedule` constraints, or the
/// profile's hard default constraints (`args` are its PodTopologySpreadArgs) for a pod without any,
/// read as the plugin built with `features` reads them.
pub(crate) fn hard_constraints_for_hints(
    args: Option<&serde_json::Value>,
    handle: &Handle,
    features: &FeatureGates,
    pod: &Pod,
) -> Result<Vec<SpreadConstraint>, String> {
    build(args, handle, features)
        .map_err(|e| e.to_string())?
        .constraints_for(pod, common::DO_NOT_SCHEDULE)
}

/// Go's `involvedInTopologySpreading`: a placed or nominated pod of the same namespace.
fn involved_in_topology_spreading(incoming: &PodInfo, with_spreading: &PodInfo) -> bool {
    if incoming.node_name().is_empty() && incoming.nominated_node_name().is_empty() {
        return false;
    }
    incoming.namespace() == with_spreading.namespace()
}

/// Go's `isSchedulableAfterAssignedPodChange` for an assigned pod added (`added`) or deleted
/// (`deleted`): true (Queue) when that pod takes part in the spreading of `pod` and its labels match
/// one of `pod`'s hard constraints ([`hard_constraints_for_hints`]); an error there is Queue too.
pub(crate) fn is_schedulable_after_assigned_pod_change(
    pod: &PodInfo,
    constraints: &Result<Vec<SpreadConstraint>, String>,
    added: Option<&PodInfo>,
    deleted: Option<&PodInfo>,
) -> bool {
    let changed = match (added, deleted) {
        (Some(p), _) | (None, Some(p)) => p,
        (None, None) => return false,
    };
    if !involved_in_topology_spreading(changed, pod) {
        return false;
    }
    match constraints {
        Err(_) => true,
        Ok(constraints) => constraints
            .iter()
            .any(|c| c.selector.matches_opt(changed.labels())),
    }
}

impl Plugin for PodTopologySpread {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

#[cfg(test)]
pub(crate) mod test_util {
    //! Builders shared by this plugin's tests.

    use k8s_openapi::api::core::v1::{Pod, TopologySpreadConstraint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    use crate::testing::PodBuilder;

    /// A constraint selecting `key: value` pods (or every pod with `match_labels` empty).
    pub(crate) fn tsc(
        max_skew: i32,
        topology_key: &str,
        action: &str,
        match_labels: &[(&str, &str)],
    ) -> TopologySpreadConstraint {
        TopologySpreadConstraint {
            max_skew,
            topology_key: topology_key.into(),
            when_unsatisfiable: action.into(),
            label_selector: Some(LabelSelector {
                match_labels: Some(
                    match_labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// Adds constraints to a pod.
    pub(crate) fn spread(p: PodBuilder, constraints: Vec<TopologySpreadConstraint>) -> Pod {
        p.with(|p| {
            if let Some(spec) = p.spec.as_mut() {
                spec.topology_spread_constraints = Some(constraints);
            }
        })
        .obj()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::snapshot;
    use serde_json::json;

    fn handle() -> Handle {
        Handle {
            snapshot: Arc::new(snapshot(vec![], vec![])),
        }
    }

    #[test]
    fn args_defaulting_and_validation() {
        let cases: Vec<(&str, Option<serde_json::Value>, Result<(), &str>)> = vec![
            ("no args: system defaulting", None, Ok(())),
            (
                "empty defaulting type is System",
                Some(json!({"defaultingType": ""})),
                Ok(()),
            ),
            (
                "list with constraints",
                Some(json!({"defaultingType": "List", "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
                ]})),
                Ok(()),
            ),
            (
                "system with constraints",
                Some(json!({"defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
                ]})),
                Err("defaultingType: Invalid value: \"System\": when .defaultConstraints are not empty"),
            ),
            (
                "unknown defaulting type",
                Some(json!({"defaultingType": "Sometimes"})),
                Err(
                    "defaultingType: Unsupported value: \"Sometimes\": supported values: \"System\", \"List\"",
                ),
            ),
            (
                "bad max skew",
                Some(json!({"defaultingType": "List", "defaultConstraints": [
                    {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
                ]})),
                Err("defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf)"),
            ),
            (
                "selector forbidden",
                Some(json!({"defaultingType": "List", "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {}}
                ]})),
                Err(
                    "defaultConstraints[0].labelSelector: Forbidden: constraint must not define a selector, as they deduced for each pod",
                ),
            ),
            (
                "duplicates and empty action",
                Some(json!({"defaultingType": "List", "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
                    {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
                    {"maxSkew": 2, "topologyKey": "", "whenUnsatisfiable": ""}
                ]})),
                Err(
                    "[defaultConstraints[1]: Duplicate value: \"{zone, DoNotSchedule}\", defaultConstraints[2].topologyKey: Required value: can not be empty, defaultConstraints[2].whenUnsatisfiable: Required value: can not be empty]",
                ),
            ),
        ];
        for (name, args, want) in cases {
            let got = new(
                args.as_ref(),
                &handle(),
                &crate::framework::FeatureGates::default(),
            )
            .map(|_| ());
            match (got, want) {
                (Ok(()), Ok(())) => {}
                (Err(PluginError::InvalidArgs { plugin, message }), Err(w)) => {
                    assert_eq!(plugin, NAME, "{name}");
                    assert_eq!(message, w, "{name}");
                }
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn system_defaults_are_hostname_3_and_zone_5_soft() {
        let d = system_default_constraints();
        let got: Vec<_> = d
            .iter()
            .map(|c| (c.topology_key.as_str(), c.max_skew, c.when_unsatisfiable.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("kubernetes.io/hostname", 3, "ScheduleAnyway"),
                ("topology.kubernetes.io/zone", 5, "ScheduleAnyway")
            ]
        );
    }
}
