//! Taint/toleration matching, as `k8s.io/api/core/v1` (`Toleration.ToleratesTaint`) and
//! component-helpers `scheduling/corev1` (`TolerationsTolerateTaint`, `FindMatchingUntoleratedTaint`)
//! define it. TaintToleration, NodeUnschedulable and preemption all decide with these.
//!
//! Whether `Lt`/`Gt` tolerations compare numbers is the `TaintTolerationComparisonOperators` gate
//! (alpha, off in v1.37.1): upstream's helpers take it as their last argument, and so do these; each
//! caller passes `FeatureGates::taint_toleration_comparison_operators` of the gates it was given.

use k8s_openapi::api::core::v1::{Node, Pod, Taint, Toleration};

/// The taint key the node controller mirrors `spec.unschedulable` with.
pub(crate) const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
/// Effect: new pods must tolerate the taint to be scheduled.
pub(crate) const EFFECT_NO_SCHEDULE: &str = "NoSchedule";
/// Effect: the scheduler avoids the node for pods that do not tolerate the taint.
pub(crate) const EFFECT_PREFER_NO_SCHEDULE: &str = "PreferNoSchedule";
/// Effect: pods that do not tolerate the taint are evicted, and never scheduled.
pub(crate) const EFFECT_NO_EXECUTE: &str = "NoExecute";

/// The taints of a node (empty when unset).
pub fn node_taints(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
}

/// The tolerations of a pod (empty when unset).
pub fn pod_tolerations(pod: &Pod) -> &[Toleration] {
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default()
}

/// `Toleration.ToleratesTaint`: an empty effect or key is a wildcard (an empty key is only valid with
/// `Exists`, which the API server enforces); the operator defaults to `Equal`. `Lt`/`Gt` tolerate
/// nothing unless `enable_comparison_operators` (the `TaintTolerationComparisonOperators` gate).
pub(crate) fn tolerates(toleration: &Toleration, taint: &Taint, enable_comparison_operators: bool) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or("");
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or("");
    if !key.is_empty() && key != taint.key {
        return false;
    }
    let toleration_value = toleration.value.as_deref().unwrap_or("");
    let taint_value = taint.value.as_deref().unwrap_or("");
    match toleration.operator.as_deref().unwrap_or("") {
        "" | "Equal" => toleration_value == taint_value,
        "Exists" => true,
        op @ ("Lt" | "Gt") if enable_comparison_operators => {
            let (Some(limit), Some(actual)) = (parse_decimal(toleration_value), parse_decimal(taint_value))
            else {
                return false;
            };
            if op == "Lt" {
                actual < limit
            } else {
                actual > limit
            }
        }
        _ => false,
    }
}

/// apimachinery's `IsDecimalInteger` + `ParseInt`: an optional `-`, then `0` alone or digits without
/// a leading zero (so "+1", "01" and "-0" are rejected), within i64.
fn parse_decimal(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    let first = *digits.as_bytes().first()?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if first == b'0' && (digits.len() > 1 || digits.len() != s.len()) {
        return None;
    }
    s.parse().ok()
}

/// `TolerationsTolerateTaint`: some toleration tolerates the taint.
pub fn tolerations_tolerate_taint(
    tolerations: &[Toleration],
    taint: &Taint,
    enable_comparison_operators: bool,
) -> bool {
    tolerations
        .iter()
        .any(|t| tolerates(t, taint, enable_comparison_operators))
}

/// `FindMatchingUntoleratedTaint`: the first taint accepted by `filter` that no toleration tolerates.
pub(crate) fn find_matching_untolerated_taint<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    filter: impl Fn(&Taint) -> bool,
    enable_comparison_operators: bool,
) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| filter(t))
        .find(|t| !tolerations_tolerate_taint(tolerations, t, enable_comparison_operators))
}

/// `DoNotScheduleTaintsFilterFunc`: only NoSchedule and NoExecute taints keep pods off a node.
pub fn do_not_schedule_taints_filter(taint: &Taint) -> bool {
    taint.effect == EFFECT_NO_SCHEDULE || taint.effect == EFFECT_NO_EXECUTE
}

