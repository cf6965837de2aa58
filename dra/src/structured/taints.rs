//! Device taints and a request's tolerations (`taintPreventsAllocation`, `taintTolerated`,
//! `resourceclaim.ToleratesTaint`): a NoSchedule or NoExecute taint blocks allocation unless
//! tolerated; other effects (None, unknown ones) never do.

use k8s_openapi::api::resource::v1::{Device, DeviceTaint, DeviceToleration};

/// `ToleratesTaint`: an empty effect or key matches any; operator `Exists` matches any value,
/// `Equal` (or empty) the same value, any other operator nothing.
pub fn tolerates(toleration: &DeviceToleration, taint: &DeviceTaint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or_default() {
        "" | "Equal" => {
            toleration.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default()
        }
        "Exists" => true,
        _ => false,
    }
}

/// `taintPreventsAllocation`: some NoSchedule/NoExecute taint of the device is not tolerated.
pub fn taint_prevents_allocation(device: &Device, tolerations: Option<&Vec<DeviceToleration>>) -> bool {
    device.taints.iter().flatten().any(|taint| {
        matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute")
            && !tolerations.into_iter().flatten().any(|t| tolerates(t, taint))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: Option<&str>, effect: &str) -> DeviceTaint {
        DeviceTaint {
            key: key.into(),
            value: value.map(Into::into),
            effect: effect.into(),
            time_added: None,
        }
    }

    fn toleration(
        key: &str,
        op: Option<&str>,
        value: Option<&str>,
        effect: Option<&str>,
    ) -> DeviceToleration {
        DeviceToleration {
            key: Some(key.into()).filter(|k: &String| !k.is_empty()),
            operator: op.map(Into::into),
            value: value.map(Into::into),
            effect: effect.map(Into::into),
            toleration_seconds: None,
        }
    }

    #[test]
    fn toleration_operators() {
        let t = taint("k", Some("v"), "NoSchedule");
        assert!(
            tolerates(&toleration("k", None, Some("v"), None), &t),
            "empty operator is Equal"
        );
        assert!(tolerates(
            &toleration("k", Some("Equal"), Some("v"), Some("NoSchedule")),
            &t
        ));
        assert!(!tolerates(&toleration("k", Some("Equal"), Some("w"), None), &t));
        assert!(tolerates(&toleration("k", Some("Exists"), None, None), &t));
        assert!(
            tolerates(&toleration("", Some("Exists"), None, None), &t),
            "empty key: any key"
        );
        assert!(!tolerates(
            &toleration("k", Some("Exists"), None, Some("NoExecute")),
            &t
        ));
        assert!(!tolerates(&toleration("other", Some("Exists"), None, None), &t));
        assert!(!tolerates(&toleration("k", Some("Gt"), Some("v"), None), &t));
    }

    #[test]
    fn only_known_effects_block() {
        let device = |effect: &str| Device {
            name: "d".into(),
            taints: Some(vec![taint("k", None, effect)]),
            ..Default::default()
        };
        assert!(taint_prevents_allocation(&device("NoSchedule"), None));
        assert!(taint_prevents_allocation(&device("NoExecute"), None));
        assert!(!taint_prevents_allocation(&device("None"), None));
        assert!(!taint_prevents_allocation(&device("Whatever"), None));
        let tolerated = vec![toleration("k", Some("Exists"), None, None)];
        assert!(!taint_prevents_allocation(&device("NoExecute"), Some(&tolerated)));
    }
}