/// Who owns a taint Kubernetes itself puts on nodes (control plane, node conditions and cordon, cloud
/// initialisation), or None for a user's taint. The one rule for every command: explain's hints and triage's fixes never
/// propose tolerating such a taint, and triage's root cause counts a rejection by one as the
/// cluster's background.
pub fn system_taint_owner(key: &str) -> Option<&'static str> {
    if key.starts_with("node.kubernetes.io/") {
        Some("node condition")
    } else if key.starts_with("node.cloudprovider.kubernetes.io/") {
        Some("cloud provider")
    } else if key == "node-role.kubernetes.io/control-plane" || key == "node-role.kubernetes.io/master" {
        Some("control plane")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::FeatureGates;
    use crate::testing::{taint, toleration};

    #[test]
    fn toleration_matching() {
        let cases = [
            (
                "equal matches",
                toleration("k", "Equal", "v", "NoSchedule"),
                taint("k", "v", "NoSchedule"),
                true,
            ),
            (
                "default operator is Equal",
                toleration("k", "", "v", "NoSchedule"),
                taint("k", "v", "NoSchedule"),
                true,
            ),
            (
                "equal value differs",
                toleration("k", "Equal", "w", "NoSchedule"),
                taint("k", "v", "NoSchedule"),
                false,
            ),
            (
                "empty value equals absent",
                toleration("k", "Equal", "", "NoSchedule"),
                taint("k", "", "NoSchedule"),
                true,
            ),
            (
                "exists ignores value",
                toleration("k", "Exists", "", "NoSchedule"),
                taint("k", "v", "NoSchedule"),
                true,
            ),
            (
                "effect differs",
                toleration("k", "Exists", "", "NoExecute"),
                taint("k", "v", "NoSchedule"),
                false,
            ),
            (
                "empty effect matches all",
                toleration("k", "Exists", "", ""),
                taint("k", "v", "NoExecute"),
                true,
            ),
            (
                "key differs",
                toleration("j", "Exists", "", ""),
                taint("k", "v", "NoSchedule"),
                false,
            ),
            (
                "empty key with Exists matches all",
                toleration("", "Exists", "", ""),
                taint("k", "v", "NoSchedule"),
                true,
            ),
            (
                "unknown operator",
                toleration("k", "Near", "v", ""),
                taint("k", "v", "NoSchedule"),
                false,
            ),
            (
                "Gt is off by default",
                toleration("k", "Gt", "1", ""),
                taint("k", "5", "NoSchedule"),
                false,
            ),
        ];
        let gate = FeatureGates::v1_37().taint_toleration_comparison_operators;
        for (name, tol, t, want) in cases {
            assert_eq!(tolerates(&tol, &t, gate), want, "{name}");
        }
    }

    #[test]
    fn comparison_operators_when_enabled() {
        let cases = [
            ("Gt greater", "Gt", "1", "5", true),
            ("Gt equal", "Gt", "5", "5", false),
            ("Lt smaller", "Lt", "10", "5", true),
            ("Lt negative", "Lt", "0", "-3", true),
            ("leading zero rejected", "Gt", "1", "05", false),
            ("plus sign rejected", "Gt", "1", "+5", false),
            ("minus zero rejected", "Lt", "1", "-0", false),
            ("non-numeric", "Gt", "1", "five", false),
            ("overflow", "Gt", "1", "99999999999999999999", false),
        ];
        for (name, op, tol_value, taint_value, want) in cases {
            let tol = toleration("k", op, tol_value, "NoSchedule");
            let t = taint("k", taint_value, "NoSchedule");
            assert_eq!(tolerates(&tol, &t, true), want, "{name}");
            // With the gate off (v1.37.1's default) the same toleration tolerates nothing.
            assert!(!tolerates(&tol, &t, false), "{name}: gate off");
        }
    }

    #[test]
    fn first_untolerated_do_not_schedule_taint() {
        let taints = vec![
            taint("soft", "", "PreferNoSchedule"),
            taint("a", "1", "NoSchedule"),
            taint("b", "2", "NoExecute"),
        ];
        let none: Vec<Toleration> = vec![];
        let found = find_matching_untolerated_taint(&taints, &none, do_not_schedule_taints_filter, false);
        assert_eq!(found.map(|t| t.key.as_str()), Some("a"));

        let tol_a = vec![toleration("a", "Exists", "", "")];
        let found = find_matching_untolerated_taint(&taints, &tol_a, do_not_schedule_taints_filter, false);
        assert_eq!(found.map(|t| t.key.as_str()), Some("b"));

        let all = vec![toleration("", "Exists", "", "")];
        assert!(
            find_matching_untolerated_taint(&taints, &all, do_not_schedule_taints_filter, false).is_none()
        );
    }
}
